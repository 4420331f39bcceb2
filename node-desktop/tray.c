/*
 * tray.c — the status icon: a StatusNotifierItem through
 * libayatana-appindicator, where the desktop has a host for one (KDE,
 * GNOME with the AppIndicator extension, most others). Its menu opens the
 * window, pauses or resumes, snoozes for an hour and quits (which drains).
 * Where there is no host, the window is the only way in; closing it then
 * still leaves the node running, and the app says how to reach it again.
 */
#include "node-desktop/app.h"

#include "base/log.h"

#include <libayatana-appindicator/app-indicator.h>
#include <string.h>

struct dk_tray {
    AppIndicator *ind;
    GtkWidget *menu, *status, *pause, *snooze;
    char last[200];
};

static void open_clicked(GtkMenuItem *i, gpointer data)
{
    (void)i;
    dk_window_show(data);
}

static void pause_clicked(GtkMenuItem *i, gpointer data)
{
    (void)i;
    dk_app_toggle_pause(data);
}

static void snooze_clicked(GtkMenuItem *i, gpointer data)
{
    (void)i;
    dk_app_snooze(data, 60);
}

static void quit_clicked(GtkMenuItem *i, gpointer data)
{
    (void)i;
    dk_app_quit(data);
}

static GtkWidget *item(GtkWidget *menu, const char *label, GCallback cb, dk_app *a)
{
    GtkWidget *i = gtk_menu_item_new_with_label(label);
    if (cb != NULL)
        g_signal_connect(i, "activate", cb, a);
    gtk_menu_shell_append(GTK_MENU_SHELL(menu), i);
    return i;
}

dk_tray *dk_tray_create(dk_app *a, const char *icon_dir)
{
    dk_tray *t = g_new0(dk_tray, 1);
    t->menu = gtk_menu_new();
    t->status = item(t->menu, "", NULL, a);
    gtk_widget_set_sensitive(t->status, FALSE);
    gtk_menu_shell_append(GTK_MENU_SHELL(t->menu), gtk_separator_menu_item_new());
    item(t->menu, "Open", G_CALLBACK(open_clicked), a);
    t->pause = item(t->menu, "Pause", G_CALLBACK(pause_clicked), a);
    t->snooze = item(t->menu, "Snooze 1 h", G_CALLBACK(snooze_clicked), a);
    gtk_menu_shell_append(GTK_MENU_SHELL(t->menu), gtk_separator_menu_item_new());
    item(t->menu, "Quit", G_CALLBACK(quit_clicked), a);
    gtk_widget_show_all(t->menu);
    t->ind = app_indicator_new("simfarm-desktop", "simfarm-desktop", APP_INDICATOR_CATEGORY_APPLICATION_STATUS);
    if (icon_dir != NULL && g_file_test(icon_dir, G_FILE_TEST_IS_DIR))
        app_indicator_set_icon_theme_path(t->ind, icon_dir);
    app_indicator_set_title(t->ind, "simfarm desktop node");
    app_indicator_set_status(t->ind, APP_INDICATOR_STATUS_ACTIVE);
    app_indicator_set_menu(t->ind, GTK_MENU(t->menu));
    return t;
}

void dk_tray_refresh(dk_tray *t, const dk_app *a)
{
    if (t == NULL)
        return;
    char state[200];
    dk_app_state_text(a, state, sizeof state);
    if (strcmp(state, t->last) == 0)
        return;
    snprintf(t->last, sizeof t->last, "%s", state);
    gtk_menu_item_set_label(GTK_MENU_ITEM(t->status), state);
    bool held = a->paused_by_user || a->snooze_until_ms != 0;
    gtk_menu_item_set_label(GTK_MENU_ITEM(t->pause), held ? "Resume" : "Pause");
    gtk_widget_set_sensitive(t->pause, !a->quitting);
    gtk_widget_set_sensitive(t->snooze, !a->quitting);
    /* the icon's attention state says the node is held back */
    app_indicator_set_status(t->ind, a->plan.why != DK_RUN ? APP_INDICATOR_STATUS_ATTENTION : APP_INDICATOR_STATUS_ACTIVE);
}

void dk_tray_destroy(dk_tray *t)
{
    if (t == NULL)
        return;
    g_object_unref(t->ind);
    g_free(t);
}
