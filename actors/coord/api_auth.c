/*
 * api_auth.c — API tokens (api_int.h): the check of a request's token
 * with its per-address limit on failures, the token file of `simfarm
 * serve`, and /api/tokens (create, list, revoke). Only the SHA-256 of a
 * secret is stored or looked up.
 */
#include "actors/coord/api_int.h"

#include "base/alloc.h"
#include "base/json.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

enum { FAIL_LIMIT = 10, FAIL_WINDOW_MS = 60000, TOKEN_BYTES = 32 };

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
static bool token_shape(const char *t)
{
    if (strncmp(t, "sf_", 3) != 0 || strlen(t) != 46)
        return false;
    for (const char *c = t + 3; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                *c == '_'))
            return false;
    return true;
}

static cd__api_fails *fail_slot(cd__api *api, const char *peer, bool create)
{
    cd__api_fails *oldest = &api->fails[0];
    for (int i = 0; i < CD__API_FAILS; i++) {
        if (api->fails[i].count > 0 && strcmp(api->fails[i].peer, peer) == 0)
            return &api->fails[i];
        if (api->fails[i].since_ms < oldest->since_ms)
            oldest = &api->fails[i];
    }
    if (!create)
        return NULL;
    memset(oldest, 0, sizeof *oldest);
    snprintf(oldest->peer, sizeof oldest->peer, "%s", peer);
    return oldest;
}

/* Seconds until peer may try again, or 0 when it is not blocked. */
static unsigned blocked_for(cd__api *api, const char *peer)
{
    cd__api_fails *f = fail_slot(api, peer, false);
    uint64_t now = rt_mono_ms();
    if (f == NULL || now - f->since_ms >= FAIL_WINDOW_MS || f->count < FAIL_LIMIT)
        return 0;
    return (unsigned)((f->since_ms + FAIL_WINDOW_MS - now) / 1000) + 1;
}

/* Answers 401. counted: a token was given and did not check out, which
 * counts against the address (FAIL_LIMIT in FAIL_WINDOW_MS block it). */
void cd__api_auth_failed(cd__api *api, cd__request *r, const char *why, bool counted)
{
    if (counted) {
        cd__api_fails *f = fail_slot(api, r->peer, true);
        uint64_t now = rt_mono_ms();
        if (f->count == 0 || now - f->since_ms >= FAIL_WINDOW_MS) {
            f->since_ms = now;
            f->count = 0;
        }
        f->count++;
    }
    char q[512];
    cd__api_reply(api, r, 401, "application/json", sf_fmt("{\"error\":%s}\n", cd_json_quote(q, sizeof q, why)),
        "WWW-Authenticate: Bearer realm=\"simfarm\"");
}

/* Checks the request's API token, then carries on with it. */
void cd__api_authenticate(cd__api *api, cd__request *r)
{
    unsigned wait = blocked_for(api, r->peer);
    if (wait > 0) {
        char retry[48];
        snprintf(retry, sizeof retry, "Retry-After: %u", wait);
        cd__api_reply(api, r, 429, "application/json",
            sf_fmt("{\"error\":\"too many failed attempts from this address: try again in %u s\"}\n", wait), retry);
        return;
    }
    if (r->auth[0] == '\0') {
        /* not a guess: no count against the address. A GET gets here
         * without one for /api/tokens, on any coordinator, or for any
         * read of a private one. */
        const char *why = r->method != CD__GET ? "this needs an API token: Authorization: Bearer sf_..."
            : strcmp(r->path, "/api/tokens") == 0
            ? "/api/tokens needs an API token: Authorization: Bearer sf_..."
            : "this coordinator is private: reading needs an API token too: Authorization: Bearer sf_...";
        cd__api_auth_failed(api, r, why, false);
        return;
    }
    const char *t = r->auth;
    if (strncasecmp(t, "Bearer ", 7) != 0) {
        cd__api_auth_failed(api, r, "the Authorization header must be 'Bearer sf_...' with an API token", true);
        return;
    }
    if (!token_shape(t + 7)) { /* a token mistyped or cut is unknown too: said as such */
        cd__api_auth_failed(api, r, "unknown API token: no token has this text (an API token is sf_ and 43 more "
            "characters, as simfarm token create prints it)", true);
        return;
    }
    unsigned char hash[32];
    token_hash(t + 7, hash);
    /* Until its row is written, the token file's token is known here. */
    if (api->boot_pending && sodium_memcmp(hash, api->boot_hash, sizeof hash) == 0) {
        snprintf(r->owner, sizeof r->owner, "admin");
        r->admin = true;
        cd__api_dispatch(api, r);
        return;
    }
    cd_query *q = cd_query_new(
        "SELECT owner FROM tokens WHERE secret_hash = $1 AND kind = 'api' AND revoked_at IS NULL "
        "AND (expires_at IS NULL OR expires_at > now())");
    cd_query_bytes(q, hash, sizeof hash);
    cd__api_ask(api, r, q, CD__ASK_AUTH);
}

/* Writes the token file's row; asked again until it is written (the
 * database may come up after the coordinator). */
void cd__api_boot_insert(cd__api *api)
{
    cd_query *q = cd_query_new("INSERT INTO tokens (kind, owner, secret_hash, note) VALUES ('api', 'admin', $1, $2) "
                               "ON CONFLICT (secret_hash) DO NOTHING");
    cd_query_bytes(q, api->boot_hash, sizeof api->boot_hash);
    cd_query_text(q, "the token file of simfarm serve");
    cd__api_ask(api, NULL, q, CD__ASK_BOOT);
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

int cd__api_token_file(cd__api *api, const char *path, sf_error *e)
{
    char token[96] = "";
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
            fclose(f);
            return sf_fail(e, CD_EIO, "%s is readable by others: chmod 600 it", path);
        }
        if (fgets(token, sizeof token, f) == NULL)
            token[0] = '\0';
        fclose(f);
        token[strcspn(token, "\r\n")] = '\0';
        if (!token_shape(token))
            return sf_fail(e, CD_EIO, "%s does not hold an API token (sf_ and 43 characters)", path);
    } else if (errno == ENOENT) {
        token_new(token, sizeof token, "sf_");
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        /* A PATH.tmp left from before is removed, not reused: opened as it
         * is, it would keep its mode (and a link would be followed), and
         * the token would be as readable as it was. O_EXCL makes the file
         * ours, 0600 from the start. */
        if (unlink(tmp) != 0 && errno != ENOENT) {
            sf_fail(e, CD_EIO, "cannot remove the stale %s: %s", tmp, strerror(errno));
            sodium_memzero(token, sizeof token);
            return CD_EIO;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            sf_fail(e, CD_EIO, "cannot create %s: %s", tmp, strerror(errno));
            sodium_memzero(token, sizeof token);
            return CD_EIO;
        }
        int err = write_all(fd, token, strlen(token));
        if (err == 0)
            err = write_all(fd, "\n", 1);
        if (close(fd) != 0 && err == 0)
            err = errno;
        if (err != 0)
            sf_fail(e, CD_EIO, "cannot write %s: %s", tmp, strerror(err));
        else if (rename(tmp, path) != 0) {
            err = errno;
            sf_fail(e, CD_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(err));
        }
        if (err != 0) {
            unlink(tmp);
            sodium_memzero(token, sizeof token);
            return CD_EIO;
        }
    } else {
        return sf_fail(e, CD_EIO, "cannot read %s: %s", path, strerror(errno));
    }
    /* The file's token is an admin token of this database (again, if it was
     * already: the insert does nothing then). */
    unsigned char hash[32];
    token_hash(token, hash);
    sodium_memzero(token, sizeof token);
    memcpy(api->boot_hash, hash, sizeof hash);
    api->boot_pending = true;
    cd__api_boot_insert(api);
    return 0;
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

void cd__api_create_token(cd__api *api, cd__request *r)
{
    char kind[8] = "", owner[129], tier[16] = "own", note[257] = "", field[64] = "", err[160];
    const char *why = NULL; /* what is wrong with field ("" = the whole body) */
    int64_t expires = -1, uses = -1;
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
            } else if (sf_mp_streq(k, "uses")) {
                if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 < 1 || v->via.u64 > 100000)
                    why = "must be a whole number of enrolments from 1 to 100000";
                else
                    uses = (int64_t)v->via.u64;
            } else if (sf_mp_streq(k, "note")) {
                if (!str_copy(v, note, sizeof note, 0))
                    why = "must be a text of up to 256 characters";
            } else {
                why = "unknown field (known: kind, owner, tier, expires_in, uses, note)";
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
        cd__api_fail(api, r, 400, field[0] ? field : NULL, full);
        return;
    }
    if (!r->admin && strcmp(owner, r->owner) != 0) {
        cd__api_fail(api, r, 403, "owner", "only an admin token creates tokens for another owner");
        return;
    }
    bool claim = strcmp(kind, "claim") == 0;
    if (uses >= 0 && !claim) {
        cd__api_fail(api, r, 400, "uses", "is for claim tokens only (how many nodes one enrols)");
        return;
    }
    if (claim && expires < 0)
        expires = 86400;
    char token[96];
    token_new(token, sizeof token, claim ? "sfc_" : "sf_");
    unsigned char hash[32];
    token_hash(token, hash);
    cd_query *q = cd_query_new(
        "INSERT INTO tokens (kind, owner, tier, secret_hash, note, expires_at, uses) "
        "VALUES ($1, $2, $3, $4, nullif($5, ''), CASE WHEN $6::bigint IS NULL THEN NULL "
        "ELSE now() + make_interval(secs => $6::bigint) END, $8::integer) "
        "RETURNING json_build_object('id', id, 'kind', kind, 'owner', owner, 'tier', tier, 'token', $7::text, "
        "'expires_at', expires_at, 'note', note, 'uses', CASE WHEN kind = 'claim' THEN uses END)::text");
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
    cd_query_int(q, uses > 0 ? uses : 1);
    sodium_memzero(token, sizeof token);
    cd__api_ask(api, r, q, CD__ASK_TOKEN_NEW);
}

void cd__api_list_tokens(cd__api *api, cd__request *r)
{
    cd_query *q = cd_query_new(
        "SELECT coalesce(json_agg(t ORDER BY t.id), '[]')::text FROM (SELECT id, kind, owner, tier, note, "
        "created_at, expires_at, used_at, revoked_at, CASE WHEN kind = 'claim' THEN uses END AS uses, "
        "CASE WHEN kind = 'claim' THEN used END AS used, CASE WHEN kind = 'claim' THEN uses - used END AS uses_left "
        "FROM tokens WHERE $1 OR owner = $2) t");
    cd_query_text(q, r->admin ? "true" : "false");
    cd_query_text(q, r->owner);
    cd__api_ask(api, r, q, CD__ASK_TOKENS);
}

void cd__api_revoke_token(cd__api *api, cd__request *r, uint64_t id)
{
    cd_query *q = cd_query_new(
        "UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND ($2 OR owner = $3) "
        "RETURNING json_build_object('id', id, 'revoked_at', revoked_at)::text");
    cd_query_int(q, (int64_t)id);
    cd_query_text(q, r->admin ? "true" : "false");
    cd_query_text(q, r->owner);
    cd__api_ask(api, r, q, CD__ASK_TOKEN_REVOKE);
}

