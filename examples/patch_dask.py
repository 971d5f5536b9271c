"""Existing dask.array code sped up without editing it: run it inside ``mgemm.patch_dask()`` and
its ``@``, ``da.matmul`` and 2-D ``.dot`` go through mgemm (one task per output block).

    python examples/patch_dask.py         # MGEMM_EXAMPLE_N=2000 for a smaller problem
"""

import os
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait

import mgemm


def existing_code(x, w1, w2):
    """Somebody's dask code, unchanged: a two-layer forward pass and a Gram matrix."""
    hidden = da.tanh(x @ w1)
    out = hidden.dot(w2)
    gram = da.matmul(x.T, x)
    return out, gram


def run(x, w1, w2):
    """Build, count the tasks it adds to the inputs' graph, compute: (results, tasks, seconds)."""
    start = time.perf_counter()
    lazy = existing_code(x, w1, w2)
    keys = set().union(*(r.__dask_graph__().keys() for r in lazy))
    inputs = set().union(*(a.__dask_graph__().keys() for a in (x, w1, w2)))
    results = [r.persist() for r in lazy]
    wait(results)
    return results, len(keys - inputs), time.perf_counter() - start


def main():
    n = int(os.environ.get("MGEMM_EXAMPLE_N", 4000))
    threads = max(1, (os.cpu_count() or 2) // 2)
    with LocalCluster(n_workers=2, threads_per_worker=threads, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        rng = da.random.default_rng(0)
        x = rng.standard_normal((n, n // 2), chunks=n // 8)
        w1 = rng.standard_normal((n // 2, n), chunks=n // 8) / np.sqrt(n)
        w2 = rng.standard_normal((n, n // 4), chunks=n // 8)
        x, w1, w2 = client.persist([x, w1, w2])
        wait([x, w1, w2])

        plain, plain_tasks, plain_s = run(x, w1, w2)
        with mgemm.patch_dask():  # also works as p = mgemm.patch_dask(); ...; p.undo()
            patched, patched_tasks, patched_s = run(x, w1, w2)
            assert mgemm.patch.through_mgemm(x @ w1), "mgemm was not used"

        print(f"plain dask:     {plain_s:7.3f} s  {plain_tasks:6d} tasks")
        print(f"patch_dask():   {patched_s:7.3f} s  {patched_tasks:6d} tasks")
        for p, q in zip(plain, patched):
            p, q = p.compute(), q.compute()
            err = np.linalg.norm(p - q) / np.linalg.norm(p)
            print(f"{str(p.shape):14}  relative difference {err:.1e}")
            assert err < 1e-12, err


if __name__ == "__main__":  # worker processes re-import this file
    main()
