"""The CPU examples run as a user runs them (a fresh interpreter, its own LocalCluster), shrunk
with MGEMM_EXAMPLE_N; examples/local_cuda.py needs GPUs: compiled here, and its message where
CuPy is missing checked."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.mark.parametrize("script", ["local_cpu.py", "patch_dask.py"])
def test_cpu_example_runs(script, tmp_path):
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, MGEMM_EXAMPLE_N="240", PYTHONPATH=path)
    proc = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "relative" in proc.stdout


def test_gpu_example_without_cupy_says_what_it_needs(tmp_path):
    """examples/local_cuda.py where CuPy cannot be imported (a stand-in that raises, so this
    holds on GPU machines too): one line naming the extras and the CPU example, exit 1."""
    (tmp_path / "cupy.py").write_text("raise ImportError('no GPU stack here', name='cupy')\n")
    path = os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(EXAMPLES / "local_cuda.py")], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "missing: cupy" in proc.stderr and "examples/local_cpu.py" in proc.stderr


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_compiles_and_says_what_it_holds(script, tmp_path):
    source = EXAMPLES / script
    py_compile.compile(str(source), cfile=str(tmp_path / "out.pyc"), doraise=True)
    assert source.read_text().startswith('"""'), f"{script} should open with a docstring"
