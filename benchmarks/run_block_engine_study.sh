#!/usr/bin/env bash
# A float16 block task's GEMM, cuBLAS against mgemm's Hopper kernel with a block's K chunks in one
# launch, on the GPU host (two H200s): the GPU tests of K in parts, the one-block probe (cuBLAS
# and the kernel in turns), then float16 32768³ (8192² chunks) through the orchestrator with each
# engine and dask.array.matmul in turns, and one traced run per engine.  Everything lands in
# $OUT/raw (or ./study-out).  From the repository root:
#     bash benchmarks/run_block_engine_study.sh
# Knobs (environment): TESTS=0 skips the tests, REPEAT (7), LAYOUT (dask), TRACE=0 skips the traces.
set -uo pipefail
source benchmarks/gpu_env.sh
dir=${OUT:-study-out}/raw
mkdir -p "$dir"
git rev-parse HEAD >"$dir/commit.txt" 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv >"$dir/gpus.txt" 2>&1
if [[ ${TESTS:-1} != 0 ]]; then
  timeout 300 python3 -m pytest -q -x tests/test_hopper.py -k "parts" -p no:cacheprovider \
    >"$dir/tests.log" 2>&1; echo "tests rc $?" | tee -a "$dir/tests.log"; tail -3 "$dir/tests.log"
fi
timeout 120 python3 benchmarks/cublas_one_gpu.py --n 32768 --dtypes float16 --repeat 5 \
  >"$dir/anchor.txt" 2>&1; tail -3 "$dir/anchor.txt"
timeout 120 python3 benchmarks/block_gemm_probe.py --rounds 3 >"$dir/block.txt" 2>&1; cat "$dir/block.txt"
anchor=$(awk "/^float16-32768/ {print \$(NF-1)}" "$dir/anchor.txt")
timeout 300 python3 benchmarks/variants_in_turns.py --dtype float16 --chunk 8192 --repeat "${REPEAT:-7}" \
  --layout "${LAYOUT:-dask}" --variants base persistent dask ${anchor:+--anchor $anchor} \
  --json "$dir/variants.jsonl" >"$dir/variants.txt" 2>&1; tail -6 "$dir/variants.txt"
if [[ ${TRACE:-1} != 0 ]]; then
  for engine in cublas persistent; do
    timeout 150 python3 benchmarks/latency_probe.py --protocol ucx --layout "${LAYOUT:-dask}" --runs 3 \
      --tasks --engine $engine >"$dir/trace-$engine.txt" 2>&1; grep "^median" "$dir/trace-$engine.txt"
  done
fi
tar czf "${OUT:-study-out}/all.tgz" -C "${OUT:-study-out}" raw 2>/dev/null
