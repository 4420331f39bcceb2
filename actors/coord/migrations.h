/*
 * migrations.h — the SQL migrations compiled into the binary from sql/ (see
 * scripts/embed-sql.sh), in the order they are applied.
 */
#ifndef SIMFARM_ACTORS_MIGRATIONS_H
#define SIMFARM_ACTORS_MIGRATIONS_H

typedef struct cd_migration {
    const char *name; /* the file name without .sql, e.g. "001_core" */
    const char *sql;
} cd_migration;

extern const cd_migration cd_migrations[];
extern const unsigned cd_nmigrations;

#endif
