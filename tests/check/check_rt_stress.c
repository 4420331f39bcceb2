/*
 * check_rt_stress.c — many producers, one actor: every message arrives
 * exactly once and each producer's messages in the order sent. Once from 8
 * OS threads outside the runtime, once from 8 producer actors on the worker
 * pool. 1M messages per producer natively; fewer under the sanitizers, which
 * slow each message down tenfold or more.
 */
#include "runtime/runtime.h"
#include "tests/support/check.h"

#include <pthread.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { PER_PRODUCER = 100000 };
#else
enum { PER_PRODUCER = 1000000 };
#endif
enum { PRODUCERS = 8, SLICE = 256, M_NUM = RT_MSG_USER, M_GO };

typedef struct num {
    rt_msg hdr;
    uint32_t from;
    uint64_t seq;
} num;

static struct {
    uint64_t next[PRODUCERS];
    uint64_t got, bad_order, bad_from;
} sink;

static void count(rt_actor *self, rt_msg *m)
{
    num *n = (num *)m;
    if (n->from >= PRODUCERS) {
        sink.bad_from++;
        return;
    }
    if (n->seq != sink.next[n->from])
        sink.bad_order++;
    sink.next[n->from] = n->seq + 1;
    if (++sink.got == (uint64_t)PRODUCERS * PER_PRODUCER)
        rt_system_stop(rt_actor_system(self));
}

static rt_msg *new_num(uint32_t from, uint64_t seq)
{
    num *n = RT_MSG_NEW(num, M_NUM);
    n->from = from;
    n->seq = seq;
    return &n->hdr;
}

typedef struct producer {
    rt_actor *to;
    uint32_t id;
    uint64_t sent;
    uint64_t count; /* messages a thread sends; 0 = PER_PRODUCER */
    int errors;
} producer;

static void *thread_main(void *arg)
{
    producer *p = arg;
    uint64_t n = p->count ? p->count : PER_PRODUCER;
    for (uint64_t i = 0; i < n; i++)
        if (rt_send(p->to, new_num(p->id, i)) != 0)
            p->errors++;
    return NULL;
}

static void check_sink(const char *how)
{
    CHECK(sink.bad_from == 0, "%s: %llu messages from an unknown producer", how, (unsigned long long)sink.bad_from);
    CHECK(sink.bad_order == 0, "%s: %llu messages out of order", how, (unsigned long long)sink.bad_order);
    CHECK(sink.got == (uint64_t)PRODUCERS * PER_PRODUCER, "%s: got %llu", how, (unsigned long long)sink.got);
    for (int i = 0; i < PRODUCERS; i++)
        CHECK(sink.next[i] == PER_PRODUCER, "%s: producer %d ended at %llu", how, i,
            (unsigned long long)sink.next[i]);
}

static void threads_into_one_actor(void)
{
    rt_system_opts o = { .workers = 2 };
    rt_system *sys = rt_system_create(&o, NULL);
    CHECK(sys != NULL, "rt_system_create");
    memset(&sink, 0, sizeof sink);
    rt_actor *to = rt_spawn(sys, count, NULL);
    producer ps[PRODUCERS];
    pthread_t th[PRODUCERS];
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        ps[i] = (producer){ .to = to, .id = i };
        CHECK(pthread_create(&th[i], NULL, thread_main, &ps[i]) == 0, "pthread_create");
    }
    rt_system_run(sys); /* until the sink has everything */
    int errors = 0;
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(th[i], NULL);
        errors += ps[i].errors;
    }
    rt_actor_release(to);
    rt_system_destroy(sys);
    CHECK(errors == 0, "%d sends failed", errors);
    check_sink("threads");
}

/* A sender counts its message, then reads what the receiver has taken: one
 * preempted in between may find the receiver past its count (it took the
 * messages others sent meanwhile). That is depth 0, not a wrapped-around
 * 2^64 - n, which would show as max_depth and shed a message at a mark far
 * away. The race is rare, so rounds of threads send into an actor with such
 * a mark (it publishes what it takes after every message) until a wrap
 * shows or DEPTH_ROUNDS have gone by. */
enum { DEPTH_ROUNDS = 50, DEPTH_PER_PRODUCER = PER_PRODUCER / 10 };

static void drop(rt_actor *self, rt_msg *m)
{
    (void)self, (void)m;
}

static void depth_never_wraps(void)
{
    rt_system_opts o = { .workers = 1 };
    rt_system *sys = rt_system_create(&o, NULL);
    CHECK(sys != NULL, "rt_system_create");
    rt_actor_opts so = { .high_water = 1u << 30, .policy = RT_OVERLOAD_SHED };
    rt_actor *to = rt_spawn(sys, drop, &so);
    uint64_t sent = 0;
    rt_actor_stats st = { 0 };
    for (int r = 0; r < DEPTH_ROUNDS && st.max_depth <= sent && st.shed == 0; r++) {
        producer ps[PRODUCERS];
        pthread_t th[PRODUCERS];
        for (uint32_t i = 0; i < PRODUCERS; i++) {
            ps[i] = (producer){ .to = to, .id = i, .count = DEPTH_PER_PRODUCER };
            CHECK(pthread_create(&th[i], NULL, thread_main, &ps[i]) == 0, "pthread_create");
        }
        for (int i = 0; i < PRODUCERS; i++)
            pthread_join(th[i], NULL);
        sent += (uint64_t)PRODUCERS * DEPTH_PER_PRODUCER;
        rt_actor_stats_get(to, &st);
    }
    rt_system_stop(sys);
    rt_system_run(sys);
    rt_actor_release(to);
    rt_system_destroy(sys);
    CHECK(st.max_depth <= sent && st.shed == 0, "max depth %llu after %llu messages, %llu shed",
        (unsigned long long)st.max_depth, (unsigned long long)sent, (unsigned long long)st.shed);
}

static void produce(rt_actor *self, rt_msg *m)
{
    producer *p = rt_state(self);
    (void)m;
    for (int i = 0; i < SLICE && p->sent < PER_PRODUCER; i++)
        if (rt_send(p->to, new_num(p->id, p->sent++)) != 0)
            p->errors++;
    if (p->sent < PER_PRODUCER)
        rt_send(self, rt_msg_new(M_GO, sizeof(rt_msg)));
}

static void actors_into_one_actor(void)
{
    rt_system_opts o = { .workers = 2 };
    rt_system *sys = rt_system_create(&o, NULL);
    CHECK(sys != NULL, "rt_system_create");
    memset(&sink, 0, sizeof sink);
    rt_actor *to = rt_spawn(sys, count, NULL);
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        rt_actor_opts po = { .state_size = sizeof(producer) };
        rt_actor *p = rt_spawn(sys, produce, &po);
        *(producer *)rt_state(p) = (producer){ .to = to, .id = i };
        rt_send(p, rt_msg_new(M_GO, sizeof(rt_msg)));
        rt_actor_release(p);
    }
    rt_system_run(sys);
    rt_actor_release(to);
    rt_system_destroy(sys);
    check_sink("actors");
}

int main(void)
{
    RUN(threads_into_one_actor);
    RUN(actors_into_one_actor);
    RUN(depth_never_wraps);
    return CHECK_SUMMARY();
}
