/*
 * error.h — proto's error codes. Every function in proto returns 0 or one of
 * the negative PR_E* codes registered in base/err.h (-1 .. -99), one per kind
 * of bad input, so a test (or a peer reading an `error` message) can tell
 * them apart; sf_strerror() gives the reason in words and sf_errname() the
 * symbol ("PR_ETRUNC"), which PROTOCOL.md lists with its number.
 *
 * The numbers are part of the wire protocol (an `error` message carries
 * them): append new codes at the end of proto's range, never renumber.
 */
#ifndef SIMFARM_PROTO_ERROR_H
#define SIMFARM_PROTO_ERROR_H

#include "base/err.h"

/* The name PROTOCOL.md and the golden vectors give err: its symbol without
 * the PR_ prefix, e.g. "ETRUNC"; "OK" for 0 and "UNKNOWN" for anything that
 * is not a proto code. A static string, never NULL. */
const char *pr_errname(int err);

#endif /* SIMFARM_PROTO_ERROR_H */
