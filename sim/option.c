/*
 * option.c — the `option` kernel on the host: parameters, output layouts
 * and the CPU loop. The path and payoff arithmetic is in option_dev.h,
 * shared with the device backends.
 */
#if defined(__GNUC__) && !defined(__clang__)
/* no-trapping-math: our code never looks at floating-point exception
 * flags, and without it gcc will not turn the selects (clamps, folds) into
 * vector blends for AVX2 or SSE. Neither option changes a result; the
 * tests compare every ISA level's bits. */
#pragma GCC optimize("O3", "no-trapping-math")
#endif
#define SIM_W 128
#include <math.h>
#include <string.h>

#include "sim/option_dev.h"
#include "sim/sim_int.h"

static const char *const styles[] = { "european", "asian_arithmetic", "asian_geometric",
    "barrier", NULL };
static const char *const types[] = { "call", "put", NULL };
static const char *const barrier_types[] = { "up_out", "up_in", "down_out", "down_in", NULL };

/* The parameters (docs/kernels.md), in the order a form shows them. */
enum { P_STYLE, P_TYPE, P_S0, P_K, P_R, P_Q, P_SIGMA, P_T, P_STEPS, P_BARRIER, P_BARRIER_TYPE,
    P_ANTITHETIC, P_GREEKS, P_HIST, P_COUNT };
static const sim__param params_table[P_COUNT] = {
    [P_STYLE] = { .name = "style", .type = SIM__P_ENUM, .values = styles, .dflt = SIM_OPT_EUROPEAN,
        .help = "payoff on the final price, an arithmetic or geometric average, or with a barrier" },
    [P_TYPE] = { .name = "type", .type = SIM__P_ENUM, .values = types, .help = "call or put" },
    [P_S0] = { .name = "S0", .type = SIM__P_NUMBER, .required = true, .lo_open = true, .lo = 0, .hi = 1e6,
        .help = "spot price of the underlying" },
    [P_K] = { .name = "K", .type = SIM__P_NUMBER, .required = true, .lo_open = true, .lo = 0, .hi = 1e6,
        .help = "strike" },
    [P_R] = { .name = "r", .type = SIM__P_NUMBER, .lo = -0.5, .hi = 1.0,
        .help = "risk-free rate per year, continuously compounded" },
    [P_Q] = { .name = "q", .type = SIM__P_NUMBER, .lo = -0.5, .hi = 1.0, .help = "dividend yield per year" },
    [P_SIGMA] = { .name = "sigma", .type = SIM__P_NUMBER, .required = true, .lo_open = true, .lo = 0, .hi = 5.0,
        .help = "volatility per year; sigma * sqrt(T) must be at most 3" },
    [P_T] = { .name = "T", .type = SIM__P_NUMBER, .required = true, .lo_open = true, .lo = 0, .hi = 100.0,
        .help = "maturity in years" },
    [P_STEPS] = { .name = "steps", .type = SIM__P_INTEGER, .lo = 1, .hi = 100000, .dflt = 1,
        .help = "time steps: monitoring or fixing dates" },
    [P_BARRIER] = { .name = "barrier", .type = SIM__P_NUMBER, .required = true, .lo_open = true, .lo = 0,
        .hi = 1e7, .when_field = "style", .when_value = "barrier", .help = "barrier level" },
    [P_BARRIER_TYPE] = { .name = "barrier_type", .type = SIM__P_ENUM, .required = true, .values = barrier_types,
        .when_field = "style", .when_value = "barrier", .help = "knocked out or in, from above or below" },
    [P_ANTITHETIC] = { .name = "antithetic", .type = SIM__P_BOOL,
        .help = "an item is the pair (z, -z), its value the pair's mean" },
    [P_GREEKS] = { .name = "greeks", .type = SIM__P_BOOL,
        .help = "adds the outputs delta, vega, rho and theta" },
    [P_HIST] = { .name = "hist", .type = SIM__P_RANGE, .dflt_text = "[0, 2 max(S0, K))",
        .help = "histogram range [lo, hi] of the price" },
};
static const char *const greek_names[] = { "price", "delta", "vega", "rho", "theta" };

/* What the paths use, with the functions of dev.h so that every build
 * derives the same bits. */
static sim_option_scen scenario(double s0, double r, double q, double sigma, double t, int64_t steps)
{
    sim_option_scen sc;
    double dt = t / (double)steps;
    sc.ln_s0 = sim_log(s0);
    sc.drift_dt = (r - q - 0.5 * sigma * sigma) * dt;
    sc.vol_sqrt_dt = sigma * sim_sqrt(dt);
    sc.disc = sim_exp(-r * t);
    return sc;
}

/* The Greeks' host constants (docs/kernels.md, "Host-derived values"):
 * the path constants cv, cm and the factors k0 .. k3. */
static void greek_constants(sim_option_params *p)
{
    const double disc = p->scen[0].disc, sig = p->sigma, t = p->t;
    const double mu = (p->r - p->q) - 0.5 * sig * sig;
    if (p->style == SIM_OPT_BARRIER) {
        const double sqrt_dt = sim_sqrt(t / p->steps_d);
        p->cv = p->scen[0].vol_sqrt_dt;
        p->cm = ((2.0 * mu) * sqrt_dt) / sig;
        p->gk[0] = disc / (p->s0 * p->scen[0].vol_sqrt_dt);
        p->gk[1] = disc / sig;
        p->gk[2] = disc * (sqrt_dt / sig);
        p->gk[3] = disc / (2.0 * t);
        return;
    }
    double tau = t, dn = disc;
    if (p->style == SIM_OPT_ASIAN_GEOM) {
        tau = (t * (p->steps_d + 1.0)) / (2.0 * p->steps_d);
    } else if (p->style == SIM_OPT_ASIAN_ARITH) {
        tau = t / p->steps_d;
        dn = disc * p->inv_steps;
    }
    p->cv = ((p->r - p->q) + 0.5 * sig * sig) * tau;
    p->cm = mu * tau;
    p->gk[0] = disc / p->s0;
    p->gk[1] = dn / sig;
    p->gk[2] = dn * tau;
    p->gk[3] = dn / (2.0 * t);
}

/* Magnitude bounds of the Greeks' values on paths within an nsig-sigma
 * move (docs/kernels.md, "Layouts"): nsig 8 bounds the fixed point, 3 the
 * histograms. */
static void greek_bounds(const sim_option_params *p, double nsig, double b[4])
{
    const double sig = p->sigma, t = p->t, st = sim_sqrt(t);
    double g = p->r - p->q, mu = g - (0.5 * sig) * sig, r = p->r;
    g = g < 0 ? -g : g;
    mu = mu < 0 ? -mu : mu;
    r = r < 0 ? -r : r;
    const double big = p->s0 > p->k ? p->s0 : p->k;
    const double df = p->scen[0].disc > 1.0 ? p->scen[0].disc : 1.0; /* e^(-rT), above 1 when r < 0 */
    const double m = sim_exp((nsig * sig) * st + g * t);
    const double bb = ((2.0 * big) * m) * df;
    if (p->style != SIM_OPT_BARRIER) {
        b[0] = (2.0 * m) * df;
        b[1] = bb * (nsig * st + sig * t);
        b[2] = (2.0 * t) * bb;
        b[3] = bb * ((r + mu) + (nsig * sig) / st);
        return;
    }
    const double n = p->steps_d;
    const double zb = nsig * sim_sqrt(n), qb = nsig * sim_sqrt(2.0 * n) + nsig * nsig;
    const double sqrt_dt = sim_sqrt(t / n), cm = p->cm < 0 ? -p->cm : p->cm;
    b[0] = (bb * nsig) / (p->s0 * p->scen[0].vol_sqrt_dt);
    b[1] = (bb * (qb + p->scen[0].vol_sqrt_dt * zb)) / sig;
    b[2] = bb * ((sqrt_dt * zb) / sig + t);
    b[3] = bb * (r + (qb + cm * zb) / (2.0 * t));
}

static int option_parse(sim__pctx *c, void *params, sim_job *job)
{
    sim_option_params *p = params;
    int style, type, bt = 0, rc;
    bool anti, greeks;
    double hist_lo = 0.0, hist_hi;

    const sim__param *t = params_table;
    if ((rc = sim__param_known(c, t, P_COUNT)) != 0 ||
        (rc = sim__param_enum(c, &t[P_STYLE], &style)) != 0 ||
        (rc = sim__param_enum(c, &t[P_TYPE], &type)) != 0 ||
        (rc = sim__param_num(c, &t[P_S0], &p->s0)) != 0 ||
        (rc = sim__param_num(c, &t[P_K], &p->k)) != 0 ||
        (rc = sim__param_num(c, &t[P_R], &p->r)) != 0 ||
        (rc = sim__param_num(c, &t[P_Q], &p->q)) != 0 ||
        (rc = sim__param_num(c, &t[P_SIGMA], &p->sigma)) != 0 ||
        (rc = sim__param_num(c, &t[P_T], &p->t)) != 0 ||
        (rc = sim__param_int(c, &t[P_STEPS], &p->steps)) != 0 ||
        (rc = sim__param_bool(c, &t[P_ANTITHETIC], &anti)) != 0 ||
        (rc = sim__param_bool(c, &t[P_GREEKS], &greeks)) != 0)
        return rc;
    if (style == SIM_OPT_BARRIER) {
        if ((rc = sim__param_num(c, &t[P_BARRIER], &p->barrier)) != 0 ||
            (rc = sim__param_enum(c, &t[P_BARRIER_TYPE], &bt)) != 0)
            return rc;
    } else if (sim__param_get(c, t[P_BARRIER].name) != NULL || sim__param_get(c, t[P_BARRIER_TYPE].name) != NULL) {
        return sim__param_fail(c, t[sim__param_get(c, t[P_BARRIER].name) ? P_BARRIER : P_BARRIER_TYPE].name,
            "only allowed with \"style\": \"barrier\"");
    }
    /* Payoffs up to an 8-sigma move must fit the 56-bit fixed point with
     * useful resolution left: sigma sqrt(T) = 3 keeps about 2^-12 of
     * resolution on a price of 100, 4 would leave 0.5. */
    if (p->sigma * sim_sqrt(p->t) > 3.0)
        return sim__param_fail(c, "sigma",
            "sigma * sqrt(T) must be at most 3 (the statistics' fixed-point range), got %g",
            p->sigma * sim_sqrt(p->t));
    hist_hi = 2.0 * (p->s0 > p->k ? p->s0 : p->k);
    if ((rc = sim__param_range(c, &t[P_HIST], &hist_lo, &hist_hi)) != 0)
        return rc;

    p->style = style;
    p->put = type;
    p->barrier_flags = (bt == 0 || bt == 1 ? SIM_OPT_UP : 0) | (bt == 1 || bt == 3 ? SIM_OPT_IN : 0);
    p->ln_barrier = style == SIM_OPT_BARRIER ? sim_log(p->barrier) : 0.0;
    p->inv_steps = 1.0 / (double)p->steps;
    p->antithetic = anti;
    p->greeks = greeks;
    p->steps_d = (double)p->steps;
    p->nout = greeks ? 5 : 1;
    p->scen[0] = scenario(p->s0, p->r, p->q, p->sigma, p->t, p->steps);
    if (greeks)
        greek_constants(p);

    /* Magnitude bound for the fixed-point layout: payoffs beyond an 8-sigma
     * move are clamped (and counted as saturated). */
    double big = p->s0 > p->k ? p->s0 : p->k;
    double drift = p->r - p->q;
    drift = drift < 0 ? -drift : drift;
    double bound = 2.0 * big * sim_exp(8.0 * p->sigma * sim_sqrt(p->t) + drift * p->t);
    if (style == SIM_OPT_BARRIER && p->barrier > bound)
        bound = p->barrier;
    job->nout = (int)p->nout;
    job->paths_per_item = anti ? 2 : 1;
    job->out_name[0] = greek_names[0];
    if (sim_layout_make(&job->layout[0], bound, hist_lo, hist_hi) != 0)
        return sim__param_fail(c, "sigma", "with these S0, K, r, q and T, payoffs exceed the statistics' range");
    if (greeks) {
        double b8[4], b3[4];
        greek_bounds(p, 8.0, b8);
        greek_bounds(p, 3.0, b3);
        for (int g = 0; g < 4; g++) {
            job->out_name[1 + g] = greek_names[1 + g];
            if (sim_layout_make(&job->layout[1 + g], b8[g], -b3[g], b3[g]) != 0)
                return sim__param_fail(c, "greeks", "parameters too large for the Greeks");
        }
    }
    return 0;
}

static SIM_CPU_CLONES void option_run_cpu(const sim_job *job, uint64_t first, uint64_t count,
    sim_acc *acc)
{
    const sim_option_params *p = job->params;
    const sim_u32 k0 = (sim_u32)job->seed, k1 = (sim_u32)(job->seed >> 32);
    const uint64_t end = first + count;
    double out[SIM_MAX_OUT][SIM_W];
    sim_u64 alt[3 * SIM_MAX_OUT][SIM_HIST_BINS + 2];

    memset(alt, 0, sizeof alt);
    for (uint64_t g = sim__group_base(first); g < end; g += SIM_W) {
        sim_option_group(p, k0, k1, g, out);
        int lo = g < first ? (int)(first - g) : 0;
        int hi = end - g < SIM_W ? (int)(end - g) : SIM_W;
        sim_acc_lanes2(acc, alt, job->layout, (int)p->nout, out, lo, hi);
    }
    for (int o = 0; o < (int)p->nout; o++)
        for (int k = 0; k < SIM_HIST_BINS + 2; k++)
            acc[o].hist[k] += alt[o][k] + alt[SIM_MAX_OUT + o][k] + alt[2 * SIM_MAX_OUT + o][k];
}

/* N(x), the standard normal distribution function. */
static double ncdf(double x)
{
    return 0.5 * erfc(-x / M_SQRT2);
}

/* The closed forms there are: for a European option and a geometric
 * Asian (the lognormal law of the average of its fixings at T/steps,
 * 2T/steps .. T), the price by Black's formula on the forward F of what
 * the payoff reads and the sd of its log, and the Greeks the kernel
 * estimates, as derivatives of that formula through F and sd: delta,
 * vega, rho and theta = -dV/dT per year, with the dividend yield q held
 * fixed and, for the Asian, the fixings moving with T. These are the host's
 * libm, for checking estimates; no kernel reads them. */
static unsigned option_reference(const sim_job *job, double *ref)
{
    const sim_option_params *p = job->params;
    const double s = p->s0, k = p->k, r = p->r, q = p->q, sig = p->sigma, t = p->t;
    double a, v; /* the log-average's drift weight (mean time over T) and variance */
    if (p->style == SIM_OPT_EUROPEAN) {
        a = 1.0;
        v = sig * sig * t;
    } else if (p->style == SIM_OPT_ASIAN_GEOM) {
        double n = (double)p->steps;
        a = (n + 1) / (2 * n);
        v = sig * sig * t * (n + 1) * (2 * n + 1) / (6 * n * n);
    } else {
        return 0;
    }
    const double mu = r - q - 0.5 * sig * sig, sd = sqrt(v);
    const double fwd = s * exp(mu * t * a + 0.5 * v);
    const double df = exp(-r * t), w = p->put ? -1.0 : 1.0;
    const double d1 = (log(fwd / k) + 0.5 * v) / sd, d2 = d1 - sd;
    ref[0] = w * df * (fwd * ncdf(w * d1) - k * ncdf(w * d2));
    if (!p->greeks)
        return 1;
    /* V = df w (F N(w d1) - K N(w d2)): dV/dF = df w N(w d1), dV/dsd = df F phi(d1) */
    const double vf = df * w * ncdf(w * d1), vs = df * fwd * exp(-0.5 * d1 * d1) / sqrt(2 * M_PI);
    ref[1] = vf * fwd / s;                                           /* delta */
    ref[2] = vf * fwd * (v / sig - sig * t * a) + vs * sd / sig;     /* vega */
    ref[3] = vf * fwd * t * a - t * ref[0];                          /* rho */
    ref[4] = r * ref[0] - vf * fwd * (mu * a + v / (2 * t)) - vs * sd / (2 * t); /* theta */
    return 0x1f;
}

const sim_kernel sim__option_kernel = {
    .name = "option",
    .help = "European, Asian and barrier options under geometric Brownian motion; an item is a path",
    .params = params_table,
    .nparams = P_COUNT,
    .params_size = sizeof(sim_option_params),
    .parse = option_parse,
    .run_cpu = option_run_cpu,
    .reference = option_reference,
    .cl_entry = "sim_option_cl",
    .cuda_entry = "sim_option_cuda",
};
