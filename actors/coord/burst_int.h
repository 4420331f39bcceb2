/*
 * burst_int.h — inside the burst actor (burst.h): its state, the node
 * table, and the provider interface its three providers implement
 * (burst_local.c, burst_slurm.c, burst_exec.c).
 *
 * The actor is pinned: its behaviour, its finalizer and libuv's callbacks
 * for the processes it spawns all run on the loop thread, so the list of
 * live processes (cd__burst.procs) needs no lock. Everything else in the
 * state is the behaviour's alone; callbacks only send it messages.
 */
#ifndef SIMFARM_ACTORS_COORD_BURST_INT_H
#define SIMFARM_ACTORS_COORD_BURST_INT_H

#include "actors/coord/burst.h"

#include <stdint.h>
#include <uv.h>

enum {
    CD__BURST_MAX_NODES = 256,    /* the most nodes the table holds (--burst-max is at most this) */
    CD__BURST_ID = 64,            /* a provider's node id, with its NUL */
    CD__BURST_TOKEN = 64,         /* a claim token, with its NUL */
    CD__BURST_BACKOFF_MAX_S = 300, /* the longest wait after ups that failed */
};

typedef enum cd__bn_state {
    CD__BN_STARTING,  /* asked for, not running yet (a Slurm job pending) */
    CD__BN_RUNNING,
    CD__BN_DRAINING,  /* sent SIGTERM: finishing its chunks */
} cd__bn_state;

typedef struct cd__bnode {
    char id[CD__BURST_ID];        /* the provider's: a number, a Slurm job id, the script's */
    char name[CD__BURST_ID + 16]; /* burst-<provider>-<id> */
    cd__bn_state state;
    uint64_t born_ms;             /* rt_mono_ms when it was asked for (or first listed) */
    uint64_t drain_ms;            /* when it was sent SIGTERM */
    bool forced;                  /* stopped for good after the grace */
} cd__bnode;

typedef struct cd__burst cd__burst;

/* What a command the actor ran is about. */
enum { CD__RAN_UP = 1, CD__RAN_DOWN, CD__RAN_LIST };

typedef struct cd__provider {
    const char *name;
    /* Brings up n nodes, the i-th enrolling with tokens[i]; each is added
     * with cd__burst_added, at once or when the provider answers. */
    void (*up)(cd__burst *b, unsigned n, char (*tokens)[CD__BURST_TOKEN]);
    /* Drains node (SIGTERM); with force, stops it now. */
    void (*down)(cd__burst *b, cd__bnode *node, bool force);
    /* Asks which nodes exist; the answer comes back through ran(), which
     * calls cd__burst_listed. NULL: the actor's table is the truth (local). */
    void (*list)(cd__burst *b);
    /* A command started with cd__burst_run has ended: status is its exit
     * status (-1: killed by a signal, or it could not start), out its
     * standard output, err its standard error. */
    void (*ran)(cd__burst *b, int kind, const char *tag, int status, const char *out, const char *err);
} cd__provider;

extern const cd__provider cd__burst_local, cd__burst_slurm, cd__burst_exec;

/* A process the actor spawned: a command (sbatch, squeue, a script) whose
 * output it reads, or a local node. Loop thread only. */
typedef struct cd__proc cd__proc;

struct cd__burst {
    cd_burst_opts o;              /* strings copied */
    const cd__provider *p;
    rt_actor *self;
    char server[512];
    char dir[4096];
    char exe[4096];
    bool started;
    cd__bnode nodes[CD__BURST_MAX_NODES];
    unsigned n;
    unsigned asked;               /* nodes provisioned whose ids have not come back yet */
    unsigned seq;                 /* local: the last node number */
    bool tokens_asked;            /* a query for tokens is in flight */
    bool deciding;                /* the decision query is in flight */
    int64_t decide_req;           /* its request id */
    char (*pending_tokens)[CD__BURST_TOKEN]; /* the tokens being stored, for the nodes to come */
    unsigned n_pending_tokens;
    uint64_t list_sent_ms;        /* when the list in flight was asked for; 0: none */
    unsigned up_failures;         /* ups in a row that brought no node */
    uint64_t up_retry_ms;         /* rt_mono_ms before which no up is asked; 0: any time */
    /* the last decision */
    uint64_t pending;
    double node_speed;
    unsigned target;
    unsigned logged_current;      /* the nodes there were at the last decision */
    char action[8];
    char why[256];
    int64_t decided_at;           /* unix seconds */
    /* counters, since the start */
    uint64_t decisions[3];        /* up, down, hold */
    uint64_t started_total, drained_total, forced_total, errors;
    cd__proc *procs;              /* live processes (loop thread) */
    uv_mutex_t lock;              /* guards the published texts below */
    char *status_json, *metrics;  /* as of the last change; any thread reads them under lock */
};

/* Runs argv (argv[0] a path or a name looked up in PATH) with the
 * environment plus extra ("NAME=value" strings, NULL-ended; may be NULL),
 * reading its output; provider->ran gets kind, tag, the status and the
 * output when it ends. Returns 0, or a negative libuv code (logged). */
int cd__burst_run(cd__burst *b, const char *const *argv, const char *const *extra, int kind, const char *tag);

/* Starts a long-lived process (a local node) named id, with its output
 * appended to log; its exit comes back to the actor, which drops the node
 * id. Returns 0, or CD_EIO (logged). */
int cd__burst_spawn_node(cd__burst *b, const char *const *argv, const char *const *extra, const char *log,
    const char *id);

/* Sends sig to the process of node id: 0, or a negative libuv code
 * (UV_ESRCH when it has exited). */
int cd__burst_kill(cd__burst *b, const char *id, int sig);

/* A node the provider brought up (state starting or running). Ignored
 * when the table is full or already has id. */
cd__bnode *cd__burst_added(cd__burst *b, const char *id, cd__bn_state state);

/* The provider's list: ids[i] in state states[i], age_s[i] seconds old
 * (-1: unknown). Nodes the table lacks are adopted; nodes asked for before
 * the list was sent that it lacks are gone. */
void cd__burst_listed(cd__burst *b, unsigned n, char (*ids)[CD__BURST_ID], const cd__bn_state *states,
    const double *age_s);

/* How an up ended: ok when it brought a node. A failure puts off the
 * next up: twice the decision interval after the first failure in a row,
 * doubling with each, at most CD__BURST_BACKOFF_MAX_S; the failures of
 * one up's other nodes (before that time) count once. */
void cd__burst_up_ended(cd__burst *b, bool ok);

/* A node left (its process ended, its job is gone). */
void cd__burst_gone(cd__burst *b, const char *id, const char *why);

/* The command line of a node: `simfarm node --server S --key K --cores C
 * --name NAME` into argv (12 slots), its strings in buf. */
void cd__burst_node_argv(const cd__burst *b, const char *name, const char *key, const char *argv[12], char *cores,
    size_t cap);

/* Counts a provider's failure and logs why. */
void cd__burst_error(cd__burst *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* SIMFARM_ACTORS_COORD_BURST_INT_H */
