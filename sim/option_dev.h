/*
 * option_dev.h — the `option` kernel's device source, shared by every
 * backend (see dev.h): paths of geometric Brownian motion and the payoffs of
 * European, Asian (arithmetic, geometric) and discretely monitored barrier
 * options, with antithetic pairs and per-item finite-difference Greeks.
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
#define SIM_OPT_MAXSC 9 /* base + (S0, sigma, r, T) bumped down and up */

enum {
    SIM_OPT_EUROPEAN = 0,
    SIM_OPT_ASIAN_ARITH = 1,
    SIM_OPT_ASIAN_GEOM = 2,
    SIM_OPT_BARRIER = 3
};
enum { SIM_OPT_UP = 1, SIM_OPT_IN = 2 }; /* barrier flags */

/* One market scenario; scenario 0 is the base, the others are bumped
 * copies for the Greeks. Derived fields are computed on the host with the
 * functions of dev.h, so every backend starts from the same bits. */
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
    double inv_2h[4];     /* 1/(2h) for delta, vega, rho, theta */
    double bump[4];       /* h for S0, sigma, r, T */
    sim_i64 steps;
    sim_i64 style;        /* SIM_OPT_* */
    sim_i64 put;          /* 0 call, 1 put */
    sim_i64 barrier_flags;
    sim_i64 antithetic;
    sim_i64 greeks;
    sim_i64 nscen;        /* 1, or 9 with greeks */
    sim_i64 nout;         /* 1, or 5 with greeks */
    sim_option_scen scen[SIM_OPT_MAXSC];
} sim_option_params;

SIM_FN double sim_option_payoff(const sim_option_params *p, double x)
{
    double v = p->put ? p->k - x : x - p->k;
    return v > 0.0 ? v : 0.0;
}

/* Values of SIM_W consecutive items starting at g0 (a multiple of 4), in
 * lane order: out[o][sim_lane_of(i)] is output o of item g0 + i. Outputs: 0 price (discounted
 * payoff; the mean of the pair with antithetic), then with greeks delta,
 * vega, rho and theta (central differences on common random numbers). */
SIM_FN void sim_option_group(const sim_option_params *p, sim_u32 k0, sim_u32 k1, sim_u64 g0,
    double out[SIM_MAX_OUT][SIM_W])
{
    const int nsc = (int)p->nscen;
    const int na = p->antithetic ? 2 : 1;
    double lns[2][SIM_OPT_MAXSC][SIM_W];
    double acc[2][SIM_OPT_MAXSC][SIM_W];
    double hit[2][SIM_OPT_MAXSC][SIM_W];
    sim_u32 w[SIM_W];
    double z[SIM_W];

    SIM_ASSERT(g0 % 4 == 0); /* callers align groups; lanes map to block words */
    for (int a = 0; a < na; a++)
        for (int c = 0; c < nsc; c++)
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                lns[a][c][l] = p->scen[c].ln_s0;
    /* the averages and barrier hits only where the style reads them */
    if (p->style != SIM_OPT_EUROPEAN)
        for (int a = 0; a < na; a++)
            for (int c = 0; c < nsc; c++)
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++) {
                    acc[a][c][l] = 0.0;
                    hit[a][c][l] = 0.0;
                }

    for (sim_i64 j = 0; j < p->steps; j++) {
        sim_philox_blocks((sim_u32)j, SIM_OPT_STREAM, g0 >> 2, k0, k1, w);
        sim_normals(w, z);
        for (int a = 0; a < na; a++) {
            const double sgn = a ? -1.0 : 1.0;
            for (int c = 0; c < nsc; c++) {
                const double mu = p->scen[c].drift_dt, vol = p->scen[c].vol_sqrt_dt;
                double *ls = lns[a][c], *ac = acc[a][c], *ht = hit[a][c];
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
    }

    /* Payoffs: x is the underlying at expiry, or the average. Each path's
     * payoff takes the place of x, which is not read again. */
    double val[SIM_OPT_MAXSC][SIM_W];
    const int in = (p->barrier_flags & SIM_OPT_IN) != 0;
    for (int c = 0; c < nsc; c++) {
        const double disc = p->scen[c].disc;
        double avg[2][SIM_W];
        double *pay[2];
        for (int a = 0; a < na; a++) {
            double *x = lns[a][c];
            /* every test on the style outside the lane loops: clang
             * vectorizes a loop with one inside badly */
            if (p->style == SIM_OPT_ASIAN_ARITH || p->style == SIM_OPT_ASIAN_GEOM) {
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++)
                    avg[a][l] = acc[a][c][l] * p->inv_steps;
                x = avg[a];
            }
            if (p->style != SIM_OPT_ASIAN_ARITH)
                sim_exp_lanes(x, SIM_W);
            if (p->style == SIM_OPT_BARRIER) {
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++) {
                    double f = sim_option_payoff(p, x[l]);
                    x[l] = (hit[a][c][l] > 0.0) == in ? f : 0.0;
                }
            } else {
                SIM_VLOOP
                for (int l = 0; l < SIM_W; l++)
                    x[l] = sim_option_payoff(p, x[l]);
            }
            pay[a] = x;
        }
        /* The price goes straight to its output; the Greeks read the
         * bumped scenarios' values, 1 and up. The mean of a pair is (f0 +
         * f1) e^(-rT) / 2, in that order on every backend. */
        double *dst = c == 0 ? out[0] : val[c];
        if (na == 2) {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                dst[l] = ((pay[0][l] + pay[1][l]) * disc) * 0.5;
        } else {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++)
                dst[l] = pay[0][l] * disc;
        }
    }

    if (p->greeks)
        for (int g = 0; g < 4; g++) {
            SIM_VLOOP
            for (int l = 0; l < SIM_W; l++) {
                double d = (val[2 + 2 * g][l] - val[1 + 2 * g][l]) * p->inv_2h[g];
                /* theta is minus the derivative in maturity */
                out[1 + g][l] = g == 3 ? -d : d;
            }
        }
}

#endif /* SIM_OPTION_DEV_H */
