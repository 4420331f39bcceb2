#!/bin/sh
# gpu-check.sh — run in a folder made by scripts/gpu-bundle.sh, on a machine
# with a GPU: checks that the CUDA and OpenCL backends give the CPU
# backend's result bits (the unit tests' parameter sets; the result bytes
# of the kernels' stage vectors, tests/vectors/kernels.vec; every example
# parameter file over two ranges, in one run and in several chunks), then
# measures the kernels (bench_sim: the CPU, OpenCL and CUDA lines). Prints
# a line per check and last "N passed, N failed"; exits 1 if a check failed.
# With a CUDA device, bench_sim's CUDA lines also run at other launch
# sizes (SIMFARM_CUDA_THREADS).
# GPU_CHECK_ITEMS sets the items of the option examples' runs (default
# 10^7), GPU_CHECK_COMBAT_ITEMS those of the combat example's (default 10^5,
# or GPU_CHECK_ITEMS if fewer: its 300-second fights with stat weights take
# about 70 us an item on a CPU core); GPU_CHECK_BENCH=0 leaves out bench_sim.
set -u
cd "$(dirname "$0")"
ITEMS=${GPU_CHECK_ITEMS:-10000000}
COMBAT_ITEMS=${GPU_CHECK_COMBAT_ITEMS:-$((ITEMS < 100000 ? ITEMS : 100000))}
SPECS="option:option option:asian option:barrier combat:combat"
FIRSTS="0 123456789012"
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH="$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NVIDIA's OpenCL driver, where the machine has it but registers no ICD
if [ -z "$(ls /etc/OpenCL/vendors 2>/dev/null)" ]; then
    icd=$( (ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1/ { print $NF; exit }';
            ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 2>/dev/null) | head -n 1)
    if [ -n "$icd" ]; then
        mkdir -p vendors
        echo "$icd" > vendors/nvidia.icd
        export OCL_ICD_VENDORS="$PWD/vendors"
    fi
fi
command -v nvidia-smi > /dev/null && nvidia-smi -L

pass=0
fail=0
cuda_opened=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -s out.txt ] && sed 's/^/    /' out.txt | tail -n 20; }

# The digest line of `simfarm sim` (SHA-256 of the result's bytes,
# docs/kernels.md), or the error it printed; $1 is the file for its output.
digest() {
    f=$1
    shift
    bin/simfarm sim "$@" > "$f" 2>&1 && grep '^result digest' "$f" || { cat "$f"; return 1; }
}
items_of() { [ "$1" = combat ] && echo "$COMBAT_ITEMS" || echo "$ITEMS"; }

# The CPU backend's digests, once for both backends, all runs at once
# (one thread each; the machine has the cores)
mkdir -p want
for spec in $SPECS; do
    kernel=${spec%%:*}
    for first in $FIRSTS; do
        digest "want/$spec.$first.log" "$kernel" "examples/${spec#*:}.json" --items "$(items_of "$kernel")" \
            --first "$first" --seed 7 --cores 1 > "want/$spec.$first" &
    done
done
wait

# A driver older than the CUDA toolkit that built the bundle cannot load
# its kernels. With an nvcc on this machine they are built again here from
# src/, with the flags of the bundle's (kernels.fatbin.flags), and loaded
# from that file (SIMFARM_CUDA_MODULE); the checks below then hold them to
# the CPU's bits like any other build.
probe() { bin/simfarm sim option examples/option.json --items 1000 --backend "$1" > out.txt 2>&1; }
if ! probe cuda && grep -q 'cuModuleLoadData failed' out.txt; then
    sed 's/^/    /' out.txt
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
    if [ -z "$nvcc" ]; then
        echo "== no nvcc here to build the CUDA kernels for this driver"
    elif (cd src && "$nvcc" -fatbin $(cat ../kernels.fatbin.flags) sim/kernels.cu -o ../kernels-here.fatbin) > nvcc.txt 2>&1; then
        export SIMFARM_CUDA_MODULE="$PWD/kernels-here.fatbin"
        echo "== CUDA kernels built here: $("$nvcc" --version | tail -n 2 | head -n 1)"
    else
        echo "== building the CUDA kernels here failed:"
        sed 's/^/    /' nvcc.txt
    fi
fi

for backend in cuda opencl; do
    if ! probe "$backend"; then
        bad "$backend: opens a device"
        continue
    fi
    ok "$backend: opens a device: $(sed -n 's/.*backend [a-z]* (\(.*\))$/\1/p' out.txt)"
    if [ "$backend" = cuda ]; then
        cuda_opened=1
        # with the result bytes of tests/vectors/kernels.vec (every kernel
        # and style), in the same check: a skipped CUDA case of
        # test_sim_vectors (the device opened above) fails it
        if bin/test_sim_cuda > out.txt 2>&1 && CRITERION_VERBOSITY_LEVEL=1 bin/test_sim_vectors > out.txt 2>&1 &&
            ! grep -q '^\[SKIP\] sim_vectors::cuda' out.txt; then
            ok "test_sim_cuda (four parameter sets, bits as the CPU's), test_sim_vectors (the stage vectors' result bytes)"
        else
            bad "test_sim_cuda, test_sim_vectors"
        fi
        # a module from a file, as a driver older than the toolkit needs:
        # the bundle's own fatbin, unless one was built here
        want=$(cat want/option:option.0)
        got=$(SIMFARM_CUDA_MODULE=${SIMFARM_CUDA_MODULE:-$PWD/kernels.fatbin} digest out.txt option \
            examples/option.json --items "$ITEMS" --first 0 --seed 7 --backend cuda)
        [ "$got" = "$want" ] && ok "cuda: the kernels from SIMFARM_CUDA_MODULE: $got" ||
            { echo "    want $want, got $got" >> out.txt; bad "cuda: the kernels from SIMFARM_CUDA_MODULE"; }
    else
        bin/test_sim_opencl > out.txt 2>&1 && ok "test_sim_opencl" || bad test_sim_opencl
    fi
    for spec in $SPECS; do
        kernel=${spec%%:*}
        file=examples/${spec#*:}.json
        n=$(items_of "$kernel")
        for first in $FIRSTS; do
            want=$(cat "want/$spec.$first")
            case $want in
            "result digest "*) ;;
            *) echo "$want" > out.txt; bad "cpu $file"; continue ;;
            esac
            for chunks in 1 13; do
                name="$backend: $file, items [$first, +$n), $chunks chunk(s)"
                got=$(digest out.txt "$kernel" "$file" --items "$n" --first "$first" --seed 7 --backend "$backend" --chunks "$chunks")
                [ "$got" = "$want" ] && ok "$name: $got" || { echo "    want $want, got $got" > out.txt; bad "$name"; }
            done
        done
    done
done

if [ "${GPU_CHECK_BENCH:-1}" != 0 ]; then
    echo "== bench_sim"
    bin/bench_sim 2>&1 | tee out.txt
    grep -q '^BENCH sim_european_cuda ' out.txt && ok "bench_sim: CUDA figures" || bad "bench_sim: no CUDA figures"
    if [ "$cuda_opened" = 1 ]; then
        # other launch sizes than the default 32768 threads: their figures
        # say whether it holds the GPU's cores busy
        for t in 8192 131072 524288; do
            echo "== bench_sim cuda, SIMFARM_CUDA_THREADS=$t"
            SIMFARM_CUDA_THREADS=$t bin/bench_sim cuda 2>&1
        done
    fi
fi
rm -rf out.txt want nvcc.txt
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
