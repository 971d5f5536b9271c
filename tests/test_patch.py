"""mgemm.patch_dask: which dask calls go through mgemm, which stay with dask, and clean undo;
plus dask's own matmul and dot tests run with the patch on."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
import threading
from pathlib import Path

import dask
import dask.array as da
import dask.array.core as da_core
import dask.array.routines as da_routines
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mgemm
import mgemm.api
import mgemm.patch
from conftest import assert_close, random

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="sync"):
        yield


@pytest.fixture
def spy(monkeypatch):
    """Records the options of every call that reaches ``mgemm.api.matmul``."""
    calls = []
    real = mgemm.api.matmul

    def counting(a, b, **options):
        calls.append(options)
        return real(a, b, **options)

    monkeypatch.setattr(mgemm.api, "matmul", counting)
    return calls


@pytest.fixture(autouse=True)
def _no_leftover_patch():
    """A failing test must not leave dask patched for the next one."""
    yield
    for p in list(mgemm.patch._active):
        p.undo()


def _dask_attributes():
    return (da.matmul, da.dot, da_routines.matmul, da_routines.dot, da_core.Array.__dict__["dot"],
            da_core.Array.__dict__["__matmul__"], da_core.Array.__dict__["__rmatmul__"],
            da_core.Array.__dict__["__array_ufunc__"], da_core.Array.__dict__["__array_function__"])


def _operands(rng, dtype="f8"):
    x, y = random(rng, (9, 7), dtype), random(rng, (7, 11), dtype)
    return x, y, da.from_array(x, chunks=(4, 3)), da.from_array(y, chunks=((2, 5), (6, 5)))


ROUTED = {
    "a @ b": lambda a, b, x, y: a @ b,
    "x @ b": lambda a, b, x, y: x @ b,             # ndarray.__matmul__ → Array.__array_ufunc__
    "a @ y": lambda a, b, x, y: a @ y,
    "b.__rmatmul__(a)": lambda a, b, x, y: b.__rmatmul__(a),
    "da.matmul": lambda a, b, x, y: da.matmul(a, b),
    "routines.matmul": lambda a, b, x, y: da_routines.matmul(a, y),
    "np.matmul": lambda a, b, x, y: np.matmul(a, b),
    "da.dot": lambda a, b, x, y: da.dot(a, b),
    "np.dot": lambda a, b, x, y: np.dot(a, b),     # Array.__array_function__ → dask.array.dot
    "a.dot(b)": lambda a, b, x, y: a.dot(b),
    "a.dot(y)": lambda a, b, x, y: a.dot(y),
    "da.matmul(x, y)": lambda a, b, x, y: da.matmul(x, y),
}


@pytest.mark.parametrize("call", list(ROUTED))
def test_patched_calls_go_through_mgemm(rng, spy, call):
    x, y, a, b = _operands(rng)
    with mgemm.patch_dask():
        got = ROUTED[call](a, b, x, y)
    assert len(spy) == 1, f"{call} did not go through mgemm.matmul"
    assert isinstance(got, da.Array)  # lazy, as dask's own would be, even for two ndarrays
    assert mgemm.patch.through_mgemm(got)
    assert got.dtype == np.float64 and got.shape == (9, 11)
    assert_close(got.compute(), x @ y, np.float64)


@pytest.mark.parametrize("dtype", ["f4", "f8", "c16", "i8", "bfloat16"])
def test_patched_results_equal_numpy(rng, spy, dtype):
    x, y, a, b = _operands(rng, dtype)
    with mgemm.patch_dask():
        got = a @ b
    assert spy and got.dtype == np.result_type(x, y)
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(got.compute(), x @ y)  # integers: exact, as NumPy
    else:  # against float64 (NumPy's bfloat16 product is itself rounded per term)
        wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
        assert_close(got.compute(), x.astype(wide) @ y.astype(wide), dtype)


@pytest.mark.parametrize("shape_a, shape_b", [
    ((7,), (7, 5)), ((5, 7), (7,)), ((7,), (7,)), ((2, 5, 7), (7, 3)), ((4, 1, 5, 7), (3, 7, 2)),
])
def test_patched_matmul_semantics(rng, spy, shape_a, shape_b):
    x, y = random(rng, shape_a, "f8"), random(rng, shape_b, "f8")
    with mgemm.patch_dask():
        got = da.from_array(x, chunks=3) @ da.from_array(y, chunks=4)
    assert spy
    ref = x @ y
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert_close(np.asarray(got.compute()), ref, np.float64)


def test_options_reach_mgemm_and_nested_patches_use_the_innermost(rng, spy):
    x, y, a, b = _operands(rng)
    with mgemm.patch_dask(block_size=4):
        a @ b
        with mgemm.patch_dask(block_size=5, split="off"):
            a @ b
        a @ b
    assert spy == [{"block_size": 4}, {"block_size": 5, "split": "off"}, {"block_size": 4}]


def _obj(n):
    return da.from_array(np.ones((n, n), dtype=object), chunks=2)


FALLBACKS = {
    "object dtype": lambda: (_obj(3), _obj(3)),
    "bool dtype": lambda: (da.eye(3, chunks=2, dtype=bool), da.eye(3, chunks=2, dtype=bool)),
    "masked chunks": lambda: (da.ma.masked_greater(da.ones((4, 4), chunks=2), 2),
                              da.ones((4, 4), chunks=2)),
    "unknown chunks": lambda: (da.ones((4, 4), chunks=2)[da.ones(4, chunks=2) > 0],
                               da.ones((4, 4), chunks=2)),
    "empty dimension": lambda: (da.ones((0, 4), chunks=2), da.ones((4, 3), chunks=2)),
    "big batch": lambda: (da.ones((mgemm.patch.MAX_BATCH + 1, 2, 3), chunks=8),
                          da.ones((3, 2), chunks=2)),
    # dask widens these (its K sum: int64), NumPy's matmul and mgemm do not
    "narrow integers": lambda: (da.ones((4, 4), chunks=2, dtype="i4"),
                                da.ones((4, 4), chunks=2, dtype="i4")),
    "int8 with uint16": lambda: (da.ones((4, 4), chunks=2, dtype="i1"),
                                 da.ones((4, 4), chunks=2, dtype="u2")),
}


@pytest.mark.parametrize("case", list(FALLBACKS))
def test_what_mgemm_cannot_do_exactly_falls_back_to_dask(spy, case):
    a, b = FALLBACKS[case]()
    ref = da_core.Array.__dict__["__matmul__"](a, b)
    with mgemm.patch_dask():
        got = a @ b
    assert not spy, f"{case} went through mgemm"
    assert got.name == ref.name  # dask built the very same graph
    np.testing.assert_array_equal(got.compute(), ref.compute())


@pytest.mark.parametrize("call", ["a @ b", "da.dot", "a.dot(b)"])
def test_a_plan_the_workers_cannot_hold_falls_back_to_dask_with_a_warning(rng, monkeypatch, call):
    """Where mgemm's plan does not fit the workers' memory, ``mgemm.matmul`` raises, but a patched
    product goes to dask (which may spill) with a warning naming the reason: code that ran
    before the patch does not start to fail under it."""
    from mgemm import api
    from mgemm.plan import MemoryPlanError, Worker

    monkeypatch.setattr(api, "local_workers",
                        lambda *a, **k: [Worker("local", "cpu", 1e9, 64, 1e12)])
    x, y, a, b = _operands(rng)
    with pytest.raises(MemoryPlanError, match="may use 64 B"):
        mgemm.matmul(a, b)
    with mgemm.patch_dask(), pytest.warns(UserWarning, match="may use 64 B.*dask.array computes"):
        got = ROUTED[call](a, b, x, y)
    assert not got.name.startswith("mgemm")
    assert_close(got.compute(), x @ y, np.float64)


@pytest.mark.parametrize("call", [
    lambda a, b: da.dot(a, b), lambda a, b: np.dot(a, b), lambda a, b: a.dot(b),
    lambda a, b: da.dot(a.compute(), b), lambda a, b: da.dot(b.T, a.compute().T)],
    ids=["da.dot", "np.dot", "a.dot", "da.dot(numpy, numpy)", "da.dot(numpy.T, numpy.T)"])
def test_dot_with_an_array_in_memory_has_dots_chunks(rng, call):
    """``dot`` chunks an operand that is not a Dask array as ``from_array`` does ("auto"), not as
    one chunk as ``matmul`` does: the patched product has the same chunks (they were one)."""
    x, y = random(rng, (30, 700), "f8"), random(rng, (700, 600), "f8")
    a = da.from_array(x, chunks=(30, 250))
    with dask.config.set({"array.chunk-size": "512KiB"}):
        want = call(a, y)
        assert len(want.chunks[1]) > 1 or len(want.chunks[0]) > 1  # "auto" cut the NumPy operand
        with mgemm.patch_dask():
            got = call(a, y)
    assert mgemm.patch.through_mgemm(got) and got.chunks == want.chunks
    assert_close(got.compute(), want.compute(), np.float64)


def test_a_product_on_a_cluster_with_no_workers_yet_falls_back_to_dask(rng):
    """A cluster of no workers (an adaptive one still starting them): ``mgemm.matmul`` cannot
    plan and says so; a patched ``a @ b`` stays dask's lazy product, with a warning (it raised
    ``RuntimeError``), and computes once a worker has come."""
    from distributed import Client, LocalCluster

    from mgemm.cluster import NoWorkersError

    x, y, a, b = _operands(rng)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        with pytest.raises(NoWorkersError, match="no workers"):
            mgemm.matmul(a, b)
        with mgemm.patch_dask(), pytest.warns(UserWarning, match="no workers.*dask.array computes"):
            got = a @ b
        assert not got.name.startswith("mgemm")
        cluster.scale(1)
        client.wait_for_workers(1, timeout=30)
        assert_close(client.compute(got).result(timeout=30), x @ y, np.float64)


def test_a_product_of_more_blocks_than_mgemm_plans_falls_back_to_dask(rng, monkeypatch):
    """Too many blocks for mgemm's planner (``PlanSizeError``): ``mgemm.matmul`` refuses, a
    patched product goes to dask with a warning."""
    from mgemm import plan
    from mgemm.plan import PlanSizeError

    monkeypatch.setattr(plan, "MAX_BLOCKS", 3)
    x, y, a, b = _operands(rng)  # blocks of one chunk each at block_size 2: 3 x 2 of them
    with pytest.raises(PlanSizeError, match="3 x 2 = 6 output blocks: mgemm plans at most 3"):
        mgemm.matmul(a, b, block_size=2)
    with mgemm.patch_dask(), dask.config.set({"mgemm.block_size": 2}), \
            pytest.warns(UserWarning, match="plans at most 3.*dask.array computes"):
        got = a @ b
    assert not got.name.startswith("mgemm")
    assert_close(got.compute(), x @ y, np.float64)


def test_the_block_limit_counts_the_blocks_a_dask_product_is_planned_in(rng, monkeypatch):
    """A Dask operand's chunks are grouped into blocks: the limit counts the blocks, not A's row
    chunks times B's column chunks (6 x 6 chunks of 2 make one block at block_size 12, fine;
    at block_size 2 they make 36 blocks, refused)."""
    from mgemm import plan
    from mgemm.plan import PlanSizeError

    monkeypatch.setattr(plan, "MAX_BLOCKS", 3)
    x, y = random(rng, (12, 4), "f8"), random(rng, (4, 12), "f8")
    a, b = da.from_array(x, chunks=(2, 4)), da.from_array(y, chunks=(4, 2))
    got = mgemm.matmul(a, b, block_size=12)
    assert got.numblocks == (1, 1)
    assert_close(got.compute(), x @ y, np.float64)
    with pytest.raises(PlanSizeError, match="36 output blocks"):
        mgemm.matmul(a, b, block_size=2)


@pytest.mark.parametrize("shapes", [((3, 4, 5), (5, 2)), ((5,), (5,)), ((4, 5), (5,))])
def test_dot_other_than_2d_stays_with_dask(rng, spy, shapes):
    x, y = random(rng, shapes[0], "f8"), random(rng, shapes[1], "f8")
    a, b = da.from_array(x, chunks=2), da.from_array(y, chunks=2)
    with mgemm.patch_dask():
        got_fn, got_method = da.dot(a, b), a.dot(b)
    assert not spy
    assert_close(np.asarray(got_fn.compute()), np.dot(x, y), np.float64)
    assert_close(np.asarray(got_method.compute()), x.dot(y), np.float64)


@pytest.mark.parametrize("make", [
    lambda: da.matmul(da.ones(3), da.ones((4, 5))),      # inner dimensions differ
    lambda: da.ones((3, 4)) @ da.from_array(np.float64(2.0)),  # 0-d
    lambda: da.matmul(da.ones((2, 3, 4)), da.ones((5, 4, 2))),  # batch does not broadcast
])
def test_errors_are_dasks_own(spy, make):
    with pytest.raises(Exception) as expected:
        make()
    with mgemm.patch_dask(), pytest.raises(type(expected.value)) as got:
        make()
    assert str(got.value) == str(expected.value)
    assert not spy


def test_extra_arguments_go_to_dask(spy):
    a = da.ones((3, 3), chunks=2)
    with mgemm.patch_dask(), pytest.raises(TypeError):
        da.matmul(a, a, out=None)  # dask's matmul takes no out=; neither does the patched one
    assert not spy


def test_undo_restores_dasks_objects_exactly(rng, spy):
    before = _dask_attributes()
    p = mgemm.patch_dask()
    assert da.matmul is not before[0]
    assert da.matmul is da_routines.matmul and da.dot is da_routines.dot
    assert da.matmul.__wrapped__ is before[0] and da.matmul.__doc__ == before[0].__doc__
    assert p.active and "active" in repr(p)
    p.undo()
    p.undo()  # a second undo is a no-op
    assert all(x is y for x, y in zip(_dask_attributes(), before))
    assert not mgemm.patch._active and not mgemm.patch._originals
    x, y, a, b = _operands(rng)
    assert not mgemm.patch.through_mgemm(a @ b) and not spy


def test_a_wrapper_kept_past_undo_still_works(spy):
    """``f = da.matmul`` taken while patched keeps working (and falling back) once undone."""
    with mgemm.patch_dask():
        kept = da.matmul
    obj = _obj(3)
    np.testing.assert_array_equal(kept(obj, obj).compute(), np.full((3, 3), 3))
    assert not spy
    assert mgemm.patch.through_mgemm(kept(da.ones((3, 3)), da.ones((3, 3))))


def test_context_manager_undoes_on_error():
    before = _dask_attributes()
    with pytest.raises(RuntimeError), mgemm.patch_dask():
        raise RuntimeError("boom")
    assert all(x is y for x, y in zip(_dask_attributes(), before))


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1)])
def test_nested_undo_in_any_order(rng, spy, order):
    before = _dask_attributes()
    patches = [mgemm.patch_dask(block_size=n) for n in (3, 4, 5)]
    x, y, a, b = _operands(rng)
    remaining = list(patches)
    for i in order:
        patches[i].undo()
        remaining.remove(patches[i])
        spy.clear()
        a @ b
        if remaining:  # the innermost patch still applied routes the call
            assert spy == [remaining[-1].options]
            assert da.matmul is remaining[-1].wrappers["matmul"]
        else:
            assert not spy
    assert all(x is y for x, y in zip(_dask_attributes(), before))


def test_plain_call_then_reapply_with_with(rng, spy):
    x, y, a, b = _operands(rng)
    p = mgemm.patch_dask()
    p.undo()
    with p:
        a @ b
    assert len(spy) == 1 and not p.active


def test_bad_options_raise_before_patching():
    before = _dask_attributes()
    with pytest.raises(TypeError, match="unknown mgemm option"):
        mgemm.patch_dask(engin="numpy")
    with pytest.raises(ValueError, match="engine"):
        mgemm.patch_dask(engine="fortran")
    assert all(x is y for x, y in zip(_dask_attributes(), before))


def test_patch_is_process_wide_across_threads(rng, spy):
    """Documented behaviour: the patch is module state, so other threads see it too."""
    x, y, a, b = _operands(rng)
    names = []
    with mgemm.patch_dask():
        t = threading.Thread(target=lambda: names.append(mgemm.patch.through_mgemm(a @ b)))
        t.start()
        t.join()
    assert names == [True]


def test_concurrent_patching_leaves_dask_clean():
    before = _dask_attributes()

    def churn():
        for _ in range(50):
            with mgemm.patch_dask():
                p = mgemm.patch_dask(block_size=2)
                p.undo()

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(x is y for x, y in zip(_dask_attributes(), before))


def test_module_doctest():
    result = doctest.testmod(mgemm.patch)
    assert result.attempted and not result.failed


def _pytest_with_plugin(tmp_path, *targets: str) -> tuple[int, str]:  # targets may hold options
    """A fresh pytest over ``targets`` with ``_dask_patch_plugin``; (exit code, output)."""
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n")  # not mgemm's settings: dask's tests use their own markers
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", *targets, "-p", "_dask_patch_plugin",
           "-p", "no:cacheprovider", "-c", str(ini), "--rootdir", str(tmp_path), "-q"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    return proc.returncode, proc.stdout + proc.stderr


def _routed(out: str) -> int:
    from _dask_patch_plugin import MARK

    lines = [line for line in out.splitlines() if line.startswith(MARK)]
    assert lines, out[-3000:]
    return int(lines[-1].split()[-1])


def test_dasks_own_matmul_and_dot_tests_pass_with_the_patch(tmp_path):
    """dask's ``test_matmul`` and ``test_dot_method`` in a fresh pytest, patched by a plugin
    that fails the session unless products actually went through mgemm."""
    import dask.array.tests

    tests = Path(dask.array.tests.__file__).parent / "test_routines.py"
    code, out = _pytest_with_plugin(tmp_path, f"{tests}::test_matmul",
                                    f"{tests}::test_dot_method")
    assert code == 0, out[-6000:]
    assert _routed(out) > 0, out[-3000:]
    assert " passed" in out and " failed" not in out and "skipped" not in out, out[-3000:]


def test_the_patch_plugin_counts_products_in_xdist_workers(tmp_path):
    """Under pytest-xdist the patched tests run in worker processes: the controller adds up
    their counts, passes a session whose products went through mgemm and fails one where none
    did."""
    pytest.importorskip("xdist")
    import dask.array.tests

    tests = Path(dask.array.tests.__file__).parent / "test_routines.py"
    code, out = _pytest_with_plugin(tmp_path, f"{tests}::test_matmul", "-n", "2")
    assert code == 0 and _routed(out) > 0, out[-3000:]
    code, out = _pytest_with_plugin(tmp_path, f"{tests}::test_transpose", "-n", "2")
    assert code == 1 and _routed(out) == 0 and "no product went through mgemm" in out, out[-3000:]


def test_dasks_own_linalg_tests_pass_with_the_patch(tmp_path):
    """dask.array.linalg multiplies through ``da.dot`` and ``@`` (QR, SVD, LU, solve, lstsq) and
    relies on the products' chunks: ``solve`` hands ``P.T.dot(b)`` to ``solve_triangular``, which
    needs its row chunks to be the factors' columns.  dask's own tests of it pass patched."""
    pytest.importorskip("scipy")  # dask's linalg tests need it
    import dask.array.tests

    tests = Path(dask.array.tests.__file__).parent / "test_linalg.py"
    code, out = _pytest_with_plugin(tmp_path, str(tests))
    assert code == 0, out[-6000:]
    assert _routed(out) > 100, out[-3000:]
    assert " passed" in out and " failed" not in out, out[-3000:]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_patched_products_have_dasks_chunks_and_dtype(data):
    """``dask_chunks`` is what dask's own matmul gives, on drawn batch, 1-D and 2-D operands
    with ragged chunks and drawn dtypes, and the patched product has those chunks and dask's
    dtype."""
    def chunks(n: int) -> tuple:
        cuts = data.draw(st.sets(st.integers(1, n - 1), max_size=3)) if n > 1 else set()
        edges = [0, *sorted(cuts), n]
        return tuple(b - a for a, b in zip(edges, edges[1:]))

    batch = data.draw(st.lists(st.integers(1, 3), max_size=2))
    lead_a = data.draw(st.integers(0, len(batch)))
    shape_a = [1 if data.draw(st.booleans()) else x for x in batch[lead_a:]]
    shape_b = [1 if data.draw(st.booleans()) else x for x in batch]
    m, k, n = (data.draw(st.integers(1, 9)) for _ in range(3))
    shape_a = [k] if data.draw(st.integers(0, 5)) == 0 else shape_a + [m, k]
    shape_b = [k] if data.draw(st.integers(0, 5)) == 0 else shape_b + [k, n]
    dtypes = st.sampled_from(["f8", "c8", "i8", "i4", "i1", "u2", "bfloat16"])
    dtype_a, dtype_b = data.draw(dtypes), data.draw(dtypes)
    a = da.ones(shape_a, chunks=tuple(chunks(x) for x in shape_a), dtype=dtype_a)
    b = da.ones(shape_b, chunks=tuple(chunks(x) for x in shape_b), dtype=dtype_b)
    want = da_routines.matmul(a, b)
    assert mgemm.patch.dask_chunks(a, b) == want.chunks
    if not data.draw(st.booleans()):  # a NumPy operand: one chunk, as dask.array.asanyarray makes
        a = np.ones(shape_a, dtype=dtype_a)
        want = da_routines.matmul(da.asanyarray(a), b)
        assert mgemm.patch.dask_chunks(a, b) == want.chunks
    with mgemm.patch_dask(block_size=64):
        got = da.matmul(a, b)
    assert (got.chunks, got.dtype) == (want.chunks, want.dtype)


def test_the_plugin_fails_a_session_that_never_reaches_mgemm(tmp_path):
    """The guard above is real: tests that pass but multiply nothing fail the session."""
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    assert True\n")
    code, out = _pytest_with_plugin(tmp_path, str(tmp_path / "test_nothing.py"))
    assert "1 passed" in out, out[-3000:]
    assert code != 0 and _routed(out) == 0, out[-3000:]


def test_a_patched_product_in_dasks_chunks_keeps_its_placement(client, rng):
    """Where the patch cuts mgemm's blocks into dask's chunks, computing the result still gives
    the scheduler the plan's placement of every block task (dask's own low-level fusion drops
    the blocks' annotations; the placement plugin gives it back)."""
    from distributed import wait

    x, y = random(rng, (64, 48), "f8"), random(rng, (48, 64), "f8")
    a, b = client.persist([da.from_array(x, chunks=16), da.from_array(y, chunks=16)])
    with mgemm.patch_dask(block_size=32, client=client):
        got = a @ b
    assert got.chunks == ((16,) * 4, (16,) * 4)
    layer = next(layer for name, layer in got.dask.layers.items()
                 if name.startswith("mgemm-block-"))
    planned = {key: ws[0] for key, ws in layer.annotations["workers"].values.items()}
    held = client.persist(got)
    wait(held)

    def restrictions(dask_scheduler):
        return {key: (ts.worker_restrictions, ts.loose_restrictions)
                for key, ts in dask_scheduler.tasks.items() if key in planned}

    placed = client.run_on_scheduler(restrictions)
    assert planned and set(placed) == set(planned)
    assert all(placed[key] == ({worker}, True) for key, worker in planned.items())
    assert_close(client.compute(held).result(), x @ y, np.float64)


# -- behaviour pinned by mutation testing ------------------------------------------------------------

def test_numpy_with_cupy_chunks_stays_with_dask(spy, monkeypatch):
    """mgemm refuses NumPy chunks with CuPy ones; the patch leaves such a product to dask, which
    builds it (a NumPy subclass whose module is "cupy", registered as ``cupy.ndarray``, stands
    in for CuPy: only the chunk types are read)."""
    import types

    class FakeCupy(np.ndarray):
        pass
    FakeCupy.__module__ = "cupy._core.core"
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=FakeCupy))
    host = da.ones((4, 4), chunks=2)
    gpu = da.from_array(np.ones((4, 4)).view(FakeCupy), chunks=2, asarray=False)
    assert mgemm.patch._routable(gpu, gpu, dot=False)  # CuPy chunks on both sides: mgemm's
    for a, b in ((host, gpu), (gpu, host)):
        want = da_core.Array.__dict__["__matmul__"](a, b)
        with mgemm.patch_dask():
            got = a @ b
        assert got.name == want.name
    assert not spy


def test_a_batch_of_max_batch_matrices_is_routed(spy, monkeypatch):
    rng = np.random.default_rng(31)
    monkeypatch.setattr(mgemm.patch, "MAX_BATCH", 2)
    x, y = random(rng, (2, 3, 4), "f8"), random(rng, (4, 5), "f8")
    a, b = da.from_array(x, chunks=2), da.from_array(y, chunks=2)
    with mgemm.patch_dask():
        got = a @ b
        assert len(spy) == 1 and mgemm.patch.through_mgemm(got)
        assert not mgemm.patch.through_mgemm(da.concatenate([a, a]) @ b)  # 4 > MAX_BATCH
    assert_close(got.compute(), x @ y, np.float64)


def test_nested_patches_fall_back_to_dasks_own_functions():
    """An inner patch wraps dask's own functions, not the outer patch's wrappers: its fallbacks
    go straight to dask."""
    before = _dask_attributes()
    with mgemm.patch_dask(block_size=4):
        with mgemm.patch_dask(block_size=5):
            assert da.matmul.__wrapped__ is before[0]
            assert da.dot.__wrapped__ is before[1]
            assert da_core.Array.__dict__["dot"].__wrapped__ is before[4]


@pytest.mark.parametrize("dt_a, dt_b", [("i4", "i8"), ("i8", "i4"), ("f4", "f8"), ("i8", "f4")])
def test_mixed_dtypes_of_a_platform_width_result_are_routed(spy, dt_a, dt_b):
    """Narrow integers stay with dask only where the *result* type is narrower than the
    platform's integer: int32 with int64 is an int64 product, which mgemm computes as dask."""
    rng = np.random.default_rng(32)
    x, y = random(rng, (5, 4), dt_a), random(rng, (4, 3), dt_b)
    with mgemm.patch_dask():
        got = da.from_array(x, chunks=2) @ da.from_array(y, chunks=2)
    assert len(spy) == 1 and got.dtype == np.result_type(x, y)
    np.testing.assert_allclose(got.compute(), x.astype(np.float64) @ y.astype(np.float64),
                               rtol=1e-6)


def test_dot_of_two_ndarrays_is_lazy(spy):
    """``da.dot`` of two in-memory arrays is lazy in dask, so it is under the patch too."""
    rng = np.random.default_rng(33)
    x, y = random(rng, (6, 4), "f8"), random(rng, (4, 3), "f8")
    with mgemm.patch_dask():
        got = da.dot(x, y)
    assert len(spy) == 1 and isinstance(got, da.Array) and mgemm.patch.through_mgemm(got)
    assert_close(got.compute(), x @ y, np.float64)


def test_dot_with_extra_arguments_goes_to_dask(spy):
    """``np.dot(a, b, out)`` reaches ``dask.array.dot`` with the extra argument, which dask refuses;
    so does the patched one, rather than multiplying and dropping it."""
    a = da.ones((3, 3), chunks=2)
    with mgemm.patch_dask():
        for call in (lambda: da.dot(a, a, None), lambda: np.dot(a, a, out=None)):
            with pytest.raises(TypeError):
                call()
    assert not spy


def test_masked_chunks_on_both_sides_stay_with_dask(spy):
    """Masked arrays are a NumPy subclass that mgemm refuses: a product of two Dask arrays of
    masked chunks is dask's own (not only one beside plain chunks)."""
    rng = np.random.default_rng(34)
    x = random(rng, (4, 4), "f8")
    a = da.ma.masked_greater(da.from_array(x, chunks=2), 0.5)
    want = da_core.Array.__dict__["__matmul__"](a, a)
    with mgemm.patch_dask():
        got = a @ a
    assert got.name == want.name and not spy
    np.testing.assert_array_equal(np.ma.getmaskarray(got.compute()),
                                  np.ma.getmaskarray(want.compute()))
