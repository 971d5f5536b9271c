"""Operands and outputs for the GPU tests of mgemm's kernels (tests/test_kernels.py and
tests/test_hopper.py): fresh random inputs with their exact float64 values, outputs poisoned so
that an unwritten element fails, and results read back as float64.  bfloat16 travels as uint16
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
