/*
 * scheduler.h — the scheduler actor: the claim ledger (sched/) of every
 * unfinished job, kept durable through the store.
 *
 * It loads jobs that are pending or running when the database comes up,
 * when a `pending_job` notice arrives, and on a periodic sweep (a notice
 * can be missed); each job's ledger is rebuilt from its journal, so a
 * restarted coordinator resumes where it was. Claims are answered from
 * memory. A completion is answered once its journal row is committed, so
 * an acknowledged result survives any crash; a job's end writes its state
 * and result (the merged statistics of every output) to the jobs table.
 * Leases are swept every second.
 */
#ifndef SIMFARM_ACTORS_SCHEDULER_H
#define SIMFARM_ACTORS_SCHEDULER_H

#include "runtime/runtime.h"
#include "sched/sched.h"

enum {
    CD_MSG_CLAIM = RT_MSGS_SCHEDULER, /* cd_claim (request) -> cd_claimed */
    CD_MSG_CLAIMED,
    CD_MSG_COMPLETE,                     /* cd_complete (request) -> cd_completed */
    CD_MSG_COMPLETED,
    CD_MSG_NODE_GONE,                    /* cd_node_gone: the session's claims go back at once */
    CD_MSG_RENEW,                        /* cd_renew: a heartbeat renews these leases */
    CD_MSG_GIVE_BACK,                    /* cd_renew: the node holds these no more; they go back at once */
    CD_MSG_WATCH,                        /* cd_watch: send job events (cd_event) to who */
    CD_MSG_EVENT,                        /* cd_event: job.started, job.progress, job.finished */
    CD_MSG_CANCEL_JOB,                   /* cd_cancel_job: stop a job (its row already says cancelled) */
    CD_MSG_WITHDRAW,                     /* plain: the sending session takes no more work; a claim of
                                            it that waits for work is answered empty */
    CD_MSG_MALFORMED,                    /* cd_node_gone: the node sent a result for another range or
                                            work context than its claim's; counts toward its quarantine */
    CD_MSG__SCHED_PRIVATE = RT_MSGS_SCHEDULER_PRIVATE,
};

enum { CD_MAX_CLAIMS = 16 };

typedef struct cd_claim {
    rt_msg hdr;
    sc_node_info node;
    unsigned slots;           /* at most CD_MAX_CLAIMS */
    uint64_t asked_us;        /* when the session sent it (cd_metrics_now_us), for the dispatch latency */
} cd_claim;

typedef struct cd_assignment {
    sc_claim_out claim;
    char kernel[32];
    uint8_t ctx_hash[32];
    uint64_t seed;
} cd_assignment;

/* A claim the scheduler has nothing for waits (up to a few seconds) until
 * work appears, so an idle node gets a new job's chunks at once. */
typedef struct cd_claimed {
    rt_msg hdr;
    bool quarantined;         /* the node is quarantined (docs/verification.md): its session ends */
    unsigned retry_ms;        /* n == 0: ask again after this (0 = at once) */
    uint64_t asked_us;        /* the claim's (cd_claim.asked_us) */
    uint64_t waited_us;       /* how long it waited for work to appear (0: there was work) */
    unsigned n;
    cd_assignment a[CD_MAX_CLAIMS];
} cd_claimed;

typedef struct cd_complete {
    rt_msg hdr;
    uint64_t job, chunk, node;
    uint8_t token[16];
    unsigned char *result;    /* owned (freed with the message) */
    size_t len;
    uint64_t received_us;     /* when the session read its frame (cd_metrics_now_us), for the completion latency */
} cd_complete;

typedef struct cd_completed {
    rt_msg hdr;
    int err;                  /* 0, or an SC_E* code (SC_EBADRESULT) */
    char why[512];            /* with SC_EBADRESULT: which check the result failed, in words (sf_error.msg) */
    sc_outcome outcome;
    bool job_complete;
    uint64_t received_us;     /* the completion's (cd_complete.received_us) */
} cd_completed;

typedef struct cd_node_gone {
    rt_msg hdr;
    uint64_t node;
    uint64_t session;         /* the connection that ended (sc_node_info.session) */
} cd_node_gone;

enum { CD_MAX_RENEW = 64 };

typedef struct cd_renew {
    rt_msg hdr;
    uint64_t node;
    unsigned n;
    uint8_t tokens[CD_MAX_RENEW][16];
} cd_renew;

typedef struct cd_watch {
    rt_msg hdr;
    rt_actor *who;            /* retained by the message, then by the scheduler */
} cd_watch;

typedef struct cd_event {
    rt_msg hdr;
    char type[24];
    uint64_t job;
    char *fields;             /* owned: JSON object members without braces (events.h) */
} cd_event;

typedef struct cd_cancel_job {
    rt_msg hdr;
    uint64_t job;
} cd_cancel_job;

/* Makes `who` the receiver of the scheduler's job events. Any thread. */
void cd_scheduler_watch(rt_actor *scheduler, rt_actor *who);

/* A completion request owning a copy of the result bytes. */
cd_complete *cd_complete_new(uint64_t job, uint64_t chunk, const uint8_t token[16], uint64_t node,
    const void *result, size_t len);

typedef struct cd_scheduler_opts {
    rt_actor *store;          /* retained; the scheduler subscribes to it */
    sc_config ledger;         /* chunk sizes, leases; journal and random are the actor's */
    uint64_t sweep_ms;        /* look for new jobs this often (default 5,000) */
    unsigned journal_page;    /* journal records read per query when a job is loaded (default 20,000) */
    uint64_t write_wait_ms;   /* no chunks handed out while a journal write has waited this long (default 10,000) */
} cd_scheduler_opts;

/* The kernels whose figures are kept apart (sim_kernel_at order). */
enum { CD_KERNEL_SLOTS = 8 };

/* The outcomes the ledger gives a chunk result, in this order in
 * cd_scheduler_stats.kernel_results (SC_ACCEPTED ... SC_STALE, less one). */
enum { CD_KERNEL_OUTCOMES = 4 };

/* The ledger's figures for /metrics, as of the scheduler's last lease
 * sweep (every second); the journal's as they happen. */
typedef struct cd_scheduler_stats {
    uint64_t jobs;            /* unfinished jobs the scheduler holds */
    /* Unfinished jobs by whether a chunk of theirs was handed out in this
     * coordinator's run (running) or not yet (pending: loading, or waiting
     * for a node that may run them), with the pending rows a load could not
     * take in (past its limit of jobs). */
    uint64_t jobs_pending, jobs_started;
    /* Items of those jobs not done yet, in nodes' hands or waiting; a
     * tournament's: each candidate still in, to the end. */
    uint64_t items_left;
    /* Chunk results the ledger answered, by kernel (sim_kernel_at order)
     * and outcome (accepted, idempotent, conflict, stale), and the items of
     * the accepted ones, since the start. */
    uint64_t kernel_results[CD_KERNEL_SLOTS][CD_KERNEL_OUTCOMES];
    uint64_t kernel_items[CD_KERNEL_SLOTS];
    uint64_t claims;          /* chunks handed out and not yet answered */
    uint64_t expired;         /* claims whose lease ran out (their ranges handed out again), since the start */
    uint64_t released;        /* claims taken back because their node went away, since the start */
    uint64_t given_back;      /* claims taken back because their node stopped listing them, since the start */
    /* Journal records at odds with others, since the start: accepts not
     * written because a row for the same first item holds another count
     * or result; records loaded jobs' restores skipped (they overlap others). */
    uint64_t conflicts_written, conflicts_restored;
    /* Spot-checks decided (passed: the bytes agreed; failed: a node's
     * result was proven wrong), and nodes quarantined, since the start. */
    uint64_t checks_passed, checks_failed, checks_abandoned, quarantined;
    /* The journal's writes (its INSERTs and the ends of jobs). One the
     * database refuses (an error, no answer) is sent again until it
     * commits, and no chunks are handed out meanwhile ("failing"), nor
     * while the database is behind with them. */
    uint64_t writes_failed;   /* answers that were errors, since the start */
    uint64_t writes_retrying; /* writes that failed and are not committed yet */
    int64_t failing_ms;       /* how long writes have been failing; -1: they are not */
    bool behind;              /* the database is behind with the writes (docs/coordinator.md) */
    uint64_t oldest_write_ms; /* how long the oldest journal INSERT not committed has waited; 0: none */
    char last_error[256];     /* while failing, the database's words for the last refusal, one line; else "" */
} cd_scheduler_stats;

/* A node's owner as the ledger knows it (sc_node_info.owner): a hash of
 * the name, 0 for none (a public node is its own owner). */
uint64_t cd_owner_hash(const char *owner);

/* A tier's name as its SC_TIER_* bit; 0 for none. */
uint8_t cd_tier_bit(const char *tier);

/* The farm's speed for jobs of `kernel` in items/s, as of the scheduler's
 * last lease sweep: what its running jobs of that kernel measured, added
 * up, or the last such figure while nodes stay online; 0 when none is
 * known (docs/api.md, "Large jobs"). Any thread. */
double cd_scheduler_kernel_speed(rt_actor *scheduler, const char *kernel);

/* Any thread. */
void cd_scheduler_stats_get(rt_actor *scheduler, cd_scheduler_stats *out);

/* Spawns the scheduler (a pool actor). Returns NULL when the runtime is
 * stopping. The handle holds one reference for the caller. */
rt_actor *cd_scheduler_spawn(rt_system *sys, const cd_scheduler_opts *opts);

#endif
