/*
 * test_json.c — sim/json.c, the JSON reader behind `simfarm sim` and the
 * API's job specs: what it accepts (checked through the msgpack it
 * writes), what it refuses and why, and that its work grows with the text,
 * not with the nesting (a body of a few dozen brackets once took hours).
 */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

/* Parses json (len bytes); on success *obj is its msgpack object. */
static int parse(const char *json, size_t len, msgpack_sbuffer *b, msgpack_unpacked *u, char *err, size_t errlen)
{
    msgpack_sbuffer_init(b);
    msgpack_unpacked_init(u);
    int rc = sf_json_to_msgpack(json, len, b, err, errlen);
    if (rc == 0)
        cr_assert_eq(msgpack_unpack_next(u, b->data, b->size, NULL), MSGPACK_UNPACK_SUCCESS, "%s", json);
    return rc;
}

static void done(msgpack_sbuffer *b, msgpack_unpacked *u)
{
    msgpack_unpacked_destroy(u);
    msgpack_sbuffer_destroy(b);
}

/* json (len bytes) is accepted; b and u hold what it became. */
static void accepted(const char *json, size_t len, msgpack_sbuffer *b, msgpack_unpacked *u)
{
    char err[256] = "";
    cr_assert_eq(parse(json, len, b, u, err, sizeof err), 0, "%.*s: %s", (int)len, json, err);
}

/* json is refused with a message containing needle. */
static void refused(const char *json, size_t len, const char *needle)
{
    msgpack_sbuffer b;
    msgpack_unpacked u;
    char err[256] = "";
    cr_assert_neq(parse(json, len, &b, &u, err, sizeof err), 0, "accepted: %.*s", (int)len, json);
    cr_assert(strstr(err, needle) != NULL, "%.*s: \"%s\" does not say \"%s\"", (int)len, json, err, needle);
    done(&b, &u);
}

static void refused_str(const char *json, const char *needle)
{
    refused(json, strlen(json), needle);
}

Test(json, objects_arrays_and_scalars)
{
    const char *json = " {\"a\": [1, -2, 2.5, true, false, null, \"x\"], \"b\": {}, \"c\": [[]], \"d\": 1e3} ";
    msgpack_sbuffer b;
    msgpack_unpacked u;
    accepted(json, strlen(json), &b, &u);
    const msgpack_object *o = &u.data;
    cr_assert_eq(o->type, MSGPACK_OBJECT_MAP);
    cr_assert_eq(o->via.map.size, 4);
    const msgpack_object *a = sf_mp_get(o, "a");
    cr_assert_not_null(a);
    cr_assert_eq(a->type, MSGPACK_OBJECT_ARRAY);
    cr_assert_eq(a->via.array.size, 7);
    const msgpack_object *x = a->via.array.ptr;
    cr_assert(x[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && x[0].via.u64 == 1);
    cr_assert(x[1].type == MSGPACK_OBJECT_NEGATIVE_INTEGER && x[1].via.i64 == -2);
    cr_assert(x[2].type == MSGPACK_OBJECT_FLOAT64 && x[2].via.f64 == 2.5);
    cr_assert(x[3].type == MSGPACK_OBJECT_BOOLEAN && x[3].via.boolean);
    cr_assert(x[4].type == MSGPACK_OBJECT_BOOLEAN && !x[4].via.boolean);
    cr_assert_eq(x[5].type, MSGPACK_OBJECT_NIL);
    cr_assert(sf_mp_streq(&x[6], "x"));
    cr_assert_eq(sf_mp_get(o, "b")->via.map.size, 0);
    const msgpack_object *c = sf_mp_get(o, "c");
    cr_assert(c->via.array.size == 1 && c->via.array.ptr[0].via.array.size == 0);
    cr_assert(sf_mp_get(o, "d")->type == MSGPACK_OBJECT_FLOAT64 && sf_mp_get(o, "d")->via.f64 == 1000.0);
    done(&b, &u);
}

Test(json, numbers_as_json_writes_them)
{
    static const char *good[] = { "0", "-0", "7", "-12", "1.5", "-0.25", "1e3", "1E+3", "2.5e-3", "18446744073709551615" };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        msgpack_sbuffer b;
        msgpack_unpacked u;
        accepted(good[i], strlen(good[i]), &b, &u);
        done(&b, &u);
    }
    static const char *bad[] = { "+5", "01000", "-01", "1.", ".5", "1e", "1e+", "-", "--1", "0x10", "1.5.5", "Infinity", "NaN" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused_str(bad[i], "JSON:");
    refused_str("{\"seed\": +5}", "bad number");
    refused_str("{\"x\": 1.}", "digits must follow the '.'");
    /* A NUL byte after a number is not part of it. */
    refused("{\"items\": 5\0}", 13, "expected ',' or '}'");
}

Test(json, strings_are_utf8_with_every_escape)
{
    const char *json = "[\"caf\\u00e9\", \"\\ud83d\\ude00\", \"\xc3\xa9t\xc3\xa9\", \"a\\n\\t\\\"\\\\\\/b\"]";
    msgpack_sbuffer b;
    msgpack_unpacked u;
    accepted(json, strlen(json), &b, &u);
    const msgpack_object *x = u.data.via.array.ptr;
    cr_assert(sf_mp_streq(&x[0], "caf\xc3\xa9"));
    cr_assert(sf_mp_streq(&x[1], "\xf0\x9f\x98\x80"));
    cr_assert(sf_mp_streq(&x[2], "\xc3\xa9t\xc3\xa9"));
    cr_assert(sf_mp_streq(&x[3], "a\n\t\"\\/b"));
    done(&b, &u);
    refused_str("\"a\\u0000b\"", "\\u0000");
    refused_str("\"\\ud83d\"", "without its low half");
    refused_str("\"\\ude00\"", "lone low surrogate");
    refused_str("\"\\u12\"", "four hex digits");
    refused_str("\"\xff\"", "invalid UTF-8");
    refused_str("\"\xc0\xaf\"", "invalid UTF-8");         /* overlong '/' */
    refused_str("\"\xed\xa0\x80\"", "invalid UTF-8");     /* a surrogate written out */
    refused_str("\"\xe2\x82\"", "invalid UTF-8");         /* cut short */
    refused_str("\"a\tb\"", "control character");
    refused_str("\"abc", "unterminated string");
}

Test(json, structure_errors_say_where)
{
    refused_str("{\"a\" 1}", "expected ':'");
    refused_str("{a: 1}", "expected a string key");
    refused_str("[1 2]", "expected ',' or ']'");
    refused_str("[1,]", "JSON:");
    refused_str("{} x", "trailing characters");
    refused_str("", "unexpected end");
    refused_str("[1, tru]", "at offset 4");
}

/* A key named twice is refused wherever the object is, however many keys
 * it has; the same key in different objects is not a repetition. */
Test(json, a_key_given_twice_is_refused)
{
    refused_str("{\"sigma\": 0.2, \"T\": 1, \"sigma\": 0.3}", "key \"sigma\" given a second time at offset 23");
    refused_str("[{\"a\": {\"b\": 1, \"\\u0062\": 2}}]", "key \"b\" given a second time");
    refused_str("{\"a\": 1, \"b\": 2, \"a\": 3, \"b\": 4}", "key \"a\" given a second time at offset 17");
    msgpack_sbuffer b;
    msgpack_unpacked u;
    const char *apart = "{\"a\": {\"a\": 1}, \"b\": [{\"a\": 2}, {\"a\": 3}], \"ab\": 4, \"A\": 5}";
    accepted(apart, strlen(apart), &b, &u);
    cr_assert_eq(u.data.via.map.size, 4);
    done(&b, &u);

    /* 5,000 distinct keys pass; the same with one repeated at the end
     * does not */
    size_t cap = 5001 * 16 + 16, k = 0;
    char *big = malloc(cap);
    big[k++] = '{';
    for (int i = 0; i < 5000; i++)
        k += (size_t)snprintf(big + k, cap - k, "%s\"k%d\": %d", i ? ", " : "", i, i);
    big[k] = '}';
    accepted(big, k + 1, &b, &u);
    cr_assert_eq(u.data.via.map.size, 5000);
    done(&b, &u);
    k += (size_t)snprintf(big + k, cap - k, ", \"k4321\": 0}");
    refused(big, k, "key \"k4321\" given a second time");
    free(big);

    /* a long key is shown cut, at a character's first byte: "yy" and 21
     * euro signs (3 bytes each) are 65 bytes, and the 64th is inside the
     * last sign, which goes whole */
    char key[80] = "yy", lng[256], want[160] = "key \"yy";
    for (int i = 0; i < 21; i++) {
        strcat(key, "\xe2\x82\xac");
        if (i < 20)
            strcat(want, "\xe2\x82\xac");
    }
    strcat(want, "\" given a second time at offset 73");
    snprintf(lng, sizeof lng, "{\"%s\": 1, \"%s\": 2}", key, key);
    refused_str(lng, want);
}

/* depth nested arrays, each holding `width` copies of the next level. */
static char *nested(int depth, int width)
{
    size_t cap = 16;
    char *s = malloc(cap);
    strcpy(s, "0");
    for (int d = 0; d < depth; d++) {
        size_t n = strlen(s);
        size_t need = (size_t)width * (n + 1) + 3;
        char *t = malloc(need);
        size_t k = 0;
        t[k++] = '[';
        for (int w = 0; w < width; w++) {
            if (w > 0)
                t[k++] = ',';
            memcpy(t + k, s, n);
            k += n;
        }
        t[k++] = ']';
        t[k] = '\0';
        free(s);
        s = t;
    }
    return s;
}

/* With the members of each container read twice (once to count them),
 * 32 levels of two members took 2^32 steps: hours. One pass takes a
 * moment; the timeout, far above it, is what fails the old reader. */
Test(json, nesting_costs_what_the_text_costs, .timeout = 30)
{
    /* "[[[...[0,0]...],0],0]": every level has two members */
    char json[256];
    size_t k = 0;
    for (int d = 0; d < 32; d++)
        json[k++] = '[';
    json[k++] = '0';
    for (int d = 0; d < 32; d++) {
        json[k++] = ',';
        json[k++] = '0';
        json[k++] = ']';
    }
    json[k] = '\0';
    for (int i = 0; i < 1000; i++) {
        msgpack_sbuffer b;
        msgpack_unpacked u;
        accepted(json, k, &b, &u);
        const msgpack_object *o = &u.data;
        for (int d = 0; d < 31; d++) {
            cr_assert(o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 2, "level %d", d);
            o = &o->via.array.ptr[0];
        }
        done(&b, &u);
    }
    /* 33 levels are refused */
    char *deep = nested(33, 1);
    refused_str(deep, "nested too deeply");
    free(deep);
    char *ok = nested(32, 1);
    msgpack_sbuffer b;
    msgpack_unpacked u;
    accepted(ok, strlen(ok), &b, &u);
    done(&b, &u);
    free(ok);
}

/* depth containers, each inside the last; the innermost holds `inner`
 * ("" for an empty one). Objects when `object`, arrays otherwise. */
static char *containers(int depth, bool object, const char *inner)
{
    size_t cap = (size_t)depth * 6 + strlen(inner) + 1, k = 0;
    char *s = malloc(cap);
    for (int d = 0; d < depth; d++) {
        if (object && d > 0) {
            memcpy(s + k, "\"k\":", 4);
            k += 4;
        }
        s[k++] = object ? '{' : '[';
    }
    if (object && depth > 0 && inner[0] != '\0') {
        memcpy(s + k, "\"k\":", 4);
        k += 4;
    }
    memcpy(s + k, inner, strlen(inner));
    k += strlen(inner);
    for (int d = 0; d < depth; d++)
        s[k++] = object ? '}' : ']';
    s[k] = '\0';
    return s;
}

/* docs/api.md: at most 32 levels of nesting. A level is a container,
 * whatever it holds: 33 empty ones are as deep as 33 around a number. */
Test(json, at_most_32_levels_of_containers_whatever_the_innermost_holds)
{
    static const char *const inner[] = { "", "0", "\"x\"", "null" };
    for (int object = 0; object < 2; object++)
        for (size_t i = 0; i < sizeof inner / sizeof inner[0]; i++) {
            char *ok = containers(32, object, inner[i]);
            msgpack_sbuffer b;
            msgpack_unpacked u;
            accepted(ok, strlen(ok), &b, &u);
            done(&b, &u);
            free(ok);
            char *deep = containers(33, object, inner[i]);
            refused_str(deep, "nested too deeply");
            free(deep);
        }
    /* arrays and objects count alike: 16 of each is 32, one more is 33 */
    char mixed[512];
    size_t k = 0;
    for (int d = 0; d < 16; d++)
        k += (size_t)snprintf(mixed + k, sizeof mixed - k, "[{\"k\":");
    char *tail = mixed + k;
    snprintf(tail, sizeof mixed - k, "[]");
    size_t t = k + 2;
    for (int d = 0; d < 16; d++)
        t += (size_t)snprintf(mixed + t, sizeof mixed - t, "}]");
    refused_str(mixed, "nested too deeply");
    snprintf(tail, sizeof mixed - k, "0");
    t = k + 1;
    for (int d = 0; d < 16; d++)
        t += (size_t)snprintf(mixed + t, sizeof mixed - t, "}]");
    msgpack_sbuffer b;
    msgpack_unpacked u;
    accepted(mixed, t, &b, &u);
    done(&b, &u);
}

/* sf_json_quote: whatever the bytes and however small the buffer, the
 * output is one JSON string this reader takes, holding the input's text
 * (ill-formed UTF-8 as U+FFFD), or a prefix of it cut at a character. */
static void quoted_reads_back(const char *s, size_t cap, const char *want)
{
    char out[4096];
    cr_assert_leq(cap, sizeof out);
    size_t need = sf_json_quote(out, cap, s);
    size_t n = strlen(out);
    cr_assert_lt(n, cap);
    msgpack_sbuffer b;
    msgpack_unpacked u;
    char err[200];
    cr_assert_eq(parse(out, n, &b, &u, err, sizeof err), 0, "%s: %s", out, err);
    cr_assert_eq(u.data.type, MSGPACK_OBJECT_STR);
    if (want != NULL) {
        cr_assert_eq(need, n, "the whole text fits");
        cr_assert_eq(u.data.via.str.size, strlen(want));
        if (want[0] != '\0') /* an empty string's pointer may be NULL */
            cr_assert_arr_eq(u.data.via.str.ptr, want, strlen(want), "%s", out);
    } else if (need >= cap) {
        cr_assert_lt(n, need, "cut short");
    }
    done(&b, &u);
}

Test(json, quote_escapes_and_keeps_utf8)
{
    quoted_reads_back("plain", 64, "plain");
    quoted_reads_back("a \"q\" \\ b\n\x01\x1f", 64, "a \"q\" \\ b\n\x01\x1f");
    quoted_reads_back("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 64, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    quoted_reads_back("", 3, "");
}

Test(json, quote_replaces_ill_formed_utf8)
{
    /* a lone continuation byte, a cut sequence, an overlong form, a
     * surrogate, a code point past U+10FFFF, 0xff */
    quoted_reads_back("a\x80" "b", 64, "a\xef\xbf\xbd" "b");
    quoted_reads_back("a\xc3", 64, "a\xef\xbf\xbd");
    quoted_reads_back("\xc0\xaf", 64, "\xef\xbf\xbd\xef\xbf\xbd");
    quoted_reads_back("\xed\xa0\x80", 64, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    quoted_reads_back("\xf4\x90\x80\x80", 64, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    quoted_reads_back("\xff", 64, "\xef\xbf\xbd");
}

Test(json, quote_cuts_at_a_character)
{
    const char *s = "\xc3\xa9\xc3\xa9\\\"\x01\xe2\x82\xac\xf0\x9f\x98\x80\xff" "end";
    char out[64];
    size_t need = sf_json_quote(out, sizeof out, s);
    cr_assert_eq(strlen(out), need);
    for (size_t cap = 3; cap <= need + 1; cap++)
        quoted_reads_back(s, cap, cap > need ? "\xc3\xa9\xc3\xa9\\\"\x01\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd" "end" : NULL);
}

Test(json, quote_takes_any_bytes)
{
    srand(7);
    char s[200];
    for (int t = 0; t < 20000; t++) {
        size_t len = (size_t)(rand() % 40);
        for (size_t i = 0; i < len; i++) {
            int r = rand() % 4;
            /* mostly bytes around the UTF-8 lead and continuation ranges */
            s[i] = (char)(r == 0 ? 0x80 + rand() % 0x80 : r == 1 ? 0xc0 + rand() % 0x40 : 1 + rand() % 0xff);
        }
        s[len] = '\0';
        quoted_reads_back(s, 3 + (size_t)(rand() % 80), NULL);
    }
}
