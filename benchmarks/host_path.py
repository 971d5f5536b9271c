"""Host time of one block product: what a Dask task waits for besides the GPU.

A block task calls an engine once per output block with operands it has not seen before (new
chunks, new pointers) and a fresh output.  This probe times, in µs of host time per call with the
GPU held busy by a spin (so no call waits for the GPU; the engine rows do wait, for a few µs of GPU
work at these sizes):

* ``hopper.gemm_parts`` on the same operands every call, and on ``--fresh`` distinct operand pairs
  in turn (every TMA descriptor encoded anew, as in a task);
* the ``persistent`` and ``cublas`` engines (each call waits for its work), same and fresh;
* one TMA descriptor encoded (its cache cleared first), through the driver and through
  cuda.bindings;
* the stage breakdown of ``host_overhead_probe`` on fresh operands.

    python3 benchmarks/host_path.py [--calls 400] [--fresh 96] [MxNxK ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)
from host_overhead_probe import launch_baseline, stage_breakdown  # noqa: E402

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

import mgemm  # noqa: E402
from mgemm import hopper  # noqa: E402
from mgemm.engines import get  # noqa: E402


def host_us(fn, calls: int, spin: bool = True) -> float:
    """Host µs per call of ``fn`` over ``calls`` calls, the GPU held by a spin when ``spin``."""
    fn(0)
    cp.cuda.Device().synchronize()
    if spin:
        h.gpu_spin(50 * calls + 20000)
    t0 = time.perf_counter()
    for i in range(calls):
        fn(i)
    dt = time.perf_counter() - t0
    cp.cuda.Device().synchronize()
    return 1e6 * dt / calls


def encode_us(path: str) -> tuple[float, bytes]:
    """Median µs of one ``hopper._encode`` (its cache cleared first) through ``path``: "driver"
    (ctypes on libcuda, what mgemm uses where it loads) or "bindings" (cuda.bindings' wrapper),
    and the bytes of one descriptor of a real buffer."""
    saved = list(hopper._ENCODER)
    hopper._encoder()
    if path == "bindings":
        hopper._ENCODER[:] = [None]
    try:
        buf = cp.empty(4096 * 4096, cp.float16)
        hopper._encode.cache_clear()
        raw = hopper._encode(buf.data.ptr, "float16", 4096, 4096, 4096, 64, 128)
        times = []
        for i in range(200):
            hopper._encode.cache_clear()
            t0 = time.perf_counter()
            hopper._encode(buf.data.ptr + 1024 * i, "float16", 4096, 4096, 4096, 64, 128)
            times.append(time.perf_counter() - t0)
        return 1e6 * float(np.median(times)), raw
    finally:
        hopper._ENCODER[:] = saved
        hopper._encode.cache_clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=["1024x1024x1024", "4096x4096x4096", "256x256x65536"])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--fresh", type=int, default=96, help="distinct operand pairs cycled through")
    args = ap.parse_args(argv)
    print(f"# mgemm at {Path(mgemm.__file__).parent}; host µs per call; baseline: "
          + ", ".join(f"{k} {v:.1f}" for k, v in launch_baseline().items()), flush=True)
    if hasattr(hopper, "_ENCODER"):
        (t_drv, raw_drv), (t_bind, raw_bind) = encode_us("driver"), encode_us("bindings")
        print(f"  one TMA descriptor: {t_drv:.1f} µs through the driver (ctypes), {t_bind:.1f} through "
              f"cuda.bindings (median of 200); same bytes: {raw_drv == raw_bind}", flush=True)
    engines = {name: get(name) for name in ("persistent", "cublas")}
    for spec in args.cases:
        m, n, k = map(int, spec.split("x"))
        rng = np.random.default_rng(0)
        pairs = [(cp.asarray(rng.standard_normal((m, k), dtype=np.float32), dtype=cp.float16),
                  cp.asarray(rng.standard_normal((k, n), dtype=np.float32), dtype=cp.float16))
                 for _ in range(min(args.fresh, max(2, (8 << 30) // (2 * (m * k + k * n)))))]
        a0, b0 = pairs[0]
        ref = cp.matmul(a0, b0)
        err = float(cp.abs(hopper.gemm(a0, b0).astype(cp.float32) - ref).max() / cp.abs(ref).max())
        rows = {
            "gemm_parts, same operands": host_us(lambda i: hopper.gemm_parts([a0], [b0]), args.calls),
            f"gemm_parts, {len(pairs)} operand pairs in turn":
                host_us(lambda i: hopper.gemm_parts([pairs[i % len(pairs)][0]], [pairs[i % len(pairs)][1]]),
                        args.calls),
        }
        for name, engine in engines.items():
            rows[f"engine {name}, same operands (waits)"] = host_us(
                lambda i, e=engine: e.gemm([a0], [b0]), args.calls, spin=False)
            rows[f"engine {name}, operand pairs in turn (waits)"] = host_us(
                lambda i, e=engine: e.gemm([pairs[i % len(pairs)][0]], [pairs[i % len(pairs)][1]]),
                args.calls, spin=False)
        print(f"# {spec} float16 (max error vs cupy.matmul {err:.1e}):", flush=True)
        for label, us in rows.items():
            print(f"  {label:>48}: {us:7.1f} µs", flush=True)
        it = iter(range(1 << 30))

        def fresh_call():
            a, b = pairs[next(it) % len(pairs)]
            hopper.gemm_parts([a], [b])
        stages = stage_breakdown(fresh_call, args.calls)
        print("  stages (fresh operands), µs per call: "
              + ", ".join(f"{name} {us:.1f}" for name, us in stages.items()), flush=True)
        pairs.clear()
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
