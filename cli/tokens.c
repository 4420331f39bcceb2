/*
 * tokens.c — `simfarm token create | list | revoke`: API and claim tokens
 * (/api/tokens in docs/api.md).
 */
#include "cli/cli.h"
#include "cli/remote.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char token_usage[] =
    "usage: simfarm token create --kind api|claim [--owner O] [--tier T] [--uses N] [--expires DURATION]\n"
    "                            [--note TEXT]\n"
    "       simfarm token list\n"
    "       simfarm token revoke ID\n"
    "\n"
    "Creates, lists and revokes tokens; each needs a token already (the first one is\n"
    "the admin token `simfarm serve --token-file` writes). `simfarm token create\n"
    "--help` says more.\n";

static const char create_usage[] =
    "usage: simfarm token create --kind api|claim [--owner O] [--tier T] [--uses N] [--expires DURATION]\n"
    "                            [--note TEXT]\n"
    "\n"
    "Creates a token (POST /api/tokens) and prints its secret, which is shown once.\n"
    "  --kind api|claim     api: for the API (--token); claim: enrols nodes\n"
    "                       (simfarm node --claim-token)\n"
    "  --uses N             a claim token's enrolments: N new node keys, 1 to 100000\n"
    "                       (default 1); a key it enrolled comes back with it\n"
    "                       without using another\n"
    "  --owner O            whose it is (default yours; others need an admin token)\n"
    "  --tier T             a claim token's node tier: own (default), team,\n"
    "                       community, public\n"
    "  --expires DURATION   lifetime: 90s, 30m, 24h, 7d or seconds (claim tokens\n"
    "                       default to 24h; API tokens to never); --expires-in\n"
    "                       SECONDS says the same\n"
    "  --note TEXT          a note, up to 256 characters\n" REMOTE_COMMON_FLAGS;

static const char list_usage[] =
    "usage: simfarm token list [options]\n"
    "\n"
    "Lists tokens without their secrets (GET /api/tokens).\n" REMOTE_COMMON_FLAGS;

static const char revoke_usage[] =
    "usage: simfarm token revoke ID [options]\n"
    "\n"
    "Revokes token ID (DELETE /api/tokens/ID): an API token is refused from then\n"
    "on, an unused claim token can no longer enrol a node.\n" REMOTE_COMMON_FLAGS;

static int token_create(int argc, char **argv)
{
    const char *kind = NULL, *owner = NULL, *tier = NULL, *expires = NULL, *expires_in = NULL, *note = NULL,
               *uses = NULL;
    const remote_opt opts[] = {
        { "--kind", &kind, NULL }, { "--owner", &owner, NULL }, { "--tier", &tier, NULL },
        { "--expires-in", &expires_in, NULL }, { "--expires", &expires, NULL }, { "--uses", &uses, NULL },
        { "--note", &note, NULL }, { NULL, NULL, NULL },
    };
    remote r;
    int rc = remote_init(&r, "token create", create_usage, argc, argv, opts, 0, 0, "");
    if (rc != REMOTE_GO_ON)
        return rc;
    if (kind == NULL)
        return remote_fail(&r, SF_EXIT_USAGE, "--kind api or --kind claim is required");
    if (strcmp(kind, "api") != 0 && strcmp(kind, "claim") != 0)
        return remote_fail(&r, SF_EXIT_USAGE, "--kind is api or claim, not '%s'", kind);
    if (tier != NULL && !remote_tier(tier))
        return remote_fail(&r, SF_EXIT_USAGE, "--tier is own, team, community or public, not '%s'", tier);
    long long secs = 0;
    if (expires != NULL && expires_in != NULL)
        return remote_fail(&r, SF_EXIT_USAGE, "--expires and --expires-in say the same: give one");
    if (expires_in != NULL) {
        char *end;
        errno = 0;
        secs = strtoll(expires_in, &end, 10);
        if (*end != '\0' || end == expires_in || errno != 0 || secs < 1)
            return remote_fail(&r, SF_EXIT_USAGE, "--expires-in wants a number of seconds, not '%s'", expires_in);
        expires = expires_in;
    } else if (expires != NULL && !cli_duration(expires, &secs)) {
        return remote_fail(&r, SF_EXIT_USAGE, "--expires wants a duration such as 90s, 30m, 24h or 7d (10 years at "
            "most), not '%s'", expires);
    }
    if (uses != NULL && !remote_whole(uses, 1, 100000))
        return remote_fail(&r, SF_EXIT_USAGE, "--uses wants a number of enrolments from 1 to 100000, not '%s'", uses);
    if (uses != NULL && strcmp(kind, "claim") != 0)
        return remote_fail(&r, SF_EXIT_USAGE, "--uses is for claim tokens (--kind claim)");
    if (note != NULL && strlen(note) > 1024)
        return remote_fail(&r, SF_EXIT_USAGE, "--note is too long");

    char body[2048] = "{\"kind\":";
    remote_json_quote(body, sizeof body, kind);
    const char *names[] = { "owner", "tier", "note" }, *values[] = { owner, tier, note };
    for (int i = 0; i < 3; i++) {
        if (values[i] == NULL)
            continue;
        size_t n = strlen(body);
        snprintf(body + n, sizeof body - n, ",\"%s\":", names[i]);
        if (remote_json_quote(body, sizeof body, values[i]) != 0)
            return remote_fail(&r, SF_EXIT_USAGE, "--%s is too long", names[i]);
    }
    size_t n = strlen(body);
    if (uses != NULL)
        n += (size_t)snprintf(body + n, sizeof body - n, ",\"uses\":%s", uses);
    if (expires != NULL)
        snprintf(body + n, sizeof body - n, ",\"expires_in\":%lld}", secs);
    else
        snprintf(body + n, sizeof body - n, "}");

    http_response res;
    remote_doc doc;
    if ((rc = remote_call(&r, "POST", "/api/tokens", body, strlen(body), NULL, &res)) != 0 ||
        (rc = remote_answer(&r, &res, &doc)) != REMOTE_GO_ON)
        return rc;
    rc = SF_EXIT_OK;
    char id[24], k[16], own[64], ti[24], secret[256], when[40];
    remote_text(remote_get(doc.root, "id"), id, sizeof id, "?");
    remote_text(remote_get(doc.root, "kind"), k, sizeof k, kind);
    remote_text(remote_get(doc.root, "owner"), own, sizeof own, "?");
    remote_text(remote_get(doc.root, "token"), secret, sizeof secret, "");
    bool claim = strcmp(k, "claim") == 0;
    if (secret[0] == '\0') {
        rc = remote_fail(&r, SF_EXIT_FAIL, "the server's answer holds no token");
    } else {
        const msgpack_object *exp = remote_get(doc.root, "expires_at");
        printf("%s token %s for %s", claim ? "claim" : "API", id, own);
        if (claim)
            printf(", tier %s", remote_text(remote_get(doc.root, "tier"), ti, sizeof ti, "own"));
        printf(", %s%s", exp ? "expires " : "never expires", exp ? remote_when(exp, when, sizeof when) : "");
        int64_t u = 1;
        if (claim && remote_int(remote_get(doc.root, "uses"), &u))
            printf(", enrols %" PRId64 " node%s", u, u == 1 ? "" : "s");
        printf(" (the secret is shown once: keep it)\n");
        printf("%s\n", secret);
        if (claim) {
            /* The node's endpoint on the same host and port as the API. */
            const char *hostport = r.url.origin + strlen(r.url.tls ? "https://" : "http://");
            printf("enrol a node with: simfarm node --server %s://%s%s/ws/node --claim-token %s\n",
                r.url.tls ? "wss" : "ws", hostport, r.url.prefix, secret);
        } else {
            printf("use it with --token, $SIMFARM_TOKEN or 'token = ...' in the config file\n");
        }
    }
    remote_doc_free(&doc);
    return rc;
}

/* active, used (up), revoked or expired. */
static const char *token_state(const msgpack_object *t)
{
    int64_t left;
    if (remote_get(t, "revoked_at") != NULL)
        return "revoked";
    /* a coordinator that predates uses: a claim token's first use is its last */
    if (remote_int(remote_get(t, "uses_left"), &left) ? left == 0 : remote_get(t, "used_at") != NULL)
        return "used";
    double exp = remote_time(remote_get(t, "expires_at"));
    if (!isnan(exp) && exp <= (double)time(NULL))
        return "expired";
    return "active";
}

static const char *const tokens_head[] = { "ID", "KIND", "OWNER", "TIER", "STATE", "USES LEFT", "CREATED", "EXPIRES",
    "NOTE" };

static void tokens_row(const msgpack_object *k, remote_table *t)
{
    char id[24], kind[16], owner[64], tier[24], created[40], expires[40], note[260], uses[48] = "-";
    int64_t left, all;
    if (remote_int(remote_get(k, "uses_left"), &left) && remote_int(remote_get(k, "uses"), &all))
        snprintf(uses, sizeof uses, "%" PRId64 " of %" PRId64, left, all);
    const char *row[] = {
        remote_text(remote_get(k, "id"), id, sizeof id, "?"),
        remote_text(remote_get(k, "kind"), kind, sizeof kind, "?"),
        remote_text(remote_get(k, "owner"), owner, sizeof owner, "-"),
        remote_text(remote_get(k, "tier"), tier, sizeof tier, "-"),
        token_state(k),
        uses,
        remote_when(remote_get(k, "created_at"), created, sizeof created),
        remote_get(k, "expires_at") ? remote_when(remote_get(k, "expires_at"), expires, sizeof expires) : "never",
        remote_text(remote_get(k, "note"), note, sizeof note, ""),
    };
    remote_table_add(t, row);
}

static int token_list(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "token list", list_usage, argc, argv, NULL, 0, 0, "");
    if (rc != REMOTE_GO_ON)
        return rc;
    return remote_list(&r, "/api/tokens", "tokens", tokens_head, 9, tokens_row);
}

static int token_revoke(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "token revoke", revoke_usage, argc, argv, NULL, 1, 1, "the token id");
    if (rc != REMOTE_GO_ON)
        return rc;
    int64_t id;
    http_response res;
    if ((rc = remote_call_id(&r, "DELETE", "token", "", &id, &res)) != 0)
        return rc;
    if (r.json)
        remote_print_body(&res);
    else
        printf("token %" PRId64 " revoked\n", id);
    http_response_free(&res);
    return SF_EXIT_OK;
}

int cmd_token(int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "";
    if (strcmp(sub, "create") == 0)
        return token_create(argc - 1, argv + 1);
    if (strcmp(sub, "list") == 0)
        return token_list(argc - 1, argv + 1);
    if (strcmp(sub, "revoke") == 0)
        return token_revoke(argc - 1, argv + 1);
    if (argc < 2) {
        fprintf(stderr, "simfarm token: which one: create, list or revoke? (see simfarm token --help)\n");
        return SF_EXIT_USAGE;
    }
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        fputs(token_usage, stdout);
        return SF_EXIT_OK;
    }
    fprintf(stderr, "simfarm token: unknown subcommand '%s' (create, list, revoke)\n", sub);
    return SF_EXIT_USAGE;
}
