/*
 * sched_native.c — the native port: a pool of worker threads for ordinary
 * actors, and the libuv loop thread for pinned actors and timers.
 *
 * Workers: each has a FIFO run queue (a ring under its own mutex) and a
 * one-actor "next" slot. An actor made runnable by the actor a worker is
 * running goes to that worker's next slot, so a request and its answer run
 * back to back on one warm core without waking anyone (Go's runnext); the
 * slot's previous occupant moves to the ring, and an idle worker is woken to
 * steal it. Actors that become runnable from outside the pool go to a global
 * queue, which a worker looks at first now and then (GLOBAL_EVERY). A
 * worker with nothing to do spins briefly, then parks on a condition
 * variable, so idle workers use no CPU.
 *
 * The loop thread: one uv_async handle wakes it for pinned actors, new
 * timers, cancellations and shutdown. Wake-ups coalesce, so each callback
 * drains everything pending (pinned actors up to a budget per pass).
 */
#include "runtime/rt_int.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

enum {
    NEXT_STREAK_MAX = 64, /* runs through the next slot before the ring gets a turn */
    SPIN_ROUNDS = 64,     /* looks for work before parking */
    LOOP_BUDGET = 4096,   /* pinned-actor runs per loop wake-up */
    STEAL_MAX = 32,       /* actors one steal takes at most */
    GLOBAL_EVERY = 61,    /* picks between turns of the global queue first */
};

/* Owner-only fields, the fields thieves use and the parking fields each
 * have their own cache line, so a thief looking at a ring does not take the
 * line its owner writes on every schedule. */
typedef struct worker {
    pthread_t thread;
    rt_system *sys;
    unsigned index;
    rt_actor *next;       /* owner only */
    unsigned next_streak;
    unsigned picks;       /* find_work calls, for GLOBAL_EVERY */
    uint64_t rng;
    _Atomic uint64_t steals; /* written by the owner only; read by stats */

    alignas(64) pthread_mutex_t lock; /* guards ring, head, count */
    rt_actor **ring;
    size_t cap, head;     /* cap is a power of two */
    _Atomic size_t count; /* readable without the lock, to skip empty rings */

    alignas(64) pthread_cond_t wake; /* waits under sys->idle_lock */
    bool parked;          /* under sys->idle_lock */
} worker;

typedef struct timer_handle {
    uv_timer_t h;
    rt_timer *t;
} timer_handle;

struct rt_system {
    struct rt_system_common c; /* first: rt__common casts */
    uv_loop_t *loop;
    uv_loop_t own_loop;
    bool owns_loop;
    uv_async_t async;
    rt_mpscq loopq;  /* pinned actors to run (rt_actor.runq) */
    rt_mpscq timerq; /* timers to arm (rt_timer.cmd) */
    pthread_mutex_t cancel_lock;
    rt_timer **cancels;
    size_t ncancels, cancels_cap;
    pthread_mutex_t all_lock, timer_lock;

    unsigned nworkers;
    worker *workers;
    void (*thread_start)(void *arg);
    void *thread_arg;
    pthread_mutex_t global_lock;
    rt_actor *global_head, *global_tail;
    _Atomic size_t global_count;

    pthread_mutex_t idle_lock;
    worker **idle;
    size_t nidle;
    _Atomic unsigned nparked, nspinning;
    _Atomic bool quit;
    _Atomic bool finalizing, done;
    unsigned open_handles; /* loop thread only */
    _Atomic uint64_t parks, loop_wakeups;
};

static _Thread_local worker *tl_worker;

void rt__port_lock(void *lock)
{
    pthread_mutex_lock(lock);
}

void rt__port_unlock(void *lock)
{
    pthread_mutex_unlock(lock);
}

/* ---- run queues -------------------------------------------------------------------- */

/* Appends v[0..n-1] to w's ring, in order. */
static void ring_push_n(worker *w, rt_actor *const *v, size_t n)
{
    pthread_mutex_lock(&w->lock);
    size_t count = atomic_load_explicit(&w->count, memory_order_relaxed);
    while (count + n > w->cap) {
        size_t ncap = w->cap * 2;
        rt_actor **nr = malloc(ncap * sizeof *nr);
        if (nr == NULL)
            sf_oom(ncap * sizeof *nr);
        for (size_t i = 0; i < count; i++)
            nr[i] = w->ring[(w->head + i) & (w->cap - 1)];
        free(w->ring);
        w->ring = nr;
        w->cap = ncap;
        w->head = 0;
    }
    for (size_t i = 0; i < n; i++)
        w->ring[(w->head + count + i) & (w->cap - 1)] = v[i];
    atomic_store_explicit(&w->count, count + n, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
}

static void ring_push(worker *w, rt_actor *a)
{
    ring_push_n(w, &a, 1);
}

/* Takes the oldest actors of w's ring: up to half of them, at most max, at
 * least one if there is one; returns how many it put in out[]. Unless
 * `locked`, an empty-looking ring is skipped without taking its mutex. */
static size_t ring_take(worker *w, rt_actor **out, size_t max, bool locked)
{
    if (!locked && atomic_load_explicit(&w->count, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_lock(&w->lock);
    size_t n = atomic_load_explicit(&w->count, memory_order_relaxed);
    size_t k = (n + 1) / 2;
    if (k > max)
        k = max;
    for (size_t i = 0; i < k; i++) {
        out[i] = w->ring[w->head];
        w->head = (w->head + 1) & (w->cap - 1);
    }
    atomic_store_explicit(&w->count, n - k, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    return k;
}

static void global_push(rt_system *sys, rt_actor *a)
{
    atomic_store_explicit(&a->runq.next, NULL, memory_order_relaxed);
    pthread_mutex_lock(&sys->global_lock);
    if (sys->global_tail != NULL)
        atomic_store_explicit(&sys->global_tail->runq.next, &a->runq, memory_order_relaxed);
    else
        sys->global_head = a;
    sys->global_tail = a;
    atomic_fetch_add_explicit(&sys->global_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&sys->global_lock);
}

static rt_actor *ring_pop(worker *w)
{
    rt_actor *a;
    return ring_take(w, &a, 1, false) ? a : NULL;
}

static rt_actor *global_take(rt_system *sys, bool locked)
{
    if (!locked && atomic_load_explicit(&sys->global_count, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&sys->global_lock);
    rt_actor *a = sys->global_head;
    if (a != NULL) {
        /* runq is the actor's first-class link; the node is at a fixed offset. */
        rt_mpscq_node *n = atomic_load_explicit(&a->runq.next, memory_order_relaxed);
        sys->global_head = n ? (rt_actor *)((char *)n - offsetof(rt_actor, runq)) : NULL;
        if (sys->global_head == NULL)
            sys->global_tail = NULL;
        atomic_fetch_sub_explicit(&sys->global_count, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&sys->global_lock);
    return a;
}

static rt_actor *global_pop(rt_system *sys)
{
    return global_take(sys, false);
}

/* The last look before parking: every queue, each under its mutex. */
static rt_actor *find_work_locked(worker *w)
{
    rt_system *sys = w->sys;
    rt_actor *a = global_take(sys, true);
    for (unsigned i = 0; a == NULL && i < sys->nworkers; i++)
        if (ring_take(&sys->workers[(w->index + i) % sys->nworkers], &a, 1, true) == 0)
            a = NULL;
    return a;
}

static rt_actor *steal(worker *w)
{
    rt_system *sys = w->sys;
    /* xorshift: start at a random victim so thieves spread out. */
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    unsigned start = (unsigned)(w->rng % sys->nworkers);
    for (unsigned i = 0; i < sys->nworkers; i++) {
        worker *v = &sys->workers[(start + i) % sys->nworkers];
        if (v == w)
            continue;
        /* Half the victim's ring in one go: a thief that took one actor at
         * a time would be back for the next after one short run, and take
         * the victim's lock once per message. */
        rt_actor *got[STEAL_MAX];
        size_t n = ring_take(v, got, STEAL_MAX, false);
        if (n > 0) {
            if (n > 1)
                ring_push_n(w, got + 1, n - 1);
            atomic_store_explicit(&w->steals,
                atomic_load_explicit(&w->steals, memory_order_relaxed) + n, memory_order_relaxed);
            return got[0];
        }
    }
    return NULL;
}

static void wake_one(rt_system *sys)
{
    pthread_mutex_lock(&sys->idle_lock);
    if (sys->nidle > 0) {
        worker *w = sys->idle[--sys->nidle];
        w->parked = false;
        atomic_fetch_sub_explicit(&sys->nparked, 1, memory_order_relaxed);
        pthread_cond_signal(&w->wake);
    }
    pthread_mutex_unlock(&sys->idle_lock);
}

/* After making work visible (under a queue mutex): wake a parked worker
 * unless one is already looking. A parking worker increments nparked and
 * then takes every queue's mutex for its last look (find_work_locked), so
 * either its look comes after our unlock and it sees the work, or its
 * increment happened before our lock and we see it here. */
static void maybe_wake(rt_system *sys)
{
    if (atomic_load_explicit(&sys->nparked, memory_order_relaxed) > 0 &&
        atomic_load_explicit(&sys->nspinning, memory_order_relaxed) == 0)
        wake_one(sys);
}

void rt__port_schedule(rt_system *sys, rt_actor *a)
{
    if (a->pinned) {
        rt_mpscq_push(&sys->loopq, &a->runq);
        uv_async_send(&sys->async);
        return;
    }
    worker *w = tl_worker;
    if (w != NULL && w->sys == sys) {
        rt_actor *prev = w->next;
        w->next = a;
        if (prev != NULL) {
            ring_push(w, prev);
            maybe_wake(sys);
        }
        return;
    }
    global_push(sys, a);
    maybe_wake(sys);
}

/* The next slot is the owner's alone: an actor left there while the actor
 * that scheduled it keeps sending (a producer's loop) would wait for that
 * whole run with its mailbox growing, and the other workers could not take
 * it. Once it has a backlog it goes to the ring, where they can. */
void rt__port_backlog(rt_system *sys, rt_actor *a)
{
    worker *w = tl_worker;
    if (w != NULL && w->sys == sys && w->next == a) {
        w->next = NULL;
        ring_push(w, a);
        maybe_wake(sys);
    }
}

static rt_actor *find_work(worker *w)
{
    rt_actor *a;
    /* A worker whose own actors always have work (an actor re-sending to
     * itself, a ping-pong pair) would never get to the global queue, and
     * what timers, pinned actors and outside threads make runnable would
     * wait for ever: now and then it goes first (Go does this every 61
     * schedules; a prime does not fall in step with a cycle of actors). */
    if (++w->picks % GLOBAL_EVERY == 0 && (a = global_pop(w->sys)) != NULL)
        return a;
    a = w->next;
    if (a != NULL) {
        w->next = NULL;
        if (++w->next_streak <= NEXT_STREAK_MAX)
            return a;
        ring_push(w, a); /* let the ring's actors have a turn */
        w->next_streak = 0;
    }
    if ((a = ring_pop(w)) != NULL || (a = global_pop(w->sys)) != NULL || (a = steal(w)) != NULL)
        return a;
    return NULL;
}

static void run(worker *w, rt_actor *a)
{
    if (rt__actor_run(a)) {
        ring_push(w, a); /* used its batch: to the back, for fairness */
        if (atomic_load_explicit(&w->count, memory_order_relaxed) > 1)
            maybe_wake(w->sys);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    rt_system *sys = w->sys;
    tl_worker = w;
    if (sys->thread_start != NULL)
        sys->thread_start(sys->thread_arg);

    while (!atomic_load_explicit(&sys->quit, memory_order_acquire)) {
        rt_actor *a = find_work(w);
        if (a != NULL) {
            run(w, a);
            continue;
        }
        atomic_fetch_add_explicit(&sys->nspinning, 1, memory_order_relaxed);
        for (int i = 0; i < SPIN_ROUNDS && a == NULL; i++) {
            sched_yield();
            a = find_work(w);
        }
        atomic_fetch_sub_explicit(&sys->nspinning, 1, memory_order_relaxed);
        if (a != NULL) {
            run(w, a);
            continue;
        }

        pthread_mutex_lock(&sys->idle_lock);
        if (atomic_load_explicit(&sys->quit, memory_order_acquire)) {
            pthread_mutex_unlock(&sys->idle_lock);
            break;
        }
        w->parked = true;
        sys->idle[sys->nidle++] = w;
        atomic_fetch_add_explicit(&sys->nparked, 1, memory_order_seq_cst);
        pthread_mutex_unlock(&sys->idle_lock);

        a = find_work_locked(w); /* last look, after announcing we park */
        pthread_mutex_lock(&sys->idle_lock);
        if (a != NULL) {
            if (w->parked) {
                for (size_t i = 0; i < sys->nidle; i++) {
                    if (sys->idle[i] == w) {
                        sys->idle[i] = sys->idle[--sys->nidle];
                        break;
                    }
                }
                w->parked = false;
                atomic_fetch_sub_explicit(&sys->nparked, 1, memory_order_relaxed);
            }
            pthread_mutex_unlock(&sys->idle_lock);
            run(w, a);
            continue;
        }
        atomic_fetch_add_explicit(&sys->parks, 1, memory_order_relaxed);
        while (w->parked && !atomic_load_explicit(&sys->quit, memory_order_acquire))
            pthread_cond_wait(&w->wake, &sys->idle_lock);
        pthread_mutex_unlock(&sys->idle_lock);
    }
    tl_worker = NULL;
    return NULL;
}

/* ---- the loop thread ----------------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
    rt_system *sys = h->data;
    sys->open_handles--;
}

static void timer_closed(uv_handle_t *h)
{
    timer_handle *th = (timer_handle *)h;
    rt_system *sys = th->t->to->sys;
    sys->open_handles--;
    rt__timer_release(th->t); /* the port's reference */
    free(th);
}

static void timer_due(uv_timer_t *h)
{
    timer_handle *th = (timer_handle *)h;
    rt_timer *t = th->t;
    uint64_t now = uv_now(h->loop);

    rt__timer_fire(t, now);
    if (t->period_ms == 0 || atomic_load_explicit(&t->cancelled, memory_order_acquire)) {
        t->port = NULL;
        uv_close((uv_handle_t *)h, timer_closed);
        return;
    }
    /* Due times are start + n * period, computed afresh each time, so the
     * loop's lateness never accumulates. */
    uint64_t due = t->start_ms + (t->seq + 1) * t->period_ms;
    uv_timer_start(h, timer_due, due > now ? due - now : 0, 0);
}

static void arm_timers(rt_system *sys)
{
    rt_mpscq_node *n;
    while ((n = rt_mpscq_pop(&sys->timerq)) != NULL) {
        rt_timer *t = (rt_timer *)((char *)n - offsetof(rt_timer, cmd));
        if (atomic_load_explicit(&t->cancelled, memory_order_acquire) ||
            atomic_load_explicit(&sys->finalizing, memory_order_relaxed)) {
            rt__timer_release(t);
            continue;
        }
        timer_handle *th = malloc(sizeof *th);
        if (th == NULL)
            sf_oom(sizeof *th);
        th->t = t;
        uv_timer_init(sys->loop, &th->h);
        sys->open_handles++;
        t->port = th;
        t->start_ms = uv_now(sys->loop);
        uv_timer_start(&th->h, timer_due, t->delay_ms, 0);
    }
}

static void disarm_timers(rt_system *sys)
{
    pthread_mutex_lock(&sys->cancel_lock);
    rt_timer **v = sys->cancels;
    size_t n = sys->ncancels;
    sys->cancels = NULL;
    sys->ncancels = sys->cancels_cap = 0;
    pthread_mutex_unlock(&sys->cancel_lock);
    for (size_t i = 0; i < n; i++) {
        rt_timer *t = v[i];
        timer_handle *th = t->port;
        if (th != NULL && !uv_is_closing((uv_handle_t *)&th->h)) {
            t->port = NULL;
            uv_timer_stop(&th->h);
            uv_close((uv_handle_t *)&th->h, timer_closed);
        }
        rt__timer_release(t); /* the cancel list's reference */
    }
    free(v);
}

static void run_pinned(rt_system *sys)
{
    for (int i = 0; i < LOOP_BUDGET; i++) {
        rt_mpscq_node *n = rt_mpscq_pop(&sys->loopq);
        if (n == NULL)
            return;
        rt_actor *a = (rt_actor *)((char *)n - offsetof(rt_actor, runq));
        if (rt__actor_run(a))
            rt_mpscq_push(&sys->loopq, &a->runq);
    }
    uv_async_send(&sys->async); /* budget spent: let I/O run, then continue */
}

static void finalize(rt_system *sys)
{
    atomic_store_explicit(&sys->finalizing, true, memory_order_relaxed);
    /* Timers cancelled by the stop after this wake-up's first pass. */
    arm_timers(sys);
    disarm_timers(sys);
    for (;;) {
        pthread_mutex_lock(&sys->all_lock);
        rt_actor *a = sys->c.all;
        pthread_mutex_unlock(&sys->all_lock);
        if (a == NULL)
            break;
        rt__actor_stop_quiet(a);
    }
    pthread_mutex_lock(&sys->idle_lock);
    atomic_store_explicit(&sys->quit, true, memory_order_release);
    for (size_t i = 0; i < sys->nidle; i++)
        pthread_cond_signal(&sys->idle[i]->wake);
    pthread_mutex_unlock(&sys->idle_lock);
    uv_close((uv_handle_t *)&sys->async, handle_closed);
    atomic_store_explicit(&sys->done, true, memory_order_release);
}

static void loop_wakeup(uv_async_t *h)
{
    rt_system *sys = h->data;
    atomic_fetch_add_explicit(&sys->loop_wakeups, 1, memory_order_relaxed);
    arm_timers(sys);
    disarm_timers(sys);
    run_pinned(sys);
    if (atomic_load_explicit(&sys->c.stopping, memory_order_acquire) &&
        !atomic_load_explicit(&sys->finalizing, memory_order_relaxed) &&
        atomic_load_explicit(&sys->c.scheduled, memory_order_acquire) == 0)
        finalize(sys);
}

void rt__port_quiescent(rt_system *sys)
{
    uv_async_send(&sys->async);
}

void rt__port_timer_start(rt_system *sys, rt_timer *t)
{
    rt_mpscq_push(&sys->timerq, &t->cmd);
    uv_async_send(&sys->async);
}

void rt__port_timer_cancel(rt_system *sys, rt_timer *t)
{
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    pthread_mutex_lock(&sys->cancel_lock);
    if (sys->ncancels == sys->cancels_cap) {
        sys->cancels = sf_grow(sys->cancels, &sys->cancels_cap, sizeof *sys->cancels);
    }
    sys->cancels[sys->ncancels++] = t;
    pthread_mutex_unlock(&sys->cancel_lock);
    uv_async_send(&sys->async);
}

/* ---- the system ---------------------------------------------------------------------- */

rt_system *rt_system_create(const rt_system_opts *opts, int *err)
{
    static const rt_system_opts defaults;
    rt_system *sys;
    unsigned started = 0;
    int rc = RT_ELOOP;

    if (opts == NULL)
        opts = &defaults;
    sys = calloc(1, sizeof *sys);
    if (sys == NULL)
        sf_oom(sizeof *sys);
    if (opts->loop != NULL) {
        sys->loop = opts->loop;
    } else {
        if (uv_loop_init(&sys->own_loop) != 0)
            goto fail_loop;
        sys->loop = &sys->own_loop;
        sys->owns_loop = true;
    }
    if (uv_async_init(sys->loop, &sys->async, loop_wakeup) != 0)
        goto fail_async;
    sys->async.data = sys;
    sys->open_handles = 1;
    rt_mpscq_init(&sys->loopq);
    rt_mpscq_init(&sys->timerq);
    pthread_mutex_init(&sys->all_lock, NULL);
    pthread_mutex_init(&sys->timer_lock, NULL);
    pthread_mutex_init(&sys->cancel_lock, NULL);
    pthread_mutex_init(&sys->global_lock, NULL);
    pthread_mutex_init(&sys->idle_lock, NULL);
    sys->c.all_lock = &sys->all_lock;
    sys->c.timer_lock = &sys->timer_lock;

    sys->nworkers = opts->workers ? opts->workers : uv_available_parallelism();
    sys->thread_start = opts->thread_start;
    sys->thread_arg = opts->thread_arg;
    sys->workers = aligned_alloc(alignof(worker), sys->nworkers * sizeof *sys->workers);
    if (sys->workers != NULL)
        memset(sys->workers, 0, sys->nworkers * sizeof *sys->workers);
    sys->idle = calloc(sys->nworkers, sizeof *sys->idle);
    if (sys->workers == NULL || sys->idle == NULL)
        sf_oom(sys->nworkers * sizeof *sys->workers);
    for (unsigned i = 0; i < sys->nworkers; i++) {
        worker *w = &sys->workers[i];
        w->sys = sys;
        w->index = i;
        w->cap = 256;
        w->ring = malloc(w->cap * sizeof *w->ring);
        if (w->ring == NULL)
            sf_oom(w->cap * sizeof *w->ring);
        w->rng = 0x9e3779b97f4a7c15ull * (i + 1);
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
    }
    rc = RT_ETHREAD;
    for (; started < sys->nworkers; started++)
        if (pthread_create(&sys->workers[started].thread, NULL, worker_main, &sys->workers[started]) != 0)
            goto fail_threads;
    if (err != NULL)
        *err = 0;
    return sys;

fail_threads:
    atomic_store(&sys->quit, true);
    pthread_mutex_lock(&sys->idle_lock);
    for (size_t i = 0; i < sys->nidle; i++)
        pthread_cond_signal(&sys->idle[i]->wake);
    pthread_mutex_unlock(&sys->idle_lock);
    for (unsigned i = 0; i < started; i++)
        pthread_join(sys->workers[i].thread, NULL);
    for (unsigned i = 0; i < sys->nworkers; i++)
        free(sys->workers[i].ring);
    free(sys->workers);
    free(sys->idle);
    uv_close((uv_handle_t *)&sys->async, NULL);
    uv_run(sys->loop, UV_RUN_NOWAIT);
fail_async:
    if (sys->owns_loop)
        uv_loop_close(&sys->own_loop);
fail_loop:
    free(sys);
    if (err != NULL)
        *err = rc;
    return NULL;
}

int rt_system_run(rt_system *sys)
{
    if (!sys->owns_loop)
        return 0;
    return uv_run(sys->loop, UV_RUN_DEFAULT) < 0 ? RT_ELOOP : 0;
}

void rt_system_stop(rt_system *sys)
{
    if (atomic_exchange_explicit(&sys->c.stopping, true, memory_order_acq_rel))
        return;
    rt__timers_cancel_all(sys);
    uv_async_send(&sys->async);
}

void *rt_system_loop(rt_system *sys)
{
    return sys->loop;
}

bool rt_system_done(rt_system *sys)
{
    return atomic_load_explicit(&sys->done, memory_order_acquire) && sys->open_handles == 0;
}

void rt_system_destroy(rt_system *sys)
{
    if (sys == NULL)
        return;
    if (!rt_system_done(sys) && sys->owns_loop) {
        /* Never stopped, or stopped but not run to the end: finish as
         * rt_system_stop would, so no thread is left parked forever. */
        rt_system_stop(sys);
        uv_run(sys->loop, UV_RUN_DEFAULT);
    }
    /* Every worker first: a worker's last look before parking takes the
     * other workers' locks. */
    for (unsigned i = 0; i < sys->nworkers; i++)
        pthread_join(sys->workers[i].thread, NULL);
    for (unsigned i = 0; i < sys->nworkers; i++) {
        free(sys->workers[i].ring);
        pthread_mutex_destroy(&sys->workers[i].lock);
        pthread_cond_destroy(&sys->workers[i].wake);
    }
    if (sys->owns_loop)
        uv_loop_close(&sys->own_loop);
    free(sys->workers);
    free(sys->idle);
    free(sys->cancels);
    free(sys->c.timers);
    pthread_mutex_destroy(&sys->all_lock);
    pthread_mutex_destroy(&sys->timer_lock);
    pthread_mutex_destroy(&sys->cancel_lock);
    pthread_mutex_destroy(&sys->global_lock);
    pthread_mutex_destroy(&sys->idle_lock);
    free(sys);
}

void rt_system_stats_get(rt_system *sys, rt_system_stats *out)
{
    out->actors_live = atomic_load_explicit(&sys->c.actors_live, memory_order_relaxed);
    out->messages = atomic_load_explicit(&sys->c.messages, memory_order_relaxed);
    out->steals = 0;
    for (unsigned i = 0; i < sys->nworkers; i++)
        out->steals += atomic_load_explicit(&sys->workers[i].steals, memory_order_relaxed);
    out->parks = atomic_load_explicit(&sys->parks, memory_order_relaxed);
    out->parked = atomic_load_explicit(&sys->nparked, memory_order_relaxed);
    out->loop_wakeups = atomic_load_explicit(&sys->loop_wakeups, memory_order_relaxed);
}
