"""mgemm.matmul and mgemm.gemm against NumPy: semantics, dtypes, chunkings, errors."""

from __future__ import annotations

import re

import dask
import dask.array as da
import numpy as np
import pytest

import mgemm
from conftest import assert_close, assert_within_dot_bound, has_gpu, random


@pytest.fixture(autouse=True)
def _sync():
    """Most tests need no cluster: run Dask's synchronous scheduler."""
    with dask.config.set(scheduler="sync"):
        yield


@pytest.mark.parametrize("shape_a, shape_b", [
    ((7, 5), (5, 3)), ((5,), (5, 3)), ((7, 5), (5,)), ((5,), (5,)),
    ((2, 7, 5), (5, 3)), ((7, 5), (3, 5, 4)), ((2, 1, 4, 3), (5, 3, 2)),
])
def test_matmul_semantics_match_numpy(rng, shape_a, shape_b):
    a, b = random(rng, shape_a, "f8"), random(rng, shape_b, "f8")
    ref = np.matmul(a, b)
    got = mgemm.matmul(da.from_array(a, chunks=2), da.from_array(b, chunks=3))
    assert isinstance(got, da.Array)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert_close(got.compute(), ref, np.float64)
    plain = mgemm.matmul(a, b)
    assert type(plain) is type(ref) and plain.shape == ref.shape  # 1-D @ 1-D: NumPy's scalar
    assert_close(plain, ref, np.float64)


@pytest.mark.parametrize("dt_a, dt_b", [
    ("f8", "f8"), ("f4", "f4"), ("f2", "f2"), ("c8", "c8"), ("c16", "c16"),
    ("f4", "f8"), ("i4", "i4"), ("i8", "f4"), ("i2", "u1"),
])
def test_dtypes_follow_numpy_promotion(rng, dt_a, dt_b):
    a, b = random(rng, (33, 20), dt_a), random(rng, (20, 17), dt_b)
    ref = np.matmul(a, b)
    got = mgemm.matmul(da.from_array(a, chunks=(8, 7)), da.from_array(b, chunks=(6, 9)))
    assert got.dtype == ref.dtype
    out = got.compute()
    assert out.dtype == ref.dtype
    if ref.dtype.kind in "iu":
        np.testing.assert_array_equal(out, ref)
    else:
        wide = np.matmul(a.astype(np.complex128 if ref.dtype.kind == "c" else np.float64),
                         b.astype(np.complex128 if ref.dtype.kind == "c" else np.float64))
        assert_close(out, wide, ref.dtype)


def test_ragged_and_mismatched_k_chunks(rng):
    a = random(rng, (50, 41), "f8")
    b = random(rng, (41, 29), "f8")
    da_a = da.from_array(a, chunks=((10, 3, 37), (5, 20, 16)))
    da_b = da.from_array(b, chunks=((13, 13, 15), (1, 28)))
    got = mgemm.matmul(da_a, da_b, block_size=16)
    assert got.chunks[0] and sum(got.chunks[0]) == 50 and sum(got.chunks[1]) == 29
    assert_close(got.compute(), a @ b, np.float64)


@pytest.mark.parametrize("block_size", [1, 7, 16, "auto", (5, 40), 2**64, (3, 10**30)])
def test_block_sizes(rng, block_size):
    """Any positive block size, one past the product's (past 2**63 too: it failed inside Dask's
    chunking) meaning one block along that side."""
    a, b = random(rng, (40, 30), "f8"), random(rng, (30, 45), "f8")
    got = mgemm.matmul(da.from_array(a, chunks=10), da.from_array(b, chunks=15),
                       block_size=block_size)
    assert_close(got.compute(), a @ b, np.float64)
    assert_close(mgemm.matmul(a, b, block_size=block_size), a @ b, np.float64)


def test_a_block_size_past_the_product_is_cut_to_each_side():
    from mgemm import api

    assert api._target_block(2**64, 40, 45, 30, 8, [], None) == (40, 45)
    assert api._target_block((7, 10**30), 40, 45, 30, 8, [], None) == (7, 45)
    assert api._target_block(16, 40, 45, 30, 8, [], None) == (16, 16)


def test_staged_products_are_planned_against_host_memory(monkeypatch):
    """NumPy chunks with a GPU engine: blocks are sized for the GPUs, while the chunks stored and
    the blocks made count against the workers' host memory, so a product larger than the GPUs'
    memory together is planned (here: GPUs of 1 MiB, described to a CPU cluster; the graph is
    built, not run), where CuPy chunks of it would be refused."""
    from distributed import Client, LocalCluster

    from mgemm import api
    from mgemm.plan import MemoryPlanError, Worker

    def gpus(client, dtype, *, gpu, info, **kw):
        return [Worker(name, "gpu", 50e12, 1 << 20, 1e10) for name in sorted(info)]

    monkeypatch.setattr(api, "describe_workers", gpus)
    a = da.from_array(np.ones((600, 500)), chunks=100)
    b = da.from_array(np.ones((500, 700)), chunks=100)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        out = mgemm.matmul(a, b, engine="cublas", client=client)
        assert out.shape == (600, 700) and isinstance(out._meta, np.ndarray)
        with pytest.raises(MemoryPlanError):  # CuPy chunks would have to fit the GPUs
            monkeypatch.setattr(api.engines, "staged", lambda *a: False)
            mgemm.matmul(a, b, engine="cublas", client=client)


def test_staged_products_take_blocks_whose_copies_overlap(monkeypatch):
    """NumPy chunks with a GPU engine on one GPU worker: the plan prices the copies each block
    task makes (``plan.HostCopies``), so the output comes in 2 x 2 blocks, where chunks already
    on the GPU make one block (whose copy back would follow every GEMM).  The
    graph is built, not run."""
    from distributed import Client, LocalCluster

    from mgemm import api
    from mgemm.plan import GiB, Worker

    def gpus(client, dtype, *, gpu, info, **kw):
        return [Worker(name, "gpu", 53e12, 62 * GiB, 1e10) for name in sorted(info)]

    monkeypatch.setattr(api, "describe_workers", gpus)
    a = da.ones((16384, 16384), dtype="f4", chunks=4096)
    b = da.ones((16384, 16384), dtype="f4", chunks=4096)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        staged = mgemm.matmul(a, b, engine="cublas", client=client)
        assert staged.chunks == ((8192,) * 2,) * 2
        monkeypatch.setattr(api.engines, "staged", lambda *a: False)  # as if chunks were CuPy
        assert mgemm.matmul(a, b, engine="cublas", client=client).chunks == ((16384,),) * 2


def test_numpy_with_cupy_chunks_is_refused_before_any_work():
    """A block task takes its chunks from one library: a product of NumPy with CuPy chunks (in
    either order, Dask or plain) is a TypeError saying how to bring them together.  (A NumPy
    subclass whose module is "cupy" stands in for CuPy: only the chunk type is read.)"""
    class FakeCupy(np.ndarray):
        pass
    FakeCupy.__module__ = "cupy._core"
    gpu = np.ones((4, 4)).view(FakeCupy)
    host = da.from_array(np.ones((4, 4)), chunks=2)
    for a, b in ((host, gpu), (gpu, host), (np.ones((4, 4)), da.from_array(gpu, asarray=False))):
        with pytest.raises(TypeError, match="one operand has CuPy chunks and the other NumPy"):
            mgemm.matmul(a, b)


@pytest.mark.parametrize("dtypes", [("int32", "int32"), ("complex64", "complex64"),
                                    ("int8", "uint8"), ("bool", "bool")])
def test_the_persistent_engine_refuses_what_its_kernels_do_not_multiply(dtypes):
    """``engine="persistent"`` with a product that is not float16/32/64 or bfloat16 (integers,
    complex) is a TypeError when the product is built, not in every block task on the workers;
    float operands with a complex C too."""
    a, b = da.ones((8, 6), chunks=4, dtype=dtypes[0]), da.ones((6, 8), chunks=4, dtype=dtypes[1])
    with pytest.raises(TypeError, match="engine 'persistent' multiplies float16/32/64 and "
                                        f"bfloat16 products, not {np.result_type(*dtypes)}:"):
        mgemm.matmul(a, b, engine="persistent")
    with pytest.raises(TypeError, match="not complex128"):
        mgemm.gemm(da.ones((8, 6), chunks=4), da.ones((6, 8), chunks=4),
                   da.ones((8, 8), chunks=4, dtype="complex64"), beta=1.0, engine="persistent")


@pytest.mark.skipif(has_gpu(), reason="checks the error of a machine without a GPU")
def test_gpu_engines_on_numpy_chunks_need_a_gpu(monkeypatch):
    """``cublas`` or ``persistent`` by name on NumPy chunks multiply on GPUs (their block tasks
    copy the chunks there and back): without one, a clear error comes before any task runs, on
    the cluster or in this process (no client)."""
    from distributed import Client, LocalCluster

    a = da.ones((30, 20), chunks=10)
    for engine in ("cublas", "persistent"):
        with pytest.raises(RuntimeError, match=f"engine '{engine}' cannot run here"):
            mgemm.matmul(a, a.T, engine=engine)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        for engine in ("cublas", "persistent"):
            with pytest.raises(RuntimeError, match=f"engine '{engine}' multiplies on GPUs, and "
                                                   "worker .* has none"):  # as without a client
                mgemm.matmul(a, a.T, engine=engine, client=client)
        # ``auto`` keeps NumPy chunks on the CPU
        assert_close(mgemm.matmul(a, a.T, client=client).compute(), np.full((30, 30), 20.0),
                     np.float64)


def test_meta_stays_numpy():
    got = mgemm.matmul(da.ones((4, 4), chunks=2), da.ones((4, 4), chunks=2))
    assert isinstance(got._meta, np.ndarray)


def test_array_likes_numpy_converts_are_operands():
    """What ``numpy.asarray`` converts (an object with ``__array__`` such as a pandas frame, one
    with the buffer protocol such as ``array.array``, a range) multiplies as numpy.matmul would;
    a dict or a set still raises."""
    import array

    class Frame:  # pandas' and xarray's way in
        def __init__(self, values):
            self.values = values

        def __array__(self, dtype=None, copy=None):
            return np.asarray(self.values, dtype=dtype)

    x = np.arange(12.0).reshape(3, 4)
    y = np.arange(8.0).reshape(4, 2)
    assert np.array_equal(mgemm.matmul(Frame(x), y), x @ y)
    assert np.array_equal(mgemm.matmul(array.array("d", range(4)), y), np.arange(4.0) @ y)
    assert np.array_equal(mgemm.matmul(range(4), y), np.arange(4) @ y)
    assert np.array_equal(mgemm.gemm(Frame(x), Frame(y), alpha=2.0), 2 * (x @ y))
    for bad in ({1: 2}, {1, 2}):
        with pytest.raises(TypeError, match="must be a NumPy, CuPy or Dask array"):
            mgemm.matmul(bad, y)


def test_errors_come_before_any_work():
    a = da.ones((3, 4), chunks=2)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\) .* b's second-to-last 5"):
        mgemm.matmul(a, da.ones((5, 2)))
    with pytest.raises(ValueError, match=r"\(3, 4\) and \(5,\) .* b's only 5"):  # b 1-D
        mgemm.matmul(a, da.ones(5))
    with pytest.raises(ValueError, match="at least one dimension"):
        mgemm.matmul(np.float64(2.0), a)
    with pytest.raises(ValueError, match=r"\(\)"):
        mgemm.matmul(np.ones(3), np.array(1.0))
    with pytest.raises(TypeError, match="dtype object"):
        mgemm.matmul(np.array([[1, "x"]], dtype=object), np.ones((2, 2)))
    with pytest.raises(TypeError, match="must be a NumPy, CuPy or Dask array"):
        mgemm.matmul({"a": 1}, np.ones((2, 2)))
    with pytest.raises(ValueError, match="do not broadcast"):
        mgemm.matmul(np.ones((2, 3, 4)), np.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="engine must be one of"):
        mgemm.matmul(a, a.T, engine="fast")
    with pytest.raises(TypeError, match="unknown mgemm option"):
        mgemm.matmul(a, a.T, engnie="numpy")
    unknown = a[a[:, 0] > 0]
    with pytest.raises(ValueError, match="unknown size.*compute_chunk_sizes"):
        mgemm.matmul(unknown, np.ones((4, 2)))
    with pytest.raises(TypeError, match="is a numpy.matrix"), \
            pytest.warns(PendingDeprecationWarning):  # NumPy's own, on making a matrix
        mgemm.matmul(np.asmatrix(np.ones((2, 2))), np.ones((2, 2)))
    # masked arrays: the engines would multiply their data and drop the masks
    masked = np.ma.masked_array(np.ones((3, 4)), mask=np.eye(3, 4, dtype=bool))
    for operands in ((masked, np.ones((4, 2))), (np.ones((2, 3)), masked),
                     (da.from_array(masked, chunks=2, asarray=False), a.T)):
        with pytest.raises(TypeError, match="masked array.*numpy.ma.filled"):
            mgemm.matmul(*operands)
    with pytest.raises(TypeError, match="c is a masked array"):
        mgemm.gemm(np.ones((3, 2)), np.ones((2, 4)), masked, beta=1.0)
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="chunks of type scipy.sparse.*NumPy and CuPy chunks"):
        mgemm.matmul(a.map_blocks(sparse.csr_matrix), a.T)


def test_eager_operands_are_views_lazy_ones_copies(rng):
    """An array multiplied now goes into the graph as views of its chunks (no copy, no hash of
    every byte); one in a lazy product as ``dask.array.from_array`` makes it: a copy, named by
    its hash, so a change to the array after the call does not reach the result."""
    from mgemm.api import _to_dask

    x = random(rng, (6, 5), "f8")
    eager, again = _to_dask(x, (4, 2), eager=True), _to_dask(x, (4, 2), eager=True)
    assert eager.chunks == ((4, 2), (2, 2, 1)) and eager.name != again.name
    views = list(dict(eager.__dask_graph__()).values())
    assert len(views) == 6 and all(isinstance(v, np.ndarray) and np.shares_memory(v, x)
                                   for v in views)
    lazy = _to_dask(x, (4, 2))
    assert lazy.name == _to_dask(x, (4, 2)).name
    out = mgemm.matmul(lazy, np.eye(5))
    x[:] = 0
    np.testing.assert_array_equal(out.compute(), lazy.compute())
    assert np.abs(out.compute()).min() > 0


def test_a_result_of_one_block_is_not_copied(rng, monkeypatch):
    """Arrays in, no client: a product of one block returns the block task's own array, not a
    copy made by ``Array.compute``; a constant result (alpha = 0) is still a writable array."""
    a, b = random(rng, (40, 30), "f8"), random(rng, (30, 20), "f8")

    def no_compute(self, **kwargs):
        raise AssertionError("Array.compute copies the result")
    monkeypatch.setattr(da.Array, "compute", no_compute)
    got = mgemm.matmul(a, b)
    assert_close(got, a @ b, np.float64)
    zero = mgemm.gemm(a, b, alpha=0.0)
    assert zero.flags.writeable and not zero.any() and zero.shape == (40, 20)
    with pytest.raises(AssertionError, match="copies"):  # several blocks: assembled by dask
        mgemm.matmul(a, b, block_size=10)


def test_results_gathered_from_a_cluster_are_writable(client, rng):
    """Arrays in, on a cluster: the result comes back through ``_gather``, as one chunk or many,
    and is a writable array either way (a deserialized chunk can be read-only)."""
    a, b = random(rng, (40, 30), "f8"), random(rng, (30, 20), "f8")
    for got, want in ((mgemm.gemm(a, b, alpha=0.0, client=client), np.zeros((40, 20))),
                      (mgemm.matmul(a, b, client=client), a @ b),
                      (mgemm.matmul(a, b, block_size=10, client=client), a @ b)):
        assert isinstance(got, np.ndarray) and got.flags.writeable
        assert_close(got, want, np.float64)


def test_arrays_in_on_a_client_that_is_not_the_default(rng, no_client):
    """Arrays in, ``client=`` one that is not the default (``set_as_default=False``, none is):
    the blocks are gathered on that client's loop, not the default client's, which
    ``as_completed`` would otherwise look for and not find."""
    from distributed import Client, LocalCluster

    a, b = random(rng, (40, 30), "f8"), random(rng, (30, 20), "f8")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as mine:
        got = mgemm.matmul(a, b, block_size=10, client=mine)
    assert isinstance(got, np.ndarray) and got.shape == (40, 20)
    assert_close(got, a @ b, np.float64)


def _mgemm_tasks_gone(client, kept=None) -> None:
    """No task of an mgemm product stays on the scheduler (the client's releases reach it a
    moment later: polled, up to 10 s) while ``kept`` (an exception, its traceback with it, as an
    interactive shell keeps the last one) is still referenced."""
    import gc
    import time

    assert kept is None or kept.__traceback__ is not None
    gc.collect()
    deadline = time.monotonic() + 10
    while held := client.run_on_scheduler(
            lambda dask_scheduler: [k for k in dask_scheduler.tasks if "mgemm" in str(k)]):
        assert time.monotonic() < deadline, held
        time.sleep(0.05)


def test_eager_products_leave_nothing_on_a_new_clusters_workers():
    """Arrays in, on a fresh cluster: once the results are back nothing of the products stays
    on the workers, the first product's inputs included."""
    from distributed import Client, LocalCluster

    a = np.ones((600, 600))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as lc, Client(lc) as fresh:
        for _ in range(2):
            np.testing.assert_array_equal(mgemm.matmul(a, a, block_size=150, client=fresh), a @ a)
            _mgemm_tasks_gone(fresh)


def test_a_failed_block_of_an_eager_product_leaves_nothing_on_the_cluster(client, monkeypatch):
    """Arrays in, a block task that raises: the error reaches the caller, and the product's
    blocks and scattered inputs leave the cluster although the error is kept (its traceback held
    every future of the product, so they stayed until the client closed)."""
    from mgemm import engines

    def broken(name):
        raise MemoryError("a block failed")
    monkeypatch.setattr(engines, "get", broken)
    a = np.ones((600, 600))
    with pytest.raises(MemoryError, match="a block failed") as failed:
        mgemm.matmul(a, a, block_size=150, client=client)
    monkeypatch.undo()
    _mgemm_tasks_gone(client, failed.value)
    np.testing.assert_array_equal(mgemm.matmul(a, a, block_size=150, client=client), a @ a)


def test_an_interrupted_eager_product_stops_and_leaves_nothing_on_the_cluster(client, monkeypatch):
    """Arrays in, interrupted (Ctrl-C) after the first block arrived: the blocks not yet run are
    cancelled and nothing of the product stays on the cluster, with the interrupt kept."""
    import distributed

    arrived = []

    def interrupted(futures, **kw):
        for item in distributed.client.as_completed(futures, **kw):
            arrived.append(item[0].key)
            raise KeyboardInterrupt
    monkeypatch.setattr(distributed, "as_completed", interrupted)
    a = np.ones((600, 600))
    with pytest.raises(KeyboardInterrupt) as stopped:
        mgemm.matmul(a, a, block_size=150, client=client)
    assert len(arrived) == 1
    _mgemm_tasks_gone(client, stopped.value)


@pytest.mark.parametrize("where", ["scattering b", "building the graph"])
def test_an_eager_product_stopped_before_its_blocks_leaves_nothing_on_the_cluster(client, monkeypatch,
                                                                                   where):
    """Arrays in, interrupted while B's chunks are sent (A's already on the workers), or failed
    building the graph after the inputs went out: the chunks sent leave the workers, with the
    exception kept (the frames of its traceback hold their futures)."""
    from mgemm import api, cluster, graph

    scatter, calls = cluster.scatter, []

    def interrupted(*args, **kw):
        calls.append(args[3])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return scatter(*args, **kw)

    def broken(*args, **kw):
        raise RuntimeError("the graph could not be built")
    if where == "scattering b":
        monkeypatch.setattr(cluster, "scatter", interrupted)
    else:
        monkeypatch.setattr(graph, "build", broken)
    a = np.ones((600, 600))
    with pytest.raises(KeyboardInterrupt if where == "scattering b" else RuntimeError) as stopped:
        mgemm.matmul(a, a, block_size=150, client=client)
    assert where != "scattering b" or calls[0].startswith(api.INPUT_PREFIX + "a-")
    _mgemm_tasks_gone(client, stopped.value)


@pytest.mark.parametrize("losses", [0, 1, 2, 3])
def test_an_eager_product_is_built_again_at_most_lost_input_retries_times(client, monkeypatch,
                                                                          losses):
    """Arrays in: each time the inputs are lost (here, faked: ``_gather`` raises as the client
    does, and ``_inputs_lost`` says so) the product is built and scattered again, up to
    ``LOST_INPUT_RETRIES`` (2) times; past that a ``RuntimeError``.  (test_processes kills real
    workers.)"""
    from distributed.client import FutureCancelledError

    from mgemm import api

    gather, builds, failed = api._gather, [], []

    def lose(client, out):
        if len(failed) < losses:
            failed.append(out.name)
            raise FutureCancelledError(out.name, reason="lost")
        return gather(client, out)
    monkeypatch.setattr(api, "_gather", lose)
    monkeypatch.setattr(api, "_inputs_lost", lambda out: True)
    a = np.arange(12.0).reshape(3, 4)

    def build():
        builds.append(True)
        return da.from_array(a, chunks=2) * 2
    if losses <= api.LOST_INPUT_RETRIES:
        np.testing.assert_array_equal(api._finish(build, True, {"client": client}), 2 * a)
        assert len(builds) == losses + 1
    else:
        with pytest.raises(RuntimeError, match="lost in each of 3 attempts"):
            api._finish(build, True, {"client": client})
        assert len(builds) == api.LOST_INPUT_RETRIES + 1


def test_an_eager_product_is_not_run_again_after_a_restart(client, monkeypatch):
    """A restart (``Client.restart``) cancels every future, the scattered inputs among them,
    with its own reason: the product raises that cancellation, where a lost worker's inputs
    would have it built and scattered again (it ran again, silently)."""
    from distributed.client import FutureCancelledError

    from mgemm import api

    builds = []

    def restarted(client, out):
        raise FutureCancelledError(out.name, reason="scheduler-restart",
                                   msg="Scheduler has restarted. Please re-run your work.")
    monkeypatch.setattr(api, "_gather", restarted)
    monkeypatch.setattr(api, "_inputs_lost", lambda out: True)

    def build():
        builds.append(True)
        return da.ones((3, 4), chunks=2)
    with pytest.raises(FutureCancelledError, match="scheduler-restart"):
        api._finish(build, True, {"client": client})
    assert len(builds) == 1


def test_nan_and_inf_propagate_like_numpy(rng, no_client):
    a, b = random(rng, (6, 5), "f8"), random(rng, (5, 4), "f8")
    a[2, 3] = np.nan
    b[1, 2] = np.inf
    ref = a @ b
    got = mgemm.matmul(da.from_array(a, chunks=2), da.from_array(b, chunks=2)).compute()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    finite = np.isfinite(ref)  # within the dot products' rounding (an element may cancel to ~0)
    scale = np.abs(np.nan_to_num(a, nan=0.0)) @ np.abs(np.nan_to_num(b, posinf=0.0))
    assert_within_dot_bound(got[finite], ref[finite], scale[finite], 5, "f8")


@pytest.mark.parametrize("shape_a, shape_b", [((0, 4), (4, 3)), ((3, 0), (0, 5)), ((3, 4), (4, 0)),
                                              ((0, 2, 3), (3, 4)), ((0, 5), (5, 5000)),
                                              ((0, 2, 3), (3, 300)), ((1, 0, 86, 5), (5, 0))])
@pytest.mark.parametrize("lazy", [True, False])
def test_empty_dimensions(shape_a, shape_b, lazy):
    """Empty results of NumPy's shape, also beside a dimension of thousands (Dask's automatic
    chunks divided by zero there); through gemm with C too."""
    a, b = np.ones(shape_a), np.ones(shape_b)
    ref = a @ b
    wrap = (lambda x: da.from_array(x, chunks=-1)) if lazy else (lambda x: x)  # (Dask's "auto" fails too)
    got = mgemm.matmul(wrap(a), wrap(b))
    assert got.shape == ref.shape
    np.testing.assert_array_equal(np.asarray(got), ref)
    if a.ndim == b.ndim == 2:
        c = np.full(ref.shape, 2.0)
        got = mgemm.gemm(wrap(a), wrap(b), wrap(c), alpha=0.5, beta=1.5)
        np.testing.assert_array_equal(np.asarray(got), 0.5 * ref + 1.5 * c)


def test_gemm_blas_semantics(rng):
    a, b, c = random(rng, (9, 7), "f8"), random(rng, (11, 9), "f8"), random(rng, (7, 11), "f8")
    got = mgemm.gemm(da.from_array(a, chunks=4), da.from_array(b, chunks=5), da.from_array(c, chunks=3),
                     alpha=-1.5, beta=0.25, trans_a=True, trans_b=True)
    assert_close(got.compute(), -1.5 * a.T @ b.T + 0.25 * c, np.float64)


@pytest.mark.parametrize("trans_a, trans_b", [(True, False), (False, True), (True, True)])
def test_gemm_transposes_square_operands(rng, trans_a, trans_b):
    """Square operands, where a transpose left out still multiplies: each flag alone."""
    a, b = random(rng, (12, 12), "f8"), random(rng, (12, 12), "f8")
    got = mgemm.gemm(da.from_array(a, chunks=5), da.from_array(b, chunks=4),
                     trans_a=trans_a, trans_b=trans_b)
    assert_close(got.compute(), (a.T if trans_a else a) @ (b.T if trans_b else b), np.float64)


def test_gemm_does_not_read_c_when_beta_is_zero(rng):
    a, b = random(rng, (4, 3), "f8"), random(rng, (3, 5), "f8")
    c = np.full((4, 5), np.nan)
    assert_close(mgemm.gemm(a, b, c, beta=0.0), a @ b, np.float64)


def test_gemm_does_not_read_a_b_when_alpha_is_zero(rng):
    a, b = np.full((4, 3), np.nan), np.full((3, 5), np.inf)
    c = random(rng, (4, 5), "f8")
    assert_close(mgemm.gemm(a, b, c, alpha=0.0, beta=2.0), 2.0 * c, np.float64)
    zeros = mgemm.gemm(a, b, alpha=0)
    np.testing.assert_array_equal(zeros, np.zeros((4, 5)))
    # a C with an empty chunk keeps its shape (dask's own scaling of this one gains a row)
    lazy_c = da.from_array(c[:1], chunks=((0, 1), (5,)))
    got = mgemm.gemm(da.from_array(a[:1]), b, lazy_c, alpha=0, beta=2.0)
    assert got.compute().shape == (1, 5)
    assert_close(got.compute(), 2.0 * c[:1], np.float64)


def test_gemm_errors():
    with pytest.raises(ValueError, match="2-D"):
        mgemm.gemm(np.ones(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"c has shape \(2, 2\)"):
        mgemm.gemm(np.ones((3, 4)), np.ones((4, 5)), np.ones((2, 2)), beta=1.0)
    with pytest.raises(TypeError, match="alpha must be a number"):
        mgemm.gemm(np.ones((3, 4)), np.ones((4, 5)), alpha="2")
    for flag in ("N", "T", 1, None):  # BLAS letters are truthy: "N" would have transposed
        with pytest.raises(TypeError, match="trans_a must be True or False"):
            mgemm.gemm(np.ones((3, 3)), np.ones((3, 3)), trans_a=flag)
        with pytest.raises(TypeError, match="trans_b must be True or False"):
            mgemm.gemm(np.ones((3, 3)), np.ones((3, 3)), trans_b=flag)
    got = mgemm.gemm(np.arange(6.0).reshape(3, 2), np.ones((3, 2)), trans_a=np.True_)
    assert got.tolist() == (np.arange(6.0).reshape(3, 2).T @ np.ones((3, 2))).tolist()


def test_options_from_dask_config(rng):
    a, b = random(rng, (20, 20), "f8"), random(rng, (20, 20), "f8")
    with dask.config.set({"mgemm.block_size": 5}):
        got = mgemm.matmul(da.from_array(a, chunks=5), da.from_array(b, chunks=5))
    assert got.numblocks == (4, 4)
    assert_close(got.compute(), a @ b, np.float64)


@pytest.mark.parametrize("split", ["on", "off", "auto"])
def test_on_a_cluster_with_placement(client, rng, split):
    a, b = random(rng, (96, 80), "f8"), random(rng, (80, 64), "f8")
    x, y = da.from_array(a, chunks=(32, 16)), da.from_array(b, chunks=(16, 32))
    got = client.compute(mgemm.matmul(x, y, split=split, block_size=32, client=client)).result()
    assert_close(got, a @ b, np.float64)


def test_a_block_for_every_thread_of_a_cpu_worker(rng):
    """One worker of four threads, each block task a single-threaded BLAS call there: Dask
    operands of one chunk each are cut so that every thread gets a block."""
    from distributed import Client, LocalCluster

    a, b = random(rng, (512, 512), "f8"), random(rng, (512, 512), "f8")
    x, y = da.from_array(a, chunks=-1), da.from_array(b, chunks=-1)
    with LocalCluster(n_workers=1, threads_per_worker=4, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        got = mgemm.matmul(x, y, client=client)
        assert got.numblocks[0] * got.numblocks[1] >= 4
        assert_close(client.compute(got).result(), a @ b, np.float64)


def test_arrays_multiplied_inside_a_task_of_a_one_thread_worker(client, rng):
    """``mgemm.matmul`` of NumPy arrays called in a Dask task finds the worker's own client and
    runs its blocks on the cluster; on a worker of one thread, a block planned there waited
    forever for the thread that waited for it.  Now that thread leaves the worker's pool while
    it waits, and is back for the next task after.  (Two one-thread workers, blocks on each.)"""
    a, b = random(rng, (200, 150), "f8"), random(rng, (150, 120), "f8")

    def multiply_and_say_if_back_in_the_pool(a, b):
        from distributed.threadpoolexecutor import thread_state
        return mgemm.matmul(a, b, block_size=64), thread_state.proceed

    for worker in client.nthreads():
        got, rejoined = client.submit(multiply_and_say_if_back_in_the_pool, a, b,
                                      workers=[worker], pure=False).result(timeout=30)
        assert_close(got, a @ b, np.float64)
        assert rejoined  # the thread is one of the worker's task threads again
    assert client.submit(lambda: 2 + 2, pure=False).result(timeout=10) == 4


def test_an_asynchronous_client(rng):
    """On the event loop of an asynchronous client mgemm cannot wait for the scheduler while it
    plans: a clear error before any work, not a coroutine left unawaited.  Called in a thread it
    runs (lazy and eager), and under ``patch_dask`` the loop's ``a @ b`` stays dask's own."""
    import asyncio

    from distributed import Client, LocalCluster

    a, b = random(rng, (90, 70), "f8"), random(rng, (70, 60), "f8")
    x, y = da.from_array(a, chunks=32), da.from_array(b, chunks=32)

    async def main():
        async with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                asynchronous=True, dashboard_address=":0") as cluster, \
                Client(cluster, asynchronous=True) as client:
            for call in (lambda: mgemm.matmul(x, y), lambda: mgemm.matmul(a, b),
                         lambda: mgemm.gemm(x, y, client=client)):
                with pytest.raises(RuntimeError, match="asyncio.to_thread"):
                    call()
            lazy = await asyncio.to_thread(mgemm.matmul, x, y)
            assert lazy.name.startswith("mgemm-")
            assert_close(await client.compute(lazy), a @ b, np.float64)
            assert_close(await asyncio.to_thread(mgemm.matmul, a, b), a @ b, np.float64)
            with mgemm.patch_dask():
                patched = x @ y
            assert not any(str(layer).startswith("mgemm-") for layer in patched.dask.layers)
            assert_close(await client.compute(patched), a @ b, np.float64)

    asyncio.run(main())


def test_a_closed_client_is_named_before_any_work():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster:
        client = Client(cluster)
        client.close()
    x = da.ones((100, 100), chunks=50)
    with pytest.raises(ValueError, match="client given is closed"):
        mgemm.matmul(x, x, client=client)


def test_bfloat16_numpy_and_dask_operands():
    """ml_dtypes' bfloat16 (NumPy kind "V") multiplies like any float: NumPy and Dask operands,
    a bfloat16 result, within bfloat16's error of the float64 product."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((70, 50)).astype(bf16)
    b = rng.standard_normal((50, 30)).astype(bf16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for got in (mgemm.matmul(a, b),
                mgemm.matmul(da.from_array(a, chunks=(32, 16)), da.from_array(b, chunks=(20, 16)))):
        assert got.dtype == bf16 and got.shape == (70, 30)
        got = np.asarray(got).astype(np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2


def test_bfloat16_with_float16_gives_float32():
    """Like NumPy's matmul (through ml_dtypes' promotion, or mgemm's own where that is missing:
    below), the product of bfloat16 and float16 is float32 (both embed in it exactly)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((20, 12)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((12, 9)).astype(np.float16)
    got = mgemm.matmul(a, b)
    assert got.dtype == np.float32
    assert_close(got, a.astype(np.float64) @ b.astype(np.float64), np.float32)
    assert mgemm.matmul(a, b.astype(np.float64)).dtype == np.float64


def test_result_type_where_numpy_has_no_promotion_for_bfloat16(monkeypatch):
    """Where NumPy cannot promote bfloat16 (ml_dtypes releases that leave it out), the result
    type is the smallest float that holds every operand's exactly; with integers there is
    none."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from mgemm import api

    bf16 = np.dtype(ml_dtypes.bfloat16)
    promote = np.result_type

    def without_bfloat16(*types):
        if any(np.dtype(t) == bf16 for t in types):
            raise TypeError("no promotion")
        return promote(*types)
    monkeypatch.setattr(np, "result_type", without_bfloat16)

    def of(*dtypes):
        return api._result_dtype(*(np.empty(1, d) for d in dtypes))
    assert of(bf16, bf16) == bf16
    assert of(bf16, np.float16) == of(np.float16, bf16) == np.float32
    assert of(bf16, np.float64) == np.float64 and of(bf16, np.complex64) == np.complex64
    with pytest.raises(TypeError, match="no common dtype for bfloat16, int32"):
        of(bf16, np.int32)


def test_numpy_operands_on_a_cluster_go_to_their_readers(client, rng, monkeypatch):
    """On a cluster, NumPy operands are not carried in the graph: each chunk is scattered to a
    worker whose planned block task reads it (C's part of a block: the task that writes it).
    The answer is NumPy's."""
    from distributed import Future

    from mgemm import cluster, graph

    built, held = [], {}
    build, scatter = graph.build, cluster.scatter
    monkeypatch.setattr(graph, "build",
                        lambda *args, **kw: built.append(build(*args, **kw)) or built[-1])

    def scatter_and_look(*args, **kw):  # where each chunk is before any task fetches a copy
        x = scatter(*args, **kw)
        held.update(client.who_has(list(x.dask.layers[x.name].values())))
        return x

    monkeypatch.setattr(cluster, "scatter", scatter_and_look)
    a, b, c = random(rng, (96, 80), "f8"), random(rng, (80, 64), "f8"), random(rng, (96, 64), "f8")
    got = mgemm.gemm(a, b, c, alpha=2.0, beta=0.5, block_size=16, split="off", client=client)
    assert_close(got, 2.0 * (a @ b) + 0.5 * c, np.float64)
    (out,) = built
    layer = out.dask.layers[out.name]
    placed = layer.annotations["workers"]
    readers: dict = {}
    for key, task in layer.items():
        for dep in task.dependencies:
            readers.setdefault(dep, set()).update(placed(key))
    assert len({placed(key)[0] for key in layer}) == 2
    inputs = {name: lay for name, lay in out.dask.layers.items() if name.startswith("mgemm-input-")}
    assert sorted(name.split("-")[2] for name in inputs) == ["a", "b", "c"]
    for lay in inputs.values():
        for key, value in lay.items():
            assert isinstance(value, Future)
            assert len(held[key]) == 1 and held[key][0] in readers[key], key
    # a Dask operand beside a NumPy one: a lazy product, the NumPy operand in the graph as Dask
    # puts it there (nothing is sent before the product is computed)
    lazy = mgemm.matmul(da.from_array(a, chunks=(16, 40)), b, block_size=16, client=client)
    assert not any(name.startswith("mgemm-input-") for name in lazy.dask.layers)
    assert_close(client.compute(lazy).result(), a @ b, np.float64)


def test_gemm_scalars_that_the_product_type_cannot_hold_raise():
    """BLAS's alpha and beta have the matrices' type: a complex one for a real product, or a
    fraction for an integer one, is an error before any work, not a silently cut result."""
    real, ints = np.ones((3, 4)), np.ones((3, 4), dtype=np.int64)
    with pytest.raises(TypeError, match=r"alpha = 1j is complex, but the product is float64"):
        mgemm.gemm(real, real.T, alpha=1j)
    with pytest.raises(TypeError, match=r"beta = \(2\+1j\) is complex"):
        mgemm.gemm(real, real.T, np.ones((3, 3)), beta=2 + 1j)
    with pytest.raises(TypeError, match=r"alpha = 2.5 is not an integer, but the product is int64"):
        mgemm.gemm(ints, ints.T, alpha=2.5)
    with pytest.raises(TypeError, match="not an integer"):
        mgemm.gemm(ints, ints.T, alpha=np.nan)
    np.testing.assert_array_equal(mgemm.gemm(real, real.T, alpha=2 + 0j), np.full((3, 3), 8.0))
    np.testing.assert_array_equal(mgemm.gemm(ints, ints.T, alpha=2.0), np.full((3, 3), 8))
    got = mgemm.gemm(real.astype(complex), real.T, alpha=1j)
    np.testing.assert_array_equal(got, np.full((3, 3), 4j))
    # whole numbers the type cannot hold, and a bool product's scalars (0 or 1)
    small, flags = np.ones((2, 3), np.uint8), np.ones((2, 3), bool)
    with pytest.raises(TypeError, match=r"beta = -1 is not a value of the product's type uint8"):
        mgemm.gemm(small, small.T, np.ones((2, 2), np.uint8), beta=-1)
    with pytest.raises(TypeError, match="not a value of the product's type int64"):
        mgemm.gemm(ints, ints.T, alpha=2.0 ** 70)
    with pytest.raises(TypeError, match="alpha = 0.5 is not an integer, but the product is bool"):
        mgemm.gemm(flags, flags.T, alpha=0.5)
    for c in (np.eye(2, dtype=bool), da.from_array(np.eye(2, dtype=bool), chunks=1)):
        got = mgemm.gemm(da.from_array(flags, chunks=1), flags.T, c, alpha=0, beta=1).compute()
        np.testing.assert_array_equal(got, np.eye(2, dtype=bool))
        np.testing.assert_array_equal(mgemm.gemm(flags, flags.T, c, beta=1), np.ones((2, 2), bool))


@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_gemm_adds_beta_c_in_the_result_type(alpha):
    """``beta * C`` is formed in the result's type, not in a narrower C's, where it would wrap
    or round before the sum (also where A and B are not read, alpha == 0)."""
    ones = np.ones((2, 3))
    cases = [(ones, np.full((2, 2), 60000, np.float16), 2.0),  # float16 overflows at 65504
             (ones.astype(np.int64), np.full((2, 2), 100, np.int8), 3),  # int8 wraps at 127
             (ones.astype(np.int64), np.full((2, 2), 2 ** 30, np.int32), 4),
             (ones, np.full((2, 2), 1 / 3, np.float32), 0.1)]
    for a, c, beta in cases:
        want = alpha * (a @ a.T) + beta * c.astype(np.float64)
        for lazy in (False, True):
            x = da.from_array(a, chunks=1) if lazy else a
            got = mgemm.gemm(x, a.T, c, alpha=alpha, beta=beta)
            got = got.compute() if lazy else got
            assert got.dtype == np.result_type(a, c)
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-15)


def test_gemm_multiplies_narrow_integers_in_the_type_a_wider_c_sets():
    """Integer (bool) A and B with a wider C: ``A @ B`` in the product's type, as ``beta · C``,
    not in A's and B's, where it would wrap (int8: 4 · 100 · 100) and then be widened; in one
    block and across K chunks (the first part written, the others added)."""
    cases = [(np.full((2, 4), 100, np.int8), np.int64, 40000),
             (np.full((2, 4), 100, np.uint8), np.uint16, 40000),
             (np.ones((2, 4), bool), np.int64, 4)]
    for a, c_type, want in cases:
        c = np.ones((2, 2), c_type)
        for beta in (0.0, 1.0):
            for x in (a, da.from_array(a, chunks=(1, 1)), da.from_array(a, chunks=(2, 4))):
                got = mgemm.gemm(x, a.T, c, beta=beta)
                got = got.compute() if isinstance(got, da.Array) else got
                assert got.dtype == np.result_type(a, c)
                np.testing.assert_array_equal(got, np.full((2, 2), want + beta))


# -- drawn products against NumPy --------------------------------------------------------------------

DRAWN_DTYPES = ["float64", "float32", "float16", "complex64", "complex128", "int32", "int64",
                "uint8", "bool"]


def _drawn_chunks(data, size: int) -> tuple:
    """Dask chunks of ``size``: up to three cuts at drawn places (ragged; (0,) when empty)."""
    from hypothesis import strategies as st

    if size <= 1:
        return (size,)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, size - 1), max_size=3))))
    edges = [0, *cuts, size]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


def _drawn_operand(rng, shape, dtype):
    x = random(rng, shape, dtype)
    if np.dtype(dtype).kind == "f":
        x[x == 0] = 1  # never zeros
    return x


def _check_drawn(got, a, b) -> None:
    want = np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.dtype)
    if not want.size:
        return
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
        return
    wide = np.complex128 if want.dtype.kind == "c" else np.float64
    ref = np.matmul(a.astype(wide), b.astype(wide))
    scale = np.matmul(np.abs(a.astype(wide)), np.abs(b.astype(wide)))
    assert_within_dot_bound(got, ref, scale, a.shape[-1], want.dtype)


MAX_UNIT_BLOCKS = 1024  # drawn products of block size 1 have at most this many output blocks


def _drawn_product(data):
    """(a, b, options, dask or NumPy operands): shapes with 1-D, batched and empty operands,
    ragged and mismatched chunks, NumPy dtypes mixed, and the planner's options."""
    from hypothesis import strategies as st

    m, n, k = (data.draw(st.sampled_from([0, 1, 2, 3, 7, 16, 33, 64])) for _ in range(3))
    batch = data.draw(st.sampled_from([[], [], [2], [3]]))
    shape_a = [k] if data.draw(st.integers(0, 9)) == 0 else [*batch, m, k]
    shape_b = [k] if data.draw(st.integers(0, 9)) == 0 else [
        *([1] if batch and data.draw(st.booleans()) else batch), k, n]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = _drawn_operand(rng, shape_a, data.draw(st.sampled_from(DRAWN_DTYPES)))
    b = _drawn_operand(rng, shape_b, data.draw(st.sampled_from(DRAWN_DTYPES)))
    options = data.draw(st.fixed_dictionaries({}, optional={
        "split": st.sampled_from(["auto", "on", "off"]),
        "block_size": st.sampled_from([1, 5, 16, "auto", (3, 40)])}))
    if options.get("block_size") == 1 and int(np.prod(batch)) * m * n > MAX_UNIT_BLOCKS:
        # a task per element: 3 x 64 x 64 of them took minutes on a 2-core CI machine (Dask's
        # cost per task), past the suite's timeout; such products take blocks of 5 instead
        options["block_size"] = 5
    as_dask = data.draw(st.booleans())
    return a, b, options, as_dask


def _drawn_matmul(data, client=None):
    a, b, options, as_dask = _drawn_product(data)
    if as_dask:
        x = da.from_array(a, chunks=tuple(_drawn_chunks(data, s) for s in a.shape))
        y = da.from_array(b, chunks=tuple(_drawn_chunks(data, s) for s in b.shape))
        out = mgemm.matmul(x, y, **options, client=client)
        assert isinstance(out, da.Array)
        got = out.compute() if client is None else client.compute(out).result()
        assert (out.shape, out.dtype) == (got.shape, got.dtype)
    else:
        got = mgemm.matmul(a, b, **options, client=client)
        assert type(got) is type(np.matmul(a, b))  # 1-D @ 1-D: NumPy's scalar
    _check_drawn(got, a, b)


def test_drawn_products_equal_numpy(no_client):
    """Products drawn by hypothesis, on Dask's synchronous scheduler: NumPy's shape, dtype and
    values (exact for integers and booleans; floats against float64 within the type's error)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data):
        _drawn_matmul(data)

    check()


def test_drawn_products_on_a_cluster_equal_numpy(client):
    """The same draws through a two-worker cluster: placement, tail splits and fix-ups across
    workers, NumPy operands scattered to the workers that read them first."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data):
        _drawn_matmul(data, client=client)

    check()


def test_drawn_gemm_equals_blas_semantics():
    """``gemm`` drawn by hypothesis: transposes, alpha and beta (0 among them: C, holding a NaN,
    is then not read), ragged chunks of A, B and C, against alpha·op(A)·op(B) + beta·C."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data):
        m, n, k = (data.draw(st.sampled_from([1, 3, 16, 33])) for _ in range(3))
        trans_a, trans_b = data.draw(st.booleans()), data.draw(st.booleans())
        dtype = data.draw(st.sampled_from(["float64", "float32", "complex128"]))
        alpha = data.draw(st.sampled_from([0.0, 1.0, -2.5]))
        beta = data.draw(st.sampled_from([0.0, 1.0, 0.5]))
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        a = _drawn_operand(rng, (k, m) if trans_a else (m, k), dtype)
        b = _drawn_operand(rng, (n, k) if trans_b else (k, n), dtype)
        c = _drawn_operand(rng, (m, n), dtype)
        if beta == 0:
            c[0, 0] = np.nan
        x, y, z = (da.from_array(v, chunks=tuple(_drawn_chunks(data, s) for s in v.shape))
                   for v in (a, b, c))
        got = mgemm.gemm(x, y, z, alpha=alpha, beta=beta, trans_a=trans_a,
                         trans_b=trans_b).compute()
        wide = np.complex128 if dtype.startswith("complex") else np.float64
        op_a, op_b = (a.T if trans_a else a).astype(wide), (b.T if trans_b else b).astype(wide)
        want = alpha * (op_a @ op_b) + (beta * c.astype(wide) if beta else 0)
        assert got.shape == want.shape and got.dtype == np.dtype(dtype)
        assert np.isfinite(got).all()
        scale = abs(alpha) * (np.abs(op_a) @ np.abs(op_b)) + (
            abs(beta) * np.abs(c.astype(wide)) if beta else 0)
        assert_within_dot_bound(got, want, scale, k, dtype)

    check()


# -- behaviour pinned by mutation testing ------------------------------------------------------------

def test_list_operands_are_arrays():
    """Nested lists (and tuples) multiply as ``numpy.asarray`` makes them, as NumPy's matmul does."""
    a, b = [[1, 2], [3, 4], [5, 6]], (1, -1)
    got = mgemm.matmul(a, b)
    want = np.matmul(a, b)
    assert type(got) is np.ndarray and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(mgemm.gemm([[1.0, 2.0]], [[3.0], [4.0]], alpha=2.0), [[22.0]])


@pytest.mark.parametrize("dtype", ["datetime64[s]", "timedelta64[s]"])
def test_time_dtypes_have_no_matrix_product(dtype):
    x = np.zeros((2, 2), dtype=dtype)
    with pytest.raises(TypeError, match=re.escape(f"a has dtype {dtype}, which has no matrix product")):
        mgemm.matmul(x, np.ones((2, 2)))


@pytest.mark.parametrize("lazy", [False, True])
def test_an_empty_batch_keeps_the_result_dtype(lazy):
    """No matrices in the batch: an empty result of NumPy's shape and dtype (not float64)."""
    a, b = np.ones((0, 2, 3), np.float32), np.ones((3, 4), np.float32)
    want = np.matmul(a, b)
    got = mgemm.matmul(da.from_array(a) if lazy else a, b)
    assert got.shape == want.shape and got.dtype == want.dtype == np.float32
    assert np.asarray(got).dtype == np.float32


def test_degenerate_products_keep_the_result_dtype():
    """alpha == 0 and empty dimensions need no product, and still give the result's dtype."""
    a = np.ones((3, 4), np.float32)
    for got in (mgemm.gemm(a, a.T, alpha=0), mgemm.matmul(a[:, :0], a.T[:0]),
                mgemm.gemm(da.from_array(a, chunks=2), a.T, alpha=0).compute()):
        assert got.dtype == np.float32 and got.shape == (3, 3) and not got.any()
    # a numpy.float64 beta (wider than the operands) does not widen the result either
    c = np.full((3, 3), 0.5, np.float32)
    got = mgemm.gemm(a, a.T, c, alpha=0, beta=np.float64(2.0))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.ones((3, 3), np.float32))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_degenerate_16bit_products_scale_c_as_the_others(dtype):
    """K == 0 and alpha == 0 with a 16-bit C: beta · C formed in float32 and rounded once, as a
    product with K > 0 forms it (not beta rounded to 16 bits and multiplied there)."""
    from mgemm.bench import array_dtype

    t = array_dtype(dtype)
    c = (np.arange(1, 65, dtype=np.float32) / 7).reshape(8, 8).astype(t)
    want = (np.float32(0.1) * c.astype(np.float32)).astype(t)
    for k, alpha in ((0, 1.0), (3, 0.0)):
        a = np.ones((8, k), t)
        for x in (a, da.from_array(a, chunks=4)):
            got = mgemm.gemm(x, a.T, c, alpha=alpha, beta=0.1)
            got = got.compute() if isinstance(got, da.Array) else got
            assert got.dtype == t
            np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_gemm_result_type_includes_c():
    """C takes part in the type promotion: float32 A and B with a float64 C give float64, as
    ``alpha * a @ b + beta * c`` does in NumPy."""
    rng = np.random.default_rng(21)
    a, b = random(rng, (6, 5), "f4"), random(rng, (5, 4), "f4")
    c = random(rng, (6, 4), "f8")
    want = 1.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 0.25 * c
    for x in (a, da.from_array(a, chunks=3)):
        got = mgemm.gemm(x, b, c, alpha=1.5, beta=0.25)
        got = got.compute() if isinstance(got, da.Array) else got
        assert got.dtype == np.float64
        assert_close(got, want, np.float32)  # the product itself is float32's


def test_gemm_with_a_dask_c_is_lazy():
    """Any Dask operand, C included, makes the result a lazy Dask array."""
    rng = np.random.default_rng(22)
    a, b, c = random(rng, (4, 3), "f8"), random(rng, (3, 5), "f8"), random(rng, (4, 5), "f8")
    got = mgemm.gemm(a, b, da.from_array(c, chunks=2), beta=0.5)
    assert isinstance(got, da.Array)
    assert_close(got.compute(), a @ b + 0.5 * c, np.float64)


def test_gemm_scalars_must_be_numbers_not_bools():
    x = np.ones((2, 3))
    for name in ("alpha", "beta"):
        for flag in (True, np.True_, np.array(True)):
            with pytest.raises(TypeError, match=f"{name} must be a number, got (np.)?True"):
                mgemm.gemm(x, x.T, np.ones((2, 2)), **{name: flag})
        with pytest.raises(TypeError, match=f"{name} must be a number, got array"):
            mgemm.gemm(x, x.T, np.ones((2, 2)), **{name: np.array([2.0])})


def test_gemm_scalars_numpy_scales_by():
    """Python integers beyond NumPy's (2**64), and 0-d arrays, scale as NumPy scales by them."""
    x = np.ones((2, 3))
    for dtype in ("f8", "c16"):
        got = mgemm.gemm(x.astype(dtype), x.T, alpha=2**64)
        np.testing.assert_array_equal(got, 2**64 * (x @ x.T).astype(dtype))
    np.testing.assert_array_equal(mgemm.gemm(x, x.T, np.ones((2, 2)), alpha=np.array(2.0),
                                             beta=np.asarray(3, np.int8)), 2 * (x @ x.T) + 3)


def test_gemm_whole_and_real_scalars_of_other_types_are_converted():
    """A float alpha or beta that is a whole number scales an integer product as the integer
    does, and a complex one with no imaginary part a real product as its real part (the
    product's type is kept and C is added in it)."""
    ints = np.arange(6, dtype=np.int64).reshape(2, 3)
    c = np.array([[1, -2], [3, 4]], np.int64)
    got = mgemm.gemm(ints, ints.T, c, alpha=3.0, beta=2.0)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, 3 * (ints @ ints.T) + 2 * c)
    np.testing.assert_array_equal(mgemm.gemm(ints, ints.T, c, alpha=2 + 0j, beta=-1 + 0j),
                                  2 * (ints @ ints.T) - c)
    real = ints.astype(np.float64)
    got = mgemm.gemm(real, real.T, c.astype(np.float64), alpha=0.5 + 0j, beta=0.25 + 0j)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, 0.5 * (real @ real.T) + 0.25 * c, rtol=1e-15)


def test_gemm_bool_scalars_are_zero_or_one():
    flags = np.ones((2, 3), bool)
    with pytest.raises(TypeError, match=r"alpha = 2 is not a value of the product's type bool"):
        mgemm.gemm(flags, flags.T, alpha=2)


def test_gemm_on_a_cluster_does_not_send_c_when_beta_is_zero(client, monkeypatch):
    """beta == 0: C is not read, so an eager product on a cluster scatters only A and B."""
    rng = np.random.default_rng(23)
    from mgemm import cluster

    sent, scatter = [], cluster.scatter
    monkeypatch.setattr(cluster, "scatter", lambda c, x, chunks, name, *rest, **kw:
                        sent.append(name.split("-")[2]) or scatter(c, x, chunks, name, *rest, **kw))
    a, b = random(rng, (8, 6), "f8"), random(rng, (6, 4), "f8")
    got = mgemm.gemm(a, b, np.full((8, 4), np.nan), beta=0.0, client=client)
    assert_close(got, a @ b, np.float64)
    assert sorted(sent) == ["a", "b"]


def test_block_size_sets_the_output_blocks():
    """``block_size=n`` plans n × n output blocks, ``(rows, cols)`` rows × cols (chunks of one
    element leave the planner free to group them)."""
    x = da.ones((8, 8), chunks=1)
    assert mgemm.matmul(x, x, block_size=4).chunks == ((4, 4), (4, 4))
    assert mgemm.matmul(x, x, block_size=(2, 4)).chunks == ((2, 2, 2, 2), (4, 4))


def test_keyword_options_win_over_dask_config_even_when_false():
    """keyword > dask.config: also for the default value and for false values."""
    from mgemm import config

    with dask.config.set({"mgemm.block_size": 5, "mgemm.allow_tf32": True, "mgemm.split": "off",
                          "mgemm.engine": "numpy", "mgemm.tune": True}):
        got = config.resolve(block_size=7, allow_tf32=False, split="auto", engine="auto",
                             tune=0)
        assert (got["block_size"], got["allow_tf32"], got["split"], got["engine"],
                got["tune"]) == (7, False, "auto", "auto", False)
        got = config.resolve()  # not given (None): dask.config's
        assert (got["block_size"], got["allow_tf32"], got["split"], got["engine"],
                got["tune"]) == (5, True, "off", "numpy", True)


def test_environment_options_under_dask_config(tmp_path):
    """``MGEMM_*`` variables set the defaults: ``DASK_MGEMM__*`` ones and ``dask.config`` win over
    them, and a keyword over everything (read at import: a fresh interpreter)."""
    code = ("import dask, mgemm.config as c\n"
            "print(c.resolve()['block_size'], c.resolve()['engine'], c.resolve()['split'],"
            " c.resolve(block_size=3)['block_size'])\n"
            "with dask.config.set({'mgemm.engine': 'auto'}):\n"
            "    print(c.resolve()['engine'])\n")
    out = _fresh_interpreter(code, tmp_path, MGEMM_BLOCK_SIZE="96", MGEMM_ENGINE="NumPy",
                             MGEMM_SPLIT="off", DASK_MGEMM__SPLIT="on")
    assert out.split() == ["96", "numpy", "on", "3", "auto"]


def _fresh_interpreter(code, cwd, **variables):
    """The standard output of ``code`` run in a new Python with mgemm importable, no MGEMM_* or
    DASK_MGEMM* variable but ``variables``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MGEMM_", "DASK_MGEMM"))}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[1]), **variables)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_bad_option_value_names_where_it_came_from(tmp_path):
    """The error for a bad option value says whether it came from the argument, dask.config (or
    its DASK_MGEMM__* variable) or an MGEMM_* variable (read at import: a fresh interpreter)."""
    code = ("import dask, mgemm.config as c\n"
            "def err(**kw):\n"
            "    try:\n"
            "        c.resolve(**kw)\n"
            "    except ValueError as e:\n"
            "        print(str(e).split(':')[0])\n"
            "err()\n"
            "err(split='sideways')\n"
            "with dask.config.set({'mgemm.split': 'up'}):\n"
            "    err()\n")
    assert _fresh_interpreter(code, tmp_path, MGEMM_SPLIT="bogus").splitlines() == [
        "mgemm option split (from the environment variable MGEMM_SPLIT)",
        "mgemm option split (from the argument split (--split))",
        "mgemm option split (from dask.config mgemm.split (or DASK_MGEMM__SPLIT))"]


def test_option_values_are_parsed():
    """The options' spellings: names in any case, booleans and splits from words and bools,
    block sizes as n, "RxC" or pairs of positive integers, "auto" or "" for the active client."""
    from mgemm import config

    got = config.resolve(engine=" NumPy ", split=True, block_size="32x16", client="auto",
                         allow_tf32="", tune="on")
    assert got == {"engine": "numpy", "block_size": (32, 16), "allow_tf32": False,
                   "emulate_fp32": "off", "split": "on", "tune": True, "client": None}
    assert config.resolve(split=False, client=" tcp://h:1 ")["split"] == "off"
    # the words of a boolean, as an environment variable gives them (DASK_MGEMM__SPLIT=True is
    # the boolean already)
    assert [config.resolve(split=w)["split"] for w in ("True", "yes", "0", " OFF ")] == \
        ["on", "on", "off", "off"]
    for bad in ("maybe", " ", 2):
        with pytest.raises(ValueError, match="split must be one of"):
            config.resolve(split=bad)
    assert config.resolve(client=" tcp://h:1 ")["client"] == "tcp://h:1"
    assert config.resolve(block_size="64")["block_size"] == 64
    for bad in [(1, 2, 3), 0, -4, "0", True, (True, 2), 2.5]:
        with pytest.raises(ValueError, match="block_size must be"):
            config.resolve(block_size=bad)
    for bad in ("maybe", 2):
        with pytest.raises(ValueError, match="not a boolean"):
            config.resolve(allow_tf32=bad)


def test_gemm_scalars_are_rounded_to_the_products_type():
    """alpha and beta scale in the product's type (BLAS's scalars), whatever type they come in:
    a numpy.float64 beta gives what a float32 or a Python float one gives."""
    rng = np.random.default_rng(24)
    a, b, c = random(rng, (40, 20), "f4"), random(rng, (20, 30), "f4"), random(rng, (40, 30), "f4")
    kinds = [np.float64(1 / 3), np.float32(1 / 3), 1 / 3]
    for name in ("alpha", "beta"):
        got = [mgemm.gemm(a, b, c, **{name: value}) for value in kinds]
        assert all(x.dtype == np.float32 for x in got)
        np.testing.assert_array_equal(got[0], got[1])
        np.testing.assert_array_equal(got[0], got[2])


@pytest.mark.parametrize("dtype, value", [("f4", 1e39), ("f4", np.float64(1e300)),
                                          ("c8", complex(1e300, 1)), ("f2", 1e39),
                                          pytest.param("f8", 10**400, id="f8-10**400"),
                                          pytest.param("c16", 10**400, id="c16-10**400"),
                                          ("f2", 10**39),
                                          pytest.param("f8", np.longdouble("1e400"), id="f8-ld1e400"),
                                          pytest.param("c16", np.clongdouble(np.longdouble("1e400")),
                                                       id="c16-cld1e400")])
def test_gemm_scalars_beyond_the_types_range_are_refused(dtype, value):
    """A finite scalar past the type's range, named as given (a long double past every Python
    float is not "inf")."""
    if isinstance(value, (np.longdouble, np.clongdouble)) and np.finfo(np.longdouble).max <= 1e308:
        pytest.skip("long double is double here")
    x = np.ones((2, 2), dtype)
    for name in ("alpha", "beta"):
        with pytest.raises(TypeError, match=f"{name} = [^i].* is beyond the range"):
            mgemm.gemm(x, x, x, **{name: value})
    for inf in (float("inf"), np.float64("inf"), np.float32("inf")):  # an infinite one is the user's
        assert np.isinf(mgemm.gemm(x, x, alpha=inf)).all()


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble])
def test_long_double_scalars_scale_a_long_double_product_unrounded(dtype):
    """A long double product's alpha and beta keep every bit (they went through a Python float:
    1/3 lost its last 11 bits, and 1e400, in range, was refused as beyond it)."""
    from mgemm import api

    if np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps:
        pytest.skip("long double is double here")
    a, b = np.eye(2, dtype=dtype), np.ones((2, 2), dtype)
    third = np.longdouble(1) / 3
    assert third != np.longdouble(float(third))
    scalar = dtype(third) if dtype is np.longdouble else dtype(third + 1j * third)
    assert mgemm.gemm(a, b, alpha=scalar)[0, 0] == scalar
    assert mgemm.gemm(a, b, b, beta=scalar)[0, 0] == 1 + scalar
    assert mgemm.gemm(a, b, alpha=np.longdouble("1e400"))[0, 0] == np.longdouble("1e400")
    # Python ints too: 2**63 + 1 is a long double, 10**400 is in range
    assert mgemm.gemm(a, b, alpha=2**63 + 1)[0, 0].real == np.longdouble(2**63 + 1)
    assert mgemm.gemm(a, b, alpha=10**400)[0, 0].real == np.longdouble(10**400)
    assert type(api._rounded(np.float64(third), np.dtype("f8"), "alpha", float)) is float
    # a float64 product's scalar is still rounded once, to float64, and given as a Python float
    got = mgemm.gemm(np.eye(2), np.ones((2, 2)), alpha=third)
    assert got.dtype == np.float64 and got[0, 0] == float(third)


@pytest.mark.parametrize("other", ["bool", "int8", "uint8", "int16", "float16", "int64"])
def test_bfloat16_products_take_numpys_promotion(other):
    """bfloat16 with another type: numpy.result_type's answer, which dask's matmul and numpy.dot
    give too (numpy.matmul's own loops give float32 for bool and 8-bit integers)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.ones((3, 4), ml_dtypes.bfloat16)
    b = np.ones((4, 2), other)
    want = np.result_type(a.dtype, b.dtype)
    assert np.dot(a, b).dtype == want
    assert (da.from_array(a) @ da.from_array(b)).dtype == want
    for x, y in ((a, b), (b.T, a.T)):
        got = mgemm.matmul(x, y)
        assert got.dtype == want
        np.testing.assert_array_equal(got.astype(np.float64), np.full(got.shape, 4.0))


@pytest.mark.parametrize("direct", [False, True])
def test_a_ctrl_c_while_chunks_are_on_their_way_leaves_none_behind(client, monkeypatch, direct,
                                                                 sigint_as_from_a_terminal):
    """Arrays in, a Ctrl-C (a real SIGINT) while the scheduler (or, ``direct_to_workers``, a
    worker) takes B's chunks: the interrupt reaches the caller, and the chunks it was sending
    leave the cluster too.  ``Client.scatter`` cut in two by the interrupt had sent them but never
    made their futures, so the scheduler kept them for the client until it closed (seen with
    ``direct_to_workers``: the chunks reach the workers first, then the scheduler hears of them)."""
    import asyncio
    import os
    import signal

    scheduler = client.cluster.scheduler
    op = "update_data" if direct else "scatter"
    handler, calls = scheduler.handlers[op], []

    async def slow(*args, **kw):
        calls.append(True)
        if len(calls) == 2:  # B's chunks: the signal lands while the caller waits for them
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(0.3)
        result = handler(*args, **kw)
        return await result if asyncio.iscoroutine(result) else result
    monkeypatch.setitem(scheduler.handlers, op, slow)
    monkeypatch.setattr(client, "direct_to_workers", direct)
    a = np.ones((600, 600))
    with pytest.raises(KeyboardInterrupt) as stopped:
        mgemm.matmul(a, a + 1, block_size=150, client=client)
    assert len(calls) == 2
    _mgemm_tasks_gone(client, stopped.value)
    monkeypatch.undo()
    np.testing.assert_array_equal(mgemm.matmul(a, a + 1, block_size=150, client=client), a @ (a + 1))
