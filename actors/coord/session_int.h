/*
 * session_int.h — what the node sessions' files share: session.c (the
 * session actor and its protocol), session_enrol.c (the hello and the
 * enrolment) and session_table.c (the connection table, the lws callback,
 * the penalty lists, the registry's live half). Loop thread only.
 */
#ifndef SIMFARM_ACTORS_COORD_SESSION_INT_H
#define SIMFARM_ACTORS_COORD_SESSION_INT_H

#include "actors/coord/session.h"

#include "actors/coord/events.h"
#include "actors/coord/store.h"
#include "base/version.h"
#include "proto/msg.h"
#include "proto/replay.h"

#include <libwebsockets.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cd__session cd__session;

#define CD__SESS_SERVER_VERSION "simfarm " SF_VERSION

/* Application error codes (proto/PROTOCOL.md §7, positive numbers). */
enum {
    CD__E_NOT_ENROLLED = 1, CD__E_NOT_READY = 2, CD__E_JOB = 3, CD__E_DATABASE = 4, CD__E_RATE_LIMITED = 5,
    CD__E_KEY_IN_USE = 6, /* the key has a live session already (docs/coordinator.md, "One session a key") */
};

/* Frames a node may send: CD__SESS_RATE_PER_S a second on average,
 * CD__SESS_RATE_BURST at once. An honest node sends a few a second
 * (completions are batched). */
enum { CD__SESS_RATE_PER_S = 200, CD__SESS_RATE_BURST = 400 };

/* Escalating penalties (docs/reliability.md, "Penalties"). A session may
 * earn CD__SESS_STRIKE_BURST bad frames at once, one more every CD__SESS_STRIKE_REFILL_MS: a
 * bad frame is one that does not decode, a completion whose signature does
 * not verify or that is replayed, a message a coordinator does not take.
 * An honest node sends none; a clock off by more than 300 s (ESKEW) is
 * answered but costs no strike. A session closed for abuse (strikes run
 * out, a flood, a frame past the limit) puts its node key on the penalty
 * list: its next hellos are refused, before any signature check or
 * database work, for CD__SESS_PENALTY_BASE_MS, doubling with each offence up to
 * CD__SESS_PENALTY_MAX_MS; offences are forgotten after CD__SESS_PENALTY_FORGET_MS without
 * one. The list holds CD__SESS_PENALTY_SLOTS keys; a full list drops the entry
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
 * up to CD__SESS_TARPIT_MS before its error and close: an offender that waits for
 * the answer (as each connection must) then costs one connection a
 * CD__SESS_TARPIT_MS, not one a round trip. At most CD__SESS_HELD_MAX are held; past that
 * the refusal comes at once. */
enum { CD__SESS_STRIKE_BURST = 16, CD__SESS_STRIKE_REFILL_MS = 10000 };
enum { CD__SESS_PENALTY_SLOTS = 4096, CD__SESS_TARPIT_MS = 2000, CD__SESS_HELD_MAX = 256 };
#define CD__SESS_PENALTY_BASE_MS 2000u
#define CD__SESS_PENALTY_MAX_MS (15u * 60 * 1000)
#define CD__SESS_PENALTY_FORGET_MS (60u * 60 * 1000)
/* A working session's accepted chunks go to its node_work row every this
 * many heartbeat intervals (a minute at the default 5 s), and when it ends. */
#define CD__SESS_WORK_SAVE_BEATS 12u

enum {
    CD__SESS_M_START = RT_MSGS_SESSION,
    CD__SESS_M_FRAME,
    CD__SESS_M_CLOSED,
    CD__SESS_M_RETRY,
    CD__SESS_M_WATCH,
    CD__SESS_M_CANCEL,
    CD__SESS_M_OVERSIZE,
    CD__SESS_M_REFUSE,
    CD__SESS_M_SAVE,                /* cd__save_msg: write the work now (the coordinator stops) */
    CD__SESS_M_HELLO_DUE,           /* the time for the hello is over */
    CD__SESS_HELLO_MIN_MS = 10000,  /* the hello is due within this or 3 heartbeat intervals, the longer */
    CD__SESS_MAX_BATCHES = 64,
    CD__SESS_MAX_INFLIGHT = 1024,
    CD__SESS_CLAIM_RETRY_MS = 1000, /* a claim the scheduler did not answer in time is asked again after this */
};

/* ---- the connection table (loop thread) -------------------------------------------- */

typedef struct cd__frame {
    uint8_t *buf;          /* LWS_PRE bytes of headroom, then the cd__frame */
    size_t len;
} cd__frame;

typedef struct cd__link {
    uint64_t id;
    struct lws *wsi;
    rt_actor *actor;       /* the session; retained */
    cd__frame *out;
    size_t nout, out_cap, out_head;
    uint8_t *rx;
    size_t rx_len;
    bool closing, bad, shut; /* shut: the close frame is asked for */
    uint16_t close_code;   /* the close frame's (PROTOCOL.md §5, closing) */
    char close_reason[124]; /* its text, at most 123 bytes of UTF-8 */
} cd__link;

/* A penalty list's entry: who is a node key, or an address in its first
 * 16 bytes (IPv4 as ::ffff:a.b.c.d, IPv6 to its /64), the rest zero. */
typedef struct cd__penalty {
    uint8_t who[PR_PK_BYTES];
    uint64_t until_ms;     /* refused before this; 0 = a free slot */
    uint64_t last_ms;      /* the last offence */
    uint32_t offences;
} cd__penalty;

struct cd_sessions {
    rt_system *sys;
    rt_actor *store, *scheduler;
    bool open_enrolment;
    const cd_proxies *proxies;
    uint32_t heartbeat_ms;
    cd_publish_fn publish;
    void *publish_ctx;
    cd__link *conns;
    size_t nconns, conns_cap;
    uint64_t next_id;
    cd__penalty *penalties;    /* keys: CD__SESS_PENALTY_SLOTS, allocated at the first offence */
    cd__penalty *addr_penalties; /* addresses: the same */
    unsigned nheld;        /* refused connections held (CD__SESS_TARPIT_MS) */
    cd_sessions_stats stats;
    uint64_t save_round;   /* cd_sessions_save_all's calls */
};

typedef struct cd__link_pss {
    uint64_t id;
} cd__link_pss;

typedef struct cd__save_msg {
    rt_msg hdr;
    uint64_t round;
} cd__save_msg;

typedef struct cd__frame_msg {
    rt_msg hdr;
    uint8_t *bytes;
    size_t len;
} cd__frame_msg;

/* ---- the session actor ------------------------------------------------------------ */

typedef struct cd__inflight {
    uint64_t chunk, job, first, count;
    uint8_t token[16];
    uint8_t ctx_hash[32];  /* the job's work context it was assigned with */
    uint64_t listed_ms;    /* assigned, or last listed in a heartbeat (monotonic) */
    unsigned cls;          /* the workers it was sized for */
} cd__inflight;

/* The workers of one entry of hello's backends, on a node with more than
 * one (a CPU worker per core beside a GPU's): chunks are sized to their
 * own speed (view.backend_items_per_s), not to the node's mix of speeds. */
typedef struct cd__wclass {
    unsigned units;        /* its workers, and its slots when sized apart: a device's 1, the CPU entry's units */
    bool device;           /* OpenCL or CUDA */
} cd__wclass;

typedef struct cd__cancel_msg {
    rt_msg hdr;
    uint64_t job;
    char reason[64];
} cd__cancel_msg;

typedef struct cd__batch {
    uint64_t frame_id, job;
    unsigned n, answered;
    pr_outcome *outcomes;
    bool job_complete, used;
} cd__batch;

typedef enum cd__req_kind { CD__R_ENROL = 1, CD__R_CTX, CD__R_CLAIM, CD__R_COMPLETE, CD__R_SAVE } cd__req_kind;

typedef struct cd__req {
    int64_t id;
    cd__req_kind kind;
    uint64_t frame_id;     /* the node's frame this answers */
    int batch, slot;       /* CD__R_COMPLETE: which batch, which outcome */
    uint8_t token[16];     /* CD__R_COMPLETE: the result's claim token */
    uint64_t job;          /* CD__R_SAVE: the save round */
    uint8_t hash[32];
} cd__req;

struct cd__session {
    cd_sessions *ss;
    uint64_t conn;
    rt_actor *self;
    char host[256];
    uint8_t addr[PR_PK_BYTES]; /* where it connects from, as a penalty list's who */
    bool held;             /* refused, waiting CD__SESS_TARPIT_MS unread (counted in nheld) */
    uint64_t held_ms;      /* since when (monotonic) */
    uint8_t nonce[PR_NONCE_BYTES];
    enum { CD__SESS_AWAIT_HELLO, CD__SESS_ENROLLING, CD__SESS_RUNNING, CD__SESS_CLOSED } phase;
    uint8_t pk[PR_PK_BYTES];
    uint64_t node_id;
    uint8_t tier;
    uint32_t streak;          /* checks passed in a row, as enrolment read it (sc_node_info.streak) */
    bool claim;            /* enrolling with a claim token */
    bool feat_malformed;   /* hello announced PR_FEATURE_MALFORMED: malformed results are told so */
    const char *offline_reason;
    cd_node_view view;      /* the registry's live entry; read by cd_sessions_each (same thread) */
    double bucket;          /* frames it may send now (a token bucket) */
    uint64_t bucket_ms;
    double strikes;         /* bad frames it may still send (a token bucket) */
    uint64_t strikes_ms;
    pr_replay *guard;
    unsigned workers_max;   /* hello's cores (1 when it says 0) and device backends */
    unsigned max_slots;     /* chunks at once: hello's or a heartbeat's max_parallel, within workers_max */
    cd__wclass cls[CD_NODE_BACKENDS];
    unsigned nbk;           /* hello's backends (CD_NODE_BACKENDS at most) */
    unsigned ncls;          /* classes in use: nbk when their units make max_slots, else 1 (all alike) */
    unsigned claim_cls;     /* what the claim under way is for */
    uint64_t heard_ms;      /* the last frame, monotonic (for the heartbeat watch) */
    bool claiming, retry_pending, draining;
    uint64_t next_frame;
    cd__inflight *fly;
    size_t nfly, fly_cap;
    cd__batch batches[CD__SESS_MAX_BATCHES];
    cd__req *reqs;
    size_t nreqs, reqs_cap;
    uint64_t saved_chunks;  /* view.chunks_done when the work was last written */
    uint64_t saved_ms;      /* and when (monotonic) */
    uint64_t save_round;    /* the last CD__SESS_M_SAVE round whose write the store answered */
};

/* ---- session.c ---- */

/* The session actor's behaviour and finalizer (rt_spawn's). */
void cd__session_behaviour(rt_actor *self, rt_msg *m);
void cd__session_final(rt_actor *self);

/* The size of a session actor's state (rt_actor_opts.state_size). */
size_t cd__session_size(void);

/* Sets up a new session's state for connection conn_id from host (its
 * address in text) and addr (as a penalty list's who). */
void cd__session_init(cd__session *s, cd_sessions *ss, uint64_t conn_id, rt_actor *self, const char *host,
    const uint8_t addr[PR_PK_BYTES]);

/* The wall clock in seconds, for signatures' timestamps. */
uint64_t cd__session_now_s(void);

/* The wall clock in ms (frames' timestamps, penalties, the node view). */
uint64_t cd__session_now_ms_wall(void);

/* Encodes m and queues it on the session's connection; m is borrowed. */
void cd__session_send_msg(cd__session *s, pr_msg *m);

/* Sends an error message answering frame id (0 for none); fatal ends the
 * session after it. */
void cd__session_send_error(cd__session *s, uint64_t id, int code, const char *message, bool fatal);

/* Remembers the store or scheduler request id and what it is for, until
 * its answer comes. */
cd__req *cd__session_req_add(cd__session *s, int64_t id, cd__req_kind kind);

/* The chunks the node computes at once, as hello or a later heartbeat
 * says: within workers_max and 256. True when that is more than before.
 * Its backends' workers are sized apart when each has its own slots, that
 * is when their units add up to the slots; otherwise all are alike. */
bool cd__session_set_slots(cd__session *s, unsigned max_parallel);

/* Asks the scheduler for as many chunks as the node has free slots. */
void cd__session_claim_more(cd__session *s);

/* Publishes a node event (type, fields borrowed) through the table's
 * publish function, when there is one. */
void cd__session_publish(cd__session *s, const char *type, const char *fields);

/* ---- session_table.c ---- */

/* Queues a binary frame (copied) for connection id. Returns -1 when the
 * connection is gone. */
int cd__link_send(cd_sessions *ss, uint64_t id, const uint8_t *bytes, size_t len);

/* WebSocket close codes (PROTOCOL.md §5, Closing): RFC 6455's, and 4000
 * plus a coordinator error code (4001 ENOTENROLLED ... 4006 EKEYINUSE). */
enum {
    CD__CLOSE_NORMAL = 1000,
    CD__CLOSE_GOING_AWAY = 1001,
    CD__CLOSE_PROTOCOL = 1002,
    CD__CLOSE_UNSUPPORTED = 1003,
    CD__CLOSE_TOO_BIG = 1009,
    CD__CLOSE_INTERNAL = 1011,
    CD__CLOSE_APP = 4000,
};

/* Closes the connection once what is queued has been written, with a close
 * frame of code and reason (copied; cut to 123 bytes at a character's
 * start). */
void cd__link_close(cd_sessions *ss, uint64_t id, unsigned code, const char *reason);

/* Holds a connection's reads (a refused connection waits unread) or lets
 * them go again. */
void cd__link_hold(cd_sessions *ss, uint64_t id, bool hold);

/* Ms for which who is still refused; 0 when it is not. */
uint64_t cd__penalty_left(cd__penalty *list, const uint8_t who[PR_PK_BYTES], uint64_t now);

/* who (a key or an address) ended a session by abuse: refuse it for
 * longer each time. */
void cd__penalise(cd__penalty **list, const uint8_t who[PR_PK_BYTES], uint64_t now);

/* The node of key pk was revoked: each of its sessions, welcomed or being
 * enrolled, is told so (ENOTENROLLED) and closed at once; its claims go
 * back as a closed connection's do, and it goes offline as "revoked".
 * Returns how many sessions it had. Called by the API, on the loop thread
 * its sessions run on. */
unsigned cd__sessions_revoke(cd_sessions *ss, const uint8_t pk[PR_PK_BYTES]);

/* The same for a node whose row was removed (DELETE /api/nodes/{id}, a
 * prune): each session of key pk is told message (ENOTENROLLED) and
 * closed, going offline with reason (both static strings). Returns how
 * many it had. */
unsigned cd__sessions_end_key(cd_sessions *ss, const uint8_t pk[PR_PK_BYTES], const char *reason, const char *message);

/* The welcomed session of key pk other than except (which may be NULL),
 * that is not closing; NULL when there is none. */
cd__session *cd__sessions_live_key(cd_sessions *ss, const uint8_t pk[PR_PK_BYTES], const cd__session *except);

/* Whether node id has a welcomed session now (a node online: its row is
 * never removed). */
bool cd__sessions_has_node(const cd_sessions *ss, uint64_t id);

/* ---- session_enrol.c ---- */

/* Handles the node's hello (m borrowed): checks it, then looks its key up
 * or enrols it (the store answers cd__session_on_enrolled). */
void cd__session_on_hello(cd__session *s, pr_msg *m);

/* The store's answer to the hello's look-up or enrolment: the welcome,
 * or the refusal. */
void cd__session_on_enrolled(cd__session *s, const cd__req *r, cd_result *res);

#endif
