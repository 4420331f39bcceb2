#!/usr/bin/env bash
# Runs each runtime workload on simfarm's runtime and on the C++ Actor
# Framework, alternating, in one run (numbers drift between runs, so only
# figures from the same run are compared). Prints both BENCH lines and a
# ratio line per workload: BENCH rt_vs_caf_<name> <ratio> x.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
for w in pingpong ring counting fjthrput spawn; do
    rt=$("$BUILD/bench/bench_rt" "$w")
    caf=$("$BUILD/bench/caf_bench" "$w")
    echo "$rt"
    echo "$caf"
    awk -v w="$w" -v a="$(echo "$rt" | awk '{print $3}')" -v b="$(echo "$caf" | awk '{print $3}')" \
        'BEGIN { printf "BENCH rt_vs_caf_%s %.1f x\n", w, a / b }'
done
"$BUILD/bench/bench_rt" idle_bytes
