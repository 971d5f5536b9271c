"""The one-GPU anchor: cuBLAS (cupy.matmul) on a single GPU at the orchestrator's sizes.

Times with CUDA events after a warm-up, median of --repeat, on random inputs; prints a table and
appends JSON rows, so "2 × one-GPU cuBLAS" is measured in the same run as the cluster benchmark.
"""

from __future__ import annotations

import argparse
import json
import statistics

import cupy as cp


def time_matmul(n: int, dtype: str, repeat: int) -> list[float]:
    rng = cp.random.default_rng(0)
    a = (rng.random((n, n), dtype=cp.float32) * 2 - 1).astype(dtype)
    b = (rng.random((n, n), dtype=cp.float32) * 2 - 1).astype(dtype)
    out = cp.matmul(a, b)  # warm-up: handle creation, heuristics
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeat):
        start.record()
        cp.matmul(a, b, out=out)
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=32768)
    p.add_argument("--dtypes", default="float32,float64,float16")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    rows = []
    for dtype in args.dtypes.split(","):
        times = time_matmul(args.n, dtype, args.repeat)
        med = statistics.median(times)
        rows.append({"case": f"{dtype}-{args.n}", "method": "cublas-1gpu", "dtype": dtype,
                     "n": args.n, "seconds": times, "median_s": med,
                     "tflops": 2.0 * args.n ** 3 / med / 1e12, "gpu": name})
        cp.get_default_memory_pool().free_all_blocks()
    for r in rows:
        print(f"{r['case']:<16} cublas 1 GPU  {r['median_s']:.3f} s  {r['tflops']:.1f} TFLOP/s")
    if args.json:
        with open(args.json, "a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
