/*
 * alloc.h — the project's one out-of-memory policy: a farm process that
 * cannot allocate a few bytes is better restarted than limping, so these
 * wrappers print what could not be allocated and abort. Code that must
 * survive a failed allocation (the protocol's decoders, which answer
 * PR_ENOMEM and are tested with a failing allocator) calls malloc itself.
 */
#ifndef SIMFARM_BASE_ALLOC_H
#define SIMFARM_BASE_ALLOC_H

#include <stddef.h>

/* Prints "simfarm: out of memory allocating SIZE bytes" and aborts. */
_Noreturn void sf_oom(size_t size);

/* malloc, calloc, realloc and strdup that never return NULL: failure is
 * sf_oom(). sf_calloc(0, size) may return NULL, as calloc may. */
void *sf_malloc(size_t size);
void *sf_calloc(size_t n, size_t size);
void *sf_realloc(void *p, size_t size);
char *sf_strdup(const char *s);

/* realloc to n elements of size bytes, with the product checked. */
void *sf_reallocarray(void *p, size_t n, size_t size);

/* Doubles the capacity of an array of elem-byte elements (to 8 from 0):
 * returns the moved array and updates *cap. Never returns NULL. For the
 * append-only arrays of actors and hosts. */
void *sf_grow(void *v, size_t *cap, size_t elem);

/* The same for a ring of n elements starting at *head (a queue): the
 * elements move to the start of the new array in order and *head becomes 0. */
void *sf_grow_ring(void *v, size_t *head, size_t n, size_t *cap, size_t elem);

/* printf into a new malloc'd string (the caller frees it). Never returns
 * NULL. */
char *sf_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

#endif /* SIMFARM_BASE_ALLOC_H */
