/*
 * test_mpscq.c — the MPSC queue's single-threaded contract: FIFO order,
 * empty detection, and the mark-empty protocol (only the first push after a
 * successful mark reports it).
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
            bool was_marked = rt_mpscq_push(&q, &it[i].node);
            cr_assert_eq(was_marked, round > 0 && i == 0, "round %d push %d: was_marked=%d", round, i, was_marked);
        }
        for (int i = 0; i < 8; i++) {
            struct item *got = (struct item *)rt_mpscq_pop(&q);
            cr_assert_not_null(got, "round %d pop %d", round, i);
            cr_assert_eq(got->v, round * 100 + i);
        }
        cr_assert_null(rt_mpscq_pop(&q));
        cr_assert(rt_mpscq_is_empty(&q));
        cr_assert(rt_mpscq_mark_empty(&q));
    }
}

Test(mpscq, mark_empty_fails_while_nodes_are_queued)
{
    rt_mpscq q;
    struct item a, b;
    rt_mpscq_init(&q);

    cr_assert_not(rt_mpscq_push(&q, &a.node), "a fresh queue is not marked");
    cr_assert_not(rt_mpscq_mark_empty(&q), "a queue holding a node cannot be marked");
    cr_assert_eq(rt_mpscq_pop(&q), &a.node);
    cr_assert(rt_mpscq_mark_empty(&q));
    cr_assert(rt_mpscq_push(&q, &b.node), "first push after the mark reports it");
    cr_assert_not(rt_mpscq_mark_empty(&q));
    cr_assert_eq(rt_mpscq_pop(&q), &b.node);
    cr_assert_null(rt_mpscq_pop(&q));
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
    cr_assert_not(rt_mpscq_push(&q, &it[3].node), "not marked: no report");
    cr_assert_eq(((struct item *)rt_mpscq_pop(&q))->v, 3);
}
