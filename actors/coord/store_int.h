/*
 * store_int.h — what the store's files share: store.c (the actor and the
 * statements it runs), store_pool.c (connections, polls, reconnection)
 * and store_queue.c (queries, the queue, the backlog). Everything here is
 * touched by the store's behaviour alone, on the loop thread, except the
 * gauges (see there).
 */
#ifndef SIMFARM_ACTORS_COORD_STORE_INT_H
#define SIMFARM_ACTORS_COORD_STORE_INT_H

#include "actors/coord/store.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

enum {
    CD__STORE_M_START = CD_MSG__STORE_PRIVATE,
    CD__STORE_M_IO,
    CD__STORE_M_RECONNECT,
    CD__STORE_M_RELOCK,   /* cd__store_timer_msg: ask for the coordinator's lock again */
    CD__STORE_M_PROBE,    /* cd__store_timer_msg: the listener's next probe is due */
    CD__STORE_M_DEADLINE, /* cd__store_timer_msg: a connection's start, or the listener's probe, is answered by now */
    CD__STORE_M_RECLEAR,  /* cd__store_timer_msg: look again for a previous coordinator's sessions */
};

/* The session advisory lock of the one coordinator of a database (the
 * migrations' transaction lock is 7216057). */
#define CD__STORE_LOCK 7216058
enum { CD__STORE_RELOCK_MS = 200 };

/* The fence (docs/coordinator.md, "Fencing"): each pool session of a
 * coordinator holds this advisory lock in shared mode, taken once it has
 * seen its own listener hold CD__STORE_LOCK, and until it ends. A
 * coordinator that takes CD__STORE_LOCK ends every other session holding
 * the fence, and reads nothing until they are gone: a dead coordinator's
 * write that was held up cannot commit after the journal was read. */
#define CD__STORE_FENCE 7216059
enum { CD__STORE_FENCE_SAY_MS = 5000 }; /* how often the wait for them is said again */

/* A database that stops answering leaves its sockets open: the listener
 * (idle but for notices) asks `SELECT 1` every CD__STORE_PROBE_EVERY_MS
 * and counts the session lost when no answer comes within
 * CD__STORE_ANSWER_WAIT_MS, as it does any connection whose start takes
 * longer. */
enum { CD__STORE_PROBE_EVERY_MS = 5000, CD__STORE_ANSWER_WAIT_MS = 10000 };

enum {
    CD__STORE_BACKOFF_MIN_MS = 100,
    CD__STORE_BACKOFF_MAX_MS = 5000,
    CD__STORE_MAX_ATTEMPTS = 3,
    CD__STORE_MAX_PREPARED = 8,
};

typedef enum cd__store_cstate { CD__STORE_DOWN, CD__STORE_CONNECTING, CD__STORE_IDLE, CD__STORE_BUSY } cd__store_cstate;
typedef enum cd__store_kind {
    CD__STORE_K_NONE, CD__STORE_K_QUERY, CD__STORE_K_GROUP, CD__STORE_K_MIGRATE, CD__STORE_K_LISTEN, CD__STORE_K_PROBE,
    CD__STORE_K_CLEAR, /* the listener ends a previous coordinator's sessions and counts the lease's term */
    CD__STORE_K_FENCE, /* a pool session takes the fence and checks the lease is its coordinator's */
} cd__store_kind;

typedef struct cd__store_box {
    uv_poll_t poll;
    rt_actor *store;         /* borrowed; NULL once detached */
    int conn;
    uint64_t gen;
    int fd;                  /* the socket watched */
} cd__store_box;

/* A statement prepared on one connection for groups. */
typedef struct cd__store_prepared {
    char *sql;
    char name[24];
    bool fresh;              /* its Parse is in the group in flight */
} cd__store_prepared;

typedef struct cd__store_conn {
    PGconn *pg;
    cd__store_box *box;
    uint64_t gen;
    cd__store_cstate state;
    bool listener;
    bool fenced;             /* a pool session of an exclusive store: it holds the fence */
    cd__store_kind kind;
    cd_query *q;             /* the query in flight (a kept request) */
    unsigned migration;      /* the migration in flight */
    PGresult *res;
    unsigned backoff_ms;
    uint64_t sends;          /* statements or groups sent, to tell a new one from the last */
    /* CD__STORE_K_GROUP: the queries of the pipeline in flight (kept requests) and
     * each one's result (first error, else last result); its statements in
     * order, each the index of its query or -1 for a Parse; the statement
     * being read. */
    cd_query *group[CD_STORE_GROUP_MAX];
    PGresult *gres[CD_STORE_GROUP_MAX];
    unsigned ngroup;
    int16_t stmt[2 * CD_STORE_GROUP_MAX];
    unsigned nstmt, gnext;
    bool gfailed;
    cd__store_prepared prep[CD__STORE_MAX_PREPARED];
    unsigned nprep;
    uint64_t prep_names;
} cd__store_conn;

/* The gauges cd_store_backlog_get reads from any thread. Only the store's
 * behaviour writes them. Each is a value of its own that no reader combines
 * with another to decide anything but what it prints, so relaxed stores and
 * loads are enough; they sit on their own cache lines, away from the
 * fields the behaviour rewrites all the time. */
typedef struct cd__store_gauges {
    char pad0[64];
    _Atomic uint64_t queries, bytes, refused;
    _Atomic int64_t lost_ms;  /* when the database was last lost (ms, uv_hrtime); 0 up; -1 never up */
    _Atomic bool up, refusing;
    _Atomic unsigned fence_waiting;
    char pad1[64];
} cd__store_gauges;

typedef struct cd__store {
    char *conninfo;
    char *listen;
    rt_actor *subs[8];       /* who hears notices and up/down */
    unsigned nsubs;
    uv_loop_t *loop;
    unsigned npool;
    cd__store_conn conns[9];           /* the pool, then the listener */
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
    bool clear;              /* the lock is held and no other coordinator's session holds the fence */
    int listener_pid;        /* the backend of the listener that cleared the fence */
    int64_t term;            /* the lease's term this coordinator counted (coordinator_lease); 0 none yet */
    uint64_t fence_since, fence_said; /* when waiting for others' sessions began, and was last said (mono ms) */
    void (*taken)(void *ctx, const char *why);
    void *taken_ctx;
    cd__store_gauges g;
} cd__store;

typedef struct cd__store_io_msg {
    rt_msg hdr;
    int conn;
    uint64_t gen;
    int events;
} cd__store_io_msg;

typedef struct cd__store_timer_msg {
    rt_msg hdr;
    int conn;
    uint64_t gen, sends; /* CD__STORE_M_PROBE, CD__STORE_M_DEADLINE: the connection and statement meant */
} cd__store_timer_msg;

/* ---- store_pool.c ---- */

/* Sends type (CD__STORE_M_PROBE, CD__STORE_M_DEADLINE) about connection i
 * as it is now, after ms. */
void cd__store_conn_timer(rt_actor *self, const cd__store *st, int i, uint32_t type, uint64_t ms);

/* Polls c's socket for events (UV_READABLE, UV_WRITABLE); each wakeup is
 * one cd__store_io_msg. */
void cd__store_watch(cd__store_conn *c, int events);

/* Forgets the prepared statements: all of them (a new session has none),
 * or only those whose Parse was in a group that failed. */
void cd__store_forget_prepared(cd__store_conn *c, bool only_fresh);

/* Stops polling c's socket; its box is freed once libuv has closed it. */
void cd__store_unwatch(cd__store_conn *c);

/* Watches the connection's socket (a new generation: what the previous
 * watch still sends is ignored). Returns false when libuv cannot. */
bool cd__store_watch_socket(rt_actor *self, cd__store *st, int i);

/* Drops c's session: its statements, its poll, its libpq connection and
 * any result it held. */
void cd__store_detach(cd__store_conn *c);

/* Sends a bare message of type to every subscriber. */
void cd__store_notify(cd__store *st, uint32_t type);

/* Whether c is a pool connection that may run queries: open, and for a
 * coordinator's store, holding the fence. */
bool cd__store_usable(const cd__store *st, const cd__store_conn *c);

/* The store is up once the schema is migrated, a connection of the pool is
 * open and, for a coordinator, its lock is held, no previous coordinator's
 * session is left and the pool connection holds the fence. */
void cd__store_maybe_up(cd__store *st);

/* A connection broke: its query or group (if any) goes back to the front
 * of the queue, in its order, and it reconnects after a backoff. A group
 * cut off before its sync point may or may not have committed: like a lone
 * query, it is sent again, and the writes are idempotent. */
void cd__store_lost(rt_actor *self, cd__store *st, int i, const char *reason);

/* Starts connection i (non-blocking); it is lost() when that fails. */
void cd__store_connect_conn(rt_actor *self, cd__store *st, int i);

/* ---- store_queue.c ---- */

/* The release of a cd_result: frees its PGresult. */
void cd__store_result_release(rt_msg *m);

/* Takes q into the backlog; false (q untouched) when the bound refuses it.
 * Once one query is refused, all are until the backlog is down to half
 * the bound; one query alone is always taken. `group` queries, the journal
 * of results already accepted, are always taken: refusing one would lose
 * accepted work, and they cannot grow without bound while the database is
 * away, because the scheduler then hands out no new chunks. */
bool cd__store_backlog_take(cd__store *st, cd_query *q);

/* q (taken) is answered or dropped: it leaves the backlog. */
void cd__store_backlog_drop(cd__store *st, const cd_query *q);

/* Whether the store is up, in its state and its gauges. */
void cd__store_set_up(cd__store *st, bool up);

/* Queues q (taken) at the back, or at the front for one that goes again. */
void cd__store_queue_push(cd__store *st, cd_query *q, bool front);

/* The query at the head of the queue (the caller's now), or NULL. */
cd_query *cd__store_queue_pop(cd__store *st);

/* Whether q may share a group commit with others. */
bool cd__store_groupable(const cd_query *q);

/* The k-th query waiting (borrowed); k < qlen. */
cd_query *cd__store_queue_at(const cd__store *st, size_t k);

#endif
