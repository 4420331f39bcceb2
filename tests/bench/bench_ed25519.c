/*
 * bench_ed25519.c — what a signed completion costs: Ed25519 sign and verify
 * of a 128-byte canonical message, and SHA-256 over a 1 MiB body. Built
 * natively and with emcc (names get a _wasm suffix), since browser nodes
 * sign with the same code.
 */
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifdef __EMSCRIPTEN__
#define SUFFIX "_wasm"
#else
#define SUFFIX ""
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs fn in doubling batches until at least 0.5 s has passed; returns
 * calls per second. */
static double rate(void (*fn)(void))
{
    long n = 0, batch = 16;
    double t0 = now(), t;
    do {
        for (long i = 0; i < batch; i++)
            fn();
        n += batch;
        batch *= 2;
        t = now() - t0;
    } while (t < 0.5);
    return n / t;
}

static unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
static unsigned char msg[128], sig[crypto_sign_BYTES];
static unsigned char body[1 << 20], digest[crypto_hash_sha256_BYTES];
static volatile int sink;

static void sign(void)
{
    crypto_sign_detached(sig, NULL, msg, sizeof msg, sk);
}

static void verify(void)
{
    sink += crypto_sign_verify_detached(sig, msg, sizeof msg, pk);
}

static void hash(void)
{
    crypto_hash_sha256(digest, body, sizeof body);
    sink += digest[0];
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    memset(msg, 0x5a, sizeof msg);
    memset(body, 0xa5, sizeof body);
    crypto_sign_keypair(pk, sk);
    sign();

    printf("BENCH ed25519_sign%s %.0f ops/s\n", SUFFIX, rate(sign));
    printf("BENCH ed25519_verify%s %.0f ops/s\n", SUFFIX, rate(verify));
    printf("BENCH sha256%s %.1f MiB/s\n", SUFFIX, rate(hash));
    return sink == 12345 ? 2 : 0; /* keeps sink alive */
}
