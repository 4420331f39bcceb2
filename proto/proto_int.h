/*
 * proto_int.h — shared only inside proto/.
 */
#ifndef SIMFARM_PROTO_INT_H
#define SIMFARM_PROTO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Walks one msgpack value in p[0..n) against the limits of msg.h without
 * allocating: truncation, reserved bytes, ext types, depth, entry counts,
 * string and byte-string lengths, the total number of values, and trailing
 * bytes. Returns 0 when msgpack-c may unpack the bytes (every count it will
 * allocate for is then bounded by n), or the first fault's pr_errno. */
int pr__scan(const uint8_t *p, size_t n);

/* True when s[0..n) is valid UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF) and holds no NUL. */
bool pr__utf8_ok(const char *s, size_t n);

#endif
