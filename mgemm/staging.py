"""Device copies of host chunks, shared by the staged block tasks of one worker process.

A GPU engine given NumPy chunks copies each block's chunks to the GPU (``mgemm.graph``).  The plan
orders a worker's blocks so that A's row panels and B's column panels are read again by the next
blocks there, so without a cache every chunk crosses the host link once per block that reads it:
a 4 × 4 grid of blocks on one GPU moves each input four times.  With it, a chunk the plan reads
again on this worker is copied once, kept, and dropped after its last read there.  (On one H100,
32768³ float32 from host chunks, that cut the copies in from 24 GiB to 8 GiB and gained only
1.04-1.08 × with CuPy's copies, and 0.99-1.02 × with the pinned ones below: how fast each copy
runs bounds such products more than how many there are.)

``build`` gives every block task its product and the number of reads the plan makes of each of
its chunks on its worker (``reuse_marks``).  The first read of a chunk read more than once there
copies it and keeps the copy; the others use it (a read that comes while the copy is being made
waits for it); the last drops it.  Reads are counted per product, not ordered, so tasks that run
out of the plan's order (two task threads) still copy each chunk once, and the last read is the
last whatever came before it.

The copies may hold ``CACHE_FRACTION`` of the GPU's memory; a chunk whose first read finds no
room is copied for each read.  A staged plan sizes each task slot's working set to a share of the GPU's memory
(``mgemm.plan.MEMORY_FRACTION``), and the inputs themselves are in host memory, so the rest is
free.  A copy lasts until its last read on this worker, until its host chunk is released (a
weak reference), or until the worker lets go of the product's last task (a distributed worker:
``mgemm.cluster.ReleaseCopies``), whichever comes first: one whose other reads never ran here
(a block failed, a lost worker's blocks ran elsewhere, tasks a later step of the graph left
out) goes then, and a later run of the same product counts its reads afresh.

Streams: a copy is made on the loading thread's copy stream and recorded by an event; a task that
finds it kept makes its own copy stream wait for that event before using it.  Memory: the cache
holds one reference, and each task that reads a copy holds another until its GPU work is done
(``mgemm.graph._staged_block``), so a copy is never freed, and its memory never reused, while a
queued kernel may still read it.

Copies each way (``to_device``, ``to_host``): CuPy's own copy of a pageable host array runs at
the speed of one thread's memcpy into pinned memory (9.5 GB/s in on an H100 host), and a new host
array for a block coming back is slower still, its pages mapped as the copy first writes them
(3.4 GB/s), where the link itself moves 51 GB/s between pinned memory and the GPU
(``benchmarks/staged_probe.py``).  So (``PINNED_COPIES``, the default) a copy goes through two
pinned buffers of ``PIECE_BYTES`` instead (a pair per copy under way, shared by the threads that
copy), a band of rows at a time: ``COPY_THREADS`` threads copy a band between the host array and
one buffer while the other buffer's band crosses.
On that H100, 32768³ from 8192² host chunks took 1.5-2.0 × less time this way than with CuPy's
copies, about what cuBLASXt takes on inputs already pinned (``benchmarks/host_inputs.py``).
Arrays that are not 2-D, or not of one of NumPy's own types in native byte order (bfloat16 is
copied as 16-bit integers, its bits unchanged), and rows longer than a buffer, keep CuPy's
copies.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import numpy as np

from . import config
from .engines import is_bfloat16
from .plan import HostCopies

# dask.config's mgemm.staging.*, read at their first use in this process (``settings``), not at
# import: a worker process imports this module (a spawned one imports the user's main script,
# and mgemm with it) before its nanny hands it the config the cluster was started with.

#: Share of the GPU's memory the kept copies may hold (0: nothing is kept).
CACHE_FRACTION: float | None = None
#: Copies to and from the GPU through this module's pinned buffers (else CuPy's own copies).
#: On one H100 they made 32768³ from host chunks 1.5-2.0 × faster (``benchmarks/host_inputs.py``).
PINNED_COPIES: bool | None = None
#: Bytes of each pinned buffer (two per copy under way).
PIECE_BYTES = 64 << 20
#: Threads that copy between host arrays and pinned memory: by default ("auto") 8 (measured
#: 1.08-1.13 × faster than 4 there), or the CPUs this process may run on where it has fewer
#: (dask-cuda binds each worker to its GPU's CPUs).
COPY_THREADS: int | None = None


def settings() -> tuple[bool, int, float]:
    """``(PINNED_COPIES, COPY_THREADS, CACHE_FRACTION)``, those not yet set read from dask.config
    (``ValueError`` naming a bad key)."""
    global CACHE_FRACTION, PINNED_COPIES, COPY_THREADS
    if None in (PINNED_COPIES, COPY_THREADS, CACHE_FRACTION):
        read = config.staging()
        if CACHE_FRACTION is None:
            CACHE_FRACTION = read["cache_fraction"]
        if PINNED_COPIES is None:
            PINNED_COPIES = read["pinned_copies"]
        if COPY_THREADS is None:
            COPY_THREADS = read["copy_threads"] or min(8, len(os.sched_getaffinity(0)) if hasattr(
                os, "sched_getaffinity") else os.cpu_count() or 1)
    return PINNED_COPIES, COPY_THREADS, CACHE_FRACTION


class _Entry:
    """What a worker knows of one host chunk in one product: ``left``, the plan's reads of it
    still to come there; ``nbytes`` > 0 where a copy is kept (made by the first read: ``loaded``
    is set once ``copy`` and ``ready`` are, with ``copy`` None if making it failed)."""

    __slots__ = ("ref", "nbytes", "left", "loaded", "copy", "ready")

    def __init__(self, ref: weakref.ref, nbytes: int, left: int) -> None:
        self.ref, self.nbytes, self.left = ref, nbytes, left
        self.loaded = threading.Event()
        self.copy = self.ready = None


class DeviceCopies:
    """The kept device copies of this process, by GPU, product and host chunk (its identity,
    checked by a weak reference, so a chunk released and another made at its address is not
    mistaken).  Reads are counted whether or not a copy is kept, so the last one is known however
    the reads interleave.  ``kept`` and ``hits`` count the copies made to be kept and the reads
    that used one."""

    def __init__(self) -> None:
        # re-entrant: a chunk may die, and its weak reference's callback run, in this thread
        # while it holds the lock (a garbage collection set off by an allocation)
        self._lock = threading.RLock()
        self._entries: dict[tuple, _Entry] = {}
        self._bytes: dict[int, int] = {}
        self.kept = self.hits = 0

    def claim(self, device: int, product: str, x: Any, reads: int,
              limit: int) -> tuple[_Entry | None, bool]:
        """One read of ``x`` on ``device`` for ``product``, of ``reads`` the plan makes there:
        (the kept entry, False) to use its copy (once ``loaded``), (a new entry, True) to make
        the copy and fill it in, (None, True) to make a copy and not keep it (read once, or no
        room: the first read decides)."""
        key = (device, product, id(x))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.ref() is x:
                entry.left -= 1
                if entry.left <= 0:
                    self._remove(key)
                if not entry.nbytes:
                    return None, True
                self.hits += 1
                return entry, False
            if reads < 2:
                return None, True
            try:
                ref = weakref.ref(x, functools.partial(self._expire, key))
            except TypeError:  # an object without weak references: never kept
                return None, True
            nbytes = int(x.nbytes)
            keep = self._bytes.get(device, 0) + nbytes <= limit
            entry = self._entries[key] = _Entry(ref, nbytes if keep else 0, reads - 1)
            if not keep:
                return None, True
            self._bytes[device] = self._bytes.get(device, 0) + nbytes
            self.kept += 1
            return entry, True

    def abandon(self, device: int, product: str, x: Any, entry: _Entry) -> None:
        """The copy of a claimed ``entry`` could not be made: its reads are still counted, its
        bytes freed; readers waiting on it, and later ones, make their own."""
        with self._lock:
            if self._entries.get((device, product, id(x))) is entry:
                self._bytes[device] -= entry.nbytes
            entry.nbytes = 0
        entry.loaded.set()

    def drop(self, product: str) -> int:
        """Forget every entry of ``product`` on every GPU (its copies freed once no task holds
        them): this worker has none of the product's tasks left to run, so reads still counted
        will not come, and a later run of the same product counts its reads afresh.  Returns
        how many entries went."""
        with self._lock:
            keys = [key for key in self._entries if key[1] == product]
            for key in keys:
                self._remove(key)
            return len(keys)

    def nbytes(self, device: int) -> int:
        """Bytes of the copies kept on ``device``."""
        with self._lock:
            return self._bytes.get(device, 0)

    def _expire(self, key: tuple, ref: weakref.ref) -> None:
        """A counted chunk died: its entry, and any copy, go too."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.ref is ref:
                self._remove(key)

    def _remove(self, key: tuple) -> None:
        entry = self._entries.pop(key)
        self._bytes[key[0]] = self._bytes.get(key[0], 0) - entry.nbytes


#: This process's copies (a worker's task threads share them).
COPIES = DeviceCopies()


def reuse_marks(product: str, tasks: list[tuple[Any, list]]) -> dict:
    """Each block task's reads, from one worker's tasks of ``product``: ``tasks`` holds (task
    key, the chunk keys it reads); the result maps each task key to the product, a semicolon,
    and the number of reads of each of its chunks on the worker, comma-separated, in the task's
    order (a chunk read twice by one task, as in ``x @ x``, counts twice).

    >>> reuse_marks("p", [("t0", ["a0", "b0"]), ("t1", ["a0", "b1"])])
    {'t0': 'p;2,1', 't1': 'p;2,1'}
    """
    reads = Counter(key for _, keys in tasks for key in keys)
    return {task: product + ";" + ",".join(str(reads[key]) for key in keys)
            for task, keys in tasks}


def parse_marks(reuse: str, chunks: int) -> tuple[str, list[int]]:
    """``reuse_marks``'s string as (product, reads per chunk); an empty one (``build`` marks no
    reads where the operands' meta is CuPy) as one read of each of the ``chunks``.

    >>> parse_marks("p;2,1", 2), parse_marks("", 2)
    (('p', [2, 1]), ('', [1, 1]))
    """
    if not reuse:
        return "", [1] * chunks
    product, _, reads = reuse.rpartition(";")
    return product, [int(r) for r in reads.split(",")]


def host_copies(gpu_memory: int, k_part: int) -> HostCopies:
    """How the planner prices the copies of a product of NumPy chunks on GPU workers of
    ``gpu_memory`` bytes each, ``k_part`` the K of one part: the kept copies' share of that
    memory, and CuPy's copy rates where the pinned buffers are off (an H100 host: 256 MiB in
    32.7 ms, back into a new host array in 99 ms, ``benchmarks/RESULTS.md``, sixty-fifth
    session)."""
    pinned, _, fraction = settings()
    keep = fraction * gpu_memory
    if pinned:
        return HostCopies(keep, k_part)
    return HostCopies(keep, k_part, to_device=8e9, to_host=3e9)


_memory: dict[int, int] = {}  # each GPU's memory, in bytes


def limit(cupy: Any, device: int) -> int:
    """``CACHE_FRACTION`` of ``device``'s memory, in bytes."""
    if device not in _memory:
        _memory[device] = int(cupy.cuda.Device(device).mem_info[1])
    return int(settings()[2] * _memory[device])


def load(cupy: Any, copies: Any, x: Any, product: str, reads: int, typed: Any) -> Any:
    """``x``'s device copy for a task of ``product`` whose copy stream ``copies`` is current,
    ``reads`` being the plan's reads of ``x`` on this worker: the kept one (the stream made to
    wait for it) or a new one, kept when ``reads`` is more than one.  ``typed``: what ``x`` is
    copied as."""
    device = cupy.cuda.Device().id
    entry, mine = COPIES.claim(device, product, x, reads, limit(cupy, device))
    if not mine:
        entry.loaded.wait()
        if entry.copy is not None:
            copies.wait_event(entry.ready)
            return entry.copy
        return to_device(cupy, typed(x), copies)
    try:
        copy = to_device(cupy, typed(x), copies)
        ready = copies.record() if entry is not None else None
    except BaseException:
        if entry is not None:
            COPIES.abandon(device, product, x, entry)
        raise
    if entry is not None:
        entry.copy, entry.ready = copy, ready
        entry.loaded.set()
    return copy


def _rows(x: Any) -> int:
    """Rows of ``x`` a pinned piece holds; 0 where ``x`` takes CuPy's copies: not a 2-D array of
    one of NumPy's own numeric types in native byte order (not the types another package gives
    NumPy, such as ml_dtypes' float8 ones; bfloat16 comes here as integers, ``_bits``), or a row
    longer than a buffer."""
    if not (settings()[0] and getattr(x, "ndim", 0) == 2 and x.dtype.kind in "biufc"
            and x.dtype.isbuiltin == 1):
        return 0
    return PIECE_BYTES // max(1, x.shape[1] * x.dtype.itemsize)


class _Buffers:
    """A copy's two pinned buffers, and an event per buffer recorded after its last copy."""

    def __init__(self, cupy: Any) -> None:
        self.memory = [np.frombuffer(cupy.cuda.alloc_pinned_memory(PIECE_BYTES), np.uint8,
                                     PIECE_BYTES) for _ in range(2)]
        self.done = [None, None]

    def take(self, i: int, dtype: Any, shape: tuple[int, int]) -> np.ndarray:
        """Buffer ``i % 2`` as a C-contiguous ``shape`` of ``dtype``, once its last copy has
        finished."""
        if self.done[i % 2] is not None:
            self.done[i % 2].synchronize()
        return self.memory[i % 2].view(dtype)[:shape[0] * shape[1]].reshape(shape)

    def copied(self, i: int, stream: Any) -> Any:
        self.done[i % 2] = stream.record()
        return self.done[i % 2]

    def finish(self) -> None:
        """Wait for both buffers' last copies."""
        for done in self.done:
            if done is not None:
                done.synchronize()


_idle: list = []  # pinned buffers no copy is using (under _idle_lock)
_idle_lock = threading.Lock()
_pool: dict = {}  # COPY_THREADS: its copying threads (under _pool_lock; made again where it changed)
_pool_lock = threading.Lock()


@contextlib.contextmanager
def _buffers(cupy: Any) -> Iterator[_Buffers]:
    """Pinned buffers for one copy, idle again when it ends: ones another copy left (each buffer
    is written again only after its last copy finished), else new ones.  So there are as many
    as copies ever ran at once, not a pair for every thread that ever copied (the threaded
    scheduler has one per CPU).  Where ``PIECE_BYTES`` changed, new ones, once the old ones'
    last copies have finished."""
    with _idle_lock:
        buffers = _idle.pop() if _idle else None
    if buffers is not None and buffers.memory[0].size != PIECE_BYTES:
        buffers.finish()
        buffers = None
    if buffers is None:
        buffers = _Buffers(cupy)
    try:
        yield buffers
    finally:
        with _idle_lock:
            _idle.append(buffers)


def _host_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` by ``COPY_THREADS`` threads at once, each a band of rows (NumPy lets
    go of the GIL while it copies)."""
    threads = settings()[1]
    with _pool_lock:
        if threads not in _pool:  # the old pool's threads end once no copy uses it (its
            _pool.clear()          # weak reference), not at once: a copy may be starting there
            _pool[threads] = ThreadPoolExecutor(threads, thread_name_prefix="mgemm-copy")
        pool = _pool[threads]
    cuts = np.linspace(0, len(dst), threads + 1).astype(int)
    list(pool.map(lambda i: np.copyto(dst[cuts[i]:cuts[i + 1]], src[cuts[i]:cuts[i + 1]]),
                  range(threads)))


def _bits(x: Any) -> Any:
    """``x``, or a bfloat16 array (ml_dtypes' type, which NumPy holds as opaque 2-byte items) viewed
    as 16-bit unsigned integers: the pinned buffers copy bits, whatever they mean."""
    return x.view(np.uint16) if is_bfloat16(x.dtype) else x


def to_device(cupy: Any, x: Any, stream: Any) -> Any:
    """``x`` copied to the current GPU on ``stream`` (queued there: the stream orders what reads
    it).  ``PINNED_COPIES``: a band of rows at a time through a pair of pinned buffers (any
    strides on the host); a buffer is written again only after the copy out of it finished."""
    bits = _bits(x)
    step = _rows(bits)
    with stream:  # the copy's memory from the stream that writes it
        if not step:
            return cupy.asarray(x)
        out = cupy.empty(bits.shape, bits.dtype)
        with _buffers(cupy) as buffers:
            for i, r in enumerate(range(0, bits.shape[0], step)):
                band = bits[r:r + step]
                staged = buffers.take(i, bits.dtype, band.shape)
                _host_copy(staged, band)
                out[r:r + step].set(staged, stream=stream)
                buffers.copied(i, stream)
        return out if bits is x else out.view(x.dtype)


def to_host(cupy: Any, x: Any, stream: Any, out: np.ndarray | None = None) -> np.ndarray:
    """The device array ``x`` as a host array, copied on ``stream`` (the work that wrote ``x``
    must be ordered before it): into ``out`` (C-contiguous, ``x``'s shape and type) where given,
    else a new one.  ``PINNED_COPIES``: a band of rows at a time into a pair of pinned buffers,
    each copied on into the host array while the next crosses."""
    if not x.flags.c_contiguous:  # cuBLAS writes column-major blocks: row-major on the GPU first
        with stream:
            x = cupy.ascontiguousarray(x)
    bits = _bits(x)
    step = _rows(bits)
    if not step:
        return cupy.asnumpy(x, stream=stream, out=out)
    if out is None:
        out = np.empty(x.shape, x.dtype)
    dst = _bits(out)
    with _buffers(cupy) as buffers:
        pending = None
        for i, r in enumerate(range(0, bits.shape[0], step)):
            band = bits[r:r + step]
            staged = buffers.take(i, bits.dtype, band.shape)
            cupy.asnumpy(band, stream=stream, out=staged, blocking=False)
            arrived = buffers.copied(i, stream)
            if pending is not None:
                _finish(*pending)
            pending = (arrived, staged, dst[r:r + step])
        if pending is not None:
            _finish(*pending)
    return out


def _finish(arrived: Any, staged: np.ndarray, dst: np.ndarray) -> None:
    arrived.synchronize()
    _host_copy(dst, staged)
