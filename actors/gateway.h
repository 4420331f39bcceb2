/*
 * gateway.h — the coordinator's one port: libwebsockets on the runtime's
 * libuv loop, serving
 *
 *   GET  /health           {"status", "database", "version"}; 503 while the database is down
 *   GET  /metrics          Prometheus text
 *   POST /api/jobs         submit a job (JSON); 201 {"id": N} or 400 naming the field
 *   GET  /api/jobs         the newest 100 jobs
 *   GET  /api/jobs/{id}    one job; 404 when there is none
 *   GET  /ws/node          node sessions (WebSocket, protocol simfarm.node.v1; session.h)
 *
 * The gateway is a pinned actor: lws callbacks (loop thread) hand each
 * complete request to it as a message, it asks the store, and the answer is
 * written when lws says the connection is writable. Sessions live in a
 * table that only the loop thread touches; a connection that closes leaves
 * it at once, so a late answer finds nothing to write to.
 */
#ifndef SIMFARM_ACTORS_GATEWAY_H
#define SIMFARM_ACTORS_GATEWAY_H

#include "runtime/runtime.h"

typedef struct cd_gateway_opts {
    const char *host;        /* interface to bind, e.g. "127.0.0.1" */
    int port;                /* 0 = any free port (see cd_gateway_port) */
    rt_actor *store;         /* the store actor (retained) */
    rt_actor *scheduler;     /* the scheduler (retained): node sessions on /ws/node */
    bool open_enrolment;     /* unknown node keys join as public nodes */
    size_t max_body;         /* largest request body; default 1 MiB */
    uint64_t db_timeout_ms;  /* an answer from the store within this, else 503; default 5000 */
} cd_gateway_opts;

/* Spawns the gateway on sys (native: it joins the runtime's libuv loop) and
 * starts listening. Returns NULL and a message in err when it cannot (the
 * port is taken, the address is invalid). */
rt_actor *cd_gateway_spawn(rt_system *sys, const cd_gateway_opts *opts, char *err, size_t errlen);

/* The port the gateway listens on (useful with port 0). Loop thread only. */
int cd_gateway_port(rt_actor *gateway);

#endif
