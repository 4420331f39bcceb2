/*
 * ctx.c — see ctx.h.
 */
#include "sim/ctx.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool key_is(const msgpack_object *k, const char *name)
{
    size_t n = strlen(name);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, name, n) == 0;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void sim_ctx_encode(msgpack_sbuffer *out, const char *kernel, uint64_t seed, const void *params, size_t len)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pack_str(&pk, "kernel");
    pack_str(&pk, kernel);
    pack_str(&pk, "seed");
    msgpack_pack_uint64(&pk, seed);
    pack_str(&pk, "params");
    msgpack_sbuffer_write(out, params, len); /* already msgpack */
}

int sim_ctx_decode(const void *ctx, size_t len, char *kernel, size_t klen, uint64_t *seed, msgpack_sbuffer *params)
{
    msgpack_unpacked up;
    size_t off = 0;
    bool have_k = false, have_s = false, have_p = false;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, ctx, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        return -1;
    }
    const msgpack_object_map *m = &up.data.via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        if (key_is(k, "kernel") && v->type == MSGPACK_OBJECT_STR && v->via.str.size > 0 && v->via.str.size < klen) {
            memcpy(kernel, v->via.str.ptr, v->via.str.size);
            kernel[v->via.str.size] = '\0';
            have_k = true;
        } else if (key_is(k, "seed") && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            *seed = v->via.u64;
            have_s = true;
        } else if (key_is(k, "params")) {
            msgpack_packer pk;
            msgpack_packer_init(&pk, params, msgpack_sbuffer_write);
            msgpack_pack_object(&pk, *v);
            have_p = true;
        }
    }
    msgpack_unpacked_destroy(&up);
    return have_k && have_s && have_p ? 0 : -1;
}

int sim_ctx_job(sim_job **out, const void *ctx, size_t len, char *err, size_t errlen)
{
    char kernel[64];
    uint64_t seed = 0;
    msgpack_sbuffer params;
    msgpack_sbuffer_init(&params);
    int rc;
    if (sim_ctx_decode(ctx, len, kernel, sizeof kernel, &seed, &params) == 0) {
        rc = sim_job_create(out, kernel, params.data, params.size, seed, err, errlen);
    } else {
        rc = SIM_EFORMAT;
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "the work context does not decode");
    }
    msgpack_sbuffer_destroy(&params);
    return rc;
}
