"""The persistent GEMM kernel from Python: configuration, heuristic, compilation and launch.

``KernelConfig`` is the single source of truth for one kernel variant: it renders the compile-time
constants of ``kernels/gemm_persistent.cu`` by name, forms the compile-cache key and names itself in
logs and benchmark rows.  ``choose_config`` is a deterministic pure-Python heuristic (tested on the
CPU).  ``gemm`` launches on CuPy arrays.  CuPy is imported lazily, so this module imports on a
machine without a GPU.

>>> cfg = KernelConfig(input="float16", policy="streamk")
>>> print(cfg)
float16->float16 128x256x32 s4 w2x4 streamk g8 raster=m A:k-major B:n-major
>>> "#define MGEMM_POLICY MGEMM_POLICY_STREAMK" in cfg.render()
True
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, NamedTuple

import numpy as np

from mgemm import schedule

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
KERNEL_SOURCE = "gemm_persistent.cu"
KERNEL_NAME = "mgemm_gemm"

# Input kinds: what A and B hold and which mainloop multiplies them.  "float32" is the exact SIMT
# path; "tf32" reads float32 and multiplies on tensor cores (only when allow_tf32).
INPUTS = {"float16": "MGEMM_F16", "bfloat16": "MGEMM_BF16", "float32": "MGEMM_F32",
          "tf32": "MGEMM_TF32", "float64": "MGEMM_F64"}
OUTPUTS = {"float16": "MGEMM_F16", "bfloat16": "MGEMM_BF16", "float32": "MGEMM_F32",
           "float64": "MGEMM_F64"}
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "tf32": 4, "float64": 8}
STORAGE = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "tf32": "float32",
           "float64": "float64"}

# Base tile per input kind: (tile_m, tile_n, tile_k, stages, warps_m, warps_n), what
# ``KernelConfig.default`` builds (the ladder's and the tests' starting point).  The CI compile
# script (.ci/compile-kernels.sh) builds these.  What a launch without a config gets is the
# heuristic's choice from TILE_CHOICES (and, for 16-bit inputs, TILE_KNOBS) below.
DEFAULT_TILES = {
    "float16": (128, 128, 32, 4, 2, 2),  # 0.42 of cuBLAS at 8192³ on the H200; 128x256x32: 0.38
    "bfloat16": (128, 128, 32, 4, 2, 2),
    "tf32": (128, 128, 16, 4, 2, 2),
    "float64": (128, 64, 16, 3, 2, 2),
    "float32": (64, 128, 8, 3, 2, 2),  # 0.88 of cuBLAS at 8192³ on the H200; 128x128x8: 0.84
}
# The tiles the heuristic chooses from, the most efficient first, with the CTAs per SM each is
# expected to reach (the launch asks the occupancy API for the real number).
# Float16/bfloat16: 256x128x32 s4 with 8 warps of 64x64 (242 registers: 1 CTA per SM) reached
# 0.60 of cuBLAS at 8192³ on the H200 with TILE_KNOBS, 128x128x32 s6 0.58, against 0.42 for the
# base tile without them (benchmarks/RESULTS.md, the float16 ladder of 2026-11-30).
TILE_CHOICES = {
    "float16": [((256, 128, 32, 4, 4, 2), 1), ((128, 128, 32, 6, 2, 2), 2), ((64, 128, 32, 4, 2, 2), 3)],
    "bfloat16": [((256, 128, 32, 4, 4, 2), 1), ((128, 128, 32, 6, 2, 2), 2), ((64, 128, 32, 4, 2, 2), 3)],
    "tf32": [((128, 128, 16, 4, 2, 2), 2), ((64, 128, 32, 3, 2, 2), 2)],
    "float64": [((128, 64, 16, 3, 2, 2), 2), ((64, 64, 16, 3, 2, 2), 3)],
    "float32": [((64, 128, 8, 3, 2, 2), 4), ((128, 128, 8, 3, 4, 2), 2)],
}
# The mainloop knobs the heuristic turns on for every tile of these inputs (each measured alone and
# together in the ladder: swizzle +13 %, the three together +31 % at 128x128x32 s4).
TILE_KNOBS = {"float16": {"swizzle": True, "fast_copy": True, "frag_carry": True},
              "bfloat16": {"swizzle": True, "fast_copy": True, "frag_carry": True}}
# Shared memory of one sm_90 SM (228 KiB), for which TILE_CHOICES counts its CTAs, and what the
# driver keeps of an SM's for each resident CTA (``resident_ctas``)
SM90_SMEM_PER_SM = 233472
SMEM_PER_CTA_RESERVED = 1024


class RenderedConfig:
    """What every kernel configuration shares: its ``defines()`` become ``#define`` lines in front
    of ``KERNEL_SOURCE``, and the cache key hashes every kernel file, the options and those lines
    (so editing a header recompiles)."""

    KERNEL_SOURCE: ClassVar[str]

    def defines(self) -> dict[str, str]:
        raise NotImplementedError

    def check_types(self, inputs, storage, outputs) -> None:
        """Refuse an ``input`` that is not in ``inputs`` or an ``output`` that is not in ``outputs``;
        fill in an unset ``output`` (None) with the input's ``storage`` type.  For
        ``__post_init__``, on the kernel's own tables."""
        if self.input not in inputs:
            raise ValueError(f"input must be one of {tuple(inputs)}, got {self.input!r}")
        if self.output is None:
            object.__setattr__(self, "output", storage[self.input])
        if self.output not in outputs:
            raise ValueError(f"output must be one of {tuple(outputs)}, got {self.output!r}")

    def shared_defines(self) -> dict[str, str]:
        """The #defines of the fields every kernel configuration has: element types, tile
        schedule, debug record and operand layouts (kernels/knobs.cuh names their values)."""
        return {
            "MGEMM_INPUT": INPUTS[self.input],
            "MGEMM_OUTPUT": OUTPUTS[self.output],
            "MGEMM_POLICY": "MGEMM_POLICY_" + self.policy.upper(),
            "MGEMM_GROUP": str(self.group),
            "MGEMM_RASTER": "MGEMM_RASTER_" + self.raster.upper(),
            "MGEMM_RECORD": str(int(self.record)),
            "MGEMM_A_K_MAJOR": str(int(self.a_k_major)),
            "MGEMM_B_K_MAJOR": str(int(self.b_k_major)),
        }

    def render(self) -> str:
        """The #define lines that precede the kernel source."""
        return "".join(f"#define {k} {v}\n" for k, v in self.defines().items())

    def source(self) -> str:
        return f"// mgemm {self.key()}\n{self.render()}#include \"{self.KERNEL_SOURCE}\"\n"

    def key(self, options: tuple[str, ...] = ()) -> str:
        """Hash of every kernel source file, the compile options and this configuration."""
        h = hashlib.sha256(sources_digest().encode())
        h.update(repr(options).encode())
        h.update(self.render().encode())
        return h.hexdigest()[:24]


_digest: tuple[tuple, str] | None = None


def sources_digest() -> str:
    """sha256 of the kernel files' names and bytes, re-read only when a file's size or mtime
    changes (a launch asks for it every time; reading and hashing the sources took ~0.1 ms)."""
    global _digest
    paths = sorted(KERNEL_DIR.glob("*.cu*"))
    stamp = tuple((p.name, st.st_mtime_ns, st.st_size) for p in paths for st in (p.stat(),))
    if _digest is None or _digest[0] != stamp:
        h = hashlib.sha256()
        for path in paths:
            h.update(path.name.encode())
            h.update(path.read_bytes())
        _digest = (stamp, h.hexdigest())
    return _digest[1]


@dataclass(frozen=True)
class KernelConfig(RenderedConfig):
    """One variant of the persistent GEMM kernel; every field is a compile-time constant."""

    KERNEL_SOURCE: ClassVar[str] = KERNEL_SOURCE
    # Mainloop variant knobs at their defaults: str() names only those that differ.
    VARIANT_DEFAULTS: ClassVar[dict] = {"dmma_k": 4, "frag_db": True, "simt_vec": True,
                                        "swizzle": False, "fast_copy": False, "frag_carry": False,
                                        "min_blocks": 1}

    input: str = "float16"
    output: str | None = None  # None: the storage type of the input
    tile_m: int = 128
    tile_n: int = 256
    tile_k: int = 32
    stages: int = 4
    warps_m: int = 2
    warps_n: int = 4
    policy: str = "static"
    group: int = 8
    raster: str = "m"
    a_k_major: bool = True  # A row-major (k contiguous); False: column-major
    b_k_major: bool = False  # B column-major (k contiguous); False: row-major
    record: bool = False  # debug: the kernel logs every work unit
    # Mainloop variants (each measurable on its own, see benchmarks/kernels.py --ladder):
    # float64 on sm_90: k of the m16n8k{4,8,16} mma (4 measured fastest on the H200: 0.85 of
    # cuBLAS at 8192³ against 0.74 for 16); 0: m8n8k4 (sm_80's only shape)
    dmma_k: int = 4
    frag_db: bool = True  # tensor cores: fetch k-step s+1's fragments before step s's mma (not tf32)
    simt_vec: bool = True  # float32 SIMT: 16-byte copies of M/N-contiguous operands when aligned
    # float16/bfloat16: XOR-swizzled shared tiles (no row padding; ldmatrix stays conflict-free)
    swizzle: bool = False
    # tensor cores: k-tiles wholly inside M, N and K are copied without edge masks (a loop of their own)
    fast_copy: bool = False
    # float16/bfloat16 with frag_db: the next k-tile's barrier and first fragments come before the
    # last k-step's mma (needs an even number of k-steps per tile)
    frag_carry: bool = False
    min_blocks: int = 1  # __launch_bounds__ minimum CTAs per SM (> 1 caps the registers per thread)
    # Stream-K: whole waves before the partial last one split with it (host only: the launch's
    # sk_tiles, same kernel; as HopperConfig.sk_waves).  0: whole tiles first, then every CTA a
    # sliver of the few left over
    sk_waves: int = 1
    # What the epilogue stores, one of STORE_FORMS (None: "pairs", or "elements" for the float32
    # SIMT mainloop); ``gemm`` sets the form each launch needs (``store_form``)
    stores: str | None = None

    def __post_init__(self):
        self.check_types(INPUTS, STORAGE, OUTPUTS)
        if self.policy not in schedule.POLICIES:
            raise ValueError(f"policy must be one of {schedule.POLICIES}, got {self.policy!r}")
        if self.raster not in ("m", "n"):
            raise ValueError(f"raster must be 'm' or 'n', got {self.raster!r}")
        if self.dmma_k not in (0, 4, 8, 16):
            raise ValueError(f"dmma_k must be 0, 4, 8 or 16, got {self.dmma_k!r}")
        if self.input == "float32" and self.threads != (self.tile_m // 8) * (self.tile_n // 8):
            raise ValueError("SIMT tiles need (tile_m/8)*(tile_n/8) == 32*warps_m*warps_n threads")
        half = self.input in ("float16", "bfloat16")
        if self.swizzle:
            if not half:
                raise ValueError("swizzle is for float16/bfloat16 inputs")
            # each operand's shared rows (K for a K-major tile, else M or N) hold a power of two
            # of 16-byte chunks
            for name in ("tile_k" if self.a_k_major else "tile_m", "tile_k" if self.b_k_major else "tile_n"):
                inner = getattr(self, name)
                chunks = inner // 8
                if inner % 8 or chunks & (chunks - 1):
                    raise ValueError(f"swizzle needs {name} / 8 a power of two in this layout, got {inner}")
        if self.fast_copy and self.simt:
            raise ValueError("fast_copy is for the tensor-core mainloop (not float32 SIMT)")
        if self.frag_carry:
            if not half or not self.frag_db:  # (float64 compiles, but spills at 128x64x16 stream-K)
                raise ValueError("frag_carry needs frag_db and a float16 or bfloat16 input")
            if (self.tile_k // self.atom_k) % 2:
                raise ValueError(f"frag_carry needs an even number of k-steps, got tile_k={self.tile_k}")
        schedule.check_sk_waves(self.sk_waves)
        if self.stores is None:
            object.__setattr__(self, "stores", self.default_stores)
        if self.stores not in STORE_FORMS:
            raise ValueError(f"stores must be one of {STORE_FORMS}, got {self.stores!r}")
        if self.simt and self.stores.startswith("pairs"):
            raise ValueError("paired stores need a tensor-core mainloop (not float32 SIMT)")
        if self.min_blocks not in (1, 2, 3, 4) or self.threads * self.min_blocks > 2048:
            raise ValueError(f"min_blocks must be 1..4 with threads*min_blocks <= 2048, got {self.min_blocks}")

    @classmethod
    def default(cls, input: str, **changes: Any) -> "KernelConfig":
        tm, tn, tk, st, wm, wn = DEFAULT_TILES[input]
        fields = dict(input=input, tile_m=tm, tile_n=tn, tile_k=tk, stages=st, warps_m=wm, warps_n=wn)
        fields.update(changes)
        return cls(**fields)

    def replace(self, **changes: Any) -> "KernelConfig":
        return dataclasses.replace(self, **changes)

    # --- what the C++ derives from the constants (kept in step with kernels/mainloop_*.cuh) ---
    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def simt(self) -> bool:
        return self.input == "float32"

    @property
    def default_stores(self) -> str:
        """The epilogue form of a config not specialized to a launch: paired stores, or single ones
        for the float32 SIMT mainloop, which does not pair its accumulators."""
        return "elements" if self.simt else "pairs"

    @property
    def atom_k(self) -> int:
        """k of one mma step (tensor cores): 16 (f16, bf16), 8 (tf32), dmma_k or 4 (float64)."""
        if self.input in ("float16", "bfloat16"):
            return 16
        if self.input == "float64":
            return self.dmma_k or 4
        return 8 if self.input == "tf32" else 1

    @property
    def acc_dtype(self) -> str:
        return "float64" if self.input == "float64" else "float32"

    @property
    def acc_per_thread(self) -> int:
        if self.simt:
            return 64
        am, an, cr = (8, 8, 2) if self.input == "float64" else (16, 8, 4)
        return (self.tile_m // self.warps_m // am) * (self.tile_n // self.warps_n // an) * cr

    @property
    def smem_bytes(self) -> int:
        bm, bn, bk = self.tile_m, self.tile_n, self.tile_k
        if self.simt:
            return self.stages * bk * ((bm + 4) + (bn + 4)) * 4
        eb = ITEMSIZE[self.input]

        def pad(k_major: bool) -> int:
            if self.swizzle:
                return 0
            if eb == 2:
                return 8
            if self.input == "float64":
                return 4
            return 4 if k_major else 8

        a = (bm * (bk + pad(True))) if self.a_k_major else (bk * (bm + pad(False)))
        b = (bn * (bk + pad(True))) if self.b_k_major else (bk * (bn + pad(False)))
        return self.stages * (a + b) * eb

    @property
    def chunk(self) -> int:
        """Elements per 16-byte copy: leading dimensions of A and B must be multiples of it."""
        return 1 if self.simt else 16 // ITEMSIZE[self.input]

    # --- rendering and identity ---
    def defines(self) -> dict[str, str]:
        return {
            **self.shared_defines(),
            "MGEMM_TILE_M": str(self.tile_m),
            "MGEMM_TILE_N": str(self.tile_n),
            "MGEMM_TILE_K": str(self.tile_k),
            "MGEMM_STAGES": str(self.stages),
            "MGEMM_WARPS_M": str(self.warps_m),
            "MGEMM_WARPS_N": str(self.warps_n),
            "MGEMM_DMMA_K": str(self.dmma_k),
            "MGEMM_FRAG_DB": str(int(self.frag_db)),
            "MGEMM_SIMT_VEC": str(int(self.simt_vec)),
            "MGEMM_SWIZZLE": str(int(self.swizzle)),
            "MGEMM_FAST_COPY": str(int(self.fast_copy)),
            "MGEMM_FRAG_CARRY": str(int(self.frag_carry)),
            "MGEMM_MIN_BLOCKS": str(self.min_blocks),
            "MGEMM_STORES": "MGEMM_STORES_" + self.stores.upper(),
        }

    def __str__(self) -> str:
        return (f"{self.input}->{self.output} {self.tile_m}x{self.tile_n}x{self.tile_k} "
                f"s{self.stages} w{self.warps_m}x{self.warps_n} {self.policy} g{self.group} "
                f"raster={self.raster} A:{'k' if self.a_k_major else 'm'}-major "
                f"B:{'k' if self.b_k_major else 'n'}-major" + (" record" if self.record else "")
                + "".join(f" {name}={getattr(self, name)}" for name, default in self.VARIANT_DEFAULTS.items()
                          if getattr(self, name) != default)
                + ("" if self.sk_waves == 1 else f" skw{self.sk_waves}")
                + ("" if self.stores == self.default_stores else f" stores={self.stores}"))


# --- heuristic -------------------------------------------------------------------------------------

def input_kind(dtype: str, allow_tf32: bool = False) -> str:
    """The mainloop for a storage dtype: float32 goes to tf32 tensor cores only when allowed."""
    if dtype == "float32":
        return "tf32" if allow_tf32 else "float32"
    if dtype not in ("float16", "bfloat16", "float64"):
        raise TypeError(f"mgemm kernels multiply float16, bfloat16, float32 or float64, not {dtype}")
    return dtype


def choose_config(m: int, n: int, k: int, dtype: str, sms: int, *, allow_tf32: bool = False,
                  shared: bool = False, smem_per_sm: int = SM90_SMEM_PER_SM) -> KernelConfig:
    """Tile shape and policy for an ``m × n × k`` product on ``sms`` SMs with ``smem_per_sm``
    bytes of shared memory each (``resident_ctas``).  Pure and deterministic.

    The tile is the candidate with the least estimated time: whole waves (a wave is one tile per
    resident CTA), or where ``split_tail`` allows it at ``TILE_SPLIT_FILL`` the work spread evenly
    plus the stream-K fix-up, charging smaller tiles for their lower per-tile efficiency.  Then:
    ``dynamic`` if other kernels share the GPU (``shared``); else ``streamk`` where
    ``split_tail`` says the tail pays for a split (at ``SPLIT_FILL``); else ``per_tile`` where
    no resident CTA would take a second tile (``PER_TILE_IN_ONE_WAVE``); else
    ``static``.

    >>> choose_config(8192, 8192, 8192, "float16", 132).policy
    'static'
    >>> choose_config(64, 8192, 8192, "bfloat16", 132).policy
    'streamk'
    """
    kind = input_kind(dtype, allow_tf32)
    best = None
    for rank, (tile, _) in enumerate(TILE_CHOICES[kind]):
        occupancy = resident_ctas(kind, tile, smem_per_sm)
        tm, tn = tile[0], tile[1]
        tiles = -(-m // tm) * -(-n // tn)
        k_iters = max(1, -(-k // tile[2]))
        slots = sms * occupancy
        waves = -(-tiles // slots)
        # Time in k-iterations of one SM: whole waves, each `occupancy` concurrent tiles' area over
        # the efficiency, which drops for smaller tiles (less reuse per loaded byte) ...
        eff = 1.0 - 0.08 * rank
        cost = waves * occupancy * tm * tn * k_iters / eff
        if split_tail(tiles, slots, sms, k_iters, TILE_SPLIT_FILL, ONE_WAVE_K_ITERS[kind]):
            # ... or, with a stream-K split, the whole work spread over the SMs, plus the fix-up:
            # the CTA that owns a tile adds the partials of the others (one per sharing CTA,
            # about two k-iterations each), which is what makes a few big tiles over-split.
            sharing = max(1, -(-slots // tiles))
            cost = min(cost, (tiles * tm * tn * k_iters / sms + 2 * sharing * tm * tn) / eff)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, tile, occupancy)
    _, (tm, tn, tk, st, wm, wn), occupancy = best
    rows, cols, k_iters = schedule.tile_grid(m, n, k, tm, tn, tk)
    slots = sms * occupancy
    if shared:
        policy = "dynamic"
    else:
        split = split_tail(rows * cols, slots, sms, k_iters, one_wave_k_iters=ONE_WAVE_K_ITERS[kind])
        per_tile = kind in PER_TILE_IN_ONE_WAVE and rows * cols <= slots  # no CTA takes a second
        policy = "streamk" if split else "per_tile" if per_tile else "static"
    return KernelConfig(input=kind, tile_m=tm, tile_n=tn, tile_k=tk, stages=st, warps_m=wm,
                        warps_n=wn, policy=policy, **TILE_KNOBS.get(kind, {}))


@functools.lru_cache(maxsize=None)
def resident_ctas(kind: str, tile: tuple, smem_per_sm: int = SM90_SMEM_PER_SM) -> int:
    """The CTAs of ``tile`` (a ``TILE_CHOICES`` entry of input ``kind``) one SM holds: its
    ``TILE_CHOICES`` count (sm_90's, which registers and threads bound), or fewer where
    ``smem_per_sm`` holds fewer of its stages (sm_80's 164 KiB, sm_86's and sm_89's 100 KiB).
    The launch asks the occupancy API for the real number; this one guides the choice.

    >>> tile = (128, 128, 32, 6, 2, 2)  # 96 KiB of stages
    >>> resident_ctas("float16", tile), resident_ctas("float16", tile, 102400)
    (2, 1)
    """
    tm, tn, tk, st, wm, wn = tile
    table = dict(TILE_CHOICES[kind])[tile]
    config = KernelConfig(input=kind, tile_m=tm, tile_n=tn, tile_k=tk, stages=st, warps_m=wm,
                          warps_n=wn, **TILE_KNOBS.get(kind, {}))
    return max(1, min(table, smem_per_sm // (config.smem_bytes + SMEM_PER_CTA_RESERVED)))


#: the portable kernel's ``split_tail`` splits where the SMs' average load is below this share of
#: the busiest SM's (the Hopper kernel passes its own, ``hopper_heuristic.SPLIT_FILL``), or below
#: ``ONE_WAVE_SPLIT_FILL`` where every SM holds at most one tile (one partial wave: 0.8-0.9 there
#: was measured once, level; just short of a whole wave the split loses) ...
SPLIT_FILL = 0.9
ONE_WAVE_SPLIT_FILL = 0.8
#: ... and ``choose_config`` weighs a split in its choice of tile below this one (the rule the
#: tile costs were tuned with; the chosen tile then splits below ``SPLIT_FILL``)
TILE_SPLIT_FILL = 0.8
#: The inputs for which the portable kernel runs one CTA per tile where no resident CTA would take
#: a second tile and none is split: the same tiles on the same CTAs as ``static``, without the
#: persistent loop.  On the H200 (thirtieth session, in rotated turns) static took 3-5 % longer
#: in float32 (six shapes), 0.2-1.5 % in float16 and bfloat16, was level in tf32 and 1 % faster
#: in float64, which stays static.  (The twenty-ninth session's 4-30 % in 16-bit was a first
#: launch's wait for the stores' code, gone since one epilogue form per build: ``STORE_FORMS``.)
PER_TILE_IN_ONE_WAVE = ("float16", "bfloat16", "float32")
#: Where no SM holds more than one tile, or the tiles fill at most half the resident CTAs, the
#: portable kernel splits only with at least this many k-iterations per tile: below, the fix-up
#: costs more than the idle CTAs give back.  On the H200 (stream-K against one CTA per tile;
#: benchmarks/RESULTS.md, twenty-ninth session): float16 64x128x32 tiles lost at 16-96
#: k-iterations (0.56-0.91) and won at 101-256 (1.18-1.60); tf32 64x128x32 lost at 10-26 and won
#: or drew at 34-36; float32 64x128x8 lost at 32-55 on most shapes (to 0.43), drew at 64
#: (0.93-1.07) and won beyond (1.07-2.35).  Float64 (thirtieth session, after the one-form
#: epilogue took a first launch's code wait off the unsplit kernels): lost at 16-48 (0.77-0.98 on
#: 128 tiles of 128x64, 0.91 at 32 on 64 of 64x64), drew at 64 on 128 tiles and won from there
#: (1.07-1.64); on eight shapes drawn where 64 changes the config it was ahead on seven (0.52 ->
#: 0.67 of cuBLAS, geomean) and level on one.  Raising float32's and tf32's to 128 as well lost
#: on five of eight and five of six drawn shapes (fewer tiles than those measured), so they stay.
ONE_WAVE_K_ITERS = {"float16": 100, "bfloat16": 100, "tf32": 32, "float32": 64, "float64": 64}


def split_tail(tiles: int, slots: int, sms: int, k_iters: int, fill: float = SPLIT_FILL,
               one_wave_k_iters: int = 4) -> bool:
    """Whether a stream-K split pays: K has at least 4 iterations to split, and either the SMs'
    loads are uneven (an SM's time grows with the tiles it holds, whatever the occupancy: the
    busiest holds ``ceil(tiles / sms)``, below ``fill`` of that on average is a poor tail; below
    ``ONE_WAVE_SPLIT_FILL`` where that is one tile) or the tiles fill at most half the resident
    CTAs.  Where the busiest SM holds one tile, or the split is only for the idle CTAs, each tile
    needs ``one_wave_k_iters`` k-iterations too (the portable kernel's ``ONE_WAVE_K_ITERS``).

    Measured on the H200 (float16, 256x128 tiles, one CTA per SM; stream-K over per-tile): 133
    tiles 1.67 ×, 265 tiles 1.32 ×, 66 tiles 1.54 ×; 330, 440 and 550 tiles (average load 0.83
    of the busiest) 1.13 ×, 560 (0.85) 1.11 ×, 460, 580 and 700 (0.87-0.88) 1.07 ×, bfloat16
    the same (benchmarks/RESULTS.md, twenty-eighth session); 128 tiles (2048³, balanced to 0.97)
    0.60 ×; float32 64x128 at 4 CTAs per SM, 264 tiles (balanced, half the CTAs) 1.14 ×.
    """
    if k_iters < 4 or tiles % slots == 0:
        return False
    if tiles > sms and schedule.wave_fill(tiles, sms) < fill:
        return True
    one_wave = tiles <= sms and schedule.wave_fill(tiles, sms) < min(fill, ONE_WAVE_SPLIT_FILL)
    return (one_wave or 2 * tiles <= slots) and k_iters >= one_wave_k_iters


@functools.lru_cache(maxsize=1024)
def _choose_cached(m: int, n: int, k: int, dtype: str, sms: int, allow_tf32: bool,
                   smem_per_sm: int = SM90_SMEM_PER_SM) -> KernelConfig:
    return choose_config(m, n, k, dtype, sms, allow_tf32=allow_tf32, smem_per_sm=smem_per_sm)


def _choose_on_device(m: int, n: int, k: int, dtype: str, sms: int,
                      allow_tf32: bool) -> KernelConfig:
    """``choose_config`` for the current device's shared memory per SM (``prepare_call``'s
    ``choose``)."""
    return _choose_cached(m, n, k, dtype, sms, allow_tf32, device_shared_memory(device_id())[1])


@dataclass(frozen=True)
class LaunchPlan:
    """What one launch does: the tile grid, the CTAs and the stream-K split."""

    rows: int
    cols: int
    k_iters: int
    grid: int
    sk_tiles: int

    @property
    def tiles(self) -> int:
        return self.rows * self.cols


@functools.lru_cache(maxsize=256)
def plan_launch(config: KernelConfig, m: int, n: int, k: int, slots: int) -> LaunchPlan:
    """Grid and stream-K split for ``slots`` resident CTAs (SMs × occupancy)."""
    rows, cols, k_iters = schedule.tile_grid(m, n, k, config.tile_m, config.tile_n, config.tile_k)
    tiles = rows * cols
    sk = (schedule.streamk_tiles(tiles, slots, k_iters, config.sk_waves)
          if config.policy == "streamk" else 0)
    return LaunchPlan(rows, cols, k_iters, schedule.launch_grid(config.policy, tiles, slots, sk), sk)


# --- compilation (CuPy, lazily) --------------------------------------------------------------------

_lock = threading.Lock()
_compiled: dict[tuple[int, str, str], Any] = {}
# Within one process a configuration maps to one kernel: source edits made while it runs are not
# picked up (a new process recompiles them; the cache key hashes the sources).
_by_config: dict[tuple, Any] = {}
_occupancy: dict[tuple, int] = {}


def _cupy():
    import cupy  # noqa: PLC0415  (lazy: this module imports without CuPy)
    return cupy


@functools.lru_cache(maxsize=None)
def compile_options(cc: str) -> tuple[str, ...]:
    return ("-std=c++17", f"-arch=sm_{cc}", f"-I{KERNEL_DIR}")


def get_kernel(config: KernelConfig, device: int | None = None):
    """The compiled kernel of ``config`` on ``device``, memoized per (device, cache key)."""
    dev = device_id(device)
    return compile_kernel(config, compile_options(compute_capability(dev)), KERNEL_NAME, dev)


def device_id(device: int | None = None) -> int:
    """``device``, or the current device's id (read from the runtime: building a
    ``cupy.cuda.Device`` on every launch cost microseconds)."""
    return _cupy().cuda.runtime.getDevice() if device is None else int(device)


@functools.lru_cache(maxsize=None)
def compute_capability(device: int) -> str:
    """CuPy's compute capability string of ``device`` ("90" for an H200), read once per device."""
    return _cupy().cuda.Device(device).compute_capability


def compile_kernel(config: RenderedConfig, options: tuple[str, ...], name: str,
                   device: int | None = None):
    """``name`` from ``config``'s source, compiled by NVRTC with ``options``; memoized per
    (device, cache key), with the dynamic shared memory limit raised to what it needs."""
    dev_id = device_id(device)
    fast = (dev_id, name, config, options)  # a launch's lookup: no hashing of the sources
    kernel = _by_config.get(fast)
    if kernel is not None:
        return kernel
    cp = _cupy()
    dev = cp.cuda.Device(dev_id)
    key = (dev_id, name, config.key(options))
    with _lock:
        kernel = _compiled.get(key)
        if kernel is None:
            with dev:
                module = cp.RawModule(code=config.source(), options=options)
                kernel = module.get_function(name)
                check_shared_memory(config, kernel.shared_size_bytes, dev_id)
                # Always: the 48 KiB a launch gets without it counts the kernel's static shared
                # memory too (the dynamic policy's ticket), so 48 KiB of dynamic tiles plus it
                # failed to launch (64x128x32 s4 swizzled float16 is exactly 48 KiB).
                if config.smem_bytes > 0:
                    kernel.max_dynamic_shared_size_bytes = config.smem_bytes
            _compiled[key] = kernel
        _by_config[fast] = kernel
    return kernel


def check_shared_memory(config: RenderedConfig, static_bytes: int, device: int) -> None:
    """Raise ``ValueError`` where ``config``'s tiles and the kernel's static shared memory need more
    than one block of ``device`` may have (227 KiB on sm_90, 163 KiB on sm_80, 99 KiB on sm_86 and
    sm_89): otherwise CUDA refused the launch's shared memory with a bare ``invalid argument``."""
    limit = device_shared_memory(device)[0]
    need = config.smem_bytes + static_bytes
    if need > limit:
        raise ValueError(
            f"{config} needs {need:,} bytes of shared memory per block ({config.smem_bytes:,} for "
            f"its tiles, {static_bytes:,} static), more than the {limit:,} a block may have on "
            f"device {device} (sm_{compute_capability(device)}): use fewer stages or a smaller "
            f"tile")


#: The attributes of a GPU that mgemm reads (``device_attributes``).
_ATTRIBUTES = ("MultiProcessorCount", "MaxSharedMemoryPerBlockOptin",
               "MaxSharedMemoryPerMultiprocessor")


@functools.lru_cache(maxsize=None)
def device_attributes(device: int) -> dict[str, int]:
    """``_ATTRIBUTES`` of ``device``, read once per device (``Device.attributes`` queries every
    attribute the driver has)."""
    attributes = _cupy().cuda.Device(device).attributes
    return {name: attributes[name] for name in _ATTRIBUTES}


def device_shared_memory(device: int) -> tuple[int, int]:
    """``(per block, per SM)``: the most shared memory one block of ``device`` may have (opt-in)
    and what one of its SMs holds."""
    attributes = device_attributes(device)
    return (attributes["MaxSharedMemoryPerBlockOptin"],
            attributes["MaxSharedMemoryPerMultiprocessor"])


@dataclass(frozen=True)
class PlainSource(RenderedConfig):
    """A kernel file compiled as it is: no #defines, no dynamic shared memory (the transpose copy,
    the float32 split)."""

    file: str
    smem_bytes: ClassVar[int] = 0

    @property
    def KERNEL_SOURCE(self) -> str:  # noqa: N802 (RenderedConfig's name)
        return self.file

    def defines(self) -> dict[str, str]:
        return {}


def compile_plain(file: str, name: str, device: int | None = None):
    """Entry point ``name`` of kernels/``file`` (a ``PlainSource``), compiled by NVRTC for
    ``device``'s architecture on first use and memoized like the GEMM kernels."""
    dev = device_id(device)
    return compile_kernel(PlainSource(file), compile_options(compute_capability(dev)), name, dev)


def occupancy(kernel, config: RenderedConfig) -> int:
    """Resident CTAs per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor)."""
    key = (kernel.kernel.ptr, config.threads, config.smem_bytes)
    blocks = _occupancy.get(key)
    if blocks is None:
        blocks = _occupancy[key] = _cupy().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, config.threads, config.smem_bytes)
    return blocks


def device_sms(device: int | None = None) -> int:
    """SM count of ``device`` (the current one by default)."""
    return device_attributes(device_id(device))["MultiProcessorCount"]


# --- per-launch scratch (counters, stream-K workspace, debug record) -------------------------------

_scratch: dict[tuple, dict[str, Any]] = {}
_WORKSPACE = {np.float32: "ws_float32", np.float64: "ws_float64"}  # stream-K partials, by dtype


def launch_scratch(cp, dev_id: int, grid: int, zero_sync: bool, ws_elems: int, ws_dtype,
                   record_elems: int = 0):
    """``(sync, workspace, record)`` for one launch, reused across launches of this thread on this
    stream (allocating, zeroing with a kernel and freeing them took tens of microseconds per call,
    as long as a small product's whole kernel).  ``sync`` (1 + grid ints) is zeroed with one async
    memset when ``zero_sync`` (the dynamic counter and stream-K flags need zeros at launch; other
    policies never read it).  Stream order makes the reuse safe: a launch's memset runs after the
    previous launch on the stream has finished with the buffers.  ``record_elems`` > 0 (debug)
    returns a fresh zeroed record."""
    stream = cp.cuda.get_current_stream()
    key = (dev_id, stream.ptr, threading.get_ident())
    bufs = _scratch.setdefault(key, {})

    def get(name, elems, dtype):  # each name has one dtype: the name is the key
        buf = bufs.get(name)
        if buf is None or buf.size < elems:
            buf = bufs[name] = cp.empty(max(elems, 1), dtype=dtype)
        return buf

    sync = get("sync", 1 + grid, cp.int32)
    if zero_sync:
        cp.cuda.runtime.memsetAsync(sync.data.ptr, 0, (1 + grid) * 4, stream.ptr)
    workspace = get(_WORKSPACE[ws_dtype], ws_elems, ws_dtype)
    record = (cp.zeros(record_elems, dtype=cp.int32) if record_elems
              else get("record", 1, cp.int32))
    return sync, workspace, record


_EPOCH_LIMIT = 2**31 - 1  # int32 flags: past this, zero them once and count from 1 again
#: Most rows, columns or K of a launch: the kernels count M, N and K (and round them up to whole
#: tiles) in 32-bit ints.
MAX_DIM = 2**31 - 1024


def epoch_sync(cp, dev_id: int, ints: int, zero_counter: bool) -> tuple[Any, int]:
    """``(sync, epoch)`` for one launch of a kernel whose stream-K flags say "complete" by holding
    this launch's epoch (the Hopper kernel): ``sync`` (``ints`` int32: the dynamic counter, then
    the flags) is reused by this thread's launches on this stream, and each launch gets the next
    epoch, so the flags left by earlier launches (smaller epochs) never read as complete and no
    memset runs between launches (one was ~2 µs of GPU time per stream-K launch and a few µs of
    host time).  The buffer is zeroed once, when (re)allocated, and again when the epoch would
    overflow.  ``zero_counter`` (the dynamic policy) zeroes just ``sync[0]``, which it counts up
    from 0.  Stream order keeps it safe, as for ``launch_scratch``."""
    stream = cp.cuda.get_current_stream()
    bufs = _scratch.setdefault((dev_id, stream.ptr, threading.get_ident()), {})
    buf = bufs.get("sync_epoch")
    epoch = bufs.get("epoch", 0) + 1
    if buf is None or buf.size < ints or epoch >= _EPOCH_LIMIT:
        if buf is None or buf.size < ints:
            buf = bufs["sync_epoch"] = cp.empty(max(ints, 1), dtype=cp.int32)
        cp.cuda.runtime.memsetAsync(buf.data.ptr, 0, buf.size * 4, stream.ptr)
        epoch = 1
    elif zero_counter:
        cp.cuda.runtime.memsetAsync(buf.data.ptr, 0, 4, stream.ptr)
    bufs["epoch"] = epoch
    return buf, epoch


#: The epilogue's forms (``KernelConfig.stores``, STORES in kernels/gemm_persistent.cu): paired
#: stores (row-major output, even rows, aligned) or one element at a time, each with or without
#: reading C.  One form per build, so the code a launch runs follows the mainloop in the binary: a
#: build holding all four, chosen per launch, took 2.5-7.6 µs longer on a first launch after
#: another kernel (H200, one CTA per SM; benchmarks/RESULTS.md, thirtieth session)
STORE_FORMS = ("pairs", "pairs_c", "elements", "elements_c")


def _pairs_ok(x) -> bool:
    """Whether ``x`` takes paired accesses (``pairs_ok`` in kernels/ptx.cuh): unit column stride,
    an even row stride and a base aligned to two elements."""
    item = x.itemsize
    return x.strides[1] == item and (x.strides[0] // item) % 2 == 0 and x.data.ptr % (2 * item) == 0


def store_form(config: KernelConfig, out, c, beta: float) -> str:
    """The epilogue form one launch needs (``KernelConfig.stores``): C is read when ``beta != 0``,
    and accumulator pairs are stored as pairs where the mainloop pairs them (not float32 SIMT) and
    ``out`` (and C, when read) allow it."""
    read_c = beta != 0
    pairs = not config.simt and _pairs_ok(out) and (not read_c or _pairs_ok(c))
    return ("pairs" if pairs else "elements") + ("_c" if read_c else "")


@functools.lru_cache(maxsize=1024)
def specialize(config, **changes):
    """``config.replace(**changes)``, memoized (a launch derives the same variant every call)."""
    return config.replace(**changes)

# --- launch ----------------------------------------------------------------------------------------

def _dtype_name(x, as_dtype: str | None = None) -> str:
    """``as_dtype``, else the name of ``x``'s dtype (remembered: ``str`` of a NumPy dtype walks
    its type hierarchy, microseconds on every launch)."""
    if as_dtype:
        return as_dtype
    name = _dtype_names.get(x.dtype)
    if name is None:
        name = _dtype_names[x.dtype] = str(x.dtype)
    return name


_dtype_names: dict[Any, str] = {}


def _operand(cp, x, k_axis: int, chunk: int):
    """(array, k_major, ld) for A (k_axis=1) or B (k_axis=0) without a copy when the strides allow
    it; otherwise (or when the leading dimension or pointer breaks 16-byte copies) a padded copy."""
    item = x.itemsize
    s_k, s_o = (x.strides[1], x.strides[0]) if k_axis == 1 else (x.strides[0], x.strides[1])
    n_k, n_o = (x.shape[1], x.shape[0]) if k_axis == 1 else (x.shape[0], x.shape[1])
    if s_k == item or n_k == 1:  # a single row's leading dimension is never used: any will do
        k_major, ld = True, (s_o // item if n_o > 1 else -(-n_k // chunk) * chunk)
    elif s_o == item or n_o == 1:
        k_major, ld = False, (s_k // item if n_k > 1 else -(-n_o // chunk) * chunk)
    else:
        k_major, ld = None, 0
    ok = (k_major is not None and ld > 0 and (s_k >= 0 and s_o >= 0)
          and (chunk == 1 or (x.data.ptr % 16 == 0 and ld % chunk == 0)))
    if ok:
        return x, k_major, ld
    # Copy into a buffer k-major for A and n-major for B (the common layouts), padded.
    if k_axis == 1:
        inner = n_k
        buf = cp.zeros((n_o, -(-inner // chunk) * chunk), dtype=x.dtype)
        buf[:, :inner] = x
        return buf, True, buf.shape[1]
    inner = n_o
    buf = cp.zeros((n_k, -(-inner // chunk) * chunk), dtype=x.dtype)
    buf[:, :inner] = x
    return buf, False, buf.shape[1]


class Call(NamedTuple):
    """What a launcher knows once its arguments are checked (``prepare_call``)."""

    m: int
    n: int
    k: int
    dtype: str  # of A and B ("bfloat16" for uint16 bits read as bfloat16)
    kind: str  # the mainloop's input kind
    dev: int
    sms: int  # the SMs the launch may use
    config: Any  # the caller's config or the heuristic's
    res_dtype: str  # what the kernel writes
    out: Any


def prepare_call(cp, a, b, c, out, *, beta: float, config, allow_tf32: bool, sms: int | None,
                 as_dtype: str | None, out_dtype: str | None, input_kind: Callable,
                 choose: Callable, outputs: Mapping, writer: str, k: int | None = None) -> Call:
    """The argument checks and output allocation both launchers (this module's ``gemm`` and
    ``mgemm.hopper.gemm``) share, before any work is queued: 2-D operands with matching K and one
    dtype, a config for that input kind (``choose`` picks one if none is given), a result dtype in
    ``outputs`` (``writer`` names the kernel in the error), ``out`` of shape (M, N) (allocated if
    None), and with ``beta != 0`` a ``c`` of that shape and of ``out``'s dtype: the kernels read C
    as the output type, so any other dtype would be misread.  ``k``: the product's whole K when
    ``a`` and ``b`` are its first K part only (``mgemm.hopper.gemm_parts``)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm needs (M, K) @ (K, N), got {a.shape} @ {b.shape}")
    dtype = _dtype_name(a, as_dtype)
    if _dtype_name(b, as_dtype) != dtype:
        raise TypeError(f"a and b must share a dtype, got {a.dtype} and {b.dtype}")
    m = a.shape[0]
    k = a.shape[1] if k is None else k
    n = b.shape[1]
    if max(m, n, k) > MAX_DIM:
        raise ValueError(f"{writer} counts M, N and K in 32 bits: each at most {MAX_DIM:,}, got "
                         f"{m} x {n} x {k}")
    dev = cp.cuda.runtime.getDevice()
    sm_count = device_sms(dev)
    sms = sm_count if sms is None else max(1, min(int(sms), sm_count))
    kind = input_kind(dtype, allow_tf32)
    if config is None:
        config = choose(m, n, k, dtype, sms, allow_tf32)
    if config.input != kind:
        raise ValueError(f"config multiplies {config.input}, operands are {kind}")
    given = out if out is not None else (c if c is not None and beta != 0 else None)
    if given is not None:  # uint16 results are bfloat16 bits, as the inputs
        res_dtype = "bfloat16" if given.dtype.char == "H" else _dtype_name(given)
    else:
        res_dtype = out_dtype or STORAGE[kind]
    if res_dtype not in outputs:
        raise TypeError(f"{writer} writes {tuple(outputs)}, not {res_dtype}")
    if out is None:
        out = cp.empty((m, n), dtype={"bfloat16": cp.uint16}.get(res_dtype, res_dtype))
    if out.shape != (m, n):
        raise ValueError(f"out has shape {out.shape}, expected {(m, n)}")
    if beta != 0 and (c is None or c.shape != (m, n)):
        raise ValueError("beta != 0 needs c of shape (M, N)")
    if beta != 0 and c.dtype != out.dtype:
        raise TypeError(f"c ({c.dtype}) and out ({out.dtype}) must share a dtype")
    return Call(m, n, k, dtype, kind, dev, sms, config, res_dtype, out)


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, out=None,
         config: KernelConfig | None = None, allow_tf32: bool = False, sms: int | None = None,
         as_dtype: str | None = None, out_dtype: str | None = None, debug: bool = False):
    """``out = alpha * a @ b + beta * c`` on CuPy arrays with the persistent kernel.

    ``a`` (M×K) and ``b`` (K×N) may be any 2-D strided views (``a.T`` costs no copy when one of its
    strides is 1).  ``c`` is read only when ``beta != 0``; ``out`` may be ``c`` (in place).  ``sms``
    caps the SMs used (leave some free for concurrent kernels).  ``as_dtype="bfloat16"`` reads
    uint16 arrays as bfloat16 bits.  ``config`` overrides the heuristic (its layouts and dtypes
    are set from the operands).  With ``debug=True`` returns ``(out, record)``, record an (n, 4)
    array of (cta, tile, k_begin, k_end) per executed work unit, in execution order.
    """
    cp = _cupy()
    call = prepare_call(cp, a, b, c, out, beta=beta, config=config, allow_tf32=allow_tf32, sms=sms,
                        as_dtype=as_dtype, out_dtype=out_dtype, input_kind=input_kind,
                        choose=_choose_on_device, outputs=OUTPUTS, writer="the persistent kernel")
    m, n, k, dev, sms, config, res_dtype, out = (call.m, call.n, call.k, call.dev, call.sms,
                                                 call.config, call.res_dtype, call.out)
    if m == 0 or n == 0:
        return (out, cp.zeros((0, 4), cp.int32)) if debug else out

    chunk = config.chunk
    if k > 0:
        a_arr, a_k, lda = _operand(cp, a, 1, chunk)
        b_arr, b_k, ldb = _operand(cp, b, 0, chunk)
    else:
        a_arr, a_k, lda, b_arr, b_k, ldb = out, True, 1, out, False, 1  # never read
    c_arr = c if (c is not None and beta != 0) else out
    config = specialize(config, a_k_major=a_k, b_k_major=b_k, output=res_dtype, record=debug,
                        stores=store_form(config, out, c_arr, beta))
    kernel = get_kernel(config, dev)
    slots = sms * max(1, occupancy(kernel, config))
    lp = plan_launch(config, m, n, k, slots)
    sync, workspace, record = launch_scratch(
        cp, dev, lp.grid, config.policy == "dynamic" or lp.sk_tiles > 0,
        lp.grid * config.acc_per_thread * config.threads if lp.sk_tiles else 1,
        cp.float64 if config.acc_dtype == "float64" else cp.float32,
        1 + 4 * (lp.tiles + 2 * lp.grid + 8) if debug else 0)
    ci, oi = c_arr.itemsize, out.itemsize
    args = (a_arr, b_arr, c_arr, out, _i32(m), _i32(n), _i32(k), _i64(lda), _i64(ldb),
            _i64(c_arr.strides[0] // ci), _i64(c_arr.strides[1] // ci),
            _i64(out.strides[0] // oi), _i64(out.strides[1] // oi),
            _f64(alpha), _f64(beta), sync, workspace, _i32(lp.sk_tiles), record)
    kernel((lp.grid,), (config.threads,), args, shared_mem=config.smem_bytes)
    if debug:
        count = int(record[0].get())
        return out, record[1:1 + 4 * count].reshape(count, 4).get()
    return out


_i32, _i64, _f64 = np.int32, np.int64, np.float64  # the kernel's scalar parameter types


def launch_info(a_shape, b_shape, config: KernelConfig, sms: int | None = None) -> LaunchPlan:
    """The plan ``gemm`` would launch for these shapes and config on the current device."""
    m, k = a_shape
    n = b_shape[1]
    kernel = get_kernel(config)
    sms = sms or device_sms()
    return plan_launch(config, m, n, k, sms * max(1, occupancy(kernel, config)))


__all__ = ["KernelConfig", "LaunchPlan", "choose_config", "gemm", "get_kernel", "input_kind", "split_tail",
           "launch_info", "occupancy", "plan_launch"]
