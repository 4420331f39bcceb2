/*
 * bench_rt.c — the actor runtime on Savina-style workloads, 2 worker
 * threads. tests/bench/caf_bench.cpp runs the same workloads on the C++
 * Actor Framework (`make bench-compare` runs both in one go).
 *
 *   rt_pingpong  two actors, PINGPONG_N round trips          -> round trips/s
 *   rt_ring      RING_N actors in a ring, RING_HOPS hops     -> hops/s
 *   rt_counting  one producer, COUNT_N messages to a counter -> msgs/s
 *   rt_fjthrput  FJ_ACTORS actors x FJ_N messages each       -> msgs/s
 *   rt_spawn     SPAWN_N actors created and stopped          -> actors/s
 *   rt_idle_actor_bytes  resident bytes per idle actor (IDLE_N of them)
 *
 * Each workload runs in a fresh runtime; the time is from the first send
 * to the stop, taken on the thread that runs the loop.
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    WORKERS = 2,
    PINGPONG_N = 1000000,
    RING_N = 503,
    RING_HOPS = 1000000,
    COUNT_N = 1000000,
    FJ_ACTORS = 60,
    FJ_N = 10000,
    SPAWN_N = 1000000,
    IDLE_N = 100000,
};

enum { M_PING = RT_MSG_USER, M_PONG, M_GO, M_INC, M_GET, M_STOP };

typedef struct num {
    rt_msg hdr;
    uint64_t n;
} num;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static rt_system *sys_new(void)
{
    rt_system_opts o = { .workers = WORKERS };
    int err = 0;
    rt_system *sys = rt_system_create(&o, &err);
    if (sys == NULL) {
        fprintf(stderr, "bench_rt: %s\n", sf_strerror(err));
        exit(1);
    }
    return sys;
}

static double run_timed(rt_system *sys, double t0)
{
    rt_system_run(sys);
    double t = now() - t0;
    rt_system_destroy(sys);
    return t;
}

/* ---- ping-pong ---- */

typedef struct peer {
    rt_actor *other;
} peer;

static void pingpong(rt_actor *self, rt_msg *m)
{
    peer *p = rt_state(self);
    num *k = (num *)m;
    if (m->type == M_PONG && ++k->n == PINGPONG_N) {
        rt_system_stop(rt_actor_system(self));
        return;
    }
    m->type = m->type == M_PING ? M_PONG : M_PING;
    rt_send(p->other, m); /* the same message goes back: no allocation */
}

static void pingpong_final(rt_actor *self)
{
    rt_actor_release(((peer *)rt_state(self))->other);
}

static void bench_pingpong(void)
{
    rt_system *sys = sys_new();
    rt_actor_opts o = { .state_size = sizeof(peer), .finalize = pingpong_final };
    rt_actor *a = rt_spawn(sys, pingpong, &o), *b = rt_spawn(sys, pingpong, &o);
    ((peer *)rt_state(a))->other = rt_actor_retain(b);
    ((peer *)rt_state(b))->other = rt_actor_retain(a);
    double t0 = now();
    rt_send(b, rt_msg_new(M_PING, sizeof(num)));
    rt_actor_release(a);
    rt_actor_release(b);
    double t = run_timed(sys, t0);
    printf("BENCH rt_pingpong %.0f roundtrips/s\n", PINGPONG_N / t);
}

/* ---- ring ---- */

static void ring_hop(rt_actor *self, rt_msg *m)
{
    num *k = (num *)m;
    if (++k->n == RING_HOPS) {
        rt_system_stop(rt_actor_system(self));
        return;
    }
    rt_send(((peer *)rt_state(self))->other, m);
}

static void bench_ring(void)
{
    rt_system *sys = sys_new();
    rt_actor_opts o = { .state_size = sizeof(peer), .finalize = pingpong_final };
    rt_actor *ring[RING_N];
    for (int i = 0; i < RING_N; i++)
        ring[i] = rt_spawn(sys, ring_hop, &o);
    for (int i = 0; i < RING_N; i++)
        ((peer *)rt_state(ring[i]))->other = rt_actor_retain(ring[(i + 1) % RING_N]);
    double t0 = now();
    rt_send(ring[0], rt_msg_new(M_GO, sizeof(num)));
    for (int i = 0; i < RING_N; i++)
        rt_actor_release(ring[i]);
    double t = run_timed(sys, t0);
    printf("BENCH rt_ring %.0f hops/s\n", RING_HOPS / t);
}

/* ---- counting ---- */

typedef struct counter {
    uint64_t count;
} counter;

static void count(rt_actor *self, rt_msg *m)
{
    counter *c = rt_state(self);
    if (m->type == M_INC) {
        c->count++;
    } else if (m->type == M_GET) {
        if (c->count != COUNT_N)
            fprintf(stderr, "bench_rt: counted %llu, expected %d\n", (unsigned long long)c->count, COUNT_N);
        rt_system_stop(rt_actor_system(self));
    }
}

static void produce(rt_actor *self, rt_msg *m)
{
    rt_actor *to = ((peer *)rt_state(self))->other;
    (void)m;
    for (int i = 0; i < COUNT_N; i++)
        rt_send(to, rt_msg_new(M_INC, sizeof(rt_msg)));
    rt_send(to, rt_msg_new(M_GET, sizeof(rt_msg)));
}

static void bench_counting(void)
{
    rt_system *sys = sys_new();
    rt_actor_opts co = { .state_size = sizeof(counter) };
    rt_actor *c = rt_spawn(sys, count, &co);
    rt_actor_opts po = { .state_size = sizeof(peer), .finalize = pingpong_final };
    rt_actor *p = rt_spawn(sys, produce, &po);
    ((peer *)rt_state(p))->other = rt_actor_retain(c);
    double t0 = now();
    rt_send(p, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(c);
    rt_actor_release(p);
    double t = run_timed(sys, t0);
    printf("BENCH rt_counting %.0f msgs/s\n", COUNT_N / t);
}

/* ---- fork-join throughput ---- */

static _Atomic uint64_t fj_done;

static void fj_worker(rt_actor *self, rt_msg *m)
{
    num *k = (num *)m;
    /* Savina's fjthrput does a little arithmetic per message. */
    volatile double x = (double)k->n;
    for (int i = 0; i < 10; i++)
        x = x * 1.0000001 + 0.5;
    if (atomic_fetch_add_explicit(&fj_done, 1, memory_order_relaxed) + 1 ==
        (uint64_t)FJ_ACTORS * FJ_N)
        rt_system_stop(rt_actor_system(self));
}

typedef struct fj_src {
    rt_actor *to[FJ_ACTORS];
} fj_src;

static void fj_produce(rt_actor *self, rt_msg *m)
{
    fj_src *s = rt_state(self);
    (void)m;
    for (int n = 0; n < FJ_N; n++)
        for (int i = 0; i < FJ_ACTORS; i++) {
            num *k = RT_MSG_NEW(num, M_INC);
            k->n = (uint64_t)n;
            rt_send(s->to[i], &k->hdr);
        }
}

static void fj_final(rt_actor *self)
{
    fj_src *s = rt_state(self);
    for (int i = 0; i < FJ_ACTORS; i++)
        rt_actor_release(s->to[i]);
}

static void bench_fjthrput(void)
{
    rt_system *sys = sys_new();
    atomic_store(&fj_done, 0);
    rt_actor_opts so = { .state_size = sizeof(fj_src), .finalize = fj_final };
    rt_actor *src = rt_spawn(sys, fj_produce, &so);
    fj_src *s = rt_state(src);
    for (int i = 0; i < FJ_ACTORS; i++)
        s->to[i] = rt_spawn(sys, fj_worker, NULL);
    double t0 = now();
    rt_send(src, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(src);
    double t = run_timed(sys, t0);
    printf("BENCH rt_fjthrput %.0f msgs/s\n", (double)FJ_ACTORS * FJ_N / t);
}

/* ---- spawn ---- */

static _Atomic uint64_t spawned_stopped;

static void stop_on_message(rt_actor *self, rt_msg *m)
{
    (void)m;
    rt_stop(self);
    if (atomic_fetch_add_explicit(&spawned_stopped, 1, memory_order_relaxed) + 1 == SPAWN_N)
        rt_system_stop(rt_actor_system(self));
}

static void spawner(rt_actor *self, rt_msg *m)
{
    (void)m;
    for (int i = 0; i < SPAWN_N; i++) {
        rt_actor *a = rt_spawn(rt_actor_system(self), stop_on_message, NULL);
        rt_send(a, rt_msg_new(M_STOP, sizeof(rt_msg)));
        rt_actor_release(a);
    }
}

static void bench_spawn(void)
{
    rt_system *sys = sys_new();
    atomic_store(&spawned_stopped, 0);
    rt_actor *s = rt_spawn(sys, spawner, NULL);
    double t0 = now();
    rt_send(s, rt_msg_new(M_GO, sizeof(rt_msg)));
    rt_actor_release(s);
    double t = run_timed(sys, t0);
    printf("BENCH rt_spawn %.0f actors/s\n", SPAWN_N / t);
}

static long rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static void noop(rt_actor *self, rt_msg *m)
{
    (void)self, (void)m;
}

static void bench_idle_bytes(void)
{
    rt_system *sys = sys_new();
    rt_actor **v = malloc(IDLE_N * sizeof *v);
    if (v == NULL)
        exit(1);
    long before = rss_bytes();
    for (int i = 0; i < IDLE_N; i++)
        v[i] = rt_spawn(sys, noop, NULL);
    long after = rss_bytes();
    for (int i = 0; i < IDLE_N; i++)
        rt_actor_release(v[i]);
    free(v);
    rt_system_stop(sys);
    rt_system_run(sys);
    rt_system_destroy(sys);
    if (before > 0 && after > 0)
        printf("BENCH rt_idle_actor_bytes %.0f bytes\n", (double)(after - before) / IDLE_N);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    struct {
        const char *name;
        void (*fn)(void);
    } all[] = {
        { "pingpong", bench_pingpong }, { "ring", bench_ring }, { "counting", bench_counting },
        { "fjthrput", bench_fjthrput }, { "spawn", bench_spawn }, { "idle_bytes", bench_idle_bytes },
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (only == NULL || strcmp(only, all[i].name) == 0)
            all[i].fn();
    return 0;
}
