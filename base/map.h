/*
 * map.h — a typed hash map from nonzero 64-bit keys to values, declared
 * once per value type (Pony's DECLARE_HASHMAP): open addressing with linear
 * probing, a power-of-two number of slots kept at most half full, and
 * backward-shift deletion, so no tombstones and no probe run is broken.
 * Key 0 marks an empty slot and cannot be stored. Memory failure is
 * sf_oom(). Growing moves entries, so a value pointer lives until the next
 * put or delete.
 *
 *     SF_MAP_DECLARE(job_map, job *)      // job_map, job_map_get, ...
 *     job_map m = { 0 };
 *     *job_map_put(&m, id, NULL) = j;
 *     job **found = job_map_get(&m, id);
 *     SF_MAP_EACH(&m, e) use(e->key, e->val);
 *     job_map_free(&m);
 */
#ifndef SIMFARM_BASE_MAP_H
#define SIMFARM_BASE_MAP_H

#include "base/alloc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The home slot of key among cap slots (Fibonacci hashing). */
static inline size_t sf_map_home(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* Every occupied entry e of map m (a pointer to the map): the body runs
 * once for each, with e pointing at it. Two loops make it, so `break` ends
 * only the current entry's turn: return, or test a flag, to stop early. */
#define SF_MAP_EACH(m, e)                                                                       \
    for (size_t e##_slot = 0; e##_slot < (m)->cap; e##_slot++)                                  \
        for (__typeof__((m)->slots[0]) *e = &(m)->slots[e##_slot]; e != NULL && e->key != 0; e = NULL)

#define SF_MAP_DECLARE(name, V)                                                                 \
    typedef struct name##_entry {                                                               \
        uint64_t key; /* 0: an empty slot */                                                    \
        V val;                                                                                  \
    } name##_entry;                                                                             \
    typedef struct name {                                                                       \
        name##_entry *slots;                                                                    \
        size_t cap; /* slots, a power of two (0 before the first put) */                        \
        size_t n;   /* entries */                                                               \
    } name;                                                                                     \
                                                                                                \
    /* The slot of key, or the empty slot where it would go (cap > 0). */                       \
    static inline size_t name##__slot(const name *m, uint64_t key)                              \
    {                                                                                           \
        size_t i = sf_map_home(key, m->cap);                                                    \
        while (m->slots[i].key != 0 && m->slots[i].key != key)                                  \
            i = (i + 1) & (m->cap - 1);                                                         \
        return i;                                                                               \
    }                                                                                           \
                                                                                                \
    /* The value stored under key, or NULL. */                                                  \
    static inline V *name##_get(const name *m, uint64_t key)                                    \
    {                                                                                           \
        if (m->n == 0 || key == 0)                                                              \
            return NULL;                                                                        \
        size_t i = name##__slot(m, key);                                                        \
        return m->slots[i].key == key ? &m->slots[i].val : NULL;                                \
    }                                                                                           \
                                                                                                \
    /* The value under key (nonzero), added zeroed when absent; *added (may be NULL) says    \
     * which. */                                                                                \
    static inline V *name##_put(name *m, uint64_t key, bool *added)                             \
    {                                                                                           \
        if (2 * (m->n + 1) > m->cap) {                                                          \
            name old = *m;                                                                      \
            m->cap = old.cap ? old.cap * 2 : 16;                                                \
            m->slots = sf_calloc(m->cap, sizeof *m->slots);                                     \
            for (size_t j = 0; j < old.cap; j++)                                                \
                if (old.slots[j].key != 0)                                                      \
                    m->slots[name##__slot(m, old.slots[j].key)] = old.slots[j];                 \
            free(old.slots);                                                                    \
        }                                                                                       \
        size_t i = name##__slot(m, key);                                                        \
        bool fresh = m->slots[i].key == 0;                                                      \
        if (fresh) {                                                                            \
            m->slots[i] = (name##_entry){ .key = key };                                         \
            m->n++;                                                                             \
        }                                                                                       \
        if (added != NULL)                                                                      \
            *added = fresh;                                                                     \
        return &m->slots[i].val;                                                                \
    }                                                                                           \
                                                                                                \
    /* Removes key's entry; false when there was none. */                                       \
    static inline bool name##_del(name *m, uint64_t key)                                        \
    {                                                                                           \
        if (m->n == 0 || key == 0)                                                              \
            return false;                                                                       \
        size_t mask = m->cap - 1, i = name##__slot(m, key);                                     \
        if (m->slots[i].key != key)                                                             \
            return false;                                                                       \
        for (size_t j = (i + 1) & mask; m->slots[j].key != 0; j = (j + 1) & mask) {             \
            size_t home = sf_map_home(m->slots[j].key, m->cap);                                 \
            if (((j - home) & mask) >= ((j - i) & mask)) {                                      \
                m->slots[i] = m->slots[j];                                                      \
                i = j;                                                                          \
            }                                                                                   \
        }                                                                                       \
        m->slots[i].key = 0;                                                                    \
        m->n--;                                                                                 \
        return true;                                                                            \
    }                                                                                           \
                                                                                                \
    /* Frees the slots (not what values point to); m is left empty. */                         \
    static inline void name##_free(name *m)                                                     \
    {                                                                                           \
        free(m->slots);                                                                         \
        *m = (name){ 0 };                                                                       \
    }

#endif /* SIMFARM_BASE_MAP_H */
