/*
 * events.c — see events.h. The ring holds malloc'd texts; the progress
 * table is a small array sorted by job id (unfinished jobs are few).
 */
#include "actors/coord/events.h"
#include "base/json.h"

#include "runtime/runtime.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct event {
    uint64_t seq, job;
    char *text;
    size_t len;
} event;

typedef struct progress {
    uint64_t job;
    char *text;
} progress;

struct cd_events {
    event *ring;
    size_t cap, head, n;     /* oldest at ring[head] */
    uint64_t first, last;    /* the sequence number before the first event; the last event's */
    progress *prog;
    size_t nprog, prog_cap;
};

cd_events *cd_events_create(size_t capacity, uint64_t first)
{
    cd_events *ev = calloc(1, sizeof *ev);
    if (ev == NULL)
        sf_oom(sizeof *ev);
    ev->first = ev->last = first;
    ev->cap = capacity ? capacity : 1;
    ev->ring = calloc(ev->cap, sizeof *ev->ring);
    if (ev->ring == NULL)
        sf_oom(ev->cap * sizeof *ev->ring);
    return ev;
}

void cd_events_destroy(cd_events *ev)
{
    if (ev == NULL)
        return;
    for (size_t i = 0; i < ev->n; i++)
        free(ev->ring[(ev->head + i) % ev->cap].text);
    for (size_t i = 0; i < ev->nprog; i++)
        free(ev->prog[i].text);
    free(ev->ring);
    free(ev->prog);
    free(ev);
}

/* The index in prog where job is or would go. */
static size_t prog_slot(const cd_events *ev, uint64_t job)
{
    size_t lo = 0, hi = ev->nprog;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ev->prog[mid].job < job)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void prog_set(cd_events *ev, uint64_t job, const char *text)
{
    size_t i = prog_slot(ev, job);
    if (i < ev->nprog && ev->prog[i].job == job) {
        free(ev->prog[i].text);
    } else {
        if (ev->nprog == ev->prog_cap)
            ev->prog = sf_grow(ev->prog, &ev->prog_cap, sizeof *ev->prog);
        memmove(&ev->prog[i + 1], &ev->prog[i], (ev->nprog - i) * sizeof *ev->prog);
        ev->nprog++;
        ev->prog[i].job = job;
    }
    ev->prog[i].text = strdup(text);
    if (ev->prog[i].text == NULL)
        sf_oom(strlen(text) + 1);
}

static void prog_drop(cd_events *ev, uint64_t job)
{
    size_t i = prog_slot(ev, job);
    if (i == ev->nprog || ev->prog[i].job != job)
        return;
    free(ev->prog[i].text);
    memmove(&ev->prog[i], &ev->prog[i + 1], (ev->nprog - i - 1) * sizeof *ev->prog);
    ev->nprog--;
}

const char *cd_events_add(cd_events *ev, const char *type, uint64_t job, const char *fields)
{
    uint64_t seq = ++ev->last;
    char head[64];
    snprintf(head, sizeof head, "{\"seq\":%" PRIu64 ",\"type\":\"", seq);
    char jobs[40] = "";
    if (job != 0)
        snprintf(jobs, sizeof jobs, ",\"job\":%" PRIu64, job);
    size_t len = strlen(head) + strlen(type) + 1 + strlen(jobs) + (fields[0] ? 1 + strlen(fields) : 0) + 1;
    char *text = malloc(len + 1);
    if (text == NULL)
        sf_oom(len + 1);
    snprintf(text, len + 1, "%s%s\"%s%s%s}", head, type, jobs, fields[0] ? "," : "", fields);

    event *slot;
    if (ev->n == ev->cap) { /* the oldest leaves */
        slot = &ev->ring[ev->head];
        free(slot->text);
        ev->head = (ev->head + 1) % ev->cap;
    } else {
        slot = &ev->ring[(ev->head + ev->n) % ev->cap];
        ev->n++;
    }
    *slot = (event){ seq, job, text, strlen(text) };

    if (job != 0 && strcmp(type, "job.progress") == 0)
        prog_set(ev, job, text);
    else if (job != 0 && strcmp(type, "job.finished") == 0)
        prog_drop(ev, job);
    return text;
}

uint64_t cd_events_last(const cd_events *ev)
{
    return ev->last;
}

uint64_t cd_events_count(const cd_events *ev)
{
    return ev->last - ev->first;
}

int cd_events_next(const cd_events *ev, uint64_t after, uint64_t job, const char **text, size_t *len, uint64_t *seq)
{
    if (after > ev->last)
        return -1;
    uint64_t oldest = ev->n ? ev->ring[ev->head].seq : ev->last + 1;
    if (after + 1 < oldest)
        return -1;
    for (size_t i = (size_t)(after + 1 - oldest); i < ev->n; i++) {
        const event *e = &ev->ring[(ev->head + i) % ev->cap];
        if (job == 0 || e->job == job) {
            *text = e->text;
            *len = e->len;
            *seq = e->seq;
            return 1;
        }
    }
    *seq = ev->last;
    return 0;
}

const char *cd_events_progress(const cd_events *ev, uint64_t job)
{
    size_t i = prog_slot(ev, job);
    return i < ev->nprog && ev->prog[i].job == job ? ev->prog[i].text : NULL;
}

void cd_events_each_progress(const cd_events *ev, void (*fn)(void *ctx, uint64_t job, const char *text), void *ctx)
{
    for (size_t i = 0; i < ev->nprog; i++)
        fn(ctx, ev->prog[i].job, ev->prog[i].text);
}

char *cd_json_quote(char *out, size_t cap, const char *s)
{
    sf_json_quote(out, cap, s);
    return out;
}
