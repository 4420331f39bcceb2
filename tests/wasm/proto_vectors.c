/*
 * proto_vectors.c — the golden vectors of the wire protocol, checked by the
 * native and the emcc build alike (tests/wasm/proto_vectors.test.mjs runs
 * both and compares their transcripts).
 *
 *   proto_vectors NAME=HEX ...   decodes each frame, re-encodes it, verifies
 *                                its signature when it carries one, and
 *                                prints a "key value" transcript
 *   proto_vectors gen            prints tests/vectors/proto.vec (how the
 *                                committed vectors were made)
 *
 * The work context (vector "ctx") is a real one, made as the coordinator
 * makes a job's (sim_ctx_encode over the submission's params), and the
 * transcript says whether it opens as a node opens it (sim_work_open).
 *
 * Signed vectors use the fixed test key (RFC 8032 section 7.1 TEST 1 seed),
 * host "farm.example.org", and are verified with the receiver's clock equal
 * to their own ts.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "proto/msg.h"
#include "proto/sign.h"
#include "sim/ctx.h"

#define HOST "farm.example.org"
#define TEST_SEED "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
#define TS 1795000000u
#define TS_MS 1795000000000u

static char fmtbuf[1 << 16];

static void print_hex(const char *key, const uint8_t *p, size_t n)
{
    printf("%s", key);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\n");
}

static int test_key(pr_key *k)
{
    uint8_t seed[32];
    size_t len = 0;
    if (sodium_hex2bin(seed, sizeof seed, TEST_SEED, strlen(TEST_SEED), NULL, &len, NULL) != 0 ||
        len != sizeof seed)
        return -1;
    return pr_key_from_seed(k, seed, sizeof seed);
}

/* ---- checking ------------------------------------------------------------------ */

static int check_one(const pr_key *k, const char *name, const char *hex)
{
    size_t hexlen = strlen(hex), len = 0, relen = 0;
    uint8_t *frame = malloc(hexlen / 2 + 1), *re = NULL;
    pr_msg m;
    int rc;

    if (frame == NULL ||
        sodium_hex2bin(frame, hexlen / 2 + 1, hex, hexlen, NULL, &len, NULL) != 0) {
        printf("%s.hex bad\n", name);
        free(frame);
        return -1;
    }
    rc = pr_decode(&m, frame, len);
    printf("%s.decode %s\n", name, pr_errname(rc));
    if (rc != 0) {
        printf("%s.at %s\n", name, m.err_at[0] ? m.err_at : "-");
        printf("%s.id %llu\n", name, (unsigned long long)m.id);
        free(frame);
        return 0;
    }
    printf("%s.type %s\n", name, pr_type_name(m.type));
    pr_msg_format(&m, fmtbuf, sizeof fmtbuf);
    printf("%s.format %s\n", name, fmtbuf);
    rc = pr_encode(&m, &re, &relen);
    printf("%s.encode %s\n", name, pr_errname(rc));
    if (rc == 0) {
        printf("%s.same %s\n", name, relen == len && memcmp(re, frame, len) == 0 ? "yes" : "no");
        free(re);
    }
    if (m.type == PR_MSG_COMPLETE) {
        uint8_t *payload = NULL;
        size_t plen = 0;
        rc = pr_encode_batch(&m.body.complete.batch, &payload, &plen);
        printf("%s.payload_same %s\n", name,
            rc == 0 && plen == m.body.complete.payload.len &&
                    memcmp(payload, m.body.complete.payload.ptr, plen) == 0
                ? "yes" : "no");
        free(payload);
        rc = pr_complete_verify(&m.body.complete, k->pk, sizeof k->pk, HOST,
            m.body.complete.ts, NULL);
        printf("%s.verify %s\n", name, pr_errname(rc));
    } else if (m.type == PR_MSG_CTX) {
        sim_work w;
        char err[256] = "";
        rc = sim_work_open(&w, m.body.ctx.bytes.ptr, m.body.ctx.bytes.len, err, sizeof err);
        if (rc == 0) {
            printf("%s.ctx_opens yes variants=%u every=%s\n", name, (unsigned)w.n, w.every ? "true" : "false");
            sim_work_close(&w);
        } else {
            printf("%s.ctx_opens no: %s\n", name, err);
        }
    } else if (m.type == PR_MSG_HELLO) {
        /* The nonce the coordinator sent in the vector named "challenge". */
        uint8_t nonce[PR_NONCE_BYTES];
        for (unsigned i = 0; i < sizeof nonce; i++)
            nonce[i] = (uint8_t)(0xa0 + i);
        rc = pr_hello_verify(&m.body.hello, HOST, nonce, m.body.hello.ts);
        printf("%s.verify %s\n", name, pr_errname(rc));
    }
    pr_msg_free(&m);
    free(frame);
    return 0;
}

/* ---- generating ---------------------------------------------------------------- */

static void emit(const char *name, const char *desc, const uint8_t *p, size_t n)
{
    printf("\n# %s\n", desc);
    printf("frame %s ", name);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\n");
}

static int emit_msg(const char *name, const char *desc, const pr_msg *m)
{
    uint8_t *out = NULL;
    size_t len = 0;
    int rc = pr_encode(m, &out, &len);
    if (rc != 0) {
        fprintf(stderr, "gen %s: %s\n", name, sf_strerror(rc));
        return rc;
    }
    pr_msg_format(m, fmtbuf, sizeof fmtbuf);
    printf("\n# %s\n# %s\n", desc, fmtbuf);
    printf("frame %s ", name);
    for (size_t i = 0; i < len; i++)
        printf("%02x", out[i]);
    printf("\n");
    free(out);
    return 0;
}

static void fill(uint8_t *p, size_t n, uint8_t first)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(first + i);
}

/* Job 77's work context: an option job of seed 1 with these params, as
 * the coordinator encodes a submission's (PROTOCOL.md, ctx). */
#define CTX_PARAMS "{\"style\":\"european\",\"type\":\"call\",\"S0\":100,\"K\":105,\"r\":0.05,\"sigma\":0.2,\"T\":1}"

static int gen(const pr_key *k)
{
    msgpack_sbuffer params, ctx;
    uint8_t ctx_hash[32], *payload = NULL, *frame = NULL;
    size_t len = 0;
    pr_msg m;
    int rc = 0;

    msgpack_sbuffer_init(&params);
    msgpack_sbuffer_init(&ctx);
    if (sf_json_to_msgpack(CTX_PARAMS, strlen(CTX_PARAMS), &params, NULL, 0) != 0)
        return -1;
    sim_ctx_encode(&ctx, "option", 1, params.data, params.size);
    msgpack_sbuffer_destroy(&params);
    const uint8_t *ctx_bytes = (const uint8_t *)ctx.data;
    size_t ctx_len = ctx.size;
    crypto_hash_sha256(ctx_hash, ctx_bytes, ctx_len);
    printf("# tests/vectors/proto.vec — golden frames of the simfarm wire protocol, v%d.\n", PR_VERSION);
    printf("# Made by `build/tests/wasm/proto_vectors gen`; checked by tests/unit/test_proto_vectors.c\n");
    printf("# (native) and tests/wasm/proto_vectors.test.mjs (native and emcc builds).\n");
    printf("# Line format: `frame NAME HEX` (one msgpack envelope), `expect NAME RESULT` (the\n");
    printf("# error name pr_decode or the signature check must give), `# ...` comments.\n");
    printf("# Signing key: Ed25519 seed %s (RFC 8032 7.1 TEST 1),\n", TEST_SEED);
    print_hex("# public key ", k->pk, sizeof k->pk);
    printf("# Signed host \"%s\", signature ts %u; verify with now = ts.\n", HOST, TS);

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CHALLENGE, m.id = 1, m.ts = TS_MS;
    fill(m.body.challenge.nonce, 32, 0xa0);
    m.body.challenge.server = "simfarm 0.1.0";
    if ((rc = emit_msg("challenge", "coordinator -> node: session challenge, nonce a0a1..bf", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    pr_backend be[2] = {
        { PR_BACKEND_CPU, "AMD EPYC 7B13", 34359738368u, 8 },
        { PR_BACKEND_OPENCL, "NVIDIA GeForce RTX 4090", 25757220864u, 128 },
    };
    uint8_t nonce[32];
    fill(nonce, 32, 0xa0);
    m.type = PR_MSG_HELLO, m.id = 1, m.ts = TS_MS + 5;
    m.body.hello.version = "simfarm-node 0.1.0";
    m.body.hello.claim_token = "enrol-7f3a9c";
    m.body.hello.caps = (pr_caps){ 8, 6, "linux", "x86_64", NULL, be, 2 };
    static const char *features[] = { PR_FEATURE_MALFORMED };
    m.body.hello.features = features, m.body.hello.nfeatures = 1;
    m.body.hello.name = "gpu-box-7";
    if ((rc = pr_hello_sign(&m.body.hello, k, HOST, TS, nonce)) != 0)
        return rc;
    if ((rc = emit_msg("hello", "node -> coordinator: hello answering the challenge, enrolling with a claim token, "
             "reading the outcome \"malformed\", named gpu-box-7; signed", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HELLO, m.id = 1, m.ts = TS_MS + 7;
    m.body.hello.version = "simfarm-node 0.1.0 (wasm)";
    m.body.hello.caps = (pr_caps){ 4, 3, NULL, "wasm32", "Chromium 130", (pr_backend[]){ { PR_BACKEND_WASM, "wasm32 simd128", 2147483648u, 4 } }, 1 };
    if ((rc = pr_hello_sign(&m.body.hello, k, HOST, TS, nonce)) != 0)
        return rc;
    if ((rc = emit_msg("hello_browser", "browser node hello (no claim token: already enrolled); signed", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_WELCOME, m.id = 1, m.ts = TS_MS + 9;
    m.body.welcome = (pr_welcome){ 4242, 5000, { 6, 2000, false } };
    if ((rc = emit_msg("welcome", "coordinator -> node: welcome, node id 4242, heartbeat every 5 s", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    pr_device_stat ds[1] = { { "NVIDIA GeForce RTX 4090", 870, 3221225472u, 25757220864u } };
    uint64_t inflight[3] = { 700, 701, 702 };
    m.type = PR_MSG_HEARTBEAT, m.id = 2, m.ts = TS_MS + 5000;
    m.body.heartbeat = (pr_heartbeat){ 912, 8589934592u, 34359738368u, ds, 1, inflight, 3, 0 };
    if ((rc = emit_msg("heartbeat", "node -> coordinator: heartbeat with one GPU and three chunks in flight", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HEARTBEAT, m.id = 3, m.ts = TS_MS + 5500;
    m.body.heartbeat = (pr_heartbeat){ 250, 33554432u, 0, NULL, 0, inflight, 3, 1 };
    if ((rc = emit_msg("heartbeat_browser",
             "browser node -> coordinator: its contributor lowered the cores to 1 with three chunks in hand", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    pr_chunk ch[2];
    memset(ch, 0, sizeof ch);
    ch[0].chunk = 700, ch[0].start = 0, ch[0].count = 1000000, ch[0].lease_ms = 60000;
    ch[1].chunk = 701, ch[1].start = 1000000, ch[1].count = 1000000, ch[1].lease_ms = 60000;
    fill(ch[0].token, 16, 0x10);
    fill(ch[1].token, 16, 0x20);
    m.type = PR_MSG_ASSIGN, m.id = 3, m.ts = TS_MS + 6000;
    m.body.assign.job = 77, m.body.assign.kernel = "option";
    memcpy(m.body.assign.ctx_hash, ctx_hash, 32);
    m.body.assign.chunks = ch, m.body.assign.nchunks = 2;
    if ((rc = emit_msg("assign", "coordinator -> node: two chunks of job 77 (items 0..2e6), one-minute leases", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CTX_REQ, m.id = 4, m.ts = TS_MS + 6100;
    m.body.ctx_req.job = 77;
    memcpy(m.body.ctx_req.hash, ctx_hash, 32);
    if ((rc = emit_msg("ctx_req", "node -> coordinator: fetch job 77's work context", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CTX, m.id = 4, m.ts = TS_MS + 6150;
    m.body.ctx.job = 77;
    memcpy(m.body.ctx.hash, ctx_hash, 32);
    m.body.ctx.bytes = (pr_bytes){ ctx_bytes, (uint32_t)ctx_len };
    rc = emit_msg("ctx", "coordinator -> node: the work context {kernel: \"option\", seed: 1, params: " CTX_PARAMS
        "} (hash = SHA-256 of the bytes)", &m);
    printf("# bytes ");
    for (size_t i = 0; i < ctx_len; i++)
        printf("%02x", ctx_bytes[i]);
    printf("\n");
    msgpack_sbuffer_destroy(&ctx);
    if (rc != 0)
        return rc;

    memset(&m, 0, sizeof m);
    pr_result rs[2];
    memset(rs, 0, sizeof rs);
    static const uint8_t stat0[] = { 0x01, 0x02, 0x03, 0x04 }, stat1[] = { 0x05, 0x06, 0x07, 0x08 };
    rs[0].chunk = 700, rs[0].start = 0, rs[0].count = 1000000, rs[0].elapsed_ms = 4210;
    rs[1].chunk = 701, rs[1].start = 1000000, rs[1].count = 1000000, rs[1].elapsed_ms = 4185;
    fill(rs[0].token, 16, 0x10);
    fill(rs[1].token, 16, 0x20);
    rs[0].data = (pr_bytes){ stat0, 4 };
    rs[1].data = (pr_bytes){ stat1, 4 };
    m.type = PR_MSG_COMPLETE, m.id = 5, m.ts = TS_MS + 9000;
    fill(m.body.complete.batch.nonce, 16, 0xc0);
    m.body.complete.batch.job = 77;
    memcpy(m.body.complete.batch.ctx_hash, ctx_hash, 32);
    m.body.complete.batch.results = rs, m.body.complete.batch.nresults = 2;
    if ((rc = pr_complete_seal(&m.body.complete, &payload, k, HOST, TS)) != 0)
        return rc;
    rc = emit_msg("complete", "node -> coordinator: a signed batch of two chunk results (nonce c0c1..cf)", &m);
    if (rc == 0 && (rc = pr_encode(&m, &frame, &len)) == 0) {
        char canon[PR_CANONICAL_MAX];
        size_t clen = 0;
        pr_canonical(canon, sizeof canon, &clen, TS, PR_SIGN_METHOD, HOST, PR_SIGN_PATH_COMPLETE,
            payload, m.body.complete.payload.len);
        printf("# signed bytes (canonical message, NULs shown as \\0): ");
        for (size_t i = 0; i < clen; i++)
            printf(canon[i] ? "%c" : "\\0", canon[i]);
        printf("\n");
        print_hex("# payload (the signed body) ", payload, m.body.complete.payload.len);
        print_hex("# signature ", m.body.complete.sig, 64);
        /* Negative vectors made from the good one. */
        uint8_t *bad = malloc(len);
        if (bad == NULL)
            return -1;
        memcpy(bad, frame, len);
        bad[len - 71] ^= 0x01; /* the payload's last byte: after it come "sig" (4 bytes), a bin8 header (2) and 64 signature bytes */
        emit("complete_tampered", "the complete frame with one payload bit flipped: decodes, signature fails", bad, len);
        printf("expect complete_tampered.verify ESIG\n");
        emit("complete_truncated", "the complete frame cut 10 bytes short", frame, len - 10);
        printf("expect complete_truncated.decode ETRUNC\n");
        free(bad);
    }
    free(frame);
    free(payload);
    if (rc != 0)
        return rc;

    memset(&m, 0, sizeof m);
    pr_outcome oc[2] = { { 700, PR_OUTCOME_ACCEPTED, NULL, NULL }, { 701, PR_OUTCOME_IDEMPOTENT, NULL, NULL } };
    m.type = PR_MSG_COMPLETE_ACK, m.id = 5, m.ts = TS_MS + 9010;
    m.body.complete_ack = (pr_complete_ack){ 77, true, oc, 2 };
    if ((rc = emit_msg("complete_ack", "coordinator -> node: one outcome per chunk; the job is complete", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    pr_outcome mal[2] = { { 702, PR_OUTCOME_ACCEPTED, NULL, NULL } };
    pr_outcome_malformed(&mal[1], 703, "result covers 999999 items, the chunk has 1000000", true);
    m.type = PR_MSG_COMPLETE_ACK, m.id = 10, m.ts = TS_MS + 9015;
    m.body.complete_ack = (pr_complete_ack){ 77, false, mal, 2 };
    if ((rc = emit_msg("complete_ack_malformed",
             "coordinator -> node: chunk 703's result refused as malformed, to a node whose hello announced the "
             "feature \"malformed\": the outcome \"malformed\" and its reason", &m)) != 0)
        return rc;
    pr_outcome_malformed(&mal[1], 703, "result covers 999999 items, the chunk has 1000000", false);
    m.id = 11, m.ts = TS_MS + 9016;
    if ((rc = emit_msg("complete_ack_malformed_stale",
             "coordinator -> node: the same to a node that announced no features: outcome \"stale\" with the reason "
             "under \"malformed\"", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    uint64_t cancel_chunks[1] = { 702 };
    m.type = PR_MSG_CANCEL, m.id = 6, m.ts = TS_MS + 9020;
    m.body.cancel = (pr_cancel){ 77, cancel_chunks, 1, "job complete" };
    if ((rc = emit_msg("cancel", "coordinator -> node: drop chunk 702 of job 77", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CONFIG, m.id = 7, m.ts = TS_MS + 9030;
    m.body.config = (pr_config){ 2, 0, true };
    if ((rc = emit_msg("config", "coordinator -> node: the owner paused the node and lowered max_parallel", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_ERROR, m.id = 8, m.ts = TS_MS + 9040;
    m.body.error = (pr_error_body){ PR_EUNKNOWNTYPE, "unknown message type \"telemetry\"" };
    if ((rc = emit_msg("error", "either way: the answer to a frame of an unknown type (code PR_EUNKNOWNTYPE = -20)", &m)) != 0)
        return rc;

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_BYE, m.id = 9, m.ts = TS_MS + 9050;
    m.body.bye = (pr_bye){ PR_BYE_DRAINING, "SIGTERM" };
    if ((rc = emit_msg("bye", "node -> coordinator: draining (finishing in-flight chunks, then leaving)", &m)) != 0)
        return rc;

    /* Hand-written bad frames. */
    static const struct { const char *name, *desc, *hex, *expect; } bad[] = {
        { "bad_version", "envelope with v = 2", "85a17602a474797065a3627965a2696409a27473cf000001a1f0e7a5daa4626f647981a6726561736f6ea76c656176696e67", "EVERSION" },
        { "unknown_type", "a type this version does not know (answered with an error, id 9 kept)", "85a17601a474797065a974656c656d65747279a2696409a27473cf000001a1f0e7a5daa4626f647980", "EUNKNOWNTYPE" },
        { "reserved_byte", "0xc1 where a value should be", "81a176c1", "EMSGPACK" },
        { "ext_type", "a fixext1 value", "81a176d40100", "EEXT" },
        { "huge_array", "array32 header claiming 2^31 entries in 5 bytes", "dd80000000", "ECOUNT" },
        { "deep", "17 nested arrays", "9191919191919191919191919191919190", "EDEPTH" },
        { "trailing", "a valid bye frame followed by one byte", "85a17601a474797065a3627965a2696409a27473cf000001a1f0e7a5daa4626f647981a6726561736f6ea76c656176696e6700", "ETRAILING" },
        { "dup_key", "the key v twice", "86a17601a17601a474797065a3627965a2696409a27473cf000001a1f0e7a5daa4626f647981a6726561736f6ea76c656176696e67", "EDUPKEY" },
        { "int_key", "an integer map key", "8101c0", "EKEYTYPE" },
        { "bad_enum", "bye with reason \"sleeping\"", "85a17601a474797065a3627965a2696409a27473cf000001a1f0e7a5daa4626f647981a6726561736f6ea8736c656570696e67", "EENUM" },
        { "malformed_beside_accepted", "complete_ack whose accepted outcome carries a malformed reason",
            "85a17601a474797065ac636f6d706c6574655f61636ba269640aa27473cf000001a1ee568138a4626f647982a36a6f624da86f7574636f6d65739183a56368756e6bcd02bfa76f7574636f6d65a86163636570746564a96d616c666f726d6564b6726573756c7420646f6573206e6f74206465636f6465",
            "EENUM" },
        { "malformed_too_long", "complete_ack whose malformed reason is 201 bytes",
            "85a17601a474797065ac636f6d706c6574655f61636ba269640aa27473cf000001a1ee568138a4626f647982a36a6f624da86f7574636f6d65739183a56368756e6bcd02bfa76f7574636f6d65a57374616c65a96d616c666f726d6564d9c9"
            "7272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272"
            "7272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272"
            "7272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272"
            "7272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272727272"
            "72",
            "ESTRLEN" },
        { "missing_body", "envelope without body", "84a17601a474797065a3627965a2696409a27473cf000001a1f0e7a5da", "EMISSING" },
        { "not_a_map", "a bare integer", "2a", "ETYPE" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        printf("\n# %s\nframe %s %s\nexpect %s.decode %s\n", bad[i].desc, bad[i].name, bad[i].hex,
            bad[i].name, bad[i].expect);
    }
    return 0;
}

int main(int argc, char **argv)
{
    pr_key k;

    if (pr_init() != 0 || test_key(&k) != 0) {
        fprintf(stderr, "proto_vectors: cannot set up the test key\n");
        return 1;
    }
    if (argc == 2 && strcmp(argv[1], "gen") == 0)
        return gen(&k) == 0 ? 0 : 1;
    print_hex("key.pk ", k.pk, sizeof k.pk);
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (eq == NULL) {
            fprintf(stderr, "proto_vectors: expected NAME=HEX, got %s\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        if (check_one(&k, argv[i], eq + 1) != 0)
            return 1;
    }
    pr_key_wipe(&k);
    return 0;
}
