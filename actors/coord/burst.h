/*
 * burst.h — the burst actor: it sizes a fleet of burst nodes from the work
 * the farm has pending and the speed its nodes measure, and brings nodes up
 * and down through a provider: `local` (simfarm node processes on this
 * machine), `slurm` (node jobs through sbatch, squeue and scancel) or
 * `exec` (an operator's script: SCRIPT up N, SCRIPT down ID, SCRIPT list).
 *
 * Every interval it reads the pending items of the unfinished jobs and the
 * items/s each node had accepted over the last minute (one query to the
 * store), and sets
 *
 *     target = ceil(pending / (per-node items/s × target seconds))
 *
 * clamped to [min, max] (one node when work is pending and no speed is
 * known yet, to measure one). It provisions the nodes missing, and stops
 * nodes above the target only once they are older than the young limit,
 * always by draining them: SIGTERM (a node finishes its chunks, says bye
 * and leaves), forced only after the grace. Each decision is one log line
 * and counted in the metrics (cd_burst_metrics).
 *
 * Burst nodes enrol through the normal path: each with a claim token the
 * actor makes for it (owner admin, tier own, an hour to be used), and a
 * name burst-<provider>-<id>.
 */
#ifndef SIMFARM_ACTORS_COORD_BURST_H
#define SIMFARM_ACTORS_COORD_BURST_H

#include "base/err.h"
#include "base/str.h"
#include "runtime/runtime.h"

#include <stdbool.h>

typedef struct cd_burst_opts {
    const char *provider;      /* "local", "slurm" or "exec" */
    unsigned max;              /* the most burst nodes; 0 = 5 */
    unsigned min;              /* kept up even with nothing pending */
    double target_s;           /* pending work should take this long; 0 = 600 */
    double young_s;            /* a node younger than this is not stopped for being above target
                                  (`serve` gives 3300); 0 = none */
    double grace_s;            /* a draining node is forced after this; 0 = 120 */
    double interval_s;         /* a decision this often; 0 = 10 */
    unsigned cores;            /* --cores of each node (slurm: --cpus-per-task); 0 = 1 */
    const char *dir;           /* keys and logs of the nodes; NULL = a directory under $TMPDIR */
    const char *exe;           /* the simfarm binary the nodes run; NULL = this one */
    const char *server;        /* the address nodes join (ws://...); NULL = the coordinator's own */
    /* slurm */
    const char *partition, *account, *time_limit; /* NULL = the cluster's defaults */
    unsigned gpus;             /* --gres=gpu:N; 0 = none */
    /* exec */
    const char *script;        /* called as SCRIPT up N, SCRIPT down ID, SCRIPT list */
    rt_actor *store;           /* retained */
    rt_actor *scheduler;       /* retained; its items left are the pending work */
} cd_burst_opts;

/* Checks opts (the provider's name, an exec script that exists) without
 * starting anything: 0, or CD_ECONFIG with why in e. */
int cd_burst_check(const cd_burst_opts *opts, sf_error *e);

/* Spawns the burst actor on the loop thread (it spawns processes with
 * libuv). It decides nothing until cd_burst_start names the server its
 * nodes join. Returns NULL when the runtime is stopping; the handle holds a
 * reference for the caller. */
rt_actor *cd_burst_spawn(rt_system *sys, const cd_burst_opts *opts);

/* Starts the decisions, nodes joining `server` (a ws:// or wss:// URL;
 * copied) unless opts->server named one. Any thread. */
void cd_burst_start(rt_actor *burst, const char *server);

/* What `simfarm burst status` and GET /api/burst show, as of the last
 * decision: a JSON object {provider, current, target, min, max, pending_items,
 * node_items_per_s, last: {at, action, why}, nodes: [{id, name, state,
 * age_s}]}. Appended to out. Any thread. */
void cd_burst_status_json(rt_actor *burst, sf_str *out);

/* The burst series for /metrics, in Prometheus' text format, appended to
 * out: simfarm_burst_nodes{state}, simfarm_burst_target_nodes,
 * simfarm_burst_pending_items, simfarm_burst_node_items_per_second,
 * simfarm_burst_decisions_total{action}, simfarm_burst_nodes_started_total,
 * simfarm_burst_nodes_stopped_total{how}, simfarm_burst_provider_errors_total.
 * Any thread. */
void cd_burst_metrics(rt_actor *burst, sf_str *out);

#endif /* SIMFARM_ACTORS_COORD_BURST_H */
