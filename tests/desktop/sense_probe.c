/*
 * sense_probe.c — node-desktop/sense.c on its own, for sense_check.py: it
 * prints the facts as they change, one line each, and holds or releases the
 * sleep inhibitor as told on standard input.
 *
 *   out: "battery 0|1", "idle <ms> <source>" or "idle unknown",
 *        "inhibit held", "inhibit released"
 *   in:  "hold", "release" (one a line); end of input: exit 0
 *
 * "sense_probe autostart on|off [EXEC]" instead writes or removes the
 * autostart entry (dk_autostart_set) and exits 0, or 1 with the error.
 *
 * The first lines give the state at start. An idle line is printed when the
 * source changes or the time moves other than with the clock: back (there
 * was input) or forward by more than the time since the last line plus a
 * second (the source's answer jumped); its growing by itself is not news.
 */
#include "node-desktop/sense.h"

#include <glib-unix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct probe {
    dk_sense *sense;
    GMainLoop *loop;
    bool printed;
    bool battery, held;
    const char *source;    /* NULL: unknown */
    uint64_t idle_ms;      /* last printed */
    int64_t idle_at_us;    /* when it was printed (monotonic) */
    char in[256];
    size_t in_len;
} probe;

static void print_changes(void *p)
{
    probe *pr = p;
    bool battery = dk_sense_on_battery(pr->sense);
    if (!pr->printed || battery != pr->battery)
        printf("battery %d\n", battery ? 1 : 0);
    pr->battery = battery;

    const char *source = dk_sense_idle_source(pr->sense);
    uint64_t ms = dk_sense_idle_ms(pr->sense);
    int64_t now = g_get_monotonic_time();
    uint64_t grown = (uint64_t)(now - pr->idle_at_us) / 1000u;
    bool moved = ms < pr->idle_ms || ms > pr->idle_ms + grown + 1000u;
    if (!pr->printed || g_strcmp0(source, pr->source) != 0 || (source != NULL && moved)) {
        if (source != NULL)
            printf("idle %llu %s\n", (unsigned long long)ms, source);
        else
            printf("idle unknown\n");
        pr->idle_ms = ms;
        pr->idle_at_us = now;
    }
    pr->source = source;

    bool held = dk_sense_inhibit_held(pr->sense);
    if (pr->printed && held != pr->held)
        printf("inhibit %s\n", held ? "held" : "released");
    pr->held = held;
    pr->printed = true;
    fflush(stdout);
}

static void command(probe *pr, const char *line)
{
    if (strcmp(line, "hold") == 0)
        dk_sense_inhibit(pr->sense, true);
    else if (strcmp(line, "release") == 0)
        dk_sense_inhibit(pr->sense, false);
    else
        fprintf(stderr, "sense_probe: unknown command \"%s\"\n", line);
}

static gboolean stdin_ready(int fd, GIOCondition cond, void *p)
{
    (void)cond;
    probe *pr = p;
    ssize_t n = read(fd, pr->in + pr->in_len, sizeof pr->in - 1 - pr->in_len);
    if (n <= 0) {
        g_main_loop_quit(pr->loop);
        return G_SOURCE_REMOVE;
    }
    pr->in_len += (size_t)n;
    pr->in[pr->in_len] = '\0';
    char *start = pr->in, *nl;
    while ((nl = strchr(start, '\n')) != NULL) {
        *nl = '\0';
        command(pr, start);
        start = nl + 1;
    }
    pr->in_len = strlen(start);
    memmove(pr->in, start, pr->in_len + 1);
    if (pr->in_len == sizeof pr->in - 1)
        pr->in_len = 0; /* a line this long is no command */
    return G_SOURCE_CONTINUE;
}

static int autostart(int argc, char **argv)
{
    GError *err = NULL;
    if (argc < 3 || (strcmp(argv[2], "on") != 0 && strcmp(argv[2], "off") != 0)) {
        fprintf(stderr, "usage: sense_probe autostart on|off [EXEC]\n");
        return 2;
    }
    if (!dk_autostart_set(strcmp(argv[2], "on") == 0, argc > 3 ? argv[3] : NULL, &err)) {
        fprintf(stderr, "sense_probe: %s\n", err->message);
        g_error_free(err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "autostart") == 0)
        return autostart(argc, argv);
    probe pr = { 0 };
    pr.loop = g_main_loop_new(NULL, FALSE);
    pr.sense = dk_sense_create(print_changes, &pr);
    print_changes(&pr);
    g_unix_fd_add(STDIN_FILENO, G_IO_IN | G_IO_HUP, stdin_ready, &pr);
    g_main_loop_run(pr.loop);
    dk_sense_destroy(pr.sense);
    g_main_loop_unref(pr.loop);
    return 0;
}
