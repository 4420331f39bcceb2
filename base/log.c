/*
 * log.c — the one logger (log.h).
 */
#include "base/log.h"

#include "base/json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static sf_log_format log_format = SF_LOG_TEXT;
static sf_log_level log_min = SF_LOG_INFO;
static bool log_info_stdout;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void sf_log_setup(sf_log_format format, sf_log_level min, bool info_to_stdout)
{
    log_format = format;
    log_min = min;
    log_info_stdout = info_to_stdout;
}

sf_log_format sf_log_get_format(void)
{
    return log_format;
}

bool sf_log_format_parse(const char *s, sf_log_format *out)
{
    if (strcmp(s, "text") == 0)
        *out = SF_LOG_TEXT;
    else if (strcmp(s, "json") == 0)
        *out = SF_LOG_JSON;
    else
        return false;
    return true;
}

static void vlog(sf_log_level level, const char *source, const char *fields, const char *fmt, va_list ap)
{
    if (level < log_min)
        return;
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    FILE *f = level == SF_LOG_INFO && log_info_stdout ? stdout : stderr;
    if (log_format == SF_LOG_JSON) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char qmsg[6 * sizeof msg + 3], qsrc[128];
        sf_json_quote(qmsg, sizeof qmsg, msg);
        sf_json_quote(qsrc, sizeof qsrc, source != NULL ? source : "simfarm");
        fprintf(f, "{\"ts\":%llu,\"level\":\"%s\",\"src\":%s,\"msg\":%s%s%s}\n",
            (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000, level_names[level], qsrc,
            qmsg, fields != NULL && fields[0] ? "," : "", fields != NULL ? fields : "");
    } else {
        fprintf(f, "simfarm%s%s: %s\n", source != NULL ? " " : "", source != NULL ? source : "", msg);
    }
    fflush(f);
}

void sf_log(sf_log_level level, const char *source, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, source, NULL, fmt, ap);
    va_end(ap);
}

void sf_logf(sf_log_level level, const char *source, const char *fields, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, source, fields, fmt, ap);
    va_end(ap);
}

/* ---- the bound on repeated lines ---------------------------------------------------- */

static uint64_t limit_window(const sf_log_limit *l)
{
    return l->window_ms ? l->window_ms : 60000;
}

bool sf_log_limit_take(sf_log_limit *l, const char *key, uint64_t now_ms, uint64_t *more)
{
    uint64_t window = limit_window(l);
    int at = -1, oldest = 0;
    *more = 0;
    for (int i = 0; i < SF_LOG_LIMIT_KEYS; i++) {
        if (l->slot[i].key[0] != '\0' && strncmp(l->slot[i].key, key, sizeof l->slot[i].key - 1) == 0) {
            at = i;
            break;
        }
        /* an empty slot, else the one whose key spoke longest ago */
        bool empty = l->slot[i].key[0] == '\0', best_empty = l->slot[oldest].key[0] == '\0';
        if (!best_empty && (empty || l->slot[i].since_ms < l->slot[oldest].since_ms))
            oldest = i;
    }
    if (at >= 0 && now_ms - l->slot[at].since_ms < window) {
        l->slot[at].held++;
        return false;
    }
    if (at < 0) { /* the key that spoke longest ago makes room; what it held is lost to its line */
        at = oldest;
        l->lost += l->slot[at].held;
        snprintf(l->slot[at].key, sizeof l->slot[at].key, "%s", key);
        l->slot[at].held = 0;
    }
    if (now_ms - l->burst_since >= window) {
        l->burst_since = now_ms;
        l->lines = 0;
    }
    if (l->lines >= (l->burst ? l->burst : 20)) {
        l->slot[at].held++; /* said with its next line, or by the flush */
        l->slot[at].since_ms = now_ms;
        return false;
    }
    l->lines++;
    *more = l->slot[at].held;
    l->slot[at].held = 0;
    l->slot[at].since_ms = now_ms;
    return true;
}

uint64_t sf_log_limit_flush(sf_log_limit *l, uint64_t now_ms, void (*say)(void *ctx, const char *key, uint64_t n),
    void *ctx)
{
    uint64_t window = limit_window(l);
    for (int i = 0; i < SF_LOG_LIMIT_KEYS; i++)
        if (l->slot[i].held > 0 && now_ms - l->slot[i].since_ms >= window) {
            say(ctx, l->slot[i].key, l->slot[i].held);
            l->slot[i].held = 0;
        }
    uint64_t lost = l->lost;
    l->lost = 0;
    return lost;
}
