/*
 * xorshift.h — test inputs from xorshift64 (shifts 13, 7, 17): the same
 * sequence in native and emcc builds. Each program keeps its own state.
 */
#ifndef SIMFARM_TESTS_XORSHIFT_H
#define SIMFARM_TESTS_XORSHIFT_H

#include <stdint.h>

static inline uint64_t xorshift64(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform in [-scale, scale), from the top 53 bits. */
static inline double xorshift_uniform(uint64_t *s, double scale)
{
    return ((double)(xorshift64(s) >> 11) * 0x1p-52 - 1.0) * scale;
}

#endif
