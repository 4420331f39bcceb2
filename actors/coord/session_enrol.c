/*
 * session_enrol.c — a session's hello (session_int.h): the node's
 * capabilities, its key looked up or enrolled, and the welcome.
 */
#include "actors/coord/session_int.h"

#include "actors/coord/scheduler.h"
#include "base/alloc.h"
#include "base/log.h"
#include "proto/msg.h"
#include "proto/sign.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *backend_name(uint32_t kind)
{
    static const char *names[] = { "cpu", "opencl", "cuda", "wasm" };
    return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

/* The hello's capabilities as the JSON kept in nodes.capabilities. */
static char *caps_json(const pr_caps *c, const char *checksum)
{
    size_t cap = 512 + (size_t)c->nbackends * 400, n = 0;
    char *j = malloc(cap), q1[80], q2[80], q3[80];
    if (j == NULL)
        sf_oom(cap);
    n += (size_t)snprintf(j + n, cap - n, "{\"cores\":%u,\"max_parallel\":%u,\"os\":%s,\"arch\":%s,\"browser\":%s,"
        "\"backends\":[", c->cores, c->max_parallel, cd_json_quote(q1, sizeof q1, c->os ? c->os : ""),
        cd_json_quote(q2, sizeof q2, c->arch ? c->arch : ""), cd_json_quote(q3, sizeof q3, c->browser ? c->browser : ""));
    for (uint32_t i = 0; i < c->nbackends && i < 64; i++) {
        char dev[300];
        n += (size_t)snprintf(j + n, cap - n, "%s{\"kind\":\"%s\",\"device\":%s,\"memory\":%" PRIu64 ",\"units\":%u}",
            i ? "," : "", backend_name(c->backends[i].kind),
            cd_json_quote(dev, sizeof dev, c->backends[i].device ? c->backends[i].device : ""),
            c->backends[i].memory, c->backends[i].units);
    }
    char sum[80];
    snprintf(j + n, cap - n, "],\"checksum\":%s}", cd_json_quote(sum, sizeof sum, checksum ? checksum : ""));
    return j;
}

/* Enrolment, in one statement each, so a statement the store sends again
 * after a lost connection gives the same answer: $1 key, $2 version,
 * $3 capabilities, $4 the node's name (NULL keeps the row's), $5 the
 * claim token's hash. All return id, tier, revoked, owner, streak
 * (docs/verification.md) and whether a claim token enrolled the key now.
 *
 * A claim token enrols a key while it has uses left and has not expired
 * (sql/011_fleet.sql): the UPDATE raises its count as it checks it, so
 * enrolments racing for its last use queue on its row and the later ones
 * find it used up. A key the token enrolled before comes back with it
 * without using another. A known key whose token cannot enrol it (used
 * up, expired: a node restarted with the token still in its environment)
 * is welcomed as the node it is. A revoked key stays revoked whatever
 * claim token it brings, and the token stays unused: the key's row is
 * returned as it is, revoked. */
static const char *enrol_claim_sql =
    "WITH r AS (SELECT id, tier, coalesce(owner, '') AS owner, streak FROM nodes "
    "  WHERE public_key = $1 AND revoked_at IS NOT NULL), "
    "t AS (UPDATE tokens SET used = used + (NOT EXISTS (SELECT 1 FROM nodes "
    "      WHERE public_key = $1 AND enrolled_by = tokens.id))::int, "
    "    used_at = coalesce(used_at, now()), used_by = coalesce(used_by, $1) "
    "  WHERE secret_hash = $5 AND kind = 'claim' AND revoked_at IS NULL "
    "    AND (expires_at IS NULL OR expires_at > now()) "
    "    AND (used < uses OR EXISTS (SELECT 1 FROM nodes WHERE public_key = $1 AND enrolled_by = tokens.id)) "
    "    AND NOT EXISTS (SELECT 1 FROM r) "
    "  RETURNING id, owner, tier), "
    "e AS (INSERT INTO nodes (public_key, owner, tier, last_seen, version, capabilities, name, enrolled_by) "
    "  SELECT $1, owner, tier, now(), $2, $3::jsonb, $4::text, id FROM t "
    "  ON CONFLICT (public_key) DO UPDATE SET owner = EXCLUDED.owner, tier = EXCLUDED.tier, "
    "    last_seen = now(), version = EXCLUDED.version, capabilities = EXCLUDED.capabilities, "
    "    name = coalesce(EXCLUDED.name, nodes.name), enrolled_by = EXCLUDED.enrolled_by "
    "  RETURNING id, tier, revoked_at IS NOT NULL AS revoked, coalesce(owner, '') AS owner, streak), "
    "k AS (UPDATE nodes SET last_seen = now(), version = $2, capabilities = $3::jsonb, name = coalesce($4::text, name) "
    "  WHERE public_key = $1 AND revoked_at IS NULL AND NOT EXISTS (SELECT 1 FROM t) "
    "  RETURNING id, tier, coalesce(owner, '') AS owner, streak) "
    "SELECT id, tier, revoked, owner, streak, true FROM e UNION ALL SELECT id, tier, true, owner, streak, false FROM r "
    "UNION ALL SELECT id, tier, false, owner, streak, false FROM k";
static const char *enrol_open_sql =
    "INSERT INTO nodes (public_key, tier, last_seen, version, capabilities, name) "
    "VALUES ($1, 'public', now(), $2, $3::jsonb, $4::text) "
    "ON CONFLICT (public_key) DO UPDATE SET last_seen = now(), version = $2, capabilities = $3::jsonb, "
    "name = coalesce($4::text, nodes.name) "
    "RETURNING id, tier, revoked_at IS NOT NULL, coalesce(owner, ''), streak, false";
static const char *enrol_known_sql =
    "UPDATE nodes SET last_seen = now(), version = $2, capabilities = $3::jsonb, name = coalesce($4::text, name) "
    "WHERE public_key = $1 RETURNING id, tier, revoked_at IS NOT NULL, coalesce(owner, ''), streak, false";

/* Unix ms as "2026-11-28 15:40:01 UTC". */
static void utc_text(uint64_t ms, char *out, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* One live session a key (docs/coordinator.md, "One session a key"). A
 * session of s's key that is live already keeps the key, and s is refused
 * with EKEYINUSE, saying where the live one is from and since when;
 * unless the live one has been silent for over two heartbeat intervals
 * (a live node is heard at least once an interval): that is a connection
 * that died unseen, which is closed, and s goes on. Returns whether s may
 * go on; frame_id is the hello's. */
static bool one_session(cd__session *s, uint64_t frame_id)
{
    cd__session *live = cd__sessions_live_key(s->ss, s->pk, s);
    if (live == NULL)
        return true;
    const cd_node_view *lv = &live->view;
    char since[40], why[600], name[80] = "";
    utc_text(lv->connected_ms, since, sizeof since);
    if (lv->name[0])
        snprintf(name, sizeof name, " \"%s\"", lv->name);
    uint64_t silent = rt_mono_ms() - live->heard_ms;
    if (silent > 2 * (uint64_t)s->ss->heartbeat_ms) {
        snprintf(why, sizeof why, "a new session of this node key came from %s, and this one was silent for %" PRIu64
            " s: closed", s->view.from, silent / 1000);
        sf_log(SF_LOG_INFO, "session", "node %" PRIu64 "%s: its session from %s (since %s) was silent for %" PRIu64
            " s: closed for a new one from %s", lv->node, name, lv->from, since, silent / 1000, s->view.from);
        live->offline_reason = "replaced";
        cd__session_send_error(live, 0, CD__E_NOT_READY, why, true);
        return true;
    }
    snprintf(why, sizeof why, "this node key has a session already: node %" PRIu64 "%s, from %s since %s. Two "
        "processes on one key would share one node's chunks and totals: give each node its own key (--key PATH), "
        "or stop the other one", lv->node, name, lv->from, since);
    sf_log(SF_LOG_WARN, "session", "node %" PRIu64 "%s: a second session of its key, from %s%s%s, refused: its "
        "session from %s since %s is live", lv->node, name, s->view.from, s->view.name[0] ? " as " : "",
        s->view.name, lv->from, since);
    cd__session_send_error(s, frame_id, CD__E_KEY_IN_USE, why, true);
    return false;
}

/* The name the node goes by: hello's, else a browser node's browser (cut
 * to a name's length at a character's start); "" for none. Hello's was
 * checked already. */
static void node_name(const pr_hello *h, char *out, size_t cap)
{
    out[0] = '\0';
    if (h->name != NULL) {
        snprintf(out, cap, "%s", h->name);
        return;
    }
    if (h->caps.browser == NULL)
        return;
    size_t n = strlen(h->caps.browser);
    if (n > PR_MAX_NAME_LEN)
        for (n = PR_MAX_NAME_LEN; n > 0 && ((unsigned char)h->caps.browser[n] & 0xc0) == 0x80; n--)
            ;
    snprintf(out, cap, "%.*s", (int)n, h->caps.browser);
    for (size_t e = strlen(out); e > 0 && out[e - 1] == ' '; e--) /* cut before a space */
        out[e - 1] = '\0';
    if (pr_node_name_check(out) != NULL)
        out[0] = '\0';
}

void cd__session_on_hello(cd__session *s, pr_msg *m)
{
    pr_hello *h = &m->body.hello;
    uint64_t left = cd__penalty_left(s->ss->penalties, h->pk, cd__session_now_ms_wall());
    if (left > 0) {
        /* Refused before the signature check: whoever sends it, the key's
         * owner earned the refusal in a session it signed for. */
        char why[160];
        snprintf(why, sizeof why, "this node key is refused for %" PRIu64 " s more: a session of it was closed "
            "for abuse (the refusal doubles with each)", (left + 999) / 1000);
        s->ss->stats.refused++;
        cd__session_send_error(s, m->id, CD__E_RATE_LIMITED, why, true);
        return;
    }
    int rc = pr_hello_verify(h, s->host, s->nonce, cd__session_now_s());
    if (rc != 0) {
        cd__session_send_error(s, m->id, rc, sf_strerror(rc), true);
        return;
    }
    const char *bad = h->name != NULL ? pr_node_name_check(h->name) : NULL;
    if (bad != NULL) {
        char why[160];
        snprintf(why, sizeof why, "the node name %s: a name is 1 to 64 printable characters", bad);
        cd__session_send_error(s, m->id, PR_EINVAL, why, true);
        return;
    }
    memcpy(s->pk, h->pk, 32);
    node_name(h, s->view.name, sizeof s->view.name);
    if (!one_session(s, m->id))
        return;
    /* A worker per core, and one per device (a GPU's worker beside as many
     * CPU workers as cores): that many chunks at once at most. */
    s->workers_max = h->caps.cores ? h->caps.cores : 1;
    s->nbk = h->caps.nbackends < CD_NODE_BACKENDS ? h->caps.nbackends : CD_NODE_BACKENDS;
    for (uint32_t i = 0; i < h->caps.nbackends; i++) {
        const pr_backend *b = &h->caps.backends[i];
        bool device = b->kind == PR_BACKEND_OPENCL || b->kind == PR_BACKEND_CUDA;
        if (device)
            s->workers_max++;
        if (i < CD_NODE_BACKENDS)
            s->cls[i] = (cd__wclass){ .units = device ? 1 : b->units ? b->units : h->caps.cores ? h->caps.cores : 1,
                .device = device };
    }
    cd__session_set_slots(s, h->caps.max_parallel);
    cd_node_view *v = &s->view;
    snprintf(v->version, sizeof v->version, "%s", h->version ? h->version : "");
    snprintf(v->os, sizeof v->os, "%s", h->caps.os ? h->caps.os : "");
    snprintf(v->arch, sizeof v->arch, "%s", h->caps.arch ? h->caps.arch : "");
    snprintf(v->checksum, sizeof v->checksum, "%s", h->checksum ? h->checksum : "");
    v->cores = h->caps.cores;
    /* A claim token enrols the key under the token's owner and tier;
     * known keys come back with theirs; unknown ones join as public nodes
     * only when enrolment is open. */
    s->claim = h->claim_token != NULL && h->claim_token[0] != '\0';
    cd_query *q = cd_query_new(s->claim ? enrol_claim_sql : s->ss->open_enrolment ? enrol_open_sql : enrol_known_sql);
    char *caps = caps_json(&h->caps, h->checksum);
    cd_query_bytes(q, h->pk, 32);
    cd_query_text(q, v->version);
    cd_query_text(q, caps);
    cd_query_text(q, v->name[0] ? v->name : NULL);
    free(caps);
    if (s->claim) {
        uint8_t hash[crypto_hash_sha256_BYTES];
        crypto_hash_sha256(hash, (const uint8_t *)h->claim_token, strlen(h->claim_token));
        cd_query_bytes(q, hash, sizeof hash);
    }
    int64_t id = rt_request(s->self, s->ss->store, &q->hdr, 10000);
    if (id < 0) {
        cd__session_send_error(s, m->id, CD__E_DATABASE, "the coordinator is stopping", true);
        return;
    }
    cd__session_req_add(s, id, CD__R_ENROL)->frame_id = m->id;
    s->phase = CD__SESS_ENROLLING;
}

static uint8_t tier_bit(const char *t)
{
    if (strcmp(t, "own") == 0)
        return SC_TIER_OWN;
    if (strcmp(t, "team") == 0)
        return SC_TIER_TEAM;
    if (strcmp(t, "community") == 0)
        return SC_TIER_COMMUNITY;
    return SC_TIER_PUBLIC;
}

void cd__session_on_enrolled(cd__session *s, const cd__req *r, cd_result *res)
{
    if (res == NULL || res->res == NULL || PQntuples(res->res) == 0) {
        cd__session_send_error(s, r->frame_id, res && res->res ? CD__E_NOT_ENROLLED : CD__E_DATABASE,
            !(res && res->res) ? "the database is unavailable, try again"
            : s->claim         ? "the claim token is unknown, used up, revoked or expired: ask for a new one"
                               : "this key is not enrolled: enrol it with a claim token", true);
        return;
    }
    if (strcmp(PQgetvalue(res->res, 0, 2), "t") == 0) {
        cd__session_send_error(s, r->frame_id, CD__E_NOT_ENROLLED, "this node was revoked", true);
        return;
    }
    if (!one_session(s, r->frame_id)) /* another session of the key was welcomed while this one was enrolled */
        return;
    s->node_id = strtoull(PQgetvalue(res->res, 0, 0), NULL, 10);
    if (s->claim && strcmp(PQgetvalue(res->res, 0, 5), "t") != 0)
        sf_log(SF_LOG_INFO, "session", "node %" PRIu64 ": its claim token enrols no more keys (used up, expired, "
            "revoked or unknown); welcomed as the node its key is", s->node_id);
    s->tier = tier_bit(PQgetvalue(res->res, 0, 1));
    s->streak = (uint32_t)strtoul(PQgetvalue(res->res, 0, 4), NULL, 10);
    if (pr_replay_create(&s->guard, 1024) != 0)
        sf_oom(1024);
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_WELCOME;
    m.id = r->frame_id;
    m.body.welcome.node_id = s->node_id;
    m.body.welcome.heartbeat_ms = s->ss->heartbeat_ms;
    m.body.welcome.config.max_parallel = s->max_slots;
    cd__session_send_msg(s, &m);
    s->phase = CD__SESS_RUNNING;
    rt_send_every(s->self, s->ss->heartbeat_ms, CD__SESS_M_WATCH, 0);
    cd_node_view *v = &s->view;
    v->node = s->node_id;
    snprintf(v->tier, sizeof v->tier, "%s", PQgetvalue(res->res, 0, 1));
    snprintf(v->owner, sizeof v->owner, "%s", PQgetvalue(res->res, 0, 3));
    v->connected_ms = v->last_seen_ms = cd__session_now_ms_wall();
    uint8_t key[16];
    randombytes_buf(key, sizeof key);
    sodium_bin2hex(v->work_key, sizeof v->work_key, key, sizeof key);
    s->heard_ms = s->saved_ms = rt_mono_ms();
    char fields[2048];
    cd_node_view_json(v, fields, sizeof fields);
    cd__session_publish(s, "node.online", fields);
    cd__session_claim_more(s);
}

