/*
 * test_desktop_policy.c — the desktop node's decision (node-desktop/policy.h):
 * each reason to pause, their order, the cores clamped to the computer, the
 * GPU while in use, the sleep inhibitor only when running on AC, unknown
 * idle time counted as in use, and the State words.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node-desktop/policy.h"

enum { NCPU = 8, MIN = 60000 };

/* 2024-05-01 16:05:30 UTC, in ms. */
static const uint64_t NOW = 1714579530000ull;

static dk_settings defaults(void)
{
    dk_settings s;
    dk_settings_defaults(&s, NCPU);
    return s;
}

/* On AC, idle for ten minutes, one GPU, nothing paused. */
static dk_facts idle_facts(void)
{
    return (dk_facts){
        .on_battery = false,
        .idle_known = true,
        .idle_ms = 10 * MIN,
        .now_ms = NOW,
        .snooze_until_ms = 0,
        .paused_by_user = false,
        .ncpu = NCPU,
        .ndevices = 1,
    };
}

Test(desktop_policy, defaults_are_the_specs)
{
    dk_settings s = defaults();
    cr_assert_eq(s.cores_in_use, 0);
    cr_assert_eq(s.cores_idle, NCPU);
    cr_assert(s.gpu);
    cr_assert_not(s.gpu_in_use);
    cr_assert(s.pause_on_battery);
    cr_assert_eq(s.idle_minutes, 3);
    cr_assert(s.idle_priority);
    cr_assert(s.keep_awake);
    cr_assert_not(s.autostart);
}

Test(desktop_policy, idle_on_ac_runs_everything_and_keeps_awake)
{
    dk_settings s = defaults();
    dk_facts f = idle_facts();
    dk_plan p = dk_decide(&s, &f);
    cr_assert_eq(p.why, DK_RUN);
    cr_assert_eq(p.cpu, NCPU);
    cr_assert(p.devices);
    cr_assert(p.inhibit_sleep);
    cr_assert_not(p.in_use);
}

/* One row: what changes from idle_facts/defaults, and the plan expected. */
typedef struct row {
    const char *name;
    bool paused_by_user, snoozed, on_battery, in_use, pause_on_battery;
    dk_why why;
} row;

Test(desktop_policy, reasons_in_order)
{
    /* Each reason alone, then each with every weaker one also true: the
     * strongest wins (by you > snoozed > on battery > in use). */
    static const row rows[] = {
        { "nothing", false, false, false, false, true, DK_RUN },
        { "by you", true, false, false, false, true, DK_PAUSED_BY_USER },
        { "snoozed", false, true, false, false, true, DK_SNOOZED },
        { "on battery", false, false, true, false, true, DK_ON_BATTERY },
        { "in use", false, false, false, true, true, DK_IN_USE },
        { "by you over all", true, true, true, true, true, DK_PAUSED_BY_USER },
        { "snoozed over battery and use", false, true, true, true, true, DK_SNOOZED },
        { "battery over use", false, false, true, true, true, DK_ON_BATTERY },
        { "battery ignored when allowed", false, false, true, false, false, DK_RUN },
        { "battery allowed, then use", false, false, true, true, false, DK_IN_USE },
    };
    dk_settings s = defaults();
    s.gpu_in_use = false; /* in use: nothing may run */
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        s.pause_on_battery = r->pause_on_battery;
        dk_facts f = idle_facts();
        f.paused_by_user = r->paused_by_user;
        f.snooze_until_ms = r->snoozed ? NOW + 1 : 0;
        f.on_battery = r->on_battery;
        f.idle_ms = r->in_use ? 1000 : 10 * MIN;
        dk_plan p = dk_decide(&s, &f);
        cr_assert_eq(p.why, r->why, "%s: why %d, expected %d", r->name, p.why, r->why);
        cr_assert_eq(p.in_use, r->in_use, "%s", r->name);
        if (p.why != DK_RUN) {
            cr_assert_eq(p.cpu, 0, "%s: a paused plan runs no CPU worker", r->name);
            cr_assert_not(p.devices, "%s: a paused plan runs no device", r->name);
            cr_assert_not(p.inhibit_sleep, "%s: a paused plan lets the computer sleep", r->name);
        }
    }
}

Test(desktop_policy, snooze_ends_at_its_time)
{
    dk_settings s = defaults();
    dk_facts f = idle_facts();
    f.snooze_until_ms = NOW + 1;
    cr_assert_eq(dk_decide(&s, &f).why, DK_SNOOZED);
    f.snooze_until_ms = NOW;
    cr_assert_eq(dk_decide(&s, &f).why, DK_RUN, "snoozed while now < until, not at until");
    f.snooze_until_ms = NOW - 1;
    cr_assert_eq(dk_decide(&s, &f).why, DK_RUN);
}

Test(desktop_policy, idle_threshold)
{
    dk_settings s = defaults();
    dk_facts f = idle_facts();
    f.idle_ms = 3 * MIN - 1;
    dk_plan p = dk_decide(&s, &f);
    cr_assert(p.in_use);
    cr_assert_eq(p.why, DK_IN_USE);
    f.idle_ms = 3 * MIN;
    p = dk_decide(&s, &f);
    cr_assert_not(p.in_use, "idle means idle_ms >= idle_minutes * 60000");
    cr_assert_eq(p.why, DK_RUN);
    s.idle_minutes = 0;
    f.idle_ms = 0;
    cr_assert_not(dk_decide(&s, &f).in_use, "0 minutes: always idle when known");
}

Test(desktop_policy, huge_idle_minutes_do_not_wrap)
{
    dk_settings s = defaults();
    s.idle_minutes = 0xffffffffu;
    dk_facts f = idle_facts();
    f.idle_ms = 1000ull * 60000ull;
    cr_assert(dk_decide(&s, &f).in_use);
}

Test(desktop_policy, unknown_idle_counts_as_in_use)
{
    dk_settings s = defaults();
    dk_facts f = idle_facts();
    f.idle_known = false;
    f.idle_ms = 1000 * MIN; /* ignored when unknown */
    dk_plan p = dk_decide(&s, &f);
    cr_assert(p.in_use);
    cr_assert_eq(p.why, DK_IN_USE);

    s.cores_in_use = 2;
    p = dk_decide(&s, &f);
    cr_assert_eq(p.why, DK_RUN);
    cr_assert_eq(p.cpu, 2, "the in-use cores apply");
    cr_assert_not(p.devices, "the GPU is off while in use by default");
}

Test(desktop_policy, cores_clamped_to_the_computer)
{
    static const struct {
        bool in_use;
        unsigned want, ncpu, cpu;
    } rows[] = {
        { false, 0, 8, 1 },   /* idle: at least one core */
        { false, 1, 8, 1 },
        { false, 8, 8, 8 },
        { false, 64, 8, 8 },  /* no more than the computer has */
        { false, 4, 0, 1 },   /* an unknown count (0) counts as 1 */
        { true, 0, 8, 0 },    /* in use, 0: none */
        { true, 3, 8, 3 },
        { true, 99, 8, 8 },
        { true, 2, 1, 1 },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dk_settings s = defaults();
        s.gpu = false;
        s.cores_in_use = rows[i].in_use ? rows[i].want : 0;
        s.cores_idle = rows[i].in_use ? 1 : rows[i].want;
        dk_facts f = idle_facts();
        f.ncpu = rows[i].ncpu;
        f.idle_ms = rows[i].in_use ? 0 : 10 * MIN;
        dk_plan p = dk_decide(&s, &f);
        cr_assert_eq(p.cpu, rows[i].cpu, "row %zu: cpu %u, expected %u", i, p.cpu, rows[i].cpu);
        cr_assert_eq(p.why, rows[i].cpu > 0 ? DK_RUN : DK_IN_USE, "row %zu", i);
    }
}

Test(desktop_policy, devices)
{
    static const struct {
        bool gpu, gpu_in_use, in_use;
        unsigned ndevices;
        bool devices;
    } rows[] = {
        { true, false, false, 1, true },
        { true, false, true, 1, false },  /* GPU off while in use */
        { true, true, true, 1, true },    /* unless allowed */
        { false, true, false, 1, false }, /* no GPU at all */
        { true, true, false, 0, false },  /* no device found */
        { true, true, true, 0, false },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dk_settings s = defaults();
        s.gpu = rows[i].gpu;
        s.gpu_in_use = rows[i].gpu_in_use;
        dk_facts f = idle_facts();
        f.ndevices = rows[i].ndevices;
        f.idle_ms = rows[i].in_use ? 0 : 10 * MIN;
        dk_plan p = dk_decide(&s, &f);
        cr_assert_eq(p.devices, rows[i].devices, "row %zu", i);
    }
}

Test(desktop_policy, in_use_with_only_the_gpu_runs)
{
    dk_settings s = defaults();
    s.gpu_in_use = true;
    dk_facts f = idle_facts();
    f.idle_ms = 0;
    dk_plan p = dk_decide(&s, &f);
    cr_assert_eq(p.why, DK_RUN);
    cr_assert_eq(p.cpu, 0);
    cr_assert(p.devices);
    cr_assert(p.inhibit_sleep);

    f.ndevices = 0; /* nothing allowed to run after all */
    p = dk_decide(&s, &f);
    cr_assert_eq(p.why, DK_IN_USE);
    cr_assert_not(p.inhibit_sleep);
}

Test(desktop_policy, sleep_inhibitor_only_running_on_ac_with_keep_awake)
{
    static const struct {
        bool keep_awake, on_battery, pause_on_battery, paused;
        bool inhibit;
    } rows[] = {
        { true, false, true, false, true },
        { false, false, true, false, false }, /* not asked to */
        { true, true, false, false, false },  /* running, but on battery */
        { true, true, true, false, false },   /* paused on battery */
        { true, false, true, true, false },   /* paused by you */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dk_settings s = defaults();
        s.keep_awake = rows[i].keep_awake;
        s.pause_on_battery = rows[i].pause_on_battery;
        dk_facts f = idle_facts();
        f.on_battery = rows[i].on_battery;
        f.paused_by_user = rows[i].paused;
        cr_assert_eq(dk_decide(&s, &f).inhibit_sleep, rows[i].inhibit, "row %zu", i);
    }
}

Test(desktop_policy, state_words)
{
    setenv("TZ", "UTC", 1);
    tzset();
    dk_facts f = idle_facts();
    f.snooze_until_ms = NOW + 3600 * 1000; /* 17:05:30 */
    char buf[64];
    static const struct {
        dk_why why;
        const char *text;
    } rows[] = {
        { DK_RUN, "Running" },
        { DK_PAUSED_BY_USER, "Paused by you" },
        { DK_SNOOZED, "Paused: snoozed until 17:05" },
        { DK_ON_BATTERY, "Paused: on battery" },
        { DK_IN_USE, "Paused: you are using the computer" },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dk_plan p = { .why = rows[i].why };
        cr_assert_str_eq(dk_why_text(&p, &f, buf, sizeof buf), rows[i].text);
    }
    dk_plan p = { .why = DK_IN_USE };
    char small[7];
    cr_assert_str_eq(dk_why_text(&p, &f, small, sizeof small), "Paused", "cut to the buffer");
}
