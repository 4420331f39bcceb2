/*
 * scheduler_check.c — the scheduler actor with the store and a real
 * PostgreSQL (argv[1]); the examples/ directory is argv[2]. This program
 * plays the node: it claims chunks, computes them with the real kernel and
 * completes them. A finished job's result must equal one local run over all
 * its items, bit for bit, also when the coordinator restarts mid-job.
 */
#include "actors/coord/jobs.h"
#include "actors/coord/scheduler.h"
#include "actors/coord/store.h"
#include "sim/ctx.h"
#include "sim/sim.h"
#include "base/json.h"
#include "tests/support/check.h"
#include "tests/support/proxy.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *conninfo;
static char params_json[4096];
static rt_system *sys;
static rt_actor *store, *scheduler;
static uint64_t watched_job; /* claim() counts the chunks of it offered for another job */
static int watched_offers;
static uint64_t farm_backlog_bytes, farm_write_wait_ms; /* the next farm's; 0: the defaults */

/* sweep_ms: how often the scheduler looks for jobs it was not told of;
 * min_lease_ms: the shortest lease on a claim */
static void start_farm(uint64_t sweep_ms, uint64_t min_lease_ms)
{
    rt_actor *proxy = proxy_start(&sys);
    cd_store_opts so = { .conninfo = conninfo, .connections = 2, .listen = "pending_job", .notify_to = proxy,
        .backlog_bytes = farm_backlog_bytes };
    store = cd_store_spawn(sys, &so);
    cd_scheduler_opts co = {
        .store = store,
        .ledger = { .target_chunk_ms = 1000, .min_chunk = 1000, .max_chunk = 7000, .min_lease_ms = min_lease_ms },
        .sweep_ms = sweep_ms,
        .journal_page = 3, /* a restored job's journal in several pages */
        .write_wait_ms = farm_write_wait_ms,
    };
    scheduler = cd_scheduler_spawn(sys, &co);
    cd_scheduler_watch(scheduler, proxy);
    proxy_run(sys);
}

static void stop_farm(void)
{
    rt_actor_release(scheduler);
    rt_actor_release(store);
    proxy_stop(sys);
}

static cd_result *sql(cd_query *q)
{
    rt_msg *r = proxy_call(store, &q->hdr, 20000);
    if (r != NULL && r->type != CD_MSG_RESULT) {
        rt_msg_free(r);
        return NULL;
    }
    return (cd_result *)r;
}

/* The INSERT of an option job, RETURNING its id; NULL if the parameters
 * do not encode. */
static cd_query *job_insert(uint64_t items, uint64_t seed)
{
    msgpack_sbuffer mp;
    char err[128];
    unsigned char hash[32];
    msgpack_sbuffer_init(&mp);
    if (sf_json_to_msgpack(params_json, strlen(params_json), &mp, err, sizeof err) != 0) {
        msgpack_sbuffer_destroy(&mp);
        return NULL;
    }
    msgpack_sbuffer ctx;
    msgpack_sbuffer_init(&ctx);
    sim_ctx_encode(&ctx, "option", seed, mp.data, mp.size);
    crypto_hash_sha256(hash, (const unsigned char *)ctx.data, ctx.size);
    cd_query *q = cd_query_new("INSERT INTO jobs (owner, kernel, strategy, items, seed, spec, params, ctx_hash) "
                               "VALUES ('test', 'option', 'single', $1, $2, '{}', $3, $4) RETURNING id");
    cd_query_int(q, (int64_t)items);
    cd_query_int(q, (int64_t)seed);
    cd_query_bytes(q, ctx.data, ctx.size);
    cd_query_bytes(q, hash, 32);
    msgpack_sbuffer_destroy(&ctx);
    msgpack_sbuffer_destroy(&mp);
    return q;
}

static uint64_t result_id(const cd_result *r)
{
    return r != NULL && r->res != NULL && PQntuples(r->res) == 1 ? strtoull(PQgetvalue(r->res, 0, 0), NULL, 10) : 0;
}

/* Inserts an option job; returns its id, or 0. */
static uint64_t insert_job(uint64_t items, uint64_t seed)
{
    cd_query *q = job_insert(items, seed);
    if (q == NULL)
        return 0;
    cd_result *r = sql(q);
    uint64_t id = result_id(r);
    rt_msg_free(r ? &r->hdr : NULL);
    return id;
}

/* The nodes this program plays (ids 1 to 8) as rows of nodes: the journal
 * records which node computed each accepted range (journal.node_id, a key
 * of nodes), as the coordinator's enrolled nodes always have one. Returns
 * whether the rows are there. */
static bool add_nodes(void)
{
    cd_result *r = sql(cd_query_new("INSERT INTO nodes (id, public_key, owner, tier) "
                                    "SELECT i, decode(lpad(to_hex(i), 64, '0'), 'hex'), 'test', 'own' "
                                    "FROM generate_series(1, 8) i ON CONFLICT DO NOTHING"));
    bool ok = r != NULL && r->code == 0;
    rt_msg_free(r ? &r->hdr : NULL);
    return ok;
}

static sim_job *local_job(uint64_t seed)
{
    msgpack_sbuffer mp;
    char err[128];
    sim_job *job = NULL;
    msgpack_sbuffer_init(&mp);
    sf_json_to_msgpack(params_json, strlen(params_json), &mp, err, sizeof err);
    sim_job_create(&job, "option", mp.data, mp.size, seed, err, sizeof err);
    msgpack_sbuffer_destroy(&mp);
    return job;
}

/* One claim of up to `slots` chunks (answered empty after a while when
 * there is no work); returns how many are of job (of any job when job is
 * 0), copied to out unless it is NULL. */
static unsigned claim_once(uint64_t node, unsigned slots, cd_assignment *out, uint64_t job)
{
    cd_claim *c = RT_MSG_NEW(cd_claim, CD_MSG_CLAIM);
    c->node = (sc_node_info){ .id = node, .tier = SC_TIER_OWN, .items_per_s = 1e6 };
    c->slots = slots;
    cd_claimed *r = (cd_claimed *)proxy_call(scheduler, &c->hdr, 10000);
    unsigned n = 0;
    if (r != NULL && r->hdr.type == CD_MSG_CLAIMED)
        for (unsigned i = 0; i < r->n; i++) {
            if (job == 0 || r->a[i].claim.job == job) {
                if (out != NULL)
                    out[n] = r->a[i];
                n++;
            } else if (watched_job != 0 && r->a[i].claim.job == watched_job) {
                watched_offers++;
            }
        }
    rt_msg_free(r ? &r->hdr : NULL);
    return n;
}

/* Claims up to `slots` chunks of job; waits (deadline) until the scheduler
 * has loaded it. */
static unsigned claim(uint64_t node, unsigned slots, cd_assignment *out, uint64_t job)
{
    struct timespec t0, now, pause = { 0, 5000000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        unsigned n = claim_once(node, slots, out, job);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (n > 0 || now.tv_sec - t0.tv_sec > PROXY_DEADLINE_S)
            return n;
        nanosleep(&pause, NULL); /* the job is loading: ask again, up to the deadline */
    }
}

static size_t compute(sim_job *job, const cd_assignment *a, unsigned char *buf, size_t cap)
{
    sim_stats out[SIM_MAX_OUT];
    size_t len = 0;
    if (sim_run_cpu(job, a->claim.first, a->claim.count, out) != 0 ||
        sc_result_encode(out, (uint32_t)sim_job_nout(job), buf, cap, &len) != 0)
        return 0;
    return len;
}

static cd_completed *complete(const cd_assignment *a, uint64_t node, const unsigned char *buf, size_t len)
{
    cd_complete *c = cd_complete_new(a->claim.job, a->claim.chunk, a->claim.token, node, buf, len);
    rt_msg *r = proxy_call(scheduler, &c->hdr, 20000);
    if (r != NULL && r->type != CD_MSG_COMPLETED) {
        rt_msg_free(r);
        return NULL;
    }
    return (cd_completed *)r;
}

/* The message the API sends the scheduler once its cancel of job is
 * committed. */
static void api_cancel(uint64_t job)
{
    cd_cancel_job *cancel = RT_MSG_NEW(cd_cancel_job, CD_MSG_CANCEL_JOB);
    cancel->job = job;
    rt_send(scheduler, &cancel->hdr);
}

/* Completes chunks of job until it is done or `max` chunks; returns the
 * chunks accepted, or -1 on an unexpected answer. */
static int work(uint64_t job_id, sim_job *job, int max, bool *done)
{
    static unsigned char buf[8192];
    int accepted = 0;
    *done = false;
    while (!*done && accepted < max) {
        cd_assignment a[4];
        unsigned n = claim(1, 4, a, job_id);
        if (n == 0)
            return -1;
        /* Chunks past max stay claimed, in flight. */
        for (unsigned i = 0; i < n && !*done && accepted < max; i++) {
            size_t len = compute(job, &a[i], buf, sizeof buf);
            cd_completed *r = complete(&a[i], 1, buf, len);
            if (r == NULL || r->err != 0 || r->outcome != SC_ACCEPTED) {
                rt_msg_free(r ? &r->hdr : NULL);
                return -1;
            }
            accepted++;
            *done = r->job_complete;
            rt_msg_free(&r->hdr);
        }
    }
    return accepted;
}

/* The jobs row's state and output 0's mean, and the journal's accepts. */
static void db_state(uint64_t id, char *state, size_t slen, double *mean, long *accepts)
{
    cd_query *q = cd_query_new("SELECT state, result->'outputs'->0->>'mean', "
                               "(SELECT count(*) FROM journal WHERE job_id = $1 AND type = 1) FROM jobs WHERE id = $1");
    cd_query_int(q, (int64_t)id);
    cd_result *r = sql(q);
    snprintf(state, slen, "%s", r && r->res && PQntuples(r->res) ? PQgetvalue(r->res, 0, 0) : "?");
    *mean = r && r->res && PQntuples(r->res) && !PQgetisnull(r->res, 0, 1) ? strtod(PQgetvalue(r->res, 0, 1), NULL) : -1;
    *accepts = r && r->res && PQntuples(r->res) ? atol(PQgetvalue(r->res, 0, 2)) : -1;
    rt_msg_free(r ? &r->hdr : NULL);
}

static double whole_mean(sim_job *job, uint64_t items)
{
    sim_stats out[SIM_MAX_OUT];
    sim_run_cpu(job, 0, items, out);
    return sim_stats_mean(&out[0]);
}

/* The job is complete in the database, its journal holds exactly the
 * `accepted` acknowledged ranges, and its mean is one local run's. */
static void check_complete(uint64_t id, sim_job *job, uint64_t items, int accepted)
{
    char state[32];
    double mean;
    long accepts;
    db_state(id, state, sizeof state, &mean, &accepts);
    CHECK(strcmp(state, "complete") == 0, "job %" PRIu64 ": state %s", id, state);
    CHECK(accepts == accepted, "job %" PRIu64 ": journal has %ld accepts, %d acknowledged", id, accepts, accepted);
    double want = whole_mean(job, items);
    CHECK(mean == want, "job %" PRIu64 ": farmed mean %.17g, one local run %.17g", id, mean, want);
}

static void job_runs_to_completion(void)
{
    enum { ITEMS = 60000 };
    uint64_t id = insert_job(ITEMS, 3);
    CHECK(id > 0, "insert");
    sim_job *job = local_job(3);
    CHECK(job != NULL, "local job");
    bool done;
    int accepted = work(id, job, 1000, &done);
    CHECK(accepted > 0 && done, "accepted %d, done %d", accepted, done);

    check_complete(id, job, ITEMS, accepted);
    sim_job_destroy(job);
}

static void repeats_and_bad_results(void)
{
    static unsigned char buf[8192];
    uint64_t id = insert_job(10000, 5);
    sim_job *job = local_job(5);
    cd_assignment a;
    CHECK(claim(1, 1, &a, id) == 1, "claim");
    size_t len = compute(job, &a, buf, sizeof buf);
    cd_completed *r = complete(&a, 1, buf, len - 1);
    CHECK(r != NULL && r->err == SC_EBADRESULT, "a truncated result is refused");
    rt_msg_free(&r->hdr);
    r = complete(&a, 2, buf, len);
    CHECK(r != NULL && r->err == 0 && r->outcome == SC_STALE, "another node's token is stale");
    rt_msg_free(&r->hdr);
    r = complete(&a, 1, buf, len);
    CHECK(r != NULL && r->outcome == SC_ACCEPTED, "the good result is accepted");
    rt_msg_free(&r->hdr);
    r = complete(&a, 1, buf, len);
    CHECK(r != NULL && r->outcome == SC_IDEMPOTENT, "the same result again is idempotent");
    rt_msg_free(&r->hdr);
    buf[len - 1] ^= 1;
    r = complete(&a, 1, buf, len);
    CHECK(r != NULL && (r->outcome == SC_CONFLICT || r->err == SC_EBADRESULT), "a different result conflicts");
    rt_msg_free(&r->hdr);
    sim_job_destroy(job);
}

static long count_rows(const char *sql_text, uint64_t id)
{
    cd_query *q = cd_query_new(sql_text);
    cd_query_int(q, (int64_t)id);
    cd_result *r = sql(q);
    long n = r && r->res && PQntuples(r->res) == 1 ? atol(PQgetvalue(r->res, 0, 0)) : -1;
    rt_msg_free(r ? &r->hdr : NULL);
    return n;
}

/* Completions that arrive together share one journal statement: each is
 * answered, each range is journaled once, and the job's result is still
 * the local run's. Deleting the job deletes its journal. */
static void a_burst_of_completions(void)
{
    enum { ITEMS = 90000, BURST = CD_MAX_CLAIMS };
    static unsigned char bufs[BURST][2048];
    uint64_t id = insert_job(ITEMS, 13);
    sim_job *job = local_job(13);
    cd_assignment a[BURST];
    unsigned n = claim(1, BURST, a, id);
    CHECK(n > 1, "claimed %u chunks at once", n);
    rt_msg *reqs[BURST], *replies[BURST];
    for (unsigned i = 0; i < n; i++) {
        size_t len = compute(job, &a[i], bufs[i], sizeof bufs[i]);
        reqs[i] = &cd_complete_new(a[i].claim.job, a[i].claim.chunk, a[i].claim.token, 1, bufs[i], len)->hdr;
    }
    int answered = proxy_call_many(scheduler, reqs, replies, (int)n, 20000);
    CHECK(answered == (int)n, "%d of %u answered", answered, n);
    int accepted = 0;
    bool done = false;
    for (unsigned i = 0; i < n; i++) {
        cd_completed *r = (cd_completed *)replies[i];
        if (r != NULL && r->hdr.type == CD_MSG_COMPLETED && r->err == 0 && r->outcome == SC_ACCEPTED) {
            accepted++;
            done |= r->job_complete;
        }
        rt_msg_free(replies[i]);
    }
    CHECK(accepted == (int)n, "%d of %u accepted", accepted, n);
    CHECK(count_rows("SELECT count(*) FROM journal WHERE job_id = $1 AND type = 1", id) == accepted,
          "the burst's ranges are journaled once each");
    if (!done) {
        int rest = work(id, job, 1000, &done);
        CHECK(rest > 0 && done, "the rest: %d, done %d", rest, done);
        accepted += rest;
    }
    check_complete(id, job, ITEMS, accepted);
    CHECK(count_rows("WITH gone AS (DELETE FROM jobs WHERE id = $1 RETURNING id) SELECT count(*) FROM gone", id) == 1,
          "the job is deleted");
    CHECK(count_rows("SELECT count(*) FROM journal WHERE job_id = $1", id) == 0, "its journal went with it");
    sim_job_destroy(job);
}

static void restart_resumes_from_the_journal(void)
{
    enum { ITEMS = 70000 };
    uint64_t id = insert_job(ITEMS, 11);
    sim_job *job = local_job(11);
    bool done;
    int first = work(id, job, 4, &done);
    CHECK(first == 4 && !done, "first half: %d", first);
    cd_assignment lost;
    CHECK(claim(1, 1, &lost, id) == 1, "a claim in flight at the restart");

    stop_farm();
    start_farm(500, 60000);

    static unsigned char buf[8192];
    size_t len = compute(job, &lost, buf, sizeof buf);
    cd_completed *r = complete(&lost, 1, buf, len);
    /* The new scheduler may still be loading the job: stale either way. */
    CHECK(r != NULL && r->outcome == SC_STALE, "a claim from before the restart is stale");
    rt_msg_free(&r->hdr);
    int second = work(id, job, 1000, &done);
    CHECK(second > 0 && done, "second half: %d, done %d", second, done);

    check_complete(id, job, ITEMS, first + second);
    sim_job_destroy(job);
}

/* One statement on a connection of the test's own; the first value as a
 * number, or -1. */
static long pg_value(PGconn *c, const char *sql_text, uint64_t id)
{
    char idtext[24];
    snprintf(idtext, sizeof idtext, "%" PRIu64, id);
    const char *params[1] = { idtext };
    PGresult *r = PQexecParams(c, sql_text, id != 0, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    long v = st == PGRES_TUPLES_OK && PQntuples(r) == 1 ? atol(PQgetvalue(r, 0, 0)) : st == PGRES_COMMAND_OK ? 0 : -1;
    PQclear(r);
    return v;
}

/* Waits (deadline) until `sql_text` ($1: id) gives at least `want`. */
static bool pg_wait(PGconn *c, const char *sql_text, uint64_t id, long want)
{
    struct timespec t0, now, pause = { 0, 20000000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (now = t0; now.tv_sec - t0.tv_sec <= PROXY_DEADLINE_S;) {
        if (pg_value(c, sql_text, id) >= want)
            return true;
        nanosleep(&pause, NULL); /* not yet: look again, up to the deadline */
        clock_gettime(CLOCK_MONOTONIC, &now);
    }
    return false;
}

/* Waits (deadline) until a statement starting with `prefix` waits for a
 * lock. */
static bool lock_waiter(PGconn *look, const char *prefix)
{
    char like[128];
    snprintf(like, sizeof like, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                "AND query LIKE '%s%%'", prefix);
    return pg_wait(look, like, 0, 1);
}

/* A completion sent on a thread of its own (its answer held back). */
typedef struct late_complete {
    cd_assignment a;
    unsigned char buf[8192];
    size_t len;
    cd_completed *reply;
    _Atomic bool answered;    /* reply is set (read it once the thread is joined) */
} late_complete;

static void *complete_late(void *arg)
{
    late_complete *c = arg;
    c->reply = complete(&c->a, 1, c->buf, c->len);
    atomic_store(&c->answered, true);
    return NULL;
}

/* A job whose end is held back: every chunk claimed and all but the last
 * completed, then `lock_sql` ($1: the job's id) run by a transaction of the
 * test's own left open, and the last chunk completed on a thread of its
 * own, so that the scheduler's statement starting with `waiter` waits for
 * the lock. */
typedef struct held_end {
    PGconn *lock, *look;
    unsigned chunks;
    bool started;             /* the thread runs */
    bool waiting;             /* the end's UPDATE waits for the lock */
    pthread_t thread;
    late_complete last;
} held_end;

/* Claims every chunk of job id and completes all but the last, which is
 * left computed in h->last; false (with a message) when it cannot. */
static bool all_but_the_last(held_end *h, uint64_t id, sim_job *job, uint64_t items)
{
    static unsigned char buf[8192];
    cd_assignment a[64];
    unsigned n = 0;
    uint64_t claimed = 0;
    memset(h, 0, sizeof *h);
    while (claimed < items && n + 8 <= 64) {
        unsigned k = claim(1, 8, a + n, id);
        if (k == 0)
            break;
        for (unsigned i = 0; i < k; i++)
            claimed += a[n + i].claim.count;
        n += k;
    }
    if (claimed != items || n < 2) {
        fprintf(stderr, "claimed %" PRIu64 " items in %u chunks\n", claimed, n);
        return false;
    }
    h->chunks = n;
    for (unsigned i = 0; i + 1 < n; i++) {
        size_t len = compute(job, &a[i], buf, sizeof buf);
        cd_completed *r = complete(&a[i], 1, buf, len);
        bool ok = r != NULL && r->err == 0 && r->outcome == SC_ACCEPTED && !r->job_complete;
        rt_msg_free(r ? &r->hdr : NULL);
        if (!ok) {
            fprintf(stderr, "chunk %u not accepted\n", i);
            return false;
        }
    }
    h->last.a = a[n - 1];
    h->last.len = compute(job, &h->last.a, h->last.buf, sizeof h->last.buf);
    return true;
}

/* Holds job id's end as above; false (with a message) when it cannot. The
 * caller then calls release_end in any case. */
static bool hold_end(held_end *h, uint64_t id, sim_job *job, uint64_t items, const char *lock_sql,
    const char *waiter)
{
    if (!all_but_the_last(h, id, job, items))
        return false;
    h->lock = PQconnectdb(conninfo);
    h->look = PQconnectdb(conninfo);
    if (PQstatus(h->lock) != CONNECTION_OK || PQstatus(h->look) != CONNECTION_OK ||
        pg_value(h->lock, "BEGIN", 0) != 0 || pg_value(h->lock, lock_sql, strstr(lock_sql, "$1") ? id : 0) < 0) {
        fprintf(stderr, "cannot take the lock: %s\n", lock_sql);
        return false;
    }
    h->started = pthread_create(&h->thread, NULL, complete_late, &h->last) == 0;
    h->waiting = h->started && lock_waiter(h->look, waiter);
    if (!h->waiting)
        fprintf(stderr, "no statement starting with \"%s\" waits for the lock\n", waiter);
    return h->waiting;
}

/* Runs `sql_text` (if not NULL; $1 is id) in the lock's transaction and
 * commits it, then waits for the thread; true when the last chunk was
 * accepted and ended the job. */
static bool release_end(held_end *h, uint64_t id, const char *sql_text)
{
    bool ok = true;
    if (h->lock != NULL && PQstatus(h->lock) == CONNECTION_OK) {
        if (sql_text != NULL)
            ok = pg_value(h->lock, sql_text, id) >= 0;
        pg_value(h->lock, "COMMIT", 0);
    }
    PQfinish(h->lock);
    PQfinish(h->look);
    if (h->started)
        pthread_join(h->thread, NULL);
    cd_completed *r = h->last.reply;
    ok = ok && r != NULL && r->err == 0 && r->outcome == SC_ACCEPTED && r->job_complete;
    rt_msg_free(r ? &r->hdr : NULL);
    return ok;
}

#define LOCK_JOB_ROW "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE"
#define JOURNAL_INSERT "WITH r (job_id, type" /* actors/coord/journal.c */
#define JOURNAL_LOAD "SELECT j.seq, j.type, j.variant" /* a load's page of the journal, actors/coord/scheduler_load.c */
#define END_UPDATE "UPDATE jobs SET state = CASE"

static uint64_t awaited_job; /* for the predicates below */

static bool job_finished(void)
{
    return proxy_events("job.finished", awaited_job) > 0;
}

/* A job's end is written after the scheduler has let the job go; until
 * that write commits, the job's row still says running, and a load that
 * runs meanwhile (a sweep, a new job) must not start the job again. The
 * end's write is held back by a row lock here while two jobs are loaded. */
static void an_ending_job_is_not_loaded_again(void)
{
    enum { ITEMS = 20000 };
    uint64_t id = insert_job(ITEMS, 17);
    sim_job *job = local_job(17);
    static held_end h;
    bool held = hold_end(&h, id, job, ITEMS, LOCK_JOB_ROW, END_UPDATE);

    /* meanwhile two jobs arrive, each loaded by a load that lists the
     * first as running */
    watched_job = id;
    watched_offers = 0;
    cd_assignment other;
    uint64_t k1 = held ? insert_job(5000, 18) : 0;
    bool loaded1 = k1 > 0 && claim(2, 1, &other, k1) == 1;
    uint64_t k2 = loaded1 ? insert_job(5000, 19) : 0;
    bool loaded2 = k2 > 0 && claim(2, 1, &other, k2) == 1;
    int offers = watched_offers;
    watched_job = 0;

    bool done = release_end(&h, id, NULL);
    awaited_job = id;
    bool ended = proxy_wait(job_finished);
    CHECK(held, "the job's end is held back");
    CHECK(ended && proxy_events("job.started", id) == 1 && proxy_events("job.finished", id) == 1,
          "the job started and ended once: %d job.started, %d job.finished", proxy_events("job.started", id),
          proxy_events("job.finished", id));
    CHECK(offers == 0, "the ended job was handed out again: %d chunks", offers);
    CHECK(loaded1 && loaded2, "the jobs that came meanwhile are loaded: %d %d", loaded1, loaded2);
    CHECK(done, "the last chunk is accepted and ends the job");
    check_complete(id, job, ITEMS, (int)h.chunks);
    sim_job_destroy(job);
}

/* The API cancels a job (its UPDATE commits) just as the job's last chunk
 * ends it: the job stays cancelled, as the API has answered, and its row
 * still gets the whole result. The API's message that follows its cancel
 * comes after the end: the job gets one job.finished, with the state its
 * row has, cancelled. */
static void a_cancel_that_wins_the_race_with_the_end_stands(void)
{
    enum { ITEMS = 20000 };
    uint64_t id = insert_job(ITEMS, 23);
    sim_job *job = local_job(23);
    static held_end h;
    bool held = hold_end(&h, id, job, ITEMS, LOCK_JOB_ROW, END_UPDATE);
    bool done = release_end(&h, id, held ? "UPDATE jobs SET state = 'cancelled', finished_at = now() "
                                           "WHERE id = $1 AND state IN ('pending', 'running')" : NULL);
    api_cancel(id);
    /* the last chunk once more: answered (stale) after the cancel is handled */
    cd_completed *again = complete(&h.last.a, 1, h.last.buf, h.last.len);
    bool stale = again != NULL && again->err == 0 && again->outcome == SC_STALE;
    rt_msg_free(again ? &again->hdr : NULL);
    CHECK(held, "the job's end is held back");
    CHECK(done, "the last chunk is accepted and ends the job");
    CHECK(stale, "the last chunk sent again is stale");
    char state[32];
    double mean;
    long accepts;
    db_state(id, state, sizeof state, &mean, &accepts);
    CHECK(strcmp(state, "cancelled") == 0, "job %" PRIu64 ": state %s", id, state);
    CHECK(mean == whole_mean(job, ITEMS), "the result is the whole job's: mean %.17g", mean);
    CHECK(proxy_events("job.finished", id) == 1 && proxy_events("job.finished:cancelled", id) == 1,
          "one job.finished, cancelled: %d, %d cancelled, %d complete", proxy_events("job.finished", id),
          proxy_events("job.finished:cancelled", id), proxy_events("job.finished:complete", id));
    sim_job_destroy(job);
}

/* A job's row says it ended only once the journal holds every result it
 * accepted, so that a crash between the two commits cannot leave a
 * finished job whose journal (its convergence history) lacks chunks. The
 * last chunk's journal INSERT is held back by a lock on the journal
 * (SHARE: its rows can be read, none added), and a trigger of the test's
 * own notes how many accepts the journal held when the job's row got its
 * result. */
static void a_job_ends_after_its_journal(void)
{
    enum { ITEMS = 20000 };
    char note[256];
    snprintf(note, sizeof note, "CREATE FUNCTION note_end() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                                "INSERT INTO end_seen SELECT NEW.id, count(*) FROM journal "
                                "WHERE job_id = NEW.id AND type = %d; RETURN NEW; END $$", SC_REC_ACCEPT);
    PGconn *c = PQconnectdb(conninfo);
    bool setup = PQstatus(c) == CONNECTION_OK &&
        pg_value(c, "CREATE TABLE end_seen (job bigint, accepts bigint)", 0) == 0 && pg_value(c, note, 0) == 0 &&
        pg_value(c, "CREATE TRIGGER note_end AFTER UPDATE OF result ON jobs FOR EACH ROW "
                    "WHEN (OLD.result IS NULL AND NEW.result IS NOT NULL) EXECUTE FUNCTION note_end()", 0) == 0;
    uint64_t id = setup ? insert_job(ITEMS, 29) : 0;
    sim_job *job = local_job(29);
    static held_end h;
    bool held = id > 0 && hold_end(&h, id, job, ITEMS, "LOCK TABLE journal IN SHARE MODE", JOURNAL_INSERT);
    bool done = release_end(&h, id, NULL);
    long seen = id > 0 ? pg_value(c, "SELECT accepts FROM end_seen WHERE job = $1", id) : -1;
    pg_value(c, "DROP TRIGGER IF EXISTS note_end ON jobs", 0);
    pg_value(c, "DROP FUNCTION IF EXISTS note_end()", 0);
    pg_value(c, "DROP TABLE IF EXISTS end_seen", 0);
    PQfinish(c);
    CHECK(setup, "the trigger is set up");
    CHECK(held, "the journal's INSERT is held back");
    CHECK(done, "the last chunk is accepted and ends the job");
    CHECK(seen == (long)h.chunks, "when the job's row got its result the journal held %ld of its %u accepts", seen,
          h.chunks);
    check_complete(id, job, ITEMS, (int)h.chunks);
    sim_job_destroy(job);
}

static bool notice_seen(void)
{
    char want[64];
    snprintf(want, sizeof want, "pending_job:%" PRIu64, awaited_job);
    for (int i = 0; i < proxy_count(CD_MSG_NOTIFY); i++)
        if (strcmp(proxy_notice(i), want) == 0)
            return true;
    return false;
}

static bool job_started(void)
{
    return proxy_events("job.started", awaited_job) > 0;
}

/* A job whose notice comes while a load is under way, that load's list
 * read before the job was committed, still starts at once, not at the
 * next sweep (one a minute here). A lock on the journal holds the load
 * of the job before it in its journal query. */
static void a_job_that_arrives_during_a_load_starts(void)
{
    stop_farm();
    PGconn *lock = PQconnectdb(conninfo), *look = PQconnectdb(conninfo);
    /* the jobs of the cases before would have their journals read too */
    bool locked = PQstatus(lock) == CONNECTION_OK && PQstatus(look) == CONNECTION_OK &&
        pg_value(look, "UPDATE jobs SET state = 'cancelled' WHERE state IN ('pending', 'running')", 0) == 0 &&
        pg_value(lock, "BEGIN", 0) == 0 && pg_value(lock, "LOCK TABLE journal IN ACCESS EXCLUSIVE MODE", 0) == 0;
    start_farm(60000, 60000);
    uint64_t first = locked ? insert_job(5000, 21) : 0;
    bool held = first > 0 && lock_waiter(look, JOURNAL_LOAD);
    uint64_t second = held ? insert_job(5000, 22) : 0;
    awaited_job = second;
    bool noticed = second > 0 && proxy_wait(notice_seen);
    if (locked)
        pg_value(lock, "COMMIT", 0);
    PQfinish(lock);
    PQfinish(look);
    CHECK(locked, "the journal is locked");
    CHECK(held, "a load waits in its journal query");
    CHECK(noticed, "the second job's notice");
    awaited_job = first;
    CHECK(proxy_wait(job_started), "the first job starts");
    awaited_job = second;
    CHECK(proxy_wait(job_started), "the second job starts");
}

/* The database refuses the write of a job's end (a trigger of the test's
 * own raises an error, counting its refusals in a sequence, which no
 * rollback undoes): the end is sent again, and again, until the database
 * takes it; meanwhile the job's row says running, no job.finished goes out
 * and the completion that ended the job waits for its answer. Once the
 * trigger is dropped the end commits: the row has the whole result, the
 * journal one JOB_END row, the job one job.finished, and the completion is
 * answered accepted. */
static void an_end_the_database_refuses_is_written_later(void)
{
    enum { ITEMS = 20000 };
    uint64_t id = insert_job(ITEMS, 31);
    sim_job *job = local_job(31);
    char trigger[300];
    snprintf(trigger, sizeof trigger, "CREATE TRIGGER refuse_end BEFORE UPDATE OF result ON jobs FOR EACH ROW "
                                      "WHEN (NEW.id = %" PRIu64 ") EXECUTE FUNCTION refuse_end()", id);
    PGconn *c = PQconnectdb(conninfo);
    bool setup = id > 0 && PQstatus(c) == CONNECTION_OK && pg_value(c, "CREATE SEQUENCE refusals", 0) == 0 &&
        pg_value(c, "CREATE FUNCTION refuse_end() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "PERFORM nextval('refusals'); RAISE EXCEPTION 'refused by the test'; END $$", 0) == 0 &&
        pg_value(c, trigger, 0) == 0;
    static held_end h;
    bool claimed = setup && all_but_the_last(&h, id, job, ITEMS);
    bool started = claimed && pthread_create(&h.thread, NULL, complete_late, &h.last) == 0;
    /* the third refusal is of the end sent again twice */
    bool again = started && pg_wait(c, "SELECT last_value FROM refusals", 0, 3);
    bool waited = again && !atomic_load(&h.last.answered);
    long running = pg_value(c, "SELECT count(*) FROM jobs WHERE id = $1 AND state = 'running'", id);
    int events = proxy_events("job.finished", id);
    pg_value(c, "DROP TRIGGER IF EXISTS refuse_end ON jobs", 0);
    pg_value(c, "DROP FUNCTION IF EXISTS refuse_end()", 0);
    pg_value(c, "DROP SEQUENCE IF EXISTS refusals", 0);
    if (started)
        pthread_join(h.thread, NULL);
    cd_completed *r = h.last.reply;
    bool accepted = r != NULL && r->err == 0 && r->outcome == SC_ACCEPTED && r->job_complete;
    rt_msg_free(r ? &r->hdr : NULL);
    awaited_job = id;
    bool told = started && proxy_wait(job_finished);
    bool written = setup && pg_wait(c, "SELECT count(*) FROM jobs WHERE id = $1 AND state = 'complete'", id, 1);
    char ends[120];
    snprintf(ends, sizeof ends, "SELECT count(*) FROM journal WHERE job_id = $1 AND type = %d", SC_REC_JOB_END);
    long end_rows = written ? pg_value(c, ends, id) : -1;
    PQfinish(c);
    CHECK(setup, "the trigger is set up");
    CHECK(claimed, "every chunk claimed, all but the last completed");
    CHECK(again, "the end is refused, and sent again");
    CHECK(waited, "the last chunk's completion waits while the end is refused");
    CHECK(running == 1, "the row says running while the end is refused: %ld", running);
    CHECK(events == 0, "%d job.finished while the end is refused", events);
    CHECK(accepted, "the last chunk is accepted and ends the job once the end commits");
    CHECK(told, "job.finished once the end is written");
    CHECK(written, "the end is written once the database takes it");
    CHECK(end_rows == 1, "%ld JOB_END rows in the journal after 3 refusals", end_rows);
    char state[32];
    double mean;
    long accepts;
    db_state(id, state, sizeof state, &mean, &accepts);
    CHECK(mean == whole_mean(job, ITEMS), "the result is the whole job's: mean %.17g", mean);
    CHECK(proxy_events("job.finished", id) == 1, "%d job.finished", proxy_events("job.finished", id));
    sim_job_destroy(job);
}

/* A job that cannot run (its journal holds a record no ledger takes) is
 * failed, but a cancel the API committed after the load listed the job
 * stands: the job's row stays cancelled and its one job.finished says so,
 * also once the API's message comes. A lock on the journal holds the load
 * in its journal query while the bad record and the cancel commit together. */
static void a_cancel_that_wins_the_race_with_a_failed_job_stands(void)
{
    PGconn *lock = PQconnectdb(conninfo), *look = PQconnectdb(conninfo);
    bool locked = PQstatus(lock) == CONNECTION_OK && PQstatus(look) == CONNECTION_OK &&
        pg_value(lock, "BEGIN", 0) == 0 && pg_value(lock, "LOCK TABLE journal IN ACCESS EXCLUSIVE MODE", 0) == 0;
    uint64_t id = locked ? insert_job(5000, 33) : 0;
    bool held = id > 0 && lock_waiter(look, JOURNAL_LOAD);
    char bad[160];
    snprintf(bad, sizeof bad, "INSERT INTO journal (job_id, type, state) VALUES ($1, %d, 99)", SC_REC_JOB_END);
    bool cancelled = held && pg_value(lock, bad, id) == 0 &&
        pg_value(lock, "UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = $1", id) == 0;
    if (locked)
        pg_value(lock, "COMMIT", 0);
    PQfinish(lock);
    PQfinish(look);
    awaited_job = id;
    bool told = cancelled && proxy_wait(job_finished);
    /* the API's message, then a claim answered after it */
    api_cancel(id);
    unsigned offered = told ? claim_once(5, 1, NULL, id) : 1;
    char state[32];
    double mean;
    long accepts;
    db_state(id, state, sizeof state, &mean, &accepts);
    CHECK(locked, "the journal is locked");
    CHECK(held, "a load waits in its journal query");
    CHECK(cancelled, "the bad record and the cancel are written");
    CHECK(told, "job.finished");
    CHECK(offered == 0, "%u chunks of it handed out", offered);
    CHECK(strcmp(state, "cancelled") == 0, "job %" PRIu64 ": state %s", id, state);
    CHECK(proxy_events("job.finished", id) == 1 && proxy_events("job.finished:cancelled", id) == 1,
          "one job.finished, cancelled: %d, %d cancelled, %d failed", proxy_events("job.finished", id),
          proxy_events("job.finished:cancelled", id), proxy_events("job.finished:failed", id));
}

/* The API's cancel UPDATE commits after the API has stopped waiting for it
 * (it answered 503), so the scheduler is not told. The next load, which
 * no longer lists the job, stops it: no chunk of it is handed out after. */
static void a_cancel_the_scheduler_was_not_told_of_stops_the_job(void)
{
    uint64_t id = insert_job(100000000, 25);
    awaited_job = id;
    cd_assignment a[4];
    bool running = id > 0 && claim(3, 1, a, id) == 1;
    cd_query *q = cd_query_new("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = $1");
    cd_query_int(q, (int64_t)id);
    cd_result *r = running ? sql(q) : NULL;
    if (!running)
        rt_msg_free(&q->hdr);
    bool updated = r != NULL && r->res != NULL && strcmp(PQcmdTuples(r->res), "1") == 0;
    rt_msg_free(r ? &r->hdr : NULL);
    /* a sweep runs every 500 ms here */
    bool stopped = updated && proxy_wait(job_finished);
    unsigned offered = stopped ? claim_once(3, 4, NULL, id) : 1;
    char state[32];
    double mean;
    long accepts;
    db_state(id, state, sizeof state, &mean, &accepts);
    CHECK(running, "the job runs");
    CHECK(updated, "its row is cancelled behind the scheduler's back");
    CHECK(stopped, "the scheduler stops it: job.finished");
    CHECK(offered == 0, "%u chunks of it handed out after", offered);
    CHECK(strcmp(state, "cancelled") == 0, "job %" PRIu64 ": state %s", id, state);
}

/* While the store says the database is away, no chunk is handed out (the
 * results could not be journaled); once it is back, chunks are. */
static void no_chunks_while_the_database_is_away(void)
{
    uint64_t id = insert_job(100000000, 26);
    cd_assignment a[4];
    bool running = id > 0 && claim(4, 1, a, id) == 1;
    rt_send(scheduler, rt_msg_new(CD_MSG_STORE_DOWN, sizeof(rt_msg)));
    unsigned during = running ? claim_once(4, 4, NULL, id) : 1;
    rt_send(scheduler, rt_msg_new(CD_MSG_STORE_UP, sizeof(rt_msg)));
    unsigned after = running ? claim(4, 1, a, id) : 0;
    CHECK(running, "the job runs");
    CHECK(during == 0, "%u chunks handed out while the database is away", during);
    CHECK(after == 1, "a chunk once it is back");
    cd_query *q = cd_query_new("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = $1");
    cd_query_int(q, (int64_t)id);
    cd_result *r = sql(q);
    rt_msg_free(r ? &r->hdr : NULL);
}

/* A row of the job's journal as another writer would put it there: an
 * accept of [first, first + count) with these result bytes. */
static bool journal_row(PGconn *c, uint64_t job, uint64_t chunk, uint64_t first, uint64_t count,
    const unsigned char *res, size_t len)
{
    char j[24], ch[24], f[24], n[24];
    snprintf(j, sizeof j, "%" PRIu64, job);
    snprintf(ch, sizeof ch, "%" PRIu64, chunk);
    snprintf(f, sizeof f, "%" PRIu64, first);
    snprintf(n, sizeof n, "%" PRIu64, count);
    const char *values[6] = { j, ch, f, n, (const char *)res, "0123456789abcdef" };
    int lengths[6] = { 0, 0, 0, 0, (int)len, 16 }, formats[6] = { 0, 0, 0, 0, 1, 1 };
    char sql_text[200];
    snprintf(sql_text, sizeof sql_text, "INSERT INTO journal (job_id, type, variant, chunk, first_item, item_count, "
                                        "result, token) VALUES ($1, %d, 0, $2, $3, $4, $5, $6)", SC_REC_ACCEPT);
    PGresult *r = PQexecParams(c, sql_text, 6, NULL, values, lengths, formats, 0);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

/* Journal rows at odds with the scheduler's, as a write that timed out
 * and committed late, after its range was handed out again, leaves them:
 * one for a chunk's first item with another count makes the chunk's
 * INSERT write nothing, which is counted (and said on stderr), not passed
 * over as a resend; one whose first item is another but whose range
 * overlaps an accepted one (no index refuses it) is skipped when the job is
 * loaded again, instead of failing the job. Both rows hold true results of
 * their ranges, so the job still ends with one local run's result. */
static void journal_rows_at_odds_are_counted_not_fatal(void)
{
    enum { ITEMS = 20000 };
    static unsigned char buf[8192];
    uint64_t id = insert_job(ITEMS, 37);
    sim_job *job = local_job(37);
    cd_assignment a[2], x[2];
    PGconn *c = PQconnectdb(conninfo);
    bool setup = id > 0 && PQstatus(c) == CONNECTION_OK && claim(1, 2, a, id) == 2 && a[0].claim.count > 1 &&
        a[1].claim.count > 1;
    for (int i = 0; setup && i < 2; i++) { /* a[0]'s range less its last item, a[1]'s less its first */
        x[i] = a[i];
        x[i].claim.first += (uint64_t)i;
        x[i].claim.count--;
        size_t len = compute(job, &x[i], buf, sizeof buf);
        setup = len > 0 && journal_row(c, id, 1000000 + (uint64_t)i, x[i].claim.first, x[i].claim.count, buf, len);
    }
    PQfinish(c);
    cd_scheduler_stats before, after;
    cd_scheduler_stats_get(scheduler, &before);
    int accepted = 0;
    for (int i = 0; setup && i < 2; i++) {
        size_t len = compute(job, &a[i], buf, sizeof buf);
        cd_completed *r = complete(&a[i], 1, buf, len);
        accepted += r != NULL && r->err == 0 && r->outcome == SC_ACCEPTED;
        rt_msg_free(r ? &r->hdr : NULL);
    }
    cd_scheduler_stats_get(scheduler, &after); /* counted before the completions were answered */
    CHECK(setup, "two chunks claimed, the rows at odds with them written");
    CHECK(accepted == 2, "%d of 2 chunks accepted", accepted);
    CHECK(after.conflicts_written == before.conflicts_written + 1, "%" PRIu64 " journal rows counted at odds",
          after.conflicts_written - before.conflicts_written);

    stop_farm();
    start_farm(500, 60000);
    bool done = false;
    int rest = setup ? work(id, job, 1000, &done) : -1;
    cd_scheduler_stats_get(scheduler, &after);
    char state[32];
    double mean;
    long accepts;
    db_state(id, state, sizeof state, &mean, &accepts);
    CHECK(rest > 0 && done, "the job runs on after the restart: %d chunks, done %d", rest, done);
    CHECK(after.conflicts_restored == 1, "%" PRIu64 " journal records skipped by the restore",
          after.conflicts_restored);
    CHECK(strcmp(state, "complete") == 0, "job %" PRIu64 ": state %s", id, state);
    CHECK(mean == whole_mean(job, ITEMS), "the result is one local run's: mean %.17g", mean);
    sim_job_destroy(job);
}

/* The database up but behind: a lock on the journal holds a completion's
 * INSERT while every other query is answered. Chunks still handed out
 * would pile their results up in the store without bound (and, once the
 * scheduler stopped waiting for them, their nodes would be told stale and
 * take more): claims get nothing once the INSERT has waited the
 * scheduler's write_wait_ms, or while the store holds its backlog's bound
 * (which refuses nothing while the database is up), and chunks once it
 * has committed. */
static void held_back(uint64_t write_wait_ms, uint64_t backlog_bytes, uint64_t seed)
{
    stop_farm();
    farm_write_wait_ms = write_wait_ms;
    farm_backlog_bytes = backlog_bytes;
    start_farm(500, 60000);
    uint64_t id = insert_job(100000000, seed);
    sim_job *job = local_job(seed);
    static late_complete late;
    memset(&late, 0, sizeof late);
    bool claimed = id > 0 && claim(1, 1, &late.a, id) == 1;
    late.len = claimed ? compute(job, &late.a, late.buf, sizeof late.buf) : 0;
    PGconn *lock = PQconnectdb(conninfo), *look = PQconnectdb(conninfo);
    bool locked = claimed && PQstatus(lock) == CONNECTION_OK && PQstatus(look) == CONNECTION_OK &&
        pg_value(lock, "BEGIN", 0) == 0 && pg_value(lock, "LOCK TABLE journal IN SHARE MODE", 0) == 0;
    pthread_t t;
    bool started = locked && pthread_create(&t, NULL, complete_late, &late) == 0;
    bool waiting = started && lock_waiter(look, JOURNAL_INSERT);
    /* claims of another node, until one gets nothing of any job (up to the
     * deadline) */
    unsigned handed = 0, got = 1;
    struct timespec t0, now, pause = { 0, 20000000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (now = t0; waiting && got > 0 && now.tv_sec - t0.tv_sec <= PROXY_DEADLINE_S;) {
        got = claim_once(2, 1, NULL, 0);
        handed += got;
        if (got > 0)
            nanosleep(&pause, NULL); /* not yet: ask again, up to the deadline */
        clock_gettime(CLOCK_MONOTONIC, &now);
    }
    if (locked)
        pg_value(lock, "COMMIT", 0);
    PQfinish(lock);
    PQfinish(look);
    if (started)
        pthread_join(t, NULL);
    bool accepted = late.reply != NULL && late.reply->err == 0 && late.reply->outcome == SC_ACCEPTED;
    rt_msg_free(late.reply ? &late.reply->hdr : NULL);
    unsigned after = waiting ? claim(2, 1, NULL, id) : 0;
    CHECK(waiting, "the journal's INSERT waits for the lock");
    CHECK(got == 0, "claims still get chunks: %u handed out while the INSERT waited", handed);
    CHECK(accepted, "the completion is accepted once the INSERT commits");
    CHECK(after == 1, "a chunk once the journal caught up");
    cd_query *q = cd_query_new("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = $1");
    cd_query_int(q, (int64_t)id);
    cd_result *r = sql(q);
    rt_msg_free(r ? &r->hdr : NULL);
    sim_job_destroy(job);
    stop_farm();
    farm_write_wait_ms = farm_backlog_bytes = 0;
    start_farm(500, 60000);
}

static void no_chunks_while_a_journal_write_waits(void)
{
    held_back(300, 0, 41);
}

static void no_chunks_while_the_store_holds_its_bound(void)
{
    held_back(600000, 1024, 43); /* a journal INSERT alone is more than 1 KiB */
}

static uint64_t progress_job;
static int progress_seen;

static bool more_progress(void)
{
    return proxy_events("job.progress", progress_job) > progress_seen;
}

/* A claim whose lease runs out goes back to its job, and the job's
 * progress (reclaims, items in flight) says so at once, not only with the
 * next accepted chunk. Leases here are 3 s: three times a chunk's
 * expected second. */
static void a_lease_that_runs_out_shows_in_the_progress(void)
{
    uint64_t id = insert_job(1000000000, 23);
    cd_assignment a;
    bool claimed = claim(3, 1, &a, id) == 1;
    progress_job = id;
    progress_seen = 0;
    bool first = claimed && proxy_wait(more_progress); /* the one of its start */
    progress_seen = proxy_events("job.progress", id);
    bool after = first && proxy_wait(more_progress);
    CHECK(claimed && first, "a chunk of the job claimed, its first progress seen");
    CHECK(after, "a progress event once the lease ran out (%d before)", progress_seen);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: scheduler_check CONNINFO EXAMPLES_DIR\n");
        return 2;
    }
    conninfo = argv[1];
    char path[1024];
    snprintf(path, sizeof path, "%s/option.json", argv[2]);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(params_json, 1, sizeof params_json - 1, f) : 0;
    if (f)
        fclose(f);
    if (n == 0 || sodium_init() < 0) {
        fprintf(stderr, "scheduler_check: cannot read %s\n", path);
        return 2;
    }
    start_farm(500, 60000);
    if (!add_nodes()) {
        fprintf(stderr, "scheduler_check: cannot add the nodes' rows\n");
        return 1;
    }
    RUN(job_runs_to_completion);
    RUN(repeats_and_bad_results);
    RUN(a_burst_of_completions);
    RUN(restart_resumes_from_the_journal);
    RUN(an_ending_job_is_not_loaded_again);
    RUN(a_cancel_that_wins_the_race_with_the_end_stands);
    RUN(a_job_ends_after_its_journal);
    RUN(an_end_the_database_refuses_is_written_later);
    RUN(a_cancel_the_scheduler_was_not_told_of_stops_the_job);
    RUN(a_cancel_that_wins_the_race_with_a_failed_job_stands);
    RUN(no_chunks_while_the_database_is_away);
    RUN(journal_rows_at_odds_are_counted_not_fatal);
    RUN(no_chunks_while_a_journal_write_waits);
    RUN(no_chunks_while_the_store_holds_its_bound);
    RUN(a_job_that_arrives_during_a_load_starts);
    stop_farm();
    start_farm(500, 100);
    RUN(a_lease_that_runs_out_shows_in_the_progress);
    stop_farm();
    return CHECK_SUMMARY();
}
