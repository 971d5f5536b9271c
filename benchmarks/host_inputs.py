"""Matrices held in host memory, multiplied on the GPUs: mgemm beside cuBLASXt and dask-cuda's way.

A user whose matrices live in host memory as NumPy chunks (read from disk, say) has three ways to
multiply them on a machine's GPUs, and this times all three on the same inputs, in one run:

- ``mgemm``: ``mgemm.matmul(a, b, engine="cublas")`` on the embedded ``LocalCUDACluster`` (one
  worker per GPU); each block task copies its chunks to its worker's GPU, multiplies there and
  copies the block back, so the result is NumPy chunks held on the workers.  ``mgemm`` copies
  and multiplies one K part at a time (``mgemm.graph.STAGE_BY_PART``) and keeps the copies of
  chunks its worker reads again (``mgemm.staging``); ``mgemm-nokeep`` copies every chunk again
  for each block that reads it; ``mgemm-whole`` copies each block whole first;
  ``mgemm-cupy`` copies with CuPy's own copies instead of mgemm's pinned buffers
  (``mgemm.staging.PINNED_COPIES`` off); ``mgemm-copy4`` fills those buffers with 4 threads;
  ``mgemm-b<edge>`` (or ``mgemm-b<rows>x<cols>``) takes that output block size, not the plan's.
- ``dask``: what a dask-cuda user writes, ``(a.map_blocks(cupy.asarray) @
  b.map_blocks(cupy.asarray)).map_blocks(cupy.asnumpy)``, on the same cluster and inputs.
- ``xt``: cuBLASXt (libcublas's multi-GPU host API) in this process, on the whole matrices
  gathered here, over every GPU, with cuBLASXt pinning the host memory itself (``xt``) and on
  matrices already in pinned memory (``xt-pinned``); ``--xt-block`` its tile edges; float32 and
  float64 only (other dtypes print that it was not run).

Inputs: random chunks made on the workers (``--chunk``), persisted block-cyclically, then
gathered into this process for cuBLASXt, which runs first (the workers' memory pools, grown by
the cluster's runs, would leave it no GPU memory; the workers restart between dtypes for the
same reason).  Each method runs once untimed and is checked against
a float64 reference on sampled rows and columns; then ``--runs`` timed runs.  A method that
fails prints its error and the others still run; the script then exits with status 1.  A
cluster run is timed as ``mgemm bench`` times it (build, ``persist``, ``wait``, a device
synchronize on every worker); a cuBLASXt call blocks until its result is in host memory.  The anchor,
``--gpus`` times one GPU's cuBLAS on device-resident inputs (CUDA events), is measured first,
for every dtype.

    python3 benchmarks/host_inputs.py [--size 32768] [--dtypes float32,float64] [--runs 5]
        [--chunk 8192] [--protocol ucx|tcp] [--xt-block 4096,8192] [--trace]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402

import mgemm  # noqa: E402
from mgemm import bench, graph, staging  # noqa: E402
from mgemm.cluster import gpus_visible, session  # noqa: E402

#: cublasOperation_t CUBLAS_OP_N; cublasXtPinnedMemMode_t CUBLASXT_PINNING_ENABLED
_OP_N, _PINNING_ENABLED = 0, 1
_XT_GEMM = {"float32": ("cublasXtSgemm", ctypes.c_float),
            "float64": ("cublasXtDgemm", ctypes.c_double)}


def one_gpu_tflops(n: int, dtype: str, reps: int = 5) -> float:
    """The anchor: ``cublas_one_gpu.time_matmul`` (cuBLAS on GPU 0, device-resident inputs, CUDA
    events) as median TFLOP/s, with this process's pool emptied after it, since GPU 0 is also a
    worker's."""
    import cupy
    from cublas_one_gpu import time_matmul  # benchmarks/, this script's folder

    with cupy.cuda.Device(0):
        seconds = statistics.median(time_matmul(n, dtype, reps))
        cupy.get_default_memory_pool().free_all_blocks()
    return 2 * n ** 3 / seconds / 1e12


class CublasXt:
    """The few cuBLASXt calls a row-major GEMM over every GPU needs, through ctypes."""

    def __init__(self, gpus: int, block: int | None, pinning: bool) -> None:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        self.lib = ctypes.CDLL(load_nvidia_dynamic_lib("cublas").abs_path or "libcublas.so.13")
        self.handle = ctypes.c_void_p()
        self._ok(self.lib.cublasXtCreate(ctypes.byref(self.handle)), "cublasXtCreate")
        devices = (ctypes.c_int * gpus)(*range(gpus))
        self._ok(self.lib.cublasXtDeviceSelect(self.handle, gpus, devices), "cublasXtDeviceSelect")
        if block:
            self._ok(self.lib.cublasXtSetBlockDim(self.handle, block), "cublasXtSetBlockDim")
        if pinning:
            self._ok(self.lib.cublasXtSetPinningMemMode(self.handle, _PINNING_ENABLED),
                     "cublasXtSetPinningMemMode")

    @staticmethod
    def _ok(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} returned cublasStatus_t {status}")

    def matmul(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        """``out = a @ b`` for C-ordered host arrays: column-major cuBLASXt computes
        ``out^T = b^T a^T``, which is the same memory."""
        m, k = a.shape
        n = b.shape[1]
        name, scalar = _XT_GEMM[a.dtype.name]
        fn = getattr(self.lib, name)
        size = ctypes.c_size_t
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, size, size, size,
                       ctypes.c_void_p, ctypes.c_void_p, size, ctypes.c_void_p, size,
                       ctypes.c_void_p, ctypes.c_void_p, size]
        one, zero = scalar(1.0), scalar(0.0)
        self._ok(fn(self.handle, _OP_N, _OP_N, n, m, k, ctypes.byref(one), b.ctypes.data, n,
                    a.ctypes.data, k, ctypes.byref(zero), out.ctypes.data, n), name)

    def close(self) -> None:
        self.lib.cublasXtDestroy(self.handle)


def pinned_like(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` in page-locked host memory (CuPy's pinned allocator)."""
    import cupy

    mem = cupy.cuda.alloc_pinned_memory(x.nbytes)
    out = np.frombuffer(mem, dtype=x.dtype, count=x.size).reshape(x.shape)
    out[...] = x
    return out


def time_xt(xt: CublasXt, a: np.ndarray, b: np.ndarray, runs: int, tol: float) -> list[float]:
    """Seconds of ``runs`` cuBLASXt products, the output poisoned before each; the first and the
    last checked as the cluster's are (``bench.check``: sampled rows and columns, float64)."""
    out = np.full((a.shape[0], b.shape[1]), np.nan, dtype=a.dtype)
    xt.matmul(a, b, out)
    bench.check(a, b, out, tol=tol)
    times = []
    for _ in range(runs):
        out[...] = np.nan
        start = time.perf_counter()
        xt.matmul(a, b, out)
        times.append(time.perf_counter() - start)
    bench.check(a, b, out, tol=tol)
    return times


def _time_xt_with(gpus: int, block: int, pinning: bool, a: np.ndarray, b: np.ndarray,
                  runs: int, tol: float) -> list[float]:
    """``time_xt`` on a cuBLASXt handle of its own, closed however it ends."""
    xt = CublasXt(gpus, block, pinning=pinning)
    try:
        return time_xt(xt, a, b, runs, tol)
    finally:
        xt.close()


def _dask_cuda_way(a: da.Array, b: da.Array) -> da.Array:
    import cupy

    meta = cupy.empty((0, 0), dtype=a.dtype)
    product = a.map_blocks(cupy.asarray, meta=meta) @ b.map_blocks(cupy.asarray, meta=meta)
    return product.map_blocks(cupy.asnumpy, meta=np.empty((0, 0), dtype=a.dtype))


#: mgemm's variants, as the settings each changes on the workers: ``graph.STAGE_BY_PART``
#: (copy and multiply by K part, else whole blocks), ``staging.CACHE_FRACTION`` (0: copy a chunk
#: again for every block that reads it), ``staging.PINNED_COPIES`` (else CuPy's own copies) and
#: ``staging.COPY_THREADS`` (threads copying between host arrays and the pinned buffers).
STAGING = {"mgemm": {},
           "mgemm-nokeep": {"CACHE_FRACTION": 0.0},
           "mgemm-whole": {"STAGE_BY_PART": False},
           "mgemm-cupy": {"PINNED_COPIES": False},
           "mgemm-copy4": {"COPY_THREADS": 4}}
_DEFAULTS = {"STAGE_BY_PART": graph.STAGE_BY_PART, "CACHE_FRACTION": staging.CACHE_FRACTION,
             "PINNED_COPIES": staging.PINNED_COPIES, "COPY_THREADS": staging.COPY_THREADS}


def _set_staging(settings: dict) -> None:
    """On a worker: mgemm's defaults, then ``settings`` (one of ``STAGING``'s)."""
    from mgemm import graph, staging
    settings = {**_DEFAULTS, **settings}
    graph.STAGE_BY_PART = settings.pop("STAGE_BY_PART")
    for name, value in settings.items():
        setattr(staging, name, value)


def time_cluster(client, a: da.Array, b: da.Array, make, runs: int, tol: float,
                 trace: bool = False) -> list[float]:
    """Seconds of ``runs`` products on the cluster, after one checked against float64.  ``trace``:
    one more run under Dask's task stream, printed per worker (``bench.traced``) with each
    task's start and seconds: where a block's time went (its copies, GEMMs and copy back run
    inside the task)."""
    keep = bench.chunk_homes(client, a, b)
    out = make(a, b).persist()
    bench.check(a, b, out, tol=tol)
    if type(out.blocks[0, 0].compute()) is not np.ndarray:
        raise AssertionError("the product's chunks are not NumPy arrays")
    del out
    times = []
    for _ in range(runs):
        seconds, out = bench.timed(client, lambda: make(a, b), keep=keep)
        times.append(seconds)
        del out
    if trace:
        seconds, out, summary = bench.traced(client, lambda: make(a, b), keep=keep)
        del out
        print(f"    traced run {seconds:.3f} s: {bench.format_summary(summary)}")
        for w in summary.values():
            print("      tasks (start+seconds): " + ", ".join(
                f"{t0:.3f}+{dt:.3f}" for t0, dt, _ in sorted(w["task_log"])))
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=32768)
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--chunk", type=int, default=8192)
    p.add_argument("--protocol", default="ucx", choices=("ucx", "tcp"))
    p.add_argument("--xt-block", default="4096,8192",
                   help="cuBLASXt tile edges to time, comma-separated (0: its default)")
    p.add_argument("--methods",
                   default="mgemm,mgemm-nokeep,mgemm-whole,mgemm-cupy,mgemm-copy4,dask,xt,xt-pinned")
    p.add_argument("--trace", action="store_true",
                   help="after mgemm's timed runs, one more under Dask's task stream, printed")
    p.add_argument("--engine", default="cublas",
                   help="mgemm's engine (numpy: a dry run of the script on a CPU cluster)")
    args = p.parse_args()
    methods = args.methods.split(",")
    n = args.size
    flop = 2 * n ** 3
    failed = []
    with session(protocol=args.protocol) as client:
        gpus = len(client.nthreads())
        print(f"{gpus} workers, {args.protocol}, {n}³, chunks {args.chunk}², runs {args.runs}")
        # every anchor first, while GPU 0 has no worker's memory pool on it
        anchors = {dtype: one_gpu_tflops(n, dtype) if gpus_visible() else float("nan")
                   for dtype in args.dtypes.split(",")}
        for dtype, anchor in anchors.items():
            ideal = gpus * anchor
            tol = bench.tolerance(dtype)
            print(f"\n{dtype}: one-GPU cuBLAS {anchor:.1f} TFLOP/s, ideal ({gpus} GPUs) "
                  f"{ideal:.1f}")
            a = bench.persist_cyclic(client, lambda: bench.random_matrix(
                (n, n), args.chunk, dtype, gpu=False, seed=11))
            b = bench.persist_cyclic(client, lambda: bench.random_matrix(
                (n, n), args.chunk, dtype, gpu=False, seed=12))
            rows = {}

            def run(name: str, timing) -> None:
                """One method's row, printed as soon as it is measured; a method that fails
                (cuBLASXt out of GPU memory, say) prints its error and the others still run."""
                try:
                    rows[name] = times = timing()
                except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                    print(f"  {name:28s} failed: {type(exc).__name__}: {exc}")
                    failed.append(f"{dtype} {name}")
                    return
                med = statistics.median(times)
                tflops = flop / med / 1e12
                print(f"  {name:28s} median {med:.3f} s ({', '.join(f'{t:.3f}' for t in times)})"
                      f"  {tflops:7.1f} TFLOP/s  {tflops / ideal:.2f} of ideal")

            # cuBLASXt first: the workers' memory pools grow with the cluster's runs and do not
            # give memory back, which left cuBLASXt none on a GPU they share (status 3)
            xt = [m for m in methods if m in ("xt", "xt-pinned")]
            if xt and dtype not in _XT_GEMM:
                print(f"  {', '.join(xt)}: cuBLASXt has no {dtype} GEMM here (float32 and "
                      "float64 only); not run")
            elif xt:
                host_a, host_b = a.compute(), b.compute()
                for block in [int(x) for x in args.xt_block.split(",")]:
                    if "xt" in methods:
                        run(f"xt (block {block or 'default'})", lambda block=block: _time_xt_with(
                            gpus, block, True, host_a, host_b, args.runs, tol))
                    if "xt-pinned" in methods:
                        run(f"xt-pinned (block {block or 'default'})",
                            lambda block=block: _time_xt_with(
                                gpus, block, False, pinned_like(host_a), pinned_like(host_b),
                                args.runs, tol))
                del host_a, host_b
            for method, setting in STAGING.items():
                if method in methods:
                    client.run(_set_staging, setting)
                    run(method, lambda: time_cluster(
                        client, a, b, lambda x, y: mgemm.matmul(x, y, engine=args.engine),
                        args.runs, tol, args.trace))
            client.run(_set_staging, STAGING["mgemm"])
            for method in methods:  # mgemm-b<edge> or mgemm-b<rows>x<cols>: that block size
                if method.startswith("mgemm-b"):
                    edges = tuple(int(e) for e in method[len("mgemm-b"):].split("x"))
                    block = edges[0] if len(edges) == 1 else edges
                    run(method, lambda block=block: time_cluster(
                        client, a, b, lambda x, y: mgemm.matmul(
                            x, y, engine=args.engine, block_size=block), args.runs, tol,
                        args.trace))
            if "dask" in methods:
                run("dask", lambda: time_cluster(client, a, b, _dask_cuda_way, args.runs, tol))
            if "mgemm" in rows and len(rows) > 1:
                base = statistics.median(rows["mgemm"])
                print("  mgemm's speed-up: " + ", ".join(
                    f"{statistics.median(t) / base:.2f}x {name}" for name, t in rows.items()
                    if name != "mgemm"))
            a = b = None  # released before the next dtype's inputs
            if dtype != list(anchors)[-1]:
                client.restart()  # new worker processes: memory pools of their first size
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
