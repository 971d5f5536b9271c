"""Where the Hopper kernel's time goes on a product: its timeline (``hopper.gemm(timeline=True)``)
beside the launch's GPU time and cuBLAS's.

For each case, the heuristic's config (one CTA per tile where it picks clusters: the timeline does
not cover them) and each ``--variant`` (``label:field=value,...``, changes to that config;
``sms=N`` caps the CTAs) are timed in turns with cuBLAS (GPU time, median of --reps), then run once
more with the timeline on; ``mgemm.timeline.summarize`` splits the consumer warpgroups' time into
setup, mainloops, the work after each mainloop (fix-up, epilogue), waits between units, the tail
after the last unit and idle time. The timeline variant stamps with ``%globaltimer`` and may itself
run a little slower: its span is printed beside the plain launch's time.

    python3 benchmarks/timeline_probe.py [--reps 10] [--variant 's4:stages=4'] [--save DIR] [MxNxK:dtype ...]

``--save DIR`` writes each timeline to ``DIR/<case>-<label>.npz`` (``entries``: the rows of
``mgemm.timeline.FIELDS``; ``config``, ``us``: the plain launch's GPU time, ``cublas_us``) for
reading it unit by unit later.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import h  # noqa: E402  (benchmarks/kernels.py; puts the repository on sys.path)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper, timeline  # noqa: E402


DEFAULT_CASES = ["256x256x65536:float16", "128x128x131072:float16", "1024x2112x8192:float16",
                 "8192x8192x256:float16", "896x2432x8192:float16", "8192x8192x8192:float16"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=DEFAULT_CASES)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--save", type=Path, default=None, help="write each timeline here (.npz)")
    args = p.parse_args(argv)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    sms_all = hopper.device_sms()
    for spec in args.cases:
        pc = h.probe_case(spec, rng)
        m, n, k = pc.case.m, pc.case.n, pc.case.k
        base = pc.config
        if base.cluster_size > 1:
            base = base.replace(cluster_m=1, cluster_n=1)
        configs = {"heuristic": (base, None)}
        for v in args.variant:
            label, cfg, sms = h.parse_variant(v, base)
            configs[label] = (cfg, sms)
        outs = {name: cp.empty((m, n), dtype=pc.storage) for name in ["cuBLAS", *configs]}
        fns = {"cuBLAS": h.cublas_fn(pc.a, pc.b, pc.dtype, outs["cuBLAS"])}
        for name, (cfg, sms) in configs.items():
            fns[name] = (lambda cfg=cfg, sms=sms, out=outs[name]:
                         hopper.gemm(pc.a, pc.b, out=out, config=cfg, sms=sms, as_dtype=pc.as_dtype))
        ms = h.timed_interleaved(fns, args.reps)
        flops = 2.0 * m * n * k
        print(f"# {spec}: cuBLAS {ms['cuBLAS'] * 1e3:.1f} us ({flops / ms['cuBLAS'] / 1e9:.0f} TFLOP/s)",
              flush=True)
        for name, (cfg, sms) in configs.items():
            for _ in range(2):  # compile and warm the timeline variant
                _, entries = hopper.gemm(pc.a, pc.b, out=outs[name], config=cfg, sms=sms,
                                         as_dtype=pc.as_dtype, timeline=True)
            err = h.rel_err_sampled(outs[name], pc.a, pc.b, pc.dtype, rng)
            problems = timeline.check(entries)
            print(f"  {name}: {cfg}{f' sms={sms}' if sms else ''}: {ms[name] * 1e3:.1f} us "
                  f"(x cuBLAS {ms['cuBLAS'] / ms[name]:.2f}), err {err:.1e}", flush=True)
            print(f"    timeline: {timeline.format_summary(timeline.summarize(entries))}"
                  + (f"; INCONSISTENT: {problems[:3]}" if problems else ""), flush=True)
            if args.save:
                np.savez(args.save / f"{spec.replace(':', '-')}-{name}.npz", entries=cp.asnumpy(entries),
                         config=str(cfg), sms=sms or sms_all, us=ms[name] * 1e3,
                         cublas_us=ms["cuBLAS"] * 1e3)


if __name__ == "__main__":
    main()
