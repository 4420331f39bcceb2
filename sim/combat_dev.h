/*
 * combat_dev.h — the `combat` kernel's device source, shared by every
 * backend (see dev.h): one iteration of a rotation/damage simulation per
 * item, returning damage per second, and with stat_weights the DPS gained
 * per rating point of power, crit, haste, mastery and versatility (central
 * differences on common random numbers).
 *
 * Random numbers: draw n of item i on stream s is word (n mod 4) of
 * Philox4x32-10 with key (seed lo, seed hi) and counter
 * (floor(n/4), s, i lo, i hi). Streams: 1 fight length, 2 crits, 3 procs.
 * docs/kernels.md specifies the rules completely.
 */
#ifndef SIM_COMBAT_DEV_H
#define SIM_COMBAT_DEV_H

#ifndef __OPENCL_VERSION__
#include "sim/dev.h"
#endif

#define SIM_CB_MAXAB 8
#define SIM_CB_NSTAT 5     /* power, crit, haste, mastery, versatility */
#define SIM_CB_MAXVAR 11   /* base + each stat down and up */
#define SIM_CB_STREAM_LEN 1u
#define SIM_CB_STREAM_CRIT 2u
#define SIM_CB_STREAM_PROC 3u

/* One ability, in priority order. 8-byte fields only. */
typedef struct sim_combat_ability {
    double coef;      /* damage = coef * power * multipliers */
    double cooldown;  /* seconds, 0 for none */
    double cast;      /* seconds before haste, 0 for instant */
    sim_i64 gcd;      /* triggers the global cooldown */
    sim_i64 mastery;  /* damage scaled by mastery */
    sim_i64 hasted_cd;/* cooldown divided by 1 + haste */
} sim_combat_ability;

/* Derived per-variant quantities (base, then each stat -/+ delta). */
typedef struct sim_combat_var {
    double power;
    double crit;      /* crit chance, 0..1 */
    double inv_speed; /* 1 / (1 + haste) */
    double gcd;       /* max(1.5 / (1 + haste), 0.75) */
    double mult;      /* (1 + versatility) */
    double mastery;   /* 1 + mastery */
} sim_combat_var;

typedef struct sim_combat_params {
    double fight_len, fight_var, crit_mult, proc_chance;
    double stats[SIM_CB_NSTAT]; /* ratings as given */
    double delta;               /* rating step for stat weights */
    double inv_2delta;
    sim_i64 nab;
    sim_i64 proc_resets;        /* ability index whose cooldown a proc resets, -1 none */
    sim_i64 stat_weights;
    sim_i64 nvar;
    sim_i64 nout;
    sim_i64 max_casts;
    sim_combat_ability ab[SIM_CB_MAXAB];
    sim_combat_var var[SIM_CB_MAXVAR];
} sim_combat_params;

/* A cursor over one Philox stream of one item. */
typedef struct sim_stream {
    sim_u32x4 blk;
    sim_u32 next; /* index of the next draw */
    sim_u32 stream;
    sim_u32 i_lo, i_hi, k0, k1;
} sim_stream;

SIM_FN void sim_stream_init(sim_stream *s, sim_u32 stream, sim_u64 item, sim_u32 k0, sim_u32 k1)
{
    s->next = 0;
    s->stream = stream;
    s->i_lo = (sim_u32)item;
    s->i_hi = (sim_u32)(item >> 32);
    s->k0 = k0;
    s->k1 = k1;
    s->blk.v[0] = s->blk.v[1] = s->blk.v[2] = s->blk.v[3] = 0;
}

SIM_FN double sim_stream_u01(sim_stream *s)
{
    if ((s->next & 3u) == 0)
        s->blk = sim_philox(s->next >> 2, s->stream, s->i_lo, s->i_hi, s->k0, s->k1);
    sim_u32 w = s->blk.v[s->next & 3u];
    s->next += 1;
    return sim_u01(w);
}

/* Damage per second of one iteration under variant v. */
SIM_FN_OUTLINE double sim_combat_dps(const sim_combat_params *p, const sim_combat_var *v, sim_u64 item,
    sim_u32 k0, sim_u32 k1)
{
    sim_stream s_len, s_crit, s_proc;
    double ready[SIM_CB_MAXAB];
    sim_stream_init(&s_len, SIM_CB_STREAM_LEN, item, k0, k1);
    sim_stream_init(&s_crit, SIM_CB_STREAM_CRIT, item, k0, k1);
    sim_stream_init(&s_proc, SIM_CB_STREAM_PROC, item, k0, k1);
    double len = p->fight_len * (1.0 + p->fight_var * (2.0 * sim_stream_u01(&s_len) - 1.0));
    for (int a = 0; a < SIM_CB_MAXAB; a++)
        ready[a] = 0.0;

    double now = 0.0, gcd_end = 0.0, damage = 0.0;
    for (sim_i64 n = 0; n < p->max_casts; n++) {
        /* The ability that can start earliest: not before the previous cast
         * ends, nor before the global cooldown ends if it triggers one, nor
         * before its own cooldown ends; ties go to the earlier in priority. */
        double t0 = now > gcd_end ? now : gcd_end;
        int pick = -1;
        double when = 0.0;
        for (int a = 0; a < (int)p->nab; a++) {
            double ta = p->ab[a].gcd ? t0 : now;
            ta = ready[a] > ta ? ready[a] : ta;
            if (pick < 0 || ta < when) {
                pick = a;
                when = ta;
            }
        }
        const sim_combat_ability *ab = &p->ab[pick];
        double end = when + ab->cast * v->inv_speed;
        if (end > len)
            break;
        double d = ab->coef * v->power * v->mult;
        d = ab->mastery ? d * v->mastery : d;
        d = sim_stream_u01(&s_crit) < v->crit ? d * p->crit_mult : d;
        damage = damage + d;
        ready[pick] = when + (ab->hasted_cd ? ab->cooldown * v->inv_speed : ab->cooldown);
        if (ab->gcd)
            gcd_end = when + v->gcd;
        now = end;
        if (p->proc_resets >= 0 && sim_stream_u01(&s_proc) < p->proc_chance)
            ready[p->proc_resets] = end;
    }
    return damage / len;
}

/* Values of SIM_W consecutive items starting at g0 (a multiple of 4), in
 * lane order (sim_lane_of): out[0] DPS, then with stat_weights DPS per
 * rating point of each stat. */
SIM_FN void sim_combat_group(const sim_combat_params *p, sim_u32 k0, sim_u32 k1, sim_u64 g0,
    double out[SIM_MAX_OUT][SIM_W])
{
    for (int i = 0; i < SIM_W; i++) {
        sim_u64 item = g0 + (sim_u64)i;
        int l = sim_lane_of(i);
        out[0][l] = sim_combat_dps(p, &p->var[0], item, k0, k1);
        if (p->stat_weights)
            for (int s = 0; s < SIM_CB_NSTAT; s++) {
                double lo = sim_combat_dps(p, &p->var[1 + 2 * s], item, k0, k1);
                double hi = sim_combat_dps(p, &p->var[2 + 2 * s], item, k0, k1);
                out[1 + s][l] = (hi - lo) * p->inv_2delta;
            }
    }
}

#endif /* SIM_COMBAT_DEV_H */
