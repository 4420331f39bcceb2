/*
 * sense.h — the facts the desktop node senses (the spec's "Facts"): whether
 * the computer is on battery (UPower), how long since the last input (the
 * GNOME idle monitor on the session bus, else logind's idle hint for our
 * session), and the sleep inhibitor it holds from logind while computing on
 * AC. Each service may be absent, or come and go: a missing UPower counts as
 * AC, missing idle sources as "idle time unknown".
 *
 * Every D-Bus call is asynchronous (GDBus), on the GLib main context that
 * was the thread's default when dk_sense_create was called; the callback
 * runs there too. Nothing here blocks the caller's main loop.
 *
 * Also the autostart entry, $XDG_CONFIG_HOME/autostart/simfarm-desktop.desktop.
 */
#ifndef SIMFARM_DESKTOP_SENSE_H
#define SIMFARM_DESKTOP_SENSE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct dk_sense dk_sense;

/* Called (on the main context) whenever a fact may have changed: on
 * battery, the idle time or its source, or whether the inhibitor is held.
 * While the idle time is known it is called about once a second, since the
 * idle time itself grows. It may call dk_sense_destroy. */
typedef void (*dk_sense_fn)(void *data);

/* Starts watching UPower, logind and the GNOME idle monitor. Until their
 * first answers the facts read "on AC, idle time unknown". changed may be
 * NULL. Free with dk_sense_destroy. Never fails (a missing bus is a missing
 * service). */
dk_sense *dk_sense_create(dk_sense_fn changed, void *data);

/* Stops watching, cancels the calls in flight and releases the inhibitor.
 * changed is not called again. NULL is a no-op. */
void dk_sense_destroy(dk_sense *s);

/* UPower's OnBattery; false without UPower. */
bool dk_sense_on_battery(const dk_sense *s);

/* Whether the idle time can be read now (an idle source answers). */
bool dk_sense_idle_known(const dk_sense *s);

/* Milliseconds since the last input, as of this call; 0 when unknown. */
uint64_t dk_sense_idle_ms(const dk_sense *s);

/* Where the idle time comes from: "GNOME idle monitor", "logind", or NULL
 * when it is unknown. A static string. */
const char *dk_sense_idle_source(const dk_sense *s);

/* Asks logind to hold (hold true) or drop the sleep inhibitor ("sleep",
 * "simfarm", "computing chunks for the farm", "block"). Idempotent; the
 * answer comes later (dk_sense_inhibit_held, and the callback). While
 * logind is absent the wish is kept and acted on when it appears. A failure
 * is logged once, until the next success. */
void dk_sense_inhibit(dk_sense *s, bool hold);

/* Whether the inhibitor's file descriptor is held now. */
bool dk_sense_inhibit_held(const dk_sense *s);

/* Writes (on) or removes (off) the autostart entry
 * $XDG_CONFIG_HOME/autostart/simfarm-desktop.desktop, whose Exec line runs
 * exec (a program name or path; NULL: "simfarm-desktop") with --hidden.
 * Removing an entry that does not exist succeeds. Returns true, or false
 * with *error set (error may be NULL). */
bool dk_autostart_set(bool on, const char *exec, GError **error);

#endif /* SIMFARM_DESKTOP_SENSE_H */
