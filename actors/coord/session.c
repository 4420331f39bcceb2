/*
 * session.c — see session.h.
 *
 * The connection table (conns) belongs to the loop thread: lws callbacks add
 * and remove entries, queue received frames to the session actor, and
 * write queued frames when lws says a connection is writable. Session
 * actors are pinned to the loop thread, so they use the table directly to
 * send; a connection that closes leaves the table at once, and its actor
 * learns it from a message.
 */
#include "base/log.h"
#include "actors/coord/session.h"

#include "actors/coord/events.h"
#include "actors/coord/scheduler.h"
#include "actors/coord/store.h"
#include "proto/msg.h"
#include "base/version.h"
#include "proto/replay.h"
#include "proto/sign.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SERVER_VERSION "simfarm " SF_VERSION

/* Application error codes (proto/PROTOCOL.md §7, positive numbers). */
enum { E_NOT_ENROLLED = 1, E_NOT_READY = 2, E_JOB = 3, E_DATABASE = 4, E_RATE_LIMITED = 5 };

/* Frames a node may send: RATE_PER_S a second on average, RATE_BURST at
 * once. An honest node sends a few a second (completions are batched). */
enum { RATE_PER_S = 200, RATE_BURST = 400 };

/* Escalating penalties (docs/reliability.md, "Penalties"). A session may
 * earn STRIKE_BURST bad frames at once, one more every STRIKE_REFILL_MS: a
 * bad frame is one that does not decode, a completion whose signature does
 * not verify or that is replayed, a message a coordinator does not take.
 * An honest node sends none; a clock off by more than 300 s (ESKEW) is
 * answered but costs no strike. A session closed for abuse (strikes run
 * out, a flood, a frame past the limit) puts its node key on the penalty
 * list: its next hellos are refused, before any signature check or
 * database work, for PENALTY_BASE_MS, doubling with each offence up to
 * PENALTY_MAX_MS; offences are forgotten after PENALTY_FORGET_MS without
 * one. The list holds PENALTY_SLOTS keys; a full list drops the entry
 * whose refusal ends first. A key is what an offender must pay for (an
 * enrolment) to replace.
 *
 * Under open enrolment a key costs nothing, so the address a session
 * closed for abuse came from goes on a list of its own, with the same
 * escalation: while it is on it, new node connections from that address
 * (an IPv4 address, or an IPv6 /64) are refused before the challenge. The
 * sessions it already has go on, so honest nodes behind an offender's NAT
 * keep working; a node of theirs that reconnects meanwhile is refused and
 * tries again after its backoff. A refused connection is held, unread, for
 * up to TARPIT_MS before its error and close: an offender that waits for
 * the answer (as each connection must) then costs one connection a
 * TARPIT_MS, not one a round trip. At most HELD_MAX are held; past that
 * the refusal comes at once. */
enum { STRIKE_BURST = 16, STRIKE_REFILL_MS = 10000 };
enum { PENALTY_SLOTS = 4096, TARPIT_MS = 2000, HELD_MAX = 256 };
#define PENALTY_BASE_MS 2000u
#define PENALTY_MAX_MS (15u * 60 * 1000)
#define PENALTY_FORGET_MS (60u * 60 * 1000)
/* A working session's accepted chunks go to its node_work row every this
 * many heartbeat intervals (a minute at the default 5 s), and when it ends. */
#define WORK_SAVE_BEATS 12u

enum {
    M_START = RT_MSG_USER + 0x1400,
    M_FRAME,
    M_CLOSED,
    M_RETRY,
    M_WATCH,
    M_CANCEL,
    M_OVERSIZE,
    M_REFUSE,
    M_SAVE,                /* save_msg: write the work now (the coordinator stops) */
    M_HELLO_DUE,           /* the time for the hello is over */
    HELLO_MIN_MS = 10000,  /* the hello is due within this or 3 heartbeat intervals, the longer */
    MAX_BATCHES = 64,
    MAX_INFLIGHT = 1024,
    CLAIM_RETRY_MS = 1000, /* a claim the scheduler did not answer in time is asked again after this */
    CLOSE_LINGER_S = 5,    /* how long a closed session waits for the node to close */
};

/* ---- the connection table (loop thread) -------------------------------------------- */

typedef struct frame {
    uint8_t *buf;          /* LWS_PRE bytes of headroom, then the frame */
    size_t len;
} frame;

typedef struct conn {
    uint64_t id;
    struct lws *wsi;
    rt_actor *actor;       /* the session; retained */
    frame *out;
    size_t nout, out_cap, out_head;
    uint8_t *rx;
    size_t rx_len;
    bool closing, bad, shut;
} conn;

/* A penalty list's entry: who is a node key, or an address in its first
 * 16 bytes (IPv4 as ::ffff:a.b.c.d, IPv6 to its /64), the rest zero. */
typedef struct penalty {
    uint8_t who[PR_PK_BYTES];
    uint64_t until_ms;     /* refused before this; 0 = a free slot */
    uint64_t last_ms;      /* the last offence */
    uint32_t offences;
} penalty;

struct cd_sessions {
    rt_system *sys;
    rt_actor *store, *scheduler;
    bool open_enrolment;
    const cd_proxies *proxies;
    uint32_t heartbeat_ms;
    cd_publish_fn publish;
    void *publish_ctx;
    conn *conns;
    size_t nconns, conns_cap;
    uint64_t next_id;
    penalty *penalties;    /* keys: PENALTY_SLOTS, allocated at the first offence */
    penalty *addr_penalties; /* addresses: the same */
    unsigned nheld;        /* refused connections held (TARPIT_MS) */
    cd_sessions_stats stats;
    uint64_t save_round;   /* cd_sessions_save_all's calls */
};

typedef struct pss {
    uint64_t id;
} pss;

typedef struct save_msg {
    rt_msg hdr;
    uint64_t round;
} save_msg;

typedef struct frame_msg {
    rt_msg hdr;
    uint8_t *bytes;
    size_t len;
} frame_msg;

static conn *conn_find(cd_sessions *ss, uint64_t id)
{
    for (size_t i = 0; i < ss->nconns; i++)
        if (ss->conns[i].id == id)
            return &ss->conns[i];
    return NULL;
}

static void conn_free(conn *c)
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
static int link_send(cd_sessions *ss, uint64_t id, const uint8_t *bytes, size_t len)
{
    conn *c = conn_find(ss, id);
    if (c == NULL || c->closing)
        return -1;
    if (c->nout == c->out_cap)
        c->out = sf_grow_ring(c->out, &c->out_head, c->nout, &c->out_cap, sizeof *c->out);
    uint8_t *buf = malloc(LWS_PRE + len);
    if (buf == NULL)
        sf_oom(LWS_PRE + len);
    memcpy(buf + LWS_PRE, bytes, len);
    c->out[(c->out_head + c->nout++) % c->out_cap] = (frame){ buf, len };
    lws_callback_on_writable(c->wsi);
    return 0;
}

/* Closes the connection once what is queued has been written. */
static void link_close(cd_sessions *ss, uint64_t id)
{
    conn *c = conn_find(ss, id);
    if (c != NULL && !c->closing) {
        c->closing = true;
        lws_callback_on_writable(c->wsi);
    }
}

static void frame_release(rt_msg *m)
{
    free(((frame_msg *)m)->bytes);
}

static void session_behaviour(rt_actor *self, rt_msg *m);
static void session_final(rt_actor *self);
typedef struct session session;
static void session_init(session *s, cd_sessions *ss, uint64_t conn_id, rt_actor *self, const char *host,
    const uint8_t addr[PR_PK_BYTES]);

/* Holds a connection's reads (a refused connection waits unread) or lets
 * them go again. */
static void link_hold(cd_sessions *ss, uint64_t id, bool hold)
{
    conn *c = conn_find(ss, id);
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

static size_t session_size(void);

int cd_session_lws_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    pss *ps = user;
    const struct lws_protocols *proto = lws_get_protocol(wsi);
    cd_sessions *ss = proto ? proto->user : NULL;
    conn *c;

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
        rt_actor_opts o = { .state_size = session_size(), .pinned = true, .finalize = session_final, .name = "session" };
        rt_actor *a = rt_spawn(ss->sys, session_behaviour, &o);
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
        session_init(rt_state(a), ss, c->id, a, host, addr);
        rt_send(a, rt_msg_new(M_START, sizeof(rt_msg)));
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
        c = conn_find(ss, ps->id);
        if (c == NULL)
            return -1;
        if (c->bad || c->closing)
            return 0; /* a refused frame's rest, or anything after the last word: dropped */
        if (!lws_frame_is_binary(wsi)) {
            c->bad = true; /* a text frame ends the session */
            return -1;
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
            rt_send(c->actor, rt_msg_new(M_OVERSIZE, sizeof(rt_msg)));
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
            frame_msg *f = RT_MSG_NEW(frame_msg, M_FRAME);
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
        if (c->nout > 0) {
            frame f = c->out[c->out_head];
            c->out_head = (c->out_head + 1) % c->out_cap;
            c->nout--;
            int w = lws_write(wsi, f.buf + LWS_PRE, f.len, LWS_WRITE_BINARY);
            free(f.buf);
            if (w < (int)f.len)
                return -1;
        }
        if (c->nout > 0)
            lws_callback_on_writable(wsi);
        else if (c->closing && !c->shut) {
            /* A lingering close: send FIN, then read and drop what the node
             * still sends until it closes too (at most CLOSE_LINGER_S).
             * Closed at once, a socket with unread bytes is reset, and the
             * reset can discard the error just written before the node
             * reads it: a node cut off for flooding would not learn why. */
            c->shut = true;
            shutdown(lws_get_socket_fd(wsi), SHUT_WR);
            lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_LINGER_S);
        }
        return 0;
    case LWS_CALLBACK_CLOSED:
        for (size_t i = 0; ss != NULL && i < ss->nconns; i++) {
            if (ss->conns[i].id != ps->id)
                continue;
            rt_send(ss->conns[i].actor, rt_msg_new(M_CLOSED, sizeof(rt_msg)));
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
    return sizeof(pss);
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

/* ---- the session actor ------------------------------------------------------------ */

typedef struct inflight {
    uint64_t chunk, job, first, count;
    uint8_t token[16];
    uint8_t ctx_hash[32];  /* the job's work context it was assigned with */
    uint64_t listed_ms;    /* assigned, or last listed in a heartbeat (monotonic) */
    unsigned cls;          /* the workers it was sized for */
} inflight;

/* The workers of one entry of hello's backends, on a node with more than
 * one (a CPU worker per core beside a GPU's): chunks are sized to their
 * own speed (view.backend_items_per_s), not to the node's mix of speeds. */
typedef struct wclass {
    unsigned units;        /* its workers, and its slots when sized apart: a device's 1, the CPU entry's units */
    bool device;           /* OpenCL or CUDA */
} wclass;

typedef struct cancel_msg {
    rt_msg hdr;
    uint64_t job;
    char reason[64];
} cancel_msg;

typedef struct batch {
    uint64_t frame_id, job;
    unsigned n, answered;
    pr_outcome *outcomes;
    bool job_complete, used;
} batch;

typedef enum req_kind { R_ENROL = 1, R_CTX, R_CLAIM, R_COMPLETE, R_SAVE } req_kind;

typedef struct req {
    int64_t id;
    req_kind kind;
    uint64_t frame_id;     /* the node's frame this answers */
    int batch, slot;       /* R_COMPLETE: which batch, which outcome */
    uint8_t token[16];     /* R_COMPLETE: the result's claim token */
    uint64_t job;          /* R_SAVE: the save round */
    uint8_t hash[32];
} req;

struct session {
    cd_sessions *ss;
    uint64_t conn;
    rt_actor *self;
    char host[256];
    uint8_t addr[PR_PK_BYTES]; /* where it connects from, as a penalty list's who */
    bool held;             /* refused, waiting TARPIT_MS unread (counted in nheld) */
    uint64_t held_ms;      /* since when (monotonic) */
    uint8_t nonce[PR_NONCE_BYTES];
    enum { AWAIT_HELLO, ENROLLING, RUNNING, CLOSED } phase;
    uint8_t pk[PR_PK_BYTES];
    uint64_t node_id;
    uint8_t tier;
    bool claim;            /* enrolling with a claim token */
    const char *offline_reason;
    cd_node_view view;      /* the registry's live entry; read by cd_sessions_each (same thread) */
    double bucket;          /* frames it may send now (a token bucket) */
    uint64_t bucket_ms;
    double strikes;         /* bad frames it may still send (a token bucket) */
    uint64_t strikes_ms;
    pr_replay *guard;
    unsigned workers_max;   /* hello's cores (1 when it says 0) and device backends */
    unsigned max_slots;     /* chunks at once: hello's or a heartbeat's max_parallel, within workers_max */
    wclass cls[CD_NODE_BACKENDS];
    unsigned nbk;           /* hello's backends (CD_NODE_BACKENDS at most) */
    unsigned ncls;          /* classes in use: nbk when their units make max_slots, else 1 (all alike) */
    unsigned claim_cls;     /* what the claim under way is for */
    uint64_t heard_ms;      /* the last frame, monotonic (for the heartbeat watch) */
    bool claiming, retry_pending, draining;
    uint64_t next_frame;
    inflight *fly;
    size_t nfly, fly_cap;
    batch batches[MAX_BATCHES];
    req *reqs;
    size_t nreqs, reqs_cap;
    uint64_t saved_chunks;  /* view.chunks_done when the work was last written */
    uint64_t saved_ms;      /* and when (monotonic) */
    uint64_t save_round;    /* the last M_SAVE round whose write the store answered */
};

static size_t session_size(void)
{
    return sizeof(session);
}

static void session_init(session *s, cd_sessions *ss, uint64_t conn_id, rt_actor *self, const char *host,
    const uint8_t addr[PR_PK_BYTES])
{
    s->ss = ss;
    s->conn = conn_id;
    s->self = self;
    snprintf(s->host, sizeof s->host, "%s", host);
    memcpy(s->addr, addr, PR_PK_BYTES);
}

static uint64_t now_s(void)
{
    return (uint64_t)time(NULL);
}

static uint64_t now_ms_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void send_msg(session *s, pr_msg *m)
{
    uint8_t *out = NULL;
    size_t len = 0;
    m->v = PR_VERSION;
    if (m->id == 0 && m->type != PR_MSG_ERROR) /* an error keeps id 0: it answers no frame (§4 error) */
        m->id = ++s->next_frame;
    m->ts = now_ms_wall();
    int rc = pr_encode(m, &out, &len);
    if (rc != 0) {
        sf_log(SF_LOG_WARN, "session", "cannot encode %s: %s", pr_type_name(m->type), sf_strerror(rc));
        return;
    }
    link_send(s->ss, s->conn, out, len);
    free(out);
}

static void send_error(session *s, uint64_t id, int code, const char *message, bool fatal)
{
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_ERROR;
    m.id = id;
    m.body.error.code = code;
    m.body.error.message = message;
    send_msg(s, &m);
    if (fatal) {
        s->phase = CLOSED;
        link_close(s->ss, s->conn);
    }
}

/* ---- penalties (loop thread: sessions and the table share it) ---- */

static penalty *penalty_find(penalty *list, const uint8_t who[PR_PK_BYTES])
{
    for (size_t i = 0; list != NULL && i < PENALTY_SLOTS; i++)
        if (list[i].until_ms != 0 && memcmp(list[i].who, who, PR_PK_BYTES) == 0)
            return &list[i];
    return NULL;
}

/* Ms for which who is still refused; 0 when it is not. */
static uint64_t penalty_left(penalty *list, const uint8_t who[PR_PK_BYTES], uint64_t now)
{
    const penalty *p = penalty_find(list, who);
    return p != NULL && p->until_ms > now ? p->until_ms - now : 0;
}

/* who (a key or an address) ended a session by abuse: refuse it for
 * longer each time. */
static void penalise(penalty **list, const uint8_t who[PR_PK_BYTES], uint64_t now)
{
    if (*list == NULL) {
        *list = calloc(PENALTY_SLOTS, sizeof **list);
        if (*list == NULL)
            sf_oom(PENALTY_SLOTS * sizeof **list);
    }
    penalty *p = penalty_find(*list, who);
    if (p == NULL) {
        p = &(*list)[0];
        for (size_t i = 1; i < PENALTY_SLOTS && p->until_ms != 0; i++)
            if ((*list)[i].until_ms < p->until_ms)
                p = &(*list)[i];
        memset(p, 0, sizeof *p);
        memcpy(p->who, who, PR_PK_BYTES);
    }
    if (now - p->last_ms > PENALTY_FORGET_MS)
        p->offences = 0;
    uint64_t ms = PENALTY_BASE_MS;
    for (uint32_t i = 0; i < p->offences && ms < PENALTY_MAX_MS; i++)
        ms *= 2;
    p->offences++;
    p->last_ms = now;
    p->until_ms = now + (ms < PENALTY_MAX_MS ? ms : PENALTY_MAX_MS);
}

/* Ends the session for abuse: the error, then the close; its address
 * goes on the penalty list, and an enrolled node's key on its own. */
static void cut_off(session *s, int code, const char *why, const char *reason)
{
    uint64_t now = now_ms_wall();
    s->offline_reason = reason;
    s->ss->stats.cut_off++;
    penalise(&s->ss->addr_penalties, s->addr, now);
    if (s->phase == RUNNING || s->phase == ENROLLING)
        penalise(&s->ss->penalties, s->pk, now);
    send_error(s, 0, code, why, true);
}

/* Refuses a connection from an address on the penalty list, left ms
 * before it comes off. */
static void refuse(session *s, uint64_t left)
{
    char why[200];
    snprintf(why, sizeof why, "connections from this address are refused for %" PRIu64 " s more: a session from it "
        "was closed for abuse (the refusal doubles with each)", (left + 999) / 1000);
    s->ss->stats.refused++;
    send_error(s, 0, E_RATE_LIMITED, why, true);
}

/* Takes a strike for a bad frame; when they run out the session ends. */
static void strike(session *s)
{
    uint64_t now = now_ms_wall();
    if (s->strikes_ms == 0) {
        s->strikes = STRIKE_BURST;
        s->strikes_ms = now;
    }
    s->strikes += (double)(now - s->strikes_ms) / STRIKE_REFILL_MS;
    if (s->strikes > STRIKE_BURST)
        s->strikes = STRIKE_BURST;
    s->strikes_ms = now;
    s->strikes -= 1;
    if (s->strikes < 0) {
        char why[128];
        snprintf(why, sizeof why, "more than %d bad frames (one more each %d s): the session is closed",
            STRIKE_BURST, STRIKE_REFILL_MS / 1000);
        cut_off(s, E_RATE_LIMITED, why, "too many bad frames");
    }
}

static req *req_add(session *s, int64_t id, req_kind kind)
{
    if (s->nreqs == s->reqs_cap) {
        s->reqs = sf_grow(s->reqs, &s->reqs_cap, sizeof *s->reqs);
    }
    req *r = &s->reqs[s->nreqs++];
    memset(r, 0, sizeof *r);
    r->id = id;
    r->kind = kind;
    return r;
}

/* The chunks the node computes at once, as hello or a later heartbeat
 * says: within workers_max and 256. True when that is more than before.
 * Its backends' workers are sized apart when each has its own slots, that
 * is when their units add up to the slots; otherwise all are alike. */
static bool set_slots(session *s, unsigned max_parallel)
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

static unsigned fly_in(const session *s, unsigned cls)
{
    unsigned n = 0;
    for (size_t k = 0; k < s->nfly; k++)
        n += s->fly[k].cls == cls;
    return n;
}

/* With chunks sized per backend, the class to claim for: of those with a
 * free slot, the fastest, and devices before CPUs while speeds are
 * unknown; ncls when none is free. */
static unsigned claim_class(const session *s)
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
static void claim_more(session *s)
{
    if (s->phase != RUNNING || s->claiming || s->draining || s->nfly >= s->max_slots)
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
    c->node = (sc_node_info){ .id = s->node_id, .session = s->conn, .tier = s->tier, .backends = 1, .mem_bytes = UINT64_MAX,
        .items_per_s = speed };
    s->claim_cls = k;
    c->slots = free_slots > CD_MAX_CLAIMS ? CD_MAX_CLAIMS : free_slots;
    int64_t id = rt_request(s->self, s->ss->scheduler, &c->hdr, 10000);
    if (id > 0) {
        req_add(s, id, R_CLAIM);
        s->claiming = true;
    }
}

/* Asks for work again after ms (once, however often it is called
 * meanwhile). */
static void retry_claim(session *s, unsigned ms)
{
    if (!s->retry_pending) {
        s->retry_pending = true;
        rt_send_after(s->self, ms, rt_msg_new(M_RETRY, sizeof(rt_msg)));
    }
}

static void on_claimed(session *s, const cd_claimed *r)
{
    s->claiming = false;
    if (r->n == 0) {
        /* The scheduler kept the claim while it had nothing: ask again at
         * once, or after the pause it asks for. */
        if (r->retry_ms == 0)
            claim_more(s);
        else
            retry_claim(s, r->retry_ms);
        return;
    }
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
        send_msg(s, &m);
    }
    s->view.in_flight = (unsigned)s->nfly;
    claim_more(s);
}

static void publish(session *s, const char *type, const char *fields)
{
    if (s->ss->publish != NULL)
        s->ss->publish(s->ss->publish_ctx, type, 0, fields);
}

static const char *backend_name(uint32_t kind)
{
    static const char *names[] = { "cpu", "opencl", "cuda", "wasm" };
    return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

/* The hello's capabilities as the JSON kept in nodes.capabilities. */
static char *caps_json(const pr_caps *c, const char *checksum)
{
    size_t cap = 512 + (size_t)c->nbackends * 400, n = 0;
    char *j = malloc(cap), q1[80], q2[80], q3[80];
    if (j == NULL)
        sf_oom(cap);
    n += (size_t)snprintf(j + n, cap - n, "{\"cores\":%u,\"max_parallel\":%u,\"os\":%s,\"arch\":%s,\"browser\":%s,"
        "\"backends\":[", c->cores, c->max_parallel, cd_json_quote(q1, sizeof q1, c->os ? c->os : ""),
        cd_json_quote(q2, sizeof q2, c->arch ? c->arch : ""), cd_json_quote(q3, sizeof q3, c->browser ? c->browser : ""));
    for (uint32_t i = 0; i < c->nbackends && i < 64; i++) {
        char dev[300];
        n += (size_t)snprintf(j + n, cap - n, "%s{\"kind\":\"%s\",\"device\":%s,\"memory\":%" PRIu64 ",\"units\":%u}",
            i ? "," : "", backend_name(c->backends[i].kind),
            cd_json_quote(dev, sizeof dev, c->backends[i].device ? c->backends[i].device : ""),
            c->backends[i].memory, c->backends[i].units);
    }
    char sum[80];
    snprintf(j + n, cap - n, "],\"checksum\":%s}", cd_json_quote(sum, sizeof sum, checksum ? checksum : ""));
    return j;
}

/* Enrolment, in one statement each, so a statement the store sends again
 * after a lost connection gives the same answer: $1 key, $2 version,
 * $3 capabilities, $4 the claim token's hash. All return id, tier,
 * revoked, owner. */
static const char *enrol_claim_sql =
    "WITH t AS (UPDATE tokens SET used_at = coalesce(used_at, now()), used_by = $1 "
    "  WHERE secret_hash = $4 AND kind = 'claim' AND revoked_at IS NULL "
    "    AND (used_at IS NULL OR used_by = $1) AND (expires_at IS NULL OR expires_at > now()) "
    "  RETURNING owner, tier) "
    "INSERT INTO nodes (public_key, owner, tier, last_seen, version, capabilities) "
    "SELECT $1, owner, tier, now(), $2, $3::jsonb FROM t "
    "ON CONFLICT (public_key) DO UPDATE SET owner = EXCLUDED.owner, tier = EXCLUDED.tier, revoked_at = NULL, "
    "  last_seen = now(), version = EXCLUDED.version, capabilities = EXCLUDED.capabilities "
    "RETURNING id, tier, revoked_at IS NOT NULL, coalesce(owner, '')";
static const char *enrol_open_sql =
    "INSERT INTO nodes (public_key, tier, last_seen, version, capabilities) VALUES ($1, 'public', now(), $2, $3::jsonb) "
    "ON CONFLICT (public_key) DO UPDATE SET last_seen = now(), version = $2, capabilities = $3::jsonb "
    "RETURNING id, tier, revoked_at IS NOT NULL, coalesce(owner, '')";
static const char *enrol_known_sql =
    "UPDATE nodes SET last_seen = now(), version = $2, capabilities = $3::jsonb WHERE public_key = $1 "
    "RETURNING id, tier, revoked_at IS NOT NULL, coalesce(owner, '')";

static void on_hello(session *s, pr_msg *m)
{
    pr_hello *h = &m->body.hello;
    uint64_t left = penalty_left(s->ss->penalties, h->pk, now_ms_wall());
    if (left > 0) {
        /* Refused before the signature check: whoever sends it, the key's
         * owner earned the refusal in a session it signed for. */
        char why[160];
        snprintf(why, sizeof why, "this node key is refused for %" PRIu64 " s more: a session of it was closed "
            "for abuse (the refusal doubles with each)", (left + 999) / 1000);
        s->ss->stats.refused++;
        send_error(s, m->id, E_RATE_LIMITED, why, true);
        return;
    }
    int rc = pr_hello_verify(h, s->host, s->nonce, now_s());
    if (rc != 0) {
        send_error(s, m->id, rc, sf_strerror(rc), true);
        return;
    }
    memcpy(s->pk, h->pk, 32);
    /* A worker per core, and one per device (a GPU's worker beside as many
     * CPU workers as cores): that many chunks at once at most. */
    s->workers_max = h->caps.cores ? h->caps.cores : 1;
    s->nbk = h->caps.nbackends < CD_NODE_BACKENDS ? h->caps.nbackends : CD_NODE_BACKENDS;
    for (uint32_t i = 0; i < h->caps.nbackends; i++) {
        const pr_backend *b = &h->caps.backends[i];
        bool device = b->kind == PR_BACKEND_OPENCL || b->kind == PR_BACKEND_CUDA;
        if (device)
            s->workers_max++;
        if (i < CD_NODE_BACKENDS)
            s->cls[i] = (wclass){ .units = device ? 1 : b->units ? b->units : h->caps.cores ? h->caps.cores : 1,
                .device = device };
    }
    set_slots(s, h->caps.max_parallel);
    cd_node_view *v = &s->view;
    snprintf(v->version, sizeof v->version, "%s", h->version ? h->version : "");
    snprintf(v->os, sizeof v->os, "%s", h->caps.os ? h->caps.os : "");
    snprintf(v->arch, sizeof v->arch, "%s", h->caps.arch ? h->caps.arch : "");
    snprintf(v->checksum, sizeof v->checksum, "%s", h->checksum ? h->checksum : "");
    v->cores = h->caps.cores;
    /* A claim token enrols the key under the token's owner and tier;
     * known keys come back with theirs; unknown ones join as public nodes
     * only when enrolment is open. */
    s->claim = h->claim_token != NULL && h->claim_token[0] != '\0';
    cd_query *q = cd_query_new(s->claim ? enrol_claim_sql : s->ss->open_enrolment ? enrol_open_sql : enrol_known_sql);
    char *caps = caps_json(&h->caps, h->checksum);
    cd_query_bytes(q, h->pk, 32);
    cd_query_text(q, v->version);
    cd_query_text(q, caps);
    free(caps);
    if (s->claim) {
        uint8_t hash[crypto_hash_sha256_BYTES];
        crypto_hash_sha256(hash, (const uint8_t *)h->claim_token, strlen(h->claim_token));
        cd_query_bytes(q, hash, sizeof hash);
    }
    int64_t id = rt_request(s->self, s->ss->store, &q->hdr, 10000);
    if (id < 0) {
        send_error(s, m->id, E_DATABASE, "the coordinator is stopping", true);
        return;
    }
    req_add(s, id, R_ENROL)->frame_id = m->id;
    s->phase = ENROLLING;
}

static uint8_t tier_bit(const char *t)
{
    if (strcmp(t, "own") == 0)
        return SC_TIER_OWN;
    if (strcmp(t, "team") == 0)
        return SC_TIER_TEAM;
    if (strcmp(t, "community") == 0)
        return SC_TIER_COMMUNITY;
    return SC_TIER_PUBLIC;
}

static void on_enrolled(session *s, const req *r, cd_result *res)
{
    if (res == NULL || res->res == NULL || PQntuples(res->res) == 0) {
        send_error(s, r->frame_id, res && res->res ? E_NOT_ENROLLED : E_DATABASE,
            !(res && res->res) ? "the database is unavailable, try again"
            : s->claim         ? "the claim token is unknown, used up, revoked or expired: ask for a new one"
                               : "this key is not enrolled: enrol it with a claim token", true);
        return;
    }
    if (strcmp(PQgetvalue(res->res, 0, 2), "t") == 0) {
        send_error(s, r->frame_id, E_NOT_ENROLLED, "this node was revoked", true);
        return;
    }
    s->node_id = strtoull(PQgetvalue(res->res, 0, 0), NULL, 10);
    s->tier = tier_bit(PQgetvalue(res->res, 0, 1));
    if (pr_replay_create(&s->guard, 1024) != 0)
        sf_oom(1024);
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_WELCOME;
    m.id = r->frame_id;
    m.body.welcome.node_id = s->node_id;
    m.body.welcome.heartbeat_ms = s->ss->heartbeat_ms;
    m.body.welcome.config.max_parallel = s->max_slots;
    send_msg(s, &m);
    s->phase = RUNNING;
    rt_send_every(s->self, s->ss->heartbeat_ms, M_WATCH, 0);
    cd_node_view *v = &s->view;
    v->node = s->node_id;
    snprintf(v->tier, sizeof v->tier, "%s", PQgetvalue(res->res, 0, 1));
    snprintf(v->owner, sizeof v->owner, "%s", PQgetvalue(res->res, 0, 3));
    v->connected_ms = v->last_seen_ms = now_ms_wall();
    uint8_t key[16];
    randombytes_buf(key, sizeof key);
    sodium_bin2hex(v->work_key, sizeof v->work_key, key, sizeof key);
    s->heard_ms = s->saved_ms = rt_mono_ms();
    char fields[1024];
    cd_node_view_json(v, fields, sizeof fields);
    publish(s, "node.online", fields);
    claim_more(s);
}

/* Writes what the session has had accepted to its node_work row, and the
 * node's last_seen (also when `ending` with nothing accepted). The row holds
 * totals that an update never lowers, so the store may run the statement
 * twice. Only a stopping coordinator waits for the answer (round > 0: M_SAVE);
 * a write lost with a coordinator killed costs the node's totals at most
 * WORK_SAVE_BEATS heartbeat intervals of this session. */
static void save_work(session *s, bool ending, uint64_t round)
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
            req_add(s, id, R_SAVE)->job = round;
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
static void on_watch(session *s)
{
    uint64_t limit = 3 * (uint64_t)s->ss->heartbeat_ms;
    if (s->phase == RUNNING && rt_mono_ms() - s->saved_ms >= WORK_SAVE_BEATS * (uint64_t)s->ss->heartbeat_ms)
        save_work(s, false, 0);
    if (s->phase != RUNNING || rt_mono_ms() - s->heard_ms <= limit)
        return;
    s->offline_reason = "missed heartbeats";
    char why[96];
    snprintf(why, sizeof why, "nothing heard for %" PRIu64 " s (3 heartbeat intervals)", limit / 1000);
    send_error(s, 0, E_NOT_READY, why, true);
}

/* The coordinator stops a job: the node drops its chunks of it. */
static void on_cancel(session *s, const cancel_msg *c)
{
    if (s->phase != RUNNING)
        return;
    uint64_t chunks[MAX_INFLIGHT];
    uint32_t n = 0;
    for (size_t i = 0; i < s->nfly;) {
        if (s->fly[i].job == c->job && n < MAX_INFLIGHT) {
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
    send_msg(s, &m);
    s->view.in_flight = (unsigned)s->nfly;
    claim_more(s);
}

static void on_ctx_req(session *s, pr_msg *m)
{
    cd_query *q = cd_query_new("SELECT params, ctx_hash FROM jobs WHERE id = $1");
    cd_query_int(q, (int64_t)m->body.ctx_req.job);
    q->binary_result = 1;
    int64_t id = rt_request(s->self, s->ss->store, &q->hdr, 10000);
    if (id < 0)
        return;
    req *r = req_add(s, id, R_CTX);
    r->frame_id = m->id;
    r->job = m->body.ctx_req.job;
    memcpy(r->hash, m->body.ctx_req.hash, 32);
}

static void on_ctx(session *s, const req *r, cd_result *res)
{
    if (res == NULL || res->res == NULL || PQntuples(res->res) == 0 || PQgetlength(res->res, 0, 1) != 32 ||
        memcmp(PQgetvalue(res->res, 0, 1), r->hash, 32) != 0) {
        send_error(s, r->frame_id, E_JOB, "no such job, or not this work context", false);
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
    send_msg(s, &m);
}

/* The claim this session holds for chunk `chunk` of job under `token`, or
 * -1. By the token too: a job's chunk ids go on after the highest accepted
 * one when the coordinator starts again, so a chunk a node still computes
 * from before and a claim handed out since can share an id. */
static int fly_find(const session *s, uint64_t job, uint64_t chunk, const uint8_t token[16])
{
    for (size_t i = 0; i < s->nfly; i++)
        if (s->fly[i].chunk == chunk && s->fly[i].job == job && memcmp(s->fly[i].token, token, 16) == 0)
            return (int)i;
    return -1;
}

/* Sends a batch's complete_ack once every result has its outcome, and
 * frees the batch. */
static void batch_ack(session *s, batch *bt)
{
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE_ACK;
    m.id = bt->frame_id;
    m.body.complete_ack.job = bt->job;
    m.body.complete_ack.job_complete = bt->job_complete;
    m.body.complete_ack.outcomes = bt->outcomes;
    m.body.complete_ack.noutcomes = bt->n;
    send_msg(s, &m);
    free(bt->outcomes);
    bt->used = false;
    claim_more(s);
}

static void on_complete(session *s, pr_msg *m)
{
    pr_complete *c = &m->body.complete;
    int rc = pr_complete_verify(c, s->pk, 32, s->host, now_s(), s->guard);
    if (rc != 0) {
        send_error(s, m->id, rc, sf_strerror(rc), false);
        if (rc != PR_ESKEW) /* an honest node's clock can be wrong; its signature cannot */
            strike(s);
        return;
    }
    int b = -1;
    for (int i = 0; i < MAX_BATCHES; i++)
        if (!s->batches[i].used) {
            b = i;
            break;
        }
    if (b < 0 || c->batch.nresults == 0) {
        send_error(s, m->id, E_JOB, b < 0 ? "too many batches in flight" : "an empty batch", false);
        strike(s);
        return;
    }
    batch *bt = &s->batches[b];
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
         * another work context than its job's, is stale, even when its
         * data is a good result of that many items: counting it would
         * merge other items than the claim's (some twice), or other
         * numbers. The ledger knows a claim by its token alone, so range
         * and context are checked here, for the claims this session handed
         * out; a claim from an earlier session of the node is matched by
         * token only. */
        int k = fly_find(s, c->batch.job, r->chunk, r->token);
        if (k >= 0 && (s->fly[k].first != r->start || s->fly[k].count != r->count ||
             memcmp(s->fly[k].ctx_hash, c->batch.ctx_hash, 32) != 0)) {
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
        int64_t id = rt_request(s->self, s->ss->scheduler, &q->hdr, 70000);
        if (id < 0) {
            bt->answered++;
            continue;
        }
        req *rq = req_add(s, id, R_COMPLETE);
        rq->batch = b;
        rq->slot = (int)i;
        memcpy(rq->token, r->token, 16);
    }
    if (bt->answered == bt->n) /* nothing was asked: answer now */
        batch_ack(s, bt);
}

static void on_completed(session *s, const req *r, const cd_completed *res)
{
    batch *bt = &s->batches[r->batch];
    pr_outcome *o = &bt->outcomes[r->slot];
    /* what the node is told of each kind: an unanswered or refused result
     * is stale to it */
    static const int told[CD_RESULT_KINDS] = { PR_OUTCOME_ACCEPTED, PR_OUTCOME_IDEMPOTENT, PR_OUTCOME_CONFLICT,
        PR_OUTCOME_STALE, PR_OUTCOME_STALE, PR_OUTCOME_STALE };
    int kind = res == NULL                   ? CD_RESULT_UNANSWERED
             : res->err != 0                 ? CD_RESULT_INVALID
             : res->outcome == SC_ACCEPTED   ? CD_RESULT_ACCEPTED
             : res->outcome == SC_IDEMPOTENT ? CD_RESULT_IDEMPOTENT
             : res->outcome == SC_CONFLICT   ? CD_RESULT_CONFLICT
                                             : CD_RESULT_STALE;
    s->ss->stats.results[kind]++;
    o->outcome = told[kind];
    if (res != NULL && res->err == 0)
        bt->job_complete |= res->job_complete;
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
static void token_to(session *s, cd_renew **r, int type, const uint8_t token[16])
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

/* Whether a result under this claim token waits for the scheduler's
 * answer: the node lists it no more, and the claim is not its to give
 * back (the answer frees it). */
static bool result_pending(const session *s, const uint8_t token[16])
{
    for (size_t i = 0; i < s->nreqs; i++)
        if (s->reqs[i].kind == R_COMPLETE && memcmp(s->reqs[i].token, token, 16) == 0)
            return true;
    return false;
}

/* The node lists the chunks it holds, queued or computing, by chunk id
 * (ids restart with each job, so every claim with a listed id counts as
 * listed). Those are renewed. One it has not listed for two heartbeat
 * intervals is not held there any more (it failed, or the job's context
 * could not be had): its slot is freed for other work and the scheduler
 * hands its range out again now (an attempt, as a lease that ran out). A
 * chunk the node has computed leaves its list as its result goes into a
 * batch, which is sent within 50 ms (actors/node/node.c), long before that;
 * while the scheduler has not answered its result, it counts as listed. A
 * claim just assigned is renewed until the node has had time to list it. */
static void on_heartbeat(session *s, pr_msg *m)
{
    const pr_heartbeat *hb = &m->body.heartbeat;
    if (hb->max_parallel != 0 && set_slots(s, hb->max_parallel))
        claim_more(s); /* more slots: work for them now, if any */
    if (s->nfly == 0) /* nothing to renew: the scheduler need not hear of it */
        return;
    uint64_t now = rt_mono_ms(), grace = 2 * (uint64_t)s->ss->heartbeat_ms;
    cd_renew *renew = NULL, *give_back = NULL;
    for (size_t k = 0; k < s->nfly;) {
        inflight *f = &s->fly[k];
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
    claim_more(s);
}

/* Takes one frame's token; false when the node sends too fast. */
static bool rate_ok(session *s, uint64_t now)
{
    if (s->bucket_ms == 0) {
        s->bucket = RATE_BURST;
        s->bucket_ms = now;
    }
    s->bucket += (double)(now - s->bucket_ms) * RATE_PER_S / 1000.0;
    if (s->bucket > RATE_BURST)
        s->bucket = RATE_BURST;
    s->bucket_ms = now;
    if (s->bucket < 1)
        return false;
    s->bucket -= 1;
    return true;
}

static void on_frame(session *s, const frame_msg *f)
{
    if (!rate_ok(s, now_ms_wall())) {
        char why[96];
        snprintf(why, sizeof why, "more than %d frames a second (%d at once): the session is closed", RATE_PER_S,
            RATE_BURST);
        cut_off(s, E_RATE_LIMITED, why, "rate limited");
        return;
    }
    pr_msg m;
    s->view.last_seen_ms = now_ms_wall();
    s->heard_ms = rt_mono_ms();
    int rc = pr_decode(&m, f->bytes, f->len);
    if (rc != 0) {
        char why[160];
        if (rc == PR_EVERSION)
            snprintf(why, sizeof why, "unsupported protocol version: this coordinator (%s) speaks version %d; "
                "upgrade the node", SERVER_VERSION, PR_VERSION);
        else
            snprintf(why, sizeof why, "%s%s%s", sf_strerror(rc), m.err_at[0] ? " at " : "", m.err_at);
        send_error(s, m.id, rc, why, s->phase != RUNNING);
        if (s->phase == RUNNING)
            strike(s);
        return;
    }
    if (s->phase == AWAIT_HELLO && m.type != PR_MSG_HELLO) {
        send_error(s, m.id, E_NOT_READY, "say hello first", true);
    } else if (s->phase == ENROLLING) {
        send_error(s, m.id, E_NOT_READY, "wait for welcome", true);
    } else {
        switch (m.type) {
        case PR_MSG_HELLO:
            if (s->phase == AWAIT_HELLO)
                on_hello(s, &m);
            else {
                send_error(s, m.id, E_NOT_READY, "hello was already said", false);
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
                link_close(s->ss, s->conn);
            break;
        case PR_MSG_ERROR:
            sf_log(SF_LOG_WARN, "session", "node %" PRIu64 " says: %s", s->node_id,
                m.body.error.message ? m.body.error.message : "?");
            break;
        default:
            send_error(s, m.id, E_NOT_READY, "a coordinator does not take this message", false);
            strike(s);
            break;
        }
    }
    pr_msg_free(&m);
}

static void on_reply(session *s, rt_msg *msg)
{
    req r;
    bool found = false;
    for (size_t i = 0; i < s->nreqs; i++)
        if (s->reqs[i].id == (int64_t)msg->req_id) {
            r = s->reqs[i];
            s->reqs[i] = s->reqs[--s->nreqs];
            found = true;
            break;
        }
    if (!found || s->phase == CLOSED)
        return;
    bool timeout = msg->type == RT_MSG_TIMEOUT;
    switch (r.kind) {
    case R_ENROL: on_enrolled(s, &r, timeout ? NULL : (cd_result *)msg); break;
    case R_CTX: on_ctx(s, &r, timeout ? NULL : (cd_result *)msg); break;
    case R_CLAIM:
        if (timeout) { /* the scheduler is slow to answer: ask again in a while */
            s->claiming = false;
            retry_claim(s, CLAIM_RETRY_MS);
        } else {
            on_claimed(s, (cd_claimed *)msg);
        }
        break;
    case R_COMPLETE: on_completed(s, &r, timeout ? NULL : (cd_completed *)msg); break;
    case R_SAVE: s->save_round = r.job; break; /* written, or not in time: either way done waiting */
    }
}

static uint64_t hello_due_ms(const session *s)
{
    uint64_t beats = 3 * (uint64_t)s->ss->heartbeat_ms;
    return beats > HELLO_MIN_MS ? beats : HELLO_MIN_MS;
}

/* A connection that never says hello does not keep its session. */
static void on_hello_due(session *s)
{
    if (s->phase != AWAIT_HELLO)
        return;
    char why[96];
    snprintf(why, sizeof why, "no hello within %" PRIu64 " s of the challenge", hello_due_ms(s) / 1000);
    send_error(s, 0, E_NOT_READY, why, true);
}

/* The session's first word: the challenge its hello must sign. */
static void challenge(session *s)
{
    randombytes_buf(s->nonce, sizeof s->nonce);
    pr_msg c;
    memset(&c, 0, sizeof c);
    c.type = PR_MSG_CHALLENGE;
    memcpy(c.body.challenge.nonce, s->nonce, sizeof s->nonce);
    c.body.challenge.server = SERVER_VERSION;
    send_msg(s, &c);
    rt_send_after(s->self, hello_due_ms(s), rt_msg_new(M_HELLO_DUE, sizeof(rt_msg)));
}

/* The challenge, or the refusal while the address is on the penalty list
 * (left ms more). */
static void admit(session *s, uint64_t left)
{
    if (left > 0)
        refuse(s, left);
    else
        challenge(s);
}

/* A held session is held no longer. */
static void unhold(session *s)
{
    s->held = false;
    s->ss->nheld--;
}

static void session_behaviour(rt_actor *self, rt_msg *m)
{
    session *s = rt_state(self);
    switch (m->type) {
    case M_START: {
        uint64_t left = penalty_left(s->ss->addr_penalties, s->addr, now_ms_wall());
        if (left > 0 && s->ss->nheld < HELD_MAX) {
            s->held = true;
            s->held_ms = rt_mono_ms();
            s->ss->nheld++;
            link_hold(s->ss, s->conn, true);
            rt_send_after(self, left < TARPIT_MS ? left : TARPIT_MS, rt_msg_new(M_REFUSE, sizeof(rt_msg)));
            break;
        }
        admit(s, left);
        break;
    }
    case M_FRAME:
        if (s->phase != CLOSED && !s->held)
            on_frame(s, (frame_msg *)m);
        break;
    case M_REFUSE:
        if (s->held) {
            uint64_t left = penalty_left(s->ss->addr_penalties, s->addr, now_ms_wall());
            uint64_t waited = rt_mono_ms() - s->held_ms;
            if (left > 0 && waited < TARPIT_MS) {
                /* the timer came before the refusal's end (a busy loop's
                 * clock lags): held on for what is left of either */
                uint64_t more = TARPIT_MS - waited;
                rt_send_after(self, left < more ? left : more, rt_msg_new(M_REFUSE, sizeof(rt_msg)));
                break;
            }
            unhold(s);
            link_hold(s->ss, s->conn, false);
            /* challenged if its refusal ran out while it waited */
            admit(s, left);
        }
        break;
    case M_RETRY:
        s->retry_pending = false;
        claim_more(s);
        break;
    case M_WATCH:
        on_watch(s);
        break;
    case M_HELLO_DUE:
        on_hello_due(s);
        break;
    case M_CANCEL:
        on_cancel(s, (cancel_msg *)m);
        break;
    case M_SAVE:
        save_work(s, true, ((save_msg *)m)->round); /* a session not welcomed has none */
        break;
    case M_OVERSIZE:
        if (s->phase != CLOSED && !s->held)
            cut_off(s, PR_EFRAMESIZE, "a frame larger than 4194304 bytes (the frame limit): the session is closed",
                "frame too large");
        break;
    case M_CLOSED: {
        s->phase = CLOSED;
        if (s->held)
            unhold(s);
        if (s->node_id != 0) {
            save_work(s, true, 0);
            cd_node_gone *g = RT_MSG_NEW(cd_node_gone, CD_MSG_NODE_GONE);
            g->node = s->node_id;
            g->session = s->conn;
            rt_send(s->ss->scheduler, &g->hdr);
            char fields[160], why[80];
            snprintf(fields, sizeof fields, "\"node\":%" PRIu64 ",\"reason\":%s", s->node_id,
                cd_json_quote(why, sizeof why, s->offline_reason ? s->offline_reason
                                               : s->draining       ? "left"
                                                                   : "disconnected"));
            publish(s, "node.offline", fields);
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

static void session_final(rt_actor *self)
{
    session *s = rt_state(self);
    for (int i = 0; i < MAX_BATCHES; i++)
        if (s->batches[i].used)
            free(s->batches[i].outcomes);
    free(s->fly);
    free(s->reqs);
    pr_replay_destroy(s->guard);
}

/* ---- the registry's live half ---------------------------------------------------- */

/* A session's live entry. Sessions and this table share the loop thread,
 * so reading it here never races its writer. */
static const cd_node_view *session_view(rt_actor *a)
{
    return &((session *)rt_state(a))->view;
}

void cd_sessions_each(const cd_sessions *ss, void (*fn)(void *ctx, const cd_node_view *v), void *ctx)
{
    for (size_t i = 0; i < ss->nconns; i++)
        if (!ss->conns[i].closing && session_view(ss->conns[i].actor)->node != 0)
            fn(ctx, session_view(ss->conns[i].actor));
}

int cd_node_view_json(const cd_node_view *v, char *buf, size_t cap)
{
    char owner[300], version[140], os[80], arch[80], sum[80];
    return snprintf(buf, cap,
        "\"node\":%" PRIu64 ",\"owner\":%s,\"tier\":\"%s\",\"online\":true,\"version\":%s,\"checksum\":%s,"
        "\"protocol\":%d,"
        "\"os\":%s,\"arch\":%s,\"cores\":%u,\"max_parallel\":%u,\"slots\":%u,\"in_flight\":%u,"
        "\"chunks_done\":%" PRIu64 ",\"items_done\":%" PRIu64 ",\"items_per_s\":%.0f,"
        "\"connected_ms\":%" PRIu64 ",\"last_seen_ms\":%" PRIu64,
        v->node, cd_json_quote(owner, sizeof owner, v->owner), v->tier, cd_json_quote(version, sizeof version, v->version),
        cd_json_quote(sum, sizeof sum, v->checksum), PR_VERSION, cd_json_quote(os, sizeof os, v->os), cd_json_quote(arch, sizeof arch, v->arch), v->cores,
        v->max_parallel, v->slots, v->in_flight, v->chunks_done, v->items_done, v->items_per_s, v->connected_ms,
        v->last_seen_ms);
}

void cd_sessions_save_all(cd_sessions *ss)
{
    ss->save_round++;
    for (size_t i = 0; i < ss->nconns; i++) {
        save_msg *m = RT_MSG_NEW(save_msg, M_SAVE);
        m->round = ss->save_round;
        if (rt_send(ss->conns[i].actor, &m->hdr) == RT_EOVERLOAD)
            rt_msg_free(&m->hdr);
    }
}

unsigned cd_sessions_saves_pending(const cd_sessions *ss)
{
    unsigned n = 0;
    for (size_t i = 0; i < ss->nconns; i++) {
        const session *s = rt_state(ss->conns[i].actor);
        n += s->node_id != 0 && s->save_round < ss->save_round;
    }
    return n;
}

void cd_sessions_cancel_job(cd_sessions *ss, uint64_t job, const char *reason)
{
    for (size_t i = 0; i < ss->nconns; i++) {
        if (ss->conns[i].closing || session_view(ss->conns[i].actor)->node == 0)
            continue;
        cancel_msg *c = RT_MSG_NEW(cancel_msg, M_CANCEL);
        c->job = job;
        snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
        rt_send(ss->conns[i].actor, &c->hdr);
    }
}
