"""One block task's GEMM on one GPU, the ways it could be done: how much does accumulating K parts
cost against one call?  An (m × n) block of A (m × k) · B (k × n), with A and B held as ``--parts``
K chunks (as a block over 8192² chunks of a 32768³ product is), timed with CUDA events, median of
``--repeat``, the ways in turns ``--rounds`` times (the median of the rounds):

    engine      mgemm's cublas engine on the K parts (what a block task runs)
    concat      concatenate the panels, then the engine on one part (its own type out)
    one-call    the engine on panels already whole (no copy: the ideal for this block)
    matmul      cupy.matmul on the whole panels (the anchor's call)
    persistent  mgemm's persistent engine on the K parts (on an H200: the Hopper kernel, all
                parts in one launch, ``hopper.gemm_parts``)
    hopper-each the Hopper kernel once per K part, adding into the output (beta = 1)
    hopper-one  the Hopper kernel on the whole panels

    python3 benchmarks/block_gemm_probe.py [--m 8192 --n 8192 --k 32768 --parts 4 --dtype float16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402

from benchmarks.kernels import add_block_args  # noqa: E402
from benchmarks.mma_peak import seconds_in_turns  # noqa: E402
from mgemm import hopper  # noqa: E402
from mgemm.engines.cublas import CublasEngine  # noqa: E402
from mgemm.engines.persistent import PersistentEngine  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_block_args(ap)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="the ways timed in turns, this many times")
    args = ap.parse_args(argv)
    rng = cp.random.default_rng(0)
    kp = args.k // args.parts
    a_parts = [(rng.random((args.m, kp), dtype=cp.float32) - 0.5).astype(args.dtype) for _ in range(args.parts)]
    b_parts = [(rng.random((kp, args.n), dtype=cp.float32) - 0.5).astype(args.dtype) for _ in range(args.parts)]
    a_whole, b_whole = cp.concatenate(a_parts, 1), cp.concatenate(b_parts, 0)
    engine = CublasEngine()
    ref = engine.gemm([a_whole], [b_whole])
    got = engine.gemm(a_parts, b_parts)
    err = float(cp.abs(got.astype(cp.float32) - ref.astype(cp.float32)).max()
                / cp.abs(ref.astype(cp.float32)).max())
    flops = 2.0 * args.m * args.n * args.k
    ways = {
        "engine": lambda: engine.gemm(a_parts, b_parts),
        "concat": lambda: engine.gemm([cp.concatenate(a_parts, 1)], [cp.concatenate(b_parts, 0)]),
        "one-call": lambda: engine.gemm([a_whole], [b_whole]),
        "matmul": lambda: cp.matmul(a_whole, b_whole),
    }
    if hopper.supported() and args.dtype in ("float16", "bfloat16"):
        persistent = PersistentEngine()
        out = cp.empty((args.m, args.n), dtype=args.dtype)

        def each():
            for idx, (a, b) in enumerate(zip(a_parts, b_parts)):
                hopper.gemm(a, b, out, beta=0.0 if idx == 0 else 1.0, out=out)
        mine = persistent.gemm(a_parts, b_parts)
        err_p = float(cp.abs(mine.astype(cp.float32) - ref.astype(cp.float32)).max()
                      / cp.abs(ref.astype(cp.float32)).max())
        print(f"  persistent engine vs cuBLAS on whole panels: max rel diff {err_p:.1e}")
        ways.update({"persistent": lambda: persistent.gemm(a_parts, b_parts),
                     "hopper-each": each,
                     "hopper-one": lambda: hopper.gemm(a_whole, b_whole, out=out)})
    print(f"{args.dtype} block {args.m}×{args.n}, K {args.k} in {args.parts} parts "
          f"(parts vs whole: max rel diff {err:.1e})")
    times = seconds_in_turns(ways, args.rounds, args.repeat)
    for name, ts in times.items():
        s = statistics.median(ts)
        print(f"  {name:<11} {s * 1e3:7.3f} ms  {flops / s / 1e12:7.1f} TFLOP/s  "
              f"(rounds: {' '.join(f'{t * 1e3:.3f}' for t in ts)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
