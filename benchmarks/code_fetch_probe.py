"""What the Hopper kernel's first instructions cost after an L2 flush: each product timed cold
(the benchmarks' way: a 256 MB flush evicts the kernel's code from L2 with the data) and warm (the
same flush, then a small product on other operands through the same kernel, which brings its code
back into L2 and leaves the timed product's data out), in turns with cuBLAS (cold).  The gap is
the time the kernel waits on instruction fetches from memory; the kernel's code is ~128 KB of SASS
where a cuBLAS kernel's is a fraction of that.  GPU time (a spin between the flush and the start
event hides the host path), CUDA events, median of --reps; outputs checked against float64.

    python3 benchmarks/code_fetch_probe.py [--reps 10] [--dtype float16] [MxNxK ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper  # noqa: E402

CASES = ["128x128x64", "128x128x4096", "256x256x65536", "352x1592x6560", "1024x2112x8192",
         "8192x8192x256"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=CASES)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {args.dtype}; GPU time, "
          f"median of {args.reps}, in turns", flush=True)
    for spec in args.cases:
        pc = h.probe_case(f"{spec}:{args.dtype}", rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        # the warm-up product: other operands of the same layouts (A's rows of K, B's of N), small
        # enough to leave the timed product's data out of L2, split like it where it splits K
        mw, kw = min(m, 256), min(k, 2048)
        a_w, b_w = h.operands(h.Case("warm", mw, n, kw), args.dtype, rng)
        out_w = cp.empty((mw, n), dtype=pc.a.dtype)
        outs = {name: pc.poisoned() for name in ("cuBLAS", "cold", "warm")}
        fns = {"cuBLAS": h.cublas_fn(pc.a, pc.b, args.dtype, outs["cuBLAS"])}
        for name in ("cold", "warm"):
            fns[name] = (lambda out=outs[name]:
                         hopper.gemm(pc.a, pc.b, out=out, config=pc.config, as_dtype=pc.as_dtype))
        pc.run_checked(fns, outs)

        def warm_up():
            hopper.gemm(a_w, b_w, out=out_w, config=pc.config, as_dtype=pc.as_dtype)
        warm_up()
        times = {name: [] for name in fns}
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        for _ in range(args.reps):
            for name, fn in fns.items():
                h.l2_flush()
                if name == "warm":
                    warm_up()
                h.gpu_spin(h.SHIELD_US)
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                times[name].append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
        us = {name: statistics.median(t) for name, t in times.items()}
        print(f"  {spec:>16} cuBLAS {us['cuBLAS']:8.2f} us | cold {us['cold']:8.2f} us (x cuBLAS "
              f"{us['cuBLAS'] / us['cold']:.2f}) | warm {us['warm']:8.2f} us (x cuBLAS "
              f"{us['cuBLAS'] / us['warm']:.2f}) | code fetch {us['cold'] - us['warm']:6.2f} us | {pc.config}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
