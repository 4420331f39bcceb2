/*
 * test_proto_vectors.c — the golden vectors (tests/vectors/proto.vec), natively
 * and under ASan: every good frame decodes and re-encodes to the same bytes,
 * signed ones verify under the fixed test key, and every bad one fails with
 * the error the file names. The emcc build is held to the same file by
 * tests/wasm/proto_vectors.test.mjs.
 */
#include <criterion/criterion.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/sign.h"

#define VEC "tests/vectors/proto.vec"
#define HOST "farm.example.org"
#define TEST_SEED "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"

struct vec {
    char name[64];
    uint8_t *frame;
    size_t len;
    char decode[32];  /* expected pr_errname of pr_decode */
    char verify[32];  /* expected pr_errname of the signature check */
};

static struct vec vecs[64];
static size_t nvecs;

static struct vec *find(const char *name)
{
    for (size_t i = 0; i < nvecs; i++)
        if (strcmp(vecs[i].name, name) == 0)
            return &vecs[i];
    return NULL;
}

static void load(void)
{
    FILE *f = fopen(VEC, "r");
    cr_assert_not_null(f, "cannot open %s (tests run from the repository root)", VEC);
    static char line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        char a[64], b[32];
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "frame ", 6) == 0) {
            cr_assert_lt(nvecs, sizeof vecs / sizeof vecs[0]);
            struct vec *v = &vecs[nvecs++];
            char *hex = strchr(line + 6, ' ');
            cr_assert_not_null(hex);
            *hex++ = '\0';
            cr_assert_lt(strlen(line + 6), sizeof v->name);
            memcpy(v->name, line + 6, strlen(line + 6) + 1);
            v->frame = malloc(strlen(hex) / 2 + 1);
            cr_assert_eq(sodium_hex2bin(v->frame, strlen(hex) / 2 + 1, hex, strlen(hex), NULL,
                             &v->len, NULL), 0);
            strcpy(v->decode, "OK");
            strcpy(v->verify, "OK");
        } else if (sscanf(line, "expect %63s %31s", a, b) == 2) {
            char *dot = strrchr(a, '.');
            cr_assert_not_null(dot);
            *dot = '\0';
            struct vec *v = find(a);
            cr_assert_not_null(v, "expect for unknown vector %s", a);
            memcpy(strcmp(dot + 1, "decode") == 0 ? v->decode : v->verify, b, sizeof b);
        }
    }
    fclose(f);
}

static void unload(void)
{
    for (size_t i = 0; i < nvecs; i++)
        free(vecs[i].frame);
    nvecs = 0;
}

TestSuite(proto_vectors, .init = load, .fini = unload);

Test(proto_vectors, every_message_type_has_a_vector)
{
    for (int t = 1; t < PR_MSG_COUNT_; t++)
        cr_assert_not_null(find(pr_type_name((pr_type)t)), "no vector for %s", pr_type_name((pr_type)t));
}

Test(proto_vectors, decode_reencode_verify)
{
    uint8_t seed[32], nonce[32];
    size_t sl;
    pr_key k;
    cr_assert_eq(pr_init(), 0);
    cr_assert_eq(sodium_hex2bin(seed, 32, TEST_SEED, 64, NULL, &sl, NULL), 0);
    cr_assert_eq(pr_key_from_seed(&k, seed, 32), 0);
    for (unsigned i = 0; i < 32; i++)
        nonce[i] = (uint8_t)(0xa0 + i);

    for (size_t i = 0; i < nvecs; i++) {
        struct vec *v = &vecs[i];
        pr_msg m;
        int rc = pr_decode(&m, v->frame, v->len);
        cr_expect_str_eq(pr_errname(rc), v->decode, "%s: decode %s at %s", v->name, pr_errname(rc), m.err_at);
        if (rc != 0)
            continue;
        uint8_t *re = NULL;
        size_t relen = 0;
        cr_assert_eq(pr_encode(&m, &re, &relen), 0, "%s", v->name);
        cr_expect(relen == v->len && memcmp(re, v->frame, relen) == 0, "%s: re-encoding differs", v->name);
        free(re);
        if (m.type == PR_MSG_COMPLETE) {
            rc = pr_complete_verify(&m.body.complete, k.pk, 32, HOST, m.body.complete.ts, NULL);
            cr_expect_str_eq(pr_errname(rc), v->verify, "%s: verify", v->name);
            rc = pr_complete_verify(&m.body.complete, k.pk, 32, HOST, m.body.complete.ts + 301, NULL);
            cr_expect_eq(rc, PR_ESKEW, "%s: skew", v->name);
        } else if (m.type == PR_MSG_HELLO) {
            rc = pr_hello_verify(&m.body.hello, HOST, nonce, m.body.hello.ts);
            cr_expect_str_eq(pr_errname(rc), v->verify, "%s: verify", v->name);
        }
        pr_msg_free(&m);
    }
    pr_key_wipe(&k);
}
