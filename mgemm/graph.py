"""From a ``Plan`` to a Dask graph: one task per output block, the K reduction inside the task.

dask.array.matmul makes one task per (i, k, j) block triple and sums the Kb partial blocks of each
output block in a tree: about 2.4·Mb·Nb·Kb tasks (8×8×8 chunks: 1216) and Kb partial blocks in
flight per output block.
mgemm makes one task per output block (its A row panel and B column panel are its dependencies)
and, only for blocks the planner split along K, one partial task per piece and a fix-up task that
adds the pieces in a fixed order (so results do not depend on arrival order); 16-bit pieces are
float32, rounded once by the fix-up, as a whole block's task rounds.

Placement from the plan is given as *loose* restrictions: Dask keeps each task on its planned
worker while that worker lives and re-runs it elsewhere if the worker is lost.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any, Sequence

import dask.array as da
import numpy as np
from dask._task_spec import Task, TaskRef, parse_input
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from . import engines, staging
from .plan import Plan

#: Prefix of every block task key; the placement plugin recognises mgemm tasks by it.
BLOCK_PREFIX = "mgemm-block-"
#: What follows ``BLOCK_PREFIX`` in the keys of a split block's parts.
PART = "part-"


def product_of(name: Any) -> str | None:
    """The product (its blocks' key name, as ``reuse_marks`` names it) that a task key name of
    ``build``'s belongs to, a block's or a part's; None for any other name.

    >>> product_of("mgemm-block-part-abc"), product_of("mgemm-block-abc"), product_of("x")
    ('mgemm-block-abc', 'mgemm-block-abc', None)
    """
    if not (isinstance(name, str) and name.startswith(BLOCK_PREFIX)):
        return None
    rest = name[len(BLOCK_PREFIX):]
    return BLOCK_PREFIX + rest[len(PART):] if rest.startswith(PART) else name


def common_k_chunks(ka: Sequence[int], kb: Sequence[int]) -> tuple[int, ...]:
    """The coarsest chunking of K that refines both ``ka`` and ``kb``.

    >>> common_k_chunks((4, 4), (2, 6))
    (2, 2, 4)
    """
    cuts = sorted(set(itertools.accumulate(ka)) | set(itertools.accumulate(kb)))
    return tuple(np.diff([0, *cuts]).tolist()) if cuts else ()


def _block_task(engine_name: str, shape: tuple, c: Any, alpha: float, beta: float,
                out_dtype: str, allow_tf32: bool, emulate: str, tune: bool, reuse: str,
                *chunks: Any) -> Any:
    """Worker side: alpha · (A row panel @ B column panel) + beta · C for one block (float32 on
    bfloat16 tensor cores unless ``emulate`` is "off": ``mgemm.emulate``; ``tune``: the engine's
    ``tune``).  An engine with ``gemm_chunks`` (numpy) takes the chunks as they are; the others
    take each K part's panels.  ``reuse``: the product and the plan's reads of each chunk on
    this worker (``mgemm.staging.reuse_marks``; only a staged block reads it).

    ``shape`` = (rows, ks, cols): ``chunks`` are A's ``rows × ks`` chunks (row chunk r, K chunk
    k at ``r * ks + k``), then B's ``ks × cols`` (K chunk k, column chunk j), in the order of
    ``input_keys``.  Flat arguments, not nested lists: Dask builds a node for every list in a
    task's arguments, and for a 16-block product those nodes were most of the graph's build time.
    """
    rows, ks, cols = shape
    off = rows * ks
    if engines.staged(engine_name, chunks[0]):
        return _staged_block(engine_name, shape, c, alpha, beta, out_dtype, allow_tf32, emulate,
                             tune, reuse, chunks)
    xp = _array_module(chunks[0])
    engine = engines.get(engine_name)
    if hasattr(engine, "gemm_chunks"):  # the chunks as they are, no panels (NumPy: never emulated)
        chunks = [_typed(x) for x in chunks]
        return engine.gemm_chunks([chunks[r * ks:(r + 1) * ks] for r in range(rows)],
                                  [chunks[off + k * cols:off + (k + 1) * cols] for k in range(ks)],
                                  alpha=alpha, beta=beta, c=_typed(c), out_dtype=out_dtype,
                                  allow_tf32=allow_tf32, tune=tune)
    with engines.task_stream(xp):
        panels = [_part_panels(xp, shape, chunks, k) for k in range(ks)]
        a_parts, b_parts = [a for a, _ in panels], [b for _, b in panels]
        if emulate != "off":
            from . import emulate as emulation
            return emulation.gemm(engine, a_parts, b_parts, emulate, alpha=alpha, beta=beta,
                                  c=_typed(c), out_dtype=out_dtype)
        return engine.gemm(a_parts, b_parts, alpha=alpha, beta=beta, c=_typed(c),
                           out_dtype=out_dtype, allow_tf32=allow_tf32, tune=tune)


#: A staged block (NumPy chunks, a GPU engine) is copied and multiplied one K part at a time, the
#: copies on a stream of their own (``engines.copy_stream``), so part k + 1 loads while part k's
#: GEMM runs; False copies the whole block first (as do emulated blocks).
STAGE_BY_PART = True
#: By part, the last part's GEMM runs in up to ``BACK_BANDS`` bands of rows, each band of at least
#: ``BAND_ROWS`` rows, and each band is copied back while the next ones multiply: only the last
#: band's copy back follows the block's GEMMs, not the whole block's.
BACK_BANDS = 4
BAND_ROWS = 2048


def back_bands(rows: int) -> list[tuple[int, int]]:
    """The row bands [r0, r1) a staged block of ``rows`` rows is finished and copied back in:
    up to ``BACK_BANDS`` of at least ``BAND_ROWS`` rows each, cut at whole multiples of 128 rows
    (no 128-row tile of a GEMM straddles two bands, and each band's rows start as aligned as the
    block's), the last taking what is left over.

    >>> back_bands(8192), back_bands(3000)
    ([(0, 2048), (2048, 4096), (4096, 6144), (6144, 8192)], [(0, 3000)])
    >>> back_bands(5000), back_bands(8193)
    ([(0, 2432), (2432, 5000)], [(0, 2048), (2048, 4096), (4096, 6144), (6144, 8193)])
    """
    count = max(1, min(BACK_BANDS, rows // max(1, BAND_ROWS)))
    align = 128 if rows >= 128 * count else 1
    # each cut rounded down: a band is at least rows / count rounded down to the alignment
    cuts = [i * rows // (count * align) * align for i in range(count)] + [rows]
    return [(r0, r1) for r0, r1 in zip(cuts[:-1], cuts[1:]) if r1 > r0] or [(0, rows)]


def _part_indices(shape: tuple, k: int) -> tuple[list[int], list[int]]:
    """Where K part ``k``'s chunks are among a block task's (``_block_task``'s ``shape`` and
    order): A's chunks (r, k) over the rows, then B's (k, j) over the columns."""
    rows, ks, cols = shape
    off = rows * ks
    return [r * ks + k for r in range(rows)], list(range(off + k * cols, off + (k + 1) * cols))


def _part_panels(xp: Any, shape: tuple, chunks: Sequence[Any], k: int) -> tuple[Any, Any]:
    """K part ``k`` of a block task's ``chunks``: A's chunks (r, k) stacked over the rows and
    B's (k, j) side by side."""
    a, b = _part_indices(shape, k)
    return _concat(xp, [chunks[i] for i in a], 0), _concat(xp, [chunks[i] for i in b], 1)


def _staged_block(engine_name: str, shape: tuple, c: Any, alpha: float, beta: float,
                  out_dtype: str, allow_tf32: bool, emulate: str, tune: bool, reuse: str,
                  chunks: Sequence[Any]) -> Any:
    """``_block_task`` of a GPU engine on NumPy chunks: the chunks (and C) copied to this worker's
    GPU, the block multiplied there, and copied back as its GPU work finishes, so that while one
    task thread copies another's GEMM can run.

    By K part (``STAGE_BY_PART``): part k's GEMM, ``alpha · A_k B_k`` plus ``beta · C`` for the
    first part and plus the parts so far for later ones, in ``engines.accumulator_dtype`` (a
    16-bit block adds up in float32 and is rounded once), waits on the GPU for part k's copies
    only.  A chunk the plan reads again on this worker is copied once and kept for the other
    reads (``mgemm.staging``; ``reuse`` counts them).  The parts and C's copy stay referenced
    until the block is done: their memory came from a copy stream's pool, which does not know the
    GEMMs still read it.  The last part's GEMM runs by bands of rows (``back_bands``), each band
    copied back once its own GEMM is done, while the later bands' run.  Otherwise the whole block is
    copied on the legacy default stream, which the block's stream waits for
    (``engines.task_stream``), and nothing is kept.  Either way the copies are
    ``staging.to_device`` and ``staging.to_host`` (through pinned buffers)."""
    import cupy

    if not STAGE_BY_PART or emulate != "off":
        null = cupy.cuda.Stream.null
        device = [staging.to_device(cupy, _typed(x), null) for x in chunks]
        c = None if c is None else staging.to_device(cupy, _typed(c), null)
        out = _block_task(engine_name, shape, c, alpha, beta, out_dtype, allow_tf32, emulate,
                          tune, reuse, *device)
        return staging.to_host(cupy, out, null)
    engine = engines.get(engine_name)
    acc_dtype = engines.accumulator_dtype(out_dtype)
    held = []
    last = shape[1] - 1
    with engines.task_stream(cupy), engines.queue_only():
        task, copies = cupy.cuda.get_current_stream(), engines.copy_stream(cupy)
        out = c
        device, (product, reads) = list(chunks), staging.parse_marks(reuse, len(chunks))
        for k in range(shape[1]):  # the K parts
            with copies:
                a_index, b_index = _part_indices(shape, k)
                for i in a_index + b_index:
                    device[i] = staging.load(cupy, copies, chunks[i], product, reads[i],
                                             _typed)
                a_k, b_k = _part_panels(cupy, shape, device, k)
                if k == 0 and out is not None:
                    out = staging.to_device(cupy, _typed(out), copies)
                    held.append(out)
                copied = copies.record()
            task.wait_event(copied)
            held += [a_k, b_k]
            if k == last:
                break
            out = engine.gemm([a_k], [b_k], alpha=alpha, beta=beta if k == 0 else 1, c=out,
                              out_dtype=acc_dtype, allow_tf32=allow_tf32, tune=tune)
        # The last part by bands of rows, all queued first; each band's copy back then waits on
        # the GPU for that band's GEMM only, so it crosses while the later bands multiply.
        bands = []
        for r0, r1 in back_bands(a_k.shape[0]):
            band = engine.gemm([a_k[r0:r1]], [b_k], alpha=alpha, beta=beta if last == 0 else 1,
                               c=None if out is None else out[r0:r1], out_dtype=acc_dtype,
                               allow_tf32=allow_tf32, tune=tune)
            if band.dtype != cupy.dtype(out_dtype):
                band = band.astype(out_dtype)
            bands.append((r0, r1, band, task.record()))
        result = np.empty((a_k.shape[0], b_k.shape[1]), bands[0][2].dtype)
        for r0, r1, band, done in bands:
            copies.wait_event(done)
            staging.to_host(cupy, band, copies, out=result[r0:r1])
    return result


def input_keys(a_name: str, b_name: str, blk: Any, ks: Sequence[int]) -> tuple[tuple, list]:
    """The chunks one block task over the K chunks ``ks`` of ``blk`` reads (``Plan.k_chunks_of``),
    as ``_block_task`` takes them: (rows, len(ks), cols) and the keys, A's row by row, then B's
    K chunk by K chunk."""
    keys = [(a_name, i, k) for i in range(blk.i0, blk.i1) for k in ks]
    keys += [(b_name, k, j) for k in ks for j in range(blk.j0, blk.j1)]
    return (blk.i1 - blk.i0, len(ks), blk.j1 - blk.j0), keys


def first_readers(plan: Plan) -> dict:
    """Where each chunk a product reads is needed first: the planner's chunk keys ``("a", i, k)``
    and ``("b", k, j)``, and ``("c", bi, bj)`` for C's part of output block (bi, bj), each → the
    worker whose task reads it first in the plan's order (for C: the worker that finishes the
    block, ``plan.fixup``'s for a split one)."""
    bi_of = {edge: i for i, edge in enumerate(row_edges_chunks(plan))}
    bj_of = {edge: j for j, edge in enumerate(col_edges_chunks(plan))}
    first: dict = {}
    for w in sorted(plan.work, key=lambda w: (w.seq, w.worker)):
        blk = plan.blocks[w.block]
        for key in input_keys("a", "b", blk, plan.k_chunks_of(w))[1]:
            first.setdefault(key, w.worker)
        first.setdefault(("c", bi_of[blk.i0], bj_of[blk.j0]), plan.fixup.get(w.block, w.worker))
    return first


def out_chunks(plan: Plan) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The output's chunks: one per block row and block column of ``plan``."""
    row_edges, col_edges = block_grid(plan)
    return tuple(np.diff(row_edges).tolist()), tuple(np.diff(col_edges).tolist())


def _fixup_task(partials: list, c: Any, alpha: float, beta: float, out_dtype: str) -> Any:
    """Worker side: add the partials of a split block in plan order (in
    ``engines.accumulator_dtype``, as they come), scale, add C, and round to ``out_dtype``."""
    xp = _array_module(partials[0])
    with engines.task_stream(xp):  # like the engines: the task ends when its GPU work does
        parts = [_typed(p) for p in partials]
        # (p0 + p1) + p2 + ...: the same sums in the same order as a copy of p0 added to, one
        # pass over memory fewer (a split block has two partials at least: ``build``)
        total = parts[0] + parts[1]
        for part in parts[2:]:
            total += part
        total = engines.scale_and_add(total, alpha, beta, _typed(c), xp)
        return total.astype(xp.dtype(out_dtype), copy=False)


def _array_module(x: Any) -> Any:
    if engines.is_cupy(x):
        import cupy
        return cupy
    return np


def _concat(xp: Any, arrays: list, axis: int) -> Any:
    arrays = [_typed(x) for x in arrays]
    return arrays[0] if len(arrays) == 1 else xp.concatenate(arrays, axis=axis)


def _typed(x: Any) -> Any:
    """``x``, or a chunk that came from a process without mgemm's dtype plugin as raw 2-byte voids
    (``mgemm.cluster.keep_extension_dtypes``) viewed as bfloat16 again: the only 2-byte type
    without a NumPy typestr of its own that mgemm multiplies."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.kind == "V" and dtype.itemsize == 2 and dtype.names is None \
            and dtype.name.startswith("void"):
        from .cluster import extension_dtype
        return x.view(extension_dtype("bfloat16"))
    return x


def build(a: da.Array, b: da.Array, plan: Plan, *, c: da.Array | None = None, alpha: float = 1.0,
          beta: float = 0.0, engine: str, out_dtype: np.dtype, allow_tf32: bool = False,
          emulate: str = "off", tune: bool = False, placement: bool = True) -> da.Array:
    """The Dask array ``alpha · a @ b + beta · c`` computed as ``plan`` says.

    ``a``'s row chunks, ``b``'s column chunks and their common K chunks must be the plan's problem
    (``mgemm.api`` rechunks before planning); ``c``, when given, is rechunked to the output blocks.
    """
    prob = plan.problem
    if (tuple(a.chunks[0]), tuple(b.chunks[1])) != (tuple(prob.m_chunks), tuple(prob.n_chunks)) \
            or tuple(a.chunks[1]) != tuple(prob.k_chunks) or tuple(b.chunks[0]) != tuple(prob.k_chunks):
        raise ValueError("the plan was made for another chunking of the operands")
    chunks = out_chunks(plan)
    token = tokenize(a, b, c, alpha, beta, engine, str(out_dtype), allow_tf32, emulate, tune,
                     plan.signature())
    name = BLOCK_PREFIX + token
    part_name = BLOCK_PREFIX + PART + token
    if c is not None and beta != 0:
        c = c.rechunk(chunks)
    else:
        c = None

    # a split block's partials: 16-bit results are added up in float32 and rounded once, as in
    # one task (``plan.Problem.part_itemsize`` prices them so)
    part_dtype = engines.accumulator_dtype(out_dtype)
    bi_of = {edge: i for i, edge in enumerate(row_edges_chunks(plan))}
    bj_of = {edge: j for j, edge in enumerate(col_edges_chunks(plan))}
    dsk: dict = {}
    owner: dict = {}
    order: dict = {}
    works_by_block: dict[int, list] = {}
    for w in plan.work:
        works_by_block.setdefault(w.block, []).append(w)
    # per block: its output key, and per block task its Work, key, (rows, ks, cols) and the
    # keys of the chunks it reads
    tasks: dict[int, tuple[tuple, list]] = {}
    reads: dict[str, list] = {}  # per worker: (task key, chunk keys)
    for blk_index, works in works_by_block.items():
        blk = plan.blocks[blk_index]
        bi, bj = bi_of[blk.i0], bj_of[blk.j0]
        listed = []
        for p, w in enumerate(sorted(works, key=lambda w: w.k0)):
            key = (name, bi, bj) if len(works) == 1 else (part_name, bi, bj, p)
            shape, keys = input_keys(a.name, b.name, blk, plan.k_chunks_of(w))
            listed.append((w, key, shape, keys))
            reads.setdefault(w.worker, []).append((key, keys))
        tasks[blk_index] = ((name, bi, bj), listed)
    # how often each worker reads each chunk, for the staged copies (none for CuPy chunks)
    marks: dict = defaultdict(str)
    if engines.staged(engine, a._meta):
        for mine in reads.values():
            marks.update(staging.reuse_marks(name, mine))

    for blk_index, (out_key, listed) in tasks.items():
        c_ref = TaskRef((c.name, *out_key[1:])) if c is not None else None
        if len(listed) == 1:
            w, key, shape, keys = listed[0]
            dsk[key] = Task(key, _block_task, engine, shape, c_ref, alpha, beta, str(out_dtype),
                            allow_tf32, emulate, tune, marks[key], *map(TaskRef, keys))
            owner[key], order[key] = w.worker, w.seq
            continue
        part_refs = []
        for w, key, shape, keys in listed:
            dsk[key] = Task(key, _block_task, engine, shape, None, 1.0, 0.0, part_dtype,
                            allow_tf32, emulate, tune, marks[key], *map(TaskRef, keys))
            owner[key], order[key] = w.worker, w.seq
            part_refs.append(TaskRef(key))
        dsk[out_key] = Task(out_key, _fixup_task, parse_input(part_refs), c_ref, alpha, beta,
                            str(out_dtype))
        owner[out_key] = plan.fixup[blk_index]
        order[out_key] = max(order[r.key] for r in part_refs)

    annotations = None
    if placement:
        annotations = {
            "workers": _PerKey({key: [w] for key, w in owner.items()}, None),
            "allow_other_workers": True,
            # Dask runs higher priorities first: follow the plan's per-worker order.
            "priority": _PerKey({key: -o for key, o in order.items()}, 0),
        }
    layer = MaterializedLayer(dsk, annotations=annotations)
    deps = [a, b] + ([c] if c is not None else [])
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    meta = da.utils.meta_from_array(a._meta, ndim=2, dtype=out_dtype)
    # A plain dask Array, optimized as every other: an Array type with an optimizer of its own
    # (one that kept these annotations by skipping low-level fusion) is optimized apart from
    # the other collections of one ``dask.compute``, and dask 2026.7 then hands their results
    # back in the wrong order.  Fusion drops the annotations; ``cluster.KeepPlacement`` gives
    # the block tasks their placement back (``register_placement``).
    return da.Array(graph, name, chunks, meta=meta)


def placement_of(x: da.Array) -> dict:
    """The plan's placement that ``build``'s result carries: each block task's key → (its
    worker, its priority annotation); empty for a result built without placement."""
    annotations = x.dask.layers[x.name].annotations or {}
    workers, priority = annotations.get("workers"), annotations.get("priority")
    if not isinstance(workers, _PerKey):
        return {}
    return {key: (ws[0], priority(key) if priority is not None else 0)
            for key, ws in workers.values.items()}


class _PerKey:
    """A per-key layer annotation: ``values[key]``, else ``default``.  A module-level class, so
    the graph pickles it by reference (a closure is pickled by value, twice as slow to send)."""

    __slots__ = ("values", "default")

    def __init__(self, values: dict, default: Any):
        self.values, self.default = values, default

    def __call__(self, key: Any) -> Any:
        return self.values.get(key, self.default)


def row_edges_chunks(plan: Plan) -> list[int]:
    """First chunk-row index of every block row, ascending."""
    return sorted({blk.i0 for blk in plan.blocks})


def col_edges_chunks(plan: Plan) -> list[int]:
    return sorted({blk.j0 for blk in plan.blocks})


def block_grid(plan: Plan) -> tuple[list[int], list[int]]:
    """Element offsets of the block rows and columns; the plan's blocks must form a grid."""
    prob = plan.problem
    row_off = [0, *itertools.accumulate(prob.m_chunks)]
    col_off = [0, *itertools.accumulate(prob.n_chunks)]
    rows = sorted({(blk.i0, blk.i1) for blk in plan.blocks})
    cols = sorted({(blk.j0, blk.j1) for blk in plan.blocks})
    for spans, n in ((rows, len(prob.m_chunks)), (cols, len(prob.n_chunks))):
        if [s for s, _ in spans] != [0, *[e for _, e in spans[:-1]]] or spans[-1][1] != n:
            raise ValueError("the plan's blocks do not form a grid over the chunks")
    if len(plan.blocks) != len(rows) * len(cols):
        raise ValueError("the plan's blocks do not form a grid over the chunks")
    return [row_off[s] for s, _ in rows] + [row_off[-1]], [col_off[s] for s, _ in cols] + [col_off[-1]]
