/*
 * jobs.h — job submissions: the JSON a user sends (POST /api/jobs, the demo
 * job of `simfarm up`) checked and turned into the store's INSERT.
 */
#ifndef SIMFARM_ACTORS_JOBS_H
#define SIMFARM_ACTORS_JOBS_H

#include "actors/store.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

/* Checks a submission (json, len bytes; need not be NUL-terminated) and
 * returns the query that inserts it and returns its id. On bad input
 * returns NULL with the offending field (empty if it is the whole body) and
 * a message a user can act on. The kernel checks its own parameters. */
cd_query *cd_job_submission(const char *json, size_t len, char *field, size_t flen, char *msg, size_t mlen);

/* The same for an API caller: the job's owner is `caller`, and an "owner"
 * field naming someone else is refused unless `admin`. The query returns
 * id, owner, kernel, strategy, items, priority. */
cd_query *cd_job_submission_by(const char *json, size_t len, const char *caller, bool admin, char *field,
    size_t flen, char *msg, size_t mlen);

#endif
