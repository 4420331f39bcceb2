/*
 * test_proto_sign.c — canonical messages, Ed25519 signatures of hellos and
 * completions, clock skew, wrong key and signature lengths, and the replay
 * guard (duplicates, its floor, bounded memory, a clock that steps back).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/replay.h"
#include "proto/sign.h"

#define HOST "farm.example.org"
#define T0 1795000000u

static pr_key key, other;

static void setup(void)
{
    uint8_t seed[32];
    cr_assert_eq(pr_init(), 0);
    memset(seed, 0x11, sizeof seed);
    cr_assert_eq(pr_key_from_seed(&key, seed, sizeof seed), 0);
    memset(seed, 0x22, sizeof seed);
    cr_assert_eq(pr_key_from_seed(&other, seed, sizeof seed), 0);
}

TestSuite(proto_sign, .init = setup);

Test(proto_sign, canonical_bytes)
{
    char buf[PR_CANONICAL_MAX];
    size_t len;
    cr_assert_eq(pr_canonical(buf, sizeof buf, &len, 1795000000, "POST", "h", "/p",
                     (const uint8_t *)"abc", 3), 0);
    static const char want[] = "1795000000\0POST\0h\0/p\0"
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    cr_assert_eq(len, sizeof want - 1);
    cr_assert_arr_eq(buf, want, len);

    cr_assert_eq(pr_canonical(buf, sizeof buf, &len, 0, "POST", "h", "/p", NULL, 0), 0);
    static const char want0[] = "0\0POST\0h\0/p\0"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    cr_assert_eq(len, sizeof want0 - 1);
    cr_assert_arr_eq(buf, want0, len);

    cr_assert_eq(pr_canonical(buf, sizeof buf, &len, 1, "", "h", "/p", NULL, 0), PR_EINVAL);
    cr_assert_eq(pr_canonical(buf, sizeof buf, &len, 1, "POST", NULL, "/p", NULL, 0), PR_EINVAL);
    cr_assert_eq(pr_canonical(buf, 20, &len, 1, "POST", "h", "/p", NULL, 0), PR_EINVAL);
    char longhost[PR_MAX_HOST + 2];
    memset(longhost, 'h', sizeof longhost - 1);
    longhost[sizeof longhost - 1] = '\0';
    cr_assert_eq(pr_canonical(buf, sizeof buf, &len, 1, "POST", longhost, "/p", NULL, 0), PR_EINVAL);
    longhost[PR_MAX_HOST] = '\0';
    cr_assert_eq(pr_canonical(buf, sizeof buf, &len, UINT64_MAX, "POSTPOSTPOSTPOST", longhost, "/p",
                     NULL, 0), 0, "the longest parts fit in PR_CANONICAL_MAX");
}

Test(proto_sign, sign_and_verify)
{
    uint8_t sig[64];
    const uint8_t body[] = "body";
    cr_assert_eq(pr_sign(sig, &key, T0, "POST", HOST, "/x", body, sizeof body), 0);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0, "POST", HOST, "/x", body, sizeof body), 0);
    cr_assert_eq(pr_verify(sig, 64, other.pk, 32, T0, T0, "POST", HOST, "/x", body, sizeof body), PR_ESIG);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0, "POST", "evil.org", "/x", body, sizeof body), PR_ESIG);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0, "PUT", HOST, "/x", body, sizeof body), PR_ESIG);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0, "POST", HOST, "/y", body, sizeof body), PR_ESIG);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0 + 1, T0, "POST", HOST, "/x", body, sizeof body), PR_ESIG);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0, "POST", HOST, "/x", body, sizeof body - 1), PR_ESIG);
    sig[63] ^= 0x80;
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0, "POST", HOST, "/x", body, sizeof body), PR_ESIG);
}

Test(proto_sign, wrong_lengths)
{
    uint8_t sig[64] = { 0 }, seed[33] = { 0 };
    pr_key k;
    cr_assert_eq(pr_key_from_seed(&k, seed, 31), PR_EKEYLEN);
    cr_assert_eq(pr_key_from_seed(&k, seed, 33), PR_EKEYLEN);
    cr_assert_eq(pr_key_from_seed(&k, seed, 64), PR_EKEYLEN);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 31, T0, T0, "POST", HOST, "/x", NULL, 0), PR_EKEYLEN);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 0, T0, T0, "POST", HOST, "/x", NULL, 0), PR_EKEYLEN);
    cr_assert_eq(pr_verify(sig, 63, key.pk, 32, T0, T0, "POST", HOST, "/x", NULL, 0), PR_ESIGLEN);
    cr_assert_eq(pr_verify(sig, 65, key.pk, 32, T0, T0, "POST", HOST, "/x", NULL, 0), PR_ESIGLEN);
    pr_key_wipe(&k);
}

Test(proto_sign, clock_skew_edges)
{
    uint8_t sig[64];
    cr_assert_eq(pr_sign(sig, &key, T0, "POST", HOST, "/x", NULL, 0), 0);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0 + 300, "POST", HOST, "/x", NULL, 0), 0);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0 - 300, "POST", HOST, "/x", NULL, 0), 0);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0 + 301, "POST", HOST, "/x", NULL, 0), PR_ESKEW);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, T0, T0 - 301, "POST", HOST, "/x", NULL, 0), PR_ESKEW);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, 0, UINT64_MAX, "POST", HOST, "/x", NULL, 0), PR_ESKEW);
    cr_assert_eq(pr_verify(sig, 64, key.pk, 32, UINT64_MAX, 0, "POST", HOST, "/x", NULL, 0), PR_ESKEW);
}

Test(proto_sign, hello)
{
    pr_hello h;
    uint8_t nonce[32], nonce2[32];
    memset(&h, 0, sizeof h);
    memset(nonce, 7, sizeof nonce);
    memset(nonce2, 8, sizeof nonce2);
    cr_assert_eq(pr_hello_sign(&h, &key, HOST, T0, nonce), 0);
    cr_assert_arr_eq(h.pk, key.pk, 32);
    cr_assert_eq(pr_hello_verify(&h, HOST, nonce, T0 + 10), 0);
    cr_assert_eq(pr_hello_verify(&h, HOST, nonce2, T0), PR_ESIG, "another session's nonce");
    cr_assert_eq(pr_hello_verify(&h, "other.host", nonce, T0), PR_ESIG);
    cr_assert_eq(pr_hello_verify(&h, HOST, nonce, T0 + 1000), PR_ESKEW);
    memcpy(h.pk, other.pk, 32);
    cr_assert_eq(pr_hello_verify(&h, HOST, nonce, T0), PR_ESIG, "a key that did not sign");
}

/* A sealed completion of nresults results, encoded into a frame and decoded
 * again, as the coordinator receives it. */
static void sealed(pr_msg *out, uint64_t ts, uint8_t nonce_byte, uint32_t nresults)
{
    pr_result *rs = calloc(nresults ? nresults : 1, sizeof *rs);
    uint8_t data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, *payload = NULL, *frame = NULL;
    size_t len;
    pr_msg m;
    for (uint32_t i = 0; i < nresults; i++) {
        rs[i].chunk = i;
        rs[i].start = (uint64_t)i * 1000;
        rs[i].count = 1000;
        rs[i].token[0] = (uint8_t)i;
        rs[i].data = (pr_bytes){ data, sizeof data };
    }
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE;
    m.id = 1;
    memset(m.body.complete.batch.nonce, nonce_byte, 16);
    m.body.complete.batch.job = 9;
    m.body.complete.batch.results = rs;
    m.body.complete.batch.nresults = nresults;
    cr_assert_eq(pr_complete_seal(&m.body.complete, &payload, &key, HOST, ts), 0);
    cr_assert_eq(pr_encode(&m, &frame, &len), 0);
    cr_assert_eq(pr_decode(out, frame, len), 0, "%s", out->err_at);
    cr_assert_eq(out->body.complete.batch.nresults, nresults);
    free(frame);
    free(payload);
    free(rs);
}

Test(proto_sign, complete_seal_and_verify)
{
    pr_msg m;
    sealed(&m, T0, 1, 32);
    pr_complete *c = &m.body.complete;
    cr_assert_eq(pr_complete_verify(c, key.pk, 32, HOST, T0, NULL), 0);
    cr_assert_eq(pr_complete_verify(c, other.pk, 32, HOST, T0, NULL), PR_ESIG);
    cr_assert_eq(pr_complete_verify(c, key.pk, 33, HOST, T0, NULL), PR_EKEYLEN);
    cr_assert_eq(pr_complete_verify(c, key.pk, 32, HOST, T0 + 301, NULL), PR_ESKEW);
    cr_assert_eq(pr_complete_verify(c, key.pk, 32, "evil.org", T0, NULL), PR_ESIG);
    ((uint8_t *)c->payload.ptr)[c->payload.len - 1] ^= 1;
    cr_assert_eq(pr_complete_verify(c, key.pk, 32, HOST, T0, NULL), PR_ESIG);
    pr_msg_free(&m);
}

Test(proto_sign, seal_refuses_a_bad_batch)
{
    pr_complete c;
    uint8_t *payload = (uint8_t *)1;
    memset(&c, 0, sizeof c);
    c.batch.nresults = 2; /* and no results array */
    cr_assert_eq(pr_complete_seal(&c, &payload, &key, HOST, T0), PR_EINVAL);
    cr_assert_null(payload);
    cr_assert_eq(c.ts, 0, "c is unchanged");
}

Test(proto_sign, replayed_completion_is_refused)
{
    pr_replay *g;
    pr_msg a, b;
    cr_assert_eq(pr_replay_create(&g, 16), 0);
    sealed(&a, T0, 1, 2);
    sealed(&b, T0, 2, 2); /* same second, another nonce */
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0, g), 0);
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0 + 5, g), PR_EREPLAY);
    cr_assert_eq(pr_complete_verify(&b.body.complete, key.pk, 32, HOST, T0 + 5, g), 0);
    cr_assert_eq(pr_complete_verify(&b.body.complete, key.pk, 32, HOST, T0 + 6, g), PR_EREPLAY);
    /* after the window the clock check refuses it */
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0 + 301, g), PR_ESKEW);
    pr_msg_free(&a);
    pr_msg_free(&b);
    pr_replay_destroy(g);
}

Test(proto_sign, forged_completion_does_not_touch_the_guard)
{
    pr_replay *g;
    pr_msg a;
    cr_assert_eq(pr_replay_create(&g, 4), 0);
    sealed(&a, T0, 1, 1);
    a.body.complete.sig[0] ^= 1;
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0, g), PR_ESIG);
    cr_assert_eq(pr_replay_size(g), 0);
    a.body.complete.sig[0] ^= 1;
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0, g), 0);
    cr_assert_eq(pr_replay_size(g), 1);
    pr_msg_free(&a);
    pr_replay_destroy(g);
}

/* The guard holds only checked pairs, so a repeat of one is refused before
 * its own signature is checked: a stream of replays costs a lookup each. */
Test(proto_sign, replay_is_refused_before_the_signature_check)
{
    pr_replay *g;
    pr_msg a, b;
    cr_assert_eq(pr_replay_create(&g, 4), 0);
    sealed(&a, T0, 1, 1);
    sealed(&b, T0, 2, 1);
    cr_assert_eq(pr_replay_seen(g, a.body.complete.ts, a.body.complete.batch.nonce), 0);
    cr_assert_eq(pr_replay_size(g), 0, "a lookup records nothing");
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0, g), 0);
    a.body.complete.sig[0] ^= 1;
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0 + 1, g), PR_EREPLAY);
    cr_assert_eq(pr_complete_verify(&a.body.complete, key.pk, 32, HOST, T0 + 301, g), PR_ESKEW,
        "outside the window the clock answers first");
    b.body.complete.sig[0] ^= 1; /* a pair not held: its signature decides */
    cr_assert_eq(pr_complete_verify(&b.body.complete, key.pk, 32, HOST, T0, g), PR_ESIG);
    cr_assert_eq(pr_replay_size(g), 1);
    pr_msg_free(&a);
    pr_msg_free(&b);
    pr_replay_destroy(g);
}

static void nonce_of(uint8_t n[16], uint32_t i)
{
    memset(n, 0, 16);
    memcpy(n, &i, sizeof i);
}

Test(proto_sign, replay_guard_is_bounded_and_never_forgets_unsafely)
{
    pr_replay *g;
    uint8_t n[16];
    const uint32_t cap = 8;
    cr_assert_eq(pr_replay_create(&g, cap), 0);
    /* 100 completions in one second: memory stays at cap pairs */
    for (uint32_t i = 0; i < 100; i++) {
        nonce_of(n, i);
        int rc = pr_replay_check(g, T0 + i, n, T0 + i);
        cr_assert_eq(rc, 0, "pair %u: %s", i, pr_errname(rc));
        cr_assert_leq(pr_replay_size(g), cap);
    }
    /* every pair ever accepted is refused again, held or forgotten */
    for (uint32_t i = 0; i < 100; i++) {
        nonce_of(n, i);
        int rc = pr_replay_check(g, T0 + i, n, T0 + 100);
        cr_assert(rc == PR_EREPLAY || rc == PR_EREPLAYOLD, "pair %u accepted twice (%s)", i, pr_errname(rc));
        cr_assert_eq(rc, i >= 100 - cap ? PR_EREPLAY : PR_EREPLAYOLD, "pair %u", i);
    }
    /* a new pair newer than the floor is fine */
    nonce_of(n, 1000);
    cr_assert_eq(pr_replay_check(g, T0 + 100, n, T0 + 100), 0);
    pr_replay_destroy(g);
}

Test(proto_sign, replay_guard_memory_follows_the_window)
{
    pr_replay *g;
    uint8_t n[16];
    cr_assert_eq(pr_replay_create(&g, 1024), 0);
    cr_assert_eq(pr_replay_room(g), 16, "it starts small");
    /* one completion a second for 2,000 s: only the last 301 are inside
     * the window, so the ring never needs more than 512 */
    for (uint32_t i = 0; i < 2000; i++) {
        nonce_of(n, i);
        cr_assert_eq(pr_replay_check(g, T0 + i, n, T0 + i), 0, "pair %u", i);
        cr_assert_leq(pr_replay_size(g), PR_MAX_SKEW_S + 1);
    }
    cr_assert_eq(pr_replay_room(g), 512);
    /* a burst in one second grows it to the capacity; every pair held is
     * still refused, across the moves growing made */
    for (uint32_t i = 0; i < 1024; i++) {
        nonce_of(n, 5000 + i);
        cr_assert_eq(pr_replay_check(g, T0 + 2000, n, T0 + 2000), 0, "burst pair %u", i);
    }
    cr_assert_eq(pr_replay_room(g), 1024);
    cr_assert_eq(pr_replay_size(g), 1024);
    for (uint32_t i = 0; i < 1024; i++) {
        nonce_of(n, 5000 + i);
        cr_assert_eq(pr_replay_check(g, T0 + 2000, n, T0 + 2000), PR_EREPLAY, "burst pair %u", i);
    }
    pr_replay_destroy(g);
}

Test(proto_sign, replay_guard_survives_a_clock_step_back)
{
    pr_replay *g;
    uint8_t n[16];
    cr_assert_eq(pr_replay_create(&g, 64), 0);
    nonce_of(n, 1);
    cr_assert_eq(pr_replay_check(g, T0, n, T0), 0);
    /* the receiver's clock jumps ahead: the pair ages out */
    nonce_of(n, 2);
    cr_assert_eq(pr_replay_check(g, T0 + 1000, n, T0 + 1000), 0);
    cr_assert_eq(pr_replay_size(g), 1);
    /* and back: the forgotten pair is inside the window again, and still refused */
    nonce_of(n, 1);
    cr_assert_eq(pr_replay_check(g, T0, n, T0), PR_EREPLAYOLD);
    pr_replay_destroy(g);
}

Test(proto_sign, replay_guard_arguments)
{
    pr_replay *g = (pr_replay *)1;
    cr_assert_eq(pr_replay_create(&g, 0), PR_EINVAL);
    cr_assert_null(g);
    cr_assert_eq(pr_replay_create(&g, PR_REPLAY_MAX + 1), PR_EINVAL);
    cr_assert_eq(pr_replay_create(&g, PR_REPLAY_MAX), 0);
    cr_assert_eq(pr_replay_check(g, T0, NULL, T0), PR_EINVAL);
    pr_replay_destroy(g);
    pr_replay_destroy(NULL);
}
