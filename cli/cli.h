/*
 * cli.h — the subcommands main.c dispatches to. Each takes the arguments
 * after the subcommand's name (argv[0] is the name) and returns the exit
 * status.
 */
#ifndef SIMFARM_CLI_H
#define SIMFARM_CLI_H

#include "actors/coord/proxies.h"
#include "base/exit.h"
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads a flag's value as a whole decimal number within [min, max]; false
 * (and *out untouched) for anything else. */
bool cli_number(const char *v, long min, long max, long *out);

/* Before reading the value of argv[i], a flag that takes one: 0 when it is
 * one of valued (a NULL-terminated list) and a value follows; otherwise -1
 * with what is wrong in why (an unknown option, an unexpected argument, a
 * missing value). */
int cli_value_flag(int argc, char **argv, int i, const char *const *valued, char *why, size_t len);

/* --listen HOST:PORT ([V6]:PORT or V6:PORT for IPv6): the address to bind,
 * numeric (a host name is resolved, its IPv4 address first), into host,
 * and the port (0 to 65535). 0, or -1 with the reason in why. */
int cli_listen(const char *arg, char *host, size_t hlen, int *port, char *why, size_t len);

int cmd_sim(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_node(int argc, char **argv);

typedef struct coordinator_opts {
    const char *host;        /* interface to serve on */
    int port;                /* 0 = any free port */
    const char *db;          /* libpq connection string */
    unsigned pool;           /* database connections; 0 = 2 */
    const char *name;        /* the subcommand, for messages */
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
    bool hangup_stops;       /* SIGHUP stops it, as a terminal that closes sends it (up);
                                otherwise SIGHUP reads the TLS certificate again (serve) */
    /* Called once listening, before the loop runs: the place to spawn more
     * actors (the store is borrowed). May be NULL. */
    void (*started)(rt_system *sys, rt_actor *store, const char *host, int port, void *ctx);
    void *ctx;
} coordinator_opts;

/* Runs the coordinator (store, gateway, scheduler) until SIGINT or SIGTERM
 * (or SIGHUP with hangup_stops).
 * Returns 0 after a clean stop, -1 when it could not start. */
int coordinator_run(const coordinator_opts *opts);

/* The client subcommands (cli/jobs.c, nodes.c, tokens.c; docs/cli.md). */
int cmd_submit(int argc, char **argv);
int cmd_jobs(int argc, char **argv);
int cmd_job(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
int cmd_token(int argc, char **argv);

#endif
