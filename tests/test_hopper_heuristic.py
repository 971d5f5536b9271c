"""Tests of the Hopper kernel's heuristic (``mgemm.hopper_heuristic``): the config
``choose_config`` picks on the shapes each rule was measured on and at each rule's bounds, and the
route ``gemm_parts`` takes (K-major copy of B, tail split, transposed product).  CPU only: the
picks are pure Python; the GPU tests of the configs they pick are in test_hopper.py."""

from unittest import mock

import numpy as np
import pytest

from mgemm import hopper, hopper_config, hopper_heuristic, schedule
from mgemm.hopper_config import HopperConfig

from hopper_fakes import FakeArray, caller_way, row_major_flags, swap_pick


def test_heuristic_is_deterministic_and_sensible():
    big = hopper.choose_config(8192, 8192, 8192, "bfloat16", 132)
    assert big == hopper.choose_config(8192, 8192, 8192, "bfloat16", 132)
    # 15.5 waves of 256-wide tiles: stream-K over the partial wave after the whole ones
    assert (big.tile_n, big.policy, big.sk_waves, big.sk_reduce) == (256, "streamk", 0, "owner")
    four = hopper.choose_config(4096, 4096, 4096, "bfloat16", 132)  # 3.9 waves: static
    assert (four.tile_n, four.policy, four.sk_waves) == (256, "static", 1)
    lp = hopper.plan_launch(big, 8192, 8192, 8192, 132)
    assert (lp.grid, lp.sk_tiles) == (132, 2048 % 132)
    assert hopper.choose_config(256, 256, 65536, "bfloat16", 132).policy == "streamk"
    # tiles split four or more ways (4 tiles on 132 SMs) spread the fix-up; two or three: owner
    assert hopper.choose_config(256, 256, 65536, "bfloat16", 132).sk_reduce == "spread"
    assert hopper.choose_config(1024, 2112, 8192, "float16", 132).sk_reduce == "owner"
    assert hopper.choose_config(896, 2432, 8192, "float16", 132).sk_reduce == "owner"
    assert hopper.choose_config(8192, 8192, 8192, "float16", 132).sk_reduce == "owner"
    assert hopper.choose_config(1000, 1000, 64, "float16", 132).policy == "static"  # short K
    assert hopper.choose_config(8192, 8192, 8192, "float16", 132, shared=True).policy == "dynamic"
    assert hopper.choose_config(512, 512, 512, "float32", 132, allow_tf32=True).input == "tf32"
    with pytest.raises(TypeError):  # no exact float32 (or float64) path on this kernel
        hopper.choose_config(512, 512, 512, "float32", 132)
    with pytest.raises(TypeError):
        hopper.choose_config(8, 8, 8, "float64", 132)


def test_many_waves_split_the_last_wave_over_clusters_too():
    """MANY_WAVES: static 256-wide tiles over many waves with a partial last one and long K take
    stream-K over that wave alone, on one CTA a tile and on the off-rows 2-CTA clusters alike (the
    clusters' waves counted in blocks of two tiles over half the SMs); short K stays static."""
    flags = dict(b_rows_off_128=True)  # B's rows of 5328 halves: off 128-byte lines
    cfg = hopper.choose_config(5640, 5328, 6320, "float16", 132, **flags)  # 23 x 21 blocks, 99 steps
    assert (cfg.tile_n, cfg.cluster_m, cfg.policy, cfg.sk_waves, cfg.sk_reduce) == (256, 2, "streamk", 0, "owner")
    lp = hopper.plan_launch(cfg, 5640, 5328, 6320, 132)
    assert lp.sk_tiles == (23 * 21) % 66  # the partial wave's blocks alone are split
    short = hopper.choose_config(11608, 3504, 2168, "float16", 132, b_rows_off=True)  # 34 steps
    assert (short.cluster_m, short.policy) == (2, "static")
    with mock.patch.multiple(hopper_heuristic, MANY_WAVES_CLUSTERS=((1, 1),)):
        assert hopper.choose_config(5640, 5328, 6320, "float16", 132, **flags).policy == "static"
    with mock.patch.multiple(hopper_heuristic, MANY_WAVES=None):
        assert hopper.choose_config(8192, 8192, 8192, "float16", 132).policy == "static"
    single = hopper.choose_config(4856, 8768, 4352, "bfloat16", 132)  # rows on 128 bytes, 10.1 waves
    assert (single.cluster_m, single.policy, single.sk_waves) == (1, "streamk", 0)
    assert hopper.choose_config(4096, 4096, 4096, "bfloat16", 132).policy == "static"  # 3.9 waves


@pytest.mark.parametrize("m,n,k", [(8192, 8192, 8192), (4096, 4096, 4096), (896, 2432, 8192),
                                   (1024, 2112, 8192), (1408, 1536, 16384), (256, 256, 65536),
                                   (64, 8192, 8192), (8192, 8192, 256), (1, 1, 1)])
def test_heuristic_streamk_only_when_last_wave_is_poor(m, n, k):
    cfg = hopper.choose_config(m, n, k, "bfloat16", 132)
    rows, cols, k_iters = schedule.tile_grid(m, n, k, cfg.tile_m, cfg.tile_n, cfg.tile_k)
    tiles = rows * cols
    if cfg.policy == "streamk":
        assert tiles % 132 and k_iters >= 4
        # a poor last wave, or many waves of wide tiles (only the partial wave split)
        many = cfg.tile_n == 256 and tiles >= 8 * 132 and cfg.sk_waves == 0
        assert tiles < 132 or tiles % 132 < 66 or many
    if min(m, n) <= 64:  # the thin tile (see test_heuristic_thin_products)
        assert (cfg.tile_m, cfg.tile_n, cfg.pingpong) == (64, 64, True)
        return
    # The narrow tile is taken when the wide tiles do not fill one wave, when K is short, or
    # when it needs fewer SM-time units; the wide one otherwise.
    wide_tiles = -(-m // 128) * -(-n // 256)
    wide = -(-wide_tiles // 132)
    narrow = -(-(-(-m // 128) * -(-n // 128)) // 132)
    narrow_wins = wide_tiles < 132 or -(-k // 64) <= hopper_heuristic.SHORT_K or narrow * 128 / 0.9 < wide * 256
    width = 128 if narrow_wins else 256
    # 128-wide stream-K tiles over 1.03 to 3 waves: 192 wide where that pads no more columns
    tiles128 = -(-m // 128) * -(-n // 128)
    extra_pad = -(-n // 192) * 192 - -(-n // 128) * 128  # columns 192 pads beyond 128
    if (width == 128 and -(-k // 64) > hopper_heuristic.SHORT_K and 1.03 * 132 <= tiles128 <= 3 * 132
            and hopper.choose_config(m, n, k, "bfloat16", 132, tile_n=128).policy == "streamk"
            and (extra_pad <= 0 or (0 < m % 128 <= 64 and extra_pad <= n // 16))):
        width = 192
    assert cfg.tile_n == width


def test_heuristic_tile_on_the_measured_shapes():
    """The tile widths measured faster on the H200 (benchmarks/RESULTS.md, fifth session)."""
    for shape in [(896, 2432, 8192), (8192, 8192, 256), (1408, 1536, 16384), (256, 256, 65536)]:
        assert hopper.choose_config(*shape, "float16", 132).tile_n == 128, shape
    for shape in [(4096, 4096, 4096), (8192, 8192, 8192)]:
        assert hopper.choose_config(*shape, "bfloat16", 132).tile_n == 256, shape
    assert hopper.choose_config(896, 2432, 8192, "float16", 132, tile_n=256).tile_n == 256
    with pytest.raises(ValueError):
        hopper.choose_config(896, 2432, 8192, "float16", 132, tile_n=64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_mid_tile_on_the_measured_shapes(dtype):
    """128x192 tiles where they were measured ahead of the 128-wide stream-K ones (RESULTS.md,
    sixteenth session), 128 wide where those stayed ahead; never for tf32 or a fixed tile_n."""
    for shape in [(1024, 2112, 8192), (1024, 2112, 16384), (1280, 2112, 8192), (2048, 2112, 8192),
                  (1536, 1536, 8192), (1024, 2304, 8192), (2048, 1152, 8192)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.tile_n, cfg.stages) == hopper_heuristic.MID_TILE, shape
        assert cfg == hopper.fit_policy(cfg, *shape, 132)
    # a half-filled last row of 128-row tiles: 192 even with a few more padded columns
    for shape in [(1088, 2048, 8192), (1344, 2048, 8192), (960, 2560, 8192), (1216, 2048, 4096)]:
        assert hopper.choose_config(*shape, dtype, 132).tile_n == 192, shape
    # one wave of 192-wide tiles against stream-K over 1.15 waves or more of 128-wide ones
    # (seventeenth session); 128 below that
    for shape in [(2176, 1216, 2048), (1664, 1632, 16384), (1152, 2144, 8192), (1904, 1408, 8192),
                  (2000, 1184, 4096)]:
        assert hopper.choose_config(*shape, dtype, 132).tile_n == 192, shape
    for shape in [(1152, 1920, 8192), (896, 2432, 8192), (2304, 1024, 8192), (1408, 1536, 16384),
                  (1024, 2048, 8192), (2112, 1024, 8192), (1648, 1376, 8192), (2480, 816, 8192),
                  (2144, 1024, 2048), (2496, 1792, 2048), (2032, 2144, 16384), (1760, 1248, 8192)]:
        assert hopper.choose_config(*shape, dtype, 132).tile_n == 128, shape
    assert hopper.choose_config(1024, 2112, 8192, dtype, 132, tile_n=128).tile_n == 128
    assert hopper.choose_config(1024, 2112, 8192, "float32", 132, allow_tf32=True).tile_n == 128
    assert hopper.choose_config(1024, 2112, 8192, dtype, 132, shared=True).tile_n == 128


def test_heuristic_one_wave_of_wide_tiles():
    """256-wide tiles, static, where they fill at least WIDE_WAVE_FILL of one wave (measured ahead
    of 128-wide ones on nine shapes, RESULTS.md seventeenth session); 128 wide below that."""
    for shape in [(1792, 2240, 8192), (2112, 1600, 16384), (1600, 2352, 4096)]:
        cfg = hopper.choose_config(*shape, "float16", 132)
        assert (cfg.tile_n, cfg.policy) == (256, "static"), shape
    # one wave of 224-wide tiles is cheaper still (_cheapest_waves; 0.86-0.87 -> 0.95 measured)
    assert hopper.choose_config(1504, 2400, 8192, "float16", 132).tile_n == 224
    assert hopper.choose_config(896, 2432, 8192, "float16", 132).tile_n == 128  # 70 wide tiles
    assert hopper.choose_config(1600, 2352, 256, "float16", 132).tile_n == 128  # short K


def test_heuristic_partial_wave_runs_static(monkeypatch):
    """One partial wave at least half full runs static on 128-wide tiles and on 192-wide ones up
    to PARTIAL_WAVE_STATIC_K k-steps; stream-K below half a wave and for 192 on longer K (before
    the quad stream-K rule, which comes after: QUAD_SK off here, and the 192-wide split-K that
    replaces some of these static tiles: SPLIT_K_192 off)."""
    monkeypatch.setattr(hopper_heuristic, "QUAD_SK", None)
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_192", None)
    for shape in [(1920, 800, 8192), (2112, 432, 4096), (1408, 1072, 16384), (1072, 1952, 4096),
                  (528, 3984, 4360), (6400, 272, 4680)]:
        assert hopper.choose_config(*shape, "float16", 132).policy == "static", shape
    assert hopper.choose_config(1280, 1856, 16384, "float16", 132).policy == "streamk"
    assert hopper.choose_config(1024, 2112, 8192, "float16", 132).policy == "streamk"
    assert hopper.choose_config(512, 512, 32768, "float16", 132).policy == "streamk"  # 16 tiles


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_split_k_192(dtype, monkeypatch):
    """Static 128 x 128 tiles of one wave holding one CTA a tile (single CTAs or clusters) over K of
    at least SPLIT_K_192[0] steps: split-K on 128 x 192 tiles (160 where those take as many
    columns: the last rule), two CTAs a tile, the owner fix-up (RESULTS.md, fifty-third session:
    the products drawn); not at shorter K, where two CTAs a 192-wide tile overfill the wave,
    where the transposed product takes the deep split, or with the rule off."""
    def pick(m, n, k):
        return hopper.choose_config(m, n, k, dtype, 132, **row_major_flags(m, n, k))

    fired = {(1885, 536, 27936): 192, (1032, 1088, 12688): 192, (1800, 536, 13760): 192, (1896, 576, 12824): 192,
             (624, 1832, 10456): 192, (3864, 320, 50552): 160, (1408, 1072, 16384): 192, (278, 3928, 22376): 192}
    for (m, n, k), width in fired.items():
        cfg = pick(m, n, k)
        assert (cfg.tile_n, cfg.policy, cfg.sk_ways, cfg.sk_reduce, cfg.cluster_size, cfg.epilogue) == (
            width, "streamk", 2, "owner", 1, "staged"), (m, n, k)
        assert 2 * hopper_heuristic._tiles(m, n, cfg.tile_n) <= 132
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "SPLIT_K_192", None)
            before = pick(m, n, k)
        assert (before.tile_n, before.policy, before.sk_ways) == (128, "static", 0), (m, n, k)
    for shape in ((664, 2088, 6224), (1368, 776, 5856),  # K short of 128 steps
                  (1408, 1536, 16384),  # 88 tiles of 192: two CTAs each past the wave
                  (3216, 360, 26904), (2954, 296, 33432),  # the transposed product's deep split
                  (1952, 624, 12768)):  # stream-K clusters before
        assert pick(*shape).tile_n == 128 or pick(*shape).sk_ways != 2, shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_cluster_tail_sk(dtype, monkeypatch):
    """Static 2 x 1 or 2 x 2 clusters over more than one wave of blocks whose last wave leaves the
    average cluster below CLUSTER_TAIL_SK[0] of the busiest one's, K of at least CLUSTER_TAIL_SK[1]
    steps past two waves and CLUSTER_TAIL_SK[2] at two or fewer, or CLUSTER_TAIL_SK[1] there where
    the average is below CLUSTER_TAIL_SK[3]: stream-K over the last two waves, same tiles and
    clusters, the owner fix-up, in one launch (RESULTS.md, fifty-fourth, fifty-eighth and
    fifty-ninth sessions: the products measured); not at shorter K on fuller waves below two, on
    fuller last waves, short K, the TMA-store epilogue, or with the rule off."""
    def pick(m, n, k):
        return hopper.choose_config(m, n, k, dtype, 132, **row_major_flags(m, n, k))

    fired = [(1239, 6808, 15048), (2291, 3784, 10488), (1384, 3592, 3904), (9040, 456, 10120),
             (2384, 3432, 7936), (512, 8856, 2208), (1296, 6392, 6752), (7696, 2640, 12904),
             (2480, 2472, 13776),  # 1.73 waves over 216 steps
             (2416, 2552, 3024), (4352, 1432, 2432)]  # 1.52 and 1.55 waves over 48 and 38 steps
    for m, n, k in fired:
        cfg = pick(m, n, k)
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)
            before = pick(m, n, k)
        assert before.policy == "static" and before.cluster_size > 1, (m, n, k)
        assert cfg == before.replace(policy="streamk", sk_waves=1, sk_reduce="owner"), (m, n, k)
        rows, cols, _ = schedule.tile_grid(m, n, k, cfg.tile_m, cfg.tile_n, cfg.tile_k)
        blocks = hopper_config._blocks(cfg, rows, cols)
        slots = hopper_heuristic._wave_clusters(cfg.cluster_m, cfg.cluster_n, 132)
        assert slots < blocks < hopper_heuristic.CLUSTER_TAIL_SK[0] * -(-blocks // slots) * slots, (m, n, k)
        assert (blocks > 2 * slots or -(-k // 64) >= hopper_heuristic.CLUSTER_TAIL_SK[2]
                or blocks < hopper_heuristic.CLUSTER_TAIL_SK[3] * 2 * slots), (m, n, k)
        # one launch: gemm_parts' tail split (two bands of rows) takes static launches only
        assert hopper_heuristic.tail_split(cfg, m, n, k, dtype, 132, **row_major_flags(m, n, k)) is None
    kept = [(2415, 2832, 5056), (1244, 5624, 2000), (13642, 488, 3128),  # last wave 0.9 full or more
            (9568, 728, 2056), (9608, 720, 2672), (14736, 456, 5312),  # 1.73-1.76 waves, < 96 steps
            (456, 12824, 3672), (408, 13288, 5472),  # 1.73 waves on 2 x 2 clusters, < 96 steps
            (472, 8952, 1200), (1448, 5880, 1632),  # K of 19 and 26 steps
            (1912, 3240, 2048)]  # 32 steps: the TMA-store epilogue
    for shape in kept:
        cfg = pick(*shape)
        assert cfg.policy == "static" and cfg.cluster_size > 1, shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_streamk_256_over_static(dtype, monkeypatch):
    """Static single-CTA tiles narrower than 256 over one to two waves, K of at least
    SK_256_OVER_STATIC[1] steps: stream-K over 128 x 256 tiles where the wave model prices it
    below the static waves (RESULTS.md, fifty-eighth session: the products measured ahead), on
    2 x 1 clusters where pairing the rows of tiles pads at most SK_256_CLUSTER_PAD of them, else
    single CTAs (fifty-ninth session); not where it prices it above, at shorter K, or with the rule
    off."""
    def pick(m, n, k):
        return hopper.choose_config(m, n, k, dtype, 132, **row_major_flags(m, n, k))

    fired = [(1176, 4080, 15768), (840, 5712, 14888), (359, 13568, 13632), (9528, 512, 16088),
             (4168, 1200, 13960), (6800, 752, 8048), (5296, 992, 4296)]
    for shape in fired:
        cfg = pick(*shape)
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "SK_256_OVER_STATIC", None)
            before = pick(*shape)
        assert before.policy == "static" and before.cluster_size == 1 and before.tile_n < 256, shape
        rows = -(-shape[0] // 128)
        pairs = rows % 2 <= hopper_heuristic.SK_256_CLUSTER_PAD * rows  # 1176: 10 rows; 840: 7
        assert (cfg.tile_n, cfg.policy, cfg.sk_reduce) == (256, "streamk", "owner"), shape
        assert (cfg.cluster_m, cfg.cluster_n) == ((2, 1) if pairs else (1, 1)), shape
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "SK_256_CLUSTER_PAD", None)
            assert pick(*shape) == cfg.replace(cluster_m=1), shape
    for shape in ((4360, 1040, 10328),  # 256-wide stream-K priced above the static waves
                  (816, 5984, 2144), (432, 9936, 2624)):  # K of 34 and 41 steps
        cfg = pick(*shape)
        assert cfg.policy == "static" and cfg.tile_n < 256, shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_half_wave_halves(dtype, monkeypatch):
    """Static 128 x 128 tiles on single CTAs that fill at most half a wave run as 128 x 64 tiles
    on eight stages (HALF_WAVE_HALVES), still one wave, as 64 x 128 tiles on single CTAs where N > M
    (HALF_WAVE_ALONG_M), paired on 1 x 2 clusters where they ran on clusters; not where the tiles
    fill more of it, on one row of tiles, thin products, tf32, an explicit width or a shared GPU;
    None turns it off."""
    halves = {(1024, 1024, 1024): (128, 64), (2048, 512, 2048): (128, 64), (4752, 128, 896): (128, 64),
              (512, 2048, 2048): (64, 128), (648, 896, 1392): (64, 128)}  # N > M: along M
    for shape, (tm, tn) in halves.items():
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.policy, cfg.tile_m, cfg.tile_n, cfg.stages, cfg.cluster_size) == ("static", tm, tn, 8, 1), shape
        lp = hopper.plan_launch(cfg, *shape, 132)
        assert 66 < lp.tiles <= 132 and lp.grid == lp.tiles, shape
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "HALF_WAVE_ALONG_M", False)
        cfg = hopper.choose_config(512, 2048, 2048, dtype, 132)
        assert (cfg.tile_m, cfg.tile_n) == (128, 64)
    for shape in [(1024, 2048, 1024), (1536, 1536, 1536), (64, 8192, 1024), (4096, 4096, 4096), (72, 5760, 1560),
                  (128, 8192, 1024)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.tile_m, cfg.tile_n) != (128, 64), shape
    # rows off 128-byte lines: 2 x 2 and 2 x 1 cluster configs as halves paired on 1 x 2 clusters,
    # but not 2 x 1 clusters (B multicast) where N > 2 M (HALF_WAVE_CLUSTERS)
    for shape in [(1000, 1000, 1000), (920, 800, 2584), (1400, 632, 2424)]:
        cfg = hopper.choose_config(*shape, dtype, 132, b_rows_off_128=True, a_rows_off_128=True)
        assert (cfg.policy, cfg.tile_n, cfg.stages, cfg.cluster_m, cfg.cluster_n) == ("static", 64, 8, 1, 2), shape
    cfg = hopper.choose_config(160, 3744, 3520, dtype, 132, b_rows_off_128=True)
    assert (cfg.tile_n, cfg.cluster_m, cfg.cluster_n) == (128, 2, 1)
    monkeypatch.setattr(hopper_heuristic, "HALF_WAVE_CLUSTERS", False)
    cfg = hopper.choose_config(1000, 1000, 1000, dtype, 132, b_rows_off_128=True, a_rows_off_128=True)
    assert (cfg.tile_n, cfg.cluster_size) == (128, 4)
    assert hopper.choose_config(1024, 1024, 1024, dtype, 132, tile_n=128).tile_n == 128
    assert hopper.choose_config(1024, 1024, 1024, dtype, 132, shared=True).tile_n == 128
    assert hopper.choose_config(1024, 1024, 1024, "float32", 132, allow_tf32=True).tile_n == 128
    monkeypatch.setattr(hopper_heuristic, "HALF_WAVE_HALVES", None)
    assert hopper.choose_config(1024, 1024, 1024, dtype, 132).tile_n == 128


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_paired_halves_on_one_or_two_spread_tiles(dtype, monkeypatch):
    """Stream-K with the spread fix-up on one or two 128 x 128 tiles runs over their 128 x 64
    halves on 1 x 2 clusters (PAIRED_HALVES), whatever K, thin products of so few tiles too; not
    on three tiles or more, a product of at most 64 x 64, tf32, an explicit width or a shared GPU;
    0 turns it off."""
    for shape in [(128, 128, 131072), (96, 112, 98304), (80, 128, 30000), (128, 128, 4096), (128, 256, 65536),
                  (256, 128, 49152), (128, 192, 32768), (200, 100, 20000), (128, 32, 65536), (64, 128, 131072)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.policy, cfg.sk_reduce, cfg.tile_m, cfg.tile_n, cfg.stages, cfg.cluster_m, cfg.cluster_n) == \
            ("streamk", "spread", 128, 64, 8, 1, 2), shape
        lp = hopper.plan_launch(cfg, *shape, 132)
        assert lp.grid == 132 and lp.sk_tiles == hopper_config._blocks(cfg, lp.rows, lp.cols)
    for shape in [(128, 384, 65536), (256, 256, 65536), (384, 384, 65536), (64, 64, 131072), (512, 512, 32768)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.tile_n, cfg.cluster_n) != (64, 2), shape
    assert hopper.choose_config(128, 128, 65536, dtype, 132, tile_n=128).tile_n == 128
    assert hopper.choose_config(128, 128, 65536, dtype, 132, shared=True).cluster_n == 1
    assert hopper.choose_config(128, 128, 65536, "float32", 132, allow_tf32=True).cluster_n == 1
    monkeypatch.setattr(hopper_heuristic, "PAIRED_HALVES", 0)
    assert hopper.choose_config(128, 128, 65536, dtype, 132).cluster_n == 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_quad_streamk_below_a_wave(dtype, monkeypatch):
    """Stream-K or static below 0.75 of a wave of 128-wide tiles, K of 64 steps or more, runs over
    2 x 2 clusters where the blocks pad at most a fifth more tiles (owner fix-up; spread on one or
    two blocks); not from 0.75 of a wave, on four spread blocks, short K, tf32, an explicit width,
    or a shared GPU; B's rows off 128 bytes take them before the off-rows rules."""
    for shape, reduce in [((1152, 1024, 16384), "owner"), ((256, 256, 65536), "spread"),
                          ((256, 512, 65536), "spread"), ((1416, 960, 17576), "owner"),
                          ((2112, 432, 4096), "owner"), ((1024, 1536, 8192), "owner")]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.policy, cfg.cluster_m, cfg.cluster_n, cfg.tile_n, cfg.sk_reduce, cfg.sk_ways) == \
            ("streamk", 2, 2, 128, reduce, 0), shape
        lp = hopper.plan_launch(cfg, *shape, 4 * hopper_heuristic.quad_clusters(132))
        assert lp.grid <= 4 * hopper_heuristic.quad_clusters(132) and lp.sk_tiles > 0
    # 18 blocks on 30 clusters over 64 K steps: stream-K would take 25.6 steps off each cluster's,
    # at QUAD_SK_STATIC or more: stream-K; 28 blocks over 66 steps (4.4): the same clusters
    # static, one wave (stream-K without that rule, or as the transposed product's config or a
    # tail_split band, one_wave=False)
    assert hopper.choose_config(2112, 432, 4096, dtype, 132).policy == "streamk"
    cfg = hopper.choose_config(1792, 800, 4224, dtype, 132)
    assert (cfg.policy, cfg.cluster_m, cfg.cluster_n, cfg.tile_n) == ("static", 2, 2, 128)
    assert hopper.plan_launch(cfg, 1792, 800, 4224, 120).grid == 4 * 28
    assert hopper.choose_config(1792, 800, 4224, dtype, 132, one_wave=False) == cfg.replace(policy="streamk")
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "QUAD_SK_STATIC", None)
        assert hopper.choose_config(1792, 800, 4224, dtype, 132) == cfg.replace(policy="streamk")
    # where the config without the clusters is split-K on 128 x 192 single CTAs that cover at most
    # 1 / QUAD_SK_192_PAD of the blocks (2032x576: 1.33, 608x2272: 1.2), that split, in place of
    # stream-K or static clusters; not at 1.19 (1136x920) or 1.0 (2000x592)
    for shape in [(2032, 576, 14544), (608, 2272, 14200)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.tile_n, cfg.policy, cfg.sk_ways, cfg.cluster_size) == (192, "streamk", 2, 1), shape
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "QUAD_SK_192_PAD", None)
            assert hopper.choose_config(*shape, dtype, 132).cluster_size == 4, shape
    for shape in [(1136, 920, 9672), (2000, 592, 10824)]:
        assert hopper.choose_config(*shape, dtype, 132).cluster_size == 4, shape
    # two to four CTAs a tile on single CTAs: split-K first (SPLIT_K) where A's and B's rows are on
    # 128-byte lines; off them the clusters stay
    for shape in [(1024, 1024, 16384), (768, 1024, 16384), (640, 1280, 12288), (512, 2048, 16384),
                  (512, 1024, 16384)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.cluster_size, cfg.sk_reduce, cfg.sk_ways) == (1, "owner", 132 // hopper_heuristic._tiles(*shape[:2], 128))
        for off in ("a_rows_off_128", "b_rows_off_128", "b_rows_off"):
            cfg = hopper.choose_config(*shape, dtype, 132, **{off: True})
            assert (cfg.cluster_m, cfg.cluster_n, cfg.sk_ways) == (2, 2, 0), off
    # stream-K over the blocks, not split-K, where the clusters would hold two or more each (8 blocks)
    assert hopper_heuristic.quad_streamk(HopperConfig(tile_n=128), 984, 480, 7632, 132).sk_ways == 0
    for shape in [(896, 896, 16384), (512, 512, 32768), (256, 1024, 32768), (1024, 1024, 2048),
                  (3064, 576, 5584), (1408, 1536, 16384), (896, 2432, 8192), (128, 256, 131072),
                  (520, 1088, 23368)]:
        assert hopper.choose_config(*shape, dtype, 132).cluster_m == 1, shape  # 128x256: PAIRED_HALVES
    assert hopper.choose_config(1024, 1024, 16384, dtype, 132, tile_n=128).cluster_size == 1
    assert hopper.choose_config(1024, 1024, 16384, dtype, 132, shared=True).cluster_n == 1
    assert hopper.choose_config(1024, 1024, 16384, "float32", 132, allow_tf32=True).cluster_n == 1
    for shape in [(1752, 416, 37456), (2272, 456, 6784), (744, 736, 12376)]:  # B's rows off 128 bytes
        flags = dict(b_rows_off=shape[1] * 2 % 32 != 0, b_rows_off_128=True, a_rows_off_128=shape[2] % 64 != 0)
        cfg = hopper.choose_config(*shape, dtype, 132, **flags)
        # slices of 146 K steps on 28 tiles of 128 x 256: DEEP_SPLIT's 2 x 1 clusters take it first
        deep = shape == (1752, 416, 37456)
        assert (cfg.policy, cfg.cluster_m, cfg.cluster_n, cfg.tile_n) == ("streamk", 2, 1 if deep else 2,
                                                                           256 if deep else 128), shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_128x224_where_it_fills_its_waves(dtype):
    """One or two static waves of 128x224 tiles filled to 0.9 or more (RESULTS.md, eighteenth
    session: ahead in 73 of 78 runs on shapes drawn after the rule; since the sixtieth session
    ``_cheapest_waves`` alone picks them), not where they fill less, not for short K, thin
    products or a shared GPU, and not where the heuristic's own static waves fill as well."""
    for shape in [(1824, 1584, 4096), (3040, 1024, 4096), (1008, 3392, 16384), (1968, 1632, 4096),
                  (3712, 2016, 8192), (2288, 2992, 16384), (2080, 3168, 4096), (2848, 2352, 16384),
                  (1872, 3664, 8192), (2128, 2960, 4096), (1216, 2624, 4096), (976, 3472, 4096),
                  (2512, 2816, 8192), (3152, 2240, 16384), (992, 3264, 4096), (1136, 3104, 4096),
                  (2688, 2624, 16384), (1296, 2448, 1024), (2640, 2576, 2048)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.tile_n, cfg.stages, cfg.policy, cfg.epilogue) == (224, 4, "static", "staged"), shape
        assert schedule.wave_fill(hopper.plan_launch(cfg, *shape, 132).tiles, 132) >= 0.9
    for shape in [(896, 2432, 8192), (1024, 2112, 8192), (1840, 2288, 8192), (8192, 8192, 8192),
                  (4096, 4096, 4096), (1408, 1536, 16384), (256, 256, 65536), (64, 8192, 8192),
                  (8192, 8192, 256), (2032, 1200, 8192), (1296, 1712, 16384), (2288, 1008, 4096),
                  (1536, 1536, 8192)]:
        assert hopper.choose_config(*shape, dtype, 132).tile_n != 224, shape
    for shape in [(3120, 1008, 1024), (2752, 1248, 2048), (1680, 3680, 1024), (2656, 2528, 1024)]:
        assert hopper.choose_config(*shape, dtype, 132).tile_n == 224, shape  # staged, not TMA
    assert hopper.choose_config(1824, 1584, 4096, dtype, 132, shared=True).policy == "dynamic"
    assert hopper.choose_config(1824, 1584, 4096, "float32", 132, allow_tf32=True).tile_n != 224


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_two_waves_of_192_for_three_of_128(dtype):
    """Static waves of 128-wide tiles give way to one or two fuller waves of 128x192 (RESULTS.md,
    eighteenth session; ``_cheapest_waves`` since the sixtieth), keeping the TMA-store epilogue
    for short K."""
    for shape in [(3600, 1584, 8192), (3632, 1600, 8192), (2016, 2912, 4096), (2784, 2000, 4096),
                  (2816, 2144, 2048), (2704, 2000, 1024)]:
        before = hopper.choose_config(*shape, dtype, 132, tile_n=128)
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (before.tile_n, before.policy) == (128, "static"), shape
        assert (cfg.tile_n, cfg.stages, cfg.policy, cfg.epilogue) == (192, 4, "static", before.epilogue), shape
    for shape in [(3152, 4016, 4096), (2880, 3232, 2048), (1648, 5472, 8192)]:  # three waves of 192
        assert hopper.choose_config(*shape, dtype, 132).tile_n == 192, shape
    # one whole wave of 128-wide tiles stays (1408x1536x16384: 132 tiles)
    assert hopper.choose_config(1408, 1536, 16384, dtype, 132).tile_n == 128


def test_heuristic_epilogue_follows_k():
    """TMA stores where K has at most TMA_STORE_K 64-wide steps (measured ahead up to K = 2048 on
    the H200, RESULTS.md thirteenth session), the staged thread stores for longer K; on every
    tile the heuristic picks, thin ones included."""
    steps = hopper_heuristic.TMA_STORE_K
    for m, n in [(8192, 8192), (4096, 4096), (1024, 2112), (64, 8192), (8192, 16)]:
        for k, epi in [(1, "tma"), (256, "tma"), (64 * steps, "tma"), (64 * steps + 1, "staged"),
                       (8192, "staged")]:
            for dtype, tf32 in [("float16", False), ("bfloat16", False), ("float32", True)]:
                cfg = hopper.choose_config(m, n, k, dtype, 132, allow_tf32=tf32)
                assert cfg.epilogue == epi, (m, n, k, dtype, cfg)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_cheapest_waves(dtype, monkeypatch):
    """Static waves of the cheapest CHEAPEST_WIDTHS tile replace stream-K where they cost at most
    SK_GIVE_WAY times an even share of its tiles times SK_OVERHEAD, and replace static waves by
    STATIC_GAIN (RESULTS.md, nineteenth session: on 33 shapes drawn where the rule fires, ahead in
    65 of 66 runs), up to CHEAPEST_MAX_WAVES waves; stream-K stays where it shares out much more evenly, over many waves, for thin
    products, tf32, a shared GPU or an explicit width."""
    def choose(*shape, **kw):
        return hopper.choose_config(*shape, dtype, 132, **kw)

    measured = [((608, 3360, 512), 192), ((2848, 1152, 512), 256), ((928, 3040, 256), 192),
                ((1440, 1856, 512), 192), ((2688, 2400, 1024), 224), ((1744, 1776, 8192), 224),
                ((864, 3488, 16384), 224), ((3648, 784, 8192), 224), ((2208, 2880, 4096), 224),
                ((3936, 1424, 2048), 192), ((2944, 1232, 1024), 256), ((1472, 2432, 2048), 224)]
    chosen = {}
    for shape, width in measured:
        cfg = chosen[shape] = choose(*shape)
        assert (cfg.tile_n, cfg.policy) == (width, "static"), shape
        assert cfg.epilogue == ("tma" if shape[2] <= 64 * hopper_heuristic.TMA_STORE_K and width != 224 else "staged")
    for shape in [(2288, 2016, 4096), (896, 2432, 8192), (1024, 2112, 8192), (256, 256, 65536),
                  (512, 512, 32768), (8192, 8192, 8192)]:
        assert choose(*shape).policy == "streamk", shape
    assert choose(8192, 8192, 256).tile_n == 128  # K of 4 steps: below FILL_MIN_K_STEPS
    assert choose(64, 8192, 512).pingpong
    assert choose(608, 3360, 512, shared=True).policy == "dynamic"
    assert choose(608, 3360, 512, tile_n=128).tile_n == 128
    assert hopper.choose_config(608, 3360, 512, "float32", 132, allow_tf32=True).policy == "streamk"
    # static waves up to SK_GIVE_WAY times stream-K's estimate (twenty-sixth session: 0.66 -> 0.80,
    # 0.68 -> 0.81, 0.79 -> 1.09); stream-K where it costs 1.06 times less or more
    near = [(5472, 832, 2584), (2616, 848, 15568), (744, 3088, 6264)]
    for shape in near:
        assert (choose(*shape).tile_n, choose(*shape).policy) == (192, "static"), shape
    for shape in [(1416, 2824, 5792), (712, 5680, 14848), (8552, 384, 7456)]:
        assert choose(*shape).policy == "streamk", shape
    monkeypatch.setattr(hopper_heuristic, "SK_GIVE_WAY", 1.0)
    for shape in near:
        assert choose(*shape).policy == "streamk", shape
    # static to static over more than four waves (twenty-seventh session: ahead in 24 of 28 runs)
    many = {(2144, 11840, 1368): 192, (4672, 2576, 13064): 192, (3568, 6272, 1000): 192,
            (2416, 5696, 14728): 224, (11448, 1536, 2096): 224}
    for shape, width in many.items():
        cfg = choose(*shape)
        assert (cfg.tile_n, cfg.policy) == (width, "static"), shape
        assert cfg.epilogue == ("tma" if shape[2] <= 64 * hopper_heuristic.TMA_STORE_K and width != 224 else "staged")
    monkeypatch.setattr(hopper_heuristic, "CHEAPEST_MAX_WAVES", 4)
    for shape, width in many.items():
        assert choose(*shape).tile_n != width, shape
    monkeypatch.setattr(hopper_heuristic, "CHEAPEST_WIDTHS", ())  # without the rule: other configs
    for shape, _ in measured:
        if shape == (1440, 1856, 512):  # K of 8 steps: since SHORT_K = 4 the mid tile's rule takes it
            assert choose(*shape) == chosen[shape]
            continue
        assert choose(*shape) != chosen[shape], shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_few_tiles_split_only_with_long_k(dtype, monkeypatch):
    """Fewer tiles than half the SMs run static unless K is long against a CTA's share of the
    tile-steps (FEW_TILES_SK; RESULTS.md nineteenth session: 34 of 38 runs ahead on shapes drawn
    after the rule); stream-K stays for few tiles with long K."""
    def policy(*shape):
        return hopper.choose_config(*shape, dtype, 132).policy

    monkeypatch.setattr(hopper_heuristic, "QUAD_SK", None)  # the rules after this one, off
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_FROM_STATIC", None)
    flipped = [(2384, 304, 1024), (144, 1344, 512), (896, 864, 1024), (1184, 640, 256),
               (1024, 1024, 512), (1664, 528, 2048), (128, 2192, 1024), (416, 1440, 4096)]
    for shape in flipped:
        assert policy(*shape) == "static", shape
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_FROM_STATIC", 40)  # 64 K steps, 48 tiles: split-K two ways
    assert hopper.choose_config(416, 1440, 4096, dtype, 132).sk_ways == 2
    assert policy(1664, 528, 2048) == "static"  # 32 steps
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_FROM_STATIC", None)
    for shape in [(1536, 592, 8192), (800, 1040, 32768), (1024, 720, 16384), (256, 1296, 16384),
                  (480, 720, 32768), (4208, 80, 8192), (256, 256, 65536), (128, 128, 4096)]:
        assert policy(*shape) == "streamk", shape
    monkeypatch.setattr(hopper_heuristic, "FEW_TILES_SK", (0.0, -1, 0))  # without the rule: split
    for shape in flipped:
        assert policy(*shape) == "streamk", shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_split_k_on_thin_tiles(dtype, monkeypatch):
    """Thin products on stream-K split-K two to four CTAs a 64 x 64 tile (SPLIT_K_THIN); a whole
    static wave of thin tiles, tf32 and a shared GPU keep their launch."""
    for shape, ways in [((48, 3072, 16384), 2), ((64, 2048, 16384), 4), ((32, 2560, 32768), 3),
                        ((2480, 48, 808), 3)]:
        cfg = hopper.choose_config(*shape, dtype, 132)
        assert (cfg.pingpong, cfg.tile_m, cfg.tile_n, cfg.policy, cfg.sk_ways) == (True, 64, 64, "streamk", ways), shape
        assert hopper.plan_launch(cfg, *shape, 132).grid == ways * hopper_heuristic._tiles(*shape[:2], 64, 64)
    assert hopper.choose_config(64, 8192, 8192, dtype, 132).sk_ways == 0  # static, one wave
    assert hopper.choose_config(48, 3072, 16384, dtype, 132, shared=True).sk_ways == 0
    assert hopper.choose_config(48, 3072, 16384, "float32", 132, allow_tf32=True).sk_ways == 0
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_THIN", False)
    assert hopper.choose_config(48, 3072, 16384, dtype, 132).sk_ways == 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_deep_split_on_wide_tiles(dtype, monkeypatch):
    """Products whose 128 x 256 tiles a wave holds 3 to 8 CTAs of, each a k-slice of 96 steps or
    more, split-K on those tiles with the spread fix-up (DEEP_SPLIT); B multicast over 2 x 1
    clusters where B's rows are off 128-byte lines and the tile rows pair up or are odd but 9 or
    more (DEEP_SPLIT_ODD_ROWS); 9 to 16 CTAs a tile only on those clusters, where N pads little
    (DEEP_SPLIT_FEW); not on shallower slices, too few or too many tiles, where 256-wide tiles
    would pad both M and N by more than 15 %, a shared GPU, an explicit width or tf32."""
    def choose(m, n, k, **kw):
        flags = dict(b_rows_off_128=(2 * n) % 128 != 0, b_rows_off=(2 * n) % 32 != 0)
        return hopper.choose_config(m, n, k, kw.pop("dtype", dtype), 132, **flags, **kw)

    for shape, ways, cm in [((1024, 1024, 65536), 4, 1), ((768, 768, 65536), 7, 1), ((1000, 1000, 65536), 4, 2),
                            ((600, 1000, 65536), 6, 1), ((1200, 800, 50000), 3, 2), ((800, 1500, 30000), 3, 1),
                            ((512, 1024, 65536), 8, 1), ((1584, 368, 74200), 5, 2), ((1070, 968, 58648), 3, 2),
                            ((784, 1136, 30176), 3, 1), ((1299, 248, 106312), 12, 2), ((208, 1448, 121888), 11, 2)]:
        cfg = choose(*shape)
        assert (cfg.tile_m, cfg.tile_n, cfg.pingpong, cfg.policy) == (128, 256, False, "streamk"), shape
        assert (cfg.sk_ways, cfg.sk_reduce, cfg.cluster_m, cfg.cluster_n) == (ways, "spread", cm, 1), shape
        lp = hopper.plan_launch(cfg, *shape, 132)
        assert lp.k_iters // ways >= hopper_heuristic.DEEP_SPLIT[2], shape
        # clusters over an odd number of tile rows: one row of clusters past M, and as many ways as
        # the clusters a wave holds allow over those blocks
        assert lp.grid == ways * lp.tiles if cm == 1 else lp.grid % 2 == 0 and lp.grid <= 132, shape
    for shape in [(1024, 1024, 16384), (1024, 768, 16384), (512, 512, 65536), (2048, 1024, 32768),
                  (640, 640, 65536), (581, 520, 52752), (896, 416, 86384), (835, 280, 56352)]:
        # shallow slices, 2 ways, 8 tiles over 64 steps, M and N padded; few tiles over 7 rows, N padded
        assert choose(*shape).tile_n != 256 or choose(*shape).policy != "streamk", shape
    assert choose(1024, 1024, 65536, shared=True).sk_ways == 0
    assert choose(1024, 1024, 65536, tile_n=128).tile_n == 128
    assert choose(1024, 1024, 65536, dtype="float32", allow_tf32=True).tile_n == 128
    # the caller keeps such a split rather than the transposed product on 128-wide tiles, whose
    # padded work is less (swap_pays): 176x840x115184 0.91-0.93 kept, 0.64-0.70 transposed
    direct, swapped = choose(176, 840, 115184), choose(840, 176, 115184)
    assert (direct.sk_ways, direct.cluster_m, swapped.tile_n) == (16, 2, 128)
    assert not hopper.swap_pays(direct, swapped, 176, 840)
    monkeypatch.setattr(hopper_heuristic, "_deep", lambda cfg: False)
    assert hopper.swap_pays(direct, swapped, 176, 840)
    monkeypatch.undo()
    monkeypatch.setattr(hopper_heuristic, "DEEP_SPLIT_ODD_ROWS", None)
    assert choose(1070, 968, 58648).cluster_m == 1
    monkeypatch.setattr(hopper_heuristic, "DEEP_SPLIT_FEW", None)
    assert choose(208, 1448, 121888).tile_n == 128
    monkeypatch.setattr(hopper_heuristic, "DEEP_SPLIT", None)
    assert choose(1024, 1024, 65536).tile_n == 128


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_few_tiles_take_the_thin_tile(dtype, monkeypatch):
    """128x128 tiles filling at most FEW_TILES_THIN[0] of the SMs, K of at most FEW_TILES_THIN[1]
    steps: the thin pingpong tile, with the same policy where the 128x128 tiles run unsplit and
    with its own where they split (RESULTS.md nineteenth and twentieth sessions); not where that
    would split each thin tile eight ways or more, not for longer K, tf32, an explicit width or
    more tiles."""
    tm, tn, st = hopper_heuristic.THIN_TILE

    def thin(shape, **kw):
        cfg = hopper.choose_config(*shape, dtype, 132, **kw)
        return (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.pingpong, cfg.policy)

    unsplit = [(128, 2224, 2048), (1296, 96, 256), (96, 4176, 512), (480, 96, 512), (80, 1104, 2048),
               (3632, 112, 1024), (128, 1072, 256), (3488, 128, 512), (224, 464, 2048), (976, 304, 2048),
               (256, 1024, 2048), (384, 640, 1024), (512, 1024, 1024), (640, 768, 512), (144, 1344, 512)]
    split = {(1232, 80, 4096): "streamk", (96, 4000, 4096): "static", (112, 3000, 4096): "streamk",
             (512, 512, 4096): "streamk"}
    for shape in unsplit:
        assert thin(shape) == (tm, tn, st, True, "static"), shape
    for shape, policy in split.items():
        assert thin(shape) == (tm, tn, st, True, policy), shape
    assert thin((96, 4176, 512), shared=True)[3:] == (True, "dynamic")
    for shape in [(128, 128, 4096), (3000, 112, 16384), (2500, 128, 8192), (400, 900, 8192),
                  (128, 5840, 8192), (128, 8192, 1024), (1024, 1024, 512)]:
        assert not hopper.choose_config(*shape, dtype, 132).pingpong, shape
    assert not hopper.choose_config(96, 4176, 512, dtype, 132, tile_n=128).pingpong
    assert not hopper.choose_config(96, 4176, 512, "float32", 132, allow_tf32=True).pingpong
    monkeypatch.setattr(hopper_heuristic, "FEW_TILES_THIN", (0.25, 64, False))  # split tiles stay 128x128
    for shape in split:
        assert not hopper.choose_config(*shape, dtype, 132).pingpong, shape
    assert thin(unsplit[0]) == (tm, tn, st, True, "static")
    monkeypatch.setattr(hopper_heuristic, "FEW_TILES_THIN", (0, 0, False))  # without the rule: 128x128
    monkeypatch.setattr(hopper_heuristic, "HALF_WAVE_HALVES", None)  # (not their halves)
    for shape in unsplit:
        assert hopper.choose_config(*shape, dtype, 132).tile_m == hopper_config.TILE_M, shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_b_rows_off_128_bytes_take_wider_tiles(dtype, monkeypatch):
    """B read in place with rows off 32-byte sectors: static 128x128 tiles over two waves or more
    become 128 x OFF_ROWS_WIDTH (RESULTS.md, twentieth session); nothing else changes.  (The
    clusters that follow it, tested below, are turned off here, and so are the cheapest waves
    beyond four, which take 224-wide tiles on 3248x4472x16384 before it.)"""
    monkeypatch.setattr(hopper_heuristic, "OFF_ROWS_CLUSTERS", ())
    monkeypatch.setattr(hopper_heuristic, "CHEAPEST_MAX_WAVES", 4)
    measured = [(4096, 4104, 4096), (8192, 4104, 4096), (2048, 4104, 4096), (3248, 4472, 16384),
                (4672, 2664, 1024), (7952, 3640, 4096), (3392, 2472, 2048)]
    for shape in measured:
        plain = hopper.choose_config(*shape, dtype, 132)
        off = hopper.choose_config(*shape, dtype, 132, b_rows_off=True)
        assert (plain.tile_n, plain.policy) == (128, "static"), shape
        assert (off.tile_n, off.policy, off.stages) == (192, "static", 4), shape
    for shape in [(4096, 4096, 4096), (5000, 5000, 5000), (1024, 3000, 8192), (896, 2432, 8192),
                  (64, 8192, 8192), (640, 608, 2048)]:  # other tiles, one wave, pingpong
        assert hopper.choose_config(*shape, dtype, 132, b_rows_off=True) == hopper.choose_config(*shape, dtype, 132)
    assert hopper.choose_config(4096, 4104, 4096, dtype, 132, b_rows_off=True, tile_n=128).tile_n == 128
    assert hopper.choose_config(4096, 4104, 4096, dtype, 132, b_rows_off=True, shared=True).tile_n == 128
    monkeypatch.setattr(hopper_heuristic, "OFF_ROWS_WIDTH", None)
    assert hopper.choose_config(4096, 4104, 4096, dtype, 132, b_rows_off=True).tile_n == 128


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_b_rows_off_one_wave_takes_wider_tiles(dtype, monkeypatch):
    """B's rows off 32-byte sectors, static 128 x 128 tiles of one CTA filling OFF_ROWS_ONE_WAVE of
    a wave to one wave, the 192-wide ones in one wave too, and no off-rows clusters for the 128-wide
    tiles: 128 x 192 static on single CTAs (RESULTS.md, forty-fourth session: the sizes it switched);
    not where the clusters take the 128-wide tiles, below the share of a wave, over a wave, for the
    transposed product's config that swap_pays weighs, or with the rule off."""
    off = dict(b_rows_off=True, b_rows_off_128=True, a_rows_off_128=True)

    def pick(m, n, k, **kw):
        return hopper.choose_config(m, n, k, dtype, 132, **off, **kw)
    for shape in [(592, 3288, 8104), (304, 5256, 9504), (272, 4424, 15984), (360, 5192, 14664),
                  (632, 3192, 3560), (328, 5368, 2608), (360, 4472, 3896), (272, 5032, 2600),
                  (344, 5144, 8056), (4208, 504, 2368)]:
        cfg = pick(*shape)
        assert (cfg.tile_n, cfg.policy, cfg.cluster_size, cfg.pingpong) == (192, "static", 1, False), shape
        assert pick(*shape, one_wave=False).tile_n == 128, shape
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "OFF_ROWS_ONE_WAVE", None)
            assert pick(*shape).tile_n == 128, shape
    assert pick(1888, 968, 3072).cluster_m == 2  # the clusters take the 128-wide tiles: kept
    assert pick(592, 3288, 8104, tile_n=128).tile_n == 128  # an explicit width
    assert hopper.choose_config(592, 3288, 8104, dtype, 132, b_rows_off_128=True).tile_n == 128  # on sectors
    # the share of a wave: 128 x 128 tiles of 5 rows and 26 columns (130) against fewer columns
    assert hopper_heuristic._tiles(592, 3288, 128) == 130 and pick(592, 3288, 8104).tile_n == 192
    # swap_pays weighs the transposed product's config without the rule: 4856x304x2104 stays on
    # its clusters, where the transposed product (304x4856, in the class) would have taken 192
    m, n, k = 4856, 304, 2104
    a, b, out = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2)), FakeArray((m, n), (2 * n, 2))
    flags, t_flags = hopper.rows_flags([a], [b]), hopper.rows_flags([b.T], [a.T])
    direct = hopper.choose_config(m, n, k, dtype, 132, **flags)
    assert direct.cluster_m == 2 and hopper.choose_config(n, m, k, dtype, 132, **t_flags).tile_n == 192
    assert hopper_heuristic._swap_config([a], [b], direct, out, m, n, k, dtype, 132, False) is None
    # (against the transposed config with the rule, swap_pays would take it)
    assert hopper.swap_pays(direct, hopper.choose_config(n, m, k, dtype, 132, **t_flags), m, n,
                            hopper_heuristic._swap_epilogues(k))
    # wherever it fires, the tile counts are as the rule says (OFF_LINES_PAST_WAVE, which one_wave
    # leaves out too, off: its own test below)
    monkeypatch.setattr(hopper_heuristic, "OFF_LINES_PAST_WAVE", None)
    rng = np.random.default_rng(44)
    for _ in range(400):
        m, n, k = (int(x) * 8 for x in rng.integers(16, 2000, size=3))
        cfg, before = pick(m, n, k), pick(m, n, k, one_wave=False)
        if cfg != before:
            assert (before.tile_n, before.policy, before.cluster_size) == (128, "static", 1)
            assert hopper_heuristic.OFF_ROWS_ONE_WAVE * 132 <= hopper_heuristic._tiles(m, n, 128) <= 132
            assert hopper_heuristic._tiles(m, n, 192) <= 132 and cfg.tile_n == 192 and cfg.cluster_size == 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_off_lines_past_a_wave_takes_one_wave_of_192(dtype, monkeypatch):
    """OFF_LINES_PAST_WAVE: B's rows off 128-byte lines (on sectors or not), 128 x 128 stream-K
    tiles over more than one wave and fewer than 1.15, whose 192-wide tiles fit in one wave: 128 x
    192 static on single CTAs, final (RESULTS.md, seventy-fifth session: the sizes drawn); not with
    B's rows on lines, over the sizes whose B may be copied K-major, past the bound, for the
    transposed product's config (one_wave=False), or with the rule off."""
    def pick(m, n, k, **kw):
        return hopper.choose_config(m, n, k, dtype, 132, **row_major_flags(m, n, k), **kw)
    measured = [(784, 2416, 2760), (2536, 808, 2392), (280, 5656, 3840), (2408, 872, 5392),
                (1096, 1840, 2120), (1776, 1256, 7064), (624, 3664, 12072), (1216, 1760, 1656),
                (616, 3496, 4304), (1136, 1872, 7320), (1816, 1112, 9032)]
    for m, n, k in measured:
        cfg = pick(m, n, k)
        assert (cfg.tile_n, cfg.policy, cfg.cluster_size, cfg.pingpong) == (192, "static", 1, False), (m, n, k)
        assert 132 < hopper_heuristic._tiles(m, n, 128) < 1.15 * 132 and hopper_heuristic._tiles(m, n, 192) <= 132
        before = pick(m, n, k, one_wave=False)
        assert (before.tile_n, before.policy, before.cluster_size) == (128, "streamk", 1), (m, n, k)
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "OFF_LINES_PAST_WAVE", None)
            mp.setattr(hopper_heuristic, "ROWS_QUAD", None)  # 280 x 5656: three rows of tiles
            assert pick(m, n, k) == before, (m, n, k)
    # B's rows on lines: 128-wide stream-K, as measured there (RESULTS.md, seventeenth session)
    on_lines = hopper.choose_config(1136, 1872, 7320, dtype, 132)
    assert (on_lines.tile_n, on_lines.policy) == (128, "streamk")
    # where B may be copied K-major (N <= 640, M >= 4096): the copy's and swap's rules decide
    assert not hopper_heuristic._past_wave_192(
        HopperConfig(input=dtype, tile_n=128, stages=6, policy="streamk"), 4560, 472, 6032, 132)
    # the transposed product is priced against the 128-wide tiles the rule replaced: 2144x1000x1400
    # runs its 192-wide tiles, where against them the transpose would have been taken (measured behind)
    m, n, k = 2144, 1000, 1400
    a, b, out = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2)), FakeArray((m, n), (2 * n, 2))
    direct = hopper.choose_config(m, n, k, dtype, 132, **hopper.rows_flags([a], [b]))
    assert (direct.tile_n, direct.policy) == (192, "static")
    assert hopper_heuristic._swap_config([a], [b], direct, out, m, n, k, dtype, 132, False) is None
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "_past_wave_priced", lambda direct, *args: direct)
        assert hopper_heuristic._swap_config([a], [b], direct, out, m, n, k, dtype, 132, False) is not None
    # 1.15 waves and more: _mid_tile_pays' own bound (ONE_WAVE_FROM)
    assert not hopper_heuristic._past_wave_192(
        HopperConfig(input=dtype, tile_n=128, stages=6, policy="streamk"), 1664, 1536, 4096, 132)
    # wherever it fires, the tile counts and the config are as the rule says
    rng = np.random.default_rng(75)
    fired = 0
    for _ in range(600):
        m, n, k = (int(x) * 8 for x in rng.integers(16, 2000, size=3))
        if (2 * n) % 128 == 0:
            continue
        cfg, before = pick(m, n, k), pick(m, n, k, one_wave=False)
        if cfg != before and (before.tile_n, before.policy) == (128, "streamk"):
            fired += 1
            assert before.cluster_size == 1 and 132 < hopper_heuristic._tiles(m, n, 128) < 1.15 * 132
            # 160 wide where that takes as many tile columns (SAME_COLUMNS_160)
            assert (cfg.policy, cfg.cluster_size) == ("static", 1) and cfg.tile_n in (160, 192)
            assert cfg.tile_n == 192 or -(-n // 160) == -(-n // 192)
    assert fired


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_b_rows_off_128_take_clusters(dtype, monkeypatch):
    """B read in place with rows off 128-byte lines: cooperative configs become static 2-CTA
    clusters of the OFF_ROWS_CLUSTERS width whose waves cost least, where that costs no more than
    OFF_ROWS_CLUSTER_MARGIN times the config before (RESULTS.md, twenty-second session: the shapes
    it switched and kept)."""
    stages = {w: st for w, st, _ in hopper_heuristic.OFF_ROWS_CLUSTERS}
    monkeypatch.setattr(hopper_heuristic, "MANY_WAVES", None)  # the policy of many waves: its own test
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_192", None)  # the 192-wide split-K after it: its own test
    monkeypatch.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)  # stream-K over the clusters' tail: its own test
    monkeypatch.setattr(hopper_heuristic, "SK_256_CLUSTER_PAD", None)  # the 256-wide stream-K's clusters: own test

    def pick(shape, **kw):
        return hopper.choose_config(*shape, dtype, 132, b_rows_off=(shape[1] * 2) % 32 != 0,
                                    b_rows_off_128=True, **kw)

    switched = {(4096, 4104, 4096): 128, (7136, 1128, 10944): 128, (1328, 7192, 8440): 256,
                (4720, 4296, 1176): 256, (5000, 5000, 5000): 256, (6272, 1264, 12472): 256,
                (2736, 5304, 1376): 256, (8192, 4104, 4096): 256}
    for shape, width in switched.items():
        cfg = pick(shape)
        assert (cfg.cluster_m, cfg.tile_n, cfg.policy, cfg.pingpong) == (2, width, "static", False), shape
        assert cfg.stages == stages[width], shape
    assert pick((2736, 5304, 1376)).epilogue == "tma"  # short K keeps its TMA stores
    # rows on 32-byte sectors: clusters only where their waves cost no more than the config's
    kept = [(3216, 1440, 13480), (1072, 2528, 6280), (4464, 1232, 12240), (5536, 944, 5304),
            (1584, 7248, 4128)]
    for shape in kept:
        assert pick(shape).cluster_m == 1, shape
    # rows off sectors too: up to OFF_ROWS_CLUSTER_MARGIN[0] times its cost
    for shape, width in {(3000, 3000, 3000): 256, (1024, 3000, 8192): 256, (2640, 2296, 12344): 128,
                         (3600, 1416, 8960): 128, (6656, 856, 12480): 128, (1552, 5208, 5496): 256}.items():
        cfg = pick(shape)
        assert (cfg.cluster_m, cfg.tile_n) == (2, width), shape
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "OFF_ROWS_CLUSTER_MARGIN", (1.0, 1.0))
            assert pick(shape).cluster_m == 1, shape
    # the narrow widths replace clusters only over rows on sectors, whatever the margins
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "OFF_ROWS_CLUSTER_MARGIN", (1.0, 1.0))
        narrow = (5379, 552, 809)
        assert hopper.choose_config(*narrow, dtype, 132, b_rows_off_128=True).cluster_m == 1
        assert hopper.choose_config(*narrow, dtype, 132, b_rows_off=True, b_rows_off_128=True).cluster_m == 2
    # never with rows on 128 bytes, an explicit width, a shared GPU, the thin tile or tf32
    for shape in [(8192, 8192, 8192), (4096, 4096, 4096), (1408, 1536, 16384), (8192, 8192, 256),
                  (4096, 4104, 4096)]:
        assert hopper.choose_config(*shape, dtype, 132).cluster_m == 1, shape
    assert pick((4096, 4104, 4096), tile_n=128).cluster_m == 1
    assert pick((4096, 4104, 4096), shared=True).cluster_m == 1
    assert pick((64, 8200, 8192)).pingpong and pick((64, 8200, 8192)).cluster_m == 1
    assert hopper.choose_config(4096, 4104, 4096, "float32", 132, allow_tf32=True,
                                b_rows_off_128=True).cluster_m == 1
    # wherever it fires: cluster waves no dearer than the config without the rule (the 160-wide
    # rule after it off: it narrows what this one leaves; and the halves of a half wave, which
    # take what it does not)
    monkeypatch.setattr(hopper_heuristic, "SAME_COLUMNS_160", None)
    monkeypatch.setattr(hopper_heuristic, "HALF_WAVE_HALVES", None)
    monkeypatch.setattr(hopper_heuristic, "MANY_WAVES", None)  # undone above
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_192", None)  # (its own test)
    rng = np.random.default_rng(7)
    for _ in range(300):
        m, n = (int(x) for x in rng.integers(128, 9000, 2))
        k = int(rng.integers(64, 20000))
        cfg = pick((m, n, k))
        if cfg.policy == "streamk" and cfg.cluster_size == 4:  # the quad stream-K rule, which comes first
            assert hopper_heuristic._quad_streamk_pays(cfg.replace(cluster_m=1, cluster_n=1), m, n, k, 132)
            continue
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "OFF_ROWS_CLUSTERS", ())
            before = pick((m, n, k))
        if cfg.cluster_m == 2:
            assert not before.pingpong and cfg.policy == "static" and cfg.tile_n in stages
            pairs = -(-(-(-m // 128)) // 2)
            waves = -(-(pairs * -(-n // cfg.tile_n)) // 66)
            per_column = {w: c for w, _, c in hopper_heuristic.OFF_ROWS_CLUSTERS}[cfg.tile_n]
            margin = hopper_heuristic.OFF_ROWS_CLUSTER_MARGIN[0 if (n * 2) % 32 else 1]
            assert waves * cfg.tile_n * per_column <= margin * hopper_heuristic._config_cost(before, m, n, k, 132) + 1e-9
        elif cfg != before:  # a narrow product's static width (NARROW_WIDTHS), cheaper than before
            assert n <= hopper_heuristic.NARROW_N and (n * 2) % 32 == 0 and cfg.policy == "static"
            cost = {w: c for w, _, c, _ in hopper_heuristic.NARROW_WIDTHS}[cfg.tile_n]
            assert -(-hopper_heuristic._tiles(m, n, cfg.tile_n) // 132) * cfg.tile_n * cost < hopper_heuristic._config_cost(
                before, m, n, k, 132)
    monkeypatch.setattr(hopper_heuristic, "OFF_ROWS_CLUSTERS", ())
    assert pick((4096, 4104, 4096)).cluster_m == 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_same_columns_take_160(dtype, monkeypatch):
    """192-wide tiles (one CTA per tile, staged) become 160 wide where those take as many tile
    columns: the same tile grid and policy (RESULTS.md, thirty-third session: N of 272-304)."""
    def pick(m, n, k):
        return hopper.choose_config(m, n, k, dtype, 132, **row_major_flags(m, n, k))

    taken = {(6944, 304, 14776): "static", (6376, 304, 12168): "streamk", (7912, 304, 7504): "static",
             (8936, 288, 14624): "streamk", (7984, 272, 7624): "static"}
    for shape, policy in taken.items():
        cfg = pick(*shape)
        assert (cfg.tile_n, cfg.stages, cfg.policy, cfg.epilogue, cfg.cluster_size) == (160, 4, policy, "staged", 1)
        monkeypatch.setattr(hopper_heuristic, "SAME_COLUMNS_160", None)
        before = pick(*shape)
        monkeypatch.undo()
        assert before == cfg.replace(tile_n=192, stages=4), shape
        assert hopper_heuristic._tiles(shape[0], shape[1], 160) == hopper_heuristic._tiles(shape[0], shape[1], 192), shape
    # more columns at 160 (N = 344), clusters (rows off sectors), the issue's 192-wide shape
    for shape in [(13616, 344, 9968), (4720, 264, 6808), (1024, 2112, 8192), (8000, 344, 8000)]:
        assert pick(*shape).tile_n != 160, shape
    # the rule changes no other decision: 2 x 2 clusters stay where a 160-wide rest would have
    # made the 2 x 1 launch's tail split look cheaper (measured 1.15 of cuBLAS on 2 x 2; static
    # as then)
    cfg = pick(13232, 416, 10184)
    assert (cfg.cluster_m, cfg.cluster_n, cfg.tile_n) == (2, 2, 256)
    off = dict(b_rows_off_128=True, a_rows_off_128=True)
    two = cfg.replace(cluster_n=1, policy="static")  # (static: the pairs before CLUSTER_TAIL_SK)
    assert hopper_heuristic.tail_split(two, 13232, 416, 10184, dtype, 132, **off)[1].tile_n == 160  # as gemm_parts runs it
    assert hopper_heuristic.tail_split(two, 13232, 416, 10184, dtype, 132, same_columns=False, **off)[1].tile_n == 192
    rng = np.random.default_rng(8)
    for _ in range(400):
        m, n, k = (int(x) for x in rng.integers(64, 12000, 3))
        cfg = pick(m, n, k)
        if cfg.tile_n == 160 and cfg.epilogue == "staged" and -(-k // 64) > 16:  # (not NARROW_WIDTHS' short K)
            assert -(-n // 160) == -(-n // 192) and cfg.cluster_size == 1, (m, n, k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_cluster_epilogue_follows_k(dtype):
    """A config that passes through a 224-wide tile (staged epilogue) on its way to clusters of 128
    or 256 takes the TMA-store epilogue where K has at most TMA_STORE_K steps, as its first tile
    did (RESULTS.md, twenty-seventh session: ten shapes drawn, 0.81-0.83 -> 0.82-0.83 of cuBLAS)."""
    for m, n, k in [(7048, 1496, 1184), (928, 10792, 1000), (1328, 7784, 1536), (776, 7456, 568)]:
        cfg = hopper.choose_config(m, n, k, dtype, 132, b_rows_off=(n * 2) % 32 != 0,
                                   b_rows_off_128=True, a_rows_off_128=(k * 2) % 128 != 0)
        assert cfg.cluster_m == 2 and cfg.epilogue == "tma", (m, n, k)
        longer = hopper.choose_config(m, n, 4 * k, dtype, 132, b_rows_off=(n * 2) % 32 != 0,
                                      b_rows_off_128=True, a_rows_off_128=True)
        assert longer.epilogue == "staged", (m, n, 4 * k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_narrow_products_pad_fewer_columns(dtype, monkeypatch):
    """At most NARROW_N columns, B's rows off 128 bytes but on 32-byte sectors: a static width of
    NARROW_WIDTHS whose waves cost less than the clusters' replaces them (160 only for short K);
    rows off sectors keep their clusters (RESULTS.md, twenty-fifth session)."""
    def pick(shape):
        return hopper.choose_config(*shape, dtype, 132, b_rows_off=(shape[1] * 2) % 32 != 0,
                                    b_rows_off_128=True, a_rows_off_128=(shape[2] * 2) % 128 != 0)

    for shape, width in {(5800, 784, 712): 160, (16376, 288, 752): 160, (14656, 560, 752): 192,
                         (13576, 544, 2032): 192, (8464, 912, 13824): 192}.items():
        cfg = pick(shape)
        assert (cfg.tile_n, cfg.cluster_size, cfg.policy) == (width, 1, "static"), shape
        monkeypatch.setattr(hopper_heuristic, "NARROW_N", 0)
        monkeypatch.setattr(hopper_heuristic, "CHEAPEST_MAX_WAVES", 4)  # else 192 static before the clusters
        assert pick(shape).cluster_m == 2, shape
        monkeypatch.undo()
    # long K: no 160-wide tiles, and the clusters stay where 192 and 224 cost more
    for shape in [(12184, 544, 4696), (11952, 528, 15040)]:
        assert pick(shape).cluster_m == 2, shape
    # rows off 32-byte sectors (N an odd multiple of 8), or more than NARROW_N columns: clusters
    for shape in [(6656, 856, 12480), (5584, 424, 5208), (4096, 4104, 4096)]:
        assert pick(shape).cluster_m == 2, shape


@pytest.mark.parametrize("shape,strides,ptr,off", [
    ((4096, 4104), (8208, 2), 0x10000, True),   # row-major, rows 8208 bytes apart
    ((4096, 4160), (8320, 2), 0x10000, False),  # rows 8320 bytes apart: on 128
    ((3664, 3824), (7648, 2), 0x10000, False),  # rows 7648 bytes apart: on 32, off 128
    ((4096, 4160), (8320, 2), 0x10010, True),   # ... starting 16 bytes in
    ((4096, 4103), (8206, 2), 0x10000, False),  # rows off 16 bytes: copied into padded rows
    ((4096, 4160), (8320, 2), 0x10002, False),  # start off 16 bytes: copied
    ((4104, 4096), (2, 8208), 0x10000, True),   # column-major B: its rows of K 8208 bytes apart
    ((4096, 4096), (2, 8192), 0x10000, False),  # ... 8192 apart
    ((4104, 4096), (2, 8206), 0x10000, False),  # ... off 16 bytes: copied
    ((4104, 4096), (16, 65664), 0x10000, False),  # neither layout contiguous: copied
    ((1, 4104), (8208, 2), 0x10000, False),     # one row: its stride is never used
    ((1, 4104), (8208, 2), 0x10040, False),
    ((1, 4104), (8208, 2), 0x10030, True),
])
def test_b_rows_off(shape, strides, ptr, off):
    assert hopper_heuristic.b_rows_off([FakeArray(shape, strides, ptr=ptr)]) is off


@pytest.mark.parametrize("shape,strides,ptr,off", [
    ((3664, 3824), (7648, 2), 0x10000, True),   # rows on 32 bytes, off 128
    ((4096, 4104), (8208, 2), 0x10000, True),   # off 32 too
    ((4096, 4160), (8320, 2), 0x10000, False),  # on 128
    ((4096, 4160), (8320, 2), 0x10040, True),   # starting 64 bytes in
    ((4096, 4103), (8206, 2), 0x10000, False),  # copied into padded rows
    ((4104, 4096), (2, 8208), 0x10000, True),   # column-major B, rows of K off 128
    ((4136, 4096), (2, 8320), 0x10000, False),  # column-major B, rows of K on 128
    ((1, 4104), (8208, 2), 0x10080, False),     # one row, on 128
])
def test_b_rows_off_128_byte_lines(shape, strides, ptr, off):
    assert hopper_heuristic.b_rows_off([FakeArray(shape, strides, ptr=ptr)], 128) is off


def test_copies_b_k_major_where_measured(monkeypatch):
    """``copies_b_k_major``: a 16-bit row-major B read in place with rows off 128-byte lines, at most
    ``B_K_MAJOR[0]`` columns, at least ``B_K_MAJOR[1]`` rows of A and ``B_K_MAJOR[2]`` of K,
    ``B_K_MAJOR[3]`` of M x N x K, the heuristic on one CTA per tile (on clusters where the copy's
    tiles are wide, ``B_K_MAJOR_WIDE_OVER_CLUSTERS``); not a K-major B, rows on 128 bytes, a B copied anyway (rows off
    16 bytes), 4-byte elements, clusters, or with the rule off."""
    def b(k, n, ld=None, ptr=0x10000, item=2, k_major=False):
        if k_major:
            return FakeArray((k, n), (item, item * (ld or k)), item, ptr)
        return FakeArray((k, n), (item * (ld or n), item), item, ptr)

    one = HopperConfig(input="float16", tile_n=160)

    def copies(b_parts, m, n, cfg=one):
        return hopper_heuristic.copies_b_k_major(b_parts, m, n, cfg, 132)

    big_m, max_n = hopper_heuristic.B_K_MAJOR[1], hopper_heuristic.B_K_MAJOR[0]
    assert copies([b(2616, 624)], big_m, 624)
    assert copies([b(2616, 640, ptr=0x10020)], big_m, 640)  # rows on 128, start off
    assert copies([b(2616, 624, ld=640), b(100, 624)], big_m, 624)  # one part off
    assert not copies([b(2616, 624, ld=640), b(100, 624, ld=704)], big_m, 624)
    assert not copies([b(2616, 624)], big_m - 8, 624)
    min_k = hopper_heuristic.B_K_MAJOR[2]
    assert not copies([b(min_k - 8, 624)], big_m, 624)
    assert copies([b(min_k - 8, 624), b(8, 624)], big_m, 624)  # K of the parts
    assert not copies([b(2616, max_n + 8)], big_m, max_n + 8)
    assert not copies([b(2616, 640)], big_m, 640)  # on 128-byte lines
    assert not copies([b(2616, 624, k_major=True)], big_m, 624)  # read K-major
    assert not copies([b(2616, 620)], big_m, 620)  # rows off 16 bytes: copied
    assert not copies([b(2616, 624, item=4)], big_m, 624)
    assert not copies([b(2616, 624), b(100, 624, k_major=True)], big_m, 624)
    clusters = one.replace(tile_n=128, cluster_m=2)
    assert hopper_heuristic.k_major_copy_config(big_m, 624, 2616, "float16", 132).tile_n == 160
    assert not copies([b(2616, 624)], big_m, 624, clusters)  # over clusters: not to 160-wide tiles
    assert hopper_heuristic.k_major_copy_config(8344, 624, 2616, "float16", 132).tile_n == 320
    assert copies([b(2616, 624)], 8344, 624, clusters)  # ... but to wide ones
    assert copies([b(11864, 280)], 13504, 280, clusters)  # 128 x 288 on the copy
    assert not copies([b(2616, 640)], 8344, 640, clusters)  # on 128-byte lines
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "B_K_MAJOR_WIDE_OVER_CLUSTERS", False)
        assert not copies([b(2616, 624)], 8344, 624, clusters)
        assert copies([b(2616, 624)], 8344, 624)  # one CTA a tile: as before
    work = hopper_heuristic.B_K_MAJOR[3]
    assert copies([b(2616, 312)], -(-work // (2616 * 312)), 312)  # the work floor
    assert not copies([b(2616, 312)], -(-work // (2616 * 312)) - 8, 312)
    assert not copies([b(2088, 480)], 4232, 480)  # 21 us: the copy cost more than it saved
    # rows on 64-byte lines: copied only where the copy's tiles are of another width
    on_64 = one.replace(tile_n=128, stages=6)
    assert hopper_heuristic.k_major_copy_config(4200, 480, 5760, "float16", 132).tile_n == 128
    assert not copies([b(5760, 480)], 4200, 480, on_64)
    assert copies([b(5760, 480, ptr=0x10020)], 4200, 480, on_64)  # a start off 64 bytes
    assert copies([b(5760, 480, ld=488)], 4200, 480, on_64)  # rows off 64 bytes
    assert copies([b(6000, 416)], 5000, 416)  # 160 in place, 144 on the copy

    def gemm_copies(m, n, k):  # contiguous row-major operands and output, as gemm_parts picks
        return hopper_heuristic.gemm_copies_b([FakeArray((m, k), (2 * k, 2))], [b(k, n)],
                                              FakeArray((m, n), (2 * n, 2)), m, n, k, "float16", 132)
    assert gemm_copies(15024, 288, 15168) and gemm_copies(8200, 304, 2641)  # 128x160, one CTA a tile
    assert not gemm_copies(8952, 400, 4736)  # runs transposed (swap_pays)
    assert not gemm_copies(13984, 464, 14960)  # 2 x 2 clusters
    assert gemm_copies(5000, 416, 6000) and not gemm_copies(4200, 480, 5760)  # rows on 64 bytes
    assert swap_pick(4200, 480, 5760, "float16")[1].cluster_m == 2  # one wave: ONE_WAVE_SWAP
    monkeypatch.setattr(hopper_heuristic, "ONE_WAVE_SWAP", None)
    assert not gemm_copies(4200, 480, 5760)  # rows on 64 bytes, 128 wide either way: in place
    monkeypatch.setattr(hopper_heuristic, "B_K_MAJOR", None)
    assert not copies([b(2616, 624)], big_m, 624)
    assert not gemm_copies(15024, 288, 15168)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_swap_where_the_transpose_tiles_better(dtype, monkeypatch):
    """``swap_pays``: the transposed product where its padded work is below ``SWAP_MARGIN`` of the
    direct one's, both cooperative and staged, the transpose on the direct cluster shape or on one
    CTA per tile; never for its own transpose, for short K (TMA stores), tf32 or pingpong;
    ``_swap_config`` only into a row-major output with 16-byte aligned rows, and then with the
    columns epilogue.  Row-major contiguous operands, their row flags as ``gemm_parts`` sees them."""
    def pays(m, n, k):
        a, b = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2))
        direct = hopper.choose_config(m, n, k, dtype, 132, **hopper.rows_flags([a], [b]))
        swapped = hopper.choose_config(n, m, k, dtype, 132, **hopper.rows_flags([b.T], [a.T]))
        return hopper.swap_pays(direct, swapped, m, n), direct, swapped

    assert pays(2112, 1024, 8192)[0] and not pays(1024, 2112, 8192)[0]
    yes, direct, swapped = pays(14952, 592, 2280)  # 2 x 1 clusters both ways: 295 tiles against 351
    assert yes and direct.cluster_m == swapped.cluster_m == 2
    yes, direct, swapped = pays(5712, 592, 11088)  # clusters to one CTA per tile: one wave of 224 wide
    assert yes and (direct.cluster_m, swapped.cluster_m, swapped.tile_n) == (2, 1, 224)
    for m, n, k in [(664, 10104, 3384), (4808, 768, 7112)]:  # 2 x 2 -> 2 x 1, and 1 x 1 -> 2 x 1
        yes, direct, swapped = pays(m, n, k)
        assert not yes and swapped.cluster_size > 1 and swapped.cluster_size != direct.cluster_size
    assert not pays(7128, 7488, 8256)[0]  # 0.983 of the padded work: level, measured
    assert not pays(2112, 1024, 1024)[0]  # K of 16 steps: TMA stores, which swap_pays takes if asked
    assert hopper.swap_pays(*pays(2112, 1024, 1024)[1:], 2112, 1024, ("staged", "tma"))
    assert not pays(8192, 8192, 8192)[0] and not pays(64, 8192, 8192)[0]  # level; pingpong's thin tile
    tf32 = hopper.choose_config(2112, 1024, 8192, "float32", 132, allow_tf32=True)
    assert not hopper.swap_pays(tf32, hopper.choose_config(1024, 2112, 8192, "float32", 132, allow_tf32=True),
                                2112, 1024)
    direct = hopper.choose_config(2112, 1024, 8192, dtype, 132)
    a = FakeArray((2112, 8192), (16384, 2))
    b = FakeArray((8192, 1024), (2048, 2))
    swapped = hopper_heuristic._swap_config([a], [b], direct, FakeArray((2112, 1024), (2048, 2)), 2112,
                                            1024, 8192, dtype, 132, False)
    assert swapped == hopper.choose_config(1024, 2112, 8192, dtype, 132).replace(epilogue="columns")
    assert swapped.smem_bytes == hopper.choose_config(1024, 2112, 8192, dtype, 132).smem_bytes
    for out in (FakeArray((2112, 1024), (1, 2112)),  # column-major
                FakeArray((2112, 1024), (2050, 2)),  # rows off 16 bytes
                FakeArray((2112, 1024), (2048, 2), ptr=0x10002)):
        assert hopper_heuristic._swap_config([a], [b], direct, out, 2112, 1024, 8192, dtype, 132, False) is None
    def short(m, n, k):  # _swap_config over row-major operands where the direct config stores through TMA
        d, swapped = swap_pick(m, n, k, dtype)
        assert d.epilogue == "tma"
        return swapped
    assert short(4176, 536, 1280).epilogue == short(4176, 536, 1392).epilogue == "columns"  # K from SWAP_TMA_MIN_K
    assert short(4176, 536, 1216) is None
    monkeypatch.setattr(hopper_heuristic, "SWAP_TMA_MIN_K", 1216)
    assert short(4176, 536, 1216).tile_n == 192
    monkeypatch.setattr(hopper_heuristic, "SWAP_TMA_MIN_K", None)
    assert short(4176, 536, 1392) is None
    monkeypatch.undo()
    rng = np.random.default_rng(7)  # the shape-only bound refuses none that swap_pays takes
    for m, n, k in (8 * rng.integers(32, 2048, size=3) for _ in range(300)):
        yes, direct, _ = pays(int(m), int(n), int(k))
        assert not yes or hopper_heuristic._swap_may_pay(int(m), int(n), direct.tile_n, hopper_heuristic.SWAP_MARGIN), (m, n, k)
    assert not hopper_heuristic._swap_may_pay(8192, 8192, 256, hopper_heuristic.SWAP_MARGIN)
    monkeypatch.setattr(hopper_heuristic, "SWAP_MARGIN", None)
    assert not pays(2112, 1024, 8192)[0]
    assert hopper_heuristic._swap_config([a], [b], direct, FakeArray((2112, 1024), (2048, 2)), 2112,
                                         1024, 8192, dtype, 132, False) is None


@pytest.mark.parametrize("shape,strides,ptr,off", [
    ((3000, 3000), (6000, 2), 0x10000, True),   # row-major A, rows of K off 128
    ((3000, 3008), (6016, 2), 0x10000, False),  # on 128
    ((3000, 3008), (6016, 2), 0x10020, True),   # starting 32 bytes in
    ((3000, 3008), (2, 6000), 0x10000, True),   # column-major A, rows of M off 128
    ((3008, 3000), (2, 6016), 0x10000, False),  # column-major A, rows of M on 128
    ((3000, 3001), (6002, 2), 0x10000, False),  # copied into padded rows
])
def test_a_rows_off_128_byte_lines(shape, strides, ptr, off):
    """rows_flags' a_rows_off_128: A (M x K) read in place with rows (of K, or of M where A is
    column-major) off 128-byte lines; float32 (tf32 copies) never."""
    a = FakeArray(shape, strides, ptr=ptr)
    b = FakeArray((shape[1], 4160), (8320, 2))
    assert hopper.rows_flags([a], [b]) == {"b_rows_off": False, "b_rows_off_128": False, "a_rows_off_128": off,
                                           "b_row_major": True}
    a32 = FakeArray(shape, tuple(2 * x for x in strides), itemsize=4, ptr=ptr)
    assert not hopper.rows_flags([a32], [b])["a_rows_off_128"]


def test_heuristic_a_rows_off_128_takes_2x2_clusters(monkeypatch):
    """Where the heuristic takes static 2-CTA clusters (B's rows off 128 bytes) and A's rows are off
    128 bytes too, 2 x 2 clusters of the same width where their blocks run in no more waves of
    quad_clusters(sms) than the pairs in waves of sms // 2, at most BLOCK_PAD of their CTAs sit
    past N, and, 256 wide, the pairs would not run as two launches; never elsewhere.  (The quad
    stream-K rule, which comes before these, and the 192-wide split-K and the clusters' stream-K
    tail after them, off.)"""
    monkeypatch.setattr(hopper_heuristic, "QUAD_SK", None)
    monkeypatch.setattr(hopper_heuristic, "SPLIT_K_192", None)
    monkeypatch.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)
    off = dict(b_rows_off=True, b_rows_off_128=True)
    slots = hopper_heuristic.quad_clusters(132)
    took = set()
    for shape in ((3000, 3000, 3000), (1240, 1368, 3416), (5000, 5000, 5000), (11248, 856, 1144),
                  (4096, 4104, 4104), (2760, 2832, 3160), (624, 10992, 11928), (12408, 12144, 6008),
                  (3424, 744, 2008), (1952, 624, 12768), (4992, 1784, 6440), (2368, 1312, 2840),
                  (2760, 1704, 5304), (1536, 2920, 4328)):
        pair = hopper.choose_config(*shape, "float16", 132, **off)
        got = hopper.choose_config(*shape, "float16", 132, a_rows_off_128=True, **off)
        assert pair.cluster_m == 2 and pair.cluster_n == 1, shape
        rows, cols = -(-shape[0] // 128), -(-shape[1] // pair.tile_n)
        fewer = -(-(-(-rows // 2) * -(-cols // 2)) // slots) <= -(-(-(-rows // 2) * cols) // 66)
        padded = cols % 2 == 1 and 1 / (cols + 1) > hopper_heuristic.BLOCK_PAD
        split = hopper_heuristic.tail_split(pair, *shape, "float16", 132, a_rows_off_128=True, **off)
        split = (split is not None and split[2] <= hopper_heuristic.TAIL_SPLIT
                 and pair.tile_n in hopper_heuristic.SPLIT_OVER_BLOCKS)
        assert got == (pair.replace(cluster_n=2) if fewer and not padded and not split else pair), shape
        if got.cluster_n == 2:
            took.add(shape)
    # 128 wide, where the pairs would run as two launches: 2 x 2 all the same
    assert {(11248, 856, 1144), (1240, 1368, 3416), (2368, 1312, 2840), (2760, 1704, 5304),
            (1536, 2920, 4328)} <= took
    assert not took & {(3424, 744, 2008), (1952, 624, 12768), (4992, 1784, 6440), (3000, 3000, 3000)}
    # no clusters to begin with (B's rows on 128 bytes), or the rule off: A's flag changes nothing
    for shape in ((3000, 3008, 3000), (1000, 1024, 1000)):
        assert hopper.choose_config(*shape, "float16", 132, a_rows_off_128=True).cluster_size == 1
    monkeypatch.setattr(hopper_heuristic, "OFF_ROWS_BLOCKS", False)
    assert hopper.choose_config(3000, 3000, 3000, "float16", 132, a_rows_off_128=True, **off).cluster_n == 1


def test_heuristic_few_stages_for_the_shortest_k():
    """The cooperative tiles on 4 stages where K has at most 4 64-wide steps (ahead of 6 at
    K = 256 on the H200, RESULTS.md thirteenth session); their usual stages from K = 257 on; the
    thin tile keeps its own."""
    steps, few = hopper_heuristic.FEW_STAGES_K
    for m, n in [(8192, 8192), (4096, 4096), (16384, 16384), (1024, 2112)]:
        assert hopper.choose_config(m, n, 64 * steps, "float16", 132).stages == few
        assert hopper.choose_config(m, n, 1, "bfloat16", 132).stages == few
        cfg = hopper.choose_config(m, n, 64 * steps + 1, "float16", 132)
        assert cfg.stages == dict(hopper_heuristic.CHEAPEST_WIDTHS)[cfg.tile_n]
    assert hopper.choose_config(64, 8192, 256, "float16", 132).stages == hopper_heuristic.THIN_TILE[2]


@pytest.mark.parametrize("dtype,allow_tf32", [("float16", False), ("bfloat16", False), ("float32", True)])
def test_heuristic_thin_products(dtype, allow_tf32, monkeypatch):
    """At most 64 rows or columns: pingpong consumers on 64 x 64 tiles (64x8192x8192: 0.93-0.99 of
    cuBLAS against 0.74-0.75 for the 128x128 stream-K tile on the H200), with the policy
    fit_policy picks; 16-bit ones past a wave of them on tiles twice as long (THIN_LONG); but the
    cooperative tile and its spread fix-up where stream-K would split each thin tile eight or more
    ways; and an explicit tile_n keeps the cooperative tiles."""
    def choose(*shape, **kw):
        return hopper.choose_config(*shape, dtype, 132, allow_tf32=allow_tf32, **kw)
    cfg = choose(64, 8192, 8192)
    assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.pingpong) == (64, 64, 12, True)
    assert (cfg.policy, cfg.sk_reduce, cfg.epilogue) == ("static", "owner", "staged")
    assert cfg.smem_bytes <= hopper_config.SMEM_LIMIT
    assert choose(1, 100000, 512).pingpong and choose(33, 4096, 4096).policy == "streamk"
    assert choose(64, 8192, 8192, shared=True).policy == "dynamic"
    wide = choose(64, 256, 65536)  # 4 thin tiles over 132 SMs: each split 33 ways
    assert not wide.pingpong and wide.sk_reduce == "spread"
    assert choose(64, 2048, 8192).pingpong  # 32 thin tiles: split about 4 ways, still thin
    assert not choose(64, 1024, 8192).pingpong  # 16: split 8 ways
    assert not choose(65, 8192, 8192).pingpong
    cols = choose(8192, 64, 8192)  # at most 64 columns: thin too
    assert (cols.tile_m, cols.tile_n, cols.pingpong, cols.policy) == (64, 64, True, "static")
    assert choose(8192, 1, 8192).pingpong and not choose(8192, 65, 8192).pingpong
    assert not choose(64, 8192, 8192, tile_n=128).pingpong
    # past one wave of thin tiles, 16-bit products take them twice as long along the long side
    # (THIN_LONG); at one wave (64 x 8448: 132 tiles), tf32 and with the rule off they do not
    long, stages, sk_steps = hopper_heuristic.THIN_LONG
    sixteen = dtype != "float32"
    # (10768x11x928 and 24840x16x544: the longer tiles would run stream-K over fewer than sk_steps)
    for shape, tile in (((32, 16384, 8192), (64, long)), ((16384, 32, 8192), (long, 64)),
                        ((8, 40000, 1024), (64, long)), ((64, 8448, 8192), (64, 64)),
                        ((10768, 11, 928), (64, 64)), ((24840, 16, 544), (64, 64)),
                        ((24840, 16, 64 * sk_steps), (long, 64))):
        cfg = choose(*shape)
        want = tile if sixteen else (64, 64)
        assert (cfg.tile_m, cfg.tile_n, cfg.pingpong) == (*want, True), shape
        assert cfg.stages == (stages if want != (64, 64) else 12), shape
        assert cfg.smem_bytes <= hopper_config.SMEM_LIMIT
    # fewer than 64 rows whose static thin tiles fill one wave more than half: the long tiles
    # split-K THIN_LONG_SPLIT ways (as many CTAs); not at 64 rows, thin N, a shared GPU or tf32
    cfg = choose(16, 8192, 8192)
    if sixteen:
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.pingpong) == (64, long, stages, True)
        assert (cfg.policy, cfg.sk_ways, cfg.sk_reduce) == ("streamk", hopper_heuristic.THIN_LONG_SPLIT, "owner")
        assert hopper.plan_launch(cfg, 16, 8192, 8192, 132).grid == 64 * hopper_heuristic.THIN_LONG_SPLIT
    else:
        assert (cfg.tile_n, cfg.policy) == (64, "static")
    for shape in ((64, 8192, 8192), (8192, 16, 8192)):
        assert (choose(*shape).tile_n, choose(*shape).policy) == (64, "static"), shape
    assert (choose(16, 8192, 8192, shared=True).tile_n, choose(16, 8192, 8192, shared=True).policy) == (64, "dynamic")
    monkeypatch.setattr(hopper_heuristic, "THIN_LONG_SPLIT", None)
    assert (choose(16, 8192, 8192).tile_n, choose(16, 8192, 8192).policy) == (64, "static")
    monkeypatch.setattr(hopper_heuristic, "THIN_LONG", None)
    assert (choose(32, 16384, 8192).tile_n, choose(16384, 32, 8192).tile_m) == (64, 64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_swap_priced_on_wide_tiles(dtype, monkeypatch):
    """A narrow M (257-288 or 513-576 rows) whose transposed product's own tiles pad it as much as
    the direct ones (192 wide at short K), A row-major, the direct config past one wave: the
    transposed product on 288-wide tiles, which pad it less (``_wide_swap_pays``; RESULTS.md,
    fifty-third session: the sizes of its first draw), static below K of ``WIDE_SK_MIN_K``; not
    with ``SWAP_WIDE_PRICED`` off, over a column-major A, below ``SWAP_WIDE_MIN_K[288]``, or where
    the direct config takes one wave."""
    fired = {(272, 12936, 1392): 1, (277, 12960, 1312): 1, (288, 14704, 1408): 1, (265, 12056, 1704): 2,
             (274, 12056, 2048): 1, (288, 15544, 1280): 1}
    for (m, n, k), cluster_m in fired.items():
        direct, swapped = swap_pick(m, n, k, dtype)
        assert hopper_heuristic._tiles(m, n, direct.tile_n) > 132, (m, n, k)
        assert (swapped.tile_n, swapped.stages, swapped.out_cols, swapped.policy, swapped.epilogue,
                swapped.cluster_m) == (288, 4, 48, "static", "columns", cluster_m), (m, n, k)
        assert swap_pick(m, n, k, dtype, a_strides=(2, 2 * m))[1] is None, (m, n, k)  # A column-major
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "SWAP_WIDE_PRICED", False)
            assert swap_pick(m, n, k, dtype)[1] is None, (m, n, k)
    assert swap_pick(272, 12936, 1272, dtype)[1] is None  # K below SWAP_WIDE_MIN_K[288]
    assert swap_pick(576, 6472, 3456, dtype)[1] is None  # one wave of 128 x 256 tiles already
    # where swap_pays holds on the transposed product's own tiles, the wide ones all the same
    assert swap_pick(520, 6736, 1928, dtype)[1].tile_n == 288


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_swap_onto_64_row_tiles(dtype, monkeypatch):
    """SWAP_64_ROWS: where the heuristic's config is 128 x 192 single-CTA tiles (stream-K or static)
    and the transposed product's 64 x 256 tiles fill one wave, over a row-major A from K of
    SWAP_64_ROWS[1]: those tiles, static, five stages, 64 columns at a time (RESULTS.md,
    seventy-eighth session: five of the six sizes fitted; eightieth: sizes drawn with A's and B's
    rows on 128-byte lines); not with either's rows off those lines, A column-major, K below the
    rule's, the tiles short of the rule's share of a wave or past one, a direct config of 128 x 128
    tiles, or the rule off."""
    for m, n, k in ((1024, 2112, 2048), (1024, 2112, 4096), (1024, 2112, 6144), (1024, 2112, 8192),
                    (1024, 2112, 16384), (2968, 704, 9920), (3072, 704, 9920), (2968, 704, 4096)):
        direct, swapped = swap_pick(m, n, k, dtype)
        assert (direct.tile_m, direct.tile_n, direct.cluster_size) == (128, 192, 1), (m, n, k)
        assert (swapped.tile_m, swapped.tile_n, swapped.stages, swapped.out_cols, swapped.policy,
                swapped.epilogue, swapped.cluster_size) == (64, 256, 5, 64, "static", "columns", 1), (m, n, k)
        assert hopper_heuristic._tiles(n, m, 256, 64) == 132
        assert swap_pick(m, n, k, dtype, a_strides=(2, 2 * m))[1] is None, (m, n, k)  # A column-major
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "SWAP_64_ROWS", None)
            assert swap_pick(m, n, k, dtype)[1] is None, (m, n, k)
    assert swap_pick(1024, 2112, 1024, dtype)[1] is None  # K below SWAP_64_ROWS[1]
    # B's rows off 128-byte lines (N of 2080, 2104, 672, 824), or A's (K of 7984, 8480): not on 64-row tiles
    for m, n, k in ((1024, 2080, 12288), (928, 2104, 9264), (2880, 672, 4136), (2560, 824, 3112),
                    (2848, 704, 7984), (1016, 2112, 8480)):
        direct, swapped = swap_pick(m, n, k, dtype)
        assert direct.tile_n == 192 and (swapped is None or swapped.tile_m == 128), (m, n, k)
    for m, n, k in ((768, 2816, 8192), (1024, 2048, 8192), (1536, 1408, 8192)):  # 128 x 128 tiles fill a wave
        direct, swapped = swap_pick(m, n, k, dtype)
        assert direct.tile_n == 128 and (swapped is None or swapped.tile_m == 128), (m, n, k)
    direct, swapped = swap_pick(1024, 2304, 8192, dtype)  # 128 x 192 tiles, but 36 x 4 transposed: past a wave
    assert direct.tile_n == 192 and (swapped is None or swapped.tile_m == 128)
    # short of the rule's share of a wave (29 x 4 tiles) on 128 x 192 tiles: _swap_64_rows' doctest


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_quad_streamk_over_256_wide_blocks(dtype, monkeypatch):
    """QUAD_SK_256: static 128 x 256 tiles on 2 x 2 clusters (A's and B's rows off 128-byte lines)
    whose blocks fill at most 0.8 of a wave of the clusters, from 100 K steps: stream-K over the
    blocks, the owner fix-up (RESULTS.md, eighty-first session); below 100 steps, past 0.8 of a
    wave, past one wave, or with the rule off, the static clusters."""
    def config(m, n, k):
        a, b = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2))
        return hopper.choose_config(m, n, k, dtype, 132, **hopper.rows_flags([a], [b]))

    for m, n, k in ((1024, 2344, 7456), (416, 4968, 6472), (4824, 504, 14408), (1192, 1992, 9544)):
        c = config(m, n, k)
        assert (c.tile_n, c.cluster_m, c.cluster_n, c.policy, c.sk_reduce, c.sk_ways) == \
            (256, 2, 2, "streamk", "owner", 0), (m, n, k)
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "QUAD_SK_256", None)
            assert config(m, n, k) == c.replace(policy="static"), (m, n, k)
    # 65 and 84 steps; 26 blocks of 30 (0.87 of a wave); 1.8 and 3.6 waves of blocks
    for m, n, k in ((512, 5496, 4104), (5160, 472, 5384), (6616, 488, 9312), (2072, 3040, 13200),
                    (1352, 9128, 6928)):
        c = config(m, n, k)
        assert (c.tile_n, c.cluster_m, c.cluster_n, c.policy) == (256, 2, 2, "static"), (m, n, k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_duo_streamk_over_256_wide_blocks(dtype, monkeypatch):
    """DUO_SK_256, off: static 128 x 256 tiles on 2 x 2 clusters (A's and B's rows off 128-byte
    lines) past one wave of the clusters stay there (sizes drawn after the rule was fitted lost on
    the pairs: RESULTS.md, eighty-third session).  Turned on, such blocks below seven waves, over
    eight rows of tiles or more and 80 K steps or more, run stream-K on 2 x 1 clusters, sk_waves 1,
    the owner fix-up; with fewer rows, fewer steps or seven whole waves, the 2 x 2 clusters."""
    def config(m, n, k):
        a, b = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2))
        return hopper.choose_config(m, n, k, dtype, 132, **hopper.rows_flags([a], [b]))

    assert hopper_heuristic.DUO_SK_256 is None
    fitted = ((1352, 9128, 6928), (2568, 4960, 10160), (5392, 2504, 13360), (984, 13424, 13928),
              (3832, 2008, 7120))  # (the last lost: 1.00 -> 0.84 of cuBLAS)
    static = {shape: config(*shape) for shape in fitted}
    for shape, c in static.items():
        assert (c.tile_n, c.cluster_m, c.cluster_n, c.policy) == (256, 2, 2, "static"), shape
    monkeypatch.setattr(hopper_heuristic, "DUO_SK_256", (8, 80, 7))
    for shape, c in static.items():
        assert config(*shape) == c.replace(policy="streamk", cluster_n=1, sk_waves=1, sk_reduce="owner",
                                           sk_ways=0), shape
    # 7 and 6 rows of tiles; 49 steps; 210 blocks, seven whole waves of 30
    for m, n, k in ((808, 14104, 13672), (688, 13616, 10824), (1816, 13272, 3176), (3632, 7024, 6192)):
        c = config(m, n, k)
        assert (c.tile_n, c.cluster_m, c.cluster_n, c.policy) == (256, 2, 2, "static"), (m, n, k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_direct_onto_64_row_tiles(dtype, monkeypatch):
    """DIRECT_64_ROWS: where ``route`` would transpose the product onto 128 x 192 single-CTA
    tiles whose direct 64 x 256 tiles fill a wave, A and B row-major with their rows on 128-byte
    lines: one launch of those tiles, static, five stages, the staged epilogue 64 columns at a time
    (RESULTS.md, eightieth session); the transposed product with A's or B's rows off lines, B
    column-major, or the rule off."""
    def route(m, n, k, b_strides=None):
        a, b = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), b_strides or (2 * n, 2))
        flags = hopper.rows_flags([a], [b])
        config = hopper.choose_config(m, n, k, dtype, 132, **flags)
        return hopper_heuristic.route([a], [b], FakeArray((m, n), (2 * n, 2)), config, m, n, k, dtype, 132, flags)

    for m, n, k in ((2112, 1024, 4096), (2112, 1024, 8192), (2080, 1024, 8192), (664, 2944, 2880),
                    (2096, 1024, 2048), (2061, 1024, 4160)):  # (the last: test_direct_64_row_tiles')
        way = route(m, n, k)
        c = way.config
        assert way.how == "one" and (c.tile_m, c.tile_n, c.stages, c.out_cols, c.policy, c.epilogue,
                                     c.cluster_size) == (64, 256, 5, 64, "static", "staged", 1), (m, n, k)
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "DIRECT_64_ROWS", None)
            way = route(m, n, k)
            assert way.how == "swap" and (way.config.tile_m, way.config.tile_n) == (128, 192), (m, n, k)
    for m, n, k in ((2112, 1024, 8200), (2112, 1024, 4104)):  # A's rows off 128-byte lines (read in place)
        assert route(m, n, k).config.tile_m == 128, (m, n, k)
    for m, n, k in ((2064, 1016, 12480), (688, 2928, 2816)):  # B's rows off 128-byte lines
        way = route(m, n, k)
        assert way.how == "swap" and way.config.tile_m == 128, (m, n, k)
    assert route(2112, 1024, 8192, b_strides=(2, 2 * 8192)).config.tile_m == 128  # B column-major


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_one_wave_swap_over_b_rows_off_sectors(dtype, monkeypatch):
    """B's rows off 128-byte lines (ONE_WAVE_SWAP_ROWS), A row-major, the heuristic's config one
    wave of static single-CTA tiles from OFF_ROWS_ONE_WAVE of a wave of 128-wide ones: the
    transposed product on static 2 x 1 clusters of the ONE_WAVE_SWAP width that pads M least
    (RESULTS.md, forty-fifth session: the five sizes fitted); not with B's rows on 128-byte lines,
    A column-major, two waves, a cluster config, or the rule off; under TMA stores only with
    ONE_WAVE_SWAP_TMA and B's rows off 32-byte sectors."""
    widths = {(288, 5592, 2920): 144, (568, 2840, 5968): 144, (1544, 1256, 8392): 144,
              (352, 5224, 5704): 128, (1328, 1480, 5688): 128}
    for (m, n, k), width in widths.items():
        direct, swapped = swap_pick(m, n, k, dtype)
        assert (direct.tile_n, direct.policy, direct.cluster_size) == (192, "static", 1), (m, n, k)
        assert (swapped.tile_n, swapped.cluster_m, swapped.cluster_n, swapped.policy, swapped.epilogue
                ) == (width, 2, 1, "static", "columns"), (m, n, k)
        assert swapped.stages == dict(hopper_heuristic.ONE_WAVE_SWAP)[width]
        assert swap_pick(m, n, k, dtype, a_strides=(2, 2 * m))[1] is None, (m, n, k)  # A column-major
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "ONE_WAVE_SWAP", None)
            assert swap_pick(m, n, k, dtype)[1] is None, (m, n, k)
    assert swap_pick(1328, 1472, 5688, dtype)[1] is None  # B's rows on 128-byte lines
    # B's rows on sectors, off 128-byte lines (ONE_WAVE_SWAP_ROWS): 128 x 128 static one wave
    direct, swapped = swap_pick(264, 5136, 6112, dtype)
    assert (direct.tile_n, swapped.tile_n, swapped.cluster_m) == (128, 144, 2)
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "ONE_WAVE_SWAP_ROWS", 32)
        assert swap_pick(264, 5136, 6112, dtype)[1] is None
        assert swap_pick(288, 5592, 2920, dtype)[1].tile_n == 144
    # the direct config storing through TMA (K of SWAP_TMA_MIN_K to TMA_STORE_K steps)
    direct, swapped = swap_pick(520, 3176, 1704, dtype)
    assert direct.epilogue == "tma" and (swapped.tile_n, swapped.epilogue) == (144, "columns")
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "ONE_WAVE_SWAP_TMA", False)
        assert swap_pick(520, 3176, 1704, dtype)[1] is None
    # ... only over rows off 32-byte sectors: on them (off 128 bytes) the direct TMA stores stay
    direct, swapped = swap_pick(600, 3104, 1712, dtype)
    assert direct.epilogue == "tma" and swapped is None
    assert swap_pick(600, 3104, 2112, dtype)[1].cluster_m == 2  # the staged epilogue: taken
    assert swap_pick(4728, 856, 4400, dtype)[1].tile_n == 288  # two waves: SWAP_ONE_WAVE_WIDE's
    direct, swapped = swap_pick(1888, 968, 3072, dtype)  # the off-rows clusters: swap_pays decides
    assert direct.cluster_m == 2 and (swapped is None or swapped.cluster_size == direct.cluster_size)
    # wherever it fires: one wave of clusters, each the width that pads M least
    rng = np.random.default_rng(45)
    fired = 0
    for _ in range(3000):
        m, n, k = (int(x) * 8 for x in rng.integers(16, 2000, size=3))
        n |= 8  # rows off 32-byte sectors (and 128-byte lines)
        direct, swapped = swap_pick(m, n, k, dtype)
        if swapped is None or swapped.tile_n not in dict(hopper_heuristic.ONE_WAVE_SWAP) or swapped.cluster_m != 2:
            continue
        if (direct.cluster_size, direct.policy) != (1, "static") or direct.epilogue not in ("staged", "tma"):
            continue
        fired += 1
        assert hopper_heuristic._tiles(m, n, direct.tile_n) <= 132 and hopper_heuristic._tiles(m, n, 128) <= 132
        assert hopper_heuristic._cluster_waves(n, m, swapped.tile_n, 1, 132)[0] == 1
        pads = {w: -(-m // w) * w for w in dict(hopper_heuristic.ONE_WAVE_SWAP)}
        assert pads[swapped.tile_n] == min(pads.values())
    assert fired


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_one_wave_of_wide_tiles_transposed(dtype, monkeypatch):
    """M and N past WIDE_MAX_N, A row-major, the heuristic's config more than one wave and
    ``swap_pays`` not holding: the transposed product on one wave of SWAP_ONE_WAVE_WIDE tiles
    (RESULTS.md, forty-sixth session), four stages staging 48 columns at a time
    (SWAP_WIDE_CHUNKED), on 2 x 1 clusters where A's rows are off 32-byte sectors
    (SWAP_WIDE_CLUSTER_M) and only where the tiles span M in at most SWAP_ONE_WAVE_WIDE[1]
    columns; not where the direct config is one wave, the wide tiles take more than one, K is
    short, A is column-major, or the rule is off."""
    fired = {(4728, 856, 4400): 1, (856, 5432, 6088): 2, (792, 5072, 11208): 2, (776, 4968, 3304): 2,
             (840, 5528, 6264): 2, (2384, 1784, 2800): 1, (1040, 4224, 12976): 1}
    for (m, n, k), cluster_m in fired.items():
        direct, swapped = swap_pick(m, n, k, dtype)
        assert hopper_heuristic._tiles(m, n, direct.tile_n) > 132, (m, n, k)
        assert (swapped.tile_n, swapped.stages, swapped.out_cols, swapped.policy, swapped.epilogue,
                swapped.cluster_m, swapped.cluster_n) == (288, 4, 48, "static", "columns", cluster_m, 1)
        assert swap_pick(m, n, k, dtype, a_strides=(2, 2 * m))[1] is None, (m, n, k)  # A column-major
        with monkeypatch.context() as mp:
            mp.setattr(hopper_heuristic, "SWAP_ONE_WAVE_WIDE", None)
            assert swap_pick(m, n, k, dtype)[1] is None, (m, n, k)
    assert swap_pick(808, 4144, 10352, dtype)[1] is None  # one wave of 128 x 256 already
    assert swap_pick(872, 5632, 10568, dtype)[1] is None  # four columns of 288: 176 tiles
    assert swap_pick(4728, 856, 1992, dtype)[1] is None  # K below WIDE_MIN_K
    assert swap_pick(3408, 1328, 3880, dtype)[1] is None  # clusters across twelve columns
    assert swap_pick(3432, 1056, 5648, dtype)[1].tile_n == 256  # swap_pays: its own tiles
    direct, _ = swap_pick(8728, 312, 2352, dtype)  # narrow N: B's K-major copy decides
    assert not hopper_heuristic._wide_one_wave(direct, 8728, 312, 2352, 132, 288)
    rng = np.random.default_rng(46)
    seen = 0
    for _ in range(3000):
        m, n, k = (int(x) * 8 for x in rng.integers(97, 2000, size=3))
        direct, swapped = swap_pick(m, n, k, dtype)
        if swapped is not None and swapped.tile_n == 288:
            seen += 1
            assert hopper_heuristic._tiles(n, m, 288) <= 132 < hopper_heuristic._tiles(m, n, direct.tile_n), (m, n, k)
            assert swapped.cluster_size == 1 or -(-m // 288) <= 3, (m, n, k)
    assert seen


def _assert_onto_quad(shapes, dtype):
    """Each product runs transposed on 128 x 256 tiles over 2 x 2 clusters (columns epilogue)."""
    for m, n, k in shapes:
        got = caller_way(m, n, k, dtype)[1]
        assert got.how == "swap", (m, n, k)
        assert (got.config.tile_n, got.config.cluster_m, got.config.cluster_n, got.config.epilogue) == \
            (256, 2, 2, "columns"), (m, n, k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_transposed_product_onto_quad_clusters(dtype, monkeypatch):
    """SWAP_ONTO_QUAD: where the direct product runs static 128 x 128 tiles on 2 x 1 clusters and
    its transpose 128 x 256 tiles on 2 x 2 clusters, over K of at least 32 64-wide steps, the
    transposed product on those clusters, whatever the padded work (RESULTS.md, eighty-fourth
    session: 9688x552x11304 0.67 -> 0.87 of cuBLAS, 6776x776x2056 0.91 -> 1.00); not below those
    steps, nor where the transpose takes other tiles or clusters, nor in place of B copied K-major
    (15168x296x9240: 0.93 copied, 0.65 transposed).  With the constant None, the direct product."""
    assert hopper_heuristic.SWAP_ONTO_QUAD == 32
    shapes = [(9608, 1544, 7176), (3680, 1640, 15592), (9688, 552, 11304), (14824, 1032, 10776), (912, 6232, 5416)]
    steps_54 = [(14608, 1096, 3464), (9136, 520, 3448), (6776, 776, 2056)]  # 55, 54 and 33 steps
    others = [(632, 2440, 6976), (2016, 1008, 11688)]  # the transpose on single CTAs, on 2 x 1 clusters
    _assert_onto_quad(shapes + steps_54, dtype)
    for m, n, k in others:
        assert caller_way(m, n, k, dtype)[1].how == "one", (m, n, k)
    assert caller_way(15168, 296, 9240, dtype)[1].how == "copy"
    monkeypatch.setattr(hopper_heuristic, "SWAP_ONTO_QUAD", 64)
    _assert_onto_quad(shapes, dtype)
    for m, n, k in steps_54:
        assert caller_way(m, n, k, dtype)[1].how == "one", (m, n, k)
    monkeypatch.setattr(hopper_heuristic, "SWAP_ONTO_QUAD", None)
    for m, n, k in shapes + steps_54 + others:
        direct, got = caller_way(m, n, k, dtype)
        assert got.how == "one" and got.config == direct, (m, n, k)
        assert (direct.tile_n, direct.cluster_m, direct.cluster_n, direct.policy) == (128, 2, 1, "static"), (m, n, k)
    assert caller_way(15168, 296, 9240, dtype)[1].how == "copy"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_transposed_product_onto_quad_clusters_from_wide_tiles(dtype, monkeypatch):
    """SWAP_ONTO_QUAD_WIDE: the same where the direct product runs static 128 x 256 tiles on 2 x 1
    clusters (RESULTS.md, eighty-fourth session: 2848x1040x4432 1.08 -> 1.19 of cuBLAS, 10184x624x9976
    1.00 -> 1.10), from 32 steps; with the constant None, the direct product."""
    assert hopper_heuristic.SWAP_ONTO_QUAD_WIDE == 32
    shapes = [(2848, 1040, 4432), (10184, 624, 9976), (8000, 3632, 2920), (2920, 1048, 3240), (1288, 1736, 2664)]
    for m, n, k in shapes:
        direct = caller_way(m, n, k, dtype)[0]
        assert (direct.tile_n, direct.cluster_m, direct.cluster_n, direct.policy) == (256, 2, 1, "static"), (m, n, k)
    _assert_onto_quad(shapes, dtype)
    monkeypatch.setattr(hopper_heuristic, "SWAP_ONTO_QUAD_WIDE", 2 + max(-(-k // 64) for _, _, k in shapes))
    for m, n, k in shapes:
        assert caller_way(m, n, k, dtype)[1].how == "one", (m, n, k)
    monkeypatch.setattr(hopper_heuristic, "SWAP_ONTO_QUAD_WIDE", None)
    for m, n, k in shapes:
        direct, got = caller_way(m, n, k, dtype)
        assert got.how == "one" and got.config == direct, (m, n, k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_transposed_product_off_lines_on_sectors_priced_on_single_ctas(dtype, monkeypatch):
    """SWAP_SINGLE_ON_SECTORS: 1072x3008x14112 (A's rows 28224 bytes apart: off 128-byte lines, on
    sectors) ran direct on single 128 x 224 tiles, since its transpose, whose B those rows are,
    took the off-rows rules' 2-CTA clusters; priced on single CTAs it runs transposed (0.70 -> 0.96
    of cuBLAS).  Off sectors, or with the constant off, nothing changes.  (Measured before
    ``ROW_MAJOR_BOXES``, which now gives that product 256-wide tiles: left out here.)"""
    monkeypatch.setattr(hopper_heuristic, "ROW_MAJOR_BOXES", {})

    def way(m, n, k):
        hopper_heuristic._swap_cached.cache_clear()
        return caller_way(m, n, k, dtype)

    direct, got = way(1072, 3008, 14112)
    assert direct.cluster_size == 1 and got.how == "swap"
    assert got.config.cluster_size == 1 and got.config.epilogue == "columns"
    monkeypatch.setattr(hopper_heuristic, "SWAP_SINGLE_ON_SECTORS", False)
    assert way(1072, 3008, 14112)[1].how == "one"
    monkeypatch.setattr(hopper_heuristic, "SWAP_SINGLE_ON_SECTORS", True)
    # K = 14104: A's rows off sectors too (b_rows_off for the transpose): the rule leaves it
    before = way(1072, 3008, 14104)[1]
    monkeypatch.setattr(hopper_heuristic, "SWAP_SINGLE_ON_SECTORS", False)
    assert way(1072, 3008, 14104)[1] == before
    hopper_heuristic._swap_cached.cache_clear()


def test_off_rows_clusters_leave_one_wave_over_odd_rows_of_tiles_on_sectors(monkeypatch):
    """OFF_ROWS_ODD_TIE: B's rows off lines on sectors, one wave of single 128 x 128 CTAs that the
    2-CTA clusters only match in cost: three rows of tiles (376 x 3440) stay on single CTAs (0.87
    -> 1.02 of cuBLAS), four (472 x 3120) keep the clusters; off sectors (N = 3432) the clusters stay
    whatever the rows; with the constant off, the clusters everywhere."""
    on = dict(b_rows_off_128=True, a_rows_off_128=True)
    odd = hopper.choose_config(376, 3440, 2384, "bfloat16", 132, **on)
    assert odd.cluster_size == 1 and odd.tile_n == 128
    assert hopper.choose_config(472, 3120, 5168, "bfloat16", 132, **on).cluster_size > 1
    assert hopper.choose_config(376, 3432, 2384, "bfloat16", 132, b_rows_off=True, **on).cluster_size > 1
    monkeypatch.setattr(hopper_heuristic, "OFF_ROWS_ODD_TIE", False)
    assert hopper.choose_config(376, 3440, 2384, "bfloat16", 132, **on).cluster_size > 1


def test_route_in_gemm_parts_order(monkeypatch):
    """hopper_heuristic.route says what gemm_parts does with the heuristic's config, in its order: the B
    copy before the tail split, the tail split before the transpose (a product whose static
    clusters' two bands ran direct runs transposed once CLUSTER_TAIL_SK makes them stream-K), the
    transpose only where beta == 0, else one launch; gemm_copies_b is its "copy"."""
    def way(m, n, k, beta=0.0):
        a, b, out = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2)), FakeArray((m, n), (2 * n, 2))
        flags = hopper.rows_flags([a], [b])
        cfg = hopper.choose_config(m, n, k, "float16", 132, **flags)
        got = hopper_heuristic.route([a], [b], out, cfg, m, n, k, "float16", 132, flags, beta=beta)
        assert (got.how == "copy") == (beta == 0 and hopper_heuristic.gemm_copies_b([a], [b], out, m, n, k, "float16", 132))
        return cfg, got

    cfg, got = way(14128, 536, 5920)
    assert got.how == "swap" and got.config.b_k_major and cfg.policy == "streamk"
    assert way(14128, 536, 5920, beta=0.5)[1] == hopper_heuristic.Route("one", cfg)  # C: no transpose
    assert way(8192, 8192, 8192)[1].how == "one"
    assert way(12632, 136, 6392)[1] == hopper_heuristic.Route("copy", None)
    with monkeypatch.context() as mp:
        mp.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)
        cfg, got = way(14128, 536, 5920)
        split = hopper_heuristic.tail_split(cfg, 14128, 536, 5920, "float16", 132,
                                            **hopper.rows_flags([FakeArray((14128, 5920), (11840, 2))],
                                                                [FakeArray((5920, 536), (1072, 2))]))
        assert got == hopper_heuristic.Route("split", cfg, split[0], split[1]) and split[2] <= hopper_heuristic.TAIL_SPLIT
        mp.setattr(hopper_heuristic, "TAIL_SPLIT", None)
        assert way(14128, 536, 5920)[1].how == "swap"


def test_tail_split_rule():
    """tail_split: static cooperative configs of two waves or more only; the first band is whole
    tile rows (pairs of them with clusters) filling all waves but the last; the ratio is the
    wave-cost model's; 4096³ (two full waves of 256-wide tiles) gains nothing; K below
    TAIL_SPLIT_MIN_K_STEPS steps is never split."""
    cfg = hopper.choose_config(4096, 4096, 4096, "float16", 132)
    assert hopper_heuristic.tail_split(cfg, 4096, 4096, 4096, "float16", 132)[2] == 1.0
    assert hopper_heuristic.tail_split(cfg.replace(policy="streamk"), 4096, 4096, 4096, "float16", 132) is None
    assert hopper_heuristic.tail_split(cfg, 4096, 4096, 64 * hopper_heuristic.TAIL_SPLIT_MIN_K_STEPS - 64, "float16", 132) is None
    rng = np.random.default_rng(5)
    seen = 0
    for _ in range(400):
        m, n = (int(x) * 8 for x in rng.integers(32, 2000, size=2))
        k = int(rng.integers(8, 2000)) * 8
        off = dict(b_rows_off=bool(n % 16), b_rows_off_128=bool(n % 64))
        cfg = hopper.choose_config(m, n, k, "float16", 132, **off)
        split = hopper_heuristic.tail_split(cfg, m, n, k, "float16", 132, **off)
        if split is None:
            continue
        seen += 1
        m1, rest, ratio = split
        rows, slots = 128 * cfg.cluster_m, 132 // cfg.cluster_m
        cols = -(-n // cfg.tile_n)
        waves = -(-(-(-m // rows) * cols) // slots)
        assert cfg.policy == "static" and waves >= 2 and 0 < m1 < m and m1 % rows == 0
        assert -(-k // 64) >= hopper_heuristic.TAIL_SPLIT_MIN_K_STEPS
        assert m1 // rows * cols <= (waves - 1) * slots < (m1 // rows + 1) * cols
        # the rest band's config as the heuristic picks it, before the one-wave rule (whose wider
        # tiles the wave model would price above the 128-wide ones they replace)
        assert rest == hopper.choose_config(m - m1, n, k, "float16", 132, **off, one_wave=False)
        assert not rest.pingpong
        assert ratio > 0
    assert seen > 50


@pytest.mark.parametrize("sms", [132, 78, 16, 1])
def test_every_pick_is_a_config_the_kernel_can_launch(sms):
    """On sizes from 1 to 70000 each way, every input kind, row flags and SM counts, the heuristic
    gives a config that validates (``HopperConfig`` refuses what the kernel cannot run, shared
    memory past the limit included) and has a launch plan; and on sizes as a user types them (multiples of 8, 256 to
    16384), ``gemm_parts``' route over contiguous row-major operands (a copy of B, two bands of
    rows, the transposed product) launches such configs too."""
    def launchable(cfg, m, n, k, what):
        assert hopper.plan_launch(cfg, m, n, k, sms).grid >= 1, (what, cfg)

    rng = np.random.default_rng(sms)
    for _ in range(150):
        m, n, k = (max(1, int(np.exp(rng.uniform(0, np.log(70000))))) for _ in range(3))
        for dtype in ("float16", "bfloat16", "float32"):
            for flags in ({}, dict(b_rows_off_128=True), dict(b_rows_off=True, b_rows_off_128=True),
                          dict(b_rows_off_128=True, a_rows_off_128=True)):
                cfg = hopper.choose_config(m, n, k, dtype, sms, allow_tf32=True, **flags)
                launchable(cfg, m, n, k, (m, n, k, dtype, flags))
    routes = set()
    for _ in range(300):
        m, n, k = (8 * int(np.exp(rng.uniform(np.log(32), np.log(2048)))) for _ in range(3))
        a, b, out = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2)), FakeArray((m, n), (2 * n, 2))
        flags = hopper.rows_flags([a], [b])
        direct = hopper.choose_config(m, n, k, "float16", sms, **flags)
        way = hopper_heuristic.route([a], [b], out, direct, m, n, k, "float16", sms, flags)
        routes.add(way.how)
        if way.how == "split":
            launchable(way.config, way.m1, n, k, (m, n, k, way))
            launchable(way.rest, m - way.m1, n, k, (m, n, k, way))
        elif way.how == "copy":
            launchable(hopper_heuristic.k_major_copy_config(m, n, k, "float16", sms, flags["a_rows_off_128"]),
                       m, n, k, (m, n, k, way))
        else:
            launchable(way.config, *((n, m) if way.how == "swap" else (m, n)), k, (m, n, k, way))
    assert {"one", "swap"} <= routes and len(routes) >= 3, routes  # and a copy or two bands


def test_row_major_b_takes_224_only_in_as_few_tile_columns():
    """ROW_MAJOR_BOXES: over a B read row-major (rows_flags' b_row_major), 224-wide tiles load the
    whole 64-wide boxes of 256 columns, so from 33 K steps, where they need more tile columns than
    256-wide ones, the heuristic takes the next cheapest width where that is 192 or 256, not 128;
    below 33 steps and over a B read K-major (column-major, or the transposed product's) it takes
    them as before."""
    def pick(m, n, k, b_strides):
        a, b = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), b_strides)
        flags = hopper.rows_flags([a], [b])
        return flags["b_row_major"], hopper.choose_config(m, n, k, "float16", 132, **flags).tile_n

    assert pick(448, 7232, 7880, (2 * 7232, 2)) == (True, 256)  # 33 columns of 224, 29 of 256
    assert pick(448, 7232, 7936, (2, 2 * 7936)) == (False, 224)  # column-major B, rows of K on lines
    assert pick(448, 7232, 7936, (2 * 7232, 2)) == (True, 256)
    assert pick(4192, 880, 1000, (2 * 880, 2)) == (True, 224)  # 4 columns either way
    assert pick(720, 4416, 952, (2 * 4416, 2)) == (True, 224)  # 15 K steps
    assert pick(8984, 1984, 6680, (2 * 1984, 2)) == (True, 192)
    assert pick(4200, 3456, 4952, (2 * 3456, 2)) == (True, 224)  # 128 next: not taken
    assert not hopper.rows_flags([FakeArray((448, 64), (128, 2))], [FakeArray((64, 96), (384, 4), itemsize=4)])["b_row_major"]
    assert caller_way(448, 7232, 7880, "bfloat16")[1].config.tile_n == 256
    assert {hopper.choose_config(448, 7232, 7880, "float16", 132, b_row_major=True).tile_n,
            hopper.choose_config(448, 7232, 7880, "float16", 132).tile_n} == {256, 224}


def test_row_major_b_boxes_rule_off(monkeypatch):
    """ROW_MAJOR_BOXES = {}: 224-wide tiles over a row-major B as over a K-major one."""
    monkeypatch.setattr(hopper_heuristic, "ROW_MAJOR_BOXES", {})
    assert hopper.choose_config(448, 7232, 7880, "float16", 132, b_row_major=True).tile_n == 224


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rows_quad_over_two_and_three_tile_rows(dtype, monkeypatch):
    """ROWS_QUAD: stream-K over single CTAs on two or three rows of 128-row tiles, B's rows off
    128-byte lines (off 32-byte sectors too or not), become static 128 x 256 tiles on 2 x 2
    clusters; not where their last (or only) wave is less than half full (312 x 8520: 34
    blocks of 30), nor with B's rows on 128-byte lines (N a multiple of 64), nor a static or
    128-wide config, nor with the rule off; on four or five rows it changes nothing."""
    def config(m, n, k):
        a, b = FakeArray((m, k), (2 * k, 2)), FakeArray((k, n), (2 * n, 2))
        return hopper.choose_config(m, n, k, dtype, 132, **hopper.rows_flags([a], [b]))

    assert hopper_heuristic.ROWS_QUAD == ((2, 3), 0.5)
    sizes = ((288, 12968, 1800), (344, 13616, 4520), (328, 6408, 15832), (216, 9368, 7912))
    for s in sizes:
        got = config(*s)
        assert (got.tile_n, got.stages, got.policy, got.cluster_m, got.cluster_n) == (256, 4, "static", 2, 2), s
        assert got.epilogue == ("tma" if s[2] <= 2048 else "staged"), s
    kept_sizes = ((312, 8520, 2712), (288, 12992, 1800), (336, 9392, 3208), (360, 11600, 3792))
    kept = [config(*s) for s in kept_sizes]
    assert [(c.policy, c.cluster_size) for c in kept] == [("streamk", 1), ("streamk", 1), ("static", 1), ("streamk", 1)]
    assert kept[-1].tile_n == 128  # 128-wide stream-K (0.81 -> 0.69 of cuBLAS on the clusters)
    four, five = config(392, 12968, 1800), config(600, 12968, 1800)  # four and five rows of tiles
    monkeypatch.setattr(hopper_heuristic, "ROWS_QUAD", None)
    assert all((c := config(*s)).policy == "streamk" and c.cluster_size == 1 for s in sizes)
    assert [config(*s) for s in kept_sizes] == kept
    assert (config(392, 12968, 1800), config(600, 12968, 1800)) == (four, five)
