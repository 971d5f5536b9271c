"""mgemm: large matrix products across GPUs with Dask.

One Dask task per output block, placed by a host-level planner that balances blocks over GPUs the
way a persistent kernel balances tiles over SMs.

>>> import numpy as np
>>> import mgemm
>>> mgemm.matmul(np.ones((2, 3)), np.ones((3, 2))).tolist()
[[3.0, 3.0], [3.0, 3.0]]
"""

__version__ = "0.1.0"

from .api import gemm, matmul  # noqa: E402
from .patch import patch_dask  # noqa: E402

__all__ = ["gemm", "matmul", "patch_dask", "__version__"]
