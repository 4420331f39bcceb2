/*
 * version.h — the one version of simfarm: `simfarm version`, the server's
 * name in a challenge, /health, and a node's default name for itself.
 */
#ifndef SIMFARM_BASE_VERSION_H
#define SIMFARM_BASE_VERSION_H

#define SF_VERSION "0.1.0"

#endif /* SIMFARM_BASE_VERSION_H */
