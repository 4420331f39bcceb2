/*
 * coordinator.c — the coordinator's wiring (coordinator.h).
 */
#include "actors/coord/coordinator.h"

#include "actors/coord/gateway.h"
#include "actors/coord/jobs.h"
#include "actors/coord/scheduler.h"
#include "actors/coord/store.h"
#include "base/log.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

/* How long a stop waits for the node sessions' work to reach the database. */
enum { DRAIN_MS = 10000, DRAIN_POLL_MS = 20, CLOSE_MS = 1000 };

typedef struct signals {
    uv_signal_t sigint, sigterm, sighup;
    uv_timer_t drain;
    rt_system *sys;
    rt_actor *gateway, *store; /* references, released once the loop has stopped */
    const char *name;
    enum { RUNNING, DRAINING, STOPPED } state;
    uint64_t drain_ms;       /* when the drain began (uv_now) */
    uint64_t close_ms;       /* when the node connections were told to close; 0: not yet */
    unsigned quiet;          /* drain polls in a row that found nothing left */
    bool taken;              /* another coordinator holds the database */
} signals;

static void stop_now(signals *s)
{
    if (s->state == STOPPED)
        return;
    s->state = STOPPED;
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sighup, NULL);
    uv_close((uv_handle_t *)&s->drain, NULL);
    rt_system_stop(s->sys);
}

/* The runtime stops once the store has answered every node session's
 * write (twice in a row: a session that closed just now is out of the
 * table, its last write a message away), at once while the database is
 * away, or after DRAIN_MS. Completions need no wait: a node's result is
 * acknowledged only once its journal row is committed, so the node sends
 * again what was not. Before it stops, the node connections are closed
 * with 1001 (going away), so a node reads that the coordinator stopped
 * rather than a lost connection; at most CLOSE_MS is given to that. */
static void on_drain(uv_timer_t *t)
{
    signals *s = t->data;
    cd_store_backlog b;
    cd_store_backlog_get(s->store, &b);
    unsigned pending = cd_gateway_saves_pending(s->gateway);
    s->quiet = pending == 0 ? s->quiet + 1 : 0;
    if (s->quiet >= 2) {
        if (s->close_ms == 0) {
            cd_gateway_close_nodes(s->gateway, "the coordinator is stopping");
            s->close_ms = uv_now(t->loop);
        }
        if (cd_gateway_node_connections(s->gateway) == 0 || uv_now(t->loop) - s->close_ms >= CLOSE_MS)
            stop_now(s);
    } else if (!b.up || uv_now(t->loop) - s->drain_ms >= DRAIN_MS) {
        sf_log(SF_LOG_WARN, NULL, "stopping without the work of %u node sessions since their last save: %s", pending,
            b.up ? "the database did not answer in 10 s" : "the database is down");
        stop_now(s);
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    signals *s = h->data;
    const char *name = signum == SIGINT ? "SIGINT" : signum == SIGHUP ? "SIGHUP" : "SIGTERM";
    if (s->state == DRAINING) {
        sf_log(SF_LOG_INFO, NULL, "%s again, stopping now", name);
        stop_now(s);
        return;
    }
    sf_log(SF_LOG_INFO, NULL, "%s, stopping", name);
    /* what the node sessions have had accepted goes to the database first */
    s->state = DRAINING;
    cd_gateway_save_work(s->gateway);
    s->drain_ms = uv_now(h->loop);
    uv_timer_start(&s->drain, on_drain, 0, DRAIN_POLL_MS);
}

/* The store could not take the database from another coordinator: this
 * one stops at once, with nothing of its own to write. */
static void on_taken(void *ctx, const char *why)
{
    signals *s = ctx;
    sf_log(SF_LOG_ERROR, s->name, "%s", why);
    s->taken = true;
    stop_now(s);
}

static void on_sighup(uv_signal_t *h, int signum)
{
    (void)signum;
    signals *s = h->data;
    sf_error e;
    cd_gateway_reload_tls(s->gateway, &e);
    sf_log(SF_LOG_INFO, s->name, "SIGHUP: %s", e.msg);
}

int cd_coordinator_run(const cd_coordinator_opts *opts)
{
    cd_job_default_tiers_set(opts->default_tiers); /* before the actors that read it */
    int err = 0;
    rt_system *sys = rt_system_create(NULL, &err);
    if (sys == NULL) {
        sf_log(SF_LOG_ERROR, opts->name, "cannot start the runtime: %s", sf_strerror(err));
        return err;
    }
    signals s = { .sys = sys, .name = opts->name };
    cd_store_opts so = { .conninfo = opts->db, .connections = opts->pool ? opts->pool : 2, .listen = "pending_job",
        .backlog_bytes = opts->db_backlog_bytes, .exclusive = true, .taken = on_taken, .taken_ctx = &s };
    rt_actor *store = cd_store_spawn(sys, &so);
    sf_error gerr = { 0, "" };
    cd_scheduler_opts cs = { .store = store, .ledger = { .target_chunk_ms = opts->chunk_ms } };
    rt_actor *scheduler = store ? cd_scheduler_spawn(sys, &cs) : NULL;
    cd_gateway_opts go = { .host = opts->host, .port = opts->port, .store = store, .scheduler = scheduler,
        .open_enrolment = opts->open_enrolment, .private_reads = opts->private_reads, .token_file = opts->token_file,
        .web_dir = opts->web_dir,
        .tls_cert = opts->tls_cert, .tls_key = opts->tls_key, .heartbeat_ms = opts->heartbeat_ms,
        .trusted_proxies = opts->trusted_proxies, .node_origins = opts->node_origins,
        .n_node_origins = opts->n_node_origins, .max_connections = opts->max_connections,
        .max_connections_per_addr = opts->max_connections_per_addr };
    rt_actor *burst = NULL;
    if (scheduler != NULL && opts->burst != NULL) {
        cd_burst_opts bo = *opts->burst;
        bo.store = store;
        bo.scheduler = scheduler;
        burst = cd_burst_spawn(sys, &bo);
    }
    go.burst = burst;
    rt_actor *gateway = scheduler ? cd_gateway_spawn(sys, &go, &gerr) : NULL;
    if (gateway == NULL) {
        sf_log(SF_LOG_ERROR, opts->name, "%s",
            !store ? "cannot start the store" : !scheduler ? "cannot start the scheduler" : gerr.msg);
        if (store != NULL)
            rt_actor_release(store);
        if (scheduler != NULL)
            rt_actor_release(scheduler);
        if (burst != NULL)
            rt_actor_release(burst);
        rt_system_destroy(sys);
        return store == NULL || scheduler == NULL ? CD_ECONFIG : gerr.code;
    }

    s.gateway = rt_actor_retain(gateway);
    s.store = rt_actor_retain(store);
    uv_loop_t *loop = rt_system_loop(sys);
    uv_signal_init(loop, &s.sigint);
    uv_signal_init(loop, &s.sigterm);
    uv_signal_init(loop, &s.sighup);
    uv_timer_init(loop, &s.drain);
    s.sigint.data = s.sigterm.data = s.sighup.data = s.drain.data = &s;
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    uv_signal_start(&s.sighup, opts->hangup_stops ? on_signal : on_sighup, SIGHUP);

    int port = cd_gateway_port(gateway);
    if (burst != NULL) {
        /* the nodes join by the address served: a wildcard one by this machine's loopback */
        const char *h = opts->host;
        bool v6 = strchr(h, ':') != NULL;
        if (strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0)
            h = v6 ? "::1" : "127.0.0.1";
        char server[400];
        snprintf(server, sizeof server, "%s://%s%s%s:%d/ws/node", opts->tls_cert ? "wss" : "ws", v6 ? "[" : "", h,
            v6 ? "]" : "", port);
        cd_burst_start(burst, server);
        rt_actor_release(burst);
    }
    if (opts->started != NULL)
        opts->started(sys, store, opts->host, port, opts->ctx);
    rt_actor_release(store);
    rt_actor_release(gateway);
    rt_actor_release(scheduler);
    int rc = rt_system_run(sys);
    rt_actor_release(s.gateway);
    rt_actor_release(s.store);
    rt_system_destroy(sys);
    sf_log(SF_LOG_INFO, opts->name, "stopped");
    return s.taken ? CD_EDB : rc;
}
