/*
 * burst_exec.c — the `exec` provider: an operator's script brings nodes up
 * and down on any cloud. It is called as
 *
 *     SCRIPT up N          start N nodes; print one id a line
 *     SCRIPT down ID       drain node ID (SIGTERM to its simfarm node)
 *     SCRIPT down ID force stop it now (after --burst-grace)
 *     SCRIPT list          print "ID STATE [AGE_S]" a line for each node,
 *                          STATE one of starting, running, draining
 *
 * with SIMFARM_BIN, SIMFARM_SERVER, SIMFARM_BURST_DIR and
 * SIMFARM_NODE_CORES in its environment, and for `up` NODE_CLAIM_TOKENS:
 * N claim tokens separated by spaces, the i-th for the i-th node (and
 * NODE_CLAIM_TOKEN, the first). The script names a node
 * burst-exec-ID (`simfarm node --name`). An exit status other than 0 is
 * counted as a provider error and logged with the script's stderr.
 */
#include "actors/coord/burst_int.h"

#include "base/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LIST_MAX = CD__BURST_MAX_NODES };

static int run(cd__burst *b, const char *const *argv, const char *tokens, int kind, const char *tag)
{
    char bin[4200], server[600], dir[4200], cores[48];
    snprintf(bin, sizeof bin, "SIMFARM_BIN=%s", b->exe);
    snprintf(server, sizeof server, "SIMFARM_SERVER=%s", b->server);
    snprintf(dir, sizeof dir, "SIMFARM_BURST_DIR=%s", b->dir);
    snprintf(cores, sizeof cores, "SIMFARM_NODE_CORES=%u", b->o.cores);
    sf_str all = SF_STR_INIT, first = SF_STR_INIT;
    if (tokens != NULL) {
        sf_str_catf(&all, "NODE_CLAIM_TOKENS=%s", tokens);
        sf_str_catf(&first, "NODE_CLAIM_TOKEN=%.*s", (int)strcspn(tokens, " "), tokens);
    }
    const char *extra[] = { bin, server, dir, cores, tokens ? all.s : NULL, first.s, NULL };
    int rc = cd__burst_run(b, argv, extra, kind, tag);
    sf_str_free(&all);
    sf_str_free(&first);
    return rc;
}

static void exec_up(cd__burst *b, unsigned n, char (*tokens)[CD__BURST_TOKEN])
{
    char count[16];
    snprintf(count, sizeof count, "%u", n);
    sf_str t = SF_STR_INIT;
    for (unsigned i = 0; i < n; i++)
        sf_str_catf(&t, "%s%s", i ? " " : "", tokens[i]);
    const char *argv[] = { b->o.script, "up", count, NULL };
    if (run(b, argv, t.s, CD__RAN_UP, count) == 0) {
        b->asked += n;
    } else {
        cd__burst_up_ended(b, false);
    }
    sf_str_free(&t);
}

static void exec_down(cd__burst *b, cd__bnode *node, bool force)
{
    const char *argv[] = { b->o.script, "down", node->id, force ? "force" : NULL, NULL };
    run(b, argv, NULL, CD__RAN_DOWN, node->id);
}

static void exec_list(cd__burst *b)
{
    const char *argv[] = { b->o.script, "list", NULL };
    run(b, argv, NULL, CD__RAN_LIST, NULL);
}

static void exec_ran(cd__burst *b, int kind, const char *tag, int status, const char *out, const char *err)
{
    char line[256];
    sf_one_line(line, sizeof line, err);
    char ids[LIST_MAX][CD__BURST_ID];
    cd__bn_state states[LIST_MAX];
    double ages[LIST_MAX];
    unsigned n = 0;
    if (kind == CD__RAN_UP) {
        unsigned asked = (unsigned)strtoul(tag, NULL, 10);
        b->asked -= asked < b->asked ? asked : b->asked;
    }
    if (status != 0) {
        cd__burst_error(b, "%s %s%s%s failed (status %d): %s", b->o.script,
            kind == CD__RAN_UP ? "up" : kind == CD__RAN_DOWN ? "down" : "list", tag[0] ? " " : "", tag, status, line);
        if (kind == CD__RAN_UP)
            cd__burst_up_ended(b, false);
        return;
    }
    if (kind == CD__RAN_DOWN)
        return;
    for (const char *l = out; *l && n < LIST_MAX; l += strcspn(l, "\n"), l += *l == '\n') {
        char row[256], id[CD__BURST_ID] = "", state[32] = "";
        double age = -1;
        snprintf(row, sizeof row, "%.*s", (int)strcspn(l, "\n"), l);
        if (sscanf(row, "%63s %31s %lf", id, state, &age) < 1)
            continue;
        if (kind == CD__RAN_UP) {
            cd__burst_added(b, id, CD__BN_STARTING);
            n++;
            continue;
        }
        snprintf(ids[n], sizeof ids[n], "%s", id);
        states[n] = strcmp(state, "running") == 0 ? CD__BN_RUNNING
            : strcmp(state, "draining") == 0    ? CD__BN_DRAINING
                                                : CD__BN_STARTING;
        ages[n] = age;
        n++;
    }
    if (kind == CD__RAN_UP) {
        if (n == 0)
            cd__burst_error(b, "%s up %s printed no node id", b->o.script, tag);
        cd__burst_up_ended(b, n > 0);
    } else if (kind == CD__RAN_LIST) {
        cd__burst_listed(b, n, ids, states, ages);
    }
}

const cd__provider cd__burst_exec = { "exec", exec_up, exec_down, exec_list, exec_ran };
