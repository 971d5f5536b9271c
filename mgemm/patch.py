"""``patch_dask()``: make existing dask.array code (``a @ b``, ``da.matmul``, 2-D ``da.dot``) run
through ``mgemm.matmul``, falling back to dask's own function wherever the result could differ.

>>> import numpy as np, dask.array as da
>>> a = da.ones((4, 3), chunks=2)
>>> with patch_dask():
...     c = a @ a.T
>>> through_mgemm(c), c.chunks, float(c.sum().compute(scheduler="sync"))  # dask's chunks
(True, ((2, 2), (2, 2)), 48.0)
>>> through_mgemm(a @ a.T)  # restored on leaving the block
False
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import warnings
from typing import Any, Callable

import dask.array as da
import dask.array.core as da_core
import dask.array.routines as da_routines
import numpy as np

from . import api, config
from .cluster import NoWorkersError, on_async_loop
from .engines import is_bfloat16
from .graph import BLOCK_PREFIX
from .plan import MemoryPlanError, PlanSizeError

#: A batched product is planned one matrix at a time; past this many matrices dask's single
#: blockwise graph is cheaper to build than mgemm's stack of plans, so dask keeps them.
MAX_BATCH = 64

#: (owner, attribute) pairs that ``patch_dask`` replaces, and which wrapper goes there.
#: ``Array.__matmul__``, ``Array.__rmatmul__`` and ``np.matmul(dask_array, …)`` (through
#: ``Array.__array_ufunc__``) all look up ``dask.array.routines.matmul`` when called, so replacing
#: that attribute reroutes them while keeping dask's own operand deferral (NEP 13) intact.
#: ``np.dot(dask_array, …)`` goes through ``Array.__array_function__``, which looks up
#: ``dask.array.dot``.  ``Array.dot`` (the method) calls ``tensordot`` directly, so it is replaced.
_TARGETS = (
    (da_routines, "matmul", "matmul"),
    (da, "matmul", "matmul"),
    (da_routines, "dot", "dot"),
    (da, "dot", "dot"),
    (da_core.Array, "dot", "dot_method"),
)

_lock = threading.RLock()
_active: list["DaskPatch"] = []  # innermost last
_originals: dict[tuple[int, str], Any] = {}  # dask's own attributes, saved while any patch is on


def patch_dask(**options: Any) -> "DaskPatch":
    """Route dask.array's matmul, ``@`` and 2-D dot through ``mgemm.matmul(…, **options)``.

    Works as a context manager and as a plain call::

        with mgemm.patch_dask(engine="numpy"):
            c = a @ b               # planned by mgemm: one task per output block

        p = mgemm.patch_dask()      # patched from here on ...
        p.undo()                    # ... until undone

    Replaced: ``dask.array.matmul`` (also seen as ``dask.array.routines.matmul``, which
    ``Array.__matmul__``/``__rmatmul__`` and ``np.matmul`` on a dask array use), ``dask.array.dot``
    and the ``Array.dot`` method.  A call goes to mgemm only when mgemm computes what dask would
    (same shape, chunks (``dask_chunks``), dtype, chunk type and errors; floats up to the order
    of summation): numeric (integer, float, bfloat16, complex) operands that are dask arrays
    with NumPy or CuPy chunks of known size, or plain NumPy/CuPy arrays, with matching inner
    dimensions, no empty dimension and at most ``MAX_BATCH`` matrices in a batch; ``dot`` only
    for two 2-D operands; integers only of the platform's width (dask widens narrower ones, NumPy
    and mgemm do not).
    Everything else (object or boolean dtypes, masked or sparse chunks, scalars, mismatched
    shapes, extra arguments such as ``out=``) goes to dask's own function, errors included; so
    does, with a warning, a product whose plan does not fit the workers' memory
    (``MemoryPlanError``, which ``mgemm.matmul`` raises), or one of too many blocks or chunks
    (``PlanSizeError``), or one on a cluster with no workers yet (``NoWorkersError``).  When
    neither operand is a dask array the result is still a lazy dask array, as in dask.

    Options are checked now and read again at each call, so ``dask.config`` changes still apply.
    Patches nest: the innermost active one routes calls, and undoing them in any order leaves
    exactly the patches still active; when the last is undone dask's original functions are back
    (the same objects).  Code that bound ``from dask.array import matmul`` before patching keeps
    dask's function.

    Thread safety: applying and undoing are serialized by a lock and never leave dask half
    patched, but the patch is process-wide module state, not per thread or per context: while
    any patch is on, every thread's dask.array products go through mgemm, with the options of the
    patch applied last.  Patch once around the code that needs it rather than from several
    threads with different options.  Only graph construction is affected: the tasks that run
    on Dask's threads and workers do not look at the patch.
    """
    return DaskPatch(options)


class DaskPatch:
    """An applied ``patch_dask``; ``undo()`` (or leaving its ``with`` block) removes it."""

    def __init__(self, options: dict[str, Any]):
        config.resolve(**options)  # unknown names and bad values raise here, not at the first @
        self.options = dict(options)
        self.wrappers = _make_wrappers(self.options)
        self.active = False
        self.apply()

    def apply(self) -> "DaskPatch":
        with _lock:
            if not self.active:
                if not _active:
                    _save_originals()
                _active.append(self)
                self.active = True
                _install()
        return self

    def undo(self) -> None:
        """Remove this patch (a no-op if already removed); the others stay as they were."""
        with _lock:
            if self.active:
                _active.remove(self)
                self.active = False
                _install()

    def __enter__(self) -> "DaskPatch":
        return self.apply()

    def __exit__(self, *exc: Any) -> None:
        self.undo()

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"<mgemm.patch_dask({opts}) {'active' if self.active else 'undone'}>"


def _save_originals() -> None:
    for owner, attr, _ in _TARGETS:
        # The class __dict__ entry, not the bound lookup, so the very same object goes back.
        value = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        _originals[(id(owner), attr)] = value


def _install() -> None:
    """Make dask's attributes reflect ``_active``: the innermost patch's wrappers, or dask's own."""
    for owner, attr, role in _TARGETS:
        value = _active[-1].wrappers[role] if _active else _originals[(id(owner), attr)]
        setattr(owner, attr, value)
    if not _active:
        _originals.clear()


def _make_wrappers(options: dict[str, Any]) -> dict[str, Callable]:
    """The three replacement functions of one patch, closed over its options.

    Each falls back to dask's own function, held in the closure, so a wrapper someone kept a
    reference to still works after every patch is undone.
    """
    dask_matmul = _original_or_current(da_routines, "matmul")
    dask_dot = _original_or_current(da_routines, "dot")
    dask_dot_method = _original_or_current(da_core.Array, "dot")

    @functools.wraps(dask_matmul)
    def matmul(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not _routed(a, b, options, dot=False):
            return dask_matmul(a, b, *args, **kwargs)
        return _planned_or_dask(lambda: dask_matmul(a, b), *_lazy(a, b), options)

    @functools.wraps(dask_dot)
    def dot(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not _routed(a, b, options, dot=True):
            return dask_dot(a, b, *args, **kwargs)
        return _planned_or_dask(lambda: dask_dot(a, b), *_as_dot_chunks(a, b), options)

    @functools.wraps(dask_dot_method)
    def dot_method(self: Any, other: Any) -> Any:
        if not _routed(self, other, options, dot=True):
            return dask_dot_method(self, other)
        return _planned_or_dask(lambda: dask_dot_method(self, other), *_as_dot_chunks(self, other),
                                options)

    return {"matmul": matmul, "dot": dot, "dot_method": dot_method}


def _planned_or_dask(dask_product: Any, a: Any, b: Any, options: dict) -> Any:
    """``_in_dask_chunks(a, b, options)``, or ``dask_product()`` with a warning where mgemm's
    plan does not fit the workers' memory, or has more blocks or chunks than mgemm plans, or
    the cluster has no workers to plan for yet: dask's own product may still run (its chunks can
    spill; it takes many tasks, slowly; its graph waits for workers), and code that ran before
    the patch should not start to fail under it."""
    try:
        return _in_dask_chunks(a, b, options)
    except (MemoryPlanError, PlanSizeError, NoWorkersError) as exc:
        warnings.warn(f"mgemm.patch_dask: {exc}; dask.array computes this product", stacklevel=3)
        return dask_product()


def _in_dask_chunks(a: Any, b: Any, options: dict) -> Any:
    """``mgemm.matmul(a, b)`` in the chunks dask's own product would have (``dask_chunks``).

    mgemm's output has a chunk per planned block, which may span several of A's row chunks or
    B's column chunks.  Code written against dask may rely on dask's chunks: ``da.linalg.solve``
    multiplies by the LU factorization's permutation and hands the product to
    ``solve_triangular``, which needs its row chunks to be the factors' columns.  The rechunk
    only cuts blocks into their chunks, on the worker that holds each block, unless mgemm cut
    chunks too coarse to give every worker a block.  Computing it keeps the plan's placement of
    the blocks (``cluster.KeepPlacement``), as computing mgemm's own result does."""
    out = api.matmul(a, b, **options)
    want = dask_chunks(a, b)
    return out if out.chunks == want else out.rechunk(want)


def dask_chunks(a: Any, b: Any) -> tuple:
    """The chunks of dask's ``matmul(a, b)`` (and of 2-D ``dot``): the batch dimensions broadcast
    over the common refinement of both operands' chunks (as ``blockwise`` unifies them), A's row
    chunks, B's column chunks; the axis of a 1-D operand dropped.  An operand that is not a Dask
    array counts as one chunk, as ``matmul`` takes it (``dot`` is given Dask arrays:
    ``_as_dot_chunks``).

    >>> dask_chunks(da.ones((3, 40, 50), chunks=(2, 20, 25)), da.ones((50, 30), chunks=15))
    ((2, 1), (20, 20), (15, 15))
    """
    from dask.array.core import common_blockdim

    ca = a.chunks if isinstance(a, da.Array) else tuple((n,) for n in a.shape)
    cb = b.chunks if isinstance(b, da.Array) else tuple((n,) for n in b.shape)
    ca = ((1,), *ca) if len(ca) == 1 else ca
    cb = (*cb, (1,)) if len(cb) == 1 else cb
    depth = max(len(ca), len(cb))
    ca, cb = ((1,),) * (depth - len(ca)) + ca, ((1,),) * (depth - len(cb)) + cb
    batch = []
    for x, y in zip(ca[:-2], cb[:-2]):
        both = {x, y} - {(1,)} or {(1,)}  # a dimension of length 1 broadcasts
        batch.append(common_blockdim(both) if len(both) > 1 else both.pop())
    out = (*batch, ca[-2], cb[-1])
    if a.ndim == 1:
        out = out[:-2] + out[-1:]
    if b.ndim == 1:
        out = out[:-1]
    return out


def through_mgemm(x: Any) -> bool:
    """Whether the Dask array ``x`` is computed by mgemm's block tasks (in its own graph)."""
    return any(isinstance(name, str) and name.startswith(BLOCK_PREFIX) for name in x.dask.layers)


def _original_or_current(owner: Any, attr: str) -> Callable:
    """Dask's own function: the one saved while a patch is on, else the attribute itself."""
    with _lock:
        saved = _originals.get((id(owner), attr))
        if saved is not None:
            return saved
        return owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)


def _lazy(a: Any, b: Any) -> tuple[Any, Any]:
    """dask.array.matmul of two in-memory arrays is lazy: give mgemm one dask operand."""
    if isinstance(a, da.Array) or isinstance(b, da.Array):
        return a, b
    return da.asanyarray(a), b


def _as_dot_chunks(a: Any, b: Any) -> tuple[Any, Any]:
    """dask's ``dot`` (``tensordot``) makes a Dask array of an operand that is not one with
    ``from_array``'s automatic chunks, where ``matmul`` makes it one chunk: the same here, so
    the product has ``dot``'s chunks (a 4100 × 4100 NumPy B gave one column chunk, where dask's
    gives 4096 + 4)."""
    return tuple(x if isinstance(x, da.Array) else da.from_array(x) for x in (a, b))


def _routed(a: Any, b: Any, options: dict, *, dot: bool) -> bool:
    """Whether the patch sends this product through mgemm: one mgemm computes as dask would
    (``_routable``), and not on the event loop of an asynchronous client, where mgemm cannot
    plan (dask's own product stays lazy there without asking the scheduler anything)."""
    return _routable(a, b, dot=dot) and not on_async_loop(options.get("client"))


def _routable(a: Any, b: Any, *, dot: bool) -> bool:
    """True when ``mgemm.matmul(a, b)`` computes what dask's matmul (or 2-D dot) would."""
    if not (_plain_operand(a) and _plain_operand(b)):
        return False
    if _chunk_type(a) is not _chunk_type(b):  # NumPy with CuPy: mgemm refuses, dask decides
        return False
    if dot:
        if a.ndim != 2 or b.ndim != 2:
            return False
    elif a.ndim == 0 or b.ndim == 0:
        return False
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        return False
    if any(n == 0 for n in a.shape + b.shape):
        return False
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return False
    # dask adds a product's K blocks with NumPy's sum, which widens integers narrower than the
    # platform's (int8 @ int8 gives int64 over several K chunks); mgemm keeps NumPy's matmul dtype
    dtype = np.result_type(a.dtype, b.dtype)
    return math.prod(batch) <= MAX_BATCH and np.zeros(1, dtype).sum().dtype == dtype


def _plain_operand(x: Any) -> bool:
    """A dask array of NumPy/CuPy chunks of known sizes, or a NumPy/CuPy array; numeric dtype
    (bfloat16 included)."""
    if isinstance(x, da.Array):
        if not _plain_chunk_type(type(x._meta)):
            return False
        if any(math.isnan(c) for dim in x.chunks for c in dim):
            return False
    elif not _plain_chunk_type(type(x)):
        return False
    return np.dtype(x.dtype).kind in "iufc" or is_bfloat16(np.dtype(x.dtype))


def _chunk_type(x: Any) -> type:
    return type(x._meta) if isinstance(x, da.Array) else type(x)


def _plain_chunk_type(t: type) -> bool:
    """Exactly ``numpy.ndarray`` or ``cupy.ndarray`` (not masked arrays, matrices or sparse)."""
    if t is np.ndarray:
        return True
    cupy = sys.modules.get("cupy")
    return cupy is not None and t is getattr(cupy, "ndarray", None)
