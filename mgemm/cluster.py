"""The cluster side: the embedded default cluster, what the planner knows of each worker, the
scheduler plugin that keeps planned placement (and takes ``prefetch`` requests), the prefetch of
each worker's first blocks' remote inputs, and the worker plugins for transfers (bfloat16 chunks
keep their dtype; UCX sends wait for a stream, not the device).

``session()`` gives the active ``distributed.Client`` if there is one; else it starts a
``LocalCUDACluster`` when GPUs are visible (UCX over NVLink when distributed-ucxx is installed,
else TCP; an RMM pool when RMM is installed), else a ``LocalCluster`` of processes.  Everything
listens on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import time
import warnings
import weakref
from collections import OrderedDict
from typing import Any, Callable, Iterator

import dask
import numpy as np
from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

from . import staging
from .plan import Worker

#: Sustained GEMM FLOP/s of one NVIDIA H200 (132 SMs) per dtype, measured with cuBLAS at 8192³
#: (benchmarks/RESULTS.md).  Other GPUs are scaled by their SM count.
H200_FLOPS = {"float64": 59e12, "float32": 51e12, "tf32": 395e12, "float16": 715e12,
              "bfloat16": 743e12, "complex64": 51e12 / 4, "complex128": 59e12 / 4}
H200_SMS = 132
#: float32 products under ``emulate_fp32`` (mgemm.emulate), per scheme: one block task's GEMM on an
#: H200 (benchmarks/RESULTS.md, fifteenth session: bf16x6 96.5 TFLOP/s on 192-wide tiles; bf16x9
#: 57.1 on 128-wide ones, two thirds of bf16x6's rate as its 9 products against 6 predict)
H200_EMULATED_FLOPS = {"bf16x6": 96e12, "bf16x9": 64e12}
#: Per CPU thread, float64 (float32 twice that); a rough figure for modern x86 cores.
CPU_FLOPS_PER_THREAD = 3e10
#: Bytes/s a worker fetches a remote chunk at, by protocol (UCX assumes NVLink within a host).
LINK_BANDWIDTH = {"ucx": 150e9, "ucxx": 150e9, "tcp": 1.5e9, "tls": 1.0e9, "inproc": 1e12}


def gpu_flops(device: dict, dtype: Any, allow_tf32: bool = False,
              emulate: str = "off") -> float:
    """Estimated FLOP/s of one GPU for ``dtype``, from the H200 tables scaled by SM count
    (float32 under ``emulate``: the scheme's measured rate)."""
    name = np.dtype(dtype).name if str(dtype) != "bfloat16" else "bfloat16"
    if name == "float32" and allow_tf32:
        name = "tf32"
    rate = H200_FLOPS.get(name, H200_FLOPS["float32"] / 8)  # integers run off cuBLAS's fast path
    if name == "float32" and emulate != "off":
        rate = H200_EMULATED_FLOPS[emulate]
    return rate * device.get("sms", H200_SMS) / H200_SMS


#: NumPy's matmul of integers (and bool) runs without BLAS: one thread of a CI machine did int64
#: at 1.0 GFLOP/s and int32 at 2.4, against float64's 66 (512², seventy-third session).
CPU_INTEGER_SLOWDOWN = 32


def cpu_flops(nthreads: int, dtype: Any) -> float:
    """The cost model's rate of a CPU worker of ``nthreads`` threads, in the planner's FLOPs
    (2mnk, whatever the type): ``CPU_FLOPS_PER_THREAD`` a thread for float64, twice that for
    float32 and narrower floats, a quarter of the real type's for complex (a complex product is
    four real ones: 3.6 × slower measured, either precision), and float64's over
    ``CPU_INTEGER_SLOWDOWN`` for integers and bool."""
    # bfloat16: a name NumPy knows only once ml_dtypes is imported (the engine adds in float32)
    itemsize, kind = (2, "f") if str(dtype) == "bfloat16" else (np.dtype(dtype).itemsize,
                                                                np.dtype(dtype).kind)
    if kind == "c":
        return cpu_flops(nthreads, np.dtype(f"f{itemsize // 2}")) / 4
    if kind != "f":
        return nthreads * CPU_FLOPS_PER_THREAD / CPU_INTEGER_SLOWDOWN
    return nthreads * CPU_FLOPS_PER_THREAD * (2.0 if itemsize <= 4 else 1.0)


def device_info(dask_worker: Any = None) -> dict | None:
    """Runs on a worker: the GPU this process uses (model, SMs, memory), or None.

    "free" counts what an RMM pool of this process holds but does not use as free: the driver
    reports the whole pool as taken.  "copies": how this process copies NumPy chunks to its GPU
    and back (``mgemm.staging``'s settings, as dask.config gave them here)."""
    try:
        import cupy
        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        free, total = cupy.cuda.runtime.memGetInfo()
    except Exception:
        return None
    free = min(total, free + rmm_pool_unused(dask_worker))
    name = props["name"]
    return {"model": name.decode() if isinstance(name, bytes) else str(name),
            "sms": int(props["multiProcessorCount"]), "memory": int(total), "free": int(free),
            "cc": f"{props['major']}.{props['minor']}",
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0],
            "copies": dict(zip(("pinned", "threads", "keep"), staging.settings()))}


def rmm_pool_unused(dask_worker: Any = None) -> int:
    """Bytes of this process's RMM pool (if its current device resource is or wraps one) that no
    allocation uses, estimated as the pool's size less the bytes the Dask worker holds (its
    managed memory, the chunks it stores); 0 without RMM or a pool."""
    try:
        import rmm
        mr = rmm.mr.get_current_device_resource()
        while mr is not None and not isinstance(mr, rmm.mr.PoolMemoryResource):
            upstream = getattr(mr, "get_upstream", None)
            mr = upstream() if callable(upstream) else getattr(mr, "upstream_mr", None)
        if mr is None:
            return 0
        size = int(mr.pool_size())
    except Exception:
        return 0
    held = int(getattr(getattr(dask_worker, "state", None), "nbytes", 0) or 0)
    return max(0, size - held)


def workers_info(client: Any) -> dict[str, dict]:
    """Worker address → the scheduler's identity of that worker (``name``, ``nthreads``,
    ``memory_limit``, ``resources``, ...), for every worker, asked of the scheduler directly.

    Not ``client.scheduler_info(n_workers=-1)["workers"]``: that returns the client's cached
    identity, which the client's periodic refresh (it asks for no workers) can replace between
    the fetch and the read, so it sometimes lists none."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def worker_devices(client: Any, workers: Any = None) -> dict[str, dict | None]:
    """Worker address → ``device_info()`` there, cached per client and worker set
    (``workers``: the addresses, when the caller already has them from the scheduler).  The
    cache holds the client weakly: a closed client and its cluster are not kept alive by it."""
    if workers is None:
        workers = client.nthreads()
    addresses = tuple(sorted(workers))
    cached = _devices.setdefault(client, {})
    if addresses not in cached:
        if len(cached) >= 16:  # worker sets of a client whose workers come and go
            cached.clear()
        cached[addresses] = _query_devices(client, addresses)
    return cached[addresses]


def scheduler_snapshot(client: Any, keys: Any = ()) -> tuple[dict, dict]:
    """The scheduler's identity (its id and workers) and where ``keys`` live, in one round trip.

    Planning a product needs both; asked one after the other (plus the placement plugin's
    check) they cost a product about four client-scheduler round trips before any work starts.
    When the scheduler runs in this process on the client's event loop (the embedded cluster),
    both are read from it in place, on that loop: on two H200s over UCX the round trip through
    the comm took 4.4 ms of the client's 7.6 ms build (benchmarks/RESULTS.md, tenth session).
    """
    keys = list(keys)
    here = local_scheduler(client)
    if here is not None:
        async def read() -> tuple[dict, dict]:
            return here.identity(n_workers=-1), (here.get_who_has(keys) if keys else {})
        return client.sync(read)

    async def both() -> tuple[dict, dict]:
        import asyncio
        ident = client.scheduler.identity(n_workers=-1)
        if not keys:
            return await ident, {}
        return tuple(await asyncio.gather(ident, client.scheduler.who_has(keys=keys)))

    return client.sync(both)


def local_scheduler(client: Any) -> Any:
    """The client's ``distributed.Scheduler`` object when it runs in this process on the client's
    own event loop (a ``LocalCluster``/``LocalCUDACluster`` made here), else None.  Code run on
    that loop may then read and call it directly instead of through a comm."""
    from distributed import Scheduler
    scheduler = getattr(getattr(client, "cluster", None), "scheduler", None)
    if not isinstance(scheduler, Scheduler):
        return None
    try:
        same = (scheduler.address == client.scheduler.address
                and scheduler.loop.asyncio_loop is client.loop.asyncio_loop)
    except Exception:
        return None
    return scheduler if same else None


#: Each worker's first this many block tasks (in the plan's order) have their remote inputs
#: requested as soon as the plan is made (``prefetch``), while the graph is still on its way.
PREFETCH_BLOCKS = 2


def prefetch(client: Any, requests: dict) -> None:
    """Ask each worker ``w`` to start fetching the chunks ``requests[w]`` now, with Dask's own
    fire-and-forget ``acquire-replicas`` (the active memory manager's way to copy data), without
    waiting for an answer.

    A block task's inputs are otherwise fetched once the task reaches its worker, after the graph
    has gone through the scheduler: on two H200s that is 16–25 ms into a float16 32768³ product,
    and the first GEMM waits 5–8 ms more for its remote chunks (benchmarks/RESULTS.md, tenth
    session).  Started at planning time, the copies overlap the graph's way through Dask.  The
    copies are the ones the tasks would make; chunks already held, unknown or held nowhere are
    skipped.  The scheduler is called in place when it runs in this process, else through the
    handler that ``KeepPlacement`` adds (a scheduler without it is left alone).
    """
    requests = {w: list(keys) for w, keys in requests.items() if keys}
    if not requests:
        return
    here = local_scheduler(client)
    if here is not None:
        client.loop.add_callback(acquire_replicas, here, requests)
        return

    async def remote() -> None:
        try:
            await client.scheduler.mgemm_prefetch(requests=requests)
        except Exception:  # no mgemm plugin there: the tasks fetch their inputs themselves
            pass
    client.loop.add_callback(remote)


def chunk_views(x: Any, chunks: tuple, name: str) -> dict:
    """``{(name, *index): x[the chunk at index]}`` over Dask's normalized ``chunks``: views, no
    copies."""
    from dask.array.core import slices_from_chunks

    indices = itertools.product(*(range(len(c)) for c in chunks))
    return {(name, *index): x[part] for index, part in zip(indices, slices_from_chunks(chunks))}


def scatter(client: Any, x: Any, chunks: tuple, name: str, where: Any,
            sink: list | None = None) -> Any:
    """``x``, a NumPy or CuPy array, as a Dask array of ``chunks`` named ``name`` whose chunks
    are on the workers already: each chunk, by its index, to the worker ``where(index)`` names
    (None, or a worker that has left: any), sent by ``Client.scatter`` (passed on by the
    scheduler, or straight to the workers with ``Client(direct_to_workers=True)``, where a
    paused worker's chunks go to any worker too).  Scattered chunks have no lineage: a lost
    worker's are gone (``mgemm.api`` then builds the product again).  ``sink``: a list each
    chunk's future is appended to as it is scattered (the caller's, to cancel them should it
    fail part-way).

    ``dask.array.from_array`` would put the whole array in the graph, which the scheduler
    unpacks and holds in its tasks until they have run (a 4096² float64 product carried 256 MiB
    there; scattered, it took 1.9 s on two CPU workers against 2.5-4.7 s).
    """
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    by_worker: dict = {}
    for key, view in chunk_views(x, chunks, name).items():
        by_worker.setdefault(where(key[1:]), {})[key] = view
    named = sorted(w for w in by_worker if w is not None)
    if named and client.direct_to_workers:
        # straight to the workers, Client.scatter waits (30 s by default) for a named worker that
        # has left, or is paused, to run again: such a worker's chunks go to any worker instead
        running = client.sync(client.scheduler.ncores_running, workers=named)
        for worker in named:
            if worker not in running:
                by_worker.setdefault(None, {}).update(by_worker.pop(worker))
    futures: dict = {}
    for worker, data in by_worker.items():
        try:
            sent = _scatter_whole(client, data, None if worker is None else [worker])
        except KeyError:  # that worker has left since: any other
            if worker is None:
                raise
            sent = _scatter_whole(client, data, None)
        futures.update(sent)
        if sink is not None:
            sink.extend(sent.values())
    graph = HighLevelGraph.from_collections(name, futures, dependencies=())
    return da.Array(graph, name, chunks, meta=da.utils.meta_from_array(x, ndim=x.ndim))


def _scatter_whole(client: Any, data: dict, workers: list | None) -> dict:
    """``client.scatter(data, workers=workers)``, run to its end on the client's loop even where
    a Ctrl-C stops this thread's wait for it: the chunks of an interrupted call are released as
    soon as their futures exist.  ``Client.scatter`` cut short by the interrupt had sent them but
    never made their futures, and the scheduler kept them for the client until it closed."""
    import asyncio

    from distributed.worker import get_worker

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # called on an event loop (an asynchronous caller): no thread of its own to wait in
        return client.scatter(data, workers=workers)
    try:
        local_worker = get_worker()  # in a task: the chunks stay on this worker, as Client.scatter's
    except ValueError:
        local_worker = None
    sent = asyncio.run_coroutine_threadsafe(
        client._scatter(data, workers=workers, local_worker=local_worker), client.loop.asyncio_loop)
    try:
        return sent.result()
    except BaseException:
        sent.add_done_callback(_release_scattered)
        raise


def _release_scattered(sent: Any) -> None:
    """The done-callback of an interrupted ``_scatter_whole``: its chunks leave the workers."""
    if not sent.cancelled() and sent.exception() is None:
        for future in sent.result().values():
            future.release()


def register_placement(client: Any, placement: dict) -> None:
    """Tell the scheduler's ``KeepPlacement`` a product's placement (``graph.placement_of``), so
    that its block tasks keep it where Dask's low-level fusion drops the graph's annotations (by
    default, as any graph is computed).  Where the scheduler runs in this process, in place on
    the client's loop without waiting (it runs before any graph the caller computes next reaches
    the scheduler); else through the plugin's handler, one round trip (a scheduler without the
    handler: the graph's annotations alone place the tasks, where Dask's low-level fusion, which
    drops them, is off)."""
    if not placement:
        return
    here = local_scheduler(client)
    if here is not None:
        plugin = here.plugins.get(KeepPlacement.name)
        if plugin is not None:
            client.loop.add_callback(plugin.remember, placement)
        return
    payload = [[key, worker, priority] for key, (worker, priority) in placement.items()]
    try:
        client.sync(client.scheduler.mgemm_placement, placement=payload)
    except Exception:  # no such handler there (another mgemm, or none)
        pass


def _fused_keys(spec: Any) -> tuple:
    """The keys of the tasks Dask fused into the task ``spec`` (its subgraph's), else ()."""
    args = getattr(spec, "args", None)
    if args and isinstance(args[0], dict):
        return tuple(args[0])
    return ()


def acquire_replicas(scheduler: Any, requests: dict) -> int:
    """Scheduler side of ``prefetch`` (on its event loop): for each worker address, the keys
    that some other worker holds and it does not; returns how many were requested."""
    stimulus_id = f"mgemm-prefetch-{time.time()}"
    count = 0
    for address, keys in requests.items():
        ws = scheduler.workers.get(address)
        if ws is None:
            continue
        wanted = []
        for key in keys:
            key = _as_key(key)
            ts = scheduler.tasks.get(key)
            if ts is not None and ts.state == "memory" and ts.who_has and ws not in ts.who_has:
                wanted.append(key)
        if wanted:
            scheduler.request_acquire_replicas(address, wanted, stimulus_id=stimulus_id)
            count += len(wanted)
    return count


def _as_key(key: Any) -> Any:
    """A Dask key that came through a comm as a list (msgpack) back as the tuple it was."""
    return tuple(_as_key(k) for k in key) if isinstance(key, list) else key


#: Seconds the workers have to answer ``worker_devices`` (a CUDA context's start included): a
#: hung worker is then a ``TimeoutError``, not a command waiting with no output.
DEVICE_QUERY_TIMEOUT = 60


# client → worker set → devices (``worker_devices``)
_devices: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _query_devices(client: Any, addresses: tuple[str, ...]) -> dict[str, dict | None]:
    try:
        return client.run(device_info, workers=list(addresses),
                          callback_timeout=DEVICE_QUERY_TIMEOUT)
    except TimeoutError:
        raise TimeoutError(f"the workers did not say what devices they have within "
                           f"{DEVICE_QUERY_TIMEOUT} s: one of {', '.join(addresses)} is hung or "
                           f"overloaded") from None


def protocol(address: str) -> str:
    return address.split("://", 1)[0] if "://" in address else "inproc"


class NoWorkersError(RuntimeError):
    """The cluster has no workers to plan for (yet: an adaptive cluster may still be starting)."""


def describe_workers(client: Any, dtype: Any, *, gpu: bool, allow_tf32: bool = False,
                     emulate: str = "off", info: dict | None = None) -> list[Worker]:
    """The planner's view of the cluster: one ``Worker`` per Dask worker, sorted by address
    (``info``: the scheduler's per-worker identity, when the caller already has it)."""
    if info is None:
        info = workers_info(client)
    if not info:
        raise NoWorkersError("the Dask cluster has no workers")
    devices = worker_devices(client, info) if gpu else {}
    out = []
    for address in sorted(info):
        w = info[address]
        dev = devices.get(address)
        bandwidth = LINK_BANDWIDTH.get(protocol(address), 1e9)
        if gpu and dev:
            out.append(Worker(address, "gpu", gpu_flops(dev, dtype, allow_tf32, emulate),
                              int(dev["free"] * 0.8), bandwidth))
        else:
            # a block task per thread: worker processes run single-threaded BLAS (Dask's
            # nanny sets OMP_NUM_THREADS=1), so one task uses one of its cores
            threads = int(w.get("nthreads", 1))
            out.append(Worker(address, "cpu", cpu_flops(threads, dtype), host_memory(w),
                              bandwidth, slots=max(1, threads)))
    return out


def host_memory(info: dict | None = None) -> int:
    """The host bytes a plan may use on a worker (``info``: the scheduler's identity of it; None:
    this process): half its memory limit (Dask spills and pauses well before the limit); for
    this process, half the machine's memory (or its cgroup's limit); half of 8 GiB for a worker
    without a limit (its machine's memory is not in the scheduler's identity of it)."""
    from distributed.system import MEMORY_LIMIT  # the machine's memory, or its cgroup's limit

    limit = MEMORY_LIMIT if info is None else info.get("memory_limit")
    return int(limit or 8 << 30) // 2


def local_workers(dtype: Any, *, gpu: bool, allow_tf32: bool = False,
                  emulate: str = "off") -> list[Worker]:
    """The planner's view when there is no distributed client: this process, one worker."""
    if gpu:
        dev = device_info() or {}
        return [Worker("local", "gpu", gpu_flops(dev, dtype, allow_tf32, emulate),
                       int(dev.get("free", 64 << 30) * 0.8), 1e12)]
    threads = os.cpu_count() or 1
    return [Worker("local", "cpu", cpu_flops(threads, dtype), host_memory(), 1e12)]


def active_client(option: Any = None) -> Any:
    """The client to run on: ``option`` (a Client or an address), else the active one, else None.

    Planning waits for the scheduler's answers (its workers, where the inputs live), which the
    event loop of an asynchronous client cannot do while it runs this call: there, a
    ``RuntimeError`` says to call mgemm from a thread."""
    client = _find_client(option)
    if client is not None and client.asynchronous:
        raise RuntimeError(
            "mgemm plans with the scheduler's answers and cannot wait for them on the event loop "
            "of an asynchronous Client; call it in a thread, e.g. "
            "`c = await asyncio.to_thread(mgemm.matmul, a, b)`, then `await client.compute(c)`")
    return client


def on_async_loop(option: Any = None) -> bool:
    """Whether this thread runs the event loop of the asynchronous client mgemm would use
    (``active_client`` raises there)."""
    client = _find_client(option)
    return client is not None and bool(client.asynchronous)


def _find_client(option: Any) -> Any:
    if option is not None and not isinstance(option, str):
        if getattr(option, "status", None) in ("closing", "closed"):
            raise ValueError(f"mgemm: the client given is {option.status}: {option!r}")
        return option
    from distributed import get_client
    if isinstance(option, str):
        return _client_for(option)
    try:
        return get_client()
    except ValueError:
        return None


_clients: dict[str, Any] = {}


def _client_for(address: str) -> Any:
    """One client per scheduler address, made at first use; a new one where that one has closed
    (its scheduler gone for longer than the client waits to reconnect)."""
    client = _clients.get(address)
    if client is None or client.status == "closed":
        from distributed import Client
        _check_address(address)
        client = _clients[address] = Client(address, set_as_default=False)
    return client


def _check_address(address: str) -> None:
    """``ValueError`` for a scheduler address a client could not use: an unknown scheme, a TCP or
    TLS address without a port, UCX without distributed-ucxx.  Checked before the ``Client`` is
    made: one that fails in its constructor waits up to a minute to close when collected.

    >>> _check_address("tcp://10.0.0.1")
    Traceback (most recent call last):
    ...
    ValueError: missing port number in address '10.0.0.1'
    """
    from distributed.comm.addressing import get_address_host_port, parse_address
    from distributed.comm.registry import get_backend

    scheme, _ = parse_address(address)
    get_backend(scheme)
    if scheme in ("tcp", "tls"):
        get_address_host_port(address)
    if scheme == "tls" and not (dask.config.get("distributed.comm.tls.ca-file", None)
                                and dask.config.get("distributed.comm.tls.client.cert", None)):
        raise ValueError("a tls:// address needs the client's certificates in dask.config: "
                         "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT and "
                         "..._CLIENT__KEY (cluster/README.md), or give a Client made with "
                         "security=")
    if scheme == "ucx" and not has_ucx():
        raise ValueError("UCX addresses need distributed-ucxx (mgemm's cuda12 or cuda13 extra)")


def gpus_visible() -> int:
    from .engines import cuda_device_count
    return cuda_device_count()


def has_ucx() -> bool:
    try:
        import distributed_ucxx  # noqa: F401
        return True
    except ImportError:
        return False


#: The embedded GPU cluster's RMM pool starts at half a GPU's memory, at most this much, and grows
#: when a product needs more.  A peer maps a worker's whole pool the first time it receives from it
#: over NVLink (UCX's CUDA IPC), and on two H200s a pool of half the GPU (70 GB) stalled a fetch for
#: ~0.26 s, in early products on a new cluster; with 16 GiB the same fetches took 11-17 ms
#: (benchmarks/fresh_cluster_probe.py; benchmarks/RESULTS.md, seventh session).
RMM_POOL_CAP = 16 * 2**30

#: Block tasks a GPU worker of the embedded cluster runs at once.  A block task waits for its GPU
#: work before it returns, so with one thread the GPU idles while Dask hands the worker its next
#: task (~1 ms) and while a task waits for a fetch; with two, one task's GEMMs run while the other
#: task waits.  On two H200s (UCX, float16 32768³, one run each): 16384² chunks 0.079 → 0.067 s,
#: 8192² chunks 0.101 → 0.085 s (benchmarks/RESULTS.md, eighth session).
GPU_THREADS_PER_WORKER = 2

#: Bytes a GPU worker of the embedded cluster asks one peer for in one message.  Dask's default,
#: 50 MB, is less than one 8192² float32 chunk, so every chunk is a round trip of its own, and a
#: worker fetches from one peer one message at a time: 128 MiB float16 chunks came at ~40 GB/s
#: over NVLink where 512 MiB ones came at 110-140.  On two H200s, timed in turns on one cluster
#: (float16 32768³, 8192² chunks): 0.106 s with 50 MB, 0.085 / 0.084 / 0.086 s with 256 MiB /
#: 512 MiB / 1 GiB; float32 unchanged (benchmarks/RESULTS.md, eighth session).
GPU_TRANSFER_LIMIT = "512MiB"


def auto_rmm_pool_size(device_index: int = 0) -> int | float:
    """Bytes for the embedded cluster's RMM pool: half of the GPU's memory, at most
    ``RMM_POOL_CAP``, in 256-byte units (0.5, dask-cuda's "half", when the size is unknown)."""
    try:
        from dask_cuda.utils import get_device_total_memory
        total = get_device_total_memory(device_index)
    except Exception:  # no NVML, or a device without dedicated memory
        total = None
    if not total:
        return 0.5
    return min(int(total) // 2, RMM_POOL_CAP) // 256 * 256


#: Preloaded in the embedded cluster's worker processes: they ignore SIGINT.
WORKER_SETUP = "mgemm.worker_setup"


@contextlib.contextmanager
def _loop_blocking_sigint() -> Iterator[Any]:
    """A running Dask IO loop for the embedded cluster whose thread blocks SIGINT, handed to the
    cluster on leaving the block (its own loop runner then stops it when it closes).

    Each nanny starts its worker process from a thread the loop's thread starts, and a thread, a
    forked child and an exec'd program inherit the signal mask: the workers block a terminal's
    Ctrl-C from their first instruction, before ``WORKER_SETUP`` can ignore it (until then each
    printed a ``KeyboardInterrupt`` traceback from wherever its start had got to).  The calling
    thread blocks SIGINT only while the loop's thread is created, so a Ctrl-C at any moment of the
    cluster's start still reaches this process at once.  multiprocessing's resource tracker is
    started first: starting it unblocks SIGINT in the thread that does (a nanny's first queue
    started it from the loop's thread, and the workers then took Ctrl-C again)."""
    from distributed.utils import LoopRunner

    runner = LoopRunner()
    if hasattr(signal, "pthread_sigmask"):
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            runner.start()
        finally:  # a SIGINT that came meanwhile is delivered here
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    else:
        runner.start()
    try:
        yield runner.loop
    finally:  # the cluster's runner, started on this loop, now owns it (or none does: stopped)
        runner.stop()


def start_default_cluster(*, n_workers: int | None = None, protocol: str | None = None,
                          rmm_pool: str | None = "auto", transfer_limit: str | None = None,
                          transfer_sync: str = "stream", threads_per_worker: int | None = None,
                          quiet: bool = True) -> Any:
    """Start mgemm's embedded default cluster and return a Client to it.

    GPUs visible → ``LocalCUDACluster`` (one worker per GPU; ``protocol`` "ucx" with NVLink when
    distributed-ucxx is installed, else "tcp"; with RMM installed, an RMM pool of
    ``auto_rmm_pool_size()`` bytes unless ``rmm_pool`` names a size or is None).  No GPU → a
    ``LocalCluster`` of processes, over TCP whatever ``protocol`` asks (a warning says so).
    Work stealing is off on the scheduler so the plan's placement
    holds; restrictions stay loose so a lost worker's blocks run elsewhere.  ``transfer_limit``
    (e.g. "1GiB"): how many bytes a worker asks one peer for in one message (GPU workers:
    ``GPU_TRANSFER_LIMIT``; CPU workers: Dask's default, 50MB).
    ``transfer_sync``: "stream" (default) installs ``StreamScopedTransfers`` on UCX workers, so a
    transfer waits for the legacy default stream instead of the whole GPU; "device" keeps
    distributed-ucxx's whole-device synchronize.  ``threads_per_worker``: tasks a worker runs at
    once (GPU workers: ``GPU_THREADS_PER_WORKER``, two block tasks sharing the GPU, each on its
    own stream; CPU workers: the CPUs shared out).  The worker processes block SIGINT from their
    start (``_loop_blocking_sigint``) and ignore it (``WORKER_SETUP``, preloaded); this process
    takes a Ctrl-C whenever it comes.
    """
    if threads_per_worker is not None and threads_per_worker < 1:
        raise ValueError(f"threads_per_worker must be at least 1, got {threads_per_worker}")
    if transfer_sync not in ("stream", "device"):
        raise ValueError(f"transfer_sync must be 'stream' or 'device', got {transfer_sync!r}")
    import dask
    from distributed import Client, LocalCluster

    settings = {"distributed.scheduler.work-stealing": False}
    if quiet:
        settings["distributed.logging.distributed"] = "error"
    gpu = gpus_visible()
    transfer_limit = transfer_limit or (GPU_TRANSFER_LIMIT if gpu else None)
    if transfer_limit:
        settings["distributed.worker.transfer.message-bytes-limit"] = transfer_limit
    ucx = False
    with dask.config.set(settings), _loop_blocking_sigint() as loop:
        if gpu:
            from dask_cuda import LocalCUDACluster

            # ucxx sets UCX_MEMTYPE_CACHE when imported, a variable the UCX it ships (1.21) does not
            # read, and UCX then warns about it on stdout in every process; set before UCX loads
            # (has_ucx imports it) and inherited by the workers.  A user's own setting wins.
            os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
            proto = protocol or ("ucx" if has_ucx() else "tcp")
            ucx = proto.startswith("ucx")
            kwargs: dict[str, Any] = {"protocol": proto, "host": "127.0.0.1",
                                      "dashboard_address": "127.0.0.1:0",
                                      "preload": [WORKER_SETUP], "loop": loop}
            kwargs["threads_per_worker"] = threads_per_worker or GPU_THREADS_PER_WORKER
            if n_workers:  # the first n_workers of the GPUs this process may use
                if n_workers > gpu:
                    raise ValueError(f"{n_workers} workers asked of {gpu} GPU(s): one worker a GPU")
                given = os.environ.get("CUDA_VISIBLE_DEVICES", "")
                visible = [d.strip() for d in given.split(",") if d.strip()] or list(range(gpu))
                kwargs["CUDA_VISIBLE_DEVICES"] = visible[:n_workers]
            if ucx:
                kwargs.update(enable_nvlink=True, enable_tcp_over_ucx=True)
            if rmm_pool:
                try:
                    import rmm  # noqa: F401
                    kwargs["rmm_pool_size"] = auto_rmm_pool_size() if rmm_pool == "auto" else rmm_pool
                except ImportError:
                    pass
            cluster = _started(lambda: LocalCUDACluster(**kwargs))
        else:
            if protocol and protocol != "tcp":
                warnings.warn(f"no GPU visible: the embedded CPU cluster runs over TCP, not "
                              f"{protocol}", stacklevel=2)
            cpus = os.cpu_count() or 1
            workers = n_workers or max(2, min(4, cpus // 2))
            threads = threads_per_worker or max(1, cpus // workers)
            cluster = _started(lambda: LocalCluster(
                n_workers=workers, threads_per_worker=threads, processes=True, host="127.0.0.1",
                dashboard_address="127.0.0.1:0", preload=[WORKER_SETUP], loop=loop))
    client = Client(cluster)
    install_placement(client)
    if transfer_sync == "stream" and ucx:
        install_stream_scoped_transfers(client)
    return client


def _started(make: Callable[[], Any]) -> Any:
    """``make()``: a Dask cluster of this process, started.  Where its start is interrupted (a
    Ctrl-C) or fails, the cluster is closed here as far as distributed can close it, quietly,
    before the exception goes on, and not again at exit: there, a worker whose start the Ctrl-C
    had cancelled made distributed's own close print an ``AssertionError`` traceback after the
    command's "Aborted!".  A worker process whose start the close left running (it never joined
    the cluster, and stayed until this process ended: in a Python session, a GPU worker kept its
    memory pool) is ended too (``_end_started_workers``)."""
    import multiprocessing

    from distributed.deploy.spec import SpecCluster

    before, children = set(SpecCluster._instances), set(multiprocessing.active_children())
    try:
        return make()
    except BaseException:
        parts = set(SpecCluster._instances) - before
        for part in parts:
            with _quiet_distributed(), contextlib.suppress(Exception):
                part.close(timeout=10)
            part.shutdown_on_close = False  # closed as far as it would: not again at exit
        _end_started_workers(children, parts)
        raise


def _end_started_workers(children: set, parts: set, timeout: float = 5.0) -> None:
    """End the worker processes (multiprocessing children named as distributed's nannies name
    them) started since ``children`` that are still running after their clusters (``parts``)
    closed: SIGTERM, then SIGKILL after ``timeout`` seconds.  First, on each cluster's IO loop
    that still runs, every pending task gets a callback that takes its outcome, so that the
    nannies' starts, which then fail, log nothing (asyncio's "Task exception was never
    retrieved" tracebacks after the command's "Aborted!")."""
    import asyncio
    import multiprocessing
    import threading

    left = [p for p in multiprocessing.active_children()
            if p not in children and p.name.startswith("Dask Worker process")]
    if not left:
        return

    def taken(task: Any) -> None:
        if not task.cancelled():
            task.exception()

    for part in parts:
        loop = getattr(getattr(part, "loop", None), "asyncio_loop", None)
        if loop is None or loop.is_closed() or not loop.is_running():
            continue
        marked = threading.Event()

        def mark(loop=loop, marked=marked) -> None:
            for task in asyncio.all_tasks(loop):
                task.add_done_callback(taken)
            marked.set()
        with contextlib.suppress(RuntimeError):  # closed meanwhile
            loop.call_soon_threadsafe(mark)
            marked.wait(timeout)
    for proc in left:
        proc.terminate()
    for proc in left:
        if not _exited(proc.pid, timeout):
            proc.kill()
            _exited(proc.pid, timeout)


def _exited(pid: int, timeout: float) -> bool:
    """Whether the child ``pid`` exits within ``timeout`` seconds, waited for without reaping it:
    its nanny's process watcher reads its exit status (where this process read it first,
    distributed warned that the status "was already read")."""
    end = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except (ChildProcessError, AttributeError, OSError):
            return True  # reaped already (or no waitid: nothing to wait on here)
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


@contextlib.contextmanager
def _quiet_distributed() -> Iterator[None]:
    """distributed's log at CRITICAL within the block: closing a cluster under load logged
    workers killed after 4 s and heartbeats that found the scheduler gone, after a command's
    output."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def session(given: Any = None, **start: Any) -> Iterator[Any]:
    """The client a command runs on: ``given`` (a Client or a scheduler address), else the active
    client, else a new embedded default cluster (``start_default_cluster(**start)``), which is
    closed on leaving the block."""
    client = active_client(given)
    owned = client is None
    if owned:
        client = start_default_cluster(**start)
    try:
        yield client
    finally:
        if owned:
            cluster = client.cluster
            with _quiet_distributed():
                client.close()
                if cluster is not None:
                    cluster.close()


class KeepPlacement(SchedulerPlugin):
    """Scheduler plugin: Dask's work stealing leaves mgemm's planned block tasks alone, and block
    tasks that reach the scheduler without their placement get it back.

    Stealing may move a loosely restricted task to an idle worker; for a block whose panels already
    sit on the planned worker that costs a transfer of both panels, and in measurement it made
    run times bimodal.  With this plugin the plan holds while the planned worker lives; if it dies,
    the loose restriction lets the scheduler run the block elsewhere.

    A block task's placement travels as annotations of its graph layer, and Dask's low-level
    fusion (on by default) drops those as the graph is computed, whether the product itself is
    computed or operations chained after it (``da.tanh(mgemm.matmul(a, b))``: each block fused
    with its ``tanh``).  Clients send each product's placement here too (``register_placement``);
    a block task that arrives without restrictions, fused or not, then gets its planned worker
    (loosely) and priority before the scheduler places anything.  The last ``PLANNED`` tasks'
    placements are kept.

    Scheduler handlers: ``mgemm_prefetch`` (``prefetch``) and ``mgemm_placement``
    (``register_placement``), for clients in other processes.
    """

    name = "mgemm-keep-placement"
    #: a client in another process registers it again: the scheduler keeps the one it has, with
    #: the placements other clients sent it
    idempotent = True
    #: block tasks whose placement is kept for graphs still to arrive (oldest dropped first)
    PLANNED = 1 << 17

    def __init__(self, prefix: str = "mgemm-block-"):
        self.prefix = prefix
        self.scheduler = None
        self.planned: OrderedDict = OrderedDict()

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        # ``prefetch`` and ``register_placement`` from clients in other processes
        scheduler.handlers["mgemm_prefetch"] = lambda requests: acquire_replicas(scheduler, requests)
        scheduler.handlers["mgemm_placement"] = lambda placement: self.remember(
            {_as_key(key): (worker, priority) for key, worker, priority in placement})

    def remember(self, placement: dict) -> None:
        """Block task key → (worker, priority annotation), for graphs still to arrive; the
        newest are kept (a product registered again counts as new, not as when first seen)."""
        for key, place in placement.items():
            self.planned[key] = place
            self.planned.move_to_end(key)
        while len(self.planned) > self.PLANNED:
            self.planned.popitem(last=False)

    def update_graph(self, scheduler: Any, *, tasks: Any = (), **kwargs: Any) -> None:
        """Before the scheduler places a new graph's tasks: the planned worker and priority of
        each block task without restrictions (its own key, or a fused task's inner one)."""
        if not self.planned:
            return
        for key in tasks:
            name = key[0] if isinstance(key, tuple) else key
            ts = scheduler.tasks.get(key)
            # only tasks not placed yet: new ones, before the scheduler's first transition
            if not (isinstance(name, str) and name.startswith(self.prefix)) or ts is None \
                    or ts.worker_restrictions or ts.state != "released":
                continue
            found = self.planned.get(key)
            if found is None:
                found = next((self.planned[k] for k in _fused_keys(ts.run_spec)
                              if k in self.planned), None)
            if found is None or found[0] not in scheduler.workers:  # gone: Dask places it
                continue
            worker, priority = found
            ts.worker_restrictions = {worker}
            ts.loose_restrictions = True
            if ts.priority:
                ts.priority = (-priority, *ts.priority[1:])

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish != "processing" or self.scheduler is None:
            return
        name = key[0] if isinstance(key, tuple) else key
        if not (isinstance(name, str) and name.startswith(self.prefix)):
            return
        stealing = self.scheduler.extensions.get("stealing")
        ts = self.scheduler.tasks.get(key)
        if stealing is None or ts is None:
            return
        stealing.remove_key_from_stealable(ts)
        pending = stealing.unknown_durations.get(ts.prefix.name)
        if pending:
            pending.discard(ts)


_installed: set[str] = set()


def keep_extension_dtypes() -> bool:
    """Make CuPy arrays of ml_dtypes' types (bfloat16) keep their dtype between processes.

    distributed's CuPy serializers describe an array by its ``__cuda_array_interface__``, whose
    typestr for bfloat16 is ``"<V2"``: a bfloat16 chunk sent to another worker (or to the client)
    arrived as raw 2-byte voids, which neither mgemm's kernels nor cuBLAS multiply.  The wrapped
    serializers add the dtype's name to the header and the receiver views the array as that
    dtype again.  Idempotent; False where CuPy or distributed's CuPy support is missing.
    """
    global _dtype_wrappers_installed
    if _dtype_wrappers_installed:
        return True
    try:
        import cupy
        from distributed.protocol.cuda import cuda_deserialize, cuda_serialize
        from distributed.protocol.serialize import dask_deserialize, dask_serialize
        for ser, deser in ((cuda_serialize, cuda_deserialize), (dask_serialize, dask_deserialize)):
            named_ser, named_deser = with_dtype_names(ser.dispatch(cupy.ndarray),
                                                      deser.dispatch(cupy.ndarray))
            ser.register(cupy.ndarray, named_ser)
            deser.register(cupy.ndarray, named_deser)
    except Exception:
        return False
    _dtype_wrappers_installed = True
    return True


_dtype_wrappers_installed = False
DTYPE_HEADER = "mgemm-dtype"


def with_dtype_names(serialize: Any, deserialize: Any) -> tuple[Any, Any]:
    """(serialize, deserialize) wrapped so that an array of a named void-kind dtype (ml_dtypes'
    bfloat16 and its kin) carries the name in its header and is viewed as that dtype again."""
    def named_serialize(x: Any) -> tuple[dict, list]:
        header, frames = serialize(x)
        if x.dtype.kind == "V" and x.dtype.names is None and not x.dtype.name.startswith("void"):
            header = {**header, DTYPE_HEADER: x.dtype.name}
        return header, frames

    def named_deserialize(header: dict, frames: list) -> Any:
        x = deserialize(header, frames)
        name = header.get(DTYPE_HEADER)
        return x.view(extension_dtype(name)) if name else x

    return named_serialize, named_deserialize


def extension_dtype(name: str) -> np.dtype:
    """The NumPy dtype named ``name``, importing ml_dtypes first (which registers bfloat16)."""
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        pass
    return np.dtype(name)


class KeepExtensionDtypes(WorkerPlugin):
    """Installs ``keep_extension_dtypes`` on every worker (and on workers that join later)."""

    name = "mgemm-extension-dtypes"
    idempotent = True  # set up once on each worker, whichever client registers it

    def setup(self, worker: Any) -> None:
        keep_extension_dtypes()


class ReleaseCopies(WorkerPlugin):
    """Drops a product's kept device copies (``mgemm.staging``) once this worker has none of its
    tasks left to run.

    The copies count the reads the plan makes of each chunk on this worker and go after the
    last.  Where some reads never come (a block failed and the rest were cancelled, a Ctrl-C, a
    lost worker's blocks ran elsewhere), the counts would stay behind: the copies held GPU
    memory until their host chunks died, and a later run of the same product, its reads counted
    on top of the stale ones, kept its copies too.  Here each task of the product, a block or a
    part by its key, a fused one by the keys fused into it, is followed while it waits, runs or
    is cancelled but still running; when none is left, no read of the product can come here
    until the scheduler sends its tasks again, and its copies go.  (A task that came back to
    this worker after such a moment counts its reads afresh: at worst a copy made again.)
    """

    name = "mgemm-release-copies"
    idempotent = True  # set up once on each worker, whichever client registers it
    #: a worker's task states in which it is still to run, or running
    TO_RUN = frozenset({"waiting", "ready", "constrained", "executing", "long-running",
                        "cancelled", "resumed"})

    def setup(self, worker: Any) -> None:
        self.worker = worker
        self.products: dict = {}  # key of a task to run -> the product it belongs to
        self.live: dict = {}  # product -> how many of its tasks this worker has to run

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        # the task's state, not ``finish``: a running task let go of is reported "released"
        # and is "cancelled", still running
        ts = self.worker.state.tasks.get(key)
        if (ts.state if ts is not None else finish) in self.TO_RUN:
            if key not in self.products:
                product = self._product(key)
                if product is not None:
                    self.products[key] = product
                    self.live[product] = self.live.get(product, 0) + 1
            return
        product = self.products.pop(key, None)
        if product is not None:
            self.live[product] -= 1
            if not self.live[product]:
                del self.live[product]
                staging.COPIES.drop(product)

    def _product(self, key: Any) -> str | None:
        """The product of the task ``key``: its own key's, else that of a key fused into it."""
        from .graph import product_of

        spec = getattr(self.worker.state.tasks.get(key), "run_spec", None)
        for k in (key, *_fused_keys(spec)):
            found = product_of(k[0] if isinstance(k, tuple) else k)
            if found is not None:
                return found
        return None


def install_placement(client: Any, scheduler_id: str | None = None) -> bool:
    """Register ``KeepPlacement`` on the client's scheduler once (and ``KeepExtensionDtypes`` and
    ``ReleaseCopies`` on its workers); False if the placement plugin cannot be.

    Remembered per scheduler id (``scheduler_id``: when the caller already has it), so a new
    scheduler (or a restarted one) gets the plugin again.
    """
    if scheduler_id is None:
        try:
            scheduler_id = client.scheduler_info(n_workers=0)["id"]
        except Exception:
            scheduler_id = None
    if scheduler_id is not None and scheduler_id in _installed:
        return True
    keep_extension_dtypes()  # this process receives result chunks too
    try:
        client.register_plugin(KeepExtensionDtypes(), name=KeepExtensionDtypes.name)
    except Exception as exc:
        warnings.warn(f"mgemm could not install its dtype plugin on the workers ({exc}); bfloat16 "
                      "chunks that move between workers arrive as raw bytes", stacklevel=2)
    try:
        client.register_plugin(ReleaseCopies(), name=ReleaseCopies.name)
    except Exception as exc:
        warnings.warn(f"mgemm could not install its copy plugin on the workers ({exc}); device "
                      "copies of host chunks whose reads never all ran stay until the chunks "
                      "are released", stacklevel=2)
    try:
        client.register_plugin(KeepPlacement(), name=KeepPlacement.name)
    except Exception as exc:  # a remote scheduler without mgemm installed, say
        warnings.warn(f"mgemm could not install its placement plugin on the scheduler ({exc}); "
                      "the blocks' planned workers hold only where Dask's low-level fusion is "
                      "off, and work stealing may move them", stacklevel=2)
        return False
    if scheduler_id is not None:
        _installed.add(scheduler_id)
    return True


def _synchronize_legacy_default_stream(*_: Any, **__: Any) -> None:
    """Wait for the legacy default stream of this process's current device (and so for every
    blocking stream's earlier work), not for the whole device."""
    import cupy
    cupy.cuda.runtime.streamSynchronize(0)


class StreamScopedTransfers(WorkerPlugin):
    """On UCX workers, make a transfer wait for the legacy default stream instead of the device.

    distributed-ucxx synchronizes the whole GPU (``Device.sync()``, on the event loop) before it
    sends or receives device frames.  A fetch then waits for every kernel queued on the sending
    and the receiving GPU: on two H200s each fetch of a chunk took about one block task's GEMMs
    (~90 ms for a 8192² float32 chunk, whatever its size), so fetches could not overlap compute.
    mgemm's block tasks run on their thread's own non-blocking stream and synchronize it before
    they return, so the data they hand to Dask is complete; receive buffers are allocated on
    the legacy default stream.  Waiting for that stream keeps both guarantees and lets a
    transfer proceed while other tasks' kernels run.  Work that hands Dask a CuPy array while
    kernels writing it are still queued on a *non-blocking* stream of its own is not covered:
    on clusters running such tasks, leave this plugin off (``transfer_sync="device"``).
    """

    name = "mgemm-stream-scoped-transfers"

    def setup(self, worker: Any) -> None:
        try:
            import distributed_ucxx.ucxx as comm
        except ImportError:
            return
        self._comm = comm
        self._original = comm.synchronize_stream
        comm.synchronize_stream = _synchronize_legacy_default_stream

    def teardown(self, worker: Any) -> None:
        comm = getattr(self, "_comm", None)
        if comm is not None:
            comm.synchronize_stream = self._original


def install_stream_scoped_transfers(client: Any) -> bool:
    """Register ``StreamScopedTransfers`` on every worker of ``client``'s cluster (and on workers
    that join later); False if it could not be."""
    try:
        client.register_plugin(StreamScopedTransfers(), name=StreamScopedTransfers.name)
    except Exception as exc:
        warnings.warn(f"mgemm could not install its transfer plugin on the workers ({exc})",
                      stacklevel=2)
        return False
    return True
