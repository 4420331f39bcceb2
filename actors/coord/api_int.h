/*
 * api_int.h — what the HTTP API's files share: api.c (routing, answers,
 * health, metrics, tickets), api_auth.c (API tokens and authentication),
 * api_jobs.c (/api/jobs) and api_nodes.c (/api/nodes). Loop thread only.
 */
#ifndef SIMFARM_ACTORS_COORD_API_INT_H
#define SIMFARM_ACTORS_COORD_API_INT_H

#include "actors/coord/api.h"
#include "actors/coord/store.h"

#include <libpq-fe.h>

/* What a store request in flight is for. */
enum {
    CD__ASK_AUTH = 1, CD__ASK_SUBMIT, CD__ASK_LIST, CD__ASK_ONE, CD__ASK_CANCEL_LOOK, CD__ASK_CANCEL_DO,
    CD__ASK_NODES, CD__ASK_NODE, CD__ASK_TOKEN_NEW, CD__ASK_TOKENS, CD__ASK_TOKEN_REVOKE, CD__ASK_BOOT,
    CD__ASK_CONVERGENCE, CD__ASK_NODE_REVOKE, CD__ASK_NODE_REMOVE, CD__ASK_NODE_PRUNE,
};

/* A store request in flight and what its answer is for. */
typedef struct cd__api_pending {
    int64_t req;
    uint64_t txn;
    int kind;                /* CD__ASK_* */
    cd__request *r;          /* kept; freed with the last answer (NULL for none) */
} cd__api_pending;

/* Failed logins from one address, in a window. */
typedef struct cd__api_fails {
    char peer[64];
    uint64_t since_ms;       /* start of the window (rt_mono_ms: a stepped wall clock moves neither end) */
    unsigned count;
} cd__api_fails;

enum { CD__API_FAILS = 256 };

/* A one-use ticket to open /ws/events, for a browser, which cannot send a
 * token with a WebSocket: 32 hex digits, good for CD__TICKET_MS. */
typedef struct cd__ticket {
    char hex[33];
    uint64_t expires_ms;     /* monotonic; 0: a free slot */
} cd__ticket;

enum { CD__TICKETS = 256, CD__TICKET_MS = 30000 };

struct cd__api {
    cd__api_opts o;
    cd__api_pending *pend;
    size_t npend, pend_cap;
    cd__api_fails fails[CD__API_FAILS];      /* failed logins by address */
    cd__ticket tickets[CD__TICKETS];         /* for /ws/events, handed out by POST /api/events/ticket */
    unsigned char boot_hash[32];             /* the token file's token, admin while its row is written */
    bool boot_pending;
};

/* ---- api.c ---- */

/* Answers r and frees it: the body (malloc'd) is taken, extra borrowed. */
void cd__api_reply(cd__api *api, cd__request *r, int status, const char *type, char *body, const char *extra);
/* Answers r with an error (field may be NULL) and frees it. */
void cd__api_fail(cd__api *api, cd__request *r, int status, const char *field, const char *msg);
/* Answers r with a JSON body (taken) and frees it. */
void cd__api_ok(cd__api *api, cd__request *r, int status, char *body);
/* Sends q (taken) to the store; its answer comes to cd__api_answer with
 * kind. r (NULL for none) is kept until then; it is answered 503 at once
 * when the runtime is stopping. */
void cd__api_ask(cd__api *api, cd__request *r, cd_query *q, int kind);
/* After authentication (when needed): the work itself. */
void cd__api_dispatch(cd__api *api, cd__request *r);

/* The value of the first query argument called name, copied to out, or
 * NULL when there is none. */
const char *cd__api_arg(const cd__request *r, const char *name, char *out, size_t cap);
/* A positive id from text; 0 when it is not one. */
uint64_t cd__api_parse_id(const char *s);
/* The job id in /api/jobs/{id}[/...]; 0 when it is not one. */
uint64_t cd__api_job_id(const cd__request *r);
/* Whether s is one of the n strings of list. */
bool cd__api_one_of(const char *s, const char *const *list, size_t n);
/* The query's limit (1 to 1000) into *out, left as it is when there is
 * none. Returns false, having answered 400, for a bad one. */
bool cd__api_arg_limit(cd__api *api, cd__request *r, int64_t *out);

/* ---- api_auth.c ---- */

/* Checks the request's API token, then carries on with it (dispatch). */
void cd__api_authenticate(cd__api *api, cd__request *r);
/* Answers 401; counted: a token was given and did not check out. */
void cd__api_auth_failed(cd__api *api, cd__request *r, const char *why, bool counted);
/* Writes the token file's row (asked again until it is written). */
void cd__api_boot_insert(cd__api *api);
void cd__api_create_token(cd__api *api, cd__request *r);
void cd__api_list_tokens(cd__api *api, cd__request *r);
void cd__api_revoke_token(cd__api *api, cd__request *r, uint64_t id);

/* ---- api_jobs.c ---- */

void cd__api_submit(cd__api *api, cd__request *r);
void cd__api_list_jobs(cd__api *api, cd__request *r);
void cd__api_one_job(cd__api *api, cd__request *r, uint64_t id);
void cd__api_convergence(cd__api *api, cd__request *r, uint64_t id);
void cd__api_cancel_job(cd__api *api, cd__request *r, uint64_t id);
/* The store's answers to those (res borrowed). */
void cd__api_on_submit(cd__api *api, cd__request *r, PGresult *res);
void cd__api_on_one(cd__api *api, cd__request *r, PGresult *res);
void cd__api_on_list(cd__api *api, cd__request *r, PGresult *res);
void cd__api_on_convergence(cd__api *api, cd__request *r, PGresult *res);
void cd__api_on_cancel_look(cd__api *api, cd__request *r, PGresult *res);
void cd__api_on_cancel_do(cd__api *api, cd__request *r, PGresult *res);

/* ---- api_nodes.c ---- */

/* GET /api/nodes (one = 0) or /api/nodes/{one}: asks the store. */
void cd__api_ask_nodes(cd__api *api, cd__request *r, uint64_t one);
/* POST /api/nodes/{id}/revoke (an admin token's): marks the node revoked
 * (once: a second revoke keeps the first's time); the answer comes to
 * cd__api_on_node_revoked. */
void cd__api_revoke_node(cd__api *api, cd__request *r, uint64_t id);
/* Its store's answer (res borrowed): 404 for no such node; else the
 * node's sessions are closed and r is answered with the node, as
 * GET /api/nodes/{id} gives it. */
void cd__api_on_node_revoked(cd__api *api, cd__request *r, PGresult *res);
/* DELETE /api/nodes/{id} (an admin token's): removes an offline node's
 * row (409 for one online, revoked, or with results in a job that has not
 * ended); the answer comes to cd__api_on_node_removed. */
void cd__api_remove_node(cd__api *api, cd__request *r, uint64_t id);
void cd__api_on_node_removed(cd__api *api, cd__request *r, PGresult *res);
/* POST /api/nodes/prune {"offline_for": seconds} (an admin token's):
 * removes the rows of the nodes offline that long, as DELETE does; the
 * answer, {"removed": [{id, name, last_seen}...]}, comes to
 * cd__api_on_nodes_pruned. */
void cd__api_prune_nodes(cd__api *api, cd__request *r);
void cd__api_on_nodes_pruned(cd__api *api, cd__request *r, PGresult *res);
/* The answer's body (malloc'd): the rows of res with what the live
 * sessions know now; with `one` the first element alone; status filters
 * out nodes whose session began or ended since the query. */
char *cd__api_nodes_json(cd__api *api, PGresult *res, bool one, const char *status);

#endif
