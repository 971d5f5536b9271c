"""Orchestrator variants timed in turns on one cluster and one set of inputs.

Between clusters the same setting moves by more than the differences being looked for (float16
32768³ with 8192² chunks: 0.085 s on one cluster, 0.098 s on the next), so each variant here is
applied in turn, run after run, on the same embedded cluster and the same inputs (``--layout``):

    base        mgemm as configured
    pieces      each worker's first block with remote inputs cut into K pieces even when short
                (mgemm.plan.MIN_PIECE_SECONDS = 0.001): the held pieces start before any fetch ends
    limit<size> the workers fetch up to <size> (e.g. limit512MiB) from one peer per message
                (Dask's default: 50 MB, less than one 8192² float32 chunk, so every chunk is a
                round trip of its own); limitdefault: the cluster's value
    ownstream   each task thread on a CUDA stream of its own (mgemm.engines.ONE_STREAM_PER_GPU off)
    onestream   the task threads of a GPU on one stream (ONE_STREAM_PER_GPU on)
    noprefetch  no prefetch of the first tasks' remote inputs (mgemm.cluster.PREFETCH_BLOCKS = 0)
    persistent  mgemm with engine="persistent" (on an H200, float16/bfloat16 blocks go to the
                Hopper kernel, a block's K chunks in one launch)
    block<n>    mgemm with block_size=n, e.g. block16384: output blocks of 16384² over 8192² chunks
                (four times a chunk's work per task, half the tasks' start-up per GPU)
    switch<us>  Python's thread switch interval (``sys.setswitchinterval``) set to <us> µs on the
                workers and in this process (the scheduler's) for the run, e.g. switch500us
                (Python's default: 5000 µs, how long a thread may keep the GIL from the others)
    a+b         both (e.g. pieces+limit512MiB)
    dask        dask.array.matmul

Usage (GPU host, both GPUs):
    python3 benchmarks/variants_in_turns.py --dtype float16 --chunk 8192 16384 --repeat 7 \
        --variants base pieces limit512MiB dask
Prints one line per run and a table of medians, × 2·one-GPU cuBLAS when --anchor (TFLOP/s of
benchmarks/cublas_one_gpu.py at the same size) is given; --json appends the rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys

import dask.array as da
from dask.utils import parse_bytes
from distributed import wait

import mgemm
import mgemm.cluster as mcluster
import mgemm.plan as plan
from mgemm import bench
from mgemm.cluster import start_default_cluster

VARIANTS = ("base", "pieces", "limit512MiB", "dask")


def _set_one_stream(one: bool):
    def apply():
        import mgemm.engines
        mgemm.engines.ONE_STREAM_PER_GPU = one
    return apply


def _one_stream_setting() -> bool:
    import mgemm.engines
    return mgemm.engines.ONE_STREAM_PER_GPU


def _set_limit(limit: float):
    def apply(dask_worker):
        dask_worker.state.transfer_message_bytes_limit = limit
    return apply


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=32768)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--chunk", type=int, nargs="+", default=[8192, 16384])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--anchor", type=float, default=None, help="one-GPU cuBLAS TFLOP/s")
    p.add_argument("--json", default=None)
    p.add_argument("--cpu", action="store_true", help="NumPy chunks (a smoke run without GPUs)")
    p.add_argument("--layout", choices=bench.LAYOUTS, default="cyclic",
                   help="where the inputs are persisted: block-cyclically, or where Dask puts them")
    args = p.parse_args()
    gpu = not args.cpu

    client = start_default_cluster()
    default_limit = next(iter(client.run(
        lambda dask_worker: dask_worker.state.transfer_message_bytes_limit).values()))
    default_piece = plan.MIN_PIECE_SECONDS
    default_prefetch = mcluster.PREFETCH_BLOCKS
    default_switch = sys.getswitchinterval()
    default_stream = next(iter(client.run(_one_stream_setting).values()))
    gpus = len(client.nthreads())
    flops = 2.0 * args.n ** 3
    rows = []
    layouts_held = contextlib.ExitStack()  # runs start from the persisted layout (bench.timed)
    layouts_held.enter_context(bench.memory_manager_paused(client))
    for chunk in args.chunk:
        case = bench.Case(f"{args.dtype}-{args.n}-c{chunk}", args.n, args.n, args.n, args.dtype, chunk)
        persist = bench.persister(args.layout)
        a = persist(client, lambda: bench.random_matrix(
            (args.n, args.n), chunk, args.dtype, gpu=gpu, seed=1))
        b = persist(client, lambda: bench.random_matrix(
            (args.n, args.n), chunk, args.dtype, gpu=gpu, seed=2))
        wait([a, b])
        keep = bench.chunk_homes(client, a, b)  # every run starts from the persisted layout
        times: dict[str, list[float]] = {v: [] for v in args.variants}

        def make(variant: str):
            parts = variant.split("+")
            plan.MIN_PIECE_SECONDS = 0.001 if "pieces" in parts else default_piece
            mcluster.PREFETCH_BLOCKS = 0 if "noprefetch" in parts else default_prefetch
            limit = next((p[len("limit"):] for p in parts if p.startswith("limit")), "default")
            client.run(_set_limit(default_limit if limit == "default" else parse_bytes(limit)))
            one = "onestream" in parts or ("ownstream" not in parts and default_stream)
            client.run(_set_one_stream(one))
            switch = next((float(p[len("switch"):-2]) * 1e-6 for p in parts if p.startswith("switch")),
                          default_switch)
            client.run(sys.setswitchinterval, switch)
            sys.setswitchinterval(switch)
            if "dask" in parts:
                return lambda: da.matmul(a, b)
            opts = {"engine": "persistent"} if "persistent" in parts else {}
            block = next((int(p[len("block"):]) for p in parts if p.startswith("block")), None)
            if block:
                opts["block_size"] = block
            return lambda: mgemm.matmul(a, b, **opts)

        for variant in args.variants:  # warm-up and check, once each
            seconds, c = bench.timed(client, make(variant), keep=keep)
            err = bench.check(a, b, c, tol=bench.tolerance(args.dtype))
            print(f"{case.name} {variant}: warm-up {seconds:.3f} s, rel err {err:.2e}", flush=True)
            del c
        for r in range(args.repeat):
            for variant in args.variants:
                marks: dict[str, float] = {}
                seconds, c = bench.timed(client, make(variant), marks=marks, keep=keep)
                del c
                times[variant].append(seconds)
                print(f"{case.name} run {r} {variant}: {seconds:.4f} s "
                      f"(submitted {marks['submitted']:.4f}, done {marks['done']:.4f})", flush=True)
        plan.MIN_PIECE_SECONDS = default_piece
        mcluster.PREFETCH_BLOCKS = default_prefetch
        client.run(sys.setswitchinterval, default_switch)
        sys.setswitchinterval(default_switch)
        client.run(_set_limit(default_limit))
        client.run(_set_one_stream(default_stream))
        for variant, ts in times.items():
            med = statistics.median(ts)
            tflops = flops / med / 1e12
            row = {"case": case.name, "variant": variant, "gpus": gpus, "seconds": ts, "median_s": med,
                   "tflops": tflops, "anchor_tflops": args.anchor,
                   "vs_ideal": tflops / (gpus * args.anchor) if args.anchor else None}
            rows.append(row)
        del a, b
    base = {r["case"]: r["median_s"] for r in rows if r["variant"] == "dask"}
    print(f"{'case':<22} {'variant':<20} {'median s':>9} {'TFLOP/s':>8} {'x ideal':>8} {'x dask':>7}")
    for r in rows:
        ideal = f"{r['vs_ideal']:.3f}" if r["vs_ideal"] else "-"
        vs_dask = base.get(r["case"], float("nan")) / r["median_s"]
        print(f"{r['case']:<22} {r['variant']:<20} {r['median_s']:>9.4f} {r['tflops']:>8.1f} "
              f"{ideal:>8} {vs_dask:>7.2f}")
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    layouts_held.close()
    client.close()
    cluster = getattr(client, "cluster", None)
    if cluster is not None:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
