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
    """Every tile of a ``rows × cols`` grid, in grouped order."""
    return [grouped_tile(t, rows, cols, group, raster) for t in range(rows * cols)]
