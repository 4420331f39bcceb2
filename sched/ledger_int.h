/*
 * ledger_int.h — what ledger.c and verify.c share, and nothing else
 * includes: the ledger's state and the calls between its two parts.
 *
 *   ledger.c   jobs, claims, leases, completions, the journal and restore
 *   verify.c   spot-checks, the screen, credibility, quarantine
 */
#ifndef SIMFARM_SCHED_LEDGER_INT_H
#define SIMFARM_SCHED_LEDGER_INT_H

#include "sched/sched.h"

#include "base/map.h"

#define NONE UINT32_MAX

enum {
    TICK_SHIFT = 6,            /* 64 ms wheel ticks */
    WHEEL_SIZE = 1 << 12,      /* 4096 buckets: one turn is ~262 s */
    MAX_NOUT = 64,
    MAX_RES = 256,             /* statistics in one result (variants x outputs) */
    MAX_LANES = 4096,          /* tournament candidates */
};

/* Chunk ids in a journal above this are corrupt (2^36 chunks of one item
 * each would outlast any job). */
#define MAX_CHUNK_ID (1ull << 36)
#define SW_BATCHES 32              /* stat_weights: chunks per job at least */

/* Nodes that lost a range (their lease ran out, they gave it back or went
 * away) are not handed it again, and count one attempt each. */
enum { MAX_LOSERS = 4 };

typedef struct claim {
    uint8_t token[16];
    struct job *job;
    uint64_t node;
    uint64_t owner, addr;      /* the node's (sc_node_info) */
    uint64_t check;            /* a check's id in its job: this claim computes it again; 0 = none */
    uint64_t hold_until;       /* renewals end here (sc_config.max_hold_ms) */
    uint64_t session;          /* the node's connection it was handed out through */
    uint64_t chunk;
    uint64_t first, count;
    uint64_t lease_until;
    uint32_t lease_ms;         /* the lease length a renewal grants again */
    uint32_t attempt;
    uint32_t nlosers;          /* its range's (range.losers) */
    uint64_t losers[MAX_LOSERS];
    uint32_t wprev, wnext;     /* wheel bucket list; wnext is the free list when unused */
    uint32_t nprev, nnext;     /* the node's claims */
    uint16_t lane;
    uint16_t bucket;           /* the wheel bucket it is in */
    uint8_t tier;
    bool proven;               /* its node had a measured speed: it has completed work */
} claim;                       /* live when job != NULL */

typedef struct range {
    uint64_t first, count;
    uint32_t attempt;
    uint32_t nlosers;          /* losers[0 .. min(nlosers, MAX_LOSERS)), the newest last */
    uint64_t losers[MAX_LOSERS];
} range;

/* An accepted chunk, at index chunk id modulo the array's size in its job's
 * window of recent acceptances. */
typedef struct done_entry {
    uint64_t chunk;
    uint8_t token[16];
    uint64_t hash;             /* of the accepted result bytes, low bit set; 0 = none */
} done_entry;

typedef struct lane {
    range *pend;
    size_t pend_head, pend_len, pend_cap;
    uint64_t pending_items, inflight_items, done_items, failed_items;
    uint64_t budget;           /* items opened to this lane so far */
    sim_stats *agg;            /* nres statistics */
    uint32_t dropped_after;    /* 0 = alive; else phases run before it dropped */
    /* Journal records of items not opened yet, by first item: a tournament
     * restored with a gap in an earlier phase holds its later phases'
     * records until their phase opens (open_to). Owned (each record with
     * its result bytes in one block) once sc_job_restore returns. */
    const sc_record **ahead;
    size_t nahead, ahead_at;
    bool ahead_owned;
} lane;

/* One computation of a checked range: the accepted result is runs[0]. */
typedef struct run {
    uint64_t node, owner, addr;
    uint8_t *bytes;            /* owned */
    size_t len;
} run;

enum { MAX_RUNS = 6, MAX_CHECK_LOST = 4 };

/* An accepted range chosen to be computed again on a node of another owner
 * and address (verify.c). It is decided when a run of another owner
 * returns the same bytes as an earlier run: who returned other bytes is
 * quarantined. */
typedef struct check {
    uint64_t id;               /* in its job, from 1 */
    uint32_t lane;
    uint64_t chunk, first, count;
    run runs[MAX_RUNS];
    uint32_t nruns;
    bool inflight;             /* a claim computes it now */
    uint64_t since_ms;         /* waiting since (0: since the next sweep) */
    bool urgent;               /* the screen found the result odd: first in line */
    uint64_t lost[MAX_CHECK_LOST]; /* nodes that lost a claim of it: not asked again */
    uint32_t nlost;
} check;

/* What one node contributed to a job, by node id: items accepted. */
SF_MAP_DECLARE(sc__contrib_map, uint64_t)

/* The ledger's record of every node it handed work to. */
SF_MAP_DECLARE(sc__trust_map, sc_node_trust)

enum { MAX_JOB_QUARANTINED = 16 };

struct pair {
    uint64_t chunk, count;
    size_t at;                 /* its differences: pair_d[at (variants - 1) ...] */
};

typedef struct job {
    sc_job_spec spec;
    sim_layout *layouts;
    double *steps;
    sc_job_state state;
    lane *lanes;
    uint32_t nlanes, alive, phase, lane_cursor;
    uint32_t nres;             /* statistics per result */
    uint64_t pending_items, inflight_items, done_items, failed_items; /* all lanes */
    uint32_t inflight_claims;
    uint64_t next_chunk, chunks_accepted, chunks_failed, reclaims;
    uint64_t records_skipped;  /* journal records its restore skipped: they overlap others */
    /* stat_weights: per accepted chunk, in the order accepted, its id, its
     * items and its variants-1 mean differences from the baseline */
    struct pair *pairs;
    double *pair_d;
    size_t npairs, pairs_cap;
    size_t pairs_sorted;       /* pairs[0 .. pairs_sorted) are in chunk-id order */
    done_entry *done;          /* the newest accepted chunks, indexed by chunk id % done_cap */
    size_t done_cap;           /* grows by doubling up to accepted_window, then stays */
    /* verification (verify.c) */
    check *checks;             /* undecided, in the order chosen */
    size_t nchecks, checks_cap;
    uint64_t next_check;
    uint32_t check_claims;     /* live claims computing a check */
    uint64_t verified_items, trusted_items, retracted_items;
    uint64_t checks_passed, checks_failed, checks_abandoned;
    sc__contrib_map contrib;
    bool tainted;              /* a node whose results it holds is quarantined: restore it */
    uint64_t quarantined[MAX_JOB_QUARANTINED];
    uint32_t nquarantined;
    /* A restore's VERIFY records, (variant, first) pairs sorted, for the
     * accepts applied as their phases open. */
    uint64_t (*verified_keys)[2];
    size_t nverified_keys;
} job;

/* Who gets the next chunk: priority levels, highest first; within a level
 * the owners take turns, and within an owner its jobs take turns. Rebuilt
 * when a job starts or ends; a pick is O(1) when most jobs are eligible. */
typedef struct rr_owner {
    uint64_t owner;
    job **jobs;
    size_t njobs, cap, cursor;
} rr_owner;

typedef struct rr_level {
    int32_t priority;
    rr_owner *owners;
    size_t nowners, cap, cursor;
} rr_level;

typedef struct node_slot {
    uint64_t node;
    uint32_t head;             /* NONE = empty slot */
} node_slot;

struct sc_ledger {
    sc_config cfg;
    uint64_t rng;
    job **jobs;
    size_t njobs, jobs_cap;
    rr_level *levels;
    size_t nlevels, levels_cap;
    bool rr_dirty;
    claim *claims;
    uint32_t claims_cap, free_head, live;
    uint32_t *tok;             /* token table: claim indices */
    size_t tok_cap;
    node_slot *nodes;
    size_t nodes_cap, nodes_len;
    uint32_t wheel[WHEEL_SIZE];
    uint64_t wheel_tick;       /* ticks before this one are swept */
    bool wheel_started;
    uint32_t *scratch;         /* expired claims of one sweep */
    size_t scratch_cap;
    uint64_t swept, expired, released, given_back; /* counters for sc_ledger_stats_get */
    bool restoring;            /* replaying a journal: emit nothing */
    sc__trust_map trust;
    uint64_t checks_passed, checks_failed, checks_abandoned, quarantined; /* for sc_ledger_stats_get */
    size_t ntainted;           /* jobs with `tainted` set */
};


/* ---- ledger.c, for verify.c ---- */

job *sc__job_find(sc_ledger *l, uint64_t id);
void sc__journal(sc_ledger *l, const sc_record *r);
uint32_t sc__claim_alloc(sc_ledger *l);
void sc__claim_drop(sc_ledger *l, uint32_t idx);
void sc__claim_link(sc_ledger *l, uint32_t idx);
void sc__pend_push_front(job *j, lane *ln, range r);
int sc__result_check(const job *j, const void *buf, size_t len, uint64_t count, sim_stats *res, sf_error *why);
uint64_t sc__random(sc_ledger *l);

/* ---- verify.c, for ledger.c ---- */

sc_node_trust *sc__trust(sc_ledger *l, const sc_node_info *n);
/* After an ordinary claim's result was accepted: counts it trusted, or
 * draws whether it is checked (and makes the check). Returns whether it
 * is checked. */
bool sc__verify_accepted(sc_ledger *l, job *j, const claim *c, const sim_stats *res, const void *bytes, size_t len);
/* The waiting check node may compute in j, or NULL. */
check *sc__check_for(job *j, const sc_node_info *n);
/* A check claim's answer (checked to decode and fit); returns the outcome. */
sc_outcome sc__check_answer(sc_ledger *l, job *j, const claim *c, const void *bytes, size_t len);
/* A check claim lost (expired, given back, its node gone). */
void sc__check_lost(job *j, const claim *c);
/* Forgets the checks of a job. */
void sc__checks_free(job *j);
/* Gives up j's checks that waited check_wait_ms with no taker; returns how many. */
size_t sc__checks_expire(sc_ledger *l, job *j, uint64_t now_ms);
/* Restore: makes the check of an accept record chosen for one and not verified. */
void sc__check_restore(job *j, const sc_record *r);
bool sc__restore_verified(const job *j, uint32_t variant, uint64_t first);
void sc__count_malformed(sc_ledger *l, job *j, uint64_t node, uint64_t now_ms);
void sc__job_note_quarantined(job *j, uint64_t node);
int sc__cmp_key(const void *a, const void *b);

#endif
