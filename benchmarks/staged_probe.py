"""Where a staged block's time goes (NumPy chunks through one GPU, no Dask): the host link each
way, and one block task as ``mgemm.graph`` runs it, alone and two at once on two threads.

Per row, median of ``--reps`` (after one untimed run), seconds and GB/s where it is a copy:

- ``h2d``: ``cupy.asarray`` of one host chunk, then a synchronize;
- ``d2h fresh``: ``cupy.asnumpy`` of one device chunk (a new host array each time, as a block
  task returns);
- ``d2h into``: ``get(out=...)`` into a host array written before (its pages already mapped);
- ``d2h pinned``: ``get(out=...)`` into pinned host memory;
- ``h2d x8``: ``cupy.asarray`` of a block's chunks (A's and B's K parts) one after another;
- ``h2d par``, ``d2h par``: one chunk each way through ``mgemm.staging``'s pinned buffers
  (``to_device``/``to_host`` with ``PINNED_COPIES`` on, ``--threads`` copying threads), back
  into a new host array (what a block task does instead of ``h2d``/``d2h fresh`` with them on);
- ``gemm``: the block's K parts multiplied on the GPU from device copies (``cupy.matmul`` into
  one accumulator), CUDA events;
- ``block``: ``mgemm.graph._block_task`` on the host chunks (copies in by K part, GEMMs, the
  block back), one at a time; ``block x2``: two such tasks at once on two threads, wall time;
  ``block pinned``, ``block x2 pin``: the same with ``mgemm.staging.PINNED_COPIES`` on.

    python3 benchmarks/staged_probe.py [--chunk 8192] [--parts 4] [--dtype float32] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy  # noqa: E402
import cupyx  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import graph, staging  # noqa: E402


def timed(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunk", type=int, default=8192)
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=4)
    args = p.parse_args()
    n, parts, dtype = args.chunk, args.parts, np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    a = [rng.standard_normal((n, n)).astype(dtype) for _ in range(parts)]
    b = [rng.standard_normal((n, n)).astype(dtype) for _ in range(parts)]
    nbytes = a[0].nbytes
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}: {n}² {dtype} chunks "
          f"({nbytes / 2**20:.0f} MiB), a block of {parts} K parts, median of {args.reps}")

    def row(name: str, seconds: float, moved: int = 0) -> None:
        rate = f"  {moved / seconds / 1e9:6.1f} GB/s" if moved else ""
        print(f"  {name:12s} {seconds * 1e3:9.1f} ms{rate}")

    row("h2d", timed(lambda: cupy.asarray(a[0]), args.reps), nbytes)
    dev = cupy.asarray(a[0])
    row("d2h fresh", timed(lambda: cupy.asnumpy(dev), args.reps), nbytes)
    into = np.ones_like(a[0])
    row("d2h into", timed(lambda: dev.get(out=into), args.reps), nbytes)
    pinned = cupyx.empty_pinned(a[0].shape, dtype)
    row("d2h pinned", timed(lambda: dev.get(out=pinned), args.reps), nbytes)
    row("h2d x8", timed(lambda: [cupy.asarray(x) for x in (*a, *b)], args.reps),
        (len(a) + len(b)) * nbytes)
    staging.PINNED_COPIES, staging.COPY_THREADS = True, args.threads
    stream = cupy.cuda.get_current_stream()
    row("h2d par", timed(lambda: staging.to_device(cupy, a[0], stream), args.reps), nbytes)
    row("d2h par", timed(lambda: staging.to_host(cupy, dev, stream), args.reps), nbytes)
    staging.PINNED_COPIES = False
    dev = None  # freed before the block rows

    da_, db = [cupy.asarray(x) for x in a], [cupy.asarray(x) for x in b]

    def gemm() -> None:
        acc = da_[0] @ db[0]
        for x, y in zip(da_[1:], db[1:]):
            acc += x @ y

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    gemm()
    times = []
    for _ in range(args.reps):
        start.record()
        gemm()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    row("gemm", statistics.median(times))
    da_ = db = None

    chunks = [*a, *b]
    reads = "probe;" + ",".join(["1"] * len(chunks))  # each chunk read once: none kept

    def block() -> np.ndarray:
        return graph._block_task("cublas", (1, parts, 1), None, 1.0, 0.0, str(dtype), False,
                                 "off", False, reads, *chunks)

    rows = np.sort(rng.choice(n, 32, replace=False))  # whole rows: an unwritten band shows
    ref = sum(x[rows].astype(np.float64) @ y.astype(np.float64) for x, y in zip(a, b))

    def error(out: np.ndarray) -> float:
        return float(np.linalg.norm(out[rows] - ref) / np.linalg.norm(ref))

    err = error(block())
    row("block", timed(block, args.reps))

    def two() -> None:
        threads = [threading.Thread(target=block) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    row("block x2", timed(two, args.reps))
    staging.PINNED_COPIES = True
    err_pinned = error(block())
    row("block pinned", timed(block, args.reps))
    row("block x2 pin", timed(two, args.reps))
    print(f"  through the pinned buffers: {err_pinned:.2e}")
    print(f"  block's relative error against float64 (32 sampled rows): {err:.2e}")


if __name__ == "__main__":
    main()
