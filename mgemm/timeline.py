"""Where a Hopper kernel launch spends its time: the entries of ``hopper.gemm(timeline=True)``.

A launch with ``timeline=True`` runs a variant of the config that stamps every work unit, in each
consumer warpgroup, with the GPU's nanosecond timer (``%globaltimer``): when the warpgroup took the
unit from the producer, when its mainloop ended (the accumulators complete), and when it was done
with the unit (stream-K partial stored or tile fixed up, output written or its stores issued).
As each warpgroup leaves it logs one more entry (``tile == -1``): when its CTA started, when it
found no more units and when it left (after a pending stream-K reduction and its bulk stores).
Each entry is one row of ``FIELDS``.  This module is pure NumPy: it needs no GPU.

``summarize`` splits the warpgroups' time between the launch's first start and its last exit
into phases, which is what the question "when does a persistent kernel beat one CTA per tile,
and why" needs in numbers: setup before the first unit, mainloops, the work after each mainloop
(fix-up, epilogue), waits between units, the tail after the last unit, and idle time while other
CTAs still run (all of a warpgroup's time where it ran no unit: a pingpong CTA of one unit).
"""

from __future__ import annotations

import numpy as np

#: One entry: CTA, consumer warpgroup, tile (-1: the warpgroup's exit entry), k-iterations
#: [k_begin, k_end), and times in ns: taken, mainloop done, done; for a split unit, when its
#: partial was stored and released (else 0), and for a unit whose tile this warpgroup reduced with
#: the spread fix-up, when every contributor's partial was visible to it (else 0).  Exit entries:
#: CTA start, end of units, exit, when the warpgroup was set up and began to wait for its first
#: unit, and when the producer posted that unit.
FIELDS = ("cta", "wg", "tile", "k_begin", "k_end", "t_take", "t_mainloop", "t_done", "t_stored",
          "t_ready")

PHASES = ("setup", "mainloop", "after mainloop", "between units", "tail", "idle")


def _split(entries) -> tuple[np.ndarray, np.ndarray]:
    e = np.asarray(entries, dtype=np.int64).reshape(-1, len(FIELDS))
    return e[e[:, 2] >= 0], e[e[:, 2] < 0]


def units(entries, wg: int | None = 0) -> dict[int, list[tuple[int, int, int]]]:
    """CTA -> its units ``(tile, k_begin, k_end)`` in the order warpgroup ``wg`` took them, for
    comparison with ``mgemm.schedule.assignment`` (both cooperative warpgroups take every unit);
    ``wg=None``: every warpgroup's, in the order taken (pingpong warpgroups take every other
    unit, each when its turn comes)."""
    work, _ = _split(entries)
    if wg is not None:
        work = work[work[:, 1] == wg]
    out: dict[int, list[tuple[int, int, int]]] = {}
    for row in work[np.argsort(work[:, 5], kind="stable")]:
        out.setdefault(int(row[0]), []).append((int(row[2]), int(row[3]), int(row[4])))
    return out


def check(entries) -> list[str]:
    """What is inconsistent in a timeline (empty when nothing is): a unit whose stamps go back in
    time (its partial stored outside its mainloop's end and done, the tile's partials visible
    before its mainloop ended), a warpgroup without its exit entry or with two, units outside its
    CTA's start and exit."""
    work, exits = _split(entries)
    problems = []
    bad = (work[:, 5] > work[:, 6]) | (work[:, 6] > work[:, 7])
    for row in work[bad]:
        problems.append(f"unit {row.tolist()}: take <= mainloop end <= done does not hold")
    stored, ready = work[:, 8] != 0, work[:, 9] != 0
    bad = stored & ((work[:, 8] < work[:, 6]) | (work[:, 8] > work[:, 7]))
    for row in work[bad]:
        problems.append(f"unit {row.tolist()}: mainloop end <= partial stored <= done does not hold")
    for row in work[ready & (work[:, 9] < work[:, 6])]:
        problems.append(f"unit {row.tolist()}: partials visible before its own mainloop ended")
    seen: dict[tuple[int, int], np.ndarray] = {}
    for row in exits:
        key = (int(row[0]), int(row[1]))
        if key in seen:
            problems.append(f"CTA {key[0]} warpgroup {key[1]}: two exit entries")
        seen[key] = row
        if not row[5] <= row[6] <= row[7]:
            problems.append(f"exit {row.tolist()}: start <= end of units <= exit does not hold")
    missing = set()
    for row in work:
        key = (int(row[0]), int(row[1]))
        ex = seen.get(key)
        if ex is None:
            if key not in missing:
                problems.append(f"CTA {key[0]} warpgroup {key[1]}: units but no exit entry")
                missing.add(key)
        elif not (ex[5] <= row[5] and row[7] <= ex[6]):
            problems.append(f"unit {row.tolist()} outside its warpgroup's start {ex[5]} and end {ex[6]}")
    return problems


def summarize(entries) -> dict[str, float]:
    """Microseconds: the launch's span (first CTA start to last exit), how far the CTA starts and
    exits spread, per-phase totals summed over the consumer warpgroups (``PHASES``, which add up to
    warpgroups x span), the median mainloop per k-iteration and the median and largest time after
    a mainloop, and how long after its CTA's start (median) a warpgroup began to wait for its
    first unit and the producer posted it (the setup's two sides)."""
    work, exits = _split(entries)
    if len(exits) == 0:
        raise ValueError("no exit entries: not a timeline of a finished launch")
    t0, t1 = int(exits[:, 5].min()), int(exits[:, 7].max())
    us = 1e-3
    phase = dict.fromkeys(PHASES, 0.0)
    for row in exits:
        cta, wg, start, end_units, leave = (int(v) for v in row[[0, 1, 5, 6, 7]])
        mine = work[(work[:, 0] == cta) & (work[:, 1] == wg)]
        mine = mine[np.argsort(mine[:, 5], kind="stable")]
        phase["idle"] += (start - t0) + (t1 - leave)
        if not len(mine):  # a warpgroup with no unit (pingpong, one unit a CTA): idle throughout
            phase["idle"] += leave - start
            continue
        phase["setup"] += int(mine[0, 5]) - start
        phase["mainloop"] += float((mine[:, 6] - mine[:, 5]).sum())
        phase["after mainloop"] += float((mine[:, 7] - mine[:, 6]).sum())
        phase["between units"] += float((mine[1:, 5] - mine[:-1, 7]).sum()) + (end_units - int(mine[-1, 7]))
        phase["tail"] += leave - end_units
    k_iters = work[:, 4] - work[:, 3]
    loop = work[:, 6] - work[:, 5]
    per_k = loop[k_iters > 0] / k_iters[k_iters > 0]
    after = work[:, 7] - work[:, 6]
    out = {"span": (t1 - t0) * us,
           "start spread": float(exits[:, 5].max() - t0) * us,
           "exit spread": float(t1 - exits[:, 7].min()) * us,
           "warpgroups": float(len(exits)),
           "units": float(len(work)),
           "mainloop per k-iteration (median)": float(np.median(per_k)) * us if len(per_k) else 0.0,
           "after mainloop (median)": float(np.median(after)) * us if len(after) else 0.0,
           "after mainloop (max)": float(after.max()) * us if len(after) else 0.0}
    for name, col in (("waiting for unit 0 from (median)", 8), ("unit 0 posted at (median)", 9)):
        stamped = exits[exits[:, col] != 0]
        if len(stamped):
            out[name] = float(np.median(stamped[:, col] - stamped[:, 5])) * us
    for name, ns in phase.items():
        out[name] = ns * us
    return out


def format_summary(summary: dict[str, float]) -> str:
    """One line: the span, then each phase's share of warpgroups x span, then the rest."""
    total = summary["warpgroups"] * summary["span"] or 1.0
    shares = ", ".join(f"{name} {100 * summary[name] / total:.0f}%" for name in PHASES)
    rest = ", ".join(f"{k} {v:.2f} us" for k, v in summary.items()
                     if k not in PHASES and k not in ("span", "warpgroups", "units"))
    return (f"span {summary['span']:.1f} us over {summary['warpgroups']:.0f} warpgroups, "
            f"{summary['units']:.0f} unit entries: {shares}; {rest}")


__all__ = ["FIELDS", "PHASES", "check", "format_summary", "summarize", "units"]
