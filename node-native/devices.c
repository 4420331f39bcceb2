/*
 * devices.c — see devices.h.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include "node-native/devices.h"

#include <CL/cl.h>
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
        cl_device_id devs[16];
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &ndev) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < ndev && d < 16; d++, number++) {
            if (n == cap)
                return n;
            nd_device *v = &out[n++];
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
