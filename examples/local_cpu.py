"""mgemm on one CPU machine: a LocalCluster of worker processes, mgemm.matmul beside
dask.array.matmul on the same persisted inputs, the answer checked against NumPy in float64.

    python examples/local_cpu.py          # MGEMM_EXAMPLE_N=2000 for a smaller problem
"""

import os
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait

import mgemm


def timed(make):
    """Seconds to compute ``make()`` on the cluster, with the result left on the workers."""
    start = time.perf_counter()
    result = make().persist()
    wait(result)
    return result, time.perf_counter() - start


def main():
    n = int(os.environ.get("MGEMM_EXAMPLE_N", 4000))
    workers = 2
    threads = max(1, (os.cpu_count() or workers) // workers)
    # Everything listens on 127.0.0.1 only; no dashboard.
    with LocalCluster(n_workers=workers, threads_per_worker=threads, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        rng = da.random.default_rng(42)
        a = rng.standard_normal((n, n), chunks=n // 4)
        b = rng.standard_normal((n, n), chunks=n // 4)
        a, b = client.persist([a, b])  # the inputs live on the workers, as in real use
        wait([a, b])

        c, seconds = timed(lambda: mgemm.matmul(a, b))  # uses the active client
        _, dask_seconds = timed(lambda: da.matmul(a, b))
        for name, s in (("mgemm.matmul", seconds), ("dask.array.matmul", dask_seconds)):
            print(f"{name:18} {n}x{n}x{n} float64: {s:7.3f} s  {2 * n**3 / s / 1e9:7.1f} GFLOP/s")

        # Check sampled rows and columns (including the last blocks) against NumPy in float64.
        idx = np.unique(np.r_[0:16, n - 16:n])
        got = c[idx][:, idx].compute()
        ref = a[idx].compute() @ b[:, idx].compute()
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        print(f"relative error against NumPy: {err:.2e}")
        assert err < 1e-12, err


if __name__ == "__main__":  # worker processes re-import this file
    main()
