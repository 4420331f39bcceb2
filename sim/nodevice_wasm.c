/*
 * backend_wasm.c — the WebAssembly build has no OpenCL or CUDA: their
 * entry points report SIM_ENOBACKEND (the CPU backend is the one that runs
 * in a browser or under node).
 */
#include <stdio.h>

#include "sim/sim.h"

static int none(char *err, size_t errlen, const char *what)
{
    if (err != NULL)
        snprintf(err, errlen, "%s is not available in the WebAssembly build", what);
    return SIM_ENOBACKEND;
}

int sim_cl_create(sim_cl **out, char *err, size_t errlen)
{
    (void)out;
    return none(err, errlen, "OpenCL");
}

int sim_cl_open(sim_cl **out, unsigned device, char *err, size_t errlen)
{
    (void)out, (void)device;
    return none(err, errlen, "OpenCL");
}

void sim_cl_destroy(sim_cl *cl)
{
    (void)cl;
}

const char *sim_cl_device(const sim_cl *cl)
{
    (void)cl;
    return "";
}

int sim_cl_run(sim_cl *cl, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    (void)cl, (void)job, (void)first, (void)count, (void)out;
    return SIM_ENOBACKEND;
}

unsigned sim_cl_group_width(const sim_cl *cl)
{
    (void)cl;
    return 0;
}

int sim_cl_acc_group(sim_cl *cl, const sim_layout *layout, int nout, const double *values, int lo, int hi,
    sim_acc *acc)
{
    (void)cl, (void)layout, (void)nout, (void)values, (void)lo, (void)hi, (void)acc;
    return SIM_ENOBACKEND;
}

int sim_cuda_create(sim_cuda **out, char *err, size_t errlen)
{
    (void)out;
    return none(err, errlen, "CUDA");
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
