"""The GPU time a launch costs when the product itself is tiny: mgemm's Hopper kernel and portable
kernel beside cuBLAS and an empty CuPy kernel, all timed in turns as GPU time (L2 flush, a spin
that hides the host path, CUDA events, median).  What is left on a 1-tile product is the
launch's fixed cost: getting the CTAs onto the SMs (shared-memory carve-out, 384 threads with
``setmaxnreg``), the prologue (barriers, descriptor prefetch) and the exit; an empty kernel
holding 200 KB of shared memory shows what the carve-out switch alone costs.  Variants of the
Hopper config separate the parts: fewer stages (less shared memory), ``per_tile``.

    python3 benchmarks/floor_probe.py [--reps 20] [MxNxK ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper, kernels  # noqa: E402

EMPTY = cp.RawKernel(r'extern "C" __global__ void mgemm_empty() {}', "mgemm_empty")
# The same empty kernel holding as much dynamic shared memory as the Hopper kernel's ring, so the
# SMs must switch their shared-memory carve-out from the L2 flush's to the GEMM's on every launch.
EMPTY_SMEM = cp.RawKernel(r'extern "C" __global__ void mgemm_empty_smem() { extern __shared__ char s[]; }',
                          "mgemm_empty_smem")
SMEM_BYTES = 200 * 1024


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=["128x128x64", "256x256x64", "128x128x4096",
                                                "1024x1024x64"])
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    sms = hopper.device_sms()
    EMPTY_SMEM.max_dynamic_shared_size_bytes = SMEM_BYTES
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {sms} SMs; GPU time, median "
          f"of {args.reps}, in turns", flush=True)
    for spec in args.cases:
        m, n, k = map(int, spec.split("x"))
        case = h.Case(spec, m, n, k)
        a, b = h.operands(case, "float16", rng)[:2]
        cfg = hopper.choose_config(m, n, k, "float16", sms)
        variants = {"hopper": cfg, "hopper-s2": cfg.replace(stages=2),
                    "hopper-per_tile": cfg.replace(policy="per_tile", sk_reduce="owner")}
        if cfg.pingpong:
            variants["hopper-coop"] = hopper.choose_config(m, n, k, "float16", sms, tile_n=128)
        outs = {name: cp.empty((m, n), dtype=cp.float16) for name in [*variants, "cuBLAS", "portable"]}
        fns = {"empty": lambda: EMPTY((1,), (32,), ()),
               "empty-132x384": lambda: EMPTY((sms,), (384,), ()),
               "empty-132x384-smem": lambda: EMPTY_SMEM((sms,), (384,), (), shared_mem=SMEM_BYTES),
               "cuBLAS": h.cublas_fn(a, b, "float16", outs["cuBLAS"]),
               "portable": lambda: kernels.gemm(a, b, out=outs["portable"])}
        for name, c in variants.items():
            fns[name] = lambda c=c, out=outs[name]: hopper.gemm(a, b, out=out, config=c)
        ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)
        for fn in fns.values():
            fn()
        cp.cuda.Device().synchronize()
        for name, out in outs.items():
            err = float(np.abs(cp.asnumpy(out).astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))
            if not err <= 1e-2:
                print(f"  CHECK FAILED {spec} {name}: {err:.2e}", flush=True)
        ms = h.timed_interleaved(fns, args.reps)
        for name, t in ms.items():
            label = str(variants[name]) if name in variants else ""
            print(f"  {spec:>14} {name:>16} {1e3 * t:8.2f} us  {label}", flush=True)


if __name__ == "__main__":
    main()
