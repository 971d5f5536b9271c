#!/usr/bin/env bash
# On the GPU host (device tool, kind nvidia-h200-x2): the GPU tests, the one-GPU cuBLAS anchor, then
# mgemm beside dask.array.matmul on the same cluster and inputs, over UCX/NVLink and over TCP.
# Usage (from the repo root; on a host without dask, wheels of dask, distributed and dask-cuda for
# its Python in .whl, of distributed-ucxx and rmm in .whl-ucx: benchmarks/split_wheels.sh):
#   bash benchmarks/run_gpu_orchestrator.sh [repeat] [tcp-repeat]
# Environment: TESTS=0 skips the GPU tests, TCP=0 the TCP case, LINK_PROBE=1 adds the link probe,
# DASK_CONTROL=0 skips dask.array.matmul on a cluster without mgemm's transfer plugin,
# TRANSFER_LIMIT=1GiB raises the bytes per worker-to-worker message on the embedded cluster,
# CUBLASMP=1 adds cuBLASMp on the same products (benchmarks/cublasmp_bench.py; its wheel in .whl),
# GRAM=0 skips the Gram product X.T @ X (benchmarks/gram_products.py --gpu).
# One device call runs 600 s at most: with the GPU tests, TCP and the dask control the whole script
# takes longer, so split it (e.g. TESTS=0 TCP=0 for one call, then the rest).
set -uo pipefail
repeat=${1:-5}
tcp_repeat=${2:-$repeat}
out=${OUT:-/tmp/mgemm-out}
mkdir -p "$out"
source "$(dirname "$0")/gpu_env.sh"
git_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "commit $git_commit"
nvidia-smi --query-gpu=index,name,memory.total,clocks.sm,clocks.max.sm --format=csv
nvidia-smi topo -m | head -5
[ "${TESTS:-1}" = 1 ] && timeout 120 python3 -m pytest tests/test_gpu.py -q -p no:cacheprovider 2>&1 | tee "$out/gpu-tests.log" | tail -5
if [ "${LINK_PROBE:-0}" = 1 ]; then
  timeout 60 python3 benchmarks/link_probe.py ucx 2>/dev/null | tee "$out/link.txt"
  timeout 60 python3 benchmarks/link_probe.py tcp 2>/dev/null | tee -a "$out/link.txt"
fi
timeout 60 python3 benchmarks/cublas_one_gpu.py --repeat "$repeat" --json "$out/rows.jsonl" | tee "$out/cublas.txt"
timeout 60 python3 benchmarks/cublas_one_gpu.py --n 65536 --dtypes float16 --repeat "$repeat" --json "$out/rows.jsonl" \
  | tee -a "$out/cublas.txt"  # the anchor of the float16-65536 case
[ "${CUBLASMP:-0}" = 1 ] && timeout ${CUBLASMP_TIMEOUT:-300} python3 benchmarks/cublasmp_bench.py --suite foundation \
  --repeat "$repeat" --timeout $(( ${CUBLASMP_TIMEOUT:-300} - 20 )) --json "$out/rows.jsonl" 2>&1 | tee "$out/cublasmp.txt"
extra=()
[ -n "${TRANSFER_LIMIT:-}" ] && extra=(--transfer-limit "$TRANSFER_LIMIT")
timeout ${UCX_TIMEOUT:-300} python3 -m mgemm.cli bench --protocol ucx "${extra[@]}" --repeat "$repeat" --json "$out/rows.jsonl" --trace "$out/trace.jsonl" 2>"$out/ucx.err" \
  | tee "$out/ucx.txt"
# dask.array.matmul also on a cluster without mgemm's transfer plugin (distributed-ucxx's own
# whole-device synchronize), so its best median is known beside mgemm's (DASK_CONTROL=0: skip).
[ "${DASK_CONTROL:-1}" = 1 ] && timeout 200 python3 -m mgemm.cli bench --protocol ucx "${extra[@]}" \
  --transfer-sync device --method dask --repeat "$repeat" --json "$out/rows.jsonl" 2>"$out/ucx-device.err" \
  | tee "$out/ucx-device.txt"
[ "${TCP:-1}" = 1 ] && timeout 150 python3 -m mgemm.cli bench --protocol tcp "${extra[@]}" --repeat "$tcp_repeat" --case float32-32768 \
  --json "$out/rows.jsonl" --trace "$out/trace.jsonl" 2>"$out/tcp.err" | tee "$out/tcp.txt"
# a Gram product X.T @ X of a persisted row-chunked X (the planner's split by holder; GRAM=0: skip)
[ "${GRAM:-1}" = 1 ] && timeout 200 python3 benchmarks/gram_products.py --gpu --rows 524288 --cols 8192 \
  --chunk 32768 --dtype float32 --runs 5 2>"$out/gram.err" | tee "$out/gram.txt"
for f in "$out"/ucx.err "$out"/tcp.err; do grep -v "UCX  WARN" "$f" | tail -n 5; done
