"""Time the K-major copy the Hopper tf32 path makes of a row-major B (8192² float32), against a
plain contiguous copy of the same bytes: CUDA events, median of 10.  Rows: CuPy's element-wise
copy of the transposed view (what ``hopper._operand`` did before kernels/transpose.cu), a
contiguous copy, ``cp.ascontiguousarray(B.T)``, then the tiled transpose kernel
(``hopper.transpose_copy`` into the same buffer) and ``hopper._operand`` as the tf32 GEMM calls it
(allocation included), for float32 and float16.  Checks the kernel's copy bit for bit first."""
import sys
import types
from pathlib import Path

import cupy as cp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
try:
    from mgemm import hopper
except ImportError:  # a GPU host without dask: load mgemm's submodules without mgemm/__init__.py
    pkg = types.ModuleType("mgemm")
    pkg.__path__ = [str(ROOT / "mgemm")]
    sys.modules["mgemm"] = pkg
    from mgemm import hopper


def t(fn, reps=10):
    ev = [cp.cuda.Event() for _ in range(2)]
    out = []
    for _ in range(reps + 2):
        ev[0].record(); fn(); ev[1].record(); ev[1].synchronize()
        out.append(cp.cuda.get_elapsed_time(ev[0], ev[1]))
    return float(np.median(out[2:]))


n = 8192
for dtype, bits in ((cp.float32, cp.uint32), (cp.float16, cp.uint16)):
    b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dtype)
    buf = cp.empty((n, n), dtype=dtype)
    x = b.T
    hopper.transpose_copy(x, buf)
    assert bool((buf.view(bits) == x.view(bits)).all()), "transpose_copy differs from B.T"
    arr, k_major, _ = hopper._operand(cp, x, 16 // b.itemsize, False)
    assert k_major and bool((arr[:, :n].view(bits) == x.view(bits)).all())
    gb = 2 * n * n * b.itemsize / 1e9
    print(f"{np.dtype(dtype).name} {n}x{n}")
    for name, fn in [("transposed copy buf[:, :k] = B.T", lambda: buf.__setitem__((slice(None), slice(0, n)), x)),
                     ("contiguous copy", lambda: buf.__setitem__((slice(None), slice(0, n)), b)),
                     ("cp.ascontiguousarray(B.T)", lambda: cp.ascontiguousarray(x)),
                     ("hopper.transpose_copy(B.T, buf)", lambda: hopper.transpose_copy(x, buf)),
                     ("hopper._operand(B.T) (tf32 path)", lambda: hopper._operand(cp, x, 16 // b.itemsize, False))]:
        ms = t(fn)
        print(f"  {name:36} {ms:7.3f} ms  {gb / ms * 1e3:7.1f} GB/s")
    del b, buf, x, arr
