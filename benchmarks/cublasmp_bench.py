"""cuBLASMp on the same products as ``mgemm bench``: C = A @ B over every GPU of this host, one
process a GPU, A, B and C held on the GPUs in cuBLASMp's 2-D block-cyclic layout (as ScaLAPACK
holds them), multiplied by ``cublasMpGemm``.  It is the distributed-memory library a user could
pick instead of mgemm for matrices already on the GPUs, so its rows sit beside mgemm's and
dask.array.matmul's in the scaling report (``mgemm.bench.scaling_summary``).

Per case and block size: inputs filled on each GPU from a hash of the global (row, column); two
warm-up products, the first over an output poisoned with NaN, the second over one poisoned with a
number no entry reaches, then checked (no poison and no NaN left anywhere; sampled rows and
columns, some of every block, against a float64 reference made from the same hash, rounded to the
dtype first, within ``mgemm.bench.tolerance``); then ``--repeat`` products, each started after a
barrier of all the processes and timed with CUDA events on each GPU; a run's time is the slowest
GPU's.  JSON rows (method ``cublasmp``) go to ``--json``.

    python3 benchmarks/cublasmp_bench.py --suite foundation --repeat 5 --json rows.jsonl
    python3 benchmarks/cublasmp_bench.py --n 32768 --dtypes float32,bfloat16 --block 4096 8192
    python3 benchmarks/cublasmp_bench.py --suite scaling --gpus 8 --plan   # layout only, no GPU

Needs cuBLASMp for CUDA 13 and the NCCL, NVSHMEM and cuBLAS libraries it links.  The GPU hosts'
PyTorch 2.11 installs NCCL 2.28.9, NVSHMEM 3.4.5 and cuBLAS 13.0; cuBLASMp 0.7.0 is the last
release that takes NCCL 2.28 (0.8 asks for 2.29.2), so carry that wheel:
``pip download --no-deps -d .whl nvidia-cublasmp-cu13==0.7.0.125``.  The libraries are found
under ``nvidia/*/lib`` on ``sys.path`` (``MGEMM_CUBLASMP_LIB`` and ``MGEMM_NCCL_LIB`` name them
outright) and loaded before cuBLASMp, so its own search path does not matter.

NVLink multicast stays off: NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1 and
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are set in every process (whatever the environment had), and
CUBLASMP_DISABLE_NVSHMEM=1 keeps cuBLASMp from starting NVSHMEM (which its grid creation would
otherwise do, and whose multicast paths it can take); only ``cublasMpGemm`` runs, on buffers CuPy
allocated, none of ``cublasMpMatmul``'s multicast algorithms.  The processes are daemons that the
kernel kills with their parent.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: Set in every process before any CUDA library loads: multicast objects can take a shared
#: host's GPUs out of service, so nothing here may create one.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
                "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "CUBLASMP_DISABLE_NVSHMEM": "1"}

# cuBLAS / CUDA enum values (cublas_api.h, library_types.h; cublasmp.h for the grid layout)
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF = 0, 1, 2, 14
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F = 68, 70
CUBLAS_OP_N = 0
CUBLASMP_GRID_LAYOUT_COL_MAJOR = 0

#: dtype -> (cudaDataType_t, cublasComputeType_t, ctypes type of alpha and beta).  16-bit inputs
#: add up in float32, as cupy.matmul's cuBLAS calls (the one-GPU anchor) do; float32 without TF32.
TYPES = {"float64": (CUDA_R_64F, CUBLAS_COMPUTE_64F, ctypes.c_double),
         "float32": (CUDA_R_32F, CUBLAS_COMPUTE_32F, ctypes.c_float),
         "float16": (CUDA_R_16F, CUBLAS_COMPUTE_32F, ctypes.c_float),
         "bfloat16": (CUDA_R_16BF, CUBLAS_COMPUTE_32F, ctypes.c_float)}

# NaN bit patterns of the 16-bit types (the poison) and the smallest NaN magnitude of each
NAN16 = {"float16": (0x7E00, 0x7C00), "bfloat16": (0x7FC0, 0x7F80)}


class Case(NamedTuple):
    name: str
    m: int
    n: int
    k: int
    dtype: str
    block: int  # the block-cyclic block size (mb = nb)


# --- the block-cyclic layout (pure; tests/test_cublasmp_bench.py) ------------------------------

def numroc(n: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> int:
    """How many of n rows (or columns), dealt in blocks of nb over nprocs processes starting at
    isrcproc, process iproc holds (ScaLAPACK's NUMROC)."""
    mydist = (nprocs + iproc - isrcproc) % nprocs
    nblocks, extra = divmod(n // nb, nprocs)
    num = nblocks * nb
    if mydist < extra:
        num += nb
    elif mydist == extra:
        num += n % nb
    return num


def local_to_global(count: int, nb: int, iproc: int, nprocs: int) -> list[int]:
    """The global indices of process iproc's ``count`` local rows (or columns), in local order
    (source process 0)."""
    return [((l // nb) * nprocs + iproc) * nb + l % nb for l in range(count)]


def sample_local(count: int, nb: int, samples: int, rng: Any) -> list[int]:
    """Local indices to check among ``count`` (blocks of nb): one in every block, so that no block
    of the output goes unchecked, then others at random up to ``samples`` in all."""
    picks = {b + int(rng.integers(min(nb, count - b))) for b in range(0, count, nb)}
    rest = [i for i in rng.permutation(count).tolist() if i not in picks]
    return sorted(picks | set(rest[:max(0, samples - len(picks))]))


def grid_shape(procs: int) -> tuple[int, int]:
    """nprow x npcol for ``procs`` processes: as square as divides evenly, fewer rows than
    columns (2: 1 x 2, 4: 2 x 2, 8: 2 x 4)."""
    nprow = max(d for d in range(1, math.isqrt(procs) + 1) if procs % d == 0)
    return nprow, procs // nprow


def grid_position(rank: int, nprow: int) -> tuple[int, int]:
    """(process row, process column) of ``rank`` on a column-major grid."""
    return rank % nprow, rank // nprow


def local_shapes(case: Case, rank: int, nprow: int, npcol: int) -> dict[str, tuple[int, int]]:
    """The local (rows, columns) of A (m x k), B (k x n) and C (m x n) on ``rank``."""
    r, c = grid_position(rank, nprow)
    nb = case.block

    def shape(rows: int, cols: int) -> tuple[int, int]:
        return numroc(rows, nb, r, 0, nprow), numroc(cols, nb, c, 0, npcol)

    return {"A": shape(case.m, case.k), "B": shape(case.k, case.n), "C": shape(case.m, case.n)}


def plan_table(cases: list[Case], procs: int, grid: tuple[int, int]) -> str:
    """Each case's grid, block and per-GPU local shapes and memory (``--plan``)."""
    from mgemm.bench import array_dtype

    nprow, npcol = grid
    lines = [f"{procs} GPU(s), grid {nprow} x {npcol} (column-major)"]
    for case in cases:
        lines.append(f"{case.name}: {case.m}x{case.n}x{case.k} {case.dtype}, blocks of {case.block}")
        for rank in range(procs):
            shapes = local_shapes(case, rank, nprow, npcol)
            held = sum(r * c for r, c in shapes.values()) * array_dtype(case.dtype).itemsize
            lines.append(f"  rank {rank} {grid_position(rank, nprow)}: "
                         + "  ".join(f"{k} {r}x{c}" for k, (r, c) in shapes.items())
                         + f"  {held / 2**30:.1f} GiB")
    return "\n".join(lines)


def cases_from(args: argparse.Namespace, gpus: int) -> list[Case]:
    """The cases to run: ``--suite`` (mgemm bench's, by name, block = its Dask chunk unless
    ``--block``) or ``--n`` x ``--dtypes``."""
    if args.suite:
        from mgemm import bench
        suite = [c for c in bench.SUITES[args.suite](gpus) if c.dtype in TYPES]
        if args.case:
            suite = [c for c in suite if c.name in args.case]
        base = [(c.name, c.m, c.n, c.k, c.dtype, c.chunk) for c in suite]
    else:
        base = [(f"{dt}-{n}", n, n, n, dt, None) for n in args.n for dt in args.dtypes.split(",")]
    out = []
    for name, m, n, k, dtype, chunk in base:
        if dtype not in TYPES:
            raise SystemExit(f"cuBLASMp benchmark: no dtype {dtype!r}; one of {sorted(TYPES)}")
        for block in args.block or [chunk or 4096]:
            out.append(Case(name, m, n, k, dtype, int(block)))
    return out


# --- the libraries (ctypes) ---------------------------------------------------------------------

def _find_library(soname: str, env: str | None = None) -> str:
    """A path to ``soname``: $env, else the first ``nvidia/*/lib`` or ``nvidia/*/*/lib`` on
    sys.path that has it, else the bare name for the loader's own search."""
    if env and os.environ.get(env):
        return os.environ[env]
    for entry in sys.path:
        for pattern in ("nvidia/*/lib", "nvidia/*/*/lib"):
            hits = sorted(glob.glob(os.path.join(entry or ".", pattern, soname)))
            if hits:
                return hits[0]
    return soname


class Libraries:
    """NCCL and cuBLASMp through ctypes, their dependencies loaded first (globally, so that
    cuBLASMp's own lookups by name find them)."""

    def __init__(self) -> None:
        for soname in ("libcublasLt.so.13", "libcublas.so.13", "libnvshmem_host.so.3"):
            try:
                ctypes.CDLL(_find_library(soname), mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass  # left to cuBLASMp's own search; its load below says what is missing
        self.nccl = ctypes.CDLL(_find_library("libnccl.so.2", "MGEMM_NCCL_LIB"), mode=ctypes.RTLD_GLOBAL)
        self.mp = ctypes.CDLL(_find_library("libcublasmp.so.0", "MGEMM_CUBLASMP_LIB"))
        self.nccl.ncclGetErrorString.restype = ctypes.c_char_p
        i64, vp, sz, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        self.mp.cublasMpMatrixDescriptorCreate.argtypes = [i64, i64, i64, i64, i64, i64, i64, c_int, vp,
                                                          ctypes.POINTER(vp)]
        self.mp.cublasMpGridCreate.argtypes = [i64, i64, c_int, vp, ctypes.POINTER(vp)]
        gemm = [vp, c_int, c_int, i64, i64, i64, vp, vp, i64, i64, vp, vp, i64, i64, vp, vp, vp, i64, i64, vp,
                c_int]
        self.mp.cublasMpGemm_bufferSize.argtypes = gemm + [ctypes.POINTER(sz), ctypes.POINTER(sz)]
        self.mp.cublasMpGemm.argtypes = gemm + [vp, sz, vp, sz]

    def nccl_check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what}: NCCL error {status} ({self.nccl.ncclGetErrorString(status).decode()})")

    @staticmethod
    def mp_check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what}: cuBLASMp status {status}")

    def version(self) -> int:
        v = ctypes.c_int()
        self.mp_check(self.mp.cublasMpGetVersion(ctypes.byref(v)), "cublasMpGetVersion")
        return v.value


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


# --- one process a GPU --------------------------------------------------------------------------

_VALUE = r"""
unsigned long long x = (unsigned long long)gi * 0x9E3779B97F4A7C15ull
                     + (unsigned long long)gj * 0xD1B54A32D192ED03ull + seed;
x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29; x *= 0x94D049BB133111EBull; x ^= x >> 32;
out = (T)((double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0);
"""


def _values(cp: Any, gi: Any, gj: Any, seed: int, dtype: str) -> Any:
    """The matrix entries at global rows gi x columns gj (broadcast: a column and a row of int64),
    in [-1, 1), column-major, as the dtype holds them: made in float64 for float64, else in
    float32 and rounded to the dtype."""
    from mgemm.bench import array_dtype

    kernel = cp.ElementwiseKernel("int64 gi, int64 gj, uint64 seed", "T out", _VALUE, "mgemm_cublasmp_value")
    wide = cp.float64 if dtype == "float64" else cp.float32
    vals = kernel(gi, gj, cp.uint64(seed), cp.empty((gi.shape[0], gj.shape[1]), dtype=wide, order="F"))
    return vals if vals.dtype == array_dtype(dtype) else vals.astype(array_dtype(dtype), order="F")


def _wide(cp: Any, x: Any) -> Any:
    """x in float64 (16-bit types through float32, which every CuPy converts them to)."""
    return x.astype(cp.float64) if x.dtype.itemsize >= 4 else x.astype(cp.float32).astype(cp.float64)


def _index(cp: Any, count: int, nb: int, iproc: int, nprocs: int) -> Any:
    import numpy as np
    return cp.asarray(np.asarray(local_to_global(count, nb, iproc, nprocs), dtype=np.int64))


#: The second poison, and the magnitude no entry of these products reaches (inputs in [-1, 1):
#: an entry is a sum of k products, about sqrt(k) / 3 in size, a few hundred at most), as 16-bit
#: patterns where the dtype is 16-bit (30000 and 20000; bfloat16 29952 and 19968).
BIG, BIG_FLOOR = 3e4, 2e4
BIG16 = {"float16": (0x7753, 0x74E2), "bfloat16": (0x46EA, 0x469C)}


def _poison(cp: Any, c: Any, dtype: str, patterns16: dict, value: float) -> None:
    """``c`` filled with ``value``; a 16-bit dtype with its bit pattern (``patterns16[dtype][0]``:
    NAN16, BIG16), written as integers."""
    if dtype in patterns16:
        c.view(cp.uint16).fill(patterns16[dtype][0])
    else:
        c.fill(value)


def _has_big(cp: Any, c: Any, dtype: str) -> bool:
    """Whether an entry's magnitude is BIG_FLOOR or more (NaN aside)."""
    if dtype in BIG16:
        mag = c.view(cp.uint16) & 0x7FFF
        return bool(((mag >= BIG16[dtype][1]) & (mag <= NAN16[dtype][1])).any())
    return bool((cp.abs(c) >= BIG_FLOOR).any())


def _has_nan(cp: Any, c: Any, dtype: str) -> bool:
    if dtype in NAN16:
        return bool(((c.view(cp.uint16) & 0x7FFF) > NAN16[dtype][1]).any())
    return bool(cp.isnan(c).any())


def _check(cp: Any, c: Any, case: Case, rows: Any, cols: Any, samples: int, seed: int) -> dict:
    """Sampled entries of this rank's C (``sample_local`` rows x columns) against a float64
    reference of the same global rows and columns."""
    import numpy as np

    from mgemm.bench import array_dtype, tolerance

    rng = np.random.default_rng(seed)
    li = cp.asarray(sample_local(rows.shape[0], case.block, samples, rng))
    lj = cp.asarray(sample_local(cols.shape[0], case.block, samples, rng))
    if li.size == 0 or lj.size == 0:
        return {"rel_err": 0.0, "checked": 0, "tolerance": tolerance(case.dtype)}
    ks = cp.arange(case.k, dtype=cp.int64)
    a_rows = _wide(cp, _values(cp, rows[li][:, None], ks[None, :], 1, case.dtype))
    b_cols = _wide(cp, _values(cp, ks[:, None], cols[lj][None, :], 2, case.dtype))
    ref = a_rows @ b_cols
    if case.dtype in NAN16:  # gathered as 16-bit words, then read as the dtype
        got = c.view(cp.uint16)[li][:, lj].view(array_dtype(case.dtype))
    else:
        got = c[li][:, lj]
    got = _wide(cp, got)
    err = float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))
    return {"rel_err": err, "checked": int(li.size * lj.size), "tolerance": tolerance(case.dtype)}


def _run_case(cp: Any, libs: Libraries, handle: Any, grid: Any, stream: Any, barrier: Any, rank: int,
              nprow: int, npcol: int, case: Case, repeat: int, samples: int) -> dict:
    from mgemm.bench import array_dtype

    cuda_type, compute, scalar = TYPES[case.dtype]
    r, c = grid_position(rank, nprow)
    nb = case.block
    shapes = local_shapes(case, rank, nprow, npcol)
    dt = array_dtype(case.dtype)
    with stream:
        a_rows, a_cols = _index(cp, shapes["A"][0], nb, r, nprow), _index(cp, shapes["A"][1], nb, c, npcol)
        b_rows, b_cols = _index(cp, shapes["B"][0], nb, r, nprow), _index(cp, shapes["B"][1], nb, c, npcol)
        c_rows, c_cols = _index(cp, shapes["C"][0], nb, r, nprow), _index(cp, shapes["C"][1], nb, c, npcol)
        a = _values(cp, a_rows[:, None], a_cols[None, :], 1, case.dtype)
        b = _values(cp, b_rows[:, None], b_cols[None, :], 2, case.dtype)
        out = cp.empty(shapes["C"], dt, order="F")
        _poison(cp, out, case.dtype, NAN16, float("nan"))
    stream.synchronize()
    descs = []
    for (rows, cols), arr in (((case.m, case.k), a), ((case.k, case.n), b), ((case.m, case.n), out)):
        d = ctypes.c_void_p()
        libs.mp_check(libs.mp.cublasMpMatrixDescriptorCreate(rows, cols, nb, nb, 0, 0, max(1, arr.shape[0]),
                                                             cuda_type, grid, ctypes.byref(d)),
                      "cublasMpMatrixDescriptorCreate")
        descs.append(d)
    alpha, beta = scalar(1.0), scalar(0.0)
    args = [handle, CUBLAS_OP_N, CUBLAS_OP_N, case.m, case.n, case.k, ctypes.addressof(alpha),
            a.data.ptr, 1, 1, descs[0], b.data.ptr, 1, 1, descs[1], ctypes.addressof(beta),
            out.data.ptr, 1, 1, descs[2], compute]
    d_size, h_size = ctypes.c_size_t(), ctypes.c_size_t()
    try:
        libs.mp_check(libs.mp.cublasMpGemm_bufferSize(*args, ctypes.byref(d_size), ctypes.byref(h_size)),
                      "cublasMpGemm_bufferSize")
        d_work = cp.empty(max(1, d_size.value), dtype=cp.uint8)
        h_work = ctypes.create_string_buffer(max(1, h_size.value))
        work = [d_work.data.ptr, d_size.value, ctypes.addressof(h_work), h_size.value]

        def gemm() -> None:
            libs.mp_check(libs.mp.cublasMpGemm(*args, *work), "cublasMpGemm")

        barrier.wait(timeout=300)
        # Two warm-ups, each checked: over C poisoned with NaN, then with a number far past any
        # entry of the product; an entry left unwritten keeps the second poison, and NaN after
        # the first alone means C was read although beta is 0 (0 x NaN), which is not an error
        # in the product.  Every rank runs both (the products are collective).
        gemm()
        stream.synchronize()
        nan_first = _has_nan(cp, out, case.dtype)
        with stream:
            _poison(cp, out, case.dtype, BIG16, BIG)
        barrier.wait(timeout=300)
        gemm()
        stream.synchronize()
        unwritten = _has_big(cp, out, case.dtype)
        result = {"nan": _has_nan(cp, out, case.dtype), "unwritten": unwritten,
                  "reads_c": nan_first and not unwritten}
        with stream:
            result.update(_check(cp, out, case, c_rows, c_cols, samples, seed=rank))
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(repeat):
            barrier.wait(timeout=300)
            stream.synchronize()
            start.record(stream)
            gemm()
            stop.record(stream)
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        result.update(times=times, workspace=d_size.value)
        return result
    finally:
        for d in descs:
            libs.mp.cublasMpMatrixDescriptorDestroy(d)


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this process when its parent goes (PR_SET_PDEATHSIG, SIGKILL), so
    no rank keeps a GPU, or waits in a collective, after the run that started it is gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # gone before the call above
        os._exit(1)


def _rank_main(rank: int, world: int, grid_dims: tuple[int, int], uid_q: Any, barrier: Any, out_q: Any,
               cases: list[Case], repeat: int, samples: int, parent: int) -> None:
    _die_with_parent(parent)
    os.environ.update(NO_MULTICAST)
    try:
        import cupy as cp

        cp.cuda.Device(rank).use()
        cp.zeros(1)  # the context, before NCCL
        libs = Libraries()
        uid = NcclUniqueId()
        if rank == 0:
            libs.nccl_check(libs.nccl.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
            raw = ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))
            for _ in range(world - 1):
                uid_q.put(raw)
        else:
            ctypes.memmove(ctypes.addressof(uid), uid_q.get(timeout=300), ctypes.sizeof(uid))
        comm = ctypes.c_void_p()
        libs.nccl_check(libs.nccl.ncclCommInitRank(ctypes.byref(comm), world, uid, rank), "ncclCommInitRank")
        stream = cp.cuda.Stream(non_blocking=True)
        handle, grid = ctypes.c_void_p(), ctypes.c_void_p()
        libs.mp_check(libs.mp.cublasMpCreate(ctypes.byref(handle), ctypes.c_void_p(stream.ptr)), "cublasMpCreate")
        nprow, npcol = grid_dims
        libs.mp_check(libs.mp.cublasMpGridCreate(nprow, npcol, CUBLASMP_GRID_LAYOUT_COL_MAJOR, comm,
                                                 ctypes.byref(grid)), "cublasMpGridCreate")
        if rank == 0:
            out_q.put(("version", rank, libs.version()))
        for i, case in enumerate(cases):
            res = _run_case(cp, libs, handle, grid, stream, barrier, rank, nprow, npcol, case, repeat, samples)
            out_q.put(("case", rank, (i, res)))
            cp.get_default_memory_pool().free_all_blocks()
        libs.mp.cublasMpGridDestroy(grid)
        libs.mp.cublasMpDestroy(handle)
        libs.nccl.ncclCommFinalize(comm)
        libs.nccl.ncclCommDestroy(comm)
        out_q.put(("done", rank, None))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which stops the others
        out_q.put(("error", rank, f"{type(exc).__name__}: {exc}"))


def run(cases: list[Case], gpus: int, grid: tuple[int, int], repeat: int, samples: int,
        timeout: float) -> tuple[list[dict], int | None]:
    """Every case on ``gpus`` processes; one row per case (``error`` set where it failed)."""
    import multiprocessing as mp
    import queue

    os.environ.update(NO_MULTICAST)  # the children start from this environment
    ctx = mp.get_context("spawn")
    uid_q, out_q, barrier = ctx.Queue(), ctx.Queue(), ctx.Barrier(gpus)
    procs = [ctx.Process(target=_rank_main, daemon=True,
                         args=(r, gpus, grid, uid_q, barrier, out_q, cases, repeat, samples, os.getpid()))
             for r in range(gpus)]
    for p in procs:
        p.start()
    results: dict[int, dict[int, dict]] = {}
    version, error = None, None
    deadline = time.monotonic() + timeout
    try:
        finished: set[int] = set()
        while len(finished) < gpus and error is None:
            try:
                kind, rank, payload = out_q.get(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            except queue.Empty:
                # a rank that died without a word (a crash, a kill, a library's exit()) ends the run
                gone = [r for r, p in enumerate(procs) if p.exitcode is not None and r not in finished]
                if gone:
                    error = f"rank {gone[0]} exited with status {procs[gone[0]].exitcode} and no report"
                elif time.monotonic() >= deadline:
                    error = f"timed out after {timeout:.0f} s"
                continue
            if kind == "version":
                version = payload
            elif kind == "case":
                i, res = payload
                results.setdefault(i, {})[rank] = res
                _print_progress(cases[i], results[i], gpus)
            elif kind == "error":
                error = f"rank {rank}: {payload}"
            else:
                finished.add(rank)
    finally:
        for p in procs:
            p.join(timeout=5 if error is None else 0.1)
            if p.is_alive():
                p.kill()
    rows = [_row(case, results.get(i, {}), gpus, grid, version, error) for i, case in enumerate(cases)]
    return rows, version


def _print_progress(case: Case, per_rank: dict, gpus: int) -> None:
    if len(per_rank) == gpus:
        print(f"{case.name} (blocks of {case.block}): done on {gpus} GPU(s)", flush=True)


def _row(case: Case, per_rank: dict, gpus: int, grid: tuple[int, int], version: int | None,
         error: str | None) -> dict:
    row: dict[str, Any] = {"case": case.name, "method": "cublasmp", "dtype": case.dtype, "m": case.m,
                           "n": case.n, "k": case.k, "block": case.block, "gpus": gpus,
                           "grid": f"{grid[0]}x{grid[1]}", "cublasmp_version": version}
    if len(per_rank) < gpus:
        row["error"] = error or "no result"
        return row
    runs = [max(per_rank[r]["times"][i] for r in per_rank) for i in range(len(per_rank[0]["times"]))]
    med = statistics.median(runs)
    errs = [per_rank[r]["rel_err"] for r in per_rank]
    err = float("nan") if any(math.isnan(e) for e in errs) else max(errs)
    tol = per_rank[0].get("tolerance")
    row.update(seconds=runs, median_s=med, tflops=2.0 * case.m * case.n * case.k / med / 1e12, rel_err=err,
               checked=sum(per_rank[r]["checked"] for r in per_rank),
               nan=any(per_rank[r]["nan"] for r in per_rank),
               unwritten=any(per_rank[r].get("unwritten", False) for r in per_rank),
               reads_c_at_beta_0=any(per_rank[r].get("reads_c", False) for r in per_rank))
    if row["nan"] or row["unwritten"] or not (math.isfinite(err) and (tol is None or err <= tol)):
        row["error"] = (f"CHECK FAILED: relative error {err:.2e} (bound {tol}), NaN: {row['nan']}, "
                        f"entries left unwritten: {row['unwritten']}")
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", choices=["foundation", "scaling"], help="mgemm bench's cases, by name")
    p.add_argument("--case", action="append", help="with --suite: only these cases")
    p.add_argument("--n", type=int, nargs="+", default=[32768], help="square sizes (without --suite)")
    p.add_argument("--dtypes", default="float32,float64,float16")
    p.add_argument("--block", type=int, nargs="+", help="block-cyclic block sizes (default: the suite's "
                   "Dask chunk, else 4096)")
    p.add_argument("--gpus", type=int, help="processes, one a GPU (default: every GPU here)")
    p.add_argument("--grid", help="ROWSxCOLS process grid (default: as square as divides evenly)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--samples", type=int, default=8, help="sampled rows and columns checked per GPU")
    p.add_argument("--timeout", type=float, default=540.0, help="seconds for the whole run")
    p.add_argument("--json", help="append one JSON row per case to this file")
    p.add_argument("--plan", action="store_true", help="print the layout and stop (no GPU needed)")
    args = p.parse_args(argv)
    gpus = args.gpus
    if gpus is None:
        if args.plan:
            p.error("--plan needs --gpus")
        import cupy as cp
        gpus = cp.cuda.runtime.getDeviceCount()
    if gpus < 1:
        p.error("--gpus must be at least 1")
    if args.repeat < 1 or args.samples < 1:
        p.error("--repeat and --samples must be at least 1")
    if args.grid:
        try:
            grid = tuple(int(x) for x in args.grid.lower().split("x"))
        except ValueError:
            p.error(f"--grid {args.grid!r}: not ROWSxCOLS")
        if len(grid) != 2 or grid[0] * grid[1] != gpus:
            p.error(f"--grid {args.grid} does not hold {gpus} GPU(s)")
    else:
        grid = grid_shape(gpus)
    cases = cases_from(args, gpus)
    if args.plan:
        print(plan_table(cases, gpus, grid))
        return 0
    rows, version = run(cases, gpus, grid, args.repeat, args.samples, args.timeout)
    name = None
    try:
        import cupy as cp
        name = cp.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else name
    except Exception:  # noqa: BLE001 - the GPU's name is a label only
        pass
    print(f"cuBLASMp {version} on {gpus} x {name}, grid {grid[0]} x {grid[1]}")
    for row in rows:
        row["gpu"] = name
        if "median_s" in row:
            print(f"{row['case']:<24} blocks {row['block']:>5}  {row['median_s']:.4f} s  {row['tflops']:8.1f} "
                  f"TFLOP/s  rel err {row['rel_err']:.1e}{'  ' + row['error'] if row.get('error') else ''}")
        else:
            print(f"{row['case']:<24} blocks {row['block']:>5}  ERROR {row['error']}")
    if args.json:
        with open(args.json, "a") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
