/*
 * bench_sim.c — throughput of the simulation kernels, one thread:
 * European call, arithmetic Asian with 252 fixings and the combat kernel
 * on the CPU backend, the European call on OpenCL, the three on CUDA
 * where a CUDA device is found, and (native build)
 * single-threaded numpy doing the same Monte Carlo in the same run
 * (tests/bench/sim_numpy.py, run with /usr/bin/python3). The emcc build
 * prints the same benchmarks with names ending in _wasm.
 *
 *   BENCH sim_european_cpu <paths/s> paths/s ...
 *
 * `bench_sim cuda` prints the CUDA lines only: scripts/gpu-check.sh runs it
 * with several SIMFARM_CUDA_THREADS (threads per launch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim.h"
#include "sim/sim_json.h"

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
    int rc = sim_json_to_msgpack(json, strlen(json), &b, err, sizeof err);
    if (rc == 0)
        rc = sim_job_create(&job, kernel, b.data, b.size, 2024, err, sizeof err);
    msgpack_sbuffer_destroy(&b);
    if (rc != 0) {
        fprintf(stderr, "bench_sim: %s\n", err);
        exit(1);
    }
    return job;
}

typedef int (*runner)(void *ctx, const sim_job *job, uint64_t first, uint64_t n, sim_stats *out);

static int run_cpu(void *ctx, const sim_job *job, uint64_t first, uint64_t n, sim_stats *out)
{
    (void)ctx;
    return sim_run_cpu(job, first, n, out);
}

/* Items per second: doubles the item count until one run takes at least
 * min_s, then reports the best of five runs of that size (the machine may
 * be shared: the best run is the least disturbed). *per_cpu_s gets the
 * items per second of the process's CPU time (all its threads), best of
 * the same runs: on a shared machine it does not count the time others
 * took the cores, and for a multi-threaded backend it is the speed per
 * core. */
static double items_per_s(runner r, void *ctx, const sim_job *job, uint64_t n, double min_s,
    double *per_cpu_s)
{
    sim_stats out[SIM_MAX_OUT];
    double t, c;
    for (;;) {
        t = now();
        c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (r(ctx, job, 0, n, out) != 0)
            return 0;
        t = now() - t;
        c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c;
        if (t >= min_s || n >= (UINT64_C(1) << 40))
            break;
        n *= 2;
    }
    double best = t, best_c = c;
    for (int i = 0; i < 4; i++) {
        double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        r(ctx, job, n, n, out); /* a different range: no caching anywhere */
        double dt = now() - t0, dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        best = dt < best ? dt : best;
        best_c = dc < best_c ? dc : best_c;
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
    printf("BENCH sim_european_cuda %.4g paths/s\n", items_per_s(run_cuda, cu, eu, 1 << 24, 1.0, &unused));
    fflush(stdout);
    printf("BENCH sim_asian252_cuda %.4g paths/s\n", items_per_s(run_cuda, cu, as, 1 << 18, 1.0, &unused));
    fflush(stdout);
    printf("BENCH sim_combat_cuda %.4g iterations/s\n", items_per_s(run_cuda, cu, cb, 1 << 18, 1.0, &unused));
    fflush(stdout);
    sim_cuda_destroy(cu);
}

/* Runs the numpy benchmark and passes its lines through; returns its
 * paths/s (and in *per_cpu_s its paths per CPU second), or 0 when numpy is
 * missing. */
static double numpy(double *per_cpu_s)
{
    double v = 0;
    *per_cpu_s = 0;
    char line[256];
    FILE *p = popen("/usr/bin/python3 tests/bench/sim_numpy.py 2>&1", "r");
    if (p == NULL)
        return 0;
    while (fgets(line, sizeof line, p) != NULL) {
        fputs(line, stdout);
        double x;
        if (sscanf(line, "BENCH sim_european_numpy %lf", &x) == 1)
            v = x;
        if (sscanf(line, "# sim_european_numpy per CPU second: %lf", &x) == 1)
            *per_cpu_s = x;
    }
    pclose(p);
    return v;
}
#endif

int main(int argc, char **argv)
{
    sim_job *eu = make("option", european), *as = make("option", asian252), *cb = make("combat", combat);
    (void)argv;
#ifndef __EMSCRIPTEN__
    if (argc == 2 && strcmp(argv[1], "cuda") == 0) { /* the CUDA lines only */
        bench_cuda(eu, as, cb);
        goto out;
    }
#endif
    if (argc > 1) {
        fprintf(stderr, "usage: bench_sim [cuda]\n");
        return 2;
    }
    double e_cpu, a_cpu, c_cpu;
    double e = items_per_s(run_cpu, NULL, eu, 1 << 20, 1.0, &e_cpu);
    printf("BENCH sim_european_%s %.4g paths/s\n", SUFFIX, e);
    if (CPU_CLOCK)
        printf("# sim_european_%s per CPU second: %.4g\n", SUFFIX, e_cpu);
    fflush(stdout);
    double a = items_per_s(run_cpu, NULL, as, 1 << 12, 1.0, &a_cpu);
    printf("BENCH sim_asian252_%s %.4g paths/s\n", SUFFIX, a);
    if (CPU_CLOCK)
        printf("# sim_asian252_%s per CPU second: %.4g\n", SUFFIX, a_cpu);
    fflush(stdout);
    double c = items_per_s(run_cpu, NULL, cb, 1 << 10, 1.0, &c_cpu);
    printf("BENCH sim_combat_%s %.4g iterations/s\n", SUFFIX, c);
    if (CPU_CLOCK)
        printf("# sim_combat_%s per CPU second: %.4g\n", SUFFIX, c_cpu);
    fflush(stdout);
#ifndef __EMSCRIPTEN__
    sim_cl *cl = NULL;
    char err[4096];
    if (sim_cl_create(&cl, err, sizeof err) == 0) {
        double o_cpu, o = items_per_s(run_cl, cl, eu, 1 << 20, 1.0, &o_cpu);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        printf("BENCH sim_european_opencl %.4g paths/s\n", o);
        printf("# sim_european_opencl per CPU second: %.4g\n", o_cpu);
        /* the target compares OpenCL with our CPU backend on the same cores:
         * by the clock (all cores against one thread times the cores), and
         * by CPU time, which others' load on the cores does not skew */
        printf("BENCH sim_european_opencl_over_cpu_per_core %.3g ratio\n", o / (e * (double)(cores > 0 ? cores : 1)));
        printf("BENCH sim_european_opencl_over_cpu_per_cpu_second %.3g ratio\n", o_cpu / e_cpu);
        printf("# OpenCL device: %s on %ld cores; CPU figures are one thread\n", sim_cl_device(cl), cores);
        sim_cl_destroy(cl);
    } else {
        fprintf(stderr, "bench_sim: no OpenCL: %s\n", err);
    }
    fflush(stdout);
    bench_cuda(eu, as, cb);
    double np_cpu, np = numpy(&np_cpu);
    if (np > 0)
        printf("BENCH sim_european_cpu_over_numpy %.3g ratio\n", e / np);
    if (np_cpu > 0)
        printf("BENCH sim_european_cpu_over_numpy_per_cpu_second %.3g ratio\n", e_cpu / np_cpu);
out:
#endif
    sim_job_destroy(eu);
    sim_job_destroy(as);
    sim_job_destroy(cb);
    return 0;
}
