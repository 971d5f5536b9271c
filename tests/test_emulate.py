"""Float32 on bfloat16 tensor cores (``emulate_fp32``): the split's reference, the schemes' error,
the option at every layer on CPU; the kernel and the engines on the GPU (marked ``gpu``)."""

from __future__ import annotations

import shutil
import subprocess

import dask
import dask.array as da
import numpy as np
import pytest

import mgemm
from mgemm import config, emulate
from conftest import assert_close, pinned_copies, random, rel_error


def _wide_range(rng, n):
    """Normal float32 values over most of the exponent range the split covers exactly."""
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * rng.uniform(1, 2, n) * np.exp2(rng.integers(-90, 120, n))).astype(np.float32)


def test_scheme_names_match_the_option():
    assert set(emulate.SCHEMES) == set(config.EMULATE_SCHEMES)
    assert config.EMULATE_DEFAULT in emulate.SCHEMES


def test_terms_are_the_schemes_products_smallest_first():
    six, nine = emulate.terms("bf16x6"), emulate.terms("bf16x9")
    assert sorted(six) == sorted((i, j) for i in range(3) for j in range(3) if i + j <= 2)
    assert sorted(nine) == sorted((i, j) for i in range(3) for j in range(3))
    for order in (six, nine):
        sizes = [i + j for i, j in order]  # piece i is below 2^-8i of the value
        assert sizes == sorted(sizes, reverse=True)
    with pytest.raises(ValueError, match="bf16x6"):
        emulate.terms("tf32x3")


def test_split_is_exact_and_pieces_are_bfloat16(rng):
    x = _wide_range(rng, 200_000)
    x[:4] = [0.0, -0.0, 1.0, np.float32(1 + 2.0 ** -23)]
    pieces, ok = emulate.split_numpy(x)
    assert ok
    values = [emulate.piece_values(p) for p in pieces]
    assert np.array_equal(values[0] + values[1] + values[2], x.astype(np.float64))
    # each piece is the rounded remainder: below half a bfloat16 ulp of the one before
    nz = x != 0
    assert np.all(np.abs(values[1][nz]) <= np.abs(values[0][nz]) * 2.0 ** -8)
    assert np.all(np.abs(values[2][nz]) <= np.abs(values[1][nz]) * 2.0 ** -8)
    import ml_dtypes  # p0 is x rounded to bfloat16, as ml_dtypes rounds it
    assert np.array_equal(pieces[0], x.astype(ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan, 3.4e38, 1e-32, 1e-36, 1e-40],
                         ids=["inf", "-inf", "nan", "rounds_to_inf", "below_2^-103", "tiny",
                              "subnormal"])
def test_split_flags_values_outside_its_range(rng, value):
    x = random(rng, (50,), "float32")
    pieces, ok = emulate.split_numpy(x)
    assert ok
    x[17] = value
    _, ok = emulate.split_numpy(x)
    assert not ok


def test_split_range_edges():
    edge = np.float32(2.0 ** -103)
    for value, ok in ((edge, True), (-edge, True), (np.nextafter(edge, np.float32(0)), False),
                      (np.float32(1e-30), True), (np.float32(3.38e38), True), (0.0, True)):
        assert emulate.split_numpy(np.array([value], np.float32))[1] == ok, value


@pytest.mark.parametrize("k", [64, 4096])
def test_scheme_error_is_below_float32_accumulation(rng, k):
    """The schemes' own error (piece products summed in float64): bf16x9 drops nothing, bf16x6
    three products below 2^-23·|a||b| each; both well below what float32 accumulation adds."""
    a, b = random(rng, (48, k), "float32"), random(rng, (k, 40), "float32")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    sgemm = rel_error(a @ b, ref)
    six = rel_error(emulate.product_numpy(a, b, "bf16x6"), ref)
    nine = rel_error(emulate.product_numpy(a, b, "bf16x9"), ref)
    assert nine < 1e-14
    assert 0 < six < 2.0 ** -23 and six < sgemm / 4
    with pytest.raises(ValueError, match="range"):
        emulate.product_numpy(np.array([[np.inf]], np.float32), b[:1], "bf16x6")


def test_option_at_every_layer(monkeypatch):
    assert config.resolve()["emulate_fp32"] == "off"
    assert config.resolve(emulate_fp32=True)["emulate_fp32"] == config.EMULATE_DEFAULT
    assert config.resolve(emulate_fp32="BF16X9")["emulate_fp32"] == "bf16x9"
    with dask.config.set({"mgemm.emulate_fp32": "on"}):
        assert config.resolve()["emulate_fp32"] == "bf16x6"
    with pytest.raises(ValueError, match="emulate_fp32"):
        config.resolve(emulate_fp32="fp16")
    with pytest.raises(ValueError, match="exclude each other"):
        config.resolve(emulate_fp32="on", allow_tf32=True)
    # the clash names where each came from: here a flag and MGEMM_EMULATE_FP32
    monkeypatch.setitem(config._FROM_ENV, "emulate_fp32", "on")
    with dask.config.set({"mgemm.emulate_fp32": "on"}):
        with pytest.raises(ValueError, match=r"allow_tf32 \(from the argument allow_tf32 "
                           r"\(--allow-tf32\)\) and emulate_fp32 \(from the environment "
                           r"variable MGEMM_EMULATE_FP32\) exclude each other"):
            config.resolve(allow_tf32=True)
    assert config.OPTIONS["emulate_fp32"].env == "MGEMM_EMULATE_FP32"


def test_cli_plan_rates_emulated_float32():
    from click.testing import CliRunner

    from mgemm.cli import main
    from mgemm.cluster import H200_EMULATED_FLOPS, H200_FLOPS, gpu_flops

    assert set(H200_EMULATED_FLOPS) == set(emulate.SCHEMES)
    assert gpu_flops({}, "float32", emulate="bf16x6") == H200_EMULATED_FLOPS["bf16x6"]
    assert gpu_flops({"sms": 66}, "float32", emulate="bf16x9") == H200_EMULATED_FLOPS["bf16x9"] / 2
    assert gpu_flops({}, "float64", emulate="bf16x6") == H200_FLOPS["float64"]  # float32 only
    args = ["plan", "--m", "8192", "--n", "8192", "--k", "8192", "--dtype", "float32", "--json"]
    exact = CliRunner().invoke(main, args)
    emulated = CliRunner().invoke(main, args + ["--emulate-fp32", "bf16x6"])
    assert exact.exit_code == 0 and emulated.exit_code == 0, (exact.output, emulated.output)
    bad = CliRunner().invoke(main, args + ["--emulate-fp32", "sometimes"])
    assert bad.exit_code != 0 and "emulate_fp32" in bad.output


def test_graph_carries_the_scheme_to_every_block_task(rng):
    a = da.from_array(random(rng, (64, 48), "float32"), chunks=32)
    b = da.from_array(random(rng, (48, 40), "float32"), chunks=(16, 20))
    out = mgemm.matmul(a, b, emulate_fp32="bf16x9")
    tasks = [t for t in dict(out.__dask_graph__()).values()
             if getattr(t, "func", None) is not None and t.func.__name__ == "_block_task"]
    assert tasks and all("bf16x9" in t.args for t in tasks)
    # NumPy chunks: the option leaves the product exact float32, bit for bit
    got = out.compute(scheduler="sync")
    same = mgemm.matmul(a, b).compute(scheduler="sync")
    assert np.array_equal(got, same)


def test_runs_on_hopper_workers_with_the_kernel_engines_only():
    h200 = {"model": "NVIDIA H200", "cc": "9.0"}
    a100 = {"model": "NVIDIA A100", "cc": "8.0"}
    assert emulate.runs_on([h200, h200]) and emulate.runs_on([h200], "persistent")
    assert not emulate.runs_on([h200, a100]) and not emulate.runs_on([h200, None])
    assert not emulate.runs_on([]) and not emulate.runs_on([h200], "cublas")


def test_bench_records_no_scheme_on_cpu_workers(client):
    from mgemm.bench import emulated_scheme

    on = {"emulate_fp32": "bf16x6", "engine": "auto"}
    assert emulated_scheme(client, "float32", on, gpu=False) == "off"
    assert emulated_scheme(client, "float32", on, gpu=True) == "off"  # no GPU on these workers
    assert emulated_scheme(client, "float64", on, gpu=True) == "off"


def test_bench_table_names_the_scheme():
    from mgemm.bench import Row, table

    rows = [Row("float32-64", "mgemm", 64, 64, 64, "float32", [1.0], 1.0, 1.0, 0.0, 1, "inproc",
                {"emulate_fp32": "bf16x6"}),
            Row("float32-64", "dask.array.matmul", 64, 64, 64, "float32", [2.0], 2.0, 0.5, 0.0, 1,
                "inproc", {})]
    text = table(rows)
    assert "mgemm (bf16x6)" in text and "2.00" in text


# --- GPU ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F"])
def test_split_kernel_matches_the_reference(cp, rng, order):
    x = _wide_range(rng, 300 * 257).reshape(300, 257)
    x = np.asfortranarray(x) if order == "F" else x
    flag = cp.zeros((), dtype=cp.int32)
    pieces = emulate.split_cupy(cp.asarray(x), flag)
    ref, ok = emulate.split_numpy(x)
    assert ok and int(flag.get()) == 0
    for got, want in zip(pieces, ref):
        assert got.flags.f_contiguous == (order == "F") and got.shape == x.shape
        assert np.array_equal(cp.asnumpy(got).view(np.uint16), want)
    for value in (np.inf, np.nan, 3.4e38, 1e-32, 1e-36, 1e-40):
        bad = x.copy()
        bad[123, 45] = value
        flag = cp.zeros((), dtype=cp.int32)
        emulate.split_cupy(cp.asarray(bad), flag)
        assert int(flag.get()) == 1, value


def _block(rng, cp, ks=(300, 1000, 17, 700), m=333, n=250):
    parts_a = [random(rng, (m, k), "float32") for k in ks]
    parts_b = [random(rng, (k, n), "float32") for k in ks]
    c = random(rng, (m, n), "float32")
    a_dev = [cp.asarray(x) for x in parts_a]
    a_dev[1] = cp.asarray(parts_a[1].T).T  # a column-major view
    ref = 0.5 * sum(x.astype(np.float64) @ y.astype(np.float64)
                    for x, y in zip(parts_a, parts_b)) + 2.0 * c
    return a_dev, [cp.asarray(x) for x in parts_b], cp.asarray(c), ref


@pytest.mark.gpu
@pytest.mark.parametrize("scheme", ["bf16x6", "bf16x9"])
@pytest.mark.parametrize("engine", ["cublas", "persistent", "auto-gpu"])
def test_emulated_block_against_float64(cp, rng, engine, scheme):
    """Four K parts (one A part column-major), alpha, beta and C, shapes off every tile size:
    within float32's bound and no worse than twice cuBLAS's exact float32 on the same inputs.
    Emulated with the persistent and auto engines on sm_90; exact (bit for bit) elsewhere."""
    from mgemm.engines import get

    a_dev, b_dev, c, ref = _block(rng, cp)
    out = emulate.gemm(get(engine), a_dev, b_dev, scheme, alpha=0.5, beta=2.0, c=c,
                       out_dtype="float32")
    assert out.dtype == np.float32 and out.shape == ref.shape
    got = cp.asnumpy(out)
    assert_close(got, ref, "float32")
    exact = get("cublas").gemm(a_dev, b_dev, alpha=0.5, beta=2.0, c=c, out_dtype="float32")
    assert rel_error(got, ref) <= 2 * rel_error(cp.asnumpy(exact), ref)
    if emulate.runs_emulated(get(engine)):
        assert not np.array_equal(got, cp.asnumpy(exact))  # it did not take the exact path
    else:
        same = get(engine).gemm(a_dev, b_dev, alpha=0.5, beta=2.0, c=c, out_dtype="float32")
        assert np.array_equal(got, cp.asnumpy(same))


@pytest.mark.gpu
@pytest.mark.parametrize("policy,reduce", [("static", "owner"), ("streamk", "owner"),
                                           ("streamk", "spread"), ("dynamic", "owner")])
@pytest.mark.parametrize("promote,tile", [(1, (128, 6)), (2, (128, 6)), (3, (128, 6)),
                                          (3, (192, 4)), (8, (192, 5))])
def test_promoted_windows_against_float64(cp, rng, promote, tile, policy, reduce):
    """The Hopper kernel's promoted accumulation under every policy (stream-K units end mid-window;
    K parts of 17 and 300 end in zero-filled boxes), output poisoned first: float32's bound."""
    from mgemm import hopper
    if not hopper.supported():
        pytest.skip("needs an sm_90 GPU")
    a_dev, b_dev, c, ref = _block(rng, cp, ks=(300, 1000, 17, 2000), m=520, n=390)
    base = emulate.hopper_config

    def forced(m, n, k, p=None):
        epilogue = "pair" if tile[1] > 4 and tile[0] == 192 else "staged"  # 5 stages: no room
        return base(m, n, k, promote, tile_n=tile[0], stages=tile[1], epilogue=epilogue).replace(
            policy=policy, sk_reduce=reduce)

    emulate.hopper_config = forced
    poisoned = cp.full(ref.shape, cp.nan, dtype=cp.float32)
    try:
        out = emulate.gemm(_Persistent(), a_dev, b_dev, "bf16x6", alpha=0.5, beta=2.0, c=c,
                           out_dtype="float32", out=poisoned)
    finally:
        emulate.hopper_config = base
    assert out is poisoned
    assert_close(cp.asnumpy(out), ref, "float32")


class _Persistent:
    name = "persistent"
@pytest.mark.gpu
@pytest.mark.parametrize("value", [np.inf, np.nan, 1e-40])
def test_values_outside_the_split_take_exact_float32(cp, rng, value):
    from mgemm.engines import get

    a, b = random(rng, (70, 90), "float32"), random(rng, (90, 60), "float32")
    a[5, 7] = value
    out = emulate.gemm(get("cublas"), [cp.asarray(a)], [cp.asarray(b)], "bf16x6",
                       out_dtype="float32")
    want = get("cublas").gemm([cp.asarray(a)], [cp.asarray(b)], out_dtype="float32")
    assert np.array_equal(cp.asnumpy(out), cp.asnumpy(want), equal_nan=True)
    with np.errstate(invalid="ignore"):
        ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(np.isnan(cp.asnumpy(out)), np.isnan(ref))


@pytest.mark.gpu
def test_matmul_with_cupy_chunks_emulated(cp, rng):
    a, b = random(rng, (700, 900), "float32"), random(rng, (900, 500), "float32")
    da_a = da.from_array(cp.asarray(a), chunks=(300, 400))
    da_b = da.from_array(cp.asarray(b), chunks=(400, 250))
    out = mgemm.matmul(da_a, da_b, emulate_fp32="on")
    got = out.compute(scheduler="sync")
    assert type(got).__module__.startswith("cupy") and got.dtype == np.float32
    assert_close(cp.asnumpy(got), a.astype(np.float64) @ b, "float32")


@pytest.mark.gpu
@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "cupy_copies"])
def test_numpy_chunks_emulated_on_the_gpu(cp, rng, monkeypatch, pinned):
    """NumPy chunks with ``emulate_fp32`` on a GPU engine: each block copied whole to the GPU
    (through mgemm's pinned buffers, small ones, or CuPy's copies), multiplied there, and back as
    NumPy, within float32's bound of float64."""
    pinned_copies(monkeypatch, pinned, 16384)
    a, b = random(rng, (700, 900), "float32"), random(rng, (900, 500), "float32")
    out = mgemm.matmul(da.from_array(a, chunks=(300, 400)), da.from_array(b, chunks=(400, 250)),
                       engine="persistent", emulate_fp32="on")
    got = out.compute(scheduler="sync")
    assert type(got) is np.ndarray and got.dtype == np.float32
    assert_close(got, a.astype(np.float64) @ b, "float32")

def test_promote_config_is_checked():
    from mgemm.hopper import HopperConfig

    cfg = HopperConfig(input="bfloat16", output="float32", tile_n=128, promote=2)
    assert cfg.defines()["MGEMM_PROMOTE"] == "2" and "promote2" in str(cfg)
    assert HopperConfig().defines()["MGEMM_PROMOTE"] == "0"
    with pytest.raises(ValueError, match="tile_n <= 192"):
        HopperConfig(tile_n=256, promote=1)
    assert HopperConfig(input="bfloat16", output="float32", tile_n=192, stages=4,
                        promote=8).defines()["MGEMM_TILE_N"] == "192"
    # 192 16-bit columns (384 bytes) go through the staged and TMA epilogues 128 bytes at a time
    assert HopperConfig(input="bfloat16", tile_n=192, stages=4, epilogue="staged").out_chunk_bytes == 128
    assert HopperConfig(input="bfloat16", output="float32", tile_n=192, stages=4,
                        epilogue="tma").out_chunk_bytes == 256
    with pytest.raises(ValueError, match="one CTA per tile unless B is K-major"):
        HopperConfig(input="bfloat16", output="float32", tile_n=192, stages=4, cluster_m=2, b_k_major=False)
    HopperConfig(input="bfloat16", output="float32", tile_n=192, stages=4, cluster_m=2)  # B K-major
    with pytest.raises(ValueError, match="cooperative"):
        HopperConfig(tile_n=64, tile_m=64, pingpong=True, promote=1)
    with pytest.raises(ValueError, match="non-negative"):
        HopperConfig(promote=-1)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("m,n,k", [(8192, 8192, 32768), (2048, 2048, 8192), (1000, 3000, 5000),
                                   (256, 256, 65536)])
def test_hopper_config_fits_the_policy_to_its_tile(monkeypatch, m, n, k):
    """The emulated launch's policy and fix-up are the heuristic's for the tile it runs (192 wide),
    not for the 128-wide tile its base config was chosen for; explicit changes still win."""
    from mgemm import hopper, kernels

    monkeypatch.setattr(kernels, "device_sms", lambda *a, **kw: 132)
    cfg = emulate.hopper_config(m, n, k)
    assert (cfg.tile_n, cfg.stages) == emulate.HOPPER_TILE and cfg.output == "float32"
    assert cfg == hopper.fit_policy(cfg, m, n, k, 132)
    assert emulate.hopper_config(m, n, k, policy="dynamic").policy == "dynamic"
    # 1000 x 3000: 8 x 16 tiles of 128x192 fill one wave (static); 2048²: 1.3 waves (stream-K)
    if (m, n) == (1000, 3000):
        assert cfg.policy == "static"
    if (m, n) == (2048, 2048):
        assert cfg.policy == "streamk"


def test_split_kernel_compiles_without_spills(tmp_path):
    """kernels/split_bf16.cu, as the launcher hands it to the compiler, builds for sm_90a."""
    from mgemm.kernels import KERNEL_DIR, PlainSource

    src = tmp_path / "split_unit.cu"
    src.write_text(PlainSource(emulate.SPLIT_SOURCE).source())
    proc = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin",
                           f"-I{KERNEL_DIR}", "-Xptxas", "-v", "-o", str(tmp_path / "s.cubin"),
                           str(src)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Compiling entry function '{emulate.SPLIT_KERNEL}'" in proc.stderr
    assert " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in proc.stderr
