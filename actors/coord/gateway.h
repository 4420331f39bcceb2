/*
 * gateway.h — the coordinator's one port: libwebsockets on the runtime's
 * libuv loop (with TLS when given a certificate), serving
 *
 *   /health, /metrics      health and Prometheus metrics
 *   /api/...               the HTTP API (docs/api.md; api.h)
 *   /ws/node               node sessions (WebSocket, simfarm.node.v1; session.h); a
 *                          browser page of another origin is refused (403)
 *   /ws/events             live events (WebSocket, simfarm.events.v1; events.h)
 *   anything else (GET)    the files of the web directory
 *
 * The gateway is a pinned actor: lws callbacks (loop thread) hand each
 * complete request to it as a message, it asks the store, and the answer is
 * written when lws says the connection is writable. It receives the
 * scheduler's job events and the sessions' node events, numbers them and
 * sends them to /ws/events clients.
 */
#ifndef SIMFARM_ACTORS_GATEWAY_H
#define SIMFARM_ACTORS_GATEWAY_H

#include "actors/coord/proxies.h"
#include "base/err.h"
#include "runtime/runtime.h"

typedef struct cd_gateway_opts {
    const char *host;        /* interface to bind, e.g. "127.0.0.1" */
    int port;                /* 0 = any free port (see cd_gateway_port) */
    rt_actor *store;         /* the store actor (retained) */
    rt_actor *scheduler;     /* the scheduler (retained): node sessions on /ws/node */
    bool open_enrolment;     /* unknown node keys join as public nodes */
    bool private_reads;      /* reads of the API and /metrics need an API token, /ws/events a ticket */
    size_t max_body;         /* largest request body; default 1 MiB */
    uint64_t db_timeout_ms;  /* an answer from the store within this, else 503; default 5000 */
    uint32_t heartbeat_ms;   /* nodes' heartbeat interval; default 5000 */
    const char *web_dir;     /* static files; NULL = none */
    const char *token_file;  /* an admin API token kept here (created when absent); may be NULL */
    const char *tls_cert;    /* PEM certificate and key: https and wss; both or neither */
    const char *tls_key;
    const cd_proxies *trusted_proxies; /* whose X-Forwarded-For names the client (copied); may be NULL */
    const char *const *node_origins; /* more origins whose pages may open /ws/node (SCHEME://HOST[:PORT],
                                        http or https; copied); the coordinator's own always may */
    size_t n_node_origins;
    /* Connection caps (HTTP and WebSocket together; docs/coordinator.md,
     * "Connection limits"): past max_connections the oldest connection that
     * has not sent a request yet is closed to make room, or, when none has,
     * the new one is closed at once; past max_connections_per_addr
     * connections from one client address (an IPv4 address, an IPv6 /64;
     * a trusted proxy is not capped) the new one is closed at once. 0: from
     * RLIMIT_NOFILE, less a reserve for the database's connections and
     * files (max_connections), and the smaller of 256 and half the total
     * (per address). Each at least 1. */
    unsigned max_connections;
    unsigned max_connections_per_addr;
    rt_actor *burst;         /* the burst actor (retained), or NULL: GET /api/burst, its series in /metrics */
} cd_gateway_opts;

/* Spawns the gateway on sys (native: it joins the runtime's libuv loop) and
 * starts listening. Returns NULL, with the code and why in *e (CD_EINVAL,
 * CD_ECONFIG, CD_ETLS, CD_EIO), when it cannot (the port is taken, the
 * address is invalid, a node origin is not an http or https origin, the
 * token file or the TLS pair is not usable). */

/* Whether text is an origin a page can have, http or https with no path:
 * 0 with its form for comparing (SCHEME://HOST:PORT, lower case, the port
 * written out) in out, or CD_ECONFIG with why in e. */
int cd_origin_canon(const char *text, char *out, size_t cap, sf_error *e);
rt_actor *cd_gateway_spawn(rt_system *sys, const cd_gateway_opts *opts, sf_error *e);

/* Reads the TLS certificate and key again from the files given at start
 * (a renewal: SIGHUP in `simfarm serve`) and serves them to every new
 * handshake; open connections keep theirs. A pair that fails a check
 * (tlscert.h) is not taken: the one served stays. Returns 0 with what is
 * now served in e->msg (a report: e->code is 0), or CD_ETLS with why
 * nothing changed. Loop thread only. */
int cd_gateway_reload_tls(rt_actor *gateway, sf_error *e);

/* A coordinator about to stop: asks every node session to write its work,
 * and how many have not yet had the store's answer. Stop the runtime once
 * that is 0, or the work since each session's last save is lost. Loop
 * thread only. */
void cd_gateway_save_work(rt_actor *gateway);
unsigned cd_gateway_saves_pending(rt_actor *gateway);

/* Then ends the node connections with close code 1001 (going away) and
 * why, and how many are still open. Loop thread only. */
void cd_gateway_close_nodes(rt_actor *gateway, const char *why);
unsigned cd_gateway_node_connections(rt_actor *gateway);

/* The port the gateway listens on (useful with port 0). Loop thread only. */
int cd_gateway_port(rt_actor *gateway);

#endif
