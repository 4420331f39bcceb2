/*
 * log.h — the one logger (Redis's serverLog): library code reports through
 * sf_log(), never with fprintf(stderr, ...). A line is either text for a
 * person, "simfarm <source>: <message>", or, with --log-format json, one
 * JSON object a line: {"ts": ms since the epoch, "level", "src", "msg"}
 * followed by the event's fields, so an operator can grep one line per
 * event by job or node.
 *
 * Every line is written with one call, so lines from different threads do
 * not interleave. Settings are read without a lock: set them once at start.
 */
#ifndef SIMFARM_BASE_LOG_H
#define SIMFARM_BASE_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum sf_log_level {
    SF_LOG_DEBUG,
    SF_LOG_INFO,
    SF_LOG_WARN,
    SF_LOG_ERROR,
} sf_log_level;

typedef enum sf_log_format {
    SF_LOG_TEXT, /* "simfarm <source>: <message>" */
    SF_LOG_JSON, /* one JSON object a line */
} sf_log_format;

/* How lines are written from now on: their format, the least level that is
 * written (default SF_LOG_INFO), and whether info lines go to standard
 * output rather than standard error (a node's progress, default false). */
void sf_log_setup(sf_log_format format, sf_log_level min, bool info_to_stdout);

/* The format set by sf_log_setup (SF_LOG_TEXT until then). */
sf_log_format sf_log_get_format(void);

/* Reads a --log-format value: "text" or "json" into *out; false for any
 * other (and *out untouched). */
bool sf_log_format_parse(const char *s, sf_log_format *out);

/* Writes one line at level from source (a word such as "scheduler"; NULL
 * for the program itself, "simfarm: ..."). Never fails: a line that does
 * not fit in 2 KiB is cut. */
void sf_log(sf_log_level level, const char *source, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same with fields for the JSON form: `fields` is the inside of a JSON
 * object (`"job":12,"node":3`, without braces, the caller's to get right),
 * appended after "msg"; the text form leaves them out, since its message
 * already names them. fields may be NULL. */
void sf_logf(sf_log_level level, const char *source, const char *fields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A bound on repeated lines, so that a flood (failed logins from one
 * address, refused connections) cannot fill the disk: at most one line per
 * key (an address, say) per window, and at most `burst` lines per window
 * over all keys. What is not written is counted, and said with the key's
 * next line or by sf_log_limit_flush. Zero-initialise it (window 60 s and
 * 20 lines by default). Not thread-safe: one thread uses a given limit. */
enum { SF_LOG_LIMIT_KEYS = 64 };

typedef struct sf_log_limit {
    uint64_t window_ms;      /* 0: 60,000 */
    unsigned burst;          /* lines per window over all keys; 0: 20 */
    uint64_t burst_since;    /* the start of the burst's window */
    unsigned lines;          /* written in that window */
    uint64_t lost;           /* events of keys pushed out of the table, or over the burst, not yet said */
    struct {
        char key[64];
        uint64_t since_ms;   /* the key's last line */
        uint64_t held;       /* its events since then not written */
    } slot[SF_LOG_LIMIT_KEYS];
} sf_log_limit;

/* Whether to write the line of an event of key at now_ms (any monotonic
 * clock in ms). When true, *more is how many events of key were not
 * written since its last line, for the line to say. */
bool sf_log_limit_take(sf_log_limit *l, const char *key, uint64_t now_ms, uint64_t *more);

/* For each key whose window ended with events not written, calls say(ctx,
 * key, n) and forgets them; returns the events lost to the table's size or
 * the burst since the last flush (and forgets them too). */
uint64_t sf_log_limit_flush(sf_log_limit *l, uint64_t now_ms, void (*say)(void *ctx, const char *key, uint64_t n),
    void *ctx);

#endif /* SIMFARM_BASE_LOG_H */
