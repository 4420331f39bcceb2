/*
 * session_table.c — the node sessions' connection table (session_int.h).
 *
 * The table (conns) belongs to the loop thread: lws callbacks add and
 * remove entries, queue received frames to the session actor, and write
 * queued frames when lws says a connection is writable. Session actors are
 * pinned to the loop thread, so they use the table directly to send; a
 * connection that closes leaves the table at once, and its actor learns it
 * from a message. The penalty lists and the registry's live half (what
 * the sessions know now, for the API and /metrics) are here too.
 */
#include "actors/coord/session_int.h"

#include "base/alloc.h"
#include "base/log.h"
#include "proto/msg.h"

#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static cd__link *conn_find(cd_sessions *ss, uint64_t id)
{
    for (size_t i = 0; i < ss->nconns; i++)
        if (ss->conns[i].id == id)
            return &ss->conns[i];
    return NULL;
}

static void conn_free(cd__link *c)
{
    for (size_t i = 0; i < c->nout; i++)
        free(c->out[(c->out_head + i) % c->out_cap].buf);
    free(c->out);
    free(c->rx);
    if (c->actor != NULL)
        rt_actor_release(c->actor);
}

/* Queues a binary frame (copied) for connection id. Returns -1 when the
 * connection is gone. */
int cd__link_send(cd_sessions *ss, uint64_t id, const uint8_t *bytes, size_t len)
{
    cd__link *c = conn_find(ss, id);
    if (c == NULL || c->closing)
        return -1;
    if (c->nout == c->out_cap)
        c->out = sf_grow_ring(c->out, &c->out_head, c->nout, &c->out_cap, sizeof *c->out);
    uint8_t *buf = malloc(LWS_PRE + len);
    if (buf == NULL)
        sf_oom(LWS_PRE + len);
    memcpy(buf + LWS_PRE, bytes, len);
    c->out[(c->out_head + c->nout++) % c->out_cap] = (cd__frame){ buf, len };
    lws_callback_on_writable(c->wsi);
    return 0;
}

/* Sets c's close frame: code, and reason cut to what a close frame holds
 * (125 bytes less the code's 2) at a character's first byte. */
static void close_with(cd__link *c, unsigned code, const char *reason)
{
    size_t n = strlen(reason);
    if (n >= sizeof c->close_reason)
        for (n = sizeof c->close_reason - 1; n > 0 && ((unsigned char)reason[n] & 0xc0) == 0x80; n--)
            ;
    memcpy(c->close_reason, reason, n);
    c->close_reason[n] = '\0';
    c->close_code = (uint16_t)code;
}

/* Ends c with its close frame once the frames queued before it are sent. */
static void link_close(cd__link *c, unsigned code, const char *reason)
{
    if (!c->closing) {
        c->closing = true;
        close_with(c, code, reason);
        lws_callback_on_writable(c->wsi);
    }
}

void cd__link_close(cd_sessions *ss, uint64_t id, unsigned code, const char *reason)
{
    cd__link *c = conn_find(ss, id);
    if (c != NULL)
        link_close(c, code, reason);
}

/* Ends the connection with its close frame: lws_close_reason(), then -1
 * from a callback; lws sends the frame and waits for the node's (at most
 * 5 s, dropping what comes before it), so the frames queued before it are
 * not lost to a reset and the node reads the code and why rather than
 * 1006. A writeable callback's -1 lws takes for a failed write, dropping
 * the socket unsaid, so from there the close waits for a timer callback
 * (close_later). */
static int close_now(struct lws *wsi, cd__link *c)
{
    lws_close_reason(wsi, (enum lws_close_status)c->close_code, (unsigned char *)c->close_reason,
        strlen(c->close_reason));
    return -1;
}

static void close_later(struct lws *wsi, cd__link *c)
{
    c->shut = true;
    lws_set_timer_usecs(wsi, 1);
}

static void frame_release(rt_msg *m)
{
    free(((cd__frame_msg *)m)->bytes);
}

/* Holds a connection's reads (a refused connection waits unread) or lets
 * them go again. */
void cd__link_hold(cd_sessions *ss, uint64_t id, bool hold)
{
    cd__link *c = conn_find(ss, id);
    if (c != NULL)
        lws_rx_flow_control(c->wsi, hold ? 0 : 1);
}

void cd_addr_key(const struct sockaddr *sa, uint8_t who[PR_PK_BYTES])
{
    memset(who, 0, PR_PK_BYTES);
    if (sa->sa_family == AF_INET) {
        who[10] = who[11] = 0xff;
        memcpy(who + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        bool v4 = memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0;
        memcpy(who, a, v4 ? 16 : 8);
    }
}

void cd_wsi_client(struct lws *wsi, const cd_proxies *p, struct sockaddr_storage *out)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    if (getpeername(lws_get_socket_fd(wsi), (struct sockaddr *)&peer, &len) != 0) {
        memset(out, 0, sizeof *out);
        out->ss_family = AF_UNSPEC;
        return;
    }
    char *xff = NULL;
    int n = p != NULL && p->n > 0 ? lws_hdr_total_length(wsi, WSI_TOKEN_X_FORWARDED_FOR) : 0;
    if (n > 0) {
        xff = malloc((size_t)n + 1);
        if (xff == NULL)
            sf_oom((size_t)n + 1);
        if (lws_hdr_copy(wsi, xff, n + 1, WSI_TOKEN_X_FORWARDED_FOR) < 0)
            xff[0] = '\0';
    }
    cd_client_addr(p, (const struct sockaddr *)&peer, xff, out);
    free(xff);
}

/* The client's address as text ("10.0.0.5", "2001:db8::7"; "?" when
 * unknown), for the words of a refusal and the log. */
static void client_text(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    const void *a = NULL;
    if (ss->ss_family == AF_INET)
        a = &((const struct sockaddr_in *)ss)->sin_addr;
    else if (ss->ss_family == AF_INET6)
        a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (a == NULL || inet_ntop(ss->ss_family, a, out, (socklen_t)cap) == NULL)
        snprintf(out, cap, "?");
    else if (ss->ss_family == AF_INET6 && strncmp(out, "::ffff:", 7) == 0 && strchr(out, '.') != NULL)
        memmove(out, out + 7, strlen(out + 7) + 1); /* an IPv4 client of a dual-stack socket */
}

int cd_session_lws_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    cd__link_pss *ps = user;
    const struct lws_protocols *proto = lws_get_protocol(wsi);
    cd_sessions *ss = proto ? proto->user : NULL;
    cd__link *c;

    switch (reason) {
    case LWS_CALLBACK_ESTABLISHED: {
        char uri[64] = "", host[256] = "";
        lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI);
        lws_hdr_copy(wsi, host, sizeof host, WSI_TOKEN_HOST);
        if (strcmp(uri, "/ws/node") != 0 || ss == NULL)
            return -1;
        for (char *p = host; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        rt_actor_opts o = { .state_size = cd__session_size(), .pinned = true, .finalize = cd__session_final, .name = "session" };
        rt_actor *a = rt_spawn(ss->sys, cd__session_behaviour, &o);
        if (a == NULL)
            return -1;
        if (ss->nconns == ss->conns_cap) {
            ss->conns = sf_grow(ss->conns, &ss->conns_cap, sizeof *ss->conns);
        }
        c = &ss->conns[ss->nconns++];
        memset(c, 0, sizeof *c);
        c->id = ++ss->next_id;
        c->wsi = wsi;
        c->actor = a; /* the spawn reference moves here */
        ps->id = c->id;
        uint8_t addr[PR_PK_BYTES];
        struct sockaddr_storage client;
        cd_wsi_client(wsi, ss->proxies, &client); /* AF_UNSPEC: cd_addr_key's zero */
        cd_addr_key((const struct sockaddr *)&client, addr);
        cd__session_init(rt_state(a), ss, c->id, a, host, addr);
        client_text(&client, ((cd__session *)rt_state(a))->view.from, sizeof ((cd__session *)rt_state(a))->view.from);
        rt_send(a, rt_msg_new(CD__SESS_M_START, sizeof(rt_msg)));
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
        c = conn_find(ss, ps->id);
        if (c == NULL)
            return -1;
        if (c->bad || c->closing)
            return 0; /* a refused frame's rest, or anything after the last word: dropped */
        if (!lws_frame_is_binary(wsi)) {
            c->bad = true; /* a text frame ends the cd__session */
            close_with(c, CD__CLOSE_UNSUPPORTED, "text frames are not part of the protocol: one msgpack value a binary frame");
            return close_now(wsi, c);
        }
        if (c->rx_len + len + lws_remaining_packet_payload(wsi) > PR_MAX_FRAME) {
            /* Refused without parsing (PROTOCOL.md §1), as soon as the
             * frame's header says it is too long: the session answers
             * EFRAMESIZE and closes; until then what is left of the frame
             * is dropped as it arrives, so none of it is buffered. */
            c->bad = true;
            free(c->rx);
            c->rx = NULL;
            c->rx_len = 0;
            rt_send(c->actor, rt_msg_new(CD__SESS_M_OVERSIZE, sizeof(rt_msg)));
            return 0;
        }
        {
            uint8_t *nb = realloc(c->rx, c->rx_len + len + 1);
            if (nb == NULL)
                sf_oom(c->rx_len + len + 1);
            c->rx = nb;
            memcpy(c->rx + c->rx_len, in, len);
            c->rx_len += len;
        }
        if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
            cd__frame_msg *f = RT_MSG_NEW(cd__frame_msg, CD__SESS_M_FRAME);
            f->hdr.release = frame_release;
            f->bytes = c->rx;
            f->len = c->rx_len;
            c->rx = NULL;
            c->rx_len = 0;
            rt_send(c->actor, &f->hdr);
        }
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        c = conn_find(ss, ps->id);
        if (c == NULL)
            return -1;
        if (c->nout == 0 && c->closing && !c->shut) { /* its last frame went in an earlier turn */
            close_later(wsi, c);
            return 0;
        }
        if (c->nout > 0) {
            cd__frame f = c->out[c->out_head];
            c->out_head = (c->out_head + 1) % c->out_cap;
            c->nout--;
            int w = lws_write(wsi, f.buf + LWS_PRE, f.len, LWS_WRITE_BINARY);
            free(f.buf);
            if (w < (int)f.len)
                return -1;
        }
        if (c->nout > 0 || (c->closing && !c->shut)) /* one write a turn: the close frame in the next */
            lws_callback_on_writable(wsi);
        return 0;
    case LWS_CALLBACK_TIMER:
        c = conn_find(ss, ps->id);
        return c != NULL && c->shut ? close_now(wsi, c) : 0;
    case LWS_CALLBACK_CLOSED:
        for (size_t i = 0; ss != NULL && i < ss->nconns; i++) {
            if (ss->conns[i].id != ps->id)
                continue;
            rt_send(ss->conns[i].actor, rt_msg_new(CD__SESS_M_CLOSED, sizeof(rt_msg)));
            conn_free(&ss->conns[i]);
            ss->conns[i] = ss->conns[--ss->nconns];
            break;
        }
        return 0;
    default:
        return 0;
    }
}

size_t cd_session_pss_size(void)
{
    return sizeof(cd__link_pss);
}

unsigned cd_sessions_count(const cd_sessions *ss)
{
    return (unsigned)ss->nconns;
}

void cd_sessions_stats_get(const cd_sessions *ss, cd_sessions_stats *out)
{
    *out = ss->stats;
}

cd_sessions *cd_sessions_create(rt_system *sys, const cd_sessions_opts *opts)
{
    cd_sessions *ss = calloc(1, sizeof *ss);
    if (ss == NULL)
        sf_oom(sizeof *ss);
    ss->sys = sys;
    ss->store = rt_actor_retain(opts->store);
    ss->scheduler = rt_actor_retain(opts->scheduler);
    ss->open_enrolment = opts->open_enrolment;
    ss->proxies = opts->proxies;
    ss->heartbeat_ms = opts->heartbeat_ms ? opts->heartbeat_ms : 5000;
    ss->publish = opts->publish;
    ss->publish_ctx = opts->publish_ctx;
    return ss;
}

void cd_sessions_destroy(cd_sessions *ss)
{
    if (ss == NULL)
        return;
    for (size_t i = 0; i < ss->nconns; i++)
        conn_free(&ss->conns[i]);
    free(ss->conns);
    free(ss->penalties);
    free(ss->addr_penalties);
    rt_actor_release(ss->store);
    rt_actor_release(ss->scheduler);
    free(ss);
}

/* ---- penalties (loop thread: sessions and the table share it) ---- */

static cd__penalty *penalty_find(cd__penalty *list, const uint8_t who[PR_PK_BYTES])
{
    for (size_t i = 0; list != NULL && i < CD__SESS_PENALTY_SLOTS; i++)
        if (list[i].until_ms != 0 && memcmp(list[i].who, who, PR_PK_BYTES) == 0)
            return &list[i];
    return NULL;
}

/* Ms for which who is still refused; 0 when it is not. */
uint64_t cd__penalty_left(cd__penalty *list, const uint8_t who[PR_PK_BYTES], uint64_t now)
{
    const cd__penalty *p = penalty_find(list, who);
    return p != NULL && p->until_ms > now ? p->until_ms - now : 0;
}

/* who (a key or an address) ended a session by abuse: refuse it for
 * longer each time. */
void cd__penalise(cd__penalty **list, const uint8_t who[PR_PK_BYTES], uint64_t now)
{
    if (*list == NULL) {
        *list = calloc(CD__SESS_PENALTY_SLOTS, sizeof **list);
        if (*list == NULL)
            sf_oom(CD__SESS_PENALTY_SLOTS * sizeof **list);
    }
    cd__penalty *p = penalty_find(*list, who);
    if (p == NULL) {
        p = &(*list)[0];
        for (size_t i = 1; i < CD__SESS_PENALTY_SLOTS && p->until_ms != 0; i++)
            if ((*list)[i].until_ms < p->until_ms)
                p = &(*list)[i];
        memset(p, 0, sizeof *p);
        memcpy(p->who, who, PR_PK_BYTES);
    }
    if (now - p->last_ms > CD__SESS_PENALTY_FORGET_MS)
        p->offences = 0;
    uint64_t ms = CD__SESS_PENALTY_BASE_MS;
    for (uint32_t i = 0; i < p->offences && ms < CD__SESS_PENALTY_MAX_MS; i++)
        ms *= 2;
    p->offences++;
    p->last_ms = now;
    p->until_ms = now + (ms < CD__SESS_PENALTY_MAX_MS ? ms : CD__SESS_PENALTY_MAX_MS);
}

/* ---- revocation ------------------------------------------------------------------ */

unsigned cd__sessions_end_key(cd_sessions *ss, const uint8_t pk[PR_PK_BYTES], const char *reason, const char *message)
{
    unsigned n = 0;
    for (size_t i = 0; i < ss->nconns; i++) {
        cd__link *c = &ss->conns[i];
        cd__session *s = rt_state(c->actor);
        if (c->closing || (s->phase != CD__SESS_ENROLLING && s->phase != CD__SESS_RUNNING) ||
            memcmp(s->pk, pk, PR_PK_BYTES) != 0)
            continue;
        /* The session's own way to end with an error, as for missed
         * heartbeats: its actor is pinned to this thread, so it is not in
         * its behaviour now, and from here on it drops the node's frames
         * and any answer to its enrolment (phase CLOSED); the closed
         * connection brings it CD__SESS_M_CLOSED, which gives its claims
         * back and says node.offline with this reason. */
        s->offline_reason = reason;
        cd__session_send_error(s, 0, CD__E_NOT_ENROLLED, message, true);
        n++;
    }
    return n;
}

unsigned cd__sessions_revoke(cd_sessions *ss, const uint8_t pk[PR_PK_BYTES])
{
    return cd__sessions_end_key(ss, pk, "revoked", "this node was revoked");
}

cd__session *cd__sessions_live_key(cd_sessions *ss, const uint8_t pk[PR_PK_BYTES], const cd__session *except)
{
    for (size_t i = 0; i < ss->nconns; i++) {
        cd__session *s = rt_state(ss->conns[i].actor);
        if (s != except && !ss->conns[i].closing && s->phase == CD__SESS_RUNNING && memcmp(s->pk, pk, PR_PK_BYTES) == 0)
            return s;
    }
    return NULL;
}

bool cd__sessions_has_node(const cd_sessions *ss, uint64_t id)
{
    for (size_t i = 0; i < ss->nconns; i++) {
        const cd__session *s = rt_state(ss->conns[i].actor);
        if (s->node_id == id && (s->phase == CD__SESS_RUNNING || s->phase == CD__SESS_ENROLLING))
            return true;
    }
    return false;
}

/* ---- the registry's live half ---------------------------------------------------- */

/* A session's live entry. Sessions and this table share the loop thread,
 * so reading it here never races its writer. */
static const cd_node_view *session_view(rt_actor *a)
{
    return &((cd__session *)rt_state(a))->view;
}

void cd_sessions_each(const cd_sessions *ss, void (*fn)(void *ctx, const cd_node_view *v), void *ctx)
{
    for (size_t i = 0; i < ss->nconns; i++)
        if (!ss->conns[i].closing && session_view(ss->conns[i].actor)->node != 0)
            fn(ctx, session_view(ss->conns[i].actor));
}

int cd_node_view_json(const cd_node_view *v, char *buf, size_t cap)
{
    char owner[300], version[140], os[80], arch[80], sum[80], name[400];
    return snprintf(buf, cap,
        "\"node\":%" PRIu64 ",\"name\":%s,\"owner\":%s,\"tier\":\"%s\",\"online\":true,\"version\":%s,\"checksum\":%s,"
        "\"protocol\":%d,"
        "\"os\":%s,\"arch\":%s,\"cores\":%u,\"max_parallel\":%u,\"slots\":%u,\"in_flight\":%u,"
        "\"chunks_done\":%" PRIu64 ",\"malformed\":%" PRIu64 ",\"items_done\":%" PRIu64 ",\"items_per_s\":%.0f,"
        "\"connected_ms\":%" PRIu64 ",\"last_seen_ms\":%" PRIu64,
        v->node, v->name[0] ? cd_json_quote(name, sizeof name, v->name) : "null", cd_json_quote(owner, sizeof owner, v->owner), v->tier, cd_json_quote(version, sizeof version, v->version),
        cd_json_quote(sum, sizeof sum, v->checksum), PR_VERSION, cd_json_quote(os, sizeof os, v->os), cd_json_quote(arch, sizeof arch, v->arch), v->cores,
        v->max_parallel, v->slots, v->in_flight, v->chunks_done, v->malformed, v->items_done, v->items_per_s, v->connected_ms,
        v->last_seen_ms);
}

void cd_sessions_save_all(cd_sessions *ss)
{
    ss->save_round++;
    for (size_t i = 0; i < ss->nconns; i++) {
        cd__save_msg *m = RT_MSG_NEW(cd__save_msg, CD__SESS_M_SAVE);
        m->round = ss->save_round;
        if (rt_send(ss->conns[i].actor, &m->hdr) == RT_EOVERLOAD)
            rt_msg_free(&m->hdr);
    }
}

unsigned cd_sessions_saves_pending(const cd_sessions *ss)
{
    unsigned n = 0;
    for (size_t i = 0; i < ss->nconns; i++) {
        const cd__session *s = rt_state(ss->conns[i].actor);
        n += s->node_id != 0 && s->save_round < ss->save_round;
    }
    return n;
}

void cd_sessions_close_all(cd_sessions *ss, const char *why)
{
    for (size_t i = 0; i < ss->nconns; i++)
        link_close(&ss->conns[i], CD__CLOSE_GOING_AWAY, why);
}

void cd_sessions_cancel_job(cd_sessions *ss, uint64_t job, const char *reason)
{
    for (size_t i = 0; i < ss->nconns; i++) {
        if (ss->conns[i].closing || session_view(ss->conns[i].actor)->node == 0)
            continue;
        cd__cancel_msg *c = RT_MSG_NEW(cd__cancel_msg, CD__SESS_M_CANCEL);
        c->job = job;
        snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
        rt_send(ss->conns[i].actor, &c->hdr);
    }
}

