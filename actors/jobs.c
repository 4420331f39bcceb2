/*
 * jobs.c — see jobs.h. A submission is JSON; it is read through its
 * msgpack form (sim/sim_json.h) so the kernel's parameters can be checked
 * by the kernel itself and stored as the work context.
 */
#include "actors/jobs.h"

#include "sim/ctx.h"
#include "sim/sim.h"
#include "sim/sim_json.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool key_is(const msgpack_object *k, const char *name)
{
    size_t n = strlen(name);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, name, n) == 0;
}

static bool get_uint(const msgpack_object *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 >= lo && v->via.u64 <= hi) {
        *out = v->via.u64;
        return true;
    }
    if (v->type == MSGPACK_OBJECT_FLOAT64 && v->via.f64 >= (double)lo && v->via.f64 <= (double)hi &&
        v->via.f64 == (double)(uint64_t)v->via.f64) {
        *out = (uint64_t)v->via.f64;
        return true;
    }
    return false;
}

typedef struct submission {
    char kernel[64];
    const char *params;      /* msgpack bytes of "params" inside the whole */
    size_t params_len;
    uint64_t items, seed;
    int64_t priority;
    char owner[129];
    char strategy[16];
    char name[129];
} submission;

/* Parses and checks a job submission. On failure writes the field and a
 * message a user can act on, and returns false. */
static bool parse_submission(const char *json, size_t len, const char *caller, bool admin, submission *s,
    msgpack_sbuffer *params, char *field, size_t flen, char *msg, size_t mlen)
{
    msgpack_sbuffer whole;
    msgpack_unpacked up;
    size_t off = 0;
    bool ok = false;
    char err[160];

    memset(s, 0, sizeof *s);
    s->seed = 1;
    snprintf(s->owner, sizeof s->owner, "%s", caller ? caller : "anonymous");
    snprintf(s->strategy, sizeof s->strategy, "single");
    snprintf(field, flen, "%s", "");
    msgpack_sbuffer_init(&whole);
    msgpack_unpacked_init(&up);
    if (sim_json_to_msgpack(json, len, &whole, err, sizeof err) != 0) {
        snprintf(msg, mlen, "the body is not valid JSON: %s", err);
        goto out;
    }
    if (msgpack_unpack_next(&up, whole.data, whole.size, &off) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        snprintf(msg, mlen, "the body must be a JSON object");
        goto out;
    }
    bool have_params = false, have_items = false;
    const msgpack_object_map *m = &up.data.via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        if (key_is(k, "kernel")) {
            if (v->type != MSGPACK_OBJECT_STR || v->via.str.size == 0 || v->via.str.size >= sizeof s->kernel) {
                snprintf(field, flen, "kernel");
                snprintf(msg, mlen, "must be the name of a kernel");
                goto out;
            }
            memcpy(s->kernel, v->via.str.ptr, v->via.str.size);
        } else if (key_is(k, "params")) {
            msgpack_packer pk;
            msgpack_packer_init(&pk, params, msgpack_sbuffer_write);
            msgpack_pack_object(&pk, *v);
            have_params = true;
        } else if (key_is(k, "items")) {
            if (!get_uint(v, 1, UINT64_C(1) << 50, &s->items)) {
                snprintf(field, flen, "items");
                snprintf(msg, mlen, "must be a whole number from 1 to 2^50");
                goto out;
            }
            have_items = true;
        } else if (key_is(k, "seed")) {
            if (!get_uint(v, 0, INT64_MAX, &s->seed)) {
                snprintf(field, flen, "seed");
                snprintf(msg, mlen, "must be a whole number from 0 to 2^63-1");
                goto out;
            }
        } else if (key_is(k, "priority")) {
            if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= 1000)
                s->priority = (int64_t)v->via.u64;
            else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && v->via.i64 >= -1000)
                s->priority = v->via.i64;
            else {
                snprintf(field, flen, "priority");
                snprintf(msg, mlen, "must be a whole number from -1000 to 1000");
                goto out;
            }
        } else if (key_is(k, "owner")) {
            if (v->type != MSGPACK_OBJECT_STR || v->via.str.size == 0 || v->via.str.size >= sizeof s->owner) {
                snprintf(field, flen, "owner");
                snprintf(msg, mlen, "must be a name of 1 to 128 characters");
                goto out;
            }
            memcpy(s->owner, v->via.str.ptr, v->via.str.size);
            s->owner[v->via.str.size] = '\0';
            if (caller != NULL && !admin && strcmp(s->owner, caller) != 0) {
                snprintf(field, flen, "owner");
                snprintf(msg, mlen, "this API token submits for \"%s\" only", caller);
                goto out;
            }
        } else if (key_is(k, "name")) {
            if (v->type != MSGPACK_OBJECT_STR || v->via.str.size >= sizeof s->name) {
                snprintf(field, flen, "name");
                snprintf(msg, mlen, "must be a text of up to 128 characters");
                goto out;
            }
            memcpy(s->name, v->via.str.ptr, v->via.str.size);
            s->name[v->via.str.size] = '\0';
        } else if (key_is(k, "strategy")) {
            if (!key_is(v, "single")) {
                snprintf(field, flen, "strategy");
                snprintf(msg, mlen, "this coordinator runs \"single\" jobs so far (tournament and stat_weights "
                    "need variants on the wire)");
                goto out;
            }
        } else {
            snprintf(field, flen, "%.*s", k->type == MSGPACK_OBJECT_STR ? (int)k->via.str.size : 1,
                k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?");
            snprintf(msg, mlen, "unknown field (known: kernel, params, items, seed, priority, owner, name, strategy)");
            goto out;
        }
    }
    if (s->kernel[0] == '\0') {
        snprintf(field, flen, "kernel");
        snprintf(msg, mlen, "is required");
        goto out;
    }
    if (!have_params) {
        snprintf(field, flen, "params");
        snprintf(msg, mlen, "is required: the kernel's parameters (docs/kernels.md)");
        goto out;
    }
    if (!have_items) {
        snprintf(field, flen, "items");
        snprintf(msg, mlen, "is required");
        goto out;
    }
    /* The kernel checks its own parameters and names the one that is wrong. */
    sim_job *job = NULL;
    if (sim_job_create(&job, s->kernel, params->data, params->size, s->seed, err, sizeof err) != 0) {
        /* "field 'sigma': must be ..." names the parameter: params.sigma. */
        const char *q = strncmp(err, "field '", 7) == 0 ? strstr(err + 7, "': ") : NULL;
        if (sim_kernel_find(s->kernel) == NULL) {
            snprintf(field, flen, "kernel");
            snprintf(msg, mlen, "%s", err);
        } else if (q != NULL) {
            snprintf(field, flen, "params.%.*s", (int)(q - err - 7), err + 7);
            snprintf(msg, mlen, "%s", q + 3);
        } else {
            snprintf(field, flen, "params");
            snprintf(msg, mlen, "%s", err);
        }
        goto out;
    }
    sim_job_destroy(job);
    ok = true;
out:
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&whole);
    return ok;
}

cd_query *cd_job_submission(const char *json, size_t len, char *field, size_t flen, char *msg, size_t mlen)
{
    return cd_job_submission_by(json, len, NULL, true, field, flen, msg, mlen);
}

cd_query *cd_job_submission_by(const char *json, size_t len, const char *caller, bool admin, char *field,
    size_t flen, char *msg, size_t mlen)
{
    submission s;
    msgpack_sbuffer params;
    msgpack_sbuffer_init(&params);
    if (!parse_submission(json, len, caller, admin, &s, &params, field, flen, msg, mlen)) {
        msgpack_sbuffer_destroy(&params);
        return NULL;
    }
    msgpack_sbuffer ctx;
    msgpack_sbuffer_init(&ctx);
    sim_ctx_encode(&ctx, s.kernel, s.seed, params.data, params.size);
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(hash, (const unsigned char *)ctx.data, ctx.size);
    char *spec = malloc(len + 1);
    if (spec == NULL)
        rt_oom(len + 1);
    memcpy(spec, json, len);
    spec[len] = '\0';
    cd_query *q = cd_query_new(
        "INSERT INTO jobs (owner, kernel, strategy, items, seed, priority, spec, params, ctx_hash, name) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10) RETURNING id, owner, kernel, strategy, items, priority");
    cd_query_text(q, s.owner);
    cd_query_text(q, s.kernel);
    cd_query_text(q, s.strategy);
    cd_query_int(q, (int64_t)s.items);
    cd_query_int(q, (int64_t)s.seed);
    cd_query_int(q, s.priority);
    cd_query_text(q, spec);
    cd_query_bytes(q, ctx.data, ctx.size);
    cd_query_bytes(q, hash, sizeof hash);
    cd_query_text(q, s.name[0] ? s.name : NULL);
    free(spec);
    msgpack_sbuffer_destroy(&ctx);
    msgpack_sbuffer_destroy(&params);
    return q;
}
