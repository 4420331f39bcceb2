/*
 * ctx.h — a job's work context: what a node needs to compute any of the
 * job's chunks, a msgpack map
 *
 *   {"kernel": str, "seed": u64, "params": <the kernel's parameters>}
 *
 * and, for jobs that run several parameter sets over the same items
 * (tournament candidates, stat_weights' baseline and perturbed runs),
 *
 *   "variants": [<parameters>, ...]   (variant 0 is "params")
 *   "every": bool                     (true: a chunk's result is every
 *                                      variant's, in order; false: the
 *                                      variant the assignment names)
 *
 * Its SHA-256 is the job's ctx_hash; the coordinator stores it with the job
 * and serves it to nodes (`ctx`).
 */
#ifndef SIMFARM_SIM_CTX_H
#define SIMFARM_SIM_CTX_H

#include "sim/sim.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { SIM_MAX_VARIANTS = 64 };

/* Appends a one-variant work context to `out`; `params` is already msgpack. */
void sim_ctx_encode(msgpack_sbuffer *out, const char *kernel, uint64_t seed, const void *params, size_t len);

/* Appends a work context of n (1 .. SIM_MAX_VARIANTS) variants; `variants`
 * holds their parameter maps, packed one after the other. */
void sim_ctx_encode_variants(msgpack_sbuffer *out, const char *kernel, uint64_t seed, const void *variants,
    size_t len, uint32_t n, bool every);

/* Reads a work context (untrusted bytes): kernel gets the name (klen
 * bytes), *seed the seed, and `params` (initialised by the caller)
 * variant 0's parameters. Returns 0, or -1 when it is not a well-formed
 * work context. */
int sim_ctx_decode(const void *ctx, size_t len, char *kernel, size_t klen, uint64_t *seed, msgpack_sbuffer *params);

/* The jobs a work context describes, one per variant. */
typedef struct sim_work {
    sim_job **jobs;
    uint32_t n;
    bool every;
} sim_work;

/* Opens a work context: 0, or a SIM_E* code with a message a user can act
 * on in err (a bad variant is named by its number). Every variant must have
 * variant 0's outputs, and uses variant 0's statistics layouts, so the
 * variants' results merge and compare; a value past that range is clamped
 * and counted as saturated. */
int sim_work_open(sim_work *w, const void *ctx, size_t len, char *err, size_t errlen);
void sim_work_close(sim_work *w);

#endif
