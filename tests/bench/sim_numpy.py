"""The European call Monte Carlo of bench_sim.c done the usual way with
numpy, single-threaded: numpy.random.default_rng, vectorised, 500,000 paths
per call. Prints BENCH sim_european_numpy <paths/s> paths/s."""
import os

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
    rng = np.random.default_rng(2024)
    price(rng)  # warm up
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < 1.0:
        price(rng)
        calls += 1
    best = best_cpu = float("inf")
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            p = price(rng)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    print(f"BENCH sim_european_numpy {calls * PATHS / best:.4g} paths/s")
    # CPU time of the process: what others' load on the machine does not skew
    print(f"# sim_european_numpy per CPU second: {calls * PATHS / best_cpu:.4g}")
    print(f"# numpy {np.__version__}, price {p:.4f}")


if __name__ == "__main__":
    main()
