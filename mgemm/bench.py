"""Measuring mgemm against dask.array.matmul on one cluster: inputs, timing, checks, cases.

Used by ``mgemm demo`` and ``mgemm bench``.  Inputs are random (never zeros), generated on the
workers and persisted before timing.  A timed run is: submit, ``wait``, then a device synchronize
on every worker (a CuPy call returns before its kernel finishes), all inside the host clock.
Correctness is checked against a float64 reference on sampled rows and columns.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import math
import os
import platform
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import dask
import dask.array as da
import numpy as np

#: Relative error bound ‖out − ref‖ / ‖ref‖ per result dtype, against a float64 reference.
TOLERANCE = {"float64": 1e-12, "complex128": 1e-12, "float32": 1e-5, "complex64": 1e-5,
             "tf32": 5e-3, "float16": 1e-2, "bfloat16": 5e-2}


def tolerance(dtype: Any, allow_tf32: bool = False) -> float:
    name = str(np.dtype(dtype)) if str(dtype) != "bfloat16" else "bfloat16"
    if name == "float32" and allow_tf32:
        name = "tf32"
    return TOLERANCE.get(name, 0.0)  # integers are exact


def array_dtype(dtype: str) -> Any:
    """The dtype object for a name: "bfloat16" is ml_dtypes' (what CuPy 14 and NumPy hold bfloat16
    arrays as; importing ml_dtypes also registers the name), anything else NumPy's."""
    if str(dtype) == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as exc:
            raise TypeError("bfloat16 arrays need the ml_dtypes package (in mgemm's cuda12 and "
                            "cuda13 extras)") from exc
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def _random_block(block_info: Any, *, seed: int, dtype: str, gpu: bool) -> Any:
    """One chunk of a random matrix in [-1, 1), seeded by the chunk's position (reproducible)."""
    info = block_info[None]
    shape, loc = info["chunk-shape"], info["chunk-location"]
    if gpu:
        import cupy as xp
    else:
        xp = np
    rng = xp.random.default_rng(seed * 1_000_003 + hash(loc) % 1_000_003)
    kind = np.dtype(dtype).kind if dtype != "bfloat16" else "f"
    if kind in "iu":
        return rng.integers(-8, 8, size=shape).astype(dtype)
    real = rng.random(shape, dtype=xp.float32 if dtype in ("float16", "float32", "complex64",
                                                          "bfloat16") else xp.float64)
    out = real * 2 - 1
    if kind == "c":
        out = out + 1j * (rng.random(shape, dtype=out.dtype) * 2 - 1)
    return out.astype(array_dtype(dtype))


def random_matrix(shape: tuple[int, int], chunks: Any, dtype: str, *, gpu: bool,
                  seed: int) -> da.Array:
    """A lazy random matrix whose chunks are made on the workers (CuPy chunks when ``gpu``)."""
    dt = array_dtype(dtype)
    if gpu:
        import cupy
        meta = cupy.empty((0, 0), dtype=dt)
    else:
        meta = np.empty((0, 0), dtype=dt)
    template = da.empty(shape, chunks=chunks, dtype=dt)
    make = functools.partial(_random_block, seed=seed, dtype=dtype, gpu=gpu)
    return template.map_blocks(lambda _, block_info=None: make(block_info), dtype=dt,
                               meta=meta)


class _Cyclic:
    """Chunk (i, j) of a 2-D array → ``[workers[(i + j) % len(workers)]]`` (other keys: None)."""

    __slots__ = ("workers",)

    def __init__(self, workers: list[str]):
        self.workers = workers

    def __call__(self, key: Any) -> Any:
        if isinstance(key, tuple) and len(key) == 3 and all(isinstance(x, int) for x in key[1:]):
            return [self.workers[(key[1] + key[2]) % len(self.workers)]]
        return None


def persist_cyclic(client: Any, make: Callable[[], da.Array]) -> da.Array:
    """``make()`` persisted with its chunks laid out block-cyclically over the workers: chunk
    (i, j) on worker (i + j) mod W, in address order (the 2-D cyclic layout of distributed dense
    linear algebra).  Left to Dask, where the chunks of a freshly made matrix land varies from
    cluster to cluster, and with it how much data a product has to move: on two GPUs one
    worker fetched 1.5–2.5 GiB per run on one cluster and 1 GiB on the next (benchmarks/RESULTS.md,
    eighth session).
    A fixed layout makes runs on different clusters comparable; both methods see the same one."""
    workers = sorted(client.nthreads())
    if not workers:
        return make().persist()
    with dask.annotate(workers=_Cyclic(workers), allow_other_workers=False):
        lazy = make()
    return client.persist(lazy, optimize_graph=False)


def synchronize_workers(client: Any) -> None:
    """Wait until every worker's GPU has finished its queued work (no-op on CPU workers)."""
    client.run(_device_synchronize)


def _device_synchronize() -> None:
    try:
        import cupy
    except ImportError:
        return
    try:
        if cupy.cuda.runtime.getDeviceCount():
            cupy.cuda.Device().synchronize()
    except cupy.cuda.runtime.CUDARuntimeError:
        return


def drop_replicas(client: Any, keep: dict | None = None) -> None:
    """Leave one copy of every input chunk, as right after ``persist``.

    Chunks a previous run fetched stay on the fetching worker until Dask's active memory
    manager drops the extra copies, every 2 s by default.  Whether a timed run found them there
    decided whether it moved any data: that made run times bimodal.  Every timed run starts
    from this state instead, so each one pays for the data it moves.

    ``keep`` (``chunk_homes(...)``: chunk key → the worker it was persisted on): every other copy of
    those chunks is dropped, so each run starts from the layout the inputs were persisted in.
    Without it the active memory manager chooses which copy stays, and it often keeps the
    fetched one: on a CPU cluster of two workers, a third to a half of the chunks of a
    block-cyclic layout had changed workers after one product (``benchmarks/latency_probe.py
    --cpu --drift``).
    """
    if keep is not None:
        client.run_on_scheduler(_keep_only, keep=keep)
    else:
        try:
            client.amm.run_once()
        except Exception:  # a scheduler without the active memory manager
            return
    time.sleep(0.2)  # the workers drop the copies asynchronously


def chunk_homes(client: Any, *arrays: da.Array) -> dict:
    """Chunk key → the worker holding it, for persisted ``arrays`` whose chunks are held once
    (right after ``persist`` or ``persist_cyclic``); the ``keep`` of ``drop_replicas``."""
    return {key: sorted(holders)[0] for key, holders in client.who_has(list(arrays)).items()
            if holders}


def _keep_only(dask_scheduler: Any, keep: dict) -> int:
    """Scheduler side of ``drop_replicas(keep=...)``: ask every worker but a chunk's home to drop
    its copy (a chunk whose home no longer holds it is left alone); the copies asked for."""
    extra: dict[str, list] = {}
    for key, home in keep.items():
        ts = dask_scheduler.tasks.get(key)
        if ts is None or ts.state != "memory":
            continue
        holders = {ws.address for ws in ts.who_has}
        if home in holders:
            for addr in holders - {home}:
                extra.setdefault(addr, []).append(key)
    for addr, keys in extra.items():
        dask_scheduler.request_remove_replicas(addr, keys, stimulus_id=f"mgemm-bench-layout-{time.time()}")
    return sum(len(keys) for keys in extra.values())


@contextlib.contextmanager
def memory_manager_paused(client: Any) -> Any:
    """The active memory manager's periodic runs stopped for the duration (restarted after if
    they were on): between runs it may drop a chunk's original copy and keep a fetched one."""
    try:
        running = client.amm.running()
    except Exception:  # a scheduler without the active memory manager
        running = False
    if running:
        client.amm.stop()
    try:
        yield
    finally:
        if running:
            client.amm.start()


def timed(client: Any, make: Callable[[], da.Array],
          started: list[float] | None = None, marks: dict[str, float] | None = None, *,
          keep: dict | None = None) -> tuple[float, Any]:
    """Seconds to persist ``make()`` on the cluster and finish all device work; the persisted array.

    ``started`` receives the wall-clock time (``time.time()``) the timed part began; ``marks``
    the seconds from then until the graph was built ("built": planning included), handed to the
    scheduler ("submitted": ``persist`` returned), finished ("done": ``wait`` returned) and
    synchronized on every worker ("synced", the end of the timed part).

    The round trips before the clock starts also matter for correctness: a caller that drops the
    previous run's result just before calling this only queues the release of its keys on the
    client's event loop.  Persisting a graph with the same keys before that release has run
    keeps them alive, and the "run" returns at once with the old result (dask.array.matmul's
    keys are the same every run).  ``client.run`` goes through the loop after the release.

    ``keep``: the inputs' layout, restored before the clock starts (``drop_replicas``).  A full
    garbage collection also runs before, so that none falls inside the run: in this process the
    client shares the interpreter with the embedded cluster's scheduler.  Before it, one run in
    five to seven (either method) paused ~0.1 s inside the client's build or ``persist``; with
    it, none of 40 float16 32768³ runs did (benchmarks/RESULTS.md, ninth session).
    """
    from distributed import wait

    drop_replicas(client, keep)
    synchronize_workers(client)
    gc.collect()
    if started is not None:
        started.append(time.time())
    start = time.perf_counter()
    lazy = make()
    built = time.perf_counter()
    out = lazy.persist()
    submitted = time.perf_counter()
    wait(out)
    done = time.perf_counter()
    synchronize_workers(client)
    end = time.perf_counter()
    if marks is not None:
        marks.update(built=built - start, submitted=submitted - start, done=done - start, synced=end - start)
    return end - start, out


def check(a: da.Array, b: da.Array, c: da.Array, *, samples: int = 16, seed: int = 0,
          tol: float) -> float:
    """Relative error of ``c`` against float64 ``a @ b`` on sampled rows × columns; raises if above."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(a.shape[0], size=min(samples, a.shape[0]), replace=False))
    cols = np.sort(rng.choice(b.shape[1], size=min(samples, b.shape[1]), replace=False))
    a_rows, b_cols, got = dask.compute(a[rows, :], b[:, cols], c[rows][:, cols])
    a_rows, b_cols, got = (_to_host(x) for x in (a_rows, b_cols, got))
    if got.dtype != c.dtype:  # chunks wider than the array says (dask.array.matmul's bfloat16
        got = got.astype(c.dtype)  # chunks are numpy.matmul's float32): judged as the type it says
    wide = np.complex128 if np.iscomplexobj(got) else np.float64
    ref = a_rows.astype(wide) @ b_cols.astype(wide)
    got = got.astype(wide)
    if not np.all(np.isfinite(got)):
        raise AssertionError(f"non-finite values in the product at {np.argwhere(~np.isfinite(got))[:5]}")
    err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), np.finfo(np.float64).tiny))
    if err > tol:
        worst = np.unravel_index(np.argmax(np.abs(got - ref)), got.shape)
        raise AssertionError(f"relative error {err:.3g} > {tol:.3g}; worst at row {rows[worst[0]]}, "
                             f"col {cols[worst[1]]}: {got[worst]} vs {ref[worst]}")
    return err


def _to_host(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


@dataclass(frozen=True)
class Case:
    """One benchmark problem: C (m × n) = A (m × k) @ B (k × n), inputs chunked ``chunk``."""
    name: str
    m: int
    n: int
    k: int
    dtype: str = "float32"
    chunk: int | str = "auto"

    @property
    def flops(self) -> float:
        factor = 4 if np.dtype(self.dtype).kind == "c" else 1
        return 2.0 * self.m * self.n * self.k * factor


@dataclass(frozen=True)
class Method:
    """A way to compute the product: ``run(a, b, options)`` returns a lazy array."""
    name: str
    run: Callable[[da.Array, da.Array, dict], da.Array]


def _mgemm(a: da.Array, b: da.Array, options: dict) -> da.Array:
    from .api import matmul
    return matmul(a, b, **options)


def _dask(a: da.Array, b: da.Array, options: dict) -> da.Array:
    return da.matmul(a, b)


METHODS = {"mgemm": Method("mgemm", _mgemm), "dask": Method("dask.array.matmul", _dask)}


def gpu_cases(n_gpus: int) -> list[Case]:
    """The orchestrator benchmark: 32768³ per dtype on the whole cluster."""
    cases = [Case(f"{dt}-32768", 32768, 32768, 32768, dt, 8192)
             for dt in ("float32", "float64", "float16")]
    # Half precision runs 13× faster per block: bigger chunks keep per-task overhead small, and a
    # product with 8× the work leaves Dask's fixed submission latency a smaller share.
    return cases + [Case("float16-32768-c16k", 32768, 32768, 32768, "float16", 16384),
                    Case("float16-65536", 65536, 65536, 65536, "float16", 16384)]


def scaling_cases(n_gpus: int) -> list[Case]:
    """Strong scaling (32768³ and 65536³, float32 and bfloat16) and weak scaling (the same work
    per GPU as 32768³ on two GPUs: n³ / GPUs constant) on however many GPUs the cluster has.

    bfloat16 cases run where the chunk library has the dtype (CuPy builds without it skip them).
    """
    weak = 1024 * round(32768 * (n_gpus / 2) ** (1 / 3) / 1024)
    cases = [Case(f"strong-{dt}-{n}", n, n, n, dt, n // 4)
             for n in (32768, 65536) for dt in ("float32", "bfloat16")]
    cases += [Case(f"weak-{dt}-{weak}", weak, weak, weak, dt, weak // 4)
              for dt in ("float32", "bfloat16")]
    return [c for c in cases if c.dtype != "bfloat16" or has_bfloat16()]


def scaling_summary(rows: list[dict], n_gpus: int) -> str:
    """The scaling report from one call's JSON rows (``benchmarks/run_gpu_scaling.sh``): per case
    and method, TFLOP/s, efficiency against ``n_gpus`` × the one-GPU cuBLAS anchor of the same
    dtype and size (rows of method ``cublas-1gpu``), the ratio to dask.array.matmul and, for
    mgemm, to cuBLASMp at its fastest block size (rows of method ``cublasmp``,
    ``benchmarks/cublasmp_bench.py``)."""
    anchor = {(r["dtype"], r["n"]): r["tflops"] for r in rows if r.get("method") == "cublas-1gpu"}
    bench = [r for r in rows if r.get("method") in ("mgemm", "dask.array.matmul", "cublasmp")]
    ok = [r for r in bench if not r.get("error")]
    dask_s = {r["case"]: r["median_s"] for r in ok if r["method"] == "dask.array.matmul"}
    mp_s: dict[str, float] = {}
    for r in ok:
        if r["method"] == "cublasmp":
            mp_s[r["case"]] = min(r["median_s"], mp_s.get(r["case"], float("inf")))
    lines = [f"{'case':<24} {'method':<18} {'median s':>9} {'TFLOP/s':>8} "
             f"{'x %d*cuBLAS' % n_gpus:>12} {'x dask':>7} {'x cuBLASMp':>10}"]
    for r in bench:
        method = r["method"] + (f" nb={r['block']}" if r["method"] == "cublasmp" else "")
        if r.get("error"):
            lines.append(f"{r['case']:<24} {method:<18} failed: {r['error']}")
            continue
        one = anchor.get((r["dtype"], r["m"])) if r["m"] == r["n"] == r["k"] else None
        eff = f"{r['tflops'] / (n_gpus * one):12.2f}" if one else f"{'n/a':>12}"
        ratio = f"{dask_s[r['case']] / r['median_s']:.2f}" if r["case"] in dask_s else "n/a"
        vs_mp = (f"{mp_s[r['case']] / r['median_s']:.2f}"
                 if r["method"] == "mgemm" and r["case"] in mp_s else "n/a")
        lines.append(f"{r['case']:<24} {method:<18} {r['median_s']:>9.3f} {r['tflops']:>8.3g} "
                     f"{eff} {ratio:>7} {vs_mp:>10}")
    return "\n".join(lines)


def has_bfloat16() -> bool:
    """Whether CuPy here can hold bfloat16 arrays."""
    try:
        import cupy
        cupy.empty(1, dtype=array_dtype("bfloat16"))
        return True
    except Exception:
        return False


#: Named benchmark suites: cluster size → cases.
SUITES = {"foundation": gpu_cases, "scaling": scaling_cases}


def cpu_cases() -> list[Case]:
    return [Case("float64-2048", 2048, 2048, 2048, "float64", 512),
            Case("float32-2048", 2048, 2048, 2048, "float32", 512)]


@dataclass
class Row:
    case: str
    method: str
    m: int
    n: int
    k: int
    dtype: str
    seconds: list[float]
    median_s: float
    tflops: float
    rel_error: float
    workers: int
    protocol: str
    environment: dict = field(default_factory=dict)
    error: str = ""  # why the method could not run or failed its check (then no times)

    def to_json(self) -> str:
        return strict_json(asdict(self))


def strict_json(record: Any) -> str:
    """``record`` as standard JSON: a float that is not finite (a failed row's NaN times, an
    idle worker's infinite first start) as null, where ``json.dumps`` wrote NaN and Infinity,
    which JSON parsers reject."""
    def finite(x: Any) -> Any:
        if isinstance(x, float):
            return x if math.isfinite(x) else None
        if isinstance(x, dict):
            return {k: finite(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [finite(v) for v in x]
        return x
    return json.dumps(finite(record), allow_nan=False)


def environment(client: Any) -> dict:
    """GPU model, versions and commit, for every benchmark row."""
    from . import __version__
    from .cluster import worker_devices

    devices = [d for d in worker_devices(client).values() if d]
    # MGEMM_COMMIT names the commit where the checkout's own git metadata is not that of the
    # working tree (a copied tree on a remote GPU host).
    commit = os.environ.get("MGEMM_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, timeout=5).stdout.strip()
        except Exception:
            commit = ""
    import distributed
    env = {"mgemm": __version__, "dask": dask.__version__, "distributed": distributed.__version__,
           "numpy": np.__version__, "python": platform.python_version(), "commit": commit,
           "gpu": devices[0]["model"] if devices else None, "gpus": len(devices)}
    env["threads_per_worker"] = sorted(set(client.nthreads().values()))
    try:
        import cupy
        env["cupy"] = cupy.__version__
    except ImportError:
        pass
    try:  # the transport settings the workers run with (UCX reads them from the environment)
        ucx = next(iter(client.run(_ucx_environment).values()), {})
        env["transfer_limit"] = ucx.pop("transfer_limit", None)
        env["transfer_sync"] = ucx.pop("transfer_sync", None)
        env["ucx_env"] = ucx
    except Exception:
        pass
    return env


def _ucx_environment() -> dict:
    """A worker's UCX_* variables and its per-message transfer limit."""
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("UCX")}
    env["transfer_limit"] = dask.config.get("distributed.worker.transfer.message-bytes-limit")
    try:
        import distributed_ucxx.ucxx as comm
        env["transfer_sync"] = ("stream" if comm.synchronize_stream.__module__ == "mgemm.cluster"
                                else "device")
    except ImportError:
        pass
    return env


def traced(client: Any, make: Callable[[], da.Array], marks: dict[str, float] | None = None, *,
           keep: dict | None = None) -> tuple[float, Any, dict[str, dict]]:
    """``timed`` under Dask's task stream: its seconds and array, and the run summarised per
    worker from the timed part's start (``stream_summary``, with ``add_fetches``)."""
    from distributed import get_task_stream

    started: list[float] = []
    with get_task_stream(client) as stream:
        seconds, out = timed(client, make, started, marks, keep=keep)
    summary = stream_summary(stream.data, started[0])
    add_fetches(client, summary, started[0])
    return seconds, out, summary


def stream_summary(records: list[dict], start: float) -> dict[str, dict]:
    """Per worker, from a Dask task stream: tasks, compute and transfer seconds, first start and
    last stop of computing (relative to ``start``), the peers data came from, and each task's
    (start, seconds, key) in ``task_log``.

    The lines this gives show where a slow run lost its time: an idle worker, a long transfer
    before the first block, or blocks run away from their planned worker.
    """
    out: dict[str, dict] = {}
    for rec in records:
        w = out.setdefault(rec["worker"], _worker_summary(sources=set()))
        for ss in rec.get("startstops", ()):
            span = ss["stop"] - ss["start"]
            if ss["action"] == "compute":
                w["tasks"] += 1
                w["compute_s"] += span
                w["task_log"].append((round(ss["start"] - start, 4), round(span, 4),
                                      str(rec.get("key"))[:60]))
                w["first"] = min(w["first"], ss["start"] - start)
                w["last"] = max(w["last"], ss["stop"] - start)
            elif ss["action"] == "transfer":
                w["transfer_s"] += span
                w["sources"].add(ss.get("source"))
    for w in out.values():
        w["sources"] = len(w["sources"])
    return out


def _worker_summary(sources: Any) -> dict:
    """One worker's empty summary; ``sources``: a set while a task stream is read, else its count."""
    return {"tasks": 0, "compute_s": 0.0, "transfer_s": 0.0, "first": float("inf"), "last": 0.0,
            "sources": sources, "task_log": []}


def _incoming_log(dask_worker: Any, since: float) -> list[tuple[float, float, int, int]]:
    """(start, seconds, bytes, keys) of each data fetch this worker began after ``since``."""
    return [(e["start"] - since, e["stop"] - e["start"], int(e["total"]), len(e["keys"]))
            for e in list(dask_worker.transfer_incoming_log) if e["start"] >= since]


def add_fetches(client: Any, summary: dict[str, dict], since: float) -> None:
    """Add each worker's fetches since ``since`` to its summary: how many, GiB, the seconds they
    were in flight (their union), the rate over that time, and when the first began."""
    logs = client.run(_incoming_log, since=since)
    for name, log in logs.items():
        w = summary.setdefault(name, _worker_summary(sources=0))
        spans = sorted((t0, t0 + dt) for t0, dt, _, _ in log)
        busy, end = 0.0, float("-inf")
        for t0, t1 in spans:  # union of the in-flight intervals
            busy += max(0.0, t1 - max(t0, end))
            end = max(end, t1)
        nbytes = sum(e[2] for e in log)
        w["fetches"] = len(log)
        w["fetch_gib"] = nbytes / 2**30
        w["fetch_busy_s"] = busy
        w["fetch_gbps"] = nbytes / busy / 1e9 if busy else 0.0
        w["fetch_first"] = spans[0][0] if spans else None
        w["fetch_log"] = [[round(t0, 4), round(dt, 4), nb, nk] for t0, dt, nb, nk in log]


def format_summary(summary: dict[str, dict]) -> str:
    def fetches(w: dict) -> str:
        if not w.get("fetches"):
            return ""
        return (f", {w['fetches']} fetches {w['fetch_gib']:.2f} GiB in {w['fetch_busy_s']:.3f} s "
                f"({w['fetch_gbps']:.1f} GB/s) from {w['fetch_first']:.3f}")
    def span(w: dict) -> str:  # a worker that computed nothing has no first start
        return f" [{w['first']:.3f}..{w['last']:.3f}]" if w["tasks"] else ""
    return " | ".join(
        f"{name.rsplit(':', 1)[-1]}: {w['tasks']} tasks, compute {w['compute_s']:.3f} s"
        f"{span(w)}, transfer {w['transfer_s']:.3f} s" + fetches(w)
        for name, w in sorted(summary.items()))


#: Where ``mgemm bench`` persists its inputs: "dask" (the default: a plain ``persist``, what a
#: user's own arrays get, wherever Dask's scheduler puts a fresh array's chunks, which varies
#: between clusters) or "cyclic" (``persist_cyclic``: the same on every cluster).  Every timed
#: run starts from the layout made (``drop_replicas``).  The layout moves dask.array.matmul more
#: than mgemm: block-cyclically, half of its block products find both inputs on one worker
#: (benchmarks/RESULTS.md, ninth session).
LAYOUTS = ("dask", "cyclic")


def persister(layout: str) -> Callable[[Any, Callable[[], da.Array]], da.Array]:
    """``persist(client, make)`` for one of ``LAYOUTS``: ``persist_cyclic``, or a plain
    ``make().persist()``; an unknown layout is refused here, before anything is made."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return persist_cyclic if layout == "cyclic" else (lambda client, make: make().persist())


def emulated_scheme(client: Any, dtype: str, options: dict, gpu: bool) -> str:
    """The ``emulate_fp32`` scheme mgemm's blocks run under here ("off" where the option does not
    apply: not float32, NumPy chunks, another engine or a GPU other than sm_90)."""
    from .cluster import worker_devices
    from .emulate import runs_on

    scheme = options.get("emulate_fp32", "off")
    if scheme == "off" or dtype != "float32" or not gpu:
        return "off"
    devices = list(worker_devices(client).values())
    return scheme if runs_on(devices, options.get("engine", "auto")) else "off"


def _failed(case: Case, method: str, workers: dict, env: dict, error: str) -> Row:
    """The row of a method that did not run, or failed its check: no times, ``error`` saying
    why."""
    nan = float("nan")
    return Row(case.name, method, case.m, case.n, case.k, case.dtype, [], nan, nan, nan,
               len(workers), _protocol(workers), env, error)


def _protocol(workers: dict) -> str:
    """The comm protocol of a cluster of ``workers`` (addresses → threads)."""
    from .cluster import protocol

    return protocol(next(iter(workers))) if workers else "inproc"


def refused(client: Any, case: Case, methods: list[str], error: str) -> list[Row]:
    """A row per method for a case that did not run at all (its inputs past the cluster's
    memory): no environment either (nothing ran)."""
    return [_failed(case, METHODS[key].name, client.nthreads(), {}, error) for key in methods]


def run_case(client: Any, case: Case, methods: list[str], *, repeat: int, options: dict,
             gpu: bool, progress: Callable[[str], None] = lambda msg: None,
             trace: Callable[[dict], None] | None = None, layout: str = "dask") -> list[Row]:
    """Time every method on one set of persisted inputs (laid out as ``layout`` says: one of
    ``LAYOUTS``); check each result first.

    With ``trace``, each timed run's task stream is summarised per worker and passed to it.
    """
    from distributed import wait

    from .cluster import describe_workers
    from .plan import check_fits

    persist = persister(layout)
    # inputs the cluster cannot hold are refused before they are made (not an out-of-memory host)
    dtype = array_dtype(case.dtype)
    check_fits(case.m, case.n, case.k, dtype.itemsize, describe_workers(client, dtype, gpu=gpu))
    a = persist(client, lambda: random_matrix((case.m, case.k), case.chunk, case.dtype,
                                              gpu=gpu, seed=1))
    b = persist(client, lambda: random_matrix((case.k, case.n), case.chunk, case.dtype,
                                              gpu=gpu, seed=2))
    wait([a, b])
    env = {**environment(client), "layout": layout,
           "allow_tf32": bool(options.get("allow_tf32", False)),
           "emulate_fp32": emulated_scheme(client, case.dtype, options, gpu),
           "tune": bool(options.get("tune", False)),  # the warm-up tunes, the timed runs reuse
           # mgemm's other options as the run was given them (engine and block size as asked,
           # "auto" where mgemm chose)
           **{name: str(options[name]) for name in ("engine", "block_size", "split")
              if name in options}}
    workers = client.nthreads()
    proto = _protocol(workers)
    rows = []
    keep = chunk_homes(client, a, b)  # every run starts from it
    with memory_manager_paused(client):
        for key in methods:
            method = METHODS[key]
            tunes = env["tune"] and gpu and key == "mgemm"
            tuning = " (tuning each kind of block first: tune)" if tunes else ""
            progress(f"{case.name}: {method.name} warm-up and check{tuning}")
            try:
                _, c = timed(client, lambda: method.run(a, b, options), keep=keep)
                err = check(a, b, c, tol=tolerance(case.dtype, options.get("allow_tf32", False)))
                del c
            except Exception as exc:  # the row says what broke; the other methods and cases still run
                error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                progress(f"{case.name}: {method.name} FAILED: {error}")
                rows.append(_failed(case, method.name, workers, env, error))
                continue
            times = []
            for r in range(repeat):
                progress(f"{case.name}: {method.name} run {r + 1}/{repeat}")
                if trace is None:
                    seconds, c = timed(client, lambda: method.run(a, b, options), keep=keep)
                else:
                    marks: dict[str, float] = {}
                    with _plans_logged() as plans:
                        seconds, c, summary = traced(client, lambda: method.run(a, b, options),
                                                     marks, keep=keep)
                    progress(f"  {seconds:.3f} s (built {marks['built']:.3f}, submitted "
                             f"{marks['submitted']:.3f}, done {marks['done']:.3f})  {format_summary(summary)}")
                    trace({"case": case.name, "method": method.name, "run": r, "seconds": seconds,
                           "marks": marks, "workers": summary, "plans": plans})
                del c
                times.append(seconds)
            med = statistics.median(times)
            rows.append(Row(case.name, method.name, case.m, case.n, case.k, case.dtype, times, med,
                            case.flops / med / 1e12, err, len(workers), proto, env))
    return rows


@contextlib.contextmanager
def _plans_logged() -> Any:
    """The tables of the plans mgemm makes in this process meanwhile (the ``mgemm.plan`` logger at
    DEBUG, for the duration only), formatted when it ends: inside a timed run only the records
    are kept, so the trace costs the timed build nothing."""
    log = logging.getLogger("mgemm.plan")
    plans: list[str] = []
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler, level, propagate = Keep(logging.DEBUG), log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False  # kept here, not printed by whatever handlers the root logger has
    try:
        yield plans
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate
        plans.extend(record.getMessage() for record in records)


def table(rows: list[Row]) -> str:
    """A text table; rows of one case show their speed-up over dask.array.matmul."""
    base = {r.case: r.median_s for r in rows if r.method == "dask.array.matmul" and not r.error}
    lines = [f"{'case':<16} {'method':<18} {'median s':>9} {'TFLOP/s':>8} {'vs dask':>8} "
             f"{'rel err':>9} {'runs':>5}"]
    for r in rows:
        method = r.method
        scheme = r.environment.get("emulate_fp32", "off")
        if method == "mgemm" and r.dtype == "float32" and scheme != "off":
            method = f"mgemm ({scheme})"  # float32 on bfloat16 tensor cores (mgemm.emulate)
        if r.error:
            lines.append(f"{r.case:<16} {method:<18} failed: {r.error}")
            continue
        ratio = f"{base[r.case] / r.median_s:.2f}" if r.case in base else "n/a"
        lines.append(f"{r.case:<16} {method:<18} {r.median_s:>9.3f} {r.tflops:>8.3g} "
                     f"{ratio:>8} {r.rel_error:>9.2e} {len(r.seconds):>5}")
    return "\n".join(lines)


def plot(rows: list[Row], path: str) -> None:
    """A bar chart of TFLOP/s per case and method (needs matplotlib: the ``plot`` extra)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r.case for r in rows))
    methods = list(dict.fromkeys(r.method for r in rows))
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(1.5 + 1.6 * len(cases), 3.5))
    for mi, method in enumerate(methods):
        values = [next((r.tflops for r in rows if r.case == c and r.method == method), 0.0)
                  for c in cases]
        ax.bar([i + mi * width for i in range(len(cases))], values, width, label=method)
    ax.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(cases))], cases)
    ax.set_ylabel("TFLOP/s (median)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")  # PNG whatever the name ends in, at that name
    plt.close(fig)
