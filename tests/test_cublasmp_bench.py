"""benchmarks/cublasmp_bench.py on the CPU: the block-cyclic layout it gives cuBLASMp, its
arguments, how it turns each GPU's timings and checks into a row, and how a process that cannot
start is reported (the GPU run itself is the benchmark's, on the GPU host)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = str(Path(__file__).resolve().parent.parent / "benchmarks")


@pytest.fixture(scope="module")
def mpb():
    # importable by name, as the processes it spawns import it
    sys.path.insert(0, BENCHMARKS)
    try:
        yield importlib.import_module("cublasmp_bench")
    finally:
        sys.path.remove(BENCHMARKS)


@pytest.mark.parametrize("n, nb, procs", [(1000, 300, 2), (32768, 8192, 2), (32768, 8192, 4), (7, 3, 4),
                                          (65536, 1024, 4), (100, 100, 3), (5, 8, 2)])
def test_the_layout_deals_every_index_to_one_process(mpb, n, nb, procs):
    seen = []
    for p in range(procs):
        count = mpb.numroc(n, nb, p, 0, procs)
        idx = mpb.local_to_global(count, nb, p, procs)
        assert all((g // nb) % procs == p for g in idx)  # whole blocks, dealt round the processes
        assert idx == sorted(idx)
        seen += idx
    assert sorted(seen) == list(range(n))


def test_grid_shapes(mpb):
    assert [mpb.grid_shape(p) for p in (1, 2, 3, 4, 6, 8)] == [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (2, 4)]
    assert [mpb.grid_position(r, 2) for r in range(4)] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_plan_prints_each_gpus_share(mpb, capsys):
    assert mpb.main(["--plan", "--gpus", "2", "--n", "1000", "--dtypes", "float32", "--block", "300"]) == 0
    out = capsys.readouterr().out
    assert "grid 1 x 2" in out
    # columns in blocks of 300 over 2: process 0 holds blocks 0 and 2 (600), process 1 blocks 1 and 3 (400)
    assert "rank 0 (0, 0): A 1000x600  B 1000x600  C 1000x600" in out
    assert "rank 1 (0, 1): A 1000x400  B 1000x400  C 1000x400" in out


def test_suite_cases_keep_mgemm_bench_names_and_chunks(mpb):
    args = mpb.argparse.Namespace(suite="foundation", case=["float32-32768"], n=None, dtypes=None, block=None)
    assert mpb.cases_from(args, 2) == [mpb.Case("float32-32768", 32768, 32768, 32768, "float32", 8192)]
    args.block = [2048, 4096]
    assert [c.block for c in mpb.cases_from(args, 2)] == [2048, 4096]


@pytest.mark.parametrize("argv, says", [(["--plan", "--gpus", "2", "--grid", "2x2"], "does not hold 2"),
                                        (["--plan", "--gpus", "4", "--grid", "two"], "not ROWSxCOLS"),
                                        (["--plan", "--gpus", "0"], "at least 1"),
                                        (["--plan"], "--plan needs --gpus")])
def test_bad_arguments_stop_before_any_work(mpb, argv, says, capsys):
    with pytest.raises(SystemExit):
        mpb.main(argv)
    assert says in capsys.readouterr().err


def test_unknown_dtype_is_refused(mpb):
    with pytest.raises(SystemExit, match="no dtype 'complex64'"):
        mpb.main(["--plan", "--gpus", "1", "--dtypes", "complex64"])


def _result(times, err=1e-7, nan=False):
    return {"times": times, "rel_err": err, "checked": 64, "tolerance": 1e-5, "nan": nan}


def test_a_run_takes_the_slowest_gpu_and_the_row_the_median(mpb):
    case = mpb.Case("float32-4096", 4096, 4096, 4096, "float32", 1024)
    row = mpb._row(case, {0: _result([1.0, 3.0, 2.0]), 1: _result([1.5, 2.5, 2.2])}, 2, (1, 2), 700, None)
    assert row["seconds"] == [1.5, 3.0, 2.2] and row["median_s"] == 2.2
    assert row["tflops"] == pytest.approx(2 * 4096 ** 3 / 2.2 / 1e12)
    assert "error" not in row and row["method"] == "cublasmp" and row["grid"] == "1x2"


@pytest.mark.parametrize("per_rank, says", [({0: _result([1.0], err=1e-3), 1: _result([1.0])}, "relative error"),
                                            ({0: _result([1.0]), 1: _result([1.0], nan=True)}, "NaN: True"),
                                            ({0: _result([1.0]), 1: dict(_result([1.0]), unwritten=True)},
                                             "left unwritten: True"),
                                            ({0: _result([1.0])}, "rank 1: boom")])
def test_a_failed_check_or_a_missing_gpu_marks_the_row(mpb, per_rank, says):
    case = mpb.Case("float32-64", 64, 64, 64, "float32", 32)
    row = mpb._row(case, per_rank, 2, (1, 2), 700, "rank 1: boom" if len(per_rank) < 2 else None)
    assert says in row["error"]


def test_processes_that_cannot_start_are_reported_not_waited_for(mpb, monkeypatch):
    for name in mpb.NO_MULTICAST:
        monkeypatch.setenv(name, "unset by the test")  # restored afterwards
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is here: the processes would start")
    case = mpb.Case("float32-64", 64, 64, 64, "float32", 32)
    rows, version = mpb.run([case], 2, (1, 2), repeat=1, samples=2, timeout=60)
    assert version is None
    assert "ModuleNotFoundError" in rows[0]["error"] and "cupy" in rows[0]["error"]
    # the processes started from an environment with multicast off
    assert all(os.environ[k] == v for k, v in mpb.NO_MULTICAST.items())


# --- one GPU's part of a run, on NumPy: a stand-in for CuPy and for cuBLASMp on a 1 x 1 grid ------

class _FakeArray(__import__("numpy").ndarray):
    @property
    def data(self):  # CuPy's device pointer
        import types
        return types.SimpleNamespace(ptr=self.ctypes.data)


def _fake_cupy():
    import time
    import types

    import numpy as np

    def wrap(x):
        return np.asarray(x).view(_FakeArray)

    def kernel(in_params, out_params, body, name):
        assert "seed" in in_params and name and "0x9E3779B97F4A7C15" in body

        def run(gi, gj, seed, out):
            u = np.uint64
            with np.errstate(over="ignore"):
                x = (gi.astype(u) * u(0x9E3779B97F4A7C15) + gj.astype(u) * u(0xD1B54A32D192ED03) + u(seed))
                x ^= x >> u(31)
                x *= u(0xBF58476D1CE4E5B9)
                x ^= x >> u(29)
                x *= u(0x94D049BB133111EB)
                x ^= x >> u(32)
            out[...] = (x >> u(11)).astype(np.float64) * (2.0 / 2 ** 53) - 1.0
            return out
        return run

    class Event:
        def record(self, stream=None):
            self.t = time.perf_counter()

        def synchronize(self):
            pass

    class Stream:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    cuda = types.SimpleNamespace(Event=Event, Stream=Stream,
                                 get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)
    return types.SimpleNamespace(
        ElementwiseKernel=kernel, cuda=cuda, linalg=np.linalg, isnan=np.isnan, abs=np.abs, uint64=np.uint64,
        float64=np.float64, float32=np.float32, int64=np.int64, uint8=np.uint8, uint16=np.uint16,
        asarray=wrap, arange=lambda *a, **k: wrap(np.arange(*a, **k)),
        zeros=lambda *a, **k: wrap(np.zeros(*a, **k)),
        empty=lambda shape, dtype=np.float64, order="C": wrap(np.empty(shape, dtype, order=order)))


class _FakeCublasMp:
    """cublasMpGemm on a 1 x 1 grid: the local arrays are the whole matrices."""

    TYPES = {0: "float32", 1: "float64", 2: "float16", 14: "bfloat16"}

    def __init__(self, skip_rows=0, reads_c=False):
        self.descs, self.calls, self.skip_rows, self.reads_c = {}, 0, skip_rows, reads_c

    def cublasMpMatrixDescriptorCreate(self, m, n, mb, nb, rsrc, csrc, lld, cuda_type, grid, ref):
        key = len(self.descs) + 1
        self.descs[key] = (m, n, lld, self.TYPES[cuda_type])
        ref._obj.value = key
        return 0

    def cublasMpMatrixDescriptorDestroy(self, d):
        self.descs.pop(d.value)

    def cublasMpGemm_bufferSize(self, *args):
        args[-2]._obj.value, args[-1]._obj.value = 256, 16
        return 0

    def _array(self, ptr, desc):
        import ctypes

        import numpy as np
        from mgemm.bench import array_dtype

        m, n, lld, dtype = self.descs[desc.value]
        dt = array_dtype(dtype)
        buf = (ctypes.c_char * (lld * n * dt.itemsize)).from_address(ptr)
        return np.frombuffer(buf, dtype=dt).reshape((lld, n), order="F")[:m]

    def cublasMpGemm(self, handle, op_a, op_b, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc,
                     dc, compute, d_work, d_size, h_work, h_size):
        import ctypes

        import numpy as np
        assert (op_a, op_b, ia, ja, ib, jb, ic, jc) == (0, 0, 1, 1, 1, 1, 1, 1) and d_size == 256
        scale = ctypes.c_double if compute == 70 else ctypes.c_float
        assert scale.from_address(alpha).value == 1.0 and scale.from_address(beta).value == 0.0
        A, B, C = self._array(a, da), self._array(b, db), self._array(c, dc)
        assert A.shape == (m, k) and B.shape == (k, n) and C.shape == (m, n)
        full = A.astype(np.float64) @ B.astype(np.float64)
        if self.reads_c:  # beta x C added even where beta is 0: 0 x NaN is NaN
            full = full + scale.from_address(beta).value * C.astype(np.float64)
        C[self.skip_rows:] = full[self.skip_rows:].astype(C.dtype)
        self.calls += 1
        return 0


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_one_gpus_part_fills_checks_and_times(mpb, dtype):
    import threading
    import types

    cp, mp = _fake_cupy(), _FakeCublasMp()
    libs = types.SimpleNamespace(mp=mp, mp_check=mpb.Libraries.mp_check)
    case = mpb.Case(f"{dtype}-96", 96, 80, 112, dtype, 32)
    res = mpb._run_case(cp, libs, None, None, cp.cuda.Stream(), threading.Barrier(1), 0, 1, 1, case, 3, 8)
    assert mp.calls == 5 and not mp.descs  # two warm-ups and three timed runs; descriptors destroyed
    assert res["nan"] is False and res["unwritten"] is False and res["reads_c"] is False
    assert res["checked"] == 64 and res["rel_err"] < res["tolerance"]
    assert len(res["times"]) == 3 and res["workspace"] == 256
    row = mpb._row(case, {0: res}, 1, (1, 1), 700, None)
    assert "error" not in row and row["median_s"] == sorted(res["times"])[1]


def test_an_output_row_left_unwritten_fails_the_check(mpb):
    import threading
    import types

    cp, mp = _fake_cupy(), _FakeCublasMp(skip_rows=1)
    libs = types.SimpleNamespace(mp=mp, mp_check=mpb.Libraries.mp_check)
    case = mpb.Case("float16-64", 64, 64, 64, "float16", 32)
    res = mpb._run_case(cp, libs, None, None, cp.cuda.Stream(), threading.Barrier(1), 0, 1, 1, case, 1, 4)
    assert res["unwritten"] is True and res["reads_c"] is False
    assert "left unwritten: True" in mpb._row(case, {0: res}, 1, (1, 1), 700, None)["error"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_c_read_at_beta_0_is_told_apart_from_a_wrong_product(mpb, dtype):
    import threading
    import types

    pytest.importorskip("ml_dtypes")
    cp, mp = _fake_cupy(), _FakeCublasMp(reads_c=True)
    libs = types.SimpleNamespace(mp=mp, mp_check=mpb.Libraries.mp_check)
    case = mpb.Case(f"{dtype}-64", 64, 48, 80, dtype, 32)
    res = mpb._run_case(cp, libs, None, None, cp.cuda.Stream(), threading.Barrier(1), 0, 1, 1, case, 1, 4)
    assert res["reads_c"] is True and res["unwritten"] is False and res["nan"] is False
    row = mpb._row(case, {0: res}, 1, (1, 1), 700, None)
    assert "error" not in row and row["reads_c_at_beta_0"] is True


def test_the_check_sees_a_wrong_product(mpb):
    import numpy as np

    cp = _fake_cupy()
    case = mpb.Case("float32-64", 64, 48, 40, "float32", 64)
    rows, cols = cp.arange(64, dtype=np.int64), cp.arange(48, dtype=np.int64)
    a = mpb._values(cp, rows[:, None], cp.arange(40, dtype=np.int64)[None, :], 1, "float32")
    b = mpb._values(cp, cp.arange(40, dtype=np.int64)[:, None], cols[None, :], 2, "float32")
    good = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert mpb._check(cp, good, case, rows, cols, 8, seed=0)["rel_err"] < 1e-6
    bad = np.roll(good, 1, axis=0)  # rows one place off, as a layout mistake would put them
    assert mpb._check(cp, bad, case, rows, cols, 64, seed=0)["rel_err"] > 1e-2


@pytest.mark.parametrize("count, nb, samples", [(16384, 8192, 8), (1000, 300, 2), (7, 3, 1), (0, 4, 8), (5, 8, 8)])
def test_the_check_samples_every_local_block(mpb, count, nb, samples):
    import numpy as np

    picks = mpb.sample_local(count, nb, samples, np.random.default_rng(0))
    assert picks == sorted(set(picks)) and all(0 <= i < count for i in picks)
    assert {i // nb for i in picks} == set(range(-(-count // nb)))  # a row (or column) of each block
    assert len(picks) == min(count, max(samples, -(-count // nb)))


def test_a_nan_error_is_a_failed_check(mpb):
    case = mpb.Case("float32-64", 64, 64, 64, "float32", 32)
    row = mpb._row(case, {0: _result([1.0], err=float("nan")), 1: _result([1.0])}, 2, (1, 2), 700, None)
    assert "CHECK FAILED" in row["error"]


def test_repeat_and_samples_must_be_positive(mpb, capsys):
    for flag in ("--repeat", "--samples"):
        with pytest.raises(SystemExit):
            mpb.main(["--plan", "--gpus", "1", flag, "0"])
        assert "at least 1" in capsys.readouterr().err


class _FakeGrid:
    """A process grid of threads, and cublasMpGemm on it as ScaLAPACK defines the layout: each
    rank's call hands in its local arrays; the global A and B are put together from every rank's
    blocks (entry (i, j) on process ((i // mb) % nprow, (j // nb) % npcol), at local
    ((i // (mb nprow)) mb + i % mb, ...), column-major with leading dimension lld), multiplied, and
    each rank's part of C written back."""

    def __init__(self, nprow, npcol, nb):
        import threading
        self.nprow, self.npcol, self.nb = nprow, npcol, nb
        self.barrier = threading.Barrier(nprow * npcol)
        self.calls, self.parts = 0, {}

    def rank(self, r):
        import types
        mp = _FakeCublasMp()
        grid = self

        def gemm(handle, op_a, op_b, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc, dc, *rest):
            grid.parts[r] = [(mp._array(a, da), mp.descs[da.value]), (mp._array(b, db), mp.descs[db.value]),
                             (mp._array(c, dc), mp.descs[dc.value])]
            grid.barrier.wait()
            if r == 0:
                grid._multiply(m, n, k)
            grid.barrier.wait()
            return 0

        mp.cublasMpGemm = gemm
        return types.SimpleNamespace(mp=mp, mp_check=lambda status, what: None)

    def _place(self, i, nprocs):
        """(process, local index) of global row or column i."""
        return (i // self.nb) % nprocs, (i // (self.nb * nprocs)) * self.nb + i % self.nb

    def _gather(self, which, rows, cols):
        import numpy as np
        out = np.empty((rows, cols))
        for i in range(rows):
            pr, li = self._place(i, self.nprow)
            for j in range(cols):
                pc, lj = self._place(j, self.npcol)
                out[i, j] = self.parts[pr + pc * self.nprow][which][0][li, lj]
        return out

    def _multiply(self, m, n, k):
        self.calls += 1
        full = self._gather(0, m, k) @ self._gather(1, k, n)
        for i in range(m):
            pr, li = self._place(i, self.nprow)
            for j in range(n):
                pc, lj = self._place(j, self.npcol)
                self.parts[pr + pc * self.nprow][2][0][li, lj] = full[i, j]


@pytest.mark.parametrize("grid, shape", [((1, 2), (96, 80, 112)), ((2, 2), (100, 70, 90)), ((2, 1), (40, 72, 33))])
def test_ranks_fill_and_check_the_layout_cublasmp_reads(mpb, grid, shape):
    """Every rank's local arrays, read the way ScaLAPACK lays them out (independently of the
    benchmark's own index helpers), make the product the check expects, on every rank."""
    import threading

    nprow, npcol = grid
    fake = _FakeGrid(nprow, npcol, nb=16)
    case = mpb.Case("float64-x", *shape, "float64", 16)
    results, errors = {}, []

    def rank(r):
        try:
            cp = _fake_cupy()
            results[r] = mpb._run_case(cp, fake.rank(r), None, None, cp.cuda.Stream(), fake.barrier, r, nprow, npcol,
                                       case, 1, 6)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
            fake.barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(nprow * npcol)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert fake.calls == 3  # two warm-ups and one timed run, each collective
    row = mpb._row(case, results, nprow * npcol, grid, 700, None)
    assert "error" not in row, row
    assert row["rel_err"] < 1e-12 and row["checked"] > 0
