/*
 * node_wasm.h — what the browser node's JavaScript (node-wasm/) calls.
 *
 * The node worker drives the node actor with ndw_start .. ndw_stats and
 * answers the calls the module makes on Module.ndHost (connect, send,
 * compute, state, log, stopped). A compute worker calls ndw_compute only.
 * JavaScript numbers cannot carry a u64, so item ranges cross as (low,
 * high) halves. Bytes handed to the module come from ndw_alloc.
 */
#ifndef SIMFARM_NODE_WASM_H
#define SIMFARM_NODE_WASM_H

#include <stddef.h>
#include <stdint.h>

/* Starts the node: seed is the 32-byte key seed (wiped here after use),
 * audience the coordinator's host:port as the page reached it, claim_token
 * NULL or empty for a public node, workers the compute workers the page
 * started (1 .. 256), cores the machine's (navigator.hardwareConcurrency;
 * the most workers ndw_set_workers allows, 256 at most), os/browser/device/memory what
 * hello reports, checksum the hex SHA-256 of the WebAssembly module (NULL
 * or empty: none). Returns 0, -1 when a node already runs, -2 for a bad
 * seed or argument. */
int ndw_start(uint8_t *seed, const char *audience, const char *claim_token, unsigned workers, unsigned cores,
    const char *os, const char *browser, const char *device, double memory, const char *checksum);
/* The compute workers are `workers` (1 .. the cores given to ndw_start)
 * from now on, without leaving the session: see nd_set_workers(). More:
 * the page has started the new ones (numbered from the old count up)
 * first. Fewer: those numbered `workers` and up finish their chunk and
 * get no other. Returns 0, or -2 for a count out of range. */
int ndw_set_workers(unsigned workers);
/* The WebSocket opened. */
void ndw_up(void);
/* The WebSocket failed or closed, for the reason why. */
void ndw_down(const char *why);
/* A whole binary frame; takes bytes. */
void ndw_frame(uint8_t *bytes, size_t len);
/* Compute worker w finished: err 0 and the result bytes (taken), or a
 * SIM_E* code. */
void ndw_done(unsigned w, int err, uint8_t *data, size_t len, uint32_t elapsed_ms);
/* Finish the chunks in hand and leave; a second call leaves at once. */
void ndw_drain(void);
/* Pause (on != 0) or resume: see nd_pause(). */
void ndw_pause(int on);
/* What the next heartbeat reports. */
void ndw_stats(uint32_t cpu_permille, double mem_used, double mem_total);

/* Memory for bytes JavaScript hands over; never NULL. */
uint8_t *ndw_alloc(size_t len);
void ndw_free(void *p);

/* Computes items [start, start + count) of the job whose work context is
 * work/len (hash: its SHA-256 as assigned; the job is kept for the next
 * chunk of the same context): `variant` of it, or every variant when the
 * context says so. Returns 0 with the result in ndw_result() /
 * ndw_result_len(), valid until the next call, or a SIM_E* code with a
 * message in ndw_error(). Between the chunk's slices (about every 100 ms)
 * it calls Module.onChunkProgress(done), if set, with the items done. */
int ndw_compute(const uint8_t *hash, const uint8_t *work, size_t len, uint32_t start_lo, uint32_t start_hi,
    uint32_t count_lo, uint32_t count_hi, uint32_t variant);
const uint8_t *ndw_result(void);
size_t ndw_result_len(void);
const char *ndw_error(void);

#endif
