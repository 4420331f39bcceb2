/*
 * sign.h — node identity and signatures. A node holds an Ed25519 key pair
 * made from a 32-byte seed that its host persists (key file mode 0600 on
 * native nodes, IndexedDB in the browser). Two things are signed, both as the
 * canonical message
 *
 *     ts "\0" method "\0" host "\0" path "\0" hex(sha256(body))
 *
 * (ts in decimal unix seconds, hex in lowercase): the session hello (body =
 * the coordinator's 32-byte nonce) and every completion batch (body = the
 * encoded batch). The receiver rebuilds the message, rejects a ts more than
 * PR_MAX_SKEW_S away from its own clock, verifies the signature, and, for
 * completions, rejects a (ts, nonce) pair it has seen from that node
 * (replay.h).
 *
 * Call pr_init() once before anything here.
 */
#ifndef SIMFARM_PROTO_SIGN_H
#define SIMFARM_PROTO_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "proto/msg.h"
#include "proto/replay.h"

#define PR_SEED_BYTES 32u
#define PR_MAX_SKEW_S 300u
#define PR_MAX_HOST 255u            /* bytes of the host part */

/* The method and path of the two signed messages. */
#define PR_SIGN_METHOD "POST"
#define PR_SIGN_PATH_HELLO "/v1/node/hello"
#define PR_SIGN_PATH_COMPLETE "/v1/node/complete"

typedef struct pr_key {
    uint8_t pk[PR_PK_BYTES];
    uint8_t sk[64];                 /* libsodium's secret key: seed || pk */
} pr_key;

/* Initialises libsodium. Returns 0 or PR_ECRYPTO. Idempotent, thread-safe. */
int pr_init(void);

/* Derives the key pair of a 32-byte seed into *k. Returns PR_EKEYLEN when
 * seed_len is not 32 (k untouched). Wipe k with pr_key_wipe() when done. */
int pr_key_from_seed(pr_key *k, const uint8_t *seed, size_t seed_len);

/* Zeroes k so the secret does not linger in memory. */
void pr_key_wipe(pr_key *k);

/* Writes the canonical message into buf (cap bytes) and its length into
 * *len. method, host and path are NUL-free C strings of at most 16, 255 and
 * 255 bytes. Returns 0, PR_EINVAL (bad argument or buf too small; at most
 * PR_CANONICAL_MAX bytes are ever needed). */
#define PR_CANONICAL_MAX (20 + 1 + 16 + 1 + PR_MAX_HOST + 1 + 255 + 1 + 64)
int pr_canonical(char *buf, size_t cap, size_t *len, uint64_t ts, const char *method,
    const char *host, const char *path, const uint8_t *body, size_t body_len);

/* Signs the canonical message with k into sig. Returns 0 or PR_EINVAL. */
int pr_sign(uint8_t sig[PR_SIG_BYTES], const pr_key *k, uint64_t ts, const char *method,
    const char *host, const char *path, const uint8_t *body, size_t body_len);

/* Checks a signature made by pr_sign() against the public key pk, with the
 * receiver's clock now (unix seconds). Checks in this order and returns the
 * first failure: PR_EKEYLEN (pk_len != 32), PR_ESIGLEN (sig_len != 64),
 * PR_ESKEW (|ts - now| > 300), PR_EINVAL (bad method/host/path), PR_ESIG. */
int pr_verify(const uint8_t *sig, size_t sig_len, const uint8_t *pk, size_t pk_len,
    uint64_t ts, uint64_t now, const char *method, const char *host, const char *path,
    const uint8_t *body, size_t body_len);

/* Fills h->pk, h->ts and h->sig: k signs the coordinator's nonce from the
 * challenge for host at time ts. Returns 0 or PR_EINVAL. */
int pr_hello_sign(pr_hello *h, const pr_key *k, const char *host, uint64_t ts,
    const uint8_t nonce[PR_NONCE_BYTES]);

/* Checks a decoded hello against the nonce this session sent, at time now.
 * Returns 0, PR_ESKEW, PR_ESIG or PR_EINVAL. */
int pr_hello_verify(const pr_hello *h, const char *host, const uint8_t nonce[PR_NONCE_BYTES],
    uint64_t now);

/* Seals a completion: encodes c->batch (whose nonce the caller filled with
 * fresh random bytes) into a new buffer *payload (free() it after the frame is
 * encoded), points c->payload at it, and sets c->ts and c->sig. Returns 0 or
 * a pr_encode_batch()/pr_sign() error with *payload NULL and c unchanged. */
int pr_complete_seal(pr_complete *c, uint8_t **payload, const pr_key *k, const char *host,
    uint64_t ts);

/* The coordinator's check of a completion from the node whose public key is
 * pk: clock skew, signature over c->payload, then the replay guard of that
 * node (which records the pair only when everything else passed, and
 * refuses a pair it holds before the signature is checked). c must be
 * as pr_decode() left it: the replay nonce is read from c->batch, which is
 * the decoding of c->payload, the bytes the signature covers. Pass
 * guard NULL to skip the replay check (tests, offline audit). Returns 0,
 * PR_EKEYLEN, PR_ESKEW, PR_ESIG, PR_EREPLAY, PR_EREPLAYOLD or PR_EINVAL. */
int pr_complete_verify(const pr_complete *c, const uint8_t *pk, size_t pk_len,
    const char *host, uint64_t now, pr_replay *guard);

#endif
