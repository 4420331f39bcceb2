/*
 * journal.c — see journal.h.
 *
 * Each column travels as one array parameter in PostgreSQL's binary form
 * (what array_recv reads): a header (one dimension, whether it holds
 * NULLs, the element type's OID, the length and lower bound), then each
 * element as a big-endian length (-1 for NULL) and its bytes: integers
 * big-endian, bytea as is. Nothing is escaped or parsed as text.
 */
#include "actors/coord/journal.h"

#include <stdlib.h>
#include <string.h>

enum { COL_JOB, COL_TYPE, COL_VARIANT, COL_CHUNK, COL_FIRST, COL_COUNT, COL_TOKEN, COL_RESULT,
       COL_PHASE, COL_STATE, COL_NODE, COL_PEER, COL_CHECKED, NCOLS };

/* pg_type OIDs of the element types. */
enum { OID_BOOL = 16, OID_BYTEA = 17, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23 };
enum { HEADER = 20 };

static const uint32_t col_oid[NCOLS] = {
    [COL_JOB] = OID_INT8, [COL_TYPE] = OID_INT2, [COL_VARIANT] = OID_INT4, [COL_CHUNK] = OID_INT8,
    [COL_FIRST] = OID_INT8, [COL_COUNT] = OID_INT8, [COL_TOKEN] = OID_BYTEA, [COL_RESULT] = OID_BYTEA,
    [COL_PHASE] = OID_INT4, [COL_STATE] = OID_INT2, [COL_NODE] = OID_INT8, [COL_PEER] = OID_INT8,
    [COL_CHECKED] = OID_BOOL,
};

/* A growing array in binary form. */
typedef struct column {
    uint8_t *p;
    size_t len, cap;
    bool nulls;
} column;

static uint8_t *reserve(column *c, size_t n)
{
    while (c->len + n > c->cap)
        c->p = sf_grow(c->p, &c->cap, 1);
    uint8_t *at = c->p + c->len;
    c->len += n;
    return at;
}

static void be(uint8_t *o, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        o[i] = (uint8_t)v;
}

/* Each element: its length, big-endian, then its bytes. */
static void put_bytes(column *c, const void *p, size_t n)
{
    uint8_t *o = reserve(c, 4 + n);
    be(o, n, 4);
    memcpy(o + 4, p, n);
}

static void put_int(column *c, int bytes, int64_t v)
{
    uint8_t *o = reserve(c, 4 + (size_t)bytes);
    be(o, (uint64_t)bytes, 4);
    be(o + 4, (uint64_t)v, bytes);
}

static void put_null(column *c)
{
    be(reserve(c, 4), UINT32_MAX, 4); /* length -1 */
    c->nulls = true;
}

cd_query *cd_journal_insert(const sc_record *recs, size_t n)
{
    if (n == 0 || n > CD_JOURNAL_MAX_ROWS)
        return NULL;
    column col[NCOLS] = { { 0 } };
    for (int i = 0; i < NCOLS; i++)
        reserve(&col[i], HEADER);
    for (size_t k = 0; k < n; k++) {
        const sc_record *r = &recs[k];
        bool ranged = r->type == SC_REC_ACCEPT || r->type == SC_REC_CHUNK_FAILED || r->type == SC_REC_VERIFY;
        put_int(&col[COL_JOB], 8, (int64_t)r->job);
        put_int(&col[COL_TYPE], 2, r->type);
        put_int(&col[COL_VARIANT], 4, r->variant);
        if (r->type == SC_REC_ACCEPT) {
            put_int(&col[COL_CHUNK], 8, (int64_t)r->chunk);
            put_bytes(&col[COL_TOKEN], r->token, 16);
            put_bytes(&col[COL_RESULT], r->result, r->result_len);
        } else {
            put_null(&col[COL_CHUNK]);
            put_null(&col[COL_TOKEN]);
            put_null(&col[COL_RESULT]);
        }
        if (ranged) {
            put_int(&col[COL_FIRST], 8, (int64_t)r->first);
            put_int(&col[COL_COUNT], 8, (int64_t)r->count);
        } else {
            put_null(&col[COL_FIRST]);
            put_null(&col[COL_COUNT]);
        }
        if (r->type == SC_REC_PHASE)
            put_int(&col[COL_PHASE], 4, r->phase);
        else
            put_null(&col[COL_PHASE]);
        if (r->type == SC_REC_JOB_END)
            put_int(&col[COL_STATE], 2, r->state);
        else
            put_null(&col[COL_STATE]);
        if (r->node != 0)
            put_int(&col[COL_NODE], 8, (int64_t)r->node);
        else
            put_null(&col[COL_NODE]);
        if (r->peer != 0)
            put_int(&col[COL_PEER], 8, (int64_t)r->peer);
        else
            put_null(&col[COL_PEER]);
        put_int(&col[COL_CHECKED], 1, r->check);
    }
    /* The rows the unique index turns away are counted only when there
     * are any (the ELSE's subquery runs only then): the statement sees
     * the journal as it was before its INSERT, so those are the rows that
     * were there, and a row the same as the one sent is a resend.
     * In the same commit: a check that passed adds to both nodes' record;
     * a quarantine marks (and revokes) the node, and reopens every job
     * that ended complete with a result of it in its journal: loaded
     * again, its restore leaves those results out and computes their
     * ranges anew (docs/verification.md). */
    cd_query *q = cd_query_new(
        "WITH r (job_id, type, variant, chunk, first_item, item_count, token, result, phase, state, node_id, "
        "peer_id, checked) AS ("
        "SELECT * FROM unnest($1::bigint[], $2::smallint[], $3::integer[], $4::bigint[], $5::bigint[], "
        "$6::bigint[], $7::bytea[], $8::bytea[], $9::integer[], $10::smallint[], $11::bigint[], $12::bigint[], "
        "$13::boolean[])), "
        "i AS (INSERT INTO journal (job_id, type, variant, chunk, first_item, item_count, token, result, phase, state, "
        "node_id, peer_id, checked) "
        "SELECT job_id, CASE WHEN type = 1 AND node_id IN (SELECT node_id FROM r WHERE type = 6) THEN 7 ELSE type END, "
        "variant, chunk, first_item, item_count, token, result, phase, state, node_id, peer_id, checked FROM r "
        "ON CONFLICT DO NOTHING RETURNING type), "
        "v AS (UPDATE nodes n SET checks_passed = n.checks_passed + c.k, streak = n.streak + c.k "
        "FROM (SELECT x AS id, count(*) AS k FROM r, LATERAL (VALUES (r.node_id), (r.peer_id)) t (x) "
        "WHERE r.type = 5 GROUP BY x) c WHERE n.id = c.id AND n.quarantined_at IS NULL), "
        "q AS (UPDATE nodes SET quarantined_at = now(), revoked_at = coalesce(revoked_at, now()), "
        "checks_failed = checks_failed + 1, streak = 0 "
        "WHERE id IN (SELECT node_id FROM r WHERE type = 6) AND quarantined_at IS NULL), "
        "o AS (UPDATE jobs SET state = 'pending' WHERE state = 'complete' AND id IN ("
        "SELECT a.job_id FROM journal a WHERE a.type = 1 AND a.node_id IN (SELECT node_id FROM r WHERE type = 6))), "
        "x AS (UPDATE journal SET type = 7 WHERE type = 1 AND node_id IN (SELECT node_id FROM r WHERE type = 6)) "
        "SELECT CASE WHEN (SELECT count(*) FROM i WHERE type = 1) = (SELECT count(*) FROM r WHERE type = 1) THEN 0 "
        "ELSE (SELECT count(*) FROM r JOIN journal j ON j.job_id = r.job_id AND j.variant = r.variant "
        "AND j.first_item = r.first_item AND j.type = 1 WHERE r.type = 1 "
        "AND (j.item_count <> r.item_count OR j.result IS DISTINCT FROM r.result)) END");
    q->group = true; /* may share a commit with other writes */
    for (int i = 0; i < NCOLS; i++) {
        column *c = &col[i];
        be(c->p, 1, 4);                 /* dimensions */
        be(c->p + 4, c->nulls, 4);
        be(c->p + 8, col_oid[i], 4);
        be(c->p + 12, n, 4);            /* elements */
        be(c->p + 16, 1, 4);            /* lower bound */
        cd_query_bytes(q, c->p, c->len);
        free(c->p);
    }
    return q;
}
