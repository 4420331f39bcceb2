/*
 * window.c — the desktop node's windows: the first-run form ("simfarm —
 * join a farm") and the main window (state, node, workers, totals, a
 * throughput plot, the controls and the settings). Every widget a person
 * reads or uses has an accessible name, which is how tests/desktop finds it
 * through AT-SPI. Closing the main window hides it; the app goes on.
 */
#include "node-desktop/app.h"

#include "base/str.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void name(GtkWidget *w, const char *accessible)
{
    atk_object_set_name(gtk_widget_get_accessible(w), accessible);
}

/* 12345678 -> "12,345,678" */
static const char *grouped(uint64_t v, char *buf, size_t len)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%" G_GUINT64_FORMAT, v);
    return sf_group_digits(digits, buf, len);
}

/* ---- the first-run form ------------------------------------------------------------------ */

static void join_clicked(GtkButton *b, gpointer data)
{
    dk_app *a = data;
    bool public_node = strcmp(gtk_button_get_label(b), "Join as a public node") == 0;
    const char *addr = gtk_entry_get_text(GTK_ENTRY(a->join_addr));
    const char *token = gtk_entry_get_text(GTK_ENTRY(a->join_token));
    if (strncmp(addr, "http://", 7) != 0 && strncmp(addr, "https://", 8) != 0) {
        gtk_label_set_text(GTK_LABEL(a->join_error), "The farm's address starts with http:// or https:// "
            "(http://HOST:PORT, as its owner gave it)");
        return;
    }
    if (!public_node && token[0] == '\0') {
        gtk_label_set_text(GTK_LABEL(a->join_error), "Paste the claim token the farm's owner gave you, "
            "or join as a public node");
        return;
    }
    gtk_label_set_text(GTK_LABEL(a->join_error), "");
    char *addr_copy = g_strdup(addr), *token_copy = public_node ? NULL : g_strdup(token);
    dk_app_join(a, addr_copy, token_copy);
    g_free(addr_copy);
    g_free(token_copy);
}

static gboolean join_closed(GtkWidget *w, GdkEvent *ev, gpointer data)
{
    (void)w;
    (void)ev;
    dk_app *a = data;
    if (a->node == NULL) /* nothing runs: closing the form ends the app */
        dk_app_quit(a);
    else
        gtk_widget_hide(a->join_win);
    return TRUE;
}

static GtkWidget *labelled_entry(GtkWidget *grid, int row, const char *text, const char *hint)
{
    GtkWidget *l = gtk_label_new(text);
    gtk_widget_set_halign(l, GTK_ALIGN_END);
    GtkWidget *e = gtk_entry_new();
    gtk_entry_set_placeholder_text(GTK_ENTRY(e), hint);
    gtk_widget_set_hexpand(e, TRUE);
    gtk_label_set_mnemonic_widget(GTK_LABEL(l), e);
    name(e, text);
    gtk_grid_attach(GTK_GRID(grid), l, 0, row, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), e, 1, row, 1, 1);
    return e;
}

static void build_join(dk_app *a)
{
    a->join_win = gtk_window_new(GTK_WINDOW_TOPLEVEL);
    gtk_window_set_title(GTK_WINDOW(a->join_win), "simfarm — join a farm");
    gtk_window_set_default_size(GTK_WINDOW(a->join_win), 520, -1);
    g_signal_connect(a->join_win, "delete-event", G_CALLBACK(join_closed), a);
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 10);
    gtk_container_set_border_width(GTK_CONTAINER(box), 16);
    GtkWidget *intro = gtk_label_new("Lend this computer to a simulation farm while you are not using it. "
        "Ask the farm's owner for its address and a claim token.");
    gtk_label_set_line_wrap(GTK_LABEL(intro), TRUE);
    gtk_label_set_xalign(GTK_LABEL(intro), 0);
    gtk_box_pack_start(GTK_BOX(box), intro, FALSE, FALSE, 0);
    GtkWidget *grid = gtk_grid_new();
    gtk_grid_set_row_spacing(GTK_GRID(grid), 6);
    gtk_grid_set_column_spacing(GTK_GRID(grid), 8);
    a->join_addr = labelled_entry(grid, 0, "Farm address", "http://farm.example.org:8080");
    a->join_token = labelled_entry(grid, 1, "Claim token", "sfc_…");
    gtk_box_pack_start(GTK_BOX(box), grid, FALSE, FALSE, 0);
    a->join_error = gtk_label_new("");
    name(a->join_error, "Join error");
    gtk_label_set_line_wrap(GTK_LABEL(a->join_error), TRUE);
    gtk_label_set_xalign(GTK_LABEL(a->join_error), 0);
    gtk_box_pack_start(GTK_BOX(box), a->join_error, FALSE, FALSE, 0);
    GtkWidget *buttons = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    GtkWidget *pub = gtk_button_new_with_label("Join as a public node");
    GtkWidget *join = gtk_button_new_with_label("Join");
    g_signal_connect(pub, "clicked", G_CALLBACK(join_clicked), a);
    g_signal_connect(join, "clicked", G_CALLBACK(join_clicked), a);
    gtk_box_pack_end(GTK_BOX(buttons), join, FALSE, FALSE, 0);
    gtk_box_pack_end(GTK_BOX(buttons), pub, FALSE, FALSE, 0);
    gtk_box_pack_start(GTK_BOX(box), buttons, FALSE, FALSE, 0);
    gtk_container_add(GTK_CONTAINER(a->join_win), box);
}

void dk_join_show(dk_app *a, const char *error)
{
    if (a->cfg.server != NULL && gtk_entry_get_text(GTK_ENTRY(a->join_addr))[0] == '\0')
        gtk_entry_set_text(GTK_ENTRY(a->join_addr), a->cfg.server);
    gtk_label_set_text(GTK_LABEL(a->join_error), error != NULL ? error : "");
    gtk_widget_show_all(a->join_win);
    gtk_window_present(GTK_WINDOW(a->join_win));
}

void dk_join_hide(dk_app *a)
{
    gtk_widget_hide(a->join_win);
}

/* ---- the main window --------------------------------------------------------------------- */

static gboolean main_closed(GtkWidget *w, GdkEvent *ev, gpointer data)
{
    (void)ev;
    (void)data;
    gtk_widget_hide(w); /* the node goes on; the tray icon opens it again */
    return TRUE;
}

static void pause_clicked(GtkButton *b, gpointer data)
{
    (void)b;
    dk_app_toggle_pause(data);
}

static void snooze_clicked(GtkButton *b, gpointer data)
{
    (void)b;
    dk_app_snooze(data, 60);
}

static void quit_clicked(GtkButton *b, gpointer data)
{
    (void)b;
    dk_app_quit(data);
}

/* Any setting changed: read them all back, keep them, act on them. */
static void setting_changed(GtkWidget *w, gpointer data)
{
    (void)w;
    dk_app *a = data;
    if (a->filling)
        return;
    dk_settings *s = &a->cfg.s;
    s->cores_in_use = (unsigned)gtk_spin_button_get_value_as_int(GTK_SPIN_BUTTON(a->cores_in_use));
    s->cores_idle = (unsigned)gtk_spin_button_get_value_as_int(GTK_SPIN_BUTTON(a->cores_idle));
    s->idle_minutes = (unsigned)gtk_spin_button_get_value_as_int(GTK_SPIN_BUTTON(a->idle_minutes));
    s->gpu = gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(a->gpu));
    s->gpu_in_use = !gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(a->gpu_in_use));
    s->pause_on_battery = gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(a->on_battery));
    s->idle_priority = gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(a->idle_prio));
    s->keep_awake = gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(a->keep_awake));
    s->autostart = gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(a->autostart));
    dk_app_settings_changed(a);
}

static GtkWidget *spin(dk_app *a, GtkWidget *grid, int row, const char *text, double lo, double hi)
{
    GtkWidget *l = gtk_label_new(text);
    gtk_widget_set_halign(l, GTK_ALIGN_START);
    GtkWidget *s = gtk_spin_button_new_with_range(lo, hi, 1);
    gtk_label_set_mnemonic_widget(GTK_LABEL(l), s);
    name(s, text);
    g_signal_connect(s, "value-changed", G_CALLBACK(setting_changed), a);
    gtk_grid_attach(GTK_GRID(grid), l, 0, row, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), s, 1, row, 1, 1);
    return s;
}

static GtkWidget *check(dk_app *a, GtkWidget *grid, int row, const char *text)
{
    GtkWidget *c = gtk_check_button_new_with_label(text);
    g_signal_connect(c, "toggled", G_CALLBACK(setting_changed), a);
    gtk_grid_attach(GTK_GRID(grid), c, 0, row, 2, 1);
    return c;
}

static GtkWidget *line(GtkWidget *box, const char *accessible, bool big)
{
    GtkWidget *l = gtk_label_new("");
    gtk_label_set_xalign(GTK_LABEL(l), 0);
    gtk_label_set_line_wrap(GTK_LABEL(l), TRUE);
    gtk_label_set_selectable(GTK_LABEL(l), FALSE);
    if (big) {
        PangoAttrList *at = pango_attr_list_new();
        pango_attr_list_insert(at, pango_attr_scale_new(1.4));
        pango_attr_list_insert(at, pango_attr_weight_new(PANGO_WEIGHT_BOLD));
        gtk_label_set_attributes(GTK_LABEL(l), at);
        pango_attr_list_unref(at);
    }
    name(l, accessible);
    gtk_box_pack_start(GTK_BOX(box), l, FALSE, FALSE, 0);
    return l;
}

/* The throughput plot: items/s of the last ten minutes, newest on the right. */
static gboolean draw_plot(GtkWidget *w, cairo_t *cr, gpointer data)
{
    dk_app *a = data;
    double width = gtk_widget_get_allocated_width(w), height = gtk_widget_get_allocated_height(w);
    cairo_set_source_rgb(cr, 0.97, 0.97, 0.97);
    cairo_paint(cr);
    double top = 0;
    for (unsigned i = 0; i < a->nrate; i++)
        top = a->rate[i] > top ? a->rate[i] : top;
    cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 11);
    char label[64], num[32];
    snprintf(label, sizeof label, "%s items/s", grouped((uint64_t)llround(top), num, sizeof num));
    cairo_move_to(cr, 4, 12);
    cairo_show_text(cr, a->nrate > 0 ? label : "items/s: none yet");
    cairo_move_to(cr, 4, height - 4);
    cairo_show_text(cr, "last 10 minutes");
    if (a->nrate < 2 || top <= 0)
        return FALSE;
    double step = width / (DK_RATE_SAMPLES - 1), y0 = height - 18, span = height - 36;
    cairo_set_source_rgb(cr, 0.16, 0.45, 0.75);
    cairo_set_line_width(cr, 1.5);
    for (unsigned i = 0; i < a->nrate; i++) {
        double x = width - (double)(a->nrate - 1 - i) * step, y = y0 - span * a->rate[i] / top;
        if (i == 0)
            cairo_move_to(cr, x, y);
        else
            cairo_line_to(cr, x, y);
    }
    cairo_stroke(cr);
    return FALSE;
}

void dk_window_build(dk_app *a)
{
    build_join(a);
    a->win = gtk_window_new(GTK_WINDOW_TOPLEVEL);
    gtk_window_set_title(GTK_WINDOW(a->win), "simfarm desktop node");
    gtk_window_set_default_size(GTK_WINDOW(a->win), 560, -1);
    gtk_window_set_icon_name(GTK_WINDOW(a->win), "simfarm-desktop");
    g_signal_connect(a->win, "delete-event", G_CALLBACK(main_closed), a);
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
    gtk_container_set_border_width(GTK_CONTAINER(box), 14);
    a->state = line(box, "State", true);
    a->node_line = line(box, "Node", false);
    a->idle_line = line(box, "Idle", false);
    a->workers = line(box, "Workers", false);
    a->today_line = line(box, "Today", false);
    a->all_line = line(box, "In all", false);
    a->plot = gtk_drawing_area_new();
    gtk_widget_set_size_request(a->plot, -1, 110);
    name(a->plot, "Throughput");
    g_signal_connect(a->plot, "draw", G_CALLBACK(draw_plot), a);
    gtk_box_pack_start(GTK_BOX(box), a->plot, FALSE, FALSE, 4);

    GtkWidget *buttons = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    a->pause = gtk_button_new_with_label("Pause");
    a->snooze = gtk_button_new_with_label("Snooze 1 h");
    GtkWidget *quit = gtk_button_new_with_label("Quit");
    g_signal_connect(a->pause, "clicked", G_CALLBACK(pause_clicked), a);
    g_signal_connect(a->snooze, "clicked", G_CALLBACK(snooze_clicked), a);
    g_signal_connect(quit, "clicked", G_CALLBACK(quit_clicked), a);
    gtk_box_pack_start(GTK_BOX(buttons), a->pause, FALSE, FALSE, 0);
    gtk_box_pack_start(GTK_BOX(buttons), a->snooze, FALSE, FALSE, 0);
    gtk_box_pack_end(GTK_BOX(buttons), quit, FALSE, FALSE, 0);
    gtk_box_pack_start(GTK_BOX(box), buttons, FALSE, FALSE, 4);

    GtkWidget *frame = gtk_frame_new("Settings");
    GtkWidget *grid = gtk_grid_new();
    gtk_container_set_border_width(GTK_CONTAINER(grid), 8);
    gtk_grid_set_row_spacing(GTK_GRID(grid), 4);
    gtk_grid_set_column_spacing(GTK_GRID(grid), 12);
    a->filling = true;
    a->cores_in_use = spin(a, grid, 0, "Cores while in use", 0, a->ncpu);
    a->cores_idle = spin(a, grid, 1, "Cores while idle", 1, a->ncpu);
    a->idle_minutes = spin(a, grid, 2, "Idle after (minutes)", 1, 240);
    a->gpu = check(a, grid, 3, "Use the GPU");
    a->gpu_in_use = check(a, grid, 4, "GPU off while in use");
    a->on_battery = check(a, grid, 5, "Pause on battery");
    a->idle_prio = check(a, grid, 6, "Run at idle priority");
    a->keep_awake = check(a, grid, 7, "Keep the computer awake on AC");
    a->autostart = check(a, grid, 8, "Start at login");
    const dk_settings *s = &a->cfg.s;
    gtk_spin_button_set_value(GTK_SPIN_BUTTON(a->cores_in_use), s->cores_in_use);
    gtk_spin_button_set_value(GTK_SPIN_BUTTON(a->cores_idle), s->cores_idle);
    gtk_spin_button_set_value(GTK_SPIN_BUTTON(a->idle_minutes), s->idle_minutes);
    gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(a->gpu), s->gpu);
    gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(a->gpu_in_use), !s->gpu_in_use);
    gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(a->on_battery), s->pause_on_battery);
    gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(a->idle_prio), s->idle_priority);
    gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(a->keep_awake), s->keep_awake);
    gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(a->autostart), s->autostart);
    a->filling = false;
    gtk_container_add(GTK_CONTAINER(frame), grid);
    gtk_box_pack_start(GTK_BOX(box), frame, FALSE, FALSE, 4);
    gtk_container_add(GTK_CONTAINER(a->win), box);
}

void dk_window_show(dk_app *a)
{
    dk_window_refresh(a);
    gtk_widget_show_all(a->win);
    gtk_window_present(GTK_WINDOW(a->win));
}

static void set_text(GtkWidget *l, const char *text)
{
    if (strcmp(gtk_label_get_text(GTK_LABEL(l)), text) != 0)
        gtk_label_set_text(GTK_LABEL(l), text);
}

void dk_window_refresh(dk_app *a)
{
    char buf[4096], n1[32], n2[32];
    set_text(a->state, dk_app_state_text(a, buf, sizeof buf));
    const nd_native_view *v = a->view;
    if (a->node_id == 0)
        set_text(a->node_line, a->cfg.server ? a->cfg.server : "");
    else if (a->owner[0])
        snprintf(buf, sizeof buf, "Node %" G_GUINT64_FORMAT " · owner %s · tier %s", a->node_id, a->owner, a->tier),
            set_text(a->node_line, buf);
    else
        snprintf(buf, sizeof buf, "Node %" G_GUINT64_FORMAT, a->node_id), set_text(a->node_line, buf);

    const char *src = dk_sense_idle_source(a->sense);
    if (src == NULL)
        snprintf(buf, sizeof buf, "The idle time cannot be read here: the in-use settings apply");
    else
        snprintf(buf, sizeof buf, "%s (no input for %" G_GUINT64_FORMAT " s, from the %s)",
            a->plan.in_use ? "In use" : "Idle", a->facts.idle_ms / 1000, src);
    set_text(a->idle_line, buf);

    size_t o = 0;
    buf[0] = '\0';
    int64_t now_ms = g_get_monotonic_time() / 1000;
    for (unsigned w = 0; w < v->nworkers && o + 200 < sizeof buf; w++) {
        const nd_worker_view *k = &v->workers[w];
        if (w < v->ncpu)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%sCPU %u: ", o ? "\n" : "", w + 1);
        else
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%sGPU: %s: ", o ? "\n" : "", k->device);
        if (k->busy && k->held) {
            o += (size_t)snprintf(buf + o, sizeof buf - o, "job %" G_GUINT64_FORMAT ", chunk %" G_GUINT64_FORMAT
                ", held inside it", k->job, k->chunk);
        } else if (k->busy) {
            double s = (double)(now_ms - (int64_t)k->started_ms) / 1000.0;
            uint64_t rate = s > 0.5 ? (uint64_t)((double)k->done / s) : 0;
            o += (size_t)snprintf(buf + o, sizeof buf - o, "job %" G_GUINT64_FORMAT ", chunk %" G_GUINT64_FORMAT ", %s items/s",
                k->job, k->chunk, grouped(rate, n1, sizeof n1));
            if (!k->lent)
                o += (size_t)snprintf(buf + o, sizeof buf - o, " (its last chunk)");
        } else {
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s", k->lent && !a->node_paused ? "idle" : "off");
        }
    }
    set_text(a->workers, buf);
    snprintf(buf, sizeof buf, "Today: %s chunks, %s items accepted", grouped(a->today.chunks, n1, sizeof n1),
        grouped(a->today.items, n2, sizeof n2));
    set_text(a->today_line, buf);
    if (a->all_known)
        snprintf(buf, sizeof buf, "In all: %s chunks, %s items", grouped(a->all_chunks, n1, sizeof n1),
            grouped(a->all_items, n2, sizeof n2));
    else
        snprintf(buf, sizeof buf, "In all: not known yet");
    set_text(a->all_line, buf);

    bool held = a->paused_by_user || a->snooze_until_ms != 0;
    gtk_button_set_label(GTK_BUTTON(a->pause), held ? "Resume" : "Pause");
    gtk_widget_set_sensitive(a->pause, !a->quitting);
    gtk_widget_set_sensitive(a->snooze, !a->quitting);
    gtk_widget_queue_draw(a->plot);
}
