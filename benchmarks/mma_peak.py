"""The mma.sync ceiling of this GPU beside cuBLAS in the same run (kernels/mma_peak.cu).

    python benchmarks/mma_peak.py [--reps 5] [--out DIR]

One CTA per SM whose warps do nothing but the portable mainloop's 64x64 warp tile of float16 or
bfloat16 m16n8k16 mma: first on fragments held in registers (the tensor pipe's issue ceiling), then
with the 4 + 4 ldmatrix.x4 per k-step that the mainloop pays (fragments double-buffered, as there).
Timed by CUDA events, median of `reps`; cuBLAS at 8192³ (``cupy.matmul``, torch for bfloat16) is
timed beside it.  Prints a table and writes DIR/mma_peak.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402

from mgemm import kernels  # noqa: E402

SOURCE = Path(kernels.KERNEL_DIR) / "mma_peak.cu"
FLOPS_PER_WARP_STEP = 2 * 64 * 64 * 16
SMEM_BYTES = 4 * (4 + 4) * 512  # kPeakSmem: 4 k-steps of 4 + 4 ldmatrix.x4 (512 bytes each)


def events_ms(fn, reps: int) -> float:
    fn()
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def seconds_in_turns(ways: dict, rounds: int, reps: int) -> dict:
    """way name -> its ``rounds`` times in seconds (``events_ms``, median of ``reps`` each), the
    ways timed in turns, round after round, so clock drift reaches every one alike."""
    times: dict = {name: [] for name in ways}
    for _ in range(rounds):
        for name, fn in ways.items():
            times[name].append(events_ms(fn, reps) / 1e3)
    return times


def peak_kernel(bf16: bool, ldmatrix: bool):
    dev = cp.cuda.Device()
    options = kernels.compile_options(dev.compute_capability) + (
        f"-DMGEMM_PEAK_BF16={int(bf16)}", f"-DMGEMM_PEAK_LDMATRIX={int(ldmatrix)}")
    fn = cp.RawModule(code=SOURCE.read_text(), options=options).get_function("mgemm_mma_peak")
    fn.max_dynamic_shared_size_bytes = SMEM_BYTES
    return fn


def cublas_8192(dtype: str):
    n = 8192
    a = cp.random.standard_normal((n, n), dtype=cp.float32)
    b = cp.random.standard_normal((n, n), dtype=cp.float32)
    if dtype == "bfloat16":
        import torch
        ta = torch.from_dlpack(a).to(torch.bfloat16)
        tb = torch.from_dlpack(b).to(torch.bfloat16)
        to = torch.empty_like(ta)
        fn = lambda: torch.matmul(ta, tb, out=to)  # noqa: E731
    else:
        a16, b16 = a.astype(cp.float16), b.astype(cp.float16)
        out = cp.empty_like(a16)
        fn = lambda: cp.matmul(a16, b16, out=out)  # noqa: E731
    return 2.0 * n ** 3, fn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    sms = kernels.device_sms()
    rows = []
    for dtype in ("float16", "bfloat16"):
        flops, fn = cublas_8192(dtype)
        ms = events_ms(fn, args.reps)
        cublas = flops / ms / 1e9
        rows.append(dict(dtype=dtype, what="cuBLAS 8192^3", warps_per_sm=None, tflops=cublas))
        for ldm in (False, True):
            kern = peak_kernel(dtype == "bfloat16", ldm)
            for warps in ((4, 8) if ldm else (4, 8, 12)):
                steps = 65536 * 8 // warps
                out = cp.empty(sms * 32 * warps, dtype=cp.float32)
                ms = events_ms(lambda: kern((sms,), (32 * warps,), (out, cp.int32(steps)),
                                            shared_mem=SMEM_BYTES), args.reps)
                tf = FLOPS_PER_WARP_STEP * steps * warps * sms / ms / 1e9
                what = "mma + ldmatrix" if ldm else "mma, registers"
                rows.append(dict(dtype=dtype, what=what, warps_per_sm=warps, tflops=tf,
                                 x_cublas=tf / cublas, finite=bool(cp.isfinite(out).all())))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with open(Path(args.out) / "mma_peak.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{'dtype':>9} {'what':>16} {'warps/SM':>8} {'TFLOP/s':>8} {'x cuBLAS':>8}")
    for r in rows:
        print(f"{r['dtype']:>9} {r['what']:>16} {str(r['warps_per_sm'] or ''):>8} {r['tflops']:8.1f} "
              f"{r.get('x_cublas', 1.0):8.2f}")


if __name__ == "__main__":
    main()
