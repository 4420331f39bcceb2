/*
 * pool.h — the runtime's message memory: size classes of 64, 128, 256 and
 * 512 bytes, each a thread-local free list that trades blocks with a shared
 * stack in batches, so a message allocated on one thread and freed on
 * another costs no lock most of the time (glibc's allocator takes its arena
 * lock for such frees). Larger requests go to malloc, and so does everything
 * under AddressSanitizer (which must see every message freed to find a use
 * after free). Blocks come from slabs aligned to cache lines and are
 * never given back to malloc; a thread's cache goes back to the shared
 * stacks when the thread ends. Internal to runtime/.
 */
#ifndef SIMFARM_RUNTIME_POOL_H
#define SIMFARM_RUNTIME_POOL_H

#include <stddef.h>

/* Returns zeroed memory of at least size bytes and its class in *cls
 * (0 = from malloc; pass it back to rt__pool_free). Never returns NULL. */
void *rt__pool_alloc(size_t size, unsigned *cls);

/* Frees what rt__pool_alloc returned, with the class it gave. */
void rt__pool_free(void *p, unsigned cls);

/* Hands this thread's cached blocks to the shared stacks (called when a
 * thread ends). */
void rt__pool_thread_exit(void);

#endif
