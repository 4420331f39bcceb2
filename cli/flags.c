/*
 * flags.c — the one flag reader (flags.h).
 */
#include "cli/flags.h"

#include "base/exit.h"

#include <string.h>

/* The flag of list named by the first n bytes of w, or NULL. */
static const cli_flag *find(const cli_flag *list, const char *w, size_t n)
{
    for (; list != NULL && list->name != NULL; list++)
        if (strlen(list->name) == n && strncmp(list->name, w, n) == 0)
            return list;
    return NULL;
}

int cli_next(cli_args *it, const char **flag, const char **value, sf_error *e)
{
    *flag = NULL;
    *value = NULL;
    for (;;) {
        if (it->i >= it->argc)
            return 0;
        const char *w = it->argv[it->i++];
        if (it->rest || w[0] != '-' || strcmp(w, "-") == 0) {
            if (it->nargs >= it->max_args)
                return sf_fail(e, SF_EINVAL, "unexpected argument '%s'", w);
            it->nargs++;
            *value = w;
            return 1;
        }
        if (strcmp(w, "--") == 0) {
            it->rest = true;
            continue;
        }
        if (strcmp(w, "-h") == 0)
            w = "--help";
        const char *eq = strchr(w, '=');
        size_t n = eq != NULL ? (size_t)(eq - w) : strlen(w);
        const cli_flag *f = find(it->flags, w, n);
        if (f == NULL)
            return sf_fail(e, SF_EINVAL, "unknown option '%.*s'", (int)n, w);
        if (!f->valued && eq != NULL)
            return sf_fail(e, SF_EINVAL, "'%s' takes no value", f->name);
        if (f->valued) {
            if (eq != NULL)
                *value = eq + 1;
            else if (it->i < it->argc)
                *value = it->argv[it->i++];
            else
                return sf_fail(e, SF_EINVAL, "'%s' needs a value", f->name);
        }
        *flag = f->name;
        return 1;
    }
}

int cli_refuse(const char *cmd, const sf_error *e, void (*usage)(FILE *out))
{
    fprintf(stderr, "simfarm %s: %s\n\n", cmd, e->msg);
    usage(stderr);
    return SF_EXIT_USAGE;
}

bool cli_duration(const char *v, long long *out)
{
    long long n = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n > 10LL * 365 * 86400)
            return false;
    }
    if (p == v)
        return false;
    static const struct { char unit; long long secs; } units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 },
        { 'd', 86400 } };
    long long mul = *p == '\0' ? 1 : 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0] && mul == 0; i++)
        if (p[0] == units[i].unit && p[1] == '\0')
            mul = units[i].secs;
    if (mul == 0 || n == 0 || n * mul > 10LL * 365 * 86400)
        return false;
    *out = n * mul;
    return true;
}
