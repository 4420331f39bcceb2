/*
 * burst.c — the burst actor (burst.h): its decisions, its node table, the
 * claim tokens of its nodes, and the processes it runs for its providers.
 */
#include "actors/coord/burst_int.h"

#include "actors/coord/pgembed.h"
#include "actors/coord/scheduler.h"
#include "actors/coord/store.h"
#include "base/alloc.h"
#include "base/log.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum {
    M_START = RT_MSGS_BURST, /* start: the server nodes join */
    M_TICK,                  /* rt_tick: decide */
    M_RAN,                   /* ran: a command ended */
    M_EXITED,                /* exited: a local node's process ended */
};

enum { QUERY_MS = 30000, OUT_MAX = 1 << 20, SPEED_WINDOW_S = 60 };
enum { A_UP, A_DOWN, A_HOLD };
static const char *const action_names[] = { "up", "down", "hold" };

typedef struct start {
    rt_msg hdr;
    char server[512];
} start;

typedef struct ran {
    rt_msg hdr;
    int kind, status;
    char tag[CD__BURST_ID];
    char *out, *err; /* owned */
} ran;

typedef struct exited {
    rt_msg hdr;
    char id[CD__BURST_ID];
    int64_t status;
    int signal;
} exited;

static void ran_release(rt_msg *m)
{
    ran *r = (ran *)m;
    free(r->out);
    free(r->err);
}

/* ---- processes ---------------------------------------------------------------------- */

struct cd__proc {
    uv_process_t h;
    uv_pipe_t out, err;
    sf_str obuf, ebuf;
    cd__proc *next, **prev;       /* in cd__burst.procs */
    rt_actor *burst;              /* retained until the last handle closes */
    cd__burst *b;                 /* its state: valid while in the list */
    int kind;                     /* 0: a local node */
    char tag[CD__BURST_ID];
    int open;                     /* handles not closed yet */
    int waiting;                  /* of exit, the two EOFs: what a command still waits for */
    int64_t status;
    int signal;
    bool closing;
};

static void proc_unlink(cd__proc *p)
{
    if (p->prev != NULL) {
        *p->prev = p->next;
        if (p->next != NULL)
            p->next->prev = p->prev;
        p->prev = NULL;
        p->next = NULL;
    }
}

static void proc_closed(uv_handle_t *h)
{
    cd__proc *p = h->data;
    if (--p->open > 0)
        return;
    sf_str_free(&p->obuf);
    sf_str_free(&p->ebuf);
    rt_actor_release(p->burst);
    free(p);
}

static void proc_close(cd__proc *p)
{
    if (p->closing)
        return;
    p->closing = true;
    proc_unlink(p);
    uv_close((uv_handle_t *)&p->h, proc_closed);
    if (p->kind != 0) {
        uv_close((uv_handle_t *)&p->out, proc_closed);
        uv_close((uv_handle_t *)&p->err, proc_closed);
    }
}

/* A command is done once it has exited and both its pipes are at their end. */
static void cmd_step(cd__proc *p)
{
    if (--p->waiting > 0)
        return;
    ran *r = RT_MSG_NEW(ran, M_RAN);
    r->hdr.release = ran_release;
    r->kind = p->kind;
    r->status = p->signal != 0 ? -1 : (int)p->status;
    snprintf(r->tag, sizeof r->tag, "%s", p->tag);
    r->out = sf_str_take(&p->obuf);
    r->err = sf_str_take(&p->ebuf);
    rt_send(p->burst, &r->hdr);
    proc_close(p);
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
    (void)want;
    static char slab[65536]; /* loop thread only; each read is consumed before the next */
    (void)h;
    *buf = uv_buf_init(slab, sizeof slab);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    cd__proc *p = s->data;
    sf_str *into = s == (uv_stream_t *)&p->out ? &p->obuf : &p->ebuf;
    if (n > 0) {
        if (into->len + (size_t)n <= OUT_MAX)
            sf_str_catn(into, buf->base, (size_t)n);
        return;
    }
    if (n < 0) {
        uv_read_stop(s);
        cmd_step(p);
    }
}

static void proc_exited(uv_process_t *h, int64_t status, int sig)
{
    cd__proc *p = h->data;
    p->status = status;
    p->signal = sig;
    if (p->kind != 0) {
        cmd_step(p);
        return;
    }
    exited *e = RT_MSG_NEW(exited, M_EXITED);
    snprintf(e->id, sizeof e->id, "%s", p->tag);
    e->status = status;
    e->signal = sig;
    rt_send(p->burst, &e->hdr);
    proc_close(p);
}

/* The environment plus extra: entries of extra replace those of the same name. */
static char **env_with(const char *const *extra)
{
    size_t n = 0, k = 0, x = 0;
    while (environ[n] != NULL)
        n++;
    while (extra != NULL && extra[x] != NULL)
        x++;
    char **env = sf_calloc(n + x + 1, sizeof *env);
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < x && !replaced; j++) {
            size_t eq = strcspn(extra[j], "=");
            replaced = strncmp(environ[i], extra[j], eq + 1) == 0;
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < x; j++)
        env[k++] = (char *)extra[j];
    env[k] = NULL;
    return env;
}

static cd__proc *proc_start(cd__burst *b, const char *const *argv, const char *const *extra, int kind,
    const char *tag, int log_fd)
{
    uv_loop_t *loop = rt_system_loop(rt_actor_system(b->self));
    cd__proc *p = sf_calloc(1, sizeof *p);
    p->kind = kind;
    p->b = b;
    snprintf(p->tag, sizeof p->tag, "%s", tag != NULL ? tag : "");
    p->h.data = p->out.data = p->err.data = p;
    uv_stdio_container_t io[3] = { { .flags = UV_IGNORE } };
    if (kind != 0) {
        uv_pipe_init(loop, &p->out, 0);
        uv_pipe_init(loop, &p->err, 0);
        io[1].flags = io[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        io[1].data.stream = (uv_stream_t *)&p->out;
        io[2].data.stream = (uv_stream_t *)&p->err;
    } else {
        io[1].flags = io[2].flags = log_fd >= 0 ? UV_INHERIT_FD : UV_IGNORE;
        io[1].data.fd = io[2].data.fd = log_fd;
    }
    char **env = env_with(extra);
    uv_process_options_t po = { .exit_cb = proc_exited, .file = argv[0], .args = (char **)argv, .env = env,
        .stdio_count = 3, .stdio = io };
    int rc = uv_spawn(loop, &p->h, &po);
    free(env);
    p->burst = rt_actor_retain(b->self);
    p->open = kind != 0 ? 3 : 1;
    if (rc != 0) {
        cd__burst_error(b, "cannot run %s: %s", argv[0], uv_strerror(rc));
        /* a failed uv_spawn leaves the handle to be closed all the same */
        p->closing = true;
        uv_close((uv_handle_t *)&p->h, proc_closed);
        if (kind != 0) {
            uv_close((uv_handle_t *)&p->out, proc_closed);
            uv_close((uv_handle_t *)&p->err, proc_closed);
        }
        return NULL;
    }
    p->next = b->procs;
    p->prev = &b->procs;
    if (b->procs != NULL)
        b->procs->prev = &p->next;
    b->procs = p;
    if (kind != 0) {
        p->waiting = 3;
        uv_read_start((uv_stream_t *)&p->out, on_alloc, on_read);
        uv_read_start((uv_stream_t *)&p->err, on_alloc, on_read);
    }
    return p;
}

int cd__burst_run(cd__burst *b, const char *const *argv, const char *const *extra, int kind, const char *tag)
{
    if (proc_start(b, argv, extra, kind, tag, -1) != NULL)
        return 0;
    if (kind == CD__RAN_LIST)
        b->list_sent_ms = 0; /* no answer will come: the next tick asks again */
    return CD_EIO;
}

int cd__burst_spawn_node(cd__burst *b, const char *const *argv, const char *const *extra, const char *log,
    const char *id)
{
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        sf_log(SF_LOG_WARN, "burst", "cannot open %s: the node's output is dropped", log);
    cd__proc *p = proc_start(b, argv, extra, 0, id, fd);
    if (fd >= 0)
        close(fd);
    return p != NULL ? 0 : CD_EIO;
}

int cd__burst_kill(cd__burst *b, const char *id, int sig)
{
    for (cd__proc *p = b->procs; p != NULL; p = p->next)
        if (p->kind == 0 && strcmp(p->tag, id) == 0)
            return uv_process_kill(&p->h, sig);
    return UV_ESRCH;
}

/* ---- the node table ----------------------------------------------------------------- */

void cd__burst_error(cd__burst *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    b->errors++;
    sf_log(SF_LOG_WARN, "burst", "%s: %s", b->p->name, msg);
}

void cd__burst_up_ended(cd__burst *b, bool ok)
{
    uint64_t now = rt_mono_ms();
    if (ok) {
        if (b->up_failures > 0)
            sf_log(SF_LOG_INFO, "burst", "%s: up brought a node again, after %u failed in a row", b->p->name,
                b->up_failures);
        b->up_failures = 0;
        b->up_retry_ms = 0;
        return;
    }
    if (now < b->up_retry_ms)
        return;
    b->up_failures++;
    double wait_s = b->o.interval_s * ldexp(1, b->up_failures < 30 ? (int)b->up_failures : 30);
    if (wait_s > CD__BURST_BACKOFF_MAX_S)
        wait_s = CD__BURST_BACKOFF_MAX_S;
    b->up_retry_ms = now + (uint64_t)(wait_s * 1000);
    sf_log(SF_LOG_WARN, "burst", "%s: up failed %u time%s in a row: the next try in %.1f s", b->p->name,
        b->up_failures, b->up_failures == 1 ? "" : "s", wait_s);
}

static cd__bnode *find(cd__burst *b, const char *id)
{
    for (unsigned i = 0; i < b->n; i++)
        if (strcmp(b->nodes[i].id, id) == 0)
            return &b->nodes[i];
    return NULL;
}

static void publish(cd__burst *b);

cd__bnode *cd__burst_added(cd__burst *b, const char *id, cd__bn_state state)
{
    if (find(b, id) != NULL || b->n == CD__BURST_MAX_NODES)
        return NULL;
    cd__bnode *n = &b->nodes[b->n++];
    memset(n, 0, sizeof *n);
    snprintf(n->id, sizeof n->id, "%s", id);
    snprintf(n->name, sizeof n->name, "burst-%s-%s", b->p->name, id);
    n->state = state;
    n->born_ms = rt_mono_ms();
    b->started_total++;
    sf_log(SF_LOG_INFO, "burst", "node %s up (%s)", n->name, state == CD__BN_STARTING ? "starting" : "running");
    publish(b);
    return n;
}

void cd__burst_gone(cd__burst *b, const char *id, const char *why)
{
    cd__bnode *n = find(b, id);
    if (n == NULL)
        return;
    sf_log(SF_LOG_INFO, "burst", "node %s gone after %.0f s: %s", n->name, (double)(rt_mono_ms() - n->born_ms) / 1000,
        why);
    if (n->state == CD__BN_DRAINING && !n->forced)
        b->drained_total++;
    *n = b->nodes[--b->n];
    publish(b);
}

void cd__burst_listed(cd__burst *b, unsigned n, char (*ids)[CD__BURST_ID], const cd__bn_state *states,
    const double *age_s)
{
    uint64_t now = rt_mono_ms();
    for (unsigned i = 0; i < n; i++) {
        cd__bnode *node = find(b, ids[i]);
        if (node == NULL) {
            /* one of a coordinator before this one; while nodes are being
             * asked for, it may be one of those, which their answer adds */
            if (b->asked > 0)
                continue;
            node = cd__burst_added(b, ids[i], states[i]);
            if (node != NULL && age_s[i] >= 0)
                node->born_ms = now - (uint64_t)(age_s[i] * 1000);
        } else if (node->state != CD__BN_DRAINING) {
            node->state = states[i];
        }
        /* stopping without being told by this actor (an operator's scancel):
         * its grace counts from now */
        if (node != NULL && node->state == CD__BN_DRAINING && node->drain_ms == 0)
            node->drain_ms = now;
    }
    for (unsigned k = b->n; k-- > 0;) {
        bool there = false;
        for (unsigned i = 0; i < n && !there; i++)
            there = strcmp(b->nodes[k].id, ids[i]) == 0;
        if (!there && b->nodes[k].born_ms < b->list_sent_ms)
            cd__burst_gone(b, b->nodes[k].id, "no longer listed");
    }
    publish(b);
}

void cd__burst_node_argv(const cd__burst *b, const char *name, const char *key, const char *argv[12], char *cores,
    size_t cap)
{
    snprintf(cores, cap, "%u", b->o.cores);
    unsigned i = 0;
    argv[i++] = b->exe;
    argv[i++] = "node";
    argv[i++] = "--server";
    argv[i++] = b->server;
    argv[i++] = "--key";
    argv[i++] = key;
    argv[i++] = "--cores";
    argv[i++] = cores;
    argv[i++] = "--name";
    argv[i++] = name;
    argv[i] = NULL;
}

/* ---- what is published -------------------------------------------------------------- */

static const char *state_name(cd__bn_state s)
{
    return s == CD__BN_STARTING ? "starting" : s == CD__BN_RUNNING ? "running" : "draining";
}

static unsigned current(const cd__burst *b)
{
    unsigned c = b->asked;
    for (unsigned i = 0; i < b->n; i++)
        c += b->nodes[i].state != CD__BN_DRAINING;
    return c;
}

static void publish(cd__burst *b)
{
    uint64_t now = rt_mono_ms();
    sf_str s = SF_STR_INIT, m = SF_STR_INIT;
    sf_str_catf(&s, "{\"provider\":\"%s\",\"current\":%u,\"target\":%u,\"min\":%u,\"max\":%u,\"pending_items\":%llu,"
        "\"node_items_per_s\":", b->p->name, current(b), b->target, b->o.min, b->o.max,
        (unsigned long long)b->pending);
    sf_str_cat_number(&s, b->node_speed);
    sf_str_catf(&s, ",\"young_s\":%.0f,\"target_s\":%.0f,\"up_failures\":%u,\"next_up_in_s\":", b->o.young_s,
        b->o.target_s, b->up_failures);
    if (now < b->up_retry_ms)
        sf_str_catf(&s, "%.1f", (double)(b->up_retry_ms - now) / 1000);
    else
        sf_str_cat(&s, "null");
    sf_str_cat(&s, ",\"last\":");
    if (b->decided_at == 0) {
        sf_str_cat(&s, "null");
    } else {
        sf_str_catf(&s, "{\"at\":%lld,\"action\":\"%s\",\"why\":", (long long)b->decided_at, b->action);
        sf_str_cat_json(&s, b->why);
        sf_str_cat(&s, "}");
    }
    sf_str_cat(&s, ",\"nodes\":[");
    unsigned by_state[3] = { 0 };
    for (unsigned i = 0; i < b->n; i++) {
        const cd__bnode *n = &b->nodes[i];
        by_state[n->state]++;
        sf_str_cat(&s, i ? ",{\"id\":" : "{\"id\":");
        sf_str_cat_json(&s, n->id);
        sf_str_cat(&s, ",\"name\":");
        sf_str_cat_json(&s, n->name);
        sf_str_catf(&s, ",\"state\":\"%s\",\"age_s\":%.0f}", state_name(n->state), (double)(now - n->born_ms) / 1000);
    }
    sf_str_cat(&s, "]}");

    sf_str_cat(&m, "# HELP simfarm_burst_nodes Burst nodes by state (starting: asked for, not running yet).\n"
                   "# TYPE simfarm_burst_nodes gauge\n");
    for (int i = 0; i < 3; i++)
        sf_str_catf(&m, "simfarm_burst_nodes{provider=\"%s\",state=\"%s\"} %u\n", b->p->name,
            state_name((cd__bn_state)i), by_state[i] + (i == CD__BN_STARTING ? b->asked : 0));
    sf_str_catf(&m, "# HELP simfarm_burst_target_nodes The burst nodes the last decision wanted.\n"
                    "# TYPE simfarm_burst_target_nodes gauge\nsimfarm_burst_target_nodes %u\n"
                    "# HELP simfarm_burst_pending_items Items of unfinished jobs not yet accepted, at the last decision.\n"
                    "# TYPE simfarm_burst_pending_items gauge\nsimfarm_burst_pending_items %llu\n"
                    "# HELP simfarm_burst_node_items_per_second A node's measured speed over the last minute.\n"
                    "# TYPE simfarm_burst_node_items_per_second gauge\nsimfarm_burst_node_items_per_second %.3f\n"
                    "# HELP simfarm_burst_decisions_total Burst decisions by action.\n"
                    "# TYPE simfarm_burst_decisions_total counter\n",
        b->target, (unsigned long long)b->pending, b->node_speed);
    for (int i = 0; i < 3; i++)
        sf_str_catf(&m, "simfarm_burst_decisions_total{action=\"%s\"} %llu\n", action_names[i],
            (unsigned long long)b->decisions[i]);
    sf_str_catf(&m, "# HELP simfarm_burst_nodes_started_total Burst nodes brought up.\n"
                    "# TYPE simfarm_burst_nodes_started_total counter\nsimfarm_burst_nodes_started_total %llu\n"
                    "# HELP simfarm_burst_nodes_stopped_total Burst nodes stopped: drained, or forced after the grace.\n"
                    "# TYPE simfarm_burst_nodes_stopped_total counter\n"
                    "simfarm_burst_nodes_stopped_total{how=\"drained\"} %llu\n"
                    "simfarm_burst_nodes_stopped_total{how=\"forced\"} %llu\n"
                    "# HELP simfarm_burst_provider_errors_total Provider commands that failed.\n"
                    "# TYPE simfarm_burst_provider_errors_total counter\nsimfarm_burst_provider_errors_total %llu\n"
                    "# HELP simfarm_burst_up_failures Ups in a row that brought no node (each puts off the next).\n"
                    "# TYPE simfarm_burst_up_failures gauge\nsimfarm_burst_up_failures %u\n",
        (unsigned long long)b->started_total, (unsigned long long)b->drained_total,
        (unsigned long long)b->forced_total, (unsigned long long)b->errors, b->up_failures);

    uv_mutex_lock(&b->lock);
    free(b->status_json);
    free(b->metrics);
    b->status_json = sf_str_take(&s);
    b->metrics = sf_str_take(&m);
    uv_mutex_unlock(&b->lock);
}

void cd_burst_status_json(rt_actor *burst, sf_str *out)
{
    cd__burst *b = rt_state(burst);
    uv_mutex_lock(&b->lock);
    sf_str_cat(out, b->status_json != NULL ? b->status_json : "null");
    uv_mutex_unlock(&b->lock);
}

void cd_burst_metrics(rt_actor *burst, sf_str *out)
{
    cd__burst *b = rt_state(burst);
    uv_mutex_lock(&b->lock);
    if (b->metrics != NULL)
        sf_str_cat(out, b->metrics);
    uv_mutex_unlock(&b->lock);
}

/* ---- decisions ---------------------------------------------------------------------- */

/* A node's speed: the items of its accepts of unfinished jobs over the
 * last minute after its first one there, over the time from that first to
 * its last (a node needs two accepts in the window to be measured); the
 * mean over the nodes measured. The pending items are the scheduler's
 * (cd_scheduler_stats.items_left). */
static const char SPEED_SQL[] =
    "WITH a AS (SELECT node_id, item_count, at FROM journal WHERE type = 1 AND at > now() - make_interval(secs => $1) "
    "AND job_id IN (SELECT id FROM jobs WHERE state IN ('pending', 'running'))), "
    "r AS (SELECT node_id, sum(item_count) - (array_agg(item_count ORDER BY at))[1] AS it, "
    "extract(epoch FROM max(at) - min(at)) AS span FROM a GROUP BY node_id HAVING count(*) >= 2) "
    "SELECT coalesce(avg(it / span), 0)::text FROM r WHERE span > 0";

/* Stores n claim tokens for the nodes to come, which are brought up once
 * the store has them (on_result). */
static void ask_tokens(cd__burst *b, unsigned n)
{
    sf_str hashes = SF_STR_INIT;
    sf_str_cat(&hashes, "{");
    char (*tokens)[CD__BURST_TOKEN] = sf_calloc(n, sizeof *tokens);
    for (unsigned i = 0; i < n; i++) {
        unsigned char raw[32], hash[32];
        char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)], hex[65];
        randombytes_buf(raw, sizeof raw);
        sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
        snprintf(tokens[i], sizeof tokens[i], "sfc_%s", b64);
        crypto_hash_sha256(hash, (const unsigned char *)tokens[i], strlen(tokens[i]));
        sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
        sf_str_catf(&hashes, "%s%s", i ? "," : "", hex);
    }
    sf_str_cat(&hashes, "}");
    cd_query *q = cd_query_new("INSERT INTO tokens (kind, owner, tier, secret_hash, note, expires_at) "
                               "SELECT 'claim', 'admin', 'own', decode(h, 'hex'), $2, now() + interval '1 hour' "
                               "FROM unnest($1::text[]) AS t (h)");
    cd_query_text(q, hashes.s);
    char note[64];
    snprintf(note, sizeof note, "burst %s node", b->p->name);
    cd_query_text(q, note);
    sf_str_free(&hashes);
    if (rt_request(b->self, b->o.store, &q->hdr, QUERY_MS) > 0) {
        b->tokens_asked = true;
        b->asked += n;
        b->pending_tokens = tokens;
        b->n_pending_tokens = n;
    } else {
        sodium_memzero(tokens, n * sizeof *tokens);
        free(tokens);
    }
}

static void decide(cd__burst *b, uint64_t pending, double speed)
{
    b->pending = pending;
    b->node_speed = speed;
    unsigned want;
    char basis[128];
    if (pending == 0) {
        want = 0;
        snprintf(basis, sizeof basis, "nothing pending");
    } else if (speed <= 0) {
        want = 1;
        snprintf(basis, sizeof basis, "%llu items pending, no node speed measured yet", (unsigned long long)pending);
    } else {
        double n = ceil((double)pending / (speed * b->o.target_s));
        want = n > CD__BURST_MAX_NODES ? CD__BURST_MAX_NODES : (unsigned)n;
        snprintf(basis, sizeof basis, "%llu items pending at %.0f items/s a node, to finish within %.0f s",
            (unsigned long long)pending, speed, b->o.target_s);
    }
    unsigned target = want < b->o.min ? b->o.min : want > b->o.max ? b->o.max : want;
    unsigned cur = current(b);
    int action = A_HOLD;
    char why[256];
    uint64_t now = rt_mono_ms();
    if (target > cur) {
        if (now < b->up_retry_ms) {
            snprintf(why, sizeof why, "%s: %u more wanted; up failed %u time%s in a row, the next try in %.1f s",
                basis, target - cur, b->up_failures, b->up_failures == 1 ? "" : "s",
                (double)(b->up_retry_ms - now) / 1000);
        } else if (!b->tokens_asked) {
            unsigned n = target - cur;
            ask_tokens(b, n);
            action = A_UP;
            snprintf(why, sizeof why, "%s: %u more", basis, n);
        } else {
            snprintf(why, sizeof why, "%s: nodes already being asked for", basis);
        }
    } else if (target < cur) {
        unsigned excess = cur - target, stopped = 0;
        sf_str ids = SF_STR_INIT;
        while (stopped < excess) {
            cd__bnode *oldest = NULL;
            for (unsigned i = 0; i < b->n; i++) {
                cd__bnode *n = &b->nodes[i];
                if (n->state == CD__BN_DRAINING)
                    continue;
                if ((double)(now - n->born_ms) < b->o.young_s * 1000)
                    continue;
                if (oldest == NULL || n->born_ms < oldest->born_ms)
                    oldest = n;
            }
            if (oldest == NULL)
                break;
            oldest->state = CD__BN_DRAINING;
            oldest->drain_ms = now;
            b->p->down(b, oldest, false);
            sf_str_catf(&ids, "%s%s", stopped ? ", " : "", oldest->name);
            stopped++;
        }
        if (stopped > 0) {
            action = A_DOWN;
            snprintf(why, sizeof why, "%s: draining %s", basis, ids.s);
        } else {
            snprintf(why, sizeof why, "%s: %u above target, younger than %.0f s", basis, excess, b->o.young_s);
        }
        sf_str_free(&ids);
    } else {
        snprintf(why, sizeof why, "%s", basis);
    }
    /* a hold that changes neither number is counted, not logged: while a
     * job runs its pending items change at every decision */
    bool changed = action != A_HOLD || target != b->target || cur != b->logged_current || b->decided_at == 0;
    b->logged_current = cur;
    b->decisions[action]++;
    b->target = target;
    snprintf(b->action, sizeof b->action, "%s", action_names[action]);
    snprintf(b->why, sizeof b->why, "%s", why);
    b->decided_at = (int64_t)time(NULL);
    if (changed)
        sf_log(SF_LOG_INFO, "burst", "target %u, current %u: %s (%s)", target, cur, action_names[action], why);
    publish(b);
}

static void tick(cd__burst *b)
{
    uint64_t now = rt_mono_ms();
    for (unsigned i = 0; i < b->n; i++) {
        cd__bnode *n = &b->nodes[i];
        if (n->state == CD__BN_DRAINING && !n->forced && (double)(now - n->drain_ms) >= b->o.grace_s * 1000) {
            sf_log(SF_LOG_WARN, "burst", "node %s still there %.0f s after SIGTERM: stopping it", n->name,
                b->o.grace_s);
            n->forced = true;
            b->forced_total++;
            b->p->down(b, n, true);
        }
    }
    if (b->p->list != NULL && b->list_sent_ms == 0) {
        b->list_sent_ms = now;
        b->p->list(b);
    }
    if (!b->deciding) {
        cd_query *q = cd_query_new(SPEED_SQL);
        cd_query_int(q, SPEED_WINDOW_S);
        b->decide_req = rt_request(b->self, b->o.store, &q->hdr, QUERY_MS);
        b->deciding = b->decide_req > 0;
    }
}

static void on_result(cd__burst *b, rt_msg *m)
{
    cd_result *r = m->type == CD_MSG_RESULT ? (cd_result *)m : NULL;
    bool ok = r != NULL && r->res != NULL;
    if ((int64_t)m->req_id == b->decide_req) {
        b->deciding = false;
        if (ok && PQntuples(r->res) == 1) {
            cd_scheduler_stats st;
            cd_scheduler_stats_get(b->o.scheduler, &st);
            decide(b, st.items_left, strtod(PQgetvalue(r->res, 0, 0), NULL));
        } else {
            sf_log(SF_LOG_WARN, "burst", "no decision: the database did not answer (%s)",
                r != NULL && r->error[0] ? r->error : "no answer in 30 s");
        }
        return;
    }
    if (!b->tokens_asked)
        return;
    b->tokens_asked = false;
    unsigned n = b->n_pending_tokens;
    b->asked -= n < b->asked ? n : b->asked;
    if (ok) {
        b->p->up(b, n, b->pending_tokens);
    } else {
        cd__burst_error(b, "the nodes' claim tokens were not stored: %s",
            r != NULL && r->error[0] ? r->error : "no answer in 30 s");
        cd__burst_up_ended(b, false);
    }
    sodium_memzero(b->pending_tokens, n * sizeof *b->pending_tokens);
    free(b->pending_tokens);
    b->pending_tokens = NULL;
    b->n_pending_tokens = 0;
    publish(b);
}

static void behaviour(rt_actor *self, rt_msg *m)
{
    cd__burst *b = rt_state(self);
    switch (m->type) {
    case M_START:
        if (b->started)
            break;
        b->started = true;
        if (b->server[0] == '\0')
            snprintf(b->server, sizeof b->server, "%s", ((start *)m)->server);
        sf_log(SF_LOG_INFO, "burst", "provider %s: %u to %u nodes of %u cores joining %s, a decision every %g s",
            b->p->name, b->o.min, b->o.max, b->o.cores, b->server, b->o.interval_s);
        rt_send_every(self, (uint64_t)(b->o.interval_s * 1000), M_TICK, 0);
        tick(b);
        break;
    case M_TICK:
        tick(b);
        break;
    case CD_MSG_RESULT:
    case RT_MSG_TIMEOUT:
        on_result(b, m);
        break;
    case M_RAN: {
        ran *r = (ran *)m;
        b->p->ran(b, r->kind, r->tag, r->status, r->out != NULL ? r->out : "", r->err != NULL ? r->err : "");
        if (r->kind == CD__RAN_LIST)
            b->list_sent_ms = 0; /* after ran(): cd__burst_listed reads when it was sent */
        publish(b);
        break;
    }
    case M_EXITED: {
        exited *e = (exited *)m;
        char why[64];
        if (e->signal != 0)
            snprintf(why, sizeof why, "killed by signal %d", e->signal);
        else
            snprintf(why, sizeof why, "exited with status %lld", (long long)e->status);
        cd__burst_gone(b, e->id, why);
        break;
    }
    default:
        break;
    }
}

/* At the coordinator's stop: local nodes are told to drain (they are this
 * coordinator's children, and would lose it anyway); Slurm jobs and the
 * script's nodes stay, and the next coordinator adopts them from its first
 * list. Commands still running are killed. */
static void finalize(rt_actor *self)
{
    cd__burst *b = rt_state(self);
    while (b->procs != NULL) {
        cd__proc *p = b->procs;
        uv_process_kill(&p->h, p->kind == 0 ? SIGTERM : SIGKILL);
        proc_close(p);
    }
    free(b->pending_tokens);
    rt_actor_release(b->o.store);
    rt_actor_release(b->o.scheduler);
    free((char *)b->o.partition);
    free((char *)b->o.account);
    free((char *)b->o.time_limit);
    free((char *)b->o.script);
    free(b->status_json);
    free(b->metrics);
    uv_mutex_destroy(&b->lock);
}

static const cd__provider *provider_of(const char *name)
{
    static const cd__provider *const all[] = { &cd__burst_local, &cd__burst_slurm, &cd__burst_exec };
    for (size_t i = 0; name != NULL && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}

int cd_burst_check(const cd_burst_opts *o, sf_error *e)
{
    if (provider_of(o->provider) == NULL)
        return sf_fail(e, CD_ECONFIG, "--burst wants local, slurm or exec, not '%s'", o->provider ? o->provider : "");
    if (strcmp(o->provider, "exec") == 0 && (o->script == NULL || access(o->script, X_OK) != 0))
        return sf_fail(e, CD_ECONFIG, "--burst exec needs --burst-exec SCRIPT, a program it may run%s%s",
            o->script ? ": not " : "", o->script ? o->script : "");
    if (o->max > CD__BURST_MAX_NODES || o->min > (o->max ? o->max : 5))
        return sf_fail(e, CD_ECONFIG, "--burst-min %u and --burst-max %u: want 0 <= min <= max <= %d", o->min,
            o->max ? o->max : 5, CD__BURST_MAX_NODES);
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? sf_strdup(s) : NULL;
}

rt_actor *cd_burst_spawn(rt_system *sys, const cd_burst_opts *opts)
{
    rt_actor *a = rt_spawn(sys, behaviour, &(rt_actor_opts){ .state_size = sizeof(cd__burst), .pinned = true,
        .finalize = finalize, .name = "burst" });
    if (a == NULL)
        return NULL;
    cd__burst *b = rt_state(a);
    b->self = a;
    b->o = *opts;
    b->p = provider_of(opts->provider);
    if (b->p == NULL)
        b->p = &cd__burst_local; /* cd_burst_check refused it before; a default keeps the actor whole */
    b->o.max = opts->max ? opts->max : 5;
    b->o.target_s = opts->target_s > 0 ? opts->target_s : 600;
    b->o.grace_s = opts->grace_s > 0 ? opts->grace_s : 120;
    b->o.interval_s = opts->interval_s > 0 ? opts->interval_s : 10;
    b->o.cores = opts->cores ? opts->cores : 1;
    b->o.store = rt_actor_retain(opts->store);
    b->o.scheduler = rt_actor_retain(opts->scheduler);
    b->o.partition = dup_or_null(opts->partition);
    b->o.account = dup_or_null(opts->account);
    b->o.time_limit = dup_or_null(opts->time_limit);
    b->o.script = dup_or_null(opts->script);
    b->o.dir = b->o.exe = b->o.server = NULL;
    if (opts->server != NULL)
        snprintf(b->server, sizeof b->server, "%s", opts->server);
    if (opts->dir != NULL) {
        snprintf(b->dir, sizeof b->dir, "%s", opts->dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(b->dir, sizeof b->dir, "%s/simfarm-burst-%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    }
    if (cd_mkdirs(b->dir, 0700) != 0)
        sf_log(SF_LOG_WARN, "burst", "cannot make %s: nodes may not start", b->dir);
    if (opts->exe != NULL) {
        snprintf(b->exe, sizeof b->exe, "%s", opts->exe);
    } else {
        size_t len = sizeof b->exe;
        if (uv_exepath(b->exe, &len) != 0)
            snprintf(b->exe, sizeof b->exe, "simfarm");
    }
    uv_mutex_init(&b->lock);
    publish(b);
    return a;
}

void cd_burst_start(rt_actor *burst, const char *server)
{
    start *s = RT_MSG_NEW(start, M_START);
    snprintf(s->server, sizeof s->server, "%s", server);
    rt_send(burst, &s->hdr);
}
