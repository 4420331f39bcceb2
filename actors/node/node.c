/*
 * node.c — see node.h.
 *
 * The actor keeps the chunks in hand (queued, or on a worker), the work
 * contexts they need, and the signed results the coordinator has not had
 * yet. Frames arrive from the host whole; frames leave through the host.
 */
#include "actors/node/node.h"

#include "sched/sched.h"
#include "sim/ctx.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    M_CONNECT = RT_MSG_USER + 0x1600,
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
    MAX_JOBS = 16,
    BATCH_MAX = 32,        /* results sealed together at most */
    BATCH_MS = 50,         /* how long a result waits for others to share its batch */
    BACKOFF_MIN_MS = 1000,
    BACKOFF_MAX_MS = 60000,
    REPORT_MS = 10000,
    CTX_RETRY_MS = 10000,     /* a job context asked for and not had: ask again */
    ENOTENROLLED = 1,
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
} workers_msg;

/* One of the host's workers. */
typedef struct worker {
    nd_chunk chunk;        /* what it computes, while busy */
    bool busy;
    bool cancel;           /* its result is not wanted any more */
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
    char *audience, *claim_token, *version, *checksum;
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

const char *nd_state_name(nd_state st)
{
    switch (st) {
    case ND_SETUP: return "starting";
    case ND_VERIFYING: return "checking this node's key";
    case ND_REGISTERING: return "enrolling with the claim token";
    case ND_RUNNING: return "running";
    case ND_UNAVAILABLE: return "coordinator unavailable";
    case ND_NOT_FOUND: return "not enrolled";
    case ND_STOPPED: return "stopped";
    case ND_PAUSED: return "paused";
    }
    return "?";
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void say(node *n, nd_level level, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    n->host.log(n->host.ctx, level, line);
}

static void set_state(node *n, nd_state st, const char *detail)
{
    n->state = st;
    if (n->host.state != NULL)
        n->host.state(n->host.ctx, st, detail ? detail : "");
}

/* Asks the host to stop worker w's chunk: its result is not wanted. */
static void cancel_worker(node *n, unsigned w)
{
    n->work[w].cancel = true;
    if (n->host.cancel != NULL)
        n->host.cancel(n->host.ctx, w);
}

static void stop(node *n, nd_state st, int code)
{
    if (n->stopped)
        return;
    n->stopped = true;
    for (unsigned w = 0; w < n->wcap; w++) /* leaving: nothing more is sent */
        if (n->work[w].busy && !n->work[w].cancel)
            cancel_worker(n, w);
    if (n->tick_timer > 0) {
        rt_timer_cancel(n->sys, n->tick_timer);
        n->tick_timer = 0;
    }
    set_state(n, st, NULL);
    n->host.stopped(n->host.ctx, code);
}

/* ---- talking ------------------------------------------------------------------------- */

static void send_msg(node *n, pr_msg *m)
{
    uint8_t *out = NULL;
    size_t len = 0;
    m->v = PR_VERSION;
    if (m->id == 0)
        m->id = ++n->next_id;
    m->ts = wall_ms();
    int rc = pr_encode(m, &out, &len);
    if (rc != 0) {
        say(n, ND_WARN, "cannot encode %s: %s", pr_type_name(m->type), sf_strerror(rc));
        return;
    }
    n->host.send(n->host.ctx, out, len);
    free(out);
}

static void send_bye(node *n, pr_bye_reason reason)
{
    pr_msg b;
    memset(&b, 0, sizeof b);
    b.type = PR_MSG_BYE;
    b.body.bye.reason = reason;
    send_msg(n, &b);
    if (reason == PR_BYE_DRAINING)
        n->said_draining = true;
}

static void schedule_reconnect(node *n)
{
    n->backoff_ms = n->backoff_ms ? n->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (n->backoff_ms > BACKOFF_MAX_MS)
        n->backoff_ms = BACKOFF_MAX_MS;
    /* ±25 % jitter, so a fleet that lost its coordinator does not return in step. */
    uint32_t r = randombytes_uniform(1001);
    uint64_t delay = (uint64_t)n->backoff_ms * (750 + r / 2) / 1000;
    rt_send_after(n->self, delay, rt_msg_new(M_CONNECT, sizeof(rt_msg)));
}

static void say_hello(node *n, const pr_msg *challenge)
{
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HELLO;
    m.body.hello.version = n->version;
    m.body.hello.claim_token = n->claim_token;
    m.body.hello.checksum = n->checksum;
    n->host.caps(n->host.ctx, &m.body.hello.caps);
    m.body.hello.caps.max_parallel = n->nworkers;
    if (pr_hello_sign(&m.body.hello, &n->key, n->audience, (uint64_t)time(NULL), challenge->body.challenge.nonce) != 0)
        return;
    send_msg(n, &m);
    n->phase = AWAIT_WELCOME;
}

/* ---- chunks and work contexts ---------------------------------------------------------- */

/* Work contexts are cached: one is kept after its last chunk in hand is
 * done, so the next chunks of the job need no second fetch, until its slot
 * is wanted for another job (least recently used first). */
static jobctx *job_find(node *n, uint64_t job, const uint8_t hash[32])
{
    for (int i = 0; i < MAX_JOBS; i++)
        if (n->jobs[i].live && n->jobs[i].job == job && memcmp(n->jobs[i].hash, hash, 32) == 0)
            return &n->jobs[i];
    return NULL;
}

static void job_clear(jobctx *j)
{
    sim_work_close(&j->sim);
    free(j->work);
    memset(j, 0, sizeof *j);
}

/* A slot for a new job: an empty one, or the least recently used context no
 * chunk in hand needs; NULL when every slot has chunks in hand. */
static jobctx *job_slot(node *n)
{
    jobctx *best = NULL;
    for (int i = 0; i < MAX_JOBS; i++) {
        jobctx *j = &n->jobs[i];
        if (!j->live)
            return j;
        if (j->users == 0 && (best == NULL || j->used < best->used))
            best = j;
    }
    if (best != NULL)
        job_clear(best);
    return best;
}

static void release_job(node *n, uint64_t job, const uint8_t hash[32])
{
    jobctx *j = job_find(n, job, hash);
    if (j != NULL && j->users > 0)
        j->users--;
}

static unsigned worker_backend(const node *n, unsigned w)
{
    return n->host.worker_backend != NULL ? n->host.worker_backend(n->host.ctx, w) : 0;
}

/* An idle worker for chunk c: one of the backend c is sized for, else any;
 * nworkers when none is idle. */
static unsigned idle_worker(const node *n, const nd_chunk *c)
{
    unsigned any = n->nworkers;
    for (unsigned w = 0; w < n->nworkers; w++) {
        if (n->work[w].busy)
            continue;
        if (worker_backend(n, w) == c->backend)
            return w;
        if (any == n->nworkers)
            any = w;
    }
    return any;
}

/* Hands queued chunks whose context is ready to idle workers. */
static void dispatch(node *n)
{
    for (size_t i = 0; i < n->nqueue;) {
        unsigned w = idle_worker(n, &n->queue[i]);
        if (w == n->nworkers)
            return;
        jobctx *j = job_find(n, n->queue[i].job, n->queue[i].hash);
        if (j == NULL || j->sim.jobs == NULL) {
            i++;
            continue;
        }
        n->work[w].busy = true;
        n->work[w].cancel = false;
        n->work[w].chunk = n->queue[i];
        n->work[w].chunk.backend = worker_backend(n, w);
        n->computing++;
        n->queue[i] = n->queue[--n->nqueue];
        n->host.compute(n->host.ctx, w, &n->work[w].chunk, &j->sim, j->work, j->work_len);
    }
}

static void request_ctx(node *n, jobctx *j)
{
    j->asked_ms = rt_mono_ms();
    pr_msg q;
    memset(&q, 0, sizeof q);
    q.type = PR_MSG_CTX_REQ;
    q.body.ctx_req.job = j->job;
    memcpy(q.body.ctx_req.hash, j->hash, 32);
    send_msg(n, &q);
}

static void on_assign(node *n, const pr_msg *m)
{
    const pr_assign *a = &m->body.assign;
    jobctx *j = job_find(n, a->job, a->ctx_hash);
    if (j == NULL) {
        if ((j = job_slot(n)) == NULL) {
            say(n, ND_WARN, "more than %d jobs at once; chunks of job %llu dropped", MAX_JOBS,
                (unsigned long long)a->job);
            return;
        }
        j->live = true;
        j->job = a->job;
        memcpy(j->hash, a->ctx_hash, 32);
        request_ctx(n, j);
    } else if (j->sim.jobs == NULL && j->users == 0) {
        request_ctx(n, j); /* an earlier fetch was lost or refused: try again */
    }
    for (uint32_t i = 0; i < a->nchunks; i++) {
        if (n->nqueue == n->queue_cap)
            n->queue = sf_grow(n->queue, &n->queue_cap, sizeof *n->queue);
        nd_chunk *c = &n->queue[n->nqueue++];
        c->job = a->job;
        c->id = a->chunks[i].chunk;
        c->start = a->chunks[i].start;
        c->count = a->chunks[i].count;
        c->variant = a->chunks[i].variant;
        c->backend = a->chunks[i].backend;
        memcpy(c->token, a->chunks[i].token, 16);
        memcpy(c->hash, a->ctx_hash, 32);
        j->users++;
    }
    j->used = ++n->uses;
    dispatch(n);
}

static bool nothing_in_hand(const node *n)
{
    return n->nqueue == 0 && n->computing == 0 && n->nbatch == 0 && n->nunacked == 0 && n->npending == 0;
}

static void maybe_leave(node *n)
{
    if (n->draining && nothing_in_hand(n)) {
        if (n->phase == RUNNING)
            send_bye(n, PR_BYE_LEAVING);
        say(n, ND_INFO, "drained, leaving (%llu chunks computed)", (unsigned long long)n->chunks_done);
        stop(n, ND_STOPPED, SF_EXIT_OK);
    }
}

/* A resumed node leaves the session that said `bye draining` once nothing
 * is in hand; on_down starts the new one. */
static void maybe_rejoin(node *n)
{
    if (n->rejoin && !n->paused && !n->draining && n->phase == RUNNING && nothing_in_hand(n)) {
        say(n, ND_INFO, "resuming: a new session");
        send_bye(n, PR_BYE_LEAVING);
        n->phase = AWAIT_WELCOME; /* nothing more to send on this session */
    }
}

static void settle(node *n)
{
    maybe_leave(n);
    if (!n->stopped)
        maybe_rejoin(n);
}

static bool cancel_hits(const pr_cancel *c, uint64_t job, uint64_t id)
{
    if (c->job != job)
        return false;
    if (c->nchunks == 0)
        return true;
    for (uint32_t i = 0; i < c->nchunks; i++)
        if (c->chunks[i] == id)
            return true;
    return false;
}

/* The coordinator stops chunks (a job cancelled or ended): those waiting
 * are dropped, and those being computed are stopped (within a slice, see
 * nd_compute, where the host can stop its workers) and their results not
 * sent. */
static void on_cancel(node *n, const pr_msg *m)
{
    const pr_cancel *c = &m->body.cancel;
    unsigned dropped = 0;
    for (size_t i = 0; i < n->nqueue;) {
        if (cancel_hits(c, n->queue[i].job, n->queue[i].id)) {
            release_job(n, n->queue[i].job, n->queue[i].hash);
            n->queue[i] = n->queue[--n->nqueue];
            dropped++;
        } else {
            i++;
        }
    }
    for (unsigned w = 0; w < n->wcap; w++)
        if (n->work[w].busy && !n->work[w].cancel && cancel_hits(c, n->work[w].chunk.job, n->work[w].chunk.id)) {
            cancel_worker(n, w);
            dropped++;
        }
    if (dropped > 0)
        say(n, ND_INFO, "job %llu: %u chunks cancelled (%s)", (unsigned long long)c->job, dropped,
            c->reason && c->reason[0] ? c->reason : "no reason given");
    dispatch(n);
    settle(n);
}

static void on_ctx(node *n, const pr_msg *m)
{
    const pr_ctx *c = &m->body.ctx;
    jobctx *j = job_find(n, c->job, c->hash);
    if (j == NULL || j->sim.jobs != NULL)
        return;
    char err[256];
    if (sim_work_open(&j->sim, c->bytes.ptr, c->bytes.len, err, sizeof err) != 0) {
        /* its chunks are dropped: no heartbeat lists them, so their leases
         * end and they go to other nodes */
        size_t dropped = 0;
        for (size_t i = 0; i < n->nqueue;) {
            if (n->queue[i].job == j->job && memcmp(n->queue[i].hash, j->hash, 32) == 0) {
                n->queue[i] = n->queue[--n->nqueue];
                j->users--;
                dropped++;
            } else {
                i++;
            }
        }
        say(n, ND_WARN, "job %llu cannot run here: %s; %zu chunks left to other nodes", (unsigned long long)c->job,
            err, dropped);
        settle(n);
        return;
    }
    j->work = malloc(c->bytes.len ? c->bytes.len : 1);
    if (j->work == NULL)
        sf_oom(c->bytes.len);
    memcpy(j->work, c->bytes.ptr, c->bytes.len);
    j->work_len = c->bytes.len;
    dispatch(n);
}

static void sealed_free(sealed *b)
{
    free(b->bytes);
    for (unsigned i = 0; i < b->nres; i++)
        free(b->res[i].data);
    free(b->res);
}

/* Frame id has its answer (an ack or an error); true when it was a
 * completion waiting for one, which then goes to *out if out is not NULL
 * (and is freed otherwise). */
static bool answered(node *n, uint64_t id, sealed *out)
{
    for (size_t i = 0; i < n->nunacked; i++)
        if (n->unacked[i].id == id) {
            if (out != NULL)
                *out = n->unacked[i];
            else
                sealed_free(&n->unacked[i]);
            n->unacked[i] = n->unacked[--n->nunacked];
            return true;
        }
    return false;
}

static void send_pending(node *n)
{
    for (size_t i = 0; i < n->npending; i++) {
        sealed *b = &n->pending[i];
        n->host.send(n->host.ctx, b->bytes, b->len);
        free(b->bytes);
        b->bytes = NULL;
        if (n->nunacked == n->unacked_cap)
            n->unacked = sf_grow(n->unacked, &n->unacked_cap, sizeof *n->unacked);
        n->unacked[n->nunacked++] = *b;
    }
    n->npending = 0;
}

/* Signs results res[0 .. k) (one job, one context; the batch takes them
 * over) into a frame that is sent now, or once the connection is back. */
static void seal(node *n, unsealed *res, unsigned k, unsigned signings)
{
    pr_result r[BATCH_MAX];
    for (unsigned i = 0; i < k; i++) {
        const unsealed *u = &res[i];
        r[i] = (pr_result){ .chunk = u->c.id, .start = u->c.start, .count = u->c.count,
            .elapsed_ms = u->elapsed_ms, .data = { u->data, (uint32_t)u->len }, .backend = u->c.backend };
        memcpy(r[i].token, u->c.token, 16);
    }
    uint64_t now = (uint64_t)time(NULL);
    sealed b = { .id = ++n->next_id, .ts = now > n->min_ts ? now : n->min_ts, .res = res, .nres = k,
        .signings = signings + 1 };
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE;
    m.v = PR_VERSION;
    m.id = b.id;
    m.ts = wall_ms();
    randombytes_buf(m.body.complete.batch.nonce, sizeof m.body.complete.batch.nonce);
    m.body.complete.batch.job = res[0].c.job;
    memcpy(m.body.complete.batch.ctx_hash, res[0].c.hash, 32);
    m.body.complete.batch.results = r;
    m.body.complete.batch.nresults = k;
    uint8_t *payload = NULL;
    if (pr_complete_seal(&m.body.complete, &payload, &n->key, n->audience, b.ts) == 0 &&
        pr_encode(&m, &b.bytes, &b.len) == 0) {
        if (n->npending == n->pending_cap)
            n->pending = sf_grow(n->pending, &n->pending_cap, sizeof *n->pending);
        n->pending[n->npending++] = b;
    } else {
        say(n, ND_WARN, "cannot sign %u results: their leases bring their chunks back", k);
        sealed_free(&b);
    }
    free(payload);
    if (n->phase == RUNNING)
        send_pending(n);
}

/* Signs the results waiting, one batch per job (fewer frames, and one
 * signature for the coordinator to check per batch). */
static void seal_batch(node *n)
{
    bool done[BATCH_MAX] = { false };
    for (unsigned i = 0; i < n->nbatch; i++) {
        if (done[i])
            continue;
        const nd_chunk *first = &n->batch[i].c;
        unsealed *res = malloc(n->nbatch * sizeof *res);
        if (res == NULL)
            sf_oom(n->nbatch * sizeof *res);
        unsigned k = 0;
        for (unsigned b = i; b < n->nbatch; b++) {
            const unsealed *u = &n->batch[b];
            if (done[b] || u->c.job != first->job || memcmp(u->c.hash, first->hash, 32) != 0)
                continue;
            done[b] = true;
            res[k++] = *u;
        }
        seal(n, res, k, 0);
    }
    n->nbatch = 0;
}

/* A completion refused with EREPLAYOLD: signed at or below the time the
 * coordinator's replay window still remembers. Its results are signed
 * again, a second later than that signature, a few times at most. */
static void sign_again(node *n, sealed *b)
{
    if (b->signings >= MAX_SIGNINGS) {
        say(n, ND_WARN, "%u results refused %u times: their leases bring their chunks back", b->nres, b->signings);
        sealed_free(b);
        return;
    }
    if (n->min_ts < b->ts + 1)
        n->min_ts = b->ts + 1;
    say(n, ND_INFO, "signing %u results again", b->nres);
    seal(n, b->res, b->nres, b->signings); /* b was sent: its frame is gone */
}

/* Keeps a computed result for the next batch: sealed at once when the batch
 * is full or nothing else is being computed (the end of a job, a drain),
 * else within BATCH_MS. */
static void batch_result(node *n, const nd_chunk *c, done_msg *d)
{
    n->batch[n->nbatch++] = (unsealed){ .c = *c, .data = d->data, .len = d->len, .elapsed_ms = d->elapsed_ms };
    d->data = NULL; /* the batch owns it now */
    if (n->nbatch >= n->batch_max || (n->computing == 0 && n->nqueue == 0)) {
        seal_batch(n);
    } else if (!n->flush_armed) {
        n->flush_armed = true;
        rt_send_after(n->self, BATCH_MS, rt_msg_new(M_FLUSH, sizeof(rt_msg)));
    }
}

static void on_done(node *n, done_msg *d)
{
    if (d->worker >= n->wcap || !n->work[d->worker].busy)
        return;
    unsigned w = d->worker;
    nd_chunk c = n->work[w].chunk;
    n->work[w].busy = false;
    n->computing--;
    if (n->work[w].cancel) {
        /* the coordinator no longer wants it: nothing to send */
        if (d->err == ND_ECANCELLED)
            say(n, ND_INFO, "chunk %llu of job %llu stopped after %u ms", (unsigned long long)c.id,
                (unsigned long long)c.job, d->elapsed_ms);
    } else if (d->err == 0) {
        n->chunks_done++;
        n->items_done += c.count;
        batch_result(n, &c, d);
    } else {
        say(n, ND_WARN, "chunk %llu of job %llu failed: %s", (unsigned long long)c.id, (unsigned long long)c.job,
            sf_strerror(d->err));
    }
    release_job(n, c.job, c.hash);
    dispatch(n);
    settle(n);
}

static void heartbeat(node *n)
{
    if (n->phase != RUNNING)
        return;
    /* a context that has not come (its request was refused, say while the
     * coordinator's database was away) is asked for again */
    uint64_t now = rt_mono_ms();
    for (int i = 0; i < MAX_JOBS; i++) {
        jobctx *j = &n->jobs[i];
        if (j->live && j->sim.jobs == NULL && j->users > 0 && now - j->asked_ms >= CTX_RETRY_MS)
            request_ctx(n, j);
    }
    uint64_t ids[256];
    uint32_t k = 0;
    for (size_t i = 0; i < n->nqueue && k < 256; i++)
        ids[k++] = n->queue[i].id;
    for (unsigned w = 0; w < n->wcap && k < 256; w++)
        if (n->work[w].busy)
            ids[k++] = n->work[w].chunk.id;
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HEARTBEAT;
    n->host.stats(n->host.ctx, &m.body.heartbeat);
    m.body.heartbeat.in_flight = k ? ids : NULL;
    m.body.heartbeat.nin_flight = k;
    m.body.heartbeat.max_parallel = n->nworkers;
    send_msg(n, &m);

    if (now - n->report_ms >= REPORT_MS) {
        /* never less than the last report: a chunk that has just ended may
         * have left the workers' count before it reached items_done */
        uint64_t items = n->items_done + (n->host.items_in_hand != NULL ? n->host.items_in_hand(n->host.ctx) : 0);
        items = items > n->report_items ? items : n->report_items;
        double rate = n->report_ms ? (double)(items - n->report_items) * 1000.0 / (double)(now - n->report_ms) : 0;
        /* An idle node says so once, not every 10 s until work comes. */
        bool idle = k == 0 && items == n->report_items;
        if (idle && !n->said_idle)
            say(n, ND_INFO, "idle, waiting for work: %llu chunks, %llu items, %llu accepted so far",
                (unsigned long long)n->chunks_done, (unsigned long long)n->items_done,
                (unsigned long long)n->accepted);
        else if (!idle)
            say(n, ND_INFO, "%llu chunks, %llu items, %.0f items/s, %llu accepted", (unsigned long long)n->chunks_done,
                (unsigned long long)n->items_done, rate, (unsigned long long)n->accepted);
        n->said_idle = idle;
        n->report_ms = now;
        n->report_items = items;
    }
}

static void on_welcome(node *n, const pr_msg *m)
{
    n->node_id = m->body.welcome.node_id;
    n->heartbeat_ms = m->body.welcome.heartbeat_ms ? m->body.welcome.heartbeat_ms : 5000;
    n->phase = RUNNING;
    n->backoff_ms = 0;
    n->said_draining = false;
    if (n->claim_token != NULL) { /* used up: the key is enrolled now, and a reconnect must not present it */
        free(n->claim_token);
        n->claim_token = NULL;
    }
    if (n->tick_timer > 0)
        rt_timer_cancel(n->sys, n->tick_timer);
    n->tick_timer = rt_send_every(n->self, n->heartbeat_ms, M_TICK, 0);
    if (n->report_ms == 0) { /* the first report's items/s counts from here, not from 0 */
        n->report_ms = rt_mono_ms();
        n->report_items = n->items_done;
    }
    char detail[64];
    snprintf(detail, sizeof detail, "node %llu", (unsigned long long)n->node_id);
    set_state(n, n->paused ? ND_PAUSED : ND_RUNNING, detail);
    say(n, ND_INFO, "connected to %s as node %llu, %u workers", n->audience, (unsigned long long)n->node_id,
        n->nworkers);
    send_pending(n);
    for (int i = 0; i < MAX_JOBS; i++) /* fetches the lost connection cut short */
        if (n->jobs[i].live && n->jobs[i].sim.jobs == NULL && n->jobs[i].users > 0)
            request_ctx(n, &n->jobs[i]);
    if (n->draining || n->paused)
        send_bye(n, PR_BYE_DRAINING);
}

static void on_frame(node *n, const bytes_msg *f)
{
    pr_msg m;
    int rc = pr_decode(&m, f->bytes, f->len);
    if (rc != 0) {
        say(n, ND_WARN, "bad frame from the coordinator: %s %s", sf_strerror(rc), m.err_at);
        return;
    }
    switch (m.type) {
    case PR_MSG_CHALLENGE:
        say_hello(n, &m);
        break;
    case PR_MSG_WELCOME:
        on_welcome(n, &m);
        break;
    case PR_MSG_ASSIGN:
        on_assign(n, &m);
        break;
    case PR_MSG_CTX:
        on_ctx(n, &m);
        break;
    case PR_MSG_CANCEL:
        on_cancel(n, &m);
        break;
    case PR_MSG_COMPLETE_ACK:
        answered(n, m.id, NULL);
        for (uint32_t i = 0; i < m.body.complete_ack.noutcomes; i++) {
            if (m.body.complete_ack.outcomes[i].outcome == PR_OUTCOME_ACCEPTED)
                n->accepted++;
            else
                n->rejected++;
        }
        settle(n);
        break;
    case PR_MSG_ERROR:
        say(n, ND_WARN, "the coordinator says: %s (code %d)", m.body.error.message ? m.body.error.message : "?",
            m.body.error.code);
        sealed refused;
        if (answered(n, m.id, &refused)) {
            if (m.body.error.code == PR_EREPLAYOLD)
                sign_again(n, &refused);
            else /* its leases bring its chunks back */
                sealed_free(&refused);
            settle(n);
        }
        if (m.body.error.code == ENOTENROLLED) {
            say(n, ND_WARN, "this key is not enrolled there: start with --claim-token TOKEN");
            stop(n, ND_NOT_FOUND, SF_EXIT_NOT_ENROLLED);
        }
        break;
    default:
        break;
    }
    pr_msg_free(&m);
}

static void on_down(node *n, const bytes_msg *d)
{
    bool was_running = n->phase == RUNNING;
    n->phase = DOWN;
    /* an unacknowledged result may be lost: its lease brings it back */
    for (size_t i = 0; i < n->nunacked; i++)
        sealed_free(&n->unacked[i]);
    n->nunacked = 0;
    if (n->tick_timer > 0) {
        rt_timer_cancel(n->sys, n->tick_timer);
        n->tick_timer = 0;
    }
    if (n->stopped)
        return;
    if (n->drains > 0 && n->draining) {
        stop(n, ND_STOPPED, SF_EXIT_OK);
        return;
    }
    if (n->rejoin) {
        /* We left on purpose: back after the shortest backoff. */
        n->rejoin = false;
        set_state(n, ND_SETUP, "resuming");
        rt_send_after(n->self, BACKOFF_MIN_MS, rt_msg_new(M_CONNECT, sizeof(rt_msg)));
        return;
    }
    char why[200];
    snprintf(why, sizeof why, "%.*s", (int)d->len, d->bytes ? (const char *)d->bytes : "");
    set_state(n, ND_UNAVAILABLE, why);
    say(n, ND_WARN, "%s %s (%s); trying again", was_running ? "lost" : "cannot reach", n->audience, why);
    schedule_reconnect(n);
}

static void on_drain(node *n)
{
    if (++n->drains > 1) {
        say(n, ND_WARN, "second signal, leaving now");
        stop(n, ND_STOPPED, SF_EXIT_OK);
        return;
    }
    say(n, ND_WARN, "draining: finishing the chunks in hand (signal again to leave now)");
    n->draining = true;
    for (size_t i = 0; i < n->nqueue; i++) /* not started: their leases return them */
        release_job(n, n->queue[i].job, n->queue[i].hash);
    n->nqueue = 0;
    if (n->phase == RUNNING)
        send_bye(n, PR_BYE_DRAINING);
    maybe_leave(n);
}

static void on_pause(node *n, bool on)
{
    if (n->draining || n->paused == on)
        return;
    n->paused = on;
    if (on) {
        n->rejoin = false;
        say(n, ND_INFO, "paused: finishing the chunks in hand, taking no new ones");
        if (n->phase == RUNNING) {
            if (!n->said_draining)
                send_bye(n, PR_BYE_DRAINING);
            set_state(n, ND_PAUSED, NULL);
        }
        return;
    }
    say(n, ND_INFO, "resumed");
    if (n->phase == RUNNING && n->said_draining) {
        n->rejoin = true;
        set_state(n, ND_RUNNING, "resuming once the chunks in hand are sent");
        maybe_rejoin(n);
    } else if (n->phase == RUNNING) {
        set_state(n, ND_RUNNING, NULL);
    }
}

/* Room for workers 0 .. count - 1 (new ones idle); nworkers becomes count. */
static void grow_workers(node *n, unsigned count)
{
    if (count > n->wcap) {
        worker *w = realloc(n->work, count * sizeof *w);
        if (w == NULL)
            sf_oom(count * sizeof *w);
        memset(w + n->wcap, 0, (count - n->wcap) * sizeof *w);
        n->work = w;
        n->wcap = count;
    }
    n->nworkers = count;
}

/* The host computes `count` chunks at once from now on: more get chunks
 * from the queue at once; with fewer, the workers past the count finish
 * the chunk they hold and get no other. The coordinator hears it in a
 * heartbeat sent now, and sizes what it hands out to it. */
static void on_workers(node *n, unsigned count)
{
    if (count == 0 || count > ND_MAX_WORKERS || count == n->nworkers)
        return;
    unsigned was = n->nworkers;
    grow_workers(n, count);
    say(n, ND_INFO, "%u worker%s, from %u", count, count == 1 ? "" : "s", was);
    heartbeat(n);
    dispatch(n);
}

/* ---- the actor -------------------------------------------------------------------------- */

static void node_behaviour(rt_actor *self, rt_msg *m)
{
    node *n = rt_state(self);
    if (n->stopped)
        return;
    switch (m->type) {
    case M_CONNECT:
        if (n->phase == DOWN) {
            n->phase = CONNECTING;
            n->host.connect(n->host.ctx);
        }
        break;
    case M_UP:
        n->phase = AWAIT_WELCOME; /* the challenge comes first */
        set_state(n, n->claim_token ? ND_REGISTERING : ND_VERIFYING, NULL);
        break;
    case M_DOWN:
        on_down(n, (bytes_msg *)m);
        break;
    case M_FRAME:
        on_frame(n, (bytes_msg *)m);
        break;
    case M_TICK:
        heartbeat(n);
        break;
    case M_DONE:
        on_done(n, (done_msg *)m);
        break;
    case M_FLUSH:
        n->flush_armed = false;
        if (n->nbatch > 0) {
            seal_batch(n);
            settle(n);
        }
        break;
    case M_DRAIN:
        on_drain(n);
        break;
    case M_LEAVE:
        stop(n, ND_STOPPED, SF_EXIT_OK);
        break;
    case M_PAUSE:
        on_pause(n, ((pause_msg *)m)->on);
        break;
    case M_WORKERS:
        on_workers(n, ((workers_msg *)m)->workers);
        break;
    default:
        break;
    }
}

static void node_final(rt_actor *self)
{
    node *n = rt_state(self);
    for (size_t i = 0; i < n->npending; i++)
        sealed_free(&n->pending[i]);
    free(n->pending);
    for (size_t i = 0; i < n->nunacked; i++)
        sealed_free(&n->unacked[i]);
    free(n->unacked);
    for (unsigned i = 0; i < n->nbatch; i++)
        free(n->batch[i].data);
    free(n->queue);
    for (int i = 0; i < MAX_JOBS; i++)
        job_clear(&n->jobs[i]);
    free(n->work);
    free(n->audience);
    free(n->claim_token);
    free(n->version);
    free(n->checksum);
    pr_key_wipe(&n->key);
}

static char *dup_or_null(const char *s)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        sf_oom(strlen(s) + 1);
    return d;
}

rt_actor *nd_spawn(rt_system *sys, const nd_config *cfg, const nd_host *host)
{
    rt_actor_opts o = { .state_size = sizeof(node), .pinned = true, .finalize = node_final, .name = "node" };
    rt_actor *a = rt_spawn(sys, node_behaviour, &o);
    node *n = rt_state(a);
    n->host = *host;
    n->self = a;
    n->sys = sys;
    n->key = cfg->key;
    n->audience = dup_or_null(cfg->audience);
    n->claim_token = cfg->claim_token && cfg->claim_token[0] ? dup_or_null(cfg->claim_token) : NULL;
    n->version = dup_or_null(cfg->version ? cfg->version : "simfarm-node " SF_VERSION);
    n->checksum = dup_or_null(cfg->checksum);
    n->batch_max = cfg->batch >= 1 && cfg->batch <= BATCH_MAX ? cfg->batch : BATCH_MAX;
    grow_workers(n, cfg->workers == 0 ? 1 : cfg->workers > ND_MAX_WORKERS ? ND_MAX_WORKERS : cfg->workers);
    set_state(n, ND_SETUP, NULL);
    rt_send(a, rt_msg_new(M_CONNECT, sizeof(rt_msg)));
    return a;
}

/* ---- what the host tells the node -------------------------------------------------------- */

static void bytes_release(rt_msg *m)
{
    free(((bytes_msg *)m)->bytes);
}

static void send_bytes(rt_actor *to, uint32_t type, uint8_t *bytes, size_t len)
{
    bytes_msg *f = RT_MSG_NEW(bytes_msg, type);
    f->hdr.release = bytes_release;
    f->bytes = bytes;
    f->len = len;
    rt_send(to, &f->hdr);
}

void nd_up(rt_actor *to)
{
    rt_send(to, rt_msg_new(M_UP, sizeof(rt_msg)));
}

void nd_down(rt_actor *to, const char *why)
{
    char *w = dup_or_null(why ? why : "closed");
    send_bytes(to, M_DOWN, (uint8_t *)w, strlen(w));
}

void nd_frame(rt_actor *to, uint8_t *bytes, size_t len)
{
    send_bytes(to, M_FRAME, bytes, len);
}

static void done_release(rt_msg *m)
{
    free(((done_msg *)m)->data);
}

void nd_done(rt_actor *to, unsigned w, int err, uint8_t *data, size_t len, uint32_t elapsed_ms)
{
    done_msg *d = RT_MSG_NEW(done_msg, M_DONE);
    d->hdr.release = done_release;
    d->worker = w;
    d->err = err;
    d->data = data;
    d->len = len;
    d->elapsed_ms = elapsed_ms;
    rt_send(to, &d->hdr);
}

void nd_drain(rt_actor *to)
{
    rt_send(to, rt_msg_new(M_DRAIN, sizeof(rt_msg)));
}

void nd_leave(rt_actor *to)
{
    rt_send(to, rt_msg_new(M_LEAVE, sizeof(rt_msg)));
}

void nd_pause(rt_actor *to, bool on)
{
    pause_msg *p = RT_MSG_NEW(pause_msg, M_PAUSE);
    p->on = on;
    rt_send(to, &p->hdr);
}

void nd_set_workers(rt_actor *to, unsigned workers)
{
    workers_msg *w = RT_MSG_NEW(workers_msg, M_WORKERS);
    w->workers = workers;
    rt_send(to, &w->hdr);
}

/* Slices of a chunk: the first is SLICE_FIRST items; one that took less than
 * SLICE_MS / 2 doubles the next, one that took more than 2 x SLICE_MS halves
 * it, so a stop request waits about SLICE_MS whatever an item costs. Slice
 * ends fall on multiples of SLICE_ALIGN items: kernels compute items in
 * groups aligned to their vector width (64 at most), so no group is computed
 * twice. */
enum { SLICE_MS = 100, SLICE_FIRST = 1024, SLICE_ALIGN = 64 };

int nd_compute(const sim_work *job, const nd_chunk *c, nd_runner run, nd_stop halt, void *ctx, uint8_t **data,
    size_t *len)
{
    *data = NULL;
    *len = 0;
    if (!job->every && c->variant >= job->n)
        return SIM_EINVAL;
    uint32_t first = job->every ? 0 : c->variant, last = job->every ? job->n : c->variant + 1;
    uint32_t nout = (uint32_t)sim_job_nout(job->jobs[first]), nstats = (last - first) * nout;
    size_t size = (size_t)nstats * sizeof(sim_stats);
    sim_stats *out = malloc(size), *part = malloc(size);
    if (out == NULL || part == NULL)
        sf_oom(size);
    int err = 0;
    uint64_t done = 0, slice = SLICE_FIRST;
    do { /* at least once: an empty chunk still has its (empty) statistics */
        if (halt != NULL && halt(ctx, done)) {
            err = ND_ECANCELLED;
            break;
        }
        uint64_t from = c->start + done, n = c->count - done;
        if (n > slice) {
            uint64_t end = (from + slice + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
            if (end - from < n)
                n = end - from;
        }
        uint64_t t0 = rt_mono_ms();
        for (uint32_t v = first; v < last && err == 0; v++) {
            sim_stats *o = out + (size_t)(v - first) * nout, *p = part + (size_t)(v - first) * nout;
            err = run(ctx, job->jobs[v], from, n, done == 0 ? o : p);
            for (uint32_t k = 0; k < nout && err == 0 && done > 0; k++)
                err = sim_stats_merge(&o[k], &p[k]);
        }
        uint64_t took = rt_mono_ms() - t0;
        if (took < SLICE_MS / 2 && slice <= c->count)
            slice *= 2;
        else if (took > 2 * SLICE_MS && slice > SLICE_ALIGN)
            slice /= 2;
        done += n;
    } while (done < c->count && err == 0);
    if (err == 0) {
        size_t cap = (size_t)nstats * (SIM_STATS_MAX_ENCODED + 4);
        *data = malloc(cap);
        if (*data == NULL)
            sf_oom(cap);
        if (sc_result_encode(out, nstats, *data, cap, len) != 0) {
            free(*data);
            *data = NULL;
            err = SIM_EINVAL;
        }
    }
    free(part);
    free(out);
    return err;
}

int nd_run_cpu(void *ctx, const sim_job *sim, uint64_t first, uint64_t count, sim_stats *out)
{
    (void)ctx;
    return sim_run_cpu(sim, first, count, out);
}

int nd_compute_cpu(const sim_work *job, const nd_chunk *c, uint8_t **data, size_t *len)
{
    return nd_compute(job, c, nd_run_cpu, NULL, NULL, data, len);
}
