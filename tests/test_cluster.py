"""The embedded cluster's worker plugin that scopes UCX transfer synchronization to a stream."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from mgemm import cluster


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


def test_threads_per_worker_reaches_the_workers():
    client = cluster.start_default_cluster(n_workers=2, threads_per_worker=1)
    try:
        workers = cluster.workers_info(client)
        assert len(workers) == 2 and {w["nthreads"] for w in workers.values()} == {1}
        ident, who = cluster.scheduler_snapshot(client)
        assert set(ident["workers"]) == set(workers) and who == {}
    finally:
        lc = client.cluster
        client.close()
        lc.close()


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
    got = _block_task("numpy", (1, 1, 1), None, 1.0, 0.0, "bfloat16", False, "off", False, a.view("V2"), b.view("V2"))
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


@pytest.mark.parametrize("address, says", [
    ("foo", "missing port number"), ("tcp://127.0.0.1:abc", "invalid literal"),
    ("bogus://h:1", "unknown address scheme 'bogus'")])
def test_malformed_scheduler_addresses_are_refused_at_once(address, says):
    """An address no client could use is refused before a ``Client`` is made (one that fails in
    its constructor waits up to a minute to close when collected): by the CLI as a one-line
    error, by the API as a ``ValueError``."""
    import time

    from click.testing import CliRunner

    import mgemm
    from mgemm.cli import main

    start = time.perf_counter()
    result = CliRunner().invoke(main, ["info", "--client", address])
    assert result.exit_code == 1, result.output
    assert f"cannot reach the scheduler {address}" in result.output and says in result.output
    with pytest.raises(ValueError, match=says):
        mgemm.matmul(np.ones((2, 2)), np.ones((2, 2)), client=address)
    assert time.perf_counter() - start < 10


def test_bench_refuses_a_transfer_limit_that_is_no_size(monkeypatch):
    from click.testing import CliRunner

    from mgemm import cli

    monkeypatch.setattr(cli, "_session", lambda *a, **k: pytest.fail("a cluster was started"))
    result = CliRunner().invoke(cli.main, ["bench", "--transfer-limit", "abc"])
    assert result.exit_code == 2, result.output
    assert "'abc' is not a size such as 1GiB" in result.output


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
