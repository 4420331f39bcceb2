/*
 * devices.h — the compute devices a native node finds: OpenCL devices
 * through the ICD loader (every platform), and the CUDA device when the
 * program was built with nvcc and a driver is present.
 */
#ifndef SIMFARM_NODE_DEVICES_H
#define SIMFARM_NODE_DEVICES_H

#include "proto/msg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { ND_MAX_DEVICES = 16 };

typedef struct nd_device {
    pr_backend_kind kind;     /* PR_BACKEND_OPENCL or PR_BACKEND_CUDA */
    unsigned number;          /* OpenCL: counted across platforms (sim_cl_open) */
    bool gpu;                 /* a GPU or accelerator, not a CPU device */
    char name[128];
    char vendor[64];
    uint64_t memory;          /* bytes of global memory; 0 if unknown */
    unsigned units;           /* compute units */
} nd_device;

/* Lists the OpenCL devices into out (at most cap); returns how many. */
size_t nd_devices_opencl(nd_device *out, size_t cap);

#endif
