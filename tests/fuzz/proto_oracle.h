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
 * completion never verifies under a key that signed nothing. The replay
 * guard, driven by a script of arrivals and clock steps, never accepts a pair
 * twice and never grows past its capacity.
 *
 * Each function returns NULL when the property holds, or what broke.
 */
#ifndef SIMFARM_TESTS_FUZZ_PROTO_ORACLE_H
#define SIMFARM_TESTS_FUZZ_PROTO_ORACLE_H

#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/replay.h"
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

/* The replay guard driven by a script: each 4-byte step is (ts delta, nonce,
 * clock delta, flags). Properties: no (ts, nonce) pair is ever accepted
 * twice, whatever the clock does, and the guard never holds more than its
 * capacity. */
static const char *oracle_replay(const uint8_t *data, size_t size)
{
    enum { CAP = 64, MAXSTEPS = 4096 }; /* past the 16 a guard starts with: growing is checked too */
    static uint64_t seen_ts[MAXSTEPS];
    static uint8_t seen_nonce[MAXSTEPS];
    size_t nseen = 0;
    const char *why = NULL;
    pr_replay *g;
    uint64_t ts = 1000000, now = 1000000;
    uint8_t nonce[16];

    if (pr_replay_create(&g, CAP) != 0)
        return "cannot create a guard";
    for (size_t i = 0; i + 4 <= size && i / 4 < MAXSTEPS && why == NULL; i += 4) {
        /* flags bit 0: the clock steps back; bit 1: the ts goes back */
        uint8_t flags = data[i + 3];
        ts = flags & 2 ? ts - (data[i] & 0x3f) : ts + data[i];
        now = flags & 1 ? now - data[i + 2] * 4u : now + data[i + 2] * 4u;
        memset(nonce, 0, sizeof nonce);
        nonce[0] = data[i + 1];
        uint32_t held = pr_replay_size(g);
        int seen = pr_replay_seen(g, ts, nonce);
        if (pr_replay_size(g) != held) {
            why = "a lookup changed the guard";
            break;
        }
        int rc = pr_replay_check(g, ts, nonce, now);
        int dup = 0;
        for (size_t j = 0; j < nseen; j++)
            if (seen_ts[j] == ts && seen_nonce[j] == nonce[0])
                dup = 1;
        if (rc == 0 && dup)
            why = "a (ts, nonce) pair was accepted twice";
        else if (rc != 0 && rc != PR_EREPLAY && rc != PR_EREPLAYOLD)
            why = "the guard returned an unexpected code";
        else if (rc == PR_EREPLAY && !dup)
            why = "a new pair was called a replay";
        else if (seen != 0 && rc == 0)
            why = "a pair the lookup refused was accepted";
        else if (seen == PR_EREPLAY && !dup)
            why = "the lookup called a new pair a replay";
        else if (pr_replay_size(g) > CAP)
            why = "the guard holds more than its capacity";
        if (rc == 0) {
            seen_ts[nseen] = ts;
            seen_nonce[nseen] = nonce[0];
            nseen++;
        }
    }
    pr_replay_destroy(g);
    return why;
}

#endif
