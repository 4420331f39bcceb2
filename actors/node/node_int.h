/*
 * node_int.h — what the node actor's files share, and nothing outside
 * actors/node includes: the actor's state and messages, and the nd__
 * functions one file calls in another. node.c holds the session and the
 * actor, chunks.c the chunks in hand and their results. Every function
 * here runs in the actor's behaviour, on its state only.
 */
#ifndef SIMFARM_ACTORS_NODE_INT_H
#define SIMFARM_ACTORS_NODE_INT_H

#include "actors/node/node.h"

enum {
    M_CONNECT = RT_MSGS_NODE,
    M_UP,
    M_DOWN,
    M_FRAME,
    M_TICK,
    M_DRAIN,
    M_LEAVE,
    M_DONE,
    M_PAUSE,
    M_FLUSH,
    M_WORKERS,
    M_WORKER_OFF,
    MAX_JOBS = 16,
    BATCH_MAX = 32,        /* results sealed together at most */
    BATCH_MS = 50,         /* how long a result waits for others to share its batch */
    BACKOFF_MIN_MS = 1000,
    BACKOFF_MAX_MS = 60000,
    REPORT_MS = 10000,
    CTX_RETRY_MS = 10000,     /* a job context asked for and not had: ask again */
    ENOTENROLLED = 1,
    EKEYINUSE = 6,            /* the coordinator's: this key has a live session already */
};

typedef struct bytes_msg {
    rt_msg hdr;
    uint8_t *bytes;
    size_t len;
} bytes_msg;

typedef struct done_msg {
    rt_msg hdr;
    unsigned worker;
    int err;
    uint8_t *data;         /* owned */
    size_t len;
    uint32_t elapsed_ms;
} done_msg;

typedef struct pause_msg {
    rt_msg hdr;
    bool on;
} pause_msg;

typedef struct workers_msg {
    rt_msg hdr;
    unsigned workers;
    bool off;              /* M_WORKER_OFF: worker `workers` off (true) or on */
} workers_msg;

/* One of the host's workers. */
typedef struct worker {
    nd_chunk chunk;        /* what it computes, while busy */
    bool busy;
    bool cancel;           /* its result is not wanted any more */
    bool off;              /* the host lends it no more: it gets no new chunk */
} worker;

/* A computed result waiting to be sealed into a batch. */
typedef struct unsealed {
    nd_chunk c;
    uint8_t *data;         /* owned */
    size_t len;
    uint32_t elapsed_ms;
} unsealed;

/* A signed batch: its frame until sent, its results until answered (an
 * EREPLAYOLD answer has them signed again, at a later time). */
typedef struct sealed {
    uint64_t id;           /* its envelope id, which the answer carries */
    uint8_t *bytes;        /* the frame; NULL once sent */
    size_t len;
    uint64_t ts;           /* the signature's time, seconds */
    unsealed *res;         /* owned, with their data */
    unsigned nres;
    unsigned signings;     /* how often these results were signed */
} sealed;

enum { MAX_SIGNINGS = 3 };

typedef struct jobctx {
    uint64_t job;
    uint8_t hash[32];
    sim_work sim;          /* sim.jobs NULL while fetching */
    uint8_t *work;         /* the work context's bytes */
    size_t work_len;
    unsigned users;        /* chunks of it in hand */
    uint64_t used;         /* when it last got chunks (a counter), for LRU */
    uint64_t asked_ms;     /* when its context was last asked for */
    bool live;             /* fetched or being fetched */
} jobctx;

typedef struct node {
    nd_host host;
    rt_actor *self;
    rt_system *sys;
    pr_key key;
    char *audience, *claim_token, *version, *checksum, *name;
    enum { DOWN, CONNECTING, AWAIT_WELCOME, RUNNING } phase;
    nd_state state;
    uint64_t node_id, next_id;
    uint32_t heartbeat_ms;
    int64_t tick_timer;
    unsigned backoff_ms;
    unsigned nworkers;     /* workers that take chunks: 0 .. nworkers - 1 */
    worker *work;          /* by number; those from nworkers up only finish their chunk */
    unsigned wcap;         /* entries of work: the most workers the node has had */
    unsigned computing;
    nd_chunk *queue;       /* assigned, waiting for a worker or a context */
    size_t nqueue, queue_cap;
    unsealed batch[BATCH_MAX]; /* results computed, not sealed yet */
    unsigned nbatch, batch_max;
    bool flush_armed;
    sealed *pending;       /* batches signed, not sent yet (disconnected) */
    size_t npending, pending_cap;
    sealed *unacked;       /* batches sent, not answered yet */
    size_t nunacked, unacked_cap;
    uint64_t min_ts;       /* signatures are made at this time or later (seconds) */
    jobctx jobs[MAX_JOBS];
    bool draining, stopped;
    bool paused;           /* the host holds the node back */
    bool said_draining;    /* this session said `bye draining`: it gets no more work */
    bool rejoin;           /* resumed: a new session once nothing is in hand */
    unsigned drains;
    uint64_t uses;         /* counter behind jobctx.used */
    uint64_t chunks_done, items_done, accepted, rejected;
    uint64_t report_ms, report_items; /* report_items: finished and in hand */
    bool said_idle;        /* the last report said there was no work: no more until there is */
} node;

/* ---- node.c ---- */

/* How many chunks the node computes at once: its workers that are not off
 * (1 at least: the host pauses a node it lends nothing). */
unsigned nd__parallel(const node *n);

/* The wall clock in milliseconds since the epoch (a message's ts). */
uint64_t nd__wall_ms(void);

/* Hands a printf-style line to the host's logger. */
void nd__say(node *n, nd_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Encodes m (giving it the version, an id when it has none, and the time)
 * and sends it through the host; a message that cannot be encoded is
 * logged and dropped. */
void nd__send_msg(node *n, pr_msg *m);

/* Asks the host to stop worker w's chunk: its result is not wanted. */
void nd__cancel_worker(node *n, unsigned w);

/* Stops the node for good (once): its workers' chunks are cancelled, its
 * state becomes st and the host hears code, an exit status. */
void nd__stop(node *n, nd_state st, int code);

/* After chunks left the node's hands: leaves when draining and nothing is
 * in hand, or starts the resumed node's new session. */
void nd__settle(node *n);

/* ---- chunks.c ---- */

/* Frees job context j's work and empties its slot. */
void nd__job_clear(jobctx *j);

/* One chunk of job (context hash) is no longer in hand. */
void nd__release_job(node *n, uint64_t job, const uint8_t hash[32]);

/* Hands queued chunks whose context is ready to idle workers. */
void nd__dispatch(node *n);

/* Asks the coordinator for job context j's bytes. */
void nd__request_ctx(node *n, jobctx *j);

/* The coordinator's `assign`, `ctx` and `cancel` messages. */
void nd__on_assign(node *n, const pr_msg *m);
void nd__on_ctx(node *n, const pr_msg *m);
void nd__on_cancel(node *n, const pr_msg *m);

/* A worker finished its chunk: the result goes to the next batch (d's data
 * is taken), unless it was cancelled or failed. */
void nd__on_done(node *n, done_msg *d);

/* Frees a batch's frame and results (not b itself). */
void nd__sealed_free(sealed *b);

/* Frame id has its answer (an ack or an error); true when it was a
 * completion waiting for one, which then goes to *out if out is not NULL
 * (and is freed otherwise). */
bool nd__answered(node *n, uint64_t id, sealed *out);

/* Sends the batches signed while the connection was down. */
void nd__send_pending(node *n);

/* Signs the results waiting, one batch per job. */
void nd__seal_batch(node *n);

/* A batch refused with EREPLAYOLD is signed again at a later time (a few
 * times at most); b's results are taken. */
void nd__sign_again(node *n, sealed *b);

#endif /* SIMFARM_ACTORS_NODE_INT_H */
