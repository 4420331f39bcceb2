/*
 * test_proxies.c — the client's address behind trusted reverse proxies
 * (actors/coord/proxies.h): the --trusted-proxy forms and their refusals, and the
 * walk through X-Forwarded-For, IPv6 included (the integration tests
 * connect over IPv4 loopback only).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>

#include "actors/coord/proxies.h"

static cd_proxies trust(const char *const *specs)
{
    cd_proxies p = { 0 };
    sf_error e;
    for (; *specs != NULL; specs++)
        cr_assert_eq(cd_proxies_add(&p, *specs, &e), 0, "%s: %s", *specs, e.msg);
    return p;
}

/* The client cd_client_addr gives for a connection from peer, as text. */
static const char *client(const cd_proxies *p, const char *peer, const char *xff)
{
    static char text[INET6_ADDRSTRLEN];
    struct sockaddr_storage in = { 0 }, out;
    if (strchr(peer, ':') != NULL) {
        struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&in;
        sa->sin6_family = AF_INET6;
        cr_assert_eq(inet_pton(AF_INET6, peer, &sa->sin6_addr), 1, "%s", peer);
    } else {
        struct sockaddr_in *sa = (struct sockaddr_in *)&in;
        sa->sin_family = AF_INET;
        cr_assert_eq(inet_pton(AF_INET, peer, &sa->sin_addr), 1, "%s", peer);
    }
    cd_client_addr(p, (const struct sockaddr *)&in, xff, &out);
    const void *a = out.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&out)->sin_addr
                                             : (const void *)&((struct sockaddr_in6 *)&out)->sin6_addr;
    cr_assert_not_null(inet_ntop(out.ss_family, a, text, sizeof text));
    return text;
}

Test(proxies, refuses_what_is_not_an_address_or_block)
{
    cd_proxies p = { 0 };
    sf_error e;
    const char *bad[] = { "", "proxy.example", "10.0.0", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8x",
        "::1/129", "fe80::1%eth0", "10.0.0.1/8/8", " 10.0.0.1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(cd_proxies_add(&p, bad[i], &e), CD_EINVAL, "'%s' accepted", bad[i]);
        cr_expect_neq(strstr(e.msg, bad[i]), NULL, "the message names '%s': %s", bad[i], e.msg);
    }
    cr_assert_eq(p.n, 0);
    cr_assert_eq(cd_proxies_add(&p, "10.0.0.0/33", &e), CD_EINVAL);
    cr_assert_str_eq(e.msg, "'10.0.0.0/33': the prefix length after '/' must be a number from 0 to 32");
    cd_proxies_free(&p);
}

Test(proxies, an_untrusted_peer_is_the_client_whatever_it_forwards)
{
    cd_proxies p = trust((const char *[]){ "10.0.0.1", NULL });
    cr_assert_str_eq(client(&p, "192.0.2.9", "203.0.113.5"), "192.0.2.9");
    cr_assert_str_eq(client(&p, "192.0.2.9", NULL), "192.0.2.9");
    cr_assert_str_eq(client(NULL, "192.0.2.9", "203.0.113.5"), "192.0.2.9");
    cd_proxies empty = { 0 };
    cr_assert_str_eq(client(&empty, "10.0.0.1", "203.0.113.5"), "10.0.0.1");
    cd_proxies_free(&p);
}

Test(proxies, a_trusted_peer_names_the_client_in_its_rightmost_entry)
{
    cd_proxies p = trust((const char *[]){ "10.0.0.1", NULL });
    cr_assert_str_eq(client(&p, "10.0.0.1", "203.0.113.5"), "203.0.113.5");
    /* what the client itself put in the header is left of what the proxy
     * added: it cannot choose its address */
    cr_assert_str_eq(client(&p, "10.0.0.1", "198.51.100.1, 203.0.113.5"), "203.0.113.5");
    cr_assert_str_eq(client(&p, "10.0.0.1", "  203.0.113.5\t"), "203.0.113.5");
    cr_assert_str_eq(client(&p, "10.0.0.1", "203.0.113.5:4711"), "203.0.113.5");
    /* a trusted peer that forwards nothing is its own client */
    cr_assert_str_eq(client(&p, "10.0.0.1", NULL), "10.0.0.1");
    cd_proxies_free(&p);
}

Test(proxies, the_walk_passes_trusted_proxies_and_stops_at_garbage)
{
    cd_proxies p = trust((const char *[]){ "10.0.0.0/8", "2001:db8:1::/48", NULL });
    /* a chain: client, outer proxy, inner proxy (the peer) */
    cr_assert_str_eq(client(&p, "10.0.0.1", "203.0.113.5, 10.9.9.9"), "203.0.113.5");
    cr_assert_str_eq(client(&p, "10.0.0.1", "198.51.100.1, 203.0.113.5, 10.2.3.4, 10.9.9.9"), "203.0.113.5");
    /* every entry a proxy: the leftmost */
    cr_assert_str_eq(client(&p, "10.0.0.1", "10.1.1.1, 10.2.2.2"), "10.1.1.1");
    /* garbage right of any address: the proxy that added it */
    cr_assert_str_eq(client(&p, "10.0.0.1", "203.0.113.5, unknown"), "10.0.0.1");
    cr_assert_str_eq(client(&p, "10.0.0.1", "203.0.113.5, 10.2.2.2, unknown"), "10.0.0.1");
    cr_assert_str_eq(client(&p, "10.0.0.1", "unknown, 10.2.2.2"), "10.2.2.2");
    cr_assert_str_eq(client(&p, "10.0.0.1", ""), "10.0.0.1");
    cr_assert_str_eq(client(&p, "10.0.0.1", "203.0.113.5,,"), "10.0.0.1");
    cr_assert_str_eq(client(&p, "10.0.0.1", "[203.0.113.5"), "10.0.0.1");
    cd_proxies_free(&p);
}

Test(proxies, ipv6_blocks_and_entries)
{
    cd_proxies p = trust((const char *[]){ "2001:db8:1::/48", "::1", NULL });
    cr_assert_str_eq(client(&p, "2001:db8:1:ffff::7", "2001:db8:2::9"), "2001:db8:2::9");
    cr_assert_str_eq(client(&p, "2001:db8:2::7", "2001:db8:3::9"), "2001:db8:2::7");
    cr_assert_str_eq(client(&p, "::1", "[2001:db8:2::9]:4711"), "2001:db8:2::9");
    cr_assert_str_eq(client(&p, "::1", "[2001:db8:2::9]"), "2001:db8:2::9");
    cr_assert_str_eq(client(&p, "::1", "203.0.113.5, 2001:db8:1::2"), "203.0.113.5");
    /* an IPv4 peer on a dual-stack socket is that IPv4 address */
    cd_proxies v4 = trust((const char *[]){ "192.0.2.0/24", NULL });
    cr_assert_str_eq(client(&v4, "::ffff:192.0.2.7", "203.0.113.5"), "203.0.113.5");
    cr_assert_str_eq(client(&v4, "::ffff:198.51.100.7", "203.0.113.5"), "198.51.100.7");
    cd_proxies_free(&v4);
    cd_proxies_free(&p);
}

Test(proxies, block_boundaries)
{
    cd_proxies p = trust((const char *[]){ "192.0.2.128/25", "0.0.0.0/0", NULL });
    cr_assert_str_eq(client(&p, "8.8.8.8", "192.0.2.1"), "192.0.2.1"); /* /0: every IPv4 peer */
    cd_proxies_free(&p);
    p = trust((const char *[]){ "192.0.2.128/25", NULL });
    cr_assert_str_eq(client(&p, "192.0.2.128", "203.0.113.5"), "203.0.113.5");
    cr_assert_str_eq(client(&p, "192.0.2.255", "203.0.113.5"), "203.0.113.5");
    cr_assert_str_eq(client(&p, "192.0.2.127", "203.0.113.5"), "192.0.2.127");
    /* an IPv4 block holds no IPv6 address */
    cr_assert_str_eq(client(&p, "::c000:280", "203.0.113.5"), "::192.0.2.128");
    cd_proxies_free(&p);
}

Test(proxies, a_copy_is_its_own)
{
    cd_proxies p = trust((const char *[]){ "10.0.0.1", "10.0.0.2", NULL }), q;
    cd_proxies_copy(&q, &p);
    cd_proxies_free(&p);
    cr_assert_eq(q.n, 2);
    cr_assert_str_eq(client(&q, "10.0.0.2", "203.0.113.5"), "203.0.113.5");
    cd_proxies_free(&q);
    cd_proxies_copy(&q, NULL);
    cr_assert_eq(q.n, 0);
    cd_proxies_free(&q);
}
