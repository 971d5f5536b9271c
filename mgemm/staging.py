"""Device copies of host chunks, shared by the staged block tasks of one worker process.

A GPU engine given NumPy chunks copies each block's chunks to the GPU (``mgemm.graph``).  The plan
orders a worker's blocks so that A's row panels and B's column panels are read again by the next
blocks there, so without a cache every chunk crosses the host link once per block that reads it:
a 4 × 4 grid of blocks on one GPU moves each input four times.  With it, a chunk the plan reads
again on this worker is copied once, kept, and dropped after its last read there.

``build`` marks every chunk a block task reads with what the plan says about it on that worker
(``reuse_marks``): ``ONCE`` (no other read there: copied, not kept), ``KEEP`` (read again later:
kept after the copy) or ``LAST`` (the last of several reads: used from the cache if there, then
dropped).  Tasks run out of the plan's order only where they may (two task threads, a lost
worker's blocks run elsewhere), and then a mark is only a hint: a chunk not in the cache is copied.

The copies may hold ``CACHE_FRACTION`` of the GPU's memory; a copy that does not fit is used and
not kept.  A staged plan sizes each task slot's working set to a share of the GPU's memory
(``mgemm.plan.MEMORY_FRACTION``), and the inputs themselves are in host memory, so the rest is
free.  An entry lasts until its ``LAST`` read, or until its host chunk is released (a weak
reference), whichever comes first: one whose last read ran on another worker stays until then.

Streams: a copy is made on the loading thread's copy stream and recorded by an event; a task that
finds it in the cache makes its own copy stream wait for that event before using it.  Memory: the
cache holds one reference, each task that reads a copy holds another until its GPU work is done
(``mgemm.graph._staged_block``), so a copy is never freed, and its memory never reused, while a
queued GEMM may still read it.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, NamedTuple

#: Share of the GPU's memory the kept copies may hold (0: nothing is kept).
CACHE_FRACTION = 0.4
#: A chunk's mark (one character per chunk a block task reads, ``reuse_marks``).
ONCE, KEEP, LAST = "0", "1", "2"


class _Entry(NamedTuple):
    ref: weakref.ref  # the host chunk
    copy: Any  # its device copy
    ready: Any  # an event recorded after the copy, on the stream that made it
    nbytes: int


class DeviceCopies:
    """The kept device copies of this process, by GPU and host chunk (its identity, checked by a
    weak reference, so a chunk released and another made at its address is not mistaken)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._bytes: dict[int, int] = {}
        self._dead: list = []  # weak references whose chunk died (appended by their callback)

    def get(self, device: int, x: Any) -> tuple[Any, Any] | None:
        """(copy, ready event) of ``x`` on ``device``, or None."""
        with self._lock:
            self._purge()
            entry = self._entries.get((device, id(x)))
            if entry is None or entry.ref() is not x:
                return None
            return entry.copy, entry.ready

    def put(self, device: int, x: Any, copy: Any, ready: Any, limit: int) -> bool:
        """Keep ``copy`` of ``x`` if the device's kept copies stay within ``limit`` bytes."""
        nbytes = int(copy.nbytes)
        try:
            ref = weakref.ref(x, self._dead.append)  # list.append: no lock taken during a GC
        except TypeError:  # an object without weak references: never kept
            return False
        with self._lock:
            self._purge()
            key = (device, id(x))
            if key in self._entries or self._bytes.get(device, 0) + nbytes > limit:
                return False
            self._entries[key] = _Entry(ref, copy, ready, nbytes)
            self._bytes[device] = self._bytes.get(device, 0) + nbytes
            return True

    def drop(self, device: int, x: Any) -> None:
        """Forget ``x``'s copy on ``device`` (tasks still holding it keep it alive)."""
        with self._lock:
            entry = self._entries.get((device, id(x)))
            if entry is not None and entry.ref() is x:
                self._remove((device, id(x)))

    def nbytes(self, device: int) -> int:
        """Bytes of the copies kept on ``device``."""
        with self._lock:
            self._purge()
            return self._bytes.get(device, 0)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes.clear()
            self._dead.clear()

    def _purge(self) -> None:
        """Drop the entries whose host chunk died (under the lock)."""
        while self._dead:
            ref = self._dead.pop()
            for key, entry in list(self._entries.items()):
                if entry.ref is ref:
                    self._remove(key)

    def _remove(self, key: tuple[int, int]) -> None:
        entry = self._entries.pop(key)
        self._bytes[key[0]] -= entry.nbytes


#: This process's copies (a worker's task threads share them).
COPIES = DeviceCopies()


def load_order(shape: tuple[int, int, int]) -> list[int]:
    """The order in which a staged block task loads its chunks (``mgemm.graph``'s order of a
    block task's chunks: A's ``rows × ks`` row by row, then B's ``ks × cols``): by K part, A's
    chunks of the part, then B's."""
    rows, ks, cols = shape
    off = rows * ks
    order = []
    for k in range(ks):
        order += [r * ks + k for r in range(rows)]
        order += [off + k * cols + j for j in range(cols)]
    return order


def reuse_marks(tasks: list[tuple[Any, tuple[int, int, int], list]]) -> dict:
    """Each block task's marks, from one worker's tasks in the plan's order: ``tasks`` holds
    (task key, shape, the chunk keys it reads in ``mgemm.graph`` order); the result maps each
    task key to a string of one mark per chunk, in that order.  Reads are counted in the order
    the tasks load them (``load_order``), so a chunk read twice by one task (``x @ x``) is kept
    by its first read there and dropped by its last.

    >>> reuse_marks([("t0", (1, 1, 1), ["a0", "b0"]), ("t1", (1, 1, 1), ["a0", "b1"])])
    {'t0': '10', 't1': '20'}
    """
    reads: dict = {}
    for _, shape, keys in tasks:
        for i in load_order(shape):
            reads[keys[i]] = reads.get(keys[i], 0) + 1
    seen: dict = {}
    marks = {}
    for task, shape, keys in tasks:
        mark = [ONCE] * len(keys)
        for i in load_order(shape):
            seen[keys[i]] = seen.get(keys[i], 0) + 1
            if reads[keys[i]] > 1:
                mark[i] = LAST if seen[keys[i]] == reads[keys[i]] else KEEP
        marks[task] = "".join(mark)
    return marks


_memory: dict[int, int] = {}  # each GPU's memory, in bytes


def limit(cupy: Any, device: int) -> int:
    """``CACHE_FRACTION`` of ``device``'s memory, in bytes."""
    if device not in _memory:
        _memory[device] = int(cupy.cuda.Device(device).mem_info[1])
    return int(CACHE_FRACTION * _memory[device])


def load(cupy: Any, copies: Any, x: Any, mark: str, typed: Any) -> Any:
    """``x``'s device copy for a task whose copy stream ``copies`` is current: the kept one (the
    stream made to wait for it) or a new one, kept when ``mark`` says a later task reads it too;
    a ``LAST`` read drops the kept one.  ``typed``: what ``x`` is copied as."""
    device = cupy.cuda.Device().id
    found = COPIES.get(device, x)
    if found is not None:
        copy, ready = found
        copies.wait_event(ready)
        if mark == LAST:
            COPIES.drop(device, x)
        return copy
    copy = cupy.asarray(typed(x))
    if mark == KEEP:
        COPIES.put(device, x, copy, copies.record(), limit(cupy, device))
    return copy
