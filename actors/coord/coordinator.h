/*
 * coordinator.h — the coordinator's wiring: the store, the scheduler, the
 * gateway (and the burst actor, when asked for) on one runtime, with the
 * signals that stop it (SIGINT, SIGTERM:
 * once the node sessions' work is written, a second one at once) and the
 * one that reads a renewed TLS certificate (SIGHUP). `simfarm serve` and
 * `simfarm up` run it.
 */
#ifndef SIMFARM_ACTORS_COORD_COORDINATOR_H
#define SIMFARM_ACTORS_COORD_COORDINATOR_H

#include "actors/coord/burst.h"
#include "actors/coord/proxies.h"
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct cd_coordinator_opts {
    const char *host;        /* interface to serve on */
    int port;                /* 0 = any free port */
    const char *db;          /* libpq connection string */
    unsigned pool;           /* database connections; 0 = 2 */
    const char *name;        /* the command, the source of its log lines ("serve", "up") */
    bool open_enrolment;     /* unknown node keys join as public nodes */
    bool private_reads;      /* reads of the API, /metrics and /ws/events need a token */
    const char *token_file;  /* an admin API token kept here (created when absent); may be NULL */
    const char *web_dir;     /* static files served at /; NULL = none */
    const char *tls_cert;    /* https/wss with this PEM certificate and key; NULL = plain */
    const char *tls_key;
    unsigned heartbeat_ms;   /* nodes' heartbeat interval; 0 = 5000 */
    uint64_t chunk_ms;       /* target chunk duration; 0 = the scheduler's default */
    uint64_t db_backlog_bytes; /* the bound on queries held while the database is away
                                  or behind (actors/coord/store.h); 0 = the store's default */
    const cd_proxies *trusted_proxies; /* reverse proxies whose X-Forwarded-For is read; may be NULL */
    const char *const *node_origins; /* more origins whose pages may run a node (--node-origin) */
    size_t n_node_origins;
    uint8_t default_tiers;   /* SC_TIER_* bits of the nodes that may run a job whose
                                submission names none; 0 = own, team and community */
    unsigned max_connections;          /* the gateway's caps (gateway.h); 0 = from RLIMIT_NOFILE */
    unsigned max_connections_per_addr;
    const cd_burst_opts *burst; /* a burst actor with these options (its store is the
                                   coordinator's); NULL = none */
    bool hangup_stops;       /* SIGHUP stops it, as a terminal that closes sends it (up);
                                otherwise SIGHUP reads the TLS certificate again (serve) */
    /* Called once listening on port, before the loop runs: the place to say
     * where the farm is and to spawn more actors (the store is borrowed).
     * May be NULL. */
    void (*started)(rt_system *sys, rt_actor *store, const char *host, int port, void *ctx);
    void *ctx;
} cd_coordinator_opts;

/* Runs the coordinator until SIGINT or SIGTERM (or SIGHUP with
 * hangup_stops), logging what goes wrong through base/log.h with
 * opts->name as the source. Returns 0 after a clean stop; a negative code
 * when it could not start (the runtime's, CD_ECONFIG, or the gateway's:
 * the reason is logged) or when another coordinator held the database
 * (CD_EDB). */
int cd_coordinator_run(const cd_coordinator_opts *opts);

#endif /* SIMFARM_ACTORS_COORD_COORDINATOR_H */
