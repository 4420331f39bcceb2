/*
 * test_tlscert.c — the coordinator's TLS certificate checks and their
 * installation into an OpenSSL context (actors/coord/tlscert.h), on certificates
 * made here: a pair that loads, a chain, a key of another certificate, an
 * expired certificate (which the openssl command cannot make), files that
 * are missing or hold something else, and a change of key type, which is
 * refused with the context left as it was.
 */
#include <criterion/criterion.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actors/coord/tlscert.h"
#include "tests/support/tmpdir.h"

TestSuite(tlscert, .init = tmpdir_make, .fini = tmpdir_remove);

static const char *file(const char *name)
{
    static char paths[8][128];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
    return p;
}

static EVP_PKEY *new_key(int ec)
{
    EVP_PKEY *k = ec ? EVP_EC_gen("prime256v1") : EVP_RSA_gen(2048);
    cr_assert_not_null(k);
    return k;
}

/* A certificate for cn with key k, valid from `from` to `to` seconds from
 * now, signed by signer (its own key when NULL). */
static X509 *new_cert(const char *cn, EVP_PKEY *k, long from, long to, EVP_PKEY *signer, X509 *issuer)
{
    X509 *x = X509_new();
    cr_assert_not_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), from);
    X509_gmtime_adj(X509_getm_notAfter(x), to);
    X509_set_pubkey(x, k);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    cr_assert(X509_sign(x, signer ? signer : k, EVP_sha256()) > 0);
    return x;
}

static void write_certs(const char *path, X509 *a, X509 *b)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert(PEM_write_X509(f, a) == 1);
    if (b != NULL)
        cr_assert(PEM_write_X509(f, b) == 1);
    fclose(f);
}

static void write_key(const char *path, EVP_PKEY *k)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1);
    fclose(f);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static int64_t now(void)
{
    return (int64_t)time(NULL);
}

/* leaf (then chain, when not NULL) and its key k written to NAME.pem and
 * NAME.key, and loaded. */
static cd_tlscert *pair(const char *name, X509 *leaf, X509 *chain, EVP_PKEY *k)
{
    char cert[64], key[64];
    sf_error e;
    snprintf(cert, sizeof cert, "%s.pem", name);
    snprintf(key, sizeof key, "%s.key", name);
    write_certs(file(cert), leaf, chain);
    write_key(file(key), k);
    cd_tlscert *c = cd_tlscert_load(file(cert), file(key), now(), &e);
    cr_assert_not_null(c, "%s: %s", name, e.msg);
    return c;
}

Test(tlscert, a_pair_loads_with_its_subject_and_end)
{
    EVP_PKEY *k = new_key(0);
    X509 *x = new_cert("farm.example", k, 0, 86400, NULL, NULL);
    write_certs(file("c.pem"), x, NULL);
    write_key(file("k.pem"), k);
    sf_error e;
    cd_tlscert *c = cd_tlscert_load(file("c.pem"), file("k.pem"), now(), &e);
    cr_assert_not_null(c, "%s", e.msg);
    cr_assert_str_eq(cd_tlscert_subject(c), "farm.example");
    int64_t end = cd_tlscert_not_after(c);
    cr_assert(end >= now() + 86390 && end <= now() + 86400, "not after %lld", (long long)end);
    char when[64];
    cd_tlscert_date(0, when, sizeof when);
    cr_assert_str_eq(when, "1970-01-01 00:00:00 UTC");
    cd_tlscert_free(c);
    X509_free(x);
    EVP_PKEY_free(k);
}

Test(tlscert, refusals_name_the_file_and_the_fault)
{
    EVP_PKEY *k = new_key(0), *other = new_key(0);
    X509 *x = new_cert("farm.example", k, 0, 86400, NULL, NULL);
    X509 *old = new_cert("old.example", k, -2 * 86400, -86400, NULL, NULL);
    write_certs(file("c.pem"), x, NULL);
    write_certs(file("old.pem"), old, NULL);
    write_key(file("k.pem"), k);
    write_key(file("other.pem"), other);
    write_text(file("text.pem"), "not a certificate\n");
    struct {
        const char *cert, *key, *want;
    } cases[] = {
        { "c.pem", "other.pem", "other.pem is not the key of the certificate in " },
        { "old.pem", "k.pem", "old.pem (old.example) expired on " },
        { "missing.pem", "k.pem", "cannot read the certificate " },
        { "c.pem", "missing.pem", "cannot read the key " },
        { "text.pem", "k.pem", "text.pem holds no PEM certificate" },
        { "c.pem", "text.pem", "text.pem holds no PEM private key" },
        { "c.pem", "c.pem", "c.pem holds no PEM private key" },
        { "k.pem", "k.pem", "k.pem holds no PEM certificate" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sf_error e;
        cd_tlscert *c = cd_tlscert_load(file(cases[i].cert), file(cases[i].key), now(), &e);
        cr_assert_null(c, "case %zu loaded", i);
        cr_assert_not_null(strstr(e.msg, cases[i].want), "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].want);
    }
    /* the expired one was fine while it was valid */
    sf_error e;
    cd_tlscert *c = cd_tlscert_load(file("old.pem"), file("k.pem"), now() - 2 * 86400 + 60, &e);
    cr_assert_not_null(c, "%s", e.msg);
    cd_tlscert_free(c);
    X509_free(x);
    X509_free(old);
    EVP_PKEY_free(k);
    EVP_PKEY_free(other);
}

/* The chain certificates ctx holds for its current certificate. */
static int chain_len(SSL_CTX *ctx)
{
    STACK_OF(X509) *chain = NULL;
    cr_assert(SSL_CTX_get0_chain_certs(ctx, &chain) == 1);
    return chain ? sk_X509_num(chain) : 0;
}

Test(tlscert, install_replaces_the_pair_and_its_chain)
{
    EVP_PKEY *ca = new_key(0), *k1 = new_key(0), *k2 = new_key(0);
    X509 *root = new_cert("root", ca, 0, 86400, NULL, NULL);
    X509 *leaf1 = new_cert("one", k1, 0, 86400, ca, root), *leaf2 = new_cert("two", k2, 0, 86400, ca, root);
    cd_tlscert *one = pair("one", leaf1, root, k1), *two = pair("two", leaf2, NULL, k2);
    sf_error e;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    cr_assert_not_null(ctx);
    cr_assert_eq(cd_tlscert_install(one, ctx, &e), 0, "%s", e.msg);
    cr_assert_eq(X509_cmp(SSL_CTX_get0_certificate(ctx), leaf1), 0);
    cr_assert_eq(chain_len(ctx), 1);
    cr_assert_eq(cd_tlscert_install(two, ctx, &e), 0, "%s", e.msg);
    cr_assert_eq(X509_cmp(SSL_CTX_get0_certificate(ctx), leaf2), 0);
    cr_assert_eq(chain_len(ctx), 0, "the old chain went with its certificate");
    cr_assert_eq(SSL_CTX_check_private_key(ctx), 1);
    cd_tlscert_free(one);
    cd_tlscert_free(two);
    SSL_CTX_free(ctx);
    X509_free(root);
    X509_free(leaf1);
    X509_free(leaf2);
    EVP_PKEY_free(ca);
    EVP_PKEY_free(k1);
    EVP_PKEY_free(k2);
}

Test(tlscert, another_key_type_is_refused_and_the_context_kept)
{
    EVP_PKEY *rsa = new_key(0), *ec = new_key(1);
    X509 *a = new_cert("rsa", rsa, 0, 86400, NULL, NULL), *b = new_cert("ec", ec, 0, 86400, NULL, NULL);
    cd_tlscert *ca = pair("a", a, NULL, rsa), *cb = pair("b", b, NULL, ec);
    sf_error e;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    cr_assert_not_null(ctx);
    cr_assert_eq(cd_tlscert_install(ca, ctx, &e), 0, "%s", e.msg);
    cr_assert_eq(cd_tlscert_install(cb, ctx, &e), CD_ETLS);
    cr_assert_str_eq(e.msg, "its key is EC, the one served RSA: restart the coordinator to change the key type");
    cr_assert_eq(X509_cmp(SSL_CTX_get0_certificate(ctx), a), 0);
    cr_assert_eq(SSL_CTX_check_private_key(ctx), 1);
    cd_tlscert_free(ca);
    cd_tlscert_free(cb);
    SSL_CTX_free(ctx);
    X509_free(a);
    X509_free(b);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
}
