/*
 * node.c — `simfarm node`: a headless compute node (node-native/node.h).
 *
 *   simfarm node --server ws://127.0.0.1:8080/ws/node [--cores N] [--key PATH] [--claim-token T]
 */
#include "cli/cli.h"
#include "node-native/node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void node_usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm node [--server URL] [--cores N] [--key PATH] [--claim-token TOKEN]\n"
        "\n"
        "Lends this machine to a coordinator: connects to URL (ws://HOST:PORT/ws/node,\n"
        "or the coordinator's http://HOST:PORT; default $SIMFARM_SERVER, else\n"
        "ws://127.0.0.1:8080/ws/node), computes the chunks it is given on N cores\n"
        "(default all) and sends signed results. The key is created on first start in\n"
        "PATH (default $XDG_DATA_HOME/simfarm/node.key), mode 0600. A new key enrols\n"
        "with a claim token (--claim-token, or $NODE_CLAIM_TOKEN).\n"
        "SIGINT or SIGTERM finishes the chunks in hand, then leaves; a second signal\n"
        "leaves at once. Exit status: 0 stopped, 1 could not start, 2 usage,\n"
        "3 the coordinator does not know this key (enrol with --claim-token).\n");
}

int cmd_node(int argc, char **argv)
{
    nd_opts o = { .url = getenv("SIMFARM_SERVER") ? getenv("SIMFARM_SERVER") : "ws://127.0.0.1:8080/ws/node",
        .claim_token = getenv("NODE_CLAIM_TOKEN") };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            node_usage(stdout);
            return ND_EXIT_OK;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "simfarm node: '%s' needs a value\n\n", a);
            node_usage(stderr);
            return ND_EXIT_USAGE;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--server") == 0) {
            o.url = v;
        } else if (strcmp(a, "--key") == 0) {
            o.key_path = v;
        } else if (strcmp(a, "--claim-token") == 0) {
            o.claim_token = v;
        } else if (strcmp(a, "--cores") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end != '\0' || n < 1 || n > 1024) {
                fprintf(stderr, "simfarm node: --cores wants a number from 1 to 1024, not '%s'\n", v);
                return ND_EXIT_USAGE;
            }
            o.cores = (unsigned)n;
        } else {
            fprintf(stderr, "simfarm node: unknown option '%s'\n\n", a);
            node_usage(stderr);
            return ND_EXIT_USAGE;
        }
    }
    return nd_run(&o);
}
