"""Float32 products on bfloat16 tensor cores (``emulate_fp32``) on one GPU, beside exact float32:
speed and error of one block task's GEMM.

A block (m × n) of A (m × k) · B (k × n), A and B held as ``--parts`` K chunks of float32 random
values in [-1, 1) (as a block over 8192² chunks of a 32768³ product is), the ways timed in turns
``--rounds`` times with CUDA events (median of ``--repeat`` per round, then the median of the
rounds):

    sgemm        mgemm's cublas engine on the K parts: exact float32 (cuBLAS SGEMM, beta = 1)
    matmul       cupy.matmul on the whole panels (the one-GPU anchor's call)
    x6-pP        emulate.gemm, bf16x6, on the Hopper kernel (8 K parts per launch) with promoted
                 windows of P k-iterations (``HopperConfig.promote``; p0: none); suffixes -nN,
                 -sS and an epilogue name (-pair) set the tile width, stages and epilogue
    x9-pP        the same, bf16x9
    x6-cublas    the bf16x6 pieces through cuBLAS (one cublasGemmEx per part into a float32
                 accumulator: the cublas engine on them, which emulation does not use)
    split        the split of all the block's parts alone (kernels/split_bf16.cu)

Each way's result is checked against a float64 reference on ``--sample`` rows and as many columns
(the relative Frobenius error over those), so the errors sit beside the times.

    python3 benchmarks/emulate_probe.py [--m 8192 --n 8192 --k 32768 --parts 4] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.kernels import add_block_args  # noqa: E402
from benchmarks.mma_peak import seconds_in_turns  # noqa: E402
from mgemm import emulate  # noqa: E402
from mgemm.engines import get  # noqa: E402


def sampled_error(out, a_parts, b_parts, rows, cols) -> float:
    """Relative error of ``out`` on the sampled rows and columns, against float64."""
    a64 = [x.astype(cp.float64) for x in a_parts]
    b64 = [x.astype(cp.float64) for x in b_parts]
    ref_r = sum(x[rows] @ y for x, y in zip(a64, b64))
    ref_c = sum(x @ y[:, cols] for x, y in zip(a64, b64))
    got_r, got_c = out[rows].astype(cp.float64), out[:, cols].astype(cp.float64)
    num = cp.linalg.norm(got_r - ref_r) ** 2 + cp.linalg.norm(got_c - ref_c) ** 2
    den = cp.linalg.norm(ref_r) ** 2 + cp.linalg.norm(ref_c) ** 2
    return float(cp.sqrt(num / den))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_block_args(ap)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample", type=int, default=64)
    ap.add_argument("--ways", default="sgemm,matmul,x6-p0,x6-p1,x6-p2,x6-p4,x9-p1,x6-cublas,split")
    ap.add_argument("--json", default=None, help="append one JSON row per way to this file")
    args = ap.parse_args(argv)
    rng = cp.random.default_rng(0)
    kp = args.k // args.parts
    a_parts = [rng.random((args.m, kp), dtype=cp.float32) * 2 - 1 for _ in range(args.parts)]
    b_parts = [rng.random((kp, args.n), dtype=cp.float32) * 2 - 1 for _ in range(args.parts)]
    pick = np.random.default_rng(1)
    rows = cp.asarray(pick.choice(args.m, args.sample, replace=False))
    cols = cp.asarray(pick.choice(args.n, args.sample, replace=False))
    cublas, auto = get("cublas"), get("auto-gpu")
    whole = None

    def matmul():
        return cp.matmul(*whole)

    def split_all():
        flag = cp.zeros((), dtype=cp.int32)
        return [(emulate.split_cupy(a, flag), emulate.split_cupy(b, flag))
                for a, b in zip(a_parts, b_parts)]

    def pieces_through_cublas():
        split = split_all()
        order = emulate.terms("bf16x6")
        return cublas.gemm([pa[i] for i, j in order for pa, pb in split],
                           [pb[j] for i, j in order for pa, pb in split], out_dtype="float32")

    def way(name):
        if name.startswith(("x6-p", "x9-p")):  # x6-p8[-n192][-s4][-pair|-staged|-tma]
            scheme, promote, *rest = name.split("-")
            changes = {}
            for token in rest:
                if token[0] in "ns" and token[1:].isdigit():
                    changes["tile_n" if token[0] == "n" else "stages"] = int(token[1:])
                else:
                    changes["epilogue"] = token
            return lambda: emulate.gemm(auto, a_parts, b_parts, "bf16x" + scheme[1],
                                        promote=int(promote[1:]), **changes)
        return {"sgemm": lambda: cublas.gemm(a_parts, b_parts), "matmul": matmul,
                "x6-cublas": pieces_through_cublas, "split": split_all}[name]

    ways = {name: way(name) for name in args.ways.split(",")}
    if "matmul" in ways:
        whole = (cp.concatenate(a_parts, 1), cp.concatenate(b_parts, 0))
    flops = 2.0 * args.m * args.n * args.k
    dev = cp.cuda.Device()
    gpu = cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
    print(f"{gpu}: float32 block {args.m}×{args.n}, K {args.k} in {args.parts} parts; errors on "
          f"{args.sample} rows and columns against float64", flush=True)
    errors = {}
    for name, fn in ways.items():
        if name == "split":
            continue
        out = fn()
        cp.cuda.Device().synchronize()
        errors[name] = sampled_error(out, a_parts, b_parts, rows, cols)
        del out
    times = seconds_in_turns(ways, args.rounds, args.repeat)
    for name, ts in times.items():
        s = statistics.median(ts)
        err = errors.get(name)
        rate = flops / s / 1e12 if name != "split" else float("nan")
        print(f"  {name:<10} {s * 1e3:8.3f} ms  {rate:7.1f} TFLOP/s  "
              f"rel err {err if err is not None else float('nan'):.2e}  "
              f"(rounds: {' '.join(f'{t * 1e3:.3f}' for t in ts)})", flush=True)
        if args.json:
            with open(args.json, "a") as fh:
                fh.write(json.dumps({"probe": "emulate", "gpu": gpu, "way": name, "m": args.m,
                                     "n": args.n, "k": args.k, "parts": args.parts,
                                     "median_s": s, "rounds_s": ts, "tflops": rate,
                                     "rel_error": err}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
