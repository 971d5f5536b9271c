"""Per-shape tuning (the ``tune`` option): the Hopper kernel's config, and engine ``auto``'s pick.

The heuristic (``mgemm.hopper_heuristic.choose_config``) prices tile widths, stream-K and clusters with a
wave model.  Over shapes drawn as a user types them it was within the timings' spread of the best
of ten configs on most, but the model cannot separate the rest (residual sd 0.14 in log time), and
there the best config was up to 0.15 of cuBLAS ahead (benchmarks/RESULTS.md, twenty-seventh
session).  With ``tune=True`` the first product of each kind (GPU, M, N, K, dtypes, operand
layouts) times the heuristic's launch and the ``VARIANTS`` on the caller's operands, in turns
(``REPS`` rounds, medians of GPU time: ``measure``), checks each candidate's result against the
heuristic's, and keeps the fastest where it is ``MARGIN`` ahead (``fastest``): in memory and in a
JSON file (``cache_file()``), so later products of that kind, in this process or another, launch
it at once.  Engine ``auto`` does the same between the cuBLAS and persistent engines per kind of
block (``engine_choice``).  A Dask computation whose blocks share a shape pays the tuning at most
once per worker process.

Tuning costs a compile of each candidate the first time it runs on a machine (CuPy keeps the
binaries on disk) and ``REPS + 1`` launches of each (``SHORT_REPS`` more for short products); it
is logged on the ``mgemm.tune`` logger.  The cache file is ``$MGEMM_CACHE_DIR/tune.json``, else
under ``$XDG_CACHE_HOME/mgemm`` or ``~/.cache/mgemm``; an entry names the GPU, the kernel sources'
digest and mgemm's version, so a changed kernel or heuristic tunes again.  A write merges this
process's entry into what the file holds then and replaces the file whole (never left half
written), under an advisory lock on its folder (``fcntl.flock``, where the platform has it), so
processes writing at once keep each other's entries; a process that misses a kind reads the file
again where it changed since, so a worker uses what another worker on the machine tuned meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

log = logging.getLogger("mgemm.tune")

#: (label, changes to a cooperative 128-row config): static widths, stream-K, 2-CTA clusters
#: (multicasting B) and 2 x 2 clusters (multicasting A too), the configs RESULTS.md's studies time
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("s128", dict(policy="static", tile_n=128, stages=6)),
    ("s192", dict(policy="static", tile_n=192, stages=4)),
    ("s224", dict(policy="static", tile_n=224, stages=4)),
    ("s256", dict(policy="static", tile_n=256, stages=4)),
    ("k128", dict(policy="streamk", tile_n=128, stages=6)),
    ("k192", dict(policy="streamk", tile_n=192, stages=4)),
    ("c128", dict(policy="static", tile_n=128, stages=6, cluster_m=2)),
    ("c256", dict(policy="static", tile_n=256, stages=4, cluster_m=2)),
    ("q128", dict(policy="static", tile_n=128, stages=6, cluster_m=2, cluster_n=2)),
    ("q256", dict(policy="static", tile_n=256, stages=4, cluster_m=2, cluster_n=2)),
)
HEURISTIC = "heuristic"  # the label of the heuristic's own launch (gemm_parts with config=None)
REPS = 5  # timed rounds; the first call of each candidate (compile, warm-up) is not timed
#: products whose heuristic launch takes less than SHORT_MS milliseconds are timed again over
#: SHORT_REPS rounds: at 15-30 µs two timings of one launch differed by up to 7 % (RESULTS.md,
#: twenty-seventh session)
SHORT_MS, SHORT_REPS = 0.2, 25
SPIN_US = 300.0  # the spin before each timed call: longer than the host path of a launch
MARGIN = 0.02  # another config replaces the heuristic's where it is at least this much faster
#: a candidate whose output differs from the heuristic's by more than this times max |output|
#: (16-bit inputs, float32 accumulation in another order) is dropped as wrong
AGREE = 2e-2


def candidates(base, m: int, n: int, k: int) -> dict[str, Any]:
    """``VARIANTS`` applied to ``base`` (the heuristic's config), with the heuristic's epilogue
    and stage rules for their width (``hopper_heuristic._static_width``): label -> config.  Every variant
    is a cooperative 128-row tile: thin (pingpong) bases start from the cooperative 128 x 128
    tile, and 64-row bases (split along N) take 128 rows.  Configs the kernel does not take and
    the one equal to ``base`` are left out.

    >>> from mgemm import hopper
    >>> base = hopper.choose_config(2144, 11840, 1368, "float16", 132)
    >>> base.tile_n, base.policy, sorted(candidates(base, 2144, 11840, 1368))
    (192, 'static', ['c128', 'c256', 'k128', 'k192', 'q128', 'q256', 's128', 's224', 's256'])
    """
    from . import hopper, hopper_config, hopper_heuristic

    if base.pingpong:
        coop = hopper.HopperConfig(input=base.input, output=base.output)
    else:  # (each variant sets its own stages)
        coop = base.replace(cluster_m=1, cluster_n=1, tile_m=hopper_config.TILE_M, stages=4)
    out = {}
    for label, fields in VARIANTS:
        fields = dict(fields)
        policy = fields.pop("policy")
        try:
            cfg = hopper_heuristic._static_width(coop, fields.pop("tile_n"), fields.pop("stages"), k)
            cfg = cfg.replace(policy=policy, cluster_m=fields.get("cluster_m", 1),
                              cluster_n=fields.get("cluster_n", 1))
        except ValueError:
            continue
        if cfg != base:
            out[label] = cfg
    return out


def key(*, device: str, sms: int, kind: str, out: str, m: int, n: int, k: int, parts: int,
        layouts: tuple, flags: Mapping[str, bool]) -> str:
    """The cache key of one kind of product: the GPU and SM budget, input and output types, the
    shape, the K parts, the operands' layouts and row flags, the kernel sources and mgemm's
    version.

    >>> key(device="H200", sms=132, kind="float16", out="float16", m=8, n=8, k=8, parts=1,
    ...     layouts=(True, False), flags={"b_rows_off": False}).split("|")[:7]
    ['H200', '132', 'float16->float16', '8x8x8', '1', 'KN', 'b_rows_off=0']
    """
    lay = "".join("K" if x else "N" for x in layouts)
    flag = ",".join(f"{name}={int(v)}" for name, v in sorted(flags.items()))
    return f"{device}|{sms}|{kind}->{out}|{m}x{n}x{k}|{parts}|{lay}|{flag}|{code_stamp()}"


def code_stamp() -> str:
    """The tail of every cache key: the kernel sources' digest and mgemm's version, so a tuned
    choice is dropped when either changes."""
    from . import __version__
    from .kernels import sources_digest

    return f"{sources_digest()[:16]}|{__version__}"


def cache_file() -> Path:
    """``tune.json`` in ``$MGEMM_CACHE_DIR`` (a leading ``~`` expanded), else
    ``$XDG_CACHE_HOME/mgemm`` (where that is an absolute path, as the XDG specification asks),
    else ``~/.cache/mgemm``."""
    root = os.environ.get("MGEMM_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "tune.json"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "mgemm" / "tune.json"


class Cache:
    """Tuned choices: key -> {"label", "config" (the config's fields, or None for the
    heuristic's launch), "ms" (each candidate's median)}, in memory and in ``path``."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self._entries: dict[str, dict] | None = None
        self._seen: tuple[int, int] | None = None  # the file's (mtime_ns, size) when last read
        self._lock = threading.Lock()
        self._warned = False

    def _load(self) -> dict[str, dict]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> dict[str, dict]:
        path = self.path or cache_file()
        try:
            self._seen = _stamp(path)
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:  # (nested past the parser's depth)
            log.warning("mgemm: ignoring the tuning cache %s (%s)", path, type(exc).__name__
                        if isinstance(exc, RecursionError) else exc)
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, name: str) -> dict | None:
        with self._lock:
            entries = self._load()
            if name not in entries and _stamp(self.path or cache_file()) != self._seen:
                # another process wrote the file since: take its entries, keeping this one's
                self._entries = entries = {**self._read(), **entries}
            return entries.get(name)

    def put(self, name: str, entry: dict) -> None:
        with self._lock:
            self._load()[name] = entry
            path = self.path or cache_file()
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with _folder_lock(path.parent):
                    merged = {**self._read(), name: entry}  # keep what other processes wrote
                    tmp.write_text(json.dumps(merged, indent=1, sort_keys=True))
                    os.replace(tmp, path)
                    self._seen = _stamp(path)
                self._entries = {**merged, **self._entries}
            except OSError as exc:
                with contextlib.suppress(OSError):  # no half-written file left behind
                    tmp.unlink(missing_ok=True)
                if not self._warned:
                    log.warning("mgemm: cannot write the tuning cache %s (%s); tuned choices stay "
                                "in memory", path, exc)
                    self._warned = True


def _stamp(path: Path) -> tuple[int, int] | None:
    """The file's (mtime_ns, size), or None where it cannot be read: what ``Cache.get`` compares
    to see that another process wrote it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive advisory lock on ``folder`` (``fcntl.flock`` on its descriptor) for the
    read-merge-replace of the cache file, so two processes' writes do not drop each other's
    entries; no lock where the platform has no ``fcntl`` or the folder cannot be opened."""
    try:
        import fcntl
        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        fd = None
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks
            os.close(fd)
            fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the lock


CACHE = Cache()
#: one tuning at a time in a process (two would share the GPU and its timings); reentrant, since
#: engine ``auto``'s tuning runs the persistent engine, which tunes its own config inside it
_LOCK = threading.RLock()


def once(table: dict, memo: Any, compute: Callable[[], Any]) -> Any:
    """``table[memo]``, computed by ``compute()`` under the tuning lock the first time: a
    process's tuned choices, looked up without the lock on every later launch."""
    if memo not in table:
        with _LOCK:
            if memo not in table:
                table[memo] = compute()
    return table[memo]


def fastest(times: Mapping[str, float], margin: float = MARGIN, incumbent: str = HEURISTIC) -> str:
    """The label with the least time where that is at least ``margin`` less than the
    ``incumbent``'s (the heuristic's own, which wins ties and near-ties: a pick within the
    timings' spread is not worth a change).

    >>> fastest({"heuristic": 1.0, "s192": 0.9, "q128": 0.95})
    's192'
    >>> fastest({"heuristic": 1.0, "s192": 0.99})
    'heuristic'
    """
    label = min(times, key=lambda name: (times[name], name != incumbent))
    if incumbent in times and times[label] > (1.0 - margin) * times[incumbent]:
        return incumbent
    return label


def measure(fns: Mapping[str, Callable[[], Any]], reps: int = REPS, warm: bool = True) -> dict[str, float]:
    """Median GPU milliseconds of each callable (each queues GPU work on the current stream), in
    turns over ``reps`` rounds after one untimed call each (``warm``; False where the caller has
    made that call); a callable that raises there is left out.
    Each timed call follows a write of twice the GPU's L2 cache (its operands come from memory,
    as a block's fresh inputs do) and a ``SPIN_US`` spin (``kernels/spin.cu``: the call's host
    path runs while the GPU spins, so the events see GPU time only)."""
    import cupy as cp

    from .kernels import compile_plain

    stream = cp.cuda.get_current_stream()
    live = dict(fns)
    for label, fn in fns.items() if warm else ():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001  (a config this GPU cannot launch)
            log.info("mgemm: tuning leaves out %s: %s", label, exc)
            del live[label]
    spin = compile_plain("spin.cu", "mgemm_spin")
    flush = cp.empty(2 * cp.cuda.Device().attributes["L2CacheSize"] // 4 + 1, dtype=cp.float32)
    events: dict[str, list] = {label: [] for label in live}
    for _ in range(reps):
        for label, fn in live.items():
            start, end = cp.cuda.Event(), cp.cuda.Event()
            flush.fill(0)
            spin((1,), (1,), (cp.uint64(int(SPIN_US * 1000)),))
            start.record(stream)
            fn()
            end.record(stream)
            events[label].append((start, end))
    stream.synchronize()
    return {label: statistics.median(cp.cuda.get_elapsed_time(s, e) for s, e in pairs)
            for label, pairs in events.items()}


def choose(name: str, base, m: int, n: int, k: int, run: Callable[[Any, Any], Any],
           scratch: Callable[[], Any], values: Callable[[Any], Any], cache: Cache | None = None):
    """The tuned config for the product ``name`` (``key``): None for the heuristic's own launch.
    From ``cache`` if there, else timed (``_fastest_agreeing``): ``run(config, out)`` launches
    ``config`` (None: the heuristic's launch) into ``out``; ``scratch()`` makes an output buffer
    (two are made: the heuristic's result and one that every candidate writes) and
    ``values(rows)`` reads rows of one as float32."""
    from . import hopper

    cache = CACHE if cache is None else cache
    entry = cache.get(name)
    if entry is not None:
        try:
            return None if entry["config"] is None else hopper.HopperConfig(**entry["config"])
        except (TypeError, ValueError, KeyError):  # written by another version: tune again
            pass
    configs = {HEURISTIC: None, **candidates(base, m, n, k)}
    ref_out, out = scratch(), scratch()

    def launch(cfg, buf):
        run(cfg, buf)
        return buf

    calls = {label: (lambda c=cfg, b=ref_out if cfg is None else out: launch(c, b))
             for label, cfg in configs.items()}
    label, times = _fastest_agreeing(HEURISTIC, calls, values, check_rows(m), f"{m}x{n}x{k} {base.input}")
    cfg = configs[label]
    cache.put(name, {"label": label, "ms": times,
                     "config": None if cfg is None else _fields(cfg)})
    return cfg


def engine_choice(name: str, incumbent: str, fns: Mapping[str, Callable[[], Any]],
                  values: Callable[[Any], Any], rows: list[int], cache: Cache | None = None) -> str:
    """The block engine for the block kind ``name``: from ``cache`` if there, else the fastest
    of ``fns`` (engine name -> a call that returns the block) by ``_fastest_agreeing``, against
    ``incumbent`` (the engine ``auto``'s model picks) on ``rows`` of the blocks."""
    cache = CACHE if cache is None else cache
    entry = cache.get(name)
    if isinstance(entry, dict) and entry.get("label") in fns:  # else (another writer's): time
        return entry["label"]
    label, times = _fastest_agreeing(incumbent, fns, values, rows, f"the engine of {name.split('|')[3]}")
    cache.put(name, {"label": label, "ms": times, "config": None})
    return label


def check_rows(m: int) -> list[int]:
    """The rows of an ``m``-row result that tuning compares between candidates: every 64th and
    the last, so each 128-row tile row has two.

    >>> check_rows(130)
    [0, 64, 128, 129]
    """
    return sorted({*range(0, m, 64), m - 1})


def _fastest_agreeing(incumbent: str, calls: Mapping[str, Callable[[], Any]],
                      values: Callable[[Any], Any], rows: list[int], what: str) -> tuple[str, dict]:
    """(label, medians): the fastest of ``calls`` (label -> a call that returns its result)
    where it is ``MARGIN`` ahead of ``incumbent``'s, timed by ``measure`` (again over
    ``SHORT_REPS`` rounds where the incumbent takes under ``SHORT_MS``).  Each call runs once
    first; one that raises, or whose result differs from the incumbent's by more than ``AGREE``
    times its largest magnitude on ``rows`` (``values`` reads them as float32; ``check_rows``),
    is left out.  ``what`` names the product in the log."""
    log.info("mgemm: tuning %s over %d candidates", what, len(calls))
    ref = values(calls[incumbent]()[rows])
    bound = AGREE * float(abs(ref).max())
    live = {incumbent: calls[incumbent]}
    for label, call in calls.items():
        if label == incumbent:
            continue
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001  (a config or engine this GPU cannot run)
            log.info("mgemm: tuning leaves out %s on %s: %s", label, what, exc)
            continue
        if float(abs(values(result[rows]) - ref).max()) <= bound:
            live[label] = call
        else:
            log.warning("mgemm: tuning dropped %s on %s: its result differs from %s's", label,
                        what, incumbent)
    times = measure(live, warm=False)
    if times.get(incumbent, 0.0) < SHORT_MS:
        times = measure(live, SHORT_REPS, warm=False)
    label = fastest(times, incumbent=incumbent) if incumbent in times else incumbent
    log.info("mgemm: tuned %s: %s (%s)", what, label,
             ", ".join(f"{key} {ms:.3f} ms" for key, ms in times.items()))
    return label, times


def _fields(cfg) -> dict[str, Any]:
    import dataclasses
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
