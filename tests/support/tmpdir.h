/*
 * tmpdir.h — a directory of a test's own under /tmp: made by a Criterion
 * suite's .init, removed with all it holds by its .fini
 * (TestSuite(name, .init = tmpdir_make, .fini = tmpdir_remove)).
 */
#ifndef SIMFARM_TESTS_TMPDIR_H
#define SIMFARM_TESTS_TMPDIR_H

/* The directory's path once tmpdir_make() has run. */
extern char tmpdir[64];

/* Makes /tmp/simfarm-test-XXXXXX into tmpdir; aborts when it cannot. */
void tmpdir_make(void);

/* Removes it and everything in it; aborts when it cannot. */
void tmpdir_remove(void);

#endif
