/*
 * kvec.h — the kernels' test vectors (tests/vectors/kernels.vec): the
 * parameter sets, and the writer of every line the file holds for one set.
 * For each traced item the stages are re-derived one item at a time from
 * the device functions the kernels call (dev.h, option_dev.h,
 * combat_dev.h) in the order docs/kernels.md specifies, and the item's
 * final values are held to what the kernel's own group function gives for
 * it; the result bytes of item ranges come from a backend's run.
 *
 * Shared by the generator (tests/wasm/kernel_vectors.c, built natively and
 * with emcc) and tests/unit/test_sim_vectors.c. The file's format is
 * described at its top (kvec_write_preamble).
 */
#ifndef TESTS_VECTORS_KVEC_H
#define TESTS_VECTORS_KVEC_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "sim/combat_dev.h"
#include "sim/ctx.h"
#include "sim/option_dev.h"
#include "sim/sim_int.h"

typedef struct kvec_set {
    const char *name, *kernel, *json;
    uint64_t seed;
    int ntrace; /* items traced: the first ntrace of kvec_items */
} kvec_set;

#define KVEC_BIG ((uint64_t)1 << 40)

/* Items whose stages are written: 0..7 and one index past 2^32 blocks; a
 * set that traces fewer takes the first ntrace, so at least 0..3: items
 * 2 and 3 of each block of four take the sine of their pair's normals. */
static const uint64_t kvec_items[] = { 0, 1, 2, 3, 4, 5, 6, 7, KVEC_BIG + 3 };
#define KVEC_NTRACE ((int)(sizeof kvec_items / sizeof kvec_items[0]))

/* Ranges whose result bytes are written: [first, first + count). */
static const uint64_t kvec_ranges[][2] = { { 0, 100 }, { 1000, 257 }, { KVEC_BIG + 1, 9 }, { 7, 0 } };
static const uint64_t kvec_combat_ranges[][2] = { { 0, 40 }, { 1000, 23 }, { KVEC_BIG + 1, 5 }, { 7, 0 } };
#define KVEC_NRANGES 4

static const kvec_set kvec_sets[] = {
    { "european_call", "option", "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}", 1, KVEC_NTRACE },
    { "european_put", "option",
        "{\"type\": \"put\", \"S0\": 90, \"K\": 100, \"q\": 0.03, \"sigma\": 0.4, \"T\": 2}", 2, KVEC_NTRACE },
    { "european_call_antithetic", "option",
        "{\"S0\": 100, \"K\": 110, \"r\": 0.02, \"sigma\": 0.3, \"T\": 0.5, \"antithetic\": true}", 3, KVEC_NTRACE },
    { "asian_arithmetic_12", "option",
        "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 100, \"r\": 0.03, \"sigma\": 0.3, \"T\": 1, \"steps\": 12}", 4,
        KVEC_NTRACE },
    { "asian_arithmetic_252", "option",
        "{\"style\": \"asian_arithmetic\", \"type\": \"put\", \"S0\": 100, \"K\": 105, \"r\": 0.04, \"q\": 0.01, "
        "\"sigma\": 0.25, \"T\": 1, \"steps\": 252}", 5, 4 },
    { "asian_geometric_12", "option",
        "{\"style\": \"asian_geometric\", \"S0\": 100, \"K\": 95, \"r\": 0.01, \"sigma\": 0.25, \"T\": 0.5, \"steps\": 12}", 6,
        KVEC_NTRACE },
    { "asian_geometric_252", "option",
        "{\"style\": \"asian_geometric\", \"S0\": 50, \"K\": 50, \"r\": 0.05, \"sigma\": 0.35, \"T\": 1, \"steps\": 252}", 7,
        4 },
    { "barrier_up_out", "option",
        "{\"style\": \"barrier\", \"barrier\": 125, \"barrier_type\": \"up_out\", \"S0\": 100, \"K\": 100, \"r\": 0.02, "
        "\"sigma\": 0.3, \"T\": 1, \"steps\": 20}", 8, KVEC_NTRACE },
    { "barrier_down_in", "option",
        "{\"style\": \"barrier\", \"barrier\": 85, \"barrier_type\": \"down_in\", \"type\": \"put\", \"S0\": 100, \"K\": 100, "
        "\"sigma\": 0.3, \"T\": 1, \"steps\": 20}", 9, KVEC_NTRACE },
    { "barrier_up_in", "option",
        "{\"style\": \"barrier\", \"barrier\": 110, \"barrier_type\": \"up_in\", \"S0\": 100, \"K\": 95, \"r\": 0.03, "
        "\"sigma\": 0.3, \"T\": 1, \"steps\": 16}", 17, KVEC_NTRACE },
    { "barrier_down_out", "option",
        "{\"style\": \"barrier\", \"barrier\": 80, \"barrier_type\": \"down_out\", \"type\": \"put\", \"S0\": 100, "
        "\"K\": 105, \"r\": 0.01, \"q\": 0.02, \"sigma\": 0.25, \"T\": 1, \"steps\": 16}", 18, KVEC_NTRACE },
    { "european_greeks_antithetic", "option",
        "{\"S0\": 100, \"K\": 105, \"r\": 0.03, \"q\": 0.01, \"sigma\": 0.25, \"T\": 0.75, \"steps\": 3, "
        "\"greeks\": true, \"antithetic\": true}", 10, KVEC_NTRACE },
    { "european_put_greeks", "option",
        "{\"type\": \"put\", \"S0\": 100, \"K\": 110, \"r\": 0.04, \"q\": 0.02, \"sigma\": 0.3, \"T\": 1.5, "
        "\"greeks\": true}", 13, KVEC_NTRACE },
    { "asian_arithmetic_greeks", "option",
        "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 95, \"r\": 0.03, \"q\": 0.01, \"sigma\": 0.3, "
        "\"T\": 1, \"steps\": 6, \"greeks\": true, \"antithetic\": true}", 14, KVEC_NTRACE },
    { "asian_geometric_greeks", "option",
        "{\"style\": \"asian_geometric\", \"type\": \"put\", \"S0\": 100, \"K\": 100, \"r\": 0.05, \"q\": 0.02, "
        "\"sigma\": 0.25, \"T\": 0.5, \"steps\": 5, \"greeks\": true}", 15, KVEC_NTRACE },
    { "barrier_greeks_antithetic", "option",
        "{\"style\": \"barrier\", \"barrier\": 120, \"barrier_type\": \"up_out\", \"S0\": 100, \"K\": 100, "
        "\"r\": 0.03, \"q\": 0.01, \"sigma\": 0.25, \"T\": 1, \"steps\": 8, \"greeks\": true, \"antithetic\": true}", 16,
        KVEC_NTRACE },
    { "combat", "combat",
        "{\"power\": 5000, \"crit\": 2000, \"haste\": 1500, \"mastery\": 900, \"versatility\": 700, \"fight_length\": 20, "
        "\"abilities\": [{\"name\": \"big\", \"coefficient\": 3, \"cooldown\": 6, \"mastery\": true}, "
        "{\"coefficient\": 1.6, \"cast_time\": 2, \"cooldown\": 4, \"hasted_cooldown\": true}, {\"coefficient\": 0.8}], "
        "\"proc_chance\": 0.15, \"proc_resets\": \"big\"}", 11, KVEC_NTRACE },
    { "combat_weights", "combat",
        "{\"power\": 3000, \"crit\": 1000, \"haste\": 3000, \"fight_length\": 15, \"fight_variation\": 0.3, "
        "\"stat_weights\": true, \"delta\": 50, \"abilities\": [{\"coefficient\": 2, \"cooldown\": 8}, "
        "{\"coefficient\": 0.6, \"gcd\": false, \"cooldown\": 0.5}]}", 12, 4 },
};
#define KVEC_NSETS ((int)(sizeof kvec_sets / sizeof kvec_sets[0]))

/* Sets of several variants over the same items and seed, computed
 * together as a work context with `every` true gives them to a node
 * (sim/ctx.h; proto/PROTOCOL.md §4, the result data): a range's result is
 * every variant's outputs, variant 0's first, each variant in variant 0's
 * layouts. */
enum { KVEC_MAXVAR = 3 };
typedef struct kvec_every {
    const char *name, *kernel;
    uint64_t seed;
    int n;
    const char *variants[KVEC_MAXVAR];
} kvec_every;

static const kvec_every kvec_every_sets[] = {
    { "option_every", "option", 19, 3, {
        "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1, \"greeks\": true}",
        "{\"S0\": 101, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1, \"greeks\": true}",
        "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.5, \"T\": 1, \"greeks\": true}" } },
    { "combat_every", "combat", 20, 2, {
        "{\"power\": 4000, \"crit\": 1500, \"haste\": 1000, \"fight_length\": 12, \"abilities\": "
        "[{\"coefficient\": 2.5, \"cooldown\": 5}, {\"coefficient\": 0.7}]}",
        "{\"power\": 4000, \"crit\": 1550, \"haste\": 1000, \"fight_length\": 12, \"abilities\": "
        "[{\"coefficient\": 2.5, \"cooldown\": 5}, {\"coefficient\": 0.7}]}" } },
};
#define KVEC_NEVERY ((int)(sizeof kvec_every_sets / sizeof kvec_every_sets[0]))

/* A backend's run of items [first, first + count) into out[0 .. nout). */
typedef int (*kvec_run)(void *ctx, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out);

static int kvec_run_cpu(void *ctx, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    (void)ctx;
    return sim_run_cpu(job, first, count, out);
}

/* The job of set s; err says why when it returns non-zero. */
static int kvec_job(const kvec_set *s, sim_job **job, char *err, size_t errlen)
{
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    int rc = sf_json_to_msgpack(s->json, strlen(s->json), &b, err, errlen);
    if (rc == 0)
        rc = sim_job_create(job, s->kernel, b.data, b.size, s->seed, err, errlen);
    msgpack_sbuffer_destroy(&b);
    return rc;
}

/* A double as its bits and, for reading, its shortest exact decimal. */
static void kvec_f64(FILE *f, const char *name, double x)
{
    fprintf(f, " %s=%016" PRIx64 "(%.17g)", name, sim_f64_bits(x), x);
}

static void kvec_preamble(FILE *f)
{
    fputs("# tests/vectors/kernels.vec — stage vectors of the simulation kernels (docs/kernels.md).\n"
          "# Generated by `make kernel-vectors` (build/tests/wasm/kernel_vectors gen, from\n"
          "# tests/vectors/kvec.h); never edited by hand. Checked by tests/unit/test_sim_vectors.c\n"
          "# (CPU stages and result bytes, OpenCL and CUDA result bytes), tests/wasm/kernel_vectors.test.mjs\n"
          "# (native and emcc builds, OpenCL) and tests/wasm/kernel_spec.test.mjs (the JavaScript\n"
          "# implementation of the specification, tests/vectors/spec_option.mjs).\n"
          "#\n"
          "# One record a line: KIND SET [ITEM] FIELD=VALUE ...; `#` starts a comment line.\n"
          "# A double is written as its IEEE bits in 16 hex digits, then its value in\n"
          "# parentheses (%.17g, for reading only): 3ff0000000000000(1). Integers are decimal;\n"
          "# 32-bit words 8 hex digits; ITEM is the item index in decimal.\n"
          "#\n"
          "#   set SET KERNEL seed=SEED PARAMS           PARAMS: the JSON parameters, to the line's end\n"
          "#   layout SET OUTPUT frac_bits= sq_frac_bits= hist_lo= hist_hi=\n"
          "#   host SET NAME=VALUE ...                   host-derived parameters\n"
          "# option kernel, per traced item and step j (0-based; the step's normal moves ln S_j to ln S_{j+1}):\n"
          "#   step SET ITEM j= ctr=c0,c1,c2,c3 out=w0,w1,w2,w3 word= radius_word= angle_word= trig=cos|sin\n"
          "#        u= ln_u= radius= quadrant= offset= folded= a= sin= cos= z= [zsum= zsq=]   barrier Greeks\n"
          "#   path SET ITEM a= j= lns= [e= sum= [sum2= sum3=]] [hit=]   a: 0, or 1 the antithetic path (-z)\n"
          "#   payoff SET ITEM a= x= payoff= pay= [ell=] [e0= e1= e2= e3=]   x: the underlying at expiry or the\n"
          "#        average; with greeks, the path's estimates e0 .. e3\n"
          "#   greeks SET ITEM m0= m1= m2= m3=             with greeks: the pair's mean estimates times k0 .. k3\n"
          "# combat kernel, per traced item and variant v (casts of the base variant 0 only):\n"
          "#   fight SET ITEM v= ctr=c0,c1,c2,c3 out=w0,w1,w2,w3 u= length=\n"
          "#   cast SET ITEM v=0 n= pick= when= end= crit_draw= crit_u= d= damage= [proc_draw= proc_u=] ready=\n"
          "#   dps SET ITEM v= casts= damage= dps=\n"
          "# both kernels, per traced item and output:\n"
          "#   out SET ITEM OUTPUT v= q= q2= saturated= slot=   the value, its fixed-point terms, its slot\n"
          "# and the result bytes of items [FIRST, FIRST + COUNT), as a node sends a chunk's result:\n"
          "#   result SET FIRST COUNT HEX\n"
          "# sets of several variants computed together (a work context with every=true): their\n"
          "# parameters, and each range's result, every variant's outputs in variant order, each\n"
          "# variant in variant 0's layouts:\n"
          "#   variants SET KERNEL seed=SEED n=N every=1\n"
          "#   variant SET V PARAMS                     V: 0 .. N-1; PARAMS: JSON, to the line's end\n"
          "#   result SET FIRST COUNT HEX\n",
        f);
}

/* The out lines of one item: each output's value, its fixed-point terms
 * as sim_acc_add makes them, and its histogram slot. */
static void kvec_outs(FILE *f, const char *set, const sim_job *job, uint64_t item, const double *outv)
{
    for (int o = 0; o < job->nout; o++) {
        const sim_layout *l = &job->layout[o];
        int sat = 0;
        sim_i64 q = sim_fix(outv[o] * l->scale, &sat), q2 = sim_fix(outv[o] * outv[o] * l->sq_scale, &sat);
        fprintf(f, "out %s %" PRIu64 " %s", set, item, job->out_name[o]);
        kvec_f64(f, "v", outv[o]);
        fprintf(f, " q=%" PRId64 " q2=%" PRId64 " saturated=%d slot=%d\n", q, q2, sat, sim_hist_slot(l, outv[o]));
    }
}

/* ---- option ---------------------------------------------------------------------------------- */

/* The stages of one option item; returns 0 when its final values equal
 * the kernel's (sim_option_group), 1 otherwise. */
static int kvec_option_item(FILE *f, const char *set, const sim_job *job, uint64_t item)
{
    const sim_option_params *p = job->params;
    const sim_u32 k0 = (sim_u32)job->seed, k1 = (sim_u32)(job->seed >> 32);
    const int na = p->antithetic ? 2 : 1, k = (int)(item & 3);
    const int arith_g = p->greeks && p->style == SIM_OPT_ASIAN_ARITH, lr = p->greeks && p->style == SIM_OPT_BARRIER;
    const int wr = k & 1, wa = wr + 2; /* items 0, 2 of a block pair words 0, 2; items 1, 3 words 1, 3 */
    const uint64_t blk = item >> 2;
    const double ln_s0 = p->scen[0].ln_s0;
    double lns[2], sum[2], hit[2], s2[2] = { 0.0, 0.0 }, s3[2] = { 0.0, 0.0 }, zs = 0.0, zq = 0.0, z1 = 0.0;
    double outv[SIM_MAX_OUT];
    int bad = 0;

    for (int a = 0; a < na; a++) {
        lns[a] = ln_s0;
        sum[a] = 0.0;
        hit[a] = 0.0;
    }
    for (int64_t j = 0; j < p->steps; j++) {
        sim_u32x4 w = sim_philox((sim_u32)j, SIM_OPT_STREAM, (sim_u32)blk, (sim_u32)(blk >> 32), k0, k1);
        double u = sim_u01(w.v[wr]), ln_u = sim_log(u), radius = sim_sqrt(-2.0 * ln_u);
        sim_u32 ang = w.v[wa];
        int quadrant = (int)(ang >> 30), folded = (ang & 0x3fffffffu) > 0x20000000u;
        double offset = (double)(ang & 0x3fffffffu);
        double an = (folded ? 1073741824.0 - offset : offset) * SIM_QUARTER_TURN, sn, cs;
        sim_sincos_oct(an, &sn, &cs);
        int swap = folded != (quadrant & 1);
        double rc = radius * cs, rs = radius * sn;
        double zc = (swap ? rs : rc) * (quadrant == 1 || quadrant == 2 ? -1.0 : 1.0);
        double zs_ = (swap ? rc : rs) * (quadrant >= 2 ? -1.0 : 1.0);
        double z = k < 2 ? zc : zs_, zc2, zs2;
        /* the steps as written must be the device's normal */
        sim_normal_pair(w.v[wr], w.v[wa], &zc2, &zs2);
        if (sim_f64_bits(zc2) != sim_f64_bits(zc) || sim_f64_bits(zs2) != sim_f64_bits(zs_))
            bad = 1;
        fprintf(f, "step %s %" PRIu64 " j=%" PRId64 " ctr=%08x,%08x,%08x,%08x out=%08x,%08x,%08x,%08x", set, item, j,
            (unsigned)j, SIM_OPT_STREAM, (unsigned)(sim_u32)blk, (unsigned)(sim_u32)(blk >> 32), w.v[0], w.v[1], w.v[2],
            w.v[3]);
        fprintf(f, " word=%d radius_word=%d angle_word=%d trig=%s", k, wr, wa, k < 2 ? "cos" : "sin");
        kvec_f64(f, "u", u);
        kvec_f64(f, "ln_u", ln_u);
        kvec_f64(f, "radius", radius);
        fprintf(f, " quadrant=%d offset=%u folded=%d", quadrant, (unsigned)(ang & 0x3fffffffu), folded);
        kvec_f64(f, "a", an);
        kvec_f64(f, "sin", sn);
        kvec_f64(f, "cos", cs);
        kvec_f64(f, "z", z);
        if (lr) {
            z1 = j == 0 ? z : z1;
            zs = zs + z;
            zq = zq + z * z;
            kvec_f64(f, "zsum", zs);
            kvec_f64(f, "zsq", zq);
        }
        fputc('\n', f);
        for (int a = 0; a < na; a++) {
            const double sgn = a ? -1.0 : 1.0;
            lns[a] = lns[a] + (p->scen[0].drift_dt + p->scen[0].vol_sqrt_dt * (sgn * z));
            fprintf(f, "path %s %" PRIu64 " a=%d j=%" PRId64, set, item, a, j);
            kvec_f64(f, "lns", lns[a]);
            if (p->style == SIM_OPT_ASIAN_ARITH) {
                double e = sim_exp(lns[a]);
                sum[a] = sum[a] + e;
                kvec_f64(f, "e", e);
                kvec_f64(f, "sum", sum[a]);
                if (arith_g) {
                    s2[a] = s2[a] + e * (double)(j + 1);
                    s3[a] = s3[a] + e * (lns[a] - ln_s0);
                    kvec_f64(f, "sum2", s2[a]);
                    kvec_f64(f, "sum3", s3[a]);
                }
            } else if (p->style == SIM_OPT_ASIAN_GEOM) {
                sum[a] = sum[a] + lns[a];
                kvec_f64(f, "sum", sum[a]);
            } else if (p->style == SIM_OPT_BARRIER) {
                int knock = p->barrier_flags & SIM_OPT_UP ? lns[a] >= p->ln_barrier : lns[a] <= p->ln_barrier;
                hit[a] = knock ? 1.0 : hit[a];
                fprintf(f, " hit=%d", hit[a] > 0.0);
            }
            fputc('\n', f);
        }
    }
    const int in = (p->barrier_flags & SIM_OPT_IN) != 0;
    const double disc = p->scen[0].disc, wsg = p->put ? -1.0 : 1.0;
    double pay[2], es[4] = { 0.0, 0.0, 0.0, 0.0 };
    for (int a = 0; a < na; a++) {
        double lx, x, ell = 0.0, e[4];
        if (p->style == SIM_OPT_ASIAN_ARITH || p->style == SIM_OPT_ASIAN_GEOM)
            lx = sum[a] * p->inv_steps;
        else
            lx = lns[a];
        x = p->style == SIM_OPT_ASIAN_ARITH ? lx : sim_exp(lx);
        double payoff = sim_option_payoff(p, x);
        pay[a] = p->style == SIM_OPT_BARRIER && (hit[a] > 0.0) != in ? 0.0 : payoff;
        fprintf(f, "payoff %s %" PRIu64 " a=%d", set, item, a);
        kvec_f64(f, "x", x);
        kvec_f64(f, "payoff", payoff);
        kvec_f64(f, "pay", pay[a]);
        if (!p->greeks) {
            fputc('\n', f);
            continue;
        }
        const double sgn = a ? -1.0 : 1.0, fp = pay[a] > 0.0 ? wsg : 0.0;
        if (lr) {
            double zsa = sgn * zs, zqn = zq - p->steps_d;
            e[0] = pay[a] * (sgn * z1);
            e[1] = pay[a] * (zqn - p->cv * zsa);
            e[2] = pay[a] * zsa;
            e[3] = pay[a] * (zqn + p->cm * zsa);
        } else if (arith_g) {
            e[0] = fp * x;
            e[1] = fp * (s3[a] - p->cv * s2[a]);
            e[2] = fp * s2[a];
            e[3] = fp * (s3[a] + p->cm * s2[a]);
        } else {
            ell = lx - ln_s0;
            kvec_f64(f, "ell", ell);
            e[0] = fp * x;
            e[1] = fp * (x * (ell - p->cv));
            e[2] = e[0];
            e[3] = fp * (x * (ell + p->cm));
        }
        for (int g = 0; g < 4; g++) {
            char name[8];
            snprintf(name, sizeof name, "e%d", g);
            kvec_f64(f, name, e[g]);
            es[g] = a ? es[g] + e[g] : e[g];
        }
        fputc('\n', f);
    }
    outv[0] = na == 2 ? ((pay[0] + pay[1]) * disc) * 0.5 : pay[0] * disc;
    if (p->greeks) {
        double m[4];
        fprintf(f, "greeks %s %" PRIu64, set, item);
        for (int g = 0; g < 4; g++) {
            char name[8];
            m[g] = na == 2 ? (es[g] * p->gk[g]) * 0.5 : es[g] * p->gk[g];
            snprintf(name, sizeof name, "m%d", g);
            kvec_f64(f, name, m[g]);
        }
        fputc('\n', f);
        outv[1] = m[0];
        outv[2] = m[1];
        outv[3] = m[2] - p->t * outv[0];
        outv[4] = p->r * outv[0] - m[3];
    }
    /* the kernel's own values of this item: its group of four */
    double grp[SIM_MAX_OUT][SIM_W];
    sim_option_group(p, k0, k1, item & ~(uint64_t)3, grp);
    for (int o = 0; o < (int)p->nout; o++)
        if (sim_f64_bits(grp[o][sim_lane_of(k)]) != sim_f64_bits(outv[o]))
            bad = 1;
    kvec_outs(f, set, job, item, outv);
    return bad;
}

static void kvec_option_host(FILE *f, const char *set, const sim_job *job)
{
    const sim_option_params *p = job->params;
    fprintf(f, "host %s steps=%" PRId64, set, p->steps);
    kvec_f64(f, "inv_steps", p->inv_steps);
    if (p->style == SIM_OPT_BARRIER)
        kvec_f64(f, "ln_barrier", p->ln_barrier);
    if (p->greeks) {
        kvec_f64(f, "cv", p->cv);
        kvec_f64(f, "cm", p->cm);
        for (int g = 0; g < 4; g++) {
            char name[8];
            snprintf(name, sizeof name, "k%d", g);
            kvec_f64(f, name, p->gk[g]);
        }
    }
    fputc('\n', f);
    fprintf(f, "host %s", set);
    kvec_f64(f, "ln_s0", p->scen[0].ln_s0);
    kvec_f64(f, "drift_dt", p->scen[0].drift_dt);
    kvec_f64(f, "vol_sqrt_dt", p->scen[0].vol_sqrt_dt);
    kvec_f64(f, "disc", p->scen[0].disc);
    fputc('\n', f);
}

/* ---- combat ---------------------------------------------------------------------------------- */

/* sim_stream_u01 with the draw's index and word written as cast fields
 * (f NULL: nothing written). */
static double kvec_draw(FILE *f, const char *name, sim_stream *s)
{
    char key[32];
    unsigned n = s->next;
    double u = sim_stream_u01(s);
    if (f == NULL)
        return u;
    fprintf(f, " %s=%u:%08x", name, n, s->blk.v[n & 3u]);
    snprintf(key, sizeof key, "%s_u", name);
    kvec_f64(f, key, u);
    return u;
}

/* sim_combat_dps, one cast a line for the base variant (the others'
 * casts are left out, to keep the file short): the same steps again,
 * written out between them, so the kernel's loop stays free of tracing;
 * kvec_combat_item holds the result to the kernel's. */
static double kvec_combat_fight(FILE *f, const char *set, const sim_combat_params *p, int vi, uint64_t item,
    sim_u32 k0, sim_u32 k1)
{
    const sim_combat_var *v = &p->var[vi];
    sim_stream s_len, s_crit, s_proc;
    double ready[SIM_CB_MAXAB] = { 0 };
    sim_stream_init(&s_len, SIM_CB_STREAM_LEN, item, k0, k1);
    sim_stream_init(&s_crit, SIM_CB_STREAM_CRIT, item, k0, k1);
    sim_stream_init(&s_proc, SIM_CB_STREAM_PROC, item, k0, k1);
    double u = sim_stream_u01(&s_len);
    double len = p->fight_len * (1.0 + p->fight_var * (2.0 * u - 1.0));
    fprintf(f, "fight %s %" PRIu64 " v=%d ctr=%08x,%08x,%08x,%08x out=%08x,%08x,%08x,%08x", set, item, vi, 0u,
        SIM_CB_STREAM_LEN, (unsigned)(sim_u32)item, (unsigned)(sim_u32)(item >> 32), s_len.blk.v[0], s_len.blk.v[1],
        s_len.blk.v[2], s_len.blk.v[3]);
    kvec_f64(f, "u", u);
    kvec_f64(f, "length", len);
    fputc('\n', f);
    FILE *fc = vi == 0 ? f : NULL;
    double now = 0.0, gcd_end = 0.0, damage = 0.0;
    int64_t n = 0;
    for (; n < p->max_casts; n++) {
        double t0 = now > gcd_end ? now : gcd_end, when = 0.0;
        int pick = -1;
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
        if (fc != NULL) {
            fprintf(fc, "cast %s %" PRIu64 " v=%d n=%" PRId64 " pick=%d", set, item, vi, n, pick);
            kvec_f64(fc, "when", when);
            kvec_f64(fc, "end", end);
        }
        double d = ab->coef * v->power * v->mult;
        d = ab->mastery ? d * v->mastery : d;
        d = kvec_draw(fc, "crit_draw", &s_crit) < v->crit ? d * p->crit_mult : d;
        damage = damage + d;
        if (fc != NULL) {
            kvec_f64(fc, "d", d);
            kvec_f64(fc, "damage", damage);
        }
        ready[pick] = when + (ab->hasted_cd ? ab->cooldown * v->inv_speed : ab->cooldown);
        if (ab->gcd)
            gcd_end = when + v->gcd;
        now = end;
        if (p->proc_resets >= 0 && kvec_draw(fc, "proc_draw", &s_proc) < p->proc_chance)
            ready[p->proc_resets] = end;
        if (fc != NULL) {
            kvec_f64(fc, "ready", ready[pick]);
            fputc('\n', fc);
        }
    }
    double dps = damage / len;
    fprintf(f, "dps %s %" PRIu64 " v=%d casts=%" PRId64, set, item, vi, n);
    kvec_f64(f, "damage", damage);
    kvec_f64(f, "dps", dps);
    fputc('\n', f);
    return dps;
}

static int kvec_combat_item(FILE *f, const char *set, const sim_job *job, uint64_t item)
{
    const sim_combat_params *p = job->params;
    const sim_u32 k0 = (sim_u32)job->seed, k1 = (sim_u32)(job->seed >> 32);
    double dps[SIM_CB_MAXVAR], outv[SIM_MAX_OUT];
    int bad = 0;
    for (int v = 0; v < (int)p->nvar; v++)
        dps[v] = kvec_combat_fight(f, set, p, v, item, k0, k1);
    outv[0] = dps[0];
    for (int s = 0; p->stat_weights && s < SIM_CB_NSTAT; s++)
        outv[1 + s] = (dps[2 + 2 * s] - dps[1 + 2 * s]) * p->inv_2delta;
    double grp[SIM_MAX_OUT][SIM_W];
    sim_combat_group(p, k0, k1, item & ~(uint64_t)3, grp);
    for (int o = 0; o < (int)p->nout; o++)
        if (sim_f64_bits(grp[o][sim_lane_of((int)(item & 3))]) != sim_f64_bits(outv[o]))
            bad = 1;
    kvec_outs(f, set, job, item, outv);
    return bad;
}

static void kvec_combat_host(FILE *f, const char *set, const sim_job *job)
{
    const sim_combat_params *p = job->params;
    fprintf(f, "host %s max_casts=%" PRId64 " proc_resets=%" PRId64, set, p->max_casts, p->proc_resets);
    kvec_f64(f, "inv_2delta", p->inv_2delta);
    fputc('\n', f);
    for (int v = 0; v < (int)p->nvar; v++) {
        fprintf(f, "host %s v=%d", set, v);
        kvec_f64(f, "power", p->var[v].power);
        kvec_f64(f, "crit", p->var[v].crit);
        kvec_f64(f, "inv_speed", p->var[v].inv_speed);
        kvec_f64(f, "gcd", p->var[v].gcd);
        kvec_f64(f, "mult", p->var[v].mult);
        kvec_f64(f, "mastery", p->var[v].mastery);
        fputc('\n', f);
    }
}

/* ---- sets ------------------------------------------------------------------------------------ */

/* The set, layout and host lines of set s. */
static void kvec_write_head(FILE *f, const kvec_set *s, const sim_job *job)
{
    fprintf(f, "set %s %s seed=%" PRIu64 " %s\n", s->name, s->kernel, s->seed, s->json);
    for (int o = 0; o < job->nout; o++) {
        const sim_layout *l = &job->layout[o];
        fprintf(f, "layout %s %s frac_bits=%" PRId64 " sq_frac_bits=%" PRId64, s->name, job->out_name[o], l->frac_bits,
            l->sq_frac_bits);
        kvec_f64(f, "hist_lo", l->hist_lo);
        kvec_f64(f, "hist_hi", l->hist_hi);
        fputc('\n', f);
    }
    if (strcmp(s->kernel, "option") == 0)
        kvec_option_host(f, s->name, job);
    else
        kvec_combat_host(f, s->name, job);
}

/* The traced items' lines; returns the number of items whose re-derived
 * values differ from the kernel's (0 when all agree). */
static int kvec_write_items(FILE *f, const kvec_set *s, const sim_job *job)
{
    int bad = 0;
    for (int i = 0; i < s->ntrace; i++)
        bad += strcmp(s->kernel, "option") == 0 ? kvec_option_item(f, s->name, job, kvec_items[i])
                                                : kvec_combat_item(f, s->name, job, kvec_items[i]);
    return bad;
}

/* A chunk's result bytes as a node sends them (sched's sc_result_encode):
 * per output, its encoding's length in 4 bytes little-endian, then the
 * encoding. Returns the length, 0 on failure. */
static size_t kvec_result_bytes(const sim_stats *st, int nout, unsigned char *buf, size_t cap)
{
    size_t off = 0;
    for (int o = 0; o < nout; o++) {
        size_t n = 0;
        if (cap - off < 4 || sim_stats_encode(&st[o], buf + off + 4, cap - off - 4, &n) != 0)
            return 0;
        for (int b = 0; b < 4; b++)
            buf[off + (size_t)b] = (unsigned char)(n >> (8 * b));
        off += 4 + n;
    }
    return off;
}

/* The result lines of set `name` from a backend: for each range, the n
 * jobs run one after the other, their statistics in that order (n = 1 for
 * a set, a set of several variants' jobs in variant order). Returns the
 * first error. */
static int kvec_write_runs(FILE *f, const char *name, const char *kernel, const sim_job *const *jobs, uint32_t n,
    kvec_run run, void *ctx)
{
    const uint64_t(*rg)[2] = strcmp(kernel, "option") == 0 ? kvec_ranges : kvec_combat_ranges;
    const int nout = jobs[0]->nout;
    for (int r = 0; r < KVEC_NRANGES; r++) {
        sim_stats st[KVEC_MAXVAR * SIM_MAX_OUT];
        unsigned char buf[KVEC_MAXVAR * SIM_MAX_OUT * (SIM_STATS_MAX_ENCODED + 4)];
        if (n > KVEC_MAXVAR)
            return SIM_EINVAL;
        for (uint32_t v = 0; v < n; v++) {
            int rc = run(ctx, jobs[v], rg[r][0], rg[r][1], st + v * (uint32_t)nout);
            if (rc != 0)
                return rc;
        }
        size_t len = kvec_result_bytes(st, (int)n * nout, buf, sizeof buf);
        if (len == 0)
            return SIM_ENOSPC;
        fprintf(f, "result %s %" PRIu64 " %" PRIu64 " ", name, rg[r][0], rg[r][1]);
        for (size_t i = 0; i < len; i++)
            fprintf(f, "%02x", buf[i]);
        fputc('\n', f);
    }
    return 0;
}

/* The result lines of set s from a backend; returns its first error. */
static int kvec_write_ranges(FILE *f, const kvec_set *s, const sim_job *job, kvec_run run, void *ctx)
{
    return kvec_write_runs(f, s->name, s->kernel, &job, 1, run, ctx);
}

/* ---- sets of several variants ------------------------------------------------------------------ */

/* The work of every set e: its context with `every` true, opened as a
 * node opens it (sim_work_open); err says why when it returns non-zero. */
static int kvec_every_work(const kvec_every *e, sim_work *w, char *err, size_t errlen)
{
    msgpack_sbuffer vars, ctx;
    msgpack_sbuffer_init(&vars);
    msgpack_sbuffer_init(&ctx);
    int rc = 0;
    for (int v = 0; v < e->n && rc == 0; v++)
        rc = sf_json_to_msgpack(e->variants[v], strlen(e->variants[v]), &vars, err, errlen);
    if (rc == 0) {
        sim_ctx_encode_variants(&ctx, e->kernel, e->seed, vars.data, vars.size, (uint32_t)e->n, true);
        rc = sim_work_open(w, ctx.data, ctx.size, err, errlen);
    }
    msgpack_sbuffer_destroy(&ctx);
    msgpack_sbuffer_destroy(&vars);
    return rc;
}

/* The variants and variant lines of set e. */
static void kvec_write_every_head(FILE *f, const kvec_every *e)
{
    fprintf(f, "variants %s %s seed=%" PRIu64 " n=%d every=1\n", e->name, e->kernel, e->seed, e->n);
    for (int v = 0; v < e->n; v++)
        fprintf(f, "variant %s %d %s\n", e->name, v, e->variants[v]);
}

/* The result lines of set e from a backend, every variant's in a range's
 * result; returns the first error. */
static int kvec_write_every_ranges(FILE *f, const kvec_every *e, const sim_work *w, kvec_run run, void *ctx)
{
    return kvec_write_runs(f, e->name, e->kernel, (const sim_job *const *)w->jobs, w->n, run, ctx);
}

#endif /* TESTS_VECTORS_KVEC_H */
