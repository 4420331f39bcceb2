/*
 * node.c — see node.h.
 *
 * The actor keeps the chunks in hand (queued, or on a worker), the work
 * contexts they need, and the signed results the coordinator has not had
 * yet. Frames arrive from the host whole; frames leave through the host.
 * This file holds the session (connecting, the handshake, heartbeats,
 * draining, pausing) and the actor itself; chunks.c the chunks in hand and
 * their results, compute.c the computing of one chunk.
 */
#include "actors/node/node_int.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

uint64_t nd__wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void nd__say(node *n, nd_level level, const char *fmt, ...)
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
void nd__cancel_worker(node *n, unsigned w)
{
    n->work[w].cancel = true;
    if (n->host.cancel != NULL)
        n->host.cancel(n->host.ctx, w);
}

void nd__stop(node *n, nd_state st, int code)
{
    if (n->stopped)
        return;
    n->stopped = true;
    for (unsigned w = 0; w < n->wcap; w++) /* leaving: nothing more is sent */
        if (n->work[w].busy && !n->work[w].cancel)
            nd__cancel_worker(n, w);
    if (n->tick_timer > 0) {
        rt_timer_cancel(n->sys, n->tick_timer);
        n->tick_timer = 0;
    }
    set_state(n, st, NULL);
    n->host.stopped(n->host.ctx, code);
}

/* ---- talking ------------------------------------------------------------------------- */

void nd__send_msg(node *n, pr_msg *m)
{
    uint8_t *out = NULL;
    size_t len = 0;
    m->v = PR_VERSION;
    if (m->id == 0)
        m->id = ++n->next_id;
    m->ts = nd__wall_ms();
    int rc = pr_encode(m, &out, &len);
    if (rc != 0) {
        nd__say(n, ND_WARN, "cannot encode %s: %s", pr_type_name(m->type), sf_strerror(rc));
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
    nd__send_msg(n, &b);
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
    m.body.hello.name = n->name;
    /* it reads the malformed outcome in either form (pr_outcome_read) */
    static const char *features[] = { PR_FEATURE_MALFORMED };
    m.body.hello.features = features;
    m.body.hello.nfeatures = 1;
    n->host.caps(n->host.ctx, &m.body.hello.caps);
    m.body.hello.caps.max_parallel = nd__parallel(n);
    if (pr_hello_sign(&m.body.hello, &n->key, n->audience, (uint64_t)time(NULL), challenge->body.challenge.nonce) != 0)
        return;
    nd__send_msg(n, &m);
    n->phase = AWAIT_WELCOME;
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
        nd__say(n, ND_INFO, "drained, leaving (%llu chunks computed)", (unsigned long long)n->chunks_done);
        nd__stop(n, ND_STOPPED, SF_EXIT_OK);
    }
}

/* A resumed node leaves the session that said `bye draining` once nothing
 * is in hand; on_down starts the new one. */
static void maybe_rejoin(node *n)
{
    if (n->rejoin && !n->paused && !n->draining && n->phase == RUNNING && nothing_in_hand(n)) {
        nd__say(n, ND_INFO, "resuming: a new session");
        send_bye(n, PR_BYE_LEAVING);
        n->phase = AWAIT_WELCOME; /* nothing more to send on this session */
    }
}

void nd__settle(node *n)
{
    maybe_leave(n);
    if (!n->stopped)
        maybe_rejoin(n);
}

unsigned nd__parallel(const node *n)
{
    unsigned on = 0;
    for (unsigned w = 0; w < n->nworkers; w++)
        on += !n->work[w].off;
    return on > 0 ? on : 1;
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
            nd__request_ctx(n, j);
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
    m.body.heartbeat.max_parallel = nd__parallel(n);
    nd__send_msg(n, &m);

    if (now - n->report_ms >= REPORT_MS) {
        /* never less than the last report: a chunk that has just ended may
         * have left the workers' count before it reached items_done */
        uint64_t items = n->items_done + (n->host.items_in_hand != NULL ? n->host.items_in_hand(n->host.ctx) : 0);
        items = items > n->report_items ? items : n->report_items;
        double rate = n->report_ms ? (double)(items - n->report_items) * 1000.0 / (double)(now - n->report_ms) : 0;
        /* An idle node says so once, not every 10 s until work comes. */
        bool idle = k == 0 && items == n->report_items;
        if (idle && !n->said_idle)
            nd__say(n, ND_INFO, "idle, waiting for work: %llu chunks, %llu items, %llu accepted so far",
                (unsigned long long)n->chunks_done, (unsigned long long)n->items_done,
                (unsigned long long)n->accepted);
        else if (!idle)
            nd__say(n, ND_INFO, "%llu chunks, %llu items, %.0f items/s, %llu accepted", (unsigned long long)n->chunks_done,
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
    if (n->host.welcome != NULL)
        n->host.welcome(n->host.ctx, n->node_id);
    char detail[64];
    snprintf(detail, sizeof detail, "node %llu", (unsigned long long)n->node_id);
    set_state(n, n->paused ? ND_PAUSED : ND_RUNNING, detail);
    nd__say(n, ND_INFO, "connected to %s as node %llu%s%s%s, %u workers", n->audience, (unsigned long long)n->node_id,
        n->name ? " \"" : "", n->name ? n->name : "", n->name ? "\"" : "", n->nworkers);
    nd__send_pending(n);
    for (int i = 0; i < MAX_JOBS; i++) /* fetches the lost connection cut short */
        if (n->jobs[i].live && n->jobs[i].sim.jobs == NULL && n->jobs[i].users > 0)
            nd__request_ctx(n, &n->jobs[i]);
    if (n->draining || n->paused)
        send_bye(n, PR_BYE_DRAINING);
}

static void on_frame(node *n, const bytes_msg *f)
{
    pr_msg m;
    int rc = pr_decode(&m, f->bytes, f->len);
    if (rc != 0) {
        if (rc == PR_EUNKNOWNTYPE)
            nd__say(n, ND_WARN, "a frame of unknown type \"%s\" from the coordinator: dropped", m.unknown_type);
        else
            nd__say(n, ND_WARN, "bad frame from the coordinator: %s %s", sf_strerror(rc), m.err_at);
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
        nd__on_assign(n, &m);
        break;
    case PR_MSG_CTX:
        nd__on_ctx(n, &m);
        break;
    case PR_MSG_CANCEL:
        nd__on_cancel(n, &m);
        break;
    case PR_MSG_COMPLETE_ACK: {
        sealed acked = { 0 };
        bool had = nd__answered(n, m.id, &acked);
        for (uint32_t i = 0; i < m.body.complete_ack.noutcomes; i++) {
            const pr_outcome *o = &m.body.complete_ack.outcomes[i];
            const char *why;
            pr_outcome_kind kind = pr_outcome_read(o, &why);
            if (kind == PR_OUTCOME_ACCEPTED)
                n->accepted++;
            else
                n->rejected++;
            for (unsigned r = 0; had && n->host.settled != NULL && r < acked.nres; r++)
                if (acked.res[r].c.id == o->chunk && acked.res[r].c.job == m.body.complete_ack.job)
                    n->host.settled(n->host.ctx, &acked.res[r].c, kind);
            /* dropped as a stale one is (the chunk is gone from here
             * already), but a malformed result is this node's fault: say so */
            if (kind == PR_OUTCOME_MALFORMED)
                nd__say(n, ND_WARN, "job %llu chunk %llu: the coordinator refused the result as malformed: %s",
                    (unsigned long long)m.body.complete_ack.job, (unsigned long long)o->chunk, why);
        }
        if (had)
            nd__sealed_free(&acked);
        nd__settle(n);
        break;
    }
    case PR_MSG_ERROR:
        nd__say(n, ND_WARN, "the coordinator says: %s (code %d)", m.body.error.message ? m.body.error.message : "?",
            m.body.error.code);
        sealed refused;
        if (nd__answered(n, m.id, &refused)) {
            if (m.body.error.code == PR_EREPLAYOLD)
                nd__sign_again(n, &refused);
            else /* its leases bring its chunks back */
                nd__sealed_free(&refused);
            nd__settle(n);
        }
        if (m.body.error.code == ENOTENROLLED) {
            nd__say(n, ND_WARN, "this key is not enrolled there: start with --claim-token TOKEN");
            nd__stop(n, ND_NOT_FOUND, SF_EXIT_NOT_ENROLLED);
        } else if (m.body.error.code == EKEYINUSE && n->node_id != 0) {
            /* Welcomed before in this process: the live session is most
             * likely its own, on a connection that died unseen, which the
             * coordinator closes once silent; the reconnect backs off. */
            nd__say(n, ND_WARN, "this key's session is still live at the coordinator, most likely this node's lost "
                "connection: trying again after a backoff");
        } else if (m.body.error.code == EKEYINUSE) {
            nd__say(n, ND_WARN, "another process is this node already (its key has a live session): give this one "
                "a key of its own (--key PATH), or stop the other");
            nd__stop(n, ND_STOPPED, SF_EXIT_KEY_IN_USE);
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
        nd__sealed_free(&n->unacked[i]);
    n->nunacked = 0;
    if (n->tick_timer > 0) {
        rt_timer_cancel(n->sys, n->tick_timer);
        n->tick_timer = 0;
    }
    if (n->stopped)
        return;
    if (n->drains > 0 && n->draining) {
        nd__stop(n, ND_STOPPED, SF_EXIT_OK);
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
    nd__say(n, ND_WARN, "%s %s (%s); trying again", was_running ? "lost" : "cannot reach", n->audience, why);
    schedule_reconnect(n);
}

static void on_drain(node *n)
{
    if (++n->drains > 1) {
        nd__say(n, ND_WARN, "second signal, leaving now");
        nd__stop(n, ND_STOPPED, SF_EXIT_OK);
        return;
    }
    nd__say(n, ND_WARN, "draining: finishing the chunks in hand (signal again to leave now)");
    n->draining = true;
    for (size_t i = 0; i < n->nqueue; i++) /* not started: their leases return them */
        nd__release_job(n, n->queue[i].job, n->queue[i].hash);
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
        nd__say(n, ND_INFO, "paused: finishing the chunks in hand, taking no new ones");
        if (n->phase == RUNNING) {
            if (!n->said_draining)
                send_bye(n, PR_BYE_DRAINING);
            set_state(n, ND_PAUSED, NULL);
        }
        return;
    }
    nd__say(n, ND_INFO, "resumed");
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
    nd__say(n, ND_INFO, "%u worker%s, from %u", count, count == 1 ? "" : "s", was);
    heartbeat(n);
    nd__dispatch(n);
}

/* Worker w is lent (off false) or not: off, it finishes the chunk it holds
 * and gets no other. The coordinator hears the new count at once. */
static void on_worker_off(node *n, unsigned w, bool off)
{
    if (w >= ND_MAX_WORKERS)
        return;
    if (w >= n->wcap) {
        unsigned was = n->nworkers;
        grow_workers(n, w + 1);
        n->nworkers = was;
    }
    if (n->work[w].off == off)
        return;
    n->work[w].off = off;
    heartbeat(n);
    if (!off)
        nd__dispatch(n);
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
        nd__on_done(n, (done_msg *)m);
        break;
    case M_FLUSH:
        n->flush_armed = false;
        if (n->nbatch > 0) {
            nd__seal_batch(n);
            nd__settle(n);
        }
        break;
    case M_DRAIN:
        on_drain(n);
        break;
    case M_LEAVE:
        nd__stop(n, ND_STOPPED, SF_EXIT_OK);
        break;
    case M_PAUSE:
        on_pause(n, ((pause_msg *)m)->on);
        break;
    case M_WORKERS:
        on_workers(n, ((workers_msg *)m)->workers);
        break;
    case M_WORKER_OFF:
        on_worker_off(n, ((workers_msg *)m)->workers, ((workers_msg *)m)->off);
        break;
    default:
        break;
    }
}

static void node_final(rt_actor *self)
{
    node *n = rt_state(self);
    for (size_t i = 0; i < n->npending; i++)
        nd__sealed_free(&n->pending[i]);
    free(n->pending);
    for (size_t i = 0; i < n->nunacked; i++)
        nd__sealed_free(&n->unacked[i]);
    free(n->unacked);
    for (unsigned i = 0; i < n->nbatch; i++)
        free(n->batch[i].data);
    free(n->queue);
    for (int i = 0; i < MAX_JOBS; i++)
        nd__job_clear(&n->jobs[i]);
    free(n->work);
    free(n->audience);
    free(n->claim_token);
    free(n->version);
    free(n->checksum);
    free(n->name);
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
    n->name = cfg->name && cfg->name[0] ? dup_or_null(cfg->name) : NULL;
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

void nd_worker_off(rt_actor *to, unsigned which, bool off)
{
    workers_msg *w = RT_MSG_NEW(workers_msg, M_WORKER_OFF);
    w->workers = which;
    w->off = off;
    rt_send(to, &w->hdr);
}

