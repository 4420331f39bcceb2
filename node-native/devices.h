/*
 * devices.h — the compute devices a native node finds: OpenCL devices
 * through the ICD loader (every platform), and CUDA devices through the
 * driver library (libcuda.so.1, opened at run time) when one is installed.
 */
#ifndef SIMFARM_NODE_DEVICES_H
#define SIMFARM_NODE_DEVICES_H

#include "base/err.h"
#include "proto/msg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Device workers a node runs at most. */
enum { ND_MAX_DEVICES = 16 };

typedef struct nd_device {
    pr_backend_kind kind;     /* PR_BACKEND_OPENCL or PR_BACKEND_CUDA */
    unsigned number;          /* OpenCL: counted across platforms (sim_cl_open); CUDA: the
                                 driver's ordinal (sim_cuda_open) */
    bool gpu;                 /* a GPU or accelerator, not a CPU device */
    char name[128];
    char vendor[64];
    uint64_t memory;          /* bytes of global memory; 0 if unknown */
    unsigned units;           /* compute units */
} nd_device;

/* Lists the OpenCL devices into out (at most cap); returns how many there
 * are, more than cap when some did not fit. */
size_t nd_devices_opencl(nd_device *out, size_t cap);

/* Lists the CUDA devices into out (at most cap); returns how many there
 * are, more than cap when some did not fit. None without a driver or a
 * device: then *err says why (SIM_ENODEVICE, or SIM_EDEVICE for a driver
 * that fails); cleared when there are some. */
size_t nd_devices_cuda(nd_device *out, size_t cap, sf_error *err);

#endif
