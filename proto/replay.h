/*
 * replay.h — the replay guard of one node: remembers the (ts, nonce) pairs of
 * the completions it accepted, in bounded memory.
 *
 * A pair is only worth remembering while its ts is inside the skew window
 * (older ones are rejected by the clock check anyway), so the guard keeps at
 * most `capacity` pairs and a floor: every pair it forgets, because it aged
 * out or to make room, raises the floor to at least that pair's ts, and any
 * ts at or below the floor is refused with PR_EREPLAYOLD. Hence no accepted
 * pair is ever accepted twice, whatever the clock does, and memory is at
 * most capacity * 24 bytes: it starts at 16 pairs and doubles only when full
 * of pairs still inside the window. The price: a node that sends more than `capacity`
 * completions within 600 s may see an old-but-honest one refused, and signs it
 * again with a fresh ts (PROTOCOL.md says so).
 *
 * The coordinator keeps one guard per node key, for as long as it knows the
 * node (across reconnects). Not thread-safe: one owner (the node's actor).
 */
#ifndef SIMFARM_PROTO_REPLAY_H
#define SIMFARM_PROTO_REPLAY_H

#include <stdint.h>

typedef struct pr_replay pr_replay;

#define PR_REPLAY_DEFAULT 1024u
#define PR_REPLAY_MAX 65536u

/* Creates a guard for up to capacity pairs (1..PR_REPLAY_MAX) in *out.
 * Returns 0, PR_EINVAL or PR_ENOMEM (*out NULL). */
int pr_replay_create(pr_replay **out, uint32_t capacity);

/* Frees g; NULL is ignored. */
void pr_replay_destroy(pr_replay *g);

/* Checks the pair (ts, nonce) at the receiver's time now (unix seconds) and
 * records it. Returns 0 (new; recorded), PR_EREPLAY (seen before) or
 * PR_EREPLAYOLD (ts at or below the floor). The caller has already checked
 * the signature and the skew, so only genuine pairs take room. */
int pr_replay_check(pr_replay *g, uint64_t ts, const uint8_t nonce[16], uint64_t now);

/* Whether (ts, nonce) would be refused, without recording it or forgetting
 * anything: PR_EREPLAY (held), PR_EREPLAYOLD (at or below the floor) or 0.
 * The guard holds only pairs whose signatures were checked, so a frame it
 * refuses can be answered before its own signature is checked. */
int pr_replay_seen(const pr_replay *g, uint64_t ts, const uint8_t nonce[16]);

/* Pairs held now (for tests and metrics). */
uint32_t pr_replay_size(const pr_replay *g);

/* Pairs it has room for now, without growing (for tests and metrics). */
uint32_t pr_replay_room(const pr_replay *g);

#endif
