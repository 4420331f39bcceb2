/*
 * nodes.c — `simfarm nodes`: the nodes a coordinator knows (GET /api/nodes);
 * `simfarm nodes prune` (POST /api/nodes/prune); `simfarm node revoke ID`
 * (POST /api/nodes/ID/revoke).
 */
#include "cli/cli.h"
#include "cli/remote.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char nodes_usage[] =
    "usage: simfarm nodes [--status S] [--owner O] [--tier T] [--limit N] [--offset K] [options]\n"
    "       simfarm nodes prune --offline-for DURATION [options]   (simfarm nodes prune --help)\n"
    "\n"
    "Lists the nodes enrolled with the coordinator, online first (GET /api/nodes):\n"
    "owner, tier, cores, the chunks it may hold (SLOTS), speed, the items it has\n"
    "had accepted in all its sessions (ITEMS), its results' checks on other owners'\n"
    "nodes, passed/failed (CHECKS), and its system (or browser). STATUS is online,\n"
    "offline, revoked, or quarantined (a check proved a result of it wrong: its key\n"
    "is revoked and its results retracted, docs/verification.md).\n"
    "  --status S       only nodes online, offline or revoked (quarantined ones\n"
    "                   are revoked)\n"
    "  --owner O        only O's nodes\n"
    "  --tier T         only nodes of tier T: own, team, community or public\n"
    "  --limit N        at most N nodes, 1 to 1000 (default: all)\n"
    "  --offset K       after the first K nodes of the list (default 0)\n" REMOTE_COMMON_FLAGS;


/* When the node was last heard from: its session's clock (Unix ms) while
 * online, else the nodes table's. */
static void last_seen(const msgpack_object *n, char *buf, size_t cap)
{
    int64_t ms;
    if (remote_int(remote_get(n, "last_seen_ms"), &ms) && ms > 0) {
        time_t secs = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
        return;
    }
    remote_when(remote_get(n, "last_seen"), buf, cap);
}

static const char *const nodes_head[] = { "ID", "NAME", "OWNER", "TIER", "STATUS", "CORES", "SLOTS", "ITEMS/S",
    "ITEMS", "CHECKS", "SYSTEM", "LAST SEEN" };

static void nodes_row(const msgpack_object *n, remote_table *t)
{
    /* What the node's hello said; older coordinators put it at the top. */
    const msgpack_object *caps = remote_get(n, "capabilities") ? remote_get(n, "capabilities") : n;
    const msgpack_object *online = remote_get(n, "online");
    bool is_online = online != NULL && online->type == MSGPACK_OBJECT_BOOLEAN && online->via.boolean;
    char id[24], name[64], owner[64], tier[24], cores[16], slots[16], speed[16], items[16], os[32], arch[32],
        browser[64], sys[72], seen[40];
    remote_count(speed, sizeof speed, remote_num(remote_get(n, "items_per_s"), 0));
    /* its work in all sessions; older coordinators had this session's only */
    const msgpack_object *total = remote_get(n, "items_total");
    remote_count(items, sizeof items, remote_num(total ? total : remote_get(n, "items_done"), 0));
    remote_text(remote_get(caps, "browser"), browser, sizeof browser, "");
    if (browser[0] != '\0')
        snprintf(sys, sizeof sys, "%s", browser);
    else
        snprintf(sys, sizeof sys, "%s/%s", remote_text(remote_get(caps, "os"), os, sizeof os, "?"),
            remote_text(remote_get(caps, "arch"), arch, sizeof arch, "?"));
    last_seen(n, seen, sizeof seen);
    /* null in the JSON reads as absent: a quarantine revokes the key too */
    const msgpack_object *q = remote_get(n, "quarantined_at"), *rv = remote_get(n, "revoked_at");
    bool quarantined = q != NULL && q->type != MSGPACK_OBJECT_NIL;
    bool revoked = rv != NULL && rv->type != MSGPACK_OBJECT_NIL;
    char checks[48] = "-";
    double passed = remote_num(remote_get(n, "checks_passed"), 0), failed = remote_num(remote_get(n, "checks_failed"), 0);
    if (passed + failed > 0)
        snprintf(checks, sizeof checks, "%.0f/%.0f", passed, failed);
    const char *row[] = {
        remote_text(remote_get(n, "id"), id, sizeof id, "?"),
        remote_text(remote_get(n, "name"), name, sizeof name, "-"),
        remote_text(remote_get(n, "owner"), owner, sizeof owner, "-"),
        remote_text(remote_get(n, "tier"), tier, sizeof tier, "-"),
        quarantined ? "quarantined" : revoked ? "revoked" : is_online ? "online" : "offline",
        remote_text(remote_get(caps, "cores"), cores, sizeof cores, "?"),
        is_online ? remote_text(remote_get(n, "slots"), slots, sizeof slots, "-") : "-",
        speed, items, checks, sys, seen,
    };
    remote_table_add(t, row);
}

static const char revoke_usage[] =
    "usage: simfarm node revoke ID [options]\n"
    "\n"
    "Revokes node ID (POST /api/nodes/ID/revoke; an admin API token): its sessions\n"
    "are closed at once, its chunks handed out again, and its key is refused from\n"
    "then on, whatever claim token it brings. Revoking a revoked node changes nothing.\n" REMOTE_COMMON_FLAGS;

int cmd_node_revoke(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "node revoke", revoke_usage, argc, argv, NULL, 1, 1, "the node id");
    if (rc != REMOTE_GO_ON)
        return rc;
    int64_t id;
    http_response res;
    if ((rc = remote_call_id(&r, "POST", "node", "/revoke", &id, &res)) != 0)
        return rc;
    if (r.json) {
        remote_print_body(&res);
    } else {
        remote_doc doc;
        char when[40] = "-";
        if (remote_parse(&r, &res, &doc) == 0)
            remote_when(remote_get(doc.root, "revoked_at"), when, sizeof when);
        remote_doc_free(&doc);
        printf("node %" PRId64 " revoked (since %s)\n", id, when);
    }
    http_response_free(&res);
    return SF_EXIT_OK;
}

static const char prune_usage[] =
    "usage: simfarm nodes prune --offline-for DURATION [options]\n"
    "\n"
    "Removes the rows of the nodes offline for DURATION or longer (POST\n"
    "/api/nodes/prune; an admin API token): 90m, 24h, 7d or seconds, a minute at\n"
    "least. Never a node online; a revoked node keeps its row (it keeps its key\n"
    "out), and so does one with results in a job that has not ended. A removed\n"
    "node's key must enrol again to come back, as a new node.\n"
    "  --offline-for D  how long a node must have been offline\n" REMOTE_COMMON_FLAGS;

static int nodes_prune(int argc, char **argv)
{
    const char *offline = NULL;
    const remote_opt opts[] = { { "--offline-for", &offline, NULL }, { NULL, NULL, NULL } };
    remote r;
    int rc = remote_init(&r, "nodes prune", prune_usage, argc, argv, opts, 0, 0, "");
    if (rc != REMOTE_GO_ON)
        return rc;
    long long secs;
    if (offline == NULL)
        return remote_fail(&r, SF_EXIT_USAGE, "--offline-for is required: how long a node must have been offline "
            "(90m, 24h, 7d)");
    if (!cli_duration(offline, &secs) || secs < 60)
        return remote_fail(&r, SF_EXIT_USAGE, "--offline-for wants a duration from a minute to 10 years, such as 90m, "
            "24h or 7d, not '%s'", offline);
    char body[64];
    snprintf(body, sizeof body, "{\"offline_for\":%lld}", secs);
    http_response res;
    remote_doc doc;
    if ((rc = remote_call(&r, "POST", "/api/nodes/prune", body, strlen(body), NULL, &res)) != 0 ||
        (rc = remote_answer(&r, &res, &doc)) != REMOTE_GO_ON)
        return rc;
    const msgpack_object *list = remote_get(doc.root, "removed");
    uint32_t n = list != NULL && list->type == MSGPACK_OBJECT_ARRAY ? list->via.array.size : 0;
    printf("%" PRIu32 " node%s removed, offline for %s or longer%s\n", n, n == 1 ? "" : "s", offline, n ? ":" : "");
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *x = &list->via.array.ptr[i];
        char id[24], name[80], when[40];
        printf("  node %s %s, last seen %s\n", remote_text(remote_get(x, "id"), id, sizeof id, "?"),
            remote_text(remote_get(x, "name"), name, sizeof name, "-"),
            remote_when(remote_get(x, "last_seen"), when, sizeof when));
    }
    remote_doc_free(&doc);
    return SF_EXIT_OK;
}

int cmd_nodes(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "prune") == 0)
        return nodes_prune(argc - 1, argv + 1);
    const char *status = NULL, *owner = NULL, *tier = NULL, *limit = NULL, *offset = NULL;
    const remote_opt opts[] = {
        { "--status", &status, NULL }, { "--owner", &owner, NULL }, { "--tier", &tier, NULL },
        { "--limit", &limit, NULL }, { "--offset", &offset, NULL }, { NULL, NULL, NULL },
    };
    remote r;
    int rc = remote_init(&r, "nodes", nodes_usage, argc, argv, opts, 0, 0, "");
    if (rc != REMOTE_GO_ON)
        return rc;
    if (status != NULL && strcmp(status, "online") != 0 && strcmp(status, "offline") != 0 &&
        strcmp(status, "revoked") != 0)
        return remote_fail(&r, SF_EXIT_USAGE, "--status is one of online, offline, revoked; not '%s'", status);
    if (tier != NULL && !remote_tier(tier))
        return remote_fail(&r, SF_EXIT_USAGE, "--tier is one of own, team, community, public; not '%s'", tier);
    if (limit != NULL && !remote_whole(limit, 1, 1000))
        return remote_fail(&r, SF_EXIT_USAGE, "--limit wants a number from 1 to 1000, not '%s'", limit);
    if (offset != NULL && !remote_whole(offset, 0, LONG_MAX))
        return remote_fail(&r, SF_EXIT_USAGE, "--offset wants a whole number, 0 or more, not '%s'", offset);
    char target[1024];
    const char *names[] = { "status", "owner", "tier", "limit", "offset" },
               *values[] = { status, owner, tier, limit, offset };
    if ((rc = remote_target(&r, target, sizeof target, "/api/nodes", names, values, 5)) != 0)
        return rc;
    return remote_list(&r, target, "nodes", nodes_head, 12, nodes_row);
}
