/*
 * chunks.c — the node's chunks in hand: the work contexts they need (cached
 * per job), handing them to idle workers, stopping the ones the coordinator
 * cancels, and sealing their results into signed batches until they are
 * answered. See node_int.h.
 */
#include "actors/node/node_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Work contexts are cached: one is kept after its last chunk in hand is
 * done, so the next chunks of the job need no second fetch, until its slot
 * is wanted for another job (least recently used first). */
static jobctx *job_find(node *n, uint64_t job, const uint8_t hash[32])
{
    for (int i = 0; i < MAX_JOBS; i++)
        if (n->jobs[i].live && n->jobs[i].job == job && memcmp(n->jobs[i].hash, hash, 32) == 0)
            return &n->jobs[i];
    return NULL;
}

void nd__job_clear(jobctx *j)
{
    sim_work_close(&j->sim);
    free(j->work);
    memset(j, 0, sizeof *j);
}

/* A slot for a new job: an empty one, or the least recently used context no
 * chunk in hand needs; NULL when every slot has chunks in hand. */
static jobctx *job_slot(node *n)
{
    jobctx *best = NULL;
    for (int i = 0; i < MAX_JOBS; i++) {
        jobctx *j = &n->jobs[i];
        if (!j->live)
            return j;
        if (j->users == 0 && (best == NULL || j->used < best->used))
            best = j;
    }
    if (best != NULL)
        nd__job_clear(best);
    return best;
}

void nd__release_job(node *n, uint64_t job, const uint8_t hash[32])
{
    jobctx *j = job_find(n, job, hash);
    if (j != NULL && j->users > 0)
        j->users--;
}

static unsigned worker_backend(const node *n, unsigned w)
{
    return n->host.worker_backend != NULL ? n->host.worker_backend(n->host.ctx, w) : 0;
}

/* An idle worker for chunk c: one of the backend c is sized for, else any;
 * nworkers when none is idle. */
static unsigned idle_worker(const node *n, const nd_chunk *c)
{
    unsigned any = n->nworkers;
    for (unsigned w = 0; w < n->nworkers; w++) {
        if (n->work[w].busy || n->work[w].off)
            continue;
        if (worker_backend(n, w) == c->backend)
            return w;
        if (any == n->nworkers)
            any = w;
    }
    return any;
}

/* Hands queued chunks whose context is ready to idle workers. */
void nd__dispatch(node *n)
{
    for (size_t i = 0; i < n->nqueue;) {
        unsigned w = idle_worker(n, &n->queue[i]);
        if (w == n->nworkers)
            return;
        jobctx *j = job_find(n, n->queue[i].job, n->queue[i].hash);
        if (j == NULL || j->sim.jobs == NULL) {
            i++;
            continue;
        }
        n->work[w].busy = true;
        n->work[w].cancel = false;
        n->work[w].chunk = n->queue[i];
        n->work[w].chunk.backend = worker_backend(n, w);
        n->computing++;
        n->queue[i] = n->queue[--n->nqueue];
        n->host.compute(n->host.ctx, w, &n->work[w].chunk, &j->sim, j->work, j->work_len);
    }
}

void nd__request_ctx(node *n, jobctx *j)
{
    j->asked_ms = rt_mono_ms();
    pr_msg q;
    memset(&q, 0, sizeof q);
    q.type = PR_MSG_CTX_REQ;
    q.body.ctx_req.job = j->job;
    memcpy(q.body.ctx_req.hash, j->hash, 32);
    nd__send_msg(n, &q);
}

void nd__on_assign(node *n, const pr_msg *m)
{
    const pr_assign *a = &m->body.assign;
    jobctx *j = job_find(n, a->job, a->ctx_hash);
    if (j == NULL) {
        if ((j = job_slot(n)) == NULL) {
            nd__say(n, ND_WARN, "more than %d jobs at once; chunks of job %llu dropped", MAX_JOBS,
                (unsigned long long)a->job);
            return;
        }
        j->live = true;
        j->job = a->job;
        memcpy(j->hash, a->ctx_hash, 32);
        nd__request_ctx(n, j);
    } else if (j->sim.jobs == NULL && j->users == 0) {
        nd__request_ctx(n, j); /* an earlier fetch was lost or refused: try again */
    }
    for (uint32_t i = 0; i < a->nchunks; i++) {
        if (n->nqueue == n->queue_cap)
            n->queue = sf_grow(n->queue, &n->queue_cap, sizeof *n->queue);
        nd_chunk *c = &n->queue[n->nqueue++];
        c->job = a->job;
        c->id = a->chunks[i].chunk;
        c->start = a->chunks[i].start;
        c->count = a->chunks[i].count;
        c->variant = a->chunks[i].variant;
        c->backend = a->chunks[i].backend;
        memcpy(c->token, a->chunks[i].token, 16);
        memcpy(c->hash, a->ctx_hash, 32);
        j->users++;
    }
    j->used = ++n->uses;
    nd__dispatch(n);
}

static bool cancel_hits(const pr_cancel *c, uint64_t job, uint64_t id)
{
    if (c->job != job)
        return false;
    if (c->nchunks == 0)
        return true;
    for (uint32_t i = 0; i < c->nchunks; i++)
        if (c->chunks[i] == id)
            return true;
    return false;
}

/* The coordinator stops chunks (a job cancelled or ended): those waiting
 * are dropped, and those being computed are stopped (within a slice, see
 * nd_compute, where the host can stop its workers) and their results not
 * sent. */
void nd__on_cancel(node *n, const pr_msg *m)
{
    const pr_cancel *c = &m->body.cancel;
    unsigned dropped = 0;
    for (size_t i = 0; i < n->nqueue;) {
        if (cancel_hits(c, n->queue[i].job, n->queue[i].id)) {
            nd__release_job(n, n->queue[i].job, n->queue[i].hash);
            n->queue[i] = n->queue[--n->nqueue];
            dropped++;
        } else {
            i++;
        }
    }
    for (unsigned w = 0; w < n->wcap; w++)
        if (n->work[w].busy && !n->work[w].cancel && cancel_hits(c, n->work[w].chunk.job, n->work[w].chunk.id)) {
            nd__cancel_worker(n, w);
            dropped++;
        }
    if (dropped > 0)
        nd__say(n, ND_INFO, "job %llu: %u chunks cancelled (%s)", (unsigned long long)c->job, dropped,
            c->reason && c->reason[0] ? c->reason : "no reason given");
    nd__dispatch(n);
    nd__settle(n);
}

void nd__on_ctx(node *n, const pr_msg *m)
{
    const pr_ctx *c = &m->body.ctx;
    jobctx *j = job_find(n, c->job, c->hash);
    if (j == NULL || j->sim.jobs != NULL)
        return;
    char err[256];
    if (sim_work_open(&j->sim, c->bytes.ptr, c->bytes.len, err, sizeof err) != 0) {
        /* its chunks are dropped: no heartbeat lists them, so their leases
         * end and they go to other nodes */
        size_t dropped = 0;
        for (size_t i = 0; i < n->nqueue;) {
            if (n->queue[i].job == j->job && memcmp(n->queue[i].hash, j->hash, 32) == 0) {
                n->queue[i] = n->queue[--n->nqueue];
                j->users--;
                dropped++;
            } else {
                i++;
            }
        }
        nd__say(n, ND_WARN, "job %llu cannot run here: %s; %zu chunks left to other nodes", (unsigned long long)c->job,
            err, dropped);
        nd__settle(n);
        return;
    }
    j->work = malloc(c->bytes.len ? c->bytes.len : 1);
    if (j->work == NULL)
        sf_oom(c->bytes.len);
    memcpy(j->work, c->bytes.ptr, c->bytes.len);
    j->work_len = c->bytes.len;
    nd__dispatch(n);
}

void nd__sealed_free(sealed *b)
{
    free(b->bytes);
    for (unsigned i = 0; i < b->nres; i++)
        free(b->res[i].data);
    free(b->res);
}

/* Frame id has its answer (an ack or an error); true when it was a
 * completion waiting for one, which then goes to *out if out is not NULL
 * (and is freed otherwise). */
bool nd__answered(node *n, uint64_t id, sealed *out)
{
    for (size_t i = 0; i < n->nunacked; i++)
        if (n->unacked[i].id == id) {
            if (out != NULL)
                *out = n->unacked[i];
            else
                nd__sealed_free(&n->unacked[i]);
            n->unacked[i] = n->unacked[--n->nunacked];
            return true;
        }
    return false;
}

void nd__send_pending(node *n)
{
    for (size_t i = 0; i < n->npending; i++) {
        sealed *b = &n->pending[i];
        n->host.send(n->host.ctx, b->bytes, b->len);
        free(b->bytes);
        b->bytes = NULL;
        if (n->nunacked == n->unacked_cap)
            n->unacked = sf_grow(n->unacked, &n->unacked_cap, sizeof *n->unacked);
        n->unacked[n->nunacked++] = *b;
    }
    n->npending = 0;
}

/* Signs results res[0 .. k) (one job, one context; the batch takes them
 * over) into a frame that is sent now, or once the connection is back. */
static void seal(node *n, unsealed *res, unsigned k, unsigned signings)
{
    pr_result r[BATCH_MAX];
    for (unsigned i = 0; i < k; i++) {
        const unsealed *u = &res[i];
        r[i] = (pr_result){ .chunk = u->c.id, .start = u->c.start, .count = u->c.count,
            .elapsed_ms = u->elapsed_ms, .data = { u->data, (uint32_t)u->len }, .backend = u->c.backend };
        memcpy(r[i].token, u->c.token, 16);
    }
    uint64_t now = (uint64_t)time(NULL);
    sealed b = { .id = ++n->next_id, .ts = now > n->min_ts ? now : n->min_ts, .res = res, .nres = k,
        .signings = signings + 1 };
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE;
    m.v = PR_VERSION;
    m.id = b.id;
    m.ts = nd__wall_ms();
    randombytes_buf(m.body.complete.batch.nonce, sizeof m.body.complete.batch.nonce);
    m.body.complete.batch.job = res[0].c.job;
    memcpy(m.body.complete.batch.ctx_hash, res[0].c.hash, 32);
    m.body.complete.batch.results = r;
    m.body.complete.batch.nresults = k;
    uint8_t *payload = NULL;
    if (pr_complete_seal(&m.body.complete, &payload, &n->key, n->audience, b.ts) == 0 &&
        pr_encode(&m, &b.bytes, &b.len) == 0) {
        if (n->npending == n->pending_cap)
            n->pending = sf_grow(n->pending, &n->pending_cap, sizeof *n->pending);
        n->pending[n->npending++] = b;
    } else {
        nd__say(n, ND_WARN, "cannot sign %u results: their leases bring their chunks back", k);
        nd__sealed_free(&b);
    }
    free(payload);
    if (n->phase == RUNNING)
        nd__send_pending(n);
}

/* Signs the results waiting, one batch per job (fewer frames, and one
 * signature for the coordinator to check per batch). */
void nd__seal_batch(node *n)
{
    bool done[BATCH_MAX] = { false };
    for (unsigned i = 0; i < n->nbatch; i++) {
        if (done[i])
            continue;
        const nd_chunk *first = &n->batch[i].c;
        unsealed *res = malloc(n->nbatch * sizeof *res);
        if (res == NULL)
            sf_oom(n->nbatch * sizeof *res);
        unsigned k = 0;
        for (unsigned b = i; b < n->nbatch; b++) {
            const unsealed *u = &n->batch[b];
            if (done[b] || u->c.job != first->job || memcmp(u->c.hash, first->hash, 32) != 0)
                continue;
            done[b] = true;
            res[k++] = *u;
        }
        seal(n, res, k, 0);
    }
    n->nbatch = 0;
}

/* A completion refused with EREPLAYOLD: signed at or below the time the
 * coordinator's replay window still remembers. Its results are signed
 * again, a second later than that signature, a few times at most. */
void nd__sign_again(node *n, sealed *b)
{
    if (b->signings >= MAX_SIGNINGS) {
        nd__say(n, ND_WARN, "%u results refused %u times: their leases bring their chunks back", b->nres, b->signings);
        nd__sealed_free(b);
        return;
    }
    if (n->min_ts < b->ts + 1)
        n->min_ts = b->ts + 1;
    nd__say(n, ND_INFO, "signing %u results again", b->nres);
    seal(n, b->res, b->nres, b->signings); /* b was sent: its frame is gone */
}

/* Keeps a computed result for the next batch: sealed at once when the batch
 * is full or nothing else is being computed (the end of a job, a drain),
 * else within BATCH_MS. */
static void batch_result(node *n, const nd_chunk *c, done_msg *d)
{
    n->batch[n->nbatch++] = (unsealed){ .c = *c, .data = d->data, .len = d->len, .elapsed_ms = d->elapsed_ms };
    d->data = NULL; /* the batch owns it now */
    if (n->nbatch >= n->batch_max || (n->computing == 0 && n->nqueue == 0)) {
        nd__seal_batch(n);
    } else if (!n->flush_armed) {
        n->flush_armed = true;
        rt_send_after(n->self, BATCH_MS, rt_msg_new(M_FLUSH, sizeof(rt_msg)));
    }
}

void nd__on_done(node *n, done_msg *d)
{
    if (d->worker >= n->wcap || !n->work[d->worker].busy)
        return;
    unsigned w = d->worker;
    nd_chunk c = n->work[w].chunk;
    n->work[w].busy = false;
    n->computing--;
    if (n->work[w].cancel) {
        /* the coordinator no longer wants it: nothing to send */
        if (d->err == ND_ECANCELLED)
            nd__say(n, ND_INFO, "chunk %llu of job %llu stopped after %u ms", (unsigned long long)c.id,
                (unsigned long long)c.job, d->elapsed_ms);
    } else if (d->err == 0) {
        n->chunks_done++;
        n->items_done += c.count;
        batch_result(n, &c, d);
    } else {
        nd__say(n, ND_WARN, "chunk %llu of job %llu failed: %s", (unsigned long long)c.id, (unsigned long long)c.job,
            sf_strerror(d->err));
    }
    nd__release_job(n, c.job, c.hash);
    nd__dispatch(n);
    nd__settle(n);
}

