"""Benchmark of the persistent GEMM kernel against cuBLAS in the same run: one harness (reference
check before timing, warm-up, L2 flush, CUDA events, median, TFLOP/s) over named cases; the
implementations of a case are timed in turns, one rep of each at a time.

    python benchmarks/kernels.py [--quick] [--dtypes float16,bfloat16,float32,float64]
                                 [--ladder] [--hog] [--out DIR]

Prints a table last and writes one JSON row per measurement to DIR/kernels.jsonl (DIR defaults to
$OUT or the current directory).  cuBLAS is ``cupy.matmul`` (torch for bfloat16).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import kernels  # noqa: E402
from mgemm.bench import Case  # noqa: E402  (name, m, n, k; its dtype and chunk go unused here)
from mgemm.kernels import KernelConfig  # noqa: E402


SQUARES = [Case(f"square{s}", s, s, s) for s in (1024, 2048, 4096, 8192, 16384)]
SKEWED = [Case("896x2432x8192", 896, 2432, 8192), Case("1024x2112x8192", 1024, 2112, 8192),
          Case("1408x1536x16384", 1408, 1536, 16384), Case("256x256x65536", 256, 256, 65536),
          Case("64x8192x8192", 64, 8192, 8192), Case("8192x8192x256", 8192, 8192, 256)]


def wave_sweep(tile=(256, 128), slots=132, k=8192, counts=None):
    """Shapes of exactly 1 to 3 waves' worth of `tile` tiles on `slots` CTAs (rows × cols tiles,
    rows the largest divisor of the count up to its square root), or of the tile ``counts`` given."""
    out = []
    for tiles in counts or (1, slots // 2, slots, slots + 1, 180, 2 * slots, 2 * slots + 1, 330, 3 * slots):
        rows = max(d for d in range(1, int(tiles ** 0.5) + 1) if tiles % d == 0)
        out.append(Case(f"wave{tiles}t", rows * tile[0], tiles // rows * tile[1], k))
    return out


#: The sweep's tile (the float16 heuristic's first choice), so each case has the tile count it names.
SWEEP_TILE = dict(tile_m=256, tile_n=128, tile_k=32, stages=4, warps_m=4, warps_n=2,
                  swizzle=True, fast_copy=True, frag_carry=True)


BOUNDS = {"float16": 2e-3, "bfloat16": 1e-2, "tf32": 5e-3, "float32": 1e-5, "float64": 1e-12}
FLUSH = None


def l2_flush():
    global FLUSH
    if FLUSH is None:
        FLUSH = cp.empty(256 * 1024 * 1024 // 4, dtype=cp.float32)
    FLUSH.fill(0)


SPIN_SOURCE = r"""
extern "C" __global__ void mgemm_bench_spin(unsigned long long ns, unsigned long long* clocks) {
  unsigned long long t0, t;
  long long c0 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
  if (clocks) { clocks[0] = (unsigned long long)(clock64() - c0); clocks[1] = t - t0; }
}
"""
SPIN = None
CLOCKS = None


def gpu_spin(us: float, clocks=None):
    """Hold the stream for ``us`` microseconds with a one-thread kernel, so the host can queue the
    next launches before the GPU reaches them: a start event recorded after it measures GPU time
    only, not the host's launch path.  ``clocks``, a CuPy uint64 array of 2, receives the SM cycles
    and nanoseconds the spin took (their ratio is the SM clock while it ran)."""
    global SPIN
    if SPIN is None:
        SPIN = cp.RawKernel(SPIN_SOURCE, "mgemm_bench_spin")
    SPIN((1,), (1,), (np.uint64(int(us * 1000)), clocks if clocks is not None else np.uint64(0)))


#: Instructions in the code scrub (``icache_scrub``): 16 bytes each, 256 KB of code in all.
SCRUB_INSTRUCTIONS = 16384
#: ``--scrub``: ``timed_interleaved`` runs ``icache_scrub`` before each timed call
SCRUB = False
_SCRUB_KERNEL = None


def icache_scrub():
    """Run straight-line code larger than the SMs' instruction caches on every SM, so that the next
    kernel fetches its code afresh.  Without it, a config timed right after another launch of the
    same binary (fields that are host only, or one config under two labels) finds its code already
    cached and reads 1-2 µs faster on few-tile products (RESULTS.md, forty-ninth session)."""
    global _SCRUB_KERNEL
    if _SCRUB_KERNEL is None:
        body = 'asm volatile("membar.cta;");\n' * SCRUB_INSTRUCTIONS
        src = 'extern "C" __global__ void mgemm_bench_scrub() {\n' + body + "}\n"
        try:  # ptxas at -O0: a second, against tens of seconds optimizing one 16k-instruction block
            _SCRUB_KERNEL = cp.RawKernel(src, "mgemm_bench_scrub", options=("--ptxas-options=-O0",))
            _SCRUB_KERNEL.compile()
        except Exception:  # noqa: BLE001  (an NVRTC without -Xptxas: the slow compile, once)
            _SCRUB_KERNEL = cp.RawKernel(src, "mgemm_bench_scrub")
    _SCRUB_KERNEL((4 * kernels.device_sms(),), (32,), ())


def sm_mhz_after(us: float = 20.0) -> Callable[[], float]:
    """A reader of the SM clock in MHz over a ``us``-long spin queued now (call it once the spin
    has run; it reads the value back from the GPU)."""
    global CLOCKS
    if CLOCKS is None:
        CLOCKS = cp.zeros(2, dtype=cp.uint64)
    gpu_spin(us, CLOCKS)

    def read() -> float:
        cycles, ns = (float(x) for x in CLOCKS.get())
        return 1e3 * cycles / max(ns, 1.0)
    return read


def timed(fn: Callable[[], object], reps: int, warmup: int = 2) -> float:
    """Median milliseconds of `fn` over `reps` runs, each after an L2 flush, timed by events."""
    return timed_interleaved({"fn": fn}, reps, warmup)["fn"]


#: The default spin between the L2 flush and the start event (see ``timed_interleaved``): longer
#: than any host path measured on the H200 host (mgemm's Hopper path 70–180 µs a call, cuBLAS's
#: 30–90 µs), so the events see GPU time only.
SHIELD_US = 300.0


#: ``--rotate``: ``timed_interleaved`` turns the order of its functions by one each rep
ROTATE = False


def timed_interleaved(fns: dict[str, Callable[[], object]], reps: int, warmup: int = 2,
                      shield_us: float | None = None, host: dict[str, list[float]] | None = None,
                      mhz: dict[str, list[float]] | None = None) -> dict[str, float]:
    """Median milliseconds of each of `fns`, timed in turns: each rep runs every function once
    (L2 flush before each, CUDA events around it).  Timing one function's reps after another's
    lets the GPU's clocks drift between them (an H200 running 8192³ products back to back slows by
    ten per cent and more), which favours whichever runs first; in turns, every function sees the
    same drift.

    GPU time only, by default: a ``gpu_spin`` of ``shield_us`` sits between the flush and the start
    event, so the host has queued the function's launches before the GPU reaches them.  With
    ``shield_us=0`` the start event follows the flush directly, and where a function's host path
    (argument checks, descriptors, launch) outlasts the flush on the GPU, the events count the host
    time the GPU waited: on products of 30–100 µs that read as a kernel up to 2x slower, by an
    amount that varies with the host (benchmarks/RESULTS.md, thirteenth session).  ``host``, if
    given, collects each function's host seconds per call (meaningful with a shield, when no launch
    waits for the GPU); ``mhz`` the SM clock over a 20 µs spin queued right after each stop event
    (outside the timed interval).  A function whose median host time per call reaches the shield
    gets a ``WARNING host-bound`` line: its events then count host time the GPU waited.  The shield
    is ``SHIELD_US`` where not given (read at the call: a probe may set it)."""
    shield_us = SHIELD_US if shield_us is None else shield_us
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    host_s: dict[str, list[float]] = {name: [] for name in fns}
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    order = list(fns.items())
    for rep in range(reps):
        # with ROTATE, each rep starts one function later, so no function always runs first
        shift = rep % len(order) if ROTATE else 0
        for name, fn in order[shift:] + order[:shift]:
            if SCRUB:
                icache_scrub()
            l2_flush()
            if shield_us:
                gpu_spin(shield_us)
            start.record()
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            stop.record()
            clock = sm_mhz_after() if mhz is not None else None
            stop.synchronize()
            times[name].append(cp.cuda.get_elapsed_time(start, stop))
            host_s[name].append(t1 - t0)
            if clock is not None:
                mhz.setdefault(name, []).append(clock())
    for name, spent in host_s.items():
        if host is not None:
            host.setdefault(name, []).extend(spent)
        if shield_us and statistics.median(spent) * 1e6 >= shield_us:
            print(f"WARNING host-bound {name}: {statistics.median(spent) * 1e6:.0f} us of host time a call, "
                  f"past the {shield_us:.0f} us shield: its GPU time counts host waits", flush=True)
    return {name: statistics.median(t) for name, t in times.items()}


def add_block_args(ap) -> None:
    """The block probes' shape flags (``block_gemm_probe.py``, ``emulate_probe.py``): one block
    task's product, ``--m`` x ``--n`` with K = ``--k`` held as ``--parts`` chunks."""
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=32768)
    ap.add_argument("--parts", type=int, default=4)


def operands(case: Case, dtype: str, rng):
    """(a, b) random operands; bfloat16 as uint16 bits (torch views them); tf32 as float32."""
    a = cp.asarray(rng.standard_normal((case.m, case.k), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((case.k, case.n), dtype=np.float32))
    if dtype == "bfloat16":
        def bits(x):
            u = x.view(cp.uint32)
            return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(cp.uint16)
        return bits(a), bits(b)
    return (a, b) if dtype == "tf32" else (a.astype(dtype), b.astype(dtype))


@dataclass
class ProbeCase:
    """One ``MxNxK:dtype`` argument of the Hopper probes: the case, fresh operands, the output's
    storage dtype, ``as_dtype`` for ``hopper.gemm`` and the config ``hopper.gemm`` picks for them on
    this GPU (``rows_flags`` included)."""
    case: Case
    dtype: str
    a: object
    b: object
    storage: object
    as_dtype: str | None
    config: object

    def poisoned(self):
        """An output buffer of NaN bits (float16 NaN, or bfloat16 NaN as its uint16 bits), so an
        element the launch does not write fails ``check_rows``."""
        return cp.full((self.case.m, self.case.n), 0x7FC0 if self.as_dtype else np.nan, dtype=self.storage)

    def check_rows(self, outs: dict, bound: float = 1e-2) -> list[str]:
        """The names in ``outs`` whose every 64th row (about) is off the float64 product by more
        than ``bound`` of its largest element (NaN fails), each printed as a CHECK FAILED line."""
        m = self.case.m
        rows = cp.arange(0, m, max(1, m // 64))
        ref = as_f64(self.a[rows], self.dtype) @ as_f64(self.b, self.dtype)
        failed = []
        for name, out in outs.items():
            got = as_f64(out[rows], self.dtype)
            err = float(cp.abs(got - ref).max() / max(float(cp.abs(ref).max()), 1e-30))
            if not err <= bound:
                print(f"  CHECK FAILED {self.case.name} {name}: {err:.2e}", flush=True)
                failed.append(name)
        return failed

    def run_checked(self, fns: dict, outs: dict, bound: float = 1e-2) -> list[str]:
        """Each of ``fns`` run once (each writes its ``outs`` buffer), then ``check_rows``."""
        for fn in fns.values():
            fn()
        cp.cuda.Device().synchronize()
        return self.check_rows(outs, bound)


def shape_case(shape: str) -> Case:
    """``"MxNxK"`` as a case of that name."""
    m, n, k = map(int, shape.split("x"))
    return Case(shape, m, n, k)


def probe_case(spec: str, rng, portable: bool = False) -> ProbeCase:
    """``MxNxK:dtype`` as a ``ProbeCase``: fresh operands and the config the Hopper kernel picks for
    them (``rows_flags`` included), or with ``portable`` the portable kernel's (``mgemm.kernels``;
    float32 and float64 too)."""
    from mgemm import hopper  # noqa: PLC0415  (the portable harness does not need it)

    shape, dtype = spec.split(":")
    case = shape_case(shape)
    m, n, k = case.m, case.n, case.k
    a, b = operands(case, dtype, rng)
    bf16 = dtype == "bfloat16"
    config = (kernels.choose_config(m, n, k, dtype, kernels.device_sms()) if portable else
              hopper.choose_config(m, n, k, dtype, hopper.device_sms(), **hopper.rows_flags([a], [b])))
    return ProbeCase(case, dtype, a, b, cp.uint16 if bf16 else getattr(cp, dtype),
                     "bfloat16" if bf16 else None, config)


def parse_prior(text: str | None) -> dict:
    """``--prior``'s ``"NAME=LITERAL;..."`` as {name: value} (values by ``ast.literal_eval``), the
    module constants a benchmark patches to time the config a heuristic picks without a rule."""
    return {name: ast.literal_eval(value) for name, value in (kv.split("=", 1) for kv in (text or "").split(";") if kv)}


def parse_variant(spec: str, base):
    """``label:field=value,...`` -> ``(label, config, sms)``: ``base`` (a Hopper config) with those
    fields changed (booleans as 0/1, integers as digits), ``sms=N`` the launch's SM cap (None if
    not given).  The syntax of run_hopper_gpu.sh's EXTRA and timeline_probe.py's --variant."""
    label, _, fields = spec.partition(":")
    changes, sms = {}, None
    for kv in filter(None, fields.split(",")):
        key, val = kv.split("=", 1)
        if key == "sms":
            sms = int(val)
        elif key in ("pingpong", "a_k_major", "b_k_major", "overlap"):
            changes[key] = val == "1"
        else:
            changes[key] = int(val) if val.lstrip("-").isdigit() else val
    return label, base.replace(**changes), sms


def as_f64(x, dtype):
    if dtype == "bfloat16":
        return (x.astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
    return x.astype(cp.float64)


def rel_err_sampled(out, a, b, dtype, rng, rows=64):
    """‖out − ref‖/‖ref‖ on a random sample of rows, ref in float64."""
    idx = cp.asarray(rng.choice(a.shape[0], size=min(rows, a.shape[0]), replace=False))
    ref = as_f64(a[idx], dtype) @ as_f64(b, dtype)
    got = as_f64(out[idx], dtype)
    if bool(cp.isnan(got).any()):
        return float("nan")
    return float(cp.linalg.norm(got - ref) / (cp.linalg.norm(ref) or 1.0))


def cublas_fn(a, b, dtype, out):
    if dtype == "bfloat16":
        import torch
        ta = torch.from_dlpack(a).view(torch.bfloat16)
        tb = torch.from_dlpack(b).view(torch.bfloat16)
        to = torch.from_dlpack(out).view(torch.bfloat16)
        return lambda: torch.matmul(ta, tb, out=to)
    if dtype == "tf32":  # cuBLAS with TF32 allowed, as the kernel's tf32 input
        import torch
        torch.backends.cuda.matmul.allow_tf32 = True
        ta, tb, to = (torch.from_dlpack(x) for x in (a, b, out))
        return lambda: torch.matmul(ta, tb, out=to)
    return lambda: cp.matmul(a, b, out=out)


@dataclass
class Row:
    case: str
    m: int
    n: int
    k: int
    dtype: str
    impl: str
    config: str
    ms: float
    tflops: float
    err: float
    extra: dict = field(default_factory=dict)


def measure(case: Case, dtype: str, impls: dict[str, KernelConfig | None], rng, reps: int) -> list[Row]:
    """Every implementation's reference check first, then all of them timed in turns
    (`timed_interleaved`); one that fails its check or raises gets a NaN row and is not timed."""
    a, b = operands(case, dtype, rng)
    storage = cp.uint16 if dtype == "bfloat16" else "float32" if dtype == "tf32" else dtype
    flops = 2.0 * case.m * case.n * case.k
    checked: dict[str, tuple[str, float, Callable[[], object]]] = {}
    for name, cfg in impls.items():
        out = cp.full((case.m, case.n), 0x7FC0 if dtype == "bfloat16" else np.nan, dtype=storage)
        if cfg is None:
            fn = cublas_fn(a, b, dtype, out)
            label = "cuBLAS"
        else:
            as_dtype = "bfloat16" if dtype == "bfloat16" else None
            fn = (lambda cfg=cfg, out=out: kernels.gemm(a, b, out=out, config=cfg, as_dtype=as_dtype,
                                                        allow_tf32=cfg.input == "tf32"))
            label = str(cfg)
        kind = "tf32" if cfg is not None and cfg.input == "tf32" else dtype
        try:
            fn()
            cp.cuda.Device().synchronize()
            err = rel_err_sampled(out, a, b, kind, rng)
            if not err <= (BOUNDS[kind] if cfg is not None else 10 * BOUNDS[kind]):
                print(f"  REFERENCE CHECK FAILED {case.name} {dtype} {name}: {err:.2e}", flush=True)
                fn = None
        except Exception as exc:  # keep the run going; the row says what broke
            print(f"  ERROR {case.name} {dtype} {name}: {type(exc).__name__}: {exc}"[:400], flush=True)
            err, fn = float("nan"), None
        checked[name] = (label, err, fn)
    try:
        ms_of = timed_interleaved({n: fn for n, (_, _, fn) in checked.items() if fn is not None}, reps)
    except Exception as exc:
        print(f"  ERROR timing {case.name} {dtype}: {type(exc).__name__}: {exc}"[:400], flush=True)
        ms_of = {}
    rows = []
    for name, (label, err, _) in checked.items():
        ms = ms_of.get(name, float("nan"))
        tf = flops / (ms * 1e-3) / 1e12 if ms == ms else float("nan")
        rows.append(Row(case.name, case.m, case.n, case.k, dtype, name, label, ms, tf, err))
        print(f"  {case.name:>16} {dtype:>8} {name:>10} {ms:9.3f} ms {tf:8.1f} TFLOP/s err {err:.1e}  {label}",
              flush=True)
    return rows


def policy_impls(case: Case, dtype: str, policies=("per_tile", "static", "dynamic", "streamk"),
                 prior: dict | None = None):
    """cuBLAS, the heuristic's config ("auto"), with ``prior`` (``mgemm.kernels`` attributes, as
    ``--prior`` parses them) the config the heuristic picks with those values where it differs,
    then the heuristic's tile under each of ``policies``."""

    def choose():
        return kernels.choose_config(case.m, case.n, case.k, "float32" if dtype == "tf32" else dtype,
                                     kernels.device_sms(), allow_tf32=dtype == "tf32")

    base = choose()
    impls: dict[str, KernelConfig | None] = {"cuBLAS": None}
    impls["auto"] = base
    if prior:
        with mock.patch.multiple(kernels, **prior):
            before = choose()
        if before != base:
            impls["prior"] = before
    if case.name.startswith("wave") and dtype in ("float16", "bfloat16"):
        base = KernelConfig.default(dtype, **SWEEP_TILE)  # the tile the case's name counts
    for p in policies:
        impls[p] = base.replace(policy=p)
    return impls


# Ladder at 8192³, one idea per step (same harness, beside cuBLAS): the default tile, each mainloop
# variant knob switched back (frag_db, simt_vec, dmma_k: the state before that idea) or, for the
# opt-in knobs (swizzle, fast_copy, frag_carry, min_blocks), switched on alone and together, then tiles.
KNOBS = dict(swizzle=True, fast_copy=True, frag_carry=True)
LADDER = {
    "float16": [("default 128x128x32 s4 w2x2", {}),
                ("no frag double-buffer", dict(frag_db=False)),
                # the opt-in mainloop knobs, one at a time, then together
                ("swizzle (XOR tiles, no padding)", dict(swizzle=True)),
                ("fast_copy (unmasked interior copies)", dict(fast_copy=True)),
                ("frag_carry (barrier before the last mma)", dict(frag_carry=True)),
                ("swizzle+fast_copy+frag_carry", dict(swizzle=True, fast_copy=True, frag_carry=True)),
                ("all three, 128x128x32 s6", dict(swizzle=True, fast_copy=True, frag_carry=True, stages=6)),
                ("all three, 128x128x64 s3", dict(swizzle=True, fast_copy=True, frag_carry=True, tile_k=64, stages=3)),
                ("all three, 128x128x64 s4 (1 CTA/SM)", dict(swizzle=True, fast_copy=True, frag_carry=True, tile_k=64, stages=4)),
                ("all three, 256x128x32 s4 w4x2 (8 warps of 64x64)",
                 dict(swizzle=True, fast_copy=True, frag_carry=True, tile_m=256, warps_m=4)),
                # occupancy: 8 warps of 64x32, registers capped for 2 CTAs per SM
                ("128x128x32 s4 w2x4 min_blocks=2", dict(warps_n=4, min_blocks=2)),
                ("128x128x32 s4 w2x4 min_blocks=2 swizzle+fast_copy",
                 dict(warps_n=4, min_blocks=2, swizzle=True, fast_copy=True)),
                ("128x256x32 s4 w2x4", dict(tile_n=256, warps_n=4)),
                ("128x256x64 s3 w2x4 swizzle+fast_copy+frag_carry",
                 dict(swizzle=True, fast_copy=True, frag_carry=True, tile_n=256, warps_n=4, tile_k=64, stages=3)),
                ("128x128x64 s3 w2x2", dict(tile_k=64, stages=3)),
                # around the heuristic's first tile (256x128x32 s4 w4x2 with the three knobs)
                ("knobs 256x128x32 s3 w4x2", dict(KNOBS, tile_m=256, warps_m=4, stages=3)),
                ("knobs 256x128x32 s5 w4x2", dict(KNOBS, tile_m=256, warps_m=4, stages=5)),
                ("knobs 256x128x64 s3 w4x2", dict(KNOBS, tile_m=256, warps_m=4, tile_k=64, stages=3)),
                ("knobs 256x128x32 s4 w4x2 group 16", dict(KNOBS, tile_m=256, warps_m=4, group=16)),
                ("knobs 256x128x32 s4 w4x2 raster n", dict(KNOBS, tile_m=256, warps_m=4, raster="n")),
                ("knobs 256x128x32 s4 w4x4 (16 warps of 64x32)", dict(KNOBS, tile_m=256, warps_m=4, warps_n=4)),
                ("knobs 256x128x64 s4 w4x2", dict(KNOBS, tile_m=256, warps_m=4, tile_k=64)),
                ("knobs 128x256x32 s4 w2x4", dict(KNOBS, tile_n=256, warps_n=4)),
                # warps of 96x64: 17 % fewer shared-memory bytes per mma than 64x64 (ldmatrix reads
                # and cp.async writes); the registers leave no room for fragment double-buffering
                ("96x64 warps 384x128x32 s4 w4x2", dict(KNOBS, frag_carry=False, frag_db=False,
                                                        tile_m=384, warps_m=4)),
                ("96x64 warps 384x128x32 s3 w4x2", dict(KNOBS, frag_carry=False, frag_db=False,
                                                        tile_m=384, warps_m=4, stages=3)),
                ("96x64 warps 192x256x32 s4 w2x4", dict(KNOBS, frag_carry=False, frag_db=False,
                                                        tile_m=192, tile_n=256, warps_n=4)),
                ("96x64 warps 192x128x32 s4 w2x2 min_blocks=2", dict(KNOBS, frag_carry=False, frag_db=False,
                                                                     tile_m=192, min_blocks=2)),
                ("64x64 warps, no frag_db: knobs 256x128x32 s4 w4x2",
                 dict(KNOBS, frag_carry=False, frag_db=False, tile_m=256, warps_m=4)),
                # stream-K over the partial last wave only, after the whole tiles (sk_waves=0)
                ("knobs 256x128x32 s4 w4x2 stream-K last wave",
                 dict(KNOBS, tile_m=256, warps_m=4, policy="streamk", sk_waves=0))],
    "float32": [("default 64x128x8 s3 w2x2", {}),
                ("4-byte copies only", dict(simt_vec=False)),
                ("128x128x8 s3 w4x2 (the default before)", dict(tile_m=128, warps_m=4, warps_n=2)),
                ("64x128x8 s4 w2x2", dict(stages=4)),
                ("64x128x16 s3 w2x2", dict(tile_k=16))],
    "float64": [("default 128x64x16 s3 w2x2 m16n8k4", {}),
                ("m8n8k4 (sm_80 shape)", dict(dmma_k=0)),
                ("m16n8k8", dict(dmma_k=8)),
                ("m16n8k16", dict(dmma_k=16)),
                ("64x64x16 s4 w2x2", dict(tile_m=64, stages=4)),
                ("64x128x16 s3 w2x2", dict(tile_m=64, tile_n=128)),
                ("128x128x16 s3 w2x4", dict(tile_n=128, warps_n=4))],
}
LADDER["bfloat16"] = LADDER["float16"]


def hog_experiment(dtype: str, case: Case, hog_sms: int, rng, reps: int) -> list[Row]:
    """A concurrent kernel holds `hog_sms` SMs for about as long as the GEMM takes alone; time the
    GEMM (static vs dynamic) from its launch to its end."""
    module = cp.RawModule(code=r'''
extern "C" __global__ void hog(long long cycles) {
  extern __shared__ char s[];
  long long t0 = clock64();
  while (clock64() - t0 < cycles) { if (threadIdx.x == 1024) s[0] = 1; }
}''')
    hog = module.get_function("hog")
    dev = cp.cuda.Device()
    smem = dev.attributes["MaxSharedMemoryPerBlockOptin"]
    hog.max_dynamic_shared_size_bytes = smem
    clock_khz = dev.attributes["ClockRate"]
    a, b = operands(case, dtype, rng)
    out = cp.empty((case.m, case.n), dtype=cp.uint16 if dtype == "bfloat16" else dtype)
    base = kernels.choose_config(case.m, case.n, case.k, dtype, kernels.device_sms())
    flops = 2.0 * case.m * case.n * case.k
    as_dtype = "bfloat16" if dtype == "bfloat16" else None
    s_hog, s_gemm = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    rows = []
    for policy in ("static", "dynamic"):
        cfg = base.replace(policy=policy)

        def run():
            return kernels.gemm(a, b, out=out, config=cfg, as_dtype=as_dtype)
        alone = timed(run, reps)
        cycles = int(alone * 1e-3 * clock_khz * 1e3 * 0.6)
        times = []
        for _ in range(reps):
            l2_flush()
            cp.cuda.Device().synchronize()
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            with s_hog:
                hog((hog_sms,), (32,), (np.int64(cycles),), shared_mem=smem)
            time.sleep(0.0005)  # let the hog blocks become resident first
            with s_gemm:
                start.record()
                run()
                stop.record()
            stop.synchronize()
            s_hog.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        ms = statistics.median(times)
        for label, t in (("alone", alone), (f"hog{hog_sms}", ms)):
            rows.append(Row(case.name, case.m, case.n, case.k, dtype, f"{policy}/{label}", str(cfg), t,
                            flops / (t * 1e-3) / 1e12, 0.0, {"hog_sms": hog_sms if label != "alone" else 0}))
            print(f"  hog {case.name} {dtype} {policy:>8} {label:>7} {t:8.3f} ms", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="8192³ and the skewed shapes only")
    ap.add_argument("--dtypes", default="float16,bfloat16,float32,float64")
    ap.add_argument("--ladder", action="store_true", help="tile variants at 8192³")
    ap.add_argument("--hog", action="store_true", help="dynamic vs static beside an SM-holding kernel")
    ap.add_argument("--sweep", action="store_true", help="tile counts over 1..3 waves")
    ap.add_argument("--sweep-tiles", default="", help="the sweep's tile counts instead (comma-separated)")
    ap.add_argument("--ladder-match", default="", help="only the ladder steps whose label has this (or one of a|b|...)")
    ap.add_argument("--policies", default="per_tile,static,dynamic,streamk",
                    help="policies timed beside cuBLAS and the heuristic's choice (comma-separated)")
    ap.add_argument("--squares", default="", help="comma-separated square sizes, or none (default per --quick)")
    ap.add_argument("--no-skewed", action="store_true", help="leave out the skewed shapes")
    ap.add_argument("--shapes", default="", help="more cases, comma-separated MxNxK")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--prior", default="",
                    help="NAME=LITERAL;... : also time the config the heuristic picks with these "
                         "mgemm.kernels attributes (a rule's prior), where it differs")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rotate", action="store_true",
                    help="turn the order of the timed implementations by one each rep")
    args = ap.parse_args(argv)
    global ROTATE
    ROTATE = args.rotate
    prior = parse_prior(args.prior)
    for name in prior:
        if not hasattr(kernels, name):
            ap.error(f"--prior: mgemm.kernels has no {name}")
    rng = np.random.default_rng(0)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    meta = {"gpu": gpu, "sms": kernels.device_sms(), "cupy": cp.__version__,
            "date": time.strftime("%Y-%m-%d")}
    print(f"# {meta}", flush=True)
    dtypes = args.dtypes.split(",")
    rows: list[Row] = []
    squares = [] if args.squares == "none" else (
        [int(s) for s in args.squares.split(",") if s] or ([8192] if args.quick else
                                                           [1024, 2048, 4096, 8192, 16384]))
    cases = [Case(f"square{s}", s, s, s) for s in squares] + ([] if args.no_skewed else SKEWED)
    cases += [shape_case(shape) for shape in args.shapes.split(",") if shape]
    if args.sweep:
        cases += wave_sweep(counts=[int(t) for t in args.sweep_tiles.split(",") if t])
    for dtype in dtypes:
        if args.ladder and dtype in LADDER:
            c = Case("square8192", 8192, 8192, 8192)
            impls = {"cuBLAS": None}
            for label, fields in LADDER[dtype]:
                if any(part in label for part in args.ladder_match.split("|")):
                    impls[label] = KernelConfig.default(dtype, **{"policy": "static", **fields})
            rows += measure(c, dtype, impls, rng, args.reps)
        for case in cases:
            if dtype in ("float32", "float64") and case.m * case.n * case.k > 8192 ** 3:
                continue
            policies = tuple(p for p in args.policies.split(",") if p)
            rows += measure(case, dtype, policy_impls(case, dtype, policies, prior), rng, args.reps)
    if args.hog:
        for dtype in ("float16", "float32"):
            if dtype in dtypes:
                rows += hog_experiment(dtype, Case("square8192", 8192, 8192, 8192), 66, rng, 5)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "kernels.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({**meta, **r.__dict__}) + "\n")
    # Table: per case and dtype, TFLOP/s and ratio to cuBLAS; persistent / per_tile.
    print("\n| case | dtype | impl | TFLOP/s | × cuBLAS | × per_tile | err |")
    print("|---|---|---|---:|---:|---:|---:|")
    by = {}
    for r in rows:
        by.setdefault((r.case, r.dtype), {})[r.impl] = r
    for (case, dtype), impls in by.items():
        cub = impls.get("cuBLAS")
        pt = impls.get("per_tile")
        for name, r in impls.items():
            ratio = r.tflops / cub.tflops if cub and cub.tflops == cub.tflops and cub.tflops else float("nan")
            vs_pt = r.tflops / pt.tflops if pt and pt.tflops else float("nan")
            print(f"| {case} | {dtype} | {name} | {r.tflops:.1f} | {ratio:.2f} | {vs_pt:.2f} | {r.err:.1e} |")
    return rows


if __name__ == "__main__":
    main()
