"""SM clock and board power while a product runs back to back: is the portable kernel held back by
its instructions or by the GPU's power budget?

    python benchmarks/clock_probe.py [--seconds 3] [--size 8192] [--ways cuBLAS,portable]
                                     [--rounds R] [--out DIR]

For each way (cuBLAS, the portable persistent kernel, the Hopper kernel, and the mma.sync ceiling
kernel of benchmarks/mma_peak.py with its ldmatrix loads, 8 warps per SM), in float16 and bfloat16:
the product runs back to back for ``--seconds`` while ``nvidia-smi`` samples the SM clock, the
board power and the active clock-event (throttle) reasons every 50 ms.  The first half second of
samples is dropped (ramp-up).  TFLOP/s is from CUDA events over the same window: the sustained
rate of products run back to back, as a worker runs its blocks (the kernel benchmarks time one
product after an idle spin instead).  With ``--rounds R`` the ways run R times in turns, and each
row also gives its rate over the round's cuBLAS rate.  Prints one line per way and round and
writes DIR/clock_probe.jsonl.  Every product's output is checked against float64 on
sampled rows first (``CHECK FAILED`` otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

import mma_peak  # noqa: E402
from mgemm import hopper, kernels  # noqa: E402

FIELDS = "clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active"
WAYS = ("cuBLAS", "portable", "hopper", "mma.sync peak")


def sample_while(fn, seconds: float) -> tuple[list[list[str]], float, int]:
    """Run ``fn`` back to back for ``seconds`` under nvidia-smi sampling; returns the samples
    after the first 0.5 s, the GPU milliseconds of the calls after that point, and their count."""
    smi = subprocess.Popen(["nvidia-smi", "-i", str(cp.cuda.Device().id), f"--query-gpu={FIELDS}",
                            "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:
        fn()
        cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    calls = 0
    t1 = time.perf_counter()
    while time.perf_counter() - t1 < seconds - 0.5:
        for _ in range(4):
            fn()
        calls += 4
        stop.record()
        stop.synchronize()
    ms = cp.cuda.get_elapsed_time(start, stop)
    smi.terminate()
    out, _ = smi.communicate()
    lines = [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]
    skip = int(0.5 / 0.05)
    return lines[skip:], ms, calls


def summary(samples: list[list[str]]) -> dict:
    def col(i):
        vals = []
        for s in samples:
            try:
                vals.append(float(s[i]))
            except (ValueError, IndexError):
                pass
        return vals
    reasons: dict[str, int] = {}
    for s in samples:
        if len(s) > 4:
            reasons[s[4]] = reasons.get(s[4], 0) + 1
    mhz, watts, limit, temp = col(0), col(1), col(2), col(3)
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    return dict(samples=len(samples), sm_mhz=med(mhz), sm_mhz_min=min(mhz, default=float("nan")),
                watts=med(watts), limit_w=med(limit), temp_c=med(temp), reasons=reasons)


def check(out, a, b, dtype: str, rng) -> float:
    """Largest error over 32 random rows of ``out`` against float64, relative to the largest
    element of the reference (bfloat16 as uint16 bits, as ``h.operands`` makes them)."""
    rows = cp.asarray(rng.choice(a.shape[0], size=32, replace=False))
    ref = h.as_f64(a[rows], dtype) @ h.as_f64(b, dtype)
    got = h.as_f64(out[rows], dtype)
    return float(cp.abs(got - ref).max() / cp.abs(ref).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, from: {', '.join(WAYS)}")
    ap.add_argument("--rounds", type=int, default=1, help="run the ways this many times in turns")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    names = [w.strip() for w in args.ways.split(",")]
    unknown = [w for w in names if w not in WAYS]
    if unknown:
        ap.error(f"unknown ways {unknown}; choose from {list(WAYS)}")
    n = args.size
    rng = np.random.default_rng(20261202)
    sms = kernels.device_sms()
    rows = []
    for dtype in args.dtypes.split(","):
        a, b = h.operands(h.Case(f"{n}^3", n, n, n), dtype, rng)  # bfloat16: uint16 bits
        as_dtype = "bfloat16" if dtype == "bfloat16" else None
        co = cp.empty((n, n), dtype=a.dtype)
        cublas = h.cublas_fn(a, b, dtype, co)
        po = cp.empty((n, n), dtype=a.dtype)
        ho = cp.empty((n, n), dtype=a.dtype)
        portable = lambda: kernels.gemm(a, b, out=po, as_dtype=as_dtype)  # noqa: E731
        hop = lambda: hopper.gemm(a, b, out=ho, as_dtype=as_dtype)  # noqa: E731
        steps = 65536
        peak_fn = None
        if "mma.sync peak" in names:  # compiled only when asked for
            peak = mma_peak.peak_kernel(dtype == "bfloat16", True)
            pout = cp.empty(sms * 32 * 8, dtype=cp.float32)
            peak_fn = lambda: peak((sms,), (256,), (pout, cp.int32(steps)), shared_mem=mma_peak.SMEM_BYTES)  # noqa: E731
        ways = {"cuBLAS": (cublas, lambda: co, 2.0 * n ** 3),
                "portable": (portable, lambda: po, 2.0 * n ** 3),
                "hopper": (hop, lambda: ho, 2.0 * n ** 3),
                "mma.sync peak": (peak_fn, None, mma_peak.FLOPS_PER_WARP_STEP * steps * 8 * sms)}
        errs = {}
        for name in names:
            fn, result, _ = ways[name]
            fn()
            cp.cuda.Device().synchronize()
            errs[name] = None
            if result is not None:
                errs[name] = err = check(result(), a, b, dtype, rng)
                if not err < 2e-2:
                    print(f"CHECK FAILED {dtype} {name}: rel err {err:.3g}")
        for rnd in range(args.rounds):
            base = None
            for name in names:
                fn, _, flops = ways[name]
                samples, ms, calls = sample_while(fn, args.seconds)
                row = dict(dtype=dtype, way=name, size=n, round=rnd, tflops=flops * calls / ms / 1e9,
                           rel_err=errs[name], **summary(samples))
                if name == "cuBLAS":
                    base = row["tflops"]
                row["x_cublas"] = row["tflops"] / base if base else None
                rows.append(row)
                ratio = f"  x cuBLAS {row['x_cublas']:.3f}" if base else ""
                print(f"{dtype:>9} r{rnd} {name:>14} {row['tflops']:7.1f} TFLOP/s{ratio}  SM "
                      f"{row['sm_mhz']:6.0f} MHz (min {row['sm_mhz_min']:.0f})  {row['watts']:5.0f} W of "
                      f"{row['limit_w']:.0f}  {row['temp_c']:.0f} C  reasons {row['reasons']}  "
                      f"err {errs[name]}", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with open(Path(args.out) / "clock_probe.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
