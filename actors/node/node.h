/*
 * node.h — the node actor: one farm node's side of the protocol, the same
 * source in the native node (node-native/) and the browser node
 * (node-wasm/).
 *
 * It proves its key to the coordinator (or enrols it with a claim token),
 * queues the chunks it is assigned, fetches each job's work context once and
 * keeps it while chunks of the job are in hand, hands chunks to the host's
 * workers, signs their results and resends the ones a lost connection may
 * have swallowed. The host owns everything machine-specific: the WebSocket,
 * the workers that run kernels, the facts heartbeats report, and how the
 * node's state and log lines reach a person. The actor must run on the
 * thread that calls the host's functions (a pinned actor natively; the only
 * thread in WebAssembly).
 *
 * States: Setup -> Verifying (a known key) or Registering (a claim token)
 * -> Running; Unavailable while the coordinator cannot be reached (retries
 * with exponential backoff, 1 s .. 60 s, ±25 % jitter; claims survive a
 * reconnect until their leases end, and results computed meanwhile are sent
 * once the connection is back); NotFound when the coordinator does not know
 * the key and no usable token was given (the node stops); Paused while the
 * host holds it back (nd_pause); Stopped after a drain.
 */
#ifndef SIMFARM_ACTORS_NODE_H
#define SIMFARM_ACTORS_NODE_H

#include "base/exit.h"
#include "base/version.h"
#include "proto/msg.h"
#include "proto/sign.h"
#include "runtime/runtime.h"
#include "sim/ctx.h"
#include "sim/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ND_MAX_WORKERS 256u  /* chunks a node computes at once, at most */

typedef enum nd_state {
    ND_SETUP,
    ND_VERIFYING,
    ND_REGISTERING,
    ND_RUNNING,
    ND_UNAVAILABLE,
    ND_NOT_FOUND,
    ND_STOPPED,
    ND_PAUSED,
} nd_state;

/* The state in plain words ("running", "coordinator unavailable", ...). */
const char *nd_state_name(nd_state st);

/* One chunk in hand. */
typedef struct nd_chunk {
    uint64_t job, id, start, count;
    uint32_t variant;         /* which of the work context's variants (tournament) */
    uint32_t backend;         /* the entry of hello's backends it is sized for; once
                                 computed, the one that computed it */
    uint8_t token[16];
    uint8_t hash[32];         /* the job's work context */
} nd_chunk;

typedef enum nd_level { ND_INFO, ND_WARN } nd_level;

typedef struct nd_host {
    void *ctx;
    /* Opens the connection; the host answers with nd_up() or nd_down(). */
    void (*connect)(void *ctx);
    /* Queues one binary frame on the open connection. */
    void (*send)(void *ctx, const uint8_t *frame, size_t len);
    /* Starts worker `w` (idle) on a chunk; the host answers nd_done(w, ...),
     * typically through nd_compute. `job` is the opened work context,
     * `work`/`len` its bytes (all valid until that answer). */
    void (*compute)(void *ctx, unsigned w, const nd_chunk *c, const sim_work *job, const uint8_t *work, size_t len);
    /* The chunk worker `w` computes is not wanted any more (cancelled, or
     * the node leaves): the host stops it soon, typically by having
     * nd_compute's halt function say so, and still answers nd_done. May
     * be NULL: the chunk then runs to its end and its result is dropped. */
    void (*cancel)(void *ctx, unsigned w);
    /* Which entry of hello's backends worker `w` computes with. May be
     * NULL: every worker is backends[0]. A chunk goes to an idle worker of
     * the backend the coordinator sized it for, or to any idle one. */
    unsigned (*worker_backend)(void *ctx, unsigned w);
    /* Fills the capabilities sent in hello (strings live as long as the host). */
    void (*caps)(void *ctx, pr_caps *caps);
    /* Fills a heartbeat's machine figures (CPU, memory). */
    void (*stats)(void *ctx, pr_heartbeat *hb);
    /* The items the workers have computed so far of the chunks in hand
     * (nd_compute tells its halt function), for the items/s the node
     * reports while chunks take long. May be NULL: chunks then count as
     * they end. */
    uint64_t (*items_in_hand)(void *ctx);
    /* The coordinator's answer to chunk c's result (accepted, or why not).
     * May be NULL. */
    void (*settled)(void *ctx, const nd_chunk *c, pr_outcome_kind kind);
    /* The coordinator welcomed the node as node `id`. May be NULL. */
    void (*welcome)(void *ctx, uint64_t id);
    /* A new state, with a detail line (may be empty). May be NULL. */
    void (*state)(void *ctx, nd_state st, const char *detail);
    /* One human-readable log line, without a trailing newline. */
    void (*log)(void *ctx, nd_level level, const char *line);
    /* The node has stopped with an ND_EXIT_* code; nothing more comes. */
    void (*stopped)(void *ctx, int code);
} nd_host;

typedef struct nd_config {
    pr_key key;               /* copied; the caller wipes its own */
    const char *audience;     /* the coordinator's host:port, lower case, as signed */
    const char *claim_token;  /* enrol with this token; may be NULL */
    const char *version;      /* the software version reported in hello */
    const char *checksum;     /* hex SHA-256 of the node's program; may be NULL */
    const char *name;         /* the node's name in hello (pr_node_name_check); may be NULL */
    unsigned workers;         /* how many chunks the host computes at once (1 .. ND_MAX_WORKERS) */
    unsigned batch;           /* results sealed together at most (1 .. 32); 0 = 32. Results wait
                                 up to 50 ms for others, and not when nothing else is computing */
} nd_config;

/* Spawns the node actor (pinned) and starts connecting. The caller holds
 * the returned reference and releases it after the system has stopped. */
rt_actor *nd_spawn(rt_system *sys, const nd_config *cfg, const nd_host *host);

/* What the host tells the node; each may be called from any thread. */
void nd_up(rt_actor *node);                            /* the connection is open */
void nd_down(rt_actor *node, const char *why);         /* it failed or closed */
void nd_frame(rt_actor *node, uint8_t *bytes, size_t len); /* a whole frame; takes the malloc'd bytes */
/* Worker `w` finished: err 0 and the encoded result (malloc'd, taken), or a
 * SIM_E* code. */
void nd_done(rt_actor *node, unsigned w, int err, uint8_t *data, size_t len, uint32_t elapsed_ms);
/* Stop taking work, finish the chunks in hand, say bye, stop. A second call
 * stops at once. */
void nd_drain(rt_actor *node);

/* Leaves at once, with the chunks in hand unfinished (a drain's time is up). */
void nd_leave(rt_actor *node);

/* Pauses (on) or resumes the node without leaving: paused, it tells the
 * coordinator it takes no new work (`bye draining`), finishes and sends the
 * chunks in hand and keeps its session (heartbeats go on); resumed, it
 * starts a new session once nothing is in hand, because a session that said
 * `bye draining` gets no more work; the new session starts 1 s after the
 * old one ends. */
void nd_pause(rt_actor *node, bool on);

/* The host computes `workers` chunks at once from now on (1 ..
 * ND_MAX_WORKERS; other values are ignored), without leaving the session:
 * more, and the new workers (numbered from the old count up) get queued
 * chunks at once; fewer, and the workers numbered `workers` and up finish
 * the chunk they hold and are given no other, so the host may end each
 * once it has answered nd_done. The coordinator is told at once (a
 * heartbeat's max_parallel) and hands out no more than that. */
void nd_set_workers(rt_actor *node, unsigned workers);

/* Lends worker `which` (off false) or not (off true) from now on, without
 * leaving the session: off, it finishes the chunk it holds and is given no
 * other; on again, it takes queued chunks at once. The coordinator is told
 * at once (a heartbeat's max_parallel: the workers on, 1 at least). How a
 * desktop switches its GPU off while the CPU cores go on, or the reverse. */
void nd_worker_off(rt_actor *node, unsigned which, bool off);

/* Runs one variant of a chunk on a backend: sim_run_cpu's contract. */
typedef int (*nd_runner)(void *ctx, const sim_job *sim, uint64_t first, uint64_t count, sim_stats *out);

/* Asked before each slice of a chunk, with the chunk's items done so far
 * (0 before the first): true stops the chunk. Called on the computing
 * thread. */
typedef bool (*nd_stop)(void *ctx, uint64_t done);

/* Computes a chunk with `run` and encodes its result the way nd_done wants
 * it: the chunk's variant, or every variant in order when the job says so
 * (stat_weights). *data is malloc'd.
 *
 * The chunk is run in slices of consecutive items, sized to take about
 * 100 ms each (the first is small, then they double or halve), and their
 * statistics merged: the same bytes as one run over the whole chunk, since
 * statistics of disjoint ranges merge into those of their union. Before
 * each slice `halt` (may be NULL) is asked; when it says so the chunk ends
 * with ND_ECANCELLED and no data. `ctx` goes to `run` and `halt`. */
int nd_compute(const sim_work *job, const nd_chunk *c, nd_runner run, nd_stop halt, void *ctx, uint8_t **data,
    size_t *len);

/* sim_run_cpu as an nd_runner (ctx unused). */
int nd_run_cpu(void *ctx, const sim_job *sim, uint64_t first, uint64_t count, sim_stats *out);

/* nd_compute on the CPU: the worker body of hosts without other backends. */
int nd_compute_cpu(const sim_work *job, const nd_chunk *c, uint8_t **data, size_t *len);

#endif
