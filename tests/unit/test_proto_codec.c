/*
 * test_proto_codec.c — the wire codec: round trips of every message type,
 * the canonical form, forward compatibility (unknown fields, nil optionals),
 * every limit at and past its edge, and one case per kind of malformed input,
 * each of which must give its own error code.
 */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/sign.h"

/* ---- helpers ------------------------------------------------------------------- */

/* Encodes m, decodes the bytes into *out, and checks that encoding *out
 * again gives the same bytes. */
static void round_trip(const pr_msg *m, pr_msg *out)
{
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    int rc = pr_encode(m, &a, &alen);
    cr_assert_eq(rc, 0, "encode: %s", sf_strerror(rc));
    rc = pr_decode(out, a, alen);
    cr_assert_eq(rc, 0, "decode: %s at %s", sf_strerror(rc), out->err_at);
    cr_assert_eq(out->type, m->type);
    cr_assert_eq(out->id, m->id);
    cr_assert_eq(out->ts, m->ts);
    cr_assert_eq(pr_encode(out, &b, &blen), 0);
    cr_assert_eq(blen, alen);
    cr_assert_arr_eq(a, b, alen);
    free(a);
    free(b);
}

/* A msgpack writer for hand-made frames. */
typedef struct mp {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} mp;

static void mp_init(mp *w)
{
    msgpack_sbuffer_init(&w->sb);
    msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
}

static void mp_str(mp *w, const char *s)
{
    msgpack_pack_str(&w->pk, strlen(s));
    msgpack_pack_str_body(&w->pk, s, strlen(s));
}

static void mp_bin(mp *w, const void *p, size_t n)
{
    msgpack_pack_bin(&w->pk, n);
    msgpack_pack_bin_body(&w->pk, p, n);
}

/* Starts an envelope of type with a body map of nfields entries. */
static void mp_envelope(mp *w, const char *type, uint32_t nfields)
{
    mp_init(w);
    msgpack_pack_map(&w->pk, 5);
    mp_str(w, "v"), msgpack_pack_uint8(&w->pk, 1);
    mp_str(w, "type"), mp_str(w, type);
    mp_str(w, "id"), msgpack_pack_uint8(&w->pk, 7);
    mp_str(w, "ts"), msgpack_pack_uint64(&w->pk, 1795000000000ull);
    mp_str(w, "body"), msgpack_pack_map(&w->pk, nfields);
}

static int mp_decode(mp *w, pr_msg *m)
{
    int rc = pr_decode(m, w->sb.data, w->sb.size);
    msgpack_sbuffer_destroy(&w->sb);
    return rc;
}

static pr_msg bye_msg(void)
{
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_BYE;
    m.id = 3;
    m.ts = 1795000000000ull;
    m.body.bye.reason = PR_BYE_LEAVING;
    m.body.bye.message = "bye now";
    return m;
}

static uint8_t *encode_ok(const pr_msg *m, size_t *len)
{
    uint8_t *out = NULL;
    int rc = pr_encode(m, &out, len);
    cr_assert_eq(rc, 0, "encode: %s", sf_strerror(rc));
    return out;
}

/* ---- round trips ------------------------------------------------------------- */

Test(proto_codec, round_trip_every_type)
{
    static const uint8_t ctxb[] = "params";
    uint8_t h[32];
    pr_backend be[2] = { { PR_BACKEND_CPU, "cpu0", 1u << 30, 8 }, { PR_BACKEND_CUDA, "gpu0", 1ull << 34, 0 } };
    pr_device_stat ds[1] = { { "gpu0", 500, 1, 2 } };
    uint64_t ids[2] = { 1, UINT64_MAX };
    pr_chunk ch[1] = { { 9, { 1 }, 10, 20, 30, 2, 1 } };
    pr_outcome oc[6] = { { 1, PR_OUTCOME_ACCEPTED, NULL, NULL }, { 2, PR_OUTCOME_IDEMPOTENT, NULL, NULL },
        { 3, PR_OUTCOME_CONFLICT, NULL, NULL }, { 4, PR_OUTCOME_STALE, NULL, NULL },
        { 5, PR_OUTCOME_MALFORMED, "result covers 3 items, the chunk has 5", NULL },
        { 6, PR_OUTCOME_STALE, NULL, "result covers 3 items, the chunk has 6" } };
    uint8_t payload[3] = { 0x80 };
    crypto_hash_sha256(h, ctxb, sizeof ctxb);

    for (int t = 1; t < PR_MSG_COUNT_; t++) {
        pr_msg m, out;
        memset(&m, 0, sizeof m);
        m.type = (pr_type)t;
        m.id = (uint64_t)t * 1000003u;
        m.ts = 1795000000000ull + (uint64_t)t;
        switch (m.type) {
        case PR_MSG_CHALLENGE: m.body.challenge.server = "s"; m.body.challenge.nonce[5] = 5; break;
        case PR_MSG_HELLO:
            m.body.hello.version = "v";
            m.body.hello.claim_token = "tok";
            m.body.hello.caps = (pr_caps){ 16, 12, "linux", "arm64", "Firefox", be, 2 };
            break;
        case PR_MSG_WELCOME: m.body.welcome = (pr_welcome){ UINT64_MAX, UINT32_MAX, { 1, 2, true } }; break;
        case PR_MSG_HEARTBEAT: m.body.heartbeat = (pr_heartbeat){ 1000, 5, 6, ds, 1, ids, 2, 7 }; break;
        case PR_MSG_ASSIGN: m.body.assign = (pr_assign){ 4, "option", { 0 }, ch, 1 }; break;
        case PR_MSG_CTX_REQ: m.body.ctx_req.job = 4; break;
        case PR_MSG_CTX:
            m.body.ctx.job = 4;
            memcpy(m.body.ctx.hash, h, 32);
            m.body.ctx.bytes = (pr_bytes){ ctxb, sizeof ctxb };
            break;
        case PR_MSG_COMPLETE:
            /* An empty batch map: decodes as long as the required fields... */
            continue; /* covered by test_proto_sign.c, which seals real batches */
        case PR_MSG_COMPLETE_ACK: m.body.complete_ack = (pr_complete_ack){ 4, true, oc, 6 }; break;
        case PR_MSG_CANCEL: m.body.cancel = (pr_cancel){ 4, ids, 2, "why" }; break;
        case PR_MSG_CONFIG: m.body.config = (pr_config){ 3, 4, true }; break;
        case PR_MSG_ERROR: m.body.error = (pr_error_body){ -27, "bad signature" }; break;
        case PR_MSG_BYE: m.body.bye = (pr_bye){ PR_BYE_DRAINING, NULL }; break;
        default: cr_assert_fail("type %d not covered", t);
        }
        (void)payload;
        round_trip(&m, &out);
        char a[4096], b[4096];
        pr_msg_format(&m, a, sizeof a);
        pr_msg_format(&out, b, sizeof b);
        cr_assert_str_eq(a, b, "type %s", pr_type_name(m.type));
        pr_msg_free(&out);
    }
}

Test(proto_codec, decoded_values_survive_the_frame)
{
    pr_msg m = bye_msg(), out;
    size_t len;
    uint8_t *f = encode_ok(&m, &len);
    cr_assert_eq(pr_decode(&out, f, len), 0);
    memset(f, 0xee, len); /* the decoded message must not point into the frame */
    free(f);
    cr_assert_str_eq(out.body.bye.message, "bye now");
    cr_assert_eq(out.body.bye.reason, PR_BYE_LEAVING);
    pr_msg_free(&out);
    pr_msg_free(&out); /* twice is harmless */
}

Test(proto_codec, canonical_form_omits_empty_optionals)
{
    pr_msg m;
    size_t len;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CONFIG;
    uint8_t *f = encode_ok(&m, &len);
    /* {"v":1,"type":"config","id":0,"ts":0,"body":{}} */
    static const uint8_t want[] = { 0x85, 0xa1, 'v', 0x01, 0xa4, 't', 'y', 'p', 'e', 0xa6, 'c', 'o', 'n',
        'f', 'i', 'g', 0xa2, 'i', 'd', 0x00, 0xa2, 't', 's', 0x00, 0xa4, 'b', 'o', 'd', 'y', 0x80 };
    cr_assert_eq(len, sizeof want);
    cr_assert_arr_eq(f, want, len);
    free(f);
}

Test(proto_codec, unknown_fields_are_ignored_and_nil_is_absent)
{
    mp w;
    pr_msg m;
    mp_envelope(&w, "bye", 4);
    mp_str(&w, "future"), msgpack_pack_map(&w.pk, 1), mp_str(&w, "x"), msgpack_pack_double(&w.pk, 1.5);
    mp_str(&w, "reason"), mp_str(&w, "leaving");
    mp_str(&w, "message"), msgpack_pack_nil(&w.pk);
    mp_str(&w, "also_new"), msgpack_pack_array(&w.pk, 0);
    cr_assert_eq(mp_decode(&w, &m), 0, "%s", m.err_at);
    cr_assert_eq(m.body.bye.reason, PR_BYE_LEAVING);
    cr_assert_null(m.body.bye.message);
    pr_msg_free(&m);
}

Test(proto_codec, non_canonical_integers_are_accepted)
{
    mp w;
    pr_msg m;
    mp_envelope(&w, "ctx_req", 2);
    uint8_t h[32] = { 0 };
    mp_str(&w, "job"), msgpack_pack_fix_uint64(&w.pk, 5); /* cf 00..05 rather than 05 */
    mp_str(&w, "hash"), mp_bin(&w, h, 32);
    cr_assert_eq(mp_decode(&w, &m), 0);
    cr_assert_eq(m.body.ctx_req.job, 5);
    pr_msg_free(&m);
}

/* ---- malformed input: one code per kind ------------------------------------------ */

Test(proto_codec, every_truncation_of_a_frame_fails_cleanly)
{
    pr_msg m = bye_msg(), out;
    size_t len;
    uint8_t *f = encode_ok(&m, &len);
    for (size_t n = 0; n < len; n++) {
        int rc = pr_decode(&out, f, n);
        cr_assert_eq(rc, PR_ETRUNC, "length %zu: %s", n, pr_errname(rc));
        cr_assert_null(out.arena);
    }
    free(f);
}

struct bad_case {
    const char *name;
    const char *hex;
    int want;
};

static const struct bad_case bad_cases[] = {
    { "empty", "", PR_ETRUNC },
    { "reserved byte", "81a176c1", PR_EMSGPACK },
    { "ext8", "81a176c7010100", PR_EEXT },
    { "fixext", "81a176d40100", PR_EEXT },
    { "array count past the limit", "dd00001001", PR_ECOUNT },
    { "map count past the limit", "df00001001", PR_ECOUNT },
    { "array count past the bytes", "dc0010", PR_ETRUNC },
    { "string past the limit", "db00001001", PR_ESTRLEN },
    { "string header cut", "da00", PR_ETRUNC },
    { "bin past the frame limit", "c600400001", PR_EBINSIZE },
    { "float cut", "cb0000", PR_ETRUNC },
    { "17 nested arrays", "9191919191919191919191919191919190", PR_EDEPTH },
    { "16 nested arrays (not a map)", "91919191919191919191919191919190", PR_ETYPE },
    { "trailing byte", "8000", PR_ETRAILING },
    { "top level not a map", "93010203", PR_ETYPE },
    { "integer key", "8101c0", PR_EKEYTYPE },
    { "empty envelope", "80", PR_EMISSING },
};

static void unhex(uint8_t **out, size_t *len, const char *hex)
{
    size_t n = strlen(hex) / 2;
    *out = malloc(n + 1);
    cr_assert_not_null(*out);
    cr_assert_eq(sodium_hex2bin(*out, n + 1, hex, strlen(hex), NULL, len, NULL), 0);
}

Test(proto_codec, malformed_msgpack_table)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        uint8_t *f;
        size_t len;
        pr_msg m;
        unhex(&f, &len, bad_cases[i].hex);
        int rc = pr_decode(&m, f, len);
        cr_expect_eq(rc, bad_cases[i].want, "%s: got %s, want %s", bad_cases[i].name,
            pr_errname(rc), pr_errname(bad_cases[i].want));
        free(f);
    }
}

Test(proto_codec, too_many_values)
{
    /* 17 arrays of 4096 nils: every count within limits, 69,649 values. */
    size_t len = 3 + 17 * (3 + 4096);
    uint8_t *f = malloc(len), *p = f;
    *p++ = 0xdc, *p++ = 0x00, *p++ = 17;
    for (int i = 0; i < 17; i++) {
        *p++ = 0xdc, *p++ = 0x10, *p++ = 0x00;
        memset(p, 0xc0, 4096);
        p += 4096;
    }
    pr_msg m;
    cr_assert_eq(pr_decode(&m, f, len), PR_EOBJECTS);
    free(f);
}

Test(proto_codec, frame_size_limit)
{
    uint8_t *f = calloc(1, PR_MAX_FRAME + 1);
    pr_msg m;
    cr_assert_eq(pr_decode(&m, f, PR_MAX_FRAME + 1), PR_EFRAMESIZE);
    free(f);
}

Test(proto_codec, version_and_type)
{
    mp w;
    pr_msg m;

    mp_init(&w);
    msgpack_pack_map(&w.pk, 5);
    mp_str(&w, "v"), msgpack_pack_uint8(&w.pk, 2);
    mp_str(&w, "type"), mp_str(&w, "hello");
    mp_str(&w, "id"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "ts"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "body"), msgpack_pack_map(&w.pk, 0);
    cr_assert_eq(mp_decode(&w, &m), PR_EVERSION);

    mp_envelope(&w, "telemetry", 0);
    cr_assert_eq(mp_decode(&w, &m), PR_EUNKNOWNTYPE);
    cr_assert_eq(m.id, 7, "the id survives so the error reply can name it");
    cr_assert_eq(m.type, PR_MSG_UNKNOWN);
    cr_assert_str_eq(m.err_at, "type");

    mp_init(&w);
    msgpack_pack_map(&w.pk, 5);
    mp_str(&w, "v"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "type"), msgpack_pack_uint8(&w.pk, 3);
    mp_str(&w, "id"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "ts"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "body"), msgpack_pack_map(&w.pk, 0);
    cr_assert_eq(mp_decode(&w, &m), PR_ETYPE);
}

Test(proto_codec, field_errors_name_their_field)
{
    mp w;
    pr_msg m;
    uint8_t tok[16] = { 0 }, h[32] = { 0 };

    /* assign whose second chunk has a 15-byte token */
    mp_envelope(&w, "assign", 4);
    mp_str(&w, "job"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "kernel"), mp_str(&w, "option");
    mp_str(&w, "ctx_hash"), mp_bin(&w, h, 32);
    mp_str(&w, "chunks"), msgpack_pack_array(&w.pk, 2);
    for (int i = 0; i < 2; i++) {
        msgpack_pack_map(&w.pk, 5);
        mp_str(&w, "chunk"), msgpack_pack_uint8(&w.pk, 1);
        mp_str(&w, "token"), mp_bin(&w, tok, i == 1 ? 15 : 16);
        mp_str(&w, "start"), msgpack_pack_uint8(&w.pk, 0);
        mp_str(&w, "count"), msgpack_pack_uint8(&w.pk, 1);
        mp_str(&w, "lease_ms"), msgpack_pack_uint8(&w.pk, 1);
    }
    cr_assert_eq(mp_decode(&w, &m), PR_EFIXLEN);
    cr_assert_str_eq(m.err_at, "body.chunks[1].token");
    cr_assert_null(m.arena);
}

/* Builds a ctx_req body {job: <job writer>, hash: <hash writer>} and decodes. */
static int ctx_req_with(void (*job)(mp *), void (*hash)(mp *), int extra_dup)
{
    mp w;
    pr_msg m;
    mp_envelope(&w, "ctx_req", 2 + (extra_dup ? 1 : 0));
    if (job) {
        mp_str(&w, "job");
        job(&w);
    }
    if (hash) {
        mp_str(&w, "hash");
        hash(&w);
    }
    if (extra_dup)
        mp_str(&w, "job"), msgpack_pack_uint8(&w.pk, 1);
    if (!job || !hash)
        mp_str(&w, "pad"), msgpack_pack_nil(&w.pk);
    int rc = mp_decode(&w, &m);
    pr_msg_free(&m);
    return rc;
}

static void job_ok(mp *w) { msgpack_pack_uint8(&w->pk, 1); }
static void job_neg(mp *w) { msgpack_pack_int8(&w->pk, -1); }
static void job_str(mp *w) { mp_str(w, "1"); }
static void job_float(mp *w) { msgpack_pack_double(&w->pk, 1.0); }
static void hash_ok(mp *w) { uint8_t h[32] = { 0 }; mp_bin(w, h, 32); }
static void hash_short(mp *w) { uint8_t h[31] = { 0 }; mp_bin(w, h, 31); }
static void hash_str(mp *w) { mp_str(w, "00000000000000000000000000000000"); }

Test(proto_codec, field_level_errors)
{
    cr_assert_eq(ctx_req_with(job_ok, hash_ok, 0), 0);
    cr_assert_eq(ctx_req_with(job_neg, hash_ok, 0), PR_EINT);
    cr_assert_eq(ctx_req_with(job_str, hash_ok, 0), PR_ETYPE);
    cr_assert_eq(ctx_req_with(job_float, hash_ok, 0), PR_ETYPE);
    cr_assert_eq(ctx_req_with(job_ok, hash_short, 0), PR_EFIXLEN);
    cr_assert_eq(ctx_req_with(job_ok, hash_str, 0), PR_ETYPE);
    cr_assert_eq(ctx_req_with(NULL, hash_ok, 0), PR_EMISSING);
    cr_assert_eq(ctx_req_with(job_ok, hash_ok, 1), PR_EDUPKEY);
}

static int hello_with_pk(size_t pklen)
{
    mp w;
    pr_msg m;
    uint8_t pk[40] = { 0 }, sig[64] = { 0 };
    mp_envelope(&w, "hello", 5);
    mp_str(&w, "pk"), mp_bin(&w, pk, pklen);
    mp_str(&w, "ts"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "sig"), mp_bin(&w, sig, 64);
    mp_str(&w, "version"), mp_str(&w, "v");
    mp_str(&w, "caps"), msgpack_pack_map(&w.pk, 3);
    mp_str(&w, "cores"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "max_parallel"), msgpack_pack_uint64(&w.pk, 1ull << 32); /* past uint32 */
    mp_str(&w, "backends"), msgpack_pack_array(&w.pk, 0);
    int rc = mp_decode(&w, &m);
    pr_msg_free(&m);
    return rc;
}

Test(proto_codec, key_length_and_u32_range)
{
    cr_assert_eq(hello_with_pk(31), PR_EKEYLEN);
    cr_assert_eq(hello_with_pk(33), PR_EKEYLEN);
    cr_assert_eq(hello_with_pk(32), PR_EINT);
}

static int bye_with_message(const char *msg, size_t n)
{
    mp w;
    pr_msg m;
    mp_envelope(&w, "bye", 2);
    mp_str(&w, "reason"), mp_str(&w, "leaving");
    mp_str(&w, "message");
    msgpack_pack_str(&w.pk, n);
    msgpack_pack_str_body(&w.pk, msg, n);
    int rc = mp_decode(&w, &m);
    pr_msg_free(&m);
    return rc;
}

Test(proto_codec, strings_limits_and_utf8)
{
    char s[300];
    memset(s, 'a', sizeof s);
    cr_assert_eq(bye_with_message(s, 256), 0);
    cr_assert_eq(bye_with_message(s, 257), PR_ESTRLEN);
    cr_assert_eq(bye_with_message("caf\xc3\xa9 \xf0\x9f\x8e\xb2", 10), 0);
    cr_assert_eq(bye_with_message("a\0b", 3), PR_EUTF8);
    cr_assert_eq(bye_with_message("\xc0\xaf", 2), PR_EUTF8);         /* overlong '/' */
    cr_assert_eq(bye_with_message("\xed\xa0\x80", 3), PR_EUTF8);     /* surrogate */
    cr_assert_eq(bye_with_message("\xf4\x90\x80\x80", 4), PR_EUTF8); /* past U+10FFFF */
    cr_assert_eq(bye_with_message("\xe2\x82", 2), PR_EUTF8);         /* cut */
    cr_assert_eq(bye_with_message("\x80", 1), PR_EUTF8);
}

static int assign_with_range(uint64_t start, uint64_t count, uint32_t nchunks)
{
    mp w;
    pr_msg m;
    uint8_t tok[16] = { 0 }, h[32] = { 0 };
    mp_envelope(&w, "assign", 4);
    mp_str(&w, "job"), msgpack_pack_uint8(&w.pk, 1);
    mp_str(&w, "kernel"), mp_str(&w, "option");
    mp_str(&w, "ctx_hash"), mp_bin(&w, h, 32);
    mp_str(&w, "chunks"), msgpack_pack_array(&w.pk, nchunks);
    for (uint32_t i = 0; i < nchunks; i++) {
        msgpack_pack_map(&w.pk, 5);
        mp_str(&w, "chunk"), msgpack_pack_uint32(&w.pk, i);
        mp_str(&w, "token"), mp_bin(&w, tok, 16);
        mp_str(&w, "start"), msgpack_pack_uint64(&w.pk, start);
        mp_str(&w, "count"), msgpack_pack_uint64(&w.pk, count);
        mp_str(&w, "lease_ms"), msgpack_pack_uint8(&w.pk, 1);
    }
    int rc = mp_decode(&w, &m);
    pr_msg_free(&m);
    return rc;
}

Test(proto_codec, ranges_and_array_limits)
{
    cr_assert_eq(assign_with_range(0, 1, 1), 0);
    cr_assert_eq(assign_with_range(UINT64_MAX - 1, 1, 1), 0);
    cr_assert_eq(assign_with_range(UINT64_MAX, 1, 1), PR_ERANGE);
    cr_assert_eq(assign_with_range(5, 0, 1), PR_ERANGE);
    cr_assert_eq(assign_with_range(0, 1, 1024), 0);
    cr_assert_eq(assign_with_range(0, 1, 1025), PR_ECOUNT);
}

Test(proto_codec, ctx_hash_is_checked)
{
    pr_msg m, out;
    size_t len;
    static const uint8_t bytes[] = "context";
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CTX;
    m.body.ctx.bytes = (pr_bytes){ bytes, sizeof bytes };
    uint8_t *f = NULL;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_EHASH, "the encoder refuses a wrong hash too");
    cr_assert_null(f);
    crypto_hash_sha256(m.body.ctx.hash, bytes, sizeof bytes);
    f = encode_ok(&m, &len);
    f[len - 1] ^= 1; /* last byte of the context bytes */
    cr_assert_eq(pr_decode(&out, f, len), PR_EHASH);
    free(f);
}

Test(proto_codec, enums)
{
    pr_msg m = bye_msg();
    uint8_t *f = NULL;
    size_t len;
    m.body.bye.reason = 2;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_EENUM);
    cr_assert_null(f);
}

/* ---- the malformed outcome ------------------------------------------------------ */

static pr_msg ack_msg(pr_outcome *oc, uint32_t n)
{
    pr_msg m;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_COMPLETE_ACK;
    m.id = 5;
    m.body.complete_ack = (pr_complete_ack){ 77, false, oc, n };
    return m;
}

/* complete_ack {job 77, outcomes: [{chunk 9, outcome, KEY: reason (n
 * bytes; none when NULL)}]} made by hand, decoded into *m. */
static int ack_keyed(const char *outcome, const char *key, const char *reason, size_t n, pr_msg *m)
{
    mp w;
    mp_envelope(&w, "complete_ack", 2);
    mp_str(&w, "job"), msgpack_pack_uint8(&w.pk, 77);
    mp_str(&w, "outcomes"), msgpack_pack_array(&w.pk, 1);
    msgpack_pack_map(&w.pk, reason ? 3 : 2);
    mp_str(&w, "chunk"), msgpack_pack_uint8(&w.pk, 9);
    mp_str(&w, "outcome"), mp_str(&w, outcome);
    if (reason) {
        mp_str(&w, key);
        msgpack_pack_str(&w.pk, n);
        msgpack_pack_str_body(&w.pk, reason, n);
    }
    return mp_decode(&w, m);
}

/* The older form: the reason under `malformed`. */
static int ack_with(const char *outcome, const char *reason, size_t n, pr_msg *m)
{
    return ack_keyed(outcome, "malformed", reason, n, m);
}

/* Outcome i of the encoded complete_ack f: its map (checked to hold the
 * outcome string want). */
static const msgpack_object_map *ack_entry(const msgpack_unpacked *u, uint32_t i, const char *want)
{
    const msgpack_object *body = &u->data.via.map.ptr[4].val;
    const msgpack_object *list = &body->via.map.ptr[1].val;
    const msgpack_object_map *e = &list->via.array.ptr[i].via.map;
    cr_assert_eq(e->ptr[1].val.via.str.size, strlen(want));
    cr_assert_arr_eq(e->ptr[1].val.via.str.ptr, want, strlen(want));
    return e;
}

Test(proto_codec, malformed_travels_in_the_form_the_node_reads)
{
    pr_outcome oc[3] = { { 8, PR_OUTCOME_STALE, NULL, NULL } };
    pr_outcome_malformed(&oc[1], 9, "range differs", false);
    pr_outcome_malformed(&oc[2], 10, "range differs", true);
    pr_msg m = ack_msg(oc, 3), out;
    size_t len;
    uint8_t *f = encode_ok(&m, &len);
    /* A node without the feature sees "stale" and a key it ignores; one
     * with it, the outcome "malformed" and its reason. */
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    cr_assert_eq(msgpack_unpack_next(&u, (const char *)f, len, NULL), MSGPACK_UNPACK_SUCCESS);
    cr_assert_eq(ack_entry(&u, 0, "stale")->size, 2);
    const msgpack_object_map *old = ack_entry(&u, 1, "stale");
    cr_assert_eq(old->size, 3);
    cr_assert_eq(old->ptr[2].key.via.str.size, 9);
    cr_assert_arr_eq(old->ptr[2].key.via.str.ptr, "malformed", 9);
    const msgpack_object_map *own = ack_entry(&u, 2, "malformed");
    cr_assert_eq(own->size, 3);
    cr_assert_eq(own->ptr[2].key.via.str.size, 6);
    cr_assert_arr_eq(own->ptr[2].key.via.str.ptr, "reason", 6);
    msgpack_unpacked_destroy(&u);
    free(f);

    round_trip(&m, &out);
    const char *why;
    cr_assert_eq(pr_outcome_read(&out.body.complete_ack.outcomes[0], &why), PR_OUTCOME_STALE);
    cr_assert_null(why);
    for (int i = 1; i < 3; i++) {
        cr_assert_eq(pr_outcome_read(&out.body.complete_ack.outcomes[i], &why), PR_OUTCOME_MALFORMED);
        cr_assert_str_eq(why, "range differs");
    }
    cr_assert_eq(out.body.complete_ack.outcomes[1].outcome, PR_OUTCOME_STALE, "each form decodes as it travels");
    cr_assert_eq(out.body.complete_ack.outcomes[2].outcome, PR_OUTCOME_MALFORMED);
    pr_msg_free(&out);
}

/* A reason of each check the coordinator makes (PROTOCOL.md §4,
 * complete_ack), at the length its largest numbers give, travels in both
 * forms and reads back whole. */
Test(proto_codec, malformed_reasons_of_each_check_travel)
{
    static const char *const reasons[] = {
        "range differs from the claim's: items 18446744073709551615+18446744073709551615, the claim is "
        "18446744073709551615+18446744073709551615",
        "work context differs from the job's",
        "the result data is empty: the chunk has 256 statistics (64 variants x 4 outputs)",
        "the data ends at byte 18446744073709551615, before the length of statistic 255 (variant 63, output 3): the "
        "chunk has 256 statistics (64 variants x 4 outputs)",
        "statistic 255 (variant 63, output 3) at byte 18446744073709551615 claims 18446744073709551615 bytes, "
        "18446744073709551615 are left",
        "statistic 255 (variant 63, output 3) at byte 18446744073709551615 does not decode: malformed statistics "
        "encoding",
        "18446744073709551615 bytes left over after the chunk's 256 statistics (64 variants x 4 outputs)",
        "statistic 252 (variant 63, output 0) counts 18446744073709551615 values, a chunk of 18446744073709551615 "
        "items makes 18446744073709551615",
        "statistic 255 (variant 63, output 3) has another layout (fixed-point step or histogram range) than the work "
        "context gives its output",
    };
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        cr_assert_leq(strlen(reasons[i]), PR_MAX_REASON, "reason %zu: %zu bytes", i, strlen(reasons[i]));
        pr_outcome oc[2];
        pr_outcome_malformed(&oc[0], 9, reasons[i], false);
        pr_outcome_malformed(&oc[1], 10, reasons[i], true);
        pr_msg m = ack_msg(oc, 2), out;
        round_trip(&m, &out);
        for (int k = 0; k < 2; k++) {
            const char *why;
            cr_assert_eq(pr_outcome_read(&out.body.complete_ack.outcomes[k], &why), PR_OUTCOME_MALFORMED);
            cr_assert_str_eq(why, reasons[i]);
        }
        pr_msg_free(&out);
    }
}

Test(proto_codec, malformed_reason_is_bounded)
{
    char s[PR_MAX_REASON + 2];
    const char *why;
    pr_msg m;
    memset(s, 'r', sizeof s);
    for (int own = 0; own < 2; own++) {
        const char *outcome = own ? "malformed" : "stale", *key = own ? "reason" : "malformed";
        cr_assert_eq(ack_keyed(outcome, key, s, PR_MAX_REASON, &m), 0, "%s", m.err_at);
        cr_assert_eq(pr_outcome_read(&m.body.complete_ack.outcomes[0], &why), PR_OUTCOME_MALFORMED);
        cr_assert_eq(strlen(why), PR_MAX_REASON);
        pr_msg_free(&m);
        cr_assert_eq(ack_keyed(outcome, key, s, PR_MAX_REASON + 1, &m), PR_ESTRLEN);
        cr_assert_str_eq(m.err_at, own ? "body.outcomes[0].reason" : "body.outcomes[0].malformed");
        cr_assert_eq(ack_keyed(outcome, key, "\xc0\xaf", 2, &m), PR_EUTF8);
    }

    s[PR_MAX_REASON + 1] = '\0';
    pr_outcome oc[1];
    for (int own = 0; own < 2; own++) {
        pr_outcome_malformed(&oc[0], 9, s, own);
        pr_msg a = ack_msg(oc, 1);
        uint8_t *f = NULL;
        size_t len;
        cr_assert_eq(pr_encode(&a, &f, &len), PR_ESTRLEN, "the encoder refuses a reason past the bound");
        cr_assert_null(f);
        s[PR_MAX_REASON] = '\0';
        f = encode_ok(&a, &len);
        free(f);
        s[PR_MAX_REASON] = 'r';
    }
}

Test(proto_codec, malformed_needs_its_reason_and_only_it_has_one)
{
    pr_msg m;
    /* on the wire */
    cr_assert_eq(ack_with("accepted", "why", 3, &m), PR_EENUM, "a reason beside another outcome");
    cr_assert_str_eq(m.err_at, "body.outcomes[0]");
    cr_assert_eq(ack_with("conflict", "why", 3, &m), PR_EENUM);
    cr_assert_eq(ack_with("malformed", "why", 3, &m), PR_EENUM, "`malformed` goes beside stale only");
    cr_assert_eq(ack_keyed("stale", "reason", "why", 3, &m), PR_EENUM, "`reason` goes beside malformed only");
    cr_assert_eq(ack_keyed("accepted", "reason", "why", 3, &m), PR_EENUM);
    cr_assert_eq(ack_keyed("malformed", "reason", NULL, 0, &m), PR_EMISSING, "malformed without its reason");
    cr_assert_eq(ack_keyed("malformed", "reason", "", 0, &m), PR_EMISSING);
    cr_assert_eq(ack_with("stale", "", 0, &m), 0, "an empty reason is none");
    cr_assert_eq(m.body.complete_ack.outcomes[0].outcome, PR_OUTCOME_STALE);
    cr_assert_null(m.body.complete_ack.outcomes[0].malformed);
    pr_msg_free(&m);
    cr_assert_eq(ack_with("stale", NULL, 0, &m), 0);
    cr_assert_eq(m.body.complete_ack.outcomes[0].outcome, PR_OUTCOME_STALE);
    pr_msg_free(&m);

    /* from the encoder */
    uint8_t *f = NULL;
    size_t len;
    pr_outcome oc[1] = { { 9, PR_OUTCOME_MALFORMED, NULL, NULL } };
    pr_msg a = ack_msg(oc, 1);
    cr_assert_eq(pr_encode(&a, &f, &len), PR_EMISSING, "malformed without a reason");
    oc[0].reason = "";
    cr_assert_eq(pr_encode(&a, &f, &len), PR_EMISSING);
    oc[0] = (pr_outcome){ 9, PR_OUTCOME_MALFORMED, "why", "why" };
    cr_assert_eq(pr_encode(&a, &f, &len), PR_EINVAL, "both forms at once");
    oc[0] = (pr_outcome){ 9, PR_OUTCOME_STALE, "why", NULL };
    cr_assert_eq(pr_encode(&a, &f, &len), PR_EINVAL, "a reason with stale would decode as nothing known");
    oc[0] = (pr_outcome){ 9, PR_OUTCOME_ACCEPTED, NULL, "why" };
    cr_assert_eq(pr_encode(&a, &f, &len), PR_EINVAL);
    oc[0] = (pr_outcome){ 9, PR_OUTCOME_MALFORMED + 1, NULL, NULL };
    cr_assert_eq(pr_encode(&a, &f, &len), PR_EENUM);
    cr_assert_null(f);
}

Test(proto_codec, hello_features)
{
    static const char *feats[] = { "malformed", "a-later-one" };
    pr_msg m, out;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HELLO;
    m.body.hello.version = "t";
    m.body.hello.features = feats;
    m.body.hello.nfeatures = 2;
    round_trip(&m, &out);
    cr_assert_eq(out.body.hello.nfeatures, 2);
    cr_assert(pr_hello_has_feature(&out.body.hello, PR_FEATURE_MALFORMED));
    cr_assert(!pr_hello_has_feature(&out.body.hello, "another"));
    pr_msg_free(&out);
    m.body.hello.nfeatures = 0;
    round_trip(&m, &out);
    cr_assert(!pr_hello_has_feature(&out.body.hello, PR_FEATURE_MALFORMED), "none announced: the older form");
    pr_msg_free(&out);

    char longname[PR_MAX_FEATURE_LEN + 2];
    memset(longname, 'f', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *bad[] = { longname };
    m.body.hello.features = bad;
    m.body.hello.nfeatures = 1;
    uint8_t *f = NULL;
    size_t len;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_ESTRLEN);
    m.body.hello.nfeatures = PR_MAX_FEATURES + 1;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_ECOUNT);
}

Test(proto_codec, hello_name)
{
    pr_msg m, out;
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_HELLO;
    m.body.hello.version = "t";
    round_trip(&m, &out);
    cr_assert_null(out.body.hello.name, "absent: an older node's hello");
    pr_msg_free(&out);
    m.body.hello.name = "gpu-box-7 \xc3\xa9t\xc3\xa9"; /* UTF-8 is printable */
    round_trip(&m, &out);
    cr_assert_str_eq(out.body.hello.name, m.body.hello.name);
    pr_msg_free(&out);

    char longname[PR_MAX_NAME_LEN + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    m.body.hello.name = longname;
    uint8_t *f = NULL;
    size_t len;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_ESTRLEN);

    /* (name, refused?) */
    static const struct { const char *name; bool bad; } cases[] = {
        { "web-3", false }, { "n", false }, { "rack 4 / slot 2", false }, { "caf\xc3\xa9", false },
        { "", true }, { " lead", true }, { "trail ", true }, { "tab\there", true }, { "line\nbreak", true },
        { "esc\x1b[31m", true }, { "del\x7f", true }, { "c1\xc2\x85", true }, { "bad\xff", true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(pr_node_name_check(cases[i].name) != NULL, cases[i].bad, "case %zu", i);
    longname[PR_MAX_NAME_LEN] = '\0';
    cr_assert_null(pr_node_name_check(longname), "64 bytes is a name");
    longname[PR_MAX_NAME_LEN] = 'n';
    cr_assert_not_null(pr_node_name_check(longname));
    cr_assert_not_null(pr_node_name_check(NULL));
}

Test(proto_codec, encoder_refuses_what_the_decoder_would)
{
    pr_msg m = bye_msg();
    uint8_t *f = NULL;
    size_t len;
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    m.body.bye.message = big;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_ESTRLEN);
    m.body.bye.message = "\xff";
    cr_assert_eq(pr_encode(&m, &f, &len), PR_EUTF8);

    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CANCEL;
    m.body.cancel.nchunks = 3; /* but no array */
    cr_assert_eq(pr_encode(&m, &f, &len), PR_EINVAL);
    m.type = PR_MSG_UNKNOWN;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_EUNKNOWNTYPE);
    cr_assert_eq(pr_encode(NULL, &f, &len), PR_EINVAL);
    cr_assert_null(f);
}

Test(proto_codec, encoder_frame_limit)
{
    pr_msg m;
    uint8_t *f = NULL, h[32];
    size_t len;
    size_t n = PR_MAX_PAYLOAD;
    uint8_t *bytes = calloc(1, n + 1);
    crypto_hash_sha256(h, bytes, n);
    memset(&m, 0, sizeof m);
    m.type = PR_MSG_CTX;
    memcpy(m.body.ctx.hash, h, 32);
    m.body.ctx.bytes = (pr_bytes){ bytes, (uint32_t)n };
    f = encode_ok(&m, &len); /* the largest context fits in a frame */
    cr_assert_leq(len, PR_MAX_FRAME);
    pr_msg out;
    cr_assert_eq(pr_decode(&out, f, len), 0);
    pr_msg_free(&out);
    free(f);
    m.body.ctx.bytes.len = (uint32_t)n + 1;
    cr_assert_eq(pr_encode(&m, &f, &len), PR_EBINSIZE);
    free(bytes);
}

Test(proto_codec, error_names_and_reasons)
{
    cr_assert_str_eq(pr_errname(PR_ETRUNC), "ETRUNC");
    cr_assert_str_eq(pr_errname(0), "OK");
    cr_assert_str_eq(pr_errname(-999), "UNKNOWN");
    cr_assert_str_eq(sf_strerror(-999), "unknown error");
    /* every code is distinct and has a reason of its own */
    for (int a = -1; a >= PR_ECRYPTO; a--) {
        cr_assert_str_neq(pr_errname(a), "UNKNOWN", "code %d", a);
        for (int b = a - 1; b >= PR_ECRYPTO; b--)
            cr_assert_str_neq(sf_strerror(a), sf_strerror(b));
    }
    cr_assert_str_eq(pr_type_name(PR_MSG_COMPLETE_ACK), "complete_ack");
    cr_assert_null(pr_type_name(PR_MSG_UNKNOWN));
    cr_assert_null(pr_type_name(PR_MSG_COUNT_));
}
