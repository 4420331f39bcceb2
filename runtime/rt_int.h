/*
 * rt_int.h — what the runtime's files share: the actor and timer structs and
 * the port interface. actor.c is portable; sched_uv.c (native: worker pool +
 * libuv loop) and sched_wasm.c (one thread, host event loop) implement the
 * rt__port_* functions.
 */
#ifndef SIMFARM_RUNTIME_RT_INT_H
#define SIMFARM_RUNTIME_RT_INT_H

#include "runtime/runtime.h"

#include <stdalign.h>
#include <stdatomic.h>

/* rt_actor.flags */
enum {
    AF_DEAD = 1u << 0,     /* stopped: sends are dropped */
    AF_STOPPING = 1u << 1, /* rt_stop called during this run */
};

/* rt_msg.flags */
enum {
    MF_REPLY = 1u << 0,   /* answers a request of the receiver */
    MF_REQUEST = 1u << 1, /* sent with rt_request: a shed gets an rt_shed */
    MF_CLASS_SHIFT = 8,   /* bits 8..11: the pool class it came from (pool.h) */
    MF_CLASS_MASK = 0xfu << 8,
};

struct rt_actor_ext; /* rare-path state, allocated on first use */

struct rt_actor {
    rt_mpscq mbox;
    rt_mpscq_node runq;          /* link in the loop's or global run queue */
    rt_behaviour behaviour;
    rt_system *sys;
    rt_msg *current;             /* message being handled; NULL once sent on */
    _Atomic(struct rt_actor_ext *) ext;
    rt_actor *mute_by;           /* set during a run: mute self after it */
    rt_actor *all_prev, *all_next; /* the runtime's list of live actors */
    uint64_t id;
    _Atomic uint64_t sent;       /* messages pushed (producers) */
    _Atomic uint64_t received;   /* messages taken (consumer) */
    _Atomic uint64_t max_depth;
    _Atomic uint32_t refs;
    _Atomic uint32_t flags;
    uint32_t high_water;
    uint8_t policy;
    bool pinned;
    rt_finalizer finalize;
    const char *name;
    alignas(16) unsigned char state[];
};

/* A timer: one-shot (msg set) or periodic (period > 0). Referenced by the
 * timer table until it fires or is cancelled, by the port while armed, and
 * by each message it has put in a mailbox. */
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
/* Takes t out of the table (fired one-shot); false if it was cancelled. */
bool rt__timer_forget(rt_system *sys, rt_timer *t);
/* Cancels and forgets every timer (shutdown). */
void rt__timers_cancel_all(rt_system *sys);

/* ---- provided by each port ---- */

/* The port's part of rt_system; it embeds struct rt_system_common first. */
struct rt_system_common {
    _Atomic bool stopping;
    _Atomic uint64_t next_actor_id;
    _Atomic int64_t next_timer_id;
    _Atomic uint64_t next_req_id;
    _Atomic uint64_t actors_live, messages;
    _Atomic uint64_t scheduled;  /* actors scheduled or running */
    void *all_lock;              /* port mutex guarding `all` */
    rt_actor *all;
    void *timer_lock;            /* port mutex guarding the timer table */
    rt_timer **timers;
    size_t timer_buckets, timer_count;
};
struct rt_system_common *rt__common(rt_system *sys);

/* Makes a runnable actor run soon (it was just marked scheduled). */
void rt__port_schedule(rt_system *sys, rt_actor *a);
/* The number of scheduled actors dropped to zero while stopping. */
void rt__port_quiescent(rt_system *sys);
/* Arms a timer (rt__timer_fire when due) / disarms it. Any thread. */
void rt__port_timer_start(rt_system *sys, rt_timer *t);
void rt__port_timer_cancel(rt_system *sys, rt_timer *t);
void rt__port_lock(void *lock);
void rt__port_unlock(void *lock);

#endif
