/*
 * sim.c — `simfarm sim`: runs a kernel locally, without a farm, and prints
 * each output's estimate with its standard error.
 *
 *   simfarm sim option params.json --items 1000000 --backend cpu
 *   simfarm sim combat examples/combat.json --items 20000 --backend opencl
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "sim/sim.h"
#include "sim/sim_json.h"

enum { SIM_EXIT_OK = 0, SIM_EXIT_FAIL = 1, SIM_EXIT_USAGE = 2 };

#define MAX_PARAMS_BYTES (1 << 20)


static void sim_usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm sim <kernel> <params.json> [--items N] [--backend cpu|opencl|cuda]\n"
        "                   [--seed S] [--first I] [--chunks K] [--json]\n"
        "\n"
        "Runs items [I, I + N) of a kernel (option, combat) on this machine and prints\n"
        "each output's mean and standard error. Defaults: --items 1000000, --backend cpu,\n"
        "--seed 1, --first 0, --chunks 1 (the range split into K runs merged, which\n"
        "gives the same bits as one run). docs/kernels.md lists the parameters.\n"
        "--json prints one JSON object instead, the statistics to the last bit (%%.17g):\n"
        "{kernel, first, items, seed, backend, device, seconds, outputs: [{name, count,\n"
        "mean, stderr, min, max}]}, as a farmed job's result gives them.\n"
        "N, S, I and K are whole numbers: decimal digits, or exponent notation (3e8).\n");
}

/* Reads a whole file (at most MAX_PARAMS_BYTES) into a NUL-terminated
 * buffer the caller frees. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = malloc(MAX_PARAMS_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_PARAMS_BYTES + 1, f) : 0;
    int bad = buf == NULL || ferror(f) || n > MAX_PARAMS_BYTES;
    fclose(f);
    if (bad) {
        free(buf);
        errno = bad && buf ? EFBIG : errno;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* A whole number in [lo, hi], in decimal digits, with a fraction of zeros
 * or in exponent notation ("3e8", "2.5e6", "1E9", "100.0"): read exactly,
 * so a fraction that does not vanish ("2.55e1") or a value past hi is
 * refused, never rounded. False otherwise. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0, frac = 0, exp = 0, zeros = 0; /* zeros: trailing 0s of the fraction read */
    const char *p = s;
    if (s == NULL)
        return 0;
    for (int in_frac = 0; *p != '\0' && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.' && !in_frac) {
            in_frac = 1;
            continue;
        }
        if (*p < '0' || *p > '9')
            return 0;
        digits++;
        if (in_frac) {
            frac++;
            zeros = *p == '0' ? zeros + 1 : 0;
        }
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return 0;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (digits == 0)
        return 0;
    if (*p != '\0') {
        if (*++p == '+')
            p++;
        if (*p == '\0')
            return 0;
        for (; *p != '\0'; p++) {
            if (*p < '0' || *p > '9' || exp > 100)
                return 0;
            exp = exp * 10 + (*p - '0');
        }
    }
    /* v 10^(exp - frac): drop the fraction's digits the exponent does
     * not cover, which must be zeros, then scale */
    for (; frac > exp; frac--, zeros--) {
        if (zeros <= 0)
            return 0;
        v /= 10;
    }
    for (; exp > frac; exp--) {
        if (v > UINT64_MAX / 10)
            return 0;
        v *= 10;
    }
    if (v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A double as JSON, to the last bit; null for what JSON cannot hold. */
static void print_num(double v)
{
    if (v != v || v > 1.7e308 || v < -1.7e308)
        fputs("null", stdout);
    else
        printf("%.17g", v);
}

static void print_json(const sim_job *job, const sim_stats *total, const char *kernel, uint64_t first,
    uint64_t items, uint64_t seed, const char *backend, const char *device, double dt)
{
    printf("{\"kernel\":\"%s\",\"first\":%" PRIu64 ",\"items\":%" PRIu64 ",\"seed\":%" PRIu64
        ",\"backend\":\"%s\",\"device\":\"", kernel, first, items, seed, backend);
    for (const char *c = device; *c; c++)
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if ((unsigned char)*c >= 0x20)
            putchar(*c);
    printf("\",\"seconds\":%.3f,\"outputs\":[", dt);
    for (int o = 0; o < sim_job_nout(job); o++) {
        const sim_stats *t = &total[o];
        printf("%s{\"name\":\"%s\",\"count\":%" PRIu64 ",\"mean\":", o ? "," : "", sim_job_output_name(job, o),
            sim_stats_count(t));
        print_num(sim_stats_mean(t));
        fputs(",\"stderr\":", stdout);
        print_num(sim_stats_stderr(t));
        fputs(",\"min\":", stdout);
        print_num(sim_stats_min(t));
        fputs(",\"max\":", stdout);
        print_num(sim_stats_max(t));
        putchar('}');
    }
    puts("]}");
}

int cmd_sim(int argc, char **argv)
{
    const char *kernel = NULL, *path = NULL, *backend = "cpu";
    uint64_t items = 1000000, seed = 1, first = 0, chunks = 1;
    bool as_json = false;
    char err[4096];
    int rc, exit_code = SIM_EXIT_FAIL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sim_usage(stdout);
            return SIM_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            as_json = true;
        } else if (strcmp(a, "--items") == 0) {
            if (!parse_u64(v, 1, SIM_MAX_ITEMS, &items)) {
                fprintf(stderr, "simfarm sim: --items must be an integer in [1, %" PRIu64 "], got '%s'\n",
                    (uint64_t)SIM_MAX_ITEMS, v ? v : "");
                return SIM_EXIT_USAGE;
            }
            i++;
        } else if (strcmp(a, "--seed") == 0) {
            if (!parse_u64(v, 0, UINT64_MAX, &seed)) {
                fprintf(stderr, "simfarm sim: --seed must be an integer in [0, 2^64), got '%s'\n", v ? v : "");
                return SIM_EXIT_USAGE;
            }
            i++;
        } else if (strcmp(a, "--first") == 0) {
            if (!parse_u64(v, 0, SIM_ITEM_END - 1, &first)) {
                fprintf(stderr, "simfarm sim: --first must be an integer in [0, 2^62), got '%s'\n", v ? v : "");
                return SIM_EXIT_USAGE;
            }
            i++;
        } else if (strcmp(a, "--chunks") == 0) {
            if (!parse_u64(v, 1, 1000000, &chunks)) {
                fprintf(stderr, "simfarm sim: --chunks must be an integer in [1, 1000000], got '%s'\n", v ? v : "");
                return SIM_EXIT_USAGE;
            }
            i++;
        } else if (strcmp(a, "--backend") == 0) {
            if (v == NULL || (strcmp(v, "cpu") != 0 && strcmp(v, "opencl") != 0 && strcmp(v, "cuda") != 0)) {
                fprintf(stderr, "simfarm sim: --backend must be cpu, opencl or cuda, got '%s'\n", v ? v : "");
                return SIM_EXIT_USAGE;
            }
            backend = v;
            i++;
        } else if (a[0] == '-') {
            fprintf(stderr, "simfarm sim: unknown option '%s'\n\n", a);
            sim_usage(stderr);
            return SIM_EXIT_USAGE;
        } else if (kernel == NULL) {
            kernel = a;
        } else if (path == NULL) {
            path = a;
        } else {
            fprintf(stderr, "simfarm sim: unexpected argument '%s'\n\n", a);
            sim_usage(stderr);
            return SIM_EXIT_USAGE;
        }
    }
    if (kernel == NULL || path == NULL) {
        sim_usage(stderr);
        return SIM_EXIT_USAGE;
    }
    if (sim_range_check(first, items) != 0) {
        fprintf(stderr, "simfarm sim: items [%" PRIu64 ", +%" PRIu64 ") run past the item space (2^62)\n",
            first, items);
        return SIM_EXIT_USAGE;
    }
    if (chunks > items)
        chunks = items;

    size_t len = 0;
    char *json = read_file(path, &len);
    if (json == NULL) {
        fprintf(stderr, "simfarm sim: cannot read %s: %s\n", path, strerror(errno));
        return SIM_EXIT_FAIL;
    }
    msgpack_sbuffer mp;
    msgpack_sbuffer_init(&mp);
    sim_job *job = NULL;
    rc = sim_json_to_msgpack(json, len, &mp, err, sizeof err);
    if (rc == 0)
        rc = sim_job_create(&job, kernel, mp.data, mp.size, seed, err, sizeof err);
    msgpack_sbuffer_destroy(&mp);
    free(json);
    if (rc != 0) {
        fprintf(stderr, "simfarm sim: %s: %s\n", path, err[0] ? err : sim_strerror(rc));
        return SIM_EXIT_USAGE;
    }

    sim_cl *cl = NULL;
    sim_cuda *cu = NULL;
    const char *device = "this thread";
    if (strcmp(backend, "opencl") == 0) {
        if ((rc = sim_cl_create(&cl, err, sizeof err)) != 0)
            goto device_fail;
        device = sim_cl_device(cl);
    } else if (strcmp(backend, "cuda") == 0) {
        if ((rc = sim_cuda_create(&cu, err, sizeof err)) != 0)
            goto device_fail;
        device = sim_cuda_device(cu);
    }

    int nout = sim_job_nout(job);
    sim_stats total[SIM_MAX_OUT], part[SIM_MAX_OUT];
    for (int o = 0; o < nout; o++)
        sim_stats_init(&total[o], sim_job_layout(job, o));
    double t0 = now();
    for (uint64_t c = 0; c < chunks; c++) {
        uint64_t a = first + items / chunks * c + (c < items % chunks ? c : items % chunks);
        uint64_t n = items / chunks + (c < items % chunks ? 1 : 0);
        if (cl != NULL)
            rc = sim_cl_run(cl, job, a, n, part);
        else if (cu != NULL)
            rc = sim_cuda_run(cu, job, a, n, part);
        else
            rc = sim_run_cpu(job, a, n, part);
        if (rc != 0) {
            fprintf(stderr, "simfarm sim: run failed: %s\n", sim_strerror(rc));
            goto out;
        }
        for (int o = 0; o < nout; o++)
            sim_stats_merge(&total[o], &part[o]);
    }
    double dt = now() - t0;

    if (as_json) {
        print_json(job, total, kernel, first, items, seed, backend, device, dt);
        exit_code = SIM_EXIT_OK;
        goto out;
    }
    printf("kernel %s, items [%" PRIu64 ", %" PRIu64 "), seed %" PRIu64 ", backend %s (%s)\n", kernel,
        first, first + items, seed, backend, device);
    printf("%-14s %18s %14s %14s %14s\n", "output", "mean", "std error", "min", "max");
    for (int o = 0; o < nout; o++) {
        printf("%-14s %18.8f %14.8f %14.6g %14.6g\n", sim_job_output_name(job, o), sim_stats_mean(&total[o]),
            sim_stats_stderr(&total[o]), sim_stats_min(&total[o]), sim_stats_max(&total[o]));
        if (sim_stats_saturated(&total[o]) > 0)
            printf("  warning: %" PRIu64 " values of %s were clamped to the fixed-point range\n",
                sim_stats_saturated(&total[o]), sim_job_output_name(job, o));
    }
    printf("%.3f s, %.4g %s/s\n", dt, (double)items * sim_job_paths_per_item(job) / (dt > 0 ? dt : 1e-9),
        strcmp(kernel, "combat") == 0 ? "iterations" : "paths");
    /* The chunk's result bytes: identical on every backend and chunking. */
    unsigned char buf[SIM_STATS_MAX_ENCODED];
    size_t blen;
    if (sim_stats_encode(&total[0], buf, sizeof buf, &blen) == 0) {
        uint32_t h = 2166136261u; /* FNV-1a, a short fingerprint to compare runs by eye */
        for (size_t i = 0; i < blen; i++)
            h = (h ^ buf[i]) * 16777619u;
        printf("result fingerprint %08x\n", h);
    }
    exit_code = SIM_EXIT_OK;
    goto out;

device_fail:
    fprintf(stderr, "simfarm sim: %s backend unavailable: %s\n", backend, err[0] ? err : sim_strerror(rc));
out:
    sim_cl_destroy(cl);
    sim_cuda_destroy(cu);
    sim_job_destroy(job);
    return exit_code;
}
