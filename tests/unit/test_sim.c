/*
 * test_sim.c — the simulation kernels on the CPU backend: Philox4x32-10
 * against Random123's known answers, the deterministic math against the C
 * library, normal samples (moments, Kolmogorov–Smirnov), the statistics
 * (merge order, encoding, hostile encodings), prices and Greeks against
 * closed forms within 3 standard errors, chunking invariance, and
 * parameter errors that name the field. Seeds are fixed: deterministic.
 */
#include <float.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "sim/sim.h"
#include "base/json.h"

/* Makes a job from JSON; on failure returns the error code and leaves the
 * message in err. */
static inline int job_from_json(sim_job **job, const char *kernel, const char *json, uint64_t seed,
    char *err, size_t errlen)
{
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    int rc = sf_json_to_msgpack(json, strlen(json), &b, err, errlen);
    if (rc == SF_EJSON)
        rc = SIM_EPARAM; /* malformed JSON parameters are bad kernel parameters */
    if (rc == 0)
        rc = sim_job_create(job, kernel, b.data, b.size, seed, err, errlen);
    msgpack_sbuffer_destroy(&b);
    return rc;
}

static inline sim_job *must_job(const char *kernel, const char *json, uint64_t seed)
{
    sim_job *job = NULL;
    char err[256];
    int rc = job_from_json(&job, kernel, json, seed, err, sizeof err);
    cr_assert_eq(rc, 0, "job %s %s: %s (%s)", kernel, json, sf_strerror(rc), err);
    return job;
}

static inline double ncdf(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

static inline double npdf(double x)
{
    return exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/* Black–Scholes price and Greeks (theta per year, as -dV/dT). */
struct bs {
    double price, delta, vega, rho, theta;
};

static inline struct bs black_scholes(int put, double s, double k, double r, double q, double sig, double t)
{
    struct bs o;
    double st = sig * sqrt(t);
    double d1 = (log(s / k) + (r - q + 0.5 * sig * sig) * t) / st, d2 = d1 - st;
    double dq = exp(-q * t), dr = exp(-r * t);
    if (!put) {
        o.price = s * dq * ncdf(d1) - k * dr * ncdf(d2);
        o.delta = dq * ncdf(d1);
        o.rho = k * t * dr * ncdf(d2);
        o.theta = -s * dq * npdf(d1) * sig / (2 * sqrt(t)) - r * k * dr * ncdf(d2) + q * s * dq * ncdf(d1);
    } else {
        o.price = k * dr * ncdf(-d2) - s * dq * ncdf(-d1);
        o.delta = -dq * ncdf(-d1);
        o.rho = -k * t * dr * ncdf(-d2);
        o.theta = -s * dq * npdf(d1) * sig / (2 * sqrt(t)) + r * k * dr * ncdf(-d2) - q * s * dq * ncdf(-d1);
    }
    o.vega = s * dq * npdf(d1) * sqrt(t);
    return o;
}

#define assert_within_3se(st, want, what)                                                       \
    do {                                                                                        \
        double m_ = sim_stats_mean(st), se_ = sim_stats_stderr(st);                             \
        cr_assert(fabs(m_ - (want)) <= 3.0 * se_, "%s: %.6f vs closed form %.6f, 3 SE = %.6f", \
            what, m_, (double)(want), 3.0 * se_);                                               \
    } while (0)


/* ---- Philox ------------------------------------------------------------- */

/* Random123's published kat_vectors for philox4x32_10 (counter, key,
 * expected output). */
Test(sim_philox, random123_known_answers)
{
    static const uint32_t kat[3][10] = {
        { 0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
        { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
            0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
        { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
            0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
    };
    for (int i = 0; i < 3; i++) {
        const uint32_t *v = kat[i];
        sim_u32x4 r = sim_philox(v[0], v[1], v[2], v[3], v[4], v[5]);
        for (int w = 0; w < 4; w++)
            cr_assert_eq(r.v[w], v[6 + w], "vector %d word %d: %08x, want %08x", i, w, r.v[w], v[6 + w]);
    }
}

/* ---- math ------------------------------------------------------------------ */

static double ulps(double got, double want)
{
    return fabs(got - want) / (nextafter(fabs(want), INFINITY) - fabs(want));
}

Test(sim_math, exp_within_one_ulp)
{
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        double x = -700.0 + 1400.0 * i / 200000.0 + 1e-7 * (i % 7);
        double u = ulps(sim_exp(x), exp(x));
        worst = u > worst ? u : worst;
    }
    for (int i = 0; i <= 20000; i++) {
        double x = -1.0 + 2.0 * i / 20000.0;
        double u = ulps(sim_exp(x), exp(x));
        worst = u > worst ? u : worst;
    }
    cr_assert_leq(worst, 1.0, "sim_exp: %.3f ulp", worst);
    cr_assert_eq(sim_exp(0.0), 1.0);
    cr_assert_eq(sim_exp(-800.0), 0.0);
}

Test(sim_math, log_within_one_ulp)
{
    double worst = 0;
    for (int i = 1; i <= 200000; i++) {
        double x = ldexp(1.0 + (i % 9973) / 9973.0, (i % 400) - 200);
        double u = ulps(sim_log(x), log(x));
        worst = u > worst ? u : worst;
    }
    for (int i = 1; i <= 20000; i++) {
        double x = 0.5 + i / 20000.0;
        double u = x == 1.0 ? 0 : ulps(sim_log(x), log(x));
        worst = u > worst ? u : worst;
    }
    cr_assert_leq(worst, 1.0, "sim_log: %.3f ulp", worst);
    cr_assert_eq(sim_log(1.0), 0.0);
}

Test(sim_math, inverse_normal_inverts_the_cdf)
{
    for (int i = 0; i <= 16000; i++) {
        double z = -8.0 + i / 1000.0;
        double p = ncdf(z);
        if (p <= 0.0 || p >= 1.0)
            continue;
        double back = sim_ninv(p);
        /* p near 1 holds few digits of 1 - p: compare in p above zero */
        if (z <= 0.0)
            cr_assert(fabs(back - z) <= 1e-12 * (1 + fabs(z)), "z=%g: ninv(cdf(z)) = %.17g", z, back);
        else
            cr_assert(fabs(ncdf(back) - p) <= 2 * DBL_EPSILON, "z=%g: cdf(ninv(p)) - p = %g", z, ncdf(back) - p);
    }
    cr_assert_eq(sim_ninv(0.5), 0.0);
}

Test(sim_math, vectorised_normals_equal_scalar)
{
    uint32_t w[SIM_W];
    double z[SIM_W];
    for (uint32_t i = 0; i < 100000; i++) {
        sim_u32x4 r = sim_philox(i, 7, 0, 0, 1, 2);
        memcpy(w, r.v, sizeof w);
        if (i == 0) { /* extreme radii and the quadrant edges */
            w[0] = 0, w[2] = 0x40000000u, w[1] = 0xffffffffu, w[3] = 0x20000000u;
        } else if (i == 1) {
            w[0] = 0x80000000u, w[2] = 0xffffffffu, w[1] = 1, w[3] = 0x3fffffffu;
        }
        sim_normals(w, z);
        for (int l = 0; l < 2; l++) { /* pairs (0, 2) and (1, 3) */
            double a, b;
            sim_normal_pair(w[l], w[l + 2], &a, &b);
            cr_assert(memcmp(&a, &z[l], sizeof a) == 0 && memcmp(&b, &z[l + 2], sizeof b) == 0,
                "words %08x %08x", w[l], w[l + 2]);
        }
    }
    double a, b;
    sim_normal_pair(0, 0, &a, &b); /* the largest radius, angle 0 */
    cr_assert(a > 6.7 && a < 6.8 && b == 0.0, "%g %g", a, b);
    sim_normal_pair(0, 0x80000000u, &a, &b); /* angle pi */
    cr_assert(a < -6.7 && b == 0.0, "%g %g", a, b);
}

Test(sim_math, sin_cos_within_two_ulp)
{
    double worst = 0;
    for (int i = 0; i <= 100000; i++) {
        double x = 0.78539816339744831 * i / 100000.0, sn, cs;
        sim_sincos_oct(x, &sn, &cs);
        worst = fmax(worst, i ? ulps(sn, sin(x)) : 0);
        worst = fmax(worst, ulps(cs, cos(x)));
    }
    cr_assert_leq(worst, 2.0, "sim_sincos_oct: %.3f ulp", worst);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

Test(sim_math, normal_moments_and_kolmogorov_smirnov)
{
    enum { N = 1 << 20 };
    double *z = malloc(N * sizeof *z);
    cr_assert_not_null(z);
    double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    for (uint32_t b = 0; b < N / 4; b++) {
        sim_u32x4 r = sim_philox(b, 0, 0, 0, 0x12345678, 0x9abcdef0);
        sim_normals(r.v, &z[4 * b]);
        for (int l = 0; l < 4; l++) {
            double x = z[4 * b + (uint32_t)l];
            s1 += x, s2 += x * x, s3 += x * x * x, s4 += x * x * x * x;
        }
    }
    double mean = s1 / N, var = s2 / N - mean * mean;
    /* standard errors: mean 1/sqrt(N), variance sqrt(2/N), skew sqrt(6/N),
     * kurtosis sqrt(24/N); allow 4 of them */
    cr_assert(fabs(mean) < 4 / sqrt(N), "mean %g", mean);
    cr_assert(fabs(var - 1) < 4 * sqrt(2.0 / N), "variance %g", var);
    cr_assert(fabs(s3 / N) < 4 * sqrt(6.0 / N), "skewness %g", s3 / N);
    cr_assert(fabs(s4 / N - 3) < 4 * sqrt(24.0 / N), "kurtosis %g", s4 / N);
    qsort(z, N, sizeof *z, cmp_double);
    double d = 0;
    for (int i = 0; i < N; i++) {
        double f = ncdf(z[i]);
        double a = fabs(f - (double)i / N), b = fabs((double)(i + 1) / N - f);
        d = fmax(d, fmax(a, b));
    }
    /* Kolmogorov's distribution: P(sqrt(N) D > 1.63) = 1% */
    cr_assert(sqrt(N) * d < 1.63, "KS statistic sqrt(N) D = %g", sqrt(N) * d);
    free(z);
}

/* ---- statistics -------------------------------------------------------------- */

static sim_layout test_layout(void)
{
    sim_layout l;
    cr_assert_eq(sim_layout_make(&l, 1000.0, -50.0, 150.0), 0);
    return l;
}

Test(sim_stats, merge_is_order_independent)
{
    enum { N = 5000 };
    sim_layout l = test_layout();
    sim_stats all, parts[7], merged;
    double x[N];
    sim_stats_init(&all, &l);
    for (int p = 0; p < 7; p++)
        sim_stats_init(&parts[p], &l);
    for (int i = 0; i < N; i++) {
        sim_u32x4 r = sim_philox((uint32_t)i, 1, 2, 3, 4, 5);
        double g, unused;
        sim_normal_pair(r.v[0], r.v[2], &g, &unused);
        x[i] = g * 40.0 + 50.0 + (i == 17 ? 1e6 : 0.0);
        sim_stats_add(&all, x[i]);
        sim_stats_add(&parts[r.v[1] % 7], x[i]);
    }
    /* merge the parts in two different orders */
    for (int order = 0; order < 2; order++) {
        sim_stats_init(&merged, &l);
        for (int p = 0; p < 7; p++)
            cr_assert_eq(sim_stats_merge(&merged, &parts[order ? 6 - p : p]), 0);
        cr_assert(sim_stats_equal(&merged, &all));
    }
    cr_assert_eq(sim_stats_count(&all), N);
    cr_assert_eq(sim_stats_saturated(&all), 1, "the 1e6 outlier is clamped");
    uint64_t h = 0;
    for (int i = 0; i < SIM_HIST_BINS + 2; i++)
        h += sim_stats_hist(&all, i);
    cr_assert_eq(h, N);
    cr_assert_gt(sim_stats_hist(&all, SIM_HIST_BINS + 1), 0);
}

Test(sim_stats, moments_match_plain_arithmetic)
{
    sim_layout l = test_layout();
    sim_stats s;
    sim_stats_init(&s, &l);
    double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < 1000; i++) {
        double x = (i % 37) * 1.25 - 10.0;
        sim_stats_add(&s, x);
        sum += x, sq += x * x, mn = fmin(mn, x), mx = fmax(mx, x);
    }
    double mean = sum / 1000, var = (sq - 1000 * mean * mean) / 999;
    cr_assert_float_eq(sim_stats_mean(&s), mean, 1e-9);
    cr_assert_float_eq(sim_stats_variance(&s), var, 1e-6);
    cr_assert_float_eq(sim_stats_stderr(&s), sqrt(var / 1000), 1e-9);
    cr_assert_eq(sim_stats_min(&s), mn);
    cr_assert_eq(sim_stats_max(&s), mx);
}

Test(sim_stats, negative_sums_carry_through_192_bits)
{
    sim_layout l = test_layout();
    sim_stats a, b;
    sim_stats_init(&a, &l);
    sim_stats_init(&b, &l);
    for (int i = 0; i < 100; i++) {
        sim_stats_add(&a, -900.0);
        sim_stats_add(&b, 900.0);
    }
    cr_assert_float_eq(sim_stats_mean(&a), -900.0, 1e-9);
    cr_assert_eq(sim_stats_merge(&a, &b), 0);
    cr_assert_eq(sim_stats_mean(&a), 0.0);
    cr_assert_eq(a.acc.sum[0] | a.acc.sum[1] | a.acc.sum[2], 0, "exact zero after cancellation");
}

Test(sim_stats, merge_rejects_other_layouts)
{
    sim_layout l1 = test_layout(), l2;
    cr_assert_eq(sim_layout_make(&l2, 1000.0, -50.0, 151.0), 0);
    sim_stats a, b;
    sim_stats_init(&a, &l1);
    sim_stats_init(&b, &l2);
    sim_stats_add(&b, 1.0);
    cr_assert_eq(sim_stats_merge(&a, &b), SIM_ELAYOUT);
    cr_assert_eq(sim_stats_count(&a), 0);
    cr_assert_eq(sim_layout_make(&l2, -1.0, 0, 1), SIM_EINVAL);
    cr_assert_eq(sim_layout_make(&l2, 1.0, 1, 1), SIM_EINVAL);
}

Test(sim_stats, encoding_round_trips)
{
    sim_layout l = test_layout();
    sim_stats s, back;
    unsigned char buf[SIM_STATS_MAX_ENCODED];
    size_t len;
    sim_stats_init(&s, &l);
    for (int i = 0; i < 300; i++)
        sim_stats_add(&s, (i % 11) * 17.5 - 60.0);
    cr_assert_eq(sim_stats_encode(&s, buf, sizeof buf, &len), 0);
    cr_assert_eq(sim_stats_decode(&back, buf, len), 0);
    cr_assert(sim_stats_equal(&s, &back));
    cr_assert_eq(sim_stats_encode(&s, buf, 20, &len), SIM_ENOSPC);
}

Test(sim_stats, decoder_rejects_hostile_bytes)
{
    sim_layout l = test_layout();
    sim_stats s, back;
    unsigned char buf[SIM_STATS_MAX_ENCODED], bad[SIM_STATS_MAX_ENCODED];
    size_t len;
    sim_stats_init(&s, &l);
    for (int i = 0; i < 50; i++)
        sim_stats_add(&s, i);
    cr_assert_eq(sim_stats_encode(&s, buf, sizeof buf, &len), 0);
    /* every truncation fails */
    for (size_t n = 0; n < len; n++)
        cr_assert_eq(sim_stats_decode(&back, buf, n), SIM_EFORMAT, "truncated to %zu", n);
    /* trailing bytes fail */
    memcpy(bad, buf, len);
    bad[len] = 0;
    cr_assert_eq(sim_stats_decode(&back, bad, len + 1), SIM_EFORMAT);
    /* single byte changes either fail or decode to something consistent */
    int rejected = 0;
    for (size_t i = 0; i < len; i++) {
        memcpy(bad, buf, len);
        bad[i] ^= 0x41;
        if (sim_stats_decode(&back, bad, len) != 0)
            rejected++;
        else
            cr_assert_eq(sim_stats_count(&back), sim_stats_hist(&back, 0) + (sim_stats_count(&back) -
                sim_stats_hist(&back, 0)));
    }
    cr_assert_gt(rejected, (int)len / 2);
    cr_assert_eq(sim_stats_decode(&back, NULL, 0), SIM_EFORMAT);
}

/* ---- option kernel: closed forms ----------------------------------------------- */

static void run(const sim_job *job, uint64_t n, sim_stats *out)
{
    cr_assert_eq(sim_run_cpu(job, 0, n, out), 0);
    for (int o = 0; o < sim_job_nout(job); o++)
        cr_assert_eq(sim_stats_saturated(&out[o]), 0, "output %d saturated", o);
}

Test(sim_option, european_call_and_put_match_black_scholes, .timeout = 60)
{
    static const char *sets[] = {
        "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}",
        "{\"S0\": 100, \"K\": 120, \"r\": 0.01, \"q\": 0.02, \"sigma\": 0.35, \"T\": 0.5}",
        "{\"S0\": 50, \"K\": 40, \"r\": 0.03, \"sigma\": 0.6, \"T\": 2, \"steps\": 4}",
    };
    for (int i = 0; i < 3; i++)
        for (int put = 0; put < 2; put++) {
            char json[256];
            snprintf(json, sizeof json, "%.*s, \"type\": \"%s\"}", (int)strlen(sets[i]) - 1, sets[i],
                put ? "put" : "call");
            sim_job *job = must_job("option", json, 1000 + (uint64_t)i);
            sim_stats st[1];
            run(job, 400000, st);
            double s0, k, r = 0, q = 0, sig, t;
            if (i == 0) s0 = 100, k = 100, r = 0.05, sig = 0.2, t = 1;
            else if (i == 1) s0 = 100, k = 120, r = 0.01, q = 0.02, sig = 0.35, t = 0.5;
            else s0 = 50, k = 40, r = 0.03, sig = 0.6, t = 2;
            assert_within_3se(&st[0], black_scholes(put, s0, k, r, q, sig, t).price, json);
            sim_job_destroy(job);
        }
}

Test(sim_option, put_call_parity)
{
    sim_job *c = must_job("option", "{\"S0\": 100, \"K\": 95, \"r\": 0.04, \"q\": 0.01, \"sigma\": 0.25, \"T\": 1.5}", 77);
    sim_job *p = must_job("option", "{\"type\": \"put\", \"S0\": 100, \"K\": 95, \"r\": 0.04, \"q\": 0.01, \"sigma\": 0.25, \"T\": 1.5}", 77);
    sim_stats sc[1], sp[1];
    run(c, 300000, sc);
    run(p, 300000, sp);
    double want = 100 * exp(-0.01 * 1.5) - 95 * exp(-0.04 * 1.5);
    double got = sim_stats_mean(&sc[0]) - sim_stats_mean(&sp[0]);
    /* sd(C - P) <= sd(C) + sd(P) whatever their correlation */
    double se = sim_stats_stderr(&sc[0]) + sim_stats_stderr(&sp[0]);
    cr_assert(fabs(got - want) <= 3 * se, "C - P = %.5f, parity %.5f, 3 SE %.5f", got, want, 3 * se);
    sim_job_destroy(c);
    sim_job_destroy(p);
}

/* Geometric average of N equally spaced fixings t_j = jT/N, j = 1..N. */
static double geometric_asian(int put, double s, double k, double r, double q, double sig, double t, int n)
{
    double mu = log(s) + (r - q - 0.5 * sig * sig) * t * (n + 1) / (2.0 * n);
    double v = sig * sig * t * (n + 1) * (2.0 * n + 1) / (6.0 * n * n);
    double sd = sqrt(v), d2 = (mu - log(k)) / sd, d1 = d2 + sd, w = put ? -1.0 : 1.0;
    return w * exp(-r * t) * (exp(mu + 0.5 * v) * ncdf(w * d1) - k * ncdf(w * d2));
}

static double geometric_asian_call(double s, double k, double r, double q, double sig, double t, int n)
{
    return geometric_asian(0, s, k, r, q, sig, t, n);
}

/* A closed form's price at (S0, r, sigma, T); ctx holds the rest. */
typedef double (*price_fn)(const void *ctx, double s, double r, double sig, double t);

/* The Greeks of a closed form as its central differences (steps of 1e-5,
 * relative for S0 and T); theta = -dV/dT. */
static struct bs greeks_by_differences(price_fn f, const void *ctx, double s, double r, double sig, double t)
{
    struct bs o;
    const double hs = 1e-5 * s, h = 1e-5, ht = 1e-5 * t;
    o.price = f(ctx, s, r, sig, t);
    o.delta = (f(ctx, s + hs, r, sig, t) - f(ctx, s - hs, r, sig, t)) / (2 * hs);
    o.vega = (f(ctx, s, r, sig + h, t) - f(ctx, s, r, sig - h, t)) / (2 * h);
    o.rho = (f(ctx, s, r + h, sig, t) - f(ctx, s, r - h, sig, t)) / (2 * h);
    o.theta = -(f(ctx, s, r, sig, t + ht) - f(ctx, s, r, sig, t - ht)) / (2 * ht);
    return o;
}

struct fixed_terms {
    int put, n;
    double k, q, b;
};

static double geometric_asian_at(const void *ctx, double s, double r, double sig, double t)
{
    const struct fixed_terms *c = ctx;
    return geometric_asian(c->put, s, c->k, r, c->q, sig, t, c->n);
}

/* The geometric Asian's Greeks, the fixings moving with T. */
static struct bs geometric_asian_greeks(int put, double s, double k, double r, double q, double sig, double t, int n)
{
    const struct fixed_terms c = { .put = put, .n = n, .k = k, .q = q };
    return greeks_by_differences(geometric_asian_at, &c, s, r, sig, t);
}

/* An up-and-out call watched on one date, T, with K < B: the European
 * payoff cut off at B, e^(-rT) E[(S_T - K) 1{K < S_T < B}] = C(K) - C(B) -
 * (B - K) e^(-rT) N(d2(B)). */
static double up_out_one_date_at(const void *ctx, double s, double r, double sig, double t)
{
    const struct fixed_terms *c = ctx;
    double d2b = (log(s / c->b) + (r - c->q - 0.5 * sig * sig) * t) / (sig * sqrt(t));
    return black_scholes(0, s, c->k, r, c->q, sig, t).price - black_scholes(0, s, c->b, r, c->q, sig, t).price -
        (c->b - c->k) * exp(-r * t) * ncdf(d2b);
}

Test(sim_option, geometric_asian_matches_closed_form, .timeout = 60)
{
    sim_job *job = must_job("option", "{\"style\": \"asian_geometric\", \"S0\": 100, \"K\": 100, "
        "\"r\": 0.05, \"q\": 0.01, \"sigma\": 0.3, \"T\": 1, \"steps\": 12}", 5);
    sim_stats st[1];
    run(job, 200000, st);
    assert_within_3se(&st[0], geometric_asian_call(100, 100, 0.05, 0.01, 0.3, 1, 12), "geometric asian");
    sim_job_destroy(job);
}

/* sim_job_reference: the closed forms simfarm sim prints beside its
 * estimates. Textbook values (Hull, Options, Futures and Other Derivatives:
 * S0 42, K 40, r 0.1, sigma 0.2, T 0.5 gives a call of 4.76 and a put of
 * 0.81), this file's own Black–Scholes and geometric Asian formulas, and
 * none for the jobs that have no closed form. */
Test(sim_option, closed_forms_for_checking_estimates)
{
    double ref[SIM_MAX_OUT];
    sim_job *job = must_job("option", "{\"S0\": 42, \"K\": 40, \"r\": 0.1, \"sigma\": 0.2, \"T\": 0.5}", 1);
    cr_assert_eq(sim_job_reference(job, ref), 1u);
    cr_assert(fabs(ref[0] - 4.7594) < 1e-4, "%.6f", ref[0]);
    sim_job_destroy(job);
    job = must_job("option", "{\"type\": \"put\", \"S0\": 42, \"K\": 40, \"r\": 0.1, \"sigma\": 0.2, \"T\": 0.5}", 1);
    cr_assert_eq(sim_job_reference(job, ref), 1u);
    cr_assert(fabs(ref[0] - 0.8086) < 1e-4, "%.6f", ref[0]);
    sim_job_destroy(job);

    for (int put = 0; put < 2; put++) {
        char json[256];
        snprintf(json, sizeof json, "{\"type\": \"%s\", \"S0\": 100, \"K\": 120, \"r\": 0.01, \"q\": 0.02, "
            "\"sigma\": 0.35, \"T\": 0.5, \"steps\": 3, \"antithetic\": true, \"greeks\": true}", put ? "put" : "call");
        job = must_job("option", json, 1);
        struct bs w = black_scholes(put, 100, 120, 0.01, 0.02, 0.35, 0.5);
        const double want[5] = { w.price, w.delta, w.vega, w.rho, w.theta };
        cr_assert_eq(sim_job_reference(job, ref), 0x1fu);
        for (int o = 0; o < 5; o++)
            cr_assert(fabs(ref[o] - want[o]) <= 1e-12 * (1 + fabs(want[o])), "%s output %d: %.15g vs %.15g", json, o,
                ref[o], want[o]);
        sim_job_destroy(job);
    }

    /* the geometric Asian's closed form and its derivatives */
    for (int put = 0; put < 2; put++) {
        char json[256];
        snprintf(json, sizeof json, "{\"style\": \"asian_geometric\", \"type\": \"%s\", \"S0\": 100, \"K\": 100, "
            "\"r\": 0.05, \"q\": 0.01, \"sigma\": 0.3, \"T\": 1, \"steps\": 12, \"greeks\": true}", put ? "put" : "call");
        job = must_job("option", json, 1);
        struct bs w = geometric_asian_greeks(put, 100, 100, 0.05, 0.01, 0.3, 1, 12);
        const double want[5] = { w.price, w.delta, w.vega, w.rho, w.theta };
        cr_assert_eq(sim_job_reference(job, ref), 0x1fu);
        cr_assert(fabs(ref[0] - want[0]) < 1e-12 * want[0], "%.15g vs %.15g", ref[0], want[0]);
        for (int o = 1; o < 5; o++)
            cr_assert(fabs(ref[o] - want[o]) <= 1e-6 * (1 + fabs(want[o])), "%s output %d: %.15g vs %.15g", json, o,
                ref[o], want[o]);
        sim_job_destroy(job);
    }

    const char *none[][2] = {
        { "option", "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 100, \"sigma\": 0.3, \"T\": 1, \"steps\": 12}" },
        { "option", "{\"style\": \"barrier\", \"barrier\": 120, \"barrier_type\": \"up_out\", \"S0\": 100, \"K\": 100, "
            "\"sigma\": 0.25, \"T\": 1, \"steps\": 50}" },
        { "combat", "{\"power\": 5000, \"abilities\": [{\"coefficient\": 2}]}" },
    };
    for (int i = 0; i < 3; i++) {
        job = must_job(none[i][0], none[i][1], 1);
        cr_assert_eq(sim_job_reference(job, ref), 0u, "%s", none[i][1]);
        sim_job_destroy(job);
    }
}

Test(sim_option, arithmetic_asian_lies_above_geometric, .timeout = 60)
{
    sim_job *a = must_job("option", "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 100, "
        "\"r\": 0.05, \"sigma\": 0.3, \"T\": 1, \"steps\": 12}", 5);
    sim_job *g = must_job("option", "{\"style\": \"asian_geometric\", \"S0\": 100, \"K\": 100, "
        "\"r\": 0.05, \"sigma\": 0.3, \"T\": 1, \"steps\": 12}", 5);
    sim_stats sa[1], sg[1];
    run(a, 50000, sa);
    run(g, 50000, sg);
    /* same paths: AM >= GM pathwise, so every item and the mean are larger */
    cr_assert_gt(sim_stats_mean(&sa[0]), sim_stats_mean(&sg[0]));
    cr_assert_lt(sim_stats_mean(&sa[0]), black_scholes(0, 100, 100, 0.05, 0, 0.3, 1).price);
    sim_job_destroy(a);
    sim_job_destroy(g);
}

Test(sim_option, barrier_in_plus_out_is_vanilla_exactly, .timeout = 60)
{
    const char *base = "\"S0\": 100, \"K\": 100, \"r\": 0.03, \"sigma\": 0.25, \"T\": 1, \"steps\": 50";
    const char *kinds[] = { "up", "down" };
    for (int d = 0; d < 2; d++) {
        char j_in[256], j_out[256], j_v[256];
        double b = d ? 85 : 120;
        snprintf(j_in, sizeof j_in, "{%s, \"style\": \"barrier\", \"barrier\": %g, \"barrier_type\": \"%s_in\"}", base, b, kinds[d]);
        snprintf(j_out, sizeof j_out, "{%s, \"style\": \"barrier\", \"barrier\": %g, \"barrier_type\": \"%s_out\"}", base, b, kinds[d]);
        snprintf(j_v, sizeof j_v, "{%s}", base);
        sim_job *ji = must_job("option", j_in, 9), *jo = must_job("option", j_out, 9), *jv = must_job("option", j_v, 9);
        sim_stats si[1], so[1], sv[1];
        run(ji, 20000, si);
        run(jo, 20000, so);
        run(jv, 20000, sv);
        /* Per path exactly one of in/out pays the vanilla payoff, and the
         * fixed-point sums are integers: the identity holds bit for bit. */
        cr_assert_eq(sim_stats_merge(&si[0], &so[0]), 0);
        cr_assert(memcmp(si[0].acc.sum, sv[0].acc.sum, sizeof sv[0].acc.sum) == 0, "%s: in + out != vanilla", kinds[d]);
        cr_assert_gt(sim_stats_mean(&so[0]), 0.0);
        sim_job_destroy(ji);
        sim_job_destroy(jo);
        sim_job_destroy(jv);
    }
}

Test(sim_option, greeks_match_black_scholes, .timeout = 60)
{
    for (int put = 0; put < 2; put++) {
        char json[256];
        snprintf(json, sizeof json, "{\"type\": \"%s\", \"S0\": 100, \"K\": 105, \"r\": 0.03, "
            "\"q\": 0.01, \"sigma\": 0.25, \"T\": 1, \"greeks\": true}", put ? "put" : "call");
        sim_job *job = must_job("option", json, 31);
        cr_assert_eq(sim_job_nout(job), 5);
        cr_assert_str_eq(sim_job_output_name(job, 2), "vega");
        sim_stats st[5];
        run(job, 200000, st);
        struct bs w = black_scholes(put, 100, 105, 0.03, 0.01, 0.25, 1);
        assert_within_3se(&st[0], w.price, "price");
        assert_within_3se(&st[1], w.delta, "delta");
        assert_within_3se(&st[2], w.vega, "vega");
        assert_within_3se(&st[3], w.rho, "rho");
        assert_within_3se(&st[4], w.theta, "theta");
        sim_job_destroy(job);
    }
}

/* A small volatility: the pathwise vega's factor e^(-rT) / sigma is large,
 * and its layout must still hold it. */
Test(sim_option, vega_of_a_small_volatility, .timeout = 60)
{
    sim_job *job = must_job("option", "{\"S0\": 100, \"K\": 100, \"r\": 0, \"sigma\": 0.004, \"T\": 1, "
        "\"greeks\": true}", 5);
    sim_stats st[5];
    run(job, 200000, st);
    struct bs w = black_scholes(0, 100, 100, 0, 0, 0.004, 1);
    assert_within_3se(&st[0], w.price, "price");
    assert_within_3se(&st[2], w.vega, "vega");
    sim_job_destroy(job);
}

Test(sim_option, antithetic_pairs_reduce_the_error, .timeout = 60)
{
    sim_job *a = must_job("option", "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1, \"antithetic\": true}", 3);
    sim_job *p = must_job("option", "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}", 3);
    cr_assert_eq(sim_job_paths_per_item(a), 2);
    sim_stats sa[1], sp[1];
    run(a, 200000, sa); /* 400,000 paths */
    run(p, 400000, sp);
    assert_within_3se(&sa[0], black_scholes(0, 100, 100, 0.05, 0, 0.2, 1).price, "antithetic");
    cr_assert_lt(sim_stats_stderr(&sa[0]), sim_stats_stderr(&sp[0]));
    sim_job_destroy(a);
    sim_job_destroy(p);
}

/* ---- option kernel: Greeks at scale --------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

struct piece {
    const sim_job *job;
    uint64_t first, count;
    sim_stats st[SIM_MAX_OUT];
    int rc;
};

static void *run_piece(void *arg)
{
    struct piece *pc = arg;
    pc->rc = sim_run_cpu(pc->job, pc->first, pc->count, pc->st);
    return NULL;
}

/* Items [0, n) of job on every online core, one piece a thread, merged;
 * the statistics are integers, so they are those of one run. */
static void run_cores(const sim_job *job, uint64_t n, sim_stats *out)
{
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = nc < 1 ? 1 : nc > 64 ? 64 : (int)nc;
    struct piece *pc = calloc((size_t)nt, sizeof *pc);
    pthread_t th[64];
    cr_assert_not_null(pc);
    for (int i = 0; i < nt; i++) {
        pc[i] = (struct piece){ .job = job, .first = n / (uint64_t)nt * (uint64_t)i };
        pc[i].count = (i == nt - 1 ? n : n / (uint64_t)nt * (uint64_t)(i + 1)) - pc[i].first;
        cr_assert_eq(pthread_create(&th[i], NULL, run_piece, &pc[i]), 0);
    }
    for (int i = 0; i < nt; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    for (int o = 0; o < sim_job_nout(job); o++) {
        out[o] = pc[0].st[o];
        for (int i = 1; i < nt; i++)
            cr_assert_eq(sim_stats_merge(&out[o], &pc[i].st[o]), 0);
        cr_assert_eq(sim_stats_saturated(&out[o]), 0, "output %d saturated", o);
    }
    for (int i = 0; i < nt; i++)
        cr_assert_eq(pc[i].rc, 0);
    free(pc);
}

/* Every output of a job within 3 standard errors of want; the z of each
 * is logged. */
static void assert_outputs(const char *what, const sim_job *job, const sim_stats *st, const double *want)
{
    for (int o = 0; o < 5; o++) {
        double m = sim_stats_mean(&st[o]), se = sim_stats_stderr(&st[o]);
        cr_log_info("%s %s: %.8f +- %.8f, closed form %.8f, z %+.2f", what, sim_job_output_name(job, o), m, se,
            want[o], (m - want[o]) / se);
        cr_assert(fabs(m - want[o]) <= 3.0 * se, "%s %s: %.8f vs closed form %.8f, 3 SE = %.8f", what,
            sim_job_output_name(job, o), m, want[o], 3.0 * se);
    }
}

/* The same against the job's own closed forms (sim_job_reference). */
static void assert_greeks(const char *what, const sim_job *job, const sim_stats *st)
{
    double ref[SIM_MAX_OUT];
    cr_assert_eq(sim_job_reference(job, ref), 0x1fu, "%s: closed forms", what);
    assert_outputs(what, job, st, ref);
}

/* At 10^9 items a bias of a few 10^-5 in a Greek is many standard errors:
 * the estimators must be of the derivative itself. The first job is
 * examples/option.json, the demo of issue 47 whose finite-difference delta
 * read z = -19. Each job's closed form is Black–Scholes with q. */
Test(sim_option, greeks_of_a_billion_items_match_black_scholes, .timeout = 900)
{
#ifdef SANITIZED
    cr_skip_test("a sanitizer build runs the kernel many times slower; the plain build runs this check");
#endif
    static const char *jobs[] = {
        "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1, \"antithetic\": true, \"greeks\": true}",
        "{\"type\": \"put\", \"S0\": 100, \"K\": 110, \"r\": 0.04, \"q\": 0.02, \"sigma\": 0.3, \"T\": 1.5, "
        "\"greeks\": true}",
        "{\"S0\": 100, \"K\": 95, \"r\": 0.03, \"q\": 0.05, \"sigma\": 0.25, \"T\": 0.5, \"greeks\": true}",
    };
    for (int i = 0; i < 3; i++) {
        sim_job *job = must_job("option", jobs[i], 47 + (uint64_t)i);
        sim_stats st[5];
        run_cores(job, 1000000000, st);
        assert_greeks(jobs[i], job, st);
        sim_job_destroy(job);
    }
}

/* The other styles' estimators on closed forms: the geometric Asian's
 * Greeks (pathwise through the log-average, 12 fixings); an arithmetic
 * Asian of one fixing, which is the European payoff through the
 * arithmetic code's sums; an up-and-out call watched on one date, whose
 * closed form is the European payoff cut off at the barrier (the
 * likelihood ratio across a jump); a barrier no path reaches, whose
 * likelihood-ratio Greeks have the European's expectation. The Asians run
 * 4x10^8 items: 12 normals an item, each run costs about what a 10^9-item
 * European does. */
Test(sim_option, greeks_of_each_style_match_closed_forms, .timeout = 900)
{
#ifdef SANITIZED
    cr_skip_test("a sanitizer build runs the kernel many times slower; the plain build runs this check");
#endif
    for (int put = 0; put < 2; put++) {
        char json[256];
        snprintf(json, sizeof json, "{\"style\": \"asian_geometric\", \"type\": \"%s\", \"S0\": 100, \"K\": 100, "
            "\"r\": 0.05, \"q\": 0.01, \"sigma\": 0.3, \"T\": 1, \"steps\": 12, \"greeks\": true}", put ? "put" : "call");
        sim_job *job = must_job("option", json, 61 + (uint64_t)put);
        sim_stats st[5];
        run_cores(job, 400000000, st);
        assert_greeks(json, job, st);
        sim_job_destroy(job);
    }
    static const char *like_european[] = {
        "{\"style\": \"asian_arithmetic\", \"type\": \"put\", \"S0\": 100, \"K\": 105, \"r\": 0.03, \"q\": 0.01, "
        "\"sigma\": 0.25, \"T\": 1, \"greeks\": true}",
        "{\"style\": \"barrier\", \"barrier\": 1000000, \"barrier_type\": \"up_out\", \"type\": \"put\", \"S0\": 100, "
        "\"K\": 105, \"r\": 0.03, \"q\": 0.01, \"sigma\": 0.25, \"T\": 1, \"steps\": 4, \"greeks\": true}",
    };
    /* a barrier that knocks out: the likelihood ratio across the jump at B */
    const struct fixed_terms uo = { .k = 100, .q = 0.01, .b = 130 };
    struct bs u = greeks_by_differences(up_out_one_date_at, &uo, 100, 0.03, 0.25, 1);
    const double want_uo[5] = { u.price, u.delta, u.vega, u.rho, u.theta };
    sim_job *bj = must_job("option", "{\"style\": \"barrier\", \"barrier\": 130, \"barrier_type\": \"up_out\", "
        "\"S0\": 100, \"K\": 100, \"r\": 0.03, \"q\": 0.01, \"sigma\": 0.25, \"T\": 1, \"greeks\": true}", 81);
    sim_stats bst[5];
    run_cores(bj, 100000000, bst);
    assert_outputs("up-and-out call, one date", bj, bst, want_uo);
    sim_job_destroy(bj);

    struct bs w = black_scholes(1, 100, 105, 0.03, 0.01, 0.25, 1);
    const double want[5] = { w.price, w.delta, w.vega, w.rho, w.theta };
    for (int i = 0; i < 2; i++) {
        sim_job *job = must_job("option", like_european[i], 71 + (uint64_t)i);
        sim_stats st[5];
        run_cores(job, 100000000, st);
        double ref[SIM_MAX_OUT];
        cr_assert_eq(sim_job_reference(job, ref), 0u, "no closed form of its own");
        assert_outputs(like_european[i], job, st, want);
        sim_job_destroy(job);
    }
}

/* ---- chunking ------------------------------------------------------------------ */

static void check_chunking(const char *kernel, const char *json, uint64_t first, uint64_t n)
{
    sim_job *job = must_job(kernel, json, 0x0123456789abcdefull);
    int nout = sim_job_nout(job);
    sim_stats whole[SIM_MAX_OUT], part[SIM_MAX_OUT], merged[SIM_MAX_OUT];
    cr_assert_eq(sim_run_cpu(job, first, n, whole), 0);
    for (int o = 0; o < nout; o++)
        sim_stats_init(&merged[o], sim_job_layout(job, o));
    /* uneven chunks, merged in reverse order */
    uint64_t cuts[] = { 0, 1, 2, 7, 13, 64, 65, 200, n };
    for (int c = 7; c >= 0; c--) {
        uint64_t a = cuts[c] < n ? cuts[c] : n, b = cuts[c + 1] < n ? cuts[c + 1] : n;
        if (a >= b)
            continue;
        cr_assert_eq(sim_run_cpu(job, first + a, b - a, part), 0);
        for (int o = 0; o < nout; o++)
            cr_assert_eq(sim_stats_merge(&merged[o], &part[o]), 0);
    }
    for (int o = 0; o < nout; o++)
        cr_assert(sim_stats_equal(&merged[o], &whole[o]), "%s %s: output %d differs", kernel, json, o);
    sim_job_destroy(job);
}

Test(sim_chunking, any_split_gives_the_same_bits, .timeout = 60)
{
    check_chunking("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1}", 0, 1000);
    check_chunking("option", "{\"S0\": 100, \"K\": 90, \"sigma\": 0.3, \"T\": 1, \"style\": \"asian_arithmetic\", \"steps\": 10, \"antithetic\": true}", 3, 777);
    check_chunking("option", "{\"S0\": 100, \"K\": 90, \"sigma\": 0.3, \"T\": 1, \"greeks\": true, \"type\": \"put\"}", (1ull << 40) + 1, 301);
    check_chunking("combat", "{\"power\": 1000, \"crit\": 1500, \"haste\": 900, \"abilities\": [{\"name\": \"a\", \"coefficient\": 2, \"cooldown\": 6}, {\"coefficient\": 0.5}], \"proc_chance\": 0.2, \"proc_resets\": \"a\", \"stat_weights\": true}", 5, 230);
}

/* ---- combat -------------------------------------------------------------------- */

Test(sim_combat, fixed_rotation_has_exact_dps)
{
    /* No variation, no crit bonus, one instant ability on a 1.5 s global
     * cooldown: casts at 0, 1.5, ..., 300 (201 of them) in 301 s. */
    sim_job *job = must_job("combat", "{\"power\": 1000, \"versatility\": 2050, \"fight_length\": 301, "
        "\"fight_variation\": 0, \"crit_multiplier\": 1, \"abilities\": [{\"coefficient\": 0.5}]}", 1);
    sim_stats st[1];
    run(job, 64, st);
    double want = 201 * 0.5 * 1000 * 1.1 / 301;
    cr_assert(fabs(sim_stats_mean(&st[0]) - want) < 1e-6, "%.9f vs %.9f", sim_stats_mean(&st[0]), want);
    cr_assert(sim_stats_stderr(&st[0]) < 1e-6);
    sim_job_destroy(job);
}

/* The DPS range holds the fastest rotations the rules allow: an ability off
 * the global cooldown cast every 0.1 s / (1 + haste) at the top of every
 * stat, and an instant one a proc resets after every cast, which casts the
 * whole 100,000 at time 0. Neither saturates, and the DPS is exact. */
Test(sim_combat, the_fastest_rotations_fit_the_range)
{
    sim_job *job = must_job("combat", "{\"power\": 1000000, \"haste\": 100000, \"mastery\": 100000, "
        "\"versatility\": 100000, \"crit\": 17000, \"crit_multiplier\": 10, \"fight_length\": 10, "
        "\"fight_variation\": 0, \"abilities\": [{\"coefficient\": 1000, \"cast_time\": 0.1, \"gcd\": false, "
        "\"mastery\": true}]}", 1);
    sim_stats st[1];
    run(job, 64, st);
    double inv_speed = 1.0 / (1.0 + 100000 / 17000.0), now = 0.0, casts = 0;
    while (now + 0.1 * inv_speed <= 10.0) {
        now = now + 0.1 * inv_speed;
        casts++;
    }
    double hit = 1000 * 1e6 * (1.0 + 100000 / 20500.0) * (1.0 + (0.08 + 100000 / 18000.0));
    /* crit chance 0.05 + 17000/18000 < 1: a few casts are not crits */
    cr_assert_gt(sim_stats_mean(&st[0]), casts * hit / 10.0);
    cr_assert_leq(sim_stats_mean(&st[0]), casts * hit * 10 / 10.0 * (1 + 1e-12));
    sim_job_destroy(job);

    job = must_job("combat", "{\"power\": 1000, \"fight_length\": 10, \"fight_variation\": 0, "
        "\"crit_multiplier\": 1, \"proc_chance\": 1, \"proc_resets\": \"a\", "
        "\"abilities\": [{\"name\": \"a\", \"coefficient\": 2, \"cooldown\": 5, \"gcd\": false}]}", 1);
    run(job, 64, st);
    double want = 100000 * 2 * 1000 / 10.0;
    cr_assert(fabs(sim_stats_mean(&st[0]) - want) < 1e-6 * want, "%.9g vs %.9g", sim_stats_mean(&st[0]), want);
    sim_job_destroy(job);
}

static const char *rotation =
    "\"abilities\": [{\"name\": \"big\", \"coefficient\": 3, \"cooldown\": 12, \"mastery\": true},"
    " {\"name\": \"cast\", \"coefficient\": 1.6, \"cast_time\": 2, \"cooldown\": 6, \"hasted_cooldown\": true},"
    " {\"name\": \"filler\", \"coefficient\": 0.8}], \"proc_chance\": 0.15, \"proc_resets\": \"big\"";

Test(sim_combat, secondary_stats_raise_dps, .timeout = 60)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "{\"power\": 5000, \"crit\": 1000, \"haste\": 1000, %s}", rotation);
    snprintf(b, sizeof b, "{\"power\": 5000, \"crit\": 3000, \"haste\": 3000, %s}", rotation);
    sim_job *ja = must_job("combat", a, 4), *jb = must_job("combat", b, 4);
    sim_stats sa[1], sb[1];
    run(ja, 2000, sa);
    run(jb, 2000, sb);
    cr_assert_gt(sim_stats_mean(&sb[0]), sim_stats_mean(&sa[0]) + 3 * sim_stats_stderr(&sa[0]));
    sim_job_destroy(ja);
    sim_job_destroy(jb);
}

Test(sim_combat, stat_weights_agree_with_separate_runs, .timeout = 60)
{
    char json[768], lo[768], hi[768];
    snprintf(json, sizeof json, "{\"power\": 5000, \"crit\": 2000, \"haste\": 1500, \"mastery\": 1000, "
        "\"versatility\": 800, \"stat_weights\": true, \"delta\": 200, %s}", rotation);
    snprintf(lo, sizeof lo, "{\"power\": 5000, \"crit\": 1800, \"haste\": 1500, \"mastery\": 1000, "
        "\"versatility\": 800, %s}", rotation);
    snprintf(hi, sizeof hi, "{\"power\": 5000, \"crit\": 2200, \"haste\": 1500, \"mastery\": 1000, "
        "\"versatility\": 800, %s}", rotation);
    sim_job *j = must_job("combat", json, 11), *jl = must_job("combat", lo, 11), *jh = must_job("combat", hi, 11);
    cr_assert_eq(sim_job_nout(j), 6);
    cr_assert_str_eq(sim_job_output_name(j, 2), "w_crit");
    sim_stats sw[6], sl[1], sh[1];
    run(j, 3000, sw);
    run(jl, 3000, sl);
    run(jh, 3000, sh);
    /* the per-item differences average to the difference of the runs */
    double sep = (sim_stats_mean(&sh[0]) - sim_stats_mean(&sl[0])) / 400.0;
    cr_assert(fabs(sim_stats_mean(&sw[2]) - sep) < 1e-6 + 1e-9 * fabs(sep), "w_crit %.9f vs %.9f",
        sim_stats_mean(&sw[2]), sep);
    for (int s = 1; s < 6; s++)
        cr_assert_gt(sim_stats_mean(&sw[s]), 0.0, "%s", sim_job_output_name(j, s));
    /* versatility scales all damage: its weight is DPS / (vers + 20500) */
    double vw = sim_stats_mean(&sw[0]) / (800.0 + 20500.0);
    cr_assert(fabs(sim_stats_mean(&sw[5]) - vw) < 1e-3 * vw, "w_versatility %g vs %g", sim_stats_mean(&sw[5]), vw);
    sim_job_destroy(j);
    sim_job_destroy(jl);
    sim_job_destroy(jh);
}

/* ---- parameter errors ---------------------------------------------------------- */

static void expect_error(const char *kernel, const char *json, const char *needle1, const char *needle2)
{
    sim_job *job = NULL;
    char err[256] = "";
    int rc = job_from_json(&job, kernel, json, 1, err, sizeof err);
    cr_assert_eq(rc, SIM_EPARAM, "%s: rc %d (%s)", json, rc, err);
    cr_assert_null(job);
    cr_assert(strstr(err, needle1) != NULL, "%s: message \"%s\" lacks \"%s\"", json, err, needle1);
    cr_assert(strstr(err, needle2) != NULL, "%s: message \"%s\" lacks \"%s\"", json, err, needle2);
}

Test(sim_params, errors_name_the_field_and_the_range)
{
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": -0.2, \"T\": 1}", "'sigma'", "(0, 5], got -0.2");
    expect_error("option", "{\"S0\": 100, \"sigma\": 0.2, \"T\": 1}", "'K'", "missing");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 2, \"T\": 4}", "'sigma'", "sigma * sqrt(T) must be at most 3");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"steps\": 0}", "'steps'", "[1, 100000], got 0");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"steps\": 2.5}", "'steps'", "integer");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"sigam\": 1}", "'sigam'", "unknown field");
    expect_error("option", "{\"S0\": \"100\", \"K\": 100, \"sigma\": 0.2, \"T\": 1}", "'S0'", "number");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"style\": \"bermudan\"}", "'style'", "\"asian_geometric\"");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"style\": \"barrier\", \"barrier\": 120}", "'barrier_type'", "missing");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"barrier\": 120}", "'barrier'", "only allowed");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"antithetic\": 1}", "'antithetic'", "true or false");
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"hist\": [5, 1]}", "'hist'", "lo < hi");
    expect_error("combat", "{\"power\": 100}", "'abilities'", "missing");
    expect_error("combat", "{\"power\": 100, \"abilities\": [{\"coefficient\": 1, \"cooldown\": -3}]}", "'abilities[0].cooldown'", "[0, 3600], got -3");
    expect_error("combat", "{\"power\": 100, \"abilities\": [{\"coefficient\": 1, \"gcd\": false}]}", "'abilities[0].cooldown'", "at least 0.1");
    expect_error("combat", "{\"power\": 100, \"crit\": 20000, \"abilities\": [{\"coefficient\": 1}]}", "'crit'", "[0, 17000]");
    expect_error("combat", "{\"power\": 100, \"proc_resets\": \"x\", \"abilities\": [{\"coefficient\": 1}]}", "'proc_resets'", "names no ability");
    expect_error("option", "[1, 2]", "msgpack map", "");
    expect_error("option", "{\"S0\": 100,", "JSON", "offset");
}

Test(sim_params, unknown_kernel_and_absurd_ranges)
{
    sim_job *job = NULL;
    char err[256];
    cr_assert_eq(job_from_json(&job, "poker", "{}", 1, err, sizeof err), SIM_ENOKERNEL);
    cr_assert(strstr(err, "poker") != NULL);
    job = must_job("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1}", 1);
    sim_stats st[1];
    cr_assert_eq(sim_run_cpu(job, 0, SIM_MAX_ITEMS + 1, st), SIM_ERANGE);
    cr_assert_eq(sim_run_cpu(job, SIM_ITEM_END - 2, 5, st), SIM_ERANGE);
    cr_assert_eq(sim_run_cpu(job, UINT64_MAX, 1, st), SIM_ERANGE);
    cr_assert_eq(sim_run_cpu(job, 10, 0, st), 0);
    cr_assert_eq(sim_stats_count(&st[0]), 0);
    cr_assert_str_eq(sf_strerror(SIM_ERANGE), "item range out of bounds");
    sim_job_destroy(job);
}

/* ---- JSON parameters ------------------------------------------------------------ */

static int json_ok(const char *json, msgpack_object_type want)
{
    msgpack_sbuffer b;
    msgpack_unpacked up;
    char err[128];
    int ok = 0;
    msgpack_sbuffer_init(&b);
    msgpack_unpacked_init(&up);
    if (sf_json_to_msgpack(json, strlen(json), &b, err, sizeof err) == 0 &&
        msgpack_unpack_next(&up, b.data, b.size, NULL) == MSGPACK_UNPACK_SUCCESS)
        ok = up.data.type == want;
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&b);
    return ok;
}

/* The description comes from the tables the parsers check against: the
 * ranges it states are the ones a submission meets. */
Test(sim_params, description_is_json_with_the_parsers_ranges)
{
    size_t need = 0;
    cr_assert_eq(sim_kernels_json(NULL, 0, &need), SIM_ENOSPC);
    cr_assert_gt(need, 100);
    char small[64];
    size_t len = 0;
    cr_assert_eq(sim_kernels_json(small, sizeof small, &len), SIM_ENOSPC);
    cr_assert_eq(len, need);
    cr_assert_eq(strlen(small), sizeof small - 1, "truncated text stays terminated");
    char *text = malloc(need + 1);
    cr_assert_not_null(text);
    cr_assert_eq(sim_kernels_json(text, need + 1, &len), 0);
    cr_assert_eq(len, need);
    cr_assert_eq(strlen(text), need);
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    char err[160];
    cr_assert_eq(sf_json_to_msgpack(text, len, &b, err, sizeof err), 0, "not JSON: %s", err);
    msgpack_sbuffer_destroy(&b);
    cr_assert(strstr(text, "{\"name\":\"sigma\",\"type\":\"number\",\"required\":true,\"min\":0,"
                           "\"min_exclusive\":true,\"max\":5,") != NULL, "%s", text);
    cr_assert(strstr(text, "\"name\":\"steps\",\"type\":\"integer\",\"required\":false,\"min\":1,"
                           "\"min_exclusive\":false,\"max\":100000,\"default\":1,") != NULL);
    cr_assert(strstr(text, "\"when\":{\"field\":\"style\",\"equals\":\"barrier\"}") != NULL);
    cr_assert(strstr(text, "\"name\":\"abilities\",\"type\":\"list\",\"required\":true,\"min_items\":1,"
                           "\"max_items\":8,\"fields\":[{\"name\":\"name\"") != NULL);
    free(text);
    expect_error("option", "{\"S0\": 100, \"K\": 100, \"sigma\": 0.2, \"T\": 1, \"steps\": 100001}", "'steps'",
        "[1, 100000], got 100001");
    expect_error("combat", "{\"power\": 1, \"abilities\": []}", "'abilities'", "1 to 8");
}

Test(sim_json, values_and_errors)
{
    cr_assert(json_ok(" { \"a\" : [1, -2, 3.5e2, true, false, null, \"x\\n\\u0041\"], \"b\": {} } ", MSGPACK_OBJECT_MAP));
    cr_assert(json_ok("[]", MSGPACK_OBJECT_ARRAY));
    cr_assert(json_ok("18446744073709551615", MSGPACK_OBJECT_POSITIVE_INTEGER));
    cr_assert(json_ok("-9223372036854775808", MSGPACK_OBJECT_NEGATIVE_INTEGER));
    cr_assert(json_ok("1e308", MSGPACK_OBJECT_FLOAT64));
    const char *bad[] = { "", "{", "{\"a\" 1}", "[1,]", "[1 2]", "{\"a\":1,}", "\"abc", "tru", "1e999",
        "{\"a\":1} x", "\"\\q\"", "\"\\u0000\"", "--1", "{1: 2}" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msgpack_sbuffer b;
        char err[128] = "";
        msgpack_sbuffer_init(&b);
        cr_assert_eq(sf_json_to_msgpack(bad[i], strlen(bad[i]), &b, err, sizeof err), SF_EJSON, "'%s' accepted", bad[i]);
        cr_assert(strstr(err, "JSON") != NULL, "'%s': %s", bad[i], err);
        msgpack_sbuffer_destroy(&b);
    }
    /* nesting is bounded */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    cr_assert_eq(sf_json_to_msgpack(deep, sizeof deep, &b, NULL, 0), SF_EJSON);
    msgpack_sbuffer_destroy(&b);
}
