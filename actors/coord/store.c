/*
 * store.c — see store.h.
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
#include "actors/coord/store.h"

#include "base/log.h"
#include "actors/coord/migrations.h"

#include <inttypes.h>
#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

enum {
    M_START = CD_MSG__STORE_PRIVATE,
    M_IO,
    M_RECONNECT,
    M_RELOCK,   /* reconnect_msg: ask for the coordinator's lock again */
    M_PROBE,    /* reconnect_msg: the listener's next probe is due */
    M_DEADLINE, /* reconnect_msg: a connection's start, or the listener's probe, is answered by now */
};

/* The session advisory lock of the one coordinator of a database (the
 * migrations' transaction lock is 7216057). */
#define COORDINATOR_LOCK 7216058
enum { RELOCK_MS = 200 };

/* A database that stops answering leaves its sockets open: the listener
 * (idle but for notices) asks `SELECT 1` every PROBE_EVERY_MS and counts
 * the session lost when no answer comes within ANSWER_WAIT_MS, as it does
 * any connection whose start takes longer. */
enum { PROBE_EVERY_MS = 5000, ANSWER_WAIT_MS = 10000 };

enum { BACKOFF_MIN_MS = 100, BACKOFF_MAX_MS = 5000, MAX_ATTEMPTS = 3, MAX_PREPARED = 8 };

typedef enum cstate { C_DOWN, C_CONNECTING, C_IDLE, C_BUSY } cstate;
typedef enum job_kind { K_NONE, K_QUERY, K_GROUP, K_MIGRATE, K_LISTEN, K_PROBE } job_kind;

typedef struct box {
    uv_poll_t poll;
    rt_actor *store;         /* borrowed; NULL once detached */
    int conn;
    uint64_t gen;
    int fd;                  /* the socket watched */
} box;

/* A statement prepared on one connection for groups. */
typedef struct prepared {
    char *sql;
    char name[24];
    bool fresh;              /* its Parse is in the group in flight */
} prepared;

typedef struct conn {
    PGconn *pg;
    box *box;
    uint64_t gen;
    cstate state;
    bool listener;
    job_kind kind;
    cd_query *q;             /* the query in flight (a kept request) */
    unsigned migration;      /* the migration in flight */
    PGresult *res;
    unsigned backoff_ms;
    uint64_t sends;          /* statements or groups sent, to tell a new one from the last */
    /* K_GROUP: the queries of the pipeline in flight (kept requests) and
     * each one's result (first error, else last result); its statements in
     * order, each the index of its query or -1 for a Parse; the statement
     * being read. */
    cd_query *group[CD_STORE_GROUP_MAX];
    PGresult *gres[CD_STORE_GROUP_MAX];
    unsigned ngroup;
    int16_t stmt[2 * CD_STORE_GROUP_MAX];
    unsigned nstmt, gnext;
    bool gfailed;
    prepared prep[MAX_PREPARED];
    unsigned nprep;
    uint64_t prep_names;
} conn;

/* The gauges cd_store_backlog_get reads from any thread. Only the store's
 * behaviour writes them. Each is a value of its own that no reader combines
 * with another to decide anything but what it prints, so relaxed stores and
 * loads are enough; they sit on their own cache lines, away from the
 * fields the behaviour rewrites all the time. */
typedef struct gauges {
    char pad0[64];
    _Atomic uint64_t queries, bytes, refused;
    _Atomic int64_t lost_ms;  /* when the database was last lost (ms, uv_hrtime); 0 up; -1 never up */
    _Atomic bool up, refusing;
    char pad1[64];
} gauges;

typedef struct store {
    char *conninfo;
    char *listen;
    rt_actor *subs[8];       /* who hears notices and up/down */
    unsigned nsubs;
    uv_loop_t *loop;
    unsigned npool;
    conn conns[9];           /* the pool, then the listener */
    unsigned nconns;
    cd_query **queue;        /* waiting queries, FIFO */
    size_t qhead, qlen, qcap;
    bool migrated, migrating, up;
    uint64_t groups, grouped, groups_failed; /* group commits, their queries, those rolled back */
    uint64_t limit;          /* the backlog's bound, in bytes */
    uint64_t held, held_bytes; /* queries taken and not yet answered, and their size */
    bool refusing;
    bool exclusive, locked, gave_up; /* cd_store_opts.exclusive; the lock is held; taken was called */
    bool relocking;          /* the lock went with the LISTEN session; not held again yet */
    uint64_t lock_since;     /* when asking for the lock began to fail (mono ms), 0 when it did not */
    void (*taken)(void *ctx, const char *why);
    void *taken_ctx;
    gauges g;
} store;

typedef struct io_msg {
    rt_msg hdr;
    int conn;
    uint64_t gen;
    int events;
} io_msg;

typedef struct reconnect_msg {
    rt_msg hdr;
    int conn;
    uint64_t gen, sends; /* M_PROBE, M_DEADLINE: the connection and statement meant */
} reconnect_msg;

/* Sends type (M_PROBE, M_DEADLINE) about connection i as it is now, after ms. */
static void conn_timer(rt_actor *self, const store *st, int i, uint32_t type, uint64_t ms)
{
    reconnect_msg *m = RT_MSG_NEW(reconnect_msg, type);
    m->conn = i;
    m->gen = st->conns[i].gen;
    m->sends = st->conns[i].sends;
    rt_send_after(self, ms, &m->hdr);
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p == NULL)
        sf_oom(n);
    return memcpy(p, s, n);
}

/* ---- queries ---------------------------------------------------------------- */

static void query_release(rt_msg *m)
{
    cd_query *q = (cd_query *)m;
    free(q->sql);
    for (int i = 0; i < q->nparams; i++)
        free(q->values[i]);
}

cd_query *cd_query_new(const char *sql)
{
    cd_query *q = RT_MSG_NEW(cd_query, CD_MSG_QUERY);
    q->sql = xstrdup(sql);
    q->hdr.release = query_release;
    return q;
}

static int add_param(cd_query *q, const void *p, size_t n, int format, bool null)
{
    if (q->nparams >= CD_QUERY_MAX_PARAMS || n > INT32_MAX)
        return RT_EINVAL;
    char *v = NULL;
    if (!null) {
        v = malloc(n + 1);
        if (v == NULL)
            sf_oom(n + 1);
        memcpy(v, p, n);
        v[n] = '\0';
    }
    q->values[q->nparams] = v;
    q->lengths[q->nparams] = (int)n;
    q->formats[q->nparams] = format;
    q->nparams++;
    return 0;
}

int cd_query_text(cd_query *q, const char *value)
{
    return add_param(q, value, value ? strlen(value) : 0, 0, value == NULL);
}

int cd_query_bytes(cd_query *q, const void *p, size_t n)
{
    return add_param(q, p, n, 1, false);
}

int cd_query_int(cd_query *q, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return cd_query_text(q, buf);
}

static void result_release(rt_msg *m)
{
    cd_result *r = (cd_result *)m;
    if (r->res != NULL)
        PQclear(r->res);
}

/* ---- the backlog ------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    return (int64_t)(uv_hrtime() / 1000000);
}

static void notify(store *st, uint32_t type);

static uint64_t query_size(const cd_query *q)
{
    uint64_t n = strlen(q->sql);
    for (int i = 0; i < q->nparams; i++)
        n += (uint64_t)q->lengths[i];
    return n;
}

static void publish(store *st)
{
    atomic_store_explicit(&st->g.queries, st->held, memory_order_relaxed);
    atomic_store_explicit(&st->g.bytes, st->held_bytes, memory_order_relaxed);
    atomic_store_explicit(&st->g.refusing, st->refusing, memory_order_relaxed);
}

/* Takes q into the backlog; false (q untouched) when the bound refuses it.
 * Once one query is refused, all are until the backlog is down to half
 * the bound; one query alone is always taken. `group` queries, the journal
 * of results already accepted, are always taken: refusing one would lose
 * accepted work, and they cannot grow without bound while the database is
 * away, because the scheduler then hands out no new chunks. */
static bool backlog_take(store *st, cd_query *q)
{
    q->size = query_size(q);
    if (!q->group && st->held > 0 && !st->up && (st->refusing || st->held_bytes + q->size > st->limit)) {
        if (!st->refusing) {
            st->refusing = true;
            sf_log(SF_LOG_WARN, "store", "backlog full (%" PRIu64 " queries, %" PRIu64 " of %" PRIu64 " bytes): refusing new queries",
                st->held, st->held_bytes, st->limit);
            notify(st, CD_MSG_STORE_FULL);
        }
        atomic_store_explicit(&st->g.refused, atomic_load_explicit(&st->g.refused, memory_order_relaxed) + 1,
            memory_order_relaxed);
        publish(st);
        return false;
    }
    st->held++;
    st->held_bytes += q->size;
    publish(st);
    return true;
}

/* q (taken) is answered or dropped: it leaves the backlog. */
static void backlog_drop(store *st, const cd_query *q)
{
    /* Every query in the backlog was counted by backlog_take. */
    assert(st->held > 0 && st->held_bytes >= q->size);
    st->held--;
    st->held_bytes -= q->size;
    if (st->refusing && st->held_bytes <= st->limit / 2) {
        st->refusing = false;
        sf_log(SF_LOG_INFO, "store", "backlog down to %" PRIu64 " queries, %" PRIu64 " bytes: taking queries again", st->held,
            st->held_bytes);
        notify(st, CD_MSG_STORE_ROOM);
    }
    publish(st);
}

static void set_up(store *st, bool up)
{
    st->up = up;
    if (up && st->refusing) { /* the queue drains now: what comes next waits its turn */
        st->refusing = false;
        notify(st, CD_MSG_STORE_ROOM);
        publish(st);
    }
    atomic_store_explicit(&st->g.up, up, memory_order_relaxed);
    int64_t t = mono_ms();
    atomic_store_explicit(&st->g.lost_ms, up ? 0 : t > 0 ? t : 1, memory_order_relaxed);
}

void cd_store_backlog_get(rt_actor *store_actor, cd_store_backlog *out)
{
    const store *st = rt_state(store_actor);
    memset(out, 0, sizeof *out);
    out->up = atomic_load_explicit(&st->g.up, memory_order_relaxed);
    out->refusing = atomic_load_explicit(&st->g.refusing, memory_order_relaxed);
    out->queries = atomic_load_explicit(&st->g.queries, memory_order_relaxed);
    out->bytes = atomic_load_explicit(&st->g.bytes, memory_order_relaxed);
    out->refused = atomic_load_explicit(&st->g.refused, memory_order_relaxed);
    out->limit = st->limit; /* set before the store's first message, never changed */
    int64_t lost = atomic_load_explicit(&st->g.lost_ms, memory_order_relaxed);
    out->unreachable_ms = out->up ? 0 : lost < 0 ? -1 : mono_ms() - lost;
    if (out->unreachable_ms < -1)
        out->unreachable_ms = 0;
}

/* ---- the queue ---------------------------------------------------------------- */

static void queue_push(store *st, cd_query *q, bool front)
{
    if (st->qlen == st->qcap) {
        size_t ncap = st->qcap ? st->qcap * 2 : 16;
        cd_query **nv = malloc(ncap * sizeof *nv);
        if (nv == NULL)
            sf_oom(ncap * sizeof *nv);
        for (size_t i = 0; i < st->qlen; i++)
            nv[i] = st->queue[(st->qhead + i) % st->qcap];
        free(st->queue);
        st->queue = nv;
        st->qcap = ncap;
        st->qhead = 0;
    }
    if (front) {
        st->qhead = (st->qhead + st->qcap - 1) % st->qcap;
        st->queue[st->qhead] = q;
    } else {
        st->queue[(st->qhead + st->qlen) % st->qcap] = q;
    }
    st->qlen++;
}

static cd_query *queue_pop(store *st)
{
    if (st->qlen == 0)
        return NULL;
    cd_query *q = st->queue[st->qhead];
    st->qhead = (st->qhead + 1) % st->qcap;
    st->qlen--;
    return q;
}

/* ---- polling ---------------------------------------------------------------------- */

static void box_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    box *b = h->data;
    uv_poll_stop(h); /* level-triggered: wait until the store has looked */
    if (b->store == NULL)
        return;
    io_msg *m = RT_MSG_NEW(io_msg, M_IO);
    m->conn = b->conn;
    m->gen = b->gen;
    m->events = status < 0 ? UV_READABLE | UV_WRITABLE : events;
    rt_send(b->store, &m->hdr);
}

static void watch(conn *c, int events)
{
    if (c->box != NULL)
        uv_poll_start(&c->box->poll, events, on_poll);
}

/* Forgets the prepared statements: all of them (a new session has none),
 * or only those whose Parse was in a group that failed. */
static void forget_prepared(conn *c, bool only_fresh)
{
    unsigned keep = 0;
    for (unsigned k = 0; k < c->nprep; k++) {
        if (only_fresh && !c->prep[k].fresh)
            c->prep[keep++] = c->prep[k];
        else
            free(c->prep[k].sql);
    }
    c->nprep = keep;
}

static void unwatch(conn *c)
{
    if (c->box != NULL) {
        c->box->store = NULL;
        uv_poll_stop(&c->box->poll);
        uv_close((uv_handle_t *)&c->box->poll, box_closed);
        c->box = NULL;
    }
}

/* Watches the connection's socket (a new generation: what the previous
 * watch still sends is ignored). Returns false when libuv cannot. */
static bool watch_socket(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    box *b = calloc(1, sizeof *b);
    if (b == NULL)
        sf_oom(sizeof *b);
    b->store = self;
    b->conn = i;
    b->gen = ++c->gen;
    b->fd = PQsocket(c->pg);
    b->poll.data = b;
    if (uv_poll_init_socket(st->loop, &b->poll, b->fd) != 0) {
        free(b);
        return false;
    }
    c->box = b;
    return true;
}

static void detach(conn *c)
{
    forget_prepared(c, false);
    unwatch(c);
    if (c->pg != NULL) {
        PQfinish(c->pg);
        c->pg = NULL;
    }
    if (c->res != NULL) {
        PQclear(c->res);
        c->res = NULL;
    }
}

/* ---- connections -------------------------------------------------------------------- */

static void notify(store *st, uint32_t type)
{
    for (unsigned i = 0; i < st->nsubs; i++)
        rt_send(st->subs[i], rt_msg_new(type, sizeof(rt_msg)));
}

static void subscribe_release(rt_msg *m)
{
    cd_subscribe *s = (cd_subscribe *)m;
    if (s->who != NULL)
        rt_actor_release(s->who);
}

void cd_store_subscribe(rt_actor *store_actor, rt_actor *who)
{
    cd_subscribe *s = RT_MSG_NEW(cd_subscribe, CD_MSG_SUBSCRIBE);
    s->who = rt_actor_retain(who);
    s->hdr.release = subscribe_release;
    rt_send(store_actor, &s->hdr);
}

static void connect_conn(rt_actor *self, store *st, int i);

/* Whether a connection of the pool is open (the listener aside). */
static bool pool_connected(const store *st)
{
    for (unsigned k = 0; k < st->npool; k++)
        if (st->conns[k].state == C_IDLE || st->conns[k].state == C_BUSY)
            return true;
    return false;
}

/* The store is up once the schema is migrated, a connection of the pool is
 * open and, for a coordinator, its lock is held. */
static void maybe_up(store *st)
{
    if (!st->up && st->migrated && pool_connected(st) && (!st->exclusive || st->locked)) {
        set_up(st, true);
        notify(st, CD_MSG_STORE_UP);
    }
}

static void schedule_reconnect(rt_actor *self, conn *c, int i)
{
    c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (c->backoff_ms > BACKOFF_MAX_MS)
        c->backoff_ms = BACKOFF_MAX_MS;
    reconnect_msg *m = RT_MSG_NEW(reconnect_msg, M_RECONNECT);
    m->conn = i;
    rt_send_after(self, c->backoff_ms, &m->hdr);
}

/* A query whose connection broke goes back to the front of the queue, or
 * is answered with an error after MAX_ATTEMPTS tries. */
static void requeue(store *st, cd_query *q)
{
    if (q->attempts >= MAX_ATTEMPTS) {
        cd_result *r = RT_MSG_NEW(cd_result, CD_MSG_RESULT);
        r->hdr.release = result_release;
        r->code = CD_STORE_EBROKEN;
        snprintf(r->error, sizeof r->error, "the connection broke %d times running this query", MAX_ATTEMPTS);
        backlog_drop(st, q);
        rt_reply(&q->hdr, &r->hdr);
        rt_msg_free(&q->hdr);
    } else {
        queue_push(st, q, true);
    }
}

/* A connection broke: its query or group (if any) goes back to the front
 * of the queue, in its order, and it reconnects after a backoff. A group
 * cut off before its sync point may or may not have committed: like a lone
 * query, it is sent again, and the writes are idempotent. */
static void lost(rt_actor *self, store *st, int i, const char *reason)
{
    conn *c = &st->conns[i];
    char why[256]; /* reason may be libpq's, freed with the connection below */
    snprintf(why, sizeof why, "%s", reason);
    bool quiet = c->state == C_CONNECTING && c->backoff_ms != 0; /* said at the first try */
    if (c->kind == K_QUERY && c->q != NULL)
        requeue(st, c->q);
    if (c->kind == K_GROUP) {
        for (unsigned k = c->ngroup; k-- > 0;) {
            if (c->gres[k] != NULL)
                PQclear(c->gres[k]);
            c->gres[k] = NULL;
            requeue(st, c->group[k]);
            c->group[k] = NULL;
        }
        c->ngroup = 0;
    }
    if (c->kind == K_MIGRATE)
        st->migrating = false;
    bool unlocked = c->listener && st->locked;
    if (unlocked)
        st->locked = false; /* the lock went with the session */
    c->q = NULL;
    c->kind = K_NONE;
    detach(c);
    c->state = C_DOWN;

    if (st->up && !pool_connected(st)) {
        set_up(st, false);
        notify(st, CD_MSG_STORE_DOWN);
    }
    schedule_reconnect(self, c, i);
    if (!quiet)
        sf_log(SF_LOG_WARN, "store", "connection %d lost: %s (connecting again in %u ms)", i, why, c->backoff_ms);
    if (unlocked) {
        /* Another coordinator could take the lock before this one is back:
         * no work is handed out in between. */
        st->relocking = true;
        sf_log(SF_LOG_INFO, "store", "the coordinator's lock went with connection %d: no work is handed out until it is held again", i);
        notify(st, CD_MSG_LOCK_LOST);
    }
}

static void connect_conn(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    c->pg = PQconnectStart(st->conninfo);
    if (c->pg == NULL)
        sf_oom(sizeof(void *));
    if (PQstatus(c->pg) == CONNECTION_BAD || PQsetnonblocking(c->pg, 1) != 0) {
        lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    if (!watch_socket(self, st, i)) {
        lost(self, st, i, "cannot watch the connection's socket");
        return;
    }
    c->state = C_CONNECTING;
    watch(c, UV_WRITABLE); /* libpq: start as if polling said "writing" */
    conn_timer(self, st, i, M_DEADLINE, ANSWER_WAIT_MS);
}

/* ---- running statements -------------------------------------------------------------- */

/* Sends what libpq has buffered; watches for the answer. */
static void flush_and_watch(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    int f = PQflush(c->pg);
    if (f < 0) {
        lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    watch(c, f == 1 ? UV_READABLE | UV_WRITABLE : UV_READABLE);
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

static bool start_migration(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    char *sql = migration_sql(c->migration);
    int ok = PQsendQuery(c->pg, sql);
    free(sql);
    if (!ok) {
        lost(self, st, i, PQerrorMessage(c->pg));
        return false;
    }
    c->kind = K_MIGRATE;
    c->state = C_BUSY;
    c->sends++;
    st->migrating = true;
    flush_and_watch(self, st, i);
    return true;
}

static bool groupable(const cd_query *q)
{
    return q->group && !q->solo;
}

static cd_query *queue_at(const store *st, size_t k)
{
    return st->queue[(st->qhead + k) % st->qcap];
}

/* The prepared statement for q's text on c, its Parse added to the
 * pipeline if it is new; one with an empty name (run q unprepared) when c
 * has prepared MAX_PREPARED already; NULL when libpq refuses. */
static const prepared *prepare(conn *c, const cd_query *q)
{
    static const prepared unnamed = { .sql = NULL };
    for (unsigned k = 0; k < c->nprep; k++)
        if (strcmp(c->prep[k].sql, q->sql) == 0)
            return &c->prep[k];
    if (c->nprep == MAX_PREPARED)
        return &unnamed;
    prepared *p = &c->prep[c->nprep];
    snprintf(p->name, sizeof p->name, "simfarm_g%" PRIu64, ++c->prep_names);
    if (!PQsendPrepare(c->pg, p->name, q->sql, q->nparams, NULL))
        return NULL;
    p->sql = xstrdup(q->sql);
    p->fresh = true;
    c->nprep++;
    c->stmt[c->nstmt++] = -1;
    return p;
}

/* Sends the groupable queries at the head of the queue (at least two) to
 * the idle connection i as one pipeline, one transaction. */
static void send_group(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    c->ngroup = 0;
    c->nstmt = 0;
    c->gnext = 0;
    c->gfailed = false;
    while (c->ngroup < CD_STORE_GROUP_MAX && st->qlen > 0 && groupable(queue_at(st, 0))) {
        cd_query *q = queue_pop(st);
        q->attempts++;
        c->group[c->ngroup] = q;
        c->gres[c->ngroup] = NULL;
        c->ngroup++;
    }
    c->kind = K_GROUP;
    c->sends++;
    if (!PQenterPipelineMode(c->pg)) {
        lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    for (unsigned k = 0; k < c->ngroup; k++) {
        cd_query *q = c->group[k];
        const prepared *p = prepare(c, q);
        if (p == NULL) {
            lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        int ok = p->name[0] != '\0'
            ? PQsendQueryPrepared(c->pg, p->name, q->nparams, (const char *const *)q->values, q->lengths,
                  q->formats, q->binary_result)
            : PQsendQueryParams(c->pg, q->sql, q->nparams, NULL, (const char *const *)q->values, q->lengths,
                  q->formats, q->binary_result);
        if (!ok) {
            lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        c->stmt[c->nstmt++] = (int16_t)k;
    }
    if (!PQpipelineSync(c->pg)) {
        lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    st->groups++;
    st->grouped += c->ngroup;
    c->state = C_BUSY;
    flush_and_watch(self, st, i);
}

/* Starts the next waiting query, or group of queries, on every idle pool
 * connection. */
static void dispatch(rt_actor *self, store *st)
{
    if (!st->migrated)
        return;
    for (unsigned i = 0; i < st->npool && st->qlen > 0; i++) {
        conn *c = &st->conns[i];
        if (c->state != C_IDLE)
            continue;
        if (st->qlen >= 2 && groupable(queue_at(st, 0)) && groupable(queue_at(st, 1))) {
            send_group(self, st, (int)i);
            continue;
        }
        cd_query *q = queue_pop(st);
        q->attempts++;
        c->sends++;
        if (!PQsendQueryParams(c->pg, q->sql, q->nparams, NULL, (const char *const *)q->values,
                q->lengths, q->formats, q->binary_result)) {
            c->q = q;
            c->kind = K_QUERY;
            lost(self, st, (int)i, PQerrorMessage(c->pg));
            continue;
        }
        c->q = q;
        c->kind = K_QUERY;
        c->state = C_BUSY;
        flush_and_watch(self, st, (int)i);
    }
}

/* A connection is ready: migrate, LISTEN, or take queued queries. */
static void ready(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    c->state = C_IDLE;
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
                chan ? chan : "\"\"", COORDINATOR_LOCK, COORDINATOR_LOCK);
        else
            snprintf(sql, sizeof sql, "LISTEN %s", chan ? chan : "\"\"");
        PQfreemem(chan);
        if (!PQsendQuery(c->pg, sql)) {
            lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        c->kind = K_LISTEN;
        c->state = C_BUSY;
        c->sends++;
        flush_and_watch(self, st, i);
        if (c->kind == K_LISTEN)
            conn_timer(self, st, i, M_DEADLINE, ANSWER_WAIT_MS);
        return;
    }
    if (!st->migrated) {
        if (!st->migrating) {
            c->migration = 0;
            start_migration(self, st, i);
        }
        return; /* another connection migrates; this one waits for dispatch */
    }
    maybe_up(st);
    watch(c, UV_READABLE); /* an idle connection reads only to notice EOF */
    dispatch(self, st);
}

/* The answer to the listener's request for the coordinator's lock (res:
 * lock taken, and the holder's line and pid when another holds it).
 * Taken: the store may be up.
 * Held by another session: asked again every RELOCK_MS, and after
 * CD_STORE_LOCK_WAIT_MS of that, taken() hears who holds it. */
static void lock_answer(rt_actor *self, store *st, int i, const PGresult *res)
{
    if (PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
        if (st->lock_since != 0)
            sf_log(SF_LOG_INFO, "store", "the coordinator's lock on the database is free again: taken");
        else if (st->relocking)
            sf_log(SF_LOG_INFO, "store", "the coordinator's lock is held again");
        st->locked = true;
        st->relocking = false;
        st->lock_since = 0;
        maybe_up(st);
        return;
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
        reconnect_msg *m = RT_MSG_NEW(reconnect_msg, M_RELOCK);
        m->conn = i;
        rt_send_after(self, RELOCK_MS, &m->hdr);
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
static void answer(store *st, cd_query *q, PGresult *res)
{
    cd_result *r = RT_MSG_NEW(cd_result, CD_MSG_RESULT);
    r->hdr.release = result_release;
    if (result_ok(res)) {
        r->res = res;
    } else {
        const char *msg = res ? PQresultErrorMessage(res) : "no result";
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        snprintf(r->error, sizeof r->error, "%s", msg && *msg ? msg : "query failed");
        size_t n = strlen(r->error);
        while (n > 0 && (r->error[n - 1] == '\n' || r->error[n - 1] == ' '))
            r->error[--n] = '\0';
        if (state != NULL)
            snprintf(r->sqlstate, sizeof r->sqlstate, "%s", state);
        r->code = CD_STORE_EQUERY;
        if (res)
            PQclear(res);
    }
    backlog_drop(st, q);
    rt_reply(&q->hdr, &r->hdr);
    rt_msg_free(&q->hdr);
}

static void reply(store *st, conn *c)
{
    answer(st, c->q, c->res);
    c->res = NULL;
    c->q = NULL;
}

/* The group on c reached its sync point: all committed (answer each), or
 * none (run each alone, in order, so each gets its own answer). */
static void group_done(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    if (!PQexitPipelineMode(c->pg)) {
        lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    unsigned n = c->ngroup;
    c->ngroup = 0;
    c->kind = K_NONE;
    c->state = C_IDLE;
    if (c->gfailed)
        forget_prepared(c, true);
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
            queue_push(st, c->group[k], true);
        }
    }
    for (unsigned k = 0; k < n; k++) {
        c->group[k] = NULL;
        c->gres[k] = NULL;
    }
    watch(c, UV_READABLE);
    dispatch(self, st);
}

/* Reads what has arrived of the group on c: each statement's results end
 * with a NULL from PQgetResult, the sync point with PGRES_PIPELINE_SYNC. */
static void read_group(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    while (c->kind == K_GROUP && !PQisBusy(c->pg)) {
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
static void finished(rt_actor *self, store *st, int i)
{
    conn *c = &st->conns[i];
    job_kind k = c->kind;
    c->kind = K_NONE;
    c->state = C_IDLE;
    if (k == K_QUERY) {
        reply(st, c);
        watch(c, UV_READABLE);
        dispatch(self, st);
        return;
    }
    if (k == K_PROBE) { /* answered, whatever it says: the server is there */
        if (c->res != NULL)
            PQclear(c->res);
        c->res = NULL;
        watch(c, UV_READABLE);
        conn_timer(self, st, i, M_PROBE, PROBE_EVERY_MS);
        return;
    }
    ExecStatusType s = c->res ? PQresultStatus(c->res) : PGRES_FATAL_ERROR;
    bool ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
    if (!ok)
        sf_log(SF_LOG_WARN, "store", "%s failed: %s", k == K_MIGRATE ? cd_migrations[c->migration].name : "LISTEN",
            c->res ? PQresultErrorMessage(c->res) : "no result");
    PGresult *lock = NULL;
    if (k == K_LISTEN && ok && st->exclusive) {
        lock = c->res;
        c->res = NULL;
    }
    if (c->res != NULL) {
        PQclear(c->res);
        c->res = NULL;
    }
    if (k == K_LISTEN) {
        if (!ok) {
            lost(self, st, i, "LISTEN failed");
            return;
        }
        c->backoff_ms = 0;
        watch(c, UV_READABLE);
        if (lock != NULL) {
            lock_answer(self, st, i, lock);
            PQclear(lock);
        }
        if (!st->exclusive || st->locked) {
            notify(st, CD_MSG_LISTENING);
            conn_timer(self, st, i, M_PROBE, PROBE_EVERY_MS);
        }
        return;
    }
    /* K_MIGRATE */
    if (!ok) {
        st->migrating = false; /* a bad schema: retry later, loudly */
        lost(self, st, i, "migration failed");
        return;
    }
    if (++c->migration < cd_nmigrations) {
        start_migration(self, st, i);
        return;
    }
    st->migrating = false;
    st->migrated = true;
    for (unsigned k2 = 0; k2 < st->npool; k2++)
        if (st->conns[k2].state == C_IDLE)
            ready(self, st, (int)k2);
}

static void on_io(rt_actor *self, store *st, const io_msg *m)
{
    if (m->conn < 0 || (unsigned)m->conn >= st->nconns)
        return;
    conn *c = &st->conns[m->conn];
    if (c->box == NULL || m->gen != c->gen)
        return; /* from a connection that is gone */
    int i = m->conn;

    if (c->state == C_CONNECTING) {
        PostgresPollingStatusType ps = PQconnectPoll(c->pg);
        /* libpq opens another socket when it moves on to the next host or
         * address (host=a,b; a name with several addresses) */
        if (ps != PGRES_POLLING_FAILED && PQsocket(c->pg) != c->box->fd) {
            unwatch(c);
            if (!watch_socket(self, st, i)) {
                lost(self, st, i, "cannot watch the connection's socket");
                return;
            }
            conn_timer(self, st, i, M_DEADLINE, ANSWER_WAIT_MS);
        }
        switch (ps) {
        case PGRES_POLLING_READING: watch(c, UV_READABLE); return;
        case PGRES_POLLING_WRITING: watch(c, UV_WRITABLE); return;
        case PGRES_POLLING_OK: ready(self, st, i); return;
        default: lost(self, st, i, PQerrorMessage(c->pg)); return;
        }
    }
    /* While a statement or group is being sent, send more of it whatever
     * woke us, and read too: a pipeline's results can fill the socket
     * before all of it is written, and a server blocked on writing them
     * reads nothing. */
    int events = UV_READABLE;
    uint64_t sends = c->sends;
    if (c->state == C_BUSY) {
        int f = PQflush(c->pg);
        if (f < 0) {
            lost(self, st, i, PQerrorMessage(c->pg));
            return;
        }
        if (f == 1)
            events |= UV_WRITABLE;
    }
    if (!PQconsumeInput(c->pg)) {
        lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    if (c->state == C_BUSY && c->kind == K_GROUP) {
        read_group(self, st, i);
        if (c->state == C_BUSY && c->sends == sends)
            watch(c, events);
    } else if (c->state == C_BUSY) {
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
        if (c->state == C_BUSY && c->sends == sends)
            watch(c, events);
    } else {
        watch(c, UV_READABLE);
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
        lost(self, st, i, PQerrorMessage(c->pg));
}

/* ---- the actor ------------------------------------------------------------------------- */

/* The listener's probe (PROBE_EVERY_MS), while it is idle on the same
 * connection and, for a coordinator, holds the lock (while it waits for
 * the lock, its requests for it say the server answers). */
static void probe(rt_actor *self, store *st, const reconnect_msg *m)
{
    conn *c = &st->conns[m->conn];
    if (m->gen != c->gen || c->box == NULL || !c->listener || c->state != C_IDLE || c->kind != K_NONE ||
        (st->exclusive && !st->locked))
        return;
    if (!PQsendQuery(c->pg, "SELECT 1")) {
        lost(self, st, m->conn, PQerrorMessage(c->pg));
        return;
    }
    c->kind = K_PROBE;
    c->state = C_BUSY;
    c->sends++;
    flush_and_watch(self, st, m->conn);
    if (c->kind == K_PROBE)
        conn_timer(self, st, m->conn, M_DEADLINE, ANSWER_WAIT_MS);
}

/* Answers a query the bound refused (the message stays the runtime's). */
static void refuse(const store *st, rt_msg *m)
{
    cd_result *r = RT_MSG_NEW(cd_result, CD_MSG_RESULT);
    r->hdr.release = result_release;
    r->code = CD_STORE_EFULL;
    snprintf(r->error, sizeof r->error,
        "the coordinator's database backlog is full (%" PRIu64 " queries, %" PRIu64 " bytes held while the "
        "database %s); try again later",
        st->held, st->held_bytes, st->up ? "catches up" : "is unreachable");
    rt_reply(m, &r->hdr);
}

static void behaviour(rt_actor *self, rt_msg *m)
{
    store *st = rt_state(self);
    switch (m->type) {
    case M_START:
        for (unsigned i = 0; i < st->nconns; i++)
            connect_conn(self, st, (int)i);
        break;
    case M_IO:
        on_io(self, st, (io_msg *)m);
        break;
    case M_RECONNECT: {
        int i = ((reconnect_msg *)m)->conn;
        if (i >= 0 && (unsigned)i < st->nconns && st->conns[i].state == C_DOWN)
            connect_conn(self, st, i);
        break;
    }
    case M_RELOCK: {
        int i = ((reconnect_msg *)m)->conn;
        if (i >= 0 && (unsigned)i < st->nconns && st->conns[i].listener && st->conns[i].state == C_IDLE && !st->locked)
            ready(self, st, i);
        break;
    }
    case M_PROBE:
        probe(self, st, (const reconnect_msg *)m);
        break;
    case M_DEADLINE: {
        const reconnect_msg *d = (const reconnect_msg *)m;
        conn *c = d->conn >= 0 && (unsigned)d->conn < st->nconns ? &st->conns[d->conn] : NULL;
        if (c == NULL || d->gen != c->gen || c->box == NULL)
            break; /* a connection made since */
        if (c->state == C_CONNECTING)
            lost(self, st, d->conn, "no answer from the database within 10 s of connecting");
        else if ((c->kind == K_PROBE || c->kind == K_LISTEN) && c->sends == d->sends)
            lost(self, st, d->conn, c->kind == K_PROBE ? "no answer from the database to SELECT 1 within 10 s"
                                                       : "no answer from the database to LISTEN within 10 s");
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
        if (!backlog_take(st, (cd_query *)m)) {
            refuse(st, m);
            break;
        }
        rt_take(self, m);
        queue_push(st, (cd_query *)m, false);
        dispatch(self, st);
        break;
    default:
        break; /* timeouts of nothing, stray replies */
    }
}

static void finalize(rt_actor *self)
{
    store *st = rt_state(self);
    cd_query *q;
    for (unsigned i = 0; i < st->nconns; i++) {
        conn *c = &st->conns[i];
        if (c->q != NULL)
            rt_msg_free(&c->q->hdr);
        for (unsigned k = 0; k < c->ngroup; k++) {
            rt_msg_free(&c->group[k]->hdr);
            if (c->gres[k] != NULL)
                PQclear(c->gres[k]);
        }
        detach(c);
    }
    while ((q = queue_pop(st)) != NULL)
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
    rt_actor_opts o = { .state_size = sizeof(store), .pinned = true, .finalize = finalize, .name = "store" };
    rt_actor *a = rt_spawn(sys, behaviour, &o);
    if (a == NULL)
        return NULL;
    /* The state is ours until the first message is sent. */
    store *st = rt_state(a);
    st->conninfo = xstrdup(opts->conninfo);
    st->loop = rt_system_loop(sys);
    st->npool = opts->connections ? opts->connections : 2;
    st->limit = opts->backlog_bytes ? opts->backlog_bytes : CD_STORE_BACKLOG_DEFAULT;
    atomic_init(&st->g.lost_ms, -1);
    st->nconns = st->npool;
    if (opts->listen != NULL) {
        st->listen = xstrdup(opts->listen);
        st->conns[st->nconns++].listener = true;
    }
    if (opts->notify_to != NULL)
        st->subs[st->nsubs++] = rt_actor_retain(opts->notify_to);
    st->exclusive = opts->exclusive && opts->listen != NULL;
    st->taken = opts->taken;
    st->taken_ctx = opts->taken_ctx;
    rt_send(a, rt_msg_new(M_START, sizeof(rt_msg)));
    return a;
}
