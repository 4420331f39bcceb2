/*
 * sched.h — job splitting and the claim ledger. Pure C, no I/O, one thread:
 * the scheduler actor owns a ledger and calls it; nothing here blocks or
 * waits on the database (what must survive goes out as journal records).
 *
 * A job's items [0, items) are cut into chunks on demand, sized so a chunk
 * takes about target_chunk_ms on the claiming node. A claim is the record
 * that one node holds one chunk: a random 128-bit token, the range, the
 * lease deadline and the attempt count. sc_complete() answers exactly one of
 * accepted / idempotent / conflict / stale, and every item of a job is
 * counted exactly once whatever the interleaving of claims, completions,
 * expiries, node losses and restarts from the journal.
 *
 * Errors: functions return 0 or a negative SC_E* code (sf_strerror()).
 */
#ifndef SIMFARM_SCHED_H
#define SIMFARM_SCHED_H

#include "sim/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The ledger's codes, SC_E*, are in base/err.h (sf_strerror()). */
enum { SC_OK = 0 };

typedef struct sc_ledger sc_ledger;

/* Node trust tiers, most trusted first; a job lists the tiers it accepts. */
enum { SC_TIER_OWN = 1, SC_TIER_TEAM = 2, SC_TIER_COMMUNITY = 4, SC_TIER_PUBLIC = 8, SC_TIER_ANY = 15 };

typedef struct sc_record sc_record;

/* Spot-checks (docs/verification.md): a share of accepted results is
 * computed again on a node of another owner and address, and the two
 * result byte strings must be equal. Off unless `on`. */
typedef struct sc_verify_config {
    bool on;
    double escape;            /* public nodes: the chance a saboteur moves a job by one
                                 standard error unseen (default 1e-6) */
    double screen_z;          /* a chunk whose mean is this many of its standard errors off
                                 the job's is checked at once (default 3) */
    uint32_t warmup;          /* an enrolled node's first results are all checked until this
                                 many checks passed in a row (default 5) */
    double floor;             /* enrolled nodes past warm-up: checked at max(floor, 1/streak)
                                 (default 0.01) */
    double public_floor;      /* public nodes: never checked less often (default 0.02) */
    uint32_t malformed_limit; /* malformed results that quarantine a node (default 10) */
    uint64_t check_wait_ms;   /* a check no node took in this long is given up: its result stays
                                 unchecked, and counted so (default 120,000) */
} sc_verify_config;

typedef struct sc_config {
    uint64_t target_chunk_ms; /* a chunk should take this long (default 10,000) */
    uint64_t min_chunk;       /* items (default 1,000); also the size for a node of unknown speed */
    uint64_t max_chunk;       /* items (default 1e9) */
    uint64_t min_lease_ms;    /* leases are max(this, 3 x the expected duration) (default 30,000) */
    uint32_t max_attempts;    /* a chunk fails when a lease runs out on its claim this many times (default 3) */
    uint32_t max_releases;    /* ... or when this many of its nodes went away holding it (default 10) */
    /* Accepted chunks per job whose token and result hash are kept, so a
     * resent result is answered idempotent or conflict (default 65,536;
     * 32 bytes each). The newest chunk ids are kept; a resend of an older
     * one is stale, which is safe: an accepted range is never handed out
     * again. */
    uint32_t accepted_window;
    /* Fills buf with n unpredictable bytes (claim tokens). Default: a
     * splitmix generator seeded with `seed`, for tests only. */
    void (*random)(void *ctx, void *buf, size_t n);
    void *random_ctx;
    uint64_t seed;
    /* A claim is held at most this long however often its lease is renewed
     * (default 10 x min_lease_ms, and never below 2 leases); then it is
     * taken back as if its lease had run out. */
    uint64_t max_hold_ms;
    sc_verify_config verify;
    /* Receives each record that recovery needs; may be NULL. The record and
     * what it points to are valid during the call only. */
    void (*journal)(void *ctx, const sc_record *rec);
    void *journal_ctx;
} sc_config;

/* single: one run over the items.
 * stat_weights: `variants` runs (a baseline and one perturbed run per
 * parameter) over the same items with common random numbers: every chunk is
 * computed for every variant, and each parameter's weight is
 * (mean_v - mean_0) / step_v with a standard error from the per-chunk
 * paired differences (batch means).
 * tournament: `variants` candidates raced in phases over the same items:
 * each survivor runs phase_items, then phase_items x growth ... items in
 * total; after each phase the candidates dominated by the leader (their
 * interval of z standard errors clear of the leader's) and those ranked
 * below `keep` drop out. Ends with one candidate left or all items run. */
typedef enum sc_strategy { SC_SINGLE = 1, SC_TOURNAMENT, SC_STAT_WEIGHTS } sc_strategy;

typedef struct sc_job_spec {
    uint64_t id;
    sc_strategy strategy;
    uint64_t items;
    int32_t priority;           /* higher runs first */
    uint64_t owner;             /* owners of equal priority take turns */
    uint8_t tiers;              /* SC_TIER_* bits that may run it; 0 = any */
    uint32_t backends;          /* capability bits a node must have one of; 0 = any */
    uint64_t mem_bytes;         /* memory a node must offer; 0 = any */
    uint32_t nout;              /* kernel outputs: sim_stats per chunk result */
    const sim_layout *layouts;  /* nout layouts (copied) */
    uint64_t samples_per_item;  /* output 0 counts this many samples per item (default 1) */
    double precision;           /* stop when 1.96 x stderr of output 0's mean <= this; 0 = off */
    uint64_t deadline_ms;       /* stop with SC_JOB_EXPIRED at this time; 0 = none */
    uint8_t ctx_hash[32];       /* work-context hash handed out with claims */
    /* verification (sc_config.verify): results of these tiers are taken
     * without checks; others are checked at least at check_rate (0 ... 1) */
    uint8_t trusted_tiers;
    double check_rate;
    /* tournament and stat_weights */
    uint32_t variants;          /* candidates, or baseline + perturbed runs (2 ... 4096) */
    const double *steps;        /* stat_weights: the step of variants 1 .. variants-1 (copied) */
    uint64_t phase_items;       /* tournament: items per candidate in phase 0 (default 1,000) */
    uint32_t growth;            /* tournament: budget factor per phase (default 4) */
    uint32_t keep;              /* tournament: most survivors of a phase; 0 = no rank cut */
    bool minimize;              /* tournament: a lower output-0 mean wins */
    double z;                   /* tournament: dominance margin in standard errors (default 1.96) */
} sc_job_spec;

typedef enum sc_job_state {
    SC_JOB_RUNNING = 1, SC_JOB_COMPLETE, SC_JOB_FAILED, SC_JOB_CANCELLED, SC_JOB_EXPIRED
} sc_job_state;

typedef struct sc_node_info {
    uint64_t id;
    uint64_t session;      /* the connection claiming for the node (sc_release_node); 0 = none named */
    uint8_t tier;          /* one SC_TIER_* bit */
    uint32_t backends;     /* capability bits */
    uint64_t mem_bytes;
    double items_per_s;    /* measured speed; 0 = unknown */
    uint64_t owner;        /* who it belongs to (a hash of the name); 0 = none: its own owner */
    uint64_t addr;         /* a hash of its network address; 0 = unknown */
    uint32_t streak;       /* checks it passed in a row, as last saved: its credibility */
} sc_node_info;

typedef struct sc_claim_out {
    uint8_t token[16];
    uint64_t job, chunk;
    uint32_t variant;      /* tournament: the candidate to run; else 0 */
    uint64_t first, count;
    uint64_t lease_until;
    uint32_t attempt;      /* 0 for a first try */
} sc_claim_out;

typedef enum sc_outcome { SC_ACCEPTED = 1, SC_IDEMPOTENT, SC_CONFLICT, SC_STALE } sc_outcome;

/* Journal records. ACCEPT carries the result bytes; restore needs only
 * these records, in any order.
 * VERIFY: the accepted range of `node` at (variant, first) was computed
 * again by `peer` (another owner) to the same bytes.
 * QUARANTINE: `node` returned a result that a check proved wrong (or too
 * many malformed ones): none of its results count, in this job or any
 * other; written into the journal of every job holding results of it,
 * which its caller then restores from the journal again (see
 * sc_job_restore). */
typedef enum sc_record_type {
    SC_REC_ACCEPT = 1, SC_REC_CHUNK_FAILED, SC_REC_PHASE, SC_REC_JOB_END, SC_REC_VERIFY, SC_REC_QUARANTINE,
    SC_REC_RETRACTED /* an ACCEPT of a quarantined node, as the journal keeps it: restore counts it retracted */
} sc_record_type;

/* PHASE (a tournament phase ended) is informational: restore derives phases
 * from the accepted results, which decide them exactly. */
struct sc_record {
    sc_record_type type;
    uint64_t job;
    uint32_t variant;          /* ACCEPT, CHUNK_FAILED: the candidate (tournament) */
    uint32_t phase;            /* PHASE: the phase that ended; alive = survivors */
    uint32_t alive;
    uint64_t chunk;            /* ACCEPT */
    uint64_t first, count;     /* ACCEPT, CHUNK_FAILED */
    uint8_t token[16];         /* ACCEPT */
    const void *result;        /* ACCEPT */
    size_t result_len;
    sc_job_state state;        /* JOB_END */
    uint64_t node;             /* ACCEPT: who computed it; VERIFY: whose result; QUARANTINE: who */
    uint64_t peer;             /* VERIFY: the node that computed it again */
    uint64_t owner;            /* ACCEPT: the node's owner (sc_node_info.owner) */
    uint8_t tier;              /* ACCEPT: the node's tier */
    bool check;                /* ACCEPT: chosen for a check */
};

typedef struct sc_job_status {
    sc_job_state state;
    uint64_t items, done_items, failed_items, inflight_items, pending_items;
    uint32_t inflight_claims;
    uint64_t chunks_accepted, chunks_failed, reclaims;
    uint64_t records_skipped;   /* journal records its restore skipped: each overlaps one kept */
    const sim_stats *aggregate; /* merged results, valid until the next call: nout of
                                   them (single, tournament: the leader's), or
                                   variants x nout, variant-major (stat_weights) */
    uint32_t nout;
    uint32_t variants, alive;   /* tournament: candidates left */
    uint32_t phase;             /* tournament: phases ended */
    /* verification: items whose result a check confirmed, items from
     * trusted tiers, checks decided and waiting, and results retracted */
    uint64_t verified_items, trusted_items;
    uint64_t checks_passed, checks_failed, checks_waiting, checks_abandoned;
    uint64_t retracted_items;
    uint32_t quarantined;       /* quarantined nodes whose results it held (ids in quarantined_ids) */
    const uint64_t *quarantined_ids;
} sc_job_status;

typedef struct sc_variant_status {
    bool alive;
    uint32_t dropped_after;     /* tournament: phases run before it dropped out */
    uint32_t rank;              /* tournament: 1 = best by output-0 mean */
    uint64_t done_items;
    double mean, stderr_;       /* output 0 */
    double weight, weight_se;   /* stat_weights, variants >= 1 */
} sc_variant_status;

int sc_variant_status_get(sc_ledger *l, uint64_t job, uint32_t variant, sc_variant_status *out);

/* ---- the ledger ---- */

/* NULL config means defaults. Never returns NULL (allocation failure aborts). */
sc_ledger *sc_ledger_create(const sc_config *config);
void sc_ledger_destroy(sc_ledger *l);

int sc_job_add(sc_ledger *l, const sc_job_spec *spec);

/* Adds a job and replays its journal records (any order), so a restarted
 * coordinator resumes where it was: accepted ranges stay done, their
 * results are merged again, everything else is handed out anew. A record
 * that overlaps one kept before it (by first item, then in the order
 * given) is skipped (counted in records_skipped unless it is a copy) and
 * its items not covered otherwise are pending; a malformed record is
 * SC_EBADRECORD, and then no job is added. A job-end
 * record stops the job in its state, except `complete`: the job is complete
 * only if its records show it, and a range missing from them is handed out
 * anew. A restore journals nothing: the caller records the end of a job it
 * finds ended. */
int sc_job_restore(sc_ledger *l, const sc_job_spec *spec, const sc_record *recs, size_t n);

/* What one journal record counts for in its job (sc_records_kept). */
typedef enum sc_record_fate {
    SC_FATE_NONE = 0,  /* no range of items: VERIFY, QUARANTINE, PHASE, JOB_END */
    SC_FATE_KEPT,      /* an ACCEPT or CHUNK_FAILED that counts */
    SC_FATE_COPY,      /* a record written again: left out, silently */
    SC_FATE_SKIPPED,   /* overlaps a record kept before it: left out, counted (records_skipped) */
    SC_FATE_RETRACTED, /* RETRACTED, or an ACCEPT of a quarantined node: counts for nothing */
} sc_record_fate;

/* Which of a job's journal records count: the rule sc_job_restore keeps
 * them by, for every reader of a job's results from its journal, so that
 * they all count what a restarted coordinator counts. recs[0 .. n) are one
 * job's records in journal order. An ACCEPT of a quarantined node (one a
 * QUARANTINE record in recs names, or one quarantined(ctx, node) says is;
 * quarantined may be NULL) counts for nothing, like a RETRACTED record.
 * The other ACCEPT and CHUNK_FAILED records, sorted by variant, then first
 * item, then journal order, are kept unless one starts before the end of
 * the last one kept in its variant: then it is a copy (the same record as
 * the one before it or the last kept, written twice) or skipped. Writes
 * each record's sc_record_fate to fate[0 .. n), and the kept records, in
 * that sorted order, to kept (room for n; its other entries are scratch);
 * returns how many are kept. Records are not checked against their job
 * (sc_job_restore does that): a range that wraps past 2^64 is kept or left
 * out as its numbers say, no more. */
size_t sc_records_kept(const sc_record *recs, size_t n, bool (*quarantined)(void *ctx, uint64_t node), void *ctx,
    uint8_t *fate, const sc_record **kept);

/* Stops a job: its live claims become stale. */
int sc_job_cancel(sc_ledger *l, uint64_t job, uint64_t now_ms);

/* Drops a finished job and everything kept for it. */
int sc_job_forget(sc_ledger *l, uint64_t job);

int sc_job_status_get(sc_ledger *l, uint64_t job, sc_job_status *out);

/* The items of job not done yet, in nodes' hands or waiting: a
 * tournament's, each candidate still in to the job's end, as if none
 * dropped out any more. 0 for a job the ledger does not hold. */
uint64_t sc_job_items_left(sc_ledger *l, uint64_t job);

/* Hands node up to `slots` chunks; writes them to out and their number to
 * *n. Higher priority first; among equal priority the owners take turns,
 * and each owner's jobs take turns. */
int sc_claim(sc_ledger *l, const sc_node_info *node, unsigned slots, uint64_t now_ms,
    sc_claim_out *out, unsigned *n);

/* Answers the result of chunk `chunk` of `job`, sent by node with token.
 * `result` is untrusted bytes (sc_result_encode's format); a result that
 * does not decode or does not cover the chunk gets SC_EBADRESULT and changes
 * nothing, and *why (when why is not NULL) says which check it failed and
 * where: the data is empty or ends early, a statistic's length runs past
 * the end or it does not decode, bytes are left over, a variant counts
 * another number of values than the chunk's items make, or a statistic has
 * another layout than its output's. *job_complete is set when this
 * completion finished the job. */
int sc_complete(sc_ledger *l, uint64_t job, uint64_t chunk, const uint8_t token[16], uint64_t node,
    const void *result, size_t len, uint64_t now_ms, sc_outcome *outcome, bool *job_complete, sf_error *why);

/* Extends the leases of the listed live claims held by node (a heartbeat);
 * returns how many were renewed. */
size_t sc_renew(sc_ledger *l, uint64_t node, const uint8_t (*tokens)[16], size_t n, uint64_t now_ms);

/* Returns expired claims to their jobs (their exact ranges), failing chunks
 * past max_attempts and jobs past their deadline. Cost is proportional to
 * what expired, not to what is in flight. Returns the claims expired. */
size_t sc_reclaim(sc_ledger *l, uint64_t now_ms);

/* The node no longer holds these claims of its own (it stopped listing
 * them in its heartbeats: the chunk failed there, or its job's context
 * could not be had): they go back at once, each an attempt, as if its
 * lease had run out. Tokens of other nodes, or of no live claim, are
 * skipped. Returns the claims given back. */
size_t sc_give_back(sc_ledger *l, uint64_t node, const uint8_t (*tokens)[16], size_t n, uint64_t now_ms);

/* A node's connection ended: the claims node took through session go back
 * at once (each counts as an attempt), all of node's when session is 0.
 * The node may already hold claims through a newer session; those stay. */
size_t sc_release_node(sc_ledger *l, uint64_t node, uint64_t session, uint64_t now_ms);

/* ---- credibility and quarantine (docs/verification.md) ---- */

typedef struct sc_node_trust {
    uint64_t owner;
    uint8_t tier;
    uint32_t streak;            /* checks passed in a row */
    uint64_t passed, failed;    /* checks of its results, and its checks of others', decided */
    uint64_t malformed;         /* results that did not decode or fit their chunk */
    bool quarantined;
} sc_node_trust;

/* What the ledger holds of a node it has handed work to; SC_ENONODE when none. */
int sc_node_trust_get(sc_ledger *l, uint64_t node, sc_node_trust *out);

/* Quarantines node: it gets no more work, nothing it sends counts, its
 * claims are taken back, and every job holding results of it stops handing
 * out work and gets a QUARANTINE record (when `journal`): its caller then
 * restores it from its journal (sc_job_forget, sc_job_restore), which
 * leaves the node's results out. Without `journal` (a quarantine known
 * from before a restart) nothing is written. Its owner's other nodes lose
 * their streak. */
int sc_node_quarantine(sc_ledger *l, uint64_t node, uint64_t now_ms, bool journal);

/* Counts a malformed result of node found outside the ledger (a range or
 * work context other than its claim's); sc_complete counts its own
 * SC_EBADRESULT. At sc_verify_config.malformed_limit the node is
 * quarantined. */
void sc_node_malformed(sc_ledger *l, uint64_t node, uint64_t now_ms);

/* Whether a job waits to be restored from its journal (a node whose
 * results it holds was quarantined); such a job hands out nothing. */
bool sc_job_tainted(sc_ledger *l, uint64_t job);

/* The ids of the jobs waiting to be restored, up to cap of them into ids;
 * returns how many there are. Costs nothing while there are none, so it
 * may follow every completion. */
size_t sc_tainted_jobs(const sc_ledger *l, uint64_t *ids, size_t cap);

/* ---- results ---- */

/* Encodes n statistics as one chunk result: for each, a 4-byte
 * little-endian length and the sim_stats encoding. A result holds nout
 * statistics, or variants x nout (variant-major) for stat_weights. */
int sc_result_encode(const sim_stats *out, uint32_t nout, void *buf, size_t cap, size_t *len);

/* The result digest (docs/kernels.md, "Result digest"): "sha256:" and the
 * lowercase hex SHA-256 of sc_result_encode's bytes of the n statistics,
 * into hex (SC_DIGEST_LEN + 1 bytes with the terminator). Two results have
 * the same digest exactly when their bytes are the same. 0, or
 * sc_result_encode's error. */
#define SC_DIGEST_LEN (7 + 64)
int sc_result_digest(const sim_stats *out, uint32_t nout, char hex[SC_DIGEST_LEN + 1]);

/* ---- checks ---- */

/* Calls fn for every range the job still holds (pending or in flight), for
 * tests that verify exactly-once coverage. */
void sc_job_ranges(sc_ledger *l, uint64_t job,
    void (*fn)(void *ctx, uint32_t variant, uint64_t first, uint64_t count, bool inflight), void *ctx);

typedef struct sc_ledger_stats {
    uint64_t live_claims;
    uint64_t claim_bytes;   /* memory held for claims in flight: slab, token table, node table */
    uint64_t accepted_bytes; /* memory held for accepted chunks' resends, all jobs (bounded by accepted_window) */
    uint64_t swept;         /* claims looked at by sweeps, expired or not */
    uint64_t expired;       /* claims expired by sweeps */
    uint64_t released;      /* claims taken back because their node went away */
    uint64_t given_back;    /* claims their node said it no longer held (sc_give_back) */
    uint64_t checks_passed, checks_failed; /* checks decided: agreed, or proved a result wrong */
    uint64_t checks_abandoned; /* checks no node could take in check_wait_ms */
    uint64_t quarantined;   /* nodes quarantined */
} sc_ledger_stats;

void sc_ledger_stats_get(const sc_ledger *l, sc_ledger_stats *out);

#endif
