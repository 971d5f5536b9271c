"""Per-label summary of ``cublas_census.py`` output: for each label ("auto", "hopper", a
variant), the geometric mean of its ratios to cuBLAS over the shapes where it ran, how many shapes
that is, and its weakest shapes.  Ratios are recomputed from the printed microseconds (cuBLAS's
over the label's, in the same turns), not from the two-decimal column.

"auto" is what a caller of ``hopper.gemm`` gets (the heuristic's config and ``route``: the
transposed product, a K-major copy of B, two bands of rows); "hopper" is the heuristic's config
launched as given, without the route.  Numbers that speak for mgemm are the "auto" rows.

    python3 benchmarks/census_summary.py FILE... [--weakest 4] [--against auto]

With ``--against LABEL`` each other label is also counted against that one, shape by shape
(``versus``: ahead or behind by more than ``LEVEL``).

>>> rows = parse(["    64x64x64 cuBLAS    10.00 us  1.0 TFLOP/s",
...               "    64x64x64       auto    20.00 us  0.5 TFLOP/s x cuBLAS 0.50 | heuristic",
...               "    64x64x64     hopper launches HopperConfig(tile_n=128)",
...               "    8x8x8 cuBLAS    10.00 us  1.0 TFLOP/s",
...               "    8x8x8       auto     5.00 us  2.0 TFLOP/s x cuBLAS 2.00 | heuristic"])
>>> rows["auto"]
{'64x64x64': 0.5, '8x8x8': 2.0}
>>> round(statistics.geometric_mean(rows["auto"].values()), 6)
1.0
>>> versus({"a": 0.80, "b": 1.00, "c": 0.90}, {"a": 0.90, "b": 1.003, "c": 0.85})
(1, 1, 3)
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict
from typing import Iterable

_TIMED = re.compile(r"^\s*(\d+x\d+x\d+)\s+(\S+)\s+([0-9.]+) us\s")


def parse(lines: Iterable[str]) -> dict[str, dict[str, float]]:
    """{label: {shape: cuBLAS time / label time}} from census lines; a shape's cuBLAS row comes
    before its labels' rows, as ``cublas_census.py`` prints them."""
    cublas: dict[str, float] = {}
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for line in lines:
        hit = _TIMED.match(line)
        if not hit:
            continue
        shape, label, us = hit.group(1), hit.group(2), float(hit.group(3))
        if label == "cuBLAS":
            cublas[shape] = us
        elif shape in cublas and us > 0:
            out[label][shape] = cublas[shape] / us
    return dict(out)


LEVEL = 0.005  # ratios to cuBLAS this close count as level (``versus``)


def versus(ratios: dict[str, float], base: dict[str, float]) -> tuple[int, int, int]:
    """(ahead, behind, shapes) of ``ratios`` against ``base`` over the shapes both ran."""
    both = [s for s in ratios if s in base]
    ahead = sum(ratios[s] > base[s] + LEVEL for s in both)
    behind = sum(ratios[s] < base[s] - LEVEL for s in both)
    return ahead, behind, len(both)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--weakest", type=int, default=4)
    ap.add_argument("--against", default=None, help="count each label ahead of / behind this one")
    args = ap.parse_args()
    for path in args.files:
        with open(path) as f:
            rows = parse(f)
        print(f"# {path}: geomean x cuBLAS by label (shapes), weakest first")
        for label, ratios in rows.items():
            weak = sorted(ratios.items(), key=lambda kv: kv[1])[: args.weakest]
            print(f"  {label:>11} {statistics.geometric_mean(ratios.values()):.3f} ({len(ratios)})  "
                  + ", ".join(f"{s} {r:.2f}" for s, r in weak))
        base = rows.get(args.against) if args.against else None
        for label, ratios in rows.items() if base else ():
            if label != args.against:
                ahead, behind, count = versus(ratios, base)
                print(f"  {label:>11} against {args.against}: ahead {ahead}, behind {behind} of {count}")


if __name__ == "__main__":
    main()
