"""CPU tests of the tile scheduler's Python mirror (mgemm/schedule.py): coverage, balance, and the
index-function semantics that kernels/tile_scheduler.cuh implements."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgemm import schedule

SHAPES = [(1, 1, 1), (1, 7, 3), (5, 3, 10), (8, 17, 33), (16, 16, 4), (3, 50, 1), (12, 11, 64)]
GRIDS = [1, 2, 7, 16, 132, 264]


def _covered(policy, rows, cols, k_iters, grid, sk):
    """Count of each (tile, k-iteration) over every unit of the launch."""
    counts = Counter()
    for tile, kb, ke in schedule.work_units(policy, rows, cols, k_iters, grid, sk_tiles=sk):
        for k in range(kb, ke):
            counts[tile, k] += 1
    return counts


def _launch(policy, rows, cols, k_iters, slots, waves=1):
    tiles = rows * cols
    sk = schedule.streamk_tiles(tiles, slots, k_iters, waves) if policy == "streamk" else 0
    return schedule.launch_grid(policy, tiles, slots, sk), sk


@pytest.mark.parametrize("policy", [*schedule.POLICIES, "streamk-dp"])
@pytest.mark.parametrize("rows,cols,k_iters", SHAPES)
@pytest.mark.parametrize("slots", GRIDS)
def test_every_tile_and_k_iteration_exactly_once(policy, rows, cols, k_iters, slots):
    # "streamk-dp": stream-K splitting only the partial last wave (sk_waves=0)
    waves = 0 if policy == "streamk-dp" else 1
    policy = policy.removesuffix("-dp")
    grid, sk = _launch(policy, rows, cols, k_iters, slots, waves)
    counts = _covered(policy, rows, cols, k_iters, grid, sk)
    expected = {(t, k) for t in range(rows * cols) for k in range(k_iters)}
    assert set(counts) == expected
    assert set(counts.values()) <= {1}


@pytest.mark.parametrize("policy", ["per_tile", "static", "streamk", "streamk-dp"])
@pytest.mark.parametrize("rows,cols,k_iters", SHAPES)
@pytest.mark.parametrize("slots", GRIDS)
def test_units_are_disjoint_and_nonempty_per_tile_whole(policy, rows, cols, k_iters, slots):
    waves = 0 if policy == "streamk-dp" else 1
    policy = policy.removesuffix("-dp")
    grid, sk = _launch(policy, rows, cols, k_iters, slots, waves)
    plan = schedule.assignment(policy, rows, cols, k_iters, grid, sk_tiles=sk)
    assert len(plan) == grid
    units = [u for cta in plan for u in cta]
    assert len(units) == len(set(units))
    for tile, kb, ke in units:
        assert 0 <= tile < rows * cols
        assert 0 <= kb <= ke <= k_iters
        assert kb < ke or k_iters == 0
        if tile < rows * cols - sk:  # data-parallel tiles are never split
            assert (kb, ke) == (0, k_iters)


@pytest.mark.parametrize("rows,cols,k_iters", SHAPES)
@pytest.mark.parametrize("slots", GRIDS)
def test_static_balance(rows, cols, k_iters, slots):
    grid, _ = _launch("static", rows, cols, k_iters, slots)
    per_cta = [len(u) for u in schedule.assignment("static", rows, cols, k_iters, grid)]
    assert max(per_cta) - min(per_cta) <= 1
    assert grid == min(slots, rows * cols)


@pytest.mark.parametrize("rows,cols,k_iters", SHAPES + [(11, 13, 40), (33, 8, 128)])
@pytest.mark.parametrize("slots", GRIDS)
def test_streamk_balance_in_iterations(rows, cols, k_iters, slots):
    grid, sk = _launch("streamk", rows, cols, k_iters, slots)
    plan = schedule.assignment("streamk", rows, cols, k_iters, grid, sk_tiles=sk)
    work = [sum(ke - kb for _, kb, ke in units) for units in plan]
    dp = [sum(1 for t, _, _ in units if t < rows * cols - sk) for units in plan]
    assert max(dp) - min(dp) <= 1
    sk_work = [w - d * k_iters for w, d in zip(work, dp)]
    assert max(sk_work) - min(sk_work) <= 1  # the split is even to one iteration


def test_streamk_contributors_come_before_owners_and_fixups_are_ordered():
    rows, cols, k_iters, slots = 9, 15, 37, 132
    grid, sk = _launch("streamk", rows, cols, k_iters, slots)
    plan = schedule.assignment("streamk", rows, cols, k_iters, grid, sk_tiles=sk)
    for units in plan:
        split = [(t, kb, ke) for t, kb, ke in units if (kb, ke) != (0, k_iters)]
        contributors = [i for i, (t, kb, ke) in enumerate(split) if ke < k_iters]
        assert len(contributors) <= 1 and (not contributors or contributors[0] == 0)
    fixups = schedule.streamk_fixups(rows, cols, k_iters, grid, sk)
    owners = {t: b for b, units in enumerate(plan) for t, kb, ke in units if ke == k_iters and kb > 0}
    assert set(fixups) == set(owners)
    for tile, order in fixups.items():
        assert order == sorted(order, reverse=True) and all(c < owners[tile] for c in order)
        # the owner's range plus its contributors' cover the tile once
        pieces = sorted((kb, ke) for units in plan for t, kb, ke in units if t == tile)
        assert pieces[0][0] == 0 and pieces[-1][1] == k_iters
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
        assert len(order) == len(pieces) - 1


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 140), st.integers(1, 12), st.integers(1, 12), st.integers(4, 70), st.integers(0, 1))
def test_spread_slots_never_collide_and_each_tile_reads_what_its_units_wrote(grid, rows, cols, k_iters, waves):
    """The spread fix-up's slots (the mirror of kernels/gemm_hopper.cu's SpreadSlots): no two
    split units write one slot (a CTA's second split unit must not overwrite its first, which
    others may still be adding), every slot lies inside the 2 x grid workspace and its flags, and
    each split tile's contributors read exactly the slots its units wrote."""
    tiles = rows * cols
    sk = schedule.streamk_tiles(tiles, grid, k_iters, waves) or tiles
    written, read = schedule.spread_slots(rows, cols, k_iters, grid, sk)
    assert len(set(written.values())) == len(written)
    assert all(0 <= s < 2 * grid for s in written.values())
    for tile, slots in read.items():
        assert sorted(slots) == sorted(s for (c, t), s in written.items() if t == tile)
    assert set(read) == {t for _, t in written}
    for x in range(0, sk * k_iters, max(1, sk * k_iters // 50)):  # cta_of is the kernel's formula
        c = schedule.streamk_cta_of(x, grid, sk, k_iters)
        assert schedule.streamk_begin(c, grid, sk, k_iters) <= x < schedule.streamk_begin(c + 1, grid, sk, k_iters)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 140), st.integers(1, 12), st.integers(1, 12), st.integers(4, 70), st.integers(0, 1))
def test_spread_reductions_cover_every_split_tile_once(grid, rows, cols, k_iters, waves):
    """In the spread fix-up every contributor of a split tile reduces its own share of it, once,
    and the shares of a tile's contributors are all of its parts: no element is left unwritten
    (a CTA whose range ends on a whole tile still reduces the split tile it held back) and none
    is written twice."""
    tiles = rows * cols
    sk = schedule.streamk_tiles(tiles, grid, k_iters, waves) or tiles
    written, read = schedule.spread_slots(rows, cols, k_iters, grid, sk)
    reductions = schedule.spread_reductions(rows, cols, k_iters, grid, sk)
    shares: dict[int, list[int]] = {}
    for c, mine in enumerate(reductions):
        assert sorted(t for t, _, _ in mine) == sorted(t for (d, t) in written if d == c)
        for tile, rank, count in mine:
            assert count == len(read[tile])
            shares.setdefault(tile, []).append(rank)
    assert set(shares) == set(read)
    for tile, ranks in shares.items():
        assert sorted(ranks) == list(range(len(read[tile]))), tile


def test_streamk_tiles_rule():
    assert schedule.streamk_tiles(264, 132, 10) == 0  # whole waves
    assert schedule.streamk_tiles(100, 132, 10) == 100  # less than a wave: all split
    assert schedule.streamk_tiles(140, 132, 10) == 140  # 8 over one wave: that wave + 8
    assert schedule.streamk_tiles(140, 132, 0) == 0  # no K to split
    assert schedule.streamk_tiles(140, 132, 10, waves=0) == 8  # whole tiles first, 8 split
    assert schedule.streamk_tiles(100, 132, 10, waves=0) == 100
    with pytest.raises(ValueError):
        schedule.streamk_tiles(140, 132, 10, waves=-1)
    assert schedule.launch_grid("streamk", 100, 132, 100) == 132
    assert schedule.launch_grid("static", 100, 132) == 100
    assert schedule.launch_grid("per_tile", 1000, 132) == 1000


def _cpp_grouped_tile_m(t, rows, cols, group):
    """Line-for-line transcription of grouped_tile_m in kernels/tile_scheduler.cuh."""
    group = group if group < rows else rows
    group = group if group > 1 else 1
    per_band = group * cols
    band, within = t // per_band, t % per_band
    first = band * group
    height = rows - first if rows - first < group else group
    return first + within % height, within // height


def _cpp_streamk_units(b, grid, rows, cols, k_iters, sk):
    """Transcription of StreamKScheduler::next (kernels/tile_scheduler.cuh), C++ integer math."""
    tiles = rows * cols
    dp = tiles - sk
    units, nxt = [], b
    sk_iters = sk * k_iters
    begin, cur = sk_iters * b // grid, sk_iters * (b + 1) // grid
    while True:
        if nxt < dp:
            units.append((nxt, 0, k_iters))
            nxt += grid
            continue
        if cur <= begin:
            return units
        t = (cur - 1) // k_iters
        ts = t * k_iters
        kb = max(begin, ts)
        units.append((dp + t, kb - ts, cur - ts))
        cur = kb


@pytest.mark.parametrize("rows,cols", [(1, 1), (4, 3), (7, 9), (16, 5), (3, 20)])
@pytest.mark.parametrize("group", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("raster", ["m", "n"])
def test_mirror_index_function_matches_cpp(rows, cols, group, raster):
    order = schedule.grouped_order(rows, cols, group, raster)
    assert sorted(order) == [(r, c) for r in range(rows) for c in range(cols)]
    for t, rc in enumerate(order):
        if raster == "m":
            assert rc == _cpp_grouped_tile_m(t, rows, cols, group)
        else:
            c, r = _cpp_grouped_tile_m(t, cols, rows, group)
            assert rc == (r, c)


@pytest.mark.parametrize("rows,cols,k_iters", SHAPES + [(9, 15, 37)])
@pytest.mark.parametrize("slots", GRIDS)
def test_mirror_streamk_matches_cpp_transcription(rows, cols, k_iters, slots):
    grid, sk = _launch("streamk", rows, cols, k_iters, slots)
    plan = schedule.assignment("streamk", rows, cols, k_iters, grid, sk_tiles=sk)
    assert plan == [_cpp_streamk_units(b, grid, rows, cols, k_iters, sk) for b in range(grid)]


def test_kernel_source_has_the_same_index_function():
    """The C++ must keep the statements the transcription above copies."""
    from pathlib import Path
    src = (Path(__file__).resolve().parent.parent / "kernels" / "tile_scheduler.cuh").read_text()
    for line in ("const int per_band = group * cols;",
                 "const int band = t / per_band, within = t % per_band;",
                 "r = first + within % height;",
                 "c = within / height;",
                 "const long long kb = begin > ts ? begin : ts;",
                 "return sk_iters * cta / ctas;"):
        assert line in src, line


@pytest.mark.parametrize("rows,cols", [(1, 1), (4, 3), (7, 9), (3, 20)])
@pytest.mark.parametrize("group", [0, 1, 2, 3, 64])
@pytest.mark.parametrize("raster", ["m", "n"])
def test_grouped_tile_is_the_grouped_order(rows, cols, group, raster):
    order = schedule.grouped_order(rows, cols, group, raster)
    assert [schedule.grouped_tile(t, rows, cols, group, raster) for t in range(rows * cols)] == order
    for t in (-1, rows * cols):
        with pytest.raises(IndexError):
            schedule.grouped_tile(t, rows, cols, group, raster)


def test_grouped_order_bands_rows_for_m_and_columns_for_n():
    assert schedule.grouped_order(3, 2, 2, "m") == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
    assert schedule.grouped_order(2, 3, 2, "n") == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 2)]
    for bad in (lambda: schedule.grouped_order(2, 2, 1, "k"),
                lambda: schedule.grouped_tile(0, 2, 2, 1, "k")):
        with pytest.raises(ValueError, match="raster"):
            bad()


def test_streamk_tiles_never_exceed_the_tiles_and_sk_waves_are_checked():
    assert schedule.streamk_tiles(400, 132, 8, waves=5) == 400  # 4 + 5 waves: more than there are
    assert schedule.streamk_tiles(700, 132, 8, waves=5) == 700 % 132 + 5 * 132
    for ok in (0, 1):
        schedule.check_sk_waves(ok)
    for bad in (-1, 2):
        with pytest.raises(ValueError, match="sk_waves"):
            schedule.check_sk_waves(bad)


def test_wave_fill():
    assert schedule.wave_fill(132, 132) == 1.0 and schedule.wave_fill(264, 132) == 1.0
    assert schedule.wave_fill(133, 132) == pytest.approx(133 / 264)
    assert schedule.wave_fill(120, 132) == pytest.approx(120 / 132)


@pytest.mark.parametrize("rows,cols,k_iters", SHAPES + [(9, 15, 37)])
@pytest.mark.parametrize("slots", GRIDS)
def test_streamk_fixups_list_every_contributor_and_no_other(rows, cols, k_iters, slots):
    grid, sk = _launch("streamk", rows, cols, k_iters, slots)
    plan = schedule.assignment("streamk", rows, cols, k_iters, grid, sk_tiles=sk)
    fixups = schedule.streamk_fixups(rows, cols, k_iters, grid, sk)
    for tile, order in fixups.items():
        owner = next(c for c, units in enumerate(plan) for t, kb, ke in units
                     if t == tile and ke == k_iters)
        others = {c for c, units in enumerate(plan) for t, _, _ in units if t == tile} - {owner}
        assert order == sorted(others, reverse=True), tile


def test_launch_grid_and_the_assignments_errors():
    assert schedule.launch_grid("streamk", 100, 132, 0) == 100  # no stream-K tail: one per tile
    assert schedule.launch_grid("dynamic", 0, 132) == 1
    with pytest.raises(ValueError, match="work_units"):
        schedule.assignment("dynamic", 2, 2, 4, 2)
    with pytest.raises(ValueError, match="policy"):
        schedule.launch_grid("round_robin", 4, 2)


def test_spread_slots_take_global_indices_only_with_fewer_iterations_than_ctas():
    # 8 stream-K iterations on 8 CTAs, one each: CTA c writes slot 2c, as SpreadSlots in
    # kernels/gemm_hopper.cu does (its one_each case is sk_iters < ctas)
    written, _ = schedule.spread_slots(1, 2, 4, 8, 2)
    assert written == {(c, c // 4): 2 * c for c in range(8)}
    written, _ = schedule.spread_slots(1, 2, 4, 9, 2)  # 8 on 9: the iterations' global indices
    assert sorted(written.values()) == list(range(8))


def test_from_record_keeps_each_ctas_order():
    rows = [(1, 0, 0, 4), (0, 1, 0, 4), (1, 2, 0, 2), (1, 3, 2, 4)]
    assert schedule.from_record(rows, 2) == [[(1, 0, 4)], [(0, 0, 4), (2, 0, 2), (3, 2, 4)]]
