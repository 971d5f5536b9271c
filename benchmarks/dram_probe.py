"""How fast the GPU reads A the way a split-K GEMM's CTAs do (kernels/dram_probe.cu): a row-major
``rows`` x K matrix (K contiguous) in 128-byte k-slabs of every row, ``slices`` CTAs each reading
its share of the slabs, dealt in contiguous ranges ("ranges": CTA s reads slabs s*per .. s*per+per-1,
as split-K's k-slices) or interleaved ("interleaved": CTA s reads slabs s, s+slices, s+2*slices, ...,
so that at any moment the CTAs read neighbouring pieces of each row), beside the same bytes read as
one flat range ("flat").  Each CTA keeps 192 KB of copies in flight, as the Hopper GEMM's ring.
GPU time after an L2 flush, in turns, median; TB/s counts the bytes read.

    python3 benchmarks/dram_probe.py [--reps 10] [--slices 16,32,64,128,132] [ROWSxK ...]
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
from mgemm.kernels import compile_plain  # noqa: E402

IN_FLIGHT = 192 * 1024  # kernels/dram_probe.cu: kInFlight


def kernel(name: str):
    fn = compile_plain("dram_probe.cu", name)
    fn.max_dynamic_shared_size_bytes = IN_FLIGHT
    return fn


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shapes", nargs="*", default=["256x65536", "512x32768"])
    p.add_argument("--slices", default="16,32,64,128,132")
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args(argv)
    sms = hopper.device_sms()
    flat = kernel("mgemm_dram_flat")
    sink = cp.empty(1024 * 256, dtype=cp.uint32)
    rng = np.random.default_rng(0)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {sms} SMs; GPU time after an "
          f"L2 flush, median of {args.reps}, in turns", flush=True)
    for spec in args.shapes:
        rows, k = map(int, spec.split("x"))
        if rows not in (256, 512) or k % 64:
            raise SystemExit(f"{spec}: rows must be 256 or 512 and K a multiple of 64")
        slabs_fn = kernel(f"mgemm_dram_slabs_{rows}")
        a = cp.asarray(rng.integers(0, 1 << 16, size=(rows, k), dtype=np.uint16))
        pitch = np.int64(k * 2 // 16)
        fns, nbytes = {}, {}
        for slices in map(int, args.slices.split(",")):
            per = (k // 64) // slices
            for mode in (0, 1):
                name = f"{slices:>3} {'interleaved' if mode else 'ranges'}"
                fns[name] = (lambda s=slices, q=per, m=mode: slabs_fn(
                    (s,), (256,), (a, pitch, np.int32(s), np.int32(q), np.int32(m), sink),
                    shared_mem=IN_FLIGHT))
                nbytes[name] = rows * per * slices * 128
        total = rows * k * 2
        for grid in (sms, 64):
            fns[f"{grid:>3} flat"] = lambda g=grid: flat((g,), (256,), (a, np.int64(total // 16), sink),
                                                          shared_mem=IN_FLIGHT)
            nbytes[f"{grid:>3} flat"] = total
        times = h.timed_interleaved(fns, args.reps, shield_us=50)
        for name, ms in times.items():
            print(f"{spec:>10} {name:<16} {ms * 1e3:8.2f} us  {nbytes[name] / ms / 1e9:6.2f} TB/s", flush=True)


if __name__ == "__main__":
    main()
