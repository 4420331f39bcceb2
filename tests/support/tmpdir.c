/*
 * tmpdir.c — see tmpdir.h.
 */
#include "tests/support/tmpdir.h"

#include <stdio.h>
#include <stdlib.h>

char tmpdir[64];

void tmpdir_make(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/simfarm-test-XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        abort();
    }
}

void tmpdir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", tmpdir);
        abort();
    }
}
