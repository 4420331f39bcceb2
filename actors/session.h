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

#include "runtime/runtime.h"

#include <libwebsockets.h>
#include <stdbool.h>

#include "proto/msg.h"

#define CD_NODE_PROTOCOL PR_WS_PROTOCOL

typedef struct cd_sessions cd_sessions;

typedef struct cd_sessions_opts {
    rt_actor *store;          /* retained */
    rt_actor *scheduler;      /* retained */
    bool open_enrolment;      /* unknown keys join as `public` nodes without a claim token */
    uint32_t heartbeat_ms;    /* default 5000 */
} cd_sessions_opts;

/* The table of node connections of one gateway. Loop thread only. */
cd_sessions *cd_sessions_create(rt_system *sys, const cd_sessions_opts *opts);
void cd_sessions_destroy(cd_sessions *ss);

/* The lws protocol callback of CD_NODE_PROTOCOL; its lws_protocols entry
 * has `user` = the cd_sessions and per_session_data_size =
 * cd_session_pss_size(). */
int cd_session_lws_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len);
size_t cd_session_pss_size(void);

/* Node sessions open now. */
unsigned cd_sessions_count(const cd_sessions *ss);

#endif
