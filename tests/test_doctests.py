"""The examples in mgemm's docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import dask
import pytest

MODULES = ["mgemm", "mgemm.config", "mgemm.schedule", "mgemm.plan", "mgemm.graph", "mgemm.api",
           "mgemm.engines", "mgemm.engines.auto", "mgemm.patch", "mgemm.emulate", "mgemm.tune",
           "mgemm.kernels", "mgemm.staging", "mgemm.cluster"]  # (the Hopper modules': test_hopper)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    with dask.config.set(scheduler="sync"):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0


def test_census_summary_examples():
    """benchmarks/census_summary.py, which the GPU studies' geomeans come from."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "census_summary.py"
    spec = importlib.util.spec_from_file_location("census_summary", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
