/*
 * pgembed.h — a private PostgreSQL cluster for the local farm (`simfarm up`)
 * and the coordinator's benchmark: initdb on first use, postgres on a unix
 * socket in the cluster's directory (no TCP), a `simfarm` database, and a
 * fast shutdown that is waited for.
 *
 * PostgreSQL refuses to run as root, so as root the cluster belongs to the
 * `postgres` system user and its programs run as that user; the directory
 * must then be reachable by it (cd_pg_reachable tells).
 */
#ifndef SIMFARM_ACTORS_PGEMBED_H
#define SIMFARM_ACTORS_PGEMBED_H

#include "base/err.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct cd_pg {
    char dir[PATH_MAX];       /* the cluster: data/, postgres.log and the socket */
    pid_t pid;                /* the server; 0 when not running */
    uid_t uid;                /* who runs it */
    gid_t gid;
    bool drop;                /* we are root: children become uid/gid */
    bool created;             /* cd_pg_start ran initdb */
    char conninfo[PATH_MAX + 64]; /* the simfarm database */
} cd_pg;

/* Starts a cluster in dir (created; at most 80 bytes, for the socket's
 * path), initdb first when it has none, with the extra settings
 * ("name=value", NULL-terminated; may be NULL). Returns 0 once it accepts
 * connections and the simfarm database exists, or CD_EDB with the reason
 * in e (the log's tail goes to stderr). The server runs in its own
 * session: a Ctrl-C in the terminal is the caller's to pass on. $SIMFARM_PG_BIN overrides
 * /usr/lib/postgresql/15/bin. */
int cd_pg_start(cd_pg *pg, const char *dir, const char *const *settings, sf_error *e);

/* Fast shutdown (SIGINT), waited for up to 30 s, then SIGKILL. */
void cd_pg_stop(cd_pg *pg);

/* True when every directory above path lets others through, so the
 * postgres user can reach it. */
bool cd_pg_reachable(const char *path);

/* Copies the last 2 KiB of a log file to stderr (what went wrong). */
void cd_log_tail(const char *path);

/* mkdir -p, the last one with mode. Returns 0 or -1 (errno). */
int cd_mkdirs(const char *path, mode_t mode);

#endif
