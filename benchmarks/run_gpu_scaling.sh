#!/usr/bin/env bash
# Scaling on however many GPUs the host has (2, 4 or 8 H200s; device kinds nvidia-h200-x2/-x4/-x8):
# the one-GPU cuBLAS anchor at each size, the plan mgemm makes, then mgemm beside
# dask.array.matmul over UCX/NVLink on the same cluster and inputs (strong and weak scaling), and
# last the report ($OUT/summary.txt): TFLOP/s, × N·one-GPU cuBLAS and × dask per case and method.
# Usage (from the repo root; on a host without dask, wheels of dask, distributed and dask-cuda for
# its Python in .whl, of distributed-ucxx and rmm in .whl-ucx: benchmarks/split_wheels.sh):
#   bash benchmarks/run_gpu_scaling.sh [repeat]
set -uo pipefail
repeat=${1:-5}
out=${OUT:-/tmp/mgemm-out}
mkdir -p "$out"
source "$(dirname "$0")/gpu_env.sh"
gpus=$(nvidia-smi -L | wc -l)
echo "GPUs: $gpus"
nvidia-smi topo -m | head -n $((gpus + 1))
# SIZES="65536" ANCHOR_DTYPES=bfloat16: anchors for those only (with CASES, for a short call)
sizes=${SIZES:-$(python3 -c "from mgemm.bench import scaling_cases as s; print(*sorted({c.n for c in s($gpus)}))")}
timeout ${CUBLAS_TIMEOUT:-240} python3 benchmarks/cublas_one_gpu.py --n $sizes --dtypes ${ANCHOR_DTYPES:-float32,bfloat16} \
  --repeat "$repeat" --json "$out/rows.jsonl" | tee "$out/cublas.txt"
python3 - "$gpus" <<'PY' | tee "$out/plans.txt"
import sys
from mgemm.bench import scaling_cases
from mgemm.cluster import H200_FLOPS
from mgemm.plan import plan_from_shape
gpus = int(sys.argv[1])
for c in scaling_cases(gpus):
    size = 2 if c.dtype == "bfloat16" else 4
    print(plan_from_shape(c.m, c.n, c.k, size, gpus, flops=H200_FLOPS[c.dtype], chunk=c.chunk,
                          part_itemsize=4).table())  # 16-bit partials travel as float32
PY
# One device call may run 600 s at most: CASES="name ..." runs some cases only (split the suite
# over calls; `python3 -c "from mgemm.bench import scaling_cases as s; print([c.name for c in s(8)])"`).
# EMULATE=on (or bf16x9): mgemm's float32 cases on bfloat16 tensor cores (emulate_fp32; the rows
# record it, and their efficiency is still against N x one-GPU SGEMM).
cases=(); for c in ${CASES:-}; do cases+=(--case "$c"); done
# CUBLASMP=1: cuBLASMp on the same cases first, one process a GPU (benchmarks/cublasmp_bench.py;
# its wheel in .whl), so the report has mgemm x cuBLASMp too.
[ "${CUBLASMP:-0}" = 1 ] && timeout ${CUBLASMP_TIMEOUT:-300} python3 benchmarks/cublasmp_bench.py --suite scaling \
  "${cases[@]}" --repeat "$repeat" --timeout $(( ${CUBLASMP_TIMEOUT:-300} - 20 )) --json "$out/rows.jsonl" 2>&1 \
  | tee "$out/cublasmp.txt"
[ -n "${EMULATE:-}" ] && cases+=(--emulate-fp32 "$EMULATE")
timeout ${BENCH_TIMEOUT:-420} python3 -m mgemm.cli bench --suite scaling --protocol ucx --repeat "$repeat" \
  "${cases[@]}" --json "$out/rows.jsonl" --trace "$out/trace.jsonl" 2>"$out/ucx.err" | tee "$out/ucx.txt"
grep -v "UCX  WARN" "$out/ucx.err" | tail -n 5
# The report: efficiency against N x one-GPU cuBLAS and the ratio to dask, from this call's rows.
python3 -c "import json, sys; from mgemm.bench import scaling_summary as s; \
print(s([json.loads(l) for l in open(sys.argv[1])], int(sys.argv[2])))" "$out/rows.jsonl" "$gpus" \
  | tee "$out/summary.txt"
