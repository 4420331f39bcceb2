/*
 * test_node_compute.c — nd_compute (actors/node/compute.c), the worker body of
 * every node: a chunk computed in slices gives the same result bytes as one
 * run over the whole chunk (one variant, and every variant of a
 * stat_weights job), and a chunk asked to stop ends between slices with
 * ND_ECANCELLED and no result.
 */
#include "actors/node/node.h"
#include "sched/sched.h"
#include "sim/ctx.h"
#include "sim/sim.h"
#include "base/json.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define EUROPEAN "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1, \"antithetic\": true}"
#define ASIAN "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 95, \"r\": 0.03, \"sigma\": 0.3, \"T\": 0.5, \"steps\": 16}"
#define COMBAT                                                                                         \
    "{\"power\": 10000, \"crit\": 2500, \"haste\": 2000, \"fight_length\": 60, \"abilities\": ["        \
    "{\"name\": \"strike\", \"coefficient\": 2.5, \"cooldown\": 9}, {\"name\": \"filler\", \"coefficient\": 0.7}]}"

/* A work context of the given parameter sets (JSON), opened. */
static void open_work(sim_work *w, const char *kernel, const char *const *json, uint32_t n, bool every)
{
    msgpack_sbuffer params, ctx;
    msgpack_sbuffer_init(&params);
    msgpack_sbuffer_init(&ctx);
    char err[256];
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(sf_json_to_msgpack(json[i], strlen(json[i]), &params, err, sizeof err), 0, "%s", err);
    sim_ctx_encode_variants(&ctx, kernel, 99, params.data, params.size, n, every);
    cr_assert_eq(sim_work_open(w, ctx.data, ctx.size, err, sizeof err), 0, "%s", err);
    msgpack_sbuffer_destroy(&params);
    msgpack_sbuffer_destroy(&ctx);
}

/* The result bytes of one sim_run_cpu per variant over the whole chunk. */
static size_t whole(const sim_work *w, const nd_chunk *c, uint8_t *buf, size_t cap)
{
    sim_stats out[SIM_MAX_VARIANTS * SIM_MAX_OUT];
    uint32_t first = w->every ? 0 : c->variant, last = w->every ? w->n : c->variant + 1;
    uint32_t nout = (uint32_t)sim_job_nout(w->jobs[first]);
    for (uint32_t v = first; v < last; v++)
        cr_assert_eq(sim_run_cpu(w->jobs[v], c->start, c->count, out + (v - first) * nout), 0);
    size_t len = 0;
    cr_assert_eq(sc_result_encode(out, (last - first) * nout, buf, cap, &len), 0);
    return len;
}

typedef struct probe {
    unsigned runs;         /* runner calls */
    unsigned asked;        /* halt calls */
    unsigned stop_at;      /* halt says stop on this call (1 = the first); 0 = never */
    uint64_t next;         /* the item the next slice must start at */
    bool in_order;
    uint64_t start;        /* the chunk's first item, with ordered_run: */
    bool done_wrong;       /* halt was told a count other than next - start */
} probe;

static int counting_run(void *ctx, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    probe *p = ctx;
    p->runs++;
    return sim_run_cpu(job, first, count, out);
}

/* One variant per slice: slices follow each other without gap or overlap. */
static int ordered_run(void *ctx, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    probe *p = ctx;
    if (first != p->next)
        p->in_order = false;
    p->next = first + count;
    return counting_run(ctx, job, first, count, out);
}

static bool halt_at(void *ctx, uint64_t done)
{
    probe *p = ctx;
    if (p->in_order && done != p->next - p->start)
        p->done_wrong = true;
    return ++p->asked == p->stop_at;
}

/* nd_compute in slices against the whole run, for one chunk. */
static void same_bytes(const sim_work *w, nd_chunk c)
{
    uint8_t want[SIM_MAX_VARIANTS * SIM_MAX_OUT * (SIM_STATS_MAX_ENCODED + 4)];
    size_t want_len = whole(w, &c, want, sizeof want);
    probe p = { .next = c.start, .in_order = !w->every, .start = c.start };
    uint8_t *data = NULL;
    size_t len = 0;
    cr_assert_eq(nd_compute(w, &c, w->every ? counting_run : ordered_run, halt_at, &p, &data, &len), 0);
    uint32_t nvar = w->every ? w->n : 1;
    cr_assert_gt(p.runs / nvar, 2, "a chunk of %llu items in %u slices", (unsigned long long)c.count, p.runs / nvar);
    cr_assert_eq(p.asked, p.runs / nvar, "halt is asked before each slice");
    cr_assert(w->every || p.in_order, "the slices cover the chunk in order");
    cr_assert(!p.done_wrong, "halt is told the items done before each slice");
    cr_assert_eq(len, want_len);
    cr_assert_eq(memcmp(data, want, len), 0, "sliced and whole results differ");
    free(data);
}

Test(node_compute, slices_give_the_bytes_of_one_run)
{
    sim_work w;
    const char *european[] = { EUROPEAN }, *asian[] = { ASIAN }, *combat[] = { COMBAT };
    open_work(&w, "option", european, 1, false);
    same_bytes(&w, (nd_chunk){ .start = 12345, .count = 200003 });  /* neither end on a group boundary */
    same_bytes(&w, (nd_chunk){ .start = 0, .count = 131072 });
    sim_work_close(&w);
    open_work(&w, "option", asian, 1, false);
    same_bytes(&w, (nd_chunk){ .start = 7, .count = 50001 });
    sim_work_close(&w);
    open_work(&w, "combat", combat, 1, false);
    same_bytes(&w, (nd_chunk){ .start = 1001, .count = 20011 });
    sim_work_close(&w);
}

Test(node_compute, every_variant_in_slices)
{
    sim_work w;
    const char *variants[] = { EUROPEAN,
        "{\"S0\": 101, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1, \"antithetic\": true}",
        "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.21, \"T\": 1, \"antithetic\": true}" };
    open_work(&w, "option", variants, 3, true);
    same_bytes(&w, (nd_chunk){ .start = 333, .count = 100000 });
    sim_work_close(&w);
    open_work(&w, "option", variants, 3, false);
    same_bytes(&w, (nd_chunk){ .start = 333, .count = 100000, .variant = 2 });
    sim_work_close(&w);
}

Test(node_compute, a_stopped_chunk_ends_between_slices)
{
    sim_work w;
    const char *european[] = { EUROPEAN };
    open_work(&w, "option", european, 1, false);
    nd_chunk c = { .start = 0, .count = 100000000 }; /* minutes of work if it were not stopped */
    uint8_t *data = (uint8_t *)&w;
    size_t len = 1;
    probe p = { .stop_at = 3, .in_order = true };
    cr_assert_eq(nd_compute(&w, &c, ordered_run, halt_at, &p, &data, &len), ND_ECANCELLED);
    cr_assert_eq(p.runs, 2, "two slices ran before the stop");
    cr_assert_null(data);
    cr_assert_eq(len, 0);

    p = (probe){ .stop_at = 1 };
    cr_assert_eq(nd_compute(&w, &c, ordered_run, halt_at, &p, &data, &len), ND_ECANCELLED);
    cr_assert_eq(p.runs, 0, "stopped before it started");
    cr_assert_null(data);
    sim_work_close(&w);
}

Test(node_compute, without_halt_a_chunk_runs_to_its_end)
{
    sim_work w;
    const char *european[] = { EUROPEAN };
    open_work(&w, "option", european, 1, false);
    uint8_t want[SIM_MAX_OUT * (SIM_STATS_MAX_ENCODED + 4)], *data = NULL;
    nd_chunk c = { .start = 5, .count = 0 };
    size_t want_len = whole(&w, &c, want, sizeof want), len = 0;
    cr_assert_eq(nd_compute_cpu(&w, &c, &data, &len), 0, "an empty chunk has (empty) statistics");
    cr_assert_eq(len, want_len);
    cr_assert_eq(memcmp(data, want, len), 0);
    free(data);
    c.count = 70000;
    want_len = whole(&w, &c, want, sizeof want);
    cr_assert_eq(nd_compute_cpu(&w, &c, &data, &len), 0);
    cr_assert_eq(len, want_len);
    cr_assert_eq(memcmp(data, want, len), 0);
    free(data);
    sim_work_close(&w);
}
