"""The Dask graph mgemm builds: one task per output block, placement from the plan, fix-ups."""

from __future__ import annotations

import time

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import wait

import mgemm
from conftest import assert_close, random
from mgemm.graph import BLOCK_PREFIX, common_k_chunks, input_keys


def _n_tasks(x: da.Array) -> int:
    """Tasks of the product alone: everything in the graph except the inputs' own layers."""
    return len(dict(x.__dask_graph__())) - 2 * 8 * 8


def test_task_count_against_dask_matmul():
    a = da.random.default_rng(0).random((800, 800), chunks=100)  # 8 × 8 blocks
    b = da.random.default_rng(1).random((800, 800), chunks=100)
    a, b = a.persist(scheduler="sync"), b.persist(scheduler="sync")
    ours = mgemm.matmul(a, b, block_size=100)
    theirs = da.matmul(a, b)
    n_ours, n_theirs = _n_tasks(ours), _n_tasks(theirs)
    print(f"tasks for 8×8×8 blocks: mgemm {n_ours}, dask.array.matmul {n_theirs}")
    assert n_ours == 64
    assert n_theirs >= 8 * 8 * 8
    with dask.config.set(scheduler="sync"):
        assert_close(ours.compute(), theirs.compute(), np.float64)


def test_common_k_chunks():
    assert common_k_chunks((3, 3), (3, 3)) == (3, 3)
    assert common_k_chunks((1, 5), (4, 2)) == (1, 3, 2)
    assert sum(common_k_chunks((7, 2, 9), (5, 5, 8))) == 18


def test_placement_annotations_follow_the_plan(client, rng):
    a, b = random(rng, (64, 48), "f8"), random(rng, (48, 64), "f8")
    x, y = da.from_array(a, chunks=16), da.from_array(b, chunks=16)
    out = mgemm.matmul(x, y, block_size=16, client=client, split="off")
    annotations = out.__dask_graph__().layers[out.name].annotations
    assert annotations["allow_other_workers"] is True
    workers = {annotations["workers"]((out.name, i, j))[0] for i in range(4) for j in range(4)}
    assert workers == set(client.nthreads())
    assert_close(client.compute(out).result(), a @ b, np.float64)
    # The blocks ran where the plan put them.
    placed = client.persist(out)
    wait(placed)
    who = client.who_has(placed)
    for (name, i, j), ws in who.items():
        assert annotations["workers"]((name, i, j))[0] in ws


def test_split_blocks_have_deterministic_fixup(client, rng):
    # 3 blocks over 2 workers with many K chunks: the planner splits the tail block.
    a, b = random(rng, (48, 256), "f8"), random(rng, (256, 16), "f8")
    x, y = da.from_array(a, chunks=(16, 16)), da.from_array(b, chunks=(16, 16))
    out = mgemm.matmul(x, y, block_size=16, client=client, split="on")
    keys = [k for k in dict(out.__dask_graph__()) if isinstance(k, tuple)
            and str(k[0]).startswith(BLOCK_PREFIX + "part-")]
    assert keys, "expected split (partial) tasks"
    r1 = client.compute(out).result()
    r2 = client.compute(out).result()
    np.testing.assert_array_equal(r1, r2)
    assert_close(r1, a @ b, np.float64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_split_16bit_blocks_are_rounded_once(client, rng, dtype):
    """A 16-bit block split along K adds its partials in float32 and rounds once, as one task
    does: split and whole give the same elements.  (Partials rounded to 16 bits before the
    fix-up differed from the whole block's on about a quarter of the split block's elements.)"""
    from mgemm.cluster import extension_dtype

    t = extension_dtype(dtype) if dtype == "bfloat16" else np.dtype(dtype)
    a = (rng.random((48, 4096)) + 0.5).astype(t)  # no cancellation: every element is large
    b = (rng.random((4096, 16)) + 0.5).astype(t)
    x, y = da.from_array(a, chunks=(16, 256)), da.from_array(b, chunks=(256, 16))
    split = mgemm.matmul(x, y, block_size=16, client=client, split="on")
    parts = [k for k in dict(split.__dask_graph__()) if isinstance(k, tuple)
             and str(k[0]).startswith(BLOCK_PREFIX + "part-")]
    assert parts, "expected split (partial) tasks"
    rows = sorted({16 * k[1] + r for k in parts for r in range(16)})
    got = client.compute(split).result()
    whole = client.compute(mgemm.matmul(x, y, block_size=16, client=client, split="off")).result()
    assert got.dtype == whole.dtype == t
    same = np.mean(got[rows].astype(np.float64) == whole[rows].astype(np.float64))
    assert same >= 0.99, f"{same:.1%} of the split block's elements equal the whole block's"
    assert_close(got, a.astype(np.float64) @ b.astype(np.float64), dtype)


def test_the_plan_sees_where_persisted_chunks_live(client):
    from mgemm.api import _locations, _snapshot

    a = da.random.default_rng(0).random((64, 64), chunks=16).persist()
    b = da.random.default_rng(1).random((64, 64), chunks=16).persist()
    wait([a, b])
    ident, who = _snapshot(client, a, b)
    assert set(ident["workers"]) == set(client.nthreads())
    where = _locations(a, b, who)
    assert where is not None and len(where) == 2 * 16
    held = client.who_has([a, b])
    for (name, *idx), workers in held.items():
        kind = "a" if name == a.name else "b"
        assert where[(kind, *idx)] in workers


def test_a_partly_computed_operand_does_not_steer_the_plan():
    """Only operands whose every chunk is held somewhere count: a half-computed one would send
    every block to the worker that finished its chunks first."""
    from mgemm.api import _locations

    a = da.ones((64, 64), chunks=32)
    b = da.zeros((64, 64), chunks=32)
    a_keys = [(a.name, i, k) for i in range(2) for k in range(2)]
    b_keys = [(b.name, k, j) for k in range(2) for j in range(2)]
    who = {key: ["w0"] for key in a_keys}
    who.update({b_keys[0]: ["w0"], b_keys[1]: []})  # b: two chunks done, one running, one queued
    assert _locations(a, b, who) == {("a", i, k): "w0" for i in range(2) for k in range(2)}
    who.update({key: ["w1"] for key in b_keys})
    assert len(_locations(a, b, who)) == 8
    assert _locations(a, b, {a_keys[0]: ["w0"]}) is None


def test_bench_trace_marks_split_the_timed_run(client):
    """``mgemm bench --trace`` rows say when the graph was built, handed to the scheduler,
    finished and synchronized, in order, inside the run's seconds (where a run's time went
    before its first task started)."""
    from mgemm import bench

    rows = []
    case = bench.Case("float64-256", 256, 256, 256, "float64", 128)
    out = bench.run_case(client, case, ["mgemm", "dask"], repeat=2, options={}, gpu=False,
                         trace=rows.append)
    assert [r.method for r in out] == ["mgemm", "dask.array.matmul"] and len(rows) == 4
    for row in rows:  # the plan each mgemm run made, as `mgemm plan` prints it
        assert len(row["plans"]) == (1 if row["method"] == "mgemm" else 0)
        assert all("predicted s" in p and "worker" in p for p in row["plans"])
    for row in rows:
        m = row["marks"]
        assert 0 < m["built"] <= m["submitted"] <= m["done"] <= m["synced"] == row["seconds"]
        assert row["workers"]  # the task stream saw the run


def test_bench_refuses_inputs_the_cluster_cannot_hold_before_making_them(client, monkeypatch):
    """A case whose A, B and C outgrow the workers' memory raises ``MemoryPlanError`` at once:
    no input is made (a host out of memory otherwise) and no method runs."""
    from mgemm import bench
    from mgemm.plan import MemoryPlanError

    monkeypatch.setattr(bench, "random_matrix", lambda *a, **k: pytest.fail("inputs were made"))
    case = bench.Case("float64-1000000", 10**6, 10**6, 10**6, "float64", 10**5)
    with pytest.raises(MemoryPlanError, match="A, B and C take 22.* workers may use"):
        bench.run_case(client, case, ["mgemm", "dask"], repeat=1, options={}, gpu=False)


def test_bench_records_a_failing_method_and_goes_on(client, monkeypatch):
    """A method that raises (or fails its check) becomes a row with the error and no times; the
    next method of the case still runs, and the table names the failure."""
    from mgemm import bench

    def broken(a, b, options):
        raise TypeError("no matrix product for this dtype")

    monkeypatch.setitem(bench.METHODS, "dask", bench.Method("dask.array.matmul", broken))
    case = bench.Case("float64-128", 128, 128, 128, "float64", 64)
    out = bench.run_case(client, case, ["dask", "mgemm"], repeat=1, options={}, gpu=False)
    failed, ok = out
    assert failed.error == "TypeError: no matrix product for this dtype" and failed.seconds == []
    assert not ok.error and len(ok.seconds) == 1 and ok.rel_error < 1e-12
    text = bench.table(out)
    assert "failed: TypeError: no matrix product" in text and "mgemm" in text


def test_bench_check_judges_a_result_as_the_type_it_declares():
    """A bfloat16 result whose chunks are float32 (dask.array.matmul's, under numpy.matmul) is
    checked after rounding to bfloat16, as mgemm's own bfloat16 chunks are: same error, not a
    float32 error that made dask look 1e4 times more exact in the demo."""
    from mgemm import bench

    bf16 = bench.array_dtype("bfloat16")
    rng = np.random.default_rng(3)
    a64, b64 = rng.standard_normal((64, 48)), rng.standard_normal((48, 40))
    a, b = (da.from_array(x.astype(bf16), chunks=32) for x in (a64, b64))
    wide = a.astype(np.float32) @ b.astype(np.float32)  # float32 chunks
    declared = wide.map_blocks(lambda x: x, dtype=bf16)  # chunks still float32, the array bf16
    rounded = wide.astype(bf16)
    tol = bench.tolerance("bfloat16", False)
    assert bench.check(a, b, declared, tol=tol) == bench.check(a, b, rounded, tol=tol) > 1e-4
    assert bench.check(a, b, wide, tol=tol) < 1e-6  # declared float32: judged as float32


def test_matmul_on_a_cluster_installs_the_dtype_plugin_on_every_worker(client):
    x = da.ones((64, 64), chunks=32)
    mgemm.matmul(x, x, client=client).compute()
    installed = client.run(lambda dask_worker: "mgemm-extension-dtypes" in dask_worker.plugins)
    assert installed and all(installed.values())


def test_scaling_summary_joins_the_anchor_dask_and_cublasmp():
    """Efficiency against N × the one-GPU anchor of the same dtype and size, × dask, and for mgemm
    × cuBLASMp at its fastest block size."""
    from mgemm import bench

    def row(method, seconds, tflops, **extra):
        return dict(case="strong-float32-65536", method=method, m=65536, n=65536, k=65536,
                    dtype="float32", median_s=seconds, tflops=tflops, **extra)
    rows = [dict(case="float32-65536", method="cublas-1gpu", dtype="float32", n=65536,
                 median_s=10.5, tflops=50.0),
            row("mgemm", 1.0, 360.0), row("dask.array.matmul", 2.0, 180.0),
            row("cublasmp", 1.6, 225.0, block=16384), row("cublasmp", 1.25, 288.0, block=4096),
            row("cublasmp", float("nan"), float("nan"), block=1024, error="CHECK FAILED"),
            dict(row("mgemm", float("nan"), float("nan"), error="TypeError: no"),
                 case="strong-bfloat16-65536", dtype="bfloat16")]
    text = bench.scaling_summary(rows, 8).splitlines()
    assert "x 8*cuBLAS" in text[0] and "x cuBLASMp" in text[0]
    mg, dk, mp16, mp4 = (line.split() for line in text[1:5])
    assert mg[-3:] == ["0.90", "2.00", "1.25"] and dk[-3:] == ["0.45", "1.00", "n/a"]
    assert mp16[2:4] == ["nb=16384", "1.600"] and mp4[-3:] == ["0.72", "1.60", "n/a"]
    assert "failed: CHECK FAILED" in text[5] and "nb=1024" in text[5]
    assert "failed: TypeError: no" in text[6]


def test_bench_inputs_laid_out_block_cyclically(client):
    """``mgemm bench`` persists its inputs with chunk (i, j) on worker (i + j) mod W, whatever
    Dask would have chosen, so that runs on different clusters move the same data."""
    from distributed import wait

    from mgemm import bench

    a = bench.persist_cyclic(client, lambda: bench.random_matrix((96, 64), 16, "float64",
                                                                 gpu=False, seed=7))
    wait(a)
    workers = sorted(client.nthreads())
    held = client.who_has(a)
    assert len(held) == 6 * 4
    for key, where in held.items():
        assert list(where) == [workers[(key[1] + key[2]) % len(workers)]], (key, where)
    assert np.array_equal(a.compute(), bench.random_matrix((96, 64), 16, "float64", gpu=False,
                                                           seed=7).compute())


def _persisted_cyclic(client, seeds: tuple[int, int]):
    """Two random 64² float64 operands of 16² chunks persisted block-cyclically, and the layout
    (chunk key → worker)."""
    from mgemm import bench

    a, b = (bench.persist_cyclic(client, lambda seed=seed: bench.random_matrix(
        (64, 64), 16, "float64", gpu=False, seed=seed)) for seed in seeds)
    wait([a, b])
    return a, b, bench.chunk_homes(client, a, b)


def test_bench_runs_start_from_the_persisted_layout(client):
    """Each timed run of ``mgemm bench`` starts with every input chunk once, on the worker it was
    persisted on: the copies a product fetched are dropped, not the originals (left to the
    active memory manager, chunks changed workers from run to run)."""
    import mgemm
    from mgemm import bench

    a, b, keep = _persisted_cyclic(client, seeds=(3, 4))
    assert len(keep) == 32 and len(set(keep.values())) == len(client.nthreads())
    with bench.memory_manager_paused(client):
        for _ in range(2):
            _, c = bench.timed(client, lambda: mgemm.matmul(a, b), keep=keep)
            copies = sum(len(w) for w in client.who_has([a, b]).values())
            assert copies > 32  # the product fetched chunks: there are copies to drop
            np.testing.assert_allclose(c.compute(), a.compute() @ b.compute(), rtol=1e-10, atol=1e-12)
            del c
            bench.drop_replicas(client, keep)
            assert {k: tuple(v) for k, v in client.who_has([a, b]).items()} == {
                k: (w,) for k, w in keep.items()}


@pytest.mark.parametrize("layout", ["cyclic", "dask"])
def test_bench_rows_say_which_layout(client, layout):
    """``mgemm bench --layout``: the rows record where the inputs were persisted; an unknown
    layout is refused before anything is made."""
    from mgemm import bench

    case = bench.Case("float64-128", 128, 128, 128, "float64", 64)
    out = bench.run_case(client, case, ["mgemm"], repeat=1, options={}, gpu=False, layout=layout)
    assert out[0].environment["layout"] == layout and out[0].rel_error < 1e-12
    with pytest.raises(ValueError, match="layout must be one of"):
        bench.run_case(client, case, ["mgemm"], repeat=1, options={}, gpu=False, layout="rows")


def test_bench_rows_record_the_options_given(client):
    """A bench row records mgemm's engine, block size and split as the run was given them."""
    from mgemm import bench, config

    case = bench.Case("float64-128", 128, 128, 128, "float64", 64)
    options = config.resolve(engine="numpy", block_size=64, split="off")
    options.pop("client")
    env = bench.run_case(client, case, ["mgemm"], repeat=1, options=options, gpu=False)[0].environment
    assert (env["engine"], env["block_size"], env["split"]) == ("numpy", "64", "off")


def _replicas_arrive(client, want: dict, timeout: float = 10.0) -> dict:
    """Poll until every worker in ``want`` holds its keys (or time out); the ones still missing."""
    import time

    from mgemm.cluster import scheduler_snapshot
    deadline = time.monotonic() + timeout
    while True:
        held = scheduler_snapshot(client, {k for keys in want.values() for k in keys})[1]
        missing = {w: [k for k in keys if w not in held.get(k, ())] for w, keys in want.items()}
        missing = {w: keys for w, keys in missing.items() if keys}
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.05)


def test_building_a_product_prefetches_the_first_tasks_remote_inputs(client, monkeypatch):
    """Once the plan is made, each worker is asked for the remote chunks its first tasks read,
    before the graph is submitted: building the product (not computing it) brings them."""
    from mgemm import api, bench
    from mgemm.cluster import PREFETCH_BLOCKS, local_scheduler

    assert local_scheduler(client) is client.cluster.scheduler  # the fixture's in-process one
    a, b, keep = _persisted_cyclic(client, seeds=(5, 6))
    asked: list = []
    inner = api.prefetch
    monkeypatch.setattr(api, "prefetch", lambda c, requests: (asked.append(requests), inner(c, requests)))
    with bench.memory_manager_paused(client):
        c = mgemm.matmul(a, b)  # built, not computed
        assert len(asked) == 1
        want = asked[0]
        assert set(want) == set(keep.values()) and all(want.values())
        assert all(keep[k] != w for w, keys in want.items() for k in keys)  # remote chunks only
        # ... read by the worker's first PREFETCH_BLOCKS tasks, no others
        layer = c.__dask_graph__().layers[c.name]
        workers, priority = layer.annotations["workers"], layer.annotations["priority"]
        for w, keys in want.items():
            mine = sorted((k for k in layer if workers(k) == [w]), key=lambda k: -priority(k))
            reads = {d for k in mine[:PREFETCH_BLOCKS] for d in layer[k].dependencies}
            assert set(keys) <= reads
        assert _replicas_arrive(client, want) == {}
        np.testing.assert_allclose(c.compute(), a.compute() @ b.compute(), rtol=1e-10, atol=1e-12)
        bench.drop_replicas(client, keep)


def test_prefetch_through_the_scheduler_handler(client):
    """A client whose scheduler is not in its process asks through the placement plugin's
    handler; keys arrive as lists (msgpack) and are read back as tuples; chunks held nowhere,
    unknown or already held are skipped."""
    from mgemm import bench
    from mgemm.cluster import install_placement, local_scheduler

    install_placement(client)
    a = bench.persist_cyclic(client, lambda: bench.random_matrix((32, 32), 16, "float64",
                                                                 gpu=False, seed=7))
    wait(a)
    keep = bench.chunk_homes(client, a)
    workers = sorted(client.nthreads())
    want = {w: [k for k, home in keep.items() if home != w] for w in workers}
    requests = {w: [list(k) for k in keys] + [["no-such-key", 0, 0]] + [list(k) for k, h in keep.items() if h == w]
                for w, keys in want.items()}
    count = client.sync(client.scheduler.mgemm_prefetch, requests=requests)
    assert count == sum(len(v) for v in want.values())
    assert _replicas_arrive(client, want) == {}
    bench.drop_replicas(client, keep)
    from distributed import Client
    with Client(client.scheduler.address) as other:
        assert local_scheduler(other) is None  # connected by address: no cluster object here


def test_first_readers_name_the_earliest_task_that_reads_each_chunk():
    """Every chunk a task reads has a first reader: a worker with a task that reads it, none
    earlier in its run order; C's part of a block goes to the worker that finishes the block
    (the fix-up's for a split one)."""
    from mgemm.graph import first_readers, input_keys
    from mgemm.plan import GiB, Problem, Worker, make_plan

    workers = [Worker(f"w{i}", "cpu", 1e9, GiB, 1e12) for i in range(3)]
    plan = make_plan(Problem((8,) * 5, (8,) * 2, (4,) * 6, 8), workers, block_size=8, split="on")
    assert plan.fixup, "the plan should split some blocks"
    first = first_readers(plan)
    readers: dict = {}
    for w in plan.work:
        for key in input_keys("a", "b", plan.blocks[w.block], plan.k_chunks_of(w))[1]:
            readers.setdefault(key, []).append((w.seq, w.worker))
    assert set(readers) == {key for key in first if key[0] != "c"}
    for key, tasks in readers.items():
        earliest = min(seq for seq, _ in tasks)
        assert (earliest, first[key]) in tasks, key
    rows = sorted({blk.i0 for blk in plan.blocks})
    cols = sorted({blk.j0 for blk in plan.blocks})
    for index, blk in enumerate(plan.blocks):
        writer = plan.fixup.get(index) or next(w.worker for w in plan.work if w.block == index)
        assert first[("c", rows.index(blk.i0), cols.index(blk.j0))] == writer


def test_blocks_fused_with_later_operations_keep_their_placement(client, rng):
    """``da.tanh(mgemm.matmul(a, b)) + 1``: Dask fuses each block task with what follows and
    drops the blocks' annotations; the placement plugin gives every fused block task its planned
    worker back (loosely) before the scheduler places it."""
    from mgemm.graph import placement_of

    x, y = random(rng, (64, 48), "f8"), random(rng, (48, 64), "f8")
    a, b = client.persist([da.from_array(x, chunks=16), da.from_array(y, chunks=16)])
    out = mgemm.matmul(a, b, block_size=16, split="off", client=client)
    planned = {key[1:]: worker for key, (worker, _) in placement_of(out).items()}
    assert len(set(planned.values())) == 2
    chained = client.persist(da.tanh(out) + 1)
    wait(chained)

    def restrictions(dask_scheduler):
        return {key: (ts.worker_restrictions, ts.loose_restrictions)
                for key, ts in dask_scheduler.tasks.items()
                if isinstance(key, tuple) and str(key[0]).startswith(BLOCK_PREFIX)
                and key not in out.dask}

    fused = client.run_on_scheduler(restrictions)
    assert len(fused) == len(planned), sorted(fused)
    for key, (workers, loose) in fused.items():
        assert workers == {planned[tuple(key[1:])]} and loose, key
    assert_close(client.compute(chained).result(), np.tanh(x @ y) + 1, np.float64)


def test_a_product_computed_itself_keeps_its_placement(client, rng):
    """``client.persist(mgemm.matmul(a, b))``: low-level fusion drops the annotations of a
    product computed on its own too, and the placement plugin gives each block task its planned
    worker (loosely) back."""
    from mgemm.graph import placement_of

    x, y = random(rng, (64, 48), "f8"), random(rng, (48, 64), "f8")
    a, b = client.persist([da.from_array(x, chunks=16), da.from_array(y, chunks=16)])
    out = mgemm.matmul(a, b, block_size=16, split="off", client=client)
    planned = {key: worker for key, (worker, _) in placement_of(out).items()}
    assert len(set(planned.values())) == 2
    held = client.persist(out)
    wait(held)

    def restrictions(dask_scheduler):
        return {key: (ts.worker_restrictions, ts.loose_restrictions,
                      [w.address for w in ts.who_has or ()])
                for key, ts in dask_scheduler.tasks.items() if key in planned}

    got = client.run_on_scheduler(restrictions)
    assert set(got) == set(planned)
    for key, (workers, loose, where) in got.items():
        assert workers == {planned[key]} and loose and where == [planned[key]], key
    assert_close(held.compute(), x @ y, np.float64)


@pytest.mark.parametrize("on_client", [False, True], ids=["local", "client"])
def test_products_computed_beside_other_collections_come_back_in_order(client, rng, on_client):
    """``dask.compute`` and ``dask.persist`` of mgemm's results beside plain dask arrays (and
    under ``patch_dask``, ``a @ b`` beside ``x + 1``): each result in its own place.  A result
    type with an optimizer of its own was optimized apart from the others, and dask handed the
    results back in the order of those groups."""
    import dask

    x, y, z = (random(rng, (60, 60), "f8") for _ in range(3))
    a, b, w = (da.from_array(m, chunks=20) for m in (x, y, z))
    options = {"client": client} if on_client else {"client": None}
    want = (x @ y, z + 1, y @ x)
    got = dask.compute(mgemm.matmul(a, b, **options), w + 1, mgemm.matmul(b, a, **options))
    for g, e in zip(got, want):
        assert_close(g, e, np.float64)
    with mgemm.patch_dask(**options):
        got = dask.compute(a @ b, w + 1, b @ a)
        held = dask.persist(a @ b, w + 1, b @ a)
    for g, e in zip(got, want):
        assert_close(g, e, np.float64)
    for g, e in zip(held, want):
        assert_close(g.compute(), e, np.float64)


def test_an_eager_result_is_put_together_here_not_on_a_worker(client, rng):
    """NumPy operands on a client: the result's blocks come to this process one by one and are
    copied into it; no task concatenates the whole result on a worker (Dask's ``compute``
    would, past that worker's memory for a large product).  One block comes back as it is."""
    from distributed import get_task_stream

    x, y = random(rng, (64, 48), "f8"), random(rng, (48, 64), "f8")
    with get_task_stream(client) as stream:
        got = mgemm.matmul(x, y, block_size=16, split="off", client=client)
    assert_close(got, x @ y, np.float64)
    assert got.flags.writeable and got.flags.c_contiguous
    ran = {str(t["key"][0] if isinstance(t["key"], tuple) else t["key"]) for t in stream.data}
    assert any(name.startswith("mgemm-block-") for name in ran), ran
    assert not any("finalize" in name or "concatenate" in name for name in ran), ran
    one = mgemm.matmul(x, y, client=client)
    assert_close(one, x @ y, np.float64)
    assert one.flags.writeable


def test_build_refuses_operands_chunked_unlike_the_plan():
    from mgemm import graph
    from mgemm.plan import GiB, Problem, Worker, make_plan

    a, b = da.ones((32, 32), chunks=16), da.ones((32, 32), chunks=16)
    workers = [Worker(f"w{i}", "cpu", 1e9, GiB, 1e12) for i in range(2)]
    plan = make_plan(Problem(a.chunks[0], b.chunks[1], a.chunks[1], 8), workers, block_size=16)
    for x, y in ((a, b.rechunk((8, 16))), (a.rechunk((16, 8)), b), (a.rechunk((8, 16)), b),
                 (a, b.rechunk((16, 8)))):
        with pytest.raises(ValueError, match="another chunking"):
            graph.build(x, y, plan, engine="numpy", out_dtype=np.dtype("f8"))


def test_block_keys_change_with_the_plan():
    """Two plans for the same operands that put the blocks on other workers give the product
    other keys, so the tasks (and persisted results) of one never stand in for the other's."""
    from mgemm import graph
    from mgemm.plan import GiB, Problem, Worker, make_plan

    a, b = da.ones((48, 64), chunks=16), da.ones((64, 16), chunks=16)
    problem = Problem(a.chunks[0], b.chunks[1], a.chunks[1], 8)
    plans = [make_plan(problem, [Worker(f"w{i}", "cpu", s * 1e9, GiB, 1e12)
                                 for i, s in enumerate(speeds)], block_size=16, split="off")
             for speeds in ((1, 1), (2, 1))]
    assert plans[0].work != plans[1].work
    names = [graph.build(a, b, p, engine="numpy", out_dtype=np.dtype("f8")).name for p in plans]
    assert names[0] != names[1]
    assert graph.build(a, b, plans[0], engine="numpy", out_dtype=np.dtype("f8")).name == names[0]


def _split_three_ways():
    """A plan, written out, for one 16² block with 12 K chunks in three pieces on three workers
    (the fix-up on the second piece's worker); and operands chunked to match."""
    from mgemm.plan import Block, GiB, Plan, Problem, Work, Worker

    rng = np.random.default_rng(0)
    a, b, c = rng.random((16, 48)), rng.random((48, 16)), rng.random((16, 16))
    x, y = da.from_array(a, chunks=(16, 4)), da.from_array(b, chunks=(4, 16))
    workers = tuple(Worker(f"w{i}", "cpu", 1e9, GiB, 1e12) for i in range(3))
    work = (Work(0, 0, 4, "w2", 0), Work(0, 4, 8, "w0", 1), Work(0, 8, 12, "w1", 0))
    plan = Plan(Problem((16,), (16,), (4,) * 12, 8), workers, (Block(0, 1, 0, 1),), work,
                {0: "w0"}, {w.name: 0.0 for w in workers})
    return plan, (a, b, c), (x, y, da.from_array(c, chunks=16))


def test_a_block_split_three_ways_sums_every_partial_with_alpha_and_beta_once():
    from mgemm import graph

    plan, (a, b, c), (x, y, z) = _split_three_ways()
    out = graph.build(x, y, plan, c=z, alpha=2.0, beta=0.5, engine="numpy",
                      out_dtype=np.dtype("f8"))
    with dask.config.set(scheduler="sync"):
        assert_close(out.compute(), 2.0 * (a @ b) + 0.5 * c, np.float64)
    # the fix-up adds the partials in K order: partial p reads the p-th K range
    layer = out.dask.layers[out.name]
    parts = sorted(k for k in layer if len(k) == 4)
    k_of = [sorted(dep[2] for dep in layer[k].dependencies if dep[0] == x.name) for k in parts]
    assert [ks[0] for ks in k_of] == [0, 4, 8]


def test_the_fixup_adds_the_partials_in_k_order_and_gives_the_block_its_type():
    """Partials of 1e16, -1e16 and 1 (in K order) sum to exactly 1 in K order, and to 0 in any
    other; a float16 block split three ways comes back float16 when it is the only block (Dask
    takes an array's type from its first chunk, which a split block is here)."""
    from mgemm import graph

    plan, _, _ = _split_three_ways()
    a = np.ones((16, 48))
    b = np.empty((48, 16))
    b[:16], b[16:32], b[32:] = 1e16 / 16, -1e16 / 16, 1 / 16  # each piece's 16 terms add exactly
    x, y = da.from_array(a, chunks=(16, 4)), da.from_array(b, chunks=(4, 16))
    out = graph.build(x, y, plan, engine="numpy", out_dtype=np.dtype("f8"), placement=False)
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(out.compute(), np.ones((16, 16)))
        rng = np.random.default_rng(3)
        a16, b16 = rng.random((16, 48)).astype("f2"), rng.random((48, 16)).astype("f2")
        x16, y16 = da.from_array(a16, chunks=(16, 4)), da.from_array(b16, chunks=(4, 16))
        half = graph.build(x16, y16, plan, engine="numpy", out_dtype=np.dtype("f2"),
                           placement=False)
        got = half.compute()
    assert half.dtype == got.dtype == np.float16
    assert_close(got, a16.astype(np.float64) @ b16.astype(np.float64), "float16")


def test_prefetch_asks_for_the_first_tasks_remote_chunks_only():
    """``_first_remote_inputs``: a worker of six one-chunk blocks is asked for the remote chunks
    of its first ``count`` tasks, in its order, and for nothing it holds or later tasks read."""
    from mgemm.api import _first_remote_inputs
    from mgemm.plan import GiB, Problem, Worker, make_plan

    problem = Problem((4,) * 3, (4,) * 2, (4,) * 2, 8)
    plan = make_plan(problem, [Worker("w0", "cpu", 1e9, GiB, 1e9)], block_size=4, split="off")
    x, y = da.ones((12, 8), chunks=4), da.ones((8, 8), chunks=4)
    # every chunk held by w1 but A's first row chunk at k = 0, which w0 holds
    who = {(x.name, i, k): ["w1"] for i in range(3) for k in range(2)}
    who |= {(y.name, k, j): ["w1"] for k in range(2) for j in range(2)}
    who[(x.name, 0, 0)] = ["w0", "w1"]
    for count in (1, 2, 4):
        asked = _first_remote_inputs(plan, x, y, who, count)
        first = plan.work_for("w0")[:count]
        want = []
        for w in first:
            _, keys = input_keys(x.name, y.name, plan.blocks[w.block], plan.k_chunks_of(w))
            want += [k for k in keys if k not in want and k != (x.name, 0, 0)]
        assert list(asked) == ["w0"] and asked["w0"] == want, (count, asked)
        assert len(plan.work_for("w0")) == 6 and len(set(want)) == len(want)


def test_placement_puts_pieces_and_the_fixup_where_the_plan_says_in_its_order():
    from mgemm import graph

    plan, _, (x, y, _) = _split_three_ways()
    out = graph.build(x, y, plan, engine="numpy", out_dtype=np.dtype("f8"))
    placed = graph.placement_of(out)
    # (worker, priority): Dask runs higher priorities first, so -seq; the fix-up on its worker,
    # ranked with the last piece it waits for
    parts = sorted(k for k in placed if len(k) == 4)
    assert [placed[k] for k in parts] == [("w2", 0), ("w0", -1), ("w1", 0)]
    assert placed[(out.name, 0, 0)] == ("w0", -1)


def test_placement_follows_each_workers_order():
    from mgemm import graph
    from mgemm.plan import GiB, Problem, Worker, make_plan

    x, y = da.ones((64, 16), chunks=16), da.ones((16, 64), chunks=16)
    workers = [Worker(f"w{i}", "cpu", 1e9, GiB, 1e12) for i in range(2)]
    plan = make_plan(Problem((16,) * 4, (16,) * 4, (16,), 8), workers, block_size=16, split="off")
    out = graph.build(x, y, plan, engine="numpy", out_dtype=np.dtype("f8"))
    placed, gn = graph.placement_of(out), plan.grid[1]
    for w in workers:
        mine = plan.work_for(w.name)
        assert [placed[(out.name, *divmod(t.block, gn))] for t in mine] == [
            (w.name, -t.seq) for t in mine]
    assert graph.placement_of(graph.build(x, y, plan, engine="numpy", out_dtype=np.dtype("f8"),
                                          placement=False)) == {}


def test_c_is_not_read_when_beta_is_zero():
    from mgemm import graph

    plan, (a, b, _), (x, y, z) = _split_three_ways()
    out = graph.build(x, y, plan, c=z, beta=0.0, engine="numpy", out_dtype=np.dtype("f8"))
    assert not any(isinstance(k, tuple) and k[0] == z.name for k in dict(out.dask))
    with dask.config.set(scheduler="sync"):
        assert_close(out.compute(), a @ b, np.float64)


def test_blocks_that_do_not_tile_the_chunks_are_refused():
    import dataclasses

    from mgemm import graph
    from mgemm.plan import Block

    plan = _split_three_ways()[0]
    grid = dataclasses.replace(plan, problem=dataclasses.replace(plan.problem, m_chunks=(8, 8)),
                               blocks=(Block(0, 1, 0, 1),))  # row chunk 1 left out
    with pytest.raises(ValueError, match="do not form a grid"):
        graph.out_chunks(grid)
    four = dataclasses.replace(plan, problem=dataclasses.replace(plan.problem, m_chunks=(8, 8),
                                                                 n_chunks=(8, 8)),
                               blocks=(Block(0, 1, 0, 1), Block(0, 1, 1, 2), Block(1, 2, 0, 1)))
    with pytest.raises(ValueError, match="do not form a grid"):  # block (1, 1) missing
        graph.out_chunks(four)


# -- mgemm.bench: the check, the inputs, the timing and the rows ------------------------------------

def test_bench_check_fails_on_a_wrong_product(rng):
    """The float64 check of ``mgemm demo``/``bench`` passes a right float32 product and fails one
    off by 1e-4 (float32's bound is 1e-5, TF32's 5e-3), one with non-finite values and a complex
    one whose imaginary parts are wrong; it samples no more rows or columns than there are."""
    from mgemm import bench

    x, y = rng.standard_normal((40, 30)).astype(np.float32), rng.standard_normal((30, 50)).astype(np.float32)
    a, b = da.from_array(x, chunks=16), da.from_array(y, chunks=16)
    right = x @ y
    assert bench.check(a, b, da.from_array(right, chunks=16), tol=bench.tolerance("float32")) < 1e-6
    off = da.from_array(right * np.float32(1 + 1e-4), chunks=16)
    with pytest.raises(AssertionError, match="relative error 0.0001 > 1e-05"):
        bench.check(a, b, off, tol=bench.tolerance("float32"))
    assert bench.check(a, b, off, tol=bench.tolerance("float32", allow_tf32=True)) < 2e-4
    nan = right.copy()
    nan[:, ::2] = np.nan
    with pytest.raises(AssertionError, match="non-finite"):
        bench.check(a, b, da.from_array(nan, chunks=16), tol=1.0)
    small = x[:8, :8]
    assert bench.check(da.from_array(small), da.from_array(small), da.from_array(small @ small),
                       tol=1e-5) < 1e-6
    z = x[:, :30] + 1j * y[:, :40].T
    zc = da.from_array(z, chunks=16)
    assert bench.check(zc, zc.T, da.from_array(z @ z.T), tol=1e-5) < 1e-6
    with pytest.raises(AssertionError, match="relative error"):
        bench.check(zc, zc.T, da.from_array(np.conj(z @ z.T)), tol=1e-5)


def test_bench_tolerance_per_dtype():
    """TF32's bound only for float32 with allow_tf32; bfloat16 by name; integers exact."""
    from mgemm import bench

    assert bench.tolerance("float32", allow_tf32=True) == bench.TOLERANCE["tf32"]
    assert bench.tolerance("float64", allow_tf32=True) == bench.tolerance("float64") == 1e-12
    assert bench.tolerance("bfloat16") == bench.TOLERANCE["bfloat16"]
    assert bench.tolerance("int32") == 0.0


def test_bench_inputs_are_seeded_random_in_minus_one_one():
    """Each chunk seeded by the matrix's seed and its position: the same seed gives the same
    matrix, another seed another one, and chunks differ from each other; values in [-1, 1), complex
    ones with imaginary parts too."""
    from mgemm import bench

    def make(shape, chunks, dtype, seed):
        return bench.random_matrix(shape, chunks, dtype, gpu=False, seed=seed).compute(scheduler="sync")

    a = make((64, 48), 16, "float64", 1)
    assert np.array_equal(a, make((64, 48), 16, "float64", 1))
    assert not np.array_equal(a, make((64, 48), 16, "float64", 2))
    assert not np.array_equal(a[:16, :16], a[16:32, :16])
    assert -1 <= a.min() < -0.9 and 0.9 < a.max() < 1
    z = make((16, 16), 8, "complex64", 3)
    assert z.dtype == np.complex64 and z.imag.min() < -0.5 and z.imag.max() > 0.5
    assert bench.Case("z", 2, 3, 4, "complex64").flops == 4 * bench.Case("x", 2, 3, 4).flops == 4 * 48


def test_bench_timed_restores_the_layout_and_times_build_to_synchronized(monkeypatch):
    """A timed run: the layout restored and the GPUs synchronized before the clock starts; then
    build, persist, wait and a last synchronize, all inside the seconds returned; the marks split
    them."""
    import types

    import distributed

    from mgemm import bench

    events = []
    clock = iter([0.0, 1.0, 3.0, 6.0, 10.0])

    class Lazy:
        def persist(self):
            events.append("persist")
            return "out"

    def make():
        events.append("make")
        return Lazy()

    monkeypatch.setattr(bench, "drop_replicas", lambda client, keep: events.append(("drop", keep)))
    monkeypatch.setattr(bench, "synchronize_workers", lambda client: events.append("sync"))
    monkeypatch.setattr(bench, "time", types.SimpleNamespace(perf_counter=lambda: next(clock),
                                                            time=lambda: 100.0))
    monkeypatch.setattr(distributed, "wait", lambda x: events.append("wait"))
    started, marks = [], {}
    seconds, out = bench.timed("client", make, started, marks, keep={"k": "w"})
    assert events == [("drop", {"k": "w"}), "sync", "make", "persist", "wait", "sync"]
    assert (seconds, out, started) == (10.0, "out", [100.0])
    assert marks == {"built": 1.0, "submitted": 3.0, "done": 6.0, "synced": 10.0}


def test_bench_pauses_the_active_memory_manager_and_restarts_it():
    """The active memory manager is stopped for the block and restarted only if it was running."""
    import types

    from mgemm import bench

    calls = []
    amm = types.SimpleNamespace(running=lambda: True, stop=lambda: calls.append("stop"),
                                start=lambda: calls.append("start"))
    with bench.memory_manager_paused(types.SimpleNamespace(amm=amm)):
        assert calls == ["stop"]
    assert calls == ["stop", "start"]
    amm.running = lambda: False  # off before: left off
    with bench.memory_manager_paused(types.SimpleNamespace(amm=amm)):
        pass
    assert calls == ["stop", "start"]


def test_bench_keeps_only_each_chunks_home_copy():
    """``drop_replicas(keep=...)`` on the scheduler: every copy but the home's is dropped; a chunk
    whose home lost it, or not in memory, is left alone."""
    import types

    from mgemm import bench

    def task(state, *holders):
        return types.SimpleNamespace(state=state, who_has=[types.SimpleNamespace(address=h) for h in holders])

    removed = {}
    scheduler = types.SimpleNamespace(
        tasks={"a": task("memory", "w1", "w2", "w3"), "b": task("memory", "w2"),
               "c": task("released", "w1", "w2")},
        request_remove_replicas=lambda addr, keys, stimulus_id: removed.update({addr: keys}))
    count = bench._keep_only(scheduler, {"a": "w1", "b": "w1", "c": "w1", "gone": "w1"})
    assert count == 2 and removed == {"w2": ["a"], "w3": ["a"]}


def test_bench_rows_take_the_median_of_repeat_runs_from_the_layout(client, monkeypatch):
    """A row: the seconds of --repeat timed runs (not the warm-up), their median and its TFLOP/s,
    the workers, the options in the environment; every run starts from the inputs' layout with
    the active memory manager paused, and A and B are different matrices."""
    from mgemm import bench

    seconds, seen, inputs, progress = iter([9.0, 3.0, 1.0, 2.0]), [], [], []

    def timed(client_, make, *args, keep=None):
        seen.append((keep, client_.amm.running()))
        return next(seconds), make().persist()

    def method(a, b, options):
        inputs.append((a, b))
        return da.matmul(a, b)

    monkeypatch.setattr(bench, "timed", timed)
    monkeypatch.setitem(bench.METHODS, "mgemm", bench.Method("mgemm", method))
    assert client.amm.running()
    case = bench.Case("float64-64", 64, 64, 64, "float64", 32)
    (row,) = bench.run_case(client, case, ["mgemm"], repeat=3, gpu=False, progress=progress.append,
                            options={"allow_tf32": True, "tune": True})
    assert (row.seconds, row.median_s, row.tflops) == ([3.0, 1.0, 2.0], 2.0, case.flops / 2.0 / 1e12)
    assert row.workers == 2 and not row.error and row.rel_error < 1e-12
    assert row.environment["allow_tf32"] is True and row.environment["tune"] is True
    assert len(seen) == 4 and all(keep and len(keep) == 8 and not running for keep, running in seen)
    assert client.amm.running()
    assert progress == ["float64-64: mgemm warm-up and check", "float64-64: mgemm run 1/3",
                        "float64-64: mgemm run 2/3", "float64-64: mgemm run 3/3"]
    a, b = inputs[0]
    assert not np.array_equal(a.compute(), b.compute())


def test_bench_checks_float32_against_the_tf32_bound_with_allow_tf32(client, monkeypatch):
    """A float32 result off by 1e-4 passes the check under allow_tf32 and fails it otherwise; the
    failure is a row of the cluster's workers, and progress says so."""
    from mgemm import bench

    monkeypatch.setattr(bench, "timed", lambda c, make, *a, keep=None: (1.0, make().persist()))
    monkeypatch.setitem(bench.METHODS, "mgemm", bench.Method(
        "mgemm", lambda a, b, options: da.matmul(a, b) * np.float32(1 + 1e-4)))
    case = bench.Case("float32-64", 64, 64, 64, "float32", 32)
    (ok,) = bench.run_case(client, case, ["mgemm"], repeat=1, gpu=False, options={"allow_tf32": True})
    assert not ok.error and 5e-5 < ok.rel_error < 2e-4
    progress = []
    (bad,) = bench.run_case(client, case, ["mgemm"], repeat=1, gpu=False, options={},
                            progress=progress.append)
    assert bad.error.startswith("AssertionError: relative error") and bad.workers == 2
    assert progress[-1].startswith("float32-64: mgemm FAILED: AssertionError: relative error")


def test_bench_rows_name_the_protocol_and_threads_of_the_workers(monkeypatch):
    """Rows name the workers' protocol (tcp here, not inproc) and their threads per worker."""
    from distributed import Client, LocalCluster

    from mgemm import bench

    monkeypatch.setattr(bench, "timed", lambda c, make, *a, keep=None: (1.0, make().persist()))
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address=":0") as lc, Client(lc) as c:
        case = bench.Case("float64-32", 32, 32, 32, "float64", 16)
        (row,) = bench.run_case(c, case, ["dask"], repeat=1, options={}, gpu=False)
    assert row.protocol == "tcp" and row.environment["threads_per_worker"] == [2]


def test_bench_table_counts_the_runs_and_says_na_without_dask():
    """The table's runs column counts the timed runs; no dask row: the ratio is n/a."""
    from mgemm.bench import Row, table

    row = Row("float64-64", "mgemm", 64, 64, 64, "float64", [1.0, 2.0, 3.0], 2.0, 1.0, 1e-15, 2, "tcp")
    line = table([row]).splitlines()[1].split()
    assert line[-1] == "3" and line[-3] == "n/a" and line[2] == "2.000"


def test_bench_table_says_na_beside_a_failed_dask_row():
    """A dask row that failed gives no baseline: mgemm's ratio is n/a, not nan."""
    from mgemm.bench import Row, table

    nan = float("nan")
    rows = [Row("c", "mgemm", 8, 8, 8, "float64", [1.0], 1.0, 1.0, 1e-16, 2, "tcp"),
            Row("c", "dask.array.matmul", 8, 8, 8, "float64", [], nan, nan, nan, 2, "tcp",
                error="TypeError: x")]
    lines = table(rows).splitlines()
    assert lines[1].split()[4] == "n/a", lines[1]
    assert "failed: TypeError: x" in lines[2]


def test_bench_scheme_only_for_float32_on_hopper_gpus_with_its_engines(monkeypatch):
    """``emulate_fp32`` is recorded only for float32 on GPU chunks, on sm_90, with its engines."""
    from mgemm import bench, cluster

    h200 = {"model": "NVIDIA H200", "cc": "9.0"}
    monkeypatch.setattr(cluster, "worker_devices", lambda client: {"w1": h200, "w2": h200})
    on = {"emulate_fp32": "bf16x9", "engine": "auto"}
    assert bench.emulated_scheme(None, "float32", on, gpu=True) == "bf16x9"
    assert bench.emulated_scheme(None, "float64", on, gpu=True) == "off"
    assert bench.emulated_scheme(None, "float32", on, gpu=False) == "off"
    assert bench.emulated_scheme(None, "float32", {**on, "engine": "cublas"}, gpu=True) == "off"


def test_bench_scaling_cases(monkeypatch):
    """Weak scaling keeps n³ per GPU at 32768³ on two GPUs; bfloat16 cases only where CuPy has
    the dtype."""
    from mgemm import bench

    monkeypatch.setattr(bench, "has_bfloat16", lambda: False)
    names = [c.name for c in bench.scaling_cases(16)]
    assert names == ["strong-float32-32768", "strong-float32-65536", "weak-float32-65536"]
    assert bench.scaling_cases(2)[-1].name == "weak-float32-32768"
    monkeypatch.setattr(bench, "has_bfloat16", lambda: True)
    assert "weak-bfloat16-65536" in [c.name for c in bench.scaling_cases(16)]


def test_bench_trace_summaries():
    """Per worker from a task stream: tasks, compute and transfer seconds, first start and last
    stop, distinct peers; fetch time is the union of the fetches in flight; only fetches that
    began after the run started."""
    import types

    from mgemm import bench

    records = [
        {"worker": "w1", "key": "k1", "startstops": [
            {"action": "transfer", "start": 10.0, "stop": 11.0, "source": "w2"},
            {"action": "compute", "start": 11.0, "stop": 13.0}]},
        {"worker": "w1", "key": "k2", "startstops": [
            {"action": "transfer", "start": 12.0, "stop": 12.5, "source": "w3"},
            {"action": "compute", "start": 13.0, "stop": 14.0}]},
        {"worker": "w2", "key": "k3", "startstops": [{"action": "compute", "start": 12.0, "stop": 12.5}]}]
    s = bench.stream_summary(records, start=10.0)
    w1 = s["w1"]
    assert (w1["tasks"], w1["compute_s"], w1["transfer_s"]) == (2, 3.0, 1.5)
    assert (w1["first"], w1["last"]) == (1.0, 4.0)
    assert w1["sources"] == 2 and s["w2"]["sources"] == 0
    assert w1["task_log"] == [(1.0, 2.0, "k1"), (3.0, 1.0, "k2")]

    fake = types.SimpleNamespace(run=lambda f, since: {"w1": [(0.0, 2.0, 2**30, 3), (1.0, 2.0, 2**30, 1)]})
    bench.add_fetches(fake, s, since=10.0)
    assert (s["w1"]["fetches"], s["w1"]["fetch_gib"], s["w1"]["fetch_busy_s"]) == (2, 2.0, 3.0)
    assert s["w1"]["fetch_first"] == 0.0
    worker = types.SimpleNamespace(transfer_incoming_log=[
        {"start": 5.0, "stop": 6.0, "total": 8, "keys": ["a"]},
        {"start": 15.0, "stop": 17.0, "total": 16, "keys": ["b", "c"]}])
    assert bench._incoming_log(worker, since=10.0) == [(5.0, 2.0, 16, 2)]


def test_bench_persister_and_environment(client, monkeypatch):
    """``--layout`` picks the persister; rows name MGEMM_COMMIT where set and the workers' UCX_*
    variables."""
    import types

    from mgemm import bench

    assert bench.persister("cyclic") is bench.persist_cyclic
    assert bench.persister("dask")(None, lambda: types.SimpleNamespace(persist=lambda: "p")) == "p"
    monkeypatch.setenv("MGEMM_COMMIT", "c0ffee1")
    monkeypatch.setenv("UCX_TLS", "tcp,cuda_copy")
    assert bench.environment(client)["commit"] == "c0ffee1"
    ucx = bench._ucx_environment()
    assert ucx["UCX_TLS"] == "tcp,cuda_copy" and "MGEMM_COMMIT" not in ucx and "transfer_limit" in ucx


def rows_on_alternate_workers(client, rows: np.ndarray) -> tuple:
    """X persisted from ``rows`` (chunk i = rows[i]), chunk i on the i % 2-th of the client's two
    workers: (X, its rows, row chunk → worker)."""
    workers = sorted(client.nthreads())
    held = [client.scatter(part, workers=[workers[i % 2]]) for i, part in enumerate(rows)]
    x = da.concatenate([da.from_delayed(f, rows.shape[1:], rows.dtype) for f in held]).persist()
    wait(x)
    home = {key[1]: w for key, (w,) in client.who_has(x).items()}
    assert [home[i] for i in range(len(rows))] == [workers[i % 2] for i in range(len(rows))]
    return x, rows, home


def test_a_gram_product_multiplies_each_chunk_of_x_where_it_lives(client, monkeypatch):
    """X.T @ X of a persisted row-chunked X: each worker multiplies the rows of X it holds and
    only the float64 partials of C move (the planner splits K by holder, ``plan._by_holder``,
    following X.T's chunks back to X's); C keeps X's one column chunk, not cut into a block per
    worker."""
    from mgemm import cluster
    from mgemm.bench import _incoming_log

    monkeypatch.setitem(cluster.LINK_BANDWIDTH, "inproc", 1e9)  # the in-process link priced as TCP
    # 16 row chunks, every other one on each worker (as even as the plan needs them: uneven
    # holdings are evened out by moving a chunk or two)
    x, rows, _ = rows_on_alternate_workers(client, np.random.default_rng(2).random((16, 2_000, 200)))
    start = time.time()
    got = mgemm.matmul(x.T, x)
    assert got.chunks == ((200,), (200,))
    got = got.compute()
    moved = sum(nbytes for log in client.run(_incoming_log, since=start).values()
                for _, _, nbytes, _ in log)
    assert moved < x.nbytes / 16, f"{moved} bytes of X's {x.nbytes} moved between the workers"
    whole = rows.reshape(32_000, 200)
    assert_close(got, whole.T @ whole, np.float64)


def test_unpersisted_chunks_are_placed_where_their_inputs_are(client):
    """``api._traced``: a chunk no worker holds yet but made from chunks all on one worker (x.T
    of a persisted x, a cut of it, a cast) is placed there; one made from chunks on both workers,
    or from nothing held, is not."""
    from mgemm.api import _input_keys, _snapshot, _traced

    x, _, home = rows_on_alternate_workers(client, np.random.default_rng(4).random((4, 100, 30)))
    for a, k_of in ((x.T, lambda k: k), (x.T.astype(np.float32), lambda k: k),
                    (x.T.rechunk((15, 50)), lambda k: k // 2)):  # each row chunk of x cut in two
        _, who = _snapshot(client, a, x)
        where = _traced(client, a, x, who)
        for key in _input_keys(a, x):
            if key[0] == a.name:
                assert where[key] == [home[k_of(key[2])]], (a.name, key)
    merged = x.T.rechunk((30, 200))  # chunks 0+1 and 2+3 of x: one on each worker
    _, who = _snapshot(client, merged, x)
    where = _traced(client, merged, x, who)
    assert not any(where.get(key) for key in _input_keys(merged, x) if key[0] == merged.name)
    lazy = da.random.default_rng(5).random((30, 400), chunks=(30, 100))
    _, who = _snapshot(client, lazy, x)
    assert _traced(client, lazy, x, who) == who
