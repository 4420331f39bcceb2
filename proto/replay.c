/*
 * replay.c — bounded replay guard (replay.h). Pairs sit in a ring in arrival
 * order; the oldest arrival is forgotten first, whether it aged out of the
 * skew window or room is needed, and forgetting raises the floor. The ring
 * starts small and doubles, up to the capacity, only when it is full of pairs
 * still inside the window: a node's memory follows how many completions it
 * sent in the last PR_MAX_SKEW_S seconds, not the most it may ever send.
 * Lookups scan the ring: with the default capacity that is a microsecond,
 * small next to a signature check (about 50).
 */
#include "proto/replay.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proto/error.h"
#include "proto/sign.h"

struct pair {
    uint64_t ts;
    uint8_t nonce[16];
};

enum { FIRST_ROOM = 16 };

struct pr_replay {
    uint32_t cap;        /* the most pairs it will hold */
    uint32_t room;       /* pairs ring has room for: FIRST_ROOM doubled, at most cap */
    uint32_t head, count;
    uint64_t floor;      /* every forgotten pair had ts <= floor */
    struct pair *ring;
};

int pr_replay_create(pr_replay **out, uint32_t capacity)
{
    pr_replay *g;

    if (out == NULL)
        return PR_EINVAL;
    *out = NULL;
    if (capacity == 0 || capacity > PR_REPLAY_MAX)
        return PR_EINVAL;
    g = malloc(sizeof *g);
    if (g == NULL)
        return PR_ENOMEM;
    g->room = capacity < FIRST_ROOM ? capacity : FIRST_ROOM;
    g->ring = malloc((size_t)g->room * sizeof g->ring[0]);
    if (g->ring == NULL) {
        free(g);
        return PR_ENOMEM;
    }
    g->cap = capacity;
    g->head = 0;
    g->count = 0;
    g->floor = 0;
    *out = g;
    return 0;
}

void pr_replay_destroy(pr_replay *g)
{
    if (g == NULL)
        return;
    free(g->ring);
    free(g);
}

static void forget_oldest(pr_replay *g)
{
    const struct pair *p = &g->ring[g->head];
    if (p->ts > g->floor)
        g->floor = p->ts;
    g->head = (g->head + 1) % g->room;
    g->count--;
}

/* Doubles a full ring (at most to the capacity), its pairs moved to the
 * front in arrival order. False when it is at the capacity or memory is
 * short: then the oldest pair is forgotten instead, as the floor allows. */
static bool grow(pr_replay *g)
{
    uint32_t room = g->room > g->cap / 2 ? g->cap : 2 * g->room;
    if (room == g->room)
        return false;
    struct pair *ring = malloc((size_t)room * sizeof ring[0]);
    if (ring == NULL)
        return false;
    uint32_t first = g->room - g->head; /* pairs from head to the end of the old ring */
    memcpy(ring, g->ring + g->head, (size_t)first * sizeof ring[0]);
    memcpy(ring + first, g->ring, (size_t)g->head * sizeof ring[0]);
    free(g->ring);
    g->ring = ring;
    g->room = room;
    g->head = 0;
    return true;
}

int pr_replay_seen(const pr_replay *g, uint64_t ts, const uint8_t nonce[16])
{
    if (g == NULL || nonce == NULL)
        return PR_EINVAL;
    if (ts <= g->floor)
        return PR_EREPLAYOLD;
    for (uint32_t i = 0, j = g->head; i < g->count; i++, j = (j + 1) % g->room)
        if (g->ring[j].ts == ts && memcmp(g->ring[j].nonce, nonce, 16) == 0)
            return PR_EREPLAY;
    return 0;
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
    int rc = pr_replay_seen(g, ts, nonce);
    if (rc != 0)
        return rc;
    if (g->count == g->room && !grow(g)) {
        forget_oldest(g);
        if (ts <= g->floor)
            return PR_EREPLAYOLD;
    }
    struct pair *p = &g->ring[(g->head + g->count) % g->room];
    p->ts = ts;
    memcpy(p->nonce, nonce, 16);
    g->count++;
    return 0;
}

uint32_t pr_replay_size(const pr_replay *g)
{
    return g ? g->count : 0;
}

uint32_t pr_replay_room(const pr_replay *g)
{
    return g ? g->room : 0;
}
