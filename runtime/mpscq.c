/*
 * mpscq.c — see mpscq.h. Producers link at `head`; the consumer takes from
 * `tail`. The stub node keeps the list non-empty, so push never has to
 * special-case an empty queue. The queue is empty exactly when
 * tail == head == &stub; only then may the consumer tag head's low bit.
 */
#include "runtime/mpscq.h"

#include <stddef.h>
#include <stdint.h>

#define MARK ((uintptr_t)1)

void rt_mpscq_init(rt_mpscq *q)
{
    atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
    atomic_store_explicit(&q->head, &q->stub, memory_order_relaxed);
    q->tail = &q->stub;
}

bool rt_mpscq_push(rt_mpscq *q, rt_mpscq_node *node)
{
    atomic_store_explicit(&node->next, NULL, memory_order_relaxed);
    /* acq_rel: release publishes node->next = NULL (and the caller's
     * payload) to whoever swaps after us; acquire makes the previous
     * producer's initialisation of prev (and the consumer's mark) visible
     * before we store into prev->next. */
    rt_mpscq_node *prev = atomic_exchange_explicit(&q->head, node, memory_order_acq_rel);
    bool was_marked = ((uintptr_t)prev & MARK) != 0;
    prev = (rt_mpscq_node *)((uintptr_t)prev & ~MARK);
    /* release: the consumer's acquire load of prev->next sees the payload. */
    atomic_store_explicit(&prev->next, node, memory_order_release);
    return was_marked;
}

rt_mpscq_node *rt_mpscq_pop(rt_mpscq *q)
{
    return rt_mpscq_pop_at(q, &q->tail);
}

rt_mpscq_node *rt_mpscq_pop_at(rt_mpscq *q, rt_mpscq_node **tailp)
{
    rt_mpscq_node *tail = *tailp;
    /* acquire: pairs with the release store in push, so the node's payload
     * is visible before we hand the node out. */
    rt_mpscq_node *next = atomic_load_explicit(&tail->next, memory_order_acquire);

    if (tail == &q->stub) {
        if (next == NULL)
            return NULL;
        *tailp = next;
        tail = next;
        next = atomic_load_explicit(&tail->next, memory_order_acquire);
    }
    if (next != NULL) {
        *tailp = next;
        /* The next pop reads next->next, written on the sender's core:
         * fetch it while the caller handles this node. */
        __builtin_prefetch(next);
        return tail;
    }
    /* tail is the last linked node. If head moved past it, a producer is
     * between its exchange and its link: report empty for now. */
    if (tail != atomic_load_explicit(&q->head, memory_order_acquire))
        return NULL;
    /* Re-insert the stub behind tail so tail can be handed out. The queue is
     * not marked (only the consumer marks, and it is here), so this push
     * cannot report a mark. */
    rt_mpscq_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next != NULL) {
        *tailp = next;
        return tail;
    }
    return NULL;
}

bool rt_mpscq_mark_empty(rt_mpscq *q)
{
    if (q->tail != &q->stub)
        return false;
    rt_mpscq_node *expect = &q->stub;
    /* acq_rel on success: orders the consumer's earlier work before a
     * producer that sees the mark schedules it again. On failure a producer
     * got in first; nothing is changed. */
    return atomic_compare_exchange_strong_explicit(&q->head, &expect,
        (rt_mpscq_node *)((uintptr_t)&q->stub | MARK), memory_order_acq_rel, memory_order_relaxed);
}

bool rt_mpscq_is_empty(rt_mpscq *q)
{
    return q->tail == &q->stub &&
        atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL;
}
