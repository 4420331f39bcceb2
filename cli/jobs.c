/*
 * jobs.c — the job subcommands of the client: submit, jobs, job, cancel and
 * watch (docs/cli.md), over the coordinator's /api/jobs (docs/api.md).
 */
#include "actors/coord/jobs.h"
#include "cli/cli.h"
#include "cli/remote.h"

#include "base/json.h"
#include "base/str.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

enum {
    MAX_JOB_FILE = 1 << 20,
    POLL_MS = 500,
    RETRY_MS = 15000,         /* watch: how long a coordinator may be away */
    SUBMIT_RETRY_MS = 30000,  /* submit: how long a submission is sent again */
    SUBMIT_TRY_MS = 10000,    /* submit: one try's limit (the API answers within 5 s) */
};

static const char *const terminal_states[] = { "complete", "failed", "cancelled", "expired" };
static const char *const all_states[] = { "pending", "running", "complete", "failed", "cancelled", "expired" };

static bool one_of(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return true;
    return false;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- one job's answer ------------------------------------------------------------- */

/* What a job's answer says, for the progress line and the summaries. */
typedef struct view {
    char state[16];
    double items, done, failed, rate;
    bool has_rate;
    const msgpack_object *outputs;   /* progress.outputs or result.outputs; borrowed */
    char blocked[256];               /* progress.blocked: why no node online can run it; "" */
} view;

static void read_view(const msgpack_object *job, view *v)
{
    memset(v, 0, sizeof *v);
    remote_text(remote_get(job, "state"), v->state, sizeof v->state, "?");
    v->items = remote_num(remote_get(job, "items"), 0);
    const msgpack_object *result = remote_get(job, "result");
    const msgpack_object *progress = remote_get(job, "progress");
    const msgpack_object *src = result != NULL && remote_get(result, "outputs") != NULL ? result : progress;
    v->done = remote_num(remote_get(src, "items_done"), 0);
    v->failed = remote_num(remote_get(src, "items_failed"), 0);
    const msgpack_object *rate = remote_get(progress, "items_per_s");
    v->has_rate = rate != NULL && remote_num(rate, 0) > 0;
    v->rate = remote_num(rate, 0);
    v->outputs = remote_get(src, "outputs");
    if (v->outputs != NULL && v->outputs->type != MSGPACK_OBJECT_ARRAY)
        v->outputs = NULL;
    if (result == NULL && (strcmp(v->state, "pending") == 0 || strcmp(v->state, "running") == 0))
        remote_text(remote_get(progress, "blocked"), v->blocked, sizeof v->blocked, "");
}

/* The share done as the dashboard shows it: a complete job all of it, any
 * other its items done of its items, at most all (a tournament's
 * candidates together run more than its items). */
static double done_share(const view *v)
{
    if (strcmp(v->state, "complete") == 0)
        return 1;
    double f = v->items > 0 ? v->done / v->items : 0;
    return f > 1 ? 1 : f;
}

/* "price 10.4513 ± 0.0012" for output i, or false when there is none yet. */
static bool output_text(const view *v, uint32_t i, char *buf, size_t cap, bool with_name)
{
    if (v->outputs == NULL || i >= v->outputs->via.array.size)
        return false;
    const msgpack_object *o = &v->outputs->via.array.ptr[i];
    const msgpack_object *mean = remote_get(o, "mean");
    if (mean == NULL || remote_num(remote_get(o, "count"), 1) == 0)
        return false;
    char name[32], est[80];
    remote_text(remote_get(o, "name"), name, sizeof name, "output");
    remote_estimate(est, sizeof est, remote_num(mean, NAN), remote_num(remote_get(o, "stderr"), NAN));
    if (with_name)
        snprintf(buf, cap, "%s %s", name, est);
    else
        snprintf(buf, cap, "%s", est);
    return true;
}

/* Each output as "  name   mean ± stderr   (min .., max ..)". */
static void print_outputs(const view *v, const char *indent)
{
    if (v->outputs == NULL)
        return;
    size_t w = 0;
    for (uint32_t i = 0; i < v->outputs->via.array.size; i++) {
        char name[64];
        remote_text(remote_get(&v->outputs->via.array.ptr[i], "name"), name, sizeof name, "output");
        if (strlen(name) > w)
            w = strlen(name);
    }
    for (uint32_t i = 0; i < v->outputs->via.array.size; i++) {
        const msgpack_object *o = &v->outputs->via.array.ptr[i];
        char name[64], est[96], mn[32], mx[32];
        remote_text(remote_get(o, "name"), name, sizeof name, "output");
        if (!output_text(v, i, est, sizeof est, false))
            snprintf(est, sizeof est, "-");
        remote_text(remote_get(o, "min"), mn, sizeof mn, "?");
        remote_text(remote_get(o, "max"), mx, sizeof mx, "?");
        printf("%s%-*s  %s   (min %s, max %s)", indent, (int)w, name, est, mn, mx);
        /* the closed form, and how many standard errors the estimate is from it */
        const msgpack_object *cf = remote_get(o, "closed_form");
        double ref = remote_num(cf, NAN), se = remote_num(remote_get(o, "stderr"), NAN);
        if (cf != NULL && ref == ref)
            printf("   closed form %.8g, z %.2f", ref, (remote_num(remote_get(o, "mean"), NAN) - ref) / se);
        putchar('\n');
    }
}

/* A stat_weights result's weights, or a tournament's candidates and ladder. */
static void print_variants(const msgpack_object *result)
{
    const msgpack_object *w = remote_get(result, "weights"), *c = remote_get(result, "candidates");
    char name[80], a[32];
    if (w != NULL && w->type == MSGPACK_OBJECT_ARRAY) {
        printf("  weights   (change of the first output per unit of step)\n");
        for (uint32_t i = 0; i < w->via.array.size; i++) {
            const msgpack_object *e = &w->via.array.ptr[i];
            printf("    %-12s %.6g ± %.2g   (step %s)\n", remote_text(remote_get(e, "name"), name, sizeof name, "?"),
                remote_num(remote_get(e, "weight"), 0), remote_num(remote_get(e, "stderr"), 0),
                remote_text(remote_get(e, "step"), a, sizeof a, "?"));
        }
    }
    if (c != NULL && c->type == MSGPACK_OBJECT_ARRAY) {
        printf("  winner    %s\n", remote_text(remote_get(result, "winner"), name, sizeof name, "none"));
        printf("  candidates\n");
        for (uint32_t i = 0; i < c->via.array.size; i++) {
            const msgpack_object *e = &c->via.array.ptr[i];
            double after = remote_num(remote_get(e, "dropped_after"), 0);
            char fate[40] = "in to the end";
            if (after > 0)
                snprintf(fate, sizeof fate, "dropped after phase %.0f", after);
            printf("    #%-2.0f %-20s %.6g ± %.2g   %.0f items, %s\n", remote_num(remote_get(e, "rank"), 0),
                remote_text(remote_get(e, "name"), name, sizeof name, "?"), remote_num(remote_get(e, "mean"), 0),
                remote_num(remote_get(e, "stderr"), 0), remote_num(remote_get(e, "items"), 0), fate);
        }
    }
}

/* n as a whole number with thousands separated by commas: "4,000,000". */
static const char *grouped(double n, char *buf, size_t cap)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", n >= 0 && isfinite(n) ? n : 0);
    return sf_group_digits(digits, buf, cap);
}

/* What a job's "verification" member (of its result, or of its progress
 * while it runs) says, after the word "verified": "1,200,000 of 4,000,000
 * items (30.0%), trusted 0, unchecked 2,800,000; checks 12 passed, 1
 * failed, 0 waiting; retracted 40,000 items; quarantined nodes: 7". The
 * checks, the retracted items and the quarantined nodes only where there
 * are any. False when the job has no such member. */
static bool verification_text(const msgpack_object *job, double items, char *buf, size_t cap)
{
    const msgpack_object *result = remote_get(job, "result");
    const msgpack_object *ver = remote_get(result, "verification");
    if (ver == NULL)
        ver = remote_get(remote_get(job, "progress"), "verification");
    if (ver == NULL || ver->type != MSGPACK_OBJECT_MAP)
        return false;
    double verified = remote_num(remote_get(ver, "verified_items"), 0);
    double trusted = remote_num(remote_get(ver, "trusted_items"), 0);
    double unchecked = remote_num(remote_get(ver, "unchecked_items"), 0);
    double passed = remote_num(remote_get(ver, "checks_passed"), 0);
    double failed = remote_num(remote_get(ver, "checks_failed"), 0);
    double waiting = remote_num(remote_get(ver, "checks_waiting"), 0);
    double abandoned = remote_num(remote_get(ver, "checks_abandoned"), 0);
    double retracted = remote_num(remote_get(ver, "retracted_items"), 0);
    char a[32], b[32], c[32], d[32];
    size_t at = 0;
#define PUT(...)                                                                  \
    do {                                                                          \
        int n_ = snprintf(buf + at, at < cap ? cap - at : 0, __VA_ARGS__);        \
        at += n_ > 0 ? (size_t)n_ : 0;                                            \
    } while (0)
    PUT("%s of %s items", grouped(verified, a, sizeof a), grouped(items, b, sizeof b));
    if (items > 0)
        PUT(" (%.1f%%)", 100 * verified / items);
    PUT(", trusted %s, unchecked %s", grouped(trusted, c, sizeof c), grouped(unchecked, d, sizeof d));
    if (passed + failed + waiting + abandoned > 0) {
        PUT("; checks %.0f passed, %.0f failed, %.0f waiting", passed, failed, waiting);
        if (abandoned > 0)
            PUT(", %.0f abandoned", abandoned);
    }
    if (retracted > 0)
        PUT("; retracted %s items", grouped(retracted, a, sizeof a));
    const msgpack_object *q = remote_get(ver, "quarantined_nodes");
    if (q != NULL && q->type == MSGPACK_OBJECT_ARRAY && q->via.array.size > 0) {
        PUT("; quarantined nodes: ");
        for (uint32_t i = 0; i < q->via.array.size; i++)
            PUT("%s%s", i ? ", " : "", remote_text(&q->via.array.ptr[i], a, sizeof a, "?"));
    }
#undef PUT
    if (at >= cap && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
    return true;
}

/* ---- reading a job file ----------------------------------------------------------- */

/* Rewrites the JSON reader's "JSON: what at offset N" as "line L, column C: what". */
static void json_where(const char *text, const char *err, char *out, size_t cap)
{
    const char *what = strncmp(err, "JSON: ", 6) == 0 ? err + 6 : err;
    const char *at = strstr(what, " at offset ");
    if (at == NULL) {
        snprintf(out, cap, "%s", what);
        return;
    }
    long off = strtol(at + 11, NULL, 10);
    int line = 1, col = 1;
    for (long i = 0; i < off && text[i] != '\0'; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            col++;
        }
    }
    snprintf(out, cap, "line %d, column %d: %.*s", line, col, (int)(at - what), what);
}

/* Whether the msgpack in sb is a map: fixmap (0x80-0x8f), map 16 or 32. */
static bool is_map(const msgpack_sbuffer *sb)
{
    unsigned char b = sb->size > 0 ? (unsigned char)sb->data[0] : 0;
    return (b & 0xf0) == 0x80 || b == 0xde || b == 0xdf;
}

/* Reads the job file at path ("-": standard input) and checks that it is
 * a JSON object, as the coordinator will. Returns 0 with *text (owned,
 * NUL-terminated), or prints what is wrong and returns SF_EXIT_USAGE. */
static int read_job_file(remote *r, const char *path, char **text, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (f == NULL)
        return remote_fail(r, SF_EXIT_USAGE, "cannot read %s: %s", path, strerror(errno));
    char *buf = malloc(MAX_JOB_FILE + 2);
    if (buf == NULL)
        sf_oom(MAX_JOB_FILE + 2);
    size_t n = fread(buf, 1, MAX_JOB_FILE + 1, f);
    bool failed = ferror(f) != 0;
    int saved = errno;
    if (f != stdin)
        fclose(f);
    buf[n] = '\0';
    int rc = 0;
    if (failed) {
        rc = remote_fail(r, SF_EXIT_USAGE, "cannot read %s: %s", path, strerror(saved));
    } else if (n > MAX_JOB_FILE) {
        rc = remote_fail(r, SF_EXIT_USAGE, "%s is over 1 MiB, more than the coordinator takes", path);
    } else if (memchr(buf, '\0', n) != NULL) {
        rc = remote_fail(r, SF_EXIT_USAGE, "%s is not JSON text (it holds a NUL byte)", path);
    } else {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        char err[160], where[256];
        if (sf_json_to_msgpack(buf, n, &sb, err, sizeof err) != 0) {
            json_where(buf, err, where, sizeof where);
            rc = remote_fail(r, SF_EXIT_USAGE, "%s is not valid JSON: %s", path, where);
        } else if (!is_map(&sb)) {
            rc = remote_fail(r, SF_EXIT_USAGE, "%s: a job is a JSON object: {\"kernel\": ..., \"params\": {...}, "
                "\"items\": N}", path);
        }
        msgpack_sbuffer_destroy(&sb);
    }
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return 0;
}

/* ---- fields the flags put in --------------------------------------------------------- */

/* The job file is valid JSON (read_job_file checked it), so these skip
 * through it without checking again. */
static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* Past the JSON value (or the key) at p. */
static const char *skip_value(const char *p)
{
    int depth = 0;
    do {
        p = skip_ws(p);
        if (*p == '"') {
            for (p++; *p != '"'; p++)
                if (*p == '\\')
                    p++;
            p++;
        } else if (*p == '{' || *p == '[') {
            depth++;
            p++;
        } else if (*p == '}' || *p == ']') {
            depth--;
            p++;
        } else if (*p == ',' || *p == ':') {
            p++;
        } else {
            while (*p != '\0' && strchr(" \t\r\n,:]}", *p) == NULL)
                p++;
        }
    } while (depth > 0);
    return p;
}

typedef struct member {
    const char *start, *end, *value; /* "key": value, and the value */
} member;

/* The members of the object at obj, up to cap of them; how many there are. */
static size_t members(const char *obj, member *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = skip_ws(skip_ws(obj) + 1); *p == '"'; n++) {
        const char *colon = skip_ws(skip_value(p));
        const char *v = skip_ws(colon + 1), *end = skip_value(v);
        if (n < cap)
            out[n] = (member){ p, end, v };
        p = skip_ws(end);
        if (*p == ',')
            p = skip_ws(p + 1);
    }
    return n;
}

static bool member_is(const member *m, const char *key)
{
    size_t k = strlen(key);
    return m->start[0] == '"' && strncmp(m->start + 1, key, k) == 0 && m->start[1 + k] == '"';
}

enum { MAX_MEMBERS = 64 };

/* Appends the object at obj with member `key` given the value `value`
 * (JSON text): in the place of the one there, or last. */
static int put_member(sf_str *out, const char *obj, const char *key, const char *value)
{
    member m[MAX_MEMBERS];
    size_t n = members(obj, m, MAX_MEMBERS);
    if (n > MAX_MEMBERS)
        return -1;
    bool put = false;
    sf_str_cat(out, "{");
    for (size_t i = 0; i < n; i++) {
        bool mine = member_is(&m[i], key);
        if (mine && put) /* a key given twice: the coordinator would refuse it */
            continue;
        if (i > 0)
            sf_str_cat(out, ", ");
        if (mine) {
            sf_str_catf(out, "\"%s\": %s", key, value);
            put = true;
        } else {
            sf_str_catn(out, m[i].start, (size_t)(m[i].end - m[i].start));
        }
    }
    if (!put)
        sf_str_catf(out, "%s\"%s\": %s", n > 0 ? ", " : "", key, value);
    sf_str_cat(out, "}");
    return 0;
}

/* A tier list as JSON text, ["own", "team"], from bits, into *out. */
static void tiers_json(sf_str *out, uint8_t bits)
{
    sf_str_cat(out, "[");
    size_t start = out->len;
    for (unsigned i = 0; i < 4; i++)
        if (bits & (1u << i))
            sf_str_catf(out, "%s\"%s\"", out->len > start ? ", " : "", cd_tier_name((uint8_t)(1u << i)));
    sf_str_cat(out, "]");
}

/* *cur with "verify" member `key` set to `value` (JSON text): in the file's
 * "verify" object when it has one, in a new one otherwise; a "verify" that
 * is not an object is left for the coordinator to refuse. Returns -1 when an
 * object has too many members to change. */
static int put_verify(char **cur, const char *key, const char *value)
{
    sf_str body = SF_STR_INIT, obj = SF_STR_INIT;
    member m[MAX_MEMBERS];
    size_t n = members(*cur, m, MAX_MEMBERS);
    if (n > MAX_MEMBERS)
        return -1;
    const member *verify = NULL;
    for (size_t i = 0; i < n; i++)
        if (member_is(&m[i], "verify"))
            verify = &m[i];
    int rc = 0;
    if (verify != NULL && *verify->value == '{')
        rc = put_member(&obj, verify->value, key, value);
    else if (verify == NULL)
        sf_str_catf(&obj, "{\"%s\": %s}", key, value);
    if (rc == 0 && obj.len > 0 && (rc = put_member(&body, *cur, "verify", obj.s)) == 0) {
        free(*cur);
        *cur = sf_str_take(&body);
    }
    sf_str_free(&body);
    sf_str_free(&obj);
    return rc;
}

/* The job file's text with "tiers", "verify.check_rate" and "verify.trust"
 * set from --tiers, --check-rate and --trust (any may be NULL), and
 * "confirm_large": true with --yes; the rest as it is. *text is replaced (and freed). */
static int apply_flags(remote *r, char **text, size_t *len, const char *tiers, const char *check_rate,
    const char *trust, bool yes)
{
    sf_str body = SF_STR_INIT, value = SF_STR_INIT;
    char *cur = *text;
    int rc = 0;
    if (tiers != NULL) {
        uint8_t bits;
        sf_error e;
        if (cd_tiers_parse(tiers, &bits, &e) != 0) {
            rc = remote_fail(r, SF_EXIT_USAGE, "--tiers: %s", e.msg);
            goto out;
        }
        tiers_json(&value, bits);
        if (put_member(&body, cur, "tiers", value.s) != 0)
            goto too_many;
        free(cur);
        cur = sf_str_take(&body);
        sf_str_clear(&value);
    }
    if (check_rate != NULL) {
        char *end;
        double rate = strtod(check_rate, &end);
        if (end == check_rate || *end != '\0' || !(rate >= 0 && rate <= 1)) {
            rc = remote_fail(r, SF_EXIT_USAGE, "--check-rate wants a number from 0 to 1, not '%s'", check_rate);
            goto out;
        }
        char num[32];
        snprintf(num, sizeof num, "%.17g", rate);
        if (put_verify(&cur, "check_rate", num) != 0)
            goto too_many;
    }
    if (trust != NULL) {
        /* "none": trust no tier, every result open to checks */
        uint8_t bits = 0;
        sf_error e;
        if (strcmp(trust, "none") != 0 && cd_tiers_parse(trust, &bits, &e) != 0) {
            rc = remote_fail(r, SF_EXIT_USAGE, "--trust: %s (or none alone: no tier trusted)", e.msg);
            goto out;
        }
        tiers_json(&value, bits);
        if (put_verify(&cur, "trust", value.s) != 0)
            goto too_many;
        sf_str_clear(&value);
    }
    if (yes) {
        if (put_member(&body, cur, "confirm_large", "true") != 0)
            goto too_many;
        free(cur);
        cur = sf_str_take(&body);
    }
    *len = strlen(cur);
    goto out;
too_many:
    rc = remote_fail(r, SF_EXIT_USAGE, "the job file has over %d fields in one object: too many to change it", MAX_MEMBERS);
out:
    *text = cur;
    sf_str_free(&body);
    sf_str_free(&value);
    return rc;
}

/* ---- watch ------------------------------------------------------------------------ */

/* Leaves the progress line behind on its own line before dying of SIGINT. */
static void on_interrupt(int sig)
{
    ssize_t w = write(STDOUT_FILENO, "\n", 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static int term_columns(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}

/* Cuts s to at most cols code points. */
static void clip(char *s, int cols)
{
    int n = 0;
    for (char *p = s; *p; p++) {
        if (((unsigned char)*p & 0xc0) != 0x80 && ++n > cols) {
            *p = '\0';
            return;
        }
    }
}

/* The live line: for a terminal with a bar, otherwise plain. */
static void progress_line(char *buf, size_t cap, int64_t id, const view *v, double rate, bool tty)
{
    char est[128] = "", eta[32] = "", done[16], items[16], speed[16];
    bool has_est = output_text(v, 0, est, sizeof est, true);
    double frac = v->items > 0 ? v->done / v->items : 0;
    if (frac > 1)
        frac = 1;
    if (rate > 0 && v->done < v->items)
        remote_duration(eta, sizeof eta, (v->items - v->done) / rate);
    if (v->blocked[0] != '\0') {
        snprintf(buf, cap, "job %" PRId64 " %s, blocked: %s", id, v->state, v->blocked);
        if (tty)
            clip(buf, term_columns() - 1);
        return;
    }
    if (strcmp(v->state, "running") != 0) {
        snprintf(buf, cap, "job %" PRId64 " %s%s", id, v->state,
            strcmp(v->state, "pending") == 0 ? ": waiting for a node" : "");
        return;
    }
    if (!tty) {
        snprintf(buf, cap, "job %" PRId64 " running: %.0f/%.0f items (%.1f%%), %.0f items/s%s%s%s%s", id, v->done,
            v->items, 100 * frac, rate, eta[0] ? ", ETA " : "", eta, has_est ? ", " : "", est);
        return;
    }
    remote_count(done, sizeof done, v->done);
    remote_count(items, sizeof items, v->items);
    remote_count(speed, sizeof speed, rate);
    char tail[256];
    char head[32];
    int hn = snprintf(head, sizeof head, "job %" PRId64 " ", id);
    int cols = term_columns() - 1;
    /* The bar first: the estimate gives way to it on a narrow terminal
     * (80 columns), then the ETA. */
    int bar = 0;
    for (int drop = 0; drop < 3; drop++) {
        snprintf(tail, sizeof tail, " %5.1f%%  %s/%s items  %s items/s%s%s%s%s", 100 * frac, done, items, speed,
            eta[0] && drop < 2 ? "  ETA " : "", drop < 2 ? eta : "", has_est && drop < 1 ? "  " : "",
            drop < 1 ? est : "");
        bar = cols - hn - (int)strlen(tail) - 2;
        if (bar >= 20 || (bar >= 10 && drop == 2))
            break;
    }
    if (bar > 40)
        bar = 40;
    if (bar < 10) {
        snprintf(buf, cap, "%s%s", head, tail + 1);
    } else {
        char b[48];
        int filled = (int)(frac * bar);
        for (int i = 0; i < bar; i++)
            b[i] = i < filled ? '#' : '.';
        b[bar] = '\0';
        snprintf(buf, cap, "%s[%s]%s", head, b, tail);
    }
    clip(buf, cols);
}

/* Polls the job about twice a second until it ends. After the first
 * answer, network errors and 503s are retried for RETRY_MS (the
 * coordinator may be restarting); other refusals end the watch. Returns
 * the exit status. */
static int watch_job(remote *r, int64_t id)
{
    bool tty = !r->json && isatty(STDOUT_FILENO);
    char target[64], missing[64], line[512], last[512] = "", last_state[16] = "", last_blocked[256] = "";
    snprintf(target, sizeof target, "/api/jobs/%" PRId64, id);
    snprintf(missing, sizeof missing, "no such job %" PRId64, id);
    if (tty)
        signal(SIGINT, on_interrupt);
    int64_t failing_since = 0, prev_t = 0;
    double prev_done = -1, my_rate = 0;
    bool drawn = false, seen = false;
    for (int64_t next = now_ms();; next += POLL_MS) {
        if (next < now_ms() - POLL_MS)
            next = now_ms(); /* fell behind (a slow answer): no burst of polls to catch up */
        http_response res;
        sf_error e;
        int rc = remote_exchange(r, "GET", target, NULL, 0, &res, &e);
        /* Once the job has been seen, the coordinator may be restarting:
         * wait for it. A first request that fails is an answer. */
        bool transient = seen && (rc != 0 || res.status == 503);
        if (rc != 0 && !transient)
            return remote_fail(r, SF_EXIT_FAIL, "%s", e.msg);
        if (transient) {
            int64_t now = now_ms();
            if (failing_since == 0)
                failing_since = now;
            if (now - failing_since < RETRY_MS) {
                http_response_free(&res);
                pause_ms(next + POLL_MS - now_ms());
                continue;
            }
            if (drawn)
                putchar('\n');
            if (rc != 0)
                return remote_fail(r, SF_EXIT_FAIL, "%s", e.msg);
        }
        failing_since = 0;
        if (res.status >= 200 && res.status < 300)
            seen = true;
        if (res.status < 200 || res.status >= 300) {
            if (drawn)
                putchar('\n');
            return remote_refused(r, &res, missing);
        }
        remote_doc doc;
        if (remote_parse(r, &res, &doc) != 0) {
            remote_doc_free(&doc);
            http_response_free(&res);
            return SF_EXIT_FAIL;
        }
        view v;
        read_view(doc.root, &v);
        int64_t now = now_ms();
        if (prev_done >= 0 && v.done > prev_done && now > prev_t)
            my_rate = (v.done - prev_done) * 1000.0 / (double)(now - prev_t);
        if (v.done != prev_done) {
            prev_done = v.done;
            prev_t = now;
        }
        double rate = v.has_rate ? v.rate : my_rate;

        if (one_of(v.state, terminal_states, 4)) {
            if (r->json) {
                remote_print_body(&res);
            } else {
                if (drawn)
                    fputs("\r\033[K", stdout);
                double secs = remote_time(remote_get(doc.root, "finished_at")) -
                    remote_time(remote_get(doc.root, "started_at"));
                char took[32] = "";
                if (isfinite(secs)) {
                    snprintf(took, sizeof took, " in ");
                    remote_duration(took + 4, sizeof took - 4, secs);
                }
                printf("job %" PRId64 " %s: %.0f items done%s", id, v.state, v.done, took);
                if (v.failed > 0)
                    printf(", %.0f failed", v.failed);
                putchar('\n');
                print_outputs(&v, "  ");
                char digest[80];
                if (remote_get(remote_get(doc.root, "result"), "digest") != NULL)
                    printf("  digest %s\n", remote_text(remote_get(remote_get(doc.root, "result"), "digest"), digest,
                        sizeof digest, "?"));
                print_variants(remote_get(doc.root, "result"));
                char ver[1024];
                if (verification_text(doc.root, v.items, ver, sizeof ver))
                    printf("  verified %s\n", ver);
                fflush(stdout);
            }
            bool ok = strcmp(v.state, "complete") == 0;
            char state[16];
            snprintf(state, sizeof state, "%s", v.state);
            remote_doc_free(&doc);
            http_response_free(&res);
            if (tty)
                signal(SIGINT, SIG_DFL);
            return ok ? SF_EXIT_OK : remote_fail(r, SF_EXIT_FAIL, "job %" PRId64 " %s", id, state);
        }
        if (!r->json) {
            progress_line(line, sizeof line, id, &v, rate, tty);
            if (tty) {
                printf("\r%s\033[K", line);
                drawn = true;
            } else if (strcmp(line, last) != 0 &&
                (prev_t == now || strcmp(v.state, "running") != 0 || strcmp(v.state, last_state) != 0 ||
                    strcmp(v.blocked, last_blocked) != 0)) {
                /* One line per change of state, of the items done or of why
                 * no node can run it (the last node leaving a running job
                 * changes neither of the others). */
                printf("%s\n", line);
                snprintf(last, sizeof last, "%s", line);
                snprintf(last_state, sizeof last_state, "%s", v.state);
                snprintf(last_blocked, sizeof last_blocked, "%s", v.blocked);
            }
            fflush(stdout);
        }
        remote_doc_free(&doc);
        http_response_free(&res);
        pause_ms(next + POLL_MS - now_ms());
    }
}

/* ---- the subcommands -------------------------------------------------------------- */

static const char submit_usage[] =
    "usage: simfarm submit FILE.json [--watch] [--yes] [--key KEY] [--tiers LIST] [--check-rate R]\n"
    "                      [--trust LIST] [options]\n"
    "\n"
    "Submits the job in FILE.json (\"-\": standard input) to the coordinator\n"
    "(POST /api/jobs) and prints its id and URL. The file is checked to be a JSON\n"
    "object before it is sent; the coordinator checks the rest (docs/api.md). A\n"
    "warning that comes with the answer (no node has reported a speed for the\n"
    "kernel yet, so how long the job takes is not known) goes to standard error.\n"
    "The submission carries a key (Idempotency-Key): when an answer does not come\n"
    "(a timeout, a broken connection, a 503) it is sent again for up to 30 s, and\n"
    "the job is stored once.\n"
    "  --watch          then follow it as `simfarm watch` does; with --json, print\n"
    "                   the finished job's JSON\n"
    "  --yes            submit it even when it would take the farm over a day at\n"
    "                   its speed now (\"confirm_large\": true; the coordinator refuses\n"
    "                   such a size without it); nor warn that the farm\n"
    "                   knows no speed yet\n"
    "  --key KEY        the key, 1 to 128 visible ASCII characters (default: a\n"
    "                   random one): the same key and file again give the job\n"
    "                   stored the first time, not a second one\n"
    "  --tiers LIST     the node tiers that may run it, comma-separated: own, team,\n"
    "                   community, public (in place of the file's \"tiers\"; default:\n"
    "                   the coordinator's, own,team,community unless its operator\n"
    "                   changed it)\n"
    "  --check-rate R   the least share, 0 to 1, of the results from untrusted\n"
    "                   tiers that the coordinator checks on another owner's node\n"
    "                   (in place of the file's \"verify\": {\"check_rate\"}; default 0:\n"
    "                   the coordinator's policy)\n"
    "  --trust LIST     the tiers whose results are taken without checks,\n"
    "                   comma-separated, each one of the job's tiers; none: trust\n"
    "                   no tier, any result may be checked (in place of the file's\n"
    "                   \"verify\": {\"trust\"}; default: own)\n" REMOTE_COMMON_FLAGS;

/* The submission was tried `tries` times over `secs` and never stored:
 * says so with the last answer (an error rc with e, or res: freed), and
 * how to send it again safely. Returns SF_EXIT_FAIL. */
static int gave_up(remote *r, int rc, const sf_error *e, http_response *res, int tries, double secs)
{
    char last[320] = "";
    const char *why = rc != 0 ? "no answer came" : res->status == 409 ? "the same key was still being stored"
        : "the coordinator answered 503: its database is away or slow";
    if (rc != 0) {
        snprintf(last, sizeof last, "%.300s", e->msg);
    } else {
        remote_doc doc;
        if (remote_parse(r, res, &doc) == 0)
            remote_text(remote_get(doc.root, "error"), last, sizeof last, "");
        remote_doc_free(&doc);
        if (last[0] == '\0')
            snprintf(last, sizeof last, "%s answered %d", r->url.origin, res->status);
        http_response_free(res);
    }
    return remote_fail(r, SF_EXIT_FAIL, "the job was not stored after %d tries over %.0f s (%s; the last: %s): "
        "send it again with --key %s, which stores it once", tries, secs, why, last, r->key);
}

/* Sends the submission until it is answered: a reply that never came (a
 * timeout, a broken connection), a 503 and a 409 (the same key still being
 * stored) are tried again for SUBMIT_RETRY_MS, each try within
 * SUBMIT_TRY_MS. The key makes that safe: the coordinator stores the job
 * once. A coordinator that cannot be reached at all is an answer. Returns
 * what remote_call does. */
static int send_submission(remote *r, const char *text, size_t len, http_response *res)
{
    sf_error e;
    int tries = 0;
    for (int64_t start = now_ms();; pause_ms(POLL_MS)) {
        tries++;
        int64_t left = start + SUBMIT_RETRY_MS - now_ms();
        r->timeout_ms = (int)(left < SUBMIT_TRY_MS ? (left > 1000 ? left : 1000) : SUBMIT_TRY_MS);
        int rc = remote_exchange(r, "POST", "/api/jobs", text, len, res, &e);
        bool again = rc == HTTP_ETIMEDOUT || rc == HTTP_EIO || rc == HTTP_EPROTO ||
            (rc == 0 && (res->status == 503 || res->status == 409));
        if (!again || now_ms() - start + POLL_MS >= SUBMIT_RETRY_MS) {
            r->timeout_ms = 0;
            if (again && tries > 1) /* what happened over the retries, not only the last answer */
                return gave_up(r, rc, &e, res, tries, (now_ms() - start) / 1000.0);
            if (rc != 0)
                return remote_fail(r, SF_EXIT_FAIL, "%s", e.msg);
            return res->status >= 200 && res->status < 300 ? 0 : remote_refused(r, res, NULL);
        }
        http_response_free(res);
    }
}

int cmd_submit(int argc, char **argv)
{
    bool watch = false, yes = false;
    const char *key = NULL, *tiers = NULL, *check_rate = NULL, *trust = NULL;
    const remote_opt opts[] = { { "--watch", NULL, &watch }, { "--yes", NULL, &yes }, { "--key", &key, NULL },
        { "--tiers", &tiers, NULL },
        { "--check-rate", &check_rate, NULL }, { "--trust", &trust, NULL }, { NULL, NULL, NULL } };
    remote r;
    int rc = remote_init(&r, "submit", submit_usage, argc, argv, opts, 1, 1, "the job file (FILE.json)");
    if (rc != REMOTE_GO_ON)
        return rc;
    char drawn[CD_SUBMISSION_KEY_DRAWN];
    if (key == NULL) {
        if (sodium_init() < 0)
            return remote_fail(&r, SF_EXIT_FAIL, "libsodium cannot start");
        cd_submission_key_draw(drawn);
        key = drawn;
    } else if (!cd_submission_key_ok(key)) {
        return remote_fail(&r, SF_EXIT_USAGE, "--key: must be 1 to 128 visible ASCII characters");
    }
    r.key = key;
    char *text = NULL;
    size_t len = 0;
    if ((rc = read_job_file(&r, r.args[0], &text, &len)) != 0)
        return rc;
    if ((tiers != NULL || check_rate != NULL || trust != NULL || yes) &&
        (rc = apply_flags(&r, &text, &len, tiers, check_rate, trust, yes)) != 0) {
        free(text);
        return rc;
    }
    http_response res;
    rc = send_submission(&r, text, len, &res);
    r.key = NULL; /* the submission's alone, not --watch's requests */
    free(text);
    if (rc != 0)
        return rc;
    remote_doc doc;
    int64_t id = 0;
    if (remote_parse(&r, &res, &doc) != 0 || !remote_int(remote_get(doc.root, "id"), &id)) {
        if (doc.root != NULL)
            remote_fail(&r, SF_EXIT_FAIL, "the server's answer has no job id: %.200s", res.body);
        remote_doc_free(&doc);
        http_response_free(&res);
        return SF_EXIT_FAIL;
    }
    char warning[512];
    if (remote_get(doc.root, "warning") != NULL) /* taken, with a word of caution: stderr, beside stdout's answer */
        fprintf(stderr, "simfarm %s: warning: %s\n", r.cmd,
            remote_text(remote_get(doc.root, "warning"), warning, sizeof warning, "?"));
    remote_doc_free(&doc);
    if (r.json && !watch)
        remote_print_body(&res);
    else if (!r.json)
        printf("job %" PRId64 " submitted: %s%s/api/jobs/%" PRId64 "\n", id, r.url.origin, r.url.prefix, id);
    fflush(stdout);
    http_response_free(&res);
    return watch ? watch_job(&r, id) : SF_EXIT_OK;
}

static const char watch_usage[] =
    "usage: simfarm watch ID [options]\n"
    "\n"
    "Follows job ID until it ends, asking the coordinator twice a second. On a\n"
    "terminal: a progress bar with items/s, the time left and the running estimate\n"
    "of the first output ± its standard error; otherwise one line per change. Then\n"
    "the result. Exit status 0 when the job completes, 1 when it failed, was\n"
    "cancelled or expired. With --json, prints the finished job's JSON only.\n" REMOTE_COMMON_FLAGS;

int cmd_watch(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "watch", watch_usage, argc, argv, NULL, 1, 1, "the job id");
    if (rc != REMOTE_GO_ON)
        return rc;
    int64_t id;
    if ((rc = remote_id(&r, r.args[0], "job", &id)) != 0)
        return rc;
    return watch_job(&r, id);
}

static const char jobs_usage[] =
    "usage: simfarm jobs [--state S] [--owner O] [--kernel K] [--limit N] [options]\n"
    "\n"
    "Lists jobs, newest first (GET /api/jobs).\n"
    "  --state S        only jobs in state S: pending, running, complete, failed,\n"
    "                   cancelled or expired\n"
    "  --owner O        only O's jobs\n"
    "  --kernel K       only jobs of kernel K (option, combat)\n"
    "  --limit N        at most N jobs, 1 to 1000 (default 100)\n" REMOTE_COMMON_FLAGS;

/* The jobs listed that are blocked, why, one line each: printed under the table. */
static sf_str blocked_lines = SF_STR_INIT;

static const char *const jobs_head[] = { "ID", "STATE", "OWNER", "KERNEL", "ITEMS", "DONE", "CREATED", "NAME" };

static void jobs_row(const msgpack_object *j, remote_table *t)
{
    char id[24], st[16], own[64], ker[32], items[32], done[32], created[40], name[130];
    view v;
    read_view(j, &v);
    if (v.items > 0 && (v.done > 0 || strcmp(v.state, "running") == 0 || strcmp(v.state, "complete") == 0))
        snprintf(done, sizeof done, "%.0f%%", floor(100 * done_share(&v)));
    else
        snprintf(done, sizeof done, "-");
    if (v.blocked[0] != '\0') {
        snprintf(st, sizeof st, "blocked");
        char line[320];
        snprintf(line, sizeof line, "job %s is blocked: %s\n", remote_text(remote_get(j, "id"), id, sizeof id, "?"),
            v.blocked);
        sf_str_cat(&blocked_lines, line);
    }
    remote_count(items, sizeof items, v.items);
    const char *row[] = {
        remote_text(remote_get(j, "id"), id, sizeof id, "?"),
        v.blocked[0] ? st : remote_text(remote_get(j, "state"), st, sizeof st, "?"),
        remote_text(remote_get(j, "owner"), own, sizeof own, "-"),
        remote_text(remote_get(j, "kernel"), ker, sizeof ker, "?"),
        items, done,
        remote_when(remote_get(j, "created_at"), created, sizeof created),
        remote_text(remote_get(j, "name"), name, sizeof name, ""),
    };
    remote_table_add(t, row);
}

int cmd_jobs(int argc, char **argv)
{
    const char *state = NULL, *owner = NULL, *kernel = NULL, *limit = NULL;
    const remote_opt opts[] = {
        { "--state", &state, NULL }, { "--owner", &owner, NULL }, { "--kernel", &kernel, NULL },
        { "--limit", &limit, NULL }, { NULL, NULL, NULL },
    };
    remote r;
    int rc = remote_init(&r, "jobs", jobs_usage, argc, argv, opts, 0, 0, "");
    if (rc != REMOTE_GO_ON)
        return rc;
    if (state != NULL && !one_of(state, all_states, 6))
        return remote_fail(&r, SF_EXIT_USAGE, "--state is one of pending, running, complete, failed, cancelled, "
            "expired; not '%s'", state);
    if (limit != NULL && !remote_whole(limit, 1, 1000))
        return remote_fail(&r, SF_EXIT_USAGE, "--limit wants a number from 1 to 1000, not '%s'", limit);
    char target[1024];
    const char *names[] = { "state", "owner", "kernel", "limit" }, *values[] = { state, owner, kernel, limit };
    if ((rc = remote_target(&r, target, sizeof target, "/api/jobs", names, values, 4)) != 0)
        return rc;
    rc = remote_list(&r, target, "jobs", jobs_head, 8, jobs_row);
    if (blocked_lines.len > 0)
        fputs(blocked_lines.s, stdout);
    sf_str_free(&blocked_lines);
    return rc;
}

static const char job_usage[] =
    "usage: simfarm job ID [options]\n"
    "\n"
    "Shows job ID (GET /api/jobs/ID): its state, the node tiers that may run it\n"
    "and its verification policy, progress while it runs, each output's mean ±\n"
    "standard error, and how much of it is verified: the items checked on another\n"
    "owner's node, trusted or not checked, the checks passed, failed and waiting,\n"
    "the items retracted and the nodes quarantined.\n" REMOTE_COMMON_FLAGS;

/* A list of names ("tiers", "verify.trust") as "own, team"; `none` when
 * it is empty. */
static const char *names_text(const msgpack_object *a, char *buf, size_t cap, const char *none)
{
    buf[0] = '\0';
    for (uint32_t i = 0; a != NULL && a->type == MSGPACK_OBJECT_ARRAY && i < a->via.array.size; i++) {
        char one[32];
        size_t at = strlen(buf);
        snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", remote_text(&a->via.array.ptr[i], one, sizeof one, "?"));
    }
    if (buf[0] == '\0')
        snprintf(buf, cap, "%s", none);
    return buf;
}

int cmd_job(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "job", job_usage, argc, argv, NULL, 1, 1, "the job id");
    if (rc != REMOTE_GO_ON)
        return rc;
    int64_t id;
    http_response res;
    if ((rc = remote_call_id(&r, "GET", "job", "", &id, &res)) != 0)
        return rc;
    if (r.json) {
        remote_print_body(&res);
        http_response_free(&res);
        return SF_EXIT_OK;
    }
    remote_doc doc;
    if ((rc = remote_parse(&r, &res, &doc)) == 0) {
        const msgpack_object *j = doc.root;
        view v;
        read_view(j, &v);
        char name[130], owner[64], kernel[32], strategy[32], seed[32], prio[16], when[40];
        remote_text(remote_get(j, "name"), name, sizeof name, "");
        printf("job %" PRId64 "%s%s\n", id, name[0] ? "  " : "", name);
        printf("  state     %s\n", v.state);
        if (v.blocked[0] != '\0')
            printf("  blocked   %s\n", v.blocked);
        printf("  owner     %s\n", remote_text(remote_get(j, "owner"), owner, sizeof owner, "-"));
        printf("  kernel    %s, strategy %s, %.0f items, seed %s, priority %s\n",
            remote_text(remote_get(j, "kernel"), kernel, sizeof kernel, "?"),
            remote_text(remote_get(j, "strategy"), strategy, sizeof strategy, "single"), v.items,
            remote_text(remote_get(j, "seed"), seed, sizeof seed, "?"),
            remote_text(remote_get(j, "priority"), prio, sizeof prio, "0"));
        char tiers[64], trust[64];
        printf("  tiers     %s\n", names_text(remote_get(j, "tiers"), tiers, sizeof tiers, "-"));
        const msgpack_object *verify = remote_get(j, "verify");
        if (verify != NULL) {
            double rate = remote_num(remote_get(verify, "check_rate"), 0);
            char rate_text[48];
            if (rate > 0)
                snprintf(rate_text, sizeof rate_text, "at least %.4g%% of the rest checked", 100 * rate);
            else
                snprintf(rate_text, sizeof rate_text, "the rest checked as the coordinator decides");
            printf("  verify    trusted: %s; %s\n", names_text(remote_get(verify, "trust"), trust, sizeof trust, "none"),
                rate_text);
        }
        printf("  created   %s\n", remote_when(remote_get(j, "created_at"), when, sizeof when));
        if (remote_get(j, "started_at") != NULL)
            printf("  started   %s\n", remote_when(remote_get(j, "started_at"), when, sizeof when));
        if (remote_get(j, "finished_at") != NULL) {
            char took[32];
            remote_duration(took, sizeof took, remote_time(remote_get(j, "finished_at")) -
                remote_time(remote_get(j, "started_at")));
            printf("  finished  %s (%s after it started)\n", remote_when(remote_get(j, "finished_at"), when,
                sizeof when), took);
        }
        if (remote_get(j, "result") != NULL) {
            printf("  result    %.0f items done, %.0f failed\n", v.done, v.failed);
            print_outputs(&v, "    ");
            char digest[80];
            if (remote_get(remote_get(j, "result"), "digest") != NULL)
                printf("  digest    %s\n", remote_text(remote_get(remote_get(j, "result"), "digest"), digest,
                    sizeof digest, "?"));
            print_variants(remote_get(j, "result"));
        } else if (remote_get(j, "progress") != NULL) {
            char eta[32] = "";
            if (v.rate > 0 && v.done < v.items)
                remote_duration(eta, sizeof eta, (v.items - v.done) / v.rate);
            printf("  progress  %.0f of %.0f items (%.1f%%), %.0f items/s%s%s\n", v.done, v.items,
                v.items > 0 ? 100 * v.done / v.items : 0.0, v.rate, eta[0] ? ", ETA " : "", eta);
            if (v.outputs != NULL) {
                printf("  estimate\n");
                print_outputs(&v, "    ");
            }
        }
        char ver[1024];
        if (verification_text(j, v.items, ver, sizeof ver))
            printf("  verified  %s\n", ver);
    }
    remote_doc_free(&doc);
    http_response_free(&res);
    return rc;
}

static const char cancel_usage[] =
    "usage: simfarm cancel ID [options]\n"
    "\n"
    "Cancels job ID (POST /api/jobs/ID/cancel): nodes computing its chunks are told\n"
    "to stop. Needs a token of the job's owner or of admin.\n" REMOTE_COMMON_FLAGS;

int cmd_cancel(int argc, char **argv)
{
    remote r;
    int rc = remote_init(&r, "cancel", cancel_usage, argc, argv, NULL, 1, 1, "the job id");
    if (rc != REMOTE_GO_ON)
        return rc;
    int64_t id;
    http_response res;
    if ((rc = remote_call_id(&r, "POST", "job", "/cancel", &id, &res)) != 0)
        return rc;
    if (r.json)
        remote_print_body(&res);
    else
        printf("job %" PRId64 " cancelled\n", id);
    http_response_free(&res);
    return SF_EXIT_OK;
}
