"""The engine ``engine="auto"`` resolves to for CuPy chunks: per block, on the worker that runs it,
the faster of ``persistent`` and ``cublas`` as measured on the GPU.

``persistent`` (mgemm's Hopper kernel) takes float16 and bfloat16 blocks of two or more K parts
on an sm_90 GPU: it adds all the parts up in one launch, where cuBLAS writes and reads back a
float32 block per part.  On an H200 an 8192² float16 block with K = 32768 in four parts took 6.71
ms against 7.23 ms, and float16 32768³ through the orchestrator (8192² chunks, two H200s) 0.076 s
against 0.083 s (benchmarks/RESULTS.md, tenth session).  Everything else goes to ``cublas``:
with one part cuBLAS is ahead (the kernel reaches 0.96–0.98 of it), and other GPUs and dtypes
have no measured win.
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
        return get(choose(a_parts, b_parts, kwargs.get("out_dtype"))).gemm(a_parts, b_parts, **kwargs)


def choose(a_parts: Sequence[Any], b_parts: Sequence[Any], out_dtype: Any = None) -> str:
    """``"persistent"`` for float16 or bfloat16 inputs (all parts one type) of two or more
    non-empty K parts, written as that type or float32, on a GPU the Hopper kernel runs on (the
    persistent engine's own test, ``_use_hopper``, without tf32); else ``"cublas"``."""
    parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
    if len(parts) < 2:
        return "cublas"
    first = parts[0][0].dtype
    if any(a.dtype != first or b.dtype != first for a, b in parts):
        return "cublas"
    out = first if out_dtype is None else np.dtype(out_dtype)  # as the persistent engine reads it
    return "persistent" if _use_hopper(first, out, allow_tf32=False) else "cublas"
