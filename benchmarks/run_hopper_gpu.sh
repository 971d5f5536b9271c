#!/usr/bin/env bash
# One device call for the Hopper GEMM (kernels/gemm_hopper.cu) on an H200: build the sm_90a variants
# with nvcc (resource report, SASS check for HGMMA), run its GPU tests (-x), then time bfloat16 and
# float16 at 4096³, 8192³ and the skewed shapes beside cuBLAS (torch for bfloat16, cupy.matmul for
# float16) in the same process: reference check first, warm-up, L2 flush, CUDA events, median; the
# implementations of a case are timed in turns (one rep of each at a time).
# Implementations timed: cuBLAS; "hopper" = the heuristic's config (the staged epilogue) with B
# row-major (read in place, MN-major); "hopper-auto" = hopper.gemm without a config, as a caller
# gets it (the transposed product or two launches where gemm_parts takes them); "hopper-Bcol" = B
# column-major (K-major, the first layout);
# "hopper-pair" = the paired-store epilogue (the default before the staged one); where the policy
# is stream-K, "hopper-owner" / "hopper-spread" = the fix-up the heuristic did not pick; the ladder, each
# idea alone on top of "hopper" (pingpong on top of "hopper-pair"): at the squares first
# "hopper-cluster2" (2-CTA clusters on vertically adjacent tiles, B multicast; the heuristic's tile,
# static); everywhere "hopper-pp64x256" and "hopper-pp128x128" (pingpong consumers: one warpgroup
# per tile, 64x256 s5 / 128x128 s6, the paired stores) and "hopper-pp64x256-staged" (s4) /
# "hopper-pp128x128-staged" (s6) with the staged epilogue, on the skewed shapes also "hopper-n64"
# (128x64 s8), "hopper-pp64x128" (s8) and "hopper-pp64x64" (s12), staged, each with the policy
# and fix-up `hopper.fit_policy` picks for its tile, and where the heuristic's policy is stream-K
# "hopper-sms66" / "hopper-sms99" (its config on that many CTAs) and "hopper-memset" (a memset of
# the flags' size before each launch, as when the flags were zeroed per launch); at the squares "hopper-regs24" (setmaxnreg
# 24/240); then
# "hopper-n192" / "hopper-n192-s5" (128x192 tiles, 4 / 5 stages, the heuristic's epilogue, policy
# and fix-up fitted);
# "hopper-direct" (element-wise epilogue), the other policy (static <-> streamk), and at the squares
# "hopper-g16" and "hopper-s3"; everywhere "hopper-n128" / "hopper-n256" (the other cooperative tile width, with
# the policy and fix-up the heuristic picks for it); then tf32 at 8192³ beside torch.matmul
# with TF32 allowed (cuBLAS-TF32), B row-major (copied for the kernel) and B column-major ("-Bcol",
# read in place; cuBLAS on the same operands).
#
#   bash benchmarks/run_hopper_gpu.sh            # everything; results under $OUT (default /tmp/out)
#   TESTS=none bash benchmarks/run_hopper_gpu.sh # skip the tests;  BENCH=none: skip the timing
#   PYTEST_K='pingpong or record' ...           # only the GPU tests matching (pytest -k)
#   PYTEST_ARGS='--maxfail=5' ...                 # extra pytest arguments (split on spaces)
#   ONLY=hopper,hopper-pair ...                   # time only these implementations (and cuBLAS)
#   SKEWED_ONLY=1 ...                             # only the six skewed shapes (no squares, no tf32)
#   DTYPES=float16 ...                            # only these 16-bit dtypes (default both)
#   SHAPES=8192x64x8192,32x8192x8192 ...          # more cases (MxNxK), after the others
#   SHAPES_ONLY=1 ...                             # only the SHAPES cases (no squares, no tf32)
#   TF32_ONLY=1 ...                               # only tf32 at 8192³ (no 16-bit case)
#   EXTRA="s4:stages=4;owner:sk_reduce=owner" ... # "hopper-s4", ...: the heuristic's config, changed
#                                                 # (sms=N: launched on N SMs' worth of CTAs)
#   REPS=20 ...                                   # timed reps per implementation (default 10)
#   SHIELD_US=0 ...                               # events also count host time the GPU waited for
#                                                 # (default 300: a spin after the flush, GPU time only)
#   BUILD=none ...                                # skip the nvcc build and SASS report
# The timeouts (build in parallel; TEST_TIMEOUT 270 s, BENCH_TIMEOUT 210 s) keep one call under
# the device's 600 s.
#
# Writes $OUT/hopper-build.log (ptxas -v), $OUT/hopper.sass, $OUT/pytest-hopper.log,
# $OUT/hopper.jsonl (one row per measurement) and prints a table last.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
python3 -c "import cupy, torch, cuda.bindings; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cuda.bindings', cuda.bindings.__version__)"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# --- build: the heuristic's two tiles and the stream-K variant, resource report and SASS ----------
build=$(mktemp -d)
status=0
build_one() {  # input output tile_n stages policy a_k_major b_k_major [extra -D...]
  local input=$1 output=$2 tn=$3 st=$4 policy=$5 ak=$6 bk=$7
  local name="${input#MGEMM_}_n${tn}_s${st}_${policy}_a${ak}b${bk}${8:+_$(echo "${*:8}" | tr -c 'A-Za-z0-9\n' _)}"
  if nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -o "$build/$name.cubin" \
      -DMGEMM_INPUT="$input" -DMGEMM_OUTPUT="$output" -DMGEMM_TILE_N="$tn" -DMGEMM_STAGES="$st" \
      -DMGEMM_POLICY="MGEMM_POLICY_$policy" -DMGEMM_A_K_MAJOR="$ak" -DMGEMM_B_K_MAJOR="$bk" "${@:8}" \
      kernels/gemm_hopper.cu >"$build/$name.log" 2>&1; then
    cuobjdump -sass "$build/$name.cubin" >"$build/$name.sass" 2>&1
    { echo "== $name: $(grep -E 'Used|spill' "$build/$name.log" | tr -s ' ' | tr '\n' ' ')"
      echo "   SASS: $(grep -c HGMMA "$build/$name.sass") HGMMA ($(grep -m1 -o 'HGMMA[.A-Z0-9x]*[^,]*' "$build/$name.sass")), $(grep -c UTMALDG "$build/$name.sass") UTMALDG, $(grep -c USETMAXREG "$build/$name.sass") USETMAXREG, $(grep -cE '\b(LDL|STL)\b' "$build/$name.sass") LDL/STL, $(grep -cE 'STG\.E\.(64|128)' "$build/$name.sass") wide STG"
    } >"$build/$name.report"
  else
    { echo "BUILD FAILED: $name"; cat "$build/$name.log"; } >"$build/$name.report"; return 1
  fi
}
pids=()
VARIANTS=("MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0" "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 1" \
         "MGEMM_BF16 MGEMM_BF16 128 6 STREAMK 0 0" "MGEMM_F16 MGEMM_F16 256 4 DYNAMIC 1 0" \
         "MGEMM_TF32 MGEMM_F32 128 4 STATIC 1 1" "MGEMM_F16 MGEMM_F32 64 2 STREAMK 0 1" \
         "MGEMM_BF16 MGEMM_BF16 256 5 STATIC 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64" \
         "MGEMM_BF16 MGEMM_BF16 128 6 STATIC 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=128" \
         "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_PRODUCER_REGS=24 -DMGEMM_CONSUMER_REGS=240" \
         "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_CLUSTER_M=2" \
         "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED")
[ "${BUILD:-}" = none ] && VARIANTS=()
for v in "${VARIANTS[@]}"; do
  # shellcheck disable=SC2086
  build_one $v & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat "$build"/*.report 2>/dev/null | tee -a "$OUT/hopper-build.log"
[ -f "$build/BF16_n256_s4_STATIC_a1b0.sass" ] && cp "$build/BF16_n256_s4_STATIC_a1b0.sass" "$OUT/hopper.sass"
rm -rf "$build"

# --- tests -------------------------------------------------------------------------------------------
if [ "${TESTS:-}" != none ]; then
  # A kernel that hangs (an mbarrier phase bug) blocks inside CUDA: the thread method of
  # pytest-timeout still ends the run, with the stack of the test that hung.
  kexpr=(); [ -n "${PYTEST_K:-}" ] && kexpr=(-k "$PYTEST_K")  # PYTEST_K='pingpong or record'
  timeout ${TEST_TIMEOUT:-270} python3 -m pytest -q -m gpu tests/test_hopper.py -x -p no:cacheprovider "${kexpr[@]}" \
    --timeout 120 --timeout-method thread ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest-hopper.log" | tail -40
fi

# --- timing beside cuBLAS ------------------------------------------------------------------------------
[ "${BENCH:-}" = none ] && exit $status
timeout ${BENCH_TIMEOUT:-210} python3 - "$OUT" <<'EOF' 2>&1 | tee "$OUT/bench-hopper.log"
import json, math, os, statistics, sys, time
from pathlib import Path

import cupy as cp
import numpy as np

from mgemm import hopper, hopper_config, kernels

sys.path.insert(0, "benchmarks")
from harness import h  # the shared harness: timed (L2 flush, events, median), operands, cublas_fn

out_dir = Path(sys.argv[1])
CASES = [h.Case("square4096", 4096, 4096, 4096), h.Case("square8192", 8192, 8192, 8192)] + h.SKEWED
if os.environ.get("SKEWED_ONLY"):  # the six skewed shapes alone, no tf32
    CASES = h.SKEWED
if os.environ.get("SHAPES_ONLY") or os.environ.get("TF32_ONLY"):  # only the SHAPES below (or tf32 alone)
    CASES = []
for shape in filter(None, os.environ.get("SHAPES", "").split(",")):  # more shapes, e.g. 8192x64x8192
    CASES.append(h.Case(shape, *map(int, shape.split("x"))))
REPS = int(os.environ.get("REPS", "10"))
SHIELD_US = float(os.environ.get("SHIELD_US", h.SHIELD_US))  # > 0: a gpu_spin hides the host's launch path
rng = np.random.default_rng(0)
props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
meta = {"gpu": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "sms": hopper.device_sms(), "cupy": cp.__version__, "date": time.strftime("%Y-%m-%d")}
meta["shield_us"] = SHIELD_US
print(f"# {meta}", flush=True)
rows = []


def run_case(case, dtype, entries, a_ref, b_ref, bound_kind=None):
    """entries: name -> (label, fn, out).  Each is checked against float64 first; those that pass
    are timed in turns (h.timed_interleaved: one rep of each at a time, so clock drift over the
    run does not favour whichever is timed first)."""
    flops = 2.0 * case.m * case.n * case.k
    bound = 8e-3 if bound_kind == "tf32" else h.BOUNDS[dtype]  # wgmma truncates tf32 inputs
    errs, fns = {}, {}
    for name, (label, fn, out) in entries.items():
        try:
            fn()
            cp.cuda.Device().synchronize()
            err = h.rel_err_sampled(out, a_ref, b_ref, dtype, rng)
            if err <= bound * (10 if name.startswith("cuBLAS") else 1):
                fns[name] = fn
            else:
                print(f"  REFERENCE CHECK FAILED {case.name} {dtype} {name}: {err:.2e}", flush=True)
        except Exception as exc:  # keep going; the row says what broke
            print(f"  ERROR {case.name} {dtype} {name}: {type(exc).__name__}: {exc}"[:400], flush=True)
            err = float("nan")
        errs[name] = err
    try:
        host_s: dict[str, list[float]] = {}
        ms_of = h.timed_interleaved(fns, REPS, shield_us=SHIELD_US, host=host_s)
    except Exception as exc:
        print(f"  ERROR timing {case.name} {dtype}: {type(exc).__name__}: {exc}"[:400], flush=True)
        ms_of = {}
    for name, (label, _, _) in entries.items():
        ms, err = ms_of.get(name, float("nan")), errs[name]
        host_us = 1e6 * statistics.median(host_s[name]) if name in host_s else float("nan")
        tf = flops / (ms * 1e-3) / 1e12 if ms == ms else float("nan")
        rows.append(dict(meta, case=case.name, m=case.m, n=case.n, k=case.k, dtype=dtype, impl=name,
                         config=label, ms=ms, tflops=tf, err=err, host_us=host_us))
        print(f"  {case.name:>16} {dtype:>8} {name:>14} {ms:9.3f} ms {tf:8.1f} TFLOP/s err {err:.1e} "
              f"host {host_us:4.0f} us/call  {label}", flush=True)


SQUARES = ("square4096", "square8192")
ONLY = [n for n in os.environ.get("ONLY", "").split(",") if n]  # e.g. ONLY=hopper,hopper-pair
# Past BUDGET seconds only cuBLAS, "hopper" and "hopper-Bcol" run (each new config compiles for a
# few seconds), so the summary below is printed well inside BENCH_TIMEOUT.
BUDGET = float(os.environ.get("BENCH_BUDGET", "150"))
T0 = time.time()
MEMSET = cp.zeros(1 + 2 * 132, dtype=cp.int32)  # "hopper-memset": the flags' memset before epochs
ESSENTIAL = ("cuBLAS", "cuBLAS-TF32", "hopper", "hopper-auto", "hopper-Bcol", "hopper-pair")
AUTO = "auto"  # an impl's config: hopper.gemm as a caller gets it (no config: the heuristic's own
#                launch, run transposed or split in two where gemm_parts does so)
for dtype in os.environ.get("DTYPES", "bfloat16,float16").split(","):
    as_dtype = "bfloat16" if dtype == "bfloat16" else None
    storage = cp.uint16 if dtype == "bfloat16" else cp.float16
    for case in CASES:
        a, b = h.operands(case, dtype, rng)  # both row-major: B is read MN-major, in place
        bt = cp.ascontiguousarray(b.T)  # B column-major: the K-major layout
        cfg = hopper.choose_config(case.m, case.n, case.k, dtype, hopper.device_sms())
        impls = {"cuBLAS": (None, "cuBLAS", b)}
        impls["hopper"] = (cfg, str(cfg.replace(b_k_major=False)), b)
        impls["hopper-Bcol"] = (cfg, str(cfg), bt.T)
        impls["hopper-auto"] = (AUTO, "hopper.gemm as a caller gets it", b)
        pair = cfg.replace(epilogue="pair")  # the ladder step before the staged epilogue
        impls["hopper-pair"] = (pair, str(pair.replace(b_k_major=False)), b)
        if cfg.policy == "streamk" and not cfg.pingpong:  # the other stream-K fix-up (cooperative)
            other_fix = cfg.replace(sk_reduce="owner" if cfg.sk_reduce == "spread" else "spread")
            impls[f"hopper-{other_fix.sk_reduce}"] = (other_fix, str(other_fix.replace(b_k_major=False)), b)
        # pingpong consumers (one warpgroup's epilogue under the other's mainloop) everywhere
        def fit(c):  # the policy and fix-up the heuristic picks for this tile
            return hopper.fit_policy(c, case.m, case.n, case.k, hopper.device_sms())
        pp = dict(pingpong=True, sk_reduce="owner")  # pingpong: the owner fix-up only
        staged = cfg.replace(sk_reduce="owner")  # the heuristic's epilogue
        ideas = {"hopper-pp64x256": fit(pair.replace(**pp, tile_m=64, tile_n=256, stages=5)),
                 "hopper-pp128x128": fit(pair.replace(**pp, tile_m=128, tile_n=128, stages=6)),
                 "hopper-pp64x256-staged": fit(staged.replace(**pp, tile_m=64, tile_n=256, stages=4)),
                 "hopper-pp128x128-staged": fit(staged.replace(**pp, tile_m=128, tile_n=128, stages=6))}
        if case.name not in SQUARES:  # narrower tiles: more of them, fewer rows of A wasted
            ideas.update({"hopper-n64": fit(staged.replace(pingpong=False, tile_m=128, tile_n=64, stages=8)),
                          "hopper-pp64x128": fit(staged.replace(**pp, tile_m=64, tile_n=128, stages=8)),
                          "hopper-pp64x64": fit(staged.replace(**pp, tile_m=64, tile_n=64, stages=12))})
        # 192-wide cooperative tiles (wgmma n192): 1.5x the columns of a 128-wide tile, so other
        # tile counts per wave (1024x2112: 88 instead of 136), the heuristic's epilogue
        for st in (4, 5):
            ideas[f"hopper-n192{'-s5' if st == 5 else ''}"] = fit(staged.replace(pingpong=False, tile_m=128,
                                                                                 tile_n=192, stages=st))
        if case.name in SQUARES:  # the other ideas, each alone
            cl_policy = cfg.policy if cfg.policy in hopper_config.CLUSTER_POLICIES else "static"
            ideas = {"hopper-cluster2": cfg.replace(cluster_m=2, policy=cl_policy), **ideas,
                     "hopper-regs24": cfg.replace(producer_regs=24, consumer_regs=240)}
        for name, c in ideas.items():
            impls[name] = (c, str(c.replace(b_k_major=False)), b)
        sms_cap = {}  # stream-K over fewer CTAs: longer ranges, fewer partials to add
        for spec in filter(None, os.environ.get("EXTRA", "").split(";")):  # EXTRA="s4:stages=4;..."
            try:
                label, extra, cap = h.parse_variant(spec, cfg)  # cap: sms=N, the launch's SM cap
            except ValueError as exc:  # not a valid change of this case's config
                print(f"  skipped {case.name} {dtype} hopper-{spec.partition(':')[0]}: {exc}", flush=True)
                continue
            impls[f"hopper-{label}"] = (extra, str(extra.replace(b_k_major=False)) + (f" sms={cap}" if cap else ""), b)
            if cap:
                sms_cap[f"hopper-{label}"] = cap
        if cfg.policy == "streamk":  # the flags zeroed by a memset before each launch, as before epochs
            impls["hopper-memset"] = (cfg, f"{cfg.replace(b_k_major=False)} + memset", b)
        if cfg.policy == "streamk" and case.name not in SQUARES:
            for cap in (66, 99):
                impls[f"hopper-sms{cap}"] = (cfg, f"{cfg.replace(b_k_major=False)} sms={cap}", b)
                sms_cap[f"hopper-sms{cap}"] = cap
        # the other tile width, its policy and fix-up chosen by the heuristic for it
        alt = hopper.choose_config(case.m, case.n, case.k, dtype, hopper.device_sms(),
                                   tile_n=256 if cfg.tile_n == 128 else 128)
        impls[f"hopper-n{alt.tile_n}"] = (alt, str(alt.replace(b_k_major=False)), b)
        impls["hopper-direct"] = (cfg.replace(epilogue="direct"), str(cfg.replace(epilogue="direct", b_k_major=False)), b)
        other = "streamk" if cfg.policy == "static" else "static"
        impls[f"hopper-{other}"] = (cfg.replace(policy=other), str(cfg.replace(policy=other, b_k_major=False)), b)
        if case.name in SQUARES:  # the ladder: tile, group, stages
            ladder = {"hopper-g16": cfg.replace(group=16),
                      "hopper-s3": cfg.replace(stages=3)}
            for name, c in ladder.items():
                if c != cfg:
                    impls[name] = (c, str(c.replace(b_k_major=False)), b)
        entries = {}
        for name, (c, label, bb) in impls.items():
            if ONLY and name not in ONLY and name != "cuBLAS":
                continue
            if name not in ESSENTIAL and time.time() - T0 > BUDGET:
                print(f"  skipped {case.name} {dtype} {name}: past BENCH_BUDGET", flush=True)
                continue
            out = cp.full((case.m, case.n), 0x7FC0 if dtype == "bfloat16" else np.nan, dtype=storage)
            if c is None:
                fn = h.cublas_fn(a, b, dtype, out)
            elif c is AUTO:
                fn = lambda bb=bb, out=out: hopper.gemm(a, bb, out=out, as_dtype=as_dtype)  # noqa: E731
            else:
                fn = (lambda c=c, bb=bb, out=out, sms=sms_cap.get(name):
                      hopper.gemm(a, bb, out=out, config=c, as_dtype=as_dtype, sms=sms))
                if name == "hopper-memset":
                    fn = (lambda fn=fn: (cp.cuda.runtime.memsetAsync(MEMSET.data.ptr, 0, MEMSET.nbytes,
                                                                     cp.cuda.get_current_stream().ptr), fn()))
            entries[name] = (label, fn, out)
        run_case(case, dtype, entries, a, b)
        del entries
        del a, b, bt
        cp.get_default_memory_pool().free_all_blocks()

# tf32 at 8192³: float32 operands, beside cuBLAS with TF32 allowed (torch.matmul; CuPy reads its
# CUPY_TF32 switch only at import).
try:
    if os.environ.get("SKEWED_ONLY") or os.environ.get("SHAPES_ONLY"):
        raise RuntimeError("skipped (SKEWED_ONLY / SHAPES_ONLY)")
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    case = h.Case("square8192", 8192, 8192, 8192)
    a, b = h.operands(case, "float32", rng)
    cfg = hopper.choose_config(case.m, case.n, case.k, "float32", hopper.device_sms(), allow_tf32=True)
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    entries = {}
    # B row-major (tf32 wgmma reads K-major operands only: the launcher copies B each call) and
    # B column-major ("-Bcol": read in place), each beside cuBLAS on the same operands
    bt = cp.ascontiguousarray(b.T)
    tbt = torch.from_dlpack(bt).T
    for name, c, bb in (("cuBLAS-TF32", None, tb), ("hopper", cfg, b), ("hopper-pair", cfg.replace(epilogue="pair"), b),
                        ("cuBLAS-TF32-Bcol", None, tbt), ("hopper-Bcol", cfg, bt.T)):
        out = cp.full((case.m, case.n), np.nan, dtype=cp.float32)
        if c is None:
            to = torch.from_dlpack(out)
            fn = lambda to=to, bb=bb: torch.matmul(ta, bb, out=to)
        else:
            fn = (lambda c=c, out=out, bb=bb: hopper.gemm(a, bb, out=out, config=c, allow_tf32=True))
        layout = " (B column-major)" if name.endswith("Bcol") else " (B row-major: copy)"
        entries[name] = (("cuBLAS (TF32)" if c is None else str(c)) + layout, fn, out)
    run_case(case, "float32", entries, a, b, bound_kind="tf32")
    del entries
    del a, b, bt, ta, tb, tbt
except Exception as exc:
    print(f"  ERROR tf32: {type(exc).__name__}: {exc}"[:400], flush=True)

with open(out_dir / "hopper.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")

print("\n| case | dtype | impl | TFLOP/s | × cuBLAS |")
print("|---|---|---|---:|---:|")
by = {}
for r in rows:
    by.setdefault((r["case"], r["dtype"]), {})[r["impl"]] = r
ratios = {}
for (case, dtype), impls in by.items():
    anchor = impls.get("cuBLAS") or impls.get("cuBLAS-TF32")
    cub = anchor["tflops"] if anchor else float("nan")
    for name, r in impls.items():
        ratio = r["tflops"] / cub if cub == cub and cub else float("nan")
        ratios.setdefault((dtype, name), {})[case] = ratio
        print(f"| {case} | {dtype} | {name} | {r['tflops']:.1f} | {ratio:.2f} |")
# Issue 4's targets: 8192³ ≥ 0.95, 4096³ ≥ 0.9, geometric mean over the skewed shapes ≥ 1.1.
skewed = [c.name for c in h.SKEWED]
print("\n| dtype | impl | 4096³ | 8192³ | geomean skewed |")
print("|---|---|---:|---:|---:|")
for (dtype, name), per in ratios.items():
    vals = [per.get(c, float("nan")) for c in skewed]
    gm = math.exp(sum(math.log(v) for v in vals) / len(vals)) if all(v == v and v > 0 for v in vals) else float("nan")
    print(f"| {dtype} | {name} | {per.get('square4096', float('nan')):.2f} | "
          f"{per.get('square8192', float('nan')):.2f} | {gm:.2f} |")
EOF
exit $status
