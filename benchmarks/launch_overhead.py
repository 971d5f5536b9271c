"""Host time per call of mgemm's kernel launchers beside cuBLAS, on a product small enough that
the GPU is never the limit: the Python cost a small or skewed product pays on every call.

    python3 benchmarks/launch_overhead.py [--calls 300] [--profile] [--steps] [--shape MxNxK]

``--profile`` also prints where the Python time of each mgemm launcher goes (cProfile, top 30);
``--steps`` times the stages of one ``kernels.gemm`` launch on their own (argument checks, operand
layout, kernel lookup, scratch, argument tuple, the launch itself through ``RawKernel`` and
through its ``Function``).  ``--shape MxNxK`` times ``cupy.matmul`` and ``hopper.gemm`` (as a caller
gets it) on row-major float16 operands of that shape instead: the host path of a product whose B
``hopper.gemm`` copies K-major or runs transposed (``--profile`` for where it goes).
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
    m, n, k = (map(int, sys.argv[sys.argv.index("--shape") + 1].split("x")) if "--shape" in sys.argv
               else (256, 256, 256))
    a = cp.random.standard_normal((m, k), dtype=cp.float32).astype(cp.float16)
    b = cp.random.standard_normal((k, n), dtype=cp.float32).astype(cp.float16)
    out = cp.empty((m, n), dtype=cp.float16)
    rows = {"cupy.matmul (cuBLAS)": lambda: cp.matmul(a, b, out=out)}
    if "--shape" in sys.argv:
        rows["mgemm.hopper.gemm"] = lambda: hopper.gemm(a, b, out=out)
        calls = min(calls, 100)  # larger products: keep the launch queue from filling
    else:
        rows.update(portable_rows(a, b, out))
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
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    if "--steps" in sys.argv and "--shape" not in sys.argv:
        steps(a, b, out, calls)


def portable_rows(a, b, out) -> dict:
    """The 256³ rows: the portable kernel on its heuristic's config and on each policy, the
    Hopper kernel on its heuristic's and on stream-K."""
    rows = {"mgemm.kernels.gemm (portable)": lambda: kernels.gemm(a, b, out=out)}
    for policy in ("static", "streamk", "dynamic"):
        cfg = kernels.KernelConfig.default("float16", policy=policy)
        rows[f"mgemm.kernels.gemm {policy}"] = lambda cfg=cfg: kernels.gemm(a, b, out=out, config=cfg)
    if hopper.supported():
        rows["mgemm.hopper.gemm"] = lambda: hopper.gemm(a, b, out=out)
        cfg = hopper.HopperConfig(input="float16", policy="streamk")
        rows["mgemm.hopper.gemm streamk"] = lambda: hopper.gemm(a, b, out=out, config=cfg)
    return rows


def steps(a, b, out, calls: int) -> None:
    """Microseconds per stage of one portable launch (static policy, float16 256³), each stage
    repeated on its own with the others' results held fixed."""
    cfg = kernels.KernelConfig.default("float16", policy="static")

    def prep():
        return kernels.prepare_call(cp, a, b, None, out, beta=0.0, config=cfg, allow_tf32=False,
                                    sms=None, as_dtype=None, out_dtype=None,
                                    input_kind=kernels.input_kind, choose=kernels._choose_cached,
                                    outputs=kernels.OUTPUTS, writer="the persistent kernel")
    call = prep()

    def operands():
        return kernels._operand(cp, a, 1, cfg.chunk), kernels._operand(cp, b, 0, cfg.chunk)
    (a_arr, a_k, lda), (b_arr, b_k, ldb) = operands()

    def lookup():
        c = kernels.specialize(cfg, a_k_major=a_k, b_k_major=b_k, output="float16", record=False)
        kern = kernels.get_kernel(c, call.dev)
        lp = kernels.plan_launch(c, 256, 256, 256, call.sms * max(1, kernels.occupancy(kern, c)))
        return c, kern, lp
    c, kern, lp = lookup()

    def scratch():
        return kernels.launch_scratch(cp, call.dev, lp.grid, False, 1, cp.float32, 0)
    sync, ws, rec = scratch()

    def args():
        return (a_arr, b_arr, out, out, kernels._i32(256), kernels._i32(256), kernels._i32(256),
                kernels._i64(lda), kernels._i64(ldb), kernels._i64(256), kernels._i64(1),
                kernels._i64(256), kernels._i64(1), kernels._f64(1.0), kernels._f64(0.0), sync, ws,
                kernels._i32(0), rec)
    built = args()
    fn = kern.kernel  # the cupy.cuda.function.Function under the RawKernel

    def launch_raw():
        kern((lp.grid,), (c.threads,), built, shared_mem=c.smem_bytes)

    def launch_function():
        fn((lp.grid, 1, 1), (c.threads, 1, 1), built, shared_mem=c.smem_bytes)

    def stream():
        return cp.cuda.get_current_stream()

    for name, f in (("prepare_call", prep), ("_operand x2", operands), ("specialize+get_kernel+plan", lookup),
                    ("launch_scratch", scratch), ("argument tuple", args), ("get_current_stream", stream),
                    ("RawKernel launch", launch_raw), ("Function launch", launch_function),
                    ("whole kernels.gemm", lambda: kernels.gemm(a, b, out=out, config=cfg))):
        print(f"  step {name:>28}: {per_call_us(f, calls):7.2f} µs", flush=True)


if __name__ == "__main__":
    main()
