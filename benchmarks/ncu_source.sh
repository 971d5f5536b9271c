#!/usr/bin/env bash
# Nsight Compute, instruction level: where one portable-kernel variant's warps stall, per SASS line.
#   bash benchmarks/ncu_source.sh float16 8192 [field=value ...]     (results under $OUT)
# Profiles the 3rd launch of benchmarks/profile_kernel.py with the clocks left alone (sections
# SpeedOfLight, WarpStateStats, SourceCounters, InstructionStats), writes the report, the
# per-instruction source page as CSV, and a summary of stall samples by opcode
# (benchmarks/ncu_stalls.py).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_env.sh"
dt=$1; n=$2; shift 2
tag=${TAG:-$dt}
timeout ${NCU_TIMEOUT:-180} ncu --clock-control none -k regex:mgemm_gemm --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section InstructionStats \
  --import-source no -f -o "$OUT/ncu-$tag" \
  python3 benchmarks/profile_kernel.py "$dt" "$n" "$n" "$n" "$@" >"$OUT/ncu-$tag.log" 2>&1
echo "ncu rc=$?"; tail -3 "$OUT/ncu-$tag.log"
ncu -i "$OUT/ncu-$tag.ncu-rep" --page details >"$OUT/ncu-$tag.txt" 2>&1
grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|Warp Cycles Per Issued|Executed Ipc" "$OUT/ncu-$tag.txt" | head
ncu -i "$OUT/ncu-$tag.ncu-rep" --page source --csv --print-source sass >"$OUT/sass-$tag.csv" 2>"$OUT/sass-$tag.err"
echo "source page rc=$? ($(wc -l <"$OUT/sass-$tag.csv") lines)"; head -c 600 "$OUT/sass-$tag.err"
python3 benchmarks/ncu_stalls.py "$OUT/sass-$tag.csv" | tee "$OUT/stalls-$tag.txt"
