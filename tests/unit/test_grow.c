/*
 * test_grow.c — sf_grow_ring keeps a queue's order whether or not it has
 * wrapped around the end of its array.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "runtime/runtime.h"

/* A full ring of cap ints holding 0 .. cap-1 in queue order from head. */
static int *full_ring(size_t cap, size_t head)
{
    int *v = malloc(cap * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < cap; i++)
        v[(head + i) % cap] = (int)i;
    return v;
}

Test(grow_ring, keeps_order_for_every_head)
{
    for (size_t head = 0; head < 8; head++) {
        size_t cap = 8, h = head;
        int *v = sf_grow_ring(full_ring(8, head), &h, 8, &cap, sizeof(int));
        cr_assert_eq(cap, 16);
        cr_assert_eq(h, 0);
        for (int i = 0; i < 8; i++)
            cr_assert_eq(v[i], i, "head %zu: slot %d holds %d", head, i, v[i]);
        free(v);
    }
}

Test(grow_ring, from_empty)
{
    size_t cap = 0, h = 0;
    int *v = sf_grow_ring(NULL, &h, 0, &cap, sizeof(int));
    cr_assert_eq(cap, 8);
    cr_assert_eq(h, 0);
    free(v);
}
