/*
 * kernels.cu — the CUDA entry points. The kernels themselves are the
 * shared headers every backend compiles (dev.h, option_dev.h,
 * combat_dev.h); this file only maps CUDA threads onto groups of items,
 * exactly as the OpenCL entry points in opencl_native.c do. Built by the
 * Makefile's CUDA section with nvcc -fmad=false (no fused multiply-add)
 * into a fatbin that cuda_native.c embeds and loads through the driver.
 */
#define SIM_W 4
#include "sim/combat_dev.h"
#include "sim/option_dev.h"

#define SIM_CUDA_ENTRY(NAME, PTYPE, GROUP)                                                 \
    extern "C" __global__ void NAME(const PTYPE *gp, const sim_layout *gl, sim_u64 seed,   \
        sim_u64 base, sim_u64 first, sim_u64 end, sim_u64 ngroups, sim_acc *out)           \
    {                                                                                      \
        PTYPE p = *gp;                                                                     \
        sim_layout L[SIM_MAX_OUT];                                                         \
        sim_acc acc[SIM_MAX_OUT];                                                          \
        double v[SIM_MAX_OUT][SIM_W];                                                      \
        const int nout = (int)p.nout;                                                      \
        const sim_u32 k0 = (sim_u32)seed, k1 = (sim_u32)(seed >> 32);                      \
        const sim_u64 gid = (sim_u64)blockIdx.x * blockDim.x + threadIdx.x;                \
        const sim_u64 gsz = (sim_u64)gridDim.x * blockDim.x;                               \
        for (int o = 0; o < nout; o++) {                                                   \
            L[o] = gl[o];                                                                  \
            sim_acc_zero(&acc[o]);                                                         \
        }                                                                                  \
        for (sim_u64 g = gid; g < ngroups; g += gsz) {                                     \
            sim_u64 g0 = base + g * SIM_W;                                                 \
            GROUP(&p, k0, k1, g0, v);                                                      \
            int lo = g0 < first ? (int)(first - g0) : 0;                                   \
            int hi = end - g0 < SIM_W ? (int)(end - g0) : SIM_W;                           \
            sim_acc_lanes(acc, L, nout, v, lo, hi);                                        \
        }                                                                                  \
        for (int o = 0; o < nout; o++)                                                     \
            out[gid * (sim_u64)nout + (sim_u64)o] = acc[o];                                \
    }

SIM_CUDA_ENTRY(sim_option_cuda, sim_option_params, sim_option_group)
SIM_CUDA_ENTRY(sim_combat_cuda, sim_combat_params, sim_combat_group)

extern "C" __global__ void sim_sizes_cuda(sim_u64 *out)
{
    out[0] = sizeof(sim_acc);
    out[1] = sizeof(sim_layout);
    out[2] = sizeof(sim_option_params);
    out[3] = sizeof(sim_combat_params);
}
