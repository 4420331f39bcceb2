/*
 * burst.c — `simfarm burst status`: the coordinator's burst nodes and its
 * last decision, from GET /api/burst (actors/coord/burst.h).
 */
#include "cli/cli.h"
#include "cli/remote.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char status_usage[] =
    "usage: simfarm burst status [options]\n"
    "\n"
    "Shows the coordinator's burst nodes (serve --burst; docs/coordinator.md,\n"
    "\"Burst nodes\"): the provider, the nodes there are and the nodes wanted, each\n"
    "node's provider id, name, state (starting, running, draining) and age, and\n"
    "the last decision with why (GET /api/burst).\n"
    "  --json           print the API's answer as it is\n"
    "  --server URL --token TOKEN --ca FILE --config FILE   as every client command\n";

static const char *const nodes_head[] = { "ID", "NAME", "STATE", "AGE" };

static int burst_status(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "burst status", status_usage, argc, argv, NULL, 0, 0, "");
    if (rc != REMOTE_GO_ON)
        return rc;
    http_response res;
    if ((rc = remote_call(&r, "GET", "/api/burst", NULL, 0, "this coordinator runs no burst actor (serve --burst)",
             &res)) != 0)
        return rc;
    if (r.json) {
        remote_print_body(&res);
        http_response_free(&res);
        return SF_EXIT_OK;
    }
    remote_doc doc;
    if ((rc = remote_parse(&r, &res, &doc)) == 0) {
        const msgpack_object *b = doc.root, *last = remote_get(b, "last"), *nodes = remote_get(b, "nodes");
        char provider[32], cur[24], target[24], min[24], max[24], pending[32], speed[32], action[16], why[300],
            age[48];
        remote_count(pending, sizeof pending, remote_num(remote_get(b, "pending_items"), 0));
        remote_count(speed, sizeof speed, remote_num(remote_get(b, "node_items_per_s"), 0));
        printf("burst %s: %s nodes, target %s (%s to %s)\n",
            remote_text(remote_get(b, "provider"), provider, sizeof provider, "?"),
            remote_text(remote_get(b, "current"), cur, sizeof cur, "?"),
            remote_text(remote_get(b, "target"), target, sizeof target, "?"),
            remote_text(remote_get(b, "min"), min, sizeof min, "?"), remote_text(remote_get(b, "max"), max, sizeof max, "?"));
        printf("  pending   %s items, %s items/s a node\n", pending, speed);
        if (last != NULL) {
            remote_duration(age, sizeof age, (double)time(NULL) - remote_num(remote_get(last, "at"), 0));
            printf("  last      %s, %s ago: %s\n", remote_text(remote_get(last, "action"), action, sizeof action, "?"),
                age, remote_text(remote_get(last, "why"), why, sizeof why, ""));
        } else {
            printf("  last      no decision yet\n");
        }
        double failures = remote_num(remote_get(b, "up_failures"), 0);
        const msgpack_object *next = remote_get(b, "next_up_in_s");
        if (failures > 0) {
            char in[48] = "";
            if (next != NULL && next->type != MSGPACK_OBJECT_NIL)
                remote_duration(in, sizeof in, remote_num(next, 0));
            printf("  failing   up failed %.0f time%s in a row%s%s\n", failures, failures == 1 ? "" : "s",
                in[0] ? ": the next try in " : "", in);
        }
        uint32_t n_nodes = nodes != NULL && nodes->type == MSGPACK_OBJECT_ARRAY ? nodes->via.array.size : 0;
        if (n_nodes == 0) {
            printf("  no burst nodes\n");
        } else {
            remote_table t;
            remote_table_init(&t, 4, nodes_head);
            for (uint32_t i = 0; i < n_nodes; i++) {
                const msgpack_object *n = &nodes->via.array.ptr[i];
                char id[72], name[96], state[16];
                remote_duration(age, sizeof age, remote_num(remote_get(n, "age_s"), 0));
                const char *row[] = { remote_text(remote_get(n, "id"), id, sizeof id, "?"),
                    remote_text(remote_get(n, "name"), name, sizeof name, "?"),
                    remote_text(remote_get(n, "state"), state, sizeof state, "?"), age };
                remote_table_add(&t, row);
            }
            printf("\n");
            remote_table_print(&t, stdout);
        }
    }
    remote_doc_free(&doc);
    http_response_free(&res);
    return rc == 0 ? SF_EXIT_OK : rc;
}

int cmd_burst(int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "";
    if (strcmp(sub, "status") == 0)
        return burst_status(argc - 1, argv + 1);
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        fputs(status_usage, stdout);
        return SF_EXIT_OK;
    }
    fprintf(stderr, "simfarm burst: %s%s%s\n", sub[0] ? "unknown subcommand '" : "which subcommand? ", sub,
        sub[0] ? "'; burst status is the one" : "burst status");
    fputs(status_usage, stderr);
    return SF_EXIT_USAGE;
}
