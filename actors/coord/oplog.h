/*
 * oplog.h — the operator's lines that an attacker can repeat (failed API
 * logins, 429s, refused node connections, connections over the gateway's
 * caps), each kept to one line per client address per minute and twenty
 * lines a minute in all, through the one logger (base/log.h: sf_log_limit),
 * so a flood cannot fill the disk. The events not written are said with the
 * address's next line ("and 57 more"), or by cd_oplog_flush once its minute
 * is over. docs/coordinator.md, "Operator log", lists every line.
 *
 * The limits are the process's (one coordinator a process) and are touched
 * on the loop thread only: the gateway, the API and the node sessions,
 * which all run there.
 */
#ifndef SIMFARM_ACTORS_COORD_OPLOG_H
#define SIMFARM_ACTORS_COORD_OPLOG_H

typedef enum cd_oplog_kind {
    CD_OPLOG_LOGIN_FAILED,   /* an API request with a missing or bad token where one is needed (401) */
    CD_OPLOG_RATE_LIMITED,   /* an API request refused with 429 */
    CD_OPLOG_NODE_REFUSED,   /* a node connection refused before its welcome */
    CD_OPLOG_CONN_REFUSED,   /* a connection closed at once: over a cap, or no descriptor free */
    CD_OPLOG_KINDS
} cd_oplog_kind;

/* Writes a warning for an event of kind from addr (text; "" when unknown),
 * unless its address (or the burst) has had its line this minute, when the
 * event is counted instead. fields (may be NULL) are more JSON members
 * (base/log.h, sf_logf); "event" (the kind's name), "addr" and, when events
 * were held back, "more" are added. Loop thread only. */
void cd_oplog_limited(cd_oplog_kind kind, const char *addr, const char *fields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Says, one line each, the events held back whose minute is over (the
 * gateway calls it every 10 s). Loop thread only. */
void cd_oplog_flush(void);

/* The kind's name in the JSON lines' "event" ("login_failed", ...). */
const char *cd_oplog_event_name(cd_oplog_kind kind);

#endif
