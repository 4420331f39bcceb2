/*
 * settings.h — what the desktop node keeps on disk, in the user's XDG
 * directories: its settings ($XDG_CONFIG_HOME/simfarm/desktop.ini), its key
 * ($XDG_DATA_HOME/simfarm/desktop.key, the native node's key file format)
 * and the work accepted today ($XDG_DATA_HOME/simfarm/desktop-totals.ini).
 */
#ifndef SIMFARM_DESKTOP_SETTINGS_H
#define SIMFARM_DESKTOP_SETTINGS_H

#include "node-desktop/policy.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct dk_config {
    char *server;        /* the farm's address (http[s]://HOST:PORT), or NULL before the first run */
    dk_settings s;
} dk_config;

/* Reads the settings file into *c; missing keys (or no file) take
 * dk_settings_defaults. A file that cannot be parsed is reported in
 * *error (may be NULL) and the defaults are used: returns false then. */
bool dk_config_load(dk_config *c, unsigned ncpu, GError **error);

/* Writes *c to the settings file (atomically: a temporary file renamed). */
bool dk_config_save(const dk_config *c, GError **error);

void dk_config_clear(dk_config *c);

/* The key file's path, into a string the caller frees. */
char *dk_key_path(void);

/* Chunks and items accepted today (local date), kept across restarts. */
typedef struct dk_today {
    char date[11];       /* YYYY-MM-DD */
    uint64_t chunks, items;
} dk_today;

/* Today's counts from the totals file; yesterday's count as zero. */
void dk_today_load(dk_today *t);

/* Adds to today's counts (a new day starts from zero) and writes them. */
void dk_today_add(dk_today *t, uint64_t chunks, uint64_t items);

#endif /* SIMFARM_DESKTOP_SETTINGS_H */
