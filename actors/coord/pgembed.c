/*
 * pgembed.c — see pgembed.h.
 */
#include "actors/coord/pgembed.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { READY_TIMEOUT_S = 60, STOP_TIMEOUT_S = 30, MAX_SETTINGS = 16 };

bool cd_pg_reachable(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *slash = strrchr(p, '/'); slash != NULL && slash != p; slash = strrchr(p, '/')) {
        *slash = '\0';
        struct stat st;
        if (stat(p, &st) != 0 || !(st.st_mode & S_IXOTH))
            return false;
    }
    return true;
}

int cd_mkdirs(const char *path, mode_t mode)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    }
    return mkdir(p, mode) != 0 && errno != EEXIST ? -1 : 0;
}

/* Runs argv (argv[0] a path) as the cluster's owner, output to log. With
 * wait, returns its exit status; otherwise its pid. */
static pid_t run_as_owner(const cd_pg *pg, char *const argv[], const char *log, bool wait)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (!wait)
            setsid();
        if (pg->drop && (setgroups(0, NULL) != 0 || setgid(pg->gid) != 0 || setuid(pg->uid) != 0))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (!wait)
        return pid;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void cd_log_tail(const char *log)
{
    FILE *f = fopen(log, "r");
    char buf[2048];
    if (f == NULL)
        return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        fseek(f, size > (long)sizeof buf ? size - (long)sizeof buf : 0, SEEK_SET);
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fwrite(buf, 1, n, stderr);
}

/* The pid in the first line of DATA/postmaster.pid, or 0. */
static long postmaster_pid(const char *data)
{
    char path[PATH_MAX + 24];
    snprintf(path, sizeof path, "%s/postmaster.pid", data);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid;
}

int cd_pg_start(cd_pg *pg, const char *dir, const char *const *settings, sf_error *e)
{
    memset(pg, 0, sizeof *pg);
    const char *bin = getenv("SIMFARM_PG_BIN") ? getenv("SIMFARM_PG_BIN") : "/usr/lib/postgresql/15/bin";
    char initdb[PATH_MAX + 16], postgres[PATH_MAX + 16];
    snprintf(initdb, sizeof initdb, "%s/initdb", bin);
    snprintf(postgres, sizeof postgres, "%s/postgres", bin);
    if (access(initdb, X_OK) != 0 || access(postgres, X_OK) != 0)
        return sf_fail(e, CD_EDB, "PostgreSQL's server programs are not in %s: run scripts/install-deps.sh, "
            "or set SIMFARM_DB to a database", bin);
    if (strlen(dir) > 80)
        return sf_fail(e, CD_EDB, "%s is too long a path for PostgreSQL's socket", dir);
    snprintf(pg->dir, sizeof pg->dir, "%s", dir);
    pg->uid = getuid();
    pg->gid = getgid();
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (pw == NULL)
            return sf_fail(e, CD_EDB, "running as root needs the postgres system user: run scripts/install-deps.sh");
        pg->uid = pw->pw_uid;
        pg->gid = pw->pw_gid;
        pg->drop = true;
    }
    if (cd_mkdirs(pg->dir, 0700) != 0 || (pg->drop && chown(pg->dir, pg->uid, pg->gid) != 0))
        return sf_fail(e, CD_EDB, "cannot prepare %s: %s", pg->dir, strerror(errno));

    char data[PATH_MAX + 8], version[PATH_MAX + 24], log[PATH_MAX + 24];
    snprintf(data, sizeof data, "%s/data", pg->dir);
    snprintf(version, sizeof version, "%s/PG_VERSION", data);
    snprintf(log, sizeof log, "%s/postgres.log", pg->dir);
    if (access(version, F_OK) != 0) {
        char *argv[] = { initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", NULL };
        if (run_as_owner(pg, argv, log, true) != 0) {
            cd_log_tail(log);
            return sf_fail(e, CD_EDB, "initdb failed (log: %s)", log);
        }
        pg->created = true;
    }
    char sock[PATH_MAX + 32];
    snprintf(sock, sizeof sock, "unix_socket_directories=%s", pg->dir);
    char *argv[8 + 2 * MAX_SETTINGS] = { postgres, "-D", data, "-c", "listen_addresses=", "-c", sock };
    int argc = 7;
    for (int i = 0; settings != NULL && settings[i] != NULL && i < MAX_SETTINGS; i++) {
        argv[argc++] = "-c";
        argv[argc++] = (char *)settings[i];
    }
    argv[argc] = NULL;
    pg->pid = run_as_owner(pg, argv, log, false);
    if (pg->pid < 0) {
        pg->pid = 0;
        return sf_fail(e, CD_EDB, "cannot start postgres: %s", strerror(errno));
    }

    /* Ready when it accepts connections; it can also exit (say, another
     * server already runs on this directory). */
    char ping[PATH_MAX + 64];
    snprintf(ping, sizeof ping, "host=%s dbname=postgres user=postgres connect_timeout=2", pg->dir);
    time_t deadline = time(NULL) + READY_TIMEOUT_S;
    struct timespec pause = { 0, 50000000 };
    while (PQping(ping) != PQPING_OK) { /* no event to wait on but the socket */
        int status;
        if (waitpid(pg->pid, &status, WNOHANG) == pg->pid) {
            pg->pid = 0;
            cd_log_tail(log);
            return sf_fail(e, CD_EDB, "postgres exited at start (log: %s)", log);
        }
        if (time(NULL) > deadline)
            return sf_fail(e, CD_EDB, "postgres did not accept connections within %d s (log: %s)", READY_TIMEOUT_S,
                log);
        nanosleep(&pause, NULL);
    }
    /* The server that answers must be ours: one left running on this
     * directory (by a run that was killed, say) answers as well, while ours
     * exits on its lock file. */
    long owner = postmaster_pid(data);
    if (owner != (long)pg->pid) {
        cd_pg_stop(pg);
        return sf_fail(e, CD_EDB,
            "another PostgreSQL (pid %ld) already runs on %s: stop it (kill %ld), or give another directory", owner,
            data, owner);
    }
    PGconn *c = PQconnectdb(ping);
    PGresult *r = PQexec(c, "CREATE DATABASE simfarm");
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || (state && strcmp(state, "42P04") == 0);
    int rc = ok ? 0 : sf_fail(e, CD_EDB, "cannot create the simfarm database: %s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    if (rc != 0)
        return rc;
    snprintf(pg->conninfo, sizeof pg->conninfo, "host=%s dbname=simfarm user=postgres", pg->dir);
    return 0;
}

void cd_pg_stop(cd_pg *pg)
{
    if (pg->pid <= 0)
        return;
    kill(pg->pid, SIGINT);
    time_t deadline = time(NULL) + STOP_TIMEOUT_S;
    struct timespec pause = { 0, 50000000 };
    int status;
    while (waitpid(pg->pid, &status, WNOHANG) == 0) {
        if (time(NULL) > deadline) {
            kill(pg->pid, SIGKILL);
            waitpid(pg->pid, &status, 0);
            break;
        }
        nanosleep(&pause, NULL);
    }
    pg->pid = 0;
}
