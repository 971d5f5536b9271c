#!/usr/bin/env bash
# Two or more GPUs, one device call: the planner's OVERLAP_BLOCKS (None: every block with remote
# inputs is cut into K pieces that overlap its fetches; N: only each worker's first N such blocks,
# the rest whole, their inputs fetched while earlier tasks run), mgemm only, on the scaling
# suite's bfloat16 cases; then dask.array.matmul on the same cases; then the float16 32768³
# foundation case (8192² chunks) with both methods; one-GPU cuBLAS anchors first.
#   SETTINGS="None 1" CASES="strong-bfloat16-65536 ..." bash benchmarks/run_overlap_study.sh
#   SUITE=foundation CASES="float32-32768 float64-32768" ANCHOR="float32,float64" DASK=0 F16=0 ...
#   EXTRA="--threads-per-worker 2" ...   (more `mgemm bench` options for the mgemm-only runs)
# Results: $OUT/study.tgz (rows-*.jsonl, trace-*.jsonl, *.txt, *.log).
set -uo pipefail
top=${OUT:-/tmp/mgemm-out}
out=$top/raw  # everything lands here and comes back as one archive (the device returns few files)
mkdir -p "$out"
source "$(dirname "$0")/gpu_env.sh"
repeat=${REPEAT:-5}
[ "${TESTS:-1}" = 1 ] && timeout ${TEST_TIMEOUT:-150} python3 -m pytest -q tests/test_gpu.py 2>&1 | tail -4 \
  | tee "$out/pytest_gpu.log"
if [ -z "${ANCHOR:-}" ]; then
  timeout 150 python3 benchmarks/cublas_one_gpu.py --n 32768 65536 --dtypes bfloat16 --repeat "$repeat" \
    --json "$out/anchor.jsonl" | tee "$out/anchor.txt"
  timeout 60 python3 benchmarks/cublas_one_gpu.py --n 32768 --dtypes float16 --repeat "$repeat" \
    --json "$out/anchor.jsonl" | tee -a "$out/anchor.txt"
else
  timeout 150 python3 benchmarks/cublas_one_gpu.py --n 32768 --dtypes "$ANCHOR" --repeat "$repeat" \
    --json "$out/anchor.jsonl" | tee "$out/anchor.txt"
fi
cases=(); for c in ${CASES:-strong-bfloat16-65536 strong-bfloat16-32768}; do cases+=(--case "$c"); done
for ob in ${SETTINGS:-None 1}; do
  echo "== OVERLAP_BLOCKS=$ob"
  timeout ${BENCH_TIMEOUT:-150} python3 -c 'import sys, mgemm.plan as p
p.OVERLAP_BLOCKS = None if sys.argv[1] == "None" else int(sys.argv[1])
from mgemm.cli import main
sys.argv = ["mgemm"] + sys.argv[2:]
main()' "$ob" bench --suite ${SUITE:-scaling} --protocol ucx --repeat "$repeat" "${cases[@]}" --method mgemm ${EXTRA:-} \
    --json "$out/rows-ob$ob.jsonl" --trace "$out/trace-ob$ob.jsonl" 2>"$out/err-ob$ob.txt" | tee "$out/out-ob$ob.txt"
done
if [ "${DASK:-1}" = 1 ]; then
  echo "== dask.array.matmul"
  timeout ${BENCH_TIMEOUT:-150} python3 -m mgemm.cli bench --suite ${SUITE:-scaling} --protocol ucx --repeat "$repeat" \
    "${cases[@]}" --method dask --json "$out/rows-dask.jsonl" 2>"$out/err-dask.txt" | tee "$out/out-dask.txt"
fi
if [ "${F16:-1}" = 1 ]; then
  echo "== float16-32768 (foundation suite)"
  timeout ${BENCH_TIMEOUT:-150} python3 -m mgemm.cli bench --protocol ucx --repeat "$repeat" --case float16-32768 \
    --json "$out/rows-f16.jsonl" --trace "$out/trace-f16.jsonl" 2>"$out/err-f16.txt" | tee "$out/out-f16.txt"
fi
tar czf "$top/study.tgz" -C "$out" .
