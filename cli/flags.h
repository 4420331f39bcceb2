/*
 * flags.h — the one flag reader of the `simfarm` commands. A command lists
 * its flags, then takes them one at a time in its own order and checks
 * their values itself:
 *
 *     static const cli_flag flags[] = { { "--help", false }, { "--db", true }, { NULL, false } };
 *     cli_args it = CLI_ARGS(argc, argv, flags, 0);
 *     const char *flag, *value;
 *     sf_error e;
 *     int rc;
 *     while ((rc = cli_next(&it, &flag, &value, &e)) > 0)
 *         ... flag NULL: value is an argument; else the flag and its value ...
 *     if (rc < 0)
 *         return cli_refuse("serve", &e, serve_usage);
 *
 * A valued flag takes `--name VALUE` or `--name=VALUE`; "-h" is "--help";
 * after "--" every word is an argument, as is "-" alone.
 */
#ifndef SIMFARM_CLI_FLAGS_H
#define SIMFARM_CLI_FLAGS_H

#include "base/err.h"

#include <stdbool.h>
#include <stdio.h>

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
    int max_args;          /* the arguments the command takes */
    int nargs;             /* the arguments read so far */
} cli_args;

#define CLI_ARGS(argc, argv, flags, max_args) { (argc), (argv), 1, false, (flags), (max_args), 0 }

/* The next flag or argument of it. Returns 1 with *flag the flag's name as
 * the list spells it and *value its value (NULL for a switch), or with
 * *flag NULL and *value an argument; 0 when the words are done; SF_EINVAL
 * with the reason in e for an unknown option ("unknown option '--x'", which
 * is told before a missing value), a switch given a value, a flag without
 * its value ("'--db' needs a value") or an argument past it->max_args
 * ("unexpected argument 'x'"). */
int cli_next(cli_args *it, const char **flag, const char **value, sf_error *e);

/* A duration flag's value as seconds: a whole number with a unit, s, m,
 * h or d ("90s", "30m", "24h", "7d"), or without one, seconds. false (and
 * *out untouched) for anything else, 0, or past 10 years. */
bool cli_duration(const char *v, long long *out);

/* Prints "simfarm CMD: <e's words>", then the command's usage, on standard
 * error; returns SF_EXIT_USAGE. */
int cli_refuse(const char *cmd, const sf_error *e, void (*usage)(FILE *out));

#endif /* SIMFARM_CLI_FLAGS_H */
