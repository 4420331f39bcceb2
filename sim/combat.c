/*
 * combat.c — the `combat` kernel on the host: parameters (a character and
 * its priority list), output layouts and the CPU loop. The simulation is
 * in combat_dev.h, shared with the device backends.
 */
#include <stdio.h>
#include <string.h>

#include "sim/combat_dev.h"
#include "sim/sim_int.h"

/* An ability's fields, then the character's (docs/kernels.md). */
enum { A_NAME, A_COEF, A_COOLDOWN, A_CAST, A_GCD, A_MASTERY, A_HASTED, A_COUNT };
static const sim__param ability_table[A_COUNT] = {
    [A_NAME] = { .name = "name", .type = SIM__P_STRING, .dflt_text = "none",
        .help = "a name, for proc_resets" },
    [A_COEF] = { .name = "coefficient", .type = SIM__P_NUMBER, .required = true, .lo = 0, .hi = 1000.0,
        .help = "damage per hit in units of power" },
    [A_COOLDOWN] = { .name = "cooldown", .type = SIM__P_NUMBER, .lo = 0, .hi = 3600.0, .help = "seconds" },
    [A_CAST] = { .name = "cast_time", .type = SIM__P_NUMBER, .lo = 0, .hi = 60.0,
        .help = "seconds; 0 is instant" },
    [A_GCD] = { .name = "gcd", .type = SIM__P_BOOL, .dflt = 1,
        .help = "triggers and waits for the global cooldown" },
    [A_MASTERY] = { .name = "mastery", .type = SIM__P_BOOL, .help = "mastery raises its damage" },
    [A_HASTED] = { .name = "hasted_cooldown", .type = SIM__P_BOOL, .help = "haste shortens its cooldown" },
};

enum { P_POWER, P_CRIT, P_HASTE, P_MASTERY, P_VERS, P_LENGTH, P_VARIATION, P_CRIT_MULT, P_PROC_CHANCE,
    P_PROC_RESETS, P_ABILITIES, P_STAT_WEIGHTS, P_DELTA, P_HIST, P_COUNT };
static const sim__param params_table[P_COUNT] = {
    [P_POWER] = { .name = "power", .type = SIM__P_NUMBER, .required = true, .lo_open = true, .lo = 0,
        .hi = 1e6, .help = "every hit is coefficient * power * multipliers" },
    [P_CRIT] = { .name = "crit", .type = SIM__P_NUMBER, .lo = 0, .hi = 17000.0,
        .help = "rating: crit chance 0.05 + crit/18000" },
    [P_HASTE] = { .name = "haste", .type = SIM__P_NUMBER, .lo = 0, .hi = 100000.0,
        .help = "rating: casts and hasted cooldowns * 1/(1 + haste/17000)" },
    [P_MASTERY] = { .name = "mastery", .type = SIM__P_NUMBER, .lo = 0, .hi = 100000.0,
        .help = "rating: mastery abilities * (1 + (0.08 + mastery/18000))" },
    [P_VERS] = { .name = "versatility", .type = SIM__P_NUMBER, .lo = 0, .hi = 100000.0,
        .help = "rating: all damage * (1 + versatility/20500)" },
    [P_LENGTH] = { .name = "fight_length", .type = SIM__P_NUMBER, .lo = 10.0, .hi = 3600.0, .dflt = 300.0,
        .help = "mean fight length in seconds" },
    [P_VARIATION] = { .name = "fight_variation", .type = SIM__P_NUMBER, .lo = 0, .hi = 0.5, .dflt = 0.2,
        .help = "fight length varies by up to this fraction" },
    [P_CRIT_MULT] = { .name = "crit_multiplier", .type = SIM__P_NUMBER, .lo = 1.0, .hi = 10.0, .dflt = 2.0,
        .help = "damage of a crit" },
    [P_PROC_CHANCE] = { .name = "proc_chance", .type = SIM__P_NUMBER, .lo = 0, .hi = 1.0,
        .help = "after each cast, the chance to reset proc_resets' cooldown" },
    [P_PROC_RESETS] = { .name = "proc_resets", .type = SIM__P_STRING, .dflt_text = "none",
        .help = "the name of the ability a proc makes ready" },
    [P_ABILITIES] = { .name = "abilities", .type = SIM__P_LIST, .required = true, .lo = 1, .hi = SIM_CB_MAXAB,
        .fields = ability_table, .nfields = A_COUNT, .help = "the priority list, first is most wanted" },
    [P_STAT_WEIGHTS] = { .name = "stat_weights", .type = SIM__P_BOOL,
        .help = "adds the outputs w_power, w_crit, w_haste, w_mastery, w_versatility" },
    [P_DELTA] = { .name = "delta", .type = SIM__P_NUMBER, .lo_open = true, .lo = 0, .hi = 10000.0, .dflt = 100.0,
        .help = "rating step of the stat weights" },
    [P_HIST] = { .name = "hist", .type = SIM__P_RANGE, .dflt_text = "[0, 2 max coefficient * power * crit multiplier)",
        .help = "histogram range [lo, hi] of dps" },
};
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
        return sim__param_fail(parent, params_table[P_ABILITIES].name, "entry %d must be an object", i);
    const sim__param *t = ability_table;
    if ((rc = sim__param_known(&c, t, A_COUNT)) != 0 ||
        (rc = sim__param_num(&c, &t[A_COEF], &ab->coef)) != 0 ||
        (rc = sim__param_num(&c, &t[A_COOLDOWN], &ab->cooldown)) != 0 ||
        (rc = sim__param_num(&c, &t[A_CAST], &ab->cast)) != 0 ||
        (rc = sim__param_bool(&c, &t[A_GCD], &gcd)) != 0 ||
        (rc = sim__param_bool(&c, &t[A_MASTERY], &mastery)) != 0 ||
        (rc = sim__param_bool(&c, &t[A_HASTED], &hasted)) != 0)
        return rc;
    *name = sim__param_get(&c, t[A_NAME].name);
    if (*name != NULL && ((*name)->type != MSGPACK_OBJECT_STR || (*name)->via.str.size == 0))
        return sim__param_fail(&c, t[A_NAME].name, "must be a non-empty string");
    if (!gcd && ab->cast < 0.1 && ab->cooldown < 0.1)
        return sim__param_fail(&c, t[A_COOLDOWN].name,
            "an ability off the global cooldown with no cast time needs a cooldown of at least 0.1 s");
    ab->gcd = gcd;
    ab->mastery = mastery;
    ab->hasted_cd = hasted;
    return 0;
}

/* A cast rate no rotation of p's abilities can exceed: every ability once
 * at 0, then each no more often than its shortest interval (its cast, the
 * global cooldown if it waits for it, and its cooldown unless a proc resets
 * it, all at top's haste); never more than max_casts in the shortest fight. */
static double casts_per_s(const sim_combat_params *p, const sim_combat_var *top)
{
    double len_min = p->fight_len * (1.0 - p->fight_var), most = (double)p->max_casts / len_min;
    double per_s = (double)p->nab / len_min;
    for (int i = 0; i < (int)p->nab; i++) {
        const sim_combat_ability *ab = &p->ab[i];
        double iv = ab->cast * top->inv_speed, cd = ab->hasted_cd ? ab->cooldown * top->inv_speed : ab->cooldown;
        iv = ab->gcd && top->gcd > iv ? top->gcd : iv;
        iv = (i != p->proc_resets || !(p->proc_chance > 0)) && cd > iv ? cd : iv;
        if (!(iv > 0))
            return most; /* an instant ability off the GCD that a proc resets */
        per_s += 1.0 / iv;
    }
    return per_s < most ? per_s : most;
}

static int combat_parse(sim__pctx *c, void *params, sim_job *job)
{
    sim_combat_params *p = params;
    const msgpack_object *names[SIM_CB_MAXAB] = { 0 };
    bool sw;
    int rc;

    const sim__param *t = params_table;
    if ((rc = sim__param_known(c, t, P_COUNT)) != 0)
        return rc;
    for (int s = 0; s < SIM_CB_NSTAT; s++) /* power, crit, haste, mastery, versatility */
        if ((rc = sim__param_num(c, &t[P_POWER + s], &p->stats[s])) != 0)
            return rc;
    if ((rc = sim__param_num(c, &t[P_LENGTH], &p->fight_len)) != 0 ||
        (rc = sim__param_num(c, &t[P_VARIATION], &p->fight_var)) != 0 ||
        (rc = sim__param_num(c, &t[P_CRIT_MULT], &p->crit_mult)) != 0 ||
        (rc = sim__param_num(c, &t[P_PROC_CHANCE], &p->proc_chance)) != 0 ||
        (rc = sim__param_bool(c, &t[P_STAT_WEIGHTS], &sw)) != 0 ||
        (rc = sim__param_num(c, &t[P_DELTA], &p->delta)) != 0)
        return rc;

    const sim__param *ta = &t[P_ABILITIES];
    const msgpack_object *abs = sim__param_get(c, ta->name);
    if (abs == NULL)
        return sim__param_fail(c, ta->name, "missing; a list of %g to %g abilities in priority order is required",
            ta->lo, ta->hi);
    if (abs->type != MSGPACK_OBJECT_ARRAY || abs->via.array.size < ta->lo || abs->via.array.size > ta->hi)
        return sim__param_fail(c, ta->name, "must be a list of %g to %g abilities in priority order", ta->lo,
            ta->hi);
    p->nab = abs->via.array.size;
    for (int i = 0; i < (int)p->nab; i++)
        if ((rc = parse_ability(c, &abs->via.array.ptr[i], i, &p->ab[i], &names[i])) != 0)
            return rc;

    p->proc_resets = -1;
    const msgpack_object *pr = sim__param_get(c, t[P_PROC_RESETS].name);
    if (pr != NULL && pr->type != MSGPACK_OBJECT_NIL) {
        if (pr->type != MSGPACK_OBJECT_STR)
            return sim__param_fail(c, t[P_PROC_RESETS].name, "must be the name of an ability");
        for (int i = 0; i < (int)p->nab && p->proc_resets < 0; i++)
            if (names[i] != NULL && str_is(names[i], pr->via.str.ptr, pr->via.str.size))
                p->proc_resets = i;
        if (p->proc_resets < 0)
            return sim__param_fail(c, t[P_PROC_RESETS].name, "names no ability (give the abilities names)");
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

    /* The largest hit, at every stat's top, times the most casts a second. */
    double best = 0.0;
    for (int i = 0; i < (int)p->nab; i++)
        best = p->ab[i].coef > best ? p->ab[i].coef : best;
    sim_combat_var top = variant((double[]){ p->stats[0] + p->delta, 17100.0, 100000.0 + p->delta,
        100000.0 + p->delta, 100000.0 + p->delta });
    double hit = best * top.power * top.mult * top.mastery * p->crit_mult;
    double bound = hit * casts_per_s(p, &top) + 1.0;
    double hist_lo = 0.0, hist_hi = 2.0 * best * p->stats[0] * p->crit_mult + 1.0;
    if ((rc = sim__param_range(c, &t[P_HIST], &hist_lo, &hist_hi)) != 0)
        return rc;
    job->nout = (int)p->nout;
    job->out_name[0] = out_names[0];
    if (sim_layout_make(&job->layout[0], bound, hist_lo, hist_hi) != 0)
        return sim__param_fail(c, t[P_HIST].name, "gives an unusable histogram range");
    for (int s = 0; s < (sw ? SIM_CB_NSTAT : 0); s++) {
        job->out_name[1 + s] = out_names[1 + s];
        double wb = bound / p->delta + 1.0;
        double wr = 4.0 * best * p->crit_mult + 1.0;
        if (sim_layout_make(&job->layout[1 + s], wb, -wr, wr) != 0)
            return sim__param_fail(c, t[P_DELTA].name, "too small for the stat weights' range");
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
        for (int i = lo; i < hi; i++) {
            int l = sim_lane_of(i);
            out[0][l] = sim_combat_dps(p, &p->var[0], g + (uint64_t)i, k0, k1);
            if (p->stat_weights)
                for (int s = 0; s < SIM_CB_NSTAT; s++) {
                    double dn = sim_combat_dps(p, &p->var[1 + 2 * s], g + (uint64_t)i, k0, k1);
                    double up = sim_combat_dps(p, &p->var[2 + 2 * s], g + (uint64_t)i, k0, k1);
                    out[1 + s][l] = (up - dn) * p->inv_2delta;
                }
        }
        sim_acc_lanes(acc, job->layout, (int)p->nout, out, lo, hi);
    }
}

const sim_kernel sim__combat_kernel = {
    .name = "combat",
    .help = "a rotation and damage simulation; an item is one fight, its output damage per second",
    .params = params_table,
    .nparams = P_COUNT,
    .params_size = sizeof(sim_combat_params),
    .parse = combat_parse,
    .run_cpu = combat_run_cpu,
    .cl_entry = "sim_combat_cl",
    .cuda_entry = "sim_combat_cuda",
};
