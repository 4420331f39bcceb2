/*
 * api.c — the coordinator's HTTP API (docs/api.md): routes, API tokens,
 * and the store's answers. Every request the gateway hands over is kept
 * (rt_take) until its answer is written; the steps that need the database
 * (the token, then the work) go through the store one after another.
 */
#include "base/log.h"
#include "actors/coord/gateway_int.h"

#include "actors/coord/jobs.h"
#include "actors/coord/scheduler.h"
#include "actors/coord/store.h"
#include "sim/sim.h"
#include "base/json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    P_AUTH = 1, P_SUBMIT, P_LIST, P_ONE, P_CANCEL_LOOK, P_CANCEL_DO, P_NODES, P_NODE, P_TOKEN_NEW, P_TOKENS,
    P_TOKEN_REVOKE, P_BOOT, P_CONVERGENCE,
};

enum { FAIL_LIMIT = 10, FAIL_WINDOW_MS = 60000, TOKEN_BYTES = 32 };

static void done(gw_request *r)
{
    rt_msg_free(&r->hdr);
}

static void fail(gateway *g, gw_request *r, int status, const char *field, const char *msg)
{
    gw_respond_error(g, r->session, status, field, msg);
    done(r);
}

static void ok_json(gateway *g, gw_request *r, int status, char *body)
{
    gw_respond(g, r->session, status, "application/json", body, NULL);
    done(r);
}

static void ask(gateway *g, gw_request *r, cd_query *q, int kind)
{
    int64_t req = rt_request(g->self, g->store, &q->hdr, g->db_timeout_ms);
    if (req < 0) {
        if (r != NULL)
            fail(g, r, 503, NULL, "the coordinator is stopping");
        return;
    }
    if (g->npend == g->pend_cap)
        g->pend = sf_grow(g->pend, &g->pend_cap, sizeof *g->pend);
    g->pend[g->npend++] = (gw_pending){ req, r ? r->session : 0, kind, r };
}

/* ---- tokens -------------------------------------------------------------------------- */

/* A new secret: prefix + base64url of 32 random bytes. */
static void token_new(char *out, size_t cap, const char *prefix)
{
    unsigned char raw[TOKEN_BYTES];
    char b64[64];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    snprintf(out, cap, "%s%s", prefix, b64);
    sodium_memzero(raw, sizeof raw);
}

/* Only the SHA-256 of a secret is stored or looked up. */
static void token_hash(const char *token, unsigned char hash[32])
{
    crypto_hash_sha256(hash, (const unsigned char *)token, strlen(token));
}

/* The well-formed shape of an API token: sf_ and 43 base64url characters. */
static bool api_token_shape(const char *t)
{
    if (strncmp(t, "sf_", 3) != 0 || strlen(t) != 46)
        return false;
    for (const char *c = t + 3; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                *c == '_'))
            return false;
    return true;
}

static gw_fail *fail_slot(gateway *g, const char *peer, bool create)
{
    gw_fail *oldest = &g->fails[0];
    for (int i = 0; i < GW_FAILS; i++) {
        if (g->fails[i].count > 0 && strcmp(g->fails[i].peer, peer) == 0)
            return &g->fails[i];
        if (g->fails[i].since_ms < oldest->since_ms)
            oldest = &g->fails[i];
    }
    if (!create)
        return NULL;
    memset(oldest, 0, sizeof *oldest);
    snprintf(oldest->peer, sizeof oldest->peer, "%s", peer);
    return oldest;
}

/* Seconds until peer may try again, or 0 when it is not blocked. */
static unsigned blocked_for(gateway *g, const char *peer)
{
    gw_fail *f = fail_slot(g, peer, false);
    uint64_t now = rt_mono_ms();
    if (f == NULL || now - f->since_ms >= FAIL_WINDOW_MS || f->count < FAIL_LIMIT)
        return 0;
    return (unsigned)((f->since_ms + FAIL_WINDOW_MS - now) / 1000) + 1;
}

/* Answers 401. counted: a token was given and did not check out, which
 * counts against the address (FAIL_LIMIT in FAIL_WINDOW_MS block it). */
static void auth_failed(gateway *g, gw_request *r, const char *why, bool counted)
{
    if (counted) {
        gw_fail *f = fail_slot(g, r->peer, true);
        uint64_t now = rt_mono_ms();
        if (f->count == 0 || now - f->since_ms >= FAIL_WINDOW_MS) {
            f->since_ms = now;
            f->count = 0;
        }
        f->count++;
    }
    char q[512];
    gw_respond(g, r->session, 401, "application/json", sf_fmt("{\"error\":%s}\n", cd_json_quote(q, sizeof q, why)),
        "WWW-Authenticate: Bearer realm=\"simfarm\"");
    done(r);
}

static void dispatch(gateway *g, gw_request *r);

/* Checks the request's API token, then carries on with it. */
static void authenticate(gateway *g, gw_request *r)
{
    unsigned wait = blocked_for(g, r->peer);
    if (wait > 0) {
        char retry[48];
        snprintf(retry, sizeof retry, "Retry-After: %u", wait);
        gw_respond(g, r->session, 429, "application/json",
            sf_fmt("{\"error\":\"too many failed attempts from this address: try again in %u s\"}\n", wait), retry);
        done(r);
        return;
    }
    if (r->auth[0] == '\0') {
        /* not a guess: no count against the address. A GET gets here
         * without one for /api/tokens, on any coordinator, or for any
         * read of a private one. */
        const char *why = r->method != GW_GET ? "this needs an API token: Authorization: Bearer sf_..."
            : strcmp(r->path, "/api/tokens") == 0
            ? "/api/tokens needs an API token: Authorization: Bearer sf_..."
            : "this coordinator is private: reading needs an API token too: Authorization: Bearer sf_...";
        auth_failed(g, r, why, false);
        return;
    }
    const char *t = r->auth;
    if (strncasecmp(t, "Bearer ", 7) != 0 || !api_token_shape(t + 7)) {
        auth_failed(g, r, "the Authorization header must be 'Bearer sf_...' with an API token", true);
        return;
    }
    unsigned char hash[32];
    token_hash(t + 7, hash);
    /* Until its row is written, the token file's token is known here. */
    if (g->boot_pending && sodium_memcmp(hash, g->boot_hash, sizeof hash) == 0) {
        snprintf(r->owner, sizeof r->owner, "admin");
        r->admin = true;
        dispatch(g, r);
        return;
    }
    cd_query *q = cd_query_new(
        "SELECT owner FROM tokens WHERE secret_hash = $1 AND kind = 'api' AND revoked_at IS NULL "
        "AND (expires_at IS NULL OR expires_at > now())");
    cd_query_bytes(q, hash, sizeof hash);
    ask(g, r, q, P_AUTH);
}

/* Writes the token file's row; asked again until it is written (the
 * database may come up after the coordinator). */
static void boot_insert(gateway *g)
{
    cd_query *q = cd_query_new("INSERT INTO tokens (kind, owner, secret_hash, note) VALUES ('api', 'admin', $1, $2) "
                               "ON CONFLICT (secret_hash) DO NOTHING");
    cd_query_bytes(q, g->boot_hash, sizeof g->boot_hash);
    cd_query_text(q, "the token file of simfarm serve");
    ask(g, NULL, q, P_BOOT);
}

/* Writes n bytes of p to fd: 0, or the errno of the failure (ENOSPC for
 * a write that stopped short without one). */
static int write_all(int fd, const void *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        p = (const char *)p + w;
        n -= (size_t)w;
    }
    return 0;
}

int api_token_file(gateway *g, const char *path, char *err, size_t errlen)
{
    char token[96] = "";
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
            fclose(f);
            snprintf(err, errlen, "%s is readable by others: chmod 600 it", path);
            return -1;
        }
        if (fgets(token, sizeof token, f) == NULL)
            token[0] = '\0';
        fclose(f);
        token[strcspn(token, "\r\n")] = '\0';
        if (!api_token_shape(token)) {
            snprintf(err, errlen, "%s does not hold an API token (sf_ and 43 characters)", path);
            return -1;
        }
    } else if (errno == ENOENT) {
        token_new(token, sizeof token, "sf_");
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        /* A PATH.tmp left from before is removed, not reused: opened as it
         * is, it would keep its mode (and a link would be followed), and
         * the token would be as readable as it was. O_EXCL makes the file
         * ours, 0600 from the start. */
        if (unlink(tmp) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "cannot remove the stale %s: %s", tmp, strerror(errno));
            sodium_memzero(token, sizeof token);
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
            sodium_memzero(token, sizeof token);
            return -1;
        }
        int e = write_all(fd, token, strlen(token));
        if (e == 0)
            e = write_all(fd, "\n", 1);
        if (close(fd) != 0 && e == 0)
            e = errno;
        if (e != 0)
            snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(e));
        else if (rename(tmp, path) != 0) {
            e = errno;
            snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(e));
        }
        if (e != 0) {
            unlink(tmp);
            sodium_memzero(token, sizeof token);
            return -1;
        }
    } else {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    /* The file's token is an admin token of this database (again, if it was
     * already: the insert does nothing then). */
    unsigned char hash[32];
    token_hash(token, hash);
    sodium_memzero(token, sizeof token);
    memcpy(g->boot_hash, hash, sizeof hash);
    g->boot_pending = true;
    boot_insert(g);
    return 0;
}

/* ---- query strings ---------------------------------------------------------------------- */

/* The value of the first argument called name in r->query (the decoded
 * arguments, each NUL-terminated: "a=1\0b=x&y\0"), or NULL. */
static const char *arg(const gw_request *r, const char *name, char *out, size_t cap)
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
static uint64_t parse_id(const char *s)
{
    char *end;
    if (*s < '0' || *s > '9')
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    return *end != '\0' || errno != 0 || v > INT64_MAX ? 0 : (uint64_t)v;
}

/* The job id in /api/jobs/{id}[/...]; 0 when it is not one. */
static uint64_t path_job_id(const gw_request *r)
{
    char idtext[32];
    snprintf(idtext, sizeof idtext, "%.*s", (int)strcspn(r->path + 10, "/"), r->path + 10);
    return parse_id(idtext);
}

/* ---- jobs ---------------------------------------------------------------------------------- */

static const char *job_columns =
    "id, owner, name, kernel, strategy, items, seed, priority, state, spec, "
    "encode(ctx_hash, 'hex') AS ctx_hash, result, created_at, started_at, finished_at";

static void submit(gateway *g, gw_request *r)
{
    char field[64], msg[256];
    if (r->key_bad || (r->key[0] && !cd_submission_key_ok(r->key))) {
        fail(g, r, 400, "Idempotency-Key", "must be 1 to 128 visible ASCII characters");
        return;
    }
    cd_query *q = cd_job_submission_by(r->body, r->body_len, r->owner, r->admin, r->key[0] ? r->key : NULL, field,
        sizeof field, msg, sizeof msg);
    if (q == NULL) {
        fail(g, r, 400, field[0] ? field : NULL, msg);
        return;
    }
    ask(g, r, q, P_SUBMIT);
}

static bool one_of(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return true;
    return false;
}

/* The query's limit (1 to 1000) into *out, left as it is when there is
 * none. Returns false, having answered 400, for a bad one. */
static bool arg_limit(gateway *g, gw_request *r, int64_t *out)
{
    char limit[16];
    if (arg(r, "limit", limit, sizeof limit) == NULL)
        return true;
    uint64_t v = parse_id(limit);
    if (v < 1 || v > 1000) {
        fail(g, r, 400, "limit", "must be a whole number from 1 to 1000");
        return false;
    }
    *out = (int64_t)v;
    return true;
}

static void list_jobs(gateway *g, gw_request *r)
{
    char state[32], owner[130], kernel[40], before[24];
    static const char *const states[] = { "pending", "running", "complete", "failed", "cancelled", "expired" };
    if (arg(r, "state", state, sizeof state) != NULL && !one_of(state, states, 6)) {
        fail(g, r, 400, "state", "must be pending, running, complete, failed, cancelled or expired");
        return;
    }
    int64_t lim = 100;
    if (!arg_limit(g, r, &lim))
        return;
    uint64_t bef = 0;
    if (arg(r, "before", before, sizeof before) != NULL && (bef = parse_id(before)) == 0) {
        fail(g, r, 400, "before", "must be a job id");
        return;
    }
    char sql[768];
    snprintf(sql, sizeof sql,
        "SELECT coalesce(json_agg(j ORDER BY j.id DESC), '[]')::text FROM "
        "(SELECT %s FROM jobs WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR owner = $2) "
        "AND ($3::text IS NULL OR kernel = $3) AND ($4::bigint IS NULL OR id < $4) ORDER BY id DESC LIMIT $5) j",
        job_columns);
    cd_query *q = cd_query_new(sql);
    cd_query_text(q, arg(r, "state", state, sizeof state));
    cd_query_text(q, arg(r, "owner", owner, sizeof owner));
    cd_query_text(q, arg(r, "kernel", kernel, sizeof kernel));
    if (bef)
        cd_query_int(q, (int64_t)bef);
    else
        cd_query_text(q, NULL);
    cd_query_int(q, lim);
    ask(g, r, q, P_LIST);
}

static void one_job(gateway *g, gw_request *r, uint64_t id)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT row_to_json(j)::text FROM (SELECT %s FROM jobs WHERE id = $1) j", job_columns);
    cd_query *q = cd_query_new(sql);
    cd_query_int(q, (int64_t)id);
    ask(g, r, q, P_ONE);
}

/* The accepted results of one variant's chunks in the order they were
 * accepted, after the job's variant count, the variant shown and whether
 * each result holds every variant (the job's row first, so a job without
 * results is one row with NULL results and no job is no row). A
 * tournament journals each candidate in its own lane; stat_weights
 * computes every variant of a chunk at once, in lane 0. The variant is the
 * one asked for, else a finished tournament's winner (the alive candidate
 * of rank 1, as the result names it), else 0: the baseline or the only one. */
static void convergence(gateway *g, gw_request *r, uint64_t id)
{
    char text[16];
    uint64_t variant = 0;
    bool asked = arg(r, "variant", text, sizeof text) != NULL;
    if (asked && (((variant = parse_id(text)) == 0 && strcmp(text, "0") != 0) || variant > INT32_MAX)) {
        fail(g, r, 400, "variant", "must be a whole number: 0 for the baseline or the first candidate");
        return;
    }
    cd_query *q = cd_query_new(
        "SELECT v.n, v.variant, v.all_in_one, j.item_count, j.result FROM (SELECT id, "
        "strategy = 'stat_weights' AS all_in_one, "
        "CASE strategy WHEN 'tournament' THEN jsonb_array_length(spec->'candidates') "
        "WHEN 'stat_weights' THEN 1 + jsonb_array_length(spec->'weights') ELSE 1 END AS n, "
        "coalesce($2::int, (SELECT (c.i - 1)::int FROM jsonb_array_elements(result->'candidates') "
        "WITH ORDINALITY c(v, i) WHERE jsonb_typeof(result->'winner') = 'string' "
        "AND (c.v->>'alive')::boolean AND (c.v->>'rank')::int = 1 ORDER BY c.i DESC LIMIT 1), 0) AS variant "
        "FROM jobs WHERE id = $1) v "
        "LEFT JOIN journal j ON j.job_id = v.id AND j.type = 1 "
        "AND j.variant = CASE WHEN v.all_in_one THEN 0 ELSE v.variant END ORDER BY j.seq");
    cd_query_int(q, (int64_t)id);
    if (asked)
        cd_query_int(q, (int64_t)variant);
    else
        cd_query_text(q, NULL);
    ask(g, r, q, P_CONVERGENCE);
}

static void cancel_job(gateway *g, gw_request *r, uint64_t id)
{
    cd_query *q = cd_query_new("SELECT owner, state FROM jobs WHERE id = $1");
    cd_query_int(q, (int64_t)id);
    ask(g, r, q, P_CANCEL_LOOK);
}

/* ---- tokens API ----------------------------------------------------------------------------- */

static bool str_copy(const msgpack_object *o, char *out, size_t cap, size_t min)
{
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size < min || o->via.str.size >= cap)
        return false;
    memcpy(out, o->via.str.ptr, o->via.str.size);
    out[o->via.str.size] = '\0';
    return true;
}

static void create_token(gateway *g, gw_request *r)
{
    char kind[8] = "", owner[129], tier[16] = "own", note[257] = "", field[64] = "", err[160];
    const char *why = NULL; /* what is wrong with field ("" = the whole body) */
    int64_t expires = -1;
    snprintf(owner, sizeof owner, "%s", r->owner);
    msgpack_sbuffer buf;
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_sbuffer_init(&buf);
    msgpack_unpacked_init(&up);
    if (sf_json_to_msgpack(r->body, r->body_len, &buf, err, sizeof err) != 0) {
        why = "the body is not valid JSON";
    } else if (msgpack_unpack_next(&up, buf.data, buf.size, &off) != MSGPACK_UNPACK_SUCCESS ||
               up.data.type != MSGPACK_OBJECT_MAP) {
        why = "the body must be a JSON object";
        err[0] = '\0';
    } else {
        const msgpack_object_map *m = &up.data.via.map;
        for (uint32_t i = 0; i < m->size && why == NULL; i++) {
            const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
            snprintf(field, sizeof field, "%.*s", k->type == MSGPACK_OBJECT_STR ? (int)k->via.str.size : 1,
                k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?");
            if (sf_mp_streq(k, "kind")) {
                if (!sf_mp_streq(v, "api") && !sf_mp_streq(v, "claim"))
                    why = "must be \"api\" or \"claim\"";
                else
                    str_copy(v, kind, sizeof kind, 1);
            } else if (sf_mp_streq(k, "owner")) {
                if (!str_copy(v, owner, sizeof owner, 1))
                    why = "must be a name of 1 to 128 characters";
            } else if (sf_mp_streq(k, "tier")) {
                if (!sf_mp_streq(v, "own") && !sf_mp_streq(v, "team") && !sf_mp_streq(v, "community") && !sf_mp_streq(v, "public"))
                    why = "must be own, team, community or public";
                else
                    str_copy(v, tier, sizeof tier, 1);
            } else if (sf_mp_streq(k, "expires_in")) {
                if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 < 1 || v->via.u64 > 10u * 365 * 86400)
                    why = "must be a number of seconds from 1 to 10 years";
                else
                    expires = (int64_t)v->via.u64;
            } else if (sf_mp_streq(k, "note")) {
                if (!str_copy(v, note, sizeof note, 0))
                    why = "must be a text of up to 256 characters";
            } else {
                why = "unknown field (known: kind, owner, tier, expires_in, note)";
            }
        }
        if (why == NULL && kind[0] == '\0') {
            snprintf(field, sizeof field, "kind");
            why = "is required: \"api\" or \"claim\"";
        }
    }
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&buf);
    if (why != NULL) {
        char full[256];
        snprintf(full, sizeof full, "%s%s%s", why, field[0] == '\0' && err[0] ? ": " : "", field[0] ? "" : err);
        fail(g, r, 400, field[0] ? field : NULL, full);
        return;
    }
    if (!r->admin && strcmp(owner, r->owner) != 0) {
        fail(g, r, 403, "owner", "only an admin token creates tokens for another owner");
        return;
    }
    bool claim = strcmp(kind, "claim") == 0;
    if (claim && expires < 0)
        expires = 86400;
    char token[96];
    token_new(token, sizeof token, claim ? "sfc_" : "sf_");
    unsigned char hash[32];
    token_hash(token, hash);
    cd_query *q = cd_query_new(
        "INSERT INTO tokens (kind, owner, tier, secret_hash, note, expires_at) "
        "VALUES ($1, $2, $3, $4, nullif($5, ''), CASE WHEN $6::bigint IS NULL THEN NULL "
        "ELSE now() + make_interval(secs => $6::bigint) END) "
        "RETURNING json_build_object('id', id, 'kind', kind, 'owner', owner, 'tier', tier, 'token', $7::text, "
        "'expires_at', expires_at, 'note', note)::text");
    cd_query_text(q, kind);
    cd_query_text(q, owner);
    cd_query_text(q, tier);
    cd_query_bytes(q, hash, sizeof hash);
    cd_query_text(q, note);
    if (expires >= 0)
        cd_query_int(q, expires);
    else
        cd_query_text(q, NULL);
    cd_query_text(q, token);
    sodium_memzero(token, sizeof token);
    ask(g, r, q, P_TOKEN_NEW);
}

static void list_tokens(gateway *g, gw_request *r)
{
    cd_query *q = cd_query_new(
        "SELECT coalesce(json_agg(t ORDER BY t.id), '[]')::text FROM (SELECT id, kind, owner, tier, note, "
        "created_at, expires_at, used_at, revoked_at FROM tokens WHERE $1 OR owner = $2) t");
    cd_query_text(q, r->admin ? "true" : "false");
    cd_query_text(q, r->owner);
    ask(g, r, q, P_TOKENS);
}

static void revoke_token(gateway *g, gw_request *r, uint64_t id)
{
    cd_query *q = cd_query_new(
        "UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND ($2 OR owner = $3) "
        "RETURNING json_build_object('id', id, 'revoked_at', revoked_at)::text");
    cd_query_int(q, (int64_t)id);
    cd_query_text(q, r->admin ? "true" : "false");
    cd_query_text(q, r->owner);
    ask(g, r, q, P_TOKEN_REVOKE);
}

/* ---- nodes ------------------------------------------------------------------------------------ */

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

static bool node_filter_parse(gateway *g, gw_request *r, node_filter *f)
{
    static const char *const statuses[] = { "online", "offline", "revoked" };
    static const char *const tiers[] = { "own", "team", "community", "public" };
    char num[24];
    memset(f, 0, sizeof *f);
    f->has_status = arg(r, "status", f->status, sizeof f->status) != NULL;
    f->has_owner = arg(r, "owner", f->owner, sizeof f->owner) != NULL;
    f->has_tier = arg(r, "tier", f->tier, sizeof f->tier) != NULL;
    if (f->has_status && !one_of(f->status, statuses, 3)) {
        fail(g, r, 400, "status", "must be online, offline or revoked");
        return false;
    }
    if (f->has_tier && !one_of(f->tier, tiers, 4)) {
        fail(g, r, 400, "tier", "must be own, team, community or public");
        return false;
    }
    if (!arg_limit(g, r, &f->limit))
        return false;
    if (arg(r, "offset", num, sizeof num) != NULL) {
        uint64_t v = parse_id(num);
        if (v == 0 && strcmp(num, "0") != 0) {
            fail(g, r, 400, "offset", "must be a whole number, 0 or more");
            return false;
        }
        f->offset = (int64_t)v;
    }
    return true;
}

/* The nodes (all, those the filters pass, or the one with id `one`) with
 * their work in all (sql/007_node_totals.sql) less what their live
 * sessions last wrote, as nodes_json adds what those sessions count now:
 * one snapshot of the database, so a write landing meanwhile is counted
 * once either way. Only a session that has had chunks accepted can have
 * written a row; each is looked up by its key alone (the LIMIT keeps the
 * planner from scanning all of node_work to hash it, which it prefers for
 * thousands of keys). Online nodes first, as nodes_json lists them, so a
 * page is a page of that list. */
static void ask_nodes(gateway *g, gw_request *r, uint64_t one)
{
    node_filter f = { 0 };
    if (one == 0 && !node_filter_parse(g, r, &f))
        return;
    views vs = { NULL, 0, 0 };
    cd_sessions_each(g->nodes, collect_view, &vs);
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
        "n.revoked_at) x "
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
    ask(g, r, q, one ? P_NODE : P_NODES);
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
static char *nodes_json(gateway *g, PGresult *res, bool one, const char *status)
{
    int only = status == NULL ? -1 : strcmp(status, "online") == 0 ? 1 : strcmp(status, "offline") == 0 ? 0 : -1;
    views vs = { NULL, 0, 0 };
    cd_sessions_each(g->nodes, collect_view, &vs);
    if (vs.n > 1)
        qsort(vs.v, vs.n, sizeof *vs.v, view_cmp);
    int rows = PQntuples(res);
    size_t cap = 16, len = 0;
    for (int i = 0; i < rows; i++)
        cap += (size_t)PQgetlength(res, i, 1) + 800; /* the live fields, up to 16 backend speeds */
    char *out = malloc(cap);
    if (out == NULL)
        sf_oom(cap);
    out[len++] = '[';
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < rows; i++) {
            uint64_t id = strtoull(PQgetvalue(res, i, 0), NULL, 10);
            cd_node_view key = { .node = id };
            const cd_node_view *v = vs.n ? bsearch(&key, vs.v, vs.n, sizeof *vs.v, view_cmp) : NULL;
            if ((pass == 0) != (v != NULL) || (only >= 0 && only != (v != NULL)))
                continue;
            const char *row = PQgetvalue(res, i, 1);
            size_t rl = strlen(row);
            if (len > 1)
                out[len++] = ',';
            memcpy(out + len, row, rl - 1); /* without its closing brace */
            len += rl - 1;
            uint64_t chunks = strtoull(PQgetvalue(res, i, 2), NULL, 10) + (v ? v->chunks_done : 0);
            uint64_t items = strtoull(PQgetvalue(res, i, 3), NULL, 10) + (v ? v->items_done : 0);
            len += (size_t)snprintf(out + len, cap - len, ",\"chunks_total\":%" PRIu64 ",\"items_total\":%" PRIu64,
                chunks, items);
            if (v == NULL) {
                len += (size_t)snprintf(out + len, cap - len, ",\"online\":false}");
                continue;
            }
            for (unsigned b = 0; b < v->nbackend_speeds; b++)
                len += (size_t)snprintf(out + len, cap - len, "%s%.0f", b ? "," : ",\"backend_items_per_s\":[",
                    v->backend_items_per_s[b]);
            if (v->nbackend_speeds > 0)
                out[len++] = ']';
            len += (size_t)snprintf(out + len, cap - len,
                ",\"online\":true,\"max_parallel\":%u,\"slots\":%u,"
                "\"in_flight\":%u,\"chunks_done\":%" PRIu64 ",\"items_done\":%" PRIu64 ",\"items_per_s\":%.0f,"
                "\"connected_ms\":%" PRIu64 ",\"last_seen_ms\":%" PRIu64 "}",
                v->max_parallel, v->slots, v->in_flight, v->chunks_done, v->items_done,
                v->items_per_s, v->connected_ms, v->last_seen_ms);
        }
    snprintf(out + len, cap - len, "]\n");
    free(vs.v);
    if (one) { /* the element alone: [ and ]\n off */
        size_t n = strlen(out);
        memmove(out, out + 1, n - 3);
        strcpy(out + n - 3, "\n");
    }
    return out;
}

/* ---- routing ---------------------------------------------------------------------------------- */

/* 200 while the database is up, the coordinator's lock held and the store
 * takes queries; 503 while the database is away (requests that need it
 * wait, then fail), while the lock is not held (no work is handed out), or
 * while the backlog is full (writes are refused), with the backlog's gauges
 * either way. */
static void health(gateway *g, gw_request *r)
{
    cd_store_backlog b;
    cd_store_backlog_get(g->store, &b);
    bool ok = g->db_up && !g->unlocked && !b.refusing;
    char ago[32] = "null";
    if (b.unreachable_ms >= 0)
        snprintf(ago, sizeof ago, "%.1f", (double)b.unreachable_ms / 1000.0);
    gw_respond(g, r->session, ok ? 200 : 503, "application/json",
        sf_fmt("{\"status\":\"%s\",\"database\":\"%s\",\"lock\":\"%s\",\"version\":\"%s\",\"database_unreachable_s\":%s,"
               "\"backlog\":{\"state\":\"%s\",\"queries\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"limit_bytes\":%" PRIu64
               ",\"refused\":%" PRIu64 "}}\n",
            b.refusing ? "refusing" : ok ? "ok" : "degraded", g->db_up ? "up" : "down",
            g->db_up && !g->unlocked ? "held" : "not held", SF_VERSION, ago,
            b.refusing ? "refusing" : "accepting", b.queries, b.bytes, b.limit, b.refused),
        NULL);
    done(r);
}

/* a then b in a new string; frees both */
static char *cat(char *a, char *b)
{
    char *ab = sf_fmt("%s%s", a, b);
    free(a);
    free(b);
    return ab;
}

/* The work the farm does: jobs, claims, chunk results (sessions, loop
 * thread) and the ledger's figures (the scheduler's last sweep). */
static char *work_metrics(gateway *g)
{
    cd_scheduler_stats ss;
    cd_scheduler_stats_get(g->scheduler, &ss);
    cd_sessions_stats ns;
    cd_sessions_stats_get(g->nodes, &ns);
    static const char *const outcome[CD_RESULT_KINDS] = { "accepted", "idempotent", "conflict", "stale", "invalid",
        "unanswered" };
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
        ss.jobs, ss.claims, ss.expired, ss.released, ss.given_back, ss.conflicts_written, ss.conflicts_restored, ns.items_accepted,
        ns.cut_off, ns.refused);
    for (int i = 0; i < CD_RESULT_KINDS; i++)
        m = cat(m, sf_fmt("simfarm_chunk_results_total{outcome=\"%s\"} %" PRIu64 "\n", outcome[i], ns.results[i]));
    m = cat(m, sf_fmt("# HELP simfarm_jobs_finished_total Jobs ended since the start, by state.\n"
                      "# TYPE simfarm_jobs_finished_total counter\n"));
    for (int i = 0; i < GW_END_STATES; i++)
        m = cat(m, sf_fmt("simfarm_jobs_finished_total{state=\"%s\"} %" PRIu64 "\n", gw_end_states[i],
                       g->finished[i]));
    return m;
}

static void metrics(gateway *g, gw_request *r)
{
    rt_system_stats st;
    rt_system_stats_get(rt_actor_system(g->self), &st);
    cd_store_backlog b;
    cd_store_backlog_get(g->store, &b);
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
               "# TYPE simfarm_database_unreachable_seconds gauge\nsimfarm_database_unreachable_seconds %.1f\n",
            g->db_up, g->db_up && !g->unlocked, st.actors_live, st.messages, cd_sessions_count(g->nodes), g->nevc,
            cd_events_count(g->events),
            g->by_class[2], g->by_class[4], g->by_class[5], b.queries, b.bytes, b.limit, b.refusing ? 1 : 0,
            b.refused, b.unreachable_ms < 0 ? -1.0 : (double)b.unreachable_ms / 1000.0);
    m = cat(m, work_metrics(g));
    if (g->tls != NULL)
        m = cat(m, sf_fmt("# HELP simfarm_tls_cert_not_after_seconds When the TLS certificate served expires "
                          "(Unix time).\n"
                          "# TYPE simfarm_tls_cert_not_after_seconds gauge\nsimfarm_tls_cert_not_after_seconds %" PRId64
                          "\n"
                          "# HELP simfarm_tls_reloads_total Reloads of the TLS certificate (SIGHUP) by result.\n"
                          "# TYPE simfarm_tls_reloads_total counter\n"
                          "simfarm_tls_reloads_total{result=\"done\"} %" PRIu64 "\n"
                          "simfarm_tls_reloads_total{result=\"refused\"} %" PRIu64 "\n",
                       cd_tlscert_not_after(g->tls), g->tls_reloaded, g->tls_refused));
    gw_respond(g, r->session, 200, "text/plain; version=0.0.4", m, NULL);
    done(r);
}

/* The kernels and their parameters, from the tables the kernels' parsers
 * check against, and the strategies this coordinator runs. */
static void kernels(gateway *g, gw_request *r)
{
    size_t len = 0;
    sim_kernels_json(NULL, 0, &len);
    char *desc = malloc(len + 1);
    if (desc == NULL)
        sf_oom(len + 1);
    if (sim_kernels_json(desc, len + 1, &len) != 0) {
        free(desc);
        fail(g, r, 500, NULL, "the kernels' description does not fit its buffer");
        return;
    }
    ok_json(g, r, 200, sf_fmt("{\"strategies\":[\"single\",\"tournament\",\"stat_weights\"],\"kernels\":%s}\n", desc));
    free(desc);
}

/* ---- /ws/events tickets ------------------------------------------------------------------------ */

/* POST /api/events/ticket: a ticket that opens one /ws/events connection
 * within GW_TICKET_MS (ws/events?ticket=...), for a browser, which cannot
 * send its token with a WebSocket. The oldest ticket makes room. */
static void events_ticket(gateway *g, gw_request *r)
{
    uint64_t now = rt_mono_ms();
    gw_ticket *t = &g->tickets[0];
    for (size_t i = 0; i < GW_TICKETS; i++) {
        if (g->tickets[i].expires_ms <= now) {
            t = &g->tickets[i];
            break;
        }
        if (g->tickets[i].expires_ms < t->expires_ms)
            t = &g->tickets[i];
    }
    unsigned char raw[16];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(t->hex, sizeof t->hex, raw, sizeof raw);
    t->expires_ms = now + GW_TICKET_MS;
    ok_json(g, r, 201, sf_fmt("{\"ticket\":\"%s\",\"expires_in_s\":%d}\n", t->hex, GW_TICKET_MS / 1000));
}

bool gw_ticket_take(gateway *g, const char *hex)
{
    uint64_t now = rt_mono_ms();
    if (strlen(hex) != 32)
        return false;
    for (size_t i = 0; i < GW_TICKETS; i++) {
        gw_ticket *t = &g->tickets[i];
        if (t->expires_ms > now && sodium_memcmp(t->hex, hex, 32) == 0) {
            t->expires_ms = 0; /* once */
            return true;
        }
    }
    return false;
}

/* After authentication (when needed): the work itself. */
static void dispatch(gateway *g, gw_request *r)
{
    const char *p = r->path;
    uint64_t id;
    if (strcmp(p, "/api/jobs") == 0) {
        if (r->method == GW_POST)
            submit(g, r);
        else
            list_jobs(g, r);
    } else if (strncmp(p, "/api/jobs/", 10) == 0) {
        const char *rest = p + 10 + strcspn(p + 10, "/");
        if ((id = path_job_id(r)) == 0)
            fail(g, r, 404, NULL, "no such job: ids are positive whole numbers");
        else if (strcmp(rest, "/cancel") == 0)
            cancel_job(g, r, id);
        else if (strcmp(rest, "/convergence") == 0)
            convergence(g, r, id);
        else
            one_job(g, r, id);
    } else if (strcmp(p, "/api/nodes") == 0) {
        ask_nodes(g, r, 0);
    } else if (strncmp(p, "/api/nodes/", 11) == 0) {
        if ((id = parse_id(p + 11)) == 0)
            fail(g, r, 404, NULL, "no such node: ids are positive whole numbers");
        else
            ask_nodes(g, r, id);
    } else if (strcmp(p, "/api/kernels") == 0) {
        kernels(g, r);
    } else if (strcmp(p, "/api/events/ticket") == 0) {
        events_ticket(g, r);
    } else if (strcmp(p, "/metrics") == 0) {
        metrics(g, r);
    } else if (strcmp(p, "/api/tokens") == 0) {
        if (r->method == GW_POST)
            create_token(g, r);
        else
            list_tokens(g, r);
    } else if (strncmp(p, "/api/tokens/", 12) == 0) {
        if ((id = parse_id(p + 12)) == 0)
            fail(g, r, 404, NULL, "no such token: ids are positive whole numbers");
        else
            revoke_token(g, r, id);
    } else {
        fail(g, r, 404, NULL, "no such path");
    }
}

/* Which method each path takes, and whether it needs a token. Returns 0
 * for an unknown path, -1 for a known path with the wrong method. */
static int allowed(const gw_request *r, bool *needs_token)
{
    const char *p = r->path;
    int m = r->method;
    *needs_token = m != GW_GET;
    if (strcmp(p, "/health") == 0 || strcmp(p, "/metrics") == 0 || strcmp(p, "/api/nodes") == 0 ||
        strncmp(p, "/api/nodes/", 11) == 0 || strcmp(p, "/api/kernels") == 0)
        return m == GW_GET ? 1 : -1;
    if (strcmp(p, "/api/jobs") == 0)
        return m == GW_GET || m == GW_POST ? 1 : -1;
    if (strncmp(p, "/api/jobs/", 10) == 0) {
        const char *slash = strchr(p + 10, '/');
        if (slash == NULL)
            return m == GW_GET ? 1 : -1;
        if (strcmp(slash, "/convergence") == 0)
            return m == GW_GET ? 1 : -1;
        return strcmp(slash, "/cancel") != 0 ? 0 : m == GW_POST ? 1 : -1;
    }
    if (strcmp(p, "/api/tokens") == 0) {
        *needs_token = true;
        return m == GW_GET || m == GW_POST ? 1 : -1;
    }
    if (strncmp(p, "/api/tokens/", 12) == 0)
        return m == GW_DELETE ? 1 : -1;
    if (strcmp(p, "/api/events/ticket") == 0)
        return m == GW_POST ? 1 : -1;
    return 0;
}

void api_route(gateway *g, gw_request *r)
{
    rt_take(g->self, &r->hdr);
    bool needs_token;
    int a = allowed(r, &needs_token);
    if (a == 0) {
        fail(g, r, 404, NULL, "no such path");
    } else if (a < 0) {
        fail(g, r, 405, NULL, "method not allowed here");
    } else if (r->query_too_long) {
        fail(g, r, 414, NULL, "the query string is longer than 511 bytes decoded");
    } else if (r->query_nul) {
        fail(g, r, 400, NULL, "a query argument holds a NUL byte (%00)");
    } else if (strcmp(r->path, "/health") == 0) {
        health(g, r);
    } else if (needs_token || g->private_reads) {
        authenticate(g, r);
    } else {
        dispatch(g, r);
    }
}

/* ---- answers ------------------------------------------------------------------------------------ */

static void answer_cancel_look(gateway *g, gw_request *r, PGresult *res)
{
    if (PQntuples(res) == 0) {
        fail(g, r, 404, NULL, "no such job");
        return;
    }
    const char *owner = PQgetvalue(res, 0, 0), *state = PQgetvalue(res, 0, 1);
    if (!r->admin && strcmp(owner, r->owner) != 0) {
        fail(g, r, 403, NULL, "this job belongs to another owner");
        return;
    }
    if (strcmp(state, "pending") != 0 && strcmp(state, "running") != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "the job has already ended (%s)", state);
        fail(g, r, 409, NULL, msg);
        return;
    }
    cd_query *q = cd_query_new("UPDATE jobs SET state = 'cancelled', finished_at = now() "
                               "WHERE id = $1 AND state IN ('pending', 'running') RETURNING id");
    cd_query_int(q, (int64_t)path_job_id(r));
    ask(g, r, q, P_CANCEL_DO);
}

static void answer_cancel_do(gateway *g, gw_request *r, PGresult *res)
{
    if (PQntuples(res) == 0) {
        fail(g, r, 409, NULL, "the job has already ended");
        return;
    }
    uint64_t id = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    cd_cancel_job *c = RT_MSG_NEW(cd_cancel_job, CD_MSG_CANCEL_JOB);
    c->job = id;
    rt_send(g->scheduler, &c->hdr);
    cd_sessions_cancel_job(g->nodes, id, "cancelled"); /* the scheduler sends job.finished */
    ok_json(g, r, 200, sf_fmt("{\"id\":%" PRIu64 ",\"state\":\"cancelled\"}\n", id));
}

static void answer_one(gateway *g, gw_request *r, PGresult *res)
{
    if (PQntuples(res) == 0) {
        fail(g, r, 404, NULL, "no such job");
        return;
    }
    const char *row = PQgetvalue(res, 0, 0);
    const char *prog = cd_events_progress(g->events, path_job_id(r));
    if (prog == NULL) {
        ok_json(g, r, 200, sf_fmt("%s\n", row));
        return;
    }
    size_t rl = strlen(row);
    ok_json(g, r, 200, sf_fmt("%.*s,\"progress\":%s}\n", (int)(rl - 1), row, prog));
}

/* The statistics of variant v of `variants` in one chunk's result
 * (sc_result_encode's format: per statistic a 4-byte little-endian length
 * and sim_stats_encode's bytes; variant-major, every variant's outputs,
 * when one result holds them all): how many, or -1 when the bytes are not
 * that. */
static int result_stats(const unsigned char *p, size_t len, long variants, long v, sim_stats *out)
{
    long total = 0;
    for (size_t off = 0; off < len; total++) {
        size_t k;
        if (len - off < 4 || (k = (size_t)p[off] | (size_t)p[off + 1] << 8 | (size_t)p[off + 2] << 16 |
                                  (size_t)p[off + 3] << 24) > len - off - 4)
            return -1;
        off += 4 + k;
    }
    long per = total / variants;
    if (per == 0 || per > SIM_MAX_OUT || per * variants != total)
        return -1;
    for (long i = 0; i < v * per + per; i++) {
        size_t k = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
        if (i >= v * per && sim_stats_decode(&out[i - v * per], p + 4, k) != 0)
            return -1;
        p += 4 + k;
    }
    return (int)per;
}

enum { CONV_POINTS = 256 };

static void put_num(char *out, size_t cap, size_t *n, double v)
{
    if (v != v || v > 1.7e308 || v < -1.7e308)
        *n += (size_t)snprintf(out + *n, cap - *n, ",null");
    else
        *n += (size_t)snprintf(out + *n, cap - *n, ",%.17g", v);
}

/* The running estimate after each accepted chunk, merged in the order they
 * were accepted, at most CONV_POINTS of them evenly spread (the last always
 * among them): [items, mean, stderr of each output...]. */
static void answer_convergence(gateway *g, gw_request *r, PGresult *res)
{
    int rows = PQntuples(res);
    if (rows == 0) {
        fail(g, r, 404, NULL, "no such job");
        return;
    }
    long variants = strtol(PQgetvalue(res, 0, 0), NULL, 10), variant = strtol(PQgetvalue(res, 0, 1), NULL, 10);
    if (variant >= variants) {
        char msg[96];
        snprintf(msg, sizeof msg, "this job has %ld variant%s: 0 .. %ld", variants, variants == 1 ? "" : "s",
            variants - 1);
        fail(g, r, 400, "variant", msg);
        return;
    }
    bool all_in_one = PQgetvalue(res, 0, 2)[0] == 't';
    if (PQgetisnull(res, 0, 4))
        rows = 0;
    sim_stats agg[SIM_MAX_OUT], one[SIM_MAX_OUT];
    int nout = 0;
    uint64_t items = 0, bad = 0;
    int shown = rows < CONV_POINTS ? rows : CONV_POINTS;
    size_t cap = 128 + (size_t)shown * (24 + SIM_MAX_OUT * 52), n = 0;
    char *out = malloc(cap);
    if (out == NULL)
        sf_oom(cap);
    n += (size_t)snprintf(out, cap, "{\"job\":%" PRIu64 ",\"variant\":%ld,\"chunks\":%d,\"points\":[",
        path_job_id(r), variant, rows);
    int emitted = 0;
    for (int i = 0; i < rows; i++) {
        size_t len = 0;
        unsigned char *bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(res, i, 4), &len);
        int k = bytes != NULL ? result_stats(bytes, len, all_in_one ? variants : 1, all_in_one ? variant : 0, one)
                              : -1;
        PQfreemem(bytes);
        bool ok = k > 0 && (nout == 0 || k == nout);
        for (int o = 0; ok && nout > 0 && o < k; o++)
            ok = sim_stats_merge(&agg[o], &one[o]) == 0;
        if (!ok) { /* the ledger checked every accepted result: not expected */
            bad++;
            continue;
        }
        if (nout == 0) {
            nout = k;
            memcpy(agg, one, (size_t)k * sizeof *agg);
        }
        items += strtoull(PQgetvalue(res, i, 3), NULL, 10);
        /* row i shows when it crosses the next of `shown` even steps */
        if ((uint64_t)(i + 1) * (uint64_t)shown / (uint64_t)rows == (uint64_t)i * (uint64_t)shown / (uint64_t)rows)
            continue;
        n += (size_t)snprintf(out + n, cap - n, "%s[%" PRIu64, emitted++ ? "," : "", items);
        for (int o = 0; o < nout; o++) {
            put_num(out, cap, &n, sim_stats_mean(&agg[o]));
            put_num(out, cap, &n, sim_stats_stderr(&agg[o]));
        }
        n += (size_t)snprintf(out + n, cap - n, "]");
    }
    snprintf(out + n, cap - n, "],\"outputs\":%d,\"unreadable\":%" PRIu64 "}\n", nout, bad);
    ok_json(g, r, 200, out);
}

/* The job stored, or the one stored earlier under the request's key (the
 * client's retry, or the store's: it sends a query again when its
 * connection broke before the answer, and a key the gateway drew is this
 * request's alone). */
static void answer_submit(gateway *g, gw_request *r, PGresult *res)
{
    if (PQntuples(res) == 0) { /* the same key's INSERT committed during this one */
        if (r->key[0])
            fail(g, r, 409, "Idempotency-Key", "a submission with this key is being stored right now: send it again");
        else
            fail(g, r, 503, NULL, "the database was storing this submission twice at once: send it again");
        return;
    }
    const char *id = PQgetvalue(res, 0, 0);
    bool created = PQgetvalue(res, 0, 1)[0] == 't', same = PQgetvalue(res, 0, 2)[0] == 't';
    if (!same) {
        char msg[160];
        snprintf(msg, sizeof msg, "was used for another submission (job %s): a new submission needs a new key", id);
        fail(g, r, 422, "Idempotency-Key", msg);
        return;
    }
    /* job.submitted comes from the scheduler as it takes the job in, with
     * the job's other events, so they arrive in order */
    if (created || !r->key[0])
        ok_json(g, r, 201, sf_fmt("{\"id\":%s,\"state\":\"pending\"}\n", id));
    else
        ok_json(g, r, 200, sf_fmt("{\"id\":%s,\"replayed\":true}\n", id));
}

void api_answer(gateway *g, rt_msg *m)
{
    gw_pending pd;
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
    gw_request *r = pd.r;
    cd_result *res = m->type == CD_MSG_RESULT ? (cd_result *)m : NULL;
    if (pd.kind == P_BOOT) {
        if (res != NULL && res->res != NULL) {
            g->boot_pending = false;
        } else if (res != NULL) {
            sf_log(SF_LOG_WARN, NULL, "cannot store the token file's token: %s", res->error);
        } else {
            boot_insert(g); /* no database yet: ask again */
        }
        return;
    }
    if (res == NULL) {
        fail(g, r, 503, NULL, "the database did not answer in time");
        return;
    }
    if (res->res == NULL) {
        /* A full backlog is the database's absence, not a fault of ours. */
        fail(g, r, res->code == CD_STORE_EFULL ? 503 : 500, NULL, res->error);
        return;
    }
    PGresult *pr = res->res;
    switch (pd.kind) {
    case P_AUTH:
        if (PQntuples(pr) == 0) {
            auth_failed(g, r, "unknown, revoked or expired API token", true);
            return;
        }
        snprintf(r->owner, sizeof r->owner, "%s", PQgetvalue(pr, 0, 0));
        r->admin = strcmp(r->owner, "admin") == 0;
        dispatch(g, r);
        break;
    case P_SUBMIT: answer_submit(g, r, pr); break;
    case P_LIST:
    case P_TOKENS: ok_json(g, r, 200, sf_fmt("%s\n", PQgetvalue(pr, 0, 0))); break;
    case P_ONE: answer_one(g, r, pr); break;
    case P_CONVERGENCE: answer_convergence(g, r, pr); break;
    case P_CANCEL_LOOK: answer_cancel_look(g, r, pr); break;
    case P_CANCEL_DO: answer_cancel_do(g, r, pr); break;
    case P_NODES: {
        char status[16];
        ok_json(g, r, 200, nodes_json(g, pr, false, arg(r, "status", status, sizeof status)));
        break;
    }
    case P_NODE:
        if (PQntuples(pr) == 0)
            fail(g, r, 404, NULL, "no such node");
        else
            ok_json(g, r, 200, nodes_json(g, pr, true, NULL));
        break;
    case P_TOKEN_NEW: ok_json(g, r, 201, sf_fmt("%s\n", PQgetvalue(pr, 0, 0))); break;
    case P_TOKEN_REVOKE:
        if (PQntuples(pr) == 0)
            fail(g, r, 404, NULL, "no such token of yours");
        else
            ok_json(g, r, 200, sf_fmt("%s\n", PQgetvalue(pr, 0, 0)));
        break;
    default: done(r); break;
    }
}
