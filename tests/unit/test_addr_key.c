/*
 * test_addr_key.c — the key an address's penalties are kept under
 * (cd_addr_key): IPv4 the same on an IPv4 socket and as an IPv4-mapped
 * address on a dual-stack one, IPv6 grouped by its /64. The tests connect
 * over IPv4 loopback only, so this is where the IPv6 cases are checked.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>

#include "actors/coord/session.h"

static void key4(const char *addr, uint8_t key[PR_PK_BYTES])
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(1234) };
    cr_assert_eq(inet_pton(AF_INET, addr, &sa.sin_addr), 1, "%s", addr);
    cd_addr_key((const struct sockaddr *)&sa, key);
}

static void key6(const char *addr, uint16_t port, uint8_t key[PR_PK_BYTES])
{
    struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
    cr_assert_eq(inet_pton(AF_INET6, addr, &sa.sin6_addr), 1, "%s", addr);
    cd_addr_key((const struct sockaddr *)&sa, key);
}

static bool same(const char *a, const char *b)
{
    uint8_t ka[PR_PK_BYTES], kb[PR_PK_BYTES];
    if (strchr(a, ':') != NULL)
        key6(a, 1, ka);
    else
        key4(a, ka);
    if (strchr(b, ':') != NULL)
        key6(b, 2, kb);
    else
        key4(b, kb);
    return memcmp(ka, kb, sizeof ka) == 0;
}

Test(addr_key, ipv4_is_its_mapped_ipv6_form)
{
    uint8_t k[PR_PK_BYTES];
    const uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7 };
    key4("192.0.2.7", k);
    cr_assert_arr_eq(k, want, 16);
    for (size_t i = 16; i < PR_PK_BYTES; i++)
        cr_assert_eq(k[i], 0);
    cr_assert(same("192.0.2.7", "::ffff:192.0.2.7"), "a dual-stack socket's mapped address is the IPv4 one");
}

Test(addr_key, ipv4_addresses_are_not_grouped)
{
    cr_assert(!same("192.0.2.7", "192.0.2.8"));
    cr_assert(!same("127.0.0.1", "127.1.0.1"));
    cr_assert(!same("::ffff:192.0.2.7", "::ffff:192.0.2.8"));
}

Test(addr_key, ipv6_is_grouped_by_its_64)
{
    cr_assert(same("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"), "one /64");
    cr_assert(same("2001:db8:1:2:aaaa::", "2001:db8:1:2:bbbb::9"), "one /64");
    cr_assert(!same("2001:db8:1:2::1", "2001:db8:1:3::1"), "the next /64");
    cr_assert(!same("2001:db8:1:2::1", "2001:db9:1:2::1"));
    cr_assert(!same("::1", "::ffff:0.0.0.1"), "loopback is not a mapped address");
}

Test(addr_key, other_families_have_the_zero_key)
{
    struct sockaddr sa = { .sa_family = AF_UNIX };
    uint8_t k[PR_PK_BYTES], zero[PR_PK_BYTES] = { 0 };
    memset(k, 0xaa, sizeof k);
    cd_addr_key(&sa, k);
    cr_assert_arr_eq(k, zero, sizeof k);
}
