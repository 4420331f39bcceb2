#!/usr/bin/env bash
# Runs every benchmark (native and WebAssembly builds), or only those whose
# name matches the first argument. Each prints lines "BENCH <name> <value> <unit>".
#
#   scripts/bench.sh               all
#   scripts/bench.sh ed25519       build/bench/bench_ed25519 and its wasm build
#   scripts/bench.sh coord         build/bench/bench_coord: starts its own
#                                  PostgreSQL and `simfarm serve`, so it needs
#                                  build/bin/simfarm and PostgreSQL 15's server
#                                  programs (about a minute; see its header)
#   scripts/bench.sh farm          tests/bench/bench_farm.mjs: a whole farm on
#                                  this machine (PostgreSQL, serve, a node)
#                                  against local runs and Dask (a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
only=${1:-}

ran=0
for b in "$BUILD"/bench/bench_*; do
    [ -x "$b" ] || continue
    name=${b##*/bench_}
    [ -z "$only" ] || [ "$name" = "$only" ] || continue
    echo "# $b" >&2
    "$b"
    ran=$((ran + 1))
    wasm="$BUILD/wasm/bench_$name.js"
    if [ -f "$wasm" ]; then
        echo "# $wasm (node $(node --version))" >&2
        NODE_PATH=/usr/share/nodejs NODE_OPTIONS=--no-experimental-fetch node "$wasm"
    fi
done
# Benchmarks that drive whole programs are node scripts.
for b in tests/bench/bench_*.mjs; do
    [ -f "$b" ] || continue
    name=${b##*/bench_}
    name=${name%.mjs}
    [ -z "$only" ] || [ "$name" = "$only" ] || continue
    echo "# $b (node $(node --version))" >&2
    BUILD=$BUILD node "$b"
    ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
    echo "bench: no benchmark named '${only}' (have: $(ls "$BUILD"/bench | sed 's/^bench_//' | tr '\n' ' '))" >&2
    exit 2
fi
