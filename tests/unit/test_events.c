/*
 * test_events.c — the event log behind /ws/events: sequence numbers, the
 * ring clients read at their own pace and when it says "too far behind",
 * the latest progress per job.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "actors/coord/events.h"

typedef struct seen {
    char text[16][128];
    int n;
} seen;

/* Reads the log from `since` as a client does, event by event, into s;
 * returns what cd_events_next last said (0 once read to the end, -1). */
static int since(const cd_events *ev, uint64_t after, uint64_t job, seen *s)
{
    const char *text;
    size_t len;
    uint64_t seq;
    int rc;
    while ((rc = cd_events_next(ev, after, job, &text, &len, &seq)) == 1) {
        cr_assert_eq(strlen(text), len);
        cr_assert_gt(seq, after);
        cr_assert_lt(s->n, 16);
        snprintf(s->text[s->n++], sizeof s->text[0], "%s", text);
        after = seq;
    }
    if (rc == 0)
        cr_assert_eq(seq, cd_events_last(ev), "passed over to the last");
    return rc;
}

Test(events, texts_carry_seq_type_job_and_fields)
{
    cd_events *ev = cd_events_create(8, 0);
    cr_assert_eq(cd_events_last(ev), 0);
    cr_assert_str_eq(cd_events_add(ev, "node.online", 0, "\"node\":4"), "{\"seq\":1,\"type\":\"node.online\",\"node\":4}");
    cr_assert_str_eq(cd_events_add(ev, "job.started", 9, ""), "{\"seq\":2,\"type\":\"job.started\",\"job\":9}");
    cr_assert_eq(cd_events_last(ev), 2);
    cd_events_destroy(ev);
}

Test(events, replay_from_a_seq_filtered_by_job)
{
    cd_events *ev = cd_events_create(8, 0);
    cd_events_add(ev, "job.started", 1, "");
    cd_events_add(ev, "job.started", 2, "");
    cd_events_add(ev, "job.progress", 1, "\"items_done\":5");
    seen s = { .n = 0 };
    cr_assert_eq(since(ev, 1, 0, &s), 0);
    cr_assert_eq(s.n, 2);
    cr_assert(strstr(s.text[0], "\"seq\":2") != NULL);
    s.n = 0;
    cr_assert_eq(since(ev, 0, 1, &s), 0);
    cr_assert_eq(s.n, 2, "job 1 has two events, got %d", s.n);
    s.n = 0;
    cr_assert_eq(since(ev, 3, 0, &s), 0);
    cr_assert_eq(s.n, 0, "nothing after the last");
    cd_events_destroy(ev);
}

Test(events, a_client_behind_the_ring_needs_a_snapshot)
{
    cd_events *ev = cd_events_create(4, 0);
    for (int i = 0; i < 10; i++)
        cd_events_add(ev, "job.progress", 7, "");
    seen s = { .n = 0 };
    cr_assert_eq(since(ev, 5, 0, &s), -1, "seq 6 has left a ring of 4 (7..10 kept)");
    cr_assert_eq(s.n, 0);
    cr_assert_eq(since(ev, 6, 0, &s), 0);
    cr_assert_eq(s.n, 4);
    cr_assert(strstr(s.text[0], "\"seq\":7,") != NULL, "%s", s.text[0]);
    cr_assert(strstr(s.text[3], "\"seq\":10,") != NULL, "%s", s.text[3]);
    cd_events_destroy(ev);
}

Test(events, a_client_of_an_earlier_run_needs_a_snapshot)
{
    /* one run starts at 1,000,000 and sends 3 events; the next, started
     * later, numbers from its own start */
    cd_events *before = cd_events_create(8, 1000000), *after = cd_events_create(8, 2000000);
    for (int i = 0; i < 3; i++)
        cd_events_add(before, "job.progress", 7, "");
    cd_events_add(after, "job.started", 7, "");
    cr_assert_str_eq(cd_events_add(after, "job.progress", 7, ""), "{\"seq\":2000002,\"type\":\"job.progress\",\"job\":7}");
    seen s = { .n = 0 };
    uint64_t saw = cd_events_last(before);
    cr_assert_eq(saw, 1000003);
    cr_assert_eq(cd_events_count(before), 3, "counted from the run's start, not numbered");
    cr_assert_eq(cd_events_count(after), 2);
    cr_assert_eq(since(after, saw, 0, &s), -1, "before this run's first event");
    cr_assert_eq(since(before, 2000002, 0, &s), -1, "past the last: not this log's");
    cr_assert_eq(since(after, 2000000, 0, &s), 0);
    cr_assert_eq(s.n, 2, "from the run's start, every event");
    cd_events_destroy(before);
    cd_events_destroy(after);
}

typedef struct jobs_seen {
    uint64_t job[8];
    int n;
} jobs_seen;

static void each(void *ctx, uint64_t job, const char *text)
{
    jobs_seen *j = ctx;
    cr_assert_not_null(text);
    j->job[j->n++] = job;
}

Test(events, latest_progress_per_unfinished_job)
{
    cd_events *ev = cd_events_create(2, 0);
    cd_events_add(ev, "job.progress", 30, "\"items_done\":1");
    cd_events_add(ev, "job.progress", 10, "\"items_done\":1");
    cd_events_add(ev, "job.progress", 20, "\"items_done\":1");
    cd_events_add(ev, "job.progress", 10, "\"items_done\":2");
    cr_assert(strstr(cd_events_progress(ev, 10), "\"items_done\":2") != NULL, "the latest one is kept");
    cr_assert_null(cd_events_progress(ev, 11));
    cd_events_add(ev, "job.finished", 20, "\"state\":\"complete\"");
    cr_assert_null(cd_events_progress(ev, 20), "a finished job has no progress");
    jobs_seen j = { .n = 0 };
    cd_events_each_progress(ev, each, &j);
    cr_assert_eq(j.n, 2);
    cr_assert_eq(j.job[0], 10);
    cr_assert_eq(j.job[1], 30);
    cd_events_destroy(ev);
}
