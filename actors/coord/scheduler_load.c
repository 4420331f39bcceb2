/*
 * scheduler_load.c — loading jobs into the scheduler: the list of jobs
 * pending or running, then each new job's row and journal, then
 * sc_job_restore. A job's journal is read in pages; a job that cannot run
 * (its parameters do not decode, its journal does not fit it) is failed
 * with the reason in its result.
 */
#include "actors/coord/scheduler_int.h"

#include "base/alloc.h"
#include "base/fnv.h"
#include "base/json.h"
#include "base/log.h"
#include "sim/ctx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIST_MAX 4096             /* jobs one load lists, by id */
#define STR_(x) #x
#define STR(x) STR_(x)
enum { MAX_JOBS = 4096 };

/* ---- rows, read by column name -------------------------------------------------------- */

/* One row of the load's list, borrowed from its PGresult: the text the
 * job.submitted event repeats and what restoring the job needs. */
typedef struct job_row {
    uint64_t id, seed;
    const char *kernel, *owner, *strategy, *state;
    const char *items, *priority, *tiers, *trusted_tiers, *check_rate; /* decimal text */
    const char *params, *ctx_hash;        /* bytea text */
    const char *strategy_params;          /* bytea text, or NULL */
    double started_s;                     /* jobs.started_at in Unix seconds; 0: not started */
} job_row;

/* The columns each query names, by name: a row is read by the numbers
 * PQfnumber gives for these, never by position. */
#define JOB_COLS(X)                                                                             \
    X(id) X(kernel) X(items) X(seed) X(priority) X(tiers) X(params) X(ctx_hash) X(owner)        \
    X(strategy) X(strategy_params) X(state) X(trusted_tiers) X(check_rate) X(started_s)
#define JOURNAL_COLS(X)                                                                         \
    X(seq) X(type) X(variant) X(chunk) X(first_item) X(item_count) X(token) X(result) X(phase)  \
    X(state) X(node_id) X(peer_id) X(checked) X(node_owner) X(node_tier) X(node_quarantined)

#define JOB_COL(c) JC_##c,
#define JOURNAL_COL(c) JR_##c,
#define COL_NAME(c) #c,
enum job_col { JOB_COLS(JOB_COL) JOB_NCOLS };
enum journal_col { JOURNAL_COLS(JOURNAL_COL) JOURNAL_NCOLS };
static const char *const job_col_names[JOB_NCOLS] = { JOB_COLS(COL_NAME) };
static const char *const journal_col_names[JOURNAL_NCOLS] = { JOURNAL_COLS(COL_NAME) };

/* The numbers in res of the columns names[0 .. n) into col; false (with
 * the first missing name in *missing) when one is not there. */
static bool find_cols(const PGresult *res, const char *const *names, size_t n, int *col, const char **missing)
{
    for (size_t i = 0; i < n; i++)
        if ((col[i] = PQfnumber(res, names[i])) < 0) {
            *missing = names[i];
            return false;
        }
    return true;
}

static job_row read_job_row(const PGresult *res, const int *c, int row)
{
    return (job_row){
        .id = strtoull(PQgetvalue(res, row, c[JC_id]), NULL, 10),
        .seed = strtoull(PQgetvalue(res, row, c[JC_seed]), NULL, 10),
        .kernel = PQgetvalue(res, row, c[JC_kernel]),
        .owner = PQgetvalue(res, row, c[JC_owner]),
        .strategy = PQgetvalue(res, row, c[JC_strategy]),
        .state = PQgetvalue(res, row, c[JC_state]),
        .items = PQgetvalue(res, row, c[JC_items]),
        .priority = PQgetvalue(res, row, c[JC_priority]),
        .tiers = PQgetvalue(res, row, c[JC_tiers]),
        .trusted_tiers = PQgetvalue(res, row, c[JC_trusted_tiers]),
        .check_rate = PQgetvalue(res, row, c[JC_check_rate]),
        .params = PQgetvalue(res, row, c[JC_params]),
        .ctx_hash = PQgetvalue(res, row, c[JC_ctx_hash]),
        .strategy_params = PQgetisnull(res, row, c[JC_strategy_params]) ? NULL
                                                                     : PQgetvalue(res, row, c[JC_strategy_params]),
        .started_s = strtod(PQgetvalue(res, row, c[JC_started_s]), NULL),
    };
}

/* ---- the list ---------------------------------------------------------------------------- */

static cd__op *op_add(cd__sched *s, int64_t req, cd__op_kind kind)
{
    if (s->nops == s->ops_cap)
        s->ops = sf_grow(s->ops, &s->ops_cap, sizeof *s->ops);
    cd__op *o = &s->ops[s->nops++];
    memset(o, 0, sizeof *o);
    o->req = req;
    o->kind = kind;
    return o;
}

void cd__load(cd__sched *s)
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
        "SELECT id, kernel, items, seed, priority, tiers, params, ctx_hash, owner, strategy, strategy_params, state, "
        "trusted_tiers, check_rate, extract(epoch FROM started_at)::float8 AS started_s FROM jobs "
        "WHERE state IN ('pending', 'running') ORDER BY id LIMIT " STR(LIST_MAX));
    int64_t req = rt_request(s->self, s->store, &q->hdr, CD__DB_TIMEOUT_MS);
    if (req > 0)
        op_add(s, req, CD__OP_LIST);
    else
        s->loading = false;
}

static bool unhex(const char *text, unsigned char **out, size_t *len)
{
    *out = PQunescapeBytea((const unsigned char *)text, len);
    return *out != NULL;
}

static void fail_job(cd__sched *s, uint64_t id, const char *why)
{
    char fields[48];
    snprintf(fields, sizeof fields, "\"job\":%" PRIu64, id);
    sf_logf(SF_LOG_WARN, "scheduler", fields, "job %" PRIu64 " cannot run: %s", id, why);
    char *msg = cd__error_json(why);
    cd_query *u = cd_query_new(
        /* a cancel the API committed first keeps its state, as a job's end does */
        "UPDATE jobs SET state = CASE WHEN state IN ('pending', 'running') THEN 'failed' ELSE state END, "
        "result = $2::jsonb, finished_at = coalesce(finished_at, now()) WHERE id = $1 RETURNING state");
    u->group = true; /* never refused by the backlog bound: at most one per job */
    cd_query_int(u, (int64_t)id);
    cd_query_text(u, msg);
    cd__ending_add(s, id, "failed", msg);
    cd__gone_add(s, id, false);
    cd__write_query(s, u, -1, id, 0);
}

/* Whether job id is one of a load's list (rows[0 .. n), in id order). */
static bool listed(const job_row *rows, size_t n, uint64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rows[mid].id == id)
            return true;
        if (rows[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Jobs running here whose rows a load's list (rows[0 .. n), by id) no
 * longer shows pending or running were stopped by the API without the
 * scheduler being told: a cancel whose UPDATE committed after the API had
 * stopped waiting for it (and answered 503). They stop here too. */
static void stop_unlisted(cd__sched *s, const job_row *rows, size_t n)
{
    /* a full list covers the ids up to its last only */
    uint64_t last = n == LIST_MAX ? rows[n - 1].id : UINT64_MAX;
    uint64_t *stop = NULL;
    size_t nstop = 0, cap = 0;
    for (size_t i = 0; i < s->njobs; i++) {
        uint64_t id = s->jobs[i].id;
        if (id > last || listed(rows, n, id))
            continue;
        if (nstop == cap)
            stop = sf_grow(stop, &cap, sizeof *stop);
        stop[nstop++] = id;
    }
    for (size_t i = 0; i < nstop; i++) { /* cancelling may let a job go from s->jobs */
        char fields[48];
        snprintf(fields, sizeof fields, "\"job\":%" PRIu64, stop[i]);
        sf_logf(SF_LOG_WARN, "scheduler", fields, "job %" PRIu64 " was stopped outside the scheduler: stopping it", stop[i]);
        cd__cancel_job(s, stop[i]);
    }
    free(stop);
    /* a refused end whose row is no longer running (the API cancelled
     * it) will not be written: its job need not be remembered */
    for (size_t i = 0; i < s->ntold;) {
        uint64_t id = s->told[i].job;
        if (id <= last && !listed(rows, n, id) && cd__ending_of(s, id) == NULL)
            s->told[i] = s->told[--s->ntold];
        else
            i++;
    }
}

static void load_done(cd__sched *s)
{
    if (s->journals_pending > 0)
        return;
    s->loading = false;
    cd__gone_load_done(s);
    cd__cancels_expire(s, rt_mono_ms());
    if (s->load_again)
        cd__load(s);
}

/* ---- a job's row --------------------------------------------------------------------------- */

/* A tournament's or stat_weights' settings (jobs.strategy_params, written
 * by actors/coord/jobs.c) into the spec and the job's names. */
static bool read_strategy(cd__job_info *ji, sc_job_spec *spec, const unsigned char *b, size_t len)
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
            ji->vnames = sf_calloc(ji->nvariants, sizeof *ji->vnames);
            for (uint32_t n = 0; n < ji->nvariants; n++) {
                const msgpack_object *e = &v->via.array.ptr[n];
                if (e->type == MSGPACK_OBJECT_STR)
                    snprintf(ji->vnames[n], sizeof ji->vnames[n], "%.*s",
                        (int)(e->via.str.size > 64 ? 64 : e->via.str.size), e->via.str.ptr);
            }
        } else if (sf_mp_streq(k, "steps") && list && v->via.array.size >= 1) {
            ji->steps = sf_calloc(v->via.array.size, sizeof *ji->steps);
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

static bool read_journal(cd__sched *s, cd__op *o);

/* Takes up the job of row r, unless it is held already or must be skipped:
 * decodes its work, then reads its journal. */
static void start_job(cd__sched *s, const job_row *r)
{
    uint64_t id = r->id;
    if (cd__job_info_of(s, id) != NULL || cd__gone_is(s, id))
        return;
    if (s->njobs >= MAX_JOBS) {
        s->list_left++; /* pending, for /metrics, until a later load takes it in */
        return;
    }
    if (strcmp(r->state, "pending") == 0) /* every event of a job comes from this actor, in order: this first */
        cd__emit(s, "job.submitted", id, cd__submitted_json(r->owner, r->kernel, r->strategy, r->items, r->priority));
    cd__op tmp;
    memset(&tmp, 0, sizeof tmp);
    cd__job_info *ji = &tmp.info;
    ji->id = id;
    snprintf(ji->kernel, sizeof ji->kernel, "%s", r->kernel);
    ji->items = strtoull(r->items, NULL, 10);
    if ((ji->started_s = r->started_s) <= 0) { /* started now: the restore's UPDATE sets started_at */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        ji->started_s = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    }
    ji->seed = r->seed;
    unsigned char *params = NULL, *hash = NULL;
    size_t plen = 0, hlen = 0;
    char err[256];
    sim_job *job = NULL;
    if (!unhex(r->params, &params, &plen) || !unhex(r->ctx_hash, &hash, &hlen) || hlen != 32) {
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
        .items = strtoull(r->items, NULL, 10),
        .priority = atoi(r->priority),
        .tiers = (uint8_t)atoi(r->tiers),
        /* both held in range by the table's checks (sql/008) */
        .trusted_tiers = (uint8_t)atoi(r->trusted_tiers),
        .check_rate = strtod(r->check_rate, NULL),
        .nout = ji->nout,
        .samples_per_item = 1, /* output 0 holds one value per item (an antithetic pair is one) */
    };
    ji->tiers = tmp.spec.tiers;
    ji->strategy = strcmp(r->strategy, "tournament") == 0 ? SC_TOURNAMENT
        : strcmp(r->strategy, "stat_weights") == 0 ? SC_STAT_WEIGHTS : SC_SINGLE;
    if (ji->strategy != SC_SINGLE) {
        unsigned char *sp = NULL;
        size_t splen = 0;
        bool ok = r->strategy_params != NULL && unhex(r->strategy_params, &sp, &splen) &&
            read_strategy(ji, &tmp.spec, sp, splen);
        PQfreemem(sp);
        if (!ok) {
            cd__job_info_free(ji);
            fail_job(s, id, "its strategy settings do not decode");
            goto out;
        }
    }
    if (ji->strategy != SC_TOURNAMENT)
        ji->has_ref = sim_job_reference(job, ji->ref);
    /* Owners take turns: a stable number from the owner's name. */
    tmp.spec.owner = sf_fnv64(SF_FNV64_BASIS, r->owner, strlen(r->owner));
    memcpy(tmp.spec.ctx_hash, ji->ctx_hash, 32);

    read_journal(s, &tmp);
out:
    if (job != NULL)
        sim_job_destroy(job);
    PQfreemem(params);
    PQfreemem(hash);
}

/* The load's list answered: jobs no longer listed stop, new ones start. */
static void on_list(cd__sched *s, const PGresult *res)
{
    int c[JOB_NCOLS];
    const char *missing = NULL;
    if (!find_cols(res, job_col_names, JOB_NCOLS, c, &missing)) {
        sf_log(SF_LOG_WARN, "scheduler", "cannot list jobs: the answer has no column %s", missing);
        return;
    }
    size_t n = (size_t)PQntuples(res);
    job_row *rows = sf_calloc(n, sizeof *rows);
    for (size_t i = 0; i < n; i++)
        rows[i] = read_job_row(res, c, (int)i);
    stop_unlisted(s, rows, n);
    s->list_left = 0;
    for (size_t i = 0; i < n; i++)
        start_job(s, &rows[i]);
    free(rows);
}

/* ---- a job's journal ---------------------------------------------------------------------- */

static void free_records(cd__op *o)
{
    for (size_t i = 0; i < o->nrecs; i++)
        PQfreemem((void *)o->recs[i].result);
    free(o->recs);
    o->recs = NULL;
    o->nrecs = o->recs_cap = 0;
}

/* A load of o's job given up: what it holds is freed. */
static void op_drop(cd__op *o)
{
    free_records(o);
    cd__job_info_free(&o->info);
}

/* Asks for the next page of the journal of the job o is loading (o is
 * copied into the request's op). A job's journal has a row per accepted
 * chunk, millions for a long job: read in pages, no one query holds it all
 * (or runs into the store's time limit) and a page that fails fails the
 * load alone. Returns false when the request could not be sent (o's
 * records are then freed, and a later load tries again). */
static bool read_journal(cd__sched *s, cd__op *o)
{
    cd_query *q = cd_query_new(
        "SELECT j.seq, j.type, j.variant, j.chunk, j.first_item, j.item_count, j.token, j.result, j.phase, "
        "j.state, j.node_id, j.peer_id, j.checked, n.owner AS node_owner, n.tier AS node_tier, "
        "n.quarantined_at IS NOT NULL AS node_quarantined "
        "FROM journal j LEFT JOIN nodes n ON n.id = j.node_id "
        "WHERE j.job_id = $1 AND j.seq > $2 ORDER BY j.seq LIMIT $3");
    cd_query_int(q, (int64_t)o->info.id);
    cd_query_int(q, o->after);
    cd_query_int(q, s->journal_page);
    int64_t req = rt_request(s->self, s->store, &q->hdr, CD__DB_TIMEOUT_MS);
    if (req <= 0) {
        op_drop(o);
        return false;
    }
    cd__op *n = op_add(s, req, CD__OP_JOURNAL);
    *n = *o;
    n->req = req;
    n->kind = CD__OP_JOURNAL;
    s->journals_pending++;
    return true;
}

/* Adds a page of the journal to o's records; returns its row count, or -1
 * (with the missing column's name in *missing) when its columns are not
 * the journal's. */
static int add_records(cd__sched *s, cd__op *o, const PGresult *res, const char **missing)
{
    int c[JOURNAL_NCOLS];
    if (!find_cols(res, journal_col_names, JOURNAL_NCOLS, c, missing))
        return -1;
    int n = PQntuples(res);
    for (int i = 0; i < n; i++) {
        if (o->nrecs == o->recs_cap)
            o->recs = sf_grow(o->recs, &o->recs_cap, sizeof *o->recs);
        sc_record *r = &o->recs[o->nrecs++];
        memset(r, 0, sizeof *r);
        o->after = strtoll(PQgetvalue(res, i, c[JR_seq]), NULL, 10);
        r->job = o->info.id;
        r->type = (sc_record_type)atoi(PQgetvalue(res, i, c[JR_type]));
        r->variant = (uint32_t)atoi(PQgetvalue(res, i, c[JR_variant]));
        r->chunk = strtoull(PQgetvalue(res, i, c[JR_chunk]), NULL, 10);
        r->first = strtoull(PQgetvalue(res, i, c[JR_first_item]), NULL, 10);
        r->count = strtoull(PQgetvalue(res, i, c[JR_item_count]), NULL, 10);
        if (!PQgetisnull(res, i, c[JR_token])) {
            size_t len;
            unsigned char *t = PQunescapeBytea((const unsigned char *)PQgetvalue(res, i, c[JR_token]), &len);
            if (t != NULL && len == 16)
                memcpy(r->token, t, 16);
            PQfreemem(t);
        }
        if (!PQgetisnull(res, i, c[JR_result]))
            r->result = PQunescapeBytea((const unsigned char *)PQgetvalue(res, i, c[JR_result]), &r->result_len);
        r->phase = (uint32_t)atoi(PQgetvalue(res, i, c[JR_phase]));
        r->state = (sc_job_state)atoi(PQgetvalue(res, i, c[JR_state]));
        r->node = strtoull(PQgetvalue(res, i, c[JR_node_id]), NULL, 10);
        r->peer = strtoull(PQgetvalue(res, i, c[JR_peer_id]), NULL, 10);
        r->check = PQgetvalue(res, i, c[JR_checked])[0] == 't';
        r->owner = cd_owner_hash(PQgetvalue(res, i, c[JR_node_owner]));
        r->tier = cd_tier_bit(PQgetvalue(res, i, c[JR_node_tier]));
        /* a quarantine this journal does not record (its node was caught
         * in another job): the restore leaves its results out too */
        if (r->node != 0 && PQgetvalue(res, i, c[JR_node_quarantined])[0] == 't')
            sc_node_quarantine(s->l, r->node, rt_mono_ms(), false);
    }
    return n;
}

/* ---- restore ------------------------------------------------------------------------------ */

static void restore_job(cd__sched *s, cd__op *o)
{
    if (cd__gone_is(s, o->info.id)) { /* cancelled during the load: its job.finished is sent */
        op_drop(o);
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
        cd__job_info_free(&o->info);
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
        cd__count_conflicts(&s->g.conflicts_restored, st.records_skipped, what);
    }
    if (st.state == SC_JOB_RUNNING) {
        cd__emit(s, "job.started", o->info.id, NULL);
        s->jobs[s->njobs - 1].dirty = true;
        cd_query *u = cd_query_new(
            "UPDATE jobs SET state = 'running', started_at = coalesce(started_at, now()) WHERE id = $1 AND state = 'pending'");
        cd_query_int(u, (int64_t)o->info.id);
        cd__write_query(s, u, -1, 0, 0);
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
            cd__journal_cb(s, &end);
        }
    }
    cd__flush(s, NULL, 0, false);
    cd__serve_parked(s, false); /* idle nodes start on it at once */
}

/* ---- the store's answers ------------------------------------------------------------------ */

void cd__load_answer(cd__sched *s, rt_msg *m, const char *error)
{
    cd__op o;
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
    const PGresult *res = error == NULL ? ((cd_result *)m)->res : NULL;
    switch (o.kind) {
    case CD__OP_LIST:
        if (error == NULL)
            on_list(s, res);
        else
            sf_log(SF_LOG_WARN, "scheduler", "cannot list jobs: %s", error);
        load_done(s);
        break;
    case CD__OP_JOURNAL: {
        s->journals_pending--;
        const char *missing = NULL;
        int n = error == NULL ? add_records(s, &o, res, &missing) : -1;
        if (error != NULL || n < 0) {
            if (error != NULL)
                sf_log(SF_LOG_WARN, "scheduler", "cannot read job %" PRIu64 "'s journal: %s", o.info.id, error);
            else
                sf_log(SF_LOG_WARN, "scheduler", "cannot read job %" PRIu64 "'s journal: the answer has no column %s",
                    o.info.id, missing);
            op_drop(&o);
        } else if (n == (int)s->journal_page) {
            read_journal(s, &o); /* there may be more */
        } else {
            restore_job(s, &o);
        }
        load_done(s);
        break;
    }
    }
}

void cd__load_free(cd__sched *s)
{
    for (size_t i = 0; i < s->nops; i++)
        if (s->ops[i].kind == CD__OP_JOURNAL) /* a load cut short */
            op_drop(&s->ops[i]);
    free(s->ops);
}
