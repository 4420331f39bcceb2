/*
 * test_result_digest.c — the result digest (sc_result_digest,
 * docs/kernels.md "The result digest"): the SHA-256 of sc_result_encode's
 * bytes, the same for any split of the items into chunks merged in any
 * order, and different when any value of the result differs.
 */
#include "sched/sched.h"
#include "sim/sim.h"

#include <criterion/criterion.h>
#include <math.h>
#include <sodium.h>
#include <string.h>

enum { NOUT = 2, ITEMS = 1000 };

static sim_layout layout;

/* outputs of items [first, first + count): x and -x/3 for x = item/7 */
static void stats_of(uint64_t first, uint64_t count, sim_stats *s)
{
    for (int o = 0; o < NOUT; o++)
        sim_stats_init(&s[o], &layout);
    for (uint64_t i = first; i < first + count; i++) {
        sim_stats_add(&s[0], (double)i / 7.0);
        sim_stats_add(&s[1], -(double)i / 21.0);
    }
}

static void setup(void)
{
    cr_assert_eq(sodium_init() >= 0, 1);
    cr_assert_eq(sim_layout_make(&layout, 1e3, -100, 200), 0);
}

TestSuite(result_digest, .init = setup);

Test(result_digest, is_the_sha256_of_the_result_bytes)
{
    sim_stats s[NOUT];
    stats_of(0, ITEMS, s);
    unsigned char buf[NOUT * (4 + SIM_STATS_MAX_ENCODED)], h[crypto_hash_sha256_BYTES];
    size_t len = 0;
    cr_assert_eq(sc_result_encode(s, NOUT, buf, sizeof buf, &len), 0);
    crypto_hash_sha256(h, buf, len);
    char want[SC_DIGEST_LEN + 1] = "sha256:", got[SC_DIGEST_LEN + 1];
    sodium_bin2hex(want + 7, sizeof want - 7, h, sizeof h);
    cr_assert_eq(sc_result_digest(s, NOUT, got), 0);
    cr_assert_str_eq(got, want);
    cr_assert_eq(strlen(got), SC_DIGEST_LEN);
}

Test(result_digest, any_chunking_and_merge_order_gives_the_same_digest)
{
    sim_stats whole[NOUT], parts[NOUT], piece[NOUT];
    stats_of(0, ITEMS, whole);
    /* chunks of 1, 2, 3, ... items, merged from the last to the first */
    uint64_t ends[64], n = 0;
    for (uint64_t at = 0, k = 1; at < ITEMS; at += k, k++)
        ends[n++] = at + k < ITEMS ? at + k : ITEMS;
    for (int o = 0; o < NOUT; o++)
        sim_stats_init(&parts[o], &layout);
    for (uint64_t c = n; c-- > 0;) {
        uint64_t first = c ? ends[c - 1] : 0;
        stats_of(first, ends[c] - first, piece);
        for (int o = 0; o < NOUT; o++)
            cr_assert_eq(sim_stats_merge(&parts[o], &piece[o]), 0);
    }
    char a[SC_DIGEST_LEN + 1], b[SC_DIGEST_LEN + 1];
    cr_assert_eq(sc_result_digest(whole, NOUT, a), 0);
    cr_assert_eq(sc_result_digest(parts, NOUT, b), 0);
    cr_assert_str_eq(a, b);
}

Test(result_digest, a_different_result_has_a_different_digest)
{
    sim_stats s[NOUT], t[NOUT];
    char base[SC_DIGEST_LEN + 1], other[SC_DIGEST_LEN + 1];
    stats_of(0, ITEMS, s);
    cr_assert_eq(sc_result_digest(s, NOUT, base), 0);
    /* one item more, one item less, one output fewer, one value moved by
     * the smallest step the layout keeps */
    stats_of(0, ITEMS + 1, t);
    cr_assert_eq(sc_result_digest(t, NOUT, other), 0);
    cr_assert_str_neq(base, other);
    stats_of(1, ITEMS - 1, t);
    cr_assert_eq(sc_result_digest(t, NOUT, other), 0);
    cr_assert_str_neq(base, other);
    cr_assert_eq(sc_result_digest(s, 1, other), 0);
    cr_assert_str_neq(base, other);
    /* the same items, the last one's first output one fixed-point step up */
    for (int o = 0; o < NOUT; o++)
        sim_stats_init(&t[o], &layout);
    for (uint64_t i = 0; i < ITEMS; i++) {
        double x = (double)i / 7.0;
        sim_stats_add(&t[0], i + 1 < ITEMS ? x : x + ldexp(1.0, -(int)layout.frac_bits));
        sim_stats_add(&t[1], -(double)i / 21.0);
    }
    cr_assert_eq(sc_result_digest(t, NOUT, other), 0);
    cr_assert_str_neq(base, other);
    cr_assert_eq(sc_result_digest(s, 0, other), SC_EINVAL);
}
