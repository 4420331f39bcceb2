/*
 * ctx.c — see ctx.h.
 */
#include "sim/ctx.h"

#include "sim/sim_int.h"
#include "base/json.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void sim_ctx_encode_variants(msgpack_sbuffer *out, const char *kernel, uint64_t seed, const void *variants,
    size_t len, uint32_t n, bool every)
{
    /* "params" repeats variant 0, so a reader of one-variant contexts runs it. */
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, variants, len, &off) != MSGPACK_UNPACK_SUCCESS)
        off = 0;
    msgpack_unpacked_destroy(&up);
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    pack_str(&pk, "kernel");
    pack_str(&pk, kernel);
    pack_str(&pk, "seed");
    msgpack_pack_uint64(&pk, seed);
    pack_str(&pk, "params");
    msgpack_sbuffer_write(out, variants, off);
    pack_str(&pk, "variants");
    msgpack_pack_array(&pk, n);
    msgpack_sbuffer_write(out, variants, len);
    pack_str(&pk, "every");
    if (every)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
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
        if (sf_mp_streq(k, "kernel") && v->type == MSGPACK_OBJECT_STR && v->via.str.size > 0 && v->via.str.size < klen) {
            memcpy(kernel, v->via.str.ptr, v->via.str.size);
            kernel[v->via.str.size] = '\0';
            have_k = true;
        } else if (sf_mp_streq(k, "seed") && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            *seed = v->via.u64;
            have_s = true;
        } else if (sf_mp_streq(k, "params")) {
            msgpack_packer pk;
            msgpack_packer_init(&pk, params, msgpack_sbuffer_write);
            msgpack_pack_object(&pk, *v);
            have_p = true;
        }
    }
    msgpack_unpacked_destroy(&up);
    return have_k && have_s && have_p ? 0 : -1;
}

__attribute__((format(printf, 5, 6)))
static int work_fail(sim_work *w, char *err, size_t errlen, int rc, const char *fmt, ...)
{
    sim_work_close(w);
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int sim_work_open(sim_work *w, const void *ctx, size_t len, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    char kernel[64];
    uint64_t seed = 0;
    msgpack_sbuffer params;
    msgpack_sbuffer_init(&params);
    int rc = sim_ctx_decode(ctx, len, kernel, sizeof kernel, &seed, &params);
    msgpack_sbuffer_destroy(&params);
    if (rc != 0)
        return work_fail(w, err, errlen, SIM_EFORMAT, "the work context does not decode");

    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    msgpack_unpack_next(&up, ctx, len, &off); /* decoded above */
    const msgpack_object_map *m = &up.data.via.map;
    const msgpack_object *params_o = NULL, *variants = NULL;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        if (sf_mp_streq(k, "params"))
            params_o = v;
        else if (sf_mp_streq(k, "variants"))
            variants = v;
        else if (sf_mp_streq(k, "every"))
            w->every = v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
    }
    uint32_t n = 1;
    if (variants != NULL) {
        if (variants->type != MSGPACK_OBJECT_ARRAY || variants->via.array.size < 1 ||
            variants->via.array.size > SIM_MAX_VARIANTS) {
            msgpack_unpacked_destroy(&up);
            return work_fail(w, err, errlen, SIM_EFORMAT, "the work context's variants are not an array of 1 to %d",
                SIM_MAX_VARIANTS);
        }
        n = variants->via.array.size;
    }
    w->jobs = calloc(n, sizeof *w->jobs);
    if (w->jobs == NULL) {
        msgpack_unpacked_destroy(&up);
        return work_fail(w, err, errlen, SIM_ENOMEM, "out of memory");
    }
    w->n = n;
    for (uint32_t v = 0; v < n; v++) {
        const msgpack_object *p = variants != NULL ? &variants->via.array.ptr[v] : params_o;
        msgpack_sbuffer b;
        msgpack_sbuffer_init(&b);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
        msgpack_pack_object(&pk, *p);
        char why[256] = "";
        rc = sim_job_create(&w->jobs[v], kernel, b.data, b.size, seed, why, sizeof why);
        msgpack_sbuffer_destroy(&b);
        if (rc != 0) {
            msgpack_unpacked_destroy(&up);
            return work_fail(w, err, errlen, rc, "variant %u: %s", v, why);
        }
        /* Every variant's statistics use variant 0's layouts, so they merge
         * and compare (a value past its range is clamped and counted). */
        if (v > 0 && w->jobs[v]->nout != w->jobs[0]->nout) {
            msgpack_unpacked_destroy(&up);
            return work_fail(w, err, errlen, SIM_EPARAM, "variant %u: it has %d outputs, variant 0 has %d", v,
                w->jobs[v]->nout, w->jobs[0]->nout);
        }
        if (v > 0)
            memcpy(w->jobs[v]->layout, w->jobs[0]->layout, sizeof w->jobs[v]->layout);
    }
    msgpack_unpacked_destroy(&up);
    return 0;
}

void sim_work_close(sim_work *w)
{
    for (uint32_t v = 0; w->jobs != NULL && v < w->n; v++)
        sim_job_destroy(w->jobs[v]);
    free(w->jobs);
    memset(w, 0, sizeof *w);
}
