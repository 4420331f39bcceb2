/*
 * error.h — proto's error codes. Every function in proto returns 0 or one of
 * these negative codes; pr_strerror() gives the reason in words and
 * pr_errname() the symbol ("PR_ETRUNC"), which PROTOCOL.md lists with its
 * number. Each kind of bad input has its own code, so a test (or a peer
 * reading an `error` message) can tell them apart.
 *
 * The numbers are part of the wire protocol (an `error` message carries
 * them): append new codes at the end, never renumber.
 */
#ifndef SIMFARM_PROTO_ERROR_H
#define SIMFARM_PROTO_ERROR_H

/* XX(name, number, reason) */
#define PR_ERRNO_MAP(XX)                                                              \
    XX(ENOMEM, -1, "out of memory")                                                   \
    XX(EINVAL, -2, "invalid argument")                                                \
    XX(EFRAMESIZE, -3, "frame larger than the frame limit")                           \
    XX(ETRUNC, -4, "truncated input: a value runs past the end of the bytes")         \
    XX(ETRAILING, -5, "trailing bytes after the top-level value")                     \
    XX(EMSGPACK, -6, "malformed msgpack (reserved byte 0xc1)")                        \
    XX(EEXT, -7, "msgpack ext types are not allowed")                                 \
    XX(EDEPTH, -8, "containers nested deeper than the depth limit")                   \
    XX(ECOUNT, -9, "array or map has more entries than its limit")                    \
    XX(EOBJECTS, -10, "frame holds more values than the value limit")                 \
    XX(ESTRLEN, -11, "string longer than its limit")                                  \
    XX(EBINSIZE, -12, "byte string longer than its limit")                            \
    XX(EFIXLEN, -13, "fixed-size byte string has the wrong length")                   \
    XX(EUTF8, -14, "string is not valid UTF-8 or contains NUL")                       \
    XX(ETYPE, -15, "value has the wrong msgpack type for its field")                  \
    XX(EKEYTYPE, -16, "map key is not a string")                                      \
    XX(EDUPKEY, -17, "the same key appears twice in a map")                           \
    XX(EMISSING, -18, "a required field is missing")                                  \
    XX(EVERSION, -19, "unsupported protocol version")                                 \
    XX(EUNKNOWNTYPE, -20, "unknown message type")                                     \
    XX(EENUM, -21, "unknown enumeration value")                                       \
    XX(EINT, -22, "integer out of range for its field")                               \
    XX(ERANGE, -23, "item range is empty or overflows")                               \
    XX(EHASH, -24, "work context bytes do not match their SHA-256 hash")              \
    XX(EKEYLEN, -25, "key has the wrong length (Ed25519 keys and seeds are 32 bytes)") \
    XX(ESIGLEN, -26, "signature has the wrong length (Ed25519 signatures are 64 bytes)") \
    XX(ESIG, -27, "signature does not verify")                                        \
    XX(ESKEW, -28, "timestamp more than 300 s away from the receiver's clock")        \
    XX(EREPLAY, -29, "replayed (timestamp, nonce) pair")                              \
    XX(EREPLAYOLD, -30, "timestamp older than the replay window still remembers")     \
    XX(ECRYPTO, -31, "the crypto library failed to initialise")

typedef enum pr_errno {
#define PR__ERR_ENUM(name, num, text) PR_##name = (num),
    PR_ERRNO_MAP(PR__ERR_ENUM)
#undef PR__ERR_ENUM
} pr_errno;

/* The reason for err in words; a static string, never NULL ("unknown error"
 * for a number that is not a proto code, "success" for 0). */
const char *pr_strerror(int err);

/* The symbol of err without the PR_ prefix, e.g. "ETRUNC"; "OK" for 0 and
 * "UNKNOWN" for anything else. A static string, never NULL. */
const char *pr_errname(int err);

#endif
