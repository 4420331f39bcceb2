/*
 * codec.c — table-driven encoder and decoder of the messages in msg.h.
 *
 * Each body is described once by a schema: its fields in wire order, with
 * kind, limit and where the value lives in the C struct. The decoder, the
 * encoder and the formatter all walk the same tables, so the three cannot
 * disagree about a field. Decoding: pr__scan() bounds the bytes, msgpack-c
 * unpacks them into a zone, and the schema walk copies typed values out,
 * allocating from the same zone (which becomes the message's arena).
 *
 * Memory: every allocation is a msgpack zone (decoding) or the growable
 * output buffer (encoding); a failure of either is reported as PR_ENOMEM and
 * nothing is left allocated. That is proto's whole out-of-memory policy; what
 * to do about it is the caller's decision.
 */
#include "proto/msg.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_int.h"

/* ---- schemas ---------------------------------------------------------------- */

/* K_LIST: an array of plain values, each as the element schema's one field
 * (at offset 0 of an element of the schema's size) says. */
enum kind { K_U64, K_U32, K_I32, K_BOOL, K_STR, K_BYTES, K_FIXED, K_ENUM, K_STRUCT, K_ARRAY, K_U64LIST, K_LIST };

typedef struct schema schema;

typedef struct field {
    const char *key;
    unsigned char kind;
    unsigned char opt;        /* optional: omitted when zero/empty, may be absent */
    short lenerr;             /* K_FIXED: the error for a wrong length */
    unsigned off;             /* offset of the value (K_ARRAY/K_U64LIST: the pointer) */
    unsigned off_n;           /* K_ARRAY/K_U64LIST: offset of the uint32_t count */
    uint32_t max;             /* length, count or enumeration size */
    const schema *sub;        /* K_STRUCT/K_ARRAY: the element's schema */
    const char *const *names; /* K_ENUM */
} field;

struct schema {
    const char *name;
    const field *fields;
    unsigned nfields;
    size_t size;
    int (*check)(const void *v); /* rules across fields; may be NULL */
    int (*decoded)(void *v);     /* turns what the wire says into the struct's form, before
                                    check; may be NULL */
};

#define NF(a) (unsigned)(sizeof(a) / sizeof((a)[0]))
#define SCALAR(T, k, kind, opt, m, max) { k, kind, opt, 0, (unsigned)offsetof(T, m), 0, max, NULL, NULL }
#define U64(T, k, m) SCALAR(T, k, K_U64, 0, m, 0)
#define U64_OPT(T, k, m) SCALAR(T, k, K_U64, 1, m, 0)
#define U32(T, k, m) SCALAR(T, k, K_U32, 0, m, 0)
#define U32_OPT(T, k, m) SCALAR(T, k, K_U32, 1, m, 0)
#define I32(T, k, m) SCALAR(T, k, K_I32, 0, m, 0)
#define BOOL_OPT(T, k, m) SCALAR(T, k, K_BOOL, 1, m, 0)
#define STR(T, k, m, max) SCALAR(T, k, K_STR, 0, m, max)
#define STR_OPT(T, k, m, max) SCALAR(T, k, K_STR, 1, m, max)
#define BYTES(T, k, m, max) SCALAR(T, k, K_BYTES, 0, m, max)
#define FIXED(T, k, m, err) { k, K_FIXED, 0, err, (unsigned)offsetof(T, m), 0, \
    (uint32_t)sizeof(((T *)0)->m), NULL, NULL }
#define ENUM(T, k, m, names) { k, K_ENUM, 0, 0, (unsigned)offsetof(T, m), 0, NF(names), NULL, names }
#define STRUCT(T, k, m, sub) { k, K_STRUCT, 0, 0, (unsigned)offsetof(T, m), 0, 0, &sub, NULL }
#define ARRAY(T, k, opt, m, n, max, sub) { k, K_ARRAY, opt, 0, (unsigned)offsetof(T, m), \
    (unsigned)offsetof(T, n), max, &sub, NULL }
#define LIST_OPT(T, k, m, n, max, sub) { k, K_LIST, 1, 0, (unsigned)offsetof(T, m), \
    (unsigned)offsetof(T, n), max, &sub, NULL }
#define U64LIST_OPT(T, k, m, n, max) { k, K_U64LIST, 1, 0, (unsigned)offsetof(T, m), \
    (unsigned)offsetof(T, n), max, NULL, NULL }
#define SCHEMA(T, name, f, check) { name, f, NF(f), sizeof(T), check, NULL }

static int check_range(uint64_t start, uint64_t count)
{
    return count == 0 || start > UINT64_MAX - count ? PR_ERANGE : 0;
}

static int check_chunk(const void *v)
{
    const pr_chunk *c = v;
    return check_range(c->start, c->count);
}

static int check_result(const void *v)
{
    const pr_result *r = v;
    return check_range(r->start, r->count);
}

static int check_ctx(const void *v)
{
    const pr_ctx *c = v;
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, c->bytes.ptr ? c->bytes.ptr : (const uint8_t *)"", c->bytes.len);
    return memcmp(h, c->hash, sizeof h) == 0 ? 0 : PR_EHASH;
}

static const char *const backend_names[] = { "cpu", "opencl", "cuda", "wasm" };
static const char *const outcome_names[] = { "accepted", "idempotent", "conflict", "stale", "malformed" };
static const char *const bye_names[] = { "draining", "leaving" };

static const field challenge_f[] = {
    FIXED(pr_challenge, "nonce", nonce, PR_EFIXLEN),
    STR(pr_challenge, "server", server, 64),
};
static const schema challenge_s = SCHEMA(pr_challenge, "challenge", challenge_f, NULL);

static const field backend_f[] = {
    ENUM(pr_backend, "kind", kind, backend_names),
    STR(pr_backend, "device", device, 128),
    U64(pr_backend, "memory", memory),
    U32_OPT(pr_backend, "units", units),
};
static const schema backend_s = SCHEMA(pr_backend, "backend", backend_f, NULL);

static const field caps_f[] = {
    U32(pr_caps, "cores", cores),
    U32(pr_caps, "max_parallel", max_parallel),
    STR_OPT(pr_caps, "os", os, 32),
    STR_OPT(pr_caps, "arch", arch, 32),
    STR_OPT(pr_caps, "browser", browser, 128),
    ARRAY(pr_caps, "backends", 0, backends, nbackends, 16, backend_s),
};
static const schema caps_s = SCHEMA(pr_caps, "caps", caps_f, NULL);

typedef struct str_item {
    const char *name;
} str_item;

static const field feature_f[] = {
    STR(str_item, "feature", name, PR_MAX_FEATURE_LEN),
};
static const schema feature_s = { "feature", feature_f, 1, sizeof(str_item), NULL, NULL };

static const field hello_f[] = {
    FIXED(pr_hello, "pk", pk, PR_EKEYLEN),
    U64(pr_hello, "ts", ts),
    FIXED(pr_hello, "sig", sig, PR_ESIGLEN),
    STR(pr_hello, "version", version, 64),
    STR_OPT(pr_hello, "claim_token", claim_token, 128),
    STRUCT(pr_hello, "caps", caps, caps_s),
    STR_OPT(pr_hello, "checksum", checksum, 64),
    LIST_OPT(pr_hello, "features", features, nfeatures, PR_MAX_FEATURES, feature_s),
    STR_OPT(pr_hello, "name", name, PR_MAX_NAME_LEN),
};
static const schema hello_s = SCHEMA(pr_hello, "hello", hello_f, NULL);

static const field config_f[] = {
    U32_OPT(pr_config, "max_parallel", max_parallel),
    U32_OPT(pr_config, "chunk_ms", chunk_ms),
    BOOL_OPT(pr_config, "paused", paused),
};
static const schema config_s = SCHEMA(pr_config, "config", config_f, NULL);

static const field welcome_f[] = {
    U64(pr_welcome, "node_id", node_id),
    U32(pr_welcome, "heartbeat_ms", heartbeat_ms),
    STRUCT(pr_welcome, "config", config, config_s),
};
static const schema welcome_s = SCHEMA(pr_welcome, "welcome", welcome_f, NULL);

static const field device_f[] = {
    STR(pr_device_stat, "device", device, 128),
    U32(pr_device_stat, "util", util_permille),
    U64(pr_device_stat, "mem_used", mem_used),
    U64(pr_device_stat, "mem_total", mem_total),
};
static const schema device_s = SCHEMA(pr_device_stat, "device", device_f, NULL);

static const field heartbeat_f[] = {
    U32(pr_heartbeat, "cpu", cpu_permille),
    U64(pr_heartbeat, "mem_used", mem_used),
    U64(pr_heartbeat, "mem_total", mem_total),
    ARRAY(pr_heartbeat, "devices", 1, devices, ndevices, 16, device_s),
    U64LIST_OPT(pr_heartbeat, "in_flight", in_flight, nin_flight, 4096),
    U32_OPT(pr_heartbeat, "max_parallel", max_parallel),
};
static const schema heartbeat_s = SCHEMA(pr_heartbeat, "heartbeat", heartbeat_f, NULL);

static const field chunk_f[] = {
    U64(pr_chunk, "chunk", chunk),
    FIXED(pr_chunk, "token", token, PR_EFIXLEN),
    U64(pr_chunk, "start", start),
    U64(pr_chunk, "count", count),
    U32(pr_chunk, "lease_ms", lease_ms),
    U32_OPT(pr_chunk, "variant", variant),
    U32_OPT(pr_chunk, "backend", backend),
};
static const schema chunk_s = SCHEMA(pr_chunk, "chunk", chunk_f, check_chunk);

static const field assign_f[] = {
    U64(pr_assign, "job", job),
    STR(pr_assign, "kernel", kernel, 64),
    FIXED(pr_assign, "ctx_hash", ctx_hash, PR_EFIXLEN),
    ARRAY(pr_assign, "chunks", 0, chunks, nchunks, 1024, chunk_s),
};
static const schema assign_s = SCHEMA(pr_assign, "assign", assign_f, NULL);

static const field ctx_req_f[] = {
    U64(pr_ctx_req, "job", job),
    FIXED(pr_ctx_req, "hash", hash, PR_EFIXLEN),
};
static const schema ctx_req_s = SCHEMA(pr_ctx_req, "ctx_req", ctx_req_f, NULL);

static const field ctx_f[] = {
    U64(pr_ctx, "job", job),
    FIXED(pr_ctx, "hash", hash, PR_EFIXLEN),
    BYTES(pr_ctx, "bytes", bytes, PR_MAX_PAYLOAD),
};
static const schema ctx_s = SCHEMA(pr_ctx, "ctx", ctx_f, check_ctx);

static const field result_f[] = {
    U64(pr_result, "chunk", chunk),
    FIXED(pr_result, "token", token, PR_EFIXLEN),
    U64(pr_result, "start", start),
    U64(pr_result, "count", count),
    U32_OPT(pr_result, "elapsed_ms", elapsed_ms),
    BYTES(pr_result, "data", data, 65536),
    U32_OPT(pr_result, "backend", backend),
};
static const schema result_s = SCHEMA(pr_result, "result", result_f, check_result);

static const field batch_f[] = {
    FIXED(pr_batch, "nonce", nonce, PR_EFIXLEN),
    U64(pr_batch, "job", job),
    FIXED(pr_batch, "ctx_hash", ctx_hash, PR_EFIXLEN),
    ARRAY(pr_batch, "results", 0, results, nresults, 1024, result_s),
};
static const schema batch_s = SCHEMA(pr_batch, "batch", batch_f, NULL);

static const field complete_f[] = {
    U64(pr_complete, "ts", ts),
    BYTES(pr_complete, "payload", payload, PR_MAX_PAYLOAD),
    FIXED(pr_complete, "sig", sig, PR_ESIGLEN),
};
static const schema complete_s = SCHEMA(pr_complete, "complete", complete_f, NULL);

static bool has_text(const char *t)
{
    return t != NULL && t[0] != '\0';
}

/* The malformed outcome has its reason and only it has one, in either form:
 * "malformed" with `reason`, or "stale" with `malformed`. An encoder given
 * half of either would write what decodes as something else. */
static int check_outcome(const void *v)
{
    const pr_outcome *o = v;
    if (o->outcome == PR_OUTCOME_MALFORMED && !has_text(o->reason))
        return PR_EMISSING;
    if (has_text(o->reason) && o->outcome != PR_OUTCOME_MALFORMED)
        return PR_EINVAL;
    return has_text(o->malformed) && o->outcome != PR_OUTCOME_STALE ? PR_EINVAL : 0;
}

/* An empty reason is none; a reason beside an outcome it does not belong
 * to names no outcome there is. */
static int settle_outcome(void *v)
{
    pr_outcome *o = v;
    if (!has_text(o->reason))
        o->reason = NULL;
    if (!has_text(o->malformed))
        o->malformed = NULL;
    if ((o->reason != NULL && o->outcome != PR_OUTCOME_MALFORMED) ||
        (o->malformed != NULL && o->outcome != PR_OUTCOME_STALE))
        return PR_EENUM;
    return 0;
}

void pr_outcome_malformed(pr_outcome *o, uint64_t chunk, const char *reason, bool feature)
{
    *o = feature ? (pr_outcome){ chunk, PR_OUTCOME_MALFORMED, reason, NULL }
                 : (pr_outcome){ chunk, PR_OUTCOME_STALE, NULL, reason };
}

pr_outcome_kind pr_outcome_read(const pr_outcome *o, const char **reason)
{
    *reason = NULL;
    if (o->outcome == PR_OUTCOME_MALFORMED)
        *reason = o->reason;
    else if (o->outcome == PR_OUTCOME_STALE && has_text(o->malformed))
        *reason = o->malformed;
    return *reason != NULL ? PR_OUTCOME_MALFORMED : (pr_outcome_kind)o->outcome;
}

bool pr_hello_has_feature(const pr_hello *h, const char *name)
{
    for (uint32_t i = 0; i < h->nfeatures; i++)
        if (h->features[i] != NULL && strcmp(h->features[i], name) == 0)
            return true;
    return false;
}

const char *pr_node_name_check(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0)
        return "is empty";
    if (n > PR_MAX_NAME_LEN)
        return "is longer than 64 bytes";
    if (!pr__utf8_ok(name, n))
        return "is not valid UTF-8";
    if (name[0] == ' ' || name[n - 1] == ' ')
        return "starts or ends with a space";
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        /* C0 and DEL, and C1 (U+0080..U+009F, UTF-8 c2 80..c2 9f) */
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return "holds a control character (a tab, a line break, an escape)";
    }
    return NULL;
}

static const field outcome_f[] = {
    U64(pr_outcome, "chunk", chunk),
    ENUM(pr_outcome, "outcome", outcome, outcome_names),
    STR_OPT(pr_outcome, "reason", reason, PR_MAX_REASON),
    STR_OPT(pr_outcome, "malformed", malformed, PR_MAX_REASON),
};
static const schema outcome_s = { "outcome", outcome_f, NF(outcome_f), sizeof(pr_outcome), check_outcome,
    settle_outcome };

static const field complete_ack_f[] = {
    U64(pr_complete_ack, "job", job),
    BOOL_OPT(pr_complete_ack, "job_complete", job_complete),
    ARRAY(pr_complete_ack, "outcomes", 0, outcomes, noutcomes, 1024, outcome_s),
};
static const schema complete_ack_s = SCHEMA(pr_complete_ack, "complete_ack", complete_ack_f, NULL);

static const field cancel_f[] = {
    U64(pr_cancel, "job", job),
    U64LIST_OPT(pr_cancel, "chunks", chunks, nchunks, 4096),
    STR_OPT(pr_cancel, "reason", reason, 256),
};
static const schema cancel_s = SCHEMA(pr_cancel, "cancel", cancel_f, NULL);

static const field error_f[] = {
    I32(pr_error_body, "code", code),
    STR(pr_error_body, "message", message, 1024),
};
static const schema error_s = SCHEMA(pr_error_body, "error", error_f, NULL);

static const field bye_f[] = {
    ENUM(pr_bye, "reason", reason, bye_names),
    STR_OPT(pr_bye, "message", message, 256),
};
static const schema bye_s = SCHEMA(pr_bye, "bye", bye_f, NULL);

/* Indexed by pr_type. */
static const schema *const bodies[PR_MSG_COUNT_] = {
    [PR_MSG_CHALLENGE] = &challenge_s,
    [PR_MSG_HELLO] = &hello_s,
    [PR_MSG_WELCOME] = &welcome_s,
    [PR_MSG_HEARTBEAT] = &heartbeat_s,
    [PR_MSG_ASSIGN] = &assign_s,
    [PR_MSG_CTX_REQ] = &ctx_req_s,
    [PR_MSG_CTX] = &ctx_s,
    [PR_MSG_COMPLETE] = &complete_s,
    [PR_MSG_COMPLETE_ACK] = &complete_ack_s,
    [PR_MSG_CANCEL] = &cancel_s,
    [PR_MSG_CONFIG] = &config_s,
    [PR_MSG_ERROR] = &error_s,
    [PR_MSG_BYE] = &bye_s,
};

const char *pr_type_name(pr_type t)
{
    return (unsigned)t < PR_MSG_COUNT_ && bodies[t] ? bodies[t]->name : NULL;
}

/* ---- access to struct members by offset -------------------------------------- */

#define AT(base, off) ((char *)(base) + (off))
#define CAT(base, off) ((const char *)(base) + (off))

static const void *get_ptr(const void *base, unsigned off)
{
    const void *p;
    memcpy(&p, CAT(base, off), sizeof p);
    return p;
}

static void set_ptr(void *base, unsigned off, const void *p)
{
    memcpy(AT(base, off), &p, sizeof p);
}

static uint32_t get_u32(const void *base, unsigned off)
{
    uint32_t v;
    memcpy(&v, CAT(base, off), sizeof v);
    return v;
}

/* ---- decoding ---------------------------------------------------------------- */

typedef struct dctx {
    msgpack_zone *zone;
    char *err_at;             /* NULL when the caller does not want it */
    size_t err_cap;
} dctx;

/* Puts seg in front of the error path: fields join with '.', indexes
 * ("[3]") directly. */
static void path_push(dctx *c, const char *seg)
{
    char tmp[64];
    if (c->err_at == NULL)
        return;
    const char *sep = c->err_at[0] == '\0' || c->err_at[0] == '[' ? "" : ".";
    snprintf(tmp, sizeof tmp, "%s%s%s", seg, sep, c->err_at);
    snprintf(c->err_at, c->err_cap, "%s", tmp);
}

static void *zalloc(dctx *c, size_t n)
{
    void *p = msgpack_zone_malloc(c->zone, n ? n : 1);
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

static int dec_u64(const msgpack_object *o, uint64_t *v)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        *v = o->via.u64;
        return 0;
    }
    return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? PR_EINT : PR_ETYPE;
}

static int decode_struct(dctx *c, const schema *s, const msgpack_object *o, void *dst);

static int decode_field(dctx *c, const field *f, const msgpack_object *o, void *dst)
{
    uint64_t u;
    int rc;

    switch (f->kind) {
    case K_U64:
        if ((rc = dec_u64(o, &u)) != 0)
            return rc;
        memcpy(AT(dst, f->off), &u, sizeof u);
        return 0;
    case K_U32: {
        if ((rc = dec_u64(o, &u)) != 0)
            return rc;
        if (u > UINT32_MAX)
            return PR_EINT;
        uint32_t v = (uint32_t)u;
        memcpy(AT(dst, f->off), &v, sizeof v);
        return 0;
    }
    case K_I32: {
        int32_t v;
        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            if (o->via.u64 > INT32_MAX)
                return PR_EINT;
            v = (int32_t)o->via.u64;
        } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
            if (o->via.i64 < INT32_MIN)
                return PR_EINT;
            v = (int32_t)o->via.i64;
        } else {
            return PR_ETYPE;
        }
        memcpy(AT(dst, f->off), &v, sizeof v);
        return 0;
    }
    case K_BOOL: {
        if (o->type != MSGPACK_OBJECT_BOOLEAN)
            return PR_ETYPE;
        bool v = o->via.boolean;
        memcpy(AT(dst, f->off), &v, sizeof v);
        return 0;
    }
    case K_STR: {
        if (o->type != MSGPACK_OBJECT_STR)
            return PR_ETYPE;
        if (o->via.str.size > f->max)
            return PR_ESTRLEN;
        if (!pr__utf8_ok(o->via.str.ptr, o->via.str.size))
            return PR_EUTF8;
        char *s = zalloc(c, (size_t)o->via.str.size + 1);
        if (s == NULL)
            return PR_ENOMEM;
        memcpy(s, o->via.str.ptr, o->via.str.size);
        set_ptr(dst, f->off, s);
        return 0;
    }
    case K_BYTES: {
        if (o->type != MSGPACK_OBJECT_BIN)
            return PR_ETYPE;
        if (o->via.bin.size > f->max)
            return PR_EBINSIZE;
        uint8_t *p = zalloc(c, o->via.bin.size);
        if (p == NULL)
            return PR_ENOMEM;
        memcpy(p, o->via.bin.ptr, o->via.bin.size);
        pr_bytes b = { p, o->via.bin.size };
        memcpy(AT(dst, f->off), &b, sizeof b);
        return 0;
    }
    case K_FIXED:
        if (o->type != MSGPACK_OBJECT_BIN)
            return PR_ETYPE;
        if (o->via.bin.size != f->max)
            return f->lenerr;
        memcpy(AT(dst, f->off), o->via.bin.ptr, f->max);
        return 0;
    case K_ENUM:
        if (o->type != MSGPACK_OBJECT_STR)
            return PR_ETYPE;
        for (uint32_t i = 0; i < f->max; i++) {
            if (strlen(f->names[i]) == o->via.str.size &&
                memcmp(f->names[i], o->via.str.ptr, o->via.str.size) == 0) {
                memcpy(AT(dst, f->off), &i, sizeof i);
                return 0;
            }
        }
        return PR_EENUM;
    case K_STRUCT:
        return decode_struct(c, f->sub, o, AT(dst, f->off));
    case K_ARRAY:
    case K_LIST:
    case K_U64LIST: {
        if (o->type != MSGPACK_OBJECT_ARRAY)
            return PR_ETYPE;
        uint32_t n = o->via.array.size;
        if (n > f->max)
            return PR_ECOUNT;
        size_t esize = f->kind == K_U64LIST ? sizeof(uint64_t) : f->sub->size;
        char *items = zalloc(c, (size_t)n * esize);
        if (items == NULL)
            return PR_ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
            const msgpack_object *e = &o->via.array.ptr[i];
            if (f->kind == K_ARRAY) {
                rc = decode_struct(c, f->sub, e, items + (size_t)i * esize);
            } else if (f->kind == K_LIST) {
                rc = decode_field(c, &f->sub->fields[0], e, items + (size_t)i * esize);
            } else {
                rc = dec_u64(e, &u);
                if (rc == 0)
                    memcpy(items + (size_t)i * esize, &u, sizeof u);
            }
            if (rc != 0) {
                char idx[16];
                snprintf(idx, sizeof idx, "[%u]", (unsigned)i);
                path_push(c, idx);
                return rc;
            }
        }
        set_ptr(dst, f->off, n ? items : NULL);
        memcpy(AT(dst, f->off_n), &n, sizeof n);
        return 0;
    }
    }
    return PR_EINVAL; /* unreachable: the tables hold only the kinds above */
}

static int decode_struct(dctx *c, const schema *s, const msgpack_object *o, void *dst)
{
    uint32_t seen = 0;
    int rc;

    if (o->type != MSGPACK_OBJECT_MAP)
        return PR_ETYPE;
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object *k = &o->via.map.ptr[i].key;
        const msgpack_object *v = &o->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR)
            return PR_EKEYTYPE;
        unsigned j;
        for (j = 0; j < s->nfields; j++)
            if (strlen(s->fields[j].key) == k->via.str.size &&
                memcmp(s->fields[j].key, k->via.str.ptr, k->via.str.size) == 0)
                break;
        if (j == s->nfields)
            continue; /* unknown fields are ignored: newer peers may add some */
        const field *f = &s->fields[j];
        if (seen & (1u << j)) {
            path_push(c, f->key);
            return PR_EDUPKEY;
        }
        seen |= 1u << j;
        if (f->opt && v->type == MSGPACK_OBJECT_NIL)
            continue;
        if ((rc = decode_field(c, f, v, dst)) != 0) {
            path_push(c, f->key);
            return rc;
        }
    }
    for (unsigned j = 0; j < s->nfields; j++) {
        if (!s->fields[j].opt && !(seen & (1u << j))) {
            path_push(c, s->fields[j].key);
            return PR_EMISSING;
        }
    }
    if (s->decoded != NULL && (rc = s->decoded(dst)) != 0)
        return rc;
    return s->check ? s->check(dst) : 0;
}

/* Scans and unpacks bytes into the zone; obj points into the zone. */
static int unpack(dctx *c, const void *bytes, size_t len, msgpack_object *obj)
{
    size_t off = 0;
    int rc = pr__scan(bytes, len);
    if (rc != 0)
        return rc;
    switch (msgpack_unpack(bytes, len, &off, c->zone, obj)) {
    case MSGPACK_UNPACK_SUCCESS:
        return 0;
    case MSGPACK_UNPACK_NOMEM_ERROR:
        return PR_ENOMEM;
    default:
        /* pr__scan() is stricter than msgpack-c, so this means the two
         * disagree; refuse the bytes rather than trust either. */
        return PR_EMSGPACK;
    }
}

static int decode_batch(dctx *c, pr_batch *b, const void *payload, size_t len)
{
    msgpack_object obj;
    int rc;

    if (len > PR_MAX_PAYLOAD)
        return PR_EFRAMESIZE;
    if ((rc = unpack(c, payload, len, &obj)) != 0)
        return rc;
    memset(b, 0, sizeof *b);
    return decode_struct(c, &batch_s, &obj, b);
}

int pr_decode_batch(pr_batch *b, void **arena, const void *payload, size_t len)
{
    dctx c = { NULL, NULL, 0 };
    int rc;

    if (arena == NULL)
        return PR_EINVAL;
    *arena = NULL;
    if (b == NULL || (payload == NULL && len > 0))
        return PR_EINVAL;
    if ((c.zone = msgpack_zone_new(4096)) == NULL)
        return PR_ENOMEM;
    if ((rc = decode_batch(&c, b, payload, len)) != 0) {
        msgpack_zone_free(c.zone);
        memset(b, 0, sizeof *b);
        return rc;
    }
    *arena = c.zone;
    return 0;
}

void pr_arena_free(void *arena)
{
    if (arena != NULL)
        msgpack_zone_free(arena);
}

static bool key_is(const msgpack_object *k, const char *s)
{
    return k->via.str.size == strlen(s) && memcmp(k->via.str.ptr, s, k->via.str.size) == 0;
}

static int decode_envelope(dctx *c, pr_msg *m, const void *frame, size_t len)
{
    static const char *const keys[] = { "v", "type", "id", "ts", "body" };
    const msgpack_object *val[5] = { NULL };
    msgpack_object obj;
    uint64_t u;
    int rc;

    if (len > PR_MAX_FRAME)
        return PR_EFRAMESIZE;
    if ((rc = unpack(c, frame, len, &obj)) != 0)
        return rc;
    if (obj.type != MSGPACK_OBJECT_MAP)
        return PR_ETYPE;
    for (uint32_t i = 0; i < obj.via.map.size; i++) {
        const msgpack_object *k = &obj.via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return PR_EKEYTYPE;
        for (unsigned j = 0; j < 5; j++) {
            if (key_is(k, keys[j])) {
                if (val[j] != NULL) {
                    path_push(c, keys[j]);
                    return PR_EDUPKEY;
                }
                val[j] = &obj.via.map.ptr[i].val;
            }
        }
    }
    for (unsigned j = 0; j < 5; j++) {
        if (val[j] == NULL) {
            path_push(c, keys[j]);
            return PR_EMISSING;
        }
    }
    /* The version first: a newer peer must learn that, not a field error. */
    if ((rc = dec_u64(val[0], &u)) != 0 || u != PR_VERSION) {
        path_push(c, "v");
        return rc == PR_ETYPE ? PR_ETYPE : PR_EVERSION;
    }
    m->v = PR_VERSION;
    if ((rc = dec_u64(val[2], &m->id)) != 0) {
        path_push(c, "id");
        return rc;
    }
    if ((rc = dec_u64(val[3], &m->ts)) != 0) {
        path_push(c, "ts");
        return rc;
    }
    if (val[1]->type != MSGPACK_OBJECT_STR) {
        path_push(c, "type");
        return PR_ETYPE;
    }
    for (int t = 1; t < PR_MSG_COUNT_; t++)
        if (key_is(val[1], bodies[t]->name))
            m->type = (pr_type)t;
    if (m->type == PR_MSG_UNKNOWN) {
        /* kept for the error that answers it: a peer learns which name was refused */
        uint32_t n = val[1]->via.str.size, shown = n > 32 ? 32 : n;
        for (uint32_t i = 0; i < shown; i++) {
            unsigned char ch = (unsigned char)val[1]->via.str.ptr[i];
            m->unknown_type[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
        }
        memcpy(m->unknown_type + shown, n > shown ? "..." : "", n > shown ? 4 : 1);
        path_push(c, "type");
        return PR_EUNKNOWNTYPE;
    }
    if ((rc = decode_struct(c, bodies[m->type], val[4], &m->body)) != 0) {
        path_push(c, "body");
        return rc;
    }
    if (m->type == PR_MSG_COMPLETE) {
        pr_complete *cp = &m->body.complete;
        if ((rc = decode_batch(c, &cp->batch, cp->payload.ptr, cp->payload.len)) != 0) {
            path_push(c, "body.payload");
            return rc;
        }
    }
    return 0;
}

int pr_decode(pr_msg *m, const void *frame, size_t len)
{
    dctx c;
    int rc;

    if (m == NULL)
        return PR_EINVAL;
    memset(m, 0, sizeof *m);
    if (frame == NULL && len > 0)
        return PR_EINVAL;
    c.err_at = m->err_at;
    c.err_cap = sizeof m->err_at;
    if ((c.zone = msgpack_zone_new(8192)) == NULL)
        return PR_ENOMEM;
    if ((rc = decode_envelope(&c, m, frame, len)) != 0) {
        msgpack_zone_free(c.zone);
        memset(&m->body, 0, sizeof m->body);
        return rc;
    }
    m->arena = c.zone;
    return 0;
}

void pr_msg_free(pr_msg *m)
{
    if (m == NULL)
        return;
    if (m->arena != NULL)
        msgpack_zone_free(m->arena);
    memset(m, 0, sizeof *m);
}

/* ---- encoding ---------------------------------------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int err;
} wbuf;

/* msgpack-c's write callback. After the first failure it drops everything;
 * the encoder reads w->err once at the end instead of after every call. */
static int wb_write(void *data, const char *buf, size_t len)
{
    wbuf *w = data;
    if (w->err != 0)
        return -1;
    if (len > PR_MAX_FRAME - w->len) {
        w->err = PR_EFRAMESIZE;
        return -1;
    }
    if (w->len + len > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + len)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (p == NULL) {
            w->err = PR_ENOMEM;
            return -1;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, buf, len);
    w->len += len;
    return 0;
}

static void pack_cstr(msgpack_packer *pk, const char *s, size_t n)
{
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static bool present(const field *f, const void *src)
{
    uint64_t u;
    uint32_t v;
    int32_t i;
    bool b;

    if (!f->opt)
        return true;
    switch (f->kind) {
    case K_U64: memcpy(&u, CAT(src, f->off), sizeof u); return u != 0;
    case K_U32: memcpy(&v, CAT(src, f->off), sizeof v); return v != 0;
    case K_I32: memcpy(&i, CAT(src, f->off), sizeof i); return i != 0;
    case K_BOOL: memcpy(&b, CAT(src, f->off), sizeof b); return b;
    case K_STR: {
        const char *s = get_ptr(src, f->off);
        return s != NULL && s[0] != '\0';
    }
    case K_BYTES: {
        pr_bytes by;
        memcpy(&by, CAT(src, f->off), sizeof by);
        return by.len > 0;
    }
    case K_ARRAY:
    case K_LIST:
    case K_U64LIST: return get_u32(src, f->off_n) > 0;
    default: return true;
    }
}

static int encode_struct(msgpack_packer *pk, const schema *s, const void *src);

static int encode_field(msgpack_packer *pk, const field *f, const void *src)
{
    int rc;

    switch (f->kind) {
    case K_U64: {
        uint64_t u;
        memcpy(&u, CAT(src, f->off), sizeof u);
        msgpack_pack_uint64(pk, u);
        return 0;
    }
    case K_U32:
        msgpack_pack_uint64(pk, get_u32(src, f->off));
        return 0;
    case K_I32: {
        int32_t i;
        memcpy(&i, CAT(src, f->off), sizeof i);
        msgpack_pack_int64(pk, i);
        return 0;
    }
    case K_BOOL: {
        bool b;
        memcpy(&b, CAT(src, f->off), sizeof b);
        if (b)
            msgpack_pack_true(pk);
        else
            msgpack_pack_false(pk);
        return 0;
    }
    case K_STR: {
        const char *s = get_ptr(src, f->off);
        size_t n = s ? strlen(s) : 0;
        if (n > f->max)
            return PR_ESTRLEN;
        if (!pr__utf8_ok(s, n))
            return PR_EUTF8;
        pack_cstr(pk, s ? s : "", n);
        return 0;
    }
    case K_BYTES: {
        pr_bytes b;
        memcpy(&b, CAT(src, f->off), sizeof b);
        if (b.len > f->max)
            return PR_EBINSIZE;
        if (b.ptr == NULL && b.len > 0)
            return PR_EINVAL;
        msgpack_pack_bin(pk, b.len);
        msgpack_pack_bin_body(pk, b.ptr, b.len);
        return 0;
    }
    case K_FIXED:
        msgpack_pack_bin(pk, f->max);
        msgpack_pack_bin_body(pk, CAT(src, f->off), f->max);
        return 0;
    case K_ENUM: {
        uint32_t v = get_u32(src, f->off);
        if (v >= f->max)
            return PR_EENUM;
        pack_cstr(pk, f->names[v], strlen(f->names[v]));
        return 0;
    }
    case K_STRUCT:
        return encode_struct(pk, f->sub, CAT(src, f->off));
    case K_ARRAY:
    case K_LIST:
    case K_U64LIST: {
        uint32_t n = get_u32(src, f->off_n);
        const char *items = get_ptr(src, f->off);
        if (n > f->max)
            return PR_ECOUNT;
        if (items == NULL && n > 0)
            return PR_EINVAL;
        msgpack_pack_array(pk, n);
        for (uint32_t i = 0; i < n; i++) {
            if (f->kind == K_ARRAY) {
                if ((rc = encode_struct(pk, f->sub, items + (size_t)i * f->sub->size)) != 0)
                    return rc;
            } else if (f->kind == K_LIST) {
                if ((rc = encode_field(pk, &f->sub->fields[0], items + (size_t)i * f->sub->size)) != 0)
                    return rc;
            } else {
                uint64_t u;
                memcpy(&u, items + (size_t)i * sizeof u, sizeof u);
                msgpack_pack_uint64(pk, u);
            }
        }
        return 0;
    }
    }
    return PR_EINVAL; /* unreachable: the tables hold only the kinds above */
}

static int encode_struct(msgpack_packer *pk, const schema *s, const void *src)
{
    unsigned n = 0;
    int rc;

    for (unsigned j = 0; j < s->nfields; j++)
        n += present(&s->fields[j], src);
    msgpack_pack_map(pk, n);
    for (unsigned j = 0; j < s->nfields; j++) {
        const field *f = &s->fields[j];
        if (!present(f, src))
            continue;
        pack_cstr(pk, f->key, strlen(f->key));
        if ((rc = encode_field(pk, f, src)) != 0)
            return rc;
    }
    /* After the fields, whose lengths are checked by then. */
    return s->check ? s->check(src) : 0;
}

static int finish(wbuf *w, int rc, uint8_t **out, size_t *len)
{
    if (rc == 0)
        rc = w->err;
    if (rc != 0) {
        free(w->p);
        return rc;
    }
    *out = w->p;
    *len = w->len;
    return 0;
}

int pr_encode(const pr_msg *m, uint8_t **out, size_t *len)
{
    wbuf w = { NULL, 0, 0, 0 };
    msgpack_packer pk;
    const char *name;
    int rc;

    if (out == NULL || len == NULL)
        return PR_EINVAL;
    *out = NULL;
    *len = 0;
    if (m == NULL)
        return PR_EINVAL;
    if ((name = pr_type_name(m->type)) == NULL)
        return PR_EUNKNOWNTYPE;
    msgpack_packer_init(&pk, &w, wb_write);
    msgpack_pack_map(&pk, 5);
    pack_cstr(&pk, "v", 1);
    msgpack_pack_uint64(&pk, PR_VERSION);
    pack_cstr(&pk, "type", 4);
    pack_cstr(&pk, name, strlen(name));
    pack_cstr(&pk, "id", 2);
    msgpack_pack_uint64(&pk, m->id);
    pack_cstr(&pk, "ts", 2);
    msgpack_pack_uint64(&pk, m->ts);
    pack_cstr(&pk, "body", 4);
    rc = encode_struct(&pk, bodies[m->type], &m->body);
    return finish(&w, rc, out, len);
}

int pr_encode_batch(const pr_batch *b, uint8_t **out, size_t *len)
{
    wbuf w = { NULL, 0, 0, 0 };
    msgpack_packer pk;
    int rc;

    if (out == NULL || len == NULL)
        return PR_EINVAL;
    *out = NULL;
    *len = 0;
    if (b == NULL)
        return PR_EINVAL;
    msgpack_packer_init(&pk, &w, wb_write);
    rc = encode_struct(&pk, &batch_s, b);
    if (rc == 0 && w.err == 0 && w.len > PR_MAX_PAYLOAD)
        rc = PR_EFRAMESIZE;
    return finish(&w, rc, out, len);
}

/* ---- formatting -------------------------------------------------------------- */

typedef struct fbuf {
    char *p;
    size_t cap, len;
} fbuf;

static void fb_printf(fbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->len < b->cap ? b->p + b->len : NULL, b->len < b->cap ? b->cap - b->len : 0,
        fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n;
}

static void fb_hex(fbuf *b, const uint8_t *p, size_t n)
{
    size_t show = n > 48 ? 16 : n;
    for (size_t i = 0; i < show; i++)
        fb_printf(b, "%02x", p[i]);
    if (show < n)
        fb_printf(b, "...(%zu bytes)", n);
}

static void format_struct(fbuf *b, const schema *s, const void *src)
{
    bool first = true;
    fb_printf(b, "{");
    for (unsigned j = 0; j < s->nfields; j++) {
        const field *f = &s->fields[j];
        if (!present(f, src))
            continue;
        fb_printf(b, "%s%s=", first ? "" : " ", f->key);
        first = false;
        switch (f->kind) {
        case K_U64: {
            uint64_t u;
            memcpy(&u, CAT(src, f->off), sizeof u);
            fb_printf(b, "%llu", (unsigned long long)u);
            break;
        }
        case K_U32: fb_printf(b, "%lu", (unsigned long)get_u32(src, f->off)); break;
        case K_I32: {
            int32_t i;
            memcpy(&i, CAT(src, f->off), sizeof i);
            fb_printf(b, "%ld", (long)i);
            break;
        }
        case K_BOOL: {
            bool v;
            memcpy(&v, CAT(src, f->off), sizeof v);
            fb_printf(b, "%s", v ? "true" : "false");
            break;
        }
        case K_STR: {
            const char *str = get_ptr(src, f->off);
            fb_printf(b, "\"%s\"", str ? str : "");
            break;
        }
        case K_BYTES: {
            pr_bytes by;
            memcpy(&by, CAT(src, f->off), sizeof by);
            fb_printf(b, "0x");
            fb_hex(b, by.ptr, by.len);
            break;
        }
        case K_FIXED:
            fb_printf(b, "0x");
            fb_hex(b, (const uint8_t *)CAT(src, f->off), f->max);
            break;
        case K_ENUM: {
            uint32_t v = get_u32(src, f->off);
            fb_printf(b, "%s", v < f->max ? f->names[v] : "?");
            break;
        }
        case K_STRUCT: format_struct(b, f->sub, CAT(src, f->off)); break;
        case K_LIST:
            fb_printf(b, "[");
            for (uint32_t i = 0, n = get_u32(src, f->off_n); i < n; i++) {
                const char *str = get_ptr(get_ptr(src, f->off), (unsigned)(i * f->sub->size));
                fb_printf(b, "%s\"%s\"", i > 0 ? " " : "", str ? str : "");
            }
            fb_printf(b, "]");
            break;
        case K_ARRAY:
        case K_U64LIST: {
            uint32_t n = get_u32(src, f->off_n);
            const char *items = get_ptr(src, f->off);
            fb_printf(b, "[");
            for (uint32_t i = 0; items != NULL && i < n; i++) {
                if (i > 0)
                    fb_printf(b, " ");
                if (f->kind == K_ARRAY) {
                    format_struct(b, f->sub, items + (size_t)i * f->sub->size);
                } else {
                    uint64_t u;
                    memcpy(&u, items + (size_t)i * sizeof u, sizeof u);
                    fb_printf(b, "%llu", (unsigned long long)u);
                }
            }
            fb_printf(b, "]");
            break;
        }
        }
    }
    fb_printf(b, "}");
}

size_t pr_msg_format(const pr_msg *m, char *buf, size_t cap)
{
    fbuf b = { buf, cap, 0 };
    const char *name = m ? pr_type_name(m->type) : NULL;

    if (buf != NULL && cap > 0)
        buf[0] = '\0';
    if (name == NULL) {
        fb_printf(&b, "(unknown message)");
        return b.len;
    }
    fb_printf(&b, "%s id=%llu ts=%llu ", name, (unsigned long long)m->id,
        (unsigned long long)m->ts);
    format_struct(&b, bodies[m->type], &m->body);
    if (m->type == PR_MSG_COMPLETE) {
        fb_printf(&b, " batch=");
        format_struct(&b, &batch_s, &m->body.complete.batch);
    }
    return b.len;
}
