/*
 * alloc.c — allocation that aborts on failure (alloc.h).
 */
#include "base/alloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf_oom(size_t size)
{
    fprintf(stderr, "simfarm: out of memory allocating %zu bytes\n", size);
    abort();
}

void *sf_malloc(size_t size)
{
    void *p = malloc(size);
    if (p == NULL && size != 0)
        sf_oom(size);
    return p;
}

void *sf_calloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL && n != 0 && size != 0)
        sf_oom(n > SIZE_MAX / size ? SIZE_MAX : n * size);
    return p;
}

void *sf_realloc(void *p, size_t size)
{
    void *np = realloc(p, size);
    if (np == NULL && size != 0)
        sf_oom(size);
    return np;
}

void *sf_reallocarray(void *p, size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        sf_oom(SIZE_MAX);
    return sf_realloc(p, n * size);
}

char *sf_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(sf_malloc(n), s, n);
}

void *sf_grow(void *v, size_t *cap, size_t elem)
{
    size_t ncap = *cap ? *cap * 2 : 8;
    if (ncap > SIZE_MAX / elem)
        sf_oom(SIZE_MAX);
    void *nv = sf_realloc(v, ncap * elem);
    *cap = ncap;
    return nv;
}

void *sf_grow_ring(void *v, size_t *head, size_t n, size_t *cap, size_t elem)
{
    size_t old = *cap;
    unsigned char *nv = sf_grow(v, cap, elem);
    /* Wrapped elements (head .. old-1, then 0 ..) become one run. */
    if (*head + n > old) {
        size_t tail = old - *head; /* elements from head to the old end */
        memmove(nv + (*cap - tail) * elem, nv + *head * elem, tail * elem);
        memmove(nv + tail * elem, nv, (n - tail) * elem);
        memmove(nv, nv + (*cap - tail) * elem, tail * elem);
    } else if (*head > 0) {
        memmove(nv, nv + *head * elem, n * elem);
    }
    *head = 0;
    return nv;
}

char *sf_fmt(const char *f, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(small, sizeof small, f, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    char *s = sf_malloc((size_t)n + 1);
    if ((size_t)n < sizeof small) {
        memcpy(s, small, (size_t)n + 1);
    } else {
        va_start(ap, f);
        vsnprintf(s, (size_t)n + 1, f, ap);
        va_end(ap);
    }
    return s;
}
