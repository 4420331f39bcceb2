/*
 * node_uv.c — see node.h.
 *
 * The native host of the node actor (actors/node.h): a libwebsockets
 * client on the runtime's loop carries the frames, one worker actor per
 * allowed core computes chunks on the pool, and SIGINT/SIGTERM drain the
 * node. The connection's state lives in a pinned "link" actor, so that
 * libwebsockets is torn down on the loop when the system stops.
 */
#include "node-native/node.h"

#include "actors/node.h"
#include "node-native/keyfile.h"
#include "proto/msg.h"
#include "runtime/runtime.h"
#include "sim/sim.h"

#include <libwebsockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <uv.h>

enum { M_WORK = RT_MSG_USER + 0x1700 };

typedef struct bytes_t {
    uint8_t *p;
    size_t len;
} bytes_t;

typedef struct conn {
    rt_system *sys;
    rt_actor *node;
    char addr[256], path[128], hostport[300];
    int port;
    struct lws_context *ctx;
    struct lws_protocols protocols[2];
    struct lws *wsi;
    uint8_t *rx;
    size_t rx_len;
    bytes_t *out;          /* frames to write, LWS_PRE headroom each */
    size_t nout, out_cap;
    rt_actor **workers;
    unsigned nworkers;
    char arch[32];
    pr_backend cpu;
    uint64_t last_cpu_us, last_wall_ms;
    int exit_code;
    uv_signal_t sigint, sigterm;
} conn;

typedef struct worker {
    rt_actor *node;
    unsigned index;
} worker;

typedef struct work_msg {
    rt_msg hdr;
    uint64_t start, count;
    const sim_job *sim;    /* the node keeps it until the answer */
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
    (void)user;
    const struct lws_protocols *p = lws_get_protocol(wsi);
    conn *l = p ? p->user : NULL;
    if (l == NULL)
        return 0;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        l->wsi = wsi;
        nd_up(l->node);
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
            nd_down(l->node, reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR && in ? (const char *)in : "closed");
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---- what the node actor asks of its host ------------------------------------------ */

static void host_connect(void *ctx)
{
    conn *l = ctx;
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = l->ctx;
    ci.address = l->addr;
    ci.port = l->port;
    ci.path = l->path;
    ci.host = l->hostport;
    ci.origin = l->hostport;
    ci.protocol = PR_WS_PROTOCOL;
    if (lws_client_connect_via_info(&ci) == NULL)
        nd_down(l->node, "cannot start a connection");
}

static void host_send(void *ctx, const uint8_t *frame, size_t len)
{
    conn *l = ctx;
    if (l->wsi == NULL)
        return; /* the node learns of the closed connection next */
    if (l->nout == l->out_cap)
        l->out = rt_grow(l->out, &l->out_cap, sizeof *l->out);
    uint8_t *b = malloc(LWS_PRE + len);
    if (b == NULL)
        rt_oom(LWS_PRE + len);
    memcpy(b + LWS_PRE, frame, len);
    l->out[l->nout++] = (bytes_t){ b, len };
    lws_callback_on_writable(l->wsi);
}

static void host_compute(void *ctx, unsigned w, const nd_chunk *c, const sim_job *sim, const uint8_t *work,
    size_t len)
{
    (void)work;
    (void)len;
    conn *l = ctx;
    work_msg *m = RT_MSG_NEW(work_msg, M_WORK);
    m->start = c->start;
    m->count = c->count;
    m->sim = sim;
    rt_send(l->workers[w], &m->hdr);
}

static void host_caps(void *ctx, pr_caps *caps)
{
    conn *l = ctx;
    struct sysinfo si;
    l->cpu = (pr_backend){ .kind = PR_BACKEND_CPU, .device = "cpu",
        .memory = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0, .units = l->nworkers };
    *caps = (pr_caps){ .cores = (uint32_t)uv_available_parallelism(), .max_parallel = l->nworkers, .os = "linux",
        .arch = l->arch[0] ? l->arch : NULL, .backends = &l->cpu, .nbackends = 1 };
}

static void host_stats(void *ctx, pr_heartbeat *hb)
{
    conn *l = ctx;
    struct rusage ru;
    struct sysinfo si;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec +
        (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
    uint64_t now = mono_ms();
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
}

static void host_log(void *ctx, nd_level level, const char *line)
{
    (void)ctx;
    FILE *f = level == ND_INFO ? stdout : stderr;
    fprintf(f, "simfarm node: %s\n", line);
    fflush(f);
}

static void host_stopped(void *ctx, int code)
{
    conn *l = ctx;
    l->exit_code = code;
    if (!uv_is_closing((uv_handle_t *)&l->sigint)) {
        uv_close((uv_handle_t *)&l->sigint, NULL);
        uv_close((uv_handle_t *)&l->sigterm, NULL);
    }
    rt_system_stop(l->sys);
}

/* ---- the actors ------------------------------------------------------------------------ */

static void worker_behaviour(rt_actor *self, rt_msg *m)
{
    if (m->type != M_WORK)
        return;
    worker *w = rt_state(self);
    work_msg *job = (work_msg *)m;
    uint8_t *data;
    size_t len;
    uint64_t t0 = mono_ms();
    int err = nd_compute_cpu(job->sim, job->start, job->count, &data, &len);
    nd_done(w->node, w->index, err, data, len, (uint32_t)(mono_ms() - t0));
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

static void on_signal(uv_signal_t *h, int signum)
{
    (void)signum;
    nd_drain(h->data);
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

static int start_lws(conn *l)
{
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[1] = { rt_system_loop(l->sys) };
    l->protocols[0] = (struct lws_protocols){ PR_WS_PROTOCOL, client_cb, 0, 65536, 0, l, 0 };
    info.options = LWS_SERVER_OPTION_LIBUV;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = l->protocols;
    lws_set_log_level(LLL_ERR, NULL);
    l->ctx = lws_create_context(&info);
    return l->ctx != NULL ? 0 : -1;
}

int nd_run(const nd_opts *opts)
{
    char keypath[4096], err[4200];
    if (opts->key_path != NULL)
        snprintf(keypath, sizeof keypath, "%s", opts->key_path);
    else
        nd_key_default_path(keypath, sizeof keypath);
    nd_config cfg = { .claim_token = opts->claim_token, .version = "simfarm-node " ND_VERSION };
    bool created;
    if (nd_key_load(keypath, &cfg.key, &created, err, sizeof err) != 0) {
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
        pr_key_wipe(&cfg.key);
        fprintf(stderr, "simfarm node: cannot start the runtime: %s\n", rt_strerror(e));
        return ND_EXIT_FAIL;
    }
    rt_actor_opts lo = { .state_size = sizeof(conn), .pinned = true, .finalize = link_final, .name = "link" };
    rt_actor *a = rt_spawn(sys, link_behaviour, &lo);
    conn *l = rt_state(a);
    l->sys = sys;
    int code = ND_EXIT_FAIL;
    if (parse_url(opts->url, l->addr, sizeof l->addr, &l->port, l->path, sizeof l->path) != 0) {
        fprintf(stderr, "simfarm node: --server wants ws://HOST:PORT/ws/node or http://HOST:PORT, not '%s'\n",
            opts->url);
        code = ND_EXIT_USAGE;
        goto out;
    }
    if (start_lws(l) != 0) {
        fprintf(stderr, "simfarm node: cannot start libwebsockets\n");
        goto out;
    }
    snprintf(l->hostport, sizeof l->hostport, "%s:%d", l->addr, l->port);
    for (char *p = l->hostport; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(l->arch, sizeof l->arch, "%.31s", u.machine);

    cfg.audience = l->hostport;
    cfg.workers = workers;
    nd_host host = { .ctx = l, .connect = host_connect, .send = host_send, .compute = host_compute,
        .caps = host_caps, .stats = host_stats, .log = host_log, .stopped = host_stopped };
    l->nworkers = workers;
    l->workers = calloc(workers, sizeof *l->workers);
    if (l->workers == NULL)
        rt_oom(workers * sizeof *l->workers);
    printf("simfarm node: %u workers, connecting to %s\n", workers, opts->url);
    fflush(stdout);
    l->node = nd_spawn(sys, &cfg, &host);
    for (unsigned w = 0; w < workers; w++) {
        l->workers[w] = rt_spawn(sys, worker_behaviour, &(rt_actor_opts){ .state_size = sizeof(worker),
            .name = "worker" });
        *(worker *)rt_state(l->workers[w]) = (worker){ .node = l->node, .index = w };
    }
    uv_signal_init(rt_system_loop(sys), &l->sigint);
    uv_signal_init(rt_system_loop(sys), &l->sigterm);
    l->sigint.data = l->sigterm.data = l->node;
    uv_signal_start(&l->sigint, on_signal, SIGINT);
    uv_signal_start(&l->sigterm, on_signal, SIGTERM);

    rt_system_run(sys);
    code = l->exit_code; /* the state outlives the run: our reference holds it */
out:
    pr_key_wipe(&cfg.key);
    rt_actor_release(a);
    rt_system_destroy(sys);
    return code;
}
