/*
 * opencl_native.c — the OpenCL backend (native builds only). The device program
 * is generated from the same headers the CPU build compiles: their text is
 * embedded into this object at build time and handed to the OpenCL
 * compiler at run time with a small entry point per kernel, so the device
 * runs the same operations in the same order as the CPU.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/combat_dev.h"
#include "sim/option_dev.h"
#include "sim/sim_int.h"

/* The device headers, embedded byte for byte (paths relative to the
 * repository root, where make runs the compiler). Including them above
 * also makes this object depend on them in make's dependency files. */
#define EMBED(sym, path)                \
    __asm__(".section .rodata\n"        \
            ".balign 16\n" #sym ":\n"   \
            ".incbin \"" path "\"\n"    \
            ".byte 0\n"                 \
            ".previous\n");             \
    extern const char sym[]
EMBED(sim_cl_src_dev, "sim/dev.h");
EMBED(sim_cl_src_option, "sim/option_dev.h");
EMBED(sim_cl_src_combat, "sim/combat_dev.h");

/* One entry point per kernel: each work item takes every global_size-th
 * group of SIM_W items, accumulates the items inside [first, end) and
 * writes its accumulators; the host merges them (order does not matter). */
static const char cl_entries[] =
    "#if SIM_CL_CPU /* CPU devices: four histogram counters, as the CPU loop */ \n"
    "#define SIM_ALT_DECL ulong alt[3 * SIM_MAX_OUT][SIM_HIST_BINS + 2]; \\\n"
    "    for (int r = 0; r < 3 * SIM_MAX_OUT; r++) \\\n"
    "        for (int k = 0; k < SIM_HIST_BINS + 2; k++) \\\n"
    "            alt[r][k] = 0;\n"
    "#define SIM_ALT_PTR alt\n"
    "#define SIM_ALT_FOLD(o) for (int k = 0; k < SIM_HIST_BINS + 2; k++) \\\n"
    "    acc[o].hist[k] += alt[o][k] + alt[SIM_MAX_OUT + o][k] + alt[2 * SIM_MAX_OUT + o][k];\n"
    "#else\n"
    "#define SIM_ALT_DECL\n"
    "#define SIM_ALT_PTR 0\n"
    "#define SIM_ALT_FOLD(o)\n"
    "#endif\n"
    "#define SIM_CL_ENTRY(NAME, PTYPE, GROUP) \\\n"
    "__kernel void NAME(__global const PTYPE *gp, __global const sim_layout *gl, \\\n"
    "    ulong seed, ulong base, ulong first, ulong end, ulong ngroups, \\\n"
    "    __global sim_acc *out) \\\n"
    "{ \\\n"
    "    PTYPE p = *gp; \\\n"
    "    sim_layout L[SIM_MAX_OUT]; \\\n"
    "    sim_acc acc[SIM_MAX_OUT]; \\\n"
    "    double v[SIM_MAX_OUT][SIM_W]; \\\n"
    "    SIM_ALT_DECL \\\n"
    "    const int nout = (int)p.nout; \\\n"
    "    const uint k0 = (uint)seed, k1 = (uint)(seed >> 32); \\\n"
    "    const ulong gid = get_global_id(0), gsz = get_global_size(0); \\\n"
    "    for (int o = 0; o < nout; o++) { \\\n"
    "        L[o] = gl[o]; \\\n"
    "        sim_acc_zero(&acc[o]); \\\n"
    "    } \\\n"
    "    for (ulong g = gid; g < ngroups; g += gsz) { \\\n"
    "        ulong g0 = base + g * SIM_W; \\\n"
    "        GROUP(&p, k0, k1, g0, v); \\\n"
    "        int lo = g0 < first ? (int)(first - g0) : 0; \\\n"
    "        int hi = end - g0 < SIM_W ? (int)(end - g0) : SIM_W; \\\n"
    "        sim_acc_lanes2(acc, SIM_ALT_PTR, L, nout, v, lo, hi); \\\n"
    "    } \\\n"
    "    for (int o = 0; o < nout; o++) { \\\n"
    "        SIM_ALT_FOLD(o) \\\n"
    "        out[gid * (ulong)nout + (ulong)o] = acc[o]; \\\n"
    "    } \\\n"
    "}                                                                                     \n"
    "SIM_CL_ENTRY(sim_option_cl, sim_option_params, sim_option_group)                      \n"
    "SIM_CL_ENTRY(sim_combat_cl, sim_combat_params, sim_combat_group)                      \n"
    "__kernel void sim_acc_group(__global const double *gv, __global const sim_layout *gl, \n"
    "    int nout, int lo, int hi, __global sim_acc *out)                                  \n"
    "{                                                                                     \n"
    "    sim_layout L[SIM_MAX_OUT];                                                        \n"
    "    sim_acc acc[SIM_MAX_OUT];                                                         \n"
    "    double v[SIM_MAX_OUT][SIM_W];                                                     \n"
    "    for (int o = 0; o < nout; o++) {                                                  \n"
    "        L[o] = gl[o];                                                                 \n"
    "        sim_acc_zero(&acc[o]);                                                        \n"
    "        for (int l = 0; l < SIM_W; l++)                                               \n"
    "            v[o][l] = gv[o * SIM_W + l];                                              \n"
    "    }                                                                                 \n"
    "    sim_acc_lanes2(acc, 0, L, nout, v, lo, hi);                                       \n"
    "    for (int o = 0; o < nout; o++)                                                    \n"
    "        out[o] = acc[o];                                                              \n"
    "}                                                                                     \n"
    "__kernel void sim_sizes(__global ulong *out)                                          \n"
    "{                                                                                     \n"
    "    out[0] = sizeof(sim_acc);                                                         \n"
    "    out[1] = sizeof(sim_layout);                                                      \n"
    "    out[2] = sizeof(sim_option_params);                                               \n"
    "    out[3] = sizeof(sim_combat_params);                                               \n"
    "}                                                                                     \n";

#define MAX_KERNELS 8
/* Items per group in the device program: wide groups let a CPU device's
 * compiler vectorize inside a work item, as the CPU backend does; GPUs run
 * narrow groups on many more work items. Results do not depend on it. On
 * pocl (European call, paths per CPU second) 128 with the loop hint below
 * gives 1.7e8, 64 1.5e8, 32 1.1e8; pocl's own vectorization across work
 * items (groups of 4 to 32 per work item, work-groups of 8 or 16) 1.8e7
 * to 6.3e7. */
#define CPU_GROUP 128
#define GPU_GROUP 4
/* Work items per launch: enough to fill a GPU, few enough that the
 * per-item accumulators stay small on a CPU device (on pocl any count from
 * 2 to 1,024 runs at the same speed). */
#define CPU_WORK_ITEMS 256
#define GPU_WORK_ITEMS 65536
/* The lane-loop hint of a CPU device's program (SIM_VLOOP in dev.h): clang
 * vectorizes each loop over a group's lanes with vectors of 8 doubles
 * (split into two AVX2 registers where it prefers 256-bit ones) and two of
 * them in flight, hiding the latency of the long chains of dependent
 * operations. It moves no operation and changes no bit; on pocl it makes
 * the European call 1.2x as fast (1.44e8 to 1.71e8 paths per CPU second). */
#define CPU_LOOP_HINT "#define SIM_VLOOP _Pragma(\"clang loop vectorize_width(8) interleave_count(2)\")\n"

struct sim_cl {
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    cl_program program;
    cl_kernel kernels[MAX_KERNELS]; /* same order as sim_kernel_at */
    size_t work_items;
    unsigned group; /* SIM_W of the device program */
    size_t local_one;
    const size_t *local; /* work-group size: 1 on CPU devices, else the driver's choice */
    char name[256];
};

static int cl_fail(char *err, size_t errlen, int rc, const char *what, cl_int code)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "OpenCL: %s failed (error %d)", what, (int)code);
    return rc;
}

/* The n-th device counting across all platforms. */
static int pick_device(cl_device_id *out, unsigned want, char *err, size_t errlen)
{
    cl_platform_id plats[8];
    cl_uint nplat = 0;
    unsigned seen = 0;
    cl_int e = clGetPlatformIDs(8, plats, &nplat);
    if (e != CL_SUCCESS || nplat == 0)
        return cl_fail(err, errlen, SIM_ENODEVICE, "clGetPlatformIDs (no OpenCL platform)", e);
    for (cl_uint p = 0; p < nplat && p < 8; p++) {
        cl_device_id devs[SIM_CL_PLATFORM_DEVICES];
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, SIM_CL_PLATFORM_DEVICES, devs, &ndev) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < ndev && d < SIM_CL_PLATFORM_DEVICES; d++, seen++)
            if (seen == want) {
                *out = devs[d];
                return 0;
            }
    }
    if (err != NULL)
        snprintf(err, errlen, "OpenCL: no device number %u (%u found)", want, seen);
    return SIM_ENODEVICE;
}

/* Checks that host and device agree on the shared structs' sizes. */
static int check_sizes(sim_cl *cl, char *err, size_t errlen)
{
    cl_ulong got[4] = { 0 };
    const cl_ulong want[4] = { sizeof(sim_acc), sizeof(sim_layout), sizeof(sim_option_params),
        sizeof(sim_combat_params) };
    cl_int e;
    int rc = 0;
    cl_kernel k = clCreateKernel(cl->program, "sim_sizes", &e);
    if (e != CL_SUCCESS)
        return cl_fail(err, errlen, SIM_EDEVICE, "clCreateKernel(sim_sizes)", e);
    cl_mem buf = clCreateBuffer(cl->ctx, CL_MEM_WRITE_ONLY, sizeof got, NULL, &e);
    if (e != CL_SUCCESS) {
        rc = cl_fail(err, errlen, SIM_EDEVICE, "clCreateBuffer", e);
        goto out_kernel;
    }
    size_t one = 1;
    if ((e = clSetKernelArg(k, 0, sizeof buf, &buf)) != CL_SUCCESS ||
        (e = clEnqueueNDRangeKernel(cl->queue, k, 1, NULL, &one, NULL, 0, NULL, NULL)) != CL_SUCCESS ||
        (e = clEnqueueReadBuffer(cl->queue, buf, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL)) != CL_SUCCESS) {
        rc = cl_fail(err, errlen, SIM_EDEVICE, "running sim_sizes", e);
        goto out_buf;
    }
    if (memcmp(got, want, sizeof got) != 0) {
        if (err != NULL)
            snprintf(err, errlen, "OpenCL: struct sizes differ from the host's (%llu %llu %llu %llu)",
                (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2],
                (unsigned long long)got[3]);
        rc = SIM_EDEVICE;
    }
out_buf:
    clReleaseMemObject(buf);
out_kernel:
    clReleaseKernel(k);
    return rc;
}

int sim_cl_create(sim_cl **out, char *err, size_t errlen)
{
    const char *env = getenv("SIMFARM_OPENCL_DEVICE");
    return sim_cl_open(out, env ? (unsigned)strtoul(env, NULL, 10) : 0, err, errlen);
}

/* The start of the compiler's log, as much as fits in buf (the driver
 * gives none of it to a buffer too small for the whole). */
static void build_log(const sim_cl *cl, char *buf, size_t len)
{
    size_t size = 0;
    char *log;
    buf[0] = '\0';
    if (clGetProgramBuildInfo(cl->program, cl->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) != CL_SUCCESS ||
        size == 0 || (log = malloc(size)) == NULL)
        return;
    if (clGetProgramBuildInfo(cl->program, cl->device, CL_PROGRAM_BUILD_LOG, size, log, NULL) == CL_SUCCESS) {
        log[size - 1] = '\0';
        snprintf(buf, len, "%s", log);
    }
    free(log);
}

int sim_cl_open(sim_cl **out, unsigned device, char *err, size_t errlen)
{
    char prelude[256];
    const char *srcs[] = { prelude, sim_cl_src_dev, sim_cl_src_option, sim_cl_src_combat, cl_entries };
    cl_device_type type = 0;
    cl_int e;
    int rc;

    sim_cl *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return SIM_ENOMEM;
    if ((rc = pick_device(&cl->device, device, err, errlen)) != 0)
        goto fail;
    clGetDeviceInfo(cl->device, CL_DEVICE_NAME, sizeof cl->name - 1, cl->name, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    const int gpu_device = (type & CL_DEVICE_TYPE_GPU) != 0;
    /* SIMFARM_OPENCL_PROFILE=gpu gives any device a GPU's program and
     * launch shape: for tests, which run on pocl the code a GPU runs */
    const char *prof = getenv("SIMFARM_OPENCL_PROFILE");
    const int gpu = gpu_device || (prof != NULL && strcmp(prof, "gpu") == 0);
    cl->work_items = gpu ? GPU_WORK_ITEMS : CPU_WORK_ITEMS;
    cl->group = gpu ? GPU_GROUP : CPU_GROUP;
    /* One work item per work-group on a CPU device: the item loops inside
     * a work item are what its compiler vectorizes. So also with the GPU
     * profile: pocl, left to pick, chose work-groups of 4,096 work items
     * and crashed inside the kernel. */
    cl->local_one = 1;
    cl->local = gpu_device ? NULL : &cl->local_one;
    {
        const char *g = getenv("SIMFARM_OPENCL_GROUP"); /* 4, 8, 16, 32, 64 or 128: for tests */
        unsigned v = g ? (unsigned)strtoul(g, NULL, 10) : 0;
        if (v == 4 || v == 8 || v == 16 || v == 32 || v == 64 || v == 128)
            cl->group = v;
    }
    /* the hint on CPU devices; loops over groups of 4 are unrolled, and
     * clang warns that it found no loop to apply it to */
    snprintf(prelude, sizeof prelude, "#define SIM_W %u\n#define SIM_CL_CPU %d\n%s", cl->group, !gpu,
        gpu || cl->group < 8 ? "" : CPU_LOOP_HINT);
    cl->ctx = clCreateContext(NULL, 1, &cl->device, NULL, NULL, &e);
    if (e != CL_SUCCESS) {
        rc = cl_fail(err, errlen, SIM_EDEVICE, "clCreateContext", e);
        goto fail;
    }
    cl->queue = clCreateCommandQueue(cl->ctx, cl->device, 0, &e);
    if (e != CL_SUCCESS) {
        rc = cl_fail(err, errlen, SIM_EDEVICE, "clCreateCommandQueue", e);
        goto fail_ctx;
    }
    cl->program = clCreateProgramWithSource(cl->ctx, sizeof srcs / sizeof srcs[0], srcs, NULL, &e);
    if (e != CL_SUCCESS) {
        rc = cl_fail(err, errlen, SIM_EDEVICE, "clCreateProgramWithSource", e);
        goto fail_queue;
    }
    e = clBuildProgram(cl->program, 1, &cl->device, "-cl-std=CL1.2", NULL, NULL);
    if (e != CL_SUCCESS) {
        if (err != NULL && errlen > 0) {
            int n = snprintf(err, errlen, "OpenCL: building the kernels failed (error %d):\n", (int)e);
            if (n > 0 && (size_t)n < errlen)
                build_log(cl, err + n, errlen - (size_t)n);
        }
        rc = SIM_EDEVICE;
        goto fail_program;
    }
    for (size_t i = 0; sim_kernel_at(i) != NULL; i++) {
        /* the table is small and fixed: an invariant, not input */
        SIM_ASSERT(i < MAX_KERNELS);
        cl->kernels[i] = clCreateKernel(cl->program, sim_kernel_at(i)->cl_entry, &e);
        if (e != CL_SUCCESS) {
            rc = cl_fail(err, errlen, SIM_EDEVICE, "clCreateKernel", e);
            goto fail_kernels;
        }
    }
    if ((rc = check_sizes(cl, err, errlen)) != 0)
        goto fail_kernels;
    *out = cl;
    return 0;

fail_kernels:
    for (size_t i = 0; i < MAX_KERNELS; i++)
        if (cl->kernels[i] != NULL)
            clReleaseKernel(cl->kernels[i]);
fail_program:
    clReleaseProgram(cl->program);
fail_queue:
    clReleaseCommandQueue(cl->queue);
fail_ctx:
    clReleaseContext(cl->ctx);
fail:
    free(cl);
    return rc;
}

void sim_cl_destroy(sim_cl *cl)
{
    if (cl == NULL)
        return;
    for (size_t i = 0; i < MAX_KERNELS; i++)
        if (cl->kernels[i] != NULL)
            clReleaseKernel(cl->kernels[i]);
    clReleaseProgram(cl->program);
    clReleaseCommandQueue(cl->queue);
    clReleaseContext(cl->ctx);
    free(cl);
}

const char *sim_cl_device(const sim_cl *cl)
{
    return cl->name;
}

static void release_mem(cl_mem m)
{
    if (m != NULL)
        clReleaseMemObject(m);
}

int sim_cl_run(sim_cl *cl, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    cl_kernel k = NULL;
    cl_int e;
    int rc = sim_range_check(first, count);
    if (rc != 0)
        return rc;
    for (size_t i = 0; sim_kernel_at(i) != NULL; i++)
        if (sim_kernel_at(i) == job->kernel)
            k = cl->kernels[i];
    if (k == NULL)
        return SIM_ENOKERNEL;
    for (int o = 0; o < job->nout; o++)
        sim_stats_init(&out[o], &job->layout[o]);
    if (count == 0)
        return 0;

    cl_ulong base = sim__group_base(first), end = first + count, cfirst = first, seed = job->seed;
    cl_ulong ngroups = (end - base + cl->group - 1) / cl->group;
    size_t global = ngroups < cl->work_items ? (size_t)ngroups : cl->work_items;
    size_t nacc = global * (size_t)job->nout;
    sim_acc *accs = malloc(nacc * sizeof *accs);
    if (accs == NULL)
        return SIM_ENOMEM;
    cl_mem bp = clCreateBuffer(cl->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
        job->kernel->params_size, job->params, &e);
    cl_mem bl = clCreateBuffer(cl->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
        sizeof(sim_layout) * (size_t)job->nout, (void *)job->layout, &e);
    cl_mem bo = clCreateBuffer(cl->ctx, CL_MEM_WRITE_ONLY, nacc * sizeof *accs, NULL, &e);
    if (bp == NULL || bl == NULL || bo == NULL) {
        rc = SIM_EDEVICE;
        goto out;
    }
    if (clSetKernelArg(k, 0, sizeof bp, &bp) != CL_SUCCESS ||
        clSetKernelArg(k, 1, sizeof bl, &bl) != CL_SUCCESS ||
        clSetKernelArg(k, 2, sizeof seed, &seed) != CL_SUCCESS ||
        clSetKernelArg(k, 3, sizeof base, &base) != CL_SUCCESS ||
        clSetKernelArg(k, 4, sizeof cfirst, &cfirst) != CL_SUCCESS ||
        clSetKernelArg(k, 5, sizeof end, &end) != CL_SUCCESS ||
        clSetKernelArg(k, 6, sizeof ngroups, &ngroups) != CL_SUCCESS ||
        clSetKernelArg(k, 7, sizeof bo, &bo) != CL_SUCCESS ||
        clEnqueueNDRangeKernel(cl->queue, k, 1, NULL, &global, cl->local, 0, NULL, NULL) != CL_SUCCESS ||
        clEnqueueReadBuffer(cl->queue, bo, CL_TRUE, 0, nacc * sizeof *accs, accs, 0, NULL, NULL) !=
            CL_SUCCESS) {
        rc = SIM_EDEVICE;
        goto out;
    }
    for (size_t w = 0; w < global; w++)
        for (int o = 0; o < job->nout; o++)
            sim_acc_merge(&out[o].acc, &accs[w * (size_t)job->nout + (size_t)o]);
out:
    release_mem(bo);
    release_mem(bl);
    release_mem(bp);
    free(accs);
    return rc;
}

unsigned sim_cl_group_width(const sim_cl *cl)
{
    return cl->group;
}

int sim_cl_acc_group(sim_cl *cl, const sim_layout *layout, int nout, const double *values, int lo, int hi,
    sim_acc *acc)
{
    const size_t nv = (size_t)nout * cl->group;
    cl_int e;
    int rc = 0;
    if (nout < 1 || nout > SIM_MAX_OUT || lo < 0 || hi <= lo || hi > (int)cl->group)
        return SIM_EINVAL;
    cl_kernel k = clCreateKernel(cl->program, "sim_acc_group", &e);
    if (e != CL_SUCCESS)
        return SIM_EDEVICE;
    cl_mem bv = clCreateBuffer(cl->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nv * sizeof *values,
        (void *)values, &e);
    cl_mem bl = clCreateBuffer(cl->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)nout * sizeof *layout,
        (void *)layout, &e);
    cl_mem bo = clCreateBuffer(cl->ctx, CL_MEM_WRITE_ONLY, (size_t)nout * sizeof *acc, NULL, &e);
    size_t one = 1;
    if (bv == NULL || bl == NULL || bo == NULL || clSetKernelArg(k, 0, sizeof bv, &bv) != CL_SUCCESS ||
        clSetKernelArg(k, 1, sizeof bl, &bl) != CL_SUCCESS || clSetKernelArg(k, 2, sizeof nout, &nout) != CL_SUCCESS ||
        clSetKernelArg(k, 3, sizeof lo, &lo) != CL_SUCCESS || clSetKernelArg(k, 4, sizeof hi, &hi) != CL_SUCCESS ||
        clSetKernelArg(k, 5, sizeof bo, &bo) != CL_SUCCESS ||
        clEnqueueNDRangeKernel(cl->queue, k, 1, NULL, &one, &one, 0, NULL, NULL) != CL_SUCCESS ||
        clEnqueueReadBuffer(cl->queue, bo, CL_TRUE, 0, (size_t)nout * sizeof *acc, acc, 0, NULL, NULL) !=
            CL_SUCCESS)
        rc = SIM_EDEVICE;
    release_mem(bo);
    release_mem(bl);
    release_mem(bv);
    clReleaseKernel(k);
    return rc;
}
