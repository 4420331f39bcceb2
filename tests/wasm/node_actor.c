/*
 * node_actor.c — the node actor (actors/node/node.c) built natively and with
 * emcc, driven by a scripted coordinator through a fake host. Both builds
 * must print the same transcript, one line per event:
 *
 *   - the session: challenge, a hello signed for this host (and refused for
 *     another), welcome, assign, ctx_req/ctx, signed completions (verified,
 *     and refused once a payload byte is flipped), acks;
 *   - the state machine: a dropped connection (a result finished meanwhile
 *     is sent once the node is back, after a backoff of 1 s ± 25 %; one
 *     sent into the dropped connection is not resent), a pause
 *     with a chunk in hand (`bye draining`, the chunk still finished), a
 *     resume (`bye leaving`, a new session at once), a completion refused
 *     with EREPLAYOLD (its results signed again, later, and sent), more
 *     workers and then fewer within a session (a heartbeat says so at
 *     once; a worker past the new count finishes its chunk and gets no
 *     other), chunks of a job whose context does not open (dropped, so
 *     that their leases end), a drain;
 *   - the kernels: each chunk's result bytes in hex;
 *   - the malformed outcome in both its forms (chunks 15 and 16), each
 *     logged by the node with its reason.
 *
 * Other modes, for the browser tests and the benchmark:
 *   node_actor sim KERNEL PARAMS_JSON ITEMS SEED
 *       one single-process run: per output "name count mean stderr min max"
 *       (%.17g, so a JSON number from the coordinator compares exactly)
 *   node_actor ctx KERNEL PARAMS_JSON SEED
 *       the job's work context, in hex
 *   node_actor chunk KERNEL PARAMS_JSON SEED START COUNT
 *       a chunk's result as a node sends it (nd_compute_cpu), in hex
 *   node_actor bench SECONDS [CHUNK_MS]
 *       the European option through nd_compute_cpu on one thread:
 *       "BENCH sim_european_<cpu|wasm> <paths/s> paths/s"; chunks of
 *       100,000 paths, or with CHUNK_MS each sized to take that long at
 *       the speed of the one before (as the coordinator sizes them)
 */
#include "actors/node/node.h"
#include "proto/msg.h"
#include "proto/replay.h"
#include "proto/sign.h"
#include "runtime/runtime.h"
#include "sim/ctx.h"
#include "sim/sim.h"
#include "base/json.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __EMSCRIPTEN__
#define BUILD_NAME "wasm"
#else
#define BUILD_NAME "cpu"
#endif

#define AUDIENCE "coord.test:8080"
#define EUROPEAN "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}"

enum { JOB = 3, JOB_UNRUNNABLE = 4, CHUNK_ITEMS = 1000 };
static const uint8_t UNRUNNABLE_CTX[3] = { 1, 2, 3 }; /* bytes that are not a work context */

typedef struct fake {
    rt_system *sys;
    rt_actor *node;
    msgpack_sbuffer ctx;
    uint8_t ctx_hash[32];
    uint8_t unrunnable_hash[32]; /* of UNRUNNABLE_CTX */
    uint8_t nonce[32];
    uint8_t pk[32];
    pr_replay *guard;
    int session;
    bool down;               /* frames sent now are lost */
    uint64_t down_ms;
    uint64_t next_chunk;
    uint64_t refused_ts;     /* session 3: the refused completion's signature time */
    bool device_last;        /* assign(): the last chunk is sized for backends[1], worker 2's */
    int code;
} fake;

static fake F;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void hex(const char *label, const uint8_t *p, size_t n)
{
    printf("%s ", label);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\n");
}

/* The coordinator's side of the wire: encodes m and hands it to the node. */
static void deliver(pr_msg *m, uint64_t id)
{
    static uint64_t next_id;
    m->v = PR_VERSION;
    m->id = id ? id : ++next_id;
    m->ts = 1;
    uint8_t *out;
    size_t len;
    int rc = pr_encode(m, &out, &len);
    if (rc != 0) {
        printf("coordinator cannot encode %s: %s\n", pr_type_name(m->type), sf_strerror(rc));
        F.code = 1;
        return;
    }
    nd_frame(F.node, out, len);
}

static void assign(uint32_t n)
{
    pr_chunk chunks[4];
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = F.next_chunk++;
        chunks[i] = (pr_chunk){ .chunk = id, .start = (id - 10) * CHUNK_ITEMS, .count = CHUNK_ITEMS,
            .lease_ms = 60000, .backend = F.device_last && i == n - 1 };
        memset(chunks[i].token, (int)id, sizeof chunks[i].token);
    }
    pr_msg m = { .type = PR_MSG_ASSIGN };
    m.body.assign = (pr_assign){ .job = JOB, .kernel = "option", .chunks = chunks, .nchunks = n };
    memcpy(m.body.assign.ctx_hash, F.ctx_hash, 32);
    printf("coordinator> assign job %d, %u chunks\n", JOB, n);
    deliver(&m, 0);
}

/* Two chunks of a job whose context, when asked for, does not open. */
static void assign_unrunnable(void)
{
    pr_chunk chunks[2];
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t id = F.next_chunk++;
        chunks[i] = (pr_chunk){ .chunk = id, .start = i * CHUNK_ITEMS, .count = CHUNK_ITEMS, .lease_ms = 60000 };
        memset(chunks[i].token, (int)id, sizeof chunks[i].token);
    }
    pr_msg m = { .type = PR_MSG_ASSIGN };
    m.body.assign = (pr_assign){ .job = JOB_UNRUNNABLE, .kernel = "option", .chunks = chunks, .nchunks = 2 };
    memcpy(m.body.assign.ctx_hash, F.unrunnable_hash, 32);
    printf("coordinator> assign job %d, 2 chunks\n", JOB_UNRUNNABLE);
    deliver(&m, 0);
}

static void on_hello(const pr_msg *m)
{
    const pr_hello *h = &m->body.hello;
    uint64_t now = (uint64_t)time(NULL);
    printf("hello %s, for another host %s\n", sf_strerror(pr_hello_verify(h, AUDIENCE, F.nonce, now)),
        sf_strerror(pr_hello_verify(h, "other.test:8080", F.nonce, now)));
    printf("hello version '%s', cores %u, max_parallel %u, backends %u, claim token %s\n", h->version,
        h->caps.cores, h->caps.max_parallel, h->caps.nbackends, h->claim_token ? h->claim_token : "none");
    hex("hello pk", h->pk, 32);
    printf("hello reads the outcome malformed: %s\n", pr_hello_has_feature(h, PR_FEATURE_MALFORMED) ? "yes" : "no");
    memcpy(F.pk, h->pk, 32);
    pr_msg w = { .type = PR_MSG_WELCOME };
    w.body.welcome = (pr_welcome){ .node_id = 7, .heartbeat_ms = 60000 };
    printf("coordinator> welcome (session %d)\n", F.session);
    deliver(&w, m->id);
    if (F.session == 1)
        assign(3);
    else if (F.session == 3)
        assign(1); /* its completion is refused */
}

static void on_complete(const pr_msg *m)
{
    const pr_complete *c = &m->body.complete;
    uint64_t now = (uint64_t)time(NULL);
    int ok = pr_complete_verify(c, F.pk, 32, AUDIENCE, now, F.guard);
    /* The same completion with one payload byte changed must not verify. */
    uint8_t *copy = malloc(c->payload.len);
    memcpy(copy, c->payload.ptr, c->payload.len);
    copy[c->payload.len / 2] ^= 1;
    pr_complete bad = *c;
    bad.payload.ptr = copy;
    int tampered = pr_complete_verify(&bad, F.pk, 32, AUDIENCE, now, NULL);
    free(copy);
    const pr_batch *b = &c->batch;
    for (uint32_t i = 0; i < b->nresults; i++) {
        const pr_result *r = &b->results[i];
        char on[32] = "";
        if (r->backend != 0)
            snprintf(on, sizeof on, " on backend %u", r->backend);
        printf("complete job %llu chunk %llu [%llu, +%llu)%s signature %s, tampered %s, context %s\n",
            (unsigned long long)b->job, (unsigned long long)r->chunk, (unsigned long long)r->start,
            (unsigned long long)r->count, on, sf_strerror(ok), sf_strerror(tampered),
            memcmp(b->ctx_hash, F.ctx_hash, 32) == 0 ? "ok" : "wrong");
        char label[64];
        snprintf(label, sizeof label, "result %llu", (unsigned long long)r->chunk);
        hex(label, r->data.ptr, r->data.len);
    }
    if (F.session == 3 && F.refused_ts == 0) {
        F.refused_ts = c->ts;
        printf("coordinator> error for that completion: %s\n", sf_strerror(PR_EREPLAYOLD));
        pr_msg e = { .type = PR_MSG_ERROR };
        e.body.error = (pr_error_body){ .code = PR_EREPLAYOLD, .message = sf_strerror(PR_EREPLAYOLD) };
        deliver(&e, m->id);
        return;
    }
    uint64_t chunk = b->nresults ? b->results[0].chunk : 0;
    if (F.session == 3 && chunk == 14)
        printf("signed again, later: %s\n", c->ts > F.refused_ts ? "yes" : "no");
    pr_outcome out[4];
    uint32_t n = b->nresults < 4 ? b->nresults : 4;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = (pr_outcome){ .chunk = b->results[i].chunk, .outcome = PR_OUTCOME_ACCEPTED };
        /* both forms of the malformed outcome: the node logs each reason */
        if (out[i].chunk == 15 || out[i].chunk == 16)
            pr_outcome_malformed(&out[i], out[i].chunk, out[i].chunk == 15 ? "test: the stale form" : "test: its own",
                out[i].chunk == 16);
    }
    pr_msg a = { .type = PR_MSG_COMPLETE_ACK };
    a.body.complete_ack = (pr_complete_ack){ .job = b->job, .outcomes = out, .noutcomes = n };
    deliver(&a, m->id);
    if (F.session == 1 && chunk == 10) {
        printf("coordinator: the connection drops\n");
        F.down = true;
        F.down_ms = mono_ms();
        nd_down(F.node, "test drop");
    } else if (F.session == 2 && chunk == 11) {
        assign(1);
        printf("host: pause\n");
        nd_pause(F.node, true);
    } else if (F.session == 2 && chunk == 13) {
        printf("host: resume\n");
        nd_pause(F.node, false);
    } else if (F.session == 3 && chunk == 14) {
        /* More workers, three chunks on them (the last sized for worker
         * 2's backend, which it goes to); then fewer while those three are
         * computed: each is finished, and the next chunk waits for worker 0. */
        printf("host: 3 workers\n");
        nd_set_workers(F.node, 3);
        F.device_last = true;
        assign(3);
        F.device_last = false;
        printf("host: 1 worker\n");
        nd_set_workers(F.node, 1);
        assign(1);
    } else if (F.session == 3 && chunk == 18) {
        assign_unrunnable(); /* then the drain, once its context is answered */
    }
}

/* ---- the fake host ---- */

static void host_connect(void *ctx)
{
    (void)ctx;
    F.session++;
    if (F.down) {
        uint64_t waited = mono_ms() - F.down_ms;
        printf("connect (session %d) after the backoff: %s\n", F.session,
            waited >= 700 && waited <= 1400 ? "1 s +- 25 %" : "wrong");
    } else {
        printf("connect (session %d)\n", F.session);
    }
    F.down = false;
    nd_up(F.node);
    pr_msg m = { .type = PR_MSG_CHALLENGE };
    memset(F.nonce, F.session, sizeof F.nonce);
    memcpy(m.body.challenge.nonce, F.nonce, 32);
    m.body.challenge.server = "fake";
    deliver(&m, 0);
}

static void host_send(void *ctx, const uint8_t *frame, size_t len)
{
    (void)ctx;
    pr_msg m;
    int rc = pr_decode(&m, frame, len);
    if (rc != 0) {
        printf("node> undecodable frame: %s at %s\n", sf_strerror(rc), m.err_at);
        F.code = 1;
        return;
    }
    if (F.down) {
        printf("node> %s lost with the connection\n", pr_type_name(m.type));
        pr_msg_free(&m);
        return;
    }
    printf("node> %s\n", pr_type_name(m.type));
    switch (m.type) {
    case PR_MSG_HELLO:
        on_hello(&m);
        break;
    case PR_MSG_HEARTBEAT:
        printf("heartbeat max_parallel %u, %u in flight\n", m.body.heartbeat.max_parallel,
            m.body.heartbeat.nin_flight);
        break;
    case PR_MSG_CTX_REQ: {
        pr_msg c = { .type = PR_MSG_CTX };
        if (m.body.ctx_req.job == JOB_UNRUNNABLE) {
            printf("ctx_req job %d: answered with bytes that are not a work context\n", JOB_UNRUNNABLE);
            c.body.ctx.job = JOB_UNRUNNABLE;
            memcpy(c.body.ctx.hash, F.unrunnable_hash, 32);
            c.body.ctx.bytes = (pr_bytes){ UNRUNNABLE_CTX, sizeof UNRUNNABLE_CTX };
            deliver(&c, m.id);
            nd_drain(F.node);
            break;
        }
        printf("ctx_req job %llu, hash %s\n", (unsigned long long)m.body.ctx_req.job,
            memcmp(m.body.ctx_req.hash, F.ctx_hash, 32) == 0 ? "ok" : "wrong");
        c.body.ctx.job = JOB;
        memcpy(c.body.ctx.hash, F.ctx_hash, 32);
        c.body.ctx.bytes = (pr_bytes){ (const uint8_t *)F.ctx.data, (uint32_t)F.ctx.size };
        deliver(&c, m.id);
        break;
    }
    case PR_MSG_COMPLETE:
        on_complete(&m);
        break;
    case PR_MSG_BYE:
        printf("bye %s\n", m.body.bye.reason == PR_BYE_LEAVING ? "leaving" : "draining");
        if (m.body.bye.reason == PR_BYE_LEAVING && F.session == 2) {
            printf("coordinator: closes the session\n");
            nd_down(F.node, "closed");
        }
        break;
    default:
        break;
    }
    pr_msg_free(&m);
}

static void host_compute(void *ctx, unsigned w, const nd_chunk *c, const sim_work *sim, const uint8_t *work,
    size_t len)
{
    (void)ctx;
    /* What a browser worker does: its own job, from the work context. */
    sim_work job;
    char err[256];
    int rc = sim_work_open(&job, work, len, err, sizeof err);
    printf("compute worker %u chunk %llu, job from the context %s\n", w, (unsigned long long)c->id,
        rc == 0 && job.n == sim->n && sim_job_nout(job.jobs[0]) == sim_job_nout(sim->jobs[0]) ? "ok" : err);
    uint8_t *data = NULL;
    size_t dlen = 0;
    if (rc == 0)
        rc = nd_compute_cpu(&job, c, &data, &dlen);
    sim_work_close(&job);
    nd_done(F.node, w, rc, data, dlen, 1);
}

/* Workers 0 and 1 compute on backends[0], worker 2 on backends[1]. */
static unsigned host_worker_backend(void *ctx, unsigned w)
{
    (void)ctx;
    return w == 2;
}

static void host_caps(void *ctx, pr_caps *caps)
{
    (void)ctx;
    static pr_backend b = { .kind = PR_BACKEND_WASM, .device = "test", .units = 2 };
    *caps = (pr_caps){ .cores = 4, .max_parallel = 2, .arch = "wasm32", .backends = &b, .nbackends = 1 };
}

static void host_stats(void *ctx, pr_heartbeat *hb)
{
    (void)ctx;
    (void)hb;
}

static void host_state(void *ctx, nd_state st, const char *detail)
{
    (void)ctx;
    printf("state %s%s%s\n", nd_state_name(st), detail[0] ? ": " : "", detail);
}

static void host_log(void *ctx, nd_level level, const char *line)
{
    (void)ctx;
    printf("log %s %s\n", level == ND_INFO ? "info" : "warn", line);
}

static void host_stopped(void *ctx, int code)
{
    (void)ctx;
    printf("stopped %d\n", code);
    rt_system_stop(F.sys);
}

static int session_script(void)
{
    msgpack_sbuffer params;
    msgpack_sbuffer_init(&params);
    msgpack_sbuffer_init(&F.ctx);
    char err[256];
    int rc = sf_json_to_msgpack(EUROPEAN, strlen(EUROPEAN), &params, err, sizeof err);
    if (rc == 0)
        sim_ctx_encode(&F.ctx, "option", 11, params.data, params.size);
    msgpack_sbuffer_destroy(&params);
    if (rc != 0) {
        printf("cannot build the work context: %s\n", err);
        return 1;
    }
    crypto_hash_sha256(F.ctx_hash, (const uint8_t *)F.ctx.data, F.ctx.size);
    crypto_hash_sha256(F.unrunnable_hash, UNRUNNABLE_CTX, sizeof UNRUNNABLE_CTX);
    F.next_chunk = 10;
    if (pr_replay_create(&F.guard, 64) != 0)
        return 1;

    uint8_t seed[32];
    for (int i = 0; i < 32; i++)
        seed[i] = (uint8_t)(i + 1);
    /* One result a batch: the script acts on each completion in turn. */
    nd_config cfg = { .audience = AUDIENCE, .version = "test", .workers = 2, .batch = 1 };
    if (pr_key_from_seed(&cfg.key, seed, sizeof seed) != 0)
        return 1;
    F.sys = rt_system_create(&(rt_system_opts){ .workers = 1 }, &rc);
    if (F.sys == NULL)
        return 1;
    nd_host host = { .connect = host_connect, .send = host_send, .compute = host_compute,
        .worker_backend = host_worker_backend, .caps = host_caps,
        .stats = host_stats, .state = host_state, .log = host_log, .stopped = host_stopped };
    F.node = nd_spawn(F.sys, &cfg, &host);
    pr_key_wipe(&cfg.key);
    rt_system_run(F.sys);
    rt_actor_release(F.node);
    rt_system_destroy(F.sys);
    pr_replay_destroy(F.guard);
    msgpack_sbuffer_destroy(&F.ctx);
    return F.code;
}

/* ---- the other modes ---- */

static sim_job *job_from_json(const char *kernel, const char *json, uint64_t seed)
{
    msgpack_sbuffer params;
    msgpack_sbuffer_init(&params);
    char err[256] = "";
    sim_job *job = NULL;
    int rc = sf_json_to_msgpack(json, strlen(json), &params, err, sizeof err);
    if (rc == 0)
        rc = sim_job_create(&job, kernel, params.data, params.size, seed, err, sizeof err);
    msgpack_sbuffer_destroy(&params);
    if (rc != 0)
        fprintf(stderr, "node_actor: %s\n", err[0] ? err : sf_strerror(rc));
    return job;
}

static int sim_mode(const char *kernel, const char *json, const char *items_s, const char *seed_s)
{
    char *end1, *end2;
    unsigned long long items = strtoull(items_s, &end1, 10), seed = strtoull(seed_s, &end2, 10);
    if (*end1 || *end2 || items == 0) {
        fprintf(stderr, "node_actor sim: ITEMS and SEED are integers, ITEMS at least 1\n");
        return 2;
    }
    sim_job *job = job_from_json(kernel, json, seed);
    if (job == NULL)
        return 1;
    sim_stats out[SIM_MAX_OUT];
    int rc = sim_run_cpu(job, 0, items, out);
    if (rc != 0) {
        fprintf(stderr, "node_actor sim: %s\n", sf_strerror(rc));
        sim_job_destroy(job);
        return 1;
    }
    for (int o = 0; o < sim_job_nout(job); o++)
        printf("%s %llu %.17g %.17g %.17g %.17g\n", sim_job_output_name(job, o),
            (unsigned long long)sim_stats_count(&out[o]), sim_stats_mean(&out[o]), sim_stats_stderr(&out[o]),
            sim_stats_min(&out[o]), sim_stats_max(&out[o]));
    sim_job_destroy(job);
    return 0;
}

static int ctx_mode(const char *kernel, const char *json, const char *seed_s)
{
    char *end, err[256] = "";
    unsigned long long seed = strtoull(seed_s, &end, 10);
    msgpack_sbuffer params, ctx;
    msgpack_sbuffer_init(&params);
    msgpack_sbuffer_init(&ctx);
    int rc = *end ? SIM_EPARAM : sf_json_to_msgpack(json, strlen(json), &params, err, sizeof err);
    if (rc == 0) {
        sim_ctx_encode(&ctx, kernel, seed, params.data, params.size);
        hex("ctx", (const uint8_t *)ctx.data, ctx.size);
    } else {
        fprintf(stderr, "node_actor ctx: %s\n", err[0] ? err : "SEED is an integer");
    }
    msgpack_sbuffer_destroy(&params);
    msgpack_sbuffer_destroy(&ctx);
    return rc == 0 ? 0 : 2;
}

static int chunk_mode(const char *kernel, const char *json, const char *seed_s, const char *start_s,
    const char *count_s)
{
    char *e1, *e2, *e3, err[256] = "";
    unsigned long long seed = strtoull(seed_s, &e1, 10), start = strtoull(start_s, &e2, 10),
                       count = strtoull(count_s, &e3, 10);
    if (*e1 || *e2 || *e3) {
        fprintf(stderr, "node_actor chunk: SEED, START and COUNT are integers\n");
        return 2;
    }
    msgpack_sbuffer params, ctx;
    msgpack_sbuffer_init(&params);
    msgpack_sbuffer_init(&ctx);
    sim_work job = { 0 };
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = sf_json_to_msgpack(json, strlen(json), &params, err, sizeof err);
    if (rc == 0) {
        sim_ctx_encode(&ctx, kernel, seed, params.data, params.size);
        rc = sim_work_open(&job, (const uint8_t *)ctx.data, ctx.size, err, sizeof err);
    }
    if (rc == 0 && (rc = nd_compute_cpu(&job, &(nd_chunk){ .start = start, .count = count }, &data, &len)) == 0)
        hex("result", data, len);
    else
        fprintf(stderr, "node_actor chunk: %s\n", err[0] ? err : sf_strerror(rc));
    free(data);
    sim_work_close(&job);
    msgpack_sbuffer_destroy(&params);
    msgpack_sbuffer_destroy(&ctx);
    return rc == 0 ? 0 : 1;
}

static int bench_mode(const char *seconds_s, const char *chunk_ms_s)
{
    double seconds = atof(seconds_s), chunk_ms = chunk_ms_s != NULL ? atof(chunk_ms_s) : 0;
    sim_job *one = job_from_json("option", EUROPEAN, 2024);
    if (one == NULL || seconds <= 0 || chunk_ms < 0)
        return 2;
    sim_work job = { .jobs = &one, .n = 1 };
    enum { FIRST = 100000 };
    uint64_t items = 0, chunk = FIRST, t0 = mono_ms();
    while (mono_ms() - t0 < (uint64_t)(seconds * 1000)) {
        uint8_t *data;
        size_t len;
        uint64_t t1 = mono_ms();
        if (nd_compute_cpu(&job, &(nd_chunk){ .start = items, .count = chunk }, &data, &len) != 0)
            return 1;
        free(data);
        items += chunk;
        uint64_t took = mono_ms() - t1;
        if (chunk_ms > 0 && took > 0) {
            double next = (double)chunk / (double)took * chunk_ms;
            chunk = next > FIRST ? (uint64_t)(next / 64) * 64 : FIRST;
        }
    }
    double dt = (double)(mono_ms() - t0) / 1000.0;
    printf("BENCH sim_european_%s %.4g paths/s\n", BUILD_NAME, (double)items / dt);
    sim_job_destroy(one);
    return 0;
}

int main(int argc, char **argv)
{
    if (sodium_init() < 0)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && strcmp(argv[1], "sim") == 0)
        return sim_mode(argv[2], argv[3], argv[4], argv[5]);
    if (argc == 5 && strcmp(argv[1], "ctx") == 0)
        return ctx_mode(argv[2], argv[3], argv[4]);
    if (argc == 7 && strcmp(argv[1], "chunk") == 0)
        return chunk_mode(argv[2], argv[3], argv[4], argv[5], argv[6]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "bench") == 0)
        return bench_mode(argv[2], argc == 4 ? argv[3] : NULL);
    if (argc != 1) {
        fprintf(stderr, "usage: node_actor | node_actor sim KERNEL PARAMS_JSON ITEMS SEED |\n"
                        "       node_actor ctx KERNEL PARAMS_JSON SEED | node_actor bench SECONDS [CHUNK_MS] |\n"
                        "       node_actor chunk KERNEL PARAMS_JSON SEED START COUNT\n");
        return 2;
    }
    return session_script();
}
