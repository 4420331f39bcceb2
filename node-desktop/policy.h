/*
 * policy.h — the desktop node's one decision (docs: the spec's "Policy"):
 * from the settings and the facts sensed now, whether the node runs, and if
 * not why, how many CPU workers and whether the devices compute, and whether
 * the computer is kept awake. Pure C: no GLib, no clock, no I/O, so every
 * case is a table row in tests/unit/test_desktop_policy.c.
 *
 * Prefix: dk_ (node-desktop/).
 */
#ifndef SIMFARM_DESKTOP_POLICY_H
#define SIMFARM_DESKTOP_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The user's settings, as desktop.ini holds them. */
typedef struct dk_settings {
    unsigned cores_in_use;  /* CPU workers while the computer is in use; 0: none */
    unsigned cores_idle;    /* CPU workers while idle (clamped to 1..ncpu) */
    bool gpu;               /* devices compute at all */
    bool gpu_in_use;        /* devices compute while the computer is in use too */
    bool pause_on_battery;
    unsigned idle_minutes;  /* input idle this long: the computer is idle */
    bool idle_priority;     /* workers at idle priority (the app applies it) */
    bool keep_awake;        /* hold the sleep inhibitor while running on AC */
    bool autostart;         /* the app's autostart entry exists */
} dk_settings;

/* The spec's defaults for a computer of ncpu cores: pause while in use, all
 * cores while idle, the GPU only while idle, pause on battery, idle after 3
 * minutes, idle priority, keep awake on AC, no autostart. */
void dk_settings_defaults(dk_settings *s, unsigned ncpu);

/* What is true now. Times are milliseconds of the wall clock (now_ms,
 * snooze_until_ms) or of input idleness (idle_ms). */
typedef struct dk_facts {
    bool on_battery;
    bool idle_known;          /* false: idle time cannot be read; counts as in use */
    uint64_t idle_ms;         /* ms since the last input; read only when idle_known */
    uint64_t now_ms;          /* wall clock, ms since the epoch */
    uint64_t snooze_until_ms; /* paused while now_ms < this; 0: not snoozed */
    bool paused_by_user;
    unsigned ncpu;            /* cores of this computer (0 counts as 1) */
    unsigned ndevices;        /* GPU devices the node found */
} dk_facts;

/* Why the node runs or not, strongest reason first: a paused plan names the
 * first of these that holds. */
typedef enum dk_why {
    DK_RUN,
    DK_PAUSED_BY_USER,
    DK_SNOOZED,
    DK_ON_BATTERY,
    DK_IN_USE, /* in use, and the settings let nothing run while in use */
} dk_why;

typedef struct dk_plan {
    dk_why why;
    unsigned cpu;       /* CPU workers to run: 0 unless why == DK_RUN */
    bool devices;       /* devices compute: false unless why == DK_RUN */
    bool inhibit_sleep; /* hold the sleep inhibitor: running, on AC, keep_awake */
    bool in_use;        /* the computer counts as in use (whatever why is) */
} dk_plan;

/* Decides from the settings and the facts. Never fails. */
dk_plan dk_decide(const dk_settings *s, const dk_facts *f);

/* Writes the plan's State line into buf ("Running", "Paused by you",
 * "Paused: snoozed until 17:05" in local time, "Paused: on battery",
 * "Paused: you are using the computer"), cut to len, and returns buf. */
const char *dk_why_text(const dk_plan *p, const dk_facts *f, char *buf, size_t len);

#endif /* SIMFARM_DESKTOP_POLICY_H */
