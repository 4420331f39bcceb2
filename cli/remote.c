/*
 * remote.c — see remote.h.
 */
#include "cli/remote.h"

#include "cli/flags.h"

#include "runtime/runtime.h"
#include "base/json.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- messages ----------------------------------------------------------------------- */

int remote_fail(const remote *r, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t')
            *c = ' ';
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == ' ')
        msg[--n] = '\0';
    fflush(stdout);
    fprintf(stderr, "simfarm %s: %s\n", r->cmd, msg);
    return status;
}

bool remote_whole(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    return end != s && *end == '\0' && errno == 0 && n >= lo && n <= hi;
}

bool remote_tier(const char *s)
{
    return strcmp(s, "own") == 0 || strcmp(s, "team") == 0 || strcmp(s, "community") == 0 ||
        strcmp(s, "public") == 0;
}

int remote_target(const remote *r, char *target, size_t cap, const char *path, const char *const *names,
    const char *const *values, int n)
{
    snprintf(target, cap, "%s", path);
    char sep = '?';
    for (int i = 0; i < n; i++) {
        if (values[i] == NULL)
            continue;
        size_t len = strlen(target);
        snprintf(target + len, cap - len, "%c%s=", sep, names[i]);
        if (http_query_escape(target, cap, values[i]) != 0)
            return remote_fail(r, SF_EXIT_USAGE, "--%s is too long", names[i]);
        sep = '&';
    }
    return 0;
}

/* ---- the config file ---------------------------------------------------------------- */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Reads `key = value` lines from path into r's server, token and ca where
 * those are still empty. A missing file is fine unless required. Returns 0
 * or SF_EXIT_USAGE after printing what is wrong and where. */
static int read_config(remote *r, const char *path, bool required)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (!required && errno == ENOENT)
            return 0;
        return remote_fail(r, SF_EXIT_USAGE, "cannot read the config file %s: %s", path, strerror(errno));
    }
    struct {
        const char *key;
        char *dest;
        size_t cap;
        bool seen;
    } keys[] = {
        { "server", r->server, sizeof r->server, false },
        { "token", r->token, sizeof r->token, false },
        { "ca", r->ca, sizeof r->ca, false },
    };
    char line[1024];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            rc = remote_fail(r, SF_EXIT_USAGE, "%s:%d: line too long", path, lineno);
            break;
        }
        char *s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            rc = remote_fail(r, SF_EXIT_USAGE, "%s:%d: expected 'key = value'", path, lineno);
            break;
        }
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        if (*key == '\0' || *value == '\0') {
            rc = remote_fail(r, SF_EXIT_USAGE, "%s:%d: expected 'key = value'", path, lineno);
            break;
        }
        size_t k = 0;
        while (k < sizeof keys / sizeof keys[0] && strcmp(key, keys[k].key) != 0)
            k++;
        if (k == sizeof keys / sizeof keys[0]) {
            rc = remote_fail(r, SF_EXIT_USAGE, "%s:%d: unknown key '%s' (known: server, token, ca)", path, lineno, key);
            break;
        }
        if (keys[k].seen) {
            rc = remote_fail(r, SF_EXIT_USAGE, "%s:%d: '%s' is set twice", path, lineno, key);
            break;
        }
        keys[k].seen = true;
        if (strlen(value) >= keys[k].cap) {
            rc = remote_fail(r, SF_EXIT_USAGE, "%s:%d: the value is too long", path, lineno);
            break;
        }
        if (keys[k].dest[0] == '\0')
            snprintf(keys[k].dest, keys[k].cap, "%s", value);
    }
    if (rc == 0 && ferror(f))
        rc = remote_fail(r, SF_EXIT_USAGE, "cannot read the config file %s: %s", path, strerror(errno));
    fclose(f);
    return rc;
}

/* The config file to read: --config, $SIMFARM_CONFIG, then
 * $XDG_CONFIG_HOME/simfarm/config or ~/.config/simfarm/config. */
static const char *config_path(const char *flag, char *buf, size_t cap, bool *required)
{
    const char *env = getenv("SIMFARM_CONFIG");
    *required = true;
    if (flag != NULL)
        return flag;
    if (env != NULL && *env != '\0')
        return env;
    *required = false;
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg != NULL && *xdg == '/')
        snprintf(buf, cap, "%s/simfarm/config", xdg);
    else if (home != NULL && *home != '\0')
        snprintf(buf, cap, "%s/.config/simfarm/config", home);
    else
        return NULL;
    return buf;
}

/* ---- flags -------------------------------------------------------------------------- */

/* The option of the list (ended by a NULL name) named name, or NULL. */
static const remote_opt *find_opt(const remote_opt *list, const char *name)
{
    for (const remote_opt *c = list; c != NULL && c->name != NULL; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

int remote_init(remote *r, const char *cmd, const char *usage, int argc, char **argv, const remote_opt *opts,
    int min_args, int max_args, const char *missing)
{
    memset(r, 0, sizeof *r);
    r->cmd = cmd;
    const char *server = NULL, *token = NULL, *ca = NULL, *config = NULL;
    bool help = false;
    const remote_opt common[] = {
        { "--help", NULL, &help }, { "--json", NULL, &r->json }, { "--server", &server, NULL },
        { "--token", &token, NULL }, { "--ca", &ca, NULL }, { "--config", &config, NULL }, { NULL, NULL, NULL },
    };
    /* The common flags, then the command's: one list for the reader. */
    cli_flag flags[48];
    size_t nflags = 0;
    for (const remote_opt *o = common; o->name != NULL; o++)
        flags[nflags++] = (cli_flag){ o->name, o->value != NULL };
    for (const remote_opt *o = opts; o != NULL && o->name != NULL; o++) {
        assert(nflags + 1 < sizeof flags / sizeof flags[0]); /* the commands' tables are short and fixed */
        flags[nflags++] = (cli_flag){ o->name, o->value != NULL };
    }
    flags[nflags] = (cli_flag){ NULL, false };
    int most = (int)(sizeof r->args / sizeof r->args[0]);
    cli_args it = CLI_ARGS(argc, argv, flags, max_args < most ? max_args : most);
    const char *flag, *v;
    sf_error e;
    int next;
    while ((next = cli_next(&it, &flag, &v, &e)) > 0) {
        if (flag == NULL) {
            r->args[r->nargs++] = v;
            continue;
        }
        const remote_opt *o = find_opt(common, flag);
        if (o == NULL)
            o = find_opt(opts, flag);
        if (o->value != NULL)
            *o->value = v;
        if (o->on != NULL)
            *o->on = true;
    }
    if (next != 0)
        return remote_fail(r, SF_EXIT_USAGE, "%s (see simfarm %s --help)", e.msg, cmd);
    if (help) {
        fputs(usage, stdout);
        return SF_EXIT_OK;
    }
    if (r->nargs < min_args)
        return remote_fail(r, SF_EXIT_USAGE, "missing %s (see simfarm %s --help)", missing, cmd);

    /* Flags, then the environment, then the config file. */
    if (server == NULL && getenv("SIMFARM_SERVER") != NULL && *getenv("SIMFARM_SERVER") != '\0')
        server = getenv("SIMFARM_SERVER");
    r->token_from = "--token";
    if (token == NULL && getenv("SIMFARM_TOKEN") != NULL && *getenv("SIMFARM_TOKEN") != '\0') {
        token = getenv("SIMFARM_TOKEN");
        r->token_from = "$SIMFARM_TOKEN";
    }
    const char *ca_from = "--ca";
    if (ca == NULL && getenv("SIMFARM_CA") != NULL && *getenv("SIMFARM_CA") != '\0') {
        ca = getenv("SIMFARM_CA");
        ca_from = "$SIMFARM_CA";
    }
    if (server != NULL)
        snprintf(r->server, sizeof r->server, "%s", server);
    if (token != NULL)
        snprintf(r->token, sizeof r->token, "%s", token);
    if (ca != NULL)
        snprintf(r->ca, sizeof r->ca, "%s", ca);
    char path[PATH_MAX];
    bool required;
    const char *cfg = config_path(config, path, sizeof path, &required);
    if (cfg != NULL) {
        bool had_token = r->token[0] != '\0', had_ca = r->ca[0] != '\0';
        int rc = read_config(r, cfg, required);
        if (rc != 0)
            return rc;
        if (!had_token && r->token[0] != '\0')
            r->token_from = "the config file";
        if (!had_ca && r->ca[0] != '\0') {
            ca_from = "the config file";
            /* A relative path there is relative to the file. */
            const char *slash = strrchr(cfg, '/');
            if (r->ca[0] != '/' && slash != NULL) {
                char joined[sizeof r->ca];
                if (snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - cfg), cfg, r->ca) >= (int)sizeof joined)
                    return remote_fail(r, SF_EXIT_USAGE, "%s: the ca path is too long", cfg);
                memcpy(r->ca, joined, sizeof joined);
            }
        }
    }
    if (r->server[0] == '\0')
        snprintf(r->server, sizeof r->server, "%s", REMOTE_DEFAULT_SERVER);
    if (http_url_parse(r->server, &r->url, &e) != 0)
        return remote_fail(r, SF_EXIT_USAGE, "%s", e.msg);
    /* The CAs matter to https only; a bad file is the user's to fix. */
    if (r->url.tls && r->ca[0] != '\0' && http_ca_check(r->ca, &e) != 0)
        return remote_fail(r, SF_EXIT_USAGE, "%s (from %s)", e.msg, ca_from);
    return REMOTE_GO_ON;
}

int remote_id(const remote *r, const char *s, const char *what, int64_t *id)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno != 0 || v < 1)
        return remote_fail(r, SF_EXIT_USAGE, "%s ids are positive whole numbers, not '%s'", what, s);
    *id = v;
    return 0;
}

/* ---- requests ----------------------------------------------------------------------- */

int remote_exchange(remote *r, const char *method, const char *target, const char *body, size_t len,
    http_response *res, sf_error *e)
{
    http_request q = { .method = method, .target = target, .bearer = r->token[0] ? r->token : NULL,
        .key = r->key, .body = body, .body_len = len, .ca_file = r->ca[0] ? r->ca : NULL,
        .timeout_ms = r->timeout_ms };
    return http_send(&r->url, &q, res, e);
}

int remote_refused(remote *r, http_response *res, const char *missing)
{
    /* {"error": ..., "field": ...} when it comes from the API. */
    remote_doc doc = { 0 };
    char error[512] = "", field[128] = "";
    msgpack_sbuffer_init(&doc.sb);
    msgpack_unpacked_init(&doc.up);
    char perr[128];
    if (res->body_len > 0 && sf_json_to_msgpack(res->body, res->body_len, &doc.sb, perr, sizeof perr) == 0 &&
        msgpack_unpack_next(&doc.up, doc.sb.data, doc.sb.size, NULL) == MSGPACK_UNPACK_SUCCESS) {
        remote_text(remote_get(&doc.up.data, "error"), error, sizeof error, "");
        remote_text(remote_get(&doc.up.data, "field"), field, sizeof field, "");
    }
    remote_doc_free(&doc);
    int status = res->status;
    char retry[32];
    snprintf(retry, sizeof retry, "%s", res->retry_after);
    http_response_free(res);

    if (status == 404 && missing != NULL)
        return remote_fail(r, SF_EXIT_FAIL, "%s", missing);
    if (error[0] == '\0')
        snprintf(error, sizeof error, "%s answered %d%s", r->url.origin, status,
            status == 404 ? " (no such path: is it a simfarm coordinator?)" : "");
    if (status == 401 && r->token[0] == '\0')
        return remote_fail(r, SF_EXIT_FAIL, "%s (no token given: use --token, $SIMFARM_TOKEN or 'token = ...' "
            "in the config file)", error);
    if (status == 401)
        return remote_fail(r, SF_EXIT_FAIL, "%s (the token from %s)", error, r->token_from);
    if (status == 429 && retry[0] != '\0')
        return remote_fail(r, SF_EXIT_FAIL, "%s (retry after %s s)", error, retry);
    if (field[0] != '\0')
        return remote_fail(r, SF_EXIT_FAIL, "%s: %s", field, error);
    return remote_fail(r, SF_EXIT_FAIL, "%s", error);
}

int remote_call(remote *r, const char *method, const char *target, const char *body, size_t len,
    const char *missing, http_response *res)
{
    sf_error e;
    if (remote_exchange(r, method, target, body, len, res, &e) != 0)
        return remote_fail(r, SF_EXIT_FAIL, "%s", e.msg);
    if (res->status >= 200 && res->status < 300)
        return 0;
    return remote_refused(r, res, missing);
}

void remote_print_body(const http_response *res)
{
    fwrite(res->body, 1, res->body_len, stdout);
    if (res->body_len == 0 || res->body[res->body_len - 1] != '\n')
        putchar('\n');
    fflush(stdout);
}

/* ---- JSON answers ------------------------------------------------------------------- */

int remote_answer(remote *r, http_response *res, remote_doc *doc)
{
    int rc = REMOTE_GO_ON;
    if (r->json) {
        remote_print_body(res);
        rc = SF_EXIT_OK;
    } else if (remote_parse(r, res, doc) != 0) {
        remote_doc_free(doc);
        rc = SF_EXIT_FAIL;
    }
    http_response_free(res);
    return rc;
}

int remote_parse(const remote *r, const http_response *res, remote_doc *doc)
{
    msgpack_sbuffer_init(&doc->sb);
    msgpack_unpacked_init(&doc->up);
    doc->root = NULL;
    char err[160];
    if (sf_json_to_msgpack(res->body, res->body_len, &doc->sb, err, sizeof err) != 0)
        return remote_fail(r, SF_EXIT_FAIL, "cannot read the server's answer: %s", err);
    if (msgpack_unpack_next(&doc->up, doc->sb.data, doc->sb.size, NULL) != MSGPACK_UNPACK_SUCCESS)
        return remote_fail(r, SF_EXIT_FAIL, "cannot read the server's answer");
    doc->root = &doc->up.data;
    return 0;
}

void remote_doc_free(remote_doc *doc)
{
    msgpack_unpacked_destroy(&doc->up);
    msgpack_sbuffer_destroy(&doc->sb);
    doc->root = NULL;
}

const msgpack_object *remote_get(const msgpack_object *o, const char *key)
{
    if (o == NULL || o->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t klen = strlen(key);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == klen &&
            memcmp(kv->key.via.str.ptr, key, klen) == 0)
            return kv->val.type == MSGPACK_OBJECT_NIL ? NULL : &kv->val;
    }
    return NULL;
}

const char *remote_text(const msgpack_object *o, char *buf, size_t cap, const char *dflt)
{
    if (o == NULL) {
        snprintf(buf, cap, "%s", dflt);
    } else if (o->type == MSGPACK_OBJECT_STR) {
        size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
        memcpy(buf, o->via.str.ptr, n);
        buf[n] = '\0';
        /* Server text goes to a terminal: no control characters. */
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
                buf[i] = ' ';
    } else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        snprintf(buf, cap, "%llu", (unsigned long long)o->via.u64);
    } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        snprintf(buf, cap, "%lld", (long long)o->via.i64);
    } else if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32) {
        snprintf(buf, cap, "%.6g", o->via.f64);
    } else if (o->type == MSGPACK_OBJECT_BOOLEAN) {
        snprintf(buf, cap, "%s", o->via.boolean ? "yes" : "no");
    } else {
        snprintf(buf, cap, "%s", dflt);
    }
    return buf;
}

double remote_num(const msgpack_object *o, double dflt)
{
    if (o == NULL)
        return dflt;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
    default: return dflt;
    }
}

bool remote_int(const msgpack_object *o, int64_t *out)
{
    if (o != NULL && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
        *out = (int64_t)o->via.u64;
        return true;
    }
    if (o != NULL && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return true;
    }
    return false;
}

/* ---- formatting --------------------------------------------------------------------- */

void remote_estimate(char *buf, size_t cap, double mean, double se)
{
    if (!isfinite(se) || se <= 0 || !isfinite(mean)) {
        snprintf(buf, cap, "%.10g", mean);
        return;
    }
    int decimals = 1 - (int)floor(log10(se));
    if (decimals < 0)
        decimals = 0;
    if (decimals > 15)
        decimals = 15;
    snprintf(buf, cap, "%.*f ± %.*f", decimals, mean, decimals, se);
}

double remote_time(const msgpack_object *o)
{
    char s[64];
    if (o == NULL || o->type != MSGPACK_OBJECT_STR)
        return NAN;
    remote_text(o, s, sizeof s, "");
    struct tm tm = { 0 };
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
            &tm.tm_sec, &used) != 6)
        return NAN;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    double t = (double)timegm(&tm);
    const char *p = s + used;
    if (*p == '.') {
        char *end;
        t += strtod(p, &end);
        p = end;
    }
    int oh = 0, om = 0;
    if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &oh, &om) >= 1)
        t -= (*p == '-' ? -1 : 1) * (oh * 3600.0 + om * 60.0);
    return t;
}

const char *remote_when(const msgpack_object *o, char *buf, size_t cap)
{
    double t = remote_time(o);
    if (isnan(t))
        return remote_text(o, buf, cap, "-");
    time_t secs = (time_t)t;
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

void remote_duration(char *buf, size_t cap, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, cap, "?");
    else if (s < 10)
        snprintf(buf, cap, "%.1f s", s);
    else if (s < 60)
        snprintf(buf, cap, "%.0f s", s);
    else if (s < 3600)
        snprintf(buf, cap, "%d min %d s", (int)s / 60, (int)s % 60);
    else if (s < 86400 * 100.0)
        snprintf(buf, cap, "%d h %d min", (int)(s / 3600), (int)(s / 60) % 60);
    else
        snprintf(buf, cap, "%.0f days", s / 86400);
}

void remote_count(char *buf, size_t cap, double n)
{
    static const char suffix[] = " kMGTP";
    int i = 0;
    while (fabs(n) >= 999.95 && i < 5) {
        n /= 1000;
        i++;
    }
    bool whole = fabs(n - round(n)) < 0.05;
    if (i == 0)
        snprintf(buf, cap, "%.0f", n);
    else
        snprintf(buf, cap, "%.*f%c", fabs(n) < 99.95 && !whole ? 1 : 0, n, suffix[i]);
}

int remote_json_quote(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    if (cap - n < 3 || sf_json_quote(buf + n, cap - n, s) >= cap - n) {
        buf[n] = '\0';
        return -1;
    }
    return 0;
}

/* ---- tables ------------------------------------------------------------------------- */

void remote_table_init(remote_table *t, int ncols, const char *const *headers)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    remote_table_add(t, headers);
}

void remote_table_add(remote_table *t, const char *const *cells)
{
    for (int c = 0; c < t->ncols; c++) {
        if (t->n == t->cap)
            t->cells = sf_grow(t->cells, &t->cap, sizeof *t->cells);
        size_t len = strlen(cells[c]);
        char *copy = malloc(len + 1);
        if (copy == NULL)
            sf_oom(len + 1);
        memcpy(copy, cells[c], len + 1);
        t->cells[t->n++] = copy;
    }
}

/* Display width of UTF-8 text: code points, not bytes. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            w++;
    return w;
}

void remote_table_print(remote_table *t, FILE *out)
{
    size_t rows = t->n / (size_t)t->ncols;
    size_t *w = calloc((size_t)t->ncols, sizeof *w);
    if (w == NULL)
        sf_oom((size_t)t->ncols * sizeof *w);
    for (size_t i = 0; i < t->n; i++) {
        size_t cw = width(t->cells[i]);
        if (cw > w[i % (size_t)t->ncols])
            w[i % (size_t)t->ncols] = cw;
    }
    for (size_t r = 0; r < rows; r++) {
        /* Padding is written only before a cell that is not empty, so no
         * line ends in spaces. */
        size_t pad = 0;
        for (int c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * (size_t)t->ncols + (size_t)c];
            if (cell[0] != '\0') {
                fprintf(out, "%*s%s", (int)pad, "", cell);
                pad = 0;
            }
            pad += w[c] - width(cell) + 2;
        }
        fputc('\n', out);
    }
    for (size_t i = 0; i < t->n; i++)
        free(t->cells[i]);
    free(t->cells);
    free(w);
    memset(t, 0, sizeof *t);
}

int remote_list(remote *r, const char *target, const char *what, const char *const *headers, int ncols,
    remote_row_fn row)
{
    http_response res;
    int rc = remote_call(r, "GET", target, NULL, 0, NULL, &res);
    if (rc != 0)
        return rc;
    if (r->json) {
        remote_print_body(&res);
        http_response_free(&res);
        return SF_EXIT_OK;
    }
    remote_doc doc;
    rc = remote_parse(r, &res, &doc);
    if (rc == 0 && doc.root->type != MSGPACK_OBJECT_ARRAY)
        rc = remote_fail(r, SF_EXIT_FAIL, "the server's answer is not a list of %s", what);
    if (rc == 0 && doc.root->via.array.size == 0) {
        printf("no %s\n", what);
    } else if (rc == 0) {
        remote_table t;
        remote_table_init(&t, ncols, headers);
        for (uint32_t i = 0; i < doc.root->via.array.size; i++)
            row(&doc.root->via.array.ptr[i], &t);
        remote_table_print(&t, stdout);
    }
    remote_doc_free(&doc);
    http_response_free(&res);
    return rc;
}

int remote_call_id(remote *r, const char *method, const char *what, const char *suffix, int64_t *id,
    http_response *res)
{
    int rc = remote_id(r, r->args[0], what, id);
    if (rc != 0)
        return rc;
    char target[96], missing[64];
    snprintf(target, sizeof target, "/api/%ss/%" PRId64 "%s", what, *id, suffix);
    snprintf(missing, sizeof missing, "no such %s %" PRId64, what, *id);
    return remote_call(r, method, target, NULL, 0, missing, res);
}
