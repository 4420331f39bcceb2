/*
 * runtime.h — simfarm's actor runtime.
 *
 * An actor is private state plus a behaviour function, fed by a mailbox.
 * Sending never blocks. An actor runs on at most one thread at a time and
 * handles at most RT_BATCH messages per run before it yields, so one busy
 * actor cannot starve the others. Messages from one sender to one receiver
 * arrive in the order they were sent.
 *
 * Executors: actors run on a pool of worker threads, or, when spawned with
 * RT_PINNED, on the thread that runs the libuv loop (for actors that own
 * sockets, database connections or signals). Timers, request timeouts and
 * periodic ticks are messages driven by the loop. The WebAssembly port has
 * the same API and one thread: everything runs from the host's event loop.
 *
 * Messages: a message type is a struct whose first member is an rt_msg,
 * allocated with rt_msg_new(). Ownership moves with the message: rt_send()
 * consumes it, the runtime hands it to the behaviour, and frees it after the
 * behaviour returns unless the behaviour sent it on (re-sending the message
 * being handled is free: no allocation, no copy).
 *
 * Errors: functions return 0 or a negative RT_E* code (sf_strerror() names
 * it). Allocation failure aborts with a message (see sf_oom()).
 */
#ifndef SIMFARM_RUNTIME_H
#define SIMFARM_RUNTIME_H

#include "base/alloc.h"
#include "base/err.h"
#include "runtime/mpscq.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rt_system rt_system;
typedef struct rt_actor rt_actor;
typedef struct rt_msg rt_msg;

/* ---- errors ---------------------------------------------------------------- */

/* The runtime's codes, RT_E*, are in base/err.h (sf_strerror()). */
enum { RT_OK = 0 };

/* Milliseconds of the monotonic clock (for intervals; no wall time). */
uint64_t rt_mono_ms(void);

/* ---- messages -------------------------------------------------------------- */

/* Message types below RT_MSG_USER are the runtime's own. */
enum {
    RT_MSG_DOWN = 1,    /* rt_down: a monitored actor stopped */
    RT_MSG_TIMEOUT,     /* rt_timeout: a request got no reply in time */
    RT_MSG_TICK,        /* rt_tick: a periodic timer fired (type set by caller) */
    RT_MSG_SHED,        /* rt_shed: a request was shed by an overloaded receiver */
    RT_MSG_USER = 64
};

/* Where each actor's message types start: registered here once, as
 * base/err.h registers error ranges, so no two actors' types collide. An
 * actor numbers its messages up from its base. */
enum rt_msg_base {
    RT_MSGS_STORE = RT_MSG_USER + 0x1000,             /* actors/coord/store.h: queries and notices */
    RT_MSGS_STORE_PRIVATE = RT_MSG_USER + 0x1100,     /* the store's own timers */
    RT_MSGS_GATEWAY = RT_MSG_USER + 0x1200,           /* actors/coord/gateway.c */
    RT_MSGS_SCHEDULER = RT_MSG_USER + 0x1300,         /* actors/coord/scheduler.h */
    RT_MSGS_SCHEDULER_PRIVATE = RT_MSG_USER + 0x1380, /* the scheduler's own */
    RT_MSGS_SESSION = RT_MSG_USER + 0x1400,           /* actors/coord/session.c */
    RT_MSGS_UP = RT_MSG_USER + 0x1500,                /* cli/up.c: the demo job's submission */
    RT_MSGS_NODE = RT_MSG_USER + 0x1600,              /* actors/node: the node actor */
    RT_MSGS_NODE_WORKER = RT_MSG_USER + 0x1700,       /* node-native: the workers */
    RT_MSGS_BURST = RT_MSG_USER + 0x1800,             /* actors/coord/burst.c: the burst actor */
};

struct rt_msg {
    rt_mpscq_node node; /* mailbox link: first, so a node is a message */
    uint32_t type;
    uint32_t flags;     /* runtime-private */
    rt_actor *sender;   /* set by rt_send from a behaviour; NULL from outside */
    uint64_t req_id;    /* request/reply correlation; 0 for plain messages */
    struct rt_timer *timer; /* runtime-private: the timer that delivers it */
    /* Releases what the message owns (a database result, a buffer) before
     * the message itself is freed; NULL when it owns nothing. */
    void (*release)(rt_msg *msg);
};

/* Allocates a zeroed message of size bytes (>= sizeof(rt_msg)) with the given
 * type. Never returns NULL. */
rt_msg *rt_msg_new(uint32_t type, size_t size);

/* Keeps the message being handled past the behaviour's return: the runtime
 * will not free it; the behaviour's actor now owns it (send it, reply to it,
 * or free it later). Only from self's behaviour, with the message it got. */
void rt_take(rt_actor *self, rt_msg *msg);

/* Frees a message that was never sent, or one a behaviour kept. */
void rt_msg_free(rt_msg *msg);

/* Convenience: allocate a message struct T with type id. */
#define RT_MSG_NEW(T, id) ((T *)rt_msg_new((id), sizeof(T)))

typedef struct rt_down {
    rt_msg hdr;
    rt_actor *actor; /* the message holds a reference: valid until the
                        message is freed (kept with rt_take, for longer) */
    uint64_t actor_id;
} rt_down;

typedef struct rt_timeout {
    rt_msg hdr; /* hdr.req_id is the request that timed out */
} rt_timeout;

typedef struct rt_tick {
    rt_msg hdr;      /* hdr.type is the type given to rt_send_every */
    uint64_t timer;  /* the timer's id */
    uint64_t seq;    /* 1 for the first tick; gaps mean ticks were dropped */
    uint64_t cookie; /* the caller's value from rt_send_every */
} rt_tick;

typedef struct rt_shed {
    rt_msg hdr; /* hdr.req_id is the request that was dropped */
    uint32_t shed_type; /* the type of the dropped request */
} rt_shed;

/* ---- actors ---------------------------------------------------------------- */

/* A behaviour handles one message. self's state is rt_state(self). The
 * behaviour owns msg until it returns (see the header comment). */
typedef void (*rt_behaviour)(rt_actor *self, rt_msg *msg);

/* Called once when an actor stops, on the thread that ran it last, to
 * release what its state holds. May be NULL. */
typedef void (*rt_finalizer)(rt_actor *self);

/* What a send does to an actor past its high-water mark. The runtime's own
 * messages (timer messages, ticks, timeouts, shed replies, DOWN) are
 * delivered past the mark whatever the policy. */
typedef enum rt_overload {
    RT_OVERLOAD_NONE = 0, /* no high-water mark: the mailbox grows */
    RT_OVERLOAD_MUTE,     /* deliver, but pause the sending actor until the
                             mailbox drains to half the mark (Pony's muting);
                             senders outside actors get RT_EOVERLOAD */
    RT_OVERLOAD_SHED,     /* drop the message; a request's sender gets an
                             RT_MSG_SHED reply; rt_send returns 0 */
    RT_OVERLOAD_REJECT    /* rt_send returns RT_EOVERLOAD and the caller
                             keeps the message */
} rt_overload;

typedef struct rt_actor_opts {
    size_t state_size;      /* bytes of zeroed state, allocated with the actor */
    bool pinned;            /* run on the loop thread (I/O actors) */
    uint32_t high_water;    /* mailbox depth that triggers the policy; 0 = none */
    rt_overload policy;
    rt_finalizer finalize;
    const char *name;       /* for diagnostics; not copied */
} rt_actor_opts;

/* Creates an actor. The returned handle holds one reference for the caller
 * (release it with rt_actor_release when done sending). Returns NULL when
 * the runtime is stopping. */
rt_actor *rt_spawn(rt_system *sys, rt_behaviour behaviour, const rt_actor_opts *opts);

/* The actor's state (state_size zeroed bytes), its id, its runtime. */
void *rt_state(rt_actor *a);
uint64_t rt_actor_id(const rt_actor *a);
rt_system *rt_actor_system(const rt_actor *a);

/* Reference counting for handles kept across messages or threads. */
rt_actor *rt_actor_retain(rt_actor *a);
void rt_actor_release(rt_actor *a);

/* Sends msg to `to` (consumed on success and on RT_ESTOPPED, where it is
 * freed; kept by the caller on RT_EOVERLOAD, and on RT_EINVAL when `to` or
 * msg is NULL). Any thread. */
int rt_send(rt_actor *to, rt_msg *msg);

/* Stops self after the current message: queued messages are freed,
 * watchers get RT_MSG_DOWN, the finalizer runs. Only from self's behaviour. */
void rt_stop(rt_actor *self);

/* Makes watcher receive an rt_down when target stops (at once if it already
 * has). Any thread. */
void rt_monitor(rt_actor *watcher, rt_actor *target);

/* Mailbox counters, readable from any thread (snapshots). An actor with a
 * high-water mark counts what it takes from its mailbox message by message;
 * one without counts once at the end of each run, so from another thread,
 * or in its own behaviour, `received` may lag by the run under way (at most
 * RT_BATCH messages) and `depth` and `max_depth` may include them. */
typedef struct rt_actor_stats {
    uint64_t received;  /* messages taken from the mailbox */
    uint64_t depth;     /* messages sent and not yet taken */
    uint64_t max_depth; /* highest depth a sender saw */
    uint64_t shed;      /* dropped by RT_OVERLOAD_SHED */
    uint64_t rejected;  /* refused by RT_OVERLOAD_REJECT or MUTE from outside */
    uint64_t mutes;     /* times a sender was muted by this actor */
} rt_actor_stats;
void rt_actor_stats_get(rt_actor *a, rt_actor_stats *out);

/* ---- request / reply -------------------------------------------------------- */

/* Sends msg as a request from self to `to`; the reply (rt_reply) or, after
 * timeout_ms, an rt_timeout arrives at self as a message with the same
 * req_id, never both; an RT_OVERLOAD_SHED receiver answers with an
 * rt_shed. Returns the request id (> 0), or a negative RT_E* code (then msg
 * has been freed, whatever the error, and nothing will arrive). Only from
 * self's behaviour. */
int64_t rt_request(rt_actor *self, rt_actor *to, rt_msg *msg, uint64_t timeout_ms);

/* Answers the request being handled: sends reply to its sender with its
 * req_id. The request itself is freed as usual. Returns as rt_send. */
int rt_reply(const rt_msg *request, rt_msg *reply);

/* ---- timers ----------------------------------------------------------------- */

/* Delivers msg to `to` after delay_ms. Returns a timer id (> 0) for
 * rt_timer_cancel, or a negative RT_E* code (msg freed, whatever the
 * error). Any thread. */
int64_t rt_send_after(rt_actor *to, uint64_t delay_ms, rt_msg *msg);

/* Delivers an rt_tick of the given type to `to` every period_ms (> 0), at
 * start + n * period, so lateness never accumulates. A tick still queued
 * when the next is due is not doubled: the next one is skipped and seq
 * shows the gap. The timer ends by itself when `to` stops. Returns a timer
 * id or a negative RT_E* code. */
int64_t rt_send_every(rt_actor *to, uint64_t period_ms, uint32_t type, uint64_t cookie);

/* Cancels a timer. Once this returns, `to` receives nothing more from it,
 * even a message already in its mailbox. Returns 0, or RT_ENOTIMER when
 * there is nothing left to cancel: the timer was cancelled (rt_system_stop
 * cancels them all) or never started, or, one-shot, its message has reached
 * the behaviour. */
int rt_timer_cancel(rt_system *sys, int64_t timer);

/* ---- the runtime -------------------------------------------------------------- */

typedef struct rt_system_opts {
    unsigned workers;   /* worker threads; 0 = number of cores */
    void *loop;         /* a uv_loop_t to run on (for example one that
                           libwebsockets also uses); NULL = the runtime owns
                           one. Ignored by the WebAssembly port. */
    void (*thread_start)(void *arg); /* run by each worker thread as it starts,
                                        before any actor (for example to set the
                                        thread's priority); NULL = none. The
                                        WebAssembly port has no threads to run it. */
    void *thread_arg;
} rt_system_opts;

/* Starts the worker threads. Pinned actors and timers run when the loop
 * runs: call rt_system_run(), or uv_run() on your own loop. NULL opts means
 * defaults. Returns NULL and sets *err on failure. */
rt_system *rt_system_create(const rt_system_opts *opts, int *err);

/* Runs the loop until the runtime has stopped (after rt_system_stop). With a
 * foreign loop, returns at once: the owner runs the loop. Native only; the
 * WebAssembly port is driven by the host's event loop. */
int rt_system_run(rt_system *sys);

/* Asks the runtime to stop: new sends from outside fail with RT_ESTOPPED,
 * timers are cancelled (a timer's message waiting in a mailbox is dropped,
 * as by rt_timer_cancel), other queued messages are still handled, and
 * once no actor has work left every actor is stopped (finalizers run,
 * watchers are not notified) and the threads exit. Any thread, any number
 * of times. */
void rt_system_stop(rt_system *sys);

/* Joins the threads and frees the runtime. Call after rt_system_run
 * returned (or, with a foreign loop, after the loop has run until
 * rt_system_done). A runtime with its own loop that has not finished is
 * stopped and drained first, as by rt_system_stop; the WebAssembly port
 * stops it at once, dropping queued messages. */
void rt_system_destroy(rt_system *sys);

/* The uv_loop_t the runtime runs on (its own or the one given in opts), for
 * pinned actors that own libuv handles; NULL in the WebAssembly port. */
void *rt_system_loop(rt_system *sys);

/* True once the runtime has stopped everything and released the loop. */
bool rt_system_done(rt_system *sys);

/* Runtime-wide counters (snapshots). */
typedef struct rt_system_stats {
    uint64_t actors_live;
    uint64_t messages;      /* handled, all actors */
    uint64_t steals;        /* actors taken from another worker's queue */
    uint64_t parks;         /* times a worker went to sleep */
    uint64_t parked;        /* workers asleep now */
    uint64_t loop_wakeups;  /* loop-thread wake-ups handled (coalesced) */
} rt_system_stats;
void rt_system_stats_get(rt_system *sys, rt_system_stats *out);

/* The most messages one run of an actor handles before it yields. */
#define RT_BATCH 100

#endif
