/*
 * node_uv.c — see node.h.
 *
 * One pinned "link" actor owns the connection (libwebsockets client on the
 * runtime's loop) and the protocol; lws callbacks only move bytes and hand
 * frames to it as messages. Worker actors on the pool compute one chunk at a
 * time with the kernel and send the encoded statistics back. Work contexts
 * are fetched once per job and kept while any chunk of the job is in hand.
 */
#include "node-native/node.h"

#include "actors/jobs.h"
#include "node-native/keyfile.h"
#include "proto/msg.h"
#include "proto/sign.h"
#include "runtime/runtime.h"
#include "sched/sched.h"
#include "sim/sim.h"

#include <libwebsockets.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <uv.h>

#define NODE_VERSION "simfarm-node 0.1.0"

enum {
    M_CONNECT = RT_MSG_USER + 0x1600,
    M_UP,
    M_DOWN,
    M_FRAME,
    M_TICK,
    M_SIGNAL,
    M_WORK,
    M_DONE,
    MAX_JOBS = 16,
    BACKOFF_MIN_MS = 1000,
    BACKOFF_MAX_MS = 60000,
};

typedef struct bytes_msg {
    rt_msg hdr;
    uint8_t *bytes;
    size_t len;
} bytes_msg;

typedef struct bytes_t {
    uint8_t *p;
    size_t len;
} bytes_t;

typedef struct chunk {
    uint64_t job, id, start, count;
    uint8_t token[16];
    uint8_t hash[32];
} chunk;

typedef struct jobctx {
    uint64_t job;
    uint8_t hash[32];
    sim_job *sim;          /* NULL while fetching */
    unsigned users;        /* chunks of it in hand */
} jobctx;

typedef struct work_msg {
    rt_msg hdr;
    chunk c;
    const sim_job *sim;    /* borrowed: the link keeps it while the chunk is in hand */
} work_msg;

typedef struct done_msg {
    rt_msg hdr;
    chunk c;
    uint8_t *data;         /* owned */
    size_t len;
    uint32_t elapsed_ms;
    int err;
} done_msg;

typedef struct nlink {
    nd_opts opts;
    rt_actor *self;
    rt_system *sys;
    pr_key key;
    char addr[256], path[128], hostport[300];
    int port;
    struct lws_context *ctx;
    struct lws_protocols protocols[2];
    struct lws *wsi;
    uint8_t *rx;
    size_t rx_len;
    bytes_t *out;          /* frames to write, LWS_PRE headroom each */
    size_t nout, out_cap;
    enum { DOWN, CONNECTING, AWAIT_WELCOME, RUNNING } phase;
    uint64_t node_id, next_id;
    uint32_t heartbeat_ms;
    int64_t tick_timer;
    unsigned backoff_ms;
    rt_actor **workers;
    unsigned nworkers;
    bool *busy;
    chunk *wchunk;         /* what each busy worker computes */
    bool *wcancel;         /* its result is not wanted any more */
    chunk *queue;          /* assigned, waiting for a worker or a context */
    size_t nqueue, queue_cap;
    unsigned computing;
    bytes_t *pending;      /* encoded complete frames not yet sent (disconnected) */
    size_t npending, pending_cap;
    unsigned unacked;      /* completions sent, no ack yet */
    jobctx jobs[MAX_JOBS];
    bool draining;
    int signals;
    int exit_code;
    uint64_t chunks_done, items_done, accepted, rejected;
    uint64_t last_report_ms, last_report_items;
    uv_signal_t sigint, sigterm;
} nlink;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void bytes_release(rt_msg *m)
{
    free(((bytes_msg *)m)->bytes);
}

/* ---- the connection (lws callbacks, loop thread) ---------------------------------- */

static void queue_frame(nlink *l, const uint8_t *bytes, size_t len)
{
    if (l->nout == l->out_cap)
        l->out = rt_grow(l->out, &l->out_cap, sizeof *l->out);
    uint8_t *b = malloc(LWS_PRE + len);
    if (b == NULL)
        rt_oom(LWS_PRE + len);
    memcpy(b + LWS_PRE, bytes, len);
    l->out[l->nout++] = (bytes_t){ b, len };
    if (l->wsi != NULL)
        lws_callback_on_writable(l->wsi);
}

static void drop_frames(nlink *l)
{
    for (size_t i = 0; i < l->nout; i++)
        free(l->out[i].p);
    l->nout = 0;
    free(l->rx);
    l->rx = NULL;
    l->rx_len = 0;
}

static int client_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    (void)user;
    const struct lws_protocols *p = lws_get_protocol(wsi);
    nlink *l = p ? p->user : NULL;
    if (l == NULL)
        return 0;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        l->wsi = wsi;
        rt_send(l->self, rt_msg_new(M_UP, sizeof(rt_msg)));
        break;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        if (l->rx_len + len > PR_MAX_FRAME)
            return -1;
        {
            uint8_t *nb = realloc(l->rx, l->rx_len + len + 1);
            if (nb == NULL)
                rt_oom(l->rx_len + len + 1);
            l->rx = nb;
            memcpy(l->rx + l->rx_len, in, len);
            l->rx_len += len;
        }
        if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
            bytes_msg *f = RT_MSG_NEW(bytes_msg, M_FRAME);
            f->hdr.release = bytes_release;
            f->bytes = l->rx;
            f->len = l->rx_len;
            l->rx = NULL;
            l->rx_len = 0;
            rt_send(l->self, &f->hdr);
        }
        break;
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if (l->nout > 0) {
            uint8_t *b = l->out[0].p;
            size_t n = l->out[0].len;
            memmove(l->out, l->out + 1, (l->nout - 1) * sizeof *l->out);
            l->nout--;
            int w = lws_write(wsi, b + LWS_PRE, n, LWS_WRITE_BINARY);
            free(b);
            if (w < (int)n)
                return -1;
        }
        if (l->nout > 0)
            lws_callback_on_writable(wsi);
        break;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
    case LWS_CALLBACK_CLIENT_CLOSED:
        if (l->wsi == wsi || reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR) {
            l->wsi = NULL;
            bytes_msg *d = RT_MSG_NEW(bytes_msg, M_DOWN);
            d->hdr.release = bytes_release;
            const char *why = reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR && in ? (const char *)in : "closed";
            d->len = strlen(why);
            d->bytes = (uint8_t *)strdup(why);
            rt_send(l->self, &d->hdr);
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---- talking -------------------------------------------------------------------------- */

static void send_msg(nlink *l, pr_msg *m)
{
    uint8_t *out = NULL;
    size_t len = 0;
    m->v = PR_VERSION;
    if (m->id == 0)
        m->id = ++l->next_id;
    m->ts = wall_ms();
    int rc = pr_encode(m, &out, &len);
    if (rc != 0) {
        fprintf(stderr, "simfarm node: cannot encode %s: %s\n", pr_type_name(m->type), pr_strerror(rc));
        return;
    }
    queue_frame(l, out, len);
    free(out);
}

static void stop(nlink *l, int code)
{
    l->exit_code = code;
    if (!uv_is_closing((uv_handle_t *)&l->sigint)) {
        uv_close((uv_handle_t *)&l->sigint, NULL);
        uv_close((uv_handle_t *)&l->sigterm, NULL);
    }
    rt_system_stop(l->sys);
}

static void schedule_reconnect(nlink *l)
{
    l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (l->backoff_ms > BACKOFF_MAX_MS)
        l->backoff_ms = BACKOFF_MAX_MS;
    /* ±25 % jitter, so a fleet that lost its coordinator does not return in step. */
    uint32_t r = randombytes_uniform(1001);
    uint64_t delay = (uint64_t)l->backoff_ms * (750 + r / 2) / 1000;
    rt_send_after(l->self, delay, rt_msg_new(M_CONNECT, sizeof(rt_msg)));
}

static void connect_now(nlink *l)
{
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = l->ctx;
    ci.address = l->addr;
    ci.port = l->port;
    ci.path = l->path;
    ci.host = l->hostport;
    ci.origin = l->hostport;
    ci.protocol = PR_WS_PROTOCOL;
    l->phase = CONNECTING;
    if (lws_client_connect_via_info(&ci) == NULL) {
        l->phase = DOWN;
        schedule_reconnect(l);
    }
}

static void say_hello(nlink *l, const pr_msg *challenge)
{
    struct utsname u;
    struct sysinfo si;
    char arch[32] = "";
    if (uname(&u) == 0)
        snprintf(arch, sizeof arch, "%.31s", u.machine);
    uint64_t mem = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
    pr_backend cpu = { .kind = PR_BACKEND_CPU, .device = "cpu", .memory = mem, .units = l->nworkers };
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HELLO;
    m.body.hello.version = NODE_VERSION;
    m.body.hello.claim_token = l->opts.claim_token;
    m.body.hello.caps = (pr_caps){ .cores = (uint32_t)uv_available_parallelism(), .max_parallel = l->nworkers,
        .os = "linux", .arch = arch[0] ? arch : NULL, .backends = &cpu, .nbackends = 1 };
    if (pr_hello_sign(&m.body.hello, &l->key, l->hostport, (uint64_t)time(NULL), challenge->body.challenge.nonce) != 0)
        return;
    send_msg(l, &m);
    l->phase = AWAIT_WELCOME;
}

static jobctx *job_find(nlink *l, uint64_t job, const uint8_t hash[32])
{
    for (int i = 0; i < MAX_JOBS; i++)
        if (l->jobs[i].users > 0 && l->jobs[i].job == job && memcmp(l->jobs[i].hash, hash, 32) == 0)
            return &l->jobs[i];
    return NULL;
}

/* Hands queued chunks whose context is ready to idle workers. */
static void dispatch(nlink *l)
{
    for (size_t i = 0; i < l->nqueue;) {
        unsigned w = 0;
        while (w < l->nworkers && l->busy[w])
            w++;
        if (w == l->nworkers)
            return;
        jobctx *j = job_find(l, l->queue[i].job, l->queue[i].hash);
        if (j == NULL || j->sim == NULL) {
            i++;
            continue;
        }
        work_msg *m = RT_MSG_NEW(work_msg, M_WORK);
        m->c = l->queue[i];
        m->sim = j->sim;
        l->busy[w] = true;
        l->wcancel[w] = false;
        l->wchunk[w] = l->queue[i];
        l->computing++;
        l->queue[i] = l->queue[--l->nqueue];
        rt_send(l->workers[w], &m->hdr);
    }
}

static void release_job(nlink *l, uint64_t job, const uint8_t hash[32])
{
    jobctx *j = job_find(l, job, hash);
    if (j != NULL && --j->users == 0) {
        sim_job_destroy(j->sim);
        j->sim = NULL;
    }
}

static void on_assign(nlink *l, const pr_msg *m)
{
    const pr_assign *a = &m->body.assign;
    jobctx *j = job_find(l, a->job, a->ctx_hash);
    if (j == NULL) {
        for (int i = 0; i < MAX_JOBS && j == NULL; i++)
            if (l->jobs[i].users == 0)
                j = &l->jobs[i];
        if (j == NULL) {
            fprintf(stderr, "simfarm node: more than %d jobs at once; chunks of job %llu dropped\n", MAX_JOBS,
                (unsigned long long)a->job);
            return;
        }
        memset(j, 0, sizeof *j);
        j->job = a->job;
        memcpy(j->hash, a->ctx_hash, 32);
        pr_msg q;
        memset(&q, 0, sizeof q);
        q.type = PR_MSG_CTX_REQ;
        q.body.ctx_req.job = a->job;
        memcpy(q.body.ctx_req.hash, a->ctx_hash, 32);
        send_msg(l, &q);
    }
    for (uint32_t i = 0; i < a->nchunks; i++) {
        if (l->nqueue == l->queue_cap)
            l->queue = rt_grow(l->queue, &l->queue_cap, sizeof *l->queue);
        chunk *c = &l->queue[l->nqueue++];
        c->job = a->job;
        c->id = a->chunks[i].chunk;
        c->start = a->chunks[i].start;
        c->count = a->chunks[i].count;
        memcpy(c->token, a->chunks[i].token, 16);
        memcpy(c->hash, a->ctx_hash, 32);
        j->users++;
    }
    dispatch(l);
}

static void maybe_leave(nlink *l);

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
 * are dropped, and the results of those being computed are not sent. */
static void on_cancel(nlink *l, const pr_msg *m)
{
    const pr_cancel *c = &m->body.cancel;
    unsigned dropped = 0;
    for (size_t i = 0; i < l->nqueue;) {
        if (cancel_hits(c, l->queue[i].job, l->queue[i].id)) {
            release_job(l, l->queue[i].job, l->queue[i].hash);
            l->queue[i] = l->queue[--l->nqueue];
            dropped++;
        } else {
            i++;
        }
    }
    for (unsigned w = 0; w < l->nworkers; w++)
        if (l->busy[w] && !l->wcancel[w] && cancel_hits(c, l->wchunk[w].job, l->wchunk[w].id)) {
            l->wcancel[w] = true;
            dropped++;
        }
    if (dropped > 0)
        printf("simfarm node: job %llu: %u chunks cancelled (%s)\n", (unsigned long long)c->job, dropped,
            c->reason && c->reason[0] ? c->reason : "no reason given");
    fflush(stdout);
    dispatch(l);
    maybe_leave(l);
}

static void on_ctx(nlink *l, const pr_msg *m)
{
    const pr_ctx *c = &m->body.ctx;
    jobctx *j = job_find(l, c->job, c->hash);
    if (j == NULL || j->sim != NULL)
        return;
    char kernel[64], err[256];
    uint64_t seed = 0;
    msgpack_sbuffer params;
    msgpack_sbuffer_init(&params);
    int rc = cd_ctx_decode(c->bytes.ptr, c->bytes.len, kernel, sizeof kernel, &seed, &params);
    if (rc == 0)
        rc = sim_job_create(&j->sim, kernel, params.data, params.size, seed, err, sizeof err);
    else
        snprintf(err, sizeof err, "the work context does not decode");
    msgpack_sbuffer_destroy(&params);
    if (rc != 0) {
        fprintf(stderr, "simfarm node: job %llu cannot run here: %s\n", (unsigned long long)c->job, err);
        return; /* its chunks wait; their leases end and they go to other nodes */
    }
    dispatch(l);
}

static void send_pending(nlink *l)
{
    for (size_t i = 0; i < l->npending; i++) {
        queue_frame(l, l->pending[i].p, l->pending[i].len);
        free(l->pending[i].p);
        l->unacked++;
    }
    l->npending = 0;
}

static void maybe_leave(nlink *l)
{
    if (l->draining && l->nqueue == 0 && l->computing == 0 && l->unacked == 0 && l->npending == 0) {
        pr_msg m;
        memset(&m, 0, sizeof m);
        m.type = PR_MSG_BYE;
        m.body.bye.reason = PR_BYE_LEAVING;
        if (l->phase == RUNNING)
            send_msg(l, &m);
        printf("simfarm node: drained, leaving (%llu chunks computed)\n", (unsigned long long)l->chunks_done);
        fflush(stdout);
        stop(l, ND_EXIT_OK);
    }
}

static void on_done(nlink *l, done_msg *d)
{
    bool cancelled = false;
    for (unsigned w = 0; w < l->nworkers; w++)
        if (l->workers[w] == d->hdr.sender) {
            l->busy[w] = false;
            cancelled = l->wcancel[w];
            break;
        }
    l->computing--;
    release_job(l, d->c.job, d->c.hash);
    if (cancelled) {
        /* the coordinator no longer wants it: nothing to send */
    } else if (d->err == 0) {
        l->chunks_done++;
        l->items_done += d->c.count;
        pr_result r = { .chunk = d->c.id, .start = d->c.start, .count = d->c.count, .elapsed_ms = d->elapsed_ms,
            .data = { d->data, (uint32_t)d->len } };
        memcpy(r.token, d->c.token, 16);
        pr_msg m;
        memset(&m, 0, sizeof m);
        m.type = PR_MSG_COMPLETE;
        m.v = PR_VERSION;
        m.id = ++l->next_id;
        m.ts = wall_ms();
        randombytes_buf(m.body.complete.batch.nonce, sizeof m.body.complete.batch.nonce);
        m.body.complete.batch.job = d->c.job;
        memcpy(m.body.complete.batch.ctx_hash, d->c.hash, 32);
        m.body.complete.batch.results = &r;
        m.body.complete.batch.nresults = 1;
        uint8_t *payload = NULL, *frame = NULL;
        size_t flen = 0;
        if (pr_complete_seal(&m.body.complete, &payload, &l->key, l->hostport, (uint64_t)time(NULL)) == 0 &&
            pr_encode(&m, &frame, &flen) == 0) {
            /* Sent now, or once the connection is back. */
            if (l->npending == l->pending_cap)
                l->pending = rt_grow(l->pending, &l->pending_cap, sizeof *l->pending);
            l->pending[l->npending++] = (bytes_t){ frame, flen };
            if (l->phase == RUNNING)
                send_pending(l);
        }
        free(payload);
    } else {
        fprintf(stderr, "simfarm node: chunk %llu of job %llu failed: %s\n", (unsigned long long)d->c.id,
            (unsigned long long)d->c.job, sim_strerror(d->err));
    }
    dispatch(l);
    maybe_leave(l);
}

static void heartbeat(nlink *l)
{
    if (l->phase != RUNNING)
        return;
    static uint64_t last_cpu_us, last_wall_ms;
    struct rusage ru;
    struct sysinfo si;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec +
        (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
    uint64_t now = mono_ms();
    uint32_t permille = 0;
    if (last_wall_ms != 0 && now > last_wall_ms) {
        uint64_t cores = uv_available_parallelism();
        permille = (uint32_t)((cpu_us - last_cpu_us) / (now - last_wall_ms) / cores);
        if (permille > 1000)
            permille = 1000;
    }
    last_cpu_us = cpu_us;
    last_wall_ms = now;
    uint64_t ids[256];
    uint32_t n = 0;
    for (size_t i = 0; i < l->nqueue && n < 256; i++)
        ids[n++] = l->queue[i].id;
    for (unsigned w = 0; w < l->nworkers && n < 256; w++)
        if (l->busy[w])
            ids[n++] = l->wchunk[w].id;
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HEARTBEAT;
    m.body.heartbeat.cpu_permille = permille;
    if (sysinfo(&si) == 0) {
        m.body.heartbeat.mem_total = (uint64_t)si.totalram * si.mem_unit;
        m.body.heartbeat.mem_used = (uint64_t)(si.totalram - si.freeram) * si.mem_unit;
    }
    m.body.heartbeat.in_flight = n ? ids : NULL;
    m.body.heartbeat.nin_flight = n;
    send_msg(l, &m);

    if (now - l->last_report_ms >= 10000) {
        double rate = l->last_report_ms ? (double)(l->items_done - l->last_report_items) * 1000.0 /
                (double)(now - l->last_report_ms) : 0;
        printf("simfarm node: %llu chunks, %llu items, %.0f items/s, %llu accepted\n",
            (unsigned long long)l->chunks_done, (unsigned long long)l->items_done, rate,
            (unsigned long long)l->accepted);
        fflush(stdout);
        l->last_report_ms = now;
        l->last_report_items = l->items_done;
    }
}

static void on_frame(nlink *l, const bytes_msg *f)
{
    pr_msg m;
    int rc = pr_decode(&m, f->bytes, f->len);
    if (rc != 0) {
        fprintf(stderr, "simfarm node: bad frame from the coordinator: %s %s\n", pr_strerror(rc), m.err_at);
        return;
    }
    switch (m.type) {
    case PR_MSG_CHALLENGE:
        say_hello(l, &m);
        break;
    case PR_MSG_WELCOME:
        l->node_id = m.body.welcome.node_id;
        l->heartbeat_ms = m.body.welcome.heartbeat_ms ? m.body.welcome.heartbeat_ms : 5000;
        l->phase = RUNNING;
        l->backoff_ms = 0;
        if (l->tick_timer > 0)
            rt_timer_cancel(l->sys, l->tick_timer);
        l->tick_timer = rt_send_every(l->self, l->heartbeat_ms, M_TICK, 0);
        printf("simfarm node: connected to %s as node %llu, %u workers\n", l->hostport,
            (unsigned long long)l->node_id, l->nworkers);
        fflush(stdout);
        send_pending(l);
        if (l->draining) {
            pr_msg b;
            memset(&b, 0, sizeof b);
            b.type = PR_MSG_BYE;
            b.body.bye.reason = PR_BYE_DRAINING;
            send_msg(l, &b);
        }
        break;
    case PR_MSG_ASSIGN:
        on_assign(l, &m);
        break;
    case PR_MSG_CTX:
        on_ctx(l, &m);
        break;
    case PR_MSG_CANCEL:
        on_cancel(l, &m);
        break;
    case PR_MSG_COMPLETE_ACK:
        if (l->unacked > 0)
            l->unacked--;
        for (uint32_t i = 0; i < m.body.complete_ack.noutcomes; i++) {
            if (m.body.complete_ack.outcomes[i].outcome == PR_OUTCOME_ACCEPTED)
                l->accepted++;
            else
                l->rejected++;
        }
        maybe_leave(l);
        break;
    case PR_MSG_ERROR:
        fprintf(stderr, "simfarm node: the coordinator says: %s (code %d)\n",
            m.body.error.message ? m.body.error.message : "?", m.body.error.code);
        if (m.body.error.code == 1) { /* ENOTENROLLED */
            fprintf(stderr, "simfarm node: this key is not enrolled there: start with --claim-token TOKEN\n");
            stop(l, ND_EXIT_NOT_ENROLLED);
        }
        break;
    default:
        break;
    }
    pr_msg_free(&m);
}

/* ---- the actors -------------------------------------------------------------------------- */

static void done_release(rt_msg *m)
{
    free(((done_msg *)m)->data);
}

static void worker_behaviour(rt_actor *self, rt_msg *m)
{
    (void)self;
    if (m->type != M_WORK)
        return;
    work_msg *w = (work_msg *)m;
    done_msg *d = RT_MSG_NEW(done_msg, M_DONE);
    d->c = w->c;
    sim_stats out[SIM_MAX_OUT];
    uint64_t t0 = mono_ms();
    d->err = sim_run_cpu(w->sim, w->c.start, w->c.count, out);
    d->elapsed_ms = (uint32_t)(mono_ms() - t0);
    if (d->err == 0) {
        size_t cap = (size_t)SIM_MAX_OUT * (SIM_STATS_MAX_ENCODED + 4);
        d->data = malloc(cap);
        if (d->data == NULL)
            rt_oom(cap);
        if (sc_result_encode(out, (uint32_t)sim_job_nout(w->sim), d->data, cap, &d->len) != 0)
            d->err = SIM_EINVAL;
    }
    d->hdr.release = done_release;
    rt_send(w->hdr.sender, &d->hdr);
}

static void link_behaviour(rt_actor *self, rt_msg *m)
{
    nlink *l = rt_state(self);
    switch (m->type) {
    case M_CONNECT:
        if (l->phase == DOWN)
            connect_now(l);
        break;
    case M_UP:
        l->phase = AWAIT_WELCOME; /* the challenge comes first */
        break;
    case M_DOWN: {
        bytes_msg *d = (bytes_msg *)m;
        bool was_running = l->phase == RUNNING;
        l->phase = DOWN;
        drop_frames(l);
        l->unacked = 0; /* an unacknowledged result may be lost: its lease brings it back */
        if (l->tick_timer > 0) {
            rt_timer_cancel(l->sys, l->tick_timer);
            l->tick_timer = 0;
        }
        if (l->signals > 0 && l->draining) {
            stop(l, ND_EXIT_OK);
            break;
        }
        fprintf(stderr, "simfarm node: %s %s (%.*s); trying again\n", was_running ? "lost" : "cannot reach",
            l->hostport, (int)d->len, d->bytes ? (const char *)d->bytes : "");
        schedule_reconnect(l);
        break;
    }
    case M_FRAME:
        on_frame(l, (bytes_msg *)m);
        break;
    case M_TICK:
        heartbeat(l);
        break;
    case M_DONE:
        on_done(l, (done_msg *)m);
        break;
    case M_SIGNAL:
        if (++l->signals > 1) {
            fprintf(stderr, "simfarm node: second signal, leaving now\n");
            stop(l, ND_EXIT_OK);
            break;
        }
        fprintf(stderr, "simfarm node: draining: finishing the chunks in hand (signal again to leave now)\n");
        l->draining = true;
        l->nqueue = 0; /* not started: their leases return them */
        if (l->phase == RUNNING) {
            pr_msg b;
            memset(&b, 0, sizeof b);
            b.type = PR_MSG_BYE;
            b.body.bye.reason = PR_BYE_DRAINING;
            send_msg(l, &b);
        }
        maybe_leave(l);
        break;
    default:
        break;
    }
}

static void link_final(rt_actor *self)
{
    nlink *l = rt_state(self);
    if (l->ctx != NULL)
        lws_context_destroy(l->ctx);
    drop_frames(l);
    free(l->out);
    for (size_t i = 0; i < l->npending; i++)
        free(l->pending[i].p);
    free(l->pending);
    free(l->queue);
    for (int i = 0; i < MAX_JOBS; i++)
        if (l->jobs[i].sim != NULL)
            sim_job_destroy(l->jobs[i].sim);
    for (unsigned w = 0; w < l->nworkers; w++)
        rt_actor_release(l->workers[w]);
    free(l->workers);
    free(l->busy);
    free(l->wchunk);
    free(l->wcancel);
    pr_key_wipe(&l->key);
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)signum;
    rt_send(h->data, rt_msg_new(M_SIGNAL, sizeof(rt_msg)));
}

/* ws://host:port/path, or the coordinator's http://host:port (its node
 * endpoint is /ws/node) -> parts. */
static int parse_url(const char *url, char *addr, size_t alen, int *port, char *path, size_t plen)
{
    size_t skip = strncmp(url, "ws://", 5) == 0 ? 5 : strncmp(url, "http://", 7) == 0 ? 7 : 0;
    if (skip == 0)
        return -1;
    const char *h = url + skip, *slash = strchr(h, '/'), *colon = strchr(h, ':');
    if (slash == NULL)
        slash = h + strlen(h);
    if (colon == NULL || colon > slash || colon == h || (size_t)(colon - h) >= alen)
        return -1;
    memcpy(addr, h, (size_t)(colon - h));
    addr[colon - h] = '\0';
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (end != slash || p <= 0 || p > 65535)
        return -1;
    *port = (int)p;
    snprintf(path, plen, "%s", *slash && strcmp(slash, "/") != 0 ? slash : "/ws/node");
    if (skip == 7 && strcmp(path, "/ws/node") != 0)
        return -1; /* an http address is the coordinator's, not a path on it */
    return 0;
}

int nd_run(const nd_opts *opts)
{
    char keypath[4096], err[4200];
    if (opts->key_path != NULL)
        snprintf(keypath, sizeof keypath, "%s", opts->key_path);
    else
        nd_key_default_path(keypath, sizeof keypath);
    pr_key key;
    bool created;
    if (nd_key_load(keypath, &key, &created, err, sizeof err) != 0) {
        fprintf(stderr, "simfarm node: %s\n", err);
        return ND_EXIT_FAIL;
    }
    if (created)
        printf("simfarm node: new key in %s\n", keypath);

    unsigned workers = opts->cores ? opts->cores : (unsigned)uv_available_parallelism();
    rt_system_opts so = { .workers = workers };
    int e = 0;
    rt_system *sys = rt_system_create(&so, &e);
    if (sys == NULL) {
        fprintf(stderr, "simfarm node: cannot start the runtime: %s\n", rt_strerror(e));
        return ND_EXIT_FAIL;
    }
    rt_actor_opts lo = { .state_size = sizeof(nlink), .pinned = true, .finalize = link_final, .name = "link" };
    rt_actor *a = rt_spawn(sys, link_behaviour, &lo);
    nlink *l = rt_state(a);
    l->opts = *opts;
    l->self = a;
    l->sys = sys;
    l->key = key;
    pr_key_wipe(&key);
    if (parse_url(opts->url, l->addr, sizeof l->addr, &l->port, l->path, sizeof l->path) != 0) {
        fprintf(stderr, "simfarm node: --server wants ws://HOST:PORT/ws/node or http://HOST:PORT, not '%s'\n",
            opts->url);
        rt_actor_release(a);
        rt_system_destroy(sys);
        return ND_EXIT_USAGE;
    }
    snprintf(l->hostport, sizeof l->hostport, "%s:%d", l->addr, l->port);
    for (char *p = l->hostport; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    l->nworkers = workers;
    l->workers = calloc(workers, sizeof *l->workers);
    l->busy = calloc(workers, sizeof *l->busy);
    l->wchunk = calloc(workers, sizeof *l->wchunk);
    l->wcancel = calloc(workers, sizeof *l->wcancel);
    if (l->workers == NULL || l->busy == NULL || l->wchunk == NULL || l->wcancel == NULL)
        rt_oom(workers * sizeof *l->workers);
    for (unsigned w = 0; w < workers; w++)
        l->workers[w] = rt_spawn(sys, worker_behaviour, &(rt_actor_opts){ .name = "worker" });

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[1] = { rt_system_loop(sys) };
    l->protocols[0] = (struct lws_protocols){ PR_WS_PROTOCOL, client_cb, 0, 65536, 0, l, 0 };
    info.options = LWS_SERVER_OPTION_LIBUV;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = l->protocols;
    lws_set_log_level(LLL_ERR, NULL);
    l->ctx = lws_create_context(&info);
    if (l->ctx == NULL) {
        fprintf(stderr, "simfarm node: cannot start libwebsockets\n");
        rt_actor_release(a);
        rt_system_destroy(sys);
        return ND_EXIT_FAIL;
    }
    uv_signal_init(rt_system_loop(sys), &l->sigint);
    uv_signal_init(rt_system_loop(sys), &l->sigterm);
    l->sigint.data = l->sigterm.data = a;
    uv_signal_start(&l->sigint, on_signal, SIGINT);
    uv_signal_start(&l->sigterm, on_signal, SIGTERM);
    printf("simfarm node: %u workers, connecting to %s\n", workers, opts->url);
    fflush(stdout);
    rt_send(a, rt_msg_new(M_CONNECT, sizeof(rt_msg)));

    rt_system_run(sys);
    int code = l->exit_code; /* the state outlives the run: our reference holds it */
    rt_actor_release(a);
    rt_system_destroy(sys);
    return code;
}
