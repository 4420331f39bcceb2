/*
 * oplog.c — see oplog.h.
 */
#include "actors/coord/oplog.h"

#include "base/log.h"
#include "base/str.h"
#include "runtime/runtime.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static sf_log_limit limits[CD_OPLOG_KINDS]; /* loop thread only (oplog.h) */

static const char *const names[CD_OPLOG_KINDS] = { "login_failed", "rate_limited", "node_refused",
    "connection_refused" };
static const char *const plural[CD_OPLOG_KINDS] = { "failed logins", "requests refused with 429",
    "refused node connections", "connections refused" };

const char *cd_oplog_event_name(cd_oplog_kind kind)
{
    return kind < CD_OPLOG_KINDS ? names[kind] : "event";
}

void cd_oplog_limited(cd_oplog_kind kind, const char *addr, const char *fields, const char *fmt, ...)
{
    uint64_t more;
    if (kind >= CD_OPLOG_KINDS || !sf_log_limit_take(&limits[kind], addr ? addr : "", rt_mono_ms(), &more))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sf_str f = SF_STR_INIT;
    sf_str_catf(&f, "\"event\":\"%s\",\"addr\":", names[kind]);
    sf_str_cat_json(&f, addr ? addr : "");
    if (more > 0)
        sf_str_catf(&f, ",\"more\":%" PRIu64, more);
    if (fields != NULL && fields[0] != '\0') {
        sf_str_cat(&f, ",");
        sf_str_cat(&f, fields);
    }
    if (more > 0)
        sf_logf(SF_LOG_WARN, NULL, f.s, "%s (and %" PRIu64 " more %s from %s in the last minute)", msg, more,
            plural[kind], addr && addr[0] ? addr : "?");
    else
        sf_logf(SF_LOG_WARN, NULL, f.s, "%s", msg);
    sf_str_free(&f);
}

static void say(void *ctx, const char *key, uint64_t n)
{
    cd_oplog_kind kind = *(const cd_oplog_kind *)ctx;
    sf_str f = SF_STR_INIT;
    sf_str_catf(&f, "\"event\":\"%s\",\"addr\":", names[kind]);
    sf_str_cat_json(&f, key);
    sf_str_catf(&f, ",\"more\":%" PRIu64, n);
    sf_logf(SF_LOG_WARN, NULL, f.s, "%" PRIu64 " more %s from %s in the last minute", n, plural[kind],
        key[0] ? key : "?");
    sf_str_free(&f);
}

void cd_oplog_flush(void)
{
    uint64_t now = rt_mono_ms();
    for (cd_oplog_kind k = 0; k < CD_OPLOG_KINDS; k++) {
        uint64_t lost = sf_log_limit_flush(&limits[k], now, say, &k);
        char f[96];
        snprintf(f, sizeof f, "\"event\":\"%s\",\"more\":%" PRIu64, names[k], lost);
        if (lost > 0)
            sf_logf(SF_LOG_WARN, NULL, f, "%" PRIu64 " more %s in the last minute, from addresses too many to "
                "name", lost, plural[k]);
    }
}
