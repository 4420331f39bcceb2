/*
 * farmsim.h — a farm of simulated nodes, honest and not, driven against the
 * real claim ledger (sched/) with its journal kept as a store would keep
 * it: for the verification tests and the verification benchmarks.
 *
 * The kernel is synthetic and exact: item i of variant v has the value
 * base(i) + v/2, base(i) spread over [0, 100). An honest node sends the
 * statistics of its range's values; a saboteur changes them as its kind
 * says. A job that a quarantine taints is restored from the journal, as the
 * coordinator does.
 */
#ifndef SIMFARM_TESTS_FARMSIM_H
#define SIMFARM_TESTS_FARMSIM_H

#include "sched/sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum fs_kind {
    FS_HONEST,
    FS_BIAS,        /* adds delta to every value */
    FS_BIAS_SOME,   /* adds delta to every value of one chunk in `every` */
    FS_ZEROS,       /* every value 0 */
    FS_FABRICATE,   /* every value 15, without computing anything */
    FS_TURNCOAT,    /* honest for its first `after` chunks, then adds delta */
} fs_kind;

typedef struct fs_node {
    uint64_t id, owner, addr;
    uint8_t tier;
    fs_kind kind;
    double delta;
    unsigned every, after;
    double items_per_s;
    /* counted by the farm */
    uint64_t chunks;        /* results sent */
    uint64_t bad_sent;      /* results with other bytes than an honest node's */
    uint64_t bad_accepted;  /* ... taken as new work (not as a check), before its quarantine */
    bool quarantined;
} fs_node;

typedef struct fs_job {
    sc_job_spec spec;
    double steps[8];
} fs_job;

typedef struct fs_farm {
    sc_ledger *l;
    sc_record *recs;        /* the journal; results owned */
    size_t nrecs, recs_cap;
    fs_node *nodes;
    size_t nnodes;
    fs_job *jobs;
    size_t njobs;
    uint64_t now;
    uint64_t rng;
    uint64_t work_items;    /* items computed for new work */
    uint64_t check_items;   /* items computed again for checks */
    uint64_t restores;      /* jobs restored after a quarantine */
} fs_farm;

/* A farm on a ledger with verification per v (v->on set by the caller). */
void fs_init(fs_farm *f, const sc_verify_config *v, uint64_t seed);
void fs_free(fs_farm *f);

fs_node *fs_add(fs_farm *f, fs_node n);

/* Job specs on the farm's kernel (layout and all). */
sc_job_spec fs_single(uint64_t id, uint64_t items);
sc_job_spec fs_stat_weights(uint64_t id, uint64_t items, uint32_t variants);
sc_job_spec fs_tournament(uint64_t id, uint64_t items, uint32_t variants);

/* Adds a job and runs the farm until it ends or max_rounds rounds (every
 * node claims once a round) passed; returns its state. */
sc_job_state fs_run(fs_farm *f, const sc_job_spec *spec, unsigned max_rounds);

/* Whether the job's result is the same bits as an honest sequential run
 * over the items it reports done (every variant; a tournament's leader). */
bool fs_exact(fs_farm *f, uint64_t job);

/* How far the job's output-0 mean is from an honest run's over the same
 * items, in the job's standard errors (single jobs). */
double fs_moved_by(fs_farm *f, uint64_t job);

#endif
