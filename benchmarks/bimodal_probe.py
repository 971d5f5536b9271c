"""Does the Hopper kernel's speed on one shape depend on where its operands lie in memory?

Across device calls the same config on the same shape measured up to 2x apart (32x8192x8192
bfloat16: 0.38 and 0.92 of cuBLAS; 8192x8192x256 float16: 0.46 and 0.87), while cuBLAS beside it
held steady.  Here each trial allocates fresh operands and output (same values) and times, in turns,
cuBLAS, the heuristic's config with B row-major (MN-major, read in place) and with B column-major
(K-major), printing the ratios beside the buffers' addresses.

    python3 benchmarks/bimodal_probe.py [--trials 8] [--reps 10] [--keep a|b|out] [MxNxK:dtype ...]
    python3 benchmarks/bimodal_probe.py --vary out [--trials 8] ...

The answer (RESULTS.md, twelfth and thirteenth sessions): no.  The slow runs were the GPU waiting
for the host's launch path, which the events counted; ``benchmarks/host_overhead_probe.py`` shows
it, and the harness now times GPU time by default (a spin between the flush and the start event),
as this probe does too.  Pass through ``shield_us=0`` in ``timed_interleaved`` for the old timing.

``--keep`` reuses that buffer in every trial (the first trial's), so only the others move.
``--vary a|b|out`` allocates that buffer ``--trials`` times and keeps the others: every copy is
timed in one set of turns (cuBLAS, then the heuristic's config and the same with the paired-store
epilogue into each copy), so only that buffer's placement differs between the rows.
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
    p.add_argument("cases", nargs="*", default=["32x8192x8192:bfloat16", "32x8192x8192:float16",
                                                 "8192x8192x256:float16"])
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--keep", choices=("a", "b", "out"), action="append", default=[],
                   help="reuse this buffer in every trial (repeatable)")
    p.add_argument("--vary", choices=("a", "b", "out"), help="time copies of this buffer side by side")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    for spec in args.cases:
        pc = h.probe_case(spec, rng)
        if args.vary:
            vary(args, pc, rng)
            continue
        dtype, a0, b0, storage, as_dtype, cfg = pc.dtype, pc.a, pc.b, pc.storage, pc.as_dtype, pc.config
        shape, m, n = pc.case.name, pc.case.m, pc.case.n
        print(f"# {shape} {dtype}: {cfg}; keep {args.keep or 'nothing'}", flush=True)
        keep = []  # hold earlier trials' buffers, so each trial gets new addresses
        first = None
        for trial in range(args.trials):
            a, b = a0.copy(), b0.copy()
            bt = cp.ascontiguousarray(b.T)
            outs = [cp.empty((m, n), dtype=storage) for _ in range(3)]
            if first is not None:  # --keep: the first trial's buffers
                a = first[0] if "a" in args.keep else a
                b, bt = (first[1], first[2]) if "b" in args.keep else (b, bt)
                outs = first[3] if "out" in args.keep else outs
            first = first or (a, b, bt, outs)
            fns = {"cuBLAS": h.cublas_fn(a, b, dtype, outs[0]),
                   "B row": lambda: hopper.gemm(a, b, out=outs[1], config=cfg, as_dtype=as_dtype),
                   "B col": lambda: hopper.gemm(a, bt.T, out=outs[2], config=cfg, as_dtype=as_dtype)}
            ms = h.timed_interleaved(fns, args.reps)
            err = h.rel_err_sampled(outs[1], a, b, dtype, rng)
            print(f"  trial {trial}: cuBLAS {ms['cuBLAS']:.4f} ms; x cuBLAS: B row {ms['cuBLAS'] / ms['B row']:.2f}, "
                  f"B col {ms['cuBLAS'] / ms['B col']:.2f}; err {err:.1e}; a {a.data.ptr:#x} b {b.data.ptr:#x} "
                  f"bt {bt.data.ptr:#x} out {outs[1].data.ptr:#x}", flush=True)
            keep.append((a, b, bt, outs))
        del keep
        cp.get_default_memory_pool().free_all_blocks()


def vary(args, pc, rng):
    m, n, dtype, storage, as_dtype, cfg = pc.case.m, pc.case.n, pc.dtype, pc.storage, pc.as_dtype, pc.config
    print(f"# {pc.case.name} {dtype}: {cfg}; {args.trials} copies of {args.vary}", flush=True)
    copies = [{"a": pc.a.copy(), "b": pc.b.copy(), "out": cp.empty((m, n), dtype=storage)}
              for _ in range(args.trials)]
    pair = cfg.replace(epilogue="pair")
    fns = {}
    for i, c in enumerate(copies):
        bufs = {key: (c if key == args.vary else copies[0])[key] for key in ("a", "b", "out")}
        fns[f"cuBLAS {i}"] = h.cublas_fn(bufs["a"], bufs["b"], dtype, cp.empty((m, n), dtype=storage))
        for name, conf in (("staged", cfg), ("pair", pair)):
            fns[f"{name} {i}"] = (lambda bufs=bufs, conf=conf: hopper.gemm(
                bufs["a"], bufs["b"], out=bufs["out"], config=conf, as_dtype=as_dtype))
    ms = h.timed_interleaved(fns, args.reps)
    err = h.rel_err_sampled(copies[0]["out"], copies[0]["a"], copies[0]["b"], dtype, rng)
    for i, c in enumerate(copies):
        print(f"  copy {i}: cuBLAS {ms[f'cuBLAS {i}']:.4f} ms; x cuBLAS: staged "
              f"{ms[f'cuBLAS {i}'] / ms[f'staged {i}']:.2f}, pair {ms[f'cuBLAS {i}'] / ms[f'pair {i}']:.2f}; "
              f"{args.vary} {c[args.vary].data.ptr:#x}", flush=True)
    print(f"  err (copy 0's output, last written by the paired epilogue) {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
