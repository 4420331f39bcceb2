/*
 * combat.c — the `combat` kernel on the host: parameters (a character and
 * its priority list), output layouts and the CPU loop. The simulation is
 * in combat_dev.h, shared with the device backends.
 */
#include <stdio.h>
#include <string.h>

#include "sim/combat_dev.h"
#include "sim/sim_int.h"

static const char *const fields[] = { "power", "crit", "haste", "mastery", "versatility",
    "fight_length", "fight_variation", "crit_multiplier", "proc_chance", "proc_resets",
    "abilities", "stat_weights", "delta", "hist", NULL };
static const char *const ability_fields[] = { "name", "coefficient", "cooldown", "cast_time",
    "gcd", "mastery", "hasted_cooldown", NULL };
static const char *const out_names[] = { "dps", "w_power", "w_crit", "w_haste", "w_mastery",
    "w_versatility" };

/* Rating conversions (docs/kernels.md): percent points per rating. */
#define CRIT_PER_PCT 180.0
#define HASTE_PER_PCT 170.0
#define MASTERY_PER_PCT 180.0
#define VERS_PER_PCT 205.0

static sim_combat_var variant(const double *st)
{
    sim_combat_var v;
    double haste = st[2] / (HASTE_PER_PCT * 100.0);
    v.power = st[0];
    v.crit = 0.05 + st[1] / (CRIT_PER_PCT * 100.0);
    v.inv_speed = 1.0 / (1.0 + haste);
    v.gcd = 1.5 * v.inv_speed;
    v.gcd = v.gcd > 0.75 ? v.gcd : 0.75;
    v.mastery = 1.0 + (0.08 + st[3] / (MASTERY_PER_PCT * 100.0));
    v.mult = 1.0 + st[4] / (VERS_PER_PCT * 100.0);
    return v;
}

static bool str_is(const msgpack_object *o, const char *s, uint32_t n)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

static int parse_ability(sim__pctx *parent, const msgpack_object *o, int i, sim_combat_ability *ab,
    const msgpack_object **name)
{
    char prefix[32];
    bool gcd, mastery, hasted;
    int rc;
    snprintf(prefix, sizeof prefix, "abilities[%d].", i);
    sim__pctx c = { o, prefix, parent->err, parent->errlen };
    if (o->type != MSGPACK_OBJECT_MAP)
        return sim__param_fail(parent, "abilities", "entry %d must be an object", i);
    if ((rc = sim__param_known(&c, ability_fields)) != 0 ||
        (rc = sim__param_num(&c, "coefficient", &ab->coef, 0.0, false, 1000.0, true, 0)) != 0 ||
        (rc = sim__param_num(&c, "cooldown", &ab->cooldown, 0.0, false, 3600.0, false, 0.0)) != 0 ||
        (rc = sim__param_num(&c, "cast_time", &ab->cast, 0.0, false, 60.0, false, 0.0)) != 0 ||
        (rc = sim__param_bool(&c, "gcd", &gcd, true)) != 0 ||
        (rc = sim__param_bool(&c, "mastery", &mastery, false)) != 0 ||
        (rc = sim__param_bool(&c, "hasted_cooldown", &hasted, false)) != 0)
        return rc;
    *name = sim__param_get(&c, "name");
    if (*name != NULL && ((*name)->type != MSGPACK_OBJECT_STR || (*name)->via.str.size == 0))
        return sim__param_fail(&c, "name", "must be a non-empty string");
    if (!gcd && ab->cast < 0.1 && ab->cooldown < 0.1)
        return sim__param_fail(&c, "cooldown",
            "an ability off the global cooldown with no cast time needs a cooldown of at least 0.1 s");
    ab->gcd = gcd;
    ab->mastery = mastery;
    ab->hasted_cd = hasted;
    return 0;
}

static int combat_parse(sim__pctx *c, void *params, sim_job *job)
{
    sim_combat_params *p = params;
    const msgpack_object *names[SIM_CB_MAXAB] = { 0 };
    bool sw;
    int rc;

    if ((rc = sim__param_known(c, fields)) != 0 ||
        (rc = sim__param_num(c, "power", &p->stats[0], 0.0, true, 1e6, true, 0)) != 0 ||
        (rc = sim__param_num(c, "crit", &p->stats[1], 0.0, false, 17000.0, false, 0.0)) != 0 ||
        (rc = sim__param_num(c, "haste", &p->stats[2], 0.0, false, 100000.0, false, 0.0)) != 0 ||
        (rc = sim__param_num(c, "mastery", &p->stats[3], 0.0, false, 100000.0, false, 0.0)) != 0 ||
        (rc = sim__param_num(c, "versatility", &p->stats[4], 0.0, false, 100000.0, false, 0.0)) != 0 ||
        (rc = sim__param_num(c, "fight_length", &p->fight_len, 10.0, false, 3600.0, false, 300.0)) != 0 ||
        (rc = sim__param_num(c, "fight_variation", &p->fight_var, 0.0, false, 0.5, false, 0.2)) != 0 ||
        (rc = sim__param_num(c, "crit_multiplier", &p->crit_mult, 1.0, false, 10.0, false, 2.0)) != 0 ||
        (rc = sim__param_num(c, "proc_chance", &p->proc_chance, 0.0, false, 1.0, false, 0.0)) != 0 ||
        (rc = sim__param_bool(c, "stat_weights", &sw, false)) != 0 ||
        (rc = sim__param_num(c, "delta", &p->delta, 0.0, true, 10000.0, false, 100.0)) != 0)
        return rc;

    const msgpack_object *abs = sim__param_get(c, "abilities");
    if (abs == NULL)
        return sim__param_fail(c, "abilities", "missing; a list of 1 to %d abilities in priority order is required",
            SIM_CB_MAXAB);
    if (abs->type != MSGPACK_OBJECT_ARRAY || abs->via.array.size < 1 || abs->via.array.size > SIM_CB_MAXAB)
        return sim__param_fail(c, "abilities", "must be a list of 1 to %d abilities in priority order",
            SIM_CB_MAXAB);
    p->nab = abs->via.array.size;
    for (int i = 0; i < (int)p->nab; i++)
        if ((rc = parse_ability(c, &abs->via.array.ptr[i], i, &p->ab[i], &names[i])) != 0)
            return rc;

    p->proc_resets = -1;
    const msgpack_object *pr = sim__param_get(c, "proc_resets");
    if (pr != NULL && pr->type != MSGPACK_OBJECT_NIL) {
        if (pr->type != MSGPACK_OBJECT_STR)
            return sim__param_fail(c, "proc_resets", "must be the name of an ability");
        for (int i = 0; i < (int)p->nab && p->proc_resets < 0; i++)
            if (names[i] != NULL && str_is(names[i], pr->via.str.ptr, pr->via.str.size))
                p->proc_resets = i;
        if (p->proc_resets < 0)
            return sim__param_fail(c, "proc_resets", "names no ability (give the abilities names)");
    }

    p->max_casts = 100000;
    p->stat_weights = sw;
    p->nvar = sw ? SIM_CB_MAXVAR : 1;
    p->nout = sw ? 1 + SIM_CB_NSTAT : 1;
    p->inv_2delta = 1.0 / (2.0 * p->delta);
    p->var[0] = variant(p->stats);
    if (sw)
        for (int s = 0; s < SIM_CB_NSTAT; s++)
            for (int d = 0; d < 2; d++) {
                double st[SIM_CB_NSTAT];
                memcpy(st, p->stats, sizeof st);
                st[s] = st[s] + (d ? p->delta : -p->delta);
                p->var[1 + 2 * s + d] = variant(st);
            }

    /* The largest hit, and a cast rate no rotation can exceed. */
    double best = 0.0;
    for (int i = 0; i < (int)p->nab; i++)
        best = p->ab[i].coef > best ? p->ab[i].coef : best;
    sim_combat_var top = variant((double[]){ p->stats[0] + p->delta, 17100.0, 0, 100000.0 + p->delta,
        100000.0 + p->delta });
    double hit = best * top.power * top.mult * top.mastery * p->crit_mult;
    double bound = hit * 16.0 * (double)p->nab + 1.0;
    double hist_lo = 0.0, hist_hi = 2.0 * best * p->stats[0] * p->crit_mult + 1.0;
    if ((rc = sim__param_range(c, "hist", &hist_lo, &hist_hi)) != 0)
        return rc;
    job->nout = (int)p->nout;
    job->out_name[0] = out_names[0];
    if (sim_layout_make(&job->layout[0], bound, hist_lo, hist_hi) != 0)
        return sim__param_fail(c, "hist", "gives an unusable histogram range");
    for (int s = 0; s < (sw ? SIM_CB_NSTAT : 0); s++) {
        job->out_name[1 + s] = out_names[1 + s];
        double wb = bound / p->delta + 1.0;
        double wr = 4.0 * best * p->crit_mult + 1.0;
        if (sim_layout_make(&job->layout[1 + s], wb, -wr, wr) != 0)
            return sim__param_fail(c, "delta", "too small for the stat weights' range");
    }
    return 0;
}

static void combat_run_cpu(const sim_job *job, uint64_t first, uint64_t count, sim_acc *acc)
{
    const sim_combat_params *p = job->params;
    const sim_u32 k0 = (sim_u32)job->seed, k1 = (sim_u32)(job->seed >> 32);
    double out[SIM_MAX_OUT][SIM_W];
    const uint64_t end = first + count;

    for (uint64_t g = sim__group_base(first); g < end; g += SIM_W) {
        int lo = g < first ? (int)(first - g) : 0;
        int hi = end - g < SIM_W ? (int)(end - g) : SIM_W;
        /* combat items are independent and costly: skip the lanes outside
         * the range instead of computing and dropping them */
        for (int l = lo; l < hi; l++) {
            out[0][l] = sim_combat_dps(p, &p->var[0], g + (uint64_t)l, k0, k1);
            if (p->stat_weights)
                for (int s = 0; s < SIM_CB_NSTAT; s++) {
                    double dn = sim_combat_dps(p, &p->var[1 + 2 * s], g + (uint64_t)l, k0, k1);
                    double up = sim_combat_dps(p, &p->var[2 + 2 * s], g + (uint64_t)l, k0, k1);
                    out[1 + s][l] = (up - dn) * p->inv_2delta;
                }
        }
        sim_acc_lanes(acc, job->layout, (int)p->nout, out, lo, hi);
    }
}

const sim_kernel sim__combat_kernel = {
    .name = "combat",
    .params_size = sizeof(sim_combat_params),
    .parse = combat_parse,
    .run_cpu = combat_run_cpu,
    .cl_entry = "sim_combat_cl",
    .cuda_entry = "sim_combat_cuda",
};
