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
    if dtype == "bfloat16" and not _cupy_has(dtype):
        return _time_torch(n, repeat)
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


def _cupy_has(dtype: str) -> bool:
    try:
        cp.empty(1, dtype=dtype)
        return True
    except Exception:
        return False


def _time_torch(n: int, repeat: int) -> list[float]:
    """bfloat16 through torch (cuBLAS too) where CuPy has no bfloat16."""
    import torch

    a = (torch.rand((n, n), device="cuda") * 2 - 1).to(torch.bfloat16)
    b = (torch.rand((n, n), device="cuda") * 2 - 1).to(torch.bfloat16)
    out = torch.matmul(a, b)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        torch.matmul(a, b, out=out)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    del a, b, out
    torch.cuda.empty_cache()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, nargs="+", default=[32768])
    p.add_argument("--dtypes", default="float32,float64,float16")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    rows = []
    for n in args.n:
        for dtype in args.dtypes.split(","):
            times = time_matmul(n, dtype, args.repeat)
            med = statistics.median(times)
            rows.append({"case": f"{dtype}-{n}", "method": "cublas-1gpu", "dtype": dtype,
                         "n": n, "seconds": times, "median_s": med,
                         "tflops": 2.0 * n ** 3 / med / 1e12, "gpu": name})
            cp.get_default_memory_pool().free_all_blocks()
    for r in rows:
        print(f"{r['case']:<16} cublas 1 GPU  {r['median_s']:.3f} s  {r['tflops']:.1f} TFLOP/s")
    if args.json:
        with open(args.json, "a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
