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
