/*
 * test_platform.c — the libraries the farm stands on do what the design
 * relies on: Ed25519 per RFC 8032, msgpack round trips through a bounded
 * streaming unpacker, and a libuv loop that runs timers and async wake-ups.
 */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <sodium.h>
#include <string.h>
#include <uv.h>

static void unhex(unsigned char *out, size_t n, const char *hex)
{
    size_t len = 0;
    cr_assert_eq(sodium_hex2bin(out, n, hex, strlen(hex), NULL, &len, NULL), 0);
    cr_assert_eq(len, n);
}

Test(sodium, ed25519_rfc8032_test2)
{
    unsigned char seed[32], pk[32], sk[64], sig[64], want_pk[32], want_sig[64];
    const unsigned char msg[1] = { 0x72 };

    cr_assert_geq(sodium_init(), 0);
    unhex(seed, 32, "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb");
    unhex(want_pk, 32, "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c");
    unhex(want_sig, 64,
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
        "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00");

    crypto_sign_seed_keypair(pk, sk, seed);
    cr_assert_arr_eq(pk, want_pk, 32);
    crypto_sign_detached(sig, NULL, msg, 1, sk);
    cr_assert_arr_eq(sig, want_sig, 64);
    cr_assert_eq(crypto_sign_verify_detached(sig, msg, 1, pk), 0);

    sig[63] ^= 0x40;
    cr_assert_neq(crypto_sign_verify_detached(sig, msg, 1, pk), 0,
        "a signature with a flipped bit must not verify");
}

Test(msgpack, streaming_unpacker_splits_and_bounds)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacker up;
    msgpack_unpacked res;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (int i = 0; i < 3; i++) {
        msgpack_pack_array(&pk, 2);
        msgpack_pack_int(&pk, -i);
        msgpack_pack_double(&pk, i * 0.5);
    }

    /* Feed the bytes one at a time: a frame split anywhere must reassemble. */
    cr_assert(msgpack_unpacker_init(&up, 64));
    msgpack_unpacked_init(&res);
    int got = 0;
    for (size_t off = 0; off < sb.size; off++) {
        cr_assert(msgpack_unpacker_reserve_buffer(&up, 1));
        memcpy(msgpack_unpacker_buffer(&up), sb.data + off, 1);
        msgpack_unpacker_buffer_consumed(&up, 1);
        while (msgpack_unpacker_next(&up, &res) == MSGPACK_UNPACK_SUCCESS) {
            cr_assert_eq(res.data.type, MSGPACK_OBJECT_ARRAY);
            cr_assert_eq(res.data.via.array.size, 2);
            cr_assert_eq(res.data.via.array.ptr[0].via.i64, got == 0 ? 0 : -got);
            cr_assert_float_eq(res.data.via.array.ptr[1].via.f64, got * 0.5, 0.0);
            got++;
        }
    }
    cr_assert_eq(got, 3);

    /* A truncated frame is "continue", never success or a crash. */
    msgpack_unpacked_destroy(&res);
    msgpack_unpacked_init(&res);
    size_t off = 0;
    cr_assert_eq(msgpack_unpack_next(&res, sb.data, 3, &off), MSGPACK_UNPACK_CONTINUE);

    msgpack_unpacked_destroy(&res);
    msgpack_unpacker_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
}

struct wake {
    uv_async_t async;
    uv_timer_t timer;
    int asyncs, timers;
};

static void on_async(uv_async_t *a)
{
    struct wake *w = a->data;
    w->asyncs++;
    uv_close((uv_handle_t *)a, NULL);
}

static void on_timer(uv_timer_t *t)
{
    struct wake *w = t->data;
    w->timers++;
    uv_close((uv_handle_t *)t, NULL);
}

static void sender(void *arg)
{
    struct wake *w = arg;
    for (int i = 0; i < 100; i++)
        uv_async_send(&w->async);
}

Test(libuv, async_wakeups_coalesce_and_timers_fire, .timeout = 10)
{
    uv_loop_t loop;
    struct wake w = { 0 };
    uv_thread_t th;

    cr_assert_eq(uv_loop_init(&loop), 0);
    w.async.data = &w;
    w.timer.data = &w;
    cr_assert_eq(uv_async_init(&loop, &w.async, on_async), 0);
    cr_assert_eq(uv_timer_init(&loop, &w.timer), 0);
    cr_assert_eq(uv_timer_start(&w.timer, on_timer, 5, 0), 0);
    cr_assert_eq(uv_thread_create(&th, sender, &w), 0);
    cr_assert_eq(uv_thread_join(&th), 0);

    /* The loop ends by itself once both handles are closed. */
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(w.asyncs, 1, "100 sends before the loop ran coalesce into one wake-up");
    cr_assert_eq(w.timers, 1);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
