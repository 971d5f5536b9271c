"""How fast one Dask worker fetches a GPU array from another: the link the planner's cost model
assumes.  Prints GB/s for a few sizes over the cluster's protocol (run on a 2-GPU host)."""

from __future__ import annotations

import sys
import time

from distributed import wait

from mgemm.cluster import start_default_cluster


def _make(nbytes: int):
    import cupy
    return cupy.ones(nbytes // 4, dtype=cupy.float32)


def _size(x) -> int:
    import cupy
    cupy.cuda.get_current_stream().synchronize()
    return x.nbytes


def main(protocol: str) -> None:
    client = start_default_cluster(protocol=protocol)
    w0, w1 = sorted(client.nthreads())
    for gib in (0.25, 1, 2):
        src = client.submit(_make, int(gib * 2**30), workers=[w0], pure=False)
        wait(src)
        start = time.perf_counter()
        dst = client.submit(_size, src, workers=[w1], pure=False)
        wait(dst)
        seconds = time.perf_counter() - start
        print(f"{protocol}: {gib:5.2f} GiB worker→worker in {seconds * 1e3:7.1f} ms = "
              f"{gib * 2**30 / seconds / 1e9:6.1f} GB/s", flush=True)
        del src, dst
    client.close()
    client.cluster.close() if client.cluster else None


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ucx")
