/*
 * store_check.c — the store actor against a real PostgreSQL, whose libpq
 * connection string is argv[1] (tests/integration/store.test.mjs starts
 * the server and runs this).
 */
#include "actors/coord/migrations.h"
#include "actors/coord/store.h"
#include "tests/support/check.h"
#include "tests/support/proxy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static rt_system *sys;
static rt_actor *store;

static cd_result *sql_on(rt_actor *to, cd_query *q)
{
    rt_msg *r = proxy_call(to, &q->hdr, 20000);
    if (r != NULL && r->type != CD_MSG_RESULT) {
        rt_msg_free(r);
        return NULL;
    }
    return (cd_result *)r;
}

static cd_result *sql(const char *text)
{
    return sql_on(store, cd_query_new(text));
}

static bool is_up(void)
{
    return proxy_count(CD_MSG_STORE_UP) >= 1;
}

static void migrations_applied(void)
{
    CHECK(proxy_wait(is_up), "the store never came up");
    cd_result *r = sql("SELECT name FROM schema_migrations ORDER BY name");
    CHECK(r != NULL && r->res != NULL, "%s", r ? r->error : "no answer");
    CHECK(PQntuples(r->res) >= 1 && strcmp(PQgetvalue(r->res, 0, 0), "001_core") == 0, "migrations");
    rt_msg_free(&r->hdr);
    r = sql("SELECT count(*) FROM jobs");
    CHECK(r != NULL && r->res != NULL && strcmp(PQgetvalue(r->res, 0, 0), "0") == 0, "jobs table");
    rt_msg_free(&r->hdr);
}

static void parameters_round_trip(void)
{
    const unsigned char bin[4] = { 0, 1, 0xfe, 0xff };
    cd_query *q = cd_query_new("SELECT $1::text || '!', $2::bytea, $3::bigint + 1, $4::text IS NULL");
    cd_query_text(q, "héllo");
    cd_query_bytes(q, bin, sizeof bin);
    cd_query_int(q, 9007199254740993ll);
    cd_query_text(q, NULL);
    cd_result *r = sql_on(store, q);
    CHECK(r != NULL && r->res != NULL, "%s", r ? r->error : "no answer");
    CHECK(strcmp(PQgetvalue(r->res, 0, 0), "héllo!") == 0, "text: %s", PQgetvalue(r->res, 0, 0));
    CHECK(strcmp(PQgetvalue(r->res, 0, 1), "\\x0001feff") == 0, "bytea: %s", PQgetvalue(r->res, 0, 1));
    CHECK(strcmp(PQgetvalue(r->res, 0, 2), "9007199254740994") == 0, "bigint");
    CHECK(strcmp(PQgetvalue(r->res, 0, 3), "t") == 0, "NULL parameter");
    rt_msg_free(&r->hdr);
}

static void errors_are_reported(void)
{
    cd_result *r = sql("SELECT * FROM no_such_table");
    CHECK(r != NULL && r->res == NULL, "an error gives no result");
    CHECK(strstr(r->error, "no_such_table") != NULL, "error: %s", r->error);
    CHECK(strcmp(r->sqlstate, "42P01") == 0, "sqlstate %s", r->sqlstate);
    rt_msg_free(&r->hdr);
    r = sql("INSERT INTO tokens (kind, owner, secret_hash) VALUES ('api', 'x', decode(repeat('ab', 32), 'hex'))");
    CHECK(r != NULL && r->res != NULL, "%s", r ? r->error : "no answer");
    rt_msg_free(&r->hdr);
    r = sql("INSERT INTO tokens (kind, owner, secret_hash) VALUES ('api', 'y', decode(repeat('ab', 32), 'hex'))");
    CHECK(r != NULL && strcmp(r->sqlstate, "23505") == 0, "unique violation: %s", r ? r->error : "none");
    rt_msg_free(&r->hdr);
}

static const char *job_insert =
    "INSERT INTO jobs (owner, kernel, strategy, items, seed, spec, params, ctx_hash) "
    "VALUES ($1, 'option', 'single', 1000, 1, '{}', '\\x00', decode(repeat('00', 32), 'hex')) RETURNING id";

static bool got_notice(void)
{
    return proxy_count(CD_MSG_NOTIFY) >= 1;
}

static void many_in_flight_and_notify(void)
{
    enum { N = 200 };
    rt_msg *reqs[N], *replies[N];
    for (int i = 0; i < N; i++) {
        cd_query *q = cd_query_new(job_insert);
        cd_query_text(q, "owner-a");
        reqs[i] = &q->hdr;
    }
    int done = proxy_call_many(store, reqs, replies, N, 20000), errors = 0;
    for (int i = 0; i < N; i++) {
        if (replies[i] != NULL && (replies[i]->type != CD_MSG_RESULT || ((cd_result *)replies[i])->res == NULL))
            errors++;
        rt_msg_free(replies[i]);
    }
    CHECK(done == N, "%d of %d answered", done, N);
    CHECK(errors == 0, "%d failed", errors);
    cd_result *r = sql("SELECT count(*) FROM jobs");
    CHECK(r != NULL && strcmp(PQgetvalue(r->res, 0, 0), "200") == 0, "rows");
    rt_msg_free(&r->hdr);
    CHECK(proxy_wait(got_notice), "no NOTIFY for the new jobs");
    CHECK(strncmp(proxy_notice(0), "pending_job:", 12) == 0, "notice %s", proxy_notice(0));
}

static bool was_down_and_up(void)
{
    return proxy_count(CD_MSG_STORE_DOWN) >= 1 && proxy_count(CD_MSG_STORE_UP) >= 2 &&
        proxy_count(CD_MSG_LISTENING) >= 2;
}

static int notices_before;

static bool new_notice(void)
{
    return proxy_count(CD_MSG_NOTIFY) > notices_before;
}

static void survives_lost_connections(void)
{
    /* From a connection of its own, end every other session of this
     * database: the store's pool and its listener. */
    PGconn *admin = PQconnectdb(getenv("STORE_CHECK_CONNINFO"));
    CHECK(PQstatus(admin) == CONNECTION_OK, "admin connection: %s", PQerrorMessage(admin));
    PGresult *k = PQexec(admin, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE datname = current_database() AND pid <> pg_backend_pid()");
    CHECK(PQresultStatus(k) == PGRES_TUPLES_OK, "terminate: %s", PQerrorMessage(admin));
    CHECK(atoi(PQgetvalue(k, 0, 0)) >= 3, "terminated %s sessions", PQgetvalue(k, 0, 0));
    PQclear(k);
    PQfinish(admin);

    /* Asked while the store is finding out: must be answered anyway. */
    cd_query *q = cd_query_new(job_insert);
    cd_query_text(q, "after-blip");
    cd_result *r = sql_on(store, q);
    CHECK(r != NULL && r->res != NULL, "query across the blip: %s", r ? r->error : "no answer");
    rt_msg_free(&r->hdr);
    CHECK(proxy_wait(was_down_and_up), "down %d, up %d, listening %d", proxy_count(CD_MSG_STORE_DOWN),
        proxy_count(CD_MSG_STORE_UP), proxy_count(CD_MSG_LISTENING));
    notices_before = proxy_count(CD_MSG_NOTIFY);
    r = sql("INSERT INTO jobs (owner, kernel, strategy, items, seed, spec, params, ctx_hash) "
            "VALUES ('n', 'option', 'single', 1, 1, '{}', '\\x00', decode(repeat('00', 32), 'hex'))");
    CHECK(r != NULL && r->res != NULL, "insert");
    rt_msg_free(&r->hdr);
    CHECK(proxy_wait(new_notice), "the listener did not come back");
}

/* ---- group commit ---- */

enum { POOL = 3, MAX_BURST = 64 };

/* Queries answered without error among replies[0..n), each freed. */
static int free_replies(rt_msg **replies, int n, int *errors_at, char *sqlstate, size_t slen)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        cd_result *r = replies[i] != NULL && replies[i]->type == CD_MSG_RESULT ? (cd_result *)replies[i] : NULL;
        if (r != NULL && r->res != NULL)
            ok++;
        else if (errors_at != NULL) {
            *errors_at = i;
            snprintf(sqlstate, slen, "%s", r ? r->sqlstate : "");
        }
        rt_msg_free(replies[i]);
    }
    return ok;
}

/* A burst: first a slow query on every pool connection, so that the `n`
 * groupable inserts (keys[i], tag) sent right behind them all wait in the
 * queue together; then `extra` (groupable, may be NULL) after the inserts. */
static int burst(const int *keys, int n, const char *tag, const char *extra, rt_msg **replies)
{
    rt_msg *reqs[POOL + MAX_BURST + 1];
    int k = 0;
    for (int i = 0; i < POOL; i++)
        reqs[k++] = &cd_query_new("SELECT pg_sleep(0.3)")->hdr;
    for (int i = 0; i < n; i++) {
        cd_query *q = cd_query_new("INSERT INTO grouped (k, tag) VALUES ($1, $2)");
        cd_query_int(q, keys[i]);
        cd_query_text(q, tag);
        q->group = true;
        reqs[k++] = &q->hdr;
        if (extra != NULL && i == n / 2) {
            cd_query *x = cd_query_new(extra);
            x->group = true;
            reqs[k++] = &x->hdr;
        }
    }
    return proxy_call_many(store, reqs, replies, k, 30000);
}

/* count(*) and count(DISTINCT xid) of the rows with tag. */
static void rows_and_commits(const char *tag, int *rows, int *commits)
{
    cd_query *q = cd_query_new("SELECT count(*), count(DISTINCT xid) FROM grouped WHERE tag = $1");
    cd_query_text(q, tag);
    cd_result *r = sql_on(store, q);
    *rows = r && r->res ? atoi(PQgetvalue(r->res, 0, 0)) : -1;
    *commits = r && r->res ? atoi(PQgetvalue(r->res, 0, 1)) : -1;
    rt_msg_free(r ? &r->hdr : NULL);
}

static void group_commits_together(void)
{
    cd_result *r = sql("CREATE TABLE grouped (k int PRIMARY KEY, tag text NOT NULL, "
                       "xid bigint NOT NULL DEFAULT txid_current())");
    CHECK(r != NULL && r->res != NULL, "create: %s", r ? r->error : "no answer");
    rt_msg_free(&r->hdr);
    enum { N = 50 };
    int keys[N];
    for (int i = 0; i < N; i++)
        keys[i] = i + 1;
    rt_msg *replies[POOL + N];
    int answered = burst(keys, N, "together", NULL, replies);
    int ok = free_replies(replies, answered == POOL + N ? POOL + N : 0, NULL, NULL, 0);
    CHECK(answered == POOL + N && ok == POOL + N, "%d answered, %d without error, of %d", answered, ok, POOL + N);
    int rows, commits;
    rows_and_commits("together", &rows, &commits);
    CHECK(rows == N, "%d rows", rows);
    CHECK(commits == 1, "the %d queued inserts took %d transactions, not one", N, commits);
}

static void failing_query_fails_alone(void)
{
    enum { N = 20, BAD = 9 };
    cd_result *r = sql("INSERT INTO grouped (k, tag) VALUES (1000, 'taken')");
    CHECK(r != NULL && r->res != NULL, "insert: %s", r ? r->error : "no answer");
    rt_msg_free(&r->hdr);
    int keys[N];
    for (int i = 0; i < N; i++)
        keys[i] = i == BAD ? 1000 : 1001 + i; /* one key already taken: a unique violation */
    rt_msg *replies[POOL + N];
    int answered = burst(keys, N, "alone", NULL, replies), bad = -1;
    char sqlstate[6] = "";
    int ok = free_replies(replies, answered == POOL + N ? POOL + N : 0, &bad, sqlstate, sizeof sqlstate);
    CHECK(answered == POOL + N, "%d of %d answered", answered, POOL + N);
    CHECK(ok == POOL + N - 1 && bad == POOL + BAD, "%d without error; the failure was query %d", ok, bad);
    CHECK(strcmp(sqlstate, "23505") == 0, "the bad insert's sqlstate is '%s'", sqlstate);
    int rows, commits;
    rows_and_commits("alone", &rows, &commits);
    CHECK(rows == N - 1, "%d rows, not %d", rows, N - 1);
    CHECK(commits == N - 1, "%d transactions: the group was not run again one query at a time", commits);
}

/* The killer: waits (deadline) until a pool connection runs the group's
 * slow statement, then ends every other session of the database. */
static const char *marker = "SELECT pg_sleep(1) AS group_in_flight";
static int killed = -1;

static void *kill_mid_group(void *arg)
{
    (void)arg;
    PGconn *admin = PQconnectdb(getenv("STORE_CHECK_CONNINFO"));
    struct timespec t0, now, pause = { 0, 10000000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (PQstatus(admin) == CONNECTION_OK) {
        const char *v[1] = { marker };
        PGresult *q = PQexecParams(admin, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'",
            1, NULL, v, NULL, NULL, 0);
        bool running = PQresultStatus(q) == PGRES_TUPLES_OK && atoi(PQgetvalue(q, 0, 0)) > 0;
        PQclear(q);
        if (running) {
            PGresult *k = PQexec(admin, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                        "WHERE datname = current_database() AND pid <> pg_backend_pid()");
            killed = PQresultStatus(k) == PGRES_TUPLES_OK ? atoi(PQgetvalue(k, 0, 0)) : -1;
            PQclear(k);
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > PROXY_DEADLINE_S)
            break;
        nanosleep(&pause, NULL); /* pg_stat_activity has no event to wait on */
    }
    PQfinish(admin);
    return NULL;
}

static void group_survives_killed_connection(void)
{
    enum { N = 20 };
    int keys[N];
    for (int i = 0; i < N; i++)
        keys[i] = 2001 + i;
    pthread_t killer;
    CHECK(pthread_create(&killer, NULL, kill_mid_group, NULL) == 0, "thread");
    rt_msg *replies[POOL + N + 1];
    int answered = burst(keys, N, "killed", marker, replies);
    pthread_join(killer, NULL);
    int ok = free_replies(replies, answered == POOL + N + 1 ? POOL + N + 1 : 0, NULL, NULL, 0);
    CHECK(killed >= 1, "the group was never seen running (killed %d)", killed);
    CHECK(answered == POOL + N + 1 && ok == POOL + N + 1, "%d answered, %d without error, of %d", answered, ok,
        POOL + N + 1);
    int rows, commits;
    rows_and_commits("killed", &rows, &commits);
    CHECK(rows == N, "%d rows, not %d", rows, N);
    CHECK(commits == 1, "%d transactions: the group was not sent again whole", commits);
}

static void a_second_store_migrates_idempotently(void)
{
    cd_store_opts o = { .conninfo = getenv("STORE_CHECK_CONNINFO"), .connections = 1 };
    rt_actor *second = cd_store_spawn(sys, &o);
    CHECK(second != NULL, "spawn");
    cd_result *r = sql_on(second, cd_query_new("SELECT count(*) FROM schema_migrations"));
    rt_actor_release(second);
    CHECK(r != NULL && r->res != NULL, "%s", r ? r->error : "no answer");
    CHECK((unsigned)atoi(PQgetvalue(r->res, 0, 0)) == cd_nmigrations, "migrations applied again: %s rows for %u",
        PQgetvalue(r->res, 0, 0), cd_nmigrations);
    rt_msg_free(&r->hdr);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: store_check CONNINFO\n");
        return 2;
    }
    setenv("STORE_CHECK_CONNINFO", argv[1], 1);
    rt_actor *proxy = proxy_start(&sys);
    cd_store_opts o = { .conninfo = argv[1], .connections = 3, .listen = "pending_job", .notify_to = proxy };
    store = cd_store_spawn(sys, &o);
    if (store == NULL) {
        fprintf(stderr, "store_check: cannot spawn the store\n");
        return 1;
    }
    proxy_run(sys);

    RUN(migrations_applied);
    RUN(parameters_round_trip);
    RUN(errors_are_reported);
    RUN(many_in_flight_and_notify);
    RUN(group_commits_together);
    RUN(failing_query_fails_alone);
    RUN(survives_lost_connections);
    RUN(group_survives_killed_connection);
    RUN(a_second_store_migrates_idempotently);

    rt_actor_release(store);
    proxy_stop(sys);
    return CHECK_SUMMARY();
}
