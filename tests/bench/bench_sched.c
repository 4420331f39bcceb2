/*
 * bench_sched.c — the claim ledger's hot loop and its sweep, one thread.
 *
 *   sched_claim_complete  claim + complete pairs/s: JOBS jobs, NODES nodes,
 *                         each completion a real encoded result (decoded,
 *                         checked and merged)
 *   sched_reclaim_ns      ns per expired claim of one sweep, with 100k and
 *                         1M claims in flight and 1% of them expired: the
 *                         two figures should match (cost follows what
 *                         expired, not what is in flight)
 *   sched_reclaim_visits  claims the sweep looked at per claim expired (the
 *                         algorithm's cost, free of cache effects)
 *   sched_claim_bytes     ledger memory per claim in flight (1M claims)
 */
#include "sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { JOBS = 100, NODES = 10000, PAIRS = 2000000, CHUNK = 1000 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static sim_layout layout;

static size_t make_result(unsigned char *buf, size_t cap)
{
    sim_stats s;
    size_t len = 0;
    sim_stats_init(&s, &layout);
    for (int i = 0; i < CHUNK; i++)
        sim_stats_add(&s, (double)(i % 97));
    if (sc_result_encode(&s, 1, buf, cap, &len) != 0)
        exit(1);
    return len;
}

static sc_ledger *ledger_with_jobs(int jobs, uint64_t items)
{
    sc_config cfg = { .target_chunk_ms = 1000, .min_chunk = CHUNK, .max_chunk = CHUNK, .min_lease_ms = 60000, .seed = 42 };
    sc_ledger *l = sc_ledger_create(&cfg);
    for (int j = 0; j < jobs; j++) {
        sc_job_spec s = { .id = (uint64_t)j + 1, .strategy = SC_SINGLE, .items = items, .owner = (uint64_t)j % 7,
            .nout = 1, .layouts = &layout };
        if (sc_job_add(l, &s) != 0)
            exit(1);
    }
    return l;
}

static void claim_complete(void)
{
    unsigned char result[1024];
    size_t len = make_result(result, sizeof result);
    sc_ledger *l = ledger_with_jobs(JOBS, 1ull << 50);
    sc_node_info nodes[64];
    for (int i = 0; i < 64; i++)
        nodes[i] = (sc_node_info){ .tier = SC_TIER_PUBLIC, .items_per_s = CHUNK };
    double t0 = now();
    for (int i = 0; i < PAIRS; i++) {
        sc_node_info *n = &nodes[i & 63];
        n->id = (uint64_t)(i % NODES) + 1;
        sc_claim_out c;
        unsigned got = 0;
        sc_outcome out;
        sc_claim(l, n, 1, 1000, &c, &got);
        if (got != 1 || sc_complete(l, c.job, c.chunk, c.token, n->id, result, len, 1000, &out, NULL, NULL) != 0 ||
            out != SC_ACCEPTED) {
            fprintf(stderr, "bench_sched: pair %d failed\n", i);
            exit(1);
        }
    }
    double t = now() - t0;
    printf("BENCH sched_claim_complete %.0f pairs/s\n", PAIRS / t);
    sc_ledger_destroy(l);
}

/* Puts `inflight` claims in flight, 1% of them with an early lease, then
 * times the sweep that expires exactly those; *visits is the claims the
 * sweep looked at per claim expired. */
static double reclaim_ns(unsigned inflight, double *visits, size_t *bytes_per_claim)
{
    sc_config cfg = { .min_chunk = 1, .max_chunk = 1, .min_lease_ms = 60000, .seed = 7 };
    sc_ledger *l = sc_ledger_create(&cfg);
    sc_job_spec s = { .id = 1, .strategy = SC_SINGLE, .items = 1ull << 40, .nout = 1, .layouts = &layout };
    sc_job_add(l, &s);
    sc_node_info n = { .id = 1, .tier = SC_TIER_PUBLIC };
    unsigned early = inflight / 100;
    sc_claim_out c;
    unsigned got;
    /* The early ones are claimed at t=40.5 s (due at 100.5 s), the rest at
     * t=100 s (due at 160 s). */
    for (unsigned i = 0; i < early; i++)
        sc_claim(l, &n, 1, 40500, &c, &got);
    for (unsigned i = early; i < inflight; i++)
        sc_claim(l, &n, 1, 100000, &c, &got);
    sc_reclaim(l, 100000 - 1000); /* sweep up to just before: nothing expires yet */
    sc_ledger_stats before, after;
    sc_ledger_stats_get(l, &before);
    double t0 = now();
    size_t expired = sc_reclaim(l, 100000 + 1000);
    double t = now() - t0;
    if (expired != early) {
        fprintf(stderr, "bench_sched: expired %zu, expected %u\n", expired, early);
        exit(1);
    }
    sc_ledger_stats_get(l, &after);
    *visits = (double)(after.swept - before.swept) / (double)expired;
    if (bytes_per_claim != NULL)
        *bytes_per_claim = (size_t)(before.claim_bytes / inflight);
    sc_ledger_destroy(l);
    return t * 1e9 / (double)expired;
}

int main(void)
{
    if (sim_layout_make(&layout, 1e6, 0, 100) != 0)
        return 1;
    claim_complete();
    size_t bytes = 0;
    double vsmall, vlarge;
    double small = reclaim_ns(100000, &vsmall, NULL);
    double large = reclaim_ns(1000000, &vlarge, &bytes);
    printf("BENCH sched_reclaim_ns_100k %.0f ns/expired\n", small);
    printf("BENCH sched_reclaim_ns_1m %.0f ns/expired\n", large);
    printf("BENCH sched_reclaim_visits_100k %.2f claims/expired\n", vsmall);
    printf("BENCH sched_reclaim_visits_1m %.2f claims/expired\n", vlarge);
    printf("BENCH sched_claim_bytes %zu bytes\n", bytes);
    return 0;
}
