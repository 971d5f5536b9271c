"""The benchmark harness, ``benchmarks/kernels.py``, for the probe scripts beside it:

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from harness import h  # also puts the repository on sys.path, for mgemm

It is loaded under the name ``bench_harness``: as plain ``kernels`` it would be one name away from
the repository's ``kernels/`` directory.
"""

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_spec = importlib.util.spec_from_file_location("bench_harness", Path(__file__).parent / "kernels.py")
h = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = h  # dataclasses look their module up
_spec.loader.exec_module(h)
