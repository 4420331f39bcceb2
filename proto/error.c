/*
 * error.c — the protocol's names for its error codes (error.h).
 */
#include "proto/error.h"

const char *pr_errname(int err)
{
    if (err == 0)
        return "OK";
    if (err > -1 || err < -99)
        return "UNKNOWN";
    const char *sym = sf_errname(err);
    /* Every registered code of proto's range is spelled PR_<name>. */
    return sym[0] == 'P' ? sym + 3 : "UNKNOWN";
}
