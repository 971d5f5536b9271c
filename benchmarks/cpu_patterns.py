"""Common shapes of a Dask user's products on CPU workers: mgemm.matmul against
dask.array.matmul on the same ``LocalCluster`` and the same persisted inputs, in turns, each run
timed by ``mgemm.bench.timed`` (from the call until every block is held; every run starts from the
inputs' layout as persisted), medians of --runs,
and mgemm's result checked against NumPy's product of the same chunks (float64).

    python3 benchmarks/cpu_patterns.py [--workers 2] [--threads 1] [--runs 3] [--only NAME]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from distributed import Client, LocalCluster, wait  # noqa: E402

import mgemm  # noqa: E402
from mgemm import bench  # noqa: E402

#: name: ((A's shape, A's chunks), (B's shape, B's chunks)), float64
CASES = {
    "tall X @ square W": (((160000, 600), (10000, 600)), ((600, 600), (600, 600))),
    "tall X @ thin w": (((200000, 1000), (20000, 1000)), ((1000, 16), (1000, 16))),
    "square, 4 x 4 chunks": (((4000, 4000), (1000, 1000)), ((4000, 4000), (1000, 1000))),
    "matrix @ few vectors": (((8000, 8000), (2000, 2000)), ((8000, 8), (2000, 8))),
    "outer (K = 64)": (((8000, 64), (2000, 64)), ((64, 8000), (64, 2000))),
    "K chunked unlike": (((3000, 6000), (1000, 1500)), ((6000, 3000), (1000, 1000))),
    "wide A @ tall B": (((2000, 40000), (2000, 5000)), ((40000, 2000), (5000, 2000))),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default=None, help="one case by name")
    args = ap.parse_args()
    cases = {k: v for k, v in CASES.items() if args.only in (None, k)}
    if not cases:
        raise SystemExit(f"--only: one of {sorted(CASES)}")
    with Client(LocalCluster(n_workers=args.workers, threads_per_worker=args.threads,
                             dashboard_address=None)) as client:
        print(f"{args.workers} workers x {args.threads} threads, float64, medians of {args.runs}")
        for name, ((sa, ca), (sb, cb)) in cases.items():
            rng = da.random.default_rng(1)
            a, b = rng.random(sa, chunks=ca).persist(), rng.random(sb, chunks=cb).persist()
            wait([a, b])
            keep = bench.chunk_homes(client, a, b)  # every run starts from this layout
            ways = {"dask.array.matmul": lambda: a @ b, "mgemm": lambda: mgemm.matmul(a, b)}
            runs = {way: [] for way in ways}
            for _ in range(args.runs):
                for way, make in ways.items():  # in turns
                    runs[way].append(bench.timed(client, make, keep=keep)[0])
            ref = a.compute() @ b.compute()
            err = np.abs(mgemm.matmul(a, b).compute() - ref).max() / np.abs(ref).max()
            base, mine = (statistics.median(runs[way]) for way in ways)
            print(f"  {name:22s} dask.array.matmul {base:.3f} s  mgemm {mine:.3f} s  "
                  f"x {base / mine:.2f}  rel. error {err:.1e}", flush=True)
            del a, b
        bench.synchronize_workers(client)


if __name__ == "__main__":
    main()
