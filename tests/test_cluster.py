"""The embedded cluster's worker plugin that scopes UCX transfer synchronization to a stream."""

from __future__ import annotations

import json
import os
import sys
import threading
import types
import warnings
import weakref

import dask
import dask.array as da
import numpy as np
import pytest

from mgemm import cluster, staging


def _fake_ucxx_comm(monkeypatch):
    """A stand-in for distributed_ucxx.ucxx: its module-level ``synchronize_stream`` is what the
    comm's send and receive call."""
    calls = []
    comm = types.ModuleType("distributed_ucxx.ucxx")
    comm.synchronize_stream = lambda stream=0: calls.append("device")
    pkg = types.ModuleType("distributed_ucxx")
    pkg.ucxx = comm
    monkeypatch.setitem(sys.modules, "distributed_ucxx", pkg)
    monkeypatch.setitem(sys.modules, "distributed_ucxx.ucxx", comm)
    return comm, calls


def test_plugin_swaps_the_comm_synchronize_and_restores_it(monkeypatch):
    comm, calls = _fake_ucxx_comm(monkeypatch)
    original = comm.synchronize_stream
    plugin = cluster.StreamScopedTransfers()
    plugin.setup(worker=None)
    assert comm.synchronize_stream is cluster._synchronize_legacy_default_stream
    plugin.teardown(worker=None)
    assert comm.synchronize_stream is original
    comm.synchronize_stream()
    assert calls == ["device"]


def test_plugin_is_a_no_op_without_ucx(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed_ucxx", None)  # import fails
    plugin = cluster.StreamScopedTransfers()
    plugin.setup(worker=None)
    plugin.teardown(worker=None)


def test_transfer_sync_is_checked():
    with pytest.raises(ValueError, match="transfer_sync"):
        cluster.start_default_cluster(transfer_sync="host")


def test_threads_per_worker_is_checked():
    with pytest.raises(ValueError, match="threads_per_worker"):
        cluster.start_default_cluster(threads_per_worker=0)


def test_worker_setup_ignores_sigint_only_in_a_worker_process_on_its_main_thread(monkeypatch):
    """The preload (``WORKER_SETUP``) ignores SIGINT in a worker process of its own, on its main
    thread; in the client's process (an in-process worker) and off the main thread, where no
    handler can be set, it leaves SIGINT as it is and raises nothing.  This process no longer
    ignores SIGINT while the embedded cluster starts (a Ctrl-C then was lost)."""
    import multiprocessing
    import signal
    import threading

    from mgemm import worker_setup

    before = signal.getsignal(signal.SIGINT)
    try:
        worker_setup.dask_setup(None)  # the client's process
        assert signal.getsignal(signal.SIGINT) is before
        monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
        errors: list = []
        thread = threading.Thread(target=lambda: errors.append(worker_setup.dask_setup(None)))
        thread.start()
        thread.join()
        assert errors == [None] and signal.getsignal(signal.SIGINT) is before
        worker_setup.dask_setup(None)  # a worker process's main thread
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    assert not hasattr(cluster, "_workers_ignore_interrupts")


def test_threads_per_worker_reaches_the_workers(sigint_as_from_a_terminal):
    """... and the embedded cluster's worker processes ignore SIGINT (a terminal's Ctrl-C reached
    each, and each printed a traceback), while this process takes it as before."""
    import signal

    # SIGINT as a terminal starts a program (sigint_as_from_a_terminal: a shell's background job
    # starts it ignoring SIGINT, which the workers would inherit whatever mgemm does)
    before = signal.getsignal(signal.SIGINT)
    client = cluster.start_default_cluster(n_workers=2, threads_per_worker=1)
    try:
        workers = cluster.workers_info(client)
        assert len(workers) == 2 and {w["nthreads"] for w in workers.values()} == {1}
        ident, who = cluster.scheduler_snapshot(client)
        assert set(ident["workers"]) == set(workers) and who == {}
        assert set(client.run(lambda: int(signal.getsignal(signal.SIGINT))).values()) == \
            {int(signal.SIG_IGN)}
        # blocked too, from the process's start (``_loop_blocking_sigint``): a Ctrl-C before the
        # preload had run printed a traceback in each worker
        blocked = client.run(lambda: signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
        assert list(blocked.values()) == [True, True], blocked
        assert signal.getsignal(signal.SIGINT) is before
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        lc = client.cluster
        client.close()
        lc.close()


def test_the_loop_blocks_sigint_and_this_thread_does_not():
    """``_loop_blocking_sigint``: the loop's thread, and so every thread and process started from
    it, blocks SIGINT; the calling thread's mask is as it was; with no cluster to take the loop,
    leaving the block stops its thread."""
    import signal

    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with cluster._loop_blocking_sigint() as loop:
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
        done = threading.Event()
        seen = []

        def probe():
            seen.append(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
            done.set()

        loop.add_callback(probe)
        assert done.wait(10) and seen == [True]
        threads = [t for t in threading.enumerate() if t.name == "IO loop" and t.is_alive()]
        assert threads
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)


def test_a_start_interrupted_closes_what_started(monkeypatch):
    """``_started``: a cluster whose start a Ctrl-C interrupts is closed (errors of distributed's
    own close kept quiet) and left out of distributed's close at exit; the interrupt goes on.
    Clusters that were there before are left alone; a start that succeeds returns its cluster."""
    from distributed.deploy.spec import SpecCluster

    class Part:
        def __init__(self):
            self.shutdown_on_close = True
            self.closed = []

        def close(self, timeout=None):
            self.closed.append(timeout)
            raise AssertionError("Status.init")  # as distributed's close of an unstarted worker

    earlier, parts = Part(), []
    monkeypatch.setattr(SpecCluster, "_instances", weakref.WeakSet([earlier]))

    def interrupted():
        parts.append(Part())
        SpecCluster._instances.add(parts[-1])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cluster._started(interrupted)
    assert parts[0].closed == [10] and parts[0].shutdown_on_close is False
    assert earlier.closed == [] and earlier.shutdown_on_close is True
    ok = Part()
    assert cluster._started(lambda: ok) is ok and ok.closed == [] and ok.shutdown_on_close


@pytest.mark.skipif(cluster.gpus_visible() > 0, reason="the embedded cluster of a CPU machine")
def test_embedded_cpu_cluster_says_it_runs_tcp():
    with pytest.warns(UserWarning, match="no GPU visible: the embedded CPU cluster runs over TCP, "
                                         "not ucx"):
        client = cluster.start_default_cluster(n_workers=1, protocol="ucx")
    try:
        assert client.scheduler.address.startswith("tcp://")
    finally:
        lc = client.cluster
        client.close()
        lc.close()


def test_workers_info_lists_every_worker_from_the_scheduler(monkeypatch):
    """Every worker, with the keys the callers read, asked of the scheduler itself: not the
    client's cached identity, which its periodic refresh can replace with one listing none."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0",
                      memory_limit="1GiB") as lc, Client(lc) as client:
        client.wait_for_workers(2, timeout=30)
        # what a refresh that asked for no workers leaves in the client's cache
        monkeypatch.setattr(client, "scheduler_info", lambda *a, **k: {"workers": {}})
        info = cluster.workers_info(client)
        assert set(info) == set(lc.scheduler.workers) and len(info) == 2
        assert set(info) == set(client.nthreads())
        for w in info.values():
            assert {"name", "nthreads", "memory_limit", "resources"} <= set(w)
            assert w["nthreads"] == 2 and w["memory_limit"] == 2**30
        described = cluster.describe_workers(client, "float64", gpu=False)
        assert [w.name for w in described] == sorted(info)
        assert [w.slots for w in described] == [2, 2]  # a block task per thread


def _raw_serializers():
    """Stand-ins for distributed's CuPy serializers: the header keeps only the typestr, as
    ``__cuda_array_interface__`` does ("<V2" for bfloat16)."""
    import numpy as np

    def serialize(x):
        return {"typestr": x.dtype.str, "shape": x.shape}, [x.tobytes()]

    def deserialize(header, frames):
        return np.frombuffer(frames[0], dtype=header["typestr"]).reshape(header["shape"])
    return serialize, deserialize


def test_dtype_names_survive_serialization():
    """A bfloat16 array through typestr-only serializers comes back as raw voids; through the
    wrapped ones as bfloat16 with the same values. Other dtypes pass untouched."""
    import numpy as np
    ml_dtypes = pytest.importorskip("ml_dtypes")
    ser, deser = _raw_serializers()
    x = np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)
    assert deser(*ser(x)).dtype == np.dtype("V2")  # the loss being fixed
    named_ser, named_deser = cluster.with_dtype_names(ser, deser)
    header, frames = named_ser(x)
    assert header[cluster.DTYPE_HEADER] == "bfloat16"
    y = named_deser(header, frames)
    assert y.dtype == x.dtype and np.array_equal(y.astype(np.float32), x.astype(np.float32))
    header, frames = named_ser(np.ones(3, np.float16))
    assert cluster.DTYPE_HEADER not in header and named_deser(header, frames).dtype == np.float16


def test_block_task_reads_raw_voids_as_bfloat16():
    """A chunk that arrived as 2-byte voids (from a process without the wrapped serializers) is
    multiplied as the bfloat16 it holds."""
    import numpy as np
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from mgemm.graph import _block_task

    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 6)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((6, 5)).astype(ml_dtypes.bfloat16)
    got = _block_task("numpy", (1, 1, 1), None, 1.0, 0.0, "bfloat16", False, "off", False, "00",
                      a.view("V2"), b.view("V2"))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref) < 1e-2


def test_rmm_pool_unused_counts_the_pool_less_what_the_worker_holds(monkeypatch):
    """An RMM pool (here behind an adaptor) of 100 bytes, a worker holding 30: 70 unused; no pool
    (or no RMM) counts nothing."""
    class Pool:
        def pool_size(self):
            return 100

    class Adaptor:
        def __init__(self, upstream):
            self.upstream = upstream

        def get_upstream(self):
            return self.upstream

    current = {"mr": Adaptor(Pool())}
    mr = types.SimpleNamespace(PoolMemoryResource=Pool, get_current_device_resource=lambda: current["mr"])
    monkeypatch.setitem(sys.modules, "rmm", types.SimpleNamespace(mr=mr))
    worker = types.SimpleNamespace(state=types.SimpleNamespace(nbytes=30))
    assert cluster.rmm_pool_unused(worker) == 70
    assert cluster.rmm_pool_unused() == 100
    current["mr"] = object()  # a plain CUDA resource: no pool
    assert cluster.rmm_pool_unused(worker) == 0
    monkeypatch.setitem(sys.modules, "rmm", None)  # not installed
    assert cluster.rmm_pool_unused(worker) == 0


def test_auto_rmm_pool_is_half_the_gpu_at_most_the_cap(monkeypatch):
    import sys
    import types

    from mgemm import cluster

    fake = types.ModuleType("dask_cuda.utils")
    sizes = {0: 141 * 10**9, 1: 16 * 10**9, 2: None}
    fake.get_device_total_memory = lambda index=0: sizes[index]
    monkeypatch.setitem(sys.modules, "dask_cuda.utils", fake)
    monkeypatch.setitem(sys.modules, "dask_cuda", types.ModuleType("dask_cuda"))
    assert cluster.auto_rmm_pool_size(0) == cluster.RMM_POOL_CAP  # an H200: the cap
    assert cluster.auto_rmm_pool_size(1) == 8 * 10**9 // 256 * 256  # a small GPU: half of it
    assert cluster.auto_rmm_pool_size(2) == 0.5  # size unknown: dask-cuda's half


def test_commands_name_a_scheduler_they_cannot_reach():
    """``mgemm info`` takes its scheduler from ``mgemm.client`` (``MGEMM_CLIENT``) as the other
    commands do, and one it cannot reach is a one-line error naming it, not a traceback (nor an
    embedded cluster)."""
    import dask
    from click.testing import CliRunner

    from mgemm.cli import main

    with dask.config.set({"mgemm.client": "tcp://127.0.0.1:1",
                          "distributed.comm.timeouts.connect": "1s"}):
        result = CliRunner().invoke(main, ["info"])
    assert result.exit_code == 1, result.output
    assert "cannot reach the scheduler tcp://127.0.0.1:1" in result.output
    assert "Traceback" not in result.output


def test_an_embedded_cluster_that_cannot_start_is_a_one_line_error(monkeypatch):
    """No scheduler given and the embedded cluster fails to start: the error says so, not
    'cannot reach the scheduler None'."""
    from click.testing import CliRunner

    from mgemm import cli, cluster

    def boom(**kwargs):
        raise OSError("[Errno 98] Address already in use")

    monkeypatch.setattr(cluster, "start_default_cluster", boom)
    monkeypatch.setattr(cluster, "active_client", lambda given=None: None)
    result = CliRunner().invoke(cli.main, ["info"])
    assert result.exit_code == 1, result.output
    assert "cannot start the embedded cluster: [Errno 98] Address already in use" in result.output
    assert "None" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("address, says", [
    ("foo", "missing port number"), ("tcp://127.0.0.1:abc", "invalid literal"),
    ("bogus://h:1", "unknown address scheme 'bogus'"),
    ("tls://127.0.0.1:1", "needs the client's certificates")])
def test_malformed_scheduler_addresses_are_refused_at_once(address, says):
    """An address no client could use is refused before a ``Client`` is made (one that fails in
    its constructor waits up to a minute to close when collected): by the CLI as a one-line
    error, by the API as a ``ValueError``; each says where the address came from."""
    import time

    from click.testing import CliRunner

    import mgemm
    from mgemm.cli import main

    start = time.perf_counter()
    result = CliRunner().invoke(main, ["info", "--client", address])
    assert result.exit_code == 2, result.output  # a usage error
    assert "mgemm option client (from the argument client (--client))" in result.output
    assert says in result.output and "Traceback" not in result.output
    with pytest.raises(ValueError, match=f"from the argument client.*{says}"):
        mgemm.matmul(np.ones((2, 2)), np.ones((2, 2)), client=address)
    with dask.config.set({"mgemm.client": address}), \
            pytest.raises(ValueError, match=f"from dask.config mgemm.client .*{says}"):
        mgemm.matmul(np.ones((2, 2)), np.ones((2, 2)))
    assert time.perf_counter() - start < 10


def test_bench_refuses_a_transfer_limit_that_is_no_size(monkeypatch):
    from click.testing import CliRunner

    from mgemm import cli

    monkeypatch.setattr(cli, "_session", lambda *a, **k: pytest.fail("a cluster was started"))
    result = CliRunner().invoke(cli.main, ["bench", "--transfer-limit", "abc"])
    assert result.exit_code == 2, result.output
    assert "'abc' is not a positive size such as 1GiB" in result.output
    for limit in ("0", "-1", "0B"):  # parse_bytes takes these; a worker could fetch nothing
        result = CliRunner().invoke(cli.main, ["bench", "--transfer-limit", limit])
        assert result.exit_code == 2 and "not a positive size" in result.output, (limit, result.output)


def test_cli_client_flag_help_asks_for_an_address():
    """On the command line ``--client`` takes a scheduler address only (the keyword also takes a
    Client), and says so in every command's help."""
    from click.testing import CliRunner

    from mgemm import cli

    for command in ("demo", "bench"):
        out = " ".join(CliRunner().invoke(cli.main, [command, "--help"]).output.split())
        assert "--client TEXT scheduler address" in out, command
        assert "distributed.Client" not in out, command


def test_bench_plot_writes_a_png_at_the_name_given(monkeypatch):
    """``--plot`` writes a PNG at the path given whatever it ends in (matplotlib took the format
    from the suffix: a traceback for ``.txt`` after the whole benchmark, ``.png`` appended to a
    name without one).  A stand-in matplotlib records the call."""
    from unittest import mock

    from mgemm import bench

    fig, ax = mock.MagicMock(), mock.MagicMock()
    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots = lambda **kw: (fig, ax)
    pyplot.close = lambda f: None
    matplotlib = types.ModuleType("matplotlib")
    matplotlib.use, matplotlib.pyplot = (lambda backend: None), pyplot
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    row = bench.Row("float32-2048", "mgemm", 2048, 2048, 2048, "float32", [0.1], 0.1, 0.17, 1e-7,
                    2, "tcp")
    for name in ("chart.txt", "chart"):
        bench.plot([row], name)
        fig.savefig.assert_called_with(name, dpi=120, format="png")


def test_bench_plot_without_matplotlib_stops_before_any_work(monkeypatch):
    """``mgemm bench --plot`` needs matplotlib (the ``plot`` extra); without it the command says
    so at once instead of failing after the whole benchmark has run."""
    import importlib.util

    from click.testing import CliRunner

    from mgemm import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    monkeypatch.setattr(cli, "_session", lambda *a, **k: pytest.fail("a cluster was started"))
    result = CliRunner().invoke(cli.main, ["bench", "--plot", "out.png"])
    assert result.exit_code == 2, result.output
    assert "--plot needs matplotlib" in result.output


def test_a_lazy_result_planned_for_an_address_says_where_to_compute_it(monkeypatch):
    """``client="<address>"`` (or ``MGEMM_CLIENT``) with Dask operands: the lazy result runs
    wherever it is computed, so where that is not that scheduler (no default client here) a
    warning, once per address, says how to compute it there; none under a default client of
    that scheduler, nor for arrays in (computed there)."""
    from distributed import Client, LocalCluster

    import mgemm
    from mgemm import api

    monkeypatch.setattr(api, "_warned_addresses", set())
    x = da.ones((8, 8), chunks=4)
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as lc:
        address = lc.scheduler_address
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mgemm.matmul(np.ones((4, 4)), np.ones((4, 4)), client=address)
            assert not caught
            c = mgemm.matmul(x, x, client=address)
            mgemm.matmul(x, x, client=address)
        said = [str(w.message) for w in caught]
        assert len(said) == 1 and f"planned this product for the workers at {address}" in said[0]
        assert "this process (no default client)" in said[0] and caught[0].filename == __file__
        assert (c.compute() == 8).all()
        monkeypatch.setattr(api, "_warned_addresses", set())
        with Client(lc), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mgemm.matmul(x, x, client=address)
        assert not caught


def test_info_with_a_bad_staging_setting_on_a_gpu_worker_is_an_error_line(monkeypatch):
    """A GPU worker reads ``mgemm.staging`` as ``mgemm info`` asks for its device: a bad value
    there is one error line naming the key."""
    from click.testing import CliRunner
    from distributed import LocalCluster

    from mgemm import cli

    def bad(client, workers=None):
        raise ValueError("dask.config mgemm.staging.copy-threads: not \"auto\" or a positive "
                         "integer, got 0")

    monkeypatch.setattr(cluster, "worker_devices", bad)
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as lc:
        result = CliRunner().invoke(cli.main, ["info", "--client", lc.scheduler_address])
    assert result.exit_code == 1 and "mgemm.staging.copy-threads" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_bench_output_paths_are_checked_before_any_work(monkeypatch, tmp_path):
    """--json, --trace and --plot into a folder that does not exist: a usage error at once, not
    a traceback after the first case has run."""
    from click.testing import CliRunner

    from mgemm import cli

    monkeypatch.setattr(cli, "_session", lambda *a, **k: pytest.fail("a cluster was started"))
    for flag in ("--json", "--trace", "--plot"):
        result = CliRunner().invoke(cli.main, ["bench", flag, str(tmp_path / "no" / "out")])
        assert result.exit_code == 2 and f"Invalid value for {flag}" in result.output, result.output
        assert "no folder" in result.output
    # no file name at all: empty (an unset variable in a script), a folder, a trailing slash
    (tmp_path / "dir").mkdir()
    for flag in ("--json", "--trace", "--plot"):
        for path in ("", str(tmp_path / "dir"), str(tmp_path / "new") + "/"):
            result = CliRunner().invoke(cli.main, ["bench", flag, path])
            assert result.exit_code == 2, (flag, path, result.output)
            assert "is no file name" in result.output or "is a directory" in result.output
    # two flags naming one file (--plot over the --json rows replaced them with a PNG): the same
    # name, another way of writing it, a link to it
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "out.jsonl")
    for first, second in (("--json", "--plot"), ("--json", "--trace"), ("--trace", "--plot")):
        for other in ("out.jsonl", "./out.jsonl", "dir/../out.jsonl", "link.jsonl"):
            result = CliRunner().invoke(cli.main, ["bench", first, "out.jsonl", second, other])
            assert result.exit_code == 2 and "is the file" in result.output, result.output


def test_bench_rows_and_trace_that_cannot_be_written_are_an_error_line(monkeypatch, tmp_path):
    """A write that fails after the work (a full disk) is an error line naming the file."""
    from click.testing import CliRunner

    from mgemm import bench, cli

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    for flag in ("--json", "--trace"):
        _stand_in(monkeypatch)
        result = CliRunner().invoke(cli.main, ["bench", flag, "/dev/full"])
        assert result.exit_code == 1, result.output
        assert "could not write /dev/full: No space left on device" in result.output
        assert "Traceback" not in result.output
    _stand_in(monkeypatch)  # the plot, whose writer is matplotlib's

    def full(rows, path):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(bench, "plot", full)
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: object())
    result = CliRunner().invoke(cli.main, ["bench", "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == 1 and "could not write" in result.output, result.output
    assert "Traceback" not in result.output


def test_bench_rows_and_trace_are_standard_json(tmp_path):
    """A failed row's times and an idle worker's first start were written as NaN and Infinity,
    which JSON parsers reject: null now."""
    from mgemm import bench, cli

    nan = float("nan")
    row = bench.Row("c", "mgemm", 8, 8, 8, "float32", [], nan, nan, nan, 2, "tcp", {}, "broke")
    assert json.loads(row.to_json(), parse_constant=pytest.fail)["median_s"] is None
    path = tmp_path / "trace.jsonl"
    cli._appender(str(path))({"workers": {"w": bench._worker_summary(0)}, "s": [1.0, nan]})
    record = json.loads(path.read_text(), parse_constant=pytest.fail)
    assert record["workers"]["w"]["first"] is None and record["s"] == [1.0, None]
    assert bench.strict_json({"x": (nan, 1.0), "y": float("-inf")}) == '{"x": [null, 1.0], "y": null}'
    assert "inf" not in bench.format_summary({"w": bench._worker_summary(0)})


def test_demo_and_bench_wait_for_a_first_worker(monkeypatch):
    """On a scheduler with no worker yet (just started, beside workers still starting) the
    commands wait for one, saying so, and after ``WORKER_WAIT_S`` give an error line."""
    import threading

    from click.testing import CliRunner
    from distributed import Client, LocalCluster

    from mgemm import cli

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as lc, \
            Client(lc) as client:
        monkeypatch.setattr(cli, "WORKER_WAIT_S", 0.5)
        for command in ("demo", "bench"):
            result = CliRunner().invoke(cli.main, [command, "--client", lc.scheduler_address])
            assert result.exit_code == 1, result.output
            assert f"no worker joined the scheduler {lc.scheduler_address} in 0.5 s" in result.output
            assert "Traceback" not in result.output
        monkeypatch.setattr(cli, "WORKER_WAIT_S", 60)
        threading.Timer(0.5, lc.scale, [1]).start()
        assert cli._joined(client) is client and len(client.nthreads()) == 1


def test_placement_plugin_fills_in_only_missing_restrictions(monkeypatch):
    """``KeepPlacement.update_graph`` restricts a block task that arrives without restrictions to
    its planned worker (loosely, with the plan's priority), by its own key or, fused, by the
    block key inside it; it leaves annotated tasks, other tasks, tasks the scheduler has placed
    already and tasks whose planned worker has left alone, and it keeps only the last
    ``PLANNED`` placements."""
    plugin = cluster.KeepPlacement()
    block = "mgemm-block-x"
    plugin.remember({(block, 0, 0): ("w1", -3), (block, 0, 1): ("gone", -4),
                     (block, 1, 0): ("w2", -5), (block, 1, 1): ("w2", -6), ("other", 0): ("w1", 0)})

    def task(restrictions=None, spec=None, state="released"):
        return types.SimpleNamespace(worker_restrictions=restrictions, loose_restrictions=False,
                                     priority=(0, 1, 9), run_spec=spec, state=state)

    fused_spec = types.SimpleNamespace(args=({(block, 1, 1): "inner", ("tanh-y", 1, 1): "out"},))
    tasks = {(block, 0, 0): task(), (block, 0, 1): task(), (block, 1, 0): task({"w1"}),
             ("mgemm-block-tanh-y", 1, 1): task(spec=fused_spec), ("other", 0): task(),
             ("mgemm-block-z", 1, 1): task(spec=fused_spec, state="processing")}
    scheduler = types.SimpleNamespace(tasks=tasks, workers={"w1": None, "w2": None})
    plugin.update_graph(scheduler, tasks=list(tasks))
    got = {key: (ts.worker_restrictions, ts.loose_restrictions, ts.priority)
           for key, ts in tasks.items()}
    assert got == {(block, 0, 0): ({"w1"}, True, (3, 1, 9)),
                   (block, 0, 1): (None, False, (0, 1, 9)),  # its worker left
                   (block, 1, 0): ({"w1"}, False, (0, 1, 9)),  # annotated: as it came
                   ("mgemm-block-tanh-y", 1, 1): ({"w2"}, True, (6, 1, 9)),
                   ("other", 0): (None, False, (0, 1, 9)),
                   ("mgemm-block-z", 1, 1): (None, False, (0, 1, 9))}  # placed already

    monkeypatch.setattr(cluster.KeepPlacement, "PLANNED", 3)
    plugin.remember({(block, 2, j): ("w1", 0) for j in range(3)})
    assert list(plugin.planned) == [(block, 2, j) for j in range(3)]
    # registered again (a product built again before it is computed): newest, not next dropped
    plugin.remember({(block, 2, 0): ("w2", 1)})
    plugin.remember({(block, 3, 0): ("w1", 0)})
    assert plugin.planned == {(block, 2, 2): ("w1", 0), (block, 2, 0): ("w2", 1),
                              (block, 3, 0): ("w1", 0)}
    assert list(plugin.planned) == [(block, 2, 2), (block, 2, 0), (block, 3, 0)]


def test_an_address_gets_one_client_and_a_new_one_once_it_closed():
    """``client="tcp://..."``: every product on that address shares one client, and one that has
    closed (its scheduler gone too long) is replaced rather than failing every later product."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as local:
        first = cluster.active_client(local.scheduler_address)
        assert cluster.active_client(local.scheduler_address) is first
        first.close()
        second = cluster.active_client(local.scheduler_address)
        assert second is not first and second.status == "running"
        second.close()


# -- the commands on a stand-in cluster (no cluster started) ---------------------------------------

def _stand_in(monkeypatch, *, gpu=False, workers=2, rows=None):
    """``mgemm demo``/``bench`` on a stand-in cluster: ``_session`` yields a fake client (and
    records what it was asked to start), ``run_case`` records its calls and returns ``rows(case,
    methods)`` (default: mgemm 1 s, dask 2 s)."""
    import contextlib

    from mgemm import bench, cli

    calls = {"run_case": []}
    client = types.SimpleNamespace(
        nthreads=lambda: {f"tcp://127.0.0.1:{4000 + i}": 1 for i in range(workers)},
        scheduler=types.SimpleNamespace(address="tcp://127.0.0.1:8786"))

    @contextlib.contextmanager
    def session(given, **start):
        calls["session"] = (given, start)
        yield client

    def ok_rows(case, methods):
        return [bench.Row(case.name, bench.METHODS[m].name, case.m, case.n, case.k, case.dtype,
                          [1.0 + i], 1.0 + i, 2.0, 3e-7, workers, "tcp")
                for i, m in enumerate(methods)]

    def run_case(client_, case, methods, **kw):
        calls["run_case"].append((case, list(methods), kw))
        if kw.get("trace"):
            kw["trace"]({"case": case.name})
        return (rows or ok_rows)(case, methods)

    monkeypatch.setattr(cli, "_session", session)
    monkeypatch.setattr(cli, "_cluster_has_gpus", lambda c: gpu)
    monkeypatch.setattr(bench, "run_case", run_case)
    return calls


def _failing_rows(failing, error):
    """``_stand_in``'s ``rows``: one row per method, the ``failing`` one with ``error``."""
    from mgemm import bench

    def make(case, methods):
        return [bench.Row(case.name, bench.METHODS[m].name, 8, 8, 8, case.dtype, [1.0], 1.0, 2.0,
                          1e-7, 2, "tcp", error=error if m == failing else "") for m in methods]
    return make


def test_cli_demo_hands_its_flags_on_and_prints_the_check(monkeypatch):
    """``mgemm demo``: --size, --dtype, --repeat, --workers and the mgemm options reach the run;
    the table and the verdict go to stdout (speed-up over dask, the float64 check), progress to
    stderr."""
    from click.testing import CliRunner

    from mgemm import cli

    calls = _stand_in(monkeypatch)
    result = CliRunner().invoke(cli.main, ["demo", "--size", "1024", "--dtype", "float64",
                                           "--repeat", "2", "--workers", "3", "--block-size", "64"])
    assert result.exit_code == 0, result.output
    assert calls["session"] == (None, {"n_workers": 3})
    ((case, methods, kw),) = calls["run_case"]
    assert (case.m, case.n, case.k, case.dtype, case.chunk) == (1024, 1024, 1024, "float64", 256)
    assert methods == ["mgemm", "dask"] and kw["repeat"] == 2 and kw["options"]["block_size"] == 64
    assert "2.00× dask.array.matmul" in result.stdout and "relative error 3.0e-07" in result.stdout
    assert "checked against float64" in result.stdout and "float64-1024" in result.stdout
    assert "2 CPU worker(s) at tcp://127.0.0.1:8786" in result.stderr
    assert "A, B 1024×1024 float64" in result.stderr and "worker(s)" not in result.stdout


def test_cli_a_gpu_engine_on_a_cluster_without_gpus_is_refused_before_any_run(monkeypatch):
    """``--engine cublas`` or ``persistent`` on CPU workers: a usage error naming the cluster,
    before any case runs; on GPU workers it runs."""
    from click.testing import CliRunner

    from mgemm import cli

    for command in (["demo", "--size", "8"], ["bench"]):
        for engine in ("cublas", "persistent"):
            calls = _stand_in(monkeypatch)
            result = CliRunner().invoke(cli.main, command + ["--engine", engine])
            assert result.exit_code == 2, result.output
            assert (f"--engine {engine} multiplies on GPUs, and the cluster at tcp://127.0.0.1:8786 "
                    f"has none") in " ".join(result.output.split())
            assert calls["run_case"] == []
        calls = _stand_in(monkeypatch, gpu=True)
        assert CliRunner().invoke(cli.main, command + ["--engine", "cublas"]).exit_code == 0
        assert calls["run_case"]


def test_cli_flags_of_the_embedded_cluster_are_named_when_ignored(monkeypatch):
    """Where a command runs on a given scheduler or on the active client, the embedded cluster's
    flags the user gave (demo's --workers; bench's --protocol, --transfer-limit, --transfer-sync,
    --threads-per-worker) are named as ignored on stderr; flags left at their defaults are not."""
    from click.testing import CliRunner

    from mgemm import cli

    _stand_in(monkeypatch)
    result = CliRunner().invoke(cli.main, ["demo", "--size", "8", "--workers", "3", "--client",
                                           "tcp://h:8786"])
    assert result.exit_code == 0, result.output
    assert "--workers: for the embedded cluster, ignored on the scheduler tcp://h:8786" in result.stderr
    result = CliRunner().invoke(cli.main, ["bench", "--client", "tcp://h:8786", "--protocol", "tcp",
                                           "--transfer-sync", "device"])
    assert result.exit_code == 0, result.output
    assert ("--protocol, --transfer-sync: for the embedded cluster, ignored on the scheduler "
            "tcp://h:8786") in result.stderr
    monkeypatch.setattr(cli, "active_client_missing", lambda: False)
    result = CliRunner().invoke(cli.main, ["bench", "--threads-per-worker", "2"])
    assert "--threads-per-worker: for the embedded cluster, ignored on the active client" in result.stderr
    for command in (["demo", "--size", "8"], ["bench"]):  # nothing given: nothing said
        assert "ignored" not in CliRunner().invoke(cli.main, command + ["--client", "tcp://h:1"]).stderr
    monkeypatch.setattr(cli, "active_client_missing", lambda: True)
    result = CliRunner().invoke(cli.main, ["demo", "--size", "8", "--workers", "3"])
    assert "ignored" not in result.stderr  # the embedded cluster takes them


@pytest.mark.parametrize("gpu, workers, size, kind", [(False, 2, 2048, "CPU"), (True, 1, 16384, "GPU"),
                                                      (True, 2, 32768, "GPU")])
def test_cli_demo_sizes_the_product_from_the_hardware(monkeypatch, gpu, workers, size, kind):
    """Without --size: 2048 on CPU workers, 16384 on one GPU, 32768 on two or more; float32 by
    default."""
    from click.testing import CliRunner

    from mgemm import cli

    calls = _stand_in(monkeypatch, gpu=gpu, workers=workers)
    result = CliRunner().invoke(cli.main, ["demo", "--repeat", "1"])
    assert result.exit_code == 0, result.output
    ((case, _, _),) = calls["run_case"]
    assert (case.m, case.dtype, case.chunk) == (size, "float32", size // 4)
    assert f"{workers} {kind} worker(s)" in result.stderr


def test_cli_demo_exit_status_follows_mgemm(monkeypatch):
    """A demo whose mgemm row failed (an error, or outside the float64 check's bound) exits 1 with
    the error; a failed dask.array.matmul is only reported beside mgemm's result."""
    from click.testing import CliRunner

    from mgemm import cli

    error = "AssertionError: relative error 1 > 1e-05"
    _stand_in(monkeypatch, rows=_failing_rows("mgemm", error))
    bad = CliRunner().invoke(cli.main, ["demo", "--size", "8"])
    assert bad.exit_code == 1
    assert "mgemm failed: AssertionError: relative error 1 > 1e-05" in bad.output
    _stand_in(monkeypatch, rows=_failing_rows("dask", error))
    ok = CliRunner().invoke(cli.main, ["demo", "--size", "8"])
    assert ok.exit_code == 0, ok.output
    assert "dask.array.matmul failed (AssertionError: relative error" in ok.stdout
    assert "mgemm: 2 TFLOP/s" in ok.stdout  # three significant digits, as the table: a CPU's 0.0123 too


def test_cli_a_case_the_cluster_cannot_hold_is_an_error_message(monkeypatch, tmp_path):
    """``bench.run_case`` refuses inputs the workers cannot hold (``MemoryPlanError``) before it
    makes them; ``mgemm demo`` says so in one line, exit status 1.  ``mgemm bench`` runs its
    other cases (one such case ended the whole bench, its other rows lost), gives the refused
    case a failed row in the table and the --json file, and exits 1."""
    from click.testing import CliRunner

    from mgemm import cli
    from mgemm.plan import MemoryPlanError

    def too_big(case, methods):
        raise MemoryPlanError("A, B and C take 1.0 TiB, but 2 workers may use 12 GiB in all")

    _stand_in(monkeypatch, rows=too_big)
    result = CliRunner().invoke(cli.main, ["demo", "--size", "8"])
    assert result.exit_code == 1, result.output
    assert "Error: A, B and C take 1.0 TiB" in result.output and "Traceback" not in result.output

    calls = _stand_in(monkeypatch)
    from mgemm import bench
    ok = bench.run_case

    def second_too_big(client, case, methods, **kw):
        if len(calls["run_case"]) == 1:
            calls["run_case"].append(None)
            too_big(case, methods)
        return ok(client, case, methods, **kw)
    monkeypatch.setattr(bench, "run_case", second_too_big)
    rows = tmp_path / "rows.jsonl"
    result = CliRunner().invoke(cli.main, ["bench", "--json", str(rows)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    cases = [c for c in bench.cpu_cases()]
    written = [json.loads(line) for line in rows.read_text().splitlines()]
    assert [r["case"] for r in written] == [c.name for c in cases for _ in range(2)]
    refused = [r for r in written if r["error"]]
    assert {r["case"] for r in refused} == {cases[1].name} and len(refused) == 2
    assert all("A, B and C take 1.0 TiB" in r["error"] and r["median_s"] is None for r in refused)
    assert f"mgemm failed on {cases[1].name}" in result.output
    ran = [r for r in written if not r["error"]]
    for field in ("method", "workers", "protocol"):  # as the rows of the cases that ran
        assert sorted(r[field] for r in refused) == sorted(r[field] for r in ran[:2]), field

    # any other error is not a refused case: it ends the bench as before
    _stand_in(monkeypatch)

    def broken(client, case, methods, **kw):
        raise ValueError("boom")
    monkeypatch.setattr(bench, "run_case", broken)
    rows.unlink()
    result = CliRunner().invoke(cli.main, ["bench", "--json", str(rows)])
    assert isinstance(result.exception, ValueError) and not rows.exists()


def test_cli_demo_says_it_starts_a_cluster_only_when_it_does(monkeypatch):
    """``mgemm demo`` says it starts the embedded cluster only where no client is active."""
    from click.testing import CliRunner

    from mgemm import cli, cluster

    _stand_in(monkeypatch)
    monkeypatch.setattr(cluster, "active_client", lambda option=None: None)
    assert "starting the embedded default cluster" in CliRunner().invoke(cli.main, ["demo"]).stderr
    monkeypatch.setattr(cluster, "active_client", lambda option=None: object())
    assert "starting" not in CliRunner().invoke(cli.main, ["demo"]).output


def test_cli_options_fall_back_to_dask_config_and_name_bad_values(monkeypatch):
    """An unset flag leaves the option to ``dask.config`` (on/off flags too: not passing --tune is
    not --no-tune); a bad value is a usage error (exit 2) naming the option."""
    import dask
    from click.testing import CliRunner

    from mgemm import cli

    calls = _stand_in(monkeypatch)
    with dask.config.set({"mgemm.tune": True, "mgemm.allow_tf32": True, "mgemm.split": "off"}):
        assert CliRunner().invoke(cli.main, ["demo", "--size", "8"]).exit_code == 0
        assert CliRunner().invoke(cli.main, ["demo", "--size", "8", "--no-tune",
                                             "--split", "on"]).exit_code == 0
    first, second = (kw["options"] for _, _, kw in calls["run_case"])
    assert (first["tune"], first["allow_tf32"], first["split"]) == (True, True, "off")
    assert (second["tune"], second["allow_tf32"], second["split"]) == (False, True, "on")
    bad = CliRunner().invoke(cli.main, ["demo", "--block-size", "0"])
    assert bad.exit_code == 2 and "mgemm option block_size" in bad.output, bad.output
    assert len(calls["run_case"]) == 2


def test_cli_commands_check_only_the_options_they_take():
    """A bad setting of an option a command does not take is not its error: ``mgemm plan``
    (no engine, tune or client) plans with a bad ``mgemm.engine``; a command that takes it
    (``demo``) names it, before any work.  ``config.resolve(only=...)`` resolves just those."""
    import dask
    from click.testing import CliRunner

    from mgemm import cli, config

    with dask.config.set({"mgemm.engine": "bogus", "mgemm.tune": "maybe"}):
        ok = CliRunner().invoke(cli.main, ["plan", "--m", "512", "--n", "512", "--k", "512"])
        assert ok.exit_code == 0 and "worker-0" in ok.output, ok.output
        bad = CliRunner().invoke(cli.main, ["demo", "--size", "8"])
        assert bad.exit_code == 2 and "mgemm option engine" in bad.output, bad.output
        assert config.resolve(only=["split", "client"], split="on") == {"split": "on", "client": None}
        assert config.resolve(only=["allow_tf32"], allow_tf32=True) == {"allow_tf32": True}
        with pytest.raises(ValueError, match="mgemm option engine"):
            config.resolve()
    with pytest.raises(TypeError, match="unknown mgemm option.*: engines"):
        config.resolve(only=["engines"])


def test_cli_bfloat16_without_ml_dtypes_is_a_usage_error_before_any_work(monkeypatch):
    """``mgemm demo --dtype bfloat16`` where ml_dtypes is not installed (a CPU install without
    mgemm's CUDA extras): one line naming the package, before any run (a traceback after the
    cluster started); with it (a stand-in module) the case runs."""
    import builtins

    from click.testing import CliRunner

    from mgemm import cli

    real_import = builtins.__import__

    def without_ml_dtypes(name, *args, **kw):
        if name == "ml_dtypes":
            raise ImportError("No module named 'ml_dtypes'")
        return real_import(name, *args, **kw)
    calls = _stand_in(monkeypatch, gpu=True)
    monkeypatch.setattr(builtins, "__import__", without_ml_dtypes)
    out = CliRunner().invoke(cli.main, ["demo", "--size", "8", "--dtype", "bfloat16"])
    assert out.exit_code == 2 and "--dtype bfloat16" in out.output, out.output
    assert "pip install ml_dtypes" in out.output and "Traceback" not in out.output
    assert "session" not in calls
    assert calls["run_case"] == []
    monkeypatch.setattr(builtins, "__import__", real_import)
    monkeypatch.setitem(sys.modules, "ml_dtypes", types.SimpleNamespace(bfloat16=np.float32))
    assert CliRunner().invoke(cli.main, ["demo", "--size", "8", "--dtype", "bfloat16"]).exit_code == 0
    assert [case.dtype for case, _, _ in calls["run_case"]] == ["bfloat16"]


def test_cli_shows_a_warning_as_one_line(capsys):
    """A warning during a command (the embedded CPU cluster asked for UCX, say) is one line of
    what it says, not Python's file, line and source."""
    from click.testing import CliRunner

    from mgemm import cli

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert CliRunner().invoke(cli.main, ["plan", "--m", "64", "--n", "64", "--k", "64"]).exit_code == 0
        assert warnings.showwarning is cli._show_warning
        capsys.readouterr()
        warnings.warn("no GPU visible: the embedded CPU cluster runs over TCP, not ucx", stacklevel=1)
        assert capsys.readouterr().err == ("warning: no GPU visible: the embedded CPU cluster runs "
                                           "over TCP, not ucx\n")


def test_cli_bench_hands_its_flags_to_the_cluster_and_the_runs(monkeypatch, tmp_path):
    """``mgemm bench``'s cluster flags reach the embedded cluster (only those given, and
    --transfer-sync always), its run flags every ``run_case``; the defaults are 5 runs, both
    methods, Dask's layout, stream transfers and no trace."""
    from click.testing import CliRunner

    from mgemm import cli

    calls = _stand_in(monkeypatch)
    assert CliRunner().invoke(cli.main, ["bench"]).exit_code == 0
    assert calls["session"] == (None, {"transfer_sync": "stream"})
    assert [c.name for c, _, _ in calls["run_case"]] == ["float64-2048", "float32-2048"]
    _, methods, kw = calls["run_case"][0]
    assert methods == ["mgemm", "dask"]
    assert (kw["repeat"], kw["layout"], kw["trace"]) == (5, "dask", None)

    calls = _stand_in(monkeypatch)
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"earlier": 1}\n')
    result = CliRunner().invoke(cli.main, [
        "bench", "--protocol", "tcp", "--transfer-limit", "1GiB", "--transfer-sync", "device",
        "--threads-per-worker", "3", "--layout", "cyclic", "--method", "mgemm", "--repeat", "2",
        "--trace", str(trace), "--case", "float32-2048"])
    assert result.exit_code == 0, result.output
    assert calls["session"] == (None, {"protocol": "tcp", "transfer_limit": "1GiB",
                                       "transfer_sync": "device", "threads_per_worker": 3})
    ((case, methods, kw),) = calls["run_case"]
    assert case.name == "float32-2048" and methods == ["mgemm"]
    assert (kw["repeat"], kw["layout"]) == (2, "cyclic")
    assert trace.read_text().splitlines() == ['{"earlier": 1}', '{"case": "float32-2048"}']
    # a method named twice runs once, in the order first given
    calls["run_case"].clear()
    assert CliRunner().invoke(cli.main, ["bench", "--method", "dask", "--method", "mgemm",
                                         "--method", "dask"]).exit_code == 0
    assert calls["run_case"][0][1] == ["dask", "mgemm"]


def test_cli_bench_picks_the_suite_on_gpus_and_refuses_unknown_cases(monkeypatch):
    """GPU workers run --suite's cases for their count (foundation by default); a --case no suite
    has is a usage error before any case runs."""
    from click.testing import CliRunner

    from mgemm import bench, cli

    monkeypatch.setattr(bench, "has_bfloat16", lambda: False)
    calls = _stand_in(monkeypatch, gpu=True, workers=4)
    assert CliRunner().invoke(cli.main, ["bench", "--suite", "scaling"]).exit_code == 0
    assert [c.name for c, _, _ in calls["run_case"]] == [c.name for c in bench.scaling_cases(4)]
    calls = _stand_in(monkeypatch, gpu=True)
    assert CliRunner().invoke(cli.main, ["bench"]).exit_code == 0
    assert [c.name for c, _, _ in calls["run_case"]] == [c.name for c in bench.gpu_cases(2)]
    calls = _stand_in(monkeypatch)
    result = CliRunner().invoke(cli.main, ["bench", "--case", "nope"])
    assert result.exit_code == 2 and "no case named nope on this CPU cluster" in result.output
    assert ", ".join(c.name for c in bench.cpu_cases()) in " ".join(result.output.split())
    assert calls["run_case"] == []  # refused before any case ran
    known = bench.cpu_cases()[0].name  # one unknown name among known ones is refused too
    result = CliRunner().invoke(cli.main, ["bench", "--case", known, "--case", "nope"])
    assert result.exit_code == 2 and "no case named nope" in result.output
    assert calls["run_case"] == []


def test_cli_bench_appends_one_json_row_per_case_and_method_and_prints_the_table(monkeypatch, tmp_path):
    """--json appends each case's rows once (earlier lines kept); the table goes to stdout."""
    from click.testing import CliRunner

    from mgemm import cli

    _stand_in(monkeypatch)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"earlier": 1}\n')
    result = CliRunner().invoke(cli.main, ["bench", "--json", str(rows)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in rows.read_text().splitlines()]
    assert lines[0] == {"earlier": 1}
    assert [(r["case"], r["method"]) for r in lines[1:]] == [
        ("float64-2048", "mgemm"), ("float64-2048", "dask.array.matmul"),
        ("float32-2048", "mgemm"), ("float32-2048", "dask.array.matmul")]
    table = result.stdout.splitlines()
    assert table[0].split()[:2] == ["case", "method"] and len(table) == 5
    assert "2.00" in table[1] and "float32-2048" in table[3]


def test_cli_bench_exit_status_says_whether_mgemm_failed(monkeypatch):
    """Every case runs; the status is 1 naming the cases where mgemm failed, 0 where only
    dask.array.matmul did."""
    from click.testing import CliRunner

    from mgemm import cli

    calls = _stand_in(monkeypatch, rows=_failing_rows("dask", "TypeError: no"))
    ok = CliRunner().invoke(cli.main, ["bench"])
    assert ok.exit_code == 0 and "failed: TypeError: no" in ok.stdout, ok.output
    calls = _stand_in(monkeypatch, rows=_failing_rows("mgemm", "TypeError: no"))
    bad = CliRunner().invoke(cli.main, ["bench"])
    assert bad.exit_code == 1 and "mgemm failed on float32-2048, float64-2048" in bad.output
    assert len(calls["run_case"]) == 2


def test_cli_info_lists_the_workers_in_address_order(monkeypatch):
    """``mgemm info``: the scheduler's protocol and worker count, then per worker (in address
    order) its threads, memory limit in GiB and its GPU (model, SMs, GiB) or "no GPU"; under a
    GPU worker, how it copies NumPy chunks.  Without a client it says it starts the embedded
    cluster first."""
    import contextlib

    from click.testing import CliRunner

    from mgemm import cli

    client = types.SimpleNamespace(scheduler=types.SimpleNamespace(address="ucx://127.0.0.1:8786"))
    monkeypatch.setattr(cli, "_session", lambda given: contextlib.nullcontext(client))
    workers = {"ucx://127.0.0.1:5002": {"nthreads": 2, "memory_limit": 3 * 2**30},
               "ucx://127.0.0.1:5001": {"nthreads": 4, "memory_limit": 2**29}}
    devices = {"ucx://127.0.0.1:5002": {"model": "NVIDIA H200", "sms": 132, "memory": 141 * 2**30,
                                        "copies": {"pinned": True, "threads": 8, "keep": 0.4}},
               "ucx://127.0.0.1:5003": {"model": "NVIDIA H200", "sms": 132, "memory": 141 * 2**30,
                                        "copies": {"pinned": False, "threads": 8, "keep": 0.0}}}
    workers["ucx://127.0.0.1:5003"] = {"nthreads": 1, "memory_limit": 2**30}
    monkeypatch.setattr(cluster, "workers_info", lambda c: workers)
    monkeypatch.setattr(cluster, "worker_devices", lambda c: devices)
    monkeypatch.setattr(cli, "active_client_missing", lambda: True)
    result = CliRunner().invoke(cli.main, ["info"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "starting the embedded default cluster ...",
        "scheduler ucx://127.0.0.1:8786  protocol ucx  workers 3",
        "  ucx://127.0.0.1:5001  threads 4  memory 0.5 GiB  no GPU",
        "  ucx://127.0.0.1:5002  threads 2  memory 3.0 GiB  NVIDIA H200, 132 SMs, 141 GiB",
        "    NumPy chunks: pinned buffers, 8 threads; kept copies up to 0.4 of the GPU",
        "  ucx://127.0.0.1:5003  threads 1  memory 1.0 GiB  NVIDIA H200, 132 SMs, 141 GiB",
        "    NumPy chunks: CuPy's copies; kept copies up to 0 of the GPU"]


# -- what the planner knows of a worker ------------------------------------------------------------

def test_flop_rates_per_dtype():
    """TF32's rate only for float32; CPU float32 (and float16) at twice float64's rate per
    thread, complex at a quarter of its real type's (complex128 was priced as float64,
    though 3.6 × slower), integers well below float64's."""
    assert cluster.gpu_flops({}, "float64", allow_tf32=True) == cluster.H200_FLOPS["float64"]
    assert cluster.gpu_flops({}, "float32", allow_tf32=True) == cluster.H200_FLOPS["tf32"]
    f64 = cluster.cpu_flops(4, "float64")
    assert f64 == 4 * cluster.CPU_FLOPS_PER_THREAD
    assert cluster.cpu_flops(4, "float32") == cluster.cpu_flops(4, "float16") == 2 * f64
    assert cluster.cpu_flops(4, "complex64") == cluster.cpu_flops(4, "float32") / 4
    assert cluster.cpu_flops(4, "complex128") == f64 / 4
    assert cluster.cpu_flops(4, "clongdouble") == cluster.cpu_flops(4, "longdouble") / 4
    assert cluster.cpu_flops(4, "int32") == cluster.cpu_flops(4, "bool") == f64 / 32


def test_device_info_counts_the_unused_pool_as_free(monkeypatch):
    """The GPU of this process (model, SMs, memory, compute capability, first visible device,
    how it copies NumPy chunks); free memory includes what this process's RMM pool holds unused,
    at most the GPU's total."""
    gib = 2**30
    runtime = types.SimpleNamespace(
        getDeviceProperties=lambda i: {"name": b"NVIDIA H200", "multiProcessorCount": 132,
                                       "major": 9, "minor": 0},
        memGetInfo=lambda: (10 * gib, 100 * gib))
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0), runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4")
    monkeypatch.setattr(cluster, "rmm_pool_unused", lambda dask_worker=None: 30 * gib)
    monkeypatch.setattr(staging, "COPY_THREADS", 5)
    assert cluster.device_info() == {"model": "NVIDIA H200", "sms": 132, "memory": 100 * gib,
                                     "free": 40 * gib, "cc": "9.0", "visible": "3",
                                     "copies": {"pinned": staging.settings()[0], "threads": 5,
                                                "keep": staging.settings()[2]}}
    monkeypatch.setattr(cluster, "rmm_pool_unused", lambda dask_worker=None: 200 * gib)
    assert cluster.device_info()["free"] == 100 * gib


def test_rmm_pool_unused_is_never_negative_and_finds_pools_behind_upstream_mr(monkeypatch):
    """A pool behind an adaptor's ``upstream_mr`` counts; a worker holding more than the pool: 0."""
    class Pool:
        def pool_size(self):
            return 100

    adaptor = types.SimpleNamespace(upstream_mr=Pool())  # RMM versions without get_upstream()
    mr = types.SimpleNamespace(PoolMemoryResource=Pool, get_current_device_resource=lambda: adaptor)
    monkeypatch.setitem(sys.modules, "rmm", types.SimpleNamespace(mr=mr))
    assert cluster.rmm_pool_unused() == 100
    worker = types.SimpleNamespace(state=types.SimpleNamespace(nbytes=300))  # spilled past it
    assert cluster.rmm_pool_unused(worker) == 0


def test_describe_workers_from_devices_protocols_and_memory_limits(monkeypatch):
    """A GPU worker plans 0.8 of its free GPU memory at its SM-scaled rate, a CPU worker half its
    memory limit (8 GiB where none is set) at its threads' rate; fetches at the protocol's
    bandwidth; a cluster without workers is an error."""
    info = {"ucx://h:1": {"nthreads": 2, "memory_limit": 0},
            "tcp://h:2": {"nthreads": 4, "memory_limit": 2**30}}
    monkeypatch.setattr(cluster, "worker_devices", lambda client, workers=None: {
        "ucx://h:1": {"free": 10 * 2**30, "sms": 66}, "tcp://h:2": None})
    cpu, gpu = cluster.describe_workers(None, "float32", gpu=True, info=info)
    assert (cpu.name, cpu.kind, cpu.flops, cpu.memory, cpu.bandwidth, cpu.slots) == (
        "tcp://h:2", "cpu", cluster.cpu_flops(4, "float32"), 2**29, 1.5e9, 4)
    assert (gpu.kind, gpu.flops, gpu.memory, gpu.bandwidth) == (
        "gpu", cluster.H200_FLOPS["float32"] / 2, int(10 * 2**30 * 0.8), 150e9)
    on_cpu = cluster.describe_workers(None, "float32", gpu=False, info=info)
    assert [w.kind for w in on_cpu] == ["cpu", "cpu"] and on_cpu[1].memory == 4 << 30
    with pytest.raises(RuntimeError, match="no workers"):
        cluster.describe_workers(None, "float64", gpu=False, info={})
    monkeypatch.setattr(cluster, "device_info", lambda: {"free": 10 * 10**9, "sms": 66})
    (local,) = cluster.local_workers("float32", gpu=True)
    assert (local.kind, local.flops, local.memory) == ("gpu", cluster.H200_FLOPS["float32"] / 2, 8 * 10**9)
    (local,) = cluster.local_workers("float64", gpu=False)
    assert local.kind == "cpu" and local.flops == cluster.cpu_flops(os.cpu_count() or 1, "float64")


def test_local_scheduler_only_on_the_clients_own_loop(client):
    """The in-process scheduler is used in place only from the client's own event loop."""
    assert cluster.local_scheduler(client) is client.cluster.scheduler
    elsewhere = types.SimpleNamespace(cluster=client.cluster, scheduler=client.scheduler,
                                      loop=types.SimpleNamespace(asyncio_loop=object()))
    assert cluster.local_scheduler(elsewhere) is None


class _Hashable(types.SimpleNamespace):
    """A stand-in for a scheduler's task or worker state: hashable, by identity."""
    __hash__ = object.__hash__
    __eq__ = object.__eq__


def test_acquire_replicas_asks_only_for_chunks_held_elsewhere():
    """Prefetch asks a worker only for chunks in memory elsewhere, not held by it; keys that came
    as lists are tuples again; unknown workers and keys are skipped."""
    asked = []
    w1, w2 = _Hashable(name="w1"), _Hashable(name="w2")
    tasks = {"a": _Hashable(state="memory", who_has={w2}),
             "b": _Hashable(state="memory", who_has={w1, w2}),  # held already
             "c": _Hashable(state="released", who_has={w2}),  # being forgotten
             ("d", 0): _Hashable(state="memory", who_has={w2})}
    scheduler = types.SimpleNamespace(
        workers={"w1": w1, "w2": w2}, tasks=tasks,
        request_acquire_replicas=lambda addr, keys, stimulus_id: asked.append((addr, keys)))
    count = cluster.acquire_replicas(scheduler, {"w1": ["a", "b", "c", ["d", 0], "nope"],
                                                 "gone": ["a"]})
    assert count == 2 and asked == [("w1", ["a", ("d", 0)])]


def test_client_arguments_are_checked(monkeypatch):
    """A closing client is refused like a closed one; TLS addresses need a port as TCP ones do;
    UCX addresses need distributed-ucxx."""
    with pytest.raises(ValueError, match="client given is closing"):
        cluster.active_client(types.SimpleNamespace(status="closing", asynchronous=False))
    with pytest.raises(ValueError, match="missing port"):
        cluster._check_address("tls://10.0.0.1")
    monkeypatch.setattr(cluster, "has_ucx", lambda: False)
    with pytest.raises(ValueError, match="distributed-ucxx"):
        cluster._check_address("ucx://10.0.0.1:8786")
    cluster._check_address("tcp://10.0.0.1:8786")


def test_an_address_client_is_not_made_the_default():
    """``client="tcp://..."`` makes a client for mgemm's own use: code that asks Dask for the
    default client afterwards does not get it."""
    from concurrent.futures import ThreadPoolExecutor

    from distributed import LocalCluster, get_client

    def default_client():
        try:
            return get_client()
        except ValueError:
            return None

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as local:
        made = cluster.active_client(local.scheduler_address)
        try:  # asked in a new thread: not the client a ``with Client()`` here made current
            with ThreadPoolExecutor(1) as pool:
                assert pool.submit(default_client).result() is not made
        finally:
            made.close()


def test_auto_rmm_pool_is_at_most_16_gib_in_256_byte_units(monkeypatch):
    """The pool: half the GPU, at most 16 GiB (as README says), rounded down to 256 bytes."""
    fake = types.ModuleType("dask_cuda.utils")
    fake.get_device_total_memory = lambda index=0: {0: 141 * 10**9, 1: 10**9 + 1000}[index]
    monkeypatch.setitem(sys.modules, "dask_cuda.utils", fake)
    monkeypatch.setitem(sys.modules, "dask_cuda", types.ModuleType("dask_cuda"))
    assert cluster.auto_rmm_pool_size(0) == 16 * 2**30  # README: "at most 16 GiB"
    assert cluster.auto_rmm_pool_size(1) == (10**9 + 1000) // 2 // 256 * 256


# -- the embedded default cluster, with stand-ins for the cluster classes ---------------------------

def _stand_in_clusters(monkeypatch, *, gpus=0, ucx=False, rmm=True, cpus=8):
    """``start_default_cluster`` with stand-ins for LocalCUDACluster, LocalCluster, Client and the
    plugins; returns what it made: the cluster class, its arguments, the Dask settings in force
    while it was made, and the plugins installed."""
    import dask
    import distributed

    made = {"plugins": []}

    def cluster_class(kind):
        def make(**kwargs):
            loop = kwargs.pop("loop")  # the loop whose thread blocks SIGINT, running
            made.update(kind=kind, kwargs=kwargs, loop=loop.asyncio_loop.is_running(),
                        stealing=dask.config.get("distributed.scheduler.work-stealing"),
                        limit=dask.config.get("distributed.worker.transfer.message-bytes-limit"))
            return kind
        return make

    cuda = types.ModuleType("dask_cuda")
    cuda.LocalCUDACluster = cluster_class("cuda")
    monkeypatch.setitem(sys.modules, "dask_cuda", cuda)
    monkeypatch.setitem(sys.modules, "rmm", types.ModuleType("rmm") if rmm else None)
    monkeypatch.setattr(distributed, "LocalCluster", cluster_class("local"))
    monkeypatch.setattr(distributed, "Client", lambda c: types.SimpleNamespace(cluster=c))
    monkeypatch.setattr(cluster, "gpus_visible", lambda: gpus)
    monkeypatch.setattr(cluster, "has_ucx", lambda: ucx)
    monkeypatch.setattr(cluster, "auto_rmm_pool_size", lambda device_index=0: 12345 * 256)
    monkeypatch.setattr(cluster, "install_placement", lambda c: made["plugins"].append("placement"))
    monkeypatch.setattr(cluster, "install_stream_scoped_transfers",
                        lambda c: made["plugins"].append("stream"))
    monkeypatch.setattr(cluster.os, "cpu_count", lambda: cpus)
    monkeypatch.setenv("UCX_WARN_UNUSED_ENV_VARS", "n")
    return made


def test_embedded_gpu_cluster_defaults(monkeypatch):
    """GPUs and distributed-ucxx: a LocalCUDACluster over UCX with NVLink, on 127.0.0.1 only (the
    dashboard too), two threads a worker, the RMM pool sized by ``auto_rmm_pool_size``, 512 MiB
    messages, no work stealing; the placement and stream-scoped transfer plugins installed."""
    made = _stand_in_clusters(monkeypatch, gpus=2, ucx=True)
    assert cluster.start_default_cluster().cluster == "cuda"
    assert made["kwargs"] == {"protocol": "ucx", "host": "127.0.0.1",
                              "dashboard_address": "127.0.0.1:0", "threads_per_worker": 2,
                              "enable_nvlink": True, "enable_tcp_over_ucx": True,
                              "rmm_pool_size": 12345 * 256, "preload": ["mgemm.worker_setup"]}
    assert (made["stealing"], made["limit"], made["plugins"]) == (False, "512MiB", ["placement", "stream"])
    assert made["loop"] is True


def test_embedded_gpu_cluster_follows_its_arguments(monkeypatch):
    """--workers, --protocol, the RMM pool size (or none, or no RMM), --transfer-limit,
    --threads-per-worker and --transfer-sync reach the LocalCUDACluster and the plugins."""
    made = _stand_in_clusters(monkeypatch, gpus=4, ucx=True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cluster.start_default_cluster(n_workers=2, protocol="tcp", rmm_pool="4GiB",
                                  transfer_limit="1GiB", threads_per_worker=3)
    assert made["kwargs"] == {"protocol": "tcp", "host": "127.0.0.1",
                              "dashboard_address": "127.0.0.1:0", "threads_per_worker": 3,
                              "CUDA_VISIBLE_DEVICES": [0, 1], "rmm_pool_size": "4GiB",
                              "preload": ["mgemm.worker_setup"]}
    assert (made["limit"], made["plugins"]) == ("1GiB", ["placement"])  # no UCX: no stream plugin

    # --workers takes the first of the GPUs the user made visible, and no more than there are
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5,7")
    made = _stand_in_clusters(monkeypatch, gpus=3)
    cluster.start_default_cluster(n_workers=2)
    assert made["kwargs"]["CUDA_VISIBLE_DEVICES"] == ["2", "5"]
    with pytest.raises(ValueError, match="4 workers asked of 3 GPU"):
        cluster.start_default_cluster(n_workers=4)

    made = _stand_in_clusters(monkeypatch, gpus=1, ucx=True)
    cluster.start_default_cluster(transfer_sync="device", rmm_pool=None)
    assert made["kwargs"]["protocol"] == "ucx" and "rmm_pool_size" not in made["kwargs"]
    assert made["plugins"] == ["placement"]

    made = _stand_in_clusters(monkeypatch, gpus=1, ucx=False, rmm=False)
    cluster.start_default_cluster()
    assert made["kwargs"]["protocol"] == "tcp" and "enable_nvlink" not in made["kwargs"]
    assert "rmm_pool_size" not in made["kwargs"]


@pytest.mark.parametrize("cpus, workers, threads", [(8, 4, 2), (2, 2, 1), (1, 2, 1), (32, 4, 8)])
def test_embedded_cpu_cluster_shares_out_the_cpus(monkeypatch, cpus, workers, threads):
    """No GPU: a LocalCluster of 2 to 4 worker processes with the CPUs shared out, on 127.0.0.1
    only, Dask's own message limit, no work stealing; --protocol tcp is no reason to warn."""
    import dask

    dask_limit = dask.config.get("distributed.worker.transfer.message-bytes-limit")
    made = _stand_in_clusters(monkeypatch, cpus=cpus)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cluster.start_default_cluster(protocol="tcp")
    assert made["kwargs"] == {"n_workers": workers, "threads_per_worker": threads, "processes": True,
                              "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0",
                              "preload": ["mgemm.worker_setup"]}
    assert (made["stealing"], made["limit"], made["plugins"]) == (False, dask_limit, ["placement"])


def test_session_closes_only_the_cluster_it_started(monkeypatch):
    """``session``: a given client is left open; an embedded cluster it started is closed after."""
    closed = []
    given = types.SimpleNamespace(cluster=None, close=lambda: closed.append("given"))
    monkeypatch.setattr(cluster, "active_client", lambda option=None: option)
    with cluster.session(given) as c:
        assert c is given
    assert closed == []
    started = types.SimpleNamespace(cluster=types.SimpleNamespace(close=lambda: closed.append("cluster")),
                                    close=lambda: closed.append("client"))
    monkeypatch.setattr(cluster, "start_default_cluster", lambda **kw: closed.append(kw) or started)
    with cluster.session(None, n_workers=3) as c:
        assert c is started
    assert closed == [{"n_workers": 3}, "client", "cluster"]


def test_placement_plugin_takes_block_tasks_off_stealing_when_they_start():
    """A block task going to processing leaves work stealing's candidates and unknown durations;
    other transitions and other tasks are left alone."""
    removed = []
    ts = _Hashable(prefix=types.SimpleNamespace(name="mgemm-block-x"))
    other = _Hashable(prefix=types.SimpleNamespace(name="mgemm-block-x"))
    pending = {ts, other}
    stealing = types.SimpleNamespace(remove_key_from_stealable=removed.append,
                                     unknown_durations={"mgemm-block-x": pending})
    plugin = cluster.KeepPlacement()
    plugin.scheduler = types.SimpleNamespace(extensions={"stealing": stealing},
                                             tasks={("mgemm-block-x", 0, 0): ts, ("add-y", 0): other})
    plugin.transition(("mgemm-block-x", 0, 0), "waiting", "memory")
    plugin.transition(("add-y", 0), "waiting", "processing")
    assert removed == [] and pending == {ts, other}
    plugin.transition(("mgemm-block-x", 0, 0), "waiting", "processing")
    assert removed == [ts] and pending == {other}


def test_a_second_client_process_keeps_the_schedulers_placement_plugin(monkeypatch):
    """A client in another process (``_installed`` empty there) registers the plugins again: the
    scheduler keeps the placement plugin it has, with the placements other clients sent it."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as lc, Client(lc) as client:
        monkeypatch.setattr(cluster, "_installed", set())
        assert cluster.install_placement(client)
        first = lc.scheduler.plugins[cluster.KeepPlacement.name]
        first.remember({("mgemm-block-x", 0, 0): ("tcp://127.0.0.1:1", -1)})
        monkeypatch.setattr(cluster, "_installed", set())
        assert cluster.install_placement(client)
        assert lc.scheduler.plugins[cluster.KeepPlacement.name] is first
        assert ("mgemm-block-x", 0, 0) in first.planned


def test_install_placement_once_per_scheduler_and_warns_where_it_cannot(monkeypatch):
    """Plugins are registered once per scheduler id; a scheduler refusing them gives a warning
    and False."""
    monkeypatch.setattr(cluster, "_installed", set())
    registered = []
    ok = types.SimpleNamespace(register_plugin=lambda plugin, name: registered.append(name),
                               scheduler_info=lambda n_workers: {"id": "scheduler-1"})
    assert cluster.install_placement(ok) and cluster.install_placement(ok)
    assert registered == [cluster.KeepExtensionDtypes.name, cluster.ReleaseCopies.name,
                          cluster.KeepPlacement.name]

    def refuse(plugin, name):
        raise RuntimeError("no mgemm on that scheduler")

    remote = types.SimpleNamespace(register_plugin=refuse,
                                   scheduler_info=lambda n_workers: {"id": "scheduler-2"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cluster.install_placement(remote) is False
    assert any("could not install its placement plugin" in str(w.message) for w in caught)
    assert any("could not install its copy plugin" in str(w.message) for w in caught)


@pytest.mark.parametrize("direct", [False, True])
def test_scatter_sends_a_left_workers_chunks_to_another_at_once(direct):
    """Chunks placed on a worker that has left go to a worker of the cluster, through the
    scheduler and straight to the workers (``Client(direct_to_workers=True)`` waited 30 s for
    the named worker, then raised ``TimeoutError``)."""
    import time

    from distributed import Client, LocalCluster

    x = np.arange(48.0).reshape(6, 8)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as lc, Client(lc, direct_to_workers=direct) as client:
        alive = sorted(client.nthreads())[0]
        gone = "tcp://127.0.0.1:9"  # no worker of this cluster
        start = time.monotonic()
        arr = cluster.scatter(client, x, ((3, 3), (4, 4)), "mgemm-test-scatter",
                                    lambda index: gone if index[0] else alive)
        assert time.monotonic() - start < 5
        held = client.who_has(list(arr.dask.layers[arr.name].values()))
        assert {w for ws in held.values() for w in ws} <= set(client.nthreads())
        assert [w for (_, i, _), ws in held.items() for w in ws if i == 0] == [alive, alive]
        np.testing.assert_array_equal(arr.compute(), x)


def test_a_hung_worker_is_a_timeout_naming_the_workers_and_an_error_line(monkeypatch):
    """Workers that do not answer the device query within ``DEVICE_QUERY_TIMEOUT`` are a
    ``TimeoutError`` naming them (``mgemm info`` waited with no output for a stopped worker), and
    a command's cluster that stops answering is one error line, not a traceback."""
    import contextlib
    import time

    import click
    from distributed import Client, LocalCluster

    from mgemm import cli

    def hung():
        time.sleep(3)
    monkeypatch.setattr(cluster, "device_info", hung)
    monkeypatch.setattr(cluster, "DEVICE_QUERY_TIMEOUT", 0.5)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as lc, Client(lc) as client:
        address = next(iter(client.nthreads()))
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=f"within 0.5 s: one of {address} is hung"):
            cluster.worker_devices(client)
        assert time.monotonic() - start < 2.5

    @contextlib.contextmanager
    def session(given, **start):
        yield types.SimpleNamespace(as_current=contextlib.nullcontext)
    monkeypatch.setattr(cluster, "session", session)
    from distributed.comm.core import CommClosedError
    for lost in (TimeoutError("no answer"), CommClosedError("no answer")):
        with pytest.raises(click.ClickException, match="the cluster stopped answering: no answer"):
            with cli._session(None):
                raise lost


def test_the_device_cache_keeps_no_closed_client_alive():
    """``worker_devices`` answers from its cache for the same client and workers, and holds the
    client weakly: a closed client and its cluster are collected (an lru_cache kept 16 of them,
    each with its whole cluster)."""
    import gc
    import weakref

    from distributed import Client, LocalCluster

    refs = []
    for _ in range(2):
        lc = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
        client = Client(lc)
        first = cluster.worker_devices(client)
        assert cluster.worker_devices(client) is first and list(first) == list(client.nthreads())
        refs.append((weakref.ref(client), weakref.ref(lc)))
        client.close()
        lc.close()
        del client, lc, first
    gc.collect()
    assert [(c(), lc()) for c, lc in refs] == [(None, None)] * 2


def test_the_embedded_cluster_closes_quietly(monkeypatch):
    """``session``'s own cluster closes with Dask's logging silenced (under load it logged workers
    killed and heartbeats that missed the scheduler), and the logging level is as it was after."""
    import logging

    from distributed import Client

    logger = logging.getLogger("distributed")
    level, seen = logger.level, []
    close = Client.close

    def watched(self, *args, **kw):
        seen.append(logger.level)
        return close(self, *args, **kw)
    monkeypatch.setattr(Client, "close", watched)
    monkeypatch.setattr(cluster, "active_client", lambda given=None: None)
    with cluster.session(n_workers=1, threads_per_worker=1) as client:
        assert client.nthreads()
    assert seen[0] == logging.CRITICAL and logger.level == level
