"""Host time per call of mgemm's kernel launchers beside cuBLAS, on a product small enough that
the GPU is never the limit: the Python cost a small or skewed product pays on every call.

    python3 benchmarks/launch_overhead.py [--calls 300] [--profile]

``--profile`` also prints where the Python time of each mgemm launcher goes (cProfile, top 15).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402

from mgemm import hopper, kernels  # noqa: E402


def per_call_us(fn, calls: int) -> float:
    for _ in range(20):
        fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = time.perf_counter() - t0
    cp.cuda.Device().synchronize()
    return host / calls * 1e6


def main() -> None:
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 300
    a = cp.random.standard_normal((256, 256), dtype=cp.float32).astype(cp.float16)
    b = cp.random.standard_normal((256, 256), dtype=cp.float32).astype(cp.float16)
    out = cp.empty((256, 256), dtype=cp.float16)
    rows = {"cupy.matmul (cuBLAS)": lambda: cp.matmul(a, b, out=out),
            "mgemm.kernels.gemm (portable)": lambda: kernels.gemm(a, b, out=out)}
    for policy in ("static", "streamk", "dynamic"):
        cfg = kernels.KernelConfig.default("float16", policy=policy)
        rows[f"mgemm.kernels.gemm {policy}"] = lambda cfg=cfg: kernels.gemm(a, b, out=out, config=cfg)
    if hopper.supported():
        rows["mgemm.hopper.gemm"] = lambda: hopper.gemm(a, b, out=out)
        cfg = hopper.HopperConfig(input="float16", policy="streamk")
        rows["mgemm.hopper.gemm streamk"] = lambda: hopper.gemm(a, b, out=out, config=cfg)
    for name, fn in rows.items():
        print(f"{name:>32}: {per_call_us(fn, calls):7.1f} µs of host time per call", flush=True)
    if "--profile" in sys.argv:
        import cProfile
        import pstats
        for name, fn in rows.items():
            if not name.startswith("mgemm"):
                continue
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(calls):
                fn()
            prof.disable()
            cp.cuda.Device().synchronize()
            print(f"\n=== {name}: {calls} calls")
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
