/*
 * app.h — what the desktop node's files share (node-desktop/ only): the
 * app's state, owned by the GTK main thread, and the functions one file
 * calls in another. app.c runs the node and decides (policy.h) what it may
 * do; window.c shows it and takes the user's choices; tray.c is the status
 * icon.
 */
#ifndef SIMFARM_DESKTOP_APP_H
#define SIMFARM_DESKTOP_APP_H

#include "node-desktop/policy.h"
#include "node-desktop/sense.h"
#include "node-desktop/settings.h"
#include "node-native/node.h"

#include <gtk/gtk.h>
#include <stdbool.h>
#include <stdint.h>

enum { DK_RATE_SAMPLES = 600 };  /* the throughput plot: one a second, 10 minutes */

typedef struct dk_tray dk_tray;

typedef struct dk_app {
    dk_config cfg;
    dk_today today;
    dk_sense *sense;
    unsigned ncpu;
    char *exe;                  /* this program, for the autostart entry */

    /* the node, while one runs (on a thread of its own) */
    nd_native *node;
    GThread *thread;
    char *claim_token;          /* for the next start; freed once welcomed */
    nd_native_view *view;       /* the last look at it */
    bool node_paused;           /* what was last asked of it */
    int priority_applied;       /* -1: none yet */
    bool joined;                /* a node was welcomed in this run */

    /* the user's wishes that are not settings */
    bool paused_by_user;
    uint64_t snooze_until_ms;
    bool quitting;
    dk_plan plan;
    dk_facts facts;

    /* what the coordinator says of this node (GET api/nodes/ID) */
    uint64_t node_id;
    char owner[128], tier[32];
    uint64_t all_chunks, all_items;
    bool all_known, asking;
    int64_t asked_us;

    /* accepted work counted into today's totals so far */
    uint64_t counted_chunks, counted_items;

    /* items/s, one sample a second */
    double rate[DK_RATE_SAMPLES];
    unsigned nrate;
    uint64_t last_items;
    int64_t last_sample_us;

    /* widgets (window.c) */
    GtkWidget *win, *join_win;
    GtkWidget *state, *node_line, *workers, *today_line, *all_line, *plot, *idle_line;
    GtkWidget *pause, *snooze;
    GtkWidget *cores_in_use, *cores_idle, *idle_minutes;
    GtkWidget *gpu, *gpu_in_use, *on_battery, *idle_prio, *keep_awake, *autostart;
    GtkWidget *join_addr, *join_token, *join_error;
    bool filling;               /* window.c is setting widgets: their signals change nothing */
    dk_tray *tray;
} dk_app;

/* ---- app.c ---- */

/* Joins the farm at server (with a claim token, or as a public node when
 * token is NULL): kept in the settings, and the node started. */
void dk_app_join(dk_app *a, const char *server, const char *token);

/* Decides again from the settings and the facts and tells the node. */
void dk_app_decide(dk_app *a);

/* The user's buttons. */
void dk_app_toggle_pause(dk_app *a);
void dk_app_snooze(dk_app *a, unsigned minutes);
void dk_app_quit(dk_app *a);

/* The settings changed in the window: kept, and acted on at once. */
void dk_app_settings_changed(dk_app *a);

/* The State line as the window and the tray show it. */
const char *dk_app_state_text(const dk_app *a, char *buf, size_t len);

/* ---- window.c ---- */

void dk_window_build(dk_app *a);
void dk_window_show(dk_app *a);
/* The first-run form ("simfarm — join a farm"), with an error line or "". */
void dk_join_show(dk_app *a, const char *error);
void dk_join_hide(dk_app *a);
/* Everything shown again from a->view and the app's state. */
void dk_window_refresh(dk_app *a);

/* ---- tray.c ---- */

/* The status icon (StatusNotifierItem through libayatana-appindicator),
 * with Open, Pause/Resume, Snooze 1 h and Quit. */
dk_tray *dk_tray_create(dk_app *a, const char *icon_dir);
void dk_tray_refresh(dk_tray *t, const dk_app *a);
void dk_tray_destroy(dk_tray *t);

#endif /* SIMFARM_DESKTOP_APP_H */
