/*
 * store.h — the store actor: simfarm's only door to PostgreSQL.
 *
 * A pinned actor (it runs on the loop thread) holding a small pool of
 * non-blocking libpq connections watched by uv_poll, plus one connection
 * that LISTENs for new jobs. On its first connection it applies the SQL
 * migrations compiled into the binary (sql/), under an advisory lock so two
 * coordinators starting together do not race. Queries wait in a queue
 * while the database is unreachable and run once it is back: the hot paths
 * of the farm never wait on the database, and a restart or blip of
 * PostgreSQL loses no query that was asked.
 *
 * PostgreSQL delivers a NOTIFY only to sessions listening at that moment,
 * so after a reconnection the store says CD_MSG_LISTENING and the receiver
 * sweeps for what it may have missed.
 *
 * Talking to it: build a query, send it with rt_request(); the reply is a
 * cd_result (or an rt_timeout). A query that was in flight when its
 * connection broke is sent again on a new connection, so it may run twice:
 * write statements to be idempotent (the schema's unique keys help).
 *
 * Group commit: queries marked `group` that wait in the queue together when
 * a connection frees up (at most CD_STORE_GROUP_MAX of them, next to each
 * other in the queue) are sent in one libpq pipeline and run as one
 * transaction, committed at its sync point; each is answered only after
 * that commit. If any of them fails, the transaction rolls back and every
 * query of the group runs again on its own, so one bad query fails alone.
 * No timer holds a query back: at a low rate each runs alone as before.
 *
 * The backlog bound: what the store holds (queries waiting or running,
 * counted by the bytes of their SQL and parameters) is bounded, by default
 * CD_STORE_BACKLOG_DEFAULT. A query that would take it past the bound is
 * not taken while the database is unreachable: it is answered at once with
 * code CD_STORE_EFULL, and from then on the store refuses every new query
 * until the database is back or what it holds has fallen to half the bound
 * (so the state does not flap on every write). Once the database is back
 * every query is taken: the queue drains, and a reload must not be refused. Refusal is the only loss the bound
 * allows, and it is never silent: a query the store has taken is run or
 * answered with an error, as before. Subscribers hear CD_MSG_STORE_FULL
 * when refusing starts and CD_MSG_STORE_ROOM when it ends, so a producer
 * (the scheduler) can stop taking work before it writes it. One query
 * alone is always taken, however large, so nothing is refused forever.
 */
#ifndef SIMFARM_ACTORS_STORE_H
#define SIMFARM_ACTORS_STORE_H

#include "runtime/runtime.h"

#include <libpq-fe.h>
#include <stdint.h>

/* Message types of the coordinator's actors. */
enum {
    CD_MSG_QUERY = RT_MSGS_STORE, /* cd_query: a request to the store */
    CD_MSG_RESULT,                       /* cd_result: its reply */
    CD_MSG_NOTIFY,                       /* cd_notify: a NOTIFY on a channel the store listens to */
    CD_MSG_STORE_UP,                     /* rt_msg: the database is reachable and migrated */
    CD_MSG_STORE_DOWN,                   /* rt_msg: the database was lost; queries wait */
    CD_MSG_LISTENING,                    /* rt_msg: LISTEN took effect (again): notices
                                            sent while not listening are lost, so sweep now */
    CD_MSG_SUBSCRIBE,                    /* cd_subscribe: add a receiver of the above */
    CD_MSG_STORE_FULL,                   /* rt_msg: the backlog reached its bound; new
                                            queries are refused (CD_STORE_EFULL) */
    CD_MSG_STORE_ROOM,                   /* rt_msg: the backlog fell to half its bound;
                                            queries are taken again */
    CD_MSG_LOCK_LOST,                    /* rt_msg: the coordinator's lock went with the
                                            LISTEN session; CD_MSG_LISTENING says it is
                                            held again */
    CD_MSG__STORE_PRIVATE = RT_MSGS_STORE_PRIVATE,
};

typedef struct cd_store_opts {
    const char *conninfo;   /* libpq connection string or URI (copied) */
    unsigned connections;   /* pool size; default 2 */
    const char *listen;     /* channel to LISTEN on, e.g. "pending_job"; NULL = none */
    rt_actor *notify_to;    /* a first subscriber (see cd_store_subscribe); may be NULL */
    uint64_t backlog_bytes; /* the bound on what the store holds (see above);
                               0 = CD_STORE_BACKLOG_DEFAULT */
    /* One coordinator per database: the listener connection (listen must be
     * set) holds a session advisory lock, taken before the store says it is
     * up, and again after each reconnect. While another session holds it
     * the store asks again for CD_STORE_LOCK_WAIT_MS, then calls taken
     * (on the loop thread) with a line saying who holds it, and is never up.
     * With the lock, it ends every session of a previous coordinator still
     * holding the fence and is up only once none is left; its own pool
     * sessions run queries only while they hold the fence (store_int.h,
     * docs/coordinator.md "Fencing"). taken is called too when the lock
     * comes back after another coordinator held it. */
    bool exclusive;
    void (*taken)(void *ctx, const char *why);
    void *taken_ctx;
} cd_store_opts;

#define CD_STORE_LOCK_WAIT_MS 5000

#define CD_STORE_BACKLOG_DEFAULT ((uint64_t)256 << 20)

/* cd_result.code is 0 or one of CD_STORE_EFULL (refused: the backlog is at
 * its bound), CD_STORE_EBROKEN (the connection broke on every try of the
 * query) and CD_STORE_EQUERY (the database answered with an error, see
 * sqlstate), from base/err.h. */

/* What the store holds and whether the database is there: gauges for
 * /health and /metrics. */
typedef struct cd_store_backlog {
    bool up;                /* the database is reachable and migrated */
    bool refusing;          /* new queries are refused (CD_STORE_EFULL) */
    uint64_t queries;       /* queries held: waiting, or running */
    uint64_t bytes;         /* their SQL and parameters, in bytes */
    uint64_t limit;         /* the bound on bytes */
    uint64_t refused;       /* queries refused for the bound since the start */
    int64_t unreachable_ms; /* how long since the database was last reachable:
                               0 while up, -1 when it never was */
    unsigned fence_waiting; /* sessions of a previous coordinator this one waits
                               to end before it reads the journal (0: none; see
                               docs/coordinator.md, "Fencing") */
} cd_store_backlog;

/* Reads the store's gauges. Any thread; each field is read on its own,
 * so the set may mix moments a few queries apart. */
void cd_store_backlog_get(rt_actor *store, cd_store_backlog *out);

typedef struct cd_subscribe {
    rt_msg hdr;
    rt_actor *who;          /* retained by the message, then by the store */
} cd_subscribe;

/* Makes `who` receive cd_notify, STORE_UP/DOWN and LISTENING from store;
 * it is told STORE_UP at once if the database is up. Any thread. */
void cd_store_subscribe(rt_actor *store, rt_actor *who);

/* Spawns the store on sys (a native runtime: it needs the libuv loop).
 * Returns NULL when the runtime is stopping or opts is invalid. The handle
 * holds one reference for the caller. */
rt_actor *cd_store_spawn(rt_system *sys, const cd_store_opts *opts);

/* ---- queries ---- */

#define CD_QUERY_MAX_PARAMS 32

typedef struct cd_query {
    rt_msg hdr;
    char *sql;
    int nparams;
    char *values[CD_QUERY_MAX_PARAMS];
    int lengths[CD_QUERY_MAX_PARAMS];
    int formats[CD_QUERY_MAX_PARAMS];
    int binary_result;      /* 1: results in binary format */
    bool group;             /* may share a transaction and its commit with other
                               `group` queries (see above): one statement with no
                               transaction control of its own */
    int attempts;           /* times sent (store-private) */
    uint64_t size;          /* store-private: bytes of sql and parameters */
    bool solo;              /* store-private: its group failed; it runs alone */
} cd_query;

/* The most queries one group commit holds. */
#define CD_STORE_GROUP_MAX 128

/* A query of one statement with $1..$n parameters. The message owns copies
 * of sql and of every parameter. */
cd_query *cd_query_new(const char *sql);

/* Appends a parameter: text (NULL = SQL NULL), bytes (bytea, binary) or an
 * integer. Return 0, or RT_EINVAL past CD_QUERY_MAX_PARAMS. */
int cd_query_text(cd_query *q, const char *value);
int cd_query_bytes(cd_query *q, const void *p, size_t n);
int cd_query_int(cd_query *q, int64_t v);

/* A new query with q's statement, parameters and flags (not its
 * store-private fields): to send again what the store answered with an
 * error, since the store frees each query it answers. */
cd_query *cd_query_copy(const cd_query *q);

typedef struct cd_result {
    rt_msg hdr;             /* hdr.req_id answers the query's request */
    PGresult *res;          /* owned; cleared with the message. NULL on error */
    char error[256];        /* empty on success */
    char sqlstate[6];       /* e.g. "23505" for a unique violation; empty if none */
    int code;               /* 0, or CD_STORE_E*: why there is no result */
} cd_result;

typedef struct cd_notify {
    rt_msg hdr;
    char channel[64];
    char payload[256];
} cd_notify;

#endif
