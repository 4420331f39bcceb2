/*
 * node.c — `simfarm node`: a headless compute node (node-native/node.h).
 *
 *   simfarm node --server ws://127.0.0.1:8080/ws/node [--cores N] [--backend B] [--key PATH]
 *                [--claim-token T] [--name NAME] [--grace S] [--log-format text|json] [--ca PEM]
 *                [--priority low|idle|normal]
 *
 * and `simfarm node rm ID` (DELETE /api/nodes/ID).
 */
#include "cli/cli.h"
#include "cli/remote.h"
#include "node-native/node.h"
#include "proto/msg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void node_usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm node [--server URL] [--cores N] [--backend B] [--key PATH]\n"
        "                    [--claim-token TOKEN] [--name NAME] [--grace SECONDS]\n"
        "                    [--log-format text|json] [--ca PEM] [--priority low|idle|normal]\n"
        "       simfarm node rm ID [options]        (simfarm node rm --help)\n"
        "\n"
        "Lends this machine to a coordinator: connects to URL (ws://HOST:PORT/ws/node,\n"
        "or the coordinator's http://HOST:PORT with the path prefix a proxy serves it\n"
        "under, if any; no port: 80, or 443 over TLS; default $SIMFARM_SERVER, else\n"
        "ws://127.0.0.1:8080/ws/node), computes the chunks it is given and sends\n"
        "signed results. wss:// (or https://) connects over TLS and checks the\n"
        "coordinator's certificate against the system's CAs, or against the PEM\n"
        "certificates of --ca (default $SIMFARM_CA). Workers: --backend auto (default) runs one per core (N with\n"
        "--cores) plus one per GPU (CUDA, or OpenCL through the ICD loader); cpu,\n"
        "opencl (every OpenCL device, CPU devices too) and cuda name backends, and a\n"
        "list such as cpu,opencl combines them. The key is created on first start in\n"
        "PATH (default $STATE_DIRECTORY/node.key under a systemd unit with\n"
        "StateDirectory=, else $XDG_DATA_HOME/simfarm/node.key), mode 0600: one key,\n"
        "one node (a second process on a live node's key is refused). A new key enrols\n"
        "with a claim token (--claim-token, or $NODE_CLAIM_TOKEN). The node goes by\n"
        "NAME (default $SIMFARM_NODE_NAME, else this machine's host name): 1 to 64\n"
        "printable characters, shown in the nodes list. The workers compute\n"
        "at --priority low (default: nice 19), idle (only what the machine's other\n"
        "work leaves, SCHED_IDLE) or normal; the connection keeps the process's.\n"
        "SIGINT or SIGTERM finishes the chunks in hand, then leaves; chunks not done\n"
        "after the grace period (default 30 s; 0 waits without limit) are handed\n"
        "back, and a second signal leaves at once. Exit status: 0 stopped, 1 could\n"
        "not start (key file, no device for --backend), 2 usage, 3 the coordinator\n"
        "does not know this key (enrol with --claim-token), 4 another process is\n"
        "this node already (its key has a live session).\n");
}

static const char rm_usage[] =
    "usage: simfarm node rm ID [options]\n"
    "\n"
    "Removes node ID's row (DELETE /api/nodes/ID; an admin API token): a node\n"
    "offline, not revoked (a revoked node's row keeps its key out), with no results\n"
    "in a job that has not ended. Its key must enrol again to come back, as a new\n"
    "node. `simfarm nodes prune --offline-for 7d` removes every node offline that\n"
    "long.\n" REMOTE_COMMON_FLAGS;

static int node_rm(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "node rm", rm_usage, argc, argv, NULL, 1, 1, "the node id");
    if (rc != REMOTE_GO_ON)
        return rc;
    int64_t id;
    http_response res;
    if ((rc = remote_call_id(&r, "DELETE", "node", "", &id, &res)) != 0)
        return rc;
    if (r.json) {
        remote_print_body(&res);
    } else {
        remote_doc doc;
        char name[80] = "", when[40] = "-";
        if (remote_parse(&r, &res, &doc) == 0) {
            remote_text(remote_get(doc.root, "name"), name, sizeof name, "");
            remote_when(remote_get(doc.root, "last_seen"), when, sizeof when);
        }
        remote_doc_free(&doc);
        printf("node %" PRId64 "%s%s%s removed (last seen %s)\n", id, name[0] ? " (" : "", name, name[0] ? ")" : "",
            when);
    }
    http_response_free(&res);
    return SF_EXIT_OK;
}

int cmd_node(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "rm") == 0)
        return node_rm(argc - 1, argv + 1);
    /* an empty variable counts as unset, as in the client commands */
    const char *server = getenv("SIMFARM_SERVER"), *ca = getenv("SIMFARM_CA"), *claim = getenv("NODE_CLAIM_TOKEN"),
               *name = getenv("SIMFARM_NODE_NAME");
    nd_opts o = { .url = server && *server ? server : "ws://127.0.0.1:8080/ws/node",
        .url_from = server && *server ? "$SIMFARM_SERVER" : NULL, .claim_token = claim && *claim ? claim : NULL,
        .ca_path = ca && *ca ? ca : NULL, .ca_from = ca && *ca ? "$SIMFARM_CA" : NULL, .grace_s = 30,
        .name = name && *name ? name : NULL };
    const char *name_from = "$SIMFARM_NODE_NAME";
    static const cli_flag flags[] = { { "--help", false }, { "--server", true }, { "--key", true }, { "--ca", true },
        { "--claim-token", true }, { "--cores", true }, { "--backend", true }, { "--grace", true },
        { "--priority", true }, { "--log-format", true }, { "--name", true }, { NULL, false } };
    cli_args it = CLI_ARGS(argc, argv, flags, 0);
    const char *a, *v;
    sf_error e;
    int next;
    while ((next = cli_next(&it, &a, &v, &e)) > 0) {
        if (strcmp(a, "--help") == 0) {
            node_usage(stdout);
            return SF_EXIT_OK;
        } else if (strcmp(a, "--server") == 0) {
            o.url = v;
            o.url_from = NULL;
        } else if (strcmp(a, "--key") == 0) {
            o.key_path = v;
        } else if (strcmp(a, "--ca") == 0) {
            o.ca_path = v;
            o.ca_from = NULL;
        } else if (strcmp(a, "--claim-token") == 0) {
            o.claim_token = v;
        } else if (strcmp(a, "--name") == 0) {
            o.name = v;
            name_from = "--name";
        } else if (strcmp(a, "--cores") == 0) {
            long n;
            if (!cli_number(v, 1, ND_MAX_WORKERS, &n)) {
                fprintf(stderr, "simfarm node: --cores wants a number from 1 to %u, not '%s'\n", ND_MAX_WORKERS, v);
                return SF_EXIT_USAGE;
            }
            o.cores = (unsigned)n;
        } else if (strcmp(a, "--backend") == 0) {
            o.backend = v;
        } else if (strcmp(a, "--grace") == 0) {
            long n;
            if (!cli_number(v, 0, 86400, &n)) {
                fprintf(stderr, "simfarm node: --grace wants seconds from 0 to 86400, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
            o.grace_s = (unsigned)n;
        } else if (strcmp(a, "--priority") == 0) {
            if (strcmp(v, "low") == 0)
                o.priority = ND_PRIORITY_LOW;
            else if (strcmp(v, "idle") == 0)
                o.priority = ND_PRIORITY_IDLE;
            else if (strcmp(v, "normal") == 0)
                o.priority = ND_PRIORITY_NORMAL;
            else {
                fprintf(stderr, "simfarm node: --priority wants low, idle or normal, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
        } else if (strcmp(a, "--log-format") == 0) {
            if (!sf_log_format_parse(v, &o.log_format)) {
                fprintf(stderr, "simfarm node: --log-format wants text or json, not '%s'\n", v);
                return SF_EXIT_USAGE;
            }
        }
    }
    if (next != 0)
        return cli_refuse("node", &e, node_usage);
    const char *bad = o.name != NULL ? pr_node_name_check(o.name) : NULL;
    if (bad != NULL) {
        fprintf(stderr, "simfarm node: %s: the node name %s; a name is 1 to 64 printable characters\n", name_from, bad);
        return SF_EXIT_USAGE;
    }
    return nd_run(&o);
}
