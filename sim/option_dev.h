/*
 * option_dev.h — the `option` kernel's device source, shared by every
 * backend (see dev.h): paths of geometric Brownian motion and the payoffs of
 * European, Asian (arithmetic, geometric) and discretely monitored barrier
 * options, with antithetic pairs and per-item Greeks: pathwise derivatives
 * where the payoff is continuous in the parameters, likelihood ratios for
 * the barriers, whose knock indicator is not.
 *
 * Random numbers: the normal of item i at step j comes from word (i mod 4)
 * of Philox4x32-10 with key (seed lo, seed hi) and counter
 * (j, SIM_OPT_STREAM, floor(i/4) lo, floor(i/4) hi), so four consecutive
 * items share one block and any item can be computed alone.
 * docs/kernels.md specifies the kernel completely.
 */
#ifndef SIM_OPTION_DEV_H
#define SIM_OPTION_DEV_H

#ifndef __OPENCL_VERSION__
#include "sim/dev.h"
#endif

#define SIM_OPT_STREAM 0u

enum {
    SIM_OPT_EUROPEAN = 0,
    SIM_OPT_ASIAN_ARITH = 1,
    SIM_OPT_ASIAN_GEOM = 2,
    SIM_OPT_BARRIER = 3
};
enum { SIM_OPT_UP = 1, SIM_OPT_IN = 2 }; /* barrier flags */

/* What the paths use, computed on the host with the functions of dev.h
 * so that every backend starts from the same bits. */
typedef struct sim_option_scen {
    double ln_s0;
    double drift_dt;    /* (r - q - sigma^2/2) T/steps */
    double vol_sqrt_dt; /* sigma sqrt(T/steps) */
    double disc;        /* e^(-rT) */
} sim_option_scen;

/* Parsed parameters. Every field is 8 bytes wide (host/device layout). */
typedef struct sim_option_params {
    double s0, k, r, q, sigma, t, barrier;
    double ln_barrier;
    double inv_steps;     /* 1/steps */
    double steps_d;       /* steps as a double */
    double cv, cm;        /* the Greeks' path constants (docs/kernels.md) */
    double gk[4];         /* the Greeks' factors k0 .. k3 */
    sim_i64 steps;
    sim_i64 style;        /* SIM_OPT_* */
    sim_i64 put;          /* 0 call, 1 put */
    sim_i64 barrier_flags;
    sim_i64 antithetic;
    sim_i64 greeks;
    sim_i64 nout;         /* 1, or 5 with greeks */
    sim_option_scen scen[1]; /* one scenario: the Greeks need no bumped copies */
} sim_option_params;

SIM_FN double sim_option_payoff(const sim_option_params *p, double x)
{
    double v = p->put ? p->k - x : x - p->k;
    return v > 0.0 ? v : 0.0;
}

/* Values of SIM_W consecutive items starting at g0 (a multiple of 4), in
 * lane order: out[o][sim_lane_of(i)] is output o of item g0 + i. Outputs: 0
 * price (discounted payoff; the mean of the pair with antithetic), then
 * with greeks delta, vega, rho and theta (-dV/dT), each the mean of the
 * pair's per-path estimates e0 .. e3 times a host factor k0 .. k3:
 * pathwise derivatives of the payoff for the European and Asian styles,
 * likelihood-ratio scores for the barriers. */
SIM_FN void sim_option_group(const sim_option_params *p, sim_u32 k0, sim_u32 k1, sim_u64 g0,
    double out[SIM_MAX_OUT][SIM_W])
{
    const int na = p->antithetic ? 2 : 1;
    const int arith_g = p->greeks && p->style == SIM_OPT_ASIAN_ARITH;
    const int lr = p->greeks && p->style == SIM_OPT_BARRIER;
    const double ln_s0 = p->scen[0].ln_s0, mu = p->scen[0].drift_dt, vol = p->scen[0].vol_sqrt_dt;
    double lns[2][SIM_W], acc[2][SIM_W], hit[2][SIM_W];
    double s2[2][SIM_W], s3[2][SIM_W];      /* arithmetic: sums of S_j (j + 1) and S_j ln(S_j / S0) */
    double zs[SIM_W], zq[SIM_W], z1[SIM_W]; /* barrier: sums of z and z^2, the first z */
    sim_u32 w[SIM_W];
    double z[SIM_W];

    SIM_ASSERT(g0 % 4 == 0); /* callers align groups; lanes map to block words */
    for (int a = 0; a < na; a++)
        SIM_VLOOP
        for (int l = 0; l < SIM_W; l++)
            lns[a][l] = ln_s0;
    /* the averages, barrier hits and Greeks' sums only where they are read */
    if (p->style != SIM_OPT_EUROPEAN)
        for (int a = 0; a < na; a++)
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                acc[a][l] = 0.0;
                hit[a][l] = 0.0;
            }
    if (arith_g)
        for (int a = 0; a < na; a++)
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                s2[a][l] = 0.0;
                s3[a][l] = 0.0;
            }
    if (lr)
        SIM_VLOOP
        for (int l = 0; l < SIM_W; l++) {
            zs[l] = 0.0;
            zq[l] = 0.0;
        }

    for (sim_i64 j = 0; j < p->steps; j++) {
        sim_philox_blocks((sim_u32)j, SIM_OPT_STREAM, g0 >> 2, k0, k1, w);
        sim_normals(w, z);
        if (lr) {
            if (j == 0)
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++)
                    z1[l] = z[l];
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                zs[l] = zs[l] + z[l];
                zq[l] = zq[l] + z[l] * z[l];
            }
        }
        for (int a = 0; a < na; a++) {
            const double sgn = a ? -1.0 : 1.0;
            double *ls = lns[a], *ac = acc[a], *ht = hit[a];
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                ls[l] = ls[l] + (mu + vol * (sgn * z[l]));
            if (p->style == SIM_OPT_ASIAN_ARITH) {
                double e[SIM_W];
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++)
                    e[l] = ls[l];
                sim_exp_lanes(e, SIM_W);
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++)
                    ac[l] = ac[l] + e[l];
                if (arith_g) {
                    const double jd = (double)(j + 1);
                    double *t2 = s2[a], *t3 = s3[a];
                    SIM_VLOOP
                    for (int l = 0; l < SIM_W; l++) {
                        t2[l] = t2[l] + e[l] * jd;
                        t3[l] = t3[l] + e[l] * (ls[l] - ln_s0);
                    }
                }
            } else if (p->style == SIM_OPT_ASIAN_GEOM) {
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++)
                    ac[l] = ac[l] + ls[l];
            } else if (p->style == SIM_OPT_BARRIER) {
                const double lb = p->ln_barrier;
                if (p->barrier_flags & SIM_OPT_UP) {
                    SIM_VLOOP
                    for (int l = 0; l < SIM_W; l++)
                        ht[l] = ls[l] >= lb ? 1.0 : ht[l];
                } else {
                    SIM_VLOOP
                    for (int l = 0; l < SIM_W; l++)
                        ht[l] = ls[l] <= lb ? 1.0 : ht[l];
                }
            }
        }
    }

    /* Payoffs: x is the underlying at expiry, or the average; ell its log
     * over S0 where the Greeks read it. x is exponentiated in place. */
    const int in = (p->barrier_flags & SIM_OPT_IN) != 0;
    const double disc = p->scen[0].disc;
    double avg[2][SIM_W], ell[2][SIM_W], pay[2][SIM_W];
    double *xs[2];
    for (int a = 0; a < na; a++) {
        double *x = lns[a];
        /* every test on the style outside the lane loops: clang
         * vectorizes a loop with one inside badly */
        if (p->style == SIM_OPT_ASIAN_ARITH || p->style == SIM_OPT_ASIAN_GEOM) {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                avg[a][l] = acc[a][l] * p->inv_steps;
            x = avg[a];
        }
        if (p->greeks && (p->style == SIM_OPT_EUROPEAN || p->style == SIM_OPT_ASIAN_GEOM))
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                ell[a][l] = x[l] - ln_s0;
        if (p->style != SIM_OPT_ASIAN_ARITH)
            sim_exp_lanes(x, SIM_W);
        if (p->style == SIM_OPT_BARRIER) {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                double f = sim_option_payoff(p, x[l]);
                pay[a][l] = (hit[a][l] > 0.0) == in ? f : 0.0;
            }
        } else {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                pay[a][l] = sim_option_payoff(p, x[l]);
        }
        xs[a] = x;
    }
    /* The mean of a pair is (f0 + f1) e^(-rT) / 2, in that order on every
     * backend; the Greeks' means likewise. */
    if (na == 2) {
        SIM_VLOOP
        for (int l = 0; l < SIM_W; l++)
            out[0][l] = ((pay[0][l] + pay[1][l]) * disc) * 0.5;
    } else {
        SIM_VLOOP
        for (int l = 0; l < SIM_W; l++)
            out[0][l] = pay[0][l] * disc;
    }
    if (!p->greeks)
        return;

    /* es[g]: e_g of path 0, plus e_g of path 1 with antithetic. */
    double es[4][SIM_W];
    const double cv = p->cv, cm = p->cm, wsg = p->put ? -1.0 : 1.0;
    for (int a = 0; a < na; a++) {
        const double *x = xs[a], *pa = pay[a], *el = ell[a];
        double e[4][SIM_W];
        if (lr) {
            /* likelihood ratio: the payoff times the score of the path */
            const double sgn = a ? -1.0 : 1.0, n = p->steps_d;
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                double zsa = sgn * zs[l], zqn = zq[l] - n;
                e[0][l] = pa[l] * (sgn * z1[l]);
                e[1][l] = pa[l] * (zqn - cv * zsa);
                e[2][l] = pa[l] * zsa;
                e[3][l] = pa[l] * (zqn + cm * zsa);
            }
        } else if (arith_g) {
            const double *t2 = s2[a], *t3 = s3[a];
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                double fp = pa[l] > 0.0 ? wsg : 0.0; /* the payoff's slope */
                e[0][l] = fp * x[l];
                e[1][l] = fp * (t3[l] - cv * t2[l]);
                e[2][l] = fp * t2[l];
                e[3][l] = fp * (t3[l] + cm * t2[l]);
            }
        } else {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                double fp = pa[l] > 0.0 ? wsg : 0.0;
                e[0][l] = fp * x[l];
                e[1][l] = fp * (x[l] * (el[l] - cv));
                e[2][l] = e[0][l];
                e[3][l] = fp * (x[l] * (el[l] + cm));
            }
        }
        for (int g = 0; g < 4; g++)
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                es[g][l] = a ? es[g][l] + e[g][l] : e[g][l];
    }
    const double t = p->t, r = p->r;
    double m[4][SIM_W];
    for (int g = 0; g < 4; g++) {
        const double kg = p->gk[g];
        if (na == 2) {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                m[g][l] = (es[g][l] * kg) * 0.5;
        } else {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                m[g][l] = es[g][l] * kg;
        }
    }
    SIM_VLOOP
    for (int l = 0; l < SIM_W; l++) {
        out[1][l] = m[0][l];
        out[2][l] = m[1][l];
        out[3][l] = m[2][l] - t * out[0][l];
        out[4][l] = r * out[0][l] - m[3][l];
    }
}

#endif /* SIM_OPTION_DEV_H */
