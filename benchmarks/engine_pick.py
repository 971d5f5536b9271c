"""Which engine should ``engine="auto"`` give a block?  mgemm's ``cublas`` and ``persistent``
engines, and ``auto-gpu`` as it decides today, on the same block task: one product of A (m × k) and
B (k × n) held as ``parts`` K chunks, through the engine interface a Dask task calls (each call
waits for its work, so host time counts, as it does for the task).

Shapes come in classes by which of M, N and K are multiples of 8 (16 bytes of a 16-bit type: the
alignment cuBLAS's fast kernels want of a row-major operand's leading dimension, N for B and C,
K for A); ``--random N`` draws N shapes per class, M, N and K from ``--size`` (lo, hi), plus the
``MxNxK[/parts]`` given.  Each engine's output is checked against float64 on sampled rows, and the
memory pool is poisoned (a NaN buffer of the output's size freed just before) so a tile left
unwritten fails.  Timed in turns, CUDA events, L2 flushed, median of ``--reps``.  ``--tune`` adds
``auto-gpu`` with ``tune=True`` ("auto-tuned": ``mgemm.tune``'s measured engine and config, tuned
on the first call, which the timing leaves out; its cache in a fresh directory unless
``MGEMM_CACHE_DIR`` is set).

    python3 benchmarks/engine_pick.py [--dtype float16] [--random 6 --seed 1 --size 1000,9000]
        [--classes aligned,m,n,k,all] [--reps 10] [--tune] [MxNxK[/parts] ...]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm.engines import auto, get  # noqa: E402

#: class -> which of (m, n, k) are NOT multiples of 8
CLASSES = {"aligned": (), "m": ("m",), "n": ("n",), "k": ("k",), "all": ("m", "n", "k")}


def draw(cls: str, count: int, rng, lo: int, hi: int) -> list[str]:
    odd = CLASSES[cls]
    out = []
    for _ in range(count):
        dims = {}
        for name in "mnk":
            x = int(rng.integers(lo, hi))
            dims[name] = x - x % 8 + (int(rng.integers(1, 8)) if name in odd else 0)
        out.append(f"{dims['m']}x{dims['n']}x{dims['k']}")
    return out


def block(spec: str, dtype: str, rng):
    """(m, n, k, A's K parts, B's K parts on the GPU, the same parts on the host)."""
    import ml_dtypes  # bfloat16 for NumPy, the type CuPy 14 holds

    shape, _, parts = spec.partition("/")
    m, n, k = map(int, shape.split("x"))
    parts = int(parts or 1)
    kind = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(kind)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(kind)
    cuts = [k * i // parts for i in range(parts + 1)]
    host = [(a[:, lo:hi], b[lo:hi]) for lo, hi in zip(cuts, cuts[1:])]
    return m, n, k, [cp.asarray(x) for x, _ in host], [cp.asarray(y) for _, y in host], host


def rel_err(out, host, rows) -> float:
    """Largest error of ``out``'s ``rows`` against the float64 product, over its largest element."""
    ref = sum(cp.asarray(a[rows].astype(np.float64)) @ cp.asarray(b.astype(np.float64)) for a, b in host)
    got = cp.asarray(cp.asnumpy(out[rows]).astype(np.float64))
    return float(cp.abs(got - ref).max() / max(float(cp.abs(ref).max()), 1e-30))


def poison_pool(m: int, n: int, dtype) -> None:
    """Leave an (m, n) buffer of NaN bits in CuPy's pool, where the next output of that size comes
    from, so an element an engine does not write reads as NaN."""
    buf = cp.empty((m, n), dtype=dtype)
    buf.view(cp.uint16).fill(0x7FC0 if buf.dtype.name == "bfloat16" else 0x7E00)
    del buf


def profile(spec: str, dtype: str, rng, calls: int) -> None:
    """cProfile of ``calls`` persistent-engine calls on ``spec`` (the top 25 by own time, then by
    cumulative time), and the µs per call under the profiler (each call waits for its GPU work)."""
    import cProfile
    import pstats
    import time

    _, _, _, a_parts, b_parts, _ = block(spec, dtype, rng)
    engine = get("persistent")
    engine.gemm(a_parts, b_parts)
    cp.cuda.Device().synchronize()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(calls):
        engine.gemm(a_parts, b_parts)
    prof.disable()
    per_call = (time.perf_counter() - t0) / calls
    print(f"# profile of {calls} persistent-engine calls on {spec}: {per_call * 1e6:.0f} us a call "
          f"(host and GPU, profiled)", flush=True)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="MxNxK[/parts]")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--random", type=int, default=0, help="shapes drawn per class")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size", default="1000,9000", help="lo,hi of M, N and K drawn")
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--shield-us", type=float, default=0.0,
                    help="a GPU spin between the L2 flush and the start event (harness.timed_interleaved): "
                         "0 counts the host time the GPU waits for, as a task's time does")
    ap.add_argument("--tune", action="store_true", help="also auto-gpu with tune=True ('auto-tuned')")
    ap.add_argument("--profile", type=int, default=0,
                    help="then cProfile this many persistent-engine calls on the first shape")
    args = ap.parse_args(argv)
    if args.tune and not os.environ.get("MGEMM_CACHE_DIR"):
        os.environ["MGEMM_CACHE_DIR"] = tempfile.mkdtemp(prefix="mgemm-tune-")
    lo, hi = map(int, args.size.split(","))
    draw_rng = np.random.default_rng(args.seed)
    cases = [(spec, "given") for spec in args.cases]
    for cls in filter(None, args.classes.split(",")):
        cases += [(spec, cls) for spec in draw(cls, args.random, draw_rng, lo, hi)]
    rng = np.random.default_rng(0)
    engines = {name: get(name) for name in ("cublas", "persistent", "auto-gpu")}
    if args.tune:
        engines["auto-tuned"] = get("auto-gpu")
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {args.dtype}; engine calls, "
          f"{'GPU time' if args.shield_us else 'host time counted'}, median of {args.reps}, in turns",
          flush=True)
    ratios: dict[str, list[float]] = {}
    tuned_ratios: list[float] = []  # auto-gpu's time over auto-tuned's
    for spec, cls in cases:
        m, n, k, a_parts, b_parts, host = block(spec, args.dtype, rng)
        rows = np.arange(0, m, max(1, m // 64))
        failed = []
        for name, engine in engines.items():
            poison_pool(m, n, a_parts[0].dtype)
            err = rel_err(engine.gemm(a_parts, b_parts, tune=name == "auto-tuned"), host, rows)
            if not err <= 1e-2:
                print(f"  CHECK FAILED {spec} {name}: {err:.2e}", flush=True)
                failed.append(name)
        fns = {name: (lambda e=engine, t=name == "auto-tuned": e.gemm(a_parts, b_parts, tune=t))
               for name, engine in engines.items()}
        ms = h.timed_interleaved(fns, args.reps, shield_us=args.shield_us)
        flops = 2.0 * m * n * k
        ratio = ms["cublas"] / ms["persistent"]
        ratios.setdefault(cls, []).append(ratio)
        if args.tune:
            tuned_ratios.append(ms["auto-gpu"] / ms["auto-tuned"])
        picks = auto.choose(a_parts, b_parts)
        tuned = (f" auto-tuned({auto.tuned(a_parts, b_parts, None, picks)}) "
                 f"{flops / ms['auto-tuned'] / 1e9:6.1f}" if args.tune else "")
        print(f"  {cls:>7} {spec:>20} cublas {flops / ms['cublas'] / 1e9:6.1f} persistent "
              f"{flops / ms['persistent'] / 1e9:6.1f} auto({picks}) {flops / ms['auto-gpu'] / 1e9:6.1f}"
              f"{tuned} TFLOP/s | persistent x cublas {ratio:.2f}"
              f"{' FAILED ' + ','.join(failed) if failed else ''}", flush=True)
    if args.profile and cases:
        profile(cases[0][0], args.dtype, rng, args.profile)
    if tuned_ratios:
        geo = math.exp(sum(map(math.log, tuned_ratios)) / len(tuned_ratios))
        print(f"# auto-tuned x auto geomean {geo:.3f} over {len(tuned_ratios)}, from "
              f"{min(tuned_ratios):.2f} to {max(tuned_ratios):.2f}", flush=True)
    for cls, rs in ratios.items():
        geo = math.exp(sum(map(math.log, rs)) / len(rs))
        print(f"# {cls}: persistent x cublas geomean {geo:.2f} over {len(rs)}, from {min(rs):.2f} "
              f"to {max(rs):.2f}, ahead on {sum(r > 1 for r in rs)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
