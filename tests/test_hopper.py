"""Tests of the Hopper (sm_90a) GEMM: on the CPU, the launcher's host side (operand layouts and
copies, descriptors, launch parameters, the dispatch of ``gemm_parts``) and a compile of rendered
configs (the config object's and the heuristic's own tests: test_hopper_config.py and
test_hopper_heuristic.py); on an sm_90 GPU, every input kind, tile width, policy and layout against a
float64 reference with poisoned outputs, and the kernel's debug record against the scheduler's
Python mirror."""

import doctest
import re
import shutil
import subprocess
import types

import numpy as np
import pytest

from mgemm import hopper, hopper_config, hopper_heuristic, schedule
from mgemm.hopper import HopperConfig
from mgemm.kernels import KERNEL_DIR, PlainSource

from gpu_operands import as_float64, check_product, poisoned, product_operands, rand_operand
from hopper_fakes import FakeArray, FakeMem, RowsArray, row_major_flags, swap_pick


def _cupy_sm90_or_none():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None
        return cupy if cupy.cuda.Device().compute_capability == "90" else None
    except Exception:
        return None


cp = _cupy_sm90_or_none()
needs_sm90 = pytest.mark.skipif(cp is None, reason="needs CuPy and an sm_90 (Hopper) GPU")

# ‖out − ref‖ / ‖ref‖ bounds against a float64 reference on the same (rounded) inputs.  tf32 is
# looser than the portable kernel's: wgmma truncates the low mantissa bits instead of rounding.
BOUNDS = {"float16": 2e-3, "bfloat16": 1e-2, "tf32": 8e-3}
KINDS = ["float16", "bfloat16", "tf32"]


# --- CPU: the launcher's host side, compile ----------------------------------------------------------


@pytest.mark.parametrize("module", [hopper, hopper_config, hopper_heuristic], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_render_is_by_name_and_complete():
    cfg = HopperConfig(input="float16", tile_n=256, stages=3, policy="dynamic", raster="n")
    text = cfg.render()
    for name, value in cfg.defines().items():
        assert f"#define {name} {value}\n" in text
    assert "#define MGEMM_INPUT MGEMM_F16" in text
    assert "#define MGEMM_POLICY MGEMM_POLICY_DYNAMIC" in text
    assert "#define MGEMM_RASTER MGEMM_RASTER_N" in text
    src = (KERNEL_DIR / hopper_config.KERNEL_SOURCE).read_text()
    for name in cfg.defines():
        if name == "MGEMM_SMEM_BYTES":  # checked against the kernel's own size, no default
            assert "#ifdef MGEMM_SMEM_BYTES" in src
        else:
            assert f"#ifndef {name}" in src, f"{name} has no default in the kernel source"


def test_trimmed_configs_validate_render_and_key():
    """split_only (stream-K, spread fix-up) and plain_out (staged, TMA or columns epilogue): code
    a launch cannot run left out; rendered, keyed, refused elsewhere, and a launch chooses them
    only where they hold (``trim_config``, ``plain_output``)."""
    spread = HopperConfig(input="float16", policy="streamk", sk_reduce="spread", epilogue="staged")
    for field, on in (("split_only", spread.replace(split_only=True)),
                      ("plain_out", spread.replace(plain_out=True))):
        assert f"#define MGEMM_{field.upper()} 1\n" in on.render()
        assert f"#define MGEMM_{field.upper()} 0\n" in spread.render()
        assert on.key() != spread.key() and field.replace("_", "-") in str(on)
    for bad in (dict(policy="static"), dict(sk_reduce="owner")):
        with pytest.raises(ValueError, match="split_only=True is for stream-K"):
            spread.replace(split_only=True, **bad)
    for epi in ("pair", "direct"):
        with pytest.raises(ValueError, match="plain_out=True"):
            spread.replace(plain_out=True, epilogue=epi)
    # a launch that runs whole tiles refuses split_only
    with pytest.raises(ValueError, match="runs whole tiles"):
        hopper.plan_launch(spread.replace(split_only=True), 2048, 2048, 512, 132)
    assert hopper.plan_launch(spread.replace(split_only=True), 512, 512, 32768, 132).grid == 128
    # clusters: every 2 x 2 block split (256x256x65536 is one block over 33 clusters)
    quad = spread.replace(cluster_m=2, cluster_n=2)
    assert hopper.trim_config(quad, hopper.plan_launch(quad, 256, 256, 65536, 132), False).split_only
    # one k-iteration: no tile can be split
    assert not hopper_config.every_tile_split(spread, hopper.plan_launch(spread, 128, 128, 64, 132))
    static = HopperConfig(input="float16", epilogue="tma")
    lp = hopper.plan_launch(static, 4096, 4096, 4096, 132)
    assert hopper.trim_config(static, lp, True).plain_out
    assert hopper.trim_config(static, lp, False) == static
    assert hopper.trim_config(static.replace(epilogue="pair"), lp, True).epilogue == "pair"
    assert hopper.trim_config(static.replace(epilogue="pair"), lp, True) == static.replace(epilogue="pair")


def _output(shape, dtype, strides=None, offset=0):
    """A stand-in for a CuPy array: what ``plain_output`` reads."""
    item = np.dtype(dtype).itemsize
    strides = strides or (shape[1] * item, item)
    return types.SimpleNamespace(shape=shape, itemsize=item, strides=strides,
                                 data=types.SimpleNamespace(ptr=4096 + offset))


@pytest.mark.parametrize("kind, m, n, k", [("float16", 16384, 144, 8192), ("bfloat16", 8192, 176, 8192),
                                            ("float16", 4096, 272, 8192)])
def test_a_float32_output_of_an_exact_width_fits_shared_memory(kind, m, n, k):
    """The heuristic sizes its config for a 16-bit output; an exact width of 144 or 176 columns
    stages whole rows, twice as wide in float32, which on the same stages passed the shared
    memory a block may have (``hopper.gemm(..., out_dtype="float32")`` raised).  The launch's
    config drops ring stages until it fits, as ``_launch_setup`` builds it."""
    cfg = hopper_heuristic.k_major_pick(hopper.choose_config(m, n, k, kind, 132), m, n, k, 132)
    assert cfg.tile_n in (144, 176) and cfg.epilogue == "staged", cfg
    with pytest.raises(ValueError, match="shared memory"):
        cfg.replace(output="float32")
    fitted = cfg.replace_fitting(output="float32", k_parts=2)
    assert fitted.smem_bytes <= hopper_config.SMEM_LIMIT and 2 <= fitted.stages < cfg.stages
    assert fitted.k_parts == 2 and fitted.replace(stages=cfg.stages, output=cfg.output, k_parts=1) == cfg
    with pytest.raises(ValueError, match="shared memory"):  # as many stages as fit
        fitted.replace(stages=fitted.stages + 1)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind, m, n, k, trans_b", [("float16", 16384, 144, 8192, False),
                                                     ("float16", 16384, 144, 8192, True),
                                                     ("bfloat16", 8192, 176, 8192, False)])
def test_float32_output_of_16bit_inputs_at_exact_widths(kind, m, n, k, trans_b):
    """16-bit inputs, float32 output, shapes whose launch takes an exact width of 144 or 176
    columns (a K-major B): they raised for want of shared memory before the launch's config
    dropped a ring stage; every element written and within the 16-bit bound."""
    rng = np.random.default_rng(m + n + k)
    (a, a64), (b, b64), _ = product_operands(m, n, k, kind, rng, trans_b=trans_b)
    out = poisoned((m, n), "float32")
    hopper.gemm(a, b, out=out, out_dtype="float32",
                as_dtype="bfloat16" if kind == "bfloat16" else None)
    check_product(as_float64(out), a64 @ b64, BOUNDS[kind], f"{kind} {m}x{n}x{k} -> float32")


def test_plain_output_mirrors_the_kernels_conditions():
    """``plain_output``: beta == 0 and rows of unit stride, base and pitch 16-byte aligned (staged,
    TMA), the same with rows and columns exchanged (columns): kernels/gemm_hopper.cu's staged_ok
    and columns_ok."""
    row = _output((100, 64), "float16")
    assert hopper.plain_output(row, "staged", 0.0) and hopper.plain_output(row, "tma", 0.0)
    assert not hopper.plain_output(row, "staged", 0.5)
    assert not hopper.plain_output(row, "pair", 0.0)
    assert not hopper.plain_output(row, "columns", 0.0)
    assert not hopper.plain_output(_output((100, 64), "float16", offset=2), "staged", 0.0)
    assert not hopper.plain_output(_output((100, 63), "float16"), "staged", 0.0)  # 126-byte pitch
    assert hopper.plain_output(_output((100, 63), "float16", strides=(128, 2)), "staged", 0.0)
    col = _output((64, 100), "float32", strides=(4, 256))
    assert hopper.plain_output(col, "columns", 0.0) and not hopper.plain_output(col, "staged", 0.0)


@pytest.mark.parametrize("n,clusters", [(4104, True), (4112, True), (4160, False)])
def test_gemm_parts_chooses_with_both_row_flags(n, clusters, monkeypatch):
    """gemm_parts picks the config with B's row flags (off 32-byte sectors, off 128-byte lines):
    the heuristic's choice for a contiguous 4096 x n B, through the chooser it hands prepare_call."""
    seen = {}

    class Stop(Exception):
        pass

    def fake_prepare(cp, a, b, c, out, *, choose, **kw):
        seen["config"] = choose(4096, n, 4096, "float16", 132, False)
        raise Stop

    monkeypatch.setattr(hopper, "prepare_call", fake_prepare)
    monkeypatch.setattr(hopper, "_cupy", lambda: None)
    a = FakeArray((4096, 4096), (8192, 2))
    b = FakeArray((4096, n), (2 * n, 2))
    a.ndim = b.ndim = 2
    with pytest.raises(Stop):
        hopper.gemm_parts([a], [b])
    assert hopper_heuristic.b_rows_flags([b]) == {"b_rows_off": n % 16 != 0, "b_rows_off_128": n % 64 != 0,
                                                  "b_row_major": True}
    flags = hopper.rows_flags([a], [b])
    assert flags == {**hopper_heuristic.b_rows_flags([b]), "a_rows_off_128": False}  # K = 4096: A's rows on 128
    assert seen["config"] == hopper.choose_config(4096, n, 4096, "float16", 132, **flags)
    assert (seen["config"].cluster_m == 2) is clusters


@pytest.mark.parametrize("option", ["debug", "timeline"])
def test_debug_and_timeline_run_the_heuristics_tile_on_single_ctas(option, monkeypatch):
    """The record and the timeline know single CTAs: where the heuristic picks 2-CTA clusters
    (4096 x 4104 x 4096 float16), ``debug`` and ``timeline`` launch its tile without them
    instead of refusing; a caller's cluster config is left as given (and refused)."""
    from types import SimpleNamespace

    class Stop(Exception):
        pass

    launched = []

    def fake_prepare(cp, a, b, c, out, *, choose, config, **kw):
        config = config or choose(4096, 4104, 4096, "float16", 132, False)
        return SimpleNamespace(kind="float16", dev=0, sms=132, config=config,
                               res_dtype="float16", out=FakeArray((4096, 4104), (2 * 4104, 2)))

    def fake_setup(config, *args, **kwargs):
        launched.append(config)
        raise Stop
    monkeypatch.setattr(hopper, "prepare_call", fake_prepare)
    monkeypatch.setattr(hopper, "_launch_setup", fake_setup)
    monkeypatch.setattr(hopper, "_cupy", lambda: None)
    monkeypatch.setattr(hopper, "_encode", lambda *args: args)
    a, b = FakeArray((4096, 4096), (8192, 2)), FakeArray((4096, 4104), (2 * 4104, 2))
    a.ndim = b.ndim = 2
    picked = hopper.choose_config(4096, 4104, 4096, "float16", 132, **hopper.rows_flags([a], [b]))
    assert picked.cluster_size == 2
    with pytest.raises(Stop):
        hopper.gemm_parts([a], [b], **{option: True})
    assert launched[-1] == picked.replace(cluster_m=1, cluster_n=1)
    with pytest.raises(Stop):
        hopper.gemm_parts([a], [b], config=picked, **{option: True})
    assert launched[-1] == picked


def test_output_desc_follows_the_kernels_staged_condition(monkeypatch):
    """The TMA-store epilogue's output descriptor: encoded (N x M, ld, boxes of 128 bytes x 64
    rows) exactly where the kernel takes the staged path (beta == 0, unit column stride, 16-byte
    aligned base and row stride), so the kernel never reads a zero one; a zero one elsewhere; None
    (launch "staged") where the kernel would take the path but TMA cannot address the rows or
    would write past a row's N elements (which do not end on a 16-byte boundary)."""
    from types import SimpleNamespace
    monkeypatch.setattr(hopper, "_encode", lambda *args: args)

    def out(shape, strides, ptr=1 << 20, item=2):
        return SimpleNamespace(shape=shape, strides=strides, itemsize=item, data=SimpleNamespace(ptr=ptr))

    desc = hopper._output_desc
    assert desc(out((261, 336), (2 * 344, 2)), "float16", 0.0) == (1 << 20, "float16", 336, 261, 344, 64, 64)
    assert desc(out((261, 332), (4 * 336, 4), item=4), "float32", 0.0) == (1 << 20, "tf32", 332, 261, 336, 32, 64)
    assert desc(out((1, 336), (2 * 333, 2)), "bfloat16", 0.0) is hopper._NO_DESC  # device: 666 % 16
    assert desc(out((1, 336), (2 * 344, 2)), "bfloat16", 0.0)[4] == 336  # one row: a valid ld
    # rows of N elements that end off a 16-byte boundary: the bulk store would write past N
    assert desc(out((261, 333), (2 * 344, 2)), "float16", 0.0) is None
    assert desc(out((261, 333), (4 * 336, 4), item=4), "float32", 0.0) is None
    assert desc(out((1, 333), (2 * 336, 2)), "bfloat16", 0.0) is None
    no = hopper._NO_DESC
    assert desc(out((261, 333), (2 * 344, 2)), "float16", 0.5) is no       # beta != 0: C is read
    assert desc(out((261, 333), (2 * 333, 2)), "float16", 0.0) is no       # rows not 16-byte aligned
    assert desc(out((261, 333), (2 * 344, 2), ptr=(1 << 20) + 2), "float16", 0.0) is no
    assert desc(out((261, 333), (2, 2 * 264)), "float16", 0.0) is no       # column-major
    assert desc(out((261, 336), (-2 * 344, 2)), "float16", 0.0) is None    # rows in reverse order
    assert desc(out((261, 336), (2 * 8, 2)), "float16", 0.0) is None       # rows overlap
    assert bytes(no) == bytes(128)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", KINDS)
def test_descriptors_through_the_driver_match_cuda_bindings(kind):
    """The descriptors a launch encodes through ctypes on the driver library are byte for byte
    those of cuda.bindings' wrapper (the path taken where libcuda cannot be loaded): boxes of
    128 bytes of rows over rows of many, few and not a multiple of 16 bytes of elements, padded
    leading dimensions, bases off 256 bytes, each L2 promotion."""
    assert hopper._encoder() is not None, "the driver library did not load through ctypes"
    item = hopper_config.ITEMSIZE[kind]
    buf = cp.empty(1 << 22, dtype=cp.uint8)
    cases = [(buf.data.ptr, kind, 4096, 300, 4160, 128 // item, 128),
             (buf.data.ptr + 128, kind, 77, 1024, 80, 128 // item, 64),
             (buf.data.ptr + 1024, kind, 336, 261, 344, 128 // item, 64),
             *((buf.data.ptr + 48, kind, 1160, 300, 1160, 128 // item, 128, size) for size in (0, 64, 128))]
    saved, made = list(hopper._ENCODER), []
    try:
        for case in cases:
            hopper._encode.cache_clear()
            driver = hopper._encode(*case)
            hopper._ENCODER[:] = [None]
            hopper._encode.cache_clear()
            bindings = hopper._encode(*case)
            hopper._ENCODER[:] = saved
            assert len(driver) == 128 and driver == bindings, case
            assert driver != bytes(128)
            made.append(driver)
        assert len(set(made[-3:])) == 3, "the L2 promotions encode alike"
    finally:
        hopper._ENCODER[:] = saved
        hopper._encode.cache_clear()


def test_operand_descriptors_promote_by_their_rows(monkeypatch):
    """``_operand_desc`` encodes with ``L2_PROMOTION``'s first size where the operand's rows (row
    stride and start) lie on 128-byte lines and with its second where they do not, K-major and
    MN-major alike; ``_encode`` refuses a size the driver has no mode for (before any driver call)."""
    sizes = []
    monkeypatch.setattr(hopper, "_encode", lambda *args: sizes.append(args[-1]) or bytes(128))
    monkeypatch.setattr(hopper, "L2_PROMOTION", (256, 64))
    base = 1 << 20
    for k_major in (True, False):
        hopper._operand_desc(base, "float16", k_major, 4096, 1024, 4096, 64, 128)  # 8192-byte rows
        hopper._operand_desc(base, "float16", k_major, 1160, 1024, 1160, 64, 128)  # 2320-byte rows
        hopper._operand_desc(base + 16, "float16", k_major, 4096, 1024, 4096, 64, 128)  # start off
        hopper._operand_desc(base, "tf32", k_major, 1000, 1024, 1056, 32, 128)  # 4224-byte rows
    assert sizes == [256, 64, 64, 256] * 2
    monkeypatch.undo()
    with pytest.raises(ValueError, match="l2_promotion"):
        hopper._encode(base, "float16", 64, 64, 64, 64, 64, 32)


def test_launch_parameters_follow_the_kernels_signature():
    """``hopper.PARAMS`` (what the driver launch packs) lists the kernel's parameters in the order
    and of the kinds kernels/gemm_hopper.cu declares them, the TMA-store epilogue's descriptor
    last; ``param_layout`` puts descriptors on 64-byte boundaries, every scalar on a multiple of
    its size, and sizes the K-part structs by ``k_parts``."""
    import struct

    src = (KERNEL_DIR / hopper_config.KERNEL_SOURCE).read_text()
    sig = src[src.index("mgemm_gemm_hopper("):]
    sig = sig[sig.index("(") + 1:sig.index(") {")]
    kinds = []
    for param in re.sub(r"//[^\n]*", "", sig).replace("#if MGEMM_EPILOGUE == MGEMM_EPILOGUE_TMA", "")\
            .replace("#endif", "").split(","):
        words = param.split()
        if not words:
            continue
        if "TmaParts" in words or "TmaDesc" in words:
            kinds.append("desc")
        elif "PartEnds" in words:
            kinds.append("bytes")
        elif "*" in param:
            kinds.append("ptr")
        else:
            kinds.append({"int": "i32", "long": "i64", "double": "f64"}[words[0]])
    assert tuple(kinds) == hopper.PARAMS + ("desc",)
    for k_parts in (1, 3, 8):
        for epilogue in ("pair", "tma"):
            cfg = HopperConfig(input="float16", k_parts=k_parts, epilogue=epilogue)
            fmt, offsets = hopper.param_layout(cfg)
            kinds_here = hopper.PARAMS + (("desc",) if epilogue == "tma" else ())
            assert len(offsets) == len(kinds_here)
            sizes = {"desc": 128, "bytes": 4, "ptr": 8, "i32": 4, "i64": 8, "f64": 8}
            ends = []
            for i, (kind, off) in enumerate(zip(kinds_here, offsets)):
                size = sizes[kind] * (k_parts if kind == "bytes" or (kind == "desc" and i < 2) else 1)
                assert off % (64 if kind == "desc" else min(size, 8)) == 0, (kind, off)
                assert not ends or off >= ends[-1]
                ends.append(off + size)
            assert struct.calcsize(fmt) == ends[-1]


@pytest.mark.gpu
@needs_sm90
def test_launches_from_many_threads_at_once():
    """Block tasks launch from several threads at once, each on its own stream: every thread's
    descriptors and kernel parameters are its own (ctypes lets go of the GIL during the driver's
    calls, so shared buffers would mix threads' launches), and every product is right."""
    import threading

    shapes = [(200 + 37 * i, 264 + 56 * i, 128 + 64 * (i % 5)) for i in range(8)]
    failures = []

    def work(t):
        try:
            rng = np.random.default_rng(t)
            with cp.cuda.Stream(non_blocking=True) as stream:
                for rep in range(6):
                    m, n, k = shapes[(t + rep) % len(shapes)]
                    a, a64 = rand_operand((m, k), "float16", rng)
                    b, b64 = rand_operand((k, n), "float16", rng)
                    out = poisoned((m, n), "float16")
                    hopper.gemm(a, b, out=out)
                    stream.synchronize()
                    ref = a64 @ b64
                    err = float(cp.linalg.norm(as_float64(out) - ref)) / float(cp.linalg.norm(ref))
                    if not err <= BOUNDS["float16"]:
                        failures.append((t, m, n, k, err))
        except Exception as exc:  # reported below, with the thread
            failures.append((t, repr(exc)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def _tail_split_calls(real, m, n, k, monkeypatch, c=None, beta=0.0):
    """What gemm_parts launches for an m x n x k float16 product (row-major operands) when the
    heuristic chooses: (rows of A, rows of out, config, rows of C) per launch, through fakes of
    prepare_call and of the launches (``real``: the module's own gemm_parts)."""
    launches = []
    a, b = RowsArray((m, k), (2 * k, 2)), RowsArray((k, n), (2 * n, 2))
    out = RowsArray((m, n), (2 * n, 2))

    def fake_parts(a_parts, b_parts, c0=None, *, out=None, config=None, **kw):
        assert b_parts == [b] and config is not None and kw["sms"] == 132
        launches.append((a_parts[0].rows, out.rows, config, None if c0 is None else c0.rows))
        return out

    _fake_prepare(monkeypatch, n, k, out)
    monkeypatch.setattr(hopper, "gemm_parts", fake_parts)
    result = real([a], [b], c, beta=beta)
    return launches, result, out


def _fake_prepare(monkeypatch, n, k, out):
    """Fakes of ``prepare_call`` (the heuristic's float16 config on 132 SMs where the caller gives
    none; ``out`` where it gives no output) and of ``_cupy``, for driving ``gemm_parts`` on the CPU."""
    def fake_prepare(cp, a0, b0, c0, out0, *, config, choose, sms, **kw):
        cfg = config if config is not None else choose(a0.shape[0], n, k, "float16", 132, False)
        return types.SimpleNamespace(kind="float16", dev=0, sms=132, config=cfg, res_dtype="float16",
                                     out=out0 if out0 is not None else out)

    monkeypatch.setattr(hopper, "prepare_call", fake_prepare)
    monkeypatch.setattr(hopper, "_cupy", lambda: None)


def test_tail_split_runs_two_bands_of_rows(monkeypatch):
    """Where the heuristic runs 2-CTA clusters and the wave-cost model puts two launches at most
    TAIL_SPLIT of one (a short last wave), gemm_parts runs the heuristic's config on the rows of
    the full waves and choose_config's on the rest, each into its band of the output (and of C,
    where beta != 0); elsewhere one launch.  (Stream-K over the clusters' last two waves,
    CLUSTER_TAIL_SK, which runs this product as one launch, off; and stream-K over 256-wide
    tiles, SK_256_OVER_STATIC, which runs the single-CTA example below so; and the transposed
    product on 2 x 2 clusters, SWAP_ONTO_QUAD_WIDE, which takes the example with the split off.)"""
    monkeypatch.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)
    monkeypatch.setattr(hopper_heuristic, "SK_256_OVER_STATIC", None)
    monkeypatch.setattr(hopper_heuristic, "SWAP_ONTO_QUAD_WIDE", None)
    m, n, k = 4992, 1784, 6440
    off = hopper.rows_flags([FakeArray((m, k), (2 * k, 2))], [FakeArray((k, n), (2 * n, 2))])
    cfg = hopper.choose_config(m, n, k, "float16", 132, **off)
    m1, rest, ratio = hopper_heuristic.tail_split(cfg, m, n, k, "float16", 132, **off)
    assert ratio <= hopper_heuristic.TAIL_SPLIT
    c = RowsArray((m, n), (2 * n, 2))
    real = hopper.gemm_parts
    launches, result, out = _tail_split_calls(real, m, n, k, monkeypatch, c=c, beta=0.5)
    assert launches == [(slice(0, m1), slice(0, m1), cfg, slice(0, m1)),
                        (slice(m1, m), slice(m1, m), rest, slice(m1, m))]
    assert result is out
    launches, _, _ = _tail_split_calls(real, m, n, k, monkeypatch)  # beta == 0: C is not passed on
    assert [x[3] for x in launches] == [None, None]

    class OneLaunch(Exception):
        pass

    def one_launch(*args, **kw):  # the first step of the one launch's path
        raise OneLaunch

    monkeypatch.setattr(hopper, "_operand", one_launch)
    # no short last wave; a split the model likes but without clusters (not measured); splits off
    for shape in ((4096, 4096, 4096), (3352, 1440, 2080), (m, n, k)):
        if shape == (3352, 1440, 2080):
            rows_off = dict(b_rows_off=False, b_rows_off_128=True)  # N = 1440: on sectors, off lines
            one = hopper.choose_config(*shape, "float16", 132, **rows_off)
            assert one.cluster_m == 1 and hopper_heuristic.tail_split(one, *shape, "float16", 132, **rows_off)[2] <= 0.9
        monkeypatch.setattr(hopper_heuristic, "TAIL_SPLIT", None if shape == (m, n, k) else 0.9)
        with pytest.raises(OneLaunch):
            _tail_split_calls(real, *shape, monkeypatch)


def test_b_copy_comes_before_the_tail_split(monkeypatch):
    """Where the heuristic runs 2-CTA clusters whose last wave ``tail_split`` would cut off, but
    B is copied K-major for the copy's wide tiles (``B_K_MAJOR_WIDE_OVER_CLUSTERS``), gemm_parts
    copies B and runs one product on the copy (as ``gemm_copies_b`` says), not the two bands; with
    the rule off, the two bands.  (Stream-K over the clusters' last two waves, CLUSTER_TAIL_SK,
    which would run the clusters in one launch, off.)"""
    monkeypatch.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)
    m, n, k = 7344, 600, 4312
    a, b = RowsArray((m, k), (2 * k, 2)), RowsArray((k, n), (2 * n, 2))
    out = RowsArray((m, n), (2 * n, 2))
    flags = hopper.rows_flags([a], [b])
    cfg = hopper.choose_config(m, n, k, "float16", 132, **flags)
    assert (cfg.cluster_m, cfg.cluster_n) == (2, 1)
    assert hopper_heuristic.tail_split(cfg, m, n, k, "float16", 132, **flags)[2] <= hopper_heuristic.TAIL_SPLIT
    assert hopper_heuristic.gemm_copies_b([a], [b], out, m, n, k, "float16", 132)
    copy = RowsArray((k, n), (2, 2 * 640))
    calls = []
    real = hopper.gemm_parts
    _fake_prepare(monkeypatch, n, k, out)
    monkeypatch.setattr(hopper, "_k_major_copy", lambda cp, b0: copy)
    monkeypatch.setattr(hopper, "gemm_parts", lambda a_parts, b_parts, c=None, *, out=None, config=None, **kw:
                        calls.append((a_parts[0].rows, b_parts, config)) or out)
    real([a], [b], out=out)
    assert calls == [(slice(0, m), [copy], None)]  # one product, on the copy, its config its own
    calls.clear()
    monkeypatch.setattr(hopper_heuristic, "B_K_MAJOR_WIDE_OVER_CLUSTERS", False)
    real([a], [b], out=out)
    m1 = hopper_heuristic.tail_split(cfg, m, n, k, "float16", 132, **flags)[0]
    assert [(rows, b_parts) for rows, b_parts, _ in calls] == [(slice(0, m1), [b]), (slice(m1, m), [b])]


def test_transpose_before_b_copy_looked_up_once(monkeypatch):
    """Where B would be copied K-major but the product runs transposed (``_swap_config``),
    gemm_parts runs the transposed product alone, on B^T A^T without a copy, and looks the
    transpose up once; with ``beta != 0`` (no transpose) it copies B."""
    m, n, k = 15952, 264, 4528
    a, b = RowsArray((m, k), (2 * k, 2)), RowsArray((k, n), (2 * n, 2))
    out = RowsArray((m, n), (2 * n, 2))
    flags = hopper.rows_flags([a], [b])
    cfg = hopper.choose_config(m, n, k, "float16", 132, **flags)
    assert hopper_heuristic.copies_b_k_major([b], m, n, cfg, 132, flags["a_rows_off_128"])
    swapped = hopper_heuristic._swap_config([a], [b], cfg, out, m, n, k, "float16", 132, False, onto_quad=False)
    assert swapped is not None and not hopper_heuristic.gemm_copies_b([a], [b], out, m, n, k, "float16", 132)
    lookups, calls, real, real_swap = [], [], hopper.gemm_parts, hopper_heuristic._swap_config
    _fake_prepare(monkeypatch, n, k, out)
    monkeypatch.setattr(hopper_heuristic, "_swap_config", lambda *args, **kw: lookups.append(args) or real_swap(*args, **kw))
    monkeypatch.setattr(hopper, "_k_major_copy", lambda cp, b0: pytest.fail("B copied"))
    monkeypatch.setattr(hopper, "gemm_parts", lambda a_parts, b_parts, c=None, *, out=None, config=None, **kw:
                        calls.append((a_parts[0].shape, b_parts[0].shape, out.shape, config)) or out)
    real([a], [b], out=out)
    assert calls == [((n, k), (k, m), (n, m), swapped)] and len(lookups) == 1
    copy = RowsArray((k, n), (2, 2 * 320))
    monkeypatch.setattr(hopper, "_k_major_copy", lambda cp, b0: copy)
    calls.clear()
    real([a], [b], RowsArray((m, n), (2 * n, 2)), beta=0.5, out=out)
    assert [(shape_b, config) for _, shape_b, _, config in calls] == [(copy.shape, None)]


_PITCHED: list[tuple] = []  # (dst ptr, dst pitch, src ptr, src pitch, width, height) per pitched copy


class _FakeCupy:
    @staticmethod
    def empty(shape, dtype):
        return _CopyTarget(shape)

    class cuda:
        @staticmethod
        def get_current_stream():
            return FakeMem(0)

        class runtime:
            memcpyDeviceToDevice = 3

            @staticmethod
            def memcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream):
                _PITCHED.append((dst, dpitch, src, spitch, width, height))


class _CopyTarget(FakeArray):
    def __init__(self, shape):
        super().__init__(shape, (shape[1] * 2, 2))

    def __setitem__(self, key, value):
        pass


@pytest.fixture
def transposes(monkeypatch):
    """Records the (x, buf) of every ``hopper.transpose_copy`` (no GPU here: nothing is copied)."""
    calls = []
    monkeypatch.setattr(hopper, "transpose_copy", lambda x, buf: calls.append((x, buf)))
    return calls


@pytest.mark.parametrize("shape,strides,mn_ok,expect,transposed", [
    ((300, 512), (1024, 2), True, (False, True, 512), False),  # K contiguous: K-major, in place
    ((300, 512), (2, 608), True, (False, False, 304), False),  # MN contiguous, ld 304: MN-major
    ((300, 512), (2, 608), False, (True, True, 512), True),    # tf32-like: K-major copy, transposed
    ((300, 512), (2, 602), True, (True, False, 320), False),   # ld not 16-byte: MN-major copy
    ((300, 512), (2, 602), False, (True, True, 512), True),    # the same, tf32-like: transposed
    ((300, 510), (1020, 2), True, (True, True, 512), False),   # K contiguous, ld 510: K-major copy
    ((300, 512), (2048, 4), True, (True, True, 512), False),   # neither contiguous: K-major copy
    ((300, 512), (2048, 4), False, (True, True, 512), False),  # (element-wise, tf32-like too)
    ((1, 512), (7, 2), True, (False, True, 512), False),       # one row: its ld is never used
    ((300, 1), (2, 7), True, (False, False, 304), False),      # one k: MN-major, ld never used
])
def test_operand_layout_choice(shape, strides, mn_ok, expect, transposed, transposes):
    x = FakeArray(shape, strides)
    _PITCHED.clear()
    arr, k_major, ld = hopper._operand(_FakeCupy, x, 8, mn_ok)
    assert (arr is not x, k_major, ld) == expect
    if arr is not x:  # a copy is laid out as the kernel reads it, its rows on 128-byte boundaries
        assert arr.shape == ((shape[0], ld) if k_major else (shape[1], ld)) and ld % 64 == 0
    # a K-major copy of an MN-contiguous operand goes through the transpose kernel, no other copy
    assert transposes == ([(x, arr)] if transposed else [])
    # rows that are contiguous in x are copied as one pitched copy, the rest element-wise
    contiguous_rows = (strides[1] == 2) if k_major else (strides[0] == 2)
    pitched = arr is not x and not transposed and contiguous_rows
    assert len(_PITCHED) == int(pitched)
    if pitched:
        rows, cols = (shape[0], shape[1]) if k_major else (shape[1], shape[0])
        src_pitch = strides[0] if k_major else strides[1]
        assert _PITCHED[0] == (arr.data.ptr, ld * 2, x.data.ptr, src_pitch, cols * 2, rows)


def test_in_place_rows_follow_operand(transposes):
    """b_rows_off's view of a layout (``_in_place_rows``) is ``_operand``'s: the same operands
    read in place, with the same row stride, over strides and starts drawn at random."""
    rng = np.random.default_rng(3)
    for _ in range(2000):
        outer, k = (int(v) for v in rng.choice([1, 2, 7, 64, 300], 2))
        s_o, s_k = (int(v) for v in rng.choice([-2, 2, 4, 16, 602, 608, 1020, 1024, 8208, 8320], 2))
        ptr = 0x10000 + int(rng.choice([0, 2, 16, 32, 64]))
        x = FakeArray((outer, k), (s_o, s_k), ptr=ptr)
        _PITCHED.clear()
        arr, k_major, ld = hopper._operand(_FakeCupy, x, 8, True)
        got = hopper_heuristic._in_place_rows(outer, k, s_o, s_k, ptr, 2)
        if arr is not x:
            assert got is None, (x.shape, x.strides, ptr)
        else:
            rows = outer if k_major else k
            assert got is not None and got[0] == k_major and got[2] == rows, (x.shape, x.strides, ptr)
            if rows > 1:
                assert got[1] == 2 * ld, (x.shape, x.strides, ptr)


def test_operand_misaligned_pointer_is_copied(transposes):
    x = FakeArray((300, 512), (2, 608), ptr=0x10002)
    arr, k_major, ld = hopper._operand(_FakeCupy, x, 8, True)
    assert arr is not x and not k_major and ld == 320
    arr, k_major, ld = hopper._operand(_FakeCupy, x, 8, False)  # tf32-like: the transpose kernel
    assert arr is not x and k_major and ld == 512 and transposes == [(x, arr)]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_transpose_kernel_compiles_without_spills(tmp_path):
    """kernels/transpose.cu, as the launcher hands it to the compiler, builds for sm_90a with its
    three entry points and no local memory."""
    src = tmp_path / "transpose_unit.cu"
    src.write_text(PlainSource(hopper.TRANSPOSE_SOURCE).source())
    proc = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin",
                           f"-I{KERNEL_DIR}", "-Xptxas", "-v", "-o", str(tmp_path / "t.cubin"), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in hopper.TRANSPOSE_KERNELS.values():
        assert f"Compiling entry function '{name}'" in proc.stderr
    assert " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in proc.stderr
    assert not re.search(r"[1-9]\d* bytes (stack frame|spill)", proc.stderr), proc.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("cfg", [HopperConfig(input="bfloat16", tile_n=256, stages=4, policy="streamk"),
                                 HopperConfig(input="tf32", tile_n=128, stages=6, policy="dynamic",
                                              record=True),
                                 HopperConfig(input="float16", tile_n=256, b_k_major=False),
                                 HopperConfig(input="bfloat16", tile_n=64, stages=2, a_k_major=False,
                                              b_k_major=False, policy="streamk"),
                                 HopperConfig(input="bfloat16", tile_n=256, stages=4, pingpong=True, tile_m=64,
                                              b_k_major=False, policy="streamk"),
                                 HopperConfig(input="float16", tile_n=128, stages=6, pingpong=True,
                                              a_k_major=False, policy="dynamic", producer_regs=24,
                                              consumer_regs=240),
                                 HopperConfig(input="bfloat16", tile_n=256, stages=4, cluster_m=2,
                                              b_k_major=False),
                                 HopperConfig(input="tf32", tile_n=128, stages=4, cluster_m=2,
                                              policy="per_tile"),
                                 # clusters of 4 (B in quarters) and along N (A multicast too)
                                 HopperConfig(input="float16", tile_n=256, stages=4, cluster_m=4,
                                              b_k_major=False, epilogue="tma"),
                                 HopperConfig(input="bfloat16", tile_n=128, stages=6, cluster_m=2,
                                              cluster_n=2, a_k_major=False, b_k_major=False),
                                 HopperConfig(input="tf32", tile_n=128, stages=4, cluster_n=2,
                                              policy="per_tile"),
                                 HopperConfig(input="bfloat16", tile_n=256, stages=4, epilogue="staged",
                                              b_k_major=False),
                                 HopperConfig(input="float16", tile_n=128, stages=6, epilogue="staged",
                                              policy="streamk", cluster_m=1),
                                 HopperConfig(input="tf32", tile_n=64, stages=4, epilogue="staged",
                                              cluster_m=1, policy="dynamic"),
                                 HopperConfig(input="bfloat16", tile_n=256, stages=4, epilogue="staged",
                                              cluster_m=2),
                                 HopperConfig(input="bfloat16", tile_n=128, stages=6, epilogue="staged",
                                              policy="streamk", sk_reduce="spread", b_k_major=False),
                                 HopperConfig(input="tf32", tile_n=256, stages=4, policy="streamk",
                                              sk_reduce="spread"),
                                 # a policy that splits no tile, with the spread fix-up named
                                 # (a config the heuristic's with another policy becomes)
                                 HopperConfig(input="float16", tile_n=128, stages=6, epilogue="staged",
                                              policy="static", sk_reduce="spread"),
                                 # pingpong with the staged epilogue: each warpgroup's own buffer
                                 HopperConfig(input="float16", tile_n=256, stages=4, pingpong=True, tile_m=64,
                                              epilogue="staged", b_k_major=False, policy="streamk"),
                                 HopperConfig(input="tf32", tile_n=128, stages=4, pingpong=True, tile_m=128,
                                              epilogue="staged", output="float32"),
                                 # K in parts (a block task's chunks), with stream-K and clusters
                                 HopperConfig(input="float16", tile_n=256, stages=4, epilogue="staged",
                                              b_k_major=False, k_parts=4),
                                 HopperConfig(input="bfloat16", tile_n=128, stages=6, policy="streamk",
                                              k_parts=8, a_k_major=False),
                                 HopperConfig(input="float16", tile_n=256, stages=4, cluster_m=2,
                                              k_parts=3),
                                 # the TMA-store epilogue: cooperative, spread, clusters, float32
                                 # output (two boxes per chunk), pingpong thin tile
                                 HopperConfig(input="float16", tile_n=128, stages=6, epilogue="tma",
                                              b_k_major=False),
                                 HopperConfig(input="bfloat16", tile_n=256, stages=4, epilogue="tma",
                                              policy="streamk", sk_reduce="spread"),
                                 HopperConfig(input="bfloat16", tile_n=256, stages=4, epilogue="tma",
                                              cluster_m=2),
                                 HopperConfig(input="tf32", tile_n=128, stages=4, epilogue="tma",
                                              policy="dynamic"),
                                 HopperConfig(input="float16", tile_n=64, stages=12, pingpong=True, tile_m=64,
                                              epilogue="tma", b_k_major=False, policy="streamk"),
                                 # widths of odd multiples of 32: B in whole 64-wide boxes, the
                                 # staged rows rotated, stream-K with both fix-ups, promoted
                                 HopperConfig(input="float16", tile_n=160, stages=4, epilogue="staged",
                                              b_k_major=False, policy="streamk", sk_reduce="spread"),
                                 HopperConfig(input="bfloat16", tile_n=224, stages=4, epilogue="staged",
                                              a_k_major=False, b_k_major=False),
                                 HopperConfig(input="tf32", tile_n=96, stages=6, epilogue="tma",
                                              policy="streamk"),
                                 HopperConfig(input="bfloat16", tile_n=160, stages=4, epilogue="staged",
                                              b_k_major=False, promote=4, policy="streamk"),
                                 # the timeline variant (debug: ns stamps per unit)
                                 HopperConfig(input="float16", tile_n=128, stages=6, epilogue="tma",
                                              policy="streamk", sk_reduce="spread", timeline=True),
                                 # the columns epilogue (a swapped product's column-major output)
                                 HopperConfig(input="float16", tile_n=192, stages=4, epilogue="columns",
                                              policy="streamk", a_k_major=False),
                                 HopperConfig(input="bfloat16", tile_m=64, tile_n=64, stages=12, pingpong=True,
                                              epilogue="columns", output="float32"),
                                 HopperConfig(input="float16", tile_n=288, stages=4, epilogue="columns",
                                              policy="streamk", out_cols=48, cluster_m=2),
                                 # cooperative 64-row tiles split along N
                                 HopperConfig(input="float16", tile_m=64, tile_n=256, stages=4, epilogue="columns",
                                              policy="streamk", a_k_major=False),
                                 HopperConfig(input="bfloat16", tile_m=64, tile_n=128, stages=8, epilogue="tma",
                                              policy="streamk", sk_reduce="spread", b_k_major=False),
                                 # five stages of 64 x 256 through 128-byte chunks of the output
                                 HopperConfig(input="float16", tile_m=64, tile_n=256, stages=5, epilogue="tma",
                                              policy="streamk", out_cols=64, cluster_n=2),
                                 HopperConfig(input="bfloat16", tile_n=256, stages=4, epilogue="staged",
                                              policy="streamk", out_cols=64)],
                         ids=str)
def test_rendered_source_compiles_for_sm90a(cfg, tmp_path):
    """The launcher's #defines compile, and its shared-memory size equals the kernel's (a
    static_assert in gemm_hopper.cu)."""
    (tmp_path / "k.cu").write_text(cfg.source())
    proc = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-ptx",
                           f"-I{KERNEL_DIR}", "-o", str(tmp_path / "k.ptx"), str(tmp_path / "k.cu")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = (tmp_path / "k.ptx").read_text()
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor.2d" in ptx and "setmaxnreg" in ptx
    if cfg.input != "tf32":  # the transpose immediates (imm-trans-a, imm-trans-b) follow the layout
        ta, tb = int(not cfg.a_k_major), int(not cfg.b_k_major)
        assert f"p, 1, 1, {ta}, {tb};" in ptx
    assert f"setmaxnreg.inc.sync.aligned.u32 {cfg.consumer_regs};" in ptx
    assert f"setmaxnreg.dec.sync.aligned.u32 {cfg.producer_regs};" in ptx
    assert ("bar.arrive" in ptx) == cfg.pingpong  # the math turn of the pingpong warpgroups
    # clusters: the compile-time cluster shape, multicast, peer arrivals, cluster barriers
    cluster = cfg.cluster_size > 1
    assert (f".reqnctapercluster {cfg.cluster_size}, 1, 1" in ptx) == cluster
    assert ("multicast::cluster" in ptx) == cluster
    # a peer's stage release: a remote arrive with the default (CTA-scope) release; cluster scope
    # on it or on the producer's wait compiles to a MEMBAR.ALL.GPU or an L1 invalidation per stage
    assert ("mbarrier.arrive.shared::cluster.b64" in ptx) == cluster
    assert "mbarrier.arrive.release.cluster" not in ptx and "try_wait.parity.acquire.cluster" not in ptx
    assert ("barrier.cluster.arrive" in ptx) == cluster
    # the staged and columns epilogues: 16-byte shared reads and global stores
    assert ("ld.shared.v4" in ptx and "st.global.v4" in ptx) == (cfg.epilogue in ("staged", "columns"))
    # the TMA-store epilogue: bulk tensor stores from shared memory, their reads awaited
    tma = cfg.epilogue == "tma"
    assert ("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx) == tma
    assert ("cp.async.bulk.wait_group.read 0" in ptx and "fence.proxy.async.shared::cta" in ptx) or not tma
    assert ("%globaltimer" in ptx) == cfg.timeline  # the timeline's stamps, and only there


# --- GPU (sm_90 only) -----------------------------------------------------------------------------


def _check(m, n, k, kind, cfg, *, trans_a=False, trans_b=False, beta=0.0, alpha=1.0, seed=0,
           sms=None):
    (a, a64), (b, b64), (c, c64) = product_operands(m, n, k, kind, np.random.default_rng(seed),
                                                    trans_a=trans_a, trans_b=trans_b)
    out = poisoned((m, n), kind)
    hopper.gemm(a, b, c, alpha=alpha, beta=beta, out=out, config=cfg, sms=sms,
                allow_tf32=kind == "tf32", as_dtype="bfloat16" if kind == "bfloat16" else None)
    ref = alpha * (a64 @ b64) + (beta * c64 if beta else 0)
    check_product(as_float64(out), ref, BOUNDS[kind], f"{cfg} {m}x{n}x{k} tA={trans_a} tB={trans_b} sms={sms}")


# Non-multiples of every tile size, M, N or K = 1, K below one k-iteration, tall and skinny, and
# enough k-iterations to wrap the stage ring several times.
SHAPES = [(1, 1, 1), (257, 263, 129), (1, 300, 77), (300, 1, 45), (2000, 9, 64), (33, 45, 71),
          (130, 260, 1000), (128, 256, 64), (640, 520, 2050)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("m,n,k,trans_a,trans_b,beta", [(64, 8192, 1024, False, False, 0.0),
                                                        (1, 3000, 700, True, False, 0.0),
                                                        (37, 4100, 2050, False, True, 0.5),
                                                        (64, 64 * 140, 300, True, True, 0.0),
                                                        (50, 2200, 8192, False, False, 0.0),
                                                        (3000, 40, 900, True, True, 0.0),
                                                        (8192, 64, 1000, False, True, 0.0),
                                                        (24, 20000, 520, True, False, 0.5),
                                                        (16000, 40, 700, False, True, 0.0),
                                                        (48, 11000, 1500, False, True, 0.0),
                                                        (20, 7000, 3000, False, True, 0.5),
                                                        (8, 8200, 1100, True, False, 0.0)])
def test_thin_products_on_the_heuristic_config(kind, m, n, k, trans_a, trans_b, beta):
    """Products of at most 64 rows or columns on the config the heuristic picks (THIN_TILE, pingpong
    64 x 64, static or stream-K by the tile count; 16-bit ones past a wave of those on 64 x 128 or
    128 x 64, THIN_LONG, and below one but more than half on 64 x 128 split-K two ways,
    THIN_LONG_SPLIT), every operand layout, the staged and paired epilogues."""
    cfg = hopper.choose_config(m, n, k, "float32" if kind == "tf32" else kind, hopper.device_sms(),
                               allow_tf32=kind == "tf32")
    assert cfg.pingpong and min(cfg.tile_m, cfg.tile_n) == 64
    _check(m, n, k, kind, None, trans_a=trans_a, trans_b=trans_b, beta=beta, alpha=0.5, seed=m + n)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_a,beta", [(1024, 1032, 1024, False, 0.0),
                                                (3000, 1000, 3000, True, 0.5),
                                                (2560, 1544, 1536, False, 0.0),
                                                (1800, 1800, 700, True, 0.0)])
def test_b_rows_off_128_on_the_heuristic_config(kind, m, n, k, trans_a, beta):
    """A row-major B whose rows are off 128-byte lines, read in place: the heuristic's 2-CTA
    cluster config (OFF_ROWS_CLUSTERS; static, B multicast, 128 or 256 wide, staged or TMA
    stores), both A layouts."""
    b = cp.empty((k, n), dtype=cp.float16)
    off = dict(b_rows_off=hopper_heuristic.b_rows_off([b]), b_rows_off_128=hopper_heuristic.b_rows_off([b], 128))
    assert off["b_rows_off_128"]
    cfg = hopper.choose_config(m, n, k, kind, hopper.device_sms(), **off)
    if cfg.cluster_m != 2:  # sized for 132 SMs (H200, H100 SXM)
        pytest.skip(f"the heuristic picks no cluster here on {hopper.device_sms()} SMs: {cfg}")
    assert cfg.policy == "static"
    _check(m, n, k, kind, None, trans_a=trans_a, beta=beta, alpha=0.5, seed=m + n + k)


DEEP = dict(tile_n=256, sk_reduce="spread")  # DEEP_SPLIT, on 2 x 1 clusters or single CTAs
WIDE_192 = dict(sk_ways=2, sk_reduce="owner", cluster_m=1, cluster_n=1)  # SPLIT_K_192


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_a,beta,split", [(1000, 1000, 24576, False, 0.0, dict(DEEP, cluster_m=2)),
                                                      (1024, 1024, 24576, True, 0.5, dict(DEEP, cluster_m=1)),
                                                      (600, 1000, 40000, False, 0.0, dict(DEEP, cluster_m=1)),
                                                      (800, 1500, 20008, True, 0.0, dict(DEEP, cluster_m=1)),
                                                      (1200, 800, 20000, False, 0.5, dict(DEEP, cluster_m=2)),
                                                      (1070, 968, 24000, True, 0.0, dict(DEEP, cluster_m=2)),
                                                      (256, 1280, 80000, False, 0.5, dict(DEEP, cluster_m=2)),
                                                      (1032, 1088, 12688, False, 0.5, dict(WIDE_192, tile_n=192)),
                                                      (1800, 536, 13760, True, 0.0, dict(WIDE_192, tile_n=192)),
                                                      (3864, 320, 20552, False, 0.0, dict(WIDE_192, tile_n=160))])
def test_wide_split_k_on_the_heuristic_config(kind, m, n, k, trans_a, beta, split):
    """Long-K products on the heuristic's split-K over wide tiles (the config's fields in
    ``split``), both A layouts, beta, the right product (poisoned output): deep K over 128 x 256
    tiles with the spread fix-up (DEEP_SPLIT), on single CTAs, and on 2 x 1 clusters where B's rows
    are off 128-byte lines (nine tile rows: one row of clusters past M) or the tiles are few (ten,
    13 CTAs each: DEEP_SPLIT_FEW); static 128 x 128 tiles of one wave as two CTAs a 128 x 192 tile
    (160 where those take as many columns) with the owner fix-up (SPLIT_K_192)."""
    a = cp.empty((k, m), dtype=cp.float16).T if trans_a else cp.empty((m, k), dtype=cp.float16)
    b = cp.empty((k, n), dtype=cp.float16)
    cfg = hopper.choose_config(m, n, k, kind, hopper.device_sms(), **hopper.rows_flags([a], [b]))
    if cfg.sk_ways == 0:  # sized for 132 SMs (H200, H100 SXM)
        pytest.skip(f"no wide split-K on {hopper.device_sms()} SMs: {cfg}")
    assert {field: getattr(cfg, field) for field in split} == split
    _check(m, n, k, kind, None, trans_a=trans_a, beta=beta, alpha=0.5, seed=m + n + k)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_a,beta", [(4992, 1784, 6440, False, 0.5),  # then stream-K
                                                (1256, 7400, 2928, True, 0.0),   # then clusters again
                                                (5040, 856, 7504, False, 0.5)])  # then the spread fix-up
def test_tail_split_matches_float64_reference(kind, m, n, k, trans_a, beta, monkeypatch):
    """The heuristic's two launches on two bands of rows (a 2-CTA cluster config whose last wave is
    short: hopper_heuristic.tail_split under TAIL_SPLIT), both A layouts, beta (C read band by band),
    against the float64 reference.  (CLUSTER_TAIL_SK off: it runs these as one stream-K launch,
    test_cluster_tail_sk_on_the_heuristic_config.)"""
    monkeypatch.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)
    b = cp.empty((k, n), dtype=cp.float16)
    off = hopper_heuristic.b_rows_flags([b])
    cfg = hopper.choose_config(m, n, k, kind, hopper.device_sms(), **off)
    split = hopper_heuristic.tail_split(cfg, m, n, k, kind, hopper.device_sms(), **off)
    if cfg.cluster_m == 1 or split is None or split[2] > hopper_heuristic.TAIL_SPLIT:  # sized for 132 SMs
        pytest.skip(f"no split on {hopper.device_sms()} SMs: {cfg}")
    _check(m, n, k, kind, None, trans_a=trans_a, beta=beta, alpha=0.5, seed=m + k)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_a,beta", [(4992, 1784, 6440, False, 0.5),  # 2 x 1, 256 wide
                                                (1256, 7400, 2928, True, 0.0),
                                                (5040, 856, 7504, False, 0.5),  # 2 x 1, 128 wide
                                                (512, 8856, 2208, False, 0.0)])  # 2 x 2
def test_cluster_tail_sk_on_the_heuristic_config(kind, m, n, k, trans_a, beta):
    """Static clusters whose last wave of blocks is short, on long K: the heuristic's stream-K over
    the last two waves on the same clusters (CLUSTER_TAIL_SK), one launch (the config itself, which
    callers get but where gemm_parts runs the transposed product), both A layouts, beta, against
    the float64 reference (poisoned output)."""
    a = cp.empty((k, m), dtype=cp.float16).T if trans_a else cp.empty((m, k), dtype=cp.float16)
    b = cp.empty((k, n), dtype=cp.float16)
    flags = hopper.rows_flags([a], [b])
    cfg = hopper.choose_config(m, n, k, kind, hopper.device_sms(), **flags)
    if hopper.device_sms() != 132:  # sized for 132 SMs (H200, H100 SXM)
        pytest.skip(f"the products are sized for 132 SMs, not {hopper.device_sms()}: {cfg}")
    assert (cfg.policy, cfg.sk_waves, cfg.sk_reduce) == ("streamk", 1, "owner") and cfg.cluster_size > 1, cfg
    assert hopper_heuristic.tail_split(cfg, m, n, k, kind, 132, **flags) is None  # one launch
    _check(m, n, k, kind, cfg, trans_a=trans_a, beta=beta, alpha=0.5, seed=m + n + k)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_a,beta,cluster_m", [(1176, 4080, 4104, False, 0.0, 2),
                                                          (5296, 992, 4296, True, 0.5, 2),
                                                          (840, 5712, 4104, False, 0.5, 1)])
def test_streamk_256_on_the_heuristic_config(kind, m, n, k, trans_a, beta, cluster_m):
    """Static waves of narrower tiles that the heuristic runs as stream-K over 128 x 256 tiles
    (SK_256_OVER_STATIC), on 2 x 1 clusters where the rows of tiles pair (SK_256_CLUSTER_PAD; 840
    rows: seven, single CTAs), both A layouts, beta, against the float64 reference (poisoned
    output)."""
    a = cp.empty((k, m), dtype=cp.float16).T if trans_a else cp.empty((m, k), dtype=cp.float16)
    b = cp.empty((k, n), dtype=cp.float16)
    cfg = hopper.choose_config(m, n, k, kind, hopper.device_sms(), **hopper.rows_flags([a], [b]))
    if hopper.device_sms() != 132:  # sized for 132 SMs (H200, H100 SXM)
        pytest.skip(f"the products are sized for 132 SMs, not {hopper.device_sms()}: {cfg}")
    assert (cfg.tile_n, cfg.policy, cfg.sk_reduce) == (256, "streamk", "owner"), cfg
    assert (cfg.cluster_m, cfg.cluster_n) == (cluster_m, 1), cfg
    _check(m, n, k, kind, cfg, trans_a=trans_a, beta=beta, alpha=0.5, seed=m + n + k)


@pytest.mark.gpu
@needs_sm90
def test_tail_split_k_parts_and_in_place(monkeypatch):
    """gemm_parts with K in two parts through the split, out = C (in place, beta != 0).
    (CLUSTER_TAIL_SK off, as above.)"""
    monkeypatch.setattr(hopper_heuristic, "CLUSTER_TAIL_SK", None)
    m, n, ks = 1256, 7400, [1456, 1472]
    rng = np.random.default_rng(11)
    a_parts, b_parts, a64, b64 = [], [], [], []
    for kp in ks:
        a, a_ref = rand_operand((m, kp), "float16", rng)
        b, b_ref = rand_operand((kp, n), "float16", rng)
        a_parts.append(a), b_parts.append(b), a64.append(a_ref), b64.append(b_ref)
    cfg = hopper.choose_config(m, n, sum(ks), "float16", hopper.device_sms(), **hopper_heuristic.b_rows_flags(b_parts))
    split = hopper_heuristic.tail_split(cfg, m, n, sum(ks), "float16", hopper.device_sms(), **hopper_heuristic.b_rows_flags(b_parts))
    if cfg.cluster_m == 1 or split is None or split[2] > hopper_heuristic.TAIL_SPLIT:
        pytest.skip(f"no split on {hopper.device_sms()} SMs")
    c, c64 = rand_operand((m, n), "float16", rng)
    out = hopper.gemm_parts(a_parts, b_parts, c, alpha=0.5, beta=0.25, out=c)
    assert out is c
    ref = 0.5 * (cp.concatenate(a64, 1) @ cp.concatenate(b64, 0)) + 0.25 * c64
    err = float(cp.linalg.norm(as_float64(out) - ref)) / float(cp.linalg.norm(ref))
    assert err <= BOUNDS["float16"], err


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("tile_n,stages", [(128, 4), (256, 4), (64, 2), (192, 4)])
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_matches_float64_reference(kind, tile_n, stages, policy):
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy=policy)
    for i, (m, n, k) in enumerate(SHAPES):
        _check(m, n, k, kind, cfg, seed=i, beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("kind", KINDS)
def test_192_wide_tiles_match_float64_reference(kind, policy):
    """tile_n 192 (wgmma n192; B in three 64-wide boxes when MN-major): 16-bit inputs with the
    pair epilogue and 5 stages, tf32 with the staged one and 4; transposed operands too."""
    epilogue, stages = ("pair", 5) if kind != "tf32" else ("staged", 4)
    cfg = HopperConfig(input=kind, tile_n=192, stages=stages, policy=policy, epilogue=epilogue)
    for i, (m, n, k) in enumerate(SHAPES):
        _check(m, n, k, kind, cfg, seed=40 + i, beta=0.5 if i % 2 else 0.0)
    if kind != "tf32":
        _check(300, 500, 520, kind, cfg, trans_a=True, trans_b=True, seed=47, beta=0.25)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("tile_n", [96, 160, 224])
@pytest.mark.parametrize("kind", KINDS)
def test_odd_multiple_of_32_widths_match_float64_reference(kind, tile_n, policy):
    """tile_n 96, 160, 224 (wgmma n96 / n160 / n224): a row-major B loads one 64-wide box more
    than half used; the staged epilogue rotates its rows' pieces.  Every policy, the staged and
    pair epilogues, edge tiles, alpha and beta; B row-major and A column-major (16-bit)."""
    stages = {96: 6, 160: 4, 224: 4}[tile_n]
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy=policy, epilogue="staged")
    for i, (m, n, k) in enumerate(SHAPES + [(700, 900, 1500)]):
        _check(m, n, k, kind, cfg, seed=60 + i, beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)
    _check(300, 500, 520, kind, cfg.replace(epilogue="pair"), seed=70, beta=0.25)
    if kind != "tf32":
        _check(300, 500, 520, kind, cfg, trans_a=True, trans_b=True, seed=71, beta=0.25)
        _check(333, 611, 700, kind, cfg, trans_a=True, seed=72)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("kind", ["bfloat16", "tf32"])
def test_many_tiles_per_cta_wrap_the_rings(kind, policy):
    """Few SMs, many tiles and k-iterations: every CTA goes round the stage ring and the unit
    slots many times, across tile boundaries (the mbarrier phase tracking)."""
    cfg = HopperConfig(input=kind, tile_n=128, stages=3, policy=policy)
    _check(1100, 1300, 900, kind, cfg, sms=3, seed=21, beta=0.5)
    _check(700, 2100, 333, kind, cfg.replace(stages=5), sms=7, seed=22)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_transposed_operands(kind, trans_a, trans_b):
    for i, (m, n, k) in enumerate([(200, 136, 96), (129, 67, 40), (300, 500, 520)]):
        cfg = HopperConfig(input=kind, tile_n=128, policy="streamk")
        _check(m, n, k, kind, cfg, trans_a=trans_a, trans_b=trans_b, seed=10 + i, beta=0.25)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("tile_n,policy", [(64, "static"), (128, "streamk"), (256, "static"),
                                           (256, "streamk"), (160, "static"), (224, "streamk")])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_every_operand_layout_without_a_copy(kind, trans_a, trans_b, tile_n, policy):
    """A row- or column-major, B row- or column-major: each is read in place (MN-major through
    wgmma's transpose bits) and every combination matches the float64 reference."""
    rng = np.random.default_rng(30)
    a, _ = rand_operand((64, 48) if trans_a else (48, 64), kind, rng)
    b, _ = rand_operand((80, 64) if trans_b else (64, 80), kind, rng)
    a, b = (a.T if trans_a else a), (b.T if trans_b else b)
    arr, k_major, _ = hopper._operand(cp, a, 8, True)  # A (M, K): K-major unless transposed
    assert arr is a and k_major == (not trans_a)
    arr, k_major, _ = hopper._operand(cp, b.T, 8, True)  # B^T (N, K): K-major when B was transposed
    assert arr.data.ptr == b.data.ptr and k_major == trans_b
    # the stages of test_gemm_matches_float64_reference, so the B row-major configs compile once
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=2 if tile_n == 64 else 4, policy=policy,
                       epilogue="pair" if tile_n % 64 == 0 else "staged")
    for i, (m, n, k) in enumerate(SHAPES + [(384, 768, 1024), (136, 520, 72)]):
        _check(m, n, k, kind, cfg, trans_a=trans_a, trans_b=trans_b, seed=40 + i,
               beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)


@pytest.mark.gpu
@needs_sm90
def test_mn_major_views_with_odd_leading_dimensions():
    """Column-major A and row-major B slices: a 16-byte leading dimension is read in place at
    an aligned start; otherwise copied, MN-major."""
    rng = np.random.default_rng(7)
    for kind in ("float16", "bfloat16"):
        base_a, base_a64 = rand_operand((203, 304), kind, rng)  # A = base_a.T: column-major, ld 304
        base_b, base_b64 = rand_operand((203, 160), kind, rng)  # B row-major, ld 160
        for a, a64, b, b64 in ((base_a.T[8:, 5:], base_a64.T[8:, 5:], base_b[5:, 8:], base_b64[5:, 8:]),
                               (base_a.T[1:, :], base_a64.T[1:, :], base_b[:, 3:], base_b64[:, 3:])):
            out = poisoned((a.shape[0], b.shape[1]), kind)
            hopper.gemm(a, b, out=out, config=HopperConfig(input=kind, tile_n=128),
                        as_dtype="bfloat16" if kind == "bfloat16" else None)
            ref = a64 @ b64
            err = float(cp.linalg.norm(as_float64(out) - ref) / cp.linalg.norm(ref))
            assert err < BOUNDS[kind], (kind, a.shape, b.shape, err)


@pytest.mark.gpu
@needs_sm90
def test_views_with_odd_leading_dimensions_and_offsets():
    """Slices whose leading dimension or start breaks TMA's 16-byte rules go through a copy."""
    rng = np.random.default_rng(4)
    a, a64 = rand_operand((301, 203), "float16", rng)
    b, b64 = rand_operand((203, 155), "float16", rng)
    a, a64 = a[1:, 3:], a64[1:, 3:]  # 16-byte misaligned start, ld = 203
    b, b64 = b[3:, :150], b64[3:, :150]
    out = poisoned((300, 150), "float16")
    hopper.gemm(a, b, out=out, config=HopperConfig(input="float16"))
    err = float(cp.linalg.norm(as_float64(out) - a64 @ b64) / cp.linalg.norm(a64 @ b64))
    assert err < BOUNDS["float16"]


# (outer, k) of x = the transpose of a k × outer matrix with contiguous rows: single rows and
# columns, ragged edges, whole tiles, more than 65535 tile rows (the kernel's grid-stride loop)
TRANSPOSE_SHAPES = [(1, 1), (1, 1000), (1000, 1), (33, 65), (64, 64), (65, 129), (1000, 1537),
                    (3, 65535 * 64 + 70)]
_BITS = {"float32": "uint32", "float16": "uint16", "uint16": "uint16", "float64": "uint64"}


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("dtype", list(_BITS))
def test_transpose_copy_is_bitwise_exact(dtype):
    """``transpose_copy`` equals ``x`` bit for bit (random bits: NaNs and denormals too), in a
    padded buffer and in a view of a larger one at an offset, writing nothing else; ``x`` a
    transposed contiguous matrix or a transposed slice of one (offset, row stride longer than its
    row)."""
    rng = np.random.default_rng(5)
    bits = np.dtype(_BITS[dtype])
    sentinel = int(np.iinfo(bits).max) - 1
    for outer, k in TRANSPOSE_SHAPES:
        for r0, c0, extra_r, extra_c in ((0, 0, 0, 0), (2, 3, 5, 7)):
            raw = rng.integers(0, np.iinfo(bits).max, size=(k + extra_r, outer + extra_c),
                               dtype=bits, endpoint=True)
            src = cp.asarray(raw)[r0:r0 + k, c0:c0 + outer]  # rows contiguous, ld outer + extra_c
            x = src.view(dtype).T  # (outer, k), strides (item, ld * item)
            assert x.strides[0] == x.itemsize and x.shape == (outer, k)
            big = cp.full((outer + 2, k + 9), sentinel, dtype=bits)
            o = (1, 2) if r0 else (0, 0)  # dst: a view at an offset, or the first rows of big
            dst = big[o[0]:o[0] + outer, o[1]:]
            hopper.transpose_copy(x, dst.view(dtype))
            got = big.get()
            want = np.full(got.shape, sentinel, dtype=bits)
            want[o[0]:o[0] + outer, o[1]:o[1] + k] = raw[r0:r0 + k, c0:c0 + outer].T
            assert np.array_equal(got, want), (dtype, outer, k, r0, int((got != want).sum()))


def _count_transposes(monkeypatch):
    """The shapes of the operands ``hopper.transpose_copy`` copies from now on (it still copies)."""
    calls, real = [], hopper.transpose_copy
    monkeypatch.setattr(hopper, "transpose_copy", lambda x, buf: (calls.append(x.shape), real(x, buf)))
    return calls


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_operand_copies_mn_contiguous_through_the_transpose(dtype, monkeypatch):
    """``_operand`` without MN-major reads (tf32) makes its K-major copy of an MN-contiguous
    operand with ``transpose_copy`` (a single column, K = 1, as one pitched copy): equal to ``x``,
    its rows padded to 128 bytes."""
    calls = _count_transposes(monkeypatch)
    rng = np.random.default_rng(6)
    align = 16 // np.dtype(dtype).itemsize
    for outer, k in [(1, 5), (5, 1), (33, 65), (1000, 1537)]:
        base = cp.asarray(rng.standard_normal((k + 1, outer + 3)), dtype=dtype)
        for x in (base[:k, :outer].T, base[1:, 3:].T):
            calls.clear()
            arr, k_major, ld = hopper._operand(cp, x, align, False)
            assert calls == ([(outer, k)] if k > 1 else []) and k_major and ld % (8 * align) == 0 and ld >= k
            assert arr.shape == (outer, ld) and cp.array_equal(arr[:, :k], x)


@pytest.mark.gpu
@needs_sm90
def test_tf32_row_major_b_goes_through_the_transpose(monkeypatch):
    """tf32 with B row-major (B^T is MN-contiguous): the copy is the transpose kernel's and the
    product matches the float64 reference, also for a B slice at an odd offset and stride."""
    calls = _count_transposes(monkeypatch)
    cfg = HopperConfig(input="tf32", tile_n=128, policy="streamk")
    for i, (m, n, k) in enumerate([(1, 300, 77), (129, 67, 40), (300, 1000, 1537)]):
        calls.clear()
        _check(m, n, k, "tf32", cfg, seed=60 + i, beta=0.5)
        assert (n, k) in calls
    rng = np.random.default_rng(61)
    a, a64 = rand_operand((250, 301), "tf32", rng)
    base, base64 = rand_operand((303, 207), "tf32", rng)
    b, b64 = base[2:, 3:200], base64[2:, 3:200]  # (301, 197), misaligned start, ld 207
    calls.clear()
    out = poisoned((250, 197), "tf32")
    hopper.gemm(a, b, out=out, config=cfg, allow_tf32=True)
    assert calls == [(197, 301)]
    ref = a64 @ b64
    err = float(cp.linalg.norm(as_float64(out) - ref) / cp.linalg.norm(ref))
    assert err < BOUNDS["tf32"], err


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", KINDS)
def test_k_zero_gives_beta_c(kind):
    _check(37, 41, 0, kind, HopperConfig(input=kind, policy="static"), beta=2.0)
    _check(37, 41, 0, kind, HopperConfig(input=kind, policy="streamk"), beta=0.0)


@pytest.mark.gpu
@needs_sm90
def test_streamk_is_bitwise_reproducible_and_in_place_works():
    rng = np.random.default_rng(5)
    a, _ = rand_operand((333, 4096), "bfloat16", rng)
    b, _ = rand_operand((4096, 517), "bfloat16", rng)
    cfg = HopperConfig(input="bfloat16", tile_n=128, policy="streamk")
    first = hopper.gemm(a, b, config=cfg, as_dtype="bfloat16", out_dtype="float32")
    for _ in range(3):
        again = hopper.gemm(a, b, config=cfg, as_dtype="bfloat16", out_dtype="float32")
        assert bool((again == first).all())
    c = first.copy()
    hopper.gemm(a, b, c, beta=-1.0, out=c, config=cfg, as_dtype="bfloat16")  # c = ab - ab
    assert float(cp.abs(c).max()) == 0.0


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("m,n,k,sms,tile_n,kind,waves", [
    (256, 256, 16384, None, 128, "bfloat16", 1),  # 4 tiles over 132 CTAs: 33 contributors each
    (512, 512, 8192, None, 128, "float16", 1),    # 16 tiles over 128 of 132 CTAs: 8 each
    (300, 200, 512, None, 128, "float16", 1),     # 6 tiles x 8 k-iterations < 132 CTAs: one each
    (1000, 1500, 2048, 20, 256, "float16", 1),    # 20 SMs: 20 data-parallel tiles, then 28 split
    (333, 517, 4096, 20, 128, "tf32", 1),         # 15 tiles over 20 CTAs: ranges across tiles
    (200, 700, 3000, 9, 64, "bfloat16", 1),       # 9 data-parallel tiles, then 13 split over 9 CTAs
    # sk_waves=0: whole tiles first, then the partial wave split over every CTA
    (1024, 2112, 8192, None, 128, "float16", 0),  # 132 whole, 4 x 128 k-iterations over 132 CTAs
    (896, 2432, 4096, None, 128, "bfloat16", 0),  # 132 whole, 1 x 64 k-iterations: one each
    (333, 517, 4096, 4, 128, "float16", 0),       # 12 whole on 4 CTAs, then 3 split over 4
    (400, 500, 16384, None, 160, "float16", 1),   # 12 tiles of 128x160 over 132 CTAs: 11 each
    (300, 700, 4096, 20, 224, "bfloat16", 1)])    # 12 tiles of 128x224 over 20 CTAs
def test_spread_fix_up_matches_float64_and_repeats(m, n, k, sms, tile_n, kind, waves):
    """SK_REDUCE SPREAD (every contributor adds a share of its split tile): against the float64
    reference with alpha and beta, edge tiles and poisoned outputs; the same bits every run; and
    the same work units as the owner fix-up (the record equals the mirror)."""
    cfg = HopperConfig(input=kind, tile_n=tile_n, policy="streamk", sk_reduce="spread", sk_waves=waves)
    _check(m, n, k, kind, cfg, beta=0.5, alpha=0.75, sms=sms, seed=4)
    _check(m, n, k, kind, cfg.replace(epilogue="staged"), sms=sms, seed=5)
    rng = np.random.default_rng(6)
    a, _ = rand_operand((m, k), kind, rng)
    b, _ = rand_operand((k, n), kind, rng)
    as_dtype = "bfloat16" if kind == "bfloat16" else None
    run = lambda: hopper.gemm(a, b, config=cfg, sms=sms, as_dtype=as_dtype, out_dtype="float32",
                              allow_tf32=kind == "tf32")
    first = run()
    for _ in range(3):
        assert bool((run() == first).all())
    _, record = hopper.gemm(a, b, config=cfg, sms=sms, as_dtype=as_dtype, allow_tf32=kind == "tf32",
                            debug=True)
    lp = hopper.launch_info(a.shape, b.shape, cfg.replace(record=True), sms=sms)
    expect = schedule.assignment("streamk", lp.rows, lp.cols, lp.k_iters, lp.grid, sk_tiles=lp.sk_tiles)
    assert schedule.from_record(record.tolist(), lp.grid) == expect


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_launches_take_the_trimmed_binary_where_it_holds(kind, monkeypatch):
    """A launch compiles its config without the code it cannot run (``trim_config``): split_only
    where the spread fix-up splits every tile (with beta != 0 too: the fix-up reads C), plain_out
    where the output takes the staged, TMA or columns epilogue's own path, the whole binary
    elsewhere; each against the float64 reference into a poisoned output (a trimmed binary traps
    on the paths it lacks)."""
    taken = []
    real = hopper.get_kernel
    monkeypatch.setattr(hopper, "get_kernel", lambda cfg, dev=None: taken.append(cfg) or real(cfg, dev))
    spread = HopperConfig(input=kind, policy="streamk", sk_reduce="spread", epilogue="staged")
    row = lambda m, n: poisoned((m, n), kind)
    off = lambda m, n: poisoned((m, n + 1), kind)[:, 1:]  # one element off 16 bytes
    col = lambda m, n: poisoned((n, m), kind).T
    cases = [  # m, n, k, config, sms, beta, output, (split_only, plain_out)
        (512, 512, 8192, spread, None, 0.0, row, (True, False)),  # 16 tiles, 8 ways each
        (512, 512, 8192, spread, None, 0.5, off, (True, False)),
        (256, 256, 16384, spread.replace(cluster_m=2, cluster_n=2), None, 0.0, row, (True, False)),
        (1000, 1504, 700, spread, 20, 0.0, row, (False, True)),  # whole tiles first; rows of 16 bytes
        (1000, 1504, 700, spread, 20, 0.0, off, (False, False)),
        (1000, 1504, 700, spread.replace(policy="static", sk_reduce="owner", epilogue="tma"), None, 0.0, row,
         (False, True)),
        (1000, 1504, 700, spread.replace(policy="static", sk_reduce="owner", epilogue="tma"), None, 0.5, row,
         (False, False)),
        (1000, 1504, 700, spread.replace(sk_reduce="owner", epilogue="columns"), None, 0.0, col, (False, True)),
        (1000, 1504, 700, spread.replace(sk_reduce="owner", epilogue="columns"), None, 0.0, row, (False, False)),
    ]
    rng = np.random.default_rng(17)
    as_dtype = "bfloat16" if kind == "bfloat16" else None
    for m, n, k, cfg, sms, beta, view, trimmed in cases:
        a, a64 = rand_operand((m, k), kind, rng)
        b, b64 = rand_operand((k, n), kind, rng)
        c, c64 = rand_operand((m, n), kind, rng)
        out = view(m, n)
        hopper._launch_setup.cache_clear()
        taken.clear()
        hopper.gemm(a, b, c, alpha=0.75, beta=beta, out=out, config=cfg, sms=sms, as_dtype=as_dtype)
        what = f"{cfg} {m}x{n}x{k} beta={beta}"
        assert (taken[-1].split_only, taken[-1].plain_out) == trimmed, what
        ref = 0.75 * (a64 @ b64) + beta * c64
        check_product(as_float64(out, kind), ref, BOUNDS[kind], what)
    hopper._launch_setup.cache_clear()


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", ["per_tile", "static", "streamk"])
@pytest.mark.parametrize("m,n,k,sms", [(1000, 1500, 700, None), (300, 2000, 4096, 20), (64, 64, 64, 7)])
@pytest.mark.parametrize("consumers", ["cooperative", "pingpong"])
def test_kernel_record_equals_mirror(policy, m, n, k, sms, consumers):
    rng = np.random.default_rng(1)
    a, _ = rand_operand((m, k), "float16", rng)
    b, _ = rand_operand((k, n), "float16", rng)
    cfg = HopperConfig(input="float16", tile_n=128, policy=policy)
    if consumers == "pingpong":  # one warpgroup per 64-row tile
        cfg = cfg.replace(tile_m=64, pingpong=True)
    _, record = hopper.gemm(a, b, config=cfg, sms=sms, debug=True)
    lp = hopper.launch_info(a.shape, b.shape, cfg.replace(record=True), sms=sms)
    assert lp.rows == -(-m // cfg.tile_m)
    expect = schedule.assignment(policy, lp.rows, lp.cols, lp.k_iters, lp.grid, sk_tiles=lp.sk_tiles)
    assert schedule.from_record(record.tolist(), lp.grid) == expect


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy,sk_reduce,m,n,k,sms,tile_m", [
    ("static", "owner", 1000, 1500, 700, None, None),
    ("streamk", "spread", 256, 256, 16384, None, None),
    ("streamk", "owner", 300, 2000, 4096, 20, None),
    ("dynamic", "owner", 1000, 700, 300, 7, None),
    # pingpong consumers, a warpgroup a tile of 64 or 128 rows
    ("static", "owner", 1000, 1500, 700, None, 64),
    ("streamk", "owner", 300, 2000, 4096, 20, 128),
    ("dynamic", "owner", 1000, 700, 300, 7, 64)])
def test_timeline_covers_the_units_and_adds_up(policy, sk_reduce, m, n, k, sms, tile_m):
    """timeline=True: the same product (float64 reference, poisoned output), and the entries agree
    with themselves (mgemm.timeline.check) and with the schedule: each warpgroup takes the units the
    mirror assigns its CTA (dynamic: every tile once over the CTAs; pingpong: every other one, in
    turn), and leaves once."""
    from mgemm import timeline
    cfg = HopperConfig(input="float16", tile_n=128, stages=6, policy=policy, sk_reduce=sk_reduce,
                       epilogue="tma")
    if tile_m:
        cfg = cfg.replace(pingpong=True, tile_m=tile_m)
    rng = np.random.default_rng(9)
    a, a64 = rand_operand((m, k), "float16", rng)
    b, b64 = rand_operand((k, n), "float16", rng)
    out, entries = hopper.gemm(a, b, out=poisoned((m, n), "float16"), config=cfg, sms=sms, timeline=True)
    ref = a64 @ b64
    check_product(as_float64(out), ref, BOUNDS["float16"], "timeline")
    assert entries.shape[1] == len(timeline.FIELDS) and timeline.check(entries) == []
    lp = hopper.launch_info(a.shape, b.shape, cfg, sms=sms)
    exits = entries[entries[:, 2] < 0]
    assert sorted(map(tuple, exits[:, :2].tolist())) == [(c, w) for c in range(lp.grid) for w in (0, 1)]
    if tile_m:  # pingpong: the warpgroups take the CTA's units in turn
        got = timeline.units(entries, wg=None)
        for c, us in got.items():
            assert timeline.units(entries, wg=0).get(c, []) == us[0::2]
            assert timeline.units(entries, wg=1).get(c, []) == us[1::2]
    else:
        got = timeline.units(entries)
        assert got == timeline.units(entries, wg=1)
    if policy == "dynamic":
        assert sorted(u for us in got.values() for u in us) == [(t, 0, lp.k_iters) for t in range(lp.tiles)]
    else:
        expect = schedule.assignment(policy, lp.rows, lp.cols, lp.k_iters, lp.grid, sk_tiles=lp.sk_tiles)
        assert [got.get(c, []) for c in range(lp.grid)] == [[tuple(u) for u in us] for us in expect]
    work = entries[entries[:, 2] >= 0]
    split = (work[:, 3] > 0) | (work[:, 4] < lp.k_iters)
    # a partial stored: every split unit with the spread fix-up; the owner's contributors otherwise
    stores = split if sk_reduce == "spread" else work[:, 4] < lp.k_iters
    assert ((work[:, 8] > 0) == stores).all()
    assert ((work[:, 9] > 0) == (split if sk_reduce == "spread" else False)).all()  # spread: reduced
    s = timeline.summarize(entries)
    assert s["mainloop"] > 0 and sum(s[p] for p in timeline.PHASES) == pytest.approx(
        s["warpgroups"] * s["span"], rel=1e-9)
    with pytest.raises(ValueError, match="share the kernel's log"):
        hopper.gemm(a, b, config=cfg, timeline=True, debug=True)
    # an empty product: no unit, the entries' columns as ever
    _, none = hopper.gemm(a[:0], b, config=cfg, timeline=True)
    assert none.shape == (0, len(timeline.FIELDS)) and timeline.check(none) == []


@pytest.mark.gpu
@needs_sm90
def test_dynamic_record_covers_every_tile_once():
    rng = np.random.default_rng(2)
    a, _ = rand_operand((1000, 300), "bfloat16", rng)
    b, _ = rand_operand((300, 1200), "bfloat16", rng)
    cfg = HopperConfig(input="bfloat16", policy="dynamic")
    _, record = hopper.gemm(a, b, config=cfg, as_dtype="bfloat16", debug=True)
    lp = hopper.launch_info(a.shape, b.shape, cfg.replace(record=True))
    units = [tuple(r[1:]) for r in record.tolist()]
    assert len(units) == len(set(units))
    assert set(units) == schedule.work_units("dynamic", lp.rows, lp.cols, lp.k_iters, lp.grid)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,out_dtype", [("bfloat16", None), ("float16", "float32"), ("tf32", None)])
def test_pair_epilogue_equals_direct_and_falls_back(kind, out_dtype):
    """The paired stores write what the element-wise ones do (the same bits without beta·C; with
    it, up to the compiler's choice of fused multiply-adds): row-major outputs with an odd leading
    dimension, an even one and an odd last column, a start one element off, a column-major one."""
    rng = np.random.default_rng(8)
    a, _ = rand_operand((261, 300), kind, rng)
    b, _ = rand_operand((300, 333), kind, rng)
    as_dtype = "bfloat16" if kind == "bfloat16" else None
    res = out_dtype or hopper_config.STORAGE[kind]
    storage = cp.uint16 if res == "bfloat16" else getattr(cp, res)
    c, _ = rand_operand((261, 333), kind if res == hopper_config.STORAGE.get(kind) else "float16", rng)
    c = c.astype(storage) if c.dtype != storage else c
    views = [lambda: cp.zeros((261, 333), storage),                  # ld 333 (odd): element-wise
             lambda: cp.zeros((261, 334), storage)[:, :333],         # even ld, last column odd
             lambda: cp.zeros((261, 335), storage)[:, 1:334],        # start one element off
             lambda: cp.zeros((333, 261), storage).T]                # column-major
    for beta in (0.0, 0.5):
        for make in views:
            outs = []
            for epi in ("pair", "direct"):
                cfg = HopperConfig(input=kind, tile_n=128, epilogue=epi)
                out = make()
                hopper.gemm(a, b, c, alpha=0.75, beta=beta, out=out, config=cfg, as_dtype=as_dtype,
                            allow_tf32=kind == "tf32")
                outs.append(out.copy())
            got, want = as_float64(outs[0]), as_float64(outs[1])
            if beta == 0.0:
                assert bool((got == want).all()), (kind, outs[0].strides)
            else:
                tol = 1e-6 if res == "float32" else 1e-2
                assert bool(cp.allclose(got, want, rtol=tol, atol=tol)), (kind, beta, outs[0].strides)
            assert not bool(cp.isnan(got).any())


def _epilogue_equals_direct(epi, views, written, a, b, c, base, pp_tile_m, as_dtype):
    """``a @ b`` (alpha 0.75; beta 0 and 0.5 with ``c``) on ``base`` with epilogue ``epi`` and with
    the element-wise one, into fresh outputs from each of ``views`` (poisoned): the same bits with
    beta == 0, within rounding of C's read with beta != 0, nothing left unwritten; in the first
    view's buffer nothing past index ``written`` of its rows (the padding to the leading dimension).
    ``pp_tile_m`` > 0: pingpong consumers with tiles of that many rows; "split": cooperative 64-row
    tiles, each warpgroup half the columns."""
    res = base.output
    for beta in (0.0, 0.5):
        for v, make in enumerate(views):
            outs = []
            for e in (epi, "direct"):
                cfg = base.replace(epilogue=e)
                if pp_tile_m == "split":
                    cfg = cfg.replace(tile_m=64)
                elif pp_tile_m:
                    cfg = cfg.replace(pingpong=True, tile_m=pp_tile_m)
                out = make()
                hopper.gemm(a, b, c, alpha=0.75, beta=beta, out=out, config=cfg, as_dtype=as_dtype,
                            allow_tf32=base.input == "tf32")
                outs.append(out)
            got, want = as_float64(outs[0], res), as_float64(outs[1], res)
            assert not bool(cp.isnan(got).any()), (epi, v, beta)
            if beta == 0.0:
                assert bool((got == want).all()), (epi, v, outs[0].strides)
            else:
                tol = 1e-6 if res == "float32" else 1e-2
                assert bool(cp.allclose(got, want, rtol=tol, atol=tol)), (epi, v, beta)
            if v == 0:  # past the output's rows, up to the leading dimension: never written
                buf = outs[0].base if outs[0].base is not None else outs[0]
                assert bool(cp.isnan(as_float64(buf[:, written:], res)).all()), (epi, beta)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,out_dtype,tile_n,policy,pp_tile_m", [("bfloat16", None, 256, "static", 0),
                                                                    ("float16", None, 128, "streamk", 0),
                                                                    ("float16", "float32", 64, "dynamic", 0),
                                                                    ("tf32", None, 128, "static", 0),
                                                                    ("bfloat16", None, 256, "streamk", 0),
                                                                    ("bfloat16", None, 256, "static", 64),
                                                                    ("float16", "float32", 128, "streamk", 128),
                                                                    ("float16", None, 64, "dynamic", 64),
                                                                    ("bfloat16", None, 192, "streamk", 0),
                                                                    ("float16", None, 192, "static", 0),
                                                                    ("float16", None, 160, "streamk", 0),
                                                                    ("bfloat16", None, 224, "static", 0),
                                                                    ("float16", "float32", 96, "dynamic", 0),
                                                                    ("bfloat16", None, 256, "streamk", "split"),
                                                                    ("float16", "float32", 128, "static", "split")])
@pytest.mark.parametrize("epi", ["staged", "tma"])
def test_staged_epilogue_equals_direct_and_falls_back(kind, out_dtype, tile_n, policy, pp_tile_m, epi):
    """The staged epilogue (16-byte stores through shared memory) and the TMA-store one (the same
    buffer out through bulk tensor stores) write the bits the element-wise one does, on edge tiles
    of a 261 x N result: into a row-major output whose rows are 16-byte aligned (the staged / TMA
    path; the padding columns beyond N stay untouched) and, falling back to the paired stores, into
    one with an odd leading dimension, one starting an element off and a column-major one; into
    rows in reverse order (staged; TMA cannot address them and launches "staged"); and with
    beta != 0 (C is read: the paired path).  N = 333 for both; N = 336 too for ``tma``: 333
    elements end off a 16-byte boundary, where a bulk store would write past N and the launch
    takes "staged", so only 336 exercises the bulk stores.  ``pp_tile_m`` > 0: pingpong consumers
    with tiles of that many rows (each warpgroup stages its own tile's row blocks); "split":
    cooperative 64-row tiles (each warpgroup stages its half of the columns)."""
    if epi == "tma" and HopperConfig(input=kind, output=out_dtype or hopper_config.STORAGE[kind],
                                     tile_n=tile_n, epilogue="staged").out_chunk_bytes % 128:
        with pytest.raises(ValueError, match="whole 128-byte boxes"):  # rotated rows: no bulk stores
            HopperConfig(input=kind, output=out_dtype, tile_n=tile_n, epilogue=epi)
        return
    rng = np.random.default_rng(11)
    a, _ = rand_operand((261, 300), kind, rng)
    as_dtype = "bfloat16" if kind == "bfloat16" else None
    res = out_dtype or hopper_config.STORAGE[kind]
    pad = 16 // (2 if res in ("float16", "bfloat16") else 4)
    for n in (333,) if epi == "staged" else (333, 336):
        b, _ = rand_operand((300, n), kind, rng)
        c, _ = rand_operand((261, n), res if res != "float32" else "tf32", rng)
        ld = -(-n // pad) * pad + pad  # a multiple of 16 bytes, with padding columns after N
        views = [lambda: poisoned((261, ld), res)[:, :n],          # staged / TMA
                 lambda: poisoned((261, n | 1), res)[:, :n],       # odd ld: 16-byte rows broken
                 lambda: poisoned((261, ld + 1), res)[:, 1:n + 1],  # start one element off
                 lambda: poisoned((n, 261), res).T,                # column-major
                 lambda: poisoned((261, ld), res)[::-1, :n]]       # rows in reverse order
        _epilogue_equals_direct(epi, views, n, a, b, c, HopperConfig(
            input=kind, output=res, tile_n=tile_n, policy=policy), pp_tile_m, as_dtype)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,out_dtype,tile_n,policy,pp_tile_m", [("float16", None, 192, "streamk", 0),
                                                                    ("bfloat16", None, 128, "static", 0),
                                                                    ("float16", "float32", 224, "dynamic", 0),
                                                                    ("bfloat16", None, 256, "streamk", 0),
                                                                    ("tf32", None, 96, "static", 0),
                                                                    ("float16", None, 160, "per_tile", 0),
                                                                    ("bfloat16", None, 64, "static", 64),
                                                                    ("float16", "float32", 128, "streamk", 128),
                                                                    ("float16", None, 256, "streamk", "split"),
                                                                    ("bfloat16", "float32", 128, "static", "split")])
def test_columns_epilogue_equals_direct_and_falls_back(kind, out_dtype, tile_n, policy, pp_tile_m):
    """The columns epilogue (a column-major output's 64-row columns through shared memory, out as
    16-byte stores) writes the bits the element-wise one does, on a 261 x N result whose rows end
    mid-piece (261 rows: the last 16-byte piece of each column is written element by element):
    into a column-major output whose columns are 16-byte aligned (the columns path; the padding
    rows between 261 and the leading dimension stay untouched) and, falling back to the element
    stores, into one with an odd leading dimension, one starting an element off and a row-major
    one; and with beta != 0 (C is read).  ``pp_tile_m`` > 0: pingpong consumers; "split":
    cooperative 64-row tiles."""
    rng = np.random.default_rng(12)
    a, _ = rand_operand((261, 300), kind, rng)
    as_dtype = "bfloat16" if kind == "bfloat16" else None
    res = out_dtype or hopper_config.STORAGE[kind]
    pad = 16 // (2 if res in ("float16", "bfloat16") else 4)
    n, ld = 333, -(-261 // pad) * pad + pad  # ld: a multiple of 16 bytes, padding rows after 261
    b, _ = rand_operand((300, n), kind, rng)
    c, _ = rand_operand((261, n), res if res != "float32" else "tf32", rng)
    views = [lambda: poisoned((n, ld), res)[:, :261].T,            # columns
             lambda: poisoned((n, 261 | 1), res)[:, :261].T,       # odd ld: 16-byte columns broken
             lambda: poisoned((n, ld + 1), res)[:, 1:262].T,        # start one element off
             lambda: poisoned((261, n), res)]                       # row-major
    _epilogue_equals_direct("columns", views, 261, a, b, c, HopperConfig(
        input=kind, output=res, tile_n=tile_n, policy=policy), pp_tile_m, as_dtype)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_a,trans_b,margin", [(2112, 1024, 8192, False, False, None),
                                                          (2111, 1024, 8191, True, True, None),
                                                          (2111, 1024, 8191, False, True, None),
                                                          (1999, 904, 5003, True, False, 2.0),
                                                          (4176, 536, 1392, False, False, None),  # TMA stores
                                                          (288, 5592, 2920, False, False, None),  # ONE_WAVE_SWAP:
                                                          (1328, 1480, 5688, False, False, None),  # 144, 128
                                                          (4728, 856, 4400, False, False, None),  # SWAP_ONE_WAVE_WIDE:
                                                          (840, 5528, 6264, False, True, None),  # 1 CTA, 2 x 1
                                                          (1024, 2112, 2112, False, False, None),  # SWAP_64_ROWS:
                                                          (1000, 2080, 4100, False, True, None)])  # 64 x 256, 5 stages
def test_swapped_product_matches_float64_reference(kind, m, n, k, trans_a, trans_b, margin, monkeypatch):
    """Where ``swap_pays`` (``margin``: ``SWAP_MARGIN`` raised so it does on any SM count), ``gemm``
    runs the transposed product through the output's transposed view with the columns epilogue;
    the result is the product's, every element written (poisoned output); ``beta != 0`` keeps the
    direct product.  Every operand layout, M and K off 8 and 128.  ``DIRECT_64_ROWS`` off (it would
    run 2112x1024x8192 direct: ``test_direct_64_row_tiles``)."""
    monkeypatch.setattr(hopper_heuristic, "DIRECT_64_ROWS", None)
    if margin is not None:
        monkeypatch.setattr(hopper_heuristic, "SWAP_MARGIN", margin)
    real, taken = hopper_heuristic._swap_config, []
    monkeypatch.setattr(hopper_heuristic, "_swap_config", lambda *a, **kw: taken.append(real(*a, **kw)) or taken[-1])
    if hopper.device_sms() == 132 or margin is not None:
        _check(m, n, k, kind, None, trans_a=trans_a, trans_b=trans_b, seed=3)
        assert taken and taken[-1] is not None and taken[-1].epilogue == "columns", taken
    taken.clear()
    _check(m, n, k, kind, None, trans_a=trans_a, trans_b=trans_b, beta=0.5, seed=4)
    assert not taken  # beta != 0: the direct product


@pytest.fixture
def k_major_copies(monkeypatch):
    """The shapes of the B parts ``gemm_parts`` copies K-major (``_k_major_copy``), in order."""
    real, taken = hopper._k_major_copy, []
    monkeypatch.setattr(hopper, "_k_major_copy", lambda cp_, b: taken.append(b.shape) or real(cp_, b))
    return taken


@pytest.fixture
def launched(monkeypatch):
    """The configs ``gemm_parts`` launches (``_launch_setup``'s), in order: what it runs, not what
    its rules ask along the way."""
    real, taken = hopper._launch_setup, []
    monkeypatch.setattr(hopper, "_launch_setup", lambda config, *a: taken.append(config) or real(config, *a))
    return taken


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,width", [(912, 6232, 5416, 128), (9688, 552, 11304, 128), (2848, 1040, 4432, 256)])
def test_transposed_product_onto_quad_clusters_matches_float64(kind, m, n, k, width, launched):
    """``SWAP_ONTO_QUAD`` (and ``SWAP_ONTO_QUAD_WIDE``): where the direct product would run static
    128 x ``width`` tiles on 2 x 1 clusters, the transposed product on 128 x 256 tiles over 2 x 2
    clusters, through the output's transposed view (columns epilogue): right against float64,
    every element written (poisoned); on 132 SMs in that one launch.  ``beta != 0`` runs the
    direct product."""
    _check_one_launch(m, n, k, kind, launched, 21, tile_n=256, cluster_m=2, cluster_n=2, epilogue="columns")
    if hopper.device_sms() == 132:
        assert [(c.tile_n, c.cluster_m, c.cluster_n) for c in launched[1:]] == [(width, 2, 1)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(448, 7232, 7880), (560, 11520, 4296)])
def test_row_major_b_takes_whole_boxes(kind, m, n, k, launched):
    """``ROW_MAJOR_BOXES``: over a row-major B, static 128 x 256 tiles where 224-wide ones would
    take more tile columns (33 against 29, 52 against 45), in one launch on 132 SMs; right
    against float64, every element written (poisoned output), N and K off the tiles."""
    _check_one_launch(m, n, k, kind, launched, 31, tile_n=256, policy="static", cluster_m=1, cluster_n=1)


def _check_one_launch(m, n, k, kind, launched, seed, **fields):
    """The heuristic's product right against float64 (poisoned output, ``seed``); on 132 SMs, where
    the rules were fitted, in one launch whose config has ``fields``; then with beta != 0 (seed + 1)."""
    _check(m, n, k, kind, None, seed=seed)
    if hopper.device_sms() == 132:
        assert [{name: getattr(c, name) for name in fields} for c in launched] == [fields]
    _check(m, n, k, kind, None, beta=0.5, seed=seed + 1)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(2112, 1024, 8192), (664, 2944, 2880), (2061, 1024, 4160)])
def test_direct_64_row_tiles(kind, m, n, k, launched):
    """DIRECT_64_ROWS on 132 SMs: where the product would run transposed on 128 x 192 tiles, the
    direct product on static 64 x 256 tiles, five stages, the staged epilogue 64 columns at a
    time, one launch; every element written (poisoned output), M, N off the tiles; with
    beta != 0 the direct product too."""
    _check_one_launch(m, n, k, kind, launched, 11, tile_m=64, tile_n=256, stages=5, out_cols=64,
                      policy="static", epilogue="staged")


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(1024, 2344, 7456), (416, 4968, 6472)])
def test_quad_streamk_256_wide(kind, m, n, k, launched):
    """QUAD_SK_256 on 132 SMs: where rows off 128-byte lines take static 128 x 256 tiles on 2 x 2
    clusters that fill at most 0.8 of a wave, stream-K over the blocks on every cluster, the owner
    fix-up; every element written (poisoned output), N and K off the tiles (M too on 416 rows);
    beta != 0 too."""
    _check_one_launch(m, n, k, kind, launched, 21, tile_n=256, cluster_m=2, cluster_n=2, policy="streamk",
                      sk_reduce="owner")


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_heuristic_128x256_tma_tiles_take_two_buffers(kind, monkeypatch, launched):
    """Where ``gemm_parts`` picks 128 x 256 tiles of one CTA under TMA stores, it launches them
    with ``TMA_BUFFERS`` (3 stages, two staging buffer sets) and the product is right; not where
    the output takes no bulk stores (beta != 0: the paired stores), nor an explicit config, nor
    in one wave of tiles (``TMA_BUFFERS_PAST_WAVE``), nor with the rule off (clusters keep one
    buffer: ``tma_buffers``' doctest)."""
    m, n, k = 4096, 4096, 1024
    base = hopper.choose_config(m, n, k, kind, hopper.device_sms())
    if (base.tile_n, base.epilogue, base.stages) != (256, "tma", 4):
        pytest.skip(f"the heuristic picks {base} here on this GPU")
    _check(m, n, k, kind, None, seed=5)
    assert [(c.stages, c.out_buffers) for c in launched] == [hopper_heuristic.TMA_BUFFERS]
    launched.clear()
    _check(m, n, k, kind, None, beta=0.5, seed=6)
    _check(m, n, k, kind, base, seed=7)
    assert [(c.stages, c.out_buffers) for c in launched] == [(4, 1)] * 2
    launched.clear()
    # one wave of such tiles (120 on 132 SMs, TMA_BUFFERS_PAST_WAVE): 4 stages, one buffer
    one = hopper.choose_config(624, 6064, 1000, kind, 132, **row_major_flags(624, 6064, 1000))
    assert (one.tile_n, one.epilogue, one.stages, one.cluster_size) == (256, "tma", 4, 1)
    if hopper.device_sms() == 132:
        _check(624, 6064, 1000, kind, None, seed=9)
        assert [(c.stages, c.out_buffers) for c in launched] == [(4, 1)]
        launched.clear()
    monkeypatch.setattr(hopper_heuristic, "TMA_BUFFERS", None)
    _check(m, n, k, kind, None, seed=8)
    assert [(c.stages, c.out_buffers) for c in launched] == [(4, 1)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,copied,width", [(8200, 288, 2641, True, 144), (6000, 336, 4096, False, 176),
                                                 (5000, 416, 4096, False, 144), (6000, 416, 2048, False, 224),
                                                 (3000, 304, 2048, False, 128)])
def test_exact_width_where_b_is_read_k_major(kind, m, n, k, copied, width, monkeypatch, k_major_copies, launched):
    """Where ``gemm_parts`` picks the config and reads B K-major (B column-major, or the copy of a
    narrow row-major B), one CTA per tile: the narrowest exact width with as many tile columns,
    and the right product (poisoned output, C read on one run); with the rule off, the config's
    own width, and the same product."""
    if hopper.device_sms() != 132:
        pytest.skip("the shapes are picked where the heuristic puts one CTA per tile on 132 SMs")
    _check(m, n, k, kind, None, trans_b=not copied, beta=0.5 if n == 336 else 0.0, seed=m + n)
    assert [c.tile_n for c in launched] == [width] and len(k_major_copies) == int(copied)
    launched.clear()
    monkeypatch.setattr(hopper_heuristic, "EXACT_WIDTHS", None)
    _check(m, n, k, kind, None, trans_b=not copied, seed=m + n + 1)
    assert len(launched) == 1 and launched[0].tile_n % 32 == 0


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,copied,width,policy", [(12000, 280, 2100, True, 288, "static"),
                                                        (16384, 300, 4096, False, 320, "static"),
                                                        (8088, 544, 2048, True, 288, "static"),
                                                        (16384, 368, 4096, True, 384, "static"),
                                                        (12400, 340, 4096, False, 384, "streamk")])
def test_wide_tile_where_b_is_read_k_major(kind, m, n, k, copied, width, policy, monkeypatch, k_major_copies,
                                           launched):
    """Where ``gemm_parts`` picks the config and reads B K-major (B column-major, or the copy of a
    narrow row-major B) and wide tiles fill most of one wave: tiles of that width, static from 0.75
    of the wave or below K of WIDE_SK_MIN_K, else stream-K, and the right product (poisoned
    output, C read on one run); with the rule off, at most 256 wide, the same product."""
    if hopper.device_sms() != 132:
        pytest.skip("the shapes are picked where wide tiles fill 0.7 of a wave on 132 SMs")
    beta = 0.0 if copied else 0.5  # C read, and B^T A^T ruled out (swap_pays needs beta == 0)
    _check(m, n, k, kind, None, trans_b=not copied, beta=beta, seed=m + n)
    assert [(c.tile_n, c.policy) for c in launched] == [(width, policy)] and len(k_major_copies) == int(copied)
    launched.clear()
    monkeypatch.setattr(hopper_heuristic, "WIDE_TILES", None)
    _check(m, n, k, kind, None, trans_b=not copied, beta=beta, seed=m + n + 1)
    assert len(launched) == 1 and launched[0].tile_n <= 256


def test_wide_tile_rule_on_the_cpu():
    """``wide_tile``'s limits, without a GPU: fewer tile columns than 256-wide tiles, one wave
    filled to 0.7, K (and stream-K only from WIDE_SK_MIN_K), clusters and a row-major B left alone."""
    cfg = HopperConfig(input="bfloat16", tile_n=192, stages=4, epilogue="staged", policy="streamk")
    assert hopper_heuristic.wide_tile(cfg, 16384, 384, 4096, 132).tile_n == 384  # 128 tiles: 0.97 of a wave
    assert hopper_heuristic.wide_tile(cfg, 16384, 384, 4096, 132).policy == "static"
    assert hopper_heuristic.wide_tile(cfg, 12672, 384, 4096, 132).policy == "static"  # 99 tiles: 0.75
    assert hopper_heuristic.wide_tile(cfg, 12544, 384, 4096, 132).policy == "streamk"  # 98 tiles: 0.742
    assert hopper_heuristic.wide_tile(cfg, 11904, 300, 4096, 132).policy == "streamk"  # 93 tiles: 0.70
    assert hopper_heuristic.wide_tile(cfg, 11904, 300, 4095, 132).policy == "static"  # K below WIDE_SK_MIN_K
    assert hopper_heuristic.wide_tile(cfg, 16384, 385, 4096, 132) == cfg  # 385 columns: two tiles either way
    assert hopper_heuristic.wide_tile(cfg, 16384, 256, 4096, 132) == cfg  # one 256-wide tile column already
    assert hopper_heuristic.wide_tile(cfg, 11000, 300, 4096, 132) == cfg  # 86 tiles: 0.65 of a wave
    assert hopper_heuristic.wide_tile(cfg, 11904, 300, 4096, 132).tile_n == 320  # 93 tiles: 0.70
    assert hopper_heuristic.wide_tile(cfg, 16384, 300, 2047, 132) == cfg  # short K
    assert hopper_heuristic.wide_tile(cfg, 16384, 1000, 4096, 132) == cfg  # past WIDE_MAX_N
    assert hopper_heuristic.wide_tile(cfg.replace(cluster_m=2), 16384, 300, 4096, 132) == cfg.replace(cluster_m=2)
    assert hopper_heuristic.wide_tile(cfg.replace(b_k_major=False), 16384, 300, 4096, 132).tile_n == 192
    assert hopper_heuristic.wide_tile(cfg, 8400, 700, 4096, 132).tile_n == 384  # 66 x 2 tiles: one wave
    assert hopper_heuristic.wide_tile(cfg, 9000, 700, 4096, 132) == cfg  # 71 x 2 tiles: past one wave
    assert hopper_heuristic.wide_tile(cfg, 16800, 700, 4096, 132) == cfg  # 264: two whole waves (not measured)
    assert hopper_heuristic.k_major_pick(cfg, 16384, 300, 4096, 132).tile_n == 320

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_wide_tile_in_the_transposed_product(dtype, monkeypatch):
    """A narrow M that ``gemm_parts`` runs as B^T A^T: over a row-major A (the transposed product's
    B, read K-major) its tiles span M (``SWAP_WIDE_TILES``, columns epilogue, three stages; 288
    wide on four, 48 columns staged at a time, ``SWAP_WIDE_CHUNKED``) where K reaches the width's
    ``SWAP_WIDE_MIN_K``; over a column-major A, or with the rule off, not."""
    def swapped(m, n, k, a_strides):
        return swap_pick(m, n, k, dtype, a_strides)[1]

    for (m, n, k), width, policy in (((304, 14568, 6256), 320, "static"), ((544, 8088, 5824), 288, "static"),
                                     ((288, 15024, 15168), 288, "static"),  # 114, 128, 118 tiles
                                     ((264, 11816, 13040), 288, "streamk")):  # 93: 0.70 of a wave
        cfg = swapped(m, n, k, (2 * k, 2))
        chunked = (4, 48) if width == 288 else (3, 0)
        assert (cfg.tile_n, cfg.stages, cfg.out_cols, cfg.epilogue, cfg.policy) == (width, *chunked, "columns",
                                                                                    policy), (m, n, k)
        assert cfg.smem_bytes <= hopper_config.SMEM_LIMIT
        assert swapped(m, n, k, (2, 2 * m)).tile_n <= 256  # column-major A: its transpose is MN-major
    assert swapped(304, 14568, 4096, (2 * 4096, 2)).tile_n <= 256  # 320 wide from 65 k-steps
    assert swapped(304, 14568, 4160, (2 * 4160, 2)).tile_n == 320
    assert swapped(264, 14568, 2112, (2 * 2112, 2)).tile_n == 288  # 288 wide from 32 k-steps
    monkeypatch.setitem(hopper_heuristic.SWAP_WIDE_MIN_K, 288, 2176)
    assert swapped(264, 14568, 2112, (2 * 2112, 2)).tile_n <= 256
    assert swapped(368, 13584, 5000, (2 * 5000, 2)) is None  # 384 wide: not transposed, as before
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CHUNKED", ())
    assert (swapped(544, 8088, 5824, (2 * 5824, 2)).stages, swapped(544, 8088, 5824, (2 * 5824, 2)).out_cols) == (3, 0)
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_TILES", None)
    assert swapped(304, 14568, 6256, (2 * 6256, 2)).tile_n <= 256


def test_wide_tile_caches_follow_the_constants(monkeypatch):
    """``k_major_pick`` and the transposed product's config are cached; a changed ``wide_tile``
    constant is not answered from those caches (the benchmarks' ``--prior`` compares both)."""
    cfg = HopperConfig(input="float16", tile_n=160, stages=4, epilogue="staged", policy="streamk")
    a, b = FakeArray((264, 13048), (2 * 13048, 2)), FakeArray((13048, 11816), (2 * 11816, 2))
    out = FakeArray((264, 11816), (2 * 11816, 2))

    def picks():
        direct = hopper.choose_config(264, 11816, 13048, "float16", 132, **hopper.rows_flags([a], [b]))
        swapped = hopper_heuristic._swap_config([a], [b], direct, out, 264, 11816, 13048, "float16", 132, False)
        return hopper_heuristic.k_major_pick(cfg, 12032, 280, 8192, 132).policy, (swapped.tile_n, swapped.policy,
                                                                          swapped.cluster_m)
    assert picks() == ("streamk", (288, "streamk", 2))  # 94 and 93 tiles: 0.71 and 0.70 of a wave
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CLUSTER_M", 1)
    assert picks() == ("streamk", (288, "streamk", 1))
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CLUSTER_M", 2)
    a, b = FakeArray((264, 13040), (2 * 13040, 2)), FakeArray((13040, 11816), (2 * 11816, 2))  # on sectors
    assert picks() == ("streamk", (288, "streamk", 1))
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CLUSTER_OFF_SECTORS", False)
    assert picks() == ("streamk", (288, "streamk", 2))
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CLUSTER_M", 1)
    monkeypatch.setattr(hopper_heuristic, "WIDE_SK_MIN_K", 13049)  # K of both products below it: static
    assert picks() == ("static", (288, "static", 1))
    monkeypatch.setattr(hopper_heuristic, "WIDE_SK_MIN_K", 4096)
    assert picks() == ("streamk", (288, "streamk", 1))
    monkeypatch.setattr(hopper_heuristic, "WIDE_SK_FILL", 0)
    assert picks() == ("static", (288, "static", 1))
    monkeypatch.setattr(hopper_heuristic, "WIDE_FILL", 0.8)
    assert picks()[0] == "streamk" and picks()[1][0] <= 256  # not wide: the config's own policy


def test_wide_tile_rule_off(monkeypatch):
    cfg = HopperConfig(input="bfloat16", tile_n=192, stages=4, epilogue="staged", policy="streamk")
    monkeypatch.setattr(hopper_heuristic, "WIDE_TILES", None)
    assert hopper_heuristic.k_major_pick(cfg, 16384, 300, 4096, 132).tile_n == 176  # two tile columns: an exact width


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,width", [(304, 14568, 4160, 320), (544, 8088, 4160, 288), (280, 12000, 5000, 288)])
def test_wide_tile_where_gemm_runs_the_transpose(kind, m, n, k, width, monkeypatch):
    """A narrow M over a row-major A, which ``gemm_parts`` runs as B^T A^T into the output's
    transposed view: wide tiles with the columns epilogue, and the right product (poisoned output);
    on 2 x 1 clusters where A's rows are off 32-byte sectors (K = 5000), else on single CTAs; the
    other of the two (``SWAP_WIDE_CLUSTER_M = 1``, ``SWAP_WIDE_CLUSTER_OFF_SECTORS = False``) the
    same; with ``SWAP_WIDE_TILES`` off, at most 256 wide, the same product."""
    if hopper.device_sms() != 132:
        pytest.skip("the shapes are picked where wide tiles fill 0.7 of a wave on 132 SMs")
    real, taken = hopper_heuristic._swap_config, []
    monkeypatch.setattr(hopper_heuristic, "_swap_config", lambda *a, **kw: taken.append(real(*a, **kw)) or taken[-1])
    clusters = 2 if k % 16 else 1
    _check(m, n, k, kind, None, seed=m + n)
    assert {(c.tile_n, c.epilogue, c.cluster_m) for c in taken} == {(width, "columns", clusters)}
    taken.clear()
    if clusters == 2:
        monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CLUSTER_M", 1)
    else:
        monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CLUSTER_OFF_SECTORS", False)
    _check(m, n, k, kind, None, seed=m + n + 2)
    assert {(c.tile_n, c.epilogue, c.cluster_m) for c in taken} == {(width, "columns", 3 - clusters)}
    taken.clear()
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_TILES", None)
    _check(m, n, k, kind, None, seed=m + n + 1)
    assert taken and all(c.tile_n <= 256 and c.epilogue == "columns" for c in taken)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(272, 12936, 1392), (265, 12056, 1704)])
def test_wide_tile_where_only_it_makes_the_transpose_pay(kind, m, n, k, monkeypatch):
    """A narrow M at short K, where ``gemm_parts`` runs B^T A^T only because its 288-wide tiles pad
    M less (``_wide_swap_pays``): those tiles, static, with the columns epilogue (on 2 x 1 clusters
    where A's rows are off 32-byte sectors, K = 1704), and the right product (poisoned output);
    with ``SWAP_WIDE_PRICED`` off the direct product, the same."""
    real, taken = hopper_heuristic._swap_config, []
    monkeypatch.setattr(hopper_heuristic, "_swap_config", lambda *a, **kw: taken.append(real(*a, **kw)) or taken[-1])
    _check(m, n, k, kind, None, seed=m + k)
    if hopper.device_sms() == 132:  # the shapes are picked where 288-wide tiles fill 0.7 of a wave
        assert {(c.tile_n, c.policy, c.epilogue, c.cluster_m) for c in taken} == {
            (288, "static", "columns", 2 if k % 16 else 1)}
    taken.clear()
    monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_PRICED", False)
    _check(m, n, k, kind, None, seed=m + k + 1)
    if hopper.device_sms() == 132:
        assert taken and set(taken) == {None}


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(280, 12000, 5000), (544, 8088, 4160)])
def test_transposed_wide_tile_columns_in_chunks(kind, m, n, k, monkeypatch):
    """The transposed product's 288-wide tiles on four stages with the columns epilogue staging 48
    columns at a time (``SWAP_WIDE_CHUNKED``), and with the rule off on three stages and the whole
    144 columns of a warpgroup at once: the right product both ways, every element written
    (poisoned output), on 2 x 1 clusters (K = 5000) and on single CTAs."""
    real, taken = hopper_heuristic._swap_config, []
    monkeypatch.setattr(hopper_heuristic, "_swap_config", lambda *a, **kw: taken.append(real(*a, **kw)) or taken[-1])
    for seed, chunked in ((m + k, (4, 48)), (m + k + 1, (3, 0))):
        if not chunked[1]:
            monkeypatch.setattr(hopper_heuristic, "SWAP_WIDE_CHUNKED", ())
        taken.clear()
        _check(m, n, k, kind, None, seed=seed)
        if hopper.device_sms() == 132:  # the shapes are picked where 288-wide tiles fill 0.7 of a wave
            assert {(c.tile_n, c.stages, c.out_cols) for c in taken} == {(288, *chunked)}


def _random_parts(m, n, ks, seed):
    """float16 K parts (M x K_p of A, K_p x N of B, one pair per K_p of ``ks``) and their summed
    product in float64."""
    rng = np.random.default_rng(seed)
    a_parts, b_parts, ref = [], [], 0
    for k in ks:
        a, a64 = rand_operand((m, k), "float16", rng)
        b, b64 = rand_operand((k, n), "float16", rng)
        a_parts.append(a), b_parts.append(b)
        ref = ref + a64 @ b64
    return a_parts, b_parts, ref


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_a,beta", [(8200, 304, 2641, False, 0.0),
                                               (8192, 336, 2101, False, 0.5),
                                               (8200, 288, 3001, True, 0.0),
                                               (5624, 432, 2200, False, 0.0),
                                               (12560, 280, 2312, False, 0.5),
                                               (7344, 600, 4312, False, 0.0)])
def test_b_copied_k_major_matches_float64_reference(kind, m, n, k, trans_a, beta, monkeypatch, k_major_copies):
    """Where ``copies_b_k_major`` holds (a row-major B with rows off 128 bytes, few columns, many
    rows, one CTA per tile on the H200's 132 SMs, or 2-CTA clusters where the copy's tiles are
    wide: 12560 x 280 on 288, 7344 x 600 on 2 x 320 instead of the clusters' two launches of
    ``tail_split``), ``gemm`` copies B K-major and multiplies on the copy: the product's
    result, every element written (poisoned output), A row- or column-major, with and without C;
    with the rule off the same product stays in place."""
    if hopper.device_sms() != 132:
        pytest.skip("the shapes are picked where the copy holds on 132 SMs")
    _check(m, n, k, kind, None, trans_a=trans_a, beta=beta, alpha=0.75, seed=m + k)
    assert k_major_copies == [(k, n)]
    k_major_copies.clear()
    monkeypatch.setattr(hopper_heuristic, "B_K_MAJOR", None)
    _check(m, n, k, kind, None, trans_a=trans_a, beta=beta, seed=m + k + 1)
    assert not k_major_copies


@pytest.mark.gpu
@needs_sm90
def test_b_copied_k_major_in_parts(k_major_copies):
    """``gemm_parts`` copies each K part of such a B K-major: the parts still add up."""
    m, n, ks = 8200, 304, (900, 1201)
    a_parts, b_parts, ref = _random_parts(m, n, ks, seed=11)
    cfg = hopper.choose_config(m, n, sum(ks), "float16", hopper.device_sms(), **hopper.rows_flags(a_parts, b_parts))
    if not hopper_heuristic.copies_b_k_major(b_parts, m, n, cfg, hopper.device_sms(),
                                             hopper.rows_flags(a_parts, b_parts)["a_rows_off_128"]):
        pytest.skip(f"the heuristic's {cfg} on this GPU: no copy")
    out = poisoned((m, n), "float16")
    hopper.gemm_parts(a_parts, b_parts, out=out)
    assert k_major_copies == [(k, n) for k in ks]
    check_product(as_float64(out), ref, BOUNDS["float16"], f"{m}x{n} parts {ks}")


@pytest.mark.gpu
@needs_sm90
def test_strided_output_and_float32_result():
    rng = np.random.default_rng(6)
    a, a64 = rand_operand((250, 300), "bfloat16", rng)
    b, b64 = rand_operand((300, 190), "bfloat16", rng)
    out = cp.full((190, 250), cp.nan, dtype=cp.float32).T  # column-major result
    hopper.gemm(a, b, out=out, as_dtype="bfloat16")
    err = float(cp.linalg.norm(out - a64 @ b64) / cp.linalg.norm(a64 @ b64))
    assert err < 1e-4  # float32 result: bf16 products are exact, only the accumulation rounds


@pytest.mark.gpu
@pytest.mark.skipif(cp is not None, reason="only where the GPU is not sm_90")
def test_other_gpus_are_refused_with_a_pointer_to_the_portable_kernel():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no GPU")
    except Exception:
        pytest.skip("no CuPy")
    assert not hopper.supported()
    with pytest.raises(RuntimeError, match="mgemm.kernels.gemm"):
        hopper.get_kernel(HopperConfig())


# --- pingpong consumers and register splits (GPU) --------------------------------------------------

# (kind, tile_m, tile_n, stages): one warpgroup per tile, 64 or 128 rows (two m64 wgmmas per k16).
PINGPONG = [("bfloat16", 64, 256, 4), ("float16", 128, 128, 4), ("tf32", 128, 64, 3)]
# Few SMs: many units per CTA, odd and even counts per warpgroup, the stage ring and the unit slots
# wrapped many times; stream-K splits across the two warpgroups of one CTA.
BUDGETS = [(1100, 1300, 900, 3), (700, 2100, 333, 7), (520, 700, 4100, 5), (2000, 1000, 200, None)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("kind,tile_m,tile_n,stages", PINGPONG)
def test_pingpong_matches_float64_reference(kind, tile_m, tile_n, stages, policy):
    """Units alternate between the consumer warpgroups (named-barrier math turns): edge shapes,
    then several SM budgets.  A hang here is a turn or ring-skip bug (the test times out)."""
    cfg = HopperConfig(input=kind, tile_m=tile_m, tile_n=tile_n, stages=stages, policy=policy, pingpong=True)
    for i, (m, n, k) in enumerate(SHAPES):
        _check(m, n, k, kind, cfg, seed=60 + i, beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)
    for j, (m, n, k, sms) in enumerate(BUDGETS):
        _check(m, n, k, kind, cfg, sms=sms, seed=70 + j, beta=0.5 if j % 2 else 0.0)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("tile_m,tile_n,policy", [(128, 128, "streamk"), (64, 256, "static")])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_pingpong_every_operand_layout(trans_a, trans_b, tile_m, tile_n, policy):
    """MN-major A (tile_m / 64 boxes, one per m64 wgmma) and B with pingpong tiles."""
    cfg = HopperConfig(input="float16", tile_m=tile_m, tile_n=tile_n, stages=4, policy=policy, pingpong=True)
    for i, (m, n, k) in enumerate(SHAPES[1:] + [(384, 768, 1024), (136, 520, 72)]):
        _check(m, n, k, "float16", cfg, trans_a=trans_a, trans_b=trans_b, seed=80 + i,
               beta=0.5 if i % 2 else 0.0, sms=5 if i % 3 == 0 else None)


@pytest.mark.gpu
@needs_sm90
def test_pingpong_k_zero_and_streamk_reproducible():
    for policy in ("static", "streamk"):
        cfg = HopperConfig(input="bfloat16", tile_m=64, tile_n=256, policy=policy, pingpong=True)
        _check(37, 41, 0, "bfloat16", cfg, beta=2.0)
        _check(300, 41, 0, "bfloat16", cfg, beta=0.0, sms=3)
    rng = np.random.default_rng(9)
    a, _ = rand_operand((333, 4096), "bfloat16", rng)
    b, _ = rand_operand((4096, 517), "bfloat16", rng)
    cfg = HopperConfig(input="bfloat16", tile_m=128, tile_n=128, policy="streamk", pingpong=True)
    first = hopper.gemm(a, b, config=cfg, as_dtype="bfloat16", out_dtype="float32", sms=11)
    for _ in range(3):
        again = hopper.gemm(a, b, config=cfg, as_dtype="bfloat16", out_dtype="float32", sms=11)
        assert bool((again == first).all())


# --- cooperative 64-row tiles split along N (GPU) -----------------------------------------------------

# (kind, tile_n, stages): both consumer warpgroups on one 64-row tile, each half its columns.
SPLIT_N = [("float16", 256, 4), ("bfloat16", 128, 8), ("tf32", 256, 4)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("kind,tile_n,stages", SPLIT_N)
def test_split_n_matches_float64_reference(kind, tile_n, stages, policy):
    """Each warpgroup's half of B and of the tile's columns (wgmma, epilogue, stream-K partials):
    edge shapes with alpha and beta, then several SM budgets, on the paired and staged epilogues."""
    cfg = HopperConfig(input=kind, tile_m=64, tile_n=tile_n, stages=stages, policy=policy)
    for i, (m, n, k) in enumerate(SHAPES):
        _check(m, n, k, kind, cfg, seed=90 + i, beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)
    for j, (m, n, k, sms) in enumerate(BUDGETS):
        _check(m, n, k, kind, cfg.replace(epilogue="staged" if j % 2 else "pair"), sms=sms, seed=100 + j)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("tile_n,policy", [(256, "streamk"), (128, "static")])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_split_n_every_operand_layout(trans_a, trans_b, tile_n, policy):
    """MN-major A (one 64-wide box) and B (each warpgroup's boxes) with split tiles."""
    cfg = HopperConfig(input="float16", tile_m=64, tile_n=tile_n, stages=4, policy=policy, epilogue="staged")
    for i, (m, n, k) in enumerate(SHAPES[1:] + [(384, 768, 1024), (136, 520, 72)]):
        _check(m, n, k, "float16", cfg, trans_a=trans_a, trans_b=trans_b, seed=110 + i,
               beta=0.5 if i % 2 else 0.0, sms=5 if i % 3 == 0 else None)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("cm,cn,policy,b_k_major", [(2, 1, "static", False), (2, 2, "streamk", True),
                                                    (4, 1, "per_tile", False), (1, 2, "streamk", True)])
def test_split_n_in_clusters(cm, cn, policy, b_k_major):
    """Split tiles in clusters: B multicast down a tile column (each CTA its share of the 256-wide
    B), A (64 K-major rows: 32 each) along a tile row; edge shapes, a few CTAs."""
    cfg = HopperConfig(input="bfloat16", tile_m=64, tile_n=256, stages=4, policy=policy, cluster_m=cm,
                       cluster_n=cn, b_k_major=b_k_major, epilogue="staged")
    for i, (m, n, k) in enumerate(SHAPES[1:] + [(384, 768, 1024), (1000, 1300, 900)]):
        _check(m, n, k, "bfloat16", cfg, seed=130 + i, beta=0.5 if i % 2 else 0.0, sms=8 if i % 3 == 0 else None)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,tile_m,tile_n,epilogue,policy,cn", [("float16", 64, 256, "tma", "streamk", 1),
                                                                  ("bfloat16", 64, 256, "staged", "static", 2),
                                                                  ("float16", 64, 256, "tma", "streamk", 2),
                                                                  ("bfloat16", 128, 256, "tma", "streamk", 1)])
def test_five_stages_through_128_byte_output_chunks(kind, tile_m, tile_n, epilogue, policy, cn):
    """``out_cols=64`` on the staged and TMA epilogues: each warpgroup's row out in 128-byte chunks,
    room for a fifth ring stage of 64 x 256 (two chunks a row; four of a 128 x 256 tile's); edge
    shapes, rows off 16 bytes (the paired fallback), alpha and beta, a few CTAs."""
    cfg = HopperConfig(input=kind, tile_m=tile_m, tile_n=tile_n, stages=5 if tile_m == 64 else 4, policy=policy,
                       epilogue=epilogue, out_cols=64, cluster_n=cn)
    for i, (m, n, k) in enumerate(SHAPES[1:] + [(384, 768, 1024), (1000, 1304, 900), (1024, 2112, 1000)]):
        _check(m, n, k, kind, cfg, seed=150 + i, beta=0.5 if i % 4 == 3 else 0.0, alpha=1.0 if i % 3 else 0.75,
               sms=7 if i % 5 == 2 else None)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,tile_n", [("bfloat16", 256), ("float16", 128)])
def test_split_n_spread_fix_up_repeats_and_records(kind, tile_n):
    """The spread fix-up's row-major partials of a split tile; the same bits every run; the work
    units the mirror predicts."""
    cfg = HopperConfig(input=kind, tile_m=64, tile_n=tile_n, policy="streamk", sk_reduce="spread",
                       epilogue="staged")
    for i, (m, n, k, sms) in enumerate([(256, 512, 16384, None), (333, 517, 4096, 20), (130, 700, 3000, 9)]):
        _check(m, n, k, kind, cfg, beta=0.5 if i == 1 else 0.0, alpha=0.75, sms=sms, seed=120 + i)
    rng = np.random.default_rng(7)
    a, _ = rand_operand((200, 6000), kind, rng)
    b, _ = rand_operand((6000, 700), kind, rng)
    as_dtype = "bfloat16" if kind == "bfloat16" else None
    first = hopper.gemm(a, b, config=cfg, sms=13, as_dtype=as_dtype, out_dtype="float32")
    for _ in range(3):
        assert bool((hopper.gemm(a, b, config=cfg, sms=13, as_dtype=as_dtype, out_dtype="float32") == first).all())
    _, record = hopper.gemm(a, b, config=cfg, sms=13, as_dtype=as_dtype, debug=True)
    lp = hopper.launch_info(a.shape, b.shape, cfg.replace(record=True), sms=13)
    expect = schedule.assignment("streamk", lp.rows, lp.cols, lp.k_iters, lp.grid, sk_tiles=lp.sk_tiles)
    assert schedule.from_record(record.tolist(), lp.grid) == expect


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("pingpong", [False, True])
@pytest.mark.parametrize("policy", ["static", "streamk"])
def test_register_split_24_240(policy, pingpong):
    """setmaxnreg 24 / 240 (producer / consumers) computes what 40 / 232 does."""
    cfg = HopperConfig(input="bfloat16", tile_n=256, policy=policy, producer_regs=24, consumer_regs=240,
                       pingpong=pingpong, tile_m=64 if pingpong else 128)
    for i, (m, n, k) in enumerate([(257, 263, 129), (640, 520, 2050), (1100, 1300, 900)]):
        _check(m, n, k, "bfloat16", cfg, seed=90 + i, beta=0.5 if i % 2 else 0.0, sms=3 if i == 2 else None)


# --- overlapped epilogues (GPU) ----------------------------------------------------------------------

# (kind, tile_m, tile_n, stages, epilogue): the two accumulator sets at 64 (128 x 128, 64-row split
# tiles, tf32) and 96 (128 x 192) a thread, through each epilogue form.
OVERLAP = [("float16", 128, 128, 4, "tma"), ("bfloat16", 128, 192, 4, "staged"), ("tf32", 128, 128, 4, "pair"),
           ("float16", 64, 256, 4, "staged"), ("bfloat16", 128, 128, 6, "columns")]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", ["static", "dynamic", "per_tile"])
@pytest.mark.parametrize("kind,tile_m,tile_n,stages,epilogue", OVERLAP)
def test_overlap_matches_float64_reference(kind, tile_m, tile_n, stages, epilogue, policy):
    """Each tile's epilogue under the next unit's first wgmmas: edge shapes (K = 1, K below one
    k-iteration, one tile), then few SMs, so that every CTA holds and stores many tiles in turn
    (odd and even counts), beta != 0 (the paired epilogue with C) and alpha != 1."""
    cfg = HopperConfig(input=kind, tile_m=tile_m, tile_n=tile_n, stages=stages, policy=policy,
                       epilogue=epilogue, overlap=True)
    for i, (m, n, k) in enumerate(SHAPES):
        _check(m, n, k, kind, cfg, seed=200 + i, beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)
    for j, (m, n, k, sms) in enumerate(BUDGETS + [(4096, 2048, 256, None)]):
        _check(m, n, k, kind, cfg, sms=sms, seed=210 + j, beta=0.5 if j % 2 else 0.0, alpha=0.5 if j % 3 else 1.0)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_overlap_every_operand_layout_clusters_and_k_zero(trans_a, trans_b):
    """Both operand layouts, one CTA per tile and 2-CTA clusters, and K = 0 (every held tile stored
    as beta C)."""
    for i, cfg in enumerate([HopperConfig(input="float16", tile_n=128, stages=6, epilogue="tma", overlap=True),
                             HopperConfig(input="float16", tile_n=128, stages=6, epilogue="staged",
                                          cluster_m=2, overlap=True)]):
        for j, (m, n, k) in enumerate([(257, 263, 129), (1100, 1300, 900), (2000, 600, 64)]):
            _check(m, n, k, "float16", cfg, trans_a=trans_a, trans_b=trans_b, seed=220 + 3 * i + j,
                   beta=0.5 if j == 1 else 0.0, sms=4 if j == 1 else None)
        _check(300, 41, 0, "float16", cfg, beta=2.0, sms=3)
        _check(300, 260, 0, "float16", cfg, beta=0.0)


# --- two staging buffer sets for the TMA epilogue (GPU) ---------------------------------------------

# Outputs whose rows start 16-byte aligned (the bulk stores' condition), on few SMs: many tiles a
# CTA, odd and even counts.
OUT_BUFFER_BUDGETS = [(1100, 1304, 900, 3), (700, 2112, 333, 7), (520, 704, 4100, 5), (1500, 1024, 64, 2),
                      (2000, 1000, 200, None), (4096, 2048, 256, None)]
# (kind, tile_m, tile_n, stages, pingpong, cluster_m): two chunks a warpgroup row (256 16-bit or 128
# float32 columns), cooperative, pingpong and on 2-CTA clusters.
OUT_BUFFERS = [("float16", 128, 256, 3, False, 1), ("bfloat16", 128, 256, 3, False, 2),
               ("float16", 64, 256, 4, True, 1), ("tf32", 128, 128, 4, False, 1)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", schedule.POLICIES)
@pytest.mark.parametrize("kind,tile_m,tile_n,stages,pingpong,cluster_m", OUT_BUFFERS)
def test_out_buffers_match_float64_reference(kind, tile_m, tile_n, stages, pingpong, cluster_m, policy):
    """Odd chunks through a second staging buffer: edge shapes (K = 1, below one k-iteration, one
    tile), then few SMs, so that every CTA stores many tiles in turn while the previous chunk's
    bulk stores may still read the other buffer; beta != 0 (the paired epilogue, no bulk stores),
    alpha != 1, both B layouts (16-bit), K = 0."""
    if cluster_m > 1 and policy not in hopper_config.CLUSTER_POLICIES:
        pytest.skip(f"clusters run {hopper_config.CLUSTER_POLICIES}")
    cfg = HopperConfig(input=kind, tile_m=tile_m, tile_n=tile_n, stages=stages, pingpong=pingpong, policy=policy,
                       epilogue="tma", out_buffers=2, cluster_m=cluster_m)
    for i, (m, n, k) in enumerate(SHAPES):
        _check(m, n, k, kind, cfg, trans_b=bool(i % 2) and kind != "tf32", seed=300 + i,
               beta=0.5 if i % 3 == 1 else 0.0, alpha=1.0 if i % 3 else 0.75)
    for j, (m, n, k, sms) in enumerate(OUT_BUFFER_BUDGETS):
        _check(m, n, k, kind, cfg, sms=sms, seed=310 + j, beta=0.5 if j == 1 else 0.0, alpha=0.5 if j % 3 else 1.0)
    _check(300, 264, 0, kind, cfg, beta=0.0, sms=3)


# --- 2-CTA clusters with B multicast (GPU) -------------------------------------------------------

# (kind, tile_n, stages): the heuristic's two tiles and tf32.
CLUSTER = [("bfloat16", 256, 4), ("float16", 128, 6), ("tf32", 128, 4)]
# Odd and even tile-row counts (the second CTA of the last pair with no rows of A: 1, 257, 300,
# 640, 1100 rows), columns whose second half of B is wholly past N (263, 700 and 1300 with 256-wide
# tiles), and few clusters so every CTA goes round the ring and the unit slots many times.
CLUSTER_SHAPES = [(300, 700, 500), (385, 1300, 190), (129, 257, 64), (1000, 1500, 700)]
CLUSTER_BUDGETS = BUDGETS + [(1100, 1300, 900, 1), (650, 900, 1000, 2), (1500, 300, 600, 4)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", hopper_config.CLUSTER_POLICIES)
@pytest.mark.parametrize("kind,tile_n,stages", CLUSTER)
def test_cluster2_matches_float64_reference(kind, tile_n, stages, policy):
    """Two CTAs per cluster on vertically adjacent tiles, each multicasting half of B: edge shapes
    (odd tile-row counts) with both B layouts, then several SM budgets (1 to 3 clusters).  A hang
    here is a barrier-count or teardown bug (the test times out); NaNs are unwritten outputs."""
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy=policy, cluster_m=2)
    for i, (m, n, k) in enumerate(SHAPES + CLUSTER_SHAPES):
        for trans_b in ((False, True) if kind != "tf32" else (False,)):
            _check(m, n, k, kind, cfg, trans_b=trans_b, seed=100 + i,
                   beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)
    for j, (m, n, k, sms) in enumerate(CLUSTER_BUDGETS):
        _check(m, n, k, kind, cfg, sms=sms, seed=120 + j, beta=0.5 if j % 2 else 0.0)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("tile_n,policy", [(128, "static"), (256, "per_tile"), (256, "static")])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_cluster2_every_operand_layout(trans_a, trans_b, tile_n, policy):
    """A row- or column-major (MN-major A boxes wholly out of bounds on the rowless CTA), B
    K-major (half the rows per CTA) or MN-major (half the 64-wide boxes per CTA)."""
    cfg = HopperConfig(input="float16", tile_n=tile_n, stages=4, policy=policy, cluster_m=2)
    for i, (m, n, k) in enumerate(SHAPES[1:] + CLUSTER_SHAPES):
        _check(m, n, k, "float16", cfg, trans_a=trans_a, trans_b=trans_b, seed=140 + i,
               beta=0.5 if i % 2 else 0.0, sms=5 if i % 3 == 0 else None)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,tile_n,cm,cn,policy,sk_reduce", [
    ("float16", 160, 2, 1, "static", "owner"), ("bfloat16", 192, 2, 2, "streamk", "spread"),
    ("float16", 224, 4, 1, "per_tile", "owner"), ("tf32", 160, 2, 1, "static", "owner"),
    ("bfloat16", 160, 1, 2, "streamk", "owner"), ("float16", 192, 2, 1, "streamk", "owner")])
def test_clusters_odd_widths_with_k_major_b(kind, tile_n, cm, cn, policy, sk_reduce):
    """Tiles 160, 192 and 224 wide in clusters where B is K-major: each CTA loads and multicasts
    its share of the tile's rows of B^T (80, 96, 56 rows) into one contiguous run of rows; edge
    shapes (B's last rows past N in some CTAs' shares), A row- or column-major, few CTAs."""
    epilogue = "pair" if kind == "tf32" else "staged"
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=4, policy=policy, cluster_m=cm, cluster_n=cn,
                       sk_reduce=sk_reduce, epilogue=epilogue)
    for i, (m, n, k) in enumerate(SHAPES[1:] + CLUSTER_SHAPES + [(700, 1000, 3000)]):
        _check(m, n, k, kind, cfg, trans_b=True, trans_a=bool(i % 2) and kind != "tf32", seed=150 + i,
               beta=0.5 if i % 3 == 1 else 0.0, sms=6 if i % 4 == 0 else None)


# Exact widths over a K-major B: (kind, tile_n, stages, policy, sk_reduce, epilogue, cluster_m)
EXACT = [("float16", 144, 5, "static", "owner", "staged", 1), ("bfloat16", 176, 4, "streamk", "spread", "staged", 1),
         ("float16", 208, 4, "streamk", "owner", "pair", 1), ("bfloat16", 240, 3, "per_tile", "owner", "staged", 1),
         ("tf32", 144, 4, "dynamic", "owner", "pair", 1), ("float16", 176, 4, "static", "owner", "staged", 2),
         ("bfloat16", 144, 4, "streamk", "owner", "direct", 2), ("float16", 240, 3, "streamk", "spread", "staged", 1)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,tile_n,stages,policy,sk_reduce,epilogue,cm", EXACT,
                         ids=[f"{r[0]}-{r[1]}-{r[3]}-{r[5]}-c{r[6]}" for r in EXACT])
def test_exact_widths_with_k_major_b(kind, tile_n, stages, policy, sk_reduce, epilogue, cm):
    """Tiles 144, 176, 208 and 240 wide (odd multiples of 16) over a K-major B: wgmmas of those
    widths, B's ring holding just the tile's rows, the staged epilogue's whole rows, the stream-K
    fix-ups over such tiles, 2-CTA clusters; edge shapes, A row- or column-major, C read, few CTAs."""
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy=policy, sk_reduce=sk_reduce,
                       epilogue=epilogue, cluster_m=cm)
    for i, (m, n, k) in enumerate(SHAPES[1:] + [(700, 1000, 3000), (1500, 288, 2000), (2100, 432, 1030)]):
        _check(m, n, k, kind, cfg, trans_b=True, trans_a=bool(i % 2) and kind != "tf32", seed=170 + i,
               beta=0.5 if i % 3 == 1 else 0.0, sms=6 if i % 4 == 0 else None)


# Wide tiles over a K-major B: (kind, tile_n, stages, policy, epilogue, cluster_m)
WIDE = [("float16", 288, 4, "static", "pair", 1), ("bfloat16", 320, 3, "streamk", "staged", 1),
        ("float16", 384, 3, "per_tile", "staged", 1), ("tf32", 288, 3, "dynamic", "pair", 1),
        ("bfloat16", 288, 4, "streamk", "direct", 2), ("float16", 384, 3, "streamk", "staged", 2),
        ("bfloat16", 320, 4, "static", "pair", 4), ("float16", 288, 3, "streamk", "staged", 1)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind,tile_n,stages,policy,epilogue,cm", WIDE,
                         ids=[f"{r[0]}-{r[1]}-{r[3]}-{r[4]}-c{r[5]}" for r in WIDE])
def test_wide_tiles_with_k_major_b(kind, tile_n, stages, policy, epilogue, cm):
    """Tiles 288, 320 and 384 wide over a K-major B: each consumer warpgroup's two m64 blocks by its
    half of the columns, B's rows in two TMA boxes (or a cluster CTA's part in one), the staged
    epilogue's blocks one after the other, the owner fix-up over such tiles, clusters of 2 and 4 CTAs
    along M; edge shapes, A row- or column-major, C read, few CTAs."""
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy=policy, epilogue=epilogue, cluster_m=cm)
    for i, (m, n, k) in enumerate(SHAPES[1:] + [(700, 1000, 3000), (1500, 288, 2000), (2100, 600, 1030),
                                                (4111, 384, 4160)]):
        _check(m, n, k, kind, cfg, trans_b=True, trans_a=bool(i % 2) and kind != "tf32", seed=190 + i,
               beta=0.5 if i % 3 == 1 else 0.0, sms=6 if i % 4 == 0 else None)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("policy", ["static", "per_tile"])  # stream-K splits blocks, not tiles
def test_cluster2_bitwise_equals_one_cta_and_repeats(policy, trans_b):
    """Each tile is the same wgmmas over the same k order as without clusters: the float32 result
    equals the one-CTA kernel's bit for bit, on every one of several runs (a stage refilled too
    early would show up as a difference somewhere)."""
    rng = np.random.default_rng(11)
    a, _ = rand_operand((1411, 1000), "bfloat16", rng)
    b, _ = rand_operand((1000, 1700), "bfloat16", rng)
    if trans_b:
        b = cp.ascontiguousarray(b.T).T
    one = HopperConfig(input="bfloat16", tile_n=256, policy=policy)
    want = hopper.gemm(a, b, config=one, as_dtype="bfloat16", out_dtype="float32")
    for sms in (None, 6, 1, None):
        got = hopper.gemm(a, b, config=one.replace(cluster_m=2), as_dtype="bfloat16", out_dtype="float32",
                          sms=sms)
        assert bool((got == want).all()), (policy, trans_b, sms, int((got != want).sum()))


# --- stream-K over tile blocks and clusters (GPU) ---------------------------------------------------

def cluster_ids(rows):
    """Test ids of (kind, tile_n, stages, cluster_m, cluster_n) rows: kind-tile_n-MxN."""
    return [f"{k}-{t}-{cm}x{cn}" for k, t, _, cm, cn in rows]


# Few blocks and long K (each block split many ways: 256x256x65536's kind), blocks split one
# k-iteration each (fewer stream-K iterations than clusters), a partial last wave of blocks, tile
# rows and columns past the block grid, and K = 0.
SK_CLUSTERS = [("float16", 128, 6, 2, 2), ("bfloat16", 128, 6, 2, 1), ("float16", 256, 4, 4, 1),
               ("bfloat16", 256, 4, 1, 2), ("tf32", 128, 4, 2, 2), ("float16", 256, 4, 2, 1),
               ("bfloat16", 256, 4, 2, 2), ("float16", 64, 8, 1, 2), ("bfloat16", 64, 8, 1, 2)]
SK_BLOCK_SHAPES = [(256, 256, 8192), (384, 200, 5000), (256, 256, 128), (1000, 1500, 700), (129, 640, 3000),
                   (1, 300, 4096)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("sk_reduce", hopper_config.SK_REDUCES)
@pytest.mark.parametrize("kind,tile_n,stages,cm,cn", SK_CLUSTERS, ids=cluster_ids(SK_CLUSTERS))
def test_cluster_streamk_matches_float64_reference(kind, tile_n, stages, cm, cn, sk_reduce):
    """Stream-K over blocks of cluster_m x cluster_n tiles: every CTA of a cluster walks the same
    k-ranges of its own tile, each rank's partials in slots of its own.  A slot shared by two ranks
    or a partial added twice shows as a wrong element; a flag never set as a hang."""
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy="streamk", sk_reduce=sk_reduce,
                       cluster_m=cm, cluster_n=cn)
    for i, (m, n, k) in enumerate(SK_BLOCK_SHAPES):
        trans_b = cm == 4 and tile_n == 128 or (i % 2 == 1 and kind != "tf32")
        _check(m, n, k, kind, cfg, trans_b=trans_b, seed=300 + i, beta=0.5 if i % 2 else 0.0,
               alpha=1.0 if i % 3 else 0.75)
    for j, (m, n, k, sms) in enumerate([(256, 256, 4096, 4 * cm * cn), (500, 700, 2000, 3 * cm * cn)]):
        _check(m, n, k, kind, cfg, trans_b=cm == 4 and tile_n == 128, sms=sms, seed=320 + j)
    # more blocks than clusters: whole blocks first, then the split ones (sk_waves 1 and 0)
    for j, waves in enumerate((1, 0)):
        _check(1000, 1500, 700, kind, cfg.replace(sk_waves=waves), trans_b=cm == 4 and tile_n == 128,
               sms=5 * cm * cn, seed=330 + j, beta=0.5)
    _check(300, 41 * cn, 0, kind, cfg, beta=2.0)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("sk_reduce", hopper_config.SK_REDUCES)
@pytest.mark.parametrize("kind,tile_n,stages,cm,cn", [("float16", 128, 6, 1, 1), ("bfloat16", 256, 4, 1, 1),
                                                      ("float16", 128, 6, 2, 2), ("bfloat16", 128, 6, 1, 2),
                                                      ("tf32", 128, 4, 2, 1), ("float16", 64, 8, 1, 2)])
def test_streamk_sk_ways_matches_float64_reference(kind, tile_n, stages, cm, cn, sk_reduce):
    """Split-K (sk_ways): each tile (block) in equal k-slices, one CTA (cluster) a slice, every
    slice of every tile added once: ragged edges, beta, two and three ways, as many ways as the
    slots allow (40 asked), slices of one k-iteration, and the kernel's log equal to the mirror's."""
    cfg = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy="streamk", sk_reduce=sk_reduce,
                       cluster_m=cm, cluster_n=cn)
    for i, (m, n, k, ways) in enumerate([(896, 888, 6000, 2), (520, 1000, 4100, 3), (256, 256, 8192, 40),
                                         (300, 260, 192, 5)]):
        _check(m, n, k, kind, cfg.replace(sk_ways=ways), trans_b=i % 2 == 1 and kind != "tf32",
               seed=340 + i, beta=0.5 if i % 2 else 0.0)
    if cm * cn == 1:
        rng = np.random.default_rng(349)
        a, _ = rand_operand((520, 4100), kind, rng)
        b, _ = rand_operand((4100, 1000), kind, rng)
        ways = cfg.replace(sk_ways=3)
        _, record = hopper.gemm(a, b, config=ways, debug=True, allow_tf32=kind == "tf32",
                                as_dtype="bfloat16" if kind == "bfloat16" else None)
        lp = hopper.launch_info(a.shape, b.shape, ways.replace(record=True))
        assert lp.grid == 3 * lp.tiles
        expect = schedule.assignment("streamk", lp.rows, lp.cols, lp.k_iters, lp.grid, sk_tiles=lp.sk_tiles)
        assert schedule.from_record(record.tolist(), lp.grid) == expect


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_pingpong_sk_ways_matches_float64_reference(kind):
    """Split-K (sk_ways) on the thin pingpong tiles (64 x 64, one consumer warpgroup a tile, the
    owner fix-up): thin and ragged products, two to four ways, slices of one k-iteration."""
    cfg = HopperConfig(input=kind, tile_m=64, tile_n=64, stages=12, pingpong=True, policy="streamk")
    for i, (m, n, k, ways) in enumerate([(64, 2048, 6000, 4), (48, 3000, 4100, 2), (2000, 40, 5000, 3),
                                         (200, 300, 192, 4)]):
        _check(m, n, k, kind, cfg.replace(sk_ways=ways), trans_b=i % 2 == 1, seed=360 + i,
               beta=0.5 if i % 2 else 0.0)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("sk_reduce", hopper_config.SK_REDUCES)
def test_cluster_streamk_repeats_bitwise(sk_reduce):
    """The fix-ups add in a fixed order: the same bits on every run, 2 x 2 clusters of 128-wide
    tiles on 256x256x16384 (one block split over every cluster)."""
    rng = np.random.default_rng(13)
    a, _ = rand_operand((256, 16384), "float16", rng)
    b, _ = rand_operand((16384, 256), "float16", rng)
    cfg = HopperConfig(input="float16", tile_n=128, stages=6, policy="streamk", sk_reduce=sk_reduce,
                       cluster_m=2, cluster_n=2)
    want = hopper.gemm(a, b, config=cfg, out_dtype="float32")
    for _ in range(3):
        got = hopper.gemm(a, b, config=cfg, out_dtype="float32")
        assert bool((got == want).all()), int((got != want).sum())


# --- clusters of 4, and along N with A multicast (GPU) ----------------------------------------------

# (kind, tile_n, stages, cluster_m, cluster_n): B in quarters (K-major rows, MN-major boxes), 2 x 2
# blocks and pairs along N (A halves: K-major rows, MN-major boxes)
CLUSTER_BLOCKS = [("float16", 256, 4, 4, 1), ("bfloat16", 128, 6, 4, 1), ("float16", 128, 6, 2, 2),
                  ("bfloat16", 256, 4, 2, 2), ("float16", 256, 4, 1, 2), ("tf32", 128, 4, 2, 2),
                  ("bfloat16", 64, 8, 1, 2)]
# Tile rows and columns that are no multiple of the block (1, 3, 5 rows; 1, 3, 5, 6 columns of
# 256 and 128), tiles wholly past M and N, a block of one CTA's work, and few clusters.
BLOCK_SHAPES = [(300, 700, 500), (385, 1300, 190), (129, 257, 64), (1000, 1500, 700), (600, 650, 1111)]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", hopper_config.CLUSTER_POLICIES)
@pytest.mark.parametrize("kind,tile_n,stages,cm,cn", CLUSTER_BLOCKS, ids=cluster_ids(CLUSTER_BLOCKS))
def test_cluster_blocks_match_float64_reference(kind, tile_n, stages, cm, cn, policy):
    """cluster_m x cluster_n CTAs on a block of tiles, each multicasting its part of A along the
    tile row and of B down the tile column: edge shapes in every operand layout the config takes,
    then SM budgets of 1 to 3 clusters.  A hang is a barrier-count or teardown bug; NaNs are
    unwritten outputs."""
    base = HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy=policy, cluster_m=cm, cluster_n=cn)
    layouts = [(False, False)] if kind == "tf32" else [(False, False), (True, False), (False, True), (True, True)]
    for i, (m, n, k) in enumerate(SHAPES[1:] + BLOCK_SHAPES):
        trans_a, trans_b = layouts[i % len(layouts)]
        if cm == 4 and tile_n == 128 and not trans_b:  # a row-major B in quarters needs 256-wide tiles
            trans_b = True
        _check(m, n, k, kind, base, trans_a=trans_a, trans_b=trans_b, seed=200 + i,
               beta=0.5 if i % 2 else 0.0, alpha=1.0 if i % 3 else 0.75)
    for j, (m, n, k, sms) in enumerate(CLUSTER_BUDGETS):
        _check(m, n, k, kind, base, trans_b=cm == 4 and tile_n == 128, sms=4 * sms if sms else None,
               seed=220 + j, beta=0.5 if j % 2 else 0.0)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("cm,cn", [(4, 1), (2, 2), (1, 2)])
def test_cluster_blocks_bitwise_equal_one_cta(cm, cn):
    """The same wgmmas over the same k order as one CTA per tile: bit for bit, on several runs and
    SM budgets, both B layouts where the config takes them."""
    rng = np.random.default_rng(12)
    a, _ = rand_operand((1411, 1000), "bfloat16", rng)
    b, _ = rand_operand((1000, 1700), "bfloat16", rng)
    bt = cp.ascontiguousarray(b.T).T
    one = HopperConfig(input="bfloat16", tile_n=256)
    want = hopper.gemm(a, b, config=one, as_dtype="bfloat16", out_dtype="float32")
    for operand in (b, bt):
        for sms in (None, 12, 4, None):
            got = hopper.gemm(a, operand, config=one.replace(cluster_m=cm, cluster_n=cn), as_dtype="bfloat16",
                              out_dtype="float32", sms=sms)
            assert bool((got == want).all()), (cm, cn, sms, int((got != want).sum()))


@pytest.mark.gpu
@needs_sm90
def test_cluster2_k_zero_and_launch_plan():
    cfg = HopperConfig(input="bfloat16", tile_n=256, cluster_m=2)
    _check(37, 41, 0, "bfloat16", cfg, beta=2.0)
    _check(300, 41, 0, "bfloat16", cfg, beta=0.0, sms=3)
    lp = hopper.launch_info((1000, 700), (700, 3000), cfg)
    assert lp.grid % 2 == 0 and lp.grid <= hopper.device_sms()
    clusters = hopper.max_active_clusters(hopper.get_kernel(cfg), cfg)
    assert clusters is None or clusters >= 1
    with pytest.raises(ValueError, match="record"):
        a, _ = rand_operand((64, 64), "bfloat16", np.random.default_rng(0))
        hopper.gemm(a, a, config=cfg, as_dtype="bfloat16", debug=True)


# --- K in parts (gemm_parts: a block task's K chunks in one launch) --------------------------------

def test_k_parts_config_renders_and_is_checked():
    cfg = HopperConfig(input="float16", k_parts=4)
    assert "#define MGEMM_K_PARTS 4" in cfg.render()
    assert "#define MGEMM_K_PARTS 1" in HopperConfig().render()
    assert cfg.key() != cfg.replace(k_parts=1).key()
    assert "parts=4" in str(cfg) and "parts" not in str(HopperConfig())
    for bad in (0, hopper_config.MAX_K_PARTS + 1):
        with pytest.raises(ValueError, match="k_parts"):
            HopperConfig(k_parts=bad)


def test_gemm_parts_rejects_bad_parts_before_any_gpu_work():
    a, b = np.ones((4, 3), np.float16), np.ones((3, 5), np.float16)
    with pytest.raises(ValueError, match="as many A parts as B parts"):
        hopper.gemm_parts([a, a], [b])
    with pytest.raises(ValueError, match="as many A parts as B parts"):
        hopper.gemm_parts([], [])
    with pytest.raises(ValueError, match="at most"):
        hopper.gemm_parts([a] * (hopper_config.MAX_K_PARTS + 1), [b] * (hopper_config.MAX_K_PARTS + 1))
    with pytest.raises(ValueError, match=r"\(M, K_p\) @ \(K_p, N\)"):
        hopper.gemm_parts([a, np.ones((5, 3), np.float16)], [b, b])
    with pytest.raises(ValueError, match=r"\(M, K_p\) @ \(K_p, N\)"):
        hopper.gemm_parts([a, a], [b, np.ones((4, 5), np.float16)])
    with pytest.raises(TypeError, match="one dtype"):
        hopper.gemm_parts([a, a.astype(np.float32)], [b, b])


def _parts_check(kind, ks, m, n, cfg, *, trans_a=False, trans_b=False, beta=0.0, alpha=1.0,
                 seed=0, mixed=False):
    """``gemm_parts`` on fresh random K parts of ``ks`` against the float64 reference of the
    concatenated product, into a poisoned output.  ``mixed``: the first part's A transposed, so the
    parts' layouts differ (the K-major copy path)."""
    rng = np.random.default_rng(seed)
    a_parts, b_parts, a64, b64 = [], [], [], []
    for idx, k in enumerate(ks):
        ta = trans_a or (mixed and idx == 0)
        a, a_ref = rand_operand((k, m) if ta else (m, k), kind, rng)
        b, b_ref = rand_operand((n, k) if trans_b else (k, n), kind, rng)
        a_parts.append(a.T if ta else a)
        a64.append(a_ref.T if ta else a_ref)
        b_parts.append(b.T if trans_b else b)
        b64.append(b_ref.T if trans_b else b_ref)
    c, c64 = rand_operand((m, n), kind, rng)
    out = poisoned((m, n), kind)
    hopper.gemm_parts(a_parts, b_parts, c, alpha=alpha, beta=beta, out=out, config=cfg,
                      allow_tf32=kind == "tf32", as_dtype="bfloat16" if kind == "bfloat16" else None)
    ref = alpha * (cp.concatenate(a64, 1) @ cp.concatenate(b64, 0)) + (beta * c64 if beta else 0)
    check_product(as_float64(out), ref, BOUNDS[kind], f"{cfg} parts {ks} {m}x{n}")
    return a_parts, b_parts, out


# ragged parts: non-multiples of the 64 (32 for tf32) K step, a part of K = 1, an empty part
PARTS_KS = [[100, 64, 1, 300], [512, 512, 512], [7, 0, 129], [2000]]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("ks", PARTS_KS)
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_parts_matches_float64_reference(kind, ks):
    cfg = HopperConfig(input=kind, tile_n=128, stages=6, policy="static")
    _parts_check(kind, ks, 300, 257, cfg, beta=0.5, alpha=0.75)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("epilogue,policy", [("tma", "streamk"), ("staged", "dynamic"), ("pair", "static")])
def test_cupy_launch_path_matches_the_driver_launch(epilogue, policy, monkeypatch):
    """Where the driver library does not load through ctypes, CuPy launches the kernel with the
    same parameters: both paths write the same bits (three K parts, alpha and beta, each
    epilogue's parameter list), and each matches the float64 reference."""
    cfg = HopperConfig(input="bfloat16", tile_n=128, stages=4, policy=policy, epilogue=epilogue)
    args = ("bfloat16", [100, 64, 700], 300, 264, cfg)
    beta = 0.0 if epilogue == "tma" else 0.5  # the TMA store where it runs, C read elsewhere
    _, _, driver = _parts_check(*args, beta=beta, alpha=0.75, seed=3)
    hopper.gemm_parts([cp.zeros((8, 8), cp.uint16)], [cp.zeros((8, 8), cp.uint16)], as_dtype="bfloat16")
    assert hopper._DRIVER_LAUNCH[0] is not None, "cuLaunchKernel did not load through ctypes"
    monkeypatch.setattr(hopper, "_DRIVER_LAUNCH", [None])
    _, _, via_cupy = _parts_check(*args, beta=beta, alpha=0.75, seed=3)
    assert bool((driver == via_cupy).all())


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("policy", ["streamk", "dynamic", "per_tile"])
def test_gemm_parts_every_policy(policy):
    """Stream-K ranges cross part boundaries (few tiles, long K: every tile split)."""
    cfg = HopperConfig(input="float16", tile_n=128, stages=6, policy=policy)
    _parts_check("float16", [100, 64, 1, 3000], 300, 257, cfg, beta=0.5, alpha=0.75)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("trans_a,trans_b,mixed", [(False, False, False), (True, False, False),
                                                   (False, True, False), (True, True, False),
                                                   (False, False, True)])
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_gemm_parts_every_operand_layout(kind, trans_a, trans_b, mixed):
    _parts_check(kind, [192, 70, 256], 260, 390, None, trans_a=trans_a, trans_b=trans_b,
                 mixed=mixed)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("ks,m,n,split,single,seed", [
    ([20000, 8000, 40, 12000], 1000, 1000, (256, "spread", 2), True, 5),  # DEEP_SPLIT
    ([6000, 4000, 40, 2648], 1032, 1088, (192, "owner", 1), False, 7)])  # SPLIT_K_192
def test_gemm_parts_split_k(kind, ks, m, n, split, single, seed):
    """A block task's K chunks under the heuristic's split-K on wide tiles (DEEP_SPLIT: 128 x 256
    tiles, the spread fix-up, 2 x 1 clusters over B's rows off 128-byte lines; SPLIT_K_192: two
    CTAs a 128 x 192 tile, the owner fix-up): the slices cross the parts' boundaries; the
    heuristic's launch and the config given (``single``: on single CTAs)."""
    flags = hopper.rows_flags([cp.empty((m, k), cp.float16) for k in ks],
                              [cp.empty((k, n), cp.float16) for k in ks])
    cfg = hopper.choose_config(m, n, sum(ks), kind, hopper.device_sms(), **flags)
    if cfg.sk_ways == 0:  # sized for 132 SMs (H200, H100 SXM)
        pytest.skip(f"no split on {hopper.device_sms()} SMs: {cfg}")
    assert (cfg.tile_n, cfg.sk_reduce, cfg.cluster_m) == split
    _parts_check(kind, ks, m, n, None, beta=0.5, alpha=0.75, seed=seed)
    _parts_check(kind, ks, m, n, cfg.replace(cluster_m=1) if single else cfg, seed=seed + 1)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("cfg", [HopperConfig(input="float16", tile_n=256, policy="streamk",
                                              epilogue="staged"),
                                 HopperConfig(input="float16", tile_n=256, cluster_m=2)])
def test_gemm_parts_bitwise_equals_whole_panels(cfg):
    """Parts whose K are whole k-steps walk exactly the k-iterations of the concatenated panels:
    the same config gives the same bits, run after run (stream-K included)."""
    a_parts, b_parts, out = _parts_check("float16", [1024, 512, 2048, 64], 1100, 1300, cfg)
    whole = hopper.gemm(cp.concatenate(a_parts, 1), cp.concatenate(b_parts, 0), config=cfg)
    assert bool((whole == out).all())
    again = hopper.gemm_parts(a_parts, b_parts, config=cfg)
    assert bool((again == out).all())


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("nparts", [4, hopper_config.MAX_K_PARTS + 3])
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_persistent_engine_block_of_many_k_parts(nparts, out_dtype):
    """The engine's path for a block task: K chunks of one launch (more than MAX_K_PARTS: several
    launches, the later ones adding to the output), beta · C added in the first."""
    from mgemm.engines.persistent import PersistentEngine
    rng = np.random.default_rng(nparts)
    ks = [int(x) for x in rng.integers(1, 400, nparts)]
    a_parts = [rand_operand((333, k), "float16", rng) for k in ks]
    b_parts = [rand_operand((k, 222), "float16", rng) for k in ks]
    c, c64 = rand_operand((333, 222), "float16", rng)
    got = PersistentEngine().gemm([a for a, _ in a_parts], [b for b, _ in b_parts], alpha=1.5,
                                  beta=-0.5, c=c, out_dtype=out_dtype)
    ref = 1.5 * (cp.concatenate([r for _, r in a_parts], 1) @ cp.concatenate([r for _, r in b_parts], 0)) \
        - 0.5 * c64
    assert got.dtype == cp.dtype(out_dtype)
    err = float(cp.linalg.norm(as_float64(got) - ref)) / float(cp.linalg.norm(ref))
    assert err <= BOUNDS["float16"], err


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(288, 12968, 1800), (344, 13616, 4520)])
def test_rows_quad_three_tile_rows(kind, m, n, k, launched):
    """ROWS_QUAD on 132 SMs: three rows of tiles over B's rows off 128-byte lines (off 32-byte
    sectors on 12968 columns) on static 128 x 256 tiles and 2 x 2 clusters, whose fourth row of
    CTAs lies past M; every element written (poisoned output); beta != 0 too."""
    _check_one_launch(m, n, k, kind, launched, 31, tile_n=256, cluster_m=2, cluster_n=2, policy="static")
