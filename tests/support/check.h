/*
 * check.h — the smallest test harness, for programs that cannot use
 * Criterion (its sandbox does not start under ThreadSanitizer). A program
 * lists its cases in main with RUN(), and ends with CHECK_SUMMARY(), which
 * prints "N passed, N failed" (", N skipped" added when a case skipped) and
 * returns the exit status. A case that cannot check what it is for on this
 * machine ends with CHECK_SKIP("reason"): it is reported as
 * "ok name # SKIP reason" (TAP's form, as libuv's RETURN_SKIP), never as a
 * pass.
 */
#ifndef SIMFARM_TESTS_CHECK_H
#define SIMFARM_TESTS_CHECK_H

#include <stdio.h>

static int check_failed_cases, check_passed_cases, check_skipped_cases, check_case_failed;
static char check_skip_reason[256]; /* "" unless the running case skipped */

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            check_case_failed = 1;                                            \
            return;                                                           \
        }                                                                     \
    } while (0)

/* Ends the running case as skipped, with a printf-style reason. */
#define CHECK_SKIP(...)                                                       \
    do {                                                                      \
        snprintf(check_skip_reason, sizeof check_skip_reason, __VA_ARGS__);  \
        return;                                                               \
    } while (0)

/* Each case is called through a pointer, so that none is inlined into
 * main: with every case inlined, main's frame held all their locals (under
 * AddressSanitizer and Asyncify in WebAssembly, close to a megabyte of
 * node's stack). */
#define RUN(fn)                                                               \
    do {                                                                      \
        void (*volatile check_case_)(void) = fn;                              \
        check_case_failed = 0;                                                \
        check_skip_reason[0] = '\0';                                          \
        check_case_();                                                        \
        if (check_case_failed)                                                \
            check_failed_cases++, printf("not ok %s\n", #fn);                 \
        else if (check_skip_reason[0])                                        \
            check_skipped_cases++, printf("ok %s # SKIP %s\n", #fn, check_skip_reason); \
        else                                                                  \
            check_passed_cases++, printf("ok %s\n", #fn);                     \
        fflush(stdout);                                                       \
    } while (0)

#define CHECK_SUMMARY()                                                       \
    (check_skipped_cases                                                      \
            ? printf("%d passed, %d failed, %d skipped\n", check_passed_cases, \
                  check_failed_cases, check_skipped_cases)                    \
            : printf("%d passed, %d failed\n", check_passed_cases, check_failed_cases), \
        check_failed_cases ? 1 : 0)

#endif
