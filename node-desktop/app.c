/*
 * app.c — simfarm-desktop: the native node (node-native/node.h) inside a
 * GTK window, lent while the computer is idle.
 *
 * The node runs on a thread of its own (nd_native_run); everything else
 * runs on GTK's main thread. Whenever a fact changes (battery, input idle
 * time, a snooze ending) or the user changes something, the app decides
 * again (dk_decide) and tells the node at once: nd_pause, which lets the
 * chunks in hand finish and be sent, and nd_native_use, which lends or
 * withdraws single workers without leaving the session. Once a second it
 * looks at the node (nd_native_look) and shows what it does.
 */
#include "node-desktop/app.h"

#include "base/exit.h"
#include "base/json.h"
#include "base/log.h"
#include "base/version.h"
#include "cli/http.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ASK_EVERY_S = 10 };

static uint64_t wall_ms(void)
{
    return (uint64_t)(g_get_real_time() / 1000);
}

/* ---- the node's thread ------------------------------------------------------------ */

typedef struct ended {
    dk_app *app;
    int code;
} ended;

static gboolean node_ended(gpointer data);

static gpointer node_thread(gpointer data)
{
    dk_app *a = data;
    ended *e = g_new0(ended, 1);
    e->app = a;
    e->code = nd_native_run(a->node);
    g_idle_add(node_ended, e);
    return NULL;
}

static void start_node(dk_app *a)
{
    char *key = dk_key_path();
    nd_opts o = { .url = a->cfg.server, .url_from = "the farm's address", .key_path = key,
        .claim_token = a->claim_token, .priority = a->cfg.s.idle_priority ? ND_PRIORITY_IDLE : ND_PRIORITY_NORMAL };
    nd_native *h = NULL;
    int code = nd_native_open(&o, &h);
    g_free(key);
    if (h == NULL) {
        char why[200];
        snprintf(why, sizeof why, "the node cannot start (exit status %d): %s", code,
            code == SF_EXIT_USAGE ? "the farm's address wants http://HOST:PORT" : "see the log");
        dk_join_show(a, why);
        return;
    }
    a->node = h;
    a->node_paused = false;
    a->priority_applied = a->cfg.s.idle_priority;
    a->counted_chunks = a->counted_items = 0;
    a->last_items = 0;
    memset(a->view, 0, sizeof *a->view);
    nd_native_look(h, a->view);
    dk_app_decide(a);
    a->thread = g_thread_new("node", node_thread, a);
}

static gboolean node_ended(gpointer data)
{
    ended *e = data;
    dk_app *a = e->app;
    int code = e->code;
    g_free(e);
    g_thread_join(a->thread);
    a->thread = NULL;
    nd_native_look(a->node, a->view);
    nd_native_close(a->node);
    a->node = NULL;
    dk_sense_inhibit(a->sense, false);
    /* a drain ends with status 0: Quit, or SIGINT/SIGTERM (the node's own
     * signal handlers drain it) */
    if (a->quitting || code == SF_EXIT_OK) {
        sf_log(SF_LOG_INFO, "desktop", "drained: quitting");
        gtk_main_quit();
        return G_SOURCE_REMOVE;
    }
    const char *said = a->view->coordinator_said[0] ? a->view->coordinator_said : a->view->last_warning;
    char why[400];
    if (code == SF_EXIT_NOT_ENROLLED)
        snprintf(why, sizeof why, "The farm refused to enrol this computer%s%s", said[0] ? ": " : "", said);
    else
        snprintf(why, sizeof why, "The node stopped (exit status %d)%s%s", code, said[0] ? ": " : "", said);
    dk_join_show(a, why);
    dk_window_refresh(a);
    return G_SOURCE_REMOVE;
}

/* ---- deciding ------------------------------------------------------------------------ */

void dk_app_decide(dk_app *a)
{
    dk_facts f = {
        .on_battery = dk_sense_on_battery(a->sense),
        .idle_known = dk_sense_idle_known(a->sense),
        .idle_ms = dk_sense_idle_ms(a->sense),
        .now_ms = wall_ms(),
        .snooze_until_ms = a->snooze_until_ms,
        .paused_by_user = a->paused_by_user,
        .ncpu = a->ncpu,
        .ndevices = a->view->nworkers > a->view->ncpu ? a->view->nworkers - a->view->ncpu : 0,
    };
    if (a->snooze_until_ms != 0 && f.now_ms >= a->snooze_until_ms)
        a->snooze_until_ms = f.snooze_until_ms = 0;
    dk_plan p = dk_decide(&a->cfg.s, &f);
    dk_why was = a->plan.why;
    a->facts = f;
    a->plan = p;
    if (a->node != NULL && !a->quitting) {
        bool pause = p.why != DK_RUN;
        if (pause != a->node_paused) {
            char words[160];
            sf_log(SF_LOG_INFO, "desktop", "%s", dk_why_text(&p, &f, words, sizeof words));
            /* held at once, inside their chunks (no CPU, nothing lost);
             * no new work until resumed */
            nd_native_hold(a->node, pause);
            nd_pause(nd_native_node(a->node), pause);
            a->node_paused = pause;
        } else if (p.why != was) {
            char words[160];
            sf_log(SF_LOG_INFO, "desktop", "%s", dk_why_text(&p, &f, words, sizeof words));
        }
        if (!pause)
            nd_native_use(a->node, p.cpu, p.devices);
        if (a->priority_applied != (int)a->cfg.s.idle_priority) {
            int rc = nd_native_set_priority(a->node, a->cfg.s.idle_priority ? ND_PRIORITY_IDLE : ND_PRIORITY_NORMAL);
            if (rc != 0)
                sf_log(SF_LOG_WARN, "desktop", "cannot set the compute threads' priority: %s", g_strerror(rc));
            a->priority_applied = a->cfg.s.idle_priority;
        }
    }
    dk_sense_inhibit(a->sense, a->node != NULL && !a->quitting && p.inhibit_sleep);
}

static void on_sensed(void *data)
{
    dk_app *a = data;
    dk_app_decide(a);
    dk_window_refresh(a);
    dk_tray_refresh(a->tray, a);
}

void dk_app_toggle_pause(dk_app *a)
{
    /* Resume also ends a snooze: the user wants it running now. */
    if (a->paused_by_user || a->snooze_until_ms != 0) {
        a->paused_by_user = false;
        a->snooze_until_ms = 0;
    } else {
        a->paused_by_user = true;
    }
    on_sensed(a);
}

void dk_app_snooze(dk_app *a, unsigned minutes)
{
    a->snooze_until_ms = wall_ms() + (uint64_t)minutes * 60000;
    on_sensed(a);
}

void dk_app_quit(dk_app *a)
{
    if (a->quitting) /* a second Quit leaves at once */
        exit(SF_EXIT_OK);
    a->quitting = true;
    if (a->node == NULL) {
        gtk_main_quit();
        return;
    }
    sf_log(SF_LOG_INFO, "desktop", "quitting: finishing the chunks in hand");
    nd_native_hold(a->node, false);
    nd_drain(nd_native_node(a->node));
    dk_sense_inhibit(a->sense, false);
    dk_window_refresh(a);
    dk_tray_refresh(a->tray, a);
}

void dk_app_settings_changed(dk_app *a)
{
    GError *e = NULL;
    if (!dk_config_save(&a->cfg, &e)) {
        sf_log(SF_LOG_WARN, "desktop", "cannot keep the settings: %s", e->message);
        g_clear_error(&e);
    }
    if (!dk_autostart_set(a->cfg.s.autostart, a->exe, &e)) {
        sf_log(SF_LOG_WARN, "desktop", "cannot change the start at login: %s", e->message);
        g_clear_error(&e);
    }
    on_sensed(a);
}

void dk_app_join(dk_app *a, const char *server, const char *token)
{
    g_free(a->cfg.server);
    a->cfg.server = g_strdup(server);
    g_free(a->claim_token);
    a->claim_token = token != NULL && token[0] != '\0' ? g_strdup(token) : NULL;
    GError *e = NULL;
    if (!dk_config_save(&a->cfg, &e)) {
        sf_log(SF_LOG_WARN, "desktop", "cannot keep the settings: %s", e->message);
        g_clear_error(&e);
    }
    a->joined = false;
    a->node_id = 0;
    a->all_known = false;
    sf_log(SF_LOG_INFO, "desktop", "joining %s %s", server, a->claim_token ? "with a claim token" : "as a public node");
    if (a->node == NULL)
        start_node(a);
    if (a->node != NULL) {
        dk_join_hide(a);
        dk_window_show(a);
    }
}

const char *dk_app_state_text(const dk_app *a, char *buf, size_t len)
{
    const nd_native_view *v = a->view;
    if (a->quitting)
        snprintf(buf, len, "Stopping: finishing the chunks in hand");
    else if (a->node == NULL)
        snprintf(buf, len, "Not joined to a farm");
    else if (a->plan.why != DK_RUN)
        dk_why_text(&a->plan, &a->facts, buf, len);
    else if (v->state == ND_UNAVAILABLE)
        snprintf(buf, len, "Cannot reach the farm: %s", v->detail[0] ? v->detail : "no answer");
    else if (v->state == ND_SETUP || v->state == ND_VERIFYING || v->state == ND_REGISTERING)
        snprintf(buf, len, a->joined ? "Resuming: a new session with the farm" : "Joining the farm");
    else if (v->state == ND_PAUSED)
        snprintf(buf, len, "Resuming: finishing the chunks in hand");
    else {
        bool busy = false;
        for (unsigned w = 0; w < v->nworkers; w++)
            busy |= v->workers[w].busy;
        snprintf(buf, len, busy ? "Running" : "Waiting for work");
    }
    return buf;
}

/* ---- what the coordinator says of this node ------------------------------------------- */

typedef struct ask {
    char *server;
    uint64_t id;
} ask;

static void ask_free(gpointer p)
{
    ask *q = p;
    g_free(q->server);
    g_free(q);
}

/* GET api/nodes/ID, on a thread of GIO's pool: the answer's body or NULL. */
static void ask_thread(GTask *t, gpointer src, gpointer data, GCancellable *cancel)
{
    (void)src;
    (void)cancel;
    const ask *q = data;
    http_url u;
    char target[64];
    http_response res = { 0 };
    snprintf(target, sizeof target, "/api/nodes/%" G_GUINT64_FORMAT, q->id);
    http_request req = { .method = "GET", .target = target, .connect_timeout_ms = 3000, .timeout_ms = 5000 };
    char *body = NULL;
    if (http_url_parse(q->server, &u, NULL) == 0 && http_send(&u, &req, &res, NULL) == 0 && res.status == 200)
        body = g_strndup(res.body, res.body_len);
    http_response_free(&res);
    g_task_return_pointer(t, body, g_free);
}

static void copy_str(const msgpack_object *o, char *out, size_t cap)
{
    if (o != NULL && o->type == MSGPACK_OBJECT_STR)
        snprintf(out, cap, "%.*s", (int)o->via.str.size, o->via.str.ptr);
}

static uint64_t get_u64(const msgpack_object *o)
{
    return o != NULL && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

static void asked(GObject *src, GAsyncResult *res, gpointer data)
{
    (void)src;
    dk_app *a = data;
    char *body = g_task_propagate_pointer(G_TASK(res), NULL);
    a->asking = false;
    if (body == NULL)
        return;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    char err[128];
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (sf_json_to_msgpack(body, strlen(body), &sb, err, sizeof err) == 0 &&
        msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS &&
        u.data.type == MSGPACK_OBJECT_MAP) {
        copy_str(sf_mp_get(&u.data, "owner"), a->owner, sizeof a->owner);
        copy_str(sf_mp_get(&u.data, "tier"), a->tier, sizeof a->tier);
        uint64_t chunks = get_u64(sf_mp_get(&u.data, "chunks_total"));
        uint64_t items = get_u64(sf_mp_get(&u.data, "items_total"));
        /* totals only grow: just after a session ends its row may not be written yet */
        if (!a->all_known || items > a->all_items || (items == a->all_items && chunks > a->all_chunks)) {
            a->all_chunks = chunks;
            a->all_items = items;
        }
        a->all_known = true;
    }
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    g_free(body);
    dk_window_refresh(a);
}

static void ask_coordinator(dk_app *a)
{
    if (a->asking || a->node_id == 0 || a->cfg.server == NULL)
        return;
    a->asking = true;
    a->asked_us = g_get_monotonic_time();
    ask *q = g_new0(ask, 1);
    q->server = g_strdup(a->cfg.server);
    q->id = a->node_id;
    GTask *t = g_task_new(NULL, NULL, asked, a);
    g_task_set_task_data(t, q, ask_free);
    g_task_run_in_thread(t, ask_thread);
    g_object_unref(t);
}

/* ---- once a second ---------------------------------------------------------------------- */

static gboolean tick(gpointer data)
{
    dk_app *a = data;
    if (a->node != NULL) {
        nd_native_look(a->node, a->view);
        if (a->view->node_id != 0 && !a->joined) {
            a->joined = true;
            a->node_id = a->view->node_id;
            g_free(a->claim_token); /* used: the key is enrolled now */
            a->claim_token = NULL;
            sf_log(SF_LOG_INFO, "desktop", "joined as node %" G_GUINT64_FORMAT, a->node_id);
        }
        uint64_t dc = a->view->accepted_chunks - a->counted_chunks, di = a->view->accepted_items - a->counted_items;
        if (dc > 0 || di > 0) {
            dk_today_add(&a->today, dc, di);
            a->counted_chunks = a->view->accepted_chunks;
            a->counted_items = a->view->accepted_items;
            ask_coordinator(a);
        }
        int64_t now = g_get_monotonic_time();
        uint64_t items = a->view->items_computed;
        if (a->last_sample_us != 0 && now > a->last_sample_us) {
            double r = items >= a->last_items ? (double)(items - a->last_items) * 1e6 / (double)(now - a->last_sample_us) : 0;
            if (a->nrate == DK_RATE_SAMPLES) {
                memmove(a->rate, a->rate + 1, (DK_RATE_SAMPLES - 1) * sizeof a->rate[0]);
                a->nrate--;
            }
            a->rate[a->nrate++] = r;
        }
        a->last_items = items;
        a->last_sample_us = now;
        if (now - a->asked_us >= (int64_t)ASK_EVERY_S * 1000000)
            ask_coordinator(a);
    }
    dk_app_decide(a);
    dk_window_refresh(a);
    dk_tray_refresh(a->tray, a);
    return G_SOURCE_CONTINUE;
}

/* ---- the command line ------------------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to,
        "usage: simfarm-desktop [--server URL] [--claim-token TOKEN] [--hidden] [simfarm://join?server=URL&token=TOKEN]\n"
        "  Lends this computer to a simfarm farm while it is idle, from a window and a tray icon.\n"
        "  --server URL         the farm's address (http://HOST:PORT)\n"
        "  --claim-token TOKEN  join with this claim token (from the farm's owner)\n"
        "  --hidden             start with the window hidden (the tray icon shows it)\n"
        "  Settings: $XDG_CONFIG_HOME/simfarm/desktop.ini; key: $XDG_DATA_HOME/simfarm/desktop.key\n");
}

/* simfarm://join?server=URL&token=TOKEN -> *server and *token (g_free). */
static bool parse_link(const char *link, char **server, char **token)
{
    const char *q = strchr(link, '?');
    if (strncmp(link, "simfarm://join", 14) != 0 || q == NULL)
        return false;
    char **kv = g_strsplit(q + 1, "&", -1);
    for (char **p = kv; *p != NULL; p++) {
        char *eq = strchr(*p, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        char *v = g_uri_unescape_string(eq + 1, NULL);
        if (strcmp(*p, "server") == 0) {
            g_free(*server);
            *server = v;
        } else if (strcmp(*p, "token") == 0) {
            g_free(*token);
            *token = v;
        } else {
            g_free(v);
        }
    }
    g_strfreev(kv);
    return *server != NULL;
}

int main(int argc, char **argv)
{
    /* these need no display */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return SF_EXIT_OK;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("simfarm-desktop %s\n", SF_VERSION);
            return SF_EXIT_OK;
        }
    }
    if (!gtk_init_check(&argc, &argv)) {
        fprintf(stderr, "simfarm-desktop: cannot open a display (is DISPLAY or WAYLAND_DISPLAY set?): "
            "a headless machine runs `simfarm node` instead\n");
        return SF_EXIT_FAIL;
    }
    sf_log_setup(SF_LOG_TEXT, SF_LOG_INFO, true);
    char *server = NULL, *token = NULL;
    bool hidden = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if ((strcmp(s, "--server") == 0 || strcmp(s, "--claim-token") == 0) && i + 1 < argc) {
            char **to = s[2] == 's' ? &server : &token;
            g_free(*to);
            *to = g_strdup(argv[++i]);
        } else if (strcmp(s, "--hidden") == 0) {
            hidden = true;
        } else if (strncmp(s, "simfarm:", 8) == 0) {
            if (!parse_link(s, &server, &token)) {
                fprintf(stderr, "simfarm-desktop: %s is not a join link: simfarm://join?server=URL&token=TOKEN\n", s);
                return SF_EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "simfarm-desktop: unknown argument '%s'\n", s);
            usage(stderr);
            return SF_EXIT_USAGE;
        }
    }

    dk_app *a = g_new0(dk_app, 1);
    a->view = g_new0(nd_native_view, 1);
    a->ncpu = g_get_num_processors();
    a->priority_applied = -1;
    a->exe = g_file_read_link("/proc/self/exe", NULL);
    GError *e = NULL;
    if (!dk_config_load(&a->cfg, a->ncpu, &e)) {
        sf_log(SF_LOG_WARN, "desktop", "%s: the defaults are used", e->message);
        g_clear_error(&e);
    }
    dk_today_load(&a->today);
    a->sense = dk_sense_create(on_sensed, a);
    dk_window_build(a);
    /* the icon where make install put it, for a PREFIX the icon theme does not search */
    char *bindir = g_path_get_dirname(a->exe ? a->exe : ".");
    char *icons = g_build_filename(bindir, "..", "share", "icons", "hicolor", "scalable", "apps", NULL);
    a->tray = dk_tray_create(a, icons);
    g_free(icons);
    g_free(bindir);

    if (token != NULL && (server != NULL || a->cfg.server != NULL)) {
        dk_app_join(a, server != NULL ? server : a->cfg.server, token);
    } else if (a->cfg.server != NULL && server == NULL) {
        start_node(a);
        if (!hidden && a->node != NULL)
            dk_window_show(a);
    } else {
        if (server != NULL) {
            g_free(a->cfg.server);
            a->cfg.server = g_strdup(server);
        }
        dk_join_show(a, "");
    }
    g_free(server);
    g_free(token);
    g_timeout_add(1000, tick, a);
    gtk_main();

    dk_sense_destroy(a->sense);
    dk_tray_destroy(a->tray);
    dk_config_clear(&a->cfg);
    g_free(a->claim_token);
    g_free(a->view);
    g_free(a->exe);
    g_free(a);
    return SF_EXIT_OK;
}
