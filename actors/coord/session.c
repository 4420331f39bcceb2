/*
 * session.c — see session.h: the session actor, one per node connection,
 * and the protocol it speaks (proto/PROTOCOL.md): claims, completions,
 * heartbeats, cancels, penalties earned. The hello and the enrolment are
 * in session_enrol.c; the connection table, the lws callback and the
 * registry's live half in session_table.c (shared through session_int.h).
 */
#include "actors/coord/session_int.h"

#include "actors/coord/metrics.h"
#include "actors/coord/oplog.h"
#include "actors/coord/scheduler.h"
#include "base/alloc.h"
#include "base/fnv.h"
#include "base/log.h"
#include "proto/msg.h"
#include "proto/replay.h"
#include "proto/sign.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t cd__session_size(void)
{
    return sizeof(cd__session);
}

void cd__session_init(cd__session *s, cd_sessions *ss, uint64_t conn_id, rt_actor *self, const char *host,
    const uint8_t addr[PR_PK_BYTES])
{
    s->ss = ss;
    s->conn = conn_id;
    s->self = self;
    snprintf(s->host, sizeof s->host, "%s", host);
    memcpy(s->addr, addr, PR_PK_BYTES);
}

uint64_t cd__session_now_s(void)
{
    return (uint64_t)time(NULL);
}

uint64_t cd__session_now_ms_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void cd__session_send_msg(cd__session *s, pr_msg *m)
{
    uint8_t *out = NULL;
    size_t len = 0;
    m->v = PR_VERSION;
    if (m->id == 0 && m->type != PR_MSG_ERROR) /* an error keeps id 0: it answers no frame (§4 error) */
        m->id = ++s->next_frame;
    m->ts = cd__session_now_ms_wall();
    int rc = pr_encode(m, &out, &len);
    if (rc != 0) {
        sf_log(SF_LOG_WARN, "session", "cannot encode %s: %s", pr_type_name(m->type), sf_strerror(rc));
        return;
    }
    cd__link_send(s->ss, s->conn, out, len);
    free(out);
}

/* The close code that ends a session on error code err (PROTOCOL.md §5). */
static unsigned close_code(int err)
{
    if (err > 0)
        return CD__CLOSE_APP + (unsigned)err;
    if (err == PR_EFRAMESIZE)
        return CD__CLOSE_TOO_BIG;
    if (err == PR_ENOMEM || err == PR_ECRYPTO)
        return CD__CLOSE_INTERNAL;
    return CD__CLOSE_PROTOCOL;
}

/* The address a session comes from, as its penalty key holds it
 * (cd_addr_key): an IPv4 address, or an IPv6 one's /64; "" for none. */
static void addr_text(const uint8_t who[PR_PK_BYTES], char *out, size_t cap)
{
    static const uint8_t zero[16];
    out[0] = '\0';
    if (memcmp(who, zero, 16) == 0)
        return;
    if (memcmp(who, zero, 10) == 0 && who[10] == 0xff && who[11] == 0xff) {
        inet_ntop(AF_INET, who + 12, out, (socklen_t)cap);
    } else if (inet_ntop(AF_INET6, who, out, (socklen_t)cap) != NULL) {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "/64");
    }
}

/* A connection refused before its welcome: the operator's line, one per
 * address a minute (oplog.h). */
static void log_refused(const cd__session *s, const char *message)
{
    static const uint8_t zero[PR_PK_BYTES];
    char addr[64], key[17] = "", fields[256], why[200];
    addr_text(s->addr, addr, sizeof addr);
    if (memcmp(s->pk, zero, PR_PK_BYTES) != 0)
        sodium_bin2hex(key, sizeof key, s->pk, 8);
    snprintf(fields, sizeof fields, "\"key\":\"%s\",\"why\":%s", key, cd_json_quote(why, sizeof why, message));
    cd_oplog_limited(CD_OPLOG_NODE_REFUSED, addr, fields, "node connection from %s refused%s%s: %s",
        addr[0] ? addr : "?", key[0] ? ", key " : "", key, message);
}

void cd__session_send_error(cd__session *s, uint64_t id, int code, const char *message, bool fatal)
{
    if (fatal && (s->phase == CD__SESS_AWAIT_HELLO || s->phase == CD__SESS_ENROLLING))
        log_refused(s, message);
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_ERROR;
    m.id = id;
    m.body.error.code = code;
    m.body.error.message = message;
    cd__session_send_msg(s, &m);
    if (fatal) {
        char reason[160];
        static const char *const own[] = { "", "ENOTENROLLED", "ENOTREADY", "EJOB", "EDATABASE", "ERATELIMITED",
            "EKEYINUSE" };
        snprintf(reason, sizeof reason, "%s: %s", code > 0 && code < (int)(sizeof own / sizeof own[0]) ? own[code]
            : pr_errname(code), message);
        s->phase = CD__SESS_CLOSED;
        cd__link_close(s->ss, s->conn, close_code(code), reason);
    }
}

/* Ends the session for abuse: the error, then the close; its address
 * goes on the penalty list, and an enrolled node's key on its own. */
static void cut_off(cd__session *s, int code, const char *why, const char *reason)
{
    uint64_t now = cd__session_now_ms_wall();
    s->offline_reason = reason;
    s->ss->stats.cut_off++;
    cd__penalise(&s->ss->addr_penalties, s->addr, now);
    if (s->phase == CD__SESS_RUNNING || s->phase == CD__SESS_ENROLLING)
        cd__penalise(&s->ss->penalties, s->pk, now);
    cd__session_send_error(s, 0, code, why, true);
}

/* Refuses a connection from an address on the penalty list, left ms
 * before it comes off. */
static void refuse(cd__session *s, uint64_t left)
{
    char why[200];
    snprintf(why, sizeof why, "connections from this address are refused for %" PRIu64 " s more: a session from it "
        "was closed for abuse (the refusal doubles with each)", (left + 999) / 1000);
    s->ss->stats.refused++;
    cd__session_send_error(s, 0, CD__E_RATE_LIMITED, why, true);
}

/* Takes a strike for a bad frame; when they run out the session ends. */
static void strike(cd__session *s)
{
    uint64_t now = cd__session_now_ms_wall();
    if (s->strikes_ms == 0) {
        s->strikes = CD__SESS_STRIKE_BURST;
        s->strikes_ms = now;
    }
    s->strikes += (double)(now - s->strikes_ms) / CD__SESS_STRIKE_REFILL_MS;
    if (s->strikes > CD__SESS_STRIKE_BURST)
        s->strikes = CD__SESS_STRIKE_BURST;
    s->strikes_ms = now;
    s->strikes -= 1;
    if (s->strikes < 0) {
        char why[128];
        snprintf(why, sizeof why, "more than %d bad frames (one more each %d s): the session is closed",
            CD__SESS_STRIKE_BURST, CD__SESS_STRIKE_REFILL_MS / 1000);
        cut_off(s, CD__E_RATE_LIMITED, why, "too many bad frames");
    }
}

cd__req *cd__session_req_add(cd__session *s, int64_t id, cd__req_kind kind)
{
    if (s->nreqs == s->reqs_cap) {
        s->reqs = sf_grow(s->reqs, &s->reqs_cap, sizeof *s->reqs);
    }
    cd__req *r = &s->reqs[s->nreqs++];
    memset(r, 0, sizeof *r);
    r->id = id;
    r->kind = kind;
    return r;
}

/* The chunks the node computes at once, as hello or a later heartbeat
 * says: within workers_max and 256. True when that is more than before.
 * Its backends' workers are sized apart when each has its own slots, that
 * is when their units add up to the slots; otherwise all are alike. */
bool cd__session_set_slots(cd__session *s, unsigned max_parallel)
{
    unsigned was = s->max_slots;
    unsigned slots = max_parallel && max_parallel < s->workers_max ? max_parallel : s->workers_max;
    s->max_slots = slots > 256 ? 256 : slots;
    s->view.max_parallel = max_parallel;
    s->view.slots = s->max_slots;
    unsigned sum = 0;
    for (unsigned c = 0; c < s->nbk; c++)
        sum += s->cls[c].units;
    s->ncls = s->nbk > 1 && sum == s->max_slots ? s->nbk : 1;
    s->view.nbackend_speeds = s->ncls > 1 ? s->ncls : 0;
    return s->max_slots > was;
}

static unsigned fly_in(const cd__session *s, unsigned cls)
{
    unsigned n = 0;
    for (size_t k = 0; k < s->nfly; k++)
        n += s->fly[k].cls == cls;
    return n;
}

/* With chunks sized per backend, the class to claim for: of those with a
 * free slot, the fastest, and devices before CPUs while speeds are
 * unknown; ncls when none is free. */

/* The address a check of this node's results must differ from
 * (sc_node_info.addr): a hash of its address key (cd_addr_key), or 0 for
 * none known and for this machine's own (loopback: the operator's nodes
 * beside the coordinator share it). */
static uint64_t check_addr(const uint8_t who[PR_PK_BYTES])
{
    static const uint8_t zero[PR_PK_BYTES];
    if (memcmp(who, zero, PR_PK_BYTES) == 0 || (who[10] == 0xff && who[11] == 0xff && who[12] == 127))
        return 0;
    uint64_t h = sf_fnv64(SF_FNV64_BASIS, who, PR_PK_BYTES);
    return h != 0 ? h : 1;
}

static unsigned claim_class(const cd__session *s)
{
    const double *speed = s->view.backend_items_per_s;
    unsigned best = s->ncls;
    for (unsigned c = 0; c < s->ncls; c++) {
        if (fly_in(s, c) >= s->cls[c].units)
            continue;
        if (best == s->ncls || speed[c] > speed[best] ||
            (speed[c] == speed[best] && s->cls[c].device && !s->cls[best].device))
            best = c;
    }
    return best;
}

/* Asks the scheduler for as many chunks as the node has free slots. */
void cd__session_claim_more(cd__session *s)
{
    if (s->phase != CD__SESS_RUNNING || s->claiming || s->draining || s->nfly >= s->max_slots)
        return;
    unsigned k = 0, free_slots = s->max_slots - (unsigned)s->nfly;
    double speed = s->view.items_per_s;
    if (s->ncls > 1) {
        if ((k = claim_class(s)) == s->ncls)
            return;
        unsigned free_cls = s->cls[k].units - fly_in(s, k);
        free_slots = free_cls < free_slots ? free_cls : free_slots;
        speed = s->view.backend_items_per_s[k];
    }
    cd_claim *c = RT_MSG_NEW(cd_claim, CD_MSG_CLAIM);
    /* owner and address: a check of a result goes to a node of another
     * owner and another address (docs/verification.md) */
    c->node = (sc_node_info){ .id = s->node_id, .session = s->conn, .tier = s->tier, .backends = 1, .mem_bytes = UINT64_MAX,
        .items_per_s = speed, .owner = cd_owner_hash(s->view.owner), .addr = check_addr(s->addr),
        .streak = s->streak };
    s->claim_cls = k;
    c->slots = free_slots > CD_MAX_CLAIMS ? CD_MAX_CLAIMS : free_slots;
    c->asked_us = cd_metrics_now_us();
    int64_t id = rt_request(s->self, s->ss->scheduler, &c->hdr, 10000);
    if (id > 0) {
        cd__session_req_add(s, id, CD__R_CLAIM);
        s->claiming = true;
    }
}

/* Asks for work again after ms (once, however often it is called
 * meanwhile). */
static void retry_claim(cd__session *s, unsigned ms)
{
    if (!s->retry_pending) {
        s->retry_pending = true;
        rt_send_after(s->self, ms, rt_msg_new(CD__SESS_M_RETRY, sizeof(rt_msg)));
    }
}

static void on_claimed(cd__session *s, const cd_claimed *r)
{
    s->claiming = false;
    if (r->quarantined) { /* its key is revoked too: it cannot come back */
        s->offline_reason = "quarantined";
        cd__session_send_error(s, 0, CD__E_NOT_ENROLLED,
            "this node was quarantined: a check proved a result of it wrong", true);
        return;
    }
    if (r->n == 0) {
        /* The scheduler kept the claim while it had nothing: ask again at
         * once, or after the pause it asks for. */
        if (r->retry_ms == 0)
            cd__session_claim_more(s);
        else
            retry_claim(s, r->retry_ms);
        return;
    }
    uint64_t now_us = cd_metrics_now_us(), took = now_us - r->asked_us;
    cd_metrics_observe(CD_LAT_DISPATCH, took > r->waited_us ? took - r->waited_us : 0);
    /* One assign per job, in the order the chunks came. */
    bool sent[CD_MAX_CLAIMS] = { false };
    for (unsigned i = 0; i < r->n; i++) {
        if (sent[i])
            continue;
        pr_chunk chunks[CD_MAX_CLAIMS];
        uint32_t n = 0;
        for (unsigned k = i; k < r->n; k++) {
            const cd_assignment *a = &r->a[k];
            if (sent[k] || a->claim.job != r->a[i].claim.job)
                continue;
            sent[k] = true;
            chunks[n].chunk = a->claim.chunk;
            memcpy(chunks[n].token, a->claim.token, 16);
            chunks[n].start = a->claim.first;
            chunks[n].count = a->claim.count;
            uint64_t now = rt_mono_ms(), left = a->claim.lease_until > now ? a->claim.lease_until - now : 0;
            chunks[n].lease_ms = left < UINT32_MAX ? (uint32_t)left : UINT32_MAX; /* the scheduler's clock */
            chunks[n].variant = a->claim.variant;
            chunks[n].backend = s->ncls > 1 ? s->claim_cls : 0;
            n++;
            if (s->nfly == s->fly_cap) {
                s->fly = sf_grow(s->fly, &s->fly_cap, sizeof *s->fly);
            }
            s->fly[s->nfly].chunk = a->claim.chunk;
            s->fly[s->nfly].job = a->claim.job;
            s->fly[s->nfly].first = a->claim.first;
            s->fly[s->nfly].count = a->claim.count;
            memcpy(s->fly[s->nfly].token, a->claim.token, 16);
            memcpy(s->fly[s->nfly].ctx_hash, a->ctx_hash, 32);
            s->fly[s->nfly].listed_ms = rt_mono_ms();
            s->fly[s->nfly].cls = s->claim_cls;
            s->nfly++;
        }
        pr_msg m;
        memset(&m, 0, sizeof m);
        m.type = PR_MSG_ASSIGN;
        m.body.assign.job = r->a[i].claim.job;
        m.body.assign.kernel = r->a[i].kernel;
        memcpy(m.body.assign.ctx_hash, r->a[i].ctx_hash, 32);
        m.body.assign.chunks = chunks;
        m.body.assign.nchunks = n;
        cd__session_send_msg(s, &m);
    }
    s->view.in_flight = (unsigned)s->nfly;
    cd__session_claim_more(s);
}

/* A node welcomed: its operator line. */
static void log_connected(const cd__session *s)
{
    const cd_node_view *v = &s->view;
    char addr[64], fields[800], q_owner[300], q_version[140], q_addr[80], q_name[140];
    if (v->from[0] != '\0')
        snprintf(addr, sizeof addr, "%s", v->from);
    else
        addr_text(s->addr, addr, sizeof addr);
    snprintf(fields, sizeof fields, "\"event\":\"node_connected\",\"node\":%" PRIu64 ",\"name\":%s,\"owner\":%s,"
        "\"tier\":\"%s\",\"addr\":%s,\"version\":%s,\"cores\":%u", v->node, cd_json_quote(q_name, sizeof q_name, v->name),
        cd_json_quote(q_owner, sizeof q_owner, v->owner), v->tier, cd_json_quote(q_addr, sizeof q_addr, addr),
        cd_json_quote(q_version, sizeof q_version, v->version), v->cores);
    sf_logf(SF_LOG_INFO, "session", fields, "node %" PRIu64 "%s%s%s connected from %s: owner %s, tier %s, %s, %u cores",
        v->node, v->name[0] ? " (" : "", v->name, v->name[0] ? ")" : "", addr[0] ? addr : "?",
        v->owner[0] ? v->owner : "(none)", v->tier, v->version[0] ? v->version : "?", v->cores);
}

/* A welcomed node's session ended: its operator line. */
static void log_left(const cd__session *s, const char *why)
{
    const cd_node_view *v = &s->view;
    uint64_t now = cd__session_now_ms_wall();
    double after = v->connected_ms > 0 && now > v->connected_ms ? (double)(now - v->connected_ms) / 1000.0 : 0;
    char fields[320], q_why[120];
    snprintf(fields, sizeof fields, "\"event\":\"node_left\",\"node\":%" PRIu64 ",\"why\":%s,\"after_s\":%.1f,"
        "\"chunks\":%" PRIu64 ",\"items\":%" PRIu64, v->node, cd_json_quote(q_why, sizeof q_why, why), after,
        v->chunks_done, v->items_done);
    sf_logf(SF_LOG_INFO, "session", fields, "node %" PRIu64 " left (%s) after %.1f s: %" PRIu64 " chunks, %" PRIu64
        " items", v->node, why, after, v->chunks_done, v->items_done);
}

void cd__session_publish(cd__session *s, const char *type, const char *fields)
{
    if (strcmp(type, "node.online") == 0)
        log_connected(s);
    if (s->ss->publish != NULL)
        s->ss->publish(s->ss->publish_ctx, type, 0, fields);
}

/* Writes what the session has had accepted to its node_work row, and the
 * node's last_seen (also when `ending` with nothing accepted). The row holds
 * totals that an update never lowers, so the store may run the statement
 * twice. Only a stopping coordinator waits for the answer (round > 0: CD__SESS_M_SAVE);
 * a write lost with a coordinator killed costs the node's totals at most
 * CD__SESS_WORK_SAVE_BEATS heartbeat intervals of this session. */
static void save_work(cd__session *s, bool ending, uint64_t round)
{
    const cd_node_view *v = &s->view;
    if (s->node_id == 0 || (v->chunks_done == s->saved_chunks && !ending))
        return;
    cd_query *q;
    if (v->chunks_done == 0) {
        q = cd_query_new("UPDATE nodes SET last_seen = now() WHERE id = $1");
        cd_query_int(q, (int64_t)s->node_id);
    } else {
        q = cd_query_new("WITH w AS (INSERT INTO node_work (session, node, chunks, items) VALUES ($1::uuid, $2, $3, $4) "
                         "ON CONFLICT (session) DO UPDATE SET chunks = greatest(node_work.chunks, EXCLUDED.chunks), "
                         "items = greatest(node_work.items, EXCLUDED.items), saved_at = now()) "
                         "UPDATE nodes SET last_seen = now() WHERE id = $2");
        cd_query_text(q, v->work_key);
        cd_query_int(q, (int64_t)s->node_id);
        cd_query_int(q, (int64_t)v->chunks_done);
        cd_query_int(q, (int64_t)v->items_done);
    }
    q->group = true;
    if (round > 0) {
        int64_t id = rt_request(s->self, s->ss->store, &q->hdr, 10000);
        if (id > 0)
            cd__session_req_add(s, id, CD__R_SAVE)->job = round;
        else
            s->save_round = round; /* nothing will come: not waited for */
    } else if (rt_send(s->ss->store, &q->hdr) == RT_EOVERLOAD) { /* otherwise it is the store's, or freed */
        rt_msg_free(&q->hdr);
    }
    s->saved_chunks = v->chunks_done;
    s->saved_ms = rt_mono_ms();
}

/* A node silent for three heartbeat intervals is offline. Every so often
 * its work so far is written. */
static void on_watch(cd__session *s)
{
    uint64_t limit = 3 * (uint64_t)s->ss->heartbeat_ms;
    if (s->phase == CD__SESS_RUNNING && rt_mono_ms() - s->saved_ms >= CD__SESS_WORK_SAVE_BEATS * (uint64_t)s->ss->heartbeat_ms)
        save_work(s, false, 0);
    if (s->phase != CD__SESS_RUNNING || rt_mono_ms() - s->heard_ms <= limit)
        return;
    s->offline_reason = "missed heartbeats";
    char why[96];
    snprintf(why, sizeof why, "nothing heard for %" PRIu64 " s (3 heartbeat intervals)", limit / 1000);
    cd__session_send_error(s, 0, CD__E_NOT_READY, why, true);
}

/* Whether a result under this claim token waits for the scheduler's
 * answer: the node lists it no more, and the claim is not its to give
 * back (the answer frees it). */
static bool result_pending(const cd__session *s, const uint8_t token[16])
{
    for (size_t i = 0; i < s->nreqs; i++)
        if (s->reqs[i].kind == CD__R_COMPLETE && memcmp(s->reqs[i].token, token, 16) == 0)
            return true;
    return false;
}

/* The coordinator stops a job: the node drops its chunks of it. */
static void on_cancel(cd__session *s, const cd__cancel_msg *c)
{
    if (s->phase != CD__SESS_RUNNING)
        return;
    uint64_t chunks[CD__SESS_MAX_INFLIGHT];
    uint32_t n = 0;
    for (size_t i = 0; i < s->nfly;) {
        /* a chunk whose result waits for the scheduler's answer is not the
         * node's to drop: the answer, which may come after the job's end
         * (its barrier commits with the end), counts it and frees its slot */
        if (s->fly[i].job == c->job && n < CD__SESS_MAX_INFLIGHT && !result_pending(s, s->fly[i].token)) {
            chunks[n++] = s->fly[i].chunk;
            s->fly[i] = s->fly[--s->nfly];
        } else {
            i++;
        }
    }
    if (n == 0)
        return;
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CANCEL;
    m.body.cancel.job = c->job;
    m.body.cancel.chunks = chunks;
    m.body.cancel.nchunks = n;
    m.body.cancel.reason = c->reason;
    cd__session_send_msg(s, &m);
    s->view.in_flight = (unsigned)s->nfly;
    cd__session_claim_more(s);
}

static void on_ctx_req(cd__session *s, pr_msg *m)
{
    cd_query *q = cd_query_new("SELECT params, ctx_hash FROM jobs WHERE id = $1");
    cd_query_int(q, (int64_t)m->body.ctx_req.job);
    q->binary_result = 1;
    int64_t id = rt_request(s->self, s->ss->store, &q->hdr, 10000);
    if (id < 0)
        return;
    cd__req *r = cd__session_req_add(s, id, CD__R_CTX);
    r->frame_id = m->id;
    r->job = m->body.ctx_req.job;
    memcpy(r->hash, m->body.ctx_req.hash, 32);
}

static void on_ctx(cd__session *s, const cd__req *r, cd_result *res)
{
    if (res == NULL || res->res == NULL || PQntuples(res->res) == 0 || PQgetlength(res->res, 0, 1) != 32 ||
        memcmp(PQgetvalue(res->res, 0, 1), r->hash, 32) != 0) {
        cd__session_send_error(s, r->frame_id, CD__E_JOB, "no such job, or not this work context", false);
        return;
    }
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CTX;
    m.id = r->frame_id;
    m.body.ctx.job = r->job;
    memcpy(m.body.ctx.hash, r->hash, 32);
    m.body.ctx.bytes.ptr = (const uint8_t *)PQgetvalue(res->res, 0, 0);
    m.body.ctx.bytes.len = (uint32_t)PQgetlength(res->res, 0, 0);
    cd__session_send_msg(s, &m);
}

/* The claim this session holds for chunk `chunk` of job under `token`, or
 * -1. By the token too: a job's chunk ids go on after the highest accepted
 * one when the coordinator starts again, so a chunk a node still computes
 * from before and a claim handed out since can share an id. */
static int fly_find(const cd__session *s, uint64_t job, uint64_t chunk, const uint8_t token[16])
{
    for (size_t i = 0; i < s->nfly; i++)
        if (s->fly[i].chunk == chunk && s->fly[i].job == job && memcmp(s->fly[i].token, token, 16) == 0)
            return (int)i;
    return -1;
}

/* A malformed result the ledger did not see (it checks only what it
 * holds): counted there toward the node's quarantine too. */
static void malformed_to_ledger(cd__session *s)
{
    cd_node_gone *g = RT_MSG_NEW(cd_node_gone, CD_MSG_MALFORMED);
    g->node = s->node_id;
    rt_send(s->ss->scheduler, &g->hdr);
}

/* Frees bt's outcomes and the reasons malformed() gave them. */
static void outcomes_free(cd__batch *bt)
{
    for (uint32_t i = 0; i < bt->n; i++) {
        free((void *)bt->outcomes[i].reason);
        free((void *)bt->outcomes[i].malformed);
    }
    free(bt->outcomes);
    bt->outcomes = NULL;
}

/* Answers result `slot` of bt as malformed (PROTOCOL.md, complete_ack):
 * the claim stays live for a good result, the node is told why (as the
 * outcome "malformed" when its hello announced the feature, else as "stale"
 * with the reason beside it), and the operator reads one line for it. */
static void malformed(cd__session *s, cd__batch *bt, int slot, const char *why)
{
    pr_outcome *o = &bt->outcomes[slot];
    char fields[160];
    char *reason = sf_fmt("%.*s", (int)PR_MAX_REASON, why); /* freed by outcomes_free */
    pr_outcome_malformed(o, o->chunk, reason, s->feat_malformed);
    s->ss->stats.results[CD_RESULT_MALFORMED]++;
    s->view.malformed++;
    snprintf(fields, sizeof fields, "\"node\":%" PRIu64 ",\"job\":%" PRIu64 ",\"chunk\":%" PRIu64, s->node_id,
        bt->job, o->chunk);
    sf_logf(SF_LOG_WARN, "session", fields, "node %" PRIu64 " job %" PRIu64 " chunk %" PRIu64 ": malformed result: %s",
        s->node_id, bt->job, o->chunk, reason);
}

/* Sends a batch's complete_ack once every result has its outcome, and
 * frees the batch. */
static void batch_ack(cd__session *s, cd__batch *bt)
{
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE_ACK;
    m.id = bt->frame_id;
    m.body.complete_ack.job = bt->job;
    m.body.complete_ack.job_complete = bt->job_complete;
    m.body.complete_ack.outcomes = bt->outcomes;
    m.body.complete_ack.noutcomes = bt->n;
    cd__session_send_msg(s, &m);
    outcomes_free(bt);
    bt->used = false;
    cd__session_claim_more(s);
}

static void on_complete(cd__session *s, pr_msg *m)
{
    uint64_t received_us = cd_metrics_now_us();
    pr_complete *c = &m->body.complete;
    int rc = pr_complete_verify(c, s->pk, 32, s->host, cd__session_now_s(), s->guard);
    if (rc != 0) {
        cd__session_send_error(s, m->id, rc, sf_strerror(rc), false);
        if (rc != PR_ESKEW) /* an honest node's clock can be wrong; its signature cannot */
            strike(s);
        return;
    }
    int b = -1;
    for (int i = 0; i < CD__SESS_MAX_BATCHES; i++)
        if (!s->batches[i].used) {
            b = i;
            break;
        }
    if (b < 0 || c->batch.nresults == 0) {
        cd__session_send_error(s, m->id, CD__E_JOB, b < 0 ? "too many batches in flight" : "an empty batch", false);
        strike(s);
        return;
    }
    cd__batch *bt = &s->batches[b];
    memset(bt, 0, sizeof *bt);
    bt->used = true;
    bt->frame_id = m->id;
    bt->job = c->batch.job;
    bt->n = c->batch.nresults;
    bt->outcomes = calloc(bt->n, sizeof *bt->outcomes);
    if (bt->outcomes == NULL)
        sf_oom(bt->n * sizeof *bt->outcomes);
    for (uint32_t i = 0; i < c->batch.nresults; i++) {
        const pr_result *r = &c->batch.results[i];
        bt->outcomes[i].chunk = r->chunk;
        bt->outcomes[i].outcome = PR_OUTCOME_STALE;
        /* A result for another range than its claim's, or computed with
         * another work context than its job's, is malformed, even when its
         * data is a good result of that many items: counting it would
         * merge other items than the claim's (some twice), or other
         * numbers. The ledger knows a claim by its token alone, so range
         * and context are checked here, for the claims this session handed
         * out; a claim from an earlier session of the node is matched by
         * token only. The claim stays, for a good result. */
        int k = fly_find(s, c->batch.job, r->chunk, r->token);
        if (k >= 0 && (s->fly[k].first != r->start || s->fly[k].count != r->count)) {
            char why[PR_MAX_REASON + 1];
            snprintf(why, sizeof why, "range differs from the claim's: items %" PRIu64 "+%" PRIu64
                ", the claim is %" PRIu64 "+%" PRIu64, r->start, r->count, s->fly[k].first, s->fly[k].count);
            malformed(s, bt, (int)i, why);
            malformed_to_ledger(s);
            bt->answered++;
            continue;
        }
        if (k >= 0 && memcmp(s->fly[k].ctx_hash, c->batch.ctx_hash, 32) != 0) {
            malformed(s, bt, (int)i, "work context differs from the job's");
            malformed_to_ledger(s);
            bt->answered++;
            continue;
        }
        if (r->elapsed_ms > 0 && r->count > 0) {
            double rate = (double)r->count * 1000.0 / r->elapsed_ms;
            s->view.items_per_s = s->view.items_per_s > 0 ? 0.7 * s->view.items_per_s + 0.3 * rate : rate;
            if (s->ncls > 1 && r->backend < s->ncls) {
                double *v = &s->view.backend_items_per_s[r->backend];
                *v = *v > 0 ? 0.7 * *v + 0.3 * rate : rate;
            }
        }
        cd_complete *q = cd_complete_new(c->batch.job, r->chunk, r->token, s->node_id, r->data.ptr, r->data.len);
        q->received_us = received_us;
        int64_t id = rt_request(s->self, s->ss->scheduler, &q->hdr, 70000);
        if (id < 0) {
            bt->answered++;
            continue;
        }
        cd__req *rq = cd__session_req_add(s, id, CD__R_COMPLETE);
        rq->batch = b;
        rq->slot = (int)i;
        memcpy(rq->token, r->token, 16);
    }
    if (bt->answered == bt->n) /* nothing was asked: answer now */
        batch_ack(s, bt);
}

static void on_completed(cd__session *s, const cd__req *r, const cd_completed *res)
{
    cd__batch *bt = &s->batches[r->batch];
    pr_outcome *o = &bt->outcomes[r->slot];
    /* what the node is told of each kind: a result refused for what it
     * holds is malformed to it (with the ledger's words), one unanswered or
     * refused for another reason (its write failed) stale */
    static const int told[CD_RESULT_KINDS] = { PR_OUTCOME_ACCEPTED, PR_OUTCOME_IDEMPOTENT, PR_OUTCOME_CONFLICT,
        PR_OUTCOME_STALE, PR_OUTCOME_STALE, PR_OUTCOME_STALE, PR_OUTCOME_MALFORMED };
    int kind = res == NULL                    ? CD_RESULT_UNANSWERED
             : res->err == SC_EBADRESULT      ? CD_RESULT_MALFORMED
             : res->err != 0                  ? CD_RESULT_INVALID
             : res->outcome == SC_ACCEPTED    ? CD_RESULT_ACCEPTED
             : res->outcome == SC_IDEMPOTENT  ? CD_RESULT_IDEMPOTENT
             : res->outcome == SC_CONFLICT    ? CD_RESULT_CONFLICT
                                              : CD_RESULT_STALE;
    if (kind == CD_RESULT_MALFORMED) {
        malformed(s, bt, r->slot, res->why[0] ? res->why : sf_strerror(res->err));
    } else {
        s->ss->stats.results[kind]++;
        o->outcome = told[kind];
    }
    if (res != NULL && res->err == 0)
        bt->job_complete |= res->job_complete;
    if (res != NULL)
        cd_metrics_observe(CD_LAT_COMPLETION, cd_metrics_now_us() - res->received_us);
    int k = fly_find(s, bt->job, o->chunk, r->token);
    if (k >= 0 && o->outcome == PR_OUTCOME_ACCEPTED) {
        s->view.chunks_done++;
        s->view.items_done += s->fly[k].count;
        s->ss->stats.items_accepted += s->fly[k].count;
    }
    if (k >= 0 && (res == NULL || res->err == 0)) /* a bad result keeps its slot for a good one */
        s->fly[k] = s->fly[--s->nfly];
    s->view.in_flight = (unsigned)s->nfly;
    if (++bt->answered == bt->n)
        batch_ack(s, bt);
}

/* Adds a claim's token to *r (a cd_renew of type `type`, made on first
 * use), sending it to the scheduler when full. */
static void token_to(cd__session *s, cd_renew **r, int type, const uint8_t token[16])
{
    if (*r != NULL && (*r)->n == CD_MAX_RENEW) { /* a message per CD_MAX_RENEW claims */
        rt_send(s->ss->scheduler, &(*r)->hdr);
        *r = NULL;
    }
    if (*r == NULL) {
        *r = RT_MSG_NEW(cd_renew, type);
        (*r)->node = s->node_id;
    }
    memcpy((*r)->tokens[(*r)->n++], token, 16);
}


/* The node lists the chunks it holds, queued or computing, by chunk id
 * (ids restart with each job, so every claim with a listed id counts as
 * listed). Those are renewed. One it has not listed for two heartbeat
 * intervals is not held there any more (it failed, or the job's context
 * could not be had): its slot is freed for other work and the scheduler
 * hands its range out again now (an attempt, as a lease that ran out). A
 * chunk the node has computed leaves its list as its result goes into a
 * batch, which is sent within 50 ms (actors/node/chunks.c), long before that;
 * while the scheduler has not answered its result, it counts as listed. A
 * claim just assigned is renewed until the node has had time to list it. */
static void on_heartbeat(cd__session *s, pr_msg *m)
{
    const pr_heartbeat *hb = &m->body.heartbeat;
    if (hb->max_parallel != 0 && cd__session_set_slots(s, hb->max_parallel))
        cd__session_claim_more(s); /* more slots: work for them now, if any */
    if (s->nfly == 0) /* nothing to renew: the scheduler need not hear of it */
        return;
    uint64_t now = rt_mono_ms(), grace = 2 * (uint64_t)s->ss->heartbeat_ms;
    cd_renew *renew = NULL, *give_back = NULL;
    for (size_t k = 0; k < s->nfly;) {
        cd__inflight *f = &s->fly[k];
        bool listed = false;
        for (uint32_t i = 0; i < hb->nin_flight && !listed; i++)
            listed = hb->in_flight[i] == f->chunk;
        if (listed || result_pending(s, f->token))
            f->listed_ms = now;
        if (now - f->listed_ms > grace) {
            token_to(s, &give_back, CD_MSG_GIVE_BACK, f->token);
            s->fly[k] = s->fly[--s->nfly];
            continue;
        }
        token_to(s, &renew, CD_MSG_RENEW, f->token);
        k++;
    }
    s->view.in_flight = (unsigned)s->nfly;
    if (renew != NULL)
        rt_send(s->ss->scheduler, &renew->hdr);
    if (give_back != NULL)
        rt_send(s->ss->scheduler, &give_back->hdr);
    cd__session_claim_more(s);
}

/* Takes one frame's token; false when the node sends too fast. */
static bool rate_ok(cd__session *s, uint64_t now)
{
    if (s->bucket_ms == 0) {
        s->bucket = CD__SESS_RATE_BURST;
        s->bucket_ms = now;
    }
    s->bucket += (double)(now - s->bucket_ms) * CD__SESS_RATE_PER_S / 1000.0;
    if (s->bucket > CD__SESS_RATE_BURST)
        s->bucket = CD__SESS_RATE_BURST;
    s->bucket_ms = now;
    if (s->bucket < 1)
        return false;
    s->bucket -= 1;
    return true;
}

static void on_frame(cd__session *s, const cd__frame_msg *f)
{
    if (!rate_ok(s, cd__session_now_ms_wall())) {
        char why[96];
        snprintf(why, sizeof why, "more than %d frames a second (%d at once): the session is closed", CD__SESS_RATE_PER_S,
            CD__SESS_RATE_BURST);
        cut_off(s, CD__E_RATE_LIMITED, why, "rate limited");
        return;
    }
    pr_msg m;
    s->view.last_seen_ms = cd__session_now_ms_wall();
    s->heard_ms = rt_mono_ms();
    int rc = pr_decode(&m, f->bytes, f->len);
    if (rc != 0) {
        char why[160];
        if (rc == PR_EVERSION)
            snprintf(why, sizeof why, "unsupported protocol version: this coordinator (%s) speaks version %d; "
                "upgrade the node", CD__SESS_SERVER_VERSION, PR_VERSION);
        else if (rc == PR_EUNKNOWNTYPE)
            snprintf(why, sizeof why, "unknown message type \"%s\" (protocol version %d)", m.unknown_type,
                PR_VERSION);
        else
            snprintf(why, sizeof why, "%s%s%s", sf_strerror(rc), m.err_at[0] ? " at " : "", m.err_at);
        cd__session_send_error(s, m.id, rc, why, s->phase != CD__SESS_RUNNING);
        if (s->phase == CD__SESS_RUNNING)
            strike(s);
        return;
    }
    if (s->phase == CD__SESS_AWAIT_HELLO && m.type != PR_MSG_HELLO) {
        cd__session_send_error(s, m.id, CD__E_NOT_READY, "say hello first", true);
    } else if (s->phase == CD__SESS_ENROLLING) {
        cd__session_send_error(s, m.id, CD__E_NOT_READY, "wait for welcome", true);
    } else {
        switch (m.type) {
        case PR_MSG_HELLO:
            if (s->phase == CD__SESS_AWAIT_HELLO) {
                s->feat_malformed = pr_hello_has_feature(&m.body.hello, PR_FEATURE_MALFORMED);
                for (uint32_t b = 0; b < m.body.hello.caps.nbackends; b++)
                    if (m.body.hello.caps.backends[b].kind < 8)
                        s->view.backend_kinds |= (uint8_t)(1u << m.body.hello.caps.backends[b].kind);
                cd__session_on_hello(s, &m);
            }
            else {
                cd__session_send_error(s, m.id, CD__E_NOT_READY, "hello was already said", false);
                strike(s);
            }
            break;
        case PR_MSG_HEARTBEAT: on_heartbeat(s, &m); break;
        case PR_MSG_CTX_REQ: on_ctx_req(s, &m); break;
        case PR_MSG_COMPLETE: on_complete(s, &m); break;
        case PR_MSG_BYE:
            s->draining = true; /* no new work; what it holds it completes */
            if (s->ss->scheduler != NULL) /* a claim waiting for work is answered empty */
                rt_send(s->ss->scheduler, rt_msg_new(CD_MSG_WITHDRAW, sizeof(rt_msg)));
            if (m.body.bye.reason == PR_BYE_LEAVING)
                cd__link_close(s->ss, s->conn, CD__CLOSE_NORMAL, "bye");
            break;
        case PR_MSG_ERROR:
            {
                char fields[48];
                snprintf(fields, sizeof fields, "\"node\":%" PRIu64, s->node_id);
                sf_logf(SF_LOG_WARN, "session", fields, "node %" PRIu64 " says: %s", s->node_id,
                    m.body.error.message ? m.body.error.message : "?");
            }
            break;
        default:
            cd__session_send_error(s, m.id, CD__E_NOT_READY, "a coordinator does not take this message", false);
            strike(s);
            break;
        }
    }
    pr_msg_free(&m);
}

static void on_reply(cd__session *s, rt_msg *msg)
{
    cd__req r;
    bool found = false;
    for (size_t i = 0; i < s->nreqs; i++)
        if (s->reqs[i].id == (int64_t)msg->req_id) {
            r = s->reqs[i];
            s->reqs[i] = s->reqs[--s->nreqs];
            found = true;
            break;
        }
    if (!found || s->phase == CD__SESS_CLOSED)
        return;
    bool timeout = msg->type == RT_MSG_TIMEOUT;
    switch (r.kind) {
    case CD__R_ENROL: cd__session_on_enrolled(s, &r, timeout ? NULL : (cd_result *)msg); break;
    case CD__R_CTX: on_ctx(s, &r, timeout ? NULL : (cd_result *)msg); break;
    case CD__R_CLAIM:
        if (timeout) { /* the scheduler is slow to answer: ask again in a while */
            s->claiming = false;
            retry_claim(s, CD__SESS_CLAIM_RETRY_MS);
        } else {
            on_claimed(s, (cd_claimed *)msg);
        }
        break;
    case CD__R_COMPLETE: on_completed(s, &r, timeout ? NULL : (cd_completed *)msg); break;
    case CD__R_SAVE: s->save_round = r.job; break; /* written, or not in time: either way done waiting */
    }
}

static uint64_t hello_due_ms(const cd__session *s)
{
    uint64_t beats = 3 * (uint64_t)s->ss->heartbeat_ms;
    return beats > CD__SESS_HELLO_MIN_MS ? beats : CD__SESS_HELLO_MIN_MS;
}

/* A connection that never says hello does not keep its session. */
static void on_hello_due(cd__session *s)
{
    if (s->phase != CD__SESS_AWAIT_HELLO)
        return;
    char why[96];
    snprintf(why, sizeof why, "no hello within %" PRIu64 " s of the challenge", hello_due_ms(s) / 1000);
    cd__session_send_error(s, 0, CD__E_NOT_READY, why, true);
}

/* The session's first word: the challenge its hello must sign. */
static void challenge(cd__session *s)
{
    randombytes_buf(s->nonce, sizeof s->nonce);
    pr_msg c;
    memset(&c, 0, sizeof c);
    c.type = PR_MSG_CHALLENGE;
    memcpy(c.body.challenge.nonce, s->nonce, sizeof s->nonce);
    c.body.challenge.server = CD__SESS_SERVER_VERSION;
    cd__session_send_msg(s, &c);
    rt_send_after(s->self, hello_due_ms(s), rt_msg_new(CD__SESS_M_HELLO_DUE, sizeof(rt_msg)));
}

/* The challenge, or the refusal while the address is on the penalty list
 * (left ms more). */
static void admit(cd__session *s, uint64_t left)
{
    if (left > 0)
        refuse(s, left);
    else
        challenge(s);
}

/* A held session is held no longer. */
static void unhold(cd__session *s)
{
    s->held = false;
    s->ss->nheld--;
}

void cd__session_behaviour(rt_actor *self, rt_msg *m)
{
    cd__session *s = rt_state(self);
    switch (m->type) {
    case CD__SESS_M_START: {
        uint64_t left = cd__penalty_left(s->ss->addr_penalties, s->addr, cd__session_now_ms_wall());
        if (left > 0 && s->ss->nheld < CD__SESS_HELD_MAX) {
            s->held = true;
            s->held_ms = rt_mono_ms();
            s->ss->nheld++;
            cd__link_hold(s->ss, s->conn, true);
            rt_send_after(self, left < CD__SESS_TARPIT_MS ? left : CD__SESS_TARPIT_MS, rt_msg_new(CD__SESS_M_REFUSE, sizeof(rt_msg)));
            break;
        }
        admit(s, left);
        break;
    }
    case CD__SESS_M_FRAME:
        if (s->phase != CD__SESS_CLOSED && !s->held)
            on_frame(s, (cd__frame_msg *)m);
        break;
    case CD__SESS_M_REFUSE:
        if (s->held) {
            uint64_t left = cd__penalty_left(s->ss->addr_penalties, s->addr, cd__session_now_ms_wall());
            uint64_t waited = rt_mono_ms() - s->held_ms;
            if (left > 0 && waited < CD__SESS_TARPIT_MS) {
                /* the timer came before the refusal's end (a busy loop's
                 * clock lags): held on for what is left of either */
                uint64_t more = CD__SESS_TARPIT_MS - waited;
                rt_send_after(self, left < more ? left : more, rt_msg_new(CD__SESS_M_REFUSE, sizeof(rt_msg)));
                break;
            }
            unhold(s);
            cd__link_hold(s->ss, s->conn, false);
            /* challenged if its refusal ran out while it waited */
            admit(s, left);
        }
        break;
    case CD__SESS_M_RETRY:
        s->retry_pending = false;
        cd__session_claim_more(s);
        break;
    case CD__SESS_M_WATCH:
        on_watch(s);
        break;
    case CD__SESS_M_HELLO_DUE:
        on_hello_due(s);
        break;
    case CD__SESS_M_CANCEL:
        on_cancel(s, (cd__cancel_msg *)m);
        break;
    case CD__SESS_M_SAVE:
        save_work(s, true, ((cd__save_msg *)m)->round); /* a session not welcomed has none */
        break;
    case CD__SESS_M_OVERSIZE:
        if (s->phase != CD__SESS_CLOSED && !s->held)
            cut_off(s, PR_EFRAMESIZE, "a frame larger than 4194304 bytes (the frame limit): the session is closed",
                "frame too large");
        break;
    case CD__SESS_M_CLOSED: {
        s->phase = CD__SESS_CLOSED;
        if (s->held)
            unhold(s);
        if (s->node_id != 0) {
            save_work(s, true, 0);
            cd_node_gone *g = RT_MSG_NEW(cd_node_gone, CD_MSG_NODE_GONE);
            g->node = s->node_id;
            g->session = s->conn;
            rt_send(s->ss->scheduler, &g->hdr);
            char fields[160], why[80];
            const char *reason = s->offline_reason ? s->offline_reason : s->draining ? "left" : "disconnected";
            snprintf(fields, sizeof fields, "\"node\":%" PRIu64 ",\"reason\":%s", s->node_id,
                cd_json_quote(why, sizeof why, reason));
            if (s->view.node != 0) /* welcomed */
                log_left(s, reason);
            cd__session_publish(s, "node.offline", fields);
        }
        rt_stop(self);
        break;
    }
    case CD_MSG_RESULT:
    case CD_MSG_CLAIMED:
    case CD_MSG_COMPLETED:
    case RT_MSG_TIMEOUT:
        on_reply(s, m);
        break;
    default:
        break;
    }
}

void cd__session_final(rt_actor *self)
{
    cd__session *s = rt_state(self);
    for (int i = 0; i < CD__SESS_MAX_BATCHES; i++)
        if (s->batches[i].used)
            outcomes_free(&s->batches[i]);
    free(s->fly);
    free(s->reqs);
    pr_replay_destroy(s->guard);
}

