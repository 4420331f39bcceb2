/*
 * test_keyfile.c — the node's key file (nd_key_load): nodes started at once
 * on one path all end up with the one key, and a write that fails says why.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node-native/keyfile.h"
#include "tests/support/tmpdir.h"

TestSuite(keyfile, .init = tmpdir_make, .fini = tmpdir_remove);

enum { RACERS = 12 };

/* Each child waits on the pipe, loads the key and writes its public key
 * (or its error) back. */
Test(keyfile, nodes_started_at_once_share_one_key)
{
    char path[256];
    snprintf(path, sizeof path, "%s/new/node.key", tmpdir);
    int go[2], out[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(out), 0);
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0)
                _exit(3);
            pr_key k;
            bool created;
            sf_error err;
            char line[600];
            memset(line, 0, sizeof line);
            if (nd_key_load(path, &k, &created, &err) == 0) {
                line[0] = created ? 'C' : 'L';
                memcpy(line + 1, k.pk, PR_PK_BYTES);
            } else {
                line[0] = 'E';
                snprintf(line + 1, sizeof line - 1, "%s", err.msg);
            }
            _exit(write(out[1], line, sizeof line) == (ssize_t)sizeof line ? 0 : 4);
        }
    }
    close(go[0]);
    close(out[1]);
    close(go[1]); /* all start */
    uint8_t first[PR_PK_BYTES];
    int created = 0;
    for (int i = 0; i < RACERS; i++) {
        char line[600];
        size_t got = 0;
        while (got < sizeof line) {
            ssize_t r = read(out[0], line + got, sizeof line - got);
            cr_assert_gt(r, 0, "child %d said nothing", i);
            got += (size_t)r;
        }
        cr_assert_neq(line[0], 'E', "a node failed: %s", line + 1);
        created += line[0] == 'C';
        if (i == 0)
            memcpy(first, line + 1, PR_PK_BYTES);
        else
            cr_assert_arr_eq(line + 1, first, PR_PK_BYTES, "every node has the same key");
    }
    close(out[0]);
    for (int i = 0; i < RACERS; i++) {
        int st;
        cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    cr_assert_eq(created, 1, "one node created the key, the others loaded it");
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(sb.st_size, 32);
    cr_assert_eq(sb.st_mode & 0777, 0600);
}

/* A file size limit of 16 bytes cuts the seed's write short: the message
 * must give the reason the system gives (EFBIG), and no file is left. */
Test(keyfile, a_short_write_says_why)
{
    char path[256];
    snprintf(path, sizeof path, "%s/short.key", tmpdir);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit was, lim = { 16, 16 };
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &was), 0);
    lim.rlim_max = was.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    pr_key k;
    bool created;
    sf_error err;
    int rc = nd_key_load(path, &k, &created, &err);
    setrlimit(RLIMIT_FSIZE, &was);
    cr_assert_eq(rc, ND_EKEYFILE, "rc %d: %s", rc, err.msg);
    cr_assert_eq(err.code, ND_EKEYFILE);
    cr_assert_not_null(strstr(err.msg, "cannot write"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, strerror(EFBIG)), "%s", err.msg);
    cr_assert_neq(access(path, F_OK), 0, "no partial key file is left");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", tmpdir);
    cr_assert_eq(system(cmd), 0, "no temporary file is left");
}

Test(keyfile, an_existing_key_is_loaded_again)
{
    char path[256];
    snprintf(path, sizeof path, "%s/again.key", tmpdir);
    pr_key a, b;
    bool created;
    sf_error err;
    cr_assert_eq(nd_key_load(path, &a, &created, &err), 0, "%s", err.msg);
    cr_assert(created);
    cr_assert_eq(nd_key_load(path, &b, &created, &err), 0, "%s", err.msg);
    cr_assert(!created);
    cr_assert_arr_eq(a.pk, b.pk, PR_PK_BYTES);
}

/* Criterion runs each test in a process of its own: the environment set
 * here ends with it. */
Test(keyfile, the_default_path_is_under_a_units_state_directory)
{
    char buf[512];
    setenv("HOME", "/home/u", 1);
    unsetenv("STATE_DIRECTORY");
    unsetenv("XDG_DATA_HOME");
    nd_key_default_path(buf, sizeof buf);
    cr_assert_str_eq(buf, "/home/u/.local/share/simfarm/node.key");
    setenv("XDG_DATA_HOME", "/data", 1);
    nd_key_default_path(buf, sizeof buf);
    cr_assert_str_eq(buf, "/data/simfarm/node.key");
    setenv("STATE_DIRECTORY", "/var/lib/simfarm-node", 1); /* systemd's, for StateDirectory= */
    nd_key_default_path(buf, sizeof buf);
    cr_assert_str_eq(buf, "/var/lib/simfarm-node/node.key");
    setenv("STATE_DIRECTORY", "/var/lib/simfarm-node/gpu0:/var/lib/other", 1); /* several: the first */
    nd_key_default_path(buf, sizeof buf);
    cr_assert_str_eq(buf, "/var/lib/simfarm-node/gpu0/node.key");
    setenv("STATE_DIRECTORY", "relative", 1); /* not systemd's: ignored */
    nd_key_default_path(buf, sizeof buf);
    cr_assert_str_eq(buf, "/data/simfarm/node.key");
}
