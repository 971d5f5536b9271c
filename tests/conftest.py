"""Shared fixtures: a small CPU cluster, random operands, and the float64 reference check."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

#: Relative error bound per result dtype against a float64 reference.
RTOL = {np.float64: 1e-12, np.float32: 2e-6, np.float16: 5e-3, np.complex64: 2e-6,
        np.complex128: 1e-12}
try:  # bfloat16 arrays (NumPy and CuPy 14) are ml_dtypes'; importing it registers the name
    import ml_dtypes
    RTOL[ml_dtypes.bfloat16] = 1e-2
except ImportError:
    pass


def rel_error(got, ref) -> float:
    got = np.asarray(got, dtype=np.complex128 if np.iscomplexobj(got) else np.float64)
    ref = np.asarray(ref, dtype=got.dtype)
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(got - ref) / (denom if denom else 1.0))


def assert_close(got, ref, dtype) -> None:
    """``got`` matches ``ref`` within the dtype's relative bound; says where it differs if not."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    tol = RTOL.get(np.dtype(dtype).type, 0.0)
    err = rel_error(got, ref)
    if not err <= tol:
        diff = np.abs(np.asarray(got, dtype=np.complex128) - np.asarray(ref, dtype=np.complex128))
        where = np.unravel_index(np.argmax(diff), diff.shape) if diff.size else ()
        raise AssertionError(f"relative error {err:.3g} > {tol:.3g} for {np.dtype(dtype)}; "
                             f"largest difference at {where}: {got[where]!r} vs {ref[where]!r}")


def assert_within_dot_bound(got, want, scale, k: int, dtype) -> None:
    """``got`` within the rounding-error bound of ``k``-term dot products in ``dtype`` of
    ``want`` (float64 or complex128), element by element: |got - want| <= 4 (k + 2) eps * scale,
    ``scale`` being |alpha| |A| |B| + |beta| |C| in float64.  Sound where cancellation leaves an
    element of ``want`` small (a 1 x 1 product of 33 terms, say), which a bound relative to
    ``want`` itself is not; a missing or doubled term, or a wrong alpha or beta, is still far
    past it."""
    wide = np.complex128 if np.iscomplexobj(want) else np.float64
    diff = np.abs(np.asarray(got, dtype=wide) - want)
    bound = 4 * (k + 2) * np.finfo(np.dtype(dtype)).eps * np.asarray(scale, dtype=np.float64)
    bad = diff > bound
    if bad.any():
        where = np.unravel_index(np.argmax(diff - bound), diff.shape)
        raise AssertionError(f"{int(bad.sum())} elements past the {np.dtype(dtype)} bound; at "
                             f"{where}: {got[where]!r} vs {want[where]!r} (bound {bound[where]:.3g})")


def random(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Fresh random values in [-1, 1) (never zeros), in ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-5, 6, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    x = rng.random(shape) * 2 - 1
    if dtype.kind == "c":
        x = x + 1j * (rng.random(shape) * 2 - 1)
    return x.astype(dtype)


def pinned_copies(monkeypatch, on: bool, piece_bytes: int) -> None:
    """``mgemm.staging``'s pinned copies ``on`` (else CuPy's), through fresh buffers of
    ``piece_bytes`` (small ones: a chunk crosses in many bands)."""
    from mgemm import staging

    monkeypatch.setattr(staging, "PINNED_COPIES", on)
    monkeypatch.setattr(staging, "PIECE_BYTES", piece_bytes)
    monkeypatch.setattr(staging, "_idle", [])

@pytest.fixture
def rng(request) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))  # the same draw every run


@pytest.fixture(scope="module")
def client():
    """Two single-threaded in-process workers: planned placement is visible, start-up is quick.
    The default client from its first use to the module's end (``no_client`` hides it)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


@pytest.fixture
def no_client(monkeypatch):
    """No default client, whatever the module's ``client`` fixture holds: Dask's synchronous
    scheduler, and mgemm finds no client to plan for (``distributed.get_client`` raises)."""
    import dask
    import distributed.client

    monkeypatch.setattr(distributed.client, "_get_global_client", lambda: None)
    with dask.config.set(scheduler="sync"):
        yield


@pytest.fixture
def sigint_as_from_a_terminal():
    """SIGINT taken as a program started from a terminal takes it (Python's KeyboardInterrupt),
    for this test and the processes it starts: a shell's background job (``(make test &)``)
    starts pytest ignoring SIGINT, and its children inherit that, so a Ctrl-C test would see none."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def has_gpu() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def gpu_count() -> int:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    """``gpu`` and ``multi_gpu`` tests skip, with the reason, where the hardware is missing."""
    gpus = gpu_count()
    for item in items:
        if "gpu" in item.keywords and gpus < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU with CuPy"))
        if "multi_gpu" in item.keywords and gpus < 2:
            item.add_marker(pytest.mark.skip(reason="needs two CUDA GPUs with dask-cuda"))
