"""Tests of the persistent GEMM kernel: config rendering and the heuristic on the CPU; on a GPU,
every dtype, policy and layout against a float64 reference, and the kernel's debug record
against the scheduler's Python mirror."""

import types

import numpy as np
import pytest

from mgemm import hopper, hopper_heuristic, kernels, schedule
from mgemm.kernels import KernelConfig

from gpu_operands import as_float64, check_product, poisoned, product_operands, rand_operand


def _cupy_or_none():
    try:
        import cupy
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


cp = _cupy_or_none()
needs_gpu = pytest.mark.skipif(cp is None, reason="needs CuPy and a CUDA GPU")

# ‖out − ref‖ / ‖ref‖ bounds against a float64 reference on the same (rounded) inputs.
BOUNDS = {"float16": 2e-3, "bfloat16": 1e-2, "tf32": 5e-3, "float32": 1e-5, "float64": 1e-12}
KINDS = ["float16", "bfloat16", "tf32", "float32", "float64"]


# --- CPU: configuration and heuristic -------------------------------------------------------------

def test_render_is_by_name_and_complete():
    cfg = KernelConfig.default("float64", policy="dynamic", a_k_major=False)
    text = cfg.render()
    for name, value in cfg.defines().items():
        assert f"#define {name} {value}\n" in text
    assert "#define MGEMM_INPUT MGEMM_F64" in text
    assert "#define MGEMM_POLICY MGEMM_POLICY_DYNAMIC" in text
    assert "#define MGEMM_A_K_MAJOR 0" in text
    src = (kernels.KERNEL_DIR / kernels.KERNEL_SOURCE).read_text()
    for name in cfg.defines():
        assert f"#ifndef {name}" in src, f"{name} has no default in the kernel source"


def test_cache_key_changes_with_config_and_options():
    a = KernelConfig.default("float16")
    assert a.key() == KernelConfig.default("float16").key()
    assert a.key() != a.replace(stages=3).key()
    assert a.key() != a.replace(policy="streamk").key()
    assert a.key() != a.replace(frag_db=False).key()
    assert "frag_db=False" in str(a.replace(frag_db=False)) and "frag_db" not in str(a)
    for knob in (dict(swizzle=True), dict(fast_copy=True), dict(frag_carry=True), dict(min_blocks=2)):
        b = a.replace(**knob)
        assert b.key() != a.key()
        name, value = next(iter(knob.items()))
        assert f"{name}={value}" in str(b) and name not in str(a)
    assert a.key(("-arch=sm_80",)) != a.key(("-arch=sm_90",))
    assert a.key() in a.source()


@pytest.mark.parametrize("shape_a, shape_b", [((2**31 - 1, 1), (1, 1)), ((1, 2**31), (2**31, 1)),
                                              ((1, 1), (1, 2**31 - 1000))])
def test_dimensions_past_32_bits_are_refused_before_any_work(shape_a, shape_b):
    """The kernels count M, N and K in 32-bit ints (a tile count of M = 2**31 - 1 wrapped
    negative, and nothing was computed): such a launch is a ValueError before the device is
    asked anything (no CuPy here), in ``prepare_call``, which both launchers call first."""
    from types import SimpleNamespace

    def fake(shape):
        return SimpleNamespace(shape=shape, ndim=2, dtype=np.dtype("float16"))
    with pytest.raises(ValueError, match="counts M, N and K in 32 bits: each at most 2,147,482,624"):
        kernels.prepare_call(None, fake(shape_a), fake(shape_b), None, None, beta=0.0, config=None,
                             allow_tf32=False, sms=None, as_dtype=None, out_dtype=None,
                             input_kind=kernels.input_kind, choose=None, outputs=kernels.OUTPUTS,
                             writer="the kernel")


def test_config_validates():
    with pytest.raises(ValueError):
        KernelConfig(input="int8")
    with pytest.raises(ValueError):
        KernelConfig(input="float64", dmma_k=2)
    with pytest.raises(ValueError):
        KernelConfig(policy="greedy")
    with pytest.raises(ValueError):
        KernelConfig(input="float32", tile_m=128, tile_n=128, warps_m=2, warps_n=2)
    assert KernelConfig(input="tf32").output == "float32"
    # the opt-in mainloop knobs: where they apply
    with pytest.raises(ValueError):
        KernelConfig.default("float64", swizzle=True)
    with pytest.raises(ValueError):
        KernelConfig.default("tf32", swizzle=True)
    with pytest.raises(ValueError):
        KernelConfig.default("float16", swizzle=True, tile_n=192, warps_n=4)  # 24 chunks per row
    with pytest.raises(ValueError):
        KernelConfig.default("float32", fast_copy=True)
    with pytest.raises(ValueError):
        KernelConfig.default("tf32", frag_carry=True)
    with pytest.raises(ValueError):
        KernelConfig.default("float16", frag_carry=True, frag_db=False)
    with pytest.raises(ValueError):
        KernelConfig.default("float16", frag_carry=True, tile_k=16)  # one k-step per tile
    with pytest.raises(ValueError):
        KernelConfig.default("float16", min_blocks=5)
    with pytest.raises(ValueError):
        KernelConfig.default("float16", min_blocks=3, tile_m=256, tile_n=256, warps_m=4, warps_n=8)  # 3072 threads
    with pytest.raises(ValueError):
        KernelConfig.default("float64", frag_carry=True)
    KernelConfig.default("float64", fast_copy=True)
    KernelConfig.default("bfloat16", swizzle=True, fast_copy=True, frag_carry=True, tile_k=64, stages=3)


def test_swizzle_drops_the_padding_from_shared_memory():
    cfg = KernelConfig.default("float16")  # 128x128x32 s4
    assert cfg.smem_bytes == 4 * (128 * (32 + 8) + 32 * (128 + 8)) * 2
    assert cfg.replace(swizzle=True).smem_bytes == 4 * (128 * 32 + 32 * 128) * 2
    assert "#define MGEMM_SWIZZLE 1" in cfg.replace(swizzle=True).render()
    assert "#define MGEMM_MIN_BLOCKS 2" in cfg.replace(min_blocks=2).render()


def _swizzle_offset(o, c, inner):
    """Python mirror of Swz<INNER>::off in kernels/mainloop_mma.cuh (16-bit elements)."""
    cpr = inner // 8
    cw = min(cpr, 8)
    rpl = 8 // cw
    return o * inner * 2 + 16 * (c ^ ((o // rpl) & (cw - 1)))


@pytest.mark.parametrize("inner", [16, 32, 64, 128, 256])
def test_swizzle_is_a_permutation_and_ldmatrix_conflict_free(inner):
    """Each row's chunks are permuted within the row; the 8 rows of one ldmatrix matrix (rows
    8q..8q+7, one chunk column) land in 8 distinct 16-byte bank groups; a row displacement by a
    multiple of 8 leaves the XOR term alone (the kernel's compile-time fragment offsets)."""
    cpr = inner // 8
    rows = 64
    offs = {_swizzle_offset(o, c, inner) for o in range(rows) for c in range(cpr)}
    assert offs == {16 * i for i in range(rows * cpr)}
    for q in range(rows // 8):
        for c in range(cpr):
            banks = {(_swizzle_offset(8 * q + r, c, inner) // 16) % 8 for r in range(8)}
            assert len(banks) == 8
    for o in range(8):
        for c in range(cpr):
            for d in (8, 16, 24, 32):
                assert _swizzle_offset(o + d, c, inner) == _swizzle_offset(o, c, inner) + d * inner * 2


@pytest.mark.parametrize("kind", KINDS)
def test_smem_and_threads_of_defaults_fit_a_sm80_block(kind):
    cfg = KernelConfig.default(kind)
    assert cfg.smem_bytes <= 163 * 1024
    assert cfg.threads in (128, 256)
    assert cfg.acc_per_thread * cfg.threads == cfg.tile_m * cfg.tile_n


def test_heuristic_is_deterministic_and_sensible():
    big = kernels.choose_config(8192, 8192, 8192, "float16", 132)
    assert big == kernels.choose_config(8192, 8192, 8192, "float16", 132)
    assert (big.tile_m, big.tile_n, big.policy) == (256, 128, "static")
    assert big.swizzle and big.fast_copy and big.frag_carry  # the 16-bit knobs are on
    assert not kernels.choose_config(8192, 8192, 8192, "float64", 132).swizzle
    # Under one wave of a few big tiles with a long K: smaller tiles, so that the stream-K
    # fix-up does not add dozens of partials per tile.
    tiny = kernels.choose_config(256, 256, 65536, "float16", 132)
    assert (tiny.tile_m, tiny.tile_n) == (64, 128)
    # Less than one wave with a long K: split K.
    assert kernels.choose_config(64, 8192, 8192, "bfloat16", 132).policy == "streamk"
    assert kernels.choose_config(256, 256, 65536, "float16", 132).policy == "streamk"
    # A short K is not worth splitting.
    assert kernels.choose_config(1000, 1000, 64, "float16", 132).policy == "per_tile"  # one wave
    # Sharing the GPU: dynamic.
    assert kernels.choose_config(8192, 8192, 8192, "float16", 132, shared=True).policy == "dynamic"
    # Float32 is exact SIMT unless TF32 is allowed.
    assert kernels.choose_config(512, 512, 512, "float32", 132).input == "float32"
    assert kernels.choose_config(512, 512, 512, "float32", 132, allow_tf32=True).input == "tf32"
    with pytest.raises(TypeError):
        kernels.choose_config(8, 8, 8, "int32", 132)


def test_heuristic_splits_a_last_wave_below_nine_tenths_of_the_busiest_load():
    """The portable kernel splits where the SMs' average load is below ``SPLIT_FILL`` (0.9) of the
    busiest SM's: 330 tiles of 256x128 on 132 SMs (0.83) and 580 (0.88) run stream-K, 396 (three
    whole waves) static; the Hopper kernel's rule stays at 0.8."""
    assert kernels.SPLIT_FILL == 0.9 and hopper_heuristic.SPLIT_FILL == 0.8
    for (m, n), policy in [((3840, 2816), "streamk"), ((5120, 3712), "streamk"),
                           ((4608, 2816), "static")]:
        cfg = kernels.choose_config(m, n, 8192, "float16", 132)
        assert ((cfg.tile_m, cfg.tile_n), cfg.policy) == ((256, 128), policy), (m, n)
    assert kernels.split_tail(330, 132, 132, 256) and kernels.split_tail(580, 132, 132, 256)
    assert not kernels.split_tail(330, 132, 132, 256, fill=0.8)
    assert not kernels.split_tail(116, 132, 132, 256)  # one partial wave: 0.8 still (0.88 here)
    assert kernels.split_tail(100, 132, 132, 256)
    assert hopper.choose_policy(330, 132, 128) == "static"
    assert hopper.choose_policy(300, 132, 128) == "streamk"  # 0.76


SMEM_PER_SM = {"sm_90": 233472, "sm_80": 167936, "sm_86": 102400}  # bytes per SM


@pytest.mark.parametrize("arch", SMEM_PER_SM)
@pytest.mark.parametrize("m,n,k", [(8192, 8192, 8192), (896, 2432, 8192), (64, 8192, 8192),
                                   (1408, 1536, 16384), (8192, 8192, 256), (1, 1, 1),
                                   (1536, 2048, 8192), (3072, 2048, 4096)])
@pytest.mark.parametrize("kind", ["float16", "float32", "float64"])
def test_heuristic_streamk_only_when_last_wave_is_poor(m, n, k, kind, arch):
    """The policy follows the CTAs an SM of ``arch`` holds (fewer of the 16-bit tiles of six
    stages where shared memory is smaller)."""
    cfg = kernels.choose_config(m, n, k, kind, 132, smem_per_sm=SMEM_PER_SM[arch])
    occupancy = kernels.resident_ctas(kind, (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.stages,
                                             cfg.warps_m, cfg.warps_n), SMEM_PER_SM[arch])
    rows, cols, k_iters = schedule.tile_grid(m, n, k, cfg.tile_m, cfg.tile_n, cfg.tile_k)
    slots = 132 * occupancy
    tiles = rows * cols
    short = k_iters < kernels.ONE_WAVE_K_ITERS[kind]  # too few to split one wave or idle CTAs
    if cfg.policy == "streamk":
        assert tiles % slots and k_iters >= 4
        if tiles > 132:
            assert schedule.wave_fill(tiles, 132) < kernels.SPLIT_FILL or (2 * tiles <= slots and not short)
        else:
            assert not short
            assert 2 * tiles <= slots or schedule.wave_fill(tiles, 132) < kernels.ONE_WAVE_SPLIT_FILL
    else:
        assert not (k_iters >= 4 and tiles % slots and 2 * tiles <= slots and not short)
        # one CTA per tile where none would take a second (the same tiles, no persistent loop)
        one_wave = tiles <= slots and kind in kernels.PER_TILE_IN_ONE_WAVE
        assert cfg.policy == ("per_tile" if one_wave else "static")


def test_resident_ctas_are_the_tables_on_sm90_and_fewer_where_shared_memory_is_smaller():
    """On sm_90 every tile the heuristic weighs keeps its ``TILE_CHOICES`` count (the heuristic
    chooses as before there); sm_80 and sm_86/89 hold as many stages as their shared memory takes,
    one CTA of each 96 KiB 16-bit tile on sm_86 and two of the float32 tiles of 19-25 KiB."""
    for kind, choices in kernels.TILE_CHOICES.items():
        for tile, table in choices:
            assert kernels.resident_ctas(kind, tile) == table, (kind, tile)
    half = kernels.TILE_CHOICES["float16"]
    assert [kernels.resident_ctas("float16", t, SMEM_PER_SM["sm_80"]) for t, _ in half] == [1, 1, 3]
    assert [kernels.resident_ctas("float16", t, SMEM_PER_SM["sm_86"]) for t, _ in half] == [1, 1, 2]
    assert [kernels.resident_ctas("float32", t, SMEM_PER_SM["sm_86"])
            for t, _ in kernels.TILE_CHOICES["float32"]] == [4, 2]
    six = (128, 128, 32, 6, 2, 2)  # 96 KiB of stages: two need the driver's 1 KiB each beside
    assert kernels.resident_ctas("float16", six, 2 * 98304) == 1
    assert kernels.resident_ctas("float16", six, 2 * 99328) == 2
    assert kernels.resident_ctas("float16", six, 65536) == 1  # none fits: the launch will say
    # 2560x4096: 320 tiles of 256x128 (2.4 waves, split) against 640 of 128x128 that sm_90 runs
    # two to an SM, sm_86 one (4.85 waves of 132, the SMs 0.97 filled: static)
    sm90 = kernels.choose_config(2560, 4096, 4096, "float16", 132)
    sm86 = kernels.choose_config(2560, 4096, 4096, "float16", 132, smem_per_sm=SMEM_PER_SM["sm_86"])
    assert (sm90.tile_m, sm90.tile_n, sm90.policy) == (256, 128, "streamk"), sm90
    assert (sm86.tile_m, sm86.tile_n, sm86.policy) == (128, 128, "static"), sm86


def test_a_launch_chooses_for_its_devices_shared_memory(monkeypatch):
    """``gemm`` without a config chooses for the device's shared memory per SM
    (``_choose_on_device``): on an sm_86 GPU's 100 KiB, 2560x4096x4096 float16 takes 128x128
    tiles, not sm_90's 256x128."""
    monkeypatch.setattr(kernels, "device_id", lambda device=None: 3)
    monkeypatch.setattr(kernels, "device_shared_memory", lambda device: (101376, 102400))
    got = kernels._choose_on_device(2560, 4096, 4096, "float16", 132, False)
    assert got == kernels.choose_config(2560, 4096, 4096, "float16", 132, smem_per_sm=102400)
    assert (got.tile_m, got.tile_n, got.policy) == (128, 128, "static")
    asked = []
    monkeypatch.setattr(kernels, "_cupy", lambda: None)
    monkeypatch.setattr(kernels, "prepare_call", lambda *a, **kw: asked.append(kw["choose"]) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        kernels.gemm(np.ones((4, 4), np.float16), np.ones((4, 4), np.float16))
    assert asked == [kernels._choose_on_device]


def test_shared_memory_past_a_devices_block_is_a_clear_error(monkeypatch):
    """A config whose tiles need more shared memory than one block of the device may have (the
    default ``KernelConfig()``'s 106 KiB on an sm_86 GPU's 99 KiB) is a ``ValueError`` naming the
    bytes and the limit, raised when the kernel is built, before the dynamic shared memory limit
    is set (CUDA refused that with a bare invalid argument); one that fits is built."""
    import types

    built = []

    class Function:
        shared_size_bytes = 16  # the dynamic policy's ticket

        def __setattr__(self, name, value):
            built.append((name, value))

    class Device:
        def __init__(self, dev):
            self.compute_capability = "86"
            self.attributes = {"MultiProcessorCount": 84, "MaxSharedMemoryPerBlockOptin": 101376,
                               "MaxSharedMemoryPerMultiprocessor": 102400}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    module = types.SimpleNamespace(get_function=lambda name: Function())
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=Device),
                                 RawModule=lambda code, options: module)
    monkeypatch.setattr(kernels, "_cupy", lambda: fake)
    monkeypatch.setattr(kernels, "_compiled", {})
    monkeypatch.setattr(kernels, "_by_config", {})
    kernels.device_attributes.cache_clear()
    kernels.compute_capability.cache_clear()
    try:
        big = KernelConfig()
        assert big.smem_bytes == 108544
        with pytest.raises(ValueError, match=r"108,560 bytes of shared memory per block \(108,544 for "
                                             r"its tiles, 16 static\), more than the 101,376 .*\(sm_86\)"):
            kernels.compile_kernel(big, ("-arch=sm_86",), kernels.KERNEL_NAME, 7)
        assert built == [] and kernels._compiled == {}
        fits = KernelConfig.default("float16")
        kernels.compile_kernel(fits, ("-arch=sm_86",), kernels.KERNEL_NAME, 7)
        assert built == [("max_dynamic_shared_size_bytes", fits.smem_bytes)]
        assert kernels.device_shared_memory(7) == (101376, 102400)
        # exactly the limit fits
        kernels.check_shared_memory(fits.replace(stages=2), 101376 - fits.replace(stages=2).smem_bytes, 7)
    finally:
        kernels.device_attributes.cache_clear()
        kernels.compute_capability.cache_clear()


def test_heuristic_keeps_one_wave_whole_at_short_k():
    """Where no SM holds more than one tile, or the tiles fill at most half the CTAs, the portable
    kernel splits only with ``ONE_WAVE_K_ITERS`` k-iterations per tile (float16: 100 of 32, so K
    of 3200); a partial last wave of several keeps the fill rule at any K; the Hopper kernel's
    rule does not change."""
    assert kernels.ONE_WAVE_K_ITERS["float16"] == 100
    for k, policy in [(1024, "per_tile"), (3168, "per_tile"), (3200, "streamk"), (8192, "streamk")]:
        cfg = kernels.choose_config(512, 1024, k, "float16", 132)  # 64 tiles of 64x128
        assert ((cfg.tile_m, cfg.tile_n), cfg.policy) == ((64, 128), policy), k
    assert not kernels.split_tail(64, 396, 132, 99, one_wave_k_iters=100)
    assert kernels.split_tail(64, 396, 132, 100, one_wave_k_iters=100)
    assert not kernels.split_tail(128, 396, 132, 64, one_wave_k_iters=100)  # half the CTAs, short K
    assert kernels.split_tail(133, 132, 132, 8, one_wave_k_iters=100)  # a poor last wave: any K
    assert kernels.split_tail(64, 132, 132, 8)  # the default floor, as the Hopper kernel calls it
    assert hopper.choose_policy(64, 132, 8) == "streamk"


def _prepare(a, b, c=None, out=None, *, launcher=kernels, sms=None, **kw):
    """``kernels.prepare_call`` on NumPy stand-ins for CuPy arrays (no GPU: the checks and the
    output allocation are host work), as ``launcher``'s gemm calls it, on a 132-SM device
    (``hopper``'s picks come from ``hopper_heuristic``)."""
    import types
    picks = hopper_heuristic if launcher is hopper else launcher
    runtime = types.SimpleNamespace(getDevice=lambda: 0)
    fake_cp = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime), uint16=np.uint16, empty=np.empty)
    chosen = []

    def choose(*args):
        chosen.append(args)
        return picks._choose_cached(*args)
    kw.setdefault("beta", 0.0)
    call = kernels.prepare_call(fake_cp, a, b, c, out, config=kw.pop("config", None),
                                allow_tf32=kw.pop("allow_tf32", False), sms=sms,
                                as_dtype=kw.pop("as_dtype", None), out_dtype=kw.pop("out_dtype", None),
                                input_kind=launcher.input_kind, choose=choose,
                                outputs=launcher.OUTPUTS, writer="the kernel", **kw)
    return call, chosen


def test_prepare_call_checks_and_allocates(monkeypatch):
    from mgemm import hopper
    monkeypatch.setattr(kernels, "device_sms", lambda device=None: 132)
    a, b = np.ones((30, 20), np.float16), np.ones((20, 10), np.float16)
    call, chosen = _prepare(a, b)
    assert (call.m, call.n, call.k, call.dtype, call.kind, call.sms) == (30, 10, 20, "float16", "float16", 132)
    assert chosen == [(30, 10, 20, "float16", 132, False)] and call.config.input == "float16"
    assert call.out.shape == (30, 10) and call.out.dtype == np.float16 and call.res_dtype == "float16"
    assert _prepare(a, b, sms=500)[0].sms == 132 and _prepare(a, b, sms=0)[0].sms == 1
    bits = _prepare(a.view(np.uint16), b.view(np.uint16), as_dtype="bfloat16")[0]
    assert bits.kind == "bfloat16" and bits.out.dtype == np.uint16 and bits.res_dtype == "bfloat16"
    assert _prepare(a, b, out_dtype="float32")[0].out.dtype == np.float32
    given = np.empty((30, 10), np.float32)
    assert _prepare(a, b, out=given)[0].out is given
    with pytest.raises(ValueError, match="got \\(30, 20\\) @ \\(10, 20\\)"):
        _prepare(a, b.T)
    with pytest.raises(TypeError, match="must share a dtype"):
        _prepare(a, b.astype(np.float32))
    with pytest.raises(ValueError, match="config multiplies float64"):
        _prepare(a, b, config=KernelConfig.default("float64"))
    with pytest.raises(TypeError, match="the kernel writes .* not complex64"):
        _prepare(a, b, out_dtype="complex64")
    with pytest.raises(ValueError, match="out has shape"):
        _prepare(a, b, out=np.empty((10, 30), np.float16))
    with pytest.raises(ValueError, match="beta != 0 needs c"):
        _prepare(a, b, beta=1.0)
    # The kernels read C as the output type: another dtype is refused, unless C is not read.
    with pytest.raises(TypeError, match="c \\(float32\\) and out \\(float16\\)"):
        _prepare(a, b, np.ones((30, 10), np.float32), np.empty((30, 10), np.float16), beta=1.0)
    assert _prepare(a, b, np.ones((30, 10), np.float32), beta=0.0)[0].out.dtype == np.float16
    assert _prepare(a, b, np.ones((30, 10), np.float32), beta=0.5)[0].out.dtype == np.float32
    # The Hopper launcher's kinds and outputs.
    with pytest.raises(TypeError, match="Hopper kernel multiplies"):
        _prepare(a.astype(np.float64), b.astype(np.float64), launcher=hopper)
    with pytest.raises(TypeError, match="the kernel writes .* not float64"):
        _prepare(a, b, out_dtype="float64", launcher=hopper)
    assert _prepare(a.astype(np.float32), b.astype(np.float32), launcher=hopper,
                    allow_tf32=True)[0].kind == "tf32"


def test_plan_launch_matches_mirror():
    cfg = KernelConfig.default("float16", policy="streamk")
    lp = kernels.plan_launch(cfg, 1000, 3000, 4000, 132)
    assert (lp.rows, lp.cols, lp.k_iters) == schedule.tile_grid(1000, 3000, 4000, cfg.tile_m,
                                                                 cfg.tile_n, cfg.tile_k)
    assert lp.sk_tiles == schedule.streamk_tiles(lp.tiles, 132, lp.k_iters)
    assert lp.grid == 132
    # sk_waves=0: the partial last wave alone; the launch's split, not the kernel's (same source)
    dp = cfg.replace(sk_waves=0)
    assert kernels.plan_launch(dp, 1000, 3000, 4000, 132).sk_tiles == lp.tiles % 132
    assert dp.key() == cfg.key() and str(dp).endswith("skw0")
    with pytest.raises(ValueError, match="sk_waves"):
        cfg.replace(sk_waves=3)


class _FakeCupy:
    """Just enough of CuPy for ``launch_scratch``: streams by pointer, arrays with a size, dtype
    and address, and a record of the memsets issued."""

    def __init__(self):
        fake = self
        self.memsets, self.stream_ptr, self.allocs = [], 1, 0

        class Stream:
            @property
            def ptr(self):
                return fake.stream_ptr

        class Array:
            def __init__(self, n, dtype, zeros=False):
                fake.allocs += 1
                self.size, self.dtype, self.zeros = n, np.dtype(dtype), zeros
                self.data = type("Ptr", (), {"ptr": 1000 * fake.allocs})()

        class Runtime:
            @staticmethod
            def memsetAsync(ptr, value, nbytes, stream):
                fake.memsets.append((ptr, value, nbytes, stream))

        self.int32, self.float32, self.float64 = np.int32, np.float32, np.float64
        self.dtype = np.dtype
        self.cuda = type("cuda", (), {"get_current_stream": staticmethod(lambda: Stream()),
                                      "runtime": Runtime})
        self.empty = lambda n, dtype: Array(n, dtype)
        self.zeros = lambda n, dtype: Array(n, dtype, zeros=True)


def test_launch_scratch_is_reused_per_stream_and_zeroed_only_when_read(monkeypatch):
    monkeypatch.setattr(kernels, "_scratch", {})  # the fake arrays never reach a real launch
    cp = _FakeCupy()
    sync, ws, rec = kernels.launch_scratch(cp, 0, 8, False, 1, np.float32)
    assert sync.size >= 9 and not cp.memsets  # static/per_tile never read the counters
    sync2, ws2, rec2 = kernels.launch_scratch(cp, 0, 8, True, 100, np.float32)
    assert sync2 is sync and rec2 is rec  # reused on the same stream and thread
    assert ws2 is not ws and ws2.size >= 100  # grown for a bigger stream-K workspace
    assert cp.memsets == [(sync.data.ptr, 0, 9 * 4, 1)]  # 1 + grid ints, on this stream
    _, ws3, _ = kernels.launch_scratch(cp, 0, 4, False, 50, np.float32)
    assert ws3 is ws2  # big enough: no new allocation
    _, ws64, _ = kernels.launch_scratch(cp, 0, 4, False, 50, np.float64)
    assert ws64.dtype == np.float64  # a float64 workspace of its own
    cp.stream_ptr = 2
    sync4, _, _ = kernels.launch_scratch(cp, 0, 8, True, 1, np.float32)
    assert sync4 is not sync  # another stream: its own buffers (no cross-stream reuse)
    _, _, debug = kernels.launch_scratch(cp, 0, 8, False, 1, np.float32, record_elems=77)
    assert debug.zeros and debug.size == 77  # a fresh zeroed record for every debug launch


def test_epoch_sync_zeroes_once_and_counts_launches(monkeypatch):
    monkeypatch.setattr(kernels, "_scratch", {})
    cp = _FakeCupy()
    sync, epoch = kernels.epoch_sync(cp, 0, 9, False)
    assert (epoch, sync.size) == (1, 9) and cp.memsets == [(sync.data.ptr, 0, 9 * 4, 1)]
    sync2, epoch2 = kernels.epoch_sync(cp, 0, 5, False)
    assert sync2 is sync and epoch2 == 2 and len(cp.memsets) == 1  # no memset between launches
    _, epoch3 = kernels.epoch_sync(cp, 0, 9, True)  # dynamic: its counter alone
    assert epoch3 == 3 and cp.memsets[-1] == (sync.data.ptr, 0, 4, 1)
    sync4, epoch4 = kernels.epoch_sync(cp, 0, 20, False)  # grown: zeroed, epochs from 1 again
    assert sync4 is not sync and epoch4 == 1 and cp.memsets[-1] == (sync4.data.ptr, 0, 20 * 4, 1)
    monkeypatch.setattr(kernels, "_EPOCH_LIMIT", 3)
    assert kernels.epoch_sync(cp, 0, 20, False)[1] == 2
    assert kernels.epoch_sync(cp, 0, 20, False)[1] == 1  # would reach the limit: zeroed again
    assert cp.memsets[-1] == (sync4.data.ptr, 0, 20 * 4, 1)
    cp.stream_ptr = 2
    other, e = kernels.epoch_sync(cp, 0, 20, False)
    assert other is not sync4 and e == 1  # another stream: its own flags and epochs


def test_specialize_is_replace():
    cfg = KernelConfig.default("float16")
    assert kernels.specialize(cfg, policy="streamk") == cfg.replace(policy="streamk")
    assert kernels.specialize(cfg, policy="streamk") is kernels.specialize(cfg, policy="streamk")


class _Strided:
    """What ``store_form`` reads of an array: itemsize, byte strides and the base address."""

    def __init__(self, itemsize, strides, ptr):
        self.itemsize, self.strides = itemsize, strides
        self.data = type("Ptr", (), {"ptr": ptr})()


def test_store_form_mirrors_the_kernels_pairs_test():
    """One epilogue form per build (STORES): pairs where kernels/ptx.cuh's ``pairs_ok`` holds for
    D (and C when beta != 0) and the mainloop pairs its accumulators, C read only when beta != 0."""
    half, single = KernelConfig.default("float16"), KernelConfig.default("float32")
    assert (half.stores, single.stores) == ("pairs", "elements")
    assert "MGEMM_STORES_PAIRS" in half.render() and "stores" not in str(half)
    row = _Strided(2, (2 * 100, 2), 4096)
    assert kernels.store_form(half, row, row, 0.0) == "pairs"
    assert kernels.store_form(half, row, row, 0.5) == "pairs_c"
    assert kernels.store_form(single, _Strided(4, (400, 4), 4096), None, 0.0) == "elements"
    for bad in (_Strided(2, (2 * 101, 2), 4096),   # odd row stride
                _Strided(2, (2 * 100, 2), 4098),   # base one element off a pair
                _Strided(2, (2, 2 * 100), 4096)):  # column-major
        assert kernels.store_form(half, bad, row, 0.0) == "elements"
        assert kernels.store_form(half, row, bad, 0.5) == "elements_c"  # C read: C must pair too
        assert kernels.store_form(half, row, bad, 0.0) == "pairs"  # C not read: its layout is moot
    assert kernels.store_form(half, _Strided(8, (800, 8), 8), row, 0.0) == "elements"  # 8 % 16
    with pytest.raises(ValueError, match="stores"):
        KernelConfig.default("float16", stores="any")
    with pytest.raises(ValueError, match="paired stores"):
        KernelConfig.default("float32", stores="pairs_c")
    assert "stores=elements_c" in str(half.replace(stores="elements_c"))

# --- GPU ------------------------------------------------------------------------------------------


def test_check_product_fails_on_unwritten_or_wrong_outputs():
    """The GPU tests' check (``check_product``, here on NumPy arrays): it passes a product within
    the bound, and fails on one unwritten (NaN) element or one wrong element, naming where."""
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((40, 30))
    check_product(ref + 1e-6 * rng.standard_normal(ref.shape), ref, 2e-3, "close")
    unwritten = ref.copy()
    unwritten[3, 4] = np.nan
    with pytest.raises(AssertionError, match="^nan: 1 unwritten or NaN outputs of 1200"):
        check_product(unwritten, ref, 2e-3, "nan")
    wrong = ref.copy()
    wrong[7, 9] += 10.0
    with pytest.raises(AssertionError, match=r"^wrong: rel err .* > 2e-03; 1 bad elements; worst at \(7, 9\)"):
        check_product(wrong, ref, 2e-3, "wrong")


def _check(m, n, k, kind, policy, *, trans_a=False, trans_b=False, beta=0.0, alpha=1.0, seed=0,
           **variant):
    (a, a64), (b, b64), (c, c64) = product_operands(m, n, k, kind, np.random.default_rng(seed),
                                                    trans_a=trans_a, trans_b=trans_b)
    out = poisoned((m, n), kind)
    cfg = KernelConfig.default(kind, policy=policy, **variant)
    kernels.gemm(a, b, c, alpha=alpha, beta=beta, out=out, config=cfg,
                 allow_tf32=kind == "tf32", as_dtype="bfloat16" if kind == "bfloat16" else None)
    ref = alpha * (a64 @ b64) + (beta * c64 if beta else 0)
    check_product(as_float64(out, kind), ref, BOUNDS[kind], f"{kind} {policy} {m}x{n}x{k} tA={trans_a} tB={trans_b}")


SHAPES = [(1, 1, 1), (257, 263, 129), (1, 300, 77), (300, 1, 45), (2000, 9, 64), (33, 45, 71),
          (130, 260, 1000)]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_matches_float64_reference(kind, policy):
    for i, (m, n, k) in enumerate(SHAPES):
        _check(m, n, k, kind, policy, seed=i, beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("trans_a,trans_b", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_transposed_operands(kind, trans_a, trans_b):
    for i, (m, n, k) in enumerate([(200, 136, 96), (129, 67, 40)]):
        _check(m, n, k, kind, "streamk", trans_a=trans_a, trans_b=trans_b, seed=10 + i, beta=0.25)


# Mainloop variants away from their defaults (the ladder in benchmarks/kernels.py times them).
VARIANTS = [("float64", dict(dmma_k=0)), ("float64", dict(dmma_k=4)), ("float64", dict(dmma_k=8)),
            ("float64", dict(dmma_k=8, tile_m=64, tile_n=128)), ("float16", dict(frag_db=False)),
            ("bfloat16", dict(frag_db=False, tile_k=64, stages=3)), ("float32", dict(simt_vec=False)),
            ("float32", dict(tile_k=16))]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind,variant", VARIANTS, ids=[f"{k}-{v}" for k, v in VARIANTS])
def test_mainloop_variants(kind, variant):
    for i, (m, n, k) in enumerate([(257, 263, 129), (33, 45, 71), (130, 260, 1000)]):
        for policy in ("static", "streamk"):
            _check(m, n, k, kind, policy, seed=20 + i, beta=0.5 if i % 2 else 0.0, **variant)
    _check(200, 136, 96, kind, "streamk", trans_a=True, trans_b=True, seed=30, beta=0.25, **variant)


# The opt-in tensor-core knobs (swizzle, fast_copy, frag_carry, min_blocks), alone and together.
# Shapes: edges in every tile dimension, tiles wholly inside M/N/K (fast_copy's unmasked loop), a
# K tail after full k-tiles, and stream-K units that start and end inside K.
KNOB_VARIANTS = [
    ("float16", dict(swizzle=True)),
    ("bfloat16", dict(swizzle=True, tile_k=64, stages=3)),
    ("float16", dict(swizzle=True, tile_m=64, tile_n=256, warps_m=1, warps_n=4)),  # 4 rows a pass
    ("float16", dict(fast_copy=True)),
    ("float16", dict(frag_carry=True)),
    ("float16", dict(swizzle=True, fast_copy=True, frag_carry=True)),
    ("bfloat16", dict(swizzle=True, fast_copy=True, frag_carry=True, tile_k=64, stages=4)),
    ("float16", dict(min_blocks=2, warps_n=4)),
    ("float64", dict(fast_copy=True)),
    ("tf32", dict(fast_copy=True)),
]
KNOB_SHAPES = {  # (trans_a, trans_b, policy): shapes
    (False, False, "static"): [(257, 263, 129), (33, 45, 71), (256, 384, 512), (384, 256, 300),
                               (1, 300, 77)],
    (False, False, "streamk"): [(130, 260, 1000), (256, 256, 2048), (300, 1, 45)],
    (True, True, "streamk"): [(200, 136, 96), (256, 256, 640), (129, 67, 40)],
    (True, False, "static"): [(129, 67, 40), (256, 256, 256)],
}


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind,variant", KNOB_VARIANTS, ids=[f"{k}-{v}" for k, v in KNOB_VARIANTS])
def test_mainloop_knobs(kind, variant):
    for (ta, tb, policy), shapes in KNOB_SHAPES.items():
        for i, (m, n, k) in enumerate(shapes):
            _check(m, n, k, kind, policy, trans_a=ta, trans_b=tb, seed=40 + i,
                   beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75, **variant)


HEURISTIC_TILES = [(kind, tile) for kind in ("float16", "bfloat16")
                   for tile, _ in kernels.TILE_CHOICES[kind]]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind,tile", HEURISTIC_TILES, ids=[f"{k}-{t}" for k, t in HEURISTIC_TILES])
def test_heuristic_tiles_with_their_knobs(kind, tile):
    """Every tile the heuristic may pick for 16-bit inputs, with the knobs it turns on, in every
    layout the knob tests use, plus a launch without a config on a shape that picks it."""
    tm, tn, tk, st, wm, wn = tile
    variant = dict(tile_m=tm, tile_n=tn, tile_k=tk, stages=st, warps_m=wm, warps_n=wn,
                   **kernels.TILE_KNOBS[kind])
    for (ta, tb, policy), shapes in KNOB_SHAPES.items():
        for i, (m, n, k) in enumerate(shapes):
            _check(m, n, k, kind, policy, trans_a=ta, trans_b=tb, seed=70 + i,
                   beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75, **variant)
    for i, policy in enumerate(("per_tile", "dynamic")):
        _check(520, 300, 1000, kind, policy, seed=80 + i, beta=0.5, **variant)


@pytest.mark.gpu
@needs_gpu
def test_config_past_the_gpus_shared_memory_is_a_clear_error():
    """A hand-passed config of 280 KiB of tiles, past any GPU's block: ``ValueError`` with the
    device's limit, before anything is queued; the heuristic's launch on the same operands runs."""
    limit = kernels.device_shared_memory(kernels.device_id())[0]
    big = KernelConfig(input="float16", tile_m=128, tile_n=128, tile_k=64, stages=8, warps_m=2,
                       warps_n=2)
    assert big.smem_bytes > limit
    rng = np.random.default_rng(7)
    (a, a64), (b, b64) = rand_operand((256, 512), "float16", rng), rand_operand((512, 256), "float16", rng)
    out = cp.full((256, 256), cp.nan, cp.float16)
    with pytest.raises(ValueError, match=f"more than the {limit:,} a block may have"):
        kernels.gemm(a, b, out=out, config=big)
    assert bool(cp.isnan(out).all())
    check_product(as_float64(kernels.gemm(a, b, out=out)), a64 @ b64, BOUNDS["float16"])


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("policy", ["per_tile", "dynamic"])
def test_mainloop_knobs_every_policy(policy):
    knobs = dict(swizzle=True, fast_copy=True, frag_carry=True)
    for i, (m, n, k) in enumerate([(257, 263, 129), (256, 384, 512), (130, 260, 1000)]):
        _check(m, n, k, "bfloat16", policy, seed=60 + i, beta=0.5 if i % 2 else 0.0, **knobs)


@pytest.mark.gpu
@needs_gpu
def test_simt_odd_leading_dimension_and_offset_pointer():
    """16-byte copies only when the operand allows them: an ld that is not a multiple of 4 and a
    pointer 4 bytes past a 16-byte boundary take the 4-byte path, with the same result."""
    rng = np.random.default_rng(7)
    a, a64 = rand_operand((150, 99), "float32", rng)
    big, big64 = rand_operand((99, 203), "float32", rng)
    b, b64 = big[:, 1:], big64[:, 1:]  # row-major view, ld 203, pointer offset by one float
    out = kernels.gemm(a, b, config=KernelConfig.default("float32", policy="streamk"))
    err = float(cp.linalg.norm(out.astype(cp.float64) - a64 @ b64) / cp.linalg.norm(a64 @ b64))
    assert err < BOUNDS["float32"]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["row", "odd_ld", "offset", "column", "c_odd_ld"])
def test_epilogue_pairs_and_element_stores(kind, layout):
    """The tensor-core mainloops' epilogue stores column pairs as one word where D (and C, when
    read) are row-major with even rows and aligned, element by element elsewhere (float32 SIMT:
    always): both paths, an odd N (the last column alone), beta on and off, against float64."""
    rng = np.random.default_rng(31)
    m, n, k = 133, 77, 96
    a, a64 = rand_operand((m, k), kind, rng)
    b, b64 = rand_operand((k, n), kind, rng)
    c_big, c_big64 = rand_operand((m, n + 2), kind, rng)  # row stride 79
    c, c64 = (c_big[:, :n], c_big64[:, :n]) if layout == "c_odd_ld" else rand_operand((m, n), kind, rng)
    if layout == "odd_ld":
        out = poisoned((m, n + 2), kind)[:, :n]  # row stride 79
    elif layout == "offset":
        out = poisoned((m, n + 1), kind)[:, 1:]  # row stride 78, base one element past alignment
    elif layout == "column":
        out = poisoned((n, m), kind).T
    else:
        out = poisoned((m, n), kind)
    for beta in (0.0, 0.5):
        kernels.gemm(a, b, c, alpha=0.75, beta=beta, out=out, allow_tf32=kind == "tf32",
                     config=KernelConfig.default(kind, policy="static"),
                     as_dtype="bfloat16" if kind == "bfloat16" else None)
        ref = 0.75 * (a64 @ b64) + beta * c64
        check_product(as_float64(out, kind), ref, BOUNDS[kind], f"{kind} {layout} beta={beta}")
        out[...] = poisoned(out.shape, kind)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind", ["float16", "float32", "float64"])
def test_k_zero_gives_beta_c(kind):
    _check(37, 41, 0, kind, "static", beta=2.0)
    _check(37, 41, 0, kind, "streamk", beta=0.0)


@pytest.mark.gpu
@needs_gpu
def test_streamk_is_bitwise_reproducible_and_in_place_works():
    rng = np.random.default_rng(5)
    a, _ = rand_operand((333, 2048), "float32", rng)
    b, _ = rand_operand((2048, 517), "float32", rng)
    cfg = KernelConfig.default("float32", policy="streamk")
    first = kernels.gemm(a, b, config=cfg)
    for _ in range(3):
        assert bool((kernels.gemm(a, b, config=cfg) == first).all())
    c = first.copy()
    kernels.gemm(a, b, c, beta=-1.0, out=c, config=cfg)  # in place: c = ab - ab
    assert float(cp.abs(c).max()) == 0.0


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("policy", ["per_tile", "static", "streamk", "streamk-dp"])
@pytest.mark.parametrize("m,n,k,sms", [(1000, 1500, 700, None), (300, 2000, 4096, 20), (64, 64, 64, 7)])
def test_kernel_record_equals_mirror(policy, m, n, k, sms):
    """"streamk-dp": stream-K over the partial last wave only (sk_waves=0)."""
    rng = np.random.default_rng(1)
    a, _ = rand_operand((m, k), "float16", rng)
    b, _ = rand_operand((k, n), "float16", rng)
    waves = 0 if policy == "streamk-dp" else 1
    policy = policy.partition("-")[0]
    cfg = KernelConfig.default("float16", policy=policy, sk_waves=waves)
    _, record = kernels.gemm(a, b, config=cfg, sms=sms, debug=True)
    lp = kernels.launch_info(a.shape, b.shape, cfg.replace(record=True), sms=sms)
    expect = schedule.assignment(policy, lp.rows, lp.cols, lp.k_iters, lp.grid, sk_tiles=lp.sk_tiles)
    assert schedule.from_record(record.tolist(), lp.grid) == expect


@pytest.mark.gpu
@needs_gpu
def test_dynamic_record_covers_every_tile_once():
    rng = np.random.default_rng(2)
    a, _ = rand_operand((1000, 300), "float64", rng)
    b, _ = rand_operand((300, 1200), "float64", rng)
    cfg = KernelConfig.default("float64", policy="dynamic")
    _, record = kernels.gemm(a, b, config=cfg, debug=True)
    lp = kernels.launch_info(a.shape, b.shape, cfg.replace(record=True))
    units = [tuple(r[1:]) for r in record.tolist()]
    assert len(units) == len(set(units))
    assert set(units) == schedule.work_units("dynamic", lp.rows, lp.cols, lp.k_iters, lp.grid)
    assert {r[0] for r in record.tolist()} <= set(range(lp.grid))


@pytest.mark.gpu
@needs_gpu
def test_persistent_engine_accumulates_parts():
    from mgemm.engines.persistent import PersistentEngine
    rng = np.random.default_rng(3)
    a1, a1_64 = rand_operand((100, 64), "float64", rng)
    a2, a2_64 = rand_operand((64, 100), "float64", rng)  # used transposed
    b1, b1_64 = rand_operand((64, 90), "float64", rng)
    b2, b2_64 = rand_operand((64, 90), "float64", rng)
    c, c64 = rand_operand((100, 90), "float64", rng)
    out = PersistentEngine().gemm([a1, a2.T], [b1, b2], alpha=2.0, beta=0.5, c=c)
    ref = 2.0 * (a1_64 @ b1_64 + a2_64.T @ b2_64) + 0.5 * c64
    assert float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref)) < 1e-12


def test_device_attributes_are_read_once_per_device_and_follow_the_current_one(monkeypatch):
    """``device_sms()`` and ``device_shared_memory`` read the device asked for, by default the
    current one, each device's attributes once (``Device.attributes`` queries them all)."""
    reads = []

    class Device:
        def __init__(self, dev):
            self.id = dev

        @property
        def attributes(self):
            reads.append(self.id)
            return {"MultiProcessorCount": 100 + self.id, "MaxSharedMemoryPerBlockOptin": 1000,
                    "MaxSharedMemoryPerMultiprocessor": 2000 + self.id, "ClockRate": 1}

    current = [1]
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Device=Device, runtime=types.SimpleNamespace(getDevice=lambda: current[0])))
    monkeypatch.setattr(kernels, "_cupy", lambda: fake)
    kernels.device_attributes.cache_clear()
    try:
        assert kernels.device_sms() == 101 and kernels.device_sms(0) == 100
        current[0] = 0
        assert kernels.device_sms() == 100
        assert kernels.device_shared_memory(1) == (1000, 2001)
        assert sorted(reads) == [0, 1]
    finally:
        kernels.device_attributes.cache_clear()
