"""The farm_european job done with Dask distributed + numpy on this machine:
a LocalCluster of 2 single-threaded worker processes, the 10^9-path European
call cut into 200 tasks of 5x10^6 paths, each vectorised with numpy in
blocks of 500,000. Prints BENCH farm_european_dask <paths/s> paths/s and the
price it found (for a sanity check against Black-Scholes 10.4506)."""
import os
import sys

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import time  # noqa: E402

import numpy as np  # noqa: E402

S0, K, R, SIGMA, T = 100.0, 100.0, 0.05, 0.2, 1.0
TASKS, PATHS, BLOCK = 200, 5_000_000, 500_000


def task(seed):
    rng = np.random.default_rng(seed)
    total, total_sq = 0.0, 0.0
    for _ in range(PATHS // BLOCK):
        z = rng.standard_normal(BLOCK)
        st = S0 * np.exp((R - 0.5 * SIGMA * SIGMA) * T + SIGMA * np.sqrt(T) * z)
        pay = np.exp(-R * T) * np.maximum(st - K, 0.0)
        total += pay.sum()
        total_sq += (pay * pay).sum()
    return total, total_sq


def main():
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print("farm_dask: Dask distributed is missing (apt-get install python3-distributed)", file=sys.stderr)
        return 2
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.gather(client.map(task, range(10_000, 10_000 + workers)))  # warm up the workers
        start = time.perf_counter()
        parts = client.gather(client.map(task, range(TASKS)))
        elapsed = time.perf_counter() - start
    n = TASKS * PATHS
    mean = sum(p[0] for p in parts) / n
    print(f"# dask: {workers} workers, {TASKS} tasks, price {mean:.4f}, {elapsed:.2f} s", file=sys.stderr)
    print(f"BENCH farm_european_dask {n / elapsed:.3g} paths/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
