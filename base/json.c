/*
 * json.c — JSON text to msgpack, for parameters written by people (the
 * `simfarm sim` command, the API's job specs, tests, examples/). Objects,
 * arrays, strings (UTF-8), numbers as JSON writes them, true, false and
 * null; integers stay integers; no object names a key twice. Bounded
 * depth, one pass.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define MAX_DEPTH 32 /* levels of containers (docs/api.md) */

struct reader {
    const char *p, *end, *start;
    msgpack_packer *pk;
    char *err;
    size_t errlen;
};

static int fail(struct reader *r, const char *what)
{
    if (r->err != NULL && r->errlen > 0)
        snprintf(r->err, r->errlen, "JSON: %s at offset %td", what, r->p - r->start);
    return SF_EJSON;
}

static void skip_ws(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int value(struct reader *r, int depth);

/* Appends code point c to buf as UTF-8; false when it does not fit. */
static bool put_utf8(char *buf, size_t cap, size_t *n, unsigned long c)
{
    unsigned char b[4];
    size_t k;
    if (c < 0x80) {
        b[0] = (unsigned char)c;
        k = 1;
    } else if (c < 0x800) {
        b[0] = (unsigned char)(0xc0 | c >> 6);
        b[1] = (unsigned char)(0x80 | (c & 0x3f));
        k = 2;
    } else if (c < 0x10000) {
        b[0] = (unsigned char)(0xe0 | c >> 12);
        b[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
        b[2] = (unsigned char)(0x80 | (c & 0x3f));
        k = 3;
    } else {
        b[0] = (unsigned char)(0xf0 | c >> 18);
        b[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
        b[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
        b[3] = (unsigned char)(0x80 | (c & 0x3f));
        k = 4;
    }
    if (*n + k >= cap)
        return false;
    memcpy(buf + *n, b, k);
    *n += k;
    return true;
}

/* Four hex digits of a \u escape; -1 when they are not. */
static long hex4(struct reader *r)
{
    if (r->end - r->p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    r->p += 4;
    return v;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF); 0 if it is not. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
    size_t k = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
    if (p[0] < 0xc2 || p[0] > 0xf4 || (size_t)(end - p) < k)
        return 0;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) || (p[0] == 0xf0 && p[1] < 0x90) ||
        (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return k;
}

/* Reads a string body after the opening quote into buf as UTF-8, escapes
 * decoded. U+0000 is refused: the strings become C strings and database
 * text. */
static int string(struct reader *r, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        unsigned char ch = (unsigned char)*r->p;
        if (ch < 0x20)
            return fail(r, "control character in string");
        if (ch >= 0x80) {
            size_t k = utf8_len((const unsigned char *)r->p, (const unsigned char *)r->end);
            if (k == 0)
                return fail(r, "invalid UTF-8 in string");
            if (n + k >= cap)
                return fail(r, "string too long");
            memcpy(buf + n, r->p, k);
            n += k;
            r->p += k;
            continue;
        }
        r->p++;
        unsigned long c = ch;
        if (ch == '\\') {
            if (r->p >= r->end)
                break;
            char e = *r->p++;
            switch (e) {
            case '"': case '\\': case '/': c = (unsigned char)e; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                long v = hex4(r);
                if (v < 0)
                    return fail(r, "a \\u escape needs four hex digits");
                if (v >= 0xdc00 && v <= 0xdfff)
                    return fail(r, "a lone low surrogate in a \\u escape");
                if (v >= 0xd800 && v <= 0xdbff) {
                    long lo = r->end - r->p >= 2 && r->p[0] == '\\' && r->p[1] == 'u' ? (r->p += 2, hex4(r)) : -1;
                    if (lo < 0xdc00 || lo > 0xdfff)
                        return fail(r, "a high surrogate in a \\u escape without its low half");
                    v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                }
                if (v == 0)
                    return fail(r, "\\u0000 in a string");
                c = (unsigned long)v;
                break;
            }
            default: return fail(r, "bad escape");
            }
        }
        if (!put_utf8(buf, cap, &n, c))
            return fail(r, "string too long");
    }
    if (r->p >= r->end)
        return fail(r, "unterminated string");
    r->p++;
    *len = n;
    return 0;
}

static bool digit_at(const struct reader *r)
{
    return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

/* A number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number(struct reader *r)
{
    const char *from = r->p;
    bool is_float = false;
    if (r->p < r->end && *r->p == '-')
        r->p++;
    if (!digit_at(r))
        return fail(r, "bad number");
    if (*r->p++ != '0')
        while (digit_at(r))
            r->p++;
    else if (digit_at(r))
        return fail(r, "bad number: no leading zeros");
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        is_float = true;
        if (!digit_at(r))
            return fail(r, "bad number: digits must follow the '.'");
        while (digit_at(r))
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        is_float = true;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (!digit_at(r))
            return fail(r, "bad number: digits must follow the exponent");
        while (digit_at(r))
            r->p++;
    }
    char buf[64];
    size_t n = (size_t)(r->p - from);
    if (n >= sizeof buf)
        return fail(r, "number too long");
    memcpy(buf, from, n);
    buf[n] = '\0';
    char *endp;
    errno = 0;
    if (!is_float) {
        if (buf[0] == '-') {
            long long v = strtoll(buf, &endp, 10);
            if (errno == 0)
                return msgpack_pack_int64(r->pk, v), 0;
        } else {
            unsigned long long v = strtoull(buf, &endp, 10);
            if (errno == 0)
                return msgpack_pack_uint64(r->pk, v), 0;
        }
        errno = 0; /* beyond 64 bits: a double */
    }
    double d = strtod(buf, &endp);
    if (errno != 0)
        return fail(r, "number out of range");
    msgpack_pack_double(r->pk, d);
    return 0;
}

/* An object's key: its bytes in the object's buffer, where it began in
 * the text. */
struct key {
    size_t off, len, at;
    const char *s; /* set once the buffer holds every key */
};

static bool key_same(const struct key *x, const struct key *y)
{
    return x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

/* By length, bytes, then place in the text. */
static int key_cmp(const void *a, const void *b)
{
    const struct key *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    int c = memcmp(x->s, y->s, x->len);
    if (c != 0)
        return c;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Refuses an object that names a key twice (readers differ on which one
 * counts; the kernels' parsers would take the first): the key and the
 * offset of its first repetition. Sorting keeps a big object O(n log n). */
static int unique_keys(struct reader *r, struct key *keys, size_t n, const char *body)
{
    for (size_t i = 0; i < n; i++)
        keys[i].s = body + keys[i].off;
    qsort(keys, n, sizeof *keys, key_cmp);
    const struct key *twice = NULL;
    for (size_t i = 1; i < n; i++)
        if (key_same(&keys[i - 1], &keys[i]) && (twice == NULL || keys[i].at < twice->at))
            twice = &keys[i];
    if (twice == NULL)
        return 0;
    size_t shown = twice->len;
    if (shown > 64) /* cut at a character's first byte, so the message stays UTF-8 */
        for (shown = 64; ((unsigned char)twice->s[shown] & 0xc0) == 0x80; shown--)
            ;
    if (r->err != NULL && r->errlen > 0)
        snprintf(r->err, r->errlen, "JSON: key \"%.*s\" given a second time at offset %zu", (int)shown,
            twice->s, twice->at);
    return SF_EJSON;
}

/* The members go to a buffer of their own, counted (msgpack needs the
 * count before them), then after the header into the parent's: one pass
 * over the text, each byte copied once per level above it. */
static int container(struct reader *r, int depth, bool object)
{
    char close = object ? '}' : ']';
    msgpack_sbuffer body;
    msgpack_packer pk, *outer = r->pk;
    msgpack_sbuffer_init(&body);
    msgpack_packer_init(&pk, &body, msgpack_sbuffer_write);
    r->pk = &pk;
    uint32_t count = 0;
    int rc = 0;
    struct key few[16], *keys = few;
    size_t nkeys = 0, capkeys = 16;
    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
    } else {
        for (;;) {
            skip_ws(r);
            if (object) {
                char key[256];
                size_t klen;
                if (r->p >= r->end || *r->p != '"') {
                    rc = fail(r, "expected a string key");
                    break;
                }
                size_t at = (size_t)(r->p - r->start);
                r->p++;
                if ((rc = string(r, key, sizeof key, &klen)) != 0)
                    break;
                if (nkeys == capkeys) {
                    struct key *more = malloc(2 * capkeys * sizeof *more);
                    if (more == NULL) {
                        fail(r, "out of memory");
                        rc = SF_ENOMEM;
                        break;
                    }
                    memcpy(more, keys, nkeys * sizeof *keys);
                    if (keys != few)
                        free(keys);
                    keys = more;
                    capkeys *= 2;
                }
                msgpack_pack_str(&pk, klen);
                keys[nkeys++] = (struct key){ body.size, klen, at, NULL };
                msgpack_pack_str_body(&pk, key, klen);
                skip_ws(r);
                if (r->p >= r->end || *r->p != ':') {
                    rc = fail(r, "expected ':'");
                    break;
                }
                r->p++;
            }
            if ((rc = value(r, depth + 1)) != 0)
                break;
            if (count == UINT32_MAX) {
                rc = fail(r, "too many members");
                break;
            }
            count++;
            skip_ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == close) {
                r->p++;
                break;
            }
            rc = fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
    }
    r->pk = outer;
    if (rc == 0 && nkeys > 1)
        rc = unique_keys(r, keys, nkeys, body.data);
    if (keys != few)
        free(keys);
    if (rc == 0) {
        if (object)
            msgpack_pack_map(outer, count);
        else
            msgpack_pack_array(outer, count);
        if (body.size > 0)
            outer->callback(outer->data, body.data, body.size);
    }
    msgpack_sbuffer_destroy(&body);
    return rc;
}

static bool word(struct reader *r, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) >= n && memcmp(r->p, w, n) == 0) {
        r->p += n;
        return true;
    }
    return false;
}

/* depth: the containers around this value. A container opens one more
 * level, so one at depth MAX_DEPTH would be level MAX_DEPTH + 1; a scalar
 * adds none, so the limit is the same whatever the innermost holds. */
static int value(struct reader *r, int depth)
{
    skip_ws(r);
    if (r->p >= r->end)
        return fail(r, "unexpected end");
    if ((*r->p == '{' || *r->p == '[') && depth >= MAX_DEPTH)
        return fail(r, "nested too deeply");
    switch (*r->p) {
    case '{': r->p++; return container(r, depth, true);
    case '[': r->p++; return container(r, depth, false);
    case '"': {
        char buf[1024];
        size_t n;
        int rc;
        r->p++;
        if ((rc = string(r, buf, sizeof buf, &n)) != 0)
            return rc;
        msgpack_pack_str(r->pk, n);
        msgpack_pack_str_body(r->pk, buf, n);
        return 0;
    }
    default:
        if (word(r, "true"))
            return msgpack_pack_true(r->pk), 0;
        if (word(r, "false"))
            return msgpack_pack_false(r->pk), 0;
        if (word(r, "null"))
            return msgpack_pack_nil(r->pk), 0;
        return number(r);
    }
}

int sf_json_to_msgpack(const char *json, size_t len, msgpack_sbuffer *out, char *err, size_t errlen)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    struct reader r = { json, json + len, json, &pk, err, errlen };
    int rc = value(&r, 0);
    if (rc != 0)
        return rc;
    skip_ws(&r);
    if (r.p != r.end)
        return fail(&r, "trailing characters");
    return 0;
}

bool sf_mp_streq(const msgpack_object *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

const msgpack_object *sf_mp_get(const msgpack_object *m, const char *key)
{
    for (uint32_t i = 0; m->type == MSGPACK_OBJECT_MAP && i < m->via.map.size; i++)
        if (sf_mp_streq(&m->via.map.ptr[i].key, key))
            return &m->via.map.ptr[i].val;
    return NULL;
}

size_t sf_json_quote(char *out, size_t cap, const char *s)
{
    const unsigned char *c = (const unsigned char *)s, *end = c + strlen(s);
    size_t n = 1, need = 1;
    bool cut = false;
    out[0] = '"';
    while (c < end) {
        char unit[8];
        size_t len = 1, used = 1;
        if (*c == '"' || *c == '\\') {
            unit[0] = '\\', unit[1] = (char)*c, len = 2;
        } else if (*c < 0x20) {
            len = (size_t)snprintf(unit, sizeof unit, "\\u%04x", *c);
        } else if (*c < 0x80) {
            unit[0] = (char)*c;
        } else if ((used = utf8_len(c, end)) != 0) {
            memcpy(unit, c, used);
            len = used;
        } else {
            memcpy(unit, "\xef\xbf\xbd", 3); /* U+FFFD for one ill-formed byte */
            len = 3, used = 1;
        }
        c += used;
        need += len;
        if (!cut && n + len + 2 <= cap) { /* room for the closing quote and NUL */
            memcpy(out + n, unit, len);
            n += len;
        } else {
            cut = true;
        }
    }
    out[n++] = '"';
    out[n] = '\0';
    return need + 1;
}
