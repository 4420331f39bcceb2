/*
 * journal.h — the ledger's records (sched/) as rows of the journal table.
 *
 * Records are written many at a time: one INSERT whose rows come from
 * unnest() over one array parameter per column, so a thousand accepted
 * results cost the database one statement, not a thousand. Rows are
 * inserted in the order given, so their `seq` keeps the ledger's order.
 * A row already there (an item range accepted before a crash, written
 * again) is skipped by the journal's unique keys: writing is idempotent.
 * The statement answers one row, one column: how many of its accepts were
 * not written because a row for the same first item holds another count
 * or result (0 normally; the row there stands).
 */
#ifndef SIMFARM_ACTORS_JOURNAL_H
#define SIMFARM_ACTORS_JOURNAL_H

#include "actors/coord/store.h"
#include "sched/sched.h"

#include <stddef.h>

/* The most records cd_journal_insert takes at once. */
#define CD_JOURNAL_MAX_ROWS 1024

/* A `group` query inserting recs[0 .. n) (1 <= n <= CD_JOURNAL_MAX_ROWS)
 * into the journal; NULL when n is out of range. */
cd_query *cd_journal_insert(const sc_record *recs, size_t n);

#endif
