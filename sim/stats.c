/*
 * stats.c — sim_stats: fixed-point statistics that merge by integer
 * addition, so their bytes do not depend on the order items were added in,
 * and their canonical msgpack encoding.
 */
#include <math.h>
#include <msgpack.h>
#include <string.h>

#include "sim/sim_int.h"

#define STATS_VERSION 1
/* 2^-1000 and 2^1000 are normal doubles: every scale stays exact */
#define FRAC_BITS_MIN (-1000)
#define FRAC_BITS_MAX 1000

/* Sets *out to the layout for (frac_bits, sq_frac_bits, lo, hi); every
 * field follows from those four, so an encoding carries only them. */
static int layout_from(sim_layout *out, int64_t fb, int64_t sqfb, double lo, double hi)
{
    if (fb < FRAC_BITS_MIN || fb > FRAC_BITS_MAX || sqfb < FRAC_BITS_MIN || sqfb > FRAC_BITS_MAX)
        return SIM_EINVAL;
    if (!isfinite(lo) || !isfinite(hi) || !(lo < hi) || !isfinite(hi - lo))
        return SIM_EINVAL;
    memset(out, 0, sizeof *out);
    out->frac_bits = fb;
    out->sq_frac_bits = sqfb;
    out->scale = ldexp(1.0, (int)fb); /* exact: a power of two */
    out->sq_scale = ldexp(1.0, (int)sqfb);
    out->hist_lo = lo;
    out->hist_hi = hi;
    out->hist_inv_width = (double)SIM_HIST_BINS / (hi - lo);
    return 0;
}

int sim_layout_make(sim_layout *out, double bound, double hist_lo, double hist_hi)
{
    int e;
    if (!(bound > 0.0) || !isfinite(bound))
        return SIM_EINVAL;
    /* bound <= 2^e; values up to 2^e then need 55 bits after scaling,
     * squares 2e: both stay under the 2^56 clamp. frexp is exact. */
    (void)frexp(bound, &e);
    return layout_from(out, 55 - e, 55 - 2 * e, hist_lo, hist_hi);
}

void sim_stats_init(sim_stats *s, const sim_layout *layout)
{
    memset(s, 0, sizeof *s);
    s->layout = *layout;
    sim_acc_zero(&s->acc);
}

void sim_stats_add(sim_stats *s, double x)
{
    sim_acc_add(&s->acc, &s->layout, x);
}

static bool layout_equal(const sim_layout *a, const sim_layout *b)
{
    return a->frac_bits == b->frac_bits && a->sq_frac_bits == b->sq_frac_bits &&
        memcmp(&a->hist_lo, &b->hist_lo, sizeof a->hist_lo) == 0 &&
        memcmp(&a->hist_hi, &b->hist_hi, sizeof a->hist_hi) == 0;
}

int sim_stats_merge(sim_stats *dst, const sim_stats *src)
{
    if (!layout_equal(&dst->layout, &src->layout))
        return SIM_ELAYOUT;
    sim_acc_merge(&dst->acc, &src->acc);
    return 0;
}

bool sim_stats_equal(const sim_stats *a, const sim_stats *b)
{
    return layout_equal(&a->layout, &b->layout) && memcmp(&a->acc, &b->acc, sizeof a->acc) == 0;
}

uint64_t sim_stats_count(const sim_stats *s)
{
    return s->acc.count;
}

uint64_t sim_stats_saturated(const sim_stats *s)
{
    return s->acc.saturated;
}

/* A 192-bit two's complement integer as a double: the magnitude's three
 * words are converted and summed in a fixed order, the same on every
 * platform. */
static double i192_to_double(const uint64_t *w)
{
    uint64_t m[3] = { w[0], w[1], w[2] };
    bool neg = (int64_t)w[2] < 0;
    if (neg) { /* negate: invert and add one */
        m[0] = ~m[0] + 1;
        m[1] = ~m[1] + (m[0] == 0);
        m[2] = ~m[2] + (m[0] == 0 && m[1] == 0);
    }
    double v = (double)m[2] * 0x1p128 + (double)m[1] * 0x1p64 + (double)m[0];
    return neg ? -v : v;
}

double sim_stats_mean(const sim_stats *s)
{
    if (s->acc.count == 0)
        return NAN;
    return i192_to_double(s->acc.sum) / s->layout.scale / (double)s->acc.count;
}

double sim_stats_variance(const sim_stats *s)
{
    if (s->acc.count < 2)
        return NAN;
    double n = (double)s->acc.count;
    double m = sim_stats_mean(s);
    double q = i192_to_double(s->acc.sumsq) / s->layout.sq_scale;
    double v = (q - n * m * m) / (n - 1.0);
    return v > 0.0 ? v : 0.0;
}

double sim_stats_stderr(const sim_stats *s)
{
    return sqrt(sim_stats_variance(s) / (double)s->acc.count);
}

double sim_stats_min(const sim_stats *s)
{
    return s->acc.count ? (double)s->acc.min / s->layout.scale : NAN;
}

double sim_stats_max(const sim_stats *s)
{
    return s->acc.count ? (double)s->acc.max / s->layout.scale : NAN;
}

uint64_t sim_stats_hist(const sim_stats *s, int slot)
{
    return slot >= 0 && slot < SIM_HIST_BINS + 2 ? s->acc.hist[slot] : 0;
}

/* ---- encoding ------------------------------------------------------------ */

struct fixbuf {
    char *p;
    size_t cap, len;
    bool overflow;
};

static int fixbuf_write(void *data, const char *buf, size_t len)
{
    struct fixbuf *b = data;
    if (len > b->cap - b->len) {
        b->overflow = true;
        return -1;
    }
    memcpy(b->p + b->len, buf, len);
    b->len += len;
    return 0;
}

static void pack_words(msgpack_packer *pk, const uint64_t *w, int n)
{
    msgpack_pack_array(pk, (size_t)n);
    for (int i = 0; i < n; i++)
        msgpack_pack_uint64(pk, w[i]);
}

/* [version, frac_bits, sq_frac_bits, hist_lo, hist_hi, count, sum[3],
 *  sumsq[3], min, max, saturated, hist[SIM_HIST_BINS + 2]] */
int sim_stats_encode(const sim_stats *s, void *buf, size_t cap, size_t *len)
{
    struct fixbuf b = { buf, cap, 0, false };
    msgpack_packer pk;
    msgpack_packer_init(&pk, &b, fixbuf_write);
    msgpack_pack_array(&pk, 12);
    msgpack_pack_uint8(&pk, STATS_VERSION);
    msgpack_pack_int64(&pk, s->layout.frac_bits);
    msgpack_pack_int64(&pk, s->layout.sq_frac_bits);
    msgpack_pack_double(&pk, s->layout.hist_lo);
    msgpack_pack_double(&pk, s->layout.hist_hi);
    msgpack_pack_uint64(&pk, s->acc.count);
    pack_words(&pk, s->acc.sum, 3);
    pack_words(&pk, s->acc.sumsq, 3);
    msgpack_pack_int64(&pk, s->acc.min);
    msgpack_pack_int64(&pk, s->acc.max);
    msgpack_pack_uint64(&pk, s->acc.saturated);
    pack_words(&pk, s->acc.hist, SIM_HIST_BINS + 2);
    if (b.overflow)
        return SIM_ENOSPC;
    *len = b.len;
    return 0;
}

/* A bounded reader of the msgpack this encoding uses, allocating nothing:
 * results arrive by the thousand per second and msgpack-c's unpacker would
 * allocate a zone for each. It accepts every valid form of each field, as
 * the encoding rules require of a decoder: any integer width, float32 or
 * float64, any array header. */
typedef struct reader {
    const uint8_t *p, *end;
} reader;

static bool rd_be(reader *r, unsigned n, uint64_t *v)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++)
        x = x << 8 | r->p[i];
    r->p += n;
    *v = x;
    return true;
}

/* Any msgpack integer: *neg tells whether it is negative (then in *i). */
static bool rd_int(reader *r, bool *neg, uint64_t *u, int64_t *i)
{
    if (r->p >= r->end)
        return false;
    uint8_t b = *r->p++;
    uint64_t v;
    *neg = false;
    if (b <= 0x7f) {
        *u = b;
        return true;
    }
    if (b >= 0xe0) {
        *neg = true;
        *i = (int8_t)b;
        return true;
    }
    if (b >= 0xcc && b <= 0xcf) {
        if (!rd_be(r, 1u << (b - 0xcc), u))
            return false;
        return true;
    }
    if (b >= 0xd0 && b <= 0xd3) {
        unsigned n = 1u << (b - 0xd0);
        if (!rd_be(r, n, &v))
            return false;
        int64_t x = n == 8 ? (int64_t)v : (int64_t)(v << (64 - 8 * n)) >> (64 - 8 * n);
        if (x >= 0) {
            *u = (uint64_t)x;
        } else {
            *neg = true;
            *i = x;
        }
        return true;
    }
    return false;
}

static bool rd_u64(reader *r, uint64_t *out)
{
    bool neg;
    int64_t i;
    return rd_int(r, &neg, out, &i) && !neg;
}

static bool rd_i64(reader *r, int64_t *out)
{
    bool neg;
    uint64_t u;
    if (!rd_int(r, &neg, &u, out))
        return false;
    if (neg)
        return true;
    if (u > INT64_MAX)
        return false;
    *out = (int64_t)u;
    return true;
}

static bool rd_f64(reader *r, double *out)
{
    uint64_t v;
    if (r->p >= r->end)
        return false;
    uint8_t b = *r->p++;
    if (b == 0xcb) {
        if (!rd_be(r, 8, &v))
            return false;
        memcpy(out, &v, 8);
        return true;
    }
    if (b == 0xca) {
        float f;
        uint32_t w;
        if (!rd_be(r, 4, &v))
            return false;
        w = (uint32_t)v;
        memcpy(&f, &w, 4);
        *out = f;
        return true;
    }
    return false;
}

static bool rd_array(reader *r, uint32_t want)
{
    uint64_t n;
    if (r->p >= r->end)
        return false;
    uint8_t b = *r->p++;
    if (b >= 0x90 && b <= 0x9f)
        n = b & 0x0f;
    else if (b == 0xdc) {
        if (!rd_be(r, 2, &n))
            return false;
    } else if (b == 0xdd) {
        if (!rd_be(r, 4, &n))
            return false;
    } else {
        return false;
    }
    return n == want;
}

static bool rd_words(reader *r, uint64_t *w, uint32_t n)
{
    if (!rd_array(r, n))
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!rd_u64(r, &w[i]))
            return false;
    return true;
}

int sim_stats_decode(sim_stats *s, const void *buf, size_t len)
{
    sim_stats t;
    uint64_t ver;
    int64_t fb, sqfb;
    double lo, hi;

    if (buf == NULL || len == 0 || len > SIM_STATS_MAX_ENCODED)
        return SIM_EFORMAT;
    reader r = { buf, (const uint8_t *)buf + len };
    memset(&t, 0, sizeof t);
    if (!rd_array(&r, 12) || !rd_u64(&r, &ver) || ver != STATS_VERSION || !rd_i64(&r, &fb) ||
        !rd_i64(&r, &sqfb) || !rd_f64(&r, &lo) || !rd_f64(&r, &hi))
        return SIM_EFORMAT;
    if (layout_from(&t.layout, fb, sqfb, lo, hi) != 0)
        return SIM_EFORMAT;
    if (!rd_u64(&r, &t.acc.count) || !rd_words(&r, t.acc.sum, 3) || !rd_words(&r, t.acc.sumsq, 3) ||
        !rd_i64(&r, &t.acc.min) || !rd_i64(&r, &t.acc.max) || !rd_u64(&r, &t.acc.saturated) ||
        !rd_words(&r, t.acc.hist, SIM_HIST_BINS + 2) || r.p != r.end)
        return SIM_EFORMAT;
    /* Cross-field checks: the histogram counts every value once. */
    uint64_t total = 0;
    for (int i = 0; i < SIM_HIST_BINS + 2; i++) {
        if (t.acc.hist[i] > UINT64_MAX - total)
            return SIM_EFORMAT;
        total += t.acc.hist[i];
    }
    if (total != t.acc.count || t.acc.saturated > t.acc.count)
        return SIM_EFORMAT;
    if (t.acc.count > 0 && t.acc.min > t.acc.max)
        return SIM_EFORMAT;
    *s = t;
    return 0;
}
