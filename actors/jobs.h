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

/* A job's work context: what a node needs to compute any of its chunks, a
 * msgpack map {"kernel": str, "seed": u64, "params": <the kernel's
 * parameters>}. Its SHA-256 is the job's ctx_hash. Stored in jobs.params
 * and served to nodes by `ctx`. */
void cd_ctx_encode(msgpack_sbuffer *out, const char *kernel, uint64_t seed, const void *params, size_t len);

/* Reads a work context (untrusted bytes): kernel gets the name (klen
 * bytes), *seed the seed, and `params` (initialised by the caller) the
 * parameters' msgpack. Returns 0, or -1 when it is not a well-formed work
 * context. */
int cd_ctx_decode(const void *ctx, size_t len, char *kernel, size_t klen, uint64_t *seed, msgpack_sbuffer *params);

#endif
