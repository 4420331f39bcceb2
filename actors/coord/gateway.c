/*
 * gateway.c — see gateway.h; the HTTP API itself is in api.c (api.h), which
 * answers through respond() below.
 *
 * lws calls its callbacks on the loop thread. A complete request (method,
 * path, arguments, Authorization, body) becomes a message to the gateway
 * actor, pinned to the same thread; its answer goes into the transaction
 * table and lws is asked for a writable callback, which sends it. GET
 * requests for other paths are files of the web directory, which lws
 * sends by itself. /ws/events connections each have a queue of event
 * texts. The tables and the lws context are touched only on the loop
 * thread: by the callbacks and by the gateway's behaviour, which never run
 * at the same time.
 */
#include "actors/coord/gateway.h"

#include "actors/coord/api.h"
#include "actors/coord/events.h"
#include "actors/coord/oplog.h"
#include "actors/coord/scheduler.h"
#include "actors/coord/session.h"
#include "actors/coord/store.h"
#include "actors/coord/tlscert.h"
#include "base/alloc.h"
#include "base/fnv.h"
#include "base/log.h"
#include "base/map.h"
#include "base/str.h"
#include "base/url.h"

#include <arpa/inet.h>
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libwebsockets.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define EVENTS_PROTOCOL "simfarm.events.v1"

enum { M_REQUEST = RT_MSGS_GATEWAY, M_DIE, M_TLS_CHECK, M_OPLOG };
enum { CD_ORIGIN_MAX = 300 };
enum {
    EVENTS_KEPT = 4096,         /* events a reconnecting client can catch up on */
    EVENTS_PER_ADDRESS = 16,    /* /ws/events connections one client address may hold */
    ANSWER_SLACK_S = 5,         /* past the database's waits, before a transaction is given up */
    BODY_DRAIN_FACTOR = 8,      /* a body up to this many times the limit is read before its 413 */
    CONN_RESERVE = 64,          /* descriptors kept from the connections' cap: the database's, files, the loop's */
    CONN_PER_ADDR = 256,        /* the default cap per address, when the total allows */
    OPLOG_FLUSH_MS = 10000,     /* how often the operator lines held back are said (oplog.h) */
    SPARE_ROUNDS = 64,          /* connections closed per turn while no descriptor is free */
};

const char *const cd__conn_refusal_names[CD__CONN_REFUSALS] = { "total", "per_address", "no_descriptor" };

/* A connection the gateway counts: its address's key (0: not capped, a
 * trusted proxy's or none), its number, and whether it sent a request yet. */
typedef struct conn_rec {
    uint64_t addr;
    uint64_t seq;
    bool active;
} conn_rec;

SF_MAP_DECLARE(conn_map, conn_rec)      /* by the wsi's address */
SF_MAP_DECLARE(addr_count_map, unsigned) /* connections by address key */

/* A connection that had not sent a request when it came, in the order
 * they came: the first still idle is the one closed to make room. */
typedef struct idle_ent {
    struct lws *wsi;
    uint64_t seq;
} idle_ent;

typedef struct http_txn http_txn;
typedef struct events_conn events_conn;

/* The gateway actor's state: touched on the loop thread only. */
typedef struct gateway {
    struct lws_context *ctx;
    struct lws_vhost *vhost;
    rt_actor *self, *store, *scheduler;
    rt_actor *burst;         /* or NULL */
    size_t max_body;
    uint64_t db_timeout_ms;
    bool private_reads;      /* cd_gateway_opts.private_reads */
    cd__api *api;            /* the HTTP API, which answers through respond() */
    cd__gw_stats st;         /* what /health and /metrics report of the gateway */
    char web_dir[512];
    http_txn *txns;      /* HTTP transactions waiting for their answer */
    size_t ntxns, txns_cap;
    uint64_t next_txn;
    cd_proxies proxies;      /* trusted reverse proxies */
    char (*origins)[CD_ORIGIN_MAX]; /* --node-origin, as cd_origin_canon writes them */
    size_t norigins;
    cd_sessions *nodes;      /* node connections */
    cd_events *events;
    events_conn *evc;        /* /ws/events connections */
    size_t nevc, evc_cap;
    struct lws_protocols protocols[4];
    /* TLS: the files named at start, the vhost's OpenSSL context (the
     * pair served is st.tls, NULL for plain http) */
    char tls_cert[PATH_MAX], tls_key[PATH_MAX];
    void *ssl_ctx;
    /* Connections and their caps (docs/coordinator.md, "Connection
     * limits"). FILTER_NETWORK_CONNECTION decides on each accepted socket
     * and SERVER_NEW_CLIENT_INSTANTIATED (the same turn) counts it, under
     * admit_addr; WSI_DESTROY forgets it. */
    conn_map conns;
    addr_count_map per_addr;
    idle_ent *idle;          /* a ring: idle[(idle_head + i) % idle_cap], i < nidle */
    size_t idle_head, nidle, idle_cap;
    uint64_t conn_seq, admit_addr;
    bool admitting;
    /* A descriptor held in reserve (/dev/null): with none free, lws's
     * accept fails (EMFILE) and the connection would stay in the queue,
     * waking the loop at once again and again; the spare is let go, the
     * connection taken and closed, and the spare taken again. listen_dup
     * is a second descriptor of lws's listening socket, watched for that. */
    int spare_fd, listen_dup;
    uv_poll_t *listen_poll_h;  /* owned by the loop once closed (listen_poll_closed frees it) */
    uint64_t down_ms;        /* when the database went away (monotonic), for its line when it is back */
} gateway;

/* An HTTP transaction waiting for its answer. */
struct http_txn {
    uint64_t id;
    struct lws *wsi;
    int status;              /* 0 until the answer is ready */
    const char *type;
    char extra[128];         /* a header line, or empty (copied: callers pass their stack) */
    char *body;
    size_t body_len;
};

/* A /ws/events connection. A client reads the event log at its own pace: it holds only where it
 * is in it, and a snapshot to send first. */
struct events_conn {
    struct lws *wsi;
    uint64_t job;            /* only this job's events; 0 = all */
    uint64_t at;             /* the last event sent or passed over */
    char *snapshot;          /* to send before the events after `at`, or NULL */
    bool behind;             /* the log has moved on past it: being closed */
    uint8_t addr[PR_PK_BYTES]; /* its client's address (cd_addr_key) */
};

/* lws per-transaction state of the http protocol */
typedef struct pss {
    uint64_t txn;
    cd__request *req;        /* a POST waiting for its body */
    bool too_big;
    bool close;              /* what follows the request cannot be read: close after the answer */
    bool head;               /* HEAD: the GET's answer without its body */
} pss;

/* ---- transactions (loop thread) ---------------------------------------------------- */

static http_txn *txn_find(gateway *g, uint64_t id)
{
    for (size_t i = 0; i < g->ntxns; i++)
        if (g->txns[i].id == id)
            return &g->txns[i];
    return NULL;
}

static uint64_t txn_open(gateway *g, struct lws *wsi)
{
    if (g->ntxns == g->txns_cap)
        g->txns = sf_grow(g->txns, &g->txns_cap, sizeof *g->txns);
    http_txn *s = &g->txns[g->ntxns++];
    memset(s, 0, sizeof *s);
    s->id = ++g->next_txn;
    s->wsi = wsi;
    return s->id;
}

static void txn_close(gateway *g, uint64_t id)
{
    http_txn *s = txn_find(g, id);
    if (s == NULL)
        return;
    free(s->body);
    *s = g->txns[--g->ntxns];
}

/* The API's one way to answer (cd__respond_fn): sets the answer of the
 * HTTP transaction id and asks lws to write it; takes body. */
static void respond(void *ctx, uint64_t id, int status, const char *type, char *body, const char *extra)
{
    gateway *g = ctx;
    http_txn *s = txn_find(g, id);
    g->st.requests++;
    if (status >= 100 && status < 600)
        g->st.by_class[status / 100]++;
    if (s == NULL) {
        free(body);
        return;
    }
    s->status = status;
    s->type = type;
    snprintf(s->extra, sizeof s->extra, "%s", extra ? extra : "");
    s->body = body;
    s->body_len = strlen(body);
    lws_callback_on_writable(s->wsi);
}

static void respond_error(gateway *g, uint64_t id, int status, const char *msg)
{
    respond(g, id, status, "application/json", cd__api_error_json(NULL, msg), NULL);
}

/* ---- static files ---------------------------------------------------------------------- */

static const char *mime_of(const char *path)
{
    static const struct { const char *ext, *type; } types[] = {
        { ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
        { ".mjs", "text/javascript; charset=utf-8" }, { ".css", "text/css; charset=utf-8" },
        { ".json", "application/json" }, { ".wasm", "application/wasm" }, { ".svg", "image/svg+xml" },
        { ".png", "image/png" }, { ".ico", "image/x-icon" }, { ".txt", "text/plain; charset=utf-8" },
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

/* The file for a GET of path under the web directory: "/" is index.html,
 * "/contribute" is contribute.html. No "..", no hidden files. Returns
 * false when there is none. */
static bool web_file(const gateway *g, const char *path, char *out, size_t cap)
{
    if (g->web_dir[0] == '\0' || path[0] != '/' || strstr(path, "/.") != NULL || strchr(path, '\\') != NULL)
        return false;
    const char *rel = strcmp(path, "/") == 0 ? "/index.html" : path;
    const char *dot = strrchr(rel, '.'), *slash = strrchr(rel, '/');
    int n = snprintf(out, cap, "%s%s%s", g->web_dir, rel, dot == NULL || dot < slash ? ".html" : "");
    if (n < 0 || (size_t)n >= cap)
        return false;
    struct stat st;
    return stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_api_path(const char *p)
{
    return strncmp(p, "/api/", 5) == 0 || strcmp(p, "/api") == 0 || strcmp(p, "/health") == 0 ||
        strcmp(p, "/metrics") == 0;
}

/* ---- http ------------------------------------------------------------------------------ */

/* wsi's client address as text (behind a trusted proxy, the one it
 * names), or "" when there is none. */
static void client_text(const gateway *g, struct lws *wsi, char *buf, size_t cap)
{
    struct sockaddr_storage client;
    cd_wsi_client(wsi, &g->proxies, &client);
    const void *in = client.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&client)->sin_addr
                                                 : (const void *)&((struct sockaddr_in6 *)&client)->sin6_addr;
    if (client.ss_family == AF_UNSPEC || inet_ntop(client.ss_family, in, buf, (socklen_t)cap) == NULL)
        buf[0] = '\0';
}

/* ---- connections and their caps --------------------------------------------------------- */

/* The key an address's connections are counted under: its penalty key's
 * (cd_addr_key: an IPv4 address, an IPv6 /64), hashed; never 0. */
static uint64_t addr_hash(const struct sockaddr *sa)
{
    uint8_t key[PR_PK_BYTES];
    cd_addr_key(sa, key);
    uint64_t h = sf_fnv64(SF_FNV64_BASIS, key, sizeof key);
    return h != 0 ? h : 1;
}

static void sockaddr_text(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
    const void *in = ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
                                              : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
    if ((ss->ss_family != AF_INET && ss->ss_family != AF_INET6) ||
        inet_ntop(ss->ss_family, in, buf, (socklen_t)cap) == NULL)
        buf[0] = '\0';
}

static uint64_t wsi_key(const struct lws *wsi)
{
    return (uint64_t)(uintptr_t)wsi;
}

/* Forgets a counted connection: it closed, or is being closed to make room. */
static void conn_forget(gateway *g, struct lws *wsi)
{
    conn_rec *r = conn_map_get(&g->conns, wsi_key(wsi));
    if (r == NULL)
        return;
    unsigned *n = r->addr != 0 ? addr_count_map_get(&g->per_addr, r->addr) : NULL;
    if (n != NULL && --*n == 0)
        addr_count_map_del(&g->per_addr, r->addr);
    conn_map_del(&g->conns, wsi_key(wsi));
    g->st.conns = g->conns.n;
}

/* Whether the idle list's entry still stands for a connection that has
 * not sent a request (not closed, not reused for another). */
static bool idle_still(const gateway *g, idle_ent e)
{
    const conn_rec *r = conn_map_get(&g->conns, wsi_key(e.wsi));
    return r != NULL && r->seq == e.seq && !r->active;
}

static void idle_push(gateway *g, struct lws *wsi, uint64_t seq)
{
    if (g->nidle == g->idle_cap) {
        /* full: the entries that no longer stand go first, then it grows
         * (unrolled from its head) if that made too little room */
        size_t cap = g->idle_cap, n = 0;
        if (g->nidle < 2 * g->conns.n + 64)
            cap = cap ? 2 * cap : 64;
        idle_ent *next = sf_calloc(cap, sizeof *next);
        for (size_t i = 0; i < g->nidle; i++) {
            idle_ent e = g->idle[(g->idle_head + i) % g->idle_cap];
            if (idle_still(g, e))
                next[n++] = e;
        }
        free(g->idle);
        g->idle = next;
        g->idle_cap = cap;
        g->idle_head = 0;
        /* room is left: kept at its size only when at least 2 * conns + 64
         * entries were there, of which at most conns still stand */
        assert(n < cap);
        g->nidle = n;
    }
    g->idle[(g->idle_head + g->nidle++) % g->idle_cap] = (idle_ent){ wsi, seq };
}

/* Closes the connection that came first of those that have not sent a
 * request yet, to make room for a new one; false when there is none. */
static bool evict_idle(gateway *g)
{
    while (g->nidle > 0) {
        idle_ent e = g->idle[g->idle_head];
        g->idle_head = (g->idle_head + 1) % g->idle_cap;
        g->nidle--;
        if (!idle_still(g, e))
            continue;
        conn_forget(g, e.wsi);
        g->st.conns_evicted++;
        lws_set_timeout(e.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        return true;
    }
    return false;
}

/* LWS_CALLBACK_FILTER_NETWORK_CONNECTION: whether to take the socket fd
 * lws has just accepted (0) or close it at once (1), by the caps; what it
 * decided is counted at SERVER_NEW_CLIENT_INSTANTIATED, in the same turn. */
static int conn_filter(gateway *g, int fd)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    char addr[64] = "";
    memset(&peer, 0, sizeof peer);
    g->admit_addr = 0;
    if (getpeername(fd, (struct sockaddr *)&peer, &len) == 0 && (peer.ss_family == AF_INET || peer.ss_family == AF_INET6)) {
        sockaddr_text(&peer, addr, sizeof addr);
        if (!cd_proxies_has(&g->proxies, (const struct sockaddr *)&peer)) /* a proxy speaks for many */
            g->admit_addr = addr_hash((const struct sockaddr *)&peer);
    }
    const unsigned *n = g->admit_addr != 0 ? addr_count_map_get(&g->per_addr, g->admit_addr) : NULL;
    int why = -1;
    if (n != NULL && *n >= g->st.conns_per_addr_max)
        why = CD__CONN_PER_ADDR;
    else if (g->conns.n >= g->st.conns_max && !evict_idle(g))
        why = CD__CONN_TOTAL;
    g->admitting = why < 0;
    if (why < 0)
        return 0;
    g->st.conns_refused[why]++;
    char fields[64];
    snprintf(fields, sizeof fields, "\"why\":\"%s\"", cd__conn_refusal_names[why]);
    if (why == CD__CONN_PER_ADDR)
        cd_oplog_limited(CD_OPLOG_CONN_REFUSED, addr, fields, "connection from %s closed at once: it has %u open, the "
            "most one address may (--max-connections-per-addr)", addr[0] ? addr : "?", *n);
    else
        cd_oplog_limited(CD_OPLOG_CONN_REFUSED, addr, fields, "connection from %s closed at once: %zu connections "
            "are open, the most this coordinator takes (--max-connections), and none is idle to close instead",
            addr[0] ? addr : "?", g->conns.n);
    return 1;
}

/* LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED: the socket conn_filter took
 * is a connection now; counted until its WSI_DESTROY. */
static void conn_admit(gateway *g, struct lws *wsi)
{
    if (!g->admitting)
        return;
    g->admitting = false;
    conn_rec *r = conn_map_put(&g->conns, wsi_key(wsi), NULL);
    r->addr = g->admit_addr;
    r->seq = ++g->conn_seq;
    r->active = false;
    uint64_t seq = r->seq, addr = r->addr;
    if (addr != 0)
        (*addr_count_map_put(&g->per_addr, addr, NULL))++;
    g->st.conns = g->conns.n;
    idle_push(g, wsi, seq);
}

/* The connection sent a request: it is not closed to make room. */
static void conn_active(gateway *g, struct lws *wsi)
{
    conn_rec *r = conn_map_get(&g->conns, wsi_key(wsi));
    if (r != NULL)
        r->active = true;
}

/* lws's listening socket is readable: if no descriptor is free, lws's
 * accept fails (EMFILE) and leaves the connection queued, and the loop
 * would wake for it again at once, for ever, while the database's
 * reconnects and /health found no descriptor either. Then the spare is let
 * go, the connection taken and closed, and the spare taken again (libuv's
 * and nginx's way); at most SPARE_ROUNDS a turn. */
static void on_listen_ready(uv_poll_t *h, int status, int events)
{
    (void)events;
    gateway *g = h->data;
    if (status < 0 || g == NULL)
        return;
    for (int i = 0; i < SPARE_ROUNDS; i++) {
        if (g->spare_fd < 0)
            g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int probe = g->spare_fd >= 0 ? fcntl(g->spare_fd, F_DUPFD_CLOEXEC, 0) : -1;
        if (probe >= 0) { /* a descriptor is free: lws takes the connection */
            close(probe);
            return;
        }
        if (g->spare_fd >= 0 && errno != EMFILE && errno != ENFILE)
            return;
        if (g->spare_fd >= 0)
            close(g->spare_fd);
        struct sockaddr_storage peer;
        socklen_t len = sizeof peer;
        memset(&peer, 0, sizeof peer);
        int c = accept(g->listen_dup, (struct sockaddr *)&peer, &len); /* closed at once: no flags needed */
        if (c >= 0) {
            char addr[64];
            sockaddr_text(&peer, addr, sizeof addr);
            close(c);
            g->st.conns_refused[CD__CONN_NO_FD]++;
            cd_oplog_limited(CD_OPLOG_CONN_REFUSED, addr, "\"why\":\"no_descriptor\"", "connection from %s closed at "
                "once: no file descriptor is free (RLIMIT_NOFILE; lower --max-connections, or raise the limit)",
                addr[0] ? addr : "?");
        }
        g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (c < 0)
            return;
    }
}

/* The descriptor of the socket listening on port (lws's), or -1. */
static int listen_fd_of(int port)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int found = -1;
    for (struct dirent *e; found < 0 && (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name), on = 0;
        socklen_t olen = sizeof on;
        struct sockaddr_storage a;
        socklen_t alen = sizeof a;
        if (e->d_name[0] == '.' || fd == dirfd(d) ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) != 0 || !on ||
            getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
            continue;
        int p = a.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&a)->sin_port)
              : a.ss_family == AF_INET6   ? ntohs(((struct sockaddr_in6 *)&a)->sin6_port)
                                          : -1;
        if (p == port)
            found = fd;
    }
    closedir(d);
    return found;
}

static void listen_poll_closed(uv_handle_t *h)
{
    int fd = (int)(intptr_t)h->data;
    if (fd >= 0)
        close(fd);
    free(h);
}

/* Watches lws's listening socket for EMFILE (on_listen_ready); without
 * it the caps still hold, only the spare is not used. */
static void spare_start(gateway *g, void *loop)
{
    g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fd = listen_fd_of(lws_get_vhost_listen_port(g->vhost));
    g->listen_dup = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (g->listen_dup < 0)
        return;
    uv_poll_t *h = sf_calloc(1, sizeof *h);
    if (uv_poll_init(loop, h, g->listen_dup) != 0) {
        free(h);
        close(g->listen_dup);
        g->listen_dup = -1;
        return;
    }
    h->data = g;
    uv_poll_start(h, UV_READABLE, on_listen_ready);
    g->listen_poll_h = h;
}

static void spare_stop(gateway *g)
{
    if (g->listen_poll_h != NULL) {
        uv_poll_stop(g->listen_poll_h);
        g->listen_poll_h->data = (void *)(intptr_t)g->listen_dup; /* closed once the loop lets the handle go */
        uv_close((uv_handle_t *)g->listen_poll_h, listen_poll_closed);
        g->listen_poll_h = NULL;
        g->listen_dup = -1;
    }
    if (g->spare_fd >= 0)
        close(g->spare_fd);
    g->spare_fd = -1;
}

/* lws's own lines (an accept that failed, say), through the one logger,
 * one line each, the same line at most once a minute. Loop thread. */
static void lws_emit(int level, const char *line)
{
    static sf_log_limit limit; /* lws logs on the loop thread only */
    char one[512], key[48];
    uint64_t more;
    sf_one_line(one, sizeof one, line);
    snprintf(key, sizeof key, "%.47s", one);
    if (!sf_log_limit_take(&limit, key, rt_mono_ms(), &more))
        return;
    sf_log(level & LLL_ERR ? SF_LOG_WARN : SF_LOG_INFO, "libwebsockets", "%s%s", one,
        more > 0 ? " (repeated)" : "");
}

/* The caps in force: the options', or from RLIMIT_NOFILE. */
static void conn_caps(gateway *g, const cd_gateway_opts *o)
{
    struct rlimit rl;
    uint64_t nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 1u << 20;
    uint64_t reserve = CONN_RESERVE + nofile / 8, total = nofile > reserve + 16 ? nofile - reserve : 16;
    if (total > UINT32_MAX)
        total = UINT32_MAX;
    g->st.conns_max = o->max_connections ? o->max_connections : (unsigned)total;
    unsigned half = g->st.conns_max / 2 ? g->st.conns_max / 2 : 1;
    g->st.conns_per_addr_max = o->max_connections_per_addr ? o->max_connections_per_addr
                             : half < CONN_PER_ADDR ? half : CONN_PER_ADDR;
    sf_log(SF_LOG_DEBUG, NULL, "connections: at most %u at once, %u from one address (RLIMIT_NOFILE %llu)",
        g->st.conns_max, g->st.conns_per_addr_max, (unsigned long long)nofile);
}

/* ---- the Origin of /ws/node ---------------------------------------------------------- */

int cd_origin_canon(const char *text, char *out, size_t cap, sf_error *e)
{
    sf_url u;
    sf_error why;
    if (sf_url_parse(text, &u, &why) != 0)
        return sf_fail(e, CD_ECONFIG, "%s", why.msg);
    if (u.path[0] != '\0' || (strcmp(u.scheme, "http") != 0 && strcmp(u.scheme, "https") != 0))
        return sf_fail(e, CD_ECONFIG, "'%s' is not an origin: http:// or https://, a host and a port, no path", text);
    for (char *c = u.host; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    bool v6 = strchr(u.host, ':') != NULL;
    int n = snprintf(out, cap, "%s://%s%s%s:%d", u.scheme, v6 ? "[" : "", u.host, v6 ? "]" : "", u.port);
    if (n < 0 || (size_t)n >= cap)
        return sf_fail(e, CD_ECONFIG, "'%s' is too long an origin", text);
    return 0;
}

/* Whether a page whose Origin is origin may open /ws/node through a
 * request with this Host header: an origin --node-origin lists, or the
 * coordinator's own, the host and port the request came to (its Host
 * read under the Origin's scheme, so a Host without a port means that
 * scheme's). Either scheme counts as its own: a port serves one of them,
 * so no one else's page has the coordinator's host and port under the
 * other; the native node's libwebsockets writes http://HOST even over TLS;
 * and behind a proxy that ends TLS the coordinator is reached over http
 * by pages that are https. */
static bool origin_allowed(const gateway *g, const char *origin, const char *host)
{
    char canon[CD_ORIGIN_MAX], own_text[CD_ORIGIN_MAX + 16], own[CD_ORIGIN_MAX];
    if (cd_origin_canon(origin, canon, sizeof canon, NULL) != 0)
        return false; /* "null" (a sandboxed page, a file), or not an origin at all */
    for (size_t i = 0; i < g->norigins; i++)
        if (strcmp(canon, g->origins[i]) == 0)
            return true;
    snprintf(own_text, sizeof own_text, "%.*s://%s", (int)strcspn(canon, ":"), canon, host);
    return host[0] != '\0' && cd_origin_canon(own_text, own, sizeof own, NULL) == 0 && strcmp(canon, own) == 0;
}

/* LWS_CALLBACK_HTTP_CONFIRM_UPGRADE of a WebSocket: /ws/node is refused,
 * 403 before the upgrade, to a browser page of an origin not allowed
 * (origin_allowed). A connection with no Origin is no browser's: native
 * nodes, tests. Returns 0 to go on, or lws's return for a refusal. */
static int node_origin_check(gateway *g, struct lws *wsi)
{
    char uri[64] = "", origin[CD_ORIGIN_MAX] = "", host[256] = "";
    if (lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI) < 0 || strcmp(uri, "/ws/node") != 0 ||
        lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) <= 0)
        return 0;
    bool long_origin = lws_hdr_copy(wsi, origin, sizeof origin, WSI_TOKEN_ORIGIN) < 0;
    if (lws_hdr_copy(wsi, host, sizeof host, WSI_TOKEN_HOST) < 0)
        host[0] = '\0';
    if (!long_origin && origin_allowed(g, origin, host))
        return 0;
    char peer[64];
    client_text(g, wsi, peer, sizeof peer);
    sf_log(SF_LOG_WARN, NULL, "/ws/node: refused a connection from %s with Origin %s (Host %s): not this "
        "coordinator's origin, nor one --node-origin lists", peer[0] ? peer : "?", long_origin ? "(too long)" : origin,
        host[0] ? host : "(none)");
    return lws_return_http_status(wsi, HTTP_STATUS_FORBIDDEN,
               "a page of this origin may not run a node here: the coordinator's own pages may, and the origins "
               "simfarm serve --node-origin lists") != 0
        ? -1
        : 1;
}

static void request_release(rt_msg *m)
{
    free(((cd__request *)m)->body);
}

static cd__request *new_request(struct lws *wsi, uint64_t txn, int method, const char *path)
{
    cd__request *r = RT_MSG_NEW(cd__request, M_REQUEST);
    r->hdr.release = request_release;
    r->txn = txn;
    r->method = method;
    snprintf(r->path, sizeof r->path, "%s", path);
    /* lws keeps each argument as a fragment, decoded: they are kept apart
     * by NULs, not joined with '&' again, since a decoded value may hold
     * an '&' ("owner=a%26b") and lws refuses a request with a %00. Arguments
     * that do not fit are not dropped in silence (a filter left out widens
     * an answer): the request is refused. */
    size_t q = 0;
    char none[1];
    for (int i = 0;; i++) {
        /* an empty argument ("a=1&&b=2") is passed over; only a fragment
         * that is not there ends the list (both have length 0) */
        if (lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, i) == 0) {
            if (lws_hdr_copy_fragment(wsi, none, sizeof none, WSI_TOKEN_HTTP_URI_ARGS, i) < 0)
                break;
            continue;
        }
        int n = lws_hdr_copy_fragment(wsi, r->query + q, (int)(sizeof r->query - q), WSI_TOKEN_HTTP_URI_ARGS, i);
        if (n < 0 || (size_t)n >= sizeof r->query - q) {
            r->query_too_long = true;
            break;
        }
        if (strlen(r->query + q) != (size_t)n) {
            r->query_nul = true;
            break;
        }
        q += (size_t)n + 1;
    }
    r->query_len = r->query_too_long || r->query_nul ? 0 : q;
    if (lws_hdr_copy(wsi, r->auth, sizeof r->auth, WSI_TOKEN_HTTP_AUTHORIZATION) < 0)
        r->auth[0] = '\0';
    static const char key[] = "idempotency-key:";
    int klen = lws_hdr_custom_length(wsi, key, (int)sizeof key - 1);
    r->key_bad = klen == 0 || klen >= (int)sizeof r->key - 1; /* given, but empty or too long */
    if (klen < 0 || r->key_bad || lws_hdr_custom_copy(wsi, r->key, (int)sizeof r->key, key, (int)sizeof key - 1) < 0)
        r->key[0] = '\0';
    client_text(lws_context_user(lws_get_context(wsi)), wsi, r->peer, sizeof r->peer);
    return r;
}

/* Hands a request to the gateway actor; a POST always has a body, empty
 * when none came. Its answer may wait on the database, at most
 * CD__STORE_ASKS_MAX times for db_timeout_ms each before the 503: libwebsockets'
 * own 5 s limit for the transaction would close it first. */
static void send_request(gateway *g, struct lws *wsi, cd__request *r)
{
    if (r->method == CD__POST && r->body == NULL) {
        r->body = calloc(1, 1);
        if (r->body == NULL)
            sf_oom(1);
    }
    lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT,
        (int)((CD__STORE_ASKS_MAX * g->db_timeout_ms + 999) / 1000) + ANSWER_SLACK_S);
    rt_send(g->self, &r->hdr);
}

/* What a POST's head says of its body. Returns 0 when it can be read:
 * Content-Length bytes follow, within max_body; or it has no length at all
 * (as `curl -X POST` sends), and then the request has no body but the
 * connection is closed after the answer, since libwebsockets would take
 * what follows for one. Otherwise the status to refuse it with at once
 * (and close), with why: a chunked body (not decoded here), a length that
 * is not a number, one past BODY_DRAIN_FACTOR times max_body. */
static int post_body(const gateway *g, struct lws *wsi, pss *ps, char *why, size_t cap)
{
    char cl[32];
    int n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH);
    ps->close = true;
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0) {
        snprintf(why, cap, "send the body with a Content-Length: chunked bodies are not read");
        return 411;
    }
    if (n <= 0)
        return 0;
    bool digits = n <= 19 && lws_hdr_copy(wsi, cl, sizeof cl, WSI_TOKEN_HTTP_CONTENT_LENGTH) == n;
    for (int i = 0; digits && i < n; i++)
        digits = cl[i] >= '0' && cl[i] <= '9';
    if (!digits) {
        snprintf(why, cap, "Content-Length must be a number of bytes");
        return 400;
    }
    unsigned long long want = strtoull(cl, NULL, 10);
    ps->close = false;
    /* A body somewhat past the limit is read and dropped, then refused
     * (HTTP_BODY_COMPLETION): closing on a client still sending it would
     * reset the connection before it read the 413. */
    ps->too_big = want > g->max_body;
    if (want > (unsigned long long)BODY_DRAIN_FACTOR * g->max_body) {
        ps->close = true;
        snprintf(why, cap, "request body over %zu bytes", g->max_body);
        return 413;
    }
    return 0;
}

static int http_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    pss *ps = user;
    struct lws_context *ctx = lws_get_context(wsi);
    gateway *g = ctx ? lws_context_user(ctx) : NULL;
    uint8_t buf[LWS_PRE + 1024], *start = &buf[LWS_PRE], *p = start, *end = &buf[sizeof buf - 1];

    switch (reason) {
    case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
        return g != NULL ? conn_filter(g, (int)(intptr_t)in) : 0;
    case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
        if (g != NULL)
            conn_admit(g, wsi);
        break;
    case LWS_CALLBACK_WSI_DESTROY: /* to protocols[0] for every wsi; user is its protocol's, not a pss */
        if (g != NULL)
            conn_forget(g, wsi);
        break;
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        /* the vhost's TLS context, kept for SIGHUP's reloads (the wsi is a
         * stand-in that holds the context) */
        if (g != NULL)
            g->ssl_ctx = user;
        return 0;
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        /* WebSockets upgrade HTTP/1.1; HTTP/2 is not served (as over TLS,
         * where ALPN offers http/1.1 only): under it libwebsockets 4.1 cuts
         * answers short. The refusal says so, in HTTP/1.1. */
        if (g != NULL)
            conn_active(g, wsi);
        if (strcmp((const char *)in, "websocket") == 0)
            return g != NULL ? node_origin_check(g, wsi) : -1;
        return lws_return_http_status(wsi, HTTP_STATUS_BAD_REQUEST,
                   "this coordinator speaks HTTP/1.1: send the request without Upgrade: h2c") != 0
            ? -1
            : 1;
    case LWS_CALLBACK_HTTP: {
        memset(ps, 0, sizeof *ps);
        conn_active(g, wsi);
        const char *path = in;
        ps->head = lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0;
        int method = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0          ? CD__POST
                   : lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) > 0      ? CD__DELETE
                   : lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 || ps->head ? CD__GET
                                                                               : 0;
        char file[PATH_MAX];
        if (method == CD__GET && !is_api_path(path) && web_file(g, path, file, sizeof file)) {
            int n = lws_serve_http_file(wsi, file, mime_of(file), NULL, 0);
            return n < 0 || (n > 0 && lws_http_transaction_completed(wsi)) ? -1 : 0;
        }
        ps->txn = txn_open(g, wsi);
        cd__request *r = new_request(wsi, ps->txn, method, path);
        if (method == CD__POST) {
            char why[96];
            int refuse = post_body(g, wsi, ps, why, sizeof why);
            if (refuse != 0) {
                respond_error(g, ps->txn, refuse, why);
                rt_msg_free(&r->hdr);
                return 0;
            }
            if (!ps->close) { /* its body follows */
                ps->req = r;
                return 0;
            }
        }
        send_request(g, wsi, r);
        return 0;
    }
    case LWS_CALLBACK_HTTP_BODY:
        if (len == 0) /* a Content-Length of 0 */
            return 0;
        if (ps->req == NULL || ps->too_big || ps->req->body_len + len > g->max_body) {
            ps->too_big = true;
            return 0;
        }
        {
            cd__request *r = ps->req;
            char *nb = realloc(r->body, r->body_len + len + 1);
            if (nb == NULL)
                sf_oom(r->body_len + len + 1);
            r->body = nb;
            memcpy(r->body + r->body_len, in, len);
            r->body_len += len;
            r->body[r->body_len] = '\0';
        }
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
        cd__request *r = ps->req;
        ps->req = NULL;
        if (r == NULL)
            return 0;
        if (ps->too_big) {
            char msg[96];
            snprintf(msg, sizeof msg, "request body over %zu bytes", g->max_body);
            respond_error(g, ps->txn, 413, msg);
            rt_msg_free(&r->hdr);
            return 0;
        }
        send_request(g, wsi, r);
        return 0;
    }
    case LWS_CALLBACK_HTTP_WRITEABLE: {
        http_txn *s = txn_find(g, ps->txn);
        if (s == NULL || s->status == 0)
            return 0;
        if (lws_add_http_common_headers(wsi, (unsigned)s->status, s->type, s->body_len, &p, end))
            return 1;
        static const char close_hdr[] = "close";
        if (ps->close && lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION, (const unsigned char *)close_hdr,
                             (int)sizeof close_hdr - 1, &p, end))
            return 1;
        if (s->extra[0] != '\0') {
            const char *colon = strchr(s->extra, ':');
            char name[64];
            snprintf(name, sizeof name, "%.*s", colon ? (int)(colon - s->extra + 1) : 0, s->extra);
            const char *value = colon ? colon + 1 + (colon[1] == ' ') : "";
            if (lws_add_http_header_by_name(wsi, (const unsigned char *)name, (const unsigned char *)value,
                    (int)strlen(value), &p, end))
                return 1;
        }
        if (lws_finalize_write_http_header(wsi, start, &p, end))
            return 1;
        size_t blen = ps->head ? 0 : s->body_len;
        int w = 0;
        if (blen > 0) {
            unsigned char *out = malloc(LWS_PRE + blen);
            if (out == NULL)
                sf_oom(LWS_PRE + blen);
            memcpy(out + LWS_PRE, s->body, blen);
            w = lws_write(wsi, out + LWS_PRE, blen, LWS_WRITE_HTTP_FINAL);
            free(out);
        }
        txn_close(g, ps->txn);
        ps->txn = 0;
        if (w != (int)blen || ps->close)
            return -1;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (ps != NULL) {
            if (ps->txn != 0 && g != NULL)
                txn_close(g, ps->txn);
            ps->txn = 0;
            if (ps->req != NULL)
                rt_msg_free(&ps->req->hdr);
            ps->req = NULL;
        }
        break;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

/* ---- /ws/events ------------------------------------------------------------------------ */

static events_conn *evc_find(gateway *g, struct lws *wsi)
{
    for (size_t i = 0; i < g->nevc; i++)
        if (g->evc[i].wsi == wsi)
            return &g->evc[i];
    return NULL;
}

/* The key of wsi's client address, as the node sessions keep theirs. */
static void evc_addr(const gateway *g, struct lws *wsi, uint8_t addr[PR_PK_BYTES])
{
    struct sockaddr_storage client;
    cd_wsi_client(wsi, &g->proxies, &client);
    cd_addr_key((const struct sockaddr *)&client, addr);
}

/* A client the log has moved on past is closed; it reconnects with
 * since= and is sent a snapshot. Its socket may be too full to be told. */
static void evc_behind(events_conn *c)
{
    c->behind = true;
    lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

typedef struct snap {
    char *buf;
    size_t len, cap;
} snap;

static void snap_add(snap *s, const char *text)
{
    size_t n = strlen(text);
    while (s->len + n + 2 > s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->buf = realloc(s->buf, s->cap);
        if (s->buf == NULL)
            sf_oom(s->cap);
    }
    memcpy(s->buf + s->len, text, n + 1);
    s->len += n;
}

static void snap_job(void *ctx, uint64_t job, const char *text)
{
    snap *s = ctx;
    (void)job;
    if (s->buf[s->len - 1] != '[')
        snap_add(s, ",");
    snap_add(s, text);
}

static void snap_node(void *ctx, const cd_node_view *v)
{
    snap *s = ctx;
    char fields[2048];
    cd_node_view_json(v, fields, sizeof fields);
    if (s->buf[s->len - 1] != '[')
        snap_add(s, ",");
    snap_add(s, "{");
    snap_add(s, fields);
    snap_add(s, "}");
}

/* What a client that is new, or too far behind, starts with. */
static void make_snapshot(gateway *g, events_conn *c)
{
    snap s = { NULL, 0, 0 };
    char head[64];
    snprintf(head, sizeof head, "{\"seq\":%" PRIu64 ",\"type\":\"snapshot\",\"jobs\":[", cd_events_last(g->events));
    snap_add(&s, head);
    if (c->job != 0) {
        const char *p = cd_events_progress(g->events, c->job);
        if (p != NULL)
            snap_add(&s, p);
    } else {
        cd_events_each_progress(g->events, snap_job, &s);
    }
    snap_add(&s, "],\"nodes\":[");
    cd_sessions_each(g->nodes, snap_node, &s);
    snap_add(&s, "]}");
    c->snapshot = s.buf;
    c->at = cd_events_last(g->events);
}

/* Writes the snapshot or the client's next event; asks for the next turn
 * while there is more. Returns -1 to close the connection. */
static int evc_write(gateway *g, events_conn *c)
{
    const char *text = c->snapshot;
    size_t n = text != NULL ? strlen(text) : 0;
    uint64_t seq = c->at;
    if (text == NULL) {
        int rc = cd_events_next(g->events, c->at, c->job, &text, &n, &seq);
        c->at = seq; /* past what was passed over too */
        if (rc < 0)
            return -1;
        if (rc == 0)
            return 0;
    }
    unsigned char *out = malloc(LWS_PRE + n);
    if (out == NULL)
        sf_oom(LWS_PRE + n);
    memcpy(out + LWS_PRE, text, n);
    int w = lws_write(c->wsi, out + LWS_PRE, n, LWS_WRITE_TEXT);
    free(out);
    free(c->snapshot);
    c->snapshot = NULL;
    if (w < (int)n)
        return -1;
    if (cd_events_next(g->events, c->at, c->job, &text, &n, &seq) != 0)
        lws_callback_on_writable(c->wsi);
    return 0;
}

static int events_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    (void)user;
    (void)in;
    (void)len;
    struct lws_context *ctx = lws_get_context(wsi);
    gateway *g = ctx ? lws_context_user(ctx) : NULL;
    events_conn *c;

    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
        /* --private: the upgrade only with a ticket (POST /api/events/ticket) */
        char v[40];
        const char *tv = lws_get_urlarg_by_name(wsi, "ticket=", v, sizeof v);
        if (g == NULL || (g->private_reads && (tv == NULL || !cd__api_ticket_take(g->api, tv))))
            return -1;
        /* each client costs its snapshot until it reads it: one address
         * cannot open them without end */
        uint8_t addr[PR_PK_BYTES];
        unsigned held = 0;
        evc_addr(g, wsi, addr);
        for (size_t i = 0; i < g->nevc; i++)
            held += memcmp(g->evc[i].addr, addr, sizeof addr) == 0;
        return held >= EVENTS_PER_ADDRESS ? -1 : 0;
    }
    case LWS_CALLBACK_ESTABLISHED: {
        char uri[64] = "", v[32];
        lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI);
        if (g == NULL || strcmp(uri, "/ws/events") != 0)
            return -1;
        if (g->nevc == g->evc_cap)
            g->evc = sf_grow(g->evc, &g->evc_cap, sizeof *g->evc);
        c = &g->evc[g->nevc++];
        g->st.event_clients = g->nevc;
        memset(c, 0, sizeof *c);
        c->wsi = wsi;
        evc_addr(g, wsi, c->addr);
        const char *jv = lws_get_urlarg_by_name(wsi, "job=", v, sizeof v);
        c->job = jv ? strtoull(jv, NULL, 10) : 0;
        /* a client that saw up to since= reads on from there, if the log
         * still holds what came after; otherwise it starts from a snapshot */
        const char *sv = lws_get_urlarg_by_name(wsi, "since=", v, sizeof v);
        const char *text;
        size_t n;
        uint64_t seq;
        c->at = sv != NULL ? strtoull(sv, NULL, 10) : 0;
        if (sv == NULL || cd_events_next(g->events, c->at, c->job, &text, &n, &seq) < 0)
            make_snapshot(g, c);
        lws_callback_on_writable(wsi);
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
        return 0; /* clients have nothing to say */
    case LWS_CALLBACK_SERVER_WRITEABLE:
        c = evc_find(g, wsi);
        return c == NULL || c->behind ? -1 : evc_write(g, c);
    case LWS_CALLBACK_CLOSED:
        if (g != NULL && (c = evc_find(g, wsi)) != NULL) {
            free(c->snapshot);
            *c = g->evc[--g->nevc];
            g->st.event_clients = g->nevc;
        }
        return 0;
    default:
        return 0;
    }
}

/* Appends an event to the log and sends it to the /ws/events clients that
 * want it. fields may be NULL. */
static void publish(gateway *g, const char *type, uint64_t job, const char *fields)
{
    cd_events_add(g->events, type, job, fields ? fields : "");
    const char *text;
    size_t n;
    uint64_t seq;
    for (size_t i = 0; i < g->nevc; i++) {
        events_conn *c = &g->evc[i];
        if (c->behind)
            continue;
        int rc = cd_events_next(g->events, c->at, c->job, &text, &n, &seq);
        if (rc < 0)
            evc_behind(c);
        else if (rc == 0)
            c->at = seq; /* none of its own to send: passed over, so a filtered client never falls behind */
        else
            lws_callback_on_writable(c->wsi);
    }
}

static void publish_cb(void *ctx, const char *type, uint64_t job, const char *fields)
{
    publish(ctx, type, job, fields);
}

/* ---- the actor --------------------------------------------------------------------------------- */

static void on_event(gateway *g, const cd_event *e)
{
    publish(g, e->type, e->job, e->fields);
    if (strcmp(e->type, "job.finished") != 0)
        return;
    /* Nodes still holding chunks of a job that ended drop them. */
    cd_sessions_cancel_job(g->nodes, e->job, "the job has ended");
    const char *st = e->fields ? strstr(e->fields, "\"state\":\"") : NULL;
    for (int i = 0; st != NULL && i < CD__END_STATES; i++) {
        size_t n = strlen(cd__end_states[i]);
        if (strncmp(st + 9, cd__end_states[i], n) == 0 && st[9 + n] == '"')
            g->st.finished[i]++;
    }
}

/* Says on stderr when the certificate served expires within 30 days (at
 * start, after a reload and once a day), for operators with no alert on
 * simfarm_tls_cert_not_after_seconds. */
static void tls_expiry_check(gateway *g)
{
    if (g->st.tls == NULL)
        return;
    int64_t left = cd_tlscert_not_after(g->st.tls) - (int64_t)time(NULL);
    if (left >= 30 * 86400)
        return;
    char when[64], in[32];
    cd_tlscert_date(cd_tlscert_not_after(g->st.tls), when, sizeof when);
    if (left < 86400)
        snprintf(in, sizeof in, "under a day");
    else
        snprintf(in, sizeof in, "%lld day%s", (long long)(left / 86400), left < 2 * 86400 ? "" : "s");
    sf_log(SF_LOG_WARN, NULL, "TLS: the certificate in %s (%s) expires on %s, in %s: renew it and send SIGHUP",
        g->tls_cert, cd_tlscert_subject(g->st.tls), when, in);
}

static void behaviour(rt_actor *self, rt_msg *m)
{
    gateway *g = rt_state(self);
    switch (m->type) {
    case M_REQUEST:
        cd__api_route(g->api, (cd__request *)m);
        break;
    case M_DIE:
        rt_stop(self);
        break;
    case M_TLS_CHECK:
        tls_expiry_check(g);
        break;
    case M_OPLOG:
        cd_oplog_flush();
        break;
    case CD_MSG_RESULT:
    case RT_MSG_TIMEOUT:
        cd__api_answer(g->api, m);
        break;
    case CD_MSG_EVENT:
        on_event(g, (cd_event *)m);
        break;
    case CD_MSG_STORE_UP:
        if (!g->st.db_up && g->down_ms == 0) {
            sf_logf(SF_LOG_INFO, NULL, "\"event\":\"database_up\"", "database up");
        } else if (!g->st.db_up) {
            char fields[96];
            double away = (double)(rt_mono_ms() - g->down_ms) / 1000.0;
            snprintf(fields, sizeof fields, "\"event\":\"database_up\",\"down_s\":%.1f", away);
            sf_logf(SF_LOG_INFO, NULL, fields, "database up again after %.1f s", away);
        }
        g->st.db_up = true;
        break;
    case CD_MSG_LOCK_LOST:
        g->st.unlocked = true;
        break;
    case CD_MSG_LISTENING:
        g->st.unlocked = false;
        break;
    case CD_MSG_STORE_DOWN:
        if (g->st.db_up) {
            g->down_ms = rt_mono_ms();
            sf_logf(SF_LOG_WARN, NULL, "\"event\":\"database_down\"",
                "database down; requests that need it wait, then get 503 (the store's line before says why)");
        }
        g->st.db_up = false;
        break;
    default:
        break;
    }
}

static void finalize(rt_actor *self)
{
    gateway *g = rt_state(self);
    spare_stop(g);
    if (g->ctx != NULL)
        lws_context_destroy(g->ctx); /* closes every connection; its handles close as the loop runs on */
    g->ctx = NULL;
    conn_map_free(&g->conns);
    addr_count_map_free(&g->per_addr);
    free(g->idle);
    g->ssl_ctx = NULL; /* a SIGHUP while the runtime stops finds nothing to reload */
    cd_sessions_destroy(g->nodes);
    cd_proxies_free(&g->proxies);
    free(g->origins);
    cd_tlscert_free(g->st.tls);
    g->st.tls = NULL;
    for (size_t i = 0; i < g->ntxns; i++)
        free(g->txns[i].body);
    free(g->txns);
    cd__api_destroy(g->api);
    for (size_t i = 0; i < g->nevc; i++)
        free(g->evc[i].snapshot);
    free(g->evc);
    cd_events_destroy(g->events);
    if (g->store != NULL)
        rt_actor_release(g->store);
    if (g->scheduler != NULL)
        rt_actor_release(g->scheduler);
    if (g->burst != NULL)
        rt_actor_release(g->burst);
}

/* Why host:port cannot be bound (an errno: EADDRINUSE, EADDRNOTAVAIL ...),
 * tried as libwebsockets binds it; 0 when it can, or the address does not
 * resolve. */
static int bind_error(const char *host, int port)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (port <= 0 || getaddrinfo(host, service, &hints, &ai) != 0)
        return 0;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0), why = 0, one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0)
            why = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return why;
}

rt_actor *cd_gateway_spawn(rt_system *sys, const cd_gateway_opts *opts, sf_error *e)
{
    void *loop = rt_system_loop(sys);
    if (opts == NULL || opts->store == NULL || opts->scheduler == NULL || loop == NULL || opts->port < 0 ||
        opts->port > 65535) {
        sf_fail(e, CD_EINVAL, "invalid gateway options");
        return NULL;
    }
    if ((opts->tls_cert == NULL) != (opts->tls_key == NULL)) {
        sf_fail(e, CD_ECONFIG, "TLS needs both a certificate and its key");
        return NULL;
    }
    rt_actor_opts o = { .state_size = sizeof(gateway), .pinned = true, .finalize = finalize, .name = "gateway" };
    rt_actor *a = rt_spawn(sys, behaviour, &o);
    if (a == NULL) {
        sf_fail(e, CD_EINVAL, "the runtime is stopping");
        return NULL;
    }
    gateway *g = rt_state(a);
    g->self = a;
    g->store = rt_actor_retain(opts->store);
    g->scheduler = rt_actor_retain(opts->scheduler);
    g->burst = opts->burst != NULL ? rt_actor_retain(opts->burst) : NULL;
    g->max_body = opts->max_body ? opts->max_body : (1u << 20);
    g->db_timeout_ms = opts->db_timeout_ms ? opts->db_timeout_ms : 5000;
    g->private_reads = opts->private_reads;
    g->spare_fd = g->listen_dup = -1;
    conn_caps(g, opts);
    uv_timeval64_t now;
    g->events = cd_events_create(EVENTS_KEPT, uv_gettimeofday(&now) == 0 && now.tv_sec > 0
                                                  ? (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_usec : 0);
    if (opts->web_dir != NULL)
        snprintf(g->web_dir, sizeof g->web_dir, "%s", opts->web_dir);
    cd_proxies_copy(&g->proxies, opts->trusted_proxies);
    if (opts->n_node_origins > 0) {
        g->origins = sf_calloc(opts->n_node_origins, sizeof *g->origins);
        for (size_t i = 0; i < opts->n_node_origins; i++)
            if (cd_origin_canon(opts->node_origins[i], g->origins[g->norigins++], sizeof *g->origins, e) != 0)
                goto fail;
    }
    if (opts->tls_cert != NULL) {
        /* checked here first: lws says only that it could not load them */
        snprintf(g->tls_cert, sizeof g->tls_cert, "%s", opts->tls_cert);
        snprintf(g->tls_key, sizeof g->tls_key, "%s", opts->tls_key);
        if ((g->st.tls = cd_tlscert_load(g->tls_cert, g->tls_key, (int64_t)time(NULL), e)) == NULL)
            goto fail;
    }
    cd_sessions_opts so = { .store = opts->store, .scheduler = opts->scheduler, .open_enrolment = opts->open_enrolment,
        .heartbeat_ms = opts->heartbeat_ms, .publish = publish_cb, .publish_ctx = g, .proxies = &g->proxies };
    g->nodes = cd_sessions_create(sys, &so);
    cd__api_opts ao = { .self = a, .store = g->store, .scheduler = g->scheduler, .burst = g->burst, .nodes = g->nodes,
        .events = g->events, .db_timeout_ms = g->db_timeout_ms, .private_reads = g->private_reads, .stats = &g->st,
        .respond = respond, .respond_ctx = g };
    g->api = cd__api_create(&ao);

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[1] = { loop };
    /* With IPv6 on, libwebsockets binds an IPv4 address such as 127.0.0.1
     * as the wildcard of a dual-stack socket: on only for an IPv6 one. */
    bool v6 = opts->host != NULL && strchr(opts->host, ':') != NULL;
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
        (v6 ? 0 : LWS_SERVER_OPTION_DISABLE_IPV6) | (opts->tls_cert ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0);
    info.foreign_loops = loops;
    info.user = g;
    /* The buffer each read goes into (4 KiB by default): a node's batch of
     * results, or the rest of a refused frame, arrives in a sixteenth of
     * the reads. One per service thread. */
    info.pt_serv_buf_size = 65536;
    lws_set_log_level(LLL_ERR, lws_emit);
    g->ctx = lws_create_context(&info);
    if (g->ctx == NULL) {
        sf_fail(e, CD_EIO, "cannot start libwebsockets on the runtime's loop");
        goto fail;
    }
    info.port = opts->port; /* 0: the system picks a free port */
    info.iface = opts->host ? opts->host : "127.0.0.1";
    info.ssl_cert_filepath = g->st.tls ? g->tls_cert : NULL;
    info.ssl_private_key_filepath = g->st.tls ? g->tls_key : NULL;
    /* HTTP/1.1 only: over HTTP/2 (which browsers and curl take when ALPN
     * offers it) lws 4.1 ends a file from lws_serve_http_file early, cut or
     * empty. Nothing here needs HTTP/2: WebSockets upgrade HTTP/1.1. */
    info.alpn = "http/1.1";
    g->protocols[0] = (struct lws_protocols){ "http", http_cb, sizeof(pss), 4096, 0, NULL, 0 };
    g->protocols[1] = (struct lws_protocols){ CD_NODE_PROTOCOL, cd_session_lws_cb, cd_session_pss_size(), 65536, 0,
        g->nodes, 0 };
    g->protocols[2] = (struct lws_protocols){ EVENTS_PROTOCOL, events_cb, 0, 4096, 0, NULL, 0 };
    info.protocols = g->protocols;
    info.vhost_name = "simfarm";
    /* A port in use is said once, below, in our words: not in
     * libwebsockets' lines about the bind. */
    lws_set_log_level(0, NULL);
    g->vhost = lws_create_vhost(g->ctx, &info);
    lws_set_log_level(LLL_ERR, NULL);
    /* an iface it cannot bind leaves a vhost that listens nowhere */
    if (g->vhost == NULL || lws_get_vhost_listen_port(g->vhost) <= 0) {
        int why = bind_error(info.iface, opts->port);
        if (why == EADDRINUSE)
            sf_fail(e, CD_EIO, "cannot listen on %s:%d: the port is in use (another simfarm up or serve?): stop "
                "that, or listen elsewhere with --listen HOST:PORT (make run LISTEN=HOST:PORT)", info.iface, opts->port);
        else if (why != 0)
            sf_fail(e, CD_EIO, "cannot listen on %s:%d: %s (is it an address of this machine?)", info.iface,
                opts->port, strerror(why));
        else if (opts->tls_cert != NULL)
            sf_fail(e, CD_ETLS, "cannot listen on %s:%d with TLS (is %s a PEM certificate and %s its key?)",
                info.iface, opts->port, opts->tls_cert, opts->tls_key);
        else
            sf_fail(e, CD_EIO, "cannot listen on %s:%d (in use, or not an address of this machine)", info.iface,
                opts->port);
        goto fail;
    }
    if (opts->token_file != NULL && cd__api_token_file(g->api, opts->token_file, e) != 0)
        goto fail;
    spare_start(g, loop);
    rt_send_every(a, OPLOG_FLUSH_MS, M_OPLOG, 0);
    cd_store_subscribe(opts->store, a);
    cd_scheduler_watch(opts->scheduler, a);
    if (g->st.tls != NULL) {
        tls_expiry_check(g);
        rt_send_every(a, 86400 * 1000, M_TLS_CHECK, 0);
    }
    return a;
fail:
    /* Stop it through its own mailbox: the finalizer releases what we set. */
    rt_send(a, rt_msg_new(M_DIE, sizeof(rt_msg)));
    rt_actor_release(a);
    return NULL;
}

int cd_gateway_reload_tls(rt_actor *a, sf_error *e)
{
    gateway *g = rt_state(a);
    char when[64];
    if (g->st.tls == NULL || g->ssl_ctx == NULL)
        return sf_fail(e, CD_ETLS, "no certificate to reload: serving plain http");
    sf_error why;
    cd_tlscert *c = cd_tlscert_load(g->tls_cert, g->tls_key, (int64_t)time(NULL), &why);
    if (c != NULL && cd_tlscert_install(c, g->ssl_ctx, &why) != 0) {
        /* OpenSSL may have taken part of it: the pair served before goes
         * back whole (it went in before, so it goes in again) */
        sf_error again;
        if (cd_tlscert_install(g->st.tls, g->ssl_ctx, &again) != 0)
            sf_log(SF_LOG_WARN, NULL, "TLS: the certificate served before did not go back: %s", again.msg);
        cd_tlscert_free(c);
        c = NULL;
    }
    if (c == NULL) {
        g->st.tls_refused++;
        cd_tlscert_date(cd_tlscert_not_after(g->st.tls), when, sizeof when);
        return sf_fail(e, CD_ETLS, "kept the certificate served (%s, until %s): %s", cd_tlscert_subject(g->st.tls), when,
            why.msg);
    }
    cd_tlscert_free(g->st.tls);
    g->st.tls = c;
    g->st.tls_reloaded++;
    cd_tlscert_date(cd_tlscert_not_after(c), when, sizeof when);
    /* a report, not a failure: the code stays 0 */
    sf_fail(e, 0, "serving the certificate in %s (%s, until %s)", g->tls_cert, cd_tlscert_subject(c), when);
    tls_expiry_check(g);
    return 0;
}

void cd_gateway_save_work(rt_actor *a)
{
    gateway *g = rt_state(a);
    if (g->nodes != NULL)
        cd_sessions_save_all(g->nodes);
}

unsigned cd_gateway_saves_pending(rt_actor *a)
{
    gateway *g = rt_state(a);
    return g->nodes != NULL ? cd_sessions_saves_pending(g->nodes) : 0;
}

void cd_gateway_close_nodes(rt_actor *a, const char *why)
{
    gateway *g = rt_state(a);
    if (g->nodes != NULL)
        cd_sessions_close_all(g->nodes, why);
}

unsigned cd_gateway_node_connections(rt_actor *a)
{
    gateway *g = rt_state(a);
    return g->nodes != NULL ? cd_sessions_count(g->nodes) : 0;
}

int cd_gateway_port(rt_actor *a)
{
    gateway *g = rt_state(a);
    return g->vhost ? lws_get_vhost_listen_port(g->vhost) : -1;
}
