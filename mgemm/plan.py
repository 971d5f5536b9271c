"""The host-level scheduler: which worker computes which output block, in which order.

Pure Python (imports neither Dask nor CuPy), so every decision is testable on a CPU and printable
with ``mgemm plan``.  It mirrors the device-level tile scheduler (``mgemm/schedule.py``): output
blocks are to workers what output tiles are to SMs.

CONTRACT (used by ``mgemm/graph.py`` and ``mgemm/cli.py``; keep these names and meanings):

- ``Worker(name, kind, flops, memory, bandwidth, slots=1)``: a Dask worker; ``flops`` is its
  sustained FLOP/s for the problem's dtype, ``memory`` the bytes a plan may use there,
  ``bandwidth`` the bytes/s at which it fetches a chunk that lives on another worker, ``slots``
  the block tasks it runs at once to reach ``flops`` (a CPU worker's threads, each a
  single-threaded BLAS call; a GPU worker's one device: 1).
- ``Problem(m_chunks, n_chunks, k_chunks, itemsize, part_itemsize=None)``: C = A @ B with A's
  row chunks, B's column chunks, and the K chunking common to A and B (the graph refines
  mismatched K chunkings first); ``part_itemsize``: bytes per element of a split block's partials
  (4 for a 16-bit C, added up in float32; by default ``itemsize``).
- ``Block(i0, i1, j0, j1)``: one output block = the chunk rectangle rows [i0, i1) × cols [j0, j1).
- ``Work(block, k0, k1, worker, seq)``: one task: ``plan.blocks[block]`` over K chunks [k0, k1),
  on ``worker``, ``seq``-th in that worker's order.  A block with several Works is *split*; its
  partials are summed by a fix-up on ``plan.fixup[block]``.
- ``make_plan(problem, workers, *, block_size="auto", split="auto", locations=None) -> Plan``
  ``locations`` maps ``("a", i, k)`` / ``("b", k, j)`` chunk keys to the worker name holding it.
- ``choose_block_size(m, n, k, itemsize, workers, host=None)``: the block size "auto" means;
  ``host`` a ``HostCopies`` where NumPy chunks are multiplied on GPU workers (``mgemm.api``
  passes it, ``mgemm plan --host-chunks`` too).

How a plan is made: group whole chunks into blocks; give each block an owner (speed-proportional
bands of blocks, or, when ``locations`` is known, the cheapest of a greedy list schedule that
follows the data and row or column bands, ties going to the least data on the busiest fetcher);
move blocks off workers whose memory they overflow to those with room (``_fit``); order each
worker's blocks in the grouped order; split the K range of tail blocks (stream-K across
workers) where that shortens the plan and still fits memory (``split="on"``: wherever it
balances compute); predict every worker's time and check its memory.  The cost model, per
worker: compute = FLOPs / flops; fetch = bytes of the input chunks it uses but does not hold,
each counted once, / bandwidth; fix-up = the partials made on other workers, which it must read /
bandwidth.  Predicted time is max(compute, fetch) + fix-up: a worker fetches the inputs of its
queued tasks while others run, but a fix-up can only read partials once they exist.  Where
``locations`` is known and ``split`` is not "off", a GPU worker's first block that reads remote
chunks is also cut into K pieces so that held ones compute meanwhile (``_local_first``; kept
only where its partials fit the worker's memory); without ``locations`` no block is cut so.
With ``locations`` known and ``split`` not "off", a plan of another kind is priced beside that one
and taken where it is faster, or as fast and fetching less (``_by_holder``): every block split
along K by the worker holding each K chunk (a Gram product X.T @ X of a row-chunked X, whose C is
small beside its inputs), the K chunks reordered so each worker's are one run (``Plan.k_order``).

>>> plan = plan_from_shape(32768, 32768, 32768, itemsize=4, n_workers=2)
>>> plan.grid, [(w.block, w.worker, w.seq) for w in plan.work_for("worker-1")]
((2, 2), [(2, 'worker-1', 0), (3, 'worker-1', 1)])
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections import Counter, defaultdict
from dataclasses import asdict, astuple, dataclass, field
from typing import Mapping, Sequence, Union

from mgemm.schedule import grouped_order

GiB = 1 << 30
#: Synthetic workers for ``mgemm plan``: (FLOP/s at fp32, usable bytes, link bytes/s).
DEFAULTS = {"gpu": (51e12, 120 * GiB, 300e9), "cpu": (1e12, 16 * GiB, 10e9)}
#: One block's working set (A row panel + B column panel + C block) may take this share of a
#: worker's memory: the rest holds the prefetched next set and the input chunks stored there.
MEMORY_FRACTION = 0.25
#: ``split="auto"`` keeps tail splits only if they shorten the predicted makespan this much:
#: every split adds tasks and a fix-up, whose scheduling overhead the model leaves out.
SPLIT_GAIN = 0.01
SPLITS = ("auto", "on", "off")
#: The most output blocks, and chunks of one operand, mgemm plans: each is a Dask task, and Dask
#: schedules some thousands a second (a plan of 2^18 blocks alone takes the planner about 20 s).
MAX_BLOCKS = 1 << 18
MAX_CHUNKS = 1 << 20
#: Most pieces a block is cut into so its held inputs compute while remote ones arrive.
OVERLAP_PIECES = 4
#: ... and the least compute a piece keeps: a Dask task costs about a millisecond of overhead.
MIN_PIECE_SECONDS = 0.01
#: How many of a worker's blocks that read remote inputs are cut, in its order (None: all).  A
#: worker fetches the inputs of its later tasks while it computes earlier ones, so only the first
#: remote block gains from pieces; each piece costs a task and each cut block a fix-up.  Two
#: H200s (benchmarks/RESULTS.md, seventh session): 1 against None took bfloat16 65536³ from
#: 0.552 to 0.467 s (40 tasks and 8 fix-ups on one worker before) and was as fast or faster on
#: every other case timed.
OVERLAP_BLOCKS: int | None = 1
#: The same for CPU workers: none.  Their fetches (TCP) take the cores the pieces would compute
#: on, and each cut block adds partials and a fix-up.  Two single-thread worker processes,
#: persisted inputs where Dask put them, medians of 7 in turns (2026-12-05): 1 against 0 took
#: 2048² float32 107 against 99 ms, float64 207 against 189, 4096² float32 637 against 615,
#: float64 (512² chunks) 1477 against 1271.
CPU_OVERLAP_BLOCKS: int | None = 0
BlockSize = Union[str, int, tuple[int, int]]
ChunkKey = tuple  # ("a", i, k) or ("b", k, j)


@dataclass(frozen=True)
class HostCopies:
    """A product of NumPy chunks multiplied on GPU workers (``choose_block_size``'s ``host``):
    each block task copies its chunks to the GPU, a K part at a time, and its block back.

    ``keep``: device bytes a worker keeps copies of chunks read again in (a chunk read by several
    of its blocks crosses once if its panels fit); ``k_part``: K of one part (the first part's
    copy cannot overlap a GEMM); ``to_device`` / ``to_host``: the copies' bytes/s; ``task``:
    seconds a block task spends on the host beside its copies (Dask's overhead, waiting for its
    GEMMs, making its arrays), which many small blocks add up.  The defaults are an H100 host's
    through ``mgemm.staging``'s pinned buffers with eight copying threads: 256 MiB in 11-13 ms
    and back into a new host array in 18-36 ms (``benchmarks/staged_probe.py``), with
    ``to_host`` and ``task`` fitted to whole products (``benchmarks/host_inputs.py``, sixty-fifth
    session in ``benchmarks/RESULTS.md``): 16384³ float32 ran 1.27-1.28 x faster on 2 x 2 blocks
    than as one; 32768³ in float32 and float64 1.00-1.07 x on 2 x 2 against one block (two
    runs), and 4 x 4 no faster than one block.  Those fits predate the copy back by bands of rows
    (``mgemm.graph.back_bands``), which hides most of a block's copy back behind its last GEMMs;
    ``to_host`` still charges the whole copy, and with it the plan's 2 x 2 blocks stayed the
    fastest or level on both products (sixty-sixth session: 1.09-1.13 x faster than before).
    """

    keep: float
    k_part: int
    to_device: float = 20e9
    to_host: float = 8e9
    task: float = 0.02


def _whole(value: object) -> int | None:
    """``value`` as an int where it is a whole number (not a bool), else None."""
    try:
        whole = int(value)  # type: ignore[call-overload]
        return None if isinstance(value, bool) or whole != value else whole
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class Worker:
    """A Dask worker as the planner sees it (see the CONTRACT above).

    >>> Worker("tcp://10.0.0.1:4000", "gpu", flops=51e12, memory=120 * GiB, bandwidth=300e9).kind
    'gpu'
    """

    name: str
    kind: str
    flops: float
    memory: int
    bandwidth: float
    slots: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(f"a worker's name must be a string (its address), got {self.name!r}")
        if not (self.flops > 0 and self.memory > 0 and self.bandwidth > 0):
            raise ValueError(f"worker {self.name!r}: flops, memory and bandwidth must be > 0")
        if self.slots < 1:
            raise ValueError(f"worker {self.name!r}: slots must be at least 1, got {self.slots}")


@dataclass(frozen=True)
class Problem:
    """C = A @ B described by its chunking; element counts, and item sizes in bytes (C's, and
    that of the partials of a block split along K).

    >>> p = Problem((4096, 4096), (8192,), (1024,) * 4, itemsize=4)
    >>> p.m, p.n, p.k, p.flops, p.part_itemsize
    (8192, 8192, 4096, 549755813888, 4)
    """

    m_chunks: tuple[int, ...]
    n_chunks: tuple[int, ...]
    k_chunks: tuple[int, ...]
    itemsize: int
    part_itemsize: int | None = None

    def __post_init__(self) -> None:
        for name in ("m_chunks", "n_chunks", "k_chunks"):
            given = getattr(self, name)
            try:
                chunks = () if isinstance(given, (str, bytes)) else tuple(_whole(c) for c in given)
            except TypeError:  # not a sequence
                chunks = ()
            if not chunks or None in chunks or min(chunks) < 0 or sum(chunks) == 0:
                raise ValueError(f"{name} must be whole sizes >= 0 with a positive sum, "
                                 f"got {given!r}")
            object.__setattr__(self, name, chunks)
        if self.part_itemsize is None:
            object.__setattr__(self, "part_itemsize", self.itemsize)
        sizes = (_whole(self.itemsize), _whole(self.part_itemsize))
        if None in sizes or min(sizes) <= 0:
            raise ValueError(f"item sizes must be positive whole numbers, got {self.itemsize!r} "
                             f"and {self.part_itemsize!r}")
        object.__setattr__(self, "itemsize", sizes[0])
        object.__setattr__(self, "part_itemsize", sizes[1])

    @property
    def m(self) -> int:
        return sum(self.m_chunks)

    @property
    def n(self) -> int:
        return sum(self.n_chunks)

    @property
    def k(self) -> int:
        return sum(self.k_chunks)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


class MemoryPlanError(ValueError):
    """The workers cannot hold the product as planned (their ``memory``)."""


class PlanSizeError(ValueError):
    """The product has more output blocks or operand chunks than mgemm plans (``check_counts``)."""


#: ``Plan.table`` lists each worker's first this many tasks in order.
ORDER_SHOWN = 16


@dataclass(frozen=True)
class Block:
    """Output block: chunk rows [i0, i1) × chunk columns [j0, j1) of C."""

    i0: int
    i1: int
    j0: int
    j1: int


@dataclass(frozen=True)
class Work:
    """One task: ``plan.blocks[block]`` over K chunks [k0, k1), ``seq``-th on ``worker``."""

    block: int
    k0: int
    k1: int
    worker: str
    seq: int


@dataclass(frozen=True)
class WorkerLoad:
    """The cost model's account of one worker: counts, FLOPs, bytes and seconds."""

    blocks: int  # whole blocks computed
    parts: int  # K pieces of split blocks computed
    flops: float
    fetched: int  # bytes of input chunks fetched from elsewhere, each once
    compute_s: float
    fetch_s: float
    fixup_s: float
    memory: int  # estimated peak bytes: inputs stored + outputs + fetched panels alive at once


@dataclass(frozen=True)
class Plan:
    """Blocks, who computes each (``work``), who sums split blocks, and the predicted times."""

    problem: Problem
    workers: tuple[Worker, ...]
    blocks: tuple[Block, ...]
    work: tuple[Work, ...]
    fixup: dict[int, str]
    predicted: dict[str, float]
    loads: dict[str, WorkerLoad] = field(default_factory=dict)
    #: The K chunks in the order the Works' [k0, k1) index them (None: 0, 1, 2, ...).  A plan
    #: that splits K by the workers holding the chunks (``_by_holder``) takes each worker's
    #: chunks as one run.
    k_order: tuple[int, ...] | None = None

    def k_chunks_of(self, work: Work) -> Sequence[int]:
        """The K chunk indices ``work`` reads, in the order it adds them.

        >>> plan = make_plan(Problem((8,), (8,), (2,) * 4, 8), [Worker("w", "cpu", 1e9, GiB, 1e9)])
        >>> list(plan.k_chunks_of(plan.work[0]))
        [0, 1, 2, 3]
        """
        if self.k_order is None:
            return range(work.k0, work.k1)
        return self.k_order[work.k0:work.k1]

    def work_for(self, worker: str) -> tuple[Work, ...]:
        """The Works of ``worker`` in the order it runs them."""
        return tuple(sorted((w for w in self.work if w.worker == worker), key=lambda w: w.seq))

    def split_blocks(self) -> tuple[int, ...]:
        """Indices of the blocks whose K range is shared by several Works."""
        count = Counter(w.block for w in self.work)
        return tuple(sorted(b for b, c in count.items() if c > 1))

    @property
    def makespan(self) -> float:
        return max(self.predicted.values(), default=0.0)

    @property
    def grid(self) -> tuple[int, int]:
        """Block rows × block columns."""
        return (len({(b.i0, b.i1) for b in self.blocks}), len({(b.j0, b.j1) for b in self.blocks}))

    def block_rows(self, b: int) -> tuple[int, int]:
        """Element range [start, stop) of block ``b``'s rows of C."""
        starts = _offsets(self.problem.m_chunks)
        return starts[self.blocks[b].i0], starts[self.blocks[b].i1]

    def block_cols(self, b: int) -> tuple[int, int]:
        """Element range [start, stop) of block ``b``'s columns of C."""
        starts = _offsets(self.problem.n_chunks)
        return starts[self.blocks[b].j0], starts[self.blocks[b].j1]

    def signature(self) -> str:
        """What the plan computes where, as one string (for graph keys: 20x quicker to tokenize
        than ``to_dict``, and the predictions, which change nothing computed, are left out)."""
        return repr((self.problem, self.blocks, self.work, sorted(self.fixup.items()),
                     self.k_order))

    def to_dict(self) -> dict:
        """Plain lists and dicts (``json.dumps``-able)."""
        return {"problem": asdict(self.problem), "workers": [asdict(w) for w in self.workers],
                "blocks": [list(astuple(b)) for b in self.blocks],
                "work": [asdict(w) for w in self.work],
                "fixup": {str(b): w for b, w in self.fixup.items()},
                "predicted": dict(self.predicted), "makespan": self.makespan,
                "loads": {name: asdict(load) for name, load in self.loads.items()},
                "k_order": None if self.k_order is None else list(self.k_order)}

    def table(self) -> str:
        """A readable summary: the problem, one line per worker, each worker's blocks in order
        (the first ``ORDER_SHOWN``), then the split blocks."""
        p, (gm, gn) = self.problem, self.grid
        size = max(b - a for a, b in map(self.block_rows, range(len(self.blocks))))
        width = max(b - a for a, b in map(self.block_cols, range(len(self.blocks))))
        name_w = max(6, *(len(w.name) for w in self.workers))
        k_chunks = f"{len(p.k_chunks)} chunk" + ("s" if len(p.k_chunks) > 1 else "")
        partials = f" (partials {p.part_itemsize})" if p.part_itemsize != p.itemsize else ""
        lines = [f"M={p.m} N={p.n} K={p.k}  dtype {p.itemsize} bytes{partials}  blocks {gm}x{gn} "
                 f"(up to {size}x{width}, K in {k_chunks})  "
                 f"workers {len(self.workers)}  makespan {self.makespan:.4g} s",
                 f"{'worker':<{name_w}}  blocks  parts      GFLOP    fetched  predicted s  "
                 f"(max(compute, fetch) + fix-up)  memory peak"]
        for w in self.workers:
            ld = self.loads[w.name]
            lines.append(f"{w.name:<{name_w}}  {ld.blocks:>6}  {ld.parts:>5}  {ld.flops / 1e9:>9.4g}"
                         f"  {_fmt_bytes(ld.fetched):>9}  {self.predicted[w.name]:>11.4g}  "
                         f"(max({ld.compute_s:.3g}, {ld.fetch_s:.3g}) + {ld.fixup_s:.3g})"
                         f"  {_fmt_bytes(ld.memory)}")
        lines.append("order (block row,col in the grid; [K chunks k0:k1] of a split block):")
        if self.k_order is not None:
            lines.append("  (K split by the workers holding the chunks: k0:k1 index the K chunks "
                         "taken in the order of their holders, k_order in --json)")
        for w in self.workers:
            steps = [f"({wk.block // gn},{wk.block % gn})"
                     + (f"[K{wk.k0}:{wk.k1}]" if wk.block in self.fixup else "")
                     for wk in self.work_for(w.name)]
            more = f" ... {len(steps) - ORDER_SHOWN} more (--json lists all)" \
                if len(steps) > ORDER_SHOWN else ""
            lines.append(f"  {w.name:<{name_w}}  {' '.join(steps[:ORDER_SHOWN]) or '-'}{more}")
        lines.append(f"split blocks: {len(self.fixup) or 'none'}")
        for b in self.split_blocks():
            parts = ", ".join(f"K {w.k0}:{w.k1} on {w.worker}"
                              for w in sorted(self.work, key=lambda w: w.k0) if w.block == b)
            lines.append(f"  block {b} rows {self.block_rows(b)} cols {self.block_cols(b)}: "
                         f"{parts}; fix-up on {self.fixup[b]}")
        return "\n".join(lines)


# -- block size ------------------------------------------------------------------------------------

def choose_block_size(m: int, n: int, k: int, itemsize: int, workers: Sequence[Worker],
                      host: HostCopies | None = None) -> tuple[int, int]:
    """Output block (rows, cols) for an m×k @ k×n product on ``workers``; deterministic.

    Among block grids whose edges are at least a quarter of the GEMM-efficiency knee (4096 on
    GPUs, 1024 on CPUs; smaller edges only where no such grid fits memory), take the first by:
    the working set (A row panel + B column panel + C block) of every slot at once fits
    ``MEMORY_FRACTION`` of the worker's memory; every worker gets a block; CPU blocks stay
    ≤ 2048 where tasks share the cores (more than one slot in all: a lone slot gains nothing
    from more tasks, and in this process without a cluster BLAS runs on every core inside the
    task); then the shortest estimated makespan (wave
    quantization over the workers' slots, GEMM efficiency, exposed transfers); then fewer
    blocks, then squarer blocks.  ``host``: the chunks are NumPy arrays copied to the GPUs by
    each block task (``HostCopies``), so the first blocks' first K parts and the last blocks'
    copies back are exposed: smaller blocks than for chunks already on the GPUs.

    >>> h200 = Worker("g", "gpu", 51e12, 120 * GiB, 300e9)
    >>> choose_block_size(32768, 32768, 32768, 4, [h200, h200])
    (16384, 16384)
    >>> choose_block_size(8192, 8192, 8192, 4, [h200] * 8)  # 2 blocks each, 2048 still fast
    (2048, 2048)
    >>> cpu = Worker("c", "cpu", 100e9, 16 * GiB, 10e9)
    >>> choose_block_size(4096, 4096, 4096, 8, [cpu] * 2)
    (2048, 2048)
    >>> cpu16 = Worker("c", "cpu", 1.6e12, 16 * GiB, 10e9, slots=16)  # a block for every thread
    >>> choose_block_size(4096, 4096, 4096, 8, [cpu16] * 2)
    (512, 512)
    >>> h100 = Worker("g", "gpu", 53e12, 62 * GiB, 300e9)
    >>> choose_block_size(32768, 32768, 32768, 4, [h100])
    (32768, 32768)
    >>> choose_block_size(32768, 32768, 32768, 4, [h100], HostCopies(31 * GiB, 8192))
    (16384, 16384)
    """
    if min(m, n, k, itemsize) < 1:
        raise ValueError(f"sizes and itemsize must be positive, got m={m}, n={n}, k={k}, "
                         f"itemsize={itemsize}")
    return _choose_block_size(m, n, k, itemsize, tuple(workers), host)


@functools.lru_cache(maxsize=256)  # pure: a product of the same shape on the same workers asks again
def _choose_block_size(m: int, n: int, k: int, itemsize: int, workers: tuple[Worker, ...],
                       host: HostCopies | None) -> tuple[int, int]:
    p = len(workers)
    if p == 0:
        raise ValueError("no workers to plan for")
    gpu = any(w.kind == "gpu" for w in workers)
    slots = -(-sum(w.slots for w in workers) // p)
    # CPU blocks are capped where tasks share the cores; one worker of one slot (this process,
    # BLAS on every core inside each task) runs its blocks best whole
    knee, cap = (4096, None) if gpu else (1024, 2048 if p * slots > 1 else None)
    budget = MEMORY_FRACTION * min(w.memory / w.slots for w in workers)
    speed, bandwidth = sum(w.flops for w in workers) / p, min(w.bandwidth for w in workers)
    ideal = 2.0 * m * n * k / (speed * p)

    def key(grid: tuple[int, int]) -> tuple:
        gm, gn = grid
        rows, cols = -(-m // gm), -(-n // gn)
        need = (rows * k + k * cols + rows * cols) * itemsize
        t = _estimate(m, n, k, itemsize, grid, p, speed, bandwidth, knee, slots, host)
        too_big = cap is not None and max(rows, cols) > cap
        return (need if need > budget else 0, gm * gn < p, too_big, round(t / ideal, 3),
                gm * gn, abs(rows - cols), gm)

    gm, gn = min(itertools.product(_counts(m, knee // 4, p), _counts(n, knee // 4, p)), key=key)
    if key((gm, gn))[0]:  # no block that large fits: below the floor, the largest that does
        gm, gn = min(itertools.product(_counts(m, 1, p), _counts(n, 1, p)), key=key)
    return -(-m // gm), -(-n // gn)


def _counts(size: int, floor: int, p: int) -> list[int]:
    """Candidate block counts along an axis: 1..4p and those giving power-of-two edges ≥ floor."""
    most = max(1, size // floor)
    counts = set(range(1, min(most, 4 * p) + 1))
    edge = floor
    while edge < size:
        counts.add(min(most, -(-size // edge)))
        edge *= 2
    return sorted(counts)


def _estimate(m: int, n: int, k: int, itemsize: int, grid: tuple[int, int], p: int,
              speed: float, bandwidth: float, knee: int, slots: int = 1,
              host: HostCopies | None = None) -> float:
    """Rough makespan of a banded plan on ``grid`` blocks, every worker at ``speed`` over
    ``slots`` block tasks at a time (``host``: as ``choose_block_size``'s)."""
    gm, gn = grid
    rows, cols = -(-m // gm), -(-n // gn)
    q = -(-gm * gn // p)  # blocks on the busiest worker
    edge = min(rows, cols)
    waves = -(-q // slots)  # each block on one slot, at 1/slots of the worker's speed
    compute = waves * slots * 2.0 * rows * cols * k / (speed * edge / (edge + knee / 8))
    per_edge = (p - 1) / p * k * itemsize / bandwidth  # seconds to fetch one row/col of a panel
    band = min(m, rows * -(-q // gn)) + min(n, cols * min(q, gn))
    # The first block's panels cannot overlap a GEMM; later ones can, as far as compute lasts.
    fetched = band * per_edge
    if host is not None:
        # each worker's chunks cross to its GPU (each once where its panels fit the kept
        # copies, else once per block), its blocks back; the first slots' first K parts
        # cannot overlap a GEMM, nor can the last wave's copies back
        read = band if band * k * itemsize <= host.keep else q * (rows + cols)
        fetched += (read * k * itemsize / host.to_device
                    + q * rows * cols * itemsize / host.to_host)
        compute += (min(slots, q) * ((rows + cols) * min(k, host.k_part) * itemsize / host.to_device
                                     + rows * cols * itemsize / host.to_host)
                    + waves * host.task)
    return compute + (rows + cols) * per_edge + max(0.0, fetched - compute)


# -- the planner -----------------------------------------------------------------------------------

def make_plan(problem: Problem, workers: Sequence[Worker], *, block_size: BlockSize = "auto",
              split: str = "auto", locations: Mapping[ChunkKey, str] | None = None) -> Plan:
    """Plan C = A @ B over ``workers`` (see the module docstring for the steps and costs).

    ``block_size``: "auto", n (n×n) or (rows, cols) in elements; blocks are runs of whole chunks
    close to it.  ``split``: "off"; "auto" splits tail blocks along K where that shortens the
    predicted makespan; "on" always splits them to balance compute, as stream-K does.
    ``locations``: where input chunks live; unknown keys or workers count as remote.  Without it,
    the inputs are assumed spread as Dask places a fresh array: contiguous runs of chunks, in
    row-major order, of equal bytes per worker.

    >>> w = [Worker(f"w{i}", "cpu", 1e9, GiB, 1e12) for i in range(2)]
    >>> plan = make_plan(Problem((8,) * 3, (8,), (2,) * 4, 8), w, block_size=8, split="on")
    >>> [(x.block, x.k0, x.k1, x.worker) for x in plan.work], plan.fixup
    ([(0, 0, 4, 'w0'), (2, 2, 4, 'w0'), (1, 0, 4, 'w1'), (2, 0, 2, 'w1')], {2: 'w1'})
    """
    workers = tuple(workers)
    if not workers or len({w.name for w in workers}) != len(workers):
        raise ValueError("workers must be a non-empty sequence with unique names")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    rows, cols = _block_size(block_size, problem, workers)
    row_runs, col_runs = _group(problem.m_chunks, rows), _group(problem.n_chunks, cols)
    check_counts(len(row_runs), len(col_runs),
                 (len(problem.m_chunks), len(problem.n_chunks), len(problem.k_chunks)))
    known = locations is not None
    model = _Model(problem, workers, row_runs, col_runs,
                   locations if known else _spread(problem, workers))
    owner, orders, ledger = _cheapest([_assemble(model, own) for own in _owners(model, known)])
    if _over(model, ledger, orders, owner):
        owner, orders, ledger = _fit(model, owner) or (owner, orders, ledger)
    hint = ""
    if split != "off" and model.nk > 1:
        trial = [[list(e) for e in order] for order in orders]
        tried = _Ledger(model, trial, owner)
        _split_tail(model, tried, trial, owner, full=(split == "auto"))
        faster = tried.makespan() < ledger.makespan() * (1 - SPLIT_GAIN)
        if (split == "on" or faster) and _over(model, tried, trial, owner):
            whole_fits = not _over(model, ledger, orders, owner)
            # "auto" splits for speed, never into a plan that does not fit where the whole one does
            faster = faster and not whole_fits
            hint = ' or split="off"' if whole_fits else ""
        if split == "on" or faster:
            orders, ledger = trial, tried
    if known and split != "off":
        cut = [_local_first(model, w, order, owner, OVERLAP_BLOCKS
                            if model.workers[w].kind == "gpu" else CPU_OVERLAP_BLOCKS)
               for w, order in enumerate(orders)]
        # a worker's pieces are partial blocks held until its fix-up: kept where they fit
        # (cutting one worker's order changes no other worker's peak)
        over = _over(model, ledger, cut, owner, [w for w in range(len(cut)) if cut[w] != orders[w]])
        orders = [order if w in over else cut[w] for w, order in enumerate(orders)]
    if known and split != "off" and model.nk > 1:
        local = _by_holder(model, row_runs, col_runs, locations, ledger.makespan())
        if local is not None and _takes_over(local[3], ledger, _over(model, ledger, orders, owner)):
            local_model, local_owner, local_orders, local_ledger, k_order = local
            return _finish(local_model, local_ledger, local_orders, local_owner, (rows, cols),
                           reordered=(problem, k_order))
    return _finish(model, ledger, orders, owner, (rows, cols), hint)


def _by_holder(model: _Model, row_runs: list[tuple[int, int]], col_runs: list[tuple[int, int]],
               locations: Mapping[ChunkKey, str], beat: float = math.inf) -> tuple | None:
    """The plan that splits K by where the chunks live: every block in one part per worker, the
    part over the K chunks that worker holds (A's and B's chunks at K index k count for the worker
    holding most of their bytes, as ``model``, the blocks' model, counts them), summed by a
    fix-up; (model, owner, orders, ledger, K order) in a model whose K chunks are reordered so
    each worker's run is contiguous, or None where fewer than two workers hold chunks or the
    plan does not fit the workers' memory.

    This is how a Gram product X.T @ X of a row-chunked X is best made (deep K, a small C): its
    inputs stay where they are and only C-sized partials move.  Two layouts of the runs are
    priced, and the cheaper kept: each worker's own chunks, and those evened out by speed
    (``_even_out``: for uneven holdings, a worker then also reads a chunk or two held by
    another).  None, unpriced, where even its bound (all compute spread by speed, and
    each block's partials from the other runs read by owners sharing them evenly) exceeds
    ``beat`` by ``SPLIT_GAIN``.  A worker of several slots (``Worker.slots``) gets its run cut
    into as many pieces per block as give each slot a task; where blocks x pieces leave slots
    idle, its compute is priced at the slots it fills.
    """
    problem, workers, nk = model.problem, model.workers, model.nk
    p, slabs = len(workers), range(0, len(model.slab_bytes), nk)
    # bytes of A's and B's chunks at each K index that each worker holds (the blocks' model's)
    held = [[sum(model.slab_bytes[q + k] - model.remote[w][q + k] for q in slabs)
             for w in range(p)] for k in range(nk)]
    holder = [max(range(p), key=lambda w: (h[w], -w)) if max(h) else p for h in held]
    holders = len({h for h in holder if h < p})
    if holders < 2:
        return None
    c_parts = problem.m * problem.n * problem.part_itemsize
    bound = (problem.flops / sum(w.flops for w in workers)
             + c_parts * (holders - 1) / holders / max(w.bandwidth for w in workers))
    if bound > beat * (1 + SPLIT_GAIN):
        return None
    sizes, speed = problem.k_chunks, [w.flops for w in workers]
    own = _even_out(holder, sizes, speed, moves=0)
    evened = _even_out(own, sizes, speed)
    best = None
    for assign in [own] + ([evened] if evened != own else []):
        k_order = tuple(sorted(range(nk), key=lambda k: (assign[k], k)))
        reordered = _Model(Problem(problem.m_chunks, problem.n_chunks,
                                   tuple(sizes[k] for k in k_order), problem.itemsize,
                                   problem.part_itemsize), workers, row_runs, col_runs,
                           _reordered(locations, k_order))
        count = Counter(assign)  # worker w's run: [bounds[w], bounds[w + 1])
        option = _holder_option(reordered, list(itertools.accumulate(
            (count[w] for w in range(p)), initial=0)))
        if option is not None and (best is None or option[2].makespan() < best[3].makespan()):
            best = (reordered, *option, k_order)
    return best


def _even_out(assign: list[int], sizes: Sequence[int], speed: list[float],
              moves: int | None = None) -> list[int]:
    """``assign`` (a worker per K chunk; ``len(speed)``: none) with the unassigned chunks given to
    the worker that would finish first, then up to ``moves`` (None: any number of) chunks moved,
    one at a time, from the worker whose share of K takes longest to the one whose takes least,
    while that shortens the longer of the two.

    >>> _even_out([0, 0, 0, 0, 1, 2], [1] * 6, [1.0, 1.0])  # chunk 5 is held by neither
    [0, 0, 0, 1, 1, 1]
    """
    p = len(speed)
    assign, load = list(assign), [0] * p
    for k, w in enumerate(assign):
        if w < p:
            load[w] += sizes[k]
    for k, w in enumerate(assign):
        if w >= p:
            assign[k] = min(range(p), key=lambda v: ((load[v] + sizes[k]) / speed[v], v))
            load[assign[k]] += sizes[k]
    for _ in range(len(assign) if moves is None else moves):
        slow = max(range(p), key=lambda v: (load[v] / speed[v], -v))
        fast = min(range(p), key=lambda v: (load[v] / speed[v], v))

        def after(k: int) -> float:  # the longer of the two shares with chunk k moved
            return max((load[slow] - sizes[k]) / speed[slow], (load[fast] + sizes[k]) / speed[fast])

        k = min((k for k, w in enumerate(assign) if w == slow), default=None,
                key=lambda k: (after(k), -k))
        if k is None or after(k) >= load[slow] / speed[slow]:
            break
        assign[k] = fast
        load[slow] -= sizes[k]
        load[fast] += sizes[k]
    return assign


def _reordered(locations: Mapping[ChunkKey, str], k_order: tuple[int, ...]) -> dict:
    """``locations`` with each K index replaced by its position in ``k_order``."""
    position = {k: pos for pos, k in enumerate(k_order)}
    out = {}
    for key, where in locations.items():
        if isinstance(key, tuple) and len(key) == 3 and key[0] in ("a", "b"):
            name, x, y = key
            pos = position.get(y if name == "a" else x)
            if pos is not None:
                out[(name, x, pos) if name == "a" else (name, pos, y)] = where
    return out


def _holder_option(model: _Model, bounds: list[int]) -> tuple | None:
    """(owner, orders, ledger) of ``_by_holder``'s plan with worker w's run [bounds[w],
    bounds[w + 1]) of the reordered K chunks; None where fewer than two runs are non-empty or a
    worker's memory would overflow."""
    p, nb = len(model.workers), len(model.blocks)
    runs = {w: (bounds[w], bounds[w + 1]) for w in range(p) if bounds[w] < bounds[w + 1]}
    if len(runs) < 2:
        return None
    starts = model.kstart
    orders: list[list[list[int]]] = [[] for _ in range(p)]
    filled = {}
    for w, (k0, k1) in runs.items():
        pieces = min(k1 - k0, max(1, -(-model.workers[w].slots // nb)))
        cuts = [k0] + [min(range(k0 + 1, k1), key=lambda pos: abs(
            starts[pos] - starts[k0] - (starts[k1] - starts[k0]) * i / pieces))
            for i in range(1, pieces)] + [k1]
        cuts = sorted(set(cuts))
        filled[w] = min(1.0, nb * (len(cuts) - 1) / model.workers[w].slots)
        orders[w] = [[b, c0, c1] for b in range(nb) for c0, c1 in zip(cuts, cuts[1:])]
    # each block's fix-up on the worker with the fewest partials to read so far (ties: the
    # longest run, whose own partial it reads in place)
    owner, reads = [0] * nb, [0] * p
    for b in range(nb):
        o = min(runs, key=lambda w: (reads[w], -(runs[w][1] - runs[w][0]), w))
        owner[b] = o
        reads[o] += sum(1 for w in runs if w != o)
    ledger = _Ledger(model, orders, owner)
    for w, share in filled.items():  # slots left idle: the same FLOPs at their share of speed
        ledger.compute[w] /= share
    if _over(model, ledger, orders, owner):
        return None
    return owner, orders, ledger


def _takes_over(local: "_Ledger", ledger: "_Ledger", over: list[int]) -> bool:
    """Whether ``_by_holder``'s plan (``local``) replaces the one made by blocks (``ledger``;
    ``over``: its workers whose memory overflows): where it fits and the other does not, where
    it is faster by ``SPLIT_GAIN``, or where it is within ``SPLIT_GAIN`` and its busiest fetcher
    spends less time fetching (the model hides fetches behind compute, but a worker starts only
    once its first inputs are in, and fetches over TCP take the CPU time that computes on CPU
    workers); the time saved must be ``MIN_PIECE_SECONDS`` at least, for the tasks it adds."""
    if over:
        return True
    best, mine = ledger.makespan(), local.makespan()
    if mine < best * (1 - SPLIT_GAIN):
        return best - mine >= MIN_PIECE_SECONDS
    fetched = [max(x.fetched[w] / x.model.workers[w].bandwidth for w in range(len(x.fetched)))
               for x in (ledger, local)]
    return mine <= best * (1 + SPLIT_GAIN) and fetched[0] - fetched[1] >= MIN_PIECE_SECONDS


def _local_first(model: _Model, w: int, order: list[list[int]],
                 owner: list[int], cut: int | None = 1) -> list[list[int]]:
    """Overlap of copy and compute: cut ``w``'s first ``cut`` blocks (all, if None;
    ``OVERLAP_BLOCKS`` on GPU workers, ``CPU_OVERLAP_BLOCKS`` on CPU ones) that read remote
    inputs and are long enough (``MIN_PIECE_SECONDS`` a piece) into up to
    ``OVERLAP_PIECES`` runs of K chunks, run the pieces whose inputs are all held on ``w`` first,
    then the others, fewest remote bytes first.

    Dask starts a task only when all its inputs are there, so a whole block with one remote
    panel idles the GPU until the whole panel has arrived; as pieces, the held ones compute while
    the rest arrives, and each remote piece starts as soon as its own chunks are in.  Only blocks
    whose fix-up runs on ``w`` are cut, so the partials are summed where they are made: bytes
    moved, FLOPs and predicted times are unchanged.  The bound on pieces bounds the partial C
    blocks held at once.  Remote blocks past the first ``cut`` cut ones run whole after
    the pieces, fewest remote bytes first, their inputs fetched while the pieces compute; a remote
    block too short to cut keeps its place among the held work.  The block cut first is the one
    whose least remote piece needs the fewest remote bytes (earliest in the order on ties), moved
    to the front: where some block has a piece with every chunk held, ``w`` starts computing as
    soon as its tasks arrive instead of after its first fetches.

    >>> w = [Worker("w0", "gpu", 1e3, GiB, 1e9)]
    >>> prob = Problem((4,), (4,), (2, 2, 2, 2), 4)
    >>> here = {("a", 0, k): "w0" for k in range(4)} | {("b", 2, 0): "w0", ("b", 3, 0): "w0"}
    >>> [(x.k0, x.k1) for x in make_plan(prob, w, block_size=4, locations=here).work]
    [(2, 3), (3, 4), (0, 1), (1, 2)]
    """
    nk, remote, panel_remote = model.nk, model.remote[w], model.panel_remote[w]
    prefix = [list(itertools.accumulate(remote[q * nk:(q + 1) * nk], initial=0))
              for q in range(len(panel_remote))]

    def moved(qa: int, qb: int, lo: int, hi: int) -> int:  # remote bytes of K chunks [lo, hi)
        return prefix[qa][hi] - prefix[qa][lo] + prefix[qb][hi] - prefix[qb][lo]

    @functools.lru_cache(maxsize=None)  # asked twice per block: choosing the first cut, cutting
    def pieces(b: int, k0: int, k1: int) -> tuple[tuple[int, int], ...]:
        seconds = model.flops(b, k0, k1) / model.workers[w].flops
        parts = min(OVERLAP_PIECES, k1 - k0, int(seconds / MIN_PIECE_SECONDS))
        cuts = [k0 + (k1 - k0) * i // parts for i in range(parts + 1)] if parts >= 2 else []
        return tuple(zip(cuts, cuts[1:]))

    def remote_own(b: int, k0: int, k1: int) -> bool:  # w's fix-up, remote inputs, 2+ K chunks
        qa, qb = model.panels(b)
        return owner[b] == w and bool(panel_remote[qa] or panel_remote[qb]) and k1 - k0 >= 2

    # The first block cut is the one with the piece that needs the least remote data (ideally a
    # piece whose chunks are all held, which starts as soon as the task arrives), earliest first.
    candidates = [i for i, entry in enumerate(order) if remote_own(*entry) and pieces(*entry)]
    if candidates and cut != 0:
        def least_remote(i: int) -> int:
            b, k0, k1 = order[i]
            qa, qb = model.panels(b)
            return min(moved(qa, qb, lo, hi) for lo, hi in pieces(b, k0, k1))
        first = min(candidates, key=lambda i: (least_remote(i), i))
        order = [order[first]] + order[:first] + order[first + 1:]

    held, fetch, cut_blocks = [], [], 0
    for b, k0, k1 in order:
        if not remote_own(b, k0, k1):
            held.append([b, k0, k1])
            continue
        qa, qb = model.panels(b)
        if cut is not None and cut_blocks >= cut:
            # fetched while earlier tasks run: stays whole, after the pieces
            fetch.append((moved(qa, qb, k0, k1), len(fetch), [b, k0, k1]))
            continue
        runs = pieces(b, k0, k1)
        if not runs:
            held.append([b, k0, k1])
            continue
        cut_blocks += 1
        for lo, hi in runs:
            if remote_bytes := moved(qa, qb, lo, hi):
                fetch.append((remote_bytes, len(fetch), [b, lo, hi]))
            else:
                held.append([b, lo, hi])
    return held + [piece for _, _, piece in sorted(fetch)]


def _block_size(block_size: BlockSize, problem: Problem,
                workers: tuple[Worker, ...]) -> tuple[int, int]:
    size = parse_block_size(block_size)
    if size == "auto":
        return choose_block_size(problem.m, problem.n, problem.k, problem.itemsize, workers)
    return (size, size) if isinstance(size, int) else size


def parse_block_size(value: object) -> str | int | tuple[int, int]:
    """``"auto"``, an edge length ``n`` (blocks n × n) or a pair ``(rows, cols)`` of positive
    integers.

    >>> parse_block_size("512x256"), parse_block_size(" 64 "), parse_block_size((2, 3.0))
    ((512, 256), 64, (2, 3))
    >>> parse_block_size((2.5, 3))
    Traceback (most recent call last):
    ...
    ValueError: block_size must be 'auto', n or (rows, cols) of positive integers, got (2.5, 3)
    """
    given = value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        value = [p for p in text.replace("x", ",").split(",") if p]
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    try:
        sizes = [positive_int(v) for v in items]
    except (TypeError, ValueError, OverflowError):
        sizes = []
    if len(sizes) != len(items) or len(sizes) not in (1, 2):
        raise ValueError(f"block_size must be 'auto', n or (rows, cols) of positive integers, "
                         f"got {given!r}")
    return sizes[0] if len(sizes) == 1 else tuple(sizes)


def positive_int(value: object) -> int:
    """``value`` (a number, or one written as a string) as an int where it is a positive whole
    number (not a bool), else ValueError."""
    whole = _whole(int(value.strip()) if isinstance(value, str) else value)
    if whole is None or whole < 1:
        raise ValueError(value)
    return whole


def check_counts(block_rows: int, block_cols: int, chunks: tuple[int, int, int],
                 fix: str = "rechunk to larger chunks") -> None:
    """Refuse a product of more than ``MAX_BLOCKS`` output blocks (``block_rows`` x
    ``block_cols``), or operands of more than ``MAX_CHUNKS`` chunks (``chunks``: A's row, B's
    column and the K chunk counts), before planning it would take minutes and gigabytes.
    ``fix``: what the second error advises."""
    mc, nc, kc = chunks
    blocks, most = block_rows * block_cols, max(mc, nc)
    if blocks > MAX_BLOCKS:
        raise PlanSizeError(f"{block_rows} x {block_cols} = {blocks:,} output blocks: mgemm plans "
                            f"at most {MAX_BLOCKS:,} (each a Dask task); use a larger block_size, "
                            f"or larger chunks")
    if most * kc > MAX_CHUNKS:
        raise PlanSizeError(f"an operand of {most} x {kc} = {most * kc:,} chunks: mgemm plans at "
                            f"most {MAX_CHUNKS:,} chunks an operand (each a Dask task); {fix}")


def _group(chunks: Sequence[int], target: int) -> list[tuple[int, int]]:
    """Runs [start, stop) of consecutive whole chunks whose sizes add up closest to ``target``;
    a short remainder joins the run before it when that is closer to the target."""
    runs, start, size, before = [], 0, 0, 0
    for i, c in enumerate(chunks):
        if i > start and abs(size + c - target) > abs(size - target):
            runs.append((start, i))
            start, size, before = i, 0, size
        size += c
    if runs and abs(before + size - target) < abs(size - target):
        start = runs.pop()[0]
    return runs + [(start, len(chunks))]


def _offsets(chunks: Sequence[int]) -> list[int]:
    return [0, *itertools.accumulate(chunks)]


def _spread(problem: Problem, workers: tuple[Worker, ...]) -> dict[ChunkKey, str]:
    """Assumed homes of the input chunks: equal-byte contiguous runs in row-major chunk order."""
    p, out = len(workers), {}
    for name, grid in (("a", (problem.m_chunks, problem.k_chunks)),
                       ("b", (problem.k_chunks, problem.n_chunks))):
        rows, cols = grid
        total, done = sum(rows) * sum(cols), 0
        for (r, rs), (c, cs) in itertools.product(enumerate(rows), enumerate(cols)):
            w = min(p - 1, int((done + rs * cs / 2) * p / total))
            out[(name, r, c)] = workers[w].name
            done += rs * cs
    return out


class _Model:
    """One planning problem precomputed: blocks, and per worker the remote bytes of each slab.

    A *panel* is a block row of A (index ``bi``) or a block column of B (``nrows + bj``); a *slab*
    is a panel at one K chunk (``panel * nk + k``), the unit a piece of a split block reads.
    """

    def __init__(self, problem: Problem, workers: tuple[Worker, ...], row_runs: list[tuple[int, int]],
                 col_runs: list[tuple[int, int]], locations: Mapping[ChunkKey, str]) -> None:
        """``row_runs``, ``col_runs``: the blocks' runs of chunks (``_group``)."""
        self.problem, self.workers = problem, workers
        self.blocks = tuple(Block(i0, i1, j0, j1) for (i0, i1) in row_runs for (j0, j1) in col_runs)
        self.ncols, self.nk, self.nrows = len(col_runs), len(problem.k_chunks), len(row_runs)
        self.heights = [sum(problem.m_chunks[a:b]) for a, b in row_runs]
        self.widths = [sum(problem.n_chunks[a:b]) for a, b in col_runs]
        self.kstart = _offsets(problem.k_chunks)
        index = {w.name: i for i, w in enumerate(workers)}
        nslabs = (self.nrows + self.ncols) * self.nk
        self.slab_bytes, self.stored = [0] * nslabs, [0] * len(workers)
        local = [[0] * nslabs for _ in workers]
        for name, runs, sizes, offset in (("a", row_runs, problem.m_chunks, 0),
                                          ("b", col_runs, problem.n_chunks, self.nrows)):
            for r, (c0, c1) in enumerate(runs):
                for c, kk in itertools.product(range(c0, c1), range(self.nk)):
                    s, nbytes = (offset + r) * self.nk + kk, sizes[c] * problem.k_chunks[kk]
                    nbytes *= problem.itemsize
                    self.slab_bytes[s] += nbytes
                    w = index.get(locations.get((name, c, kk) if name == "a" else (name, kk, c)))
                    if w is not None:
                        local[w][s] += nbytes
                        self.stored[w] += nbytes
        self.remote = [[t - h for t, h in zip(self.slab_bytes, held)] for held in local]
        # FLOPs of each block's whole K range (the planner asks for it per block and worker).
        self.block_flops = [self.flops(b, 0, self.nk) for b in range(len(self.blocks))]
        # (A row panel, B column panel) of each block, for the per-block loops
        self.block_panels = [(b // self.ncols, self.nrows + b % self.ncols) for b in range(len(self.blocks))]
        self.panel_remote = [[sum(r[q:q + self.nk]) for q in range(0, nslabs, self.nk)]
                             for r in self.remote]

    def rc(self, b: int) -> tuple[int, int]:
        return divmod(b, self.ncols)

    def panels(self, b: int) -> tuple[int, int]:
        return self.block_panels[b]

    def slabs(self, b: int, k: int) -> tuple[int, int]:
        return tuple(q * self.nk + k for q in self.panels(b))

    def flops(self, b: int, k0: int, k1: int) -> float:
        return 2.0 * self.cells(b) * (self.kstart[k1] - self.kstart[k0])

    def cells(self, b: int) -> int:
        """Elements of output block ``b``."""
        bi, bj = divmod(b, self.ncols)
        return self.heights[bi] * self.widths[bj]

    def c_bytes(self, b: int) -> int:
        return self.cells(b) * self.problem.itemsize

    def part_bytes(self, b: int) -> int:
        """Bytes of one partial of block ``b`` when it is split."""
        return self.cells(b) * self.problem.part_itemsize

    def is_local(self, w: int, b: int) -> bool:
        qa, qb = self.block_panels[b]
        remote = self.panel_remote[w]
        return not (remote[qa] or remote[qb])


class _Ledger:
    """Running per-worker totals of the cost model; ``add`` a Work with sign +1, remove with -1.

    A slab is fetched once while any Work on the worker reads it.  Whole-K Works, the common case,
    are counted per panel and pieces of split blocks per slab, so costs stay O(blocks).
    """

    def __init__(self, model: _Model, orders: list[list[list[int]]], owner: list[int]) -> None:
        p, panels = len(model.workers), model.nrows + model.ncols
        self.model, self.compute, self.fetched, self.fixup = model, [0.0] * p, [0] * p, [0] * p
        self.whole = [[0] * panels for _ in range(p)]  # whole-K Works reading each panel
        self.partly = [[0] * panels for _ in range(p)]  # slabs of each panel read by pieces
        self.pieces = [defaultdict(int) for _ in range(p)]  # slab -> pieces reading it
        for w, order in enumerate(orders):
            for b, k0, k1 in order:
                self.add(w, b, k0, k1, 1)
        # The fix-up worker reads every partial made elsewhere; its own cost no link traffic.
        for w, order in enumerate(orders):
            for b, count in Counter(b for b, _, _ in order).items():
                if owner[b] != w:
                    self.fixup[owner[b]] += model.part_bytes(b) * count

    def add(self, w: int, b: int, k0: int, k1: int, sign: int) -> None:
        m, whole = self.model, self.whole[w]
        if k1 - k0 == m.nk:  # whole K: the block's FLOPs and its two panels
            self.compute[w] += sign * m.block_flops[b] / m.workers[w].flops
            for q in m.block_panels[b]:
                if _step(whole, q, sign):
                    self.fetched[w] += sign * self._unread(w, q)
            return
        self.compute[w] += sign * m.flops(b, k0, k1) / m.workers[w].flops
        for s in (s for k in range(k0, k1) for s in m.slabs(b, k)):
            if _step(self.pieces[w], s, sign):
                self.partly[w][s // m.nk] += sign
                self.fetched[w] += 0 if whole[s // m.nk] else sign * m.remote[w][s]

    def _unread(self, w: int, q: int) -> int:
        """Remote bytes of panel ``q`` that no piece on ``w`` reads."""
        m = self.model
        if not self.partly[w][q]:
            return m.panel_remote[w][q]
        return sum(m.remote[w][s] for s in range(q * m.nk, (q + 1) * m.nk)
                   if not self.pieces[w].get(s))

    def reads(self, w: int, s: int) -> int:
        """How many Works on ``w`` read slab ``s``."""
        return self.whole[w][s // self.model.nk] + self.pieces[w].get(s, 0)

    def time_with(self, w: int, compute: float = 0.0, fetch: float = 0.0, fixup: float = 0.0) -> float:
        """Worker ``w``'s predicted time with that many more seconds of compute, fetch and fix-up:
        fetches overlap compute, the fix-up's reads come after."""
        bw = self.model.workers[w].bandwidth
        return max(self.compute[w] + compute, self.fetched[w] / bw + fetch) + self.fixup[w] / bw + fixup

    def time(self, w: int, full: bool = True) -> float:
        return self.time_with(w) if full else self.compute[w]

    def makespan(self) -> float:
        return max(self.time(w) for w in range(len(self.compute)))


def _step(counts: list[int] | dict[int, int], key: int, sign: int) -> bool:
    """Add ``sign`` to ``counts[key]``; True if that was the first reader coming (a fetch) or
    the last one leaving (a free)."""
    counts[key] += sign
    return counts[key] == (1 if sign > 0 else 0)


def _band(model: _Model, walk: Sequence[int] | None = None) -> list[int]:
    """Owner per block: contiguous runs of blocks along ``walk`` (default row-major), FLOPs
    proportional to speed."""
    speeds = list(itertools.accumulate(w.flops for w in model.workers))
    bounds = [s / speeds[-1] for s in speeds]
    walk = range(len(model.blocks)) if walk is None else walk
    flops = [model.block_flops[b] for b in walk]
    total, done, owner = sum(flops) or 1.0, 0.0, [0] * len(model.blocks)
    for b, f in zip(walk, flops):
        owner[b] = min(bisect.bisect_right(bounds, (done + f / 2) / total), len(bounds) - 1)
        done += f
    return owner


def _owners(model: _Model, known: bool) -> list[list[int]]:
    """Candidate owners per block.  Without locations: row bands.  With them: list scheduling,
    and row or column bands, which keep each A row (B column) panel on one worker and which the
    greedy pass can miss when every block costs the same; the planner keeps the cheapest
    (``_cheapest``)."""
    if not known:
        return [_band(model)]
    # the blocks column by column (blocks are numbered row by row)
    by_cols = [(p % model.nrows) * model.ncols + p // model.nrows for p in range(len(model.blocks))]
    col_band = _band(model, by_cols)
    return [_greedy(model), _band(model), col_band]


def _cheapest(options: list[tuple[list[int], list, "_Ledger"]]) -> tuple[list[int], list, "_Ledger"]:
    """The option with the shortest predicted makespan; among those within ``SPLIT_GAIN`` of it,
    the one whose busiest fetcher moves the fewest bytes, then the fewest bytes in all.

    Fetches are modelled as hidden behind compute, so owner choices that move 1 and 2 GiB to two
    workers can tie with one that moves 1.5 GiB to each; but a worker starts only once its first
    task's inputs are in, and with more to fetch it waits longer for them.
    """
    best = min(option[2].makespan() for option in options)
    close = [option for option in options if option[2].makespan() <= best * (1 + SPLIT_GAIN)]
    return min(close, key=lambda option: (max(option[2].fetched), sum(option[2].fetched)))


def _assemble(model: _Model, owner: list[int]) -> tuple[list[int], list, "_Ledger"]:
    mine = [[] for _ in model.workers]
    for b, w in enumerate(owner):
        mine[w].append(b)
    orders = [[[b, 0, model.nk] for b in _order(model, w, blocks)] for w, blocks in enumerate(mine)]
    return owner, orders, _Ledger(model, orders, owner)


def _greedy(model: _Model) -> list[int]:
    """Owner per block by list scheduling: largest blocks first, each to the worker that would
    finish it earliest counting the panels it must still fetch (so data already there attracts)."""
    p, nb = len(model.workers), len(model.blocks)
    ledger, owner = _Ledger(model, [[] for _ in range(p)], []), [0] * nb
    # Each worker's ``ledger.time_with`` with block b's whole-K compute and fetch added, written
    # out (the planner's hottest loop: blocks x workers).  Only whole-K Works are added here, so a
    # panel a worker does not hold yet costs all of its remote bytes.
    # (The ledger's fix-up bytes stay 0 here: no block is split, so time_with's last term is left out.)
    rates = [(w.flops, w.bandwidth) for w in model.workers]
    compute, fetched, whole = ledger.compute, ledger.fetched, ledger.whole
    for b in sorted(range(nb), key=lambda b: -model.block_flops[b]):
        qa, qb = model.block_panels[b]
        work = model.block_flops[b]
        best, best_w = float("inf"), 0
        for w, (speed, bw) in enumerate(rates):  # the earliest finish; ties to the lowest index
            held, remote = whole[w], model.panel_remote[w]
            new = (0 if held[qa] else remote[qa]) + (0 if held[qb] else remote[qb])
            t = max(compute[w] + work / speed, fetched[w] / bw + new / bw)
            if t < best:
                best, best_w = t, w
        owner[b] = best_w
        ledger.add(best_w, b, 0, model.nk, 1)
    return owner


def _fit(model: _Model, owner: list[int]) -> tuple[list[int], list, "_Ledger"] | None:
    """``owner`` with blocks moved off the workers whose estimated peak memory exceeds theirs,
    to those with the most room left, until each fits; None where that fails.

    The owners come from speed alone (bands, list scheduling), so a worker of little memory
    beside one of much was refused its speed's share where the other could hold it.  Each round
    moves, from each worker over, its blocks from the last in its order until their output bytes
    cover its excess, each to the worker then with the most room (ties to one already reading
    the block's panels); a receiver's fetched panels may grow, so the peaks are estimated again
    after each round.
    """
    owner = list(owner)
    memory = [w.memory for w in model.workers]
    for _ in range(2 * len(memory) + 2):
        owner, orders, ledger = _assemble(model, owner)
        peaks = _peaks(model, ledger, orders, owner)
        room = {w: memory[w] - peak for w, (peak, _, _) in peaks.items()}
        over = [w for w in room if room[w] < 0]
        if not over:
            return owner, orders, ledger
        for w in sorted(over, key=room.get):
            for b, _, _ in reversed(orders[w]):
                if room[w] >= 0:
                    break
                nbytes = model.c_bytes(b)
                to = max((v for v in room if v != w and room[v] >= nbytes), default=None,
                         key=lambda v: (room[v], model.is_local(v, b)))
                if to is None:
                    return None
                owner[b] = to
                room[w] += nbytes
                room[to] -= nbytes
    return None


def _order(model: _Model, w: int, mine: list[int]) -> list[int]:
    """Worker ``w``'s blocks in grouped order, those with all inputs local first.

    The smaller operand band stays resident while the other is streamed panel by panel; after the
    local blocks the walk resumes where they ended (wrapping), so workers start on different panels.
    """
    if not mine:
        return []
    rows = sorted({b // model.ncols for b in mine})
    cols = sorted({b % model.ncols for b in mine})
    tall = sum(model.heights[r] for r in rows) <= sum(model.widths[c] for c in cols)
    raster, group = ("m", len(rows)) if tall else ("n", len(cols))
    present = set(mine)
    order = [b for r, c in grouped_order(len(rows), len(cols), group, raster)
             if (b := rows[r] * model.ncols + cols[c]) in present]
    local = [b for b in order if model.is_local(w, b)]
    if not local or len(local) == len(order):
        return order
    after = order.index(local[-1]) + 1
    first = set(local)
    rest = [b for b in order[after:] + order[:after] if b not in first]
    return local + rest


def _split_tail(model: _Model, ledger: _Ledger, orders: list[list[list[int]]], owner: list[int],
                full: bool) -> None:
    """Stream-K across workers: move the K tail of the busiest worker's last blocks to the least
    loaded workers while that lowers its time (``full``: all costs; else compute alone)."""
    p = len(model.workers)
    for _ in range(16 * p + 16):
        times = [ledger.time(w, full) for w in range(p)]
        donor = max(range(p), key=lambda w: (times[w], -w))
        move = _best_move(model, ledger, orders, owner, donor, times, full)
        if move is None:
            return
        entry, r, cut, merge = move
        b, k1 = entry[0], entry[2]
        _replace(ledger, donor, entry, 2, cut)
        if merge is not None:
            _replace(ledger, r, merge, 1, cut)
        else:
            orders[r].append([b, cut, k1])
            ledger.add(r, b, cut, k1, 1)
            if r != owner[b]:
                ledger.fixup[owner[b]] += model.part_bytes(b)


def _replace(ledger: _Ledger, w: int, entry: list[int], i: int, value: int) -> None:
    """Set ``entry[i]`` (its k0 or k1) and keep the ledger in step."""
    ledger.add(w, *entry, -1)
    entry[i] = value
    ledger.add(w, *entry, 1)


def _best_move(model: _Model, ledger: _Ledger, orders: list[list[list[int]]], owner: list[int],
               d: int, times: list[float], full: bool) -> tuple | None:
    """(donor entry, receiver, cut point, receiver entry to merge into) that lowers ``d``'s time."""
    receivers = sorted((w for w in range(len(times)) if w != d), key=lambda w: (times[w], w))
    for entry in reversed(orders[d][-3:]):
        b, k0, k1 = entry
        if k1 - k0 < 2:
            continue
        for r in receivers[:2]:
            merge = next((e for e in orders[r] if e[0] == b and e[1] == k1), None)
            value, cut = _best_cut(model, ledger, owner, d, r, entry, times, full, merge is None)
            if value < times[d] * (1 - 1e-9):
                return entry, r, cut, merge
    return None


def _best_cut(model: _Model, ledger: _Ledger, owner: list[int], d: int, r: int,
              entry: list[int], times: list[float], full: bool, new_part: bool) -> tuple:
    """(the three touched workers' highest new time, cut) for the best K tail [cut, k1) to move."""
    b, k0, k1 = entry
    wd, wr, o = model.workers[d], model.workers[r], owner[b]
    fix = model.part_bytes(b) / model.workers[o].bandwidth if full and new_part else 0.0
    save_c = add_c = save_f = add_f = 0.0  # compute and fetch seconds leaving d, reaching r
    best = (math.inf, k1)
    for cut in range(k1 - 1, k0, -1):
        f = model.flops(b, cut, cut + 1)
        save_c += f / wd.flops
        add_c += f / wr.flops
        if full:
            slabs = model.slabs(b, cut)
            save_f += sum(model.remote[d][s] for s in slabs if ledger.reads(d, s) == 1) / wd.bandwidth
            add_f += sum(model.remote[r][s] for s in slabs if not ledger.reads(r, s)) / wr.bandwidth
            new = {d: ledger.time_with(d, -save_c, -save_f), r: ledger.time_with(r, add_c, add_f)}
        else:
            new = {d: times[d] - save_c, r: times[r] + add_c}
        if fix:  # the owner adds the moved part (else its time is as it was: no bound)
            new[o] = new.get(o, times[o]) + fix
        best = min(best, (max(new.values()), cut), key=lambda x: x[0])
    return best


def _parts(orders: list[list[list[int]]]) -> Counter:
    """Block -> the Works it is made of (more than one: a split block)."""
    return Counter(b for order in orders for b, _, _ in order)


def _peaks(model: _Model, ledger: _Ledger, orders: list[list[list[int]]], owner: list[int],
           which: Sequence[int] | None = None) -> dict[int, tuple[int, int, int]]:
    """Estimated peak memory of the workers ``which`` (all if None), with its output blocks' and
    fetched panels' parts: worker -> (peak, out, fetched); a block in several parts holds a
    partial block a part and, on its fix-up's worker, the block."""
    parts = _parts(orders)
    fixes = Counter()
    for b, n in parts.items():
        if n > 1:
            fixes[owner[b]] += model.c_bytes(b)
    peaks = {}
    for w in range(len(orders)) if which is None else which:
        out = sum(model.part_bytes(b) if parts[b] > 1 else model.c_bytes(b)
                  for b, _, _ in orders[w]) + ledger.fixup[w] + fixes[w]
        fetched = _fetched_peak(model, w, orders[w])
        peaks[w] = (model.stored[w] + out + fetched, out, fetched)
    return peaks


def _over(model: _Model, ledger: _Ledger, orders: list[list[list[int]]], owner: list[int],
          which: Sequence[int] | None = None) -> list[int]:
    """Those of the workers ``which`` (all if None) whose estimated peak memory exceeds their
    ``memory``."""
    return [w for w, (peak, _, _) in _peaks(model, ledger, orders, owner, which).items()
            if peak > model.workers[w].memory]


def _finish(model: _Model, ledger: _Ledger, orders: list[list[list[int]]], owner: list[int],
            size: tuple[int, int], hint: str = "",
            reordered: tuple[Problem, tuple[int, ...]] | None = None) -> Plan:
    """Freeze the plan; raise if a worker's estimated peak memory exceeds its ``memory``
    (``hint``: another remedy the error names; ``reordered``: the problem as given and the
    ``Plan.k_order`` of a model whose K chunks are in that order)."""
    workers = model.workers
    parts = _parts(orders)
    work, loads = [], {}
    peaks = _peaks(model, ledger, orders, owner)
    for w, order in enumerate(orders):
        work += [Work(b, k0, k1, workers[w].name, seq) for seq, (b, k0, k1) in enumerate(order)]
        peak, out, fetched = peaks[w]
        if peak > workers[w].memory:
            need, may = _fmt_bytes(peak), _fmt_bytes(workers[w].memory)
            if need == may:  # the same when rounded: the bytes themselves
                need, may = f"{peak:,} B", f"{workers[w].memory:,} B"
            raise MemoryPlanError(
                f"worker {workers[w].name!r} would need about {need} (inputs stored "
                f"there {_fmt_bytes(model.stored[w])}, output blocks {_fmt_bytes(out)}, panels "
                f"fetched {_fmt_bytes(fetched)}) but may use {may}; "
                + _remedy(model, w, size) + hint)
        bw = workers[w].bandwidth
        loads[workers[w].name] = WorkerLoad(
            sum(parts[b] == 1 for b, _, _ in order), sum(parts[b] > 1 for b, _, _ in order),
            sum(model.flops(b, k0, k1) for b, k0, k1 in order), ledger.fetched[w], ledger.compute[w],
            ledger.fetched[w] / bw, ledger.fixup[w] / bw, peak)
    problem, k_order = reordered or (model.problem, None)
    return Plan(problem, workers, model.blocks, tuple(work),
                {b: workers[owner[b]].name for b in sorted(parts) if parts[b] > 1},
                {w.name: ledger.time(i) for i, w in enumerate(workers)}, loads, k_order)


def _remedy(model: _Model, w: int, size: tuple[int, int]) -> str:
    """What the memory error of worker ``w`` suggests: more workers where its stored inputs and
    an even share of C alone exceed its memory (no block size changes those), else smaller
    blocks (for Dask operands whose blocks are single chunks already: finer chunks)."""
    share = sum(model.c_bytes(b) for b in range(len(model.blocks))) / len(model.workers)
    if model.stored[w] + share > model.workers[w].memory:
        return "use more workers"
    # blocks group whole chunks: one chunk a block is as small as a block_size makes them
    one_chunk = all(x.i1 - x.i0 == 1 and x.j1 - x.j0 == 1 for x in model.blocks)
    return (f"use a smaller block_size than {size[0]}x{size[1]} or more workers"
            + (" (Dask operands: rechunk them finer, a block holds whole chunks)" if one_chunk
               else ""))


def _fetched_peak(model: _Model, w: int, order: list[list[int]]) -> int:
    """Most fetched bytes alive at once on ``w``: each panel's remote slabs in the K range its
    Works read, alive from its first to its last use (a slight overestimate when pieces of one
    panel leave gaps in K)."""
    nk, remote = model.nk, model.remote[w]
    span: dict[int, list[int]] = {}  # panel -> [first seq, last seq, lowest k, highest k]
    for seq, (b, k0, k1) in enumerate(order):
        for q in model.panels(b):
            rec = span.setdefault(q, [seq, seq, k0, k1])
            rec[1], rec[2], rec[3] = seq, min(rec[2], k0), max(rec[3], k1)
    alive = [0] * (len(order) + 1)
    for q, (first, last, lo, hi) in span.items():
        nbytes = model.panel_remote[w][q] if hi - lo == nk else sum(remote[q * nk + lo:q * nk + hi])
        alive[first] += nbytes
        alive[last + 1] -= nbytes
    return max(itertools.accumulate(alive), default=0)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


# -- convenience for the CLI -----------------------------------------------------------------------

def plan_from_shape(m: int, n: int, k: int, itemsize: int, n_workers: int, *, kind: str = "gpu",
                    flops: float | None = None, memory: int | None = None,
                    bandwidth: float | None = None, chunk: int | tuple[int, int, int] | None = None,
                    block_size: BlockSize = "auto", split: str = "auto",
                    part_itemsize: int | None = None, slots: int = 1,
                    host: HostCopies | None = None) -> Plan:
    """The plan for an m×k @ k×n product on ``n_workers`` identical synthetic workers
    (``itemsize``, ``part_itemsize``: as in ``Problem``; ``slots``: as in ``Worker``; ``host``:
    as in ``choose_block_size``, for a product of NumPy chunks on GPU workers).

    Defaults per ``kind`` come from ``DEFAULTS`` (an H200 at fp32 for "gpu").  ``chunk``: the
    input chunk edge, or (m, n, k) edges; None makes chunks equal to the block size (K chunks
    as the shorter block edge).

    >>> plan = plan_from_shape(10000, 10000, 10000, 8, 3, kind="cpu")
    >>> plan.grid, len(plan.problem.k_chunks), sorted(plan.predicted)
    ((6, 6), 6, ['worker-0', 'worker-1', 'worker-2'])
    """
    if kind not in DEFAULTS:
        raise ValueError(f"kind must be one of {tuple(DEFAULTS)}, got {kind!r}")
    if _whole(n_workers) is None or n_workers < 1:
        raise ValueError(f"n_workers must be a positive whole number, got {n_workers!r}")
    d_flops, d_memory, d_bandwidth = DEFAULTS[kind]
    workers = tuple(Worker(f"worker-{i}", kind, d_flops if flops is None else flops,
                           d_memory if memory is None else memory,
                           d_bandwidth if bandwidth is None else bandwidth, slots)
                    for i in range(n_workers))
    whole = Problem((m,), (n,), (k,), itemsize)  # checks the sizes
    check_fits(m, n, k, itemsize, workers)  # before chunking sizes that could never fit
    if block_size == "auto" and host is not None:
        block_size = choose_block_size(m, n, k, itemsize, workers, host)
    given_chunk = chunk is not None
    if chunk is None:
        block_size = _block_size(block_size, whole, workers)
        chunk = (*block_size, min(block_size))
    else:
        edges = (chunk,) * 3 if not isinstance(chunk, (tuple, list)) else tuple(chunk)
        if len(edges) != 3 or any(_whole(c) is None or c < 1 for c in edges):
            raise ValueError(f"chunk must be a positive whole number or three of them "
                             f"(m, n, k), got {chunk!r}")
        chunk = tuple(int(c) for c in edges)
    # refused before the chunk tuples are made: too many would take minutes and gigabytes
    mc, nc, kc = (-(-size // c) for size, c in zip((m, n, k), chunk))
    check_counts(1, 1, (mc, nc, kc), "give a larger chunk" if given_chunk else
                 "give a larger block size (chunks are a block's edges where no chunk is given)")
    problem = Problem(*(_even(size, c) for size, c in zip((m, n, k), chunk)), itemsize,
                      part_itemsize)
    return make_plan(problem, workers, block_size=block_size, split=split)


def check_fits(m: int, n: int, k: int, itemsize: int, workers: Sequence[Worker]) -> None:
    """``MemoryPlanError`` where A (m×k), B (k×n) and C (m×n) of ``itemsize`` bytes an element
    cannot be held at once by ``workers`` (their ``memory`` in all)."""
    held, room = (m * k + k * n + m * n) * itemsize, sum(w.memory for w in workers)
    if held > room:
        raise MemoryPlanError(f"A, B and C take {_fmt_bytes(held)}, but {len(workers)} workers may "
                              f"use {_fmt_bytes(room)} in all; use more workers or a smaller product")


def _even(size: int, chunk: int) -> tuple[int, ...]:
    """Chunks of ``chunk`` elements, the last one shorter (as Dask chunks an array)."""
    return (chunk,) * (size // chunk) + ((size % chunk,) if size % chunk else ())
