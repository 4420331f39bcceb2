#!/bin/sh
# gpu-bundle.sh — packs the GPU backends' checks into one folder that runs
# on an x86-64 Linux machine with a GPU driver but none of the build's
# libraries (a GPU server that is not a Debian build machine): simfarm, the
# CUDA and OpenCL bit-identity tests, the kernels' stage vectors
# (test_sim_vectors with tests/vectors/kernels.vec), bench_sim, the shared libraries they
# load (not the C library's own, which the machine has), examples/, the
# CUDA kernels' source and gpu-check.sh, which runs them all. Copy the folder over and run
# `./gpu-check.sh` in it.
#
# Usage: scripts/gpu-bundle.sh [DIR]   (default $BUILD/gpu-bundle)
set -eu
BUILD=${BUILD:-build}
DIR=${1:-$BUILD/gpu-bundle}
BINS="$BUILD/bin/simfarm $BUILD/tests/unit/test_sim_cuda $BUILD/tests/unit/test_sim_opencl $BUILD/tests/unit/test_sim_vectors $BUILD/bench/bench_sim"
for b in $BINS; do
    [ -x "$b" ] || { echo "gpu-bundle: $b is missing (make all first)" >&2; exit 1; }
done
if "$BUILD/bin/simfarm" sim option examples/option.json --items 1 --backend cuda 2>&1 | grep -q "built without nvcc"; then
    echo "gpu-bundle: simfarm was built without nvcc: its CUDA backend could not be checked" >&2
    exit 1
fi
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/tests/bench" "$DIR/tests/vectors"
cp $BINS "$DIR/bin/"
cp tests/vectors/kernels.vec "$DIR/tests/vectors/"
cp -r examples "$DIR/"
cp tests/bench/sim_numpy.py "$DIR/tests/bench/"
cp scripts/gpu-check.sh "$DIR/"
# The CUDA kernels' source, the fatbin embedded in simfarm and the nvcc
# flags it was built with: gpu-check.sh builds them again where the
# driver is older than the toolkit that built the bundle.
mkdir -p "$DIR/src/sim"
cp sim/kernels.cu sim/dev.h sim/option_dev.h sim/combat_dev.h "$DIR/src/sim/"
cp "$BUILD/sim/kernels.fatbin" "$BUILD/sim/kernels.fatbin.flags" "$DIR/"
# Every library the programs load, but the C library's own (libc, libm,
# the loader, libdl, libpthread, librt, libresolv, libutil), which go
# together with the machine's and are there on any Linux.
for b in $BINS; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case $(basename "$lib") in
    libc.so.* | libm.so.* | ld-linux* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | libutil.so.*) ;;
    *) cp -L "$lib" "$DIR/lib/" ;;
    esac
done
echo "gpu-bundle: $DIR ($(du -sh "$DIR" | cut -f1)); run ./gpu-check.sh there"
