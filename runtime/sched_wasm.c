/*
 * sched_wasm.c — the WebAssembly port: one thread, driven by the host's
 * event loop (a browser tab, a Web Worker, or node).
 *
 * Runnable actors wait in one FIFO queue; the first one to arrive schedules
 * a drain with a zero-delay host timeout, and each drain runs actors up to a
 * budget, then yields back to the host so the page stays responsive. Timers
 * are host timeouts, in steps for those due beyond what one host timeout
 * can wait. Pinned and unpinned actors are the same here.
 *
 * rt_system_run() returns at once: the host's loop drives everything. Test
 * programs built with -sASYNCIFY and RT_WASM_BLOCKING_RUN get a blocking
 * rt_system_run() that sleeps (yielding to the host loop) until the runtime
 * is done, so the same test source runs natively and under node.
 */
#include "runtime/rt_int.h"

#include <emscripten.h>
#include <emscripten/eventloop.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

enum { DRAIN_BUDGET = 4096 };

struct rt_system {
    struct rt_system_common c; /* first: rt__common casts */
    rt_mpscq runq;
    bool drain_pending;
    int drain_timeout;       /* the host timeout of the pending drain */
    bool done;
    uint64_t drains;
};

/* One thread: nothing to lock. */
void rt__port_lock(void *lock)
{
    (void)lock;
}

void rt__port_unlock(void *lock)
{
    (void)lock;
}

/* One thread: no other could run a while its sender runs. */
void rt__port_backlog(rt_system *sys, rt_actor *a)
{
    (void)sys, (void)a;
}

static void drain(void *arg);

static void request_drain(rt_system *sys)
{
    if (!sys->drain_pending && !sys->done) {
        sys->drain_pending = true;
        sys->drain_timeout = emscripten_set_timeout(drain, 0, sys);
    }
}

static void finalize(rt_system *sys)
{
    for (;;) {
        rt_actor *a = sys->c.all;
        if (a == NULL)
            break;
        rt__actor_stop_quiet(a);
    }
    sys->done = true;
}

static void drain(void *arg)
{
    rt_system *sys = arg;
    sys->drain_pending = false;
    sys->drains++;
    for (int i = 0; i < DRAIN_BUDGET; i++) {
        rt_mpscq_node *n = rt_mpscq_pop(&sys->runq);
        if (n == NULL)
            break;
        rt_actor *a = (rt_actor *)((char *)n - offsetof(rt_actor, runq));
        if (rt__actor_run(a))
            rt_mpscq_push(&sys->runq, &a->runq);
    }
    if (!rt_mpscq_is_empty(&sys->runq))
        request_drain(sys);
    else if (sys->c.stopping && sys->c.scheduled == 0 && !sys->done)
        finalize(sys);
}

void rt__port_schedule(rt_system *sys, rt_actor *a)
{
    rt_mpscq_push(&sys->runq, &a->runq);
    request_drain(sys);
}

void rt__port_quiescent(rt_system *sys)
{
    request_drain(sys); /* finalizes from the host loop, not mid-behaviour */
}

/* When t is due next: start + delay, then start + (n + 1) * period after
 * its n-th tick (lateness never accumulates); the end of time if that does
 * not fit. */
static uint64_t due_of(const rt_timer *t)
{
    uint64_t after = t->delay_ms;
    if (t->period_ms != 0 && __builtin_mul_overflow(t->seq + 1, t->period_ms, &after))
        return UINT64_MAX;
    uint64_t due;
    return __builtin_add_overflow(t->start_ms, after, &due) ? UINT64_MAX : due;
}

static void timer_due(void *arg);

/* Arms the host timeout for t's next due time. A host timeout takes at most
 * 2^31 - 1 ms (setTimeout fires a longer one at once), so a timer due later
 * waits in steps: timer_due re-arms until it is due. The timeout id is kept
 * in t->port as id + 1, so NULL means unarmed. */
static void arm(rt_timer *t, uint64_t now)
{
    uint64_t due = due_of(t);
    uint64_t wait = due > now ? due - now : 0;
    if (wait > INT32_MAX)
        wait = INT32_MAX;
    int id = emscripten_set_timeout(timer_due, (double)wait, t);
    t->port = (void *)(intptr_t)(id + 1);
}

static void timer_due(void *arg)
{
    rt_timer *t = arg;
    uint64_t now = (uint64_t)emscripten_get_now();

    if (now < due_of(t)) {
        arm(t, now); /* one step of a long wait */
        return;
    }
    t->port = NULL;
    rt__timer_fire(t, now);
    if (t->period_ms == 0 || t->cancelled) {
        rt__timer_release(t); /* the port's reference */
        return;
    }
    arm(t, now);
}

void rt__port_timer_start(rt_system *sys, rt_timer *t)
{
    (void)sys;
    t->start_ms = (uint64_t)emscripten_get_now();
    arm(t, t->start_ms);
}

void rt__port_timer_cancel(rt_system *sys, rt_timer *t)
{
    (void)sys;
    if (t->port != NULL) {
        emscripten_clear_timeout((int)((intptr_t)t->port - 1));
        t->port = NULL;
        rt__timer_release(t); /* the port's reference */
    }
}

rt_system *rt_system_create(const rt_system_opts *opts, int *err)
{
    (void)opts; /* one thread; no loop to borrow */
    rt_system *sys = calloc(1, sizeof *sys);
    if (sys == NULL)
        sf_oom(sizeof *sys);
    rt_mpscq_init(&sys->runq);
    if (err != NULL)
        *err = 0;
    return sys;
}

int rt_system_run(rt_system *sys)
{
#ifdef RT_WASM_BLOCKING_RUN
    while (!sys->done)
        emscripten_sleep(1);
#else
    (void)sys;
#endif
    return 0;
}

void rt_system_stop(rt_system *sys)
{
    if (sys->c.stopping)
        return;
    sys->c.stopping = true;
    rt__timers_cancel_all(sys);
    request_drain(sys);
}

void *rt_system_loop(rt_system *sys)
{
    (void)sys;
    return NULL;
}

bool rt_system_done(rt_system *sys)
{
    return sys->done;
}

void rt_system_destroy(rt_system *sys)
{
    if (sys == NULL)
        return;
    if (!sys->done) {
        /* The host loop cannot be run from here: stop at once, dropping
         * what is still queued. */
        sys->c.stopping = true;
        rt__timers_cancel_all(sys);
        finalize(sys);
    }
    /* A drain asked for during the last one must not run on freed memory. */
    if (sys->drain_pending) {
        emscripten_clear_timeout(sys->drain_timeout);
        sys->drain_pending = false;
    }
    free(sys->c.timers);
    free(sys);
}

void rt_system_stats_get(rt_system *sys, rt_system_stats *out)
{
    out->actors_live = sys->c.actors_live;
    out->messages = sys->c.messages;
    out->steals = 0;
    out->parks = 0;
    out->parked = 0;
    out->loop_wakeups = sys->drains;
}
