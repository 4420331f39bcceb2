/*
 * gateway_int.h — what the gateway's two halves share: gateway.c (the
 * libwebsockets side: connections, /ws/events, static files, the actor)
 * and api.c (the HTTP API: routes, authentication, the store's answers).
 * Everything here runs on the loop thread.
 */
#ifndef SIMFARM_ACTORS_GATEWAY_INT_H
#define SIMFARM_ACTORS_GATEWAY_INT_H

#include "actors/coord/events.h"
#include "actors/coord/gateway.h"
#include "actors/coord/session.h"
#include "actors/coord/tlscert.h"
#include "base/version.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


enum { GW_GET = 1, GW_POST, GW_DELETE };
enum { GW_END_STATES = 4 };

/* The most database queries one request waits on in turn (authentication,
 * a cancel's look and its update), each for db_timeout_ms at most. */
enum { GW_STORE_ASKS_MAX = 3 };

/* One HTTP request, as the lws side hands it to the gateway actor. */
typedef struct gw_request {
    rt_msg hdr;
    uint64_t session;        /* where the answer goes */
    int method;
    char path[256];
    char query[512];         /* the arguments after '?', decoded, each NUL-terminated, one after the other */
    size_t query_len;        /* the bytes of query in use, the NULs included */
    bool query_too_long;     /* they did not fit in query: refused */
    bool query_nul;          /* one held a NUL byte (lws refuses %00 itself): refused */
    char auth[256];          /* the Authorization header */
    char key[130];           /* the Idempotency-Key header, "" for none */
    bool key_bad;            /* it was empty or longer than 128 bytes */
    char peer[64];           /* the client's address */
    char *body;              /* owned; NUL-terminated */
    size_t body_len;
    /* set once the API token is checked */
    char owner[129];
    bool admin;
} gw_request;

/* A store request in flight and what its answer is for. */
typedef struct gw_pending {
    int64_t req;
    uint64_t session;
    int kind;
    gw_request *r;           /* kept; freed with the last answer (NULL for none) */
} gw_pending;

typedef struct gw_fail {
    char peer[64];
    uint64_t since_ms;       /* start of the window (rt_mono_ms: a stepped wall clock moves neither end) */
    unsigned count;
} gw_fail;

enum { GW_FAILS = 256 };

/* A one-use ticket to open /ws/events, for a browser, which cannot send a
 * token with a WebSocket: 32 hex digits, good for GW_TICKET_MS. */
typedef struct gw_ticket {
    char hex[33];
    uint64_t expires_ms; /* monotonic; 0: a free slot */
} gw_ticket;

enum { GW_TICKETS = 256, GW_TICKET_MS = 30000 };

typedef struct gw_session gw_session;
typedef struct gw_events_conn gw_events_conn;

typedef struct gateway {
    struct lws_context *ctx;
    struct lws_vhost *vhost;
    rt_actor *self, *store, *scheduler;
    size_t max_body;
    uint64_t db_timeout_ms;
    bool db_up;
    bool unlocked; /* the coordinator's lock went with the store's LISTEN session, not held again yet */
    bool private_reads;      /* cd_gateway_opts.private_reads */
    gw_ticket tickets[GW_TICKETS]; /* for /ws/events, handed out by POST /api/events/ticket */
    char web_dir[512];
    gw_session *sessions;    /* HTTP transactions waiting for their answer */
    size_t nsessions, sessions_cap;
    uint64_t next_session;
    gw_pending *pend;
    size_t npend, pend_cap;
    uint64_t requests, by_class[6]; /* responses by status class 1xx..5xx */
    gw_fail fails[GW_FAILS]; /* failed logins by address */
    cd_proxies proxies;      /* trusted reverse proxies */
    unsigned char boot_hash[32]; /* the token file's token, admin while its row is written */
    bool boot_pending;
    cd_sessions *nodes;      /* node connections */
    cd_events *events;
    gw_events_conn *evc;     /* /ws/events connections */
    size_t nevc, evc_cap;
    struct lws_protocols protocols[4];
    /* TLS: the files named at start, the pair served (NULL for plain
     * http), the vhost's OpenSSL context, SIGHUP reloads by outcome */
    char tls_cert[PATH_MAX], tls_key[PATH_MAX];
    cd_tlscert *tls;
    void *ssl_ctx;
    uint64_t tls_reloaded, tls_refused;
    uint64_t finished[GW_END_STATES]; /* job.finished events by state (gw_end_states) */
} gateway;

/* The states a job ends in, as job.finished names them. */
extern const char *const gw_end_states[GW_END_STATES];

/* ---- gateway.c ---- */

/* Sets the answer of an HTTP transaction; takes body (malloc'd). An answer
 * for a transaction that closed meanwhile is dropped. `extra` is a header
 * line or NULL ("WWW-Authenticate: Bearer"), copied. */
void gw_respond(gateway *g, uint64_t session, int status, const char *type, char *body, const char *extra);
void gw_respond_error(gateway *g, uint64_t session, int status, const char *field, const char *msg);

/* ---- api.c ---- */

/* Handles a request; the gateway's behaviour hands over r, which the API
 * keeps (rt_take) or frees. */
void api_route(gateway *g, gw_request *r);

/* Whether hex is a ticket handed out and not yet used or expired; a ticket
 * found is used up. Loop thread only. */
bool gw_ticket_take(gateway *g, const char *hex);

/* An answer from the store (cd_result or rt_timeout) to one of the API's
 * requests. */
void api_answer(gateway *g, rt_msg *m);

/* Makes the token in path (created, mode 0600, when it does not exist) an
 * admin API token in the database. Returns 0, or -1 with a message. */
int api_token_file(gateway *g, const char *path, char *err, size_t errlen);

#endif
