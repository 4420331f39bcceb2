/*
 * cli.h — the subcommands main.c dispatches to. Each takes the arguments
 * after the subcommand's name (argv[0] is the name) and returns the exit
 * status.
 */
#ifndef SIMFARM_CLI_H
#define SIMFARM_CLI_H

#include "actors/coord/coordinator.h"
#include "actors/coord/proxies.h"
#include "base/exit.h"
#include "cli/flags.h"
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads a flag's value as a whole decimal number within [min, max]; false
 * (and *out untouched) for anything else. */
bool cli_number(const char *v, long min, long max, long *out);

/* --listen HOST:PORT ([V6]:PORT or V6:PORT for IPv6): the address to bind,
 * numeric (a host name is resolved, its IPv4 address first), into host,
 * and the port (0 to 65535). 0, or SF_EINVAL with the reason in e. */
int cli_listen(const char *arg, char *host, size_t hlen, int *port, sf_error *e);

/* Whether the database conninfo names does not exist (the server says
 * so), with a line saying how to create it in msg. Any other failure to
 * connect is false: the coordinator waits for a database that is away. */
bool cli_db_missing(const char *conninfo, char *msg, size_t cap);

int cmd_sim(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_node(int argc, char **argv);

/* The web files when --web names none: ./web (a source tree), else those
 * `make install` put beside the binary (PREFIX/share/simfarm/web, into buf
 * of cap bytes), else NULL. */
const char *cli_default_web(char *buf, size_t cap);

/* The lines a coordinator's command starts with, once listening on port:
 * where it listens, the web files it serves and where the admin token is. */
void cli_announce(const cd_coordinator_opts *o, int port);

/* The client subcommands (cli/jobs.c, nodes.c, tokens.c; docs/cli.md). */
int cmd_submit(int argc, char **argv);
int cmd_jobs(int argc, char **argv);
int cmd_job(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
/* `simfarm node revoke ID` (argv[0] is "revoke"). */
int cmd_node_revoke(int argc, char **argv);
int cmd_token(int argc, char **argv);
/* `simfarm burst status` (cli/burst.c). */
int cmd_burst(int argc, char **argv);

#endif
