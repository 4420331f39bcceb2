/*
 * msg.h — the wire messages and their codec. One WebSocket binary frame holds
 * one msgpack envelope {v, type, id, ts, body}; PROTOCOL.md is the
 * specification (field names, types, limits, order). This header is its C
 * face: a struct per message body, pr_decode() from bytes and pr_encode() to
 * bytes.
 *
 * Decoding is bounded before anything is allocated: the bytes are walked
 * once against the limits below (frame size, depth, counts, lengths, total
 * number of values) and only then handed to msgpack-c, so hostile counts
 * cannot make it allocate. Every bad input gets its own error code
 * (error.h), never an assert.
 *
 * Canonical encoding: the encoder writes fields in the order of PROTOCOL.md,
 * omits optional fields that are zero or empty, and uses msgpack's shortest
 * form for every integer, string, byte string, array and map header. Decoding
 * a canonical frame and encoding the result gives the same bytes.
 */
#ifndef SIMFARM_PROTO_MSG_H
#define SIMFARM_PROTO_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

#define PR_VERSION 1

/* Limits (PROTOCOL.md, "Limits"). Per-field limits are tighter where the
 * catalogue says so. */
#define PR_MAX_FRAME (4u << 20)     /* bytes in one frame */
#define PR_WS_PROTOCOL "simfarm.node.v1" /* the WebSocket subprotocol; the path is /ws/node */
#define PR_MAX_DEPTH 16u            /* nested arrays/maps; the envelope is 1 */
#define PR_MAX_COUNT 4096u          /* entries in one array or map */
#define PR_MAX_OBJECTS 65536u       /* values of any kind in one frame */
#define PR_MAX_STR 4096u            /* bytes in any string */
#define PR_MAX_BIN (PR_MAX_FRAME)   /* bytes in any byte string */
#define PR_MAX_PAYLOAD (PR_MAX_FRAME - 1024u) /* signed batch, work context */

#define PR_PK_BYTES 32u
#define PR_SIG_BYTES 64u
#define PR_HASH_BYTES 32u
#define PR_NONCE_BYTES 32u          /* session challenge nonce */
#define PR_BATCH_NONCE_BYTES 16u    /* completion replay nonce */
#define PR_TOKEN_BYTES 16u          /* claim token of one chunk */

/* Message types; the wire name is in parentheses. */
typedef enum pr_type {
    PR_MSG_UNKNOWN = 0,
    PR_MSG_CHALLENGE,    /* "challenge"    coordinator -> node */
    PR_MSG_HELLO,        /* "hello"        node -> coordinator */
    PR_MSG_WELCOME,      /* "welcome"      coordinator -> node */
    PR_MSG_HEARTBEAT,    /* "heartbeat"    node -> coordinator */
    PR_MSG_ASSIGN,       /* "assign"       coordinator -> node */
    PR_MSG_CTX_REQ,      /* "ctx_req"      node -> coordinator */
    PR_MSG_CTX,          /* "ctx"          coordinator -> node */
    PR_MSG_COMPLETE,     /* "complete"     node -> coordinator */
    PR_MSG_COMPLETE_ACK, /* "complete_ack" coordinator -> node */
    PR_MSG_CANCEL,       /* "cancel"       coordinator -> node */
    PR_MSG_CONFIG,       /* "config"       coordinator -> node */
    PR_MSG_ERROR,        /* "error"        either way */
    PR_MSG_BYE,          /* "bye"          either way */
    PR_MSG_COUNT_
} pr_type;

/* A byte string. In a decoded message it points into the message's arena. */
typedef struct pr_bytes {
    const uint8_t *ptr;
    uint32_t len;
} pr_bytes;

typedef struct pr_challenge {
    uint8_t nonce[PR_NONCE_BYTES];
    const char *server;             /* coordinator software version */
} pr_challenge;

typedef enum pr_backend_kind {
    PR_BACKEND_CPU, PR_BACKEND_OPENCL, PR_BACKEND_CUDA, PR_BACKEND_WASM
} pr_backend_kind;

typedef struct pr_backend {
    uint32_t kind;                  /* pr_backend_kind */
    const char *device;             /* device name */
    uint64_t memory;                /* bytes */
    uint32_t units;                 /* compute units; optional */
} pr_backend;

typedef struct pr_caps {
    uint32_t cores;
    uint32_t max_parallel;
    const char *os;                 /* optional */
    const char *arch;               /* optional */
    const char *browser;            /* optional; browser nodes */
    pr_backend *backends;
    uint32_t nbackends;
} pr_caps;

typedef struct pr_hello {
    uint8_t pk[PR_PK_BYTES];
    uint64_t ts;                    /* unix seconds, signed */
    uint8_t sig[PR_SIG_BYTES];
    const char *version;            /* node software version */
    const char *claim_token;        /* optional; only when enrolling */
    pr_caps caps;
    const char *checksum;           /* optional; hex SHA-256 of the node's program */
    const char **features;          /* optional; protocol features the node reads (PR_FEATURE_*) */
    uint32_t nfeatures;
    const char *name;               /* optional; the node's name (PR_MAX_NAME_LEN, pr_node_name_check) */
} pr_hello;

/* Protocol features a node announces in its hello (PROTOCOL.md §2): the
 * coordinator uses one only with a node that named it. Unknown names are
 * ignored. */
#define PR_FEATURE_MALFORMED "malformed" /* complete_ack's outcome "malformed" with `reason` */
#define PR_MAX_FEATURES 16u
#define PR_MAX_FEATURE_LEN 32u

/* Whether hello h announces feature name. */
bool pr_hello_has_feature(const pr_hello *h, const char *name);

/* A node's name (hello's `name`): 1 to PR_MAX_NAME_LEN bytes of UTF-8,
 * printable: no control character (C0, DEL, C1), no leading or trailing
 * space. */
#define PR_MAX_NAME_LEN 64u

/* Whether name is a node name as above: NULL when it is, else what is
 * wrong with it, in words that follow "the node name " (a static string). */
const char *pr_node_name_check(const char *name);

typedef struct pr_config {
    uint32_t max_parallel;          /* optional */
    uint32_t chunk_ms;              /* optional; target chunk duration */
    bool paused;                    /* optional */
} pr_config;

typedef struct pr_welcome {
    uint64_t node_id;
    uint32_t heartbeat_ms;
    pr_config config;
} pr_welcome;

typedef struct pr_device_stat {
    const char *device;
    uint32_t util_permille;
    uint64_t mem_used;
    uint64_t mem_total;
} pr_device_stat;

typedef struct pr_heartbeat {
    uint32_t cpu_permille;
    uint64_t mem_used;
    uint64_t mem_total;
    pr_device_stat *devices;        /* optional */
    uint32_t ndevices;
    uint64_t *in_flight;            /* chunk ids; optional */
    uint32_t nin_flight;
    uint32_t max_parallel;          /* optional; chunks at once now (0: as in hello) */
} pr_heartbeat;

typedef struct pr_chunk {
    uint64_t chunk;
    uint8_t token[PR_TOKEN_BYTES];
    uint64_t start;                 /* first item index */
    uint64_t count;                 /* items; start + count must not overflow */
    uint32_t lease_ms;
    uint32_t variant;               /* optional; tournament: the candidate to run */
    uint32_t backend;               /* optional; hello's backends[] entry it is sized for */
} pr_chunk;

typedef struct pr_assign {
    uint64_t job;
    const char *kernel;
    uint8_t ctx_hash[PR_HASH_BYTES];
    pr_chunk *chunks;
    uint32_t nchunks;
} pr_assign;

typedef struct pr_ctx_req {
    uint64_t job;
    uint8_t hash[PR_HASH_BYTES];
} pr_ctx_req;

typedef struct pr_ctx {
    uint64_t job;
    uint8_t hash[PR_HASH_BYTES];    /* SHA-256 of bytes; checked on decode */
    pr_bytes bytes;
} pr_ctx;

typedef struct pr_result {
    uint64_t chunk;
    uint8_t token[PR_TOKEN_BYTES];
    uint64_t start;
    uint64_t count;
    uint32_t elapsed_ms;            /* optional */
    pr_bytes data;                  /* kernel statistics, opaque to proto */
    uint32_t backend;               /* optional; hello's backends[] entry that computed it */
} pr_result;

/* The signed part of a completion (PROTOCOL.md, "Signed completions"). */
typedef struct pr_batch {
    uint8_t nonce[PR_BATCH_NONCE_BYTES];
    uint64_t job;
    uint8_t ctx_hash[PR_HASH_BYTES];
    pr_result *results;
    uint32_t nresults;
} pr_batch;

typedef struct pr_complete {
    uint64_t ts;                    /* unix seconds, signed */
    pr_bytes payload;               /* the encoded batch, the signed body */
    uint8_t sig[PR_SIG_BYTES];
    pr_batch batch;                 /* payload decoded; ignored by pr_encode */
} pr_complete;

/* A malformed result's outcome has two forms on the wire (PROTOCOL.md,
 * complete_ack): its own value "malformed" with a `reason`, for a node that
 * announced the feature PR_FEATURE_MALFORMED in its hello, and "stale" with
 * the reason under `malformed` for one that did not (it drops the chunk as
 * stale). pr_outcome_malformed() writes the form, pr_outcome_read() reads
 * both. */
typedef enum pr_outcome_kind {
    PR_OUTCOME_ACCEPTED, PR_OUTCOME_IDEMPOTENT, PR_OUTCOME_CONFLICT, PR_OUTCOME_STALE, PR_OUTCOME_MALFORMED
} pr_outcome_kind;

#define PR_MAX_REASON 200u          /* bytes in a malformed outcome's reason */

typedef struct pr_outcome {
    uint64_t chunk;
    uint32_t outcome;               /* pr_outcome_kind */
    const char *reason;             /* `reason`: beside PR_OUTCOME_MALFORMED only, and required
                                       there: why the result was refused (at most
                                       PR_MAX_REASON bytes) */
    const char *malformed;          /* `malformed`: beside PR_OUTCOME_STALE only: the same
                                       outcome and reason in the form for a node without
                                       the feature */
} pr_outcome;

/* Fills *o as chunk's malformed outcome with reason (borrowed, not copied),
 * in the form a node reads: its own outcome when the node announced
 * PR_FEATURE_MALFORMED (feature), else "stale" with `malformed`. */
void pr_outcome_malformed(pr_outcome *o, uint64_t chunk, const char *reason, bool feature);

/* What a decoded outcome says: PR_OUTCOME_MALFORMED for either form, with
 * its reason in *reason (NULL for the other outcomes). */
pr_outcome_kind pr_outcome_read(const pr_outcome *o, const char **reason);

typedef struct pr_complete_ack {
    uint64_t job;
    bool job_complete;              /* optional */
    pr_outcome *outcomes;
    uint32_t noutcomes;
} pr_complete_ack;

typedef struct pr_cancel {
    uint64_t job;
    uint64_t *chunks;               /* optional; none = the whole job */
    uint32_t nchunks;
    const char *reason;             /* optional */
} pr_cancel;

typedef struct pr_error_body {
    int32_t code;                   /* a pr_errno, or an application code */
    const char *message;
} pr_error_body;

typedef enum pr_bye_reason { PR_BYE_DRAINING, PR_BYE_LEAVING } pr_bye_reason;

typedef struct pr_bye {
    uint32_t reason;                /* pr_bye_reason */
    const char *message;            /* optional */
} pr_bye;

typedef struct pr_msg {
    uint32_t v;                     /* PR_VERSION */
    pr_type type;
    uint64_t id;                    /* request id; a reply repeats it */
    uint64_t ts;                    /* sender's clock, unix milliseconds */
    union {
        pr_challenge challenge;
        pr_hello hello;
        pr_welcome welcome;
        pr_heartbeat heartbeat;
        pr_assign assign;
        pr_ctx_req ctx_req;
        pr_ctx ctx;
        pr_complete complete;
        pr_complete_ack complete_ack;
        pr_cancel cancel;
        pr_config config;
        pr_error_body error;
        pr_bye bye;
    } body;
    void *arena;                    /* owns everything a decoded body points to */
    char err_at[64];                /* after a failed decode: where, e.g. "body.chunks[2].token" */
    char unknown_type[40];          /* after PR_EUNKNOWNTYPE: the type as sent, at most 32 bytes
                                       (then "..."), bytes outside printable ASCII as '?' */
} pr_msg;

/* Decodes one frame into *m. On success m owns an arena that every pointer
 * in m->body points into; release it with pr_msg_free(). The frame is not
 * referenced after the call. On failure returns a negative pr_errno, nothing
 * stays allocated, m->err_at names the field at fault (empty when the fault
 * is in the msgpack itself), and m->id and m->type are filled when the
 * envelope got that far, so the caller can answer with an `error` message
 * for that id (PR_EUNKNOWNTYPE leaves type = PR_MSG_UNKNOWN). For a
 * `complete` frame the signed payload is decoded too (into body.complete.batch);
 * its signature is not checked here (sign.h). */
int pr_decode(pr_msg *m, const void *frame, size_t len);

/* Decodes a completion batch (the signed payload of a `complete`) into *b,
 * allocating from a new arena returned in *arena (free with pr_arena_free()).
 * Same limits and errors as pr_decode(). On failure *arena is NULL. */
int pr_decode_batch(pr_batch *b, void **arena, const void *payload, size_t len);

/* Releases what a successful pr_decode() allocated and zeroes m. Safe on a
 * zeroed or already released message. */
void pr_msg_free(pr_msg *m);

/* Releases an arena from pr_decode_batch(); NULL is ignored. */
void pr_arena_free(void *arena);

/* Encodes m in canonical form into a new buffer *out of *len bytes (free it
 * with free()). The message is checked against the same limits and rules as
 * the decoder (lengths, counts, UTF-8, enumerations, ranges, the work context
 * hash), so what pr_encode() writes pr_decode() accepts. For `complete`,
 * body.complete.payload is written as is (see pr_complete_seal()). Returns 0,
 * or a negative pr_errno with *out NULL. */
int pr_encode(const pr_msg *m, uint8_t **out, size_t *len);

/* Encodes a completion batch in canonical form (the bytes that are signed).
 * Same contract as pr_encode(). */
int pr_encode_batch(const pr_batch *b, uint8_t **out, size_t *len);

/* The wire name of a message type ("hello"), or NULL for an unknown one. */
const char *pr_type_name(pr_type t);

/* Writes a one-line readable rendering of m (every field, bytes in hex,
 * long byte strings abbreviated) into buf, always NUL-terminated. Returns the
 * length it would have needed, like snprintf. For logs, tests and
 * tests/vectors. */
size_t pr_msg_format(const pr_msg *m, char *buf, size_t cap);

#endif
