/*
 * flags.h — the one flag reader of the `simfarm` commands. A command lists
 * its flags, then takes them one at a time in its own order and checks
 * their values itself:
 *
 *     static const cli_flag flags[] = { { "--help", false }, { "--db", true }, { NULL, false } };
 *     cli_args it = CLI_ARGS(argc, argv, flags);
 *     const char *flag, *value;
 *     sf_error e;
 *     int rc;
 *     while ((rc = cli_next(&it, &flag, &value, &e)) > 0)
 *         ... flag NULL: value is an argument; else the flag and its value ...
 *     if (rc < 0)
 *         ... a usage error: e.msg says which flag and what is wrong ...
 *
 * A valued flag takes `--name VALUE` or `--name=VALUE`; "-h" is "--help";
 * after "--" every word is an argument, as is "-" alone.
 */
#ifndef SIMFARM_CLI_FLAGS_H
#define SIMFARM_CLI_FLAGS_H

#include "base/err.h"

#include <stdbool.h>

typedef struct cli_flag {
    const char *name; /* "--listen"; NULL ends a list */
    bool valued;      /* takes a value */
} cli_flag;

typedef struct cli_args {
    int argc;
    char **argv;
    int i;                 /* the next word to read */
    bool rest;             /* after "--": every word is an argument */
    const cli_flag *flags; /* the command's, ended by a NULL name */
} cli_args;

#define CLI_ARGS(argc, argv, flags) { (argc), (argv), 1, false, (flags) }

/* The next flag or argument of it. Returns 1 with *flag the flag's name as
 * the list spells it and *value its value (NULL for a switch), or with
 * *flag NULL and *value an argument; 0 when the words are done; SF_EINVAL
 * with the reason in e for an unknown option ("unknown option '--x'", which
 * is told before a missing value), a switch given a value or a flag without
 * its value ("'--db' needs a value"). */
int cli_next(cli_args *it, const char **flag, const char **value, sf_error *e);

#endif /* SIMFARM_CLI_FLAGS_H */
