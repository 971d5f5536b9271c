"""NumPy chunks staged through a GPU engine (``mgemm.graph._staged_block``), on the CPU: a stand-in
``cupy`` module (NumPy arrays whose type names the module "cupy", streams and events that log what
is queued where) and a stand-in engine, so the part-by-part protocol and its arithmetic are checked
where there is no GPU.  The GPU runs the same products for real: ``tests/test_gpu.py``."""

from __future__ import annotations

import itertools
import sys
import threading
import time
import types

import dask
import dask.array as da
import numpy as np
import pytest

import mgemm
from conftest import assert_close, random
from mgemm import engines, graph, staging


class DeviceArray(np.ndarray):
    """A NumPy array that ``engines.is_cupy`` takes for a CuPy one (it reads the type's module);
    ``set`` copies a host array in, logged to the fake module's log as a copy on its stream."""

    log: list = []

    def set(self, arr, stream=None):
        DeviceArray.log.append(("copy piece", stream.name, len(arr)))
        self[...] = arr


DeviceArray.__module__ = "cupy._core.core"


def fake_cupy(log: list) -> types.ModuleType:
    """The parts of CuPy a staged block uses; ``log`` gets (what, stream, ...) in call order."""
    ids = itertools.count()
    cp = types.ModuleType("cupy")
    current: list = []

    class Event:
        def __init__(self, disable_timing: bool = False) -> None:
            self.id = next(ids)

        def record(self, stream=None) -> None:
            log.append(("record", (stream or current[-1]).name, self.id))

        def synchronize(self) -> None:
            log.append(("synchronize", None, self.id))

    class Stream:
        def __init__(self, non_blocking: bool = False, name: str | None = None) -> None:
            self.name = name or f"stream{next(ids)}"

        def __enter__(self):
            current.append(self)
            return self

        def __exit__(self, *exc) -> None:
            current.pop()

        def record(self) -> Event:
            event = Event()
            event.record(self)
            return event

        def wait_event(self, event: Event) -> None:
            log.append(("wait", self.name, event.id))

    Stream.null = Stream(name="null")
    current.append(Stream.null)

    def asarray(x):
        log.append(("copy", current[-1].name))
        return np.array(x).view(DeviceArray)

    def asnumpy(x, stream=None, out=None, blocking=True):
        log.append(("copy back", (stream or current[-1]).name, blocking))
        if out is None:
            return np.array(x)
        out[...] = x
        return out

    DeviceArray.log = log
    cp.asarray, cp.asnumpy, cp.dtype = asarray, asnumpy, np.dtype
    cp.empty = lambda shape, dtype: np.empty(shape, dtype).view(DeviceArray)
    cp.ascontiguousarray = lambda x: np.ascontiguousarray(x).view(DeviceArray)
    cp.concatenate = lambda arrays, axis=0: np.concatenate(arrays, axis).view(DeviceArray)
    cp.cuda = types.SimpleNamespace(Stream=Stream, Event=Event,
                                    get_current_stream=lambda: current[-1],
                                    alloc_pinned_memory=lambda nbytes: bytearray(nbytes),
                                    Device=lambda *_: types.SimpleNamespace(
                                        id=0, mem_info=(1 << 30, 1 << 30)))
    cp.current = current
    return cp


class FakeEngine:
    """``alpha · Σ a_k @ b_k + beta · c`` in ``out_dtype`` with NumPy, logging the stream it queues on."""

    name = "cublas"

    def __init__(self, log: list, cp) -> None:
        self.log, self.cp = log, cp

    def gemm(self, a_parts, b_parts, *, alpha=1.0, beta=0.0, c=None, out_dtype=None,
             allow_tf32=False, tune=False):
        self.log.append(("gemm", self.cp.current[-1].name, len(a_parts)))
        dtype = np.dtype(out_dtype)
        acc = np.zeros((a_parts[0].shape[0], b_parts[0].shape[1]), dtype)
        for a, b in zip(a_parts, b_parts):
            acc += np.asarray(a).astype(dtype) @ np.asarray(b).astype(dtype)
        return engines.scale_and_add(acc, alpha, beta, None if c is None else np.asarray(c),
                                     np).view(DeviceArray)


@pytest.fixture
def staged(monkeypatch):
    """The stand-ins in place of CuPy and the cublas engine; this thread's streams fresh; CuPy's
    own copies (the ``pinned`` fixture turns mgemm's pinned buffers on)."""
    log: list = []
    cp = fake_cupy(log)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(engines, "_streams", threading.local())
    monkeypatch.setitem(engines._cache, "cublas", FakeEngine(log, cp))
    monkeypatch.setattr(staging, "COPIES", staging.DeviceCopies())
    monkeypatch.setattr(staging, "_idle", [])
    monkeypatch.setattr(staging, "PINNED_COPIES", False)
    return log


def _product(dtype, rng, alpha, beta):
    a, b, c = random(rng, (60, 50), dtype), random(rng, (50, 40), dtype), random(rng, (60, 40), dtype)
    if dtype == "bool":  # sparse enough that the entries are not all True
        a, b, c = rng.random(a.shape) < 0.05, rng.random(b.shape) < 0.05, rng.random(c.shape) < 0.05
    x = da.from_array(a, chunks=((25, 35), (20, 16, 14)))  # two row chunks, three K parts
    y = da.from_array(b, chunks=((12, 38), (40,)))
    with dask.config.set(scheduler="sync"):
        got = mgemm.gemm(x, y, da.from_array(c, chunks=20), alpha=alpha, beta=beta,
                         engine="cublas", block_size=(60, 40)).compute()
    return a, b, c, got


def _check_product(dtype, alpha, beta, a, b, c, got):
    """``got`` is ``alpha · a @ b + beta · c``: exactly in the type itself for integers and
    bool, else within the dtype's bound of the float64 (complex128) product."""
    if np.dtype(dtype).kind in "iub":
        typed = np.dtype(dtype).type
        np.testing.assert_array_equal(got, typed(alpha) * (a @ b) + typed(beta) * c)
    else:
        wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
        assert_close(got, alpha * (a.astype(wide) @ b.astype(wide)) + beta * c.astype(wide),
                     dtype)


@pytest.mark.parametrize("by_part", [True, False], ids=["by_part", "whole"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "complex64", "int64", "bool"])
def test_staged_block_values(staged, rng, monkeypatch, dtype, by_part):
    """alpha on every K part, beta · C on the first only, 16-bit parts added in float32 and
    rounded once, a NumPy block back in the product's type."""
    monkeypatch.setattr(graph, "STAGE_BY_PART", by_part)
    alpha, beta = {"int64": (3, 2), "bool": (1, 1)}.get(dtype, (0.5, 2))
    a, b, c, got = _product(dtype, rng, alpha, beta)
    assert type(got) is np.ndarray and got.dtype == np.dtype(dtype)
    parts = len(graph.common_k_chunks((20, 16, 14), (12, 38)))  # K cut at 12, 20, 36: four parts
    assert sum(what == "gemm" for what, *_ in staged) == (parts if by_part else 1)
    _check_product(dtype, alpha, beta, a, b, c, got)


def test_staged_block_queues_each_part_after_its_copies(staged, rng, monkeypatch):
    """By part: every copy in, and the part's panels made of the copies, go to the copy stream;
    each GEMM goes to the block's own stream after that stream waited for an event recorded on
    the copy stream after the part's copies and panels; the copy back, on the copy stream, comes
    after the block's end was synchronized."""
    cp = sys.modules["cupy"]
    concatenate = cp.concatenate
    monkeypatch.setattr(cp, "concatenate", lambda arrays, axis=0: staged.append(
        ("concatenate", cp.current[-1].name)) or concatenate(arrays, axis))
    _product("float32", rng, 0.5, 2)
    gemms = [i for i, entry in enumerate(staged) if entry[0] == "gemm"]
    copies = {entry[1] for entry in staged if entry[0] == "copy"}
    assert len(copies) == 1 and "null" not in copies, copies
    copy_stream = copies.pop()
    task_stream = staged[gemms[0]][1]
    assert task_stream not in (copy_stream, "null")
    recorded = {entry[2]: i for i, entry in enumerate(staged)
                if entry[0] == "record" and entry[1] == copy_stream}
    start = 0
    for g in gemms:
        assert staged[g][1] == task_stream
        part = staged[start:g]
        waits = [entry[2] for entry in part if entry[0] == "wait" and entry[1] == task_stream]
        assert waits and waits[-1] in recorded, part  # waited for a copy-stream event ...
        last_copy = max(i for i, entry in enumerate(staged[:g]) if entry[0] == "copy")
        assert recorded[waits[-1]] > last_copy  # ... recorded after this part's copies
        panels = [start + i for i, entry in enumerate(part) if entry[0] == "concatenate"]
        assert panels and {staged[i][1] for i in panels} == {copy_stream}, part
        assert recorded[waits[-1]] > max(panels)
        start = g + 1
    back = [i for i, entry in enumerate(staged) if entry[0] == "copy back"]
    assert back and min(back) > gemms[-1]
    assert {staged[i][1] for i in back} == {copy_stream}
    # ... after the copy stream waited for an event the block's stream recorded after its GEMMs
    ends = {entry[2]: i for i, entry in enumerate(staged)
            if entry[0] == "record" and entry[1] == task_stream}
    waits = [entry[2] for entry in staged[:min(back)] if entry[0] == "wait"
             and entry[1] == copy_stream]
    assert waits and ends.get(waits[-1], -1) > gemms[-1]


def test_back_bands_cover_the_rows_once_in_order():
    """``back_bands``: contiguous bands from 0 to ``rows``, none empty (one band of 0 rows for an
    empty block), at most ``BACK_BANDS`` of them, one where the block is under two bands of
    ``BAND_ROWS``, each of at least ``BAND_ROWS`` rows where there are several, and cut at
    multiples of 128 rows where every band can hold that many (4097 rows were cut 2176 + 1921)."""
    for rows in [0, 1, 127, 2047, 4095, 4096, 4097, 5000, 8192, 8193, 8200, 12_287, 16384,
                 32768, 100_003, *range(4096, 70_000, 997)]:
        bands = graph.back_bands(rows)
        assert bands[0][0] == 0 and bands[-1][1] == rows
        assert all(r1 == s0 for (_, r1), (s0, _) in zip(bands, bands[1:]))
        assert all(r1 > r0 for r0, r1 in bands) or bands == [(0, 0)]
        assert len(bands) == max(1, min(graph.BACK_BANDS, rows // graph.BAND_ROWS))
        if rows >= 128 * len(bands):
            assert all(r0 % 128 == 0 for r0, _ in bands)
        if len(bands) > 1:
            assert min(r1 - r0 for r0, r1 in bands) >= graph.BAND_ROWS, (rows, bands)
            assert max(r1 - r0 for r0, r1 in bands) - min(r1 - r0 for r0, r1 in bands) < 128 * len(
                bands), (rows, bands)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_last_part_is_multiplied_and_copied_back_by_bands_of_rows(staged, rng, monkeypatch,
                                                                      dtype):
    """By part, the last K part's GEMM runs in bands of rows (``graph.back_bands``), all queued
    before the first copy back; band i's copy back, on the copy stream, waits for an event the
    block's stream recorded after band i's GEMM and before band i + 1's, and the block comes back
    whole, in its type, with every band's values."""
    monkeypatch.setattr(graph, "BAND_ROWS", 16)  # 60 rows: three bands of 20
    assert graph.back_bands(60) == [(0, 20), (20, 40), (40, 60)]
    engine = engines._cache["cublas"]
    rows, gemm = [], engine.gemm
    monkeypatch.setattr(engine, "gemm", lambda a_parts, b_parts, **kw: rows.append(
        a_parts[0].shape[0]) or gemm(a_parts, b_parts, **kw))
    a, b, c, got = _product(dtype, rng, 0.5, 2)
    assert rows == [60, 60, 60, 20, 20, 20]  # four K parts, the last in three bands
    assert type(got) is np.ndarray and got.dtype == np.dtype(dtype) and got.shape == (60, 40)
    _check_product(dtype, 0.5, 2, a, b, c, got)
    gemms = [i for i, entry in enumerate(staged) if entry[0] == "gemm"]
    task_stream = staged[gemms[0]][1]
    back = [i for i, entry in enumerate(staged) if entry[0] == "copy back"]
    assert len(back) == 3 and min(back) > gemms[-1]
    recorded = {entry[2]: i for i, entry in enumerate(staged)
                if entry[0] == "record" and entry[1] == task_stream}
    bands = gemms[-3:] + [len(staged)]
    for band, copy in enumerate(back):
        before = staged[back[band - 1] if band else 0:copy]
        waits = [entry[2] for entry in before if entry[0] == "wait" and entry[1] != task_stream]
        assert waits and bands[band] < recorded.get(waits[-1], -1) < bands[band + 1], before


@pytest.mark.parametrize("dtype, acc", [("float16", "float32"), ("float32", "float32"),
                                        ("int64", "int64")])
def test_staged_parts_are_multiplied_into_the_accumulator_type(staged, monkeypatch, dtype, acc):
    """By part, every K part's GEMM writes ``engines.accumulator_dtype``: a float16 block adds up
    in float32 and is rounded once at the end, not once per part."""
    rng = np.random.default_rng(41)
    engine = engines._cache["cublas"]
    asked, gemm = [], engine.gemm
    monkeypatch.setattr(engine, "gemm", lambda *args, **kw: asked.append(np.dtype(kw["out_dtype"]))
                        or gemm(*args, **kw))
    alpha, beta = (3, 2) if dtype == "int64" else (0.5, 2)
    a, b, c, got = _product(dtype, rng, alpha, beta)
    assert len(asked) == 4 and set(asked) == {np.dtype(acc)}
    assert got.dtype == np.dtype(dtype)
    if dtype == "int64":
        np.testing.assert_array_equal(got, 3 * (a @ b) + 2 * c)
    else:
        wide = a.astype(np.float64) @ b.astype(np.float64)
        assert_close(got, 0.5 * wide + 2 * c.astype(np.float64), dtype)


@pytest.mark.parametrize("by_part", [True, False], ids=["by_part", "whole"])
def test_staged_block_hands_the_engine_device_arrays(staged, monkeypatch, by_part):
    """Every operand a staged block's engine gets is on the device, C included (the whole block
    copied at once as well as part by part)."""
    rng = np.random.default_rng(42)
    monkeypatch.setattr(graph, "STAGE_BY_PART", by_part)
    engine = engines._cache["cublas"]
    kinds, gemm = set(), engine.gemm

    def checking(a_parts, b_parts, **kw):
        kinds.update(type(x).__name__ for x in (*a_parts, *b_parts, kw["c"]))
        return gemm(a_parts, b_parts, **kw)
    monkeypatch.setattr(engine, "gemm", checking)
    a, b, c, got = _product("float32", rng, 0.5, 2)
    assert kinds == {"DeviceArray"}
    assert_close(got, 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2 * c, np.float32)


def test_a_staged_blocks_operands_stay_referenced_until_its_copy_back(staged, monkeypatch):
    """By part, every panel a part's GEMM was given, and C's copy, is still referenced when the
    block's copy back is queued: their memory came from the copy stream's pool, which does not
    know that a queued GEMM may still read it."""
    import gc
    import weakref

    rng = np.random.default_rng(44)
    engine = engines._cache["cublas"]
    refs, gemm = [], engine.gemm

    def watching(a_parts, b_parts, **kw):  # a band of the last part's A: its panel, the base
        refs.extend(weakref.ref(x if x.base is None else x.base) for x in (*a_parts, *b_parts))
        if len(refs) == 2:  # the first part: C's copy (later parts add to the running sum)
            refs.append(weakref.ref(kw["c"]))
        return gemm(a_parts, b_parts, **kw)
    monkeypatch.setattr(engine, "gemm", watching)
    alive, to_host = [], staging.to_host

    def checking(cupy, x, stream, **kw):
        gc.collect()
        alive.append(sum(ref() is not None for ref in refs))
        return to_host(cupy, x, stream, **kw)
    monkeypatch.setattr(staging, "to_host", checking)
    a, b, c, got = _product("float32", rng, 0.5, 2)
    assert alive == [len(refs)] and len(refs) == 4 * 2 + 1
    assert_close(got, 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2 * c, np.float32)


def test_an_emulated_staged_block_is_multiplied_whole(staged, monkeypatch):
    """``emulate_fp32``: a staged block is copied whole and multiplied by ``mgemm.emulate.gemm``
    over all its K parts (not part by part with the engine's plain product)."""
    rng = np.random.default_rng(43)
    from mgemm import emulate

    calls = []

    def emulated(engine, a_parts, b_parts, scheme, **kw):
        calls.append((scheme, len(a_parts)))
        return engine.gemm(a_parts, b_parts, **kw)  # the exact product, as off sm_90
    monkeypatch.setattr(emulate, "gemm", emulated)
    a, b, c = (random(rng, s, "float32") for s in ((60, 50), (50, 40), (60, 40)))
    x = da.from_array(a, chunks=((25, 35), (20, 16, 14)))
    y = da.from_array(b, chunks=((12, 38), (40,)))
    with dask.config.set(scheduler="sync"):
        got = mgemm.gemm(x, y, c, alpha=0.5, beta=2, engine="cublas", block_size=(60, 40),
                         emulate_fp32="bf16x6").compute()
    assert calls == [("bf16x6", 4)]
    assert_close(got, 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2 * c, np.float32)


def _blocks_sharing_chunks(rng):
    """Two 1 x 1 x 2 block tasks that read the same two chunks of A (K in two parts) and B's
    two column panels: (A, [B0, B1]) and the chunks in ``_block_task`` order per task."""
    a = random(rng, (6, 8), "float32")
    b = [random(rng, (8, 5), "float32") for _ in range(2)]
    a_chunks = [a[:, :4], a[:, 4:]]
    tasks = [[*a_chunks, bj[:4], bj[4:]] for bj in b]
    return a, b, tasks


def _run_block(chunks, marks):
    return graph._block_task("cublas", (1, 2, 1), None, 1.0, 0.0, "float32", False, "off",
                             False, marks, *chunks)


def test_a_block_failing_part_way_waits_for_the_gemms_it_queued(staged, rng, monkeypatch):
    """A staged block whose second part's copy fails after the first part's GEMM was queued: the
    task still records an event on its stream after that GEMM and waits for it before the error
    leaves it (its arrays are let go of then: no GEMM of it may still run on them)."""
    to_device, calls = staging.to_device, []

    def failing(cupy, x, stream, **kw):
        calls.append(x.shape)
        if len(calls) == 3:  # the second part's first chunk
            raise MemoryError("out of memory allocating (injected)")
        return to_device(cupy, x, stream, **kw)
    monkeypatch.setattr(staging, "to_device", failing)
    _, _, tasks = _blocks_sharing_chunks(rng)
    with pytest.raises(MemoryError, match="injected"):
        _run_block(tasks[0], "")
    gemm = next(i for i, entry in enumerate(staged) if entry[0] == "gemm")
    task_stream = staged[gemm][1]
    after = {entry[2] for entry in staged[gemm:] if entry[0] == "record" and entry[1] == task_stream}
    waited = [entry[2] for entry in staged[gemm:] if entry[0] == "synchronize"]
    assert after & set(waited), staged[gemm:]


def test_staged_chunks_read_again_are_copied_once_and_dropped_after_their_last_read(staged, rng):
    """The plan's counts: A's chunks are copied and kept by the first block and used, then
    dropped, by the second; B's are copied once each; nothing stays kept afterwards."""
    a, b, tasks = _blocks_sharing_chunks(rng)
    marks = staging.reuse_marks("p", [(t, [("a", 0, 0), ("a", 0, 1), ("b", 0, t), ("b", 1, t)])
                                      for t in range(2)])
    assert marks == {0: "p;2,2,1,1", 1: "p;2,2,1,1"}
    got = [_run_block(chunks, marks[t]) for t, chunks in enumerate(tasks)]
    for out, bj in zip(got, b):
        assert_close(out, a.astype(np.float64) @ bj.astype(np.float64), "float32")
    assert sum(entry[0] == "copy" for entry in staged) == 2 + 4  # A's two once, B's four
    assert (staging.COPIES.kept, staging.COPIES.hits) == (2, 2)
    assert staging.COPIES.nbytes(0) == 0


def test_staged_chunks_are_copied_per_read_when_nothing_may_be_kept(staged, rng, monkeypatch):
    """With ``CACHE_FRACTION`` 0 (or chunks that do not fit) every read copies, with the same
    result."""
    monkeypatch.setattr(staging, "CACHE_FRACTION", 0.0)
    a, b, tasks = _blocks_sharing_chunks(rng)
    got = [_run_block(chunks, "p;2,2,1,1") for chunks in tasks]
    assert sum(entry[0] == "copy" for entry in staged) == 8
    assert (staging.COPIES.kept, staging.COPIES.hits) == (0, 0)
    for out, bj in zip(got, b):
        assert_close(out, a.astype(np.float64) @ bj.astype(np.float64), "float32")


def test_a_block_without_marks_copies_every_read(staged, rng):
    """A block task built without reuse marks (``build`` gives none where the operands' meta is
    CuPy, and a chunk turns out NumPy) copies each chunk for each read and keeps nothing."""
    a, b, tasks = _blocks_sharing_chunks(rng)
    got = [_run_block(chunks, "") for chunks in tasks]
    for out, bj in zip(got, b):
        assert_close(out, a.astype(np.float64) @ bj.astype(np.float64), "float32")
    assert sum(entry[0] == "copy" for entry in staged) == 8
    assert staging.COPIES.kept == 0 and not staging.COPIES._entries


def test_a_copy_kept_by_another_thread_is_waited_for_on_the_copy_stream(staged, rng):
    """A task that uses a copy another thread made makes its own copy stream wait for the event
    recorded after that copy, before the part's GEMM is queued."""
    a, b, tasks = _blocks_sharing_chunks(rng)
    other = threading.Thread(target=_run_block, args=(tasks[0], "p;2,2,1,1"))
    other.start()
    other.join()
    first = len(staged)
    kept = {entry[2] for entry in staged if entry[0] == "record"}
    out = _run_block(tasks[1], "p;2,2,1,1")
    assert_close(out, a.astype(np.float64) @ b[1].astype(np.float64), "float32")
    mine = staged[first:]
    copy_stream = next(entry[1] for entry in mine if entry[0] == "copy")
    waited = [i for i, entry in enumerate(mine)
              if entry[0] == "wait" and entry[1] == copy_stream and entry[2] in kept]
    gemm = next(i for i, entry in enumerate(mine) if entry[0] == "gemm")
    assert len(waited) == 2 and waited[0] < gemm  # one per kept chunk of A, each before use
    assert staging.COPIES.nbytes(0) == 0


def test_a_read_while_the_copy_is_being_made_waits_for_it():
    """Two reads at once: the second waits until the first has made (and recorded) the copy,
    and uses it; the third and last drops it."""
    copies = staging.DeviceCopies()
    x = np.ones((4, 4))
    entry, mine = copies.claim(0, "p", x, 3, limit=1 << 20)
    assert mine and entry is not None and copies.nbytes(0) == 128
    got: list = []
    reader = threading.Thread(target=lambda: got.append(copies.claim(0, "p", x, 3, 1 << 20)))
    reader.start()
    reader.join()
    other, mine = got[0]
    assert other is entry and not mine and not entry.loaded.is_set()  # it must wait
    entry.copy, entry.ready = "copy", "ready"
    entry.loaded.set()
    last, mine = copies.claim(0, "p", x, 3, limit=1 << 20)
    assert last is entry and not mine and copies.nbytes(0) == 0
    assert copies.claim(0, "q", x, 2, limit=1 << 20)[1]  # another product counts on its own
    assert copies.nbytes(0) == 128


def test_reads_are_counted_where_no_copy_is_kept():
    """A chunk whose first read found no room, or whose copy failed, is not kept by a later
    read, and its entry goes after the last read, so nothing stays behind."""
    copies = staging.DeviceCopies()
    x = np.ones((4, 4))
    assert copies.claim(0, "p", x, 3, limit=64) == (None, True)  # no room for 128 bytes
    assert copies.claim(0, "p", x, 3, limit=1 << 20) == (None, True)  # room now: still not kept
    assert copies.claim(0, "p", x, 3, limit=1 << 20) == (None, True)
    assert copies.nbytes(0) == 0 and not copies._entries
    y = np.ones((2, 2))
    failed, mine = copies.claim(0, "p", y, 3, limit=1 << 20)
    waiting, mine_too = copies.claim(0, "p", y, 3, limit=1 << 20)
    copies.abandon(0, "p", y, failed)
    assert waiting is failed and not mine_too
    assert failed.loaded.is_set() and failed.copy is None and copies.nbytes(0) == 0
    assert copies.claim(0, "p", y, 3, limit=1 << 20) == (None, True)  # the last read
    assert not copies._entries


def test_a_copy_that_fails_does_not_leave_readers_waiting(staged):
    """If recording the copy's event fails, the copy is given up: a reader waiting for it is
    let go and makes its own."""
    cp = sys.modules["cupy"]
    stream, broken = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    x = np.ones((4, 4))

    def no_event():
        raise RuntimeError("no event")

    broken.record = no_event
    with pytest.raises(RuntimeError, match="no event"):
        staging.load(cp, broken, x, "p", 2, lambda v: v)
    entry = staging.COPIES._entries[(0, "p", id(x))]
    assert entry.loaded.is_set() and entry.copy is None and staging.COPIES.nbytes(0) == 0
    staged.clear()
    np.testing.assert_array_equal(staging.load(cp, stream, x, "p", 2, lambda v: v), x)
    assert [what for what, *_ in staged] == ["copy"] and not staging.COPIES._entries


def test_a_kept_copy_goes_with_its_host_chunk():
    """An entry lasts no longer than its host chunk: released, the chunk's copy is forgotten at
    once, and another object at the same address is not taken for it; a chunk read once, or one
    that does not fit, is not kept."""
    import gc

    copies = staging.DeviceCopies()
    x = np.ones((4, 4))
    entry, mine = copies.claim(0, "p", x, 2, limit=1 << 20)
    assert mine and entry is not None and copies.nbytes(0) == 128
    assert copies.claim(0, "p", np.ones(1000), 2, limit=1 << 10) == (None, True)  # too big
    assert copies.claim(0, "p", np.ones(4), 1, limit=1 << 20) == (None, True)  # read once
    del x
    gc.collect()
    assert copies.nbytes(0) == 0
    assert copies.claim(0, "p", np.ones((4, 4)), 1, limit=1 << 20) == (None, True)


def test_a_chunk_that_just_fills_the_room_left_is_kept():
    """A first read keeps its copy where the kept copies then hold at most the limit, exactly
    the limit included, and not where they would hold one byte more."""
    copies = staging.DeviceCopies()
    x, y, z = np.ones((4, 4)), np.ones(1), np.ones(1)
    assert copies.claim(0, "p", x, 2, limit=128)[0] is not None  # 128 bytes of 128
    assert copies.claim(0, "p", y, 2, limit=135) == (None, True)  # 136 bytes of 135
    assert copies.claim(0, "p", z, 2, limit=136)[0] is not None
    assert copies.nbytes(0) == 136 and copies.kept == 2


def test_parse_marks_reads_back_what_reuse_marks_wrote():
    """``parse_marks`` inverts ``reuse_marks`` for any product name (one holding a semicolon
    too), a chunk one task reads twice counted twice."""
    for product in ("p", "mgemm-block-0a1b", "a;b"):
        marks = staging.reuse_marks(product, [("t0", ["k0", "k1", "k0"]), ("t1", ["k1"])])
        assert staging.parse_marks(marks["t0"], 3) == (product, [2, 2, 2])
        assert staging.parse_marks(marks["t1"], 1) == (product, [2])


def test_the_room_for_copies_is_a_share_of_the_gpus_total_memory(staged, monkeypatch):
    """``limit``: ``CACHE_FRACTION`` of the GPU's total memory (not of what is free, which the
    kept copies themselves use up), asked of the GPU once."""
    cp = sys.modules["cupy"]
    monkeypatch.setattr(staging, "_memory", {})
    asked = []

    def device(*_):
        asked.append(1)
        return types.SimpleNamespace(id=0, mem_info=(1 << 20, 1 << 30))  # (free, total)
    monkeypatch.setattr(cp.cuda, "Device", device)
    assert staging.limit(cp, 0) == int(staging.CACHE_FRACTION * (1 << 30))
    monkeypatch.setattr(staging, "CACHE_FRACTION", 0.25)
    assert staging.limit(cp, 0) == 1 << 28 and len(asked) == 1


def test_a_load_while_the_copy_is_being_made_waits_and_uses_it(staged):
    """``load``: a read that finds the copy still being made by another thread waits until it
    is made, then uses it (its copy stream waiting for the copy's event) and copies nothing."""
    cp = sys.modules["cupy"]
    x = np.ones((4, 4))
    entry, mine = staging.COPIES.claim(0, "p", x, 3, limit=1 << 20)
    waiting = threading.Event()

    class Loaded(threading.Event):
        def wait(self, timeout=None):
            waiting.set()
            return super().wait(timeout)
    entry.loaded = Loaded()
    stream = cp.cuda.Stream(non_blocking=True)
    got: list = []
    reader = threading.Thread(
        target=lambda: got.append(staging.load(cp, stream, x, "p", 3, lambda v: v)))
    reader.start()
    assert waiting.wait(5)
    assert not got  # still waiting
    entry.copy, entry.ready = x.view(DeviceArray), cp.cuda.Event()
    entry.loaded.set()
    reader.join()
    assert got[0] is entry.copy and staged == [("wait", stream.name, entry.ready.id)]


def test_graph_counts_each_chunks_reads_on_each_worker():
    """Every block task carries, per chunk it reads, how many of the plan's tasks on its worker
    read that chunk."""
    from collections import Counter

    from mgemm.graph import input_keys
    from mgemm.plan import GiB, Problem, Worker, make_plan

    x, y = da.ones((64, 32), chunks=16), da.ones((32, 64), chunks=16)
    workers = [Worker(f"w{i}", "cpu", 1e9, GiB, 1e12) for i in range(2)]
    plan = make_plan(Problem((16,) * 4, (16,) * 4, (16,) * 2, 8), workers, block_size=16,
                     split="off")
    out = graph.build(x, y, plan, engine="cublas", out_dtype=np.dtype("f8"))
    layer = out.dask.layers[out.name]
    gn = plan.grid[1]
    for w in workers:
        mine = [(t, input_keys(x.name, y.name, plan.blocks[t.block], plan.k_chunks_of(t))[1])
                for t in plan.work_for(w.name)]
        reads = Counter(key for _, keys in mine for key in keys)
        assert max(reads.values()) > 1
        for t, keys in mine:
            marks = layer[(out.name, *divmod(t.block, gn))].args[9]
            assert marks == out.name + ";" + ",".join(str(reads[key]) for key in keys)
    # the numpy engine stages nothing: no marks to make
    plain = graph.build(x, y, plan, engine="numpy", out_dtype=np.dtype("f8"))
    assert {task.args[9] for task in plain.dask.layers[plain.name].values()} == {""}


@pytest.fixture
def pinned(staged, monkeypatch):
    """``staging.PINNED_COPIES`` on, with buffers of 512 bytes (a chunk crosses in many pieces)
    and three copying threads."""
    monkeypatch.setattr(staging, "PINNED_COPIES", True)
    monkeypatch.setattr(staging, "PIECE_BYTES", 512)
    monkeypatch.setattr(staging, "COPY_THREADS", 3)
    monkeypatch.setattr(staging, "_pool", {})
    return staged


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "complex64", "int64", "bool"])
def test_staged_block_values_through_pinned_buffers(pinned, rng, dtype):
    """Through the pinned buffers, piece by piece, the same values as through CuPy's copies,
    each chunk and the block back in many pieces (bfloat16 too, as 16-bit integers)."""
    alpha, beta = {"int64": (3, 2), "bool": (1, 1)}.get(dtype, (0.5, 2))
    a, b, c, got = _product(dtype, rng, alpha, beta)
    assert type(got) is np.ndarray and got.dtype == np.dtype(dtype)
    _check_product(dtype, alpha, beta, a, b, c, got)
    pieces = [entry for entry in pinned if entry[0] == "copy piece"]
    backs = [entry for entry in pinned if entry[0] == "copy back"]
    assert len(pieces) > 10 and not any(entry[0] == "copy" for entry in pinned)  # strided too
    assert len(backs) > 1 and not any(blocking for *_, blocking in backs)


def test_a_pinned_buffer_is_written_again_only_after_its_last_copy(pinned):
    """Two buffers a copy: piece i goes through buffer i % 2 once the event recorded after
    piece i - 2's copy has been waited for, both ways; a round trip is exact."""
    cp = sys.modules["cupy"]
    stream = cp.cuda.Stream(non_blocking=True)
    x = np.arange(600, dtype=np.float64).reshape(60, 10)  # 10 bands of 6 rows (480 bytes)
    dev = staging.to_device(cp, x, stream)
    back = staging.to_host(cp, dev, stream)
    np.testing.assert_array_equal(back, x)
    for what in ("copy piece", "copy back"):
        moves = [i for i, entry in enumerate(pinned) if entry[0] == what]
        assert len(moves) == 10
        recorded = [next(entry[2] for entry in pinned[m:] if entry[0] == "record")
                    for m in moves]
        for i in range(2, len(moves)):
            waited = [entry[2] for entry in pinned[moves[i - 1]:moves[i]]
                      if entry[0] == "synchronize"]
            assert recorded[i - 2] in waited, (what, i)
    # back: each piece has arrived (its event waited for) before the next but one crosses, and
    # the last before the host array is handed over
    backs = [i for i, entry in enumerate(pinned) if entry[0] == "copy back"] + [len(pinned)]
    for i, m in enumerate(backs[:-1]):
        event = next(entry[2] for entry in pinned[m:] if entry[0] == "record")
        until = backs[min(i + 2, len(backs) - 1)]
        assert ("synchronize", None, event) in pinned[m:until], i


def test_other_arrays_take_cupys_copies(pinned):
    """A chunk whose rows do not fit a buffer, not 2-D, or not of NumPy's own types (a
    structured one, or one of ml_dtypes' even where its kind is NumPy's "f"), goes through
    ``asarray``; a transposed one through the buffers."""
    cp = sys.modules["cupy"]
    stream = cp.cuda.Stream(non_blocking=True)
    staging.to_device(cp, np.ones((2, 65)), stream)  # 520-byte rows
    assert [entry[0] for entry in pinned] == ["copy"]
    staging.to_device(cp, np.ones((4, 4), dtype=[("f", "f8")]), stream)
    assert [entry[0] for entry in pinned] == ["copy", "copy"]
    staging.to_device(cp, np.ones(8), stream)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert np.dtype(ml_dtypes.float8_e5m2).kind == "f"
    staging.to_device(cp, np.ones((4, 4), ml_dtypes.float8_e5m2), stream)
    assert [entry[0] for entry in pinned] == ["copy"] * 4
    x = np.arange(64.0).reshape(8, 8)
    np.testing.assert_array_equal(staging.to_device(cp, x.T, stream), x.T)
    assert pinned[-1][0] == "record" and pinned[4][0] == "copy piece"


def test_bfloat16_crosses_the_pinned_buffers_bit_for_bit(pinned):
    """A bfloat16 chunk (ml_dtypes' type, kind "V") goes to the device through the pinned buffers
    as 16-bit integers and arrives as bfloat16, NaN and -0 bits unchanged; back, into a new host
    array and into a given one, the same; a transposed one too."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    cp = sys.modules["cupy"]
    stream = cp.cuda.Stream(non_blocking=True)
    bits = np.arange(0, 65536, 97, dtype=np.uint16)[:600].reshape(60, 10)
    bits[0, :3] = (0x7FC1, 0x8000, 0xFF80)  # a NaN with a payload, -0, -inf
    x = bits.view(ml_dtypes.bfloat16)
    for host in (x, x.T):
        dev = staging.to_device(cp, host, stream)
        assert dev.dtype == x.dtype and not any(entry[0] == "copy" for entry in pinned)
        np.testing.assert_array_equal(np.asarray(dev).view(np.uint16), host.view(np.uint16))
        back = staging.to_host(cp, dev, stream)
        assert type(back) is np.ndarray and back.dtype == x.dtype and back.flags.c_contiguous
        np.testing.assert_array_equal(back.view(np.uint16), host.view(np.uint16))
        into = np.empty(host.shape, x.dtype)
        assert staging.to_host(cp, dev, stream, out=into) is into
        np.testing.assert_array_equal(into.view(np.uint16), host.view(np.uint16))
    assert sum(entry[0] == "copy piece" for entry in pinned) == 6  # 3 pieces of at most 512 B each


def test_a_column_major_block_comes_back_row_major_through_the_buffers(pinned, monkeypatch):
    """cuBLAS writes column-major blocks: through the pinned buffers one comes back with the
    same values, as a row-major host array (as CuPy's own copy gives it), made row-major on the
    GPU first, on the copy's stream, before any piece crosses."""
    cp = sys.modules["cupy"]
    stream = cp.cuda.Stream(non_blocking=True)
    contiguous = cp.ascontiguousarray
    monkeypatch.setattr(cp, "ascontiguousarray", lambda a: pinned.append(
        ("row-major", cp.current[-1].name)) or contiguous(a))
    x = np.asfortranarray(np.arange(600.0).reshape(60, 10)).view(DeviceArray)
    back = staging.to_host(cp, x, stream)
    np.testing.assert_array_equal(back, x)
    assert back.flags.c_contiguous and type(back) is np.ndarray
    assert sum(entry[0] == "copy back" for entry in pinned) == 10
    assert pinned[0] == ("row-major", stream.name)


def test_cupys_copies_run_on_the_stream_given(staged):
    """Without the pinned buffers, ``to_device`` copies (and allocates) on the stream it is given
    and ``to_host`` copies back on its stream, whatever stream is current."""
    cp = sys.modules["cupy"]
    stream = cp.cuda.Stream(non_blocking=True)
    x = np.arange(12.0).reshape(3, 4)
    back = staging.to_host(cp, staging.to_device(cp, x, stream), stream)
    np.testing.assert_array_equal(back, x)
    assert cp.current[-1].name == "null"
    assert staged == [("copy", stream.name), ("copy back", stream.name, True)]


def test_pinned_buffers_are_replaced_when_the_piece_size_changes(pinned, monkeypatch):
    """The buffers follow ``PIECE_BYTES``: after a change a copy goes through new buffers of the
    new size, made once the old ones' last copies have finished (their events waited for)."""
    cp = sys.modules["cupy"]
    stream = cp.cuda.Stream(non_blocking=True)
    x = np.arange(600, dtype=np.float64).reshape(60, 10)
    staging.to_device(cp, x, stream)
    [old] = staging._idle
    last = {("synchronize", None, event.id) for event in old.done}
    monkeypatch.setattr(staging, "PIECE_BYTES", 1024)
    pinned.clear()
    np.testing.assert_array_equal(staging.to_device(cp, x, stream), x)
    [new] = staging._idle
    assert new is not old and new.memory[0].size == new.memory[1].size == 1024
    pieces = [i for i, entry in enumerate(pinned) if entry[0] == "copy piece"]
    assert len(pieces) == 5 and last <= set(pinned[:pieces[0]])  # 12 rows of 80 bytes a piece


def test_copying_threads_follow_copy_threads(pinned, monkeypatch):
    """A change of ``COPY_THREADS`` takes effect at the next copy: the bands go to a pool of
    that many copying threads, the only one kept."""
    cp = sys.modules["cupy"]
    stream = cp.cuda.Stream(non_blocking=True)
    x = np.arange(600.0).reshape(60, 10)
    for threads in (3, 5, 2):
        monkeypatch.setattr(staging, "COPY_THREADS", threads)
        seen = set()
        copyto = np.copyto
        monkeypatch.setattr(np, "copyto", lambda dst, src: seen.add(
            threading.current_thread().name) or copyto(dst, src))
        np.testing.assert_array_equal(staging.to_device(cp, x, stream), x)
        monkeypatch.setattr(np, "copyto", copyto)
        assert list(staging._pool) == [threads]
        assert all(name.startswith("mgemm-copy") for name in seen) and 1 <= len(seen) <= threads


@pytest.mark.parametrize("emulated", [False, True], ids=["whole", "emulated"])
def test_a_block_copied_whole_goes_through_the_pinned_buffers(pinned, rng, monkeypatch, emulated):
    """A block copied whole (``STAGE_BY_PART`` off, or emulated float32) crosses through the
    pinned buffers too, piece by piece on the legacy default stream, both ways, with the same
    values as through CuPy's copies."""
    from mgemm import emulate

    monkeypatch.setattr(graph, "STAGE_BY_PART", emulated)  # an emulated block is whole anyway
    monkeypatch.setattr(emulate, "gemm", lambda engine, a_parts, b_parts, scheme, **kw:
                        engine.gemm(a_parts, b_parts, **kw))  # the exact product, as off sm_90
    a, b, c = (random(rng, s, "float32") for s in ((60, 50), (50, 40), (60, 40)))
    x = da.from_array(a, chunks=((25, 35), (20, 16, 14)))
    y = da.from_array(b, chunks=((12, 38), (40,)))
    with dask.config.set(scheduler="sync"):
        got = mgemm.gemm(x, y, da.from_array(c, chunks=20), alpha=0.5, beta=2, engine="cublas",
                         block_size=(60, 40), emulate_fp32="bf16x6" if emulated else None).compute()
    assert type(got) is np.ndarray
    _check_product("float32", 0.5, 2, a, b, c, got)
    pieces = [entry for entry in pinned if entry[0] == "copy piece"]
    backs = [entry for entry in pinned if entry[0] == "copy back"]
    assert not any(entry[0] == "copy" for entry in pinned)
    # every row of every chunk once: A's three K chunks of each row chunk, B's, C's 20 x 20 ones
    assert sum(piece[2] for piece in pieces) == 3 * 60 + 50 + 2 * 60
    # 512-byte buffers: a 40-column float32 row of the block is 160 bytes, three rows a piece
    assert {entry[1] for entry in pieces + backs} == {"null"} and len(backs) == 20


def test_pinned_buffers_are_shared_by_the_threads_that_copy(pinned):
    """A copy takes buffers another copy left idle, whichever thread made them, and makes new
    ones only where none is idle: copies one after another on many threads (the threaded
    scheduler's) use one pair; two at once, two pairs (one of them the first), each idle again
    afterwards."""
    cp = sys.modules["cupy"]
    x = np.arange(600, dtype=np.float64).reshape(60, 10)
    made = []
    real = staging._Buffers

    class Counted(real):
        def __init__(self, cupy):
            made.append(self)
            super().__init__(cupy)
    staging._Buffers = Counted
    try:
        for _ in range(4):
            thread = threading.Thread(target=lambda: staging.to_host(
                cp, staging.to_device(cp, x, cp.cuda.Stream()), cp.cuda.Stream()))
            thread.start()
            thread.join()
        assert len(made) == 1 and staging._idle == made
        both = threading.Barrier(2)

        def overlapping():
            with staging._buffers(cp):  # as a copy holds them
                both.wait(timeout=10)  # both hold buffers at once
        threads = [threading.Thread(target=overlapping) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        staging._Buffers = real
    assert len(made) == 2 and sorted(map(id, staging._idle)) == sorted(map(id, made))


def test_staging_settings_from_dask_config():
    """``mgemm.staging.*`` in dask.config, parsed, "auto" threads as None; a bad value raises,
    naming the key and what it takes."""
    from mgemm import config

    assert config.staging() == {"pinned_copies": True, "copy_threads": None, "cache_fraction": 0.4}
    with dask.config.set({"mgemm.staging.pinned-copies": "off", "mgemm.staging.copy-threads": 3,
                          "mgemm.staging.cache-fraction": "0"}):
        assert config.staging() == {"pinned_copies": False, "copy_threads": 3,
                                    "cache_fraction": 0.0}
    for key, bad, says in (("copy-threads", 0, "positive integer"), ("copy-threads", 2.5, "auto"),
                           ("cache-fraction", 1.5, "from 0 to 1"), ("cache-fraction", True, "0 to 1"),
                           ("pinned-copies", "sometimes", "boolean")):
        with dask.config.set({f"mgemm.staging.{key}": bad}):
            with pytest.raises(ValueError, match=f"mgemm.staging.{key}: not .*{says}"):
                config.staging()


def test_a_worker_process_reads_its_staging_settings_from_the_environment():
    """A process that imports ``mgemm.staging`` takes dask.config's values, environment
    variables included (as a ``dask cuda worker`` started with them would); "auto" threads are
    8, or the CPUs the process may use where fewer."""
    import os
    import subprocess

    show = "from mgemm import staging; print(*staging.settings())"
    env = {**os.environ, "DASK_MGEMM__STAGING__PINNED_COPIES": "false",
           "DASK_MGEMM__STAGING__COPY_THREADS": "3", "DASK_MGEMM__STAGING__CACHE_FRACTION": "0.25"}
    got = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert got == ["False", "3", "0.25"]
    plain = {k: v for k, v in os.environ.items() if not k.startswith("DASK_MGEMM__STAGING")}
    got = subprocess.run([sys.executable, "-c", show], env=plain, capture_output=True, text=True,
                         check=True).stdout.split()
    assert got == ["True", str(min(8, len(os.sched_getaffinity(0)))), "0.4"]


def _staging_settings_here():
    from mgemm import staging
    return staging.settings()


def test_the_embedded_clusters_workers_take_the_staging_settings_set_before_it_starts():
    """``dask.config.set`` around the start of a process cluster reaches its workers (the
    nannies hand their config on), where ``mgemm.staging`` reads it."""
    from distributed import Client, LocalCluster

    with dask.config.set({"mgemm.staging.copy-threads": 3, "mgemm.staging.cache-fraction": 0.1,
                          "mgemm.staging.pinned-copies": False}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               dashboard_address=None, host="127.0.0.1")
    try:
        with Client(cluster) as client:
            assert list(client.run(_staging_settings_here).values()) == [(False, 3, 0.1)]
    finally:
        cluster.close()


_SCRIPT_IMPORTING_MGEMM = '''
import dask
import mgemm  # at the top: a spawned worker imports this script, and mgemm, before its config


def here():
    from mgemm import staging
    return staging.settings()


if __name__ == "__main__":
    from distributed import Client, LocalCluster
    with dask.config.set({"mgemm.staging.copy-threads": 1, "mgemm.staging.cache-fraction": 0.2}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               dashboard_address=None, host="127.0.0.1")
    with Client(cluster) as client:
        print(*list(client.run(here).values())[0])
    cluster.close()
'''


def test_staging_settings_reach_workers_of_a_script_that_imports_mgemm_first(tmp_path):
    """A user's script that imports mgemm at its top and sets ``mgemm.staging.*`` around its
    cluster's start: the spawned worker imports the script (so mgemm) before its nanny hands it
    that config, and still copies with the settings set (they are read at first use)."""
    import os
    import subprocess

    script = tmp_path / "job.py"
    script.write_text(_SCRIPT_IMPORTING_MGEMM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_MGEMM__STAGING")}
    got = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert got == ["True", "1", "0.2"]


def test_a_bad_staging_setting_raises_where_it_is_read_not_at_import(monkeypatch):
    """``import mgemm`` (so every ``mgemm`` command, ``--help`` too) works with a bad
    ``mgemm.staging`` value; reading the settings raises the ``ValueError`` naming the key."""
    import os
    import subprocess

    env = {**os.environ, "DASK_MGEMM__STAGING__COPY_THREADS": "0"}
    subprocess.run([sys.executable, "-c", "import mgemm.staging, mgemm.cli"], env=env, check=True,
                   timeout=60)
    for name in ("PINNED_COPIES", "COPY_THREADS", "CACHE_FRACTION"):
        monkeypatch.setattr(staging, name, None)
    with dask.config.set({"mgemm.staging.copy-threads": 0}):
        with pytest.raises(ValueError, match="mgemm.staging.copy-threads"):
            staging.settings()
        with pytest.raises(ValueError, match="mgemm.staging.copy-threads"):
            staging.host_copies(2**30, 1024)


def test_drop_forgets_one_products_entries_on_every_gpu():
    """``drop``: the product's entries go on each GPU, their bytes with them; another
    product's stay."""
    copies = staging.DeviceCopies()
    chunks = [np.ones(8) for _ in range(3)]
    for device, product, x in ((0, "p", chunks[0]), (1, "p", chunks[1]), (0, "q", chunks[2])):
        assert copies.claim(device, product, x, 3, limit=1 << 20)[1]
    assert copies.drop("p") == 2
    assert [key[1] for key in copies._entries] == ["q"]
    assert (copies.nbytes(0), copies.nbytes(1)) == (64, 0)
    assert copies.drop("p") == 0
    # a read of a dropped product's chunk starts its count afresh
    entry, mine = copies.claim(0, "p", chunks[0], 2, limit=1 << 20)
    assert mine and entry.left == 1 and copies.nbytes(0) == 128


class _Worker:
    """What ``ReleaseCopies`` reads of a worker: its tasks' states and run specs; ``move``
    makes a transition and tells the plugin."""

    def __init__(self, specs: dict) -> None:
        self.specs, self.plugin = specs, None
        self.state = types.SimpleNamespace(tasks={})

    def move(self, key, finish: str, state: str | None = None) -> None:
        ts = self.state.tasks.setdefault(key, types.SimpleNamespace(
            state="released", run_spec=self.specs.get(key)))
        start, ts.state = ts.state, state or finish
        if finish == "forgotten":
            del self.state.tasks[key]
        self.plugin.transition(key, start, finish)


def test_release_copies_drops_a_product_once_none_of_its_tasks_is_left_to_run(monkeypatch):
    """The plugin follows a product's block and part keys, and a fused task by the block keys
    in it, while they wait or run (a running task let go of, reported "released", runs on
    "cancelled"), and drops the product's copies once none is left (a task done, failed or let
    go of); other keys are not followed.  A task sent again counts again."""
    from mgemm.cluster import ReleaseCopies

    dropped: list = []
    monkeypatch.setattr(staging.COPIES, "drop", dropped.append)
    p, part = graph.BLOCK_PREFIX + "tok", graph.BLOCK_PREFIX + graph.PART + "tok"
    fused = types.SimpleNamespace(args=({(p, 1, 1): None, ("tanh-x", 1, 1): None},))
    worker = _Worker({("tanh-x", 1, 1): fused, ("sum-y", 0): None})
    worker.plugin = plugin = ReleaseCopies()
    plugin.setup(worker)
    keys = [(p, 0, 0), (part, 0, 1, 0), ("tanh-x", 1, 1)]
    for key in [*keys, ("sum-y", 0), ("a", 0, 0)]:
        worker.move(key, "waiting")
        worker.move(key, "ready")  # seen again: counted once
    worker.move((p, 0, 1), "fetch")  # a block's result to fetch: not run here
    assert plugin.live == {p: 3}
    worker.move(keys[0], "executing")
    worker.move(keys[0], "memory")
    worker.move(keys[1], "executing")
    worker.move(keys[1], "released", state="cancelled")  # let go of, still running
    assert plugin.live == {p: 2} and not dropped
    worker.move(keys[2], "released")
    assert plugin.live == {p: 1} and not dropped
    worker.move(keys[1], "error")
    assert dropped == [p] and not plugin.live and not plugin.products
    worker.move(keys[1], "released")
    worker.move(keys[1], "waiting")  # retried
    worker.move(keys[1], "executing")
    assert plugin.live == {p: 1}
    worker.move(keys[1], "memory")
    assert dropped == [p, p]
    worker.move(keys[1], "released")
    worker.move(keys[1], "forgotten")
    assert dropped == [p, p] and not plugin.live
    # the other states a task waits or runs in: constrained (a worker with resources),
    # long-running (a task that seceded), resumed (let go of, then wanted again while running)
    dropped.clear()
    key = (p, 2, 2)
    for state, live in (("waiting", 1), ("constrained", 1), ("executing", 1), ("long-running", 1)):
        worker.move(key, state)
        assert plugin.live == {p: live} and not dropped, state
    worker.move(key, "released", state="cancelled")
    worker.move(key, "executing", state="resumed")
    assert plugin.live == {p: 1} and not dropped
    worker.move(key, "memory")
    assert dropped == [p]
    # two products on one worker: each goes when its own last task does
    dropped.clear()
    q = graph.BLOCK_PREFIX + "other"
    worker.move((p, 3, 3), "waiting")
    worker.move((q, 0, 0), "waiting")
    worker.move((p, 3, 3), "memory")
    assert dropped == [p] and plugin.live == {q: 1}
    worker.move((q, 0, 0), "error")
    assert dropped == [p, q] and not plugin.live


def _failing_engine(log: list, cp, fail_at: list):
    """The stand-in engine, raising on its calls numbered in ``fail_at`` (counted from 0)."""
    engine, calls = FakeEngine(log, cp), itertools.count()
    real = engine.gemm

    def gemm(*args, **kwargs):
        if next(calls) in fail_at:
            raise RuntimeError("a block failed")
        return real(*args, **kwargs)
    engine.gemm = gemm
    return engine


def test_a_failed_staged_run_leaves_no_copies_and_a_rerun_counts_afresh(staged, rng, monkeypatch):
    """On a cluster (in-process workers, the stand-ins): a block fails part-way through a staged
    product whose inputs stay persisted.  Once the failed run's tasks are let go of, the
    worker keeps no copy of it; the same graph run again completes, right, and keeps none after
    its last read either.  (Before ``ReleaseCopies``, both runs left counts and copies behind
    for as long as the inputs lived.)"""
    from distributed import Client, LocalCluster, wait

    from mgemm.cluster import install_placement
    from mgemm.plan import GiB, Problem, Worker, make_plan

    cp = sys.modules["cupy"]
    fail_at: list = [3]
    monkeypatch.setitem(engines._cache, "cublas", _failing_engine(staged, cp, fail_at))
    a, b = random(rng, (64, 48), "float32"), random(rng, (48, 64), "float32")

    def left(deadline: float = 10.0) -> int:
        stop = time.monotonic() + deadline
        while staging.COPIES._entries and time.monotonic() < stop:
            time.sleep(0.02)
        return len(staging.COPIES._entries)

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        assert install_placement(client)
        x = da.from_array(a, chunks=16).persist()
        y = da.from_array(b, chunks=16).persist()
        (address,) = client.scheduler_info()["workers"]
        plan = make_plan(Problem((16,) * 4, (16,) * 4, (16,) * 3, 4),
                         [Worker(address, "gpu", 1e12, 8 * GiB, 1e12)], block_size=16,
                         split="off")
        out = graph.build(x, y, plan, engine="cublas", out_dtype=np.dtype("f4"))
        future = client.compute(out)
        # (not ``result()``: its raise would tie the error to the future, which then stays)
        assert "a block failed" in str(future.exception())
        assert staging.COPIES.kept > 0
        assert left() == 0 and staging.COPIES.nbytes(0) == 0  # the failed block still held
        del future
        stop = time.monotonic() + 10  # the erred run let go of on the scheduler too
        while len(cluster.scheduler.tasks) > len(x.chunks[0]) * len(x.chunks[1]) + len(
                y.chunks[0]) * len(y.chunks[1]) and time.monotonic() < stop:
            time.sleep(0.02)
        fail_at.clear()
        kept = staging.COPIES.kept
        got = client.compute(out).result()
        assert_close(got, a.astype(np.float64) @ b.astype(np.float64), "float32")
        assert staging.COPIES.kept > kept
        assert left() == 0 and staging.COPIES.nbytes(0) == 0
        wait([x, y])  # the inputs lived throughout
