"""Block GEMM engines: what a Dask task calls to multiply one output block.

An engine computes ``alpha * sum_k a_parts[k] @ b_parts[k] + beta * c`` for 2-D arrays of one
library (NumPy or CuPy).  ``a_parts[k]`` is M×Kk and ``b_parts[k]`` is Kk×N; either may be a
non-contiguous view (a transpose costs no copy).  ``c`` is not read when ``beta == 0``.  An
engine may also offer ``gemm_chunks(a_rows, b_rows, ...)``, the same product on a block's chunks
as they are (``a_rows[r][k]``, ``b_rows[k][j]``), which block tasks then call instead of
building each K part's panels (the numpy engine: ``mgemm.engines.numpy``).
``tune`` asks the persistent engine to launch the kernel config ``mgemm.tune`` timed fastest for
each kind of block; the other engines ignore it.

Engines: ``numpy`` (CPU), ``cublas`` (CuPy → cuBLAS) and ``persistent`` (mgemm's own kernel in
``kernels/``).  ``select("auto", meta)`` picks from the chunk type: ``numpy`` for NumPy chunks,
for CuPy chunks ``auto-gpu``, which picks ``persistent`` or ``cublas`` per block on the worker
(``mgemm.engines.auto``).  ``cublas`` and ``persistent`` chosen by name also take NumPy chunks:
a block task then copies its chunks to the worker's GPU and the block back (``staged``).

>>> import numpy as np
>>> engine = get("numpy")
>>> engine.gemm([np.eye(2)], [np.full((2, 2), 3.0)], alpha=2.0).tolist()
[[6.0, 6.0], [6.0, 6.0]]
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from typing import Any, Iterator, Protocol, Sequence

#: engine name -> "module:Class"; imported on first use so a CPU install never imports CuPy.
_REGISTRY = {
    "numpy": "mgemm.engines.numpy:NumpyEngine",
    "cublas": "mgemm.engines.cublas:CublasEngine",
    "persistent": "mgemm.engines.persistent:PersistentEngine",
    "auto-gpu": "mgemm.engines.auto:GpuAutoEngine",  # what "auto" is for CuPy chunks
}


class Engine(Protocol):
    name: str

    @staticmethod
    def available() -> bool: ...

    def gemm(self, a_parts: Sequence[Any], b_parts: Sequence[Any], *, alpha: float = 1.0,
             beta: float = 0.0, c: Any = None, out_dtype: Any = None,
             allow_tf32: bool = False, tune: bool = False) -> Any: ...


_cache: dict[str, Engine] = {}

#: 16-bit result types.  A GPU's 16-bit GEMM adds their products in float32 and rounds once, on
#: its way out; so does mgemm wherever it adds the parts of one block itself (the numpy engine's K
#: parts, the persistent engine's launches, the partials of a block split along K).
WIDENED = ("float16", "bfloat16")


def accumulator_dtype(dtype: Any) -> str:
    """The type in which parts of a ``dtype`` result are added: float32 for ``WIDENED``, else
    ``dtype`` itself (named).

    >>> accumulator_dtype("float16"), accumulator_dtype("float64")
    ('float32', 'float64')
    """
    name = str(dtype)
    return "float32" if name in WIDENED else name


def itemsizes(dtype: Any) -> tuple[int, int]:
    """(bytes of a ``dtype`` element, bytes of an element of its parts: ``accumulator_dtype``);
    bfloat16, which NumPy does not name, is 2.

    >>> itemsizes("bfloat16"), itemsizes("float64")
    ((2, 4), (8, 8))
    """
    import numpy as np

    def size(name: str) -> int:
        return 2 if name == "bfloat16" else np.dtype(name).itemsize
    return size(str(dtype)), size(accumulator_dtype(dtype))


def get(name: str) -> Engine:
    """The engine called ``name``; ``RuntimeError`` if it cannot run here."""
    if name in _cache:
        return _cache[name]
    if name not in _REGISTRY:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(_REGISTRY)}")
    module, _, cls = _REGISTRY[name].partition(":")
    try:
        engine_cls = getattr(importlib.import_module(module), cls)
    except ImportError as exc:
        raise RuntimeError(f"engine {name!r} is not installed here: {exc}") from exc
    if not engine_cls.available():
        raise RuntimeError(f"engine {name!r} cannot run here (no usable GPU or library)")
    _cache[name] = engine = engine_cls()
    return engine


def cuda_device_count() -> int:
    """CUDA devices CuPy can use here; 0 without CuPy, a driver or a GPU."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def is_cupy(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


#: The engines that multiply on a GPU.  Given NumPy chunks, their block tasks copy the chunks to
#: the worker's GPU, multiply there and copy the block back (``staged``).
DEVICE_ENGINES = ("cublas", "persistent", "auto-gpu")


def select(name: str, meta: Any) -> str:
    """Resolve ``"auto"`` from the chunk type ``meta``; check an explicit choice against it.
    ``cublas`` and ``persistent`` take NumPy chunks too (``staged``); ``auto`` keeps those on the
    CPU (``numpy``).

    >>> import numpy as np
    >>> select("auto", np.empty(1)), select("cublas", np.empty(1))
    ('numpy', 'cublas')
    """
    gpu_chunks = is_cupy(meta)
    if name == "auto":
        return "auto-gpu" if gpu_chunks else "numpy"
    if name == "numpy" and gpu_chunks:
        raise ValueError("engine 'numpy' cannot multiply CuPy chunks; use 'cublas' or 'auto'")
    return name


def staged(name: str, x: Any) -> bool:
    """Whether a block task of engine ``name`` copies its chunks (``x``: one of them) to the GPU
    and its block back: a GPU engine (``DEVICE_ENGINES``) given NumPy chunks."""
    return name in DEVICE_ENGINES and not is_cupy(x)


def scale_and_add(acc: Any, alpha: float, beta: float, c: Any, xp: Any) -> Any:
    """``alpha * acc + beta * c`` in place where possible, reading ``c`` only when beta != 0;
    ``beta * c`` in ``acc``'s type (a narrower C would wrap or round there first), and C added
    as it is where beta == 1 (one pass fewer; a bool C stays bool).

    >>> import numpy as np
    >>> scale_and_add(np.array([True, False]), 1, 1, np.array([False, False]), np).tolist()
    [True, False]
    """
    if alpha != 1:
        acc *= xp.asarray(alpha).astype(acc.dtype) if acc.dtype.kind != "c" else alpha
    if beta != 0 and c is not None:
        term = c if c.dtype == acc.dtype else c.astype(acc.dtype)
        acc += term if beta == 1 else beta * term
    return acc


def launch_groups(launch: Any, groups: Sequence[Any], *, c: Any, alpha: float, beta: float,
                  out: Any, **extra: Any) -> None:
    """``launch(group, c=..., alpha=..., beta=..., out=out, **extra)`` for each group of K parts,
    all into ``out``: the first with the caller's ``beta`` and ``c``, every later one with beta = 1
    on ``out`` itself, which adds its group to what the earlier ones wrote.

    >>> calls = []
    >>> launch_groups(lambda g, **kw: calls.append((g, kw["c"], kw["beta"])), ["p", "q"], c="C",
    ...               alpha=2.0, beta=0.5, out="O")
    >>> calls
    [('p', 'C', 0.5), ('q', 'O', 1.0)]
    """
    for idx, group in enumerate(groups):
        first = idx == 0
        launch(group, c=c if first else out, alpha=alpha, beta=beta if first else 1.0, out=out,
               **extra)


_streams = threading.local()
_shared_lock = threading.Lock()
#: device id → (the stream every task thread of this process queues on, the lock a task holds
#: while it queues its work there)
_shared: dict[int, tuple[Any, threading.Lock]] = {}

#: How the block tasks of one process share a GPU.  False: each task thread queues on a stream of
#: its own, so two tasks' GEMMs run at the same time, each on part of the GPU; they end together,
#: and the GPU idles while both threads return to Dask and start their next tasks.  True: one
#: stream per GPU, and a task queues all its work in one go (a per-GPU lock), so the tasks'
#: GEMMs run one after the other and a thread whose block is done queues its next block while the
#: other thread's still runs.  Measured (benchmarks/RESULTS.md, ninth session): on one H200 with
#: the inputs held, eight float16 8192² blocks took 72.8 ms with one stream against 78.9 with
#: streams of their own; on two H200s, where blocks wait for fetches, float16 32768³ took 0.084
#: against 0.081 s (8192² chunks) and 0.073 against 0.072 s (16384²).  Two GPUs decide.
ONE_STREAM_PER_GPU = False

def _task_stream_events(cupy: Any) -> tuple[Any, Any, Any, Any]:
    """The stream this thread's block tasks run on (``ONE_STREAM_PER_GPU``), the lock held while
    queuing on it (None for a stream of the thread's own), an event to order it after the legacy
    default stream, and one marking the end of the task's own work (the events are this
    thread's; all made once per thread and device)."""
    per_device = getattr(_streams, "by_device", None)
    if per_device is None:
        per_device = _streams.by_device = {}
    dev = cupy.cuda.Device().id
    shared = ONE_STREAM_PER_GPU
    entry = per_device.get((dev, shared))
    if entry is None:
        if shared:
            with _shared_lock:
                if dev not in _shared:
                    _shared[dev] = (cupy.cuda.Stream(non_blocking=True), threading.Lock())
                stream, lock = _shared[dev]
        else:
            stream, lock = cupy.cuda.Stream(non_blocking=True), None
        events = cupy.cuda.Event(disable_timing=True), cupy.cuda.Event(disable_timing=True)
        entry = per_device[(dev, shared)] = (stream, lock, *events)
    return entry


@contextlib.contextmanager
def task_stream(xp: Any) -> Iterator[None]:
    """Run a task's GPU work on a non-blocking stream and wait for that work at the end.

    The legacy default stream waits for (and is waited for by) every blocking stream, not for
    non-blocking ones.  With ``mgemm.cluster.StreamScopedTransfers`` a UCX transfer waits for
    the legacy default stream only; block GEMMs kept off it therefore do not hold up the worker's
    fetches and sends (two H200s: 2-6 ms per 256 MiB chunk instead of ~90 ms, the GEMMs queued
    on the GPU).  The wait at the end, for an event recorded after the task's own work (not for
    the whole stream, which other task threads may be queuing on: ``ONE_STREAM_PER_GPU``), keeps
    "task finished" meaning "block finished", so what the task hands to Dask is complete (a task
    that fails part-way waits for what it queued too, before its arrays are let go of).  On a
    shared stream the body only queues (``wait_for_queued_work`` returns at once inside it), under
    the GPU's lock, and the wait comes after the lock is released.

    The other direction needs an explicit wait: a CuPy task that made one of this task's inputs
    (random chunks, a user's ``map_blocks``) returns once its kernels are *queued* on the legacy
    default stream, and a non-blocking stream does not wait for them.  So the task's stream
    first waits for an event recorded on the legacy stream (on the GPU, not the host).
    NumPy: no-op.
    """
    if not is_cupy_module(xp):
        yield
        return
    stream, lock, inputs_written, finished = _task_stream_events(xp)
    done = False
    try:
        with lock if lock is not None else contextlib.nullcontext():
            _streams.deferred = lock is not None
            try:
                inputs_written.record(xp.cuda.Stream.null)
                stream.wait_event(inputs_written)
                with stream:
                    yield
                finished.record(stream)
                done = True
            finally:
                _streams.deferred = False
                if not done:  # failed part-way: its queued work is waited for all the same
                    with contextlib.suppress(Exception):  # (the first error is the one raised)
                        finished.record(stream)
    finally:
        # the task's arrays are let go of after this: no GEMM it queued may still run on them
        if done:
            finished.synchronize()
        else:
            with contextlib.suppress(Exception):
                finished.synchronize()


def copy_stream(cupy: Any) -> Any:
    """This thread's non-blocking stream for copies to the current GPU (made once per thread and
    device): a staged block's chunks go there, so they load while the block's earlier GEMMs run
    on its task stream (``mgemm.graph``)."""
    per_device = getattr(_streams, "copies", None)
    if per_device is None:
        per_device = _streams.copies = {}
    dev = cupy.cuda.Device().id
    if dev not in per_device:
        per_device[dev] = cupy.cuda.Stream(non_blocking=True)
    return per_device[dev]


@contextlib.contextmanager
def queue_only() -> Iterator[None]:
    """Inside a ``task_stream``: engines only queue their work (``wait_for_queued_work`` returns at
    once), so the caller can queue more, such as the next copies; the task stream's end waits for
    all of it."""
    before = getattr(_streams, "deferred", False)
    _streams.deferred = True
    try:
        yield
    finally:
        _streams.deferred = before


def wait_for_queued_work(cupy: Any) -> None:
    """Block until the work this thread has queued on its current stream so far is done (an
    event, not a stream synchronize: other threads may queue on the same stream).  Inside a
    ``task_stream`` on a shared stream: nothing (the task waits once its work is all queued)."""
    if getattr(_streams, "deferred", False):
        return
    events = getattr(_streams, "done", None)
    if events is None:
        events = _streams.done = {}
    dev = cupy.cuda.runtime.getDevice()
    done = events.get(dev)
    if done is None:  # one per thread and device, recorded again by each call
        done = events[dev] = cupy.cuda.Event(disable_timing=True)
    done.record()
    done.synchronize()


def is_bfloat16(dtype: Any) -> bool:
    """Whether ``dtype`` is ml_dtypes' bfloat16 (NumPy kind "V"), which CuPy 14 holds arrays of
    (the kind first: a NumPy dtype's ``name`` is computed in Python, microseconds a call)."""
    return dtype.kind == "V" and dtype.name == "bfloat16"


def persistent_multiplies(dtype: Any) -> bool:
    """Whether the persistent engine's kernels multiply (and write) ``dtype``: float16, float32,
    float64 and bfloat16."""
    return (dtype.kind == "f" and dtype.itemsize in (2, 4, 8)) or is_bfloat16(dtype)


def is_cupy_module(xp: Any) -> bool:
    return getattr(xp, "__name__", "") == "cupy"
