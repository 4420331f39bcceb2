/*
 * test_verify.c — spot-checks, credibility, quarantine and retraction in
 * the claim ledger, with farms of honest and dishonest nodes
 * (tests/support/farmsim.h). In every case the job's result must be the
 * same bits as an honest sequential run, every saboteur quarantined and no
 * honest node.
 */
#include "sched/sched.h"
#include "tests/support/farmsim.h"

#include <criterion/criterion.h>
#include <string.h>

static const sc_verify_config verify_on = { .on = true };

/* Honest nodes of four owners: two community, two public. */
static void add_honest(fs_farm *f)
{
    fs_add(f, (fs_node){ .id = 1, .owner = 101, .addr = 1001, .tier = SC_TIER_COMMUNITY });
    fs_add(f, (fs_node){ .id = 2, .owner = 102, .addr = 1002, .tier = SC_TIER_COMMUNITY, .items_per_s = 1500 });
    fs_add(f, (fs_node){ .id = 3, .owner = 0, .addr = 1003, .tier = SC_TIER_PUBLIC, .items_per_s = 700 });
    fs_add(f, (fs_node){ .id = 4, .owner = 0, .addr = 1004, .tier = SC_TIER_PUBLIC });
}

static void assert_honest_kept(const fs_farm *f)
{
    for (size_t i = 0; i < f->nnodes; i++)
        if (f->nodes[i].kind == FS_HONEST)
            cr_assert(!f->nodes[i].quarantined, "honest node %llu quarantined",
                (unsigned long long)f->nodes[i].id);
}

Test(verify, honest_farms_are_never_quarantined_and_results_are_exact)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        fs_farm f;
        fs_init(&f, &verify_on, seed);
        add_honest(&f);
        sc_job_spec s = fs_single(1, 60000 + seed * 1000);
        cr_assert_eq(fs_run(&f, &s, 10000), SC_JOB_COMPLETE, "seed %llu", (unsigned long long)seed);
        cr_assert(fs_exact(&f, 1), "seed %llu", (unsigned long long)seed);
        sc_job_status st;
        sc_job_status_get(f.l, 1, &st);
        cr_assert_gt(st.checks_passed, 0, "a new node's results are checked");
        cr_assert_eq(st.checks_failed, 0);
        cr_assert_eq(st.checks_waiting, 0, "complete only once every check is decided");
        cr_assert_eq(st.quarantined, 0);
        assert_honest_kept(&f);
        fs_free(&f);
    }
}

/* One saboteur beside the honest nodes: it must be quarantined and the
 * result exact. A saboteur that cheats on few results of an enrolled node
 * with a record is checked at 1/streak and may escape (the guarantee is a
 * chance, docs/verification.md): with `may_escape`, an escape is allowed
 * when it moved the result by less than one standard error, and counted. */
static bool run_saboteur(fs_node bad, sc_job_spec s, uint64_t seed, bool may_escape)
{
    fs_farm f;
    fs_init(&f, &verify_on, seed);
    add_honest(&f);
    fs_add(&f, bad);
    sc_job_state st = fs_run(&f, &s, 20000);
    cr_assert_eq(st, SC_JOB_COMPLETE, "kind %d seed %llu: state %d", bad.kind, (unsigned long long)seed, st);
    assert_honest_kept(&f);
    fs_node got = f.nodes[f.nnodes - 1];
    cr_assert_gt(got.bad_sent, 0, "kind %d never cheated: the case checks nothing", bad.kind);
    bool caught = got.quarantined;
    if (caught || !may_escape) {
        cr_assert(caught, "kind %d tier %d seed %llu: not quarantined after %llu bad results", bad.kind, bad.tier,
            (unsigned long long)seed, (unsigned long long)got.bad_sent);
        cr_assert(fs_exact(&f, s.id), "kind %d seed %llu: the result is not an honest run's", bad.kind,
            (unsigned long long)seed);
    } else {
        cr_assert_lt(fs_moved_by(&f, s.id), 1.0, "an escape moved the result by a standard error or more");
    }
    fs_free(&f);
    return caught;
}

Test(verify, every_kind_of_saboteur_is_caught_and_its_results_undone)
{
    const fs_node kinds[] = {
        { .kind = FS_BIAS, .delta = 0.01 },
        { .kind = FS_BIAS_SOME, .delta = 0.01, .every = 50 },
        { .kind = FS_ZEROS },
        { .kind = FS_FABRICATE },
        { .kind = FS_TURNCOAT, .delta = 0.01, .after = 30 },
    };
    const uint8_t tiers[] = { SC_TIER_PUBLIC, SC_TIER_COMMUNITY };
    unsigned escaped = 0, sparse = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (size_t t = 0; t < 2; t++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                fs_node bad = kinds[k];
                bad.id = 9;
                bad.owner = tiers[t] == SC_TIER_PUBLIC ? 0 : 109;
                bad.addr = 1009;
                bad.tier = tiers[t];
                bad.items_per_s = 2000; /* it claims to be fast: it gets big chunks */
                bool may_escape = bad.kind == FS_BIAS_SOME && bad.tier != SC_TIER_PUBLIC;
                bool caught = run_saboteur(bad, fs_single(1, 400000), seed, may_escape);
                sparse += may_escape;
                escaped += may_escape && !caught;
            }
    cr_log_info("an enrolled node cheating on 1 result in 50 escaped %u of %u runs", escaped, sparse);
}

Test(verify, saboteurs_in_stat_weights_and_tournaments)
{
    fs_node bad = { .id = 9, .owner = 109, .addr = 1009, .tier = SC_TIER_COMMUNITY, .kind = FS_BIAS, .delta = 0.01 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        run_saboteur(bad, fs_stat_weights(1, 200000, 3), seed, false);
        run_saboteur(bad, fs_tournament(1, 64000, 3), seed, false);
    }
}

Test(verify, two_keys_of_one_owner_never_check_each_other)
{
    for (uint64_t seed = 1; seed <= 5; seed++) {
        fs_farm f;
        fs_init(&f, &verify_on, seed);
        add_honest(&f);
        /* they send the same invented bytes: were one to check the other,
         * the check would pass */
        fs_add(&f, (fs_node){ .id = 9, .owner = 109, .addr = 1009, .tier = SC_TIER_COMMUNITY, .kind = FS_FABRICATE });
        fs_add(&f, (fs_node){ .id = 10, .owner = 109, .addr = 1010, .tier = SC_TIER_COMMUNITY, .kind = FS_FABRICATE });
        sc_job_spec s = fs_single(1, 300000);
        cr_assert_eq(fs_run(&f, &s, 20000), SC_JOB_COMPLETE);
        cr_assert(fs_exact(&f, 1));
        cr_assert(f.nodes[4].quarantined && f.nodes[5].quarantined, "seed %llu", (unsigned long long)seed);
        assert_honest_kept(&f);
        fs_free(&f);
    }
}

Test(verify, a_saboteur_caught_after_twenty_accepted_chunks_is_retracted_to_the_bit)
{
    fs_farm f;
    /* an enrolled node with a record: checked at 1/streak, so it gets
     * results in before it is caught */
    fs_init(&f, &verify_on, 3);
    add_honest(&f);
    fs_node bad = { .id = 9, .owner = 109, .addr = 1009, .tier = SC_TIER_COMMUNITY, .kind = FS_TURNCOAT,
        .delta = 0.25, .after = 20, .items_per_s = 1000 };
    fs_add(&f, bad);
    sc_job_spec s = fs_single(1, 600000);
    cr_assert_eq(fs_run(&f, &s, 50000), SC_JOB_COMPLETE);
    cr_assert(fs_exact(&f, 1));
    const fs_node *got = &f.nodes[4];
    cr_assert(got->quarantined);
    sc_job_status st;
    sc_job_status_get(f.l, 1, &st);
    cr_assert_geq(st.retracted_items, 20 * 100, "its accepted results were taken out: %llu items",
        (unsigned long long)st.retracted_items);
    cr_assert_eq(st.quarantined, 1);
    cr_assert_eq(st.quarantined_ids[0], 9);
    cr_assert_gt(f.restores, 0);
    fs_free(&f);
}

/* Restores every job of farm f on a new ledger from the journal, as a
 * restarted coordinator does. */
static sc_ledger *restart(fs_farm *f)
{
    sc_config cfg = { .target_chunk_ms = 1000, .min_chunk = 100, .min_lease_ms = 1000, .verify = verify_on };
    sc_ledger *l = sc_ledger_create(&cfg);
    for (size_t k = 0; k < f->njobs; k++) {
        sc_record *mine = malloc((f->nrecs + 1) * sizeof *mine);
        size_t n = 0;
        for (size_t i = 0; i < f->nrecs; i++)
            if (f->recs[i].job == f->jobs[k].spec.id)
                mine[n++] = f->recs[i];
        cr_assert_eq(sc_job_restore(l, &f->jobs[k].spec, mine, n), 0);
        free(mine);
    }
    return l;
}

Test(verify, a_restart_keeps_every_check_and_every_quarantine)
{
    fs_farm f;
    fs_init(&f, &verify_on, 11);
    /* nodes of one owner cannot check each other: their checks wait */
    fs_add(&f, (fs_node){ .id = 1, .owner = 101, .addr = 1001, .tier = SC_TIER_COMMUNITY });
    fs_add(&f, (fs_node){ .id = 2, .owner = 101, .addr = 1002, .tier = SC_TIER_COMMUNITY });
    fs_add(&f, (fs_node){ .id = 9, .owner = 101, .addr = 1009, .tier = SC_TIER_COMMUNITY, .kind = FS_ZEROS });
    sc_job_spec s = fs_single(1, 2000000);
    sc_job_state state = fs_run(&f, &s, 40);
    cr_assert_eq(state, SC_JOB_RUNNING);
    /* no other owner to check it: quarantined by the operator, mid-run */
    cr_assert_eq(sc_node_quarantine(f.l, 9, f.now, true), 0);
    cr_assert(sc_job_tainted(f.l, 1));
    sc_job_status before, after;
    sc_job_status_get(f.l, 1, &before);
    cr_assert_gt(before.checks_waiting, 0, "no check was waiting: the case checks nothing");
    sc_ledger *l = restart(&f);
    sc_job_status_get(l, 1, &after);
    cr_assert_eq(after.checks_waiting, before.checks_waiting);
    cr_assert_eq(after.verified_items, before.verified_items);
    cr_assert_gt(after.retracted_items, 0);
    cr_assert_eq(after.done_items + after.retracted_items, before.done_items);
    cr_assert_eq(after.quarantined, 1);
    sc_node_trust t;
    cr_assert_eq(sc_node_trust_get(l, 9, &t), 0);
    cr_assert(t.quarantined, "the quarantine is in the journal");
    sc_node_info n9 = { .id = 9, .tier = SC_TIER_COMMUNITY, .backends = 1, .mem_bytes = UINT64_MAX, .owner = 109 };
    sc_claim_out c;
    unsigned n;
    sc_claim(l, &n9, 1, 0, &c, &n);
    cr_assert_eq(n, 0, "a quarantined node gets no work");
    sc_ledger_destroy(l);
    fs_free(&f);
}

Test(verify, trusted_tiers_are_not_checked_and_a_rate_floor_is_kept)
{
    fs_farm f;
    fs_init(&f, &verify_on, 5);
    fs_add(&f, (fs_node){ .id = 1, .owner = 101, .tier = SC_TIER_OWN });
    fs_add(&f, (fs_node){ .id = 2, .owner = 102, .tier = SC_TIER_OWN });
    sc_job_spec s = fs_single(1, 100000);
    s.trusted_tiers = SC_TIER_OWN;
    cr_assert_eq(fs_run(&f, &s, 10000), SC_JOB_COMPLETE);
    sc_job_status st;
    sc_job_status_get(f.l, 1, &st);
    cr_assert_eq(st.trusted_items, 100000);
    cr_assert_eq(st.checks_passed, 0);
    cr_assert_eq(f.check_items, 0);
    fs_free(&f);
    /* with the farm's policy off, a job's own floor still holds */
    fs_init(&f, &(sc_verify_config){ .on = false }, 5);
    fs_add(&f, (fs_node){ .id = 1, .owner = 101, .tier = SC_TIER_OWN });
    fs_add(&f, (fs_node){ .id = 2, .owner = 102, .tier = SC_TIER_OWN });
    sc_job_spec s2 = fs_single(2, 100000);
    s2.check_rate = 1;
    cr_assert_eq(fs_run(&f, &s2, 10000), SC_JOB_COMPLETE);
    sc_job_status_get(f.l, 2, &st);
    cr_assert_eq(st.verified_items, 100000, "every result checked, at the job's floor");
    fs_free(&f);
}

Test(verify, malformed_results_quarantine_a_node)
{
    fs_farm f;
    fs_init(&f, &(sc_verify_config){ .on = true, .malformed_limit = 3 }, 5);
    sc_job_spec s = fs_single(1, 100000);
    cr_assert_eq(sc_job_add(f.l, &s), 0);
    sc_node_info n = { .id = 5, .tier = SC_TIER_COMMUNITY, .backends = 1, .mem_bytes = UINT64_MAX };
    sc_claim_out c;
    unsigned got;
    sc_claim(f.l, &n, 1, 0, &c, &got);
    cr_assert_eq(got, 1);
    sc_outcome out;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(sc_complete(f.l, 1, c.chunk, c.token, 5, "junk", 4, 0, &out, NULL, NULL), SC_EBADRESULT);
    sc_node_trust t;
    cr_assert_eq(sc_node_trust_get(f.l, 5, &t), 0);
    cr_assert_eq(t.malformed, 3);
    cr_assert(t.quarantined);
    sc_claim(f.l, &n, 1, 0, &c, &got);
    cr_assert_eq(got, 0);
    fs_free(&f);
}

Test(verify, a_claim_is_held_no_longer_than_the_hold_limit)
{
    sc_config cfg = { .min_lease_ms = 1000, .max_hold_ms = 5000 };
    sc_ledger *l = sc_ledger_create(&cfg);
    sc_job_spec s = fs_single(1, 100000);
    cr_assert_eq(sc_job_add(l, &s), 0);
    sc_node_info n = { .id = 5, .tier = SC_TIER_OWN, .backends = 1, .mem_bytes = UINT64_MAX };
    sc_claim_out c;
    unsigned got;
    sc_claim(l, &n, 1, 0, &c, &got);
    cr_assert_eq(got, 1);
    uint64_t now = 0;
    size_t expired = 0;
    for (; now <= 20000 && expired == 0; now += 500) {
        sc_renew(l, 5, (const uint8_t (*)[16])c.token, 1, now); /* a heartbeat listing it, forever */
        expired = sc_reclaim(l, now);
    }
    cr_assert_eq(expired, 1, "renewed forever, it must still run out");
    cr_assert_leq(now, 5000 + 1000, "ran out at %llu ms", (unsigned long long)now);
    sc_claim(l, &n, 1, now, &c, &got);
    cr_assert(got == 0 || c.first != 0, "the range it held is not handed back to it");
    sc_ledger_destroy(l);
}

Test(verify, a_lone_node_that_gives_back_everything_cannot_fail_a_job)
{
    sc_ledger *l = sc_ledger_create(NULL);
    sc_job_spec s = fs_single(1, 10000);
    cr_assert_eq(sc_job_add(l, &s), 0);
    sc_node_info n = { .id = 5, .tier = SC_TIER_OWN, .backends = 1, .mem_bytes = UINT64_MAX, .items_per_s = 1000 };
    for (int k = 0; k < 100; k++) {
        sc_claim_out c;
        unsigned got;
        sc_claim(l, &n, 1, (uint64_t)k, &c, &got);
        if (got == 0)
            break;
        cr_assert_eq(sc_give_back(l, 5, (const uint8_t (*)[16])c.token, 1, (uint64_t)k), 1);
    }
    sc_job_status st;
    sc_job_status_get(l, 1, &st);
    cr_assert_eq(st.state, SC_JOB_RUNNING, "one node cannot fail a job");
    cr_assert_eq(st.failed_items, 0);
    cr_assert_eq(st.pending_items, 10000, "every range waits for another node");
    sc_ledger_destroy(l);
}

Test(verify, a_check_no_node_can_take_is_given_up_and_counted)
{
    fs_farm f;
    fs_init(&f, &(sc_verify_config){ .on = true, .check_wait_ms = 2000 }, 5);
    /* one owner: no node may check another's results */
    fs_add(&f, (fs_node){ .id = 1, .owner = 101, .tier = SC_TIER_COMMUNITY });
    fs_add(&f, (fs_node){ .id = 2, .owner = 101, .tier = SC_TIER_COMMUNITY });
    sc_job_spec s = fs_single(1, 20000);
    cr_assert_eq(fs_run(&f, &s, 10000), SC_JOB_COMPLETE, "a job does not wait for ever for a checker");
    sc_job_status st;
    sc_job_status_get(f.l, 1, &st);
    cr_assert_gt(st.checks_abandoned, 0);
    cr_assert_eq(st.checks_passed, 0);
    cr_assert_eq(st.checks_waiting, 0);
    cr_assert(fs_exact(&f, 1));
    cr_assert_geq(f.now, 2000, "given up only after check_wait_ms");
    fs_free(&f);
}
