"""mgemm.tune: the candidate configs, the cache, the choice; the ``tune`` option's way to the
kernel.  The timing itself (CUDA events) runs in the GPU tests at the end."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import sys
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import mgemm
from mgemm import config, hopper, hopper_config, hopper_heuristic, tune
from mgemm.hopper import HopperConfig

from gpu_operands import as_float64, poisoned, rand_operand


@pytest.mark.parametrize("shape", [(2144, 11840, 1368), (1040, 632, 5016), (8192, 8192, 8192),
                                   (64, 8192, 8192), (256, 256, 65536), (5000, 3000, 512),
                                   (2144, 1480, 1368), (6312, 9144, 4712), (3264, 632, 1648),
                                   (1024, 1024, 1024), (700, 900, 1100), (528, 1600, 2344)])
def test_candidates_are_valid_distinct_and_follow_the_epilogue_rule(shape):
    """Every variant for the heuristic's pick, thin and cluster picks too (row flags as for
    contiguous operands: 2144x1480x1368 takes 2 x 2 clusters), and the half-wave picks: 128 x 64
    tiles (1024³), on 1 x 2 clusters (700x900x1100), and 64-row tiles split along N
    (528x1600x2344), whose variants still take 128 rows."""
    m, n, k = shape
    base = hopper.choose_config(m, n, k, "float16", 132, b_rows_off=n % 16 != 0,
                                b_rows_off_128=n % 64 != 0, a_rows_off_128=k % 64 != 0)
    cands = tune.candidates(base, m, n, k)
    assert set(cands) <= {label for label, _ in tune.VARIANTS}
    assert len(cands) >= len(tune.VARIANTS) - 1  # at most one equals the base
    assert all(cfg != base and isinstance(cfg, HopperConfig) for cfg in cands.values())
    assert len(set(cands.values())) == len(cands)
    for label, cfg in cands.items():
        fields = dict(tune.VARIANTS)[label]
        assert (cfg.tile_n, cfg.policy, cfg.tile_m, cfg.pingpong) == (
            fields["tile_n"], fields["policy"], hopper_config.TILE_M, False), label
        assert (cfg.cluster_m, cfg.cluster_n) == (fields.get("cluster_m", 1), fields.get("cluster_n", 1))
        tma = -(-k // 64) <= hopper_heuristic.TMA_STORE_K and cfg.out_chunk_bytes % 128 == 0
        assert cfg.epilogue == ("tma" if tma else "staged"), label


def test_cache_round_trip_and_merge(tmp_path):
    path = tmp_path / "sub" / "tune.json"
    one, two = tune.Cache(path), tune.Cache(path)
    one.put("a", {"label": "s192", "config": None, "ms": {"s192": 1.0}})
    two.put("b", {"label": "heuristic", "config": None, "ms": {}})  # keeps what `one` wrote
    assert set(json.loads(path.read_text())) == {"a", "b"}
    assert tune.Cache(path).get("a")["label"] == "s192"
    assert tune.Cache(path).get("c") is None


def test_cache_survives_a_bad_file_and_an_unwritable_place(tmp_path, caplog):
    bad = tmp_path / "tune.json"
    bad.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="mgemm.tune"):
        assert tune.Cache(bad).get("a") is None
    assert "ignoring the tuning cache" in caplog.text
    bad.write_text("[" * 200_000)  # nested past the parser's depth: RecursionError, not ValueError
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mgemm.tune"):
        assert tune.Cache(bad).get("a") is None
    assert "ignoring the tuning cache" in caplog.text
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = tune.Cache(blocker / "tune.json")  # a directory that cannot exist
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mgemm.tune"):
        cache.put("a", {"label": "heuristic", "config": None, "ms": {}})
        cache.put("b", {"label": "heuristic", "config": None, "ms": {}})
    assert cache.get("a") is not None and cache.get("b") is not None  # in memory still
    assert caplog.text.count("cannot write the tuning cache") == 1


def test_cache_file_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MGEMM_CACHE_DIR", str(tmp_path))
    assert tune.cache_file() == tmp_path / "tune.json"
    monkeypatch.delenv("MGEMM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tune.cache_file() == tmp_path / "xdg" / "mgemm" / "tune.json"
    # a relative XDG_CACHE_HOME is ignored, as the XDG specification asks; "~" is the home folder
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    assert tune.cache_file() == Path.home() / ".cache" / "mgemm" / "tune.json"
    monkeypatch.setenv("MGEMM_CACHE_DIR", "~/mgc")
    assert tune.cache_file() == Path.home() / "mgc" / "tune.json"


def test_fastest_prefers_the_heuristic_on_a_tie():
    assert tune.fastest({"s192": 1.0, tune.HEURISTIC: 1.0}) == tune.HEURISTIC
    assert tune.fastest({"s192": 0.5, tune.HEURISTIC: 1.0}) == "s192"


def _fake_choose(monkeypatch, tmp_path, times, wrong=()):
    """tune.choose on 640x384x2048 with NumPy buffers: ``run`` writes 1.0 (2.0 for the labels in
    ``wrong``) and ``measure`` returns ``times`` for the labels it is given."""
    m, n, k = 640, 384, 2048
    base = hopper.choose_config(m, n, k, "float16", 132)
    labels = {}

    def run(cfg, out):
        out[...] = 2.0 if labels.get(cfg) in wrong else 1.0

    def fake_measure(fns, reps=tune.REPS):
        for fn in fns.values():
            fn()
        return {label: times.get(label, 9.0) for label in fns}

    calls = []  # the reps of each measure
    monkeypatch.setattr(tune, "measure", lambda fns, reps=tune.REPS, warm=True: calls.append(reps) or fake_measure(fns))
    cands = tune.candidates(base, m, n, k)
    labels.update({cfg: label for label, cfg in cands.items()})
    cache = tune.Cache(tmp_path / "tune.json")
    pick = lambda: tune.choose("key", base, m, n, k, run, lambda: np.zeros((m, n), np.float32),  # noqa: E731
                               lambda out: out, cache)
    return pick, cands, calls, cache


def test_choose_takes_the_fastest_and_caches_it(monkeypatch, tmp_path):
    pick, cands, calls, cache = _fake_choose(monkeypatch, tmp_path, {"heuristic": 2.0, "q128": 1.5})
    assert pick() == cands["q128"]
    assert pick() == cands["q128"] and len(calls) == 1  # the second time from the cache
    entry = json.loads((tmp_path / "tune.json").read_text())["key"]
    assert entry["label"] == "q128" and entry["ms"]["heuristic"] == 2.0
    assert HopperConfig(**entry["config"]) == cands["q128"]


def test_choose_times_short_products_again_over_more_rounds(monkeypatch, tmp_path):
    pick, cands, calls, _ = _fake_choose(monkeypatch, tmp_path, {"heuristic": 0.05, "s192": 0.04})
    assert pick() == cands["s192"] and calls == [tune.REPS, tune.SHORT_REPS]


def test_choose_drops_a_candidate_whose_output_differs(monkeypatch, tmp_path, caplog):
    pick, cands, _, _ = _fake_choose(monkeypatch, tmp_path, {"heuristic": 2.0, "q128": 1.0, "s192": 1.5},
                                     wrong={"q128"})
    with caplog.at_level(logging.WARNING, logger="mgemm.tune"):
        assert pick() == cands["s192"]
    assert "dropped q128" in caplog.text


def test_choose_keeps_the_heuristic_where_it_is_fastest_and_retunes_a_stale_entry(monkeypatch, tmp_path):
    pick, _, calls, cache = _fake_choose(monkeypatch, tmp_path, {"heuristic": 1.0})
    assert pick() is None
    cache.put("key", {"label": "x", "config": {"tile_n": 100}, "ms": {}})  # not a config any more
    assert pick() is None and len(calls) == 2


def _engine_choice(monkeypatch, tmp_path, times, blocks):
    calls = []
    monkeypatch.setattr(tune, "measure", lambda fns, reps=tune.REPS, warm=True: calls.append(sorted(fns)) or
                        {label: times[label] for label in fns})
    fns = {label: (lambda x=x: np.full((8, 4), x)) for label, x in blocks.items()}
    cache = tune.Cache(tmp_path / "tune.json")
    name = "engine|GPU|float16->float16|8x4x16|111|digest|0"
    values = lambda x: x.astype(np.float32)  # noqa: E731
    return (lambda: tune.engine_choice(name, "cublas", fns, values, [0, 7], cache)), calls


def test_engine_choice_takes_the_faster_engine_once(monkeypatch, tmp_path):
    pick, calls = _engine_choice(monkeypatch, tmp_path, {"cublas": 1.0, "persistent": 0.9},
                                 {"cublas": 1.0, "persistent": 1.0})
    assert pick() == "persistent" and pick() == "persistent" and len(calls) == 1
    pick, _ = _engine_choice(monkeypatch, tmp_path / "b", {"cublas": 1.0, "persistent": 0.99},
                             {"cublas": 1.0, "persistent": 1.0})
    assert pick() == "cublas"  # within MARGIN: the model's pick stays


def test_engine_choice_drops_an_engine_whose_block_differs(monkeypatch, tmp_path, caplog):
    pick, calls = _engine_choice(monkeypatch, tmp_path, {"cublas": 1.0, "persistent": 0.5},
                                 {"cublas": 1.0, "persistent": 1.5})
    with caplog.at_level(logging.WARNING, logger="mgemm.tune"):
        assert pick() == "cublas"
    assert calls == [["cublas"]] and "dropped persistent" in caplog.text


def test_once_computes_once_and_nests():
    """tune.once: one computation per key; an engine tuning that runs a config tuning inside it
    takes the lock again in the same thread."""
    outer, inner, runs = {}, {}, []

    def compute_inner():
        runs.append("inner")
        return 2

    def compute_outer():
        runs.append("outer")
        return tune.once(inner, "k", compute_inner) + 1

    assert tune.once(outer, "k", compute_outer) == 3
    assert tune.once(outer, "k", compute_outer) == 3 and tune.once(inner, "k", compute_inner) == 2
    assert runs == ["outer", "inner"]


def test_auto_engine_keeps_its_model_where_the_hopper_kernel_does_not_run(rng):
    """float32 (no tf32 in auto), mixed dtypes, no K: the model's pick, untimed, on any machine."""
    from mgemm.engines import auto
    a, b = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)
    assert auto.tuned([a], [b], None, "cublas") == "cublas"
    assert auto.tuned([a.astype(np.float16)], [b], None, "persistent") == "persistent"
    assert auto.tuned([a[:, :0]], [b[:0]], None, "cublas") == "cublas"


def test_the_option_at_every_layer(monkeypatch):
    assert config.resolve()["tune"] is False
    assert config.resolve(tune="on")["tune"] is True
    monkeypatch.setenv("MGEMM_TUNE", "1")
    assert config._defaults()["tune"] == "1"
    opt = config.OPTIONS["tune"]
    assert (opt.key, opt.flag, opt.env) == ("mgemm.tune", "--tune", "MGEMM_TUNE")
    with pytest.raises(ValueError, match="mgemm option tune"):
        config.resolve(tune="sometimes")


def test_cli_has_the_boolean_flags():
    from click.testing import CliRunner

    from mgemm.cli import main
    text = CliRunner().invoke(main, ["bench", "--help"]).output
    assert "--tune / --no-tune" in text and "--allow-tf32 / --no-allow-tf32" in text


def test_graph_carries_tune_to_every_block_task(rng):
    a = da.from_array(rng.standard_normal((64, 48)), chunks=32)
    b = da.from_array(rng.standard_normal((48, 40)), chunks=(16, 20))
    for flag in (True, False):
        out = mgemm.matmul(a, b, tune=flag)
        tasks = [t for t in dict(out.__dask_graph__()).values()
                 if getattr(t, "func", None) is not None and t.func.__name__ == "_block_task"]
        assert tasks and all(t.args[8] is flag for t in tasks)
        np.testing.assert_allclose(out.compute(scheduler="sync"), a.compute() @ b.compute())
    assert mgemm.matmul(a, b, tune=True).name != mgemm.matmul(a, b).name


# --- on an H200 -------------------------------------------------------------------------------

def _cupy_sm90():
    try:
        import cupy as cp
        ok = cp.cuda.runtime.getDeviceCount() > 0 and hopper.supported()
    except Exception:
        return None
    return cp if ok else None


_cp = _cupy_sm90()
sm90 = pytest.mark.skipif(_cp is None, reason="needs CuPy and an sm_90 (Hopper) GPU")


@pytest.mark.gpu
@sm90
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k,trans_b", [(1040, 632, 5016, False), (700, 900, 1100, True),
                                           (2144, 1480, 1368, False)])
def test_tuned_products_are_right_and_cached(kind, m, n, k, trans_b, monkeypatch, tmp_path):
    """gemm(tune=True) on fresh random operands (B row- or column-major, rows off 128 bytes):
    the result against float64 in a poisoned output; the choice lands in the cache file, and the
    next product of that kind launches it without timing anything."""
    monkeypatch.setenv("MGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tune, "CACHE", tune.Cache())
    monkeypatch.setattr(hopper, "_TUNED", {})
    rng = np.random.default_rng(m + n + k)
    a, a64 = rand_operand((m, k), kind, rng)
    b, b64 = rand_operand((k, n), kind, rng, order="F" if trans_b else "C")
    ref = a64 @ b64
    for attempt in range(2):
        out = poisoned((m, n), kind)
        hopper.gemm(a, b, out=out, tune=True, as_dtype="bfloat16" if kind == "bfloat16" else None)
        got = as_float64(out, kind)
        err = float(_cp.abs(got - ref).max() / _cp.abs(ref).max())
        assert err < (2e-2 if kind == "bfloat16" else 4e-3), (attempt, err)
        entries = json.loads((tmp_path / "tune.json").read_text())
        assert len(entries) == 1
        (entry,) = entries.values()
        assert entry["label"] in entry["ms"] and len(entry["ms"]) >= len(tune.VARIANTS), entry["ms"]
        if attempt == 0:  # as a new process would: from the file, without timing anything
            monkeypatch.setattr(hopper, "_TUNED", {})
            monkeypatch.setattr(tune, "CACHE", tune.Cache())
            monkeypatch.setattr(tune, "measure", lambda *a, **k: pytest.fail("timed again"))


@pytest.mark.gpu
@sm90
def test_persistent_engine_tunes_with_the_option(monkeypatch, tmp_path):
    monkeypatch.setenv("MGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tune, "CACHE", tune.Cache())
    monkeypatch.setattr(hopper, "_TUNED", {})
    rng = np.random.default_rng(3)
    parts = [rand_operand(shape, "float16", rng) for shape in [(768, 512), (512, 640), (768, 256),
                                                                (256, 640)]]
    (a0, a0_64), (b0, b0_64), (a1, a1_64), (b1, b1_64) = parts
    from mgemm import engines
    out = engines.get("persistent").gemm([a0, a1], [b0, b1], tune=True)
    ref = a0_64 @ b0_64 + a1_64 @ b1_64
    assert float(_cp.abs(out.astype(_cp.float64) - ref).max() / _cp.abs(ref).max()) < 4e-3
    assert len(json.loads((tmp_path / "tune.json").read_text())) == 1


@pytest.mark.gpu
@sm90
@pytest.mark.parametrize("shapes", [[(1536, 1024), (1024, 2048)],
                                    [(1000, 512), (512, 1000), (1000, 1000), (1000, 1000)]])
def test_auto_engine_tunes_the_engine_and_is_right(shapes, monkeypatch, tmp_path):
    """engine auto with tune on one K part and on two whose rows are off 128 bytes: the block against
    float64, one engine entry in the cache file, and the next block of that kind untimed."""
    from mgemm.engines import auto, get
    monkeypatch.setenv("MGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tune, "CACHE", tune.Cache())
    monkeypatch.setattr(hopper, "_TUNED", {})
    monkeypatch.setattr(auto, "_TUNED", {})
    rng = np.random.default_rng(5)
    ops = [rand_operand(shape, "float16", rng) for shape in shapes]
    a_parts, b_parts = [x for x, _ in ops[0::2]], [x for x, _ in ops[1::2]]
    ref = sum(a64 @ b64 for (_, a64), (_, b64) in zip(ops[0::2], ops[1::2]))
    for attempt in range(2):
        out = get("auto-gpu").gemm(a_parts, b_parts, tune=True)
        err = float(_cp.abs(out.astype(_cp.float64) - ref).max() / _cp.abs(ref).max())
        assert err < 4e-3, (attempt, err)
        entries = json.loads((tmp_path / "tune.json").read_text())
        engine = [e for key, e in entries.items() if key.startswith("engine|")]
        assert len(engine) == 1 and engine[0]["label"] in ("cublas", "persistent")
        assert set(engine[0]["ms"]) == {"cublas", "persistent"}
        monkeypatch.setattr(tune, "measure", lambda *a, **k: pytest.fail("timed again"))


# --- mutation-audit additions: the key, the cache file's edge cases, the margin's edges ----------

def test_key_names_every_part_of_a_product_kind():
    """Each of the key's parts tells two kinds apart; flags sort by name; the tail is the kernel
    sources' digest and mgemm's version."""
    from mgemm.kernels import sources_digest
    base = dict(device="H200", sms=132, kind="float16", out="float16", m=8, n=16, k=32, parts=1,
                layouts=(True, False), flags={"b_rows_off": False, "a_rows_off_128": True})
    k0 = tune.key(**base)
    assert k0.split("|")[:7] == ["H200", "132", "float16->float16", "8x16x32", "1", "KN",
                                 "a_rows_off_128=1,b_rows_off=0"]
    assert k0.endswith(f"|{sources_digest()[:16]}|{mgemm.__version__}")
    assert tune.code_stamp() == f"{sources_digest()[:16]}|{mgemm.__version__}"
    assert tune.key(**{**base, "flags": {"a_rows_off_128": True, "b_rows_off": False}}) == k0
    for change in (dict(device="H100"), dict(sms=120), dict(kind="bfloat16"), dict(out="float32"),
                   dict(m=9), dict(n=17), dict(k=33), dict(parts=2), dict(layouts=(False, True)),
                   dict(flags={"b_rows_off": True, "a_rows_off_128": True})):
        assert tune.key(**{**base, **change}) != k0, change


def test_cache_ignores_a_file_that_is_not_an_object(tmp_path):
    path = tmp_path / "tune.json"
    path.write_text("[1, 2]")
    cache = tune.Cache(path)
    assert cache.get("a") is None
    cache.put("a", {"label": "heuristic", "config": None, "ms": {}})
    assert set(json.loads(path.read_text())) == {"a"}


def test_cache_put_keeps_entries_written_after_this_cache_loaded(tmp_path):
    """Two processes that both read the file before either writes: the second write keeps the
    first's entry, and a later put of a key replaces its entry in the file."""
    path = tmp_path / "tune.json"
    one, two = tune.Cache(path), tune.Cache(path)
    assert one.get("x") is None and two.get("x") is None  # both loaded the (missing) file
    one.put("a", {"label": "s192", "config": None, "ms": {}})
    two.put("b", {"label": "heuristic", "config": None, "ms": {}})
    assert set(json.loads(path.read_text())) == {"a", "b"}
    two.put("a", {"label": "q128", "config": None, "ms": {}})
    assert tune.Cache(path).get("a")["label"] == "q128"


def test_cache_put_leaves_the_old_file_whole_where_a_write_fails(tmp_path, monkeypatch):
    """The file is replaced whole: a write that fails half way leaves the last good file."""
    path = tmp_path / "tune.json"
    tune.Cache(path).put("a", {"label": "s192", "config": None, "ms": {}})
    real = type(path).write_text

    def half_write(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(path), "write_text", half_write)
    cache = tune.Cache(path)
    cache.put("b", {"label": "heuristic", "config": None, "ms": {}})
    monkeypatch.undo()
    assert cache.get("b") is not None  # in memory still
    assert set(json.loads(path.read_text())) == {"a"}
    assert [p.name for p in tmp_path.iterdir()] == ["tune.json"]  # no half-written file left


def test_cache_put_leaves_no_file_behind_where_the_replace_fails(tmp_path):
    (tmp_path / "tune.json").mkdir()  # a folder where the file goes: os.replace fails
    cache = tune.Cache(tmp_path / "tune.json")
    cache.put("a", {"label": "s192", "config": None, "ms": {}})
    assert cache.get("a") is not None
    assert [p.name for p in tmp_path.iterdir()] == ["tune.json"]


def test_fastest_at_the_margin_and_without_the_incumbent():
    assert tune.fastest({tune.HEURISTIC: 1.0, "s192": 0.98}) == "s192"  # just the margin ahead
    assert tune.fastest({tune.HEURISTIC: 1.0, "s192": 0.97}) == "s192"
    assert tune.fastest({tune.HEURISTIC: 1.0, "s192": 0.985}) == tune.HEURISTIC
    assert tune.fastest({"s192": 1.0, tune.HEURISTIC: 1.0}, margin=0.0) == tune.HEURISTIC
    assert tune.fastest({"s192": 1.0, "k128": 0.5}) == "k128"  # no incumbent: the least time


def test_check_rows_takes_every_64th_and_the_last():
    assert tune.check_rows(130) == [0, 64, 128, 129]
    assert tune.check_rows(64) == [0, 63] and tune.check_rows(1) == [0]


def test_choose_retunes_an_entry_without_a_config_or_with_unknown_fields(monkeypatch, tmp_path):
    pick, _, calls, cache = _fake_choose(monkeypatch, tmp_path, {"heuristic": 1.0})
    cache.put("key", {"label": "x", "ms": {}})  # no "config"
    assert pick() is None and len(calls) == 1
    cache.put("key", {"label": "x", "config": {"tile_n": 128, "warp_size": 64}, "ms": {}})
    assert pick() is None and len(calls) == 2
    cache.put("key", {"label": "x", "config": [128], "ms": {}})
    assert pick() is None and len(calls) == 3


def test_choose_times_again_only_under_short_ms(monkeypatch, tmp_path):
    pick, _, calls, _ = _fake_choose(monkeypatch, tmp_path, {"heuristic": tune.SHORT_MS})
    assert pick() is None and calls == [tune.REPS]


def test_engine_choice_retunes_a_cached_engine_it_does_not_have(monkeypatch, tmp_path):
    pick, calls = _engine_choice(monkeypatch, tmp_path, {"cublas": 1.0, "persistent": 0.5},
                                 {"cublas": 1.0, "persistent": 1.0})
    tune.Cache(tmp_path / "tune.json").put("engine|GPU|float16->float16|8x4x16|111|digest|0",
                                            {"label": "gone", "ms": {}, "config": None})
    assert pick() == "persistent" and len(calls) == 1


@pytest.mark.parametrize("entry", ["cublas", ["cublas"], 1])
def test_engine_choice_times_again_where_an_entry_is_not_an_object(monkeypatch, tmp_path, entry):
    """An entry another writer left that is not an object (a hand-edited file, say) is timed
    again, as ``choose`` does, not an AttributeError."""
    pick, calls = _engine_choice(monkeypatch, tmp_path, {"cublas": 1.0, "persistent": 0.5},
                                 {"cublas": 1.0, "persistent": 1.0})
    (tmp_path / "tune.json").write_text(
        json.dumps({"engine|GPU|float16->float16|8x4x16|111|digest|0": entry}))
    assert pick() == "persistent" and len(calls) == 1


def test_engine_choice_agreement_bound_and_engines_that_raise(monkeypatch, tmp_path, caplog):
    """A block within AGREE x max |block| of the incumbent's (the bound itself included; a negative
    block too) is timed; one further off, or whose call raises, is left out."""
    for blocks, kept in (({"cublas": 50.0, "persistent": 51.0}, True),  # |diff| == the bound
                         ({"cublas": -1.0, "persistent": -1.0}, True),
                         ({"cublas": 1.0, "persistent": 1.1}, False)):
        pick, calls = _engine_choice(monkeypatch, tmp_path / str(blocks), {"cublas": 1.0, "persistent": 0.5},
                                     blocks)
        assert pick() == ("persistent" if kept else "cublas"), blocks
    pick, calls = _engine_choice(monkeypatch, tmp_path / "raises", {"cublas": 1.0, "persistent": 0.5},
                                 {"cublas": 1.0, "persistent": 1.0})
    fns = {"cublas": lambda: np.full((8, 4), 1.0), "persistent": lambda: 1 / 0}
    name = "engine|GPU|float16->float16|8x4x16|111|digest|0"
    with caplog.at_level(logging.INFO, logger="mgemm.tune"):
        assert tune.engine_choice(name, "cublas", fns, lambda x: x, [0, 7],
                                  tune.Cache(tmp_path / "raises2" / "tune.json")) == "cublas"
    assert "leaves out persistent" in caplog.text


def test_once_computes_once_across_threads():
    """Two threads asking for one key at once: one computation (the second waits on the lock and
    finds the value)."""
    import threading
    import time
    table, runs, started = {}, [], threading.Event()

    def compute():
        runs.append(1)
        started.set()
        time.sleep(0.2)
        return len(runs)

    first = threading.Thread(target=tune.once, args=(table, "k", compute))
    first.start()
    started.wait()
    assert tune.once(table, "k", compute) == 1
    first.join()
    assert runs == [1]


def test_candidates_keep_the_base_promote_and_leave_out_what_it_cannot_take():
    """A promoted base (float32 emulation) keeps its promote in every variant; the widths past
    192 cannot take it and are left out, not raised."""
    base = HopperConfig(input="float16", promote=2)
    cands = tune.candidates(base, 1024, 1024, 4096)
    assert sorted(cands) == ["c128", "k128", "k192", "q128", "s128", "s192"]
    assert all(cfg.promote == 2 for cfg in cands.values())


def test_candidates_take_the_variants_stages_and_a_thin_base_output():
    """Past the few-stages K each variant runs its own stages; a pingpong base's variants keep
    its output type."""
    m = n = k = 8192
    base = hopper.choose_config(m, n, k, "float16", 132)
    for label, cfg in tune.candidates(base, m, n, k).items():
        assert cfg.stages == dict(tune.VARIANTS)[label]["stages"], label
    thin = HopperConfig(input="float16", output="float32", pingpong=True, tile_m=64, tile_n=128)
    assert {cfg.output for cfg in tune.candidates(thin, 1024, 1024, 4096).values()} == {"float32"}


def test_cache_reads_a_missing_file_quietly(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="mgemm.tune"):
        assert tune.Cache(tmp_path / "none" / "tune.json").get("a") is None
    assert caplog.text == ""


def _put_many(path, prefix, count):
    cache = tune.Cache(path)
    for i in range(count):
        cache.put(f"{prefix}{i}", {"label": "heuristic", "config": None, "ms": {}})


def test_cache_writers_in_several_processes_keep_every_entry(tmp_path):
    """Processes writing the file at once (Dask workers tuning on one machine) each merge under the
    folder's lock, so no entry is lost (without the lock, 156 of 400 were in one run)."""
    path = tmp_path / "tune.json"
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    procs = [ctx.Process(target=_put_many, args=(path, f"p{w}-", 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert set(json.loads(path.read_text())) == {f"p{w}-{i}" for w in range(4) for i in range(40)}
    assert [p.name for p in tmp_path.iterdir()] == ["tune.json"]  # no lock or temporary file left


def test_cache_get_reads_what_another_process_wrote_since(tmp_path):
    """A miss reads the file again where it changed since this cache read it: a worker uses what
    another worker tuned meanwhile instead of tuning that kind again."""
    path = tmp_path / "tune.json"
    one, two = tune.Cache(path), tune.Cache(path)
    assert one.get("a") is None  # loaded: no file yet
    two.put("a", {"label": "s192", "config": None, "ms": {}})
    assert one.get("a")["label"] == "s192"
    one.put("b", {"label": "q128", "config": None, "ms": {}})
    two.put("c", {"label": "k128", "config": None, "ms": {}})
    assert one.get("c")["label"] == "k128" and two.get("b")["label"] == "q128"
    one.put("a", {"label": "heuristic", "config": None, "ms": {}})  # this process's own entry wins
    assert one.get("a")["label"] == "heuristic"


def test_cache_put_takes_the_entries_it_merged(tmp_path):
    """A put merges the file's entries into memory too, so a later miss on one of them is a hit
    without another read."""
    path = tmp_path / "tune.json"
    one, two = tune.Cache(path), tune.Cache(path)
    assert one.get("x") is None
    two.put("b", {"label": "s128", "config": None, "ms": {}})
    one.put("a", {"label": "s192", "config": None, "ms": {}})
    path.unlink()  # nothing left to read: the entry must be in memory
    assert one.get("b")["label"] == "s128"


def test_cache_writes_without_a_lock_where_the_platform_has_none(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fcntl", None)  # import fcntl raises ImportError
    path = tmp_path / "tune.json"
    tune.Cache(path).put("a", {"label": "s192", "config": None, "ms": {}})
    assert set(json.loads(path.read_text())) == {"a"}
