/*
 * url.h — the one URL parser: SCHEME://HOST[:PORT][/PATH] for the schemes
 * the farm speaks (http, https, ws, wss). The CLI's client reads the
 * coordinator's address with it, the native node its server's.
 */
#ifndef SIMFARM_BASE_URL_H
#define SIMFARM_BASE_URL_H

#include "base/err.h"

#include <stdbool.h>

typedef struct sf_url {
    char scheme[8];   /* "http", "https", "ws" or "wss", lower case */
    bool tls;         /* https or wss */
    char host[256];   /* a name or an address, without an IPv6 literal's brackets */
    int port;         /* the URL's, or the scheme's (80, or 443 with TLS) */
    char path[512];   /* from the first '/' after HOST[:PORT], as written; "" when none */
    char origin[300]; /* SCHEME://HOST[:PORT] as written, for messages */
} sf_url;

/* Parses url into *out. The scheme is matched without regard to case; a
 * user name (`user@`), a port outside 1..65535, or anything but a path
 * after HOST[:PORT] is refused. Returns 0, or SF_EURL with one line in e
 * (may be NULL) that quotes the URL and says what is wrong. */
int sf_url_parse(const char *url, sf_url *out, sf_error *e);

#endif /* SIMFARM_BASE_URL_H */
