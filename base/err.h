/*
 * err.h — the project's one error space. Every function that can fail
 * returns 0 or a negative code from the list below (or a bool for a plain
 * predicate); sf_strerror() gives the reason in words and sf_errname() the
 * symbol. Each subsystem owns one range of a hundred codes, registered here
 * and nowhere else, so a code names its subsystem and no two collide:
 *
 *      -1 ..  -99   proto    PR_   (the numbers travel in `error` messages:
 *                                   append, never renumber)
 *    -100 .. -199   runtime  RT_
 *    -200 .. -299   node     ND_
 *    -300 .. -399   sched    SC_
 *    -400 .. -499   sim      SIM_
 *    -500 .. -599   http     HTTP_ (the CLI's client)
 *    -600 .. -699   coord    CD_
 *    -700 .. -799   base     SF_
 *
 * A caller that needs words as well as a code gets them in an sf_error
 * (below) rather than in a bare buffer beside a -1.
 */
#ifndef SIMFARM_BASE_ERR_H
#define SIMFARM_BASE_ERR_H

#include <stddef.h>

/* XX(symbol, number, reason), every range in order. */
#define SF_ERRNO_MAP(XX)                                                                        \
    /* proto: one code per kind of bad input (proto/PROTOCOL.md lists them) */                  \
    XX(PR_ENOMEM, -1, "out of memory")                                                          \
    XX(PR_EINVAL, -2, "invalid argument")                                                       \
    XX(PR_EFRAMESIZE, -3, "frame larger than the frame limit")                                  \
    XX(PR_ETRUNC, -4, "truncated input: a value runs past the end of the bytes")                \
    XX(PR_ETRAILING, -5, "trailing bytes after the top-level value")                            \
    XX(PR_EMSGPACK, -6, "malformed msgpack (reserved byte 0xc1)")                               \
    XX(PR_EEXT, -7, "msgpack ext types are not allowed")                                        \
    XX(PR_EDEPTH, -8, "containers nested deeper than the depth limit")                          \
    XX(PR_ECOUNT, -9, "array or map has more entries than its limit")                           \
    XX(PR_EOBJECTS, -10, "frame holds more values than the value limit")                        \
    XX(PR_ESTRLEN, -11, "string longer than its limit")                                         \
    XX(PR_EBINSIZE, -12, "byte string longer than its limit")                                   \
    XX(PR_EFIXLEN, -13, "fixed-size byte string has the wrong length")                          \
    XX(PR_EUTF8, -14, "string is not valid UTF-8 or contains NUL")                              \
    XX(PR_ETYPE, -15, "value has the wrong msgpack type for its field")                         \
    XX(PR_EKEYTYPE, -16, "map key is not a string")                                             \
    XX(PR_EDUPKEY, -17, "the same key appears twice in a map")                                  \
    XX(PR_EMISSING, -18, "a required field is missing")                                         \
    XX(PR_EVERSION, -19, "unsupported protocol version")                                        \
    XX(PR_EUNKNOWNTYPE, -20, "unknown message type")                                            \
    XX(PR_EENUM, -21, "unknown enumeration value")                                              \
    XX(PR_EINT, -22, "integer out of range for its field")                                      \
    XX(PR_ERANGE, -23, "item range is empty or overflows")                                      \
    XX(PR_EHASH, -24, "work context bytes do not match their SHA-256 hash")                     \
    XX(PR_EKEYLEN, -25, "key has the wrong length (Ed25519 keys and seeds are 32 bytes)")       \
    XX(PR_ESIGLEN, -26, "signature has the wrong length (Ed25519 signatures are 64 bytes)")     \
    XX(PR_ESIG, -27, "signature does not verify")                                               \
    XX(PR_ESKEW, -28, "timestamp more than 300 s away from the receiver's clock")               \
    XX(PR_EREPLAY, -29, "replayed (timestamp, nonce) pair")                                     \
    XX(PR_EREPLAYOLD, -30, "timestamp older than the replay window still remembers")            \
    XX(PR_ECRYPTO, -31, "the crypto library failed to initialise")                              \
    /* runtime */                                                                               \
    XX(RT_ESTOPPED, -101, "the actor or the runtime has stopped")                               \
    XX(RT_EOVERLOAD, -102, "the receiver's mailbox is over its high-water mark")                \
    XX(RT_EINVAL, -103, "invalid argument")                                                     \
    XX(RT_ENOTIMER, -104, "no such timer (delivered, cancelled or never started)")              \
    XX(RT_ETHREAD, -105, "could not start a thread")                                            \
    XX(RT_ELOOP, -106, "libuv loop error")                                                      \
    /* node (actors/node) */                                                                    \
    XX(ND_ECANCELLED, -200, "the chunk was cancelled before it finished")                       \
    XX(ND_EKEYFILE, -201, "the node's key file cannot be read, created or used")                \
    /* sched */                                                                                 \
    XX(SC_EINVAL, -301, "invalid argument")                                                     \
    XX(SC_EEXISTS, -302, "a job with this id is already in the ledger")                         \
    XX(SC_ENOJOB, -303, "no such job")                                                          \
    XX(SC_EBADRESULT, -304, "the result does not decode or does not match its chunk")           \
    XX(SC_EBADRECORD, -305, "a journal record is malformed or does not fit its job")            \
    XX(SC_ETOOBIG, -306, "the job is too large")                                                \
    XX(SC_ENONODE, -307, "the ledger knows no such node")                                       \
    /* sim */                                                                                   \
    XX(SIM_EINVAL, -401, "invalid argument")                                                    \
    XX(SIM_EPARAM, -402, "invalid kernel parameters")                                           \
    XX(SIM_ENOKERNEL, -403, "no such kernel")                                                   \
    XX(SIM_ERANGE, -404, "item range out of bounds")                                            \
    XX(SIM_ELAYOUT, -405, "statistics have different layouts")                                  \
    XX(SIM_EFORMAT, -406, "malformed statistics encoding")                                      \
    XX(SIM_ENOSPC, -407, "buffer too small")                                                    \
    XX(SIM_ENOMEM, -408, "out of memory")                                                       \
    XX(SIM_ENOBACKEND, -409, "backend not built into this program")                             \
    XX(SIM_ENODEVICE, -410, "no device for this backend")                                       \
    XX(SIM_EDEVICE, -411, "device or driver error")                                             \
    /* http: the CLI's client */                                                                \
    XX(HTTP_EURL, -501, "not an http:// or https://HOST:PORT URL")                              \
    XX(HTTP_ETLS, -502, "the TLS handshake failed")                                             \
    XX(HTTP_ERESOLVE, -503, "cannot resolve the host")                                          \
    XX(HTTP_ECONNECT, -504, "cannot connect")                                                   \
    XX(HTTP_ETIMEDOUT, -505, "timed out")                                                       \
    XX(HTTP_EIO, -506, "the connection failed")                                                 \
    XX(HTTP_EPROTO, -507, "not an HTTP/1.x answer")                                             \
    XX(HTTP_ETOOBIG, -508, "the answer is too big")                                             \
    /* coord: the coordinator's actors */                                                       \
    XX(CD_STORE_EFULL, -601, "the store's backlog is at its bound")                             \
    XX(CD_STORE_EBROKEN, -602, "the database connection broke on every try of the query")       \
    XX(CD_STORE_EQUERY, -603, "the database answered with an error")                            \
    XX(CD_EINVAL, -604, "invalid argument")                                                     \
    XX(CD_ECONFIG, -605, "the coordinator's configuration is not usable")                       \
    XX(CD_EIO, -606, "a file or socket could not be read or written")                           \
    XX(CD_ETLS, -607, "the TLS certificate or key is not usable")                               \
    XX(CD_EDB, -608, "the database could not be started or reached")                            \
    /* base */                                                                                  \
    XX(SF_EJSON, -701, "malformed JSON")                                                        \
    XX(SF_ENOMEM, -702, "out of memory")                                                        \
    XX(SF_EINVAL, -703, "invalid argument")                                                     \
    XX(SF_EURL, -704, "not a URL the farm speaks")

enum sf_errno {
    SF_OK = 0,
#define SF__ERR_ENUM(sym, num, text) sym = (num),
    SF_ERRNO_MAP(SF__ERR_ENUM)
#undef SF__ERR_ENUM
};

/* The reason for code in words: a static string, never NULL ("success" for
 * 0, "unknown error" for a number no subsystem registered). */
const char *sf_strerror(int code);

/* The symbol of code, e.g. "PR_ETRUNC": a static string, never NULL ("OK"
 * for 0, "UNKNOWN" for a number no subsystem registered). */
const char *sf_errname(int code);

/* A code and the words that go with it, for a caller that shows them to a
 * user: the carrier that replaces "-1 and a message buffer". */
typedef struct sf_error {
    int code;       /* 0, or a code from the list above */
    char msg[512];  /* what went wrong, for a person; with code 0, "" or what a
                       function reports it did where its contract says so */
} sf_error;

/* Records code and a printf-style message in *e (which may be NULL: the
 * message is then dropped) and returns code, so a failing function can end
 * with `return sf_fail(e, CD_ETLS, "cannot read %s", path);`. */
int sf_fail(sf_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Clears *e to "no error". */
void sf_error_clear(sf_error *e);

#endif /* SIMFARM_BASE_ERR_H */
