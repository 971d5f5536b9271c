"""Engine plumbing that runs without a GPU: the order of stream operations around a block task,
and how the cublas engine presents operands to column-major cuBLAS."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

from mgemm import engines


def _fake_cupy(log):
    """The parts of CuPy ``engines.task_stream`` touches, logging each stream operation."""
    class Event:
        def __init__(self, **kwargs):
            log.append(("event", kwargs))

        def record(self, stream):
            log.append(("record", stream.name))

    class Stream:
        def __init__(self, non_blocking=False, name="task"):
            self.name = name
            log.append(("stream", non_blocking))

        def wait_event(self, event):
            log.append(("wait", self.name))

        def __enter__(self):
            log.append(("enter", self.name))

        def __exit__(self, *exc):
            log.append(("exit", self.name))

        def synchronize(self):
            log.append(("synchronize", self.name))

    Stream.null = Stream.__new__(Stream)
    Stream.null.name = "legacy"
    cuda = types.SimpleNamespace(Stream=Stream, Event=Event,
                                 Device=lambda: types.SimpleNamespace(id=0))
    return types.SimpleNamespace(__name__="cupy", cuda=cuda)


def _fake_events(log):
    """Give the fake Event a ``synchronize`` that logs (task_stream waits on its own event)."""
    def synchronize(self):
        log.append(("event-synchronize",))
    return synchronize


@pytest.mark.parametrize("shared", [True, False])
def test_task_stream_waits_for_the_legacy_stream_then_for_its_own_work(monkeypatch, shared):
    monkeypatch.setattr(engines, "_streams", threading.local())  # keep the fakes out of real runs
    monkeypatch.setattr(engines, "_shared", {})
    monkeypatch.setattr(engines, "ONE_STREAM_PER_GPU", shared)
    log = []
    cp = _fake_cupy(log)
    cp.cuda.Event.synchronize = _fake_events(log)
    with engines.task_stream(cp):
        log.append(("work",))
        # one stream per GPU: the task queues under the GPU's lock and waits only after it
        assert engines._streams.deferred is shared
        assert (engines._shared[0][1].locked() if shared else not engines._shared)
        engines.wait_for_queued_work(cp) if shared else None  # deferred: no event made
    assert not engines._streams.deferred
    assert not shared or not engines._shared[0][1].locked()
    assert log == [("stream", True), ("event", {"disable_timing": True}),
                   ("event", {"disable_timing": True}), ("record", "legacy"), ("wait", "task"),
                   ("enter", "task"), ("work",), ("exit", "task"), ("record", "task"),
                   ("event-synchronize",)]
    log.clear()
    with engines.task_stream(cp):  # the stream and events are made once per thread and device
        pass
    assert [op for op, *_ in log] == ["record", "wait", "enter", "exit", "record", "event-synchronize"]
    # another thread: its own events; the same stream when it is one per GPU, else its own
    def run():
        with engines.task_stream(cp):
            pass
    log.clear()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    made = [op for op, *_ in log if op in ("stream", "event")]
    assert made == (["event", "event"] if shared else ["stream", "event", "event"])


def test_wait_for_queued_work_reuses_one_event_per_thread_and_device(monkeypatch):
    """Outside a shared-stream task each call records an event on the current stream and waits
    for it: one event per thread and device, made once and recorded again by every call."""
    monkeypatch.setattr(engines, "_streams", threading.local())
    log, device = [], [0]
    cp = _fake_cupy(log)
    cp.cuda.Event.record = lambda self, stream=None: log.append(("record", id(self)))
    cp.cuda.Event.synchronize = lambda self: log.append(("event-synchronize", id(self)))
    cp.cuda.runtime = types.SimpleNamespace(getDevice=lambda: device[0])
    for _ in range(3):
        engines.wait_for_queued_work(cp)
    made = [entry for entry in log if entry[0] == "event"]
    assert made == [("event", {"disable_timing": True})]
    recorded = {ident for op, ident in log if op == "record"}
    assert len(recorded) == 1 and [op for op, *_ in log].count("event-synchronize") == 3
    device[0] = 1  # another device: an event of its own
    engines.wait_for_queued_work(cp)
    assert len({ident for op, ident in log if op == "record"}) == 2
    log.clear()
    thread = threading.Thread(target=engines.wait_for_queued_work, args=(cp,))
    thread.start()
    thread.join()
    assert [op for op, *_ in log] == ["event", "record", "event-synchronize"]


def test_is_bfloat16_tells_the_bfloat16_dtype_apart():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert engines.is_bfloat16(np.dtype(ml_dtypes.bfloat16))
    for other in (np.float16, np.float32, np.uint16, np.dtype("V2"), np.dtype([("x", np.int16)])):
        assert not engines.is_bfloat16(np.dtype(other))


def test_task_stream_is_a_no_op_for_numpy():
    """NumPy chunks: no stream is entered, and the body runs once."""
    import numpy as np
    ran = []
    with engines.task_stream(np) as stream:
        ran.append(True)
    assert ran == [True] and stream is None


class _Operand:
    """A stand-in for a CuPy array: shape, strides, item size and contiguity flags."""

    def __init__(self, shape, strides, item=2):
        self.shape, self.strides, self.itemsize = shape, strides, item
        r, c = shape
        self.flags = types.SimpleNamespace(
            c_contiguous=strides == (c * item, item) or r <= 1 and strides[1] == item or c <= 1 and r <= 1,
            f_contiguous=strides == (item, r * item) or c <= 1 and strides[0] == item or c <= 1 and r <= 1)


@pytest.fixture
def fake_cublas(monkeypatch):
    """``cupy_backends.cuda.libs.cublas`` with the two operation codes the engine reads."""
    lib = types.ModuleType("cupy_backends.cuda.libs.cublas")
    lib.CUBLAS_OP_N, lib.CUBLAS_OP_T = "N", "T"
    names = ["cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.libs"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules["cupy_backends.cuda.libs"].cublas = lib
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cublas", lib)
    return lib


@pytest.mark.parametrize("shape,strides,expect", [
    ((4, 6), (12, 2), ("N", 6)),     # C order: x^T in column-major, rows 6 apart
    ((4, 6), (2, 8), ("T", 4)),      # F order: x itself in column-major, transposed by cuBLAS
    ((4, 6), (20, 2), ("N", 10)),    # a slice of wider rows: read in place, ld 10
    ((4, 6), (2, 12), ("T", 6)),     # a slice of a taller column-major array: ld 6
    ((1, 6), (40, 2), ("N", 6)),     # one row: its row stride is never used
    ((4, 1), (2, 2), ("N", 1)),      # one column, C order wins
    ((4, 6), (24, 4), (None, 6)),    # neither rows nor columns contiguous: a C-ordered copy
])
def test_cublas_operand_reads_in_place_or_copies(fake_cublas, shape, strides, expect):
    from mgemm.engines.cublas import _operand

    copies = []
    fake_cupy = types.SimpleNamespace(
        ascontiguousarray=lambda x: copies.append(x) or _Operand(x.shape, (x.shape[1] * 2, 2)))
    x = _Operand(shape, strides)
    arr, op, ld = _operand(fake_cupy, x)
    if expect[0] is None:
        assert copies == [x] and arr is not x and (op, ld) == ("N", expect[1])
    else:
        assert copies == [] and arr is x and (op, ld) == expect


@pytest.mark.parametrize("parts", [1, 2])
def test_cublas_engine_rounds_a_16bit_block_once_with_beta_c(monkeypatch, parts):
    """float16 A, B and C with beta != 0: alpha * A @ B (float32 compute, as cublasGemmEx) and
    beta * C are added in float32 and rounded once, as the persistent and numpy engines do.
    (Rounded to float16 before beta * C was added there, 2/3 - 0.5 came out 0.16650390625, not
    float16(1/6) = 0.1666259765625.)  NumPy stands in for CuPy; ``_gemm_ex`` for cuBLAS."""
    from mgemm.engines import cublas

    fake = types.ModuleType("cupy")
    fake.__getattr__ = lambda name: getattr(np, name)
    fake.cublas = types.ModuleType("cupy.cublas")
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupy.cublas", fake.cublas)
    monkeypatch.setattr(cublas, "wait_for_queued_work", lambda cupy: None)

    def gemm_ex(cupy, a, b, acc, *, alpha, beta):  # float32 compute, written in acc's type
        acc[...] = (np.float32(alpha) * (a.astype(np.float32) @ b.astype(np.float32))
                    + np.float32(beta) * acc.astype(np.float32)).astype(acc.dtype)
    monkeypatch.setattr(cublas, "_gemm_ex", gemm_ex)
    a, b = np.array([[2.0, 0.0]], np.float16), np.array([[1.0], [0.0]], np.float16)
    a_parts = [a] if parts == 1 else [a[:, :1], a[:, 1:]]
    b_parts = [b] if parts == 1 else [b[:1], b[1:]]
    got = cublas.CublasEngine().gemm(a_parts, b_parts, alpha=1 / 3, beta=-2.0,
                                     c=np.array([[0.25]], np.float16))
    assert got.dtype == np.float16 and got[0, 0] == np.float16(2 / 3 - 0.5) == 0.1666259765625
    # no C to add, one part: written by cuBLAS in float16 directly, alpha inside
    got = cublas.CublasEngine().gemm([a], [b], alpha=1 / 3)
    assert got.dtype == np.float16 and got[0, 0] == np.float16(np.float32(1 / 3) * 2)


def test_auto_on_gpu_chunks_picks_per_block(monkeypatch):
    """``engine="auto"`` with CuPy chunks resolves to ``auto-gpu``, which sends float16/bfloat16
    blocks of two or more K parts to the persistent engine where the Hopper kernel runs, and
    everything else to cuBLAS.  (NumPy arrays stand in for CuPy ones: only shapes and dtypes
    are read.)"""
    from mgemm import hopper
    from mgemm.engines import auto, select

    class FakeCupy:  # a chunk type whose module is "cupy"
        pass
    FakeCupy.__module__ = "cupy._core"
    assert select("auto", FakeCupy()) == "auto-gpu"
    assert select("auto", np.empty(1)) == "numpy"

    f16 = [np.empty((4, 3), np.float16), np.empty((4, 5), np.float16)]
    g16 = [np.empty((3, 2), np.float16), np.empty((5, 2), np.float16)]
    for hopper_here, expect in ((True, "persistent"), (False, "cublas")):
        monkeypatch.setattr(hopper, "supported", lambda device=None, ok=hopper_here: ok)
        assert auto.choose(f16, g16) == expect
        assert auto.choose(f16, g16, "float16") == expect
        assert auto.choose(f16, g16, "float32") == expect
        assert auto.choose(f16[:1], g16[:1]) == "cublas"  # one part: cuBLAS is ahead
        assert auto.choose(f16 + [np.empty((4, 0), np.float16)], g16 + [np.empty((0, 2), np.float16)]) == expect
        assert auto.choose([f16[0], np.empty((4, 0), np.float16)], [g16[0], np.empty((0, 2), np.float16)]) == "cublas"
        assert auto.choose(f16, g16, "float64") == "cublas"
        assert auto.choose([x.astype(np.float32) for x in f16], [x.astype(np.float32) for x in g16]) == "cublas"
        assert auto.choose([f16[0], f16[1].astype(np.float32)], g16) == "cublas"
    ml_dtypes = pytest.importorskip("ml_dtypes")  # bfloat16 (CuPy 14 holds it through ml_dtypes)
    b16 = [x.astype(ml_dtypes.bfloat16) for x in f16]
    h16 = [x.astype(ml_dtypes.bfloat16) for x in g16]
    monkeypatch.setattr(hopper, "supported", lambda device=None: True)
    assert [auto.choose(b16, h16, out) for out in (None, "bfloat16", "float32", "float16")] == [
        "persistent", "persistent", "persistent", "cublas"]


@pytest.mark.parametrize("hopper_here", [True, False])
def test_auto_sends_unaligned_single_blocks_to_the_hopper_kernel(monkeypatch, hopper_here):
    """One K part goes to the persistent engine where cuBLAS would read an operand unaligned (N or
    K not a multiple of 8 for 16-bit types, an operand starting off a 16-byte boundary, a strided
    view) and the block has at least UNALIGNED_MIN_FLOPS; aligned blocks, small ones, float32 and
    GPUs without the Hopper kernel stay on cuBLAS."""
    from mgemm import hopper
    from mgemm.engines import auto

    monkeypatch.setattr(hopper, "supported", lambda device=None: hopper_here)
    hit = "persistent" if hopper_here else "cublas"
    # 4096 x 4096 blocks of K just above and just below the line, neither a multiple of 8
    k_hi = int(auto.UNALIGNED_MIN_FLOPS // (2.0 * 4096 * 4096)) + 1
    k_hi += k_hi % 8 == 0
    k_lo = k_hi - 2 - ((k_hi - 2) % 8 == 0)
    big = np.empty((4096, k_hi), np.float16), np.empty((k_hi, 4096), np.float16)
    assert 2.0 * 4096 * 4096 * k_lo < auto.UNALIGNED_MIN_FLOPS <= 2.0 * 4096 * 4096 * k_hi
    assert auto.choose([big[0]], [big[1]]) == hit
    assert auto.choose([big[0][:, :k_lo]], [big[1][:k_lo]]) == "cublas"
    monkeypatch.setattr(auto, "UNALIGNED_MIN_FLOPS", 2.0 * 1024**3)  # small arrays from here on
    m = n = k = 1024
    a, b = np.empty((m, k), np.float16), np.empty((k, n), np.float16)
    assert auto.choose([a], [b]) == "cublas"  # aligned
    assert auto.choose([np.empty((m + 3, k), np.float16)], [b]) == "cublas"  # M does not matter
    assert auto.choose([np.empty((m, k + 2), np.float16)], [np.empty((k + 2, n), np.float16)]) == hit
    assert auto.choose([a], [np.empty((k, n + 1), np.float16)]) == hit
    assert auto.choose([a], [np.empty((k, n + 4), np.float16)], "float32") == hit  # B's rows
    wide = np.empty((m, k + 8), np.float16)
    assert auto.choose([wide[:, 8:]], [b]) == "cublas"  # a view 16 bytes in, rows of 16-byte multiples
    assert auto.choose([wide[:, 1:k + 1]], [b]) == hit  # starts 2 bytes in
    assert auto.choose([np.empty((k, m), np.float16).T], [b]) == "cublas"  # column-major, aligned
    assert auto.choose([np.empty((k, m + 2), np.float16)[:, :m].T], [b]) == hit  # columns 2052 bytes apart
    small = 64
    assert auto.choose([np.empty((small, small + 2), np.float16)], [np.empty((small + 2, small), np.float16)]) == "cublas"
    flops = 2.0 * m * n * (k + 2)
    monkeypatch.setattr(auto, "UNALIGNED_MIN_FLOPS", flops + 1)
    assert auto.choose([np.empty((m, k + 2), np.float16)], [np.empty((k + 2, n), np.float16)]) == "cublas"
    monkeypatch.setattr(auto, "UNALIGNED_MIN_FLOPS", flops)
    assert auto.choose([np.empty((m, k + 2), np.float16)], [np.empty((k + 2, n), np.float16)]) == hit
    f32 = np.empty((m, k + 1), np.float32), np.empty((k + 1, n), np.float32)
    assert auto.choose([f32[0]], [f32[1]]) == "cublas"
    # K parts: rows on 128-byte boundaries, or unaligned for cuBLAS (copied by the kernel's path):
    # persistent; rows 16- but not 128-byte aligned: cuBLAS
    on128 = [_aligned((64, 256)), _aligned((64, 256))], [_aligned((256, 128)), _aligned((256, 128))]
    assert auto.choose(*on128) == hit
    assert auto.choose(on128[0], [_aligned((256, 136)), _aligned((256, 136))]) == "cublas"  # N = 136
    assert auto.choose([x[:, :200] for x in on128[0]], [x[:200] for x in on128[1]]) == hit  # A 512 B apart
    assert auto.choose([x[:, :248] for x in on128[0]], [x[:248] for x in on128[1]]) == hit
    assert auto.choose([_aligned((64, 264))[:, :256]] * 2, on128[1]) == "cublas"  # A rows 528 B apart
    assert auto.choose([_aligned((64, 260))[:, :250]] * 2, [x[:250] for x in on128[1]]) == hit  # 520 B
    assert auto.choose([_aligned((64, 264))[:, 8:]] * 2, on128[1]) == "cublas"  # 16 bytes in
    assert auto.choose([_aligned((64, 264))[:, 1:257]] * 2, on128[1]) == hit  # 2 bytes in
    # bfloat16 (ml_dtypes' type, as CuPy 14 holds it) goes the same way as float16
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = ml_dtypes.bfloat16
    assert auto.choose([np.empty((m, k), bf)], [np.empty((k, n + 2), bf)]) == hit
    assert auto.choose([np.empty((m, k), bf)], [np.empty((k, n), bf)]) == "cublas"


def _aligned(shape, dtype=np.float16, boundary=128):
    """An empty array starting on a ``boundary``-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + boundary, np.uint8)
    skip = -raw.ctypes.data % boundary
    return raw[skip:skip + nbytes].view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_numpy_engine_adds_16_bit_parts_in_float32(dtype):
    """K parts of a 16-bit product are added in float32 and rounded once: the error stays one
    rounding of the result (2^-11 for float16, 2^-8 for bfloat16, of the largest element), where
    adding parts rounded to float16 one by one reached 2.8x the float16 bound at K = 32768."""
    from mgemm.cluster import extension_dtype
    from mgemm.engines import get

    np_dtype = extension_dtype(dtype) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 32768)).astype(np_dtype)
    b = rng.standard_normal((32768, 48)).astype(np_dtype)
    parts = range(0, 32768, 1024)
    got = get("numpy").gemm([a[:, k:k + 1024] for k in parts], [b[k:k + 1024] for k in parts],
                            out_dtype=dtype)
    assert got.dtype == np_dtype
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max()
    assert err <= {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype], err


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "complex64",
                                   "int32", "uint8", "bool"])
def test_numpy_engine_on_chunks_equals_numpy(dtype):
    """``gemm_chunks``: ragged row, K and column chunks (one K chunk empty, one chunk a
    transposed view) with alpha, beta and C give NumPy's product of the whole arrays, in NumPy's
    result type; every output chunk is written (the result starts uninitialised)."""
    from conftest import assert_close, random
    from mgemm.engines import get

    rng = np.random.default_rng(11)
    rows, ks, cols = (5, 17, 1), (8, 0, 13, 3), (9, 2, 6)
    a, b = random(rng, (sum(rows), sum(ks)), dtype), random(rng, (sum(ks), sum(cols)), dtype)
    c = random(rng, (sum(rows), sum(cols)), dtype)

    def cut(x, first, second):
        e0, e1 = np.cumsum((0, *first)), np.cumsum((0, *second))
        return [[x[e0[i]:e0[i + 1], e1[j]:e1[j + 1]] for j in range(len(second))]
                for i in range(len(first))]

    a_rows, b_rows = cut(a, rows, ks), cut(b, ks, cols)
    a_rows[1][2] = np.asarray(a_rows[1][2].T, order="C").T  # column-major
    numeric = dtype != "bool"
    integer = numeric and np.dtype(dtype).kind in "iu"
    alpha, beta = (2.0, 0.5) if numeric and not integer else (2, 3) if integer else (1, 0)
    got = get("numpy").gemm_chunks(a_rows, b_rows, alpha=alpha, beta=beta, c=c)
    expect = np.matmul(a, b).dtype if dtype != "bfloat16" else a.dtype
    assert got.dtype == expect and got.shape == (sum(rows), sum(cols))
    if not numeric:
        np.testing.assert_array_equal(got, a @ b)
        return
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    ref = alpha * (a.astype(wide) @ b.astype(wide)) + beta * c.astype(wide)
    if integer:  # NumPy's product, wrapping as it does in the operands' type
        np.testing.assert_array_equal(got, alpha * np.matmul(a, b) + beta * c)
    else:
        assert_close(got, ref, dtype)


def _numpy_cupy():
    """A NumPy-backed stand-in for the parts of CuPy the persistent engine calls itself."""
    class Event:
        def __init__(self, **kwargs):
            pass

        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0), Event=Event)
    return types.SimpleNamespace(dtype=np.dtype, empty=np.empty, result_type=np.result_type,
                                 float32=np.float32, cuda=cuda)


@pytest.mark.parametrize("hopper_here", [True, False], ids=["hopper", "portable"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_persistent_engine_adds_launches_in_float32(monkeypatch, hopper_here, beta):
    """A float16 block of more K parts than one launch takes: the launches after the first add
    into a float32 block, rounded to float16 once, so the result equals one launch's on the
    whole K range (float16 added to between launches differed on about a quarter of the
    elements).  NumPy stands in for CuPy and for the kernels (float32 accumulators, rounded to
    the output's type)."""
    from mgemm import hopper, hopper_config, kernels
    from mgemm.engines.persistent import PersistentEngine

    launches = []

    def kernel(a_parts, b_parts, c=None, *, alpha, beta, out, **_):
        launches.append(out.dtype)
        acc = np.float32(alpha) * sum(a.astype(np.float32) @ b.astype(np.float32)
                                      for a, b in zip(a_parts, b_parts))
        if beta:
            acc += np.float32(beta) * c.astype(np.float32)
        out[...] = acc.astype(out.dtype)
        return out

    monkeypatch.setitem(sys.modules, "cupy", _numpy_cupy())
    monkeypatch.setattr(hopper, "supported", lambda: hopper_here)
    monkeypatch.setattr(hopper, "gemm_parts", lambda a, b, tune=False, **kw: kernel(a, b, **kw))
    monkeypatch.setattr(kernels, "gemm", lambda a, b, c=None, **kw: kernel([a], [b], c, **kw))
    rng = np.random.default_rng(7)
    n_parts = 2 * hopper_config.MAX_K_PARTS + 3
    a = (rng.random((64, 64 * n_parts)) + 0.5).astype(np.float16)
    b = (rng.random((64 * n_parts, 48)) + 0.5).astype(np.float16)
    c = (rng.random((64, 48)) + 0.5).astype(np.float16)
    cuts = range(0, 64 * n_parts, 64)
    engine = PersistentEngine()
    got = engine.gemm([a[:, k:k + 64] for k in cuts], [b[k:k + 64] for k in cuts], alpha=0.75,
                      beta=beta, c=c)
    groups = 3 if hopper_here else n_parts
    assert launches == [np.float32] * groups
    whole = engine.gemm([a], [b], alpha=0.75, beta=beta, c=c)
    assert launches[groups:] == [np.float16]  # one launch: its own type, no float32 block
    assert got.dtype == whole.dtype == np.float16
    assert np.mean(got == whole) >= 0.99


# -- behaviour pinned by mutation testing ------------------------------------------------------------

def test_select_and_staged_follow_the_chunk_type():
    """``auto`` gives ``numpy`` for NumPy chunks and ``auto-gpu`` for CuPy ones; ``numpy`` on CuPy
    chunks is refused; a GPU engine stages NumPy chunks only (a NumPy subclass whose module is
    "cupy" stands in for CuPy: only the type is read)."""
    class FakeCupy(np.ndarray):
        pass
    FakeCupy.__module__ = "cupy._core.core"
    gpu, host = np.empty(1).view(FakeCupy), np.empty(1)
    assert engines.select("numpy", host) == "numpy"
    assert engines.select("persistent", gpu) == "persistent"
    with pytest.raises(ValueError, match="engine 'numpy' cannot multiply CuPy chunks"):
        engines.select("numpy", gpu)
    for name in ("cublas", "persistent", "auto-gpu"):
        assert engines.staged(name, host) and not engines.staged(name, gpu)
    assert not engines.staged("numpy", host)


@pytest.mark.parametrize("alpha, beta", [(-1.0, 0.0), (1.0, -1.0), (-1.0, 1.0), (2.0, 0.5)])
def test_scale_and_add_values(alpha, beta):
    rng = np.random.default_rng(3)
    acc, c = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    want = alpha * acc + beta * c
    got = engines.scale_and_add(acc.copy(), alpha, beta, c, np)
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_engines_do_not_read_c_when_beta_is_zero():
    """``c`` is not read when ``beta == 0``: a NaN there does not reach the block (scale_and_add
    and the numpy engine, for callers that pass C along with beta == 0)."""
    from mgemm.engines import get

    nan = np.full((2, 2), np.nan)
    np.testing.assert_array_equal(engines.scale_and_add(np.ones((2, 2)), 2.0, 0.0, nan, np),
                                  np.full((2, 2), 2.0))
    got = get("numpy").gemm([np.eye(2)], [np.ones((2, 2))], alpha=3.0, beta=0.0, c=nan)
    np.testing.assert_array_equal(got, np.full((2, 2), 3.0))


def test_numpy_engine_of_no_k_gives_beta_c(monkeypatch):
    """K == 0 (every K part empty): the product is zero, so the block is beta · C; the block's
    memory is not left as allocated (here: filled with NaN)."""
    import mgemm.engines.numpy as numpy_engine
    from mgemm.engines import get

    class DirtyNumpy:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def empty(shape, dtype=float):
            return np.full(shape, np.nan, dtype)
    monkeypatch.setattr(numpy_engine, "np", DirtyNumpy())
    c = np.arange(6.0).reshape(2, 3)
    got = get("numpy").gemm_chunks([[np.empty((2, 0))]], [[np.empty((0, 3))]], alpha=2.0,
                                   beta=0.5, c=c)
    np.testing.assert_array_equal(got, 0.5 * c)
    got = get("numpy").gemm([np.empty((2, 0)), np.empty((2, 0))], [np.empty((0, 3))] * 2)
    np.testing.assert_array_equal(got, np.zeros((2, 3)))


def test_scale_and_add_scales_by_alpha_in_the_blocks_type():
    """BLAS's alpha has the matrices' type: a float32 block is scaled by alpha rounded to float32
    (a numpy.float64 alpha, as a caller may pass, gives the same block as its float32 value)."""
    acc = np.random.default_rng(5).standard_normal((20, 30)).astype(np.float32)
    got = engines.scale_and_add(acc.copy(), np.float64(1 / 3), 0.0, None, np)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, acc * np.float32(1 / 3))


def test_is_cupy_reads_the_top_level_module():
    """CuPy's arrays are of module ``cupy`` or a submodule; cupyx (sparse matrices) and
    cupy_backends are other packages."""
    def of(module):
        return type("X", (), {"__module__": module})()
    assert engines.is_cupy(of("cupy")) and engines.is_cupy(of("cupy._core.core"))
    for module in ("cupyx.scipy.sparse._csr", "cupy_backends.cuda", "numpy", "cupyish"):
        assert not engines.is_cupy(of(module))


def test_numpy_engine_gemm_takes_out_dtype_beta_and_c():
    """``gemm`` (K parts as panels) with alpha, beta and C, in the ``out_dtype`` asked for (wider
    than the parts' own type: a float64 C)."""
    from mgemm.engines import get

    rng = np.random.default_rng(9)
    a = [rng.standard_normal((5, k)).astype(np.float32) for k in (3, 4)]
    b = [rng.standard_normal((k, 6)).astype(np.float32) for k in (3, 4)]
    c = rng.standard_normal((5, 6))
    got = get("numpy").gemm(a, b, alpha=2.0, beta=-0.5, c=c, out_dtype="float64")
    assert got.dtype == np.float64
    want = 2.0 * sum(x.astype(np.float64) @ y.astype(np.float64) for x, y in zip(a, b)) - 0.5 * c
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_numpy_engine_rounds_16_bit_parts_once():
    """Each K part of a float16 block is kept in float32 until all are added: here the second
    part, (1 + 2^-10)², is 1 + 2^-9 + 2^-20, whose last term float16 cannot hold beside 1, and the
    first part cancels the rest, so only a float32 sum leaves 2^-20 (a float16 subnormal)."""
    from mgemm.engines import get

    h = np.float16
    one_over = h(1 + 2.0 ** -10)
    a_rows = [[np.array([[1]], h), np.array([[one_over]], h)]]
    b_rows = [[np.array([[-(1 + 2.0 ** -9)]], h)], [np.array([[one_over]], h)]]
    got = get("numpy").gemm_chunks(a_rows, b_rows, out_dtype="float16")
    assert got.dtype == np.float16 and got[0, 0] == h(2.0 ** -20)
    got = get("numpy").gemm([x[0] for x in [a_rows[0][:1], a_rows[0][1:]]],
                            [row[0] for row in b_rows])
    assert got[0, 0] == h(2.0 ** -20)


def test_rows_on_ignores_dimensions_of_one_element():
    """A single row's (or column's) stride is never stepped over: it does not decide alignment."""
    from mgemm.engines.auto import rows_on

    base = _aligned((4, 72))
    assert not rows_on(base[:, :64], 128)  # rows 144 bytes apart
    assert rows_on(base[:1, :64], 128)  # one row: its stride is never used
    assert rows_on(_aligned((4, 64)), 128) and not rows_on(_aligned((4, 64))[:, 1:], 128)


def test_cublas_unaligned_counts_the_output_rows():
    """A column-major B of aligned columns still gives an unaligned output where N is odd."""
    from mgemm.engines.auto import cublas_unaligned

    a = _aligned((64, 64))
    assert not cublas_unaligned(a, _aligned((64, 64)).T, np.float16)
    assert cublas_unaligned(a, _aligned((65, 64)).T, np.float16)  # output rows of 130 bytes
    assert not cublas_unaligned(a, _aligned((68, 64)).T, np.float32)  # 272 bytes
    assert cublas_unaligned(a, _aligned((66, 64)).T, np.float32)  # 264 bytes


def test_auto_keeps_one_aligned_part_on_cublas(monkeypatch):
    """One K part, aligned for cuBLAS, rows even on 128-byte boundaries: cuBLAS is ahead."""
    from mgemm import hopper
    from mgemm.engines import auto

    monkeypatch.setattr(hopper, "supported", lambda device=None: True)
    a, b = _aligned((64, 256)), _aligned((256, 128))
    assert auto.choose([a], [b]) == "cublas"
    assert auto.choose([a, a], [b, b]) == "persistent"


@pytest.mark.parametrize("tune", [False, True])
def test_auto_engine_asks_tuned_only_with_tune(monkeypatch, tune):
    """With ``tune`` the model's pick (``choose``) goes through ``tuned``, whose answer runs."""
    from mgemm.engines import auto

    ran, asked = [], []

    class Fake:
        def __init__(self, name):
            self.name = name

        def gemm(self, a_parts, b_parts, **kwargs):
            ran.append(self.name)
            return "block"
    monkeypatch.setattr(auto, "choose", lambda a, b, out_dtype=None: "cublas")
    monkeypatch.setattr(auto, "tuned", lambda a, b, out_dtype, model:
                        asked.append((model, out_dtype)) or "persistent")
    monkeypatch.setattr(auto, "get", Fake)
    got = auto.GpuAutoEngine().gemm(["a"], ["b"], out_dtype="float16", tune=tune)
    assert got == "block"
    assert ran == (["persistent"] if tune else ["cublas"])
    assert asked == ([("cublas", "float16")] if tune else [])
