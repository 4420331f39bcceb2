/*
 * test_proto_corpus.c — replays every committed fuzz corpus file of proto's
 * decoders (tests/fuzz/corpus/proto_<entry>/) through the same oracle the
 * libFuzzer harnesses use (tests/fuzz/proto_oracle.h), so `make test` keeps
 * the corpus, and any crash input added to it, passing.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/proto_oracle.h"

static size_t replay(const char *dir, const char *(*oracle)(const uint8_t *, size_t))
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t files = 0;
    cr_assert_not_null(d, "cannot open %s (tests run from the repository root)", dir);
    while ((e = readdir(d)) != NULL) {
        char path[512];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s", path);
        uint8_t *buf = malloc(PR_MAX_FRAME + 2);
        size_t n = fread(buf, 1, PR_MAX_FRAME + 1, f);
        fclose(f);
        const char *why = oracle(buf, n);
        cr_expect_null(why, "%s: %s", path, why);
        free(buf);
        files++;
    }
    closedir(d);
    return files;
}

Test(proto_corpus, frame)
{
    cr_assert_geq(replay("tests/fuzz/corpus/proto_frame", oracle_frame), 20);
}

Test(proto_corpus, batch)
{
    cr_assert_geq(replay("tests/fuzz/corpus/proto_batch", oracle_batch), 3);
}

Test(proto_corpus, replay)
{
    cr_assert_geq(replay("tests/fuzz/corpus/proto_replay", oracle_replay), 5);
}
