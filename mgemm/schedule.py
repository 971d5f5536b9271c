"""Tile orders shared by both levels of mgemm, and the Python mirror of the kernel's tile scheduler.

A grid of ``rows × cols`` output tiles (CTA tiles on a GPU, Dask blocks on a cluster) is walked in a
*grouped* order: bands of ``group`` rows are visited one after another, and inside a band the walk
goes down a column before moving right, so consecutive tiles share B column panels and, within a
band, A row panels.  ``kernels/tile_scheduler.cuh`` implements the same index function.

This module imports neither Dask nor CuPy.

>>> [grouped_tile(t, 4, 3, group=2) for t in range(6)]
[(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
"""

from __future__ import annotations


def grouped_tile(t: int, rows: int, cols: int, group: int, raster: str = "m") -> tuple[int, int]:
    """The (row, col) of the ``t``-th tile of the grouped order.

    ``raster="m"`` groups bands of rows (walk down, then right); ``raster="n"`` is the transpose:
    bands of ``group`` columns, walked along a row first.
    """
    if raster == "n":
        c, r = grouped_tile(t, cols, rows, group, "m")
        return r, c
    if raster != "m":
        raise ValueError(f"raster must be 'm' or 'n', got {raster!r}")
    if not 0 <= t < rows * cols:
        raise IndexError(f"tile {t} outside a {rows}x{cols} grid")
    group = max(1, min(group, rows))
    per_band = group * cols
    band, within = divmod(t, per_band)
    first = band * group
    height = min(rows - first, group)
    return first + within % height, within // height


def grouped_order(rows: int, cols: int, group: int, raster: str = "m") -> list[tuple[int, int]]:
    """Every tile of a ``rows × cols`` grid, in grouped order: ``grouped_tile`` of 0, 1, ...,
    band by band.

    >>> grouped_order(3, 2, 2) == [grouped_tile(t, 3, 2, 2) for t in range(6)]
    True
    """
    if raster == "n":
        return [(r, c) for c, r in grouped_order(cols, rows, group, "m")]
    if raster != "m":
        raise ValueError(f"raster must be 'm' or 'n', got {raster!r}")
    group = max(1, min(group, rows))
    order = []
    for first in range(0, rows, group):  # a band of `height` rows, walked down then right
        height = min(rows - first, group)
        order += [(first + within % height, within // height) for within in range(height * cols)]
    return order


# --- The Python mirror of kernels/tile_scheduler.cuh ---------------------------------------------
#
# A *work unit* is ``(tile, k_begin, k_end)``: tile ``tile`` of the grouped order over the
# k-iterations ``[k_begin, k_end)`` (one k-iteration = one ``tile_k`` slice of K).  For a policy
# and a problem, ``assignment`` returns, per CTA, the units that CTA executes, in the order it
# executes them: exactly what the kernel's debug record shows.

POLICIES = ("per_tile", "static", "dynamic", "streamk")


def tile_grid(m: int, n: int, k: int, tile_m: int, tile_n: int, tile_k: int) -> tuple[int, int, int]:
    """``(rows, cols, k_iters)`` of the tile grid of an ``m × n × k`` product.

    >>> tile_grid(1000, 300, 70, 128, 128, 32)
    (8, 3, 3)
    """
    return -(-m // tile_m), -(-n // tile_n), -(-k // tile_k)


def streamk_tiles(tiles: int, grid: int, k_iters: int, waves: int = 1) -> int:
    """How many of the last tiles the stream-K tail splits over ``grid`` CTAs.

    None when the tiles fill whole waves (or there is no K to split); all of them when there is
    less than one wave; else the partial last wave plus ``waves`` full waves before it (as many as
    there are).  With one (the default) each CTA gets between one and two tiles' worth of
    k-iterations and none gets a sliver; with none, the CTAs run whole tiles first and then share
    the few left over, each a sliver of one of them (data-parallel waves plus a stream-K tail).

    >>> streamk_tiles(264, 132, 8), streamk_tiles(64, 132, 8), streamk_tiles(140, 132, 8)
    (0, 64, 140)
    >>> streamk_tiles(140, 132, 8, waves=0), streamk_tiles(400, 132, 8, waves=5)
    (8, 400)
    """
    if waves < 0:
        raise ValueError(f"waves must be >= 0, got {waves}")
    if k_iters == 0 or tiles % grid == 0:
        return 0
    if tiles < grid:
        return tiles
    return min(tiles, tiles % grid + waves * grid)


def wave_fill(tiles: int, sms: int) -> float:
    """The share of the SMs' slots over the launch's whole waves that hold a tile: ``tiles`` over
    ``sms`` times the waves they take (1.0 when they fill whole waves).

    >>> wave_fill(132, 132), round(wave_fill(133, 132), 3), round(wave_fill(120, 132), 3)
    (1.0, 0.504, 0.909)
    """
    return tiles / (-(-tiles // sms) * sms)


def check_sk_waves(sk_waves: int) -> None:
    """The ``sk_waves`` values both kernels' configs take (``streamk_tiles``'s ``waves``): 1, the
    partial last wave and one full wave before it split; 0, the partial wave alone."""
    if sk_waves not in (0, 1):
        raise ValueError(f"sk_waves must be 0 or 1, got {sk_waves}")


def launch_grid(policy: str, tiles: int, slots: int, sk_tiles: int = 0) -> int:
    """CTAs launched: ``tiles`` for per_tile; else the resident slots (SMs × occupancy), capped by
    the tile count unless a stream-K tail spreads work over every slot."""
    if policy == "per_tile":
        return tiles
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if policy == "streamk" and sk_tiles:
        return slots
    return max(1, min(slots, tiles))


def streamk_begin(cta: int, grid: int, sk_tiles: int, k_iters: int) -> int:
    """First global stream-K iteration of ``cta`` (``sk_begin`` in the kernel)."""
    return sk_tiles * k_iters * cta // grid


def assignment(policy: str, rows: int, cols: int, k_iters: int, grid: int, *,
               sk_tiles: int = 0) -> list[list[tuple[int, int, int]]]:
    """CTA -> its work units ``(tile, k_begin, k_end)`` in execution order.

    ``dynamic`` has no fixed assignment (see ``work_units``).

    >>> assignment("static", 2, 2, 4, 3)
    [[(0, 0, 4), (3, 0, 4)], [(1, 0, 4)], [(2, 0, 4)]]
    >>> assignment("streamk", 1, 1, 4, 2, sk_tiles=1)
    [[(0, 0, 2)], [(0, 2, 4)]]
    """
    tiles = rows * cols
    if policy == "per_tile":
        return [[(t, 0, k_iters)] for t in range(tiles)]
    if policy == "static":
        return [[(t, 0, k_iters) for t in range(b, tiles, grid)] for b in range(grid)]
    if policy == "dynamic":
        raise ValueError("the dynamic policy has no fixed assignment; use work_units()")
    if policy != "streamk":
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    dp_tiles = tiles - sk_tiles
    out = []
    for b in range(grid):
        units = [(t, 0, k_iters) for t in range(b, dp_tiles, grid)]
        begin = streamk_begin(b, grid, sk_tiles, k_iters)
        cur = streamk_begin(b + 1, grid, sk_tiles, k_iters)
        while cur > begin:  # from the end of the range: contributor first, owner last
            t = (cur - 1) // k_iters
            start = t * k_iters
            kb = max(begin, start)
            units.append((dp_tiles + t, kb - start, cur - start))
            cur = kb
        out.append(units)
    return out


def from_record(rows: list, grid: int) -> list[list[tuple[int, int, int]]]:
    """A debug kernel's record (rows ``(cta, tile, k_begin, k_end)``, in execution order per CTA)
    in the shape ``assignment`` returns, so the two compare with ``==``.

    >>> from_record([(1, 0, 0, 4), (0, 1, 0, 4), (1, 2, 0, 2)], 2)
    [[(1, 0, 4)], [(0, 0, 4), (2, 0, 2)]]
    """
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(grid)]
    for cta, tile, k_begin, k_end in rows:
        out[cta].append((tile, k_begin, k_end))
    return out


def work_units(policy: str, rows: int, cols: int, k_iters: int, grid: int, *,
               sk_tiles: int = 0) -> set[tuple[int, int, int]]:
    """The set of work units a launch executes, whichever CTA runs each (all the dynamic policy
    fixes)."""
    if policy == "dynamic":
        return {(t, 0, k_iters) for t in range(rows * cols)}
    return {u for units in assignment(policy, rows, cols, k_iters, grid, sk_tiles=sk_tiles)
            for u in units}


def streamk_fixups(rows: int, cols: int, k_iters: int, grid: int, sk_tiles: int) -> dict[int, list[int]]:
    """For each split tile, the CTAs whose partials its owner adds, in the order it adds them
    (nearest lower CTA first): the fixed order that makes stream-K bitwise reproducible."""
    dp_tiles = rows * cols - sk_tiles
    fixups: dict[int, list[int]] = {}
    for b, units in enumerate(assignment("streamk", rows, cols, k_iters, grid, sk_tiles=sk_tiles)):
        for tile, kb, ke in units:
            if kb == 0 or ke != k_iters:
                continue
            start = (tile - dp_tiles) * k_iters
            order = []
            for c in range(b - 1, -1, -1):
                cb = streamk_begin(c, grid, sk_tiles, k_iters)
                if cb == streamk_begin(c + 1, grid, sk_tiles, k_iters):
                    continue
                order.append(c)
                if cb <= start:
                    break
            fixups[tile] = order
    return fixups


def streamk_cta_of(x: int, grid: int, sk_tiles: int, k_iters: int) -> int:
    """The CTA whose stream-K range holds global iteration ``x`` (``cta_of`` in the kernel): the
    largest c with ``streamk_begin(c) <= x``.

    >>> [streamk_cta_of(x, 3, 1, 8) for x in range(8)]
    [0, 0, 1, 1, 1, 2, 2, 2]
    """
    sk_iters = sk_tiles * k_iters
    return ((x + 1) * grid + sk_iters - 1) // sk_iters - 1


def _spread_unit(c: int, ts: int, kb: int, k_iters: int, grid: int,
                 sk_tiles: int) -> tuple[int, list[int], int, bool]:
    """One split unit of CTA ``c`` in the spread fix-up, as ``SpreadSlots`` in
    kernels/gemm_hopper.cu computes it: ``(slot written, slots read in contributor order, this
    CTA's rank among them, whether the unit starts the CTA's range)``; ``ts`` is the first global
    stream-K iteration of the unit's tile, ``kb`` the unit's first iteration within it."""
    def begin(cta: int) -> int:
        return streamk_begin(cta, grid, sk_tiles, k_iters)

    te = ts + k_iters
    ends_range = ts + kb == begin(c)
    if sk_tiles * k_iters < grid:  # one iteration per non-empty range: slot = its global index
        return ts + kb, list(range(ts, te)), kb, ends_range
    lo = streamk_cta_of(ts, grid, sk_tiles, k_iters)
    last = streamk_cta_of(te - 1, grid, sk_tiles, k_iters)
    lower = ends_range and begin(c + 1) > te
    read = [2 * d for d in range(lo, last)] + [2 * last + int(begin(last + 1) > te)]
    return 2 * c + int(lower), read, c - lo, ends_range


def _split_units(rows: int, cols: int, k_iters: int, grid: int, sk_tiles: int):
    """``(cta, tile, tile's first global stream-K iteration, unit's first iteration in it)`` of
    every split stream-K unit, each CTA's in the order the kernel runs them."""
    dp_tiles = rows * cols - sk_tiles
    for c, units in enumerate(assignment("streamk", rows, cols, k_iters, grid, sk_tiles=sk_tiles)):
        for tile, kb, ke in units:
            if not (kb == 0 and ke == k_iters):
                yield c, tile, (tile - dp_tiles) * k_iters, kb


def spread_slots(rows: int, cols: int, k_iters: int, grid: int,
                 sk_tiles: int) -> tuple[dict[tuple[int, int], int], dict[int, list[int]]]:
    """The workspace slots of the Hopper kernel's spread stream-K fix-up (``sk_reduce="spread"``,
    ``SpreadSlots`` in kernels/gemm_hopper.cu): ``(written, read)``, where ``written`` maps each
    split unit ``(cta, tile)`` to the slot its partial goes to and ``read`` maps each split tile to
    the slots every contributor adds, in the order it adds them.

    CTA c writes its first split unit to slot 2c and, when its range runs on past the start of
    the tile of its last unit, that one to 2c + 1; with fewer stream-K iterations than CTAs each
    range is one iteration, written to the slot of that iteration's global index.

    >>> spread_slots(1, 2, 4, 3, 2)  # 8 iterations over 3 CTAs: [0, 2), [2, 5), [5, 8)
    ({(0, 0): 0, (1, 1): 2, (1, 0): 3, (2, 1): 4}, {0: [0, 3], 1: [2, 4]})
    """
    written: dict[tuple[int, int], int] = {}
    read: dict[int, list[int]] = {}
    for c, tile, ts, kb in _split_units(rows, cols, k_iters, grid, sk_tiles):
        written[(c, tile)], read[tile], _, _ = _spread_unit(c, ts, kb, k_iters, grid, sk_tiles)
    return written, read


def spread_reductions(rows: int, cols: int, k_iters: int, grid: int,
                      sk_tiles: int) -> list[list[tuple[int, int, int]]]:
    """What each CTA reduces in the spread stream-K fix-up, in its order: ``(tile, rank, count)``,
    the CTA's share being the ``rank``-th of ``count`` equal parts of the tile's elements.

    Mirrors the consumer loop of kernels/gemm_hopper.cu: a CTA stores every split unit's partial;
    a split unit that does not start the CTA's range is held back (its range is walked from the
    end, so the unit that starts it comes last) and reduced right before the one that does, or
    when the CTA runs out of units (a range ending on a whole tile).

    >>> spread_reductions(1, 2, 4, 3, 2)  # 8 iterations over 3 CTAs: [0, 2), [2, 5), [5, 8)
    [[(0, 0, 2)], [(1, 0, 2), (0, 1, 2)], [(1, 1, 2)]]
    """
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(grid)]
    pending: dict[int, tuple[int, int, int]] = {}
    for c, tile, ts, kb in _split_units(rows, cols, k_iters, grid, sk_tiles):
        _, read, rank, ends_range = _spread_unit(c, ts, kb, k_iters, grid, sk_tiles)
        share = (tile, rank, len(read))
        if not ends_range:
            pending[c] = share
            continue
        out[c] += ([pending.pop(c)] if c in pending else []) + [share]
    for c, share in pending.items():  # out of units with a split tile held back
        out[c].append(share)
    return out
