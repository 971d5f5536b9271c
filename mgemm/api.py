"""mgemm's public functions: ``matmul`` (NumPy semantics) and ``gemm`` (BLAS semantics).

Both check their arguments completely before anything is scheduled, then plan the product over
the cluster's workers (``mgemm.plan``) and build one Dask task per output block (``mgemm.graph``).
Dask arrays in → a lazy ``dask.array.Array`` out; NumPy or CuPy arrays in → the computed array.

>>> import numpy as np, dask.array as da
>>> a = da.ones((4, 3), chunks=2)
>>> b = da.ones((3, 5), chunks=(1, 5))
>>> c = matmul(a, b)
>>> c.shape, c.dtype, float(c.sum().compute(scheduler="sync"))
((4, 5), dtype('float64'), 60.0)
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import threading
import uuid
import warnings
from typing import Any

import dask
import dask.array as da
import numpy as np

from . import config, engines, graph, staging
from . import cluster as cluster_module
from .cluster import (active_client, describe_workers, host_memory, install_placement,
                      local_workers, prefetch)
from .plan import HostCopies, Problem, check_counts, choose_block_size, make_plan

#: Each product's plan (``Plan.table()``, with the chunks' known locations applied) at DEBUG level.
plan_log = logging.getLogger("mgemm.plan")


def _kind(x: Any, name: str) -> str:
    """'dask', 'cupy' or 'numpy' for an array operand; TypeError for anything else."""
    if isinstance(x, da.Array):
        return "dask"
    if engines.is_cupy(x) and hasattr(x, "shape"):
        return "cupy"
    if isinstance(x, np.ndarray):
        return "numpy"
    if isinstance(x, (list, tuple, range)) or np.isscalar(x) or isinstance(x, np.generic):
        return "numpy"
    if hasattr(x, "__array__") or hasattr(x, "__array_interface__") or _has_buffer(x):
        return "numpy"  # what NumPy converts (a pandas frame, array.array), as numpy.matmul does
    raise TypeError(f"mgemm: {name} must be a NumPy, CuPy or Dask array (or what numpy.asarray "
                    f"takes), got {type(x).__name__}")


def _has_buffer(x: Any) -> bool:
    try:
        memoryview(x)
    except TypeError:
        return False
    return True


def _as_operand(x: Any, name: str) -> tuple[Any, str]:
    kind = _kind(x, name)
    chunk = x._meta if kind == "dask" else x
    if isinstance(chunk, np.ma.MaskedArray):  # the engines would drop the mask
        raise TypeError(f"mgemm: {name} is a masked array; mgemm multiplies plain NumPy and CuPy "
                        "arrays (fill the masked values first: numpy.ma.filled)")
    if isinstance(chunk, np.matrix):  # NumPy's product of matrices is a matrix, mgemm's an array
        raise TypeError(f"mgemm: {name} is a numpy.matrix; mgemm multiplies plain NumPy and CuPy "
                        "arrays (numpy.asarray gives one)")
    if kind == "dask" and not (isinstance(chunk, np.ndarray) or engines.is_cupy(chunk)):
        raise TypeError(f"mgemm: {name} has chunks of type {type(chunk).__module__}."
                        f"{type(chunk).__name__}; mgemm multiplies NumPy and CuPy chunks")
    if kind == "dask" and any(c != c for dim in x.chunks for c in dim):  # NaN: unknown size
        raise ValueError(f"mgemm: {name} has chunks of unknown size (shape {x.shape}); call "
                         f"{name}.compute_chunk_sizes() first")
    if kind == "numpy" and not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if str(x.dtype) == "bfloat16":  # ml_dtypes' bfloat16 (NumPy kind "V"): a real number type
        return x, kind
    if np.dtype(x.dtype).kind in ("O", "U", "S", "V", "M", "m"):
        raise TypeError(f"mgemm: {name} has dtype {x.dtype}, which has no matrix product")
    return x, kind


def _result_dtype(*arrays: Any) -> Any:
    dtypes = [x.dtype for x in arrays]
    try:
        return np.result_type(*dtypes)
    except TypeError:  # bfloat16 and other extension dtypes: promote within the chunk library
        if all(d == dtypes[0] for d in dtypes):
            return dtypes[0]
        plain = [d for d in dtypes if str(d) != "bfloat16"]
        if all(np.dtype(d).kind in "fc" for d in plain):
            # bfloat16 with float16 (NumPy's matmul gives float32 too): the smallest float type
            # that holds both exactly, and with anything wider, that
            return np.result_type(np.float32, *plain)
        raise TypeError(f"mgemm: no common dtype for {', '.join(map(str, dtypes))}") from None


def matmul(a: Any, b: Any, **options: Any) -> Any:
    """``a @ b`` with NumPy's matmul semantics, computed one task per output block.

    1-D operands are promoted (a row or column vector) and the added axis removed from the
    result; leading batch dimensions broadcast.  Options: ``engine``, ``block_size``,
    ``allow_tf32``, ``emulate_fp32``, ``split``, ``tune``, ``client`` (see ``mgemm.config``).

    >>> import numpy as np
    >>> matmul(np.arange(6.0).reshape(2, 3), np.ones(3)).tolist()
    [3.0, 12.0]
    """
    opts = config.resolve(**options)
    a, kind_a = _as_operand(a, "a")
    b, kind_b = _as_operand(b, "b")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"mgemm.matmul: operands must have at least one dimension; "
                         f"got shapes {a.shape} and {b.shape} (use * for scalars)")
    squeeze = []
    if a.ndim == 1:
        a, squeeze = a[None, :], squeeze + [-2]
    if b.ndim == 1:
        b, squeeze = b[:, None], squeeze + [-1]
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"mgemm.matmul: inner dimensions differ: shapes {_shape(a, 'a', squeeze)} "
                         f"and {_shape(b, 'b', squeeze)} (a's last {a.shape[-1]} != b's "
                         f"{'only' if -1 in squeeze else 'second-to-last'} {b.shape[-2]})")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"mgemm.matmul: batch dimensions of shapes {a.shape} and {b.shape} "
                         "do not broadcast") from None
    out_dtype = _result_dtype(a, b)
    eager = "dask" not in (kind_a, kind_b)
    if batch:
        a = _broadcast(a, batch + a.shape[-2:])
        b = _broadcast(b, batch + b.shape[-2:])

    def build() -> da.Array:
        if batch:
            shape = batch + (a.shape[-2], b.shape[-1])
            products = [_product(a[idx], b[idx], None, 1.0, 0.0, out_dtype, opts, eager)
                        for idx in np.ndindex(*batch)]
            out = da.stack(products).reshape(shape) if products else _empty(shape, out_dtype, a, b)
        else:
            out = _product(a, b, None, 1.0, 0.0, out_dtype, opts, eager)
        for axis in sorted(squeeze):  # -2 before -1: each index refers to the remaining array
            out = out.squeeze(axis=axis) if axis == -2 else out.squeeze(axis=-1)
        return out

    out = _finish(build, eager, opts)
    if eager and out.ndim == 0 and isinstance(out, np.ndarray):
        return out[()]  # NumPy's 1-D @ 1-D is a scalar (CuPy's a 0-d array)
    return out


def gemm(a: Any, b: Any, c: Any = None, *, alpha: float = 1.0, beta: float = 0.0,
         trans_a: bool = False, trans_b: bool = False, **options: Any) -> Any:
    """``alpha · op(a) @ op(b) + beta · c`` with BLAS semantics, for 2-D operands.

    ``op(x)`` is ``x.T`` when ``trans_x`` is True (a view: no copy); ``trans_x`` takes a bool
    only (a BLAS letter such as ``"N"`` raises ``TypeError``).  ``c`` is not read when
    ``beta == 0`` (a NaN there does not propagate); ``a`` and ``b`` are not read when
    ``alpha == 0``.

    >>> import numpy as np
    >>> gemm(np.eye(2), np.ones((2, 2)), np.ones((2, 2)), alpha=2.0, beta=3.0).tolist()
    [[5.0, 5.0], [5.0, 5.0]]
    """
    for name, flag in (("trans_a", trans_a), ("trans_b", trans_b)):
        if not isinstance(flag, (bool, np.bool_)):  # BLAS's "N" would be truthy, so transpose
            raise TypeError(f"mgemm.gemm: {name} must be True or False, got {flag!r}")
    opts = config.resolve(**options)
    a, kind_a = _as_operand(a, "a")
    b, kind_b = _as_operand(b, "b")
    kinds = {kind_a, kind_b}
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"mgemm.gemm: a and b must be 2-D; got shapes {a.shape} and {b.shape}")
    if trans_a:
        a = a.T
    if trans_b:
        b = b.T
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"mgemm.gemm: inner dimensions differ: op(a) is {a.shape} and op(b) is "
                         f"{b.shape}")
    operands = [a, b]
    if c is not None:
        c, kind_c = _as_operand(c, "c")
        kinds.add(kind_c)
        if c.shape != (a.shape[0], b.shape[1]):
            raise ValueError(f"mgemm.gemm: c has shape {c.shape}; op(a) @ op(b) has shape "
                             f"{(a.shape[0], b.shape[1])}")
        operands.append(c)
    alpha, beta = _number(alpha, "alpha"), _number(beta, "beta")
    out_dtype = _result_dtype(*operands)
    alpha, beta = _scalar(alpha, "alpha", out_dtype), _scalar(beta, "beta", out_dtype)
    if c is None or beta == 0:
        c, beta = None, 0.0
    eager = "dask" not in kinds
    return _finish(lambda: _product(a, b, c, alpha, beta, out_dtype, opts, eager), eager, opts)


def _number(value: Any, name: str) -> Any:
    """``alpha`` or ``beta`` as given, a 0-d array as its number; a ``TypeError`` for anything
    else that is not a number (bools included)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:  # numpy.asarray(2.0): its number
        value = value[()]
    number = isinstance(value, (int, float, complex, np.number))
    if not number or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"mgemm.gemm: {name} must be a number, got {value!r}")
    return value


def _scalar(value: Any, name: str, out_dtype: Any) -> Any:
    """``alpha`` or ``beta`` as the product's kind of number (BLAS's scalars have the matrices'
    type): a TypeError where that would change its value, not a silently rounded result.  A
    float or complex product's scalar is rounded to the type its block is added up in
    (``engines.accumulator_dtype``: float32 for 16-bit products) and given as a Python number,
    so ``numpy.float64(1/3)`` and ``numpy.float32(1/3)`` scale a float32 product alike."""
    kind = np.dtype(out_dtype).kind
    if kind == "c":
        return _rounded(value, np.dtype(out_dtype), name, complex)
    if np.iscomplexobj(value):
        if value.imag != 0:
            raise TypeError(f"mgemm.gemm: {name} = {value} is complex, but the product is "
                            f"{out_dtype}: give complex operands for a complex result")
        value = value.real
    if kind in "iub":
        whole = isinstance(value, (int, np.integer)) or float(value).is_integer()
        if not whole:
            raise TypeError(f"mgemm.gemm: {name} = {value} is not an integer, but the product is "
                            f"{out_dtype}: give float operands for a float result")
        low, high = (0, 1) if kind == "b" else (np.iinfo(out_dtype).min, np.iinfo(out_dtype).max)
        if not low <= int(value) <= high:
            raise TypeError(f"mgemm.gemm: {name} = {value} is not a value of the product's type "
                            f"{out_dtype} ({low} to {high})")
        return np.dtype(out_dtype).type(int(value))  # 2.0 scales an integer block as 2 does
    return _rounded(value, np.dtype(engines.accumulator_dtype(out_dtype)), name, float)


def _rounded(value: Any, dtype: np.dtype, name: str, kind: type) -> Any:
    """``value`` rounded to ``dtype``, as a Python ``kind`` (as ``dtype`` itself where that is
    wider than a Python number: long double); a finite value beyond the type's range is a
    TypeError (it would scale every element to inf)."""
    wide = dtype.itemsize > np.dtype(kind).itemsize
    try:
        # a long double product's scalar not through a Python float, which rounded 1/3 and
        # 2**63 + 1 and took 1e400 for inf; else as a Python number first: NumPy takes no int
        # beyond its own (2**64)
        exact = _long_double(value) if wide else None
        if exact is None:
            exact = kind(value)
        with np.errstate(over="ignore"):
            rounded = dtype.type(exact)
        # (a finite long double can be past every Python float: inf as ``exact``)
        beyond = not np.isfinite(rounded) and (
            bool(np.isfinite(exact)) or (isinstance(value, np.number) and bool(np.isfinite(value))))
    except OverflowError:  # an int beyond every float (10**400)
        beyond, value = True, f"an integer of {int(value).bit_length()} bits"
    if beyond:
        raise TypeError(f"mgemm.gemm: {name} = {value!s} is beyond the range of {dtype}, the type "
                        f"the product is scaled in")
    return rounded if wide else kind(rounded)


def _long_double(value: Any) -> Any:
    """``value`` with every bit a long double holds: a NumPy number as it is, a Python int as a
    long double; None for a Python float or complex (exact in long double as they are) and for
    an int NumPy will not read (past 4300 digits)."""
    if isinstance(value, np.number):
        return value
    if isinstance(value, int):
        with contextlib.suppress(ValueError):
            return np.longdouble(value)
    return None


def _empty(shape: tuple, dtype: Any, a: Any, b: Any) -> da.Array:
    """A batch with no matrices: an empty array of the result's shape, dtype and chunk type."""
    src = next((x._meta for x in (a, b) if isinstance(x, da.Array)), a)
    meta = da.utils.meta_from_array(src, ndim=len(shape), dtype=dtype)
    zeros = da.zeros(shape, dtype=dtype, chunks=_auto(shape))
    return zeros.map_blocks(lambda x: x, meta=meta) if engines.is_cupy(meta) else zeros


def _auto(shape: tuple) -> Any:
    """Chunks for an array mgemm makes of ``shape``: Dask's "auto", or one chunk where a
    dimension is 0 (Dask's "auto" divides by zero there beside a dimension of a few thousand)."""
    return "auto" if all(shape) else -1


def _shape(x: Any, name: str, squeeze: list) -> tuple:
    """The shape the caller passed (before 1-D promotion), for error messages."""
    if name == "a" and -2 in squeeze:
        return x.shape[1:]
    if name == "b" and -1 in squeeze:
        return x.shape[:-1]
    return x.shape


def _broadcast(x: Any, shape: tuple) -> Any:
    if x.shape == shape:
        return x
    if isinstance(x, da.Array):
        return da.broadcast_to(x, shape)
    return np.broadcast_to(x, shape) if isinstance(x, np.ndarray) else _cupy().broadcast_to(x, shape)


def _cupy() -> Any:
    import cupy
    return cupy


#: An eager product whose scattered inputs a lost worker took is built again at most this often.
LOST_INPUT_RETRIES = 2


#: ``sink``: the chunks this thread's eager product scattered (``cluster.scatter``'s), cancelled
#: if it fails.  (Not a context variable: an asyncio task the client starts meanwhile copies the
#: context, and kept the first product's chunks on the workers for good.)
_scattered = threading.local()


def _finish(build: Any, eager: bool, opts: dict) -> Any:
    """``build()``'s graph: Dask in → lazy out; arrays in → computed on the client if there is
    one, else locally.  Arrays in have their chunks scattered to the workers, with no lineage to
    recompute them from: where a worker holding some is lost before their tasks ran, the product
    is planned and scattered again over the workers left (``LOST_INPUT_RETRIES``); not where
    the client's cluster was restarted (``Client.restart``), whose cancellation is raised."""
    if not eager:
        out = build()
        _say_where_to_compute(opts["client"])
        return out
    scattered: list = []
    before, _scattered.sink = getattr(_scattered, "sink", None), scattered
    try:
        return _finish_eager(build, opts)
    except BaseException:
        # failed or interrupted anywhere (a build that stopped while scattering, a block, the
        # gather): what it scattered leaves the workers, though the traceback holds its futures
        if scattered:
            with contextlib.suppress(Exception):  # a closed client: nothing of it left
                scattered[0].client.cancel(scattered)
        raise
    finally:
        _scattered.sink = before


def _finish_eager(build: Any, opts: dict) -> Any:
    """``_finish`` of arrays in: built, and computed on the client if there is one."""
    out = build()
    client = active_client(opts["client"])
    if client is None:
        return _compute_here(out)
    from distributed.client import FutureCancelledError

    with _out_of_the_task_pool():
        for attempt in itertools.count():
            try:
                return _gather(client, out)
            except FutureCancelledError as exc:
                # a restarted cluster asked for the work to stop, not to be run again
                if exc.reason == "scheduler-restart" or not _inputs_lost(out):
                    raise
                # the client keeps this exception with the future it cancelled: its frames would
                # keep the scattered inputs of the next attempt (``out`` below) alive with it
                exc.__traceback__ = None
                if attempt == LOST_INPUT_RETRIES:
                    raise RuntimeError(
                        f"mgemm: workers holding this product's inputs (scattered from this "
                        f"process) were lost in each of {attempt + 1} attempts ({exc})") from None
            del out  # this attempt's scattered inputs, released before the next are sent
            out = build()


@contextlib.contextmanager
def _out_of_the_task_pool():
    """Called in a Dask task (arrays in, the worker's own client): this thread leaves its
    worker's pool of task threads while the product's blocks run, and rejoins it after, as
    ``Client.get`` does.  Otherwise a block planned on this worker waited for the thread that
    waited for it: a worker of one thread never finished."""
    from distributed.threadpoolexecutor import rejoin
    from distributed.worker import secede, thread_state

    seceded = False
    if getattr(thread_state, "key", None):
        with contextlib.suppress(Exception):
            secede()
            seceded = True
    try:
        yield
    finally:
        if seceded:
            rejoin()


def _gather(client: Any, out: da.Array) -> Any:
    """``out`` computed on the cluster and put together in this process, each chunk copied in
    as it arrives and then dropped.  Dask's own ``compute`` concatenates every chunk on one
    worker first, where the whole result can be past that worker's memory (the plan prices
    each worker's blocks only).  A result of one chunk is that chunk."""
    from distributed import as_completed, futures_of

    futures = futures_of(client.persist(out))
    try:
        if len(futures) == 1:
            return _writeable(futures[0].result())
        xp = _cupy() if engines.is_cupy(out._meta) else np
        result = xp.empty(out.shape, out.dtype)
        edges = [np.cumsum((0,) + c) for c in out.chunks]
        for future, part in as_completed(futures, loop=client.loop, with_results=True):  # not the default client's
            if future.status != "finished":  # cancelled: ``result`` raises what the client holds
                future.result()
            where = tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, future.key[1:]))
            result[where] = part
        return result
    except BaseException:
        # A block failed, or the caller interrupted (Ctrl-C): the blocks not yet run are cancelled
        # (their keys are this call's alone: its inputs have names of their own; ``_finish``
        # cancels those).  The exception's traceback holds this frame, so it held every block on
        # the cluster until the client closed, and holds the result put together so far.
        with contextlib.suppress(Exception):  # a closed client: nothing of it left to cancel
            client.cancel(futures)
        result = None  # noqa: F841 (a result's worth of memory the traceback would keep)
        raise


_warned_addresses: set = set()


def _say_where_to_compute(option: Any) -> None:
    """A warning, once per address, where a lazy result was planned for the scheduler at an
    address (``client="tcp://…"``, ``MGEMM_CLIENT``) that is not the default client's: Dask
    would compute it elsewhere (in this process, without a default client)."""
    if not isinstance(option, str) or option in _warned_addresses:
        return
    from distributed import default_client
    try:
        here = default_client().scheduler.address
    except ValueError:  # no default client
        here = None
    if here == option:
        return
    _warned_addresses.add(option)
    where = f"the default client's scheduler {here}" if here else "this process (no default client)"
    warnings.warn(f"mgemm planned this product for the workers at {option}, but Dask computes a "
                  f"lazy result on {where}: compute it there, with client.compute(c) on a "
                  f"Client({option!r}) or inside `with Client({option!r}):`", stacklevel=4)


def _compute_here(out: da.Array) -> Any:
    """``out`` computed in this process.  A result of one chunk is that chunk itself:
    ``Array.compute`` copies its chunks into a new array, which for one block of 4096² float64
    cost 0.05-0.5 s beside the product's 1.05 s (the fresh pages faulted in)."""
    if out.npartitions != 1:
        return out.compute()
    (value,) = dask.compute(out.to_delayed().ravel()[0])
    return _writeable(value)


def _writeable(value: Any) -> Any:
    """``value``, or a copy where it is a read-only array (a broadcast constant)."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy()
    return value


def _inputs_lost(out: da.Array) -> bool:
    """Whether a chunk ``_scatter_inputs`` sent for ``out`` is gone (its worker lost)."""
    from distributed import Future

    return any(isinstance(value, Future) and value.status != "finished"
               for name, layer in out.dask.layers.items() if name.startswith(INPUT_PREFIX)
               for value in layer.values())


def _product(a: Any, b: Any, c: Any, alpha: float, beta: float, out_dtype: Any,
             opts: dict, eager: bool) -> da.Array:
    """The lazy 2-D product ``alpha · a @ b + beta · c`` (c None ⇔ beta == 0); ``eager``: no
    operand is a Dask array (on a client, their chunks are scattered to the workers now)."""
    m, k = a.shape
    n = b.shape[1]
    meta_src, meta_b = (x._meta if isinstance(x, da.Array) else x for x in (a, b))
    if engines.is_cupy(meta_src) != engines.is_cupy(meta_b):  # a block task gets one kind
        raise TypeError(f"mgemm: one operand has CuPy chunks and the other NumPy chunks "
                        f"({type(meta_src).__name__} and {type(meta_b).__name__}); bring one to "
                        f"the other's library first, e.g. x.map_blocks(cupy.asarray)")
    engine = engines.select(opts["engine"], meta_src)
    if engine == "persistent" and not engines.persistent_multiplies(np.dtype(out_dtype)):
        # refused here, not by every block task on the workers
        raise TypeError(f"engine 'persistent' multiplies float16/32/64 and bfloat16 products, "
                        f"not {np.dtype(out_dtype)}: use 'cublas' or 'auto'")
    gpu = engine in engines.DEVICE_ENGINES  # CuPy chunks, or NumPy ones staged through a GPU
    staged = engines.staged(engine, meta_src)
    client = active_client(opts["client"])
    if min(m, n) == 0 or k == 0 or alpha == 0:
        return _degenerate(a, b, c, alpha, beta, out_dtype, meta_src)
    if client is None and staged:
        engines.get(engine)  # RuntimeError now, not in a task, where this process has no GPU

    itemsize, part_itemsize = engines.itemsizes(out_dtype)
    ident, who = None, {}
    if client is None:
        workers = local_workers(out_dtype, gpu=gpu, allow_tf32=opts["allow_tf32"],
                                emulate=opts["emulate_fp32"])
    else:
        # One round trip for the workers and where the (already chunked) inputs live; inputs
        # that are not Dask arrays yet, or that get rechunked below, are on no worker.
        ident, who = _snapshot(client, a, b)
        workers = describe_workers(client, out_dtype, gpu=gpu, allow_tf32=opts["allow_tf32"],
                                   emulate=opts["emulate_fp32"], info=ident["workers"])
        no_gpu = [w.name for w in workers if w.kind != "gpu"]
        if no_gpu and staged:
            raise RuntimeError(f"engine {engine!r} multiplies on GPUs, and worker {no_gpu[0]} has "
                             f"none (or no CuPy); for NumPy chunks on CPU workers use 'numpy' or "
                             f"'auto'")
    host = _host_copies(a, b, k, workers) if staged else None
    target = _target_block(opts["block_size"], m, n, k, itemsize, workers, host)
    if staged:
        # blocks sized for the GPUs (above); the chunks stored and fetched, and the blocks made,
        # are NumPy arrays in the workers' host memory
        hosts = ident["workers"] if client is not None else {}
        workers = [dataclasses.replace(w, memory=host_memory(hosts.get(w.name)))
                   for w in workers]
    a0, b0 = a, b
    # NumPy or CuPy operands are chunked to the target next: refused before, if that is too
    # fine (a Dask operand's chunks are grouped into blocks: make_plan counts those)
    check_counts(1 if isinstance(a, da.Array) else -(-m // target[0]),
                 1 if isinstance(b, da.Array) else -(-n // target[1]), (1, 1, 1))
    a = _to_dask(a, (target[0], "auto"), eager)
    b = _to_dask(b, ("auto", target[1]), eager)
    slots = sum(w.slots for w in workers)
    cut_a, cut_b = _align(a, b, target, slots)
    plan = None
    if client is not None and not eager:
        # Too few blocks for the workers' slots: _align cuts A's rows and B's columns, and the
        # cut chunks lie nowhere yet.  Where the chunks as they are let the planner split K by
        # the workers holding them (a Gram product X.T @ X of a row-chunked X), that plan is
        # kept and nothing is cut.
        whole_a, whole_b = _align(a, b, target, slots, cut=False)
        if (whole_a.chunks, whole_b.chunks) != (cut_a.chunks, cut_b.chunks):
            trial = _plan(whole_a, whole_b, itemsize, part_itemsize, workers, target, opts,
                          client, who)
            if trial.k_order is not None:
                a, b, plan = whole_a, whole_b, trial
    if plan is None:
        a, b = cut_a, cut_b
        plan = _plan(a, b, itemsize, part_itemsize, workers, target, opts, client, who)
    if plan_log.isEnabledFor(logging.DEBUG):
        plan_log.debug("%s", _PlanTable(plan))
    placement = client is not None
    # the prefetch and the placement of fused tasks ask the placement plugin's scheduler side:
    # only where it could be installed (with it, bfloat16 chunks keep their type between
    # processes, the scattered ones below included)
    plugin = placement and install_placement(client, ident.get("id"))
    if client is not None and eager:  # arrays in: each chunk to the worker that reads it first
        a, b, c, who = _scatter_inputs(client, plan, a0, a.chunks, b0, b.chunks, c, who)
    elif c is not None:
        c = _to_dask(c, graph.out_chunks(plan), eager)
    if plugin and who:
        prefetch(client, _first_remote_inputs(plan, a, b, who, cluster_module.PREFETCH_BLOCKS))
    out = graph.build(a, b, plan, c=c, alpha=alpha, beta=beta, engine=engine,
                      out_dtype=out_dtype, allow_tf32=opts["allow_tf32"],
                      emulate=opts["emulate_fp32"], tune=opts["tune"], placement=placement)
    if plugin:
        cluster_module.register_placement(client, graph.placement_of(out))
    return out


def _plan(a: da.Array, b: da.Array, itemsize: int, part_itemsize: int, workers: list,
          target: tuple, opts: dict, client: Any, who: dict) -> Any:
    """The plan for ``a @ b`` as chunked, following where their chunks are on ``client``'s
    workers (``who``: the scheduler's ``who_has`` for the operands' keys as given; chunks made
    from those since, by rechunking or another one-chunk operation, are traced to them)."""
    problem = Problem(tuple(a.chunks[0]), tuple(b.chunks[1]), tuple(a.chunks[1]), itemsize,
                      part_itemsize)
    locations = None
    if client is not None:
        keys = _input_keys(a, b)
        locations = _locations(a, b, _traced(client, a, b, who, keys), keys)
    return make_plan(problem, workers, block_size=target, split=opts["split"],
                     locations=locations)


#: How many tasks back ``_traced`` follows a chunk that no worker holds yet.
TRACE_DEPTH = 4


def _traced(client: Any, a: da.Array, b: da.Array, who: dict, keys: dict | None = None) -> dict:
    """``who`` with a worker for each chunk of ``a`` and ``b`` that none holds yet but whose
    task's inputs, within ``TRACE_DEPTH`` tasks back, all lie on that one worker: Dask runs such
    a task there (X.T of a persisted X, a cut of a held chunk, ``astype``).  Asks the scheduler
    once more, only where some chunk is unheld.  ``keys``: ``_input_keys(a, b)``, if made."""
    graphs = {x.name: x.__dask_graph__() for x in (a, b)}
    # an operand whose layer depends on no other (a lazy da.random, say) is made from nothing held
    follow = {name for name, g in graphs.items()
              if getattr(g, "dependencies", {}).get(name, True)}
    keys = [key for key in (keys or _input_keys(a, b)) if key[0] in follow and not who.get(key)]
    if not keys:
        return who

    def task(key: Any) -> Any:  # looked up, not the whole graph copied (a lazy operand's is big)
        graph = graphs.get(key[0]) if isinstance(key, tuple) else None
        for g in ([graph] if graph is not None else []) + list(graphs.values()):
            try:
                return g[key]
            except KeyError:
                continue
        return None

    deps: dict = {}
    frontier = set(keys)
    for _ in range(TRACE_DEPTH):
        step = set()
        for key in frontier:
            deps[key] = tuple(getattr(task(key), "dependencies", None) or ())
            step.update(deps[key])
        frontier = step - set(deps)
        if not frontier:
            break
    ask = [key for key in frontier.union(*deps.values()) if key not in who]
    from .cluster import scheduler_snapshot
    try:
        held = {**who, **(scheduler_snapshot(client, ask)[1] if ask else {})}
    except Exception:  # a scheduler that cannot say: the chunks stay unplaced
        return who
    where: dict = {}

    def worker_of(key: Any, depth: int) -> str | None:
        if held.get(key):
            return sorted(held[key])[0]
        if depth == 0 or not deps.get(key):
            return None
        if key not in where:
            found = {worker_of(dep, depth - 1) for dep in deps[key]}
            where[key] = found.pop() if len(found) == 1 else None
        return where[key]

    out = dict(who)
    for key in keys:
        worker = worker_of(key, TRACE_DEPTH)
        if worker is not None:
            out[key] = [worker]
    return out


#: Name prefix of the Dask arrays of an eager product's scattered inputs.
INPUT_PREFIX = "mgemm-input-"


def _scatter_inputs(client: Any, plan: Any, a: Any, a_chunks: tuple, b: Any, b_chunks: tuple,
                    c: Any, who: dict) -> tuple:
    """NumPy or CuPy ``a``, ``b`` and ``c`` (or None) sent to the workers now, as Dask arrays of
    ``a_chunks``, ``b_chunks`` and the output's blocks, each chunk to the worker whose task reads
    it first (``graph.first_readers``), rather than inside the graph through the scheduler;
    ``who`` with where they went added."""
    first = graph.first_readers(plan)
    who = dict(who)
    out = []
    operands = ((a, a_chunks, "a"), (b, b_chunks, "b"), (c, graph.out_chunks(plan), "c"))
    for x, chunks, kind in operands:
        if x is None:
            out.append(None)
            continue
        name = f"{INPUT_PREFIX}{kind}-{uuid.uuid4().hex}"
        out.append(cluster_module.scatter(client, x, chunks, name,
                                          lambda index, kind=kind: first.get((kind, *index)),
                                          sink=getattr(_scattered, "sink", None)))
        who.update(((name, *key[1:]), [worker]) for key, worker in first.items() if key[0] == kind)
    return (*out, who)


class _PlanTable:
    """A plan's table for the log, made only when the record is formatted (``mgemm bench
    --trace`` formats it after the timed part)."""

    def __init__(self, plan: Any):
        self.plan = plan

    def __str__(self) -> str:
        return self.plan.table()


def _first_remote_inputs(plan: Any, a: da.Array, b: da.Array, who: dict, count: int) -> dict:
    """Worker → the keys of the chunks its first ``count`` tasks read and it does not hold
    (``who``: the scheduler's ``who_has`` for the inputs' keys)."""
    out: dict = {}
    taken: dict = {}
    for w in sorted(plan.work, key=lambda w: (w.worker, w.seq)):
        if taken.get(w.worker, 0) >= count:
            continue
        taken[w.worker] = taken.get(w.worker, 0) + 1
        _, keys = graph.input_keys(a.name, b.name, plan.blocks[w.block], plan.k_chunks_of(w))
        mine = out.setdefault(w.worker, {})  # a dict: in order, each key once
        mine.update((key, None) for key in keys if who.get(key) and w.worker not in who[key])
    return {worker: list(keys) for worker, keys in out.items()}


def _target_block(option: Any, m: int, n: int, k: int, itemsize: int, workers: list,
                  host: HostCopies | None) -> tuple:
    if option == "auto":
        return tuple(choose_block_size(m, n, k, itemsize, workers, host))
    rows, cols = (option, option) if isinstance(option, int) else option
    # no block is larger than the product (and Dask's chunking takes no size past 2**63)
    return min(rows, max(m, 1)), min(cols, max(n, 1))


def _host_copies(a: Any, b: Any, k: int, workers: list) -> HostCopies:
    """How the planner prices the copies of a product of NumPy chunks on GPU workers
    (``staging.host_copies``): for the smallest GPU, K parts of the operands' K chunks (all of K
    for arrays not chunked yet)."""
    k_part = k
    if isinstance(a, da.Array) and isinstance(b, da.Array):
        k_part = max(graph.common_k_chunks(a.chunks[1], b.chunks[0]))
    return staging.host_copies(min(w.memory for w in workers), k_part)


def _to_dask(x: Any, chunks: Any, eager: bool = False) -> da.Array:
    """``x`` as a Dask array of ``chunks`` (a Dask array: as it is).

    ``eager`` (the product is computed before mgemm returns): views of ``x``'s chunks under a
    random name.  ``dask.array.from_array`` copies the whole array, against changes made to it
    before a lazy result is computed, and names it by hashing every byte: for two 4096² float64
    operands 0.03 s and 0.12 s, and twice their memory.  Else (a lazy product): ``from_array``,
    so the result's keys are the same for the same input and later changes to ``x`` do not
    reach it.
    """
    if isinstance(x, da.Array):
        return x
    if not eager:
        return da.from_array(x, chunks=chunks, asarray=False)
    from dask.array.core import normalize_chunks

    chunks = normalize_chunks(chunks, x.shape, dtype=x.dtype)
    name = "mgemm-operand-" + uuid.uuid4().hex
    return da.Array(cluster_module.chunk_views(x, chunks, name), name, chunks,
                    meta=da.utils.meta_from_array(x, ndim=x.ndim))


def _align(a: da.Array, b: da.Array, target: tuple, slots: int,
           cut: bool = True) -> tuple[da.Array, da.Array]:
    """Rechunk as little as possible: A's and B's K chunks are made to agree, and row or column
    chunks are cut only when they are too coarse to give every worker's slot (``plan.Worker``) a
    block (and ``cut``).

    Rechunking persisted inputs moves whole chunks between workers, which costs more than a plan
    over the chunks as they are, so chunks that merely differ from the planner's target stay.
    """
    rows, cols = a.chunks[0], b.chunks[1]
    if cut and len(rows) * len(cols) < slots:
        rows, cols = _split_coarse(rows, target[0]), _split_coarse(cols, target[1])
    kch = graph.common_k_chunks(a.chunks[1], b.chunks[0])
    if (rows, kch) != a.chunks:
        a = a.rechunk((rows, kch))
    if (kch, cols) != b.chunks:
        b = b.rechunk((kch, cols))
    return a, b


def _split_coarse(chunks: tuple, target: int) -> tuple:
    """Chunks larger than 1.5 × target are cut into near-equal pieces of at most ~target."""
    out = []
    for size in chunks:
        pieces = -(-size // target) if size > 1.5 * target else 1
        base, extra = divmod(size, pieces)
        out.extend([base + 1] * extra + [base] * (pieces - extra))
    return tuple(out)


def _input_keys(a: Any, b: Any) -> dict:
    """The keys of the Dask operands' chunks → the planner's ``("a", i, k)`` / ``("b", k, j)``."""
    keys = {}
    if isinstance(a, da.Array):
        for (i, k) in itertools.product(range(a.numblocks[0]), range(a.numblocks[1])):
            keys[(a.name, i, k)] = ("a", i, k)
    if isinstance(b, da.Array):
        for (k, j) in itertools.product(range(b.numblocks[0]), range(b.numblocks[1])):
            keys[(b.name, k, j)] = ("b", k, j)
    return keys


def _snapshot(client: Any, a: Any, b: Any) -> tuple[dict, dict]:
    """The scheduler's identity and where the operands' chunks live, in one round trip."""
    from .cluster import scheduler_snapshot
    if getattr(a, "ndim", 2) != 2 or getattr(b, "ndim", 2) != 2:
        return scheduler_snapshot(client)[0], {}
    try:
        return scheduler_snapshot(client, _input_keys(a, b))
    except Exception:  # a scheduler that cannot say where keys are: plan without locations
        return scheduler_snapshot(client)[0], {}


def _locations(a: da.Array, b: da.Array, who: dict, keys: dict | None = None) -> dict | None:
    """Where each persisted input chunk lives, as the planner's ``("a", i, k)`` → worker map,
    from the scheduler's ``who_has`` answer for the chunks' keys.

    An operand counts only when every one of its chunks is held somewhere.  One persisted a
    moment ago may be partly computed: its finished chunks would all sit on the workers that
    started first, and a plan that follows them would give those workers every block (on a
    freshly started GPU cluster, one worker can take seconds longer to make its first chunk).
    Left out, the operand's chunks count as remote for every worker alike.  ``keys``:
    ``_input_keys(a, b)``, if made.
    """
    keys = keys or _input_keys(a, b)
    out: dict = {}
    for operand in ("a", "b"):
        mine = {key: planner for key, planner in keys.items() if planner[0] == operand}
        held = {planner: sorted(who[key])[0] for key, planner in mine.items() if who.get(key)}
        if mine and len(held) == len(mine):
            out.update(held)
    return out or None


def _degenerate(a: Any, b: Any, c: Any, alpha: float, beta: float, out_dtype: Any,
                meta_src: Any) -> da.Array:
    """Empty dimensions, K == 0 or alpha == 0: no product to compute, A and B are not read."""
    shape = (a.shape[0], b.shape[1])
    out = da.zeros(shape, dtype=out_dtype, chunks=_auto(shape))
    if engines.is_cupy(meta_src):
        meta = da.utils.meta_from_array(meta_src, ndim=2, dtype=out_dtype)
        out = out.map_blocks(_cupy().asarray, meta=meta)
    if c is not None and beta != 0:
        # C in the zeros' chunks: dask's elementwise product of an array with empty chunks can
        # come out with more rows than its shape says
        c = _to_dask(c, _auto(shape)).rechunk(out.chunks)
        # in the type the product's blocks add beta · C in (float32 for 16-bit types), as there
        acc = engines.accumulator_dtype(out_dtype)
        out = (beta * c.astype(acc)).astype(out_dtype)
    return out
