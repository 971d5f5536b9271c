"""The "numpy" engine: block GEMM on the CPU with NumPy (and its BLAS)."""

from __future__ import annotations

import itertools
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
        return self.gemm_chunks([list(a_parts)], [[b] for b in b_parts], alpha=alpha, beta=beta,
                                c=c, out_dtype=out_dtype)

    def gemm_chunks(self, a_rows: Sequence[Sequence[Any]], b_rows: Sequence[Sequence[Any]], *,
                    alpha: float = 1.0, beta: float = 0.0, c: Any = None, out_dtype: Any = None,
                    allow_tf32: bool = False, tune: bool = False) -> Any:
        """``gemm`` on the chunks themselves, not on panels made of them: ``a_rows[r][k]`` is
        A's chunk (row chunk r, K chunk k), ``b_rows[k][j]`` B's (K chunk k, column chunk j).

        Each output chunk is written in place by BLAS, its first K part straight into the result
        and the others through one scratch array: no panel is copied, no product allocated per
        part, and a 16-bit chunk is widened once, not once per output chunk it feeds.  In Dask's
        worker processes (``MALLOC_TRIM_THRESHOLD_`` set low) every fresh array is mapped anew
        and page-faulted on first touch: a 1024² float32 block of K = 2048 in four parts took
        48.6 ms through panels and a product per part, 36.5 ms so (35-37 ms both ways with
        glibc's defaults; one core, single-threaded BLAS).
        """
        first_a, first_b = a_rows[0][0], b_rows[0][0]
        dtype = np.dtype(out_dtype) if out_dtype is not None else np.result_type(first_a, first_b)
        # 16-bit types, which NumPy multiplies without BLAS: K parts multiplied and added in
        # float32 (BLAS's sgemm), rounded once at the end.  Adding parts rounded to float16 one by
        # one had 4x NumPy's own error at K = 32768 in chunks of 1024.
        acc_dtype = np.dtype(accumulator_dtype(dtype))
        heights = [row[0].shape[0] for row in a_rows]
        widths = [x.shape[1] for x in b_rows[0]]
        row_spans = list(zip(itertools.accumulate(heights, initial=0), heights))
        col_spans = list(zip(itertools.accumulate(widths, initial=0), widths))
        acc = np.empty((sum(heights), sum(widths)), dtype=acc_dtype)
        scratch = None
        first = True  # the first non-empty K part writes every output chunk; the others add
        for k, b_row in enumerate(b_rows):
            if not b_row[0].shape[0]:
                continue
            a_col = [row[k] for row in a_rows]
            # each part in the accumulator's type, once: BLAS for floats, and integers (bool)
            # multiplied in the product's type, which a wider C may set (np.matmul with a wider
            # `out` multiplies in its inputs' type, wrapping, and widens after)
            a_col = [a.astype(acc_dtype, copy=False) for a in a_col]
            b_row = [b.astype(acc_dtype, copy=False) for b in b_row]
            for (r0, h), a in zip(row_spans, a_col):
                for (c0, w), b in zip(col_spans, b_row):
                    out = acc[r0:r0 + h, c0:c0 + w]
                    if first:
                        np.matmul(a, b, out=out)
                        continue
                    if scratch is None:
                        scratch = np.empty((max(heights), max(widths)), dtype=acc_dtype)
                    part = scratch[:h, :w]
                    np.matmul(a, b, out=part)
                    out += part
            first = False
        if first:  # K = 0
            acc[...] = 0
        return scale_and_add(acc, alpha, beta, c, np).astype(dtype, copy=False)
