/*
 * devices.c — see devices.h.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include "node-native/devices.h"
#include "sim/sim.h"

#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

size_t nd_devices_opencl(nd_device *out, size_t cap)
{
    cl_platform_id plats[8];
    cl_uint nplat = 0;
    size_t n = 0;
    unsigned number = 0;
    if (clGetPlatformIDs(8, plats, &nplat) != CL_SUCCESS)
        return 0;
    for (cl_uint p = 0; p < nplat && p < 8; p++) {
        cl_device_id devs[SIM_CL_PLATFORM_DEVICES];
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, SIM_CL_PLATFORM_DEVICES, devs, &ndev) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < ndev && d < SIM_CL_PLATFORM_DEVICES; d++, number++) {
            if (n++ >= cap)
                continue;
            nd_device *v = &out[n - 1];
            memset(v, 0, sizeof *v);
            v->kind = PR_BACKEND_OPENCL;
            v->number = number;
            cl_device_type type = 0;
            cl_ulong mem = 0;
            cl_uint units = 0;
            clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof v->name - 1, v->name, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_VENDOR, sizeof v->vendor - 1, v->vendor, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
            v->gpu = (type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)) != 0;
            v->memory = mem;
            v->units = units;
        }
    }
    return n;
}

/* The driver API entry points the listing needs, with cuda.h's types (a
 * CUdevice is an int, a result an int, 0 for success). */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_name_fn)(char *, int, int);
typedef int (*cu_mem_fn)(size_t *, int);
typedef int (*cu_attr_fn)(int *, int, int);

enum { CU_ATTR_MULTIPROCESSOR_COUNT = 16 };

size_t nd_devices_cuda(nd_device *out, size_t cap, sf_error *err)
{
    sf_fail(err, SIM_ENODEVICE, "no CUDA device");
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        sf_fail(err, SIM_ENODEVICE, "CUDA: no driver (libcuda.so.1: %s)", dlerror());
        return 0;
    }
    cu_init_fn init;
    cu_count_fn count;
    cu_get_fn get;
    cu_name_fn name;
    cu_mem_fn mem;
    cu_attr_fn attr;
    /* dlsym gives object pointers; POSIX makes them callable. */
    void *p[6] = { dlsym(lib, "cuInit"), dlsym(lib, "cuDeviceGetCount"), dlsym(lib, "cuDeviceGet"),
        dlsym(lib, "cuDeviceGetName"), dlsym(lib, "cuDeviceTotalMem_v2"), dlsym(lib, "cuDeviceGetAttribute") };
    memcpy(&init, &p[0], sizeof init);
    memcpy(&count, &p[1], sizeof count);
    memcpy(&get, &p[2], sizeof get);
    memcpy(&name, &p[3], sizeof name);
    memcpy(&mem, &p[4], sizeof mem);
    memcpy(&attr, &p[5], sizeof attr);
    size_t n = 0;
    int ndev = 0, r;
    if (p[0] == NULL || p[1] == NULL || p[2] == NULL || p[3] == NULL || p[4] == NULL || p[5] == NULL) {
        sf_fail(err, SIM_EDEVICE, "CUDA: the driver lacks the device API");
    } else if ((r = init(0)) != 0 || (r = count(&ndev)) != 0) {
        sf_fail(err, SIM_EDEVICE, "CUDA: cuInit/cuDeviceGetCount failed (CUresult %d)", r);
    } else {
        for (int i = 0; i < ndev; i++) {
            int dev, units = 0;
            size_t bytes = 0;
            if (get(&dev, i) != 0 || n++ >= cap)
                continue;
            nd_device *v = &out[n - 1];
            memset(v, 0, sizeof *v);
            v->kind = PR_BACKEND_CUDA;
            v->number = (unsigned)i;
            v->gpu = true;
            snprintf(v->vendor, sizeof v->vendor, "NVIDIA");
            if (name(v->name, (int)sizeof v->name - 1, dev) != 0)
                snprintf(v->name, sizeof v->name, "CUDA device %d", i);
            if (mem(&bytes, dev) == 0)
                v->memory = bytes;
            if (attr(&units, CU_ATTR_MULTIPROCESSOR_COUNT, dev) == 0 && units > 0)
                v->units = (unsigned)units;
        }
    }
    dlclose(lib);
    if (n > 0)
        sf_error_clear(err);
    return n;
}
