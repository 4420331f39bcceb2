/*
 * sign.c — canonical messages, Ed25519 signing and verification (sign.h).
 */
#include "proto/sign.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pr_init(void)
{
    return sodium_init() < 0 ? PR_ECRYPTO : 0;
}

int pr_key_from_seed(pr_key *k, const uint8_t *seed, size_t seed_len)
{
    if (k == NULL || seed == NULL)
        return PR_EINVAL;
    if (seed_len != PR_SEED_BYTES)
        return PR_EKEYLEN;
    if (crypto_sign_seed_keypair(k->pk, k->sk, seed) != 0)
        return PR_ECRYPTO;
    return 0;
}

void pr_key_wipe(pr_key *k)
{
    if (k != NULL)
        sodium_memzero(k, sizeof *k);
}

/* Appends s and a NUL separator; s must be NUL-free (a C string is) and at
 * most max bytes. */
static int put_part(char *buf, size_t cap, size_t *at, const char *s, size_t max)
{
    size_t n;
    if (s == NULL)
        return PR_EINVAL;
    n = strlen(s);
    if (n > max || *at + n + 1 > cap)
        return PR_EINVAL;
    memcpy(buf + *at, s, n);
    *at += n;
    buf[(*at)++] = '\0';
    return 0;
}

int pr_canonical(char *buf, size_t cap, size_t *len, uint64_t ts, const char *method,
    const char *host, const char *path, const uint8_t *body, size_t body_len)
{
    uint8_t digest[crypto_hash_sha256_BYTES];
    char tsbuf[24];
    size_t at = 0;
    int rc;

    if (buf == NULL || len == NULL || (body == NULL && body_len > 0))
        return PR_EINVAL;
    snprintf(tsbuf, sizeof tsbuf, "%llu", (unsigned long long)ts);
    if ((rc = put_part(buf, cap, &at, tsbuf, 20)) != 0 ||
        (rc = put_part(buf, cap, &at, method, 16)) != 0 ||
        (rc = put_part(buf, cap, &at, host, PR_MAX_HOST)) != 0 ||
        (rc = put_part(buf, cap, &at, path, 255)) != 0)
        return rc;
    if (method[0] == '\0' || host[0] == '\0' || path[0] == '\0')
        return PR_EINVAL;
    if (at + 2 * sizeof digest > cap)
        return PR_EINVAL;
    crypto_hash_sha256(digest, body ? body : (const uint8_t *)"", body_len);
    /* sodium_bin2hex writes lowercase and a NUL we do not keep. */
    char hex[2 * sizeof digest + 1];
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    memcpy(buf + at, hex, 2 * sizeof digest);
    *len = at + 2 * sizeof digest;
    return 0;
}

int pr_sign(uint8_t sig[PR_SIG_BYTES], const pr_key *k, uint64_t ts, const char *method,
    const char *host, const char *path, const uint8_t *body, size_t body_len)
{
    char msg[PR_CANONICAL_MAX];
    size_t len;
    int rc;

    if (sig == NULL || k == NULL)
        return PR_EINVAL;
    if ((rc = pr_canonical(msg, sizeof msg, &len, ts, method, host, path, body, body_len)) != 0)
        return rc;
    crypto_sign_detached(sig, NULL, (const unsigned char *)msg, len, k->sk);
    return 0;
}

/* Whether a signature's ts is within the skew window of the receiver's now. */
static bool in_window(uint64_t ts, uint64_t now)
{
    return (ts > now ? ts - now : now - ts) <= PR_MAX_SKEW_S;
}

int pr_verify(const uint8_t *sig, size_t sig_len, const uint8_t *pk, size_t pk_len,
    uint64_t ts, uint64_t now, const char *method, const char *host, const char *path,
    const uint8_t *body, size_t body_len)
{
    char msg[PR_CANONICAL_MAX];
    size_t len;
    int rc;

    if (pk == NULL || pk_len != PR_PK_BYTES)
        return PR_EKEYLEN;
    if (sig == NULL || sig_len != PR_SIG_BYTES)
        return PR_ESIGLEN;
    if (!in_window(ts, now))
        return PR_ESKEW;
    if ((rc = pr_canonical(msg, sizeof msg, &len, ts, method, host, path, body, body_len)) != 0)
        return rc;
    if (crypto_sign_verify_detached(sig, (const unsigned char *)msg, len, pk) != 0)
        return PR_ESIG;
    return 0;
}

int pr_hello_sign(pr_hello *h, const pr_key *k, const char *host, uint64_t ts,
    const uint8_t nonce[PR_NONCE_BYTES])
{
    uint8_t sig[PR_SIG_BYTES];
    int rc;

    if (h == NULL || k == NULL || nonce == NULL)
        return PR_EINVAL;
    rc = pr_sign(sig, k, ts, PR_SIGN_METHOD, host, PR_SIGN_PATH_HELLO, nonce, PR_NONCE_BYTES);
    if (rc != 0)
        return rc;
    memcpy(h->pk, k->pk, sizeof h->pk);
    memcpy(h->sig, sig, sizeof h->sig);
    h->ts = ts;
    return 0;
}

int pr_hello_verify(const pr_hello *h, const char *host, const uint8_t nonce[PR_NONCE_BYTES],
    uint64_t now)
{
    if (h == NULL || nonce == NULL)
        return PR_EINVAL;
    return pr_verify(h->sig, sizeof h->sig, h->pk, sizeof h->pk, h->ts, now, PR_SIGN_METHOD,
        host, PR_SIGN_PATH_HELLO, nonce, PR_NONCE_BYTES);
}

int pr_complete_seal(pr_complete *c, uint8_t **payload, const pr_key *k, const char *host,
    uint64_t ts)
{
    uint8_t *buf = NULL, sig[PR_SIG_BYTES];
    size_t len = 0;
    int rc;

    if (payload == NULL)
        return PR_EINVAL;
    *payload = NULL;
    if (c == NULL || k == NULL)
        return PR_EINVAL;
    if ((rc = pr_encode_batch(&c->batch, &buf, &len)) != 0)
        goto fail;
    if (len > PR_MAX_PAYLOAD) {
        rc = PR_EBINSIZE;
        goto fail;
    }
    if ((rc = pr_sign(sig, k, ts, PR_SIGN_METHOD, host, PR_SIGN_PATH_COMPLETE, buf, len)) != 0)
        goto fail;
    c->payload.ptr = buf;
    c->payload.len = (uint32_t)len;
    c->ts = ts;
    memcpy(c->sig, sig, sizeof sig);
    *payload = buf;
    return 0;
fail:
    free(buf);
    return rc;
}

int pr_complete_verify(const pr_complete *c, const uint8_t *pk, size_t pk_len,
    const char *host, uint64_t now, pr_replay *guard)
{
    int rc;

    if (c == NULL || (c->payload.ptr == NULL && c->payload.len > 0))
        return PR_EINVAL;
    /* A pair the guard holds had its signature checked once: a frame that
     * repeats it is refused without checking its own, so a stream of
     * replays costs the receiver a lookup each. Inside the skew window only:
     * a frame too old is PR_ESKEW, as it would be without a guard. */
    if (guard != NULL && in_window(c->ts, now) && (rc = pr_replay_seen(guard, c->ts, c->batch.nonce)) != 0)
        return rc;
    rc = pr_verify(c->sig, sizeof c->sig, pk, pk_len, c->ts, now, PR_SIGN_METHOD, host,
        PR_SIGN_PATH_COMPLETE, c->payload.ptr, c->payload.len);
    if (rc != 0 || guard == NULL)
        return rc;
    /* Only after the signature: a forged frame must not take room in the
     * guard or raise its floor. */
    return pr_replay_check(guard, c->ts, c->batch.nonce, now);
}
