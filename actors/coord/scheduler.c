/*
 * scheduler.c — see scheduler.h.
 *
 * The ledger's journal callback copies each record into an outbox; after
 * every ledger call the outbox is written through the store. An ACCEPT
 * record carries the completion request it answers, which is replied to
 * when the store confirms the row. Loading is two steps per job: the job's
 * row, then its journal, then sc_job_restore.
 */
#include "base/fnv.h"
#include "base/log.h"
#include "actors/coord/scheduler.h"

#include "actors/coord/events.h"
#include "actors/coord/jobs.h"
#include "actors/coord/journal.h"
#include "actors/coord/store.h"
#include "sim/ctx.h"
#include "sim/sim.h"
#include "base/json.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { M_TICK = CD_MSG__SCHED_PRIVATE, M_SWEEP, M_PROGRESS, M_FLUSH };
#define LIST_MAX 4096             /* jobs one load lists, by id */
#define STR_(x) #x
#define STR(x) STR_(x)
enum {
    DB_TIMEOUT_MS = 60000,
    WRITE_WAIT_MS = 10000,    /* no chunks handed out while a journal write has waited this long */
    MAX_JOBS = 4096,
    PROGRESS_MS = 250,        /* job.progress at most this often per job */
    PARK_MS = 5000,           /* an idle node's claim waits this long for work */
    MAX_PARKED = 65536,
    JOURNAL_PAGE = 20000,     /* journal records per query when a job is loaded */
};

typedef enum op_kind { OP_LIST = 1, OP_JOURNAL } op_kind;

/* What one node contributed to one job: accepted chunks and their items. */
typedef struct contrib {
    uint64_t node;            /* 0 = empty slot */
    uint64_t chunks, items;
} contrib;

typedef struct job_info {
    uint64_t id, seed;
    char kernel[32];
    uint8_t ctx_hash[32];
    uint32_t nout;
    char names[SIM_MAX_OUT][24];
    bool dirty;               /* progress to tell */
    uint64_t rate_done, rate_ms; /* items done at rate_ms, for items/s */
    double items_per_s;
    contrib *by_node;         /* open addressing by node id, at most half full */
    size_t nby_node, by_node_cap;
    sc_strategy strategy;
    uint32_t nvariants;       /* tournament, stat_weights: the variants' names */
    char (*vnames)[65];
    double *steps;            /* stat_weights: variants 1 .. n-1 */
    /* The outputs' closed forms (sim_job_reference), bit o of has_ref for
     * output o; none for a tournament, whose outputs are its leader's. */
    double ref[SIM_MAX_OUT];
    unsigned has_ref;
} job_info;

/* A write in flight: the request and the barrier it counts for (-1: none). */
typedef struct wslot {
    int64_t req;              /* 0 = empty */
    int barrier;
    uint64_t ends;            /* the job whose end it writes; 0: none */
    uint64_t epoch;           /* the journal INSERTs it is one of; 0: none */
} wslot;

/* A job's end, written once the journal rows before it are committed. */
typedef struct held_end {
    cd_query *update;
    uint64_t job;
    int barrier;
} held_end;

/* The journal INSERTs of one outbox write, and the ends of jobs held back
 * until they and those of every earlier epoch are answered: a job's row
 * never says it ended while a journal write of its results may still be
 * lost (one that failed is documented in docs/coordinator.md). */
typedef struct epoch {
    unsigned inserts;         /* in flight */
    uint64_t sent_ms;         /* when they were sent (monotonic) */
    held_end *ends;
    size_t nends, ends_cap;
} epoch;

/* A job that ended (or was cancelled) and must not be loaded again while a
 * load may not see it: its row still says pending or running until its end
 * is committed, and a load that took its snapshot before then sees that. */
typedef struct gone_job {
    uint64_t id;
    bool written;             /* its end is committed: only a load under way may miss it */
} gone_job;

/* A job's end being written: its job.finished goes out once the write is
 * committed, with the state the row then holds (a cancel the API committed
 * first stands). */
typedef struct ending {
    uint64_t job;
    const char *state;        /* the scheduler's own: complete, expired, cancelled, failed */
    char *result;             /* JSON */
    bool cancel_seen;         /* the API's cancel came meanwhile */
} ending;

/* A job whose end found its row cancelled by the API: the API's message
 * follows its commit at once, unless it stopped waiting for the commit
 * (a 503), when none comes; kept for DB_TIMEOUT_MS at most. */
typedef struct due_cancel {
    uint64_t job, since_ms;
} due_cancel;

/* A job whose end the database refused after its job.finished went out
 * with `state`: taken up again, it ends once more, and that end sends no
 * second event unless the row then says otherwise. */
typedef struct told_end {
    uint64_t job;
    const char *state;        /* static */
} told_end;

typedef struct parked {
    rt_msg *claim;            /* the kept cd_claim */
    uint64_t since_ms;
} parked;

/* An accepted completion, answered once its records are committed. */
typedef struct waiter {
    rt_msg *completion;       /* the kept cd_complete */
    sc_outcome outcome;
    bool job_complete;
} waiter;

/* The writes of one flush and the completions waiting for all of them. */
typedef struct barrier {
    waiter *waiters;          /* NULL = free slot */
    size_t nwaiters;
    unsigned remaining;
    bool failed;
} barrier;

typedef struct op {
    int64_t req;
    op_kind kind;
    job_info info;            /* OP_JOURNAL: the job being loaded */
    sc_job_spec spec;
    sim_layout layouts[SIM_MAX_OUT];
    sc_record *recs;          /* its journal so far (results owned, PQfreemem) */
    size_t nrecs, recs_cap;
    int64_t after;            /* the seq of the last record read */
} op;

typedef struct sched {
    rt_actor *self, *store;
    sc_ledger *l;
    uint64_t sweep_ms;
    bool db_up, loading;
    bool unlocked;            /* the coordinator's lock was lost and is not held again yet */
    bool behind;              /* the database is behind with the writes: no claims (see writes_behind) */
    uint64_t write_wait_ms;
    bool load_again;          /* asked to load while a load was under way */
    unsigned journals_pending;
    unsigned journal_page;    /* journal records read per query */
    gone_job *gone;           /* ended jobs no load may start (see gone_job) */
    size_t ngone, gone_cap;
    job_info *jobs;           /* loaded jobs */
    size_t njobs, jobs_cap;
    op *ops;
    size_t nops, ops_cap;
    sc_record *out;           /* journal records not yet written (each result a copy) */
    size_t nout, out_cap;
    sc_record *reend;         /* JOB_END records the journal holds already: the row only */
    size_t nreend, reend_cap;
    waiter *waiting;          /* accepted completions whose records are in out */
    size_t nwaiting, waiting_cap;
    bool flush_queued;        /* an M_FLUSH is on its way to us */
    barrier *barriers;
    size_t nbarriers, barriers_cap;
    int *bfree;               /* barriers free for reuse */
    size_t nbfree, bfree_cap;
    wslot *writes;            /* writes in flight by request id: open addressing */
    size_t nwrites, writes_cap;
    ending *ending;           /* ends being written */
    size_t nending, ending_cap;
    due_cancel *cancel_due;   /* jobs whose row the API cancelled first, its message yet to come */
    size_t ncancel_due, cancel_due_cap;
    told_end *told;           /* refused ends whose job.finished went out */
    size_t ntold, told_cap;
    epoch *epochs;            /* epochs[head .. head + n) are numbers first .. first + n - 1 */
    size_t epochs_head, nepochs, epochs_cap;
    uint64_t epoch_first;
    rt_actor *watcher;        /* receives job events; may be NULL */
    parked *parked;           /* claims waiting for work, oldest first */
    size_t nparked, parked_cap;
    /* What cd_scheduler_stats_get reads from other threads; only the
     * behaviour writes it. Each value is printed on its own, never combined
     * with another to decide anything, so relaxed stores and loads are
     * enough. Away from the fields the behaviour rewrites all the time. */
    struct {
        char pad0[64];
        _Atomic uint64_t jobs, claims, expired, released, given_back;
        _Atomic uint64_t conflicts_written, conflicts_restored;
        char pad1[64];
    } g;
} sched;

/* ---- completions ------------------------------------------------------------------ */

static void complete_release(rt_msg *m)
{
    free(((cd_complete *)m)->result);
}

cd_complete *cd_complete_new(uint64_t job, uint64_t chunk, const uint8_t token[16], uint64_t node,
    const void *result, size_t len)
{
    cd_complete *c = RT_MSG_NEW(cd_complete, CD_MSG_COMPLETE);
    c->hdr.release = complete_release;
    c->job = job;
    c->chunk = chunk;
    c->node = node;
    memcpy(c->token, token, 16);
    c->result = malloc(len ? len : 1);
    if (c->result == NULL)
        sf_oom(len);
    memcpy(c->result, result, len);
    c->len = len;
    return c;
}

static void reply_completed(rt_msg *req, int err, sc_outcome outcome, bool job_complete)
{
    cd_completed *r = RT_MSG_NEW(cd_completed, CD_MSG_COMPLETED);
    r->err = err;
    r->outcome = outcome;
    r->job_complete = job_complete;
    rt_reply(req, &r->hdr);
}

/* ---- the outbox ---------------------------------------------------------------------- */

static void journal_cb(void *ctx, const sc_record *r)
{
    sched *s = ctx;
    if (s->nout == s->out_cap)
        s->out = sf_grow(s->out, &s->out_cap, sizeof *s->out);
    sc_record *o = &s->out[s->nout++];
    *o = *r;
    o->result = NULL;
    if (r->result_len > 0) {
        void *copy = malloc(r->result_len);
        if (copy == NULL)
            sf_oom(r->result_len);
        memcpy(copy, r->result, r->result_len);
        o->result = copy;
    }
}

static op *op_add(sched *s, int64_t req, op_kind kind)
{
    if (s->nops == s->ops_cap)
        s->ops = sf_grow(s->ops, &s->ops_cap, sizeof *s->ops);
    op *o = &s->ops[s->nops++];
    memset(o, 0, sizeof *o);
    o->req = req;
    o->kind = kind;
    return o;
}

static const job_info *info_of(const sched *s, uint64_t id)
{
    for (size_t i = 0; i < s->njobs; i++)
        if (s->jobs[i].id == id)
            return &s->jobs[i];
    return NULL;
}

static const char *state_name(sc_job_state st)
{
    switch (st) {
    case SC_JOB_RUNNING: return "running";
    case SC_JOB_COMPLETE: return "complete";
    case SC_JOB_FAILED: return "failed";
    case SC_JOB_CANCELLED: return "cancelled";
    case SC_JOB_EXPIRED: return "expired";
    }
    return "failed";
}

static void json_num(char *buf, size_t cap, double v)
{
    if (v != v || v > 1.7e308 || v < -1.7e308)
        snprintf(buf, cap, "null");
    else
        snprintf(buf, cap, "%.17g", v);
}

static void event_release(rt_msg *m)
{
    free(((cd_event *)m)->fields);
}

/* Sends an event to the watcher; takes fields (malloc'd). */
static void emit(sched *s, const char *type, uint64_t job, char *fields)
{
    if (s->watcher == NULL) {
        free(fields);
        return;
    }
    cd_event *e = RT_MSG_NEW(cd_event, CD_MSG_EVENT);
    e->hdr.release = event_release;
    snprintf(e->type, sizeof e->type, "%s", type);
    e->job = job;
    e->fields = fields;
    rt_send(s->watcher, &e->hdr);
}

/* Each output's count, mean, standard error, min, max and histogram, as
 * the JSON member "outputs":[...], written at j + n (OUT_JSON bytes per
 * output); returns the new length. */
static size_t outputs_json(const job_info *ji, const sc_job_status *st, char *j, size_t cap, size_t n)
{
    n += (size_t)snprintf(j + n, cap - n, "\"outputs\":[");
    for (uint32_t o = 0; o < st->nout && o < ji->nout; o++) {
        char mean[32], se[32], mn[32], mx[32];
        const sim_stats *a = &st->aggregate[o];
        json_num(mean, sizeof mean, sim_stats_mean(a));
        json_num(se, sizeof se, sim_stats_stderr(a));
        json_num(mn, sizeof mn, sim_stats_min(a));
        json_num(mx, sizeof mx, sim_stats_max(a));
        n += (size_t)snprintf(j + n, cap - n, "%s{\"name\":\"%s\",\"count\":%" PRIu64 ",\"mean\":%s,\"stderr\":%s,"
            "\"min\":%s,\"max\":%s,", o ? "," : "", ji->names[o], sim_stats_count(a), mean, se, mn, mx);
        if (ji->has_ref & (1u << o)) {
            json_num(mn, sizeof mn, ji->ref[o]);
            n += (size_t)snprintf(j + n, cap - n, "\"closed_form\":%s,", mn);
        }
        json_num(mn, sizeof mn, a->layout.hist_lo);
        json_num(mx, sizeof mx, a->layout.hist_hi);
        n += (size_t)snprintf(j + n, cap - n, "\"hist\":{\"lo\":%s,\"hi\":%s,\"under\":%" PRIu64 ",\"over\":%" PRIu64
            ",\"bins\":[", mn, mx, sim_stats_hist(a, 0), sim_stats_hist(a, SIM_HIST_BINS + 1));
        for (int b = 1; b <= SIM_HIST_BINS; b++)
            n += (size_t)snprintf(j + n, cap - n, "%s%" PRIu64, b > 1 ? "," : "", sim_stats_hist(a, b));
        n += (size_t)snprintf(j + n, cap - n, "]}}");
    }
    n += (size_t)snprintf(j + n, cap - n, "]");
    return n;
}

enum {
    OUT_JSON = 1280,          /* one output: its numbers and 34 histogram slots */
    NODES_SHOWN = 32,         /* contributions listed, the largest first */
    NODE_JSON = 96,
    JSON_CAP = 768 + OUT_JSON * SIM_MAX_OUT + NODE_JSON * NODES_SHOWN,
};

/* ---- open-addressing tables (writes in flight, contributions) ----
 * Entries start with a nonzero 64-bit key (0 marks an empty slot); a
 * table has a power-of-two number of slots and is kept at most half full. */

/* The home slot of key in a table of cap slots. */
static size_t hash_slot(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static uint64_t key_at(const void *t, size_t elem, size_t i)
{
    uint64_t k;
    memcpy(&k, (const char *)t + i * elem, sizeof k);
    return k;
}

/* The slot holding key, or the empty slot where it goes. */
static size_t table_find(const void *t, size_t cap, size_t elem, uint64_t key)
{
    size_t i = hash_slot(key, cap);
    for (uint64_t k; (k = key_at(t, elem, i)) != 0 && k != key;)
        i = (i + 1) & (cap - 1);
    return i;
}

/* Makes room for one more entry (n entries now): returns t, or a table
 * twice as large (from `first` slots) with the entries moved over, t freed. */
static void *table_reserve(void *t, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (2 * (n + 1) <= *cap)
        return t;
    size_t ocap = *cap, ncap = ocap ? ocap * 2 : first;
    char *old = t, *nt = calloc(ncap, elem);
    if (nt == NULL)
        sf_oom(ncap * elem);
    for (size_t i = 0; i < ocap; i++) {
        uint64_t k = key_at(old, elem, i);
        if (k != 0)
            memcpy(nt + table_find(nt, ncap, elem, k) * elem, old + i * elem, elem);
    }
    free(old);
    *cap = ncap;
    return nt;
}

/* ---- contributions: per job, per node, constant cost per completion ---- */

static void contrib_add(job_info *ji, uint64_t node, uint64_t items)
{
    if (node == 0)
        return;
    ji->by_node = table_reserve(ji->by_node, &ji->by_node_cap, ji->nby_node, sizeof *ji->by_node, 8);
    contrib *c = &ji->by_node[table_find(ji->by_node, ji->by_node_cap, sizeof *c, node)];
    if (c->node == 0) {
        c->node = node;
        ji->nby_node++;
    }
    c->chunks++;
    c->items += items;
}

static int contrib_cmp(const void *a, const void *b)
{
    const contrib *x = a, *y = b;
    if (x->items != y->items)
        return x->items > y->items ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* The members "nodes":[{"node","chunks","items"}...] (the NODES_SHOWN
 * largest) and "nodes_total", written at j + n; returns the new length.
 * Sorting costs what the job's nodes number, at most four times a second. */
static size_t nodes_json(const job_info *ji, char *j, size_t cap, size_t n)
{
    contrib *v = NULL;
    size_t k = 0;
    if (ji->nby_node > 0) {
        v = malloc(ji->nby_node * sizeof *v);
        if (v == NULL)
            sf_oom(ji->nby_node * sizeof *v);
        for (size_t i = 0; i < ji->by_node_cap; i++)
            if (ji->by_node[i].node != 0)
                v[k++] = ji->by_node[i];
        qsort(v, k, sizeof *v, contrib_cmp);
    }
    n += (size_t)snprintf(j + n, cap - n, "\"nodes\":[");
    for (size_t i = 0; i < k && i < NODES_SHOWN; i++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"node\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"items\":%" PRIu64 "}",
            i ? "," : "", v[i].node, v[i].chunks, v[i].items);
    n += (size_t)snprintf(j + n, cap - n, "],\"nodes_total\":%zu", k);
    free(v);
    return n;
}


/* The job's result as JSON: state, items, and each output's statistics. */
/* A tournament's or stat_weights' part of the result: ",\"weights\":[...]"
 * (each parameter's weight, the change of output 0's mean per unit of its
 * step, with its standard error from the per-chunk paired differences), or
 * ",\"candidates\":[...],\"phases\":[...],\"winner\":..." (who ran how far,
 * and who dropped out after which phase). */
static char *variants_json(sched *s, const job_info *ji, const sc_job_status *st)
{
    /* per variant: its candidate entry (a quoted name of at most 160
     * bytes, numbers) and its name once more in the ladder; per phase
     * the ladder's entry without names */
    size_t cap = 256 + (size_t)ji->nvariants * (384 + 168) + (size_t)st->phase * 64, n = 0;
    char *j = malloc(cap);
    if (j == NULL)
        sf_oom(cap);
    char name[160], a[32], b[32], c[32];
    sc_variant_status vs;
    if (ji->strategy == SC_STAT_WEIGHTS) {
        n += (size_t)snprintf(j + n, cap - n, ",\"weights\":[");
        for (uint32_t v = 1; v < ji->nvariants; v++) {
            if (sc_variant_status_get(s->l, ji->id, v, &vs) != 0)
                continue;
            json_num(a, sizeof a, vs.weight);
            json_num(b, sizeof b, vs.weight_se);
            json_num(c, sizeof c, ji->steps[v - 1]);
            n += (size_t)snprintf(j + n, cap - n, "%s{\"name\":%s,\"step\":%s,\"weight\":%s,\"stderr\":%s}",
                v > 1 ? "," : "", cd_json_quote(name, sizeof name, ji->vnames[v]), c, a, b);
        }
        snprintf(j + n, cap - n, "]");
        return j;
    }
    n += (size_t)snprintf(j + n, cap - n, ",\"candidates\":[");
    const char *winner = NULL;
    for (uint32_t v = 0; v < ji->nvariants; v++) {
        if (sc_variant_status_get(s->l, ji->id, v, &vs) != 0)
            continue;
        json_num(a, sizeof a, vs.mean);
        json_num(b, sizeof b, vs.stderr_);
        n += (size_t)snprintf(j + n, cap - n, "%s{\"name\":%s,\"alive\":%s,\"rank\":%u,\"items\":%" PRIu64
            ",\"mean\":%s,\"stderr\":%s,\"dropped_after\":%u}", v ? "," : "",
            cd_json_quote(name, sizeof name, ji->vnames[v]), vs.alive ? "true" : "false", vs.rank, vs.done_items, a, b,
            vs.dropped_after);
        if (vs.alive && vs.rank == 1)
            winner = ji->vnames[v];
    }
    /* The ladder: after phase p, who dropped out and how many were left. */
    n += (size_t)snprintf(j + n, cap - n, "],\"phases\":[");
    uint32_t alive = ji->nvariants;
    for (uint32_t p = 1; p <= st->phase; p++) {
        n += (size_t)snprintf(j + n, cap - n, "%s{\"phase\":%u,\"dropped\":[", p > 1 ? "," : "", p);
        bool first = true;
        for (uint32_t v = 0; v < ji->nvariants; v++)
            if (sc_variant_status_get(s->l, ji->id, v, &vs) == 0 && !vs.alive && vs.dropped_after == p) {
                n += (size_t)snprintf(j + n, cap - n, "%s%s", first ? "" : ",",
                    cd_json_quote(name, sizeof name, ji->vnames[v]));
                first = false;
                alive--;
            }
        n += (size_t)snprintf(j + n, cap - n, "],\"alive\":%u}", alive);
    }
    n += (size_t)snprintf(j + n, cap - n, "],\"winner\":");
    if (winner != NULL && st->state == SC_JOB_COMPLETE)
        cd_json_quote(j + n, cap - n, winner);
    else
        snprintf(j + n, cap - n, "null");
    return j;
}

static char *result_json(sched *s, uint64_t job)
{
    sc_job_status st;
    const job_info *ji = info_of(s, job);
    char *j = malloc(JSON_CAP);
    if (j == NULL)
        sf_oom(JSON_CAP);
    if (sc_job_status_get(s->l, job, &st) != 0 || ji == NULL) {
        snprintf(j, JSON_CAP, "{}");
        return j;
    }
    size_t n = (size_t)snprintf(j, JSON_CAP, "{\"state\":\"%s\",\"items_done\":%" PRIu64 ",\"items_failed\":%" PRIu64
        ",\"chunks_accepted\":%" PRIu64 ",\"chunks_failed\":%" PRIu64 ",\"reclaims\":%" PRIu64 ",",
        state_name(st.state), st.done_items, st.failed_items, st.chunks_accepted, st.chunks_failed, st.reclaims);
    n = outputs_json(ji, &st, j, JSON_CAP, n);
    n += (size_t)snprintf(j + n, JSON_CAP - n, ",");
    n = nodes_json(ji, j, JSON_CAP, n);
    if (ji->strategy != SC_SINGLE) {
        char *v = variants_json(s, ji, &st);
        size_t vl = strlen(v);
        char *jj = realloc(j, n + vl + 2);
        if (jj == NULL)
            sf_oom(n + vl + 2);
        j = jj;
        memcpy(j + n, v, vl);
        n += vl;
        free(v);
    }
    snprintf(j + n, 2, "}");
    return j;
}

/* job.progress from the ledger's counters: its cost does not depend on
 * the job's size. */
static void emit_progress(sched *s, job_info *ji, uint64_t now)
{
    sc_job_status st;
    if (sc_job_status_get(s->l, ji->id, &st) != 0)
        return;
    if (ji->rate_ms == 0) {
        ji->rate_ms = now;
        ji->rate_done = st.done_items;
    } else if (now - ji->rate_ms >= 1000) { /* items/s over about a second, smoothed */
        double rate = (double)(st.done_items - ji->rate_done) * 1000.0 / (double)(now - ji->rate_ms);
        ji->items_per_s = ji->items_per_s > 0 ? 0.5 * ji->items_per_s + 0.5 * rate : rate;
        ji->rate_ms = now;
        ji->rate_done = st.done_items;
    }
    char *j = malloc(JSON_CAP);
    if (j == NULL)
        sf_oom(JSON_CAP);
    size_t n = (size_t)snprintf(j, JSON_CAP,
        "\"items\":%" PRIu64 ",\"items_done\":%" PRIu64 ",\"items_failed\":%" PRIu64 ",\"items_in_flight\":%" PRIu64
        ",\"claims_in_flight\":%u,\"chunks_accepted\":%" PRIu64 ",\"chunks_failed\":%" PRIu64 ",\"reclaims\":%" PRIu64
        ",\"items_per_s\":%.0f,",
        st.items, st.done_items, st.failed_items, st.inflight_items, st.inflight_claims, st.chunks_accepted,
        st.chunks_failed, st.reclaims, ji->items_per_s);
    n = outputs_json(ji, &st, j, JSON_CAP, n);
    n += (size_t)snprintf(j + n, JSON_CAP - n, ",");
    nodes_json(ji, j, JSON_CAP, n);
    emit(s, "job.progress", ji->id, j);
}

/* Claims went back to their jobs: their reclaims and items in flight
 * changed, for the next progress tick to tell. */
static void claims_lost(sched *s)
{
    for (size_t i = 0; i < s->njobs; i++)
        s->jobs[i].dirty = true;
}

static void on_progress_tick(sched *s)
{
    uint64_t now = rt_mono_ms();
    for (size_t i = 0; i < s->njobs; i++)
        if (s->jobs[i].dirty) {
            s->jobs[i].dirty = false;
            emit_progress(s, &s->jobs[i], now);
        }
}

static void job_info_free(job_info *ji)
{
    free(ji->by_node);
    free(ji->vnames);
    free(ji->steps);
}

/* ---- ended jobs that loads must skip ------------------------------------------ */

static bool is_gone(const sched *s, uint64_t id)
{
    for (size_t i = 0; i < s->ngone; i++)
        if (s->gone[i].id == id)
            return true;
    return false;
}

/* Job id has ended; `written` when its row already says so (committed). */
static void gone_add(sched *s, uint64_t id, bool written)
{
    if ((written && !s->loading) || is_gone(s, id))
        return; /* every later load sees the row as it is now */
    if (s->ngone == s->gone_cap)
        s->gone = sf_grow(s->gone, &s->gone_cap, sizeof *s->gone);
    s->gone[s->ngone++] = (gone_job){ id, written };
}

/* The write of job id's end is answered: committed (ok), or failed, when
 * the job may be loaded again, so that a later load restores it from its
 * journal and writes its end once more. */
static void gone_written(sched *s, uint64_t id, bool ok)
{
    for (size_t i = 0; i < s->ngone; i++)
        if (s->gone[i].id == id) {
            if (ok && s->loading)
                s->gone[i].written = true; /* until the load under way is done */
            else
                s->gone[i] = s->gone[--s->ngone];
            return;
        }
}

/* A load is done: the next one sees every committed end. */
static void gone_load_done(sched *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ngone; i++)
        if (!s->gone[i].written)
            s->gone[n++] = s->gone[i];
    s->ngone = n;
}

static void forget_job(sched *s, uint64_t id)
{
    sc_job_forget(s->l, id);
    for (size_t i = 0; i < s->njobs; i++)
        if (s->jobs[i].id == id) {
            job_info_free(&s->jobs[i]);
            s->jobs[i] = s->jobs[--s->njobs];
            break;
        }
}

static void barrier_done(sched *s, int b, bool ok)
{
    barrier *w = &s->barriers[b];
    w->failed |= !ok;
    if (--w->remaining > 0)
        return;
    for (size_t i = 0; i < w->nwaiters; i++) {
        waiter *c = &w->waiters[i];
        reply_completed(c->completion, w->failed ? SC_EINVAL : 0, c->outcome, c->job_complete);
        rt_msg_free(c->completion);
    }
    free(w->waiters);
    w->waiters = NULL;
    w->nwaiters = 0;
    if (s->nbfree == s->bfree_cap)
        s->bfree = sf_grow(s->bfree, &s->bfree_cap, sizeof *s->bfree);
    s->bfree[s->nbfree++] = b;
}

/* ---- writes in flight: a hash table by request id (thousands at full load) ---- */

static size_t wslot_of(const sched *s, int64_t req)
{
    return hash_slot((uint64_t)req, s->writes_cap);
}

static void writes_put(sched *s, wslot w)
{
    s->writes = table_reserve(s->writes, &s->writes_cap, s->nwrites, sizeof *s->writes, 64);
    s->writes[table_find(s->writes, s->writes_cap, sizeof *s->writes, (uint64_t)w.req)] = w;
    s->nwrites++;
}

/* Removes req into *w; returns false when it is not a write in flight. */
static bool writes_take(sched *s, int64_t req, wslot *w)
{
    if (s->writes_cap == 0)
        return false;
    size_t mask = s->writes_cap - 1, i = wslot_of(s, req);
    while (s->writes[i].req != req) {
        if (s->writes[i].req == 0)
            return false;
        i = (i + 1) & mask;
    }
    *w = s->writes[i];
    s->nwrites--;
    /* Backward-shift deletion keeps every probe run unbroken. */
    for (size_t j = (i + 1) & mask; s->writes[j].req != 0; j = (j + 1) & mask) {
        size_t home = wslot_of(s, s->writes[j].req);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s->writes[i] = s->writes[j];
            i = j;
        }
    }
    s->writes[i].req = 0;
    return true;
}

static void epoch_done(sched *s, uint64_t e);

/* The end of job being written, or NULL. */
static ending *ending_of(sched *s, uint64_t job)
{
    for (size_t i = 0; i < s->nending; i++)
        if (s->ending[i].job == job)
            return &s->ending[i];
    return NULL;
}

/* The write of job's end is answered: committed (ok; `state`, if not NULL,
 * is what the row now says; a cancel the API committed first stands, and
 * its message, still to come, sends no second event), or not, when the
 * event says what the scheduler knows; the job is then loaded again and
 * ends once more, which sends a second event only if the state differs. */
static void end_written(sched *s, uint64_t job, bool ok, const char *state)
{
    ending *d = ending_of(s, job);
    if (d == NULL)
        return;
    const char *st = ok && state != NULL ? state : d->cancel_seen ? "cancelled" : d->state;
    size_t t = 0;
    while (t < s->ntold && s->told[t].job != job)
        t++;
    if (t == s->ntold || strcmp(s->told[t].state, st) != 0)
        emit(s, "job.finished", job, sf_fmt("\"state\":\"%s\",\"result\":%s", st, d->result));
    if (ok && t < s->ntold) {
        s->told[t] = s->told[--s->ntold];
    } else if (!ok) {
        if (t == s->ntold) {
            if (s->ntold == s->told_cap)
                s->told = sf_grow(s->told, &s->told_cap, sizeof *s->told);
            s->ntold++;
        }
        s->told[t] = (told_end){ job, st };
    }
    if (ok && strcmp(st, "cancelled") == 0 && strcmp(d->state, "cancelled") != 0 && !d->cancel_seen) {
        if (s->ncancel_due == s->cancel_due_cap)
            s->cancel_due = sf_grow(s->cancel_due, &s->cancel_due_cap, sizeof *s->cancel_due);
        s->cancel_due[s->ncancel_due++] = (due_cancel){ job, rt_mono_ms() };
    }
    free(d->result);
    *d = s->ending[--s->nending];
}

/* Job's end, in `state` with `result` (taken), is being written. */
static void ending_add(sched *s, uint64_t job, const char *state, char *result)
{
    if (s->nending == s->ending_cap)
        s->ending = sf_grow(s->ending, &s->ending_cap, sizeof *s->ending);
    s->ending[s->nending++] = (ending){ job, state, result, false };
}

/* The API's cancel of job, which the scheduler no longer holds: true when
 * the job's end is being written (its event will say cancelled) or was
 * written after the cancel (its event said so), false when the job was
 * never taken in. */
static bool cancel_of_ended(sched *s, uint64_t job)
{
    ending *d = ending_of(s, job);
    if (d != NULL) {
        d->cancel_seen = true;
        return true;
    }
    for (size_t i = 0; i < s->ncancel_due; i++)
        if (s->cancel_due[i].job == job) {
            s->cancel_due[i] = s->cancel_due[--s->ncancel_due];
            return true;
        }
    return false;
}

/* The answer to write w (ok: committed; state: the row's, for an end). */
static void write_done(sched *s, wslot w, bool ok, const char *state)
{
    if (w.ends != 0) {
        end_written(s, w.ends, ok, state);
        gone_written(s, w.ends, ok);
    }
    if (w.barrier >= 0)
        barrier_done(s, w.barrier, ok);
    if (w.epoch != 0)
        epoch_done(s, w.epoch);
}

/* Sends a write; its answer counts for barrier b (-1: none), it writes
 * the end of job `ends` (0: of none), and it is one of the journal
 * INSERTs of epoch e (0: of none). */
static void write_query(sched *s, cd_query *q, int b, uint64_t ends, uint64_t e)
{
    wslot w = { rt_request(s->self, s->store, &q->hdr, DB_TIMEOUT_MS), b, ends, e };
    if (w.req < 0)
        write_done(s, w, false, NULL);
    else
        writes_put(s, w);
}

/* ---- epochs: the journal before the ends of jobs ---------------------------------------- */

static epoch *epoch_at(sched *s, uint64_t e)
{
    return &s->epochs[s->epochs_head + (size_t)(e - s->epoch_first)];
}

/* A new epoch with `inserts` INSERTs to come; returns its number. */
static uint64_t epoch_new(sched *s, unsigned inserts)
{
    if (s->epochs_head + s->nepochs == s->epochs_cap) {
        if (s->epochs_head > 0) {
            memmove(s->epochs, s->epochs + s->epochs_head, s->nepochs * sizeof *s->epochs);
            s->epochs_head = 0;
        } else {
            s->epochs = sf_grow(s->epochs, &s->epochs_cap, sizeof *s->epochs);
        }
    }
    s->epochs[s->epochs_head + s->nepochs] = (epoch){ .inserts = inserts, .sent_ms = rt_mono_ms() };
    return s->epoch_first + s->nepochs++;
}

static void epoch_hold(sched *s, uint64_t e, cd_query *update, uint64_t job, int b)
{
    epoch *p = epoch_at(s, e);
    if (p->nends == p->ends_cap)
        p->ends = sf_grow(p->ends, &p->ends_cap, sizeof *p->ends);
    p->ends[p->nends++] = (held_end){ update, job, b };
}

/* One of epoch e's INSERTs is answered. Each epoch whose INSERTs and
 * those of every earlier epoch are all answered sends its ends. They go
 * also after an INSERT that failed: the row then has the job's whole
 * result, which a journal with a gap could not give back (documented in
 * docs/coordinator.md). */
static void epoch_done(sched *s, uint64_t e)
{
    epoch_at(s, e)->inserts--;
    while (s->nepochs > 0 && s->epochs[s->epochs_head].inserts == 0) {
        epoch first = s->epochs[s->epochs_head++];
        s->nepochs--;
        s->epoch_first++;
        for (size_t i = 0; i < first.nends; i++)
            write_query(s, first.ends[i].update, first.ends[i].barrier, first.ends[i].job, 0);
        free(first.ends);
    }
    if (s->nepochs == 0)
        s->epochs_head = 0;
}

/* Writes every record in the outbox: one INSERT per CD_JOURNAL_MAX_ROWS
 * records, in their order, and each ended job's row. The completions
 * waiting for these records are answered once all of these writes are
 * committed: an acknowledged result, and the end of the job it finished,
 * survive any crash. */
static void write_out(sched *s)
{
    int b = -1;
    size_t inserts = (s->nout + CD_JOURNAL_MAX_ROWS - 1) / CD_JOURNAL_MAX_ROWS;
    if (s->nwaiting > 0) {
        size_t writes = inserts + s->nreend;
        for (size_t i = 0; i < s->nout; i++)
            writes += s->out[i].type == SC_REC_JOB_END;
        size_t k = s->nbfree > 0 ? (size_t)s->bfree[--s->nbfree] : s->nbarriers;
        if (k == s->nbarriers) {
            if (s->nbarriers == s->barriers_cap)
                s->barriers = sf_grow(s->barriers, &s->barriers_cap, sizeof *s->barriers);
            s->nbarriers++;
        }
        s->barriers[k] = (barrier){ s->waiting, s->nwaiting, (unsigned)writes, false };
        s->waiting = NULL;
        s->nwaiting = s->waiting_cap = 0;
        b = (int)k; /* writes >= 1: a waiter's ACCEPT record is in out */
    }
    uint64_t e = epoch_new(s, (unsigned)inserts + 1); /* + 1: answered below, once its ends are held */
    for (size_t i = 0; i < s->nout; i += CD_JOURNAL_MAX_ROWS) {
        size_t n = s->nout - i < CD_JOURNAL_MAX_ROWS ? s->nout - i : CD_JOURNAL_MAX_ROWS;
        write_query(s, cd_journal_insert(&s->out[i], n), b, 0, e);
    }
    for (size_t i = 0; i < s->nout + s->nreend; i++) {
        const sc_record *r = i < s->nout ? &s->out[i] : &s->reend[i - s->nout];
        if (r->type != SC_REC_JOB_END)
            continue;
        char *res = result_json(s, r->job);
        job_info *ji = (job_info *)info_of(s, r->job);
        if (ji != NULL && ji->dirty)
            emit_progress(s, ji, rt_mono_ms()); /* the last counts before the end */
        cd_query *u = cd_query_new(
            /* a cancel the API committed first keeps its state (the
             * API has answered it); the result is written either way */
            "UPDATE jobs SET state = CASE WHEN state IN ('pending', 'running') THEN $2 ELSE state END, "
            "result = $3::jsonb, finished_at = coalesce(finished_at, now()) WHERE id = $1 RETURNING state");
        u->group = true;
        cd_query_int(u, (int64_t)r->job);
        cd_query_text(u, state_name(r->state));
        cd_query_text(u, res);
        ending_add(s, r->job, state_name(r->state), res);
        gone_add(s, r->job, false);
        epoch_hold(s, e, u, r->job, b);
    }
    epoch_done(s, e);
    /* Ended jobs leave memory as their end is written (a completion that
     * comes later is stale); loads skip them until it is committed. */
    size_t n = s->nout;
    s->nout = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->out[i].type == SC_REC_JOB_END)
            forget_job(s, s->out[i].job);
        free((void *)s->out[i].result);
    }
    for (size_t i = 0; i < s->nreend; i++)
        forget_job(s, s->reend[i].job);
    s->nreend = 0;
}

/* Writes the outbox soon: after the messages already waiting for us, so
 * that the records of a burst of completions share one statement (at a
 * low rate each goes alone, with no delay). At once when the outbox is
 * full or no message can be sent. `completion` (kept), if any, is
 * answered once its records are committed. */
static void flush(sched *s, rt_msg *completion, sc_outcome outcome, bool done)
{
    if (completion != NULL) {
        if (s->nwaiting == s->waiting_cap)
            s->waiting = sf_grow(s->waiting, &s->waiting_cap, sizeof *s->waiting);
        s->waiting[s->nwaiting++] = (waiter){ completion, outcome, done };
    }
    if (s->nout == 0 && s->nwaiting == 0 && s->nreend == 0)
        return;
    if (s->nout >= CD_JOURNAL_MAX_ROWS) {
        write_out(s);
        return;
    }
    if (s->flush_queued)
        return;
    rt_msg *m = rt_msg_new(M_FLUSH, sizeof *m);
    int rc = rt_send(s->self, m);
    if (rc == 0) {
        s->flush_queued = true;
        return;
    }
    if (rc == RT_EOVERLOAD)
        rt_msg_free(m);
    write_out(s);
}

/* ---- loading jobs ----------------------------------------------------------------------- */

static void serve_parked(sched *s, bool expire);

static void load(sched *s)
{
    if (!s->db_up)
        return;
    if (s->loading) { /* its list may predate the job that asks: once more after it */
        s->load_again = true;
        return;
    }
    s->loading = true;
    s->load_again = false;
    cd_query *q = cd_query_new(
        "SELECT id, kernel, items, seed, priority, tiers, params, ctx_hash, owner, strategy, strategy_params, state "
        "FROM jobs WHERE state IN ('pending', 'running') ORDER BY id LIMIT " STR(LIST_MAX));
    int64_t req = rt_request(s->self, s->store, &q->hdr, DB_TIMEOUT_MS);
    if (req > 0)
        op_add(s, req, OP_LIST);
    else
        s->loading = false;
}

static bool unhex(const char *text, unsigned char **out, size_t *len)
{
    *out = PQunescapeBytea((const unsigned char *)text, len);
    return *out != NULL;
}

static void fail_job(sched *s, uint64_t id, const char *why)
{
    sf_log(SF_LOG_WARN, "scheduler", "job %" PRIu64 " cannot run: %s", id, why);
    char quoted[600], msg[640];
    snprintf(msg, sizeof msg, "{\"error\":%s}", cd_json_quote(quoted, sizeof quoted, why));
    cd_query *u = cd_query_new(
        /* a cancel the API committed first keeps its state, as a job's end does */
        "UPDATE jobs SET state = CASE WHEN state IN ('pending', 'running') THEN 'failed' ELSE state END, "
        "result = $2::jsonb, finished_at = coalesce(finished_at, now()) WHERE id = $1 RETURNING state");
    u->group = true; /* never refused by the backlog bound: at most one per job */
    cd_query_int(u, (int64_t)id);
    cd_query_text(u, msg);
    ending_add(s, id, "failed", sf_fmt("%s", msg));
    gone_add(s, id, false);
    write_query(s, u, -1, id, 0);
}

/* A job whose row says cancelled (the API's UPDATE is committed). */
static void cancel_job(sched *s, uint64_t job)
{
    int rc = sc_job_cancel(s->l, job, rt_mono_ms());
    if (rc == 0) {
        flush(s, NULL, 0, false); /* job.finished with the result so far */
    } else if (rc == SC_ENOJOB && !cancel_of_ended(s, job)) { /* not loaded: a load under way must not start it */
        gone_add(s, job, true);
        emit(s, "job.finished", job, sf_fmt("\"state\":\"cancelled\""));
    }
}

/* Whether job id is a row of a load's list (rows in id order). */
static bool listed(PGresult *res, uint64_t id)
{
    int lo = 0, hi = PQntuples(res);
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        uint64_t at = strtoull(PQgetvalue(res, mid, 0), NULL, 10);
        if (at == id)
            return true;
        if (at < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Jobs running here whose rows a load's list (res, by id) no longer shows
 * pending or running were stopped by the API without the scheduler being
 * told: a cancel whose UPDATE committed after the API had stopped waiting
 * for it (and answered 503). They stop here too. */
static void stop_unlisted(sched *s, PGresult *res)
{
    int n = PQntuples(res);
    /* a full list covers the ids up to its last only */
    uint64_t last = n == LIST_MAX ? strtoull(PQgetvalue(res, n - 1, 0), NULL, 10) : UINT64_MAX;
    uint64_t *stop = NULL;
    size_t nstop = 0, cap = 0;
    for (size_t i = 0; i < s->njobs; i++) {
        uint64_t id = s->jobs[i].id;
        if (id > last || listed(res, id))
            continue;
        if (nstop == cap)
            stop = sf_grow(stop, &cap, sizeof *stop);
        stop[nstop++] = id;
    }
    for (size_t i = 0; i < nstop; i++) { /* cancelling may let a job go from s->jobs */
        sf_log(SF_LOG_WARN, "scheduler", "job %" PRIu64 " was stopped outside the scheduler: stopping it", stop[i]);
        cancel_job(s, stop[i]);
    }
    free(stop);
    /* a refused end whose row is no longer running (the API cancelled
     * it) will not be written: its job need not be remembered */
    for (size_t i = 0; i < s->ntold;) {
        uint64_t id = s->told[i].job;
        if (id <= last && !listed(res, id) && ending_of(s, id) == NULL)
            s->told[i] = s->told[--s->ntold];
        else
            i++;
    }
}

static void load_done(sched *s)
{
    if (s->journals_pending > 0)
        return;
    s->loading = false;
    gone_load_done(s);
    uint64_t now = rt_mono_ms();
    for (size_t i = 0; i < s->ncancel_due;) /* messages that will not come */
        if (now - s->cancel_due[i].since_ms > DB_TIMEOUT_MS)
            s->cancel_due[i] = s->cancel_due[--s->ncancel_due];
        else
            i++;
    if (s->load_again)
        load(s);
}

/* A tournament's or stat_weights' settings (jobs.strategy_params, written
 * by actors/coord/jobs.c) into the spec and the job's names. */
static bool read_strategy(job_info *ji, sc_job_spec *spec, const unsigned char *b, size_t len)
{
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    bool ok = msgpack_unpack_next(&up, (const char *)b, len, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP;
    const msgpack_object_map *m = ok ? &up.data.via.map : NULL;
    for (uint32_t i = 0; ok && i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        bool list = v->type == MSGPACK_OBJECT_ARRAY;
        if (sf_mp_streq(k, "names") && list && v->via.array.size >= 2 && v->via.array.size <= 64) {
            ji->nvariants = v->via.array.size;
            ji->vnames = calloc(ji->nvariants, sizeof *ji->vnames);
            if (ji->vnames == NULL)
                sf_oom(ji->nvariants * sizeof *ji->vnames);
            for (uint32_t n = 0; n < ji->nvariants; n++) {
                const msgpack_object *e = &v->via.array.ptr[n];
                if (e->type == MSGPACK_OBJECT_STR)
                    snprintf(ji->vnames[n], sizeof ji->vnames[n], "%.*s",
                        (int)(e->via.str.size > 64 ? 64 : e->via.str.size), e->via.str.ptr);
            }
        } else if (sf_mp_streq(k, "steps") && list && v->via.array.size >= 1) {
            ji->steps = calloc(v->via.array.size, sizeof *ji->steps);
            if (ji->steps == NULL)
                sf_oom(v->via.array.size * sizeof *ji->steps);
            for (uint32_t n = 0; n < v->via.array.size; n++)
                ji->steps[n] = v->via.array.ptr[n].type == MSGPACK_OBJECT_FLOAT64 ? v->via.array.ptr[n].via.f64 : 0;
        } else if (sf_mp_streq(k, "phase_items") && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            spec->phase_items = v->via.u64;
        } else if (sf_mp_streq(k, "growth") && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            spec->growth = (uint32_t)v->via.u64;
        } else if (sf_mp_streq(k, "keep") && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            spec->keep = (uint32_t)v->via.u64;
        } else if (sf_mp_streq(k, "minimize") && v->type == MSGPACK_OBJECT_BOOLEAN) {
            spec->minimize = v->via.boolean;
        } else if (sf_mp_streq(k, "z") && v->type == MSGPACK_OBJECT_FLOAT64) {
            spec->z = v->via.f64;
        }
    }
    msgpack_unpacked_destroy(&up);
    ok = ok && ji->nvariants >= 2 && (ji->strategy != SC_STAT_WEIGHTS || ji->steps != NULL);
    spec->strategy = ji->strategy;
    spec->variants = ji->nvariants;
    spec->steps = ji->steps;
    return ok;
}

static bool read_journal(sched *s, op *o);

/* Row of `SELECT id, kernel, items, seed, priority, tiers, params, ctx_hash,
 * owner, strategy, strategy_params, state`. */
static void start_job(sched *s, PGresult *res, int row)
{
    uint64_t id = strtoull(PQgetvalue(res, row, 0), NULL, 10);
    if (info_of(s, id) != NULL || s->njobs >= MAX_JOBS || is_gone(s, id))
        return;
    if (strcmp(PQgetvalue(res, row, 11), "pending") == 0) {
        /* every event of a job comes from this actor, in order: this first */
        char owner[300], kernel[80];
        emit(s, "job.submitted", id,
            sf_fmt("\"owner\":%s,\"kernel\":%s,\"strategy\":\"%s\",\"items\":%s,\"priority\":%s",
                cd_json_quote(owner, sizeof owner, PQgetvalue(res, row, 8)),
                cd_json_quote(kernel, sizeof kernel, PQgetvalue(res, row, 1)), PQgetvalue(res, row, 9),
                PQgetvalue(res, row, 2), PQgetvalue(res, row, 4)));
    }
    op tmp;
    memset(&tmp, 0, sizeof tmp);
    job_info *ji = &tmp.info;
    ji->id = id;
    snprintf(ji->kernel, sizeof ji->kernel, "%s", PQgetvalue(res, row, 1));
    ji->seed = strtoull(PQgetvalue(res, row, 3), NULL, 10);
    unsigned char *params = NULL, *hash = NULL;
    size_t plen = 0, hlen = 0;
    char err[256];
    sim_job *job = NULL;
    if (!unhex(PQgetvalue(res, row, 6), &params, &plen) || !unhex(PQgetvalue(res, row, 7), &hash, &hlen) ||
        hlen != 32) {
        fail_job(s, id, "its parameters or context hash do not decode");
        goto out;
    }
    memcpy(ji->ctx_hash, hash, 32);
    char kernel[32];
    msgpack_sbuffer kp;
    msgpack_sbuffer_init(&kp);
    if (sim_ctx_decode(params, plen, kernel, sizeof kernel, &ji->seed, &kp) != 0 || strcmp(kernel, ji->kernel) != 0) {
        msgpack_sbuffer_destroy(&kp);
        fail_job(s, id, "its work context does not decode");
        goto out;
    }
    int rc = sim_job_create(&job, ji->kernel, kp.data, kp.size, ji->seed, err, sizeof err);
    msgpack_sbuffer_destroy(&kp);
    if (rc != 0) {
        fail_job(s, id, err);
        goto out;
    }
    ji->nout = (uint32_t)sim_job_nout(job);
    for (uint32_t o = 0; o < ji->nout; o++) {
        snprintf(ji->names[o], sizeof ji->names[o], "%s", sim_job_output_name(job, o));
        tmp.layouts[o] = *sim_job_layout(job, (int)o);
    }
    tmp.spec = (sc_job_spec){
        .id = id,
        .strategy = SC_SINGLE,
        .items = strtoull(PQgetvalue(res, row, 2), NULL, 10),
        .priority = atoi(PQgetvalue(res, row, 4)),
        .tiers = (uint8_t)atoi(PQgetvalue(res, row, 5)),
        .nout = ji->nout,
        .samples_per_item = 1, /* output 0 holds one value per item (an antithetic pair is one) */
    };
    const char *strategy = PQgetvalue(res, row, 9);
    ji->strategy = strcmp(strategy, "tournament") == 0 ? SC_TOURNAMENT
        : strcmp(strategy, "stat_weights") == 0 ? SC_STAT_WEIGHTS : SC_SINGLE;
    if (ji->strategy != SC_SINGLE) {
        unsigned char *sp = NULL;
        size_t splen = 0;
        bool ok = !PQgetisnull(res, row, 10) && unhex(PQgetvalue(res, row, 10), &sp, &splen) &&
            read_strategy(ji, &tmp.spec, sp, splen);
        PQfreemem(sp);
        if (!ok) {
            job_info_free(ji);
            fail_job(s, id, "its strategy settings do not decode");
            goto out;
        }
    }
    if (ji->strategy != SC_TOURNAMENT)
        ji->has_ref = sim_job_reference(job, ji->ref);
    /* Owners take turns: a stable number from the owner's name. */
    const char *owner = PQgetvalue(res, row, 8);
    tmp.spec.owner = sf_fnv64(SF_FNV64_BASIS, owner, strlen(owner));
    memcpy(tmp.spec.ctx_hash, ji->ctx_hash, 32);

    read_journal(s, &tmp);
out:
    if (job != NULL)
        sim_job_destroy(job);
    PQfreemem(params);
    PQfreemem(hash);
}

static void free_records(op *o)
{
    for (size_t i = 0; i < o->nrecs; i++)
        PQfreemem((void *)o->recs[i].result);
    free(o->recs);
    o->recs = NULL;
    o->nrecs = o->recs_cap = 0;
}

/* Asks for the next page of the journal of the job o is loading (o is
 * copied into the request's op). A job's journal has a row per accepted
 * chunk, millions for a long job: read in pages, no one query holds it all
 * (or runs into the store's time limit) and a page that fails fails the
 * load alone. Returns false when the request could not be sent (o's
 * records are then freed, and a later load tries again). */
static bool read_journal(sched *s, op *o)
{
    cd_query *q = cd_query_new(
        "SELECT seq, type, variant, chunk, first_item, item_count, token, result, phase, state "
        "FROM journal WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3");
    cd_query_int(q, (int64_t)o->info.id);
    cd_query_int(q, o->after);
    cd_query_int(q, s->journal_page);
    int64_t req = rt_request(s->self, s->store, &q->hdr, DB_TIMEOUT_MS);
    if (req <= 0) {
        free_records(o);
        job_info_free(&o->info);
        return false;
    }
    op *n = op_add(s, req, OP_JOURNAL);
    *n = *o;
    n->req = req;
    n->kind = OP_JOURNAL;
    s->journals_pending++;
    return true;
}

/* Adds a page of the journal to o's records; returns its row count. */
static int add_records(op *o, PGresult *res)
{
    int n = PQntuples(res);
    for (int i = 0; i < n; i++) {
        if (o->nrecs == o->recs_cap)
            o->recs = sf_grow(o->recs, &o->recs_cap, sizeof *o->recs);
        sc_record *r = &o->recs[o->nrecs++];
        memset(r, 0, sizeof *r);
        o->after = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        r->job = o->info.id;
        r->type = (sc_record_type)atoi(PQgetvalue(res, i, 1));
        r->variant = (uint32_t)atoi(PQgetvalue(res, i, 2));
        r->chunk = strtoull(PQgetvalue(res, i, 3), NULL, 10);
        r->first = strtoull(PQgetvalue(res, i, 4), NULL, 10);
        r->count = strtoull(PQgetvalue(res, i, 5), NULL, 10);
        if (!PQgetisnull(res, i, 6)) {
            size_t len;
            unsigned char *t = PQunescapeBytea((const unsigned char *)PQgetvalue(res, i, 6), &len);
            if (t != NULL && len == 16)
                memcpy(r->token, t, 16);
            PQfreemem(t);
        }
        if (!PQgetisnull(res, i, 7))
            r->result = PQunescapeBytea((const unsigned char *)PQgetvalue(res, i, 7), &r->result_len);
        r->phase = (uint32_t)atoi(PQgetvalue(res, i, 8));
        r->state = (sc_job_state)atoi(PQgetvalue(res, i, 9));
    }
    return n;
}

/* Adds n (if any) to one of the counters of journal records at odds with
 * others and says so on stderr. */
static void count_conflicts(_Atomic uint64_t *counter, uint64_t n, const char *what)
{
    if (n == 0)
        return;
    sf_log(SF_LOG_INFO, "scheduler", "%" PRIu64 " %s", n, what);
    /* only this behaviour writes it; a reader prints it alone */
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n, memory_order_relaxed);
}

static void restore_job(sched *s, op *o)
{
    if (is_gone(s, o->info.id)) { /* cancelled during the load: its job.finished is sent */
        free_records(o);
        job_info_free(&o->info);
        return;
    }
    o->spec.layouts = o->layouts;
    int rc = sc_job_restore(s->l, &o->spec, o->recs, o->nrecs);
    int journaled = -1; /* the state of the journal's last JOB_END record */
    for (size_t i = 0; i < o->nrecs; i++)
        if (o->recs[i].type == SC_REC_JOB_END)
            journaled = (int)o->recs[i].state;
    free_records(o);
    if (rc != 0) {
        fail_job(s, o->info.id, sf_strerror(rc));
        job_info_free(&o->info);
        return;
    }
    if (s->njobs == s->jobs_cap)
        s->jobs = sf_grow(s->jobs, &s->jobs_cap, sizeof *s->jobs);
    s->jobs[s->njobs++] = o->info;
    sc_job_status st;
    sc_job_status_get(s->l, o->info.id, &st);
    if (st.records_skipped > 0) {
        char what[160];
        snprintf(what, sizeof what, "records of job %" PRIu64 "'s journal skipped: each overlaps another, and "
            "what only they covered is computed again", o->info.id);
        count_conflicts(&s->g.conflicts_restored, st.records_skipped, what);
    }
    if (st.state == SC_JOB_RUNNING) {
        emit(s, "job.started", o->info.id, NULL);
        s->jobs[s->njobs - 1].dirty = true;
        cd_query *u = cd_query_new(
            "UPDATE jobs SET state = 'running', started_at = coalesce(started_at, now()) WHERE id = $1 AND state = 'pending'");
        cd_query_int(u, (int64_t)o->info.id);
        write_query(s, u, -1, 0, 0);
    } else {
        /* It had ended before the crash, or its end's write was refused;
         * make the jobs row say so. An end the journal already records
         * (a refused write's) is not journaled again at every reload. */
        sc_record end = { .type = SC_REC_JOB_END, .job = o->info.id, .state = st.state };
        if (journaled == (int)st.state) {
            if (s->nreend == s->reend_cap)
                s->reend = sf_grow(s->reend, &s->reend_cap, sizeof *s->reend);
            s->reend[s->nreend++] = end;
        } else {
            journal_cb(s, &end);
        }
    }
    flush(s, NULL, 0, false);
    serve_parked(s, false); /* idle nodes start on it at once */
}

/* Whether the database is behind with the writes, though up: the store
 * holds its backlog's bound or more (which refuses nothing while the
 * database is up), or the oldest journal INSERT of ours in flight has
 * waited write_wait_ms (the oldest epoch not answered: epoch_done drops
 * the answered ones from the front). Says so when that changes. */
static bool writes_behind(sched *s, uint64_t now)
{
    cd_store_backlog b;
    cd_store_backlog_get(s->store, &b);
    uint64_t waited = s->nepochs > 0 ? now - s->epochs[s->epochs_head].sent_ms : 0;
    bool behind = b.bytes >= b.limit || waited >= s->write_wait_ms;
    if (behind && !s->behind)
        sf_log(SF_LOG_WARN, "scheduler", "the database is behind (a journal write waiting %" PRIu64 " ms, the "
            "store holding %" PRIu64 " of %" PRIu64 " bytes): no chunks handed out until it catches up", waited,
            b.bytes, b.limit);
    else if (!behind && s->behind)
        sf_log(SF_LOG_INFO, "scheduler", "the database caught up: chunks handed out again");
    s->behind = behind;
    return behind;
}

/* ---- replies from the store ---------------------------------------------------------- */

static void on_reply(sched *s, rt_msg *m)
{
    cd_result *r = m->type == CD_MSG_RESULT ? (cd_result *)m : NULL;
    const char *error = r == NULL ? "the database did not answer in time" : r->res == NULL ? r->error : NULL;
    wslot w;
    if (writes_take(s, (int64_t)m->req_id, &w)) {
        if (error != NULL)
            sf_log(SF_LOG_WARN, "scheduler", "write failed: %s", error);
        bool row = error == NULL && PQntuples(r->res) == 1 && PQnfields(r->res) == 1;
        if (row && w.epoch != 0) /* a journal INSERT: its rows at odds with the journal (journal.h) */
            count_conflicts(&s->g.conflicts_written, strtoull(PQgetvalue(r->res, 0, 0), NULL, 10),
                "journal rows not written: each repeats the first item of an accepted range with another count or "
                "result, and the row there stands");
        write_done(s, w, error == NULL, row ? PQgetvalue(r->res, 0, 0) : NULL);
        if (s->behind && !writes_behind(s, rt_mono_ms()))
            serve_parked(s, false); /* the claims that waited for the database */
        return;
    }
    op o;
    bool found = false;
    for (size_t i = 0; i < s->nops; i++)
        if (s->ops[i].req == (int64_t)m->req_id) {
            o = s->ops[i];
            s->ops[i] = s->ops[--s->nops];
            found = true;
            break;
        }
    if (!found)
        return;
    switch (o.kind) {
    case OP_LIST:
        if (error == NULL) {
            stop_unlisted(s, r->res);
            for (int i = 0; i < PQntuples(r->res); i++)
                start_job(s, r->res, i);
        } else
            sf_log(SF_LOG_WARN, "scheduler", "cannot list jobs: %s", error);
        load_done(s);
        break;
    case OP_JOURNAL:
        s->journals_pending--;
        if (error != NULL) {
            sf_log(SF_LOG_WARN, "scheduler", "cannot read job %" PRIu64 "'s journal: %s", o.info.id, error);
            free_records(&o);
            job_info_free(&o.info);
        } else if (add_records(&o, r->res) == (int)s->journal_page) {
            read_journal(s, &o); /* there may be more */
        } else {
            restore_job(s, &o);
        }
        load_done(s);
        break;
    }
}

/* ---- the actor ------------------------------------------------------------------------------ */

/* Answers a claim with what the ledger hands out; returns how many chunks. */
static unsigned answer_claim(sched *s, rt_msg *m, bool always, unsigned retry_ms)
{
    cd_claim *c = (cd_claim *)m;
    sc_claim_out out[CD_MAX_CLAIMS];
    unsigned n = 0;
    unsigned slots = c->slots > CD_MAX_CLAIMS ? CD_MAX_CLAIMS : c->slots;
    uint64_t now = rt_mono_ms();
    /* Nothing while the database is away: the results of chunks handed
     * out now could not be journaled, and would pile up in memory. Nothing
     * while it is there but behind: the journal's writes would pile up in
     * the store, without bound, and once the scheduler stopped waiting for
     * them (DB_TIMEOUT_MS) their nodes would be told stale and take more.
     * Nothing without the coordinator's lock: another coordinator may hold
     * it and hand out the same chunks. */
    if (s->db_up && !s->unlocked && !writes_behind(s, now))
        sc_claim(s->l, &c->node, slots, now, out, &n);
    if (n == 0 && !always)
        return 0;
    cd_claimed *r = RT_MSG_NEW(cd_claimed, CD_MSG_CLAIMED);
    r->retry_ms = retry_ms;
    for (unsigned i = 0; i < n; i++) {
        const job_info *ji = info_of(s, out[i].job);
        cd_assignment *a = &r->a[r->n++];
        a->claim = out[i];
        if (ji != NULL) {
            memcpy(a->kernel, ji->kernel, sizeof a->kernel);
            memcpy(a->ctx_hash, ji->ctx_hash, 32);
            a->seed = ji->seed;
        }
    }
    rt_reply(m, &r->hdr);
    return n;
}

/* A claim with nothing to hand out waits here for work (a new job, chunks
 * given back), so an idle node starts at once instead of polling. */
static void on_claim(rt_actor *self, sched *s, rt_msg *m)
{
    if (answer_claim(s, m, false, 0) > 0)
        return;
    if (s->nparked >= MAX_PARKED) {
        answer_claim(s, m, true, 1000);
        return;
    }
    rt_take(self, m);
    if (s->nparked == s->parked_cap)
        s->parked = sf_grow(s->parked, &s->parked_cap, sizeof *s->parked);
    s->parked[s->nparked++] = (parked){ m, rt_mono_ms() };
}

/* Work may have appeared: the waiting claims, oldest first, until one
 * finds nothing. With expire, those waiting for PARK_MS are answered
 * empty (the node asks again at once). */
static void serve_parked(sched *s, bool expire)
{
    uint64_t now = rt_mono_ms();
    size_t k = 0, i = 0;
    bool dry = false;
    for (; i < s->nparked; i++) {
        parked *p = &s->parked[i];
        if (!dry && answer_claim(s, p->claim, false, 0) > 0) {
            rt_msg_free(p->claim);
            continue;
        }
        dry = true;
        if (expire && now - p->since_ms >= PARK_MS) {
            answer_claim(s, p->claim, true, 0);
            rt_msg_free(p->claim);
            continue;
        }
        s->parked[k++] = *p;
    }
    s->nparked = k;
    flush(s, NULL, 0, false);
}

/* Takes out the waiting claims of one session (the sender of the claims),
 * answering them empty when the session is still there to hear it. Not by
 * node id: a node's new session may already wait while its old one ends. */
static void unpark_session(sched *s, const rt_actor *session, bool answer)
{
    size_t k = 0;
    for (size_t i = 0; i < s->nparked; i++) {
        rt_msg *c = s->parked[i].claim;
        if (session == NULL || c->sender != session) {
            s->parked[k++] = s->parked[i];
            continue;
        }
        if (answer)
            rt_reply(c, &RT_MSG_NEW(cd_claimed, CD_MSG_CLAIMED)->hdr);
        rt_msg_free(c);
    }
    s->nparked = k;
}

static void on_complete(rt_actor *self, sched *s, rt_msg *m)
{
    cd_complete *c = (cd_complete *)m;
    sc_outcome outcome = SC_STALE;
    bool done = false;
    size_t before = s->nout;
    int rc = sc_complete(s->l, c->job, c->chunk, c->token, c->node, c->result, c->len, rt_mono_ms(), &outcome, &done);
    if (rc == SC_ENOJOB) { /* ended and forgotten */
        reply_completed(m, 0, SC_STALE, false);
        return;
    }
    if (rc != 0) {
        reply_completed(m, rc, 0, false);
        flush(s, NULL, 0, false);
        return;
    }
    rt_take(self, m);
    if (outcome == SC_ACCEPTED) {
        job_info *ji = (job_info *)info_of(s, c->job);
        if (ji != NULL) {
            ji->dirty = true;
            /* the ACCEPT record this call added says how many items */
            for (size_t i = before; i < s->nout; i++)
                if (s->out[i].type == SC_REC_ACCEPT && s->out[i].job == c->job) {
                    contrib_add(ji, c->node, s->out[i].count);
                    break;
                }
        }
        flush(s, m, outcome, done); /* answered when its writes are committed */
        return;
    }
    flush(s, NULL, 0, false);
    reply_completed(m, 0, outcome, false);
    rt_msg_free(m);
}

static void behaviour(rt_actor *self, rt_msg *m)
{
    sched *s = rt_state(self);
    switch (m->type) {
    case CD_MSG_STORE_UP:
        s->db_up = true;
        load(s);
        serve_parked(s, false); /* the claims that waited out the outage */
        break;
    case CD_MSG_STORE_DOWN:
        s->db_up = false;
        break;
    case CD_MSG_LOCK_LOST:
        s->unlocked = true;
        break;
    case CD_MSG_LISTENING:
        load(s);
        if (s->unlocked) {
            s->unlocked = false;
            serve_parked(s, false);
        }
        break;
    case CD_MSG_NOTIFY:
    case M_SWEEP:
        load(s);
        break;
    case M_TICK: {
        if (sc_reclaim(s->l, rt_mono_ms()) > 0)
            claims_lost(s);
        sc_ledger_stats ls;
        sc_ledger_stats_get(s->l, &ls);
        atomic_store_explicit(&s->g.jobs, s->njobs, memory_order_relaxed);
        atomic_store_explicit(&s->g.claims, ls.live_claims, memory_order_relaxed);
        atomic_store_explicit(&s->g.expired, ls.expired, memory_order_relaxed);
        atomic_store_explicit(&s->g.released, ls.released, memory_order_relaxed);
        atomic_store_explicit(&s->g.given_back, ls.given_back, memory_order_relaxed);
        flush(s, NULL, 0, false);
        serve_parked(s, true);
        break;
    }
    case M_PROGRESS:
        on_progress_tick(s);
        break;
    case M_FLUSH:
        s->flush_queued = false;
        write_out(s);
        break;
    case CD_MSG_CLAIM:
        on_claim(self, s, m);
        break;
    case CD_MSG_WATCH: {
        cd_watch *w = (cd_watch *)m;
        if (s->watcher != NULL)
            rt_actor_release(s->watcher);
        s->watcher = w->who;
        w->who = NULL;
        break;
    }
    case CD_MSG_CANCEL_JOB:
        cancel_job(s, ((cd_cancel_job *)m)->job);
        break;
    case CD_MSG_COMPLETE:
        on_complete(self, s, m);
        break;
    case CD_MSG_RENEW: {
        cd_renew *r = (cd_renew *)m;
        sc_renew(s->l, r->node, (const uint8_t (*)[16])r->tokens, r->n > CD_MAX_RENEW ? CD_MAX_RENEW : r->n, rt_mono_ms());
        break;
    }
    case CD_MSG_GIVE_BACK: {
        cd_renew *r = (cd_renew *)m;
        if (sc_give_back(s->l, r->node, (const uint8_t (*)[16])r->tokens, r->n > CD_MAX_RENEW ? CD_MAX_RENEW : r->n,
                rt_mono_ms()) > 0) {
            claims_lost(s);
            serve_parked(s, false);
        }
        flush(s, NULL, 0, false);
        break;
    }
    case CD_MSG_WITHDRAW:
        unpark_session(s, m->sender, true);
        break;
    case CD_MSG_NODE_GONE: {
        cd_node_gone *g = (cd_node_gone *)m;
        unpark_session(s, m->sender, false);
        if (sc_release_node(s->l, g->node, g->session, rt_mono_ms()) > 0) {
            claims_lost(s);
            serve_parked(s, false);
        }
        flush(s, NULL, 0, false);
        break;
    }
    case CD_MSG_RESULT:
    case RT_MSG_TIMEOUT:
        on_reply(s, m);
        break;
    default:
        break;
    }
}

static void random_cb(void *ctx, void *buf, size_t n)
{
    (void)ctx;
    randombytes_buf(buf, n);
}

static void finalize(rt_actor *self)
{
    sched *s = rt_state(self);
    for (size_t i = 0; i < s->nbarriers; i++) {
        for (size_t k = 0; k < s->barriers[i].nwaiters; k++)
            rt_msg_free(s->barriers[i].waiters[k].completion);
        free(s->barriers[i].waiters);
    }
    free(s->barriers);
    for (size_t i = 0; i < s->nwaiting; i++)
        rt_msg_free(s->waiting[i].completion);
    free(s->waiting);
    for (size_t i = 0; i < s->nout; i++)
        free((void *)s->out[i].result);
    free(s->out);
    free(s->reend);
    for (size_t i = 0; i < s->nops; i++)
        if (s->ops[i].kind == OP_JOURNAL) { /* a load cut short */
            free_records(&s->ops[i]);
            job_info_free(&s->ops[i].info);
        }
    free(s->ops);
    for (size_t i = 0; i < s->njobs; i++)
        job_info_free(&s->jobs[i]);
    free(s->jobs);
    free(s->gone);
    free(s->bfree);
    free(s->writes);
    for (size_t i = 0; i < s->nepochs; i++) {
        epoch *p = &s->epochs[s->epochs_head + i];
        for (size_t k = 0; k < p->nends; k++)
            rt_msg_free(&p->ends[k].update->hdr);
        free(p->ends);
    }
    free(s->epochs);
    for (size_t i = 0; i < s->nending; i++)
        free(s->ending[i].result);
    free(s->ending);
    free(s->cancel_due);
    free(s->told);
    for (size_t i = 0; i < s->nparked; i++)
        rt_msg_free(s->parked[i].claim);
    free(s->parked);
    sc_ledger_destroy(s->l);
    rt_actor_release(s->store);
    if (s->watcher != NULL)
        rt_actor_release(s->watcher);
}

static void watch_release(rt_msg *m)
{
    cd_watch *w = (cd_watch *)m;
    if (w->who != NULL)
        rt_actor_release(w->who);
}

void cd_scheduler_watch(rt_actor *scheduler, rt_actor *who)
{
    cd_watch *w = RT_MSG_NEW(cd_watch, CD_MSG_WATCH);
    w->who = rt_actor_retain(who);
    w->hdr.release = watch_release;
    rt_send(scheduler, &w->hdr);
}

void cd_scheduler_stats_get(rt_actor *scheduler, cd_scheduler_stats *out)
{
    sched *s = rt_state(scheduler);
    out->jobs = atomic_load_explicit(&s->g.jobs, memory_order_relaxed);
    out->claims = atomic_load_explicit(&s->g.claims, memory_order_relaxed);
    out->expired = atomic_load_explicit(&s->g.expired, memory_order_relaxed);
    out->released = atomic_load_explicit(&s->g.released, memory_order_relaxed);
    out->given_back = atomic_load_explicit(&s->g.given_back, memory_order_relaxed);
    out->conflicts_written = atomic_load_explicit(&s->g.conflicts_written, memory_order_relaxed);
    out->conflicts_restored = atomic_load_explicit(&s->g.conflicts_restored, memory_order_relaxed);
}

rt_actor *cd_scheduler_spawn(rt_system *sys, const cd_scheduler_opts *opts)
{
    if (opts == NULL || opts->store == NULL || sodium_init() < 0)
        return NULL;
    rt_actor_opts o = { .state_size = sizeof(sched), .finalize = finalize, .name = "scheduler" };
    rt_actor *a = rt_spawn(sys, behaviour, &o);
    if (a == NULL)
        return NULL;
    sched *s = rt_state(a);
    s->self = a;
    s->store = rt_actor_retain(opts->store);
    s->sweep_ms = opts->sweep_ms ? opts->sweep_ms : 5000;
    s->journal_page = opts->journal_page ? opts->journal_page : JOURNAL_PAGE;
    s->write_wait_ms = opts->write_wait_ms ? opts->write_wait_ms : WRITE_WAIT_MS;
    s->epoch_first = 1; /* 0 stands for none */
    sc_config cfg = opts->ledger;
    cfg.journal = journal_cb;
    cfg.journal_ctx = s;
    cfg.random = random_cb;
    s->l = sc_ledger_create(&cfg);
    rt_send_every(a, 1000, M_TICK, 0);
    rt_send_every(a, s->sweep_ms, M_SWEEP, 0);
    rt_send_every(a, PROGRESS_MS, M_PROGRESS, 0);
    cd_store_subscribe(opts->store, a);
    return a;
}
