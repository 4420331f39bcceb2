/*
 * jobs.h — job submissions: the JSON a user sends (POST /api/jobs, the demo
 * job of `simfarm up`) checked and turned into the store's INSERT.
 */
#ifndef SIMFARM_ACTORS_JOBS_H
#define SIMFARM_ACTORS_JOBS_H

#include "actors/coord/store.h"
#include "base/err.h"
#include "sched/sched.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tiers of a job whose submission names none, unless the operator says
 * otherwise (`simfarm serve --default-tiers`): public nodes excluded. */
enum { CD_TIERS_DEFAULT = SC_TIER_OWN | SC_TIER_TEAM | SC_TIER_COMMUNITY };

/* The name of tier bit `bit` (SC_TIER_OWN ... SC_TIER_PUBLIC): "own",
 * "team", "community", "public"; NULL for anything else. */
const char *cd_tier_name(uint8_t bit);

/* Reads a comma-separated list of tier names ("own,team,community") into
 * SC_TIER_* bits. Returns 0, or CD_EINVAL with why in *e: the list is
 * empty, or a name is unknown or given twice. */
int cd_tiers_parse(const char *list, uint8_t *out, sf_error *e);

/* Sets the tiers a submission without "tiers" gets (SC_TIER_* bits; 0 sets
 * CD_TIERS_DEFAULT), for the whole process: called once by the coordinator
 * before its actors are spawned. */
void cd_job_default_tiers_set(uint8_t tiers);

/* The tiers a submission without "tiers" gets now. */
uint8_t cd_job_default_tiers(void);

/* Checks a submission (json, len bytes; need not be NUL-terminated) and
 * returns the query that inserts it and returns its id (as
 * cd_job_submission_by with a drawn key). On bad input
 * returns NULL with the offending field (empty if it is the whole body) and
 * a message a user can act on. The kernel checks its own parameters; a
 * submission without "tiers" gets cd_job_default_tiers(). */
cd_query *cd_job_submission(const char *json, size_t len, char *field, size_t flen, char *msg, size_t mlen);

/* The same for an API caller: the job's owner is `caller`, and an "owner"
 * field naming someone else is refused unless `admin`. `key` is the
 * submission's key (the Idempotency-Key header, checked with
 * cd_submission_key_ok), or NULL to draw one ("~" and 32 hex digits): the
 * query stores the job once per owner and key, however often it runs, and
 * returns one row, `id, stored_now, same_body`: stored_now true when this
 * run inserted it; otherwise the job stored earlier under the key, and
 * same_body whether its body was this one. No row: a submission under the key is
 * being stored at this moment. */
cd_query *cd_job_submission_by(const char *json, size_t len, const char *caller, bool admin, const char *key,
    char *field, size_t flen, char *msg, size_t mlen);

/* A submission's kernel, items and "confirm_large" (false when absent),
 * for the size check of a submission cd_job_submission_by took (docs/api.md,
 * "Large jobs"). False when json does not hold them. */
bool cd_job_submission_size(const char *json, size_t len, char *kernel, size_t kcap, uint64_t *items, bool *confirm);

/* A size whose time at the farm's speed is over this many seconds needs
 * "confirm_large": true. */
enum { CD_JOB_LARGE_S = 86400 };

enum { CD_SUBMISSION_KEY_MAX = 128, CD_SUBMISSION_KEY_DRAWN = 33 };

/* Whether key is a submission key: 1 to 128 visible ASCII characters. */
bool cd_submission_key_ok(const char *key);

/* A random key: 32 hex digits (128 bits) and a NUL. */
void cd_submission_key_draw(char out[CD_SUBMISSION_KEY_DRAWN]);

#endif
