/*
 * store_check.c — the store actor against a real PostgreSQL, whose libpq
 * connection string is argv[1] (tests/integration/store.test.mjs starts
 * the server and runs this).
 */
#include "actors/store.h"
#include "tests/support/check.h"
#include "tests/support/proxy.h"

#include <stdlib.h>
#include <string.h>

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

static void a_second_store_migrates_idempotently(void)
{
    cd_store_opts o = { .conninfo = getenv("STORE_CHECK_CONNINFO"), .connections = 1 };
    rt_actor *second = cd_store_spawn(sys, &o);
    CHECK(second != NULL, "spawn");
    cd_result *r = sql_on(second, cd_query_new("SELECT count(*) FROM schema_migrations"));
    rt_actor_release(second);
    CHECK(r != NULL && r->res != NULL, "%s", r ? r->error : "no answer");
    CHECK(strcmp(PQgetvalue(r->res, 0, 0), "1") == 0, "migrations applied again: %s", PQgetvalue(r->res, 0, 0));
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
    RUN(survives_lost_connections);
    RUN(a_second_store_migrates_idempotently);

    rt_actor_release(store);
    proxy_stop(sys);
    return CHECK_SUMMARY();
}
