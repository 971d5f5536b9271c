"""Two block tasks per GPU: one stream per GPU or one per task thread?  On one GPU worker (two
task threads, the embedded cluster's default), times ``mgemm.matmul`` of float16 inputs held on
that worker (no transfers), in blocks of one chunk (``block_size``), with
``mgemm.engines.ONE_STREAM_PER_GPU`` on and off, in turns, as ``mgemm bench`` times a run; and
one block's GEMM alone (CUDA events): blocks × that time is the ideal.

    python3 benchmarks/stream_probe.py [--m 16384 --n 32768 --k 32768 --chunk 8192 --repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mgemm  # noqa: E402
from mgemm import bench  # noqa: E402
from mgemm.cluster import session  # noqa: E402


def _set(dask_worker, shared: bool) -> None:
    import mgemm.engines
    mgemm.engines.ONE_STREAM_PER_GPU = shared


def _block_ms(m: int, n: int, k: int, chunk: int, dtype: str) -> float:
    import cupy as cp

    from benchmarks.mma_peak import events_ms
    from mgemm.engines.cublas import CublasEngine
    rng = cp.random.default_rng(0)
    parts = k // chunk
    a = [(rng.random((m, chunk), dtype=cp.float32) - 0.5).astype(dtype) for _ in range(parts)]
    b = [(rng.random((chunk, n), dtype=cp.float32) - 0.5).astype(dtype) for _ in range(parts)]
    engine = CublasEngine()
    return events_ms(lambda: engine.gemm(a, b), 10)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--n", type=int, default=32768)
    ap.add_argument("--k", type=int, default=32768)
    ap.add_argument("--chunk", type=int, default=8192)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    with session(None, n_workers=1) as client:
        a = bench.random_matrix((args.m, args.k), args.chunk, args.dtype, gpu=True, seed=1).persist()
        b = bench.random_matrix((args.k, args.n), args.chunk, args.dtype, gpu=True, seed=2).persist()
        from distributed import wait
        wait([a, b])
        block = client.submit(_block_ms, args.chunk, args.chunk, args.k, args.chunk, args.dtype,
                              pure=False).result()
        blocks = (args.m // args.chunk) * (args.n // args.chunk)
        ideal = blocks * block / 1e3
        print(f"{args.dtype} {args.m}x{args.n}x{args.k}, {args.chunk}² chunks, one GPU worker: "
              f"{blocks} blocks of {block:.2f} ms alone = {ideal * 1e3:.1f} ms", flush=True)
        times: dict[str, list[float]] = {"one stream per GPU": [], "one per task thread": []}
        for r in range(args.repeat + 1):
            for name in times:
                client.run(_set, shared=name == "one stream per GPU")
                seconds, c = bench.timed(client, lambda: mgemm.matmul(a, b, block_size=args.chunk))
                if r == 0:
                    err = bench.check(a, b, c, tol=bench.tolerance(args.dtype))
                    print(f"  {name}: warm-up {seconds * 1e3:.1f} ms, rel err {err:.1e}", flush=True)
                else:
                    times[name].append(seconds)
                del c
        flops = 2.0 * args.m * args.n * args.k
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"  {name:<20} median {med * 1e3:6.1f} ms ({min(ts) * 1e3:.1f}–{max(ts) * 1e3:.1f}), "
                  f"{flops / med / 1e12:6.1f} TFLOP/s, blocks alone / this {ideal / med:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
