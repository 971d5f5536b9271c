"""A pytest plugin that runs a whole test session under ``mgemm.patch_dask()``.

Load it with ``-p _dask_patch_plugin`` (``tests/`` and the repository on ``PYTHONPATH``) to run
dask's own tests with the patch on.  It counts the products that reached ``mgemm.api.matmul`` and
fails the session if there were none, so a patch that silently does not apply cannot pass (with
pytest-xdist's ``-n``, the workers' counts added up in the controller).
``MGEMM_PATCH_ENGINE`` picks the engine (default "numpy").
"""

from __future__ import annotations

import os

import pytest

#: Marker line the calling test looks for: "<MARK> <number of products routed through mgemm>".
MARK = "mgemm-patch-plugin: routed"

_state: dict = {"calls": 0, "patch": None, "real": None}


def pytest_sessionstart(session: pytest.Session) -> None:
    import mgemm
    import mgemm.api

    real = _state["real"] = mgemm.api.matmul

    def counting_matmul(*args, **kwargs):
        _state["calls"] += 1
        return real(*args, **kwargs)

    mgemm.api.matmul = counting_matmul  # the patch looks api.matmul up at every call
    _state["patch"] = mgemm.patch_dask(engine=os.environ.get("MGEMM_PATCH_ENGINE", "numpy"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Every test starts with the patch still in place (a test cannot have undone it)."""
    import dask.array as da

    patch = _state["patch"]
    assert patch is not None and patch.active, "mgemm.patch_dask() is not active"
    assert da.matmul is patch.wrappers["matmul"], "dask.array.matmul is not mgemm's wrapper"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller: add a worker's count (its tests ran patched in that process)."""
    _state["calls"] += getattr(node, "workeroutput", {}).get("mgemm_routed", 0)


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.write_line(f"{MARK} {_state['calls']}")
    if _state["calls"] == 0:
        terminalreporter.write_line("mgemm-patch-plugin: no product went through mgemm")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import mgemm.api

    if _state["patch"] is not None:
        _state["patch"].undo()
    if _state["real"] is not None:
        mgemm.api.matmul = _state["real"]
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller adds up and judges the counts
        workeroutput["mgemm_routed"] = _state["calls"]
    elif _state["calls"] == 0 and session.testscollected:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
