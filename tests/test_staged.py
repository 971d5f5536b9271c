"""NumPy chunks staged through a GPU engine (``mgemm.graph._staged_block``), on the CPU: a stand-in
``cupy`` module (NumPy arrays whose type names the module "cupy", streams and events that log what
is queued where) and a stand-in engine, so the part-by-part protocol and its arithmetic are checked
where there is no GPU.  The GPU runs the same products for real: ``tests/test_gpu.py``."""

from __future__ import annotations

import itertools
import sys
import threading
import types

import dask
import dask.array as da
import numpy as np
import pytest

import mgemm
from conftest import assert_close, random
from mgemm import engines, graph


class DeviceArray(np.ndarray):
    """A NumPy array that ``engines.is_cupy`` takes for a CuPy one (it reads the type's module)."""


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

    def asnumpy(x):
        log.append(("copy back", current[-1].name))
        return np.array(x)

    cp.asarray, cp.asnumpy, cp.dtype = asarray, asnumpy, np.dtype
    cp.concatenate = lambda arrays, axis=0: np.concatenate(arrays, axis).view(DeviceArray)
    cp.cuda = types.SimpleNamespace(Stream=Stream, Event=Event,
                                    get_current_stream=lambda: current[-1],
                                    Device=lambda: types.SimpleNamespace(id=0))
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
    """The stand-ins in place of CuPy and the cublas engine; this thread's streams fresh."""
    log: list = []
    cp = fake_cupy(log)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(engines, "_streams", threading.local())
    monkeypatch.setitem(engines._cache, "cublas", FakeEngine(log, cp))
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
    if np.dtype(dtype).kind in "iub":
        typed = np.dtype(dtype).type
        np.testing.assert_array_equal(got, typed(alpha) * (a @ b) + typed(beta) * c)
    else:
        wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
        assert_close(got, 0.5 * (a.astype(wide) @ b.astype(wide)) + 2 * c.astype(wide), dtype)


def test_staged_block_queues_each_part_after_its_copies(staged, rng):
    """By part: every copy in goes to the copy stream; each GEMM goes to the block's own stream
    after that stream waited for an event recorded on the copy stream after the part's copies;
    the copy back comes after the block's end was synchronized."""
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
        start = g + 1
    sync = max(i for i, entry in enumerate(staged) if entry[0] == "synchronize")
    back = [i for i, entry in enumerate(staged) if entry[0] == "copy back"]
    assert back and min(back) > sync > gemms[-1]


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
