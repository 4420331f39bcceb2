/*
 * params.c — reading kernel parameters from a msgpack map, with errors a
 * user can act on: the field, what was wrong, and the allowed range.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim_int.h"
#include "base/json.h"

int sim__param_fail(const sim__pctx *c, const char *field, const char *fmt, ...)
{
    if (c->err != NULL && c->errlen > 0) {
        int n = snprintf(c->err, c->errlen, "field '%s%s': ", c->prefix, field);
        if (n >= 0 && (size_t)n < c->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return SIM_EPARAM;
}

const msgpack_object *sim__param_get(const sim__pctx *c, const char *field)
{
    return sf_mp_get(c->map, field);
}

int sim__param_known(const sim__pctx *c, const sim__param *table, size_t n)
{
    const msgpack_object_map *m = &c->map->via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        bool ok = false;
        for (size_t f = 0; f < n && !ok; f++)
            ok = sf_mp_streq(k, table[f].name);
        if (ok)
            continue;
        char name[48] = "?";
        if (k->type == MSGPACK_OBJECT_STR)
            snprintf(name, sizeof name, "%.*s", (int)(k->via.str.size > 40 ? 40 : k->via.str.size),
                k->via.str.ptr);
        char list[400] = "";
        size_t used = 0;
        for (size_t f = 0; f < n && used < sizeof list; f++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", table[f].name);
            if (w < 0)
                break;
            used += (size_t)w;
        }
        return sim__param_fail(c, name, "unknown field (known fields: %s)", list);
    }
    return 0;
}

static bool as_number(const msgpack_object *o, double *out)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)o->via.u64; return true;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)o->via.i64; return true;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: *out = o->via.f64; return true;
    default: return false;
    }
}

int sim__param_num(const sim__pctx *c, const sim__param *d, double *out)
{
    const char *field = d->name;
    const double lo = d->lo, hi = d->hi;
    const bool lo_open = d->lo_open;
    const msgpack_object *o = sim__param_get(c, field);
    double v;
    if (o == NULL) {
        if (d->required)
            return sim__param_fail(c, field, "missing; a number in %s%.10g, %.10g] is required",
                lo_open ? "(" : "[", lo, hi);
        *out = d->dflt;
        return 0;
    }
    if (!as_number(o, &v) || !isfinite(v))
        return sim__param_fail(c, field, "must be a finite number in %s%.10g, %.10g]",
            lo_open ? "(" : "[", lo, hi);
    if (v < lo || (lo_open && v == lo) || v > hi)
        return sim__param_fail(c, field, "must be in %s%.10g, %.10g], got %.10g",
            lo_open ? "(" : "[", lo, hi, v);
    *out = v;
    return 0;
}

int sim__param_int(const sim__pctx *c, const sim__param *d, int64_t *out)
{
    const char *field = d->name;
    const int64_t lo = (int64_t)d->lo, hi = (int64_t)d->hi;
    const msgpack_object *o = sim__param_get(c, field);
    int64_t v;
    if (o == NULL) {
        if (d->required)
            return sim__param_fail(c, field, "missing; an integer in [%" PRId64 ", %" PRId64 "] is required",
                lo, hi);
        *out = (int64_t)d->dflt;
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > (uint64_t)hi)
            return sim__param_fail(c, field, "must be in [%" PRId64 ", %" PRId64 "], got %" PRIu64,
                lo, hi, o->via.u64);
        v = (int64_t)o->via.u64;
    } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        v = o->via.i64;
    } else if ((o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32) &&
        o->via.f64 == floor(o->via.f64) && fabs(o->via.f64) < 9e15) {
        v = (int64_t)o->via.f64;
    } else {
        return sim__param_fail(c, field, "must be an integer in [%" PRId64 ", %" PRId64 "]", lo, hi);
    }
    if (v < lo || v > hi)
        return sim__param_fail(c, field, "must be in [%" PRId64 ", %" PRId64 "], got %" PRId64, lo,
            hi, v);
    *out = v;
    return 0;
}

int sim__param_bool(const sim__pctx *c, const sim__param *d, bool *out)
{
    const msgpack_object *o = sim__param_get(c, d->name);
    if (o == NULL) {
        *out = d->dflt != 0.0;
        return 0;
    }
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return sim__param_fail(c, d->name, "must be true or false");
    *out = o->via.boolean;
    return 0;
}

int sim__param_enum(const sim__pctx *c, const sim__param *d, int *out)
{
    const char *field = d->name;
    const char *const *names = d->values;
    const msgpack_object *o = sim__param_get(c, field);
    char list[200] = "";
    size_t used = 0;
    for (const char *const *n = names; *n != NULL && used < sizeof list; n++) {
        int k = snprintf(list + used, sizeof list - used, "%s\"%s\"", used ? ", " : "", *n);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    if (o == NULL) {
        if (d->required)
            return sim__param_fail(c, field, "missing; one of %s is required", list);
        *out = (int)d->dflt;
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_STR)
        for (int i = 0; names[i] != NULL; i++)
            if (sf_mp_streq(o, names[i])) {
                *out = i;
                return 0;
            }
    return sim__param_fail(c, field, "must be one of %s", list);
}

int sim__param_range(const sim__pctx *c, const sim__param *d, double *lo, double *hi)
{
    const char *field = d->name;
    const msgpack_object *h = sim__param_get(c, field);
    double v[2];
    if (h == NULL)
        return 0;
    if (h->type != MSGPACK_OBJECT_ARRAY || h->via.array.size != 2 ||
        !as_number(&h->via.array.ptr[0], &v[0]) || !as_number(&h->via.array.ptr[1], &v[1]))
        return sim__param_fail(c, field, "must be [lo, hi], two numbers with lo < hi");
    if (!isfinite(v[0]) || !isfinite(v[1]) || !(v[0] < v[1]) || !isfinite(v[1] - v[0]))
        return sim__param_fail(c, field, "must be [lo, hi] with lo < hi, got [%g, %g]", v[0], v[1]);
    *lo = v[0];
    *hi = v[1];
    return 0;
}
