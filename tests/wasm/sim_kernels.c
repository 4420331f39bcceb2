/*
 * sim_kernels.c — the kernels built natively and with emcc: both builds
 * print the same transcript, one "key value" line each: Philox known
 * answers, the bits of the deterministic math at sample points, and the
 * encoded statistics of both kernels for several parameter sets, whole and
 * in chunks, and hashes of the bits of dev.h's lane functions (Philox
 * blocks, normals, e^x, accumulation) on pseudo-random and edge inputs.
 * The native build also runs every set through OpenCL (lines
 * "opencl.<set>") so the test can hold CPU, OpenCL and WebAssembly to the
 * same bytes.
 */
/* The lane functions at the width the CPU and WebAssembly loops use, so
 * the WebAssembly SIMD paths of dev.h are the ones compared. */
#define SIM_W 128
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/fnv.h"
#include "base/json.h"
#include "sim/option_dev.h"
#include "sim/sim.h"
#include "tests/support/xorshift.h"

static const struct {
    const char *name, *kernel, *json;
    uint64_t seed, first, count;
} sets[] = {
    { "european_call", "option", "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}", 1, 0, 20000 },
    { "european_put_anti", "option", "{\"type\": \"put\", \"S0\": 90, \"K\": 100, \"q\": 0.03, \"sigma\": 0.4, \"T\": 2, \"antithetic\": true}", 2, 3, 10001 },
    { "asian_arith", "option", "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 100, \"r\": 0.03, \"sigma\": 0.3, \"T\": 1, \"steps\": 52}", 3, 1000, 3000 },
    { "asian_geom_greeks", "option", "{\"style\": \"asian_geometric\", \"S0\": 100, \"K\": 95, \"sigma\": 0.25, \"T\": 0.5, \"steps\": 12, \"greeks\": true}", 4, 0, 3000 },
    { "barrier_up_out", "option", "{\"style\": \"barrier\", \"barrier\": 125, \"barrier_type\": \"up_out\", \"S0\": 100, \"K\": 100, \"sigma\": 0.3, \"T\": 1, \"steps\": 100}", 5, 7, 2000 },
    { "barrier_down_in", "option", "{\"style\": \"barrier\", \"barrier\": 80, \"barrier_type\": \"down_in\", \"type\": \"put\", \"S0\": 100, \"K\": 100, \"sigma\": 0.3, \"T\": 1, \"steps\": 100}", 6, 0, 2000 },
    { "combat", "combat", "{\"power\": 5000, \"crit\": 2000, \"haste\": 1500, \"mastery\": 900, \"versatility\": 700, "
        "\"abilities\": [{\"name\": \"big\", \"coefficient\": 3, \"cooldown\": 12, \"mastery\": true}, "
        "{\"coefficient\": 1.6, \"cast_time\": 2, \"cooldown\": 6, \"hasted_cooldown\": true}, {\"coefficient\": 0.8}], "
        "\"proc_chance\": 0.15, \"proc_resets\": \"big\"}", 7, 0, 500 },
    { "combat_weights", "combat", "{\"power\": 3000, \"crit\": 1000, \"haste\": 3000, \"fight_length\": 90, \"stat_weights\": true, "
        "\"abilities\": [{\"coefficient\": 2, \"cooldown\": 8}, {\"coefficient\": 0.6}]}", 8, 5, 150 },
};

static void print_bits(const char *key, double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    printf("%s %016llx\n", key, (unsigned long long)b);
}

static void print_stats(const char *prefix, const char *set, const sim_job *job, const sim_stats *st)
{
    for (int o = 0; o < sim_job_nout(job); o++) {
        unsigned char buf[SIM_STATS_MAX_ENCODED];
        size_t len = 0;
        if (sim_stats_encode(&st[o], buf, sizeof buf, &len) != 0)
            return;
        printf("%s.%s.%s ", prefix, set, sim_job_output_name(job, o));
        for (size_t i = 0; i < len; i++)
            printf("%02x", buf[i]);
        printf("\n");
    }
    printf("%s.%s.mean %.10g\n", prefix, set, sim_stats_mean(&st[0]));
}

static uint64_t fnv = SF_FNV64_BASIS;

static void hash_bytes(const void *p, size_t n)
{
    fnv = sf_fnv64(fnv, p, n);
}

/* Prints the hash of everything fed since the last call, then resets it. */
static void print_hash(const char *key)
{
    printf("%s %016llx\n", key, (unsigned long long)fnv);
    fnv = SF_FNV64_BASIS;
}

static uint64_t rs = 88172645463325252ull;

/* Every lane function on whole and partial groups, with the edges of
 * their branch-free selects among the inputs. */
static void lane_functions(void)
{
    static sim_u32 w[SIM_W];
    static double z[SIM_W], x[SIM_W], out[SIM_MAX_OUT][SIM_W];
    static sim_layout lay[SIM_MAX_OUT];
    static sim_acc acc[SIM_MAX_OUT];
    static sim_u64 alt[3 * SIM_MAX_OUT][SIM_HIST_BINS + 2];
    static const sim_u32 words[] = { 0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0x1fffffff, 0x20000000,
        0x20000001, 0x3fffffff, 0x40000000, 0x5fffffff, 0x60000000, 0xa0000000, 0xbfffffff, 0xe0000000 };
    static const double args[] = { 0.0, -0.0, 709.0, -708.0, -708.0000000001, 709.0000001, 1e300, -1e300,
        INFINITY, -INFINITY, 5e-324, 0.34657359027997264, -0.34657359027997264 };
    static const double values[] = { NAN, INFINITY, -INFINITY, -0.0, 65536.0, -65536.0, 65535.99999999,
        16.0, 1e18 };
    const int nw = (int)(sizeof words / sizeof words[0]), na = (int)(sizeof args / sizeof args[0]);

    for (int t = 0; t < 300; t++) {
        sim_u32 c0 = (sim_u32)xorshift64(&rs), k0 = (sim_u32)xorshift64(&rs), k1 = (sim_u32)xorshift64(&rs);
        /* blocks across a carry into the counter's high word */
        sim_u64 blk = t < 40 ? 0xffffffffull - 20 + (sim_u64)t : xorshift64(&rs) >> (t % 3 * 16);
        sim_philox_blocks(c0, (sim_u32)t & 3, blk, k0, k1, w);
        hash_bytes(w, sizeof w);
    }
    print_hash("lanes.philox");
    for (int t = 0; t < 1000; t++) {
        for (int l = 0; l < SIM_W; l++)
            w[l] = t < 30 ? words[(l * 7 + t) % nw] ^ (sim_u32)(t & 1 ? 0 : xorshift64(&rs) & 7)
                          : (sim_u32)xorshift64(&rs);
        sim_normals(w, z);
        hash_bytes(z, sizeof z);
        sim_normal_pairs(w, w + SIM_W / 2, z, z + SIM_W / 2, 1 + (int)(xorshift64(&rs) % (SIM_W / 2)));
        hash_bytes(z, sizeof z);
    }
    print_hash("lanes.normals");
    for (int t = 0; t < 1000; t++) {
        double s = t % 4 == 0 ? 800.0 : t % 4 == 1 ? 40.0 : t % 4 == 2 ? 2.0 : 1e-3;
        for (int l = 0; l < SIM_W; l++)
            x[l] = t < 10 ? args[(l + t) % na] : xorshift_uniform(&rs, s);
        sim_exp_lanes(x, t % 3 == 0 ? SIM_W : 1 + (int)(xorshift64(&rs) % SIM_W));
        hash_bytes(x, sizeof x);
    }
    print_hash("lanes.exp");
    for (int o = 0; o < SIM_MAX_OUT; o++) {
        lay[o].scale = (double)(1ull << (40 + o));
        lay[o].sq_scale = (double)(1ull << (20 + o));
        lay[o].hist_lo = -10.0 - o;
        lay[o].hist_hi = 30.0;
        lay[o].hist_inv_width = SIM_HIST_BINS / (40.0 + o);
        sim_acc_zero(&acc[o]);
    }
    memset(alt, 0, sizeof alt);
    for (int t = 0; t < 2000; t++) {
        int nout = 1 + t % 5;
        /* 1e5 2^40 and more pass 2^56: clamped and counted */
        double s = t % 5 == 0 ? 1e5 : t % 5 == 1 ? 50.0 : t % 5 == 2 ? 1e-6 : 20.0;
        for (int o = 0; o < nout; o++)
            for (int l = 0; l < SIM_W; l++)
                out[o][l] = t % 7 == 0 && xorshift64(&rs) % 16 == 0 ? values[xorshift64(&rs) % 9]
                                                                    : xorshift_uniform(&rs, s);
        int lo = t % 3 == 0 ? 0 : (int)(xorshift64(&rs) % SIM_W);
        int hi = t % 3 == 0 ? SIM_W : lo + 1 + (int)(xorshift64(&rs) % (uint64_t)(SIM_W - lo));
        sim_acc_lanes2(acc, t & 1 ? alt : NULL, lay, nout, out, lo, hi);
    }
    hash_bytes(acc, sizeof acc);
    hash_bytes(alt, sizeof alt);
    print_hash("lanes.acc");
}

int main(void)
{
    char key[64];
    sim_u32x4 r = sim_philox(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0);
    printf("philox.pi %08x%08x%08x%08x\n", r.v[0], r.v[1], r.v[2], r.v[3]);
    for (int i = 0; i < 8; i++) {
        double x = -30.0 + 8.37 * i;
        snprintf(key, sizeof key, "exp.%d", i);
        print_bits(key, sim_exp(x));
        snprintf(key, sizeof key, "log.%d", i);
        print_bits(key, sim_log(0.001 + 3.7 * i * i));
        snprintf(key, sizeof key, "ninv.%d", i);
        print_bits(key, sim_ninv(1e-9 + i * 0.14285714));
    }
    lane_functions();

    sim_cl *cl = NULL;
    char err[4096];
    int cl_rc = sim_cl_create(&cl, err, sizeof err);
    if (cl_rc != 0 && cl_rc != SIM_ENOBACKEND)
        fprintf(stderr, "sim_kernels: OpenCL unavailable: %s\n", err);

    int failed = 0;
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        msgpack_sbuffer b;
        sim_job *job = NULL;
        msgpack_sbuffer_init(&b);
        int rc = sf_json_to_msgpack(sets[s].json, strlen(sets[s].json), &b, err, sizeof err);
        if (rc == 0)
            rc = sim_job_create(&job, sets[s].kernel, b.data, b.size, sets[s].seed, err, sizeof err);
        msgpack_sbuffer_destroy(&b);
        if (rc != 0) {
            fprintf(stderr, "sim_kernels: %s: %s\n", sets[s].name, err);
            failed = 1;
            continue;
        }
        sim_stats whole[SIM_MAX_OUT], part[SIM_MAX_OUT], merged[SIM_MAX_OUT];
        uint64_t first = sets[s].first, n = sets[s].count;
        sim_run_cpu(job, first, n, whole);
        print_stats("cpu", sets[s].name, job, whole);
        /* three uneven chunks, merged last to first */
        uint64_t cut1 = n / 3 + 1, cut2 = n / 2 + 3;
        for (int o = 0; o < sim_job_nout(job); o++)
            sim_stats_init(&merged[o], sim_job_layout(job, o));
        const uint64_t a[3] = { cut2, cut1, 0 }, e[3] = { n, cut2, cut1 };
        for (int c = 0; c < 3; c++) {
            sim_run_cpu(job, first + a[c], e[c] - a[c], part);
            for (int o = 0; o < sim_job_nout(job); o++)
                sim_stats_merge(&merged[o], &part[o]);
        }
        print_stats("chunked", sets[s].name, job, merged);
        if (cl_rc == 0) {
            if (sim_cl_run(cl, job, first, n, part) == 0)
                print_stats("opencl", sets[s].name, job, part);
            else
                failed = 1;
        }
        sim_job_destroy(job);
    }
    if (cl_rc == 0)
        sim_cl_destroy(cl);
    return failed;
}
