/*
 * verify.c — spot-checks, the screen, credibility and quarantine (see
 * sched.h and docs/verification.md).
 *
 * A chunk's result bytes are the same on every backend, so a check needs
 * no vote and no tolerance: the accepted range is computed again on a node
 * of another owner and address, and the two byte strings are equal or
 * they are not. A check is decided when a run agrees with an earlier run
 * of another owner; every node that returned other bytes for the range is
 * quarantined. A check holds at most MAX_RUNS runs: two honest nodes
 * always agree, so more are needed only when several saboteurs of
 * different owners answer one range.
 *
 * Which results are checked: none from the job's trusted tiers; of the
 * others, a share drawn at random when the result is accepted — for an
 * enrolled node all of them until it has passed `warmup` checks in a row,
 * then 1/streak (never under `floor`); for a public node (fresh keys cost
 * nothing, so a record cannot carry it) a share that follows the chunk's
 * size against the job's, so that a saboteur escapes while moving the
 * job's result by one standard error with a chance below `escape`
 * (docs/verification.md derives it) — and every result the screen finds
 * odd.
 */
#include "sched/ledger_int.h"

#include "base/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- credibility ------------------------------------------------------------------------ */

sc_node_trust *sc__trust(sc_ledger *l, const sc_node_info *n)
{
    bool added;
    sc_node_trust *t = sc__trust_map_put(&l->trust, n->id, &added);
    if (added) {
        t->owner = n->owner;
        t->streak = n->streak;
    }
    t->tier = n->tier;
    return t;
}

int sc_node_trust_get(sc_ledger *l, uint64_t node, sc_node_trust *out)
{
    const sc_node_trust *t = sc__trust_map_get(&l->trust, node);
    if (t == NULL)
        return SC_ENONODE;
    *out = *t;
    return 0;
}

static void passed(sc_ledger *l, uint64_t node)
{
    sc_node_trust *t = sc__trust_map_get(&l->trust, node);
    if (t != NULL && !t->quarantined) {
        t->streak++;
        t->passed++;
    }
}

/* The chance that a result of claim c is checked, the screen aside. */
static double check_share(const sc_ledger *l, const job *j, const claim *c, const sc_node_trust *t)
{
    const sc_verify_config *v = &l->cfg.verify;
    double q;
    if (c->tier == SC_TIER_PUBLIC) {
        double share = (double)c->count / (double)j->spec.items;
        q = 1 - pow(v->escape, v->screen_z * sqrt(share));
        if (q < v->public_floor)
            q = v->public_floor;
    } else if (t == NULL || t->streak < v->warmup) {
        q = 1;
    } else {
        q = 1.0 / t->streak;
        if (q < v->floor)
            q = v->floor;
    }
    return q > j->spec.check_rate ? q : j->spec.check_rate;
}

/* ---- the screen -------------------------------------------------------------------------- */

/* Whether one statistic of a result is odd in itself: its histogram does
 * not add up to its count, or its mean lies outside [min, max]. */
static bool odd_alone(const sim_stats *s)
{
    uint64_t n = sim_stats_count(s), h = 0;
    for (int i = 0; i < SIM_HIST_BINS + 2; i++)
        h += sim_stats_hist(s, i);
    if (h != n)
        return true;
    if (n == 0)
        return false;
    double m = sim_stats_mean(s), lo = sim_stats_min(s), hi = sim_stats_max(s);
    double slack = 1e-9 * (fabs(lo) + fabs(hi)) + 1e-12;
    return !(m >= lo - slack && m <= hi + slack);
}

/* Whether a result's mean (of statistic `r`) is more than screen_z of its
 * standard errors off the mean of the rest of its lane (agg holds both),
 * or its spread is far from theirs. */
static bool odd_against(const sc_ledger *l, const sim_stats *agg, const sim_stats *s)
{
    double nc = (double)sim_stats_count(s), nl = (double)sim_stats_count(agg);
    if (nc < 2 || nl - nc < nc)
        return false; /* too little to compare with */
    double mc = sim_stats_mean(s), ml = sim_stats_mean(agg), var = sim_stats_variance(agg);
    double mo = (nl * ml - nc * mc) / (nl - nc);
    if (!(var > 0))
        return mc != mo;
    double z = (mc - mo) / sqrt(var * (1 / nc + 1 / (nl - nc)));
    double ratio = sim_stats_variance(s) / var;
    return !(fabs(z) <= l->cfg.verify.screen_z) || (nc >= 100 && !(ratio > 0.25 && ratio < 4));
}

static bool screen(const sc_ledger *l, const job *j, const lane *ln, const sim_stats *res)
{
    for (uint32_t r = 0; r < j->nres; r++)
        if (odd_alone(&res[r]))
            return true;
    for (uint32_t r = 0; r < j->nres; r += j->spec.nout)
        if (odd_against(l, &ln->agg[r], &res[r]))
            return true;
    return false;
}

/* ---- checks ----------------------------------------------------------------------------- */

static int quarantine(sc_ledger *l, uint64_t node, uint64_t now_ms, bool journal, job *caught);

static double random01(sc_ledger *l)
{
    return (double)(sc__random(l) >> 11) * 0x1.0p-53;
}

static run run_of(uint64_t node, uint64_t owner, uint64_t addr, const void *bytes, size_t len)
{
    run r = { node, owner, addr, sf_malloc(len ? len : 1), len };
    memcpy(r.bytes, bytes, len);
    return r;
}

static check *check_add(job *j, uint32_t li, uint64_t chunk, uint64_t first, uint64_t count, run original)
{
    if (j->nchecks == j->checks_cap)
        j->checks = sf_grow(j->checks, &j->checks_cap, sizeof *j->checks);
    check *c = &j->checks[j->nchecks++];
    *c = (check){ .id = ++j->next_check, .lane = li, .chunk = chunk, .first = first, .count = count };
    c->runs[0] = original;
    c->nruns = 1;
    return c;
}

static void check_remove(job *j, size_t i)
{
    for (uint32_t r = 0; r < j->checks[i].nruns; r++)
        free(j->checks[i].runs[r].bytes);
    /* keep the order: the oldest checks go out first */
    memmove(&j->checks[i], &j->checks[i + 1], (j->nchecks - i - 1) * sizeof *j->checks);
    j->nchecks--;
}

static check *check_find(job *j, uint64_t id, size_t *at)
{
    for (size_t i = 0; i < j->nchecks; i++)
        if (j->checks[i].id == id) {
            if (at != NULL)
                *at = i;
            return &j->checks[i];
        }
    return NULL;
}

void sc__checks_free(job *j)
{
    while (j->nchecks > 0)
        check_remove(j, j->nchecks - 1);
    free(j->checks);
    j->checks = NULL;
    j->checks_cap = 0;
}

bool sc__verify_accepted(sc_ledger *l, job *j, const claim *c, const sim_stats *res, const void *bytes, size_t len)
{
    if (c->tier & j->spec.trusted_tiers) {
        j->trusted_items += c->count;
        return false;
    }
    if (!l->cfg.verify.on && j->spec.check_rate <= 0)
        return false;
    bool odd = l->cfg.verify.on && screen(l, j, &j->lanes[c->lane], res);
    if (!odd) {
        double p = l->cfg.verify.on ? check_share(l, j, c, sc__trust_map_get(&l->trust, c->node))
                                    : j->spec.check_rate;
        if (p < 1 && random01(l) >= p)
            return false;
    }
    check *k = check_add(j, c->lane, c->chunk, c->first, c->count, run_of(c->node, c->owner, c->addr, bytes, len));
    k->urgent = odd;
    return true;
}

void sc__check_restore(job *j, const sc_record *r)
{
    check_add(j, r->variant, r->chunk, r->first, r->count, run_of(r->node, r->owner, 0, r->result, r->result_len));
}

/* Whether node n may compute check c: not one of its runs' nodes, owners or
 * addresses, and not a node that lost a claim of it. */
static bool may_check(const check *c, const sc_node_info *n)
{
    if (c->inflight || c->nruns == MAX_RUNS)
        return false;
    for (uint32_t r = 0; r < c->nruns; r++) {
        const run *x = &c->runs[r];
        if (x->node == n->id || (x->owner != 0 && x->owner == n->owner) || (x->addr != 0 && x->addr == n->addr))
            return false;
    }
    uint32_t lost = c->nlost < MAX_CHECK_LOST ? c->nlost : MAX_CHECK_LOST;
    for (uint32_t i = 0; i < lost; i++)
        if (c->lost[i] == n->id)
            return false;
    return true;
}

check *sc__check_for(job *j, const sc_node_info *n)
{
    for (int urgent = 1; urgent >= 0; urgent--)
        for (size_t i = 0; i < j->nchecks; i++)
            if (j->checks[i].urgent == (bool)urgent && j->lanes[j->checks[i].lane].dropped_after == 0 &&
                may_check(&j->checks[i], n))
                return &j->checks[i];
    return NULL;
}

size_t sc__checks_expire(sc_ledger *l, job *j, uint64_t now_ms)
{
    size_t n = 0;
    for (size_t i = j->nchecks; i-- > 0;) {
        check *k = &j->checks[i];
        if (k->inflight)
            continue;
        if (k->since_ms == 0)
            k->since_ms = now_ms ? now_ms : 1;
        else if (now_ms - k->since_ms >= l->cfg.verify.check_wait_ms) {
            check_remove(j, i);
            j->checks_abandoned++;
            l->checks_abandoned++;
            n++;
        }
    }
    return n;
}

void sc__check_lost(job *j, const claim *c)
{
    check *k = check_find(j, c->check, NULL);
    if (k == NULL)
        return;
    k->inflight = false;
    k->since_ms = 0;
    k->lost[k->nlost++ % MAX_CHECK_LOST] = c->node;
}

sc_outcome sc__check_answer(sc_ledger *l, job *j, const claim *c, const void *bytes, size_t len)
{
    size_t at;
    check *k = check_find(j, c->check, &at);
    if (k == NULL)
        return SC_ACCEPTED; /* decided meanwhile: the work was asked for all the same */
    k->inflight = false;
    int agree = -1;
    for (uint32_t r = 0; r < k->nruns && agree < 0; r++)
        if (k->runs[r].len == len && memcmp(k->runs[r].bytes, bytes, len) == 0)
            agree = (int)r;
    if (agree < 0) { /* a disagreement: another owner's run decides */
        k->since_ms = 0;
        if (k->nruns < MAX_RUNS)
            k->runs[k->nruns++] = run_of(c->node, c->owner, c->addr, bytes, len);
        return SC_ACCEPTED;
    }
    /* Decided: runs[agree] and this one. Everyone else lied. */
    check done = *k;
    uint64_t wrong[MAX_RUNS];
    uint32_t nwrong = 0;
    for (uint32_t r = 0; r < done.nruns; r++)
        if ((int)r != agree)
            wrong[nwrong++] = done.runs[r].node;
    sc_record rec = { .type = SC_REC_VERIFY, .job = j->spec.id, .variant = done.lane, .chunk = done.chunk,
        .first = done.first, .count = done.count, .node = done.runs[agree].node, .peer = c->node };
    done.nruns = 0; /* the runs' bytes go with the check */
    check_remove(j, at);
    passed(l, done.runs[agree].node);
    passed(l, c->node);
    if (agree == 0) {
        j->verified_items += done.count;
        j->checks_passed++;
        l->checks_passed++;
        sc__journal(l, &rec);
    } else {
        j->checks_failed++;
        l->checks_failed++;
    }
    for (uint32_t i = 0; i < nwrong; i++)
        quarantine(l, wrong[i], 0, true, j);
    return SC_ACCEPTED;
}

int sc__cmp_key(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

bool sc__restore_verified(const job *j, uint32_t variant, uint64_t first)
{
    uint64_t key[2] = { variant, first };
    return j->nverified_keys > 0 &&
        bsearch(key, j->verified_keys, j->nverified_keys, sizeof *j->verified_keys, sc__cmp_key) != NULL;
}

/* ---- quarantine ------------------------------------------------------------------------- */

void sc__job_note_quarantined(job *j, uint64_t node)
{
    for (uint32_t i = 0; i < j->nquarantined; i++)
        if (j->quarantined[i] == node)
            return;
    if (j->nquarantined < MAX_JOB_QUARANTINED)
        j->quarantined[j->nquarantined++] = node;
}

/* Takes node's runs out of j's checks (its word counts no more); a check
 * whose accepted result is node's goes (the job is restored without it). */
static void forget_runs(job *j, uint64_t node)
{
    for (size_t i = j->nchecks; i-- > 0;) {
        check *k = &j->checks[i];
        if (k->runs[0].node == node) {
            check_remove(j, i);
            continue;
        }
        for (uint32_t r = k->nruns; r-- > 1;)
            if (k->runs[r].node == node) {
                free(k->runs[r].bytes);
                k->runs[r] = k->runs[--k->nruns];
            }
    }
}

/* Quarantines node; the job where it was caught (may be NULL) gets a
 * record even when it holds no result of it, so the verdict is kept. */
static int quarantine(sc_ledger *l, uint64_t node, uint64_t now_ms, bool journal, job *caught)
{
    if (l == NULL || node == 0)
        return SC_EINVAL;
    sc_node_trust *t = sc__trust_map_put(&l->trust, node, NULL);
    if (t->quarantined)
        return 0;
    t->quarantined = true;
    t->failed++;
    l->quarantined++;
    t->streak = 0;
    uint64_t owner = t->owner;
    if (owner != 0) /* the owner's other keys start again from nothing */
        SF_MAP_EACH(&l->trust, e)
            if (e->val.owner == owner)
                e->val.streak = 0;
    sc_release_node(l, node, 0, now_ms);
    for (size_t i = 0; i < l->njobs; i++) {
        job *j = l->jobs[i];
        forget_runs(j, node);
        const uint64_t *items = sc__contrib_map_get(&j->contrib, node);
        bool holds = items != NULL && *items > 0;
        if (!holds && j != caught)
            continue;
        if (holds && !j->tainted) {
            j->tainted = true;
            l->ntainted++;
        }
        sc__job_note_quarantined(j, node);
        if (journal) {
            sc_record r = { .type = SC_REC_QUARANTINE, .job = j->spec.id, .node = node };
            sc__journal(l, &r);
        }
    }
    return 0;
}

int sc_node_quarantine(sc_ledger *l, uint64_t node, uint64_t now_ms, bool journal)
{
    return quarantine(l, node, now_ms, journal, NULL);
}

void sc__count_malformed(sc_ledger *l, job *j, uint64_t node, uint64_t now_ms)
{
    sc_node_trust *t = sc__trust_map_get(&l->trust, node);
    if (t == NULL || !l->cfg.verify.on)
        return;
    if (++t->malformed >= l->cfg.verify.malformed_limit)
        quarantine(l, node, now_ms, true, j);
}

void sc_node_malformed(sc_ledger *l, uint64_t node, uint64_t now_ms)
{
    sc__count_malformed(l, NULL, node, now_ms);
}

size_t sc_tainted_jobs(const sc_ledger *l, uint64_t *ids, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < l->njobs && n < l->ntainted; i++)
        if (l->jobs[i]->tainted) {
            if (n < cap)
                ids[n] = l->jobs[i]->spec.id;
            n++;
        }
    return n;
}

bool sc_job_tainted(sc_ledger *l, uint64_t id)
{
    job *j = sc__job_find(l, id);
    return j != NULL && j->tainted;
}
