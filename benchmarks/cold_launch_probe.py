"""A fixed launch order for a profiler: which stalls make a kernel's first launch after another
binary slower than the same launch repeated (``order_probe.py`` measures the times)?

Two turns, the first to load every binary onto the GPU (its launches are for ``--launch-skip``);
each turn: L2 flush, cuBLAS; then for each portable-kernel variant V (``label:field=value,...`` as
in ``order_probe.py``): L2 flush, V (its code not yet on the SMs: another binary ran last), L2
flush, V again.  Under Nsight Compute with application replay the order, and so each launch's
cache state, is the same in every pass:

    ncu --replay-mode application --cache-control none --clock-control none -k mgemm_gemm \\
        --launch-skip 4 --launch-count 4 \\
        --page raw --csv --metrics gpu__time_duration.sum,regex:smsp__average_warps_issue_stalled_.* \\
        python3 benchmarks/cold_launch_probe.py float16 1024x1024x512 st:policy=static pt:policy=per_tile

Every output is checked once against float64 on sampled rows (a CHECK FAILED line if not).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import kernels  # noqa: E402


def main(argv):
    dtype, shape, specs = argv[0], argv[1], argv[2:]
    pc = h.probe_case(f"{shape}:{dtype}", np.random.default_rng(0), portable=True)
    fns, outs = {"cuBLAS": None}, {"cuBLAS": pc.poisoned()}
    fns["cuBLAS"] = h.cublas_fn(pc.a, pc.b, dtype, outs["cuBLAS"])
    for spec in specs:
        label, cfg, _ = h.parse_variant(spec, pc.config)
        for name in (label, f"{label}-again"):
            outs[name] = out = pc.poisoned()
            fns[name] = (lambda c=cfg, out=out:
                         kernels.gemm(pc.a, pc.b, out=out, config=c, as_dtype=pc.as_dtype))
        print(f"{label}: {cfg}", flush=True)
    for turn in range(2):
        for name, fn in fns.items():
            h.l2_flush()
            fn()
        cp.cuda.Device().synchronize()
        if turn == 0:
            pc.check_rows(outs, h.BOUNDS[dtype])
    print(f"launch order, twice ({2 * len(specs)} mgemm launches a turn):", ", ".join(fns), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
