/*
 * bench_coord.c — the coordinator under load: a real PostgreSQL, the real
 * `simfarm serve`, and simulated nodes speaking the node protocol over real
 * WebSockets on loopback (a small WebSocket client of its own on libuv: one
 * thread, thousands of connections). Every node has its own Ed25519 key,
 * answers the challenge with a signed hello, and answers `assign` with signed
 * `complete` batches whose results are valid for their chunks (sim_stats of
 * the job's own layouts with exactly the chunk's count, made by merging, not
 * by running the kernel: the point is the coordinator's cost).
 *
 *   coord_dispatch_latency_p50/p99  job INSERT (through libpq, the row
 *                                   cd_job_submission builds) to the first
 *                                   chunk assigned to one of LAT_NODES idle
 *                                   nodes; LAT_SAMPLES small jobs, each run to
 *                                   its end before the next
 *   coord_sessions_rss              the coordinator's VmRSS with IDLE_NODES
 *                                   idle sessions (welcomed, heartbeating)
 *   coord_api_nodes                 GET /api/nodes with those sessions online
 *   coord_api_nodes_page            GET /api/nodes?status=online&limit=100,
 *                                   the same sessions online
 *   coord_api_nodes_history         the same with HISTORY ended sessions per
 *                                   node written to node_work first
 *   coord_completions               accepted chunk results per second, with
 *                                   TP_NODES nodes sending batches of BATCH
 *                                   results: each batch signature-checked,
 *                                   each result journaled before its ack
 *   coord_load_*                    only with BENCH_COORD_LOAD_S=N (`make
 *                                   soak`): LOAD_NODES working nodes for N
 *                                   seconds, each completing what it holds
 *                                   about once a second; the coordinator's
 *                                   RSS sampled every 10 s (first, last, the
 *                                   least-squares trend; with N past 380,
 *                                   also the RSS and the trend from 360 s,
 *                                   when the skew window and the ledger's
 *                                   have filled) and /health's
 *                                   response time once a second, the
 *                                   event loop's lag as a client sees it
 *
 * Environment: BUILD (default build) locates bin/simfarm; SIMFARM_PG_BIN
 * PostgreSQL's server programs (default /usr/lib/postgresql/15/bin);
 * BENCH_COORD_FSYNC=on runs PostgreSQL with fsync (default off, as the
 * tests run it); BENCH_COORD_POOL the coordinator's --pool;
 * BENCH_COORD_IDLE the number of idle sessions; BENCH_COORD_SLOTS the slots
 * of each loaded node (default TP_SLOTS). As root, PostgreSQL runs as
 * the postgres user. The bench raises its RLIMIT_NOFILE to the hard limit
 * before starting the coordinator, which inherits it: a coordinator with N
 * sessions needs `ulimit -n` above N + 100.
 */
#include "actors/coord/jobs.h"
#include "actors/coord/pgembed.h"
#include "proto/msg.h"
#include "proto/sign.h"
#include "sched/sched.h"
#include "sim/sim.h"
#include "base/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

enum {
    LAT_NODES = 8,        /* idle nodes waiting for work in the latency phase */
    LAT_SLOTS = 2,
    LAT_SAMPLES = 30,
    LAT_ITEMS = 2000,     /* two chunks of 1,000 items */
    IDLE_NODES = 10000,
    HISTORY = 100,        /* ended sessions per node behind the node listing */
    TP_NODES = 256,
    TP_SLOTS = 48,        /* three batches in flight per node */
    BATCH = 16,
    TP_WARMUP_S = 3,
    TP_MEASURE_S = 10,
    MAX_HANDSHAKES = 256, /* connections being opened at once */
    TICK_MS = 50,
    LOAD_NODES = 2000,
    LOAD_SLOTS = 2,
};

static const char *params_json =
    "{\"style\":\"european\",\"type\":\"call\",\"S0\":100,\"K\":100,\"r\":0.05,\"q\":0.0,"
    "\"sigma\":0.2,\"T\":1,\"antithetic\":true,\"greeks\":true}";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void cleanup(void);

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_coord: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    cleanup();
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        die("out of memory (%zu bytes)", n);
    return p;
}

/* ---- processes: PostgreSQL and the coordinator ----------------------------------------- */

static char tmpdir[64];
static cd_pg pg;
static pid_t coord_pid;

/* Runs argv[0] (a path) with output to log. Returns its pid, or waits and
 * returns its exit status. */
static pid_t spawn(char *const argv[], const char *log, bool wait)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setpgid(0, 0); /* a Ctrl-C of the bench is ours to pass on */
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

/* Sends sig and waits up to timeout_s for the exit, then kills. */
static void stop_process(pid_t *pid, int sig, double timeout_s)
{
    if (*pid <= 0)
        return;
    kill(*pid, sig);
    double end = now_s() + timeout_s;
    struct timespec pause = { 0, 20000000 };
    int status;
    while (waitpid(*pid, &status, WNOHANG) == 0) {
        if (now_s() > end) {
            kill(*pid, SIGKILL);
            waitpid(*pid, &status, 0);
            break;
        }
        nanosleep(&pause, NULL);
    }
    *pid = 0;
}

static void cleanup(void)
{
    stop_process(&coord_pid, SIGTERM, 10);
    cd_pg_stop(&pg);
    if (tmpdir[0] != '\0' && getenv("BENCH_COORD_KEEP") == NULL) {
        char *argv[] = { "/bin/rm", "-rf", tmpdir, NULL };
        spawn(argv, "/dev/null", true);
        tmpdir[0] = '\0';
    }
}

static void on_fatal_signal(int sig)
{
    (void)sig;
    cleanup();
    _exit(130);
}

static void pg_start(void)
{
    const char *fsync = getenv("BENCH_COORD_FSYNC") ? getenv("BENCH_COORD_FSYNC") : "off";
    const char *settings[] = { strcmp(fsync, "on") == 0 ? "fsync=on" : "fsync=off", "max_connections=50", NULL };
    char dir[96];
    sf_error e;
    snprintf(dir, sizeof dir, "%s/pg", tmpdir);
    if (cd_pg_start(&pg, dir, settings, &e) != 0)
        die("%s", e.msg);
    fprintf(stderr, "bench_coord: PostgreSQL 15 in %s (%s)\n", dir, settings[0]);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("cannot find a free port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

/* A blocking HTTP GET on the coordinator; returns the status (0 when it
 * cannot connect) and the body in buf. */
static int http_get(int port, const char *path, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct timeval tv = { 5, 0 };
    buf[0] = '\0';
    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", path, port);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return 0;
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, buf + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd);
    int status = 0;
    sscanf(buf, "HTTP/1.%*d %d", &status);
    char *body = strstr(buf, "\r\n\r\n");
    if (body != NULL)
        memmove(buf, body + 4, strlen(body + 4) + 1);
    return status;
}

static int coord_port;
static char coord_log[128];

static void coord_start(void)
{
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char bin[512], listen[64], pool[16];
    snprintf(bin, sizeof bin, "%s/bin/simfarm", build);
    if (access(bin, X_OK) != 0)
        die("%s is missing: run make", bin);
    coord_port = free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", coord_port);
    snprintf(pool, sizeof pool, "%s", getenv("BENCH_COORD_POOL") ? getenv("BENCH_COORD_POOL") : "2");
    snprintf(coord_log, sizeof coord_log, "%s/coordinator.log", tmpdir);
    char *argv[] = { bin, "serve", "--db", pg.conninfo, "--listen", listen, "--pool", pool, "--open-enrolment", NULL };
    coord_pid = spawn(argv, coord_log, false);
    double end = now_s() + 30;
    struct timespec pause = { 0, 50000000 };
    char body[4096];
    for (;;) {
        if (http_get(coord_port, "/health", body, sizeof body) == 200 && strstr(body, "\"up\"") != NULL)
            break;
        int status;
        if (waitpid(coord_pid, &status, WNOHANG) == coord_pid) {
            coord_pid = 0;
            cd_log_tail(coord_log);
            die("the coordinator exited at start");
        }
        if (now_s() > end) {
            cd_log_tail(coord_log);
            die("the coordinator was not healthy within 30 s");
        }
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "bench_coord: simfarm serve on %s, --pool %s (log %s)\n", listen, pool, coord_log);
}

/* The coordinator's resident set, KiB. */
static long coord_rss_kib(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)coord_pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kib;
}

/* CPU seconds process pid has used (user + system); its parent in *ppid. */
static double cpu_s(int pid, int *ppid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    int pp = 0;
    if (p == NULL || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &pp, &ut, &st) != 3)
        return 0;
    if (ppid != NULL)
        *ppid = pp;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double coord_cpu_s(void)
{
    return cpu_s((int)coord_pid, NULL);
}

/* CPU seconds of PostgreSQL: the postmaster and its live children. */
static double pg_cpu_s(void)
{
    double sum = cpu_s((int)pg.pid, NULL);
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        int pid = atoi(e->d_name), pp = 0;
        if (pid <= 0)
            continue;
        double c = cpu_s(pid, &pp);
        if (pp == (int)pg.pid)
            sum += c;
    }
    if (d != NULL)
        closedir(d);
    return sum;
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
        ru.ru_stime.tv_usec * 1e-6;
}

static long metric(const char *name)
{
    char body[16384];
    if (http_get(coord_port, "/metrics", body, sizeof body) != 200)
        return -1;
    for (char *line = strtok(body, "\n"); line != NULL; line = strtok(NULL, "\n"))
        if (strncmp(line, name, strlen(name)) == 0 && line[strlen(name)] == ' ')
            return atol(line + strlen(name) + 1);
    return -1;
}

/* ---- jobs through libpq ------------------------------------------------------------------ */

static PGconn *db;

/* Inserts a job exactly as POST /api/jobs does (cd_job_submission builds
 * the row); returns its id. The nodes join under open enrolment, as public
 * nodes: the job names that tier (one that names none leaves them out). */
static uint64_t insert_job(uint64_t items, uint64_t seed)
{
    char json[1024], field[64], msg[256];
    int n = snprintf(json, sizeof json, "{\"kernel\":\"option\",\"params\":%s,\"items\":%" PRIu64 ",\"seed\":%" PRIu64
        ",\"owner\":\"bench\",\"tiers\":[\"own\",\"team\",\"community\",\"public\"],"
        "\"verify\":{\"trust\":[\"own\",\"team\",\"community\",\"public\"]}}", params_json, items, seed);
    cd_query *q = cd_job_submission(json, (size_t)n, field, sizeof field, msg, sizeof msg);
    if (q == NULL)
        die("the job is refused: %s: %s", field, msg);
    PGresult *r = PQexecParams(db, q->sql, q->nparams, NULL, (const char *const *)q->values, q->lengths, q->formats, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        die("insert job: %s", PQerrorMessage(db));
    uint64_t id = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    rt_msg_free(&q->hdr);
    return id;
}

static long long sql_count(const char *sql, uint64_t job)
{
    char arg[32];
    snprintf(arg, sizeof arg, "%" PRIu64, job);
    const char *v[1] = { arg };
    PGresult *r = PQexecParams(db, sql, 1, NULL, v, NULL, NULL, 0);
    long long n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return n;
}

/* ---- results: valid statistics of any count, made by merging ----------------------------- */

enum { MAX_POW = 50, RESULT_CACHE = 8 };

static uint32_t nout;
static sim_stats pow_stats[MAX_POW][SIM_MAX_OUT]; /* [k]: 2^k items */

static struct {
    uint64_t count;
    uint8_t *bytes;
    size_t len;
} result_cache[RESULT_CACHE];
static unsigned result_next;

static void results_init(void)
{
    msgpack_sbuffer mp;
    char err[160];
    sim_job *job = NULL;
    msgpack_sbuffer_init(&mp);
    if (sf_json_to_msgpack(params_json, strlen(params_json), &mp, err, sizeof err) != 0 ||
        sim_job_create(&job, "option", mp.data, mp.size, 1, err, sizeof err) != 0)
        die("the option job: %s", err);
    msgpack_sbuffer_destroy(&mp);
    nout = (uint32_t)sim_job_nout(job);
    /* One item computed for real gives each output its layout and a value;
     * doubling by merging gives 2^k items of the same. */
    if (sim_run_cpu(job, 0, 1, pow_stats[0]) != 0)
        die("sim_run_cpu");
    sim_job_destroy(job);
    for (int k = 1; k < MAX_POW; k++)
        for (uint32_t o = 0; o < nout; o++) {
            pow_stats[k][o] = pow_stats[k - 1][o];
            if (sim_stats_merge(&pow_stats[k][o], &pow_stats[k - 1][o]) != 0)
                die("sim_stats_merge");
        }
}

/* The encoded result of a chunk of `count` items (borrowed, cached). */
static const uint8_t *result_for(uint64_t count, size_t *len)
{
    for (unsigned i = 0; i < RESULT_CACHE; i++)
        if (result_cache[i].count == count && result_cache[i].bytes != NULL) {
            *len = result_cache[i].len;
            return result_cache[i].bytes;
        }
    sim_stats out[SIM_MAX_OUT];
    bool first = true;
    for (int k = 0; k < MAX_POW; k++) {
        if (!(count >> k & 1))
            continue;
        for (uint32_t o = 0; o < nout; o++) {
            if (first)
                out[o] = pow_stats[k][o];
            else if (sim_stats_merge(&out[o], &pow_stats[k][o]) != 0)
                die("sim_stats_merge");
        }
        first = false;
    }
    size_t cap = (size_t)nout * (SIM_STATS_MAX_ENCODED + 4);
    unsigned slot = result_next++ % RESULT_CACHE;
    free(result_cache[slot].bytes);
    result_cache[slot].bytes = xmalloc(cap);
    result_cache[slot].count = count;
    if (sc_result_encode(out, nout, result_cache[slot].bytes, cap, &result_cache[slot].len) != 0)
        die("sc_result_encode");
    *len = result_cache[slot].len;
    return result_cache[slot].bytes;
}

/* ---- simulated nodes: a WebSocket client on libuv ------------------------------------------ */

typedef struct held {
    uint64_t job, chunk, start, count;
    uint8_t token[16];
    uint8_t hash[32];
} held;

typedef enum nstate { N_IDLE, N_CONNECTING, N_UPGRADE, N_HELLO, N_WELCOME, N_RUNNING, N_CLOSING, N_CLOSED } nstate;

typedef struct node {
    uv_tcp_t tcp;
    uv_connect_t creq;
    nstate state;
    unsigned slots;
    pr_key key;
    uint8_t *in;            /* bytes received, not yet parsed */
    size_t in_len, in_cap;
    uint8_t *msg;           /* a fragmented message being assembled */
    size_t msg_len, msg_cap;
    uint64_t next_id, node_id;
    uint32_t heartbeat_ms;
    double last_hb;
    held *held;             /* assigned chunks not yet completed */
    size_t nheld, held_cap;
    unsigned unacked;
    double due;             /* MODE_PACED: when it completes what it holds */
} node;

typedef enum mode { MODE_IDLE, MODE_LATENCY, MODE_THROUGHPUT, MODE_PACED } mode;

static struct {
    uv_loop_t *loop;
    uv_timer_t tick;
    char host[64];
    node *nodes;
    size_t nnodes;
    size_t pace_next, pace_end;   /* nodes [pace_next, pace_end) still to connect */
    unsigned handshaking;
    mode mode;
    uint64_t welcomed, closed, failed, errors, accepted, other_outcomes, frames_out, batches;
    uint64_t watch_job;           /* latency: the job whose first assign is timed */
    double watch_t0, watch_first; /* its INSERT, its first assign (0 = not yet) */
    uint64_t done_job;            /* the last job a complete_ack said was finished */
    uint32_t mask_state;
} B;

static uint8_t readbuf[1 << 16];

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    /* One thread: each read is consumed before the next buffer is asked. */
    *buf = uv_buf_init((char *)readbuf, sizeof readbuf);
}

typedef struct wreq {
    uv_write_t req;
    uint8_t data[];
} wreq;

static void written(uv_write_t *req, int status)
{
    (void)status;
    free(req);
}

static void write_raw(node *n, const void *p, size_t len)
{
    wreq *w = xmalloc(sizeof *w + len);
    memcpy(w->data, p, len);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&n->tcp, &b, 1, written) != 0)
        free(w);
}

/* One masked binary frame (RFC 6455 §5.2: a client masks everything). */
static void ws_send(node *n, const uint8_t *p, size_t len)
{
    if (n->state < N_HELLO || n->state >= N_CLOSING)
        return;
    size_t hdr = 2 + (len < 126 ? 0 : len < 65536 ? 2 : 8) + 4;
    wreq *w = xmalloc(sizeof *w + hdr + len);
    uint8_t *o = w->data;
    *o++ = 0x82;
    if (len < 126) {
        *o++ = (uint8_t)(0x80 | len);
    } else if (len < 65536) {
        *o++ = 0x80 | 126;
        *o++ = (uint8_t)(len >> 8);
        *o++ = (uint8_t)len;
    } else {
        *o++ = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            *o++ = (uint8_t)((uint64_t)len >> (8 * i));
    }
    B.mask_state = B.mask_state * 1664525u + 1013904223u;
    uint8_t mask[4] = { (uint8_t)(B.mask_state >> 24), (uint8_t)(B.mask_state >> 16), (uint8_t)(B.mask_state >> 8),
        (uint8_t)B.mask_state };
    memcpy(o, mask, 4);
    o += 4;
    for (size_t i = 0; i < len; i++)
        o[i] = p[i] ^ mask[i & 3];
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)(hdr + len));
    if (uv_write(&w->req, (uv_stream_t *)&n->tcp, &b, 1, written) != 0)
        free(w);
    B.frames_out++;
}

static void send_msg(node *n, pr_msg *m)
{
    uint8_t *out = NULL;
    size_t len = 0;
    m->v = PR_VERSION;
    if (m->id == 0)
        m->id = ++n->next_id;
    m->ts = wall_ms();
    int rc = pr_encode(m, &out, &len);
    if (rc != 0)
        die("cannot encode %s: %s", pr_type_name(m->type), sf_strerror(rc));
    ws_send(n, out, len);
    free(out);
}

static void closed_cb(uv_handle_t *h)
{
    node *n = h->data;
    free(n->in);
    free(n->msg);
    free(n->held);
    n->in = n->msg = NULL;
    n->held = NULL;
    n->in_len = n->in_cap = n->msg_len = n->msg_cap = n->nheld = n->held_cap = 0;
    n->state = N_CLOSED;
    B.closed++;
}

static void node_close(node *n)
{
    if (n->state == N_IDLE || n->state >= N_CLOSING)
        return;
    if (n->state < N_RUNNING && n->state != N_IDLE)
        B.handshaking--;
    n->state = N_CLOSING;
    uv_close((uv_handle_t *)&n->tcp, closed_cb);
}

static void say_hello(node *n, const pr_msg *challenge)
{
    pr_backend cpu = { .kind = PR_BACKEND_CPU, .device = "bench", .memory = 1ull << 30, .units = n->slots };
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HELLO;
    m.body.hello.version = "bench_coord 0.1";
    m.body.hello.caps = (pr_caps){ .cores = n->slots, .max_parallel = n->slots, .os = "linux", .backends = &cpu,
        .nbackends = 1 };
    if (pr_hello_sign(&m.body.hello, &n->key, B.host, (uint64_t)time(NULL), challenge->body.challenge.nonce) != 0)
        die("pr_hello_sign");
    send_msg(n, &m);
    n->state = N_WELCOME;
}

/* Sends the first k held chunks (all of one job) as one signed batch. */
static void send_batch(node *n, size_t k)
{
    pr_result res[1024];
    if (k > 1024)
        k = 1024;
    for (size_t i = 0; i < k; i++) {
        const held *h = &n->held[i];
        size_t len;
        const uint8_t *data = result_for(h->count, &len);
        res[i] = (pr_result){ .chunk = h->chunk, .start = h->start, .count = h->count,
            .data = { data, (uint32_t)len } };
        memcpy(res[i].token, h->token, 16);
    }
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE;
    m.v = PR_VERSION;
    m.id = ++n->next_id;
    m.ts = wall_ms();
    randombytes_buf(m.body.complete.batch.nonce, sizeof m.body.complete.batch.nonce);
    m.body.complete.batch.job = n->held[0].job;
    memcpy(m.body.complete.batch.ctx_hash, n->held[0].hash, 32);
    m.body.complete.batch.results = res;
    m.body.complete.batch.nresults = (uint32_t)k;
    uint8_t *payload = NULL, *frame = NULL;
    size_t flen = 0;
    if (pr_complete_seal(&m.body.complete, &payload, &n->key, B.host, (uint64_t)time(NULL)) != 0 ||
        pr_encode(&m, &frame, &flen) != 0)
        die("cannot seal a batch");
    ws_send(n, frame, flen);
    free(payload);
    free(frame);
    memmove(n->held, n->held + k, (n->nheld - k) * sizeof *n->held);
    n->nheld -= k;
    n->unacked++;
    B.batches++;
}

/* Completes what the node holds: full batches under load; at once, whatever
 * it holds, when timing dispatch (the job must end before the next). */
static void node_work(node *n)
{
    while (n->nheld > 0) {
        size_t k = 0;
        while (k < n->nheld && n->held[k].job == n->held[0].job)
            k++;
        if (B.mode == MODE_THROUGHPUT && k < BATCH)
            return;
        if (B.mode == MODE_IDLE)
            return;
        if (B.mode == MODE_PACED) { /* like a node computing: about a second a round */
            if (n->due == 0)
                n->due = now_s() + 0.5 + (double)randombytes_uniform(1000) / 1000.0;
            if (now_s() < n->due)
                return;
            n->due = 0;
        }
        send_batch(n, B.mode == MODE_THROUGHPUT ? BATCH : k);
    }
}

static void heartbeat(node *n)
{
    uint64_t ids[256];
    uint32_t k = 0;
    for (size_t i = 0; i < n->nheld && k < 256; i++)
        ids[k++] = n->held[i].chunk;
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HEARTBEAT;
    m.body.heartbeat.mem_total = 1ull << 30;
    m.body.heartbeat.in_flight = k ? ids : NULL;
    m.body.heartbeat.nin_flight = k;
    send_msg(n, &m);
    n->last_hb = now_s();
}

static void on_message(node *n, const uint8_t *p, size_t len)
{
    pr_msg m;
    int rc = pr_decode(&m, p, len);
    if (rc != 0) {
        if (B.errors++ < 5)
            fprintf(stderr, "bench_coord: bad frame from the coordinator: %s %s\n", sf_strerror(rc), m.err_at);
        return;
    }
    switch (m.type) {
    case PR_MSG_CHALLENGE:
        say_hello(n, &m);
        break;
    case PR_MSG_WELCOME:
        n->node_id = m.body.welcome.node_id;
        n->heartbeat_ms = m.body.welcome.heartbeat_ms ? m.body.welcome.heartbeat_ms : 5000;
        n->last_hb = now_s();
        n->state = N_RUNNING;
        B.handshaking--;
        B.welcomed++;
        break;
    case PR_MSG_ASSIGN: {
        const pr_assign *a = &m.body.assign;
        if (B.mode == MODE_LATENCY && a->job == B.watch_job && B.watch_first == 0)
            B.watch_first = now_s();
        for (uint32_t i = 0; i < a->nchunks; i++) {
            if (n->nheld == n->held_cap) {
                n->held_cap = n->held_cap ? n->held_cap * 2 : 64;
                held *nh = realloc(n->held, n->held_cap * sizeof *nh);
                if (nh == NULL)
                    die("out of memory");
                n->held = nh;
            }
            held *h = &n->held[n->nheld++];
            h->job = a->job;
            h->chunk = a->chunks[i].chunk;
            h->start = a->chunks[i].start;
            h->count = a->chunks[i].count;
            memcpy(h->token, a->chunks[i].token, 16);
            memcpy(h->hash, a->ctx_hash, 32);
        }
        node_work(n);
        break;
    }
    case PR_MSG_COMPLETE_ACK:
        if (n->unacked > 0)
            n->unacked--;
        for (uint32_t i = 0; i < m.body.complete_ack.noutcomes; i++) {
            if (m.body.complete_ack.outcomes[i].outcome == PR_OUTCOME_ACCEPTED)
                B.accepted++;
            else
                B.other_outcomes++;
        }
        if (m.body.complete_ack.job_complete)
            B.done_job = m.body.complete_ack.job;
        break;
    case PR_MSG_ERROR:
        if (B.errors++ < 5)
            fprintf(stderr, "bench_coord: the coordinator says: %s (code %d)\n",
                m.body.error.message ? m.body.error.message : "?", m.body.error.code);
        break;
    case PR_MSG_CANCEL:
        n->nheld = 0;
        break;
    default:
        break;
    }
    pr_msg_free(&m);
}

/* Parses what arrived: the upgrade's answer, then frames. */
static void parse(node *n)
{
    size_t off = 0;
    if (n->state == N_UPGRADE) {
        uint8_t *end = NULL;
        for (size_t i = 0; i + 4 <= n->in_len && end == NULL; i++)
            if (memcmp(n->in + i, "\r\n\r\n", 4) == 0)
                end = n->in + i;
        if (end == NULL)
            return;
        if (n->in_len < 12 || memcmp(n->in, "HTTP/1.1 101", 12) != 0) {
            if (B.errors++ < 5)
                fprintf(stderr, "bench_coord: upgrade refused: %.*s\n", (int)(end - n->in), (const char *)n->in);
            B.failed++;
            node_close(n);
            return;
        }
        off = (size_t)(end - n->in) + 4;
        n->state = N_HELLO;
    }
    while (n->state < N_CLOSING && n->in_len - off >= 2) {
        const uint8_t *h = n->in + off;
        size_t avail = n->in_len - off, hdr = 2;
        uint64_t len = h[1] & 0x7f;
        if (len == 126) {
            if (avail < 4)
                break;
            len = (uint64_t)h[2] << 8 | h[3];
            hdr = 4;
        } else if (len == 127) {
            if (avail < 10)
                break;
            len = 0;
            for (int i = 0; i < 8; i++)
                len = len << 8 | h[2 + i];
            hdr = 10;
        }
        if (h[1] & 0x80)
            hdr += 4; /* a server never masks; tolerate it anyway */
        if (len > PR_MAX_FRAME || avail < hdr + len)
            break;
        const uint8_t *payload = h + hdr;
        unsigned op = h[0] & 0x0f;
        bool fin = h[0] & 0x80;
        off += hdr + (size_t)len;
        if (op == 0x8) {
            node_close(n);
            return;
        }
        if (op == 0x9) { /* ping: answer pong */
            uint8_t pong[2 + 4 + 125];
            size_t pl = len > 125 ? 125 : (size_t)len;
            pong[0] = 0x8a;
            pong[1] = (uint8_t)(0x80 | pl);
            memset(pong + 2, 0, 4);
            memcpy(pong + 6, payload, pl);
            write_raw(n, pong, 6 + pl);
            continue;
        }
        if (op != 0x0 && op != 0x2)
            continue;
        if (fin && n->msg_len == 0) {
            on_message(n, payload, (size_t)len);
            continue;
        }
        if (n->msg_len + len > n->msg_cap) {
            n->msg_cap = n->msg_len + (size_t)len;
            n->msg = realloc(n->msg, n->msg_cap);
            if (n->msg == NULL)
                die("out of memory");
        }
        memcpy(n->msg + n->msg_len, payload, (size_t)len);
        n->msg_len += (size_t)len;
        if (fin) {
            on_message(n, n->msg, n->msg_len);
            n->msg_len = 0;
        }
    }
    if (n->state >= N_CLOSING)
        return;
    memmove(n->in, n->in + off, n->in_len - off);
    n->in_len -= off;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    node *n = s->data;
    if (nread < 0) {
        node_close(n);
        return;
    }
    if (nread == 0)
        return;
    if (n->in_len + (size_t)nread > n->in_cap) {
        n->in_cap = (n->in_len + (size_t)nread) * 2;
        n->in = realloc(n->in, n->in_cap);
        if (n->in == NULL)
            die("out of memory");
    }
    memcpy(n->in + n->in_len, buf->base, (size_t)nread);
    n->in_len += (size_t)nread;
    parse(n);
    if (n->state < N_CLOSING && n->in_len == 0 && n->in_cap > 4096) { /* idle sessions keep nothing */
        free(n->in);
        n->in = NULL;
        n->in_cap = 0;
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    node *n = req->data;
    if (status != 0) {
        if (B.failed++ < 5)
            fprintf(stderr, "bench_coord: connect: %s\n", uv_strerror(status));
        node_close(n);
        return;
    }
    uint8_t key[16];
    char key64[32], reqbuf[512];
    randombytes_buf(key, sizeof key);
    sodium_bin2base64(key64, sizeof key64, key, sizeof key, sodium_base64_VARIANT_ORIGINAL);
    int len = snprintf(reqbuf, sizeof reqbuf,
        "GET /ws/node HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
        B.host, key64, PR_WS_PROTOCOL);
    n->state = N_UPGRADE;
    write_raw(n, reqbuf, (size_t)len);
    uv_read_start((uv_stream_t *)&n->tcp, alloc_cb, on_read);
}

static void node_connect(node *n)
{
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", coord_port, &a);
    uv_tcp_init(B.loop, &n->tcp);
    n->tcp.data = n;
    n->creq.data = n;
    n->state = N_CONNECTING;
    n->next_id = 0;
    n->unacked = 0;
    B.handshaking++;
    if (uv_tcp_connect(&n->creq, &n->tcp, (const struct sockaddr *)&a, on_connect) != 0) {
        B.failed++;
        node_close(n);
    }
}

/* Opens connections to nodes [pace_next, pace_end), MAX_HANDSHAKES at a time. */
static void pace(void)
{
    while (B.pace_next < B.pace_end && B.handshaking < MAX_HANDSHAKES)
        node_connect(&B.nodes[B.pace_next++]);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    pace();
    double now = now_s();
    for (size_t i = 0; i < B.nnodes; i++) {
        node *n = &B.nodes[i];
        if (n->state == N_RUNNING && now - n->last_hb >= n->heartbeat_ms / 1000.0)
            heartbeat(n);
        if (B.mode == MODE_PACED && n->state == N_RUNNING && n->nheld > 0)
            node_work(n);
    }
}

/* Connects nodes [lo, hi) with `slots` each. */
static void nodes_open(size_t lo, size_t hi, unsigned slots)
{
    for (size_t i = lo; i < hi; i++) {
        node *n = &B.nodes[i];
        n->slots = slots;
        n->state = N_IDLE;
    }
    B.pace_next = lo;
    B.pace_end = hi;
    pace();
}

static void nodes_close(size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        node_close(&B.nodes[i]);
}

/* Runs the loop until done() or the deadline; false on the deadline. */
static bool run_until(bool (*done)(void), double timeout_s)
{
    double end = now_s() + timeout_s;
    while (!done()) {
        if (now_s() > end)
            return false;
        uv_run(B.loop, UV_RUN_ONCE); /* the tick timer bounds each wait */
    }
    return true;
}

static double settle_until;

static bool settled(void)
{
    return now_s() >= settle_until;
}

/* Runs the loop for seconds. */
static void run_for(double seconds)
{
    settle_until = now_s() + seconds;
    run_until(settled, seconds + 1);
}

static uint64_t want_welcomed, want_closed;

static bool all_welcomed(void)
{
    pace();
    return B.welcomed >= want_welcomed || (B.pace_next == B.pace_end && B.handshaking == 0);
}

static bool all_closed(void)
{
    return B.closed >= want_closed;
}

static bool first_assign(void)
{
    return B.watch_first != 0;
}

static bool job_done(void)
{
    return B.done_job == B.watch_job;
}

static void open_and_welcome(size_t lo, size_t hi, unsigned slots, double timeout_s)
{
    want_welcomed = B.welcomed + (hi - lo);
    nodes_open(lo, hi, slots);
    if (!run_until(all_welcomed, timeout_s) || B.welcomed < want_welcomed)
        die("%" PRIu64 " of %zu nodes welcomed (%" PRIu64 " failed); coordinator log: %s",
            B.welcomed - (want_welcomed - (hi - lo)), hi - lo, B.failed, coord_log);
}

static void close_and_wait(size_t lo, size_t hi)
{
    uint64_t open = 0;
    for (size_t i = lo; i < hi; i++)
        open += B.nodes[i].state != N_IDLE && B.nodes[i].state < N_CLOSING;
    want_closed = B.closed + open;
    nodes_close(lo, hi);
    run_until(all_closed, 30);
}

/* ---- the phases ---------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double p)
{
    int i = (int)(p * n + 0.999999) - 1; /* nearest rank */
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return sorted[i];
}

static void dispatch_latency(void)
{
    B.mode = MODE_LATENCY;
    open_and_welcome(0, LAT_NODES, LAT_SLOTS, 30);
    double lat[LAT_SAMPLES];
    int n = 0;
    double end = now_s() + 40;
    while (n < LAT_SAMPLES && now_s() < end) {
        /* Idle for a random while, so the job does not land at one phase of
         * whatever the sessions do periodically. */
        run_for(randombytes_uniform(1000) / 1000.0);
        B.watch_first = 0;
        B.watch_t0 = now_s();
        B.watch_job = insert_job(LAT_ITEMS, (uint64_t)n + 1);
        if (!run_until(first_assign, 15))
            die("job %" PRIu64 " was not assigned within 15 s", B.watch_job);
        lat[n++] = (B.watch_first - B.watch_t0) * 1000;
        if (!run_until(job_done, 15))
            die("job %" PRIu64 " did not finish within 15 s", B.watch_job);
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    fprintf(stderr, "bench_coord: dispatch latency over %d jobs, %d idle nodes: min %.1f ms, max %.1f ms\n", n,
        LAT_NODES, lat[0], lat[n - 1]);
    printf("BENCH coord_dispatch_latency_p50 %.1f ms\n", pct(lat, n, 0.50));
    printf("BENCH coord_dispatch_latency_p99 %.1f ms\n", pct(lat, n, 0.99));
    fflush(stdout);
    close_and_wait(0, LAT_NODES);
    B.mode = MODE_IDLE;
}

static bool no_sessions(void)
{
    return metric("simfarm_node_sessions") == 0;
}

/* GET target (/api/nodes...), the best of five, in ms; checks that the
 * listing has `want` online nodes. */
static double api_nodes_ms(const char *target, size_t want)
{
    size_t cap = 64u << 20;
    char *body = malloc(cap);
    if (body == NULL)
        die("out of memory");
    double best = 1e9;
    for (int i = 0; i < 5; i++) {
        double t0 = now_s();
        int status = http_get(coord_port, target, body, cap);
        double ms = (now_s() - t0) * 1000;
        size_t online = 0;
        for (const char *p = body; (p = strstr(p, "\"online\":true")) != NULL; p++)
            online++;
        if (status != 200 || online != want)
            die("GET %s: status %d, %zu nodes online of %zu", target, status, online, want);
        best = ms < best ? ms : best;
        run_for(0.2); /* the nodes' heartbeats */
    }
    free(body);
    return best;
}

/* Runs sql on the benchmark's connection while the simulated nodes go on. */
static void exec_live(const char *sql)
{
    if (!PQsendQuery(db, sql))
        die("libpq: %s", PQerrorMessage(db));
    while (PQconsumeInput(db) && PQisBusy(db))
        run_for(0.1);
    PGresult *r;
    while ((r = PQgetResult(db)) != NULL) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
            die("%s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
    }
}

static void sessions_rss(size_t count)
{
    B.mode = MODE_IDLE;
    long before = coord_rss_kib();
    double t0 = now_s();
    open_and_welcome(0, count, 4, 90);
    double took = now_s() - t0;
    run_for(2); /* a round of claims and heartbeats */
    long after = coord_rss_kib();
    long sessions = metric("simfarm_node_sessions");
    fprintf(stderr, "bench_coord: %zu sessions welcomed in %.1f s (%.0f/s); coordinator RSS %.1f MB before, "
        "%.1f MB with them (%.1f KiB per session); /metrics says %ld sessions\n", count, took, count / took,
        before / 1024.0, after / 1024.0, (double)(after - before) / (double)count, sessions);
    printf("BENCH coord_sessions_rss %.1f MB\n", after / 1024.0);
    fflush(stdout);
    /* The node listing with every node online, then with the rows of
     * HISTORY ended sessions per node behind it. */
    printf("BENCH coord_api_nodes %.1f ms\n", api_nodes_ms("/api/nodes", count));
    printf("BENCH coord_api_nodes_page %.1f ms\n", api_nodes_ms("/api/nodes?status=online&limit=100", 100));
    double h0 = now_s();
    for (int round = 1; round <= HISTORY; round++) { /* a session of every node ends */
        char sql[256];
        snprintf(sql, sizeof sql, "INSERT INTO node_work (session, node, chunks, items) "
            "SELECT gen_random_uuid(), id, %d, %d FROM nodes", 1 + round % 7, 1000 * (1 + round % 7));
        exec_live(sql);
    }
    fprintf(stderr, "bench_coord: %d ended sessions per node written in %.1f s\n", HISTORY, now_s() - h0);
    printf("BENCH coord_api_nodes_history %.1f ms\n", api_nodes_ms("/api/nodes", count));
    fflush(stdout);
    close_and_wait(0, count);
    double end = now_s() + 30;
    while (!no_sessions() && now_s() < end)
        run_for(0.1);
}

static void completions(void)
{
    uint64_t job = insert_job(UINT64_C(1) << 40, 7), base = B.accepted;
    B.mode = MODE_THROUGHPUT;
    unsigned slots = getenv("BENCH_COORD_SLOTS") ? (unsigned)atoi(getenv("BENCH_COORD_SLOTS")) : TP_SLOTS;
    open_and_welcome(0, TP_NODES, slots, 60);
    run_for(TP_WARMUP_S);
    if (B.accepted == base)
        die("nothing accepted after %d s of warm-up", TP_WARMUP_S);
    uint64_t a0 = B.accepted, b0 = B.batches, o0 = B.other_outcomes;
    double c0 = coord_cpu_s(), p0 = pg_cpu_s(), s0 = self_cpu_s(), t0 = now_s();
    run_for(TP_MEASURE_S);
    double t = now_s() - t0, cpu = coord_cpu_s() - c0, pg_cpu = pg_cpu_s() - p0, self_cpu = self_cpu_s() - s0;
    uint64_t accepted = B.accepted - a0;
    double rate = (double)accepted / t;
    B.mode = MODE_IDLE; /* stop sending; what is in flight still gets its ack */
    run_for(1);
    long long journal = sql_count("SELECT count(*) FROM journal WHERE job_id = $1 AND type = 1", job);
    fprintf(stderr, "bench_coord: %" PRIu64 " results accepted in %.1f s by %d nodes (%.0f batches/s of %d); "
        "%" PRIu64 " other outcomes; CPU (%% of one core): coordinator %.0f, PostgreSQL %.0f, these nodes %.0f; "
        "journal holds %lld accepts, %" PRIu64 " acknowledged in all\n", accepted, t, TP_NODES,
        (double)(B.batches - b0) / t, BATCH, B.other_outcomes - o0, 100 * cpu / t, 100 * pg_cpu / t,
        100 * self_cpu / t, journal, B.accepted - base);
    if (journal < (long long)(B.accepted - base))
        die("the journal holds fewer accepted results (%lld) than were acknowledged (%" PRIu64 ")", journal,
            B.accepted - base);
    printf("BENCH coord_completions %.0f results/s\n", rate);
    fflush(stdout);
    close_and_wait(0, TP_NODES);
}

/* /health's response time, in milliseconds. */
static double health_ms(void)
{
    char buf[4096];
    double t0 = now_s();
    if (http_get(coord_port, "/health", buf, sizeof buf) < 0)
        return -1;
    return (now_s() - t0) * 1000.0;
}

/* The least-squares slope of n samples of RSS (KiB) against time (s), in
 * KiB per minute. */
static double trend_kib_min(const double *t, const double *kib, size_t n)
{
    double mt = 0, mr = 0, sxy = 0, sxx = 0;
    for (size_t i = 0; i < n; i++) {
        mt += t[i] / (double)n;
        mr += kib[i] / (double)n;
    }
    for (size_t i = 0; i < n; i++) {
        sxy += (t[i] - mt) * (kib[i] - mr);
        sxx += (t[i] - mt) * (t[i] - mt);
    }
    return sxx > 0 ? sxy / sxx * 60.0 : 0;
}

/* LOAD_NODES nodes working for `seconds`: is memory flat, does the loop keep up? */
static void load_run(double seconds)
{
    uint64_t job = insert_job(UINT64_C(1) << 40, 11), base = B.accepted;
    B.mode = MODE_PACED;
    size_t nodes = LOAD_NODES < B.nnodes ? LOAD_NODES : B.nnodes;
    open_and_welcome(0, nodes, LOAD_SLOTS, 120);
    run_for(10); /* settle into the rhythm */
    enum { MAX_SAMPLES = 4096 };
    static double rss_t[MAX_SAMPLES], rss_kib[MAX_SAMPLES], lag[MAX_SAMPLES];
    size_t nrss = 0, nlag = 0;
    double t0 = now_s(), next_rss = t0;
    uint64_t a0 = B.accepted;
    while (now_s() - t0 < seconds) {
        if (now_s() >= next_rss && nrss < MAX_SAMPLES) {
            rss_t[nrss] = now_s() - t0;
            rss_kib[nrss++] = (double)coord_rss_kib();
            next_rss += 10;
        }
        double ms = health_ms();
        if (ms >= 0 && nlag < MAX_SAMPLES)
            lag[nlag++] = ms;
        run_for(1);
    }
    double t = now_s() - t0, rate = (double)(B.accepted - a0) / t;
    double slope = trend_kib_min(rss_t, rss_kib, nrss);
    /* Past the skew window and a minute more, the ledger's window and the
     * sessions' replay guards have filled; the live-event log (4,096
     * events, four job.progress a second) takes about 17 minutes more. */
    size_t late = 0;
    while (late < nrss && rss_t[late] < PR_MAX_SKEW_S + 60)
        late++;
    qsort(lag, nlag, sizeof *lag, cmp_double);
    B.mode = MODE_IDLE;
    run_for(1);
    long long journal = sql_count("SELECT count(*) FROM journal WHERE job_id = $1 AND type = 1", job);
    fprintf(stderr, "bench_coord: load: %zu nodes for %.0f s, %.0f results/s, RSS %.1f MB at the start, %.1f MB at "
        "the end (%zu samples), /health p50 %.1f ms p99 %.1f ms max %.1f ms; journal holds %lld accepts, %" PRIu64
        " acknowledged\n", nodes, t, rate, rss_kib[0] / 1024, rss_kib[nrss ? nrss - 1 : 0] / 1024, nrss,
        nlag ? lag[nlag / 2] : -1, nlag ? lag[nlag * 99 / 100] : -1, nlag ? lag[nlag - 1] : -1, journal,
        B.accepted - base);
    fprintf(stderr, "bench_coord: load: RSS (MB) every 10 s:");
    for (size_t i = 0; i < nrss; i++)
        fprintf(stderr, " %.1f", rss_kib[i] / 1024);
    fprintf(stderr, "\n");
    if (journal < (long long)(B.accepted - base))
        die("the journal holds fewer accepted results (%lld) than were acknowledged (%" PRIu64 ")", journal,
            B.accepted - base);
    printf("BENCH coord_load_results %.0f results/s\n", rate);
    printf("BENCH coord_load_rss_start %.1f MB\n", rss_kib[0] / 1024);
    printf("BENCH coord_load_rss_end %.1f MB\n", rss_kib[nrss ? nrss - 1 : 0] / 1024);
    printf("BENCH coord_load_rss_trend %.0f KiB/min\n", slope);
    if (nrss - late >= 3) {
        printf("BENCH coord_load_rss_at_window %.1f MB\n", rss_kib[late] / 1024);
        printf("BENCH coord_load_rss_trend_after_window %.0f KiB/min\n",
            trend_kib_min(rss_t + late, rss_kib + late, nrss - late));
    }
    printf("BENCH coord_load_health_p99 %.1f ms\n", nlag ? lag[nlag * 99 / 100] : -1);
    fflush(stdout);
    close_and_wait(0, nodes);
}

/* ---- main ------------------------------------------------------------------------------------------ */

static void never_close_cb(uv_handle_t *h)
{
    (void)h;
}

int main(void)
{
    if (pr_init() != 0)
        die("libsodium");
    signal(SIGINT, on_fatal_signal);
    signal(SIGTERM, on_fatal_signal);
    signal(SIGPIPE, SIG_IGN);
    size_t idle = IDLE_NODES;
    if (getenv("BENCH_COORD_IDLE") != NULL)
        idle = strtoul(getenv("BENCH_COORD_IDLE"), NULL, 10);

    /* Every session is a descriptor here and one in the coordinator (which
     * inherits this limit); lws sizes its table from it at start. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != RLIM_INFINITY && idle + 200 > rl.rlim_cur) {
        fprintf(stderr, "bench_coord: RLIMIT_NOFILE is %llu: %zu idle sessions instead of %zu (raise ulimit -Hn)\n",
            (unsigned long long)rl.rlim_cur, (size_t)rl.rlim_cur - 200, idle);
        idle = (size_t)rl.rlim_cur - 200;
    }

    snprintf(tmpdir, sizeof tmpdir, "/tmp/simfarm-bench-XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        die("mkdtemp: %s", strerror(errno));
    chmod(tmpdir, 0755);
    results_init();
    pg_start();
    coord_start();
    db = PQconnectdb(pg.conninfo);
    if (PQstatus(db) != CONNECTION_OK)
        die("libpq: %s", PQerrorMessage(db));
    snprintf(B.host, sizeof B.host, "127.0.0.1:%d", coord_port);

    B.nnodes = idle > TP_NODES ? idle : TP_NODES;
    B.nodes = calloc(B.nnodes, sizeof *B.nodes);
    if (B.nodes == NULL)
        die("out of memory");
    for (size_t i = 0; i < B.nnodes; i++) {
        uint8_t seed[32];
        randombytes_buf(seed, sizeof seed);
        pr_key_from_seed(&B.nodes[i].key, seed, sizeof seed);
    }
    B.loop = uv_default_loop();
    uv_timer_init(B.loop, &B.tick);
    uv_timer_start(&B.tick, on_tick, TICK_MS, TICK_MS);

    dispatch_latency();
    /* New keys for every phase: each session is a new node. */
    for (size_t i = 0; i < B.nnodes; i++) {
        uint8_t seed[32];
        randombytes_buf(seed, sizeof seed);
        pr_key_from_seed(&B.nodes[i].key, seed, sizeof seed);
    }
    double load_s = getenv("BENCH_COORD_LOAD_S") ? atof(getenv("BENCH_COORD_LOAD_S")) : 0;
    if (load_s > 0) { /* the long run alone */
        load_run(load_s);
    } else {
        sessions_rss(idle);
        completions();
    }

    uv_timer_stop(&B.tick);
    uv_close((uv_handle_t *)&B.tick, never_close_cb);
    uv_run(B.loop, UV_RUN_NOWAIT);
    PQfinish(db);
    for (unsigned i = 0; i < RESULT_CACHE; i++)
        free(result_cache[i].bytes);
    for (size_t i = 0; i < B.nnodes; i++)
        pr_key_wipe(&B.nodes[i].key);
    free(B.nodes);
    cleanup();
    return 0;
}
