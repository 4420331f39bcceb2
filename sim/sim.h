/*
 * sim.h — the simulation kernels' public interface.
 *
 * A job is a kernel, its parsed parameters and a 64-bit seed. Running a job
 * over an item range gives one sim_stats per kernel output; the stats of
 * disjoint ranges merge into the stats of their union, and the result bytes
 * depend only on the items, never on the backend (CPU, OpenCL, CUDA,
 * WebAssembly) or on how the range was split. docs/kernels.md describes
 * the kernels, the random number layout and the determinism rules.
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "sim/dev.h"

/* ---- errors ------------------------------------------------------------------ */

/* The kernels' codes, SIM_E*, are in base/err.h (sf_strerror()). */

/* ---- statistics ---------------------------------------------------------------- */

/* Mergeable, order-independent statistics of one output: count, sum, sum
 * of squares (fixed point, 192-bit integers), min, max and a 32-bin
 * histogram, with the layout that says how values became integers. A plain
 * value: copy it, compare it, send it (sim_stats_encode). Treat the fields
 * as read-only outside sim/. */
typedef struct sim_stats {
    sim_layout layout;
    sim_acc acc;
} sim_stats;

/* The largest encoding sim_stats_encode writes. */
#define SIM_STATS_MAX_ENCODED 512

/* Makes a layout for values of magnitude up to about `bound` (larger ones
 * are clamped and counted as saturated) with a histogram over
 * [hist_lo, hist_hi). Returns SIM_EINVAL when bound is not a positive
 * finite number or the range is empty. */
int sim_layout_make(sim_layout *out, double bound, double hist_lo, double hist_hi);

/* Empty statistics with the given layout. */
void sim_stats_init(sim_stats *s, const sim_layout *layout);

/* Adds one value. */
void sim_stats_add(sim_stats *s, double x);

/* Adds src into dst. Returns SIM_ELAYOUT (dst unchanged) when the layouts
 * differ. */
int sim_stats_merge(sim_stats *dst, const sim_stats *src);

/* True when both hold the same layout and the same integers. */
bool sim_stats_equal(const sim_stats *a, const sim_stats *b);

uint64_t sim_stats_count(const sim_stats *s);
/* Values clamped because they exceeded the layout's range (or were NaN). */
uint64_t sim_stats_saturated(const sim_stats *s);
/* Mean, sample variance and standard error of the mean of the truncated
 * values; NaN when there are too few values. */
double sim_stats_mean(const sim_stats *s);
double sim_stats_variance(const sim_stats *s);
double sim_stats_stderr(const sim_stats *s);
double sim_stats_min(const sim_stats *s);
double sim_stats_max(const sim_stats *s);
/* Histogram slot i: 0 below hist_lo, 1..SIM_HIST_BINS the bins, then above. */
uint64_t sim_stats_hist(const sim_stats *s, int slot);

/* Writes the canonical msgpack encoding of s into buf (cap bytes, at most
 * SIM_STATS_MAX_ENCODED needed) and its length into *len. Returns
 * SIM_ENOSPC when cap is too small. */
int sim_stats_encode(const sim_stats *s, void *buf, size_t cap, size_t *len);

/* Parses an encoding made by sim_stats_encode. Untrusted input: every size
 * and type is checked; returns SIM_EFORMAT (s unchanged) on anything else. */
int sim_stats_decode(sim_stats *s, const void *buf, size_t len);

/* ---- kernels and jobs ----------------------------------------------------------- */

typedef struct sim_kernel sim_kernel;
typedef struct sim_job sim_job;

/* The registered kernels, in table order; NULL past the end. */
const sim_kernel *sim_kernel_at(size_t i);
/* The kernel called name, or NULL. */
const sim_kernel *sim_kernel_find(const char *name);
const char *sim_kernel_name(const sim_kernel *k);

/* Writes every kernel's description as one JSON array into buf (cap
 * bytes, NUL-terminated): each kernel's name, a line of help and its
 * parameters with their type, range, default, allowed values and help,
 * from the same tables the parsers check against (docs/api.md,
 * GET /api/kernels). *len gets the length the whole text needs, without
 * the NUL, also when it did not fit: then it returns SIM_ENOSPC. */
int sim_kernels_json(char *buf, size_t cap, size_t *len);

/* The most items one run may cover, and the end of the item space. */
#define SIM_MAX_ITEMS (UINT64_C(1) << 48)
#define SIM_ITEM_END (UINT64_C(1) << 62)

/* Parses a kernel's parameters (a msgpack map) and makes a job with the
 * given seed. On SIM_EPARAM or SIM_ENOKERNEL, err (errlen bytes, may be
 * NULL) gets a message naming the field, the problem and the allowed range.
 * The caller owns *out and frees it with sim_job_destroy. */
int sim_job_create(sim_job **out, const char *kernel, const void *params, size_t len,
    uint64_t seed, char *err, size_t errlen);
void sim_job_destroy(sim_job *job);

const sim_kernel *sim_job_kernel(const sim_job *job);
uint64_t sim_job_seed(const sim_job *job);
/* Number of outputs (1..SIM_MAX_OUT) and their names ("price", "delta", ...). */
int sim_job_nout(const sim_job *job);
const char *sim_job_output_name(const sim_job *job, int o);
const sim_layout *sim_job_layout(const sim_job *job, int o);
/* Simulated paths or iterations per item (2 for antithetic pairs). */
int sim_job_paths_per_item(const sim_job *job);
/* The outputs' closed-form values where the job has one, to check
 * estimates against: bit o of the result is set where ref[o] holds output
 * o's. option: a European option's price and Greeks (Black–Scholes) and a
 * geometric Asian's price and Greeks; 0 for every other job. */
unsigned sim_job_reference(const sim_job *job, double ref[SIM_MAX_OUT]);

/* Checks that [first, first + count) is a valid range to run. */
int sim_range_check(uint64_t first, uint64_t count);

/* Runs items [first, first + count) on the calling thread and writes one
 * sim_stats per output into out[0 .. nout). Returns SIM_ERANGE for an
 * invalid range. */
int sim_run_cpu(const sim_job *job, uint64_t first, uint64_t count, sim_stats *out);

/* ---- device backends ---------------------------------------------------------- */

typedef struct sim_cl sim_cl;

/* Opens the first OpenCL device (or the one numbered by the environment
 * variable SIMFARM_OPENCL_DEVICE, counting across platforms) and builds
 * every kernel's device source for it. On failure err gets the reason
 * (build logs included). SIM_ENOBACKEND in builds without OpenCL. */
int sim_cl_create(sim_cl **out, char *err, size_t errlen);
/* The same for device number `device`, counting across platforms in the
 * order the ICD loader lists them. */
int sim_cl_open(sim_cl **out, unsigned device, char *err, size_t errlen);

/* OpenCL devices counted of each platform, in sim_cl_open's numbering and
 * wherever devices are listed for it. */
enum { SIM_CL_PLATFORM_DEVICES = 64 };
void sim_cl_destroy(sim_cl *cl);
/* The device's name. */
const char *sim_cl_device(const sim_cl *cl);
/* Same contract as sim_run_cpu, computed on the OpenCL device. */
int sim_cl_run(sim_cl *cl, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out);
/* Items per group in the device's program (SIM_W there). */
unsigned sim_cl_group_width(const sim_cl *cl);
/* For tests: the device program's sim_acc_lanes2 on one group, items
 * [lo, hi) of its lanes, into acc[0 .. nout) from zero; values[o * width
 * + lane] is output o of a lane, width the group width. SIM_EINVAL for a
 * bad range or count, SIM_EDEVICE when the device fails. */
int sim_cl_acc_group(sim_cl *cl, const sim_layout *layout, int nout, const double *values, int lo, int hi,
    sim_acc *acc);

typedef struct sim_cuda sim_cuda;

/* Opens CUDA device 0 through the driver library (libcuda.so.1, loaded at
 * run time) and loads the kernels compiled by nvcc into this program.
 * SIM_ENOBACKEND when the program was built without nvcc; SIM_ENODEVICE
 * when no driver or device is present. */
int sim_cuda_create(sim_cuda **out, char *err, size_t errlen);
/* The same for device number `device` (the driver's ordinal). */
int sim_cuda_open(sim_cuda **out, unsigned device, char *err, size_t errlen);
void sim_cuda_destroy(sim_cuda *cu);
const char *sim_cuda_device(const sim_cuda *cu);
/* Threads per launch at most (32768, or SIMFARM_CUDA_THREADS). */
unsigned sim_cuda_launch_threads(const sim_cuda *cu);
int sim_cuda_run(sim_cuda *cu, const sim_job *job, uint64_t first, uint64_t count, sim_stats *out);

#endif /* SIM_SIM_H */
