/*
 * sim_int.h — shared inside sim/ only: the kernel table entry, the job
 * struct and the parameter-reading helpers the kernels' parsers use.
 */
#ifndef SIM_SIM_INT_H
#define SIM_SIM_INT_H

#include <msgpack.h>

#include "sim/sim.h"

/* One parameter of a kernel, as its parser checks it and as
 * sim_kernels_json describes it. Each kernel keeps one table of these, so
 * the ranges the parser enforces and the ones a form offers are the same
 * numbers. */
typedef enum sim__ptype {
    SIM__P_NUMBER, SIM__P_INTEGER, SIM__P_BOOL, SIM__P_ENUM, SIM__P_RANGE, SIM__P_STRING, SIM__P_LIST
} sim__ptype;

typedef struct sim__param {
    const char *name;
    sim__ptype type;
    bool required;              /* whenever it applies (see when_field) */
    bool lo_open;               /* number: (lo, hi] instead of [lo, hi] */
    double lo, hi;              /* number, integer: the range; list: entries */
    double dflt;                /* number, integer, bool (0 or 1), enum (index) */
    const char *const *values;  /* enum: the names, NULL-terminated */
    const char *when_field;     /* applies only when this enum field ... */
    const char *when_value;     /* ... has this value; NULL: always */
    const struct sim__param *fields; /* list: the fields of each entry */
    size_t nfields;
    const char *dflt_text;      /* range, string: the default, in words */
    const char *help;           /* one line for a form */
} sim__param;

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

/* Rejects fields not in the table (n entries), naming the allowed ones. */
int sim__param_known(const sim__pctx *c, const sim__param *table, size_t n);

/* Each reads the field d describes and checks it against d's range.
 * Absent: d's default, or an error when d is required. */

/* A number in [lo, hi] (or (lo, hi] when lo_open). */
int sim__param_num(const sim__pctx *c, const sim__param *d, double *out);

/* An integer in [lo, hi]. */
int sim__param_int(const sim__pctx *c, const sim__param *d, int64_t *out);

int sim__param_bool(const sim__pctx *c, const sim__param *d, bool *out);

/* One of d->values; *out is its index. */
int sim__param_enum(const sim__pctx *c, const sim__param *d, int *out);

/* An optional [lo, hi] pair of numbers with lo < hi; absent: unchanged. */
int sim__param_range(const sim__pctx *c, const sim__param *d, double *lo, double *hi);

/* A kernel: one C file (parser, layouts, CPU loop) and one *_dev.h. */
struct sim_kernel {
    const char *name;
    const char *help;           /* one line: what an item is, what it outputs */
    const sim__param *params;   /* the parameter table the parser reads by */
    size_t nparams;
    size_t params_size;
    /* Parses and validates params into *params (params_size bytes, zeroed)
     * and fills the job's outputs (nout, names, layouts). */
    int (*parse)(sim__pctx *c, void *params, sim_job *job);
    /* Items [first, first + count) into acc[0 .. nout), on this thread. */
    void (*run_cpu)(const sim_job *job, uint64_t first, uint64_t count, sim_acc *acc);
    /* Closed-form values of the outputs into ref; bit o of the result set
     * where ref[o] holds output o's (sim_job_reference). NULL: none. */
    unsigned (*reference)(const sim_job *job, double *ref);
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
 * same order on every width (no contraction), so the bits do not change.
 * Not under a sanitizer: the loader runs the clones' resolvers before the
 * sanitizer's runtime is up (a ThreadSanitizer build crashes at start). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define SIM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SIM_CPU_CLONES
#endif

#endif /* SIM_SIM_INT_H */
