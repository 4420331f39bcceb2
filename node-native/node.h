/*
 * node.h — the native node: the node actor (actors/node/node.h) on a
 * libwebsockets client, with a pool of worker actors (one per allowed core,
 * CPU backend) computing its chunks.
 *
 * States: connecting (with exponential backoff, 1 s .. 60 s, ±25 % jitter,
 * after a lost connection: claims survive a reconnect until their lease
 * ends, and results computed meanwhile are sent once back), hello sent,
 * running. SIGINT or SIGTERM drains: no new work, the chunks in hand are
 * finished and acknowledged, then `bye` and exit; a second signal exits at
 * once. A coordinator that does not know the key ends the node with
 * SF_EXIT_NOT_ENROLLED.
 */
#ifndef SIMFARM_NODE_NODE_H
#define SIMFARM_NODE_NODE_H

#include "actors/node/node.h"
#include "base/log.h"

#include <stdbool.h>

/* How the compute threads share the machine with its other work (the
 * loop thread, which talks to the coordinator, keeps the process's). */
typedef enum nd_priority {
    ND_PRIORITY_LOW,    /* nice 19 */
    ND_PRIORITY_IDLE,   /* SCHED_IDLE: only what nothing else wants */
    ND_PRIORITY_NORMAL  /* the process's own */
} nd_priority;

typedef struct nd_opts {
    const char *url;          /* ws://host:port/ws/node, wss:// over TLS */
    const char *url_from;     /* where url came from, for messages: "--server" (NULL) or "$SIMFARM_SERVER" */
    const char *ca_path;      /* PEM CA certificates for wss://; NULL = the system's */
    const char *ca_from;      /* where ca_path came from: "--ca" (NULL) or "$SIMFARM_CA" */
    const char *key_path;     /* NULL = nd_key_default_path() */
    unsigned cores;           /* workers; 0 = every core */
    const char *claim_token;  /* enrol with this token; may be NULL */
    const char *backend;      /* auto (NULL), cpu, opencl, cuda, or a list "cpu,opencl" */
    unsigned grace_s;         /* a drain leaves after this long; 0 = no limit */
    nd_priority priority;     /* of the compute threads */
    sf_log_format log_format; /* text (the default) or one JSON object a line */
} nd_opts;

/* Runs the node until it stops; returns an ND_EXIT_* status. */
int nd_run(const nd_opts *opts);

#endif
