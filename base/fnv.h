/*
 * fnv.h — FNV-1a, the project's one non-cryptographic hash (Fowler, Noll
 * and Vo's published offset bases and primes): the result fingerprint
 * (32 bits, docs/kernels.md), idempotency checks of result bytes and the
 * owners' turn order (64 bits).
 */
#ifndef SIMFARM_BASE_FNV_H
#define SIMFARM_BASE_FNV_H

#include <stddef.h>
#include <stdint.h>

#define SF_FNV32_BASIS 2166136261u
#define SF_FNV64_BASIS 14695981039346656037ull

/* Continues a 32-bit FNV-1a hash h (start from SF_FNV32_BASIS) over n bytes. */
static inline uint32_t sf_fnv32(uint32_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}

/* Continues a 64-bit FNV-1a hash h (start from SF_FNV64_BASIS) over n bytes. */
static inline uint64_t sf_fnv64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

#endif /* SIMFARM_BASE_FNV_H */
