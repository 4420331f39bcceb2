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
 * $3 capabilities, $4 the claim token's hash. All return id, tier,
 * revoked, owner, streak (docs/verification.md). A revoked key stays revoked whatever claim token it
 * brings, and the token stays unused: the key's row is returned as it is,
 * revoked. */
static const char *enrol_claim_sql =
    "WITH r AS (SELECT id, tier, coalesce(owner, '') AS owner, streak FROM nodes "
    "  WHERE public_key = $1 AND revoked_at IS NOT NULL), "
    "t AS (UPDATE tokens SET used_at = coalesce(used_at, now()), used_by = $1 "
    "  WHERE secret_hash = $4 AND kind = 'claim' AND revoked_at IS NULL "
    "    AND (used_at IS NULL OR used_by = $1) AND (expires_at IS NULL OR expires_at > now()) "
    "    AND NOT EXISTS (SELECT 1 FROM r) "
    "  RETURNING owner, tier), "
    "e AS (INSERT INTO nodes (public_key, owner, tier, last_seen, version, capabilities) "
    "  SELECT $1, owner, tier, now(), $2, $3::jsonb FROM t "
    "  ON CONFLICT (public_key) DO UPDATE SET owner = EXCLUDED.owner, tier = EXCLUDED.tier, "
    "    last_seen = now(), version = EXCLUDED.version, capabilities = EXCLUDED.capabilities "
    "  RETURNING id, tier, revoked_at IS NOT NULL AS revoked, coalesce(owner, '') AS owner, streak) "
    "SELECT id, tier, revoked, owner, streak FROM e UNION ALL SELECT id, tier, true, owner, streak FROM r";
static const char *enrol_open_sql =
    "INSERT INTO nodes (public_key, tier, last_seen, version, capabilities) VALUES ($1, 'public', now(), $2, $3::jsonb) "
    "ON CONFLICT (public_key) DO UPDATE SET last_seen = now(), version = $2, capabilities = $3::jsonb "
    "RETURNING id, tier, revoked_at IS NOT NULL, coalesce(owner, ''), streak";
static const char *enrol_known_sql =
    "UPDATE nodes SET last_seen = now(), version = $2, capabilities = $3::jsonb WHERE public_key = $1 "
    "RETURNING id, tier, revoked_at IS NOT NULL, coalesce(owner, ''), streak";

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
    memcpy(s->pk, h->pk, 32);
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
    s->node_id = strtoull(PQgetvalue(res->res, 0, 0), NULL, 10);
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
    char fields[1024];
    cd_node_view_json(v, fields, sizeof fields);
    cd__session_publish(s, "node.online", fields);
    cd__session_claim_more(s);
}

