/*
 * json.h — the project's JSON reader: JSON text to msgpack (for kernel
 * parameters, job submissions and API answers), the two lookups every reader
 * of such a map needs, and the one JSON string quoter.
 */
#ifndef SIMFARM_BASE_JSON_H
#define SIMFARM_BASE_JSON_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* Appends the msgpack form of one JSON value (json, len bytes) to out,
 * which the caller has initialised and owns. Returns SF_EJSON with a
 * message and offset in err on malformed text or an object that names a
 * key twice, SF_ENOMEM when memory runs out (out may then hold a partial
 * encoding: discard it). */
int sf_json_to_msgpack(const char *json, size_t len, msgpack_sbuffer *out, char *err, size_t errlen);

/* Whether o is the string s. */
bool sf_mp_streq(const msgpack_object *o, const char *s);

/* The value under key `key` of map m; NULL when m is not a map or has no
 * such key. */
const msgpack_object *sf_mp_get(const msgpack_object *m, const char *key);

/* Writes s as a quoted JSON string into out (cap bytes, cap >= 3, always
 * NUL-terminated): quote, backslash and control bytes escaped, ill-formed
 * UTF-8 written as U+FFFD. When it does not fit, the string is cut at a
 * character and still closed. Returns the length the whole of it takes, as
 * snprintf does: a value >= cap says it was cut. */
size_t sf_json_quote(char *out, size_t cap, const char *s);

#endif /* SIMFARM_BASE_JSON_H */
