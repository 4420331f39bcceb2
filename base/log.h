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

#endif /* SIMFARM_BASE_LOG_H */
