/*
 * test_base.c — base/: the one error space (every code registered once,
 * ranges disjoint, words for each), the growable string, the typed hash
 * map against a plain array, FNV-1a's published vectors and the logger's
 * two formats.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/fnv.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "base/url.h"
#include "proto/error.h"
#include "tests/support/xorshift.h"

static const struct {
    int code;
    const char *sym;
} codes[] = {
#define ROW(sym, num, text) { num, #sym },
    SF_ERRNO_MAP(ROW)
#undef ROW
};

/* The prefix a code's range belongs to (base/err.h's table). */
static const char *range_prefix(int code)
{
    static const char *const prefix[] = { "PR_", "RT_", "ND_", "SC_", "SIM_", "HTTP_", "CD_", "SF_" };
    int r = -code / 100;
    return r < 8 ? prefix[r] : "?";
}

Test(err, every_code_is_registered_once_in_its_own_range)
{
    size_t n = sizeof codes / sizeof codes[0];
    cr_assert_gt(n, 60);
    for (size_t i = 0; i < n; i++) {
        cr_assert_lt(codes[i].code, 0, "%s", codes[i].sym);
        const char *p = range_prefix(codes[i].code);
        cr_assert(strncmp(codes[i].sym, p, strlen(p)) == 0, "%s (%d) is not in %s's range", codes[i].sym,
            codes[i].code, p);
        cr_assert_str_eq(sf_errname(codes[i].code), codes[i].sym);
        cr_assert_str_neq(sf_strerror(codes[i].code), "unknown error", "%s has no words", codes[i].sym);
        for (size_t j = 0; j < i; j++)
            cr_assert_neq(codes[i].code, codes[j].code, "%s and %s share %d", codes[i].sym, codes[j].sym,
                codes[i].code);
    }
    cr_assert_str_eq(sf_strerror(0), "success");
    cr_assert_str_eq(sf_errname(0), "OK");
    cr_assert_str_eq(sf_strerror(-99999), "unknown error");
    cr_assert_str_eq(sf_errname(-99999), "UNKNOWN");
}

Test(err, proto_names_keep_the_wire_spelling)
{
    cr_assert_str_eq(pr_errname(PR_ETRUNC), "ETRUNC");
    cr_assert_eq(PR_ETRUNC, -4, "proto's numbers travel in error messages");
    cr_assert_str_eq(pr_errname(SIM_EPARAM), "UNKNOWN");
}

Test(err, the_carrier_keeps_code_and_words)
{
    sf_error e;
    sf_error_clear(&e);
    cr_assert_eq(e.code, 0);
    cr_assert_str_eq(e.msg, "");
    cr_assert_eq(sf_fail(&e, CD_ETLS, "cannot read %s", "cert.pem"), CD_ETLS);
    cr_assert_eq(e.code, CD_ETLS);
    cr_assert_str_eq(e.msg, "cannot read cert.pem");
    cr_assert_eq(sf_fail(NULL, SIM_EPARAM, "dropped"), SIM_EPARAM);
}

Test(str, appends_formats_and_quotes)
{
    sf_str b = SF_STR_INIT;
    sf_str_cat(&b, "{\"a\":");
    sf_str_catf(&b, "%d,\"b\":", 42);
    sf_str_cat_json(&b, "say \"hi\"\n\x01");
    sf_str_cat(&b, ",\"n\":[");
    sf_str_cat_number(&b, 0.1);
    sf_str_cat(&b, ",");
    sf_str_cat_number(&b, INFINITY);
    sf_str_cat(&b, "]");
    sf_str_catn(&b, "}xyz", 1);
    cr_assert_str_eq(b.s, "{\"a\":42,\"b\":\"say \\\"hi\\\"\\u000a\\u0001\",\"n\":[0.10000000000000001,null]}");
    cr_assert_eq(b.len, strlen(b.s));
    sf_str_clear(&b);
    cr_assert_eq(b.len, 0);
    cr_assert_str_eq(b.s, "");
    /* Grows well past its first allocation, byte for byte. */
    for (int i = 0; i < 5000; i++)
        sf_str_catf(&b, "%04d", i);
    cr_assert_eq(b.len, 20000);
    cr_assert(strncmp(b.s + 4 * 4321, "4321", 4) == 0);
    char *s = sf_str_take(&b);
    cr_assert_null(b.s);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(strlen(s), 20000);
    free(s);
    s = sf_str_take(&b);
    cr_assert_str_eq(s, "");
    free(s);
    /* A formatted piece longer than the room left is written whole. */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    sf_str_cat(&b, "<");
    sf_str_catf(&b, "%s|%d", big, 7);
    cr_assert_eq(b.len, 1 + 2999 + 2);
    cr_assert(b.s[0] == '<' && b.s[2999] == 'x' && strcmp(b.s + 3000, "|7") == 0);
    sf_str_free(&b);
}

SF_MAP_DECLARE(test_map, uint64_t)

/* Random puts and deletes against a plain array of what must be there. */
Test(str, one_line_joins_a_message_of_several_lines)
{
    char out[32];
    sf_one_line(out, sizeof out, "\n  could not extend file:\n\tNo space left  \r\n");
    cr_assert_str_eq(out, "could not extend file: No space");
    sf_one_line(out, sizeof out, "ERROR: full\n");
    cr_assert_str_eq(out, "ERROR: full");
    sf_one_line(out, 6, "a b c d e f");
    cr_assert_str_eq(out, "a b c");
    sf_one_line(out, sizeof out, " \n ");
    cr_assert_str_eq(out, "");
}

Test(map, agrees_with_a_plain_array)
{
    enum { KEYS = 700, STEPS = 40000 };
    static uint64_t want[KEYS + 1]; /* 0: absent */
    test_map m = { 0 };
    uint64_t rs = 0x2545F4914F6CDD1Dull;
    for (int step = 0; step < STEPS; step++) {
        uint64_t key = 1 + xorshift64(&rs) % KEYS, v = xorshift64(&rs) | 1;
        if (xorshift64(&rs) % 3 == 0) {
            cr_assert_eq(test_map_del(&m, key), want[key] != 0, "step %d: del %llu", step, (unsigned long long)key);
            want[key] = 0;
        } else {
            bool added;
            *test_map_put(&m, key, &added) = v;
            cr_assert_eq(added, want[key] == 0, "step %d: put %llu", step, (unsigned long long)key);
            want[key] = v;
        }
    }
    size_t n = 0;
    for (uint64_t k = 1; k <= KEYS; k++) {
        uint64_t *got = test_map_get(&m, k);
        if (want[k] == 0) {
            cr_assert_null(got, "key %llu deleted but found", (unsigned long long)k);
        } else {
            cr_assert_not_null(got, "key %llu lost", (unsigned long long)k);
            cr_assert_eq(*got, want[k]);
            n++;
        }
    }
    cr_assert_eq(m.n, n);
    size_t seen = 0;
    SF_MAP_EACH(&m, e) {
        cr_assert_eq(e->val, want[e->key]);
        seen++;
    }
    cr_assert_eq(seen, n);
    cr_assert_null(test_map_get(&m, 0));
    test_map_free(&m);
    cr_assert_null(test_map_get(&m, 1));
}

Test(fnv, published_vectors)
{
    /* From the FNV authors' test suite: "" and "a", 32 and 64 bits. */
    cr_assert_eq(sf_fnv32(SF_FNV32_BASIS, "", 0), 0x811c9dc5u);
    cr_assert_eq(sf_fnv32(SF_FNV32_BASIS, "a", 1), 0xe40c292cu);
    cr_assert_eq(sf_fnv64(SF_FNV64_BASIS, "", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(sf_fnv64(SF_FNV64_BASIS, "a", 1), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(sf_fnv64(SF_FNV64_BASIS, "foobar", 6), 0x85944171f73967e8ull);
}

/* The bound on repeated lines: one per key a window, the rest counted and
 * said with the key's next line or by the flush; a burst over all keys. */
static uint64_t said_n;
static void said(void *ctx, const char *key, uint64_t n)
{
    (void)ctx;
    (void)key;
    said_n += n;
}

Test(log, limit_one_line_per_key_a_window)
{
    static sf_log_limit l; /* zero: 60 s, 20 lines */
    uint64_t more = 99;
    cr_assert(sf_log_limit_take(&l, "10.0.0.1", 1000, &more));
    cr_assert_eq(more, 0);
    for (int i = 0; i < 9; i++)
        cr_assert(!sf_log_limit_take(&l, "10.0.0.1", 1000 + (uint64_t)i, &more));
    cr_assert(sf_log_limit_take(&l, "10.0.0.2", 1500, &more), "another key has its own line");
    cr_assert(sf_log_limit_take(&l, "10.0.0.1", 61000, &more), "a new window");
    cr_assert_eq(more, 9, "the events held back are said with it");
    cr_assert(!sf_log_limit_take(&l, "10.0.0.1", 61001, &more));
    said_n = 0;
    cr_assert_eq(sf_log_limit_flush(&l, 90000, said, NULL), 0);
    cr_assert_eq(said_n, 0, "its window is not over");
    sf_log_limit_flush(&l, 121001, said, NULL);
    cr_assert_eq(said_n, 1);
    /* the burst: at most 20 lines a window over all keys */
    static sf_log_limit b;
    char key[16];
    int lines = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "k%d", i);
        lines += sf_log_limit_take(&b, key, 5000, &more);
    }
    cr_assert_eq(lines, 20);
    said_n = 0;
    uint64_t lost = sf_log_limit_flush(&b, 5000, said, NULL); /* keys pushed out of the table */
    cr_assert_eq(said_n, 0, "no window is over");
    lost += sf_log_limit_flush(&b, 70000, said, NULL);
    cr_assert_eq(lost + said_n, 180, "every event not written is counted once: %llu lost, %llu said",
        (unsigned long long)lost, (unsigned long long)said_n);
}

Test(log, text_names_the_source, .init = cr_redirect_stderr)
{
    sf_log_setup(SF_LOG_TEXT, SF_LOG_INFO, false);
    sf_log(SF_LOG_WARN, "scheduler", "job %d cannot run: %s", 7, "no kernel");
    sf_log(SF_LOG_INFO, NULL, "database up");
    sf_log(SF_LOG_DEBUG, "store", "below the level: not written");
    fflush(stderr);
    cr_assert_stderr_eq_str("simfarm scheduler: job 7 cannot run: no kernel\nsimfarm: database up\n");
}

Test(log, json_is_one_object_a_line, .init = cr_redirect_stderr)
{
    sf_log_format f;
    cr_assert(sf_log_format_parse("json", &f));
    cr_assert_eq(f, SF_LOG_JSON);
    cr_assert_not(sf_log_format_parse("xml", &f));
    sf_log_setup(SF_LOG_JSON, SF_LOG_DEBUG, false);
    sf_logf(SF_LOG_ERROR, "session", "\"job\":12,\"node\":3", "node %d says \"%s\"", 3, "bye");
    fflush(stderr);
    FILE *err = cr_get_redirected_stderr();
    char line[512] = "";
    cr_assert_not_null(fgets(line, sizeof line, err));
    cr_assert(strncmp(line, "{\"ts\":", 6) == 0, "%s", line);
    const char *rest = strstr(line, ",\"level\":");
    cr_assert_not_null(rest, "%s", line);
    cr_assert_str_eq(rest, ",\"level\":\"error\",\"src\":\"session\",\"msg\":\"node 3 says \\\"bye\\\"\","
                           "\"job\":12,\"node\":3}\n");
}

Test(url, the_farm_schemes_and_their_parts)
{
    static const struct {
        const char *url, *scheme, *host, *path, *origin;
        int port;
        bool tls;
    } good[] = {
        { "http://127.0.0.1:8080", "http", "127.0.0.1", "", "http://127.0.0.1:8080", 8080, false },
        { "HTTPS://farm.example/simfarm/", "https", "farm.example", "/simfarm/", "HTTPS://farm.example", 443, true },
        { "ws://[::1]:9/ws/node", "ws", "::1", "/ws/node", "ws://[::1]:9", 9, false },
        { "wss://h/x?y", "wss", "h", "/x?y", "wss://h", 443, true },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sf_url u;
        sf_error e;
        cr_assert_eq(sf_url_parse(good[i].url, &u, &e), 0, "%s: %s", good[i].url, e.msg);
        cr_assert_str_eq(u.scheme, good[i].scheme);
        cr_assert_str_eq(u.host, good[i].host);
        cr_assert_str_eq(u.path, good[i].path);
        cr_assert_str_eq(u.origin, good[i].origin);
        cr_assert_eq(u.port, good[i].port, "%s", good[i].url);
        cr_assert_eq(u.tls, good[i].tls);
    }
    static const struct {
        const char *url, *says;
    } bad[] = {
        { "ftp://h", "is not a URL" }, { "http//h", "is not a URL" }, { "http://", "names no host" },
        { "http://[::1:80/", "closing ']'" }, { "http://u@h/", "user names" }, { "http://h:0", "port must be" },
        { "http://h:65536", "port must be" }, { "http://h:80x", "port must be" }, { "http://h?x", "only a path" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sf_url u;
        sf_error e;
        cr_assert_eq(sf_url_parse(bad[i].url, &u, &e), SF_EURL, "%s accepted", bad[i].url);
        cr_assert_eq(e.code, SF_EURL);
        cr_assert(strstr(e.msg, bad[i].says) != NULL, "%s: \"%s\" lacks \"%s\"", bad[i].url, e.msg, bad[i].says);
        cr_assert(strstr(e.msg, bad[i].url) != NULL, "%s: the message does not quote it", bad[i].url);
    }
}
