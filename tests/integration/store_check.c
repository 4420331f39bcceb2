/*
 * store_check.c — the store actor against a real PostgreSQL, whose libpq
 * connection string is argv[1] (tests/integration/store.test.mjs starts
 * the server and runs this).
 *
 * The runtime's loop runs on a second thread; the test's main thread asks
 * questions through a proxy actor and waits for each answer on a condition
 * variable, with a deadline.
 */
#include "actors/store.h"
#include "tests/support/check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { M_ASK = RT_MSG_USER + 1, DEADLINE_S = 30 };

typedef struct slot {
    rt_msg *reply;         /* cd_result, rt_timeout; owned by the slot */
    int64_t req;
    bool done;
} slot;

typedef struct ask {
    rt_msg hdr;
    cd_query *q;
    slot *slot;
} ask;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    slot *pending[1024];
    int npending;
    char notices[64][384];
    int nnotices;           /* stored (the first 64) */
    int total_notices;
    int ups, downs, listening;
} px = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static rt_system *sys;
static rt_actor *proxy, *store;
static pthread_t loop_thread;

static void proxy_behaviour(rt_actor *self, rt_msg *m)
{
    pthread_mutex_lock(&px.lock);
    switch (m->type) {
    case M_ASK: {
        ask *a = (ask *)m;
        a->slot->req = rt_request(self, store, &a->q->hdr, 20000);
        px.pending[px.npending++] = a->slot;
        break;
    }
    case CD_MSG_RESULT:
    case RT_MSG_TIMEOUT:
        for (int i = 0; i < px.npending; i++) {
            if (px.pending[i]->req == (int64_t)m->req_id) {
                slot *s = px.pending[i];
                px.pending[i] = px.pending[--px.npending];
                rt_take(self, m);
                s->reply = m;
                s->done = true;
                break;
            }
        }
        break;
    case CD_MSG_NOTIFY:
        px.total_notices++;
        if (px.nnotices < 64)
            snprintf(px.notices[px.nnotices++], sizeof px.notices[0], "%s:%s", ((cd_notify *)m)->channel,
                ((cd_notify *)m)->payload);
        break;
    case CD_MSG_STORE_UP: px.ups++; break;
    case CD_MSG_STORE_DOWN: px.downs++; break;
    case CD_MSG_LISTENING: px.listening++; break;
    }
    pthread_cond_broadcast(&px.cond);
    pthread_mutex_unlock(&px.lock);
}

static struct timespec deadline(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += DEADLINE_S;
    return ts;
}

/* Sends q through the proxy and waits for its answer. Returns the reply
 * (the caller frees it), or NULL at the deadline. */
static rt_msg *run(cd_query *q)
{
    slot s = { 0 };
    ask *a = RT_MSG_NEW(ask, M_ASK);
    a->q = q;
    a->slot = &s;
    rt_send(proxy, &a->hdr);
    struct timespec dl = deadline();
    pthread_mutex_lock(&px.lock);
    while (!s.done && pthread_cond_timedwait(&px.cond, &px.lock, &dl) == 0)
        ;
    pthread_mutex_unlock(&px.lock);
    return s.done ? s.reply : NULL;
}

/* Waits until pred() holds, with the deadline. */
static bool wait_for(bool (*pred)(void))
{
    struct timespec dl = deadline();
    pthread_mutex_lock(&px.lock);
    bool ok;
    while (!(ok = pred()) && pthread_cond_timedwait(&px.cond, &px.lock, &dl) == 0)
        ;
    pthread_mutex_unlock(&px.lock);
    return ok;
}

static cd_result *sql(const char *text)
{
    rt_msg *r = run(cd_query_new(text));
    return r != NULL && r->type == CD_MSG_RESULT ? (cd_result *)r : NULL;
}

static void *loop_main(void *arg)
{
    (void)arg;
    rt_system_run(sys);
    return NULL;
}

static bool is_up(void)
{
    return px.ups >= 1;
}

static void migrations_applied(void)
{
    CHECK(wait_for(is_up), "the store never came up");
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
    q->binary_result = 0;
    cd_result *r = (cd_result *)run(q);
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

static int notices(void)
{
    pthread_mutex_lock(&px.lock);
    int n = px.total_notices;
    pthread_mutex_unlock(&px.lock);
    return n;
}

static bool got_notice(void)
{
    return px.nnotices >= 1;
}

static void many_in_flight_and_notify(void)
{
    enum { N = 200 };
    slot slots[N];
    memset(slots, 0, sizeof slots);
    for (int i = 0; i < N; i++) {
        cd_query *q = cd_query_new(job_insert);
        cd_query_text(q, "owner-a");
        ask *a = RT_MSG_NEW(ask, M_ASK);
        a->q = q;
        a->slot = &slots[i];
        rt_send(proxy, &a->hdr);
    }
    struct timespec dl = deadline();
    int done = 0, errors = 0;
    pthread_mutex_lock(&px.lock);
    for (;;) {
        done = 0;
        for (int i = 0; i < N; i++)
            done += slots[i].done;
        if (done == N || pthread_cond_timedwait(&px.cond, &px.lock, &dl) != 0)
            break;
    }
    pthread_mutex_unlock(&px.lock);
    for (int i = 0; i < N; i++) {
        if (slots[i].done && (slots[i].reply->type != CD_MSG_RESULT || ((cd_result *)slots[i].reply)->res == NULL))
            errors++;
        if (slots[i].done)
            rt_msg_free(slots[i].reply);
    }
    CHECK(done == N, "%d of %d answered", done, N);
    CHECK(errors == 0, "%d failed", errors);
    cd_result *r = sql("SELECT count(*) FROM jobs");
    CHECK(r != NULL && strcmp(PQgetvalue(r->res, 0, 0), "200") == 0, "rows");
    rt_msg_free(&r->hdr);
    CHECK(wait_for(got_notice), "no NOTIFY for the new jobs");
    CHECK(strncmp(px.notices[0], "pending_job:", 12) == 0, "notice %s", px.notices[0]);
    CHECK(notices() >= 1, "notices");
}

static bool was_down_and_up(void)
{
    return px.downs >= 1 && px.ups >= 2 && px.listening >= 2;
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
    cd_result *r = (cd_result *)run(q);
    CHECK(r != NULL && r->hdr.type == CD_MSG_RESULT && r->res != NULL, "query across the blip: %s",
        r ? r->error : "no answer");
    rt_msg_free(&r->hdr);
    CHECK(wait_for(was_down_and_up), "down %d, up %d, listening %d", px.downs, px.ups, px.listening);
    int before = notices();
    r = sql("INSERT INTO jobs (owner, kernel, strategy, items, seed, spec, params, ctx_hash) "
            "VALUES ('n', 'option', 'single', 1, 1, '{}', '\\x00', decode(repeat('00', 32), 'hex'))");
    CHECK(r != NULL && r->res != NULL, "insert");
    rt_msg_free(&r->hdr);
    struct timespec dl = deadline();
    pthread_mutex_lock(&px.lock);
    while (px.total_notices <= before && pthread_cond_timedwait(&px.cond, &px.lock, &dl) == 0)
        ;
    int after = px.total_notices;
    pthread_mutex_unlock(&px.lock);
    CHECK(after > before, "the listener did not come back");
}

static void a_second_store_migrates_idempotently(void)
{
    cd_store_opts o = { .conninfo = getenv("STORE_CHECK_CONNINFO"), .connections = 1 };
    rt_actor *second = cd_store_spawn(sys, &o);
    CHECK(second != NULL, "spawn");
    rt_actor *saved = store;
    store = second;
    cd_result *r = sql("SELECT count(*) FROM schema_migrations");
    store = saved;
    CHECK(r != NULL && r->res != NULL, "%s", r ? r->error : "no answer");
    CHECK(strcmp(PQgetvalue(r->res, 0, 0), "1") == 0, "migrations applied again: %s", PQgetvalue(r->res, 0, 0));
    rt_msg_free(&r->hdr);
    rt_actor_release(second);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: store_check CONNINFO\n");
        return 2;
    }
    setenv("STORE_CHECK_CONNINFO", argv[1], 1);
    sys = rt_system_create(&(rt_system_opts){ .workers = 2 }, NULL);
    proxy = rt_spawn(sys, proxy_behaviour, NULL);
    cd_store_opts o = { .conninfo = argv[1], .connections = 3, .listen = "pending_job", .notify_to = proxy };
    store = cd_store_spawn(sys, &o);
    if (store == NULL) {
        fprintf(stderr, "store_check: cannot spawn the store\n");
        return 1;
    }
    pthread_create(&loop_thread, NULL, loop_main, NULL);

    RUN(migrations_applied);
    RUN(parameters_round_trip);
    RUN(errors_are_reported);
    RUN(many_in_flight_and_notify);
    RUN(survives_lost_connections);
    RUN(a_second_store_migrates_idempotently);

    rt_actor_release(store);
    rt_actor_release(proxy);
    rt_system_stop(sys);
    pthread_join(loop_thread, NULL);
    rt_system_destroy(sys);
    return CHECK_SUMMARY();
}
