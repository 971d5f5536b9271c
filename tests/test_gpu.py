"""GPU tests of the orchestrator: the cublas engine, CuPy chunks, LocalCUDACluster end to end.

Marked ``gpu`` / ``multi_gpu``: they skip, saying why, on machines without CUDA.
"""

from __future__ import annotations

import gc
import time

import dask
import dask.array as da
import numpy as np
import pytest

import mgemm
from conftest import assert_close, pinned_copies, random
from mgemm import staging

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("ks", [(5, 33, 1), (37,)], ids=["three_parts", "one_part"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "complex64",
                                   "complex128"])
def test_cublas_engine_block(cp, rng, dtype, ks):
    """K parts (one of them a column-major view) with alpha, beta and C; a block of one part
    takes the half-precision path that writes its own type directly."""
    from mgemm.engines import get

    parts_a = [random(rng, (70, k), dtype) for k in ks]
    parts_b = [random(rng, (k, 45), dtype) for k in ks]
    c = random(rng, (70, 45), dtype)
    out = get("cublas").gemm([cp.asarray(x) for x in parts_a], [cp.asarray(x.T).T for x in parts_b],
                             alpha=0.5, beta=2.0, c=cp.asarray(c))
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    ref = 0.5 * sum(x.astype(wide) @ y.astype(wide) for x, y in zip(parts_a, parts_b)) + 2.0 * c
    assert out.dtype == np.dtype(dtype)
    assert_close(cp.asnumpy(out), ref, dtype)


@pytest.mark.parametrize("parts", [1, 2])
def test_cublas_engine_rounds_a_16bit_block_once_with_beta_c(cp, parts):
    """float16 A, B and C with beta != 0 through cuBLAS: alpha * A @ B and beta * C are added in
    float32 and rounded once (2/3 - 0.5 is float16(1/6), not the 0.16650390625 of a product
    rounded to float16 before C was added)."""
    from mgemm.engines import get

    a, b = cp.array([[2.0, 0.0]], cp.float16), cp.array([[1.0], [0.0]], cp.float16)
    a_parts = [a] if parts == 1 else [a[:, :1], a[:, 1:]]
    b_parts = [b] if parts == 1 else [b[:1], b[1:]]
    got = get("cublas").gemm(a_parts, b_parts, alpha=1 / 3, beta=-2.0, c=cp.array([[0.25]], cp.float16))
    assert got.dtype == np.float16 and float(got[0, 0]) == 0.1666259765625 == np.float16(1 / 6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_persistent_engine_block(cp, rng, dtype):
    """The persistent engine on K parts, one of them a transposed view, with alpha, beta and C:
    on an sm_90 GPU float16 and bfloat16 go to the Hopper kernel, elsewhere (and float32/64) the
    portable one."""
    from mgemm.engines import get
    from mgemm.engines.persistent import _use_hopper
    from mgemm import hopper

    parts_a = [random(rng, (300, k), dtype) for k in (64, 130, 8)]
    parts_b = [random(rng, (k, 200), dtype) for k in (64, 130, 8)]
    c = random(rng, (300, 200), dtype)
    a_dev = [cp.asarray(x) for x in parts_a]
    a_dev[1] = cp.asarray(parts_a[1].T).T  # column-major view
    out = get("persistent").gemm(a_dev, [cp.asarray(x) for x in parts_b], alpha=0.5, beta=2.0,
                                 c=cp.asarray(c))
    ref = 0.5 * sum(x.astype(np.float64) @ y.astype(np.float64)
                    for x, y in zip(parts_a, parts_b)) + 2.0 * c
    assert out.dtype == np.dtype(dtype)
    assert_close(cp.asnumpy(out), ref, dtype)
    assert _use_hopper(np.dtype(dtype), np.dtype(dtype), False) == (
        dtype in ("float16", "bfloat16") and hopper.supported())

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_persistent_engine_rounds_a_16bit_block_of_many_parts_once(cp, rng, dtype):
    """More K parts than one Hopper launch takes (``MAX_K_PARTS``): the launches add up in a
    float32 block, rounded once, so the result equals one launch over the whole K range on
    nearly every element (a 16-bit block added to between launches differed on about a
    quarter).  The same holds for the portable kernel's launch per part elsewhere."""
    from mgemm.engines import get
    from mgemm.hopper_config import MAX_K_PARTS

    n_parts = 2 * MAX_K_PARTS + 3
    a = (rng.random((256, 256 * n_parts)) + 0.5).astype(dtype)  # no cancellation
    b = (rng.random((256 * n_parts, 192)) + 0.5).astype(dtype)
    a_dev, b_dev = cp.asarray(a), cp.asarray(b)
    cuts = range(0, 256 * n_parts, 256)
    engine = get("persistent")
    parts = engine.gemm([a_dev[:, k:k + 256] for k in cuts], [b_dev[k:k + 256] for k in cuts])
    whole = engine.gemm([a_dev], [b_dev])
    assert parts.dtype == whole.dtype == a_dev.dtype
    parts, whole = (cp.asnumpy(x).astype(np.float64) for x in (parts, whole))
    same = np.mean(parts == whole)
    assert same >= 0.99, f"{same:.1%} of the elements equal one launch's"
    assert_close(parts, a.astype(np.float64) @ b.astype(np.float64), dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_auto_engine_on_an_unaligned_block(cp, rng, dtype, monkeypatch):
    """A block of one K part with N and K not multiples of 8, alpha, beta and C: auto-gpu sends it
    to the persistent engine on an sm_90 GPU (cuBLAS elsewhere) and the result is right.  The
    output is taken from a pool block left holding NaN, so an element not written fails."""
    from mgemm import hopper
    from mgemm.engines import auto, get

    monkeypatch.setattr(auto, "UNALIGNED_MIN_FLOPS", 0.0)  # the rule, on a block the test can check
    a, b = random(rng, (333, 517), dtype), random(rng, (517, 205), dtype)
    c = random(rng, (333, 205), dtype)
    a_dev, b_dev = cp.asarray(a), cp.asarray(b)
    assert auto.choose([a_dev], [b_dev]) == ("persistent" if hopper.supported() else "cublas")
    poison = cp.empty((333, 205), dtype=a_dev.dtype)
    poison.view(cp.uint16).fill(0x7FC0 if dtype == "bfloat16" else 0x7E00)
    del poison
    out = get("auto-gpu").gemm([a_dev], [b_dev], alpha=0.5, beta=2.0, c=cp.asarray(c))
    assert out.dtype == np.dtype(dtype)
    assert_close(cp.asnumpy(out), 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2.0 * c, dtype)


@pytest.mark.parametrize("engine", ["cublas", "persistent"])
def test_engine_c_of_a_narrower_dtype(cp, rng, engine):
    """C in float16 beside float32 A and B (``mgemm.gemm`` promotes the result to float32): the
    persistent kernels read C as the output type, so the engine converts it first."""
    from mgemm.engines import get

    a, b = random(rng, (130, 70), "float32"), random(rng, (70, 90), "float32")
    c = random(rng, (130, 90), "float16")
    out = get(engine).gemm([cp.asarray(a)], [cp.asarray(b)], alpha=1.5, beta=0.5,
                           c=cp.asarray(c), out_dtype="float32")
    assert out.dtype == np.float32
    assert_close(cp.asnumpy(out), 1.5 * (a.astype(np.float64) @ b) + 0.5 * c.astype(np.float64),
                 "float32")


def test_cublas_engine_multiplies_narrow_integers_in_the_product_type(cp):
    """int8 A and B in an int64 product (a wider C sets it): multiplied in int64, not wrapped in
    int8 and widened after; in one part and in two (the persistent engine takes floats only)."""
    from mgemm.engines import get

    a = cp.full((3, 4), 100, cp.int8)
    for parts in ([a], [a[:, :1], a[:, 1:]]):
        out = get("cublas").gemm(parts, [p.T for p in parts], beta=1.0, c=cp.ones((3, 3), cp.int64),
                               out_dtype="int64")
        assert out.dtype == np.int64
        np.testing.assert_array_equal(cp.asnumpy(out), np.full((3, 3), 40001))


@pytest.mark.parametrize("engine", ["cublas", "persistent"])
def test_block_task_waits_for_inputs_still_being_written(cp, rng, engine):
    """A chunk whose kernel is still running on the legacy default stream when the block task
    starts (a CuPy task returns once its work is queued): the task's own non-blocking stream
    must wait for it.  The chunk holds NaN until a kernel that first spins ~0.1 s copies the
    values in; a GEMM that does not wait reads NaN."""
    from mgemm.graph import _block_task

    n = 512
    a_host, b_host = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    src, b = cp.asarray(a_host), cp.asarray(b_host)
    a = cp.full((n, n), cp.nan)
    cp.cuda.Device().synchronize()
    late_copy = cp.RawKernel(r"""
    extern "C" __global__ void late_copy(const double* src, double* dst, long long n, long long cycles) {
      long long t0 = clock64();
      while (clock64() - t0 < cycles) {}
      for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
           i += (long long)gridDim.x * blockDim.x) dst[i] = src[i];
    }""", "late_copy")
    late_copy((32,), (256,), (src, a, np.int64(n * n), np.int64(200_000_000)))  # legacy stream
    out = _block_task(engine, (1, 1, 1), None, 1.0, 0.0, "float64", False, "off", False, "00", a, b)
    assert_close(cp.asnumpy(out), a_host @ b_host, "float64")


def test_cublas_tf32_only_when_allowed(cp, rng):
    from mgemm.engines import get

    a, b = random(rng, (512, 512), "f4"), random(rng, (512, 512), "f4")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    exact = cp.asnumpy(get("cublas").gemm([cp.asarray(a)], [cp.asarray(b)]))
    fast = cp.asnumpy(get("cublas").gemm([cp.asarray(a)], [cp.asarray(b)], allow_tf32=True))
    err_exact = np.linalg.norm(exact - ref) / np.linalg.norm(ref)
    err_fast = np.linalg.norm(fast - ref) / np.linalg.norm(ref)
    assert err_exact < 1e-6
    assert err_fast < 5e-3
    assert err_fast > 10 * err_exact, "allow_tf32 should switch to TF32 tensor cores"


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_matmul_with_cupy_chunks_stays_cupy(cp, rng, dtype):
    a, b = random(rng, (300, 200), dtype), random(rng, (200, 150), dtype)
    x = da.from_array(cp.asarray(a), chunks=(64, 50), asarray=False)
    y = da.from_array(cp.asarray(b), chunks=(70, 64), asarray=False)
    out = mgemm.matmul(x, y)
    assert isinstance(out._meta, cp.ndarray)
    with dask.config.set(scheduler="sync"):
        got = out.compute()
    assert isinstance(got, cp.ndarray)
    assert_close(cp.asnumpy(got), a.astype(np.float64) @ b.astype(np.float64), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "complex64",
                                   "int8", "bool"])
def test_pinned_copies_each_way(cp, rng, monkeypatch, dtype):
    """``staging.PINNED_COPIES``: host chunks (a transposed one among them) to the GPU and back
    through small pinned buffers, in many bands, exactly (a column-major device array comes back
    row-major; bfloat16 crosses as 16-bit integers); then a staged product through them."""
    pinned_copies(monkeypatch, True, 4096)
    stream = cp.cuda.Stream(non_blocking=True)
    x = random(rng, (301, 67), dtype)
    assert staging._rows(staging._bits(x)) > 0  # every type here crosses through the buffers
    for host in (x, x.T):
        dev = staging.to_device(cp, host, stream)
        stream.synchronize()
        np.testing.assert_array_equal(cp.asnumpy(dev), host)
        for device in (dev, cp.asfortranarray(dev)):
            back = staging.to_host(cp, device, stream)
            assert type(back) is np.ndarray and back.dtype == host.dtype
            assert back.flags.c_contiguous
            np.testing.assert_array_equal(back, host)
    if dtype in ("float64", "float32"):
        a, b = random(rng, (300, 190), dtype), random(rng, (190, 150), dtype)
        with dask.config.set(scheduler="sync"):
            got = mgemm.matmul(da.from_array(a, chunks=(100, 64)),
                               da.from_array(b, chunks=(64, 75)), engine="cublas",
                               block_size=(150, 75)).compute()
        assert_close(got, a.astype(np.float64) @ b.astype(np.float64), dtype)


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "cupy_copies"])
@pytest.mark.parametrize("by_part", [True, False], ids=["by_part", "whole"])
@pytest.mark.parametrize("engine", ["cublas", "persistent"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "complex64",
                                   "int64", "bool"])
def test_gpu_engines_stage_numpy_chunks(cp, rng, monkeypatch, engine, dtype, by_part, pinned):
    """NumPy chunks with a GPU engine named: each block's chunks go to the GPU and the block comes
    back, so the result is NumPy; ragged chunks, mismatched K chunking, a transposed operand,
    alpha, beta and C, and one block of every chunk; copied and multiplied by K part
    (``STAGE_BY_PART``) or whole, by part with the last part's GEMM and copy back in bands of
    rows (2 and 4 of them, ragged); through mgemm's pinned buffers (small ones, so each chunk
    crosses in several pieces) or CuPy's own copies."""
    from mgemm import graph

    exact = np.dtype(dtype).kind in "iub"
    if engine == "persistent" and (exact or dtype == "complex64"):
        pytest.skip("the persistent engine multiplies floats")
    monkeypatch.setattr(graph, "STAGE_BY_PART", by_part)
    monkeypatch.setattr(graph, "BAND_ROWS", 64)  # blocks of 150 rows in 2 bands, of 300 in 4
    pinned_copies(monkeypatch, pinned, 8192)
    a, b, c = random(rng, (300, 190), dtype), random(rng, (150, 190), dtype), \
        random(rng, (300, 150), dtype)
    if dtype == "bool":  # sparse enough that a product's entries are not all True
        a, b, c = rng.random(a.shape) < 0.03, rng.random(b.shape) < 0.03, rng.random(c.shape) < 0.03
    x = da.from_array(a, chunks=((100, 120, 80), (64, 70, 56)))
    y = da.from_array(b, chunks=((90, 60), (100, 90)))
    alpha, beta = {"int64": (3, 2), "bool": (1, 1)}.get(dtype, (0.5, 2))
    copies = staging.DeviceCopies()
    monkeypatch.setattr(staging, "COPIES", copies)
    with dask.config.set(scheduler="sync"):
        got = mgemm.gemm(x, y, da.from_array(c, chunks=70), alpha=alpha, beta=beta, trans_b=True,
                         engine=engine, block_size=(150, 150)).compute()
        whole = mgemm.matmul(x, y.T, engine=engine, block_size=(300, 150)).compute()
    # by part, the two blocks of ``got`` share B's chunks: kept by one block, read by the other;
    # once the product's chunks are released nothing stays on the GPU
    assert (copies.hits > 0) == by_part, (copies.kept, copies.hits)
    gc.collect()
    assert copies.nbytes(cp.cuda.Device().id) == 0
    assert type(got) is np.ndarray and type(whole) is np.ndarray
    assert got.dtype == np.dtype(dtype)
    if exact:  # in the type itself, as NumPy computes it (bool: and, then or)
        typed = np.dtype(dtype).type
        np.testing.assert_array_equal(got, typed(alpha) * (a @ b.T) + typed(beta) * c)
        np.testing.assert_array_equal(whole, a @ b.T)
        return
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    ref = a.astype(wide) @ b.astype(wide).T
    assert_close(got, 0.5 * ref + 2 * c.astype(wide), dtype)
    assert_close(whole, ref, dtype)


def test_gemm_plain_cupy(cp, rng):
    a, b, c = (random(rng, s, "f8") for s in ((40, 30), (50, 40), (30, 50)))
    got = mgemm.gemm(cp.asarray(a), cp.asarray(b), cp.asarray(c), alpha=2.0, beta=-1.0,
                     trans_a=True, trans_b=True)
    assert isinstance(got, cp.ndarray)
    assert_close(cp.asnumpy(got), 2.0 * a.T @ b.T - c, np.float64)


def test_local_cuda_cluster_end_to_end(cp, rng):
    pytest.importorskip("dask_cuda")
    from mgemm.bench import check, persist_cyclic, random_matrix, tolerance
    from mgemm.cluster import GPU_THREADS_PER_WORKER, start_default_cluster

    client = start_default_cluster(protocol="tcp", rmm_pool=None)
    try:
        workers = client.nthreads()
        n = len(workers)
        assert set(workers.values()) == {GPU_THREADS_PER_WORKER}
        # the workers ran mgemm's preload beside dask-cuda's own: they ignore a terminal's Ctrl-C,
        # and block it from their start (the loop whose threads started them blocks it)
        import signal
        assert set(client.run(lambda: int(signal.getsignal(signal.SIGINT))).values()) == \
            {int(signal.SIG_IGN)}
        assert set(client.run(lambda: signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
                   .values()) == {True}
        # Chunks laid out block-cyclically, so each worker holds half of each operand whatever
        # order the workers came up in (left to Dask, one worker could get every chunk of this
        # small product, and the plan would rightly follow the data there).
        a = persist_cyclic(client, lambda: random_matrix((2048, 1536), 512, "float32", gpu=True,
                                                         seed=3))
        b = persist_cyclic(client, lambda: random_matrix((1536, 1024), 512, "float32", gpu=True,
                                                         seed=4))
        out = mgemm.matmul(a, b).persist()
        err = check(a, b, out, tol=1e-5)
        assert err < 1e-5, f"relative error {err:.2e}"
        assert isinstance(out._meta, cp.ndarray), type(out._meta)
        if n > 1:  # the plan used every GPU
            held = client.who_has(out)
            used = {w for ws in held.values() for w in ws}
            assert len(used) == n, f"{n} workers, output blocks on {sorted(used)}: {dict(held)}"
        # float16 blocks of several K chunks: engine "auto" sends them to the persistent engine
        # on sm_90 (one launch for all chunks), and each worker prefetches its first blocks' inputs
        h = persist_cyclic(client, lambda: random_matrix((1024, 2048), 512, "float16", gpu=True,
                                                         seed=5))
        g = persist_cyclic(client, lambda: random_matrix((2048, 768), 512, "float16", gpu=True,
                                                         seed=6))
        half = mgemm.matmul(h, g).persist()
        err = check(h, g, half, tol=tolerance("float16"))
        assert err < tolerance("float16"), f"relative error {err:.2e}"
        # NumPy chunks on the GPU workers with engine "cublas": copied to each block's GPU and back
        hx = persist_cyclic(client, lambda: random_matrix((1024, 1536), 512, "float32", gpu=False,
                                                                     seed=7))
        hy = persist_cyclic(client, lambda: random_matrix((1536, 768), 512, "float32", gpu=False,
                                                                     seed=8))
        product = mgemm.matmul(hx, hy, engine="cublas", block_size=512)
        host = product.persist()
        err = check(hx, hy, host, tol=1e-5)
        assert err < 1e-5, f"relative error {err:.2e}"
        # where the plan reads a chunk twice on a worker, a read used the kept copy; once every
        # block is done no copy is kept
        def kept_copies() -> tuple[int, int]:  # on each worker (nested: pickled by value)
            import cupy

            from mgemm import staging
            return staging.COPIES.hits, staging.COPIES.nbytes(cupy.cuda.Device().id)

        kept = client.run(kept_copies)
        layer = product.dask.layers[product.name]
        again = any(n > 1 for task in layer.values() if len(task.args) > 9
                    for n in staging.parse_marks(task.args[9], 0)[1])
        assert (sum(hits for hits, _ in kept.values()) > 0) == again, kept
        assert all(nbytes == 0 for _, nbytes in kept.values()), kept
        assert isinstance(host._meta, np.ndarray), type(host._meta)
        assert type(host.blocks[0, 0].compute()) is np.ndarray
        # a staged product whose second GEMM on each worker fails: once its run is let go of,
        # no worker keeps a copy of it, and the same product run again is right and keeps none
        def fail_after(calls: int | None) -> None:  # the cublas engine raises after ``calls``
            import itertools

            from mgemm import engines
            engine = engines.get("cublas")
            engine.__dict__.pop("gemm", None)
            if calls is not None:
                count, real = itertools.count(), engine.gemm

                def gemm(*args, **kwargs):
                    if next(count) >= calls:
                        raise RuntimeError("a block failed")
                    return real(*args, **kwargs)
                engine.gemm = gemm

        def copies_left() -> tuple[int, int]:
            import cupy

            from mgemm import staging
            return len(staging.COPIES._entries), staging.COPIES.nbytes(cupy.cuda.Device().id)

        def settled() -> dict:
            deadline = time.monotonic() + 30
            while True:
                left = client.run(copies_left)
                if all(v == (0, 0) for v in left.values()) or time.monotonic() > deadline:
                    return left
                time.sleep(0.1)

        def let_go() -> None:  # until the scheduler holds none of the product's tasks
            deadline, token = time.monotonic() + 30, product.name.rsplit("-", 1)[1]
            while any(token in str(k) for k in client.run_on_scheduler(
                    lambda dask_scheduler: list(dask_scheduler.tasks))):
                assert time.monotonic() < deadline, "the product's tasks were not let go of"
                time.sleep(0.1)

        del host
        let_go()
        client.run(fail_after, 1)
        try:
            future = client.compute(product)
            assert "a block failed" in str(future.exception())
            assert settled() == {w: (0, 0) for w in workers}
            del future
        finally:
            client.run(fail_after, None)
        let_go()
        err = check(hx, hy, product.persist(), tol=1e-5)
        assert err < 1e-5, f"relative error {err:.2e}"
        assert settled() == {w: (0, 0) for w in workers}
        # plain CuPy operands: their chunks are scattered to the workers, not carried in the graph
        x, y = random(rng, (768, 640), "f4"), random(rng, (640, 512), "f4")
        got = mgemm.matmul(cp.asarray(x), cp.asarray(y), client=client, block_size=256)
        assert isinstance(got, cp.ndarray), type(got)
        assert_close(cp.asnumpy(got), x.astype(np.float64) @ y.astype(np.float64), np.float32)
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
