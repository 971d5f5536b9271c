#!/usr/bin/env bash
# One device call (kind nvidia-h200-x2): where a cold product's fetches spend their time.
# Runs the one-GPU cuBLAS anchor, then `mgemm bench` (mgemm beside dask.array.matmul, cold
# inputs, --trace with every worker's fetch log) once per setting in SETTINGS, each on a fresh
# embedded cluster.  A setting is LIMIT:SYNC: LIMIT is Dask's per-message transfer limit
# ("default" = Dask's 50MB, or e.g. 1GiB), SYNC what a UCX transfer waits for ("device":
# distributed-ucxx's whole-GPU synchronize; "stream": mgemm's StreamScopedTransfers plugin).
#   SETTINGS="default:device default:stream" CASES="float32-32768" TESTS=1 \
#     bash benchmarks/run_transfer_study.sh [repeat]          # results under $OUT
set -uo pipefail
repeat=${1:-5}
out=${OUT:-/tmp/mgemm-out}; mkdir -p "$out"
source "$(dirname "$0")/gpu_env.sh"
echo "commit ${MGEMM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
[ "${TESTS:-0}" = 1 ] && timeout 150 python3 -m pytest tests/test_gpu.py -q -x -p no:cacheprovider 2>&1 | tail -3
timeout 60 python3 benchmarks/cublas_one_gpu.py --repeat "$repeat" --json "$out/rows.jsonl" | tee "$out/cublas.txt"
cases=(); for c in ${CASES:-float32-32768}; do cases+=(--case "$c"); done
for setting in ${SETTINGS:-default:device default:stream}; do
  limit=${setting%%:*}; sync=${setting##*:}
  extra=(--transfer-sync "$sync"); [ "$limit" != default ] && extra+=(--transfer-limit "$limit")
  echo "== transfer limit $limit, transfer sync $sync"
  timeout ${CASE_TIMEOUT:-150} python3 -m mgemm.cli bench --protocol ucx "${extra[@]}" "${cases[@]}" \
    --repeat "$repeat" --json "$out/rows.jsonl" --trace "$out/trace-$limit-$sync.jsonl" \
    2>"$out/ucx-$limit-$sync.err" | tee "$out/ucx-$limit-$sync.txt"
  grep -v "UCX  WARN" "$out/ucx-$limit-$sync.err" | tail -n 3
done
