/*
 * scheduler_int.h — what the scheduler's files share, and nothing else
 * includes: the actor's state and the calls between its parts.
 *
 *   scheduler.c         the actor: claims, completions, the job table,
 *                       events, the dispatch of every message
 *   scheduler_writes.c  the write-behind journal: the outbox, the writes
 *                       in flight, the ends of jobs after their journal,
 *                       the "database is behind" state
 *   scheduler_json.c    the texts of the job events and of a job's result
 *   scheduler_load.c    loading jobs: their rows, their journals, restore
 *
 * Everything here runs in the scheduler's behaviour, on one thread at a
 * time, except the counters in cd__sched.g (see there).
 */
#ifndef SIMFARM_ACTORS_SCHEDULER_INT_H
#define SIMFARM_ACTORS_SCHEDULER_INT_H

#include "actors/coord/scheduler.h"
#include "actors/coord/store.h"
#include "base/map.h"
#include "sim/sim.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CD__M_TICK = CD_MSG__SCHED_PRIVATE, CD__M_SWEEP, CD__M_PROGRESS, CD__M_FLUSH, CD__M_RETRY };

enum { CD__DB_TIMEOUT_MS = 60000 };

/* How long the scheduler waits for the store's answer to one of its
 * writes before it sends the write again. The store answers every query
 * it takes (a result, the database's error, EBROKEN after 3 broken
 * connections, EFULL at once) but holds it, unanswered, for as long as the
 * database is away or behind; a write sent again while the first copy is
 * still held would run twice (harmless: the writes are idempotent) and
 * hold its bytes twice, a copy more each time the wait ran out. So the
 * wait is not how a failure is seen, the store's error answer is: this
 * one only guards against an answer that never comes, and is long. */
enum { CD__WRITE_TIMEOUT_MS = 3600000 };

/* What one node contributed to one job: accepted chunks and their items. */
typedef struct cd__contrib {
    uint64_t chunks, items;
} cd__contrib;

/* Contributions by node id: constant cost per completion. */
SF_MAP_DECLARE(cd__contrib_map, cd__contrib)

typedef struct cd__job_info {
    uint64_t id, seed;
    char kernel[32];
    uint8_t ctx_hash[32];
    uint32_t nout;
    char names[SIM_MAX_OUT][24];
    bool dirty;               /* progress to tell */
    uint64_t rate_done, rate_ms; /* items done at rate_ms, for items/s */
    double items_per_s;
    cd__contrib_map by_node;
    sc_strategy strategy;
    uint32_t nvariants;       /* tournament, stat_weights: the variants' names */
    char (*vnames)[65];
    double *steps;            /* stat_weights: variants 1 .. n-1 */
    /* The outputs' closed forms (sim_job_reference), bit o of has_ref for
     * output o; none for a tournament, whose outputs are its leader's. */
    double ref[SIM_MAX_OUT];
    unsigned has_ref;
    uint8_t tiers;            /* SC_TIER_* bits of the nodes that may run it */
    /* Why no node online can run it, in words (its progress's "blocked"),
     * as last told; "" when some node can. */
    char blocked[192];
    bool started;             /* a chunk of it was handed out (its "started" line is written) */
    double started_s;         /* when it first started (jobs.started_at, Unix seconds); 0: now */
    uint64_t items;           /* its items, as submitted */
} cd__job_info;

/* A node session that has asked for work and not left, by its actor. */
typedef struct cd__online {
    uint8_t tier;             /* one SC_TIER_* bit */
} cd__online;

SF_MAP_DECLARE(cd__online_map, cd__online)

/* The kernels whose farm speed is published (sim_kernel_at order). */
enum { CD__MAX_KERNELS = CD_KERNEL_SLOTS };

/* A write in flight, by its request id: the barrier it counts for (-1:
 * none), the job whose end it writes (0: none), the epoch whose journal
 * INSERTs it is one of (0: none), and a copy of its query to send again
 * until it commits (the store frees each query it answers). */
typedef struct cd__write {
    int barrier;
    uint64_t ends;
    uint64_t epoch;
    cd_query *again;          /* owned */
    bool failed;              /* it failed at least once: counted in cd__sched.retrying */
} cd__write;

SF_MAP_DECLARE(cd__write_map, cd__write)

/* A job's end, written once the journal rows before it are committed. */
typedef struct cd__held_end {
    cd_query *update;
    uint64_t job;
    int barrier;
} cd__held_end;

/* The journal INSERTs of one outbox write, and the ends of jobs held back
 * until they and those of every earlier epoch are answered: a job's row
 * never says it ended while a journal write of its results may still be
 * lost (one that failed is documented in docs/coordinator.md). */
typedef struct cd__epoch {
    unsigned inserts;         /* in flight */
    uint64_t sent_ms;         /* when they were sent (monotonic) */
    cd__held_end *ends;
    size_t nends, ends_cap;
} cd__epoch;

/* A job that ended (or was cancelled) and must not be loaded again while a
 * load may not see it: its row still says pending or running until its end
 * is committed, and a load that took its snapshot before then sees that. */
typedef struct cd__gone_job {
    uint64_t id;
    bool written;             /* its end is committed: only a load under way may miss it */
} cd__gone_job;

/* A job's end being written: its job.finished goes out once the write is
 * committed, with the state the row then holds (a cancel the API committed
 * first stands). */
typedef struct cd__ending {
    uint64_t job;
    double started_s;         /* when the job started (Unix seconds; 0: unknown), for its "finished" line */
    uint64_t items;           /* its items done */
    const char *state;        /* the scheduler's own: complete, expired, cancelled, failed */
    char *result;             /* JSON */
    bool cancel_seen;         /* the API's cancel came meanwhile */
} cd__ending;

/* A job whose end found its row cancelled by the API: the API's message
 * follows its commit at once, unless it stopped waiting for the commit
 * (a 503), when none comes; kept for CD__DB_TIMEOUT_MS at most. */
typedef struct cd__due_cancel {
    uint64_t job, since_ms;
} cd__due_cancel;

/* A job whose end the database refused after its job.finished went out
 * with `state`: taken up again, it ends once more, and that end sends no
 * second event unless the row then says otherwise. */
typedef struct cd__told_end {
    uint64_t job;
    const char *state;        /* static */
} cd__told_end;

typedef struct cd__parked {
    rt_msg *claim;            /* the kept cd_claim */
    uint64_t since_ms;
} cd__parked;

/* An accepted completion, answered once its records are committed. */
typedef struct cd__waiter {
    rt_msg *completion;       /* the kept cd_complete */
    sc_outcome outcome;
    bool job_complete;
} cd__waiter;

/* The writes of one flush and the completions waiting for all of them. */
typedef struct cd__barrier {
    cd__waiter *waiters;      /* NULL = free slot */
    size_t nwaiters;
    unsigned remaining;
    bool failed;
} cd__barrier;

typedef enum cd__op_kind { CD__OP_LIST = 1, CD__OP_JOURNAL } cd__op_kind;

/* A load's query in flight. */
typedef struct cd__op {
    int64_t req;
    cd__op_kind kind;
    cd__job_info info;        /* CD__OP_JOURNAL: the job being loaded */
    sc_job_spec spec;
    sim_layout layouts[SIM_MAX_OUT];
    sc_record *recs;          /* its journal so far (results owned, PQfreemem) */
    size_t nrecs, recs_cap;
    int64_t after;            /* the seq of the last record read */
} cd__op;

typedef struct cd__sched {
    rt_actor *self, *store;
    sc_ledger *l;
    uint64_t sweep_ms;
    bool db_up, unlocked;     /* unlocked: the coordinator's lock was lost and is not held again yet */
    rt_actor *watcher;        /* receives job events; may be NULL */
    cd__job_info *jobs;       /* loaded jobs */
    size_t njobs, jobs_cap;
    cd__parked *parked;       /* claims waiting for work, oldest first */
    size_t nparked, parked_cap;
    /* The sessions online (those that claimed and neither left nor
     * withdrew) and how many of each tier, for the jobs' "blocked". */
    cd__online_map online;
    unsigned online_tier[4];
    /* Each kernel's last measured farm speed (items/s of its running
     * jobs added up), kept while nodes stay online; 0: none measured. */
    double kernel_speed[CD__MAX_KERNELS];

    /* scheduler_load.c */
    bool loading;
    bool load_again;          /* asked to load while a load was under way */
    unsigned journals_pending;
    unsigned journal_page;    /* journal records read per query */
    uint64_t list_left;       /* jobs the last list held that were not taken in (past MAX_JOBS) */
    cd__op *ops;
    size_t nops, ops_cap;

    /* scheduler_writes.c */
    bool behind;              /* the database is behind with the writes: no claims (see cd__writes_wait) */
    uint64_t write_wait_ms;
    cd__write *resend;        /* writes that failed, to send again at the next retry */
    size_t nresend, resend_cap;
    bool retry_queued;        /* a CD__M_RETRY is on its way to us */
    uint64_t retry_ms;        /* the delay before the next round of them (doubling) */
    unsigned retrying;        /* writes that failed and are not committed yet */
    uint64_t failing_since;   /* when the first of them failed (monotonic ms); 0: none fails */
    uint64_t failing_resent;  /* writes that had to be sent again since then */
    uint64_t reminded_ms;     /* when the log last said they still fail */
    char last_error[256];     /* the database's words for the last failure, one line (g.last_error: a copy) */
    cd__gone_job *gone;       /* ended jobs no load may start (see cd__gone_job) */
    size_t ngone, gone_cap;
    sc_record *out;           /* journal records not yet written (each result a copy) */
    size_t nout, out_cap;
    sc_record *reend;         /* JOB_END records the journal holds already: the row only */
    size_t nreend, reend_cap;
    cd__waiter *waiting;      /* accepted completions whose records are in out */
    size_t nwaiting, waiting_cap;
    bool flush_queued;        /* a CD__M_FLUSH is on its way to us */
    cd__barrier *barriers;
    size_t nbarriers, barriers_cap;
    int *bfree;               /* barriers free for reuse */
    size_t nbfree, bfree_cap;
    cd__write_map writes;     /* writes in flight by request id (thousands at full load) */
    cd__ending *ending;       /* ends being written */
    size_t nending, ending_cap;
    cd__due_cancel *cancel_due; /* jobs whose row the API cancelled first, its message yet to come */
    size_t ncancel_due, cancel_due_cap;
    cd__told_end *told;       /* refused ends whose job.finished went out */
    size_t ntold, told_cap;
    cd__epoch *epochs;        /* epochs[head .. head + n) are numbers first .. first + n - 1 */
    size_t epochs_head, nepochs, epochs_cap;
    uint64_t epoch_first;

    /* What cd_scheduler_stats_get reads from other threads; only the
     * behaviour writes it. Each value is printed on its own, never combined
     * with another to decide anything, so relaxed stores and loads are
     * enough, but for failing_since (release: it comes with its count of
     * writes, scheduler_writes.c, publish_failing) and the text of
     * last_error. Away from the fields the behaviour rewrites all the time. */
    struct {
        char pad0[64];
        _Atomic uint64_t jobs, claims, expired, released, given_back;
        _Atomic uint64_t conflicts_written, conflicts_restored;
        _Atomic uint64_t checks_passed, checks_failed, checks_abandoned, quarantined;
        _Atomic uint64_t writes_failed, writes_retrying;
        _Atomic uint64_t failing_since, oldest_write_ms; /* monotonic ms; 0: none */
        _Atomic bool behind;
        /* The database's words for the last write it refused, one line,
         * under a sequence lock (scheduler_writes.c: set_last_error). */
        _Atomic unsigned error_seq;
        _Atomic char last_error[256];
        _Atomic uint64_t kernel_speed[CD__MAX_KERNELS]; /* a double's bits (kernel_speed above) */
        _Atomic uint64_t jobs_pending, jobs_started, items_left;
        _Atomic uint64_t kernel_results[CD__MAX_KERNELS][CD_KERNEL_OUTCOMES], kernel_items[CD__MAX_KERNELS];
        char pad1[64];
    } g;
    bool reload_due;          /* jobs were dropped for a quarantine: load them again once written */
} cd__sched;

/* ---- scheduler.c --------------------------------------------------------------------- */

/* The loaded job id, or NULL. */
cd__job_info *cd__job_info_of(const cd__sched *s, uint64_t id);

/* Frees what ji points to (not ji). */
void cd__job_info_free(cd__job_info *ji);

/* Drops job id from the ledger and the job table. */
void cd__forget_job(cd__sched *s, uint64_t id);

/* Sends an event to the watcher; takes fields (malloc'd JSON object
 * members, or NULL for none). */
void cd__emit(cd__sched *s, const char *type, uint64_t job, char *fields);

/* job.progress of ji from the ledger's counters (now: rt_mono_ms()). */
void cd__emit_progress(cd__sched *s, cd__job_info *ji, uint64_t now);

/* Answers the completion request req; why (copied; NULL for none) is a
 * refused result's words. */
void cd__reply_completed(rt_msg *req, int err, const char *why, sc_outcome outcome, bool job_complete);

/* A job whose row says cancelled (the API's UPDATE is committed). */
void cd__cancel_job(cd__sched *s, uint64_t job);

/* Work may have appeared: the waiting claims, oldest first, until one
 * finds nothing. With expire, those that waited long are answered empty. */
void cd__serve_parked(cd__sched *s, bool expire);

/* Adds n (if any) to one of the counters of journal records at odds with
 * others, and logs `what`. */
void cd__count_conflicts(_Atomic uint64_t *counter, uint64_t n, const char *what);

/* Why no node online can run ji, in words, into buf; "" when one can. */
void cd__blocked_text(const cd__sched *s, const cd__job_info *ji, char *buf, size_t cap);

/* The operator's line of a job's end (docs/coordinator.md, "Operator
 * log"): its state, items done and how long since it started (started_s,
 * Unix seconds; 0: unknown). */
void cd__log_finished(uint64_t job, const char *state, uint64_t items, double started_s);

/* The words of a job state, as the jobs table and the events spell it. */
const char *cd__state_name(sc_job_state st);

/* ---- scheduler_writes.c ---------------------------------------------------------------- */

/* The ledger's journal callback: copies r (and its result) into the outbox. */
void cd__journal_cb(void *ctx, const sc_record *r);

/* Writes the outbox soon (see there); `completion` (kept), if any, is
 * answered once its records are committed. */
void cd__flush(cd__sched *s, rt_msg *completion, sc_outcome outcome, bool done);

/* Writes every record in the outbox now, and the rows of the jobs it ends. */
void cd__write_out(cd__sched *s);

/* Sends a write; it counts for barrier b (-1: none), it writes the end of
 * job `ends` (0: of none), and it is one of the journal INSERTs of epoch e
 * (0: of none), each of which is done once it commits: a write the
 * database refuses is sent again until it does. Takes q. */
void cd__write_query(cd__sched *s, cd_query *q, int b, uint64_t ends, uint64_t e);

/* The store's answer m if it is to a write (error: why it failed, or
 * NULL): takes the write's part and returns true; false when m answers no
 * write. */
bool cd__writes_answer(cd__sched *s, rt_msg *m, const char *error);

/* Whether claims must wait for the journal's writes (now: rt_mono_ms()):
 * a write the database refused is being sent again, or the database,
 * though up, is behind with them; logs when "behind" changes. */
bool cd__writes_wait(cd__sched *s, uint64_t now);

/* The periodic part of the writes (the scheduler's tick): whether the
 * database fell behind, said while the write still waits; a reminder
 * while writes fail. */
void cd__writes_tick(cd__sched *s, uint64_t now);

/* Sends the writes that failed again (CD__M_RETRY). */
void cd__writes_retry(cd__sched *s);

/* The writes' part of cd_scheduler_stats_get. Any thread. */
void cd__writes_stats(cd__sched *s, cd_scheduler_stats *out);

/* Job's end, in `state` (static) with `result` (taken), is being written. */
void cd__ending_add(cd__sched *s, uint64_t job, const char *state, char *result);

/* The end of job being written, or NULL. */
cd__ending *cd__ending_of(cd__sched *s, uint64_t job);

/* The API's cancel of job, which the scheduler no longer holds: true when
 * its end is being or was written (its event says cancelled). */
bool cd__cancel_of_ended(cd__sched *s, uint64_t job);

/* Forgets the cancels whose message has not come in CD__DB_TIMEOUT_MS. */
void cd__cancels_expire(cd__sched *s, uint64_t now);

/* Whether loads must skip job id (see cd__gone_job). */
bool cd__gone_is(const cd__sched *s, uint64_t id);

/* Job id has ended; `written` when its row already says so (committed). */
void cd__gone_add(cd__sched *s, uint64_t id, bool written);

/* A load is done: the next one sees every committed end. */
void cd__gone_load_done(cd__sched *s);

/* Frees the write-behind state (the actor's finalizer). */
void cd__writes_free(cd__sched *s);

/* ---- scheduler_json.c ------------------------------------------------------------------ */

/* The job's result as a JSON object: state, items, each output's
 * statistics, the nodes' contributions and a strategy's part; "{}" for a
 * job the ledger does not hold. The caller frees it. */
char *cd__result_json(cd__sched *s, uint64_t job);

/* The members of ji's job.progress event from its status st. The caller
 * frees it. */
char *cd__progress_json(const cd__job_info *ji, const sc_job_status *st);

/* The members of a job.submitted event. The caller frees it. */
char *cd__submitted_json(const char *owner, const char *kernel, const char *strategy, const char *items,
    const char *priority);

/* A failed job's result, {"error":why}. The caller frees it. */
char *cd__error_json(const char *why);

/* ---- scheduler_load.c ------------------------------------------------------------------ */

/* Lists the jobs pending or running and loads those not held yet. */
void cd__load(cd__sched *s);

/* The store's answer m if it is to a load's query (error: why it failed,
 * or NULL); ignores any other. */
void cd__load_answer(cd__sched *s, rt_msg *m, const char *error);

/* Frees the loads under way (the actor's finalizer). */
void cd__load_free(cd__sched *s);

#endif
