/*
 * compute.c — one chunk computed in slices, for the host's workers (see
 * nd_compute in node.h). It touches no actor state: a worker thread calls it.
 */
#include "actors/node/node.h"

#include "sched/sched.h"

#include <stdlib.h>

/* Slices of a chunk: the first is SLICE_FIRST items; one that took less than
 * SLICE_MS / 2 doubles the next, one that took more than 2 x SLICE_MS halves
 * it, so a stop request waits about SLICE_MS whatever an item costs. Slice
 * ends fall on multiples of SLICE_ALIGN items: kernels compute items in
 * groups aligned to their vector width (64 at most), so no group is computed
 * twice. */
enum { SLICE_MS = 100, SLICE_FIRST = 1024, SLICE_ALIGN = 64 };

int nd_compute(const sim_work *job, const nd_chunk *c, nd_runner run, nd_stop halt, void *ctx, uint8_t **data,
    size_t *len)
{
    *data = NULL;
    *len = 0;
    if (!job->every && c->variant >= job->n)
        return SIM_EINVAL;
    uint32_t first = job->every ? 0 : c->variant, last = job->every ? job->n : c->variant + 1;
    uint32_t nout = (uint32_t)sim_job_nout(job->jobs[first]), nstats = (last - first) * nout;
    size_t size = (size_t)nstats * sizeof(sim_stats);
    sim_stats *out = malloc(size), *part = malloc(size);
    if (out == NULL || part == NULL)
        sf_oom(size);
    int err = 0;
    uint64_t done = 0, slice = SLICE_FIRST;
    do { /* at least once: an empty chunk still has its (empty) statistics */
        if (halt != NULL && halt(ctx, done)) {
            err = ND_ECANCELLED;
            break;
        }
        uint64_t from = c->start + done, n = c->count - done;
        if (n > slice) {
            uint64_t end = (from + slice + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
            if (end - from < n)
                n = end - from;
        }
        uint64_t t0 = rt_mono_ms();
        for (uint32_t v = first; v < last && err == 0; v++) {
            sim_stats *o = out + (size_t)(v - first) * nout, *p = part + (size_t)(v - first) * nout;
            err = run(ctx, job->jobs[v], from, n, done == 0 ? o : p);
            for (uint32_t k = 0; k < nout && err == 0 && done > 0; k++)
                err = sim_stats_merge(&o[k], &p[k]);
        }
        uint64_t took = rt_mono_ms() - t0;
        if (took < SLICE_MS / 2 && slice <= c->count)
            slice *= 2;
        else if (took > 2 * SLICE_MS && slice > SLICE_ALIGN)
            slice /= 2;
        done += n;
    } while (done < c->count && err == 0);
    if (err == 0) {
        size_t cap = (size_t)nstats * (SIM_STATS_MAX_ENCODED + 4);
        *data = malloc(cap);
        if (*data == NULL)
            sf_oom(cap);
        if (sc_result_encode(out, nstats, *data, cap, len) != 0) {
            free(*data);
            *data = NULL;
            err = SIM_EINVAL;
        }
    }
    free(part);
    free(out);
    return err;
}

int nd_run_cpu(void *ctx, const sim_job *sim, uint64_t first, uint64_t count, sim_stats *out)
{
    (void)ctx;
    return sim_run_cpu(sim, first, count, out);
}

int nd_compute_cpu(const sim_work *job, const nd_chunk *c, uint8_t **data, size_t *len)
{
    return nd_compute(job, c, nd_run_cpu, NULL, NULL, data, len);
}
