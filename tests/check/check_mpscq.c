/*
 * stress_mpscq.c — many producers, one consumer, run under ThreadSanitizer:
 * every node arrives exactly once and each producer's nodes arrive in the
 * order it pushed them.
 */
#include "runtime/mpscq.h"
#include "tests/support/check.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

enum { PRODUCERS = 4, PER_PRODUCER = 50000 };

struct item {
    rt_mpscq_node node; /* first member: a node pointer is an item pointer */
    uint32_t producer;
    uint32_t seq;
};

struct producer {
    rt_mpscq *q;
    struct item *items;
    uint32_t id;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (uint32_t i = 0; i < PER_PRODUCER; i++) {
        p->items[i].producer = p->id;
        p->items[i].seq = i;
        rt_mpscq_push(p->q, &p->items[i].node);
    }
    return NULL;
}

static void many_producers_one_consumer(void)
{
    static rt_mpscq q;
    static struct item items[PRODUCERS][PER_PRODUCER];
    struct producer ps[PRODUCERS];
    pthread_t th[PRODUCERS];
    uint32_t next_seq[PRODUCERS] = { 0 };
    long got = 0;

    rt_mpscq_init(&q);
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        ps[i] = (struct producer){ &q, items[i], i };
        CHECK(pthread_create(&th[i], NULL, produce, &ps[i]) == 0, "pthread_create");
    }
    /* Bounded: every producer finishes, so all nodes arrive; the deadline
     * turns a lost node into a failure instead of a hang. An empty pop
     * yields, so producers run even where threads take turns (valgrind). */
    time_t deadline = time(NULL) + 120;
    while (got < (long)PRODUCERS * PER_PRODUCER && time(NULL) < deadline) {
        rt_mpscq_node *n = rt_mpscq_pop(&q);
        if (n == NULL) {
            sched_yield();
            continue;
        }
        struct item *it = (struct item *)n;
        CHECK(it->producer < PRODUCERS, "bad producer %u", it->producer);
        CHECK(it->seq == next_seq[it->producer], "producer %u: got seq %u, expected %u",
            it->producer, it->seq, next_seq[it->producer]);
        next_seq[it->producer]++;
        got++;
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(th[i], NULL);
    CHECK(got == (long)PRODUCERS * PER_PRODUCER, "received %ld of %d", got, PRODUCERS * PER_PRODUCER);
    CHECK(rt_mpscq_pop(&q) == NULL, "queue not empty after all nodes arrived");
}

int main(void)
{
    RUN(many_producers_one_consumer);
    return CHECK_SUMMARY();
}
