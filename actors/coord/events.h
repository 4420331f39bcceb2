/*
 * events.h — the coordinator's live events: the log behind /ws/events.
 *
 * Every event gets the next sequence number and is kept, as its JSON text,
 * in a ring of the last `capacity` events, so a dashboard that reconnects
 * with the last number it saw gets what it missed (or is told it is too far
 * behind and needs a snapshot). The latest `job.progress` of each
 * unfinished job is kept apart, so a snapshot and GET /api/jobs/{id} cost
 * one lookup per job, never a replay. Plain data; one thread.
 */
#ifndef SIMFARM_ACTORS_EVENTS_H
#define SIMFARM_ACTORS_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cd_events cd_events;

/* capacity: events kept for replay (at least 1); the first event gets
 * sequence number first + 1. The coordinator starts from its start time in
 * microseconds since 1970 (below 2^53 until the year 2255, so exact in a
 * JavaScript number), so the numbers of a run are above those of every
 * earlier run that sent fewer than one event per microsecond, and a client
 * that saw an earlier run is sent a snapshot. Never returns NULL. */
cd_events *cd_events_create(size_t capacity, uint64_t first);
void cd_events_destroy(cd_events *ev);

/* Appends an event of `type` ("job.progress", "node.online", ...) about job
 * (0 = none) whose other members are `fields`: JSON object members without
 * the braces (e.g. "\"state\":\"complete\""), or "" for none. Returns the
 * event's text, {"seq":N,"type":...,"job":J,fields}, valid until the event
 * leaves the ring. `job.progress` replaces the job's latest progress;
 * `job.finished` forgets it. */
const char *cd_events_add(cd_events *ev, const char *type, uint64_t job, const char *fields);

/* The sequence number of the last event (`first` before the first). */
uint64_t cd_events_last(const cd_events *ev);

/* How many events were added since cd_events_create. */
uint64_t cd_events_count(const cd_events *ev);

/* Finds the first kept event with seq > after whose job is `job` (0 =
 * every event), for a client that reads the log at its own pace. Returns 1
 * with its text (valid until it leaves the ring), length and seq; 0 when
 * there is none yet, with *seq the last event's number (the events up to it
 * are passed over); -1 when events after `after` have already left the ring
 * or `after` is not a number this log gave (past the last: from another
 * run): the caller needs a snapshot instead. */
int cd_events_next(const cd_events *ev, uint64_t after, uint64_t job, const char **text, size_t *len, uint64_t *seq);

/* The latest job.progress event of job (its whole text), or NULL. */
const char *cd_events_progress(const cd_events *ev, uint64_t job);

/* Calls fn with the latest progress event of every unfinished job that has
 * one, in job order. */
void cd_events_each_progress(const cd_events *ev, void (*fn)(void *ctx, uint64_t job, const char *text), void *ctx);

/* Writes s as a JSON string literal into out (cap bytes, at least 3) as
 * sf_json_quote does: ill-formed UTF-8 as U+FFFD, cut at a character
 * when it does not fit. Returns out. */
char *cd_json_quote(char *out, size_t cap, const char *s);

#endif
