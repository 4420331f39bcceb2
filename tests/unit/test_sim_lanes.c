/*
 * test_sim_lanes.c — dev.h's lane functions at the CPU loops' width
 * against their one-item forms: sim_acc_lanes2 (whichever path this
 * processor takes: AVX-512, AVX2 or the exact split) must give the
 * accumulator sim_acc_add gives value by value, for whole and partial
 * groups, negative values, values next to the clamp, halfway between
 * multiples of 2^32 once scaled, NaN and infinities; sim_philox_blocks
 * must give sim_philox's words in lane order.
 */
#define SIM_W 128
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "sim/option_dev.h"
#include "sim/sim.h"
#include "tests/support/xorshift.h"

static uint64_t rs = 0x9e3779b97f4a7c15ull;

/* A value of one of the shapes the accumulator must get right; scale is
 * the layout's, 2^frac_bits. */
static double pick(int shape, double scale)
{
    switch (shape) {
    case 0: return xorshift_uniform(&rs, 1.0);
    case 1: return xorshift_uniform(&rs, 200.0);
    case 2: return fabs(xorshift_uniform(&rs, 3000.0));
    /* q + 2^31 for q a multiple of 2^32, ties of the split's rounding */
    case 3: return (ldexp((double)(int64_t)(xorshift64(&rs) % 4096) - 2048.0, 32) + 0x1p31) / scale;
    /* as large as a value can be in range: its square, scaled, stays
     * below 2^56 while it is below 2^55.5 */
    case 4:
        return (xorshift64(&rs) & 1 ? 1.0 : -1.0) * (1.0 + fabs(xorshift_uniform(&rs, 0.41))) * 0x1p55 / scale;
    default: {
        static const double odd[] = { NAN, INFINITY, -INFINITY, -0.0, 0x1p57, -0x1p60, 1e300 };
        return odd[xorshift64(&rs) % (sizeof odd / sizeof odd[0])] / (xorshift64(&rs) & 1 ? 1.0 : scale);
    }
    }
}

Test(sim_lanes, accumulation_equals_one_value_at_a_time)
{
    sim_layout lay[SIM_MAX_OUT];
    sim_acc lanes[SIM_MAX_OUT], one[SIM_MAX_OUT];
    static sim_u64 alt[3 * SIM_MAX_OUT][SIM_HIST_BINS + 2];
    double out[SIM_MAX_OUT][SIM_W];
    uint64_t saturated = 0;
    for (int o = 0; o < SIM_MAX_OUT; o++)
        cr_assert_eq(sim_layout_make(&lay[o], o < 4 ? 1000.0 : 3.0, -20.0 - o, 150.0), 0);
    for (int t = 0; t < 6000; t++) {
        /* from zero each round, so that every round's min and max count */
        for (int o = 0; o < SIM_MAX_OUT; o++) {
            sim_acc_zero(&lanes[o]);
            sim_acc_zero(&one[o]);
        }
        int nout = 1 + t % 5;
        /* groups where every value is in range (the vector paths' common
         * case) and groups with some odd ones */
        int odd = t % 4 == 3;
        for (int o = 0; o < nout; o++)
            for (int l = 0; l < SIM_W; l++) {
                int shape = odd && xorshift64(&rs) % 8 == 0 ? 5 : (int)((t / 4 + o) % 5);
                out[o][l] = pick(shape, lay[o].scale);
            }
        int lo = t % 3 == 0 ? 0 : (int)(xorshift64(&rs) % SIM_W);
        int hi = t % 3 == 0 ? SIM_W : lo + 1 + (int)(xorshift64(&rs) % (uint64_t)(SIM_W - lo));
        memset(alt, 0, sizeof alt);
        sim_acc_lanes2(lanes, t & 1 ? alt : NULL, lay, nout, out, lo, hi);
        for (int o = 0; o < nout; o++) {
            for (int k = 0; k < SIM_HIST_BINS + 2; k++)
                lanes[o].hist[k] += alt[o][k] + alt[SIM_MAX_OUT + o][k] + alt[2 * SIM_MAX_OUT + o][k];
            for (int i = lo; i < hi; i++)
                sim_acc_add(&one[o], &lay[o], out[o][sim_lane_of(i)]);
            cr_assert(memcmp(&lanes[o], &one[o], sizeof lanes[o]) == 0,
                "round %d, output %d, items %d..%d: count %llu/%llu sum %llx/%llx min %lld/%lld max %lld/%lld "
                "saturated %llu/%llu", t, o, lo, hi, (unsigned long long)lanes[o].count,
                (unsigned long long)one[o].count, (unsigned long long)lanes[o].sum[0],
                (unsigned long long)one[o].sum[0], (long long)lanes[o].min, (long long)one[o].min,
                (long long)lanes[o].max, (long long)one[o].max, (unsigned long long)lanes[o].saturated,
                (unsigned long long)one[o].saturated);
            saturated += one[o].saturated;
        }
    }
    cr_assert_gt(saturated, 0, "the odd values were clamped");
}

Test(sim_lanes, philox_blocks_are_philox_in_lane_order)
{
    sim_u32 w[SIM_W];
    for (int t = 0; t < 200; t++) {
        sim_u32 c0 = (sim_u32)xorshift64(&rs), c1 = (sim_u32)xorshift64(&rs);
        sim_u32 k0 = (sim_u32)xorshift64(&rs), k1 = (sim_u32)xorshift64(&rs);
        /* block numbers across a carry into the counter's high word */
        sim_u64 blk0 = t < 40 ? 0xffffffffull - 20 + (sim_u64)t : xorshift64(&rs) >> (t % 3 * 16);
        sim_philox_blocks(c0, c1, blk0, k0, k1, w);
        for (int b = 0; b < SIM_Q; b++) {
            sim_u64 blk = blk0 + (sim_u64)b;
            sim_u32x4 r = sim_philox(c0, c1, (sim_u32)blk, (sim_u32)(blk >> 32), k0, k1);
            for (int k = 0; k < 4; k++)
                cr_assert_eq(w[k * SIM_Q + b], r.v[k], "round %d, block %d, word %d", t, b, k);
        }
    }
}
