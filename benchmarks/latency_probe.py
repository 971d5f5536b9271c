"""Where do the milliseconds before a product's first GEMM go?  Starts mgemm's embedded cluster,
persists random inputs as ``mgemm bench`` does (``--layout``, block-cyclic by default), and times ``--runs`` products the
way ``mgemm bench`` does, while a scheduler plugin and a worker plugin stamp every task
transition with the wall clock.  Per run it prints, in ms from the start of the timed part:

- ``built``/``sent``: the client built the graph / ``persist`` returned;
- ``arrive``: the scheduler began its ``update-graph``; ``mat``, ``order``: how long it took to
  materialize and to order the graph (its own metrics, durations);
- ``sched``: the scheduler's first transition of a new key (the graph has arrived and been
  unpacked), ``disp``: its first ``waiting → processing`` (a task sent to a worker);
- per worker: ``recv`` its first new task (``compute-task`` arrived), ``fetch`` its first
  request to a peer, ``got`` its first chunk in, ``exec`` its first task started, ``end`` its
  last task finished (``--tasks``: also every task, fetch, event-loop stall over 2 ms and, on
  UCX, transfer stream synchronize over 0.5 ms of the last run);
- ``done``/``synced``: ``wait`` returned / the device synchronize on every worker returned.

    python3 benchmarks/latency_probe.py [--protocol ucx|tcp] [--method mgemm|dask] [--runs 6]
    python3 benchmarks/latency_probe.py --cpu      # the embedded CPU cluster, small NumPy inputs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin  # noqa: E402

import mgemm  # noqa: E402
from mgemm import bench  # noqa: E402
from mgemm.cluster import session  # noqa: E402


class SchedulerStamps(SchedulerPlugin):
    name = "latency-probe-scheduler"

    def __init__(self) -> None:
        self.log: list = []

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        self.log.append((time.time(), str(key), start, finish))


class WorkerStamps(WorkerPlugin):
    name = "latency-probe-worker"

    def __init__(self) -> None:
        self.log: list = []

    def transition(self, key, start, finish, **kwargs) -> None:
        self.log.append((time.time(), str(key), start, finish))


class LoopWatch(WorkerPlugin):
    """Stamps each stall of the worker's event loop longer than 2 ms, and on UCX workers each
    stream synchronize a transfer makes (the comm's ``synchronize_stream``) with its duration."""

    name = "latency-probe-loop"

    def __init__(self) -> None:
        self.stalls: list = []
        self.syncs: list = []

    async def setup(self, worker) -> None:
        import asyncio
        try:
            import distributed_ucxx.ucxx as comm
        except ImportError:
            comm = None
        if comm is not None:
            inner = comm.synchronize_stream

            def timed_sync(*args, **kwargs):
                t0 = time.time()
                try:
                    return inner(*args, **kwargs)
                finally:
                    self.syncs.append((t0, time.time()))
            comm.synchronize_stream = timed_sync

        async def watch() -> None:
            last = time.time()
            while True:
                await asyncio.sleep(0.001)
                now = time.time()
                if now - last > 0.002:
                    self.stalls.append((last, now))
                last = now
        self._watch = asyncio.get_running_loop().create_task(watch())


def _loop_log(dask_worker, since: float) -> list:
    plugin = dask_worker.plugins[LoopWatch.name]
    return ([(t0, t1, "stall") for t0, t1 in plugin.stalls if t0 >= since]
            + [(t0, t1, "sync ") for t0, t1 in plugin.syncs if t0 >= since and t1 - t0 > 0.0005])


def _time_engine() -> None:
    """Wrap the cublas and persistent engines on this worker: per call, the wall clock at its
    start, when its work was queued (the engine's final wait begins) and when it returned, and the
    GPU time between events recorded on its stream at the start and at the end."""
    import threading

    import cupy

    import mgemm.engines
    from mgemm.engines import cublas, persistent
    if getattr(mgemm.engines, "_probe_log", None) is not None:
        return
    log: list = []
    local = threading.local()

    for module, cls in ((cublas, cublas.CublasEngine), (persistent, persistent.PersistentEngine)):
        inner_gemm, inner_wait = cls.gemm, module.wait_for_queued_work

        def queued(cp, inner_wait=inner_wait):
            local.queued = time.time()
            inner_wait(cp)

        def gemm(self, *args, inner_gemm=inner_gemm, **kwargs):
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            t0 = time.time()
            e0.record()
            out = inner_gemm(self, *args, **kwargs)
            e1.record()
            e1.synchronize()
            log.append((t0, local.queued, time.time(), cupy.cuda.get_elapsed_time(e0, e1),
                        threading.get_ident()))
            return out
        module.wait_for_queued_work = queued
        cls.gemm = gemm
    mgemm.engines._probe_log = log  # on a module: every call here is a fresh copy of this function


def _engine_log(since: float) -> list:
    import mgemm.engines
    return [e for e in (getattr(mgemm.engines, "_probe_log", None) or []) if e[0] >= since]


def _one_stream(on: bool) -> None:
    import mgemm.engines
    mgemm.engines.ONE_STREAM_PER_GPU = on


def _scheduler_log(dask_scheduler, since: float) -> list:
    return [e for e in dask_scheduler.plugins[SchedulerStamps.name].log if e[0] >= since]


def _worker_log(dask_worker, since: float) -> list:
    return [e for e in dask_worker.plugins[WorkerStamps.name].log if e[0] >= since]


def _first(log: list, since: float, test) -> float:
    times = [t for t, key, start, finish in log if test(key, start, finish)]
    return (min(times) - since) * 1e3 if times else float("nan")


def _graph_metrics(dask_scheduler, since: float) -> dict:
    """The scheduler's own account of the graphs it received since ``since``."""
    for _, msg in reversed(list(dask_scheduler.get_events().get("scheduler", ()))):
        m = msg.get("metrics") if isinstance(msg, dict) and msg.get("action") == "update-graph" else None
        if m and m.get("start_timestamp_seconds", 0) >= since:
            return m
    return {}


def timeline(client, started: float, marks: dict, inputs: set[str]) -> dict:
    slog = client.run_on_scheduler(_scheduler_log, since=started)
    graph = client.run_on_scheduler(_graph_metrics, since=started)
    got = "start_timestamp_seconds" in graph
    row = {"built": marks["built"] * 1e3, "sent": marks["submitted"] * 1e3,
           # update-graph began (arrived), its graph materialized, ordered (durations in ms)
           "arrive": (graph["start_timestamp_seconds"] - started) * 1e3 if got else float("nan"),
           "mat": graph.get("materialization_duration_seconds", float("nan")) * 1e3,
           "order": -graph.get("ordering_duration_seconds", float("nan")) * 1e3,
           "sched": _first(slog, started, lambda k, s, f: s == "released" and k not in inputs),
           "disp": _first(slog, started, lambda k, s, f: f == "processing"),
           "done": marks["done"] * 1e3, "synced": marks["synced"] * 1e3, "workers": {}}
    for name, wlog in client.run(_worker_log, since=started).items():
        new = [e for e in wlog if e[1] not in inputs]
        ends = [t for t, k, s, f in wlog if s == "executing" and f == "memory"]
        row["workers"][name] = {
            "recv": _first(new, started, lambda k, s, f: s == "released"),
            "fetch": _first(wlog, started, lambda k, s, f: f == "flight"),
            "got": _first(wlog, started, lambda k, s, f: s == "flight" and f == "memory"),
            "exec": _first(wlog, started, lambda k, s, f: f == "executing"),
            "end": (max(ends) - started) * 1e3 if ends else float("nan"),
        }
    return row


def tasks(client, started: float) -> str:
    """Each worker's tasks (start–end ms, key) and fetches (request–arrival ms, key), in order."""
    lines = []
    loops = client.run(_loop_log, since=started)
    gemms = client.run(_engine_log, since=started)
    for name, wlog in sorted(client.run(_worker_log, since=started).items()):
        open_: dict = {}
        spans = []
        seen: dict = {}
        for t, key, start, finish in wlog:
            seen.setdefault((key, "recv"), t)
            if finish == "ready":
                seen[(key, "ready")] = t
            if finish in ("executing", "flight"):
                open_[(key, finish)] = t
            elif start in ("executing", "flight") and (key, start) in open_:
                kind = "task " if start == "executing" else "fetch"
                t0 = open_.pop((key, start))
                if kind == "task ":  # when the worker got it, and when its inputs were all there
                    ms = [(seen.get((key, x), float("nan")) - started) * 1e3 for x in ("recv", "ready")]
                    key = f"{key[-48:]} (got {ms[0]:.1f}, ready {ms[1]:.1f})"
                spans.append((t0, t, kind, key))
        spans += [(t0, t1, kind, "event loop" if kind == "stall" else "transfer's stream synchronize")
                  for t0, t1, kind in loops.get(name, [])]
        spans += [(t0, t2, "gemm ", f"queued at {(t1 - started) * 1e3:.1f}, GPU {gpu:.2f} ms, "
                                    f"thread {tid % 1000}")
                  for t0, t1, t2, gpu, tid in gemms.get(name, [])]
        lines.append(f"  worker {name[-5:]}:")
        for t0, t1, kind, key in sorted(spans):
            lines.append(f"    {kind} {(t0 - started) * 1e3:6.1f} – {(t1 - started) * 1e3:6.1f}  {key[-60:]}")
    return "\n".join(lines)


def profile_submit(client, run, keep, runs: int) -> None:
    """Where the client's part goes: ``2 × runs`` more products, each started as ``bench.timed``
    starts one (layout restored, synchronized, collected).  Every other one is clocked: the build
    (planning included), its steps and ``persist`` apart; the others run under cProfile.  Prints
    the clocked medians and the profile's top (cProfile sees this thread only)."""
    import cProfile
    import gc
    import pstats

    from distributed import wait

    import mgemm.api as api
    pieces: dict = {}

    def clocked(module, name):  # wall time of module.name per call, into pieces[name]
        inner = getattr(module, name)

        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                pieces.setdefault(name, []).append((time.perf_counter() - t) * 1e3)
        setattr(module, name, wrapper)
        return inner
    saved = {name: clocked(api, name) for name in
             ("_snapshot", "describe_workers", "_target_block", "make_plan", "install_placement")}
    saved_build = clocked(api.graph, "build")
    prof = cProfile.Profile()
    built, sent = [], []
    for r in range(2 * runs):  # even runs clocked, odd runs profiled
        bench.drop_replicas(client, keep)
        bench.synchronize_workers(client)
        gc.collect()
        if r % 2:
            prof.enable()
        t0 = time.perf_counter()
        lazy = run()
        t1 = time.perf_counter()
        out = lazy.persist()
        t2 = time.perf_counter()
        if r % 2:
            prof.disable()
            pieces = {k: v[:-1] for k, v in pieces.items()}  # keep the unprofiled runs' only
        else:
            built.append((t1 - t0) * 1e3)
            sent.append((t2 - t1) * 1e3)
        wait(out)
        del out, lazy
    for name, inner in saved.items():
        setattr(api, name, inner)
    api.graph.build = saved_build
    print(f"profile: build {statistics.median(built):.2f} ms, persist {statistics.median(sent):.2f} ms "
          f"(medians of {runs} unprofiled runs); in the build: "
          + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in pieces.items()), flush=True)
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)


def fmt(row: dict) -> str:
    head = " ".join(f"{k} {row[k]:6.1f}" for k in ("built", "sent", "arrive", "mat", "order", "sched", "disp"))
    tail = " ".join(f"{k} {row[k]:6.1f}" for k in ("done", "synced"))
    workers = " | ".join(f"{name[-5:]}: " + " ".join(f"{k} {v:6.1f}" for k, v in w.items())
                         for name, w in sorted(row["workers"].items()))
    return f"{head} || {workers} || {tail}"


def probe(client, args) -> None:
    """Persist the inputs on ``client``'s workers, then time and trace ``args.runs`` products."""
    if args.cpu:
        n, chunk, dtype, gpu = 2048, 512, "float32", False
    else:
        n, chunk, dtype, gpu = args.n, args.chunk, args.dtype, True
    if args.one_stream:
        client.run(_one_stream, args.one_stream == "on")
    if args.tasks and not args.cpu:
        client.run(_time_engine)
    client.register_plugin(SchedulerStamps(), name=SchedulerStamps.name)
    client.register_plugin(WorkerStamps(), name=WorkerStamps.name)
    if args.tasks:
        client.register_plugin(LoopWatch(), name=LoopWatch.name)
    persist = bench.persister(args.layout)
    a = persist(client, lambda: bench.random_matrix((n, n), chunk, dtype, gpu=gpu, seed=1))
    b = persist(client, lambda: bench.random_matrix((n, n), chunk, dtype, gpu=gpu, seed=2))
    from distributed import wait
    wait([a, b])
    inputs = {str(k) for k in a.__dask_keys__() for k in k} | {
        str(k) for k in b.__dask_keys__() for k in k}
    opts = {"block_size": args.block_size} if args.block_size else {}
    if args.engine:
        opts["engine"] = args.engine
    run = (lambda: mgemm.matmul(a, b, **opts)) if args.method == "mgemm" else (lambda: a @ b)
    print(f"{args.method} {dtype} {n}² ({chunk}² chunks), "
          f"{'cpu' if args.cpu else args.protocol or 'default protocol'}; ms from the start",
          flush=True)
    def holders() -> dict:
        return {str(k): tuple(sorted(v)) for k, v in client.who_has([a, b]).items()}
    home = holders()
    keep = None if args.drift else bench.chunk_homes(client, a, b)
    if keep is not None:
        client.amm.stop()
    rows = []
    for r in range(args.runs + 1):  # run 0 warms up
        bench.drop_replicas(client, keep)
        now = holders()
        moved = sum(now.get(k) != v for k, v in home.items())
        print(f"run {r}: {moved} of {len(home)} input chunks not (only) where they were persisted",
              flush=True)
        started: list[float] = []
        marks: dict = {}
        _, c = bench.timed(client, run, started, marks, keep=keep)
        row = timeline(client, started[0], marks, inputs)
        print(f"run {r}: {fmt(row)}", flush=True)
        if args.tasks and r == args.runs:
            print(tasks(client, started[0]), flush=True)
        if r:
            rows.append(row)
        del c
    if args.profile:
        profile_submit(client, run, keep, args.profile)
    keys = ("built", "sent", "arrive", "mat", "order", "sched", "disp", "done", "synced")
    med = {k: statistics.median(r[k] for r in rows) for k in keys}
    wk = {k: statistics.median(min(w[k] for w in r["workers"].values()) for r in rows)
          for k in ("recv", "fetch", "got", "exec")}
    print("median: " + " ".join(f"{k} {v:.1f}" for k, v in {**med, **wk}.items())
          + "  (worker columns: the earlier worker)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default=None, help="ucx or tcp (GPU cluster)")
    ap.add_argument("--method", default="mgemm", choices=["mgemm", "dask"])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--n", type=int, default=32768)
    ap.add_argument("--chunk", type=int, default=8192)
    ap.add_argument("--cpu", action="store_true", help="two CPU workers and 2048² inputs")
    ap.add_argument("--tasks", action="store_true", help="also list every task and fetch of the last run")
    ap.add_argument("--block-size", type=int, default=None, help="mgemm's block_size option")
    ap.add_argument("--engine", default=None, help="mgemm's engine option")
    ap.add_argument("--profile", type=int, default=0, metavar="RUNS",
                    help="then profile the client's build and persist over this many more runs")
    ap.add_argument("--layout", choices=bench.LAYOUTS, default="cyclic",
                    help="where the inputs are persisted, as for mgemm bench")
    ap.add_argument("--one-stream", choices=["on", "off"], default=None,
                    help="set mgemm.engines.ONE_STREAM_PER_GPU on the workers")
    ap.add_argument("--drift", action="store_true",
                    help="let the active memory manager choose which copy of a fetched chunk stays "
                         "(before the ninth session: the layout drifts from run to run)")
    ap.add_argument("--min-piece", type=float, default=None,
                    help="mgemm.plan.MIN_PIECE_SECONDS for this run (e.g. 0.001: cut each worker's "
                         "first remote block into single-chunk pieces)")
    args = ap.parse_args(argv)
    if args.min_piece is not None:
        from mgemm import plan
        plan.MIN_PIECE_SECONDS = args.min_piece
    start = {"n_workers": 2, "threads_per_worker": 2} if args.cpu else {"protocol": args.protocol}
    with session(None, **start) as client:
        probe(client, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
