/*
 * proxy.c — see proxy.h.
 */
#include "tests/support/proxy.h"

#include "actors/coord/scheduler.h"
#include "actors/coord/store.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { M_ASK = RT_MSG_USER + 1, MAX_PENDING = 4096, MAX_COUNTED = 8, MAX_EVENT_KINDS = 256 };

typedef struct slot {
    rt_msg *reply;
    int64_t req;
    bool done;
} slot;

typedef struct ask {
    rt_msg hdr;
    rt_actor *to;
    rt_msg *req;
    uint64_t timeout_ms;
    slot *slot;
} ask;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    slot *pending[MAX_PENDING];
    int npending;
    uint32_t types[MAX_COUNTED];
    int counts[MAX_COUNTED];
    char notices[64][384];
    int nnotices;
    struct {
        char type[24];        /* with its state, "job.finished:complete" fits */
        uint64_t job;
        int n;
    } events[MAX_EVENT_KINDS];
} px = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static rt_actor *proxy;
static pthread_t loop_thread;

static void count(uint32_t type)
{
    for (int i = 0; i < MAX_COUNTED; i++) {
        if (px.types[i] == type || px.types[i] == 0) {
            px.types[i] = type;
            px.counts[i]++;
            return;
        }
    }
}

int proxy_count(uint32_t type)
{
    for (int i = 0; i < MAX_COUNTED; i++)
        if (px.types[i] == type)
            return px.counts[i];
    return 0;
}

int proxy_events(const char *type, uint64_t job)
{
    for (int i = 0; i < MAX_EVENT_KINDS && px.events[i].n > 0; i++)
        if (px.events[i].job == job && strcmp(px.events[i].type, type) == 0)
            return px.events[i].n;
    return 0;
}

static void count_kind(const char *type, uint64_t job)
{
    for (int i = 0; i < MAX_EVENT_KINDS; i++) {
        if (px.events[i].n == 0) {
            snprintf(px.events[i].type, sizeof px.events[i].type, "%s", type);
            px.events[i].job = job;
        }
        if (px.events[i].job == job && strcmp(px.events[i].type, type) == 0) {
            px.events[i].n++;
            return;
        }
    }
}

/* Counts e by its type, and one with a state also as "type:state". */
static void count_event(const cd_event *e)
{
    count_kind(e->type, e->job);
    const char *st = e->fields ? strstr(e->fields, "\"state\":\"") : NULL;
    if (st != NULL) {
        char kind[24];
        size_t t = strlen(e->type), n = strcspn(st + 9, "\"");
        if (t + 1 + n < sizeof kind) {
            memcpy(kind, e->type, t);
            kind[t] = ':';
            memcpy(kind + t + 1, st + 9, n);
            kind[t + 1 + n] = 0;
            count_kind(kind, e->job);
        }
    }
}

const char *proxy_notice(int i)
{
    return i < px.nnotices ? px.notices[i] : "";
}

static void behaviour(rt_actor *self, rt_msg *m)
{
    pthread_mutex_lock(&px.lock);
    if (m->type == M_ASK) {
        ask *a = (ask *)m;
        a->slot->req = rt_request(self, a->to, a->req, a->timeout_ms);
        if (px.npending < MAX_PENDING)
            px.pending[px.npending++] = a->slot;
    } else if (m->req_id != 0) {
        for (int i = 0; i < px.npending; i++) {
            if (px.pending[i]->req == (int64_t)m->req_id) {
                slot *s = px.pending[i];
                px.pending[i] = px.pending[--px.npending];
                rt_take(self, m);
                s->reply = m;
                s->done = true;
                break;
            }
        }
    } else {
        count(m->type);
        if (m->type == CD_MSG_NOTIFY && px.nnotices < 64)
            snprintf(px.notices[px.nnotices++], sizeof px.notices[0], "%s:%s", ((cd_notify *)m)->channel,
                ((cd_notify *)m)->payload);
        if (m->type == CD_MSG_EVENT)
            count_event((const cd_event *)m);
    }
    pthread_cond_broadcast(&px.cond);
    pthread_mutex_unlock(&px.lock);
}

static void *loop_main(void *arg)
{
    rt_system_run(arg);
    return NULL;
}

rt_actor *proxy_start(rt_system **sys)
{
    *sys = rt_system_create(&(rt_system_opts){ .workers = 2 }, NULL);
    proxy = rt_spawn(*sys, behaviour, NULL);
    return proxy;
}

void proxy_run(rt_system *sys)
{
    pthread_create(&loop_thread, NULL, loop_main, sys);
}

void proxy_stop(rt_system *sys)
{
    rt_actor_release(proxy);
    rt_system_stop(sys);
    pthread_join(loop_thread, NULL);
    rt_system_destroy(sys);
}

static struct timespec deadline(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += PROXY_DEADLINE_S;
    return ts;
}

int proxy_call_many(rt_actor *to, rt_msg **reqs, rt_msg **replies, int n, uint64_t timeout_ms)
{
    slot *slots = calloc((size_t)n, sizeof *slots);
    for (int i = 0; i < n; i++) {
        ask *a = RT_MSG_NEW(ask, M_ASK);
        a->to = to;
        a->req = reqs[i];
        a->timeout_ms = timeout_ms;
        a->slot = &slots[i];
        rt_send(proxy, &a->hdr);
    }
    struct timespec dl = deadline();
    int done = 0;
    pthread_mutex_lock(&px.lock);
    for (;;) {
        done = 0;
        for (int i = 0; i < n; i++)
            done += slots[i].done;
        if (done == n || pthread_cond_timedwait(&px.cond, &px.lock, &dl) != 0)
            break;
    }
    /* Slots not answered stay registered: forget them before they go. */
    for (int i = 0; i < px.npending; i++)
        if (px.pending[i] >= slots && px.pending[i] < slots + n)
            px.pending[i--] = px.pending[--px.npending];
    pthread_mutex_unlock(&px.lock);
    for (int i = 0; i < n; i++)
        replies[i] = slots[i].done ? slots[i].reply : NULL;
    free(slots);
    return done;
}

rt_msg *proxy_call(rt_actor *to, rt_msg *req, uint64_t timeout_ms)
{
    rt_msg *reply = NULL;
    proxy_call_many(to, &req, &reply, 1, timeout_ms);
    return reply;
}

bool proxy_wait(bool (*pred)(void))
{
    struct timespec dl = deadline();
    pthread_mutex_lock(&px.lock);
    bool ok;
    while (!(ok = pred()) && pthread_cond_timedwait(&px.cond, &px.lock, &dl) == 0)
        ;
    pthread_mutex_unlock(&px.lock);
    return ok;
}
