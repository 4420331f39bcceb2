/*
 * actor.c — the portable half of the runtime: messages, actors, sending,
 * running a batch, overload policies, monitoring, request/reply and the
 * timer table. Which thread runs an actor is the port's business
 * (sched_native.c, sched_wasm.c).
 */
#include "runtime/rt_int.h"

#include "runtime/pool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Thread_local rt_actor *rt__current;

/* ---- rare-path actor state ----------------------------------------------------- */

typedef struct pending {
    uint64_t req;
    int64_t timer;
} pending;

struct rt_actor_ext {
    atomic_flag lock;            /* guards watchers and muted */
    rt_actor **watchers;
    size_t nwatchers, watchers_cap;
    rt_actor **muted;            /* senders this actor has muted */
    size_t nmuted, muted_cap;
    _Atomic uint32_t has_muted;  /* nmuted > 0, readable without the lock */
    pending *pending;            /* own requests awaiting a reply; owner only */
    size_t npending, pending_cap;
    _Atomic uint64_t shed, rejected, mutes;
};

static struct rt_actor_ext *ext_of(rt_actor *a)
{
    struct rt_actor_ext *e = atomic_load_explicit(&a->ext, memory_order_acquire);
    if (e != NULL)
        return e;
    struct rt_actor_ext *fresh = sf_calloc(1, sizeof *fresh);
    atomic_flag_clear(&fresh->lock);
    /* acq_rel: publish the initialised struct, or see the winner's. */
    if (atomic_compare_exchange_strong_explicit(&a->ext, &e, fresh,
            memory_order_acq_rel, memory_order_acquire))
        return fresh;
    free(fresh);
    return e;
}

static void ext_lock(struct rt_actor_ext *e)
{
    /* Held for a few pointer moves only; contention is rare (monitor,
     * mute and stop), so spinning is cheaper than a mutex's syscall. */
    while (atomic_flag_test_and_set_explicit(&e->lock, memory_order_acquire))
        ;
}

static void ext_unlock(struct rt_actor_ext *e)
{
    atomic_flag_clear_explicit(&e->lock, memory_order_release);
}

static void list_add(rt_actor ***v, size_t *n, size_t *cap, rt_actor *a)
{
    if (*n == *cap) {
        *v = sf_grow(*v, cap, sizeof **v);
    }
    (*v)[(*n)++] = a;
}

/* ---- messages --------------------------------------------------------------------- */

rt_msg *rt_msg_new(uint32_t type, size_t size)
{
    unsigned cls;
    if (size < sizeof(rt_msg))
        size = sizeof(rt_msg);
    rt_msg *m = rt__pool_alloc(size, &cls);
    m->type = type;
    m->flags = cls << MF_CLASS_SHIFT;
    return m;
}

void rt_take(rt_actor *self, rt_msg *msg)
{
    if (self->current == msg)
        self->current = NULL;
}

static bool timer_detach(rt_msg *m);

void rt_msg_free(rt_msg *msg)
{
    if (msg == NULL)
        return;
    if (msg->release != NULL)
        msg->release(msg);
    if (msg->timer != NULL)
        timer_detach(msg);
    if ((msg->flags & MF_REQUEST) && msg->sender != NULL)
        rt_actor_release(msg->sender); /* requests keep their sender alive for the reply */
    rt__pool_free(msg, (msg->flags & MF_CLASS_MASK) >> MF_CLASS_SHIFT);
}

/* ---- actors ------------------------------------------------------------------------- */

rt_actor *rt_spawn(rt_system *sys, rt_behaviour behaviour, const rt_actor_opts *opts)
{
    static const rt_actor_opts defaults;
    struct rt_system_common *c = rt__common(sys);

    if (opts == NULL)
        opts = &defaults;
    if (behaviour == NULL || atomic_load_explicit(&c->stopping, memory_order_acquire))
        return NULL;
    size_t size = sizeof(rt_actor) + opts->state_size;
    rt_actor *a = malloc(size);
    if (a == NULL)
        sf_oom(size);
    memset(a, 0, size);
    rt_mpscq_init(&a->mbox);
    /* Born idle: the first message schedules it. */
    rt_mpscq_mark_empty(&a->mbox);
    a->behaviour = behaviour;
    a->sys = sys;
    a->id = atomic_fetch_add_explicit(&c->next_actor_id, 1, memory_order_relaxed) + 1;
    atomic_init(&a->refs, 2); /* the caller's handle + alive */
    a->high_water = opts->high_water;
    a->policy = (uint8_t)opts->policy;
    a->pinned = opts->pinned;
    a->finalize = opts->finalize;
    a->name = opts->name;

    rt__port_lock(c->all_lock);
    a->all_next = c->all;
    if (c->all != NULL)
        c->all->all_prev = a;
    c->all = a;
    rt__port_unlock(c->all_lock);
    atomic_fetch_add_explicit(&c->actors_live, 1, memory_order_relaxed);
    return a;
}

void *rt_state(rt_actor *a)
{
    return a->state;
}

uint64_t rt_actor_id(const rt_actor *a)
{
    return a->id;
}

rt_system *rt_actor_system(const rt_actor *a)
{
    return a->sys;
}

rt_actor *rt_actor_retain(rt_actor *a)
{
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    return a;
}

static void actor_free(rt_actor *a)
{
    rt_mpscq_node *n;
    /* Messages pushed by senders that raced with the stop. */
    while ((n = rt_mpscq_pop(&a->mbox)) != NULL)
        rt_msg_free((rt_msg *)n);
    struct rt_actor_ext *e = atomic_load_explicit(&a->ext, memory_order_acquire);
    if (e != NULL) {
        free(e->watchers);
        free(e->muted);
        free(e->pending);
        free(e);
    }
    free(a);
}

void rt_actor_release(rt_actor *a)
{
    /* acq_rel: the last release sees every other holder's writes. */
    if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1)
        actor_free(a);
}

void rt_actor_stats_get(rt_actor *a, rt_actor_stats *out)
{
    struct rt_actor_ext *e = atomic_load_explicit(&a->ext, memory_order_acquire);
    uint64_t sent = atomic_load_explicit(&a->sent, memory_order_relaxed);
    uint64_t recv = atomic_load_explicit(&a->received, memory_order_relaxed);

    memset(out, 0, sizeof *out);
    out->received = recv;
    out->depth = sent > recv ? sent - recv : 0;
    out->max_depth = atomic_load_explicit(&a->max_depth, memory_order_relaxed);
    if (e != NULL) {
        out->shed = atomic_load_explicit(&e->shed, memory_order_relaxed);
        out->rejected = atomic_load_explicit(&e->rejected, memory_order_relaxed);
        out->mutes = atomic_load_explicit(&e->mutes, memory_order_relaxed);
    }
}

static uint64_t depth_of(rt_actor *a)
{
    uint64_t sent = atomic_load_explicit(&a->sent, memory_order_seq_cst);
    uint64_t recv = atomic_load_explicit(&a->received, memory_order_seq_cst);
    return sent > recv ? sent - recv : 0;
}

static void note_depth(rt_actor *a, uint64_t depth)
{
    uint64_t max = atomic_load_explicit(&a->max_depth, memory_order_relaxed);
    while (depth > max &&
        !atomic_compare_exchange_weak_explicit(&a->max_depth, &max, depth,
            memory_order_relaxed, memory_order_relaxed))
        ;
}

static void schedule_if_marked(rt_actor *to, bool was_marked)
{
    if (was_marked) {
        atomic_fetch_add_explicit(&rt__common(to->sys)->scheduled, 1, memory_order_relaxed);
        rt__port_schedule(to->sys, to);
    }
}

/* Pushes without checks; the caller has decided to deliver. */
static void deliver(rt_actor *to, rt_msg *msg)
{
    schedule_if_marked(to, rt_mpscq_push(&to->mbox, &msg->node));
}

/* True when sends to `to` fail with RT_ESTOPPED: it or the runtime stopped. */
static bool refuses(rt_actor *to)
{
    return atomic_load_explicit(&rt__common(to->sys)->stopping, memory_order_acquire) ||
        (atomic_load_explicit(&to->flags, memory_order_acquire) & AF_DEAD);
}

/* Counts one more message for `to` and returns the depth it makes. */
static uint64_t count_send(rt_actor *to)
{
    uint64_t sent = atomic_fetch_add_explicit(&to->sent, 1, memory_order_relaxed) + 1;
    uint64_t recv = atomic_load_explicit(&to->received, memory_order_relaxed);
    /* Preempted between the two, we may find `to` has taken more than our
     * count (messages others sent since): it is empty, not 2^64 deep. */
    uint64_t depth = sent > recv ? sent - recv : 0;
    note_depth(to, depth);
    if (depth != 0 && (depth & (BACKLOG - 1)) == 0)
        rt__port_backlog(to->sys, to);
    return depth;
}

/* Frees a message a send gave up on. If it is the message being handled,
 * the runtime no longer frees it when the behaviour returns. */
static void drop_unsent(rt_msg *msg)
{
    rt_actor *cur = rt__current;
    if (cur != NULL && cur->current == msg)
        cur->current = NULL;
    rt_msg_free(msg);
}

/* Sends a message the runtime sends for itself: a timer's message or tick,
 * a request's timeout or shed reply, a DOWN. It goes past the receiver's
 * overload policy: it has no sender to take it back or to mute, and
 * dropping it would leave a request unanswered, a periodic timer stalled or
 * a watcher uninformed. Frees msg and returns RT_ESTOPPED when `to` or the
 * runtime has stopped. */
static int send_own(rt_actor *to, rt_msg *msg)
{
    if (refuses(to)) {
        rt_msg_free(msg);
        return RT_ESTOPPED;
    }
    count_send(to);
    deliver(to, msg);
    return 0;
}

static void shed_reply(rt_msg *msg)
{
    rt_shed *s = RT_MSG_NEW(rt_shed, RT_MSG_SHED);
    s->hdr.req_id = msg->req_id;
    s->shed_type = msg->type;
    s->hdr.flags |= MF_REPLY;
    send_own(msg->sender, &s->hdr);
}

/* Whether a sender may be muted (Pony's rule): not while its own mailbox is
 * over its mark or it holds senders muted, for it must run to drain, and
 * muting it would hold up those waiting on it, and in a cycle itself. Nor
 * once it is stopping (its finalizer and last message may still send): it
 * will not run again to be parked, and the mute would never be let go. */
static bool may_mute(rt_actor *self)
{
    /* Relaxed: this thread set those flags itself (rt_stop, stop_actor). */
    if (atomic_load_explicit(&self->flags, memory_order_relaxed) & (AF_STOPPING | AF_DEAD))
        return false;
    if (self->high_water != 0 && depth_of(self) > self->high_water)
        return false;
    struct rt_actor_ext *e = atomic_load_explicit(&self->ext, memory_order_acquire);
    /* Relaxed: a hint that saves a needless mute; mute_self's handshake is
     * what keeps a cycle from closing. */
    return e == NULL || atomic_load_explicit(&e->has_muted, memory_order_relaxed) == 0;
}

int rt_send(rt_actor *to, rt_msg *msg)
{
    if (to == NULL || msg == NULL)
        return RT_EINVAL;
    rt_actor *cur = rt__current;
    bool was_current = cur != NULL && cur->current == msg;

    if (refuses(to)) {
        drop_unsent(msg);
        return RT_ESTOPPED;
    }
    if (!(msg->flags & MF_REQUEST))
        msg->sender = cur; /* identity only: a plain message does not keep it alive */

    uint64_t depth = count_send(to);
    if (to->high_water != 0 && depth > to->high_water) {
        rt_overload policy = (rt_overload)to->policy;
        if (policy == RT_OVERLOAD_MUTE && (cur == NULL || cur == to))
            policy = RT_OVERLOAD_REJECT; /* nothing to mute: push back instead */
        switch (policy) {
        case RT_OVERLOAD_REJECT:
            atomic_fetch_sub_explicit(&to->sent, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&ext_of(to)->rejected, 1, memory_order_relaxed);
            return RT_EOVERLOAD; /* the caller keeps msg */
        case RT_OVERLOAD_SHED:
            atomic_fetch_sub_explicit(&to->sent, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&ext_of(to)->shed, 1, memory_order_relaxed);
            if ((msg->flags & MF_REQUEST) && msg->sender != NULL)
                shed_reply(msg);
            drop_unsent(msg);
            return 0;
        case RT_OVERLOAD_MUTE:
            if (cur->mute_by == NULL && may_mute(cur))
                cur->mute_by = rt_actor_retain(to);
            break;
        case RT_OVERLOAD_NONE:
            break;
        }
    }
    if (was_current)
        cur->current = NULL;
    deliver(to, msg);
    return 0;
}

static void down_release(rt_msg *msg)
{
    rt_actor_release(((rt_down *)msg)->actor);
}

/* Tells watcher that target stopped. The DOWN holds a reference to target
 * until it is freed, so the watcher can look at it whoever else let go. */
static void send_down(rt_actor *watcher, rt_actor *target)
{
    rt_down *d = RT_MSG_NEW(rt_down, RT_MSG_DOWN);
    d->actor = rt_actor_retain(target);
    d->actor_id = target->id;
    d->hdr.release = down_release;
    send_own(watcher, &d->hdr);
}

void rt_monitor(rt_actor *watcher, rt_actor *target)
{
    struct rt_actor_ext *e = ext_of(target);
    bool dead;

    ext_lock(e);
    dead = atomic_load_explicit(&target->flags, memory_order_acquire) & AF_DEAD;
    if (!dead)
        list_add(&e->watchers, &e->nwatchers, &e->watchers_cap, rt_actor_retain(watcher));
    ext_unlock(e);
    if (dead)
        send_down(watcher, target);
}

void rt_stop(rt_actor *self)
{
    atomic_fetch_or_explicit(&self->flags, AF_STOPPING, memory_order_relaxed);
}

/* ---- muting ------------------------------------------------------------------------ */

static uint64_t low_water(const rt_actor *a)
{
    return a->high_water / 2;
}

/* Takes every sender muted by a and schedules it again. */
static void unmute_all(rt_actor *a)
{
    struct rt_actor_ext *e = atomic_load_explicit(&a->ext, memory_order_acquire);
    if (e == NULL || atomic_load_explicit(&e->has_muted, memory_order_seq_cst) == 0)
        return;
    ext_lock(e);
    rt_actor **v = e->muted;
    size_t n = e->nmuted;
    e->muted = NULL;
    e->nmuted = e->muted_cap = 0;
    atomic_store_explicit(&e->has_muted, 0, memory_order_seq_cst);
    ext_unlock(e);
    for (size_t i = 0; i < n; i++) {
        /* seq_cst: the other side of mute_self's handshake reads it. */
        atomic_fetch_and_explicit(&v[i]->flags, ~(uint32_t)AF_MUTED, memory_order_seq_cst);
        rt__port_schedule(v[i]->sys, v[i]); /* still counted as scheduled */
    }
    free(v);
}

/* Called at the end of a's run: wake muted senders once a has drained.
 * With mute_self this is a Dekker handshake: a stores `received` then loads
 * has_muted; the sender stores has_muted then loads `received`, all
 * seq_cst, so at least one of them sees the other and no sender stays
 * parked behind a drained mailbox. */
static void unmute_check(rt_actor *a)
{
    if (a->policy != RT_OVERLOAD_MUTE)
        return;
    atomic_store_explicit(&a->received,
        atomic_load_explicit(&a->received, memory_order_relaxed), memory_order_seq_cst);
    struct rt_actor_ext *e = atomic_load_explicit(&a->ext, memory_order_acquire);
    if (e != NULL && atomic_load_explicit(&e->has_muted, memory_order_seq_cst) != 0 &&
        depth_of(a) <= low_water(a))
        unmute_all(a);
}

/* Parks self on by's muted list. Returns true when self is parked (then it
 * must not be touched), false when it should keep running. */
static bool mute_self(rt_actor *self)
{
    rt_actor *by = self->mute_by;
    self->mute_by = NULL;
    struct rt_actor_ext *e = ext_of(by);
    bool parked = false;

    /* Never park on an actor that is muted itself: a cycle of actors each
     * muted on the next would wait for ever. A Dekker handshake, seq_cst
     * both: each actor stores its AF_MUTED, then loads its receiver's, so
     * of a cycle muting at once the last to store sees the flag of the one
     * it would mute on, and keeps running. */
    atomic_fetch_or_explicit(&self->flags, AF_MUTED, memory_order_seq_cst);
    if (!(atomic_load_explicit(&by->flags, memory_order_seq_cst) & AF_MUTED)) {
        ext_lock(e);
        if (!(atomic_load_explicit(&by->flags, memory_order_acquire) & AF_DEAD)) {
            list_add(&e->muted, &e->nmuted, &e->muted_cap, self);
            atomic_store_explicit(&e->has_muted, 1, memory_order_seq_cst);
            atomic_fetch_add_explicit(&e->mutes, 1, memory_order_relaxed);
            parked = true;
        }
        ext_unlock(e);
    }
    if (parked && depth_of(by) <= low_water(by)) { /* seq_cst: see unmute_check */
        /* by drained meanwhile: take ourselves back unless by already took
         * us (then by schedules us). */
        ext_lock(e);
        for (size_t i = 0; i < e->nmuted; i++) {
            if (e->muted[i] == self) {
                e->muted[i] = e->muted[--e->nmuted];
                if (e->nmuted == 0)
                    atomic_store_explicit(&e->has_muted, 0, memory_order_seq_cst);
                parked = false;
                break;
            }
        }
        ext_unlock(e);
    }
    if (!parked)
        atomic_fetch_and_explicit(&self->flags, ~(uint32_t)AF_MUTED, memory_order_seq_cst);
    rt_actor_release(by);
    return parked;
}

/* ---- request / reply ------------------------------------------------------------------ */

static void pending_add(rt_actor *self, uint64_t req, int64_t timer)
{
    struct rt_actor_ext *e = ext_of(self);
    if (e->npending == e->pending_cap) {
        e->pending = sf_grow(e->pending, &e->pending_cap, sizeof *e->pending);
    }
    e->pending[e->npending++] = (pending){ req, timer };
}

/* Removes req from self's pending requests; returns its timer id, or 0 when
 * it is not pending (answered, timed out or never asked). */
static int64_t pending_take(rt_actor *self, uint64_t req)
{
    struct rt_actor_ext *e = atomic_load_explicit(&self->ext, memory_order_acquire);
    if (e == NULL)
        return 0;
    for (size_t i = 0; i < e->npending; i++) {
        if (e->pending[i].req == req) {
            int64_t t = e->pending[i].timer;
            e->pending[i] = e->pending[--e->npending];
            return t;
        }
    }
    return 0;
}

int64_t rt_request(rt_actor *self, rt_actor *to, rt_msg *msg, uint64_t timeout_ms)
{
    struct rt_system_common *c = rt__common(self->sys);
    if (to == NULL || msg == NULL) {
        drop_unsent(msg);
        return RT_EINVAL;
    }
    uint64_t req = atomic_fetch_add_explicit(&c->next_req_id, 1, memory_order_relaxed) + 1;

    rt_timeout *tm = RT_MSG_NEW(rt_timeout, RT_MSG_TIMEOUT);
    tm->hdr.req_id = req;
    int64_t timer = rt_send_after(self, timeout_ms, &tm->hdr);
    if (timer < 0) {
        drop_unsent(msg);
        return timer;
    }
    pending_add(self, req, timer);
    if ((msg->flags & MF_REQUEST) && msg->sender != NULL)
        rt_actor_release(msg->sender); /* a request passed on asks for self now */
    msg->req_id = req;
    msg->flags |= MF_REQUEST;
    msg->sender = rt_actor_retain(self);
    int rc = rt_send(to, msg);
    if (rc < 0) {
        if (rc != RT_ESTOPPED) /* rt_send left msg with us */
            drop_unsent(msg);
        pending_take(self, req);
        rt_timer_cancel(self->sys, timer);
        return rc;
    }
    return (int64_t)req;
}

int rt_reply(const rt_msg *request, rt_msg *reply)
{
    if (request == NULL || reply == NULL || !(request->flags & MF_REQUEST) ||
        request->sender == NULL) {
        rt_msg_free(reply);
        return RT_EINVAL;
    }
    reply->req_id = request->req_id;
    reply->flags |= MF_REPLY;
    return rt_send(request->sender, reply);
}

/* Decides whether a popped message reaches the behaviour: drops ticks and
 * timeouts of cancelled timers, and replies or timeouts whose request was
 * already settled. Frees what it drops. What it lets through is a plain
 * message from then on: it no longer holds its timer or counts as a reply,
 * so a behaviour that sends it on (a reply passed to another actor, a timer
 * message re-armed with rt_send_after) sends it afresh. */
static bool admit(rt_actor *a, rt_msg *m)
{
    bool keep = true;
    if (m->timer != NULL) {
        keep = timer_detach(m);
        if (keep && m->type == RT_MSG_TIMEOUT)
            keep = pending_take(a, m->req_id) != 0;
    } else if (m->flags & MF_REPLY) {
        m->flags &= ~(uint32_t)MF_REPLY;
        int64_t timer = pending_take(a, m->req_id);
        keep = timer != 0; /* 0: late, its timeout was delivered already */
        if (keep)
            rt_timer_cancel(a->sys, timer);
    }
    if (!keep)
        rt_msg_free(m);
    return keep;
}

/* ---- running and stopping --------------------------------------------------------------- */

static void unlink_live(rt_actor *a)
{
    struct rt_system_common *c = rt__common(a->sys);
    rt__port_lock(c->all_lock);
    if (a->all_prev != NULL)
        a->all_prev->all_next = a->all_next;
    else
        c->all = a->all_next;
    if (a->all_next != NULL)
        a->all_next->all_prev = a->all_prev;
    rt__port_unlock(c->all_lock);
    atomic_fetch_sub_explicit(&c->actors_live, 1, memory_order_relaxed);
}

static void stop_actor(rt_actor *a, bool notify)
{
    struct rt_actor_ext *e = ext_of(a);
    rt_actor **watchers;
    size_t nwatchers;
    rt_mpscq_node *n;

    ext_lock(e);
    atomic_fetch_or_explicit(&a->flags, AF_DEAD, memory_order_release);
    watchers = e->watchers;
    nwatchers = e->nwatchers;
    e->watchers = NULL;
    e->nwatchers = e->watchers_cap = 0;
    ext_unlock(e);

    while ((n = rt_mpscq_pop(&a->mbox)) != NULL)
        rt_msg_free((rt_msg *)n);
    for (size_t i = 0; i < e->npending; i++)
        rt_timer_cancel(a->sys, e->pending[i].timer);
    e->npending = 0;
    if (a->mute_by != NULL) {
        rt_actor_release(a->mute_by);
        a->mute_by = NULL;
    }
    if (a->finalize != NULL)
        a->finalize(a);
    unmute_all(a);
    for (size_t i = 0; i < nwatchers; i++) {
        if (notify)
            send_down(watchers[i], a);
        rt_actor_release(watchers[i]);
    }
    free(watchers);
    unlink_live(a);
}

static void unschedule(rt_system *sys)
{
    struct rt_system_common *c = rt__common(sys);
    /* acq_rel: the thread that sees zero sees all work done before. */
    if (atomic_fetch_sub_explicit(&c->scheduled, 1, memory_order_acq_rel) == 1 &&
        atomic_load_explicit(&c->stopping, memory_order_acquire))
        rt__port_quiescent(sys);
}

void rt__actor_stop_quiet(rt_actor *a)
{
    stop_actor(a, false);
    rt_actor_release(a); /* the alive reference */
}

/* Senders estimate a mailbox's depth as sent - received. The running actor
 * publishes `received` at the end of each run rather than after each
 * message, so senders do not pull its cache line across cores on every send;
 * their estimate may then count the messages of the run under way. An actor
 * with a high-water mark publishes after every message, so its overload
 * policy sees the exact depth. Only this thread writes `received`: relaxed
 * is enough for an estimate (unmute_check orders it where it must). */
static void publish_received(rt_actor *a, uint64_t received)
{
    atomic_store_explicit(&a->received, received, memory_order_relaxed);
}

bool rt__actor_run(rt_actor *a)
{
    rt_actor *outer = rt__current;
    rt_system *sys = a->sys;
    uint64_t received = atomic_load_explicit(&a->received, memory_order_relaxed);
    bool exact = a->high_water != 0;
    rt_mpscq_node *tail = a->mbox.tail; /* see rt_mpscq_pop_at */
    unsigned n = 0, handled = 0;
    bool more = true;

    rt__current = a;
    while (n < RT_BATCH) {
        rt_msg *m = (rt_msg *)rt_mpscq_pop_at(&a->mbox, &tail);
        if (m == NULL) {
            more = false;
            break;
        }
        n++;
        received++;
        if (exact)
            publish_received(a, received);
        if (!admit(a, m))
            continue;
        a->current = m;
        a->behaviour(a, m);
        if (a->current != NULL)
            rt_msg_free(a->current);
        a->current = NULL;

        if (atomic_load_explicit(&a->flags, memory_order_relaxed) & AF_STOPPING) {
            a->mbox.tail = tail;
            publish_received(a, received);
            atomic_fetch_add_explicit(&rt__common(sys)->messages, n - handled, memory_order_relaxed);
            stop_actor(a, true);
            rt__current = outer;
            unschedule(sys);
            rt_actor_release(a);
            return false;
        }
        if (a->mute_by != NULL) {
            /* Settle our own muted senders first: once parked, a may be
             * unmuted and run elsewhere at once, so it must not be touched. */
            a->mbox.tail = tail;
            publish_received(a, received);
            atomic_fetch_add_explicit(&rt__common(sys)->messages, n - handled, memory_order_relaxed);
            handled = n;
            unmute_check(a);
            rt__current = outer;
            if (mute_self(a))
                return false; /* parked; whoever unmutes it schedules it */
            rt__current = a;
        }
    }
    a->mbox.tail = tail;
    publish_received(a, received);
    atomic_fetch_add_explicit(&rt__common(sys)->messages, n - handled, memory_order_relaxed);
    unmute_check(a);
    rt__current = outer;
    if (more)
        return true;
    if (!rt_mpscq_mark_empty(&a->mbox))
        return true; /* a push raced the empty check: keep it scheduled */
    /* From here on another thread may run a. */
    unschedule(sys);
    return false;
}

/* ---- timers --------------------------------------------------------------------------- */

static size_t bucket_of(struct rt_system_common *c, int64_t id)
{
    return (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ull >> 20) & (c->timer_buckets - 1);
}

static void table_grow(struct rt_system_common *c)
{
    size_t nb = c->timer_buckets ? c->timer_buckets * 2 : 64;
    rt_timer **nv = sf_calloc(nb, sizeof *nv);
    rt_timer **old = c->timers;
    size_t ob = c->timer_buckets;
    c->timers = nv;
    c->timer_buckets = nb;
    for (size_t i = 0; i < ob; i++) {
        rt_timer *t = old[i];
        while (t != NULL) {
            rt_timer *next = t->table_next;
            size_t b = bucket_of(c, t->id);
            t->table_next = nv[b];
            nv[b] = t;
            t = next;
        }
    }
    free(old);
}

/* Unlinks id from the table (lock held); returns the timer or NULL. */
static rt_timer *table_take(struct rt_system_common *c, int64_t id)
{
    if (c->timer_buckets == 0)
        return NULL;
    rt_timer **p = &c->timers[bucket_of(c, id)];
    for (; *p != NULL; p = &(*p)->table_next) {
        if ((*p)->id == id) {
            rt_timer *t = *p;
            *p = t->table_next;
            c->timer_count--;
            return t;
        }
    }
    return NULL;
}

static int64_t timer_start(rt_actor *to, rt_timer *t)
{
    struct rt_system_common *c = rt__common(to->sys);

    t->id = atomic_fetch_add_explicit(&c->next_timer_id, 1, memory_order_relaxed) + 1;
    t->to = rt_actor_retain(to);
    atomic_init(&t->refs, 2); /* the table + the port */
    rt__port_lock(c->timer_lock);
    if (atomic_load_explicit(&c->stopping, memory_order_acquire)) {
        rt__port_unlock(c->timer_lock);
        atomic_store(&t->refs, 1);
        rt__timer_release(t);
        return RT_ESTOPPED;
    }
    if (c->timer_count + 1 > c->timer_buckets)
        table_grow(c);
    size_t b = bucket_of(c, t->id);
    t->table_next = c->timers[b];
    c->timers[b] = t;
    c->timer_count++;
    int64_t id = t->id;
    rt__port_unlock(c->timer_lock);
    rt__port_timer_start(to->sys, t); /* t may be gone after this */
    return id;
}

int64_t rt_send_after(rt_actor *to, uint64_t delay_ms, rt_msg *msg)
{
    if (to == NULL || msg == NULL) {
        drop_unsent(msg);
        return RT_EINVAL;
    }
    rt_actor *cur = rt__current;
    if (cur != NULL && cur->current == msg)
        cur->current = NULL;
    rt_timer *t = sf_calloc(1, sizeof *t);
    t->msg = msg;
    t->delay_ms = delay_ms;
    return timer_start(to, t);
}

int64_t rt_send_every(rt_actor *to, uint64_t period_ms, uint32_t type, uint64_t cookie)
{
    if (to == NULL || period_ms == 0)
        return RT_EINVAL;
    rt_timer *t = sf_calloc(1, sizeof *t);
    t->delay_ms = period_ms;
    t->period_ms = period_ms;
    t->tick_type = type;
    t->cookie = cookie;
    return timer_start(to, t);
}

int rt_timer_cancel(rt_system *sys, int64_t id)
{
    struct rt_system_common *c = rt__common(sys);

    rt__port_lock(c->timer_lock);
    rt_timer *t = table_take(c, id);
    if (t != NULL)
        atomic_store_explicit(&t->cancelled, true, memory_order_release);
    rt__port_unlock(c->timer_lock);
    if (t == NULL)
        return RT_ENOTIMER;
    rt__port_timer_cancel(sys, t);
    rt__timer_release(t); /* the table's reference */
    return 0;
}

void rt__timers_cancel_all(rt_system *sys)
{
    struct rt_system_common *c = rt__common(sys);
    /* Unlink everything first, then cancel outside the lock: the port may
     * take its own locks. Walking the buckets (not looking ids up again)
     * ends after one pass whatever the table holds. */
    rt__port_lock(c->timer_lock);
    rt_timer *all = NULL;
    for (size_t b = 0; b < c->timer_buckets; b++) {
        while (c->timers[b] != NULL) {
            rt_timer *t = c->timers[b];
            c->timers[b] = t->table_next;
            atomic_store_explicit(&t->cancelled, true, memory_order_release);
            t->table_next = all;
            all = t;
        }
    }
    c->timer_count = 0;
    rt__port_unlock(c->timer_lock);
    while (all != NULL) {
        rt_timer *t = all;
        all = t->table_next;
        t->table_next = NULL;
        rt__port_timer_cancel(sys, t);
        rt__timer_release(t); /* the table's reference */
    }
}

/* Takes t out of the table; false if a cancel took it first. */
static bool timer_forget(rt_system *sys, rt_timer *t)
{
    struct rt_system_common *c = rt__common(sys);
    rt__port_lock(c->timer_lock);
    rt_timer *found = table_take(c, t->id);
    rt__port_unlock(c->timer_lock);
    if (found != NULL)
        rt__timer_release(found);
    return found != NULL;
}

/* Parts a timer's message from its timer, when the message reaches its
 * behaviour (admit) or is freed unhandled: the message lets go of its
 * reference, a periodic timer may queue its next tick, and a one-shot timer
 * leaves the table. A one-shot timer stays there from its start until
 * then, so rt_timer_cancel() finds it even while its message waits in the
 * mailbox, and the cancel wins. Returns false when the timer was cancelled:
 * the message must not be delivered. */
static bool timer_detach(rt_msg *m)
{
    rt_timer *t = m->timer;
    bool live;
    m->timer = NULL;
    if (t->period_ms != 0) {
        atomic_store_explicit(&t->tick_queued, false, memory_order_release);
        live = !atomic_load_explicit(&t->cancelled, memory_order_acquire);
    } else {
        /* Only a cancel takes a one-shot timer out before this, and marks
         * it first: once the runtime stops every timer is, and the table
         * (the runtime) may be gone by the time a message is freed. */
        live = !atomic_load_explicit(&t->cancelled, memory_order_acquire) &&
            timer_forget(t->to->sys, t);
    }
    rt__timer_release(t); /* the message's reference */
    return live;
}

void rt__timer_release(rt_timer *t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (t->msg != NULL) {
        rt_msg *m = t->msg;
        t->msg = NULL;
        rt_msg_free(m); /* never sent: m->timer is NULL, a kept request's sender is released */
    }
    if (t->to != NULL)
        rt_actor_release(t->to);
    free(t);
}

void rt__timer_fire(rt_timer *t, uint64_t now_ms)
{
    if (atomic_load_explicit(&t->cancelled, memory_order_acquire))
        return;
    if (t->period_ms == 0) {
        /* It stays in the table until the message is handled or freed
         * (timer_detach): a cancel before then still takes it back. */
        rt_msg *m = t->msg;
        t->msg = NULL;
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
        m->timer = t;
        if (!(m->flags & MF_REQUEST))
            m->sender = NULL; /* from the runtime, not from an actor */
        send_own(t->to, m);
        return;
    }
    if (atomic_load_explicit(&t->to->flags, memory_order_acquire) & AF_DEAD) {
        rt_timer_cancel(t->to->sys, t->id); /* a periodic timer ends with its actor */
        return;
    }
    uint64_t seq = (now_ms - t->start_ms) / t->period_ms;
    if (seq <= t->seq)
        seq = t->seq + 1;
    t->seq = seq;
    /* One tick in the mailbox at a time: a slow actor gets gaps in seq
     * rather than a growing backlog of ticks. */
    if (atomic_exchange_explicit(&t->tick_queued, true, memory_order_acq_rel))
        return;
    rt_tick *k = RT_MSG_NEW(rt_tick, t->tick_type);
    k->timer = (uint64_t)t->id;
    k->seq = seq;
    k->cookie = t->cookie;
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    k->hdr.timer = t;
    send_own(t->to, &k->hdr); /* refused, the tick is freed: tick_queued clears */
}

uint64_t rt_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
