/*
 * farmsim.c — see farmsim.h.
 */
#include "tests/support/farmsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_RESULT = 8 * 1024 };

static sim_layout layout;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static double value(uint32_t v, uint64_t i)
{
    return (double)(mix(i + 0x5eed) % 1000000) / 10000.0 + 0.5 * v;
}

static void layout_once(void)
{
    if (layout.scale == 0 && sim_layout_make(&layout, 1e4, 0, 200) != 0)
        abort();
}

static void journal_put(void *ctx, const sc_record *r)
{
    fs_farm *f = ctx;
    if (f->nrecs == f->recs_cap) {
        f->recs_cap = f->recs_cap ? 2 * f->recs_cap : 256;
        f->recs = realloc(f->recs, f->recs_cap * sizeof *f->recs);
    }
    sc_record *c = &f->recs[f->nrecs++];
    *c = *r;
    c->result = NULL;
    if (r->result_len > 0) {
        void *p = malloc(r->result_len);
        memcpy(p, r->result, r->result_len);
        c->result = p;
    }
}

void fs_init(fs_farm *f, const sc_verify_config *v, uint64_t seed)
{
    layout_once();
    memset(f, 0, sizeof *f);
    f->rng = seed;
    sc_config cfg = {
        .target_chunk_ms = 1000, .min_chunk = 100, .max_chunk = 1000000, .min_lease_ms = 1000,
        .seed = seed, .journal = journal_put, .journal_ctx = f, .verify = *v,
    };
    f->l = sc_ledger_create(&cfg);
}

void fs_free(fs_farm *f)
{
    sc_ledger_destroy(f->l);
    for (size_t i = 0; i < f->nrecs; i++)
        free((void *)f->recs[i].result);
    free(f->recs);
    free(f->nodes);
    free(f->jobs);
    memset(f, 0, sizeof *f);
}

fs_node *fs_add(fs_farm *f, fs_node n)
{
    f->nodes = realloc(f->nodes, (f->nnodes + 1) * sizeof *f->nodes);
    if (n.items_per_s == 0)
        n.items_per_s = 1000;
    f->nodes[f->nnodes] = n;
    return &f->nodes[f->nnodes++];
}

sc_job_spec fs_single(uint64_t id, uint64_t items)
{
    layout_once();
    return (sc_job_spec){ .id = id, .strategy = SC_SINGLE, .items = items, .nout = 1, .layouts = &layout };
}

sc_job_spec fs_stat_weights(uint64_t id, uint64_t items, uint32_t variants)
{
    static const double steps[8] = { 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8 };
    sc_job_spec s = fs_single(id, items);
    s.strategy = SC_STAT_WEIGHTS;
    s.variants = variants;
    s.steps = steps;
    return s;
}

sc_job_spec fs_tournament(uint64_t id, uint64_t items, uint32_t variants)
{
    sc_job_spec s = fs_single(id, items);
    s.strategy = SC_TOURNAMENT;
    s.variants = variants;
    s.phase_items = 1000;
    s.growth = 4;
    return s;
}

/* The result a node of kind n sends for a claim: for each statistic
 * (variant), its values over the range, changed as the kind says. */
static size_t result(const fs_job *j, const sc_claim_out *c, const fs_node *n, bool cheat, unsigned char *buf)
{
    uint32_t nres = j->spec.strategy == SC_STAT_WEIGHTS ? j->spec.variants : 1;
    sim_stats s[8];
    for (uint32_t r = 0; r < nres; r++) {
        uint32_t v = j->spec.strategy == SC_STAT_WEIGHTS ? r : c->variant;
        sim_stats_init(&s[r], &layout);
        for (uint64_t i = c->first; i < c->first + c->count; i++) {
            double x = value(v, i);
            if (cheat && n->kind == FS_ZEROS)
                x = 0;
            else if (cheat && n->kind == FS_FABRICATE)
                x = 15;
            else if (cheat)
                x += n->delta;
            sim_stats_add(&s[r], x);
        }
    }
    size_t len = 0;
    if (sc_result_encode(s, nres, buf, MAX_RESULT, &len) != 0)
        abort();
    return len;
}

/* Whether node n cheats on its next result. */
static bool cheats(const fs_node *n)
{
    switch (n->kind) {
    case FS_HONEST:
        return false;
    case FS_BIAS_SOME:
        return n->every > 0 && n->chunks % n->every == n->every - 1;
    case FS_TURNCOAT:
        return n->chunks >= n->after;
    default:
        return true;
    }
}

static fs_job *job_of(fs_farm *f, uint64_t id)
{
    for (size_t i = 0; i < f->njobs; i++)
        if (f->jobs[i].spec.id == id)
            return &f->jobs[i];
    return NULL;
}

/* Restores every job a quarantine tainted from its journal. */
static void restore_tainted(fs_farm *f)
{
    if (sc_tainted_jobs(f->l, NULL, 0) == 0)
        return;
    for (size_t k = 0; k < f->njobs; k++) {
        fs_job *j = &f->jobs[k];
        if (!sc_job_tainted(f->l, j->spec.id))
            continue;
        sc_record *mine = malloc((f->nrecs + 1) * sizeof *mine);
        size_t n = 0;
        for (size_t i = 0; i < f->nrecs; i++)
            if (f->recs[i].job == j->spec.id)
                mine[n++] = f->recs[i];
        sc_job_forget(f->l, j->spec.id);
        if (sc_job_restore(f->l, &j->spec, mine, n) != 0)
            abort();
        free(mine);
        f->restores++;
    }
}

static uint64_t done_items(fs_farm *f, uint64_t job)
{
    sc_job_status st;
    return sc_job_status_get(f->l, job, &st) == 0 ? st.done_items : 0;
}

sc_job_state fs_run(fs_farm *f, const sc_job_spec *spec, unsigned max_rounds)
{
    static unsigned char buf[MAX_RESULT], honest[MAX_RESULT];
    f->jobs = realloc(f->jobs, (f->njobs + 1) * sizeof *f->jobs);
    fs_job *j = &f->jobs[f->njobs++];
    j->spec = *spec;
    if (spec->steps != NULL) {
        memcpy(j->steps, spec->steps, (spec->variants - 1) * sizeof *j->steps);
        j->spec.steps = j->steps;
    }
    if (sc_job_add(f->l, &j->spec) != 0)
        abort();
    sc_job_status st;
    for (unsigned round = 0; round < max_rounds; round++) {
        for (size_t k = 0; k < f->nnodes; k++) {
            fs_node *n = &f->nodes[k];
            sc_job_status_get(f->l, j->spec.id, &st);
            if (st.state != SC_JOB_RUNNING)
                return st.state;
            sc_node_trust t;
            if (sc_node_trust_get(f->l, n->id, &t) == 0 && t.quarantined) {
                n->quarantined = true;
                continue;
            }
            sc_node_info info = { .id = n->id, .tier = n->tier, .backends = 1, .mem_bytes = UINT64_MAX,
                .items_per_s = n->items_per_s, .owner = n->owner, .addr = n->addr };
            sc_claim_out c;
            unsigned got = 0;
            sc_claim(f->l, &info, 1, f->now, &c, &got);
            if (got == 0)
                continue;
            fs_job *cj = job_of(f, c.job);
            bool cheat = cheats(n);
            size_t len = result(cj, &c, n, cheat, buf);
            size_t hlen = cheat ? result(cj, &c, n, false, honest) : len;
            bool bad = cheat && (hlen != len || memcmp(buf, honest, len) != 0);
            uint64_t before = done_items(f, c.job);
            sc_outcome out;
            if (sc_complete(f->l, c.job, c.chunk, c.token, n->id, buf, len, f->now, &out, NULL, NULL) != 0)
                abort();
            bool fresh = out == SC_ACCEPTED && done_items(f, c.job) == before + c.count;
            uint32_t per = cj->spec.strategy == SC_STAT_WEIGHTS ? cj->spec.variants : 1;
            if (fresh)
                f->work_items += c.count * per;
            else
                f->check_items += c.count * per;
            n->chunks++;
            n->bad_sent += bad;
            if (bad && fresh && !n->quarantined)
                n->bad_accepted++;
            restore_tainted(f);
        }
        f->now += 50;
        sc_reclaim(f->l, f->now);
        restore_tainted(f);
    }
    sc_job_status_get(f->l, j->spec.id, &st);
    return st.state;
}

bool fs_exact(fs_farm *f, uint64_t id)
{
    fs_job *j = job_of(f, id);
    sc_job_status st;
    if (j == NULL || sc_job_status_get(f->l, id, &st) != 0)
        return false;
    uint32_t nres = j->spec.strategy == SC_STAT_WEIGHTS ? j->spec.variants : 1;
    uint32_t lead = 0;
    uint64_t done = st.done_items;
    if (j->spec.strategy == SC_TOURNAMENT) {
        for (uint32_t v = 0; v < j->spec.variants; v++) {
            sc_variant_status vs;
            sc_variant_status_get(f->l, id, v, &vs);
            if (vs.rank == 1) {
                lead = v;
                done = vs.done_items;
            }
        }
    }
    for (uint32_t r = 0; r < nres; r++) {
        sim_stats want;
        sim_stats_init(&want, &layout);
        for (uint64_t i = 0; i < done; i++)
            sim_stats_add(&want, value(j->spec.strategy == SC_STAT_WEIGHTS ? r : lead, i));
        if (!sim_stats_equal(&want, &st.aggregate[r]))
            return false;
    }
    return true;
}

double fs_moved_by(fs_farm *f, uint64_t id)
{
    sc_job_status st;
    if (sc_job_status_get(f->l, id, &st) != 0)
        return INFINITY;
    sim_stats want;
    sim_stats_init(&want, &layout);
    for (uint64_t i = 0; i < st.done_items; i++)
        sim_stats_add(&want, value(0, i));
    return fabs(sim_stats_mean(&st.aggregate[0]) - sim_stats_mean(&want)) / sim_stats_stderr(&want);
}
