#!/usr/bin/env bash
# Two GPUs, one device call: where the start of a float16 32768³ product (8192² chunks) goes.
# The GPU tests (whole log kept), one block's GEMM done four ways (benchmarks/block_gemm_probe.py),
# the one-GPU cuBLAS anchor, the transition timeline of mgemm over UCX and over TCP and of
# dask.array.matmul over UCX (benchmarks/latency_probe.py), then base/pieces/dask in turns
# (benchmarks/variants_in_turns.py).  Results: $OUT/all.tgz.
#   TESTS=0 PROBES="ucx:mgemm tcp:mgemm ucx:dask" VARIANTS="base pieces dask" bash benchmarks/run_latency_study.sh
set -uo pipefail
top=${OUT:-/tmp/mgemm-out}
out=$top/raw
mkdir -p "$out"
source "$(dirname "$0")/gpu_env.sh"
echo "commit ${MGEMM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" | tee "$out/commit.txt"
if [ "${TESTS:-1}" = 1 ]; then
  timeout ${TEST_TIMEOUT:-180} python3 -m pytest -q -p no:cacheprovider --tb=short tests/test_gpu.py \
    >"$out/gpu-tests.log" 2>&1
  tail -3 "$out/gpu-tests.log"; grep -E "^(E |FAILED)" "$out/gpu-tests.log" | head -20
fi
timeout 60 python3 benchmarks/block_gemm_probe.py 2>&1 | tee "$out/block.txt"
timeout 60 python3 benchmarks/cublas_one_gpu.py --n 32768 --dtypes float16 --repeat 5 \
  --json "$out/anchor.jsonl" | tee "$out/anchor.txt"
for p in ${PROBES:-ucx:mgemm tcp:mgemm ucx:dask}; do
  timeout 120 python3 benchmarks/latency_probe.py --protocol "${p%%:*}" --method "${p##*:}" \
    2>"$out/probe-${p%%:*}-${p##*:}.err" | tee "$out/probe-${p%%:*}-${p##*:}.txt"
done
anchor=$(python3 -c "import json; print(json.loads(open('$out/anchor.jsonl').readline())['tflops'])" 2>/dev/null)
timeout 200 python3 benchmarks/variants_in_turns.py --dtype float16 --chunk 8192 --repeat 7 \
  --variants ${VARIANTS:-base pieces dask} ${anchor:+--anchor $anchor} --json "$out/variants.jsonl" \
  2>"$out/variants.err" | tee "$out/variants.txt"
tar -C "$top" -czf "$top/all.tgz" raw
