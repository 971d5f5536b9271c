"""mgemm on the GPUs of one machine: a LocalCUDACluster (one worker per GPU, UCX over NVLink when
distributed-ucxx is installed), CuPy inputs persisted on the workers, and mgemm.matmul beside
dask.array.matmul timed with a device synchronize on every worker; for float32 also mgemm.matmul
with emulate_fp32="on" (float32 on bfloat16 tensor cores, on sm_90 GPUs; exact elsewhere).  Last,
the same matrices held in host memory as NumPy chunks, multiplied on the GPUs with
engine="cublas" (each block's chunks copied to its GPU and the block back).

    python examples/local_cuda.py         # MGEMM_EXAMPLE_N=8192 MGEMM_EXAMPLE_DTYPE=float64 ...
"""

import os
import statistics
import sys

try:
    import cupy
    from dask_cuda import LocalCUDACluster
except ImportError as exc:  # a machine without the GPU stack: say what to run instead
    sys.exit(f"examples/local_cuda.py needs GPUs with CuPy and dask-cuda (pip install "
             f"'mgemm[cuda13]' or 'mgemm[cuda12]'); missing: {exc.name}. On CPUs, run "
             f"examples/local_cpu.py")
import dask
import dask.array as da
import numpy as np
from distributed import Client, wait

import mgemm
import mgemm.bench
import mgemm.cluster

#: Relative error bound against a float64 reference, by input dtype (K up to ~32k).
TOLERANCE = {"float64": 1e-12, "float32": 1e-4, "float16": 1e-2}


def timed(client, make, repeats=5):
    """Median seconds over ``repeats`` runs of ``make()`` (``mgemm.bench.timed``: each run starts
    with one copy of every input chunk, ends with a device synchronize on every worker, and
    finds none of the previous run's results still held)."""
    times = []
    for _ in range(repeats):
        seconds, result = mgemm.bench.timed(client, make)
        times.append(seconds)
        del result  # free the GPU memory before the next run
    return statistics.median(times)


def random_on_gpu(shape, dtype, chunks, seed):
    """A dask array of CuPy chunks, generated on the host and copied to the worker's GPU."""
    host = da.random.default_rng(seed).standard_normal(shape, chunks=chunks).astype(dtype)
    return host.map_blocks(cupy.asarray, dtype=dtype, meta=cupy.empty((0, 0), dtype=dtype))


def main():
    n = int(os.environ.get("MGEMM_EXAMPLE_N", 16384))
    dtype = np.dtype(os.environ.get("MGEMM_EXAMPLE_DTYPE", "float32"))
    protocol = "ucx" if _has_ucx() else "tcp"
    kwargs = {"protocol": protocol, "host": "127.0.0.1", "dashboard_address": None}
    if _has_rmm():
        # half of each GPU, at most 16 GiB (it grows when needed): a peer maps the whole pool on
        # its first NVLink receive, and a bigger pool makes that first transfer slower
        kwargs["rmm_pool_size"] = mgemm.cluster.auto_rmm_pool_size()
    # two block tasks per GPU and 512 MiB per transfer message, as mgemm's embedded cluster
    kwargs["threads_per_worker"] = mgemm.cluster.GPU_THREADS_PER_WORKER
    limit = {"distributed.worker.transfer.message-bytes-limit": mgemm.cluster.GPU_TRANSFER_LIMIT}
    with dask.config.set(limit), LocalCUDACluster(**kwargs) as cluster, Client(cluster) as client:
        gpus = len(client.nthreads())
        a = random_on_gpu((n, n), dtype, n // 4, seed=1)
        b = random_on_gpu((n, n), dtype, n // 4, seed=2)
        a, b = client.persist([a, b])
        wait([a, b])

        flop = 2 * n**3
        print(f"{gpus} GPU worker(s) over {protocol}; {n}x{n}x{n} {dtype}, median of 5")
        ways = {"mgemm.matmul": {}}
        if dtype == np.float32:
            ways["mgemm emulate_fp32"] = {"emulate_fp32": "on"}
        for name, options in ways.items():
            seconds = timed(client, lambda: mgemm.matmul(a, b, **options))
            print(f"  {name:18} {seconds:8.3f} s  {flop / seconds / 1e12:7.1f} TFLOP/s")
        seconds = timed(client, lambda: da.matmul(a, b))
        print(f"  {'dask.array.matmul':18} {seconds:8.3f} s  {flop / seconds / 1e12:7.1f} TFLOP/s")

        # Check sampled rows and columns (first and last blocks) against float64 on the host.
        idx = np.unique(np.r_[0:32, n - 32:n])
        ref = (cupy.asnumpy(a[idx].compute()).astype(np.float64)
               @ cupy.asnumpy(b[:, idx].compute()).astype(np.float64))
        for name, options in ways.items():
            got = cupy.asnumpy(mgemm.matmul(a, b, **options)[idx][:, idx].compute())
            err = np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref)
            print(f"  {name}: relative error against float64: {err:.2e}")
            assert err < TOLERANCE.get(dtype.name, 1e-2), err

        # The same matrices in host memory (NumPy chunks on the workers), multiplied on the GPUs.
        host_a, host_b = client.persist([a.map_blocks(cupy.asnumpy, meta=np.empty((0, 0), dtype)),
                                         b.map_blocks(cupy.asnumpy, meta=np.empty((0, 0), dtype))])
        wait([host_a, host_b])
        seconds = timed(client, lambda: mgemm.matmul(host_a, host_b, engine="cublas"))
        print(f"  {'host chunks, cublas':18} {seconds:8.3f} s  {flop / seconds / 1e12:7.1f} TFLOP/s")
        got = mgemm.matmul(host_a, host_b, engine="cublas")[idx][:, idx].compute()
        assert isinstance(got, np.ndarray), type(got)
        err = np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref)
        print(f"  host chunks: relative error against float64: {err:.2e}")
        assert err < TOLERANCE.get(dtype.name, 1e-2), err


def _has_ucx():
    try:
        import distributed_ucxx  # noqa: F401
    except ImportError:
        return False
    return True


def _has_rmm():
    try:
        import rmm  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":  # worker processes re-import this file
    main()
