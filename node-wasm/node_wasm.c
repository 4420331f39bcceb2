/*
 * node_wasm.c — see node_wasm.h: the browser host of the node actor
 * (actors/node/node.h).
 *
 * One module serves two kinds of Web Worker. The node worker
 * (node-wasm/node-worker.js) runs the node actor on the runtime's
 * WebAssembly port: its JavaScript opens the WebSocket, feeds frames in
 * with ndw_frame() and answers the calls below (Module.ndHost). Compute
 * workers (node-wasm/compute-worker.js) each hold their own instance and
 * call ndw_compute() only: a chunk of a job whose work context they are
 * given, encoded the way nd_done() wants it. The page's own thread loads
 * neither: it never runs a kernel.
 */
#include "node-wasm/node_wasm.h"

#include "actors/node/node.h"
#include "proto/sign.h"
#include "runtime/runtime.h"
#include "sim/ctx.h"
#include "sim/sim.h"

#include <emscripten.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the calls into JavaScript (Module.ndHost, set by node-worker.js) ---- */

EM_JS(void, js_connect, (void), { Module.ndHost.connect(); });
EM_JS(void, js_send, (const uint8_t *p, size_t len), { Module.ndHost.send(HEAPU8.slice(p, p + len)); });
EM_JS(void, js_compute, (unsigned w, double job, double chunk, uint32_t start_lo, uint32_t start_hi,
    uint32_t count_lo, uint32_t count_hi, uint32_t variant, const uint8_t *hash, const uint8_t *work, size_t len), {
    Module.ndHost.compute(w, {
        job: job, chunk: chunk, start: [start_lo, start_hi], count: [count_lo, count_hi], variant: variant,
        hash: HEAPU8.slice(hash, hash + 32), work: HEAPU8.slice(work, work + len),
    });
});
EM_JS(void, js_cancel, (unsigned w), { Module.ndHost.cancel(w); });
EM_JS(void, js_state, (int st, const char *name, const char *detail), {
    Module.ndHost.state(st, UTF8ToString(name), UTF8ToString(detail));
});
EM_JS(void, js_log, (int level, const char *line), { Module.ndHost.log(level, UTF8ToString(line)); });
EM_JS(void, js_stopped, (int code), { Module.ndHost.stopped(code); });

/* ---- the node worker ---------------------------------------------------- */

typedef struct host {
    rt_system *sys;
    rt_actor *node;
    unsigned workers, cores;
    char os[32], browser[128], device[128];
    uint64_t memory;
    pr_backend backend;
    uint32_t cpu_permille;
    uint64_t mem_used, mem_total;
} host;

static host H;

static void host_connect(void *ctx)
{
    (void)ctx;
    js_connect();
}

static void host_send(void *ctx, const uint8_t *frame, size_t len)
{
    (void)ctx;
    js_send(frame, len);
}

/* A compute worker cannot look at a flag while it computes (no shared
 * memory without cross-origin isolation): the node worker ends it and
 * starts a fresh one, and answers ND_ECANCELLED for its chunk. */
static void host_cancel(void *ctx, unsigned w)
{
    (void)ctx;
    js_cancel(w);
}

static void host_compute(void *ctx, unsigned w, const nd_chunk *c, const sim_work *sim, const uint8_t *work,
    size_t len)
{
    (void)ctx;
    (void)sim; /* the compute worker opens its own from the work context */
    js_compute(w, (double)c->job, (double)c->id, (uint32_t)c->start, (uint32_t)(c->start >> 32),
        (uint32_t)c->count, (uint32_t)(c->count >> 32), c->variant, c->hash, work, len);
}

static void host_caps(void *ctx, pr_caps *caps)
{
    host *h = ctx;
    h->backend = (pr_backend){ .kind = PR_BACKEND_WASM, .device = h->device, .memory = h->memory,
        .units = h->cores };
    *caps = (pr_caps){ .cores = h->cores, .max_parallel = h->workers, .os = h->os[0] ? h->os : NULL,
        .arch = "wasm32", .browser = h->browser[0] ? h->browser : NULL, .backends = &h->backend, .nbackends = 1 };
}

static void host_stats(void *ctx, pr_heartbeat *hb)
{
    host *h = ctx;
    hb->cpu_permille = h->cpu_permille;
    hb->mem_used = h->mem_used;
    hb->mem_total = h->mem_total;
}

static void host_state(void *ctx, nd_state st, const char *detail)
{
    (void)ctx;
    js_state((int)st, nd_state_name(st), detail);
}

static void host_log(void *ctx, nd_level level, const char *line)
{
    (void)ctx;
    js_log((int)level, line);
}

static void host_stopped(void *ctx, int code)
{
    host *h = ctx;
    if (h->node != NULL) {
        rt_actor_release(h->node); /* the system keeps it until it has run its last message */
        h->node = NULL;
    }
    js_stopped(code);
}

EMSCRIPTEN_KEEPALIVE int ndw_start(uint8_t *seed, const char *audience, const char *claim_token, unsigned workers,
    unsigned cores, const char *os, const char *browser, const char *device, double memory, const char *checksum)
{
    if (H.node != NULL)
        return -1;
    if (audience == NULL || audience[0] == '\0' || workers == 0 || workers > ND_MAX_WORKERS) {
        sodium_memzero(seed, 32);
        return -2;
    }
    if (pr_init() != 0) { /* libsodium's randomness comes from the worker's crypto.getRandomValues */
        sodium_memzero(seed, 32);
        return -2;
    }
    nd_config cfg = { .audience = audience, .claim_token = claim_token, .version = "simfarm-node " SF_VERSION " (wasm)",
        .checksum = checksum && checksum[0] ? checksum : NULL, .workers = workers };
    int rc = pr_key_from_seed(&cfg.key, seed, 32);
    sodium_memzero(seed, 32);
    if (rc != 0)
        return -2;
    if (H.sys == NULL) {
        int err = 0;
        H.sys = rt_system_create(&(rt_system_opts){ .workers = 1 }, &err);
        if (H.sys == NULL) {
            pr_key_wipe(&cfg.key);
            return -2;
        }
        rt_system_run(H.sys); /* returns at once: the worker's event loop drives it */
    }
    H.workers = workers;
    H.cores = cores < workers ? workers : cores > ND_MAX_WORKERS ? ND_MAX_WORKERS : cores;
    snprintf(H.os, sizeof H.os, "%s", os ? os : "");
    snprintf(H.browser, sizeof H.browser, "%s", browser ? browser : "");
    snprintf(H.device, sizeof H.device, "%s", device && device[0] ? device : "wasm-simd128");
    H.memory = memory > 0 ? (uint64_t)memory : 0;
    nd_host hh = { .ctx = &H, .connect = host_connect, .send = host_send, .compute = host_compute, .cancel = host_cancel,
        .caps = host_caps, .stats = host_stats, .state = host_state, .log = host_log, .stopped = host_stopped };
    H.node = nd_spawn(H.sys, &cfg, &hh);
    pr_key_wipe(&cfg.key);
    return 0;
}

EMSCRIPTEN_KEEPALIVE void ndw_up(void)
{
    if (H.node != NULL)
        nd_up(H.node);
}

EMSCRIPTEN_KEEPALIVE void ndw_down(const char *why)
{
    if (H.node != NULL)
        nd_down(H.node, why);
}

EMSCRIPTEN_KEEPALIVE void ndw_frame(uint8_t *bytes, size_t len)
{
    if (H.node != NULL)
        nd_frame(H.node, bytes, len);
    else
        free(bytes);
}

EMSCRIPTEN_KEEPALIVE void ndw_done(unsigned w, int err, uint8_t *data, size_t len, uint32_t elapsed_ms)
{
    if (H.node != NULL)
        nd_done(H.node, w, err, data, len, elapsed_ms);
    else
        free(data);
}

EMSCRIPTEN_KEEPALIVE void ndw_drain(void)
{
    if (H.node != NULL)
        nd_drain(H.node);
}

EMSCRIPTEN_KEEPALIVE void ndw_pause(int on)
{
    if (H.node != NULL)
        nd_pause(H.node, on != 0);
}

EMSCRIPTEN_KEEPALIVE int ndw_set_workers(unsigned workers)
{
    if (workers == 0 || workers > H.cores)
        return -2;
    H.workers = workers;
    if (H.node != NULL)
        nd_set_workers(H.node, workers);
    return 0;
}

EMSCRIPTEN_KEEPALIVE void ndw_stats(uint32_t cpu_permille, double mem_used, double mem_total)
{
    H.cpu_permille = cpu_permille > 1000 ? 1000 : cpu_permille;
    H.mem_used = mem_used > 0 ? (uint64_t)mem_used : 0;
    H.mem_total = mem_total > 0 ? (uint64_t)mem_total : 0;
}

/* ---- shared ------------------------------------------------------------- */

EMSCRIPTEN_KEEPALIVE uint8_t *ndw_alloc(size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    if (p == NULL)
        sf_oom(len);
    return p;
}

EMSCRIPTEN_KEEPALIVE void ndw_free(void *p)
{
    free(p);
}

/* ---- a compute worker ----------------------------------------------------- */

typedef struct worker {
    uint8_t hash[32];
    sim_work job;          /* job.jobs NULL until a context is opened */
    uint8_t *result;
    size_t result_len;
    char err[256];
} worker;

static worker W;

EM_JS(void, js_chunk_progress, (double done), {
    if (Module.onChunkProgress)
        Module.onChunkProgress(done);
});

/* Tells the compute worker's script how many items of the chunk are done,
 * between slices (about every 100 ms), for the page's live rate; never
 * stops the chunk (a cancel ends the whole worker). */
static bool report_progress(void *ctx, uint64_t done)
{
    (void)ctx;
    if (done > 0)
        js_chunk_progress((double)done);
    return false;
}

EMSCRIPTEN_KEEPALIVE int ndw_compute(const uint8_t *hash, const uint8_t *work, size_t len, uint32_t start_lo,
    uint32_t start_hi, uint32_t count_lo, uint32_t count_hi, uint32_t variant)
{
    free(W.result);
    W.result = NULL;
    W.result_len = 0;
    W.err[0] = '\0';
    if (W.job.jobs == NULL || memcmp(W.hash, hash, 32) != 0) {
        sim_work_close(&W.job);
        int rc = sim_work_open(&W.job, work, len, W.err, sizeof W.err);
        if (rc != 0)
            return rc;
        memcpy(W.hash, hash, 32);
    }
    nd_chunk c = { .start = (uint64_t)start_hi << 32 | start_lo, .count = (uint64_t)count_hi << 32 | count_lo,
        .variant = variant };
    int rc = nd_compute(&W.job, &c, nd_run_cpu, report_progress, NULL, &W.result, &W.result_len);
    if (rc != 0)
        snprintf(W.err, sizeof W.err, "%s", sf_strerror(rc));
    return rc;
}

EMSCRIPTEN_KEEPALIVE const uint8_t *ndw_result(void)
{
    return W.result;
}

EMSCRIPTEN_KEEPALIVE size_t ndw_result_len(void)
{
    return W.result_len;
}

EMSCRIPTEN_KEEPALIVE const char *ndw_error(void)
{
    return W.err;
}
