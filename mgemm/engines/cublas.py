"""The "cublas" engine: block GEMM through CuPy's cuBLAS bindings.

Float32/64 and complex accumulate K parts in place with ``cupy.cublas.gemm`` (beta = 1 after the
first part), so a block never concatenates its panels.  Float32 uses TF32 tensor cores only when
``allow_tf32`` is set.  Float16 and bfloat16 do the same through ``cublasGemmEx`` into a float32
accumulator (float32 compute, alpha applied there), rounded to the output type at the end: no
concatenated panels (a 16384² block with four K chunks of 16384 used to copy 4 GiB first).  A
block of one K part and no C to add is written in its own type by cuBLAS directly (still float32
compute); beta · C is added in the float32 accumulator, so a 16-bit block is rounded once, as the
persistent and numpy engines round it.  Mixed inputs with a floating output are upcast and go
the float32/64 way; integers concatenate the K parts and call ``cupy.matmul`` once.
Each call ends by waiting for the work it queued (an event on the current stream), so a Dask task
lasts as long as its GEMM: the scheduler then sees real durations and a finished task means a
finished block.
"""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

from . import cuda_device_count, is_bfloat16, scale_and_add, wait_for_queued_work


class CublasEngine:
    name = "cublas"

    @staticmethod
    def available() -> bool:
        return cuda_device_count() > 0

    def gemm(self, a_parts: Sequence[Any], b_parts: Sequence[Any], *, alpha: float = 1.0,
             beta: float = 0.0, c: Any = None, out_dtype: Any = None,
             allow_tf32: bool = False, tune: bool = False) -> Any:
        import cupy
        import cupy.cublas  # a submodule that ``import cupy`` does not load

        dtype = cupy.dtype(out_dtype) if out_dtype is not None else cupy.result_type(
            a_parts[0], b_parts[0])
        parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
        m, n = a_parts[0].shape[0], b_parts[0].shape[1]
        if not parts:
            out = cupy.zeros((m, n), dtype=dtype)
        elif _half_inputs(parts) and (dtype.char in "ef" or is_bfloat16(dtype)):
            # One part in its own type, C not read: cuBLAS rounds once, on its way out (no
            # float32 block and no conversion pass).  Several, or beta * C to add: a float32
            # accumulator, C added there, rounded once at the end (as the persistent engine does)
            with_c = beta != 0 and c is not None
            direct = len(parts) == 1 and dtype == parts[0][0].dtype and not with_c
            acc = cupy.empty((m, n), dtype=dtype if direct else cupy.float32)
            for idx, (a, b) in enumerate(parts):  # alpha inside, before the rounding
                _gemm_ex(cupy, a, b, acc, alpha=alpha, beta=0.0 if idx == 0 else 1.0)
            if with_c:
                acc = scale_and_add(acc, 1.0, beta, c, cupy)
                beta = 0.0
            out = acc if acc.dtype == dtype else acc.astype(dtype)
            alpha = 1.0
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
            # integers (bool) multiplied in the product's type, which a wider C may set
            out = cupy.matmul(a.astype(dtype, copy=False), b.astype(dtype, copy=False))
        out = scale_and_add(out, alpha, beta, c, cupy)
        wait_for_queued_work(cupy)
        return out


def _half_inputs(parts: list) -> bool:
    """Every A and B part float16, or every one bfloat16."""
    first = parts[0][0].dtype
    return (first.char == "e" or is_bfloat16(first)) and all(
        a.dtype == first and b.dtype == first for a, b in parts)


# cudaDataType_t and cublasComputeType_t values (older CuPy builds do not export every name)
_CUDA_R_32F, _CUDA_R_16F, _CUDA_R_16BF = 0, 2, 14
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1


def _operand(cupy: Any, x: Any) -> tuple[Any, int, int]:
    """``(array, op, ld)`` presenting the row-major matrix ``x`` (R × C) to column-major cuBLAS as
    x^T: its memory read in place when rows or columns are contiguous (op N with rows ``ld``
    apart, or op T for a column-major ``x``), else a C-ordered copy."""
    from cupy_backends.cuda.libs import cublas

    r, c = x.shape
    item = x.itemsize
    if x.flags.c_contiguous:
        return x, cublas.CUBLAS_OP_N, max(1, c)
    if x.flags.f_contiguous:
        return x, cublas.CUBLAS_OP_T, max(1, r)
    s0, s1 = x.strides
    if s1 == item and s0 % item == 0 and s0 // item >= max(1, c):
        return x, cublas.CUBLAS_OP_N, s0 // item
    if s0 == item and s1 % item == 0 and s1 // item >= max(1, r):
        return x, cublas.CUBLAS_OP_T, s1 // item
    return cupy.ascontiguousarray(x), cublas.CUBLAS_OP_N, max(1, c)


def _gemm_ex(cupy: Any, a: Any, b: Any, acc: Any, *, alpha: float, beta: float) -> None:
    """``acc = alpha * a @ b + beta * acc`` on the current stream: ``a`` (m × k) and ``b`` (k × n) float16
    or bfloat16, ``acc`` a C-ordered float32 (m × n) or an array of the inputs' own type; float32
    compute.  Row-major C is column-major C^T = B^T A^T, so B goes first."""
    import numpy as np
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return
    kind = _CUDA_R_16F if a.dtype.char == "e" else _CUDA_R_16BF
    a, op_a, lda = _operand(cupy, a)
    b, op_b, ldb = _operand(cupy, b)
    handle = device.get_cublas_handle()
    scalars = np.array([alpha, beta], dtype=np.float32)  # host pointers, alive through the call
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    try:
        cublas.gemmEx(handle, op_b, op_a, n, m, k, scalars.ctypes.data, b.data.ptr, kind, ldb,
                      a.data.ptr, kind, lda, scalars.ctypes.data + 4, acc.data.ptr,
                      _CUDA_R_32F if acc.dtype.char == "f" else kind,
                      max(1, n), _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT)
    finally:
        cublas.setPointerMode(handle, mode)


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
