"""Launch one persistent-kernel variant a few times, for a profiler (``ncu``) to read.

    ncu --clock-control none -k mgemm_gemm --launch-skip 2 --launch-count 1 --section ... \
        python3 benchmarks/profile_kernel.py [hopper] float16 8192 8192 8192 [field=value ...]

Extra ``field=value`` arguments override the config the heuristic picks (portable KernelConfig:
tile_m=128, tile_k=64, stages=3, policy=static, ...; with ``hopper`` first, the Hopper kernel's
HopperConfig: tile_n=64, pingpong=1, sk_reduce=owner, ...).  B is row-major, as a NumPy user's.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from mgemm import hopper, kernels  # noqa: E402

TEXT_FIELDS = ("policy", "raster", "input", "output", "sk_reduce", "epilogue")


def main(argv):
    engine = kernels
    if argv[0] == "hopper":
        engine, argv = hopper, argv[1:]
    dtype, m, n, k = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    fields = {}
    for kv in argv[4:]:
        key, val = kv.split("=", 1)
        fields[key] = val if key in TEXT_FIELDS else int(val)
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.standard_normal((m, k), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((k, n), dtype=np.float32))
    as_dtype = None
    if dtype == "bfloat16":
        a, b = (((x.view(cp.uint32) + 0x7FFF) >> 16).astype(cp.uint16) for x in (a, b))
        as_dtype = "bfloat16"
    elif dtype != "tf32":
        a, b = a.astype(dtype), b.astype(dtype)
    cfg = engine.choose_config(m, n, k, "float32" if dtype == "tf32" else dtype, engine.device_sms(),
                               allow_tf32=dtype == "tf32")
    cfg = cfg.replace(**fields)
    print(cfg, flush=True)
    for _ in range(4):
        engine.gemm(a, b, config=cfg, as_dtype=as_dtype, allow_tf32=dtype == "tf32")
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
