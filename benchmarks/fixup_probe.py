"""What a split tile's fix-up costs alone, with no mainloop (kernels/fixup_probe.cu): ``tiles`` 128 x
128 tiles, each split ``ways`` ways, one CTA per SM.  ``store`` stores each CTA's float32 partial;
``spread`` is the deterministic spread fix-up (store, wait for the tile's contributors, each adds a
share over all partials in a fixed order and stores it); ``l2`` adds each partial into one float32
slot per tile with vector reductions in the L2 (``red.add.v4.f32``), and the last arriver stores the
tile: fewer bytes moved, but the sum's bits depend on the order the partials arrive.  Both
reducers' outputs are checked against the exact sum.  GPU time after an L2 flush, in turns, median.

    python3 benchmarks/fixup_probe.py [--reps 20] [TILESxWAYS ...]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm.kernels import compile_plain  # noqa: E402

THREADS, ACC = 256, 64  # kernels/fixup_probe.cu: kThreads, kAcc
ELEMS = THREADS * ACC
ONE_PER_SM = 200 * 1024  # dynamic shared memory that keeps one CTA on an SM


def kernel(name: str):
    fn = compile_plain("fixup_probe.cu", name)
    fn.max_dynamic_shared_size_bytes = ONE_PER_SM
    return fn


def expected(tiles: int, ways: int) -> np.ndarray:
    """The exact sum of every tile (kernels/fixup_probe.cu: fill), in the output's layout."""
    e = np.arange(ELEMS)
    i = (e // 4 // THREADS) * 4 + e % 4
    one = ways * (ways + 1) / 2 / 1024 + ways * (i & 7) / 4096
    return np.tile(one, tiles)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shapes", nargs="*", default=["4x30", "4x33", "16x8", "1x132", "2x66", "64x2"])
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args(argv)
    store, spread, l2 = (kernel(f"mgemm_fixup_{n}") for n in ("store", "spread", "l2"))
    epoch = itertools.count(1)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; GPU time after an L2 flush, "
          f"median of {args.reps}, in turns; 64 KB float32 partial a CTA", flush=True)
    for spec in args.shapes:
        tiles, ways = map(int, spec.split("x"))
        grid = tiles * ways
        ws = cp.zeros(grid * ELEMS, dtype=cp.float32)
        sums = cp.zeros(tiles * ELEMS, dtype=cp.float32)
        flags = cp.zeros(grid, dtype=cp.int32)
        counters = cp.zeros(tiles, dtype=cp.int32)
        outs = {n: cp.full(tiles * ELEMS, cp.nan, dtype=cp.float16) for n in ("spread", "l2")}
        w = np.int32(ways)
        fns = {
            "store": lambda: store((grid,), (THREADS,), (ws, flags, np.int32(next(epoch)), w), shared_mem=ONE_PER_SM),
            "spread": lambda: spread((grid,), (THREADS,), (ws, flags, np.int32(next(epoch)), w, outs["spread"]),
                                     shared_mem=ONE_PER_SM),
            "l2": lambda: l2((grid,), (THREADS,), (sums, counters, w, outs["l2"]), shared_mem=ONE_PER_SM),
        }
        times = h.timed_interleaved(fns, args.reps, shield_us=50)
        want = expected(tiles, ways)
        checks = {}
        for name, out in outs.items():
            got = cp.asnumpy(out).astype(np.float64)
            err = float(np.max(np.abs(got - want) / np.abs(want)))
            checks[name] = "ok" if err < 1e-3 else f"CHECK FAILED (max rel err {err:.2e})"
        left = float(cp.abs(sums).max()), int(counters.max())
        if left != (0.0, 0):
            checks["l2"] = f"CHECK FAILED (slot or counter left {left})"
        line = "  ".join(f"{n} {ms * 1e3:6.2f} us" + (f" {checks[n]}" if n in checks else "")
                         for n, ms in times.items())
        print(f"{spec:>6} ({grid:>3} CTAs)  {line}", flush=True)


if __name__ == "__main__":
    main()
