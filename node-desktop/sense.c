/*
 * sense.c — on battery, input idle time and the sleep inhibitor over D-Bus
 * (sense.h).
 *
 * Each service is followed with g_bus_watch_name: while its name is owned
 * we hold what we learnt from it (a property proxy, a poll timer); when it
 * vanishes all of that is dropped and its calls in flight are cancelled.
 * Every asynchronous call carries an `op` (a reference to the dk_sense and
 * the cancellable of the owner it was made for): its answer is dropped when
 * the dk_sense was destroyed or the owner has since vanished, even if the
 * answer raced the cancellation.
 */
#include "node-desktop/sense.h"

#include "base/log.h"

#include <errno.h>
#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#include <glib/gstdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define UPOWER_NAME "org.freedesktop.UPower"
#define UPOWER_PATH "/org/freedesktop/UPower"
#define LOGIND_NAME "org.freedesktop.login1"
#define LOGIND_PATH "/org/freedesktop/login1"
#define LOGIND_MANAGER "org.freedesktop.login1.Manager"
#define LOGIND_SESSION "org.freedesktop.login1.Session"
#define MUTTER_NAME "org.gnome.Mutter.IdleMonitor"
#define MUTTER_PATH "/org/gnome/Mutter/IdleMonitor/Core"

enum {
    TICK_MS = 1000,         /* idle monitor poll; "changes take effect within one second" */
    CALL_TIMEOUT_MS = 5000, /* a service that does not answer in this long has failed */
};

static const char LOG_SRC[] = "desktop";

struct dk_sense {
    int refs; /* the owner's, one per watch and one per op in flight */
    bool dead;
    GMainContext *ctx;
    dk_sense_fn changed;
    void *data;
    GSource *notify_src; /* pending call of changed; not owned (the context holds it) */
    GSource *tick_src;   /* 1 s while an idle source is followed; not owned */

    /* UPower, on the system bus. */
    guint upower_watch;
    GCancellable *upower_cancel; /* of the present owner; NULL while absent */
    GDBusProxy *upower;
    bool on_battery;
    bool upower_logged;

    /* The GNOME idle monitor, on the session bus. */
    guint mutter_watch;
    GDBusConnection *session_bus; /* while the name is owned */
    GCancellable *mutter_cancel;
    bool mutter_in_flight;
    bool mutter_ok; /* the last GetIdletime answered */
    uint64_t mutter_idle_ms;
    bool mutter_logged;

    /* logind, on the system bus: our session's idle hint, and the inhibitor. */
    guint logind_watch;
    GDBusConnection *system_bus; /* while logind is owned */
    GCancellable *logind_cancel;
    GDBusProxy *session; /* org.freedesktop.login1.Session of this process */
    bool session_logged;
    bool want_inhibit;
    bool inhibit_in_flight;
    int inhibit_fd; /* -1 when not held */
    bool inhibit_logged;
};

/* ---- lifetime ----------------------------------------------------------- */

static dk_sense *sense_ref(dk_sense *s)
{
    s->refs++;
    return s;
}

static void sense_unref(void *p)
{
    dk_sense *s = p;
    /* All refs are taken and dropped on the one main context: no atomics. */
    if (--s->refs > 0)
        return;
    g_main_context_unref(s->ctx);
    g_free(s);
}

typedef struct op {
    dk_sense *s;
    GCancellable *cancel;
} op;

static op *op_new(dk_sense *s, GCancellable *cancel)
{
    op *o = g_new(op, 1);
    o->s = sense_ref(s);
    o->cancel = g_object_ref(cancel);
    return o;
}

/* The answer is no longer wanted: the dk_sense is gone or the service's
 * owner it was asked of has vanished. */
static bool op_stale(const op *o)
{
    return o->s->dead || g_cancellable_is_cancelled(o->cancel);
}

static void op_free(op *o)
{
    g_object_unref(o->cancel);
    sense_unref(o->s);
    g_free(o);
}

static void drop_cancel(GCancellable **c)
{
    if (*c == NULL)
        return;
    g_cancellable_cancel(*c);
    g_clear_object(c);
}

static void drop_proxy(dk_sense *s, GDBusProxy **p)
{
    if (*p == NULL)
        return;
    g_signal_handlers_disconnect_by_data(*p, s);
    g_clear_object(p);
}

/* A failure worth one line, until the thing works again (*logged). */
static void log_once(bool *logged, const char *what, const GError *err)
{
    if (*logged)
        return;
    *logged = true;
    sf_log(SF_LOG_WARN, LOG_SRC, "%s: %s", what, err != NULL ? err->message : "no answer");
}

/* The end of a g_dbus_proxy_new asked by o: the proxy, kept in *slot with
 * changed connected to its property changes; or NULL, when the answer is no
 * longer wanted or the service would not give it (said once, through
 * *logged, as what with the service's words). */
static GDBusProxy *proxy_made(op *o, GAsyncResult *res, GDBusProxy **slot, bool *logged, const char *what,
    GCallback changed)
{
    GError *err = NULL;
    GDBusProxy *proxy = g_dbus_proxy_new_finish(res, &err);
    if (op_stale(o)) {
        g_clear_object(&proxy);
    } else if (proxy == NULL) {
        log_once(logged, what, err);
    } else {
        *logged = false;
        *slot = proxy;
        g_signal_connect(proxy, "g-properties-changed", changed, o->s);
    }
    g_clear_error(&err);
    return proxy;
}

/* ---- telling the app ---------------------------------------------------- */

static gboolean notify_now(void *p)
{
    dk_sense *s = p;
    s->notify_src = NULL; /* before the call, which may destroy s */
    if (s->changed != NULL)
        s->changed(s->data);
    return G_SOURCE_REMOVE;
}

/* Calls changed from the main loop soon, once however many facts changed:
 * never from inside a call of ours (dk_sense_inhibit is called from the
 * app's decision, which runs in changed). */
static void notify(dk_sense *s)
{
    if (s->dead || s->notify_src != NULL)
        return;
    s->notify_src = g_idle_source_new();
    g_source_set_callback(s->notify_src, notify_now, s, NULL);
    g_source_attach(s->notify_src, s->ctx);
    g_source_unref(s->notify_src);
}

/* ---- the idle time ------------------------------------------------------ */

static bool session_bool(const dk_sense *s, const char *name, bool *out)
{
    GVariant *v = s->session != NULL ? g_dbus_proxy_get_cached_property(s->session, name) : NULL;
    bool ok = v != NULL && g_variant_is_of_type(v, G_VARIANT_TYPE_BOOLEAN);
    if (ok)
        *out = g_variant_get_boolean(v);
    if (v != NULL)
        g_variant_unref(v);
    return ok;
}

static bool session_u64(const dk_sense *s, const char *name, uint64_t *out)
{
    GVariant *v = s->session != NULL ? g_dbus_proxy_get_cached_property(s->session, name) : NULL;
    bool ok = v != NULL && g_variant_is_of_type(v, G_VARIANT_TYPE_UINT64);
    if (ok)
        *out = g_variant_get_uint64(v);
    if (v != NULL)
        g_variant_unref(v);
    return ok;
}

/* logind's idle time for our session: now − IdleSinceHintMonotonic while
 * IdleHint holds (both on CLOCK_MONOTONIC, µs), else 0. */
static bool logind_idle(const dk_sense *s, uint64_t *ms)
{
    bool hint;
    if (!session_bool(s, "IdleHint", &hint))
        return false;
    uint64_t since_us = 0;
    if (!hint || !session_u64(s, "IdleSinceHintMonotonic", &since_us)) {
        *ms = 0;
        return true;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now_us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    *ms = now_us > since_us ? (now_us - since_us) / 1000u : 0;
    return true;
}

bool dk_sense_idle_known(const dk_sense *s)
{
    return dk_sense_idle_source(s) != NULL;
}

const char *dk_sense_idle_source(const dk_sense *s)
{
    uint64_t ms;
    if (s->mutter_ok)
        return "GNOME idle monitor";
    if (logind_idle(s, &ms))
        return "logind";
    return NULL;
}

uint64_t dk_sense_idle_ms(const dk_sense *s)
{
    uint64_t ms = 0;
    if (s->mutter_ok)
        return s->mutter_idle_ms;
    return logind_idle(s, &ms) ? ms : 0;
}

static void mutter_answer(GObject *src, GAsyncResult *res, void *p)
{
    op *o = p;
    dk_sense *s = o->s;
    GError *err = NULL;
    GVariant *v = g_dbus_connection_call_finish(G_DBUS_CONNECTION(src), res, &err);
    if (op_stale(o))
        goto out;
    s->mutter_in_flight = false;
    bool was_ok = s->mutter_ok;
    uint64_t was_ms = s->mutter_idle_ms;
    if (v != NULL) {
        g_variant_get(v, "(t)", &s->mutter_idle_ms);
        s->mutter_ok = true;
        s->mutter_logged = false;
    } else {
        log_once(&s->mutter_logged, "the GNOME idle monitor cannot say the idle time", err);
        s->mutter_ok = false;
    }
    if (s->mutter_ok != was_ok || s->mutter_idle_ms != was_ms)
        notify(s);
out:
    if (v != NULL)
        g_variant_unref(v);
    g_clear_error(&err);
    op_free(o);
}

static void mutter_ask(dk_sense *s)
{
    if (s->session_bus == NULL || s->mutter_in_flight)
        return; /* a slow monitor gets one question at a time */
    s->mutter_in_flight = true;
    g_dbus_connection_call(s->session_bus, MUTTER_NAME, MUTTER_PATH, MUTTER_NAME, "GetIdletime", NULL,
        G_VARIANT_TYPE("(t)"), G_DBUS_CALL_FLAGS_NO_AUTO_START, CALL_TIMEOUT_MS, s->mutter_cancel, mutter_answer,
        op_new(s, s->mutter_cancel));
}

static gboolean tick(void *p)
{
    dk_sense *s = p;
    if (s->session_bus != NULL)
        mutter_ask(s);
    else
        notify(s); /* logind's idle time grows with the clock, without a signal */
    return G_SOURCE_CONTINUE;
}

/* The tick runs while the idle monitor is owned (to poll it) or while
 * logind says we are idle (the idle time grows); otherwise nothing changes
 * without a signal, and nothing runs. */
static void tick_update(dk_sense *s)
{
    bool hint = false;
    bool want = !s->dead && (s->session_bus != NULL || (session_bool(s, "IdleHint", &hint) && hint));
    if (want && s->tick_src == NULL) {
        s->tick_src = g_timeout_source_new(TICK_MS);
        g_source_set_callback(s->tick_src, tick, s, NULL);
        g_source_attach(s->tick_src, s->ctx);
        g_source_unref(s->tick_src);
    } else if (!want && s->tick_src != NULL) {
        g_source_destroy(s->tick_src);
        s->tick_src = NULL;
    }
}

static void mutter_appeared(GDBusConnection *conn, const char *name, const char *owner, void *p)
{
    (void)name, (void)owner;
    dk_sense *s = p;
    if (s->dead)
        return;
    drop_cancel(&s->mutter_cancel);
    g_clear_object(&s->session_bus);
    s->session_bus = g_object_ref(conn);
    s->mutter_cancel = g_cancellable_new();
    s->mutter_in_flight = false;
    mutter_ask(s); /* now, not a second from now */
    tick_update(s);
}

static void mutter_vanished(GDBusConnection *conn, const char *name, void *p)
{
    (void)conn, (void)name;
    dk_sense *s = p;
    if (s->dead)
        return;
    bool was_ok = s->mutter_ok;
    drop_cancel(&s->mutter_cancel);
    g_clear_object(&s->session_bus);
    s->mutter_in_flight = false;
    s->mutter_ok = false;
    tick_update(s);
    if (was_ok)
        notify(s);
}

/* ---- logind ------------------------------------------------------------- */

static void inhibit_request(dk_sense *s);

static void session_changed(GDBusProxy *proxy, GVariant *changed, GStrv invalidated, void *p)
{
    (void)proxy, (void)changed, (void)invalidated;
    dk_sense *s = p;
    tick_update(s);
    notify(s);
}

static void session_ready(GObject *src, GAsyncResult *res, void *p)
{
    (void)src;
    op *o = p;
    dk_sense *s = o->s;
    if (proxy_made(o, res, &s->session, &s->session_logged, "logind cannot show this session",
            G_CALLBACK(session_changed)) != NULL) {
        tick_update(s);
        notify(s);
    }
    op_free(o);
}

static void session_found(GObject *src, GAsyncResult *res, void *p)
{
    op *o = p;
    dk_sense *s = o->s;
    GError *err = NULL;
    GVariant *v = g_dbus_connection_call_finish(G_DBUS_CONNECTION(src), res, &err);
    if (op_stale(o))
        goto out;
    if (v == NULL) {
        log_once(&s->session_logged, "logind does not know this process's session", err);
        goto out;
    }
    const char *path;
    g_variant_get(v, "(&o)", &path);
    g_dbus_proxy_new(s->system_bus,
        G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START | G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS |
            G_DBUS_PROXY_FLAGS_GET_INVALIDATED_PROPERTIES,
        NULL, LOGIND_NAME, path, LOGIND_SESSION, s->logind_cancel, session_ready, op_new(s, s->logind_cancel));
out:
    if (v != NULL)
        g_variant_unref(v);
    g_clear_error(&err);
    op_free(o);
}

static void logind_appeared(GDBusConnection *conn, const char *name, const char *owner, void *p)
{
    (void)name, (void)owner;
    dk_sense *s = p;
    if (s->dead)
        return;
    drop_cancel(&s->logind_cancel);
    drop_proxy(s, &s->session);
    g_clear_object(&s->system_bus);
    s->system_bus = g_object_ref(conn);
    s->logind_cancel = g_cancellable_new();
    s->inhibit_in_flight = false;

    const char *sid = g_getenv("XDG_SESSION_ID");
    bool by_id = sid != NULL && sid[0] != '\0';
    g_dbus_connection_call(conn, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, by_id ? "GetSession" : "GetSessionByPID",
        by_id ? g_variant_new("(s)", sid) : g_variant_new("(u)", (guint32)getpid()), G_VARIANT_TYPE("(o)"),
        G_DBUS_CALL_FLAGS_NO_AUTO_START, CALL_TIMEOUT_MS, s->logind_cancel, session_found,
        op_new(s, s->logind_cancel));
    inhibit_request(s);
}

static void logind_vanished(GDBusConnection *conn, const char *name, void *p)
{
    (void)conn, (void)name;
    dk_sense *s = p;
    if (s->dead)
        return;
    bool had = s->session != NULL || s->inhibit_fd >= 0;
    drop_cancel(&s->logind_cancel);
    drop_proxy(s, &s->session);
    g_clear_object(&s->system_bus);
    s->inhibit_in_flight = false;
    /* The lock died with its logind; want_inhibit stays, to ask the next. */
    if (s->inhibit_fd >= 0) {
        close(s->inhibit_fd);
        s->inhibit_fd = -1;
    }
    tick_update(s);
    if (had)
        notify(s);
}

/* ---- the sleep inhibitor ------------------------------------------------ */

static void inhibit_answer(GObject *src, GAsyncResult *res, void *p)
{
    op *o = p;
    dk_sense *s = o->s;
    GError *err = NULL;
    GUnixFDList *fds = NULL;
    GVariant *v = g_dbus_connection_call_with_unix_fd_list_finish(G_DBUS_CONNECTION(src), &fds, res, &err);
    int fd = -1;
    if (v != NULL) {
        gint32 handle;
        g_variant_get(v, "(h)", &handle);
        fd = fds != NULL ? g_unix_fd_list_get(fds, handle, &err) : -1;
        if (fd < 0 && err == NULL)
            err = g_error_new_literal(G_IO_ERROR, G_IO_ERROR_FAILED, "logind's answer holds no file descriptor");
    }
    if (op_stale(o))
        goto out; /* fd, if any, is closed below: the lock is not wanted */
    s->inhibit_in_flight = false;
    if (fd < 0) {
        log_once(&s->inhibit_logged, "logind does not keep the computer awake", err);
        goto out;
    }
    s->inhibit_logged = false;
    if (!s->want_inhibit)
        goto out; /* released while asked */
    s->inhibit_fd = fd;
    fd = -1;
    notify(s);
out:
    if (fd >= 0)
        close(fd);
    if (v != NULL)
        g_variant_unref(v);
    g_clear_object(&fds);
    g_clear_error(&err);
    op_free(o);
}

static void inhibit_request(dk_sense *s)
{
    if (!s->want_inhibit || s->inhibit_fd >= 0 || s->inhibit_in_flight || s->system_bus == NULL)
        return;
    s->inhibit_in_flight = true;
    g_dbus_connection_call_with_unix_fd_list(s->system_bus, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, "Inhibit",
        g_variant_new("(ssss)", "sleep", "simfarm", "computing chunks for the farm", "block"), G_VARIANT_TYPE("(h)"),
        G_DBUS_CALL_FLAGS_NO_AUTO_START, CALL_TIMEOUT_MS, NULL, s->logind_cancel, inhibit_answer,
        op_new(s, s->logind_cancel));
}

void dk_sense_inhibit(dk_sense *s, bool hold)
{
    s->want_inhibit = hold;
    if (hold) {
        inhibit_request(s); /* also a retry after a failure */
        return;
    }
    if (s->inhibit_fd >= 0) {
        close(s->inhibit_fd); /* logind drops the lock when its fd closes */
        s->inhibit_fd = -1;
        notify(s);
    }
}

bool dk_sense_inhibit_held(const dk_sense *s)
{
    return s->inhibit_fd >= 0;
}

/* ---- UPower ------------------------------------------------------------- */

static void upower_read(dk_sense *s)
{
    GVariant *v = s->upower != NULL ? g_dbus_proxy_get_cached_property(s->upower, "OnBattery") : NULL;
    bool on = v != NULL && g_variant_is_of_type(v, G_VARIANT_TYPE_BOOLEAN) && g_variant_get_boolean(v);
    if (v != NULL)
        g_variant_unref(v);
    if (on != s->on_battery) {
        s->on_battery = on;
        notify(s);
    }
}

static void upower_changed(GDBusProxy *proxy, GVariant *changed, GStrv invalidated, void *p)
{
    (void)proxy, (void)changed, (void)invalidated;
    upower_read(p);
}

static void upower_ready(GObject *src, GAsyncResult *res, void *p)
{
    (void)src;
    op *o = p;
    dk_sense *s = o->s;
    if (proxy_made(o, res, &s->upower, &s->upower_logged, "UPower cannot say whether the computer is on battery",
            G_CALLBACK(upower_changed)) != NULL)
        upower_read(s);
    op_free(o);
}

static void upower_appeared(GDBusConnection *conn, const char *name, const char *owner, void *p)
{
    (void)name, (void)owner;
    dk_sense *s = p;
    if (s->dead)
        return;
    drop_cancel(&s->upower_cancel);
    drop_proxy(s, &s->upower);
    s->upower_cancel = g_cancellable_new();
    g_dbus_proxy_new(conn,
        G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START | G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS |
            G_DBUS_PROXY_FLAGS_GET_INVALIDATED_PROPERTIES,
        NULL, UPOWER_NAME, UPOWER_PATH, UPOWER_NAME, s->upower_cancel, upower_ready, op_new(s, s->upower_cancel));
}

static void upower_vanished(GDBusConnection *conn, const char *name, void *p)
{
    (void)conn, (void)name;
    dk_sense *s = p;
    if (s->dead)
        return;
    drop_cancel(&s->upower_cancel);
    drop_proxy(s, &s->upower);
    upower_read(s); /* no UPower: on AC */
}

bool dk_sense_on_battery(const dk_sense *s)
{
    return s->on_battery;
}

/* ---- create / destroy --------------------------------------------------- */

static guint watch(dk_sense *s, GBusType bus, const char *name, GBusNameAppearedCallback appeared,
    GBusNameVanishedCallback vanished)
{
    /* The watch holds a ref: GLib may still hold its callbacks queued after
     * the unwatch, and releases the ref only then. */
    return g_bus_watch_name(bus, name, G_BUS_NAME_WATCHER_FLAGS_NONE, appeared, vanished, sense_ref(s), sense_unref);
}

dk_sense *dk_sense_create(dk_sense_fn changed, void *data)
{
    dk_sense *s = g_new0(dk_sense, 1);
    s->refs = 1;
    s->ctx = g_main_context_ref_thread_default();
    s->changed = changed;
    s->data = data;
    s->inhibit_fd = -1;
    s->upower_watch = watch(s, G_BUS_TYPE_SYSTEM, UPOWER_NAME, upower_appeared, upower_vanished);
    s->logind_watch = watch(s, G_BUS_TYPE_SYSTEM, LOGIND_NAME, logind_appeared, logind_vanished);
    s->mutter_watch = watch(s, G_BUS_TYPE_SESSION, MUTTER_NAME, mutter_appeared, mutter_vanished);
    return s;
}

void dk_sense_destroy(dk_sense *s)
{
    if (s == NULL)
        return;
    s->dead = true;
    g_bus_unwatch_name(s->upower_watch);
    g_bus_unwatch_name(s->logind_watch);
    g_bus_unwatch_name(s->mutter_watch);
    drop_cancel(&s->upower_cancel);
    drop_cancel(&s->logind_cancel);
    drop_cancel(&s->mutter_cancel);
    drop_proxy(s, &s->upower);
    drop_proxy(s, &s->session);
    g_clear_object(&s->system_bus);
    g_clear_object(&s->session_bus);
    if (s->inhibit_fd >= 0)
        close(s->inhibit_fd);
    s->inhibit_fd = -1;
    if (s->tick_src != NULL)
        g_source_destroy(s->tick_src);
    s->tick_src = NULL;
    if (s->notify_src != NULL)
        g_source_destroy(s->notify_src);
    s->notify_src = NULL;
    sense_unref(s);
}

/* ---- the autostart entry ------------------------------------------------ */

/* exec as one argument of a desktop entry's Exec line: as it is when every
 * byte is plain, else in double quotes with ", `, $ and \ escaped; a % is
 * doubled either way (the spec's field codes). */
static char *exec_quote(const char *exec)
{
    GString *q = g_string_new(NULL);
    bool plain = exec[0] != '\0';
    for (const char *c = exec; *c != '\0'; c++)
        if (!g_ascii_isalnum(*c) && strchr("/._-+,:@=%", *c) == NULL)
            plain = false;
    if (!plain)
        g_string_append_c(q, '"');
    for (const char *c = exec; *c != '\0'; c++) {
        if (*c == '%')
            g_string_append_c(q, '%');
        else if (!plain && strchr("\"`$\\", *c) != NULL)
            g_string_append_c(q, '\\');
        g_string_append_c(q, *c);
    }
    if (!plain)
        g_string_append_c(q, '"');
    return g_string_free(q, FALSE);
}

bool dk_autostart_set(bool on, const char *exec, GError **error)
{
    char *dir = g_build_filename(g_get_user_config_dir(), "autostart", NULL);
    char *path = g_build_filename(dir, "simfarm-desktop.desktop", NULL);
    bool ok = false;
    if (!on) {
        if (g_unlink(path) == 0 || errno == ENOENT)
            ok = true;
        else
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot remove %s: %s", path,
                g_strerror(errno));
        goto out;
    }
    if (g_mkdir_with_parents(dir, 0700) != 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot create %s: %s", dir,
            g_strerror(errno));
        goto out;
    }
    char *quoted = exec_quote(exec != NULL ? exec : "simfarm-desktop");
    char *line = g_strconcat(quoted, " --hidden", NULL);
    GKeyFile *kf = g_key_file_new();
    const char *g = G_KEY_FILE_DESKTOP_GROUP;
    g_key_file_set_string(kf, g, G_KEY_FILE_DESKTOP_KEY_TYPE, G_KEY_FILE_DESKTOP_TYPE_APPLICATION);
    g_key_file_set_string(kf, g, G_KEY_FILE_DESKTOP_KEY_NAME, "simfarm desktop node");
    g_key_file_set_string(kf, g, G_KEY_FILE_DESKTOP_KEY_COMMENT, "Computes chunks for a simfarm farm when the computer is idle");
    g_key_file_set_string(kf, g, G_KEY_FILE_DESKTOP_KEY_EXEC, line); /* escapes \ for the key file */
    g_key_file_set_boolean(kf, g, G_KEY_FILE_DESKTOP_KEY_TERMINAL, FALSE);
    g_key_file_set_boolean(kf, g, "X-GNOME-Autostart-enabled", TRUE);
    ok = g_key_file_save_to_file(kf, path, error);
    g_key_file_unref(kf);
    g_free(line);
    g_free(quoted);
out:
    g_free(path);
    g_free(dir);
    return ok;
}
