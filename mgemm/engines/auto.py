"""The engine ``engine="auto"`` resolves to for CuPy chunks: per block, on the worker that runs it,
the faster of ``persistent`` and ``cublas`` as measured on the GPU.

``persistent`` (mgemm's Hopper kernel) takes float16 and bfloat16 blocks of two or more K parts
whose rows start on 128-byte boundaries on an sm_90 GPU: it adds all the parts up in one launch,
where cuBLAS writes and reads back a float32 block per part.  On an H200 an 8192² float16 block
with K = 32768 in four parts took 6.71 ms against 7.23 ms, and float16 32768³ through the
orchestrator (8192² chunks, two H200s) 0.076 s against 0.083 s (benchmarks/RESULTS.md, tenth
session).  It also takes large blocks of one part
whose operands cuBLAS would read unaligned (N or K not a multiple of 8, as a ragged edge block's
often are: ``UNALIGNED_MIN_FLOPS``), where cuBLAS falls back to slow kernels: 1.04-4.4x
cuBLAS there (twentieth and twenty-first sessions).  Everything else goes to ``cublas``:
with one aligned part cuBLAS is ahead (the kernel reaches 0.96–0.98 of it in GPU time, and its
host path is the longer), and other GPUs and dtypes have no measured win.  With ``tune`` the
choice for float16 and bfloat16 blocks on sm_90 is measured instead, once per kind of block
(``tuned``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import cuda_device_count, get
from .persistent import _use_hopper


class GpuAutoEngine:
    name = "auto-gpu"

    @staticmethod
    def available() -> bool:
        return cuda_device_count() > 0

    def gemm(self, a_parts: Sequence[Any], b_parts: Sequence[Any], **kwargs: Any) -> Any:
        name = choose(a_parts, b_parts, kwargs.get("out_dtype"))
        if kwargs.get("tune"):
            name = tuned(a_parts, b_parts, kwargs.get("out_dtype"), name)
        return get(name).gemm(a_parts, b_parts, **kwargs)


_TUNED: dict[tuple, str] = {}  # this process's tuned engines, by block kind (``tuned``)


def tuned(a_parts: Sequence[Any], b_parts: Sequence[Any], out_dtype: Any, model: str) -> str:
    """With ``tune``: ``persistent`` or ``cublas`` as ``mgemm.tune.engine_choice`` timed them on the
    first block of this kind (device, shapes of the K parts, dtypes, and for each operand its
    layout and whether its rows sit on 16- and 128-byte boundaries), the persistent engine tuning
    its own config first; ``model`` (``choose``'s pick) unless the other is 2 % faster.  Only where
    the persistent engine would run the Hopper kernel (float16 and bfloat16 on sm_90); elsewhere
    ``model``."""
    parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
    if not parts:
        return model
    first = parts[0][0].dtype
    out = first if out_dtype is None else np.dtype(out_dtype)
    if (any(a.dtype != first or b.dtype != first for a, b in parts)
            or not _use_hopper(first, out, allow_tf32=False)):
        return model
    # shapes, strides and start addresses modulo 128 decide every layout flag of the cache key
    from mgemm import tune
    from mgemm.kernels import device_id

    dev = device_id()
    memo = (dev, first, out, tuple((x.shape, x.strides, address(x) % 128) for part in parts for x in part))
    return tune.once(_TUNED, memo, lambda: _tune_engine(parts, out_dtype, dev, str(first), str(out), model))


def _tune_engine(parts: Sequence[Any], out_dtype: Any, dev: int, first: str, out: str, model: str) -> str:
    """``tuned``'s timing: both engines on these parts into fresh blocks (alpha 1, beta 0); the
    cache key names the K parts' shapes and each operand's layout and row alignment."""
    import cupy

    from mgemm import tune
    from mgemm.hopper import _device_name

    m, n, ks = parts[0][0].shape[0], parts[0][1].shape[1], [a.shape[1] for a, _ in parts]
    a_parts, b_parts = [a for a, _ in parts], [b for _, b in parts]
    flags = "".join(f"{int(x.strides[-1] == x.itemsize)}{int(rows_on(x, 16))}{int(rows_on(x, 128))}"
                    for part in parts for x in part)
    shape = f"{m}x{n}x{'+'.join(map(str, ks))}"
    name = f"engine|{_device_name(dev)}|{first}->{out}|{shape}|{flags}|{tune.code_stamp()}"
    fns = {label: (lambda e=get(label), t=(label == "persistent"):
                   e.gemm(a_parts, b_parts, out_dtype=out_dtype, tune=t))
           for label in ("cublas", "persistent")}
    return tune.engine_choice(name, model, fns, lambda x: x.astype(cupy.float32), tune.check_rows(m))


#: One K part goes to ``persistent`` where cuBLAS's operands are not 16-byte aligned (its slow
#: kernels) and the block has at least this many FLOPs (2·m·n·k), so the Hopper path's longer
#: host time and its operand copies are paid back.  On an H200 (engine calls, host time counted,
#: float16; benchmarks/RESULTS.md): ahead on all 36 such blocks of 34-1300 GFLOP (1.04-4.4x,
#: twentieth session); once the host path was cut by 28-96 µs a call (twenty-first session),
#: ahead on 14 of the 15 blocks of 16-49 GFLOP drawn (0.98-2.26x) and behind on the two of 6.7
#: and 12.7 GFLOP (0.86, 0.87).
UNALIGNED_MIN_FLOPS = 14e9


def choose(a_parts: Sequence[Any], b_parts: Sequence[Any], out_dtype: Any = None) -> str:
    """``"persistent"`` for float16 or bfloat16 inputs (all parts one type), written as that type
    or float32, on a GPU the Hopper kernel runs on (the persistent engine's own test,
    ``_use_hopper``, without tf32), where cuBLAS would read a part unaligned (``cublas_unaligned``;
    one part: from ``UNALIGNED_MIN_FLOPS`` on), or where the block has two or more non-empty K
    parts whose rows all start on 128-byte boundaries (``rows_on``: the Hopper kernel's TMA loads
    read rows off them at a fraction of the speed, and the parts are not copied); else
    ``"cublas"``.  On an H200 (engine calls, float16, benchmarks/RESULTS.md, twentieth session)
    blocks of two to four such parts ran 1.07-1.11x cuBLAS, and with rows off 128 bytes (K or N
    of 4104, 5000, 3000, 8200) 0.73-0.91x, bar one (6000: 1.07x); with the Hopper kernel's 2-CTA
    clusters on such rows (twenty-second session) 0.78-1.07x, still mixed."""
    parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
    if not parts:
        return "cublas"
    first = parts[0][0].dtype
    if any(a.dtype != first or b.dtype != first for a, b in parts):
        return "cublas"
    out = first if out_dtype is None else np.dtype(out_dtype)  # as the persistent engine reads it
    if any(cublas_unaligned(a, b, out) for a, b in parts):
        m, n = parts[0][0].shape[0], parts[0][1].shape[1]
        k = sum(a.shape[1] for a, _ in parts)
        pays = len(parts) > 1 or 2.0 * m * n * k >= UNALIGNED_MIN_FLOPS
    else:
        pays = len(parts) > 1 and all(rows_on(x, 128) for part in parts for x in part)
    return "persistent" if pays and _use_hopper(first, out, allow_tf32=False) else "cublas"


def rows_on(x: Any, boundary: int) -> bool:
    """Whether ``x`` (a NumPy or CuPy array) starts on a ``boundary``-byte boundary and each of its
    rows (or columns, whichever are apart by more than one element) does too.

    >>> rows_on(np.empty((4, 60), np.float16), 128)  # rows 120 bytes apart
    False
    """
    return address(x) % boundary == 0 and not any(
        size > 1 and stride != x.itemsize and stride % boundary for size, stride in zip(x.shape, x.strides))


def address(x: Any) -> int:
    """The address of ``x``'s first element: a CuPy array's ``data.ptr`` (its
    ``__cuda_array_interface__`` builds a dict on every read, microseconds on a block's hot path),
    else NumPy's ``__array_interface__``."""
    if isinstance(x, np.ndarray):
        return x.__array_interface__["data"][0]
    return x.data.ptr


def cublas_unaligned(a: Any, b: Any, out_dtype: Any) -> bool:
    """Whether cuBLAS would multiply ``a @ b`` into a fresh row-major output of ``out_dtype`` with
    an operand that is not 16-byte aligned: a start address, or a row stride of ``a``, ``b`` or the
    output (N elements), that is not a multiple of 16 bytes.  cuBLAS then runs kernels that load
    element by element: on an H200, 110-260 TFLOP/s for float16 where aligned operands of the same
    sizes run at 600-750 (benchmarks/RESULTS.md, twentieth session).

    >>> a = np.empty((64, 40), np.float16)
    >>> cublas_unaligned(a, np.empty((40, 64), np.float16), np.float16)
    False
    >>> cublas_unaligned(a, np.empty((40, 65), np.float16), np.float16)  # N = 65: rows of 130 bytes
    True
    >>> cublas_unaligned(a[:, 1:], np.empty((39, 64), np.float16), np.float16)  # starts 2 bytes in
    True
    """
    return b.shape[1] * np.dtype(out_dtype).itemsize % 16 != 0 or not (rows_on(a, 16) and rows_on(b, 16))
