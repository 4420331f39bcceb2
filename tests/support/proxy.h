/*
 * proxy.h — drives actors from a test's main thread: the runtime's loop
 * runs on a second thread, requests go through a proxy actor, and the main
 * thread waits for each answer on a condition variable with a deadline.
 * For integration tests of actors that talk to real servers.
 */
#ifndef SIMFARM_TESTS_PROXY_H
#define SIMFARM_TESTS_PROXY_H

#include "runtime/runtime.h"

#include <stdbool.h>
#include <stdint.h>

enum { PROXY_DEADLINE_S = 30 };

/* Creates the runtime and the proxy actor (returned). */
rt_actor *proxy_start(rt_system **sys);

/* Starts the loop thread; call after spawning the actors under test. */
void proxy_run(rt_system *sys);

/* Stops the runtime, joins the loop thread, frees everything. */
void proxy_stop(rt_system *sys);

/* Sends req to `to` as a request from the proxy; returns the reply (owned
 * by the caller) or NULL at the deadline (an rt_timeout after timeout_ms). */
rt_msg *proxy_call(rt_actor *to, rt_msg *req, uint64_t timeout_ms);

/* Sends n requests at once and waits for all; replies[i] gets each (or
 * NULL). Returns how many were answered. */
int proxy_call_many(rt_actor *to, rt_msg **reqs, rt_msg **replies, int n, uint64_t timeout_ms);

/* Counts of the store's notices the proxy received, by message type. */
int proxy_count(uint32_t type);

/* The payloads of the first 64 cd_notify messages, "channel:payload". */
const char *proxy_notice(int i);

/* How many job events (cd_event, to a proxy made the scheduler's watcher)
 * of `type` about `job` the proxy received; for 256 (type, job) pairs. An
 * event with a state is also counted as "type:state" ("job.finished:cancelled"). */
int proxy_events(const char *type, uint64_t job);

/* Waits (with the deadline) until pred() holds; pred runs under the
 * proxy's lock, so it may read proxy_count-style state safely. */
bool proxy_wait(bool (*pred)(void));

#endif
