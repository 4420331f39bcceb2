/*
 * policy.c — the desktop node's decision (policy.h).
 */
#include "node-desktop/policy.h"

#include <stdio.h>
#include <time.h>

void dk_settings_defaults(dk_settings *s, unsigned ncpu)
{
    *s = (dk_settings){
        .cores_in_use = 0,
        .cores_idle = ncpu,
        .gpu = true,
        .gpu_in_use = false,
        .pause_on_battery = true,
        .idle_minutes = 3,
        .idle_priority = true,
        .keep_awake = true,
        .autostart = false,
    };
}

/* A setting's core count within what the computer has: at least one, since
 * "run on no cores" is said by cores_in_use 0 only, which the caller checks. */
static unsigned clamp_cores(unsigned want, unsigned ncpu)
{
    if (want < 1)
        return 1;
    return want > ncpu ? ncpu : want;
}

dk_plan dk_decide(const dk_settings *s, const dk_facts *f)
{
    unsigned ncpu = f->ncpu > 0 ? f->ncpu : 1;
    /* Widened before multiplying: a hand-edited idle_minutes must not wrap. */
    uint64_t idle_after_ms = (uint64_t)s->idle_minutes * 60000u;
    bool in_use = !f->idle_known || f->idle_ms < idle_after_ms;
    dk_plan p = { .why = DK_RUN, .in_use = in_use };

    if (f->paused_by_user)
        p.why = DK_PAUSED_BY_USER;
    else if (f->now_ms < f->snooze_until_ms)
        p.why = DK_SNOOZED;
    else if (f->on_battery && s->pause_on_battery)
        p.why = DK_ON_BATTERY;
    if (p.why != DK_RUN)
        return p;

    if (in_use)
        p.cpu = s->cores_in_use == 0 ? 0 : clamp_cores(s->cores_in_use, ncpu);
    else
        p.cpu = clamp_cores(s->cores_idle, ncpu);
    p.devices = s->gpu && f->ndevices > 0 && (!in_use || s->gpu_in_use);
    if (p.cpu == 0 && !p.devices) {
        p.why = DK_IN_USE;
        return p;
    }
    p.inhibit_sleep = !f->on_battery && s->keep_awake;
    return p;
}

const char *dk_why_text(const dk_plan *p, const dk_facts *f, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    switch (p->why) {
    case DK_RUN:
        snprintf(buf, len, "Running");
        break;
    case DK_PAUSED_BY_USER:
        snprintf(buf, len, "Paused by you");
        break;
    case DK_SNOOZED: {
        time_t t = (time_t)(f->snooze_until_ms / 1000);
        struct tm tm;
        if (localtime_r(&t, &tm) != NULL)
            snprintf(buf, len, "Paused: snoozed until %02d:%02d", tm.tm_hour, tm.tm_min);
        else
            snprintf(buf, len, "Paused: snoozed");
        break;
    }
    case DK_ON_BATTERY:
        snprintf(buf, len, "Paused: on battery");
        break;
    case DK_IN_USE:
        snprintf(buf, len, "Paused: you are using the computer");
        break;
    }
    return buf;
}
