/*
 * str.h — a growable string for building text (JSON answers, events, SQL
 * literals), after Redis's sds: it grows as text is appended, is always
 * NUL-terminated once anything has been appended, and says who owns what.
 * Memory failure is sf_oom() (alloc.h), so appending cannot fail.
 *
 *     sf_str b = SF_STR_INIT;
 *     sf_str_catf(&b, "{\"id\":%d,\"name\":", id);
 *     sf_str_cat_json(&b, name);
 *     sf_str_cat(&b, "}");
 *     send(b.s, b.len);
 *     sf_str_free(&b);
 */
#ifndef SIMFARM_BASE_STR_H
#define SIMFARM_BASE_STR_H

#include <stddef.h>

typedef struct sf_str {
    char *s;    /* the text, NUL-terminated; NULL until something is appended */
    size_t len; /* bytes of text, without the NUL */
    size_t cap; /* bytes allocated */
} sf_str;

#define SF_STR_INIT { NULL, 0, 0 }

/* Appends the NUL-terminated s (borrowed). */
void sf_str_cat(sf_str *b, const char *s);

/* Appends n bytes of s (borrowed; may hold NULs). */
void sf_str_catn(sf_str *b, const char *s, size_t n);

/* Appends printf-style text. */
void sf_str_catf(sf_str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends s as a quoted JSON string (sf_json_quote's escaping, never cut). */
void sf_str_cat_json(sf_str *b, const char *s);

/* Appends v as a JSON number, to the last bit (%.17g); null for what JSON
 * cannot hold (NaN, the infinities). */
void sf_str_cat_number(sf_str *b, double v);

/* Makes room for n more bytes of text and its NUL, for a caller that writes
 * into b->s + b->len itself and then adds what it wrote to b->len. */
void sf_str_reserve(sf_str *b, size_t n);

/* Empties b, keeping its memory. */
void sf_str_clear(sf_str *b);

/* Hands the text to the caller, who frees it (never NULL: "" when b is
 * empty); b is left empty and owns nothing. */
char *sf_str_take(sf_str *b);

/* Frees b's memory; b is left empty. */
void sf_str_free(sf_str *b);

/* Copies text into out (cap bytes, terminated) as one line: every run of
 * white space (a library's message may hold line breaks) becomes one
 * space, none at either end. */
void sf_one_line(char *out, size_t cap, const char *text);

/* The decimal digits `digits` with their thousands separated by commas
 * ("4000000" -> "4,000,000") into out (capacity cap, NUL-terminated, cut to
 * fit); returns out. */
const char *sf_group_digits(const char *digits, char *out, size_t cap);

#endif /* SIMFARM_BASE_STR_H */
