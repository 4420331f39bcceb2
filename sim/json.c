/*
 * json.c — JSON text to msgpack, for parameters written by people (the
 * `simfarm sim` command, tests, examples/). Objects, arrays, strings,
 * numbers, true, false and null; integers stay integers. Bounded depth.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_json.h"

#define MAX_DEPTH 32

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
    return SIM_EPARAM;
}

static void skip_ws(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int value(struct reader *r, int depth);

/* Reads a string body after the opening quote into buf (escapes decoded,
 * \u escapes below 0x80 only). */
static int string(struct reader *r, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        char ch = *r->p++;
        if ((unsigned char)ch < 0x20)
            return fail(r, "control character in string");
        if (ch == '\\') {
            if (r->p >= r->end)
                break;
            char e = *r->p++;
            switch (e) {
            case '"': case '\\': case '/': ch = e; break;
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            case 'r': ch = '\r'; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'u': {
                if (r->end - r->p < 4)
                    return fail(r, "short \\u escape");
                char hex[5] = { r->p[0], r->p[1], r->p[2], r->p[3], 0 };
                char *endp;
                long v = strtol(hex, &endp, 16);
                if (*endp != '\0' || v >= 0x80)
                    return fail(r, "only ASCII \\u escapes are supported");
                r->p += 4;
                ch = (char)v;
                break;
            }
            default: return fail(r, "bad escape");
            }
        }
        if (n + 1 >= cap)
            return fail(r, "string too long");
        buf[n++] = ch;
    }
    if (r->p >= r->end)
        return fail(r, "unterminated string");
    r->p++;
    *len = n;
    return 0;
}

static int number(struct reader *r)
{
    char buf[64];
    size_t n = 0;
    bool is_float = false;
    while (r->p < r->end && n + 1 < sizeof buf && strchr("+-0123456789.eE", *r->p)) {
        if (strchr(".eE", *r->p))
            is_float = true;
        buf[n++] = *r->p++;
    }
    buf[n] = '\0';
    char *endp;
    errno = 0;
    if (!is_float) {
        if (buf[0] == '-') {
            long long v = strtoll(buf, &endp, 10);
            if (*endp == '\0' && n > 1 && errno == 0)
                return msgpack_pack_int64(r->pk, v), 0;
        } else {
            unsigned long long v = strtoull(buf, &endp, 10);
            if (*endp == '\0' && n > 0 && errno == 0)
                return msgpack_pack_uint64(r->pk, v), 0;
        }
        errno = 0;
    }
    double d = strtod(buf, &endp);
    if (n == 0 || *endp != '\0' || errno != 0)
        return fail(r, "bad number");
    msgpack_pack_double(r->pk, d);
    return 0;
}

static int container(struct reader *r, int depth, bool object)
{
    char close = object ? '}' : ']';
    /* Count the members first: msgpack needs the size before the items. */
    struct reader probe = *r;
    msgpack_sbuffer sink;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sink);
    msgpack_packer_init(&pk, &sink, msgpack_sbuffer_write);
    probe.pk = &pk;
    uint32_t count = 0;
    int rc = 0;
    skip_ws(&probe);
    if (probe.p < probe.end && *probe.p == close) {
        probe.p++;
    } else {
        for (;;) {
            skip_ws(&probe);
            if (object) {
                char key[256];
                size_t klen;
                if (probe.p >= probe.end || *probe.p != '"') {
                    rc = fail(&probe, "expected a string key");
                    break;
                }
                probe.p++;
                if ((rc = string(&probe, key, sizeof key, &klen)) != 0)
                    break;
                skip_ws(&probe);
                if (probe.p >= probe.end || *probe.p != ':') {
                    rc = fail(&probe, "expected ':'");
                    break;
                }
                probe.p++;
            }
            if ((rc = value(&probe, depth + 1)) != 0)
                break;
            count++;
            skip_ws(&probe);
            if (probe.p < probe.end && *probe.p == ',') {
                probe.p++;
                continue;
            }
            if (probe.p < probe.end && *probe.p == close) {
                probe.p++;
                break;
            }
            rc = fail(&probe, object ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
    }
    msgpack_sbuffer_destroy(&sink);
    if (rc != 0)
        return rc;
    /* Second pass writes for real; it cannot fail where the first did not. */
    if (object)
        msgpack_pack_map(r->pk, count);
    else
        msgpack_pack_array(r->pk, count);
    for (uint32_t i = 0; i < count; i++) {
        skip_ws(r);
        if (object) {
            char key[256];
            size_t klen;
            r->p++; /* the opening quote */
            string(r, key, sizeof key, &klen);
            msgpack_pack_str(r->pk, klen);
            msgpack_pack_str_body(r->pk, key, klen);
            skip_ws(r);
            r->p++; /* ':' */
        }
        value(r, depth + 1);
        skip_ws(r);
        r->p++; /* ',' or the closing bracket */
    }
    if (count == 0) {
        skip_ws(r);
        r->p++;
    }
    return 0;
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

static int value(struct reader *r, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(r, "nested too deeply");
    skip_ws(r);
    if (r->p >= r->end)
        return fail(r, "unexpected end");
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

int sim_json_to_msgpack(const char *json, size_t len, msgpack_sbuffer *out, char *err, size_t errlen)
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

bool sim_str_is(const msgpack_object *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

const msgpack_object *sim_map_get(const msgpack_object *m, const char *key)
{
    for (uint32_t i = 0; m->type == MSGPACK_OBJECT_MAP && i < m->via.map.size; i++)
        if (sim_str_is(&m->via.map.ptr[i].key, key))
            return &m->via.map.ptr[i].val;
    return NULL;
}
