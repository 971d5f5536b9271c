"""mgemm on a real multi-process cluster: a `dask scheduler` and two `dask worker` processes on
127.0.0.1, each a separate process as on separate machines; then a lost worker; then the cluster/
recipe's own scripts over TLS."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from distributed import Client, Security, wait

import mgemm
from conftest import assert_close

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 30  # seconds for the scheduler file and workers to appear on a busy 2-core box


def _env(**extra: str) -> dict:
    """The processes import mgemm from this checkout (tasks and the scheduler plugin need it)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (dask shuts down cleanly), then SIGKILL to the process group this test started
    for it, so that no nanny's child outlives the test."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait_for_file(path: Path, procs: list, logs: Path) -> dict:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if path.exists():
            with contextlib.suppress(ValueError):  # written but not yet complete
                return json.loads(path.read_text())
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            break
        time.sleep(0.1)
    raise RuntimeError(f"no scheduler file {path}:\n{_logs(logs)}")


def _logs(directory: Path) -> str:
    files = sorted(directory.glob("*.log"))
    return "\n".join(f"--- {f.name}\n{f.read_text()[-3000:]}" for f in files)


class Processes:
    """A scheduler and named workers, each a subprocess with its log in ``tmp/logs``."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, cmd: list[str], **env: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        proc = subprocess.Popen(cmd, cwd=self.tmp, env=_env(**env), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[name] = proc
        return proc

    def stop_all(self) -> None:
        for proc in reversed(list(self.procs.values())):  # workers first, then the scheduler
            _stop(proc)


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


@pytest.fixture
def cluster(processes, tmp_path):
    """``dask scheduler`` + two single-threaded ``dask worker``s (no nanny: the worker *is* the
    process, so killing it loses the worker), all on 127.0.0.1; yields (client, {address: proc})."""
    sched_file = tmp_path / "scheduler.json"
    processes.start("scheduler", [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", "--scheduler-file",
                                  str(sched_file)])
    _wait_for_file(sched_file, list(processes.procs.values()), processes.logs)
    for i in range(2):
        processes.start(f"worker{i}", [
            sys.executable, "-m", "dask", "worker", "--scheduler-file", str(sched_file),
            "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard", "--no-nanny",
            "--name", f"worker{i}", "--local-directory", str(tmp_path / f"worker{i}")])
    client = Client(scheduler_file=str(sched_file), timeout=START_TIMEOUT)
    try:
        try:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
        except TimeoutError:
            raise RuntimeError(f"workers did not start:\n{_logs(processes.logs)}") from None
        info = mgemm.cluster.workers_info(client)
        by_address = {addr: processes.procs[w["name"]] for addr, w in info.items()}
        yield client, by_address
    finally:
        client.close()


def _operands(rng):
    """600×500 @ 500×700, ragged and mismatched K chunks, persisted on the workers."""
    x, y = rng.standard_normal((600, 500)), rng.standard_normal((500, 700))
    a = da.from_array(x, chunks=((250, 200, 150), (120, 260, 120)))
    b = da.from_array(y, chunks=((200, 300), (300, 250, 150)))
    return x, y, a, b


def _planned_owners(c: da.Array) -> set[str]:
    """The workers the plan put block tasks on, read from the graph's placement annotations."""
    layer = c.__dask_graph__().layers[c.name]
    workers = (layer.annotations or {}).get("workers")
    lookup = workers if callable(workers) else (workers or {}).get
    return {w for key in layer for w in (lookup(key) or [])}


def test_matmul_through_separate_processes(cluster, rng):
    client, workers = cluster
    x, y, a, b = _operands(rng)
    a, b = client.persist([a, b])
    c = mgemm.matmul(a, b, block_size=150, client=client)
    assert c.name.startswith("mgemm-block-") and c.shape == (600, 700)
    assert _planned_owners(c) == set(workers)

    c = client.persist(c)
    wait(c)
    holders = client.who_has(c)
    assert all(str(key[0]).startswith("mgemm-block-") for key in holders)
    computed_on = {w for ws in holders.values() for w in ws}
    assert computed_on == set(workers), f"blocks only on {computed_on} of {set(workers)}"
    assert_close(client.compute(c).result(), x @ y, np.float64)


def test_demo_on_a_scheduler_address(cluster):
    """``mgemm demo --client ADDRESS``, as cluster/README.md runs it: the address gives a client
    that is not the default one, and the demo's products, checks and waits run on it."""
    client, workers = cluster
    done = subprocess.run([sys.executable, "-m", "mgemm.cli", "demo", "--client",
                           client.scheduler.address, "--size", "96", "--repeat", "1"],
                          env=_env(), capture_output=True, text=True, timeout=START_TIMEOUT * 4)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checked against float64" in done.stdout, done.stdout + done.stderr


def test_fused_blocks_keep_their_placement_on_a_separate_scheduler(cluster, rng):
    """The placement of block tasks that Dask fuses with later operations reaches a scheduler in
    another process through the plugin's handler before the graph does."""
    from mgemm.graph import BLOCK_PREFIX, placement_of

    client, workers = cluster
    x, y, a, b = _operands(rng)
    a, b = client.persist([a, b])
    c = mgemm.matmul(a, b, block_size=150, split="off", client=client)
    planned = {key[1:]: worker for key, (worker, _) in placement_of(c).items()}
    assert set(planned.values()) == set(workers)
    chained = client.persist(da.tanh(c) * 2)
    wait(chained)

    def restrictions(dask_scheduler):
        return {key: sorted(ts.worker_restrictions or ())
                for key, ts in dask_scheduler.tasks.items()
                if isinstance(key, tuple) and str(key[0]).startswith(BLOCK_PREFIX)}

    fused = client.run_on_scheduler(restrictions)
    assert len(fused) == len(planned)
    assert all(ws == [planned[tuple(key[1:])]] for key, ws in fused.items()), fused
    assert_close(client.compute(chained).result(), np.tanh(x @ y) * 2, np.float64)


def test_lost_worker_blocks_run_elsewhere(cluster, rng):
    """Plan with both workers alive, kill one, then compute: the loose restrictions let its
    blocks (and its share of the persisted inputs) be recomputed on the survivor."""
    client, workers = cluster
    x, y, a, b = _operands(rng)
    a, b = client.persist([a, b])
    client.wait_for_workers(2)
    c = mgemm.matmul(a, b, block_size=150, client=client)
    owners = _planned_owners(c)
    assert owners == set(workers), f"the plan used {owners}, not both workers"
    victim = sorted(owners)[0]

    workers[victim].kill()
    workers[victim].wait()
    deadline = time.monotonic() + START_TIMEOUT
    while victim in client.nthreads():
        assert time.monotonic() < deadline, "the scheduler did not notice the lost worker"
        time.sleep(0.05)

    assert_close(client.compute(c).result(timeout=60), x @ y, np.float64)
    (survivor,) = client.nthreads()
    assert survivor != victim


def _lose_a_worker_after_the_first_scatter(client, workers, monkeypatch) -> list:
    """``mgemm.cluster.scatter`` patched to kill the worker that received the first operand's
    chunks (before the others are sent) and wait until the scheduler knows; returns the list
    that then holds that worker's address."""
    scatter, lost = mgemm.cluster.scatter, []

    def scatter_then_lose_a_worker(*args, **kw):
        out = scatter(*args, **kw)
        if not lost:
            held = client.who_has(list(out.dask.layers[out.name].values()))
            lost.append(sorted({w for ws in held.values() for w in ws})[0])
            workers[lost[0]].kill()
            workers[lost[0]].wait()
            deadline = time.monotonic() + START_TIMEOUT
            while lost[0] in client.nthreads():
                assert time.monotonic() < deadline, "the scheduler did not notice the lost worker"
                time.sleep(0.05)
        return out

    monkeypatch.setattr(mgemm.cluster, "scatter", scatter_then_lose_a_worker)
    return lost


def _assert_mgemm_keys_released(client) -> None:
    """No mgemm key stays on the workers (releases reach the scheduler a moment after the
    client drops its futures: waited for, up to 10 s)."""
    import gc

    gc.collect()
    deadline = time.monotonic() + 10
    while held := [key for key in client.who_has() if "mgemm" in str(key)]:
        assert time.monotonic() < deadline, held
        time.sleep(0.05)


def test_scattered_operands_of_a_lost_worker_are_sent_again(cluster, rng, monkeypatch):
    """NumPy operands are scattered to the workers, with no lineage to recompute them from: a
    worker lost after A's chunks reached it (before B's are sent) costs those chunks, and the
    product is planned and scattered again over the worker left; nothing stays behind."""
    client, workers = cluster
    x, y = rng.standard_normal((600, 500)), rng.standard_normal((500, 700))
    lost = _lose_a_worker_after_the_first_scatter(client, workers, monkeypatch)
    got = mgemm.matmul(x, y, block_size=150, client=client)
    assert_close(got, x @ y, np.float64)
    assert lost and list(client.nthreads()) != lost
    _assert_mgemm_keys_released(client)


def test_scattered_operands_lost_past_the_retries_say_so_and_leave_nothing(cluster, rng,
                                                                          monkeypatch):
    """No retry left (``LOST_INPUT_RETRIES`` 0): a ``RuntimeError`` that says the inputs were
    lost with their worker, and no scattered chunk stays on the workers left."""
    client, workers = cluster
    x, y = rng.standard_normal((600, 500)), rng.standard_normal((500, 700))
    _lose_a_worker_after_the_first_scatter(client, workers, monkeypatch)
    monkeypatch.setattr(mgemm.api, "LOST_INPUT_RETRIES", 0)
    with pytest.raises(RuntimeError, match="inputs .scattered from this process. were lost in "
                                           "each of 1 attempts"):
        mgemm.matmul(x, y, block_size=150, client=client)
    _assert_mgemm_keys_released(client)


@pytest.mark.skipif(shutil.which("openssl") is None or shutil.which("bash") is None,
                    reason="needs openssl and bash")
def test_cluster_scripts_over_tls(processes, tmp_path, rng):
    """cluster/make-certs.sh, start-scheduler.sh and start-workers.sh (CPU workers) as the
    README runs them, with TLS; a client with the client certificate multiplies through them."""
    certs = tmp_path / "certs"
    subprocess.run(["bash", str(ROOT / "cluster" / "make-certs.sh"), str(certs)], check=True,
                   capture_output=True, timeout=60)
    sched_file = tmp_path / "scheduler.json"
    env = dict(MGEMM_PROTOCOL="tls", MGEMM_TLS_DIR=str(certs), MGEMM_SCHEDULER_PORT="0",
               MGEMM_SCHEDULER_FILE=str(sched_file), MGEMM_PYTHON=sys.executable)
    processes.start("scheduler", ["bash", str(ROOT / "cluster" / "start-scheduler.sh")], **env)
    info = _wait_for_file(sched_file, list(processes.procs.values()), processes.logs)
    assert info["address"].startswith("tls://127.0.0.1:")
    processes.start("workers", ["bash", str(ROOT / "cluster" / "start-workers.sh"),
                                "--local-directory", str(tmp_path / "workers")],
                    MGEMM_WORKER_KIND="cpu", MGEMM_NWORKERS="2", **env)

    security = Security(tls_ca_file=str(certs / "ca.pem"),
                        tls_client_cert=str(certs / "client.pem"),
                        tls_client_key=str(certs / "client-key.pem"), require_encryption=True)
    with Client(info["address"], security=security, timeout=START_TIMEOUT) as client:
        try:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
        except TimeoutError:
            raise RuntimeError(f"workers did not start:\n{_logs(processes.logs)}") from None
        assert all(a.startswith("tls://127.0.0.1:")
                   for a in client.nthreads())
        x, y, a, b = _operands(rng)
        c = mgemm.matmul(a, b, block_size=300, client=client)
        assert_close(client.compute(c).result(), x @ y, np.float64)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("smi, pool", [("exit 6", "0.5"), ("echo 143771", "16GiB"),
                                       ("echo 24576", "0.5")])
def test_worker_script_rmm_pool_from_nvidia_smi(tmp_path, smi, pool):
    """start-workers.sh over UCX sizes the RMM pool from nvidia-smi, and falls back to half the
    GPU when nvidia-smi fails (the script runs under ``set -euo pipefail``)."""
    (tmp_path / "nvidia-smi").write_text(f"#!/bin/sh\n{smi}\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", MGEMM_PYTHON="echo",
               MGEMM_PROTOCOL="ucx")
    env.pop("MGEMM_RMM_POOL_SIZE", None)
    done = subprocess.run(["bash", str(ROOT / "cluster" / "start-workers.sh"), "ucx://h:8786"],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert f"--rmm-pool-size {pool} " in done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_worker_script_without_dask_cuda_says_what_to_do(tmp_path):
    """start-workers.sh for GPU workers (the default kind) with a Python that has no dask-cuda
    (a stand-in that fails every import): one line naming the extras and MGEMM_WORKER_KIND=cpu,
    exit 2, not dask's "No such command 'cuda'"."""
    (tmp_path / "py").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "py").chmod(0o755)
    env = dict(os.environ, MGEMM_PYTHON=str(tmp_path / "py"))
    env.pop("MGEMM_WORKER_KIND", None)
    done = subprocess.run(["bash", str(ROOT / "cluster" / "start-workers.sh"), "tcp://h:8786"],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "has no dask-cuda" in done.stderr, done.stderr
    assert "MGEMM_WORKER_KIND=cpu" in done.stderr


def _first_worker_of(pid: int, timeout: float = 30) -> None:
    """Wait until ``pid`` has a child running multiprocessing's ``spawn_main`` (a worker)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _workers_of(pid):
            return
        time.sleep(0.005)
    raise AssertionError(f"no worker process of {pid} within {timeout} s")


_INTERRUPTED_START = """
import os, signal, sys, threading, time

def interrupt(workers_of):
    while not workers_of(os.getpid()):  # a worker process's Python is up and importing
        time.sleep(0.005)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)

if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    from test_processes import _workers_of
    from mgemm import cluster
    threading.Thread(target=interrupt, args=(_workers_of,), daemon=True).start()
    try:
        cluster.start_default_cluster(n_workers=2)
        print("started")
    except KeyboardInterrupt:
        print("interrupted")
    time.sleep(1.5)
    print("workers left", len(_workers_of(os.getpid())), flush=True)
"""


def _workers_of(pid: int) -> list[str]:
    """The children of ``pid`` (any of its threads') running multiprocessing's ``spawn_main``."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                        found.append(child)
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_an_interrupted_start_leaves_no_worker_process(tmp_path, sigint_as_from_a_terminal):
    """A Ctrl-C while the embedded cluster starts, in a Python session that goes on (not a command
    that exits): the worker processes whose start it cut short end with it (they stayed until the
    session ended), and nothing is printed for them (no traceback of a nanny's failed start)."""
    script = tmp_path / "interrupted_start.py"
    script.write_text(_INTERRUPTED_START)
    done = subprocess.run([sys.executable, str(script), str(ROOT / "tests")], capture_output=True,
                          text=True, env=_env(), cwd=tmp_path, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "interrupted" in done.stdout, out
    assert "workers left 0" in done.stdout, out
    assert "Traceback" not in out and "Task exception" not in out and "WARNING" not in out, out


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("when", ["as_the_cluster_starts", "once_it_runs"])
def test_ctrl_c_stops_the_demo_whenever_it_comes(when, sigint_as_from_a_terminal):
    """A terminal's Ctrl-C (SIGINT to the command's process group) stops ``mgemm demo`` at once,
    with "Aborted!" and no traceback: while its embedded cluster starts (this process ignored
    SIGINT then, so that the workers it started inherited ignoring it, and the demo ran on to its
    end; later each starting worker printed a ``KeyboardInterrupt`` traceback, and distributed's
    close at exit an ``AssertionError``) and once it runs (the worker processes block SIGINT from
    their start)."""
    proc = subprocess.Popen([sys.executable, "-m", "mgemm.cli", "demo", "--size", "2048",
                             "--repeat", "200"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_env(), start_new_session=True, cwd=ROOT)
    lines: list[str] = []
    try:
        sent = None
        for line in proc.stdout:
            lines.append(line)
            if sent is None and ("starting the embedded" in line if when == "as_the_cluster_starts"
                                 else "run 2/200" in line):
                if when == "as_the_cluster_starts":  # a worker process's Python is up and
                    _first_worker_of(proc.pid)  # importing (about a second), far from done
                    time.sleep(0.2)
                os.killpg(proc.pid, signal.SIGINT)
                sent = time.monotonic()
        proc.wait(timeout=60)
        assert sent is not None, "".join(lines)
        assert proc.returncode == 1 and time.monotonic() - sent < 30, "".join(lines)
        assert "Aborted!" in "".join(lines) and not any("run 200/200" in x for x in lines)
        assert not any("KeyboardInterrupt" in x for x in lines), "".join(lines)
        if when == "as_the_cluster_starts":  # (once it runs, distributed's sync may log an error)
            assert not any("Traceback" in x for x in lines), "".join(lines)
    finally:
        _stop(proc)
