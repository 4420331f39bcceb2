/*
 * bench_sim_stages.c — where a European path's time goes: each lane
 * function of sim/dev.h and the option kernel's group function, at
 * SIM_W = 128 as the CPU and WebAssembly loops run them, called over and
 * over on changing inputs. Nanoseconds per item, the best of several
 * rounds after warm-up rounds (a WebAssembly engine moves a function to its
 * optimizing tier between calls, never during one). The emcc build prints
 * the same names ending in _wasm, under node or in a browser's Web Worker.
 *
 *   BENCH sim_stage_philox_cpu   a quarter Philox4x32-10 block per item
 *   BENCH sim_stage_normals_cpu  Box–Muller, one normal per item
 *   BENCH sim_stage_exp_cpu      e^x (with a copy of its 128 inputs)
 *   BENCH sim_stage_acc_cpu      fixed-point accumulation of one output
 *                                (with a copy of its 128 values)
 *   BENCH sim_stage_group_cpu    the European group (steps 1): Philox,
 *                                normals, the step, e^x and the payoff
 *   BENCH sim_stage_path_cpu     group + accumulation: a whole path
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-trapping-math") /* as sim/option.c */
#endif
#define SIM_W 128
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/option_dev.h"
#include "sim/sim.h"
#include "sim/sim_int.h"
#include "base/json.h"

#ifdef __EMSCRIPTEN__
#define SUFFIX "wasm"
#else
#define SUFFIX "cpu"
#endif

enum { CALLS = 8192, POOL = 64, WARMUP = 5, ROUNDS = 7 };

static const char *european = "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}";

static sim_u32 words[POOL][SIM_W];
static double normals[POOL][SIM_W], logs[POOL][SIM_W], prices[POOL][SIM_W];
static const sim_job *job;
static volatile double sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One round of each stage: CALLS calls over the pool's inputs. Kept out of
 * line so that each round is a call of its own. */
static __attribute__((noinline)) SIM_CPU_CLONES void round_philox(uint64_t r)
{
    sim_u32 w[SIM_W];
    sim_u32 x = 0;
    for (uint64_t i = 0; i < CALLS; i++) {
        sim_philox_blocks(0, SIM_OPT_STREAM, (r * CALLS + i) * SIM_Q, 7, 9, w);
        x ^= w[i % SIM_W];
    }
    sink = x;
}

static __attribute__((noinline)) SIM_CPU_CLONES void round_normals(uint64_t r)
{
    double z[SIM_W], x = 0;
    for (uint64_t i = 0; i < CALLS; i++) {
        sim_normals(words[(r + i) % POOL], z);
        x += z[i % SIM_W];
    }
    sink = x;
}

static __attribute__((noinline)) SIM_CPU_CLONES void round_exp(uint64_t r)
{
    double e[SIM_W], x = 0;
    for (uint64_t i = 0; i < CALLS; i++) {
        memcpy(e, logs[(r + i) % POOL], sizeof e);
        sim_exp_lanes(e, SIM_W);
        x += e[i % SIM_W];
    }
    sink = x;
}

static sim_u64 alt[3 * SIM_MAX_OUT][SIM_HIST_BINS + 2];

static __attribute__((noinline)) SIM_CPU_CLONES void round_acc(uint64_t r)
{
    sim_acc acc;
    double out[SIM_MAX_OUT][SIM_W];
    sim_acc_zero(&acc);
    for (uint64_t i = 0; i < CALLS; i++) {
        memcpy(out[0], prices[(r + i) % POOL], sizeof out[0]);
        sim_acc_lanes2(&acc, alt, job->layout, 1, out, 0, SIM_W);
    }
    sink = (double)acc.sum[0];
}

static __attribute__((noinline)) SIM_CPU_CLONES void round_group(uint64_t r)
{
    double out[SIM_MAX_OUT][SIM_W], x = 0;
    for (uint64_t i = 0; i < CALLS; i++) {
        sim_option_group(job->params, 7, 9, (r * CALLS + i) * SIM_W, out);
        x += out[0][i % SIM_W];
    }
    sink = x;
}

static __attribute__((noinline)) SIM_CPU_CLONES void round_path(uint64_t r)
{
    sim_acc acc;
    double out[SIM_MAX_OUT][SIM_W];
    sim_acc_zero(&acc);
    for (uint64_t i = 0; i < CALLS; i++) {
        sim_option_group(job->params, 7, 9, (r * CALLS + i) * SIM_W, out);
        sim_acc_lanes2(&acc, alt, job->layout, 1, out, 0, SIM_W);
    }
    sink = (double)acc.sum[0];
}

/* ns per item: the best of ROUNDS rounds after WARMUP. */
static double ns_per_item(void (*round)(uint64_t))
{
    double best = 1e30;
    for (int r = 0; r < WARMUP + ROUNDS; r++) {
        double t = now();
        round((uint64_t)r);
        t = now() - t;
        if (r >= WARMUP && t < best)
            best = t;
    }
    return best * 1e9 / ((double)CALLS * SIM_W);
}

int main(void)
{
    msgpack_sbuffer b;
    sim_job *j = NULL;
    char err[256];
    msgpack_sbuffer_init(&b);
    int rc = sf_json_to_msgpack(european, strlen(european), &b, err, sizeof err);
    if (rc == 0)
        rc = sim_job_create(&j, "option", b.data, b.size, 2024, err, sizeof err);
    msgpack_sbuffer_destroy(&b);
    if (rc != 0) {
        fprintf(stderr, "bench_sim_stages: %s\n", err);
        return 1;
    }
    job = j;
    /* inputs as the kernel makes them: words, their normals, log prices
     * after one step, the discounted payoffs */
    const sim_option_params *p = job->params;
    for (int i = 0; i < POOL; i++) {
        sim_philox_blocks(1, SIM_OPT_STREAM, (uint64_t)i * SIM_Q, 3, 5, words[i]);
        sim_normals(words[i], normals[i]);
        for (int l = 0; l < SIM_W; l++)
            logs[i][l] = p->scen[0].ln_s0 + (p->scen[0].drift_dt + p->scen[0].vol_sqrt_dt * normals[i][l]);
        double out[SIM_MAX_OUT][SIM_W];
        sim_option_group(p, 3, 5, (uint64_t)i * SIM_W, out);
        memcpy(prices[i], out[0], sizeof prices[i]);
    }
    static const struct {
        const char *name;
        void (*round)(uint64_t);
    } stages[] = {
        { "philox", round_philox }, { "normals", round_normals }, { "exp", round_exp },
        { "acc", round_acc }, { "group", round_group }, { "path", round_path },
    };
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        printf("BENCH sim_stage_%s_%s %.3g ns/item\n", stages[i].name, SUFFIX, ns_per_item(stages[i].round));
    sim_job_destroy(j);
    return 0;
}
