/*
 * cuda_native.c — the CUDA backend (native builds only). When make finds nvcc
 * it compiles sim/kernels.cu into a fatbin and defines SIM_CUDA_FATBIN to
 * its path; the fatbin is embedded here and loaded through the CUDA driver
 * API, with libcuda.so.1 opened at run time, so the program links against
 * nothing from CUDA and runs (reporting SIM_ENODEVICE) where no driver is
 * installed. Without nvcc every call reports SIM_ENOBACKEND.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/combat_dev.h"
#include "sim/option_dev.h"
#include "sim/sim_int.h"

int sim_cuda_create(sim_cuda **out, char *err, size_t errlen)
{
    return sim_cuda_open(out, 0, err, errlen);
}

#ifndef SIM_CUDA_FATBIN

int sim_cuda_open(sim_cuda **out, unsigned device, char *err, size_t errlen)
{
    (void)out, (void)device;
    if (err != NULL)
        snprintf(err, errlen, "CUDA: this program was built without nvcc");
    return SIM_ENOBACKEND;
}

void sim_cuda_destroy(sim_cuda *cu)
{
    (void)cu;
}

const char *sim_cuda_device(const sim_cuda *cu)
{
    (void)cu;
    return "";
}

unsigned sim_cuda_launch_threads(const sim_cuda *cu)
{
    (void)cu;
    return 0;
}

int sim_cuda_run(sim_cuda *cu, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    (void)cu, (void)job, (void)first, (void)count, (void)out;
    return SIM_ENOBACKEND;
}

#else /* SIM_CUDA_FATBIN */

#include <dlfcn.h>

__asm__(".section .rodata\n"
        ".balign 64\n"
        "sim_cuda_fatbin:\n"
        ".incbin \"" SIM_CUDA_FATBIN "\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char sim_cuda_fatbin[];

/* The few driver API entry points used, declared here so that no CUDA
 * header is needed (types as in cuda.h: handles are pointers, CUdevice an
 * int, CUdeviceptr an unsigned 64-bit integer). */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;

struct driver {
    void *lib;
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuCtxCreate)(CUcontext *, unsigned, CUdevice);
    CUresult (*cuCtxDestroy)(CUcontext);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
        unsigned, unsigned, void *, void **, void **);
    CUresult (*cuCtxSynchronize)(void);
};

#define MAX_KERNELS 8
#define THREADS 128 /* per block */
/* Threads per launch, at most: each takes every launch_threads-th group,
 * and the host merges their accumulators. SIMFARM_CUDA_THREADS sets it (a
 * multiple of THREADS up to 2^20), for measuring other launch sizes. */
#define LAUNCH_THREADS 32768
#define MAX_LAUNCH_THREADS (1u << 20)
/* A module file (SIMFARM_CUDA_MODULE) is at most this big. */
#define MAX_MODULE_BYTES (64u << 20)

struct sim_cuda {
    struct driver d;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn[MAX_KERNELS];
    unsigned launch_threads;
    char name[256];
};

static int load_driver(struct driver *d, char *err, size_t errlen)
{
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d->lib == NULL) {
        if (err != NULL)
            snprintf(err, errlen, "CUDA: no driver (libcuda.so.1: %s)", dlerror());
        return SIM_ENODEVICE;
    }
#define SYM(field, name)                                                  \
    do {                                                                  \
        void *p_ = dlsym(d->lib, name);                                   \
        if (p_ == NULL) {                                                 \
            if (err != NULL)                                              \
                snprintf(err, errlen, "CUDA: driver lacks %s", name);     \
            dlclose(d->lib);                                              \
            return SIM_ENODEVICE;                                         \
        }                                                                 \
        memcpy(&d->field, &p_, sizeof p_);                                \
    } while (0)
    SYM(cuInit, "cuInit");
    SYM(cuDriverGetVersion, "cuDriverGetVersion");
    SYM(cuDeviceGet, "cuDeviceGet");
    SYM(cuDeviceGetName, "cuDeviceGetName");
    SYM(cuCtxCreate, "cuCtxCreate_v2");
    SYM(cuCtxDestroy, "cuCtxDestroy_v2");
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
    SYM(cuModuleLoadData, "cuModuleLoadData");
    SYM(cuModuleUnload, "cuModuleUnload");
    SYM(cuModuleGetFunction, "cuModuleGetFunction");
    SYM(cuMemAlloc, "cuMemAlloc_v2");
    SYM(cuMemFree, "cuMemFree_v2");
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(cuLaunchKernel, "cuLaunchKernel");
    SYM(cuCtxSynchronize, "cuCtxSynchronize");
#undef SYM
    return 0;
}

static int cu_fail(char *err, size_t errlen, int rc, const char *what, CUresult r)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "CUDA: %s failed (CUresult %d)", what, r);
    return rc;
}

/* Runs sim_sizes_cuda and compares the shared structs' sizes with ours. */
static int check_sizes(sim_cuda *cu, char *err, size_t errlen)
{
    struct driver *d = &cu->d;
    CUfunction f;
    CUdeviceptr buf;
    uint64_t got[4] = { 0 };
    const uint64_t want[4] = { sizeof(sim_acc), sizeof(sim_layout), sizeof(sim_option_params),
        sizeof(sim_combat_params) };
    CUresult r;
    if ((r = d->cuModuleGetFunction(&f, cu->mod, "sim_sizes_cuda")) != 0)
        return cu_fail(err, errlen, SIM_EDEVICE, "cuModuleGetFunction(sim_sizes_cuda)", r);
    if ((r = d->cuMemAlloc(&buf, sizeof got)) != 0)
        return cu_fail(err, errlen, SIM_EDEVICE, "cuMemAlloc", r);
    void *args[] = { &buf };
    if ((r = d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL)) == 0 &&
        (r = d->cuCtxSynchronize()) == 0)
        r = d->cuMemcpyDtoH(got, buf, sizeof got);
    d->cuMemFree(buf);
    if (r != 0)
        return cu_fail(err, errlen, SIM_EDEVICE, "running sim_sizes_cuda", r);
    if (memcmp(got, want, sizeof got) != 0) {
        if (err != NULL)
            snprintf(err, errlen, "CUDA: struct sizes differ from the host's");
        return SIM_EDEVICE;
    }
    return 0;
}

/* The module SIMFARM_CUDA_MODULE names, read whole into *out (NUL-ended,
 * as PTX text must be; the caller frees it), or *out NULL when it is not
 * set: then the embedded fatbin is loaded. It is for a driver older than
 * the toolkit that built this program, which cannot load its fatbin: the
 * same sim/kernels.cu built with an nvcc the driver accepts (a fatbin,
 * cubin or PTX), with -fmad=false as the Makefile builds it. */
static int read_module(char **out, char *err, size_t errlen)
{
    const char *path = getenv("SIMFARM_CUDA_MODULE");
    *out = NULL;
    if (path == NULL)
        return 0;
    FILE *f = fopen(path, "rb");
    char *buf = f != NULL ? malloc(MAX_MODULE_BYTES + 1) : NULL;
    size_t n = buf != NULL ? fread(buf, 1, MAX_MODULE_BYTES + 1, f) : 0;
    const char *why = f == NULL || (buf != NULL && ferror(f)) ? strerror(errno) : buf == NULL ? "out of memory" :
        n == 0 ? "empty" : n > MAX_MODULE_BYTES ? "larger than 64 MiB" : NULL;
    int bad = why != NULL;
    if (bad && err != NULL)
        snprintf(err, errlen, "CUDA: SIMFARM_CUDA_MODULE: cannot read %s: %s", path, why);
    if (f != NULL)
        fclose(f);
    if (bad) {
        free(buf);
        return SIM_EINVAL;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

int sim_cuda_open(sim_cuda **out, unsigned device, char *err, size_t errlen)
{
    CUdevice dev;
    CUresult r;
    int rc;
    char *module = NULL;
    const char *lt = getenv("SIMFARM_CUDA_THREADS");
    char *end = NULL;
    unsigned long n = lt != NULL ? strtoul(lt, &end, 10) : LAUNCH_THREADS;
    int digits = lt == NULL || (*lt >= '0' && *lt <= '9' && *end == '\0');
    if (!digits || n == 0 || n % THREADS != 0 || n > MAX_LAUNCH_THREADS) {
        if (err != NULL)
            snprintf(err, errlen, "CUDA: SIMFARM_CUDA_THREADS must be a multiple of %d up to %u, got '%s'",
                THREADS, MAX_LAUNCH_THREADS, lt);
        return SIM_EINVAL;
    }
    if ((rc = read_module(&module, err, errlen)) != 0)
        return rc;
    sim_cuda *cu = calloc(1, sizeof *cu);
    if (cu == NULL) {
        free(module);
        return SIM_ENOMEM;
    }
    cu->launch_threads = (unsigned)n;
    if ((rc = load_driver(&cu->d, err, errlen)) != 0)
        goto fail;
    struct driver *d = &cu->d;
    if ((r = d->cuInit(0)) != 0 || (r = d->cuDeviceGet(&dev, (int)device)) != 0) {
        rc = cu_fail(err, errlen, SIM_ENODEVICE, "cuInit/cuDeviceGet (no usable device)", r);
        goto fail_lib;
    }
    d->cuDeviceGetName(cu->name, (int)sizeof cu->name - 1, dev);
    if ((r = d->cuCtxCreate(&cu->ctx, 0, dev)) != 0) {
        rc = cu_fail(err, errlen, SIM_EDEVICE, "cuCtxCreate", r);
        goto fail_lib;
    }
    if ((r = d->cuModuleLoadData(&cu->mod, module != NULL ? module : sim_cuda_fatbin)) != 0) {
        int v = 0;
        d->cuDriverGetVersion(&v);
        rc = SIM_EDEVICE;
        if (err != NULL && module != NULL)
            snprintf(err, errlen, "CUDA: cuModuleLoadData failed (CUresult %d) on SIMFARM_CUDA_MODULE %s "
                "(the driver supports CUDA %d.%d)", r, getenv("SIMFARM_CUDA_MODULE"), v / 1000, v % 1000 / 10);
        else if (err != NULL)
            snprintf(err, errlen, "CUDA: cuModuleLoadData failed (CUresult %d): the kernels were built with "
                "CUDA %s (%s), the driver supports CUDA %d.%d; update the driver, or build sim/kernels.cu with an "
                "nvcc it accepts and name the file in SIMFARM_CUDA_MODULE (docs/kernels.md)",
                r, SIM_CUDA_TOOLKIT, SIM_CUDA_ARCH, v / 1000, v % 1000 / 10);
        goto fail_ctx;
    }
    free(module);
    module = NULL;
    for (size_t i = 0; sim_kernel_at(i) != NULL; i++) {
        SIM_ASSERT(i < MAX_KERNELS); /* the kernel table is small and fixed */
        if ((r = d->cuModuleGetFunction(&cu->fn[i], cu->mod, sim_kernel_at(i)->cuda_entry)) != 0) {
            rc = cu_fail(err, errlen, SIM_EDEVICE, "cuModuleGetFunction", r);
            goto fail_mod;
        }
    }
    if ((rc = check_sizes(cu, err, errlen)) != 0)
        goto fail_mod;
    *out = cu;
    return 0;

fail_mod:
    d->cuModuleUnload(cu->mod);
fail_ctx:
    d->cuCtxDestroy(cu->ctx);
fail_lib:
    dlclose(cu->d.lib);
fail:
    free(cu);
    free(module);
    return rc;
}

void sim_cuda_destroy(sim_cuda *cu)
{
    if (cu == NULL)
        return;
    cu->d.cuModuleUnload(cu->mod);
    cu->d.cuCtxDestroy(cu->ctx);
    dlclose(cu->d.lib);
    free(cu);
}

const char *sim_cuda_device(const sim_cuda *cu)
{
    return cu->name;
}

unsigned sim_cuda_launch_threads(const sim_cuda *cu)
{
    return cu->launch_threads;
}

int sim_cuda_run(sim_cuda *cu, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    struct driver *d = &cu->d;
    CUfunction f = NULL;
    CUdeviceptr bp = 0, bl = 0, bo = 0;
    int rc = sim_range_check(first, count);
    if (rc != 0)
        return rc;
    /* The context is current on the thread that created it; a caller on
     * another thread (a node's worker on the pool) makes it current here. */
    if (d->cuCtxSetCurrent(cu->ctx) != 0)
        return SIM_EDEVICE;
    for (size_t i = 0; sim_kernel_at(i) != NULL; i++)
        if (sim_kernel_at(i) == job->kernel)
            f = cu->fn[i];
    if (f == NULL)
        return SIM_ENOKERNEL;
    for (int o = 0; o < job->nout; o++)
        sim_stats_init(&out[o], &job->layout[o]);
    if (count == 0)
        return 0;

    uint64_t base = sim__group_base(first), end = first + count, seed = job->seed, cfirst = first;
    uint64_t ngroups = (end - base + 3) / 4; /* SIM_W is 4 in kernels.cu */
    uint64_t threads = ngroups < cu->launch_threads ? ngroups : cu->launch_threads;
    unsigned blocks = (unsigned)((threads + THREADS - 1) / THREADS);
    size_t nacc = (size_t)blocks * THREADS * (size_t)job->nout;
    sim_acc *accs = malloc(nacc * sizeof *accs);
    if (accs == NULL)
        return SIM_ENOMEM;
    rc = SIM_EDEVICE;
    if (d->cuMemAlloc(&bp, job->kernel->params_size) != 0 ||
        d->cuMemAlloc(&bl, sizeof(sim_layout) * (size_t)job->nout) != 0 ||
        d->cuMemAlloc(&bo, nacc * sizeof *accs) != 0 ||
        d->cuMemcpyHtoD(bp, job->params, job->kernel->params_size) != 0 ||
        d->cuMemcpyHtoD(bl, job->layout, sizeof(sim_layout) * (size_t)job->nout) != 0)
        goto out;
    void *args[] = { &bp, &bl, &seed, &base, &cfirst, &end, &ngroups, &bo };
    if (d->cuLaunchKernel(f, blocks, 1, 1, THREADS, 1, 1, 0, NULL, args, NULL) != 0 ||
        d->cuCtxSynchronize() != 0 || d->cuMemcpyDtoH(accs, bo, nacc * sizeof *accs) != 0)
        goto out;
    /* Threads past ngroups wrote empty accumulators: merging them is a no-op. */
    for (size_t w = 0; w < (size_t)blocks * THREADS; w++)
        for (int o = 0; o < job->nout; o++)
            sim_acc_merge(&out[o].acc, &accs[w * (size_t)job->nout + (size_t)o]);
    rc = 0;
out:
    if (bo)
        d->cuMemFree(bo);
    if (bl)
        d->cuMemFree(bl);
    if (bp)
        d->cuMemFree(bp);
    free(accs);
    return rc;
}

#endif /* SIM_CUDA_FATBIN */
