/*
 * fuzz_proto_replay.c — libFuzzer harness for the replay guard: the input is a
 * script of arrivals and clock steps (tests/fuzz/proto_oracle.h,
 * oracle_replay), checked against a reference list of every accepted pair.
 */
#include <stdio.h>

#include "tests/fuzz/proto_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = oracle_replay(data, size);
    if (why != NULL) {
        fprintf(stderr, "fuzz_proto_replay: %s\n", why);
        abort();
    }
    return 0;
}
