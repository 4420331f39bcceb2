/*
 * ledger.c — see sched.h.
 *
 * A job has lanes: one for single and stat_weights, one per candidate for
 * a tournament. Where an item of a lane is, at any time: in a pending range
 * of the lane (a deque of {first, count, attempt}, cut from the front on
 * demand), in exactly one live claim, done (merged into the lane's
 * aggregate), or failed. Every transition moves a whole range between two
 * of these places, so the four always partition the items opened to the
 * lane — the invariant the property tests check after every step.
 *
 * Live claims sit in a slab indexed by uint32; a token table (open
 * addressing, backward-shift deletion) finds them by token, a per-node list
 * finds a node's claims, and a hashed timing wheel (64 ms ticks, 4096
 * buckets) orders lease deadlines, so a sweep visits only the buckets whose
 * time has come.
 */
#include "sched/ledger_int.h"

#include "base/alloc.h"
#include "base/fnv.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

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
    return sf_fnv64(SF_FNV64_BASIS, p, n);
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

uint64_t sc__random(sc_ledger *l)
{
    uint64_t v;
    l->cfg.random(l->cfg.random_ctx, &v, sizeof v);
    return v;
}

/* ---- the ledger ------------------------------------------------------------------ */

sc_ledger *sc_ledger_create(const sc_config *config)
{
    sc_ledger *l = sf_calloc(1, sizeof *l);
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
    if (l->cfg.max_releases == 0)
        l->cfg.max_releases = 10;
    if (l->cfg.accepted_window == 0)
        l->cfg.accepted_window = 65536;
    if (l->cfg.max_hold_ms == 0)
        l->cfg.max_hold_ms = 10 * l->cfg.min_lease_ms;
    sc_verify_config *v = &l->cfg.verify;
    if (!(v->escape > 0 && v->escape < 1))
        v->escape = 1e-6;
    if (!(v->screen_z > 0))
        v->screen_z = 3;
    if (v->warmup == 0)
        v->warmup = 5;
    if (!(v->floor > 0 && v->floor <= 1))
        v->floor = 0.01;
    if (!(v->public_floor > 0 && v->public_floor <= 1))
        v->public_floor = 0.02;
    if (v->malformed_limit == 0)
        v->malformed_limit = 10;
    if (v->check_wait_ms == 0)
        v->check_wait_ms = 120000;
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

static void ahead_drop(lane *ln);

static void job_free(job *j)
{
    for (uint32_t i = 0; i < j->nlanes; i++) {
        ahead_drop(&j->lanes[i]);
        free(j->lanes[i].pend);
        free(j->lanes[i].agg);
    }
    free(j->lanes);
    free(j->layouts);
    free(j->steps);
    free(j->pairs);
    free(j->pair_d);
    free(j->done);
    sc__checks_free(j);
    sc__contrib_map_free(&j->contrib);
    free(j->verified_keys);
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
    sc__trust_map_free(&l->trust);
    free(l);
}

void sc_ledger_stats_get(const sc_ledger *l, sc_ledger_stats *out)
{
    out->live_claims = l->live;
    out->claim_bytes = (uint64_t)l->claims_cap * sizeof(claim) + l->tok_cap * sizeof(uint32_t) +
        l->nodes_cap * sizeof(node_slot);
    out->accepted_bytes = 0;
    for (size_t i = 0; i < l->njobs; i++)
        out->accepted_bytes += l->jobs[i]->done_cap * sizeof(done_entry);
    out->swept = l->swept;
    out->expired = l->expired;
    out->released = l->released;
    out->given_back = l->given_back;
    out->checks_passed = l->checks_passed;
    out->checks_failed = l->checks_failed;
    out->checks_abandoned = l->checks_abandoned;
    out->quarantined = l->quarantined;
}

job *sc__job_find(sc_ledger *l, uint64_t id)
{
    for (size_t i = 0; i < l->njobs; i++)
        if (l->jobs[i]->spec.id == id)
            return l->jobs[i];
    return NULL;
}

void sc__journal(sc_ledger *l, const sc_record *r)
{
    if (l->cfg.journal != NULL && !l->restoring)
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
    l->tok = sf_reallocarray(NULL, l->tok_cap, sizeof *l->tok);
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
        l->nodes = sf_reallocarray(NULL, l->nodes_cap, sizeof *l->nodes);
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

uint32_t sc__claim_alloc(sc_ledger *l)
{
    if (l->free_head == NONE) {
        uint32_t ocap = l->claims_cap;
        uint32_t ncap = ocap ? ocap * 2 : 64;
        l->claims = sf_reallocarray(l->claims, ncap, sizeof *l->claims);
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

/* Unlinks a live claim from every index, takes its items out of flight
 * and frees its slot; the caller puts its range where it belongs. */
void sc__claim_drop(sc_ledger *l, uint32_t idx)
{
    claim *c = &l->claims[idx];
    job *j = c->job;
    lane *ln = &j->lanes[c->lane];
    tok_remove(l, idx);
    wheel_remove(l, idx);
    node_unlink(l, idx);
    if (c->check != 0) {
        j->check_claims--; /* its items are done already */
    } else {
        ln->inflight_items -= c->count;
        j->inflight_items -= c->count;
        j->inflight_claims--;
    }
    c->job = NULL;
    c->wnext = l->free_head;
    l->free_head = idx;
    l->live--;
}

/* ---- pending ranges ------------------------------------------------------------------------ */

static void pend_reserve(lane *ln)
{
    if (ln->pend_len < ln->pend_cap)
        return;
    size_t ncap = ln->pend_cap ? ln->pend_cap * 2 : 8;
    range *nr = sf_reallocarray(NULL, ncap, sizeof *nr);
    for (size_t i = 0; i < ln->pend_len; i++)
        nr[i] = ln->pend[(ln->pend_head + i) % ln->pend_cap];
    free(ln->pend);
    ln->pend = nr;
    ln->pend_cap = ncap;
    ln->pend_head = 0;
}

static void pend_push_back(job *j, lane *ln, range r)
{
    pend_reserve(ln);
    ln->pend[(ln->pend_head + ln->pend_len++) % ln->pend_cap] = r;
    ln->pending_items += r.count;
    j->pending_items += r.count;
}

/* Retries go first, so a job's stragglers are not left to the end. */
void sc__pend_push_front(job *j, lane *ln, range r)
{
    pend_reserve(ln);
    ln->pend_head = (ln->pend_head + ln->pend_cap - 1) % ln->pend_cap;
    ln->pend[ln->pend_head] = r;
    ln->pend_len++;
    ln->pending_items += r.count;
    j->pending_items += r.count;
}

/* How far into a lane's pending ranges a claim looks for one its node did
 * not lose before: past it the lane has nothing for the node. */
enum { PEND_LOOK = 16 };

static bool lost_by(const range *r, uint64_t node)
{
    uint32_t n = r->nlosers < MAX_LOSERS ? r->nlosers : MAX_LOSERS;
    for (uint32_t i = 0; i < n; i++)
        if (r->losers[i] == node)
            return true;
    return false;
}

/* The position (from the front) of the first pending range node did not
 * lose, or -1. */
static int pend_for(const lane *ln, uint64_t node)
{
    size_t look = ln->pend_len < PEND_LOOK ? ln->pend_len : PEND_LOOK;
    for (size_t i = 0; i < look; i++)
        if (!lost_by(&ln->pend[(ln->pend_head + i) % ln->pend_cap], node))
            return (int)i;
    return -1;
}

/* A claim's range as it goes back to pending: its attempts and losers. */
static range range_of(const claim *c)
{
    range r = { c->first, c->count, c->attempt, c->nlosers, { 0 } };
    memcpy(r.losers, c->losers, sizeof r.losers);
    return r;
}

/* Cuts up to `want` items from the front of the pending range at position
 * `at` (pend_for). */
static range pend_take(job *j, lane *ln, size_t at, uint64_t want)
{
    range *from = &ln->pend[(ln->pend_head + at) % ln->pend_cap];
    range r = *from;
    if (r.count > want) {
        r.count = want;
        from->first += want;
        from->count -= want;
    } else {
        /* close the gap: the ranges before it move up one */
        for (size_t i = at; i > 0; i--)
            ln->pend[(ln->pend_head + i) % ln->pend_cap] = ln->pend[(ln->pend_head + i - 1) % ln->pend_cap];
        ln->pend_head = (ln->pend_head + 1) % ln->pend_cap;
        ln->pend_len--;
    }
    ln->pending_items -= r.count;
    j->pending_items -= r.count;
    return r;
}

static void pend_clear(job *j, lane *ln)
{
    j->pending_items -= ln->pending_items;
    ln->pending_items = 0;
    ln->pend_len = 0;
    ln->pend_head = 0;
}

/* ---- accepted chunks ------------------------------------------------------------------------------ */

/* Chunk ids are handed out in sequence, so the newest accepted chunks fill
 * a ring indexed by chunk id: an answer to a repeated completion costs one
 * indexed load, and a job that runs for ever keeps at most accepted_window
 * entries. The array grows by doubling while the chunk ids fit in it, so
 * an entry never moves: its index is chunk % done_cap either way. Where
 * two chunk ids share a slot the newer stays, whatever the order they
 * arrive in (a straggler, or a journal replayed in any order). */
static void done_set(const sc_ledger *l, job *j, uint64_t chunk, const uint8_t token[16], uint64_t hash)
{
    size_t window = l->cfg.accepted_window;
    if (chunk >= j->done_cap && j->done_cap < window) {
        size_t ncap = j->done_cap ? j->done_cap : 64;
        while (ncap <= chunk && ncap < window)
            ncap *= 2;
        if (ncap > window)
            ncap = window;
        j->done = sf_reallocarray(j->done, ncap, sizeof *j->done);
        memset(j->done + j->done_cap, 0, (ncap - j->done_cap) * sizeof *j->done);
        j->done_cap = ncap;
    }
    done_entry *e = &j->done[chunk % j->done_cap];
    if (e->hash != 0 && e->chunk > chunk)
        return; /* older than the window: a resend of it is stale */
    e->chunk = chunk;
    memcpy(e->token, token, 16);
    e->hash = hash | 1;
}

static const done_entry *done_get(const job *j, uint64_t chunk, const uint8_t token[16])
{
    if (j->done_cap == 0)
        return NULL;
    const done_entry *e = &j->done[chunk % j->done_cap];
    if (e->hash == 0 || e->chunk != chunk || memcmp(e->token, token, 16) != 0)
        return NULL;
    return e;
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

int sc_result_digest(const sim_stats *out, uint32_t nout, char hex[SC_DIGEST_LEN + 1])
{
    if (nout == 0 || nout > MAX_NOUT)
        return SC_EINVAL;
    size_t cap = (size_t)nout * (4 + SIM_STATS_MAX_ENCODED), len = 0;
    unsigned char *buf = sf_malloc(cap);
    int rc = sc_result_encode(out, nout, buf, cap, &len);
    unsigned char h[crypto_hash_sha256_BYTES];
    if (rc == 0)
        crypto_hash_sha256(h, buf, len);
    free(buf);
    if (rc != 0)
        return rc;
    memcpy(hex, "sha256:", 7);
    sodium_bin2hex(hex + 7, 65, h, sizeof h);
    return 0;
}

/* Where statistic r of a result is, in words: its variant when the
 * result holds several (an `every` context's), and its output. */
static void stat_where(const job *j, uint32_t r, char *out, size_t cap)
{
    if (j->nres > j->spec.nout)
        snprintf(out, cap, "statistic %" PRIu32 " (variant %" PRIu32 ", output %" PRIu32 ")", r, r / j->spec.nout,
            r % j->spec.nout);
    else
        snprintf(out, cap, "statistic %" PRIu32 " (output %" PRIu32 ")", r, r);
}

/* How many statistics a result of j holds, in words. */
static void stat_shape(const job *j, char *out, size_t cap)
{
    if (j->nres > j->spec.nout)
        snprintf(out, cap, "%" PRIu32 " statistics (%" PRIu32 " variants x %" PRIu32 " output%s)", j->nres,
            j->nres / j->spec.nout, j->spec.nout, j->spec.nout == 1 ? "" : "s");
    else
        snprintf(out, cap, "%" PRIu32 " statistics (one per output)", j->nres);
}

/* Decodes exactly j->nres statistics; anything else is SC_EBADRESULT, with
 * what did not decode and where in *why. */
static int result_decode(const job *j, const void *buf, size_t len, sim_stats *out, sf_error *why)
{
    const unsigned char *p = buf;
    size_t off = 0;
    char at[64], shape[80];
    stat_shape(j, shape, sizeof shape);
    if (buf == NULL || len == 0)
        return sf_fail(why, SC_EBADRESULT, "the result data is empty: the chunk has %s", shape);
    for (uint32_t o = 0; o < j->nres; o++) {
        stat_where(j, o, at, sizeof at);
        if (len - off < 4)
            return sf_fail(why, SC_EBADRESULT, "the data ends at byte %zu, before the length of %s: the chunk has %s",
                len, at, shape);
        size_t n = (size_t)p[off] | (size_t)p[off + 1] << 8 | (size_t)p[off + 2] << 16 |
            (size_t)p[off + 3] << 24;
        off += 4;
        if (n > len - off)
            return sf_fail(why, SC_EBADRESULT, "%s at byte %zu claims %zu bytes, %zu are left", at, off - 4, n,
                len - off);
        int rc = sim_stats_decode(&out[o], p + off, n);
        if (rc != 0)
            return sf_fail(why, SC_EBADRESULT, "%s at byte %zu does not decode: %s", at, off - 4, sf_strerror(rc));
        off += n;
    }
    if (off != len)
        return sf_fail(why, SC_EBADRESULT, "%zu bytes left over after the chunk's %s", len - off, shape);
    return 0;
}


/* Checks a decoded result (nres statistics) against its chunk and merges it
 * into the lane, all or nothing; stat_weights also records each variant's
 * per-chunk difference from the baseline. */
static void pair_set(job *j, uint64_t chunk, uint64_t count, const sim_stats *res)
{
    uint32_t np = j->spec.variants - 1;
    if (j->npairs == j->pairs_cap) {
        size_t ncap = j->pairs_cap ? 2 * j->pairs_cap : 64;
        j->pairs = sf_reallocarray(j->pairs, ncap, sizeof *j->pairs);
        j->pair_d = sf_reallocarray(j->pair_d, ncap * np, sizeof *j->pair_d);
        j->pairs_cap = ncap;
    }
    size_t k = j->npairs++;
    j->pairs[k] = (struct pair){ chunk, count, k };
    if (j->pairs_sorted == k && (k == 0 || j->pairs[k - 1].chunk < chunk))
        j->pairs_sorted++; /* arrived in order, as chunks mostly do */
    double base = sim_stats_mean(&res[0]);
    for (uint32_t v = 1; v <= np; v++)
        j->pair_d[k * np + v - 1] = sim_stats_mean(&res[v * j->spec.nout]) - base;
}

static int cmp_pair(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    return x->chunk < y->chunk ? -1 : x->chunk > y->chunk;
}

/* Standard error of variant v's mean difference from the baseline, from the
 * per-chunk paired differences (batch means, weighted by chunk size). Sums
 * run in chunk-id order, so the answer does not depend on the order the
 * chunks arrived or were replayed in. */
static double pair_se(job *j, uint32_t v)
{
    uint32_t np = j->spec.variants - 1;
    if (j->pairs_sorted < j->npairs) {
        qsort(j->pairs, j->npairs, sizeof *j->pairs, cmp_pair);
        j->pairs_sorted = j->npairs;
    }
    double n = 0, sum = 0, k = (double)j->npairs;
    if (j->npairs < 2)
        return NAN;
    for (size_t c = 0; c < j->npairs; c++) {
        n += (double)j->pairs[c].count;
        sum += (double)j->pairs[c].count * j->pair_d[j->pairs[c].at * np + v - 1];
    }
    double mean = sum / n, acc = 0;
    for (size_t c = 0; c < j->npairs; c++) {
        double dev = (double)j->pairs[c].count * (j->pair_d[j->pairs[c].at * np + v - 1] - mean);
        acc += dev * dev;
    }
    return sqrt(acc * k / (k - 1)) / n;
}

/* Decodes result bytes into res (nres statistics) and checks them against
 * a chunk of `count` items: each variant's output 0 holds count x
 * samples_per_item values, and every statistic has its output's layout.
 * A refusal's words, saying which check failed, go to *why (may be NULL). */
int sc__result_check(const job *j, const void *buf, size_t len, uint64_t count, sim_stats *res, sf_error *why)
{
    sim_stats empty;
    uint32_t nout = j->spec.nout;
    uint64_t want = count * j->spec.samples_per_item;
    char at[64];
    int rc = result_decode(j, buf, len, res, why);
    if (rc != 0)
        return rc;
    for (uint32_t r = 0; r < j->nres; r += nout)
        if (sim_stats_count(&res[r]) != want) {
            stat_where(j, r, at, sizeof at);
            return sf_fail(why, SC_EBADRESULT, "%s counts %" PRIu64 " values, a chunk of %" PRIu64 " items makes %"
                PRIu64, at, sim_stats_count(&res[r]), count, want);
        }
    for (uint32_t r = 0; r < j->nres; r++) {
        sim_stats_init(&empty, &j->layouts[r % nout]);
        if (sim_stats_merge(&empty, &res[r]) != 0) {
            stat_where(j, r, at, sizeof at);
            return sf_fail(why, SC_EBADRESULT, "%s has another layout (fixed-point step or histogram range) than "
                "the work context gives its output", at);
        }
    }
    return 0;
}

/* Merges a checked result (result_check) into the lane. */
static void merge_result(job *j, lane *ln, uint64_t chunk, const sim_stats *res, uint64_t count)
{
    for (uint32_t r = 0; r < j->nres; r++)
        sim_stats_merge(&ln->agg[r], &res[r]); /* cannot fail: the layouts are checked */
    if (j->spec.strategy == SC_STAT_WEIGHTS)
        pair_set(j, chunk, count, res);
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
                l->levels = sf_reallocarray(l->levels, ncap, sizeof *l->levels);
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
                lv->owners = sf_reallocarray(lv->owners, ncap, sizeof *lv->owners);
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
            o->jobs = sf_reallocarray(o->jobs, o->cap, sizeof *o->jobs);
        }
        o->jobs[o->njobs++] = j;
    }
    l->rr_dirty = false;
}

static int check_spec(const sc_job_spec *s)
{
    if (s == NULL || s->items == 0 || s->nout == 0 || s->nout > MAX_NOUT || s->layouts == NULL ||
        s->precision < 0 || s->precision != s->precision)
        return SC_EINVAL;
    if (s->items > (UINT64_MAX >> 2))
        return SC_ETOOBIG;
    switch (s->strategy) {
    case SC_SINGLE:
        return 0;
    case SC_STAT_WEIGHTS:
        if (s->variants < 2 || s->steps == NULL || (uint64_t)s->variants * s->nout > MAX_RES)
            return SC_EINVAL;
        for (uint32_t v = 1; v < s->variants; v++)
            if (!(s->steps[v - 1] != 0) || s->steps[v - 1] != s->steps[v - 1])
                return SC_EINVAL; /* a zero or NaN step has no finite difference */
        return 0;
    case SC_TOURNAMENT:
        if (s->variants < 2 || s->variants > MAX_LANES || s->z < 0 || s->z != s->z)
            return SC_EINVAL;
        return 0;
    }
    return SC_EINVAL;
}

static int job_new(sc_ledger *l, const sc_job_spec *spec, job **out)
{
    int rc = check_spec(spec);
    if (rc != 0)
        return rc;
    if (sc__job_find(l, spec->id) != NULL)
        return SC_EEXISTS;
    job *j = sf_calloc(1, sizeof *j);
    j->spec = *spec;
    if (j->spec.tiers == 0)
        j->spec.tiers = SC_TIER_ANY;
    if (j->spec.samples_per_item == 0)
        j->spec.samples_per_item = 1;
    j->layouts = sf_calloc(spec->nout, sizeof *j->layouts);
    memcpy(j->layouts, spec->layouts, spec->nout * sizeof *j->layouts);
    j->spec.layouts = j->layouts;
    j->spec.steps = NULL;
    j->nlanes = 1;
    j->nres = spec->nout;
    if (spec->strategy == SC_STAT_WEIGHTS) {
        j->nres = spec->variants * spec->nout;
        j->steps = sf_calloc(spec->variants - 1, sizeof *j->steps);
        memcpy(j->steps, spec->steps, (spec->variants - 1) * sizeof *j->steps);
        j->spec.steps = j->steps;
    } else if (spec->strategy == SC_TOURNAMENT) {
        j->nlanes = spec->variants;
        if (j->spec.phase_items == 0)
            j->spec.phase_items = 1000;
        if (j->spec.growth < 2)
            j->spec.growth = 4;
        if (j->spec.z == 0)
            j->spec.z = 1.96;
    } else {
        j->spec.variants = 1;
    }
    j->lanes = sf_calloc(j->nlanes, sizeof *j->lanes);
    for (uint32_t i = 0; i < j->nlanes; i++) {
        j->lanes[i].agg = sf_calloc(j->nres, sizeof *j->lanes[i].agg);
        for (uint32_t r = 0; r < j->nres; r++)
            sim_stats_init(&j->lanes[i].agg[r], &j->layouts[r % spec->nout]);
    }
    j->alive = j->nlanes;
    j->state = SC_JOB_RUNNING;
    l->rr_dirty = true;
    if (l->njobs == l->jobs_cap) {
        l->jobs_cap = l->jobs_cap ? l->jobs_cap * 2 : 16;
        l->jobs = sf_reallocarray(l->jobs, l->jobs_cap, sizeof *l->jobs);
    }
    l->jobs[l->njobs++] = j;
    *out = j;
    return 0;
}

/* The first budget: everything, or a tournament's first phase. */
static uint64_t first_budget(const job *j)
{
    if (j->spec.strategy != SC_TOURNAMENT || j->spec.phase_items >= j->spec.items)
        return j->spec.items;
    return j->spec.phase_items;
}

/* A tournament's budget after `budget`: growth times as many items, at
 * most all of them. */
static uint64_t next_budget(const job *j, uint64_t budget)
{
    uint64_t next = budget * j->spec.growth;
    if (next > j->spec.items || next / j->spec.growth != budget)
        next = j->spec.items;
    return next;
}

/* ---- records held for later phases ------------------------------------------------------------- */

static void ahead_drop(lane *ln)
{
    if (ln->ahead_owned) {
        for (size_t i = 0; i < ln->nahead; i++)
            free((void *)ln->ahead[i]);
        free(ln->ahead);
    }
    ln->ahead = NULL;
    ln->nahead = ln->ahead_at = 0;
    ln->ahead_owned = false;
}

/* Copies the records the lane still holds (they point into the caller's
 * journal during sc_job_restore) into blocks of its own. */
static void ahead_keep(lane *ln)
{
    size_t n = ln->nahead - ln->ahead_at;
    const sc_record **own = sf_calloc(n, sizeof *own);
    for (size_t i = 0; i < n; i++) {
        const sc_record *r = ln->ahead[ln->ahead_at + i];
        sc_record *c = sf_calloc(1, sizeof *c + r->result_len);
        *c = *r;
        if (r->result_len > 0) {
            memcpy(c + 1, r->result, r->result_len);
            c->result = c + 1;
        }
        own[i] = c;
    }
    ahead_drop(ln);
    ln->ahead = own;
    ln->nahead = n;
    ln->ahead_owned = true;
}

/* Applies an ACCEPT or CHUNK_FAILED record that sc_job_restore checked. */
static void apply(sc_ledger *l, job *j, lane *ln, const sc_record *r)
{
    static _Thread_local sim_stats res[MAX_RES];
    if (r->type == SC_REC_CHUNK_FAILED) {
        ln->failed_items += r->count;
        j->failed_items += r->count;
        j->chunks_failed++;
        return;
    }
    result_decode(j, r->result, r->result_len, res, NULL); /* checked: it decodes */
    merge_result(j, ln, r->chunk, res, r->count);
    done_set(l, j, r->chunk, r->token, bytes_hash(r->result, r->result_len));
    ln->done_items += r->count;
    j->done_items += r->count;
    j->chunks_accepted++;
    if (r->node != 0)
        *sc__contrib_map_put(&j->contrib, r->node, NULL) += r->count;
    if (sc__restore_verified(j, r->variant, r->first)) {
        j->verified_items += r->count;
        j->checks_passed++;
    } else if (r->check) {
        sc__check_restore(j, r);
    } else if (r->tier & j->spec.trusted_tiers) {
        j->trusted_items += r->count;
    }
}

/* Opens items [ln->budget, budget) of a lane. The records it holds for
 * them (a restore's) are applied, and the rest is pending. */
static void open_to(sc_ledger *l, job *j, lane *ln, uint64_t budget)
{
    uint64_t at = ln->budget; /* items below this are settled */
    for (; ln->ahead_at < ln->nahead && ln->ahead[ln->ahead_at]->first < budget; ln->ahead_at++) {
        const sc_record *r = ln->ahead[ln->ahead_at];
        /* sc_job_restore kept no overlaps, and no record crosses the end
         * of a phase: r lies in [at, budget) */
        if (r->first > at)
            pend_push_back(j, ln, (range){ .first = at, .count = r->first - at });
        apply(l, j, ln, r);
        at = r->first + r->count;
    }
    if (budget > at)
        pend_push_back(j, ln, (range){ .first = at, .count = budget - at });
    ln->budget = budget;
    if (ln->nahead > 0 && ln->ahead_at == ln->nahead)
        ahead_drop(ln);
}

int sc_job_add(sc_ledger *l, const sc_job_spec *spec)
{
    job *j;
    int rc = job_new(l, spec, &j);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < j->nlanes; i++)
        open_to(l, j, &j->lanes[i], first_budget(j));
    return 0;
}

/* Drops the live claims of j (of one lane, or all when lane < 0): they
 * become stale and their ranges go back to pending. O(claims): only when a
 * job ends or a candidate drops out. */
static void drop_claims(sc_ledger *l, job *j, int lane_only)
{
    for (uint32_t i = 0; i < l->claims_cap && j->inflight_claims + j->check_claims > 0; i++) {
        claim *c = &l->claims[i];
        if (c->job == j && (lane_only < 0 || c->lane == (uint32_t)lane_only)) {
            range r = range_of(c);
            lane *ln = &j->lanes[c->lane];
            bool is_check = c->check != 0;
            if (is_check)
                sc__check_lost(j, c);
            sc__claim_drop(l, i);
            if (!is_check)
                pend_push_back(j, ln, r);
        }
    }
}

static void job_end(sc_ledger *l, job *j, sc_job_state state)
{
    j->state = state;
    l->rr_dirty = true;
    drop_claims(l, j, -1);
    sc_record r = { .type = SC_REC_JOB_END, .job = j->spec.id, .state = state };
    sc__journal(l, &r);
}

static double lane_mean(const job *j, const lane *ln)
{
    (void)j;
    return sim_stats_mean(&ln->agg[0]);
}

static double lane_se(const lane *ln)
{
    double se = sim_stats_stderr(&ln->agg[0]);
    return se == se ? se : 1e300; /* too few values: no confidence at all */
}

/* True when a is better than b for this tournament. */
static bool beats(const job *j, double a, double b)
{
    return j->spec.minimize ? a < b : a > b;
}

/* A lane with nothing done (its chunks failed) has no mean, NaN: it ranks
 * below every lane that has one. */
static int cmp_lane_mean(const void *a, const void *b, const job *j)
{
    double x = lane_mean(j, *(lane *const *)a), y = lane_mean(j, *(lane *const *)b);
    bool xnone = x != x, ynone = y != y;
    if (xnone != ynone)
        return xnone ? 1 : -1;
    if (x == y || xnone)
        return *(lane *const *)a < *(lane *const *)b ? -1 : 1; /* stable by index */
    return beats(j, x, y) ? -1 : 1;
}

/* A tournament phase is over: drop the dominated and those past `keep`.
 * Deterministic in the aggregates, so a restore replays it exactly. */
static void eliminate(job *j)
{
    lane *order[MAX_LANES];
    uint32_t n = 0;
    for (uint32_t i = 0; i < j->nlanes; i++)
        if (j->lanes[i].dropped_after == 0)
            order[n++] = &j->lanes[i];
    if (n == 0)
        return;
    /* Insertion sort, best first: a few candidates, and qsort has no context. */
    for (uint32_t a = 1; a < n; a++)
        for (uint32_t b = a; b > 0 && cmp_lane_mean(&order[b], &order[b - 1], j) < 0; b--) {
            lane *t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    double z = j->spec.z;
    double lead = lane_mean(j, order[0]), lead_se = lane_se(order[0]);
    uint32_t phase = j->phase + 1;
    for (uint32_t k = 1; k < n; k++) {
        double m = lane_mean(j, order[k]), se = lane_se(order[k]);
        bool dominated = m != m || /* nothing done: nothing to go on */
            (j->spec.minimize ? m - z * se > lead + z * lead_se : m + z * se < lead - z * lead_se);
        bool past_keep = j->spec.keep > 0 && k >= j->spec.keep;
        if (dominated || past_keep) {
            order[k]->dropped_after = phase;
            j->alive--;
        }
    }
    j->phase = phase;
}

/* Ends a tournament phase whose survivors have all run `budget` items:
 * eliminates, journals, and either ends the job (returns 0) or returns the
 * next budget. */
static uint64_t phase_end(sc_ledger *l, job *j, uint64_t budget)
{
    eliminate(j);
    for (uint32_t i = 0; i < j->nlanes; i++) {
        lane *ln = &j->lanes[i];
        if (ln->dropped_after == j->phase) {
            pend_clear(j, ln); /* nothing in flight: the phase is over */
            ahead_drop(ln);    /* records of its later phases do not count */
        }
    }
    sc_record r = { .type = SC_REC_PHASE, .job = j->spec.id, .phase = j->phase, .alive = j->alive };
    sc__journal(l, &r);
    bool any_done = false;
    for (uint32_t i = 0; i < j->nlanes; i++)
        any_done |= j->lanes[i].dropped_after == 0 && j->lanes[i].done_items > 0;
    if (!any_done) { /* every item of every survivor failed: no result to give */
        job_end(l, j, SC_JOB_FAILED);
        return 0;
    }
    if (j->alive == 1 || budget >= j->spec.items) {
        job_end(l, j, SC_JOB_COMPLETE);
        return 0;
    }
    return next_budget(j, budget);
}

/* Ends a tournament phase when every survivor has run its budget, and opens
 * the next; again while a phase is over as it opens (a restore may hold
 * its records already). Returns true when that ended the job. */
static bool phase_check(sc_ledger *l, job *j)
{
    if (j->spec.strategy != SC_TOURNAMENT)
        return false;
    while (j->state == SC_JOB_RUNNING && !j->tainted) {
        uint64_t budget = 0;
        /* A phase ends once its checks are decided: who survives it
         * rests on results a check could still take away. */
        for (size_t i = 0; i < j->nchecks; i++)
            if (j->lanes[j->checks[i].lane].dropped_after == 0)
                return false;
        for (uint32_t i = 0; i < j->nlanes; i++) {
            lane *ln = &j->lanes[i];
            if (ln->dropped_after != 0)
                continue;
            if (ln->pending_items != 0 || ln->inflight_items != 0)
                return false;
            budget = ln->budget;
        }
        uint64_t next = phase_end(l, j, budget);
        if (next == 0)
            return true;
        for (uint32_t i = 0; i < j->nlanes; i++)
            if (j->lanes[i].dropped_after == 0)
                open_to(l, j, &j->lanes[i], next);
    }
    return false;
}

/* Ends j when nothing is left to do, or its precision target is met.
 * Returns true when j ended now. */
static bool check_end(sc_ledger *l, job *j)
{
    if (j->state != SC_JOB_RUNNING || j->tainted)
        return false;
    if (j->spec.strategy == SC_TOURNAMENT)
        return phase_check(l, j);
    lane *ln = &j->lanes[0];
    if (ln->done_items == j->spec.items) {
        if (j->nchecks > 0)
            return false; /* complete once every check is decided */
        job_end(l, j, SC_JOB_COMPLETE);
        return true;
    }
    if (ln->pending_items == 0 && ln->inflight_items == 0) {
        job_end(l, j, SC_JOB_FAILED); /* what is not done has failed */
        return true;
    }
    if (j->spec.precision > 0 && j->nchecks == 0 && sim_stats_count(&ln->agg[0]) >= 2) {
        double half = 1.96 * sim_stats_stderr(&ln->agg[0]);
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
    job *j = sc__job_find(l, id);
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
        drop_claims(l, j, -1);
        l->ntainted -= j->tainted;
        job_free(j);
        l->jobs[i] = l->jobs[--l->njobs];
        l->rr_dirty = true;
        return 0;
    }
    return SC_ENOJOB;
}

/* The lane a tournament reports as its result: the best survivor. */
static const lane *leader(const job *j)
{
    const lane *best = NULL;
    for (uint32_t i = 0; i < j->nlanes; i++) {
        const lane *ln = &j->lanes[i];
        if (ln->dropped_after == 0 && (best == NULL || beats(j, lane_mean(j, ln), lane_mean(j, best))))
            best = ln;
    }
    return best != NULL ? best : &j->lanes[0];
}

int sc_job_status_get(sc_ledger *l, uint64_t id, sc_job_status *out)
{
    job *j = sc__job_find(l, id);
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
        .records_skipped = j->records_skipped,
        .aggregate = leader(j)->agg,
        .nout = j->spec.nout,
        .variants = j->spec.variants,
        .alive = j->alive,
        .phase = j->phase,
        .verified_items = j->verified_items,
        .trusted_items = j->trusted_items,
        .checks_passed = j->checks_passed,
        .checks_failed = j->checks_failed,
        .checks_waiting = j->nchecks,
        .checks_abandoned = j->checks_abandoned,
        .retracted_items = j->retracted_items,
        .quarantined = j->nquarantined,
        .quarantined_ids = j->quarantined,
    };
    return 0;
}

uint64_t sc_job_items_left(sc_ledger *l, uint64_t id)
{
    job *j = sc__job_find(l, id);
    if (j == NULL)
        return 0;
    uint64_t items = j->spec.items, left = 0;
    if (j->spec.strategy != SC_TOURNAMENT)
        return items - (j->done_items < items ? j->done_items : items);
    for (uint32_t i = 0; i < j->nlanes; i++) {
        const lane *ln = &j->lanes[i];
        if (ln->dropped_after == 0 && ln->done_items < items)
            left += items - ln->done_items;
    }
    return left;
}

int sc_variant_status_get(sc_ledger *l, uint64_t id, uint32_t v, sc_variant_status *out)
{
    job *j = sc__job_find(l, id);
    if (j == NULL)
        return SC_ENOJOB;
    if (v >= j->spec.variants)
        return SC_EINVAL;
    memset(out, 0, sizeof *out);
    if (j->spec.strategy == SC_STAT_WEIGHTS) {
        const lane *ln = &j->lanes[0];
        const sim_stats *s = &ln->agg[v * j->spec.nout];
        out->alive = true;
        out->done_items = ln->done_items;
        out->mean = sim_stats_mean(s);
        out->stderr_ = sim_stats_stderr(s);
        if (v > 0) {
            double h = j->steps[v - 1];
            out->weight = (out->mean - sim_stats_mean(&ln->agg[0])) / h;
            out->weight_se = pair_se(j, v) / (h < 0 ? -h : h);
        }
        return 0;
    }
    const lane *ln = &j->lanes[j->spec.strategy == SC_TOURNAMENT ? v : 0];
    out->alive = ln->dropped_after == 0;
    out->dropped_after = ln->dropped_after;
    out->done_items = ln->done_items;
    out->mean = lane_mean(j, ln);
    out->stderr_ = sim_stats_stderr(&ln->agg[0]);
    /* Rank: survivors first by mean, then the dropped by how long they
     * lasted, each group by mean (the order eliminate sorts in). */
    out->rank = 1;
    for (uint32_t i = 0; i < j->nlanes; i++) {
        const lane *o = &j->lanes[i];
        if (o == ln)
            continue;
        bool o_longer = (o->dropped_after == 0 ? UINT32_MAX : o->dropped_after) >
            (ln->dropped_after == 0 ? UINT32_MAX : ln->dropped_after);
        bool same = o->dropped_after == ln->dropped_after;
        if (o_longer || (same && cmp_lane_mean(&o, &ln, j) < 0))
            out->rank++;
    }
    return 0;
}

void sc_job_ranges(sc_ledger *l, uint64_t id, void (*fn)(void *, uint32_t, uint64_t, uint64_t, bool), void *ctx)
{
    job *j = sc__job_find(l, id);
    if (j == NULL)
        return;
    for (uint32_t v = 0; v < j->nlanes; v++) {
        lane *ln = &j->lanes[v];
        for (size_t i = 0; i < ln->pend_len; i++) {
            const range *r = &ln->pend[(ln->pend_head + i) % ln->pend_cap];
            fn(ctx, v, r->first, r->count, false);
        }
    }
    for (uint32_t i = 0; i < l->claims_cap; i++)
        if (l->claims[i].job == j)
            fn(ctx, l->claims[i].lane, l->claims[i].first, l->claims[i].count, true);
}

/* ---- claiming ------------------------------------------------------------------------------------------ */

/* The lane with pending items for node n, in turn (a tournament's
 * candidates advance together), or -1. */
static int lane_for(job *j, const sc_node_info *n, bool take_turn)
{
    for (uint32_t k = 0; k < j->nlanes; k++) {
        uint32_t i = (j->lane_cursor + k) % j->nlanes;
        if (j->lanes[i].pending_items > 0 && pend_for(&j->lanes[i], n->id) >= 0) {
            if (take_turn)
                j->lane_cursor = i + 1;
            return (int)i;
        }
    }
    return -1;
}

static bool eligible(job *j, const sc_node_info *n)
{
    if (j->state != SC_JOB_RUNNING || j->tainted || (j->pending_items == 0 && j->nchecks == 0) ||
        !(j->spec.tiers & n->tier) || (j->spec.backends != 0 && !(j->spec.backends & n->backends)) ||
        j->spec.mem_bytes > n->mem_bytes)
        return false;
    return sc__check_for(j, n) != NULL || (j->pending_items > 0 && lane_for(j, n, false) >= 0);
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


/* A live claim of range [first, first + count) of a lane for node: its
 * token, chunk id, lease and hold limit, in every index. */
static uint32_t claim_new(sc_ledger *l, job *j, uint32_t li, const sc_node_info *node, uint64_t first,
    uint64_t count, uint64_t now_ms)
{
    uint32_t idx = sc__claim_alloc(l);
    claim *c = &l->claims[idx];
    uint32_t per_item = j->spec.strategy == SC_STAT_WEIGHTS ? j->spec.variants : 1;
    l->cfg.random(l->cfg.random_ctx, c->token, sizeof c->token);
    c->job = j;
    c->lane = (uint16_t)li;
    c->node = node->id;
    c->owner = node->owner;
    c->addr = node->addr;
    c->tier = node->tier;
    c->check = 0;
    c->session = node->session;
    c->chunk = ++j->next_chunk;
    c->first = first;
    c->count = count;
    c->attempt = 0;
    c->nlosers = 0;
    c->proven = node->items_per_s > 0;
    double expect_ms = node->items_per_s > 0 ? (double)count * per_item * 1000.0 / node->items_per_s : 0;
    uint64_t lease = (uint64_t)(3 * expect_ms);
    if (lease < l->cfg.min_lease_ms)
        lease = l->cfg.min_lease_ms;
    c->lease_ms = lease > UINT32_MAX ? UINT32_MAX : (uint32_t)lease;
    c->lease_until = now_ms + c->lease_ms;
    uint64_t hold = l->cfg.max_hold_ms > 2 * (uint64_t)c->lease_ms ? l->cfg.max_hold_ms : 2 * (uint64_t)c->lease_ms;
    c->hold_until = now_ms + hold;
    tok_insert_raw(l, idx);
    wheel_insert(l, idx);
    node_link(l, idx);
    return idx;
}

static sc_claim_out claim_out(const claim *c)
{
    sc_claim_out o = {
        .job = c->job->spec.id, .chunk = c->chunk,
        .variant = c->job->spec.strategy == SC_TOURNAMENT ? c->lane : 0,
        .first = c->first, .count = c->count, .lease_until = c->lease_until, .attempt = c->attempt,
    };
    memcpy(o.token, c->token, 16);
    return o;
}

/* A claim that computes check chk again: to its node, ordinary work. */
static sc_claim_out check_claim(sc_ledger *l, job *j, check *chk, const sc_node_info *node, uint64_t now_ms)
{
    uint32_t idx = claim_new(l, j, chk->lane, node, chk->first, chk->count, now_ms);
    claim *c = &l->claims[idx];
    c->check = chk->id;
    chk->inflight = true;
    j->check_claims++;
    return claim_out(c);
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
    sc_node_trust *t = sc__trust(l, node);
    if (t->quarantined)
        return 0;
    uint64_t size = chunk_size(l, node);
    for (unsigned s = 0; s < slots; s++) {
        job *best = pick(l, node);
        if (best == NULL)
            break;
        check *chk = sc__check_for(best, node);
        if (chk != NULL) {
            out[s] = check_claim(l, best, chk, node, now_ms);
            (*n)++;
            continue;
        }
        uint32_t li = (uint32_t)lane_for(best, node, true); /* eligible: one has work for it */
        lane *ln = &best->lanes[li];
        /* stat_weights computes every variant per item: a chunk of the same
         * duration has fewer items. */
        uint32_t per_item = best->spec.strategy == SC_STAT_WEIGHTS ? best->spec.variants : 1;
        uint64_t want = size / per_item ? size / per_item : 1;
        /* Factoring (guided self-scheduling) for single runs: a chunk is
         * at most half the remainder shared among the claims that will run
         * it, so near a job's end the workers finish together instead of
         * one of them running a long last chunk while the others wait. */
        if (best->spec.strategy == SC_SINGLE) {
            uint64_t share = ln->pending_items / (2 * ((uint64_t)best->inflight_claims + (slots - s)));
            if (share < l->cfg.min_chunk)
                share = l->cfg.min_chunk;
            if (want > share)
                want = share;
        }
        /* stat_weights' standard errors are batch means over its chunks:
         * with a handful of chunks they can be off by half, so a job has
         * SW_BATCHES of them at least (chunks of min_chunk allowing). */
        if (best->spec.strategy == SC_STAT_WEIGHTS) {
            uint64_t most = best->spec.items / SW_BATCHES;
            if (most < l->cfg.min_chunk)
                most = l->cfg.min_chunk;
            if (want > most)
                want = most;
        }
        range r = pend_take(best, ln, (size_t)pend_for(ln, node->id), want);
        uint32_t idx = claim_new(l, best, li, node, r.first, r.count, now_ms);
        claim *c = &l->claims[idx];
        c->attempt = r.attempt;
        memcpy(c->losers, r.losers, sizeof c->losers);
        c->nlosers = r.nlosers;
        ln->inflight_items += r.count;
        best->inflight_items += r.count;
        best->inflight_claims++;
        out[s] = claim_out(c);
        (*n)++;
    }
    return 0;
}

/* ---- completing ---------------------------------------------------------------------------------------- */

int sc_complete(sc_ledger *l, uint64_t job_id, uint64_t chunk, const uint8_t token[16], uint64_t node,
    const void *result, size_t len, uint64_t now_ms, sc_outcome *outcome, bool *job_complete, sf_error *why)
{
    static _Thread_local sim_stats res[MAX_RES];
    (void)now_ms;
    if (l == NULL || token == NULL || outcome == NULL)
        return SC_EINVAL;
    if (job_complete != NULL)
        *job_complete = false;

    uint32_t idx = tok_find(l, token, NULL);
    if (idx != NONE) {
        claim *c = &l->claims[idx];
        job *j = c->job;
        lane *ln = &j->lanes[c->lane];
        if (j->spec.id != job_id || c->chunk != chunk || c->node != node) {
            *outcome = SC_STALE; /* another node's token, or the wrong job or chunk */
            return 0;
        }
        int rc = sc__result_check(j, result, len, c->count, res, why);
        if (rc != 0) {
            sc__count_malformed(l, j, node, now_ms);
            return rc; /* the claim stays live: the node may send a good one */
        }
        if (c->check != 0) {
            claim copy = *c;
            sc__claim_drop(l, idx);
            *outcome = sc__check_answer(l, j, &copy, result, len);
            bool ended = check_end(l, j); /* it may have waited for this check */
            if (job_complete != NULL)
                *job_complete = ended && j->state == SC_JOB_COMPLETE;
            return 0;
        }
        merge_result(j, ln, c->chunk, res, c->count);
        done_set(l, j, c->chunk, token, bytes_hash(result, len));
        sc_record rec = {
            .type = SC_REC_ACCEPT, .job = j->spec.id, .variant = c->lane, .chunk = c->chunk,
            .first = c->first, .count = c->count, .result = result, .result_len = len, .node = node,
            .owner = c->owner, .tier = c->tier,
        };
        memcpy(rec.token, token, 16);
        ln->done_items += c->count;
        j->done_items += c->count;
        j->chunks_accepted++;
        *sc__contrib_map_put(&j->contrib, node, NULL) += c->count;
        rec.check = sc__verify_accepted(l, j, c, res, result, len);
        sc__claim_drop(l, idx);
        sc__journal(l, &rec);
        *outcome = SC_ACCEPTED;
        bool ended = check_end(l, j);
        if (job_complete != NULL)
            *job_complete = ended && j->state == SC_JOB_COMPLETE;
        return 0;
    }

    job *j = sc__job_find(l, job_id);
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
        if (c->lease_until >= c->hold_until)
            continue; /* held as long as a claim may be: it runs out */
        wheel_remove(l, idx);
        c->lease_until = now_ms + c->lease_ms;
        if (c->lease_until > c->hold_until)
            c->lease_until = c->hold_until;
        wheel_insert(l, idx);
        renewed++;
    }
    return renewed;
}

/* Takes a lost claim back: its range returns to its lane, or fails. A
 * lease that ran out is an attempt, and fails the chunk at max_attempts; a
 * node that went away (a network cut as often as a crash) is one only if
 * the node had completed work before, and fails it at max_releases. So a
 * flaky network does not fail a job, nor do nodes that enrol only to drop
 * their claims, while a chunk that kills every working node it reaches
 * still ends. */
static void lose_claim(sc_ledger *l, uint32_t idx, bool node_gone)
{
    claim *c = &l->claims[idx];
    job *j = c->job;
    uint32_t li = c->lane;
    lane *ln = &j->lanes[li];
    if (c->check != 0) { /* a check's range is done: the check waits for another node */
        sc__check_lost(j, c);
        sc__claim_drop(l, idx);
        j->reclaims++;
        l->released += node_gone;
        return;
    }
    /* One attempt per node: a node that lost the range before is not
     * handed it again, so no node alone can fail a chunk. */
    range r = range_of(c);
    if (!lost_by(&r, c->node)) {
        if (!(node_gone && !c->proven))
            r.attempt++;
        r.losers[r.nlosers % MAX_LOSERS] = c->node;
        r.nlosers++;
    }
    sc__claim_drop(l, idx);
    j->reclaims++;
    l->released += node_gone;
    if (r.attempt >= (node_gone ? l->cfg.max_releases : l->cfg.max_attempts)) {
        ln->failed_items += r.count;
        j->failed_items += r.count;
        j->chunks_failed++;
        sc_record rec = { .type = SC_REC_CHUNK_FAILED, .job = j->spec.id, .variant = li,
            .first = r.first, .count = r.count };
        sc__journal(l, &rec);
        check_end(l, j);
    } else {
        sc__pend_push_front(j, ln, r);
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
                    l->scratch = sf_reallocarray(l->scratch, l->scratch_cap, sizeof *l->scratch);
                }
                l->scratch[n++] = idx;
            }
        }
        /* No claim is allocated below, so a slot still live is the same claim. */
        for (size_t i = 0; i < n; i++) {
            if (l->claims[l->scratch[i]].job != NULL) {
                lose_claim(l, l->scratch[i], false);
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
        else if (j->nchecks > 0 && sc__checks_expire(l, j, now_ms) > 0)
            check_end(l, j); /* it may have waited for them */
    }
    return expired;
}

size_t sc_give_back(sc_ledger *l, uint64_t node, const uint8_t (*tokens)[16], size_t n, uint64_t now_ms)
{
    (void)now_ms;
    size_t given = 0;
    for (size_t i = 0; i < n; i++) {
        /* looked up one by one: losing a claim can end its job, which
         * drops the job's other claims */
        uint32_t idx = tok_find(l, tokens[i], NULL);
        if (idx == NONE || l->claims[idx].node != node)
            continue;
        lose_claim(l, idx, false);
        given++;
    }
    l->given_back += given;
    return given;
}

size_t sc_release_node(sc_ledger *l, uint64_t node, uint64_t session, uint64_t now_ms)
{
    (void)now_ms;
    size_t n = 0;
    for (;;) {
        /* From the head each time: losing a claim can end its job, which
         * drops the job's other claims from this list too. */
        node_slot *s = node_find(l, node, false);
        uint32_t idx = s != NULL ? s->head : NONE;
        while (idx != NONE && session != 0 && l->claims[idx].session != session)
            idx = l->claims[idx].nnext;
        if (idx == NONE)
            return n;
        lose_claim(l, idx, true);
        n++;
    }
}

/* ---- restore ------------------------------------------------------------------------------------------------ */

/* By candidate, then first item; records of one range in the order given
 * (the journal's), so the same journal always restores the same way. */
static int cmp_rec(const void *a, const void *b)
{
    const sc_record *x = *(const sc_record *const *)a, *y = *(const sc_record *const *)b;
    if (x->variant != y->variant)
        return x->variant < y->variant ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* A record written twice: the store sends a batch again when it cannot
 * tell whether its commit went through, and only accepted ranges have an
 * index that keeps a second copy out. */
static bool same_record(const sc_record *a, const sc_record *b)
{
    return a->type == b->type && a->variant == b->variant && a->first == b->first && a->count == b->count &&
        (a->type != SC_REC_ACCEPT || (a->chunk == b->chunk && a->result_len == b->result_len &&
                                      memcmp(a->result, b->result, a->result_len) == 0));
}

static int cmp_node(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t sc_records_kept(const sc_record *recs, size_t n, bool (*quarantined)(void *ctx, uint64_t node), void *ctx,
    uint8_t *fate, const sc_record **kept)
{
    size_t nq = 0;
    for (size_t i = 0; i < n; i++)
        nq += recs[i].type == SC_REC_QUARANTINE;
    uint64_t *qs = NULL;
    if (nq > 0) { /* a journal names few quarantined nodes: a sorted array */
        qs = sf_calloc(nq, sizeof *qs);
        nq = 0;
        for (size_t i = 0; i < n; i++)
            if (recs[i].type == SC_REC_QUARANTINE)
                qs[nq++] = recs[i].node;
        qsort(qs, nq, sizeof *qs, cmp_node);
    }
    size_t nv = 0;
    for (size_t i = 0; i < n; i++) {
        const sc_record *r = &recs[i];
        bool retracted = r->type == SC_REC_RETRACTED;
        if (r->type == SC_REC_ACCEPT && r->node != 0)
            retracted = (nq > 0 && bsearch(&r->node, qs, nq, sizeof *qs, cmp_node) != NULL) ||
                (quarantined != NULL && quarantined(ctx, r->node));
        fate[i] = retracted ? SC_FATE_RETRACTED : SC_FATE_NONE;
        if (!retracted && (r->type == SC_REC_ACCEPT || r->type == SC_REC_CHUNK_FAILED))
            kept[nv++] = r;
    }
    free(qs);
    qsort(kept, nv, sizeof *kept, cmp_rec);
    /* A record that overlaps one kept before it is left out, and what of
     * it the kept ones do not cover stays to be computed: a copy of a
     * record (written twice) silently, another (a row the journal's index
     * could not refuse, or a different result for an accepted range)
     * counted, rather than failing the job with every result it has. */
    size_t nk = 0;
    uint64_t covered = 0; /* the end of the variant's last kept record */
    for (size_t i = 0; i < nv; i++) {
        const sc_record *r = kept[i];
        if (i == 0 || kept[i - 1]->variant != r->variant)
            covered = 0;
        if (r->first < covered) {
            /* kept[i - 1] is not overwritten yet; a copy may follow another
             * record of its range, so the last kept one is asked too */
            fate[r - recs] = same_record(kept[i - 1], r) || same_record(kept[nk - 1], r) ? SC_FATE_COPY
                                                                                          : SC_FATE_SKIPPED;
            continue;
        }
        fate[r - recs] = SC_FATE_KEPT;
        kept[nk++] = r;
        covered = r->first + r->count;
    }
    return nk;
}

static bool trust_quarantined(void *ctx, uint64_t node)
{
    const sc_node_trust *t = sc__trust_map_get(&((const sc_ledger *)ctx)->trust, node);
    return t != NULL && t->quarantined;
}

/* Whether a record's range lies within one phase: a claim is cut from one
 * phase's items (a job other than a tournament has one phase). */
static bool within_a_phase(const job *j, const sc_record *r)
{
    uint64_t end = first_budget(j);
    while (end <= r->first)
        end = next_budget(j, end); /* ends at items, past r->first */
    return r->count <= end - r->first;
}

int sc_job_restore(sc_ledger *l, const sc_job_spec *spec, const sc_record *recs, size_t n)
{
    static _Thread_local sim_stats res[MAX_RES];
    job *j;
    int rc = job_new(l, spec, &j);
    if (rc != 0)
        return rc;
    const sc_record **v = sf_calloc(n ? n : 1, sizeof *v);
    uint8_t *fate = sf_calloc(n ? n : 1, sizeof *fate);
    sc_job_state end = SC_JOB_RUNNING;

    rc = SC_EBADRECORD;
    /* Quarantines first: a quarantined node's results are left out, from
     * whichever records come before. */
    for (size_t i = 0; i < n; i++) {
        const sc_record *r = &recs[i];
        if (r->type != SC_REC_QUARANTINE)
            continue;
        if (r->job != spec->id || r->node == 0)
            goto fail;
        sc_node_quarantine(l, r->node, 0, false);
        sc__job_note_quarantined(j, r->node);
    }
    /* v: the records kept, each lane's by first item */
    size_t nv = sc_records_kept(recs, n, trust_quarantined, l, fate, v);
    size_t nverify = 0;
    for (size_t i = 0; i < n; i++)
        nverify += recs[i].type == SC_REC_VERIFY;
    j->verified_keys = sf_calloc(nverify ? nverify : 1, sizeof *j->verified_keys);
    for (size_t i = 0; i < n; i++) {
        const sc_record *r = &recs[i];
        if (r->job != spec->id)
            goto fail;
        if (r->type == SC_REC_QUARANTINE)
            continue;
        if (fate[i] == SC_FATE_RETRACTED) {
            j->retracted_items += r->count;
            continue; /* an accept's items are handed out again */
        }
        if (r->type == SC_REC_VERIFY) {
            if (r->variant >= j->nlanes || r->first >= spec->items)
                goto fail;
            j->verified_keys[j->nverified_keys][0] = r->variant;
            j->verified_keys[j->nverified_keys][1] = r->first;
            j->nverified_keys++;
            continue;
        }
        if (r->type == SC_REC_JOB_END) {
            if (r->state < SC_JOB_COMPLETE || r->state > SC_JOB_EXPIRED)
                goto fail;
            end = r->state;
            continue;
        }
        if (r->type == SC_REC_PHASE)
            continue; /* derived again below */
        if ((r->type != SC_REC_ACCEPT && r->type != SC_REC_CHUNK_FAILED) || r->count == 0 ||
            r->first >= spec->items || r->count > spec->items - r->first || r->variant >= j->nlanes ||
            !within_a_phase(j, r))
            goto fail;
        if (r->type == SC_REC_ACCEPT) {
            if (r->chunk == 0 || r->chunk > MAX_CHUNK_ID || sc__result_check(j, r->result, r->result_len, r->count, res, NULL) != 0)
                goto fail;
            if (r->chunk > j->next_chunk)
                j->next_chunk = r->chunk; /* new chunk ids continue after the old ones */
        }
        j->records_skipped += fate[i] == SC_FATE_SKIPPED;
    }
    qsort(j->verified_keys, j->nverified_keys, sizeof *j->verified_keys, sc__cmp_key);
    /* Each lane holds its records, applied as their items open: the first
     * phase now, a tournament's later ones as the phases before them end,
     * exactly as the live ledger ran them (eliminations depend only on the
     * aggregates, so they come out the same). A gap in a phase leaves it
     * running, its gap pending, and the records of the phases after it
     * held until it ends. Nothing is journaled again meanwhile. */
    for (size_t i = 0, k; i < nv; i = k) {
        lane *ln = &j->lanes[v[i]->variant];
        for (k = i; k < nv && v[k]->variant == v[i]->variant; k++)
            ;
        ln->ahead = v + i;
        ln->nahead = k - i;
    }
    l->restoring = true;
    for (uint32_t li = 0; li < j->nlanes; li++)
        open_to(l, j, &j->lanes[li], first_budget(j));
    phase_check(l, j);
    l->restoring = false;
    /* A complete end is derived again from the records rather than taken
     * from its own: a journal that lost a write of its accepts (see
     * docs/coordinator.md) would end the job with part of its result, where
     * this hands the gap out again. Other ends stop a job where it was. */
    if (end != SC_JOB_RUNNING && end != SC_JOB_COMPLETE && j->state == SC_JOB_RUNNING) {
        j->state = end;
        l->rr_dirty = true;
    } else {
        l->restoring = true; /* a restore journals nothing, this end included */
        check_end(l, j);     /* done before the crash, its end journaled or not */
        l->restoring = false;
    }
    for (uint32_t li = 0; li < j->nlanes; li++) {
        lane *ln = &j->lanes[li];
        if (ln->ahead_at < ln->nahead && j->state == SC_JOB_RUNNING && ln->dropped_after == 0)
            ahead_keep(ln); /* v goes now */
        else
            ahead_drop(ln);
    }
    free(v);
    free(fate);
    return 0;

fail:
    free(v);
    free(fate);
    sc_job_forget(l, spec->id);
    return rc;
}
