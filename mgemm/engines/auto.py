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

from . import cuda_device_count, get, is_bfloat16


class GpuAutoEngine:
    name = "auto-gpu"

    @staticmethod
    def available() -> bool:
        return cuda_device_count() > 0

    def gemm(self, a_parts: Sequence[Any], b_parts: Sequence[Any], **kwargs: Any) -> Any:
        return get(choose(a_parts, b_parts, kwargs.get("out_dtype"))).gemm(a_parts, b_parts, **kwargs)


def choose(a_parts: Sequence[Any], b_parts: Sequence[Any], out_dtype: Any = None) -> str:
    """``"persistent"`` for float16 or bfloat16 inputs (all parts one type) of two or more
    non-empty K parts, written as that type or float32, on a GPU the Hopper kernel runs on; else
    ``"cublas"``."""
    parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
    if len(parts) < 2:
        return "cublas"
    first = parts[0][0].dtype
    half = first.char == "e" or is_bfloat16(first)
    if not half or any(a.dtype != first or b.dtype != first for a, b in parts):
        return "cublas"
    if out_dtype is not None and str(out_dtype) not in (first.name, "float32"):
        return "cublas"
    from mgemm import hopper
    return "persistent" if hopper.supported() else "cublas"
