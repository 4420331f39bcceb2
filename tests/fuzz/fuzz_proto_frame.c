/*
 * fuzz_proto_frame.c — libFuzzer harness for pr_decode(), the entry point of
 * every frame that comes off a socket (and, through `complete`, of the batch
 * decoder too). Properties: tests/fuzz/proto_oracle.h.
 */
#include <stdio.h>

#include "tests/fuzz/proto_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = oracle_frame(data, size);
    if (why != NULL) {
        fprintf(stderr, "fuzz_proto_frame: %s\n", why);
        abort();
    }
    return 0;
}
