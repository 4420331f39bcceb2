/*
 * sim_json.h — JSON parameter text to the msgpack the kernels parse, and
 * the two lookups every reader of such a map needs.
 */
#ifndef SIM_SIM_JSON_H
#define SIM_SIM_JSON_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

#include "sim/sim.h"

/* Appends the msgpack form of one JSON value (json, len bytes) to out,
 * which the caller has initialised and owns. Returns SIM_EPARAM with a
 * message and offset in err on malformed text or an object that names a
 * key twice, SIM_ENOMEM when memory runs out (out may then hold a partial
 * encoding: discard it). */
int sim_json_to_msgpack(const char *json, size_t len, msgpack_sbuffer *out, char *err, size_t errlen);

/* Whether o is the string s. */
bool sim_str_is(const msgpack_object *o, const char *s);

/* The value under key `key` of map m; NULL when m is not a map or has no
 * such key. */
const msgpack_object *sim_map_get(const msgpack_object *m, const char *key);

/* Writes s as a quoted JSON string into out (cap bytes, cap >= 3, always
 * NUL-terminated): quote, backslash and control bytes escaped, ill-formed
 * UTF-8 written as U+FFFD. When it does not fit, the string is cut at a
 * character and still closed. Returns the length the whole of it takes, as
 * snprintf does: a value >= cap says it was cut. */
size_t sim_json_quote(char *out, size_t cap, const char *s);

#endif /* SIM_SIM_JSON_H */
