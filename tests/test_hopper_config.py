"""Tests of the Hopper kernel's config object (``mgemm.hopper_config``): validation against what
the kernel can run, rendering by name, the cache key, and ``plan_launch``, the Python mirror of a
launch's grid and stream-K split.  CPU only."""

import pytest

from mgemm import hopper, hopper_config, hopper_heuristic, schedule
from mgemm.hopper_config import HopperConfig


def test_timeline_config_renders_and_is_checked():
    cfg = HopperConfig(input="float16", policy="streamk", sk_reduce="spread", timeline=True)
    assert "#define MGEMM_TIMELINE 1\n" in cfg.render() and str(cfg).endswith(" timeline")
    assert "#define MGEMM_TIMELINE 0\n" in cfg.replace(timeline=False).render()
    assert cfg.key() != cfg.replace(timeline=False).key()
    for bad in (dict(record=True), dict(cluster_m=2, policy="static")):
        with pytest.raises(ValueError, match="timeline=True needs one CTA per tile"):
            cfg.replace(**bad)
    # pingpong consumers stamp their units too
    ping = cfg.replace(pingpong=True, tile_m=64, sk_reduce="owner")
    assert "#define MGEMM_TIMELINE 1\n" in ping.render() and "#define MGEMM_PINGPONG 1\n" in ping.render()


def test_cache_key_changes_with_config_and_options():
    a = HopperConfig()
    assert a.key() == HopperConfig().key()
    assert a.key() != a.replace(stages=5).key()
    assert a.key() != a.replace(policy="streamk").key()
    assert a.key() != a.replace(tile_n=256).key()
    assert a.key() != a.replace(b_k_major=False).key()
    assert a.key() != a.replace(a_k_major=False).key()
    assert a.key() != a.replace(epilogue="direct").key()
    assert "#define MGEMM_EPILOGUE MGEMM_EPILOGUE_DIRECT" in a.replace(epilogue="direct").render()
    assert "#define MGEMM_B_K_MAJOR 0" in a.replace(b_k_major=False).render()
    assert "#define MGEMM_A_K_MAJOR 1" in a.replace(b_k_major=False).render()
    assert a.key() != a.replace(pingpong=True).key()
    assert a.key() != a.replace(pingpong=True, tile_m=64).key()
    assert a.key() != a.replace(producer_regs=24, consumer_regs=240).key()
    pp = a.replace(pingpong=True, tile_m=64, tile_n=256).render()
    assert "#define MGEMM_PINGPONG 1" in pp and "#define MGEMM_TILE_M 64" in pp
    assert "#define MGEMM_PINGPONG 0" in a.render() and "#define MGEMM_TILE_M 128" in a.render()
    regs = a.replace(producer_regs=24, consumer_regs=240).render()
    assert "#define MGEMM_PRODUCER_REGS 24" in regs and "#define MGEMM_CONSUMER_REGS 240" in regs
    assert a.key(("-arch=sm_90a",)) != a.key(("-arch=sm_90",))
    assert a.key() in a.source() and hopper_config.KERNEL_SOURCE in a.source()


def test_config_validates():
    with pytest.raises(ValueError):
        HopperConfig(input="float64")
    with pytest.raises(ValueError):
        HopperConfig(tile_n=80)  # not a multiple of 32
    for width in (96, 160, 224):  # cooperative consumers, one CTA per tile unless B is K-major,
        with pytest.raises(ValueError, match="cooperative consumers"):  # staged rows rotated
            HopperConfig(tile_n=width, pingpong=True, tile_m=64)
        with pytest.raises(ValueError, match="cooperative consumers"):
            HopperConfig(tile_n=width, cluster_m=2, b_k_major=False)
        with pytest.raises(ValueError, match="whole 128-byte boxes"):
            HopperConfig(input="float16", tile_n=width, epilogue="tma")
        assert HopperConfig(input="tf32", tile_n=width, epilogue="tma").out_chunk_bytes == 128
    # B's ring rows: whole 64-wide boxes (160 -> 192), the staged rows half a 160-wide row
    cfg = HopperConfig(input="float16", tile_n=160, stages=4, epilogue="staged")
    assert cfg.b_rows == 192 and cfg.out_chunk_bytes == 160
    assert cfg.smem_bytes == 1024 + 4 * (128 + 192) * 128 + 512 + 2 * 64 * 160
    assert HopperConfig(input="bfloat16", tile_n=224, epilogue="staged").out_chunk_bytes == 224
    assert HopperConfig(input="float16", tile_n=96, epilogue="staged").out_chunk_bytes == 192
    # the columns epilogue's chunk (out_cols): 288 wide on four stages fits with 48 columns at a time
    with pytest.raises(ValueError, match="227 KB|more than 232448"):
        HopperConfig(input="float16", tile_n=288, stages=4, epilogue="columns")
    cols = HopperConfig(input="float16", tile_n=288, stages=4, epilogue="columns", out_cols=48)
    assert cols.out_chunk_bytes == 96 and cols.smem_bytes == 1024 + 4 * (128 + 288) * 128 + 512 + 2 * 64 * 96
    assert "#define MGEMM_OUT_COLS 48" in cols.render() and "oc48" in str(cols)
    assert cols.key() != cols.replace(out_cols=16).key()
    for bad in (dict(out_cols=40), dict(out_cols=-16), dict(out_cols=288), dict(out_cols=48, epilogue="staged"),
                dict(out_cols=48, epilogue="pair")):
        with pytest.raises(ValueError, match="out_cols"):
            HopperConfig(**{**dict(input="float16", tile_n=288, stages=3, epilogue="columns"), **bad})
    # ... and the staged and TMA epilogues' (at least 128 bytes): five stages of 64 x 256 fit with
    # 64 columns (128 bytes) at a time, not with the default 256-byte chunk
    for epi in ("staged", "tma"):
        with pytest.raises(ValueError, match="more than 232448"):
            HopperConfig(input="float16", tile_m=64, tile_n=256, stages=5, epilogue=epi)
        five = HopperConfig(input="float16", tile_m=64, tile_n=256, stages=5, epilogue=epi, out_cols=64)
        assert five.out_chunk_bytes == 128 and five.out_chunks == 2
        assert five.smem_bytes == 1024 + 5 * (64 + 256) * 128 + (1024 if epi == "tma" else 512) + 2 * 64 * 128
        with pytest.raises(ValueError, match="out_cols"):  # 32 columns: 64 bytes
            five.replace(out_cols=32)
    with pytest.raises(ValueError):
        HopperConfig(policy="greedy")
    with pytest.raises(ValueError):
        HopperConfig(stages=1)
    with pytest.raises(ValueError):  # 5 stages of 128x256 do not fit in 227 KB
        HopperConfig(tile_n=256, stages=5)
    with pytest.raises(ValueError):
        HopperConfig(epilogue="fancy")
    with pytest.raises(ValueError, match="sk_reduce must be one of"):
        HopperConfig(policy="streamk", sk_reduce="tree")
    with pytest.raises(ValueError, match="for cooperative consumers"):
        HopperConfig(policy="streamk", sk_reduce="spread", pingpong=True, tile_m=64)
    assert HopperConfig(policy="static", sk_reduce="spread").policy == "static"  # no tile is split
    spread = HopperConfig(policy="streamk", sk_reduce="spread")
    assert "#define MGEMM_SK_REDUCE MGEMM_SK_REDUCE_SPREAD" in spread.render()
    assert str(spread).endswith("sk=spread") and spread.key() != spread.replace(sk_reduce="owner").key()
    # sk_waves is the launch's split, not the kernel's: same source, same cubin
    assert spread.replace(sk_waves=0).key() == spread.key() and str(spread.replace(sk_waves=0)).endswith("skw0")
    with pytest.raises(ValueError, match="sk_waves"):
        HopperConfig(sk_waves=2)
    with pytest.raises(ValueError):  # wgmma has no transpose for tf32
        HopperConfig(input="tf32", b_k_major=False)
    with pytest.raises(ValueError):
        HopperConfig(input="tf32", a_k_major=False)
    assert str(HopperConfig(a_k_major=False, b_k_major=False)).endswith(" A:col B:row")
    with pytest.raises(ValueError):  # cooperative tiles are 128 or 64 rows
        HopperConfig(tile_m=32)
    # cooperative 64-row tiles: the warpgroups split the columns (whole 64-wide boxes of B each)
    split = HopperConfig(input="float16", tile_m=64, tile_n=256, stages=4, epilogue="staged")
    assert split.split_n and split.wg_n == 128 and split.acc_per_thread == 64 and split.out_chunk_bytes == 256
    assert split.smem_bytes == 1024 + 4 * (64 + 256) * 128 + 512 + 2 * 64 * 256
    assert "#define MGEMM_TILE_M 64" in split.render() and "#define MGEMM_PINGPONG 0" in split.render()
    assert HopperConfig(tile_m=64, tile_n=128).wg_n == 64 and not HopperConfig().split_n
    assert not HopperConfig(pingpong=True, tile_m=64).split_n and HopperConfig(pingpong=True, tile_m=64).wg_n == 128
    for bad in (dict(tile_n=192), dict(tile_n=64)):
        with pytest.raises(ValueError, match="splits its columns"):
            HopperConfig(tile_m=64, **bad)
    assert HopperConfig(tile_m=64, tile_n=256, cluster_m=2, cluster_n=2).cluster_size == 4
    with pytest.raises(ValueError, match="whole 64-wide boxes of A"):  # one box of A: no halves
        HopperConfig(tile_m=64, tile_n=256, cluster_n=2, a_k_major=False)
    with pytest.raises(ValueError):  # 5 stages of 64x256 and the staged buffers: more than 227 KB
        split.replace(stages=5)
    with pytest.raises(ValueError):
        HopperConfig(pingpong=True, tile_m=32)
    with pytest.raises(ValueError, match="accumulators"):  # 128x256 on one warpgroup: 256 per thread
        HopperConfig(pingpong=True, tile_m=128, tile_n=256)
    with pytest.raises(ValueError):  # not a multiple of 8
        HopperConfig(producer_regs=36)
    with pytest.raises(ValueError):  # 128 * 40 + 256 * 240 > 65536
        HopperConfig(producer_regs=40, consumer_regs=240)
    with pytest.raises(ValueError):  # setmaxnreg.inc below the launch allocation
        HopperConfig(producer_regs=24, consumer_regs=160)
    pp = HopperConfig(pingpong=True, tile_m=64, tile_n=256, stages=5)
    assert str(pp).startswith("hopper bfloat16->bfloat16 64x256x64 s5") and " pingpong" in str(pp)
    assert pp.acc_per_thread == 128 and pp.smem_bytes == 1024 + 5 * (64 + 256) * 128 + 512
    assert HopperConfig(pingpong=True, tile_n=128).acc_per_thread == 128
    assert str(HopperConfig(producer_regs=24, consumer_regs=240)).endswith(" regs=24/240")
    assert HopperConfig(input="tf32").output == "float32"
    assert HopperConfig(input="tf32").tile_k == 32
    assert HopperConfig(input="bfloat16").tile_k == 64


def test_overlap_config_validates_renders_and_keys():
    """overlap: a second accumulator set (at most 96 accumulators a thread), cooperative consumers,
    a policy that splits no tile, no promote or timeline; rendered as MGEMM_OVERLAP and keyed."""
    a = HopperConfig(input="float16", tile_n=128, epilogue="tma")
    o = a.replace(overlap=True)
    assert "#define MGEMM_OVERLAP 0\n" in a.render() and "#define MGEMM_OVERLAP 1\n" in o.render()
    assert a.key() != o.key() and str(o).endswith(" overlap") and "overlap" not in str(a)
    for ok in (dict(tile_n=192), dict(tile_m=64, tile_n=256, stages=4), dict(policy="dynamic"),
               dict(policy="per_tile", cluster_m=2), dict(input="tf32")):
        assert a.replace(overlap=True, **ok).overlap
    for bad in (dict(tile_n=256), dict(tile_n=288, epilogue="staged", stages=3), dict(policy="streamk"), dict(promote=4),
                dict(timeline=True), dict(pingpong=True, tile_m=64, tile_n=64)):
        with pytest.raises(ValueError, match="second set of accumulators"):
            a.replace(overlap=True, **bad)


def test_out_buffers_config_validates_renders_and_keys():
    """out_buffers=2: two staging buffer sets for the "tma" epilogue, odd chunks through the second
    (an even number of chunks per warpgroup row); their shared memory counted, rendered as
    MGEMM_OUT_BUFFERS and keyed."""
    a = HopperConfig(input="float16", tile_n=256, stages=3, epilogue="tma")
    b = a.replace(out_buffers=2)
    assert a.out_chunks == 2 and HopperConfig(input="float16", tile_n=128).out_chunks == 1
    assert "#define MGEMM_OUT_BUFFERS 1\n" in a.render() and "#define MGEMM_OUT_BUFFERS 2\n" in b.render()
    assert a.key() != b.key() and str(b).endswith(" ob2") and "ob2" not in str(a)
    assert b.smem_bytes == a.smem_bytes + 2 * 64 * 256
    for ok in (dict(policy="streamk"), dict(policy="dynamic", pingpong=True, tile_m=64, stages=4),
               dict(cluster_m=2), dict(input="tf32", output="float32", tile_n=128, stages=4)):
        assert a.replace(out_buffers=2, **ok).out_buffers == 2
    for bad in (dict(epilogue="staged"), dict(epilogue="pair"), dict(tile_n=128), dict(tile_n=192),
                dict(tile_n=384)):  # (one, three and three chunks)
        with pytest.raises(ValueError, match="out_buffers=2"):
            a.replace(out_buffers=2, **bad)
    with pytest.raises(ValueError, match="shared memory"):
        a.replace(out_buffers=2, stages=4)
    with pytest.raises(ValueError, match="out_buffers must be 1 or 2"):
        a.replace(out_buffers=3)


def test_cluster_config_validates_renders_and_keys():
    """cluster_m: 1 (default), 2 or 4; cluster_n 1 or 2; at most 4 CTAs; clusters only with static /
    per_tile, cooperative consumers, no record and tile_n >= 128 (128 or 256 with a row-major B,
    256 in quarters), each refusal naming the combination."""
    a = HopperConfig(tile_n=256)
    c2 = a.replace(cluster_m=2)
    assert "#define MGEMM_CLUSTER_M 1\n" in a.render() and "#define MGEMM_CLUSTER_M 2\n" in c2.render()
    assert a.key() != c2.key() and c2.key() == HopperConfig(tile_n=256, cluster_m=2).key()
    assert str(c2).endswith(" cluster2") and "cluster" not in str(a)
    assert c2.smem_bytes == a.smem_bytes  # the same ring: each CTA still holds the whole B tile
    HopperConfig(tile_n=128, policy="per_tile", cluster_m=2, input="tf32")
    with pytest.raises(ValueError, match="cluster_m must be one of"):
        HopperConfig(cluster_m=3)
    with pytest.raises(ValueError, match="cluster_m must be one of"):
        HopperConfig(cluster_m=0)
    with pytest.raises(ValueError, match="cluster_n must be one of"):
        HopperConfig(cluster_n=4)
    with pytest.raises(ValueError, match="more than 4 CTAs"):
        HopperConfig(tile_n=256, cluster_m=4, cluster_n=2)
    c4, c22, c12 = a.replace(cluster_m=4), a.replace(cluster_m=2, cluster_n=2), a.replace(cluster_n=2)
    assert (c4.cluster_size, c22.cluster_size, c12.cluster_size) == (4, 4, 2)
    assert str(c4).endswith(" cluster4") and str(c22).endswith(" cluster2x2") and str(c12).endswith(" cluster1x2")
    assert "#define MGEMM_CLUSTER_N 2\n" in c22.render() and "#define MGEMM_CLUSTER_N 1\n" in c4.render()
    assert len({x.key() for x in (a, c2, c4, c22, c12)}) == 5
    HopperConfig(tile_n=128, cluster_m=4)  # a K-major B: quarters of 32 rows
    HopperConfig(tile_n=256, cluster_m=4, b_k_major=False)  # one 64-wide box each
    HopperConfig(tile_n=128, cluster_m=2, cluster_n=2, a_k_major=False, b_k_major=False)
    with pytest.raises(ValueError, match="row-major B .* tile_n=128"):
        HopperConfig(tile_n=128, cluster_m=4, b_k_major=False)
    with pytest.raises(ValueError, match="cluster_m=1, cluster_n=2 with policy='dynamic'"):
        HopperConfig(cluster_n=2, policy="dynamic")
    with pytest.raises(ValueError, match="cluster_m=2, cluster_n=2 with tile_n=64"):
        HopperConfig(cluster_m=2, cluster_n=2, tile_n=64)
    with pytest.raises(ValueError, match="cluster_m=2 with policy='dynamic'"):
        HopperConfig(cluster_m=2, policy="dynamic")
    HopperConfig(cluster_m=2, cluster_n=2, policy="streamk", sk_reduce="spread")  # blocks split over clusters
    with pytest.raises(ValueError, match="cluster_m=2 with pingpong=True"):
        HopperConfig(cluster_m=2, pingpong=True, tile_m=64, tile_n=256)
    with pytest.raises(ValueError, match="cluster_m=2 with record=True"):
        HopperConfig(cluster_m=2, record=True)
    with pytest.raises(ValueError, match="cluster_m=2 with tile_n=64"):
        HopperConfig(cluster_m=2, tile_n=64)
    HopperConfig(cluster_n=2, tile_n=64, policy="streamk")  # A multicast alone: B whole in each CTA
    # widths of odd multiples of 32 from 160 on: with a K-major B (each CTA its share of the rows)
    HopperConfig(tile_n=160, cluster_m=2)
    HopperConfig(tile_n=224, cluster_m=4)
    HopperConfig(tile_n=192, cluster_m=2, cluster_n=2, a_k_major=False, policy="streamk", sk_reduce="spread")
    with pytest.raises(ValueError, match="tile_n=160 needs cooperative consumers, and one CTA per tile unless B"):
        HopperConfig(tile_n=160, cluster_m=2, b_k_major=False)
    with pytest.raises(ValueError, match="cluster_m=2 with tile_n=96"):
        HopperConfig(tile_n=96, cluster_m=2)


@pytest.mark.parametrize("policy", hopper_config.CLUSTER_POLICIES)
@pytest.mark.parametrize("cm,cn", [(2, 1), (4, 1), (2, 2), (1, 2)])
@pytest.mark.parametrize("m,n,k,slots", [(8192, 8192, 8192, 132), (300, 256, 64, 132), (300, 1000, 500, 7),
                                         (1, 1, 1, 132), (4096, 4096, 4096, 1), (1000, 1500, 700, 20)])
def test_plan_launch_cluster_grid_is_whole_clusters_over_tile_blocks(policy, cm, cn, m, n, k, slots):
    cfg = HopperConfig(tile_n=256, policy=policy, cluster_m=cm, cluster_n=cn)
    lp = hopper.plan_launch(cfg, m, n, k, slots)
    assert (lp.rows, lp.cols, lp.k_iters) == schedule.tile_grid(m, n, k, 128, 256, 64)
    size = cm * cn
    blocks = -(-lp.rows // cm) * -(-lp.cols // cn)
    assert lp.grid % size == 0
    if policy == "per_tile":
        assert lp.grid == size * blocks and lp.sk_tiles == 0
    elif policy == "static":
        assert lp.grid == size * max(1, min(slots // size, blocks)) and lp.sk_tiles == 0
    else:  # stream-K over the blocks and the whole clusters, as over tiles and CTAs
        clusters = max(1, slots // size)
        sk = schedule.streamk_tiles(blocks, clusters, lp.k_iters)
        assert lp.sk_tiles == sk
        assert lp.grid == size * schedule.launch_grid("streamk", blocks, clusters, sk)


@pytest.mark.parametrize("tile_n,stages", hopper_heuristic.TILE_CHOICES + [(64, 4), (128, 4), (192, 5), (96, 6),
                                                                  (160, 5), (224, 4)])
def test_shapes_fit_and_accumulators_cover_the_tile(tile_n, stages):
    cfg = HopperConfig(tile_n=tile_n, stages=stages)
    assert cfg.smem_bytes <= hopper_config.SMEM_LIMIT
    assert cfg.acc_per_thread * hopper_config.CONSUMER_THREADS == cfg.tile_m * cfg.tile_n
    # Every stage starts 1024-byte aligned (the 128B swizzle atom), so A and B stages are multiples.
    assert (cfg.tile_m * 128) % 1024 == 0 and (cfg.b_rows * 128) % 1024 == 0
    assert cfg.b_rows >= cfg.tile_n and cfg.b_rows % hopper_config.MN_BOX == 0


@pytest.mark.parametrize("tile_n,stages,epilogue", [(144, 5, "staged"), (176, 4, "staged"), (208, 4, "staged"),
                                                     (240, 3, "staged"), (240, 4, "pair")])
def test_exact_widths_fit_and_hold_just_their_rows(tile_n, stages, epilogue):
    cfg = HopperConfig(input="float16", tile_n=tile_n, stages=stages, epilogue=epilogue)
    assert cfg.smem_bytes <= hopper_config.SMEM_LIMIT
    assert cfg.b_rows == tile_n and (cfg.b_rows * 128) % 1024 == 0  # 8-row swizzle atoms
    assert cfg.acc_per_thread * hopper_config.CONSUMER_THREADS == cfg.tile_m * cfg.tile_n
    assert cfg.out_chunk_bytes == 2 * tile_n and cfg.out_chunk_bytes % 32 == 0  # whole rows, even pieces


@pytest.mark.parametrize("tile_n,stages,epilogue,cm", [(288, 3, "staged", 1), (288, 4, "pair", 1), (320, 3, "staged", 1),
                                                        (320, 4, "pair", 2), (384, 3, "staged", 1), (384, 3, "pair", 4)])
def test_wide_tiles_fit_and_split_their_columns(tile_n, stages, epilogue, cm):
    """A wide tile: each consumer warpgroup half the columns over all 128 rows, B's ring holding just
    the tile's rows, loaded in boxes of at most 256 rows (a warpgroup's columns, or a cluster CTA's part)."""
    cfg = HopperConfig(input="float16", tile_n=tile_n, stages=stages, epilogue=epilogue, cluster_m=cm)
    assert cfg.wide and cfg.wg_n == tile_n // 2 and cfg.b_rows == tile_n
    assert cfg.smem_bytes <= hopper_config.SMEM_LIMIT
    assert cfg.acc_per_thread * hopper_config.CONSUMER_THREADS == cfg.tile_m * cfg.tile_n
    assert cfg.b_box_rows == (tile_n // 2 if cm == 1 else tile_n // cm) <= 256
    assert (tile_n // cm) % cfg.b_box_rows == 0 and cfg.b_box_rows % 8 == 0  # whole boxes of whole swizzle atoms
    assert not HopperConfig(input="float16", tile_n=256).wide and HopperConfig(tile_n=256).b_box_rows == 256


@pytest.mark.parametrize("changes,words", [
    (dict(b_k_major=False), "K-major B"), (dict(pingpong=True), "cooperative"), (dict(tile_m=64), "cooperative"),
    (dict(sk_reduce="spread", policy="streamk"), "spill"), (dict(stages=4, epilogue="staged"), "shared memory")])
def test_wide_tiles_refuse_what_the_kernel_lacks(changes, words):
    with pytest.raises(ValueError, match=words):
        HopperConfig(input="float16", tile_n=288, stages=3, epilogue="pair").replace(**changes)
    with pytest.raises(ValueError, match="tile_n must be one of"):
        HopperConfig(tile_n=352)


@pytest.mark.parametrize("changes,words", [
    (dict(b_k_major=False), "K-major B"), (dict(pingpong=True), "cooperative"),
    (dict(tile_m=64), "cooperative"), (dict(epilogue="tma"), "128-byte boxes"),
    (dict(cluster_m=4), "8-row swizzle atoms"), (dict(stages=6), "shared memory")])
def test_exact_widths_refuse_what_the_kernel_lacks(changes, words):
    with pytest.raises(ValueError, match=words):
        HopperConfig(input="float16", tile_n=144, stages=4, epilogue="staged").replace(**changes)
    with pytest.raises(ValueError, match="tile_n must be one of"):
        HopperConfig(tile_n=136)


def test_plan_launch_pingpong_uses_its_tile_rows():
    cfg = HopperConfig(tile_n=256, policy="streamk", pingpong=True, tile_m=64)
    lp = hopper.plan_launch(cfg, 1000, 3000, 4000, 132)
    assert (lp.rows, lp.cols, lp.k_iters) == schedule.tile_grid(1000, 3000, 4000, 64, 256, 64)


@pytest.mark.parametrize("m,n,k", [(512, 512, 32768), (256, 256, 65536), (384, 384, 65536),
                                   (128, 128, 131072), (1000, 200, 50000)])
def test_plan_launch_spread_splits_every_tile_evenly(m, n, k):
    """Stream-K with the spread fix-up, every tile split four or more ways: a whole number of
    CTAs per tile (at most the slots), so no CTA's range straddles two tiles; the owner fix-up keeps all
    the slots; the mirror's spread slots still cover every split tile once."""
    cfg = hopper.fit_policy(HopperConfig(input="float16", tile_n=128, stages=6), m, n, k, 132)
    assert (cfg.policy, cfg.sk_reduce) == ("streamk", "spread")
    lp = hopper.plan_launch(cfg, m, n, k, 132)
    assert lp.grid % lp.tiles == 0 and lp.grid // lp.tiles >= 4 and lp.grid > 132 - lp.tiles
    units = schedule.assignment("streamk", lp.rows, lp.cols, lp.k_iters, lp.grid, sk_tiles=lp.sk_tiles)
    per_tile = lp.grid // lp.tiles
    for cta, mine in enumerate(units):
        assert {t for t, _, _ in mine} == {cta // per_tile}  # one tile each, in order
    owner = hopper.plan_launch(cfg.replace(sk_reduce="owner"), m, n, k, 132)
    assert owner.grid == 132


@pytest.mark.parametrize("m,n,k,ways,cm,cn", [(896, 896, 8192, 2, 1, 1), (640, 1024, 8192, 3, 1, 1),
                                             (888, 888, 13696, 4, 1, 1), (1000, 900, 5000, 2, 2, 2),
                                             (300, 2000, 4100, 3, 2, 1), (256, 256, 1000, 40, 1, 1)])
def test_plan_launch_sk_ways_splits_every_tile_in_equal_slices(m, n, k, ways, cm, cn):
    """sk_ways: under one wave, each tile (block) split into the same number of k-slices, that
    many or as many as the slots (k-iterations) allow, one CTA (cluster) each; the mirror gives every CTA one slice
    of one tile, every tile's k-iterations exactly once, the slices no more than one apart."""
    cfg = HopperConfig(input="float16", tile_n=128, stages=6, policy="streamk", sk_ways=ways,
                       cluster_m=cm, cluster_n=cn)
    lp = hopper.plan_launch(cfg, m, n, k, 132)
    blocks = hopper_config._blocks(cfg, lp.rows, lp.cols)
    clusters = lp.grid // (cm * cn)
    per = min(ways, 132 // (cm * cn) // blocks, lp.k_iters)
    assert lp.sk_tiles == blocks and clusters == blocks * per
    units = schedule.assignment("streamk", -(-lp.rows // cm), -(-lp.cols // cn), lp.k_iters, clusters,
                                sk_tiles=lp.sk_tiles)
    covered = {}
    for c, mine in enumerate(units):
        assert len(mine) == 1 and mine[0][0] == c // per  # one slice of one block
        t, kb, ke = mine[0]
        covered.setdefault(t, []).append((kb, ke))
    for t, slices in covered.items():
        slices.sort()
        assert slices[0][0] == 0 and slices[-1][1] == lp.k_iters
        assert all(a[1] == b[0] for a, b in zip(slices, slices[1:]))
        sizes = [ke - kb for kb, ke in slices]
        assert max(sizes) - min(sizes) <= 1
    assert "ways" in str(cfg)
    assert cfg.replace(policy="static").sk_ways == 0  # other policies split no tile
    with pytest.raises(ValueError, match="sk_ways"):
        cfg.replace(sk_ways=-1)


def test_plan_launch_matches_mirror():
    cfg = HopperConfig(tile_n=256, policy="streamk")
    lp = hopper.plan_launch(cfg, 1000, 3000, 4000, 132)
    assert (lp.rows, lp.cols, lp.k_iters) == schedule.tile_grid(1000, 3000, 4000, 128, 256, 64)
    assert lp.sk_tiles == schedule.streamk_tiles(lp.tiles, 132, lp.k_iters)
    assert lp.grid == 132
    pt = hopper.plan_launch(cfg.replace(policy="per_tile"), 1000, 3000, 4000, 132)
    assert pt.grid == pt.tiles and pt.sk_tiles == 0


# --- mutation-audit additions: the validation's edges, rendering, the split-only plan -----------

def test_config_validation_edges():
    """What is allowed right at each limit, and the checks the tests above do not reach."""
    assert HopperConfig(stages=2).stages == 2
    assert HopperConfig(producer_regs=168, consumer_regs=168).producer_regs == 168  # LAUNCH_REGS each
    assert HopperConfig(producer_regs=32, consumer_regs=240).consumer_regs == 240  # 65536 registers exactly
    assert HopperConfig(k_parts=hopper_config.MAX_K_PARTS).k_parts == hopper_config.MAX_K_PARTS
    assert HopperConfig(tile_n=192, promote=2).promote == 2
    with pytest.raises(ValueError, match="promote"):
        HopperConfig(tile_n=224, promote=2)
    with pytest.raises(ValueError, match="promote"):
        HopperConfig(pingpong=True, tile_m=64, tile_n=128, promote=2)
    with pytest.raises(ValueError, match="raster"):
        HopperConfig(raster="x")
    with pytest.raises(ValueError, match="split_only"):
        HopperConfig(policy="streamk", sk_reduce="owner", split_only=True)
    with pytest.raises(ValueError, match="plain_out"):
        HopperConfig(epilogue="pair", plain_out=True)
    with pytest.raises(ValueError, match="out_cols"):  # divides 144, but 8 x 8 pieces is half a round
        HopperConfig(input="float16", tile_n=288, stages=3, epilogue="columns", out_cols=8)
    assert HopperConfig(input="float16", tile_n=288, stages=3, epilogue="columns", out_cols=16).out_cols == 16
    with pytest.raises(ValueError, match="an exact width"):  # pingpong, 128 rows
        HopperConfig(tile_n=144, pingpong=True, tile_m=128)


def test_tma_epilogue_takes_a_larger_barrier_area():
    tma = HopperConfig(input="float16", tile_n=128, stages=4, epilogue="tma")
    staged = tma.replace(epilogue="staged")
    assert tma.smem_bytes == 1024 + 4 * (128 + 128) * 128 + 1024 + 2 * 64 * 256
    assert tma.smem_bytes - staged.smem_bytes == 512


def test_trimmed_code_renders_and_keys():
    only = HopperConfig(policy="streamk", sk_reduce="spread", split_only=True)
    plain = HopperConfig(input="float16", epilogue="staged", plain_out=True)
    assert "#define MGEMM_SPLIT_ONLY 1\n" in only.render() and "#define MGEMM_SPLIT_ONLY 0\n" in plain.render()
    assert "#define MGEMM_PLAIN_OUT 1\n" in plain.render() and "#define MGEMM_PLAIN_OUT 0\n" in only.render()
    assert only.key() != only.replace(split_only=False).key()
    assert plain.key() != plain.replace(plain_out=False).key()


def test_plan_launch_refuses_split_only_where_a_tile_runs_whole():
    """One k-iteration a tile cannot be split: every_tile_split is False there, and a split_only
    config's launch is refused; 512x512x32768 splits every tile."""
    spread = HopperConfig(policy="streamk", sk_reduce="spread")
    assert not hopper_config.every_tile_split(spread, hopper_config.plan_launch(spread, 128, 128, 64, 132))
    only = spread.replace(split_only=True)
    with pytest.raises(ValueError, match="split_only=True, but"):
        hopper_config.plan_launch(only, 2048, 2048, 512, 132)
    assert hopper_config.plan_launch(only, 512, 512, 32768, 132).grid == 128


def test_sk_ways_is_for_stream_k_under_one_wave():
    """sk_ways is dropped by the policies that split no tile, and a launch of more tiles than
    slots is plain stream-K: one CTA a slot."""
    for policy in ("static", "per_tile", "dynamic"):
        assert HopperConfig(policy=policy, sk_ways=3).sk_ways == 0, policy
    ways = HopperConfig(policy="streamk", sk_ways=2)
    assert hopper_config.plan_launch(ways, 1152, 3968, 512, 132).grid == 132  # 279 tiles


def test_input_kind_takes_float32_only_as_tf32_when_allowed():
    assert hopper_config.input_kind("float32", allow_tf32=True) == "tf32"
    assert hopper_config.input_kind("bfloat16") == "bfloat16"
    with pytest.raises(TypeError, match="allow_tf32"):
        hopper_config.input_kind("float32")
