"""The European call Monte Carlo of bench_sim.c done the usual way with
numpy, single-threaded: numpy.random.default_rng, vectorised, 500,000 paths
per call. One timed run of at least the paths given (default 5,000,000,
rounded up to whole calls) after one call of warm-up; bench_sim runs it
between its own runs. Prints BENCH sim_european_numpy <paths/s> paths/s and
the paths per CPU second of the process."""
import os
import sys

# one thread, like one simfarm worker (set before numpy loads BLAS/OpenMP)
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import time  # noqa: E402

import numpy as np  # noqa: E402

S0, K, R, SIGMA, T = 100.0, 100.0, 0.05, 0.2, 1.0
PATHS = 500_000


def price(rng):
    z = rng.standard_normal(PATHS)
    st = S0 * np.exp((R - 0.5 * SIGMA * SIGMA) * T + SIGMA * np.sqrt(T) * z)
    return np.exp(-R * T) * np.maximum(st - K, 0.0).mean()


def main():
    try:
        want = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    except ValueError:
        want = 0
    if len(sys.argv) > 2 or want <= 0:
        sys.exit("usage: sim_numpy.py [paths, a positive integer]")
    calls = -(-want // PATHS)
    rng = np.random.default_rng(2024)
    price(rng)  # warm up
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        p = price(rng)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"BENCH sim_european_numpy {calls * PATHS / wall:.4g} paths/s")
    # CPU time of the process: what others' load on the machine does not skew
    print(f"# sim_european_numpy per CPU second: {calls * PATHS / cpu:.4g}")
    print(f"# numpy {np.__version__}, price {p:.4f}")


if __name__ == "__main__":
    main()
