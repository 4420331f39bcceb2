/*
 * test_mpscq.c — the MPSC queue's single-threaded contract: FIFO order,
 * empty detection, and push reporting an empty queue.
 */
#include "runtime/mpscq.h"

#include <criterion/criterion.h>

struct item {
    rt_mpscq_node node;
    int v;
};

Test(mpscq, empty_queue_pops_null)
{
    rt_mpscq q;
    rt_mpscq_init(&q);
    cr_assert_null(rt_mpscq_pop(&q));
    cr_assert_null(rt_mpscq_pop(&q));
}

Test(mpscq, fifo_order_across_refills)
{
    rt_mpscq q;
    struct item it[8];
    rt_mpscq_init(&q);

    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 8; i++) {
            it[i].v = round * 100 + i;
            bool was_empty = rt_mpscq_push(&q, &it[i].node);
            cr_assert_eq(was_empty, i == 0, "round %d push %d: was_empty=%d", round, i, was_empty);
        }
        for (int i = 0; i < 8; i++) {
            struct item *got = (struct item *)rt_mpscq_pop(&q);
            cr_assert_not_null(got, "round %d pop %d", round, i);
            cr_assert_eq(got->v, round * 100 + i);
        }
        cr_assert_null(rt_mpscq_pop(&q));
    }
}

Test(mpscq, interleaved_push_and_pop)
{
    rt_mpscq q;
    struct item it[4];
    rt_mpscq_init(&q);

    it[0].v = 0;
    rt_mpscq_push(&q, &it[0].node);
    it[1].v = 1;
    rt_mpscq_push(&q, &it[1].node);
    cr_assert_eq(((struct item *)rt_mpscq_pop(&q))->v, 0);
    it[2].v = 2;
    rt_mpscq_push(&q, &it[2].node);
    cr_assert_eq(((struct item *)rt_mpscq_pop(&q))->v, 1);
    cr_assert_eq(((struct item *)rt_mpscq_pop(&q))->v, 2);
    cr_assert_null(rt_mpscq_pop(&q));
    it[3].v = 3;
    cr_assert(rt_mpscq_push(&q, &it[3].node), "push after draining sees an empty queue");
    cr_assert_eq(((struct item *)rt_mpscq_pop(&q))->v, 3);
}
