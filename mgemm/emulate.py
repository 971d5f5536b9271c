"""Float32 products on bfloat16 tensor cores: the ``emulate_fp32`` option.

Exact float32 GEMM runs on the GPU's SIMT cores (cuBLAS SGEMM: about 53 TFLOP/s on an H200),
while bfloat16 tensor cores multiply with float32 accumulation more than ten times faster.  Each
float32 value splits into three bfloat16 pieces that hold all its 24 significant bits,
``x = x0 + x1 + x2`` (``kernels/split_bf16.cu``: each piece is the remainder so far rounded to
bfloat16), and a product becomes a sum of piece products, each exact in float32 and added up in
float32 accumulators like SGEMM's:

- ``bf16x9``: all nine ``ai @ bj``; only the accumulation rounds, as in SGEMM.
- ``bf16x6``: the six with ``i + j <= 2``; the three dropped are below ``2^-23 · |a||b|`` per
  scalar product (twice float32's unit roundoff), so the error stays of SGEMM's order at two
  thirds of bf16x9's work.

The terms are summed smallest first (all K parts of a term, then the next larger term).  The
pieces of a block's operands are split on the worker, in the block task, and multiplied by the
Hopper kernel as bfloat16 K parts into a float32 output, up to 8 parts per launch (each later
launch adds to the output).

The split is exact, on normal numbers only, for finite |x| ≥ 2^-103 (about 1e-31) and zero.  A
block whose inputs hold Inf, NaN, a value that rounds past bfloat16's largest, or a nonzero value
below 2^-103 is computed in exact float32 instead, so such values propagate as NumPy's matmul
propagates them.

Where it runs: float32 inputs with a float32 result on a GPU the Hopper kernel runs on (sm_90),
on CuPy chunks with the ``persistent`` or ``auto`` engine, and on NumPy chunks with the
``persistent`` engine (each block copied to the GPU whole, ``mgemm.graph``; ``auto`` multiplies
NumPy chunks on the CPU).  A tensor core's float32 accumulation truncates, so its error grows
with the number of k16 steps it adds; the Hopper kernel therefore runs with promoted
accumulation (``HopperConfig.promote``): its wgmmas add ``PROMOTE`` k-iterations at a time, and
the consumers add those windows with ordinary float32 adds.  On an H200, bfloat16 products
through cuBLAS (whole 8192-long K parts in the tensor cores) gave 5× the error of SGEMM, the
Hopper kernel without promotion 20× (benchmarks/RESULTS.md, fifteenth session).  So everywhere
else (the ``cublas`` engine, NumPy chunks under ``auto``, other GPUs, other dtypes) the product
is computed as it is without the option.

The NumPy functions here (``split_numpy``, ``product_numpy``) are the GPU path's reference:
the tests check the kernel's pieces against them bit for bit.

>>> import numpy as np
>>> x = np.array([1 + 2.0 ** -20, -3.0, 0.0], dtype=np.float32)
>>> pieces, ok = split_numpy(x)
>>> ok, [float(piece_values(p)[0]) for p in pieces]
(True, [1.0, 9.5367431640625e-07, 0.0])
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

#: scheme name → the piece pairs (i, j) it multiplies, smallest first
SCHEMES: dict[str, tuple[tuple[int, int], ...]] = {
    name: tuple(sorted(((i, j) for i in range(3) for j in range(3) if i + j <= top),
                       key=lambda t: (-(t[0] + t[1]), t)))
    for name, top in (("bf16x6", 2), ("bf16x9", 4))
}

#: k-iterations (64 of K each) per promoted window of the Hopper kernel (``HopperConfig.promote``),
#: and its (tile_n, stages) instead of the heuristic's 128-wide tile (a 256-wide one holds too many
#: accumulators for two sets; None: the heuristic's).  On an H200, an 8192² block with K = 32768 in
#: 4 parts, bf16x6 (RESULTS.md, fifteenth session), TFLOP/s and error against float64:
#: 128-wide tiles, windows of 1 / 2 / 4 / 8: 52 / 76 / 76 / 84, errors 4.1 / 3.1 / 2.8 / 4.2e-7;
#: 192-wide, 4 stages, windows of 4 / 8 / 16: 96.5 / 93.9 / 94.2, errors 2.8 / 4.2 / 8.6e-7; no
#: promotion 100.6 with 3.7e-5; SGEMM 50 with 1.6e-6.
PROMOTE = 4
HOPPER_TILE: tuple[int, int] | None = (192, 4)

SPLIT_SOURCE = "split_bf16.cu"
#: kMinExponent: the smallest biased float32 exponent the split takes (|x| >= 2^-103)
MIN_EXPONENT = 24
SPLIT_KERNEL = "mgemm_split_bf16x3"
SPLIT_THREADS = 256  # kSplitThreads


def terms(scheme: str) -> tuple[tuple[int, int], ...]:
    """The (i, j) piece products of ``scheme``, in the order they are summed.

    >>> terms("bf16x6")
    ((0, 2), (1, 1), (2, 0), (0, 1), (1, 0), (0, 0))
    """
    try:
        return SCHEMES[scheme]
    except KeyError:
        raise ValueError(f"unknown float32 emulation scheme {scheme!r}; known: "
                         f"{', '.join(SCHEMES)}") from None


# --- the NumPy reference -----------------------------------------------------------------------

def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bits rounded to nearest, ties to even (as the kernel does it)."""
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def split_numpy(x: Any) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], bool]:
    """The three bfloat16 pieces of float32 ``x`` (as uint16 bit patterns, ``x``'s shape) and
    whether the split is exact and every piece normal (the kernel's flag, negated)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        b0 = _bf16_bits(x) & 0xFFFF
        r1 = x - _bf16_value(b0)
        b1 = _bf16_bits(r1) & 0xFFFF
        r2 = r1 - _bf16_value(b1)
        b2 = _bf16_bits(r2) & 0xFFFF
        rest = r2 - _bf16_value(b2)
    u = x.view(np.uint32)
    e = (u >> 23) & 0xFF
    tiny = (e < MIN_EXPONENT) & ((u & 0x7FFFFFFF) != 0)
    bad = (e == 0xFF) | ((b0 & 0x7F80) == 0x7F80) | tiny | (rest != 0)
    pieces = tuple(b.astype(np.uint16) for b in (b0, b1, b2))
    return pieces, not bool(bad.any())


def piece_values(bits: np.ndarray) -> np.ndarray:
    """A piece's bfloat16 bits as float64 values."""
    return _bf16_value(bits.astype(np.uint32)).astype(np.float64)


def product_numpy(a: Any, b: Any, scheme: str) -> np.ndarray:
    """``a @ b`` as ``scheme`` computes it, each piece product and their sum in float64 (so only
    the scheme's dropped terms differ from the exact product): the scheme's own error, without
    float32 accumulation."""
    (pa, ok_a), (pb, ok_b) = split_numpy(a), split_numpy(b)
    if not (ok_a and ok_b):
        raise ValueError("the operands hold values outside the split's range")
    va = [piece_values(p) for p in pa]
    vb = [piece_values(p) for p in pb]
    return sum(va[i] @ vb[j] for i, j in terms(scheme))


# --- the GPU path -------------------------------------------------------------------------------

def applies(a_parts: Sequence[Any], b_parts: Sequence[Any], out_dtype: Any) -> bool:
    """Whether a block is emulated: CuPy float32 operands (every part) and a float32 result."""
    from .engines import is_cupy
    parts = list(a_parts) + list(b_parts)
    if not parts or not all(is_cupy(x) and x.dtype == np.float32 for x in parts):
        return False
    return out_dtype is None or np.dtype(out_dtype) == np.float32


def split_kernel(device: int | None = None):
    """The split kernel for ``device`` (``mgemm.kernels.compile_plain``)."""
    from mgemm.kernels import compile_plain
    return compile_plain(SPLIT_SOURCE, SPLIT_KERNEL, device)


def split_cupy(x: Any, flag: Any) -> tuple[Any, Any, Any]:
    """The three bfloat16 pieces of the CuPy float32 matrix ``x``, in ``x``'s memory order (a
    C- or Fortran-contiguous ``x`` is read in place, anything else copied first), on the current
    stream; ``flag`` (a CuPy int32 scalar array) is set to 1 if a value is outside the split's
    range."""
    import cupy

    from mgemm.cluster import extension_dtype
    from mgemm.kernels import _i64, device_sms

    if not (x.flags.c_contiguous or x.flags.f_contiguous):
        x = cupy.ascontiguousarray(x)
    order = "C" if x.flags.c_contiguous else "F"
    bf16 = extension_dtype("bfloat16")
    pieces = tuple(cupy.empty(x.shape, dtype=bf16, order=order) for _ in range(3))
    n = x.size
    if n:
        blocks = max(1, min(-(-n // SPLIT_THREADS), device_sms() * 8))
        split_kernel()((blocks,), (SPLIT_THREADS,),
                       (x, pieces[0], pieces[1], pieces[2], _i64(n), flag))
    return pieces


#: the engines whose blocks run emulated (on sm_90): ``auto`` (``auto-gpu`` on the worker) and
#: ``persistent``; ``cublas`` keeps float32 exact
ENGINES = ("auto", "auto-gpu", "persistent")


def runs_emulated(engine: Any) -> bool:
    """Whether ``engine`` multiplies emulated float32 here: the ``persistent`` and ``auto-gpu``
    engines on a GPU the Hopper kernel runs on (sm_90), whose promoted accumulation
    (``HopperConfig.promote``) keeps float32's accuracy.  Elsewhere the product stays exact."""
    if getattr(engine, "name", "") not in ENGINES:
        return False
    from mgemm import hopper
    return hopper.supported()


def runs_on(devices: Sequence[dict | None], engine: str = "auto") -> bool:
    """Whether float32 blocks are emulated on workers with these GPUs (``mgemm.cluster.device_info``
    of each) under ``engine``: the ``auto`` or ``persistent`` engine, every worker an sm_90 GPU
    (the host-side view of ``runs_emulated``, for reports)."""
    return (engine in ENGINES and bool(devices)
            and all(d is not None and d.get("cc") == "9.0" for d in devices))


def hopper_config(m: int, n: int, k: int, promote: int | None = None, **changes: Any) -> Any:
    """The Hopper kernel's configuration for one launch of bfloat16 pieces: the heuristic's for
    128-wide tiles, on ``HOPPER_TILE`` where set, with the policy and stream-K fix-up the
    heuristic fits to that tile (``hopper.fit_policy``); ``promote`` (default ``PROMOTE``)
    k-iterations per promoted window; any other ``HopperConfig`` field in ``changes`` (the
    benchmarks' variants) last."""
    from mgemm import hopper
    from mgemm.kernels import device_sms
    sms = device_sms()
    base = hopper.choose_config(m, n, k, "bfloat16", sms, tile_n=128)
    fields = {"output": "float32", "promote": PROMOTE if promote is None else promote}
    if HOPPER_TILE is not None:
        fields.update(tile_n=HOPPER_TILE[0], stages=HOPPER_TILE[1])
    config = base.replace(**{**fields, **changes})
    return hopper.fit_policy(config, m, n, k, sms).replace(**changes)


def gemm(engine: Any, a_parts: Sequence[Any], b_parts: Sequence[Any], scheme: str, *,
         alpha: float = 1.0, beta: float = 0.0, c: Any = None, out_dtype: Any = None,
         promote: int | None = None, out: Any = None, **config_changes: Any) -> Any:
    """``alpha · sum_k a_parts[k] @ b_parts[k] + beta · c`` with ``engine``, emulated under
    ``scheme`` where ``applies`` and ``runs_emulated`` (else, and for a block with values outside
    the split's range, the engine's exact float32 product).  ``promote``: the Hopper kernel's
    window (default ``PROMOTE``; 0 accumulates whole K ranges in the tensor cores); ``out``: a
    float32 (M, N) array to write the emulated product into (else a new one); ``config_changes``:
    ``HopperConfig`` fields for every launch (``hopper_config``)."""
    order = terms(scheme)
    exact = dict(alpha=alpha, beta=beta, c=c, out_dtype=out_dtype)
    if not (applies(a_parts, b_parts, out_dtype) and runs_emulated(engine)):
        return engine.gemm(a_parts, b_parts, **exact)
    import cupy

    from mgemm import hopper
    from mgemm.engines import launch_groups, wait_for_queued_work
    from mgemm.hopper_config import MAX_K_PARTS

    parts = [(a, b) for a, b in zip(a_parts, b_parts) if a.shape[1]]
    if not parts:
        return engine.gemm(a_parts, b_parts, **exact)
    flag = cupy.zeros((), dtype=cupy.int32)
    split = [(split_cupy(a, flag), split_cupy(b, flag)) for a, b in parts]
    if int(flag.get()):  # waits for the splits: values outside the range → exact float32
        return engine.gemm(a_parts, b_parts, **exact)
    a_pieces = [pa[i] for i, j in order for pa, pb in split]
    b_pieces = [pb[j] for i, j in order for pa, pb in split]
    m, n = a_parts[0].shape[0], b_parts[0].shape[1]
    if out is None:
        out = cupy.empty((m, n), dtype=cupy.float32)
    if c is not None and beta != 0:
        c = c.astype(cupy.float32, copy=False)
    pieces = list(zip(a_pieces, b_pieces))
    step = MAX_K_PARTS  # parts per launch
    groups = [pieces[i:i + step] for i in range(0, len(pieces), step)]

    def launch(group: list, **kw: Any) -> None:
        k = sum(a.shape[1] for a, _ in group)
        hopper.gemm_parts(*zip(*group), config=hopper_config(m, n, k, promote, **config_changes),
                          **kw)

    launch_groups(launch, groups, c=c, alpha=alpha, beta=beta, out=out)
    wait_for_queued_work(cupy)
    return out
