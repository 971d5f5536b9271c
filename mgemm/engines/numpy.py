"""The "numpy" engine: block GEMM on the CPU with NumPy (and its BLAS)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import scale_and_add


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
        acc = np.zeros((m, n), dtype=dtype)
        for a, b in zip(a_parts, b_parts):
            if a.shape[1]:
                acc += np.matmul(a, b)
        return scale_and_add(acc, alpha, beta, c, np)
