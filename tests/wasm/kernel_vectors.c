/*
 * kernel_vectors.c — the kernels' stage vectors (tests/vectors/kernels.vec,
 * written by tests/vectors/kvec.h), built natively and with emcc:
 *
 *   kernel_vectors gen              prints the whole file: every set's
 *                                   host values, traced items' stages and
 *                                   result bytes on the CPU backend, then
 *                                   the sets of several variants' results;
 *                                   exits 1
 *                                   when a re-derived item differs from the
 *                                   kernel's own value (`make kernel-vectors`)
 *   kernel_vectors results BACKEND  prints only the result lines, run on
 *                                   BACKEND (cpu or opencl), or one line
 *                                   "skip REASON" when it cannot open
 *
 * tests/wasm/kernel_vectors.test.mjs holds both builds' output, and the
 * native OpenCL results, to the committed file.
 */
#include <stdlib.h>

#include "tests/vectors/kvec.h"

static int run_cl(void *ctx, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    return sim_cl_run(ctx, job, first, count, out);
}

int main(int argc, char **argv)
{
    const int gen = argc == 2 && strcmp(argv[1], "gen") == 0;
    const int res = argc == 3 && strcmp(argv[1], "results") == 0;
    if (!gen && !(res && (strcmp(argv[2], "cpu") == 0 || strcmp(argv[2], "opencl") == 0))) {
        fprintf(stderr, "usage: kernel_vectors gen | kernel_vectors results cpu|opencl\n");
        return 2;
    }
    char err[4096] = "";
    sim_cl *cl = NULL;
    kvec_run run = kvec_run_cpu;
    if (res && strcmp(argv[2], "opencl") == 0) {
        int rc = sim_cl_create(&cl, err, sizeof err);
        if (rc != 0) {
            printf("skip no OpenCL device: %s: %s\n", sf_strerror(rc), err);
            return 0;
        }
        run = run_cl;
    }
    if (gen)
        kvec_preamble(stdout);
    int failed = 0;
    for (int s = 0; s < KVEC_NSETS; s++) {
        sim_job *job = NULL;
        if (kvec_job(&kvec_sets[s], &job, err, sizeof err) != 0) {
            fprintf(stderr, "kernel_vectors: %s: %s\n", kvec_sets[s].name, err);
            failed = 1;
            continue;
        }
        if (gen) {
            printf("\n");
            kvec_write_head(stdout, &kvec_sets[s], job);
            int bad = kvec_write_items(stdout, &kvec_sets[s], job);
            if (bad != 0) {
                fprintf(stderr, "kernel_vectors: %s: %d traced items differ from the kernel's values\n",
                    kvec_sets[s].name, bad);
                failed = 1;
            }
        }
        int rc = kvec_write_ranges(stdout, &kvec_sets[s], job, run, cl);
        if (rc != 0) {
            fprintf(stderr, "kernel_vectors: %s: %s\n", kvec_sets[s].name, sf_strerror(rc));
            failed = 1;
        }
        sim_job_destroy(job);
    }
    for (int s = 0; s < KVEC_NEVERY; s++) {
        const kvec_every *e = &kvec_every_sets[s];
        sim_work w;
        if (kvec_every_work(e, &w, err, sizeof err) != 0) {
            fprintf(stderr, "kernel_vectors: %s: %s\n", e->name, err);
            failed = 1;
            continue;
        }
        if (gen) {
            printf("\n");
            kvec_write_every_head(stdout, e);
        }
        int rc = kvec_write_every_ranges(stdout, e, &w, run, cl);
        if (rc != 0) {
            fprintf(stderr, "kernel_vectors: %s: %s\n", e->name, sf_strerror(rc));
            failed = 1;
        }
        sim_work_close(&w);
    }
    if (cl != NULL)
        sim_cl_destroy(cl);
    return failed;
}
