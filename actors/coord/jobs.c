/*
 * jobs.c — see jobs.h. A submission is JSON; it is read through its
 * msgpack form (base/json.h) so the kernel's parameters can be checked
 * by the kernel itself and stored as the work context.
 */
#include "actors/coord/jobs.h"

#include "sim/ctx.h"
#include "sim/sim.h"
#include "base/json.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool get_uint(const msgpack_object *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 >= lo && v->via.u64 <= hi) {
        *out = v->via.u64;
        return true;
    }
    /* a whole float below 2^64, compared as an integer: (double)hi rounds
     * INT64_MAX up to 2^63, which is out of range */
    if (v->type == MSGPACK_OBJECT_FLOAT64 && v->via.f64 >= 0.0 && v->via.f64 < 0x1p64 &&
        v->via.f64 == (double)(uint64_t)v->via.f64) {
        uint64_t u = (uint64_t)v->via.f64;
        if (u < lo || u > hi)
            return false;
        *out = u;
        return true;
    }
    return false;
}

enum { MAX_WEIGHTS = 16, MAX_CANDIDATES = 64 };

typedef struct submission {
    char kernel[64];
    uint64_t items, seed;
    int64_t priority;
    char owner[129];
    char strategy[16];
    char name[129];
    uint8_t tiers, trusted;  /* SC_TIER_* bits: may run it; results taken unchecked */
    bool have_tiers, have_trust;
    double check_rate;       /* the floor of the share of untrusted results checked */
    /* pointing into the parsed body */
    const msgpack_object *params, *weights, *candidates, *tournament;
} submission;

/* What a multi-variant job adds to a submission: the variants' parameters
 * (packed one after the other) for the work context, and the strategy's
 * settings for the scheduler (jobs.strategy_params, a msgpack map:
 * names, steps, phase_items, growth, keep, minimize, z). */
typedef struct variants {
    msgpack_sbuffer params, settings;
    uint32_t n;
} variants;

static bool num_of(const msgpack_object *v, double *out)
{
    switch (v->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)v->via.u64; return true;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)v->via.i64; return true;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: *out = v->via.f64; return true;
    default: return false;
    }
}

static void pack_cstr(msgpack_packer *pk, const char *s, size_t n)
{
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

/* The value under string key `k` in map `m`, or NULL. */
static const msgpack_object *map_lookup(const msgpack_object *m, const msgpack_object *k)
{
    for (uint32_t j = 0; m->type == MSGPACK_OBJECT_MAP && j < m->via.map.size; j++) {
        const msgpack_object *o = &m->via.map.ptr[j].key;
        if (o->type == MSGPACK_OBJECT_STR && k->type == MSGPACK_OBJECT_STR && o->via.str.size == k->via.str.size &&
            memcmp(o->via.str.ptr, k->via.str.ptr, k->via.str.size) == 0)
            return &m->via.map.ptr[j].val;
    }
    return NULL;
}

static bool has_key(const msgpack_object *m, const msgpack_object *k)
{
    return map_lookup(m, k) != NULL;
}

/* Packs map `base` with the entries of map `over` put in (replaced or added). */
static void pack_merged(msgpack_packer *pk, const msgpack_object *base, const msgpack_object *over)
{
    uint32_t n = over->via.map.size;
    for (uint32_t i = 0; i < base->via.map.size; i++)
        n += !has_key(over, &base->via.map.ptr[i].key);
    msgpack_pack_map(pk, n);
    for (uint32_t i = 0; i < base->via.map.size; i++)
        if (!has_key(over, &base->via.map.ptr[i].key)) {
            msgpack_pack_object(pk, base->via.map.ptr[i].key);
            msgpack_pack_object(pk, base->via.map.ptr[i].val);
        }
    for (uint32_t j = 0; j < over->via.map.size; j++) {
        msgpack_pack_object(pk, over->via.map.ptr[j].key);
        msgpack_pack_object(pk, over->via.map.ptr[j].val);
    }
}


static bool fail(char *field, size_t flen, char *msg, size_t mlen, const char *f, const char *m)
{
    snprintf(field, flen, "%s", f);
    snprintf(msg, mlen, "%s", m);
    return false;
}

/* ---- tiers ---------------------------------------------------------------------------------- */

/* By bit: SC_TIER_OWN is 1 << 0, and so on. */
static const char *const tier_names[4] = { "own", "team", "community", "public" };

/* Written once, before the actors that submit jobs are spawned (the spawn
 * orders what came before it), then only read: relaxed is enough. */
static _Atomic uint8_t default_tiers = CD_TIERS_DEFAULT;

void cd_job_default_tiers_set(uint8_t tiers)
{
    atomic_store_explicit(&default_tiers, tiers & SC_TIER_ANY ? tiers & SC_TIER_ANY : CD_TIERS_DEFAULT,
        memory_order_relaxed);
}

uint8_t cd_job_default_tiers(void)
{
    return atomic_load_explicit(&default_tiers, memory_order_relaxed);
}

const char *cd_tier_name(uint8_t bit)
{
    for (unsigned i = 0; i < 4; i++)
        if (bit == 1u << i)
            return tier_names[i];
    return NULL;
}

/* The bit of the tier called s (n bytes), or 0 for none. */
static uint8_t tier_bit(const char *s, size_t n)
{
    for (unsigned i = 0; i < 4; i++)
        if (strlen(tier_names[i]) == n && memcmp(tier_names[i], s, n) == 0)
            return (uint8_t)(1u << i);
    return 0;
}

int cd_tiers_parse(const char *list, uint8_t *out, sf_error *e)
{
    uint8_t bits = 0;
    for (const char *p = list;; p++) {
        size_t n = strcspn(p, ",");
        uint8_t b = tier_bit(p, n);
        if (n == 0)
            return sf_fail(e, CD_EINVAL, "'%s' lists no tier where one is due: own, team, community or public, "
                "separated by commas", list);
        if (b == 0)
            return sf_fail(e, CD_EINVAL, "unknown tier '%.*s': own, team, community or public", (int)n, p);
        if (bits & b)
            return sf_fail(e, CD_EINVAL, "tier '%.*s' is listed twice", (int)n, p);
        bits |= b;
        p += n;
        if (*p == '\0')
            break;
    }
    *out = bits;
    return 0;
}

/* A JSON list of tier names, the value of `name` ("tiers", "verify.trust"),
 * into SC_TIER_* bits; `empty_ok`: whether [] is taken. */
static bool tier_list(const msgpack_object *v, const char *name, bool empty_ok, uint8_t *out, char *field,
    size_t flen, char *msg, size_t mlen)
{
    if (v->type != MSGPACK_OBJECT_ARRAY || (!empty_ok && v->via.array.size == 0))
        return fail(field, flen, msg, mlen, name, empty_ok ? "must be a list of tier names: own, team, community, public"
            : "must be a list of one or more tier names: own, team, community, public");
    uint8_t bits = 0;
    for (uint32_t i = 0; i < v->via.array.size; i++) {
        const msgpack_object *t = &v->via.array.ptr[i];
        uint8_t b = t->type == MSGPACK_OBJECT_STR ? tier_bit(t->via.str.ptr, t->via.str.size) : 0;
        snprintf(field, flen, "%s[%u]", name, i);
        if (b == 0) {
            snprintf(msg, mlen, "must be own, team, community or public");
            return false;
        }
        if (bits & b) {
            snprintf(msg, mlen, "'%.*s' is listed twice", (int)t->via.str.size, t->via.str.ptr);
            return false;
        }
        bits |= b;
    }
    *out = bits;
    return true;
}

/* "verify": {"check_rate": 0 .. 1, "trust": [tier names]}. */
static bool read_verify(const msgpack_object *v, submission *s, char *field, size_t flen, char *msg, size_t mlen)
{
    if (v->type != MSGPACK_OBJECT_MAP)
        return fail(field, flen, msg, mlen, "verify", "must be an object: {\"check_rate\": 0 .. 1, \"trust\": "
            "[tier names]}");
    for (uint32_t i = 0; i < v->via.map.size; i++) {
        const msgpack_object *k = &v->via.map.ptr[i].key, *x = &v->via.map.ptr[i].val;
        if (sf_mp_streq(k, "check_rate")) {
            /* NaN fails both comparisons */
            if (!num_of(x, &s->check_rate) || !(s->check_rate >= 0 && s->check_rate <= 1))
                return fail(field, flen, msg, mlen, "verify.check_rate", "must be a number from 0 to 1");
        } else if (sf_mp_streq(k, "trust")) {
            if (!tier_list(x, "verify.trust", true, &s->trusted, field, flen, msg, mlen))
                return false;
            s->have_trust = true;
        } else {
            snprintf(field, flen, "verify.%.*s", k->type == MSGPACK_OBJECT_STR ? (int)k->via.str.size : 1,
                k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?");
            snprintf(msg, mlen, "unknown field (known: check_rate, trust)");
            return false;
        }
    }
    return true;
}

/* Checks parameters with the kernel; a refusal names the field under
 * `where` ("params.sigma", "weights[2]", "candidates[0].params.sigma"), or
 * "kernel" when there is no such kernel. */
static bool check_params(const char *kernel, const void *p, size_t len, uint64_t seed, const char *where,
    char *field, size_t flen, char *msg, size_t mlen)
{
    char err[200];
    sim_job *job = NULL;
    if (sim_job_create(&job, kernel, p, len, seed, err, sizeof err) == 0) {
        sim_job_destroy(job);
        return true;
    }
    const char *q = strncmp(err, "field '", 7) == 0 ? strstr(err + 7, "': ") : NULL;
    if (q != NULL) {
        snprintf(field, flen, "%s.%.*s", where, (int)(q - err - 7), err + 7);
        snprintf(msg, mlen, "%s", q + 3);
    } else {
        snprintf(field, flen, "%s", sim_kernel_find(kernel) != NULL ? where : "kernel");
        snprintf(msg, mlen, "%s", err);
    }
    return false;
}

/* stat_weights: variant 0 is the submission's parameters, variant i the
 * same with weights[i-1].param moved by its step. */
static bool weight_variants(const submission *s, variants *out, msgpack_packer *names, msgpack_packer *settings,
    char *field, size_t flen, char *msg, size_t mlen)
{
    const msgpack_object *w = s->weights;
    if (w == NULL || w->type != MSGPACK_OBJECT_ARRAY || w->via.array.size < 1 || w->via.array.size > MAX_WEIGHTS)
        return fail(field, flen, msg, mlen, "weights", "stat_weights needs 1 to 16 weights: "
            "[{\"param\": NAME, \"step\": NUMBER}]");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &out->params, msgpack_sbuffer_write);
    msgpack_pack_object(&pk, *s->params);
    double steps[MAX_WEIGHTS];
    for (uint32_t i = 0; i < w->via.array.size; i++) {
        const msgpack_object *e = &w->via.array.ptr[i], *param = sf_mp_get(e, "param"), *step = sf_mp_get(e, "step");
        char where[48];
        snprintf(where, sizeof where, "weights[%u]", i);
        double v0 = 0;
        if (e->type != MSGPACK_OBJECT_MAP || param == NULL || param->type != MSGPACK_OBJECT_STR ||
            param->via.str.size == 0 || param->via.str.size > 64)
            return fail(field, flen, msg, mlen, where, "needs \"param\": the name of a numeric parameter");
        const msgpack_object *base = map_lookup(s->params, param);
        if (base == NULL || !num_of(base, &v0)) {
            snprintf(field, flen, "%s.param", where);
            snprintf(msg, mlen, "params.%.*s must be given, as a number, to be moved", (int)param->via.str.size,
                param->via.str.ptr);
            return false;
        }
        if (step == NULL || !num_of(step, &steps[i]) || steps[i] == 0 || steps[i] != steps[i]) {
            snprintf(field, flen, "%s.step", where);
            snprintf(msg, mlen, "must be a number other than 0");
            return false;
        }
        msgpack_sbuffer one;
        msgpack_sbuffer_init(&one);
        msgpack_packer po;
        msgpack_packer_init(&po, &one, msgpack_sbuffer_write);
        msgpack_pack_map(&po, 1);
        msgpack_pack_object(&po, *param);
        msgpack_pack_double(&po, v0 + steps[i]);
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        msgpack_unpack_next(&up, one.data, one.size, &off);
        size_t at = out->params.size;
        pack_merged(&pk, s->params, &up.data);
        msgpack_unpacked_destroy(&up);
        msgpack_sbuffer_destroy(&one);
        const msgpack_object *nm = sf_mp_get(e, "name");
        if (nm != NULL && (nm->type != MSGPACK_OBJECT_STR || nm->via.str.size == 0 || nm->via.str.size > 64))
            return fail(field, flen, msg, mlen, where, "\"name\" must be a text of 1 to 64 characters");
        pack_cstr(names, nm ? nm->via.str.ptr : param->via.str.ptr, nm ? nm->via.str.size : param->via.str.size);
        if (!check_params(s->kernel, out->params.data + at, out->params.size - at, s->seed, where, field, flen, msg,
                mlen))
            return false;
    }
    out->n = w->via.array.size + 1;
    pack_cstr(settings, "steps", 5);
    msgpack_pack_array(settings, w->via.array.size);
    for (uint32_t i = 0; i < w->via.array.size; i++)
        msgpack_pack_double(settings, steps[i]);
    return true;
}

/* tournament: variant i is the submission's parameters with
 * candidates[i].params put in. */
static bool candidate_variants(const submission *s, variants *out, msgpack_packer *names, msgpack_packer *settings,
    char *field, size_t flen, char *msg, size_t mlen)
{
    const msgpack_object *c = s->candidates;
    if (c == NULL || c->type != MSGPACK_OBJECT_ARRAY || c->via.array.size < 2 || c->via.array.size > MAX_CANDIDATES)
        return fail(field, flen, msg, mlen, "candidates", "a tournament needs 2 to 64 candidates: "
            "[{\"name\": TEXT, \"params\": {...}}]");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &out->params, msgpack_sbuffer_write);
    for (uint32_t i = 0; i < c->via.array.size; i++) {
        const msgpack_object *e = &c->via.array.ptr[i], *over = sf_mp_get(e, "params"), *nm = sf_mp_get(e, "name");
        char where[48];
        snprintf(where, sizeof where, "candidates[%u]", i);
        if (e->type != MSGPACK_OBJECT_MAP || over == NULL || over->type != MSGPACK_OBJECT_MAP)
            return fail(field, flen, msg, mlen, where, "needs \"params\": the parameters it changes");
        if (nm != NULL && (nm->type != MSGPACK_OBJECT_STR || nm->via.str.size == 0 || nm->via.str.size > 64))
            return fail(field, flen, msg, mlen, where, "\"name\" must be a text of 1 to 64 characters");
        char dflt[24];
        int dn = snprintf(dflt, sizeof dflt, "candidate %u", i);
        pack_cstr(names, nm ? nm->via.str.ptr : dflt, nm ? nm->via.str.size : (size_t)dn);
        size_t at = out->params.size;
        pack_merged(&pk, s->params, over);
        snprintf(where + strlen(where), sizeof where - strlen(where), ".params");
        if (!check_params(s->kernel, out->params.data + at, out->params.size - at, s->seed, where, field, flen, msg,
                mlen))
            return false;
    }
    out->n = c->via.array.size;
    /* The race's settings: docs/scheduling.md. */
    uint64_t phase_items = 1000, growth = 4, keep = 0;
    double z = 1.96;
    bool minimize = false;
    const msgpack_object *t = s->tournament;
    for (uint32_t i = 0; t != NULL && i < t->via.map.size; i++) {
        const msgpack_object *k = &t->via.map.ptr[i].key, *v = &t->via.map.ptr[i].val;
        bool bad;
        if (sf_mp_streq(k, "phase_items"))
            bad = !get_uint(v, 1, UINT64_C(1) << 40, &phase_items);
        else if (sf_mp_streq(k, "growth"))
            bad = !get_uint(v, 2, 64, &growth);
        else if (sf_mp_streq(k, "keep"))
            bad = !get_uint(v, 0, c->via.array.size, &keep);
        else if (sf_mp_streq(k, "minimize"))
            bad = v->type != MSGPACK_OBJECT_BOOLEAN || !((minimize = v->via.boolean) || true);
        else if (sf_mp_streq(k, "z"))
            bad = !num_of(v, &z) || !(z >= 0.5 && z <= 10);
        else
            bad = true;
        if (bad) {
            snprintf(field, flen, "tournament.%.*s", k->type == MSGPACK_OBJECT_STR ? (int)k->via.str.size : 1,
                k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?");
            snprintf(msg, mlen, "phase_items: 1 .. 2^40; growth: 2 .. 64; keep: 0 .. the candidates; minimize: "
                "true or false; z: 0.5 .. 10 (and no other fields)");
            return false;
        }
    }
    pack_cstr(settings, "phase_items", 11);
    msgpack_pack_uint64(settings, phase_items);
    pack_cstr(settings, "growth", 6);
    msgpack_pack_uint64(settings, growth);
    pack_cstr(settings, "keep", 4);
    msgpack_pack_uint64(settings, keep);
    pack_cstr(settings, "minimize", 8);
    if (minimize)
        msgpack_pack_true(settings);
    else
        msgpack_pack_false(settings);
    pack_cstr(settings, "z", 1);
    msgpack_pack_double(settings, z);
    return true;
}

/* The variants of a tournament or stat_weights submission. */
static bool build_variants(const submission *s, variants *out, char *field, size_t flen, char *msg, size_t mlen)
{
    bool weights = strcmp(s->strategy, "stat_weights") == 0;
    msgpack_sbuffer names, rest;
    msgpack_sbuffer_init(&names);
    msgpack_sbuffer_init(&rest);
    msgpack_packer pn, ps;
    msgpack_packer_init(&pn, &names, msgpack_sbuffer_write);
    msgpack_packer_init(&ps, &rest, msgpack_sbuffer_write);
    if (weights)
        pack_cstr(&pn, "baseline", 8);
    bool ok = weights ? weight_variants(s, out, &pn, &ps, field, flen, msg, mlen)
                      : candidate_variants(s, out, &pn, &ps, field, flen, msg, mlen);
    if (ok) {
        msgpack_packer pk;
        msgpack_packer_init(&pk, &out->settings, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, weights ? 2 : 6);
        pack_cstr(&pk, "names", 5);
        msgpack_pack_array(&pk, out->n);
        msgpack_sbuffer_write(&out->settings, names.data, names.size);
        msgpack_sbuffer_write(&out->settings, rest.data, rest.size);
    }
    msgpack_sbuffer_destroy(&names);
    msgpack_sbuffer_destroy(&rest);
    return ok;
}

/* Parses and checks a job submission. On failure writes the field and a
 * message a user can act on, and returns false. */
static bool parse_submission(const char *json, size_t len, const char *caller, bool admin, submission *s,
    msgpack_sbuffer *params, variants *vars, char *field, size_t flen, char *msg, size_t mlen)
{
    msgpack_sbuffer whole;
    msgpack_unpacked up;
    size_t off = 0;
    bool ok = false;
    char err[160];

    memset(s, 0, sizeof *s);
    s->seed = 1;
    s->trusted = SC_TIER_OWN;
    snprintf(s->owner, sizeof s->owner, "%s", caller ? caller : "anonymous");
    snprintf(s->strategy, sizeof s->strategy, "single");
    snprintf(field, flen, "%s", "");
    msgpack_sbuffer_init(&whole);
    msgpack_unpacked_init(&up);
    if (sf_json_to_msgpack(json, len, &whole, err, sizeof err) != 0) {
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
        if (sf_mp_streq(k, "kernel")) {
            if (v->type != MSGPACK_OBJECT_STR || v->via.str.size == 0 || v->via.str.size >= sizeof s->kernel) {
                snprintf(field, flen, "kernel");
                snprintf(msg, mlen, "must be the name of a kernel");
                goto out;
            }
            memcpy(s->kernel, v->via.str.ptr, v->via.str.size);
        } else if (sf_mp_streq(k, "params")) {
            msgpack_packer pk;
            msgpack_packer_init(&pk, params, msgpack_sbuffer_write);
            msgpack_pack_object(&pk, *v);
            s->params = v;
            have_params = true;
        } else if (sf_mp_streq(k, "items")) {
            if (!get_uint(v, 1, UINT64_C(1) << 50, &s->items)) {
                snprintf(field, flen, "items");
                snprintf(msg, mlen, "must be a whole number from 1 to 2^50");
                goto out;
            }
            have_items = true;
        } else if (sf_mp_streq(k, "seed")) {
            if (!get_uint(v, 0, INT64_MAX, &s->seed)) {
                snprintf(field, flen, "seed");
                snprintf(msg, mlen, "must be a whole number from 0 to 2^63-1");
                goto out;
            }
        } else if (sf_mp_streq(k, "priority")) {
            if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= 1000)
                s->priority = (int64_t)v->via.u64;
            else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && v->via.i64 >= -1000)
                s->priority = v->via.i64;
            else {
                snprintf(field, flen, "priority");
                snprintf(msg, mlen, "must be a whole number from -1000 to 1000");
                goto out;
            }
        } else if (sf_mp_streq(k, "owner")) {
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
        } else if (sf_mp_streq(k, "name")) {
            if (v->type != MSGPACK_OBJECT_STR || v->via.str.size >= sizeof s->name) {
                snprintf(field, flen, "name");
                snprintf(msg, mlen, "must be a text of up to 128 characters");
                goto out;
            }
            memcpy(s->name, v->via.str.ptr, v->via.str.size);
            s->name[v->via.str.size] = '\0';
        } else if (sf_mp_streq(k, "strategy")) {
            if (!sf_mp_streq(v, "single") && !sf_mp_streq(v, "tournament") && !sf_mp_streq(v, "stat_weights")) {
                snprintf(field, flen, "strategy");
                snprintf(msg, mlen, "must be single, tournament or stat_weights");
                goto out;
            }
            snprintf(s->strategy, sizeof s->strategy, "%.*s", (int)v->via.str.size, v->via.str.ptr);
        } else if (sf_mp_streq(k, "tiers")) {
            if (!tier_list(v, "tiers", false, &s->tiers, field, flen, msg, mlen))
                goto out;
            s->have_tiers = true;
        } else if (sf_mp_streq(k, "verify")) {
            if (!read_verify(v, s, field, flen, msg, mlen))
                goto out;
        } else if (sf_mp_streq(k, "weights")) {
            s->weights = v;
        } else if (sf_mp_streq(k, "candidates")) {
            s->candidates = v;
        } else if (sf_mp_streq(k, "tournament")) {
            if (v->type != MSGPACK_OBJECT_MAP) {
                snprintf(field, flen, "tournament");
                snprintf(msg, mlen, "must be an object: {phase_items, growth, keep, minimize, z}");
                goto out;
            }
            s->tournament = v;
        } else if (sf_mp_streq(k, "confirm_large")) {
            if (v->type != MSGPACK_OBJECT_BOOLEAN) {
                snprintf(field, flen, "confirm_large");
                snprintf(msg, mlen, "must be true or false");
                goto out;
            }
        } else {
            snprintf(field, flen, "%.*s", k->type == MSGPACK_OBJECT_STR ? (int)k->via.str.size : 1,
                k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?");
            /* A file of a kernel's parameters alone (examples/option.json)
             * has no "kernel": say where those go. */
            if (sf_mp_get(&up.data, "kernel") == NULL && sf_mp_get(&up.data, "params") == NULL)
                snprintf(msg, mlen, "unknown field: this looks like a kernel's parameters alone, which go inside "
                    "\"params\" of a job ({\"kernel\": \"option\", \"params\": {...}, \"items\": N}); "
                    "`simfarm sim KERNEL FILE` runs such a file on this machine");
            else
                snprintf(msg, mlen, "unknown field (known: kernel, params, items, seed, priority, owner, name, strategy, "
                    "weights, candidates, tournament, tiers, verify, confirm_large)");
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
    if (!s->have_tiers)
        s->tiers = cd_job_default_tiers();
    /* Trusting a tier that may not run the job says nothing: a mistake. The
     * default, own, stands whatever the tiers. */
    if (s->have_trust && (s->trusted & ~s->tiers) != 0) {
        unsigned t = 0;
        while (!(s->trusted & ~s->tiers & (1u << t)))
            t++;
        snprintf(field, flen, "verify.trust");
        snprintf(msg, mlen, "lists %s, which may not run this job: trust only tiers that \"tiers\" lists%s",
            tier_names[t], s->have_tiers ? "" : " (the farm's default when it lists none)");
        goto out;
    }
    /* The kernel checks its own parameters and names the one that is wrong. */
    if (!check_params(s->kernel, params->data, params->size, s->seed, "params", field, flen, msg, mlen))
        goto out;
    bool single = strcmp(s->strategy, "single") == 0, weights = strcmp(s->strategy, "stat_weights") == 0;
    const char *stray = (single || weights) && s->candidates ? "candidates"
        : (single || weights) && s->tournament ? "tournament" : !weights && s->weights ? "weights" : NULL;
    if (stray != NULL) {
        snprintf(field, flen, "%s", stray);
        snprintf(msg, mlen, "belongs to the %s strategy, not %s",
            strcmp(stray, "weights") == 0 ? "stat_weights" : "tournament", s->strategy);
        goto out;
    }
    ok = single || build_variants(s, vars, field, flen, msg, mlen);
out:
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&whole);
    return ok;
}

cd_query *cd_job_submission(const char *json, size_t len, char *field, size_t flen, char *msg, size_t mlen)
{
    return cd_job_submission_by(json, len, NULL, true, NULL, field, flen, msg, mlen);
}

bool cd_submission_key_ok(const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < n; i++)
        if (key[i] < 0x21 || key[i] > 0x7e)
            return false;
    return n >= 1 && n <= CD_SUBMISSION_KEY_MAX;
}

bool cd_job_submission_size(const char *json, size_t len, char *kernel, size_t kcap, uint64_t *items, bool *confirm)
{
    msgpack_sbuffer sb;
    msgpack_unpacked up;
    size_t off = 0;
    char err[64];
    bool ok = false;
    msgpack_sbuffer_init(&sb);
    msgpack_unpacked_init(&up);
    if (sf_json_to_msgpack(json, len, &sb, err, sizeof err) == 0 &&
        msgpack_unpack_next(&up, sb.data, sb.size, &off) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *k = sf_mp_get(&up.data, "kernel"), *n = sf_mp_get(&up.data, "items"),
                             *c = sf_mp_get(&up.data, "confirm_large");
        if (k != NULL && k->type == MSGPACK_OBJECT_STR && n != NULL && get_uint(n, 1, UINT64_MAX, items)) {
            snprintf(kernel, kcap, "%.*s", (int)k->via.str.size, k->via.str.ptr);
            *confirm = c != NULL && c->type == MSGPACK_OBJECT_BOOLEAN && c->via.boolean;
            ok = true;
        }
    }
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
    return ok;
}

void cd_submission_key_draw(char out[CD_SUBMISSION_KEY_DRAWN])
{
    unsigned char r[(CD_SUBMISSION_KEY_DRAWN - 1) / 2];
    randombytes_buf(r, sizeof r);
    sodium_bin2hex(out, CD_SUBMISSION_KEY_DRAWN, r, sizeof r);
}

cd_query *cd_job_submission_by(const char *json, size_t len, const char *caller, bool admin, const char *key,
    char *field, size_t flen, char *msg, size_t mlen)
{
    submission s;
    msgpack_sbuffer params, ctx;
    variants vars = { .n = 0 };
    msgpack_sbuffer_init(&params);
    msgpack_sbuffer_init(&ctx);
    msgpack_sbuffer_init(&vars.params);
    msgpack_sbuffer_init(&vars.settings);
    cd_query *q = NULL;
    if (!parse_submission(json, len, caller, admin, &s, &params, &vars, field, flen, msg, mlen))
        goto out;
    if (vars.n > 0)
        sim_ctx_encode_variants(&ctx, s.kernel, s.seed, vars.params.data, vars.params.size, vars.n,
            strcmp(s.strategy, "stat_weights") == 0);
    else
        sim_ctx_encode(&ctx, s.kernel, s.seed, params.data, params.size);
    if (vars.n > 0) { /* the variants together, as a node will open them */
        sim_work w;
        char err[256];
        if (sim_work_open(&w, ctx.data, ctx.size, err, sizeof err) != 0) {
            snprintf(field, flen, "%s", s.candidates ? "candidates" : "weights");
            snprintf(msg, mlen, "%s", err);
            goto out;
        }
        sim_work_close(&w);
    }
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(hash, (const unsigned char *)ctx.data, ctx.size);
    char *spec = malloc(len + 1);
    if (spec == NULL)
        sf_oom(len + 1);
    memcpy(spec, json, len);
    spec[len] = '\0';
    /* Stored once per key: sent again (by the store after a broken
     * connection, or by the client), it finds the job already there. */
    char drawn[1 + CD_SUBMISSION_KEY_DRAWN];
    if (key == NULL) {
        drawn[0] = '~';
        cd_submission_key_draw(drawn + 1);
        key = drawn;
    }
    unsigned char body_hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(body_hash, (const unsigned char *)json, len);
    q = cd_query_new(
        "WITH ins AS (INSERT INTO jobs (owner, kernel, strategy, items, seed, priority, spec, params, ctx_hash, "
        "name, strategy_params, submission_key, submission_hash, tiers, check_rate, trusted_tiers) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13, $14, $15::double precision, $16) "
        "ON CONFLICT (owner, submission_key) DO NOTHING RETURNING id, owner, kernel, items) "
        "SELECT id, true AS stored_now, true AS same_body, owner, kernel, items FROM ins UNION ALL "
        "SELECT id, false, submission_hash = $13, owner, kernel, items FROM jobs WHERE owner = $1 "
        "AND submission_key = $12 AND NOT EXISTS (SELECT 1 FROM ins)");
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
    if (vars.n > 0)
        cd_query_bytes(q, vars.settings.data, vars.settings.size);
    else
        cd_query_text(q, NULL);
    cd_query_text(q, key);
    cd_query_bytes(q, body_hash, sizeof body_hash);
    cd_query_int(q, s.tiers);
    char rate[32];
    snprintf(rate, sizeof rate, "%.17g", s.check_rate);
    cd_query_text(q, rate);
    cd_query_int(q, s.trusted);
    free(spec);
out:
    msgpack_sbuffer_destroy(&ctx);
    msgpack_sbuffer_destroy(&params);
    msgpack_sbuffer_destroy(&vars.params);
    msgpack_sbuffer_destroy(&vars.settings);
    return q;
}
