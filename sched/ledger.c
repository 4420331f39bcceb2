/*
 * ledger.c — see sched.h.
 *
 * Where an item is, at any time: in a pending range of its job (a deque of
 * {first, count, attempt}, initially one range [0, items) cut from the
 * front on demand), in exactly one live claim, done (counted in done_items,
 * merged into the aggregate), or failed. Every transition moves a whole
 * range between two of these places, so the four always partition
 * [0, items) — the invariant the property tests check after every step.
 *
 * Live claims sit in a slab indexed by uint32; a token table (open
 * addressing, backward-shift deletion) finds them by token, a per-node list
 * finds a node's claims, and a hashed timing wheel (64 ms ticks, 4096
 * buckets) orders lease deadlines, so a sweep visits only the buckets whose
 * time has come.
 */
#include "sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

enum {
    TICK_SHIFT = 6,            /* 64 ms wheel ticks */
    WHEEL_SIZE = 1 << 12,      /* 4096 buckets: one turn is ~262 s */
    MAX_NOUT = 64,
};

/* Chunk ids in a journal above this are corrupt: each is one array slot. */
#define MAX_CHUNK_ID (1ull << 36)

typedef struct claim {
    uint8_t token[16];
    struct job *job;
    uint64_t node;
    uint64_t chunk;
    uint64_t first, count;
    uint64_t lease_until;
    uint32_t lease_ms;         /* the lease length a renewal grants again */
    uint32_t attempt;
    uint32_t wprev, wnext;     /* wheel bucket list; wnext is the free list when unused */
    uint32_t nprev, nnext;     /* the node's claims */
    uint16_t live;
    uint16_t bucket;           /* the wheel bucket it is in */
} claim;

typedef struct range {
    uint64_t first, count;
    uint32_t attempt;
} range;

/* An accepted chunk, at index chunk id in its job's dense array. */
typedef struct done_entry {
    uint8_t token[16];
    uint64_t hash;             /* of the accepted result bytes, low bit set; 0 = none */
} done_entry;

typedef struct job {
    sc_job_spec spec;
    sim_layout *layouts;
    sc_job_state state;
    range *pend;
    size_t pend_head, pend_len, pend_cap;
    uint64_t done_items, failed_items, inflight_items, pending_items;
    uint32_t inflight_claims;
    uint64_t next_chunk, chunks_accepted, chunks_failed, reclaims;
    sim_stats *agg;
    done_entry *done;          /* indexed by chunk id */
    size_t done_cap;
} job;

/* Who gets the next chunk: priority levels, highest first; within a level
 * the owners take turns, and within an owner its jobs take turns. Rebuilt
 * when a job starts or ends; a pick is O(1) when most jobs are eligible. */
typedef struct rr_owner {
    uint64_t owner;
    job **jobs;
    size_t njobs, cap, cursor;
} rr_owner;

typedef struct rr_level {
    int32_t priority;
    rr_owner *owners;
    size_t nowners, cap, cursor;
} rr_level;

typedef struct node_slot {
    uint64_t node;
    uint32_t head;             /* NONE = empty slot */
} node_slot;

struct sc_ledger {
    sc_config cfg;
    uint64_t rng;
    job **jobs;
    size_t njobs, jobs_cap;
    rr_level *levels;
    size_t nlevels, levels_cap;
    bool rr_dirty;
    claim *claims;
    uint32_t claims_cap, free_head, live;
    uint32_t *tok;             /* token table: claim indices */
    size_t tok_cap;
    node_slot *nodes;
    size_t nodes_cap, nodes_len;
    uint32_t wheel[WHEEL_SIZE];
    uint64_t wheel_tick;       /* ticks before this one are swept */
    bool wheel_started;
    uint32_t *scratch;         /* expired claims of one sweep */
    size_t scratch_cap;
    uint64_t swept, expired;   /* counters for sc_ledger_stats_get */
};

const char *sc_strerror(int code)
{
    switch (code) {
    case SC_OK: return "ok";
#define X(name, text) case SC_E##name: return text;
        SC_ERRNO_MAP(X)
#undef X
    default: return "unknown scheduler error";
    }
}

/* ---- memory ------------------------------------------------------------------ */

static void oom(size_t n)
{
    fprintf(stderr, "simfarm: out of memory allocating %zu bytes\n", n);
    abort();
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL && n != 0)
        oom(n * size);
    return p;
}

static void *xrealloc(void *p, size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        oom(SIZE_MAX);
    void *q = realloc(p, n * size);
    if (q == NULL && n != 0)
        oom(n * size);
    return q;
}

/* ---- hashing and randomness --------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t token_hash(const uint8_t t[16])
{
    uint64_t a, b;
    memcpy(&a, t, 8);
    memcpy(&b, t + 8, 8);
    return mix64(a ^ mix64(b));
}

/* FNV-1a: tells "same result bytes" from "different" for idempotency. */
static uint64_t bytes_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

static void default_random(void *ctx, void *buf, size_t n)
{
    uint64_t *state = ctx;
    unsigned char *out = buf;
    while (n > 0) {
        uint64_t v = mix64(*state += 0x9e3779b97f4a7c15ull);
        size_t k = n < 8 ? n : 8;
        memcpy(out, &v, k);
        out += k;
        n -= k;
    }
}

/* ---- the ledger ------------------------------------------------------------------ */

sc_ledger *sc_ledger_create(const sc_config *config)
{
    sc_ledger *l = xcalloc(1, sizeof *l);
    if (config != NULL)
        l->cfg = *config;
    if (l->cfg.target_chunk_ms == 0)
        l->cfg.target_chunk_ms = 10000;
    if (l->cfg.min_chunk == 0)
        l->cfg.min_chunk = 1000;
    if (l->cfg.max_chunk == 0)
        l->cfg.max_chunk = 1000000000ull;
    if (l->cfg.max_chunk < l->cfg.min_chunk)
        l->cfg.max_chunk = l->cfg.min_chunk;
    if (l->cfg.min_lease_ms == 0)
        l->cfg.min_lease_ms = 30000;
    if (l->cfg.max_attempts == 0)
        l->cfg.max_attempts = 3;
    if (l->cfg.random == NULL) {
        l->rng = l->cfg.seed;
        l->cfg.random = default_random;
        l->cfg.random_ctx = &l->rng;
    }
    l->free_head = NONE;
    for (size_t i = 0; i < WHEEL_SIZE; i++)
        l->wheel[i] = NONE;
    return l;
}

static void job_free(job *j)
{
    free(j->layouts);
    free(j->pend);
    free(j->agg);
    free(j->done);
    free(j);
}

void sc_ledger_destroy(sc_ledger *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->njobs; i++)
        job_free(l->jobs[i]);
    free(l->jobs);
    for (size_t i = 0; i < l->levels_cap; i++) {
        for (size_t k = 0; k < l->levels[i].cap; k++)
            free(l->levels[i].owners[k].jobs);
        free(l->levels[i].owners);
    }
    free(l->levels);
    free(l->claims);
    free(l->tok);
    free(l->nodes);
    free(l->scratch);
    free(l);
}

void sc_ledger_stats_get(const sc_ledger *l, sc_ledger_stats *out)
{
    out->live_claims = l->live;
    out->claim_bytes = (uint64_t)l->claims_cap * sizeof(claim) + l->tok_cap * sizeof(uint32_t) +
        l->nodes_cap * sizeof(node_slot);
    out->swept = l->swept;
    out->expired = l->expired;
}

static job *job_find(sc_ledger *l, uint64_t id)
{
    for (size_t i = 0; i < l->njobs; i++)
        if (l->jobs[i]->spec.id == id)
            return l->jobs[i];
    return NULL;
}

static void journal(sc_ledger *l, const sc_record *r)
{
    if (l->cfg.journal != NULL)
        l->cfg.journal(l->cfg.journal_ctx, r);
}

/* ---- token table --------------------------------------------------------------------- */

static void tok_insert_raw(sc_ledger *l, uint32_t idx)
{
    size_t mask = l->tok_cap - 1;
    size_t i = token_hash(l->claims[idx].token) & mask;
    while (l->tok[i] != NONE)
        i = (i + 1) & mask;
    l->tok[i] = idx;
}

static void tok_grow(sc_ledger *l)
{
    uint32_t *old = l->tok;
    size_t ocap = l->tok_cap;
    l->tok_cap = ocap ? ocap * 2 : 64;
    l->tok = xrealloc(NULL, l->tok_cap, sizeof *l->tok);
    memset(l->tok, 0xff, l->tok_cap * sizeof *l->tok);
    for (size_t i = 0; i < ocap; i++)
        if (old[i] != NONE)
            tok_insert_raw(l, old[i]);
    free(old);
}

static uint32_t tok_find(const sc_ledger *l, const uint8_t token[16], size_t *slot)
{
    if (l->tok_cap == 0)
        return NONE;
    size_t mask = l->tok_cap - 1;
    for (size_t i = token_hash(token) & mask;; i = (i + 1) & mask) {
        uint32_t idx = l->tok[i];
        if (idx == NONE)
            return NONE;
        if (memcmp(l->claims[idx].token, token, 16) == 0) {
            if (slot != NULL)
                *slot = i;
            return idx;
        }
    }
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void tok_remove(sc_ledger *l, uint32_t idx)
{
    size_t i;
    if (tok_find(l, l->claims[idx].token, &i) != idx)
        return;
    size_t mask = l->tok_cap - 1;
    for (size_t j = (i + 1) & mask; l->tok[j] != NONE; j = (j + 1) & mask) {
        size_t home = token_hash(l->claims[l->tok[j]].token) & mask;
        /* Move j back into the hole at i unless its home lies in (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            l->tok[i] = l->tok[j];
            i = j;
        }
    }
    l->tok[i] = NONE;
}

/* ---- node lists ------------------------------------------------------------------------ */

static node_slot *node_find(sc_ledger *l, uint64_t node, bool create)
{
    if (l->nodes_cap == 0 || (create && (l->nodes_len + 1) * 2 > l->nodes_cap)) {
        if (!create)
            return NULL;
        node_slot *old = l->nodes;
        size_t ocap = l->nodes_cap;
        l->nodes_cap = ocap ? ocap * 2 : 64;
        l->nodes = xrealloc(NULL, l->nodes_cap, sizeof *l->nodes);
        for (size_t i = 0; i < l->nodes_cap; i++)
            l->nodes[i].head = NONE;
        for (size_t i = 0; i < ocap; i++) {
            if (old[i].head == NONE)
                continue;
            size_t k = mix64(old[i].node) & (l->nodes_cap - 1);
            while (l->nodes[k].head != NONE)
                k = (k + 1) & (l->nodes_cap - 1);
            l->nodes[k] = old[i];
        }
        free(old);
    }
    size_t mask = l->nodes_cap - 1;
    for (size_t i = mix64(node) & mask;; i = (i + 1) & mask) {
        if (l->nodes[i].head == NONE) {
            if (!create)
                return NULL;
            l->nodes[i].node = node;
            l->nodes_len++;
            return &l->nodes[i]; /* head stays NONE until the caller links */
        }
        if (l->nodes[i].node == node)
            return &l->nodes[i];
    }
}

static void node_unlink_slot(sc_ledger *l, node_slot *s)
{
    size_t mask = l->nodes_cap - 1;
    size_t i = (size_t)(s - l->nodes);
    for (size_t j = (i + 1) & mask; l->nodes[j].head != NONE; j = (j + 1) & mask) {
        size_t home = mix64(l->nodes[j].node) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            l->nodes[i] = l->nodes[j];
            i = j;
        }
    }
    l->nodes[i].head = NONE;
    l->nodes_len--;
}

static void node_link(sc_ledger *l, uint32_t idx)
{
    claim *c = &l->claims[idx];
    node_slot *s = node_find(l, c->node, true);
    c->nprev = NONE;
    c->nnext = s->head;
    if (s->head != NONE)
        l->claims[s->head].nprev = idx;
    s->head = idx;
}

static void node_unlink(sc_ledger *l, uint32_t idx)
{
    claim *c = &l->claims[idx];
    if (c->nprev != NONE) {
        l->claims[c->nprev].nnext = c->nnext;
    } else {
        node_slot *s = node_find(l, c->node, false);
        if (s != NULL) {
            s->head = c->nnext;
            if (s->head == NONE) {
                node_unlink_slot(l, s);
            }
        }
    }
    if (c->nnext != NONE)
        l->claims[c->nnext].nprev = c->nprev;
}

/* ---- the wheel ----------------------------------------------------------------------------- */

static void wheel_insert(sc_ledger *l, uint32_t idx)
{
    claim *c = &l->claims[idx];
    uint64_t tick = c->lease_until >> TICK_SHIFT;
    if (l->wheel_started && tick < l->wheel_tick)
        tick = l->wheel_tick; /* already due: the next sweep sees it */
    c->bucket = (uint16_t)(tick & (WHEEL_SIZE - 1));
    uint32_t *b = &l->wheel[c->bucket];
    c->wprev = NONE;
    c->wnext = *b;
    if (*b != NONE)
        l->claims[*b].wprev = idx;
    *b = idx;
}

static void wheel_remove(sc_ledger *l, uint32_t idx)
{
    claim *c = &l->claims[idx];
    if (c->wprev != NONE)
        l->claims[c->wprev].wnext = c->wnext;
    else
        l->wheel[c->bucket] = c->wnext;
    if (c->wnext != NONE)
        l->claims[c->wnext].wprev = c->wprev;
}

/* ---- claims ---------------------------------------------------------------------------------- */

static uint32_t claim_alloc(sc_ledger *l)
{
    if (l->free_head == NONE) {
        uint32_t ocap = l->claims_cap;
        uint32_t ncap = ocap ? ocap * 2 : 64;
        l->claims = xrealloc(l->claims, ncap, sizeof *l->claims);
        memset(l->claims + ocap, 0, (ncap - ocap) * sizeof *l->claims);
        for (uint32_t i = ncap; i-- > ocap;) {
            l->claims[i].wnext = l->free_head;
            l->free_head = i;
        }
        l->claims_cap = ncap;
    }
    uint32_t idx = l->free_head;
    l->free_head = l->claims[idx].wnext;
    if ((size_t)(l->live + 1) * 2 > l->tok_cap)
        tok_grow(l);
    l->live++;
    return idx;
}

/* Unlinks a live claim from every index and returns its slot. */
static void claim_drop(sc_ledger *l, uint32_t idx)
{
    claim *c = &l->claims[idx];
    job *j = c->job;
    tok_remove(l, idx);
    wheel_remove(l, idx);
    node_unlink(l, idx);
    j->inflight_items -= c->count;
    j->inflight_claims--;
    c->live = 0;
    c->wnext = l->free_head;
    l->free_head = idx;
    l->live--;
}

/* ---- pending ranges ------------------------------------------------------------------------ */

static void pend_reserve(job *j)
{
    if (j->pend_len < j->pend_cap)
        return;
    size_t ncap = j->pend_cap ? j->pend_cap * 2 : 8;
    range *nr = xrealloc(NULL, ncap, sizeof *nr);
    for (size_t i = 0; i < j->pend_len; i++)
        nr[i] = j->pend[(j->pend_head + i) % j->pend_cap];
    free(j->pend);
    j->pend = nr;
    j->pend_cap = ncap;
    j->pend_head = 0;
}

static void pend_push_back(job *j, range r)
{
    pend_reserve(j);
    j->pend[(j->pend_head + j->pend_len++) % j->pend_cap] = r;
    j->pending_items += r.count;
}

/* Retries go first, so a job's stragglers are not left to the end. */
static void pend_push_front(job *j, range r)
{
    pend_reserve(j);
    j->pend_head = (j->pend_head + j->pend_cap - 1) % j->pend_cap;
    j->pend[j->pend_head] = r;
    j->pend_len++;
    j->pending_items += r.count;
}

/* Cuts up to `want` items from the front range. */
static range pend_take(job *j, uint64_t want)
{
    range *front = &j->pend[j->pend_head];
    range r = *front;
    if (r.count > want) {
        r.count = want;
        front->first += want;
        front->count -= want;
    } else {
        j->pend_head = (j->pend_head + 1) % j->pend_cap;
        j->pend_len--;
    }
    j->pending_items -= r.count;
    return r;
}

/* ---- accepted chunks ------------------------------------------------------------------------------ */

/* Chunk ids are handed out in sequence, so accepted chunks fill a dense
 * array: an answer to a repeated completion costs one indexed load. */
static void done_set(job *j, uint64_t chunk, const uint8_t token[16], uint64_t hash)
{
    if (chunk >= j->done_cap) {
        size_t ncap = j->done_cap ? j->done_cap : 64;
        while (ncap <= chunk)
            ncap *= 2;
        j->done = xrealloc(j->done, ncap, sizeof *j->done);
        memset(j->done + j->done_cap, 0, (ncap - j->done_cap) * sizeof *j->done);
        j->done_cap = ncap;
    }
    memcpy(j->done[chunk].token, token, 16);
    j->done[chunk].hash = hash | 1;
}

static const done_entry *done_get(const job *j, uint64_t chunk, const uint8_t token[16])
{
    if (chunk >= j->done_cap || j->done[chunk].hash == 0 || memcmp(j->done[chunk].token, token, 16) != 0)
        return NULL;
    return &j->done[chunk];
}

/* ---- results ------------------------------------------------------------------------------------ */

int sc_result_encode(const sim_stats *out, uint32_t nout, void *buf, size_t cap, size_t *len)
{
    unsigned char *p = buf;
    size_t off = 0;
    if (nout == 0 || nout > MAX_NOUT)
        return SC_EINVAL;
    for (uint32_t o = 0; o < nout; o++) {
        size_t n = 0;
        if (cap - off < 4 || sim_stats_encode(&out[o], p + off + 4, cap - off - 4, &n) != 0)
            return SC_ETOOBIG;
        p[off] = (unsigned char)n;
        p[off + 1] = (unsigned char)(n >> 8);
        p[off + 2] = (unsigned char)(n >> 16);
        p[off + 3] = (unsigned char)(n >> 24);
        off += 4 + n;
    }
    *len = off;
    return 0;
}

/* Decodes exactly nout statistics; anything else is SC_EBADRESULT. */
static int result_decode(const void *buf, size_t len, uint32_t nout, sim_stats *out)
{
    const unsigned char *p = buf;
    size_t off = 0;
    if (buf == NULL)
        return SC_EBADRESULT;
    for (uint32_t o = 0; o < nout; o++) {
        if (len - off < 4)
            return SC_EBADRESULT;
        size_t n = (size_t)p[off] | (size_t)p[off + 1] << 8 | (size_t)p[off + 2] << 16 |
            (size_t)p[off + 3] << 24;
        off += 4;
        if (n > len - off || sim_stats_decode(&out[o], p + off, n) != 0)
            return SC_EBADRESULT;
        off += n;
    }
    return off == len ? 0 : SC_EBADRESULT;
}

/* Checks a decoded result against its chunk and merges it into agg, all or
 * nothing. */
static int merge_result(job *j, const sim_stats *res, uint64_t count)
{
    sim_stats tmp[MAX_NOUT];
    if (sim_stats_count(&res[0]) != count * j->spec.samples_per_item)
        return SC_EBADRESULT;
    for (uint32_t o = 0; o < j->spec.nout; o++) {
        tmp[o] = j->agg[o];
        if (sim_stats_merge(&tmp[o], &res[o]) != 0)
            return SC_EBADRESULT;
    }
    memcpy(j->agg, tmp, j->spec.nout * sizeof *tmp);
    return 0;
}

/* ---- jobs ------------------------------------------------------------------------------------------ */

static void rr_rebuild(sc_ledger *l)
{
    /* Keep the arrays, reset the counts: rebuilds happen as jobs come and go. */
    for (size_t i = 0; i < l->levels_cap; i++) {
        for (size_t k = 0; k < l->levels[i].cap; k++)
            l->levels[i].owners[k].njobs = 0;
        l->levels[i].nowners = 0;
        l->levels[i].cursor = 0;
    }
    l->nlevels = 0;
    for (size_t i = 0; i < l->njobs; i++) {
        job *j = l->jobs[i];
        if (j->state != SC_JOB_RUNNING)
            continue;
        size_t li = 0;
        while (li < l->nlevels && l->levels[li].priority > j->spec.priority)
            li++;
        if (li == l->nlevels || l->levels[li].priority != j->spec.priority) {
            if (l->nlevels == l->levels_cap) {
                size_t ncap = l->levels_cap ? l->levels_cap * 2 : 4;
                l->levels = xrealloc(l->levels, ncap, sizeof *l->levels);
                memset(l->levels + l->levels_cap, 0, (ncap - l->levels_cap) * sizeof *l->levels);
                l->levels_cap = ncap;
            }
            rr_level spare = l->levels[l->nlevels]; /* keep its arrays */
            memmove(&l->levels[li + 1], &l->levels[li], (l->nlevels - li) * sizeof *l->levels);
            l->levels[li] = spare;
            l->levels[li].priority = j->spec.priority;
            l->levels[li].nowners = 0;
            l->levels[li].cursor = 0;
            l->nlevels++;
        }
        rr_level *lv = &l->levels[li];
        size_t oi = 0;
        while (oi < lv->nowners && lv->owners[oi].owner != j->spec.owner)
            oi++;
        if (oi == lv->nowners) {
            if (lv->nowners == lv->cap) {
                size_t ncap = lv->cap ? lv->cap * 2 : 4;
                lv->owners = xrealloc(lv->owners, ncap, sizeof *lv->owners);
                memset(lv->owners + lv->cap, 0, (ncap - lv->cap) * sizeof *lv->owners);
                lv->cap = ncap;
            }
            lv->owners[oi].owner = j->spec.owner;
            lv->owners[oi].njobs = 0;
            lv->owners[oi].cursor = 0;
            lv->nowners++;
        }
        rr_owner *o = &lv->owners[oi];
        if (o->njobs == o->cap) {
            o->cap = o->cap ? o->cap * 2 : 4;
            o->jobs = xrealloc(o->jobs, o->cap, sizeof *o->jobs);
        }
        o->jobs[o->njobs++] = j;
    }
    l->rr_dirty = false;
}

static int job_new(sc_ledger *l, const sc_job_spec *spec, job **out)
{
    if (spec == NULL || spec->strategy != SC_SINGLE || spec->items == 0 || spec->nout == 0 ||
        spec->nout > MAX_NOUT || spec->layouts == NULL || spec->precision < 0 ||
        spec->precision != spec->precision)
        return SC_EINVAL;
    if (spec->items > (UINT64_MAX >> 2))
        return SC_ETOOBIG;
    if (job_find(l, spec->id) != NULL)
        return SC_EEXISTS;
    job *j = xcalloc(1, sizeof *j);
    j->spec = *spec;
    if (j->spec.tiers == 0)
        j->spec.tiers = SC_TIER_ANY;
    if (j->spec.samples_per_item == 0)
        j->spec.samples_per_item = 1;
    j->layouts = xcalloc(spec->nout, sizeof *j->layouts);
    memcpy(j->layouts, spec->layouts, spec->nout * sizeof *j->layouts);
    j->spec.layouts = j->layouts;
    j->agg = xcalloc(spec->nout, sizeof *j->agg);
    for (uint32_t o = 0; o < spec->nout; o++)
        sim_stats_init(&j->agg[o], &j->layouts[o]);
    j->state = SC_JOB_RUNNING;
    l->rr_dirty = true;
    if (l->njobs == l->jobs_cap) {
        l->jobs_cap = l->jobs_cap ? l->jobs_cap * 2 : 16;
        l->jobs = xrealloc(l->jobs, l->jobs_cap, sizeof *l->jobs);
    }
    l->jobs[l->njobs++] = j;
    *out = j;
    return 0;
}

int sc_job_add(sc_ledger *l, const sc_job_spec *spec)
{
    job *j;
    int rc = job_new(l, spec, &j);
    if (rc == 0)
        pend_push_back(j, (range){ 0, spec->items, 0 });
    return rc;
}

/* Drops every live claim of j (they become stale). O(claims): only on
 * cancellation, early completion or expiry. */
static void drop_job_claims(sc_ledger *l, job *j)
{
    for (uint32_t i = 0; i < l->claims_cap && j->inflight_claims > 0; i++) {
        claim *c = &l->claims[i];
        if (c->live && c->job == j) {
            range r = { c->first, c->count, c->attempt };
            claim_drop(l, i);
            pend_push_back(j, r); /* keeps the partition; the job is over */
        }
    }
}

static void job_end(sc_ledger *l, job *j, sc_job_state state)
{
    j->state = state;
    l->rr_dirty = true;
    drop_job_claims(l, j);
    sc_record r = { .type = SC_REC_JOB_END, .job = j->spec.id, .state = state };
    journal(l, &r);
}

/* Ends j when nothing is left to do, or its precision target is met. */
static bool check_end(sc_ledger *l, job *j)
{
    if (j->state != SC_JOB_RUNNING)
        return false;
    if (j->done_items == j->spec.items) {
        job_end(l, j, SC_JOB_COMPLETE);
        return true;
    }
    if (j->pending_items == 0 && j->inflight_items == 0) {
        job_end(l, j, SC_JOB_FAILED); /* what is not done has failed */
        return true;
    }
    if (j->spec.precision > 0 && sim_stats_count(&j->agg[0]) >= 2) {
        double half = 1.96 * sim_stats_stderr(&j->agg[0]);
        if (half == half && half <= j->spec.precision) {
            job_end(l, j, SC_JOB_COMPLETE);
            return true;
        }
    }
    return false;
}

int sc_job_cancel(sc_ledger *l, uint64_t id, uint64_t now_ms)
{
    (void)now_ms;
    job *j = job_find(l, id);
    if (j == NULL)
        return SC_ENOJOB;
    if (j->state == SC_JOB_RUNNING)
        job_end(l, j, SC_JOB_CANCELLED);
    return 0;
}

int sc_job_forget(sc_ledger *l, uint64_t id)
{
    for (size_t i = 0; i < l->njobs; i++) {
        job *j = l->jobs[i];
        if (j->spec.id != id)
            continue;
        drop_job_claims(l, j);
        job_free(j);
        l->jobs[i] = l->jobs[--l->njobs];
        l->rr_dirty = true;
        return 0;
    }
    return SC_ENOJOB;
}

int sc_job_status_get(sc_ledger *l, uint64_t id, sc_job_status *out)
{
    job *j = job_find(l, id);
    if (j == NULL)
        return SC_ENOJOB;
    *out = (sc_job_status){
        .state = j->state,
        .items = j->spec.items,
        .done_items = j->done_items,
        .failed_items = j->failed_items,
        .inflight_items = j->inflight_items,
        .pending_items = j->pending_items,
        .inflight_claims = j->inflight_claims,
        .chunks_accepted = j->chunks_accepted,
        .chunks_failed = j->chunks_failed,
        .reclaims = j->reclaims,
        .aggregate = j->agg,
        .nout = j->spec.nout,
    };
    return 0;
}

void sc_job_ranges(sc_ledger *l, uint64_t id, void (*fn)(void *, uint64_t, uint64_t, bool), void *ctx)
{
    job *j = job_find(l, id);
    if (j == NULL)
        return;
    for (size_t i = 0; i < j->pend_len; i++) {
        const range *r = &j->pend[(j->pend_head + i) % j->pend_cap];
        fn(ctx, r->first, r->count, false);
    }
    for (uint32_t i = 0; i < l->claims_cap; i++)
        if (l->claims[i].live && l->claims[i].job == j)
            fn(ctx, l->claims[i].first, l->claims[i].count, true);
}

/* ---- claiming ------------------------------------------------------------------------------------------ */

static bool eligible(const job *j, const sc_node_info *n)
{
    return j->state == SC_JOB_RUNNING && j->pending_items > 0 && (j->spec.tiers & n->tier) &&
        (j->spec.backends == 0 || (j->spec.backends & n->backends)) && j->spec.mem_bytes <= n->mem_bytes;
}

/* The next eligible job in turn: highest priority level first, owners in
 * turn within a level, each owner's jobs in turn. */
static job *pick(sc_ledger *l, const sc_node_info *n)
{
    if (l->rr_dirty)
        rr_rebuild(l);
    for (size_t li = 0; li < l->nlevels; li++) {
        rr_level *lv = &l->levels[li];
        for (size_t k = 0; k < lv->nowners; k++) {
            size_t oi = (lv->cursor + k) % lv->nowners;
            rr_owner *o = &lv->owners[oi];
            for (size_t m = 0; m < o->njobs; m++) {
                size_t ji = (o->cursor + m) % o->njobs;
                if (eligible(o->jobs[ji], n)) {
                    o->cursor = ji + 1;
                    lv->cursor = oi + 1;
                    return o->jobs[ji];
                }
            }
        }
    }
    return NULL;
}

static uint64_t chunk_size(const sc_ledger *l, const sc_node_info *n)
{
    double want = n->items_per_s > 0 ? n->items_per_s * (double)l->cfg.target_chunk_ms / 1000.0
                                     : (double)l->cfg.min_chunk;
    if (want < (double)l->cfg.min_chunk)
        return l->cfg.min_chunk;
    if (want > (double)l->cfg.max_chunk)
        return l->cfg.max_chunk;
    return (uint64_t)want;
}

int sc_claim(sc_ledger *l, const sc_node_info *node, unsigned slots, uint64_t now_ms,
    sc_claim_out *out, unsigned *n)
{
    if (l == NULL || node == NULL || (slots > 0 && out == NULL) || n == NULL)
        return SC_EINVAL;
    *n = 0;
    if (!l->wheel_started) {
        l->wheel_tick = now_ms >> TICK_SHIFT;
        l->wheel_started = true;
    }
    uint64_t size = chunk_size(l, node);
    for (unsigned s = 0; s < slots; s++) {
        job *best = pick(l, node);
        if (best == NULL)
            break;
        range r = pend_take(best, size);
        uint32_t idx = claim_alloc(l);
        claim *c = &l->claims[idx];
        l->cfg.random(l->cfg.random_ctx, c->token, sizeof c->token);
        c->job = best;
        c->node = node->id;
        c->chunk = ++best->next_chunk;
        c->first = r.first;
        c->count = r.count;
        c->attempt = r.attempt;
        double expect_ms = node->items_per_s > 0 ? (double)r.count * 1000.0 / node->items_per_s : 0;
        uint64_t lease = (uint64_t)(3 * expect_ms);
        if (lease < l->cfg.min_lease_ms)
            lease = l->cfg.min_lease_ms;
        c->lease_ms = lease > UINT32_MAX ? UINT32_MAX : (uint32_t)lease;
        c->lease_until = now_ms + c->lease_ms;
        c->live = 1;
        tok_insert_raw(l, idx);
        wheel_insert(l, idx);
        node_link(l, idx);
        best->inflight_items += r.count;
        best->inflight_claims++;
        out[s] = (sc_claim_out){
            .job = best->spec.id, .chunk = c->chunk, .first = c->first, .count = c->count,
            .lease_until = c->lease_until, .attempt = c->attempt,
        };
        memcpy(out[s].token, c->token, 16);
        (*n)++;
    }
    return 0;
}

/* ---- completing ---------------------------------------------------------------------------------------- */

int sc_complete(sc_ledger *l, uint64_t job_id, uint64_t chunk, const uint8_t token[16], uint64_t node,
    const void *result, size_t len, uint64_t now_ms, sc_outcome *outcome, bool *job_complete)
{
    (void)now_ms;
    if (l == NULL || token == NULL || outcome == NULL)
        return SC_EINVAL;
    if (job_complete != NULL)
        *job_complete = false;

    uint32_t idx = tok_find(l, token, NULL);
    if (idx != NONE) {
        claim *c = &l->claims[idx];
        job *j = c->job;
        if (j->spec.id != job_id || c->chunk != chunk || c->node != node) {
            *outcome = SC_STALE; /* another node's token, or the wrong job */
            return 0;
        }
        sim_stats res[MAX_NOUT];
        int rc = result_decode(result, len, j->spec.nout, res);
        if (rc == 0)
            rc = merge_result(j, res, c->count);
        if (rc != 0)
            return rc; /* the claim stays live: the node may send a good one */
        done_set(j, c->chunk, token, bytes_hash(result, len));
        sc_record rec = {
            .type = SC_REC_ACCEPT, .job = j->spec.id, .chunk = c->chunk, .first = c->first,
            .count = c->count, .result = result, .result_len = len,
        };
        memcpy(rec.token, token, 16);
        j->done_items += c->count;
        j->chunks_accepted++;
        claim_drop(l, idx);
        journal(l, &rec);
        *outcome = SC_ACCEPTED;
        bool ended = check_end(l, j);
        if (job_complete != NULL)
            *job_complete = ended && j->state == SC_JOB_COMPLETE;
        return 0;
    }

    job *j = job_find(l, job_id);
    const done_entry *e = j != NULL ? done_get(j, chunk, token) : NULL;
    if (e == NULL)
        *outcome = SC_STALE;
    else
        *outcome = e->hash == (bytes_hash(result, len) | 1) ? SC_IDEMPOTENT : SC_CONFLICT;
    return 0;
}

/* ---- leases ---------------------------------------------------------------------------------------------- */

size_t sc_renew(sc_ledger *l, uint64_t node, const uint8_t (*tokens)[16], size_t n, uint64_t now_ms)
{
    size_t renewed = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t idx = tok_find(l, tokens[i], NULL);
        if (idx == NONE || l->claims[idx].node != node)
            continue;
        claim *c = &l->claims[idx];
        wheel_remove(l, idx);
        c->lease_until = now_ms + c->lease_ms;
        wheel_insert(l, idx);
        renewed++;
    }
    return renewed;
}

/* Takes a lost claim back: its range returns to the job, or fails after
 * max_attempts. */
static void lose_claim(sc_ledger *l, uint32_t idx)
{
    claim *c = &l->claims[idx];
    job *j = c->job;
    range r = { c->first, c->count, c->attempt + 1 };
    claim_drop(l, idx);
    j->reclaims++;
    if (r.attempt >= l->cfg.max_attempts) {
        j->failed_items += r.count;
        j->chunks_failed++;
        sc_record rec = { .type = SC_REC_CHUNK_FAILED, .job = j->spec.id, .first = r.first, .count = r.count };
        journal(l, &rec);
        check_end(l, j);
    } else {
        pend_push_front(j, r);
    }
}

size_t sc_reclaim(sc_ledger *l, uint64_t now_ms)
{
    size_t expired = 0;
    if (!l->wheel_started) {
        l->wheel_tick = now_ms >> TICK_SHIFT;
        l->wheel_started = true;
    }
    uint64_t end = now_ms >> TICK_SHIFT;
    uint64_t from = l->wheel_tick;
    if (end >= from) {
        /* Collect first: losing a claim can end its job, which drops the
         * job's other claims, possibly from the bucket being walked. */
        size_t n = 0;
        uint64_t steps = end - from + 1 < WHEEL_SIZE ? end - from + 1 : WHEEL_SIZE;
        for (uint64_t t = 0; t < steps; t++) {
            for (uint32_t idx = l->wheel[(from + t) & (WHEEL_SIZE - 1)]; idx != NONE;
                 idx = l->claims[idx].wnext) {
                l->swept++;
                if (l->claims[idx].lease_until > now_ms)
                    continue;
                if (n == l->scratch_cap) {
                    l->scratch_cap = l->scratch_cap ? l->scratch_cap * 2 : 256;
                    l->scratch = xrealloc(l->scratch, l->scratch_cap, sizeof *l->scratch);
                }
                l->scratch[n++] = idx;
            }
        }
        /* No claim is allocated below, so a slot still live is the same claim. */
        for (size_t i = 0; i < n; i++) {
            if (l->claims[l->scratch[i]].live) {
                lose_claim(l, l->scratch[i]);
                expired++;
            }
        }
        l->expired += expired;
        /* The current tick may still gain due claims: sweep it again next time. */
        l->wheel_tick = end;
    }
    for (size_t i = 0; i < l->njobs; i++) {
        job *j = l->jobs[i];
        if (j->state == SC_JOB_RUNNING && j->spec.deadline_ms != 0 && now_ms >= j->spec.deadline_ms)
            job_end(l, j, SC_JOB_EXPIRED);
    }
    return expired;
}

size_t sc_release_node(sc_ledger *l, uint64_t node, uint64_t now_ms)
{
    (void)now_ms;
    size_t n = 0;
    node_slot *s;
    while ((s = node_find(l, node, false)) != NULL && s->head != NONE) {
        lose_claim(l, s->head);
        n++;
    }
    return n;
}

/* ---- restore ------------------------------------------------------------------------------------------------ */

static int cmp_range(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

int sc_job_restore(sc_ledger *l, const sc_job_spec *spec, const sc_record *recs, size_t n)
{
    job *j;
    int rc = job_new(l, spec, &j);
    if (rc != 0)
        return rc;
    range *done = xcalloc(n ? n : 1, sizeof *done);
    size_t nd = 0;
    sc_job_state end = SC_JOB_RUNNING;
    sim_stats res[MAX_NOUT];

    rc = SC_EBADRECORD;
    for (size_t i = 0; i < n; i++) {
        const sc_record *r = &recs[i];
        if (r->job != spec->id)
            goto fail;
        if (r->type == SC_REC_JOB_END) {
            if (r->state < SC_JOB_COMPLETE || r->state > SC_JOB_EXPIRED)
                goto fail;
            end = r->state;
            continue;
        }
        if ((r->type != SC_REC_ACCEPT && r->type != SC_REC_CHUNK_FAILED) || r->count == 0 ||
            r->first >= spec->items || r->count > spec->items - r->first ||
            (r->type == SC_REC_ACCEPT && (r->chunk == 0 || r->chunk > MAX_CHUNK_ID)))
            goto fail;
        done[nd++] = (range){ r->first, r->count, 0 };
        if (r->type == SC_REC_ACCEPT) {
            if (result_decode(r->result, r->result_len, j->spec.nout, res) != 0 ||
                merge_result(j, res, r->count) != 0)
                goto fail;
            done_set(j, r->chunk, r->token, bytes_hash(r->result, r->result_len));
            if (r->chunk > j->next_chunk)
                j->next_chunk = r->chunk; /* new chunk ids continue after the old ones */
            j->done_items += r->count;
            j->chunks_accepted++;
        } else {
            j->failed_items += r->count;
            j->chunks_failed++;
        }
    }
    qsort(done, nd, sizeof *done, cmp_range);
    uint64_t at = 0;
    for (size_t i = 0; i < nd; i++) {
        if (done[i].first < at)
            goto fail; /* overlapping records: the journal is corrupt */
        if (done[i].first > at)
            pend_push_back(j, (range){ at, done[i].first - at, 0 });
        at = done[i].first + done[i].count;
    }
    if (at < spec->items)
        pend_push_back(j, (range){ at, spec->items - at, 0 });
    free(done);
    if (end != SC_JOB_RUNNING)
        j->state = end;
    else
        check_end(l, j);
    return 0;

fail:
    free(done);
    sc_job_forget(l, spec->id);
    return rc;
}
