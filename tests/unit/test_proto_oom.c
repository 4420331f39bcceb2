/*
 * test_proto_oom.c — proto under a failing allocator: every allocation of a
 * decode, an encode and a seal is made to fail in turn, and each must either
 * succeed or return PR_ENOMEM with every allocation it made given back.
 *
 * The failing allocator replaces malloc/calloc/realloc/free in this program
 * and forwards to glibc's __libc_* functions. AddressSanitizer owns those
 * symbols in the sanitizer build, so there the injection is left out and only
 * the allocation-free sanity test runs.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/sign.h"

#if defined(__SANITIZE_ADDRESS__)
#define INJECT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INJECT 0
#endif
#endif
#ifndef INJECT
#define INJECT 1
#endif

#if INJECT
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);

/* Only this test process's own thread allocates while armed. */
static long countdown = -1; /* allocations left before one fails; -1: never */
static long live;           /* allocations made while counting, not yet freed */
static int counting;

static int fail_now(void)
{
    if (countdown < 0)
        return 0;
    if (countdown == 0)
        return 1;
    countdown--;
    return 0;
}

void *malloc(size_t n)
{
    if (fail_now())
        return NULL;
    void *p = __libc_malloc(n);
    if (p && counting)
        live++;
    return p;
}

void *calloc(size_t a, size_t b)
{
    if (fail_now())
        return NULL;
    void *p = __libc_calloc(a, b);
    if (p && counting)
        live++;
    return p;
}

void *realloc(void *old, size_t n)
{
    if (fail_now())
        return NULL;
    void *p = __libc_realloc(old, n);
    if (p && !old && counting)
        live++;
    return p;
}

void free(void *p)
{
    if (p && counting)
        live--;
    __libc_free(p);
}

static void arm(long n)
{
    live = 0;
    counting = 1;
    countdown = n;
}

static void disarm(void)
{
    countdown = -1;
    counting = 0;
}
#endif

static uint8_t *sample_complete(size_t *len, pr_key *k)
{
    /* Large enough that decoding needs several arena chunks. */
    static pr_result rs[64];
    static const uint8_t data[1024] = { 1 };
    uint8_t seed[32] = { 7 }, *payload = NULL, *frame = NULL;
    pr_msg m;
    cr_assert_eq(pr_init(), 0);
    cr_assert_eq(pr_key_from_seed(k, seed, 32), 0);
    for (int i = 0; i < 64; i++)
        rs[i] = (pr_result){ .chunk = (uint64_t)i, .start = 0, .count = 1, .data = { data, sizeof data } };
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE;
    m.body.complete.batch.results = rs;
    m.body.complete.batch.nresults = 64;
    cr_assert_eq(pr_complete_seal(&m.body.complete, &payload, k, "h", 1), 0);
    cr_assert_eq(pr_encode(&m, &frame, len), 0);
    free(payload);
    return frame;
}

Test(proto_oom, sample_round_trips)
{
    size_t len;
    pr_key k;
    pr_msg m;
    uint8_t *f = sample_complete(&len, &k);
    cr_assert_eq(pr_decode(&m, f, len), 0);
    cr_assert_eq(pr_complete_verify(&m.body.complete, k.pk, 32, "h", 1, NULL), 0);
    pr_msg_free(&m);
    free(f);
}

#if INJECT
Test(proto_oom, every_allocation_of_a_decode_may_fail)
{
    size_t len;
    pr_key k;
    uint8_t *f = sample_complete(&len, &k);
    long n;
    for (n = 0; n < 1000; n++) {
        pr_msg m;
        arm(n);
        int rc = pr_decode(&m, f, len);
        disarm();
        if (rc == 0) {
            pr_msg_free(&m);
            break;
        }
        cr_assert_eq(rc, PR_ENOMEM, "allocation %ld failed: got %s", n, pr_errname(rc));
        cr_assert_eq(live, 0, "allocation %ld failed: %ld allocations left behind", n, live);
        cr_assert_null(m.arena);
    }
    cr_assert_gt(n, 3, "a decode of this size allocates several times");
    cr_assert_lt(n, 1000);
    free(f);
}

Test(proto_oom, every_allocation_of_an_encode_and_a_seal_may_fail)
{
    size_t len;
    pr_key k;
    pr_msg m;
    uint8_t *f = sample_complete(&len, &k);
    cr_assert_eq(pr_decode(&m, f, len), 0);
    long n;
    for (n = 0; n < 1000; n++) {
        uint8_t *out = (uint8_t *)1;
        size_t olen;
        arm(n);
        int rc = pr_encode(&m, &out, &olen);
        disarm();
        if (rc == 0) {
            free(out);
            break;
        }
        cr_assert_eq(rc, PR_ENOMEM, "allocation %ld: %s", n, pr_errname(rc));
        cr_assert_null(out);
        cr_assert_eq(live, 0);
    }
    cr_assert_gt(n, 0);
    for (n = 0; n < 1000; n++) {
        uint8_t *payload = (uint8_t *)1;
        pr_complete c = m.body.complete;
        arm(n);
        int rc = pr_complete_seal(&c, &payload, &k, "h", 2);
        disarm();
        if (rc == 0) {
            free(payload);
            break;
        }
        cr_assert_eq(rc, PR_ENOMEM, "allocation %ld: %s", n, pr_errname(rc));
        cr_assert_null(payload);
        cr_assert_eq(c.ts, m.body.complete.ts, "a failed seal leaves c unchanged");
        cr_assert_eq(live, 0);
    }
    cr_assert_gt(n, 0);
    pr_msg_free(&m);
    free(f);
}
#endif
