/*
 * store_queue.c — the store's queries (store.h's cd_query_*), the queue
 * they wait in, and the backlog's bound and gauges (store_int.h).
 */
#include "actors/coord/store_int.h"

#include "base/alloc.h"
#include "base/log.h"

#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- queries ---------------------------------------------------------------- */

static void query_release(rt_msg *m)
{
    cd_query *q = (cd_query *)m;
    free(q->sql);
    for (int i = 0; i < q->nparams; i++)
        free(q->values[i]);
}

cd_query *cd_query_new(const char *sql)
{
    cd_query *q = RT_MSG_NEW(cd_query, CD_MSG_QUERY);
    q->sql = sf_strdup(sql);
    q->hdr.release = query_release;
    return q;
}

static int add_param(cd_query *q, const void *p, size_t n, int format, bool null)
{
    if (q->nparams >= CD_QUERY_MAX_PARAMS || n > INT32_MAX)
        return RT_EINVAL;
    char *v = NULL;
    if (!null) {
        v = malloc(n + 1);
        if (v == NULL)
            sf_oom(n + 1);
        memcpy(v, p, n);
        v[n] = '\0';
    }
    q->values[q->nparams] = v;
    q->lengths[q->nparams] = (int)n;
    q->formats[q->nparams] = format;
    q->nparams++;
    return 0;
}

int cd_query_text(cd_query *q, const char *value)
{
    return add_param(q, value, value ? strlen(value) : 0, 0, value == NULL);
}

int cd_query_bytes(cd_query *q, const void *p, size_t n)
{
    return add_param(q, p, n, 1, false);
}

int cd_query_int(cd_query *q, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return cd_query_text(q, buf);
}

cd_query *cd_query_copy(const cd_query *q)
{
    cd_query *c = cd_query_new(q->sql);
    for (int i = 0; i < q->nparams; i++)
        add_param(c, q->values[i], (size_t)q->lengths[i], q->formats[i], q->values[i] == NULL);
    c->binary_result = q->binary_result;
    c->group = q->group;
    return c;
}

void cd__store_result_release(rt_msg *m)
{
    cd_result *r = (cd_result *)m;
    if (r->res != NULL)
        PQclear(r->res);
}

/* ---- the backlog ------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    return (int64_t)(uv_hrtime() / 1000000);
}

static uint64_t query_size(const cd_query *q)
{
    uint64_t n = strlen(q->sql);
    for (int i = 0; i < q->nparams; i++)
        n += (uint64_t)q->lengths[i];
    return n;
}

static void publish(cd__store *st)
{
    atomic_store_explicit(&st->g.queries, st->held, memory_order_relaxed);
    atomic_store_explicit(&st->g.bytes, st->held_bytes, memory_order_relaxed);
    atomic_store_explicit(&st->g.refusing, st->refusing, memory_order_relaxed);
}

/* Takes q into the backlog; false (q untouched) when the bound refuses it.
 * Once one query is refused, all are until the backlog is down to half
 * the bound; one query alone is always taken. `group` queries, the journal
 * of results already accepted, are always taken: refusing one would lose
 * accepted work, and they cannot grow without bound while the database is
 * away, because the scheduler then hands out no new chunks. */
bool cd__store_backlog_take(cd__store *st, cd_query *q)
{
    q->size = query_size(q);
    if (!q->group && st->held > 0 && !st->up && (st->refusing || st->held_bytes + q->size > st->limit)) {
        if (!st->refusing) {
            st->refusing = true;
            sf_log(SF_LOG_WARN, "store", "backlog full (%" PRIu64 " queries, %" PRIu64 " of %" PRIu64 " bytes): refusing new queries",
                st->held, st->held_bytes, st->limit);
            cd__store_notify(st, CD_MSG_STORE_FULL);
        }
        atomic_store_explicit(&st->g.refused, atomic_load_explicit(&st->g.refused, memory_order_relaxed) + 1,
            memory_order_relaxed);
        publish(st);
        return false;
    }
    st->held++;
    st->held_bytes += q->size;
    publish(st);
    return true;
}

/* q (taken) is answered or dropped: it leaves the backlog. */
void cd__store_backlog_drop(cd__store *st, const cd_query *q)
{
    /* Every query in the backlog was counted by backlog_take. */
    assert(st->held > 0 && st->held_bytes >= q->size);
    st->held--;
    st->held_bytes -= q->size;
    if (st->refusing && st->held_bytes <= st->limit / 2) {
        st->refusing = false;
        sf_log(SF_LOG_INFO, "store", "backlog down to %" PRIu64 " queries, %" PRIu64 " bytes: taking queries again", st->held,
            st->held_bytes);
        cd__store_notify(st, CD_MSG_STORE_ROOM);
    }
    publish(st);
}

void cd__store_set_up(cd__store *st, bool up)
{
    st->up = up;
    if (up && st->refusing) { /* the queue drains now: what comes next waits its turn */
        st->refusing = false;
        cd__store_notify(st, CD_MSG_STORE_ROOM);
        publish(st);
    }
    atomic_store_explicit(&st->g.up, up, memory_order_relaxed);
    int64_t t = mono_ms();
    atomic_store_explicit(&st->g.lost_ms, up ? 0 : t > 0 ? t : 1, memory_order_relaxed);
}

void cd_store_backlog_get(rt_actor *store_actor, cd_store_backlog *out)
{
    const cd__store *st = rt_state(store_actor);
    memset(out, 0, sizeof *out);
    out->up = atomic_load_explicit(&st->g.up, memory_order_relaxed);
    out->refusing = atomic_load_explicit(&st->g.refusing, memory_order_relaxed);
    out->queries = atomic_load_explicit(&st->g.queries, memory_order_relaxed);
    out->bytes = atomic_load_explicit(&st->g.bytes, memory_order_relaxed);
    out->refused = atomic_load_explicit(&st->g.refused, memory_order_relaxed);
    out->fence_waiting = atomic_load_explicit(&st->g.fence_waiting, memory_order_relaxed);
    out->limit = st->limit; /* set before the store's first message, never changed */
    int64_t lost = atomic_load_explicit(&st->g.lost_ms, memory_order_relaxed);
    out->unreachable_ms = out->up ? 0 : lost < 0 ? -1 : mono_ms() - lost;
    if (out->unreachable_ms < -1)
        out->unreachable_ms = 0;
}

/* ---- the queue ---------------------------------------------------------------- */

void cd__store_queue_push(cd__store *st, cd_query *q, bool front)
{
    if (st->qlen == st->qcap) {
        size_t ncap = st->qcap ? st->qcap * 2 : 16;
        cd_query **nv = malloc(ncap * sizeof *nv);
        if (nv == NULL)
            sf_oom(ncap * sizeof *nv);
        for (size_t i = 0; i < st->qlen; i++)
            nv[i] = st->queue[(st->qhead + i) % st->qcap];
        free(st->queue);
        st->queue = nv;
        st->qcap = ncap;
        st->qhead = 0;
    }
    if (front) {
        st->qhead = (st->qhead + st->qcap - 1) % st->qcap;
        st->queue[st->qhead] = q;
    } else {
        st->queue[(st->qhead + st->qlen) % st->qcap] = q;
    }
    st->qlen++;
}

cd_query *cd__store_queue_pop(cd__store *st)
{
    if (st->qlen == 0)
        return NULL;
    cd_query *q = st->queue[st->qhead];
    st->qhead = (st->qhead + 1) % st->qcap;
    st->qlen--;
    return q;
}

bool cd__store_groupable(const cd_query *q)
{
    return q->group && !q->solo;
}

cd_query *cd__store_queue_at(const cd__store *st, size_t k)
{
    return st->queue[(st->qhead + k) % st->qcap];
}
