/*
 * fuzz_json.c — the API's JSON reader (sf_json_to_msgpack, which reads
 * every request body) and the kernels' parameter checks behind it, over
 * arbitrary bytes: it never crashes, what it accepts is one whole msgpack
 * value, and a kernel given that value as its parameters accepts it or
 * refuses it with a message.
 */
#include "sim/sim.h"
#include "base/json.h"

#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    msgpack_sbuffer out;
    msgpack_sbuffer_init(&out);
    char err[256];
    if (sf_json_to_msgpack((const char *)data, size, &out, err, sizeof err) == 0) {
        msgpack_unpacked up;
        size_t off = 0;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, out.data, out.size, &off) != MSGPACK_UNPACK_SUCCESS || off != out.size)
            abort();
        msgpack_unpacked_destroy(&up);
        static const char *const kernels[] = { "option", "combat" };
        for (int k = 0; k < 2; k++) {
            sim_job *job = NULL;
            err[0] = '\0';
            int rc = sim_job_create(&job, kernels[k], out.data, out.size, 1, err, sizeof err);
            if (rc == 0)
                sim_job_destroy(job);
            else if (err[0] == '\0')
                abort(); /* a refusal always says why */
        }
    }
    msgpack_sbuffer_destroy(&out);
    return 0;
}
