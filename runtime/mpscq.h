/*
 * mpscq.h — intrusive multi-producer single-consumer queue (Vyukov's
 * non-blocking design, with Pony's "mark empty" protocol from messageq.c).
 * The base of actor mailboxes and of the loop thread's run queue.
 *
 * Any thread may push; only one thread at a time may pop. Nodes are embedded
 * in the caller's structs and never allocated or freed here. Push is
 * wait-free (one atomic exchange); pop is lock-free and may briefly return
 * NULL while a push that has swapped the head has not yet linked its node,
 * in which case that node is returned by a later pop.
 *
 * Scheduling protocol: a consumer that finds the queue empty calls
 * rt_mpscq_mark_empty(). If that succeeds, the next push returns true, and
 * that pusher (and only that one) schedules the consumer again. If it fails,
 * a push is in progress and the consumer must keep running.
 */
#ifndef SIMFARM_RUNTIME_MPSCQ_H
#define SIMFARM_RUNTIME_MPSCQ_H

#include <stdatomic.h>
#include <stdbool.h>

typedef struct rt_mpscq_node {
    _Atomic(struct rt_mpscq_node *) next;
} rt_mpscq_node;

/* No padding between head and tail: an actor embeds one of these and an idle
 * actor must stay small; Pony makes the same trade. */
typedef struct rt_mpscq {
    _Atomic(rt_mpscq_node *) head; /* producers; low bit = marked empty */
    rt_mpscq_node *tail;           /* consumer only */
    rt_mpscq_node stub;
} rt_mpscq;

/* Makes q empty and not marked. Not thread-safe: call before q is shared. */
void rt_mpscq_init(rt_mpscq *q);

/* Appends node (owned by the caller until popped). Any thread. Returns true
 * when the consumer had marked the queue empty, so the caller must schedule
 * the consumer; false otherwise. */
bool rt_mpscq_push(rt_mpscq *q, rt_mpscq_node *node);

/* Removes the oldest node, or returns NULL when none is ready. Consumer only. */
rt_mpscq_node *rt_mpscq_pop(rt_mpscq *q);

/* The same, for a consumer that pops many nodes in a row: it keeps q's tail
 * in *tail (copied from q->tail) and stores it back before q is popped,
 * marked or tested in any other way. Until then the consumer writes nothing
 * to q, so producers pushing meanwhile keep q's cache line to themselves. */
rt_mpscq_node *rt_mpscq_pop_at(rt_mpscq *q, rt_mpscq_node **tail);

/* Marks q empty if it is; returns false when a node is queued or being
 * pushed. Consumer only, after rt_mpscq_pop() returned NULL. */
bool rt_mpscq_mark_empty(rt_mpscq *q);

/* True when q holds no node. A snapshot for the consumer: producers may be
 * pushing concurrently. */
bool rt_mpscq_is_empty(rt_mpscq *q);

#endif
