"""Summarize an Nsight Compute source page (``ncu -i rep --page source --csv --print-source sass``):
stall samples grouped by SASS opcode, and the instructions with the most samples.

    python3 benchmarks/ncu_stalls.py sass.csv [--top 40]

Column names differ between Nsight Compute versions, so columns are found by substring: the
instruction text ("Source"), its address, the all-samples and not-issued stall-sampling counts and
the executed-instruction count; any per-reason stall columns are reported for the top lines.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections import defaultdict


def _num(s: str) -> float:
    try:
        return float(s.replace(",", "")) if s not in ("", None) else 0.0
    except ValueError:
        return 0.0


def _col(header: list[str], *needles: str) -> int | None:
    for i, h in enumerate(header):
        if all(n.lower() in h.lower() for n in needles):
            return i
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args(argv)
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    # the header is the first row naming the instruction text
    start = next((i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r)), None)
    if start is None:
        print("no header with a 'Source' column; first lines:", rows[:3])
        return 1
    header = rows[start]
    data = rows[start + 1:]
    print("columns:", " | ".join(header))
    src = header.index(next(c for c in header if c.strip() == "Source"))
    addr = _col(header, "address")
    samples = _col(header, "stall sampling", "all")
    if samples is None:
        samples = _col(header, "samples")
    not_issued = _col(header, "not-issued") or _col(header, "not issued")
    executed = _col(header, "instructions executed")
    reasons = [i for i, h in enumerate(header) if h.lower().startswith("stall_") or "stall " in h.lower()
               and i not in (samples, not_issued)]
    if samples is None:
        print("no stall-sampling column")
        return 1
    total = sum(_num(r[samples]) for r in data if len(r) > samples) or 1.0
    by_op = defaultdict(lambda: [0.0, 0.0, 0])
    for r in data:
        if len(r) <= samples:
            continue
        text = r[src].strip()
        m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+(\.[A-Z0-9_]+)?)", text)
        op = m.group(2) if m else text[:16]
        by_op[op][0] += _num(r[samples])
        by_op[op][1] += _num(r[executed]) if executed is not None else 0
        by_op[op][2] += 1
    print(f"\nstall samples by opcode (total {total:.0f}):")
    print(f"{'opcode':24} {'samples':>10} {'share':>7} {'executed':>14} {'lines':>6}")
    for op, (s, e, n) in sorted(by_op.items(), key=lambda kv: -kv[1][0])[:30]:
        print(f"{op:24} {s:10.0f} {s / total:7.1%} {e:14.0f} {n:6d}")
    print(f"\ntop {args.top} instructions by samples:")
    data.sort(key=lambda r: -_num(r[samples]) if len(r) > samples else 0)
    for r in data[:args.top]:
        extra = ""
        if reasons:
            parts = sorted(((header[i], _num(r[i])) for i in reasons if i < len(r) and _num(r[i]) > 0),
                           key=lambda kv: -kv[1])[:4]
            extra = "  " + ", ".join(f"{h}={v:.0f}" for h, v in parts)
        a = r[addr] if addr is not None else ""
        ni = f" ni={_num(r[not_issued]):.0f}" if not_issued is not None else ""
        print(f"{a:>8} {_num(r[samples]):8.0f}{ni}  {r[src].strip()[:70]}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
