/*
 * bench_proto.c — what the wire protocol costs per completion batch of 32
 * chunk results (64 bytes of statistics each):
 *   proto_codec   encode the batch and the frame, then decode the frame
 *                 (envelope and signed batch), frames/s
 *   proto_sign    seal a batch (encode + SHA-256 + Ed25519 sign), ops/s
 *   proto_verify  check a received completion (skew, SHA-256, Ed25519
 *                 verify, replay guard), ops/s
 *   proto_codec_chunk_share  codec cost of one chunk result as a share of
 *                 one batch verification (target: at most 10 %)
 * One core each. Built natively and with emcc (names then end in _wasm),
 * since browser nodes run the same code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/msg.h"
#include "proto/replay.h"
#include "proto/sign.h"

#ifdef __EMSCRIPTEN__
#define SUFFIX "_wasm"
#else
#define SUFFIX ""
#endif

#define NRESULTS 32
#define HOST "farm.example.org"
#define T0 1795000000u

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs fn in doubling batches until at least 0.5 s has passed; calls/s. */
static double rate(void (*fn)(void))
{
    long n = 0, batch = 16;
    double t0 = now(), t;
    do {
        for (long i = 0; i < batch; i++)
            fn();
        n += batch;
        batch *= 2;
        t = now() - t0;
    } while (t < 0.5);
    return n / t;
}

static pr_key key;
static pr_result results[NRESULTS];
static uint8_t stats[NRESULTS][64];
static pr_msg msg;
static uint8_t *frame;
static size_t frame_len;
static pr_msg received;
static pr_replay *guard;
static uint64_t counter;
static volatile int sink;

static void fail(const char *what, int rc)
{
    fprintf(stderr, "bench_proto: %s: %s\n", what, sf_strerror(rc));
    exit(1);
}

static void codec(void)
{
    uint8_t *payload = NULL, *f = NULL;
    size_t plen, flen;
    pr_msg m = msg, out;
    int rc;
    if ((rc = pr_encode_batch(&m.body.complete.batch, &payload, &plen)) != 0)
        fail("encode_batch", rc);
    m.body.complete.payload = (pr_bytes){ payload, (uint32_t)plen };
    if ((rc = pr_encode(&m, &f, &flen)) != 0)
        fail("encode", rc);
    if ((rc = pr_decode(&out, f, flen)) != 0)
        fail("decode", rc);
    sink += (int)out.body.complete.batch.nresults;
    pr_msg_free(&out);
    free(f);
    free(payload);
}

static void sign(void)
{
    uint8_t *payload = NULL;
    pr_complete c = msg.body.complete;
    int rc = pr_complete_seal(&c, &payload, &key, HOST, T0);
    if (rc != 0)
        fail("seal", rc);
    sink += c.sig[0];
    free(payload);
}

static void verify(void)
{
    /* A fresh nonce each time, as real traffic has; the guard is the
     * default size, so it runs full after the first thousand calls. */
    pr_complete *c = &received.body.complete;
    counter++;
    memcpy(c->batch.nonce, &counter, sizeof counter);
    int rc = pr_complete_verify(c, key.pk, sizeof key.pk, HOST, T0, NULL);
    if (rc != 0)
        fail("verify", rc);
    rc = pr_replay_check(guard, T0 + counter, c->batch.nonce, T0 + counter);
    if (rc != 0)
        fail("replay", rc);
}

int main(void)
{
    uint8_t seed[32], *payload = NULL;
    int rc;

    memset(seed, 0x5a, sizeof seed);
    if (pr_init() != 0 || pr_key_from_seed(&key, seed, sizeof seed) != 0)
        return 1;
    for (int i = 0; i < NRESULTS; i++) {
        results[i].chunk = 1000 + (uint64_t)i;
        memset(results[i].token, i, sizeof results[i].token);
        results[i].start = (uint64_t)i * 1000000;
        results[i].count = 1000000;
        results[i].elapsed_ms = 4000 + (uint32_t)i;
        memset(stats[i], 0x30 + i, sizeof stats[i]);
        results[i].data = (pr_bytes){ stats[i], sizeof stats[i] };
    }
    msg.type = PR_MSG_COMPLETE;
    msg.id = 123456;
    msg.ts = T0 * 1000ull;
    memset(msg.body.complete.batch.nonce, 0xc0, 16);
    msg.body.complete.batch.job = 77;
    msg.body.complete.batch.results = results;
    msg.body.complete.batch.nresults = NRESULTS;
    if ((rc = pr_complete_seal(&msg.body.complete, &payload, &key, HOST, T0)) != 0)
        fail("seal", rc);
    if ((rc = pr_encode(&msg, &frame, &frame_len)) != 0)
        fail("encode", rc);
    if ((rc = pr_decode(&received, frame, frame_len)) != 0)
        fail("decode", rc);
    if ((rc = pr_replay_create(&guard, PR_REPLAY_DEFAULT)) != 0)
        fail("replay_create", rc);

    double c = rate(codec), s = rate(sign), v = rate(verify);
    printf("BENCH proto_codec%s %.0f frames/s\n", SUFFIX, c);
    printf("BENCH proto_sign%s %.0f ops/s\n", SUFFIX, s);
    printf("BENCH proto_verify%s %.0f ops/s\n", SUFFIX, v);
    /* (1/c)/NRESULTS seconds of codec per chunk, against 1/v per verify. */
    printf("BENCH proto_codec_chunk_share%s %.2f percent\n", SUFFIX, 100.0 * v / (c * NRESULTS));
    fprintf(stderr, "# frame of %d results: %zu bytes\n", NRESULTS, frame_len);

    pr_replay_destroy(guard);
    pr_msg_free(&received);
    free(frame);
    free(payload);
    pr_key_wipe(&key);
    return sink == 12345 ? 2 : 0;
}
