/*
 * test_opencl.c — an OpenCL device is reachable through the ICD loader (pocl
 * on machines without a GPU) and runs a kernel with FP contraction off,
 * giving the same bits as the host for a*b+c.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <criterion/criterion.h>
#include <string.h>

static const char *src =
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "__kernel void mul_add(__global const double *a, __global const double *b,\n"
    "                  __global double *out) {\n"
    "    size_t i = get_global_id(0);\n"
    "    out[i] = a[i] * b[i] + a[i];\n"
    "}\n";

Test(opencl, kernel_matches_host_bits, .timeout = 60)
{
    enum { N = 1024 };
    static double a[N], b[N], out[N];
    cl_platform_id plat;
    cl_device_id dev;
    cl_uint n = 0;
    cl_int err;

    cr_assert_eq(clGetPlatformIDs(1, &plat, &n), CL_SUCCESS, "no OpenCL platform (is pocl installed?)");
    cr_assert_geq(n, 1);
    cr_assert_eq(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL), CL_SUCCESS);

    for (int i = 0; i < N; i++) {
        a[i] = 1.0 / (i + 3);
        b[i] = 1.0 + i * 1e-3;
    }
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        cr_assert_fail("clBuildProgram: %d\n%s", err, log);
    }
    cl_kernel k = clCreateKernel(prog, "mul_add", &err);
    cr_assert_eq(err, CL_SUCCESS);

    cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof a, a, &err);
    cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof b, b, &err);
    cl_mem dout = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof out, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    clSetKernelArg(k, 0, sizeof da, &da);
    clSetKernelArg(k, 1, sizeof db, &db);
    clSetKernelArg(k, 2, sizeof dout, &dout);
    size_t global = N;
    cr_assert_eq(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL), CL_SUCCESS);
    cr_assert_eq(clEnqueueReadBuffer(q, dout, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL), CL_SUCCESS);

    for (int i = 0; i < N; i++) {
        double want = a[i] * b[i] + a[i]; /* host build uses -ffp-contract=off */
        cr_assert(memcmp(&out[i], &want, sizeof want) == 0,
            "item %d: device %a, host %a", i, out[i], want);
    }

    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dout);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
}
