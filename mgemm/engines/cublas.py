"""The "cublas" engine: block GEMM through CuPy's cuBLAS bindings.

Float32/64 and complex accumulate K parts in place with ``cupy.cublas.gemm`` (beta = 1 after the
first part), so a block never concatenates its panels.  Float32 uses TF32 tensor cores only when
``allow_tf32`` is set.  Half precision, bfloat16 and integers concatenate the K parts and call
``cupy.matmul`` once (cuBLAS accumulates half precision in float32 inside one call).
Each call ends with a synchronize of the current stream, so a Dask task lasts as long as its GEMM:
the scheduler then sees real durations and a finished task means a finished block.
"""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

from . import cuda_device_count, scale_and_add


class CublasEngine:
    name = "cublas"

    @staticmethod
    def available() -> bool:
        return cuda_device_count() > 0

    def gemm(self, a_parts: Sequence[Any], b_parts: Sequence[Any], *, alpha: float = 1.0,
             beta: float = 0.0, c: Any = None, out_dtype: Any = None,
             allow_tf32: bool = False) -> Any:
        import cupy
        import cupy.cublas  # a submodule that ``import cupy`` does not load

        dtype = cupy.dtype(out_dtype) if out_dtype is not None else cupy.result_type(
            a_parts[0], b_parts[0])
        parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
        m, n = a_parts[0].shape[0], b_parts[0].shape[1]
        if not parts:
            out = cupy.zeros((m, n), dtype=dtype)
        elif dtype.char in "fdFD":
            out = cupy.empty((m, n), dtype=dtype, order="F")
            with _tf32(allow_tf32 and dtype.char == "f"):
                for idx, (a, b) in enumerate(parts):
                    cupy.cublas.gemm("N", "N", a.astype(dtype, copy=False),
                                     b.astype(dtype, copy=False), out=out,
                                     beta=0.0 if idx == 0 else 1.0)
        else:
            a = parts[0][0] if len(parts) == 1 else cupy.concatenate([p[0] for p in parts], 1)
            b = parts[0][1] if len(parts) == 1 else cupy.concatenate([p[1] for p in parts], 0)
            out = cupy.matmul(a, b).astype(dtype, copy=False)
        out = scale_and_add(out, alpha, beta, c, cupy)
        cupy.cuda.get_current_stream().synchronize()
        return out


@contextlib.contextmanager
def _tf32(enabled: bool):
    """Switch the cuBLAS handle to TF32 tensor-op math for the duration, then restore it."""
    if not enabled:
        yield
        return
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas

    handle = device.get_cublas_handle()
    previous = cublas.getMathMode(handle)
    # cublasMath_t CUBLAS_TF32_TENSOR_OP_MATH is 3; older CuPy builds do not export the name.
    cublas.setMathMode(handle, getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3))
    try:
        yield
    finally:
        cublas.setMathMode(handle, previous)
