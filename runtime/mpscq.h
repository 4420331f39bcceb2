/*
 * mpscq.h — intrusive multi-producer single-consumer queue (Vyukov's
 * non-blocking design, as in Pony's messageq.c). The base of actor mailboxes.
 *
 * Any thread may push; only one thread at a time may pop. Nodes are embedded
 * in the caller's structs and never allocated or freed here. Push is
 * wait-free (one atomic exchange); pop is lock-free and may briefly return
 * NULL while a push that has swapped the head has not yet linked its node,
 * in which case that node is returned by a later pop.
 */
#ifndef SIMFARM_RUNTIME_MPSCQ_H
#define SIMFARM_RUNTIME_MPSCQ_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct rt_mpscq_node {
    _Atomic(struct rt_mpscq_node *) next;
} rt_mpscq_node;

typedef struct rt_mpscq {
    /* Producers swap `head`; it sits on its own cache line so pushes do not
     * invalidate the consumer's `tail`. */
    alignas(64) _Atomic(rt_mpscq_node *) head;
    alignas(64) rt_mpscq_node *tail; /* consumer only */
    rt_mpscq_node stub;
} rt_mpscq;

/* Makes q empty. Not thread-safe: call before q is shared. */
void rt_mpscq_init(rt_mpscq *q);

/* Appends node (owned by the caller until popped). Any thread. Returns true
 * when the queue was empty before this push, so the caller knows to schedule
 * the consumer. */
bool rt_mpscq_push(rt_mpscq *q, rt_mpscq_node *node);

/* Removes the oldest node, or returns NULL when none is ready. Consumer only. */
rt_mpscq_node *rt_mpscq_pop(rt_mpscq *q);

#endif
