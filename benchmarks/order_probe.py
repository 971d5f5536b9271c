"""Does a launch run faster right after a launch of the same kernel?  Timed in turns (L2 flush, a
spin that hides the host path, CUDA events, median), each turn in this order:

    cuBLAS, cuBLAS-again, mgemm, mgemm-again, then each variant V: V, V-again

"-again" repeats the launch before it on its own output buffer: only what the SMs kept from the
previous launch differs (instruction caches, translation entries of the shared workspace).  A
variant is the heuristic's config with some fields changed (``--variant label:field=value,...``):
a different binary, run right after the one before it.  If it is as slow as "mgemm" the difference
is the code the SMs had to fetch; if it is as fast as "mgemm-again", it is the data side.  The
Hopper kernel's default variant is ``p24:producer_regs=24`` (one ``setmaxnreg`` immediate: the same
memory traffic and schedule).  ``--engine portable`` probes the portable kernel
(``mgemm.kernels``; float16, bfloat16, float32 and float64), for example its one-CTA-per-tile and
persistent builds on the same tiles: ``--variant static:policy=static --variant pt:policy=per_tile``.
``--variants-only`` leaves the heuristic's own config out, so the first variant runs right after
cuBLAS.  A portable variant's ``smem=BYTES`` launches it with at least that much dynamic shared
memory, more than the config needs (the same binary, fewer CTAs per SM: over half an SM's 228 KB
leaves one), to tell where the CTAs land from what the SMs have cached.

    python3 benchmarks/order_probe.py [--reps 20] [--dtype float16] [--engine hopper|portable]
        [--variant LABEL:FIELD=VALUE,...] [--variants-only] [MxNxK ...]
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

CASES = ["128x128x64", "256x256x65536", "64x8192x8192", "8192x8192x256", "1024x2112x8192",
         "1728x1312x2048", "2176x1216x2048", "4096x4096x4096"]


class _SmemFloor:
    """A portable kernel whose launches ask for at least ``smem`` bytes of dynamic shared memory."""

    def __init__(self, kernel, smem: int):
        self.inner, self.kernel, self.smem = kernel, kernel.kernel, smem
        kernel.max_dynamic_shared_size_bytes = smem  # above the config's own need (see smem=)

    def __call__(self, grid, block, args, shared_mem=0):
        self.inner(grid, block, args, shared_mem=max(shared_mem, self.smem))


def with_smem_floor(fn, smem: int):
    """``fn`` with ``kernels.gemm``'s launches under ``_SmemFloor`` (its grid is still sized by the
    config's own occupancy: tiles or resident slots, as without the floor)."""
    def run():
        plain = kernels.get_kernel
        kernels.get_kernel = lambda config, device=None: _SmemFloor(plain(config, device), smem)
        try:
            return fn()
        finally:
            kernels.get_kernel = plain
    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=CASES)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--engine", default="hopper", choices=["hopper", "portable"])
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32", "float64"])
    p.add_argument("--variant", action="append", default=None,
                   help="label:field=value,... (repeatable; hopper's default p24:producer_regs=24)")
    p.add_argument("--variants-only", action="store_true", help="time the variants, not the heuristic's config")
    args = p.parse_args(argv)
    portable = args.engine == "portable"
    if not portable and args.dtype not in ("float16", "bfloat16"):
        p.error("the Hopper kernel takes float16 or bfloat16 here")
    specs = args.variant if args.variant is not None else ([] if portable else ["p24:producer_regs=24"])
    if args.variants_only and not specs:
        p.error("--variants-only needs a --variant")
    engine = kernels if portable else hopper
    rng = np.random.default_rng(0)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {engine.device_sms()} SMs, "
          f"{args.engine} kernel, {args.dtype}; GPU time, median of {args.reps}, in turns", flush=True)
    for spec in args.cases:
        pc = h.probe_case(f"{spec}:{args.dtype}", rng, portable=portable)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        configs = {} if args.variants_only else {"mgemm": pc.config}
        floors = {}
        for v in specs:
            label, _, fields = v.partition(":")
            rest = []
            for kv in filter(None, fields.split(",")):
                if kv.startswith("smem=") and portable:
                    floors[label] = int(kv[5:])
                else:
                    rest.append(kv)
            label, cfg, _ = h.parse_variant(f"{label}:{','.join(rest)}", pc.config)
            configs[label] = cfg
        names = ["cuBLAS", "cuBLAS-again"] + [f"{label}{again}" for label in configs for again in ("", "-again")]
        outs = {name: pc.poisoned() for name in names}
        fns = {}
        for name in names:
            out = outs[name]
            if name.startswith("cuBLAS"):
                fns[name] = h.cublas_fn(pc.a, pc.b, args.dtype, out)
            else:
                label = name.removesuffix("-again")
                fn = (lambda c=configs[label], out=out:
                      engine.gemm(pc.a, pc.b, out=out, config=c, as_dtype=pc.as_dtype))
                fns[name] = with_smem_floor(fn, floors[label]) if label in floors else fn
        if pc.run_checked(fns, outs, h.BOUNDS[args.dtype]):  # each its own poisoned output, sampled rows
            continue
        ms = h.timed_interleaved(fns, args.reps)
        flops = 2.0 * m * n * k
        for name, t in ms.items():
            label = name.removesuffix("-again")
            cfg = "" if name.startswith("cuBLAS") else configs[label]
            if label in floors:
                cfg = f"{cfg} smem>={floors[label]}"
            print(f"  {spec:>16} {name:>18} {1e3 * t:9.2f} us {flops / (t * 1e-3) / 1e12:7.1f} TFLOP/s  {cfg}",
                  flush=True)


if __name__ == "__main__":
    main()
