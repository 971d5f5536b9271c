"""The embedded cluster's worker plugin that scopes UCX transfer synchronization to a stream."""

from __future__ import annotations

import sys
import types

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
        workers = client.scheduler_info(n_workers=-1)["workers"]
        assert len(workers) == 2 and {w["nthreads"] for w in workers.values()} == {1}
        ident, who = cluster.scheduler_snapshot(client)
        assert set(ident["workers"]) == set(workers) and who == {}
    finally:
        lc = client.cluster
        client.close()
        lc.close()
