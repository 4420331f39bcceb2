/*
 * node.c — see node.h.
 *
 * The native host of the node actor (actors/node/node.h): a libwebsockets
 * client on the runtime's loop carries the frames, one worker actor per
 * allowed core computes chunks on the pool, and SIGINT/SIGTERM drain the
 * node. The connection's state lives in a pinned "link" actor, so that
 * libwebsockets is torn down on the loop when the system stops.
 */
#define _GNU_SOURCE /* gettid, SCHED_IDLE */
#include "node-native/node.h"

#include "actors/node/node.h"
#include "node-native/devices.h"
#include "node-native/keyfile.h"
#include "proto/msg.h"
#include "runtime/runtime.h"
#include "sched/sched.h"
#include "sim/sim.h"
#include "base/log.h"
#include "base/url.h"

#include <errno.h>
#include <libwebsockets.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

enum { M_WORK = RT_MSGS_NODE_WORKER };

typedef struct bytes_t {
    uint8_t *p;
    size_t len;
} bytes_t;

/* One worker: a CPU core, or a device with its backend opened. */
typedef struct conn conn;

typedef struct worker {
    rt_actor *node;
    conn *link;
    unsigned index;
    pr_backend_kind kind;
    sim_cl *cl;
    sim_cuda *cu;
    char device[128];
    uint64_t memory;
    uint64_t busy_seen;        /* busy_ms at the last heartbeat (loop thread) */
    /* Shared between the loop thread and the worker's thread. */
    _Atomic uint64_t busy_ms;  /* time spent in kernels, for heartbeats */
    _Atomic uint64_t in_hand;  /* items of the chunk in hand computed so far */
    atomic_bool stop;          /* the chunk in hand is not wanted: stop between slices */
} worker;

struct conn {
    rt_system *sys;
    rt_actor *node;
    char addr[256], path[128], hostport[300];
    int port;
    bool tls;              /* wss:// */
    const char *ca;        /* --ca, or NULL */
    const char *ca_from;   /* "--ca" or "$SIMFARM_CA" */
    struct stat ca_st;     /* the --ca file as last read */
    void *client_ssl_ctx;  /* the client's OpenSSL SSL_CTX, whose store --ca fills */
    bool untrusted;        /* this attempt's server certificate failed the check */
    struct lws_context *ctx;
    struct lws_protocols protocols[2];
    struct lws *wsi;
    uint8_t *rx;
    size_t rx_len;
    bytes_t *out;          /* frames to write, LWS_PRE headroom each */
    size_t nout, out_cap;
    rt_actor **workers;
    unsigned nworkers, ncpu;
    char arch[32];
    pr_backend backends[1 + ND_MAX_DEVICES];
    pr_device_stat dstats[ND_MAX_DEVICES];
    uint64_t last_cpu_us, last_wall_ms;
    uint64_t started_ms;
    unsigned grace_s;
    int exit_code;
    uv_signal_t sigint, sigterm;
    uv_timer_t grace;
    /* nd_native_hold: the workers wait on held_cond while held is true. */
    pthread_mutex_t hold_lock;
    pthread_cond_t held_cond;
    atomic_bool held;
    /* What nd_native_look copies (the items in hand come from the workers). */
    pthread_mutex_t seen_lock;
    nd_native_view *seen;
};

typedef struct work_msg {
    rt_msg hdr;
    nd_chunk c;
    const sim_work *job;   /* the node keeps it until the answer */
} work_msg;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the connection (lws callbacks, loop thread) ---------------------------------- */

static void drop_frames(conn *l)
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
    if (reason == LWS_CALLBACK_OPENSSL_LOAD_EXTRA_CLIENT_VERIFY_CERTS) {
        /* the wsi is a stand-in that holds the context, whose user is ours */
        conn *c = lws_context_user(lws_get_context(wsi));
        if (c != NULL)
            c->client_ssl_ctx = user;
        return 0;
    }
    const struct lws_protocols *p = lws_get_protocol(wsi);
    conn *l = p ? p->user : NULL;
    if (l == NULL)
        return 0;
    switch (reason) {
    case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION:
        /* len is OpenSSL's verdict (libwebsockets logs its reason); 0 keeps it. */
        if (len == 0)
            l->untrusted = true;
        break;
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        l->wsi = wsi;
        l->untrusted = false;
        nd_up(l->node);
        break;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        if (l->rx_len + len > PR_MAX_FRAME)
            return -1;
        {
            uint8_t *nb = realloc(l->rx, l->rx_len + len + 1);
            if (nb == NULL)
                sf_oom(l->rx_len + len + 1);
            l->rx = nb;
            memcpy(l->rx + l->rx_len, in, len);
            l->rx_len += len;
        }
        if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
            nd_frame(l->node, l->rx, l->rx_len);
            l->rx = NULL;
            l->rx_len = 0;
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
            drop_frames(l);
            const char *why = reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR && in ? (const char *)in : "closed";
            char tls_why[160];
            if (l->untrusted) {
                if (l->ca != NULL)
                    snprintf(tls_why, sizeof tls_why,
                        "TLS: the coordinator's certificate is not signed by %s, or not for this host", l->ca_from);
                why = l->ca != NULL ? tls_why
                                    : "TLS: the coordinator's certificate is not signed by a system CA, or not for "
                                      "this host (--ca names other CAs)";
            }
            l->untrusted = false;
            nd_down(l->node, why);
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---- what the node actor asks of its host ------------------------------------------ */


static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
        a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Reads --ca again when the file changed since it was read (a coordinator's
 * renewed self-signed certificate copied over it, say): its certificates
 * check the connections that follow. A file that holds none keeps the
 * ones read before. */
static void ca_refresh(conn *l)
{
    struct stat st;
    if (!l->tls || l->ca == NULL || l->client_ssl_ctx == NULL || stat(l->ca, &st) != 0 || same_file(&st, &l->ca_st))
        return;
    l->ca_st = st; /* said once per change, whatever it holds */
    X509_STORE *store = X509_STORE_new();
    if (store == NULL || X509_STORE_load_file(store, l->ca) != 1) {
        X509_STORE_free(store);
        ERR_clear_error();
        sf_log(SF_LOG_WARN, "node", "%s %s changed, but holds no PEM certificate: the certificates read before stay",
            l->ca_from, l->ca);
        return;
    }
    SSL_CTX_set_cert_store(l->client_ssl_ctx, store); /* takes it, frees the old one */
    sf_log(SF_LOG_INFO, "node", "%s %s changed: its certificates check the connections from now on", l->ca_from,
        l->ca);
}

static void host_connect(void *ctx)
{
    conn *l = ctx;
    ca_refresh(l);
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = l->ctx;
    ci.address = l->addr;
    ci.port = l->port;
    ci.path = l->path;
    ci.host = l->hostport;
    ci.origin = l->hostport;
    ci.protocol = PR_WS_PROTOCOL;
    /* The server's certificate is checked against the CAs (the system's,
     * or --ca) and its name against the host of --server. */
    ci.ssl_connection = l->tls ? LCCSCF_USE_SSL : 0;
    if (lws_client_connect_via_info(&ci) == NULL)
        nd_down(l->node, "cannot start a connection");
}

static void host_send(void *ctx, const uint8_t *frame, size_t len)
{
    conn *l = ctx;
    if (l->wsi == NULL)
        return; /* the node learns of the closed connection next */
    if (l->nout == l->out_cap)
        l->out = sf_grow(l->out, &l->out_cap, sizeof *l->out);
    uint8_t *b = malloc(LWS_PRE + len);
    if (b == NULL)
        sf_oom(LWS_PRE + len);
    memcpy(b + LWS_PRE, frame, len);
    l->out[l->nout++] = (bytes_t){ b, len };
    lws_callback_on_writable(l->wsi);
}

static void host_compute(void *ctx, unsigned w, const nd_chunk *c, const sim_work *job, const uint8_t *work,
    size_t len)
{
    (void)work;
    (void)len;
    conn *l = ctx;
    work_msg *m = RT_MSG_NEW(work_msg, M_WORK);
    m->c = *c;
    m->job = job;
    /* Cleared before the chunk is sent, on the thread that sets it
     * (host_cancel): the worker reads it only after taking this message,
     * which the mailbox orders after the store. */
    atomic_store_explicit(&((worker *)rt_state(l->workers[w]))->stop, false, memory_order_relaxed);
    pthread_mutex_lock(&l->seen_lock);
    nd_worker_view *v = &l->seen->workers[w];
    v->busy = true;
    v->job = c->job;
    v->chunk = c->id;
    v->count = c->count;
    v->started_ms = mono_ms();
    pthread_mutex_unlock(&l->seen_lock);
    rt_send(l->workers[w], &m->hdr);
}

static void host_cancel(void *ctx, unsigned w)
{
    conn *l = ctx;
    /* Relaxed: the flag carries no data; the worker sees it within a slice
     * or the next, and answers nd_done either way. */
    atomic_store_explicit(&((worker *)rt_state(l->workers[w]))->stop, true, memory_order_relaxed);
    pthread_mutex_lock(&l->hold_lock); /* a held worker wakes to see it */
    pthread_cond_broadcast(&l->held_cond);
    pthread_mutex_unlock(&l->hold_lock);
}

static uint64_t host_items_in_hand(void *ctx)
{
    conn *l = ctx;
    uint64_t n = 0;
    for (unsigned w = 0; w < l->nworkers; w++)
        n += atomic_load_explicit(&((worker *)rt_state(l->workers[w]))->in_hand, memory_order_relaxed);
    return n;
}

static void host_caps(void *ctx, pr_caps *caps)
{
    conn *l = ctx;
    struct sysinfo si;
    uint32_t n = 0;
    if (l->ncpu > 0)
        l->backends[n++] = (pr_backend){ .kind = PR_BACKEND_CPU, .device = "cpu",
            .memory = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0, .units = l->ncpu };
    for (unsigned w = l->ncpu; w < l->nworkers; w++) {
        worker *k = rt_state(l->workers[w]);
        l->backends[n++] = (pr_backend){ .kind = k->kind, .device = k->device, .memory = k->memory, .units = 1 };
    }
    *caps = (pr_caps){ .cores = (uint32_t)uv_available_parallelism(), .max_parallel = l->nworkers, .os = "linux",
        .arch = l->arch[0] ? l->arch : NULL, .backends = l->backends, .nbackends = n };
}

/* host_caps' order: the CPU entry (when there are CPU workers), then one
 * entry per device worker. */
static unsigned host_worker_backend(void *ctx, unsigned w)
{
    const conn *l = ctx;
    return l->ncpu == 0 ? w : w < l->ncpu ? 0 : 1 + (w - l->ncpu);
}

static void host_stats(void *ctx, pr_heartbeat *hb)
{
    conn *l = ctx;
    struct rusage ru;
    struct sysinfo si;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec +
        (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
    uint64_t now = mono_ms(), interval_ms = l->last_wall_ms ? now - l->last_wall_ms : 0;
    if (l->last_wall_ms != 0 && now > l->last_wall_ms) {
        uint64_t permille = (cpu_us - l->last_cpu_us) / (now - l->last_wall_ms) / uv_available_parallelism();
        hb->cpu_permille = permille > 1000 ? 1000 : (uint32_t)permille;
    }
    l->last_cpu_us = cpu_us;
    l->last_wall_ms = now;
    if (sysinfo(&si) == 0) {
        hb->mem_total = (uint64_t)si.totalram * si.mem_unit;
        hb->mem_used = (uint64_t)(si.totalram - si.freeram) * si.mem_unit;
    }
    /* Each device's share of the interval spent in kernels (counted when a
     * chunk ends, so a long chunk shows in the interval it finishes). */
    uint32_t nd = 0;
    for (unsigned w = l->ncpu; w < l->nworkers; w++, nd++) {
        worker *k = rt_state(l->workers[w]);
        uint64_t busy = atomic_load(&k->busy_ms), spent = busy - k->busy_seen;
        k->busy_seen = busy;
        uint64_t permille = interval_ms > 0 ? spent * 1000 / interval_ms : 0;
        l->dstats[nd] = (pr_device_stat){ .device = k->device, .util_permille = permille > 1000 ? 1000 : (uint32_t)permille,
            .mem_total = k->memory };
    }
    hb->devices = nd ? l->dstats : NULL;
    hb->ndevices = nd;
}

static void host_state(void *ctx, nd_state st, const char *detail)
{
    conn *l = ctx;
    pthread_mutex_lock(&l->seen_lock);
    l->seen->state = st;
    snprintf(l->seen->detail, sizeof l->seen->detail, "%s", detail != NULL ? detail : "");
    pthread_mutex_unlock(&l->seen_lock);
}

static void host_welcome(void *ctx, uint64_t id)
{
    conn *l = ctx;
    pthread_mutex_lock(&l->seen_lock);
    l->seen->node_id = id;
    pthread_mutex_unlock(&l->seen_lock);
}

static void host_settled(void *ctx, const nd_chunk *c, pr_outcome_kind kind)
{
    conn *l = ctx;
    pthread_mutex_lock(&l->seen_lock);
    if (kind == PR_OUTCOME_ACCEPTED) {
        l->seen->accepted_chunks++;
        l->seen->accepted_items += c->count;
    } else {
        l->seen->refused_chunks++;
    }
    pthread_mutex_unlock(&l->seen_lock);
}

static void host_log(void *ctx, nd_level level, const char *line)
{
    conn *l = ctx;
    static const char said[] = "the coordinator says: "; /* actors/node's line for an error frame */
    if (level == ND_WARN) {
        pthread_mutex_lock(&l->seen_lock);
        snprintf(l->seen->last_warning, sizeof l->seen->last_warning, "%s", line);
        if (strncmp(line, said, sizeof said - 1) == 0)
            snprintf(l->seen->coordinator_said, sizeof l->seen->coordinator_said, "%s", line + sizeof said - 1);
        pthread_mutex_unlock(&l->seen_lock);
    }
    sf_log(level == ND_INFO ? SF_LOG_INFO : SF_LOG_WARN, "node", "%s", line);
}

static void host_stopped(void *ctx, int code)
{
    conn *l = ctx;
    uint64_t busy = 0;
    for (unsigned w = 0; w < l->nworkers; w++)
        busy += atomic_load(&((worker *)rt_state(l->workers[w]))->busy_ms);
    sf_log(SF_LOG_INFO, "node", "kernels ran %llu ms on %u workers in %llu ms", (unsigned long long)busy, l->nworkers,
        (unsigned long long)(mono_ms() - l->started_ms));
    l->exit_code = code;
    pthread_mutex_lock(&l->seen_lock);
    l->seen->stopped = true;
    l->seen->exit_code = code;
    pthread_mutex_unlock(&l->seen_lock);
    if (!uv_is_closing((uv_handle_t *)&l->sigint)) {
        uv_close((uv_handle_t *)&l->sigint, NULL);
        uv_close((uv_handle_t *)&l->sigterm, NULL);
        uv_close((uv_handle_t *)&l->grace, NULL);
    }
    rt_system_stop(l->sys);
}

/* ---- the actors ------------------------------------------------------------------------ */

/* One variant of a chunk on the worker's backend (nd_runner). */
static int run_on(void *ctx, const sim_job *sim, uint64_t first, uint64_t count, sim_stats *out)
{
    worker *w = ctx;
    return w->cl != NULL ? sim_cl_run(w->cl, sim, first, count, out)
        : w->cu != NULL ? sim_cuda_run(w->cu, sim, first, count, out)
        : sim_run_cpu(sim, first, count, out);
}

/* Holds the workers or lets them go (nd_native_hold). */
static void set_held(conn *l, bool on)
{
    pthread_mutex_lock(&l->hold_lock);
    atomic_store_explicit(&l->held, on, memory_order_release);
    pthread_cond_broadcast(&l->held_cond);
    pthread_mutex_unlock(&l->hold_lock);
}

/* Waits here, between two slices of the chunk, while the host holds the
 * workers (nd_native_hold) and the chunk is still wanted. */
static void wait_while_held(worker *w)
{
    conn *l = w->link;
    /* Acquire: pairs with the release in nd_native_hold, so a worker that
     * sees no hold goes on without taking the lock. */
    if (l == NULL || !atomic_load_explicit(&l->held, memory_order_acquire))
        return;
    pthread_mutex_lock(&l->seen_lock);
    l->seen->workers[w->index].held = true;
    pthread_mutex_unlock(&l->seen_lock);
    pthread_mutex_lock(&l->hold_lock);
    while (atomic_load_explicit(&l->held, memory_order_relaxed) && !atomic_load_explicit(&w->stop, memory_order_relaxed))
        pthread_cond_wait(&l->held_cond, &l->hold_lock);
    pthread_mutex_unlock(&l->hold_lock);
    pthread_mutex_lock(&l->seen_lock);
    l->seen->workers[w->index].held = false;
    pthread_mutex_unlock(&l->seen_lock);
}

static bool stop_asked(void *ctx, uint64_t done)
{
    worker *w = ctx;
    atomic_store_explicit(&w->in_hand, done, memory_order_relaxed);
    wait_while_held(w);
    return atomic_load_explicit(&w->stop, memory_order_relaxed);
}

static void worker_behaviour(rt_actor *self, rt_msg *m)
{
    if (m->type != M_WORK)
        return;
    worker *w = rt_state(self);
    uint8_t *data;
    size_t len;
    uint64_t t0 = mono_ms();
    const work_msg *job = (const work_msg *)m;
    int err = nd_compute(job->job, &job->c, run_on, stop_asked, w, &data, &len);
    uint64_t spent = mono_ms() - t0;
    atomic_fetch_add(&w->busy_ms, spent);
    /* what nd_native_look reads: the chunk's items move from in hand to
     * computed at once */
    pthread_mutex_lock(&w->link->seen_lock);
    w->link->seen->workers[w->index].busy = false;
    if (err == 0)
        w->link->seen->items_computed += job->c.count;
    pthread_mutex_unlock(&w->link->seen_lock);
    atomic_store_explicit(&w->in_hand, 0, memory_order_relaxed); /* nd_done counts it now */
    nd_done(w->node, w->index, err, data, len, (uint32_t)spent);
}

/* What each pool thread does as it starts (rt_system_opts.thread_start):
 * the pool runs only the workers, so lowering its threads lowers the
 * compute and leaves the loop thread, which talks to the coordinator, as
 * it was. Linux keeps a nice value per thread. */
typedef struct thread_prio {
    nd_priority level;
    atomic_flag warned;
    pthread_mutex_t lock;      /* guards tids, which nd_native_set_priority walks */
    pid_t tids[ND_MAX_WORKERS];
    unsigned ntids;
} thread_prio;

/* Gives thread tid priority level: 0 or an errno value. Any thread's
 * (Linux keeps the policy and the nice value per thread). */
static int set_thread_priority(pid_t tid, nd_priority level)
{
    struct sched_param sp = { .sched_priority = 0 };
    if (sched_setscheduler(tid, level == ND_PRIORITY_IDLE ? SCHED_IDLE : SCHED_OTHER, &sp) != 0)
        return errno;
    if (level != ND_PRIORITY_IDLE && setpriority(PRIO_PROCESS, (id_t)tid, level == ND_PRIORITY_LOW ? 19 : 0) != 0)
        return errno;
    return 0;
}

static void worker_thread_start(void *arg)
{
    thread_prio *p = arg;
    pid_t tid = gettid();
    pthread_mutex_lock(&p->lock);
    if (p->ntids < ND_MAX_WORKERS)
        p->tids[p->ntids++] = tid;
    nd_priority level = p->level;
    pthread_mutex_unlock(&p->lock);
    int rc = level == ND_PRIORITY_NORMAL ? 0 : set_thread_priority(tid, level);
    if (rc != 0 && !atomic_flag_test_and_set(&p->warned))
        sf_log(SF_LOG_WARN, "node", "cannot lower the compute threads' priority (%s): they run at the process's",
            strerror(rc));
}

static void worker_final(rt_actor *self)
{
    worker *w = rt_state(self);
    sim_cl_destroy(w->cl);
    sim_cuda_destroy(w->cu);
}

static void link_behaviour(rt_actor *self, rt_msg *m)
{
    (void)self;
    (void)m;
}

static void link_final(rt_actor *self)
{
    conn *l = rt_state(self);
    if (l->ctx != NULL)
        lws_context_destroy(l->ctx);
    drop_frames(l);
    free(l->out);
    for (unsigned w = 0; w < l->nworkers; w++)
        rt_actor_release(l->workers[w]);
    free(l->workers);
    if (l->node != NULL)
        rt_actor_release(l->node);
}

static void on_grace_over(uv_timer_t *t)
{
    conn *l = t->data;
    sf_log(SF_LOG_WARN, "node", "the grace period (%u s) is over: leaving with chunks unfinished (the coordinator reassigns them)",
        l->grace_s);
    nd_leave(l->node);
}

/* The first signal drains, within the grace period; a second leaves at once. */
static void on_signal(uv_signal_t *h, int signum)
{
    (void)signum;
    conn *l = h->data;
    if (!uv_is_active((uv_handle_t *)&l->grace) && l->grace_s > 0)
        uv_timer_start(&l->grace, on_grace_over, (uint64_t)l->grace_s * 1000, 0);
    set_held(l, false); /* held workers finish their chunks */
    nd_drain(l->node);
}

/* ws://host[:port]/path, or the coordinator's http://host[:port][/prefix]
 * (its node endpoint is [/prefix]/ws/node, the prefix being where a reverse
 * proxy serves it) -> *u and the path to ask for; wss:// and https:// the
 * same over TLS. The port is the scheme's (80, or 443 for TLS) when none is
 * given. */
static int parse_url(const char *url, sf_url *u, char *path, size_t plen)
{
    if (sf_url_parse(url, u, NULL) != 0)
        return -1;
    bool http = strncmp(u->scheme, "http", 4) == 0;
    size_t n = strlen(u->path);
    if (http && n > 0 && u->path[n - 1] == '/')
        n--;
    int w = http ? snprintf(path, plen, "%.*s/ws/node", (int)n, u->path)
                 : snprintf(path, plen, "%s", u->path[0] && strcmp(u->path, "/") != 0 ? u->path : "/ws/node");
    return w > 0 && (size_t)w < plen ? 0 : -1;
}

/* libwebsockets' error lines (the reason a certificate was refused, say)
 * in the node's log format. */
static void lws_log(int level, const char *line)
{
    (void)level;
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
        n--;
    sf_log(SF_LOG_WARN, "node", "libwebsockets: %.*s", (int)n, line);
}

static int start_lws(conn *l, const char *ca)
{
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[1] = { rt_system_loop(l->sys) };
    l->protocols[0] = (struct lws_protocols){ PR_WS_PROTOCOL, client_cb, 0, 65536, 0, l, 0 };
    info.options = LWS_SERVER_OPTION_LIBUV | (l->tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0);
    info.client_ssl_ca_filepath = l->tls ? ca : NULL; /* NULL: the system's CAs */
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = l->protocols;
    info.user = l;
    if (l->tls && ca != NULL && stat(ca, &l->ca_st) != 0)
        memset(&l->ca_st, 0, sizeof l->ca_st);
    lws_set_log_level(LLL_ERR, lws_log);
    l->ctx = lws_create_context(&info);
    return l->ctx != NULL ? 0 : -1;
}

/* The SHA-256 of this program's file, in hex (65 bytes), or "" when it
 * cannot be read: reported in hello so an operator sees which build each
 * node runs. */
static void program_checksum(char out[65])
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/exe", "rb");
    if (f == NULL)
        return;
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[65536], sum[crypto_hash_sha256_BYTES];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        crypto_hash_sha256_update(&st, buf, n);
    bool ok = !ferror(f);
    fclose(f);
    crypto_hash_sha256_final(&st, sum);
    if (ok)
        sodium_bin2hex(out, 65, sum, sizeof sum);
}

/* What --backend asks for: a comma-separated list of auto, cpu, opencl,
 * cuda. */
typedef struct backends {
    bool cpu, opencl, cuda;
    bool any_gpu; /* auto: the devices that are there, GPUs only */
} backends;

static int parse_backends(const char *spec, backends *b)
{
    *b = (backends){ 0 };
    if (spec == NULL || spec[0] == '\0')
        spec = "auto";
    const char *p = spec;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 4 && strncmp(p, "auto", 4) == 0)
            b->cpu = b->any_gpu = true;
        else if (n == 3 && strncmp(p, "cpu", 3) == 0)
            b->cpu = true;
        else if (n == 6 && strncmp(p, "opencl", 6) == 0)
            b->opencl = true;
        else if (n == 4 && strncmp(p, "cuda", 4) == 0)
            b->cuda = true;
        else
            return -1;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Opens the device backends asked for into workers[ncpu ..]; returns how
 * many, or -1 (with the reason said) when an explicitly named backend has
 * no usable device. */
static int open_devices(const backends *b, worker *out, unsigned cap)
{
    char err[4096];
    unsigned n = 0, skipped = 0;
    bool have_cuda = false;
    if (b->cuda || b->any_gpu) {
        /* One worker per CUDA device the driver lists. */
        nd_device devs[ND_MAX_DEVICES];
        sf_error none;
        size_t nd = nd_devices_cuda(devs, ND_MAX_DEVICES, &none);
        snprintf(err, sizeof err, "%s", none.msg);
        skipped += nd > ND_MAX_DEVICES ? (unsigned)(nd - ND_MAX_DEVICES) : 0;
        for (size_t i = 0; i < nd && i < ND_MAX_DEVICES; i++) {
            if (n == cap) {
                skipped++;
                continue;
            }
            sim_cuda *cu = NULL;
            char why[4096];
            int rc = sim_cuda_open(&cu, devs[i].number, why, sizeof why);
            if (rc != 0) {
                snprintf(err, sizeof err, "%s", why[0] ? why : sf_strerror(rc));
                if (rc != SIM_ENOBACKEND) /* said once, below, for --backend cuda */
                    sf_log(SF_LOG_WARN, "node", "CUDA device %u (%s) not used: %s", devs[i].number, devs[i].name, err);
                continue;
            }
            out[n] = (worker){ .kind = PR_BACKEND_CUDA, .cu = cu, .memory = devs[i].memory };
            snprintf(out[n].device, sizeof out[n].device, "%s", sim_cuda_device(cu));
            n++;
            have_cuda = true;
        }
        if (b->cuda && !have_cuda) {
            sf_log(SF_LOG_WARN, "node", "--backend cuda: %s", err);
            return -1;
        }
    }
    if (b->opencl || b->any_gpu) {
        nd_device devs[ND_MAX_DEVICES];
        size_t nd = nd_devices_opencl(devs, ND_MAX_DEVICES);
        unsigned opened = 0;
        if (b->opencl) /* the ones not listed: auto would use only the GPUs among them */
            skipped += nd > ND_MAX_DEVICES ? (unsigned)(nd - ND_MAX_DEVICES) : 0;
        for (size_t i = 0; i < nd && i < ND_MAX_DEVICES; i++) {
            /* auto takes GPUs only (a CPU device would compete with the
             * CPU workers), and not an NVIDIA GPU that CUDA drives already. */
            if (!b->opencl && (!devs[i].gpu || (have_cuda && strstr(devs[i].vendor, "NVIDIA") != NULL)))
                continue;
            if (n == cap) {
                skipped++;
                continue;
            }
            sim_cl *cl = NULL;
            int rc = sim_cl_open(&cl, devs[i].number, err, sizeof err);
            if (rc != 0) {
                sf_log(SF_LOG_WARN, "node", "OpenCL device %u (%s) not used: %s", devs[i].number, devs[i].name,
                    err[0] ? err : sf_strerror(rc));
                continue;
            }
            out[n] = (worker){ .kind = PR_BACKEND_OPENCL, .cl = cl, .memory = devs[i].memory };
            snprintf(out[n].device, sizeof out[n].device, "%s", devs[i].name);
            n++;
            opened++;
        }
        if (b->opencl && opened == 0) {
            sf_log(SF_LOG_WARN, "node", "--backend opencl: no usable OpenCL device (%zu found)", nd);
            return -1;
        }
    }
    if (skipped > 0)
        sf_log(SF_LOG_WARN, "node", "%u device%s not used: a node drives %u devices at most", skipped, skipped > 1 ? "s" : "",
            cap);
    return (int)n;
}

static void spawn_workers(conn *l, rt_system *sys, const worker *devs, unsigned ndevs)
{
    l->nworkers = l->ncpu + ndevs;
    l->workers = calloc(l->nworkers, sizeof *l->workers);
    if (l->workers == NULL)
        sf_oom(l->nworkers * sizeof *l->workers);
    for (unsigned w = 0; w < l->nworkers; w++) {
        l->workers[w] = rt_spawn(sys, worker_behaviour, &(rt_actor_opts){ .state_size = sizeof(worker),
            .finalize = worker_final, .name = "worker" });
        worker *k = rt_state(l->workers[w]);
        if (w < l->ncpu) {
            *k = (worker){ .kind = PR_BACKEND_CPU };
            snprintf(k->device, sizeof k->device, "cpu");
        } else {
            *k = devs[w - l->ncpu];
        }
        k->node = l->node;
        k->index = w;
    }
}

struct nd_native {
    rt_system *sys;
    rt_actor *link;
    conn *l;
    pr_key key;
    thread_prio prio;
};

static void close_devices(worker *devs, int n)
{
    for (int i = 0; i < n; i++) {
        sim_cl_destroy(devs[i].cl);
        sim_cuda_destroy(devs[i].cu);
    }
}

int nd_native_open(const nd_opts *opts, nd_native **out)
{
    char keypath[4096], path[128];
    sf_url u;
    backends b;
    const char *url_from = opts->url_from ? opts->url_from : "--server";
    const char *ca_from = opts->ca_from ? opts->ca_from : "--ca";
    *out = NULL;
    /* the node's progress goes to standard output, its warnings to standard error */
    sf_log_setup(opts->log_format, SF_LOG_INFO, true);
    if (parse_url(opts->url, &u, path, sizeof path) != 0) {
        sf_log(SF_LOG_WARN, "node", "%s wants ws://HOST[:PORT]/ws/node or http://HOST[:PORT][/PREFIX] (wss:// or https:// "
            "for TLS), not '%s'", url_from, opts->url);
        return SF_EXIT_USAGE;
    }
    if (opts->ca_path != NULL) {
        FILE *f = fopen(opts->ca_path, "r");
        if (f == NULL) {
            sf_log(SF_LOG_WARN, "node", "%s %s: %s", ca_from, opts->ca_path, strerror(errno));
            return SF_EXIT_FAIL;
        }
        fclose(f);
        if (!u.tls)
            sf_log(SF_LOG_WARN, "node", "%s %s is not used: %s is not a TLS address (wss:// or https://)", ca_from,
                opts->ca_path, opts->url);
    }
    if (parse_backends(opts->backend, &b) != 0) {
        sf_log(SF_LOG_WARN, "node", "--backend wants auto, cpu, opencl or cuda (or a list: cpu,opencl), not '%s'",
            opts->backend);
        return SF_EXIT_USAGE;
    }
    if (opts->key_path != NULL)
        snprintf(keypath, sizeof keypath, "%s", opts->key_path);
    else
        nd_key_default_path(keypath, sizeof keypath);
    char checksum[65];
    program_checksum(checksum);
    /* The host name by default: its first label when the whole is no name
     * (longer than a name may be). */
    char hostname[256] = "";
    if (opts->name == NULL && gethostname(hostname, sizeof hostname - 1) == 0 && pr_node_name_check(hostname) != NULL)
        hostname[strcspn(hostname, ".")] = '\0';
    nd_config cfg = { .claim_token = opts->claim_token, .version = "simfarm-node " SF_VERSION,
        .checksum = checksum[0] ? checksum : NULL,
        .name = opts->name != NULL ? opts->name : pr_node_name_check(hostname) == NULL ? hostname : NULL };
    bool created;
    sf_error kerr;
    if (nd_key_load(keypath, &cfg.key, &created, &kerr) != 0) {
        sf_log(SF_LOG_WARN, "node", "%s", kerr.msg);
        return SF_EXIT_FAIL;
    }
    if (created)
        sf_log(SF_LOG_INFO, "node", "new key in %s", keypath);

    worker devs[ND_MAX_DEVICES];
    int ndevs = open_devices(&b, devs, ND_MAX_DEVICES);
    if (ndevs < 0) {
        pr_key_wipe(&cfg.key);
        return SF_EXIT_FAIL;
    }
    unsigned ncpu = b.cpu ? (opts->cores ? opts->cores : (unsigned)uv_available_parallelism()) : 0;
    if (ncpu + (unsigned)ndevs > ND_MAX_WORKERS) { /* the node computes this many chunks at most */
        unsigned fit = ND_MAX_WORKERS - (unsigned)ndevs;
        sf_log(SF_LOG_WARN, "node", "%u CPU workers, not %u: a node runs %u workers at most", fit, ncpu, ND_MAX_WORKERS);
        ncpu = fit;
    }
    nd_native *h = sf_calloc(1, sizeof *h);
    h->key = cfg.key;
    h->prio.level = opts->priority;
    atomic_flag_clear(&h->prio.warned);
    pthread_mutex_init(&h->prio.lock, NULL);
    rt_system_opts so = { .workers = ncpu + (unsigned)ndevs, .thread_start = worker_thread_start, .thread_arg = &h->prio };
    int e = 0;
    h->sys = rt_system_create(&so, &e);
    if (h->sys == NULL) {
        close_devices(devs, ndevs);
        sf_log(SF_LOG_WARN, "node", "cannot start the runtime: %s", sf_strerror(e));
        nd_native_close(h);
        return SF_EXIT_FAIL;
    }
    rt_actor_opts lo = { .state_size = sizeof(conn), .pinned = true, .finalize = link_final, .name = "link" };
    h->link = rt_spawn(h->sys, link_behaviour, &lo);
    conn *l = h->l = rt_state(h->link);
    l->sys = h->sys;
    l->started_ms = mono_ms();
    l->grace_s = opts->grace_s;
    l->ncpu = ncpu;
    pthread_mutex_init(&l->seen_lock, NULL);
    pthread_mutex_init(&l->hold_lock, NULL);
    pthread_cond_init(&l->held_cond, NULL);
    l->seen = sf_calloc(1, sizeof *l->seen);
    snprintf(l->addr, sizeof l->addr, "%s", u.host);
    snprintf(l->path, sizeof l->path, "%s", path);
    l->port = u.port;
    l->tls = u.tls;
    l->ca = opts->ca_path;
    l->ca_from = ca_from;
    /* As in the Host header: the port only when it is not the scheme's
     * (PROTOCOL.md §6), which is what a browser sends too. */
    bool v6 = strchr(l->addr, ':') != NULL;
    if (l->port == (u.tls ? 443 : 80))
        snprintf(l->hostport, sizeof l->hostport, v6 ? "[%s]" : "%s", l->addr);
    else
        snprintf(l->hostport, sizeof l->hostport, v6 ? "[%s]:%d" : "%s:%d", l->addr, l->port);
    for (char *p = l->hostport; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    struct utsname un;
    if (uname(&un) == 0)
        snprintf(l->arch, sizeof l->arch, "%.31s", un.machine);
    if (start_lws(l, opts->ca_path) != 0) {
        if (u.tls && opts->ca_path != NULL)
            sf_log(SF_LOG_WARN, "node", "cannot start libwebsockets with TLS: is %s %s a PEM file of certificates?", ca_from,
                opts->ca_path);
        else
            sf_log(SF_LOG_WARN, "node", "cannot start libwebsockets%s", u.tls ? " with TLS" : "");
        close_devices(devs, ndevs);
        nd_native_close(h);
        return SF_EXIT_FAIL;
    }

    cfg.audience = l->hostport;
    cfg.workers = ncpu + (unsigned)ndevs;
    nd_host host = { .ctx = l, .connect = host_connect, .send = host_send, .compute = host_compute,
        .cancel = host_cancel, .worker_backend = host_worker_backend, .caps = host_caps, .stats = host_stats,
        .items_in_hand = host_items_in_hand, .settled = host_settled, .welcome = host_welcome, .state = host_state,
        .log = host_log, .stopped = host_stopped };
    l->node = nd_spawn(h->sys, &cfg, &host);
    spawn_workers(l, h->sys, devs, (unsigned)ndevs);
    l->seen->nworkers = l->nworkers;
    l->seen->ncpu = ncpu;
    for (unsigned w = 0; w < l->nworkers; w++) {
        worker *k = rt_state(l->workers[w]);
        k->link = l;
        l->seen->workers[w].kind = k->kind;
        l->seen->workers[w].lent = true;
        snprintf(l->seen->workers[w].device, sizeof l->seen->workers[w].device, "%s", k->device);
        if (k->kind != PR_BACKEND_CPU)
            sf_log(SF_LOG_INFO, "node", "worker %u: %s on %s", w, k->kind == PR_BACKEND_CUDA ? "CUDA" : "OpenCL", k->device);
    }
    sf_log(SF_LOG_INFO, "node", "%u workers (%u CPU, %d device)%s, connecting to %s", l->nworkers, ncpu, ndevs,
        opts->priority == ND_PRIORITY_LOW ? " at nice 19" : opts->priority == ND_PRIORITY_IDLE ? " at idle priority" : "",
        opts->url);
    uv_signal_init(rt_system_loop(h->sys), &l->sigint);
    uv_signal_init(rt_system_loop(h->sys), &l->sigterm);
    uv_timer_init(rt_system_loop(h->sys), &l->grace);
    l->sigint.data = l->sigterm.data = l->grace.data = l;
    uv_signal_start(&l->sigint, on_signal, SIGINT);
    uv_signal_start(&l->sigterm, on_signal, SIGTERM);
    *out = h;
    return SF_EXIT_OK;
}

int nd_native_run(nd_native *h)
{
    rt_system_run(h->sys);
    return h->l->exit_code; /* the state outlives the run: the handle's reference holds it */
}

void nd_native_close(nd_native *h)
{
    if (h == NULL)
        return;
    pr_key_wipe(&h->key);
    nd_native_view *seen = h->l != NULL ? h->l->seen : NULL;
    if (h->l != NULL && h->l->seen != NULL) {
        pthread_mutex_destroy(&h->l->seen_lock);
        pthread_mutex_destroy(&h->l->hold_lock);
        pthread_cond_destroy(&h->l->held_cond);
    }
    if (h->link != NULL)
        rt_actor_release(h->link);
    if (h->sys != NULL)
        rt_system_destroy(h->sys);
    free(seen);
    pthread_mutex_destroy(&h->prio.lock);
    free(h);
}

rt_actor *nd_native_node(nd_native *h)
{
    return h->l->node;
}

void nd_native_look(nd_native *h, nd_native_view *v)
{
    conn *l = h->l;
    pthread_mutex_lock(&l->seen_lock);
    *v = *l->seen;
    /* a held worker stops at its next slice, within about 100 ms: held
     * from now on, as the host asked (a worker starved of CPU by a busy
     * machine may take longer to get there, but computes nothing meanwhile) */
    bool held = atomic_load_explicit(&l->held, memory_order_relaxed);
    for (unsigned w = 0; w < v->nworkers; w++)
        if (v->workers[w].busy) {
            v->workers[w].held |= held;
            v->workers[w].done = atomic_load_explicit(&((worker *)rt_state(l->workers[w]))->in_hand,
                memory_order_relaxed);
            v->items_computed += v->workers[w].done;
        }
    pthread_mutex_unlock(&l->seen_lock);
}

void nd_native_use(nd_native *h, unsigned cpu, bool devices)
{
    conn *l = h->l;
    for (unsigned w = 0; w < l->nworkers; w++) {
        bool lend = w < l->ncpu ? w < cpu : devices;
        pthread_mutex_lock(&l->seen_lock);
        bool was = l->seen->workers[w].lent;
        l->seen->workers[w].lent = lend;
        pthread_mutex_unlock(&l->seen_lock);
        if (was != lend)
            nd_worker_off(l->node, w, !lend);
    }
}

void nd_native_hold(nd_native *h, bool on)
{
    set_held(h->l, on);
}

int nd_native_set_priority(nd_native *h, nd_priority p)
{
    int first = 0;
    pthread_mutex_lock(&h->prio.lock);
    h->prio.level = p;
    for (unsigned i = 0; i < h->prio.ntids; i++) {
        int rc = set_thread_priority(h->prio.tids[i], p);
        if (rc != 0 && first == 0)
            first = rc;
    }
    pthread_mutex_unlock(&h->prio.lock);
    return first;
}

int nd_run(const nd_opts *opts)
{
    nd_native *h;
    int code = nd_native_open(opts, &h);
    if (h == NULL)
        return code;
    code = nd_native_run(h);
    nd_native_close(h);
    return code;
}
