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
                                            ({0: _result([1.0]), 1: _result([1.0], nan=True)}, "NaN left: True"),
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
