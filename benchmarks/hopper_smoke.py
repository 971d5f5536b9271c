"""First-contact check of the Hopper kernel: each case in its own process under a timeout, so a
hang (an mbarrier phase bug) costs one case, not the device call.  For a wrong result it prints
where in the first output tile the errors sit (one character per 8×8 block: '.' right, 'X' wrong,
'n' NaN/unwritten) and which simple alternative the output matches instead, to point at the bug.

    python3 benchmarks/hopper_smoke.py [--timeout 60]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [  # kind, m, n, k, tile_n, stages, policy, sms
    ("bfloat16", 128, 128, 64, 128, 4, "static", None),
    ("bfloat16", 128, 128, 256, 128, 2, "static", None),
    ("bfloat16", 128, 256, 640, 256, 4, "static", None),
    ("float16", 128, 128, 256, 128, 4, "static", None),
    ("tf32", 128, 128, 256, 128, 4, "static", None),
    ("bfloat16", 1000, 1500, 700, 128, 4, "static", 3),
    ("bfloat16", 1000, 1500, 700, 128, 4, "dynamic", None),
    ("bfloat16", 1000, 1500, 2100, 128, 4, "streamk", 7),
    ("bfloat16", 257, 263, 129, 64, 2, "per_tile", None),
]


def one(kind, m, n, k, tile_n, stages, policy, sms):
    sys.path.insert(0, str(ROOT))
    import cupy as cp
    import numpy as np

    from mgemm import hopper
    rng = np.random.default_rng(1)
    a32 = cp.asarray(rng.standard_normal((m, k)), dtype=cp.float32)
    b32 = cp.asarray(rng.standard_normal((k, n)), dtype=cp.float32)

    def cast(x):
        if kind == "bfloat16":
            u = x.view(cp.uint32)
            bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(cp.uint16)
            return bits, (bits.astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
        y = x.astype(cp.float16 if kind == "float16" else cp.float32)
        return y, y.astype(cp.float64)
    a, a64 = cast(a32)
    b, b64 = cast(b32)
    if kind == "tf32":  # wgmma reads the top 19 bits
        a64 = (a.view(cp.uint32) & 0xFFFFE000).view(cp.float32).astype(cp.float64)
        b64 = (b.view(cp.uint32) & 0xFFFFE000).view(cp.float32).astype(cp.float64)
    out = (cp.full((m, n), 0x7FC0, dtype=cp.uint16) if kind == "bfloat16"
           else cp.full((m, n), cp.nan, dtype=cp.float16 if kind == "float16" else cp.float32))
    cfg = hopper.HopperConfig(input=kind, tile_n=tile_n, stages=stages, policy=policy)
    hopper.gemm(a, b, out=out, config=cfg, sms=sms, allow_tf32=kind == "tf32",
                as_dtype="bfloat16" if kind == "bfloat16" else None)
    cp.cuda.Device().synchronize()
    got = ((out.astype(cp.uint32) << 16).view(cp.float32) if kind == "bfloat16" else out).astype(cp.float64)
    ref = a64 @ b64
    nan = int(cp.isnan(got).sum())
    err = float(cp.linalg.norm(cp.nan_to_num(got) - ref) / cp.linalg.norm(ref))
    bound = {"bfloat16": 1e-2, "float16": 2e-3, "tf32": 5e-3}[kind]
    res = {"case": f"{kind} {m}x{n}x{k} n{tile_n} s{stages} {policy} sms={sms}", "err": err,
           "nan": nan, "ok": nan == 0 and err <= bound}
    if not res["ok"]:
        tol = 10 * bound * float(cp.abs(ref).max())
        tm, tn = min(m, 128), min(n, 256)
        rows = []
        for i in range(0, tm, 8):
            line = ""
            for j in range(0, tn, 8):
                g, r = got[i:i + 8, j:j + 8], ref[i:i + 8, j:j + 8]
                line += "n" if bool(cp.isnan(g).any()) else ("." if float(cp.abs(g - r).max()) <= tol else "X")
            rows.append(line)
        res["map"] = rows
        kt = 64 if kind != "tf32" else 32
        alts = {"zero": ref * 0, "first k-tile only": a64[:, :kt] @ b64[:kt], "2x": 2 * ref,
                "A@B with B read as (N,K) rows": (a64 @ b64.reshape(n, k).T) if True else None,
                "transposed output": ref.T.reshape(m, n) if m == n else None}
        for name, alt in alts.items():
            if alt is not None:
                e = float(cp.linalg.norm(cp.nan_to_num(got) - alt) / (cp.linalg.norm(alt) or 1.0))
                res[f"vs {name}"] = round(e, 4)
        res["sample got/ref"] = [[float(got[i, j]), float(ref[i, j])] for i, j in ((0, 0), (0, 1), (1, 0), (8, 0), (0, 8), (64, 0))
                                 if i < m and j < n]
    print("RESULT " + json.dumps(res), flush=True)


def main():
    timeout = 60
    if "--timeout" in sys.argv:
        timeout = int(sys.argv[sys.argv.index("--timeout") + 1])
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        kind, m, n, k, tn, st, policy, sms = sys.argv[2:10]
        one(kind, int(m), int(n), int(k), int(tn), int(st), policy, None if sms == "None" else int(sms))
        return
    passed = hangs = 0
    for case in CASES:
        if hangs >= 2:
            print(f"SKIP  {case}: two cases hung already")
            continue
        argv = [sys.executable, __file__, "--one", *map(str, case)]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if lines:
                res = json.loads(lines[-1][7:])
                passed += res["ok"]
                print(("PASS " if res["ok"] else "FAIL ") + res["case"] + f"  err {res['err']:.2e} nan {res['nan']}")
                for key, val in res.items():
                    if key == "map":
                        print("\n".join("    " + r for r in val))
                    elif key.startswith("vs ") or key.startswith("sample"):
                        print(f"    {key}: {val}")
            else:
                print(f"ERROR {case}: rc={p.returncode}\n{(p.stdout + p.stderr)[-1500:]}")
        except subprocess.TimeoutExpired:
            hangs += 1
            print(f"HANG  {case}: no result within {timeout} s")
        sys.stdout.flush()
    print(f"smoke: {passed}/{len(CASES)} passed")
    sys.exit(0 if passed == len(CASES) else 1)


if __name__ == "__main__":
    main()
