"""The Hopper kernel's slow runs on short products: host time the events count, or the SM clock?

The harness records the start event right after the L2 flush is queued.  When a function's host
path (checks, descriptors, scratch, launch) outlasts the flush on the GPU, the GPU waits for the
launch and the events count that wait.  On products of 30–100 µs this would read as a slower
kernel, by a host-dependent amount, while ``cupy.matmul``'s shorter host path stays hidden.

Each trial allocates fresh operands and output (earlier trials' kept, so addresses differ) and
times cuBLAS and the heuristic's config in turns, twice: as the harness does ("exposed") and with
a ``gpu_spin`` between the flush and the start event ("shielded": GPU time only).  It prints both
ratios to cuBLAS, each function's host µs per call, the SM clock right after each timed call
(a clock that sags between trials would slow the kernel's SM-bound parts more than cuBLAS's),
and for the Hopper path where the host time goes (module functions of ``mgemm.hopper`` wrapped
with timers, in a separate loop).

    python3 benchmarks/host_overhead_probe.py [--trials 4] [--reps 10] [--spin-us 300] [MxNxK:dtype ...]
    python3 benchmarks/host_overhead_probe.py --profile 500 [MxNxK:dtype ...]  # cProfile of the host path
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper  # noqa: E402


DEFAULT_CASES = ["8192x8192x256:float16", "32x8192x8192:float16", "32x8192x8192:bfloat16",
                 "256x256x65536:float16", "64x8192x8192:float16", "1024x2112x8192:float16",
                 "896x2432x8192:float16", "1408x1536x16384:float16", "4096x4096x4096:float16"]

#: mgemm.hopper's module-level helpers that gemm_parts calls, timed one by one.
STAGES = ("prepare_call", "_operand", "specialize", "get_kernel", "_operand_desc", "_slots",
          "plan_launch", "_launch_setup", "launch_scratch", "epoch_sync", "_pack", "_output_desc",
          "_launch")


class _TimedLaunch:
    """A kernel whose calls (launches) add their host seconds to ``spent["launch"]``."""

    def __init__(self, kernel, spent):
        self._timed_kernel, self._spent = kernel, spent

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self._timed_kernel(*args, **kwargs)
        finally:
            self._spent["launch"] += time.perf_counter() - t0

    def __getattr__(self, name):  # everything else (e.g. ``.kernel``) from the kernel itself
        return getattr(self._timed_kernel, name)


def launch_baseline(calls: int = 500) -> dict[str, float]:
    """Host µs per launch of the one-thread spin kernel (two scalar arguments) through CuPy, and
    per ``cupy.empty`` of a small array: what any launch and allocation cost on this host."""
    h.gpu_spin(1.0)
    out = {}
    h.gpu_spin(20000)
    t0 = time.perf_counter()
    for _ in range(calls):
        h.gpu_spin(0.0)
    out["spin launch"] = 1e6 * (time.perf_counter() - t0) / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        cp.empty(16, dtype=cp.float32)
    out["cupy.empty"] = 1e6 * (time.perf_counter() - t0) / calls
    cp.cuda.Device().synchronize()
    return out


def stage_breakdown(fn, calls: int) -> dict[str, float]:
    """Host µs per call spent in each of STAGES while ``fn`` runs ``calls`` times (the GPU held by
    a spin, so no launch waits), and the whole call's."""
    spent = {name: 0.0 for name in STAGES if hasattr(hopper, name)}
    originals = {name: getattr(hopper, name) for name in STAGES if hasattr(hopper, name)}

    def timer(name, f):
        @functools.wraps(f)
        def wrapped(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0
        return wrapped

    for name, f in originals.items():
        setattr(hopper, name, timer(name, f))
    if "_launch" not in originals:  # an older tree: the kernel's launch (CuPy's RawKernel call)
        spent["launch"] = 0.0
        timed_get_kernel = hopper.get_kernel

        def get_kernel(*args, **kwargs):
            return _TimedLaunch(timed_get_kernel(*args, **kwargs), spent)
        hopper.get_kernel = get_kernel
    try:
        h.gpu_spin(20000)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        total = time.perf_counter() - t0
    finally:
        for name, f in originals.items():
            setattr(hopper, name, f)
    cp.cuda.Device().synchronize()
    out = {name: 1e6 * s / calls for name, s in spent.items()}
    out["whole call"] = 1e6 * total / calls
    return out


def profile_host_path(spec: str, calls: int, rng) -> None:
    """cProfile of ``calls`` Hopper calls on one case (the GPU held by spins, so no launch waits):
    the functions by their own time, then by cumulative time."""
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415
    pc = h.probe_case(spec, rng)
    out = cp.empty((pc.case.m, pc.case.n), dtype=pc.storage)

    def fn():
        return hopper.gemm(pc.a, pc.b, out=out, config=pc.config, as_dtype=pc.as_dtype)
    for _ in range(3):
        fn()
    cp.cuda.Device().synchronize()
    prof = cProfile.Profile()
    for start in range(0, calls, 100):
        h.gpu_spin(20000)
        prof.enable()
        for _ in range(min(100, calls - start)):
            fn()
        prof.disable()
        cp.cuda.Device().synchronize()
    print(f"# cProfile of {calls} calls, {spec}: {pc.config}", flush=True)
    stats = pstats.Stats(prof, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(30)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=DEFAULT_CASES)
    p.add_argument("--trials", type=int, default=4)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--spin-us", type=float, default=300.0)
    p.add_argument("--profile", type=int, default=0, metavar="CALLS",
                   help="instead: cProfile this many calls on the first case")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    print("# host us per call, baseline: " + ", ".join(f"{k} {v:.1f}" for k, v in launch_baseline().items()),
          flush=True)
    if args.profile:
        profile_host_path(args.cases[0], args.profile, rng)
        return
    summary = []
    for spec in args.cases:
        pc = h.probe_case(spec, rng)
        dtype, a0, b0, storage, as_dtype, cfg = pc.dtype, pc.a, pc.b, pc.storage, pc.as_dtype, pc.config
        shape, m, n = pc.case.name, pc.case.m, pc.case.n
        print(f"# {shape} {dtype}: {cfg}", flush=True)
        held = []
        for trial in range(args.trials):
            a, b = a0.copy(), b0.copy()
            outs = [cp.full((m, n), 0xFFFF if dtype == "bfloat16" else np.nan, dtype=storage) for _ in range(2)]
            fns = {"cuBLAS": h.cublas_fn(a, b, dtype, outs[0]),
                   "mgemm": lambda a=a, b=b, o=outs[1]: hopper.gemm(a, b, out=o, config=cfg, as_dtype=as_dtype)}
            mhz_e: dict[str, list[float]] = {}
            mhz_s: dict[str, list[float]] = {}
            exposed = h.timed_interleaved(fns, args.reps, shield_us=0, mhz=mhz_e)
            host: dict[str, list[float]] = {}
            shielded = h.timed_interleaved(fns, args.reps, shield_us=args.spin_us, host=host, mhz=mhz_s)
            clock = {f"{mode} {name}": statistics.median(v) for mode, d in (("exposed", mhz_e), ("shielded", mhz_s))
                     for name, v in d.items()}
            err = h.rel_err_sampled(outs[1], a, b, dtype, rng)
            hus = {name: 1e6 * statistics.median(v) for name, v in host.items()}
            row = (shape, dtype, exposed["cuBLAS"] / exposed["mgemm"], shielded["cuBLAS"] / shielded["mgemm"])
            summary.append(row)
            print(f"  trial {trial}: exposed cuBLAS {exposed['cuBLAS'] * 1e3:.1f} us mgemm {exposed['mgemm'] * 1e3:.1f} us "
                  f"(x{row[2]:.2f}); shielded cuBLAS {shielded['cuBLAS'] * 1e3:.1f} us mgemm "
                  f"{shielded['mgemm'] * 1e3:.1f} us (x{row[3]:.2f}); host us/call cuBLAS {hus['cuBLAS']:.0f} "
                  f"mgemm {hus['mgemm']:.0f}; SM MHz after each " + ", ".join(f"{k} {v:.0f}" for k, v in clock.items())
                  + f"; err {err:.1e} (bound {h.BOUNDS[dtype]:.0e}); "
                  f"a {a.data.ptr:#x} b {b.data.ptr:#x} out {outs[1].data.ptr:#x}", flush=True)
            held.append((a, b, outs))
        parts = stage_breakdown(fns["mgemm"], 200)
        print("  host us per Hopper call: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()), flush=True)
        del held
        cp.get_default_memory_pool().free_all_blocks()
    print("# summary: shape dtype, x cuBLAS exposed / shielded per trial")
    by = {}
    for shape, dtype, e, s in summary:
        by.setdefault((shape, dtype), []).append((e, s))
    for (shape, dtype), v in by.items():
        print(f"  {shape} {dtype}: exposed {' '.join(f'{e:.2f}' for e, _ in v)}; "
              f"shielded {' '.join(f'{s:.2f}' for _, s in v)}")


if __name__ == "__main__":
    main()
