#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200) for issue 4's skewed shapes:
#   0. with PYTEST_K set: those GPU tests of tests/test_hopper.py first (a changed kernel);
#   1. the six skewed shapes timed beside cuBLAS, in turns (benchmarks/run_hopper_gpu.sh with
#      SKEWED_ONLY unless SQUARES=1, no build): the heuristic's tile beside others (ONLY, DTYPES);
#   2. Nsight Compute (clocks left alone) on the heuristic's kernel and on cuBLAS for three shapes
#      (NCU_SHAPES; NCU=cublas: cuBLAS only, NCU=none: no ncu): duration, DRAM and SM throughput, L2 hit rate, grid.
#   bash benchmarks/run_skewed_study.sh      (results under $OUT)
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_env.sh"
BUDGET=${BUDGET:-560}
left() { echo $((BUDGET - SECONDS)); }
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

if [ -n "${PYTEST_K:-}" ]; then
  echo "== 0. GPU tests: $PYTEST_K"
  timeout $(( $(left) - 300 )) python3 -m pytest -q -m gpu tests/test_hopper.py -p no:cacheprovider -k "$PYTEST_K" \
    --timeout 120 --timeout-method thread 2>&1 | tee "$OUT/pytest-hopper.log" | tail -15
fi

echo "== 1. skewed shapes beside cuBLAS ($(left) s left)"
skewed=1; [ -n "${SQUARES:-}" ] && skewed=
TESTS=none BUILD=none SKEWED_ONLY=$skewed DTYPES=${DTYPES:-float16} \
  ONLY=${ONLY:-hopper,hopper-n64,hopper-pp64x128,hopper-pp64x64,hopper-pp64x256,hopper-n128,hopper-n256} \
  BENCH_BUDGET=$(( $(left) - 200 )) BENCH_TIMEOUT=$(( $(left) - 150 )) bash benchmarks/run_hopper_gpu.sh

echo "== 2. ncu ($(left) s left)"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats"
KEEP='^\s+(Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|Grid Size|Block Size|Registers Per Thread)\b'
for shape in ${NCU_SHAPES:-256x256x65536 64x8192x8192 8192x8192x256}; do
  [ "${NCU:-}" = none ] && break
  [ "$(left)" -lt 40 ] && { echo "skip ncu $shape: time"; continue; }
  IFS=x read -r m n k <<<"$shape"
  [ "${NCU:-}" = cublas ] || timeout 60 ncu --clock-control none -k regex:mgemm_gemm_hopper --launch-skip 2 --launch-count 1 $SECTIONS \
    python3 benchmarks/profile_kernel.py hopper float16 "$m" "$n" "$k" >"$OUT/ncu-hopper-$shape.txt" 2>&1
  [ "${NCU:-}" = cublas ] || { echo "-- mgemm hopper $shape rc=$?: $(grep -m1 '^hopper' "$OUT/ncu-hopper-$shape.txt")"
                               grep -E "$KEEP" "$OUT/ncu-hopper-$shape.txt"; }
  timeout 60 ncu --clock-control none -k 'regex:gemm|xmma|cutlass|nvjet|splitK|reduce' --launch-skip 2 --launch-count 2 $SECTIONS \
    python3 -c "
import cupy as cp
a = cp.random.standard_normal(($m, $k), dtype=cp.float32).astype(cp.float16)
b = cp.random.standard_normal(($k, $n), dtype=cp.float32).astype(cp.float16)
for _ in range(4):
    c = a @ b
cp.cuda.Device().synchronize()" >"$OUT/ncu-cublas-$shape.txt" 2>&1
  echo "-- cuBLAS $shape rc=$?"
  grep -E "^  [^ ].*\(|$KEEP" "$OUT/ncu-cublas-$shape.txt" | head -24
done
