/*
 * test_records_kept.c — which of a job's journal records count
 * (sc_records_kept): a table of journals with each record's fate and the
 * kept records' order, then random journals restored by sc_job_restore,
 * whose counts and result must be those of the records the rule keeps.
 */
#include "sched/sched.h"
#include "tests/support/xorshift.h"

#include <criterion/criterion.h>
#include <string.h>

/* ---- the table ---- */

enum { MAX_ROWS = 12 };

typedef struct row {
    sc_record_type type;
    uint32_t variant;
    uint64_t first, count, chunk, node;
    char result;         /* ACCEPT: its result, one byte */
    sc_record_fate want;
} row;

#define ACC(v, f, c, ch, nd, res, fate) { SC_REC_ACCEPT, v, f, c, ch, nd, res, fate }
#define FAILED(v, f, c, fate) { SC_REC_CHUNK_FAILED, v, f, c, 0, 0, 0, fate }
#define OF_NODE(type, nd, fate) { type, 0, 0, 0, 0, nd, 0, fate }

typedef struct kept_case {
    const char *name;
    row rows[MAX_ROWS];  /* in journal order, up to the first of type 0 */
    uint64_t outside[2]; /* nodes quarantined as no record here says (0: none) */
    size_t kept[MAX_ROWS]; /* the kept rows, 1-based, in the order given back; 0 ends */
} kept_case;

static const kept_case cases[] = {
    {
        "rows that tile the items are all kept, by first item",
        { ACC(0, 100, 50, 3, 1, 'c', SC_FATE_KEPT), ACC(0, 0, 60, 1, 1, 'a', SC_FATE_KEPT),
            ACC(0, 60, 40, 2, 1, 'b', SC_FATE_KEPT) },
        { 0 },
        { 2, 3, 1 },
    },
    {
        "a row that starts inside one kept before it by first item is skipped, whatever the journal's order",
        { ACC(0, 50, 60, 2, 1, 'b', SC_FATE_SKIPPED), ACC(0, 0, 60, 1, 1, 'a', SC_FATE_KEPT),
            ACC(0, 110, 10, 3, 1, 'c', SC_FATE_KEPT), ACC(0, 115, 1, 4, 1, 'd', SC_FATE_SKIPPED) },
        { 0 },
        { 2, 3 },
    },
    {
        "of rows with one first item the journal's first stands, and what starts inside it is skipped",
        { ACC(0, 0, 50, 1, 1, 'a', SC_FATE_KEPT), ACC(0, 0, 40, 2, 2, 'b', SC_FATE_SKIPPED),
            ACC(0, 40, 10, 3, 1, 'c', SC_FATE_SKIPPED), ACC(0, 50, 10, 4, 2, 'd', SC_FATE_KEPT) },
        { 0 },
        { 1, 4 },
    },
    {
        "a row written twice is a copy; another result or chunk for a range is skipped",
        { ACC(0, 100, 50, 3, 1, 'c', SC_FATE_KEPT), ACC(0, 100, 50, 4, 1, 'd', SC_FATE_SKIPPED),
            ACC(0, 100, 50, 4, 1, 'd', SC_FATE_COPY), ACC(0, 100, 50, 3, 1, 'c', SC_FATE_COPY),
            ACC(0, 100, 50, 5, 1, 'c', SC_FATE_SKIPPED), ACC(0, 100, 49, 3, 1, 'c', SC_FATE_SKIPPED) },
        { 0 },
        { 1 },
    },
    {
        "a quarantined node's accepts count for nothing, named by a record or from outside, and block nothing",
        { ACC(0, 0, 50, 1, 7, 'a', SC_FATE_RETRACTED), ACC(0, 0, 50, 2, 8, 'b', SC_FATE_KEPT),
            ACC(0, 50, 50, 3, 9, 'c', SC_FATE_RETRACTED), OF_NODE(SC_REC_QUARANTINE, 7, SC_FATE_NONE),
            ACC(0, 50, 50, 4, 8, 'd', SC_FATE_KEPT), ACC(0, 100, 10, 5, 0, 'e', SC_FATE_KEPT),
            { SC_REC_RETRACTED, 0, 100, 10, 6, 8, 'f', SC_FATE_RETRACTED },
            FAILED(0, 110, 10, SC_FATE_KEPT) },
        { 9 },
        { 2, 5, 6, 8 },
    },
    {
        "failed chunks are ranges too: they keep others out and are copied",
        { FAILED(0, 0, 10, SC_FATE_KEPT), ACC(0, 5, 15, 1, 1, 'a', SC_FATE_SKIPPED), FAILED(0, 0, 10, SC_FATE_COPY),
            ACC(0, 10, 10, 2, 1, 'b', SC_FATE_KEPT), FAILED(0, 15, 10, SC_FATE_SKIPPED),
            FAILED(0, 20, 5, SC_FATE_KEPT) },
        { 0 },
        { 1, 4, 6 },
    },
    {
        "each variant is a lane of its own",
        { ACC(1, 0, 50, 1, 1, 'a', SC_FATE_KEPT), ACC(0, 0, 50, 2, 1, 'b', SC_FATE_KEPT),
            ACC(1, 25, 50, 3, 1, 'c', SC_FATE_SKIPPED), ACC(0, 50, 50, 4, 1, 'd', SC_FATE_KEPT),
            ACC(2, 25, 10, 5, 1, 'e', SC_FATE_KEPT), FAILED(2, 30, 10, SC_FATE_SKIPPED),
            FAILED(1, 50, 10, SC_FATE_KEPT) },
        { 0 },
        { 2, 4, 1, 7, 5 },
    },
    {
        "records of no range have no fate",
        { { SC_REC_VERIFY, 0, 0, 50, 0, 1, 0, SC_FATE_NONE }, { SC_REC_PHASE, 0, 0, 0, 0, 0, 0, SC_FATE_NONE },
            ACC(0, 0, 50, 1, 1, 'a', SC_FATE_KEPT), { SC_REC_JOB_END, 0, 0, 0, 0, 0, 0, SC_FATE_NONE } },
        { 0 },
        { 3 },
    },
    { "an empty journal", { { 0 } }, { 0 }, { 0 } },
};

static bool outside_quarantined(void *ctx, uint64_t node)
{
    const uint64_t *q = ctx;
    return node != 0 && (q[0] == node || q[1] == node);
}

Test(records_kept, the_table)
{
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const kept_case *k = &cases[c];
        sc_record recs[MAX_ROWS];
        size_t n = 0;
        for (; n < MAX_ROWS && k->rows[n].type != 0; n++) {
            const row *w = &k->rows[n];
            recs[n] = (sc_record){ .type = w->type, .job = 1, .variant = w->variant, .first = w->first,
                .count = w->count, .chunk = w->chunk, .node = w->node };
            if (w->result != 0) {
                recs[n].result = &w->result;
                recs[n].result_len = 1;
            }
        }
        uint8_t fate[MAX_ROWS];
        const sc_record *kept[MAX_ROWS];
        memset(fate, 0xff, sizeof fate);
        size_t nk = sc_records_kept(recs, n, outside_quarantined, (void *)k->outside, fate, kept);
        for (size_t i = 0; i < n; i++)
            cr_expect_eq(fate[i], k->rows[i].want, "%s: row %zu's fate is %d, not %d", k->name, i + 1, fate[i],
                k->rows[i].want);
        size_t want = 0;
        while (want < MAX_ROWS && k->kept[want] != 0)
            want++;
        cr_expect_eq(nk, want, "%s: %zu kept, not %zu", k->name, nk, want);
        for (size_t i = 0; i < nk && i < want; i++)
            cr_expect_eq(kept[i], &recs[k->kept[i] - 1], "%s: kept[%zu] is row %td, not %zu", k->name, i,
                kept[i] - recs + 1, k->kept[i]);
    }
}

Test(records_kept, without_a_callback_only_the_journal_says_who_is_quarantined)
{
    char a = 'a';
    sc_record recs[] = {
        { .type = SC_REC_ACCEPT, .first = 0, .count = 10, .chunk = 1, .node = 9, .result = &a, .result_len = 1 },
        { .type = SC_REC_ACCEPT, .first = 0, .count = 10, .chunk = 2, .node = 8, .result = &a, .result_len = 1 },
        { .type = SC_REC_QUARANTINE, .node = 8 },
    };
    uint8_t fate[3];
    const sc_record *kept[3];
    cr_assert_eq(sc_records_kept(recs, 3, NULL, NULL, fate, kept), 1);
    cr_assert_eq(kept[0], &recs[0]);
    cr_assert_eq(fate[0], SC_FATE_KEPT);
    cr_assert_eq(fate[1], SC_FATE_RETRACTED);
}

/* ---- the restore counts what the rule keeps ---- */

static sim_layout layout;

static void stats_of(uint64_t first, uint64_t count, sim_stats *s)
{
    sim_stats_init(s, &layout);
    for (uint64_t i = first; i < first + count; i++)
        sim_stats_add(s, (double)((i * 2654435761u) % 1000) / 10.0);
}

enum { JOURNAL = 40, ITEMS = 1000, RESULT_CAP = 4096 };

static unsigned char bytes[JOURNAL][RESULT_CAP];

/* A journal such as a coordinator that died mid-write and one restarted
 * after it could leave together: accepts of four nodes, some overlapping,
 * some written twice, failed chunks, retracted rows, and quarantines. */
static size_t random_journal(uint64_t *rng, sc_record *recs)
{
    size_t n = 0;
    while (n < JOURNAL) {
        uint64_t pick = xorshift64(rng) % 16;
        sc_record *r = &recs[n];
        if (pick == 0 && n > 0) { /* a row written again */
            *r = recs[xorshift64(rng) % n];
            n++;
            continue;
        }
        uint64_t first = xorshift64(rng) % ITEMS, count = 1 + xorshift64(rng) % 120;
        if (count > ITEMS - first)
            count = ITEMS - first;
        *r = (sc_record){ .type = SC_REC_ACCEPT, .job = 1, .first = first, .count = count, .chunk = n + 1,
            .node = 1 + xorshift64(rng) % 4 };
        if (pick == 1)
            *r = (sc_record){ .type = SC_REC_CHUNK_FAILED, .job = 1, .first = first, .count = count };
        else if (pick == 2)
            r->type = SC_REC_RETRACTED;
        else if (pick == 3)
            *r = (sc_record){ .type = SC_REC_QUARANTINE, .job = 1, .node = 1 + xorshift64(rng) % 4 };
        if (r->type == SC_REC_ACCEPT || r->type == SC_REC_RETRACTED) {
            sim_stats s;
            size_t len = 0;
            stats_of(first, count, &s);
            cr_assert_eq(sc_result_encode(&s, 1, bytes[n], RESULT_CAP, &len), 0);
            r->result = bytes[n];
            r->result_len = len;
        }
        n++;
    }
    return n;
}

static bool node_in(void *ctx, uint64_t node)
{
    return node == *(const uint64_t *)ctx;
}

Test(records_kept, a_restore_counts_what_the_rule_keeps)
{
    cr_assert_eq(sim_layout_make(&layout, 1e6, 0, 100), 0);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    uint64_t with_skips = 0, with_copies = 0, with_retracted = 0;
    for (int round = 0; round < 300; round++) {
        sc_record recs[JOURNAL];
        size_t n = random_journal(&rng, recs);
        /* one node in three rounds was quarantined in another job */
        uint64_t outside = round % 3 == 0 ? 1 + xorshift64(&rng) % 4 : 0;
        uint8_t fate[JOURNAL];
        const sc_record *kept[JOURNAL];
        size_t nk = sc_records_kept(recs, n, node_in, &outside, fate, kept);
        uint64_t skipped = 0, retracted = 0, done = 0, failed = 0;
        sim_stats want, part;
        sim_stats_init(&want, &layout);
        for (size_t i = 0; i < n; i++) {
            skipped += fate[i] == SC_FATE_SKIPPED;
            with_copies += fate[i] == SC_FATE_COPY;
            retracted += fate[i] == SC_FATE_RETRACTED ? recs[i].count : 0;
        }
        for (size_t i = 0; i < nk; i++) {
            if (kept[i]->type == SC_REC_ACCEPT) {
                done += kept[i]->count;
                stats_of(kept[i]->first, kept[i]->count, &part);
                cr_assert_eq(sim_stats_merge(&want, &part), 0);
            } else {
                failed += kept[i]->count;
            }
            cr_assert(i == 0 || kept[i - 1]->first + kept[i - 1]->count <= kept[i]->first,
                "round %d: the kept records overlap", round);
        }
        with_skips += skipped > 0;
        with_retracted += retracted > 0;

        sc_ledger *l = sc_ledger_create(NULL);
        if (outside != 0)
            cr_assert_eq(sc_node_quarantine(l, outside, 0, false), 0);
        sc_job_spec spec = { .id = 1, .strategy = SC_SINGLE, .items = ITEMS, .nout = 1, .layouts = &layout,
            .tiers = SC_TIER_ANY };
        int rc = sc_job_restore(l, &spec, recs, n);
        cr_assert_eq(rc, 0, "round %d: restore: %d (%s)", round, rc, sf_strerror(rc));
        sc_job_status st;
        cr_assert_eq(sc_job_status_get(l, 1, &st), 0);
        cr_assert_eq(st.records_skipped, skipped, "round %d: %llu skipped, the rule says %llu", round,
            (unsigned long long)st.records_skipped, (unsigned long long)skipped);
        cr_assert_eq(st.done_items, done, "round %d", round);
        cr_assert_eq(st.failed_items, failed, "round %d", round);
        cr_assert_eq(st.retracted_items, retracted, "round %d", round);
        cr_assert(sim_stats_equal(&st.aggregate[0], &want), "round %d: the result is the kept accepts'", round);
        sc_ledger_destroy(l);
    }
    cr_assert_gt(with_skips, 100, "the journals overlap");
    cr_assert_gt(with_copies, 30, "the journals hold copies");
    cr_assert_gt(with_retracted, 100, "the journals hold rows of quarantined nodes");
}
