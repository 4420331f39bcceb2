/*
 * registry.c — the kernel table, jobs (a kernel, its parsed parameters and
 * a seed) and the CPU backend's entry point.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

/* Adding a kernel: its .c file and *_dev.h, and one line here (plus its
 * device header in opencl_native.c's source list and in kernels.cu). */
static const sim_kernel *const kernels[] = {
    &sim__option_kernel,
    &sim__combat_kernel,
};

const sim_kernel *sim_kernel_at(size_t i)
{
    return i < sizeof kernels / sizeof kernels[0] ? kernels[i] : NULL;
}

const sim_kernel *sim_kernel_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(kernels[i]->name, name) == 0)
            return kernels[i];
    return NULL;
}

const char *sim_kernel_name(const sim_kernel *k)
{
    return k->name;
}

/* ---- descriptions ---------------------------------------------------------------- */

/* Text appended to a bounded buffer; n counts what the whole text needs. */
typedef struct jtext {
    char *buf;
    size_t cap, n;
} jtext;

static void __attribute__((format(printf, 2, 3))) put(jtext *j, const char *fmt, ...)
{
    char spare[1];
    bool room = j->n < j->cap;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(room ? j->buf + j->n : spare, room ? j->cap - j->n : sizeof spare, fmt, ap);
    va_end(ap);
    if (k > 0)
        j->n += (size_t)k;
}

/* A JSON string; the texts are ours, but quotes and control bytes are
 * escaped all the same. */
static void put_str(jtext *j, const char *s)
{
    put(j, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            put(j, "\\%c", *c);
        else if (*c < 0x20)
            put(j, "\\u%04x", *c);
        else
            put(j, "%c", *c);
    }
    put(j, "\"");
}

static void put_params(jtext *j, const sim__param *t, size_t n)
{
    static const char *const types[] = { "number", "integer", "bool", "enum", "range", "string", "list" };
    put(j, "[");
    for (size_t i = 0; i < n; i++) {
        const sim__param *d = &t[i];
        put(j, "%s{\"name\":", i ? "," : "");
        put_str(j, d->name);
        put(j, ",\"type\":\"%s\",\"required\":%s", types[d->type], d->required ? "true" : "false");
        switch (d->type) {
        case SIM__P_NUMBER:
        case SIM__P_INTEGER:
            put(j, ",\"min\":%.15g,\"min_exclusive\":%s,\"max\":%.15g", d->lo, d->lo_open ? "true" : "false", d->hi);
            if (!d->required)
                put(j, ",\"default\":%.15g", d->dflt);
            break;
        case SIM__P_BOOL: put(j, ",\"default\":%s", d->dflt != 0.0 ? "true" : "false"); break;
        case SIM__P_ENUM:
            put(j, ",\"values\":[");
            for (int v = 0; d->values[v] != NULL; v++) {
                put(j, "%s", v ? "," : "");
                put_str(j, d->values[v]);
            }
            put(j, "]");
            if (!d->required) {
                put(j, ",\"default\":");
                put_str(j, d->values[(int)d->dflt]);
            }
            break;
        case SIM__P_LIST:
            put(j, ",\"min_items\":%.15g,\"max_items\":%.15g,\"fields\":", d->lo, d->hi);
            put_params(j, d->fields, d->nfields);
            break;
        case SIM__P_RANGE:
        case SIM__P_STRING: break;
        }
        if (d->dflt_text != NULL) {
            put(j, ",\"default_text\":");
            put_str(j, d->dflt_text);
        }
        if (d->when_field != NULL) {
            put(j, ",\"when\":{\"field\":");
            put_str(j, d->when_field);
            put(j, ",\"equals\":");
            put_str(j, d->when_value);
            put(j, "}");
        }
        put(j, ",\"help\":");
        put_str(j, d->help != NULL ? d->help : "");
        put(j, "}");
    }
    put(j, "]");
}

int sim_kernels_json(char *buf, size_t cap, size_t *len)
{
    jtext j = { buf, cap, 0 };
    put(&j, "[");
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        put(&j, "%s{\"name\":", i ? "," : "");
        put_str(&j, kernels[i]->name);
        put(&j, ",\"help\":");
        put_str(&j, kernels[i]->help);
        put(&j, ",\"params\":");
        put_params(&j, kernels[i]->params, kernels[i]->nparams);
        put(&j, "}");
    }
    put(&j, "]");
    *len = j.n;
    return j.n < cap ? 0 : SIM_ENOSPC;
}

/* ---- jobs ------------------------------------------------------------------------- */

int sim_job_create(sim_job **out, const char *kernel, const void *params, size_t len,
    uint64_t seed, char *err, size_t errlen)
{
    msgpack_unpacked up;
    size_t off = 0;
    sim_job *job = NULL;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    const sim_kernel *k = sim_kernel_find(kernel);
    if (k == NULL) {
        if (err != NULL)
            snprintf(err, errlen, "unknown kernel '%s' (kernels: option, combat)",
                kernel ? kernel : "(null)");
        return SIM_ENOKERNEL;
    }
    msgpack_unpacked_init(&up);
    if (params == NULL || len == 0 ||
        msgpack_unpack_next(&up, params, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        if (err != NULL)
            snprintf(err, errlen, "parameters must be one msgpack map (a JSON object)");
        rc = SIM_EPARAM;
        goto fail_unpacked;
    }
    job = calloc(1, sizeof *job);
    if (job == NULL) {
        rc = SIM_ENOMEM;
        goto fail_unpacked;
    }
    job->params = calloc(1, k->params_size);
    if (job->params == NULL) {
        rc = SIM_ENOMEM;
        goto fail_job;
    }
    job->kernel = k;
    job->seed = seed;
    job->paths_per_item = 1;
    sim__pctx c = { &up.data, "", err, errlen };
    rc = k->parse(&c, job->params, job);
    if (rc != 0)
        goto fail_params;
    /* the parser fills at least one output: its contract */
    SIM_ASSERT(job->nout >= 1 && job->nout <= SIM_MAX_OUT);
    msgpack_unpacked_destroy(&up);
    *out = job;
    return 0;

fail_params:
    free(job->params);
fail_job:
    free(job);
fail_unpacked:
    msgpack_unpacked_destroy(&up);
    return rc;
}

void sim_job_destroy(sim_job *job)
{
    if (job == NULL)
        return;
    free(job->params);
    free(job);
}

const sim_kernel *sim_job_kernel(const sim_job *job)
{
    return job->kernel;
}

uint64_t sim_job_seed(const sim_job *job)
{
    return job->seed;
}

int sim_job_nout(const sim_job *job)
{
    return job->nout;
}

const char *sim_job_output_name(const sim_job *job, int o)
{
    return o >= 0 && o < job->nout ? job->out_name[o] : NULL;
}

const sim_layout *sim_job_layout(const sim_job *job, int o)
{
    return o >= 0 && o < job->nout ? &job->layout[o] : NULL;
}

int sim_job_paths_per_item(const sim_job *job)
{
    return job->paths_per_item;
}

unsigned sim_job_reference(const sim_job *job, double ref[SIM_MAX_OUT])
{
    return job->kernel->reference != NULL ? job->kernel->reference(job, ref) : 0;
}

int sim_range_check(uint64_t first, uint64_t count)
{
    if (count > SIM_MAX_ITEMS || first >= SIM_ITEM_END || count > SIM_ITEM_END - first)
        return SIM_ERANGE;
    return 0;
}

int sim_run_cpu(const sim_job *job, uint64_t first, uint64_t count, sim_stats *out)
{
    sim_acc acc[SIM_MAX_OUT];
    int rc = sim_range_check(first, count);
    if (rc != 0)
        return rc;
    for (int o = 0; o < job->nout; o++)
        sim_acc_zero(&acc[o]);
    if (count > 0)
        job->kernel->run_cpu(job, first, count, acc);
    for (int o = 0; o < job->nout; o++) {
        sim_stats_init(&out[o], &job->layout[o]);
        out[o].acc = acc[o];
    }
    return 0;
}
