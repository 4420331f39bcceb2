/*
 * error.c — words and names for proto's error codes (error.h).
 */
#include "proto/error.h"

const char *pr_strerror(int err)
{
    switch (err) {
    case 0: return "success";
#define PR__ERR_TEXT(name, num, text) case PR_##name: return text;
    PR_ERRNO_MAP(PR__ERR_TEXT)
#undef PR__ERR_TEXT
    default: return "unknown error";
    }
}

const char *pr_errname(int err)
{
    switch (err) {
    case 0: return "OK";
#define PR__ERR_NAME(name, num, text) case PR_##name: return #name;
    PR_ERRNO_MAP(PR__ERR_NAME)
#undef PR__ERR_NAME
    default: return "UNKNOWN";
    }
}
