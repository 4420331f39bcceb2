/*
 * metrics.c — see metrics.h. The process metrics come from /proc/self
 * (Linux), as Prometheus' client libraries read them.
 */
#include "actors/coord/metrics.h"

#include "base/version.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Upper bounds in microseconds: 0.5 ms to 10 s, about 2.5 apart. */
static const uint64_t bounds_us[] = { 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000,
    2500000, 5000000, 10000000 };
enum { NBOUNDS = sizeof bounds_us / sizeof bounds_us[0] };

/* Each on its own: counts per bucket (the last is +Inf, not cumulative) and
 * the sum. Relaxed is enough: a scrape prints each value alone and derives
 * the cumulative ones from the counts it read. */
static struct {
    _Atomic uint64_t n[NBOUNDS + 1];
    _Atomic uint64_t sum_us;
} hists[CD_LATENCIES];

static const struct {
    const char *name, *help;
} hist_names[CD_LATENCIES] = {
    { "simfarm_dispatch_latency_seconds",
        "From a node session's claim to its chunks' assign, less any time the claim waited for work." },
    { "simfarm_completion_latency_seconds",
        "From a chunk result received to its outcome known (an accepted result's journal row committed)." },
};

uint64_t cd_metrics_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void cd_metrics_observe(cd_latency which, uint64_t us)
{
    if (which >= CD_LATENCIES)
        return;
    unsigned i = 0;
    while (i < NBOUNDS && us > bounds_us[i])
        i++;
    atomic_fetch_add_explicit(&hists[which].n[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hists[which].sum_us, us, memory_order_relaxed);
}

static void hist_text(sf_str *b, cd_latency which)
{
    const char *name = hist_names[which].name;
    sf_str_catf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, hist_names[which].help, name);
    uint64_t cum = 0;
    for (unsigned i = 0; i <= NBOUNDS; i++) {
        cum += atomic_load_explicit(&hists[which].n[i], memory_order_relaxed);
        if (i < NBOUNDS)
            sf_str_catf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, (double)bounds_us[i] / 1e6, cum);
        else
            sf_str_catf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
    }
    sf_str_catf(b, "%s_sum %.6f\n%s_count %" PRIu64 "\n", name,
        (double)atomic_load_explicit(&hists[which].sum_us, memory_order_relaxed) / 1e6, name, cum);
}

/* The fields of /proc/self/stat after the command's name: utime and stime
 * (clock ticks), starttime (ticks since boot). Returns false when unread. */
static bool proc_stat(uint64_t *utime, uint64_t *stime, uint64_t *start)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    unsigned long long u, s, st;
    /* after ")": state (3), then fields 4..13, utime (14), stime (15), 16..21, starttime (22) */
    if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu",
                         &u, &s, &st) != 3)
        return false;
    *utime = u;
    *stime = s;
    *start = st;
    return true;
}

/* The boot time in Unix seconds (btime of /proc/stat); 0 when unread. */
static uint64_t boot_time(void)
{
    char line[256];
    unsigned long long bt = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "btime %llu", &bt) == 1)
            break;
    fclose(f);
    return bt;
}

static void process_text(sf_str *b)
{
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    uint64_t ut, st, start;
    if (ticks > 0 && proc_stat(&ut, &st, &start)) {
        sf_str_catf(b, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
                       "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n",
            (double)(ut + st) / (double)ticks);
        uint64_t bt = boot_time();
        if (bt > 0)
            sf_str_catf(b, "# HELP process_start_time_seconds Start time of the process since unix epoch in "
                           "seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n",
                (double)bt + (double)start / (double)ticks);
    }
    unsigned long long size, rss;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (page > 0 && fscanf(f, "%llu %llu", &size, &rss) == 2)
            sf_str_catf(b, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                           "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %llu\n"
                           "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                           "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n",
                rss * (unsigned long long)page, size * (unsigned long long)page);
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        uint64_t n = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            n += e->d_name[0] != '.';
        closedir(d);
        sf_str_catf(b, "# HELP process_open_fds Number of open file descriptors.\n"
                       "# TYPE process_open_fds gauge\nprocess_open_fds %" PRIu64 "\n", n - 1); /* less the DIR's own */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        sf_str_catf(b, "# HELP process_max_fds Maximum number of open file descriptors.\n"
                       "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
}

void cd_metrics_text(sf_str *b)
{
    for (cd_latency w = 0; w < CD_LATENCIES; w++)
        hist_text(b, w);
    process_text(b);
    sf_str_catf(b, "# HELP simfarm_build_info The coordinator's version.\n# TYPE simfarm_build_info gauge\n"
                   "simfarm_build_info{version=\"%s\"} 1\n", SF_VERSION);
}
