#!/usr/bin/env bash
# Runs each libFuzzer harness (build/fuzz/fuzz_<name>) for FUZZ_SECONDS,
# starting from its seed corpus in tests/fuzz/corpus/<name>/ and keeping
# what it finds in build/fuzz/corpus/<name>/. Crashes are written to
# build/fuzz/crashes/ and fail the run. Prints one line per harness with
# its crash-free execution count.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
secs=${FUZZ_SECONDS:-60}

shopt -s nullglob
harnesses=("$BUILD"/fuzz/fuzz_*)
if [ ${#harnesses[@]} -eq 0 ]; then
    echo "fuzz: no harnesses in tests/fuzz/ (fuzz_<name>.c) to run"
    exit 0
fi
mkdir -p "$BUILD/fuzz/crashes"
status=0
for h in "${harnesses[@]}"; do
    name=${h##*/fuzz_}
    seeds="tests/fuzz/corpus/$name"
    work="$BUILD/fuzz/corpus/$name"
    mkdir -p "$work"
    log="$BUILD/fuzz/$name.log"
    dirs=("$work")
    [ -d "$seeds" ] && dirs+=("$seeds")
    if "$h" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="$BUILD/fuzz/crashes/$name-" "${dirs[@]}" >"$log" 2>&1; then
        execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -n 1)
        echo "fuzz $name: ${execs:-?} executions in ${secs}s, no crash"
    else
        echo "fuzz $name: FAILED, see $log and $BUILD/fuzz/crashes/"
        status=1
    fi
done
exit $status
