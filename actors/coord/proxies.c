/*
 * proxies.c — the client's address behind trusted reverse proxies
 * (proxies.h).
 */
#include "actors/coord/proxies.h"

#include "runtime/runtime.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* text (len bytes, an address with no port) into a. */
static bool parse_addr(const char *text, size_t len, uint8_t a[16])
{
    char buf[INET6_ADDRSTRLEN];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET, buf, a + 12) == 1) {
        memcpy(a, v4_mapped, sizeof v4_mapped);
        return true;
    }
    return inet_pton(AF_INET6, buf, a) == 1;
}

/* One X-Forwarded-For entry: an address, "[v6]", "[v6]:port" or
 * "v4:port", with blanks around it. */
static bool parse_entry(const char *s, size_t len, uint8_t a[16])
{
    while (len > 0 && (*s == ' ' || *s == '\t'))
        s++, len--;
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL || (close + 1 < s + len && close[1] != ':'))
            return false;
        return parse_addr(s + 1, (size_t)(close - s - 1), a);
    }
    const char *colon = memchr(s, ':', len);
    if (colon != NULL && memchr(colon + 1, ':', (size_t)(s + len - colon - 1)) == NULL)
        len = (size_t)(colon - s); /* one colon: IPv4 with a port */
    return parse_addr(s, len, a);
}

int cd_proxies_add(cd_proxies *p, const char *spec, sf_error *e)
{
    const char *slash = strchr(spec, '/');
    size_t alen = slash ? (size_t)(slash - spec) : strlen(spec);
    cd_net net;
    if (!parse_addr(spec, alen, net.addr))
        return sf_fail(e, CD_EINVAL, "'%s' is not an IPv4 or IPv6 address (or ADDRESS/BITS)", spec);
    bool v4 = memcmp(net.addr, v4_mapped, sizeof v4_mapped) == 0 && memchr(spec, ':', alen) == NULL;
    unsigned max = v4 ? 32 : 128;
    net.bits = max;
    if (slash != NULL) {
        char *end;
        unsigned long b = strtoul(slash + 1, &end, 10);
        if (slash[1] < '0' || slash[1] > '9' || *end != '\0' || b > max)
            return sf_fail(e, CD_EINVAL, "'%s': the prefix length after '/' must be a number from 0 to %u", spec,
                max);
        net.bits = (unsigned)b;
    }
    if (v4)
        net.bits += 96;
    if (p->n == p->cap)
        p->nets = sf_grow(p->nets, &p->cap, sizeof *p->nets);
    p->nets[p->n++] = net;
    return 0;
}

void cd_proxies_copy(cd_proxies *dst, const cd_proxies *src)
{
    memset(dst, 0, sizeof *dst);
    for (size_t i = 0; src != NULL && i < src->n; i++) {
        if (dst->n == dst->cap)
            dst->nets = sf_grow(dst->nets, &dst->cap, sizeof *dst->nets);
        dst->nets[dst->n++] = src->nets[i];
    }
}

void cd_proxies_free(cd_proxies *p)
{
    free(p->nets);
    memset(p, 0, sizeof *p);
}

static bool in_net(const cd_net *net, const uint8_t a[16])
{
    unsigned whole = net->bits / 8, rest = net->bits % 8;
    if (memcmp(net->addr, a, whole) != 0)
        return false;
    uint8_t mask = (uint8_t)(0xff00u >> rest);
    return rest == 0 || ((net->addr[whole] ^ a[whole]) & mask) == 0;
}

static bool trusted(const cd_proxies *p, const uint8_t a[16])
{
    for (size_t i = 0; p != NULL && i < p->n; i++)
        if (in_net(&p->nets[i], a))
            return true;
    return false;
}

/* peer's address as 16 bytes (IPv4 in its IPv4-mapped form); false for
 * another family. */
static bool peer_bytes(const struct sockaddr *peer, uint8_t a[16])
{
    if (peer->sa_family == AF_INET) {
        memcpy(a, v4_mapped, sizeof v4_mapped);
        memcpy(a + 12, &((const struct sockaddr_in *)peer)->sin_addr, 4);
        return true;
    }
    if (peer->sa_family == AF_INET6) {
        memcpy(a, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
        return true;
    }
    return false;
}

bool cd_proxies_has(const cd_proxies *p, const struct sockaddr *peer)
{
    uint8_t a[16];
    return peer_bytes(peer, a) && trusted(p, a);
}

void cd_client_addr(const cd_proxies *p, const struct sockaddr *peer, const char *xff,
    struct sockaddr_storage *out)
{
    uint8_t client[16];
    memset(out, 0, sizeof *out);
    if (!peer_bytes(peer, client)) {
        out->ss_family = AF_UNSPEC;
        return;
    }
    if (xff != NULL && trusted(p, client)) {
        const char *end = xff + strlen(xff);
        while (end > xff) {
            const char *start = end;
            while (start > xff && start[-1] != ',')
                start--;
            uint8_t a[16];
            if (!parse_entry(start, (size_t)(end - start), a))
                break;
            memcpy(client, a, sizeof a);
            if (!trusted(p, a))
                break;
            end = start > xff ? start - 1 : xff;
        }
    }
    if (memcmp(client, v4_mapped, sizeof v4_mapped) == 0) {
        struct sockaddr_in *sa = (struct sockaddr_in *)out;
        sa->sin_family = AF_INET;
        memcpy(&sa->sin_addr, client + 12, 4);
    } else {
        struct sockaddr_in6 *sa = (struct sockaddr_in6 *)out;
        sa->sin6_family = AF_INET6;
        memcpy(&sa->sin6_addr, client, 16);
    }
}
