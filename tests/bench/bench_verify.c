/*
 * bench_verify.c — what verification costs and what it catches, from the
 * policy run against the real ledger with simulated farms
 * (tests/support/farmsim.h; docs/verification.md):
 *
 *   verify_overhead_community   items computed again for checks per item of
 *                               new work: enrolled nodes of four owners,
 *                               measured on a job after a first one warmed
 *                               them up (target <= 3 %)
 *   verify_overhead_public_*    the same for public nodes (no record
 *                               carries them) in jobs of 10^4 and 10^5
 *                               chunks (target <= 15 %)
 *   verify_detect_chunks_*      bad results a saboteur cheating on 100 %,
 *                               10 % or 2 % of its results gets accepted
 *                               before its quarantine: median and 99th
 *                               percentile over seeded runs, enrolled
 *                               (community) and public
 *   verify_escape_*             the guarantee checked at a bound large
 *                               enough to observe: with escape = 0.05, the
 *                               share of runs in which a saboteur that
 *                               cheats just under the screen moved the
 *                               job's result by one standard error or more
 *                               and was not caught
 */
#include "sched/sched.h"
#include "tests/support/farmsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_nodes(fs_farm *f, int n, uint8_t tier, double speed)
{
    for (int i = 0; i < n; i++)
        fs_add(f, (fs_node){ .id = (uint64_t)i + 1, .owner = tier == SC_TIER_PUBLIC ? 0 : 100 + (uint64_t)i,
            .addr = 1000 + (uint64_t)i, .tier = tier, .items_per_s = speed });
}

static double overhead(uint8_t tier, uint64_t items, double speed, bool warm)
{
    fs_farm f;
    fs_init(&f, &(sc_verify_config){ .on = true }, 42);
    add_nodes(&f, 4, tier, speed);
    if (warm) {
        sc_job_spec w = fs_single(1, items / 4);
        fs_run(&f, &w, 1000000);
        f.work_items = f.check_items = 0;
    }
    sc_job_spec s = fs_single(2, items);
    if (fs_run(&f, &s, 10000000) != SC_JOB_COMPLETE) {
        fprintf(stderr, "bench_verify: the overhead job did not complete\n");
        exit(1);
    }
    double r = (double)f.check_items / (double)f.work_items;
    fs_free(&f);
    return r;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

enum { RUNS = 200 };

/* Bad results accepted before quarantine, over RUNS seeded runs of a
 * saboteur cheating on one result in `every` beside four honest nodes. */
static void detect(uint8_t tier, unsigned every, const char *name)
{
    uint64_t got[RUNS];
    unsigned escaped = 0;
    for (int r = 0; r < RUNS; r++) {
        fs_farm f;
        fs_init(&f, &(sc_verify_config){ .on = true }, 1000 + (uint64_t)r);
        add_nodes(&f, 4, tier, 1000);
        fs_add(&f, (fs_node){ .id = 9, .owner = tier == SC_TIER_PUBLIC ? 0 : 109, .addr = 1009, .tier = tier,
            .kind = FS_BIAS_SOME, .delta = 0.01, .every = every, .items_per_s = 1000 });
        sc_job_spec s = fs_single(1, 1000000);
        fs_run(&f, &s, 10000000);
        got[r] = f.nodes[4].bad_accepted;
        escaped += !f.nodes[4].quarantined;
        fs_free(&f);
    }
    qsort(got, RUNS, sizeof *got, cmp_u64);
    printf("BENCH verify_detect_chunks_%s_median %llu results\n", name, (unsigned long long)got[RUNS / 2]);
    printf("BENCH verify_detect_chunks_%s_p99 %llu results\n", name, (unsigned long long)got[RUNS * 99 / 100]);
    printf("BENCH verify_detect_escaped_%s %u runs/%d\n", name, escaped, RUNS);
}

/* The guarantee at escape = eps: a public saboteur whose cheating chunks
 * sit just under the screen (0.9 x screen_z of their standard error), on
 * one of its results in `every`, among four honest public nodes. */
static void escape(double eps, unsigned every, int runs)
{
    const double sigma = 100 / sqrt(12.0), z = 3, n = 1000;
    unsigned escaped = 0, harmful = 0;
    for (int r = 0; r < runs; r++) {
        fs_farm f;
        fs_init(&f, &(sc_verify_config){ .on = true, .escape = eps, .screen_z = z }, 5000 + (uint64_t)r);
        add_nodes(&f, 4, SC_TIER_PUBLIC, n);
        fs_add(&f, (fs_node){ .id = 9, .owner = 0, .addr = 1009, .tier = SC_TIER_PUBLIC, .kind = FS_BIAS_SOME,
            .delta = 0.9 * z * sigma / sqrt(n), .every = every, .items_per_s = n });
        sc_job_spec s = fs_single(1, 400000);
        fs_run(&f, &s, 10000000);
        if (!f.nodes[4].quarantined) {
            escaped++;
            harmful += fs_moved_by(&f, 1) >= 1;
        }
        fs_free(&f);
    }
    printf("BENCH verify_escape_eps%g_every%u %.4f share (%u of %d runs escaped having moved the result >= 1 SE, "
        "%u escaped in all; bound %g)\n", eps, every, (double)harmful / runs, harmful, runs, escaped, eps);
}

int main(void)
{
    printf("BENCH verify_overhead_community %.2f %%\n", 100 * overhead(SC_TIER_COMMUNITY, 2000000, 1000, true));
    printf("BENCH verify_overhead_public_1e4_chunks %.2f %%\n", 100 * overhead(SC_TIER_PUBLIC, 1000000, 100, false));
    printf("BENCH verify_overhead_public_1e5_chunks %.2f %%\n", 100 * overhead(SC_TIER_PUBLIC, 10000000, 100, false));
    static const struct { unsigned every; const char *name; } cheat[] = { { 1, "100" }, { 10, "10" }, { 50, "2" } };
    for (size_t i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "community_%s", cheat[i].name);
        detect(SC_TIER_COMMUNITY, cheat[i].every, name);
        snprintf(name, sizeof name, "public_%s", cheat[i].name);
        detect(SC_TIER_PUBLIC, cheat[i].every, name);
    }
    escape(0.05, 10, 400);
    escape(0.5, 10, 400);
    return 0;
}
