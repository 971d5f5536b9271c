"""The Hopper (sm_90a) GEMM from Python: TMA descriptors, compilation, launch; the kernel in brief.

The config object and what the kernel can run: ``mgemm.hopper_config``; which config a product
gets, and the route ``gemm_parts`` takes (copies, tail split, transposed product):
``mgemm.hopper_heuristic``.  This module re-exports their public names.

Kernel: ``kernels/gemm_hopper.cu`` (PTX wrappers in ``kernels/hopper_ptx.cuh``).  One producer
warpgroup (one elected thread issues TMA loads) and two consumer warpgroups (``wgmma`` m64nNk16,
fp32 accumulators), registers moved with ``setmaxnreg`` (producer 40, consumers 232, under
``__launch_bounds__(384, 1)``); a ring of ``stages`` shared-memory stages with mbarrier full/empty
pairs; 128-byte-swizzled 128 × ``tile_n`` × (128 bytes of K) tiles; the persistent tile loop of
``kernels/tile_scheduler.cuh`` (``per_tile``, ``static``, ``dynamic``, ``streamk``), the producer
walking the schedule and handing each work unit to the consumers through a small ring of
shared-memory slots; an epilogue ``alpha·AB + beta·C`` with masked edges (any M, N, K ≥ 1, and
K = 0).  Inputs float16, bfloat16 (uint16 bits) and tf32 (float32
storage; wgmma ignores the low 13 mantissa bits), fp32 accumulation.

Operand layouts (``a_k_major`` / ``b_k_major``, set by ``gemm`` from the strides): K-major (A
row-major, B column-major) for every input; for float16 and bfloat16 also MN-major (A
column-major, B row-major, the usual NumPy layout), read in place as TMA boxes of 64 m or n (one
128-byte swizzle row) × BK rows of K and fed to wgmma with its transpose bits and an MN-major
descriptor (``sw128_mn_desc``: LBO = one box, 8 KB, from one 64-wide group of M or N to the next;
SBO = 1024 bytes from one 8-row group of K to the next).  tf32 is K-major only (wgmma has no
transpose for it): other layouts, a leading dimension that is not a multiple of 16 bytes or a
pointer that is not 16-byte aligned cost one (padded) copy, K-major (MN-major for a
misaligned 16-bit operand contiguous along M or N).  A K-major copy of an operand contiguous along
M or N (tf32 with B row-major) is a transpose and goes through the tiled shared-memory transpose of ``kernels/transpose.cu``
(``transpose_copy``), other strides through CuPy's element-wise copy; so does a narrow 16-bit
row-major B with rows off 128 bytes under a tall A where the heuristic picks (``B_K_MAJOR``,
``copies_b_k_major``), which the kernel reads faster K-major; over a K-major B the heuristic's
tiles may span a narrow N (288, 320 or 384 wide: ``wide_tile``) or take an exact width (144, 176,
208 or 240: ``exact_width``).  An operand's descriptor promotes its loads in the L2 to 256 bytes
where its rows lie on 128-byte lines and to 128 where they do not (``L2_PROMOTION``: 0.84 -> 0.90
of cuBLAS on single-CTA launches with both operands' rows off the lines, forty-third session).
Epilogue ``staged`` (the
heuristic's for K > 2048): with beta = 0 and an output whose rows start 16-byte aligned, each consumer
warpgroup writes its rows, 64 at a time, into its own shared-memory buffer, 256 bytes of each
row at a time (128 where a tile row is not a whole number of 256-byte pieces, half the row where
it is not a whole number of 128-byte pieces either: 160 or 224 16-bit columns), and stores them
as 16-byte pieces of whole rows (elsewhere it falls back to ``pair``).  ``pair`` (the config's
default): the two adjacent columns a thread holds go out as one 4- or 8-byte store (and C as one
load) where the output is row-major with an even leading dimension and aligned; ``direct`` is the
element-wise one.  ``tma`` (the heuristic's for K <= 2048, where writing the output is a large
share of the work): as ``staged``, each 64-row block laid out as 128-byte-swizzled boxes of 64
rows x 128 bytes that the warpgroup's first thread stores with bulk tensor stores
(``cp.async.bulk.tensor``, the output's descriptor a kernel parameter) while the warpgroup goes
on to its next tile; TMA clips the edges, but only to 16-byte granules, so where a row's N
elements do not end on a 16-byte boundary (or the rows overlap or run in reverse) the launch
takes ``staged`` instead.  Before a warpgroup writes its buffer it waits for the stores of the
previous chunk to have read it; ``out_buffers=2`` (an even number of chunks per row, as 256 16-bit
columns are) takes odd chunks through a second buffer set, so a chunk waits only for the chunk
before last (``tma_buffers``: what ``gemm_parts`` runs for the heuristic's 128 x 256 tiles of
one CTA a cluster, on 3 stages to fit; on clusters it was behind the heuristic's 4 stages with one
buffer; RESULTS.md, forty-second and forty-third sessions).  ``columns``: as ``staged`` for a
column-major output, whose 64-row columns go out as 16-byte pieces: the heuristic's where
``gemm_parts`` runs the transposed product B^T A^T into the output's transposed view
(``swap_pays``).  ``gemm`` raises on GPUs
other than sm_90; ``supported()`` tells the caller to use ``mgemm.kernels.gemm`` instead.

Consumer modes.  Cooperative (default): both consumer warpgroups on every 128-row tile, 64 rows
each.  ``pingpong=True``: each consumer warpgroup owns whole ``tile_m`` × ``tile_n`` tiles in
turn (``tile_m`` 64, or 128 as two m64 wgmmas per k16 step; at most 128 accumulators per thread,
so 64×256 or 128×128), units 0, 2, 4, ... of a CTA to the first and 1, 3, 5, ... to the second;
a named-barrier "math turn" (ids 2 and 3, 256 threads) lets a warpgroup start its wgmmas only
after the other has issued all of its previous unit's, so one epilogue runs under the other's
mainloop.  Every policy works with it (stream-K partials per warpgroup, fix-up barrier ids 4
and 5).  ``producer_regs`` / ``consumer_regs``: the setmaxnreg split (default 40 / 232; 24 / 240
fits too, but the producer's stream-K and dynamic bookkeeping spill at 24).  ``overlap=True``
(cooperative, at most 96 accumulators a thread, a policy that splits no tile): each tile's result,
times alpha, waits in a second register set, and its epilogue runs once the next unit's first
wgmmas are issued, under them, not between the two mainloops (alpha applied first, so that the
epilogue reads registers no wgmma defined and ptxas adds no wait for the wgmmas in flight).
Correct on the GPU, but 8-20 % behind the plain order where each CTA has many short tiles
(8192x8192x256 0.78 of cuBLAS against 0.98; RESULTS.md, forty-first session): the heuristic
does not take it.

Clusters (``cluster_m`` 2 or 4, ``cluster_n`` 2, at most 4 CTAs; opt-in; default 1 x 1):
``__cluster_dims__(size, 1, 1)``, the CTAs of a cluster on a block of ``cluster_m`` x
``cluster_n`` adjacent tiles.  The CTAs of one tile column share the B tile, those of one tile row
the A tile: each producer loads its part of B (1 / ``cluster_m``; K-major: a box of ``tile_n /
cluster_m`` rows; MN-major: that share of the 64-wide boxes) and of A (1 / ``cluster_n``) and
multicasts each to the CTAs that share it (``cp.async.bulk.tensor`` ``.multicast::cluster``), so
each CTA's full barrier still counts the whole stage; consumer warps release a stage on the "empty"
barriers of every CTA of the cluster (peers' through ``mapa`` and a remote arrive with CTA-scope
release: at cluster scope it compiled to a ``MEMBAR.ALL.GPU`` per arrival, which made clusters
0.18-0.60 of cuBLAS until the twenty-second session; counts times the size), so no producer
refills it before every CTA has read it; a cluster barrier after the barrier setup and another
before exit.  Where the tile rows (columns) are not a multiple of ``cluster_m`` (``cluster_n``),
the CTAs past the last read wholly out-of-bounds boxes (zeros, counted in full) and write
nothing.  Only ``static``, ``per_tile`` (every CTA walks the same blocks, grouped over the grid
of blocks: ``group`` counts rows of blocks) and ``streamk`` (blocks of tiles split over the
clusters), cooperative consumers, ``tile_n`` 128 or 256 (256 with an MN-major B and ``cluster_m``
4; a K-major B also 160, 192 and 224: each CTA its share of the rows), no debug record; the grid is whole clusters, at most
``cuOccupancyMaxActiveClusters`` (SMs rounded down to a multiple of the size where cuda.bindings
cannot say), at least one cluster whatever ``sms`` says: on the H200 66 2-CTA clusters, but only
30 4-CTA ones (120 of the 132 SMs; ``QUAD_CLUSTERS``).  The heuristic takes 2 x 1 clusters where
B's rows are off 128 bytes and 2 x 2 where A's are too (``choose_config``); 4 x 1 and 1 x 2 are
there to measure (4 x 1 was ahead of the best 2 x 1 or 2 x 2 config on none of 14 shapes, level
on one; RESULTS.md, twenty-fourth session).

Stream-K flags hold the launch's epoch when complete (``kernels.epoch_sync``), so no memset runs
between launches.  The persistent engine uses this kernel for float16 (and float32 with
``allow_tf32``) on sm_90.

K in parts (``gemm_parts``, ``k_parts`` up to ``MAX_K_PARTS``): A and B as K parts, one pair of
TMA descriptors per part (``__grid_constant__`` kernel parameters) and the k-iteration where each
part ends; the producer maps every k-iteration to its part, so the parts (a block task's chunks)
add up in the accumulators in one launch, every policy's split included.  An 8192² float16 block
with K = 32768 in four parts: 6.71 ms against 7.23 ms for cuBLAS into a float32 block (H200,
tenth session), so ``engine="auto"`` takes this path for float16/bfloat16 blocks of two or more
parts; with one part it picks cuBLAS, ahead or level on every shape measured.

Timeline (``gemm(..., timeline=True)``, debug; ``mgemm.timeline``; ``benchmarks/timeline_probe.py``):
a variant of the config whose consumer warpgroups stamp each unit with the GPU's ns timer (taken,
mainloop done, done) and their CTA's start and their exit, so a launch's time can be split into
setup, mainloops, fix-up and epilogue, waits and tail.  Cooperative and pingpong consumers (a
pingpong warpgroup takes a unit when its turn comes); not clusters.  Its GPU test:
``test_timeline_covers_the_units_and_adds_up``.

Promoted accumulation (``promote=P``, cooperative consumers, ``tile_n`` ≤ 192): the wgmmas add P
k-iterations at a time into a second set of accumulators, which the consumers add to the unit's
with float32 adds (rounded to nearest).  A tensor core's float32 sum truncates, and its error grows
with the k16 steps it adds; ``mgemm.emulate`` (float32 as bfloat16 pieces) runs with P = 4 on
128 × 192 tiles (``tile_n=192``: wgmma n192, cooperative consumers, one CTA per tile), which
brought its error on an 8192² block with K = 32768 from 3.7e-5 to 2.8e-7 at 4 % of the speed (H200,
fifteenth session).

Not yet done (H200, fp16 × cuBLAS, every launch cold; RESULTS.md, fifty-first and fifty-second
sessions):
clusters larger than 4 CTAs; 256-row tiles; a cheaper fix-up for few tiles over long K (the spread
fix-up stores and adds about 5 µs after the last mainloop: 256x256x65536 0.88–0.92,
128x128x131072 0.87); 1024x2112x8192 0.92 (88 tiles of 128 x 192, stream-K); operands whose rows
lie off 128-byte lines read in place (3000³ 0.86, 5000³ 0.90); one wave of
fewer tiles than SMs (1536³ 0.87: 96 tiles of 128 x 192); products of a few GFLOP, whose fixed
costs set them (1000³ 0.86).

On the H200, from the repository root, with wheels of mgemm's Python dependencies in .whl::

    bash benchmarks/run_hopper_gpu.sh
"""

from __future__ import annotations

import functools
import itertools
import struct
import threading
from typing import Any, NamedTuple

import numpy as np

from mgemm import hopper_heuristic as heuristic
from mgemm.hopper_config import (ITEMSIZE, KERNEL_NAME, MAX_K_PARTS, MN_BOX, OUTPUTS,
                                 PLAIN_EPILOGUES, HopperConfig, every_tile_split, input_kind,
                                 plan_launch)
from mgemm.hopper_heuristic import (choose_config, choose_policy, fit_policy, rows_flags,
                                    swap_pays)  # public: in __all__
from mgemm.kernels import (KERNEL_DIR, LaunchPlan, _i64, compile_kernel, compile_plain,
                           compute_capability, device_id, device_sms, epoch_sync, launch_scratch,
                           occupancy, prepare_call)
from mgemm.timeline import FIELDS as TIMELINE_FIELDS


# The L2 promotion (bytes: 0, 64, 128 or 256) of the operands' TMA loads: (rows on 128-byte lines,
# rows off them) (``_operand_desc``).  Rows off the lines at 128 instead of 256: ahead in 20 of 22
# runs on single-CTA launches with both operands' rows off (fp16 geomean 0.84 -> 0.91 of cuBLAS,
# 2176x2088x9376 0.66 -> 0.78; behind by 0.06 in one) and in 11 of 18 on a typed draw (0.77 ->
# 0.82; behind by 0.01-0.03 in four); 64 and 0 did as 128, and aligned rows lost on 256x256x65536
# below 256 (RESULTS.md, forty-third session)
L2_PROMOTION = (256, 128)
# A launch compiles its config without the code it cannot run (HopperConfig.split_only where every
# tile is split under the spread fix-up, plain_out where the output takes the staged, TMA or
# columns epilogue's own path): a third to an eighth of the SASS, and the fix-up's code right
# after the mainloop.  False: every launch runs the whole binary.
TRIM_CODE = True


def _k_major_copy(cp, b):
    """A copy of ``b`` (K × N, rows of contiguous N) held K-major: the (K × N) view of an N × K
    buffer whose rows are padded to 128 bytes (``_padded_copy``: ``transpose_copy`` for such a B)."""
    return _padded_copy(cp, b.T, 128 // b.itemsize)[:, :b.shape[0]].T


# --- compilation (CuPy, lazily) --------------------------------------------------------------------

def _cupy():
    import cupy  # noqa: PLC0415  (lazy: this module imports without CuPy)
    return cupy


def compile_options() -> tuple[str, ...]:
    return ("-std=c++17", "-arch=sm_90a", f"-I{KERNEL_DIR}")


def supported(device: int | None = None) -> bool:
    """Whether ``device`` is a Hopper GPU (compute capability 9.0) that runs this kernel."""
    try:
        return compute_capability(device_id(device)) == "90"
    except Exception:
        return False


def get_kernel(config: HopperConfig, device: int | None = None):
    """The compiled kernel of ``config`` on ``device``, memoized per (device, cache key)."""
    dev = device_id(device)
    cc = compute_capability(dev)
    if cc != "90":
        raise RuntimeError(f"the Hopper kernel needs compute capability 9.0, device {dev} has "
                           f"{cc}; use mgemm.kernels.gemm")
    return compile_kernel(config, compile_options(), KERNEL_NAME, dev)


# --- TMA descriptors (the driver's cuTensorMapEncodeTiled, lazily) ---------------------------------

_TMA_DTYPE = {"float16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
              "tf32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"}


def tma_desc(ptr: int, kind: str, inner: int, outer: int, ld: int, box_inner: int, box_outer: int):
    """A 2-D TMA descriptor as a 128-byte ``numpy.void`` (dtype V128) kernel argument.

    The tensor is ``outer`` rows of ``inner`` contiguous elements, row ``r`` starting ``ld``
    elements after row ``r - 1``; boxes of ``box_outer × box_inner`` land in shared memory in the
    128-byte swizzle; elements outside the tensor read as zero.
    """
    return _void(_encode(ptr, kind, inner, outer, ld, box_inner, box_outer))


@functools.lru_cache(maxsize=64)  # a launch encodes two or three; repeated calls reuse them
def _encode(ptr: int, kind: str, inner: int, outer: int, ld: int, box_inner: int, box_outer: int,
            l2_promotion: int = 256) -> bytes:
    """``tma_desc``'s 128 bytes, from ``cuTensorMapEncodeTiled``, its loads' L2 promotion
    ``l2_promotion`` bytes (0, 64, 128 or 256).  A block task brings operands at new addresses,
    so every launch encodes its descriptors: through ctypes on the driver library where it loads
    (4.6 µs a descriptor on the H200 host), else through cuda.bindings' wrapper (12.7 µs;
    RESULTS.md, twenty-first session), which also gives the enum values."""
    if l2_promotion not in _L2_PROMOTIONS:
        raise ValueError(f"l2_promotion must be one of {tuple(_L2_PROMOTIONS)}, got {l2_promotion!r}")
    enc = _encoder()
    item = ITEMSIZE[kind]
    if enc is not None:
        fn, types = enc
        bufs = getattr(_per_thread, "encode", None)
        if bufs is None:  # this thread's: the call releases the GIL, and other threads encode too
            import ctypes  # noqa: PLC0415
            u32, u64 = ctypes.c_uint32, ctypes.c_uint64
            bufs = _per_thread.encode = ((u64 * 16)(), (u64 * 2)(), (u64 * 1)(), (u32 * 2)())
        out, dims, strides, box = bufs
        dims[0], dims[1], strides[0], box[0], box[1] = inner, outer, ld * item, box_inner, box_outer
        err = fn(out, types[kind], 2, ptr, dims, strides, box, types["ones"], *types["modes"][l2_promotion])
        if err:
            raise RuntimeError(f"cuTensorMapEncodeTiled failed (CUresult {err}): {kind} {outer}x{inner} "
                               f"ld={ld} box={box_outer}x{box_inner} ptr={ptr:#x}")
        return bytes(out)
    from cuda.bindings import driver as cu  # noqa: PLC0415

    err, tmap = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, _TMA_DTYPE[kind]), 2, ptr,
        [cu.cuuint64_t(inner), cu.cuuint64_t(outer)], [cu.cuuint64_t(ld * item)],
        [cu.cuuint32_t(box_inner), cu.cuuint32_t(box_outer)], [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        *_tma_modes(cu, l2_promotion))
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({err}): {kind} {outer}x{inner} ld={ld} "
                           f"box={box_outer}x{box_inner} ptr={ptr:#x}")
    return np.array([int(w) for w in tmap.opaque], dtype=np.uint64).tobytes()


_L2_PROMOTIONS = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}


def _tma_modes(cu, l2_promotion: int = 256) -> tuple:
    """Interleave, swizzle, L2 promotion (``l2_promotion`` bytes) and out-of-bounds fill of an
    mgemm descriptor."""
    return (cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            getattr(cu.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{_L2_PROMOTIONS[l2_promotion]}"),
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


@functools.lru_cache(maxsize=None)
def _libcuda():
    """The driver library through ctypes (raises where it cannot be loaded)."""
    import ctypes  # noqa: PLC0415
    return ctypes.CDLL("libcuda.so.1")


_ENCODER: list = []  # [(function, enum values)] or [None], once loaded
_DRIVER_LAUNCH: list = []  # [cuLaunchKernel through ctypes] or [None], once loaded
_driver_lock = threading.Lock()
# Per thread: the encoder's argument buffers ("encode") and the launch's parameter buffers by
# layout ("by_layout"), since ctypes releases the GIL during the driver's call.
_per_thread = threading.local()


def _encoder():
    """``cuTensorMapEncodeTiled`` of the driver library through ctypes, and the enum values
    cuda.bindings gives; None where either cannot be loaded."""
    if _ENCODER:
        return _ENCODER[0]
    with _driver_lock:
        if _ENCODER:
            return _ENCODER[0]
        try:
            import ctypes  # noqa: PLC0415

            from cuda.bindings import driver as cu  # noqa: PLC0415

            fn = _libcuda().cuTensorMapEncodeTiled
            u32, u64 = ctypes.c_uint32, ctypes.c_uint64
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64),
                           ctypes.POINTER(u64), ctypes.POINTER(u32), ctypes.POINTER(u32),
                           ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
            fn.restype = ctypes.c_int
            types = {kind: int(getattr(cu.CUtensorMapDataType, name)) for kind, name in _TMA_DTYPE.items()}
            types["ones"] = (u32 * 2)(1, 1)
            types["modes"] = {size: tuple(int(mode) for mode in _tma_modes(cu, size)) for size in _L2_PROMOTIONS}
            _ENCODER.append((fn, types))
        except Exception:  # no libcuda.so.1 by that name, or no cuda.bindings: the wrapper's path
            _ENCODER.append(None)
    return _ENCODER[0]


def _operand_desc(ptr: int, kind: str, k_major: bool, k: int, mn: int, ld: int, tile_k: int, rows: int):
    """The TMA descriptor (its bytes) of one operand (``rows`` = the rows of the tile one load
    brings: M, N, or with clusters M / ``cluster_n`` and N / ``cluster_m``): K-major, boxes of
    ``rows × tile_k`` over the (MN, K) tensor;
    MN-major, boxes of ``tile_k × 64`` over the (K, MN) tensor, ``rows / 64`` of them per stage,
    rounded up (kernels/gemm_hopper.cu loads them side by side).  Its loads' L2 promotion is
    ``L2_PROMOTION``'s for rows on 128-byte lines or off them."""
    promotion = L2_PROMOTION[bool((ld * ITEMSIZE[kind]) % 128 or ptr % 128)]
    if k_major:
        return _encode(ptr, kind, k, mn, ld, tile_k, rows, promotion)
    return _encode(ptr, kind, mn, k, ld, MN_BOX, tile_k, promotion)


def max_active_clusters(kernel, config: HopperConfig) -> int | None:
    """cuOccupancyMaxActiveClusters for a cluster kernel (its cluster size is compile-time:
    ``__cluster_dims__``), or None where cuda.bindings cannot say."""
    key = (kernel.kernel.ptr, config.threads, config.smem_bytes, config.cluster_size)
    if key not in _clusters:
        try:
            from cuda.bindings import driver as cu  # noqa: PLC0415
            launch = cu.CUlaunchConfig()
            launch.gridDimX, launch.gridDimY, launch.gridDimZ = config.cluster_size, 1, 1
            launch.blockDimX, launch.blockDimY, launch.blockDimZ = config.threads, 1, 1
            launch.sharedMemBytes = config.smem_bytes
            launch.numAttrs = 0
            err, count = cu.cuOccupancyMaxActiveClusters(cu.CUfunction(kernel.kernel.ptr), launch)
            _clusters[key] = int(count) if err == cu.CUresult.CUDA_SUCCESS and int(count) > 0 else None
        except Exception:  # an older cuda.bindings: the caller assumes every SM pair can hold one
            _clusters[key] = None
    return _clusters[key]


_clusters: dict[tuple, int | None] = {}


def _slots(kernel, config: HopperConfig, sms: int) -> int:
    """Resident CTAs for ``sms`` SMs: SMs × occupancy; with clusters, whole clusters only (SMs
    rounded down to a multiple of the cluster size, at most what the driver can co-schedule)."""
    if config.cluster_size == 1:
        return sms * max(1, occupancy(kernel, config))
    clusters = sms // config.cluster_size
    most = max_active_clusters(kernel, config)
    if most is not None:
        clusters = min(clusters, most)
    return config.cluster_size * max(1, clusters)


# --- launch ----------------------------------------------------------------------------------------

def _operand(cp, x, align: int, mn_ok: bool):
    """``(array, k_major, ld)`` for ``x`` = A (M × K) or B^T (N × K), read in place when its strides
    allow it, else copied (padded).

    K-major: rows of contiguous K, row ``o`` starting ``ld`` elements after row ``o - 1``.  MN-major
    (``mn_ok``: 16-bit inputs): rows of contiguous M (or N), one per k, ``ld`` elements apart.  Both
    need ``ld`` a multiple of ``align`` (16 bytes) and a 16-byte aligned start; a single row's ``ld``
    is never used, so any will do.  K-major wins when both fit (the layout the kernel had first);
    a misaligned MN-contiguous operand gets an MN-major copy (no transpose), anything else a
    K-major one: through ``transpose_copy`` where ``x`` is contiguous along M or N (the transpose
    of a matrix with contiguous rows, e.g. tf32 B row-major), else a pitched copy
    (``_pitched_copy``) or CuPy's element-wise one.  A copy's rows start on 128-byte boundaries:
    TMA reads rows that do not at a fraction of the speed (4096x4104x4096 float16, B row-major
    read in place: 0.69 of cuBLAS, from rows padded to 4160: 0.95; RESULTS.md, twentieth session).
    """
    outer, k = x.shape
    item = x.itemsize
    s_o, s_k = x.strides
    read = heuristic._in_place_rows(outer, k, s_o, s_k, x.data.ptr, item, align * item, mn_ok)
    if read is not None:
        k_major, stride, rows = read
        width = k if k_major else outer  # a single row's ld: the width rounded up
        return x, k_major, stride // item if rows > 1 else -(-width // align) * align
    row = 128 // item  # elements per 128 bytes
    if mn_ok and s_o == item and s_k != item:  # contiguous along M or N: a copy that keeps the layout
        buf = _padded_copy(cp, x.T, row)
        return buf, False, buf.shape[1]
    buf = _padded_copy(cp, x, row)
    return buf, True, buf.shape[1]


def _padded_copy(cp, src, row: int):
    """``src`` (rows × cols) copied into a buffer of contiguous rows ``row``-element multiples
    apart: one pitched copy where ``src``'s rows are contiguous, else ``transpose_copy`` where its
    columns are (``src`` the transpose of a matrix with contiguous rows), else element-wise."""
    rows, cols = src.shape
    item = src.itemsize
    buf = cp.empty((rows, -(-cols // row) * row), dtype=src.dtype)
    if _pitched_copy(cp, src, buf):
        pass
    elif src.strides[0] == item and src.strides[1] % item == 0 and item in TRANSPOSE_KERNELS:
        transpose_copy(src, buf)
    else:
        buf[:, :cols] = src
    return buf


def _pitched_copy(cp, src, buf) -> bool:
    """``buf[:, :cols] = src`` as one pitched copy (``cudaMemcpy2DAsync`` on the current stream)
    where ``src`` (rows × cols) has contiguous rows a non-negative stride apart that does not
    overlap them, and ``buf`` contiguous rows; False (nothing copied) otherwise.  A copy engine
    moves the rows at close to the memory's bandwidth, where an element-wise kernel over a strided
    view is several times slower."""
    rows, cols = src.shape
    item = src.itemsize
    width = cols * item
    pitch = src.strides[0] if rows > 1 else width
    if rows == 0 or cols == 0 or (cols > 1 and src.strides[1] != item) or pitch < width:
        return False
    cp.cuda.runtime.memcpy2DAsync(buf.data.ptr, buf.strides[0], src.data.ptr, pitch, width, rows,
                                  cp.cuda.runtime.memcpyDeviceToDevice,
                                  cp.cuda.get_current_stream().ptr)
    return True


# --- the transpose copy (kernels/transpose.cu) ---------------------------------------------------

TRANSPOSE_SOURCE = "transpose.cu"
TRANSPOSE_KERNELS = {2: "mgemm_transpose_b16", 4: "mgemm_transpose_b32", 8: "mgemm_transpose_b64"}
TRANSPOSE_TILE = 64  # kTransposeTile: a CTA's tile is 64 x 64 elements
TRANSPOSE_BLOCK = (32, 8)  # kTransposeThreadsX, kTransposeThreadsY
_GRID_Y = 65535  # the kernel loops over tile rows beyond this many


def transpose_kernel(item: int, device: int | None = None):
    """The transpose kernel for ``item``-byte elements on ``device`` (``compile_plain``)."""
    return compile_plain(TRANSPOSE_SOURCE, TRANSPOSE_KERNELS[item], device)


def transpose_copy(x, buf) -> None:
    """``buf[:, :k] = x`` for ``x`` (outer × k) contiguous along ``outer`` (``x.T`` has contiguous
    rows; any row stride) and ``buf`` with contiguous rows, by the tiled shared-memory transpose of
    kernels/transpose.cu on the current stream; columns of ``buf`` beyond ``k`` are not written.
    CuPy's element-wise copy of such a view took 0.48 ms at 8192² float32 on the H200, a
    contiguous copy of the same bytes 0.14 ms."""
    outer, k = x.shape
    item = x.itemsize
    if buf.dtype != x.dtype or buf.shape[0] != outer or buf.shape[1] < k:
        raise ValueError(f"cannot copy a {x.shape} {x.dtype} operand into a {buf.shape} {buf.dtype} "
                         f"buffer")
    if (x.strides[0] != item and outer > 1) or x.strides[1] % item or buf.strides[1] != item:
        raise ValueError(f"the transpose copy needs x contiguous along its rows' index and buf "
                         f"along its columns, got strides {x.strides} and {buf.strides}")
    if outer == 0 or k == 0:
        return
    tile = TRANSPOSE_TILE
    grid = (-(-outer // tile), min(-(-k // tile), _GRID_Y))
    # the source is x.T: k rows of ``outer`` contiguous elements, x.strides[1] bytes apart
    transpose_kernel(item)(grid, TRANSPOSE_BLOCK,
                           (x, buf, _i64(k), _i64(outer), _i64(x.strides[1] // item),
                            _i64(buf.strides[0] // item)))


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, out=None,
         config: HopperConfig | None = None, allow_tf32: bool = False, sms: int | None = None,
         as_dtype: str | None = None, out_dtype: str | None = None, debug: bool = False,
         timeline: bool = False, tune: bool = False):
    """``out = alpha * a @ b + beta * c`` on CuPy arrays with the Hopper kernel (sm_90 only).

    The same contract as ``mgemm.kernels.gemm``: ``a`` (M×K) and ``b`` (K×N) any 2-D strided views;
    ``c`` read only when ``beta != 0``; ``out`` may be ``c``; ``sms`` caps the SMs used;
    ``as_dtype="bfloat16"`` reads uint16 arrays as bfloat16 bits; ``config`` overrides the
    heuristic (its dtypes and operand layouts are set from the operands: for float16 and bfloat16,
    A row- or column-major and B row- or column-major all go in without a copy, except a narrow
    row-major B whose rows are off 128 bytes under a tall A, which the heuristic's path may copy
    K-major first: ``copies_b_k_major``);
    ``debug=True`` returns ``(out, record)``; ``timeline=True`` returns ``(out, entries)``, an
    (n, 10) int64 array of ``mgemm.timeline.FIELDS`` (a variant of the config that stamps each
    unit with the GPU's ns timer; ``mgemm.timeline.summarize``); both
    run the heuristic's config on single CTAs (no clusters), and a caller's config must be so;
    ``tune=True`` takes the config ``mgemm.tune`` timed fastest for this kind of product.
    """
    return gemm_parts([a], [b], c, alpha=alpha, beta=beta, out=out, config=config,
                      allow_tf32=allow_tf32, sms=sms, as_dtype=as_dtype, out_dtype=out_dtype,
                      debug=debug, timeline=timeline, tune=tune)


def gemm_parts(a_parts, b_parts, c=None, *, alpha: float = 1.0, beta: float = 0.0, out=None,
               config: HopperConfig | None = None, allow_tf32: bool = False, sms: int | None = None,
               as_dtype: str | None = None, out_dtype: str | None = None, debug: bool = False,
               timeline: bool = False, tune: bool = False):
    """``out = alpha * (a_parts[0] @ b_parts[0] + a_parts[1] @ b_parts[1] + ...) + beta * c`` in one
    launch: A's K parts (M × K_p each) and B's (K_p × N), as a block task holds its panels' chunks,
    at most ``MAX_K_PARTS``.  Each part gets its own pair of TMA descriptors and the kernel walks
    them as one K range, so the parts add up in the fp32 accumulators: no output written and read
    back per part, one rounding.  Otherwise as ``gemm``; parts of K = 0 are skipped.  Operands whose
    layouts (K- or MN-major) differ between parts are all copied K-major.  Where the heuristic
    picks a 2-CTA cluster launch whose last wave is short (``tail_split``, ``TAIL_SPLIT``), the rows
    of its full waves and the rest go as two such launches, each into its band of rows.
    ``tune=True`` (float16 and bfloat16, no ``config``): the config ``mgemm.tune`` timed fastest
    for this kind of product, tuning it on these operands the first time.  Where the heuristic
    picks and ``beta == 0``, a 16-bit product whose transpose tiles better (``swap_pays``, or
    ``ONE_WAVE_SWAP``'s one wave over B rows off 128-byte lines) runs as B^T A^T into ``out``'s
    transposed view; where it does not, 16-bit B parts that
    ``copies_b_k_major`` names are copied K-major and the config is picked for the copies.  Where
    the heuristic picks and B is read K-major (in place or as that copy), its tiles may span a
    narrow N (``wide_tile``) or take an exact width with as many tile columns (``exact_width``);
    where its 128 x 256 tiles of one CTA store through TMA, they take two staging buffers
    (``tma_buffers``).
    """
    a_parts, b_parts = list(a_parts), list(b_parts)
    if debug and timeline:
        raise ValueError("debug=True and timeline=True share the kernel's log: ask for one")
    if not a_parts or len(a_parts) != len(b_parts):
        raise ValueError(f"gemm_parts needs as many A parts as B parts, at least one; got "
                         f"{len(a_parts)} and {len(b_parts)}")
    if len(a_parts) > MAX_K_PARTS:
        raise ValueError(f"the Hopper kernel takes at most {MAX_K_PARTS} K parts in one launch, got "
                         f"{len(a_parts)}")
    m, n = a_parts[0].shape[0], b_parts[0].shape[-1]
    for a_p, b_p in zip(a_parts, b_parts):
        if (a_p.ndim != 2 or b_p.ndim != 2 or a_p.shape[0] != m or b_p.shape[1] != n
                or a_p.shape[1] != b_p.shape[0]):
            raise ValueError(f"every K part must be (M, K_p) @ (K_p, N) with M = {m}, N = {n}; got "
                             f"{a_p.shape} @ {b_p.shape}")
        if a_p.dtype != a_parts[0].dtype or b_p.dtype != a_parts[0].dtype:
            raise TypeError(f"every K part must have one dtype, got {a_p.dtype} and {b_p.dtype} "
                            f"besides {a_parts[0].dtype}")
    k = sum(a_p.shape[1] for a_p in a_parts)
    cp = _cupy()
    flags = rows_flags(a_parts, b_parts) if config is None else None  # None: the caller's config
    call = prepare_call(cp, a_parts[0], b_parts[0], c, out, beta=beta, config=config,
                        allow_tf32=allow_tf32, sms=sms, as_dtype=as_dtype, out_dtype=out_dtype,
                        input_kind=input_kind, outputs=OUTPUTS,
                        choose=(functools.partial(heuristic._choose_cached, **flags)
                                if flags is not None else heuristic._choose_cached),
                        writer="the Hopper kernel", k=k)
    kind, dev, sms, config, res_dtype, out = (call.kind, call.dev, call.sms, call.config,
                                              call.res_dtype, call.out)
    if (debug or timeline) and flags is not None and config.cluster_size > 1:
        # the record and the timeline know single CTAs: the heuristic's tile without clusters
        config = config.replace(cluster_m=1, cluster_n=1)
    if m == 0 or n == 0:
        if timeline:
            return out, np.zeros((0, len(TIMELINE_FIELDS)), np.int64)
        return (out, np.zeros((0, 4), np.int32)) if debug else out
    if tune and flags is not None and not (debug or timeline) and kind in ("float16", "bfloat16") and k:
        tuned = _tuned(a_parts, b_parts, config, m, n, k, kind, dev, sms, res_dtype, out, flags,
                       as_dtype)
        if tuned is not None:
            return gemm_parts(a_parts, b_parts, c, alpha=alpha, beta=beta, out=out, config=tuned,
                              sms=sms, as_dtype=as_dtype, out_dtype=out_dtype)
    way = (heuristic.route(a_parts, b_parts, out, config, m, n, k, kind, sms, flags, beta=beta,
                           allow_tf32=allow_tf32)
           if flags is not None and not (debug or timeline) else heuristic.Route("one", config))
    if way.how == "split":  # two launches, on two bands of rows
        for rows, cfg in ((slice(0, way.m1), config), (slice(way.m1, m), way.rest)):
            gemm_parts([a_p[rows] for a_p in a_parts], b_parts,
                       c[rows] if c is not None and beta != 0 else None, alpha=alpha, beta=beta,
                       out=out[rows], config=cfg, allow_tf32=allow_tf32, sms=sms,
                       as_dtype=as_dtype, out_dtype=out_dtype)
        return out
    if way.how == "swap":  # C^T = B^T A^T, written through out's transposed view
        gemm_parts([b_p.T for b_p in b_parts], [a_p.T for a_p in a_parts], alpha=alpha,
                   out=out.T, config=way.config, sms=sms, as_dtype=as_dtype)
        return out
    if way.how == "copy":  # not transposed: B copied K-major, the config picked for the copy
        return gemm_parts(a_parts, [_k_major_copy(cp, b_p) for b_p in b_parts], c, alpha=alpha,
                          beta=beta, out=out, allow_tf32=allow_tf32, sms=sms, as_dtype=as_dtype,
                          out_dtype=out_dtype, tune=tune)
    config = way.config  # "one": the config given, or another (DIRECT_64_ROWS)

    # A as (M, K), B as B^T (N, K), each K-major (rows of K) or MN-major (rows of M or N, one per
    # k).  With K = 0 nothing is loaded, but the descriptors still need a valid tensor: a dummy.
    mn_ok = ITEMSIZE[kind] == 2
    parts = [(a_p, b_p) for a_p, b_p in zip(a_parts, b_parts) if a_p.shape[1] > 0]
    ops = [(_operand(cp, a_p, config.align, mn_ok), _operand(cp, b_p.T, config.align, mn_ok))
           for a_p, b_p in parts]
    if len({(oa[1], ob[1]) for oa, ob in ops}) > 1:  # mixed layouts: one (K-major) for all
        ops = [(oa if oa[1] else _operand(cp, a_p, config.align, False),
                ob if ob[1] else _operand(cp, b_p.T, config.align, False))
               for (oa, ob), (a_p, b_p) in zip(ops, parts)]
    if ops:
        a_k, b_k = ops[0][0][1], ops[0][1][1]
        if flags is not None and b_k:  # the heuristic's config, B read K-major: wide or exact widths
            config = heuristic.k_major_pick(config, m, n, k, sms)
        ends = tuple(itertools.accumulate(-(-a_p.shape[1] // config.tile_k) for a_p, _ in parts))
        dims = [(a_p.shape[1], m, n) for a_p, _ in parts]  # (K_p, M, N)
    else:
        dummy = cp.zeros((1, config.align), dtype=a_parts[0].dtype)
        ops = [((dummy, True, config.align), (dummy, True, config.align))]
        a_k = b_k = True
        ends, dims = (0,), [(1, 1, 1)]
    d_desc = None
    if config.epilogue == "tma":
        d_desc = _output_desc(out, res_dtype, beta)
        if d_desc is None:  # rows TMA cannot address, which the thread stores can
            config = config.replace(epilogue="staged")
        elif flags is not None and d_desc != _NO_DESC:  # the heuristic's, bulk stores: their buffers
            config = heuristic.tma_buffers(config, m, n, sms)
    setup = _launch_setup(config, dev, sms, m, n, ends[-1], res_dtype, debug, a_k, b_k, len(ops), timeline,
                          plain_output(out, config.epilogue, beta), TRIM_CODE)
    config, kernel, lp = setup.config, setup.kernel, setup.plan
    descs_a, descs_b = [], []
    for ((a_arr, _, lda), (b_arr, _, ldb)), (k_p, rows_a, rows_b) in zip(ops, dims):
        # Clusters: each CTA loads (and multicasts) its part of A's rows and of B's, K-major as one
        # box of them
        descs_a.append(_operand_desc(a_arr.data.ptr, kind, a_k, k_p, rows_a, lda, config.tile_k,
                                     config.tile_m // config.cluster_n))
        descs_b.append(_operand_desc(b_arr.data.ptr, kind, b_k, k_p, rows_b, ldb, config.tile_k,
                                     config.b_box_rows))

    partials = lp.grid * (2 if config.sk_reduce == "spread" else 1)  # stream-K partial slots
    _, workspace, record = launch_scratch(  # the stream-K workspace: a tile per slot
        cp, dev, 0, False, partials * config.tile_m * config.tile_n if lp.sk_tiles else 1, cp.float32,
        1 + 4 * (lp.tiles + 2 * lp.grid + 8) if debug else
        # per unit an entry from each consumer warpgroup, and one more each as it leaves
        2 + 2 * len(TIMELINE_FIELDS) * (2 * (lp.tiles + 2 * lp.grid + 8) + 2 * lp.grid) if timeline else 0)
    # the dynamic counter and the stream-K flags, which hold this launch's epoch when complete
    sync, epoch = epoch_sync(cp, dev, 1 + partials, config.policy == "dynamic")
    c_arr = c if (c is not None and beta != 0) else out
    ci, oi = c_arr.itemsize, out.itemsize
    values = (b"".join(descs_a), b"".join(descs_b), c_arr.data.ptr, out.data.ptr, m, n,
              c_arr.strides[0] // ci, c_arr.strides[1] // ci, out.strides[0] // oi, out.strides[1] // oi,
              float(alpha), float(beta), sync.data.ptr, workspace.data.ptr, lp.sk_tiles, record.data.ptr,
              _part_ends(ends), epoch) + ((d_desc,) if d_desc is not None else ())
    _launch(kernel, lp.grid, setup, cp.cuda.get_current_stream().ptr, values)
    # Operand copies (if any) may be freed once the launch is queued: CuPy's pool hands their
    # memory only to later work on the same stream, which runs after this kernel.
    if not (debug or timeline):
        return out
    count = int(record[0].get())
    if debug:
        return out, record[1:1 + 4 * count].reshape(count, 4).get()
    width = len(TIMELINE_FIELDS)
    return out, record[2:2 + 2 * width * count].view(cp.int64).reshape(count, width).get()


def _tuned(a_parts, b_parts, base: HopperConfig, m: int, n: int, k: int, kind: str, dev: int,
           sms: int, res_dtype: str, out, flags: dict, as_dtype: str | None) -> HopperConfig | None:
    """``mgemm.tune.choose`` for this product: the tuned config, or None for the heuristic's own
    launch (``base``, split where ``gemm_parts`` splits it): from the cache file or tuned once
    per kind of product in a process (``_TUNED``, ``tune.once``)."""
    from . import tune

    item = a_parts[0].itemsize
    layouts = (a_parts[0].strides[1] == item, b_parts[0].strides[1] == item)

    def choose():
        cp = _cupy()
        name = tune.key(device=_device_name(dev), sms=sms, kind=kind, out=res_dtype, m=m, n=n,
                        k=k, parts=len(a_parts), layouts=layouts, flags=flags)

        def run(cfg, buf):
            gemm_parts(a_parts, b_parts, out=buf, config=cfg, sms=sms, as_dtype=as_dtype)

        def values(buf):  # bfloat16 results are uint16 bits
            if buf.dtype == cp.uint16:
                return (buf.astype(cp.uint32) << 16).view(cp.float32)
            return buf.astype(cp.float32)

        return tune.choose(name, base, m, n, k, run, lambda: cp.empty_like(out), values)

    # the cache key stats the kernel sources: looked up once per kind of product, not per launch
    memo = (dev, sms, kind, res_dtype, m, n, k, len(a_parts), layouts, tuple(sorted(flags.items())))
    return tune.once(_TUNED, memo, choose)


_TUNED: dict[tuple, HopperConfig | None] = {}  # this process's tuned choices (_tuned)


@functools.lru_cache(maxsize=None)
def _device_name(dev: int) -> str:
    name = _cupy().cuda.runtime.getDeviceProperties(dev)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


class _Setup(NamedTuple):
    """What a launch derives from its config and problem (``_launch_setup``)."""

    config: HopperConfig  # specialized to the operands
    kernel: Any
    plan: LaunchPlan
    threads: int
    smem: int
    params: tuple[str, tuple[int, ...]]  # param_layout(config)


@functools.lru_cache(maxsize=256)
def _launch_setup(config: HopperConfig, dev: int, sms: int, m: int, n: int, k_iters: int,
                  res_dtype: str, debug: bool, a_k: bool, b_k: bool, k_parts: int,
                  timeline: bool, plain: bool = False, trim: bool = False) -> _Setup:
    """The config specialized to the operands (output type, layouts, K parts, logs), its kernel on
    ``dev``, the resident CTAs on ``sms`` SMs and the launch plan over ``k_iters`` k-iterations (each
    K part's own, summed, as the mirror walks them): once per distinct launch, which a block task
    repeats for every block of its shape (the steps one by one cost about 10 µs of host time a
    call on the H200 host; RESULTS.md, twenty-first session).  ``trim``: without the code the
    launch cannot run (``trim_config``; ``plain``: ``plain_output`` holds)."""
    config = config.replace_fitting(output=res_dtype, record=debug, a_k_major=a_k, b_k_major=b_k,
                                    k_parts=k_parts, timeline=timeline)
    k = k_iters * config.tile_k
    # the trimmed binary the launch will most likely take, compiled first (the plan needs a kernel)
    guess = trim_config(config, None, plain) if trim else config
    kernel = get_kernel(guess, dev)
    lp = plan_launch(config, m, n, k, _slots(kernel, guess, sms))
    final = trim_config(config, lp, plain) if trim else config
    if final != guess:
        kernel = get_kernel(final, dev)
    return _Setup(final, kernel, lp, config.threads, config.smem_bytes, param_layout(config))


def trim_config(config: HopperConfig, lp: LaunchPlan | None, plain: bool) -> HopperConfig:
    """``config`` without the code a launch of plan ``lp`` cannot run (``_launch_setup`` asks
    where ``TRIM_CODE``): split_only where stream-K with the spread fix-up splits every tile, else
    plain_out where ``plain`` (``plain_output``) and the epilogue has a path of its own.  ``lp``
    None: the guess before the plan, every tile split.

    >>> spread = HopperConfig(policy="streamk", sk_reduce="spread", epilogue="staged")
    >>> trim_config(spread, plan_launch(spread, 512, 512, 32768, 132), True).split_only
    True
    >>> t = trim_config(spread, plan_launch(spread, 2048, 2048, 512, 132), True)  # whole tiles too
    >>> t.split_only, t.plain_out
    (False, True)
    >>> trim_config(spread, plan_launch(spread, 2048, 2048, 512, 132), False).plain_out  # beta != 0
    False
    """
    if config.split_only or config.plain_out:
        return config
    if (config.policy == "streamk" and config.sk_reduce == "spread"
            and (lp is None or every_tile_split(config, lp))):
        return config.replace(split_only=True)
    if plain and config.epilogue in PLAIN_EPILOGUES:
        return config.replace(plain_out=True)
    return config


def plain_output(out, epilogue: str, beta: float) -> bool:
    """Whether the kernel's ``epilogue`` stores ``out`` through its own path (beta == 0 and, for
    "staged" and "tma", rows of unit stride whose base and pitch are 16-byte aligned; "columns"
    the same with rows and columns exchanged): the condition ``HopperConfig.plain_out`` promises,
    kernels/gemm_hopper.cu's ``staged_ok`` and ``columns_ok``."""
    if beta != 0 or epilogue not in PLAIN_EPILOGUES or out.data.ptr % 16:
        return False
    item = out.itemsize
    ld_m, ld_n = out.strides[0] // item, out.strides[1] // item
    if epilogue == "columns":
        ld_m, ld_n = ld_n, ld_m
    return ld_n == 1 and (ld_m * item) % 16 == 0


#: TMA element kinds of the outputs (float32 is the FLOAT32 kind tf32 inputs use)
_OUT_TMA_KIND = {"float16": "float16", "bfloat16": "bfloat16", "float32": "tf32"}
_NO_DESC = bytes(128)


def _output_desc(out, res_dtype: str, beta: float) -> bytes | None:
    """The ``tma`` epilogue's descriptor of ``out``: an (N, M) tensor, boxes of 128 bytes x 64 rows,
    128-byte swizzle.  The kernel takes the TMA path under the staged epilogue's own condition
    (beta == 0, unit column stride, 16-byte aligned base and row stride) and then reads this
    descriptor (its bytes); elsewhere it falls back to the paired stores and never reads it: a
    zero descriptor goes in its place.  None where the kernel would take the path but TMA cannot write the
    output exactly, and the caller launches "staged" instead: rows that overlap or run in reverse,
    and rows whose N elements do not end on a 16-byte boundary (a bulk tensor store clips at the
    tensor's edge only to 16-byte granules, so it would overwrite the elements after the row's
    end up to the next boundary: another array's, or the padding of a column slice)."""
    m, n = out.shape
    if not plain_output(out, "tma", beta):
        return _NO_DESC
    item = out.itemsize
    ld = out.strides[0] // item if m > 1 else n  # one row: any stride will do
    if ld < n or (n * item) % 16:
        return None
    return _encode(out.data.ptr, _OUT_TMA_KIND[res_dtype], n, m, ld, 128 // item, 64)


@functools.lru_cache(maxsize=256)
def _part_ends(ends: tuple[int, ...]) -> bytes:
    """The ``PartEnds`` argument: each K part's end, in k-iterations, as int32s."""
    return np.array(ends, dtype=np.int32).tobytes()


# The kernel's parameters in order (kernels/gemm_hopper.cu, mgemm_gemm_hopper): "desc" the bytes of
# TmaParts (128 per K part), "bytes" those of PartEnds, then pointers and scalars; the TMA-store
# epilogue adds the output's descriptor.
PARAMS = ("desc", "desc", "ptr", "ptr", "i32", "i32", "i64", "i64", "i64", "i64", "f64", "f64",
          "ptr", "ptr", "i32", "ptr", "bytes", "i32")
_SCALARS = {"ptr": ("Q", np.uint64), "i32": ("i", np.int32), "i64": ("q", np.int64), "f64": ("d", np.float64)}


def param_layout(config: HopperConfig) -> tuple[str, tuple[int, ...]]:
    """The kernel's parameters packed into one buffer: a ``struct`` format (little-endian, explicit
    padding) and each parameter's offset; descriptors 64-byte aligned (a ``CUtensorMap``'s
    alignment), every other parameter at a multiple of its size."""
    kinds = PARAMS + (("desc",) if config.epilogue == "tma" else ())
    fmt, offsets, pos = "<", [], 0
    for i, kind in enumerate(kinds):
        if kind == "desc":
            size = 128 * (config.k_parts if i < 2 else 1)
            align, code = 64, f"{size}s"
        elif kind == "bytes":
            size = align = 4
            size *= config.k_parts
            code = f"{size}s"
        else:
            code = _SCALARS[kind][0]
            size = align = 4 if kind == "i32" else 8
        pad = -pos % align
        fmt += f"{pad}x{code}" if pad else code
        offsets.append(pos + pad)
        pos += pad + size
    return fmt, tuple(offsets)


def _driver_launch():
    """``cuLaunchKernel`` of the driver library through ctypes; None where it cannot be loaded."""
    with _driver_lock:
        if not _DRIVER_LAUNCH:
            try:
                import ctypes  # noqa: PLC0415
                fn = _libcuda().cuLaunchKernel
                u32, vp = ctypes.c_uint, ctypes.c_void_p
                fn.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp]
                fn.restype = ctypes.c_int
                _DRIVER_LAUNCH.append(fn)
            except Exception:
                _DRIVER_LAUNCH.append(None)
        return _DRIVER_LAUNCH[0]


def _launch(kernel, grid: int, setup: "_Setup", stream: int, values: tuple) -> None:
    """One launch of ``kernel`` with the parameters ``values`` (in ``PARAMS`` order).  Through
    ``cuLaunchKernel`` on the driver library (ctypes), the parameters packed by ``struct`` into a
    buffer of this thread's.  CuPy's launch of the same 19 arguments took 12–20 µs of host time on
    the H200 host, against 6–10 µs for a kernel of two; with the other steps of this session a
    call with operands at new addresses took 28–96 µs less (RESULTS.md, twenty-first session).
    Through CuPy where the driver library does not load."""
    fmt, offsets = setup.params
    fn = _DRIVER_LAUNCH[0] if _DRIVER_LAUNCH else _driver_launch()
    if fn is None:
        args = tuple(_void(v) if isinstance(v, bytes) else _SCALARS[kind][1](v)
                     for kind, v in zip(PARAMS + ("desc",), values))
        kernel((grid,), (setup.threads,), args, shared_mem=setup.smem)
        return
    bufs = getattr(_per_thread, "by_layout", None)
    if bufs is None:
        bufs = _per_thread.by_layout = {}
    entry = bufs.get(setup.params)
    if entry is None:
        import ctypes  # noqa: PLC0415
        buf = ctypes.create_string_buffer(struct.calcsize(fmt) + 64)
        base = ctypes.addressof(buf)
        shift = -base % 64  # the buffer's descriptors 64-byte aligned in memory too
        ptrs = (ctypes.c_void_p * len(offsets))(*(base + shift + o for o in offsets))
        entry = bufs[setup.params] = (buf, shift, ptrs)
    buf, shift, ptrs = entry
    struct.pack_into(fmt, buf, shift, *values)
    err = fn(kernel.kernel.ptr, grid, 1, 1, setup.threads, 1, 1, setup.smem, stream, ptrs, None)
    if err:
        raise RuntimeError(f"cuLaunchKernel failed (CUresult {err}) for {setup.config}, grid {grid}")


def _void(raw: bytes) -> np.void:
    """``raw`` as one by-value kernel argument of its size (a ``numpy.void``)."""
    dtype = _VOID.get(len(raw))
    if dtype is None:
        dtype = _VOID[len(raw)] = np.dtype(f"V{len(raw)}")
    return np.frombuffer(raw, dtype=dtype)[0]


_VOID: dict[int, np.dtype] = {}


def launch_info(a_shape, b_shape, config: HopperConfig, sms: int | None = None) -> LaunchPlan:
    """The plan ``gemm`` would launch for these shapes and config on the current device."""
    m, k = a_shape
    n = b_shape[1]
    kernel = get_kernel(config)
    sms = sms or device_sms()
    return plan_launch(config, m, n, k, _slots(kernel, config, sms))


__all__ = ["HopperConfig", "choose_config", "choose_policy", "fit_policy", "gemm", "gemm_parts", "get_kernel", "input_kind",
           "launch_info", "max_active_clusters", "plan_launch", "rows_flags", "supported", "swap_pays", "tma_desc",
           "transpose_copy", "transpose_kernel"]
