"""Does the Hopper kernel slow down when an operand's rows do not start on 128-byte boundaries?

For each ``MxNxK`` (float16 or bfloat16): cuBLAS and the heuristic's config on contiguous operands
("in place"), then the same config on the same values held in buffers whose rows are padded to a
multiple of 64 elements (128 bytes), as views the kernel reads in place: A's rows padded ("pad
A"), B's ("pad B"), A's and B's ("pad AB"); the padded copies are made before the timing.  "copy
B" copies B into the padded buffer inside the timed call (CuPy's copy, the buffer made before), then
multiplies as "pad B" does: what padding B on the fly would cost; "pad B*" is "pad B" on the config
the heuristic picks for B's padded rows.  "B^T" copies B into a K-major buffer (N rows of K, padded to
128 bytes) by ``hopper.transpose_copy`` inside the timed call and multiplies with B read K-major on the
heuristic's config for that layout; "B^T*" is the same product with the copy made before the timing.  A shape whose K (A's
rows) or N (B's) is a multiple of 64 has nothing to pad there.  GPU time, in
turns, L2 flushed, median of ``--reps``; every output is checked against float64 on sampled rows.

    python3 benchmarks/stride_probe.py [--dtype float16] [--reps 10] [--b-col | --bt-variant L:F ... |
        --swap-variant L:F ...] MxNxK ...
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper, hopper_heuristic  # noqa: E402


def padded(x, rows_to: int = 64, extra: int = 0):
    """``x`` copied into a buffer whose rows hold a multiple of ``rows_to`` elements, plus
    ``extra``: a view."""
    cols = -(-x.shape[1] // rows_to) * rows_to + extra
    buf = cp.empty((x.shape[0], cols), dtype=x.dtype)
    view = buf[:, :x.shape[1]]
    view[...] = x
    return view


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", help="MxNxK")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--extra", type=int, default=0, help="elements added to every padded row")
    ap.add_argument("--bt-variant", action="append", default=[],
                    help="label:field=value,... (repeatable): only cuBLAS, hopper.gemm as a caller gets "
                         "it ('auto'), B^T* and these changes to B^T*'s config on the same K-major copy")
    ap.add_argument("--swap-variant", action="append", default=[],
                    help="label:field=value,... (repeatable): products gemm runs transposed (B^T A^T): "
                         "cuBLAS, hopper.gemm as a caller gets it ('auto'), the transposed product on "
                         "its config ('swapped') and on these changes to it")
    ap.add_argument("--swap-pad", action="store_true",
                    help="with --swap-variant: also the transposed product on its config with the same "
                         "values held in rows padded to 128 bytes: A's and B's ('swapped-pad'), A's "
                         "('swapped-padA'), B's ('swapped-padB')")
    ap.add_argument("--b-col", action="store_true",
                    help="B column-major (K-major, its rows of K off 128 bytes where K is off 64 "
                         "elements): the heuristic's config, the same without clusters, and static "
                         "2-CTA clusters 128 and 256 wide, all read in place; hopper.gemm as a "
                         "caller gets it, without EXACT_WIDTHS and with all exact widths")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {args.dtype}; GPU time, "
          f"median of {args.reps}, in turns", flush=True)
    if args.b_col:
        return b_col_clusters(args, rng)
    if args.bt_variant:
        return k_major_variants(args, rng)
    if args.swap_variant:
        return swap_variants(args, rng)
    for spec in args.cases:
        pc = h.probe_case(f"{spec}:{args.dtype}", rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        a_pad, b_pad = padded(pc.a, extra=args.extra), padded(pc.b, extra=args.extra)
        ops = {"in place": (pc.a, pc.b), "pad A": (a_pad, pc.b), "pad B": (pc.a, b_pad), "pad AB": (a_pad, b_pad)}
        anchors = ("cuBLAS", "cuBLAS AB") if args.extra else ("cuBLAS",)
        outs = {name: pc.poisoned() for name in (*anchors, *ops, "copy B", "pad B*", "B^T", "B^T*")}
        fns = {"cuBLAS": h.cublas_fn(pc.a, pc.b, args.dtype, outs["cuBLAS"])}
        if args.extra:
            fns["cuBLAS AB"] = h.cublas_fn(a_pad, b_pad, args.dtype, outs["cuBLAS AB"])
        for name, (a, b) in ops.items():
            fns[name] = (lambda a=a, b=b, out=outs[name]:
                         hopper.gemm(a, b, out=out, config=pc.config, as_dtype=pc.as_dtype))
        b_buf = padded(pc.b, extra=args.extra)

        def copy_b(out=outs["copy B"]):
            b_buf[...] = pc.b
            return hopper.gemm(pc.a, b_buf, out=out, config=pc.config, as_dtype=pc.as_dtype)
        fns["copy B"] = copy_b
        cfg_b = hopper.choose_config(m, n, k, args.dtype, hopper.device_sms(), **hopper.rows_flags([pc.a], [b_pad]))
        fns["pad B*"] = (lambda out=outs["pad B*"]:
                         hopper.gemm(pc.a, b_pad, out=out, config=cfg_b, as_dtype=pc.as_dtype))
        bt_buf = cp.empty((n, -(-k // 64) * 64 + args.extra), dtype=pc.b.dtype)
        bt = bt_buf[:, :k].T  # B's values, K-major
        hopper.transpose_copy(pc.b.T, bt_buf)
        cfg_t = hopper.choose_config(m, n, k, args.dtype, hopper.device_sms(), **hopper.rows_flags([pc.a], [bt]))

        def b_t(out=outs["B^T"]):
            hopper.transpose_copy(pc.b.T, bt_buf)
            return hopper.gemm(pc.a, bt, out=out, config=cfg_t, as_dtype=pc.as_dtype)
        fns["B^T"] = b_t
        fns["B^T*"] = (lambda out=outs["B^T*"]:
                       hopper.gemm(pc.a, bt, out=out, config=cfg_t, as_dtype=pc.as_dtype))
        pc.run_checked(fns, outs)
        ms = h.timed_interleaved(fns, args.reps)
        flops = 2.0 * m * n * k
        cells = " ".join(f"{name} {flops / t / 1e9:6.1f}" for name, t in ms.items())
        ratios = " ".join(f"{name} {ms['cuBLAS'] / ms[name]:.2f}" for name in (*anchors[1:], *ops, "copy B", "pad B*", "B^T", "B^T*"))
        print(f"  {spec:>16} TFLOP/s {cells} | x cuBLAS {ratios} | {pc.config} | pad B*: {cfg_b} | B^T: {cfg_t}", flush=True)
    return 0


def timed_configs(pc, args, anchor_b, b, cfgs: dict, others: dict | None = None) -> dict:
    """Median milliseconds by name, in turns: cuBLAS on ``pc.a`` and ``anchor_b``, each of ``others``
    (name: a function of its output buffer), then each config of ``cfgs`` on ``pc.a`` and ``b``;
    every output poisoned first and checked against float64 on sampled rows."""
    others = others or {}
    outs = {name: pc.poisoned() for name in ("cuBLAS", *others, *cfgs)}
    fns = {"cuBLAS": h.cublas_fn(pc.a, anchor_b, args.dtype, outs["cuBLAS"])}
    fns.update({name: functools.partial(fn, outs[name]) for name, fn in others.items()})
    for name, cfg in cfgs.items():
        fns[name] = (lambda cfg=cfg, out=outs[name]:
                     hopper.gemm(pc.a, b, out=out, config=cfg, as_dtype=pc.as_dtype))
    pc.run_checked(fns, outs)
    return h.timed_interleaved(fns, args.reps)


def k_major_variants(args, rng) -> int:
    """``--bt-variant``: B copied K-major before the timing ("B^T*", the heuristic's config for that
    layout) and the given changes to that config on the same copy, beside ``hopper.gemm`` on B in
    place as a caller gets it ("auto") and cuBLAS."""
    sms = hopper.device_sms()
    for spec in args.cases:
        pc = h.probe_case(f"{spec}:{args.dtype}", rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        bt = hopper._k_major_copy(cp, pc.b)
        cfg_t = hopper.choose_config(m, n, k, args.dtype, sms, **hopper.rows_flags([pc.a], [bt]))
        cfgs = {"B^T*": cfg_t}
        for v in args.bt_variant:
            label, cfg, _ = h.parse_variant(v, cfg_t)
            cfgs[label] = cfg
        ms = timed_configs(pc, args, pc.b, bt, cfgs,
                           {"auto": lambda out: hopper.gemm(pc.a, pc.b, out=out, as_dtype=pc.as_dtype)})
        ratios = " ".join(f"{name} {ms['cuBLAS'] / ms[name]:.2f}" for name in ("auto", *cfgs))
        print(f"  {spec:>16} cuBLAS {2.0 * m * n * k / ms['cuBLAS'] / 1e9:6.1f} TFLOP/s | x cuBLAS {ratios} | "
              f"B^T*: {cfg_t}", flush=True)
    return 0


def swap_variants(args, rng) -> int:
    """``--swap-variant``: a product ``hopper.gemm`` runs as B^T A^T into the output's transposed
    view (``_swap_config``): that transposed product on its own config ("swapped") and on the given
    changes to it, beside ``hopper.gemm`` as a caller gets it ("auto") and cuBLAS."""
    sms = hopper.device_sms()
    for spec in args.cases:
        pc = h.probe_case(f"{spec}:{args.dtype}", rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        direct = hopper.choose_config(m, n, k, args.dtype, sms, **hopper.rows_flags([pc.a], [pc.b]))
        base = hopper_heuristic._swap_config([pc.a], [pc.b], direct, pc.poisoned(), m, n, k, args.dtype, sms, False)
        if base is None:
            print(f"  {spec:>16} not run transposed: {direct}", flush=True)
            continue
        cfgs = {"swapped": base}
        for v in args.swap_variant:
            label, cfg, _ = h.parse_variant(v, base)
            cfgs[label] = cfg
        fns = {"auto": lambda out: hopper.gemm(pc.a, pc.b, out=out, as_dtype=pc.as_dtype)}
        for name, cfg in cfgs.items():
            fns[name] = (lambda out, cfg=cfg:
                         hopper.gemm(pc.b.T, pc.a.T, out=out.T, config=cfg, as_dtype=pc.as_dtype))
        if args.swap_pad:  # the same values on rows padded to 128 bytes: what the rows' offsets cost
            a_pad, b_pad = padded(pc.a), padded(pc.b)
            for name, (a, b) in {"swapped-pad": (a_pad, b_pad), "swapped-padA": (a_pad, pc.b),
                                 "swapped-padB": (pc.a, b_pad)}.items():
                fns[name] = (lambda out, a=a, b=b: hopper.gemm(b.T, a.T, out=out.T, config=base,
                                                               as_dtype=pc.as_dtype))
        ms = timed_configs(pc, args, pc.b, pc.b, {}, fns)
        ratios = " ".join(f"{name} {ms['cuBLAS'] / ms[name]:.2f}" for name in fns)
        print(f"  {spec:>16} cuBLAS {2.0 * m * n * k / ms['cuBLAS'] / 1e9:6.1f} TFLOP/s | x cuBLAS {ratios} | "
              f"swapped: {base}", flush=True)
    return 0


# every exact width the kernel has, with the stages its tests and CI build: "auto-all-exact"
ALL_EXACT = ((144, 5), (176, 4), (208, 4), (240, 3))


def b_col_clusters(args, rng) -> int:
    """``--b-col``: B held column-major, read in place by the heuristic's config, by the
    heuristic's config without its clusters (``OFF_ROWS_CLUSTERS`` empty) and by static 2-CTA
    clusters of 128 and 256 columns; and ``hopper.gemm`` as a caller gets it ("auto"), without
    ``EXACT_WIDTHS`` ("auto-no-exact") and with every exact width at any N ("auto-all-exact")."""
    sms = hopper.device_sms()
    for spec in args.cases:
        pc = h.probe_case(f"{spec}:{args.dtype}", rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        b = cp.ascontiguousarray(pc.b.T).T  # the same values, K contiguous
        heur = hopper.choose_config(m, n, k, args.dtype, sms, **hopper.rows_flags([pc.a], [b]))
        with mock.patch.object(hopper_heuristic, "OFF_ROWS_CLUSTERS", ()):
            prior = hopper.choose_config(m, n, k, args.dtype, sms, **hopper.rows_flags([pc.a], [b]))
        cfgs = {"heuristic": heur, "no clusters": prior}
        for width, stages in ((128, 6), (256, 4)):
            base = hopper.HopperConfig(input=heur.input, output=heur.output, epilogue=heur.epilogue)
            cfgs[f"c{width}"] = hopper_heuristic._static_width(base, width, stages, k).replace(cluster_m=2)
        def caller(out, **patch):  # hopper.gemm as a caller gets it, with these mgemm.hopper_heuristic constants
            with mock.patch.multiple(hopper_heuristic, **patch) if patch else contextlib.nullcontext():
                return hopper.gemm(pc.a, b, out=out, as_dtype=pc.as_dtype)
        callers = {"auto": caller, "auto-no-exact": functools.partial(caller, EXACT_WIDTHS=None),
                   "auto-all-exact": functools.partial(caller, EXACT_WIDTHS=ALL_EXACT, EXACT_MAX_N=1 << 30)}
        ms = timed_configs(pc, args, b, b, cfgs, callers)
        ratios = " ".join(f"{name} {ms['cuBLAS'] / ms[name]:.2f}" for name in (*callers, *cfgs))
        print(f"  {spec:>16} B col-major: cuBLAS {2.0 * m * n * k / ms['cuBLAS'] / 1e9:6.1f} TFLOP/s | "
              f"x cuBLAS {ratios} | {heur}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
