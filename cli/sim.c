/*
 * sim.c — `simfarm sim`: runs a kernel locally, without a farm, and prints
 * each output's estimate with its standard error.
 *
 *   simfarm sim option params.json --items 1000000 --backend cpu
 *   simfarm sim combat examples/combat.json --items 20000 --backend opencl
 */
#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "sched/sched.h"
#include "sim/sim.h"
#include "base/json.h"


#define MAX_PARAMS_BYTES (1 << 20)
#define MAX_CORES 1024
/* A CPU run hands out pieces of about items / (8 cores), so threads that
 * finish early take more, but of at least this many items. */
#define MIN_PIECE 1024

static void sim_usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm sim <kernel> <params.json> [--items N] [--backend cpu|opencl|cuda]\n"
        "                   [--cores C] [--seed S] [--first I] [--chunks K] [--json]\n"
        "\n"
        "Runs items [I, I + N) of a kernel (option, combat) on this machine and prints\n"
        "each output's mean and standard error, and its closed form where there is one.\n"
        "Defaults: --items 1000000, --backend cpu, --cores all this process may use (the\n"
        "cpu backend's threads), --seed 1, --first 0, --chunks 1 (the range split into K\n"
        "runs merged). Any number of cores or chunks gives the same bits.\n"
        "docs/kernels.md lists the parameters.\n"
        "--json prints one JSON object instead, the statistics to the last bit (%%.17g):\n"
        "{kernel, first, items, seed, backend, device, seconds, closed_form?, outputs:\n"
        "[{name, count, mean, stderr, min, max}]}, as a farmed job's result gives them.\n"
        "N, C, S, I and K are whole numbers: decimal digits, or exponent notation (3e8).\n"
        "params.json may also be a job submission (docs/api.md) for this kernel: its\n"
        "params are run, over its items with its seed unless --items or --seed say.\n"
        "On a terminal, a run of the cpu backend shows its progress on stderr.\n");
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

/* Part i of [first, first + n) cut into k parts whose sizes differ by at
 * most one, the larger first. */
static void cut(uint64_t first, uint64_t n, uint64_t k, uint64_t i, uint64_t *a, uint64_t *len)
{
    *a = first + n / k * i + (i < n % k ? i : n % k);
    *len = n / k + (i < n % k ? 1 : 0);
}

/* A run of the CPU backend on several threads. The range, cut into
 * chunks and each chunk into pieces, is handed out a piece at a time;
 * each thread merges its pieces into its own statistics, and the main
 * thread merges those. The statistics are integers that merge exactly in
 * any order, so the result has the same bits for any number of threads. */
typedef struct cpu_run {
    const sim_job *job;
    uint64_t first, items, chunks, pieces; /* pieces per chunk */
    sim_stats (*part)[SIM_MAX_OUT];        /* one row per thread */
    uv_mutex_t lock;
    uv_cond_t finished;
    unsigned running; /* threads still going, under lock */
    int rc;           /* the first failure, under lock */
    /* Taken and added to by every thread, on a line of their own. */
    alignas(64) atomic_uint_fast64_t next; /* the next piece to take */
    atomic_uint_fast64_t done;             /* items computed so far */
} cpu_run;

typedef struct cpu_thread {
    cpu_run *run;
    unsigned index;
    uv_thread_t tid;
} cpu_thread;

static void cpu_thread_main(void *arg)
{
    cpu_thread *t = arg;
    cpu_run *r = t->run;
    sim_stats *mine = r->part[t->index], piece[SIM_MAX_OUT];
    int nout = sim_job_nout(r->job), rc = 0;
    for (int o = 0; o < nout; o++)
        sim_stats_init(&mine[o], sim_job_layout(r->job, o));
    for (;;) {
        /* Relaxed: each piece goes to one thread, and the results travel
         * through the join, not through this counter. */
        uint64_t u = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (u >= r->chunks * r->pieces)
            break;
        uint64_t ca, cn, a, n;
        cut(r->first, r->items, r->chunks, u / r->pieces, &ca, &cn);
        cut(ca, cn, r->pieces, u % r->pieces, &a, &n);
        if (n == 0)
            continue;
        if ((rc = sim_run_cpu(r->job, a, n, piece)) != 0)
            break;
        for (int o = 0; o < nout; o++)
            sim_stats_merge(&mine[o], &piece[o]);
        /* Relaxed: a count for the progress line only. */
        atomic_fetch_add_explicit(&r->done, n, memory_order_relaxed);
    }
    uv_mutex_lock(&r->lock);
    if (rc != 0 && r->rc == 0) {
        r->rc = rc;
        /* the others stop at their next piece */
        atomic_store_explicit(&r->next, r->chunks * r->pieces, memory_order_relaxed);
    }
    r->running--;
    uv_cond_signal(&r->finished);
    uv_mutex_unlock(&r->lock);
}

/* What a kernel's speed counts: combat fights, option paths. */
static const char *speed_unit(const char *kernel)
{
    return strcmp(kernel, "combat") == 0 ? "iterations" : "paths";
}

/* The progress line on stderr (a terminal): how far, how fast, how long
 * to go. */
static void show_progress(cpu_run *r, double elapsed)
{
    /* Relaxed: a count for this line only. */
    uint64_t done = atomic_load_explicit(&r->done, memory_order_relaxed);
    double rate = (double)done / elapsed;
    fprintf(stderr, "\r%5.1f%% of %" PRIu64 " items, %.3g %s/s", 100.0 * (double)done / (double)r->items,
        r->items, rate * sim_job_paths_per_item(r->job), speed_unit(sim_kernel_name(sim_job_kernel(r->job))));
    if (done > 0)
        fprintf(stderr, ", %.0f s to go", (double)(r->items - done) / rate);
    fputs("\033[K", stderr);
    fflush(stderr);
}

/* Items [first, first + items) in the given number of chunks on *cores
 * threads (fewer where there are fewer pieces: *cores says how many ran),
 * merged into total (initialized); a progress line on stderr while it
 * runs when progress is set. 0, or a SIM_E* code. */
static int run_cpu(const sim_job *job, uint64_t first, uint64_t items, uint64_t chunks, unsigned *ncores,
    bool progress, sim_stats *total)
{
    unsigned cores = *ncores;
    cpu_run r = { .job = job, .first = first, .items = items, .chunks = chunks };
    uint64_t per_chunk = (items + chunks - 1) / chunks;
    uint64_t size = items / ((uint64_t)cores * 8);
    size = size > MIN_PIECE ? size : MIN_PIECE;
    r.pieces = (per_chunk + size - 1) / size;
    if (r.chunks * r.pieces < cores)
        cores = (unsigned)(r.chunks * r.pieces);
    atomic_init(&r.next, 0);
    atomic_init(&r.done, 0);
    int rc = SIM_ENOMEM;
    cpu_thread *t = calloc(cores, sizeof *t);
    r.part = calloc(cores, sizeof *r.part);
    if (t == NULL || r.part == NULL || uv_mutex_init(&r.lock) != 0)
        goto free_arrays;
    if (uv_cond_init(&r.finished) != 0)
        goto destroy_lock;
    r.running = cores; /* before any thread exists to lower it */
    unsigned started = 0;
    for (; started < cores; started++) {
        t[started] = (cpu_thread){ .run = &r, .index = started };
        if (uv_thread_create(&t[started].tid, cpu_thread_main, &t[started]) != 0) {
            uv_mutex_lock(&r.lock);
            r.running -= cores - started;
            uv_mutex_unlock(&r.lock);
            break;
        }
    }
    /* With no thread at all nothing was computed; with fewer than asked
     * the ones running take every piece. */
    *ncores = started;
    double t0 = now(), shown = 0.0;
    uv_mutex_lock(&r.lock);
    while (r.running > 0) {
        uv_cond_timedwait(&r.finished, &r.lock, (uint64_t)250 * 1000 * 1000);
        double el = now() - t0;
        if (progress && r.running > 0 && el >= 1.0 && el - shown >= 0.5) {
            show_progress(&r, el);
            shown = el;
        }
    }
    uv_mutex_unlock(&r.lock);
    if (shown > 0.0) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    for (unsigned i = 0; i < started; i++)
        uv_thread_join(&t[i].tid);
    rc = started == 0 ? SIM_ENOMEM : r.rc;
    for (unsigned i = 0; i < started && rc == 0; i++)
        for (int o = 0; o < sim_job_nout(job); o++)
            sim_stats_merge(&total[o], &r.part[i][o]);
    uv_cond_destroy(&r.finished);
destroy_lock:
    uv_mutex_destroy(&r.lock);
free_arrays:
    free(t);
    free(r.part);
    return rc;
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
    printf("\",\"seconds\":%.3f,", dt);
    double ref[SIM_MAX_OUT];
    unsigned has = sim_job_reference(job, ref);
    if (has != 0) {
        fputs("\"closed_form\":{", stdout);
        for (int o = 0, n = 0; o < sim_job_nout(job); o++)
            if (has & (1u << o)) {
                printf("%s\"%s\":", n++ ? "," : "", sim_job_output_name(job, o));
                print_num(ref[o]);
            }
        fputs("},", stdout);
    }
    fputs("\"outputs\":[", stdout);
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
    char digest[SC_DIGEST_LEN + 1];
    if (sc_result_digest(total, (uint32_t)sim_job_nout(job), digest) == 0)
        printf("],\"digest\":\"%s\"}\n", digest);
    else
        puts("]}");
}

/* When the file is a job submission (docs/api.md: an object with kernel
 * and params), its params replace *mp, and its items and seed stand in for
 * the flags not given (*items and *seed untouched where they were). 0 when
 * done or when the file is only parameters; -1 with the reason in why. */
static int take_submission(msgpack_sbuffer *mp, const char *kernel, bool items_set, uint64_t *items,
    bool seed_set, uint64_t *seed, char *why, size_t len)
{
    msgpack_unpacked up;
    size_t off = 0;
    int rc = 0;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, mp->data, mp->size, &off) != MSGPACK_UNPACK_SUCCESS)
        goto done; /* the kernel's parser says what is wrong with it */
    const msgpack_object *root = &up.data, *k = sf_mp_get(root, "kernel"), *p = sf_mp_get(root, "params");
    if (k == NULL || p == NULL)
        goto done;
    const msgpack_object *st = sf_mp_get(root, "strategy"), *n = sf_mp_get(root, "items"),
        *sd = sf_mp_get(root, "seed");
    char text[65];
    rc = -1;
    if (k->type != MSGPACK_OBJECT_STR) {
        snprintf(why, len, "field 'kernel': must be a string");
    } else if (!sf_mp_streq(k, kernel)) {
        snprintf(why, len, "a job submission for kernel '%s', not '%s'", remote_text(k, text, sizeof text, ""),
            kernel);
    } else if (st != NULL && st->type != MSGPACK_OBJECT_STR) {
        snprintf(why, len, "field 'strategy': must be a string");
    } else if (st != NULL && !sf_mp_streq(st, "single")) {
        snprintf(why, len, "a job submission with strategy '%s', which runs on a farm (simfarm submit); simfarm "
            "sim runs one set of params", remote_text(st, text, sizeof text, ""));
    } else if (p->type != MSGPACK_OBJECT_MAP) {
        snprintf(why, len, "field 'params': must be an object");
    } else if (!items_set && n != NULL && (n->type != MSGPACK_OBJECT_POSITIVE_INTEGER || n->via.u64 < 1 ||
        n->via.u64 > SIM_MAX_ITEMS)) {
        snprintf(why, len, "field 'items': must be an integer in [1, %" PRIu64 "] here", (uint64_t)SIM_MAX_ITEMS);
    } else if (!seed_set && sd != NULL && sd->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        snprintf(why, len, "field 'seed': must be an integer in [0, 2^64)");
    } else {
        msgpack_sbuffer params;
        msgpack_packer pk;
        msgpack_sbuffer_init(&params);
        msgpack_packer_init(&pk, &params, msgpack_sbuffer_write);
        if (msgpack_pack_object(&pk, *p) != 0) {
            msgpack_sbuffer_destroy(&params);
            snprintf(why, len, "out of memory");
            goto done;
        }
        msgpack_sbuffer_destroy(mp);
        *mp = params;
        if (!items_set && n != NULL)
            *items = n->via.u64;
        if (!seed_set && sd != NULL)
            *seed = sd->via.u64;
        rc = 0;
    }
done:
    msgpack_unpacked_destroy(&up);
    return rc;
}

int cmd_sim(int argc, char **argv)
{
    const char *kernel = NULL, *path = NULL, *backend = "cpu";
    uint64_t items = 1000000, seed = 1, first = 0, chunks = 1, cores = 0;
    bool as_json = false, items_set = false, seed_set = false;
    char err[4096];
    int rc, exit_code = SF_EXIT_FAIL;

    static const cli_flag flags[] = { { "--help", false }, { "--json", false }, { "--items", true },
        { "--seed", true }, { "--first", true }, { "--chunks", true }, { "--cores", true }, { "--backend", true },
        { NULL, false } };
    cli_args it = CLI_ARGS(argc, argv, flags, 2);
    const char *flag, *v;
    sf_error e;
    int next;
    while ((next = cli_next(&it, &flag, &v, &e)) > 0) {
        if (flag == NULL && kernel == NULL) {
            kernel = v;
        } else if (flag == NULL) {
            path = v;
        } else if (strcmp(flag, "--help") == 0) {
            sim_usage(stdout);
            return SF_EXIT_OK;
        } else if (strcmp(flag, "--json") == 0) {
            as_json = true;
        } else if (strcmp(flag, "--items") == 0) {
            if (!parse_u64(v, 1, SIM_MAX_ITEMS, &items)) {
                fprintf(stderr, "simfarm sim: --items must be an integer in [1, %" PRIu64 "], got '%s'\n",
                    (uint64_t)SIM_MAX_ITEMS, v);
                return SF_EXIT_USAGE;
            }
            items_set = true;
        } else if (strcmp(flag, "--seed") == 0) {
            if (!parse_u64(v, 0, UINT64_MAX, &seed)) {
                fprintf(stderr, "simfarm sim: --seed must be an integer in [0, 2^64), got '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            seed_set = true;
        } else if (strcmp(flag, "--first") == 0) {
            if (!parse_u64(v, 0, SIM_ITEM_END - 1, &first)) {
                fprintf(stderr, "simfarm sim: --first must be an integer in [0, 2^62), got '%s'\n", v);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(flag, "--chunks") == 0) {
            if (!parse_u64(v, 1, 1000000, &chunks)) {
                fprintf(stderr, "simfarm sim: --chunks must be an integer in [1, 1000000], got '%s'\n", v);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(flag, "--cores") == 0) {
            if (!parse_u64(v, 1, MAX_CORES, &cores)) {
                fprintf(stderr, "simfarm sim: --cores must be an integer in [1, %d], got '%s'\n", MAX_CORES, v);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(flag, "--backend") == 0) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "opencl") != 0 && strcmp(v, "cuda") != 0) {
                fprintf(stderr, "simfarm sim: --backend must be cpu, opencl or cuda, got '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            backend = v;
        }
    }
    if (next != 0)
        return cli_refuse("sim", &e, sim_usage);
    if (kernel == NULL || path == NULL) {
        sim_usage(stderr);
        return SF_EXIT_USAGE;
    }
    if (cores != 0 && strcmp(backend, "cpu") != 0) {
        fprintf(stderr, "simfarm sim: --cores is for the cpu backend; the %s backend runs on its whole device\n",
            backend);
        return SF_EXIT_USAGE;
    }
    if (cores == 0) {
        cores = uv_available_parallelism();
        cores = cores < MAX_CORES ? cores : MAX_CORES;
    }

    size_t len = 0;
    char *json = read_file(path, &len);
    if (json == NULL) {
        fprintf(stderr, "simfarm sim: cannot read %s: %s\n", path, strerror(errno));
        return SF_EXIT_FAIL;
    }
    msgpack_sbuffer mp;
    msgpack_sbuffer_init(&mp);
    sim_job *job = NULL;
    err[0] = '\0';
    rc = sf_json_to_msgpack(json, len, &mp, err, sizeof err);
    if (rc == 0 && take_submission(&mp, kernel, items_set, &items, seed_set, &seed, err, sizeof err) != 0)
        rc = SIM_EPARAM;
    if (rc == 0)
        rc = sim_job_create(&job, kernel, mp.data, mp.size, seed, err, sizeof err);
    msgpack_sbuffer_destroy(&mp);
    free(json);
    if (rc != 0) {
        fprintf(stderr, "simfarm sim: %s: %s\n", path, err[0] ? err : sf_strerror(rc));
        return SF_EXIT_USAGE;
    }
    if (sim_range_check(first, items) != 0) {
        fprintf(stderr, "simfarm sim: items [%" PRIu64 ", +%" PRIu64 ") run past the item space (2^62)\n",
            first, items);
        sim_job_destroy(job);
        return SF_EXIT_USAGE;
    }
    if (chunks > items)
        chunks = items;

    sim_cl *cl = NULL;
    sim_cuda *cu = NULL;
    char threads[32];
    const char *device = threads;
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
    if (cl == NULL && cu == NULL) {
        unsigned ran = (unsigned)cores;
        rc = run_cpu(job, first, items, chunks, &ran, isatty(STDERR_FILENO), total);
        snprintf(threads, sizeof threads, "%u thread%s", ran, ran > 1 ? "s" : "");
    } else {
        for (uint64_t c = 0; c < chunks && rc == 0; c++) {
            uint64_t a, n;
            cut(first, items, chunks, c, &a, &n);
            rc = cl != NULL ? sim_cl_run(cl, job, a, n, part) : sim_cuda_run(cu, job, a, n, part);
            for (int o = 0; o < nout && rc == 0; o++)
                sim_stats_merge(&total[o], &part[o]);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "simfarm sim: run failed: %s\n", sf_strerror(rc));
        goto out;
    }
    double dt = now() - t0;

    if (as_json) {
        print_json(job, total, kernel, first, items, seed, backend, device, dt);
        exit_code = SF_EXIT_OK;
        goto out;
    }
    printf("kernel %s, items [%" PRIu64 ", %" PRIu64 "), seed %" PRIu64 ", backend %s (%s)\n", kernel,
        first, first + items, seed, backend, device);
    /* where there is a closed form, it and the estimate's distance from it
     * in standard errors */
    double ref[SIM_MAX_OUT];
    unsigned has = sim_job_reference(job, ref);
    printf("%-14s %18s %14s %14s %14s%s\n", "output", "mean", "std error", "min", "max",
        has ? "    closed form       z" : "");
    for (int o = 0; o < nout; o++) {
        printf("%-14s %18.8f %14.8f %14.6g %14.6g", sim_job_output_name(job, o), sim_stats_mean(&total[o]),
            sim_stats_stderr(&total[o]), sim_stats_min(&total[o]), sim_stats_max(&total[o]));
        if (has & (1u << o))
            printf(" %14.8f %7.2f", ref[o], (sim_stats_mean(&total[o]) - ref[o]) / sim_stats_stderr(&total[o]));
        putchar('\n');
        if (sim_stats_saturated(&total[o]) > 0)
            printf("  warning: %" PRIu64 " values of %s were clamped to the fixed-point range\n",
                sim_stats_saturated(&total[o]), sim_job_output_name(job, o));
    }
    printf("%.3f s, %.4g %s/s\n", dt, (double)items * sim_job_paths_per_item(job) / (dt > 0 ? dt : 1e-9),
        speed_unit(kernel));
    /* The result's bytes, identical on every backend and for any
     * chunking, as the digest a farmed job's result carries too. */
    char digest[SC_DIGEST_LEN + 1];
    if (sc_result_digest(total, (uint32_t)nout, digest) == 0)
        printf("result digest %s\n", digest);
    exit_code = SF_EXIT_OK;
    goto out;

device_fail:
    fprintf(stderr, "simfarm sim: %s backend unavailable: %s\n", backend, err[0] ? err : sf_strerror(rc));
out:
    sim_cl_destroy(cl);
    sim_cuda_destroy(cu);
    sim_job_destroy(job);
    return exit_code;
}
