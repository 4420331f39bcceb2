/*
 * burst_local.c — the `local` provider: burst nodes as `simfarm node`
 * processes on this machine, children of the coordinator. Each has its own
 * key (DIR/burst-local-N.key) and log (DIR/burst-local-N.log); SIGTERM
 * drains one, SIGKILL forces it. The actor's table is the truth: a node is
 * gone when its process exits.
 */
#include "actors/coord/burst_int.h"

#include "base/log.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static void local_up(cd__burst *b, unsigned n, char (*tokens)[CD__BURST_TOKEN])
{
    for (unsigned i = 0; i < n; i++) {
        char id[CD__BURST_ID], name[CD__BURST_ID + 16], key[4200], log[4200], cores[16], env[CD__BURST_TOKEN + 24];
        snprintf(id, sizeof id, "%u", ++b->seq);
        snprintf(name, sizeof name, "burst-local-%s", id);
        snprintf(key, sizeof key, "%s/%s.key", b->dir, name);
        snprintf(log, sizeof log, "%s/%s.log", b->dir, name);
        /* the token in its environment, not on its command line, where ps shows it */
        snprintf(env, sizeof env, "NODE_CLAIM_TOKEN=%s", tokens[i]);
        const char *argv[12], *extra[] = { env, NULL };
        cd__burst_node_argv(b, name, key, argv, cores, sizeof cores);
        bool ok = cd__burst_spawn_node(b, argv, extra, log, id) == 0;
        if (ok)
            cd__burst_added(b, id, CD__BN_RUNNING);
        cd__burst_up_ended(b, ok);
    }
}

static void local_down(cd__burst *b, cd__bnode *node, bool force)
{
    cd__burst_kill(b, node->id, force ? SIGKILL : SIGTERM);
}

static void local_ran(cd__burst *b, int kind, const char *tag, int status, const char *out, const char *err)
{
    (void)b;
    (void)kind;
    (void)tag;
    (void)status;
    (void)out;
    (void)err;
}

const cd__provider cd__burst_local = { "local", local_up, local_down, NULL, local_ran };
