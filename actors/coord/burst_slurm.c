/*
 * burst_slurm.c — the `slurm` provider: each burst node is a batch job,
 *
 *     sbatch --parsable --job-name simfarm-burst-HASH --cpus-per-task C
 *            [--partition P] [--account A] [--time T] [--gres gpu:N]
 *            --output DIR/burst-slurm-%j.log
 *            --wrap "exec simfarm node ... --name burst-slurm-$SLURM_JOB_ID"
 *
 * with its claim token in the job's environment (sbatch exports the
 * submitter's). HASH is of the server the nodes join, so two coordinators
 * on one cluster list only their own jobs. squeue says which exist and
 * how long each has run; a node is drained with `scancel --batch
 * --signal=TERM` (the batch shell is the node, by exec) and forced with a
 * plain `scancel`, which sends SIGTERM, waits the cluster's KillWait, then
 * SIGKILL.
 */
#include "actors/coord/burst_int.h"

#include "base/fnv.h"
#include "base/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LIST_MAX = CD__BURST_MAX_NODES };

static void job_name(const cd__burst *b, char *out, size_t cap)
{
    snprintf(out, cap, "simfarm-burst-%08x", (unsigned)sf_fnv32(SF_FNV32_BASIS, b->server, strlen(b->server)));
}

/* s in single quotes for sh, a quote inside as '\'' */
static void cat_quoted(sf_str *to, const char *s)
{
    sf_str_cat(to, "'");
    for (; *s; s++) {
        if (*s == '\'')
            sf_str_cat(to, "'\\''");
        else
            sf_str_catn(to, s, 1);
    }
    sf_str_cat(to, "'");
}

static void slurm_up(cd__burst *b, unsigned n, char (*tokens)[CD__BURST_TOKEN])
{
    char name[64], cpus[32], out[4200], gres[32], part[300], acct[300], tl[300], cores[16];
    job_name(b, name, sizeof name);
    snprintf(cpus, sizeof cpus, "--cpus-per-task=%u", b->o.cores);
    snprintf(out, sizeof out, "--output=%s/burst-slurm-%%j.log", b->dir);
    snprintf(cores, sizeof cores, "%u", b->o.cores);
    sf_str wrap = SF_STR_INIT;
    sf_str_cat(&wrap, "exec ");
    cat_quoted(&wrap, b->exe);
    sf_str_cat(&wrap, " node --server ");
    cat_quoted(&wrap, b->server);
    sf_str_cat(&wrap, " --key ");
    cat_quoted(&wrap, b->dir);
    sf_str_catf(&wrap, "/burst-slurm-$SLURM_JOB_ID.key --cores %s --name burst-slurm-$SLURM_JOB_ID", cores);
    for (unsigned i = 0; i < n; i++) {
        const char *argv[16];
        unsigned k = 0;
        argv[k++] = "sbatch";
        argv[k++] = "--parsable";
        argv[k++] = "--job-name";
        argv[k++] = name;
        argv[k++] = "--nodes=1";
        argv[k++] = "--ntasks=1";
        argv[k++] = cpus;
        argv[k++] = out;
        if (b->o.partition != NULL) {
            snprintf(part, sizeof part, "--partition=%s", b->o.partition);
            argv[k++] = part;
        }
        if (b->o.account != NULL) {
            snprintf(acct, sizeof acct, "--account=%s", b->o.account);
            argv[k++] = acct;
        }
        if (b->o.time_limit != NULL) {
            snprintf(tl, sizeof tl, "--time=%s", b->o.time_limit);
            argv[k++] = tl;
        }
        if (b->o.gpus > 0) {
            snprintf(gres, sizeof gres, "--gres=gpu:%u", b->o.gpus);
            argv[k++] = gres;
        }
        argv[k++] = "--wrap";
        argv[k++] = wrap.s;
        argv[k] = NULL;
        char env[CD__BURST_TOKEN + 24];
        snprintf(env, sizeof env, "NODE_CLAIM_TOKEN=%s", tokens[i]);
        const char *extra[] = { env, NULL };
        if (cd__burst_run(b, argv, extra, CD__RAN_UP, NULL) == 0)
            b->asked++;
        else
            cd__burst_up_ended(b, false);
    }
    sf_str_free(&wrap);
}

static void slurm_down(cd__burst *b, cd__bnode *node, bool force)
{
    const char *drain[] = { "scancel", "--batch", "--signal=TERM", node->id, NULL };
    const char *kill[] = { "scancel", node->id, NULL };
    cd__burst_run(b, force ? kill : drain, NULL, CD__RAN_DOWN, node->id);
}

static void slurm_list(cd__burst *b)
{
    char name[64], opt[96];
    job_name(b, name, sizeof name);
    snprintf(opt, sizeof opt, "--name=%s", name);
    const char *argv[] = { "squeue", "--noheader", opt, "--format=%i|%T|%M", NULL };
    cd__burst_run(b, argv, NULL, CD__RAN_LIST, NULL);
}

/* squeue's %M, the time a job has run: [days-][hours:]minutes:seconds */
static double elapsed(const char *s)
{
    double days = 0, parts[3] = { 0 };
    const char *dash = strchr(s, '-');
    if (dash != NULL) {
        days = strtod(s, NULL);
        s = dash + 1;
    }
    int n = 0;
    for (char *end; n < 3; s = end + 1) {
        parts[n++] = strtod(s, &end);
        if (*end != ':')
            break;
    }
    double t = 0;
    for (int i = 0; i < n; i++)
        t = t * 60 + parts[i];
    return days * 86400 + t;
}

static void slurm_ran(cd__burst *b, int kind, const char *tag, int status, const char *out, const char *err)
{
    char line[256];
    sf_one_line(line, sizeof line, err);
    if (kind == CD__RAN_UP) {
        b->asked -= b->asked > 0;
        char id[CD__BURST_ID];
        snprintf(id, sizeof id, "%.*s", (int)strcspn(out, ";\n"), out);
        bool ok = status == 0 && id[0] != '\0';
        if (ok)
            cd__burst_added(b, id, CD__BN_STARTING);
        else
            cd__burst_error(b, "sbatch failed (status %d): %s", status, line);
        cd__burst_up_ended(b, ok);
    } else if (kind == CD__RAN_DOWN) {
        if (status != 0)
            cd__burst_error(b, "scancel %s failed (status %d): %s", tag, status, line);
    } else if (kind == CD__RAN_LIST) {
        if (status != 0) {
            cd__burst_error(b, "squeue failed (status %d): %s", status, line);
            return;
        }
        char ids[LIST_MAX][CD__BURST_ID];
        cd__bn_state states[LIST_MAX];
        double ages[LIST_MAX];
        unsigned n = 0;
        for (const char *l = out; *l && n < LIST_MAX; l += strcspn(l, "\n"), l += *l == '\n') {
            size_t len = strcspn(l, "\n");
            char row[256];
            snprintf(row, sizeof row, "%.*s", (int)len, l);
            char *state = strchr(row, '|'), *used = state ? strchr(state + 1, '|') : NULL;
            if (used == NULL)
                continue;
            *state++ = '\0';
            *used++ = '\0';
            snprintf(ids[n], sizeof ids[n], "%.*s", CD__BURST_ID - 1, row);
            states[n] = strcmp(state, "RUNNING") == 0 ? CD__BN_RUNNING
                : strcmp(state, "COMPLETING") == 0 || strcmp(state, "STOPPED") == 0 ? CD__BN_DRAINING
                                                                                    : CD__BN_STARTING;
            ages[n] = states[n] == CD__BN_STARTING ? -1 : elapsed(used);
            n++;
        }
        cd__burst_listed(b, n, ids, states, ages);
    }
}

const cd__provider cd__burst_slurm = { "slurm", slurm_up, slurm_down, slurm_list, slurm_ran };
