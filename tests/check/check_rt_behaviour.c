/*
 * check_rt_behaviour.c — the actor runtime's guarantees, through its public
 * API only, so the same program runs natively (also under ASan and TSan)
 * and as WebAssembly under node: per-sender FIFO, batch fairness, timers
 * (order, cancellation, periodic without early or doubled ticks),
 * request/reply and timeouts, monitoring, the three overload policies, and
 * shutdown with messages in flight.
 *
 * Each case runs its own runtime until an actor stops it; a watchdog timer
 * stops it after WATCHDOG_MS and fails the case, so nothing waits forever.
 */
#include "runtime/runtime.h"
#include "tests/support/check.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WATCHDOG_MS = 20000 };

enum {
    M_NUM = RT_MSG_USER, M_GO, M_TICK, M_REQ, M_REP, M_DONE, M_WATCHDOG, M_TOKEN,
};

typedef struct num {
    rt_msg hdr;
    uint32_t from;
    uint64_t seq;
} num;

static int watchdog_fired;

static void watchdog(rt_actor *self, rt_msg *m)
{
    (void)m;
    watchdog_fired = 1;
    rt_system_stop(rt_actor_system(self));
}

static rt_system *start(unsigned workers)
{
    rt_system_opts o = { .workers = workers };
    int err = 0;
    rt_system *sys = rt_system_create(&o, &err);
    if (sys == NULL)
        return NULL;
    watchdog_fired = 0;
    rt_actor *w = rt_spawn(sys, watchdog, NULL);
    rt_send_after(w, WATCHDOG_MS, rt_msg_new(M_WATCHDOG, sizeof(rt_msg)));
    rt_actor_release(w);
    return sys;
}

/* Runs the loop until the runtime stops, then frees it. */
static void finish(rt_system *sys)
{
    rt_system_run(sys);
    rt_system_destroy(sys);
}

/* Spawns an actor and sends it M_GO; only the runtime holds it then. */
static void spawn_go(rt_system *sys, rt_behaviour b, const rt_actor_opts *o)
{
    rt_actor *a = rt_spawn(sys, b, o);
    rt_send(a, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(a);
}

static rt_msg *new_num(uint32_t from, uint64_t seq)
{
    num *n = RT_MSG_NEW(num, M_NUM);
    n->from = from;
    n->seq = seq;
    return &n->hdr;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- per-sender FIFO ---------------------------------------------------------- */

enum { SENDERS = 4, PER_SENDER = 20000 };

static struct {
    uint64_t next[SENDERS + 1];
    uint64_t got;
    int out_of_order;
} fifo;

static void fifo_sink(rt_actor *self, rt_msg *m)
{
    num *n = (num *)m;
    if (n->seq != fifo.next[n->from])
        fifo.out_of_order++;
    fifo.next[n->from] = n->seq + 1;
    if (++fifo.got == (uint64_t)(SENDERS + 1) * PER_SENDER)
        rt_system_stop(rt_actor_system(self));
}

typedef struct fifo_src {
    rt_actor *sink;
    uint32_t id;
    uint64_t sent;
} fifo_src;

static void fifo_source(rt_actor *self, rt_msg *m)
{
    fifo_src *s = rt_state(self);
    (void)m;
    /* Send in slices and re-queue ourselves, so sources interleave. */
    for (int i = 0; i < 500 && s->sent < PER_SENDER; i++)
        rt_send(s->sink, new_num(s->id, s->sent++));
    if (s->sent < PER_SENDER)
        rt_send(self, rt_msg_new(M_GO, sizeof(rt_msg)));
}

static void per_sender_fifo(void)
{
    memset(&fifo, 0, sizeof fifo);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor *sink = rt_spawn(sys, fifo_sink, NULL);
    for (uint32_t i = 1; i <= SENDERS; i++) {
        rt_actor_opts o = { .state_size = sizeof(fifo_src) };
        rt_actor *src = rt_spawn(sys, fifo_source, &o);
        *(fifo_src *)rt_state(src) = (fifo_src){ sink, i, 0 };
        rt_send(src, rt_msg_new(M_GO, sizeof(rt_msg)));
        rt_actor_release(src);
    }
    for (uint64_t s = 0; s < PER_SENDER; s++) /* sender 0: outside any actor */
        CHECK(rt_send(sink, new_num(0, s)) == 0, "send %llu", (unsigned long long)s);
    rt_actor_release(sink);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog: got %llu", (unsigned long long)fifo.got);
    CHECK(fifo.out_of_order == 0, "%d messages out of order", fifo.out_of_order);
    CHECK(fifo.got == (uint64_t)(SENDERS + 1) * PER_SENDER, "got %llu", (unsigned long long)fifo.got);
}

/* ---- fairness: a long mailbox does not starve a short one ------------------------ */

static struct {
    int a_seen;
    int a_at_b; /* A's count when B ran */
} fair;

static void fair_a(rt_actor *self, rt_msg *m)
{
    (void)self, (void)m;
    fair.a_seen++;
}

static void fair_b(rt_actor *self, rt_msg *m)
{
    (void)m;
    fair.a_at_b = fair.a_seen;
    rt_system_stop(rt_actor_system(self));
}

static void batch_fairness(void)
{
    memset(&fair, 0, sizeof fair);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    /* Pinned: nothing runs until the loop does, so both mailboxes fill first. */
    rt_actor_opts pin = { .pinned = true };
    rt_actor *a = rt_spawn(sys, fair_a, &pin);
    rt_actor *b = rt_spawn(sys, fair_b, &pin);
    for (int i = 0; i < 10 * RT_BATCH; i++)
        rt_send(a, rt_msg_new(M_NUM, sizeof(rt_msg)));
    rt_send(b, rt_msg_new(M_NUM, sizeof(rt_msg)));
    rt_actor_release(a);
    rt_actor_release(b);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(fair.a_at_b <= 2 * RT_BATCH, "B waited for %d of A's messages (batch is %d)",
        fair.a_at_b, RT_BATCH);
    CHECK(fair.a_seen == 10 * RT_BATCH, "queued messages are handled after the stop: %d", fair.a_seen);
}

/* ---- a backlog runs beside its sender ------------------------------------------------ */

/* An actor made runnable by the actor a worker is running waits in that
 * worker's next slot, which no other worker takes from. A sender that sends
 * a long stream in one message must not keep its receiver there until it
 * returns: once a backlog builds, the receiver runs on the other worker
 * while the sender is still sending. The WebAssembly port has one thread,
 * so there the receiver can only run after the sender; it checks that
 * every message arrives. */
#ifdef __EMSCRIPTEN__
enum { BACKLOG_MAX_SENDS = 1000 };
#else
enum { BACKLOG_MAX_SENDS = 1000000 };
#endif
/* Valgrind runs one thread at a time, switching when it likes: there the
 * receiver running beside its sender cannot be observed, only that every
 * message arrives. */
#if !defined(__EMSCRIPTEN__) && defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

static struct {
    _Atomic uint64_t handled;
    uint64_t sent_before;   /* sends until the receiver had run; 0 = never */
    uint64_t sent;
    rt_actor *sink;
} bl;

static void bl_sink(rt_actor *self, rt_msg *m)
{
    atomic_fetch_add_explicit(&bl.handled, 1, memory_order_relaxed);
    if (m->type == M_DONE)
        rt_system_stop(rt_actor_system(self));
}

static void bl_source(rt_actor *self, rt_msg *m)
{
    (void)self, (void)m;
    for (uint64_t i = 1; i <= BACKLOG_MAX_SENDS; i++) {
        rt_send(bl.sink, new_num(0, i));
        bl.sent = i;
        if (atomic_load_explicit(&bl.handled, memory_order_relaxed) > 0) {
            bl.sent_before = i;
            break;
        }
    }
    rt_send(bl.sink, rt_msg_new(M_DONE, sizeof(rt_msg)));
}

static void backlog_runs_beside_its_sender(void)
{
    memset(&bl, 0, sizeof bl);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    bl.sink = rt_spawn(sys, bl_sink, NULL);
    rt_actor *src = rt_spawn(sys, bl_source, NULL);
    rt_send(src, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(src);
    finish(sys);
    rt_actor_release(bl.sink);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(atomic_load(&bl.handled) == bl.sent + 1, "handled %llu of %llu",
        (unsigned long long)atomic_load(&bl.handled), (unsigned long long)bl.sent + 1);
#ifndef __EMSCRIPTEN__
    CHECK(bl.sent_before > 0 || RUNNING_ON_VALGRIND, "the receiver never ran during %d sends", BACKLOG_MAX_SENDS);
#endif
}

/* ---- work from outside the pool is not starved ------------------------------------------- */

/* One worker kept busy by an actor that always has work (it re-sends the
 * message it handles) still runs an actor made runnable from outside the
 * pool: here by a timer, from the loop thread. */
enum { STARVE_GIVE_UP_MS = 5000 };

static struct {
    uint64_t until;
    int in_time, gave_up;
} sv;

static void sv_busy(rt_actor *self, rt_msg *m)
{
    if (m->type == M_GO) {
        sv.until = now_ms() + STARVE_GIVE_UP_MS;
        m->type = M_NUM;
    }
    if (sv.in_time) {
        rt_stop(self);
        rt_system_stop(rt_actor_system(self));
        return;
    }
    if (now_ms() >= sv.until) {
        sv.gave_up = 1; /* the other actor runs once we stop */
        rt_stop(self);
        return;
    }
    rt_send(self, m);
}

/* On the same worker as sv_busy: no data race on sv. */
static void sv_other(rt_actor *self, rt_msg *m)
{
    (void)m;
    if (sv.gave_up)
        rt_system_stop(rt_actor_system(self));
    else
        sv.in_time = 1;
}

static void outside_work_not_starved(void)
{
    memset(&sv, 0, sizeof sv);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor *busy = rt_spawn(sys, sv_busy, NULL);
    rt_actor *other = rt_spawn(sys, sv_other, NULL);
    rt_send(busy, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_send_after(other, 10, rt_msg_new(M_NUM, sizeof(rt_msg)));
    rt_actor_release(busy);
    rt_actor_release(other);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(sv.in_time && !sv.gave_up, "the timer's actor did not run in %d ms beside an actor that is always busy",
        STARVE_GIVE_UP_MS);
}

/* ---- timers ------------------------------------------------------------------------ */

static struct {
    uint64_t order[8];
    int n;
    int cancel_rc, cancel_again_rc;
    int ticks_after_cancel;
    int cancelled;
    uint64_t start, seqs[64];
    int nseq, early, dup;
} tm;

static void timer_sink(rt_actor *self, rt_msg *m)
{
    num *n = (num *)m;
    tm.order[tm.n++] = n->seq;
    if (n->seq == 99)
        rt_system_stop(rt_actor_system(self));
}

static void timers_fire_in_order(void)
{
    memset(&tm, 0, sizeof tm);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor *s = rt_spawn(sys, timer_sink, NULL);
    const uint64_t delays[] = { 60, 20, 40, 0, 80 };
    for (int i = 0; i < 5; i++)
        CHECK(rt_send_after(s, delays[i], new_num(0, delays[i])) > 0, "send_after");
    int64_t gone = rt_send_after(s, 30, new_num(0, 30));
    CHECK(gone > 0, "send_after");
    tm.cancel_rc = rt_timer_cancel(sys, gone);
    tm.cancel_again_rc = rt_timer_cancel(sys, gone);
    rt_send_after(s, 150, new_num(0, 99));
    rt_actor_release(s);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(tm.cancel_rc == 0, "cancel: %s", sf_strerror(tm.cancel_rc));
    CHECK(tm.cancel_again_rc == RT_ENOTIMER, "second cancel: %d", tm.cancel_again_rc);
    const uint64_t want[] = { 0, 20, 40, 60, 80, 99 };
    CHECK(tm.n == 6, "got %d timer messages, want 6 (the cancelled one must not arrive)", tm.n);
    for (int i = 0; i < 6; i++)
        CHECK(tm.order[i] == want[i], "position %d: %llu, want %llu", i,
            (unsigned long long)tm.order[i], (unsigned long long)want[i]);
}

/* A one-shot timer cancelled after it fired, its message already in the
 * mailbox but not yet handled, delivers nothing, and the cancel says it
 * cancelled it. The actor polls (re-sending a message to itself, so the
 * WebAssembly port's host loop gets its turns) until its mailbox holds the
 * timer's message beside the next poll; a mark makes the depth it reads
 * exact. */
enum { CANCEL_WAIT_MS = 5000 };

static struct {
    int64_t timer;
    uint64_t until;
    int cancel_rc, cancel_again_rc, delivered, gave_up, polled;
} cq;

static void cq_actor(rt_actor *self, rt_msg *m)
{
    rt_system *sys = rt_actor_system(self);
    rt_actor_stats st;
    switch (m->type) {
    case M_GO:
        cq.timer = rt_send_after(self, 1, rt_msg_new(M_NUM, sizeof(rt_msg)));
        cq.until = now_ms() + CANCEL_WAIT_MS;
        m->type = M_TICK;
        rt_send(self, m);
        break;
    case M_TICK:
        if (cq.polled) {
            rt_send(self, rt_msg_new(M_DONE, sizeof(rt_msg)));
            break;
        }
        rt_send(self, m); /* the next poll, then a look: two means the timer's */
        rt_actor_stats_get(self, &st);
        if (st.depth >= 2) {
            cq.cancel_rc = rt_timer_cancel(sys, cq.timer); /* fired, not handled */
            cq.polled = 1;
        } else if (now_ms() >= cq.until) {
            cq.gave_up = cq.polled = 1;
        }
        break;
    case M_NUM:
        cq.delivered++;
        break;
    case M_DONE:
        cq.cancel_again_rc = rt_timer_cancel(sys, cq.timer);
        rt_system_stop(sys);
        break;
    }
}

static void cancel_after_fire(void)
{
    memset(&cq, 0, sizeof cq);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    spawn_go(sys, cq_actor, &(rt_actor_opts){ .high_water = 1000, .policy = RT_OVERLOAD_SHED });
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(!cq.gave_up, "the timer's message did not arrive in %d ms", CANCEL_WAIT_MS);
    CHECK(cq.cancel_rc == 0, "cancel after the timer fired: %s", sf_strerror(cq.cancel_rc));
    CHECK(cq.delivered == 0, "the message of a cancelled timer was delivered");
    CHECK(cq.cancel_again_rc == RT_ENOTIMER, "second cancel: %s", sf_strerror(cq.cancel_again_rc));
}

/* Timers far ahead wait: the WebAssembly port's host timeouts take at most
 * 2^31 - 1 ms (a longer one fires at once), so it waits in steps. A
 * one-shot and a periodic timer due in 2^32 ms, and one-shot ones at the
 * ends of the range, must still be pending when a 50 ms timer fires. */
static struct {
    int64_t timers[4];
    int early, cancel_rc[4];
} far;

static void far_actor(rt_actor *self, rt_msg *m)
{
    rt_system *sys = rt_actor_system(self);
    switch (m->type) {
    case M_GO:
        far.timers[0] = rt_send_after(self, UINT64_C(1) << 32, rt_msg_new(M_NUM, sizeof(rt_msg)));
        far.timers[1] = rt_send_every(self, UINT64_C(1) << 32, M_TICK, 0);
        far.timers[2] = rt_send_after(self, UINT64_C(1) << 31, rt_msg_new(M_NUM, sizeof(rt_msg)));
        far.timers[3] = rt_send_after(self, UINT64_MAX, rt_msg_new(M_NUM, sizeof(rt_msg)));
        rt_send_after(self, 50, rt_msg_new(M_DONE, sizeof(rt_msg)));
        break;
    case M_DONE:
        for (int i = 0; i < 4; i++)
            far.cancel_rc[i] = rt_timer_cancel(sys, far.timers[i]);
        rt_system_stop(sys);
        break;
    default:
        far.early++;
        break;
    }
}

static void far_timers_wait(void)
{
    memset(&far, 0, sizeof far);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    spawn_go(sys, far_actor, NULL);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(far.early == 0, "%d timers due in 2^31 ms or more fired within 50 ms", far.early);
    for (int i = 0; i < 4; i++)
        CHECK(far.cancel_rc[i] == 0, "timer %d: cancel: %s", i, sf_strerror(far.cancel_rc[i]));
}

enum { PERIOD_MS = 4, TICKS = 40 };

static void periodic_sink(rt_actor *self, rt_msg *m)
{
    if (m->type == M_DONE) {
        rt_system_stop(rt_actor_system(self));
        return;
    }
    rt_tick *t = (rt_tick *)m;
    if (tm.cancelled) {
        tm.ticks_after_cancel++;
        return;
    }
    if (tm.nseq > 0 && t->seq <= tm.seqs[tm.nseq - 1])
        tm.dup++;
    /* Never early: tick n is due at start + n * period. */
    if (now_ms() + 1 < tm.start + t->seq * PERIOD_MS)
        tm.early++;
    tm.seqs[tm.nseq++] = t->seq;
    if (tm.nseq == TICKS) {
        tm.cancel_rc = rt_timer_cancel(rt_actor_system(self), (int64_t)t->timer);
        tm.cancelled = 1;
        /* Anything the timer queued before the cancel would arrive before this. */
        rt_send_after(self, 3 * PERIOD_MS, rt_msg_new(M_DONE, sizeof(rt_msg)));
    }
}

static void periodic_timers(void)
{
    memset(&tm, 0, sizeof tm);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor *s = rt_spawn(sys, periodic_sink, NULL);
    tm.start = now_ms();
    CHECK(rt_send_every(s, PERIOD_MS, M_TICK, 7) > 0, "send_every");
    CHECK(rt_send_every(s, 0, M_TICK, 7) == RT_EINVAL, "a zero period is rejected");
    rt_actor_release(s);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog after %d ticks", tm.nseq);
    CHECK(tm.nseq == TICKS, "%d ticks", tm.nseq);
    /* A loop late by more than a period skips ticks (gaps in seq) rather
     * than bunching them, so the first tick may already be past seq 1. */
    CHECK(tm.seqs[0] >= 1, "first tick has seq %llu", (unsigned long long)tm.seqs[0]);
    CHECK(tm.dup == 0, "%d ticks not after their predecessor", tm.dup);
    CHECK(tm.early == 0, "%d ticks arrived before they were due", tm.early);
    CHECK(tm.seqs[TICKS - 1] >= TICKS, "seq %llu after %d ticks", (unsigned long long)tm.seqs[TICKS - 1], TICKS);
    CHECK(tm.cancel_rc == 0, "cancel");
    CHECK(tm.ticks_after_cancel == 0, "%d ticks after cancel", tm.ticks_after_cancel);
}

/* A periodic timer whose actor stopped cancels itself. */
static struct {
    int64_t timer;
    int cancel_rc;
} pe;

static void stops_on_tick(rt_actor *self, rt_msg *m)
{
    (void)m;
    rt_stop(self);
}

static void pe_watcher(rt_actor *self, rt_msg *m)
{
    if (m->type == RT_MSG_DOWN) {
        /* Several periods later the timer must be gone. */
        rt_send_after(self, 10 * PERIOD_MS, rt_msg_new(M_DONE, sizeof(rt_msg)));
    } else if (m->type == M_DONE) {
        pe.cancel_rc = rt_timer_cancel(rt_actor_system(self), pe.timer);
        rt_system_stop(rt_actor_system(self));
    }
}

static void periodic_timer_ends_with_its_actor(void)
{
    memset(&pe, 0, sizeof pe);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor *a = rt_spawn(sys, stops_on_tick, NULL);
    rt_actor *w = rt_spawn(sys, pe_watcher, NULL);
    rt_monitor(w, a);
    pe.timer = rt_send_every(a, PERIOD_MS, M_TICK, 0);
    rt_actor_release(a);
    rt_actor_release(w);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(pe.timer > 0, "send_every");
    CHECK(pe.cancel_rc == RT_ENOTIMER, "the timer outlived its actor (cancel returned %d)", pe.cancel_rc);
}

/* ---- request / reply ----------------------------------------------------------------- */

static struct {
    int64_t req;
    int replies, timeouts, wrong_id;
    uint64_t answer;
} rr;

typedef struct rr_state {
    rt_actor *server;
    int mode; /* 0: server answers; 1: server answers too late */
} rr_state;

static void rr_server(rt_actor *self, rt_msg *m)
{
    if (m->type == M_REQ) {
        num *q = (num *)m;
        if (q->from == 1) {
            /* Answer late: keep the request and answer when the timer says. */
            rt_take(self, m);
            rt_send_after(self, 100, new_num(2, (uint64_t)(uintptr_t)m));
            return;
        }
        rt_reply(m, new_num(0, q->seq * 2));
    } else if (m->type == M_NUM) {
        rt_msg *req = (rt_msg *)(uintptr_t)((num *)m)->seq;
        rt_reply(req, new_num(0, 0));
        rt_msg_free(req);
    }
}

static void rr_client(rt_actor *self, rt_msg *m)
{
    rr_state *st = rt_state(self);
    switch (m->type) {
    case M_GO: {
        num *q = RT_MSG_NEW(num, M_REQ);
        q->from = (uint32_t)st->mode;
        q->seq = 21;
        rr.req = rt_request(self, st->server, &q->hdr, 50);
        break;
    }
    case M_NUM:
        if ((int64_t)m->req_id != rr.req)
            rr.wrong_id++;
        rr.replies++;
        rr.answer = ((num *)m)->seq;
        rt_send_after(self, 150, rt_msg_new(M_DONE, sizeof(rt_msg))); /* wait for a stray timeout */
        break;
    case RT_MSG_TIMEOUT:
        if ((int64_t)m->req_id != rr.req)
            rr.wrong_id++;
        rr.timeouts++;
        rt_send_after(self, 150, rt_msg_new(M_DONE, sizeof(rt_msg))); /* wait for the late reply */
        break;
    case M_DONE:
        rt_system_stop(rt_actor_system(self));
        break;
    }
}

static void request_case(int mode)
{
    memset(&rr, 0, sizeof rr);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor *server = rt_spawn(sys, rr_server, NULL);
    rt_actor_opts o = { .state_size = sizeof(rr_state) };
    rt_actor *client = rt_spawn(sys, rr_client, &o);
    *(rr_state *)rt_state(client) = (rr_state){ server, mode };
    rt_send(client, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(client);
    rt_actor_release(server);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(rr.req > 0, "rt_request returned %lld", (long long)rr.req);
    CHECK(rr.wrong_id == 0, "a message carried the wrong request id");
    if (mode == 0) {
        CHECK(rr.replies == 1 && rr.timeouts == 0, "replies %d, timeouts %d", rr.replies, rr.timeouts);
        CHECK(rr.answer == 42, "answer %llu", (unsigned long long)rr.answer);
    } else {
        CHECK(rr.replies == 0 && rr.timeouts == 1, "replies %d, timeouts %d (a late reply must be dropped)",
            rr.replies, rr.timeouts);
    }
}

static void request_reply(void)
{
    request_case(0);
}

static void request_timeout_drops_late_reply(void)
{
    request_case(1);
}

/* A behaviour may send on the message it is handling, whatever it was: a
 * reply forwarded to another actor is a plain message there (not a late
 * reply to drop), a timer's message re-armed with rt_send_after arrives
 * again (its old timer freed, under ASan), and a request forwarded with
 * rt_request asks for its new sender (the old one let go, under ASan). */
enum { REARMS = 3 };

static struct {
    rt_actor *server, *target, *middle;
    int forwarded, rearmed, middle_answers;
} fw;

static void fw_check_done(rt_actor *self)
{
    if (fw.forwarded == 1 && fw.rearmed == REARMS && fw.middle_answers == 1)
        rt_system_stop(rt_actor_system(self));
}

static void fw_server(rt_actor *self, rt_msg *m)
{
    (void)self;
    rt_reply(m, rt_msg_new(M_REP, sizeof(rt_msg)));
}

/* Runs on the same worker as fw_client (one worker): no data race on fw. */
static void fw_target(rt_actor *self, rt_msg *m)
{
    if (m->type == M_REP)
        fw.forwarded++;
    fw_check_done(self);
}

static void fw_middle(rt_actor *self, rt_msg *m)
{
    if (m->type == M_REQ)
        rt_request(self, fw.server, m, WATCHDOG_MS); /* pass the request on as ours */
    else if (m->type == M_REP)
        fw.middle_answers++;
    fw_check_done(self);
}

static void fw_client(rt_actor *self, rt_msg *m)
{
    switch (m->type) {
    case M_GO:
        rt_request(self, fw.server, rt_msg_new(M_REQ, sizeof(rt_msg)), WATCHDOG_MS);
        rt_request(self, fw.middle, rt_msg_new(M_REQ, sizeof(rt_msg)), WATCHDOG_MS);
        rt_send_after(self, 1, rt_msg_new(M_TICK, sizeof(rt_msg)));
        break;
    case M_REP:
        rt_send(fw.target, m); /* the answer, passed on */
        break;
    case M_TICK:
        if (++fw.rearmed < REARMS)
            rt_send_after(self, 1, m);
        break;
    }
    fw_check_done(self);
}

static void resent_messages_start_afresh(void)
{
    memset(&fw, 0, sizeof fw);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    fw.server = rt_spawn(sys, fw_server, NULL);
    fw.target = rt_spawn(sys, fw_target, NULL);
    fw.middle = rt_spawn(sys, fw_middle, NULL);
    rt_actor *c = rt_spawn(sys, fw_client, NULL);
    rt_send(c, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(c);
    finish(sys);
    rt_actor_release(fw.server);
    rt_actor_release(fw.target);
    rt_actor_release(fw.middle);
    CHECK(!watchdog_fired, "watchdog: forwarded reply %d, re-armed timer %d of %d, forwarded request answered %d",
        fw.forwarded, fw.rearmed, REARMS, fw.middle_answers);
}

/* rt_request and rt_send_after free the message on every error, as their
 * contract says, also the message being handled (once: not again when the
 * behaviour returns). A release hook counts what is freed. */
static struct {
    int released;
    int64_t request_rc, after_rc, current_rc;
} fs;

static void count_release(rt_msg *m)
{
    (void)m;
    fs.released++;
}

static rt_msg *counted(void)
{
    rt_msg *m = rt_msg_new(M_NUM, sizeof(rt_msg));
    m->release = count_release;
    return m;
}

static void fs_actor(rt_actor *self, rt_msg *m)
{
    if (m->type == M_GO) {
        fs.request_rc = rt_request(self, NULL, counted(), 1000);
        fs.after_rc = rt_send_after(NULL, 1, counted());
        rt_send(self, counted());
        return;
    }
    fs.current_rc = rt_request(self, NULL, m, 1000);
    rt_system_stop(rt_actor_system(self));
}

static void failed_sends_free_the_message(void)
{
    memset(&fs, 0, sizeof fs);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    spawn_go(sys, fs_actor, NULL);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(fs.request_rc == RT_EINVAL && fs.after_rc == RT_EINVAL && fs.current_rc == RT_EINVAL,
        "rt_request %lld, rt_send_after %lld, rt_request of the message handled %lld",
        (long long)fs.request_rc, (long long)fs.after_rc, (long long)fs.current_rc);
    CHECK(fs.released == 3, "%d of 3 messages freed", fs.released);
}

/* ---- monitoring ----------------------------------------------------------------------- */

static struct {
    uint64_t target_id, down_ids[2];
    int downs, finalized;
} mon;

static void mon_target(rt_actor *self, rt_msg *m)
{
    (void)m;
    rt_stop(self);
}

static void mon_target_final(rt_actor *self)
{
    (void)self;
    mon.finalized++;
}

typedef struct mon_state {
    rt_actor *target;
} mon_state;

static void mon_watcher(rt_actor *self, rt_msg *m)
{
    mon_state *st = rt_state(self);
    if (m->type == M_GO) {
        rt_monitor(self, st->target);
        rt_send(st->target, rt_msg_new(M_NUM, sizeof(rt_msg)));
    } else if (m->type == RT_MSG_DOWN) {
        mon.down_ids[mon.downs++] = ((rt_down *)m)->actor_id;
        if (mon.downs == 1)
            rt_monitor(self, st->target); /* already dead: DOWN at once */
        else
            rt_system_stop(rt_actor_system(self));
    }
}

static void mon_watcher_final(rt_actor *self)
{
    mon_state *st = rt_state(self);
    rt_actor_release(st->target);
}

static void monitor_sees_stop(void)
{
    memset(&mon, 0, sizeof mon);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor_opts to = { .finalize = mon_target_final };
    rt_actor *target = rt_spawn(sys, mon_target, &to);
    mon.target_id = rt_actor_id(target);
    rt_actor_opts wo = { .state_size = sizeof(mon_state), .finalize = mon_watcher_final };
    rt_actor *w = rt_spawn(sys, mon_watcher, &wo);
    ((mon_state *)rt_state(w))->target = target; /* the watcher owns this handle */
    rt_send(w, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(w);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog after %d downs", mon.downs);
    CHECK(mon.downs == 2, "downs %d", mon.downs);
    CHECK(mon.down_ids[0] == mon.target_id && mon.down_ids[1] == mon.target_id, "down ids");
    CHECK(mon.finalized == 1, "finalizer ran %d times", mon.finalized);
}

/* rt_down.actor is usable while the DOWN is handled, even when nothing
 * else holds the stopped actor: the DOWN keeps it. Both actors are pinned,
 * so the target's last reference goes (when its run ends) before the
 * watcher runs; under ASan a DOWN that did not keep it reads freed memory. */
static struct {
    uint64_t target_id, id_read;
    int downs;
} dk;

static void dk_watcher(rt_actor *self, rt_msg *m)
{
    if (m->type != RT_MSG_DOWN)
        return;
    rt_down *d = (rt_down *)m;
    dk.downs++;
    dk.id_read = rt_actor_id(d->actor);
    rt_system_stop(rt_actor_system(self));
}

static void down_keeps_its_actor(void)
{
    memset(&dk, 0, sizeof dk);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor_opts pin = { .pinned = true };
    rt_actor *w = rt_spawn(sys, dk_watcher, &pin);
    rt_actor *t = rt_spawn(sys, mon_target, &pin);
    dk.target_id = rt_actor_id(t);
    rt_monitor(w, t);
    rt_send(t, rt_msg_new(M_NUM, sizeof(rt_msg)));
    rt_actor_release(t); /* only its alive reference is left */
    rt_actor_release(w);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(dk.downs == 1, "downs %d", dk.downs);
    CHECK(dk.id_read == dk.target_id, "the DOWN's actor has id %llu, want %llu",
        (unsigned long long)dk.id_read, (unsigned long long)dk.target_id);
}

/* ---- overload ----------------------------------------------------------------------------- */

enum { HWM = 16 };

static struct {
    int got, shed_replies, replies, rejected;
    rt_actor_stats stats;
    uint64_t next;
    int out_of_order;
} ov;

static void ov_sink(rt_actor *self, rt_msg *m)
{
    if (m->type == M_REQ) {
        rt_reply(m, new_num(0, 0));
    } else if (m->type == M_NUM) {
        num *n = (num *)m;
        if (n->seq != ov.next)
            ov.out_of_order++;
        ov.next = n->seq + 1;
    }
    ov.got++;
    rt_actor_stats_get(self, &ov.stats);
    if (m->type == M_DONE)
        rt_system_stop(rt_actor_system(self));
}

static void overload_reject(void)
{
    memset(&ov, 0, sizeof ov);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor_opts o = { .pinned = true, .high_water = HWM, .policy = RT_OVERLOAD_REJECT };
    rt_actor *s = rt_spawn(sys, ov_sink, &o);
    for (int i = 0; i < 2 * HWM; i++) {
        rt_msg *m = new_num(0, (uint64_t)i);
        int rc = rt_send(s, m);
        if (rc == RT_EOVERLOAD) {
            ov.rejected++;
            rt_msg_free(m); /* rejected: still ours */
        }
    }
    rt_system_stop(sys); /* queued messages are still handled */
    rt_actor_release(s);
    finish(sys);
    CHECK(ov.rejected == HWM, "rejected %d of %d", ov.rejected, 2 * HWM);
    CHECK(ov.got == HWM, "handled %d", ov.got);
    CHECK(ov.stats.rejected == HWM, "stats.rejected %llu", (unsigned long long)ov.stats.rejected);
    CHECK(ov.stats.max_depth <= HWM + 1, "max depth %llu", (unsigned long long)ov.stats.max_depth);
}

typedef struct ov_client {
    rt_actor *sink;
} ov_client;

static void shed_client(rt_actor *self, rt_msg *m)
{
    ov_client *c = rt_state(self);
    switch (m->type) {
    case M_GO:
        for (int i = 0; i < 2 * HWM; i++)
            rt_request(self, c->sink, rt_msg_new(M_REQ, sizeof(rt_msg)), 10000);
        rt_send(c->sink, rt_msg_new(M_GO, sizeof(rt_msg))); /* shed too: over the mark */
        break;
    case RT_MSG_SHED:
        ov.shed_replies++;
        break;
    case M_NUM:
        ov.replies++;
        break;
    }
    if (ov.replies + ov.shed_replies == 2 * HWM)
        rt_system_stop(rt_actor_system(self));
}

static void overload_shed(void)
{
    memset(&ov, 0, sizeof ov);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor_opts so = { .pinned = true, .high_water = HWM, .policy = RT_OVERLOAD_SHED };
    rt_actor *s = rt_spawn(sys, ov_sink, &so);
    /* The client is pinned too, so it sends everything before the sink runs. */
    rt_actor_opts co = { .pinned = true, .state_size = sizeof(ov_client) };
    rt_actor *c = rt_spawn(sys, shed_client, &co);
    ((ov_client *)rt_state(c))->sink = s;
    rt_send(c, rt_msg_new(M_GO, sizeof(rt_msg)));
    finish(sys);
    CHECK(!watchdog_fired, "watchdog: %d replies, %d shed", ov.replies, ov.shed_replies);
    CHECK(ov.replies == HWM, "replies %d", ov.replies);
    CHECK(ov.shed_replies == HWM, "shed replies %d", ov.shed_replies);
    CHECK(ov.stats.shed == HWM + 1, "stats.shed %llu", (unsigned long long)ov.stats.shed);
    rt_actor_release(s);
    rt_actor_release(c);
}

enum { MUTE_TOTAL = 5000, MUTE_SLICE = 8 };

typedef struct mute_src {
    rt_actor *sink;
    uint64_t sent;
} mute_src;

static void mute_source(rt_actor *self, rt_msg *m)
{
    mute_src *s = rt_state(self);
    (void)m;
    for (int i = 0; i < MUTE_SLICE && s->sent < MUTE_TOTAL; i++)
        rt_send(s->sink, new_num(0, s->sent++));
    if (s->sent < MUTE_TOTAL)
        rt_send(self, rt_msg_new(M_GO, sizeof(rt_msg)));
    else
        rt_send(s->sink, rt_msg_new(M_DONE, sizeof(rt_msg)));
}

static void overload_mute(void)
{
    memset(&ov, 0, sizeof ov);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    /* A slow consumer on the loop thread, a fast producer on the pool. */
    rt_actor_opts so = { .pinned = true, .high_water = HWM, .policy = RT_OVERLOAD_MUTE };
    rt_actor *s = rt_spawn(sys, ov_sink, &so);
    rt_actor_opts po = { .state_size = sizeof(mute_src) };
    rt_actor *p = rt_spawn(sys, mute_source, &po);
    ((mute_src *)rt_state(p))->sink = s;
    rt_send(p, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(p);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog: got %d", ov.got);
    CHECK(ov.got == MUTE_TOTAL + 1, "got %d", ov.got);
    CHECK(ov.out_of_order == 0, "out of order %d", ov.out_of_order);
    /* The producer is muted after the slice that crossed the mark. */
    CHECK(ov.stats.max_depth <= HWM + MUTE_SLICE + 1, "max depth %llu", (unsigned long long)ov.stats.max_depth);
    CHECK(ov.stats.rejected == 0 && ov.stats.shed == 0, "mute never drops");
    rt_actor_release(s);
}

/* Two MUTE actors that flood each other must not both stay muted: each
 * would wait for the other to drain, and rt_system_stop could not end
 * that either, so the case's deadline ends the program. With one worker
 * they run in turn; with two, they start flooding together and mute at
 * the same moment. */
enum { FLOOD = 64, FLOOD_MARK = 4, FLOOD_ROUNDS = 20, FLOOD_DEADLINE_MS = 10000 };

static struct {
    rt_actor *a[2];
    int together;           /* two workers: start flooding at once */
    _Atomic int started, handled;
} fl;

static void fl_actor(rt_actor *self, rt_msg *m)
{
    rt_actor *other = fl.a[self == fl.a[0]];
    if (m->type == M_GO) {
        atomic_fetch_add(&fl.started, 1);
        for (uint64_t until = now_ms() + 1000; fl.together && atomic_load(&fl.started) < 2 && now_ms() < until;)
            sched_yield();
        for (int i = 0; i < FLOOD; i++)
            rt_send(other, rt_msg_new(M_NUM, sizeof(rt_msg)));
    } else if (m->type == M_NUM && atomic_fetch_add(&fl.handled, 1) + 1 == 2 * FLOOD) {
        rt_system_stop(rt_actor_system(self));
    }
}

static void fl_deadline(rt_actor *self, rt_msg *m)
{
    (void)self, (void)m;
    fprintf(stderr, "%s:%d: two muting actors flooding each other: %d of %d messages handled after %d ms\n",
        __FILE__, __LINE__, atomic_load(&fl.handled), 2 * FLOOD, FLOOD_DEADLINE_MS);
    printf("not ok mute_cycle_ends\n");
    fflush(NULL);
    _Exit(1); /* deadlocked: nothing could stop the runtime */
}

static void mute_cycle_ends(void)
{
    for (int r = 0; r < FLOOD_ROUNDS; r++) {
        memset(&fl, 0, sizeof fl);
#ifndef __EMSCRIPTEN__
        fl.together = r & 1;
#endif
        rt_system *sys = start(1 + (unsigned)fl.together);
        CHECK(sys != NULL, "rt_system_create");
        rt_actor *d = rt_spawn(sys, fl_deadline, &(rt_actor_opts){ .pinned = true });
        rt_send_after(d, FLOOD_DEADLINE_MS, rt_msg_new(M_WATCHDOG, sizeof(rt_msg)));
        rt_actor_release(d);
        rt_actor_opts o = { .high_water = FLOOD_MARK, .policy = RT_OVERLOAD_MUTE };
        for (int i = 0; i < 2; i++)
            fl.a[i] = rt_spawn(sys, fl_actor, &o);
        for (int i = 0; i < 2; i++)
            rt_send(fl.a[i], rt_msg_new(M_GO, sizeof(rt_msg)));
        finish(sys);
        for (int i = 0; i < 2; i++)
            rt_actor_release(fl.a[i]);
        CHECK(!watchdog_fired, "watchdog");
        CHECK(atomic_load(&fl.handled) == 2 * FLOOD, "round %d: handled %d of %d", r,
            atomic_load(&fl.handled), 2 * FLOOD);
    }
}

/* An actor stopping is not muted: it will not run again to be parked, so
 * a mute its finalizer's send set would keep a reference to the receiver
 * for ever (LeakSanitizer sees it). The receiver is pinned and does not
 * run until the stopping actor is gone, so that send finds it over its
 * mark. */
static struct {
    rt_actor *sink;
    _Atomic int finalized;
    int done;
} ms;

static void ms_sink(rt_actor *self, rt_msg *m)
{
    if (m->type == M_DONE) {
        ms.done = 1;
        rt_system_stop(rt_actor_system(self));
    }
}

static void ms_stopper(rt_actor *self, rt_msg *m)
{
    (void)m;
    rt_send(ms.sink, rt_msg_new(M_NUM, sizeof(rt_msg))); /* at the mark (1) */
    rt_stop(self);
}

static void ms_final(rt_actor *self)
{
    (void)self;
    rt_send(ms.sink, rt_msg_new(M_DONE, sizeof(rt_msg))); /* over the mark */
    atomic_store(&ms.finalized, 1);
}

static void stopping_actor_not_muted(void)
{
    memset(&ms, 0, sizeof ms);
    rt_system *sys = start(1);
    CHECK(sys != NULL, "rt_system_create");
    ms.sink = rt_spawn(sys, ms_sink, &(rt_actor_opts){ .pinned = true, .high_water = 1, .policy = RT_OVERLOAD_MUTE });
    spawn_go(sys, ms_stopper, &(rt_actor_opts){ .finalize = ms_final });
#ifndef __EMSCRIPTEN__
    /* Natively it runs on the worker now; the sink waits for the loop. */
    for (uint64_t until = now_ms() + WATCHDOG_MS; !atomic_load(&ms.finalized) && now_ms() < until;)
        sched_yield();
#endif
    finish(sys);
    rt_actor_release(ms.sink);
    ms.sink = NULL; /* else LeakSanitizer would count it as still reachable */
    CHECK(!watchdog_fired, "watchdog");
    CHECK(ms.done, "the finalizer's message did not arrive");
}

/* ---- the runtime's own messages pass the mark ------------------------------------------ */

/* A request's timeout, a timer's message, a periodic tick and a DOWN come
 * from the runtime, with no sender to take them back or to mute: they reach
 * an actor over its high-water mark whatever its policy (dropped, a request
 * would never end and a periodic timer would stall). The actor fills its
 * mailbox to the mark and, still handling that message, waits for the four
 * to arrive on top. The WebAssembly port's one thread delivers nothing
 * while a behaviour runs, so there it checks only that they arrive. */
enum { OWN_WAIT_MS = 5000, OWN_TICKS = 3 };

static struct {
    rt_actor *peer;
    int64_t tick_timer;
    int timeouts, timed, ticks, downs, deadline;
    rt_actor_stats stats;
} own;

/* Waits, handling self's message, until n messages were sent to self since
 * it started (counting those its policy turned away), or OWN_WAIT_MS. */
static void wait_for_mailbox(rt_actor *self, uint64_t n)
{
#ifndef __EMSCRIPTEN__
    uint64_t until = now_ms() + OWN_WAIT_MS;
    rt_actor_stats st;
    do {
        rt_actor_stats_get(self, &st);
        if (st.depth + st.rejected + st.shed >= n)
            return;
        sched_yield();
    } while (now_ms() < until);
#else
    (void)self, (void)n;
#endif
}

static void own_peer(rt_actor *self, rt_msg *m)
{
    if (m->type == M_DONE)
        rt_stop(self); /* the request (M_REQ) goes unanswered */
}

static void own_actor(rt_actor *self, rt_msg *m)
{
    switch (m->type) {
    case M_GO:
        rt_send(self, rt_msg_new(M_TOKEN, sizeof(rt_msg))); /* at the mark (1) */
        rt_request(self, own.peer, rt_msg_new(M_REQ, sizeof(rt_msg)), 1);
        rt_send_after(self, 1, rt_msg_new(M_NUM, sizeof(rt_msg)));
        own.tick_timer = rt_send_every(self, 1, M_TICK, 0);
        rt_monitor(self, own.peer);
        rt_send(own.peer, rt_msg_new(M_DONE, sizeof(rt_msg)));
        wait_for_mailbox(self, 5); /* the token and the four */
        rt_send_after(self, OWN_WAIT_MS, rt_msg_new(M_WATCHDOG, sizeof(rt_msg)));
        return;
    case RT_MSG_TIMEOUT: own.timeouts++; break;
    case M_NUM: own.timed++; break;
    case M_TICK: own.ticks++; break;
    case RT_MSG_DOWN: own.downs++; break;
    case M_WATCHDOG: own.deadline = 1; break;
    default: return;
    }
    if (own.deadline || (own.timeouts && own.timed && own.downs && own.ticks >= OWN_TICKS)) {
        rt_timer_cancel(rt_actor_system(self), own.tick_timer);
        rt_actor_stats_get(self, &own.stats);
        rt_system_stop(rt_actor_system(self));
    }
}

static const char *const policy_names[] = { "none", "mute", "shed", "reject" };

static void own_messages_case(rt_overload policy)
{
    const char *pn = policy_names[policy];
    memset(&own, 0, sizeof own);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    /* Pinned: the actor's worker would hold it in its next slot until
     * M_GO returns. */
    own.peer = rt_spawn(sys, own_peer, &(rt_actor_opts){ .pinned = true });
    spawn_go(sys, own_actor, &(rt_actor_opts){ .high_water = 1, .policy = policy });
    finish(sys);
    rt_actor_release(own.peer);
    CHECK(!watchdog_fired, "watchdog");
    CHECK(!own.deadline, "%s: after %d ms: timeouts %d, timer messages %d, ticks %d, downs %d",
        pn, OWN_WAIT_MS, own.timeouts, own.timed, own.ticks, own.downs);
    CHECK(own.timeouts == 1 && own.timed == 1 && own.downs == 1, "%s: timeouts %d, timer messages %d, downs %d",
        pn, own.timeouts, own.timed, own.downs);
    CHECK(own.stats.rejected == 0 && own.stats.shed == 0, "%s: %llu rejected, %llu shed", pn,
        (unsigned long long)own.stats.rejected, (unsigned long long)own.stats.shed);
}

static void own_messages_pass_the_mark(void)
{
    const rt_overload policies[] = { RT_OVERLOAD_REJECT, RT_OVERLOAD_MUTE, RT_OVERLOAD_SHED };
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
        own_messages_case(policies[i]); /* each reports its own failure */
}

/* ---- shutdown with messages in flight ----------------------------------------------------- */

enum { RING = 64, TOKENS = 200, HOPS_BEFORE_STOP = 20000 };

static struct {
    int finalized;
    _Atomic int hops;
} sd;

typedef struct ring_node {
    rt_actor *next;
} ring_node;

static void ring_hop(rt_actor *self, rt_msg *m)
{
    ring_node *r = rt_state(self);
    if (atomic_fetch_add(&sd.hops, 1) + 1 == HOPS_BEFORE_STOP)
        rt_system_stop(rt_actor_system(self));
    rt_send(r->next, m); /* forward the same message: no allocation */
}

static void ring_final(rt_actor *self)
{
    ring_node *r = rt_state(self);
    rt_actor_release(r->next);
    sd.finalized++;
}

static void shutdown_with_messages_in_flight(void)
{
    memset(&sd, 0, sizeof sd);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor *ring[RING];
    rt_actor_opts o = { .state_size = sizeof(ring_node), .finalize = ring_final };
    for (int i = 0; i < RING; i++)
        ring[i] = rt_spawn(sys, ring_hop, &o);
    for (int i = 0; i < RING; i++)
        ((ring_node *)rt_state(ring[i]))->next = rt_actor_retain(ring[(i + 1) % RING]);
    for (int i = 0; i < TOKENS; i++)
        rt_send(ring[i % RING], rt_msg_new(M_TOKEN, sizeof(rt_msg)));
    for (int i = 0; i < RING; i++)
        rt_actor_release(ring[i]);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog after %d hops", atomic_load(&sd.hops));
    CHECK(atomic_load(&sd.hops) >= HOPS_BEFORE_STOP, "hops %d", atomic_load(&sd.hops));
    CHECK(sd.finalized == RING, "finalized %d of %d", sd.finalized, RING);
}

/* ---- destroying a runtime that was never run ---- */

static int never_run_handled, never_run_finalized;

static void count_it(rt_actor *self, rt_msg *m)
{
    (void)self, (void)m;
    never_run_handled++;
}

static void count_final(rt_actor *self)
{
    (void)self;
    never_run_finalized++;
}

static void destroy_without_run(void)
{
    never_run_handled = never_run_finalized = 0;
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor_opts o = { .pinned = true, .finalize = count_final };
    rt_actor *a = rt_spawn(sys, count_it, &o);
    for (int i = 0; i < 5; i++)
        rt_send(a, rt_msg_new(M_NUM, sizeof(rt_msg)));
    rt_send_after(a, 60000, rt_msg_new(M_NUM, sizeof(rt_msg))); /* cancelled by the stop */
    rt_actor_release(a);
    rt_system_destroy(sys); /* must return, leak nothing, run the finalizer */
    CHECK(never_run_finalized == 1, "finalizer ran %d times", never_run_finalized);
#ifndef __EMSCRIPTEN__
    CHECK(never_run_handled == 5, "handled %d of 5 queued messages", never_run_handled);
#endif
}

/* ---- idle workers sleep ------------------------------------------------------------------ */

static struct {
    rt_system_stats stats;
    double cpu_ms;
} idle;

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Pinned: it runs on the loop thread and reads the pool's state there. */
static void idle_probe(rt_actor *self, rt_msg *m)
{
    if (m->type == M_GO) {
        idle.cpu_ms = cpu_ms();
        rt_send_after(self, 200, rt_msg_new(M_DONE, sizeof(rt_msg)));
        return;
    }
    idle.cpu_ms = cpu_ms() - idle.cpu_ms;
    rt_system_stats_get(rt_actor_system(self), &idle.stats);
    rt_system_stop(rt_actor_system(self));
}

static void idle_workers_sleep(void)
{
    memset(&idle, 0, sizeof idle);
    rt_system *sys = start(2);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor_opts o = { .pinned = true };
    rt_actor *p = rt_spawn(sys, idle_probe, &o);
    /* Give the pool nothing for 50 ms first, then measure 200 ms of idling. */
    rt_send_after(p, 50, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(p);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
#ifndef __EMSCRIPTEN__
    CHECK(idle.stats.parked == 2, "%llu of 2 workers asleep", (unsigned long long)idle.stats.parked);
    /* Two spinning workers would use ~400 ms of CPU in 200 ms. */
    CHECK(idle.cpu_ms < 100, "%.1f ms of CPU in 200 ms of idling", idle.cpu_ms);
#endif
}

/* ---- a hook for each worker thread ------------------------------------------------------- */

enum { HOOK_WORKERS = 3, HOOK_ACTORS = 64 };

static _Thread_local int hook_ran_here;

static struct {
    _Atomic int started;          /* thread_start calls */
    _Atomic int ran, ran_hooked;  /* pool actors run, and of them on a hooked thread */
    _Atomic int wrong_arg;        /* thread_start calls with another argument */
    int loop_hooked;              /* the pinned actor's thread ran the hook */
} hook;

static int hook_token;

static void hook_start(void *arg)
{
    atomic_fetch_add(&hook.wrong_arg, arg != &hook_token);
    hook_ran_here = 1;
    atomic_fetch_add(&hook.started, 1);
}

static void hook_pool_actor(rt_actor *self, rt_msg *m)
{
    (void)self;
    (void)m;
    atomic_fetch_add(&hook.ran_hooked, hook_ran_here);
    atomic_fetch_add(&hook.ran, 1);
}

static void hook_loop_actor(rt_actor *self, rt_msg *m)
{
    if (m->type == M_GO) {
        hook.loop_hooked = hook_ran_here;
        rt_send_after(self, 1, rt_msg_new(M_TICK, sizeof(rt_msg)));
        return;
    }
    if (atomic_load(&hook.ran) < HOOK_ACTORS) { /* the watchdog bounds the wait */
        rt_send_after(self, 1, rt_msg_new(M_TICK, sizeof(rt_msg)));
        return;
    }
    rt_system_stop(rt_actor_system(self));
}

/* thread_start runs once on each worker thread, with its argument, before
 * that thread runs any actor; never on the loop thread. The WebAssembly
 * port runs every actor on the host's one thread, and never runs it. */
static void thread_start_hook(void)
{
    memset(&hook, 0, sizeof hook);
    rt_system_opts o = { .workers = HOOK_WORKERS, .thread_start = hook_start, .thread_arg = &hook_token };
    rt_system *sys = rt_system_create(&o, NULL);
    CHECK(sys != NULL, "rt_system_create");
    for (int i = 0; i < HOOK_ACTORS; i++) {
        rt_actor *a = rt_spawn(sys, hook_pool_actor, NULL);
        rt_send(a, rt_msg_new(M_NUM, sizeof(rt_msg)));
        rt_actor_release(a);
    }
    rt_actor *p = rt_spawn(sys, hook_loop_actor, &(rt_actor_opts){ .pinned = true });
    rt_send(p, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(p);
    rt_actor *w = rt_spawn(sys, watchdog, NULL);
    watchdog_fired = 0;
    rt_send_after(w, WATCHDOG_MS, rt_msg_new(M_WATCHDOG, sizeof(rt_msg)));
    rt_actor_release(w);
    finish(sys);
    CHECK(!watchdog_fired, "watchdog");
#ifdef __EMSCRIPTEN__
    const int threads = 0;
#else
    const int threads = HOOK_WORKERS;
#endif
    CHECK(atomic_load(&hook.started) == threads, "thread_start ran %d times for %d worker threads",
        atomic_load(&hook.started), threads);
    CHECK(atomic_load(&hook.wrong_arg) == 0, "thread_start's argument");
    CHECK(atomic_load(&hook.ran) == HOOK_ACTORS, "%d of %d pool actors ran", atomic_load(&hook.ran), HOOK_ACTORS);
    CHECK(atomic_load(&hook.ran_hooked) == (threads ? HOOK_ACTORS : 0),
        "%d of %d pool actors ran on a thread that ran the hook", atomic_load(&hook.ran_hooked), HOOK_ACTORS);
    CHECK(hook.loop_hooked == 0, "the loop thread ran the hook");
}

int main(void)
{
    RUN(per_sender_fifo);
    RUN(batch_fairness);
    RUN(backlog_runs_beside_its_sender);
    RUN(outside_work_not_starved);
    RUN(timers_fire_in_order);
    RUN(cancel_after_fire);
    RUN(far_timers_wait);
    RUN(periodic_timers);
    RUN(periodic_timer_ends_with_its_actor);
    RUN(request_reply);
    RUN(request_timeout_drops_late_reply);
    RUN(resent_messages_start_afresh);
    RUN(failed_sends_free_the_message);
    RUN(monitor_sees_stop);
    RUN(down_keeps_its_actor);
    RUN(overload_reject);
    RUN(overload_shed);
    RUN(overload_mute);
    RUN(mute_cycle_ends);
    RUN(stopping_actor_not_muted);
    RUN(own_messages_pass_the_mark);
    RUN(shutdown_with_messages_in_flight);
    RUN(idle_workers_sleep);
    RUN(destroy_without_run);
    RUN(thread_start_hook);
    return CHECK_SUMMARY();
}
