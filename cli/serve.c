/*
 * serve.c — `simfarm serve`: its flags, then the coordinator
 * (actors/coord/coordinator.h) until SIGINT or SIGTERM stops it cleanly,
 * once the node sessions' work is written (a second signal stops it at
 * once); SIGHUP reads a renewed TLS certificate. The scheduler loads
 * unfinished jobs from the database and resumes them from their journals.
 *
 *   simfarm serve --db "host=/tmp/pg dbname=simfarm" --listen 127.0.0.1:8080
 */
#include "actors/coord/coordinator.h"
#include "actors/coord/gateway.h"
#include "actors/coord/jobs.h"
#include "base/log.h"
#include "cli/cli.h"

#include <arpa/inet.h>
#include <limits.h>
#include <libpq-fe.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static void serve_usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm serve [--listen HOST:PORT] [--db CONNINFO] [options]\n"
        "\n"
        "Runs the coordinator: the HTTP API (/api, docs/api.md), node sessions\n"
        "(/ws/node), live events (/ws/events), the web directory, /health and\n"
        "/metrics on one port, with PostgreSQL as the system of record (migrated on\n"
        "start).\n"
        "  --listen HOST:PORT     address to serve on (default 127.0.0.1:8080; port 0 = any)\n"
        "  --db CONNINFO          libpq connection string or URI (default: $SIMFARM_DB)\n"
        "  --pool N               database connections, 1 to 8 (default 2)\n"
        "  --max-connections N    connections at once, HTTP and WebSocket (default: the\n"
        "                         descriptor limit less a reserve); past it an idle one\n"
        "                         makes room, or the new one is closed at once\n"
        "  --max-connections-per-addr N  connections from one address (default 256)\n"
        "  --db-backlog-mb N      the most the coordinator holds for the database while it\n"
        "                         is away or behind, in MiB of queries, 0.001 to 65536\n"
        "                         (default 256); past it, new queries are refused until half\n"
        "                         of it is written, and /health answers 503\n"
        "  --token-file PATH      an admin API token kept in PATH: created (mode 0600) when\n"
        "                         PATH does not exist, and made valid in this database\n"
        "  --allow-public-nodes   let unknown node keys join as public nodes (also\n"
        "                         --open-enrolment); otherwise a node needs a claim token\n"
        "  --default-tiers LIST   the node tiers that may run a job whose submission names\n"
        "                         none, comma-separated: own, team, community, public\n"
        "                         (default own,team,community: public nodes only run\n"
        "                         jobs that list public)\n"
        "  --node-origin URL      a page of origin URL (https://HOST[:PORT]) may run a\n"
        "                         browser node here (repeatable); besides it, only the\n"
        "                         coordinator's own pages and nodes that send no Origin\n"
        "  --private              reads need an API token too: the API, /metrics and\n"
        "                         /ws/events (with a ticket, POST /api/events/ticket);\n"
        "                         /health, the web files and /ws/node stay open\n"
        "  --web DIR              serve the files of DIR at / (default: ./web when it exists,\n"
        "                         else ../share/simfarm/web beside the binary: make install)\n"
        "  --tls-cert PEM --tls-key PEM   serve https and wss\n"
        "  --trusted-proxy NET    a reverse proxy in front of the coordinator: an IPv4 or\n"
        "                         IPv6 address, or ADDRESS/BITS (repeatable). For its\n"
        "                         connections the client is the address X-Forwarded-For\n"
        "                         names; other connections' X-Forwarded-For is ignored\n"
        "  --heartbeat-ms N       nodes' heartbeat interval, 100 to 60000 (default 5000);\n"
        "                         a node silent for 3 intervals is offline\n"
        "  --log-format text|json the log on standard error: lines for a person (default),\n"
        "                         or one JSON object a line: ts, level, src, msg\n"
        "  --chunk-ms N           how long a chunk should take on the node it goes to,\n"
        "                         100 to 600000 (default 10000): shorter loses less work\n"
        "                         when nodes come and go, longer costs less per item\n"
        "Burst nodes (docs/coordinator.md, \"Burst nodes\"):\n"
        "  --burst local|slurm|exec  size a fleet of burst nodes from the pending work:\n"
        "                         simfarm node processes here, Slurm batch jobs, or a script\n"
        "  --burst-max N          the most burst nodes, 1 to 256 (default 5)\n"
        "  --burst-min N          burst nodes kept up with nothing pending (default 0)\n"
        "  --burst-target-minutes M  pending work should be done within M minutes (default 10)\n"
        "  --burst-young-minutes M   nodes younger than M minutes are kept when above\n"
        "                         target (default 55; fractions for tests)\n"
        "  --burst-grace S        a node is stopped S seconds after it was told to drain,\n"
        "                         if it is still there (default 120)\n"
        "  --burst-interval S     a decision every S seconds (default 10)\n"
        "  --burst-cores N        --cores of each burst node (default 1)\n"
        "  --burst-dir DIR        the nodes' keys and logs (default: under $TMPDIR)\n"
        "  --burst-server URL     the address burst nodes join (default: this one's, ws://)\n"
        "  --slurm-partition P --slurm-account A --slurm-time T --slurm-cores N\n"
        "  --slurm-gpus N         the node jobs' sbatch options (cores: --cpus-per-task)\n"
        "  --burst-exec SCRIPT    for exec: SCRIPT up N, SCRIPT down ID, SCRIPT list\n"
        "Stops cleanly on SIGINT or SIGTERM. SIGHUP reads the --tls-cert and --tls-key\n"
        "files again (a renewed certificate) for the connections that follow; a pair\n"
        "that does not check out is refused and the one served is kept.\n");
}

int cli_listen(const char *arg, char *host, size_t hlen, int *port, sf_error *e)
{
    const char *colon = strrchr(arg, ':'), *h = arg;
    size_t n = colon ? (size_t)(colon - arg) : 0;
    char *end;
    long p = colon ? strtol(colon + 1, &end, 10) : -1;
    if (colon == NULL || colon[1] < '0' || colon[1] > '9' || *end != '\0' || p < 0 || p > 65535)
        return sf_fail(e, SF_EINVAL, "--listen wants HOST:PORT with a port from 0 to 65535, not '%s'", arg);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    char name[256];
    if (n == 0 || n >= sizeof name)
        return sf_fail(e, SF_EINVAL, "--listen wants HOST:PORT, with a host, not '%s'", arg);
    memcpy(name, h, n);
    name[n] = '\0';
    unsigned char bin[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, name, bin) == 1 || inet_pton(AF_INET6, name, bin) == 1) {
        snprintf(host, hlen, "%s", name);
    } else {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
        int rc = getaddrinfo(name, NULL, &hints, &res);
        if (rc != 0)
            return sf_fail(e, SF_EINVAL, "--listen %s: cannot resolve '%s': %s", arg, name, gai_strerror(rc));
        const struct addrinfo *pick = res;
        for (const struct addrinfo *r = res; r; r = r->ai_next)
            if (r->ai_family == AF_INET) {
                pick = r;
                break;
            }
        const void *addr = pick->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)pick->ai_addr)->sin_addr
                                                      : (const void *)&((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr;
        const char *ok = inet_ntop(pick->ai_family, addr, host, (socklen_t)hlen);
        freeaddrinfo(res);
        if (ok == NULL)
            return sf_fail(e, SF_EINVAL, "--listen %s: '%s' has no usable address", arg, name);
    }
    *port = (int)p;
    return 0;
}

bool cli_db_missing(const char *conninfo, char *msg, size_t cap)
{
    /* connect_timeout after the conninfo's own words: a host that does
     * not answer is the coordinator's to wait for, not this look's */
    const char *keys[] = { "dbname", "connect_timeout", NULL }, *values[] = { conninfo, "3", NULL };
    PGconn *c = PQconnectdbParams(keys, values, 1);
    bool missing = false;
    if (c != NULL && PQstatus(c) != CONNECTION_OK) {
        const char *err = PQerrorMessage(c), *at = strstr(err, "database \""), *end;
        if (at != NULL && (end = strstr(at + 10, "\" does not exist")) != NULL) {
            int n = (int)(end - (at + 10));
            snprintf(msg, cap, "the database \"%.*s\" does not exist: create it with `createdb %.*s` (as a "
                "PostgreSQL user that may), or name another one", n, at + 10, n, at + 10);
            missing = true;
        }
    }
    PQfinish(c);
    return missing;
}

static void announced(rt_system *sys, rt_actor *store, const char *host, int port, void *ctx)
{
    (void)sys;
    (void)store;
    (void)host;
    cli_announce(ctx, port);
}

enum { NODE_ORIGINS_MAX = 64 };

/* A number of minutes or seconds from lo to hi, given as `flag`. */
static bool amount(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end != '\0' || !(d >= lo && d <= hi)) {
        fprintf(stderr, "simfarm serve: %s wants a number from %g to %g, not '%s'\n", flag, lo, hi, v);
        return false;
    }
    *out = d;
    return true;
}

/* Reads one --burst* or --slurm-* flag into b: 1 when taken, 0 when a is
 * none of them, SF_EXIT_USAGE (said) for a bad value. */
static int burst_flag(cd_burst_opts *b, const char *a, const char *v)
{
    /* the flags whose value is kept as it is */
    static const struct {
        const char *flag;
        size_t at;
    } texts[] = {
        { "--burst", offsetof(cd_burst_opts, provider) }, { "--burst-dir", offsetof(cd_burst_opts, dir) },
        { "--burst-server", offsetof(cd_burst_opts, server) }, { "--burst-exec", offsetof(cd_burst_opts, script) },
        { "--slurm-partition", offsetof(cd_burst_opts, partition) },
        { "--slurm-account", offsetof(cd_burst_opts, account) },
        { "--slurm-time", offsetof(cd_burst_opts, time_limit) },
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (strcmp(a, texts[i].flag) == 0) {
            *(const char **)((char *)b + texts[i].at) = v;
            return 1;
        }
    double d;
    long n;
    if (strcmp(a, "--burst-max") == 0 || strcmp(a, "--burst-min") == 0 || strcmp(a, "--burst-cores") == 0 ||
        strcmp(a, "--slurm-cores") == 0 || strcmp(a, "--slurm-gpus") == 0) {
        bool min = strcmp(a, "--burst-min") == 0, gpus = strcmp(a, "--slurm-gpus") == 0;
        if (!cli_number(v, min || gpus ? 0 : 1, 256, &n)) {
            fprintf(stderr, "simfarm serve: %s wants a number from %d to 256, not '%s'\n", a, min || gpus ? 0 : 1, v);
            return SF_EXIT_USAGE;
        }
        if (strcmp(a, "--burst-max") == 0)
            b->max = (unsigned)n;
        else if (min)
            b->min = (unsigned)n;
        else if (gpus)
            b->gpus = (unsigned)n;
        else
            b->cores = (unsigned)n;
    } else if (strcmp(a, "--burst-target-minutes") == 0) {
        if (!amount(a, v, 0.01, 100000, &d))
            return SF_EXIT_USAGE;
        b->target_s = d * 60;
    } else if (strcmp(a, "--burst-young-minutes") == 0) {
        if (!amount(a, v, 0, 100000, &d))
            return SF_EXIT_USAGE;
        b->young_s = d * 60;
    } else if (strcmp(a, "--burst-grace") == 0) {
        if (!amount(a, v, 0.1, 86400, &d))
            return SF_EXIT_USAGE;
        b->grace_s = d;
    } else if (strcmp(a, "--burst-interval") == 0) {
        if (!amount(a, v, 0.1, 3600, &d))
            return SF_EXIT_USAGE;
        b->interval_s = d;
    } else {
        return 0;
    }
    return 1;
}

static int serve(int argc, char **argv, cd_proxies *proxies)
{
    cd_burst_opts burst = { .young_s = 55 * 60 };
    const char *origins[NODE_ORIGINS_MAX];
    size_t norigins = 0;
    char host[256] = "127.0.0.1";
    int port = 8080;
    const char *db = getenv("SIMFARM_DB");
    unsigned pool = 2;
    unsigned max_conns = 0, max_conns_addr = 0;
    uint64_t chunk_ms = 0;
    bool open = false, private_reads = false;
    const char *token_file = NULL, *web = NULL, *cert = NULL, *key = NULL;
    unsigned heartbeat_ms = 0;
    uint64_t backlog = 0;
    uint8_t default_tiers = 0;

    static const cli_flag flags[] = { { "--help", false }, { "--open-enrolment", false },
        { "--allow-public-nodes", false }, { "--private", false }, { "--listen", true }, { "--db", true },
        { "--token-file", true }, { "--web", true }, { "--tls-cert", true }, { "--tls-key", true },
        { "--trusted-proxy", true }, { "--heartbeat-ms", true }, { "--chunk-ms", true }, { "--db-backlog-mb", true },
        { "--pool", true }, { "--log-format", true }, { "--node-origin", true }, { "--default-tiers", true },
        { "--burst", true }, { "--burst-max", true }, { "--burst-min", true }, { "--burst-target-minutes", true },
        { "--burst-young-minutes", true }, { "--burst-grace", true }, { "--burst-interval", true },
        { "--burst-cores", true }, { "--burst-dir", true }, { "--burst-server", true }, { "--burst-exec", true },
        { "--slurm-partition", true }, { "--slurm-account", true }, { "--slurm-time", true },
        { "--slurm-cores", true }, { "--slurm-gpus", true }, { "--max-connections", true },
        { "--max-connections-per-addr", true }, { NULL, false } };
    cli_args it = CLI_ARGS(argc, argv, flags, 0);
    const char *a, *v;
    sf_error e;
    int next;
    while ((next = cli_next(&it, &a, &v, &e)) > 0) {
        int took = burst_flag(&burst, a, v);
        if (took == SF_EXIT_USAGE)
            return took;
        if (took == 1)
            continue;
        if (strcmp(a, "--help") == 0) {
            serve_usage(stdout);
            return SF_EXIT_OK;
        } else if (strcmp(a, "--open-enrolment") == 0 || strcmp(a, "--allow-public-nodes") == 0) {
            open = true;
        } else if (strcmp(a, "--private") == 0) {
            private_reads = true;
        } else if (strcmp(a, "--listen") == 0) {
            if (cli_listen(v, host, sizeof host, &port, &e) != 0) {
                fprintf(stderr, "simfarm serve: %s\n", e.msg);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(a, "--db") == 0) {
            db = v;
        } else if (strcmp(a, "--token-file") == 0) {
            token_file = v;
        } else if (strcmp(a, "--web") == 0) {
            web = v;
        } else if (strcmp(a, "--tls-cert") == 0) {
            cert = v;
        } else if (strcmp(a, "--tls-key") == 0) {
            key = v;
        } else if (strcmp(a, "--trusted-proxy") == 0) {
            if (cd_proxies_add(proxies, v, &e) != 0) {
                fprintf(stderr, "simfarm serve: --trusted-proxy: %s\n", e.msg);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(a, "--node-origin") == 0) {
            char canon[320];
            if (cd_origin_canon(v, canon, sizeof canon, &e) != 0) {
                fprintf(stderr, "simfarm serve: --node-origin: %s\n", e.msg);
                return SF_EXIT_USAGE;
            }
            if (norigins == NODE_ORIGINS_MAX) {
                fprintf(stderr, "simfarm serve: --node-origin: at most %d\n", NODE_ORIGINS_MAX);
                return SF_EXIT_USAGE;
            }
            origins[norigins++] = v;
        } else if (strcmp(a, "--heartbeat-ms") == 0) {
            long n;
            if (!cli_number(v, 100, 60000, &n)) {
                fprintf(stderr, "simfarm serve: --heartbeat-ms wants a number from 100 to 60000, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            heartbeat_ms = (unsigned)n;
        } else if (strcmp(a, "--chunk-ms") == 0) {
            long n;
            if (!cli_number(v, 100, 600000, &n)) {
                fprintf(stderr, "simfarm serve: --chunk-ms wants a number from 100 to 600000, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            chunk_ms = (uint64_t)n;
        } else if (strcmp(a, "--db-backlog-mb") == 0) {
            char *end;
            double mib = strtod(v, &end);
            if (end == v || *end != '\0' || !(mib >= 0.001 && mib <= 65536)) {
                fprintf(stderr, "simfarm serve: --db-backlog-mb wants a number from 0.001 to 65536, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            backlog = (uint64_t)(mib * 1048576.0);
        } else if (strcmp(a, "--log-format") == 0) {
            sf_log_format f;
            if (!sf_log_format_parse(v, &f)) {
                fprintf(stderr, "simfarm serve: --log-format wants text or json, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            sf_log_setup(f, SF_LOG_INFO, false);
        } else if (strcmp(a, "--default-tiers") == 0) {
            if (cd_tiers_parse(v, &default_tiers, &e) != 0) {
                fprintf(stderr, "simfarm serve: --default-tiers: %s\n", e.msg);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(a, "--pool") == 0) {
            long n;
            if (!cli_number(v, 1, 8, &n)) {
                fprintf(stderr, "simfarm serve: --pool wants a number from 1 to 8, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            pool = (unsigned)n;
        } else if (strcmp(a, "--max-connections") == 0 || strcmp(a, "--max-connections-per-addr") == 0) {
            long n;
            if (!cli_number(v, 1, 1000000, &n)) {
                fprintf(stderr, "simfarm serve: %s wants a number from 1 to 1000000, not '%s'\n", a, v);
                return SF_EXIT_USAGE;
            }
            if (strcmp(a, "--max-connections") == 0)
                max_conns = (unsigned)n;
            else
                max_conns_addr = (unsigned)n;
        }
    }
    if (next != 0)
        return cli_refuse("serve", &e, serve_usage);
    if (db == NULL || *db == '\0') {
        fprintf(stderr, "simfarm serve: no database: give --db CONNINFO or set SIMFARM_DB\n");
        return SF_EXIT_USAGE;
    }

    if ((cert == NULL) != (key == NULL)) {
        fprintf(stderr, "simfarm serve: TLS needs both --tls-cert and --tls-key\n");
        return SF_EXIT_USAGE;
    }
    if (burst.provider != NULL && cd_burst_check(&burst, &e) != 0) {
        fprintf(stderr, "simfarm serve: %s\n", e.msg);
        return SF_EXIT_USAGE;
    }
    if (burst.provider == NULL && (burst.max || burst.min || burst.script || burst.partition || burst.dir)) {
        fprintf(stderr, "simfarm serve: the --burst-* and --slurm-* flags need --burst local|slurm|exec\n");
        return SF_EXIT_USAGE;
    }
    char missing[512];
    if (cli_db_missing(db, missing, sizeof missing)) {
        fprintf(stderr, "simfarm serve: %s (--db)\n", missing);
        return SF_EXIT_FAIL;
    }
    char web_buf[PATH_MAX];
    cd_coordinator_opts co = { .host = host, .port = port, .db = db, .pool = pool, .name = "serve", .open_enrolment = open,
        .private_reads = private_reads,
        .token_file = token_file, .web_dir = web, .tls_cert = cert, .tls_key = key, .heartbeat_ms = heartbeat_ms,
        .chunk_ms = chunk_ms, .db_backlog_bytes = backlog, .trusted_proxies = proxies, .node_origins = origins,
        .n_node_origins = norigins,
        .default_tiers = default_tiers, .burst = burst.provider != NULL ? &burst : NULL,
        .max_connections = max_conns, .max_connections_per_addr = max_conns_addr };
    co.web_dir = web != NULL ? web : cli_default_web(web_buf, sizeof web_buf);
    co.started = announced;
    co.ctx = &co;
    return cd_coordinator_run(&co) == 0 ? SF_EXIT_OK : SF_EXIT_FAIL;
}

int cmd_serve(int argc, char **argv)
{
    cd_proxies proxies = { 0 };
    int rc = serve(argc, argv, &proxies);
    cd_proxies_free(&proxies);
    return rc;
}

/* The web files when --web names none: ./web (a source tree), else those
 * `make install` put beside the binary (PREFIX/bin/simfarm and
 * PREFIX/share/simfarm/web), else none. */
const char *cli_default_web(char *buf, size_t cap)
{
    struct stat st;
    if (stat("web", &st) == 0 && S_ISDIR(st.st_mode))
        return "web";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0';
    char installed[PATH_MAX + 32];
    snprintf(installed, sizeof installed, "%s/../share/simfarm/web", exe);
    if (cap < PATH_MAX || realpath(installed, buf) == NULL)
        return NULL;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? buf : NULL;
}

void cli_announce(const cd_coordinator_opts *o, int port)
{
    bool v6 = strchr(o->host, ':') != NULL;
    printf("simfarm %s: listening on %s://%s%s%s:%d\n", o->name, o->tls_cert ? "https" : "http", v6 ? "[" : "",
        o->host, v6 ? "]" : "", port);
    if (o->web_dir != NULL)
        printf("simfarm %s: serving the web files in %s at /\n", o->name, o->web_dir);
    if (o->token_file != NULL)
        printf("simfarm %s: the admin API token is in %s\n", o->name, o->token_file);
    fflush(stdout);
}
