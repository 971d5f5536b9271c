"""Time the K-major copy ``hopper.gemm`` makes of a narrow row-major float16 B (``B_K_MAJOR``,
``_k_major_copy``) for each ``KxN``: GPU time in turns with an L2 flush and a spin before each call
(``timed_interleaved``), median of ``--reps``, beside a contiguous copy of the same bytes into a
buffer made before.  Rows: ``hopper.transpose_copy`` into a padded K-major buffer made before, and
``hopper._k_major_copy`` as ``gemm_parts`` calls it (the buffer allocated from CuPy's pool each
call).  Checks the copy bit for bit first.

    python3 benchmarks/transpose_narrow_probe.py [--reps 20] KxN ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402

from mgemm import hopper  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", help="KxN: B's rows and columns")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, float16; GPU time, median of "
          f"{args.reps}, in turns", flush=True)
    for spec in args.cases:
        k, n = (int(v) for v in spec.split("x"))
        b = cp.random.standard_normal((k, n), dtype=cp.float32).astype(cp.float16)
        buf = cp.empty((n, -(-k // 64) * 64), dtype=cp.float16)
        same = cp.empty_like(b)
        hopper.transpose_copy(b.T, buf)
        assert bool((buf[:, :k].view(cp.uint16) == b.T.view(cp.uint16)).all()), "transpose_copy differs from B.T"
        assert bool((hopper._k_major_copy(cp, b).view(cp.uint16) == b.view(cp.uint16)).all())
        fns = {"contiguous copy": lambda: same.__setitem__(Ellipsis, b),
               "transpose_copy": lambda: hopper.transpose_copy(b.T, buf),
               "_k_major_copy": lambda: hopper._k_major_copy(cp, b)}
        ms = h.timed_interleaved(fns, args.reps)
        moved = 2 * b.nbytes / 1e9
        cells = "  ".join(f"{name} {1e3 * t:6.2f} us ({moved / t:4.2f} TB/s)" for name, t in ms.items())
        print(f"  B {k}x{n} ({b.nbytes / 1e6:.1f} MB): {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
