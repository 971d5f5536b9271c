"""mgemm's settings: one name at every layer, read in this module only.

Each option has the same name as a keyword argument, a ``dask.config`` key under ``mgemm.``, a CLI
flag and an environment variable::

    keyword        dask.config            CLI               environment
    engine         mgemm.engine           --engine          MGEMM_ENGINE
    block_size     mgemm.block_size       --block-size      MGEMM_BLOCK_SIZE
    allow_tf32     mgemm.allow_tf32       --allow-tf32      MGEMM_ALLOW_TF32
    emulate_fp32   mgemm.emulate_fp32     --emulate-fp32    MGEMM_EMULATE_FP32
    split          mgemm.split            --split           MGEMM_SPLIT
    tune           mgemm.tune             --tune            MGEMM_TUNE
    client         mgemm.client           --client          MGEMM_CLIENT

A keyword wins over ``dask.config`` (which includes ``DASK_MGEMM__*`` variables), which wins over
``MGEMM_*`` variables, which win over the defaults below.

GPU workers given NumPy chunks copy them to the GPU and back (``mgemm.staging``).  How is set on
the workers, not per call, by ``dask.config`` keys under ``mgemm.staging`` that each process reads
once, at their first use (``mgemm.staging.settings``; a bad value raises there: in the client as
it plans a product of NumPy chunks on GPU workers, in a worker's first such task, and in
``mgemm info``).  Set them with a variable such as ``DASK_MGEMM__STAGING__COPY_THREADS=4`` where
the workers start, or ``dask.config.set`` around the start of the embedded cluster: its nannies
hand their config to the workers::

    mgemm.staging.pinned-copies    copies through pinned buffers (default true), else CuPy's own
    mgemm.staging.copy-threads     threads copying between host arrays and those buffers
                                   ("auto": 8, or the CPUs the worker may use where fewer)
    mgemm.staging.cache-fraction   share of the GPU's memory kept copies of chunks may hold (0.4)

>>> resolve(engine="numpy")["engine"]
'numpy'
>>> import dask
>>> with dask.config.set({"mgemm.block_size": 1024}):
...     resolve()["block_size"]
1024
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable

import dask

from .plan import SPLITS, parse_block_size as _parse_block_size, positive_int as _positive_int

ENGINES = ("auto", "numpy", "cublas", "persistent")
#: ``emulate_fp32``'s schemes besides "off": those of ``mgemm.emulate`` (a test keeps them in step)
EMULATE_SCHEMES = ("bf16x6", "bf16x9")
EMULATE_DEFAULT = "bf16x6"  # what True / "on" means


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _parse_engine(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {value!r}")
    return text


def _parse_split(value: Any) -> str:
    """``auto``, ``on`` or ``off``; a boolean, or its words, as on or off at every layer (Dask
    reads ``DASK_MGEMM__SPLIT=True`` as the boolean, so ``MGEMM_SPLIT=True`` means it too)."""
    text = str(value).strip().lower()
    if text in SPLITS:
        return text
    if text:  # (an empty value is no boolean here)
        with contextlib.suppress(ValueError):
            return "on" if _parse_bool(value) else "off"
    raise ValueError(f"split must be one of {SPLITS}, got {value!r}")


def _parse_emulate(value: Any) -> str:
    """``"off"``, or a float32 emulation scheme of ``mgemm.emulate``; true values mean
    ``EMULATE_DEFAULT``."""
    if value is None:
        return "off"
    if isinstance(value, str) and value.strip().lower() in EMULATE_SCHEMES:
        return value.strip().lower()
    try:
        on = _parse_bool(value)
    except ValueError:
        raise ValueError(f"emulate_fp32 must be off, on or one of {EMULATE_SCHEMES}, "
                         f"got {value!r}") from None
    return EMULATE_DEFAULT if on else "off"


def _parse_client(value: Any) -> Any:
    """A ``distributed.Client``, a scheduler address string, or None (use the active client)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "auto")):
        return None
    if isinstance(value, str):
        from .cluster import _check_address  # a bad address named with where it came from
        _check_address(value.strip())
        return value.strip()
    if hasattr(value, "scheduler_info") and hasattr(value, "submit"):
        return value
    raise ValueError(f"client must be a distributed.Client or a scheduler address, got {value!r}")


@dataclass(frozen=True)
class Option:
    name: str
    default: Any
    parse: Callable[[Any], Any]
    help: str

    @property
    def key(self) -> str:
        return f"mgemm.{self.name}"

    @property
    def env(self) -> str:
        return f"MGEMM_{self.name.upper()}"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


OPTIONS = {
    o.name: o
    for o in (
        Option("engine", "auto", _parse_engine,
               "block GEMM engine: auto, numpy (CPU), cublas (cuBLAS) or persistent (mgemm's "
               "kernel); the last two copy NumPy chunks to the GPU and back"),
        Option("block_size", "auto", _parse_block_size,
               "output block edge: 'auto' (planned from the cluster) or n or rows,cols; a Dask "
               "array's blocks are whole chunks grouped to about that edge (rechunk for smaller)"),
        Option("allow_tf32", False, _parse_bool,
               "let float32 products use TF32 tensor cores (faster, about 1e-3 relative error)"),
        Option("emulate_fp32", "off", _parse_emulate,
               "float32 products on bfloat16 tensor cores, each value split into three pieces "
               "(error of float32's order): off, on (bf16x6), bf16x6 or bf16x9; on sm_90 GPUs "
               "with engine auto or persistent, exact float32 elsewhere"),
        Option("split", "auto", _parse_split,
               "split K ranges: auto (tail blocks across workers when it pays, and each GPU "
               "worker's first block with remote inputs into pieces that overlap its fetches), on "
               "(as auto, tails split wherever that evens out compute) or off"),
        Option("tune", False, _parse_bool,
               "time the Hopper kernel's configs on the first block of each shape and keep the "
               "fastest, and with engine auto cuBLAS against it (float16/bfloat16 on sm_90; kept "
               "on disk: mgemm.tune)"),
        Option("client", None, _parse_client,
               "a distributed.Client or a scheduler address; default: the active client"),
    )
}


def _from_env() -> dict[str, str]:
    """The ``MGEMM_*`` variables set now: option name → its raw value."""
    return {opt.name: os.environ[opt.env] for opt in OPTIONS.values() if opt.env in os.environ}


def _defaults() -> dict[str, Any]:
    env = _from_env()
    return {opt.name: env.get(opt.name, opt.default) for opt in OPTIONS.values()}


#: The ``MGEMM_*`` variables set when mgemm was imported, the defaults given to dask.config below.
_FROM_ENV = _from_env()


def _source(opt: Option, value: Any, given: bool) -> str:
    """Where a value of ``opt`` came from, for an error message."""
    if given:
        return f"the argument {opt.name} ({opt.flag})"
    if opt.name in _FROM_ENV and value == _FROM_ENV[opt.name]:
        return f"the environment variable {opt.env}"
    return f"dask.config {opt.key} (or DASK_{opt.key.upper().replace('.', '__')})"


#: ``mgemm.staging``'s settings: dask.config key under ``mgemm.staging`` → default.
STAGING_DEFAULTS = {"pinned-copies": True, "copy-threads": "auto", "cache-fraction": 0.4}
_STAGING_KINDS = {"pinned-copies": "a boolean", "copy-threads": '"auto" or a positive integer',
                  "cache-fraction": "a number from 0 to 1"}

dask.config.update_defaults({"mgemm": {**_defaults(), "staging": dict(STAGING_DEFAULTS)}})


def _parse_fraction(value: Any) -> float:
    fraction = float(value.strip() if isinstance(value, str) else value)
    if isinstance(value, bool) or not 0.0 <= fraction <= 1.0:
        raise ValueError(value)
    return fraction


def staging() -> dict[str, Any]:
    """``mgemm.staging``'s settings from ``dask.config``, parsed: ``pinned_copies`` (bool),
    ``copy_threads`` (an int, or None for "auto") and ``cache_fraction`` (0 to 1).

    >>> with dask.config.set({"mgemm.staging.copy-threads": "4"}):
    ...     staging()["copy_threads"]
    4
    """
    parse = {"pinned-copies": _parse_bool, "cache-fraction": _parse_fraction,
             "copy-threads": lambda v: None if str(v).strip().lower() == "auto"
             else _positive_int(v)}
    out = {}
    for key, default in STAGING_DEFAULTS.items():
        value = dask.config.get(f"mgemm.staging.{key}", default=default)
        try:
            out[key.replace("-", "_")] = parse[key](value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"dask.config mgemm.staging.{key}: not {_STAGING_KINDS[key]}, "
                             f"got {value!r}") from None
    return out



def resolve(*, only: Any = None, **given: Any) -> dict[str, Any]:
    """Options after keyword > dask.config > environment > default, parsed and checked.

    ``None`` for a keyword means "not given".  Unknown names raise ``TypeError``.  ``only``: the
    names to resolve (default: every option), so that a bad setting of an option a caller does
    not use (``mgemm plan`` takes no engine) is not its error.
    """
    names = OPTIONS if only is None else list(only)
    unknown = (set(given) | set(names)) - set(OPTIONS)
    if unknown:
        raise TypeError(f"unknown mgemm option(s): {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(OPTIONS)}")
    out, raw = {}, {}
    for name in names:
        opt = OPTIONS[name]
        value = given.get(name)
        if value is None:
            value = dask.config.get(opt.key, default=opt.default)
        raw[name] = value
        try:
            out[name] = opt.parse(value)
        except (TypeError, ValueError) as exc:
            where = _source(opt, value, given.get(name) is not None)
            raise ValueError(f"mgemm option {name} (from {where}): {exc}") from None
    if out.get("allow_tf32") and out.get("emulate_fp32", "off") != "off":
        tf32, emulate = (_source(OPTIONS[n], raw[n], given.get(n) is not None)
                         for n in ("allow_tf32", "emulate_fp32"))
        raise ValueError(f"mgemm options allow_tf32 (from {tf32}) and emulate_fp32 (from "
                         f"{emulate}) exclude each other: TF32 rounds float32 inputs, emulation "
                         f"keeps all their bits; choose one")
    return out
