/*
 * test_sim_corpus.c — replays the committed fuzz corpus of sim_stats_decode
 * (tests/fuzz/corpus/sim_stats/) with the harness's property: whatever
 * decodes encodes and decodes back to equal statistics. Run from the
 * repository root, as the test runner does.
 */
#include "sim/sim.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

Test(sim_corpus, every_file_round_trips_or_is_refused)
{
    const char *dir = "tests/fuzz/corpus/sim_stats";
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s (run from the repository root)", dir);
    struct dirent *e;
    int files = 0, decoded = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        uint8_t in[8192], buf[SIM_STATS_MAX_ENCODED];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s", path);
        size_t n = fread(in, 1, sizeof in, f);
        fclose(f);
        files++;
        sim_stats s, back;
        size_t len;
        if (sim_stats_decode(&s, in, n) != 0)
            continue;
        decoded++;
        cr_assert_eq(sim_stats_encode(&s, buf, sizeof buf, &len), 0, "%s", path);
        cr_assert_eq(sim_stats_decode(&back, buf, len), 0, "%s", path);
        cr_assert(sim_stats_equal(&s, &back), "%s does not round-trip", path);
    }
    closedir(d);
    cr_assert_geq(files, 2, "the corpus is missing");
    cr_assert_geq(decoded, 2, "no valid encoding in the corpus");
}
