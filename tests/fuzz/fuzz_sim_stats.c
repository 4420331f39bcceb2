/*
 * fuzz_sim_stats.c — sim_stats_decode over arbitrary bytes (chunk results
 * come from untrusted nodes): it never crashes, and whatever it accepts
 * encodes and decodes back to equal statistics.
 */
#include "sim/sim.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sim_stats s, back;
    uint8_t buf[SIM_STATS_MAX_ENCODED];
    size_t len = 0;
    if (sim_stats_decode(&s, data, size) != 0)
        return 0;
    if (sim_stats_encode(&s, buf, sizeof buf, &len) != 0 || sim_stats_decode(&back, buf, len) != 0 ||
        !sim_stats_equal(&s, &back))
        abort();
    return 0;
}
