/*
 * test_sim_vectors.c — the kernels' stage vectors (tests/vectors/kernels.vec):
 * the CPU kernels reproduce every stage of every traced item (re-derived
 * from the device functions and held to the kernel's own value of the
 * item) and the result bytes of every range, also of the sets of several
 * variants; the OpenCL backend (in its CPU and its GPU program) and CUDA
 * reproduce the result bytes, or skip with the reason they cannot open.
 * SIMFARM_KERNEL_VECTORS names the file where it is not at
 * tests/vectors/kernels.vec (the GPU bundle keeps it there too).
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "sched/sched.h"
#include "tests/vectors/kvec.h"

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s (run from the repository root or set SIMFARM_KERNEL_VECTORS)", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_gt(n, 0, "%s is empty", path);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static char *vectors(void)
{
    const char *path = getenv("SIMFARM_KERNEL_VECTORS");
    return read_all(path != NULL ? path : "tests/vectors/kernels.vec");
}

/* The lines of text that belong to set (second field) and whose kind
 * (first field) is, or is not (negate), "result"; a new string. */
static char *set_lines(const char *text, const char *set, int results)
{
    size_t cap = strlen(text) + 1, len = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    for (const char *l = text; *l != '\0';) {
        const char *e = strchr(l, '\n');
        size_t n = e != NULL ? (size_t)(e - l) + 1 : strlen(l);
        const char *sp = memchr(l, ' ', n);
        if (l[0] != '#' && sp != NULL) {
            int is_result = sp - l == 6 && memcmp(l, "result", 6) == 0;
            size_t sl = strlen(set);
            if (is_result == results && (size_t)(l + n - sp) > sl + 1 && memcmp(sp + 1, set, sl) == 0 &&
                (sp[1 + sl] == ' ' || sp[1 + sl] == '\n')) {
                memcpy(out + len, l, n);
                len += n;
            }
        }
        l += n;
    }
    out[len] = '\0';
    return out;
}

/* 0 when want and got are the same text; otherwise the line number of
 * the first difference, with both lines in msg. */
static int first_difference(const char *want, const char *got, char *msg, size_t cap)
{
    int line = 1;
    while (*want != '\0' || *got != '\0') {
        size_t a = strcspn(want, "\n"), b = strcspn(got, "\n");
        if (a != b || memcmp(want, got, a) != 0) {
            snprintf(msg, cap, "line %d of the set:\n  file:   %.*s\n  kernel: %.*s", line, (int)(a > 600 ? 600 : a),
                want, (int)(b > 600 ? 600 : b), got);
            return line;
        }
        want += a + (want[a] == '\n');
        got += b + (got[b] == '\n');
        line++;
    }
    return 0;
}

/* What write gives for set s, as text. */
typedef int (*writer)(FILE *f, const kvec_set *s, const sim_job *job, void *ctx);

static char *written(writer w, const kvec_set *s, const sim_job *job, void *ctx, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    *rc = w(f, s, job, ctx);
    fclose(f);
    return buf;
}

static int write_stages(FILE *f, const kvec_set *s, const sim_job *job, void *ctx)
{
    (void)ctx;
    kvec_write_head(f, s, job);
    return kvec_write_items(f, s, job);
}

typedef struct backend {
    kvec_run run;
    void *ctx;
} backend;

static int write_results(FILE *f, const kvec_set *s, const sim_job *job, void *ctx)
{
    const backend *b = ctx;
    return kvec_write_ranges(f, s, job, b->run, b->ctx);
}

/* Every set's lines of one kind (results or not) from w, against the file's. */
static void check_sets(writer w, void *ctx, int results, const char *what)
{
    char *text = vectors(), err[512], msg[1400];
    int nsets = 0;
    for (int i = 0; i < KVEC_NSETS; i++) {
        const kvec_set *s = &kvec_sets[i];
        sim_job *job = NULL;
        cr_assert_eq(kvec_job(s, &job, err, sizeof err), 0, "%s: %s", s->name, err);
        char *want = set_lines(text, s->name, results);
        cr_assert_neq(want[0], '\0', "%s: no %s lines in the file (make kernel-vectors)", s->name, what);
        int rc;
        char *got = written(w, s, job, ctx, &rc);
        cr_assert_eq(rc, 0, "%s: %s: %d", s->name, what, rc);
        char *gl = set_lines(got, s->name, results);
        cr_assert_eq(first_difference(want, gl, msg, sizeof msg), 0, "%s, %s: %s", s->name, what, msg);
        free(gl);
        free(got);
        free(want);
        sim_job_destroy(job);
        nsets++;
    }
    cr_assert_eq(nsets, KVEC_NSETS);
    free(text);
}

/* Every set of several variants: its lines of one kind (results, from
 * backend b; or, b NULL, its variants lines) against the file's. */
static void check_every(const backend *b, const char *what)
{
    char *text = vectors(), err[512], msg[1400];
    for (int i = 0; i < KVEC_NEVERY; i++) {
        const kvec_every *e = &kvec_every_sets[i];
        sim_work w;
        cr_assert_eq(kvec_every_work(e, &w, err, sizeof err), 0, "%s: %s", e->name, err);
        cr_assert(w.every && w.n == (uint32_t)e->n, "%s: a work context of every variant", e->name);
        char *want = set_lines(text, e->name, b != NULL);
        cr_assert_neq(want[0], '\0', "%s: no %s lines in the file (make kernel-vectors)", e->name, what);
        char *got = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&got, &len);
        cr_assert_not_null(f);
        int rc = 0;
        if (b != NULL)
            rc = kvec_write_every_ranges(f, e, &w, b->run, b->ctx);
        else
            kvec_write_every_head(f, e);
        fclose(f);
        cr_assert_eq(rc, 0, "%s: %s: %d", e->name, what, rc);
        cr_assert_eq(first_difference(want, got, msg, sizeof msg), 0, "%s, %s: %s", e->name, what, msg);
        free(got);
        free(want);
        sim_work_close(&w);
    }
    free(text);
}

/* The file says what its lines are: the preamble it was made with. */
Test(sim_vectors, file_has_the_current_format)
{
    char *text = vectors(), *pre = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&pre, &len);
    kvec_preamble(f);
    fclose(f);
    cr_assert(strncmp(text, pre, len) == 0, "the preamble of kernels.vec is not kvec.h's: make kernel-vectors");
    free(pre);
    free(text);
}

Test(sim_vectors, cpu_reproduces_every_stage, .timeout = 120)
{
    check_sets(write_stages, NULL, 0, "stages");
}

Test(sim_vectors, cpu_reproduces_the_result_bytes, .timeout = 120)
{
    backend b = { kvec_run_cpu, NULL };
    check_sets(write_results, &b, 1, "CPU results");
    check_every(NULL, "variants");
    check_every(&b, "CPU results");
}

/* A chunk of every variant is what a node sends for it: nd_compute's
 * bytes, the variants' statistics one after the other. */
Test(sim_vectors, every_variant_results_are_a_chunk_result)
{
    char err[512];
    for (int i = 0; i < KVEC_NEVERY; i++) {
        sim_work w;
        cr_assert_eq(kvec_every_work(&kvec_every_sets[i], &w, err, sizeof err), 0, "%s", err);
        uint32_t nout = (uint32_t)sim_job_nout(w.jobs[0]);
        sim_stats st[KVEC_MAXVAR * SIM_MAX_OUT];
        unsigned char a[KVEC_MAXVAR * SIM_MAX_OUT * (SIM_STATS_MAX_ENCODED + 4)], b[sizeof a];
        size_t na, nb = 0;
        for (uint32_t v = 0; v < w.n; v++)
            cr_assert_eq(sim_run_cpu(w.jobs[v], 1000, 9, st + v * nout), 0);
        na = kvec_result_bytes(st, (int)(w.n * nout), a, sizeof a);
        cr_assert_eq(sc_result_encode(st, w.n * nout, b, sizeof b, &nb), 0);
        cr_assert(na > 0 && na == nb && memcmp(a, b, na) == 0, "%s", kvec_every_sets[i].name);
        sim_work_close(&w);
    }
}

/* The result lines are a chunk's result as the scheduler reads it. */
Test(sim_vectors, result_bytes_are_a_chunk_result)
{
    char err[256];
    for (int i = 0; i < KVEC_NSETS; i++) {
        sim_job *job = NULL;
        cr_assert_eq(kvec_job(&kvec_sets[i], &job, err, sizeof err), 0, "%s", err);
        sim_stats st[SIM_MAX_OUT];
        unsigned char a[SIM_MAX_OUT * (SIM_STATS_MAX_ENCODED + 4)], b[sizeof a];
        size_t na, nb = 0;
        cr_assert_eq(sim_run_cpu(job, 1000, 9, st), 0);
        na = kvec_result_bytes(st, sim_job_nout(job), a, sizeof a);
        cr_assert_eq(sc_result_encode(st, (uint32_t)sim_job_nout(job), b, sizeof b, &nb), 0);
        cr_assert(na == nb && memcmp(a, b, na) == 0, "%s", kvec_sets[i].name);
        sim_job_destroy(job);
    }
}

/* The comparison can fail: one digit changed in a result line is found. */
Test(sim_vectors, a_changed_vector_is_caught)
{
    char *text = vectors(), msg[1400];
    char *want = set_lines(text, "asian_geometric_12", 1);
    char *bad = strdup(want);
    char *digit = strrchr(bad, '\n') - 5;
    *digit = *digit == '0' ? '1' : '0';
    cr_assert_eq(first_difference(want, want, msg, sizeof msg), 0);
    cr_assert_eq(first_difference(want, bad, msg, sizeof msg), 4, "%s", msg);
    free(bad);
    free(want);
    free(text);
}

static int run_cl(void *ctx, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    return sim_cl_run(ctx, job, first, count, out);
}

Test(sim_vectors, opencl_reproduces_the_result_bytes, .timeout = 300)
{
    sim_cl *cl = NULL;
    char err[4096] = "";
    int rc = sim_cl_create(&cl, err, sizeof err);
    if (rc == SIM_ENOBACKEND || rc == SIM_ENODEVICE)
        cr_skip_test("no OpenCL device: %s", err);
    cr_assert_eq(rc, 0, "sim_cl_create: %s: %s", sf_strerror(rc), err);
    backend b = { run_cl, cl };
    check_sets(write_results, &b, 1, "OpenCL results");
    check_every(&b, "OpenCL results");
    sim_cl_destroy(cl);
}

/* The program and launch shape a GPU gets (SIMFARM_OPENCL_PROFILE=gpu: groups
 * of 4 items, up to 65,536 work items), run on whatever OpenCL device there
 * is (pocl's CPU device here): no GPU runs the tests, this runs its code. */
Test(sim_vectors, opencl_gpu_profile_reproduces_the_result_bytes, .timeout = 300)
{
    sim_cl *cl = NULL;
    char err[4096] = "";
    setenv("SIMFARM_OPENCL_PROFILE", "gpu", 1);
    int rc = sim_cl_create(&cl, err, sizeof err);
    unsetenv("SIMFARM_OPENCL_PROFILE");
    if (rc == SIM_ENOBACKEND || rc == SIM_ENODEVICE)
        cr_skip_test("no OpenCL device: %s", err);
    cr_assert_eq(rc, 0, "sim_cl_create: %s: %s", sf_strerror(rc), err);
    cr_assert_eq(sim_cl_group_width(cl), 4, "the GPU program's groups of 4 items");
    backend b = { run_cl, cl };
    check_sets(write_results, &b, 1, "OpenCL results (GPU profile)");
    check_every(&b, "OpenCL results (GPU profile)");
    sim_cl_destroy(cl);
}

static int run_cuda(void *ctx, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    return sim_cuda_run(ctx, job, first, count, out);
}

Test(sim_vectors, cuda_reproduces_the_result_bytes, .timeout = 300)
{
    sim_cuda *cu = NULL;
    char err[512] = "";
    int rc = sim_cuda_create(&cu, err, sizeof err);
    if (rc == SIM_ENOBACKEND || rc == SIM_ENODEVICE)
        cr_skip_test("no CUDA device to run the vectors on: %s", err);
    cr_assert_eq(rc, 0, "sim_cuda_create: %s: %s", sf_strerror(rc), err);
    backend b = { run_cuda, cu };
    check_sets(write_results, &b, 1, "CUDA results");
    check_every(&b, "CUDA results");
    sim_cuda_destroy(cu);
}
