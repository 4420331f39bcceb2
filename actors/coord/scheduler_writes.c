/*
 * scheduler_writes.c — the scheduler's write-behind journal.
 *
 * The ledger's journal callback copies each record into an outbox; after
 * every ledger call the outbox is written through the store (journal.h
 * encodes the rows). An accepted completion waits at a barrier until every
 * write of its flush is committed, so an acknowledged result survives any
 * crash. The ends of jobs wait in epochs until the journal rows before
 * them are committed, and their job.finished until the end is.
 * A write the database refuses is sent again, after a backoff, until it
 * commits, and each of those waits with it. While one is, or while the
 * database falls behind, no chunks are handed out.
 */
#include "actors/coord/scheduler_int.h"

#include "actors/coord/journal.h"
#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum {
    RETRY_FIRST_MS = 250,     /* a failed write is sent again after this, */
    RETRY_MAX_MS = 5000,      /* doubling up to this */
    REMIND_MS = 10000,        /* the log says writes still fail at most this often */
};

/* ---- the outbox ---------------------------------------------------------------------- */

void cd__journal_cb(void *ctx, const sc_record *r)
{
    cd__sched *s = ctx;
    if (s->nout == s->out_cap)
        s->out = sf_grow(s->out, &s->out_cap, sizeof *s->out);
    sc_record *o = &s->out[s->nout++];
    *o = *r;
    o->result = NULL;
    if (r->result_len > 0) {
        void *copy = sf_malloc(r->result_len);
        memcpy(copy, r->result, r->result_len);
        o->result = copy;
    }
}

static void barrier_done(cd__sched *s, int b, bool ok)
{
    cd__barrier *w = &s->barriers[b];
    w->failed |= !ok;
    if (--w->remaining > 0)
        return;
    for (size_t i = 0; i < w->nwaiters; i++) {
        cd__waiter *c = &w->waiters[i];
        cd__reply_completed(c->completion, w->failed ? SC_EINVAL : 0, NULL, c->outcome, c->job_complete);
        rt_msg_free(c->completion);
    }
    free(w->waiters);
    w->waiters = NULL;
    w->nwaiters = 0;
    if (s->nbfree == s->bfree_cap)
        s->bfree = sf_grow(s->bfree, &s->bfree_cap, sizeof *s->bfree);
    s->bfree[s->nbfree++] = b;
}

/* ---- ended jobs that loads must skip ------------------------------------------ */

bool cd__gone_is(const cd__sched *s, uint64_t id)
{
    for (size_t i = 0; i < s->ngone; i++)
        if (s->gone[i].id == id)
            return true;
    return false;
}

void cd__gone_add(cd__sched *s, uint64_t id, bool written)
{
    if ((written && !s->loading) || cd__gone_is(s, id))
        return; /* every later load sees the row as it is now */
    if (s->ngone == s->gone_cap)
        s->gone = sf_grow(s->gone, &s->gone_cap, sizeof *s->gone);
    s->gone[s->ngone++] = (cd__gone_job){ id, written };
}

/* The write of job id's end is done: committed (ok), or not sent at all
 * (the runtime stopping: a refused write is sent again until it commits),
 * when the job may be loaded again, so that a later load restores it from
 * its journal and writes its end once more. */
static void gone_written(cd__sched *s, uint64_t id, bool ok)
{
    for (size_t i = 0; i < s->ngone; i++)
        if (s->gone[i].id == id) {
            if (ok && s->loading)
                s->gone[i].written = true; /* until the load under way is done */
            else
                s->gone[i] = s->gone[--s->ngone];
            return;
        }
}

void cd__gone_load_done(cd__sched *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ngone; i++)
        if (!s->gone[i].written)
            s->gone[n++] = s->gone[i];
    s->ngone = n;
}

/* ---- the ends of jobs and their job.finished -------------------------------------------- */

cd__ending *cd__ending_of(cd__sched *s, uint64_t job)
{
    for (size_t i = 0; i < s->nending; i++)
        if (s->ending[i].job == job)
            return &s->ending[i];
    return NULL;
}

/* The write of job's end is done: committed (ok; `state`, if not NULL,
 * is what the row now says; a cancel the API committed first stands, and
 * its message, still to come, sends no second event), or not sent at all
 * (see gone_written), when the event says what the scheduler knows; a job
 * loaded again then ends once more, which sends a second event only if the
 * state differs. */
static void end_written(cd__sched *s, uint64_t job, bool ok, const char *state)
{
    cd__ending *d = cd__ending_of(s, job);
    if (d == NULL)
        return;
    const char *st = ok && state != NULL ? state : d->cancel_seen ? "cancelled" : d->state;
    size_t t = 0;
    while (t < s->ntold && s->told[t].job != job)
        t++;
    if (t == s->ntold || strcmp(s->told[t].state, st) != 0) {
        cd__emit(s, "job.finished", job, sf_fmt("\"state\":\"%s\",\"result\":%s", st, d->result));
        cd__log_finished(job, st, d->items, d->started_s);
    }
    if (ok && t < s->ntold) {
        s->told[t] = s->told[--s->ntold];
    } else if (!ok) {
        if (t == s->ntold) {
            if (s->ntold == s->told_cap)
                s->told = sf_grow(s->told, &s->told_cap, sizeof *s->told);
            s->ntold++;
        }
        s->told[t] = (cd__told_end){ job, st };
    }
    if (ok && strcmp(st, "cancelled") == 0 && strcmp(d->state, "cancelled") != 0 && !d->cancel_seen) {
        if (s->ncancel_due == s->cancel_due_cap)
            s->cancel_due = sf_grow(s->cancel_due, &s->cancel_due_cap, sizeof *s->cancel_due);
        s->cancel_due[s->ncancel_due++] = (cd__due_cancel){ job, rt_mono_ms() };
    }
    free(d->result);
    *d = s->ending[--s->nending];
}

void cd__ending_add(cd__sched *s, uint64_t job, const char *state, char *result)
{
    if (s->nending == s->ending_cap)
        s->ending = sf_grow(s->ending, &s->ending_cap, sizeof *s->ending);
    const cd__job_info *ji = cd__job_info_of(s, job);
    sc_job_status st;
    uint64_t items = sc_job_status_get(s->l, job, &st) == 0 ? st.done_items : 0;
    s->ending[s->nending++] = (cd__ending){ .job = job, .started_s = ji != NULL ? ji->started_s : 0, .items = items,
        .state = state, .result = result };
}

/* True when the job's end is being written (its event will say cancelled)
 * or was written after the cancel (its event said so), false when the job
 * was never taken in. */
bool cd__cancel_of_ended(cd__sched *s, uint64_t job)
{
    cd__ending *d = cd__ending_of(s, job);
    if (d != NULL) {
        d->cancel_seen = true;
        return true;
    }
    for (size_t i = 0; i < s->ncancel_due; i++)
        if (s->cancel_due[i].job == job) {
            s->cancel_due[i] = s->cancel_due[--s->ncancel_due];
            return true;
        }
    return false;
}

void cd__cancels_expire(cd__sched *s, uint64_t now)
{
    for (size_t i = 0; i < s->ncancel_due;) /* messages that will not come */
        if (now - s->cancel_due[i].since_ms > CD__DB_TIMEOUT_MS)
            s->cancel_due[i] = s->cancel_due[--s->ncancel_due];
        else
            i++;
}

/* ---- writes in flight ------------------------------------------------------------------- */

static void epoch_done(cd__sched *s, uint64_t e);

/* The answer to write w (ok: committed; state: the row's, for an end). */
static void write_done(cd__sched *s, cd__write w, bool ok, const char *state)
{
    if (w.ends != 0) {
        end_written(s, w.ends, ok, state);
        gone_written(s, w.ends, ok);
    }
    if (w.barrier >= 0)
        barrier_done(s, w.barrier, ok);
    if (w.epoch != 0)
        epoch_done(s, w.epoch);
}

/* ---- writes that fail, sent again ------------------------------------------------------- */

/* What cd_scheduler_stats_get reads of the writes that fail. Only the
 * behaviour stores them. Release, with the reader's acquire load of
 * failing_since first: a reader that sees the writes failing sees the
 * count of those that started it. */
static void publish_failing(cd__sched *s)
{
    atomic_store_explicit(&s->g.writes_retrying, s->retrying, memory_order_relaxed);
    atomic_store_explicit(&s->g.failing_since, s->failing_since, memory_order_release);
}

/* The last error as other threads read it: a sequence lock. The writer
 * (only this behaviour) makes the count odd, writes, makes it even again;
 * a reader copies between two reads of an even count and tries again when
 * they differ. Each character is stored with release, so a reader that
 * loads one of them (with acquire) sees the odd count stored before it,
 * and its second read of the count cannot move before its loads; the
 * final release store keeps the text before the even count that the
 * reader's first acquire load sees. Each character is an atomic, so a copy
 * torn by a writer is a value read again, never a data race. (No fences:
 * ThreadSanitizer does not follow them.) */
static void set_last_error(cd__sched *s, const char *line)
{
    if (strcmp(s->last_error, line) == 0)
        return;
    snprintf(s->last_error, sizeof s->last_error, "%s", line);
    unsigned seq = atomic_load_explicit(&s->g.error_seq, memory_order_relaxed);
    atomic_store_explicit(&s->g.error_seq, seq + 1, memory_order_relaxed);
    for (size_t i = 0; i < sizeof s->last_error; i++)
        atomic_store_explicit(&s->g.last_error[i], s->last_error[i], memory_order_release);
    atomic_store_explicit(&s->g.error_seq, seq + 2, memory_order_release);
}

static void get_last_error(cd__sched *s, char *out, size_t cap)
{
    size_t n = sizeof s->g.last_error / sizeof s->g.last_error[0];
    if (cap < n)
        n = cap;
    for (;;) {
        unsigned before = atomic_load_explicit(&s->g.error_seq, memory_order_acquire);
        for (size_t i = 0; i < n; i++)
            out[i] = atomic_load_explicit(&s->g.last_error[i], memory_order_acquire);
        if (before % 2 == 0 && atomic_load_explicit(&s->g.error_seq, memory_order_relaxed) == before)
            break;
    }
    out[n - 1] = '\0';
}

static void write_send(cd__sched *s, cd__write w);

/* Write w was answered with an error (its words: error) or not at all:
 * it waits for the next round of writes sent again, and whatever waits for
 * it (its barrier, its epoch, the end it writes) waits on. The first
 * failure while none failed says so, in one line, and stops the claims. */
static void write_failed(cd__sched *s, cd__write w, const char *error)
{
    uint64_t now = rt_mono_ms();
    char line[sizeof s->last_error];
    sf_one_line(line, sizeof line, error);
    /* only this behaviour writes it; a reader prints it alone */
    atomic_store_explicit(&s->g.writes_failed, atomic_load_explicit(&s->g.writes_failed, memory_order_relaxed) + 1,
        memory_order_relaxed);
    if (s->failing_since == 0) {
        s->failing_since = now > 0 ? now : 1; /* 0 stands for none */
        s->reminded_ms = now;
        s->failing_resent = 0;
        s->retry_ms = RETRY_FIRST_MS;
        sf_log(SF_LOG_WARN, "scheduler", "journal writes fail: %s; each is sent again until it commits (every %d "
            "to %d ms), and no chunks are handed out until they succeed", line, RETRY_FIRST_MS, RETRY_MAX_MS);
    }
    sf_log(SF_LOG_DEBUG, "scheduler", "write failed, to be sent again: %s", line);
    set_last_error(s, line);
    if (!w.failed) {
        w.failed = true;
        s->retrying++;
        s->failing_resent++;
    }
    if (s->nresend == s->resend_cap)
        s->resend = sf_grow(s->resend, &s->resend_cap, sizeof *s->resend);
    s->resend[s->nresend++] = w;
    if (!s->retry_queued) {
        rt_msg *m = rt_msg_new(CD__M_RETRY, sizeof *m);
        s->retry_queued = rt_send_after(s->self, s->retry_ms, m) > 0; /* fails only when stopping */
    }
    publish_failing(s);
}

/* Write w, which had failed, is committed. The last of them ends the
 * failing. */
static void write_recovered(cd__sched *s, uint64_t now)
{
    if (--s->retrying == 0) {
        sf_log(SF_LOG_INFO, "scheduler", "journal writes succeed again after %.1f s: %" PRIu64 " writes sent again",
            (double)(now - s->failing_since) / 1000.0, s->failing_resent);
        s->failing_since = 0;
        set_last_error(s, "");
    }
    publish_failing(s);
}

/* Sends write w, a copy of its query: the store frees the query it
 * answers, and w keeps the original to send again. */
static void write_send(cd__sched *s, cd__write w)
{
    cd_query *q = cd_query_copy(w.again);
    int64_t req = rt_request(s->self, s->store, &q->hdr, CD__WRITE_TIMEOUT_MS);
    if (req > 0) {
        *cd__write_map_put(&s->writes, (uint64_t)req, NULL) = w;
    } else if (req == RT_EOVERLOAD) { /* the store's mailbox is full for now */
        write_failed(s, w, sf_strerror((int)req));
    } else { /* stopping: nothing will answer it */
        rt_msg_free(&w.again->hdr);
        if (w.failed && --s->retrying == 0)
            s->failing_since = 0;
        publish_failing(s);
        write_done(s, w, false, NULL);
    }
}

void cd__write_query(cd__sched *s, cd_query *q, int b, uint64_t ends, uint64_t e)
{
    write_send(s, (cd__write){ b, ends, e, q, false });
}

void cd__writes_retry(cd__sched *s)
{
    s->retry_queued = false;
    cd__write *round = s->resend;
    size_t n = s->nresend;
    s->resend = NULL;
    s->nresend = s->resend_cap = 0;
    s->retry_ms = s->retry_ms * 2 < RETRY_MAX_MS ? s->retry_ms * 2 : RETRY_MAX_MS;
    for (size_t i = 0; i < n; i++)
        write_send(s, round[i]);
    free(round);
}

/* ---- epochs: the journal before the ends of jobs ---------------------------------------- */

static cd__epoch *epoch_at(cd__sched *s, uint64_t e)
{
    return &s->epochs[s->epochs_head + (size_t)(e - s->epoch_first)];
}

/* A new epoch with `inserts` INSERTs to come; returns its number. */
static uint64_t epoch_new(cd__sched *s, unsigned inserts)
{
    if (s->epochs_head + s->nepochs == s->epochs_cap) {
        if (s->epochs_head > 0) {
            memmove(s->epochs, s->epochs + s->epochs_head, s->nepochs * sizeof *s->epochs);
            s->epochs_head = 0;
        } else {
            s->epochs = sf_grow(s->epochs, &s->epochs_cap, sizeof *s->epochs);
        }
    }
    s->epochs[s->epochs_head + s->nepochs] = (cd__epoch){ .inserts = inserts, .sent_ms = rt_mono_ms() };
    return s->epoch_first + s->nepochs++;
}

static void epoch_hold(cd__sched *s, uint64_t e, cd_query *update, uint64_t job, int b)
{
    cd__epoch *p = epoch_at(s, e);
    if (p->nends == p->ends_cap)
        p->ends = sf_grow(p->ends, &p->ends_cap, sizeof *p->ends);
    p->ends[p->nends++] = (cd__held_end){ update, job, b };
}

/* One of epoch e's INSERTs is committed. Each epoch whose INSERTs and
 * those of every earlier epoch are all committed sends its ends: a job's
 * row says it ended only once the journal holds every result it accepted.
 * (An INSERT the database refuses is sent again until it commits; only
 * one the runtime could not send at all, as it stops, counts as done.) */
static void epoch_done(cd__sched *s, uint64_t e)
{
    epoch_at(s, e)->inserts--;
    while (s->nepochs > 0 && s->epochs[s->epochs_head].inserts == 0) {
        cd__epoch first = s->epochs[s->epochs_head++];
        s->nepochs--;
        s->epoch_first++;
        for (size_t i = 0; i < first.nends; i++)
            cd__write_query(s, first.ends[i].update, first.ends[i].barrier, first.ends[i].job, 0);
        free(first.ends);
    }
    if (s->nepochs == 0)
        s->epochs_head = 0;
    /* for /health: since when the oldest INSERT not committed waits; only
     * this behaviour stores it, and a reader prints it alone */
    atomic_store_explicit(&s->g.oldest_write_ms, s->nepochs > 0 ? s->epochs[s->epochs_head].sent_ms : 0,
        memory_order_relaxed);
}

/* ---- writing the outbox ----------------------------------------------------------------- */

/* A barrier for the completions waiting now, counting `writes` answers;
 * returns its number. */
static int barrier_new(cd__sched *s, size_t writes)
{
    size_t k = s->nbfree > 0 ? (size_t)s->bfree[--s->nbfree] : s->nbarriers;
    if (k == s->nbarriers) {
        if (s->nbarriers == s->barriers_cap)
            s->barriers = sf_grow(s->barriers, &s->barriers_cap, sizeof *s->barriers);
        s->nbarriers++;
    }
    s->barriers[k] = (cd__barrier){ s->waiting, s->nwaiting, (unsigned)writes, false };
    s->waiting = NULL;
    s->nwaiting = s->waiting_cap = 0;
    return (int)k;
}

/* The UPDATE of a job's row that writes its end: `state` and the result
 * JSON res (borrowed). */
static cd_query *end_update(uint64_t job, const char *state, const char *res)
{
    cd_query *u = cd_query_new(
        /* a cancel the API committed first keeps its state (the
         * API has answered it); the result is written either way */
        "UPDATE jobs SET state = CASE WHEN state IN ('pending', 'running') THEN $2 ELSE state END, "
        "result = $3::jsonb, finished_at = coalesce(finished_at, now()) WHERE id = $1 RETURNING state");
    u->group = true;
    cd_query_int(u, (int64_t)job);
    cd_query_text(u, state);
    cd_query_text(u, res);
    return u;
}

/* Writes every record in the outbox: one INSERT per CD_JOURNAL_MAX_ROWS
 * records, in their order, and each ended job's row. The completions
 * waiting for these records are answered once all of these writes are
 * committed: an acknowledged result, and the end of the job it finished,
 * survive any crash. */
void cd__write_out(cd__sched *s)
{
    int b = -1;
    size_t inserts = (s->nout + CD_JOURNAL_MAX_ROWS - 1) / CD_JOURNAL_MAX_ROWS;
    if (s->nwaiting > 0) {
        size_t writes = inserts + s->nreend;
        for (size_t i = 0; i < s->nout; i++)
            writes += s->out[i].type == SC_REC_JOB_END;
        b = barrier_new(s, writes); /* writes >= 1: a waiter's ACCEPT record is in out */
    }
    uint64_t e = epoch_new(s, (unsigned)inserts + 1); /* + 1: answered below, once its ends are held */
    for (size_t i = 0; i < s->nout; i += CD_JOURNAL_MAX_ROWS) {
        size_t n = s->nout - i < CD_JOURNAL_MAX_ROWS ? s->nout - i : CD_JOURNAL_MAX_ROWS;
        cd__write_query(s, cd_journal_insert(&s->out[i], n), b, 0, e);
    }
    for (size_t i = 0; i < s->nout + s->nreend; i++) {
        const sc_record *r = i < s->nout ? &s->out[i] : &s->reend[i - s->nout];
        if (r->type != SC_REC_JOB_END)
            continue;
        char *res = cd__result_json(s, r->job);
        cd__job_info *ji = cd__job_info_of(s, r->job);
        if (ji != NULL && ji->dirty)
            cd__emit_progress(s, ji, rt_mono_ms()); /* the last counts before the end */
        cd_query *u = end_update(r->job, cd__state_name(r->state), res);
        cd__ending_add(s, r->job, cd__state_name(r->state), res);
        cd__gone_add(s, r->job, false);
        epoch_hold(s, e, u, r->job, b);
    }
    epoch_done(s, e);
    /* Ended jobs leave memory as their end is written (a completion that
     * comes later is stale); loads skip them until it is committed. */
    size_t n = s->nout;
    s->nout = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->out[i].type == SC_REC_JOB_END)
            cd__forget_job(s, s->out[i].job);
        free((void *)s->out[i].result);
    }
    for (size_t i = 0; i < s->nreend; i++)
        cd__forget_job(s, s->reend[i].job);
    s->nreend = 0;
}

/* Writes the outbox soon: after the messages already waiting for us, so
 * that the records of a burst of completions share one statement (at a
 * low rate each goes alone, with no delay). At once when the outbox is
 * full or no message can be sent. */
void cd__flush(cd__sched *s, rt_msg *completion, sc_outcome outcome, bool done)
{
    if (completion != NULL) {
        if (s->nwaiting == s->waiting_cap)
            s->waiting = sf_grow(s->waiting, &s->waiting_cap, sizeof *s->waiting);
        s->waiting[s->nwaiting++] = (cd__waiter){ completion, outcome, done };
    }
    if (s->nout == 0 && s->nwaiting == 0 && s->nreend == 0)
        return;
    if (s->nout >= CD_JOURNAL_MAX_ROWS) {
        cd__write_out(s);
        return;
    }
    if (s->flush_queued)
        return;
    rt_msg *m = rt_msg_new(CD__M_FLUSH, sizeof *m);
    int rc = rt_send(s->self, m);
    if (rc == 0) {
        s->flush_queued = true;
        return;
    }
    if (rc == RT_EOVERLOAD)
        rt_msg_free(m);
    cd__write_out(s);
}

/* ---- the store's answers and the database's pace ---------------------------------------- */

/* Whether claims must wait for the writes: a write that failed is being
 * sent again (then "behind" is left as it was, not said twice over one
 * cause), or the database is behind with the writes, though up: the store
 * holds its backlog's bound or more (which refuses nothing while the
 * database is up), or the oldest journal INSERT of ours not committed has
 * waited write_wait_ms (the oldest epoch not answered: epoch_done drops
 * the committed ones from the front). Says so when "behind" changes. */
bool cd__writes_wait(cd__sched *s, uint64_t now)
{
    if (s->failing_since != 0)
        return true;
    cd_store_backlog b;
    cd_store_backlog_get(s->store, &b);
    uint64_t waited = s->nepochs > 0 ? now - s->epochs[s->epochs_head].sent_ms : 0;
    bool behind = b.bytes >= b.limit || waited >= s->write_wait_ms;
    if (behind && !s->behind)
        sf_log(SF_LOG_WARN, "scheduler", "the database is behind (a journal write waiting %" PRIu64 " ms, the "
            "store holding %" PRIu64 " of %" PRIu64 " bytes): no chunks handed out until it catches up", waited,
            b.bytes, b.limit);
    else if (!behind && s->behind)
        sf_log(SF_LOG_INFO, "scheduler", "the database caught up: chunks handed out again");
    s->behind = behind;
    atomic_store_explicit(&s->g.behind, behind, memory_order_relaxed); /* read alone, as above */
    return behind;
}

void cd__writes_tick(cd__sched *s, uint64_t now)
{
    if (s->failing_since != 0 && now - s->reminded_ms >= REMIND_MS) {
        s->reminded_ms = now;
        sf_log(SF_LOG_WARN, "scheduler", "journal writes still fail after %.1f s: %u waiting to commit, %" PRIu64
            " sent again; the last error: %s", (double)(now - s->failing_since) / 1000.0, s->retrying,
            s->failing_resent, s->last_error);
    }
    /* "behind" said while a write waits, not only once it is answered;
     * while the database is away or the lock not held, claims wait anyway
     * and the store holds every query */
    if (s->db_up && !s->unlocked)
        cd__writes_wait(s, now);
}

bool cd__writes_answer(cd__sched *s, rt_msg *m, const char *error)
{
    cd__write *found = cd__write_map_get(&s->writes, m->req_id);
    if (found == NULL)
        return false;
    cd__write w = *found;
    cd__write_map_del(&s->writes, m->req_id);
    if (error != NULL) {
        write_failed(s, w, error); /* sent again, until it commits */
        return true;
    }
    uint64_t now = rt_mono_ms();
    bool held = s->behind || s->failing_since != 0;
    const PGresult *res = ((cd_result *)m)->res;
    bool row = res != NULL && PQntuples(res) == 1 && PQnfields(res) == 1;
    if (row && w.epoch != 0) /* a journal INSERT: its rows at odds with the journal (journal.h) */
        cd__count_conflicts(&s->g.conflicts_written, strtoull(PQgetvalue(res, 0, 0), NULL, 10),
            "journal rows not written: each repeats the first item of an accepted range with another count or "
            "result, and the row there stands");
    rt_msg_free(&w.again->hdr);
    if (w.failed)
        write_recovered(s, now);
    write_done(s, w, true, row ? PQgetvalue(res, 0, 0) : NULL);
    if (held && !cd__writes_wait(s, now))
        cd__serve_parked(s, false); /* the claims that waited for the database */
    return true;
}

void cd__writes_stats(cd__sched *s, cd_scheduler_stats *out)
{
    uint64_t now = rt_mono_ms();
    uint64_t since = atomic_load_explicit(&s->g.failing_since, memory_order_acquire); /* see publish_failing */
    uint64_t oldest = atomic_load_explicit(&s->g.oldest_write_ms, memory_order_relaxed);
    out->writes_failed = atomic_load_explicit(&s->g.writes_failed, memory_order_relaxed);
    out->writes_retrying = atomic_load_explicit(&s->g.writes_retrying, memory_order_relaxed);
    out->failing_ms = since == 0 ? -1 : now > since ? (int64_t)(now - since) : 0;
    out->behind = atomic_load_explicit(&s->g.behind, memory_order_relaxed);
    out->oldest_write_ms = oldest == 0 || now < oldest ? 0 : now - oldest;
    get_last_error(s, out->last_error, sizeof out->last_error);
}

void cd__writes_free(cd__sched *s)
{
    for (size_t i = 0; i < s->nbarriers; i++) {
        for (size_t k = 0; k < s->barriers[i].nwaiters; k++)
            rt_msg_free(s->barriers[i].waiters[k].completion);
        free(s->barriers[i].waiters);
    }
    free(s->barriers);
    for (size_t i = 0; i < s->nwaiting; i++)
        rt_msg_free(s->waiting[i].completion);
    free(s->waiting);
    for (size_t i = 0; i < s->nout; i++)
        free((void *)s->out[i].result);
    free(s->out);
    free(s->reend);
    free(s->gone);
    free(s->bfree);
    SF_MAP_EACH(&s->writes, e)
        rt_msg_free(&e->val.again->hdr);
    cd__write_map_free(&s->writes);
    for (size_t i = 0; i < s->nresend; i++)
        rt_msg_free(&s->resend[i].again->hdr);
    free(s->resend);
    for (size_t i = 0; i < s->nepochs; i++) {
        cd__epoch *p = &s->epochs[s->epochs_head + i];
        for (size_t k = 0; k < p->nends; k++)
            rt_msg_free(&p->ends[k].update->hdr);
        free(p->ends);
    }
    free(s->epochs);
    for (size_t i = 0; i < s->nending; i++)
        free(s->ending[i].result);
    free(s->ending);
    free(s->cancel_due);
    free(s->told);
}
