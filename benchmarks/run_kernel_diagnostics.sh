#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200) that learns the most per second:
#   1. Hopper kernel first contact: benchmarks/hopper_smoke.py (each case under a timeout);
#   2. Nsight Compute on the portable kernel at 8192³ (float16, float32 SIMT, float64 DMMA), with the
#      clocks left alone: speed of light, warp stalls, pipe use, shared-memory bank conflicts;
#   3. if the smoke passed: the Hopper GPU tests and the Hopper timing beside cuBLAS.
# Each stage checks the time left so the call stays inside the device's 600 s.
#   bash benchmarks/run_kernel_diagnostics.sh      (results under $OUT)
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_env.sh"
BUDGET=${BUDGET:-560}
left() { echo $((BUDGET - SECONDS)); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

echo "== 1. Hopper smoke"
timeout $(( $(left) - 200 )) python3 benchmarks/hopper_smoke.py --timeout ${SMOKE_TIMEOUT:-45} 2>&1 | tee "$OUT/hopper-smoke.log"
smoke=$?

echo "== 2. ncu on the portable kernel ($(left) s left)"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
for v in "float16 tile_m=128 tile_n=256 tile_k=64 stages=3 warps_m=2 warps_n=4 policy=static" \
         "float32 policy=static" "float64 tile_m=128 tile_n=64 tile_k=16 stages=3 warps_m=2 warps_n=2 policy=static"; do
  [ "$(left)" -lt 150 ] && { echo "skip ncu $v: time"; continue; }
  set -- $v; dt=$1; shift
  timeout 90 ncu --clock-control none -k mgemm_gemm --launch-skip 2 --launch-count 1 $SECTIONS \
    python3 benchmarks/profile_kernel.py $dt 8192 8192 8192 "$@" >"$OUT/ncu-$dt.txt" 2>&1
  echo "-- ncu $dt rc=$?"
  grep -E "^\s+(Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput|Executed Ipc Active|Issue Slots Busy|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Block Limit|Dynamic Shared|No Eligible|Warp Cycles Per Issued|Avg. Active Threads|One or More Eligible)" "$OUT/ncu-$dt.txt" | head -30
  grep -iE "stall|bank|uncoalesced|pipe" "$OUT/ncu-$dt.txt" | grep -v "^==" | head -12
done

if [ $smoke -eq 0 ] && [ "$(left)" -gt 120 ]; then
  echo "== 3. Hopper tests and timing ($(left) s left)"
  TEST_TIMEOUT=$(( ($(left) - 30) / 2 )) BENCH_TIMEOUT=$(( ($(left) - 30) / 2 )) \
    bash benchmarks/run_hopper_gpu.sh
else
  echo "== 3. skipped (smoke rc=$smoke, $(left) s left)"
fi
