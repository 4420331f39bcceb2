#!/usr/bin/env bash
# Runs every test suite that `make test` builds, prints each suite's result,
# and ends with one line "N passed, N failed" summing them all, with
# ", N skipped" added when a test skipped.
#
#   scripts/run-tests.sh                  every suite
#   scripts/run-tests.sh unit wasm        only these suites
#
# Suites: unit (Criterion programs and check.h programs), asan (both under
# AddressSanitizer and UBSan), tsan (the check.h programs under
# ThreadSanitizer), valgrind (the check.h programs but the stress ones under
# memcheck, leaks included), wasm (emcc builds under node, compared with the
# native builds), integration (real processes and a real PostgreSQL),
# reliability (chaos: nodes, network, coordinator and database failing under
# a job; CHAOS_SEED, CHAOS_ITEMS), browser (Playwright driving Debian's
# Chromium; the dashboard also in Debian's Firefox ESR, through puppeteer),
# desktop (the GTK desktop node, build/bin/simfarm-desktop, in a private X
# server and D-Bus session driven through AT-SPI; tests/desktop/session.mjs).
# A test that cannot check what it is for on this machine (no GPU, say)
# skips with its reason, and every skip's line is printed with the suite's
# result. A suite that cannot run — a tool or a build output missing —
# counts as a failure, never as a skip. Exit status: 0 when nothing failed.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export BUILD=${BUILD:-build}
# Criterion names each skipped test, with its reason, only from verbosity 1.
export CRITERION_VERBOSITY_LEVEL=1
ALL_SUITES=(unit asan tsan valgrind wasm integration reliability browser desktop)
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=("${ALL_SUITES[@]}")

logdir="$BUILD/test-logs"
mkdir -p "$logdir"
total_pass=0
total_fail=0
total_skip=0
summary=()

# "N passed, N failed", and ", N skipped" when N > 0; the first N right-aligned
# in width characters.
counts() { # width passed failed skipped
    printf '%*d passed, %d failed' "$1" "$2" "$3"
    [ "$4" -eq 0 ] || printf ', %d skipped' "$4"
}

# Adds one suite's counts and prints its line.
record() { # suite passed failed skipped [note]
    total_pass=$((total_pass + $2))
    total_fail=$((total_fail + $3))
    total_skip=$((total_skip + $4))
    local line
    line=$(printf '%-12s ' "$1"; counts 4 "$2" "$3" "$4"; printf '%s' "${5:+  ($5)}")
    summary+=("$line")
    echo "== $line"
}

# Runs one test program and adds its counts to the suite's. A program that
# dies without a summary line counts as one failure.
#   criterion: "[====] Synthesis: Tested: T | Passing: P | Failing: F | Crashing: C",
#              which leaves skipped tests out: each is a line
#              "[SKIP] suite::test: reason" (at verbosity 1)
#   check.h:   "N passed, N failed[, N skipped]", each skip a line
#              "ok case # SKIP reason"
run_program() { # log program...
    local log=$1
    shift
    "$@" >"$log" 2>&1
    local rc=$? t p f s
    if read -r t p < <(sed -nE 's/.*Synthesis: Tested: ([0-9]+) \| Passing: ([0-9]+).*/\1 \2/p' "$log" | tail -n 1) &&
        [ -n "$t" ]; then
        f=$((t - p))
        s=$(grep -c '^\[SKIP\] ' "$log")
    elif read -r p f s < <(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?$/\1 \2 \4/p' "$log" |
        tail -n 1) && [ -n "$p" ]; then
        s=${s:-0}
    else
        p=0 f=1 s=0
    fi
    sed -nE -e "s|^\[SKIP\] (.*)|-- skipped \1|p" -e "s|^ok (.*) # SKIP (.*)|-- skipped $(basename "${!#}") \1: \2|p" "$log"
    # A sanitizer report after the summary still fails the program.
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    # Criterion runs each test in a child whose LeakSanitizer report does not
    # change the exit status: a report anywhere in the log is a failure.
    if [ "$f" -eq 0 ] && grep -qE 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|== ?ERROR SUMMARY: [1-9]' "$log"; then
        f=1
    fi
    [ "$f" -eq 0 ] || { echo "-- $* failed (exit $rc); last lines of $log:"; tail -n 25 "$log"; }
    suite_pass=$((suite_pass + p))
    suite_fail=$((suite_fail + f))
    suite_skip=$((suite_skip + s))
}

run_binaries() { # suite "dir..." [env...]
    local suite=$1 dirs=$2
    shift 2
    suite_pass=0 suite_fail=0 suite_skip=0
    local bins=() b d
    for d in $dirs; do
        for b in "$d"/*; do
            [ -f "$b" ] && [ -x "$b" ] && bins+=("$b")
        done
    done
    if [ ${#bins[@]} -eq 0 ]; then
        record "$suite" 0 1 0 "no test programs in $dirs: run make test"
        return
    fi
    for b in "${bins[@]}"; do
        run_program "$logdir/$suite-$(basename "$b").log" env "$@" "$b"
    done
    record "$suite" "$suite_pass" "$suite_fail" "$suite_skip"
}

# node's test runner with the TAP reporter ends with "# pass N" / "# fail N"
# / "# skipped N"; a skipped test is a line "ok N - name # SKIP reason".
run_node_tests() { # suite files...
    local suite=$1
    shift
    if [ $# -eq 0 ]; then
        record "$suite" 0 1 0 "no tests found"
        return
    fi
    command -v node >/dev/null || { record "$suite" 0 1 0 "node not found"; return; }
    local log="$logdir/$suite.log" p f s
    node --test --test-reporter=tap "$@" >"$log" 2>&1
    local rc=$?
    p=$(sed -nE 's/^# pass ([0-9]+)$/\1/p' "$log" | tail -n 1)
    f=$(sed -nE 's/^# fail ([0-9]+)$/\1/p' "$log" | tail -n 1)
    s=$(sed -nE 's/^# skipped ([0-9]+)$/\1/p' "$log" | tail -n 1)
    s=${s:-0}
    sed -nE "s|^ *ok [0-9]+ - (.*) # SKIP ?(.*)|-- skipped $suite: \1: \2|p" "$log"
    if [ -z "$p" ] || [ -z "$f" ]; then
        p=0 f=1
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    if [ "$f" -ne 0 ]; then
        echo "-- $suite failed (exit $rc); failing tests in $log:"
        grep -E '^not ok|^# Subtest|error:|Error' "$log" | head -n 40
        echo "-- what the failing tests said:"
        awk '/^not ok/ { n = 80 } n > 0 { print; n-- }' "$log" | head -n 240
    fi
    record "$suite" "$p" "$f" "$s"
}

for suite in "${suites[@]}"; do
    echo "== running $suite"
    case "$suite" in
    unit) run_binaries unit "$BUILD/tests/unit $BUILD/tests/check" ;;
    asan)
        run_binaries asan "$BUILD/asan/tests/unit $BUILD/asan/tests/check" \
            ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        ;;
    tsan) run_binaries tsan "$BUILD/tsan/tests/check" TSAN_OPTIONS=halt_on_error=1:exitcode=66 ;;
    valgrind)
        if ! command -v valgrind >/dev/null; then
            record valgrind 0 1 0 "valgrind missing: run scripts/install-deps.sh"
        else
            # The check programs but the stress ones (millions of messages).
            # --fair-sched: valgrind runs one thread at a time, and by
            # default a thread that never blocks (an actor that always has
            # work) can keep that turn while the loop thread's timers wait.
            suite_pass=0 suite_fail=0 suite_skip=0
            for b in "$BUILD"/tests/check/check_*; do
                case "$b" in *_stress) continue ;; esac
                run_program "$logdir/valgrind-$(basename "$b").log" valgrind -q --fair-sched=yes --leak-check=full \
                    --errors-for-leak-kinds=definite,indirect --error-exitcode=9 "$b"
            done
            record valgrind "$suite_pass" "$suite_fail" "$suite_skip"
        fi
        ;;
    wasm) run_node_tests wasm tests/wasm/*.test.mjs ;;
    integration) run_node_tests integration tests/integration/*.test.mjs ;;
    reliability) run_node_tests reliability tests/reliability/*.test.mjs ;;
    browser)
        if [ ! -d tests/browser/node_modules/playwright-core ]; then
            record browser 0 1 0 "playwright-core missing: run scripts/install-deps.sh"
        elif [ ! -d tests/browser/node_modules/puppeteer-core ]; then
            record browser 0 1 0 "puppeteer-core missing: run scripts/install-deps.sh"
        elif [ ! -x /usr/bin/chromium ]; then
            record browser 0 1 0 "/usr/bin/chromium missing: run scripts/install-deps.sh"
        elif [ ! -x /usr/bin/firefox-esr ]; then
            record browser 0 1 0 "/usr/bin/firefox-esr missing: run scripts/install-deps.sh"
        else
            run_node_tests browser tests/browser/*.test.mjs
        fi
        ;;
    desktop)
        # Debian's /usr/bin/python3 (a python3 earlier on PATH may lack the
        # modules): dbusmock for UPower and logind, gi with Atspi and Gdk.
        if [ ! -x /usr/bin/Xvfb ]; then
            record desktop 0 1 0 "Xvfb missing: run scripts/install-deps.sh"
        elif ! /usr/bin/python3 -c 'import dbusmock, gi; gi.require_version("Atspi", "2.0"); gi.require_version("Gdk", "3.0")' 2>/dev/null ||
            [ ! -x /usr/libexec/at-spi-bus-launcher ] || ! command -v gdbus >/dev/null; then
            record desktop 0 1 0 "/usr/bin/python3 with dbusmock and AT-SPI, or at-spi2-core, or gdbus missing: run scripts/install-deps.sh"
        elif [ ! -x "$BUILD/bin/simfarm-desktop" ]; then
            record desktop 0 1 0 "$BUILD/bin/simfarm-desktop not built: run make"
        else
            run_node_tests desktop tests/desktop/*.test.mjs
        fi
        ;;
    *) record "$suite" 0 1 0 "unknown suite (known: ${ALL_SUITES[*]})" ;;
    esac
done

echo
echo "suite results:"
printf '  %s\n' "${summary[@]}"
echo "logs: $logdir"
counts 0 "$total_pass" "$total_fail" "$total_skip"
echo
[ "$total_fail" -eq 0 ]
