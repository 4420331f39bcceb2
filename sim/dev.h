/*
 * dev.h — the device-neutral core every backend compiles: portability
 * macros, Philox4x32-10, deterministic math (exp, log, inverse normal CDF)
 * and the fixed-point accumulator.
 *
 * This header is valid C17, OpenCL C 1.2 and CUDA C++. The CPU and
 * WebAssembly builds include it; the OpenCL backend embeds its text (with
 * the kernels' *_dev.h files) into the program it builds at run time; the
 * CUDA build includes it from sim/kernels.cu. Every value a kernel reports
 * is computed from IEEE basic operations (+ - * / sqrt and exact
 * conversions) in a fixed order, with contraction off, so all backends give
 * the same bits. Nothing here may call the platform's libm.
 */
#ifndef SIM_DEV_H
#define SIM_DEV_H

#if defined(__OPENCL_VERSION__)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF
typedef uint sim_u32;
typedef int sim_i32;
typedef ulong sim_u64;
typedef long sim_i64;
#define SIM_FN static inline
#define SIM_FN_OUTLINE static inline
#define sim_f64_from_bits(u) as_double((sim_u64)(u))
#define sim_f64_bits(d) as_ulong((double)(d))
#define sim_sqrt(x) sqrt((double)(x))
#define sim_fabs(x) fabs((double)(x))
#define SIM_ASSERT(c) ((void)0)
#elif defined(__CUDACC__)
#include <stdint.h>
typedef uint32_t sim_u32;
typedef int32_t sim_i32;
typedef uint64_t sim_u64;
typedef int64_t sim_i64;
#define SIM_FN static __device__ __forceinline__
#define SIM_FN_OUTLINE static __device__
#define sim_f64_from_bits(u) __longlong_as_double((long long)(u))
#define sim_f64_bits(d) ((sim_u64)__double_as_longlong(d))
#define sim_sqrt(x) __dsqrt_rn(x)
#define sim_fabs(x) fabs(x)
#define SIM_ASSERT(c) ((void)0)
#else
#include <assert.h>
#include <stdint.h>
#include <string.h>
typedef uint32_t sim_u32;
typedef int32_t sim_i32;
typedef uint64_t sim_u64;
typedef int64_t sim_i64;
/* Forced inline so that the CPU loops' per-ISA clones (sim_int.h) get their
 * own vector code for everything they call; the rare paths stay outlined. */
#define SIM_FN static inline __attribute__((always_inline))
#define SIM_FN_OUTLINE static inline
#define SIM_ASSERT(c) assert(c)
static inline double sim_f64_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}
static inline uint64_t sim_f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}
/* sqrt is an IEEE basic operation (correctly rounded); built with
 * -fno-math-errno, the builtin is the instruction, in vector loops too. */
#define sim_sqrt(x) __builtin_sqrt(x)
#define sim_fabs(x) __builtin_fabs(x)
#if defined(__x86_64__)
#include <immintrin.h> /* AVX2 paths in functions with target("avx2"), chosen at run time */
#endif
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
/* A constant in every lane, read from memory. V8's newer optimizing tier
 * (Chromium 156; node 20's older one hoisted them) builds each v128.const
 * from scalar moves where it is used, inside the loop: three instructions
 * against one splat load. The empty asm hides the constant's address from
 * clang, which would otherwise fold the load back into a v128.const. For
 * constant expressions only: c initializes a static. */
#define SIM_KLOAD(type, c) \
    __extension__({ static const type sim_k_ = (c); const type *sim_p_ = &sim_k_; \
        __asm__("" : "+r"(sim_p_)); wasm_v128_load64_splat(sim_p_); })
#define SIM_K2(c) SIM_KLOAD(double, c)
/* t points at a static copy of the doubles given, its address hidden the
 * same way; SIM_KAT(t, i) is t[i] in every lane. */
#define SIM_KTAB(t, ...) \
    static const double t##_k_[] = { __VA_ARGS__ }; \
    const double *t = t##_k_; \
    __asm__("" : "+r"(t))
#define SIM_KAT(t, i) wasm_v128_load64_splat((t) + (i))
#define SIM_KI64(c) SIM_KLOAD(uint64_t, (uint64_t)(c))
#define SIM_KI32(c) SIM_KLOAD(uint64_t, (uint64_t)(uint32_t)(c) << 32 | (uint32_t)(c))
#endif
#endif

/* Lanes per group function call: items processed together by one call of a
 * kernel's *_group function. Any multiple of 4 up to 128 (the int64 partial
 * sums of sim_acc_lanes); the result of an item never depends on it. */
#ifndef SIM_W
#define SIM_W 4
#endif
#if SIM_W > 128 || SIM_W % 4 != 0
#error "SIM_W must be a multiple of 4, at most 128"
#endif

/* Placed before each loop over a group's lanes. Empty, except in the
 * OpenCL program for CPU devices, whose prelude (opencl_native.c) makes it a
 * clang loop hint: vectors of 8 doubles, two in flight. It changes how a
 * loop is vectorized, never an operation or its order. */
#ifndef SIM_VLOOP
#define SIM_VLOOP
#endif

#define SIM_HIST_BINS 32
#define SIM_MAX_OUT 8
/* Every fixed-point term is below 2^56 in magnitude, so at most 2^56 - 8
 * (the largest double below it), and 128 terms sum within an int64
 * (128 (2^56 - 8) < 2^63) before they are folded into 192 bits. */
#define SIM_FIX_LIMIT 72057594037927936.0 /* 2^56 */
#define SIM_FIX_CLAMP 72057594037927920.0 /* 2^56 - 16, exact in double */
#define SIM_FIX_MAX ((sim_i64)0x00ffffffffffffff) /* above any clamped value */

/* ---- Philox4x32-10 (Salmon et al., SC'11) --------------------------------- */

typedef struct sim_u32x4 {
    sim_u32 v[4];
} sim_u32x4;

/* One Philox4x32-10 block: counter c0..c3 under key (k0, k1). */
SIM_FN sim_u32x4 sim_philox(sim_u32 c0, sim_u32 c1, sim_u32 c2, sim_u32 c3, sim_u32 k0, sim_u32 k1)
{
    sim_u32x4 out;
    for (int r = 0; r < 10; r++) {
        sim_u64 p0 = (sim_u64)0xD2511F53u * c0;
        sim_u64 p1 = (sim_u64)0xCD9E8D57u * c2;
        sim_u32 n0 = (sim_u32)(p1 >> 32) ^ c1 ^ k0;
        sim_u32 n2 = (sim_u32)(p0 >> 32) ^ c3 ^ k1;
        c1 = (sim_u32)p1;
        c3 = (sim_u32)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out.v[0] = c0;
    out.v[1] = c1;
    out.v[2] = c2;
    out.v[3] = c3;
    return out;
}

/* Lane order of a group. A kernel's group function computes the SIM_W
 * items g0 .. g0 + SIM_W - 1 (g0 a multiple of 4), which are SIM_Q blocks of
 * four items sharing one Philox block each; item g0 + 4 b + k (word k of
 * block b) sits in lane k SIM_Q + b. Each word of the blocks is then one
 * contiguous run of lanes, and the words reach the normals and the
 * accumulators without a shuffle. With SIM_W = 4 lanes and items coincide.
 * No result depends on it: an item's arithmetic is the same in any lane. */
#define SIM_Q (SIM_W / 4)

/* The lane of item g0 + i. */
SIM_FN int sim_lane_of(int i)
{
    return (i & 3) * SIM_Q + (i >> 2);
}

#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__OPENCL_VERSION__) && !defined(__wasm__) && (SIM_Q % 8) == 0
#define SIM_PHILOX_V8 1
typedef sim_u64 sim_v8u64 __attribute__((vector_size(64)));
typedef sim_u32 sim_v8u32 __attribute__((vector_size(32)));

/* GCC 12 says x0 .. x3 may be used uninitialized where this is inlined
 * into the target clones; every element read is set first. */
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/* nv (1 to 4, a constant where it is inlined) vectors of eight blocks,
 * blocks blk0 + 8 v0 .. through all rounds together: see
 * sim_philox_blocks. GCC's vector extension, the same operations as the
 * portable loop below spelled for the CPU's vector units. */
SIM_FN void sim_philox_v8(int nv, sim_u32 c0, sim_u32 c1, sim_u64 blk0, int v0, sim_u32 k0, sim_u32 k1,
    sim_u32 *out)
{
    const sim_v8u64 iota = { 0, 1, 2, 3, 4, 5, 6, 7 };
    sim_v8u64 x0[4], x1[4], x2[4], x3[4];
    for (int v = 0; v < nv; v++) {
        sim_v8u64 blk = iota + (blk0 + (sim_u64)(8 * (v0 + v)));
        x0[v] = (sim_v8u64){ c0, c0, c0, c0, c0, c0, c0, c0 };
        x1[v] = (sim_v8u64){ c1, c1, c1, c1, c1, c1, c1, c1 };
        x2[v] = blk & 0xffffffffu;
        x3[v] = blk >> 32;
    }
    sim_u64 ka = k0, kb = k1;
    for (int r = 0; r < 10; r++) {
        for (int v = 0; v < nv; v++) {
            sim_v8u64 p0 = x0[v] * (sim_u64)0xD2511F53u;
            sim_v8u64 p1 = x2[v] * (sim_u64)0xCD9E8D57u;
            x0[v] = (p1 >> 32) ^ x1[v] ^ ka;
            x2[v] = (p0 >> 32) ^ x3[v] ^ kb;
            x1[v] = p1 & 0xffffffffu;
            x3[v] = p0 & 0xffffffffu;
        }
        ka = (ka + 0x9E3779B9u) & 0xffffffffu;
        kb = (kb + 0xBB67AE85u) & 0xffffffffu;
    }
    for (int v = 0; v < nv; v++) {
        sim_v8u32 y0 = __builtin_convertvector(x0[v], sim_v8u32), y1 = __builtin_convertvector(x1[v], sim_v8u32);
        sim_v8u32 y2 = __builtin_convertvector(x2[v], sim_v8u32), y3 = __builtin_convertvector(x3[v], sim_v8u32);
        int at = 8 * (v0 + v);
        memcpy(out + 0 * SIM_Q + at, &y0, sizeof y0);
        memcpy(out + 1 * SIM_Q + at, &y1, sizeof y1);
        memcpy(out + 2 * SIM_Q + at, &y2, sizeof y2);
        memcpy(out + 3 * SIM_Q + at, &y3, sizeof y3);
    }
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#if defined(__x86_64__)
/* Eight blocks at a time in AVX2, each word in two vectors of four 64-bit
 * lanes: the same rounds as sim_philox_v8, whose 64-bit products gcc 12
 * builds for AVX2 from three vpmuludq, or from a chain of shifts and adds.
 * vpmuludq alone is Philox's 32 x 32 -> 64-bit product: it reads only the
 * low half of each lane, so the high halves are never cleared, and only
 * the low halves are stored. Not forced inline: target("avx2") code does
 * not inline into the CPU loops' default clone, which calls it only where
 * the processor has AVX2. */
static inline __attribute__((target("avx2"))) void sim_philox_avx2(sim_u32 c0, sim_u32 c1, sim_u64 blk0,
    sim_u32 k0, sim_u32 k1, sim_u32 *out)
{
    const __m256i m0 = _mm256_set1_epi64x(0xD2511F53), m1 = _mm256_set1_epi64x(0xCD9E8D57);
    /* a vector's four low halves, in both of its 128-bit halves */
    const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    for (int b = 0; b < SIM_Q; b += 8) {
        __m256i x0[2], x1[2], x2[2], x3[2];
        for (int v = 0; v < 2; v++) {
            sim_u64 blk = blk0 + (sim_u64)(b + 4 * v);
            __m256i bv = _mm256_add_epi64(_mm256_set1_epi64x((long long)blk), _mm256_setr_epi64x(0, 1, 2, 3));
            x0[v] = _mm256_set1_epi64x(c0);
            x1[v] = _mm256_set1_epi64x(c1);
            x2[v] = bv; /* its high half is ignored, as above */
            x3[v] = _mm256_srli_epi64(bv, 32);
        }
        sim_u32 ka = k0, kb = k1;
        for (int r = 0; r < 10; r++) {
            const __m256i kav = _mm256_set1_epi64x(ka), kbv = _mm256_set1_epi64x(kb);
            for (int v = 0; v < 2; v++) {
                __m256i p0 = _mm256_mul_epu32(x0[v], m0), p1 = _mm256_mul_epu32(x2[v], m1);
                x0[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), x1[v]), kav);
                x2[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), x3[v]), kbv);
                x1[v] = p1;
                x3[v] = p0;
            }
            ka += 0x9E3779B9u;
            kb += 0xBB67AE85u;
        }
        const __m256i *w[4] = { x0, x1, x2, x3 };
        for (int k = 0; k < 4; k++) {
            __m256i lo = _mm256_permutevar8x32_epi32(w[k][0], pick);
            __m256i hi = _mm256_permutevar8x32_epi32(w[k][1], pick);
            _mm256_storeu_si256((__m256i *)(out + k * SIM_Q + b), _mm256_blend_epi32(lo, hi, 0xf0));
        }
    }
}
#endif
#endif

/* Philox blocks for the counters (c0, c1, lo(b), hi(b)), b = blk0 .. blk0 +
 * SIM_Q - 1: word w of block blk0 + b goes to out[w SIM_Q + b], its item's
 * lane. The same rounds as sim_philox, laid out so compilers run the blocks
 * side by side: the 32-bit words are held in 64-bit lanes, so the products
 * need no widening, which x86 vector units handle better. */
SIM_FN void sim_philox_blocks(sim_u32 c0, sim_u32 c1, sim_u64 blk0, sim_u32 k0, sim_u32 k1, sim_u32 *out)
{
#if defined(SIM_PHILOX_V8)
    /* Vectors of eight blocks. With AVX-512's 32 registers, four go
     * through the rounds together, sharing the key schedule, and their
     * slow 64-bit products overlap. With 16 (AVX2, SSE) four spill to
     * memory in every round: there one at a time is five times faster. */
    enum { NV = SIM_Q / 8 };
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) {
        for (int v = 0; v + 4 <= NV; v += 4)
            sim_philox_v8(4, c0, c1, blk0, v, k0, k1, out);
        for (int v = NV - NV % 4; v < NV; v++)
            sim_philox_v8(1, c0, c1, blk0, v, k0, k1, out);
        return;
    }
    if (__builtin_cpu_supports("avx2")) {
        sim_philox_avx2(c0, c1, blk0, k0, k1, out);
        return;
    }
#endif
    for (int v = 0; v < NV; v++)
        sim_philox_v8(1, c0, c1, blk0, v, k0, k1, out);
#elif defined(__OPENCL_VERSION__) && (SIM_Q % 8) == 0
    /* Eight blocks at a time, in two of OpenCL's vectors of four per word
     * (pocl passes vectors of eight 64-bit lanes to its conversions in
     * memory on processors without AVX-512), held in registers through all
     * rounds: the loop below keeps them in arrays, in memory (and so did
     * pocl with arrays of two vectors here, 8 % slower than these two
     * named sets). The high halves of the 64-bit lanes are never cleared:
     * the masks before the products, and the narrowing at the end, drop
     * them. */
    const ulong lo32 = 0xffffffffu;
    for (int b = 0; b < SIM_Q; b += 8) {
        ulong4 blk = (ulong4)(blk0 + (ulong)b) + (ulong4)(0, 1, 2, 3), blk4 = blk + (ulong)4;
        ulong4 x0 = (ulong4)(c0), x1 = (ulong4)(c1), x2 = blk, x3 = blk >> 32;
        ulong4 y0 = x0, y1 = x1, y2 = blk4, y3 = blk4 >> 32;
        ulong ka = k0, kb = k1;
        for (int r = 0; r < 10; r++) {
            ulong4 p0 = (x0 & lo32) * (ulong)0xD2511F53u, p1 = (x2 & lo32) * (ulong)0xCD9E8D57u;
            ulong4 q0 = (y0 & lo32) * (ulong)0xD2511F53u, q1 = (y2 & lo32) * (ulong)0xCD9E8D57u;
            x0 = (p1 >> 32) ^ x1 ^ ka;
            x2 = (p0 >> 32) ^ x3 ^ kb;
            x1 = p1;
            x3 = p0;
            y0 = (q1 >> 32) ^ y1 ^ ka;
            y2 = (q0 >> 32) ^ y3 ^ kb;
            y1 = q1;
            y3 = q0;
            ka = (ka + 0x9E3779B9u) & lo32;
            kb = (kb + 0xBB67AE85u) & lo32;
        }
        vstore4(convert_uint4(x0), 0, out + 0 * SIM_Q + b);
        vstore4(convert_uint4(x1), 0, out + 1 * SIM_Q + b);
        vstore4(convert_uint4(x2), 0, out + 2 * SIM_Q + b);
        vstore4(convert_uint4(x3), 0, out + 3 * SIM_Q + b);
        vstore4(convert_uint4(y0), 0, out + 0 * SIM_Q + b + 4);
        vstore4(convert_uint4(y1), 0, out + 1 * SIM_Q + b + 4);
        vstore4(convert_uint4(y2), 0, out + 2 * SIM_Q + b + 4);
        vstore4(convert_uint4(y3), 0, out + 3 * SIM_Q + b + 4);
    }
#elif defined(__wasm_simd128__) && (SIM_Q % 8) == 0
    /* Four blocks per vector, a word in each 32-bit lane: extmul takes two
     * lanes' products to 64 bits and shuffles pick their halves (i64x2.mul
     * has no x86 instruction behind it, V8 emulates it). Two vectors per
     * word go through all rounds in registers. */
    v128_t m0 = wasm_u32x4_splat(0xD2511F53u), m1 = wasm_u32x4_splat(0xCD9E8D57u);
    for (int b = 0; b < SIM_Q; b += 8) {
        v128_t x0[2], x1[2], x2[2], x3[2];
        for (int v = 0; v < 2; v++) {
            sim_u64 blk = blk0 + (sim_u64)(b + 4 * v);
            x0[v] = wasm_u32x4_splat(c0);
            x1[v] = wasm_u32x4_splat(c1);
            x2[v] = wasm_u32x4_make((sim_u32)blk, (sim_u32)(blk + 1), (sim_u32)(blk + 2), (sim_u32)(blk + 3));
            x3[v] = wasm_u32x4_make((sim_u32)(blk >> 32), (sim_u32)((blk + 1) >> 32), (sim_u32)((blk + 2) >> 32),
                (sim_u32)((blk + 3) >> 32));
        }
        sim_u32 ka = k0, kb = k1;
        for (int r = 0; r < 10; r++) {
            const v128_t kav = wasm_u32x4_splat(ka), kbv = wasm_u32x4_splat(kb);
            /* An empty asm hides the multipliers' values: clang otherwise
             * folds their extension into an i64x2 constant and emits
             * i64x2.mul instead of extmul. */
            __asm__("" : "+r"(m0), "+r"(m1));
            for (int v = 0; v < 2; v++) {
                v128_t p0l = wasm_u64x2_extmul_low_u32x4(x0[v], m0), p0h = wasm_u64x2_extmul_high_u32x4(x0[v], m0);
                v128_t p1l = wasm_u64x2_extmul_low_u32x4(x2[v], m1), p1h = wasm_u64x2_extmul_high_u32x4(x2[v], m1);
                x0[v] = wasm_v128_xor(wasm_v128_xor(wasm_i32x4_shuffle(p1l, p1h, 1, 3, 5, 7), x1[v]), kav);
                x2[v] = wasm_v128_xor(wasm_v128_xor(wasm_i32x4_shuffle(p0l, p0h, 1, 3, 5, 7), x3[v]), kbv);
                x1[v] = wasm_i32x4_shuffle(p1l, p1h, 0, 2, 4, 6);
                x3[v] = wasm_i32x4_shuffle(p0l, p0h, 0, 2, 4, 6);
            }
            ka += 0x9E3779B9u;
            kb += 0xBB67AE85u;
        }
        for (int v = 0; v < 2; v++) {
            wasm_v128_store(out + 0 * SIM_Q + b + 4 * v, x0[v]);
            wasm_v128_store(out + 1 * SIM_Q + b + 4 * v, x1[v]);
            wasm_v128_store(out + 2 * SIM_Q + b + 4 * v, x2[v]);
            wasm_v128_store(out + 3 * SIM_Q + b + 4 * v, x3[v]);
        }
    }
#else
    sim_u64 x0[SIM_Q], x1[SIM_Q], x2[SIM_Q], x3[SIM_Q];
    const sim_u64 lo32 = 0xffffffffu;
    for (int b = 0; b < SIM_Q; b++) {
        sim_u64 blk = blk0 + (sim_u64)b;
        x0[b] = c0;
        x1[b] = c1;
        x2[b] = blk & lo32;
        x3[b] = blk >> 32;
    }
    sim_u64 ka = k0, kb = k1;
    for (int r = 0; r < 10; r++) {
        for (int b = 0; b < SIM_Q; b++) {
            /* the masks change no value (every word is below 2^32) but
             * show compilers a 32 x 32-bit product: one vpmuludq on x86,
             * not three */
            sim_u64 p0 = 0xD2511F53u * (x0[b] & lo32);
            sim_u64 p1 = 0xCD9E8D57u * (x2[b] & lo32);
            sim_u64 n0 = (p1 >> 32) ^ x1[b] ^ ka;
            sim_u64 n2 = (p0 >> 32) ^ x3[b] ^ kb;
            x1[b] = p1 & lo32;
            x3[b] = p0 & lo32;
            x0[b] = n0;
            x2[b] = n2;
        }
        ka = (ka + 0x9E3779B9u) & lo32;
        kb = (kb + 0xBB67AE85u) & lo32;
    }
    for (int b = 0; b < SIM_Q; b++) {
        out[0 * SIM_Q + b] = (sim_u32)x0[b];
        out[1 * SIM_Q + b] = (sim_u32)x1[b];
        out[2 * SIM_Q + b] = (sim_u32)x2[b];
        out[3 * SIM_Q + b] = (sim_u32)x3[b];
    }
#endif
}

/* Uniform in the open interval (0, 1) from one 32-bit word: (w + 1/2) 2^-32,
 * exact in double. The word goes through a signed conversion (w - 2^31 as
 * int32, then + 2^31 exactly) because vector units convert signed 32-bit
 * integers, not unsigned ones. */
SIM_FN double sim_u01(sim_u32 w)
{
    return ((double)(sim_i32)(w ^ 0x80000000u) + 2147483648.5) * 2.3283064365386962890625e-10;
}

/* ---- deterministic math ---------------------------------------------------- */

#define SIM_LN2_HI 6.93147180369123816490e-01 /* low 32 bits zero */
#define SIM_LN2_LO 1.90821492927058770002e-10
#define SIM_INV_LN2 1.44269504088896338700e+00
#define SIM_EXP_SHIFT 6755399441055744.0 /* 1.5 * 2^52: rounds to an integer */
/* e^r = 1 + r + r^2 Q(r) for |r| <= ln 2 / 2: Q of degree 9 is the
 * Chebyshev fit of (e^r - 1 - r) / r^2 that scripts/sim_series.py prints
 * (relative error in e^r below 2^-55, a sixth of an ulp), its coefficients
 * rounded to doubles. Horner's scheme from the highest degree:
 * SIM_EXP_TERMS coefficients, the last two 1. */
#define SIM_EXP_TERMS 12
#define SIM_EXP_SERIES 2.510038549551032e-08, 2.7620088445409746e-07, 2.7557268459997064e-06, \
    2.4801521295954376e-05, 0.00019841269863053618, 0.0013888888917213717, 0.008333333333330062, \
    0.04166666666662413, 0.16666666666666669, 0.5000000000000001, 1.0, 1.0

/* e^x of x[0 .. n), in place, n <= SIM_W. Inputs above 709 give e^709;
 * below -708 give 0. Error under 1 ulp over the range the kernels use
 * (tests compare with the C library). Each step runs over every lane
 * before the next: the lanes' chains of dependent operations then overlap
 * instead of waiting on each other. */
SIM_FN void sim_exp_lanes(double *x, int n)
{
    const double ln2_hi = SIM_LN2_HI, ln2_lo = SIM_LN2_LO, inv_ln2 = SIM_INV_LN2;
    const double shift = SIM_EXP_SHIFT;
    const double coef[SIM_EXP_TERMS] = { SIM_EXP_SERIES };
    double t[SIM_W], r[SIM_W], p[SIM_W];
    int l0 = 0;
    SIM_ASSERT(n <= SIM_W);
#if defined(__wasm_simd128__)
    /* The same steps on four vectors of two lanes at a time, held in
     * registers: two lanes per vector are too few for the staged loops
     * below to pay for their trips through memory. The Horner loops stay
     * loops, which keeps the four chains interleaved in V8's code (it
     * orders a block's independent chains one after the other), and load
     * their coefficients (V8 builds a vector constant from scalar moves).
     * Two passes over the lanes, the series split after step H: one
     * lane's whole chain is longer than the processor's window reaches. */
    enum { V = 4, H = 7 };
    int e0 = 0;
    SIM_KTAB(kc, SIM_EXP_SERIES);
    for (; e0 + 2 * V <= n; e0 += 2 * V) {
        v128_t rv[V], pv[V];
        for (int v = 0; v < V; v++) {
            /* pmin(x, c) is x > c ? c : x, pmax(x, c) is x < c ? c : x */
            v128_t xc = wasm_f64x2_pmax(wasm_f64x2_pmin(wasm_v128_load(x + e0 + 2 * v), SIM_K2(709.0)),
                SIM_K2(-708.0));
            v128_t tv = wasm_f64x2_add(wasm_f64x2_mul(xc, SIM_K2(SIM_INV_LN2)), SIM_K2(SIM_EXP_SHIFT));
            v128_t kd = wasm_f64x2_sub(tv, SIM_K2(SIM_EXP_SHIFT));
            rv[v] = wasm_f64x2_sub(wasm_f64x2_sub(xc, wasm_f64x2_mul(kd, SIM_K2(SIM_LN2_HI))),
                wasm_f64x2_mul(kd, SIM_K2(SIM_LN2_LO)));
            pv[v] = SIM_KAT(kc, 0);
            wasm_v128_store(t + e0 + 2 * v, tv);
        }
        for (int i = 1; i < H; i++)
            for (int v = 0; v < V; v++)
                pv[v] = wasm_f64x2_add(wasm_f64x2_mul(pv[v], rv[v]), SIM_KAT(kc, i));
        for (int v = 0; v < V; v++) {
            wasm_v128_store(r + e0 + 2 * v, rv[v]);
            wasm_v128_store(p + e0 + 2 * v, pv[v]);
        }
    }
    for (; l0 + 2 * V <= e0; l0 += 2 * V) {
        v128_t rv[V], pv[V];
        for (int v = 0; v < V; v++) {
            rv[v] = wasm_v128_load(r + l0 + 2 * v);
            pv[v] = wasm_v128_load(p + l0 + 2 * v);
        }
        for (int i = H; i < SIM_EXP_TERMS; i++)
            for (int v = 0; v < V; v++)
                pv[v] = wasm_f64x2_add(wasm_f64x2_mul(pv[v], rv[v]), SIM_KAT(kc, i));
        for (int v = 0; v < V; v++) {
            v128_t two_k = wasm_i64x2_shl(wasm_i64x2_add(wasm_v128_load(t + l0 + 2 * v), SIM_KI64(1023)), 52);
            v128_t y = wasm_f64x2_mul(pv[v], two_k);
            v128_t xv = wasm_v128_load(x + l0 + 2 * v);
            wasm_v128_store(x + l0 + 2 * v, wasm_v128_andnot(y, wasm_f64x2_lt(xv, SIM_K2(-708.0))));
        }
    }
#endif
    SIM_VLOOP
    for (int l = l0; l < n; l++) {
        double xc = x[l] > 709.0 ? 709.0 : x[l];
        xc = xc < -708.0 ? -708.0 : xc;
        /* t = k + 1.5 * 2^52 holds k = round(x / ln 2) in its low mantissa bits */
        t[l] = xc * inv_ln2 + shift;
        double kd = t[l] - shift;
        r[l] = (xc - kd * ln2_hi) - kd * ln2_lo;
        p[l] = coef[0];
    }
    for (int i = 1; i < SIM_EXP_TERMS; i++) {
        SIM_VLOOP
        for (int l = l0; l < n; l++)
            p[l] = p[l] * r[l] + coef[i];
    }
    SIM_VLOOP
    for (int l = l0; l < n; l++) {
        /* 2^k from the bits: k + 1023 lies in [1, 2046], so its low 12 bits
         * shifted into the exponent field make 2^k exactly */
        double two_k = sim_f64_from_bits((sim_f64_bits(t[l]) + 1023u) << 52);
        double y = p[l] * two_k;
        x[l] = x[l] < -708.0 ? 0.0 : y;
    }
}

/* e^x, as sim_exp_lanes. */
SIM_FN double sim_exp(double x)
{
    sim_exp_lanes(&x, 1);
    return x;
}

/* The coefficients of sim_log's series (fdlibm's Lg1 .. Lg7). */
#define SIM_LOG_SERIES 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, \
    2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01

/* Natural logarithm of a positive normal x (the kernels never pass zero,
 * negatives or subnormals). The reduction x = 2^e m, m in [sqrt(1/2),
 * sqrt(2)), and the series in s = (m-1)/(m+1) follow Sun's fdlibm design. */
SIM_FN double sim_log(double x)
{
    const double ln2_hi = SIM_LN2_HI, ln2_lo = SIM_LN2_LO;
    const double lg[7] = { SIM_LOG_SERIES };
    sim_u64 b = sim_f64_bits(x);
    sim_i32 e = (sim_i32)((b >> 52) & 0x7ff) - 1023;
    double m = sim_f64_from_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    sim_i32 big = m > 1.4142135623730951 ? 1 : 0;
    m = big ? m * 0.5 : m;
    double ed = (double)(e + big);
    double f = m - 1.0; /* exact: m is within a factor 2 of 1 */
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (lg[1] + w * (lg[3] + w * lg[5]));
    double t2 = z * (lg[0] + w * (lg[2] + w * (lg[4] + w * lg[6])));
    double rr = t2 + t1;
    double hfsq = 0.5 * f * f;
    return ed * ln2_hi - ((hfsq - (s * (hfsq + rr) + ed * ln2_lo)) - f);
}

/* Central region of the inverse normal CDF (Wichura's AS241, PPND16), for
 * |q| <= 0.425 where q = p - 1/2. */
SIM_FN double sim_ninv_central(double q)
{
    double r = 0.180625 - q * q;
    double num = ((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r +
        6.7265770927008700853e+4) * r + 4.5921953931549871457e+4) * r +
        1.3731693765509461125e+4) * r + 1.9715909503065514427e+3) * r +
        1.3314166789178437745e+2) * r + 3.3871328727963666080e+0;
    double den = ((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r +
        3.9307895800092710610e+4) * r + 2.1213794301586595867e+4) * r +
        5.3941960214247511077e+3) * r + 6.8718700749205790830e+2) * r +
        4.2313330701600911252e+1) * r + 1.0;
    return q * num / den;
}

/* The r <= 5 branch of sim_ninv_tail, without the sign. */
SIM_FN double sim_ninv_tail_cd(double r)
{
    r = r - 1.6;
    double v = ((((((7.74545014278341407640e-4 * r + 2.27238449892691845833e-2) * r +
        2.41780725177450611770e-1) * r + 1.27045825245236838258e+0) * r +
        3.64784832476320460504e+0) * r + 5.76949722146069140550e+0) * r +
        4.63033784615654529590e+0) * r + 1.42343711074968357734e+0;
    return v / (((((((1.05075007164441684324e-9 * r + 5.47593808499534494600e-4) * r +
        1.51986665636164571966e-2) * r + 1.48103976427480074590e-1) * r +
        6.89767334985100004550e-1) * r + 1.67638483018380384940e+0) * r +
        2.05319162663775882187e+0) * r + 1.0);
}

/* Tails of AS241, for |p - 1/2| > 0.425. */
SIM_FN_OUTLINE double sim_ninv_tail(double p)
{
    double q = p - 0.5;
    double r = sim_sqrt(-sim_log(q < 0.0 ? p : 1.0 - p));
    double v;
    if (r <= 5.0) {
        v = sim_ninv_tail_cd(r);
    } else {
        r = r - 5.0;
        v = ((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r +
            1.24266094738807843860e-3) * r + 2.65321895265761230930e-2) * r +
            2.96560571828504891230e-1) * r + 1.78482653991729133580e+0) * r +
            5.46378491116411436990e+0) * r + 6.65790464350110377720e+0;
        v = v / (((((((2.04426310338993978564e-15 * r + 1.42151175831644588870e-7) * r +
            1.84631831751005468180e-5) * r + 7.86869131145613259100e-4) * r +
            1.48753612908506148525e-2) * r + 1.36929880922735805310e-1) * r +
            5.99832206555887937690e-1) * r + 1.0);
    }
    return q < 0.0 ? -v : v;
}

/* Standard normal quantile of p in (0, 1). */
SIM_FN double sim_ninv(double p)
{
    double q = p - 0.5;
    return sim_fabs(q) <= 0.425 ? sim_ninv_central(q) : sim_ninv_tail(p);
}

/* sin and cos of a in [0, pi/4]: sin a = a + a^3 S(a^2) and cos a = 1 -
 * a^2 (1/2 - a^2 C(a^2)), S and C of degree 5 the Chebyshev fits that
 * scripts/sim_series.py prints (relative error below 2^-55). The
 * coefficients of the two Horner chains in a^2, highest degree first; a
 * subtraction of a coefficient is the addition of its negation, the same
 * IEEE operation. */
#define SIM_SINCOS_TERMS 6
#define SIM_SIN_SERIES 1.5918115263265974e-10, -2.505113165023518e-08, 2.7557316101617874e-06, \
    -0.00019841269836756774, 0.008333333333330948, -0.16666666666666666
#define SIM_COS_SERIES -1.1382623647474604e-11, 2.087614614655861e-09, -2.7557317271145144e-07, \
    2.480158729876456e-05, -0.0013888888888887398, 0.041666666666666664

SIM_FN void sim_sincos_oct(double a, double *sn, double *cs)
{
    const double cps[SIM_SINCOS_TERMS] = { SIM_SIN_SERIES }, cpc[SIM_SINCOS_TERMS] = { SIM_COS_SERIES };
    double a2 = a * a;
    /* written out: as a loop over the arrays, pocl's clang left the loop
     * over the lanes that calls this scalar (0.6x the speed of the whole
     * option kernel on pocl) */
    double ps = ((((cps[0] * a2 + cps[1]) * a2 + cps[2]) * a2 + cps[3]) * a2 + cps[4]) * a2 + cps[5];
    double pc = ((((cpc[0] * a2 + cpc[1]) * a2 + cpc[2]) * a2 + cpc[3]) * a2 + cpc[4]) * a2 + cpc[5];
    *sn = a + a * (a2 * ps);
    *cs = 1.0 - a2 * (0.5 - a2 * pc);
}

/* Standard normals from pairs of 32-bit words (Box–Muller), n <= SIM_W
 * pairs: radius sqrt(-2 ln u) with u from wr[j], angle 2 pi wa[j] / 2^32;
 * zc[j] = radius cos, zs[j] = radius sin. The angle is reduced exactly in
 * integers: the top two bits of wa[j] pick the quadrant, the rest the angle
 * inside it, folded to [0, pi/4] by symmetry. Branch-free (selects and
 * exact sign flips) so loops vectorize, and in stages over all pairs, so
 * the pairs' chains of dependent operations overlap. */
#if defined(__wasm_simd128__)
/* Two lanes of sim_log and sim_sincos_oct in WebAssembly
 * SIMD: the same operations in the same order on each lane. */
#define SIM_V2(c) wasm_f64x2_splat(c)

/* sim_log of two positive normal doubles in two stages, for two loops
 * (sim_normal_pairs): the first returns s = f / (2 + f) and gives f and
 * ed, the second the logarithm from the three. */
SIM_FN v128_t sim_log_v1(v128_t x, v128_t *f, v128_t *ed)
{
    v128_t m = wasm_v128_or(wasm_v128_and(x, SIM_KI64(0x000fffffffffffffull)), SIM_KI64(0x3ff0000000000000ull));
    v128_t big = wasm_f64x2_gt(m, SIM_K2(1.4142135623730951));
    m = wasm_v128_bitselect(wasm_f64x2_mul(m, SIM_K2(0.5)), m, big);
    /* (double)(e + big) without an int64 conversion: the biased exponent
     * plus big (a mask, -1) in the mantissa of 2^52, less 2^52 + 1023,
     * all exact integers */
    *ed = wasm_f64x2_sub(wasm_i64x2_sub(wasm_v128_or(wasm_u64x2_shr(x, 52), SIM_KI64(0x4330000000000000ull)), big),
        SIM_K2(4503599627371519.0));
    *f = wasm_f64x2_sub(m, SIM_K2(1.0));
    return wasm_f64x2_div(*f, wasm_f64x2_add(SIM_K2(2.0), *f));
}

SIM_FN v128_t sim_log_v2(v128_t s, v128_t f, v128_t ed)
{
    SIM_KTAB(lg, SIM_LOG_SERIES);
    v128_t z = wasm_f64x2_mul(s, s);
    v128_t w = wasm_f64x2_mul(z, z);
    v128_t t1 = wasm_f64x2_mul(w, wasm_f64x2_add(SIM_KAT(lg, 1), wasm_f64x2_mul(w, wasm_f64x2_add(SIM_KAT(lg, 3),
        wasm_f64x2_mul(w, SIM_KAT(lg, 5))))));
    v128_t t2 = wasm_f64x2_mul(z, wasm_f64x2_add(SIM_KAT(lg, 0), wasm_f64x2_mul(w, wasm_f64x2_add(SIM_KAT(lg, 2),
        wasm_f64x2_mul(w, wasm_f64x2_add(SIM_KAT(lg, 4), wasm_f64x2_mul(w, SIM_KAT(lg, 6))))))));
    v128_t rr = wasm_f64x2_add(t2, t1);
    v128_t hfsq = wasm_f64x2_mul(wasm_f64x2_mul(SIM_K2(0.5), f), f);
    v128_t lo = wasm_f64x2_add(wasm_f64x2_mul(s, wasm_f64x2_add(hfsq, rr)), wasm_f64x2_mul(ed, SIM_K2(SIM_LN2_LO)));
    return wasm_f64x2_sub(wasm_f64x2_mul(ed, SIM_K2(SIM_LN2_HI)), wasm_f64x2_sub(wasm_f64x2_sub(hfsq, lo), f));
}

/* sim_sincos_oct of two angles. */
SIM_FN void sim_sincos_oct_v(v128_t a, v128_t *sn, v128_t *cs)
{
    SIM_KTAB(cps, SIM_SIN_SERIES);
    SIM_KTAB(cpc, SIM_COS_SERIES);
    v128_t a2 = wasm_f64x2_mul(a, a);
    v128_t ps = SIM_KAT(cps, 0), pc = SIM_KAT(cpc, 0);
    for (int i = 1; i < SIM_SINCOS_TERMS; i++) {
        ps = wasm_f64x2_add(wasm_f64x2_mul(ps, a2), SIM_KAT(cps, i));
        pc = wasm_f64x2_add(wasm_f64x2_mul(pc, a2), SIM_KAT(cpc, i));
    }
    *sn = wasm_f64x2_add(a, wasm_f64x2_mul(a, wasm_f64x2_mul(a2, ps)));
    *cs = wasm_f64x2_sub(SIM_K2(1.0), wasm_f64x2_mul(a2, wasm_f64x2_sub(SIM_K2(0.5), wasm_f64x2_mul(a2, pc))));
}
#endif

#define SIM_QUARTER_TURN 1.4629180792671596e-09 /* (pi / 2) / 2^30 */

SIM_FN void sim_normal_pairs(const sim_u32 *wr, const sim_u32 *wa, double *zc, double *zs, int n)
{
    const double quarter = SIM_QUARTER_TURN;
    double r[SIM_W], sn[SIM_W], cs[SIM_W];
    int j0 = 0;
    SIM_ASSERT(n <= SIM_W);
#if defined(__wasm_simd128__)
    /* Two pairs per vector, in three loops over the pairs, each a part of
     * a pair's chain of dependent operations short enough for the
     * processor to overlap several pairs: the logarithm up to its
     * division (s, f and ed wait in r, sn and cs), the rest of it, then
     * root, angle and products. */
    for (int j = 0; j + 2 <= n; j += 2) {
        v128_t w2 = wasm_v128_xor(wasm_v128_load64_zero(wr + j), SIM_KI32(0x80000000u));
        v128_t u = wasm_f64x2_mul(wasm_f64x2_add(wasm_f64x2_convert_low_i32x4(w2), SIM_K2(2147483648.5)),
            SIM_K2(2.3283064365386962890625e-10));
        v128_t f, ed;
        wasm_v128_store(r + j, sim_log_v1(u, &f, &ed));
        wasm_v128_store(sn + j, f);
        wasm_v128_store(cs + j, ed);
    }
    for (int j = 0; j + 2 <= n; j += 2) {
        v128_t lg = sim_log_v2(wasm_v128_load(r + j), wasm_v128_load(sn + j), wasm_v128_load(cs + j));
        wasm_v128_store(r + j, wasm_f64x2_mul(SIM_K2(-2.0), lg));
    }
    for (; j0 + 2 <= n; j0 += 2) {
        v128_t rv = wasm_f64x2_sqrt(wasm_v128_load(r + j0));
        v128_t wa2 = wasm_v128_load64_zero(wa + j0);
        v128_t md = wasm_f64x2_convert_low_i32x4(wasm_v128_and(wa2, SIM_KI32(0x3fffffff)));
        v128_t hi = wasm_f64x2_gt(md, SIM_K2(536870912.0));
        v128_t a = wasm_f64x2_mul(wasm_v128_bitselect(wasm_f64x2_sub(SIM_K2(1073741824.0), md), md, hi),
            SIM_K2(SIM_QUARTER_TURN));
        v128_t snv, csv;
        sim_sincos_oct_v(a, &snv, &csv);
        /* The signs from the word's top bits, the word copied into both
         * halves of its lane (bits 63 and 62 are then its bits 31 and 30):
         * bit 31 (quadrants 2-3) negates the sine, bit 31 ^ bit 30
         * (quadrants 1-2) the cosine, bit 30 (odd) swaps them with hi.
         * Negation by the sign bit is the product with -1 (c and s are
         * never NaN). No int64 sign extension or arithmetic shift: V8
         * emulates both with several instructions. */
        v128_t dup = wasm_i32x4_shuffle(wa2, wa2, 0, 0, 1, 1);
        v128_t sign = SIM_KI64(0x8000000000000000ull);
        v128_t swap = wasm_v128_xor(hi, wasm_i32x4_shr(wasm_i32x4_shl(dup, 1), 31));
        v128_t d = wasm_v128_and(wasm_v128_xor(snv, csv), swap); /* swapped: c and s trade places */
        v128_t c = wasm_v128_xor(wasm_v128_xor(csv, d), wasm_v128_and(wasm_v128_xor(dup, wasm_i64x2_shl(dup, 1)), sign));
        v128_t s = wasm_v128_xor(wasm_v128_xor(snv, d), wasm_v128_and(dup, sign));
        wasm_v128_store(zc + j0, wasm_f64x2_mul(rv, c));
        wasm_v128_store(zs + j0, wasm_f64x2_mul(rv, s));
    }
#endif
    SIM_VLOOP
    for (int j = j0; j < n; j++)
        r[j] = -2.0 * sim_log(sim_u01(wr[j]));
    SIM_VLOOP
    for (int j = j0; j < n; j++)
        r[j] = sim_sqrt(r[j]);
    SIM_VLOOP
    for (int j = j0; j < n; j++) {
        double md = (double)(sim_i32)(wa[j] & 0x3fffffffu);
        double a = (md > 536870912.0 ? 1073741824.0 - md : md) * quarter; /* past pi/4: fold */
        sim_sincos_oct(a, &sn[j], &cs[j]);
    }
    SIM_VLOOP
    for (int j = j0; j < n; j++) {
        /* Quadrant and offset as exact doubles: every condition below is
         * then a double comparison, which vector units select on directly. */
        double qd = (double)(sim_i32)(wa[j] >> 30);
        double md = (double)(sim_i32)(wa[j] & 0x3fffffffu);
        int hi = md > 536870912.0;
        /* radius times cos and sin of the angle inside the quadrant, then
         * of the whole angle: odd quadrants swap them, quadrants 1-2
         * negate the cosine and 2-3 the sine (a product with -1 is an
         * exact negation, so it may come after the radius's). Both
         * products first, then the selects: a select between the loads
         * themselves became a scalar load from a selected address in
         * pocl's code. */
        int odd = (qd == 1.0) | (qd == 3.0);
        int swap = hi != odd;
        double rc = r[j] * cs[j], rs = r[j] * sn[j];
        double c = swap ? rs : rc, s = swap ? rc : rs;
        zc[j] = c * (((qd == 1.0) | (qd == 2.0)) ? -1.0 : 1.0);
        zs[j] = s * (qd >= 2.0 ? -1.0 : 1.0);
    }
}

/* Two standard normals from two 32-bit words, as sim_normal_pairs. */
SIM_FN void sim_normal_pair(sim_u32 w0, sim_u32 w1, double *z0, double *z1)
{
    sim_normal_pairs(&w0, &w1, z0, z1, 1);
}

/* Fills z[0..SIM_W) with normals from words w[0..SIM_W), both in lane
 * order (sim_philox_blocks): of each block's four words, words 0 and 2 make
 * the pair of items 0 and 2 (radius from word 0, angle from word 2), words
 * 1 and 3 the pair of items 1 and 3. In lane order the radius words are
 * the first half of w and their angle words the second half, at the same
 * offset, and the cosines and sines land in the two halves of z. Radius
 * and angle come from different products of Philox's last round: words 0
 * and 1 (or 2 and 3) share one, and Box–Muller is the transform that would
 * notice. */
SIM_FN void sim_normals(const sim_u32 *w, double *z)
{
    sim_normal_pairs(w, w + SIM_W / 2, z, z + SIM_W / 2, SIM_W / 2);
}

/* ---- fixed-point accumulation ------------------------------------------------ */

/* How an output's values are turned into integers: value * scale truncated
 * toward zero, square * sq_scale likewise; the histogram covers
 * [hist_lo, hist_lo + SIM_HIST_BINS / hist_inv_width). All fields are 8 bytes
 * so host and device agree on the layout. */
typedef struct sim_layout {
    double scale;          /* 2^frac_bits */
    double sq_scale;       /* 2^sq_frac_bits */
    double hist_lo;
    double hist_inv_width; /* SIM_HIST_BINS / (hist_hi - hist_lo) */
    double hist_hi;
    sim_i64 frac_bits;
    sim_i64 sq_frac_bits;
    sim_i64 reserved;
} sim_layout;

/* The raw, order-independent statistics of one output over some items.
 * Integer fields only: merging is integer addition, min and max. */
typedef struct sim_acc {
    sim_u64 count;
    sim_u64 sum[3];   /* 192-bit two's complement, sum of truncated value * scale */
    sim_u64 sumsq[3]; /* 192-bit, sum of truncated value^2 * sq_scale */
    sim_i64 min, max; /* fixed point, like sum */
    sim_u64 saturated; /* values clamped to +-(2^56 - 16), or NaN */
    sim_u64 hist[SIM_HIST_BINS + 2]; /* [0] below, [1..BINS] in range, [BINS+1] above */
} sim_acc;

SIM_FN void sim_acc_zero(sim_acc *a)
{
    a->count = 0;
    for (int i = 0; i < 3; i++)
        a->sum[i] = a->sumsq[i] = 0;
    a->min = SIM_FIX_MAX;
    a->max = -SIM_FIX_MAX;
    a->saturated = 0;
    for (int i = 0; i < SIM_HIST_BINS + 2; i++)
        a->hist[i] = 0;
}

/* Adds a signed 64-bit integer into a 192-bit two's complement number. */
SIM_FN void sim_add192(sim_u64 *w, sim_i64 v)
{
    sim_u64 u = (sim_u64)v;
    sim_u64 ext = v < 0 ? ~(sim_u64)0 : 0;
    sim_u64 s0 = w[0] + u;
    sim_u64 c0 = s0 < u ? 1 : 0;
    sim_u64 s1 = w[1] + ext;
    sim_u64 c1 = s1 < ext ? 1 : 0;
    sim_u64 s1b = s1 + c0;
    c1 += s1b < c0 ? 1 : 0;
    w[0] = s0;
    w[1] = s1b;
    w[2] = w[2] + ext + c1;
}

/* value * scale truncated toward zero; values beyond +-2^56 are clamped to
 * +-(2^56 - 16) and NaN to 0, and *sat is set for both. */
SIM_FN sim_i64 sim_fix(double y, int *sat)
{
    int bad = !(y < SIM_FIX_LIMIT && y > -SIM_FIX_LIMIT);
    double yc = y != y ? 0.0 : y;
    yc = yc < SIM_FIX_LIMIT ? yc : SIM_FIX_CLAMP;
    yc = yc > -SIM_FIX_LIMIT ? yc : -SIM_FIX_CLAMP;
    *sat |= bad;
    return (sim_i64)yc;
}

/* Histogram slot of x: 0 below (or NaN), 1..BINS inside, BINS+1 above. */
SIM_FN int sim_hist_slot(const sim_layout *L, double x)
{
    double b = (x - L->hist_lo) * L->hist_inv_width;
    /* clamp before converting: -1 below or NaN, BINS above */
    double bc = b >= 0.0 ? (b < (double)SIM_HIST_BINS ? b : (double)SIM_HIST_BINS) : -1.0;
    return 1 + (int)bc;
}

/* Whether the histogram's bounds are finite: the unchecked vector passes
 * need them so, for their bins of finite values to be the checked ones. */
SIM_FN int sim_hist_finite(const sim_layout *L)
{
    return sim_fabs(L->hist_lo) <= 1.7976931348623157e308 && sim_fabs(L->hist_inv_width) <= 1.7976931348623157e308;
}

/* Adds one value to an accumulator. */
SIM_FN void sim_acc_add(sim_acc *a, const sim_layout *L, double x)
{
    int sat = 0;
    sim_i64 q = sim_fix(x * L->scale, &sat);
    sim_i64 q2 = sim_fix(x * x * L->sq_scale, &sat);
    a->count += 1;
    a->saturated += (sim_u64)sat;
    sim_add192(a->sum, q);
    sim_add192(a->sumsq, q2);
    a->min = q < a->min ? q : a->min;
    a->max = q > a->max ? q : a->max;
    a->hist[sim_hist_slot(L, x)] += 1;
}

/* Merges src into dst (same layout). */
SIM_FN void sim_acc_merge(sim_acc *dst, const sim_acc *src)
{
    sim_u64 c;
    dst->count += src->count;
    for (int k = 0; k < 2; k++) {
        sim_u64 *d = k ? dst->sumsq : dst->sum;
        const sim_u64 *s = k ? src->sumsq : src->sum;
        sim_u64 s0 = d[0] + s[0];
        c = s0 < s[0] ? 1 : 0;
        sim_u64 s1 = d[1] + s[1];
        sim_u64 c1 = s1 < s[1] ? 1 : 0;
        sim_u64 s1b = s1 + c;
        c1 += s1b < c ? 1 : 0;
        d[0] = s0;
        d[1] = s1b;
        d[2] = d[2] + s[2] + c1;
    }
    dst->min = src->min < dst->min ? src->min : dst->min;
    dst->max = src->max > dst->max ? src->max : dst->max;
    dst->saturated += src->saturated;
    for (int i = 0; i < SIM_HIST_BINS + 2; i++)
        dst->hist[i] += src->hist[i];
}

#if defined(__wasm_simd128__)
/* sim_acc_lanes2's pairs x[0 .. n & ~1) of one output in WebAssembly SIMD:
 * the sums of the truncated values into *s and *s2, their min and max into
 * *mn and *mx, the out-of-range count into *nsat and the histogram slots
 * into slot, the same integers as sim_acc_lanes2's loop.
 *
 * WebAssembly has no vector conversion of doubles to int64, so the
 * truncated values stay doubles. Their sums are exact in two parts (each
 * value is hi 2^32 + lo, hi = floor(q 2^-32) below 2^24 in magnitude and
 * lo in [0, 2^32): 64 terms of either sum within 2^53 exactly), and their
 * min and max are the doubles' (truncation is monotone), all made
 * integers once at the end.
 *
 * With check 1, every pair is tested and clamped as sim_fix does. With
 * check 0 no lane is: the pass then returns 1, changing nothing, if a
 * value was out of range or NaN (its max, min or sums show it) or the
 * histogram's bounds are not finite, and 0 when its results stand. */
SIM_FN int sim_acc_pairs_v(const double *x, int n, const sim_layout *l, int *slot, int check, sim_i64 *s,
    sim_i64 *s2, sim_i64 *mn, sim_i64 *mx, sim_i64 *nsat)
{
    if (!check && !sim_hist_finite(l))
        return 1;
    const v128_t lim = SIM_K2(SIM_FIX_LIMIT), nlim = SIM_K2(-SIM_FIX_LIMIT);
    const v128_t sc = SIM_V2(l->scale), sq = SIM_V2(l->sq_scale);
    const v128_t hlo = SIM_V2(l->hist_lo), hiw = SIM_V2(l->hist_inv_width);
    const v128_t bins = SIM_K2((double)SIM_HIST_BINS);
    v128_t sh = SIM_V2(0.0), sl = sh, s2h = sh, s2l = sh, m2v = sh, ns = wasm_i64x2_splat(0);
    v128_t mnv = lim, mxv = nlim; /* beyond every clamped value */
    for (int i = 0; i + 2 <= n; i += 2) {
        v128_t xv = wasm_v128_load(x + i);
        v128_t y = wasm_f64x2_mul(xv, sc), y2 = wasm_f64x2_mul(wasm_f64x2_mul(xv, xv), sq);
        if (check) {
            v128_t ok = wasm_v128_and(wasm_v128_and(wasm_f64x2_lt(y, lim), wasm_f64x2_gt(y, nlim)),
                wasm_f64x2_lt(y2, lim));
            /* In range, y and y2 are their own clamped values; the
             * clamps only where a lane is out of range or NaN. */
            if (wasm_v128_any_true(wasm_v128_not(ok))) {
                ns = wasm_i64x2_add(ns, wasm_v128_andnot(SIM_KI64(1), ok));
                y = wasm_v128_and(y, wasm_f64x2_eq(y, y));
                y2 = wasm_v128_and(y2, wasm_f64x2_eq(y2, y2));
                y = wasm_v128_bitselect(y, SIM_K2(SIM_FIX_CLAMP), wasm_f64x2_lt(y, lim));
                y = wasm_v128_bitselect(y, SIM_K2(-SIM_FIX_CLAMP), wasm_f64x2_gt(y, nlim));
                y2 = wasm_v128_bitselect(y2, SIM_K2(SIM_FIX_CLAMP), wasm_f64x2_lt(y2, lim));
            }
        }
        v128_t q = wasm_f64x2_trunc(y), q2 = wasm_f64x2_trunc(y2);
        v128_t qh = wasm_f64x2_floor(wasm_f64x2_mul(q, SIM_K2(0x1p-32)));
        v128_t q2h = wasm_f64x2_floor(wasm_f64x2_mul(q2, SIM_K2(0x1p-32)));
        sh = wasm_f64x2_add(sh, qh);
        sl = wasm_f64x2_add(sl, wasm_f64x2_sub(q, wasm_f64x2_mul(qh, SIM_K2(0x1p32))));
        s2h = wasm_f64x2_add(s2h, q2h);
        s2l = wasm_f64x2_add(s2l, wasm_f64x2_sub(q2, wasm_f64x2_mul(q2h, SIM_K2(0x1p32))));
        mnv = wasm_f64x2_pmin(mnv, q);
        mxv = wasm_f64x2_pmax(mxv, q);
        if (!check)
            m2v = wasm_f64x2_pmax(m2v, q2);
        /* sim_hist_slot: 1 + (int)bc, in [0, 33], is the low word of
         * 2^52 + 1 + trunc(bc) */
        v128_t b = wasm_f64x2_mul(wasm_f64x2_sub(xv, hlo), hiw), sl2;
        if (check) {
            /* b < BINS ? b : BINS as pmin, which differs only for NaN,
             * where the select gives -1 either way */
            v128_t bc = wasm_v128_bitselect(wasm_f64x2_pmin(b, bins), SIM_K2(-1.0), wasm_f64x2_ge(b, SIM_V2(0.0)));
            sl2 = wasm_f64x2_add(wasm_f64x2_trunc(bc), SIM_K2(4503599627370497.0));
        } else {
            /* for b not NaN, the select's: below 0 the floor of max(b,
             * -1) is -1, from 0 on it is the truncation (b is NaN only
             * for an x that is not finite, and the pass is then done
             * again, checked) */
            v128_t bc = wasm_f64x2_pmax(wasm_f64x2_pmin(b, bins), SIM_K2(-1.0));
            sl2 = wasm_f64x2_add(wasm_f64x2_floor(bc), SIM_K2(4503599627370497.0));
        }
        wasm_v128_store64_lane(slot + i, wasm_i32x4_shuffle(sl2, sl2, 0, 2, 0, 2), 0);
    }
    if (!check) {
        /* a NaN or infinite value makes sl NaN */
        v128_t bad = wasm_v128_or(wasm_v128_or(wasm_f64x2_ge(mxv, lim), wasm_f64x2_le(mnv, nlim)),
            wasm_v128_or(wasm_f64x2_ge(m2v, lim), wasm_f64x2_ne(sl, sl)));
        if (wasm_v128_any_true(wasm_v128_or(bad, wasm_f64x2_ne(s2l, s2l))))
            return 1;
    }
    *s = (sim_i64)(((sim_u64)(sim_i64)wasm_f64x2_extract_lane(sh, 0) + (sim_u64)(sim_i64)wasm_f64x2_extract_lane(sh, 1)) << 32) +
        (sim_i64)wasm_f64x2_extract_lane(sl, 0) + (sim_i64)wasm_f64x2_extract_lane(sl, 1);
    *s2 = (sim_i64)(((sim_u64)(sim_i64)wasm_f64x2_extract_lane(s2h, 0) + (sim_u64)(sim_i64)wasm_f64x2_extract_lane(s2h, 1)) << 32) +
        (sim_i64)wasm_f64x2_extract_lane(s2l, 0) + (sim_i64)wasm_f64x2_extract_lane(s2l, 1);
    *nsat = wasm_i64x2_extract_lane(ns, 0) + wasm_i64x2_extract_lane(ns, 1);
    for (int k = 0; k < 2; k++) {
        sim_i64 qmn = (sim_i64)(k ? wasm_f64x2_extract_lane(mnv, 1) : wasm_f64x2_extract_lane(mnv, 0));
        sim_i64 qmx = (sim_i64)(k ? wasm_f64x2_extract_lane(mxv, 1) : wasm_f64x2_extract_lane(mxv, 0));
        *mn = qmn < *mn ? qmn : *mn;
        *mx = qmx > *mx ? qmx : *mx;
    }
    return 0;
}
#endif

/* sim_acc_lanes2's checked loop for x[i0 .. n) of one output: each value
 * scaled, tested, clamped and truncated as sim_fix does, summed in int64
 * (at most 128 terms, which cannot overflow: see SIM_FIX_LIMIT), with min,
 * max, the out-of-range count and the histogram slots. Forced inline, so
 * split is a constant where it is called.
 *
 * With split 1 no double is converted to an int64: x86 vector units
 * before AVX-512 have no such conversion, and gcc and clang (an OpenCL
 * program on a CPU device) leave a loop with one scalar. Conversions to
 * int32 they have. A clamped value y (|y| < 2^56) is h 2^31 + r with h =
 * (int32)(y 2^-31), the quotient truncated, and r = y - h 2^31 exact, of
 * y's sign and below 2^31 in magnitude; (int64)y is then h 2^31 +
 * (int32)r. (pocl's trunc and floor are long sequences of integer
 * operations: this uses neither.) The same integers either way. */
SIM_FN void sim_acc_checked(const double *x, int i0, int n, const sim_layout *l, int split, int *slot,
    sim_i64 *s, sim_i64 *s2, sim_i64 *mn, sim_i64 *mx, sim_i64 *nsat)
{
    sim_i64 ls = 0, ls2 = 0, lmn = *mn, lmx = *mx, lns = 0;
    SIM_VLOOP
    for (int i = i0; i < n; i++) {
        double y = x[i] * l->scale, y2 = x[i] * x[i] * l->sq_scale;
        /* y2 is a square times a positive scale: at least 0, or NaN,
         * so only its upper bound needs a check and a clamp */
        int bad = !((y < SIM_FIX_LIMIT) & (y > -SIM_FIX_LIMIT) & (y2 < SIM_FIX_LIMIT));
        double yc = y != y ? 0.0 : y, y2c = y2 != y2 ? 0.0 : y2;
        yc = yc < SIM_FIX_LIMIT ? yc : SIM_FIX_CLAMP;
        yc = yc > -SIM_FIX_LIMIT ? yc : -SIM_FIX_CLAMP;
        y2c = y2c < SIM_FIX_LIMIT ? y2c : SIM_FIX_CLAMP;
        sim_i64 q, q2;
        if (split) {
            sim_i32 h = (sim_i32)(yc * 0x1p-31), h2 = (sim_i32)(y2c * 0x1p-31);
            sim_i32 r = (sim_i32)(yc - (double)h * 0x1p31), r2 = (sim_i32)(y2c - (double)h2 * 0x1p31);
            q = (sim_i64)h * 2147483648 + r;
            q2 = (sim_i64)h2 * 2147483648 + r2;
        } else {
            q = (sim_i64)yc;
            q2 = (sim_i64)y2c;
        }
        lns += bad;
        ls += q;
        ls2 += q2;
        lmn = q < lmn ? q : lmn;
        lmx = q > lmx ? q : lmx;
        slot[i] = sim_hist_slot(l, x[i]);
    }
    *s += ls;
    *s2 += ls2;
    *mn = lmn;
    *mx = lmx;
    *nsat += lns;
}

#if (defined(__GNUC__) && defined(__x86_64__) && !defined(__CUDACC__) && !defined(__OPENCL_VERSION__)) || \
    (defined(__OPENCL_VERSION__) && SIM_CL_CPU)
/* where sim_acc_lanes2 splits rather than converting to int64 */
#define SIM_ACC_SPLIT 1
#endif

#if defined(SIM_ACC_SPLIT) && defined(__OPENCL_VERSION__)
/* sim_acc_avx2 in OpenCL's vectors of four, for CPU devices: the same
 * unchecked pass, the same exact sums of doubles, but the truncated value
 * q is built without trunc (a long sequence of integer operations in
 * pocl): h = (int)(y 2^-31) and r = y - h 2^31 as in sim_acc_checked, then
 * qh = h 2^31, a multiple of 2^31, and q - qh = (int)r, below 2^31 in
 * magnitude. Sums of either part in four lanes of at most 32 values are
 * exact; min and max are those of y, whose truncations keep their order.
 * Returns 1, changing nothing, when a value was out of range or NaN or
 * the histogram's bounds are not finite. */
SIM_FN int sim_acc_cl(const double *x, int n, const sim_layout *l, int *slot, sim_i64 *s, sim_i64 *s2,
    sim_i64 *mn, sim_i64 *mx)
{
    if (!sim_hist_finite(l))
        return 1;
    const double lim = SIM_FIX_LIMIT, bins = (double)SIM_HIST_BINS;
    double4 sh = (double4)(0.0), sl = sh, s2h = sh, s2l = sh;
    double4 mnv = (double4)(lim), mxv = (double4)(-lim);
    long4 ok = (long4)(-1);
    for (int i = 0; i + 4 <= n; i += 4) {
        double4 xv = vload4(0, x + i);
        double4 y = xv * l->scale, y2 = xv * xv * l->sq_scale;
        ok &= (y < lim) & (y > -lim) & (y2 < lim);
        /* out of range, the conversions' results are discarded: see ok */
        double4 qh = convert_double4(convert_int4_rtz(y * 0x1p-31)) * 0x1p31;
        double4 q2h = convert_double4(convert_int4_rtz(y2 * 0x1p-31)) * 0x1p31;
        sh += qh;
        sl += convert_double4(convert_int4_rtz(y - qh));
        s2h += q2h;
        s2l += convert_double4(convert_int4_rtz(y2 - q2h));
        /* NaN makes min and max undefined, and the pass is discarded */
        mnv = min(mnv, y);
        mxv = max(mxv, y);
        double4 b = (xv - l->hist_lo) * l->hist_inv_width;
        double4 bc = select((double4)(-1.0), select((double4)(bins), b, b < bins), b >= 0.0);
        vstore4(convert_int4_rtz(bc) + 1, 0, slot + i);
    }
    if (any(ok == 0))
        return 1;
    /* the high parts' sums are multiples of 2^31 below 2^63 in magnitude,
     * exact; their quotients by 2^31 fit a long and the shift wraps as the
     * true sum, which fits, does */
    double th = (sh.s0 + sh.s1) + (sh.s2 + sh.s3), tl = (sl.s0 + sl.s1) + (sl.s2 + sl.s3);
    double t2h = (s2h.s0 + s2h.s1) + (s2h.s2 + s2h.s3), t2l = (s2l.s0 + s2l.s1) + (s2l.s2 + s2l.s3);
    *s += (long)(((ulong)(long)(th * 0x1p-31) << 31) + (ulong)(long)tl);
    *s2 += (long)(((ulong)(long)(t2h * 0x1p-31) << 31) + (ulong)(long)t2l);
    if (n >= 4) {
        double dmn = fmin(fmin(mnv.s0, mnv.s1), fmin(mnv.s2, mnv.s3));
        double dmx = fmax(fmax(mxv.s0, mxv.s1), fmax(mxv.s2, mxv.s3));
        *mn = (long)dmn < *mn ? (long)dmn : *mn;
        *mx = (long)dmx > *mx ? (long)dmx : *mx;
    }
    return 0;
}
#endif

#if defined(SIM_ACC_SPLIT) && !defined(__OPENCL_VERSION__)
#define SIM_ACC_AVX2 1
/* sim_acc_lanes2's loop for x[0 .. n & ~3) of one output in AVX2, the same
 * integers as sim_acc_pairs_v computes them: the truncated values q stay
 * doubles, each split exactly into qh, q rounded to a multiple of 2^32
 * (by adding and subtracting 1.5 2^84), and q - qh, within 2^31 in
 * magnitude. Sums of either part in four lanes of at most 32 values each
 * are exact in any order, and min and max are the doubles' (truncation is
 * monotone); all are made integers once at the end.
 *
 * No value is tested: returns 1, changing nothing, when one was out of
 * range or NaN (the max, min or sums show it) or the histogram's bounds
 * are not finite; then sim_acc_checked does the values again. */
static inline __attribute__((target("avx2"))) int sim_acc_avx2(const double *x, int n, const sim_layout *l,
    int *slot, sim_i64 *s, sim_i64 *s2, sim_i64 *mn, sim_i64 *mx)
{
    if (!sim_hist_finite(l))
        return 1;
    const __m256d lim = _mm256_set1_pd(SIM_FIX_LIMIT), nlim = _mm256_set1_pd(-SIM_FIX_LIMIT);
    const __m256d sc = _mm256_set1_pd(l->scale), sq = _mm256_set1_pd(l->sq_scale);
    const __m256d hlo = _mm256_set1_pd(l->hist_lo), hiw = _mm256_set1_pd(l->hist_inv_width);
    const __m256d bins = _mm256_set1_pd((double)SIM_HIST_BINS), m1 = _mm256_set1_pd(-1.0);
    const __m256d big = _mm256_set1_pd(0x1.8p84); /* its ulp is 2^32 */
    const __m128i one = _mm_set1_epi32(1);
    __m256d sh = _mm256_setzero_pd(), sl = sh, s2h = sh, s2l = sh, m2v = sh;
    __m256d mnv = lim, mxv = nlim; /* beyond every value in range */
    for (int i = 0; i + 4 <= n; i += 4) {
        __m256d xv = _mm256_loadu_pd(x + i);
        __m256d y = _mm256_mul_pd(xv, sc), y2 = _mm256_mul_pd(_mm256_mul_pd(xv, xv), sq);
        __m256d q = _mm256_round_pd(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256d q2 = _mm256_round_pd(y2, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256d qh = _mm256_sub_pd(_mm256_add_pd(q, big), big);
        __m256d q2h = _mm256_sub_pd(_mm256_add_pd(q2, big), big);
        sh = _mm256_add_pd(sh, qh);
        sl = _mm256_add_pd(sl, _mm256_sub_pd(q, qh));
        s2h = _mm256_add_pd(s2h, q2h);
        s2l = _mm256_add_pd(s2l, _mm256_sub_pd(q2, q2h));
        mnv = _mm256_min_pd(mnv, q);
        mxv = _mm256_max_pd(mxv, q);
        m2v = _mm256_max_pd(m2v, q2);
        /* sim_hist_slot for b not NaN: below 0 the floor of max(b, -1) is
         * -1, from 0 on it is the truncation (b is NaN only for an x that
         * is not finite, and the pass is then done again, checked) */
        __m256d b = _mm256_mul_pd(_mm256_sub_pd(xv, hlo), hiw);
        __m256d bc = _mm256_max_pd(_mm256_min_pd(b, bins), m1);
        __m128i si = _mm_add_epi32(_mm256_cvttpd_epi32(_mm256_floor_pd(bc)), one);
        _mm_storeu_si128((__m128i *)(slot + i), si);
    }
    /* a NaN or infinite value makes sl or s2l NaN */
    __m256d bad = _mm256_or_pd(_mm256_or_pd(_mm256_cmp_pd(mxv, lim, _CMP_GE_OQ), _mm256_cmp_pd(mnv, nlim, _CMP_LE_OQ)),
        _mm256_or_pd(_mm256_cmp_pd(m2v, lim, _CMP_GE_OQ), _mm256_cmp_pd(sl, s2l, _CMP_UNORD_Q)));
    if (_mm256_movemask_pd(bad) != 0)
        return 1;
    double v[6][4];
    _mm256_storeu_pd(v[0], sh);
    _mm256_storeu_pd(v[1], sl);
    _mm256_storeu_pd(v[2], s2h);
    _mm256_storeu_pd(v[3], s2l);
    _mm256_storeu_pd(v[4], mnv);
    _mm256_storeu_pd(v[5], mxv);
    /* the high parts' sums are multiples of 2^32 below 2^63 in magnitude,
     * exact; their quotients by 2^32 fit an int64 and the shift wraps as
     * the true sum, which fits, does */
    double th = (v[0][0] + v[0][1]) + (v[0][2] + v[0][3]), tl = (v[1][0] + v[1][1]) + (v[1][2] + v[1][3]);
    double t2h = (v[2][0] + v[2][1]) + (v[2][2] + v[2][3]), t2l = (v[3][0] + v[3][1]) + (v[3][2] + v[3][3]);
    *s += (sim_i64)(((sim_u64)(sim_i64)(th * 0x1p-32) << 32) + (sim_u64)(sim_i64)tl);
    *s2 += (sim_i64)(((sim_u64)(sim_i64)(t2h * 0x1p-32) << 32) + (sim_u64)(sim_i64)t2l);
    for (int k = 0; k < 4 && n >= 4; k++) {
        sim_i64 qmn = (sim_i64)v[4][k], qmx = (sim_i64)v[5][k];
        *mn = qmn < *mn ? qmn : *mn;
        *mx = qmx > *mx ? qmx : *mx;
    }
    return 0;
}
#endif

/* Adds the items g0 + lo .. g0 + hi - 1 of a group (outputs in lane order,
 * see sim_lane_of) into acc[0 .. nout): the same integers as sim_acc_add on
 * each value, in loops compilers vectorize (the two sim_fix calls spelled
 * out, int64 partial sums of at most 128 terms, which cannot overflow:
 * see SIM_FIX_LIMIT). */
SIM_FN void sim_acc_lanes2(sim_acc *acc, sim_u64 (*alt)[SIM_HIST_BINS + 2], const sim_layout *L,
    int nout, double out[SIM_MAX_OUT][SIM_W], int lo, int hi);

SIM_FN void sim_acc_lanes(sim_acc *acc, const sim_layout *L, int nout, double out[SIM_MAX_OUT][SIM_W],
    int lo, int hi)
{
    sim_acc_lanes2(acc, 0, L, nout, out, lo, hi);
}

/* sim_acc_lanes, with the histogram counts of lanes 1, 2 and 3 of every
 * four going to rows o, SIM_MAX_OUT + o and 2 SIM_MAX_OUT + o of alt when
 * alt is not null (3 SIM_MAX_OUT rows; the caller adds them into acc at the
 * end): values often fall in the same bin, and four counters cut the chain
 * of increments through memory to a quarter. */
SIM_FN void sim_acc_lanes2(sim_acc *acc, sim_u64 (*alt)[SIM_HIST_BINS + 2], const sim_layout *L,
    int nout, double out[SIM_MAX_OUT][SIM_W], int lo, int hi)
{
    const int n = hi - lo;
    for (int o = 0; o < nout; o++) {
        sim_acc *a = &acc[o];
        const sim_layout *l = &L[o];
        const double *x = out[o];
        double part[SIM_W];
        int slot[SIM_W];
        sim_i64 s = 0, s2 = 0, mn = a->min, mx = a->max, nsat = 0;
        if (n < SIM_W) {
            /* part of a group: its items, gathered from their lanes (a
             * whole group's sums do not depend on the order) */
            SIM_VLOOP
            for (int i = 0; i < n; i++)
                part[i] = x[sim_lane_of(lo + i)];
            x = part;
        }
#if defined(__wasm_simd128__)
        /* A first pass tests no lane; where a value is out of range (or a
         * layout is not finite) the checked pass does the pairs again. */
        if (sim_acc_pairs_v(x, n, l, slot, 0, &s, &s2, &mn, &mx, &nsat) != 0)
            sim_acc_pairs_v(x, n, l, slot, 1, &s, &s2, &mn, &mx, &nsat);
        int i0 = n & ~1;
#elif defined(SIM_ACC_AVX2)
        int i0 = 0;
        if (!__builtin_cpu_supports("avx512dq")) { /* AVX-512 converts doubles to int64 in vectors */
            if (__builtin_cpu_supports("avx2") && sim_acc_avx2(x, n, l, slot, &s, &s2, &mn, &mx) == 0) {
                i0 = n & ~3;
            } else {
                sim_acc_checked(x, 0, n, l, 1, slot, &s, &s2, &mn, &mx, &nsat);
                i0 = n;
            }
        }
#elif defined(SIM_ACC_SPLIT)
        int i0 = n & ~3;
        if (sim_acc_cl(x, n, l, slot, &s, &s2, &mn, &mx) != 0) {
            sim_acc_checked(x, 0, n, l, 1, slot, &s, &s2, &mn, &mx, &nsat);
            i0 = n;
        }
#else
        int i0 = 0;
#endif
        sim_acc_checked(x, i0, n, l, 0, slot, &s, &s2, &mn, &mx, &nsat);
        int i = 0;
        if (alt)
            for (; i + 3 < n; i += 4) {
                a->hist[slot[i]] += 1;
                alt[o][slot[i + 1]] += 1;
                alt[SIM_MAX_OUT + o][slot[i + 2]] += 1;
                alt[2 * SIM_MAX_OUT + o][slot[i + 3]] += 1;
            }
        for (; i < n; i++)
            a->hist[slot[i]] += 1;
        a->saturated += (sim_u64)nsat;
        a->min = mn;
        a->max = mx;
        a->count += (sim_u64)n;
        sim_add192(a->sum, s);
        sim_add192(a->sumsq, s2);
    }
}

#endif /* SIM_DEV_H */
