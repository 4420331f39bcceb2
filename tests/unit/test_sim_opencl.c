/*
 * test_sim_opencl.c — the OpenCL backend (pocl on machines without a GPU)
 * gives the same result bits as the CPU backend, for both kernels, several
 * parameter sets and several item ranges; the device program is the
 * kernels' shared headers compiled at run time.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "base/json.h"
#include "tests/support/xorshift.h"

static sim_cl *cl;

static void open_device(void)
{
    char err[4096];
    int rc = sim_cl_create(&cl, err, sizeof err);
    cr_assert_eq(rc, 0, "sim_cl_create: %s\n%s", sf_strerror(rc), err);
}

static void close_device(void)
{
    sim_cl_destroy(cl);
}

static sim_job *job_json(const char *kernel, const char *json, uint64_t seed)
{
    msgpack_sbuffer b;
    sim_job *job = NULL;
    char err[256];
    msgpack_sbuffer_init(&b);
    int rc = sf_json_to_msgpack(json, strlen(json), &b, err, sizeof err);
    if (rc == 0)
        rc = sim_job_create(&job, kernel, b.data, b.size, seed, err, sizeof err);
    msgpack_sbuffer_destroy(&b);
    cr_assert_eq(rc, 0, "%s: %s", json, err);
    return job;
}

static void same_bits(const char *kernel, const char *json, uint64_t seed, uint64_t first, uint64_t n)
{
    sim_job *job = job_json(kernel, json, seed);
    sim_stats cpu[SIM_MAX_OUT], dev[SIM_MAX_OUT];
    cr_assert_eq(sim_run_cpu(job, first, n, cpu), 0);
    int rc = sim_cl_run(cl, job, first, n, dev);
    cr_assert_eq(rc, 0, "sim_cl_run: %s", sf_strerror(rc));
    for (int o = 0; o < sim_job_nout(job); o++) {
        cr_assert_eq(sim_stats_count(&dev[o]), n);
        cr_assert(sim_stats_equal(&cpu[o], &dev[o]),
            "%s %s [%llu, +%llu) output %s: CPU mean %.17g, OpenCL %.17g", kernel, json,
            (unsigned long long)first, (unsigned long long)n, sim_job_output_name(job, o),
            sim_stats_mean(&cpu[o]), sim_stats_mean(&dev[o]));
    }
    sim_job_destroy(job);
}

TestSuite(sim_opencl, .init = open_device, .fini = close_device, .timeout = 120);

/* option parameter sets and item ranges: every style, put and call,
 * antithetic pairs, Greeks, block counters past 2^32 */
static const struct {
    const char *json;
    uint64_t seed, first, n;
} option_sets[] = {
    { "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}", 1, 0, 20000 },
    { "{\"type\": \"put\", \"S0\": 80, \"K\": 100, \"q\": 0.02, \"sigma\": 0.45, \"T\": 3, \"antithetic\": true}", 2, 5, 9999 },
    { "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 95, \"sigma\": 0.3, \"T\": 1, \"steps\": 52}", 3, 1ull << 33, 3001 },
    { "{\"style\": \"asian_geometric\", \"S0\": 100, \"K\": 105, \"sigma\": 0.3, \"T\": 1, \"steps\": 12, \"greeks\": true}", 4, 7, 2000 },
    { "{\"style\": \"barrier\", \"barrier\": 120, \"barrier_type\": \"up_out\", \"S0\": 100, \"K\": 100, \"sigma\": 0.25, \"T\": 1, \"steps\": 50}", 5, 0, 4000 },
    { "{\"style\": \"barrier\", \"barrier\": 85, \"barrier_type\": \"down_in\", \"type\": \"put\", \"S0\": 100, \"K\": 100, \"sigma\": 0.25, \"T\": 1, \"steps\": 50}", 6, 3, 4001 },
    { "{\"S0\": 100, \"K\": 90, \"r\": 0.02, \"sigma\": 0.3, \"T\": 2, \"greeks\": true}", 0xdeadbeefcafef00dull, 1, 5000 },
};

Test(sim_opencl, option_matches_cpu_bits)
{
    for (size_t i = 0; i < sizeof option_sets / sizeof option_sets[0]; i++)
        same_bits("option", option_sets[i].json, option_sets[i].seed, option_sets[i].first, option_sets[i].n);
}

/* combat: a rotation with cooldowns, a cast time, mastery, a proc that
 * resets a cooldown, stat weights */
static void combat_sets(void)
{
    const char *rot = "\"abilities\": [{\"name\": \"big\", \"coefficient\": 3, \"cooldown\": 12, \"mastery\": true},"
        " {\"name\": \"cast\", \"coefficient\": 1.6, \"cast_time\": 2, \"cooldown\": 6, \"hasted_cooldown\": true},"
        " {\"coefficient\": 0.8}], \"proc_chance\": 0.15, \"proc_resets\": \"big\"";
    char a[512], b[512];
    snprintf(a, sizeof a, "{\"power\": 5000, \"crit\": 2000, \"haste\": 1500, \"mastery\": 900, %s}", rot);
    snprintf(b, sizeof b, "{\"power\": 4000, \"crit\": 500, \"versatility\": 3000, \"stat_weights\": true, \"fight_length\": 120, %s}", rot);
    same_bits("combat", a, 42, 0, 1000);
    same_bits("combat", b, 43, 3, 201);
}

Test(sim_opencl, combat_matches_cpu_bits)
{
    combat_sets();
}

Test(sim_opencl, chunked_device_runs_merge_to_the_whole)
{
    sim_job *job = job_json("option", "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"steps\": 8}", 9);
    sim_stats whole[1], part[1], merged[1];
    cr_assert_eq(sim_run_cpu(job, 0, 10000, whole), 0);
    sim_stats_init(&merged[0], sim_job_layout(job, 0));
    const uint64_t cuts[] = { 0, 3, 1000, 1001, 7777, 10000 };
    for (int c = 0; c < 5; c++) {
        cr_assert_eq(sim_cl_run(cl, job, cuts[c], cuts[c + 1] - cuts[c], part), 0);
        cr_assert_eq(sim_stats_merge(&merged[0], &part[0]), 0);
    }
    cr_assert(sim_stats_equal(&whole[0], &merged[0]));
    cr_assert_eq(sim_cl_run(cl, job, 0, SIM_MAX_ITEMS + 1, part), SIM_ERANGE);
    sim_job_destroy(job);
}

/* GPUs get groups of 4 items per work item, CPU devices 128 (with the
 * lane-loop hint): narrower programs (other lane orders, other vector
 * code) on the same device must give the same bytes too. */
Test(sim_opencl, other_group_widths_give_the_same_bits)
{
    sim_cl *dflt = cl;
    char err[4096];
    const char *widths[] = { "4", "32", "64" };
    for (int i = 0; i < 3; i++) {
        setenv("SIMFARM_OPENCL_GROUP", widths[i], 1);
        int rc = sim_cl_create(&cl, err, sizeof err);
        unsetenv("SIMFARM_OPENCL_GROUP");
        cr_assert_eq(rc, 0, "%s", err);
        same_bits("option", "{\"style\": \"asian_geometric\", \"S0\": 100, \"K\": 105, \"sigma\": 0.3, \"T\": 1, \"steps\": 12, \"greeks\": true, \"antithetic\": true}", 4, 7, 2001);
        same_bits("combat", "{\"power\": 2000, \"crit\": 3000, \"stat_weights\": true, \"abilities\": [{\"coefficient\": 2, \"cooldown\": 8}, {\"coefficient\": 0.6, \"cast_time\": 1.5}]}", 5, 1, 99);
        sim_cl_destroy(cl);
    }
    cl = dflt;
}

/* The device program's accumulation of one group against sim_acc_add on
 * the host, value by value: values in range (the unchecked vector pass on
 * CPU devices) and groups with NaN, infinities and values past the clamp
 * (the checked pass), whole and partial groups, several outputs. */
static void group_accumulation(void)
{
    static const double odd[] = { NAN, INFINITY, -INFINITY, -0.0, 1e6, -1e9, 1e300 };
    const int w = (int)sim_cl_group_width(cl);
    double *v = malloc(sizeof *v * SIM_MAX_OUT * (size_t)w);
    sim_layout lay[SIM_MAX_OUT];
    sim_acc dev[SIM_MAX_OUT], host[SIM_MAX_OUT];
    uint64_t x = 0x2545f4914f6cdd1dull, saturated = 0;
    cr_assert_not_null(v);
    for (int o = 0; o < SIM_MAX_OUT; o++)
        cr_assert_eq(sim_layout_make(&lay[o], o < 3 ? 1000.0 : 5.0, -30.0 - o, 120.0), 0);
    for (int t = 0; t < 60; t++) {
        int nout = 1 + t % 5;
        for (int o = 0; o < nout; o++)
            for (int l = 0; l < w; l++) {
                double u = xorshift_uniform(&x, 1.0);
                v[o * w + l] = t % 3 == 2 && x % 29 == 0 ? odd[x % 7] : u * (t % 2 ? 200.0 : 1.0);
            }
        int lo = t % 4 == 0 ? 0 : (int)(x % (uint64_t)w);
        int hi = t % 4 == 0 ? w : lo + 1 + (int)((x >> 20) % (uint64_t)(w - lo));
        cr_assert_eq(sim_cl_acc_group(cl, lay, nout, v, lo, hi, dev), 0);
        for (int o = 0; o < nout; o++) {
            sim_acc_zero(&host[o]);
            /* item i of the group sits in lane (i mod 4) w/4 + i/4 */
            for (int i = lo; i < hi; i++)
                sim_acc_add(&host[o], &lay[o], v[o * w + (i & 3) * (w / 4) + (i >> 2)]);
            cr_assert(memcmp(&dev[o], &host[o], sizeof dev[o]) == 0,
                "round %d, output %d, items %d..%d: sum %llx/%llx min %lld/%lld max %lld/%lld saturated %llu/%llu",
                t, o, lo, hi, (unsigned long long)dev[o].sum[0], (unsigned long long)host[o].sum[0],
                (long long)dev[o].min, (long long)host[o].min, (long long)dev[o].max, (long long)host[o].max,
                (unsigned long long)dev[o].saturated, (unsigned long long)host[o].saturated);
            saturated += host[o].saturated;
        }
    }
    cr_assert_gt(saturated, 0, "some groups had values to clamp");
    free(v);
}

Test(sim_opencl, group_accumulation_equals_one_value_at_a_time)
{
    group_accumulation();
}

/* The program and launch shape of a GPU (SIMFARM_OPENCL_PROFILE=gpu) on
 * this device: groups of 4 items without the CPU devices' vector code,
 * the checked accumulation converting to int64, one histogram per output,
 * up to 65,536 work items. No GPU runs the tests; this runs the code a GPU
 * gets. */
Test(sim_opencl, gpu_program_gives_the_same_bits)
{
    sim_cl *dflt = cl;
    char err[4096];
    setenv("SIMFARM_OPENCL_PROFILE", "gpu", 1);
    int rc = sim_cl_create(&cl, err, sizeof err);
    unsetenv("SIMFARM_OPENCL_PROFILE");
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(sim_cl_group_width(cl), 4);
    /* more groups than work items: each takes several */
    same_bits("option", option_sets[0].json, 1, 3, 300001);
    for (size_t i = 0; i < sizeof option_sets / sizeof option_sets[0]; i++)
        same_bits("option", option_sets[i].json, option_sets[i].seed, option_sets[i].first, option_sets[i].n);
    combat_sets();
    group_accumulation();
    sim_cl_destroy(cl);
    cl = dflt;
}
