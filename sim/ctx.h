/*
 * ctx.h — a job's work context: what a node needs to compute any of the
 * job's chunks, a msgpack map {"kernel": str, "seed": u64, "params": <the
 * kernel's parameters>}. Its SHA-256 is the job's ctx_hash; the coordinator
 * stores it with the job and serves it to nodes (`ctx`).
 */
#ifndef SIMFARM_SIM_CTX_H
#define SIMFARM_SIM_CTX_H

#include "sim/sim.h"

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* Appends the work context to `out`; `params` is already msgpack. */
void sim_ctx_encode(msgpack_sbuffer *out, const char *kernel, uint64_t seed, const void *params, size_t len);

/* Reads a work context (untrusted bytes): kernel gets the name (klen
 * bytes), *seed the seed, and `params` (initialised by the caller) the
 * parameters' msgpack. Returns 0, or -1 when it is not a well-formed work
 * context. */
int sim_ctx_decode(const void *ctx, size_t len, char *kernel, size_t klen, uint64_t *seed, msgpack_sbuffer *params);

/* The job a work context describes: 0, or a SIM_E* code with a message a
 * user can act on in err. */
int sim_ctx_job(sim_job **out, const void *ctx, size_t len, char *err, size_t errlen);

#endif
