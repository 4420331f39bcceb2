/*
 * api_nodes.c — /api/nodes (api_int.h): the nodes table's rows, filtered
 * and paged in the database, with what each live session knows now.
 */
#include "actors/coord/api_int.h"

#include "actors/coord/session_int.h"
#include "base/alloc.h"
#include "base/json.h"
#include "base/log.h"
#include "base/str.h"

#include <msgpack.h>
#include <sodium.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct views {
    cd_node_view *v;
    size_t n, cap;
} views;

static void collect_view(void *ctx, const cd_node_view *v)
{
    views *vs = ctx;
    if (vs->n == vs->cap)
        vs->v = sf_grow(vs->v, &vs->cap, sizeof *vs->v);
    vs->v[vs->n++] = *v;
}

/* GET /api/nodes's filters: status (online, offline or revoked, as
 * nodes_json tells them apart), owner, tier, and a page (limit, offset).
 * Returns false, having answered 400, for a bad one. */
typedef struct node_filter {
    char status[16], owner[130], tier[16];
    bool has_status, has_owner, has_tier;
    int64_t limit, offset; /* limit 0: all */
} node_filter;

static bool node_filter_parse(cd__api *api, cd__request *r, node_filter *f)
{
    static const char *const statuses[] = { "online", "offline", "revoked" };
    static const char *const tiers[] = { "own", "team", "community", "public" };
    char num[24];
    memset(f, 0, sizeof *f);
    f->has_status = cd__api_arg(r, "status", f->status, sizeof f->status) != NULL;
    f->has_owner = cd__api_arg(r, "owner", f->owner, sizeof f->owner) != NULL;
    f->has_tier = cd__api_arg(r, "tier", f->tier, sizeof f->tier) != NULL;
    if (f->has_status && !cd__api_one_of(f->status, statuses, 3)) {
        cd__api_fail(api, r, 400, "status", "must be online, offline or revoked");
        return false;
    }
    if (f->has_tier && !cd__api_one_of(f->tier, tiers, 4)) {
        cd__api_fail(api, r, 400, "tier", "must be own, team, community or public");
        return false;
    }
    if (!cd__api_arg_limit(api, r, &f->limit))
        return false;
    if (cd__api_arg(r, "offset", num, sizeof num) != NULL) {
        uint64_t v = cd__api_parse_id(num);
        if (v == 0 && strcmp(num, "0") != 0) {
            cd__api_fail(api, r, 400, "offset", "must be a whole number, 0 or more");
            return false;
        }
        f->offset = (int64_t)v;
    }
    return true;
}

/* The nodes (all, those the filters pass, or the one with id `one`) with
 * the ranges of their results retracted, each once (no unique index keeps
 * a RETRACTED row from being written twice), and their work in all
 * (sql/007_node_totals.sql) less what their live sessions last wrote, as
 * nodes_json adds what those sessions count now: one snapshot of the
 * database, so a write landing meanwhile is counted once either way. Only a session that has had chunks accepted can have
 * written a row; each is looked up by its key alone (the LIMIT keeps the
 * planner from scanning all of node_work to hash it, which it prefers for
 * thousands of keys). Online nodes first, as nodes_json lists them, so a
 * page is a page of that list. */
void cd__api_ask_nodes(cd__api *api, cd__request *r, uint64_t one)
{
    node_filter f = { 0 };
    if (one == 0 && !node_filter_parse(api, r, &f))
        return;
    views vs = { NULL, 0, 0 };
    cd_sessions_each(api->o.nodes, collect_view, &vs);
    char *live = malloc(3 + vs.n * 33), *ids = malloc(3 + vs.n * 21);
    if (live == NULL || ids == NULL)
        sf_oom(3 + vs.n * 33);
    size_t n = 0, k = 0;
    live[n++] = '{';
    ids[k++] = '{';
    for (size_t i = 0; i < vs.n; i++) {
        if (vs.v[i].chunks_done > 0 && (one == 0 || vs.v[i].node == one))
            n += (size_t)sprintf(live + n, "%s%s", n > 1 ? "," : "", vs.v[i].work_key);
        k += (size_t)sprintf(ids + k, "%s%" PRIu64, k > 1 ? "," : "", vs.v[i].node);
    }
    strcpy(live + n, "}");
    strcpy(ids + k, "}");
    free(vs.v);
    /* The live sessions' nodes are joined in only for a status or a page:
     * the whole list is a walk of the primary key, ordered in nodes_json. */
    bool page = f.limit > 0 || f.offset > 0;
    bool up = page || (f.has_status && strcmp(f.status, "revoked") != 0);
    const char *status = !f.has_status                      ? ""
        : strcmp(f.status, "revoked") == 0                  ? "AND revoked_at IS NOT NULL "
        : strcmp(f.status, "online") == 0                   ? "AND revoked_at IS NULL AND online.id IS NOT NULL "
                                                            : "AND revoked_at IS NULL AND online.id IS NULL ";
    char *sql = sf_fmt(
        "WITH online AS (SELECT DISTINCT id FROM unnest($3::bigint[]) AS o (id)) "
        "SELECT n.id, row_to_json(x)::text, n.chunks_total - coalesce(w.chunks, 0), n.items_total - coalesce(w.items, 0) "
        "FROM (SELECT nodes.* FROM nodes %s"
        "WHERE ($2::bigint = 0 OR nodes.id = $2::bigint) AND ($4::text IS NULL OR owner = $4) "
        "AND ($5::text IS NULL OR tier = $5) %s"
        "ORDER BY %s LIMIT coalesce($6::bigint, 100000) OFFSET $7::bigint) n "
        "CROSS JOIN LATERAL (SELECT n.id, n.owner, n.tier, n.name, n.version, n.capabilities, n.created_at, n.last_seen, "
        "n.revoked_at, n.quarantined_at, n.checks_passed, n.checks_failed, "
        "(SELECT coalesce(json_agg(json_build_object('job', j.job_id, 'variant', j.variant, 'first_item', j.first_item, "
        "'item_count', j.item_count) ORDER BY j.job_id, j.variant, j.first_item), '[]') FROM (SELECT DISTINCT j.job_id, "
        "j.variant, j.first_item, j.item_count FROM journal j "
        "WHERE n.quarantined_at IS NOT NULL AND j.node_id = n.id AND j.type = 7 "
        "ORDER BY j.job_id, j.variant, j.first_item, j.item_count LIMIT 1000) j) AS retracted) x "
        "LEFT JOIN (SELECT w.node, sum(w.chunks) AS chunks, sum(w.items) AS items FROM unnest($1::uuid[]) AS l (session) "
        "CROSS JOIN LATERAL (SELECT node, chunks, items FROM node_work WHERE session = l.session LIMIT 1) w "
        "GROUP BY w.node) w ON w.node = n.id "
        "ORDER BY n.id",
        up ? "LEFT JOIN online ON online.id = nodes.id " : "", status,
        page ? "online.id IS NULL, nodes.id" : "nodes.id");
    cd_query *q = cd_query_new(sql);
    free(sql);
    cd_query_text(q, live);
    cd_query_int(q, (int64_t)one);
    cd_query_text(q, ids);
    cd_query_text(q, f.has_owner ? f.owner : NULL);
    cd_query_text(q, f.has_tier ? f.tier : NULL);
    if (f.limit > 0)
        cd_query_int(q, f.limit);
    else
        cd_query_text(q, NULL);
    cd_query_int(q, f.offset);
    free(live);
    free(ids);
    cd__api_ask(api, r, q, one ? CD__ASK_NODE : CD__ASK_NODES);
}

void cd__api_revoke_node(cd__api *api, cd__request *r, uint64_t id)
{
    if (!r->admin) {
        cd__api_fail(api, r, 403, NULL, "only an admin token revokes nodes");
        return;
    }
    cd_query *q = cd_query_new("UPDATE nodes SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 "
                               "RETURNING id, encode(public_key, 'hex'), revoked_at");
    cd_query_int(q, (int64_t)id);
    cd__api_ask(api, r, q, CD__ASK_NODE_REVOKE);
}

void cd__api_on_node_revoked(cd__api *api, cd__request *r, PGresult *res)
{
    if (PQntuples(res) == 0) {
        cd__api_fail(api, r, 404, NULL, "no such node");
        return;
    }
    uint64_t id = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    uint8_t pk[PR_PK_BYTES];
    size_t len = 0;
    const char *hex = PQgetvalue(res, 0, 1);
    unsigned closed = 0;
    if (sodium_hex2bin(pk, sizeof pk, hex, strlen(hex), NULL, &len, NULL) == 0 && len == sizeof pk)
        closed = cd__sessions_revoke(api->o.nodes, pk);
    sf_log(SF_LOG_INFO, NULL, "node %" PRIu64 " revoked (since %s): %u session%s closed", id, PQgetvalue(res, 0, 2),
        closed, closed == 1 ? "" : "s");
    cd__api_ask_nodes(api, r, id);
}

/* ---- removing nodes' rows ---------------------------------------------------------- */

/* A node whose results are in a job that has not ended keeps its row: a
 * job loaded again reads each result's node (its owner and tier, for the
 * checks of docs/verification.md) from it. Finished jobs' journal rows
 * keep the removed node's number (sql/011_fleet.sql). */
#define UNFINISHED_JOB_OF(node) \
    "(SELECT b.id FROM jobs b WHERE b.state IN ('pending', 'running') AND EXISTS (SELECT 1 FROM journal j " \
    "WHERE j.job_id = b.id AND j.node_id = " node " AND j.type = 1) ORDER BY b.id LIMIT 1)"

/* Ends the sessions of the keys in hex (comma-separated), of nodes whose
 * rows were just removed: one that came online since the check is told. */
static void end_removed(cd__api *api, const char *hex)
{
    while (hex != NULL && *hex != '\0') {
        size_t n = strcspn(hex, ","), len = 0;
        uint8_t pk[PR_PK_BYTES];
        if (sodium_hex2bin(pk, sizeof pk, hex, n, NULL, &len, NULL) == 0 && len == sizeof pk)
            cd__sessions_end_key(api->o.nodes, pk, "removed", "this node was removed: enrol its key again with a "
                "claim token");
        hex += n + (hex[n] == ',');
    }
}

void cd__api_remove_node(cd__api *api, cd__request *r, uint64_t id)
{
    if (!r->admin) {
        cd__api_fail(api, r, 403, NULL, "only an admin token removes nodes");
        return;
    }
    if (cd__sessions_has_node(api->o.nodes, id)) {
        char why[200];
        snprintf(why, sizeof why, "node %" PRIu64 " is online: stop it (or revoke it) before removing its row", id);
        cd__api_fail(api, r, 409, NULL, why);
        return;
    }
    cd_query *q = cd_query_new(
        "WITH n AS (SELECT id, revoked_at IS NOT NULL AS revoked, " UNFINISHED_JOB_OF("$1") " AS job "
        "  FROM nodes WHERE id = $1), "
        "d AS (DELETE FROM nodes WHERE id = $1 AND id IN (SELECT id FROM n WHERE NOT revoked AND job IS NULL) "
        "  RETURNING id, name, last_seen, encode(public_key, 'hex') AS pk) "
        "SELECT n.revoked, n.job, d.pk, json_build_object('id', d.id, 'name', d.name, 'last_seen', d.last_seen, "
        "'removed', true)::text FROM n LEFT JOIN d ON true");
    cd_query_int(q, (int64_t)id);
    cd__api_ask(api, r, q, CD__ASK_NODE_REMOVE);
}

void cd__api_on_node_removed(cd__api *api, cd__request *r, PGresult *res)
{
    char why[240];
    if (PQntuples(res) == 0) {
        cd__api_fail(api, r, 404, NULL, "no such node");
        return;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
        cd__api_fail(api, r, 409, NULL, "this node is revoked: its row is what keeps its key out (removed, the key "
            "could enrol again)");
        return;
    }
    if (!PQgetisnull(res, 0, 1)) {
        snprintf(why, sizeof why, "this node has results in job %s, which has not ended: remove it once the job has "
            "ended", PQgetvalue(res, 0, 1));
        cd__api_fail(api, r, 409, NULL, why);
        return;
    }
    end_removed(api, PQgetvalue(res, 0, 2));
    sf_log(SF_LOG_INFO, NULL, "node %s removed", r->path + 11);
    cd__api_ok(api, r, 200, sf_fmt("%s\n", PQgetvalue(res, 0, 3)));
}

/* The body's offline_for: seconds, 60 to 10 years. false, having
 * answered 400, for anything else. */
static bool prune_body(cd__api *api, cd__request *r, int64_t *secs)
{
    msgpack_sbuffer buf;
    msgpack_unpacked up;
    size_t off = 0;
    char err[160] = "";
    const char *field = NULL, *why = NULL;
    *secs = -1;
    msgpack_sbuffer_init(&buf);
    msgpack_unpacked_init(&up);
    if (sf_json_to_msgpack(r->body ? r->body : "", r->body_len, &buf, err, sizeof err) != 0 ||
        msgpack_unpack_next(&up, buf.data, buf.size, &off) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        why = "the body must be a JSON object: {\"offline_for\": seconds}";
    } else {
        const msgpack_object_map *m = &up.data.via.map;
        for (uint32_t i = 0; i < m->size && why == NULL; i++) {
            const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
            if (!sf_mp_streq(k, "offline_for")) {
                why = "unknown field (known: offline_for)";
            } else if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 < 60 ||
                       v->via.u64 > 10u * 365 * 86400) {
                field = "offline_for";
                why = "must be a number of seconds from 60 to 10 years";
            } else {
                *secs = (int64_t)v->via.u64;
            }
        }
        if (why == NULL && *secs < 0) {
            field = "offline_for";
            why = "is required: the seconds a node must have been offline to be removed";
        }
    }
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&buf);
    if (why != NULL)
        cd__api_fail(api, r, 400, field, why);
    return why == NULL;
}

void cd__api_prune_nodes(cd__api *api, cd__request *r)
{
    if (!r->admin) {
        cd__api_fail(api, r, 403, NULL, "only an admin token removes nodes");
        return;
    }
    int64_t secs;
    if (!prune_body(api, r, &secs))
        return;
    views vs = { NULL, 0, 0 };
    cd_sessions_each(api->o.nodes, collect_view, &vs);
    char *ids = malloc(3 + vs.n * 21);
    if (ids == NULL)
        sf_oom(3 + vs.n * 21);
    size_t k = 0;
    ids[k++] = '{';
    for (size_t i = 0; i < vs.n; i++)
        k += (size_t)sprintf(ids + k, "%s%" PRIu64, k > 1 ? "," : "", vs.v[i].node);
    strcpy(ids + k, "}");
    free(vs.v);
    /* Never a node online (its last_seen may be old: a session writes it
     * only as it saves its work), nor a revoked one, nor one with results
     * in a job that has not ended. */
    cd_query *q = cd_query_new(
        "WITH d AS (DELETE FROM nodes n WHERE revoked_at IS NULL "
        "  AND coalesce(last_seen, created_at) < now() - make_interval(secs => $1::bigint) "
        "  AND NOT (id = ANY ($2::bigint[])) AND " UNFINISHED_JOB_OF("n.id") " IS NULL "
        "  RETURNING id, name, last_seen, encode(public_key, 'hex') AS pk) "
        "SELECT json_build_object('removed', coalesce(json_agg(json_build_object('id', id, 'name', name, "
        "'last_seen', last_seen) ORDER BY id), '[]'), 'offline_for', $1::bigint)::text, "
        "coalesce(string_agg(pk, ','), '') FROM d");
    cd_query_int(q, secs);
    cd_query_text(q, ids);
    free(ids);
    cd__api_ask(api, r, q, CD__ASK_NODE_PRUNE);
}

void cd__api_on_nodes_pruned(cd__api *api, cd__request *r, PGresult *res)
{
    const char *hex = PQgetvalue(res, 0, 1);
    end_removed(api, hex);
    size_t n = hex[0] ? 1 : 0;
    for (const char *c = hex; *c; c++)
        n += *c == ',';
    sf_log(SF_LOG_INFO, NULL, "nodes pruned: %zu removed", n);
    cd__api_ok(api, r, 200, sf_fmt("%s\n", PQgetvalue(res, 0, 0)));
}

static int view_cmp(const void *a, const void *b)
{
    uint64_t x = ((const cd_node_view *)a)->node, y = ((const cd_node_view *)b)->node;
    return x < y ? -1 : x > y;
}

/* The nodes table's rows, online ones first, each with what its session
 * knows now and its work in all (ended sessions' rows, plus the live
 * session's count). A JSON array, or with `one` its first element alone.
 * With status "online" or "offline", a node whose session began or ended
 * since the query was asked is left out. */
char *cd__api_nodes_json(cd__api *api, PGresult *res, bool one, const char *status)
{
    int only = status == NULL ? -1 : strcmp(status, "online") == 0 ? 1 : strcmp(status, "offline") == 0 ? 0 : -1;
    views vs = { NULL, 0, 0 };
    cd_sessions_each(api->o.nodes, collect_view, &vs);
    if (vs.n > 1)
        qsort(vs.v, vs.n, sizeof *vs.v, view_cmp);
    int rows = PQntuples(res);
    sf_str out = SF_STR_INIT;
    sf_str_cat(&out, "[");
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < rows; i++) {
            uint64_t id = strtoull(PQgetvalue(res, i, 0), NULL, 10);
            cd_node_view key = { .node = id };
            const cd_node_view *v = vs.n ? bsearch(&key, vs.v, vs.n, sizeof *vs.v, view_cmp) : NULL;
            if ((pass == 0) != (v != NULL) || (only >= 0 && only != (v != NULL)))
                continue;
            const char *row = PQgetvalue(res, i, 1);
            if (out.len > 1)
                sf_str_cat(&out, ",");
            sf_str_catn(&out, row, strlen(row) - 1); /* without its closing brace */
            uint64_t chunks = strtoull(PQgetvalue(res, i, 2), NULL, 10) + (v ? v->chunks_done : 0);
            uint64_t items = strtoull(PQgetvalue(res, i, 3), NULL, 10) + (v ? v->items_done : 0);
            sf_str_catf(&out, ",\"chunks_total\":%" PRIu64 ",\"items_total\":%" PRIu64, chunks, items);
            if (v == NULL) {
                sf_str_cat(&out, ",\"online\":false}");
                continue;
            }
            for (unsigned b = 0; b < v->nbackend_speeds; b++)
                sf_str_catf(&out, "%s%.0f", b ? "," : ",\"backend_items_per_s\":[", v->backend_items_per_s[b]);
            if (v->nbackend_speeds > 0)
                sf_str_cat(&out, "]");
            sf_str_catf(&out,
                ",\"online\":true,\"max_parallel\":%u,\"slots\":%u,"
                "\"in_flight\":%u,\"chunks_done\":%" PRIu64 ",\"malformed\":%" PRIu64 ",\"items_done\":%" PRIu64
                ",\"items_per_s\":%.0f,\"connected_ms\":%" PRIu64 ",\"last_seen_ms\":%" PRIu64 "}",
                v->max_parallel, v->slots, v->in_flight, v->chunks_done, v->malformed, v->items_done,
                v->items_per_s, v->connected_ms, v->last_seen_ms);
        }
    sf_str_cat(&out, "]\n");
    free(vs.v);
    if (one) { /* the element alone: [ and ]\n off */
        memmove(out.s, out.s + 1, out.len - 3);
        strcpy(out.s + out.len - 3, "\n");
    }
    return sf_str_take(&out);
}

