/*
 * saboteur.c — the native node (node-native/) turned dishonest, as an
 * attacker would: it computes like `simfarm node --backend cpu` and then
 * changes its results before it signs them, as SIMFARM_SABOTAGE says:
 *
 *   bias:D          adds D to every value of every result
 *   every:K:D       ... of one result in K
 *   turncoat:N:D    honest for its first N results, then adds D
 *   zeros           every value 0
 *   fabricate       every value 15 (what it sends does not depend on the work)
 *
 *   saboteur --server URL --claim-token T --key PATH
 *
 * Linked with -Wl,--wrap=nd_compute: the node host's call of nd_compute
 * reaches __wrap_nd_compute below, which calls the real one.
 */
#include "actors/node/node.h"
#include "node-native/node.h"
#include "sched/sched.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __real_nd_compute(const sim_work *job, const nd_chunk *c, nd_runner run, nd_stop halt, void *ctx,
    uint8_t **data, size_t *len);
int __wrap_nd_compute(const sim_work *job, const nd_chunk *c, nd_runner run, nd_stop halt, void *ctx,
    uint8_t **data, size_t *len);

typedef enum { BIAS, EVERY, TURNCOAT, ZEROS, FABRICATE } mode;

static mode how;
static double delta;
static unsigned long every_n;
static atomic_ulong results;

/* A statistic of `count` values all equal to x, in s's layout. */
static void constant(sim_stats *s, uint64_t count, double x)
{
    sim_layout layout = s->layout;
    sim_stats_init(s, &layout);
    for (uint64_t i = 0; i < count; i++)
        sim_stats_add(s, x);
}

/* Adds d to every value s holds: its sum, min and max move by d's fixed
 * point once per value. */
static void shift(sim_stats *s, double d)
{
    sim_i64 q = (sim_i64)(d * s->layout.scale);
    for (uint64_t i = 0; i < s->acc.count; i++)
        sim_add192(s->acc.sum, q);
    s->acc.min += q;
    s->acc.max += q;
}

static bool cheats(unsigned long n)
{
    switch (how) {
    case EVERY:
        return n % every_n == every_n - 1;
    case TURNCOAT:
        return n >= every_n;
    default:
        return true;
    }
}

int __wrap_nd_compute(const sim_work *job, const nd_chunk *c, nd_runner run, nd_stop halt, void *ctx,
    uint8_t **data, size_t *len)
{
    int rc = __real_nd_compute(job, c, run, halt, ctx, data, len);
    if (rc != 0 || !cheats(atomic_fetch_add(&results, 1)))
        return rc;
    sim_stats s[256];
    uint32_t n = 0;
    const uint8_t *p = *data;
    for (size_t off = 0; off + 4 <= *len && n < 256; n++) {
        size_t k = (size_t)p[off] | (size_t)p[off + 1] << 8 | (size_t)p[off + 2] << 16 | (size_t)p[off + 3] << 24;
        if (sim_stats_decode(&s[n], p + off + 4, k) != 0)
            return rc;
        off += 4 + k;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (how == ZEROS || how == FABRICATE)
            constant(&s[i], sim_stats_count(&s[i]), how == ZEROS ? 0 : 15);
        else
            shift(&s[i], delta);
    }
    size_t cap = (size_t)n * (SIM_STATS_MAX_ENCODED + 4);
    uint8_t *out = malloc(cap);
    if (out == NULL || sc_result_encode(s, n, out, cap, len) != 0)
        abort();
    free(*data);
    *data = out;
    return rc;
}

static void usage(void)
{
    fprintf(stderr, "usage: SIMFARM_SABOTAGE=bias:D|every:K:D|turncoat:N:D|zeros|fabricate "
                    "saboteur --server URL [--claim-token T] [--key PATH]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *mode_s = getenv("SIMFARM_SABOTAGE");
    if (mode_s == NULL)
        usage();
    if (sscanf(mode_s, "bias:%lf", &delta) == 1)
        how = BIAS;
    else if (sscanf(mode_s, "every:%lu:%lf", &every_n, &delta) == 2 && every_n > 0)
        how = EVERY;
    else if (sscanf(mode_s, "turncoat:%lu:%lf", &every_n, &delta) == 2)
        how = TURNCOAT;
    else if (strcmp(mode_s, "zeros") == 0)
        how = ZEROS;
    else if (strcmp(mode_s, "fabricate") == 0)
        how = FABRICATE;
    else
        usage();
    nd_opts o = { .cores = 1, .backend = "cpu" };
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--server") == 0)
            o.url = argv[i + 1];
        else if (strcmp(argv[i], "--claim-token") == 0)
            o.claim_token = argv[i + 1];
        else if (strcmp(argv[i], "--key") == 0)
            o.key_path = argv[i + 1];
        else
            usage();
    }
    if (o.url == NULL)
        usage();
    return nd_run(&o);
}
