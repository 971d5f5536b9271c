"""The "numpy" engine: block GEMM on the CPU with NumPy (and its BLAS)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import accumulator_dtype, scale_and_add


class NumpyEngine:
    name = "numpy"

    @staticmethod
    def available() -> bool:
        return True

    def gemm(self, a_parts: Sequence[Any], b_parts: Sequence[Any], *, alpha: float = 1.0,
             beta: float = 0.0, c: Any = None, out_dtype: Any = None,
             allow_tf32: bool = False, tune: bool = False) -> Any:
        dtype = np.dtype(out_dtype) if out_dtype is not None else np.result_type(
            a_parts[0], b_parts[0])
        m, n = a_parts[0].shape[0], b_parts[0].shape[1]
        # 16-bit types, which NumPy multiplies without BLAS: K parts multiplied and added in
        # float32 (BLAS's sgemm), rounded once at the end.  Adding parts rounded to float16 one by
        # one had 4x NumPy's own error at K = 32768 in chunks of 1024.
        acc_dtype = np.dtype(accumulator_dtype(dtype))
        acc = np.zeros((m, n), dtype=acc_dtype)
        for a, b in zip(a_parts, b_parts):
            if a.shape[1]:
                if acc_dtype.kind in "fc":  # each part in the accumulator's type (BLAS)
                    a, b = a.astype(acc_dtype, copy=False), b.astype(acc_dtype, copy=False)
                acc += np.matmul(a, b)
        return scale_and_add(acc, alpha, beta, c, np).astype(dtype, copy=False)
