/*
 * api_jobs.c — /api/jobs (api_int.h): submit, list, one job, its
 * convergence, cancel, and what the store answers to each.
 */
#include "actors/coord/api_int.h"

#include "actors/coord/jobs.h"
#include "actors/coord/scheduler.h"
#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "sched/sched.h"
#include "sim/sim.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tiers and verify.trust as lists of names (tier_names(), sql/008). */
static const char *job_columns =
    "id, owner, name, kernel, strategy, items, seed, priority, tier_names(tiers) AS tiers, "
    "json_build_object('check_rate', check_rate, 'trust', tier_names(trusted_tiers)) AS verify, state, spec, "
    "encode(ctx_hash, 'hex') AS ctx_hash, result, created_at, started_at, finished_at";

/* The farm's speed (items/s) for the submission's kernel into *speed, 0
 * when none is known (no job of the kernel measured while nodes were
 * online), with its kernel and items. False when there is nothing to check:
 * no scheduler, a body without them, or "confirm_large": true. */
static bool submission_speed(cd__api *api, const cd__request *r, char *kernel, size_t kcap, uint64_t *items,
    double *speed)
{
    bool confirm;
    if (api->o.scheduler == NULL || !cd_job_submission_size(r->body, r->body_len, kernel, kcap, items, &confirm) ||
        confirm)
        return false;
    *speed = cd_scheduler_kernel_speed(api->o.scheduler, kernel);
    return true;
}

/* Whether the submission's size would take the farm over CD_JOB_LARGE_S
 * at its speed for the kernel, and the submission does not confirm it
 * ("confirm_large": true); with why in msg. A speed not known passes
 * (size_warning says so instead). */
static bool too_large(cd__api *api, cd__request *r, char *msg, size_t cap)
{
    char kernel[64];
    uint64_t items;
    double speed;
    if (!submission_speed(api, r, kernel, sizeof kernel, &items, &speed))
        return false;
    double secs = speed > 0 ? (double)items / speed : 0;
    if (secs <= CD_JOB_LARGE_S)
        return false;
    char took[48];
    double years = secs / (86400.0 * 365.25);
    if (secs < 86400.0 * 365)
        snprintf(took, sizeof took, "%.1f days", secs / 86400);
    else /* whole years past ten, never an exponent */
        snprintf(took, sizeof took, years < 10 ? "%.1f years" : "%.0f years", years);
    snprintf(msg, cap, "at the farm's speed for %s jobs now (%.0f items/s) this takes about %s: "
        "send \"confirm_large\": true to submit it anyway (simfarm submit --yes)", kernel, speed, took);
    return true;
}

/* A count in words: "1.1 quadrillion" for 2^50, "5 million"; "" under a
 * million, whose digits say it plainly. */
static void count_words(char *buf, size_t cap, uint64_t n)
{
    static const char *const names[] = { "thousand", "million", "billion", "trillion", "quadrillion", "quintillion" };
    double v = (double)n;
    int i = -1;
    while (v >= 999.95 && i < 5) { /* 999,950 is 1.0 million, not 1000.0 thousand */
        v /= 1000;
        i++;
    }
    buf[0] = '\0';
    if (i < 1)
        return;
    double off = v - (double)(uint64_t)(v + 0.5);
    bool whole = off > -0.05 && off < 0.05;
    snprintf(buf, cap, "%.*f %s", v < 99.95 && !whole ? 1 : 0, v, names[i]);
}

/* The answer's "warning" member (",\"warning\":\"...\"") into buf, "" for
 * none: with no speed known for the kernel nothing says how long the job
 * takes, which the refusal of a large size cannot check. "confirm_large"
 * has said that a long job is meant, and silences it. */
static void size_warning(cd__api *api, const cd__request *r, char *buf, size_t cap)
{
    char kernel[64], digits[24], grouped[32], words[48], text[320], quoted[400];
    uint64_t items;
    double speed;
    buf[0] = '\0';
    if (!submission_speed(api, r, kernel, sizeof kernel, &items, &speed) || speed > 0)
        return;
    snprintf(digits, sizeof digits, "%" PRIu64, items);
    sf_group_digits(digits, grouped, sizeof grouped);
    count_words(words, sizeof words, items);
    snprintf(text, sizeof text, "no node has reported a speed for %s jobs yet, so how long this one takes is not known: "
        "%s item%s%s%s%s", kernel, grouped, items == 1 ? "" : "s", words[0] ? " (" : "", words, words[0] ? ")" : "");
    cd_json_quote(quoted, sizeof quoted, text);
    snprintf(buf, cap, ",\"warning\":%s", quoted);
}

void cd__api_submit(cd__api *api, cd__request *r)
{
    char field[64], msg[256];
    if (r->key_bad || (r->key[0] && !cd_submission_key_ok(r->key))) {
        cd__api_fail(api, r, 400, "Idempotency-Key", "must be 1 to 128 visible ASCII characters");
        return;
    }
    cd_query *q = cd_job_submission_by(r->body, r->body_len, r->owner, r->admin, r->key[0] ? r->key : NULL, field,
        sizeof field, msg, sizeof msg);
    if (q == NULL) {
        cd__api_fail(api, r, 400, field[0] ? field : NULL, msg);
        return;
    }
    if (too_large(api, r, msg, sizeof msg)) {
        rt_msg_free(&q->hdr);
        cd__api_fail(api, r, 422, "items", msg);
        return;
    }
    cd__api_ask(api, r, q, CD__ASK_SUBMIT);
}

void cd__api_list_jobs(cd__api *api, cd__request *r)
{
    char state[32], owner[130], kernel[40], before[24];
    static const char *const states[] = { "pending", "running", "complete", "failed", "cancelled", "expired" };
    if (cd__api_arg(r, "state", state, sizeof state) != NULL && !cd__api_one_of(state, states, 6)) {
        cd__api_fail(api, r, 400, "state", "must be pending, running, complete, failed, cancelled or expired");
        return;
    }
    int64_t lim = 100;
    if (!cd__api_arg_limit(api, r, &lim))
        return;
    uint64_t bef = 0;
    if (cd__api_arg(r, "before", before, sizeof before) != NULL && (bef = cd__api_parse_id(before)) == 0) {
        cd__api_fail(api, r, 400, "before", "must be a job id");
        return;
    }
    char sql[1024];
    snprintf(sql, sizeof sql,
        "SELECT j.id, row_to_json(j)::text FROM "
        "(SELECT %s FROM jobs WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR owner = $2) "
        "AND ($3::text IS NULL OR kernel = $3) AND ($4::bigint IS NULL OR id < $4) ORDER BY id DESC LIMIT $5) j "
        "ORDER BY j.id DESC",
        job_columns);
    cd_query *q = cd_query_new(sql);
    cd_query_text(q, cd__api_arg(r, "state", state, sizeof state));
    cd_query_text(q, cd__api_arg(r, "owner", owner, sizeof owner));
    cd_query_text(q, cd__api_arg(r, "kernel", kernel, sizeof kernel));
    if (bef)
        cd_query_int(q, (int64_t)bef);
    else
        cd_query_text(q, NULL);
    cd_query_int(q, lim);
    cd__api_ask(api, r, q, CD__ASK_LIST);
}

void cd__api_one_job(cd__api *api, cd__request *r, uint64_t id)
{
    char sql[768];
    snprintf(sql, sizeof sql, "SELECT row_to_json(j)::text FROM (SELECT %s FROM jobs WHERE id = $1) j", job_columns);
    cd_query *q = cd_query_new(sql);
    cd_query_int(q, (int64_t)id);
    cd__api_ask(api, r, q, CD__ASK_ONE);
}

/* One variant's journal rows that hold items (accepts and failed chunks)
 * and the job's quarantines, in journal order, after the job's variant
 * count, the variant shown and whether each result holds every variant
 * (the job's row first, so a job without rows is one row with NULL rows
 * and no job is no row); each row with whether its node is quarantined. A
 * tournament journals each candidate in its own lane; stat_weights
 * computes every variant of a chunk at once, in lane 0. The variant is the
 * one asked for, else a finished tournament's winner (the alive candidate
 * of rank 1, as the result names it), else 0: the baseline or the only one. */
void cd__api_convergence(cd__api *api, cd__request *r, uint64_t id)
{
    char text[16];
    uint64_t variant = 0;
    bool asked = cd__api_arg(r, "variant", text, sizeof text) != NULL;
    if (asked && (((variant = cd__api_parse_id(text)) == 0 && strcmp(text, "0") != 0) || variant > INT32_MAX)) {
        cd__api_fail(api, r, 400, "variant", "must be a whole number: 0 for the baseline or the first candidate");
        return;
    }
    cd_query *q = cd_query_new(
        "SELECT v.n, v.variant, v.all_in_one, j.type, j.first_item, j.item_count, j.chunk, j.result, j.node_id, "
        "nd.quarantined_at IS NOT NULL FROM (SELECT id, "
        "strategy = 'stat_weights' AS all_in_one, "
        "CASE strategy WHEN 'tournament' THEN jsonb_array_length(spec->'candidates') "
        "WHEN 'stat_weights' THEN 1 + jsonb_array_length(spec->'weights') ELSE 1 END AS n, "
        "coalesce($2::int, (SELECT (c.i - 1)::int FROM jsonb_array_elements(result->'candidates') "
        "WITH ORDINALITY c(v, i) WHERE jsonb_typeof(result->'winner') = 'string' "
        "AND (c.v->>'alive')::boolean AND (c.v->>'rank')::int = 1 ORDER BY c.i DESC LIMIT 1), 0) AS variant "
        "FROM jobs WHERE id = $1) v "
        "LEFT JOIN journal j ON j.job_id = v.id AND (j.type = 6 OR j.type IN (1, 2) "
        "AND j.variant = CASE WHEN v.all_in_one THEN 0 ELSE v.variant END) "
        "LEFT JOIN nodes nd ON nd.id = j.node_id ORDER BY j.seq");
    cd_query_int(q, (int64_t)id);
    if (asked)
        cd_query_int(q, (int64_t)variant);
    else
        cd_query_text(q, NULL);
    cd__api_ask(api, r, q, CD__ASK_CONVERGENCE);
}

void cd__api_cancel_job(cd__api *api, cd__request *r, uint64_t id)
{
    cd_query *q = cd_query_new("SELECT owner, state FROM jobs WHERE id = $1");
    cd_query_int(q, (int64_t)id);
    cd__api_ask(api, r, q, CD__ASK_CANCEL_LOOK);
}

/* ---- answers ------------------------------------------------------------------------------------ */

void cd__api_on_cancel_look(cd__api *api, cd__request *r, PGresult *res)
{
    if (PQntuples(res) == 0) {
        cd__api_fail(api, r, 404, NULL, "no such job");
        return;
    }
    const char *owner = PQgetvalue(res, 0, 0), *state = PQgetvalue(res, 0, 1);
    if (!r->admin && strcmp(owner, r->owner) != 0) {
        cd__api_fail(api, r, 403, NULL, "this job belongs to another owner");
        return;
    }
    if (strcmp(state, "pending") != 0 && strcmp(state, "running") != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "the job has already ended (%s)", state);
        cd__api_fail(api, r, 409, NULL, msg);
        return;
    }
    cd_query *q = cd_query_new("UPDATE jobs SET state = 'cancelled', finished_at = now() "
                               "WHERE id = $1 AND state IN ('pending', 'running') RETURNING id");
    cd_query_int(q, (int64_t)cd__api_job_id(r));
    cd__api_ask(api, r, q, CD__ASK_CANCEL_DO);
}

void cd__api_on_cancel_do(cd__api *api, cd__request *r, PGresult *res)
{
    if (PQntuples(res) == 0) {
        cd__api_fail(api, r, 409, NULL, "the job has already ended");
        return;
    }
    uint64_t id = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    cd_cancel_job *c = RT_MSG_NEW(cd_cancel_job, CD_MSG_CANCEL_JOB);
    c->job = id;
    rt_send(api->o.scheduler, &c->hdr);
    cd_sessions_cancel_job(api->o.nodes, id, "cancelled"); /* the scheduler sends job.finished */
    cd__api_ok(api, r, 200, sf_fmt("{\"id\":%" PRIu64 ",\"state\":\"cancelled\"}\n", id));
}

/* A job's row (a JSON object) with ,"progress":{...} put in when the
 * events hold its latest progress. */
static void cat_job(sf_str *b, cd__api *api, uint64_t id, const char *row)
{
    const char *prog = cd_events_progress(api->o.events, id);
    size_t rl = strlen(row);
    if (prog == NULL || rl < 2)
        sf_str_cat(b, row);
    else
        sf_str_catf(b, "%.*s,\"progress\":%s}", (int)(rl - 1), row, prog);
}

void cd__api_on_list(cd__api *api, cd__request *r, PGresult *res)
{
    sf_str b = SF_STR_INIT;
    sf_str_cat(&b, "[");
    for (int i = 0; i < PQntuples(res); i++) {
        if (i > 0)
            sf_str_cat(&b, ",");
        cat_job(&b, api, strtoull(PQgetvalue(res, i, 0), NULL, 10), PQgetvalue(res, i, 1));
    }
    sf_str_cat(&b, "]\n");
    cd__api_ok(api, r, 200, sf_str_take(&b));
}

void cd__api_on_one(cd__api *api, cd__request *r, PGresult *res)
{
    if (PQntuples(res) == 0) {
        cd__api_fail(api, r, 404, NULL, "no such job");
        return;
    }
    sf_str b = SF_STR_INIT;
    cat_job(&b, api, cd__api_job_id(r), PQgetvalue(res, 0, 0));
    sf_str_cat(&b, "\n");
    cd__api_ok(api, r, 200, sf_str_take(&b));
}

/* The statistics of variant v of `variants` in one chunk's result
 * (sc_result_encode's format: per statistic a 4-byte little-endian length
 * and sim_stats_encode's bytes; variant-major, every variant's outputs,
 * when one result holds them all): how many, or -1 when the bytes are not
 * that. */
static int result_stats(const unsigned char *p, size_t len, long variants, long v, sim_stats *out)
{
    long total = 0;
    for (size_t off = 0; off < len; total++) {
        size_t k;
        if (len - off < 4 || (k = (size_t)p[off] | (size_t)p[off + 1] << 8 | (size_t)p[off + 2] << 16 |
                                  (size_t)p[off + 3] << 24) > len - off - 4)
            return -1;
        off += 4 + k;
    }
    long per = total / variants;
    if (per == 0 || per > SIM_MAX_OUT || per * variants != total)
        return -1;
    for (long i = 0; i < v * per + per; i++) {
        size_t k = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
        if (i >= v * per && sim_stats_decode(&out[i - v * per], p + 4, k) != 0)
            return -1;
        p += 4 + k;
    }
    return (int)per;
}

enum { CONV_POINTS = 256 };

enum { CV_TYPE = 3, CV_FIRST, CV_COUNT, CV_CHUNK, CV_RESULT, CV_NODE, CV_QUARANTINED };

/* The running estimate after each accepted chunk that counts, merged in
 * the order they were accepted, at most CONV_POINTS of them evenly spread
 * (the last always among them): [items, mean, stderr of each output...].
 * The chunks that count are those a restarted coordinator restores the
 * job from (sc_records_kept), so the last point is the job's result even
 * when the journal holds rows at odds with the others. */
void cd__api_on_convergence(cd__api *api, cd__request *r, PGresult *res)
{
    int rows = PQntuples(res);
    if (rows == 0) {
        cd__api_fail(api, r, 404, NULL, "no such job");
        return;
    }
    long variants = strtol(PQgetvalue(res, 0, 0), NULL, 10), variant = strtol(PQgetvalue(res, 0, 1), NULL, 10);
    if (variant >= variants) {
        char msg[96];
        snprintf(msg, sizeof msg, "this job has %ld variant%s: 0 .. %ld", variants, variants == 1 ? "" : "s",
            variants - 1);
        cd__api_fail(api, r, 400, "variant", msg);
        return;
    }
    bool all_in_one = PQgetvalue(res, 0, 2)[0] == 't';
    if (PQgetisnull(res, 0, CV_TYPE))
        rows = 0;
    size_t n = (size_t)rows;
    sc_record *recs = sf_calloc(n ? n : 1, sizeof *recs);
    const sc_record **kept = sf_calloc(n ? n : 1, sizeof *kept);
    uint8_t *fate = sf_calloc(n ? n : 1, sizeof *fate);
    for (int i = 0; i < rows; i++) { /* one variant's rows: each record's variant stays 0 */
        sc_record *rec = &recs[i];
        rec->type = (sc_record_type)atoi(PQgetvalue(res, i, CV_TYPE));
        rec->first = strtoull(PQgetvalue(res, i, CV_FIRST), NULL, 10);
        rec->count = strtoull(PQgetvalue(res, i, CV_COUNT), NULL, 10);
        rec->chunk = strtoull(PQgetvalue(res, i, CV_CHUNK), NULL, 10);
        rec->node = strtoull(PQgetvalue(res, i, CV_NODE), NULL, 10);
        /* The result as the database's text for it: one text per byte
         * string, so equal texts are equal results, all the rule compares;
         * only the results that count are decoded. */
        rec->result = PQgetvalue(res, i, CV_RESULT);
        rec->result_len = (size_t)PQgetlength(res, i, CV_RESULT);
        /* The commit that quarantines a node makes its accepts RETRACTED
         * rows; one written beside that commit stays an accept
         * (docs/verification.md): it counts for nothing all the same. */
        if (rec->type == SC_REC_ACCEPT && PQgetvalue(res, i, CV_QUARANTINED)[0] == 't')
            rec->type = SC_REC_RETRACTED;
    }
    sc_records_kept(recs, n, NULL, NULL, fate, kept);
    uint64_t chunks = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        chunks += fate[i] == SC_FATE_KEPT && recs[i].type == SC_REC_ACCEPT;
        skipped += fate[i] == SC_FATE_SKIPPED;
    }
    sim_stats agg[SIM_MAX_OUT], one[SIM_MAX_OUT];
    int nout = 0;
    uint64_t items = 0, bad = 0, k = 0;
    uint64_t shown = chunks < CONV_POINTS ? chunks : CONV_POINTS;
    sf_str out = SF_STR_INIT;
    sf_str_catf(&out, "{\"job\":%" PRIu64 ",\"variant\":%ld,\"chunks\":%" PRIu64 ",\"skipped\":%" PRIu64
        ",\"points\":[", cd__api_job_id(r), variant, chunks, skipped);
    int emitted = 0;
    for (size_t i = 0; i < n; i++) {
        if (fate[i] != SC_FATE_KEPT || recs[i].type != SC_REC_ACCEPT)
            continue;
        k++;
        size_t len = 0;
        unsigned char *bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(res, (int)i, CV_RESULT), &len);
        int got = bytes != NULL ? result_stats(bytes, len, all_in_one ? variants : 1, all_in_one ? variant : 0, one)
                                : -1;
        PQfreemem(bytes);
        bool ok = got > 0 && (nout == 0 || got == nout);
        for (int o = 0; ok && nout > 0 && o < got; o++)
            ok = sim_stats_merge(&agg[o], &one[o]) == 0;
        if (!ok) { /* the ledger checked every accepted result: not expected */
            bad++;
            continue;
        }
        if (nout == 0) {
            nout = got;
            memcpy(agg, one, (size_t)got * sizeof *agg);
        }
        items += recs[i].count;
        /* the k-th chunk shows when it crosses the next of `shown` even steps */
        if (k * shown / chunks == (k - 1) * shown / chunks)
            continue;
        sf_str_catf(&out, "%s[%" PRIu64, emitted++ ? "," : "", items);
        for (int o = 0; o < nout; o++) {
            sf_str_cat(&out, ",");
            sf_str_cat_number(&out, sim_stats_mean(&agg[o]));
            sf_str_cat(&out, ",");
            sf_str_cat_number(&out, sim_stats_stderr(&agg[o]));
        }
        sf_str_cat(&out, "]");
    }
    free(recs);
    free(kept);
    free(fate);
    sf_str_catf(&out, "],\"outputs\":%d,\"unreadable\":%" PRIu64 "}\n", nout, bad);
    cd__api_ok(api, r, 200, sf_str_take(&out));
}

/* The job stored, or the one stored earlier under the request's key (the
 * client's retry, or the store's: it sends a query again when its
 * connection broke before the answer, and a key the gateway drew is this
 * request's alone). */
void cd__api_on_submit(cd__api *api, cd__request *r, PGresult *res)
{
    if (PQntuples(res) == 0) { /* the same key's INSERT committed during this one */
        if (r->key[0])
            cd__api_fail(api, r, 409, "Idempotency-Key", "a submission with this key is being stored right now: send it again");
        else
            cd__api_fail(api, r, 503, NULL, "the database was storing this submission twice at once: send it again");
        return;
    }
    const char *id = PQgetvalue(res, 0, 0);
    bool created = PQgetvalue(res, 0, 1)[0] == 't', same = PQgetvalue(res, 0, 2)[0] == 't';
    if (!same) {
        char msg[160];
        snprintf(msg, sizeof msg, "was used for another submission (job %s): a new submission needs a new key", id);
        cd__api_fail(api, r, 422, "Idempotency-Key", msg);
        return;
    }
    /* job.submitted comes from the scheduler as it takes the job in, with
     * the job's other events, so they arrive in order */
    if (created && PQnfields(res) >= 6) {
        char fields[800], owner[300], kernel[80];
        const char *items = PQgetvalue(res, 0, 5);
        cd_json_quote(owner, sizeof owner, PQgetvalue(res, 0, 3));
        cd_json_quote(kernel, sizeof kernel, PQgetvalue(res, 0, 4));
        snprintf(fields, sizeof fields, "\"event\":\"job_submitted\",\"job\":%s,\"owner\":%s,\"kernel\":%s,\"items\":%s",
            id, owner, kernel, items);
        sf_logf(SF_LOG_INFO, NULL, fields, "job %s submitted by %s: %s, %s items", id, PQgetvalue(res, 0, 3),
            PQgetvalue(res, 0, 4), items);
    }
    if (created || !r->key[0]) {
        char warning[448];
        size_warning(api, r, warning, sizeof warning);
        cd__api_ok(api, r, 201, sf_fmt("{\"id\":%s,\"state\":\"pending\"%s}\n", id, warning));
    } else {
        cd__api_ok(api, r, 200, sf_fmt("{\"id\":%s,\"replayed\":true}\n", id));
    }
}

