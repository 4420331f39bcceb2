/*
 * sim_int.h — shared inside sim/ only: the kernel table entry, the job
 * struct and the parameter-reading helpers the kernels' parsers use.
 */
#ifndef SIM_SIM_INT_H
#define SIM_SIM_INT_H

#include <msgpack.h>

#include "sim/sim.h"

/* Reading one msgpack map of parameters; errors go to err with the field's
 * full name (prefix + field). */
typedef struct sim__pctx {
    const msgpack_object *map;
    const char *prefix; /* "" or e.g. "abilities[2]." */
    char *err;
    size_t errlen;
} sim__pctx;

/* Sets the error message (printf-style) and returns SIM_EPARAM. */
int sim__param_fail(const sim__pctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The value of field, or NULL when absent. */
const msgpack_object *sim__param_get(const sim__pctx *c, const char *field);

/* Rejects fields not in the NULL-terminated list, naming the allowed ones. */
int sim__param_known(const sim__pctx *c, const char *const *fields);

/* A number in [lo, hi] (or (lo, hi] when lo_open). Absent: dflt, or an
 * error when required. */
int sim__param_num(const sim__pctx *c, const char *field, double *out, double lo, bool lo_open,
    double hi, bool required, double dflt);

/* An integer in [lo, hi]. */
int sim__param_int(const sim__pctx *c, const char *field, int64_t *out, int64_t lo, int64_t hi,
    bool required, int64_t dflt);

int sim__param_bool(const sim__pctx *c, const char *field, bool *out, bool dflt);

/* An optional [lo, hi] pair of numbers with lo < hi; absent: unchanged. */
int sim__param_range(const sim__pctx *c, const char *field, double *lo, double *hi);

/* One of the NULL-terminated names; *out is its index. */
int sim__param_enum(const sim__pctx *c, const char *field, const char *const *names, int *out,
    bool required, int dflt);

/* A kernel: one C file (parser, layouts, CPU loop) and one *_dev.h. */
struct sim_kernel {
    const char *name;
    size_t params_size;
    /* Parses and validates params into *params (params_size bytes, zeroed)
     * and fills the job's outputs (nout, names, layouts). */
    int (*parse)(sim__pctx *c, void *params, sim_job *job);
    /* Items [first, first + count) into acc[0 .. nout), on this thread. */
    void (*run_cpu)(const sim_job *job, uint64_t first, uint64_t count, sim_acc *acc);
    const char *cl_entry; /* OpenCL kernel function name */
    const char *cuda_entry;
};

struct sim_job {
    const sim_kernel *kernel;
    uint64_t seed;
    int nout;
    int paths_per_item;
    const char *out_name[SIM_MAX_OUT];
    sim_layout layout[SIM_MAX_OUT];
    void *params; /* kernel->params_size bytes */
};

extern const sim_kernel sim__option_kernel;
extern const sim_kernel sim__combat_kernel;

/* Ends of the groups of 4 a range covers: groups start at first & ~3. */
static inline uint64_t sim__group_base(uint64_t first)
{
    return first & ~(uint64_t)3;
}

/* gcc compiles the CPU item loops once per vector width and picks the
 * widest at load time; the arithmetic is the same IEEE operations in the
 * same order on every width (no contraction), so the bits do not change. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define SIM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SIM_CPU_CLONES
#endif

#endif /* SIM_SIM_INT_H */
