"""What the Hopper (sm_90a) GEMM kernel can run: its compile-time limits, the frozen config
object that renders them by name (``HopperConfig``: every field a compile-time constant), and the
Python mirror of a launch's grid and stream-K split (``plan_launch``).  Pure Python: imports
without CuPy.  The kernel itself is described in ``mgemm.hopper``.

>>> cfg = HopperConfig(input="bfloat16", tile_n=256, stages=4, policy="streamk")
>>> print(cfg)
hopper bfloat16->bfloat16 128x256x64 s4 streamk g8 raster=m
>>> "#define MGEMM_TILE_N 256" in cfg.render()
True
>>> cfg.smem_bytes
198144
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from mgemm import schedule
from mgemm.kernels import ITEMSIZE as ELEMENT_BYTES  # noqa: N811 (output types' sizes too)
from mgemm.kernels import LaunchPlan, RenderedConfig


KERNEL_SOURCE = "gemm_hopper.cu"
KERNEL_NAME = "mgemm_gemm_hopper"

INPUTS = {"float16": "MGEMM_F16", "bfloat16": "MGEMM_BF16", "tf32": "MGEMM_TF32"}
OUTPUTS = {"float16": "MGEMM_F16", "bfloat16": "MGEMM_BF16", "float32": "MGEMM_F32"}
ITEMSIZE = {"float16": 2, "bfloat16": 2, "tf32": 4}
STORAGE = {"float16": "float16", "bfloat16": "bfloat16", "tf32": "float32"}

TILE_M = 128  # cooperative: two consumer warpgroups of 64 rows each
PINGPONG_TILE_MS = (64, 128)  # pingpong: one consumer warpgroup per tile, m64 wgmmas per k16 step
# Cooperative 64-row tiles, split along N: both consumer warpgroups multiply the tile's 64 rows of
# A, each by half of its columns (whole 64-wide boxes of B: these widths)
SPLIT_N_TILE_M = 64
SPLIT_N_TILE_NS = (128, 256)
THREADS = 384  # producer warpgroup + two consumer warpgroups
CONSUMER_THREADS = 256
SMEM_LIMIT = 232448  # 227 KB: the most shared memory one block may have on sm_90
# 96, 160, 192, 224: cooperative consumers, one CTA per tile.  A width that is not a multiple of 64
# still loads whole 64-wide boxes of a row-major (MN-major) B: its ring holds BN_rows of B per stage.
TILE_NS = (64, 96, 128, 160, 192, 224, 256)
# Exact widths, odd multiples of 16, over a K-major B (cooperative 128-row tiles): a narrow product's
# N in two or three tiles with fewer padded columns than the widths above (N = 288 as 2 x 144,
# not 2 x 160); their ring holds just tile_n rows of B, their staged epilogue whole rows.
EXACT_TILE_NS = (144, 176, 208, 240)
# Wide tiles past the 256 columns of one wgmma (cooperative 128-row tiles over a K-major B): both
# consumer warpgroups multiply all 128 rows of A (two m64 blocks), each by half of the tile's
# columns (wgmma n144 ... n192), so a narrow product's whole N fits one tile column and A is read
# once; B's rows come in two TMA boxes of half the tile (a box holds at most 256 rows).  Not 352
# (two warpgroups of 176 columns spill registers), nor with the spread fix-up.
WIDE_TILE_NS = (288, 320, 384)
MN_BOX = 64  # elements of M or N per MN-major TMA box (128 bytes of a 16-bit input)
EPILOGUES = ("pair", "direct", "staged", "tma", "columns")
PLAIN_EPILOGUES = ("staged", "tma", "columns")  # those with a path of their own (HopperConfig.plain_out)
SK_REDUCES = ("owner", "spread")  # how a split tile's stream-K partials are added (see HopperConfig)
REGS = (40, 232)  # setmaxnreg of (producer, consumers): the defaults
CLUSTER_MS = (1, 2, 4)  # a thread-block cluster's CTAs on tiles adjacent along M (B multicast)
CLUSTER_NS = (1, 2)  # ... and along N (A multicast)
CLUSTER_MAX = 4  # CTAs per cluster at most
CLUSTER_POLICIES = ("static", "per_tile", "streamk")  # the policies whose schedule a cluster walks
LAUNCH_REGS = 168  # what ptxas gives each of the 384 threads under __launch_bounds__(384, 1)
MAX_K_PARTS = 8  # kKParts: descriptor pairs in the kernel's parameters (2 KB at 8)


@dataclass(frozen=True)
class HopperConfig(RenderedConfig):
    """One variant of the Hopper GEMM kernel; every field is a compile-time constant."""

    KERNEL_SOURCE: ClassVar[str] = KERNEL_SOURCE

    input: str = "bfloat16"
    output: str | None = None  # None: the storage type of the input
    tile_n: int = 128
    stages: int = 4
    policy: str = "static"
    group: int = 8
    raster: str = "m"
    record: bool = False  # debug: the kernel logs every work unit
    # debug: each consumer warpgroup logs when it took, finished the mainloop of, and was done with
    # every unit (the GPU's ns timer; ``gemm(timeline=True)``, ``mgemm.timeline``)
    timeline: bool = False
    a_k_major: bool = True  # False: A column-major (M contiguous; 16-bit inputs only)
    b_k_major: bool = True  # False: B row-major (N contiguous; 16-bit inputs only)
    # "pair": two adjacent columns per store where aligned; "direct": one element per store;
    # "staged": with beta == 0 and 16-byte aligned output rows, each consumer warpgroup's rows go
    # through its own 16 KB shared-memory buffer and out as 16-byte stores of whole rows ("pair"
    # elsewhere); "tma": as "staged", the buffer stored by bulk tensor stores (TMA) that run on
    # while the warpgroup goes to its next tile ("pair" elsewhere); "columns": as "staged" for a
    # column-major output (the transposed product's, ``swap_pays``), its 64-row columns staged and
    # stored as 16-byte pieces (element-wise elsewhere)
    epilogue: str = "pair"
    # False (cooperative): both consumer warpgroups on every tile (128 rows: 64 each; 64 rows:
    # half the columns each, ``split_n``).  True (pingpong): each owns whole tile_m x tile_n tiles
    # in turn, one's epilogue under the other's mainloop.
    pingpong: bool = False
    # 128; 64 with pingpong (at most 128 accumulators per thread) or split along N (cooperative,
    # tile_n in SPLIT_N_TILE_NS)
    tile_m: int = TILE_M
    producer_regs: int = REGS[0]  # setmaxnreg of the producer warpgroup
    consumer_regs: int = REGS[1]  # setmaxnreg of the consumer warpgroups
    # Clusters of cluster_m x cluster_n CTAs on adjacent tiles: those of a tile column share B, those
    # of a tile row A; each loads its part of both and multicasts it to the CTAs that share it
    # (static / per_tile / streamk, cooperative, tile_n >= 128; at most CLUSTER_MAX CTAs).  Under
    # stream-K the blocks of tiles are split over the clusters, each CTA taking the same k-ranges
    # of its own tile of a block.
    cluster_m: int = 1
    cluster_n: int = 1
    # Stream-K fix-up: "owner" (the CTA that ends a split tile adds the others' partials, one after
    # another) or "spread" (cooperative consumers: every contributor waits for all partials and adds
    # its share of the tile's elements; for tiles split many ways).  Other policies split no tile.
    sk_reduce: str = "owner"
    # K held as this many separate parts (``gemm_parts``: a block task's K chunks), walked in one
    # launch as one K range, one descriptor pair per part: the parts add up in the accumulators
    k_parts: int = 1
    # Stream-K: how many whole waves before the partial last one are split with it (host only: the
    # launch's sk_tiles; the kernel is the same).  1: every CTA gets one to two tiles' worth of K;
    # 0: whole tiles first, then every CTA a sliver of the few left over (``schedule.streamk_tiles``)
    sk_waves: int = 1
    # Stream-K under one wave of tiles (blocks with clusters): 0 splits the K iterations evenly over
    # every slot (a CTA's range may straddle two tiles); S > 0 launches S CTAs (clusters) a tile
    # (block), fewer where the slots or the k-iterations do not allow S, each one equal k-slice:
    # split-K, every tile's slices read in step (host only: the launch's grid; the same kernel).
    # Other policies split no tile: 0 there
    sk_ways: int = 0
    # 0: the wgmmas accumulate a unit's whole K range.  P > 0: windows of P k-iterations, each added
    # to the unit's accumulators with float32 adds (rounded to nearest; a tensor core's own float32
    # accumulation truncates): float32 emulated with bfloat16 pieces (``mgemm.emulate``).
    # Cooperative consumers, tile_n <= 192 (two accumulator sets per thread).
    promote: int = 0
    # "staged", "tma" and "columns" epilogues: 0 stages ``out_chunk_bytes``' default chunk of a
    # warpgroup's columns at a time; C > 0 stages C columns at a time (a smaller buffer: room for
    # another ring stage, as five of 64 x 256 with 128-byte chunks)
    out_cols: int = 0
    # True: a second set of accumulators holds each tile's result (times alpha) until the next
    # unit's first wgmmas are issued, and its epilogue runs under them instead of between the two
    # mainloops.  Cooperative consumers, at most 96 accumulators a thread, a policy that splits no
    # tile (static, dynamic, per_tile), no promote or timeline.
    overlap: bool = False
    # "tma" epilogue of an even number of chunks per warpgroup row (``out_chunk_bytes``): 2 gives
    # each consumer warpgroup two staging buffers, odd chunks through the second, so that a chunk
    # waits only for the bulk stores of the chunk before last to have read its buffer (1: those of
    # the chunk just stored)
    out_buffers: int = 1
    # Code the launch never runs, left out of the binary (less to fetch into cold instruction
    # caches; a launch sets these itself where they hold, ``TRIM_CODE``).  split_only (stream-K,
    # spread fix-up): every unit is a split tile, so there is no whole-tile epilogue; a launch
    # with a whole tile is refused (``plan_launch``).  plain_out ("staged", "tma" or "columns"
    # epilogue): beta == 0 and an output that epilogue's own path takes (``plain_output``), so the
    # paired and element-wise fallbacks are left out.  The kernel traps where either fails.
    split_only: bool = False
    plain_out: bool = False

    def __post_init__(self):
        self.check_types(INPUTS, STORAGE, OUTPUTS)
        if self.tile_n not in TILE_NS + EXACT_TILE_NS + WIDE_TILE_NS:
            raise ValueError(f"tile_n must be one of {TILE_NS + EXACT_TILE_NS + WIDE_TILE_NS}, got {self.tile_n}")
        if self.tile_n in EXACT_TILE_NS + WIDE_TILE_NS and (not self.b_k_major or self.pingpong
                                                            or self.tile_m != TILE_M):
            what = "an exact width" if self.tile_n in EXACT_TILE_NS else "a wide tile"
            raise ValueError(f"tile_n={self.tile_n} ({what}) needs a K-major B (b_k_major=True) and "
                             f"cooperative {TILE_M}-row tiles")
        if self.stages < 2:
            raise ValueError(f"stages must be at least 2, got {self.stages}")
        if not self.pingpong and self.tile_m not in (TILE_M, SPLIT_N_TILE_M):
            raise ValueError(f"tile_m must be {TILE_M} or {SPLIT_N_TILE_M} without pingpong, got {self.tile_m}")
        if self.split_n and self.tile_n not in SPLIT_N_TILE_NS:
            raise ValueError(f"a cooperative {self.tile_m}-row tile splits its columns over the two consumer "
                             f"warpgroups: tile_n one of {SPLIT_N_TILE_NS}, got {self.tile_n}")
        if self.pingpong and self.tile_m not in PINGPONG_TILE_MS:
            raise ValueError(f"pingpong tile_m must be one of {PINGPONG_TILE_MS}, got {self.tile_m}")
        if self.tile_n % 128 and self.tile_n != 64 and (self.pingpong or (self.cluster_size > 1 and not self.b_k_major)):
            raise ValueError(f"tile_n={self.tile_n} needs cooperative consumers, and one CTA per tile unless B is "
                             f"K-major (b_k_major=True)")
        if self.out_cols:
            if self.epilogue == "columns":
                pieces = 64 * ELEMENT_BYTES[self.output] // 16  # 16-byte pieces of a staged 64-row column
                if self.out_cols < 0 or self.wg_n % self.out_cols or (self.out_cols * pieces) % 128:
                    raise ValueError(f"out_cols={self.out_cols!r}: the columns epilogue's chunk, a divisor of "
                                     f"a warpgroup's {self.wg_n} columns of whole 128-thread rounds of 16-byte "
                                     f"pieces (a multiple of {128 // math.gcd(128, pieces)})")
            elif self.epilogue in ("staged", "tma"):
                pitch = self.out_cols * ELEMENT_BYTES[self.output]
                if self.out_cols < 0 or self.wg_n % self.out_cols or pitch % 32 or pitch < 128:
                    raise ValueError(f"out_cols={self.out_cols!r}: the staged epilogue's chunk, a divisor of a "
                                     f"warpgroup's {self.wg_n} columns of at least 128 bytes, a multiple of 32")
            else:
                raise ValueError(f"out_cols={self.out_cols!r}: the chunk of a staged, TMA or columns "
                                 f"epilogue, not of {self.epilogue!r}")
        if self.epilogue == "tma" and self.out_chunk_bytes % 128:
            raise ValueError(f"epilogue='tma' stores whole 128-byte boxes: {self.tile_n} {self.output} "
                             f"columns are staged {self.out_chunk_bytes} bytes at a time (use 'staged')")
        if self.pingpong and self.tile_m * self.tile_n // 128 > 128:
            raise ValueError(f"a pingpong tile of {self.tile_m}x{self.tile_n} needs "
                             f"{self.tile_m * self.tile_n // 128} accumulators per thread, more than 128 "
                             f"(use tile_m=64 with tile_n=256)")
        for name, regs in (("producer_regs", self.producer_regs), ("consumer_regs", self.consumer_regs)):
            if regs % 8 or not 24 <= regs <= 256:
                raise ValueError(f"{name} must be a multiple of 8 in [24, 256], got {regs}")
        if self.producer_regs > LAUNCH_REGS or self.consumer_regs < LAUNCH_REGS:
            raise ValueError(f"setmaxnreg moves registers from the producer (<= {LAUNCH_REGS}) to the "
                             f"consumers (>= {LAUNCH_REGS}), got {self.producer_regs}/{self.consumer_regs}")
        if 128 * self.producer_regs + CONSUMER_THREADS * self.consumer_regs > 65536:
            raise ValueError(f"producer_regs {self.producer_regs} and consumer_regs {self.consumer_regs} "
                             f"need more than the 65536 registers of an SM")
        if self.out_buffers not in (1, 2):
            raise ValueError(f"out_buffers must be 1 or 2, got {self.out_buffers!r}")
        if self.smem_bytes > SMEM_LIMIT:
            raise ValueError(f"{self.stages} stages of {self.tile_m}x{self.tile_n} need {self.smem_bytes} "
                             f"bytes of shared memory, more than {SMEM_LIMIT}")
        if self.policy not in schedule.POLICIES:
            raise ValueError(f"policy must be one of {schedule.POLICIES}, got {self.policy!r}")
        if self.raster not in ("m", "n"):
            raise ValueError(f"raster must be 'm' or 'n', got {self.raster!r}")
        if self.epilogue not in EPILOGUES:
            raise ValueError(f"epilogue must be one of {EPILOGUES}, got {self.epilogue!r}")
        if self.sk_reduce not in SK_REDUCES:
            raise ValueError(f"sk_reduce must be one of {SK_REDUCES}, got {self.sk_reduce!r}")
        if self.sk_reduce == "spread" and self.pingpong:
            raise ValueError("sk_reduce='spread' is for cooperative consumers, not pingpong")
        if self.sk_reduce == "spread" and self.wide:
            raise ValueError(f"sk_reduce='spread' with a wide tile (tile_n={self.tile_n}) is not supported: "
                             f"its registers spill (use 'owner')")
        if self.timeline and (self.record or self.cluster_size > 1):
            raise ValueError("timeline=True needs one CTA per tile (no cluster) and no record (debug)")
        if ITEMSIZE[self.input] != 2 and not (self.a_k_major and self.b_k_major):
            raise ValueError("tf32 operands must be K-major (wgmma has no transpose for tf32)")
        schedule.check_sk_waves(self.sk_waves)
        if not isinstance(self.sk_ways, int) or self.sk_ways < 0:
            raise ValueError(f"sk_ways must be a non-negative integer, got {self.sk_ways!r}")
        if self.policy != "streamk":  # other policies split no tile
            object.__setattr__(self, "sk_ways", 0)
        if not isinstance(self.promote, int) or self.promote < 0:
            raise ValueError(f"promote must be a non-negative integer, got {self.promote!r}")
        if self.promote and (self.pingpong or self.tile_n > 192):
            raise ValueError(f"promote={self.promote} needs cooperative consumers and tile_n <= 192 "
                             f"(two accumulator sets per thread), got pingpong={self.pingpong}, "
                             f"tile_n={self.tile_n}")
        if self.overlap and (self.pingpong or self.acc_per_thread > 96 or self.policy == "streamk"
                             or self.promote or self.timeline):
            raise ValueError(f"overlap=True holds a second set of accumulators: cooperative consumers, at "
                             f"most 96 accumulators a thread (this tile: {self.acc_per_thread}), a policy "
                             f"that splits no tile (not 'streamk'), no promote or timeline")
        if self.out_buffers == 2 and (self.epilogue != "tma" or self.out_chunks % 2):
            raise ValueError(f"out_buffers=2 is for the 'tma' epilogue with an even number of chunks per "
                             f"warpgroup row, got epilogue={self.epilogue!r} with {self.out_chunks} chunk(s)")
        if self.split_only and (self.policy != "streamk" or self.sk_reduce != "spread"):
            raise ValueError(f"split_only=True is for stream-K with the spread fix-up, got policy="
                             f"{self.policy!r}, sk_reduce={self.sk_reduce!r}")
        if self.plain_out and self.epilogue not in PLAIN_EPILOGUES:
            raise ValueError(f"plain_out=True leaves the fallbacks out of a {PLAIN_EPILOGUES} epilogue, "
                             f"got epilogue={self.epilogue!r}")
        if not 1 <= self.k_parts <= MAX_K_PARTS:
            raise ValueError(f"k_parts must be in [1, {MAX_K_PARTS}], got {self.k_parts!r}")
        if self.cluster_m not in CLUSTER_MS:
            raise ValueError(f"cluster_m must be one of {CLUSTER_MS}, got {self.cluster_m!r}")
        if self.cluster_n not in CLUSTER_NS:
            raise ValueError(f"cluster_n must be one of {CLUSTER_NS}, got {self.cluster_n!r}")
        if self.cluster_size > CLUSTER_MAX:
            raise ValueError(f"cluster_m={self.cluster_m} x cluster_n={self.cluster_n} is more than "
                             f"{CLUSTER_MAX} CTAs a cluster")
        if self.cluster_size > 1:
            what = (f"cluster_m={self.cluster_m}" if self.cluster_n == 1
                    else f"cluster_m={self.cluster_m}, cluster_n={self.cluster_n}")
            if self.policy not in CLUSTER_POLICIES:
                raise ValueError(f"{what} with policy={self.policy!r} is not supported: every CTA of a "
                                 f"cluster must walk the same tile blocks (policy one of {CLUSTER_POLICIES})")
            if self.pingpong:
                raise ValueError(f"{what} with pingpong=True is not supported (cooperative consumers only)")
            if self.record:
                raise ValueError(f"{what} with record=True (debug=True) is not supported: the record "
                                 f"mirror knows no tile blocks")
            if self.tile_n < 128 and self.cluster_m > 1:
                raise ValueError(f"{what} with tile_n={self.tile_n} is not supported: each CTA multicasts "
                                 f"its part of B, whole 64-wide MN-major boxes (tile_n 128 or 256) or K-major "
                                 f"rows (tile_n 128 or more)")
            if not self.a_k_major and (self.tile_m // MN_BOX) % self.cluster_n:
                raise ValueError(f"{what} with a column-major A (a_k_major=False) and tile_m={self.tile_m} "
                                 f"is not supported: each CTA multicasts whole 64-wide boxes of A (tile_m 128)")
            if self.b_k_major and self.tile_n % (8 * self.cluster_m):
                raise ValueError(f"{what} with tile_n={self.tile_n} is not supported: each CTA multicasts "
                                 f"whole 8-row swizzle atoms of B's tile_n K-major rows")
            if not self.b_k_major and (self.b_rows // MN_BOX) % self.cluster_m:
                raise ValueError(f"{what} with a row-major B (b_k_major=False) and tile_n={self.tile_n} "
                                 f"is not supported: each CTA multicasts whole 64-wide boxes of B "
                                 f"(tile_n 256)")

    def replace(self, **changes: Any) -> "HopperConfig":
        return dataclasses.replace(self, **changes)

    def replace_fitting(self, **changes: Any) -> "HopperConfig":
        """``replace(**changes)`` on as many ring stages as still fit one block's shared memory
        (no more than asked, at least 2): a float32 output stages rows twice as wide as the
        16-bit one a config was chosen for, which at 144 and 176 columns (whole rows staged)
        passes ``SMEM_LIMIT`` on 5 and 4 stages.

        >>> cfg = HopperConfig(input="float16", tile_n=144, stages=5, b_k_major=True,
        ...                    epilogue="staged")
        >>> cfg.replace_fitting(output="float32").stages, cfg.replace_fitting(k_parts=2).stages
        (4, 5)
        """
        trial = object.__new__(type(self))  # unchecked: only its sizes are read
        trial.__dict__.update(self.__dict__, **changes)
        while trial.stages > 2 and trial.smem_bytes > SMEM_LIMIT:
            trial.__dict__["stages"] -= 1
        return self.replace(**{**changes, "stages": trial.stages})

    # --- what the C++ derives from the constants (kept in step with kernels/gemm_hopper.cu) ---
    @property
    def cluster_size(self) -> int:
        """CTAs per thread-block cluster: ``cluster_m * cluster_n``."""
        return self.cluster_m * self.cluster_n

    @property
    def split_n(self) -> bool:
        """Cooperative 64-row tiles: the consumer warpgroups split the tile's columns."""
        return not self.pingpong and self.tile_m == SPLIT_N_TILE_M

    @property
    def wide(self) -> bool:
        """Cooperative 128-row tiles wider than one wgmma (``WIDE_TILE_NS``): each consumer
        warpgroup takes all 128 rows and half the columns (Config::kWide)."""
        return not self.pingpong and self.tile_m == TILE_M and self.tile_n in WIDE_TILE_NS

    @property
    def wg_n(self) -> int:
        """Columns of one consumer warpgroup's wgmmas (and of its part of the tile): half the tile's
        split along N or wide, else all of them (Config::kWgN)."""
        return self.tile_n // 2 if self.split_n or self.wide else self.tile_n

    @property
    def tile_k(self) -> int:
        """One 128-byte swizzle row of K: 64 for 16-bit inputs, 32 for tf32."""
        return 128 // ITEMSIZE[self.input]

    @property
    def threads(self) -> int:
        return THREADS

    @property
    def acc_per_thread(self) -> int:
        """fp32 accumulators per consumer thread: the tile over the threads that compute it (both
        consumer warpgroups, or one with pingpong)."""
        return self.tile_m * self.tile_n // (128 if self.pingpong else CONSUMER_THREADS)

    @property
    def out_chunk_bytes(self) -> int:
        """Bytes of a warpgroup's row (``wg_n`` columns) the staged / TMA epilogue stages at a time:
        256, the whole row when narrower, 128 when the row is not a whole number of 256-byte chunks
        (192 16-bit columns), half the row when it is not a whole number of 128-byte chunks either
        (160 or 224 16-bit columns: the kernel then rotates the staged pieces instead of the TMA's
        XOR swizzle); the whole row of an exact width (``EXACT_TILE_NS``, or a wide tile's
        warpgroup of 144 or 176 columns); ``out_cols`` columns where set."""
        if self.out_cols:
            return self.out_cols * ELEMENT_BYTES[self.output]
        row = self.wg_n * ELEMENT_BYTES[self.output]
        if row <= 256 or self.wg_n % 32:
            return row
        return 256 if row % 256 == 0 else 128 if row % 128 == 0 else row // 2

    @property
    def b_rows(self) -> int:
        """Rows of B a ring stage holds: ``tile_n`` rounded up to whole 64-wide MN-major boxes
        (an exact width or a wide tile: ``tile_n``, K-major rows only)."""
        if self.tile_n in EXACT_TILE_NS + WIDE_TILE_NS:
            return self.tile_n
        return -(-self.tile_n // MN_BOX) * MN_BOX

    @property
    def b_box_rows(self) -> int:
        """Rows of a K-major B per TMA box: a CTA's part (``tile_n / cluster_m``) in one box, or
        where that passes the 256 rows a box may hold (a wide tile's), a warpgroup's columns
        (Config::kBBoxRows)."""
        part = self.tile_n // self.cluster_m
        return part if part <= 256 else self.wg_n

    @property
    def out_chunks(self) -> int:
        """Chunks of ``out_chunk_bytes`` in a warpgroup's row (Config::kOutChunks)."""
        return self.wg_n * ELEMENT_BYTES[self.output] // self.out_chunk_bytes

    @property
    def smem_bytes(self) -> int:
        """Alignment slack (1024) + the stage ring + the barrier area (512; 1024 with the TMA
        store, whose boxes are 1024-byte aligned) + the staged epilogue's buffers (two warpgroups
        x 64 rows x ``out_chunk_bytes``, times ``out_buffers``), as Config::kSmemBytes."""
        out = 0
        if self.epilogue in ("staged", "tma", "columns"):
            out = 2 * 64 * self.out_chunk_bytes * self.out_buffers
        barriers = 1024 if self.epilogue == "tma" else 512
        return 1024 + self.stages * (self.tile_m + self.b_rows) * 128 + barriers + out

    @property
    def align(self) -> int:
        """Elements per 16 bytes: TMA needs leading dimensions (in bytes) that are multiples of 16."""
        return 16 // ITEMSIZE[self.input]

    # --- rendering and identity ---
    def defines(self) -> dict[str, str]:
        return {
            **self.shared_defines(),
            "MGEMM_TILE_N": str(self.tile_n),
            "MGEMM_STAGES": str(self.stages),
            "MGEMM_EPILOGUE": "MGEMM_EPILOGUE_" + self.epilogue.upper(),
            "MGEMM_PINGPONG": str(int(self.pingpong)),
            "MGEMM_TILE_M": str(self.tile_m),
            "MGEMM_PRODUCER_REGS": str(self.producer_regs),
            "MGEMM_CONSUMER_REGS": str(self.consumer_regs),
            "MGEMM_CLUSTER_M": str(self.cluster_m),
            "MGEMM_CLUSTER_N": str(self.cluster_n),
            "MGEMM_SK_REDUCE": "MGEMM_SK_REDUCE_" + self.sk_reduce.upper(),
            "MGEMM_K_PARTS": str(self.k_parts),
            "MGEMM_TIMELINE": str(int(self.timeline)),
            "MGEMM_PROMOTE": str(self.promote),
            "MGEMM_OUT_COLS": str(self.out_cols),
            "MGEMM_OVERLAP": str(int(self.overlap)),
            "MGEMM_OUT_BUFFERS": str(self.out_buffers),
            "MGEMM_SPLIT_ONLY": str(int(self.split_only)),
            "MGEMM_PLAIN_OUT": str(int(self.plain_out)),
            "MGEMM_SMEM_BYTES": str(self.smem_bytes),  # the kernel static_asserts it equals its own
        }

    def __str__(self) -> str:
        return (f"hopper {self.input}->{self.output} {self.tile_m}x{self.tile_n}x{self.tile_k} "
                f"s{self.stages} {self.policy} g{self.group} raster={self.raster}"
                + ("" if self.a_k_major else " A:col") + ("" if self.b_k_major else " B:row")
                + ("" if self.epilogue == "pair" else f" epi={self.epilogue}")
                + (" pingpong" if self.pingpong else "")
                + ("" if (self.producer_regs, self.consumer_regs) == REGS
                   else f" regs={self.producer_regs}/{self.consumer_regs}")
                + ("" if self.cluster_size == 1 else f" cluster{self.cluster_m}"
                   + ("" if self.cluster_n == 1 else f"x{self.cluster_n}"))
                + ("" if self.sk_reduce == "owner" else f" sk={self.sk_reduce}")
                + ("" if self.k_parts == 1 else f" parts={self.k_parts}")
                + ("" if self.sk_waves == 1 else f" skw{self.sk_waves}")
                + ("" if not self.sk_ways else f" ways{self.sk_ways}")
                + ("" if not self.promote else f" promote{self.promote}")
                + ("" if not self.out_cols else f" oc{self.out_cols}")
                + (" overlap" if self.overlap else "")
                + ("" if self.out_buffers == 1 else f" ob{self.out_buffers}")
                + (" split-only" if self.split_only else "") + (" plain-out" if self.plain_out else "")
                + (" record" if self.record else "") + (" timeline" if self.timeline else ""))


def input_kind(dtype: str, allow_tf32: bool = False) -> str:
    """The wgmma input for a storage dtype; float32 only as tf32, and only when allowed."""
    if dtype == "float32" and allow_tf32:
        return "tf32"
    if dtype not in ("float16", "bfloat16"):
        raise TypeError(f"the Hopper kernel multiplies float16, bfloat16 or (allow_tf32) float32, "
                        f"not {dtype}")
    return dtype


def _blocks(config: HopperConfig, rows: int, cols: int) -> int:
    """Blocks of ``config.cluster_m`` x ``config.cluster_n`` tiles over a ``rows`` x ``cols`` tile
    grid (one a tile without clusters): what a cluster launch schedules."""
    return -(-rows // config.cluster_m) * -(-cols // config.cluster_n)


@functools.lru_cache(maxsize=256)
def plan_launch(config: HopperConfig, m: int, n: int, k: int, slots: int) -> LaunchPlan:
    """Grid and stream-K split for ``slots`` resident CTAs (SMs × occupancy, occupancy 1 here).

    With clusters the grid is whole clusters over the blocks of ``cluster_m`` x ``cluster_n``
    tiles: one per block (per_tile), or ``slots // size`` but at least one and at most one per
    block (static).  Stream-K splits the blocks over the clusters as it splits tiles over CTAs
    (``sk_tiles`` then counts blocks): 256x256x65536 is one 2 x 2 block, split 30 ways.

    >>> cfg = HopperConfig(tile_n=256, cluster_m=2)
    >>> plan_launch(cfg, 8192, 8192, 8192, 132).grid, plan_launch(cfg, 300, 256, 64, 132).grid
    (132, 4)
    >>> plan_launch(cfg.replace(policy="per_tile"), 300, 512, 64, 132).grid  # 3 rows: 2 pairs x 2 cols
    8
    >>> plan_launch(cfg.replace(policy="per_tile", cluster_n=2), 300, 768, 64, 132).grid  # 2 x 2 blocks
    16
    >>> quad = HopperConfig(policy="streamk", sk_reduce="spread", cluster_m=2, cluster_n=2)
    >>> lp = plan_launch(quad, 256, 256, 65536, 120)
    >>> lp.grid, lp.sk_tiles
    (120, 1)

    Stream-K with the spread fix-up where every tile is split four or more ways launches a whole
    number of CTAs per tile: 16 tiles on 132 slots, 8 each.

    >>> plan_launch(HopperConfig(policy="streamk", sk_reduce="spread"), 512, 512, 32768, 132).grid
    128

    ``sk_ways`` splits each of fewer tiles than slots into that many equal k-slices (fewer where
    the slots do not hold them all, or K has fewer iterations): 49 tiles two ways on 98 CTAs, 40
    tiles three ways on 120.

    >>> ways = HopperConfig(policy="streamk", sk_ways=3)
    >>> plan_launch(ways, 896, 896, 8192, 132).grid, plan_launch(ways, 640, 1024, 8192, 132).grid
    (98, 120)
    """
    rows, cols, k_iters = schedule.tile_grid(m, n, k, config.tile_m, config.tile_n, config.tile_k)
    size = config.cluster_size
    tiles = _blocks(config, rows, cols)  # with clusters: blocks
    if size > 1 and config.policy != "streamk":
        clusters = tiles if config.policy == "per_tile" else max(1, min(slots // size, tiles))
        return LaunchPlan(rows, cols, k_iters, size * clusters, 0)
    # stream-K: over tiles and CTAs, or over a cluster's blocks of tiles and whole clusters
    slots = max(1, slots // size)
    sk = schedule.streamk_tiles(tiles, slots, k_iters, config.sk_waves) if config.policy == "streamk" else 0
    grid = schedule.launch_grid(config.policy, tiles, slots, sk)
    if sk and grid >= 4 * tiles and config.sk_reduce == "spread":
        # every tile split the same number of ways, so no CTA's range straddles two tiles:
        # 512x512x32768 (16 tiles) on 128 CTAs ran in 49.8 µs against 64.5 on 132 (H200, fp16,
        # RESULTS.md thirteenth session), 256x256x65536 (4 tiles) in 43.6 against 44.8
        grid = tiles * (grid // tiles)
    if sk == tiles and config.sk_ways:
        grid = tiles * max(1, min(config.sk_ways, slots // tiles, k_iters))
    lp = LaunchPlan(rows, cols, k_iters, size * grid, sk)
    if config.split_only and not every_tile_split(config, lp):
        raise ValueError(f"split_only=True, but {m}x{n}x{k} on {slots} slots runs whole tiles "
                         f"(grid {lp.grid}, {lp.sk_tiles} of {tiles} tiles or blocks split)")
    return lp


def every_tile_split(config: HopperConfig, lp: LaunchPlan) -> bool:
    """Whether stream-K's split runs every tile (with clusters, every block of tiles) in pieces:
    all of them in the stream-K range, each range shorter than a tile's k-iterations (so none
    holds a whole tile), as ``split_only`` needs.

    >>> spread = HopperConfig(policy="streamk", sk_reduce="spread")
    >>> every_tile_split(spread, plan_launch(spread, 512, 512, 32768, 132))  # 16 tiles, 8 ways each
    True
    >>> every_tile_split(spread, plan_launch(spread, 2048, 2048, 512, 132))  # 256 tiles
    False
    """
    blocks = _blocks(config, lp.rows, lp.cols)
    per_range = -(-blocks * lp.k_iters // max(1, lp.grid // config.cluster_size))
    return config.policy == "streamk" and lp.sk_tiles == blocks and per_range < lp.k_iters
