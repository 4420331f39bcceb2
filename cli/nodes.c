/*
 * nodes.c — `simfarm nodes`: the nodes a coordinator knows (GET /api/nodes).
 */
#include "cli/cli.h"
#include "cli/remote.h"

#include <string.h>

static const char nodes_usage[] =
    "usage: simfarm nodes [options]\n"
    "\n"
    "Lists the nodes the coordinator knows, online first (GET /api/nodes): owner,\n"
    "tier, cores, speed and the work done.\n" REMOTE_COMMON_FLAGS;

int cmd_nodes(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "nodes", nodes_usage, argc, argv, NULL, 0, 0, "");
    if (rc != REMOTE_GO_ON)
        return rc;
    http_response res;
    if ((rc = remote_call(&r, "GET", "/api/nodes", NULL, 0, NULL, &res)) != 0)
        return rc;
    if (r.json) {
        remote_print_body(&res);
        http_response_free(&res);
        return REMOTE_OK;
    }
    remote_doc doc;
    rc = remote_parse(&r, &res, &doc);
    if (rc == 0 && doc.root->type != MSGPACK_OBJECT_ARRAY)
        rc = remote_fail(&r, REMOTE_FAIL, "the server's answer is not a list of nodes");
    if (rc == 0 && doc.root->via.array.size == 0) {
        printf("no nodes\n");
    } else if (rc == 0) {
        static const char *const head[] = { "ID", "NAME", "OWNER", "TIER", "STATUS", "CORES", "ITEMS/S", "ITEMS",
            "SYSTEM", "LAST SEEN" };
        remote_table t;
        remote_table_init(&t, 10, head);
        for (uint32_t i = 0; i < doc.root->via.array.size; i++) {
            const msgpack_object *n = &doc.root->via.array.ptr[i];
            const msgpack_object *online = remote_get(n, "online");
            char id[24], name[64], owner[64], tier[24], cores[16], speed[16], items[16], os[32], arch[32],
                sys[72], seen[40];
            remote_count(speed, sizeof speed, remote_num(remote_get(n, "items_per_s"), 0));
            remote_count(items, sizeof items, remote_num(remote_get(n, "items_done"), 0));
            snprintf(sys, sizeof sys, "%s/%s", remote_text(remote_get(n, "os"), os, sizeof os, "?"),
                remote_text(remote_get(n, "arch"), arch, sizeof arch, "?"));
            const char *row[] = {
                remote_text(remote_get(n, "id"), id, sizeof id, "?"),
                remote_text(remote_get(n, "name"), name, sizeof name, "-"),
                remote_text(remote_get(n, "owner"), owner, sizeof owner, "-"),
                remote_text(remote_get(n, "tier"), tier, sizeof tier, "-"),
                online != NULL && online->type == MSGPACK_OBJECT_BOOLEAN && online->via.boolean ? "online" : "offline",
                remote_text(remote_get(n, "cores"), cores, sizeof cores, "?"),
                speed, items, sys,
                remote_when(remote_get(n, "last_seen"), seen, sizeof seen),
            };
            remote_table_add(&t, row);
        }
        remote_table_print(&t, stdout);
    }
    remote_doc_free(&doc);
    http_response_free(&res);
    return rc;
}
