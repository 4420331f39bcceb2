/*
 * err.c — words and names for the project's error codes (err.h).
 */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>

const char *sf_strerror(int code)
{
    switch (code) {
    case SF_OK: return "success";
#define SF__ERR_TEXT(sym, num, text) case sym: return text;
    SF_ERRNO_MAP(SF__ERR_TEXT)
#undef SF__ERR_TEXT
    default: return "unknown error";
    }
}

const char *sf_errname(int code)
{
    switch (code) {
    case SF_OK: return "OK";
#define SF__ERR_NAME(sym, num, text) case sym: return #sym;
    SF_ERRNO_MAP(SF__ERR_NAME)
#undef SF__ERR_NAME
    default: return "UNKNOWN";
    }
}

int sf_fail(sf_error *e, int code, const char *fmt, ...)
{
    if (e == NULL)
        return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

void sf_error_clear(sf_error *e)
{
    e->code = SF_OK;
    e->msg[0] = '\0';
}
