/*
 * tlscert.h — the coordinator's TLS certificate, checked before it is used.
 *
 * `simfarm serve --tls-cert PEM --tls-key PEM` serves https and wss. The
 * pair is read and checked here (a certificate chain, a private key that
 * is the certificate's, not expired) at start and again on each SIGHUP,
 * when the gateway puts the renewed pair into the TLS context that every
 * new handshake uses. A pair that fails a check never reaches the context,
 * so a botched renewal leaves the coordinator serving the pair it had.
 * OpenSSL stays behind this header: tests/unit/test_tlscert.c checks it
 * alone, on certificates it makes.
 */
#ifndef SIMFARM_ACTORS_TLSCERT_H
#define SIMFARM_ACTORS_TLSCERT_H

#include "base/err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cd_tlscert cd_tlscert; /* a checked chain and its key */

/* Reads the PEM certificates in cert_path (the server's first, then the
 * intermediates a client needs) and the PEM private key in key_path, and
 * checks that the key belongs to the first certificate and that it has not
 * expired at `now` (Unix seconds). Returns the pair (the caller frees it),
 * or NULL with a code (CD_EIO, CD_ETLS, SF_ENOMEM) and a message naming the
 * file and what is wrong in e. */
cd_tlscert *cd_tlscert_load(const char *cert_path, const char *key_path, int64_t now, sf_error *e);

void cd_tlscert_free(cd_tlscert *c);

/* The first certificate's subject (its common name, or the whole name
 * when it has none) and the Unix second it expires. */
const char *cd_tlscert_subject(const cd_tlscert *c);
int64_t cd_tlscert_not_after(const cd_tlscert *c);

/* "2027-11-24 21:48:00 UTC" for Unix second t, into buf. */
void cd_tlscert_date(int64_t t, char *buf, size_t len);

/* Makes c the certificate, chain and key of ssl_ctx (an OpenSSL SSL_CTX),
 * for the handshakes that follow; connections already open keep theirs.
 * Refuses a key of another type than the one ssl_ctx holds (RSA for EC,
 * say): OpenSSL keeps one certificate per key type, so the old one would
 * still be offered beside it. Returns 0, or CD_ETLS with a message in e and
 * ssl_ctx as it was unless OpenSSL failed midway (the caller then installs
 * the pair it had). */
int cd_tlscert_install(const cd_tlscert *c, void *ssl_ctx, sf_error *e);

#endif
