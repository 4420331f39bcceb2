/*
 * keyfile.h — a node's identity on disk: the 32-byte Ed25519 seed in a file
 * of mode 0600, created on first use. A file other users could read is
 * refused: whoever reads it can sign as the node.
 */
#ifndef SIMFARM_NODE_KEYFILE_H
#define SIMFARM_NODE_KEYFILE_H

#include "base/err.h"
#include "proto/sign.h"

#include <stdbool.h>
#include <stddef.h>

/* The default path: under a systemd unit with StateDirectory=,
 * $STATE_DIRECTORY/node.key (the first directory when it lists several);
 * else $XDG_DATA_HOME/simfarm/node.key, else ~/.local/share/simfarm/node.key.
 * Writes it into buf. */
void nd_key_default_path(char *buf, size_t cap);

/* Loads the key pair from path, creating the file (and its directory) with a
 * fresh random seed when it does not exist; *created says which. Returns 0,
 * or ND_EKEYFILE (group/world readable, wrong size, I/O) or PR_ECRYPTO with
 * the reason in *err (which may be NULL). */
int nd_key_load(const char *path, pr_key *k, bool *created, sf_error *err);

#endif
