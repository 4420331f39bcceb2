/*
 * up.c — `simfarm up`: a whole farm on this machine with one command. A
 * private PostgreSQL (created on first run, started and stopped with the
 * farm) unless $SIMFARM_DB names one, the coordinator, and the demo job.
 *
 *   simfarm up [--listen HOST:PORT] [--var DIR] [--no-demo] [--no-node] [--cores N]
 *
 * PostgreSQL refuses to run as root, so as root the cluster runs as the
 * `postgres` system user; its directory must then be reachable by that
 * user, which a checkout under /root is not: the cluster then lives under
 * /var/lib/simfarm/ instead, and `up` says so.
 */
#include "actors/jobs.h"
#include "actors/store.h"
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { UP_OK = 0, UP_FAIL = 1, UP_USAGE = 2, READY_TIMEOUT_S = 60 };

typedef struct pgembed {
    char dir[PATH_MAX];      /* the cluster's directory: data/ and the socket */
    char bin[PATH_MAX];
    pid_t pid;
    uid_t uid;               /* who runs it */
    gid_t gid;
    bool drop;               /* running as root: become uid/gid in children */
    char conninfo[PATH_MAX + 64];
} pgembed;

static void up_usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm up [--listen HOST:PORT] [--var DIR] [--no-demo] [--no-node] [--cores N]\n"
        "\n"
        "Starts a farm on this machine: PostgreSQL in DIR/pg (default var/pg; created on\n"
        "first run) unless $SIMFARM_DB names a database, the coordinator on HOST:PORT\n"
        "(default 127.0.0.1:8080), a local node on N cores (default all; its key in\n"
        "DIR/node.key) unless --no-node, and the demo job from examples/option.json\n"
        "unless --no-demo. Ctrl-C stops everything.\n");
}

/* ---- the embedded PostgreSQL ---------------------------------------------------- */

/* True when every directory above path lets others through, so the
 * `postgres` user can reach it. */
static bool reachable_by_others(const char *path)
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

static int mkdirs(const char *path, mode_t mode)
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
static pid_t run_as_owner(const pgembed *pg, char *const argv[], const char *log, bool wait)
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
            setsid(); /* a Ctrl-C in the terminal is ours to pass on, in order */
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

/* Copies the last 2 KiB of a log to stderr. */
static void log_tail(const char *log)
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

static int pg_start(pgembed *pg, const char *var, char *err, size_t errlen)
{
    const char *bin = getenv("SIMFARM_PG_BIN") ? getenv("SIMFARM_PG_BIN") : "/usr/lib/postgresql/15/bin";
    snprintf(pg->bin, sizeof pg->bin, "%s", bin);
    char initdb[PATH_MAX + 16], postgres[PATH_MAX + 16];
    snprintf(initdb, sizeof initdb, "%s/initdb", pg->bin);
    snprintf(postgres, sizeof postgres, "%s/postgres", pg->bin);
    if (access(initdb, X_OK) != 0 || access(postgres, X_OK) != 0) {
        snprintf(err, errlen, "PostgreSQL's server programs are not in %s: run scripts/install-deps.sh, "
            "or set SIMFARM_DB to a database", pg->bin);
        return -1;
    }

    char abs[PATH_MAX];
    if (mkdirs(var, 0755) != 0 || realpath(var, abs) == NULL || strlen(abs) > PATH_MAX - 16) {
        snprintf(err, errlen, "cannot create %s: %s", var, strerror(errno));
        return -1;
    }
    snprintf(pg->dir, sizeof pg->dir, "%.*s/pg", PATH_MAX - 16, abs);
    pg->uid = getuid();
    pg->gid = getgid();
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (pw == NULL) {
            snprintf(err, errlen, "running as root needs the postgres system user: run scripts/install-deps.sh");
            return -1;
        }
        pg->uid = pw->pw_uid;
        pg->gid = pw->pw_gid;
        pg->drop = true;
        if (!reachable_by_others(pg->dir)) {
            unsigned long h = 5381;
            for (const char *c = abs; *c; c++)
                h = h * 33 + (unsigned char)*c;
            snprintf(pg->dir, sizeof pg->dir, "/var/lib/simfarm/pg-%08lx", h & 0xffffffffUL);
            printf("simfarm up: %s is not reachable by the postgres user; the database lives in %s\n", abs, pg->dir);
        }
    }
    if (strlen(pg->dir) > 80) {
        snprintf(err, errlen, "%s is too long a path for PostgreSQL's socket: use --var with a shorter one", pg->dir);
        return -1;
    }
    if (mkdirs(pg->dir, 0700) != 0 || (pg->drop && chown(pg->dir, pg->uid, pg->gid) != 0)) {
        snprintf(err, errlen, "cannot prepare %s: %s", pg->dir, strerror(errno));
        return -1;
    }

    char data[PATH_MAX + 8], version[PATH_MAX + 24], log[PATH_MAX + 24];
    snprintf(data, sizeof data, "%s/data", pg->dir);
    snprintf(version, sizeof version, "%s/PG_VERSION", data);
    snprintf(log, sizeof log, "%s/postgres.log", pg->dir);
    if (access(version, F_OK) != 0) {
        printf("simfarm up: creating a PostgreSQL cluster in %s\n", data);
        fflush(stdout);
        char *argv[] = { initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", NULL };
        if (run_as_owner(pg, argv, log, true) != 0) {
            log_tail(log);
            snprintf(err, errlen, "initdb failed (log: %s)", log);
            return -1;
        }
    }
    char sock[PATH_MAX + 32];
    snprintf(sock, sizeof sock, "unix_socket_directories=%s", pg->dir);
    char *argv[] = { postgres, "-D", data, "-c", "listen_addresses=", "-c", sock, NULL };
    pg->pid = run_as_owner(pg, argv, log, false);
    if (pg->pid < 0) {
        snprintf(err, errlen, "cannot start postgres: %s", strerror(errno));
        return -1;
    }

    /* Ready when it accepts connections; it can also exit (say, another
     * farm already runs on this directory). */
    char ping[PATH_MAX + 64];
    snprintf(ping, sizeof ping, "host=%s dbname=postgres user=postgres connect_timeout=2", pg->dir);
    time_t deadline = time(NULL) + READY_TIMEOUT_S;
    struct timespec pause = { 0, 50000000 };
    for (;;) {
        if (PQping(ping) == PQPING_OK)
            break;
        int status;
        if (waitpid(pg->pid, &status, WNOHANG) == pg->pid) {
            pg->pid = 0;
            log_tail(log);
            snprintf(err, errlen, "postgres exited at start (log: %s)", log);
            return -1;
        }
        if (time(NULL) > deadline) {
            snprintf(err, errlen, "postgres did not accept connections within %d s (log: %s)", READY_TIMEOUT_S, log);
            return -1;
        }
        nanosleep(&pause, NULL);
    }
    PGconn *c = PQconnectdb(ping);
    PGresult *r = PQexec(c, "CREATE DATABASE simfarm");
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || (state && strcmp(state, "42P04") == 0);
    if (!ok)
        snprintf(err, errlen, "cannot create the simfarm database: %s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    if (!ok)
        return -1;
    snprintf(pg->conninfo, sizeof pg->conninfo, "host=%s dbname=simfarm user=postgres", pg->dir);
    return 0;
}

/* Fast shutdown, waited for; killed if it will not go. */
static void pg_stop(pgembed *pg)
{
    if (pg->pid <= 0)
        return;
    kill(pg->pid, SIGINT);
    time_t deadline = time(NULL) + 30;
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
    fprintf(stderr, "simfarm up: PostgreSQL stopped\n");
}

/* ---- the demo job ------------------------------------------------------------------ */

enum { M_GO = RT_MSG_USER + 0x1500 };

typedef struct demo {
    rt_actor *store;
    char *submission;
    char url[128];
    bool sent;
} demo;

static void demo_behaviour(rt_actor *self, rt_msg *m)
{
    demo *d = rt_state(self);
    char field[64], msg[256];
    if (m->type == CD_MSG_STORE_UP && !d->sent) {
        d->sent = true;
        cd_query *q = cd_job_submission(d->submission, strlen(d->submission), field, sizeof field, msg, sizeof msg);
        if (q == NULL) {
            fprintf(stderr, "simfarm up: the demo job is refused: %s: %s\n", field, msg);
            return;
        }
        rt_request(self, d->store, &q->hdr, 30000);
    } else if (m->type == CD_MSG_RESULT) {
        cd_result *r = (cd_result *)m;
        if (r->res != NULL)
            printf("simfarm up: demo job %s submitted: %s/api/jobs/%s\n", PQgetvalue(r->res, 0, 0), d->url,
                PQgetvalue(r->res, 0, 0));
        else
            fprintf(stderr, "simfarm up: the demo job was not stored: %s\n", r->error);
        fflush(stdout);
    } else if (m->type == RT_MSG_TIMEOUT) {
        fprintf(stderr, "simfarm up: the database did not take the demo job in time\n");
    }
}

static void demo_final(rt_actor *self)
{
    demo *d = rt_state(self);
    free(d->submission);
    rt_actor_release(d->store);
}

typedef struct up_ctx {
    char *submission;        /* NULL: no demo */
    bool node;               /* start a local node */
    unsigned cores;
    char key[PATH_MAX];      /* the local node's key file */
    pid_t node_pid;
} up_ctx;

/* Starts `simfarm node` (this binary) against the coordinator. It shares
 * our process group, so a Ctrl-C reaches it too and it drains. */
static void start_node(up_ctx *u, const char *host, int port)
{
    char server[300], cores[16];
    snprintf(server, sizeof server, "ws://%s:%d/ws/node", host, port);
    snprintf(cores, sizeof cores, "%u", u->cores);
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = { "simfarm", "node", "--server", server, "--key", u->key, "--cores", cores, NULL };
        if (u->cores == 0)
            argv[6] = NULL;
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    u->node_pid = pid;
}

static void stop_node(up_ctx *u)
{
    if (u->node_pid <= 0)
        return;
    kill(u->node_pid, SIGTERM); /* already draining after a Ctrl-C; a second signal would cut it short */
    time_t deadline = time(NULL) + 30;
    struct timespec pause = { 0, 50000000 };
    int status;
    while (waitpid(u->node_pid, &status, WNOHANG) == 0) {
        if (time(NULL) > deadline) {
            kill(u->node_pid, SIGKILL);
            waitpid(u->node_pid, &status, 0);
            break;
        }
        nanosleep(&pause, NULL);
    }
    u->node_pid = 0;
}

static void started(rt_system *sys, rt_actor *store, const char *host, int port, void *arg)
{
    up_ctx *u = arg;
    printf("simfarm up: the API is at http://%s:%d/api/jobs (health: /health, metrics: /metrics)\n", host, port);
    if (u->node)
        printf("simfarm up: starting a local node; more can join: simfarm node --server ws://%s:%d/ws/node\n",
            host, port);
    else
        printf("simfarm up: no local node (--no-node): jobs wait for `simfarm node --server ws://%s:%d/ws/node`\n",
            host, port);
    printf("simfarm up: Ctrl-C stops everything\n");
    fflush(stdout);
    if (u->node)
        start_node(u, host, port);
    if (u->submission == NULL)
        return;
    rt_actor_opts o = { .state_size = sizeof(demo), .finalize = demo_final, .name = "demo" };
    rt_actor *a = rt_spawn(sys, demo_behaviour, &o);
    demo *d = rt_state(a);
    d->store = rt_actor_retain(store);
    d->submission = u->submission;
    u->submission = NULL;
    snprintf(d->url, sizeof d->url, "http://%s:%d", host, port);
    cd_store_subscribe(store, a);
    rt_actor_release(a);
}

/* The demo submission: the European call in examples/option.json. */
static char *demo_submission(void)
{
    FILE *f = fopen("examples/option.json", "r");
    if (f == NULL)
        return NULL;
    char params[8192];
    size_t n = fread(params, 1, sizeof params - 1, f);
    fclose(f);
    params[n] = '\0';
    size_t cap = n + 128;
    char *s = malloc(cap);
    if (s == NULL)
        rt_oom(cap);
    /* About half a minute on two cores: long enough to watch it converge. */
    snprintf(s, cap, "{\"kernel\": \"option\", \"params\": %s, \"items\": 1000000000, \"owner\": \"demo\"}", params);
    return s;
}

int cmd_up(int argc, char **argv)
{
    char host[256] = "127.0.0.1";
    int port = 8080;
    const char *var = "var";
    bool demo_job = true, node = true;
    unsigned cores = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            up_usage(stdout);
            return UP_OK;
        }
        if (strcmp(a, "--no-demo") == 0) {
            demo_job = false;
            continue;
        }
        if (strcmp(a, "--no-node") == 0) {
            node = false;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "simfarm up: '%s' needs a value\n\n", a);
            up_usage(stderr);
            return UP_USAGE;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--listen") == 0) {
            const char *colon = strrchr(v, ':');
            char *end;
            long p = colon ? strtol(colon + 1, &end, 10) : -1;
            if (colon == NULL || colon == v || (size_t)(colon - v) >= sizeof host || colon[1] == '\0' ||
                *end != '\0' || p < 0 || p > 65535) {
                fprintf(stderr, "simfarm up: --listen wants HOST:PORT with a port from 0 to 65535, not '%s'\n", v);
                return UP_USAGE;
            }
            memcpy(host, v, (size_t)(colon - v));
            host[colon - v] = '\0';
            port = (int)p;
        } else if (strcmp(a, "--var") == 0) {
            var = v;
        } else if (strcmp(a, "--cores") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end != '\0' || n < 1 || n > 1024) {
                fprintf(stderr, "simfarm up: --cores wants a number from 1 to 1024, not '%s'\n", v);
                return UP_USAGE;
            }
            cores = (unsigned)n;
        } else {
            fprintf(stderr, "simfarm up: unknown option '%s'\n\n", a);
            up_usage(stderr);
            return UP_USAGE;
        }
    }

    pgembed pg;
    memset(&pg, 0, sizeof pg);
    const char *db = getenv("SIMFARM_DB");
    if (db == NULL || *db == '\0') {
        char err[PATH_MAX + 128];
        if (pg_start(&pg, var, err, sizeof err) != 0) {
            fprintf(stderr, "simfarm up: %s\n", err);
            pg_stop(&pg);
            return UP_FAIL;
        }
        printf("simfarm up: PostgreSQL running in %s\n", pg.dir);
        db = pg.conninfo;
    }
    up_ctx u = { .submission = demo_job ? demo_submission() : NULL, .node = node, .cores = cores };
    if (mkdirs(var, 0755) == 0) {
        char abs[PATH_MAX];
        if (realpath(var, abs) != NULL && strlen(abs) < PATH_MAX - 16)
            snprintf(u.key, sizeof u.key, "%.*s/node.key", PATH_MAX - 16, abs);
    }
    if (u.key[0] == '\0')
        u.node = false;
    if (demo_job && u.submission == NULL)
        printf("simfarm up: examples/option.json not found here: no demo job\n");
    /* The local farm's own nodes join without a claim token. */
    coordinator_opts co = { .host = host, .port = port, .db = db, .name = "up", .started = started, .ctx = &u,
        .open_enrolment = true };
    int rc = coordinator_run(&co);
    stop_node(&u);
    free(u.submission);
    pg_stop(&pg);
    return rc == 0 ? UP_OK : UP_FAIL;
}
