/*
 * test_sched.c — the claim ledger.
 *
 * A seeded random driver runs thousands of interleavings of claims,
 * completions (good, duplicate, conflicting, late, foreign, malformed),
 * heartbeats, expiries, lost nodes and restarts from the journal against a
 * model, and checks after every step: every item is pending, in flight,
 * done or failed exactly once; the aggregate equals a reference computed
 * from the accepted ranges alone; outcomes are as specified.
 */
#include "sched/sched.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a synthetic kernel: value of item i, deterministic ---- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static double value_of(uint64_t i)
{
    return (double)(mix(i + 12345) % 10000) / 100.0;
}

static sim_layout layout;

static void init_layout(void)
{
    cr_assert_eq(sim_layout_make(&layout, 1e6, 0, 100), 0);
}

static void stats_of(uint64_t first, uint64_t count, sim_stats *s)
{
    sim_stats_init(s, &layout);
    for (uint64_t i = first; i < first + count; i++)
        sim_stats_add(s, value_of(i));
}

static size_t result_of(uint64_t first, uint64_t count, unsigned char *buf, size_t cap)
{
    sim_stats s;
    size_t len = 0;
    stats_of(first, count, &s);
    cr_assert_eq(sc_result_encode(&s, 1, buf, cap, &len), 0);
    return len;
}

/* ---- the journal, kept as a real store would ---- */

typedef struct journal {
    sc_record *recs;
    unsigned char **bytes;
    size_t n, cap;
} journal;

static void journal_put(void *ctx, const sc_record *r)
{
    journal *j = ctx;
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 64;
        j->recs = realloc(j->recs, j->cap * sizeof *j->recs);
        j->bytes = realloc(j->bytes, j->cap * sizeof *j->bytes);
    }
    j->recs[j->n] = *r;
    j->bytes[j->n] = NULL;
    if (r->result_len > 0) {
        j->bytes[j->n] = malloc(r->result_len);
        memcpy(j->bytes[j->n], r->result, r->result_len);
        j->recs[j->n].result = j->bytes[j->n];
    }
    j->n++;
}

static void journal_free(journal *j)
{
    for (size_t i = 0; i < j->n; i++)
        free(j->bytes[i]);
    free(j->recs);
    free(j->bytes);
    memset(j, 0, sizeof *j);
}

static sc_ledger *new_ledger(journal *jr, uint64_t seed)
{
    sc_config cfg = {
        .target_chunk_ms = 1000, .min_chunk = 10, .max_chunk = 400, .min_lease_ms = 1000,
        .max_attempts = 3, .seed = seed, .journal = journal_put, .journal_ctx = jr,
        .max_hold_ms = 1000000000000ull, /* the hold limit has its own test */
    };
    return sc_ledger_create(&cfg);
}

static sc_job_spec spec_of(uint64_t id, uint64_t items)
{
    return (sc_job_spec){
        .id = id, .strategy = SC_SINGLE, .items = items, .nout = 1, .layouts = &layout,
        .tiers = SC_TIER_ANY,
    };
}

/* ---- the model ---- */

enum { MAX_CLAIMS = 4096, NODES = 6 };
enum cstate { LIVE, ACCEPTED, GONE };

typedef struct mclaim {
    sc_claim_out c;
    uint64_t node;
    uint64_t lease_len;
    enum cstate state;
    uint64_t session;
} mclaim;

typedef struct model {
    uint64_t items;
    uint8_t *cover;        /* per item: times counted as done */
    sim_stats ref;         /* merged results of accepted ranges */
    uint64_t done;
    mclaim claims[MAX_CLAIMS];
    size_t nclaims;
} model;

typedef struct walk {
    uint8_t *seen;
    uint64_t items;
    int overlap;
} walk;

static void mark(void *ctx, uint32_t variant, uint64_t first, uint64_t count, bool inflight)
{
    walk *w = ctx;
    (void)inflight, (void)variant;
    for (uint64_t i = first; i < first + count; i++) {
        if (i >= w->items || w->seen[i]++)
            w->overlap = 1;
    }
}

static void check_invariants(sc_ledger *l, model *m, journal *jr, uint64_t job)
{
    sc_job_status st;
    cr_assert_eq(sc_job_status_get(l, job, &st), 0);
    walk w = { calloc(m->items, 1), m->items, 0 };
    sc_job_ranges(l, job, mark, &w);
    for (uint64_t i = 0; i < m->items; i++) {
        cr_assert_leq(m->cover[i], 1, "item %llu counted %d times", (unsigned long long)i, m->cover[i]);
        w.seen[i] += m->cover[i];
    }
    for (size_t r = 0; r < jr->n; r++)
        if (jr->recs[r].type == SC_REC_CHUNK_FAILED)
            mark(&w, 0, jr->recs[r].first, jr->recs[r].count, false);
    for (uint64_t i = 0; i < m->items; i++)
        cr_assert_eq(w.seen[i], 1, "item %llu is in %d places", (unsigned long long)i, w.seen[i]);
    cr_assert_not(w.overlap);
    free(w.seen);

    cr_assert_eq(st.done_items, m->done);
    cr_assert_eq(st.done_items + st.failed_items + st.inflight_items + st.pending_items, m->items);
    cr_assert(sim_stats_equal(&st.aggregate[0], &m->ref), "aggregate differs from the reference");
    size_t live = 0;
    for (size_t i = 0; i < m->nclaims; i++)
        live += m->claims[i].state == LIVE;
    cr_assert_eq(st.inflight_claims, live);
    if (st.state != SC_JOB_RUNNING) /* a finished job has no live claims */
        for (size_t i = 0; i < m->nclaims; i++)
            if (m->claims[i].state == LIVE)
                m->claims[i].state = GONE;
}

static uint64_t rnd(uint64_t *s, uint64_t n)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return n ? (mix(*s) % n) : 0;
}

static void run_walk(uint64_t seed, int steps)
{
    static unsigned char buf[4096], other[4096];
    journal jr = { 0 };
    model *m = calloc(1, sizeof *m);
    uint64_t s = seed, now = 1000000;
    uint64_t job = 7;

    m->items = 1 + rnd(&s, 3000);
    m->cover = calloc(m->items, 1);
    sim_stats_init(&m->ref, &layout);
    sc_ledger *l = new_ledger(&jr, seed);
    sc_job_spec spec = spec_of(job, m->items);
    cr_assert_eq(sc_job_add(l, &spec), 0);

    for (int step = 0; step < steps; step++) {
        uint64_t op = rnd(&s, 100);
        mclaim *c = m->nclaims ? &m->claims[rnd(&s, m->nclaims)] : NULL;
        sc_outcome out;
        bool done_flag;

        if (op < 30 && m->nclaims + 4 < MAX_CLAIMS) { /* claim */
            sc_node_info node = { .id = 1 + rnd(&s, NODES), .session = 1 + rnd(&s, 2), .tier = SC_TIER_PUBLIC,
                .items_per_s = (double)(rnd(&s, 3) * 100) };
            sc_claim_out got[4];
            unsigned n = 0;
            cr_assert_eq(sc_claim(l, &node, 1 + (unsigned)rnd(&s, 4), now, got, &n), 0);
            for (unsigned i = 0; i < n; i++)
                m->claims[m->nclaims++] = (mclaim){ got[i], node.id, got[i].lease_until - now, LIVE, node.session };
        } else if (op < 55 && c != NULL) { /* complete: good, duplicate or late */
            size_t len = result_of(c->c.first, c->c.count, buf, sizeof buf);
            cr_assert_eq(sc_complete(l, job, c->c.chunk, c->c.token, c->node, buf, len, now, &out, &done_flag, NULL), 0);
            sc_outcome want = c->state == LIVE ? SC_ACCEPTED : c->state == ACCEPTED ? SC_IDEMPOTENT : SC_STALE;
            cr_assert_eq(out, want, "seed %llu step %d: outcome %d, want %d", (unsigned long long)seed, step, out, want);
            if (out == SC_ACCEPTED) {
                c->state = ACCEPTED;
                sim_stats part;
                stats_of(c->c.first, c->c.count, &part);
                cr_assert_eq(sim_stats_merge(&m->ref, &part), 0);
                for (uint64_t i = c->c.first; i < c->c.first + c->c.count; i++)
                    m->cover[i]++;
                m->done += c->c.count;
            }
        } else if (op < 60 && c != NULL && c->state == ACCEPTED) { /* conflicting result */
            size_t len = result_of(c->c.first + 1 < m->items ? c->c.first + 1 : 0, c->c.count, other, sizeof other);
            cr_assert_eq(sc_complete(l, job, c->c.chunk, c->c.token, c->node, other, len, now, &out, NULL, NULL), 0);
            cr_assert(out == SC_CONFLICT || out == SC_IDEMPOTENT); /* same bytes if the shift changed nothing */
        } else if (op < 65 && c != NULL) { /* another node's token */
            size_t len = result_of(c->c.first, c->c.count, buf, sizeof buf);
            cr_assert_eq(sc_complete(l, job, c->c.chunk, c->c.token, c->node + 100, buf, len, now, &out, NULL, NULL), 0);
            cr_assert(out == SC_STALE || (c->state == ACCEPTED && out == SC_IDEMPOTENT));
        } else if (op < 70 && c != NULL && c->state == LIVE) { /* malformed result */
            size_t len = result_of(c->c.first, c->c.count, buf, sizeof buf);
            int rc = sc_complete(l, job, c->c.chunk, c->c.token, c->node, buf, len - 1, now, &out, NULL, NULL);
            cr_assert_eq(rc, SC_EBADRESULT);
            if (c->c.count > 1) { /* the right bytes for the wrong count */
                len = result_of(c->c.first, c->c.count - 1, buf, sizeof buf);
                cr_assert_eq(sc_complete(l, job, c->c.chunk, c->c.token, c->node, buf, len, now, &out, NULL, NULL), SC_EBADRESULT);
            }
        } else if (op < 75) { /* heartbeat from one node */
            uint64_t node = 1 + rnd(&s, NODES);
            uint8_t (*toks)[16] = malloc((m->nclaims + 1) * 16);
            size_t n = 0, want = 0;
            for (size_t i = 0; i < m->nclaims; i++) {
                if (m->claims[i].node != node || m->claims[i].state != LIVE)
                    continue;
                memcpy(toks[n++], m->claims[i].c.token, 16);
                m->claims[i].c.lease_until = now + m->claims[i].lease_len;
                want++;
            }
            cr_assert_eq(sc_renew(l, node, (const uint8_t (*)[16])toks, n, now), want);
            free(toks);
        } else if (op < 78 && c != NULL) { /* a node gives a claim back: its own, or one it does not hold */
            uint64_t node = rnd(&s, 4) ? c->node : c->node % NODES + 1;
            size_t want = node == c->node && c->state == LIVE;
            cr_assert_eq(sc_give_back(l, node, (const uint8_t (*)[16])&c->c.token, 1, now), want);
            if (want)
                c->state = GONE;
        } else if (op < 93) { /* time passes */
            now += rnd(&s, 1500);
            size_t want = 0;
            for (size_t i = 0; i < m->nclaims; i++)
                if (m->claims[i].state == LIVE && m->claims[i].c.lease_until <= now) {
                    m->claims[i].state = GONE;
                    want++;
                }
            cr_assert_eq(sc_reclaim(l, now), want, "seed %llu step %d", (unsigned long long)seed, step);
        } else if (op < 97) { /* one of a node's two connections ends, or all of the node's */
            uint64_t node = 1 + rnd(&s, NODES), session = rnd(&s, 3);
            size_t want = 0;
            for (size_t i = 0; i < m->nclaims; i++)
                if (m->claims[i].node == node && m->claims[i].state == LIVE &&
                    (session == 0 || m->claims[i].session == session)) {
                    m->claims[i].state = GONE;
                    want++;
                }
            cr_assert_eq(sc_release_node(l, node, session, now), want);
        } else { /* the coordinator restarts from its journal */
            sc_ledger_destroy(l);
            journal old = jr;
            memset(&jr, 0, sizeof jr);
            l = new_ledger(&jr, seed + (uint64_t)step);
            cr_assert_eq(sc_job_restore(l, &spec, old.recs, old.n), 0);
            for (size_t i = 0; i < old.n; i++) /* the new ledger's journal starts with the old one */
                journal_put(&jr, &old.recs[i]);
            journal_free(&old);
            for (size_t i = 0; i < m->nclaims; i++)
                if (m->claims[i].state == LIVE)
                    m->claims[i].state = GONE; /* in flight at the crash: handed out anew */
        }
        check_invariants(l, m, &jr, job);
    }

    /* Finish: a fresh honest node takes and completes everything left. */
    for (int guard = 0; guard < 100000; guard++) {
        sc_job_status st;
        sc_job_status_get(l, job, &st);
        if (st.state != SC_JOB_RUNNING)
            break;
        sc_node_info node = { .id = 99, .tier = SC_TIER_PUBLIC };
        sc_claim_out got[8];
        unsigned n = 0;
        sc_claim(l, &node, 8, now, got, &n);
        if (n == 0) {
            now += 100000; /* only claims of vanished nodes left: let them expire */
            sc_reclaim(l, now);
            continue;
        }
        for (unsigned i = 0; i < n; i++) {
            sc_outcome out;
            size_t len = result_of(got[i].first, got[i].count, buf, sizeof buf);
            cr_assert_eq(sc_complete(l, job, got[i].chunk, got[i].token, 99, buf, len, now, &out, NULL, NULL), 0);
            cr_assert_eq(out, SC_ACCEPTED);
            sim_stats part;
            stats_of(got[i].first, got[i].count, &part);
            sim_stats_merge(&m->ref, &part);
            for (uint64_t k = got[i].first; k < got[i].first + got[i].count; k++)
                m->cover[k]++;
            m->done += got[i].count;
        }
        for (size_t i = 0; i < m->nclaims; i++)
            if (m->claims[i].state == LIVE)
                m->claims[i].state = GONE;
    }
    sc_job_status st;
    sc_job_status_get(l, job, &st);
    cr_assert(st.state == SC_JOB_COMPLETE || st.state == SC_JOB_FAILED, "state %d", st.state);
    cr_assert_eq(st.done_items + st.failed_items, m->items);
    if (st.state == SC_JOB_COMPLETE) {
        sim_stats whole;
        stats_of(0, m->items, &whole);
        cr_assert(sim_stats_equal(&st.aggregate[0], &whole), "complete job differs from a sequential run");
    }
    sc_ledger_destroy(l);
    journal_free(&jr);
    free(m->cover);
    free(m);
}

Test(sched, random_interleavings_count_every_item_once, .timeout = 120)
{
    init_layout();
    for (uint64_t seed = 1; seed <= 300; seed++)
        run_walk(seed, 300);
}

/* ---- targeted cases ---- */

static sc_ledger *simple(journal *jr)
{
    init_layout();
    return new_ledger(jr, 1);
}

Test(sched, chunk_size_follows_node_speed)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec spec = spec_of(1, 1000000);
    sc_job_add(l, &spec);
    sc_claim_out c;
    unsigned n;
    sc_node_info slow = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 20 };
    sc_node_info fast = { .id = 2, .tier = SC_TIER_OWN, .items_per_s = 300 };
    sc_node_info gpu = { .id = 3, .tier = SC_TIER_OWN, .items_per_s = 1e9 };
    sc_node_info unknown = { .id = 4, .tier = SC_TIER_OWN };
    sc_claim(l, &slow, 1, 0, &c, &n);
    cr_assert_eq(c.count, 20); /* 1 s at 20 items/s */
    sc_claim(l, &fast, 1, 0, &c, &n);
    cr_assert_eq(c.count, 300);
    sc_claim(l, &gpu, 1, 0, &c, &n);
    cr_assert_eq(c.count, 400); /* max_chunk */
    sc_claim(l, &unknown, 1, 0, &c, &n);
    cr_assert_eq(c.count, 10); /* min_chunk: a probe */
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, priority_then_fair_share_between_owners)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec a = spec_of(1, 100000), b = spec_of(2, 100000), c = spec_of(3, 100000), hi = spec_of(4, 20);
    a.owner = 10;
    b.owner = 10;
    c.owner = 20;
    hi.priority = 5;
    sc_job_add(l, &a);
    sc_job_add(l, &b);
    sc_job_add(l, &c);
    sc_job_add(l, &hi);
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 10 };
    sc_claim_out got[12];
    unsigned n;
    sc_claim(l, &node, 12, 0, got, &n);
    cr_assert_eq(n, 12);
    cr_assert_eq(got[0].job, 4, "the high-priority job goes first");
    cr_assert_eq(got[1].job, 4);
    int per_owner[2] = { 0, 0 };
    for (int i = 2; i < 12; i++)
        per_owner[got[i].job == 3]++;
    cr_assert_eq(per_owner[0], 5, "owner 10 (two jobs) got %d of 10", per_owner[0]);
    cr_assert_eq(per_owner[1], 5, "owner 20 (one job) got %d of 10", per_owner[1]);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, eligibility_tier_backend_memory)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 1000);
    s.tiers = SC_TIER_OWN | SC_TIER_TEAM;
    s.backends = 4;
    s.mem_bytes = 1 << 20;
    sc_job_add(l, &s);
    sc_claim_out c;
    unsigned n;
    sc_node_info pub = { .id = 1, .tier = SC_TIER_PUBLIC, .backends = 4, .mem_bytes = 1 << 30 };
    sc_node_info nogpu = { .id = 2, .tier = SC_TIER_TEAM, .backends = 1, .mem_bytes = 1 << 30 };
    sc_node_info small = { .id = 3, .tier = SC_TIER_TEAM, .backends = 4, .mem_bytes = 1 << 10 };
    sc_node_info ok = { .id = 4, .tier = SC_TIER_TEAM, .backends = 5, .mem_bytes = 1 << 30 };
    sc_claim(l, &pub, 1, 0, &c, &n);
    cr_assert_eq(n, 0, "public node got a team-only job");
    sc_claim(l, &nogpu, 1, 0, &c, &n);
    cr_assert_eq(n, 0, "node without the backend got the job");
    sc_claim(l, &small, 1, 0, &c, &n);
    cr_assert_eq(n, 0, "node without the memory got the job");
    sc_claim(l, &ok, 1, 0, &c, &n);
    cr_assert_eq(n, 1);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, lost_claims_fail_the_chunk_then_the_job)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 10);
    sc_job_add(l, &s);
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN };
    sc_claim_out c;
    unsigned n;
    uint64_t now = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        node.id = 1 + (uint64_t)attempt; /* an attempt per node: a node is not handed a range it lost */
        sc_claim(l, &node, 1, now, &c, &n);
        cr_assert_eq(n, 1);
        cr_assert_eq(c.attempt, (uint32_t)attempt);
        cr_assert_eq(c.first, 0);
        cr_assert_eq(c.count, 10, "a retried chunk keeps its exact range");
        now = c.lease_until;
        cr_assert_eq(sc_reclaim(l, now), 1);
    }
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_FAILED);
    cr_assert_eq(st.failed_items, 10);
    cr_assert_eq(jr.recs[jr.n - 2].type, SC_REC_CHUNK_FAILED);
    cr_assert_eq(jr.recs[jr.n - 1].type, SC_REC_JOB_END);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, a_session_that_ends_releases_only_its_own_claims)
{
    /* A node on a half-open connection comes back on a new one before
     * the old one is closed: the old session's end must not take the
     * claims of the new one. */
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 1000);
    sc_job_add(l, &s);
    sc_claim_out old[2], fresh[3];
    unsigned n_old, n_fresh;
    sc_node_info before = { .id = 5, .session = 11, .tier = SC_TIER_OWN };
    sc_node_info after = { .id = 5, .session = 12, .tier = SC_TIER_OWN };
    sc_claim(l, &before, 2, 0, old, &n_old);
    sc_claim(l, &after, 3, 0, fresh, &n_fresh);
    cr_assert_eq(n_old, 2);
    cr_assert_eq(n_fresh, 3);
    cr_assert_eq(sc_release_node(l, 5, 11, 0), 2, "the old session's two claims go back");
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.inflight_claims, 3, "the new session's claims stay");
    for (unsigned i = 0; i < n_fresh; i++) {
        static unsigned char buf[4096];
        size_t len = result_of(fresh[i].first, fresh[i].count, buf, sizeof buf);
        sc_outcome out;
        cr_assert_eq(sc_complete(l, 1, fresh[i].chunk, fresh[i].token, 5, buf, len, 0, &out, NULL, NULL), 0);
        cr_assert_eq(out, SC_ACCEPTED, "the new session's chunk %u", i);
    }
    cr_assert_eq(sc_release_node(l, 5, 0, 0), 0, "nothing is left to release");
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, a_claim_its_node_gives_back_goes_out_again_at_once_as_an_attempt)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 10);
    sc_job_add(l, &s);
    sc_claim_out c;
    unsigned n;
    sc_node_info node = { .id = 7, .tier = SC_TIER_OWN, .items_per_s = 1000 };
    sc_node_info other = { .id = 8, .tier = SC_TIER_OWN, .items_per_s = 1000 };
    sc_claim(l, &node, 1, 0, &c, &n);
    cr_assert_eq(n, 1);
    uint8_t unknown[1][16] = { { 1, 2, 3 } };
    cr_assert_eq(sc_give_back(l, 7, (const uint8_t (*)[16])unknown, 1, 0), 0, "no claim has that token");
    cr_assert_eq(sc_give_back(l, 8, (const uint8_t (*)[16])&c.token, 1, 0), 0, "not node 8's to give back");
    cr_assert_eq(sc_give_back(l, 7, (const uint8_t (*)[16])&c.token, 1, 0), 1);
    cr_assert_eq(sc_give_back(l, 7, (const uint8_t (*)[16])&c.token, 1, 0), 0, "given back once");
    /* handed out again at once, long before its lease would run out */
    sc_claim(l, &other, 1, 1, &c, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(c.attempt, 1, "a give-back is an attempt");
    cr_assert_eq(c.first, 0);
    cr_assert_eq(c.count, 10, "the exact range");
    cr_assert_eq(sc_give_back(l, 7, (const uint8_t (*)[16])&c.token, 1, 1), 0, "node 8's now");
    cr_assert_eq(sc_give_back(l, 8, (const uint8_t (*)[16])&c.token, 1, 1), 1);
    sc_claim(l, &node, 1, 2, &c, &n);
    cr_assert_eq(n, 0, "a node is not handed a range it gave back");
    sc_node_info third = { .id = 9, .tier = SC_TIER_OWN, .items_per_s = 1000 };
    sc_claim(l, &third, 1, 2, &c, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(c.attempt, 2);
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_RUNNING);
    cr_assert_eq(sc_give_back(l, 9, (const uint8_t (*)[16])&c.token, 1, 2), 1);
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_FAILED, "given back max_attempts times: it fails");
    cr_assert_eq(st.failed_items, 10);
    sc_ledger_stats ls;
    sc_ledger_stats_get(l, &ls);
    cr_assert_eq(ls.given_back, 3);
    cr_assert_eq(ls.expired, 0);
    cr_assert_eq(ls.live_claims, 0);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, nodes_going_away_fail_a_chunk_only_at_max_releases)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 10);
    sc_job_add(l, &s);
    sc_claim_out c;
    unsigned n;
    /* Nodes that never completed anything take it and vanish: no attempt. */
    for (uint64_t id = 100; id < 120; id++) {
        sc_node_info node = { .id = id, .tier = SC_TIER_OWN };
        sc_claim(l, &node, 1, 0, &c, &n);
        cr_assert_eq(n, 1);
        cr_assert_eq(c.attempt, 0, "an unproven node's release is not an attempt");
        cr_assert_eq(sc_release_node(l, id, 0, 0), 1);
    }
    /* Nine working nodes (a measured speed) take the chunk and vanish: it is
     * handed out again each time. */
    for (uint64_t id = 1; id <= 9; id++) {
        sc_node_info node = { .id = id, .tier = SC_TIER_OWN, .items_per_s = 1000 };
        sc_claim(l, &node, 1, 0, &c, &n);
        cr_assert_eq(n, 1, "claim %llu", (unsigned long long)id);
        cr_assert_eq(c.attempt, (uint32_t)(id - 1));
        cr_assert_eq(sc_release_node(l, id, 0, 0), 1);
    }
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_RUNNING, "nine releases, past max_attempts, do not fail it");
    /* The tenth fails it: a chunk that kills every node still ends. */
    sc_node_info last = { .id = 10, .tier = SC_TIER_OWN, .items_per_s = 1000 };
    sc_claim(l, &last, 1, 0, &c, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(sc_release_node(l, 10, 0, 0), 1);
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_FAILED);
    cr_assert_eq(st.failed_items, 10);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, a_job_near_its_end_is_shared_out_in_smaller_chunks)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 1000);
    sc_job_add(l, &s);
    /* Fast enough for max_chunk (400) by speed; factoring gives half the
     * remainder shared among the claims: 1000 / (2 x 2), then 750 / (2 x 2). */
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 1e6 };
    sc_claim_out c[2];
    unsigned n;
    cr_assert_eq(sc_claim(l, &node, 2, 0, c, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(c[0].count, 250);
    cr_assert_eq(c[1].count, 187);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, cancel_makes_claims_stale)
{
    journal jr = { 0 };
    unsigned char buf[2048];
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 100);
    sc_job_add(l, &s);
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN };
    sc_claim_out c;
    unsigned n;
    sc_claim(l, &node, 1, 0, &c, &n);
    cr_assert_eq(sc_job_cancel(l, 1, 0), 0);
    sc_outcome out;
    size_t len = result_of(c.first, c.count, buf, sizeof buf);
    sc_complete(l, 1, c.chunk, c.token, 1, buf, len, 0, &out, NULL, NULL);
    cr_assert_eq(out, SC_STALE);
    sc_claim(l, &node, 1, 0, &c, &n);
    cr_assert_eq(n, 0, "a cancelled job hands out nothing");
    sc_ledger_destroy(l);
    journal_free(&jr);
}

/* Claims and completes job 1 on l, one chunk at a time, until it ends;
 * returns the chunks it took (at most max). */
static int finish_job(sc_ledger *l, int max)
{
    static unsigned char buf[2048];
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 400 };
    bool done = false;
    int chunks = 0;
    while (!done && chunks < max) {
        sc_claim_out c;
        unsigned n;
        sc_outcome out;
        sc_claim(l, &node, 1, 0, &c, &n);
        cr_assert_eq(n, 1);
        size_t len = result_of(c.first, c.count, buf, sizeof buf);
        cr_assert_eq(sc_complete(l, 1, c.chunk, c.token, 1, buf, len, 0, &out, &done, NULL), 0);
        cr_assert_eq(out, SC_ACCEPTED);
        chunks++;
    }
    cr_assert(done);
    return chunks;
}

Test(sched, precision_target_ends_the_job_early)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 10000000);
    s.precision = 1.0; /* values spread over [0, 100): sd ~29, so ~3,300 items */
    sc_job_add(l, &s);
    finish_job(l, 1000);
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_COMPLETE);
    cr_assert_lt(st.done_items, 10000000);
    cr_assert_leq(1.96 * sim_stats_stderr(&st.aggregate[0]), 1.0);
    cr_assert_gt(1.96 * sim_stats_stderr(&st.aggregate[0]), 0.9, "stopped later than needed");
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, deadline_expires_the_job)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 1000);
    s.deadline_ms = 5000;
    sc_job_add(l, &s);
    sc_reclaim(l, 4999);
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_RUNNING);
    sc_reclaim(l, 5000);
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_EXPIRED);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, bad_specs_and_journals_are_refused)
{
    journal jr = { 0 };
    unsigned char buf[2048];
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 0);
    cr_assert_eq(sc_job_add(l, &s), SC_EINVAL, "zero items");
    s = spec_of(1, 100);
    s.nout = 0;
    cr_assert_eq(sc_job_add(l, &s), SC_EINVAL, "no outputs");
    s = spec_of(1, 100);
    cr_assert_eq(sc_job_add(l, &s), 0);
    cr_assert_eq(sc_job_add(l, &s), SC_EEXISTS);

    size_t len = result_of(0, 60, buf, sizeof buf);
    sc_record first = { .type = SC_REC_ACCEPT, .job = 2, .chunk = 1, .first = 0, .count = 60, .result = buf,
        .result_len = len };
    sc_job_spec s2 = spec_of(2, 200);
    sc_record outside = { .type = SC_REC_CHUNK_FAILED, .job = 2, .first = 190, .count = 20 };
    cr_assert_eq(sc_job_restore(l, &s2, &outside, 1), SC_EBADRECORD);
    sc_record garbage = { .type = SC_REC_ACCEPT, .job = 2, .chunk = 1, .first = 0, .count = 60, .result = "xx", .result_len = 2 };
    cr_assert_eq(sc_job_restore(l, &s2, &garbage, 1), SC_EBADRECORD);
    sc_record huge = { .type = SC_REC_ACCEPT, .job = 2, .chunk = 1ull << 40, .first = 0, .count = 60, .result = buf, .result_len = len };
    cr_assert_eq(sc_job_restore(l, &s2, &huge, 1), SC_EBADRECORD, "a corrupt chunk id");
    cr_assert_eq(sc_job_restore(l, &s2, &garbage, 1), SC_EBADRECORD);
    sc_job_status st;
    cr_assert_eq(sc_job_status_get(l, 2, &st), SC_ENOJOB, "a refused restore leaves no job behind");
    cr_assert_eq(sc_job_restore(l, &s2, &first, 1), 0);
    sc_job_status_get(l, 2, &st);
    cr_assert_eq(st.done_items, 60);
    cr_assert_eq(st.pending_items, 140);

    /* A batch the store sent again, unsure whether it was committed: its
     * records twice. Exact copies count once. */
    unsigned char buf2[2048];
    size_t len2 = result_of(100, 50, buf2, sizeof buf2);
    sc_record twice[5] = {
        { .type = SC_REC_ACCEPT, .job = 3, .chunk = 1, .first = 0, .count = 60, .result = buf, .result_len = len },
        { .type = SC_REC_CHUNK_FAILED, .job = 3, .first = 60, .count = 40 },
        { .type = SC_REC_ACCEPT, .job = 3, .chunk = 2, .first = 100, .count = 50, .result = buf2, .result_len = len2 },
        { .type = SC_REC_CHUNK_FAILED, .job = 3, .first = 60, .count = 40 },
        { .type = SC_REC_ACCEPT, .job = 3, .chunk = 2, .first = 100, .count = 50, .result = buf2, .result_len = len2 },
    };
    sc_job_spec s3 = spec_of(3, 200);
    cr_assert_eq(sc_job_restore(l, &s3, twice, 5), 0);
    sc_job_status_get(l, 3, &st);
    cr_assert_eq(st.done_items, 110);
    cr_assert_eq(st.failed_items, 40);
    cr_assert_eq(st.chunks_failed, 1);
    cr_assert_eq(st.pending_items, 50);
    cr_assert_eq(st.records_skipped, 0, "copies are not counted");
    cr_assert_str_eq(sf_strerror(SC_EBADRESULT), "the result does not decode or does not match its chunk");
    sc_ledger_destroy(l);
    journal_free(&jr);
}

/* A journal whose job-end record says complete but which lost one write of
 * accepts (the database failed it) does not end the job with part of its
 * result: the missing range is handed out again. A whole journal restores
 * the job complete, journaling nothing. */
Test(sched, a_complete_end_over_a_gap_hands_the_gap_out)
{
    journal jr = { 0 }, again = { 0 }, whole = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 1000);
    cr_assert_eq(sc_job_add(l, &s), 0);
    finish_job(l, 100);
    cr_assert_eq(jr.recs[jr.n - 1].type, SC_REC_JOB_END);
    cr_assert_eq(jr.recs[jr.n - 1].state, SC_JOB_COMPLETE);
    cr_assert_gt(jr.n, 3, "at least two chunks");
    sim_stats want;
    stats_of(0, 1000, &want);
    sc_job_status st;

    size_t k = 0; /* the first accept's write was lost */
    while (jr.recs[k].type != SC_REC_ACCEPT)
        k++;
    uint64_t lost = jr.recs[k].count;
    sc_record *gap = malloc(jr.n * sizeof *gap);
    size_t n = 0;
    for (size_t i = 0; i < jr.n; i++)
        if (i != k)
            gap[n++] = jr.recs[i];
    sc_ledger *r = new_ledger(&again, 3);
    cr_assert_eq(sc_job_restore(r, &s, gap, n), 0);
    sc_job_status_get(r, 1, &st);
    cr_assert_eq(st.state, SC_JOB_RUNNING, "the job ended with %" PRIu64 " of 1000 items", st.done_items);
    cr_assert_eq(st.pending_items, lost);
    cr_assert_eq(again.n, 0, "nothing journaled while the job runs");
    finish_job(r, 100);
    sc_job_status_get(r, 1, &st);
    cr_assert_eq(st.state, SC_JOB_COMPLETE);
    cr_assert(sim_stats_equal(&st.aggregate[0], &want), "the whole job's result");
    cr_assert_eq(again.recs[again.n - 1].type, SC_REC_JOB_END);
    free(gap);
    sc_ledger_destroy(r);

    sc_ledger *w = new_ledger(&whole, 2);
    cr_assert_eq(sc_job_restore(w, &s, jr.recs, jr.n), 0);
    sc_job_status_get(w, 1, &st);
    cr_assert_eq(st.state, SC_JOB_COMPLETE);
    cr_assert(sim_stats_equal(&st.aggregate[0], &want));
    cr_assert_eq(whole.n, 0, "a restore journals nothing");
    sc_ledger_destroy(w);
    sc_ledger_destroy(l);
    journal_free(&jr);
    journal_free(&again);
    journal_free(&whole);
}

/* ---- the window of accepted chunks ---- */

/* Completes n one-chunk claims of job 1 (10 items each) in turn; keeps each
 * chunk's claim in cs. */
static void accept_stream(sc_ledger *l, sc_claim_out *cs, size_t n)
{
    static unsigned char buf[2048];
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN };
    for (size_t i = 0; i < n; i++) {
        unsigned got;
        sc_outcome out;
        cr_assert_eq(sc_claim(l, &node, 1, 0, &cs[i], &got), 0);
        cr_assert_eq(got, 1);
        size_t len = result_of(cs[i].first, cs[i].count, buf, sizeof buf);
        cr_assert_eq(sc_complete(l, 1, cs[i].chunk, cs[i].token, 1, buf, len, 0, &out, NULL, NULL), 0);
        cr_assert_eq(out, SC_ACCEPTED);
    }
}

static sc_outcome resend(sc_ledger *l, const sc_claim_out *c, bool same)
{
    unsigned char buf[2048];
    size_t len = result_of(c->first + (same ? 0 : 1), c->count, buf, sizeof buf);
    sc_outcome out;
    cr_assert_eq(sc_complete(l, 1, c->chunk, c->token, 1, buf, len, 0, &out, NULL, NULL), 0);
    return out;
}

Test(sched, resends_inside_the_window_are_answered_older_ones_stale)
{
    enum { WINDOW = 100, CHUNKS = 1000 };
    init_layout();
    journal jr = { 0 };
    sc_config cfg = { .min_chunk = 10, .max_chunk = 10, .accepted_window = WINDOW, .seed = 3,
        .journal = journal_put, .journal_ctx = &jr };
    sc_ledger *l = sc_ledger_create(&cfg);
    sc_job_spec spec = spec_of(1, 1000000);
    cr_assert_eq(sc_job_add(l, &spec), 0);
    sc_claim_out *cs = calloc(CHUNKS, sizeof *cs);
    accept_stream(l, cs, CHUNKS);
    for (size_t i = 0; i < CHUNKS; i++) {
        bool inside = i >= CHUNKS - WINDOW;
        cr_assert_eq(resend(l, &cs[i], true), inside ? SC_IDEMPOTENT : SC_STALE, "chunk %zu", i);
        cr_assert_eq(resend(l, &cs[i], false), inside ? SC_CONFLICT : SC_STALE, "chunk %zu", i);
    }
    sc_ledger_stats st;
    sc_ledger_stats_get(l, &st);
    cr_assert_leq(st.accepted_bytes, WINDOW * 32);
    sc_job_status js;
    sc_job_status_get(l, 1, &js);
    cr_assert_eq(js.done_items, CHUNKS * 10, "stale answers count nothing twice");

    /* A straggler: a chunk handed out before the window's chunks, accepted
     * after them, counts; its resend is stale once newer ids fill its slot. */
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN };
    sc_claim_out old, newer[WINDOW];
    unsigned got;
    sc_claim(l, &node, 1, 0, &old, &got);
    accept_stream(l, newer, WINDOW);
    unsigned char buf[2048];
    size_t len = result_of(old.first, old.count, buf, sizeof buf);
    sc_outcome out;
    sc_complete(l, 1, old.chunk, old.token, 1, buf, len, 0, &out, NULL, NULL);
    cr_assert_eq(out, SC_ACCEPTED);
    cr_assert_eq(resend(l, &old, true), SC_STALE);
    cr_assert_eq(resend(l, &newer[WINDOW - 1], true), SC_IDEMPOTENT, "the newer chunk keeps its slot");
    cr_assert_eq(resend(l, &newer[0], true), SC_IDEMPOTENT);

    /* A restore from the journal, in any order, keeps the same window. */
    sc_ledger *r = sc_ledger_create(&cfg);
    for (size_t i = 0; i < jr.n / 2; i++) {
        sc_record t = jr.recs[i];
        jr.recs[i] = jr.recs[jr.n - 1 - i];
        jr.recs[jr.n - 1 - i] = t;
    }
    cr_assert_eq(sc_job_restore(r, &spec, jr.recs, jr.n), 0);
    cr_assert_eq(resend(r, &newer[0], true), SC_IDEMPOTENT);
    cr_assert_eq(resend(r, &newer[WINDOW - 1], false), SC_CONFLICT);
    cr_assert_eq(resend(r, &old, true), SC_STALE);
    cr_assert_eq(resend(r, &cs[CHUNKS - 1], true), SC_STALE);
    sc_ledger_stats_get(r, &st);
    cr_assert_leq(st.accepted_bytes, WINDOW * 32);
    sc_ledger_destroy(r);
    free(cs);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, a_long_stream_keeps_the_default_window_only, .timeout = 60)
{
    enum { CHUNKS = 200000 };
    init_layout();
    sc_config cfg = { .min_chunk = 10, .max_chunk = 10, .seed = 4 };
    sc_ledger *l = sc_ledger_create(&cfg);
    sc_job_spec spec = spec_of(1, 1ull << 40);
    cr_assert_eq(sc_job_add(l, &spec), 0);
    sc_claim_out *cs = calloc(CHUNKS, sizeof *cs);
    sc_ledger_stats st;
    for (size_t done = 0; done < CHUNKS; done += CHUNKS / 4) {
        accept_stream(l, cs + done, CHUNKS / 4);
        sc_ledger_stats_get(l, &st);
        cr_assert_leq(st.accepted_bytes, 65536 * 32, "after %zu chunks", done + CHUNKS / 4);
    }
    cr_assert_eq(st.accepted_bytes, 65536 * 32, "the default window is 65,536 chunks");
    cr_assert_eq(resend(l, &cs[CHUNKS - 65536], true), SC_IDEMPOTENT);
    cr_assert_eq(resend(l, &cs[CHUNKS - 65537], true), SC_STALE);
    free(cs);
    sc_ledger_destroy(l);
}

/* ---- tournament ---- */

enum { CANDIDATES = 6 };

/* Candidate c: the shared noise (common random numbers) plus 0.5 c, so
 * the last candidate is truly best by 0.5. */
static size_t tour_result(uint32_t c, uint64_t first, uint64_t count, unsigned char *buf, size_t cap)
{
    sim_stats s;
    size_t len = 0;
    sim_stats_init(&s, &layout);
    for (uint64_t i = first; i < first + count; i++)
        sim_stats_add(&s, value_of(i) + 0.5 * c);
    cr_assert_eq(sc_result_encode(&s, 1, buf, cap, &len), 0);
    return len;
}

/* Runs a node until the job ends or `max_chunks` chunks are done. */
static void tour_drive(sc_ledger *l, uint64_t job, int max_chunks)
{
    static unsigned char buf[4096];
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 400 };
    for (int k = 0; k < max_chunks; k++) {
        sc_job_status st;
        sc_job_status_get(l, job, &st);
        if (st.state != SC_JOB_RUNNING)
            return;
        sc_claim_out c;
        unsigned n;
        sc_outcome out;
        sc_claim(l, &node, 1, 0, &c, &n);
        cr_assert_eq(n, 1);
        size_t len = tour_result(c.variant, c.first, c.count, buf, sizeof buf);
        cr_assert_eq(sc_complete(l, job, c.chunk, c.token, 1, buf, len, 0, &out, NULL, NULL), 0);
        cr_assert_eq(out, SC_ACCEPTED);
    }
}

static sc_job_spec tour_spec(uint32_t keep)
{
    sc_job_spec s = spec_of(5, 200000);
    s.strategy = SC_TOURNAMENT;
    s.variants = CANDIDATES;
    s.phase_items = 1000;
    s.keep = keep;
    return s;
}

Test(sched, tournament_the_true_best_wins)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = tour_spec(0);
    cr_assert_eq(sc_job_add(l, &s), 0);
    tour_drive(l, 5, 100000);
    sc_job_status st;
    sc_job_status_get(l, 5, &st);
    cr_assert_eq(st.state, SC_JOB_COMPLETE);
    cr_assert_eq(st.alive, 1);
    cr_assert_geq(st.phase, 2, "one phase cannot tell means 0.5 apart with noise of sd 29");
    uint32_t last_drop = 0;
    for (uint32_t c = 0; c < CANDIDATES; c++) {
        sc_variant_status vs;
        cr_assert_eq(sc_variant_status_get(l, 5, c, &vs), 0);
        cr_assert_eq(vs.rank, CANDIDATES - c, "candidate %u ranked %u", c, vs.rank);
        if (c < CANDIDATES - 1) {
            cr_assert_not(vs.alive);
            cr_assert_geq(vs.dropped_after, last_drop, "a worse candidate outlasted a better one");
            last_drop = vs.dropped_after;
        } else {
            cr_assert(vs.alive, "the best candidate was dropped");
        }
    }
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, tournament_keep_cuts_by_rank)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = tour_spec(2);
    sc_job_add(l, &s);
    /* Phase 0 is CANDIDATES x 1000 items: 2.5 chunks of 400 per candidate. */
    tour_drive(l, 5, 3 * CANDIDATES);
    sc_job_status st;
    sc_job_status_get(l, 5, &st);
    cr_assert_eq(st.phase, 1);
    cr_assert_eq(st.alive, 2, "keep = 2, but %u survived", st.alive);
    sc_variant_status best;
    sc_variant_status_get(l, 5, CANDIDATES - 1, &best);
    cr_assert(best.alive);
    cr_assert_eq(jr.recs[jr.n - 1].type, SC_REC_PHASE);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, tournament_restores_to_the_same_phase_and_result)
{
    journal jr = { 0 }, jr2 = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = tour_spec(0);
    sc_job_add(l, &s);
    tour_drive(l, 5, 40); /* into phase 1 */
    sc_ledger *r = new_ledger(&jr2, 9);
    cr_assert_eq(sc_job_restore(r, &s, jr.recs, jr.n), 0);
    sc_job_status a, b;
    sc_job_status_get(l, 5, &a);
    sc_job_status_get(r, 5, &b);
    cr_assert_eq(a.phase, b.phase);
    cr_assert_eq(a.alive, b.alive);
    cr_assert_eq(a.done_items, b.done_items);
    cr_assert_eq(b.inflight_items, 0);
    cr_assert_eq(a.pending_items + a.inflight_items, b.pending_items, "in-flight work is pending again");
    for (uint32_t c = 0; c < CANDIDATES; c++) {
        sc_variant_status x, y;
        sc_variant_status_get(l, 5, c, &x);
        sc_variant_status_get(r, 5, c, &y);
        cr_assert_eq(x.alive, y.alive);
        cr_assert_eq(x.dropped_after, y.dropped_after);
        cr_assert_eq(x.done_items, y.done_items);
        cr_assert(x.mean == y.mean || (x.mean != x.mean && y.mean != y.mean));
    }
    cr_assert_eq(jr2.n, 0, "a restore journals nothing again");
    tour_drive(r, 5, 100000);
    sc_job_status_get(r, 5, &b);
    cr_assert_eq(b.state, SC_JOB_COMPLETE);
    sc_variant_status w;
    sc_variant_status_get(r, 5, CANDIDATES - 1, &w);
    cr_assert(w.alive);
    cr_assert_eq(w.rank, 1);
    sc_ledger_destroy(l);
    sc_ledger_destroy(r);
    journal_free(&jr);
    journal_free(&jr2);
}

/* Compares two tournaments' candidates: alive, when dropped, items done,
 * and output 0's aggregate to the bit. */
static void tour_same(sc_ledger *a, sc_ledger *b, uint64_t job)
{
    sc_job_status x, y;
    sc_job_status_get(a, job, &x);
    sc_job_status_get(b, job, &y);
    cr_assert_eq(x.state, y.state);
    cr_assert_eq(x.phase, y.phase);
    cr_assert_eq(x.alive, y.alive);
    cr_assert_eq(x.done_items, y.done_items);
    cr_assert(sim_stats_equal(&x.aggregate[0], &y.aggregate[0]), "the leaders' results differ");
    for (uint32_t c = 0; c < x.variants; c++) {
        sc_variant_status u, v;
        sc_variant_status_get(a, job, c, &u);
        sc_variant_status_get(b, job, c, &v);
        cr_assert_eq(u.alive, v.alive, "candidate %u", c);
        cr_assert_eq(u.dropped_after, v.dropped_after, "candidate %u", c);
        cr_assert_eq(u.rank, v.rank, "candidate %u", c);
        cr_assert_eq(u.done_items, v.done_items, "candidate %u", c);
        cr_assert(memcmp(&u.mean, &v.mean, sizeof u.mean) == 0, "candidate %u: mean %a, %a", c, u.mean, v.mean);
    }
}

static uint64_t accepted_items(const journal *jr)
{
    uint64_t n = 0;
    for (size_t i = 0; i < jr->n; i++)
        if (jr->recs[i].type == SC_REC_ACCEPT)
            n += jr->recs[i].count;
    return n;
}

/* A tournament's journal that lost a write of phase 0's accepts (the
 * database failed it, or the coordinator died before it committed) while
 * phase 1's rows were committed: the job is not failed. Phase 0's gap is
 * handed out again, phase 1's accepts are kept (nothing is computed
 * twice), and the job ends with the phases, survivors and result of the
 * run that lost nothing. Each of phase 0's accepts in turn is the one lost. */
Test(sched, tournament_with_a_gap_in_an_earlier_phase_keeps_the_later_phases)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = tour_spec(0);
    sc_job_add(l, &s);
    tour_drive(l, 5, 40); /* into phase 1 */
    sc_job_status st;
    sc_job_status_get(l, 5, &st);
    cr_assert_eq(st.phase, 1);
    journal mid = { 0 }; /* the journal at the crash */
    uint64_t later = 0;
    for (size_t i = 0; i < jr.n; i++) {
        journal_put(&mid, &jr.recs[i]);
        if (jr.recs[i].type == SC_REC_ACCEPT && jr.recs[i].first >= s.phase_items)
            later += jr.recs[i].count;
    }
    cr_assert_gt(later, 0, "phase 1 has accepts in the journal");
    tour_drive(l, 5, 100000); /* the run that lost nothing */

    int tried = 0;
    for (size_t k = 0; k < mid.n; k++) {
        if (mid.recs[k].type != SC_REC_ACCEPT || mid.recs[k].first >= s.phase_items)
            continue;
        journal kept = { 0 }, jr2 = { 0 };
        for (size_t i = 0; i < mid.n; i++)
            if (i != k)
                journal_put(&kept, &mid.recs[i]);
        sc_ledger *r = new_ledger(&jr2, 9);
        int rc = sc_job_restore(r, &s, kept.recs, kept.n);
        cr_assert_eq(rc, 0, "record %zu lost: restore %d (%s)", k, rc, sf_strerror(rc));
        sc_job_status_get(r, 5, &st);
        cr_assert_eq(st.state, SC_JOB_RUNNING);
        cr_assert_eq(st.phase, 0, "phase 0 is not over: its gap is pending");
        cr_assert_eq(st.pending_items, mid.recs[k].count, "only the gap is pending");
        cr_assert_eq(jr2.n, 0, "a restore journals nothing");
        tour_drive(r, 5, 100000);
        sc_job_status_get(r, 5, &st);
        cr_assert_eq(st.state, SC_JOB_COMPLETE);
        tour_same(l, r, 5);
        cr_assert_eq(accepted_items(&kept) + accepted_items(&jr2), st.done_items,
            "phase 1's accepts from the journal count, none is computed again");
        sc_ledger_destroy(r);
        journal_free(&kept);
        journal_free(&jr2);
        tried++;
    }
    cr_assert_geq(tried, CANDIDATES * 2, "%d of phase 0's accepts", tried);
    sc_ledger_destroy(l);
    journal_free(&jr);
    journal_free(&mid);
}

/* Records that overlap (a row the journal's unique index could not refuse,
 * its first item another; or another result for an accepted range) do not
 * fail the job: the first by first item, then in the journal's order, is
 * kept, the others are skipped and counted, and what only they covered is
 * handed out again. The job ends with a sequential run's result. */
Test(sched, overlapping_records_are_skipped_and_counted)
{
    static unsigned char a[2048], b[2048], c[2048], d[2048];
    journal jr = { 0 }, again = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = spec_of(1, 300);
    size_t la = result_of(0, 60, a, sizeof a), lb = result_of(50, 60, b, sizeof b);
    size_t lc = result_of(100, 50, c, sizeof c), ld = result_of(101, 50, d, sizeof d);
    sc_record recs[] = {
        { .type = SC_REC_ACCEPT, .job = 1, .chunk = 2, .first = 50, .count = 60, .result = b, .result_len = lb },
        { .type = SC_REC_ACCEPT, .job = 1, .chunk = 3, .first = 100, .count = 50, .result = c, .result_len = lc },
        { .type = SC_REC_ACCEPT, .job = 1, .chunk = 1, .first = 0, .count = 60, .result = a, .result_len = la },
        { .type = SC_REC_ACCEPT, .job = 1, .chunk = 4, .first = 100, .count = 50, .result = d, .result_len = ld },
        { .type = SC_REC_ACCEPT, .job = 1, .chunk = 3, .first = 100, .count = 50, .result = c, .result_len = lc },
        { .type = SC_REC_CHUNK_FAILED, .job = 1, .first = 120, .count = 10 },
    };
    int rc = sc_job_restore(l, &s, recs, sizeof recs / sizeof *recs);
    cr_assert_eq(rc, 0, "restore: %d (%s)", rc, sf_strerror(rc));
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_RUNNING);
    cr_assert_eq(st.records_skipped, 3, "[50, 110), the other result for [100, 150) and the failure inside it");
    cr_assert_eq(st.done_items, 110, "[0, 60) and [100, 150)");
    cr_assert_eq(st.failed_items, 0);
    cr_assert_eq(st.pending_items, 190, "[60, 100) and [150, 300)");
    sim_stats want, part;
    stats_of(0, 60, &want);
    stats_of(100, 50, &part);
    sim_stats_merge(&want, &part);
    cr_assert(sim_stats_equal(&st.aggregate[0], &want), "the kept records' result");
    sc_outcome out;
    cr_assert_eq(sc_complete(l, 1, 3, recs[1].token, 1, c, lc, 0, &out, NULL, NULL), 0);
    cr_assert_eq(out, SC_IDEMPOTENT, "a kept record's chunk answers as accepted");
    cr_assert_eq(sc_complete(l, 1, 4, recs[3].token, 1, d, ld, 0, &out, NULL, NULL), 0);
    cr_assert_neq(out, SC_IDEMPOTENT, "a skipped record's chunk does not");

    finish_job(l, 100);
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_COMPLETE);
    stats_of(0, 300, &want);
    cr_assert(sim_stats_equal(&st.aggregate[0], &want), "the whole job's result");
    sc_ledger_destroy(l);

    /* The same in a tournament's phase held back by a gap before it. */
    sc_ledger *t = simple(&jr);
    sc_job_spec ts = tour_spec(0);
    sc_job_add(t, &ts);
    tour_drive(t, 5, 40); /* into phase 1 */
    journal mid = { 0 };
    size_t k = 0, over = 0;
    for (size_t i = 0; i < jr.n; i++) {
        if (jr.recs[i].job != 5)
            continue;
        if (k == 0 && jr.recs[i].type == SC_REC_ACCEPT) {
            k = i + 1; /* phase 0's first accept is lost */
            continue;
        }
        journal_put(&mid, &jr.recs[i]);
        if (over == 0 && jr.recs[i].type == SC_REC_ACCEPT && jr.recs[i].first >= ts.phase_items &&
            jr.recs[i].count > 1)
            over = mid.n; /* a phase 1 accept, with an overlapping copy of it one item on */
    }
    cr_assert_gt(over, 0);
    static unsigned char e[4096];
    sc_record shifted = mid.recs[over - 1];
    shifted.first++;
    shifted.count--;
    shifted.chunk = 1000;
    shifted.result = e;
    shifted.result_len = tour_result(shifted.variant, shifted.first, shifted.count, e, sizeof e);
    journal_put(&mid, &shifted);
    sc_ledger *r = new_ledger(&again, 9);
    rc = sc_job_restore(r, &ts, mid.recs, mid.n);
    cr_assert_eq(rc, 0, "restore: %d (%s)", rc, sf_strerror(rc));
    sc_job_status_get(r, 5, &st);
    cr_assert_eq(st.phase, 0);
    cr_assert_eq(st.records_skipped, 1);
    tour_drive(t, 5, 100000);
    tour_drive(r, 5, 100000);
    tour_same(t, r, 5);
    sc_ledger_destroy(t);
    sc_ledger_destroy(r);
    journal_free(&mid);
    journal_free(&jr);
    journal_free(&again);
}

/* Runs a node that never returns the chunks of the candidates in `lost`
 * (a bit mask): their leases run out, and after max_attempts they fail. */
static void tour_drive_losing(sc_ledger *l, uint64_t job, uint32_t lost, int rounds)
{
    static unsigned char buf[4096];
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 400 };
    uint64_t now = 0;
    for (int k = 0; k < rounds; k++) {
        sc_job_status st;
        sc_job_status_get(l, job, &st);
        if (st.state != SC_JOB_RUNNING)
            return;
        sc_claim_out c;
        unsigned n;
        node.id = 1 + (uint64_t)k % 4; /* a lost range goes to another node */
        sc_claim(l, &node, 1, now, &c, &n);
        if (n == 1 && !(lost >> c.variant & 1)) {
            size_t len = tour_result(c.variant, c.first, c.count, buf, sizeof buf);
            sc_outcome out;
            cr_assert_eq(sc_complete(l, job, c.chunk, c.token, node.id, buf, len, now, &out, NULL, NULL), 0);
        }
        now += 10000; /* past any lease */
        sc_reclaim(l, now);
    }
}

Test(sched, tournament_a_candidate_with_nothing_done_ranks_last)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = tour_spec(1);
    s.variants = 3;
    cr_assert_eq(sc_job_add(l, &s), 0);
    tour_drive_losing(l, 5, 1u << 1, 1000); /* candidate 1's chunks all fail; 2 is the best */
    sc_job_status st;
    sc_job_status_get(l, 5, &st);
    cr_assert_eq(st.state, SC_JOB_COMPLETE);
    cr_assert_gt(st.failed_items, 0);
    uint32_t want_rank[3] = { 2, 3, 1 };
    for (uint32_t c = 0; c < 3; c++) {
        sc_variant_status vs;
        cr_assert_eq(sc_variant_status_get(l, 5, c, &vs), 0);
        cr_assert_eq(vs.rank, want_rank[c], "candidate %u ranked %u (mean %g)", c, vs.rank, vs.mean);
        cr_assert_eq(vs.alive, c == 2, "candidate %u alive %d", c, vs.alive);
    }
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, tournament_with_every_item_failed_fails)
{
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = tour_spec(0);
    s.variants = 2;
    s.items = 2000;
    cr_assert_eq(sc_job_add(l, &s), 0);
    tour_drive_losing(l, 5, 3, 1000);
    sc_job_status st;
    sc_job_status_get(l, 5, &st);
    cr_assert_eq(st.state, SC_JOB_FAILED, "state %d, %llu items done", st.state, (unsigned long long)st.done_items);
    cr_assert_eq(st.done_items, 0);
    cr_assert_eq(jr.recs[jr.n - 1].type, SC_REC_JOB_END);
    cr_assert_eq(jr.recs[jr.n - 1].state, SC_JOB_FAILED);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

/* ---- stat_weights ---- */

enum { PARAMS = 3 };
static const double weights[PARAMS] = { 2.0, -0.5, 0.0 };
static const double steps[PARAMS] = { 0.01, 0.02, 0.05 };

/* Variant v > 0 moves parameter v-1 by its step: the true weight is
 * weights[v-1]; each variant also has a little noise of its own. */
static double sw_value(uint32_t v, uint64_t i)
{
    double own = (double)(mix(i * 31 + v) % 1000) / 1000.0 - 0.5; /* sd ~0.29 */
    double shift = v == 0 ? 0 : weights[v - 1] * steps[v - 1];
    return value_of(i) + shift + 0.01 * own;
}

static size_t sw_result(uint64_t first, uint64_t count, unsigned char *buf, size_t cap)
{
    sim_stats s[PARAMS + 1];
    size_t len = 0;
    for (uint32_t v = 0; v <= PARAMS; v++) {
        sim_stats_init(&s[v], &layout);
        for (uint64_t i = first; i < first + count; i++)
            sim_stats_add(&s[v], sw_value(v, i));
    }
    cr_assert_eq(sc_result_encode(s, PARAMS + 1, buf, cap, &len), 0);
    return len;
}

/* A stat_weights job (id 8) of `items` items over the PARAMS steps. */
static sc_job_spec sw_spec(uint64_t items)
{
    sc_job_spec s = spec_of(8, items);
    s.strategy = SC_STAT_WEIGHTS;
    s.variants = PARAMS + 1;
    s.steps = steps;
    return s;
}

/* Restores six accepted chunks of a stat_weights job, records[order[i]]
 * i-th, with the chunk ids given; returns the weight's standard error of
 * each parameter. */
static void sw_restore(const uint64_t ids[6], const int order[6], double se[PARAMS])
{
    static unsigned char buf[6][8192];
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = sw_spec(600);
    sc_record recs[6];
    for (int i = 0; i < 6; i++) {
        int k = order[i];
        size_t len = sw_result(100 * (uint64_t)k, 100, buf[k], sizeof buf[k]);
        recs[i] = (sc_record){ .type = SC_REC_ACCEPT, .job = 8, .chunk = ids[k], .first = 100 * (uint64_t)k,
            .count = 100, .result = buf[k], .result_len = len };
    }
    cr_assert_eq(sc_job_restore(l, &s, recs, 6), 0);
    for (uint32_t v = 1; v <= PARAMS; v++) {
        sc_variant_status vs;
        cr_assert_eq(sc_variant_status_get(l, 8, v, &vs), 0);
        se[v - 1] = vs.weight_se;
    }
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, stat_weights_restore_any_chunk_ids)
{
    /* Chunk ids are what the live ledger handed out, up to 2^36: the
     * paired differences are kept per accepted chunk, not in arrays as
     * long as the largest id. Sums run in chunk-id order, so neither the
     * records' order nor the ids' size changes the bits, only their order. */
    const uint64_t huge[6] = { 1ull << 36, 3, 1ull << 30, 8, 1ull << 35, 2 };
    const uint64_t ranks[6] = { 6, 2, 4, 3, 5, 1 };
    const int forward[6] = { 0, 1, 2, 3, 4, 5 }, backward[6] = { 5, 4, 3, 2, 1, 0 };
    double a[PARAMS], b[PARAMS], c[PARAMS];
    sw_restore(huge, forward, a);
    sw_restore(huge, backward, b);
    sw_restore(ranks, backward, c);
    for (int p = 0; p < PARAMS; p++) {
        cr_assert(a[p] > 0 && isfinite(a[p]), "param %d: se %g", p, a[p]);
        cr_assert(memcmp(&a[p], &b[p], sizeof a[p]) == 0, "param %d: %a, %a in another order", p, a[p], b[p]);
        cr_assert(memcmp(&a[p], &c[p], sizeof a[p]) == 0, "param %d: %a, %a with small ids", p, a[p], c[p]);
    }
}

Test(sched, stat_weights_has_enough_chunks_for_its_errors)
{
    /* Its standard errors are batch means over chunks: a fast node still
     * gets a 32nd of the job at most. */
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = sw_spec(1600); /* this ledger's chunks: 400 items at most, 100 per variant */
    cr_assert_eq(sc_job_add(l, &s), 0);
    sc_node_info fast = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 1e9 };
    unsigned chunks = 0, n;
    sc_claim_out c;
    while (sc_claim(l, &fast, 1, 0, &c, &n) == 0 && n == 1) {
        cr_assert_leq(c.count, 50, "a chunk of %llu items", (unsigned long long)c.count);
        chunks++;
    }
    cr_assert_eq(chunks, 32, "%u chunks", chunks);
    sc_ledger_destroy(l);
    journal_free(&jr);
}

Test(sched, stat_weights_match_the_derivatives)
{
    static unsigned char buf[8192];
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = sw_spec(60000);
    cr_assert_eq(sc_job_add(l, &s), 0);
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 1600 };
    bool done = false;
    while (!done) {
        sc_claim_out c;
        unsigned n;
        sc_outcome out;
        sc_claim(l, &node, 1, 0, &c, &n);
        cr_assert_eq(n, 1);
        cr_assert_eq(c.count, 100, "a chunk of 4 variants has a quarter of the items");
        size_t len = sw_result(c.first, c.count, buf, sizeof buf);
        cr_assert_eq(sc_complete(l, 8, c.chunk, c.token, 1, buf, len, 0, &out, &done, NULL), 0);
        cr_assert_eq(out, SC_ACCEPTED);
    }
    sc_variant_status base;
    sc_variant_status_get(l, 8, 0, &base);
    for (uint32_t v = 1; v <= PARAMS; v++) {
        sc_variant_status vs;
        cr_assert_eq(sc_variant_status_get(l, 8, v, &vs), 0);
        double w = weights[v - 1];
        cr_assert_gt(vs.weight_se, 0);
        cr_assert_leq(fabs(vs.weight - w), 3 * vs.weight_se + 1e-9,
            "param %u: weight %g +- %g, true %g", v - 1, vs.weight, vs.weight_se, w);
        /* Common random numbers: the paired error is far below what two
         * independent runs would give. */
        double unpaired = sqrt(base.stderr_ * base.stderr_ + vs.stderr_ * vs.stderr_) / steps[v - 1];
        cr_assert_lt(vs.weight_se, unpaired / 50, "param %u: paired %g vs unpaired %g", v - 1,
            vs.weight_se, unpaired);
    }
    /* A result with the baseline only is refused. */
    sc_claim_out c;
    unsigned n;
    sc_outcome out;
    sc_job_spec s2 = s;
    s2.id = 9;
    sc_job_add(l, &s2);
    sc_claim(l, &node, 1, 0, &c, &n);
    size_t len = result_of(c.first, c.count, buf, sizeof buf);
    cr_assert_eq(sc_complete(l, 9, c.chunk, c.token, 1, buf, len, 0, &out, NULL, NULL), SC_EBADRESULT);
    sc_job_spec bad = s;
    bad.id = 10;
    double zero[PARAMS] = { 0.01, 0, 0.05 };
    bad.steps = zero;
    cr_assert_eq(sc_job_add(l, &bad), SC_EINVAL, "a zero step");
    sc_ledger_destroy(l);
    journal_free(&jr);
}

/* The u32le length prefix at buf + at. */
static size_t len_at(const unsigned char *buf, size_t at)
{
    return (size_t)buf[at] | (size_t)buf[at + 1] << 8 | (size_t)buf[at + 2] << 16 | (size_t)buf[at + 3] << 24;
}

Test(sched, a_malformed_result_says_which_check_failed)
{
    static unsigned char good[8192], buf[8192];
    journal jr = { 0 };
    sc_ledger *l = simple(&jr);
    sc_job_spec s = sw_spec(60000); /* 4 variants of 1 output: 4 statistics a result */
    cr_assert_eq(sc_job_add(l, &s), 0);
    sc_node_info node = { .id = 1, .tier = SC_TIER_OWN, .items_per_s = 1600 };
    sc_claim_out c;
    unsigned n;
    cr_assert_eq(sc_claim(l, &node, 1, 0, &c, &n), 0);
    cr_assert_eq(n, 1);
    size_t len = sw_result(c.first, c.count, good, sizeof good);
    size_t s0 = len_at(good, 0), s1 = len_at(good, 4 + s0), s2 = len_at(good, 8 + s0 + s1);
    size_t at2 = 8 + s0 + s1, at3 = 12 + s0 + s1 + s2;
    char want[256];
    sc_outcome out;
    /* each case: the bytes sent (good's, edited), and the words they get */
    const char *shape = "4 statistics (4 variants x 1 output)";
    sim_layout other;
    cr_assert_eq(sim_layout_make(&other, 1e5, 0, 100), 0); /* another fixed-point step */
    for (int k = 0; k < 7; k++) {
        size_t blen = len;
        memcpy(buf, good, len);
        switch (k) {
        case 0:
            blen = 0;
            snprintf(want, sizeof want, "the result data is empty: the chunk has %s", shape);
            break;
        case 1: /* the baseline alone: too few variants for the context */
            blen = 4 + s0;
            snprintf(want, sizeof want, "the data ends at byte %zu, before the length of statistic 1 (variant 1, "
                "output 0): the chunk has %s", blen, shape);
            break;
        case 2: /* the last statistic cut short */
            blen = len - 1;
            snprintf(want, sizeof want, "statistic 3 (variant 3, output 0) at byte %zu claims %zu bytes, %zu are "
                "left", at3, len - at3 - 4, len - at3 - 5);
            break;
        case 3: /* statistic 2's version (its array's first element) changed */
            buf[at2 + 4 + 1] ^= 0x7f;
            snprintf(want, sizeof want, "statistic 2 (variant 2, output 0) at byte %zu does not decode: %s", at2,
                sf_strerror(SIM_EFORMAT));
            break;
        case 4: /* a byte more */
            buf[len] = 0;
            blen = len + 1;
            snprintf(want, sizeof want, "1 bytes left over after the chunk's %s", shape);
            break;
        case 5: /* the right bytes for one item fewer */
            blen = sw_result(c.first, c.count - 1, buf, sizeof buf);
            snprintf(want, sizeof want, "statistic 0 (variant 0, output 0) counts %llu values, a chunk of %llu items "
                "makes %llu", (unsigned long long)c.count - 1, (unsigned long long)c.count,
                (unsigned long long)c.count);
            break;
        case 6: { /* variant 1 in another layout */
            sim_stats st[PARAMS + 1];
            for (uint32_t v = 0; v <= PARAMS; v++) {
                sim_stats_init(&st[v], v == 1 ? &other : &layout);
                for (uint64_t i = c.first; i < c.first + c.count; i++)
                    sim_stats_add(&st[v], sw_value(v, i));
            }
            cr_assert_eq(sc_result_encode(st, PARAMS + 1, buf, sizeof buf, &blen), 0);
            snprintf(want, sizeof want, "statistic 1 (variant 1, output 0) has another layout (fixed-point step or "
                "histogram range) than the work context gives its output");
            break;
        }
        }
        sf_error why = { 0 };
        cr_assert_eq(sc_complete(l, 8, c.chunk, c.token, 1, blen ? buf : NULL, blen, 0, &out, NULL, &why),
            SC_EBADRESULT, "case %d", k);
        cr_assert_eq(why.code, SC_EBADRESULT, "case %d", k);
        cr_assert_str_eq(why.msg, want, "case %d", k);
        cr_assert_leq(strlen(why.msg), 200, "case %d: a reason fits complete_ack's 200 bytes", k);
    }
    /* None of them ended the claim: the good result is taken under it. */
    sf_error why = { 0 };
    cr_assert_eq(sc_complete(l, 8, c.chunk, c.token, 1, good, len, 0, &out, NULL, &why), 0);
    cr_assert_eq(out, SC_ACCEPTED);
    cr_assert_str_eq(why.msg, "");
    sc_ledger_destroy(l);
    journal_free(&jr);
}
