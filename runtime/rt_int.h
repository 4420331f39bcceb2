/*
 * rt_int.h — what the runtime's files share: the actor and timer structs and
 * the port interface. actor.c is portable; sched_native.c (native: worker pool +
 * libuv loop) and sched_wasm.c (one thread, host event loop) implement the
 * rt__port_* functions.
 */
#ifndef SIMFARM_RUNTIME_RT_INT_H
#define SIMFARM_RUNTIME_RT_INT_H

#include "runtime/runtime.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdatomic.h>

/* rt_actor.flags */
enum {
    AF_DEAD = 1u << 0,     /* stopped: sends are dropped */
    AF_STOPPING = 1u << 1, /* rt_stop called during this run */
    AF_MUTED = 1u << 2,    /* parked on a receiver's muted list, or parking */
};

/* rt_msg.flags */
enum {
    MF_REPLY = 1u << 0,   /* answers a request of the receiver */
    MF_REQUEST = 1u << 1, /* sent with rt_request: a shed gets an rt_shed */
    MF_CLASS_SHIFT = 8,   /* bits 8..11: the pool class it came from (pool.h) */
    MF_CLASS_MASK = 0xfu << 8,
};

struct rt_actor_ext; /* rare-path state, allocated on first use */

/* Field order is for the caches: fields written by senders on every send
 * come first, fields the running actor writes come last, and the read-mostly
 * fields between them keep the two groups at least 64 bytes apart, so they
 * never share a cache line however malloc aligns the actor. (mbox.tail, the
 * consumer's, shares the senders' line: rt__actor_run keeps it in a local
 * during a run and writes it back once.) */
struct rt_actor {
    /* senders */
    rt_mpscq mbox;
    _Atomic uint64_t sent;       /* messages pushed */
    _Atomic uint64_t max_depth;  /* highest depth a sender saw */
    rt_mpscq_node runq;          /* link in the loop's or global run queue */
    /* read-mostly */
    rt_system *sys;
    rt_behaviour behaviour;
    _Atomic uint32_t flags;
    _Atomic uint32_t refs;
    uint32_t high_water;
    uint8_t policy;
    bool pinned;
    uint64_t id;
    _Atomic(struct rt_actor_ext *) ext;
    rt_finalizer finalize;
    const char *name;
    rt_actor *all_prev, *all_next; /* the runtime's list of live actors */
    /* the running actor */
    _Atomic uint64_t received;   /* messages taken, published per run (see
                                    rt__actor_run); per message with a mark */
    rt_msg *current;             /* message being handled; NULL once sent on */
    rt_actor *mute_by;           /* set during a run: mute self after it */
    alignas(16) unsigned char state[];
};

_Static_assert(offsetof(struct rt_actor, received) -
    (offsetof(struct rt_actor, max_depth) + sizeof(uint64_t)) >= 64,
    "senders' and consumer's fields must not share a cache line");

/* A timer: one-shot (msg set) or periodic (period > 0). Referenced by the
 * timer table until it is cancelled or, one-shot, its message reaches the
 * behaviour or is freed; by the port while armed; and by each message it
 * has put in a mailbox until then. */
typedef struct rt_timer {
    rt_mpscq_node cmd;           /* link in the port's start queue */
    int64_t id;
    _Atomic uint32_t refs;
    _Atomic bool cancelled;
    _Atomic bool tick_queued;    /* periodic: a tick waits in the mailbox */
    rt_actor *to;                /* retained */
    rt_msg *msg;                 /* one-shot payload, until sent */
    uint64_t delay_ms, period_ms;
    uint32_t tick_type;
    uint64_t cookie;
    uint64_t start_ms, seq;      /* periodic: time origin, ticks so far */
    struct rt_timer *table_next; /* hash chain in the timer table */
    void *port;                  /* the port's handle */
} rt_timer;

/* ---- provided by actor.c to the ports ---- */

/* Runs up to RT_BATCH messages of a; returns true when a still has work and
 * must be scheduled again, false when it was marked empty, muted or stopped
 * (then it must not be touched again by the caller). */
bool rt__actor_run(rt_actor *a);

/* Stops a (runtime shutdown): finalizer, free queued messages, no DOWN. */
void rt__actor_stop_quiet(rt_actor *a);

/* The thread's running actor (NULL outside behaviours). */
extern _Thread_local rt_actor *rt__current;

void rt__timer_release(rt_timer *t);
/* Puts the timer's message (one-shot) or a new tick (periodic) in its
 * actor's mailbox. Called by the port when the timer is due. */
void rt__timer_fire(rt_timer *t, uint64_t now_ms);
/* Cancels and forgets every timer (shutdown). */
void rt__timers_cancel_all(rt_system *sys);

/* ---- provided by each port ---- */

/* The port's part of rt_system; it embeds struct rt_system_common first.
 * `stopping` is read by every send; the counters written by every run and
 * every spawn are kept off its cache line. */
struct rt_system_common {
    _Atomic bool stopping;
    void *all_lock;              /* port mutex guarding `all` */
    void *timer_lock;            /* port mutex guarding the timer table */
    char pad_[64];
    _Atomic uint64_t scheduled;  /* actors scheduled or running */
    _Atomic uint64_t messages;
    _Atomic uint64_t next_actor_id, actors_live;
    _Atomic int64_t next_timer_id;
    _Atomic uint64_t next_req_id;
    rt_actor *all;
    rt_timer **timers;
    size_t timer_buckets, timer_count;
};

static inline struct rt_system_common *rt__common(rt_system *sys)
{
    return (struct rt_system_common *)sys; /* each port's struct starts with it */
}

/* Makes a runnable actor run soon (it was just marked scheduled). */
void rt__port_schedule(rt_system *sys, rt_actor *a);
/* Called by a sender that saw a's depth reach a multiple of BACKLOG (a
 * power of two): a must not wait for the sender's run to end to be run. */
enum { BACKLOG = 128 };
void rt__port_backlog(rt_system *sys, rt_actor *a);
/* The number of scheduled actors dropped to zero while stopping. */
void rt__port_quiescent(rt_system *sys);
/* Arms a timer (rt__timer_fire when due) / disarms it. Any thread. */
void rt__port_timer_start(rt_system *sys, rt_timer *t);
void rt__port_timer_cancel(rt_system *sys, rt_timer *t);
void rt__port_lock(void *lock);
void rt__port_unlock(void *lock);

#endif
