"""Which kernel does cuBLAS run on each shape, and how does mgemm's Hopper kernel compare there?

For each case: the kernels cuBLAS launches for one product (``cupy.matmul`` for float16, torch for
bfloat16: the benchmarks' anchors), read from a torch profiler trace (CUPTI sees every kernel of the
process): name, grid, block, dynamic shared memory, registers, duration; then the heuristic's config
and its launch (tiles, CTAs); then both timed in turns (L2 flush, GPU time, median), with the output
checked against float64 on sampled rows.  The names tell the tile, cluster and split cuBLAS took
(e.g. ``nvjet_hsh_128x64_64x8_2x1_v_bz_splitK_TNT``), which says what mgemm's heuristic could copy.

``--variant label:field=value,...`` (changes to the heuristic's config, as run_hopper_gpu.sh's
EXTRA) adds more Hopper configs to the turns (with the field ``swap=1`` or ``2``: the transposed
product B^T A^T, from the heuristic's config for N x M x K: ``swap_field``); ``--prior`` adds the config the heuristic picks
without its last rule (``hopper_heuristic.CHEAPEST_WIDTHS`` empty) where that differs; ``--prior
"NAME=LITERAL;..."`` sets those constants of ``mgemm.hopper_heuristic`` (or, for the launch's own,
such as ``L2_PROMOTION``, of ``mgemm.hopper``) for it instead (e.g.
``"THIN_LONG=None;SPLIT_K=None"``; a bare ``--prior`` goes after the shapes or before another
option); ``--tune`` adds ``hopper.gemm`` as a caller gets it ("auto": the heuristic, split where
``gemm_parts`` splits) and with ``tune=True`` ("tuned": ``mgemm.tune``'s pick, tuned on the
first call, which the timing leaves out; the cache in a fresh directory unless
``MGEMM_CACHE_DIR`` is set); ``--caller`` adds "auto" alone; with ``--prior``, either adds
``hopper.gemm`` as a caller gets it under the prior constants ("auto-prior"); ``--no-census``
skips the profiler.

Each function runs after the one before it in the turn, whose code the SMs keep cached: a config
that launches the same binary as the function before it (host-only fields such as ``sk_ways``;
"auto" right after the heuristic's config) reads 1-2 µs faster on few-tile products than one
that follows another binary.  ``--scrub`` runs code larger than the SMs' instruction caches before
each timed call (``kernels.icache_scrub``), so every function starts cold and the order no longer
matters (RESULTS.md, forty-ninth session).

    python3 benchmarks/cublas_census.py [--reps 10] [--dtype float16]
        [--random N --seed S --waves 1,3 --k-log2 11,14 [--off-rows]]
        [--typed N [--typed-ranges M0,M1;N0,N1;K0,K1] [--transposed-only] [--prior-differs]]
        [--variant LABEL:FIELDS ...] [--prior [NAME=LITERAL;...]] [--tune | --caller] [--no-census]
        [--rotate] [--scrub] [--shield-us 300] [MxNxK ...]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import tempfile
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper, hopper_heuristic, tune  # noqa: E402

CASES = ["896x2432x8192", "1024x2112x8192", "1408x1536x16384", "256x256x65536", "64x8192x8192",
         "8192x8192x256", "4096x4096x4096", "1728x1312x2048", "2176x1216x2048", "1824x1584x4096",
         "3040x1024x4096", "2352x1712x4096", "1216x2528x8192", "448x2432x4096", "2224x496x16384"]


def random_cases(count: int, seed: int, waves: tuple[float, float] = (1, 3),
                 k_log2: tuple[int, int] = (11, 14), off_rows: bool = False) -> list[str]:
    """Shapes whose 128x128 tiles run ``waves`` (from, to) waves of 132 SMs, M and N multiples of
    16 from 384, K a power of two from ``2**k_log2[0]`` to ``2**k_log2[1]``.  With the defaults, a seed
    draws the shapes it drew before these options.  ``off_rows``: N then lies 8 to 56 past a
    multiple of 64 (a contiguous B's rows off 128-byte lines; half of them off 32-byte sectors too)
    and K is any multiple of 8 in the same range."""
    rng = np.random.default_rng(seed)
    out = []
    top = 200 if waves[1] <= 3 else int((waves[1] * 132) ** 0.5 * 16)  # M, N up to `top` x 16
    while len(out) < count:
        m, n = (int(x) * 16 for x in rng.integers(24, top, size=2))
        if off_rows:
            n = n - n % 64 + 8 * int(rng.integers(1, 8))
        tiles = -(-m // 128) * -(-n // 128)
        if waves[0] * 132 <= tiles <= waves[1] * 132:
            k = (int(rng.integers(2 ** k_log2[0] // 8, 2 ** k_log2[1] // 8 + 1)) * 8 if off_rows
                 else int(2 ** rng.integers(k_log2[0], k_log2[1] + 1)))
            out.append(f"{m}x{n}x{k}")
    return out


def cublas_kernels(fn, calls: int = 3) -> list[dict]:
    """The kernels of one call of ``fn`` (the last of ``calls``), from a torch profiler trace."""
    import torch  # noqa: PLC0415
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    cp.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
            cp.cuda.Device().synchronize()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    per_call = len(kernels) // calls if calls else 0
    return kernels[-per_call:] if per_call else kernels


MAX_DRAWS = 5000  # typed_cases gives up after this many draws


TYPED_RANGES = ((256, 16384),) * 3


def typed_cases(count: int, seed: int, keep=None, ranges=TYPED_RANGES) -> list[str]:
    """``count`` shapes drawn as a user types them: M, N and K log-uniform over ``ranges`` (one
    (low, high) pair each; default 256 to 16384), rounded to multiples of 8, 5-2000 GFLOP; with
    ``keep``, only those where ``keep(m, n, k)``.  Raises after ``MAX_DRAWS`` draws without
    ``count`` shapes (a filter that keeps none).  ``ranges=((256, 800), (2000, 16000), (1280,
    2047))``, say: narrow M over a wide N at short K (``--typed-ranges "256,800;2000,16000;1280,2047"``)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(MAX_DRAWS):
        if len(out) == count:
            break
        m, n, k = (int(8 * round(np.exp(rng.uniform(np.log(lo), np.log(hi))) / 8)) for lo, hi in ranges)
        if 5 <= 2 * m * n * k / 1e9 <= 2000 and (keep is None or keep(m, n, k)):
            out.append(f"{m}x{n}x{k}")
    if len(out) < count:
        raise SystemExit(f"typed_cases: {len(out)} of {count} shapes kept in {MAX_DRAWS} draws: {out}")
    return out


def contiguous(m: int, n: int, k: int):
    """Contiguous row-major 16-bit A (m x k), B (k x n) and output (m x n), unfilled, and
    ``choose_config``'s row flags for A and B: the operands the ``typed_cases`` filters picture."""
    a, b, out = (cp.empty(s, dtype=cp.float16) for s in ((m, k), (k, n), (m, n)))
    return a, b, out, hopper.rows_flags([a], [b])


def caller_route(m: int, n: int, k: int, dtype: str, sms: int):
    """What ``hopper.gemm_parts`` does with contiguous row-major operands (and output) of this
    shape, the heuristic choosing (``hopper_heuristic.route``), and the config it then launches: the
    heuristic's, the transposed product's, the first band's and the rest's where it splits the
    rows, the copy's where it copies B K-major (``hopper_heuristic.k_major_copy_config``); with the staging
    buffers ``hopper_heuristic.tma_buffers`` gives a direct launch (rows of N on 16 bytes)."""
    a, b, out, flags = contiguous(m, n, k)
    direct = hopper.choose_config(m, n, k, dtype, sms, **flags)
    way = hopper_heuristic.route([a], [b], out, direct, m, n, k, dtype, sms, flags)
    if way.how == "copy":
        return way._replace(config=hopper_heuristic.k_major_copy_config(m, n, k, dtype, sms, flags["a_rows_off_128"]))
    if way.how == "one" and n % 8 == 0:
        return way._replace(config=hopper_heuristic.tma_buffers(way.config, m, n, sms))
    return way


def runs_transposed(dtype: str):
    """``typed_cases``' filter: whether ``hopper.gemm_parts`` runs the product of contiguous
    row-major operands (and output) of this shape as B^T A^T (``caller_route``'s "swap")."""
    sms = hopper.device_sms()
    return lambda m, n, k: caller_route(m, n, k, dtype, sms).how == "swap"


def prior_differs(dtype: str, prior: dict):
    """``typed_cases``' filter: whether what ``gemm_parts`` does with contiguous row-major operands
    of this shape and the config it launches (``caller_route``) differ from what it does with the
    ``--prior`` constants: the sizes a rule changes for a caller (not those where only a config
    that no launch runs changes, such as the direct one of a product run transposed either way)."""
    sms = hopper.device_sms()

    def keep(m: int, n: int, k: int) -> bool:
        now = caller_route(m, n, k, dtype, sms)
        with patched(prior):
            return caller_route(m, n, k, dtype, sms) != now
    return keep


def both(*keeps):
    """``typed_cases``' filter that keeps what each of ``keeps`` (None: any) keeps."""
    keeps = [f for f in keeps if f is not None]
    return (lambda m, n, k: all(f(m, n, k) for f in keeps)) if keeps else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    p.add_argument("--random", type=int, default=0,
                   help="N random shapes (--waves, --k-log2): after the shapes given, or in place of the default list")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--waves", default="1,3", help="the random shapes' 128x128 waves: FROM,TO")
    p.add_argument("--k-log2", default="11,14", help="the random shapes' K: 2**FROM .. 2**TO")
    p.add_argument("--off-rows", action="store_true",
                   help="random shapes whose B rows are off 128 bytes (N = 64 j + 8..56, K any multiple of 8)")
    p.add_argument("--typed", type=int, default=0,
                   help="N shapes drawn as a user types them (typed_cases, --seed): after the shapes given, "
                        "or in place of the default list")
    p.add_argument("--typed-ranges", default=None,
                   help="--typed draws M, N and K from these ranges: M0,M1;N0,N1;K0,K1 (default 256,16384 each)")
    p.add_argument("--transposed-only", action="store_true",
                   help="--typed draws only shapes that hopper.gemm runs as B^T A^T (runs_transposed)")
    p.add_argument("--prior-differs", action="store_true",
                   help="--typed draws only shapes whose launch for a caller the --prior constants change "
                        "(prior_differs, caller_route: where a rule changes what runs)")
    p.add_argument("--variant", action="append", default=[], help="label:field=value,... (repeatable)")
    p.add_argument("--no-census", action="store_true", help="time only; no profiler trace")
    p.add_argument("--prior", nargs="?", const="CHEAPEST_WIDTHS=()",
                   help="also the heuristic's config with these hopper constants (NAME=LITERAL;...)")
    p.add_argument("--split", action="store_true",
                   help="also the heuristic's config (and the prior's, as 'prior-split') on the rows that "
                        "fill all its waves but the last, then the rest in a second launch "
                        "(hopper_heuristic.tail_split), where it splits")
    p.add_argument("--tune", action="store_true",
                   help="also hopper.gemm as a caller gets it ('auto') and with tune=True ('tuned')")
    p.add_argument("--caller", action="store_true",
                   help="also hopper.gemm as a caller gets it ('auto'; with --prior, 'auto-prior' too)")
    p.add_argument("--rotate", action="store_true",
                   help="turn the order of the timed implementations by one each rep")
    p.add_argument("--scrub", action="store_true",
                   help="run code larger than the SMs' instruction caches before each timed call, so "
                        "that no config finds the code of the one before it cached")
    p.add_argument("--shield-us", type=float, default=h.SHIELD_US,
                   help="the GPU spin before each timed call, µs (host paths longer than it are counted)")
    args = p.parse_args(argv)
    h.ROTATE = args.rotate
    h.SCRUB = args.scrub
    h.SHIELD_US = args.shield_us
    if args.tune and not os.environ.get("MGEMM_CACHE_DIR"):
        os.environ["MGEMM_CACHE_DIR"] = tempfile.mkdtemp(prefix="mgemm-tune-")
    waves = tuple(float(x) for x in args.waves.split(","))
    k_log2 = tuple(int(x) for x in args.k_log2.split(","))
    cases = args.cases or ([] if args.random or args.typed else CASES)
    cases += random_cases(args.random, args.seed, waves, k_log2, args.off_rows)
    prior = h.parse_prior(args.prior)
    if args.prior_differs and not prior:
        p.error("--prior-differs needs --prior NAME=LITERAL;...")
    ranges = (tuple(tuple(int(x) for x in r.split(",")) for r in args.typed_ranges.split(";"))
              if args.typed_ranges else TYPED_RANGES)
    if len(ranges) != 3 or any(len(r) != 2 or not 0 < r[0] <= r[1] for r in ranges):
        p.error(f"--typed-ranges needs M0,M1;N0,N1;K0,K1 with 0 < low <= high, got {args.typed_ranges!r}")
    cases += typed_cases(args.typed, args.seed, both(runs_transposed(args.dtype) if args.transposed_only else None,
                                                     prior_differs(args.dtype, prior) if args.prior_differs else None),
                         ranges)
    rng = np.random.default_rng(0)
    sms = hopper.device_sms()
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {sms} SMs, {args.dtype}; "
          f"GPU time, median of {args.reps}, in turns", flush=True)
    for spec in cases:
        pc = h.probe_case(f"{spec}:{args.dtype}", rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        configs = {"hopper": (pc.config, None)}
        if prior:
            with patched(prior):
                prior_cfg = hopper.choose_config(m, n, k, args.dtype, sms, **hopper.rows_flags([pc.a], [pc.b]))
            if prior_cfg != pc.config:
                configs["prior"] = (prior_cfg, None)
        swapped = {}  # label: swap_field's mode (C^T = B^T A^T where non-zero)
        for v in args.variant:
            spec_v, swap = swap_field(v)
            base = pc.config
            if swap:  # the heuristic's config for the transposed product, then the changes
                base = hopper.choose_config(n, m, k, args.dtype, sms, **hopper.rows_flags([pc.b.T], [pc.a.T]))
            try:
                label, cfg, sms_cap = h.parse_variant(spec_v, base)
            except ValueError as err:  # a change this shape's config does not take (a width that
                print(f"  {spec:>16} {v.split(':')[0]:>10} skipped: {err}", flush=True)  # TMA stores do not)
                continue
            configs[label] = (cfg, sms_cap)
            swapped[label] = swap
        splits = {}  # "split" / "prior-split": (config of the first band, tail_split's result)
        for name, label in (("hopper", "split"), ("prior", "prior-split")):
            if args.split and name in configs:
                cut = hopper_heuristic.tail_split(configs[name][0], m, n, k, args.dtype, sms,
                                                  **hopper.rows_flags([pc.a], [pc.b]))
                if cut:
                    splits[label] = (configs[name][0], cut)
        callers = {}  # label: tune
        if args.tune or args.caller:
            callers["auto"] = False
        if args.tune:
            callers["tuned"] = True
        if (args.tune or args.caller) and prior:
            callers["auto-prior"] = False  # as a caller gets it with the --prior constants
        outs = {name: pc.poisoned() for name in ("cuBLAS", *configs, *splits, *callers)}
        for name in configs:
            if swapped.get(name) == 2:  # the output held transposed; checked through its .T
                outs[name] = cp.ascontiguousarray(outs[name].T).T
        fns = {"cuBLAS": h.cublas_fn(pc.a, pc.b, args.dtype, outs["cuBLAS"])}
        # each config's (A, B, output): the transposed product's where swapped
        ops = {name: (pc.b.T, pc.a.T, outs[name].T) if swapped.get(name) else (pc.a, pc.b, outs[name])
               for name in configs}
        for name, (cfg, sms_cap) in configs.items():
            fns[name] = (lambda cfg=cfg, sms_cap=sms_cap, op=ops[name]:
                         hopper.gemm(op[0], op[1], out=op[2], config=cfg, sms=sms_cap, as_dtype=pc.as_dtype))
        for label, (first, (m1, rest, _)) in splits.items():
            def split_fn(out=outs[label], m1=m1, first=first, rest=rest):
                hopper.gemm(pc.a[:m1], pc.b, out=out[:m1], config=first, as_dtype=pc.as_dtype)
                hopper.gemm(pc.a[m1:], pc.b, out=out[m1:], config=rest, as_dtype=pc.as_dtype)
            fns[label] = split_fn
        for label, tuned in callers.items():
            fns[label] = (lambda out=outs[label], tuned=tuned, patch=prior if label == "auto-prior" else {}:
                          caller_gemm(pc, out, tuned, patch))
        for name in [label for label in configs if label in swapped]:  # the --variant configs
            try:  # a variant the launch refuses (a width that needs B K-major, say): skipped
                fns[name]()
            except ValueError as err:
                print(f"  {spec:>16} {name:>10} skipped: {err}", flush=True)
                del fns[name], outs[name], configs[name]
            else:  # poisoned again, so that run_checked still sees any tile left unwritten
                outs[name][...] = pc.poisoned()
        pc.run_checked(fns, outs)
        for kern in [] if args.no_census else cublas_kernels(fns["cuBLAS"]):
            a = kern.get("args", {})
            print(f"  {spec:>16} cuBLAS-kernel {kern['name'][:90]} grid={a.get('grid')} "
                  f"block={a.get('block')} smem={a.get('shared memory')} "
                  f"regs={a.get('registers per thread')} {kern['dur']:.1f} us", flush=True)
        ms = h.timed_interleaved(fns, args.reps)
        flops = 2.0 * m * n * k
        print(f"  {spec:>16} cuBLAS {1e3 * ms['cuBLAS']:8.2f} us {flops / ms['cuBLAS'] / 1e9:6.1f} TFLOP/s",
              flush=True)
        for label, (_, (m1, rest, ratio)) in splits.items():
            whose = "the heuristic's" if label == "split" else "the prior's"
            print(f"  {spec:>16} {label:>11} {1e3 * ms[label]:8.2f} us "
                  f"{flops / ms[label] / 1e9:6.1f} TFLOP/s x cuBLAS {ms['cuBLAS'] / ms[label]:.2f} | "
                  f"rows {m1} on {whose}, {m - m1} on {rest} | model {ratio:.3f}", flush=True)
        for label in callers:
            pick = tuned_label(m, n, k, args.dtype) if label == "tuned" else "heuristic"
            with patched(prior if label == "auto-prior" else {}):
                if label != "tuned" and hopper_heuristic.gemm_copies_b([pc.a], [pc.b], outs[label], m, n, k, args.dtype, sms):
                    pick += ", B copied K-major"
            print(f"  {spec:>16} {label:>10} {1e3 * ms[label]:8.2f} us {flops / ms[label] / 1e9:6.1f} TFLOP/s"
                  f" x cuBLAS {ms['cuBLAS'] / ms[label]:.2f} | {pick}", flush=True)
        if callers:  # what the callers' calls launch, beside the heuristic's config as given
            for label in ("hopper", *callers):
                print(f"  {spec:>16} {label:>10} launches "
                      f"{'; '.join(repr(cfg) for cfg in launched_configs(fns[label]))}", flush=True)
        for name, (cfg, sms_cap) in configs.items():
            plan = hopper.launch_info(ops[name][0].shape, ops[name][1].shape, cfg, sms=sms_cap)
            print(f"  {spec:>16} {name:>10} {1e3 * ms[name]:8.2f} us {flops / ms[name] / 1e9:6.1f} TFLOP/s"
                  f" x cuBLAS {ms['cuBLAS'] / ms[name]:.2f} | {cfg} | tiles {plan.tiles} grid {plan.grid}",
                  flush=True)


def launched_configs(fn) -> list:
    """The configs one call of ``fn`` launches the Hopper kernel with (``hopper._launch_setup``'s,
    specialized to the operands): what a caller's call runs, beside the configs timed by name."""
    real, taken = hopper._launch_setup, []

    def record(*a):
        setup = real(*a)
        taken.append(setup.config)
        return setup

    with mock.patch.object(hopper, "_launch_setup", record):
        fn()
    cp.cuda.Device().synchronize()
    return taken


# ``mgemm.hopper_heuristic``'s memos of the rules' picks, whose keys do not hold every constant a rule reads
# (``_choose_cached`` is keyed by the shape alone: ``SHORT_K`` is not in it).  Its other memos (TMA
# descriptors, kernels and launch plans of a given config) hold no pick and are kept.
PICK_MEMOS = ("_choose_cached", "_swap_may_pay", "_swap_cached", "_k_major_cached", "_tail_split_cached")


_PRIOR_MEMOS: dict = {}  # the constants patched (their items, sorted) -> their own memos of picks


def _memos_for(constants: dict) -> dict:
    """Fresh ``functools.lru_cache`` wrappers of the ``PICK_MEMOS`` functions, one set per set of
    ``constants``, made once and kept: each side of a comparison answers from its own picks."""
    key = tuple(sorted((name, repr(value)) for name, value in constants.items()))
    if key not in _PRIOR_MEMOS:
        _PRIOR_MEMOS[key] = {}
        for name in PICK_MEMOS:
            memo = getattr(hopper_heuristic, name)
            _PRIOR_MEMOS[key][name] = functools.lru_cache(maxsize=memo.cache_info().maxsize)(memo.__wrapped__)
    return _PRIOR_MEMOS[key]


@contextlib.contextmanager
def patched(constants: dict):
    """A context that sets these constants (none: nothing), each on the module that defines it
    (``mgemm.hopper_heuristic``, else ``mgemm.hopper``), and swaps in memos of picks
    (``PICK_MEMOS``) of their own (``_memos_for``), so that neither side answers from the other's
    picks and neither makes them afresh on every timed call."""
    if not constants:
        yield
        return
    rules = {name: v for name, v in constants.items() if hasattr(hopper_heuristic, name)}
    launch = {name: v for name, v in constants.items() if name not in rules}
    with mock.patch.multiple(hopper_heuristic, **rules, **_memos_for(constants)), \
            mock.patch.multiple(hopper, **launch) if launch else contextlib.nullcontext():
        yield


def caller_gemm(pc, out, tune: bool, patch: dict):
    """``hopper.gemm`` on the case's operands as a caller gets it (``tune``), with the constants
    of ``patch`` set for the call (``patched``)."""
    with patched(patch):
        return hopper.gemm(pc.a, pc.b, out=out, as_dtype=pc.as_dtype, tune=tune)


def swap_field(spec: str) -> tuple[str, int]:
    """A ``--variant`` spec without its ``swap`` field, and that field (0 if none).  ``swap=1``: the
    variant computes the transposed product, B^T A^T, into the output's transposed view, from the
    heuristic's config for the transposed shape (N x M x K) with the spec's other changes;
    ``swap=2``: the same into an output held transposed (N x M row-major: how fast the transposed
    product is where its output's rows are contiguous)."""
    label, _, fields = spec.partition(":")
    kv = [f for f in fields.split(",") if f]
    swap = [int(f.split("=", 1)[1]) for f in kv if f.startswith("swap=")]
    return f"{label}:{','.join(f for f in kv if not f.startswith('swap='))}", (swap or [0])[-1]


def tuned_label(m: int, n: int, k: int, dtype: str) -> str:
    """The label ``mgemm.tune`` chose for this product, from its cache file."""
    try:
        entries = json.loads(tune.cache_file().read_text())
    except (OSError, ValueError):
        return "?"
    picks = [e["label"] for key, e in entries.items() if f"|{dtype}->" in key and f"|{m}x{n}x{k}|" in key]
    return picks[-1] if picks else "?"


if __name__ == "__main__":
    main()
