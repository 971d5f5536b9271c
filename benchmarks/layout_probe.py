"""Does a long-K product run slower on the Hopper kernel because of how it reads A?

With A row-major (K-major) and K = 65536, each 64 x 128 TMA box of A is 128 pieces of 128 bytes,
128 KB apart, and Nsight Compute saw mgemm's 256x256x65536 read DRAM at half cuBLAS's rate
(RESULTS.md, eleventh session).  This times, in turns with cuBLAS on the same values: the
heuristic's config with A row-major (as the benchmarks pass it), the same with A column-major
(MN-major: each box 64 rows of 128 contiguous bytes, the next K rows 512 bytes on), and stream-K
on 128 CTAs (4 tiles x 32 contributors: no CTA straddles two tiles) and with 128x64 tiles
(8 tiles x 16).  GPU time (the harness's shielded events), median of --reps.

    python3 benchmarks/layout_probe.py [--reps 20] [MxNxK:dtype ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=["256x256x65536:float16", "256x256x65536:bfloat16",
                                                "1024x2112x8192:float16", "128x128x131072:float16"])
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    sms = hopper.device_sms()
    for spec in args.cases:
        pc = h.probe_case(spec, rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        cfg, a, b = pc.config, pc.a, pc.b
        a_col = cp.asfortranarray(a)
        n64 = hopper.choose_config(m, n, k, pc.dtype, sms, tile_n=128).replace(tile_n=64, stages=8)
        n64 = hopper.fit_policy(n64, m, n, k, sms)
        variants = {  # name: (a, config, sms)
            "A row-major": (a, cfg, None),
            "A col-major": (a_col, cfg, None),
            "A row, 128 CTAs": (a, cfg, 128),
            "A col, 128 CTAs": (a_col, cfg, 128),
            "128x64, 128 CTAs": (a, n64, 128),
        }
        outs, fns = {}, {}
        for name, (aa, c, s) in variants.items():
            out = cp.full((m, n), np.nan, dtype=pc.storage) if pc.dtype != "bfloat16" else \
                cp.full((m, n), 0x7FC0, dtype=pc.storage)
            outs[name] = out
            fns[name] = (lambda aa=aa, c=c, s=s, out=out:
                         hopper.gemm(aa, b, out=out, config=c, as_dtype=pc.as_dtype, sms=s))
        for tag, aa in (("cuBLAS", a), ("cuBLAS A col", a_col)):
            out = cp.empty((m, n), dtype=pc.storage)
            outs[tag] = out
            fns[tag] = h.cublas_fn(aa, b, pc.dtype, out)
        for fn in fns.values():
            fn()
        cp.cuda.Device().synchronize()
        errs = {name: h.rel_err_sampled(out, a, b, pc.dtype, rng) for name, out in outs.items()}
        ms = h.timed_interleaved(fns, args.reps)
        flops = 2.0 * m * n * k
        print(f"# {spec}: heuristic {cfg}; 128x64: {n64}", flush=True)
        for name, t in ms.items():
            print(f"  {name:>18}: {t * 1e3:8.1f} us {flops / (t * 1e-3) / 1e12:7.1f} TFLOP/s "
                  f"x cuBLAS {ms['cuBLAS'] / t:.2f}  err {errs[name]:.1e} (bound {h.BOUNDS[pc.dtype]:.0e})",
                  flush=True)


if __name__ == "__main__":
    main()
