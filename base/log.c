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
