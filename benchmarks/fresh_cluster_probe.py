"""Why are the first products on a freshly started GPU cluster slow?  Starts mgemm's embedded
cluster (UCX/NVLink) with a given RMM pool, persists random inputs, then times mgemm.matmul
``--runs`` times the way ``mgemm bench`` does (one copy of every input chunk at the start of each
run, device-synchronized) and prints, per run, its seconds and its slowest fetch: when it began,
how long it took, its bytes, and how long the sending worker took to serve it.

    python3 benchmarks/fresh_cluster_probe.py --rmm-pool auto|16GiB|none [--runs 7]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mgemm  # noqa: E402
from mgemm import bench  # noqa: E402
from mgemm.cluster import start_default_cluster  # noqa: E402


def _logs(dask_worker, since: float):
    inc = [(e["start"] - since, e["stop"] - e["start"], int(e["total"]), str(e.get("who")))
           for e in list(dask_worker.transfer_incoming_log) if e["start"] >= since]
    out = [(e["start"] - since, e["stop"] - e["start"], int(e["total"]), str(e.get("who")))
           for e in list(dask_worker.transfer_outgoing_log) if e["start"] >= since]
    return {"in": inc, "out": out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rmm-pool", default="auto", help="auto (half the GPU, at most 16 GiB), a size, or none")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--n", type=int, default=32768)
    ap.add_argument("--chunk", type=int, default=8192)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    client = start_default_cluster(protocol="ucx", rmm_pool=None if args.rmm_pool == "none" else args.rmm_pool)
    print(f"cluster up in {time.perf_counter() - t0:.1f} s, rmm pool {args.rmm_pool}", flush=True)
    try:
        a = bench.random_matrix((args.n, args.n), args.chunk, args.dtype, gpu=True, seed=1).persist()
        b = bench.random_matrix((args.n, args.n), args.chunk, args.dtype, gpu=True, seed=2).persist()
        from distributed import wait
        wait([a, b])
        for r in range(args.runs):
            started: list[float] = []
            seconds, c = bench.timed(client, lambda: mgemm.matmul(a, b), started)
            logs = client.run(_logs, since=started[0])
            worst = []
            for name, lg in logs.items():
                if lg["in"]:
                    s, d, nb, who = max(lg["in"], key=lambda e: e[1])
                    served = [o for o in logs.get(who, {}).get("out", []) if abs(o[0] - s) < 0.05]
                    sd = max((o[1] for o in served), default=float("nan"))
                    worst.append(f"{name[-5:]}: {len(lg['in'])} fetches, slowest at {s:.3f} s took "
                                 f"{d:.3f} s ({nb >> 20} MiB; sender {who[-5:]} sent for {sd:.3f} s)")
            print(f"run {r}: {seconds:.3f} s | " + " | ".join(worst), flush=True)
            del c
    finally:
        client.close()
        client.cluster.close() if getattr(client, "cluster", None) else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
