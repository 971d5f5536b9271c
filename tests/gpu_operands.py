"""Operands and outputs for the GPU tests of mgemm's kernels (tests/test_kernels.py and
tests/test_hopper.py): fresh random inputs with their exact float64 values, outputs poisoned so
that an unwritten element fails, results read back as float64, and the check of a product
against its float64 reference (``check_product``).  bfloat16 travels as uint16
bits.  CuPy is imported on first use, so the test modules import on machines without it."""

from __future__ import annotations


def _cp():
    import cupy
    return cupy


def rand_operand(shape, kind, rng, order="C"):
    """Fresh random operand for `kind` (bfloat16 as uint16 bits), and its float64 value."""
    cp = _cp()
    x = cp.asarray(rng.standard_normal(shape), dtype=cp.float32)
    if order == "F":
        x = cp.asfortranarray(x)
    if kind == "bfloat16":
        bits = x.view(cp.uint32)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        x16 = bits.astype(cp.uint16)
        return x16, (x16.astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
    x = x.astype(_storage(kind), order=order)
    return x, x.astype(cp.float64)


def as_float64(x, kind=None):
    """``x`` as float64; uint16 (or ``kind`` "bfloat16") holds bfloat16 bits."""
    cp = _cp()
    if kind == "bfloat16" or x.dtype == cp.uint16:
        return (x.astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
    return x.astype(cp.float64)


def poisoned(shape, kind):
    """An output full of NaN (bfloat16: the NaN bits), so unwritten elements fail the check."""
    cp = _cp()
    if kind == "bfloat16":
        return cp.full(shape, 0x7FC0, dtype=cp.uint16)
    return cp.full(shape, cp.nan, dtype=_storage(kind))


def _storage(kind):
    cp = _cp()
    return {"float16": cp.float16, "tf32": cp.float32, "float32": cp.float32,
            "float64": cp.float64}[kind]


def product_operands(m, n, k, kind, rng, *, trans_a=False, trans_b=False):
    """Fresh random A (m x k), B (k x n) and C (m x n) for ``kind``, each with its float64 value:
    ``((a, a64), (b, b64), (c, c64))``.  ``trans_a`` / ``trans_b``: that operand is the transposed
    view of a K x M (N x K) row-major array, so the kernel reads it column-major."""
    a, a64 = rand_operand((k, m) if trans_a else (m, k), kind, rng)
    b, b64 = rand_operand((n, k) if trans_b else (k, n), kind, rng)
    if trans_a:
        a, a64 = a.T, a64.T
    if trans_b:
        b, b64 = b.T, b64.T
    return (a, a64), (b, b64), rand_operand((m, n), kind, rng)


def check_product(got, ref, bound, what=""):
    """Fail unless ``got`` (float64, read back from a poisoned output) holds no NaN, so every
    element was written, and ``‖got − ref‖ / ‖ref‖ <= bound``; the message starts with ``what``
    and names the worst element and how many are off by more than ten times the bound (relative
    to ``ref``'s largest).  CuPy arrays on the GPU, NumPy ones too (its CPU test)."""
    import numpy as np
    xp = np if isinstance(got, np.ndarray) else _cp()
    nans = int(xp.isnan(got).sum())
    assert nans == 0, f"{what}: {nans} unwritten or NaN outputs of {got.size}"
    err = float(xp.linalg.norm(got - ref)) / (float(xp.linalg.norm(ref)) or 1.0)
    if not err <= bound:
        diff = xp.abs(got - ref)
        i, j = np.unravel_index(int(diff.argmax()), got.shape)
        bad = int((diff > 10 * bound * (float(xp.abs(ref).max()) or 1.0)).sum())
        raise AssertionError(f"{what}: rel err {err:.2e} > {bound:.0e}; {bad} bad elements; worst at "
                             f"({i}, {j}): {float(got[i, j])} vs {float(ref[i, j])}")
