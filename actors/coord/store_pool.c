/*
 * store_pool.c — the store's connections (store_int.h): each one's poll
 * handle ("box"), its start, its loss and reconnection with a backoff,
 * and the subscribers told when the store goes up or down.
 */
#include "actors/coord/store_int.h"

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cd__store_conn_timer(rt_actor *self, const cd__store *st, int i, uint32_t type, uint64_t ms)
{
    cd__store_timer_msg *m = RT_MSG_NEW(cd__store_timer_msg, type);
    m->conn = i;
    m->gen = st->conns[i].gen;
    m->sends = st->conns[i].sends;
    rt_send_after(self, ms, &m->hdr);
}

/* ---- polling ---------------------------------------------------------------------- */

static void box_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    cd__store_box *b = h->data;
    uv_poll_stop(h); /* level-triggered: wait until the store has looked */
    if (b->store == NULL)
        return;
    cd__store_io_msg *m = RT_MSG_NEW(cd__store_io_msg, CD__STORE_M_IO);
    m->conn = b->conn;
    m->gen = b->gen;
    m->events = status < 0 ? UV_READABLE | UV_WRITABLE : events;
    rt_send(b->store, &m->hdr);
}

void cd__store_watch(cd__store_conn *c, int events)
{
    if (c->box != NULL)
        uv_poll_start(&c->box->poll, events, on_poll);
}

/* Forgets the prepared statements: all of them (a new session has none),
 * or only those whose Parse was in a group that failed. */
void cd__store_forget_prepared(cd__store_conn *c, bool only_fresh)
{
    unsigned keep = 0;
    for (unsigned k = 0; k < c->nprep; k++) {
        if (only_fresh && !c->prep[k].fresh)
            c->prep[keep++] = c->prep[k];
        else
            free(c->prep[k].sql);
    }
    c->nprep = keep;
}

void cd__store_unwatch(cd__store_conn *c)
{
    if (c->box != NULL) {
        c->box->store = NULL;
        uv_poll_stop(&c->box->poll);
        uv_close((uv_handle_t *)&c->box->poll, box_closed);
        c->box = NULL;
    }
}

/* Watches the connection's socket (a new generation: what the previous
 * watch still sends is ignored). Returns false when libuv cannot. */
bool cd__store_watch_socket(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    cd__store_box *b = calloc(1, sizeof *b);
    if (b == NULL)
        sf_oom(sizeof *b);
    b->store = self;
    b->conn = i;
    b->gen = ++c->gen;
    b->fd = PQsocket(c->pg);
    b->poll.data = b;
    if (uv_poll_init_socket(st->loop, &b->poll, b->fd) != 0) {
        free(b);
        return false;
    }
    c->box = b;
    return true;
}

void cd__store_detach(cd__store_conn *c)
{
    c->fenced = false; /* the fence went with the session */
    cd__store_forget_prepared(c, false);
    cd__store_unwatch(c);
    if (c->pg != NULL) {
        PQfinish(c->pg);
        c->pg = NULL;
    }
    if (c->res != NULL) {
        PQclear(c->res);
        c->res = NULL;
    }
}

/* ---- connections -------------------------------------------------------------------- */

void cd__store_notify(cd__store *st, uint32_t type)
{
    for (unsigned i = 0; i < st->nsubs; i++)
        rt_send(st->subs[i], rt_msg_new(type, sizeof(rt_msg)));
}

static void subscribe_release(rt_msg *m)
{
    cd_subscribe *s = (cd_subscribe *)m;
    if (s->who != NULL)
        rt_actor_release(s->who);
}

void cd_store_subscribe(rt_actor *store_actor, rt_actor *who)
{
    cd_subscribe *s = RT_MSG_NEW(cd_subscribe, CD_MSG_SUBSCRIBE);
    s->who = rt_actor_retain(who);
    s->hdr.release = subscribe_release;
    rt_send(store_actor, &s->hdr);
}

bool cd__store_usable(const cd__store *st, const cd__store_conn *c)
{
    return !c->listener && (c->state == CD__STORE_IDLE || c->state == CD__STORE_BUSY) && (!st->exclusive || c->fenced);
}

/* Whether a connection of the pool can run queries. */
static bool pool_usable(const cd__store *st)
{
    for (unsigned k = 0; k < st->npool; k++)
        if (cd__store_usable(st, &st->conns[k]))
            return true;
    return false;
}

/* The store is up once the schema is migrated, a connection of the pool is
 * open and, for a coordinator, its lock is held, no previous coordinator's
 * session is left and the pool connection holds the fence. */
void cd__store_maybe_up(cd__store *st)
{
    if (!st->up && st->migrated && pool_usable(st) && (!st->exclusive || (st->locked && st->clear))) {
        cd__store_set_up(st, true);
        cd__store_notify(st, CD_MSG_STORE_UP);
    }
}

static void schedule_reconnect(rt_actor *self, cd__store_conn *c, int i)
{
    c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : CD__STORE_BACKOFF_MIN_MS;
    if (c->backoff_ms > CD__STORE_BACKOFF_MAX_MS)
        c->backoff_ms = CD__STORE_BACKOFF_MAX_MS;
    cd__store_timer_msg *m = RT_MSG_NEW(cd__store_timer_msg, CD__STORE_M_RECONNECT);
    m->conn = i;
    rt_send_after(self, c->backoff_ms, &m->hdr);
}

/* A query whose connection broke goes back to the front of the queue, or
 * is answered with an error after CD__STORE_MAX_ATTEMPTS tries. */
static void requeue(cd__store *st, cd_query *q)
{
    if (q->attempts >= CD__STORE_MAX_ATTEMPTS) {
        cd_result *r = RT_MSG_NEW(cd_result, CD_MSG_RESULT);
        r->hdr.release = cd__store_result_release;
        r->code = CD_STORE_EBROKEN;
        snprintf(r->error, sizeof r->error, "the connection broke %d times running this query", CD__STORE_MAX_ATTEMPTS);
        cd__store_backlog_drop(st, q);
        rt_reply(&q->hdr, &r->hdr);
        rt_msg_free(&q->hdr);
    } else {
        cd__store_queue_push(st, q, true);
    }
}

/* A connection broke: its query or group (if any) goes back to the front
 * of the queue, in its order, and it reconnects after a backoff. A group
 * cut off before its sync point may or may not have committed: like a lone
 * query, it is sent again, and the writes are idempotent. */
void cd__store_lost(rt_actor *self, cd__store *st, int i, const char *reason)
{
    cd__store_conn *c = &st->conns[i];
    char why[256]; /* reason may be libpq's, freed with the connection below, and hold line breaks */
    sf_one_line(why, sizeof why, reason);
    bool quiet = c->state == CD__STORE_CONNECTING && c->backoff_ms != 0; /* said at the first try */
    if (c->kind == CD__STORE_K_QUERY && c->q != NULL)
        requeue(st, c->q);
    if (c->kind == CD__STORE_K_GROUP) {
        for (unsigned k = c->ngroup; k-- > 0;) {
            if (c->gres[k] != NULL)
                PQclear(c->gres[k]);
            c->gres[k] = NULL;
            requeue(st, c->group[k]);
            c->group[k] = NULL;
        }
        c->ngroup = 0;
    }
    if (c->kind == CD__STORE_K_MIGRATE)
        st->migrating = false;
    bool unlocked = c->listener && st->locked;
    if (unlocked)
        st->locked = false; /* the lock went with the session */
    if (c->listener)
        st->clear = false;  /* looked for again once the lock is held again */
    c->q = NULL;
    c->kind = CD__STORE_K_NONE;
    cd__store_detach(c);
    c->state = CD__STORE_DOWN;

    if (st->up && !pool_usable(st)) {
        cd__store_set_up(st, false);
        cd__store_notify(st, CD_MSG_STORE_DOWN);
    }
    schedule_reconnect(self, c, i);
    if (!quiet)
        sf_log(SF_LOG_WARN, "store", "connection %d lost: %s (connecting again in %u ms)", i, why, c->backoff_ms);
    if (unlocked) {
        /* Another coordinator could take the lock before this one is back:
         * no work is handed out in between. */
        st->relocking = true;
        sf_log(SF_LOG_INFO, "store", "the coordinator's lock went with connection %d: no work is handed out until it is held again", i);
        cd__store_notify(st, CD_MSG_LOCK_LOST);
    }
}

void cd__store_connect_conn(rt_actor *self, cd__store *st, int i)
{
    cd__store_conn *c = &st->conns[i];
    c->pg = PQconnectStart(st->conninfo);
    if (c->pg == NULL)
        sf_oom(sizeof(void *));
    if (PQstatus(c->pg) == CONNECTION_BAD || PQsetnonblocking(c->pg, 1) != 0) {
        cd__store_lost(self, st, i, PQerrorMessage(c->pg));
        return;
    }
    if (!cd__store_watch_socket(self, st, i)) {
        cd__store_lost(self, st, i, "cannot watch the connection's socket");
        return;
    }
    c->state = CD__STORE_CONNECTING;
    cd__store_watch(c, UV_WRITABLE); /* libpq: start as if polling said "writing" */
    cd__store_conn_timer(self, st, i, CD__STORE_M_DEADLINE, CD__STORE_ANSWER_WAIT_MS);
}

