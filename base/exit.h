/*
 * exit.h — the exit statuses of every simfarm command, defined once.
 */
#ifndef SIMFARM_BASE_EXIT_H
#define SIMFARM_BASE_EXIT_H

enum sf_exit {
    SF_EXIT_OK = 0,           /* done, or stopped on request */
    SF_EXIT_FAIL = 1,         /* could not do it: the reason is on stderr */
    SF_EXIT_USAGE = 2,        /* the command line is wrong */
    SF_EXIT_NOT_ENROLLED = 3, /* a node whose key the coordinator refused */
    SF_EXIT_KEY_IN_USE = 4,   /* a node whose key has a live session already (another process is that node) */
};

#endif /* SIMFARM_BASE_EXIT_H */
