/*
 * sim_json.h — JSON parameter text to the msgpack the kernels parse.
 */
#ifndef SIM_SIM_JSON_H
#define SIM_SIM_JSON_H

#include <msgpack.h>
#include <stddef.h>

#include "sim/sim.h"

/* Appends the msgpack form of one JSON value (json, len bytes) to out,
 * which the caller has initialised and owns. Returns SIM_EPARAM with a
 * message and offset in err on malformed text (out may then hold a partial
 * encoding: discard it). */
int sim_json_to_msgpack(const char *json, size_t len, msgpack_sbuffer *out, char *err, size_t errlen);

#endif /* SIM_SIM_JSON_H */
