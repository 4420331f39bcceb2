/*
 * pool.c — see pool.h. Blocks are carved from slabs of BATCH blocks aligned
 * to 64 bytes, so a message of up to 64 bytes lies on one cache line, and a
 * message passed between cores moves one line, not two. A batch is a chain
 * of free blocks; its first block also links it into the class's shared
 * stack and holds its length (blocks are at least 64 bytes, room for all
 * three). The shared stacks and the slab list are guarded by one spin flag:
 * it is taken once per BATCH allocations or frees at most. Slabs are never
 * given back: the pool keeps the most messages that were ever alive at once.
 */
#include "runtime/pool.h"

#include "base/alloc.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#ifndef __EMSCRIPTEN__
#include <pthread.h>
#endif

enum { CLASSES = 4, BATCH = 64, LINE = 64 };

static const size_t class_size[CLASSES] = { 64, 128, 256, 512 };

typedef struct block {
    struct block *next;       /* within a free list or a batch */
    struct block *next_batch; /* first block of a batch: the next batch */
    size_t n;                 /* first block of a batch: its length */
} block;

typedef struct cache {
    block *head;
    size_t n;
} cache;

static _Thread_local cache local[CLASSES];
static _Thread_local bool armed;
static block *shared[CLASSES];
static void **slabs; /* every slab, so they stay reachable */
static size_t nslabs, slabs_cap;
static atomic_flag shared_lock = ATOMIC_FLAG_INIT;

#ifndef __EMSCRIPTEN__
/* Any thread that allocates gets a destructor that hands its cache back,
 * so a thread's exit never strands blocks (the runtime's workers, a test's
 * loop thread, a caller's own threads alike). */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void on_thread_exit(void *arg)
{
    (void)arg;
    rt__pool_thread_exit();
}

static void make_key(void)
{
    pthread_key_create(&exit_key, on_thread_exit);
}

static void arm(void)
{
    pthread_once(&exit_once, make_key);
    pthread_setspecific(exit_key, &armed);
    armed = true;
}
#else
static void arm(void)
{
    armed = true;
}
#endif

static void lock(void)
{
    /* Held for two pointer moves. */
    while (atomic_flag_test_and_set_explicit(&shared_lock, memory_order_acquire))
        ;
}

static void unlock(void)
{
    atomic_flag_clear_explicit(&shared_lock, memory_order_release);
}

/* A new slab of class c, as one batch. */
static block *slab_new(int c)
{
    size_t size = class_size[c];
    unsigned char *s = aligned_alloc(LINE, size * BATCH);
    if (s == NULL)
        sf_oom(size * BATCH);
    lock();
    if (nslabs == slabs_cap)
        slabs = sf_grow(slabs, &slabs_cap, sizeof *slabs);
    slabs[nslabs++] = s;
    unlock();
    for (size_t i = 0; i < BATCH; i++)
        ((block *)(s + i * size))->next = i + 1 < BATCH ? (block *)(s + (i + 1) * size) : NULL;
    ((block *)s)->n = BATCH;
    return (block *)s;
}

static int class_of(size_t size)
{
    for (int c = 0; c < CLASSES; c++)
        if (size <= class_size[c])
            return c;
    return -1;
}

void *rt__pool_alloc(size_t size, unsigned *cls)
{
#if defined(__SANITIZE_ADDRESS__)
    /* Blocks that never go back to malloc would hide a use after free from
     * AddressSanitizer: let it see every message. */
    int c = -1;
    (void)class_of;
#else
    int c = class_of(size);
#endif
    if (c < 0) {
        void *p = calloc(1, size);
        if (p == NULL)
            sf_oom(size);
        *cls = 0;
        return p;
    }
    cache *k = &local[c];
    if (!armed)
        arm();
    if (k->head == NULL) {
        lock();
        block *b = shared[c];
        if (b != NULL)
            shared[c] = b->next_batch;
        unlock();
        if (b == NULL)
            b = slab_new(c);
        k->head = b;
        k->n = b->n;
    }
    block *b = k->head;
    k->head = b->next;
    k->n--;
    /* Blocks freed on another core come back cold: start fetching the next
     * one now, so the next allocation does not wait for it. */
    if (k->head != NULL)
        __builtin_prefetch(k->head, 1);
    memset(b, 0, size);
    *cls = (unsigned)c + 1;
    return b;
}

void rt__pool_free(void *p, unsigned cls)
{
    if (p == NULL)
        return;
    if (cls == 0) {
        free(p);
        return;
    }
    unsigned c = cls - 1;
    cache *k = &local[c];
    block *b = p;
    if (!armed)
        arm();
    b->next = k->head;
    k->head = b;
    if (++k->n < 2 * BATCH)
        return;
    /* Too many here: the first BATCH go to the shared stack as one batch. */
    block *first = k->head, *last = first;
    for (unsigned i = 1; i < BATCH; i++)
        last = last->next;
    k->head = last->next;
    k->n -= BATCH;
    last->next = NULL;
    first->n = BATCH;
    lock();
    first->next_batch = shared[c];
    shared[c] = first;
    unlock();
}

void rt__pool_thread_exit(void)
{
    /* Blocks belong to slabs: the cache goes to the shared stack as one
     * (short) batch, for the threads that remain. */
    for (int c = 0; c < CLASSES; c++) {
        block *b = local[c].head;
        if (b == NULL)
            continue;
        b->n = local[c].n;
        lock();
        b->next_batch = shared[c];
        shared[c] = b;
        unlock();
        local[c].head = NULL;
        local[c].n = 0;
    }
}
