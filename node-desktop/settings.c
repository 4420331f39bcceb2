/*
 * settings.c — see settings.h.
 */
#include "node-desktop/settings.h"

#include "base/log.h"

#include <errno.h>

#include <string.h>
#include <time.h>

#define GROUP "desktop"

static char *config_path(void)
{
    return g_build_filename(g_get_user_config_dir(), "simfarm", "desktop.ini", NULL);
}

static char *totals_path(void)
{
    return g_build_filename(g_get_user_data_dir(), "simfarm", "desktop-totals.ini", NULL);
}

char *dk_key_path(void)
{
    return g_build_filename(g_get_user_data_dir(), "simfarm", "desktop.key", NULL);
}

/* The key's value, or keep *v when the key is absent or not a number. */
static void get_uint(GKeyFile *f, const char *key, unsigned *v)
{
    GError *e = NULL;
    gint n = g_key_file_get_integer(f, GROUP, key, &e);
    if (e == NULL && n >= 0)
        *v = (unsigned)n;
    g_clear_error(&e);
}

static void get_bool(GKeyFile *f, const char *key, bool *v)
{
    GError *e = NULL;
    gboolean b = g_key_file_get_boolean(f, GROUP, key, &e);
    if (e == NULL)
        *v = b;
    g_clear_error(&e);
}

bool dk_config_load(dk_config *c, unsigned ncpu, GError **error)
{
    memset(c, 0, sizeof *c);
    dk_settings_defaults(&c->s, ncpu);
    char *path = config_path();
    GKeyFile *f = g_key_file_new();
    GError *e = NULL;
    bool ok = true;
    if (!g_key_file_load_from_file(f, path, G_KEY_FILE_NONE, &e)) {
        if (!g_error_matches(e, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            g_propagate_prefixed_error(error, e, "%s: ", path);
            e = NULL;
            ok = false;
        }
        g_clear_error(&e);
    } else {
        char *server = g_key_file_get_string(f, GROUP, "server", NULL);
        if (server != NULL && server[0] != '\0')
            c->server = server;
        else
            g_free(server);
        get_uint(f, "cores_in_use", &c->s.cores_in_use);
        get_uint(f, "cores_idle", &c->s.cores_idle);
        get_bool(f, "gpu", &c->s.gpu);
        get_bool(f, "gpu_in_use", &c->s.gpu_in_use);
        get_bool(f, "pause_on_battery", &c->s.pause_on_battery);
        get_uint(f, "idle_minutes", &c->s.idle_minutes);
        get_bool(f, "idle_priority", &c->s.idle_priority);
        get_bool(f, "keep_awake", &c->s.keep_awake);
        get_bool(f, "autostart", &c->s.autostart);
    }
    g_key_file_free(f);
    g_free(path);
    return ok;
}

/* Writes data to path through a temporary file, creating the directory. */
static bool write_file(const char *path, const char *data, GError **error)
{
    char *dir = g_path_get_dirname(path);
    int rc = g_mkdir_with_parents(dir, 0700);
    g_free(dir);
    if (rc != 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot create the folder of %s", path);
        return false;
    }
    return g_file_set_contents(path, data, -1, error);
}

bool dk_config_save(const dk_config *c, GError **error)
{
    GKeyFile *f = g_key_file_new();
    g_key_file_set_string(f, GROUP, "server", c->server ? c->server : "");
    g_key_file_set_integer(f, GROUP, "cores_in_use", (gint)c->s.cores_in_use);
    g_key_file_set_integer(f, GROUP, "cores_idle", (gint)c->s.cores_idle);
    g_key_file_set_boolean(f, GROUP, "gpu", c->s.gpu);
    g_key_file_set_boolean(f, GROUP, "gpu_in_use", c->s.gpu_in_use);
    g_key_file_set_boolean(f, GROUP, "pause_on_battery", c->s.pause_on_battery);
    g_key_file_set_integer(f, GROUP, "idle_minutes", (gint)c->s.idle_minutes);
    g_key_file_set_boolean(f, GROUP, "idle_priority", c->s.idle_priority);
    g_key_file_set_boolean(f, GROUP, "keep_awake", c->s.keep_awake);
    g_key_file_set_boolean(f, GROUP, "autostart", c->s.autostart);
    char *data = g_key_file_to_data(f, NULL, NULL);
    char *path = config_path();
    bool ok = write_file(path, data, error);
    g_free(path);
    g_free(data);
    g_key_file_free(f);
    return ok;
}

void dk_config_clear(dk_config *c)
{
    g_free(c->server);
    c->server = NULL;
}

static void local_date(char out[11])
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(out, 11, "%Y-%m-%d", &tm);
}

void dk_today_load(dk_today *t)
{
    memset(t, 0, sizeof *t);
    local_date(t->date);
    char *path = totals_path();
    GKeyFile *f = g_key_file_new();
    if (g_key_file_load_from_file(f, path, G_KEY_FILE_NONE, NULL)) {
        char *date = g_key_file_get_string(f, "today", "date", NULL);
        if (date != NULL && strcmp(date, t->date) == 0) {
            t->chunks = g_key_file_get_uint64(f, "today", "chunks", NULL);
            t->items = g_key_file_get_uint64(f, "today", "items", NULL);
        }
        g_free(date);
    }
    g_key_file_free(f);
    g_free(path);
}

void dk_today_add(dk_today *t, uint64_t chunks, uint64_t items)
{
    char date[11];
    local_date(date);
    if (strcmp(date, t->date) != 0) {
        memcpy(t->date, date, sizeof date);
        t->chunks = t->items = 0;
    }
    t->chunks += chunks;
    t->items += items;
    GKeyFile *f = g_key_file_new();
    g_key_file_set_string(f, "today", "date", t->date);
    g_key_file_set_uint64(f, "today", "chunks", t->chunks);
    g_key_file_set_uint64(f, "today", "items", t->items);
    char *data = g_key_file_to_data(f, NULL, NULL);
    char *path = totals_path();
    GError *e = NULL;
    if (!write_file(path, data, &e)) {
        sf_log(SF_LOG_WARN, "desktop", "cannot keep today's totals: %s", e->message);
        g_clear_error(&e);
    }
    g_free(path);
    g_free(data);
    g_key_file_free(f);
}
