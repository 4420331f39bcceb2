/*
 * api.h — the coordinator's HTTP API (docs/api.md) as the gateway sees it:
 * the gateway (gateway.c, the libwebsockets side) turns each complete
 * request into a cd__request and hands it to the API, which answers it
 * through the one respond function the gateway gave it at creation, once
 * the store has answered what the request needs. Internal to
 * actors/coord; everything here runs on the loop thread.
 */
#ifndef SIMFARM_ACTORS_COORD_API_H
#define SIMFARM_ACTORS_COORD_API_H

#include "actors/coord/events.h"
#include "actors/coord/session.h"
#include "actors/coord/tlscert.h"
#include "base/err.h"
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CD__GET = 1, CD__POST, CD__DELETE };

/* The most database queries one request waits on in turn (authentication,
 * a cancel's look and its update), each for db_timeout_ms at most. */
enum { CD__STORE_ASKS_MAX = 3 };

/* The states a job ends in, as job.finished names them. */
enum { CD__END_STATES = 4 };
extern const char *const cd__end_states[CD__END_STATES];

/* Why the gateway closed a connection at once: the total cap with no idle
 * connection to close instead, its address's cap, no descriptor free. */
enum { CD__CONN_TOTAL, CD__CONN_PER_ADDR, CD__CONN_NO_FD, CD__CONN_REFUSALS };
extern const char *const cd__conn_refusal_names[CD__CONN_REFUSALS];

/* One HTTP request, as the lws side hands it to the gateway actor. */
typedef struct cd__request {
    rt_msg hdr;
    uint64_t txn;        /* where the answer goes */
    int method;              /* CD__GET, CD__POST or CD__DELETE */
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
} cd__request;

/* Sets the answer of the HTTP transaction `txn`; takes body (malloc'd).
 * An answer for a transaction that closed meanwhile is dropped. `extra` is
 * a header line or NULL ("WWW-Authenticate: Bearer"), borrowed. */
typedef void cd__respond_fn(void *ctx, uint64_t txn, int status, const char *type, char *body,
    const char *extra);

/* What the gateway counts and the API reports (/health, /metrics): the
 * gateway writes it, the API only reads it. */
typedef struct cd__gw_stats {
    bool db_up;
    bool unlocked;           /* the coordinator's lock went with the store's LISTEN session, not held again yet */
    uint64_t requests, by_class[6];          /* responses by status class 1xx..5xx */
    uint64_t finished[CD__END_STATES];       /* job.finished events by state (cd__end_states) */
    size_t event_clients;    /* /ws/events connections */
    cd_tlscert *tls;         /* the pair served, NULL for plain http (the gateway's) */
    uint64_t tls_reloaded, tls_refused;      /* SIGHUP reloads by outcome */
    /* Connections (HTTP and WebSocket) and their caps (gateway.h) */
    uint64_t conns;                          /* open now */
    unsigned conns_max, conns_per_addr_max;  /* the caps in force */
    uint64_t conns_refused[CD__CONN_REFUSALS]; /* closed at once, by why (cd__conn_refusal_names) */
    uint64_t conns_evicted;                  /* idle ones closed to make room at the total cap */
} cd__gw_stats;

typedef struct cd__api_opts {
    rt_actor *self;          /* the gateway actor: the store answers it (borrowed) */
    rt_actor *store, *scheduler;             /* borrowed: the gateway holds them */
    rt_actor *burst;                         /* borrowed, or NULL: no burst actor */
    cd_sessions *nodes;      /* borrowed */
    cd_events *events;       /* borrowed */
    uint64_t db_timeout_ms;
    bool private_reads;      /* reads need an API token too */
    const cd__gw_stats *stats;               /* borrowed, read at each /health and /metrics */
    cd__respond_fn *respond; /* the one way the API answers */
    void *respond_ctx;
} cd__api_opts;

typedef struct cd__api cd__api;

/* A new API answering through opts->respond; everything in opts is
 * borrowed and must outlive it. Never NULL (memory failure is sf_oom). */
cd__api *cd__api_create(const cd__api_opts *opts);

/* Frees the API and the requests still waiting on the store (unanswered).
 * api may be NULL. */
void cd__api_destroy(cd__api *api);

/* Handles a request; the gateway's behaviour hands over r, which the API
 * keeps (rt_take) until it answers, or frees. */
void cd__api_route(cd__api *api, cd__request *r);

/* An answer from the store (cd_result or rt_timeout) to one of the API's
 * requests; the gateway passes on every one it gets. */
void cd__api_answer(cd__api *api, rt_msg *m);

/* Whether hex is a /ws/events ticket handed out and not yet used or
 * expired; a ticket found is used up. */
bool cd__api_ticket_take(cd__api *api, const char *hex);

/* Makes the token in path (created, mode 0600, when it does not exist) an
 * admin API token in the database. Returns 0, or CD_EIO with what went
 * wrong in *e. */
int cd__api_token_file(cd__api *api, const char *path, sf_error *e);

/* The body of an error answer: {"error": msg, "field": field} (without
 * "field" when field is NULL), malloc'd, for the caller's respond. */
char *cd__api_error_json(const char *field, const char *msg);

#endif
