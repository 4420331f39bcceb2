/*
 * tlscert.c — reading, checking and installing the coordinator's TLS
 * certificate with OpenSSL (see tlscert.h). Each file is read once, into
 * memory, and everything is parsed from those bytes: a file replaced while
 * it is read cannot pair one certificate with another's key.
 */
#include "actors/coord/tlscert.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_PEM = 1 << 20 }; /* a chain and a key are a few KiB */

struct cd_tlscert {
    X509 *leaf;
    STACK_OF(X509) *chain; /* the certificates after the first */
    EVP_PKEY *key;
    int64_t not_after;
    char subject[256];
};

/* OpenSSL's reason for its last error, or `fallback`; clears the queue. */
static const char *ssl_reason(const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : fallback;
}

/* The whole file at path into a BIO; NULL with a message in err. */
static BIO *read_file(const char *path, const char *what, sf_error *e)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        sf_fail(e, CD_EIO, "cannot read the %s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(MAX_PEM);
    size_t n = buf ? fread(buf, 1, MAX_PEM, f) : 0;
    int bad = buf == NULL || ferror(f) || n == MAX_PEM;
    fclose(f);
    BIO *b = bad ? NULL : BIO_new(BIO_s_mem());
    if (b != NULL && BIO_write(b, buf, (int)n) != (int)n) {
        BIO_free(b);
        b = NULL;
    }
    free(buf);
    if (b == NULL)
        sf_fail(e, CD_EIO, "cannot read the %s %s: %s", what, path,
            n == MAX_PEM ? "larger than 1 MiB, not a PEM file" : "read error");
    return b;
}

static int64_t asn1_seconds(const ASN1_TIME *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

void cd_tlscert_date(int64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(buf, len, "%lld (Unix time)", (long long)t);
}

static void name_of(X509 *x, char *buf, size_t len)
{
    X509_NAME *n = X509_get_subject_name(x);
    if (X509_NAME_get_text_by_NID(n, NID_commonName, buf, (int)len) > 0)
        return;
    if (X509_NAME_oneline(n, buf, (int)len) == NULL)
        snprintf(buf, len, "(no subject)");
}

cd_tlscert *cd_tlscert_load(const char *cert_path, const char *key_path, int64_t now, sf_error *e)
{
    cd_tlscert *c = calloc(1, sizeof *c);
    BIO *cb = NULL, *kb = NULL;
    if (c == NULL) {
        sf_fail(e, SF_ENOMEM, "out of memory");
        return NULL;
    }
    ERR_clear_error();
    if ((cb = read_file(cert_path, "certificate", e)) == NULL)
        goto fail;
    if ((c->leaf = PEM_read_bio_X509_AUX(cb, NULL, NULL, NULL)) == NULL) {
        sf_fail(e, CD_ETLS, "%s holds no PEM certificate (%s)", cert_path, ssl_reason("none found"));
        goto fail;
    }
    if ((c->chain = sk_X509_new_null()) == NULL) {
        sf_fail(e, SF_ENOMEM, "out of memory");
        goto fail;
    }
    for (X509 *x; (x = PEM_read_bio_X509(cb, NULL, NULL, NULL)) != NULL;)
        if (sk_X509_push(c->chain, x) <= 0) {
            X509_free(x);
            sf_fail(e, SF_ENOMEM, "out of memory");
            goto fail;
        }
    /* the loop ends at the end of the file, or at a block that is not a
     * certificate: only the first is fine */
    unsigned long last = ERR_peek_last_error();
    if (last != 0 && !(ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE)) {
        sf_fail(e, CD_ETLS, "%s: certificate %d of the chain is not readable (%s)", cert_path,
            sk_X509_num(c->chain) + 2, ssl_reason("bad PEM"));
        goto fail;
    }
    ERR_clear_error();
    if ((kb = read_file(key_path, "key", e)) == NULL)
        goto fail;
    if ((c->key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL)) == NULL) {
        sf_fail(e, CD_ETLS, "%s holds no PEM private key, or one under a passphrase (%s)", key_path,
            ssl_reason("none found"));
        goto fail;
    }
    name_of(c->leaf, c->subject, sizeof c->subject);
    if (X509_check_private_key(c->leaf, c->key) != 1) {
        ERR_clear_error();
        sf_fail(e, CD_ETLS, "%s is not the key of the certificate in %s (%s)", key_path, cert_path, c->subject);
        goto fail;
    }
    c->not_after = asn1_seconds(X509_get0_notAfter(c->leaf));
    time_t t = (time_t)now;
    if (X509_cmp_time(X509_get0_notAfter(c->leaf), &t) <= 0) {
        char when[64];
        cd_tlscert_date(c->not_after, when, sizeof when);
        sf_fail(e, CD_ETLS, "the certificate in %s (%s) expired on %s", cert_path, c->subject, when);
        goto fail;
    }
    BIO_free(cb);
    BIO_free(kb);
    return c;
fail:
    ERR_clear_error();
    BIO_free(cb);
    BIO_free(kb);
    cd_tlscert_free(c);
    return NULL;
}

void cd_tlscert_free(cd_tlscert *c)
{
    if (c == NULL)
        return;
    X509_free(c->leaf);
    sk_X509_pop_free(c->chain, X509_free);
    EVP_PKEY_free(c->key);
    free(c);
}

const char *cd_tlscert_subject(const cd_tlscert *c)
{
    return c->subject;
}

int64_t cd_tlscert_not_after(const cd_tlscert *c)
{
    return c->not_after;
}

static const char *key_kind(const EVP_PKEY *k)
{
    int id = EVP_PKEY_get_base_id(k);
    return id == EVP_PKEY_RSA ? "RSA" : id == EVP_PKEY_EC ? "EC" : id == EVP_PKEY_ED25519 ? "Ed25519" : OBJ_nid2sn(id);
}

int cd_tlscert_install(const cd_tlscert *c, void *ssl_ctx, sf_error *e)
{
    SSL_CTX *ctx = ssl_ctx;
    EVP_PKEY *cur = SSL_CTX_get0_privatekey(ctx);
    if (cur != NULL && EVP_PKEY_get_base_id(cur) != EVP_PKEY_get_base_id(c->key))
        return sf_fail(e, CD_ETLS, "its key is %s, the one served %s: restart the coordinator to change the key type",
            key_kind(c->key), key_kind(cur));
    ERR_clear_error();
    /* a new certificate drops a key that is not its own, so the key comes
     * after it; the chain belongs to the certificate just set */
    int ok = SSL_CTX_use_certificate(ctx, c->leaf) == 1 && SSL_CTX_clear_chain_certs(ctx) == 1;
    for (int i = 0; ok && i < sk_X509_num(c->chain); i++)
        ok = SSL_CTX_add1_chain_cert(ctx, sk_X509_value(c->chain, i)) == 1;
    ok = ok && SSL_CTX_use_PrivateKey(ctx, c->key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    if (!ok)
        return sf_fail(e, CD_ETLS, "OpenSSL did not take it: %s", ssl_reason("unknown error"));
    return 0;
}
