"""The ``mgemm`` command: ``demo``, ``bench``, ``plan`` and ``info``.

Every mgemm option is a flag with the same name as its keyword (``--engine``, ``--block-size``,
``--allow-tf32``, ``--emulate-fp32``, ``--split``, ``--tune``, ``--client``); unset flags fall back to
``dask.config`` and the ``MGEMM_*`` environment (see ``mgemm.config``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import warnings
from typing import Any, Iterator

import click

from . import config

DTYPES = ("float64", "float32", "float16", "bfloat16", "complex64", "complex128")


def mgemm_options(func: Any = None, *, skip: tuple[str, ...] = ()) -> Any:
    """Add one flag per mgemm option (same name as the keyword argument), but those in ``skip``
    (options the command does not use)."""
    if func is None:
        return lambda f: mgemm_options(f, skip=skip)
    for opt in reversed([o for o in config.OPTIONS.values() if o.name not in skip]):
        if opt.parse is config._parse_bool:  # on/off options: --name / --no-name
            func = click.option(f"{opt.flag}/--no-{opt.flag[2:]}", opt.name, default=None,
                                help=opt.help)(func)
        else:
            func = click.option(opt.flag, opt.name, default=None,
                                help=_CLI_HELP.get(opt.name, opt.help))(func)
    return func


#: Help for flags whose keyword takes more than a command line can give (a Client object).
_CLI_HELP = {"client": "scheduler address (default: mgemm.client / MGEMM_CLIENT, else the active "
                       "client, else the embedded cluster)"}


def _resolve(options: dict) -> dict:
    """``config.resolve`` of a command's options (those it takes alone: a bad setting of another
    is not its error): a bad value is a usage error naming the option."""
    try:
        return config.resolve(only=options, **options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


@contextlib.contextmanager
def _session(given: Any, **start: Any) -> Iterator[Any]:
    """``cluster.session`` for a command, its client current (a scheduler address gives a client
    that is not the default one, and the command's ``persist`` and ``wait`` must run on it): a
    scheduler it cannot reach, or a malformed address, is an error message naming the address,
    not a traceback; so are an embedded cluster that cannot start and a cluster that stops
    answering during the command."""
    from distributed.comm.core import CommClosedError

    from .cluster import session

    with contextlib.ExitStack() as stack:
        try:
            client = stack.enter_context(session(given, **start))
        except (OSError, ValueError, TypeError) as exc:
            what = ("cannot start the embedded cluster" if given is None
                    else f"cannot reach the scheduler {given}")
            raise click.ClickException(f"{what}: {exc}") from None
        stack.enter_context(client.as_current())
        try:
            yield client
        except (TimeoutError, CommClosedError) as exc:  # a worker or the scheduler hung or left
            raise click.ClickException(f"the cluster stopped answering: {exc}") from None


def _say(msg: str) -> None:
    click.echo(msg, err=True)


#: Seconds ``demo`` and ``bench`` wait for a first worker on a scheduler that has none yet (one
#: just started beside its workers, as cluster/README.md starts them).
WORKER_WAIT_S = 60


def _joined(client: Any) -> Any:
    """``client`` once its scheduler has a worker, waiting up to ``WORKER_WAIT_S`` for one;
    an error message after that."""
    if client.nthreads():
        return client
    _say(f"waiting for workers to join {client.scheduler.address} ...")
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT_S)
    except TimeoutError:
        raise click.ClickException(f"no worker joined the scheduler {client.scheduler.address} "
                                   f"in {WORKER_WAIT_S} s") from None
    return client


#: ``mgemm plan --workers`` at most (planning time and memory grow with the workers: 10**6 took
#: 23 s and 1.5 GB, 10**8 ran out of memory).
MAX_PLAN_WORKERS = 1 << 16


def _writable(path: str | None, flag: str) -> None:
    """A usage error, before any work, where ``path`` (a file --json or --trace appends to, or
    --plot writes) could not be written: empty, a folder's name, its folder missing, or it or
    that folder read-only."""
    if path is None:
        return
    if not path or path.endswith(os.sep) or os.path.isdir(path):
        raise click.BadParameter(f"{path!r} is no file name", param_hint=flag)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise click.BadParameter(f"{path}: no folder {folder}", param_hint=flag)
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise click.BadParameter(f"{path}: not writable", param_hint=flag)


def _distinct(paths: dict[str, str | None]) -> None:
    """A usage error where two of the output flags name one file (a --plot over the --json rows
    replaced them with a PNG)."""
    seen: dict[str, str] = {}
    for flag, path in paths.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise click.BadParameter(f"{path} is the file {seen[real]} writes too", param_hint=flag)
        seen[real] = flag


@contextlib.contextmanager
def _writing(path: str) -> Iterator[None]:
    """An error writing ``path`` (a full disk, say) is an error line naming it, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise click.ClickException(f"could not write {path}: {exc.strerror or exc}") from None


@click.group()
@click.version_option(package_name="mgemm")
def main() -> None:
    """mgemm: large matrix products across GPUs with Dask."""
    warnings.showwarning = _show_warning


def _show_warning(message: Any, category: type, filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """A warning in a command's output: one line of what it says (not the file, line and source
    Python's own shows a library's user)."""
    _say(f"warning: {message}")


@main.command()
@click.option("--size", type=click.IntRange(min=1), default=None, help="matrix edge n (n×n @ n×n); default from the hardware")
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True)
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="timed runs per method")
@click.option("--workers", "n_workers", type=click.IntRange(min=1), default=None,
              help="workers of the embedded cluster (default: one per GPU, or a few CPU processes)")
@mgemm_options
def demo(size: int | None, dtype: str, repeat: int, n_workers: int | None, **options: Any) -> None:
    """Multiply two random matrices on the default cluster, check, and compare with dask."""
    from .bench import Case, run_case, table

    opts = _resolve(options)
    _dtype_available(dtype)
    given = opts.pop("client")
    if _starts_embedded(given):
        _say("starting the embedded default cluster ...")
    else:
        _say_ignored(given, ("n_workers",))
    with _session(given, n_workers=n_workers) as client:
        gpu = _gpu_cluster(client, opts["engine"])
        n_workers_now = len(client.nthreads())
        size = size or _demo_size(gpu, n_workers_now)
        chunk = max(256, size // 4)
        _say(f"cluster: {n_workers_now} {'GPU' if gpu else 'CPU'} worker(s) at "
             f"{client.scheduler.address}; C = A @ B with A, B {size}×{size} {dtype}")
        case = Case(f"{dtype}-{size}", size, size, size, dtype, chunk)
        with _too_big_for_the_cluster():
            rows = run_case(client, case, ["mgemm", "dask"], repeat=repeat, options=opts, gpu=gpu,
                            progress=_say)
        click.echo(table(rows))
        m, d = rows
        if m.error:
            raise click.ClickException(f"mgemm failed: {m.error}")
        versus = (f"dask.array.matmul failed ({d.error})" if d.error else
                  f"{d.median_s / m.median_s:.2f}× dask.array.matmul")
        click.echo(f"mgemm: {m.tflops:.3g} TFLOP/s, {versus}; checked against float64 "
                   f"(relative error {m.rel_error:.1e})")


def _gpu_cluster(client: Any, engine: str) -> bool:
    """Whether the cluster ``demo`` or ``bench`` runs on has GPUs, once it has a worker
    (``_joined``).  A GPU engine asked of one without is a usage error before any input is made
    (the run would otherwise fail only after the inputs and dask's baseline)."""
    from .engines import DEVICE_ENGINES

    gpu = _cluster_has_gpus(_joined(client))
    if engine in DEVICE_ENGINES and not gpu:
        raise click.UsageError(f"--engine {engine} multiplies on GPUs, and the cluster at "
                               f"{client.scheduler.address} has none; use auto or numpy")
    return gpu


def _say_ignored(given: Any, names: tuple[str, ...]) -> None:
    """Name the flags among ``names`` (parameters of the running command) that the user gave but
    that only shape the embedded cluster, which is not started: the command runs on ``given`` (a
    scheduler address) or on the active client."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    flags = [p.opts[0] for p in ctx.command.params if p.name in names and
             ctx.get_parameter_source(p.name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]
    if flags:
        where = f"the scheduler {given}" if given is not None else "the active client"
        _say(f"{', '.join(flags)}: for the embedded cluster, ignored on {where}")


@contextlib.contextmanager
def _too_big_for_the_cluster() -> Iterator[None]:
    """A case whose inputs the cluster cannot hold (``bench.run_case`` refuses it before making
    them) is an error message, not a traceback."""
    from .plan import MemoryPlanError

    try:
        yield
    except MemoryPlanError as exc:
        raise click.ClickException(str(exc)) from None


def active_client_missing() -> bool:
    from .cluster import active_client
    return active_client() is None


def _starts_embedded(given: Any) -> bool:
    """Whether a command's session starts the embedded cluster: no client given, none active."""
    return given is None and active_client_missing()


def _demo_size(gpu: bool, n_workers: int) -> int:
    if gpu:
        return 16384 if n_workers < 2 else 32768
    return 2048


def _cluster_has_gpus(client: Any) -> bool:
    from .cluster import worker_devices
    return any(worker_devices(client).values())


@main.command()
@click.option("--suite", type=click.Choice(["foundation", "scaling"]), default="foundation",
              show_default=True, help="which GPU cases (CPU clusters run a small CPU suite)")
@click.option("--case", "case_names", multiple=True, help="run only these cases (default: all)")
@click.option("--method", "methods", multiple=True, default=("mgemm", "dask"), show_default=True,
              type=click.Choice(["mgemm", "dask"]))
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--protocol", type=click.Choice(["tcp", "ucx"]), default=None,
              help="protocol of the embedded cluster (default: ucx when installed)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="append one JSON row per (case, method) to this file")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="write a PNG bar chart (needs matplotlib)")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="append each timed run's per-worker task-stream summary (JSON lines)")
@click.option("--transfer-limit", default=None,
              help="bytes a worker fetches from one peer per message on the embedded cluster "
                   "(e.g. 1GiB; default: 512MiB on GPU workers, Dask's 50MB on CPU workers)")
@click.option("--transfer-sync", type=click.Choice(["stream", "device"]), default="stream",
              show_default=True,
              help="what a UCX transfer waits for on the embedded cluster: the legacy default "
                   "stream (mgemm's plugin) or the whole GPU (distributed-ucxx's own)")
@click.option("--threads-per-worker", type=click.IntRange(min=1), default=None,
              help="tasks each worker of the embedded cluster runs at once (default: 2 per GPU; "
                   "CPU workers: the CPUs shared out)")
@click.option("--layout", type=click.Choice(["dask", "cyclic"]), default="dask", show_default=True,
              help="where the inputs are persisted: wherever Dask's persist puts them (varies "
                   "between clusters) or chunk (i, j) on worker (i + j) mod W; every run starts "
                   "from it")
@mgemm_options
def bench(suite: str, case_names: tuple, methods: tuple, repeat: int, protocol: str | None,
          json_path: str | None, plot_path: str | None, trace_path: str | None,
          transfer_limit: str | None, transfer_sync: str, threads_per_worker: int | None,
          layout: str, **options: Any) -> None:
    """Time mgemm and dask.array.matmul on the same cluster and inputs (median of --repeat)."""
    from .bench import SUITES, cpu_cases, plot, refused, run_case, table
    from .plan import MemoryPlanError

    outputs = {"--json": json_path, "--trace": trace_path, "--plot": plot_path}
    for flag, path in outputs.items():
        _writable(path, flag)  # before any work, as what follows
    _distinct(outputs)
    if plot_path and importlib.util.find_spec("matplotlib") is None:
        raise click.UsageError("--plot needs matplotlib: pip install matplotlib (or mgemm's "
                               "plot extra)")
    methods = tuple(dict.fromkeys(methods))  # each once, in the order given
    if transfer_limit:
        from dask.utils import parse_bytes
        try:
            limit = parse_bytes(transfer_limit)
        except (TypeError, ValueError):
            limit = None
        if limit is None or limit <= 0:
            raise click.BadParameter(f"{transfer_limit!r} is not a positive size such as 1GiB or "
                                     f"500MB", param_hint="--transfer-limit")
    opts = _resolve(options)
    given = opts.pop("client")
    if not _starts_embedded(given):
        _say_ignored(given, ("protocol", "transfer_limit", "transfer_sync", "threads_per_worker"))
    start = {k: v for k, v in (("protocol", protocol), ("transfer_limit", transfer_limit)) if v}
    start["transfer_sync"] = transfer_sync
    if threads_per_worker:
        start["threads_per_worker"] = threads_per_worker
    with _session(given, **start) as client:
        gpu = _gpu_cluster(client, opts["engine"])
        n = len(client.nthreads())
        cases = SUITES[suite](n) if gpu else cpu_cases()
        if case_names:
            unknown = sorted(set(case_names) - {c.name for c in cases})
            if unknown:
                raise click.BadParameter(
                    f"no case named {', '.join(unknown)} on this {'GPU' if gpu else 'CPU'} cluster; "
                    f"its cases: {', '.join(c.name for c in cases)}", param_hint="--case")
            cases = [c for c in cases if c.name in case_names]
        rows = []
        for case in cases:
            try:
                rows += run_case(client, case, list(methods), repeat=repeat, options=opts, gpu=gpu,
                                 progress=_say, trace=_appender(trace_path) if trace_path else None,
                                 layout=layout)
            except MemoryPlanError as exc:  # this case's inputs do not fit: the others still run
                _say(f"{case.name}: {exc}")
                rows += refused(client, case, list(methods), f"{type(exc).__name__}: {exc}")
            if json_path:
                with _writing(json_path), open(json_path, "a") as fh:
                    for row in rows[-len(methods):]:
                        fh.write(row.to_json() + "\n")
        click.echo(table(rows))
        if plot_path:
            with _writing(plot_path):
                plot(rows, plot_path)
            _say(f"wrote {plot_path}")
        failed = sorted({r.case for r in rows if r.error and r.method == "mgemm"})
        if failed:  # every case ran; the exit status still says mgemm did not finish them all
            raise click.ClickException(f"mgemm failed on {', '.join(failed)}")


def _dtype_available(dtype: str) -> None:
    """A usage error, before any work, for a dtype this install cannot make arrays of (bfloat16
    without ml_dtypes, which only mgemm's CUDA extras bring; ``mgemm bench``'s suites leave out
    such cases themselves)."""
    from .bench import array_dtype

    try:
        array_dtype(dtype)
    except TypeError as exc:
        raise click.UsageError(f"--dtype {dtype}: {exc}: pip install ml_dtypes") from None


def _appender(path: str) -> Any:
    from .bench import strict_json

    def write(record: dict) -> None:
        with _writing(path), open(path, "a") as fh:
            fh.write(strict_json(record) + "\n")
    return write


@main.command(name="plan")
@click.option("--m", "m", type=click.IntRange(min=1), required=True)
@click.option("--n", "n", type=click.IntRange(min=1), required=True)
@click.option("--k", "k", type=click.IntRange(min=1), required=True)
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True)
@click.option("--workers", type=click.IntRange(min=1, max=MAX_PLAN_WORKERS), default=2,
              show_default=True, help="number of workers")
@click.option("--kind", type=click.Choice(["gpu", "cpu"]), default="gpu", show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=8, show_default=True,
              help="threads per worker with --kind cpu: block tasks it runs at once")
@click.option("--chunk", type=click.IntRange(min=1), default=None,
              help="input chunk edge (default: the block size)")
@click.option("--json", "as_json", is_flag=True, help="print the plan as JSON")
@click.option("--host-chunks", is_flag=True,
              help="A and B are NumPy chunks in host memory, which each block task copies to its "
                   "GPU (engine cublas or persistent): blocks priced with those copies")
@mgemm_options(skip=("engine", "tune", "client"))  # a plan of identical workers, no cluster
def plan_cmd(m: int, n: int, k: int, dtype: str, workers: int, kind: str, threads: int,
             chunk: int | None, as_json: bool, host_chunks: bool, **options: Any) -> None:
    """Print the plan mgemm makes for an M×K @ K×N product on --workers identical workers."""
    from . import staging
    from .cluster import cpu_flops, gpu_flops
    from .engines import itemsizes
    from .plan import DEFAULTS, plan_from_shape

    opts = _resolve(options)
    itemsize, part_itemsize = itemsizes(dtype)
    gpu = kind == "gpu"
    if host_chunks and not gpu:
        raise click.UsageError("--host-chunks describes GPU workers (--kind gpu)")
    flops = (gpu_flops({}, dtype, opts["allow_tf32"], opts["emulate_fp32"]) if gpu
             else cpu_flops(threads, dtype))
    try:  # (mgemm.staging's settings are read here: a bad one is an error line too)
        host = staging.host_copies(DEFAULTS["gpu"][1], min(k, chunk or k)) if host_chunks else None
        plan = plan_from_shape(m, n, k, itemsize, workers, kind=kind, flops=flops, chunk=chunk,
                               block_size=opts["block_size"], split=opts["split"],
                               part_itemsize=part_itemsize, slots=1 if gpu else threads,
                               host=host)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(plan.to_dict(), indent=1))
    else:
        click.echo(plan.table())


@main.command()
@click.option("--client", default=None,
              help="scheduler address (default: mgemm.client / MGEMM_CLIENT, else the embedded "
                   "cluster)")
def info(client: str | None) -> None:
    """Show the workers, their GPUs (model, SMs, memory), how GPU workers copy NumPy chunks, and
    the protocol."""
    from .cluster import protocol, worker_devices, workers_info

    given = _resolve({"client": client})["client"]
    if _starts_embedded(given):
        _say("starting the embedded default cluster ...")
    with _session(given) as c:
        workers = workers_info(c)
        try:
            devices = worker_devices(c)
        except ValueError as exc:  # a GPU worker's bad mgemm.staging setting, read there
            raise click.ClickException(str(exc)) from None
        click.echo(f"scheduler {c.scheduler.address}  protocol {protocol(c.scheduler.address)}  "
                   f"workers {len(workers)}")
        for address in sorted(workers):
            w, dev = workers[address], devices.get(address)
            gpu = (f"{dev['model']}, {dev['sms']} SMs, {dev['memory'] / 2**30:.0f} GiB"
                   if dev else "no GPU")
            click.echo(f"  {address}  threads {w.get('nthreads')}  "
                       f"memory {w.get('memory_limit', 0) / 2**30:.1f} GiB  {gpu}")
            copies = (dev or {}).get("copies")
            if copies:  # mgemm.staging's settings on that worker
                how = (f"pinned buffers, {copies['threads']} threads" if copies["pinned"]
                       else "CuPy's copies")
                click.echo(f"    NumPy chunks: {how}; kept copies up to {copies['keep']:g} of "
                           f"the GPU")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
