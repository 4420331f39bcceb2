/*
 * proxies.h — the client's address behind trusted reverse proxies.
 *
 * The coordinator keeps two things by client address: failed API logins
 * (api_auth.c) and the penalty lists of node connections (session_table.c).
 * Behind a reverse proxy every connection comes from the proxy's address,
 * so one offender would lock every client out. With `simfarm serve --trusted-proxy
 * NET`, a connection from NET is a proxy's: its client is read from the
 * X-Forwarded-For header, walking from the right (the entry the nearest
 * proxy added) past every address that is itself a trusted proxy. The
 * header of any other connection is ignored, so a client cannot choose its
 * own address. No sockets here: tests/unit/test_proxies.c checks it alone.
 */
#ifndef SIMFARM_ACTORS_PROXIES_H
#define SIMFARM_ACTORS_PROXIES_H

#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An address block: 16 bytes, IPv4 as its IPv4-mapped IPv6 form. */
typedef struct cd_net {
    uint8_t addr[16];
    unsigned bits;           /* prefix length, 0 to 128 */
} cd_net;

typedef struct cd_proxies {
    cd_net *nets;            /* owned */
    size_t n, cap;
} cd_proxies;

/* Adds spec, an IPv4 or IPv6 address or ADDRESS/BITS, to p. Returns 0, or
 * CD_EINVAL with a message naming what is wrong in e (p unchanged). */
int cd_proxies_add(cd_proxies *p, const char *spec, sf_error *e);

/* A copy of src into dst (empty when src is NULL). */
void cd_proxies_copy(cd_proxies *dst, const cd_proxies *src);

void cd_proxies_free(cd_proxies *p);

/* Whether peer (AF_INET or AF_INET6) is a trusted proxy. */
bool cd_proxies_has(const cd_proxies *p, const struct sockaddr *peer);

/* The client of a connection from peer (AF_INET or AF_INET6) that sent
 * X-Forwarded-For: xff (NULL when it sent none): peer itself unless peer is
 * a trusted proxy; then the rightmost address of xff that is not one, or
 * the leftmost when all are. An entry that is no address (garbage, or
 * "unknown") ends the walk: the proxy right of it is the client. Entries
 * may carry a port ("192.0.2.1:4711", "[2001:db8::1]:4711"). Written to
 * out as AF_INET for an IPv4 address, AF_INET6 otherwise. */
void cd_client_addr(const cd_proxies *p, const struct sockaddr *peer, const char *xff,
    struct sockaddr_storage *out);

#endif
