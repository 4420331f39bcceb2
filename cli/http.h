/*
 * http.h — a small blocking HTTP/1.1 client for the command-line tools:
 * one request per connection (`Connection: close`) over a TCP socket, or
 * over TLS (OpenSSL) for an https:// URL, with a deadline on connecting and
 * one on the whole exchange. Answers with Content-Length, chunked or
 * read-until-close bodies. Over TLS the server's certificate must chain to
 * the system's CAs or to those of a given PEM file, and name the URL's host
 * (a DNS name, or an IP address in its subjectAltName); there is no way to
 * skip the check.
 */
#ifndef SIMFARM_CLI_HTTP_H
#define SIMFARM_CLI_HTTP_H

#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>

/* The client's codes, HTTP_E*, are in base/err.h (sf_strerror()). */

/* Where a server is: parsed from http[s]://HOST[:PORT][/PREFIX]. */
typedef struct http_url {
    char host[256];          /* without the brackets of an IPv6 literal */
    char port[8];            /* "80", or "443" for https, when the URL names none */
    char prefix[256];        /* path before the API's paths, no trailing '/'; usually "" */
    char origin[300];        /* "http://host:port" as the user wrote it, for messages */
    bool tls;                /* https:// */
} http_url;

/* Parses url into *out. Returns 0 or HTTP_EURL; e (may be NULL) then
 * says what is wrong in one line. */
int http_url_parse(const char *url, http_url *out, sf_error *e);

/* Checks that path holds at least one PEM certificate that can serve as a
 * CA for https. Returns 0, or HTTP_ETLS with one line in e (may be NULL). */
int http_ca_check(const char *path, sf_error *e);

typedef struct http_request {
    const char *method;      /* "GET", "POST", "DELETE" */
    const char *target;      /* path and query after the URL's prefix, starting with '/' */
    const char *bearer;      /* token for `Authorization: Bearer`, or NULL */
    const char *key;         /* `Idempotency-Key`, or NULL */
    const char *body;        /* sent as application/json when not NULL */
    size_t body_len;
    const char *ca_file;     /* https: PEM file of the CAs to trust; NULL: the system's */
    int connect_timeout_ms;  /* 0 = 5000 */
    int timeout_ms;          /* the whole exchange; 0 = 30000 */
} http_request;

typedef struct http_response {
    int status;              /* 200, 404, ... */
    char reason[64];
    char retry_after[32];    /* the Retry-After header, or "" */
    char *body;              /* owned, NUL-terminated (the NUL is not counted) */
    size_t body_len;
} http_response;

/* Sends req to the server at url and reads the whole answer into *res,
 * which the caller frees with http_response_free (also after a failure,
 * when it is empty). Any status the server sends is a success here: the
 * caller judges it. Returns 0, or an HTTP_E* code with one line in e
 * (may be NULL) naming the server ("cannot reach http://127.0.0.1:8080: connection
 * refused"). Answers over 64 MiB are refused. Never raises SIGPIPE. */
int http_send(const http_url *url, const http_request *req, http_response *res, sf_error *e);

void http_response_free(http_response *res);

/* Appends s to buf (capacity cap, NUL-terminated) with every byte that is
 * not unreserved in a URL query percent-encoded. Returns 0, or -1 when it
 * does not fit (buf is then unchanged). */
int http_query_escape(char *buf, size_t cap, const char *s);

#endif /* SIMFARM_CLI_HTTP_H */
