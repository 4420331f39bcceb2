/*
 * main.c — the `simfarm` command: dispatches to one subcommand.
 *
 * Running a farm: serve, node, up. Using one over its HTTP API: submit,
 * jobs, job, watch, cancel, nodes, token (cli/jobs.c, nodes.c, tokens.c on
 * cli/remote.h and cli/http.h). Locally: sim, version.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <libpq-fe.h>
#include <libwebsockets.h>
#include <msgpack.h>
#include <sodium.h>
#include <uv.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/version.h"
#include "cli/cli.h"
#include "sim/sim.h"

bool cli_number(const char *v, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long n = v ? strtol(v, &end, 10) : 0;
    if (v == NULL || end == v || *end != '\0' || errno != 0 || n < min || n > max)
        return false;
    *out = n;
    return true;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: simfarm <command> [options]     (simfarm <command> --help says more)\n"
        "\n"
        "run a farm:\n"
        "  up         a farm on this machine: PostgreSQL in var/, the coordinator, local nodes\n"
        "  serve      run the coordinator: serve --db CONNINFO [--listen HOST:PORT]\n"
        "  node       lend this machine to a coordinator: node [--server URL] [--cores N] [--name NAME]\n"
        "\n"
        "use a farm (over its HTTP API; --server URL, --token TOKEN, --json):\n"
        "  submit     submit a job: submit FILE.json [--watch]\n"
        "  jobs       list jobs: jobs [--state S] [--owner O] [--kernel K] [--limit N]\n"
        "  job        one job's state, progress and result: job ID\n"
        "  watch      follow a job until it ends: watch ID\n"
        "  cancel     cancel a job: cancel ID\n"
        "  nodes      list the nodes: nodes [--status S] [--owner O] [--tier T] [--limit N]; nodes prune --offline-for 7d\n"
        "  node revoke  revoke a node (admin token): node revoke ID\n"
        "  node rm    remove an offline node's row (admin token): node rm ID\n"
        "  token      API and claim tokens: token create --kind api|claim [--uses N] [--expires 24h] | token list | token revoke ID\n"
        "  burst      the burst nodes (serve --burst): burst status\n"
        "\n"
        "on this machine:\n"
        "  sim        run a kernel locally: sim <option|combat> params.json [--items N] [--backend cpu|opencl|cuda]\n"
        "  version    print the version and the libraries and devices found\n"
        "  help       this text\n"
        "\n"
        "The client commands read the server and token from --server/--token, then\n"
        "$SIMFARM_SERVER/$SIMFARM_TOKEN, then the config file (docs/cli.md).\n");
}

/* Lists OpenCL platforms and devices through the ICD loader; returns the
 * number of devices, or -1 when the loader reports an error. */
static int list_opencl(void)
{
    cl_platform_id plats[8];
    cl_uint nplat = 0;
    int total = 0;

    if (clGetPlatformIDs(8, plats, &nplat) != CL_SUCCESS)
        return -1;
    for (cl_uint p = 0; p < nplat && p < 8; p++) {
        char pname[128] = "";
        cl_device_id devs[SIM_CL_PLATFORM_DEVICES];
        cl_uint ndev = 0;
        clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, SIM_CL_PLATFORM_DEVICES, devs, &ndev) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < ndev && d < SIM_CL_PLATFORM_DEVICES; d++) {
            char dname[256] = "";
            cl_ulong mem = 0;
            clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dname, dname, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
            printf("  opencl       %s: %s (%llu MiB)\n", pname, dname,
                (unsigned long long)(mem >> 20));
            total++;
        }
    }
    return total;
}

static int cmd_version(void)
{
    printf("simfarm %s\n", SF_VERSION);
    printf("  libuv        %s\n", uv_version_string());
    printf("  libsodium    %s\n", sodium_version_string());
    printf("  msgpack-c    %s\n", msgpack_version());
    printf("  libwebsockets %s\n", lws_get_library_version());
    printf("  libpq        %d\n", PQlibVersion());
    if (list_opencl() <= 0)
        printf("  opencl       no devices found\n");
    return SF_EXIT_OK;
}


int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "help";

    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return cmd_version();
    if (strcmp(cmd, "up") == 0)
        return cmd_up(argc - 1, argv + 1);
    if (strcmp(cmd, "sim") == 0)
        return cmd_sim(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0)
        return cmd_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "node") == 0 && argc > 2 && strcmp(argv[2], "revoke") == 0)
        return cmd_node_revoke(argc - 2, argv + 2);
    if (strcmp(cmd, "node") == 0)
        return cmd_node(argc - 1, argv + 1);
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } commands[] = {
        { "submit", cmd_submit }, { "jobs", cmd_jobs }, { "job", cmd_job }, { "watch", cmd_watch },
        { "cancel", cmd_cancel }, { "nodes", cmd_nodes }, { "token", cmd_token }, { "burst", cmd_burst },
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return SF_EXIT_OK;
    }
    fprintf(stderr, "simfarm: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return SF_EXIT_USAGE;
}
