/*
 * cli.h — the subcommands main.c dispatches to. Each takes the arguments
 * after the subcommand's name (argv[0] is the name) and returns the exit
 * status.
 */
#ifndef SIMFARM_CLI_H
#define SIMFARM_CLI_H

int cmd_sim(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
