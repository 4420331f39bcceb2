#!/usr/bin/env bash
# Runs every test suite that `make test` builds, prints each suite's result,
# and ends with one line "N passed, N failed" summing them all.
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
# Chromium; the dashboard also in Debian's Firefox ESR, through puppeteer).
# A suite that cannot run — a tool or a build output missing — counts as a
# failure, never as a skip. Exit status: 0 when nothing failed.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export BUILD=${BUILD:-build}
ALL_SUITES=(unit asan tsan valgrind wasm integration reliability browser)
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=("${ALL_SUITES[@]}")

logdir="$BUILD/test-logs"
mkdir -p "$logdir"
total_pass=0
total_fail=0
summary=()

# Adds one suite's counts and prints its line.
record() { # suite passed failed [note]
    total_pass=$((total_pass + $2))
    total_fail=$((total_fail + $3))
    local line
    line=$(printf '%-12s %4d passed, %d failed%s' "$1" "$2" "$3" "${4:+  ($4)}")
    summary+=("$line")
    echo "== $line"
}

# Runs one test program and adds its counts to the suite's. A program that
# dies without a summary line counts as one failure.
#   criterion: "[====] Synthesis: Tested: T | Passing: P | Failing: F | Crashing: C"
#   check.h:   "N passed, N failed"
run_program() { # log program...
    local log=$1
    shift
    "$@" >"$log" 2>&1
    local rc=$? t p f
    if read -r t p < <(sed -nE 's/.*Synthesis: Tested: ([0-9]+) \| Passing: ([0-9]+).*/\1 \2/p' "$log" | tail -n 1) &&
        [ -n "$t" ]; then
        f=$((t - p))
    elif read -r p f < <(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p' "$log" | tail -n 1) &&
        [ -n "$p" ]; then
        :
    else
        p=0 f=1
    fi
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
}

run_binaries() { # suite "dir..." [env...]
    local suite=$1 dirs=$2
    shift 2
    suite_pass=0 suite_fail=0
    local bins=() b d
    for d in $dirs; do
        for b in "$d"/*; do
            [ -f "$b" ] && [ -x "$b" ] && bins+=("$b")
        done
    done
    if [ ${#bins[@]} -eq 0 ]; then
        record "$suite" 0 1 "no test programs in $dirs: run make test"
        return
    fi
    for b in "${bins[@]}"; do
        run_program "$logdir/$suite-$(basename "$b").log" env "$@" "$b"
    done
    record "$suite" "$suite_pass" "$suite_fail"
}

# node's test runner with the TAP reporter ends with "# pass N" / "# fail N".
run_node_tests() { # suite files...
    local suite=$1
    shift
    if [ $# -eq 0 ]; then
        record "$suite" 0 1 "no tests found"
        return
    fi
    command -v node >/dev/null || { record "$suite" 0 1 "node not found"; return; }
    local log="$logdir/$suite.log" p f
    node --test --test-reporter=tap "$@" >"$log" 2>&1
    local rc=$?
    p=$(sed -nE 's/^# pass ([0-9]+)$/\1/p' "$log" | tail -n 1)
    f=$(sed -nE 's/^# fail ([0-9]+)$/\1/p' "$log" | tail -n 1)
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
    record "$suite" "$p" "$f"
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
            record valgrind 0 1 "valgrind missing: run scripts/install-deps.sh"
        else
            # The check programs but the stress ones (millions of messages).
            # --fair-sched: valgrind runs one thread at a time, and by
            # default a thread that never blocks (an actor that always has
            # work) can keep that turn while the loop thread's timers wait.
            suite_pass=0 suite_fail=0
            for b in "$BUILD"/tests/check/check_*; do
                case "$b" in *_stress) continue ;; esac
                run_program "$logdir/valgrind-$(basename "$b").log" valgrind -q --fair-sched=yes --leak-check=full \
                    --errors-for-leak-kinds=definite,indirect --error-exitcode=9 "$b"
            done
            record valgrind "$suite_pass" "$suite_fail"
        fi
        ;;
    wasm) run_node_tests wasm tests/wasm/*.test.mjs ;;
    integration) run_node_tests integration tests/integration/*.test.mjs ;;
    reliability) run_node_tests reliability tests/reliability/*.test.mjs ;;
    browser)
        if [ ! -d tests/browser/node_modules/playwright-core ]; then
            record browser 0 1 "playwright-core missing: run scripts/install-deps.sh"
        elif [ ! -d tests/browser/node_modules/puppeteer-core ]; then
            record browser 0 1 "puppeteer-core missing: run scripts/install-deps.sh"
        elif [ ! -x /usr/bin/chromium ]; then
            record browser 0 1 "/usr/bin/chromium missing: run scripts/install-deps.sh"
        elif [ ! -x /usr/bin/firefox-esr ]; then
            record browser 0 1 "/usr/bin/firefox-esr missing: run scripts/install-deps.sh"
        else
            run_node_tests browser tests/browser/*.test.mjs
        fi
        ;;
    *) record "$suite" 0 1 "unknown suite (known: ${ALL_SUITES[*]})" ;;
    esac
done

echo
echo "suite results:"
printf '  %s\n' "${summary[@]}"
echo "logs: $logdir"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
