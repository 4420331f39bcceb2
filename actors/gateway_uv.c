/*
 * gateway_uv.c — see gateway.h.
 *
 * lws calls http_cb on the loop thread. A complete request (path, method,
 * body) becomes a message to the gateway actor, which is pinned to the same
 * thread; its answer goes into the session table and lws is asked for a
 * writable callback, which sends it. The table and the lws context are
 * touched only on the loop thread: by the callbacks and by the gateway's
 * behaviour, which never run at the same time.
 */
#include "actors/gateway.h"

#include "actors/jobs.h"
#include "actors/session.h"
#include "actors/store.h"

#include <inttypes.h>
#include <libwebsockets.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define SIMFARM_VERSION "0.1.0"

enum { M_REQUEST = RT_MSG_USER + 0x1200, M_DIE };
enum { GET = 1, POST };

typedef struct request {
    rt_msg hdr;
    uint64_t session;
    int method;
    char path[256];
    char *body;              /* owned; NUL-terminated */
    size_t body_len;
} request;

typedef struct session {
    uint64_t id;
    struct lws *wsi;
    int status;              /* 0 until the answer is ready */
    const char *type;
    char *body;
    size_t body_len;
} session;

typedef struct pending {
    int64_t req;
    uint64_t session;
    int kind;                /* what the answer is for */
} pending;

enum { P_SUBMIT = 1, P_LIST, P_ONE };

typedef struct gateway {
    struct lws_context *ctx;
    struct lws_vhost *vhost;
    rt_actor *self;
    rt_actor *store;
    size_t max_body;
    uint64_t db_timeout_ms;
    bool db_up;
    session *sessions;       /* loop thread only */
    size_t nsessions, sessions_cap;
    uint64_t next_session;
    pending *pend;           /* store requests in flight */
    size_t npend, pend_cap;
    uint64_t requests, by_class[6]; /* metrics: requests by status class 1xx..5xx */
    cd_sessions *sessions_ws;         /* node connections */
    struct lws_protocols protocols[3];
} gateway;

/* lws per-transaction state */
typedef struct pss {
    uint64_t session;
    int method;
    char path[256];
    char *body;
    size_t body_len;
    bool too_big;
} pss;

/* ---- sessions (loop thread) ----------------------------------------------------- */

static session *session_find(gateway *g, uint64_t id)
{
    for (size_t i = 0; i < g->nsessions; i++)
        if (g->sessions[i].id == id)
            return &g->sessions[i];
    return NULL;
}

static uint64_t session_open(gateway *g, struct lws *wsi)
{
    if (g->nsessions == g->sessions_cap) {
        g->sessions = rt_grow(g->sessions, &g->sessions_cap, sizeof *g->sessions);
    }
    session *s = &g->sessions[g->nsessions++];
    memset(s, 0, sizeof *s);
    s->id = ++g->next_session;
    s->wsi = wsi;
    return s->id;
}

static void session_close(gateway *g, uint64_t id)
{
    session *s = session_find(g, id);
    if (s == NULL)
        return;
    free(s->body);
    *s = g->sessions[--g->nsessions];
}

/* Sets the answer of a session and asks lws to write it. An answer for a
 * session that closed meanwhile is dropped. Takes body (malloc'd). */
static void respond(gateway *g, uint64_t id, int status, const char *type, char *body)
{
    session *s = session_find(g, id);
    if (s == NULL) {
        free(body);
        return;
    }
    s->status = status;
    s->type = type;
    s->body = body;
    s->body_len = strlen(body);
    g->requests++;
    if (status >= 100 && status < 600)
        g->by_class[status / 100]++;
    lws_callback_on_writable(s->wsi);
}

static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    if (s == NULL)
        rt_oom((size_t)n + 1);
    va_start(ap, f);
    vsnprintf(s, (size_t)n + 1, f, ap);
    va_end(ap);
    return s;
}

/* A JSON string literal of s (quotes and escapes), malloc'd. */
static char *json_str(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n * 6 + 3), *p = out;
    if (out == NULL)
        rt_oom(n * 6 + 3);
    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *p++ = '\\';
            *p++ = (char)*c;
        } else if (*c < 0x20) {
            p += sprintf(p, "\\u%04x", *c);
        } else {
            *p++ = (char)*c;
        }
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

static void respond_error(gateway *g, uint64_t id, int status, const char *field, const char *msg)
{
    char *m = json_str(msg);
    char *f = field ? json_str(field) : NULL;
    respond(g, id, status, "application/json",
        f ? fmt("{\"error\":%s,\"field\":%s}\n", m, f) : fmt("{\"error\":%s}\n", m));
    free(m);
    free(f);
}

/* ---- lws ------------------------------------------------------------------------------ */

static void request_release(rt_msg *m)
{
    free(((request *)m)->body);
}

static request *new_request(const pss *ps)
{
    request *r = RT_MSG_NEW(request, M_REQUEST);
    r->hdr.release = request_release;
    r->session = ps->session;
    r->method = ps->method;
    memcpy(r->path, ps->path, sizeof r->path);
    return r;
}

static int http_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    pss *ps = user;
    struct lws_context *ctx = lws_get_context(wsi);
    gateway *g = ctx ? lws_context_user(ctx) : NULL;
    uint8_t buf[LWS_PRE + 1024], *start = &buf[LWS_PRE], *p = start, *end = &buf[sizeof buf - 1];

    switch (reason) {
    case LWS_CALLBACK_HTTP: {
        memset(ps, 0, sizeof *ps);
        snprintf(ps->path, sizeof ps->path, "%s", (const char *)in);
        if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0)
            ps->method = POST;
        else if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0)
            ps->method = GET;
        ps->session = session_open(g, wsi);
        if (ps->method == POST)
            return 0; /* the body follows */
        rt_send(g->self, &new_request(ps)->hdr);
        return 0;
    }
    case LWS_CALLBACK_HTTP_BODY:
        if (ps->too_big || ps->body_len + len > g->max_body) {
            ps->too_big = true;
            return 0;
        }
        {
            char *nb = realloc(ps->body, ps->body_len + len + 1);
            if (nb == NULL)
                rt_oom(ps->body_len + len + 1);
            ps->body = nb;
            memcpy(ps->body + ps->body_len, in, len);
            ps->body_len += len;
            ps->body[ps->body_len] = '\0';
        }
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
        if (ps->too_big) {
            char msg[96];
            snprintf(msg, sizeof msg, "request body over %zu bytes", g->max_body);
            respond_error(g, ps->session, 413, NULL, msg);
            free(ps->body);
            ps->body = NULL;
            return 0;
        }
        request *r = new_request(ps);
        r->body = ps->body ? ps->body : calloc(1, 1);
        r->body_len = ps->body_len;
        ps->body = NULL;
        rt_send(g->self, &r->hdr);
        return 0;
    }
    case LWS_CALLBACK_HTTP_WRITEABLE: {
        session *s = session_find(g, ps->session);
        if (s == NULL || s->status == 0)
            return 0;
        if (lws_add_http_common_headers(wsi, (unsigned)s->status, s->type, s->body_len, &p, end) ||
            lws_finalize_write_http_header(wsi, start, &p, end))
            return 1;
        size_t blen = s->body_len;
        unsigned char *out = malloc(LWS_PRE + blen + 1);
        if (out == NULL)
            rt_oom(LWS_PRE + blen + 1);
        memcpy(out + LWS_PRE, s->body, blen);
        int w = lws_write(wsi, out + LWS_PRE, blen, LWS_WRITE_HTTP_FINAL);
        free(out);
        session_close(g, ps->session);
        ps->session = 0;
        if (w != (int)blen)
            return -1;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (ps != NULL) {
            if (ps->session != 0 && g != NULL)
                session_close(g, ps->session);
            ps->session = 0;
            free(ps->body);
            ps->body = NULL;
        }
        break;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}



/* ---- jobs ----------------------------------------------------------------------------------- */

static void track(gateway *g, int64_t req, uint64_t sid, int kind)
{
    if (g->npend == g->pend_cap) {
        g->pend = rt_grow(g->pend, &g->pend_cap, sizeof *g->pend);
    }
    g->pend[g->npend++] = (pending){ req, sid, kind };
}

static void ask_store(gateway *g, cd_query *q, uint64_t sid, int kind)
{
    int64_t req = rt_request(g->self, g->store, &q->hdr, g->db_timeout_ms);
    if (req < 0) {
        respond_error(g, sid, 503, NULL, "the coordinator is stopping");
        return;
    }
    track(g, req, sid, kind);
}

static void submit(gateway *g, request *r)
{
    char field[64], msg[256];
    cd_query *q = cd_job_submission(r->body, r->body_len, field, sizeof field, msg, sizeof msg);
    if (q == NULL) {
        respond_error(g, r->session, 400, field[0] ? field : NULL, msg);
        return;
    }
    ask_store(g, q, r->session, P_SUBMIT);
}

static const char *job_columns =
    "id, owner, kernel, strategy, items, seed, priority, state, spec, "
    "encode(ctx_hash, 'hex') AS ctx_hash, result, created_at, started_at, finished_at";

static void get_jobs(gateway *g, request *r, const char *rest)
{
    char sql[512];
    if (*rest == '\0') {
        snprintf(sql, sizeof sql,
            "SELECT coalesce(json_agg(j ORDER BY j.id DESC), '[]')::text FROM "
            "(SELECT %s FROM jobs ORDER BY id DESC LIMIT 100) j", job_columns);
        ask_store(g, cd_query_new(sql), r->session, P_LIST);
        return;
    }
    char *endp;
    unsigned long long id = strtoull(rest, &endp, 10);
    if (*rest < '0' || *rest > '9' || *endp != '\0' || id == 0 || id > INT64_MAX) {
        respond_error(g, r->session, 404, NULL, "no such job: ids are positive whole numbers");
        return;
    }
    snprintf(sql, sizeof sql, "SELECT row_to_json(j)::text FROM (SELECT %s FROM jobs WHERE id = $1) j",
        job_columns);
    cd_query *q = cd_query_new(sql);
    cd_query_int(q, (int64_t)id);
    ask_store(g, q, r->session, P_ONE);
}

static void metrics(gateway *g, request *r)
{
    rt_system_stats st;
    rt_system_stats_get(rt_actor_system(g->self), &st);
    respond(g, r->session, 200, "text/plain; version=0.0.4",
        fmt("# HELP simfarm_up The coordinator is serving.\n"
            "# TYPE simfarm_up gauge\nsimfarm_up 1\n"
            "# HELP simfarm_database_up The database is reachable and migrated.\n"
            "# TYPE simfarm_database_up gauge\nsimfarm_database_up %d\n"
            "# HELP simfarm_actors Live actors.\n"
            "# TYPE simfarm_actors gauge\nsimfarm_actors %" PRIu64 "\n"
            "# HELP simfarm_actor_messages_total Messages handled by actors.\n"
            "# TYPE simfarm_actor_messages_total counter\nsimfarm_actor_messages_total %" PRIu64 "\n"
            "# HELP simfarm_node_sessions Node connections open.\n"
            "# TYPE simfarm_node_sessions gauge\nsimfarm_node_sessions %u\n"
            "# HELP simfarm_http_responses_total HTTP responses by status class.\n"
            "# TYPE simfarm_http_responses_total counter\n"
            "simfarm_http_responses_total{class=\"2xx\"} %" PRIu64 "\n"
            "simfarm_http_responses_total{class=\"4xx\"} %" PRIu64 "\n"
            "simfarm_http_responses_total{class=\"5xx\"} %" PRIu64 "\n",
            g->db_up, st.actors_live, st.messages, cd_sessions_count(g->sessions_ws), g->by_class[2], g->by_class[4],
            g->by_class[5]));
}

static void route(gateway *g, request *r)
{
    const char *p = r->path;
    if (strcmp(p, "/health") == 0 && r->method == GET) {
        respond(g, r->session, g->db_up ? 200 : 503, "application/json",
            fmt("{\"status\":\"%s\",\"database\":\"%s\",\"version\":\"%s\"}\n", g->db_up ? "ok" : "degraded",
                g->db_up ? "up" : "down", SIMFARM_VERSION));
    } else if (strcmp(p, "/metrics") == 0 && r->method == GET) {
        metrics(g, r);
    } else if (strcmp(p, "/api/jobs") == 0 && r->method == POST) {
        submit(g, r);
    } else if (strncmp(p, "/api/jobs", 9) == 0 && (p[9] == '\0' || p[9] == '/') && r->method == GET) {
        get_jobs(g, r, p[9] == '/' ? p + 10 : "");
    } else if (strncmp(p, "/api/jobs", 9) == 0 || strcmp(p, "/health") == 0 || strcmp(p, "/metrics") == 0) {
        respond_error(g, r->session, 405, NULL, "method not allowed here");
    } else {
        respond_error(g, r->session, 404, NULL, "no such path");
    }
}

static void answer(gateway *g, rt_msg *m)
{
    pending pd = { 0 };
    bool found = false;
    for (size_t i = 0; i < g->npend; i++)
        if (g->pend[i].req == (int64_t)m->req_id) {
            pd = g->pend[i];
            g->pend[i] = g->pend[--g->npend];
            found = true;
            break;
        }
    if (!found)
        return;
    if (m->type == RT_MSG_TIMEOUT) {
        respond_error(g, pd.session, 503, NULL, "the database did not answer in time");
        return;
    }
    cd_result *res = (cd_result *)m;
    if (res->res == NULL) {
        respond_error(g, pd.session, 500, NULL, res->error);
        return;
    }
    switch (pd.kind) {
    case P_SUBMIT:
        respond(g, pd.session, 201, "application/json",
            fmt("{\"id\":%s,\"state\":\"pending\"}\n", PQgetvalue(res->res, 0, 0)));
        break;
    case P_LIST:
        respond(g, pd.session, 200, "application/json", fmt("%s\n", PQgetvalue(res->res, 0, 0)));
        break;
    case P_ONE:
        if (PQntuples(res->res) == 0)
            respond_error(g, pd.session, 404, NULL, "no such job");
        else
            respond(g, pd.session, 200, "application/json", fmt("%s\n", PQgetvalue(res->res, 0, 0)));
        break;
    }
}

/* ---- the actor --------------------------------------------------------------------------------- */

static void behaviour(rt_actor *self, rt_msg *m)
{
    gateway *g = rt_state(self);
    switch (m->type) {
    case M_REQUEST:
        route(g, (request *)m);
        break;
    case M_DIE:
        rt_stop(self);
        break;
    case CD_MSG_RESULT:
    case RT_MSG_TIMEOUT:
        answer(g, m);
        break;
    case CD_MSG_STORE_UP:
        if (!g->db_up)
            fprintf(stderr, "simfarm: database up\n");
        g->db_up = true;
        break;
    case CD_MSG_STORE_DOWN:
        if (g->db_up)
            fprintf(stderr, "simfarm: database down; requests that need it wait, then get 503\n");
        g->db_up = false;
        break;
    default:
        break;
    }
}

static void finalize(rt_actor *self)
{
    gateway *g = rt_state(self);
    if (g->ctx != NULL)
        lws_context_destroy(g->ctx); /* closes every connection; its handles close as the loop runs on */
    cd_sessions_destroy(g->sessions_ws);
    for (size_t i = 0; i < g->nsessions; i++)
        free(g->sessions[i].body);
    free(g->sessions);
    free(g->pend);
    if (g->store != NULL)
        rt_actor_release(g->store);
}

rt_actor *cd_gateway_spawn(rt_system *sys, const cd_gateway_opts *opts, char *err, size_t errlen)
{
    void *loop = rt_system_loop(sys);
    if (opts == NULL || opts->store == NULL || opts->scheduler == NULL || loop == NULL || opts->port < 0 ||
        opts->port > 65535) {
        snprintf(err, errlen, "invalid gateway options");
        return NULL;
    }
    rt_actor_opts o = { .state_size = sizeof(gateway), .pinned = true, .finalize = finalize, .name = "gateway" };
    rt_actor *a = rt_spawn(sys, behaviour, &o);
    if (a == NULL) {
        snprintf(err, errlen, "the runtime is stopping");
        return NULL;
    }
    gateway *g = rt_state(a);
    g->self = a;
    g->store = rt_actor_retain(opts->store);
    g->max_body = opts->max_body ? opts->max_body : (1u << 20);
    g->db_timeout_ms = opts->db_timeout_ms ? opts->db_timeout_ms : 5000;
    cd_sessions_opts so = { .store = opts->store, .scheduler = opts->scheduler, .open_enrolment = opts->open_enrolment };
    g->sessions_ws = cd_sessions_create(sys, &so);

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[1] = { loop };
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
        LWS_SERVER_OPTION_DISABLE_IPV6;
    info.foreign_loops = loops;
    info.user = g;
    lws_set_log_level(LLL_ERR, NULL);
    g->ctx = lws_create_context(&info);
    if (g->ctx == NULL) {
        snprintf(err, errlen, "cannot start libwebsockets on the runtime's loop");
        goto fail;
    }
    info.port = opts->port; /* 0: the system picks a free port */
    info.iface = opts->host ? opts->host : "127.0.0.1";
    g->protocols[0] = (struct lws_protocols){ "http", http_cb, sizeof(pss), 4096, 0, NULL, 0 };
    g->protocols[1] = (struct lws_protocols){ CD_NODE_PROTOCOL, cd_session_lws_cb, cd_session_pss_size(), 65536, 0,
        g->sessions_ws, 0 };
    info.protocols = g->protocols;
    info.vhost_name = "simfarm";
    g->vhost = lws_create_vhost(g->ctx, &info);
    if (g->vhost == NULL) {
        snprintf(err, errlen, "cannot listen on %s:%d (in use, or not an address of this machine)",
            info.iface, opts->port);
        goto fail;
    }
    cd_store_subscribe(opts->store, a);
    return a;
fail:
    /* Stop it through its own mailbox: the finalizer releases what we set. */
    rt_send(a, rt_msg_new(M_DIE, sizeof(rt_msg)));
    rt_actor_release(a);
    return NULL;
}

int cd_gateway_port(rt_actor *a)
{
    gateway *g = rt_state(a);
    return g->vhost ? lws_get_vhost_listen_port(g->vhost) : -1;
}
