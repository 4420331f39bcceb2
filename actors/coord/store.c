/*
 * store.c — see store.h: the store actor and the statements it runs.
 * The connections and their polls are in store_pool.c, the queries, the
 * queue and the backlog in store_queue.c (shared through store_int.h).
 *
 * Everything happens in the store's behaviour, on the loop thread: a
 * uv_poll callback only stops its poll and sends the store an I/O message,
 * so each connection is a small state machine driven by messages (connect,
 * run a query, read notices), and libpq is never called from elsewhere.
 * Each connection attempt gets its own poll handle ("box"); a box outlives
 * its connection until libuv has closed it, and events from an old box are
 * recognised by their generation and ignored.
 *
 * Group commit (store.h): a connection that frees up while several `group`
 * queries wait at the head of the queue takes them all (up to
 * CD_STORE_GROUP_MAX) as one pipeline without BEGIN/COMMIT: the extended
 * protocol runs everything before a Sync as one implicit transaction,
 * committed at the Sync, or rolled back as a whole when a statement fails
 * (the statements after it are then skipped: PGRES_PIPELINE_ABORTED). So a
 * PGRES_PIPELINE_SYNC with no error before it means every query of the group
 * is committed, and any error means none is. The statements of groups are
 * prepared once per connection (a few named statements, keyed by their
 * text): parsing and planning the same INSERT again for every row was most
 * of PostgreSQL's work. A name is never reused, so a statement whose Parse
 * fell in a failed group cannot collide with a later one.
 */
#include "actors/coord/store_int.h"

#include "actors/coord/migrations.h"
#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- running statements -------------------------------------------------------------- */

/* Sends what libpq has buffered; watches for the answer. */
static void flush_and_watch(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    int f = PQflush(c->pg);
    if (f < 0) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    cd__store_watch(c, f == 1 ? UV_READABLE | UV_WRITABLE : UV_READABLE);
}

static char *migration_sql(unsigned m)
{
    const char *head =
        "BEGIN;\n"
        "SET LOCAL client_min_messages = warning;\n" /* no "already exists, skipping" notices */
        "SELECT pg_advisory_xact_lock(7216057);\n"
        "CREATE TABLE IF NOT EXISTS schema_migrations (\n"
        "    name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());\n"
        "DO $migrate$ BEGIN\n"
        "  IF NOT EXISTS (SELECT 1 FROM schema_migrations WHERE name = '%s') THEN\n"
        "    EXECUTE $migration$%s$migration$;\n"
        "    INSERT INTO schema_migrations (name) VALUES ('%s');\n"
        "  END IF;\n"
        "END $migrate$;\n"
        "COMMIT;\n";
    const cd_migration *mg = &cd_migrations[m];
    size_t n = strlen(head) + 2 * strlen(mg->name) + strlen(mg->sql) + 1;
    char *s = malloc(n);
    if (s == NULL)
        sf_oom(n);
    snprintf(s, n, head, mg->name, mg->sql, mg->name);
    return s;
}

static bool start_migration(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    char *sql = migration_sql(c->migration);
    int ok = PQsendQuery(c->pg, sql);
    free(sql);
    if (!ok) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return false;
    }
    c->kind = CD__STORE_K_MIGRATE;
    c->state = CD__STORE_BUSY;
    c->sends++;
    st->migrating = true;
    flush_and_watch(self, st, i);
    return true;
}

/* The prepared statement for q's text on c, its Parse added to the
 * pipeline if it is new; one with an empty name (run q unprepared) when c
 * has prepared CD__STORE_MAX_PREPARED already; NULL when libpq refuses. */
static const cd__store_prepared *prepare(cd__store_conn *c, const cd_query *q)
{
    static const cd__store_prepared unnamed = { .sql = NULL };
    for (unsigned k = 0; k < c->nprep; k++)
        if (strcmp(c->prep[k].sql, q->sql) == 0)
            return &c->prep[k];
    if (c->nprep == CD__STORE_MAX_PREPARED)
        return &unnamed;
    cd__store_prepared *p = &c->prep[c->nprep];
    snprintf(p->name, sizeof p->name, "simfarm_g%" PRIu64, ++c->prep_names);
    if (!PQsendPrepare(c->pg, p->name, q->sql, q->nparams, NULL))
        return NULL;
    p->sql = sf_strdup(q->sql);
    p->fresh = true;
    c->nprep++;
    c->stmt[c->nstmt++] = -1;
    return p;
}

/* Sends the groupable queries at the head of the queue (at least two) to
 * the idle connection i as one pipeline, one transaction. */
static void send_group(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    c->ngroup = 0;
    c->nstmt = 0;
    c->gnext = 0;
    c->gfailed = false;
    while (c->ngroup < CD_STORE_GROUP_MAX && st->qlen > 0 && cd__store_groupable(cd__store_queue_at(st, 0))) {
        cd_query *q = cd__store_queue_pop(st);
        q->attempts++;
        c->group[c->ngroup] = q;
        c->gres[c->ngroup] = NULL;
        c->ngroup++;
    }
    c->kind = CD__STORE_K_GROUP;
    c->sends++;
    if (!PQenterPipelineMode(c->pg)) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    for (unsigned k = 0; k < c->ngroup; k++) {
        cd_query *q = c->group[k];
        const cd__store_prepared *p = prepare(c, q);
        if (p == NULL) {
            cd__store_lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        int ok = p->name[0] != '\0'
            ? PQsendQueryPrepared(c->pg, p->name, q->nparams, (const char *const *)q->values, q->lengths,
                  q->formats, q->binary_result)
            : PQsendQueryParams(c->pg, q->sql, q->nparams, NULL, (const char *const *)q->values, q->lengths,
                  q->formats, q->binary_result);
        if (!ok) {
            cd__store_lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        c->stmt[c->nstmt++] = (int16_t)k;
    }
    if (!PQpipelineSync(c->pg)) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    st->groups++;
    st->grouped += c->ngroup;
    c->state = CD__STORE_BUSY;
    flush_and_watch(self, st, i);
}

/* Starts the next waiting query, or group of queries, on every idle pool
 * connection. */
static void dispatch(rt_actor *self, cd__store *st)
{
    if (!st->migrated)
        return;
    for (unsigned i = 0; i < st->npool && st->qlen > 0; i++) {
        cd__store_conn *c = &st->conns[i];
        if (c->state != CD__STORE_IDLE || (st->exclusive && !c->fenced))
            continue;
        if (st->qlen >= 2 && cd__store_groupable(cd__store_queue_at(st, 0)) && cd__store_groupable(cd__store_queue_at(st, 1))) {
            send_group(self, st, (int)i);
            continue;
        }
        cd_query *q = cd__store_queue_pop(st);
        q->attempts++;
        c->sends++;
        if (!PQsendQueryParams(c->pg, q->sql, q->nparams, NULL, (const char *const *)q->values,
                q->lengths, q->formats, q->binary_result)) {
            c->q = q;
            c->kind = CD__STORE_K_QUERY;
            cd__store_lost(self, st, (int)i, PQerrorMessage(c->pg));
            continue;
        }
        c->q = q;
        c->kind = CD__STORE_K_QUERY;
        c->state = CD__STORE_BUSY;
        flush_and_watch(self, st, (int)i);
    }
}

/* ---- the fence (store_int.h, docs/coordinator.md) ----------------------------------------- */

/* Sends sql on connection i as a statement of kind k, answered within
 * CD__STORE_ANSWER_WAIT_MS or the connection is counted lost. */
static void send_control(rt_actor *self, cd__store *st, int i, const char *sql, cd__store_kind k)
{
    cd__store_conn *c = &st->conns[i];
    if (!PQsendQuery(c->pg, sql)) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    c->kind = k;
    c->state = CD__STORE_BUSY;
    c->sends++;
    flush_and_watch(self, st, i);
    if (c->kind == k)
        cd__store_conn_timer(self, st, i, CD__STORE_M_DEADLINE, CD__STORE_ANSWER_WAIT_MS);
}

/* The pool connection i takes the fence, then checks that the lease is
 * held by this store's listener: in that order, so that a coordinator
 * taking the lease after the check finds this session holding the fence
 * and ends it, and one that took it before fails the check. */
static void take_fence(rt_actor *self, cd__store *st, int i)
{
    char sql[768];
    snprintf(sql, sizeof sql,
        "SET application_name = 'simfarm coordinator pool'; SELECT pg_advisory_lock_shared(%d); "
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND classid = 0 AND objid = %d AND objsubid = 1 AND granted AND pid = %d)",
        CD__STORE_FENCE, CD__STORE_LOCK, st->listener_pid);
    send_control(self, st, i, sql, CD__STORE_K_FENCE);
}

/* The listener (i), holding the lease, ends every session that holds the
 * fence and is not one of this store's, and counts a new term of the
 * lease once there is none (the answer: how many, their pids, the term). */
static void clear_fence(rt_actor *self, cd__store *st, int i)
{
    if (!st->migrated)
        return; /* the lease's table comes with the migrations: asked again once they are done */
    char own[9 * 12 + 2] = "0"; /* this store's pool sessions, holding the fence or about to */
    size_t n = 1;
    for (unsigned k = 0; k < st->npool; k++)
        if (st->conns[k].pg != NULL && st->conns[k].state != CD__STORE_CONNECTING)
            n += (size_t)snprintf(own + n, sizeof own - n, ",%d", PQbackendPID(st->conns[k].pg));
    char sql[1536];
    snprintf(sql, sizeof sql,
        "WITH f AS (SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND l.classid = 0 AND l.objid = %d AND l.objsubid = 1 AND l.granted "
        "AND l.pid <> pg_backend_pid() AND l.pid NOT IN (%s)), "
        "t AS (UPDATE coordinator_lease SET term = term + 1 WHERE NOT EXISTS (SELECT 1 FROM f) RETURNING term) "
        "SELECT (SELECT count(*) FROM f), (SELECT string_agg(pid::text, ', ' ORDER BY pid) FROM f), "
        "(SELECT bool_and(pg_terminate_backend(pid)) FROM f), (SELECT term FROM t)",
        CD__STORE_FENCE, own);
    send_control(self, st, i, sql, CD__STORE_K_CLEAR);
}

/* The listener is listening (again): say so, and probe the server from now on. */
static void listening(rt_actor *self, cd__store *st, int i)
{
    cd__store_notify(st, CD_MSG_LISTENING);
    cd__store_conn_timer(self, st, i, CD__STORE_M_PROBE, CD__STORE_PROBE_EVERY_MS);
}

static void reclear_later(rt_actor *self, int i)
{
    cd__store_timer_msg *m = RT_MSG_NEW(cd__store_timer_msg, CD__STORE_M_RECLEAR);
    m->conn = i;
    rt_send_after(self, CD__STORE_RELOCK_MS, &m->hdr);
}

/* The answer to clear_fence (res: NULL or an error when it failed). */
static void fence_cleared(rt_actor *self, cd__store *st, int i, const PGresult *res)
{
    uint64_t now = rt_mono_ms();
    bool say = st->fence_said == 0 || now - st->fence_said >= CD__STORE_FENCE_SAY_MS;
    if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        if (say) {
            sf_log(SF_LOG_WARN, "store", "cannot look for a previous coordinator's sessions: %s",
                res ? PQresultErrorMessage(res) : "no answer");
            st->fence_said = now;
        }
        reclear_later(self, i);
        return;
    }
    unsigned others = (unsigned)strtoul(PQgetvalue(res, 0, 0), NULL, 10);
    atomic_store_explicit(&st->g.fence_waiting, others, memory_order_relaxed); /* a gauge printed alone */
    if (others > 0) {
        if (st->fence_since == 0)
            st->fence_since = now;
        if (say) {
            sf_log(SF_LOG_WARN, "store",
                "waiting for %u session%s of the previous coordinator to end before reading the journal "
                "(PostgreSQL pid %s, asked to end %.0f s ago): a journal write of theirs may still commit",
                others, others == 1 ? "" : "s", PQgetvalue(res, 0, 1), (double)(now - st->fence_since) / 1000.0);
            st->fence_said = now;
        }
        reclear_later(self, i);
        return;
    }
    int64_t term = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
    if (st->term != 0 && term != st->term + 1) {
        /* Another coordinator held the lease while this one had lost it,
         * and wrote what this one's memory does not hold. */
        if (!st->gave_up && st->taken != NULL) {
            char why[256];
            snprintf(why, sizeof why,
                "another coordinator held this database's lock while this one had lost it (lease term %lld, now "
                "%lld): this one stops; start it again to go on from the journal",
                (long long)st->term, (long long)term);
            st->gave_up = true;
            st->taken(st->taken_ctx, why);
        }
        return;
    }
    if (st->fence_since != 0)
        sf_log(SF_LOG_INFO, "store", "the previous coordinator's sessions have ended after %.1f s: reading the journal",
            (double)(now - st->fence_since) / 1000.0);
    st->fence_since = st->fence_said = 0;
    st->term = term;
    st->clear = true;
    st->listener_pid = PQbackendPID(st->conns[i].pg);
    for (unsigned k = 0; k < st->npool; k++)
        if (st->conns[k].state == CD__STORE_IDLE && st->conns[k].kind == CD__STORE_K_NONE && !st->conns[k].fenced)
            take_fence(self, st, (int)k);
    cd__store_maybe_up(st);
    listening(self, st, i);
}

/* The answer to take_fence on pool connection i. */
static void fence_taken(rt_actor *self, cd__store *st, int i, const PGresult *res)
{
    cd__store_conn *c = &st->conns[i];
    if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        char why[256];
        snprintf(why, sizeof why, "cannot take the coordinator's fence: %s", res ? PQresultErrorMessage(res) : "no answer");
        cd__store_lost(self, st, i, why);
        return;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        cd__store_lost(self, st, i, "the coordinator's lock is not this coordinator's any more: its writes would not be fenced");
        return;
    }
    c->fenced = true;
    c->backoff_ms = 0;
    cd__store_maybe_up(st);
    cd__store_watch(c, UV_READABLE);
    dispatch(self, st);
}

/* A connection is ready: migrate, LISTEN, or take queued queries. */
static void ready(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    c->state = CD__STORE_IDLE;
    /* The backoff starts over once the connection is of use: past the
     * migrations and LISTEN, which fail again on every connection while
     * the schema or the database is wrong. */
    if (st->migrated && !c->listener)
        c->backoff_ms = 0;
    if (c->listener) {
        /* With the coordinator's lock: the SELECT's answer comes last, the
         * one finished() keeps; the holder's line when it is another. */
        char sql[1024];
        char *chan = PQescapeIdentifier(c->pg, st->listen, strlen(st->listen));
        if (st->exclusive)
            snprintf(sql, sizeof sql,
                "SET application_name = 'simfarm coordinator'; LISTEN %s; "
                "WITH h AS (SELECT a.pid, format('PostgreSQL session %%s (%%s, from %%s, since %%s)', a.pid, "
                "coalesce(nullif(a.application_name, ''), 'no application name'), "
                "coalesce(host(a.client_addr), 'a local socket'), date_trunc('second', a.backend_start)) AS line "
                "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.classid = 0 AND l.objid = %d AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid() "
                "LIMIT 1) "
                "SELECT pg_try_advisory_lock(%d), (SELECT line FROM h), (SELECT pid FROM h)",
                chan ? chan : "\"\"", CD__STORE_LOCK, CD__STORE_LOCK);
        else
            snprintf(sql, sizeof sql, "LISTEN %s", chan ? chan : "\"\"");
        PQfreemem(chan);
        if (!PQsendQuery(c->pg, sql)) {
            cd__store_lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        c->kind = CD__STORE_K_LISTEN;
        c->state = CD__STORE_BUSY;
        c->sends++;
        flush_and_watch(self, st, i);
        if (c->kind == CD__STORE_K_LISTEN)
            cd__store_conn_timer(self, st, i, CD__STORE_M_DEADLINE, CD__STORE_ANSWER_WAIT_MS);
        return;
    }
    if (!st->migrated) {
        if (!st->migrating) {
            c->migration = 0;
            start_migration(self, st, i);
        }
        return; /* another connection migrates; this one waits for dispatch */
    }
    if (st->exclusive && !c->fenced) {
        if (st->clear)
            take_fence(self, st, i);
        else
            cd__store_watch(c, UV_READABLE); /* waits for the listener to clear the fence */
        return;
    }
    cd__store_maybe_up(st);
    cd__store_watch(c, UV_READABLE); /* an idle connection reads only to notice EOF */
    dispatch(self, st);
}

/* The answer to the listener's request for the coordinator's lock (res:
 * lock taken, and the holder's line and pid when another holds it).
 * Taken: the store may be up.
 * Held by another session: asked again every CD__STORE_RELOCK_MS, and after
 * CD_STORE_LOCK_WAIT_MS of that, taken() hears who holds it. */
static void lock_answer(rt_actor *self, cd__store *st, int i, const PGresult *res)
{
    if (PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
        if (st->lock_since != 0)
            sf_log(SF_LOG_INFO, "store", "the coordinator's lock on the database is free again: taken");
        else if (st->relocking)
            sf_log(SF_LOG_INFO, "store", "the coordinator's lock is held again");
        st->locked = true;
        st->relocking = false;
        st->lock_since = 0;
        return; /* the fence is cleared next */
    }
    bool known = PQntuples(res) == 1 && !PQgetisnull(res, 0, 1);
    const char *holder = known ? PQgetvalue(res, 0, 1) : "a session";
    uint64_t now = rt_mono_ms();
    if (st->lock_since == 0) {
        st->lock_since = now;
        sf_log(SF_LOG_WARN, "store", "another coordinator holds this database: %s; waiting up to %d s for it to let go", holder,
            CD_STORE_LOCK_WAIT_MS / 1000);
    }
    if (now - st->lock_since < CD_STORE_LOCK_WAIT_MS) {
        cd__store_timer_msg *m = RT_MSG_NEW(cd__store_timer_msg, CD__STORE_M_RELOCK);
        m->conn = i;
        rt_send_after(self, CD__STORE_RELOCK_MS, &m->hdr);
        return;
    }
    if (!st->gave_up && st->taken != NULL) {
        char why[768];
        snprintf(why, sizeof why,
            "another coordinator uses this database: %s holds its lock; two coordinators on one database would "
            "both run its jobs. Stop that one, or if it is gone, end its session: SELECT pg_terminate_backend(%s)",
            holder, known ? PQgetvalue(res, 0, 2) : "PID");
        st->gave_up = true;
        st->taken(st->taken_ctx, why);
    }
}

static bool result_ok(const PGresult *res)
{
    ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_EMPTY_QUERY;
}

/* Answers q (kept, freed here) with res (consumed; NULL = no result). */
static void answer(cd__store *st, cd_query *q, PGresult *res)
{
    cd_result *r = RT_MSG_NEW(cd_result, CD_MSG_RESULT);
    r->hdr.release = cd__store_result_release;
    if (result_ok(res)) {
        r->res = res;
    } else {
        const char *msg = res ? PQresultErrorMessage(res) : "no result";
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        /* one line: libpq's messages hold line breaks (DETAIL:, HINT:) */
        sf_one_line(r->error, sizeof r->error, msg && *msg ? msg : "query failed");
        if (state != NULL)
            snprintf(r->sqlstate, sizeof r->sqlstate, "%s", state);
        r->code = CD_STORE_EQUERY;
        if (res)
            PQclear(res);
    }
    cd__store_backlog_drop(st, q);
    rt_reply(&q->hdr, &r->hdr);
    rt_msg_free(&q->hdr);
}

static void reply(cd__store *st, cd__store_conn *c)
{
    answer(st, c->q, c->res);
    c->res = NULL;
    c->q = NULL;
}

/* The group on c reached its sync point: all committed (answer each), or
 * none (run each alone, in order, so each gets its own answer). */
static void group_done(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    if (!PQexitPipelineMode(c->pg)) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    unsigned n = c->ngroup;
    c->ngroup = 0;
    c->kind = CD__STORE_K_NONE;
    c->state = CD__STORE_IDLE;
    if (c->gfailed)
        cd__store_forget_prepared(c, true);
    for (unsigned k = 0; k < c->nprep; k++)
        c->prep[k].fresh = false;
    if (!c->gfailed) {
        for (unsigned k = 0; k < n; k++)
            answer(st, c->group[k], c->gres[k]);
    } else {
        st->groups_failed++;
        for (unsigned k = n; k-- > 0;) {
            if (c->gres[k] != NULL)
                PQclear(c->gres[k]);
            c->group[k]->solo = true;
            c->group[k]->attempts--; /* not a lost connection: this try does not count */
            cd__store_queue_push(st, c->group[k], true);
        }
    }
    for (unsigned k = 0; k < n; k++) {
        c->group[k] = NULL;
        c->gres[k] = NULL;
    }
    cd__store_watch(c, UV_READABLE);
    dispatch(self, st);
}

/* Reads what has arrived of the group on c: each statement's results end
 * with a NULL from PQgetResult, the sync point with PGRES_PIPELINE_SYNC. */
static void read_group(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    while (c->kind == CD__STORE_K_GROUP && !PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (r == NULL) {
            if (c->gnext >= c->nstmt)
                return; /* every statement read; the sync point is still coming */
            c->gnext++;
            continue;
        }
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            group_done(self, st, i);
            return;
        }
        bool ok = result_ok(r);
        c->gfailed |= !ok; /* an error, a statement skipped after one, or a failed commit */
        int q = c->gnext < c->nstmt ? c->stmt[c->gnext] : -1;
        if (q < 0) { /* a Parse, or the commit */
            PQclear(r);
            continue;
        }
        /* Keep the first error, else the last result. */
        PGresult **keep = &c->gres[q];
        if (*keep == NULL || result_ok(*keep)) {
            if (*keep != NULL)
                PQclear(*keep);
            *keep = r;
        } else {
            PQclear(r);
        }
    }
}

/* The statement on c finished (all results read). */
static void finished(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    cd__store_kind k = c->kind;
    c->kind = CD__STORE_K_NONE;
    c->state = CD__STORE_IDLE;
    if (k == CD__STORE_K_QUERY) {
        reply(st, c);
        cd__store_watch(c, UV_READABLE);
        dispatch(self, st);
        return;
    }
    if (k == CD__STORE_K_CLEAR || k == CD__STORE_K_FENCE) {
        PGresult *res = c->res;
        c->res = NULL;
        cd__store_watch(c, UV_READABLE);
        if (k == CD__STORE_K_CLEAR)
            fence_cleared(self, st, i, res);
        else
            fence_taken(self, st, i, res);
        if (res != NULL)
            PQclear(res);
        return;
    }
    if (k == CD__STORE_K_PROBE) { /* answered, whatever it says: the server is there */
        if (c->res != NULL)
            PQclear(c->res);
        c->res = NULL;
        cd__store_watch(c, UV_READABLE);
        cd__store_conn_timer(self, st, i, CD__STORE_M_PROBE, CD__STORE_PROBE_EVERY_MS);
        return;
    }
    ExecStatusType s = c->res ? PQresultStatus(c->res) : PGRES_FATAL_ERROR;
    bool ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
    if (!ok)
        sf_log(SF_LOG_WARN, "store", "%s failed: %s", k == CD__STORE_K_MIGRATE ? cd_migrations[c->migration].name : "LISTEN",
            c->res ? PQresultErrorMessage(c->res) : "no result");
    PGresult *lock = NULL;
    if (k == CD__STORE_K_LISTEN && ok && st->exclusive) {
        lock = c->res;
        c->res = NULL;
    }
    if (c->res != NULL) {
        PQclear(c->res);
        c->res = NULL;
    }
    if (k == CD__STORE_K_LISTEN) {
        if (!ok) {
            cd__store_lost(self, st, i, "LISTEN failed");
            return;
        }
        c->backoff_ms = 0;
        cd__store_watch(c, UV_READABLE);
        if (lock != NULL) {
            lock_answer(self, st, i, lock);
            PQclear(lock);
            if (st->locked)
                clear_fence(self, st, i); /* then listening() */
            return;
        }
        if (!st->exclusive)
            listening(self, st, i);
        return;
    }
    /* CD__STORE_K_MIGRATE */
    if (!ok) {
        st->migrating = false; /* a bad schema: retry later, loudly */
        cd__store_lost(self, st, i, "migration failed");
        return;
    }
    if (++c->migration < cd_nmigrations) {
        start_migration(self, st, i);
        return;
    }
    st->migrating = false;
    st->migrated = true;
    for (unsigned k2 = 0; k2 < st->npool; k2++)
        if (st->conns[k2].state == CD__STORE_IDLE && st->conns[k2].kind == CD__STORE_K_NONE)
            ready(self, st, (int)k2);
    cd__store_conn *l = st->listen != NULL ? &st->conns[st->npool] : NULL;
    if (l != NULL && st->exclusive && st->locked && !st->clear && l->state == CD__STORE_IDLE && l->kind == CD__STORE_K_NONE)
        clear_fence(self, st, (int)st->npool); /* it held the lock before the lease's table was there */
}

static void on_io(rt_actor *self, cd__store *st, const cd__store_io_msg *m)
{
    if (m->conn < 0 || (unsigned)m->conn >= st->nconns)
        return;
    cd__store_conn *c = &st->conns[m->conn];
    if (c->box == NULL || m->gen != c->gen)
        return; /* from a connection that is gone */
    int i = m->conn;

    if (c->state == CD__STORE_CONNECTING) {
        PostgresPollingStatusType ps = PQconnectPoll(c->pg);
        /* libpq opens another socket when it moves on to the next host or
         * address (host=a,b; a name with several addresses) */
        if (ps != PGRES_POLLING_FAILED && PQsocket(c->pg) != c->box->fd) {
            cd__store_unwatch(c);
            if (!cd__store_watch_socket(self, st, i)) {
                cd__store_lost(self, st, i, "cannot watch the connection's socket");
                return;
            }
            cd__store_conn_timer(self, st, i, CD__STORE_M_DEADLINE, CD__STORE_ANSWER_WAIT_MS);
        }
        switch (ps) {
        case PGRES_POLLING_READING: cd__store_watch(c, UV_READABLE); return;
        case PGRES_POLLING_WRITING: cd__store_watch(c, UV_WRITABLE); return;
        case PGRES_POLLING_OK: ready(self, st, i); return;
        default: cd__store_lost(self, st, i, PQerrorMessage(c->pg)); return;
        }
    }
    /* While a statement or group is being sent, send more of it whatever
     * woke us, and read too: a pipeline's results can fill the socket
     * before all of it is written, and a server blocked on writing them
     * reads nothing. */
    int events = UV_READABLE;
    uint64_t sends = c->sends;
    if (c->state == CD__STORE_BUSY) {
        int f = PQflush(c->pg);
        if (f < 0) {
            cd__store_lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        if (f == 1)
            events |= UV_WRITABLE;
    }
    if (!PQconsumeInput(c->pg)) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    if (c->state == CD__STORE_BUSY && c->kind == CD__STORE_K_GROUP) {
        read_group(self, st, i);
        if (c->state == CD__STORE_BUSY && c->sends == sends)
            cd__store_watch(c, events);
    } else if (c->state == CD__STORE_BUSY) {
        while (!PQisBusy(c->pg)) {
            PGresult *r = PQgetResult(c->pg);
            if (r == NULL) {
                finished(self, st, i);
                break;
            }
            /* Keep the first error, else the last result. */
            if (c->res == NULL || PQresultStatus(c->res) == PGRES_COMMAND_OK ||
                PQresultStatus(c->res) == PGRES_TUPLES_OK) {
                if (c->res != NULL)
                    PQclear(c->res);
                c->res = r;
            } else {
                PQclear(r);
            }
        }
        if (c->state == CD__STORE_BUSY && c->sends == sends)
            cd__store_watch(c, events);
    } else {
        cd__store_watch(c, UV_READABLE);
    }
    if (c->pg == NULL)
        return; /* lost above */
    PGnotify *n;
    while ((n = PQnotifies(c->pg)) != NULL) {
        for (unsigned k = 0; k < st->nsubs; k++) {
            cd_notify *nm = RT_MSG_NEW(cd_notify, CD_MSG_NOTIFY);
            snprintf(nm->channel, sizeof nm->channel, "%s", n->relname);
            snprintf(nm->payload, sizeof nm->payload, "%s", n->extra ? n->extra : "");
            rt_send(st->subs[k], &nm->hdr);
        }
        PQfreemem(n);
    }
    if (PQstatus(c->pg) == CONNECTION_BAD)
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
}

/* ---- the actor ------------------------------------------------------------------------- */

/* The listener's probe (CD__STORE_PROBE_EVERY_MS), while it is idle on the same
 * connection and, for a coordinator, holds the lock (while it waits for
 * the lock, its requests for it say the server answers). */
static void probe(rt_actor *self, cd__store *st, const cd__store_timer_msg *m)
{
    cd__store_conn *c = &st->conns[m->conn];
    if (m->gen != c->gen || c->box == NULL || !c->listener || c->state != CD__STORE_IDLE || c->kind != CD__STORE_K_NONE ||
        (st->exclusive && !(st->locked && st->clear)))
        return;
    if (!PQsendQuery(c->pg, "SELECT 1")) {
        cd__store_lost(self, st, m->conn, PQerrorMessage(c->pg));
        return;
    }
    c->kind = CD__STORE_K_PROBE;
    c->state = CD__STORE_BUSY;
    c->sends++;
    flush_and_watch(self, st, m->conn);
    if (c->kind == CD__STORE_K_PROBE)
        cd__store_conn_timer(self, st, m->conn, CD__STORE_M_DEADLINE, CD__STORE_ANSWER_WAIT_MS);
}

/* Answers a query the bound refused (the message stays the runtime's). */
static void refuse(const cd__store *st, rt_msg *m)
{
    cd_result *r = RT_MSG_NEW(cd_result, CD_MSG_RESULT);
    r->hdr.release = cd__store_result_release;
    r->code = CD_STORE_EFULL;
    snprintf(r->error, sizeof r->error,
        "the coordinator's database backlog is full (%" PRIu64 " queries, %" PRIu64 " bytes held while the "
        "database %s); try again later",
        st->held, st->held_bytes, st->up ? "catches up" : "is unreachable");
    rt_reply(m, &r->hdr);
}

static void behaviour(rt_actor *self, rt_msg *m)
{
    cd__store *st = rt_state(self);
    switch (m->type) {
    case CD__STORE_M_START:
        for (unsigned i = 0; i < st->nconns; i++)
            cd__store_connect_conn(self, st, (int)i);
        break;
    case CD__STORE_M_IO:
        on_io(self, st, (cd__store_io_msg *)m);
        break;
    case CD__STORE_M_RECONNECT: {
        int i = ((cd__store_timer_msg *)m)->conn;
        if (i >= 0 && (unsigned)i < st->nconns && st->conns[i].state == CD__STORE_DOWN)
            cd__store_connect_conn(self, st, i);
        break;
    }
    case CD__STORE_M_RELOCK: {
        int i = ((cd__store_timer_msg *)m)->conn;
        if (i >= 0 && (unsigned)i < st->nconns && st->conns[i].listener && st->conns[i].state == CD__STORE_IDLE && !st->locked)
            ready(self, st, i);
        break;
    }
    case CD__STORE_M_PROBE:
        probe(self, st, (const cd__store_timer_msg *)m);
        break;
    case CD__STORE_M_DEADLINE: {
        const cd__store_timer_msg *d = (const cd__store_timer_msg *)m;
        cd__store_conn *c = d->conn >= 0 && (unsigned)d->conn < st->nconns ? &st->conns[d->conn] : NULL;
        if (c == NULL || d->gen != c->gen || c->box == NULL)
            break; /* a connection made since */
        if (c->state == CD__STORE_CONNECTING)
            cd__store_lost(self, st, d->conn, "no answer from the database within 10 s of connecting");
        else if ((c->kind == CD__STORE_K_PROBE || c->kind == CD__STORE_K_LISTEN || c->kind == CD__STORE_K_CLEAR ||
                     c->kind == CD__STORE_K_FENCE) && c->sends == d->sends)
            cd__store_lost(self, st, d->conn,
                c->kind == CD__STORE_K_PROBE  ? "no answer from the database to SELECT 1 within 10 s"
                : c->kind == CD__STORE_K_LISTEN ? "no answer from the database to LISTEN within 10 s"
                                                : "no answer from the database about the coordinator's fence within 10 s");
        break;
    }
    case CD__STORE_M_RECLEAR: {
        int i = ((cd__store_timer_msg *)m)->conn;
        if (i >= 0 && (unsigned)i < st->nconns && st->conns[i].listener && st->conns[i].state == CD__STORE_IDLE &&
            st->conns[i].kind == CD__STORE_K_NONE && st->locked && !st->clear && !st->gave_up)
            clear_fence(self, st, i);
        break;
    }
    case CD_MSG_SUBSCRIBE: {
        cd_subscribe *sub = (cd_subscribe *)m;
        if (st->nsubs < sizeof st->subs / sizeof st->subs[0]) {
            st->subs[st->nsubs++] = sub->who; /* the message's reference moves here */
            sub->who = NULL;
            if (st->up)
                rt_send(st->subs[st->nsubs - 1], rt_msg_new(CD_MSG_STORE_UP, sizeof(rt_msg)));
        }
        break;
    }
    case CD_MSG_QUERY:
        if (!cd__store_backlog_take(st, (cd_query *)m)) {
            refuse(st, m);
            break;
        }
        rt_take(self, m);
        cd__store_queue_push(st, (cd_query *)m, false);
        dispatch(self, st);
        break;
    default:
        break; /* timeouts of nothing, stray replies */
    }
}

static void finalize(rt_actor *self)
{
    cd__store *st = rt_state(self);
    cd_query *q;
    for (unsigned i = 0; i < st->nconns; i++) {
        cd__store_conn *c = &st->conns[i];
        if (c->q != NULL)
            rt_msg_free(&c->q->hdr);
        for (unsigned k = 0; k < c->ngroup; k++) {
            rt_msg_free(&c->group[k]->hdr);
            if (c->gres[k] != NULL)
                PQclear(c->gres[k]);
        }
        cd__store_detach(c);
    }
    while ((q = cd__store_queue_pop(st)) != NULL)
        rt_msg_free(&q->hdr);
    free(st->queue);
    free(st->conninfo);
    free(st->listen);
    for (unsigned i = 0; i < st->nsubs; i++)
        rt_actor_release(st->subs[i]);
}

rt_actor *cd_store_spawn(rt_system *sys, const cd_store_opts *opts)
{
    if (opts == NULL || opts->conninfo == NULL || opts->connections > 8 || rt_system_loop(sys) == NULL)
        return NULL;
    rt_actor_opts o = { .state_size = sizeof(cd__store), .pinned = true, .finalize = finalize, .name = "store" };
    rt_actor *a = rt_spawn(sys, behaviour, &o);
    if (a == NULL)
        return NULL;
    /* The state is ours until the first message is sent. */
    cd__store *st = rt_state(a);
    st->conninfo = sf_strdup(opts->conninfo);
    st->loop = rt_system_loop(sys);
    st->npool = opts->connections ? opts->connections : 2;
    st->limit = opts->backlog_bytes ? opts->backlog_bytes : CD_STORE_BACKLOG_DEFAULT;
    atomic_init(&st->g.lost_ms, -1);
    st->nconns = st->npool;
    if (opts->listen != NULL) {
        st->listen = sf_strdup(opts->listen);
        st->conns[st->nconns++].listener = true;
    }
    if (opts->notify_to != NULL)
        st->subs[st->nsubs++] = rt_actor_retain(opts->notify_to);
    st->exclusive = opts->exclusive && opts->listen != NULL;
    st->taken = opts->taken;
    st->taken_ctx = opts->taken_ctx;
    rt_send(a, rt_msg_new(CD__STORE_M_START, sizeof(rt_msg)));
    return a;
}

