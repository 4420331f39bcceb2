/*
 * smoke.c — the same C built natively and with emcc; both builds must print
 * the same transcript. It exercises the two libraries every node build links:
 * libsodium (Ed25519 over RFC 8032's first test vector, SHA-256) and
 * msgpack-c (an envelope-shaped map packed, unpacked and walked back).
 *
 * Output: one "key value" line each; the wasm test compares the native and
 * the WebAssembly transcripts and checks the RFC 8032 values.
 */
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

static void print_hex(const char *key, const unsigned char *p, size_t n)
{
    printf("%s ", key);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\n");
}

static int hex_decode(unsigned char *out, size_t n, const char *hex)
{
    size_t len;
    if (sodium_hex2bin(out, n, hex, strlen(hex), NULL, &len, NULL) != 0 || len != n)
        return -1;
    return 0;
}

/* RFC 8032, section 7.1, TEST 1 (empty message) and TEST 2 (one byte). */
static int ed25519(void)
{
    unsigned char seed[crypto_sign_SEEDBYTES];
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    unsigned char sig[crypto_sign_BYTES];
    const unsigned char msg2[1] = { 0x72 };

    if (hex_decode(seed, sizeof seed,
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60") != 0)
        return -1;
    crypto_sign_seed_keypair(pk, sk, seed);
    print_hex("ed25519.pk", pk, sizeof pk);

    crypto_sign_detached(sig, NULL, (const unsigned char *)"", 0, sk);
    print_hex("ed25519.sig.empty", sig, sizeof sig);
    printf("ed25519.verify.empty %s\n",
        crypto_sign_verify_detached(sig, (const unsigned char *)"", 0, pk) == 0 ? "ok" : "bad");

    if (hex_decode(seed, sizeof seed,
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb") != 0)
        return -1;
    crypto_sign_seed_keypair(pk, sk, seed);
    crypto_sign_detached(sig, NULL, msg2, sizeof msg2, sk);
    print_hex("ed25519.sig.72", sig, sizeof sig);
    printf("ed25519.verify.72 %s\n",
        crypto_sign_verify_detached(sig, msg2, sizeof msg2, pk) == 0 ? "ok" : "bad");

    sig[7] ^= 0x01; /* one flipped bit must fail verification */
    printf("ed25519.verify.tampered %s\n",
        crypto_sign_verify_detached(sig, msg2, sizeof msg2, pk) == 0 ? "ok" : "bad");
    return 0;
}

static void sha256(void)
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)"abc", 3);
    print_hex("sha256.abc", h, sizeof h);
}

static void print_object(msgpack_object o)
{
    switch (o.type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: printf("u%llu", (unsigned long long)o.via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: printf("i%lld", (long long)o.via.i64); break;
    case MSGPACK_OBJECT_FLOAT64: printf("f%.17g", o.via.f64); break;
    case MSGPACK_OBJECT_STR: printf("s'%.*s'", (int)o.via.str.size, o.via.str.ptr); break;
    case MSGPACK_OBJECT_BIN:
        printf("b");
        for (uint32_t i = 0; i < o.via.bin.size; i++)
            printf("%02x", (unsigned char)o.via.bin.ptr[i]);
        break;
    case MSGPACK_OBJECT_MAP:
        printf("{");
        for (uint32_t i = 0; i < o.via.map.size; i++) {
            print_object(o.via.map.ptr[i].key);
            printf(":");
            print_object(o.via.map.ptr[i].val);
            printf(i + 1 < o.via.map.size ? "," : "");
        }
        printf("}");
        break;
    default: printf("?%d", (int)o.type); break;
    }
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static int msgpack(void)
{
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_unpacked up;
    const char bin[3] = { 0x00, 0x7f, (char)0xff };
    int rc = 0;

    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 6);
    pack_str(&pk, "v"), msgpack_pack_uint8(&pk, 1);
    pack_str(&pk, "type"), pack_str(&pk, "hello");
    pack_str(&pk, "id"), msgpack_pack_uint64(&pk, 18446744073709551615ull);
    pack_str(&pk, "n"), msgpack_pack_int64(&pk, -9007199254740993ll);
    pack_str(&pk, "x"), msgpack_pack_double(&pk, 0.1);
    pack_str(&pk, "b"), msgpack_pack_bin(&pk, sizeof bin), msgpack_pack_bin_body(&pk, bin, sizeof bin);
    print_hex("msgpack.bytes", (const unsigned char *)buf.data, buf.size);

    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, buf.data, buf.size, NULL) != MSGPACK_UNPACK_SUCCESS) {
        rc = -1;
    } else {
        printf("msgpack.decoded ");
        print_object(up.data);
        printf("\n");
    }
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&buf);
    return rc;
}

int main(void)
{
    if (sodium_init() < 0) {
        fprintf(stderr, "smoke: sodium_init failed\n");
        return 1;
    }
    printf("sodium.version %s\n", sodium_version_string());
    printf("msgpack.version %s\n", msgpack_version());
    if (ed25519() != 0 || msgpack() != 0) {
        fprintf(stderr, "smoke: a step failed\n");
        return 1;
    }
    sha256();
    return 0;
}
