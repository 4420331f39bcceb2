/*
 * metrics.h — what /metrics reports beyond the actors' own counters: the
 * latency histograms the node sessions observe (Prometheus histograms,
 * cumulative _bucket lines with le labels, _sum and _count), the process
 * (process_cpu_seconds_total, process_resident_memory_bytes,
 * process_open_fds, process_max_fds, process_start_time_seconds, as
 * Prometheus' client libraries name them) and simfarm_build_info.
 *
 * The histograms are the process's (one coordinator a process); observing
 * takes relaxed atomic adds, so any thread may observe, and a scrape reads
 * each bucket once and sums them itself, so its buckets never decrease and
 * its _count is its +Inf bucket.
 */
#ifndef SIMFARM_ACTORS_COORD_METRICS_H
#define SIMFARM_ACTORS_COORD_METRICS_H

#include "base/str.h"

#include <stdint.h>

typedef enum cd_latency {
    CD_LAT_DISPATCH,   /* a session's claim sent to the scheduler to its chunks' assign sent, less any
                          time the claim waited for work to appear */
    CD_LAT_COMPLETION, /* a result's frame received to its outcome known (an accepted one's journal row
                          committed), which its complete_ack then carries */
    CD_LATENCIES
} cd_latency;

/* The monotonic clock in microseconds, the one latencies are measured on.
 * Any thread. */
uint64_t cd_metrics_now_us(void);

/* Counts one observation of us microseconds. Any thread. */
void cd_metrics_observe(cd_latency which, uint64_t us);

/* Appends the histograms, the process metrics and simfarm_build_info in
 * Prometheus' text format (0.0.4) to b. */
void cd_metrics_text(sf_str *b);

#endif
