/*
 * up.c — `simfarm up`: a whole farm on this machine with one command. A
 * private PostgreSQL (created on first run, started and stopped with the
 * farm) unless $SIMFARM_DB names one, the coordinator, and the demo job.
 *
 *   simfarm up [--listen HOST:PORT] [--var DIR] [--no-demo] [--demo-items N] [--nodes N] [--no-node]
 *              [--cores C] [--allow-public-nodes]
 *
 * Its local nodes enrol with claim tokens it makes for them (tier own);
 * other nodes need one too, unless --allow-public-nodes opens enrolment
 * (what `make run` asks for, so that a browser tab at /contribute joins).
 *
 * Once the coordinator listens, `up` writes DIR/config (server and the
 * admin token from DIR/token) for the client commands, and the user's
 * ~/.config/simfarm/config too when there is none yet, or when the one
 * there is one an `up` of DIR wrote (it follows the farm to a new address).
 *
 * PostgreSQL refuses to run as root, so as root the cluster runs as the
 * `postgres` system user; its directory must then be reachable by that
 * user, which a checkout under /root is not: the cluster then lives under
 * /var/lib/simfarm/ instead, and `up` says so.
 */
#include "actors/coord/jobs.h"
#include "actors/coord/pgembed.h"
#include "actors/coord/store.h"
#include "base/str.h"
#include "cli/cli.h"
#include "cli/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <libpq-fe.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static void up_usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm up [--listen HOST:PORT] [--var DIR] [--no-demo] [--demo-items N] [--nodes N] [--no-node]\n"
        "                  [--cores C] [--allow-public-nodes]\n"
        "\n"
        "Starts a farm on this machine: PostgreSQL in DIR/pg (default var/pg; created on\n"
        "first run) unless $SIMFARM_DB names a database, the coordinator on HOST:PORT\n"
        "(default 127.0.0.1:8080) with its admin token in DIR/token, N local nodes\n"
        "(default 1; keys in DIR/node.key, DIR/node-2.key, ...) on C cores each (default\n"
        "this machine's cores shared among them) unless --no-node, and the demo job from\n"
        "examples/option.json unless --no-demo. Writes DIR/config for the client commands\n"
        "(simfarm jobs, submit, ...), and $XDG_CONFIG_HOME/simfarm/config (default\n"
        "~/.config/simfarm/config) when that does not exist, or updates it when an `up`\n"
        "of DIR wrote it (a user's own is left alone). Ctrl-C stops everything.\n"
        "The local nodes enrol with claim tokens made for them; any other node needs one\n"
        "(simfarm token create --kind claim), a browser tab too (/contribute#claim=TOKEN).\n"
        "  --demo-items N         the demo job's items, 1 to 2^50 (default 1000000000)\n"
        "  --allow-public-nodes   open enrolment: any node or browser tab that reaches\n"
        "                         the coordinator joins as a public node (make run)\n");
}

/* ---- the embedded PostgreSQL ---------------------------------------------------- */

/* Starts the farm's cluster in var/pg, or, as root when the postgres user
 * cannot reach var, in /var/lib/simfarm/pg-<hash of var>. */
static int pg_start(cd_pg *pg, const char *var, sf_error *e)
{
    char abs[PATH_MAX], dir[PATH_MAX], version[PATH_MAX + 32];
    if (cd_mkdirs(var, 0755) != 0 || realpath(var, abs) == NULL || strlen(abs) > PATH_MAX - 16) {
        return sf_fail(e, CD_EIO, "cannot create %s: %s", var, strerror(errno));
    }
    snprintf(dir, sizeof dir, "%.*s/pg", PATH_MAX - 16, abs);
    if (geteuid() == 0 && !cd_pg_reachable(dir)) {
        unsigned long h = 5381;
        for (const char *c = abs; *c; c++)
            h = h * 33 + (unsigned char)*c;
        snprintf(dir, sizeof dir, "/var/lib/simfarm/pg-%08lx", h & 0xffffffffUL);
        printf("simfarm up: %s is not reachable by the postgres user; the database lives in %s\n", abs, dir);
    }
    if (strlen(dir) > 80) {
        return sf_fail(e, CD_EDB, "%s is too long a path for PostgreSQL's socket: use --var with a shorter one", dir);
    }
    snprintf(version, sizeof version, "%s/data/PG_VERSION", dir);
    if (access(version, F_OK) != 0) {
        printf("simfarm up: creating a PostgreSQL cluster in %s/data\n", dir);
        fflush(stdout);
    }
    return cd_pg_start(pg, dir, NULL, e);
}

static void pg_stop(cd_pg *pg)
{
    if (pg->pid <= 0)
        return;
    cd_pg_stop(pg);
    fprintf(stderr, "simfarm up: PostgreSQL stopped\n");
}

/* ---- the demo job ------------------------------------------------------------------ */

enum { M_LOOK = RT_MSGS_UP, DEMO_LOOK_MS = 1000 };

/* The demo job: submitted once the database is up, then looked at every
 * DEMO_LOOK_MS until it ends, when `up` says what it found. */
typedef struct demo {
    rt_actor *store;
    char *submission;
    char url[360];
    bool sent;
    int64_t job;              /* 0 until stored */
    bool told;                /* its end was said */
    unsigned ended_looks;     /* looks that found it ended without a result */
} demo;

static void demo_look_later(rt_actor *self)
{
    rt_send_after(self, DEMO_LOOK_MS, rt_msg_new(M_LOOK, sizeof(rt_msg)));
}

/* The demo job's end: its state, time and page on the dashboard, then
 * each output, one a line, aligned: its estimate, and where it has one its
 * closed form and z, how many standard errors the estimate is from it.
 * res has a row per output (one with NULLs for none). */
static void demo_told(demo *d, const PGresult *res)
{
    const char *state = PQgetvalue(res, 0, 0);
    if (strcmp(state, "pending") == 0 || strcmp(state, "running") == 0)
        return;
    /* a cancel's row says so before the scheduler writes its result:
     * that is waited for a few looks */
    if (PQgetisnull(res, 0, 3) && ++d->ended_looks < 5)
        return;
    d->told = true;
    printf("simfarm up: demo job %" PRId64 " %s", d->job, state);
    if (!PQgetisnull(res, 0, 1))
        printf(" in %.1f s", strtod(PQgetvalue(res, 0, 1), NULL));
    printf("; see %s/#/jobs/%" PRId64 "\n", d->url, d->job);
    struct line {
        const char *name;
        char mean[64], se[64], ref[32];  /* se " ± 0.0042" or ""; ref "" where it has no closed form */
        double z;
    } lines[16];
    int rows = 0, wname = 0, wmean = 0, wse = 0, wref = 0;
    for (int i = 0; i < PQntuples(res) && rows < (int)(sizeof lines / sizeof lines[0]); i++) {
        if (PQgetisnull(res, i, 2) || PQgetisnull(res, i, 3))
            continue;
        struct line *l = &lines[rows++];
        double mean = strtod(PQgetvalue(res, i, 3), NULL);
        double se = PQgetisnull(res, i, 4) ? NAN : strtod(PQgetvalue(res, i, 4), NULL);
        char est[64];
        remote_estimate(est, sizeof est, mean, se);
        char *pm = strstr(est, " ± "); /* the means right-aligned, so their ± line up */
        snprintf(l->se, sizeof l->se, "%s", pm != NULL ? pm : "");
        if (pm != NULL)
            *pm = '\0';
        snprintf(l->mean, sizeof l->mean, "%s", est);
        l->name = PQgetvalue(res, i, 2);
        l->ref[0] = '\0';
        if (!PQgetisnull(res, i, 5)) {
            double ref = strtod(PQgetvalue(res, i, 5), NULL);
            snprintf(l->ref, sizeof l->ref, "%.8g", ref);
            l->z = se > 0 ? (mean - ref) / se : 0.0;
        }
        int n = (int)strlen(l->name);
        wname = n > wname ? n : wname;
        n = (int)strlen(l->mean);
        wmean = n > wmean ? n : wmean;
        n = (int)strlen(l->se) - (pm != NULL); /* "±": two bytes, one column */
        wse = n > wse ? n : wse;
        n = (int)strlen(l->ref);
        wref = n > wref ? n : wref;
    }
    for (int i = 0; i < rows; i++) {
        const struct line *l = &lines[i];
        printf("  %-*s  %*s", wname, l->name, wmean, l->mean);
        if (l->ref[0] == '\0')
            printf("%s\n", l->se);
        else
            printf("%-*s  closed form %-*s  z %+.2f\n", wse + (l->se[0] != '\0'), l->se, wref, l->ref, l->z);
    }
    fflush(stdout);
}

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
    } else if (m->type == M_LOOK && d->job > 0 && !d->told) {
        cd_query *q = cd_query_new(
            "SELECT j.state, extract(epoch FROM j.finished_at - j.started_at), o->>'name', o->>'mean', o->>'stderr', "
            "o->>'closed_form' FROM jobs j LEFT JOIN LATERAL jsonb_array_elements(CASE jsonb_typeof(j.result->'outputs') "
            "WHEN 'array' THEN j.result->'outputs' ELSE '[]' END) WITH ORDINALITY AS t(o, n) ON true "
            "WHERE j.id = $1 ORDER BY t.n");
        cd_query_int(q, d->job);
        rt_request(self, d->store, &q->hdr, 30000);
    } else if (m->type == CD_MSG_RESULT) {
        cd_result *r = (cd_result *)m;
        if (d->job > 0) { /* a look at it: said once it ended, else looked at again */
            if (r->res != NULL && PQntuples(r->res) >= 1)
                demo_told(d, r->res);
            if (!d->told)
                demo_look_later(self);
        } else if (r->res != NULL) {
            d->job = strtoll(PQgetvalue(r->res, 0, 0), NULL, 10);
            printf("simfarm up: demo job %" PRId64 " submitted: %s/#/jobs/%" PRId64 " (its page on the dashboard; "
                "simfarm watch %" PRId64 " follows it too); this terminal says when it ends\n", d->job, d->url, d->job,
                d->job);
            demo_look_later(self);
        } else {
            fprintf(stderr, "simfarm up: the demo job was not stored: %s\n", r->error);
        }
        fflush(stdout);
    } else if (m->type == RT_MSG_TIMEOUT) {
        if (d->job > 0)
            demo_look_later(self);
        else
            fprintf(stderr, "simfarm up: the database did not take the demo job in time\n");
    }
}

static void demo_final(rt_actor *self)
{
    demo *d = rt_state(self);
    free(d->submission);
    rt_actor_release(d->store);
}

enum { MAX_NODES = 64 };

typedef struct up_ctx {
    char *submission;        /* NULL: no demo */
    bool open;               /* --allow-public-nodes */
    unsigned nodes;          /* local nodes to start */
    unsigned cores;          /* cores of each; 0 = all */
    char var[PATH_MAX];      /* DIR, absolute */
    char token_file[PATH_MAX + 16];
    pid_t node_pids[MAX_NODES];
    const cd_coordinator_opts *co; /* the farm's coordinator, for its start lines */
} up_ctx;

/* The host clients should use for one we listen on: a wildcard address
 * is reached through the loopback; an IPv6 literal goes in brackets. */
static void url_host(char *buf, size_t cap, const char *host)
{
    if (strcmp(host, "0.0.0.0") == 0 || host[0] == '\0')
        snprintf(buf, cap, "127.0.0.1");
    else if (strcmp(host, "::") == 0)
        snprintf(buf, cap, "[::1]");
    else if (strchr(host, ':') != NULL)
        snprintf(buf, cap, "[%s]", host);
    else
        snprintf(buf, cap, "%s", host);
}

extern char **environ;

/* Starts `simfarm node` (this binary) number i against the coordinator,
 * with claim (NULL for none) in its $NODE_CLAIM_TOKEN rather than on its
 * command line, where ps shows it. It shares our process group, so a
 * Ctrl-C reaches it too and it drains. */
static void start_node(up_ctx *u, unsigned i, const char *server, const char *claim)
{
    char key[PATH_MAX + 32], cores[16], token[128];
    if (i == 0)
        snprintf(key, sizeof key, "%s/node.key", u->var);
    else
        snprintf(key, sizeof key, "%s/node-%u.key", u->var, i + 1);
    snprintf(cores, sizeof cores, "%u", u->cores);
    snprintf(token, sizeof token, "NODE_CLAIM_TOKEN=%s", claim != NULL ? claim : "");
    /* the child's environment is made here: between fork and exec only
     * async-signal-safe calls, and this process has threads */
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = sf_calloc(n + 2, sizeof *env);
    size_t k = 0;
    for (size_t j = 0; j < n; j++)
        if (strncmp(environ[j], "NODE_CLAIM_TOKEN=", 17) != 0)
            env[k++] = environ[j];
    if (claim != NULL)
        env[k++] = token;
    env[k] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = { "simfarm", "node", "--server", (char *)server, "--key", key, "--cores", cores, NULL };
        if (u->cores == 0)
            argv[6] = NULL;
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    free(env);
    sodium_memzero(token, sizeof token);
    u->node_pids[i] = pid > 0 ? pid : 0;
}

/* ---- the local nodes' claim tokens ---------------------------------------------- */

/* Without open enrolment the local nodes enrol as any other node does,
 * with a claim token: one each, made in the database once it is up
 * (migrated), owner admin, tier own, good for an hour; the nodes start
 * once the tokens are stored. A key enrolled before is enrolled again
 * under the token's owner and tier. */
typedef struct locals {
    up_ctx *u;
    rt_actor *store;
    char ws[360];
    char tokens[MAX_NODES][64];
    bool asked, started;
} locals;

static void locals_behaviour(rt_actor *self, rt_msg *m)
{
    locals *l = rt_state(self);
    if (m->type == CD_MSG_STORE_UP && !l->asked && !l->started) {
        /* the SHA-256 of each, in hex, as a text array: {h1,h2,...} */
        sf_str hashes = SF_STR_INIT;
        sf_str_cat(&hashes, "{");
        for (unsigned i = 0; i < l->u->nodes; i++) {
            unsigned char raw[32], hash[32];
            char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)], hex[65];
            randombytes_buf(raw, sizeof raw);
            sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
            snprintf(l->tokens[i], sizeof l->tokens[i], "sfc_%s", b64);
            crypto_hash_sha256(hash, (const unsigned char *)l->tokens[i], strlen(l->tokens[i]));
            sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
            sf_str_catf(&hashes, "%s%s", i ? "," : "", hex);
        }
        sf_str_cat(&hashes, "}");
        cd_query *q = cd_query_new(
            "INSERT INTO tokens (kind, owner, tier, secret_hash, note, expires_at) "
            "SELECT 'claim', 'admin', 'own', decode(h, 'hex'), 'simfarm up: local node ' || n, now() + interval '1 hour' "
            "FROM unnest($1::text[]) WITH ORDINALITY AS t (h, n)");
        cd_query_text(q, hashes.s);
        sf_str_free(&hashes);
        l->asked = rt_request(self, l->store, &q->hdr, 30000) >= 0;
    } else if (m->type == CD_MSG_RESULT || m->type == RT_MSG_TIMEOUT) {
        cd_result *r = m->type == CD_MSG_RESULT ? (cd_result *)m : NULL;
        l->asked = false;
        if (r == NULL || r->res == NULL) {
            /* asked again when the database is next up */
            fprintf(stderr, "simfarm up: the local nodes' claim tokens were not stored: %s\n",
                r != NULL ? r->error : "the database did not answer in time");
            return;
        }
        l->started = true;
        for (unsigned i = 0; i < l->u->nodes; i++) {
            start_node(l->u, i, l->ws, l->tokens[i]);
            sodium_memzero(l->tokens[i], sizeof l->tokens[i]);
        }
    }
}

static void locals_final(rt_actor *self)
{
    locals *l = rt_state(self);
    sodium_memzero(l->tokens, sizeof l->tokens);
    rt_actor_release(l->store);
}

/* Waits for the local nodes to finish their chunks and leave; kills those
 * that will not within 30 s. */
static void stop_nodes(up_ctx *u)
{
    for (unsigned i = 0; i < u->nodes; i++)
        if (u->node_pids[i] > 0)
            kill(u->node_pids[i], SIGTERM); /* already draining after a Ctrl-C; a second signal would cut it short */
    time_t deadline = time(NULL) + 30;
    struct timespec pause = { 0, 50000000 };
    for (unsigned i = 0; i < u->nodes; i++) {
        int status;
        if (u->node_pids[i] <= 0)
            continue;
        while (waitpid(u->node_pids[i], &status, WNOHANG) == 0) {
            if (time(NULL) > deadline) {
                kill(u->node_pids[i], SIGKILL);
                waitpid(u->node_pids[i], &status, 0);
                break;
            }
            nanosleep(&pause, NULL);
        }
        u->node_pids[i] = 0;
    }
}

/* Writes text to path (mode 0600) through a temporary file, so a reader
 * never sees half of it. Returns 0 or -1 with errno set. */
static int write_private(const char *path, const char *text)
{
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    bool ok = fchmod(fd, 0600) == 0 && write(fd, text, n) == (ssize_t)n;
    int saved = errno;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        saved = ok ? errno : saved;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

/* DIR/config for the client commands: this farm's address and the admin
 * token the coordinator keeps in DIR/token; and the user's config file
 * when there is none yet (an existing one is never overwritten). */
static void write_configs(up_ctx *u, const char *server)
{
    char token[128] = "";
    FILE *f = fopen(u->token_file, "r");
    if (f != NULL) {
        if (fgets(token, sizeof token, f) == NULL)
            token[0] = '\0';
        token[strcspn(token, "\r\n")] = '\0';
        fclose(f);
    }
    char text[PATH_MAX + 1024];
    snprintf(text, sizeof text,
        "# The farm of `simfarm up` in %s: read by simfarm submit, jobs, job, watch,\n"
        "# cancel, nodes and token (docs/cli.md). Written at every start.\n"
        "server = %s\n%s%s%s",
        u->var, server, token[0] ? "token = " : "# no token: the coordinator wrote none\n", token,
        token[0] ? "\n" : "");
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config", u->var);
    if (write_private(path, text) != 0) {
        fprintf(stderr, "simfarm up: cannot write %s: %s\n", path, strerror(errno));
        return;
    }

    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char dir[PATH_MAX], user[PATH_MAX + 16];
    if (xdg != NULL && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/simfarm", xdg);
    else if (home != NULL && home[0] != '\0')
        snprintf(dir, sizeof dir, "%s/.config/simfarm", home);
    else
        dir[0] = '\0';
    snprintf(user, sizeof user, "%s/config", dir);
    if (dir[0] != '\0' && access(user, F_OK) != 0 && errno == ENOENT) {
        if (cd_mkdirs(dir, 0700) == 0 && write_private(user, text) == 0) {
            printf("simfarm up: wrote %s: simfarm jobs, submit, watch ... use this farm\n", user);
            return;
        }
        fprintf(stderr, "simfarm up: cannot write %s: %s\n", user, strerror(errno));
    } else if (dir[0] != '\0') {
        /* The same farm as last time: nothing to change. */
        char old[PATH_MAX + 1024];
        FILE *o = fopen(user, "r");
        size_t n = o ? fread(old, 1, sizeof old - 1, o) : 0;
        if (o != NULL)
            fclose(o);
        old[n] = '\0';
        if (strcmp(old, text) == 0) {
            printf("simfarm up: %s points at this farm\n", user);
            return;
        }
        /* One an `up` of this DIR wrote (its first line says so) follows
         * the farm to its new address or token; any other is the user's. */
        char mine[PATH_MAX + 64];
        snprintf(mine, sizeof mine, "# The farm of `simfarm up` in %s:", u->var);
        if (strncmp(old, mine, strlen(mine)) == 0) {
            if (write_private(user, text) == 0) {
                printf("simfarm up: updated %s: simfarm jobs, submit, watch ... use this farm at %s\n", user, server);
                return;
            }
            fprintf(stderr, "simfarm up: cannot write %s: %s\n", user, strerror(errno));
        }
    }
    printf("simfarm up: for the client commands: export SIMFARM_CONFIG=%s\n", path);
}

static void started(rt_system *sys, rt_actor *store, const char *host, int port, void *arg)
{
    up_ctx *u = arg;
    cli_announce(u->co, port);
    char h[300], base[340], ws[360];
    url_host(h, sizeof h, host);
    snprintf(base, sizeof base, "http://%s:%d", h, port);
    snprintf(ws, sizeof ws, "ws://%s:%d/ws/node", h, port);
    printf("simfarm up: the dashboard is at %s/\n", base);
    printf("simfarm up: contribute a browser's cores at %s/contribute\n", base);
    printf("simfarm up: the API is at %s/api/jobs (health: /health, metrics: /metrics)\n", base);
    write_configs(u, base);
    if (u->nodes > 0)
        printf("simfarm up: starting %u local node%s; more can join: simfarm node --server %s --claim-token "
            "(simfarm token create --kind claim)\n", u->nodes, u->nodes > 1 ? "s" : "", ws);
    else
        printf("simfarm up: no local node (--no-node): jobs wait for `simfarm node --server %s`\n", ws);
    if (u->open)
        printf("simfarm up: OPEN ENROLMENT IS ON (--allow-public-nodes): any node or browser tab that reaches "
            "%s joins as a public node, with no claim token; without the flag every node needs one\n", ws);
    else
        printf("simfarm up: enrolment is closed: a node or browser tab joins with a claim token "
            "(%s/contribute#claim=TOKEN); --allow-public-nodes opens it\n", base);
    printf("simfarm up: Ctrl-C stops everything\n");
    fflush(stdout);
    if (u->open) {
        for (unsigned i = 0; i < u->nodes; i++)
            start_node(u, i, ws, NULL);
    } else if (u->nodes > 0) {
        rt_actor_opts lo = { .state_size = sizeof(locals), .finalize = locals_final, .name = "local nodes" };
        rt_actor *la = rt_spawn(sys, locals_behaviour, &lo);
        locals *l = rt_state(la);
        l->u = u;
        l->store = rt_actor_retain(store);
        snprintf(l->ws, sizeof l->ws, "%s", ws);
        cd_store_subscribe(store, la);
        rt_actor_release(la);
    }
    if (u->submission == NULL)
        return;
    rt_actor_opts o = { .state_size = sizeof(demo), .finalize = demo_final, .name = "demo" };
    rt_actor *a = rt_spawn(sys, demo_behaviour, &o);
    demo *d = rt_state(a);
    d->store = rt_actor_retain(store);
    d->submission = u->submission;
    u->submission = NULL;
    snprintf(d->url, sizeof d->url, "%s", base);
    cd_store_subscribe(store, a);
    rt_actor_release(a);
}

/* The demo submission: the European call in examples/option.json, of
 * `items` items. */
static char *demo_submission(long items)
{
    FILE *f = fopen("examples/option.json", "r");
    if (f == NULL)
        return NULL;
    char params[8192];
    size_t n = fread(params, 1, sizeof params - 1, f);
    fclose(f);
    params[n] = '\0';
    size_t cap = n + 192;
    char *s = malloc(cap);
    if (s == NULL)
        sf_oom(cap);
    /* Every tier, public included: a browser tab on the contribute page
     * can help with it. */
    snprintf(s, cap,
        "{\"kernel\": \"option\", \"name\": \"demo: the option of examples/option.json\", \"params\": %s, "
        "\"items\": %ld, \"owner\": \"demo\", \"tiers\": [\"own\", \"team\", \"community\", \"public\"]}",
        params, items);
    return s;
}

int cmd_up(int argc, char **argv)
{
    char host[256] = "127.0.0.1";
    int port = 8080;
    const char *var = "var";
    bool demo_job = true, open = false;
    unsigned cores = 0, nodes = 1;
    long demo_items = 1000000000; /* long enough to watch it converge */

    static const cli_flag flags[] = { { "--help", false }, { "--no-demo", false }, { "--no-node", false }, { "--allow-public-nodes", false },
        { "--listen", true }, { "--var", true }, { "--nodes", true }, { "--cores", true }, { "--demo-items", true },
        { NULL, false } };
    cli_args it = CLI_ARGS(argc, argv, flags, 0);
    const char *a, *v;
    sf_error e;
    int next;
    while ((next = cli_next(&it, &a, &v, &e)) > 0) {
        if (strcmp(a, "--help") == 0) {
            up_usage(stdout);
            return SF_EXIT_OK;
        } else if (strcmp(a, "--no-demo") == 0) {
            demo_job = false;
        } else if (strcmp(a, "--no-node") == 0) {
            nodes = 0;
        } else if (strcmp(a, "--allow-public-nodes") == 0) {
            open = true;
        } else if (strcmp(a, "--listen") == 0) {
            if (cli_listen(v, host, sizeof host, &port, &e) != 0) {
                fprintf(stderr, "simfarm up: %s\n", e.msg);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(a, "--var") == 0) {
            var = v;
        } else if (strcmp(a, "--nodes") == 0) {
            long n;
            if (!cli_number(v, 0, MAX_NODES, &n)) {
                fprintf(stderr, "simfarm up: --nodes wants a number from 0 to %d, not '%s'\n", MAX_NODES, v);
                return SF_EXIT_USAGE;
            }
            nodes = (unsigned)n;
        } else if (strcmp(a, "--demo-items") == 0) {
            if (!cli_number(v, 1, 1L << 50, &demo_items)) {
                fprintf(stderr, "simfarm up: --demo-items wants a number from 1 to 2^50, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(a, "--cores") == 0) {
            long n;
            if (!cli_number(v, 1, 256, &n)) {
                fprintf(stderr, "simfarm up: --cores wants a number from 1 to 256, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            cores = (unsigned)n;
        }
    }
    if (next != 0)
        return cli_refuse("up", &e, up_usage);

    cd_pg pg;
    memset(&pg, 0, sizeof pg);
    const char *db = getenv("SIMFARM_DB");
    if (db == NULL || *db == '\0') {
        if (pg_start(&pg, var, &e) != 0) {
            fprintf(stderr, "simfarm up: %s\n", e.msg);
            pg_stop(&pg);
            return SF_EXIT_FAIL;
        }
        printf("simfarm up: PostgreSQL running in %s\n", pg.dir);
        db = pg.conninfo;
    } else {
        char missing[512];
        if (cli_db_missing(db, missing, sizeof missing)) {
            fprintf(stderr, "simfarm up: %s ($SIMFARM_DB)\n", missing);
            return SF_EXIT_FAIL;
        }
    }
    up_ctx u = { .submission = demo_job ? demo_submission(demo_items) : NULL, .open = open, .nodes = nodes, .cores = cores };
    if (cd_mkdirs(var, 0755) != 0 || realpath(var, u.var) == NULL || strlen(u.var) > PATH_MAX - 32) {
        fprintf(stderr, "simfarm up: cannot use %s: %s\n", var, strerror(errno));
        free(u.submission);
        pg_stop(&pg);
        return SF_EXIT_FAIL;
    }
    snprintf(u.token_file, sizeof u.token_file, "%s/token", u.var);
    if (u.cores == 0 && u.nodes > 1) {
        /* Several nodes on one machine share its cores. */
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        u.cores = ncpu > (long)u.nodes ? (unsigned)(ncpu / (long)u.nodes) : 1;
    }
    if (demo_job && u.submission == NULL)
        printf("simfarm up: examples/option.json not found here: no demo job\n");
    char web_buf[PATH_MAX];
    cd_coordinator_opts co = { .host = host, .port = port, .db = db, .name = "up", .hangup_stops = true, .started = started,
        .ctx = &u, .open_enrolment = open, .token_file = u.token_file, .web_dir = cli_default_web(web_buf, sizeof web_buf) };
    u.co = &co;
    int rc = cd_coordinator_run(&co);
    stop_nodes(&u);
    free(u.submission);
    pg_stop(&pg);
    return rc == 0 ? SF_EXIT_OK : SF_EXIT_FAIL;
}
