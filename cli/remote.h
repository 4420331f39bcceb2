/*
 * remote.h — what the client subcommands (submit, jobs, job, cancel, watch,
 * nodes, token) share: their common flags, the config file, requests to the
 * coordinator's HTTP API (docs/api.md) and reading its JSON answers, which
 * sf_json_to_msgpack turns into msgpack objects walked here.
 *
 * Every error is one line on stderr, "simfarm <cmd>: what went wrong", and
 * an exit status: SF_EXIT_FAIL when a request failed, SF_EXIT_USAGE when the
 * command line, a local file or the config file is wrong.
 */
#ifndef SIMFARM_CLI_REMOTE_H
#define SIMFARM_CLI_REMOTE_H

#include "base/exit.h"
#include "cli/http.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { REMOTE_GO_ON = -1 }; /* parse_common: the flag is not one of the common ones */

#define REMOTE_DEFAULT_SERVER "http://127.0.0.1:8080"

/* The end of every client subcommand's --help. */
#define REMOTE_COMMON_FLAGS                                                                 \
    "  --json           print the API's JSON answer as it is\n"                              \
    "  --server URL     the coordinator (default $SIMFARM_SERVER, the config file, or\n"     \
    "                   " REMOTE_DEFAULT_SERVER ")\n"                                        \
    "  --token TOKEN    API token (default $SIMFARM_TOKEN or the config file)\n"             \
    "  --ca FILE        for https: the CA certificates (PEM) the server's must be\n"        \
    "                   signed by (default $SIMFARM_CA, the config file, or the system's)\n" \
    "  --config FILE    config file (default $SIMFARM_CONFIG, else\n"                        \
    "                   $XDG_CONFIG_HOME/simfarm/config or ~/.config/simfarm/config)\n"      \
    "Exit status: 0 done, 1 the request or the job failed, 2 usage error.\n"

/* One option of a subcommand: a switch (value NULL) or one that takes a
 * value ("--state S" or "--state=S"). */
typedef struct remote_opt {
    const char *name;        /* "--state" */
    const char **value;      /* set to the value given; NULL for a switch */
    bool *on;                /* set for a switch; may be NULL for a value option */
} remote_opt;

typedef struct remote {
    const char *cmd;         /* "submit", "token create": the start of messages */
    bool json;               /* --json: print the API's answers as they are */
    http_url url;            /* the coordinator */
    char server[512];
    char token[512];         /* "" when none was given anywhere */
    const char *token_from;  /* where the token came from, for messages */
    char ca[512];            /* https: PEM file of the CAs to trust; "": the system's */
    const char *key;         /* sent as Idempotency-Key when not NULL */
    int timeout_ms;          /* each exchange's limit; 0: http_send's 30 s */
    const char *args[4];     /* the positional arguments */
    int nargs;
} remote;

/* Reads argv (argv[0] is the subcommand's name) into r: the common flags
 * --help, --json, --server, --token, --ca and --config, then opts (terminated by
 * an entry with a NULL name), and between min_args and max_args positional
 * arguments (missing says what the first one is, for the message). Then
 * settles server, token and CA file: flags, else $SIMFARM_SERVER /
 * $SIMFARM_TOKEN / $SIMFARM_CA, else the config file. Prints usage for --help. Returns REMOTE_GO_ON, or
 * the exit status to end with. */
int remote_init(remote *r, const char *cmd, const char *usage, int argc, char **argv, const remote_opt *opts,
    int min_args, int max_args, const char *missing);

/* Prints "simfarm <cmd>: <message>" as one line on stderr (newlines in the
 * message become spaces); returns status. */
int remote_fail(const remote *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whether s is a whole number from lo to hi. */
bool remote_whole(const char *s, long lo, long hi);

/* Whether s is a node tier: own, team, community or public. */
bool remote_tier(const char *s);

/* Writes path and, for each of the n names whose value is not NULL,
 * "?name=value" then "&name=value" (the value escaped) into target.
 * Returns 0, or prints that --NAME is too long and returns SF_EXIT_USAGE. */
int remote_target(const remote *r, char *target, size_t cap, const char *path, const char *const *names,
    const char *const *values, int n);

/* Sends a request to the coordinator (target: the path and query, such as
 * "/api/jobs?limit=5"; body JSON or NULL) with the token when there is one.
 * Returns 0 with a 2xx answer in *res (the caller frees it with
 * http_response_free), or prints the one-line error and returns
 * SF_EXIT_FAIL with *res empty: the server's own message, or `missing` for a
 * 404 when it is not NULL ("no such job 42"). */
int remote_call(remote *r, const char *method, const char *target, const char *body, size_t len,
    const char *missing, http_response *res);

/* The two halves of remote_call. remote_exchange sends the request and
 * returns 0 with any answer, or an HTTP_E* code with the reason in e,
 * printing nothing. remote_refused prints the one-line error for a non-2xx
 * answer, frees it and returns SF_EXIT_FAIL. */
int remote_exchange(remote *r, const char *method, const char *target, const char *body, size_t len,
    http_response *res, sf_error *e);
int remote_refused(remote *r, http_response *res, const char *missing);

/* Writes an answer's body as it is, with a final newline. */
void remote_print_body(const http_response *res);

/* ---- JSON answers as msgpack ---------------------------------------------------- */

typedef struct remote_doc {
    msgpack_sbuffer sb;
    msgpack_unpacked up;
    const msgpack_object *root;
} remote_doc;

/* Parses a JSON answer. Returns 0, or prints why it cannot be read and
 * returns SF_EXIT_FAIL. doc is to be freed with remote_doc_free either way. */
int remote_parse(const remote *r, const http_response *res, remote_doc *doc);
void remote_doc_free(remote_doc *doc);

/* What follows a 2xx answer in res, which it frees: with --json prints it
 * as it is and returns SF_EXIT_OK; else parses it into doc and returns
 * REMOTE_GO_ON for the caller to print from doc and free it
 * (remote_doc_free), or SF_EXIT_FAIL for an answer that does not parse. */
int remote_answer(remote *r, http_response *res, remote_doc *doc);

/* The value of key in a map; NULL when o is not a map, has no such key or
 * the value is null. */
const msgpack_object *remote_get(const msgpack_object *o, const char *key);

/* A string or number copied into buf as text (control characters made
 * harmless); dflt when o is NULL or something else. Returns buf. */
const char *remote_text(const msgpack_object *o, char *buf, size_t cap, const char *dflt);

/* A number as a double; dflt when o is NULL or not a number. */
double remote_num(const msgpack_object *o, double dflt);

/* A whole number; false when o is NULL or not one. */
bool remote_int(const msgpack_object *o, int64_t *out);

/* ---- formatting --------------------------------------------------------------------- */

/* "10.45062 ± 0.00047": the mean to the precision its standard error
 * allows (two significant digits of the error). */
void remote_estimate(char *buf, size_t cap, double mean, double se);

/* An ISO 8601 timestamp from the API as "2024-05-01 12:00:03 UTC"; "-" for NULL. */
const char *remote_when(const msgpack_object *o, char *buf, size_t cap);

/* An ISO 8601 timestamp as seconds since the epoch; NAN when o is NULL or
 * not a timestamp. */
double remote_time(const msgpack_object *o);

/* A duration in seconds as "4.2 s", "3 min 20 s", "2 h 5 min". */
void remote_duration(char *buf, size_t cap, double seconds);

/* A count as "62.3M", "1.2k", "950". */
void remote_count(char *buf, size_t cap, double n);

/* Appends s to buf (capacity cap) as a JSON string, quotes included.
 * Returns 0, or -1 when it does not fit. */
int remote_json_quote(char *buf, size_t cap, const char *s);

/* Parses a positive id (a job's, a token's): 0, or prints a usage error
 * naming what and returns SF_EXIT_USAGE. */
int remote_id(const remote *r, const char *s, const char *what, int64_t *id);

/* Calls method on /api/<what>s/<id><suffix> for the id in the command's
 * first argument (a job's, a token's); a 404 says "no such <what> <id>".
 * Returns 0 with the answer in res, or the exit status. */
int remote_call_id(remote *r, const char *method, const char *what, const char *suffix, int64_t *id,
    http_response *res);

/* ---- tables ------------------------------------------------------------------------- */

typedef struct remote_table {
    int ncols;
    char **cells;            /* row-major, owned */
    size_t n, cap;
} remote_table;

/* Starts a table whose first row is the ncols headers. */
void remote_table_init(remote_table *t, int ncols, const char *const *headers);

/* Adds one row of t->ncols cells (copied). */
void remote_table_add(remote_table *t, const char *const *cells);

/* Prints the table in aligned columns and frees it. */
void remote_table_print(remote_table *t, FILE *out);

/* GETs the list at target and prints it: the server's JSON as is with
 * --json, else "no <what>" or a table of the ncols headers with one row per
 * element, added by row(). Returns the exit status. */
typedef void (*remote_row_fn)(const msgpack_object *item, remote_table *t);
int remote_list(remote *r, const char *target, const char *what, const char *const *headers, int ncols,
    remote_row_fn row);

#endif /* SIMFARM_CLI_REMOTE_H */
