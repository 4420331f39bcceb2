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
    const char *name;         /* the node's name (pr_node_name_check); NULL = the host name */
    const char *backend;      /* auto (NULL), cpu, opencl, cuda, or a list "cpu,opencl" */
    unsigned grace_s;         /* a drain leaves after this long; 0 = no limit */
    nd_priority priority;     /* of the compute threads */
    sf_log_format log_format; /* text (the default) or one JSON object a line */
} nd_opts;

/* Runs the node until it stops; returns an ND_EXIT_* status. */
int nd_run(const nd_opts *opts);

/* ---- the native node inside another program (the desktop app) ----------------------
 *
 * nd_run is nd_native_open, nd_native_run and nd_native_close. A program
 * with its own main loop (GTK's) runs nd_native_run on a thread of its own
 * and steers the node from its loop: nd_pause and nd_drain on
 * nd_native_node, nd_native_use, nd_native_set_priority; it reads what
 * the node does with nd_native_look. Every function but open and close may
 * be called from any thread. */

typedef struct nd_native nd_native;

/* One worker as the host sees it. */
typedef struct nd_worker_view {
    pr_backend_kind kind;
    char device[128];
    bool lent;                /* not switched off by nd_native_use */
    bool busy;                /* computing the chunk below */
    bool held;                /* busy, and held inside it (nd_native_hold): it stops at its next slice */
    uint64_t job, chunk, count;
    uint64_t done;            /* items of it computed so far */
    uint64_t started_ms;      /* when it started (monotonic clock) */
} nd_worker_view;

typedef struct nd_native_view {
    nd_state state;
    char detail[160];         /* the state's detail line ("" when none) */
    uint64_t node_id;         /* 0 until the coordinator welcomed the node */
    bool stopped;             /* nd_native_run has returned or is about to */
    int exit_code;            /* then: its ND_EXIT_* status */
    unsigned nworkers, ncpu;  /* workers 0 .. ncpu - 1 are CPU cores, the rest devices */
    nd_worker_view workers[ND_MAX_WORKERS];
    uint64_t accepted_chunks, accepted_items; /* results the coordinator accepted */
    uint64_t refused_chunks;  /* and did not (stale, conflict, malformed) */
    uint64_t items_computed;  /* chunks ended plus the items in hand */
    char last_warning[240];   /* the node's last warning line ("" when none) */
    char coordinator_said[240]; /* the coordinator's last error message to the node ("" when none) */
} nd_native_view;

/* Sets a node up as nd_run does (logging, key, devices, runtime, the
 * connection), without running it: *out is the node, or the status
 * (SF_EXIT_*) says why not, the reason logged. */
int nd_native_open(const nd_opts *opts, nd_native **out);

/* Runs the node on this thread until it stops; returns its ND_EXIT_* status. */
int nd_native_run(nd_native *h);

/* Frees a node nd_native_run has returned from (or that never ran). */
void nd_native_close(nd_native *h);

rt_actor *nd_native_node(nd_native *h);

/* A copy of what the node is doing now. */
void nd_native_look(nd_native *h, nd_native_view *v);

/* Lends the first `cpu` CPU workers (the others are off) and the device
 * workers (devices) or not; nd_worker_off for each worker that changes. */
void nd_native_use(nd_native *h, unsigned cpu, bool devices);

/* Holds the workers (on) where they are, inside their chunks, or lets them
 * go on (off): held, each stops within a slice of its chunk (about 100 ms)
 * and uses no CPU; its chunk stays in hand, listed in heartbeats so its
 * lease is renewed, and goes on from where it stopped when let go. With
 * nd_pause, how a desktop stops computing at once without losing work:
 * a hold that outlasts the coordinator's longest hold on a claim ends in a
 * stale result, and the range is computed elsewhere. nd_drain lets go. */
void nd_native_hold(nd_native *h, bool on);

/* The compute threads' priority from now on; 0, or an errno value when
 * a thread's could not be set (raising a priority back needs the right to,
 * RLIMIT_NICE for nice values). */
int nd_native_set_priority(nd_native *h, nd_priority p);

#endif
