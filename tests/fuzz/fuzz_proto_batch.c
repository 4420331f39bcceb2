/*
 * fuzz_proto_batch.c — libFuzzer harness for pr_decode_batch(), the decoder
 * of a completion's signed payload (the coordinator decodes it before it
 * knows whether the signature holds). Properties: tests/fuzz/proto_oracle.h.
 */
#include <stdio.h>

#include "tests/fuzz/proto_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = oracle_batch(data, size);
    if (why != NULL) {
        fprintf(stderr, "fuzz_proto_batch: %s\n", why);
        abort();
    }
    return 0;
}
