/*
 * scheduler_json.c — the texts the scheduler writes: a job's result (the
 * jobs table's `result`, job.finished) and the members of its events. The
 * dashboard and the integration tests compare these bytes: a change here
 * is a change of the API.
 */
#include "actors/coord/scheduler_int.h"

#include "base/alloc.h"
#include "base/str.h"

#include <inttypes.h>
#include <stdlib.h>

enum { NODES_SHOWN = 32 };    /* contributions listed, the largest first */

/* Each output's count, mean, standard error, min, max and histogram, as
 * the member "outputs":[...]. */
static void cat_outputs(sf_str *b, const cd__job_info *ji, const sc_job_status *st)
{
    sf_str_cat(b, "\"outputs\":[");
    for (uint32_t o = 0; o < st->nout && o < ji->nout; o++) {
        const sim_stats *a = &st->aggregate[o];
        sf_str_catf(b, "%s{\"name\":\"%s\",\"count\":%" PRIu64 ",\"mean\":", o ? "," : "", ji->names[o],
            sim_stats_count(a));
        sf_str_cat_number(b, sim_stats_mean(a));
        sf_str_cat(b, ",\"stderr\":");
        sf_str_cat_number(b, sim_stats_stderr(a));
        sf_str_cat(b, ",\"min\":");
        sf_str_cat_number(b, sim_stats_min(a));
        sf_str_cat(b, ",\"max\":");
        sf_str_cat_number(b, sim_stats_max(a));
        sf_str_cat(b, ",");
        if (ji->has_ref & (1u << o)) {
            sf_str_cat(b, "\"closed_form\":");
            sf_str_cat_number(b, ji->ref[o]);
            sf_str_cat(b, ",");
        }
        sf_str_cat(b, "\"hist\":{\"lo\":");
        sf_str_cat_number(b, a->layout.hist_lo);
        sf_str_cat(b, ",\"hi\":");
        sf_str_cat_number(b, a->layout.hist_hi);
        sf_str_catf(b, ",\"under\":%" PRIu64 ",\"over\":%" PRIu64 ",\"bins\":[", sim_stats_hist(a, 0),
            sim_stats_hist(a, SIM_HIST_BINS + 1));
        for (int k = 1; k <= SIM_HIST_BINS; k++)
            sf_str_catf(b, "%s%" PRIu64, k > 1 ? "," : "", sim_stats_hist(a, k));
        sf_str_cat(b, "]}}");
    }
    sf_str_cat(b, "]");
}

typedef struct node_share {
    uint64_t node, chunks, items;
} node_share;

static int share_cmp(const void *a, const void *b)
{
    const node_share *x = a, *y = b;
    if (x->items != y->items)
        return x->items > y->items ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* The members "nodes":[{"node","chunks","items"}...] (the NODES_SHOWN
 * largest) and "nodes_total". Sorting costs what the job's nodes number,
 * at most four times a second. */
static void cat_nodes(sf_str *b, const cd__job_info *ji)
{
    node_share *v = NULL;
    size_t k = 0;
    if (ji->by_node.n > 0) {
        v = sf_calloc(ji->by_node.n, sizeof *v);
        SF_MAP_EACH(&ji->by_node, e)
            v[k++] = (node_share){ e->key, e->val.chunks, e->val.items };
        qsort(v, k, sizeof *v, share_cmp);
    }
    sf_str_cat(b, "\"nodes\":[");
    for (size_t i = 0; i < k && i < NODES_SHOWN; i++)
        sf_str_catf(b, "%s{\"node\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"items\":%" PRIu64 "}", i ? "," : "",
            v[i].node, v[i].chunks, v[i].items);
    sf_str_catf(b, "],\"nodes_total\":%zu", k);
    free(v);
}

/* stat_weights' part of the result: ,"weights":[...], each parameter's
 * weight (the change of output 0's mean per unit of its step) with its
 * standard error from the per-chunk paired differences. */
static void cat_weights(sf_str *b, cd__sched *s, const cd__job_info *ji)
{
    sc_variant_status vs;
    sf_str_cat(b, ",\"weights\":[");
    for (uint32_t v = 1; v < ji->nvariants; v++) {
        if (sc_variant_status_get(s->l, ji->id, v, &vs) != 0)
            continue;
        sf_str_catf(b, "%s{\"name\":", v > 1 ? "," : "");
        sf_str_cat_json(b, ji->vnames[v]);
        sf_str_cat(b, ",\"step\":");
        sf_str_cat_number(b, ji->steps[v - 1]);
        sf_str_cat(b, ",\"weight\":");
        sf_str_cat_number(b, vs.weight);
        sf_str_cat(b, ",\"stderr\":");
        sf_str_cat_number(b, vs.weight_se);
        sf_str_cat(b, "}");
    }
    sf_str_cat(b, "]");
}

/* A tournament's part: ,"candidates":[...],"phases":[...],"winner":...
 * (who ran how far, and who dropped out after which phase). */
static void cat_tournament(sf_str *b, cd__sched *s, const cd__job_info *ji, const sc_job_status *st)
{
    sc_variant_status vs;
    const char *winner = NULL;
    sf_str_cat(b, ",\"candidates\":[");
    for (uint32_t v = 0; v < ji->nvariants; v++) {
        if (sc_variant_status_get(s->l, ji->id, v, &vs) != 0)
            continue;
        sf_str_catf(b, "%s{\"name\":", v ? "," : "");
        sf_str_cat_json(b, ji->vnames[v]);
        sf_str_catf(b, ",\"alive\":%s,\"rank\":%u,\"items\":%" PRIu64 ",\"mean\":", vs.alive ? "true" : "false",
            vs.rank, vs.done_items);
        sf_str_cat_number(b, vs.mean);
        sf_str_cat(b, ",\"stderr\":");
        sf_str_cat_number(b, vs.stderr_);
        sf_str_catf(b, ",\"dropped_after\":%u}", vs.dropped_after);
        if (vs.alive && vs.rank == 1)
            winner = ji->vnames[v];
    }
    /* The ladder: after phase p, who dropped out and how many were left. */
    sf_str_cat(b, "],\"phases\":[");
    uint32_t alive = ji->nvariants;
    for (uint32_t p = 1; p <= st->phase; p++) {
        sf_str_catf(b, "%s{\"phase\":%u,\"dropped\":[", p > 1 ? "," : "", p);
        bool first = true;
        for (uint32_t v = 0; v < ji->nvariants; v++)
            if (sc_variant_status_get(s->l, ji->id, v, &vs) == 0 && !vs.alive && vs.dropped_after == p) {
                if (!first)
                    sf_str_cat(b, ",");
                sf_str_cat_json(b, ji->vnames[v]);
                first = false;
                alive--;
            }
        sf_str_catf(b, "],\"alive\":%u}", alive);
    }
    sf_str_cat(b, "],\"winner\":");
    if (winner != NULL && st->state == SC_JOB_COMPLETE)
        sf_str_cat_json(b, winner);
    else
        sf_str_cat(b, "null");
}

/* How much of the result is verified: "verification":{...}. */
static void cat_verification(sf_str *b, const sc_job_status *st)
{
    uint64_t unchecked = st->done_items - (st->verified_items + st->trusted_items > st->done_items
        ? st->done_items : st->verified_items + st->trusted_items);
    sf_str_catf(b, "\"verification\":{\"verified_items\":%" PRIu64 ",\"trusted_items\":%" PRIu64
        ",\"unchecked_items\":%" PRIu64 ",\"checks_passed\":%" PRIu64 ",\"checks_failed\":%" PRIu64
        ",\"checks_waiting\":%" PRIu64 ",\"checks_abandoned\":%" PRIu64 ",\"retracted_items\":%" PRIu64
        ",\"quarantined_nodes\":[",
        st->verified_items, st->trusted_items, unchecked, st->checks_passed, st->checks_failed, st->checks_waiting,
        st->checks_abandoned, st->retracted_items);
    for (uint32_t i = 0; i < st->quarantined; i++)
        sf_str_catf(b, "%s%" PRIu64, i ? "," : "", st->quarantined_ids[i]);
    sf_str_cat(b, "]}");
}

char *cd__result_json(cd__sched *s, uint64_t job)
{
    sf_str b = SF_STR_INIT;
    sc_job_status st;
    const cd__job_info *ji = cd__job_info_of(s, job);
    if (sc_job_status_get(s->l, job, &st) != 0 || ji == NULL) {
        sf_str_cat(&b, "{}");
        return sf_str_take(&b);
    }
    sf_str_catf(&b, "{\"state\":\"%s\",\"items_done\":%" PRIu64 ",\"items_failed\":%" PRIu64
        ",\"chunks_accepted\":%" PRIu64 ",\"chunks_failed\":%" PRIu64 ",\"reclaims\":%" PRIu64 ",",
        cd__state_name(st.state), st.done_items, st.failed_items, st.chunks_accepted, st.chunks_failed, st.reclaims);
    cat_outputs(&b, ji, &st);
    /* the outputs' exact bytes, as `simfarm sim` prints them (docs/kernels.md) */
    char digest[SC_DIGEST_LEN + 1];
    if (sc_result_digest(st.aggregate, st.nout, digest) == 0)
        sf_str_catf(&b, ",\"digest\":\"%s\"", digest);
    sf_str_cat(&b, ",");
    cat_nodes(&b, ji);
    sf_str_cat(&b, ",");
    cat_verification(&b, &st);
    if (ji->strategy == SC_STAT_WEIGHTS)
        cat_weights(&b, s, ji);
    else if (ji->strategy != SC_SINGLE)
        cat_tournament(&b, s, ji, &st);
    sf_str_cat(&b, "}");
    return sf_str_take(&b);
}

char *cd__progress_json(const cd__job_info *ji, const sc_job_status *st)
{
    sf_str b = SF_STR_INIT;
    sf_str_catf(&b,
        "\"items\":%" PRIu64 ",\"items_done\":%" PRIu64 ",\"items_failed\":%" PRIu64 ",\"items_in_flight\":%" PRIu64
        ",\"claims_in_flight\":%u,\"chunks_accepted\":%" PRIu64 ",\"chunks_failed\":%" PRIu64 ",\"reclaims\":%" PRIu64
        ",\"items_per_s\":%.0f,",
        st->items, st->done_items, st->failed_items, st->inflight_items, st->inflight_claims, st->chunks_accepted,
        st->chunks_failed, st->reclaims, ji->items_per_s);
    cat_outputs(&b, ji, st);
    sf_str_cat(&b, ",");
    cat_nodes(&b, ji);
    sf_str_cat(&b, ",");
    cat_verification(&b, st);
    sf_str_cat(&b, ",\"blocked\":");
    if (ji->blocked[0])
        sf_str_cat_json(&b, ji->blocked);
    else
        sf_str_cat(&b, "null");
    return sf_str_take(&b);
}

char *cd__submitted_json(const char *owner, const char *kernel, const char *strategy, const char *items,
    const char *priority)
{
    sf_str b = SF_STR_INIT;
    sf_str_cat(&b, "\"owner\":");
    sf_str_cat_json(&b, owner);
    sf_str_cat(&b, ",\"kernel\":");
    sf_str_cat_json(&b, kernel);
    sf_str_catf(&b, ",\"strategy\":\"%s\",\"items\":%s,\"priority\":%s", strategy, items, priority);
    return sf_str_take(&b);
}

char *cd__error_json(const char *why)
{
    sf_str b = SF_STR_INIT;
    sf_str_cat(&b, "{\"error\":");
    sf_str_cat_json(&b, why);
    sf_str_cat(&b, "}");
    return sf_str_take(&b);
}
