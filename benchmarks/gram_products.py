"""X.T @ X of a persisted row-chunked X (a Gram or covariance product: deep K, a small C):
mgemm against dask.array.matmul on the same cluster and inputs, in turns, with the bytes the
workers fetched from each other (their transfer logs) and the error against float64.

mgemm splits such a product along K by the worker holding each chunk of X (``plan._by_holder``),
so only C's partials move.  CPU workers (a ``LocalCluster`` of --workers processes of --threads
threads, over TCP) by default; ``--gpu`` runs on the embedded GPU cluster (one worker a GPU) with
CuPy chunks; each run is timed by ``mgemm.bench.timed`` (every worker's device synchronized
before the timer stops).

    python3 benchmarks/gram_products.py [--workers 4] [--threads 1] [--rows 160000] [--cols 600]
        [--chunk 10000] [--dtype float64] [--runs 5] [--gpu]
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


def timed(client, make) -> tuple[float, int, tuple]:
    """Seconds from the call to every block held and every GPU idle (``mgemm.bench.timed``),
    bytes the workers fetched meanwhile, C's chunks."""
    started: list[float] = []
    seconds, c = bench.timed(client, make, started)
    logs = client.run(bench._incoming_log, since=started[0])
    return seconds, sum(nbytes for log in logs.values() for _, _, nbytes, _ in log), c.chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=160_000)
    ap.add_argument("--cols", type=int, default=600)
    ap.add_argument("--chunk", type=int, default=10_000, help="rows of X per chunk")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gpu", action="store_true", help="the embedded GPU cluster, CuPy chunks")
    args = ap.parse_args()

    if args.gpu:
        from mgemm.cluster import start_default_cluster
        client = start_default_cluster()
    else:
        client = Client(LocalCluster(n_workers=args.workers, threads_per_worker=args.threads,
                                     dashboard_address=None))
    with client.cluster, client:
        x = da.random.default_rng(0).random((args.rows, args.cols), chunks=(args.chunk, args.cols))
        x = x.astype(args.dtype)
        if args.gpu:
            import cupy
            x = x.map_blocks(cupy.asarray)
        x = x.persist()
        wait(x)
        flop = 2 * args.cols * args.cols * args.rows
        ways = {"dask.array.matmul": lambda: x.T @ x, "mgemm": lambda: mgemm.matmul(x.T, x)}
        runs = {name: [] for name in ways}
        for _ in range(args.runs):
            for name, make in ways.items():  # in turns
                runs[name].append(timed(client, make))
        host = np.asarray(x.compute().get() if args.gpu else x.compute(), dtype=np.float64)
        ref = host.T @ host
        print(f"X {args.rows}x{args.cols} {args.dtype}, row chunks of {args.chunk}, "
              f"{len(client.nthreads())} workers, medians of {args.runs}")
        for name, make in ways.items():
            got = make().compute()
            got = np.asarray(got.get() if args.gpu else got, dtype=np.float64)
            err = np.abs(got - ref).max() / np.abs(ref).max()
            seconds = statistics.median(s for s, _, _ in runs[name])
            moved = statistics.median(b for _, b, _ in runs[name])
            print(f"  {name:18s} {seconds:.3f} s  {flop / seconds / 1e9:8.1f} GFLOP/s  fetched "
                  f"{moved / 2**20:7.1f} MiB  C chunks {runs[name][0][2]}  rel. error {err:.1e}")
            print(f"  {'':18s} runs: {', '.join(f'{s:.3f}' for s, _, _ in runs[name])}")
        base = statistics.median(s for s, _, _ in runs["dask.array.matmul"])
        print(f"  mgemm x dask.array.matmul: {base / statistics.median(s for s, _, _ in runs['mgemm']):.2f}")
        del x
        bench.synchronize_workers(client)  # a round trip: X released before the cluster closes


if __name__ == "__main__":
    main()
