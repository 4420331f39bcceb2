/*
 * scheduler.c — see scheduler.h. The actor itself: claims and
 * completions, the table of loaded jobs, their events, and the dispatch of
 * every message to the part that handles it (scheduler_int.h lists them).
 */
#include "actors/coord/scheduler_int.h"

#include "actors/coord/jobs.h"
#include "base/alloc.h"
#include "base/fnv.h"
#include "base/log.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    WRITE_WAIT_MS = 10000,    /* no chunks handed out while a journal write has waited this long */
    PROGRESS_MS = 250,        /* job.progress at most this often per job */
    PARK_MS = 5000,           /* an idle node's claim waits this long for work */
    MAX_PARKED = 65536,
    SPEED_FRESH_MS = 5000,    /* a job's items/s counts toward its kernel's speed this long */
    JOURNAL_PAGE = 20000,     /* journal records per query when a job is loaded */
};

/* ---- completions ------------------------------------------------------------------ */

static void complete_release(rt_msg *m)
{
    free(((cd_complete *)m)->result);
}

cd_complete *cd_complete_new(uint64_t job, uint64_t chunk, const uint8_t token[16], uint64_t node,
    const void *result, size_t len)
{
    cd_complete *c = RT_MSG_NEW(cd_complete, CD_MSG_COMPLETE);
    c->hdr.release = complete_release;
    c->job = job;
    c->chunk = chunk;
    c->node = node;
    memcpy(c->token, token, 16);
    c->result = sf_malloc(len ? len : 1);
    memcpy(c->result, result, len);
    c->len = len;
    return c;
}

void cd__reply_completed(rt_msg *req, int err, const char *why, sc_outcome outcome, bool job_complete)
{
    cd_completed *r = RT_MSG_NEW(cd_completed, CD_MSG_COMPLETED);
    r->err = err;
    snprintf(r->why, sizeof r->why, "%s", why != NULL ? why : "");
    r->outcome = outcome;
    r->job_complete = job_complete;
    r->received_us = ((const cd_complete *)req)->received_us; /* every completion request is a cd_complete */
    rt_reply(req, &r->hdr);
}

/* ---- the loaded jobs ---------------------------------------------------------------- */

cd__job_info *cd__job_info_of(const cd__sched *s, uint64_t id)
{
    for (size_t i = 0; i < s->njobs; i++)
        if (s->jobs[i].id == id)
            return &s->jobs[i];
    return NULL;
}

void cd__job_info_free(cd__job_info *ji)
{
    cd__contrib_map_free(&ji->by_node);
    free(ji->vnames);
    free(ji->steps);
}

void cd__forget_job(cd__sched *s, uint64_t id)
{
    sc_job_forget(s->l, id);
    for (size_t i = 0; i < s->njobs; i++)
        if (s->jobs[i].id == id) {
            cd__job_info_free(&s->jobs[i]);
            s->jobs[i] = s->jobs[--s->njobs];
            break;
        }
}

/* What node contributed to ji: one more chunk of `items` items. */
static void contrib_add(cd__job_info *ji, uint64_t node, uint64_t items)
{
    if (node == 0)
        return;
    cd__contrib *c = cd__contrib_map_put(&ji->by_node, node, NULL);
    c->chunks++;
    c->items += items;
}

uint64_t cd_owner_hash(const char *owner)
{
    if (owner == NULL || owner[0] == '\0')
        return 0;
    uint64_t h = sf_fnv64(SF_FNV64_BASIS, owner, strlen(owner));
    return h != 0 ? h : 1;
}

uint8_t cd_tier_bit(const char *tier)
{
    static const char *const names[] = { "own", "team", "community", "public" };
    for (unsigned i = 0; tier != NULL && i < 4; i++)
        if (strcmp(tier, names[i]) == 0)
            return (uint8_t)(1u << i);
    return 0;
}

/* Jobs a quarantine tainted (sched.h: sc_node_quarantine) hand out
 * nothing: each is dropped now, its claims stale, and loaded again from
 * its journal once every journal write sent before has been answered —
 * the quarantine's own records among them — so its restore leaves the
 * node's results out and hands their ranges out anew. */
static void drop_tainted(cd__sched *s)
{
    uint64_t ids[64];
    size_t n;
    while ((n = sc_tainted_jobs(s->l, ids, 64)) > 0) { /* each forgotten leaves the list */
        for (size_t i = 0; i < n && i < 64; i++) {
            char fields[48];
            snprintf(fields, sizeof fields, "\"job\":%" PRIu64, ids[i]);
            sf_logf(SF_LOG_WARN, "scheduler", fields,
                "job %" PRIu64 " held results of a quarantined node: loaded again from its journal without them", ids[i]);
            cd__forget_job(s, ids[i]);
        }
        s->reload_due = true;
    }
}

/* The reload drop_tainted asked for, once the journal is written. */
static void reload_when_written(cd__sched *s)
{
    if (s->reload_due && s->nout == 0 && s->nepochs == 0) {
        s->reload_due = false;
        cd__load(s);
    }
}

const char *cd__state_name(sc_job_state st)
{
    switch (st) {
    case SC_JOB_RUNNING: return "running";
    case SC_JOB_COMPLETE: return "complete";
    case SC_JOB_FAILED: return "failed";
    case SC_JOB_CANCELLED: return "cancelled";
    case SC_JOB_EXPIRED: return "expired";
    }
    return "failed";
}

static double wall_s(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

void cd__log_finished(uint64_t job, const char *state, uint64_t items, double started_s)
{
    char fields[160], after[48] = "";
    double took = started_s > 0 ? wall_s() - started_s : -1;
    if (took >= 0)
        snprintf(after, sizeof after, " after %.1f s", took);
    snprintf(fields, sizeof fields, "\"event\":\"job_finished\",\"job\":%" PRIu64 ",\"state\":\"%s\",\"items\":%" PRIu64
        ",\"duration_s\":%.3f", job, state, items, took >= 0 ? took : 0.0);
    sf_logf(SF_LOG_INFO, "scheduler", fields, "job %" PRIu64 " finished: %s, %" PRIu64 " items%s", job, state, items,
        after);
}

/* A job whose row says cancelled (the API's UPDATE is committed). */
void cd__cancel_job(cd__sched *s, uint64_t job)
{
    int rc = sc_job_cancel(s->l, job, rt_mono_ms());
    if (rc == 0) {
        cd__flush(s, NULL, 0, false); /* job.finished with the result so far */
    } else if (rc == SC_ENOJOB && !cd__cancel_of_ended(s, job)) { /* not loaded: a load under way must not start it */
        cd__gone_add(s, job, true);
        cd__emit(s, "job.finished", job, sf_fmt("\"state\":\"cancelled\""));
        cd__log_finished(job, "cancelled", 0, 0);
    }
}

/* ---- who may run what ------------------------------------------------------------------- */

/* "own, team and community" from SC_TIER_* bits (`last` between the
 * last two). */
static void tier_words(uint8_t bits, const char *last, char *buf, size_t cap)
{
    unsigned n = 0, k = 0;
    for (unsigned i = 0; i < 4; i++)
        n += (bits >> i) & 1u;
    buf[0] = '\0';
    for (unsigned i = 0; i < 4; i++) {
        if (!(bits & (1u << i)))
            continue;
        size_t at = strlen(buf);
        k++;
        snprintf(buf + at, cap - at, "%s%s", k == 1 ? "" : k == n ? last : ", ", cd_tier_name((uint8_t)(1u << i)));
    }
}

void cd__blocked_text(const cd__sched *s, const cd__job_info *ji, char *buf, size_t cap)
{
    uint8_t online = 0;
    for (unsigned i = 0; i < 4; i++)
        if (s->online_tier[i] > 0)
            online |= (uint8_t)(1u << i);
    uint8_t tiers = ji->tiers ? ji->tiers : SC_TIER_ANY;
    char want[64], either[64], have[64];
    tier_words(tiers, " and ", want, sizeof want);
    tier_words(tiers, " or ", either, sizeof either);
    tier_words(online, " and ", have, sizeof have);
    if (online == 0) {
        snprintf(buf, cap, "no node is online: it runs once a node of tier %s joins", either);
    } else if (!(online & tiers)) {
        snprintf(buf, cap, "no node online may run it: it runs on %s nodes, and the nodes online are %s", want, have);
    } else {
        buf[0] = '\0';
    }
}

/* The nodes online changed which tiers they cover: each job whose
 * "blocked" says otherwise now tells its progress again. */
static void online_changed(cd__sched *s)
{
    char now[sizeof s->jobs[0].blocked];
    for (size_t i = 0; i < s->njobs; i++) {
        cd__blocked_text(s, &s->jobs[i], now, sizeof now);
        if (strcmp(now, s->jobs[i].blocked) != 0)
            s->jobs[i].dirty = true;
    }
}

/* A session asked for work: online from now until it leaves. */
static void online_add(cd__sched *s, const rt_actor *session, uint8_t tier)
{
    bool added;
    cd__online *o = cd__online_map_put(&s->online, (uint64_t)(uintptr_t)session, &added);
    if (!added)
        return;
    o->tier = tier;
    for (unsigned i = 0; i < 4; i++)
        if (tier & (1u << i) && s->online_tier[i]++ == 0)
            online_changed(s);
}

static void online_remove(cd__sched *s, const rt_actor *session)
{
    cd__online *o = cd__online_map_get(&s->online, (uint64_t)(uintptr_t)session);
    if (o == NULL)
        return;
    uint8_t tier = o->tier;
    cd__online_map_del(&s->online, (uint64_t)(uintptr_t)session);
    for (unsigned i = 0; i < 4; i++)
        if (tier & (1u << i) && --s->online_tier[i] == 0)
            online_changed(s);
}

/* Each kernel's farm speed, published for the API's size check
 * (cd_scheduler_kernel_speed): the items/s of its jobs measured within
 * SPEED_FRESH_MS added up; with none, the last figure while any node is
 * online, 0 once none is. */
static void publish_speeds(cd__sched *s, uint64_t now)
{
    for (size_t k = 0; k < CD__MAX_KERNELS && sim_kernel_at(k) != NULL; k++) {
        const char *name = sim_kernel_name(sim_kernel_at(k));
        double sum = 0;
        for (size_t i = 0; i < s->njobs; i++)
            if (s->jobs[i].items_per_s > 0 && now - s->jobs[i].rate_ms < SPEED_FRESH_MS &&
                strcmp(s->jobs[i].kernel, name) == 0)
                sum += s->jobs[i].items_per_s;
        if (sum > 0)
            s->kernel_speed[k] = sum;
        else if (s->online.n == 0)
            s->kernel_speed[k] = 0;
        uint64_t bits;
        memcpy(&bits, &s->kernel_speed[k], sizeof bits);
        /* read alone by the API, never with another value */
        atomic_store_explicit(&s->g.kernel_speed[k], bits, memory_order_relaxed);
    }
}

double cd_scheduler_kernel_speed(rt_actor *scheduler, const char *kernel)
{
    cd__sched *s = rt_state(scheduler);
    for (size_t k = 0; k < CD__MAX_KERNELS && sim_kernel_at(k) != NULL; k++)
        if (strcmp(sim_kernel_name(sim_kernel_at(k)), kernel) == 0) {
            uint64_t bits = atomic_load_explicit(&s->g.kernel_speed[k], memory_order_relaxed);
            double v;
            memcpy(&v, &bits, sizeof v);
            return v;
        }
    return 0;
}

/* ---- events ---------------------------------------------------------------------------- */

static void event_release(rt_msg *m)
{
    free(((cd_event *)m)->fields);
}

void cd__emit(cd__sched *s, const char *type, uint64_t job, char *fields)
{
    if (s->watcher == NULL) {
        free(fields);
        return;
    }
    cd_event *e = RT_MSG_NEW(cd_event, CD_MSG_EVENT);
    e->hdr.release = event_release;
    snprintf(e->type, sizeof e->type, "%s", type);
    e->job = job;
    e->fields = fields;
    rt_send(s->watcher, &e->hdr);
}

/* job.progress from the ledger's counters: its cost does not depend on
 * the job's size. */
void cd__emit_progress(cd__sched *s, cd__job_info *ji, uint64_t now)
{
    sc_job_status st;
    if (sc_job_status_get(s->l, ji->id, &st) != 0)
        return;
    if (ji->rate_ms == 0) {
        ji->rate_ms = now;
        ji->rate_done = st.done_items;
    } else if (now - ji->rate_ms >= 1000) { /* items/s over about a second, smoothed */
        double rate = (double)(st.done_items - ji->rate_done) * 1000.0 / (double)(now - ji->rate_ms);
        ji->items_per_s = ji->items_per_s > 0 ? 0.5 * ji->items_per_s + 0.5 * rate : rate;
        ji->rate_ms = now;
        ji->rate_done = st.done_items;
    }
    cd__blocked_text(s, ji, ji->blocked, sizeof ji->blocked);
    cd__emit(s, "job.progress", ji->id, cd__progress_json(ji, &st));
}

/* Claims went back to their jobs: their reclaims and items in flight
 * changed, for the next progress tick to tell. */
static void claims_lost(cd__sched *s)
{
    for (size_t i = 0; i < s->njobs; i++)
        s->jobs[i].dirty = true;
}

static void on_progress_tick(cd__sched *s)
{
    uint64_t now = rt_mono_ms();
    for (size_t i = 0; i < s->njobs; i++)
        if (s->jobs[i].dirty) {
            s->jobs[i].dirty = false;
            cd__emit_progress(s, &s->jobs[i], now);
        }
}

void cd__count_conflicts(_Atomic uint64_t *counter, uint64_t n, const char *what)
{
    if (n == 0)
        return;
    sf_log(SF_LOG_INFO, "scheduler", "%" PRIu64 " %s", n, what);
    /* only this behaviour writes it; a reader prints it alone */
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n, memory_order_relaxed);
}

/* ---- claims and completions --------------------------------------------------------------- */

/* The first chunk of ji went to node: its operator line. */
static void log_started(cd__job_info *ji, uint64_t node)
{
    char fields[160];
    ji->started = true;
    snprintf(fields, sizeof fields, "\"event\":\"job_started\",\"job\":%" PRIu64 ",\"node\":%" PRIu64
        ",\"kernel\":\"%s\",\"items\":%" PRIu64, ji->id, node, ji->kernel, ji->items);
    sf_logf(SF_LOG_INFO, "scheduler", fields, "job %" PRIu64 " started: its first chunk went to node %" PRIu64
        " (%s, %" PRIu64 " items)", ji->id, node, ji->kernel, ji->items);
}

/* Answers a claim with what the ledger hands out; returns how many chunks.
 * waited_us: how long the claim waited for work (0: it came with some). */
static unsigned answer_claim(cd__sched *s, rt_msg *m, bool always, unsigned retry_ms, uint64_t waited_us)
{
    cd_claim *c = (cd_claim *)m;
    sc_claim_out out[CD_MAX_CLAIMS];
    unsigned n = 0;
    unsigned slots = c->slots > CD_MAX_CLAIMS ? CD_MAX_CLAIMS : c->slots;
    uint64_t now = rt_mono_ms();
    /* Nothing while the database is away: the results of chunks handed
     * out now could not be journaled, and would pile up in memory. Nothing
     * while it is there but behind: the journal's writes would pile up in
     * the store, without bound, and once the scheduler stopped waiting for
     * them their nodes would be told stale and take more. Nothing while
     * the database refuses the writes: they are sent again until they
     * commit, and their completions wait. Nothing without the
     * coordinator's lock: another coordinator may hold it and hand out
     * the same chunks. */
    if (s->db_up && !s->unlocked && !cd__writes_wait(s, now))
        sc_claim(s->l, &c->node, slots, now, out, &n);
    sc_node_trust t;
    bool quarantined = sc_node_trust_get(s->l, c->node.id, &t) == 0 && t.quarantined;
    if (n == 0 && !always && !quarantined)
        return 0;
    cd_claimed *r = RT_MSG_NEW(cd_claimed, CD_MSG_CLAIMED);
    r->retry_ms = retry_ms;
    r->quarantined = quarantined;
    r->asked_us = c->asked_us;
    r->waited_us = waited_us;
    for (unsigned i = 0; i < n; i++) {
        cd__job_info *ji = cd__job_info_of(s, out[i].job);
        cd_assignment *a = &r->a[r->n++];
        a->claim = out[i];
        if (ji != NULL && !ji->started)
            log_started(ji, c->node.id);
        if (ji != NULL) {
            memcpy(a->kernel, ji->kernel, sizeof a->kernel);
            memcpy(a->ctx_hash, ji->ctx_hash, 32);
            a->seed = ji->seed;
        }
    }
    rt_reply(m, &r->hdr);
    return n;
}

/* A claim with nothing to hand out waits here for work (a new job, chunks
 * given back), so an idle node starts at once instead of polling. */
static void on_claim(rt_actor *self, cd__sched *s, rt_msg *m)
{
    online_add(s, m->sender, ((cd_claim *)m)->node.tier);
    if (answer_claim(s, m, false, 0, 0) > 0)
        return;
    if (s->nparked >= MAX_PARKED) {
        answer_claim(s, m, true, 1000, 0);
        return;
    }
    rt_take(self, m);
    if (s->nparked == s->parked_cap)
        s->parked = sf_grow(s->parked, &s->parked_cap, sizeof *s->parked);
    s->parked[s->nparked++] = (cd__parked){ m, rt_mono_ms() };
}

/* Work may have appeared: the waiting claims, oldest first, until one
 * finds nothing. With expire, those waiting for PARK_MS are answered
 * empty (the node asks again at once). */
void cd__serve_parked(cd__sched *s, bool expire)
{
    uint64_t now = rt_mono_ms();
    size_t k = 0, i = 0;
    bool dry = false;
    for (; i < s->nparked; i++) {
        cd__parked *p = &s->parked[i];
        if (!dry && answer_claim(s, p->claim, false, 0, (now - p->since_ms) * 1000) > 0) {
            rt_msg_free(p->claim);
            continue;
        }
        dry = true;
        if (expire && now - p->since_ms >= PARK_MS) {
            answer_claim(s, p->claim, true, 0, 0);
            rt_msg_free(p->claim);
            continue;
        }
        s->parked[k++] = *p;
    }
    s->nparked = k;
    cd__flush(s, NULL, 0, false);
}

/* Takes out the waiting claims of one session (the sender of the claims),
 * answering them empty when the session is still there to hear it. Not by
 * node id: a node's new session may already wait while its old one ends. */
static void unpark_session(cd__sched *s, const rt_actor *session, bool answer)
{
    size_t k = 0;
    for (size_t i = 0; i < s->nparked; i++) {
        rt_msg *c = s->parked[i].claim;
        if (session == NULL || c->sender != session) {
            s->parked[k++] = s->parked[i];
            continue;
        }
        if (answer)
            rt_reply(c, &RT_MSG_NEW(cd_claimed, CD_MSG_CLAIMED)->hdr);
        rt_msg_free(c);
    }
    s->nparked = k;
}

/* The slot of kernel's figures (sim_kernel_at order), or -1. */
static int kernel_slot(const char *kernel)
{
    for (size_t k = 0; k < CD__MAX_KERNELS && sim_kernel_at(k) != NULL; k++)
        if (strcmp(sim_kernel_name(sim_kernel_at(k)), kernel) == 0)
            return (int)k;
    return -1;
}

static void on_complete(rt_actor *self, cd__sched *s, rt_msg *m)
{
    cd_complete *c = (cd_complete *)m;
    sc_outcome outcome = SC_STALE;
    bool done = false;
    size_t before = s->nout;
    sf_error why = { 0 };
    int rc = sc_complete(s->l, c->job, c->chunk, c->token, c->node, c->result, c->len, rt_mono_ms(), &outcome, &done,
        &why);
    if (rc == SC_ENOJOB) { /* ended and forgotten */
        cd__reply_completed(m, 0, NULL, SC_STALE, false);
        return;
    }
    drop_tainted(s); /* a check decided, or malformed results, may have quarantined a node */
    if (rc != 0) {
        cd__reply_completed(m, rc, why.msg, 0, false);
        cd__flush(s, NULL, 0, false);
        return;
    }
    rt_take(self, m);
    cd__job_info *kj = cd__job_info_of(s, c->job);
    int k = kj != NULL ? kernel_slot(kj->kernel) : -1;
    if (k >= 0 && outcome >= SC_ACCEPTED && outcome <= SC_STALE) /* only this behaviour writes them; read alone */
        atomic_fetch_add_explicit(&s->g.kernel_results[k][outcome - SC_ACCEPTED], 1, memory_order_relaxed);
    if (outcome == SC_ACCEPTED) {
        cd__job_info *ji = kj;
        if (ji != NULL) {
            ji->dirty = true;
            /* the ACCEPT record this call added says how many items */
            for (size_t i = before; i < s->nout; i++)
                if (s->out[i].type == SC_REC_ACCEPT && s->out[i].job == c->job) {
                    contrib_add(ji, c->node, s->out[i].count);
                    if (k >= 0)
                        atomic_fetch_add_explicit(&s->g.kernel_items[k], s->out[i].count, memory_order_relaxed);
                    break;
                }
        }
        if (s->nout > before) {
            cd__flush(s, m, outcome, done); /* answered when its writes are committed */
            return;
        }
        /* a check's run that decided nothing: nothing to make durable */
    }
    cd__flush(s, NULL, 0, false);
    cd__reply_completed(m, 0, NULL, outcome, false);
    rt_msg_free(m);
}

/* ---- the actor ------------------------------------------------------------------------------ */

/* A store's answer (or its timeout, or its mailbox shedding the
 * request): to a write, or to a load's query. */
static void on_reply(cd__sched *s, rt_msg *m)
{
    cd_result *r = m->type == CD_MSG_RESULT ? (cd_result *)m : NULL;
    const char *error = r != NULL                ? (r->res == NULL ? r->error : NULL)
                      : m->type == RT_MSG_SHED   ? "the store's mailbox was full"
                                                 : "the database did not answer in time";
    if (!cd__writes_answer(s, m, error))
        cd__load_answer(s, m, error);
}

static void behaviour(rt_actor *self, rt_msg *m)
{
    cd__sched *s = rt_state(self);
    switch (m->type) {
    case CD_MSG_STORE_UP:
        s->db_up = true;
        cd__load(s);
        cd__serve_parked(s, false); /* the claims that waited out the outage */
        break;
    case CD_MSG_STORE_DOWN:
        s->db_up = false;
        break;
    case CD_MSG_LOCK_LOST:
        s->unlocked = true;
        break;
    case CD_MSG_LISTENING:
        cd__load(s);
        if (s->unlocked) {
            s->unlocked = false;
            cd__serve_parked(s, false);
        }
        break;
    case CD_MSG_NOTIFY:
    case CD__M_SWEEP:
        cd__load(s);
        break;
    case CD__M_TICK: {
        cd__writes_tick(s, rt_mono_ms());
        if (sc_reclaim(s->l, rt_mono_ms()) > 0)
            claims_lost(s);
        sc_ledger_stats ls;
        sc_ledger_stats_get(s->l, &ls);
        atomic_store_explicit(&s->g.jobs, s->njobs, memory_order_relaxed);
        atomic_store_explicit(&s->g.claims, ls.live_claims, memory_order_relaxed);
        atomic_store_explicit(&s->g.expired, ls.expired, memory_order_relaxed);
        atomic_store_explicit(&s->g.released, ls.released, memory_order_relaxed);
        atomic_store_explicit(&s->g.given_back, ls.given_back, memory_order_relaxed);
        atomic_store_explicit(&s->g.checks_passed, ls.checks_passed, memory_order_relaxed);
        atomic_store_explicit(&s->g.checks_failed, ls.checks_failed, memory_order_relaxed);
        atomic_store_explicit(&s->g.checks_abandoned, ls.checks_abandoned, memory_order_relaxed);
        atomic_store_explicit(&s->g.quarantined, ls.quarantined, memory_order_relaxed);
        uint64_t started = 0, left = 0;
        for (size_t i = 0; i < s->njobs; i++) {
            started += s->jobs[i].started;
            left += sc_job_items_left(s->l, s->jobs[i].id);
        }
        atomic_store_explicit(&s->g.jobs_started, started, memory_order_relaxed);
        atomic_store_explicit(&s->g.items_left, left, memory_order_relaxed);
        atomic_store_explicit(&s->g.jobs_pending, s->njobs - started + s->journals_pending + s->list_left,
            memory_order_relaxed);
        drop_tainted(s); /* a load's restore may have learnt of a quarantine */
        cd__flush(s, NULL, 0, false);
        reload_when_written(s);
        cd__serve_parked(s, true);
        publish_speeds(s, rt_mono_ms());
        break;
    }
    case CD__M_PROGRESS:
        on_progress_tick(s);
        break;
    case CD__M_FLUSH:
        s->flush_queued = false;
        cd__write_out(s);
        break;
    case CD__M_RETRY:
        cd__writes_retry(s);
        break;
    case CD_MSG_CLAIM:
        on_claim(self, s, m);
        break;
    case CD_MSG_WATCH: {
        cd_watch *w = (cd_watch *)m;
        if (s->watcher != NULL)
            rt_actor_release(s->watcher);
        s->watcher = w->who;
        w->who = NULL;
        break;
    }
    case CD_MSG_CANCEL_JOB:
        cd__cancel_job(s, ((cd_cancel_job *)m)->job);
        break;
    case CD_MSG_COMPLETE:
        on_complete(self, s, m);
        break;
    case CD_MSG_RENEW: {
        cd_renew *r = (cd_renew *)m;
        sc_renew(s->l, r->node, (const uint8_t (*)[16])r->tokens, r->n > CD_MAX_RENEW ? CD_MAX_RENEW : r->n, rt_mono_ms());
        break;
    }
    case CD_MSG_GIVE_BACK: {
        cd_renew *r = (cd_renew *)m;
        if (sc_give_back(s->l, r->node, (const uint8_t (*)[16])r->tokens, r->n > CD_MAX_RENEW ? CD_MAX_RENEW : r->n,
                rt_mono_ms()) > 0) {
            claims_lost(s);
            cd__serve_parked(s, false);
        }
        cd__flush(s, NULL, 0, false);
        break;
    }
    case CD_MSG_WITHDRAW:
        unpark_session(s, m->sender, true);
        online_remove(s, m->sender);
        break;
    case CD_MSG_MALFORMED:
        sc_node_malformed(s->l, ((cd_node_gone *)m)->node, rt_mono_ms());
        drop_tainted(s);
        cd__flush(s, NULL, 0, false);
        break;
    case CD_MSG_NODE_GONE: {
        cd_node_gone *g = (cd_node_gone *)m;
        unpark_session(s, m->sender, false);
        online_remove(s, m->sender);
        if (sc_release_node(s->l, g->node, g->session, rt_mono_ms()) > 0) {
            claims_lost(s);
            cd__serve_parked(s, false);
        }
        cd__flush(s, NULL, 0, false);
        break;
    }
    case CD_MSG_RESULT:
    case RT_MSG_TIMEOUT:
    case RT_MSG_SHED:
        on_reply(s, m);
        break;
    default:
        break;
    }
}

static void random_cb(void *ctx, void *buf, size_t n)
{
    (void)ctx;
    randombytes_buf(buf, n);
}

static void finalize(rt_actor *self)
{
    cd__sched *s = rt_state(self);
    cd__writes_free(s);
    cd__load_free(s);
    for (size_t i = 0; i < s->njobs; i++)
        cd__job_info_free(&s->jobs[i]);
    free(s->jobs);
    for (size_t i = 0; i < s->nparked; i++)
        rt_msg_free(s->parked[i].claim);
    free(s->parked);
    cd__online_map_free(&s->online);
    sc_ledger_destroy(s->l);
    rt_actor_release(s->store);
    if (s->watcher != NULL)
        rt_actor_release(s->watcher);
}

static void watch_release(rt_msg *m)
{
    cd_watch *w = (cd_watch *)m;
    if (w->who != NULL)
        rt_actor_release(w->who);
}

void cd_scheduler_watch(rt_actor *scheduler, rt_actor *who)
{
    cd_watch *w = RT_MSG_NEW(cd_watch, CD_MSG_WATCH);
    w->who = rt_actor_retain(who);
    w->hdr.release = watch_release;
    rt_send(scheduler, &w->hdr);
}

void cd_scheduler_stats_get(rt_actor *scheduler, cd_scheduler_stats *out)
{
    cd__sched *s = rt_state(scheduler);
    out->jobs = atomic_load_explicit(&s->g.jobs, memory_order_relaxed);
    out->claims = atomic_load_explicit(&s->g.claims, memory_order_relaxed);
    out->expired = atomic_load_explicit(&s->g.expired, memory_order_relaxed);
    out->released = atomic_load_explicit(&s->g.released, memory_order_relaxed);
    out->given_back = atomic_load_explicit(&s->g.given_back, memory_order_relaxed);
    out->conflicts_written = atomic_load_explicit(&s->g.conflicts_written, memory_order_relaxed);
    out->conflicts_restored = atomic_load_explicit(&s->g.conflicts_restored, memory_order_relaxed);
    out->checks_passed = atomic_load_explicit(&s->g.checks_passed, memory_order_relaxed);
    out->checks_failed = atomic_load_explicit(&s->g.checks_failed, memory_order_relaxed);
    out->checks_abandoned = atomic_load_explicit(&s->g.checks_abandoned, memory_order_relaxed);
    out->quarantined = atomic_load_explicit(&s->g.quarantined, memory_order_relaxed);
    out->jobs_pending = atomic_load_explicit(&s->g.jobs_pending, memory_order_relaxed);
    out->jobs_started = atomic_load_explicit(&s->g.jobs_started, memory_order_relaxed);
    out->items_left = atomic_load_explicit(&s->g.items_left, memory_order_relaxed);
    for (int k = 0; k < CD_KERNEL_SLOTS; k++) {
        for (int o = 0; o < CD_KERNEL_OUTCOMES; o++)
            out->kernel_results[k][o] = atomic_load_explicit(&s->g.kernel_results[k][o], memory_order_relaxed);
        out->kernel_items[k] = atomic_load_explicit(&s->g.kernel_items[k], memory_order_relaxed);
    }
    cd__writes_stats(s, out);
}

rt_actor *cd_scheduler_spawn(rt_system *sys, const cd_scheduler_opts *opts)
{
    if (opts == NULL || opts->store == NULL || sodium_init() < 0)
        return NULL;
    rt_actor_opts o = { .state_size = sizeof(cd__sched), .finalize = finalize, .name = "scheduler" };
    rt_actor *a = rt_spawn(sys, behaviour, &o);
    if (a == NULL)
        return NULL;
    cd__sched *s = rt_state(a);
    s->self = a;
    s->store = rt_actor_retain(opts->store);
    s->sweep_ms = opts->sweep_ms ? opts->sweep_ms : 5000;
    s->journal_page = opts->journal_page ? opts->journal_page : JOURNAL_PAGE;
    s->write_wait_ms = opts->write_wait_ms ? opts->write_wait_ms : WRITE_WAIT_MS;
    s->epoch_first = 1; /* 0 stands for none */
    sc_config cfg = opts->ledger;
    cfg.journal = cd__journal_cb;
    cfg.journal_ctx = s;
    cfg.random = random_cb;
    cfg.verify.on = true;
    s->l = sc_ledger_create(&cfg);
    rt_send_every(a, 1000, CD__M_TICK, 0);
    rt_send_every(a, s->sweep_ms, CD__M_SWEEP, 0);
    rt_send_every(a, PROGRESS_MS, CD__M_PROGRESS, 0);
    cd_store_subscribe(opts->store, a);
    return a;
}
