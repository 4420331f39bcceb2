/*
 * api.c — the coordinator's HTTP API (docs/api.md; api.h): routing, the
 * store's answers, /health, /metrics, /api/kernels and the /ws/events
 * tickets. Every request the gateway hands over is kept (rt_take) until
 * its answer goes out through the gateway's respond function; the steps
 * that need the database (the token, then the work) go through the store
 * one after another. Tokens are in api_auth.c, jobs in api_jobs.c, nodes
 * in api_nodes.c.
 */
#include "actors/coord/api_int.h"
#include "actors/coord/burst.h"

#include "actors/coord/metrics.h"
#include "actors/coord/oplog.h"
#include "actors/coord/scheduler.h"
#include "base/alloc.h"
#include "base/log.h"
#include "base/version.h"
#include "sim/sim.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cd__end_states[CD__END_STATES] = { "complete", "failed", "cancelled", "expired" };

static void done(cd__request *r)
{
    rt_msg_free(&r->hdr);
}

char *cd__api_error_json(const char *field, const char *msg)
{
    char m[600], f[160];
    cd_json_quote(m, sizeof m, msg);
    return field ? sf_fmt("{\"error\":%s,\"field\":%s}\n", m, cd_json_quote(f, sizeof f, field))
                 : sf_fmt("{\"error\":%s}\n", m);
}

static const char *method_name(int m)
{
    return m == CD__POST ? "POST" : m == CD__DELETE ? "DELETE" : "GET";
}

/* A failed login (401: a path that needs a token, none or a bad one) or a
 * 429: the operator's line, at most one per address a minute (oplog.h). */
static void log_refusal(const cd__request *r, int status)
{
    char fields[400], path[300];
    snprintf(fields, sizeof fields, "\"method\":\"%s\",\"path\":%s,\"status\":%d", method_name(r->method),
        cd_json_quote(path, sizeof path, r->path), status);
    if (status == 401)
        cd_oplog_limited(CD_OPLOG_LOGIN_FAILED, r->peer, fields, "failed API login from %s: %s %s %s",
            r->peer[0] ? r->peer : "?", method_name(r->method), r->path, r->auth[0] ? "with a bad token" : "without a token");
    else
        cd_oplog_limited(CD_OPLOG_RATE_LIMITED, r->peer, fields, "429 to %s for %s %s: too many failed logins from it",
            r->peer[0] ? r->peer : "?", method_name(r->method), r->path);
}

void cd__api_reply(cd__api *api, cd__request *r, int status, const char *type, char *body, const char *extra)
{
    if (status == 401 || status == 429) /* every 401 and 429 the API gives is an authentication's */
        log_refusal(r, status);
    api->o.respond(api->o.respond_ctx, r->txn, status, type, body, extra);
    done(r);
}

void cd__api_fail(cd__api *api, cd__request *r, int status, const char *field, const char *msg)
{
    cd__api_reply(api, r, status, "application/json", cd__api_error_json(field, msg), NULL);
}

void cd__api_ok(cd__api *api, cd__request *r, int status, char *body)
{
    cd__api_reply(api, r, status, "application/json", body, NULL);
}

void cd__api_ask(cd__api *api, cd__request *r, cd_query *q, int kind)
{
    int64_t req = rt_request(api->o.self, api->o.store, &q->hdr, api->o.db_timeout_ms);
    if (req < 0) {
        if (r != NULL)
            cd__api_fail(api, r, 503, NULL, "the coordinator is stopping");
        return;
    }
    if (api->npend == api->pend_cap)
        api->pend = sf_grow(api->pend, &api->pend_cap, sizeof *api->pend);
    api->pend[api->npend++] = (cd__api_pending){ req, r ? r->txn : 0, kind, r };
}

/* ---- query strings ---------------------------------------------------------------------- */

/* The value of the first argument called name in r->query (the decoded
 * arguments, each NUL-terminated: "a=1\0b=x&y\0"), or NULL. */
const char *cd__api_arg(const cd__request *r, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (const char *p = r->query; p < r->query + r->query_len; p += strlen(p) + 1)
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            snprintf(out, cap, "%s", p + n + 1);
            return out;
        }
    return NULL;
}

/* A positive id from text; 0 when it is not one. */
uint64_t cd__api_parse_id(const char *s)
{
    char *end;
    if (*s < '0' || *s > '9')
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    return *end != '\0' || errno != 0 || v > INT64_MAX ? 0 : (uint64_t)v;
}

/* The job id in /api/jobs/{id}[/...]; 0 when it is not one. */
uint64_t cd__api_job_id(const cd__request *r)
{
    char idtext[32];
    snprintf(idtext, sizeof idtext, "%.*s", (int)strcspn(r->path + 10, "/"), r->path + 10);
    return cd__api_parse_id(idtext);
}

bool cd__api_one_of(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return true;
    return false;
}

/* The query's limit (1 to 1000) into *out, left as it is when there is
 * none. Returns false, having answered 400, for a bad one. */
bool cd__api_arg_limit(cd__api *api, cd__request *r, int64_t *out)
{
    char limit[16];
    if (cd__api_arg(r, "limit", limit, sizeof limit) == NULL)
        return true;
    uint64_t v = cd__api_parse_id(limit);
    if (v < 1 || v > 1000) {
        cd__api_fail(api, r, 400, "limit", "must be a whole number from 1 to 1000");
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* ---- routing ---------------------------------------------------------------------------------- */

/* Seconds of ms, as /health writes them; "null" for a negative ms. */
static char *seconds(char *out, size_t cap, int64_t ms)
{
    if (ms < 0)
        snprintf(out, cap, "null");
    else
        snprintf(out, cap, "%.1f", (double)ms / 1000.0);
    return out;
}

/* 200 while the database is up, the coordinator's lock held (no earlier
 * coordinator's sessions being waited for), the store takes queries and
 * the journal's writes keep up; 503 while the database is away (requests
 * that need it wait, then fail), while the lock is not held or is being
 * fenced (no work is handed out), while the backlog is full (writes are
 * refused), or while the journal's writes fail or the database is behind
 * with them (no work is handed out), with the backlog's and the journal's
 * gauges either way. */
static void health(cd__api *api, cd__request *r)
{
    cd_store_backlog b;
    cd_store_backlog_get(api->o.store, &b);
    cd_scheduler_stats ss;
    cd_scheduler_stats_get(api->o.scheduler, &ss);
    bool failing = ss.failing_ms >= 0;
    bool held = api->o.stats->db_up && !api->o.stats->unlocked;
    bool ok = held && b.fence_waiting == 0 && !b.refusing && !failing && !ss.behind;
    char ago[32], failing_s[32], oldest_s[32], last_error[600] = "null";
    if (failing)
        cd_json_quote(last_error, sizeof last_error, ss.last_error);
    cd__api_reply(api, r, ok ? 200 : 503, "application/json",
        sf_fmt("{\"status\":\"%s\",\"database\":\"%s\",\"lock\":\"%s\",\"fence_waiting\":%u,\"version\":\"%s\","
               "\"database_unreachable_s\":%s,"
               "\"backlog\":{\"state\":\"%s\",\"queries\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"limit_bytes\":%" PRIu64
               ",\"refused\":%" PRIu64 "},"
               "\"journal\":{\"state\":\"%s\",\"retrying\":%" PRIu64 ",\"failing_s\":%s,\"last_error\":%s,"
               "\"oldest_write_s\":%s}}\n",
            b.refusing ? "refusing" : ok ? "ok" : "degraded", api->o.stats->db_up ? "up" : "down",
            b.fence_waiting > 0 ? "fencing" : held ? "held" : "not held", b.fence_waiting, SF_VERSION,
            seconds(ago, sizeof ago, b.unreachable_ms), b.refusing ? "refusing" : "accepting", b.queries, b.bytes,
            b.limit, b.refused, failing ? "failing" : ss.behind ? "behind" : "ok", ss.writes_retrying,
            seconds(failing_s, sizeof failing_s, ss.failing_ms), last_error,
            seconds(oldest_s, sizeof oldest_s, (int64_t)ss.oldest_write_ms)),
        NULL);
}

/* a then b in a new string; frees both */
static char *cat(char *a, char *b)
{
    char *ab = sf_fmt("%s%s", a, b);
    free(a);
    free(b);
    return ab;
}

/* Nodes online by tier and backend kind (PR_BACKEND_* order). */
enum { NODE_TIERS = 4, NODE_KINDS = 4 };
static const char *const node_tiers[NODE_TIERS] = { "own", "team", "community", "public" };
static const char *const node_kinds[NODE_KINDS] = { "cpu", "opencl", "cuda", "wasm" };

typedef struct node_counts {
    unsigned n[NODE_TIERS][NODE_KINDS];
} node_counts;

static void count_node(void *ctx, const cd_node_view *v)
{
    node_counts *nc = ctx;
    for (int t = 0; t < NODE_TIERS; t++)
        if (strcmp(v->tier, node_tiers[t]) == 0)
            for (int k = 0; k < NODE_KINDS; k++)
                nc->n[t][k] += (v->backend_kinds >> k) & 1u;
}

/* The work the farm does: jobs, claims, chunk results (sessions, loop
 * thread) and the ledger's figures (the scheduler's last sweep). */
static char *work_metrics(cd__api *api)
{
    cd_scheduler_stats ss;
    cd_scheduler_stats_get(api->o.scheduler, &ss);
    cd_sessions_stats ns;
    cd_sessions_stats_get(api->o.nodes, &ns);
    static const char *const outcome[CD_RESULT_KINDS] = { "accepted", "idempotent", "conflict", "stale", "invalid",
        "unanswered", "malformed" };
    char *m = sf_fmt("# HELP simfarm_jobs_running Unfinished jobs the scheduler holds.\n"
                     "# TYPE simfarm_jobs_running gauge\nsimfarm_jobs_running %" PRIu64 "\n"
                     "# HELP simfarm_claims_in_flight Chunks handed out to nodes and not yet answered.\n"
                     "# TYPE simfarm_claims_in_flight gauge\nsimfarm_claims_in_flight %" PRIu64 "\n"
                     "# HELP simfarm_claims_reclaimed_total Claims taken back, their ranges handed out again: "
                     "their lease ran out, their node went away, or their node stopped listing them (the chunk "
                     "failed there).\n"
                     "# TYPE simfarm_claims_reclaimed_total counter\n"
                     "simfarm_claims_reclaimed_total{why=\"lease\"} %" PRIu64 "\n"
                     "simfarm_claims_reclaimed_total{why=\"node_gone\"} %" PRIu64 "\n"
                     "simfarm_claims_reclaimed_total{why=\"given_back\"} %" PRIu64 "\n"
                     "# HELP simfarm_journal_conflicts_total Journal records at odds with others: accepts not "
                     "written because the row of their first item holds another count or result (insert), records "
                     "a job's restore skipped because they overlap others (restore).\n"
                     "# TYPE simfarm_journal_conflicts_total counter\n"
                     "simfarm_journal_conflicts_total{where=\"insert\"} %" PRIu64 "\n"
                     "simfarm_journal_conflicts_total{where=\"restore\"} %" PRIu64 "\n"
                     "# HELP simfarm_journal_writes_failed_total Journal writes (INSERTs, the ends of jobs) the "
                     "database answered with an error, or did not answer; each is sent again until it commits.\n"
                     "# TYPE simfarm_journal_writes_failed_total counter\nsimfarm_journal_writes_failed_total %" PRIu64
                     "\n"
                     "# HELP simfarm_journal_writes_retrying Journal writes that failed and are not committed yet.\n"
                     "# TYPE simfarm_journal_writes_retrying gauge\nsimfarm_journal_writes_retrying %" PRIu64 "\n"
                     "# HELP simfarm_journal_failing Journal writes fail: no work is handed out until they succeed.\n"
                     "# TYPE simfarm_journal_failing gauge\nsimfarm_journal_failing %d\n"
                     "# HELP simfarm_journal_behind The database is behind with the journal's writes: no work is "
                     "handed out until it catches up.\n"
                     "# TYPE simfarm_journal_behind gauge\nsimfarm_journal_behind %d\n"
                     "# HELP simfarm_items_accepted_total Items of the chunk results accepted.\n"
                     "# TYPE simfarm_items_accepted_total counter\nsimfarm_items_accepted_total %" PRIu64 "\n"
                     "# HELP simfarm_node_sessions_cut_off_total Node sessions closed for abuse.\n"
                     "# TYPE simfarm_node_sessions_cut_off_total counter\nsimfarm_node_sessions_cut_off_total %" PRIu64
                     "\n"
                     "# HELP simfarm_node_connections_refused_total Node connections refused while their address or "
                     "key was penalised.\n"
                     "# TYPE simfarm_node_connections_refused_total counter\n"
                     "simfarm_node_connections_refused_total %" PRIu64 "\n"
                     "# HELP simfarm_chunk_results_total Signed chunk results by what became of them.\n"
                     "# TYPE simfarm_chunk_results_total counter\n",
        ss.jobs, ss.claims, ss.expired, ss.released, ss.given_back, ss.conflicts_written, ss.conflicts_restored,
        ss.writes_failed, ss.writes_retrying, ss.failing_ms >= 0, ss.behind ? 1 : 0, ns.items_accepted,
        ns.cut_off, ns.refused);
    for (int i = 0; i < CD_RESULT_KINDS; i++)
        m = cat(m, sf_fmt("simfarm_chunk_results_total{outcome=\"%s\"} %" PRIu64 "\n", outcome[i], ns.results[i]));
    m = cat(m, sf_fmt("# HELP simfarm_checks_total Spot-checks decided since the start: a node of another owner "
                      "computed an accepted range again to the same bytes (passed), or a result was proven wrong "
                      "(failed), or no node of another owner took it in time (abandoned).\n"
                      "# TYPE simfarm_checks_total counter\n"
                      "simfarm_checks_total{outcome=\"passed\"} %" PRIu64 "\n"
                      "simfarm_checks_total{outcome=\"failed\"} %" PRIu64 "\n"
                      "simfarm_checks_total{outcome=\"abandoned\"} %" PRIu64 "\n"
                      "# HELP simfarm_nodes_quarantined_total Nodes quarantined since the start: a check proved a "
                      "result of theirs wrong, or they sent too many malformed results.\n"
                      "# TYPE simfarm_nodes_quarantined_total counter\nsimfarm_nodes_quarantined_total %" PRIu64 "\n",
                   ss.checks_passed, ss.checks_failed, ss.checks_abandoned, ss.quarantined));
    m = cat(m, sf_fmt("# HELP simfarm_jobs_finished_total Jobs ended since the start, by state.\n"
                      "# TYPE simfarm_jobs_finished_total counter\n"));
    for (int i = 0; i < CD__END_STATES; i++)
        m = cat(m, sf_fmt("simfarm_jobs_finished_total{state=\"%s\"} %" PRIu64 "\n", cd__end_states[i],
                       api->o.stats->finished[i]));
    sf_str b = SF_STR_INIT;
    sf_str_catf(&b, "# HELP simfarm_jobs Unfinished jobs: pending (not taken in yet, or no chunk handed out yet in "
                    "this coordinator's run) and running (chunks handed out).\n"
                    "# TYPE simfarm_jobs gauge\nsimfarm_jobs{state=\"pending\"} %" PRIu64 "\n"
                    "simfarm_jobs{state=\"running\"} %" PRIu64 "\n", ss.jobs_pending, ss.jobs_started);
    static const char *const kout[CD_KERNEL_OUTCOMES] = { "accepted", "idempotent", "conflict", "stale" };
    sf_str_cat(&b, "# HELP simfarm_kernel_chunk_results_total Chunk results the ledger answered, by kernel and "
                   "outcome.\n# TYPE simfarm_kernel_chunk_results_total counter\n");
    for (size_t k = 0; k < CD_KERNEL_SLOTS && sim_kernel_at(k) != NULL; k++)
        for (int o = 0; o < CD_KERNEL_OUTCOMES; o++)
            sf_str_catf(&b, "simfarm_kernel_chunk_results_total{kernel=\"%s\",outcome=\"%s\"} %" PRIu64 "\n",
                sim_kernel_name(sim_kernel_at(k)), kout[o], ss.kernel_results[k][o]);
    sf_str_cat(&b, "# HELP simfarm_kernel_items_accepted_total Items of the accepted chunk results, by kernel.\n"
                   "# TYPE simfarm_kernel_items_accepted_total counter\n");
    for (size_t k = 0; k < CD_KERNEL_SLOTS && sim_kernel_at(k) != NULL; k++)
        sf_str_catf(&b, "simfarm_kernel_items_accepted_total{kernel=\"%s\"} %" PRIu64 "\n",
            sim_kernel_name(sim_kernel_at(k)), ss.kernel_items[k]);
    /* nodes online by tier and by each backend kind they have */
    node_counts nc;
    memset(&nc, 0, sizeof nc);
    cd_sessions_each(api->o.nodes, count_node, &nc);
    sf_str_cat(&b, "# HELP simfarm_nodes_online Nodes online by tier and backend (a node with a CPU and a GPU counts "
                   "under both).\n# TYPE simfarm_nodes_online gauge\n");
    for (int t = 0; t < NODE_TIERS; t++)
        for (int k = 0; k < NODE_KINDS; k++)
            sf_str_catf(&b, "simfarm_nodes_online{tier=\"%s\",backend=\"%s\"} %u\n", node_tiers[t], node_kinds[k],
                nc.n[t][k]);
    m = cat(m, sf_str_take(&b));
    return m;
}

static void metrics(cd__api *api, cd__request *r)
{
    rt_system_stats st;
    rt_system_stats_get(rt_actor_system(api->o.self), &st);
    cd_store_backlog b;
    cd_store_backlog_get(api->o.store, &b);
    char *m = sf_fmt("# HELP simfarm_up The coordinator is serving.\n"
               "# TYPE simfarm_up gauge\nsimfarm_up 1\n"
               "# HELP simfarm_database_up The database is reachable and migrated.\n"
               "# TYPE simfarm_database_up gauge\nsimfarm_database_up %d\n"
               "# HELP simfarm_coordinator_lock_held The coordinator holds its database's lock and hands out work.\n"
               "# TYPE simfarm_coordinator_lock_held gauge\nsimfarm_coordinator_lock_held %d\n"
               "# HELP simfarm_actors Live actors.\n"
               "# TYPE simfarm_actors gauge\nsimfarm_actors %" PRIu64 "\n"
               "# HELP simfarm_actor_messages_total Messages handled by actors.\n"
               "# TYPE simfarm_actor_messages_total counter\nsimfarm_actor_messages_total %" PRIu64 "\n"
               "# HELP simfarm_node_sessions Node connections open.\n"
               "# TYPE simfarm_node_sessions gauge\nsimfarm_node_sessions %u\n"
               "# HELP simfarm_event_clients Connections on /ws/events.\n"
               "# TYPE simfarm_event_clients gauge\nsimfarm_event_clients %zu\n"
               "# HELP simfarm_events_total Events published on /ws/events since the start.\n"
               "# TYPE simfarm_events_total counter\nsimfarm_events_total %" PRIu64 "\n"
               "# HELP simfarm_http_responses_total HTTP responses by status class.\n"
               "# TYPE simfarm_http_responses_total counter\n"
               "simfarm_http_responses_total{class=\"2xx\"} %" PRIu64 "\n"
               "simfarm_http_responses_total{class=\"4xx\"} %" PRIu64 "\n"
               "simfarm_http_responses_total{class=\"5xx\"} %" PRIu64 "\n"
               "# HELP simfarm_db_backlog_queries Queries the coordinator holds for the database.\n"
               "# TYPE simfarm_db_backlog_queries gauge\nsimfarm_db_backlog_queries %" PRIu64 "\n"
               "# HELP simfarm_db_backlog_bytes Bytes of SQL and parameters of those queries.\n"
               "# TYPE simfarm_db_backlog_bytes gauge\nsimfarm_db_backlog_bytes %" PRIu64 "\n"
               "# HELP simfarm_db_backlog_limit_bytes The bound on simfarm_db_backlog_bytes.\n"
               "# TYPE simfarm_db_backlog_limit_bytes gauge\nsimfarm_db_backlog_limit_bytes %" PRIu64 "\n"
               "# HELP simfarm_db_backlog_refusing New queries are refused: the backlog is full.\n"
               "# TYPE simfarm_db_backlog_refusing gauge\nsimfarm_db_backlog_refusing %d\n"
               "# HELP simfarm_db_backlog_refused_total Queries refused because the backlog was full.\n"
               "# TYPE simfarm_db_backlog_refused_total counter\nsimfarm_db_backlog_refused_total %" PRIu64 "\n"
               "# HELP simfarm_database_unreachable_seconds Seconds since the database was last reachable "
               "(0 while up, -1 if it never was).\n"
               "# TYPE simfarm_database_unreachable_seconds gauge\nsimfarm_database_unreachable_seconds %.1f\n"
               "# HELP simfarm_db_fence_waiting_sessions Sessions of an earlier coordinator this one waits to end "
               "before it reads the journal.\n"
               "# TYPE simfarm_db_fence_waiting_sessions gauge\nsimfarm_db_fence_waiting_sessions %u\n",
            api->o.stats->db_up, api->o.stats->db_up && !api->o.stats->unlocked, st.actors_live, st.messages, cd_sessions_count(api->o.nodes), api->o.stats->event_clients,
            cd_events_count(api->o.events),
            api->o.stats->by_class[2], api->o.stats->by_class[4], api->o.stats->by_class[5], b.queries, b.bytes, b.limit, b.refusing ? 1 : 0,
            b.refused, b.unreachable_ms < 0 ? -1.0 : (double)b.unreachable_ms / 1000.0, b.fence_waiting);
    m = cat(m, work_metrics(api));
    const cd__gw_stats *g = api->o.stats;
    sf_str cb = SF_STR_INIT;
    sf_str_catf(&cb, "# HELP simfarm_connections Connections open (HTTP and WebSocket).\n"
                    "# TYPE simfarm_connections gauge\nsimfarm_connections %" PRIu64 "\n"
                    "# HELP simfarm_connections_max The most connections taken at once (--max-connections).\n"
                    "# TYPE simfarm_connections_max gauge\nsimfarm_connections_max %u\n"
                    "# HELP simfarm_connections_per_address_max The most connections from one address "
                    "(--max-connections-per-addr).\n"
                    "# TYPE simfarm_connections_per_address_max gauge\nsimfarm_connections_per_address_max %u\n"
                    "# HELP simfarm_connections_refused_total Connections closed at once: over the total cap with "
                    "none idle to close instead, over their address's cap, or no file descriptor free.\n"
                    "# TYPE simfarm_connections_refused_total counter\n",
        g->conns, g->conns_max, g->conns_per_addr_max);
    for (int i = 0; i < CD__CONN_REFUSALS; i++)
        sf_str_catf(&cb, "simfarm_connections_refused_total{why=\"%s\"} %" PRIu64 "\n", cd__conn_refusal_names[i],
            g->conns_refused[i]);
    sf_str_catf(&cb, "# HELP simfarm_connections_evicted_total Connections that had sent no request closed to make "
                    "room at the total cap.\n# TYPE simfarm_connections_evicted_total counter\n"
                    "simfarm_connections_evicted_total %" PRIu64 "\n", g->conns_evicted);
    cd_metrics_text(&cb);
    m = cat(m, sf_str_take(&cb));
    if (api->o.stats->tls != NULL)
        m = cat(m, sf_fmt("# HELP simfarm_tls_cert_not_after_seconds When the TLS certificate served expires "
                          "(Unix time).\n"
                          "# TYPE simfarm_tls_cert_not_after_seconds gauge\nsimfarm_tls_cert_not_after_seconds %" PRId64
                          "\n"
                          "# HELP simfarm_tls_reloads_total Reloads of the TLS certificate (SIGHUP) by result.\n"
                          "# TYPE simfarm_tls_reloads_total counter\n"
                          "simfarm_tls_reloads_total{result=\"done\"} %" PRIu64 "\n"
                          "simfarm_tls_reloads_total{result=\"refused\"} %" PRIu64 "\n",
                       cd_tlscert_not_after(api->o.stats->tls), api->o.stats->tls_reloaded, api->o.stats->tls_refused));
    if (api->o.burst != NULL) {
        sf_str bb = SF_STR_INIT;
        cd_burst_metrics(api->o.burst, &bb);
        m = cat(m, sf_str_take(&bb));
    }
    cd__api_reply(api, r, 200, "text/plain; version=0.0.4", m, NULL);
}

/* GET /api/burst: the burst actor's last decision and nodes. */
static void burst_status(cd__api *api, cd__request *r)
{
    if (api->o.burst == NULL) {
        cd__api_fail(api, r, 404, NULL, "this coordinator runs no burst actor (serve --burst)");
        return;
    }
    sf_str b = SF_STR_INIT;
    cd_burst_status_json(api->o.burst, &b);
    sf_str_cat(&b, "\n");
    cd__api_ok(api, r, 200, sf_str_take(&b));
}

/* The kernels and their parameters, from the tables the kernels' parsers
 * check against, and the strategies this coordinator runs. */
static void kernels(cd__api *api, cd__request *r)
{
    size_t len = 0;
    sim_kernels_json(NULL, 0, &len);
    char *desc = malloc(len + 1);
    if (desc == NULL)
        sf_oom(len + 1);
    if (sim_kernels_json(desc, len + 1, &len) != 0) {
        free(desc);
        cd__api_fail(api, r, 500, NULL, "the kernels' description does not fit its buffer");
        return;
    }
    cd__api_ok(api, r, 200, sf_fmt("{\"strategies\":[\"single\",\"tournament\",\"stat_weights\"],\"kernels\":%s}\n", desc));
    free(desc);
}

/* ---- /ws/events tickets ------------------------------------------------------------------------ */

/* POST /api/events/ticket: a ticket that opens one /ws/events connection
 * within CD__TICKET_MS (ws/events?ticket=...), for a browser, which cannot
 * send its token with a WebSocket. The oldest ticket makes room. */
static void events_ticket(cd__api *api, cd__request *r)
{
    uint64_t now = rt_mono_ms();
    cd__ticket *t = &api->tickets[0];
    for (size_t i = 0; i < CD__TICKETS; i++) {
        if (api->tickets[i].expires_ms <= now) {
            t = &api->tickets[i];
            break;
        }
        if (api->tickets[i].expires_ms < t->expires_ms)
            t = &api->tickets[i];
    }
    unsigned char raw[16];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(t->hex, sizeof t->hex, raw, sizeof raw);
    t->expires_ms = now + CD__TICKET_MS;
    cd__api_ok(api, r, 201, sf_fmt("{\"ticket\":\"%s\",\"expires_in_s\":%d}\n", t->hex, CD__TICKET_MS / 1000));
}

bool cd__api_ticket_take(cd__api *api, const char *hex)
{
    uint64_t now = rt_mono_ms();
    if (strlen(hex) != 32)
        return false;
    for (size_t i = 0; i < CD__TICKETS; i++) {
        cd__ticket *t = &api->tickets[i];
        if (t->expires_ms > now && sodium_memcmp(t->hex, hex, 32) == 0) {
            t->expires_ms = 0; /* once */
            return true;
        }
    }
    return false;
}

/* After authentication (when needed): the work itself. */
void cd__api_dispatch(cd__api *api, cd__request *r)
{
    const char *p = r->path;
    uint64_t id;
    if (strcmp(p, "/api/jobs") == 0) {
        if (r->method == CD__POST)
            cd__api_submit(api, r);
        else
            cd__api_list_jobs(api, r);
    } else if (strncmp(p, "/api/jobs/", 10) == 0) {
        const char *rest = p + 10 + strcspn(p + 10, "/");
        if ((id = cd__api_job_id(r)) == 0)
            cd__api_fail(api, r, 404, NULL, "no such job: ids are positive whole numbers");
        else if (strcmp(rest, "/cancel") == 0)
            cd__api_cancel_job(api, r, id);
        else if (strcmp(rest, "/convergence") == 0)
            cd__api_convergence(api, r, id);
        else
            cd__api_one_job(api, r, id);
    } else if (strcmp(p, "/api/nodes") == 0) {
        cd__api_ask_nodes(api, r, 0);
    } else if (strcmp(p, "/api/nodes/prune") == 0) {
        cd__api_prune_nodes(api, r);
    } else if (strncmp(p, "/api/nodes/", 11) == 0) {
        char idtext[32];
        size_t n = strcspn(p + 11, "/");
        snprintf(idtext, sizeof idtext, "%.*s", (int)n, p + 11);
        if ((id = n < sizeof idtext ? cd__api_parse_id(idtext) : 0) == 0)
            cd__api_fail(api, r, 404, NULL, "no such node: ids are positive whole numbers");
        else if (strcmp(p + 11 + n, "/revoke") == 0)
            cd__api_revoke_node(api, r, id);
        else if (r->method == CD__DELETE)
            cd__api_remove_node(api, r, id);
        else
            cd__api_ask_nodes(api, r, id);
    } else if (strcmp(p, "/api/kernels") == 0) {
        kernels(api, r);
    } else if (strcmp(p, "/api/burst") == 0) {
        burst_status(api, r);
    } else if (strcmp(p, "/api/events/ticket") == 0) {
        events_ticket(api, r);
    } else if (strcmp(p, "/metrics") == 0) {
        metrics(api, r);
    } else if (strcmp(p, "/api/tokens") == 0) {
        if (r->method == CD__POST)
            cd__api_create_token(api, r);
        else
            cd__api_list_tokens(api, r);
    } else if (strncmp(p, "/api/tokens/", 12) == 0) {
        if ((id = cd__api_parse_id(p + 12)) == 0)
            cd__api_fail(api, r, 404, NULL, "no such token: ids are positive whole numbers");
        else
            cd__api_revoke_token(api, r, id);
    } else {
        cd__api_fail(api, r, 404, NULL, "no such path");
    }
}

/* Which method each path takes, and whether it needs a token. Returns 0
 * for an unknown path, -1 for a known path with the wrong method. */
static int allowed(const cd__request *r, bool *needs_token)
{
    const char *p = r->path;
    int m = r->method;
    *needs_token = m != CD__GET;
    if (strcmp(p, "/api/nodes/prune") == 0)
        return m == CD__POST ? 1 : -1;
    if (strcmp(p, "/api/burst") == 0)
        return m == CD__GET ? 1 : -1;
    if (strncmp(p, "/api/nodes/", 11) == 0) {
        const char *slash = strchr(p + 11, '/');
        if (slash == NULL)
            return m == CD__GET || m == CD__DELETE ? 1 : -1;
        return strcmp(slash, "/revoke") != 0 ? 0 : m == CD__POST ? 1 : -1;
    }
    if (strcmp(p, "/health") == 0 || strcmp(p, "/metrics") == 0 || strcmp(p, "/api/nodes") == 0 ||
        strcmp(p, "/api/kernels") == 0)
        return m == CD__GET ? 1 : -1;
    if (strcmp(p, "/api/jobs") == 0)
        return m == CD__GET || m == CD__POST ? 1 : -1;
    if (strncmp(p, "/api/jobs/", 10) == 0) {
        const char *slash = strchr(p + 10, '/');
        if (slash == NULL)
            return m == CD__GET ? 1 : -1;
        if (strcmp(slash, "/convergence") == 0)
            return m == CD__GET ? 1 : -1;
        return strcmp(slash, "/cancel") != 0 ? 0 : m == CD__POST ? 1 : -1;
    }
    if (strcmp(p, "/api/tokens") == 0) {
        *needs_token = true;
        return m == CD__GET || m == CD__POST ? 1 : -1;
    }
    if (strncmp(p, "/api/tokens/", 12) == 0)
        return m == CD__DELETE ? 1 : -1;
    if (strcmp(p, "/api/events/ticket") == 0)
        return m == CD__POST ? 1 : -1;
    return 0;
}

void cd__api_route(cd__api *api, cd__request *r)
{
    rt_take(api->o.self, &r->hdr);
    bool needs_token;
    int a = allowed(r, &needs_token);
    if (a == 0) {
        cd__api_fail(api, r, 404, NULL, "no such path");
    } else if (a < 0) {
        cd__api_fail(api, r, 405, NULL, "method not allowed here");
    } else if (r->query_too_long) {
        cd__api_fail(api, r, 414, NULL, "the query string is longer than 511 bytes decoded");
    } else if (r->query_nul) {
        cd__api_fail(api, r, 400, NULL, "a query argument holds a NUL byte (%00)");
    } else if (strcmp(r->path, "/health") == 0) {
        health(api, r);
    } else if (needs_token || api->o.private_reads) {
        cd__api_authenticate(api, r);
    } else {
        cd__api_dispatch(api, r);
    }
}

/* ---- answers and life ---------------------------------------------------------------------------- */

void cd__api_answer(cd__api *api, rt_msg *m)
{
    cd__api_pending pd;
    bool found = false;
    for (size_t i = 0; i < api->npend; i++)
        if (api->pend[i].req == (int64_t)m->req_id) {
            pd = api->pend[i];
            api->pend[i] = api->pend[--api->npend];
            found = true;
            break;
        }
    if (!found)
        return;
    cd__request *r = pd.r;
    cd_result *res = m->type == CD_MSG_RESULT ? (cd_result *)m : NULL;
    if (pd.kind == CD__ASK_BOOT) {
        if (res != NULL && res->res != NULL) {
            api->boot_pending = false;
        } else if (res != NULL) {
            sf_log(SF_LOG_WARN, NULL, "cannot store the token file's token: %s", res->error);
        } else {
            cd__api_boot_insert(api); /* no database yet: ask again */
        }
        return;
    }
    if (res == NULL) {
        cd__api_fail(api, r, 503, NULL, "the database did not answer in time");
        return;
    }
    if (res->res == NULL) {
        /* A full backlog is the database's absence, not a fault of ours. */
        cd__api_fail(api, r, res->code == CD_STORE_EFULL ? 503 : 500, NULL, res->error);
        return;
    }
    PGresult *pr = res->res;
    switch (pd.kind) {
    case CD__ASK_AUTH:
        if (PQntuples(pr) == 0) {
            cd__api_auth_failed(api, r, "unknown, revoked or expired API token", true);
            return;
        }
        snprintf(r->owner, sizeof r->owner, "%s", PQgetvalue(pr, 0, 0));
        r->admin = strcmp(r->owner, "admin") == 0;
        cd__api_dispatch(api, r);
        break;
    case CD__ASK_SUBMIT: cd__api_on_submit(api, r, pr); break;
    case CD__ASK_LIST: cd__api_on_list(api, r, pr); break;
    case CD__ASK_TOKENS: cd__api_ok(api, r, 200, sf_fmt("%s\n", PQgetvalue(pr, 0, 0))); break;
    case CD__ASK_ONE: cd__api_on_one(api, r, pr); break;
    case CD__ASK_CONVERGENCE: cd__api_on_convergence(api, r, pr); break;
    case CD__ASK_CANCEL_LOOK: cd__api_on_cancel_look(api, r, pr); break;
    case CD__ASK_CANCEL_DO: cd__api_on_cancel_do(api, r, pr); break;
    case CD__ASK_NODES: {
        char status[16];
        cd__api_ok(api, r, 200, cd__api_nodes_json(api, pr, false, cd__api_arg(r, "status", status, sizeof status)));
        break;
    }
    case CD__ASK_NODE:
        if (PQntuples(pr) == 0)
            cd__api_fail(api, r, 404, NULL, "no such node");
        else
            cd__api_ok(api, r, 200, cd__api_nodes_json(api, pr, true, NULL));
        break;
    case CD__ASK_NODE_REVOKE: cd__api_on_node_revoked(api, r, pr); break;
    case CD__ASK_NODE_REMOVE: cd__api_on_node_removed(api, r, pr); break;
    case CD__ASK_NODE_PRUNE: cd__api_on_nodes_pruned(api, r, pr); break;
    case CD__ASK_TOKEN_NEW: cd__api_ok(api, r, 201, sf_fmt("%s\n", PQgetvalue(pr, 0, 0))); break;
    case CD__ASK_TOKEN_REVOKE:
        if (PQntuples(pr) == 0)
            cd__api_fail(api, r, 404, NULL, "no such token of yours");
        else
            cd__api_ok(api, r, 200, sf_fmt("%s\n", PQgetvalue(pr, 0, 0)));
        break;
    default: done(r); break;
    }
}


cd__api *cd__api_create(const cd__api_opts *opts)
{
    cd__api *api = sf_calloc(1, sizeof *api);
    api->o = *opts;
    return api;
}

void cd__api_destroy(cd__api *api)
{
    if (api == NULL)
        return;
    for (size_t i = 0; i < api->npend; i++)
        if (api->pend[i].r != NULL)
            done(api->pend[i].r);
    free(api->pend);
    free(api);
}
