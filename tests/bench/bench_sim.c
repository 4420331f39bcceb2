/*
 * bench_sim.c — throughput of the simulation kernels, one thread:
 * European call, arithmetic Asian with 252 fixings and the combat kernel
 * on the CPU backend, the European call on OpenCL, the three on CUDA
 * where a CUDA device is found. The emcc build prints the same
 * benchmarks with names ending in _wasm.
 *
 *   BENCH sim_european_cpu <paths/s> paths/s ...
 *
 * The native build compares the European call on the CPU backend with
 * single-threaded numpy doing the same Monte Carlo
 * (tests/bench/sim_numpy.py, run with /usr/bin/python3), the emcc build
 * under node ($BUILD/wasm/bench_sim.js, BUILD defaulting to build) and
 * OpenCL, in rounds that run each once (european_rounds):
 *
 *   BENCH sim_european_cpu_over_numpy <median of the rounds> ratio
 *
 * `bench_sim cuda` prints the CUDA lines only: scripts/gpu-check.sh runs it
 * with several SIMFARM_CUDA_THREADS (threads per launch). `bench_sim
 * european N` runs N European paths once, after a warm-up, and prints
 * their speed: the rounds run the emcc build so.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim.h"
#include "base/json.h"

#ifdef __EMSCRIPTEN__
#define SUFFIX "wasm"
#define CPU_CLOCK 0 /* node keeps no CPU-time clock for the program */
#else
#define SUFFIX "cpu"
#define CPU_CLOCK 1
#endif

static const char *european = "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}";
static const char *asian252 = "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 100, \"r\": 0.05, "
                              "\"sigma\": 0.2, \"T\": 1, \"steps\": 252}";
static const char *combat = "{\"power\": 10000, \"crit\": 2500, \"haste\": 2000, \"mastery\": 1500, "
    "\"versatility\": 1000, \"fight_length\": 300, \"proc_chance\": 0.15, \"proc_resets\": \"strike\", "
    "\"abilities\": [{\"name\": \"strike\", \"coefficient\": 2.5, \"cooldown\": 9, \"mastery\": true}, "
    "{\"name\": \"bolt\", \"coefficient\": 1.8, \"cast_time\": 2, \"cooldown\": 6, \"hasted_cooldown\": true}, "
    "{\"name\": \"burst\", \"coefficient\": 1.0, \"cooldown\": 30, \"gcd\": false}, "
    "{\"name\": \"filler\", \"coefficient\": 0.7}]}";

/* Seconds on clock c; where c is not kept (a CPU-time clock under
 * WebAssembly), the monotonic clock's. */
static double clock_s(clockid_t c)
{
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0)
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static sim_job *make(const char *kernel, const char *json)
{
    msgpack_sbuffer b;
    sim_job *job = NULL;
    char err[256];
    msgpack_sbuffer_init(&b);
    int rc = sf_json_to_msgpack(json, strlen(json), &b, err, sizeof err);
    if (rc == 0)
        rc = sim_job_create(&job, kernel, b.data, b.size, 2024, err, sizeof err);
    msgpack_sbuffer_destroy(&b);
    if (rc != 0) {
        fprintf(stderr, "bench_sim: %s\n", err);
        exit(1);
    }
    return job;
}

/* BENCH <kernel>_<backend> <v> <unit>, and its speed per CPU second in a
 * comment where the build keeps a CPU clock and it was measured. */
static void print_speed(const char *kernel, const char *backend, const char *unit, double v, double per_cpu_s)
{
    printf("BENCH %s_%s %.4g %s\n", kernel, backend, v, unit);
    if (CPU_CLOCK && per_cpu_s > 0)
        printf("# %s_%s per CPU second: %.4g\n", kernel, backend, per_cpu_s);
    fflush(stdout);
}

typedef int (*runner)(void *ctx, const sim_job *job, uint64_t first, uint64_t n, sim_stats *out);

static int run_cpu(void *ctx, const sim_job *job, uint64_t first, uint64_t n, sim_stats *out)
{
    (void)ctx;
    return sim_run_cpu(job, first, n, out);
}

/* One run of n items from item first: its wall and CPU seconds (the
 * process's CPU time, all its threads: on a shared machine it does not
 * count the time others took the cores, and for a multi-threaded backend
 * it gives the speed per core). */
static int timed_run(runner r, void *ctx, const sim_job *job, uint64_t first, uint64_t n, double *wall,
    double *cpu)
{
    sim_stats out[SIM_MAX_OUT];
    double t = now(), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    int rc = r(ctx, job, first, n, out);
    *wall = now() - t;
    *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c;
    return rc;
}

/* Doubles n until one run takes at least min_s; 0 if a run fails. */
static uint64_t calibrate(runner r, void *ctx, const sim_job *job, uint64_t n, double min_s)
{
    double t, c;
    for (;;) {
        if (timed_run(r, ctx, job, 0, n, &t, &c) != 0)
            return 0;
        if (t >= min_s || n >= (UINT64_C(1) << 40))
            return n;
        n *= 2;
    }
}

/* Items per second: the best of five runs that each take at least min_s
 * (the machine may be shared: the best run is the least disturbed), and
 * in *per_cpu_s the best by CPU time. */
static double items_per_s(runner r, void *ctx, const sim_job *job, uint64_t n, double min_s,
    double *per_cpu_s)
{
    double best = 1e300, best_c = 1e300, t, c;
    if ((n = calibrate(r, ctx, job, n, min_s)) == 0)
        return 0;
    for (int i = 0; i < 5; i++) {
        if (timed_run(r, ctx, job, n, n, &t, &c) != 0) /* a different range: no caching anywhere */
            return 0;
        best = t < best ? t : best;
        best_c = c < best_c ? c : best_c;
    }
    *per_cpu_s = (double)n / best_c;
    return (double)n / best;
}

#ifndef __EMSCRIPTEN__
static int run_cl(void *ctx, const sim_job *job, uint64_t first, uint64_t n, sim_stats *out)
{
    return sim_cl_run(ctx, job, first, n, out);
}

static int run_cuda(void *ctx, const sim_job *job, uint64_t first, uint64_t n, sim_stats *out)
{
    return sim_cuda_run(ctx, job, first, n, out);
}

/* The three kernels on CUDA device 0, by the clock (a GPU's time is not
 * the process's CPU time); a line saying why when there is none. */
static void bench_cuda(const sim_job *eu, const sim_job *as, const sim_job *cb)
{
    sim_cuda *cu = NULL;
    char err[512];
    if (sim_cuda_create(&cu, err, sizeof err) != 0) {
        fprintf(stderr, "bench_sim: no CUDA: %s\n", err);
        return;
    }
    double unused;
    printf("# CUDA device: %s, %u threads per launch\n", sim_cuda_device(cu), sim_cuda_launch_threads(cu));
    print_speed("sim_european", "cuda", "paths/s", items_per_s(run_cuda, cu, eu, 1 << 24, 1.0, &unused), 0);
    print_speed("sim_asian252", "cuda", "paths/s", items_per_s(run_cuda, cu, as, 1 << 18, 1.0, &unused), 0);
    print_speed("sim_combat", "cuda", "iterations/s", items_per_s(run_cuda, cu, cb, 1 << 18, 1.0, &unused), 0);
    sim_cuda_destroy(cu);
}

/* Runs cmd, a program that prints "BENCH sim_european_<x> <paths/s> ..."
 * and "# sim_european_<x> per CPU second: <v>" for one run of its own;
 * returns the first (0 when it printed none) and puts the second in
 * *per_cpu_s (0 when none). Its other comment lines are passed through
 * when echo is set. */
static double child_rate(const char *cmd, int echo, double *per_cpu_s)
{
    char line[256];
    double v = 0, x;
    *per_cpu_s = 0;
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return 0;
    while (fgets(line, sizeof line, p) != NULL) {
        if (sscanf(line, "BENCH sim_european_%*[a-z] %lf", &x) == 1)
            v = x;
        else if (sscanf(line, "# sim_european_%*[a-z] per CPU second: %lf", &x) == 1)
            *per_cpu_s = x;
        else if (echo || line[0] != '#')
            fputs(line, line[0] == '#' ? stdout : stderr);
    }
    if (pclose(p) != 0)
        return 0;
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { ROUNDS = 5 };

/* A comparison with the CPU backend, one reading per round. */
typedef struct ratio {
    const char *name;
    double v[ROUNDS];
    int n;
} ratio;

static void ratio_add(ratio *q, double num, double den)
{
    if (num > 0 && den > 0)
        q->v[q->n++] = num / den;
}

/* The median of the rounds' ratios as the BENCH line, every round's in a
 * comment. */
static void ratio_print(ratio *q)
{
    if (q->n == 0)
        return;
    double s[ROUNDS];
    memcpy(s, q->v, sizeof s);
    qsort(s, (size_t)q->n, sizeof s[0], cmp_double);
    double med = q->n % 2 ? s[q->n / 2] : 0.5 * (s[q->n / 2 - 1] + s[q->n / 2]);
    printf("BENCH %s %.3g ratio\n# %s, each round:", q->name, med, q->name);
    for (int i = 0; i < q->n; i++)
        printf(" %.3g", q->v[i]);
    printf("\n");
}

/* The European call on the CPU backend against numpy, the emcc build
 * under node (when built) and OpenCL (when a device is found), in ROUNDS
 * rounds: each round runs each of them once, one after the other, so that
 * a comparison is made within the round, under the same conditions; on a
 * shared machine the speed of every program moves from minute to minute.
 * The throughput lines give the best round, the ratios the median round. */
static void european_rounds(const sim_job *eu)
{
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char wasm_js[512], cmd[1024];
    snprintf(wasm_js, sizeof wasm_js, "%s/wasm/bench_sim.js", build);
    int have_numpy = 1, have_wasm = access(wasm_js, R_OK) == 0 && system("node --version >/dev/null 2>&1") == 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cores = cores > 0 ? cores : 1;
    sim_cl *cl = NULL;
    char err[4096];
    if (sim_cl_create(&cl, err, sizeof err) != 0) {
        fprintf(stderr, "bench_sim: no OpenCL: %s\n", err);
        cl = NULL;
    }
    uint64_t n = calibrate(run_cpu, NULL, eu, 1 << 20, 1.0);
    uint64_t n_cl = cl ? calibrate(run_cl, cl, eu, 1 << 20, 1.0) : 0;
    double best[4] = { 0 }, best_c[4] = { 0 }; /* cpu, opencl, numpy, wasm */
    ratio np = { .name = "sim_european_cpu_over_numpy" }, np_c = { .name = "sim_european_cpu_over_numpy_per_cpu_second" };
    ratio oc = { .name = "sim_european_opencl_over_cpu_per_core" },
          oc_c = { .name = "sim_european_opencl_over_cpu_per_cpu_second" };
    ratio wa = { .name = "sim_european_wasm_over_cpu" };
    for (int r = 0; r < ROUNDS && n > 0; r++) {
        double t, c, rate[4] = { 0 }, rate_c[4] = { 0 };
        if (timed_run(run_cpu, NULL, eu, n, n, &t, &c) != 0)
            break;
        rate[0] = (double)n / t;
        rate_c[0] = (double)n / c;
        if (n_cl > 0 && timed_run(run_cl, cl, eu, n_cl, n_cl, &t, &c) == 0) {
            rate[1] = (double)n_cl / t;
            rate_c[1] = (double)n_cl / c;
        }
        /* numpy does about a fifth of our paths per second, node half;
         * one that fails is not run again */
        if (have_numpy) {
            snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/bench/sim_numpy.py %" PRIu64 " 2>&1", n / 5);
            have_numpy = (rate[2] = child_rate(cmd, r == 0, &rate_c[2])) > 0;
        }
        if (have_wasm) {
            snprintf(cmd, sizeof cmd, "NODE_OPTIONS=--no-experimental-fetch node %s european %" PRIu64 " 2>&1",
                wasm_js, n / 2);
            have_wasm = (rate[3] = child_rate(cmd, r == 0, &rate_c[3])) > 0;
        }
        for (int k = 0; k < 4; k++) {
            best[k] = rate[k] > best[k] ? rate[k] : best[k];
            best_c[k] = rate_c[k] > best_c[k] ? rate_c[k] : best_c[k];
        }
        ratio_add(&np, rate[0], rate[2]);
        ratio_add(&np_c, rate_c[0], rate_c[2]);
        ratio_add(&oc, rate[1], rate[0] * (double)cores);
        ratio_add(&oc_c, rate_c[1], rate_c[0]);
        ratio_add(&wa, rate[3], rate[0]);
    }
    static const char *const names[3] = { "cpu", "opencl", "numpy" };
    for (int k = 0; k < 3; k++)
        if (best[k] > 0)
            print_speed("sim_european", names[k], "paths/s", best[k], best_c[k]);
    if (best[3] > 0) /* its BENCH line is the emcc build's own */
        printf("# sim_european_wasm in these rounds: %.4g paths/s\n", best[3]);
    if (cl != NULL)
        printf("# OpenCL device: %s on %ld cores; CPU figures are one thread\n", sim_cl_device(cl), cores);
    ratio *all[] = { &np, &np_c, &oc, &oc_c, &wa };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ratio_print(all[i]);
    fflush(stdout);
    if (cl != NULL)
        sim_cl_destroy(cl);
}
#endif

/* `bench_sim european N`: one run of N European paths after a warm-up,
 * for european_rounds in the native build. */
static int european_once(const sim_job *eu, const char *arg)
{
    char *end;
    unsigned long long n = strtoull(arg, &end, 10);
    double t, c;
    if (*end != '\0' || n == 0 || n > (UINT64_C(1) << 40)) {
        fprintf(stderr, "bench_sim: european: '%s' is not a path count from 1 to 2^40\n", arg);
        return 2;
    }
    for (int i = 0; i < 3; i++) /* the engine optimizes what has run */
        if (timed_run(run_cpu, NULL, eu, 0, n / 8 + 1, &t, &c) != 0)
            return 1;
    if (timed_run(run_cpu, NULL, eu, n, n, &t, &c) != 0)
        return 1;
    print_speed("sim_european", SUFFIX, "paths/s", (double)n / t, (double)n / c);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 0;
    sim_job *eu = make("option", european), *as = make("option", asian252), *cb = make("combat", combat);
    if (argc == 3 && strcmp(argv[1], "european") == 0) {
        rc = european_once(eu, argv[2]);
        goto out;
    }
#ifndef __EMSCRIPTEN__
    if (argc == 2 && strcmp(argv[1], "cuda") == 0) { /* the CUDA lines only */
        bench_cuda(eu, as, cb);
        goto out;
    }
#endif
    if (argc > 1) {
        fprintf(stderr, "usage: bench_sim [cuda | european PATHS]\n");
        rc = 2;
        goto out;
    }
    double a_cpu, c_cpu;
#ifdef __EMSCRIPTEN__
    double e_cpu, e = items_per_s(run_cpu, NULL, eu, 1 << 20, 1.0, &e_cpu);
    print_speed("sim_european", SUFFIX, "paths/s", e, e_cpu);
#else
    european_rounds(eu);
#endif
    double a = items_per_s(run_cpu, NULL, as, 1 << 12, 1.0, &a_cpu);
    print_speed("sim_asian252", SUFFIX, "paths/s", a, a_cpu);
    double c = items_per_s(run_cpu, NULL, cb, 1 << 10, 1.0, &c_cpu);
    print_speed("sim_combat", SUFFIX, "iterations/s", c, c_cpu);
#ifndef __EMSCRIPTEN__
    bench_cuda(eu, as, cb);
#endif
out:
    sim_job_destroy(eu);
    sim_job_destroy(as);
    sim_job_destroy(cb);
    return rc;
}
