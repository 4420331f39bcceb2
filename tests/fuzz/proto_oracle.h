/*
 * proto_oracle.h — what must hold for any input to proto's decoders; shared by
 * the libFuzzer harnesses (fuzz_proto_*.c) and the corpus replay in
 * tests/unit/test_proto_corpus.c, so `make test` checks the same properties
 * on every committed corpus file that `make fuzz` checks on generated ones.
 *
 * For any bytes: the decoder returns 0 or one of proto's error codes, and
 * leaves nothing allocated on failure (ASan's leak check sees to that). When
 * it accepts: the message encodes, the encoding decodes, and encoding that
 * again gives the same bytes (the canonical form is a fixed point); a
 * completion never verifies under a key that signed nothing.
 *
 * Each function returns NULL when the property holds, or what broke.
 */
#ifndef SIMFARM_TESTS_FUZZ_PROTO_ORACLE_H
#define SIMFARM_TESTS_FUZZ_PROTO_ORACLE_H

#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/sign.h"

static int oracle_known_error(int rc)
{
    return rc < 0 && strcmp(pr_errname(rc), "UNKNOWN") != 0;
}

static const char *oracle_frame(const uint8_t *data, size_t size)
{
    static char fmt[1 << 14];
    static const uint8_t seed[32] = { 0x42, 0x42, 0x42 };
    const char *why = NULL;
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    pr_msg m, m2;
    pr_key k;

    int rc = pr_decode(&m, data, size);
    if (rc != 0)
        return oracle_known_error(rc) ? NULL : "decode returned a code outside the error list";
    pr_msg_format(&m, fmt, sizeof fmt);
    if (pr_encode(&m, &a, &alen) != 0) {
        why = "an accepted message does not encode";
        goto done;
    }
    if (pr_decode(&m2, a, alen) != 0) {
        why = "the encoding of an accepted message does not decode";
        goto done;
    }
    rc = pr_encode(&m2, &b, &blen);
    if (m.type == PR_MSG_COMPLETE && m2.body.complete.payload.len != m.body.complete.payload.len)
        why = "the payload changed length in a round trip";
    pr_msg_free(&m2);
    if (rc != 0 || alen != blen || memcmp(a, b, alen) != 0) {
        why = "encode(decode(encode(x))) differs from encode(x)";
        goto done;
    }
    if (m.type == PR_MSG_COMPLETE && why == NULL) {
        pr_init();
        pr_key_from_seed(&k, seed, sizeof seed);
        rc = pr_complete_verify(&m.body.complete, k.pk, sizeof k.pk, "farm.example.org",
            m.body.complete.ts, NULL);
        if (rc == 0)
            why = "a completion verified under a key that signed nothing";
        else if (!oracle_known_error(rc))
            why = "verify returned a code outside the error list";
    }
done:
    free(a);
    free(b);
    pr_msg_free(&m);
    return why;
}

static const char *oracle_batch(const uint8_t *data, size_t size)
{
    const char *why = NULL;
    pr_batch bt, bt2;
    void *arena = NULL, *arena2 = NULL;
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;

    int rc = pr_decode_batch(&bt, &arena, data, size);
    if (rc != 0)
        return oracle_known_error(rc) && arena == NULL ? NULL : "bad failure from decode_batch";
    if (pr_encode_batch(&bt, &a, &alen) != 0)
        why = "an accepted batch does not encode";
    else if (pr_decode_batch(&bt2, &arena2, a, alen) != 0)
        why = "the encoding of an accepted batch does not decode";
    else if (pr_encode_batch(&bt2, &b, &blen) != 0 || alen != blen || memcmp(a, b, alen) != 0)
        why = "encode(decode(encode(x))) differs from encode(x)";
    free(a);
    free(b);
    pr_arena_free(arena);
    pr_arena_free(arena2);
    return why;
}

#endif
