/*
 * session.h — node sessions: the `/ws/node` WebSocket endpoint
 * (proto/PROTOCOL.md). One session actor per connection, pinned to the
 * loop thread: challenge, hello (signature, enrolment), welcome; then it
 * asks the scheduler for chunks as the node's slots free up and pushes them
 * as `assign`, serves work contexts, checks signed completions (skew,
 * signature, replay) and forwards each result to the scheduler, answering
 * with `complete_ack`; heartbeats renew leases; a closed connection gives
 * the node's claims back at once.
 */
#ifndef SIMFARM_ACTORS_SESSION_H
#define SIMFARM_ACTORS_SESSION_H

#include "actors/coord/proxies.h"
#include "runtime/runtime.h"

#include <libwebsockets.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proto/msg.h"

#define CD_NODE_PROTOCOL PR_WS_PROTOCOL

typedef struct cd_sessions cd_sessions;

/* Tells of node.online / node.offline events (fields: JSON object members
 * without braces, see events.h). Called on the loop thread. */
typedef void (*cd_publish_fn)(void *ctx, const char *type, uint64_t job, const char *fields);

typedef struct cd_sessions_opts {
    rt_actor *store;          /* retained */
    rt_actor *scheduler;      /* retained */
    bool open_enrolment;      /* unknown keys join as `public` nodes without a claim token */
    uint32_t heartbeat_ms;    /* default 5000; a node silent for 3 intervals is offline */
    cd_publish_fn publish;    /* may be NULL */
    void *publish_ctx;
    const cd_proxies *proxies; /* trusted reverse proxies (borrowed, outlives the sessions); may be NULL */
} cd_sessions_opts;

enum { CD_NODE_BACKENDS = 16 }; /* hello's backends a node may have (PROTOCOL.md) */

/* What the coordinator knows of a node online, kept up to date by its
 * session (the registry's live half; the nodes table is the other). */
typedef struct cd_node_view {
    uint64_t node;            /* 0 until welcomed */
    char owner[129], tier[12], version[64], os[32], arch[32], checksum[65];
    char name[65];            /* hello's name, else a browser node's browser ("" when none) */
    char from[64];            /* the client's address in text (not in the JSON: a node's address stays private) */
    uint8_t backend_kinds;    /* bit k: hello named a backend of kind k (PR_BACKEND_*), for /metrics */
    unsigned cores, max_parallel, slots, in_flight;
    uint64_t chunks_done, items_done;
    uint64_t malformed;       /* results answered malformed (PROTOCOL.md, complete_ack) */
    double items_per_s;
    double backend_items_per_s[CD_NODE_BACKENDS]; /* per entry of hello's backends, per chunk, when
                                                     chunks are sized per backend (0: not known yet) */
    unsigned nbackend_speeds;       /* 0: one speed for the node */
    uint64_t connected_ms, last_seen_ms; /* unix milliseconds */
    char work_key[33];        /* hex: the session's node_work row (sql/006_node_work.sql) */
} cd_node_view;

/* Calls fn for every welcomed node online. Loop thread only. */
void cd_sessions_each(const cd_sessions *ss, void (*fn)(void *ctx, const cd_node_view *v), void *ctx);

/* The view as JSON object members (no braces): "node":N,"owner":...,
 * "online":true,... Returns the length written (snprintf's). */
int cd_node_view_json(const cd_node_view *v, char *buf, size_t cap);

/* Tells every session holding chunks of job to cancel them on its node
 * (`cancel`) and free their slots. Loop thread only. */
void cd_sessions_cancel_job(cd_sessions *ss, uint64_t job, const char *reason);

/* The table of node connections of one gateway. Loop thread only. */
cd_sessions *cd_sessions_create(rt_system *sys, const cd_sessions_opts *opts);
void cd_sessions_destroy(cd_sessions *ss);

/* The lws protocol callback of CD_NODE_PROTOCOL; its lws_protocols entry
 * has `user` = the cd_sessions and per_session_data_size =
 * cd_session_pss_size(). */
int cd_session_lws_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len);
size_t cd_session_pss_size(void);

/* The key an address's penalties are kept under (docs/coordinator.md,
 * Penalties), PR_PK_BYTES long: an IPv4 address as its IPv4-mapped IPv6
 * form, the same whether it came on an IPv4 socket or a dual-stack IPv6
 * one; any other IPv6 address by its /64, one site's usual allocation.
 * All zero for other families. */
void cd_addr_key(const struct sockaddr *sa, uint8_t key[PR_PK_BYTES]);

/* The client of wsi's connection: its peer, or behind a trusted proxy the
 * address X-Forwarded-For names (proxies.h). AF_UNSPEC when there is none. */
void cd_wsi_client(struct lws *wsi, const cd_proxies *p, struct sockaddr_storage *out);

/* Node sessions open now. */
unsigned cd_sessions_count(const cd_sessions *ss);

/* Asks every node session to write its work to the store now (the
 * coordinator is about to stop), and how many welcomed ones have not yet
 * handed it to the store since. Loop thread only. */
void cd_sessions_save_all(cd_sessions *ss);
unsigned cd_sessions_saves_pending(const cd_sessions *ss);

/* Ends every node connection with close code 1001 (going away) and why
 * (the coordinator stops); each session ends as its connection closes,
 * which cd_sessions_count shows. Loop thread only. */
void cd_sessions_close_all(cd_sessions *ss, const char *why);

/* What the sessions have seen since the gateway started, for /metrics. */
enum {
    CD_RESULT_ACCEPTED,   /* counted into the job */
    CD_RESULT_IDEMPOTENT, /* the same result again (a resend) */
    CD_RESULT_CONFLICT,   /* different bytes for a chunk already accepted */
    CD_RESULT_STALE,      /* its claim had expired, been reclaimed or ended */
    CD_RESULT_INVALID,    /* the scheduler refused it for another reason than what it holds (a failed write) */
    CD_RESULT_UNANSWERED, /* the scheduler did not answer in time */
    CD_RESULT_MALFORMED,  /* it does not decode, does not cover its chunk, or is for another range or
                             work context than its claim's */
    CD_RESULT_KINDS
};
typedef struct cd_sessions_stats {
    uint64_t results[CD_RESULT_KINDS]; /* chunk results with a good signature, by what became of them */
    uint64_t items_accepted;           /* the items of the accepted ones */
    uint64_t cut_off;                  /* sessions closed for abuse (docs/reliability.md, Penalties) */
    uint64_t refused;                  /* connections refused while their address or key was penalised */
} cd_sessions_stats;

void cd_sessions_stats_get(const cd_sessions *ss, cd_sessions_stats *out);

#endif
