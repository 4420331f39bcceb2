/*
 * mpscq.c — see mpscq.h. Producers link at `head`; the consumer takes from
 * `tail`. The stub node keeps the list non-empty, so push never has to
 * special-case an empty queue.
 */
#include "runtime/mpscq.h"

#include <stddef.h>

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
     * payload) to whoever swaps after us; acquire orders our later store
     * into prev->next after the previous producer's initialisation of prev. */
    rt_mpscq_node *prev = atomic_exchange_explicit(&q->head, node, memory_order_acq_rel);
    /* release: the consumer's acquire load of prev->next sees the payload. */
    atomic_store_explicit(&prev->next, node, memory_order_release);
    return prev == &q->stub;
}

rt_mpscq_node *rt_mpscq_pop(rt_mpscq *q)
{
    rt_mpscq_node *tail = q->tail;
    /* acquire: pairs with the release store in push, so the node's payload
     * is visible before we hand the node out. */
    rt_mpscq_node *next = atomic_load_explicit(&tail->next, memory_order_acquire);

    if (tail == &q->stub) {
        if (next == NULL)
            return NULL;
        q->tail = next;
        tail = next;
        next = atomic_load_explicit(&tail->next, memory_order_acquire);
    }
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    /* tail is the last linked node. If head moved past it, a producer is
     * between its exchange and its link: report empty for now. */
    if (tail != atomic_load_explicit(&q->head, memory_order_acquire))
        return NULL;
    /* Re-insert the stub behind tail so tail can be handed out. */
    rt_mpscq_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    return NULL;
}
