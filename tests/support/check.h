/*
 * check.h — the smallest test harness, for programs that cannot use
 * Criterion (its sandbox does not start under ThreadSanitizer). A program
 * lists its cases in main with RUN(), and ends with CHECK_SUMMARY(), which
 * prints "N passed, N failed" and returns the exit status.
 */
#ifndef SIMFARM_TESTS_CHECK_H
#define SIMFARM_TESTS_CHECK_H

#include <stdio.h>

static int check_failed_cases, check_passed_cases, check_case_failed;

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

/* Each case is called through a pointer, so that none is inlined into
 * main: with every case inlined, main's frame held all their locals (under
 * AddressSanitizer and Asyncify in WebAssembly, close to a megabyte of
 * node's stack). */
#define RUN(fn)                                                               \
    do {                                                                      \
        void (*volatile check_case_)(void) = fn;                              \
        check_case_failed = 0;                                                \
        check_case_();                                                        \
        if (check_case_failed)                                                \
            check_failed_cases++, printf("not ok %s\n", #fn);                 \
        else                                                                  \
            check_passed_cases++, printf("ok %s\n", #fn);                     \
        fflush(stdout);                                                       \
    } while (0)

#define CHECK_SUMMARY()                                                       \
    (printf("%d passed, %d failed\n", check_passed_cases, check_failed_cases), \
        check_failed_cases ? 1 : 0)

#endif
