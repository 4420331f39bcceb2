/*
 * replay.c — bounded replay guard (replay.h). Pairs sit in a ring in arrival
 * order; the oldest arrival is forgotten first, whether it aged out of the
 * skew window or room is needed, and forgetting raises the floor. Lookups
 * scan the ring: with the default capacity that is a microsecond, small next
 * to the signature check that precedes it.
 */
#include "proto/replay.h"

#include <stdlib.h>
#include <string.h>

#include "proto/error.h"
#include "proto/sign.h"

struct pair {
    uint64_t ts;
    uint8_t nonce[16];
};

struct pr_replay {
    uint32_t cap, head, count;
    uint64_t floor;      /* every forgotten pair had ts <= floor */
    struct pair ring[];
};

int pr_replay_create(pr_replay **out, uint32_t capacity)
{
    pr_replay *g;

    if (out == NULL)
        return PR_EINVAL;
    *out = NULL;
    if (capacity == 0 || capacity > PR_REPLAY_MAX)
        return PR_EINVAL;
    g = malloc(sizeof *g + (size_t)capacity * sizeof g->ring[0]);
    if (g == NULL)
        return PR_ENOMEM;
    g->cap = capacity;
    g->head = 0;
    g->count = 0;
    g->floor = 0;
    *out = g;
    return 0;
}

void pr_replay_destroy(pr_replay *g)
{
    free(g);
}

static void forget_oldest(pr_replay *g)
{
    const struct pair *p = &g->ring[g->head];
    if (p->ts > g->floor)
        g->floor = p->ts;
    g->head = (g->head + 1) % g->cap;
    g->count--;
}

int pr_replay_check(pr_replay *g, uint64_t ts, const uint8_t nonce[16], uint64_t now)
{
    if (g == NULL || nonce == NULL)
        return PR_EINVAL;
    /* Pairs that left the skew window can no longer pass the clock check;
     * forgetting them moves the floor so that stays true if the clock steps
     * back. */
    while (g->count > 0 && g->ring[g->head].ts + PR_MAX_SKEW_S < now)
        forget_oldest(g);
    if (ts <= g->floor)
        return PR_EREPLAYOLD;
    for (uint32_t i = 0, j = g->head; i < g->count; i++, j = (j + 1) % g->cap)
        if (g->ring[j].ts == ts && memcmp(g->ring[j].nonce, nonce, 16) == 0)
            return PR_EREPLAY;
    if (g->count == g->cap) {
        forget_oldest(g);
        if (ts <= g->floor)
            return PR_EREPLAYOLD;
    }
    struct pair *p = &g->ring[(g->head + g->count) % g->cap];
    p->ts = ts;
    memcpy(p->nonce, nonce, 16);
    g->count++;
    return 0;
}

uint32_t pr_replay_size(const pr_replay *g)
{
    return g ? g->count : 0;
}
