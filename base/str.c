/*
 * str.c — the growable string (str.h).
 */
#include "base/str.h"

#include "base/alloc.h"
#include "base/json.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf_str_reserve(sf_str *b, size_t n)
{
    if (n > SIZE_MAX - b->len - 1)
        sf_oom(SIZE_MAX);
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    b->s = sf_realloc(b->s, cap);
    b->cap = cap;
}

void sf_str_catn(sf_str *b, const char *s, size_t n)
{
    sf_str_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sf_str_cat(sf_str *b, const char *s)
{
    sf_str_catn(b, s, strlen(s));
}

void sf_str_catf(sf_str *b, const char *fmt, ...)
{
    /* Formatted straight into the room there is; again only when the text
     * did not fit, into room made for it. */
    if (b->cap - b->len < 64)
        sf_str_reserve(b, 64);
    size_t room = b->cap - b->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s + b->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->s[b->len] = '\0';
        return;
    }
    if ((size_t)n >= room) {
        sf_str_reserve(b, (size_t)n);
        va_start(ap, fmt);
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void sf_str_cat_json(sf_str *b, const char *s)
{
    /* Each byte takes at most six (\u00XX), plus the two quotes. */
    size_t worst = 6 * strlen(s) + 2;
    sf_str_reserve(b, worst);
    b->len += sf_json_quote(b->s + b->len, worst + 1, s);
}

void sf_str_cat_number(sf_str *b, double v)
{
    if (v != v || v > 1.7e308 || v < -1.7e308)
        sf_str_cat(b, "null");
    else
        sf_str_catf(b, "%.17g", v);
}

void sf_str_clear(sf_str *b)
{
    b->len = 0;
    if (b->s != NULL)
        b->s[0] = '\0';
}

char *sf_str_take(sf_str *b)
{
    char *s = b->s != NULL ? b->s : sf_strdup("");
    *b = (sf_str)SF_STR_INIT;
    return s;
}

void sf_str_free(sf_str *b)
{
    free(b->s);
    *b = (sf_str)SF_STR_INIT;
}

void sf_one_line(char *out, size_t cap, const char *text)
{
    size_t n = 0;
    bool space = false;
    if (cap == 0)
        return;
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0' && n + 1 < cap; p++) {
        if (isspace(*p)) {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < cap)
            out[n++] = ' ';
        space = false;
        out[n++] = (char)*p;
    }
    out[n] = '\0';
}

const char *sf_group_digits(const char *digits, char *out, size_t cap)
{
    size_t len = strlen(digits), at = 0;
    for (size_t i = 0; i < len && at + 2 < cap; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            out[at++] = ',';
        out[at++] = digits[i];
    }
    if (cap > 0)
        out[at] = '\0';
    return out;
}
