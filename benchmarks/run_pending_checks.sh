#!/usr/bin/env bash
# The GPU checks still owed on one H200 (kind nvidia-h200), each part within one device call:
#   bash benchmarks/run_pending_checks.sh suite   # the whole GPU suite, then the CuPy example
#   bash benchmarks/run_pending_checks.sh table   # the whole GPU suite (not with SUITE=0), then issue
#       4's table (fp16, bf16)
#   bash benchmarks/run_pending_checks.sh typed   # issue 4's table, then 24 sizes as a user types
#       them (seed 20261241: M, N, K multiples of 8 log-uniform in 256-16384, 5-2000 GFLOP), fp16
#       and bf16, as a caller gets them: the typed geomean with ROW_MAJOR_BOXES (run in the
#       eighty-seventh session: 0.924 / 0.921)
#   bash benchmarks/run_pending_checks.sh rows3   # the lead of RESULTS.md's eighty-seventh session:
#       ROWS_QUAD's GPU tests, then the rule at (3,) (auto-prior) and static 2 x 2 clusters of 128 x
#       256 (q256) beside the caller's stream-K single CTAs on three tile rows over B's rows off
#       128-byte lines, on the 12 sizes of a CPU draw (seed 20261244: M 264-384, N 2000-16384 and
#       K 1000-16384 log-uniform, N not a multiple of 32, where the caller runs stream-K single
#       CTAs), fp16 and bf16; then the rule at (2, 5, 7) on four sizes each of two, five and seven
#       rows where that changes the route (seed 20261250), fp16 (run in the eighty-eighth session)
#   bash benchmarks/run_pending_checks.sh rowsq   # ROWS_QUAD as fitted on rows3's sizes: its GPU
#       tests, then eight sizes each at three and at two tile rows drawn where it changes the route
#       (seeds 20261260 and 20261261: M 264-384 and 136-256, N 2000-16384 and K 1000-16384
#       log-uniform), fp16 and bf16, beside the rule off (--prior) (run in the eighty-eighth session)
#   bash benchmarks/run_pending_checks.sh rowsr   # ROWS_QUAD as committed (d1abca1: not over 128-wide
#       stream-K), on a draw after that change: eight sizes at three tile rows and six at two
#       where it changes the route (seeds 20261270 and 20261271, ranges as rowsq's), fp16 and bf16,
#       beside the rule off (--prior) (run in the ninetieth session: 12 of 14 ahead)
#   bash benchmarks/run_pending_checks.sh typed2  # 24 more sizes as a user types them (seed 20261289,
#       drawn as typed's), fp16 and bf16, as a caller gets them (run in the ninetieth session: 0.935 /
#       0.934; in the ninety-first: 0.937 / 0.933)
#   bash benchmarks/run_pending_checks.sh wave1   # 1 x 2 clusters of 128 x 256 (c12) beside the
#       caller's single CTAs where those run one wave (100-132 tiles) of static 128 x 256 tiles and the
#       pairs fit one wave too: 1384x2920x3352 (typed, 0.71 in the eighty-seventh session) and ten
#       sizes of a CPU draw (seed 20261290), fp16 and bf16 (run in the ninetieth session: behind on 8-9
#       of 11, no rule)
#   bash benchmarks/run_pending_checks.sh single4  # static 2 x 2 clusters of 128 x 128 (q128) beside
#       the caller on eight sizes with four 128-wide tile columns (N 392-512, M 2048-16384), A's and B's
#       rows off 128-byte lines, whose heuristic config is single CTAs without clusters (seed
#       20261303): the after-the-fact lead of the ninety-first session (six of eight ahead), fp16 and
#       bf16 (queued in the ninety-first session, not run)
#   bash benchmarks/run_pending_checks.sh draws   # SK_256_CLUSTER_PAD on a draw of its own (fp16,
#       bf16), the exact-width pricing on three narrow products, issue 4's table
#   bash benchmarks/run_pending_checks.sh ladder  # a kernel branch against main, in turns, with
#       the epilogue, cluster and stream-K GPU tests (the spread fix-up's among them), every float16
#       row of issue 4's table and more; first, here:
#       bash benchmarks/trees_in_turns.sh prepare main <branch>
#   bash benchmarks/run_pending_checks.sh staged  # NumPy chunks through the GPU: the staged GPU
#       tests, staged_probe.py (CuPy's copies against the pinned buffers), host_inputs.py (beside
#       dask-cuda's way and cuBLASXt; bfloat16 through the pinned buffers against CuPy's copies,
#       its tasks traced)
#   bash benchmarks/run_pending_checks.sh leads   # cuBLAS's tile on 1024x2112x8192 (64 x 256 on 1 x 2
#       clusters; five stages of it through 128-byte output chunks, out_cols=64) and 1 x 2 clusters
#       on short-K static tiles (ahead once on 8192x8192x256), fp16 and bf16 (RESULTS.md,
#       seventy-seventh session), then issue 4's table
#   bash benchmarks/run_pending_checks.sh swap64  # SWAP_64_ROWS (RESULTS.md, seventy-eighth session):
#       the GPU tests of the transposed route (its two new sizes among them), of DIRECT_64_ROWS and of 128-byte output
#       chunks, then the five sizes of a CPU draw of 12000 where the rule changed the route (fp16
#       and bf16), beside the rule off (--prior), and 1024x2112x8192 (run in the eightieth session,
#       before the rule asked for A's and B's rows on 128-byte lines)
#   bash benchmarks/run_pending_checks.sh pad192  # QUAD_SK_192_PAD (RESULTS.md, seventy-ninth
#       session): the five sizes of a CPU draw of 12000 where the rule changes the route (fp16 and
#       bf16), beside the rule off (--prior) (run in the eightieth session)
#   bash benchmarks/run_pending_checks.sh q256    # QUAD_SK_256 (RESULTS.md, eighty-first session): its GPU
#       tests and the 256-wide cluster stream-K tests, then 12 of the 21 sizes of a CPU draw of 6000
#       where the rule changes the route (fp16 and bf16), beside the rule off (--prior) (all ran in the
#       eighty-first and eighty-second sessions)
#   bash benchmarks/run_pending_checks.sh duo     # DUO_SK_256 (RESULTS.md, eighty-second and eighty-third
#       sessions): the cluster stream-K GPU tests, then 17 sizes of a CPU draw of 6000 where the rule
#       changes the route (fp16 and bf16; the transposed product and the route's changes among them),
#       the heuristic (the rule off since it lost there in the eighty-third session) beside the rule on
#       (--prior "DUO_SK_256=(8, 80, 7)")
#   bash benchmarks/run_pending_checks.sh swapquad  # SWAP_ONTO_QUAD (RESULTS.md, eighty-fourth session: on
#       at 64 since): the 20 sizes of two fresh CPU draws of 6000 (seeds 20261212 and 20261213) where
#       the rule, on at 64 steps, changed the route (fp16 and bf16), with the rule off (None) beside it
#   bash benchmarks/run_pending_checks.sh quadlo  # SWAP_ONTO_QUAD's GPU tests, then the 14 sizes of
#       four CPU draws of 6000 (seeds 20261214-20261217) where the rule from 16 steps in place of 64
#       changed the route (33-60 steps; RESULTS.md, eighty-fourth session, ran them at 64 beside 16):
#       the rule (on from 32) beside it off
#   bash benchmarks/run_pending_checks.sh quadwide  # SWAP_ONTO_QUAD_WIDE: the 18 sizes of a CPU draw
#       of 6000 (seed 20261224, every other one of the first 36 in draw order) where the rule on at
#       32 steps changes the route, fp16 and bf16 (RESULTS.md, eighty-fourth session, ran them with
#       the rule off beside it at 32; on since): the rule beside it off
#   bash benchmarks/run_pending_checks.sh boxes   # ROW_MAJOR_BOXES as committed (224 gives way only
#       to 192 or 256): its GPU tests and the transposed-product ones, then 20 sizes of a fresh CPU
#       draw of 6000 (seed 20261236) where it changes a caller's route (50 of 6000), fp16 and bf16,
#       beside the rule off (run in RESULTS.md's eighty-sixth session: 33 passed, ahead on 18 of 20)
#   bash benchmarks/run_pending_checks.sh cublasmp  # cuBLASMp (benchmarks/cublasmp_bench.py; the
#       nvidia-cublasmp-cu13 0.7.0 wheel in .whl) on every GPU of the host at 16384³ and 32768³,
#       beside the one-GPU cuBLAS anchor: its first run anywhere (a 1 x 1 grid on one GPU)
# Wheels (benchmarks/split_wheels.sh): typed, typed2, wave1, single4, rows3, rowsq, rowsr, ladder, draws, leads, swap64, pad192, q256, duo, swapquad, quadlo, quadwide, boxes and cublasmp carry .whl
# alone; suite, table and staged start GPU clusters and carry .whl and .whl-ucx.
# The census rows through census_study.sh's census_study: every launch cold, in turns with
# cuBLAS, every output checked against float64 on sampled rows; full outputs under $OUT.
set -o pipefail
[[ "${1:-}" =~ ^(suite|table|typed|typed2|wave1|single4|rows3|rowsq|rowsr|draws|staged|ladder|cublasmp|leads|swap64|pad192|q256|duo|swapquad|quadlo|quadwide|boxes)$ ]] || { echo "usage: $0 suite|table|typed|typed2|wave1|single4|rows3|rowsq|rowsr|draws|staged|ladder|cublasmp|leads|swap64|pad192|q256|duo|swapquad|quadlo|quadwide|boxes" >&2; exit 2; }
if [[ $1 == ladder ]]; then  # each tree forward and back once (ROUNDS=1), within one device call
  SHAPES="8192x8192x256 4096x4096x512 16384x8192x256 6144x6144x384 8192x8192x8192 4096x4096x4096"
  SHAPES+=" 1408x1536x16384 64x8192x8192 896x2432x8192 1024x2112x8192 256x256x65536 944x5144x6400 7088x712x7872"
  TESTS="staged or tma or columns or swap or pingpong or out_buffers or exact or split_n or wide or beta or alpha"
  TESTS+=" or cluster_streamk or sk_ways"
  SHAPES=$SHAPES TESTS=$TESTS TESTS_TIMEOUT=150 ROUNDS=1 CENSUS_ARGS=--caller \
    exec bash "$(dirname "$0")/trees_in_turns.sh" run
fi
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study
issue4_table() {
  echo "== issue 4's table"
  DTYPES="float16 bfloat16" SHAPES="8192x8192x8192 4096x4096x4096 896x2432x8192 1024x2112x8192 1408x1536x16384 256x256x65536
    64x8192x8192 8192x8192x256" STUDY_TIMEOUT=120 census_study table --caller --scrub
}
# rule_tests TAG SECONDS EXPR: tests/test_hopper.py's GPU tests that -k EXPR selects, the summary printed
rule_tests() {
  timeout "$2" python3 -m pytest -q -m gpu -p no:cacheprovider -n 12 -rfs tests/test_hopper.py -k "$3" \
    >"$OUT/pytest-$1.log" 2>&1
  tail -4 "$OUT/pytest-$1.log"
}
# rule_draw TAG CONSTANT HOW_MANY [VALUE]: the caller's $SHAPES (sizes a CPU draw found where CONSTANT
# changes the route, HOW_MANY of the draw), fp16 and bf16, beside the rule off (--prior); with VALUE,
# the sizes are where CONSTANT at VALUE in place of its value now changes the route: beside it at VALUE
rule_draw() {
  if [[ -z ${4:-} ]]; then
    echo "== $2 on sizes drawn where it changes the route (sim: $3), beside the rule off"
  else
    echo "== $2 at $4 on sizes drawn where that changes the route (sim: $3), beside the heuristic's value"
  fi
  DTYPES="float16 bfloat16" census_study "$1" --caller --scrub --prior "$2=${4:-None}"
}
echo "commit $(cat .whl/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
if [[ $1 == table ]]; then
  if [[ ${SUITE:-1} != 0 ]]; then  # SUITE=0: the table alone
    echo "== the whole GPU suite"
    timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider -n 14 -rfs >"$OUT/pytest-suite.log" 2>&1
    tail -15 "$OUT/pytest-suite.log"
  fi
  issue4_table
elif [[ $1 == typed ]]; then
  issue4_table
  echo "== 24 sizes as a user types them (seed 20261241), as a caller gets them"
  SHAPES="312x4624x3624 4872x7032x8584 7256x3848x464 792x5112x4880 4864x1512x3008 12312x5528x272
    12328x12456x5440 10688x2032x2640 5368x7800x648 288x12968x1800 1384x2920x3352 408x1696x5648
    792x1560x9712 6168x2352x576 1168x2136x2008 2320x7712x344 2248x480x6048 2248x1312x8544
    2264x5696x2096 5824x8760x10832 424x3512x11288 12656x14352x616 1200x1280x2824 496x9528x4400" \
    DTYPES="float16 bfloat16" STUDY_TIMEOUT=200 census_study t86 --caller --scrub
elif [[ $1 == typed2 ]]; then
  echo "== 24 sizes as a user types them (seed 20261289), as a caller gets them"
  SHAPES="2720x1648x2272 1600x9728x336 2328x11840x4728 1104x424x8680 1552x1624x15384 10528x416x9560
    3248x8072x8240 3592x400x5512 1080x6128x1680 528x4056x7304 10664x544x15408 1928x2096x4256 2416x4288x312
    2176x1832x3968 704x3840x4944 1024x4488x2376 6672x936x7136 14992x1616x2984 11352x1032x4536
    2560x11744x14144 12848x2480x1568 3208x5392x8520 1320x13568x2520 832x912x5840" \
    DTYPES="float16 bfloat16" STUDY_TIMEOUT=200 census_study t89 --caller --scrub
elif [[ $1 == single4 ]]; then
  echo "== q128 beside single CTAs over four tile columns (seed 20261303)"
  SHAPES="4960x480x2424 4512x424x2144 4504x488x15864 5536x416x9864 4568x400x2784 2416x480x2376
    9144x416x3336 3936x496x11832" DTYPES="float16 bfloat16" STUDY_TIMEOUT=90 census_study single4 --caller \
    --scrub --variant q128:policy=static,tile_n=128,stages=6,cluster_m=2,cluster_n=2
elif [[ $1 == wave1 ]]; then
  echo "== 1 x 2 clusters of 128 x 256 (c12) beside one wave of static single CTAs"
  SHAPES="1384x2920x3352 368x9592x14352 360x10240x3152 264x10552x928 632x6040x4400 688x4544x4680
    544x6536x14832 592x6296x1152 808x4584x1024 608x5664x2784 3192x1024x9544" \
    DTYPES="float16 bfloat16" STUDY_TIMEOUT=150 census_study wave1 --caller --scrub \
    --variant c12:policy=static,tile_n=256,stages=4,cluster_m=1,cluster_n=2
elif [[ $1 == rows3 ]]; then
  echo "== ROWS_QUAD: GPU tests"
  rule_tests rows3 90 "rows_quad"
  echo "== ROWS_QUAD=(3,) (auto-prior) and static 2 x 2 clusters of 128 x 256 (q256) beside stream-K"
  echo "   single CTAs (auto), three tile rows over B's rows off 128-byte lines (seed 20261244)"
  SHAPES="368x13512x8480 288x12744x1176 328x13192x1816 344x12456x2872 288x11696x1112 296x13008x3976
    336x6448x14080 376x11784x3784 312x8520x2712 304x13416x6744 328x6408x15832 304x13208x2936" \
    DTYPES="float16 bfloat16" STUDY_TIMEOUT=200 census_study rows3 --caller --scrub --prior "ROWS_QUAD=(3,)" \
    --variant q256:policy=static,tile_n=256,stages=4,cluster_m=2,cluster_n=2
  echo "== ROWS_QUAD=(2, 5, 7) (auto-prior) beside the caller (auto): two, five and seven tile rows, fp16"
  echo "   (seed 20261250, four sizes each where that changes the route)"
  SHAPES="216x9368x7912 240x9176x6760 200x9672x6872 232x9784x14520 600x8304x13632 632x6824x9880
    528x7504x1072 608x6840x1896 832x4784x1360 896x4744x11960 856x5128x1168 872x5072x10352" \
    STUDY_TIMEOUT=150 census_study rowsx --caller --scrub --prior "ROWS_QUAD=(2, 5, 7)"
elif [[ $1 == rowsq ]]; then
  echo "== ROWS_QUAD: GPU tests"
  rule_tests rowsq 90 "rows_quad"
  SHAPES="376x13936x4456 264x13048x1560 360x11600x3792 304x13776x6776 336x13560x12184 384x13136x13400
    360x11536x3072 368x14096x8304 256x9376x10384 216x9616x15536 224x9384x13592 248x9104x13832 216x9544x15248
    216x8712x9552 232x9176x13544 248x9000x6408" STUDY_TIMEOUT=240 rule_draw rowsq ROWS_QUAD "8 and 8 of 221 and 1220"
elif [[ $1 == rowsr ]]; then
  SHAPES="368x6280x10040 336x11672x5568 280x13264x6968 336x11272x1728 272x13224x1160 280x12768x11736
    352x12192x1336 336x11808x3624 216x8784x10216 224x9640x7856 216x9120x7536 216x9696x12728 208x9352x11304
    248x8968x15224" STUDY_TIMEOUT=220 rule_draw rowsr ROWS_QUAD "8 and 6 of 297 and 1205"
elif [[ $1 == suite ]]; then
  echo "== the whole GPU suite"
  timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -n 14 -rfs >"$OUT/pytest-suite.log" 2>&1
  tail -15 "$OUT/pytest-suite.log"
  echo "== examples/local_cuda.py"
  MGEMM_EXAMPLE_N=4096 timeout 90 python3 examples/local_cuda.py >"$OUT/example.log" 2>&1
  tail -12 "$OUT/example.log"
elif [[ $1 == leads ]]; then
  echo "== 64-row tiles 256 wide (cuBLAS's tile there), stream-K and on 1 x 2 clusters"
  SHAPES="1024x2112x8192 1088x2048x8192 1024x2304x8192" DTYPES="float16 bfloat16" STUDY_TIMEOUT=120 \
    census_study m64 --caller --scrub --variant m64:tile_m=64,tile_n=256 \
    --variant m64c:tile_m=64,tile_n=256,cluster_n=2 --variant m64cs:tile_m=64,tile_n=256,cluster_n=2,policy=static \
    --variant m64pp:tile_m=64,tile_n=256,pingpong=1 \
    --variant m64s5:tile_m=64,tile_n=256,stages=5,out_cols=64 \
    --variant m64s5c:tile_m=64,tile_n=256,stages=5,out_cols=64,cluster_n=2
  echo "== 1 x 2 clusters on short-K static tiles"
  SHAPES="8192x8192x256 16384x8192x256 6144x6144x384 8192x4096x256 12288x12288x256" DTYPES="float16 bfloat16" \
    STUDY_TIMEOUT=120 census_study c12 --caller --scrub --variant c12:cluster_n=2
  issue4_table
elif [[ $1 == swap64 ]]; then
  echo "== the transposed route and 128-byte output chunks: GPU tests"
  rule_tests swap64 90 "swapped_product or five_stages or columns_epilogue or direct_64_row"
  SHAPES="2480x816x3120 2560x824x3112 2968x704x9920 928x2104x9264 2880x672x4136 1024x2112x8192" \
    STUDY_TIMEOUT=90 rule_draw swap64 SWAP_64_ROWS "5 of 12000"
elif [[ $1 == pad192 ]]; then
  SHAPES="1784x536x11056 1736x520x11544 624x2304x13600 1672x528x11848 1680x632x10064" \
    STUDY_TIMEOUT=90 rule_draw pad192 QUAD_SK_192_PAD "5 of 12000"
elif [[ $1 == q256 ]]; then
  echo "== QUAD_SK_256 and 256-wide stream-K over clusters: GPU tests"
  rule_tests q256 120 "quad_streamk_256 or (cluster_streamk_matches and 256)"
  SHAPES="5784x408x12248 888x2936x14432 5568x456x6504 256x11720x14048 720x4056x14032 1352x1800x14432
    480x5592x15280 1360x1800x6448 832x2808x8016 688x3384x8488 936x2920x6520 424x5816x8352" \
    STUDY_TIMEOUT=200 rule_draw q256 QUAD_SK_256 "21 of 6000"
elif [[ $1 == duo ]]; then
  echo "== stream-K over clusters: GPU tests"
  rule_tests duo 100 "quad_streamk_256 or cluster_streamk_matches"
  SHAPES="2216x6512x15128 1048x12272x11752 2872x3368x6992 1624x10464x5792 3832x2008x7120 11152x2032x8504
    1184x10696x5656 1600x7432x9104 5000x1304x6232 7272x1824x12376 8432x1552x9464 5360x3424x12968
    9608x1544x7176 10096x2080x14872 2072x3040x13200 13232x416x10184 1296x6392x6752" \
    STUDY_TIMEOUT=110 rule_draw duo DUO_SK_256 "145 of 6000" "(8, 80, 7)"
elif [[ $1 == swapquad ]]; then
  SHAPES="9688x584x12504 9800x552x9672 6432x808x15368 8896x1912x4088 13488x1048x10856 5736x2056x15288
    15168x296x9240 6552x776x12552 9768x632x4520 14824x1032x10776 9688x552x11304 7120x864x10376 9704x600x14696
    13920x856x6744 4456x1352x11400 9840x584x12600 7128x840x4248 9440x568x10184 10848x1080x7112 9048x536x6168" \
    STUDY_TIMEOUT=220 rule_draw swapquad SWAP_ONTO_QUAD "10 and 9 of 6000"
elif [[ $1 == quadlo ]]; then
  echo "== SWAP_ONTO_QUAD: GPU tests"
  rule_tests quadlo 150 "onto_quad or swapped_product"
  SHAPES="5848x2072x2584 6736x856x3416 9688x1544x2472 11632x1384x2920 7216x1640x2120 3768x1568x2168
    10192x1608x2120 9048x1352x3592 6776x776x2056 9416x592x2504 5856x2160x2056 6224x2664x3832 4336x2912x2728
    14272x792x2776" STUDY_TIMEOUT=200 rule_draw quadlo SWAP_ONTO_QUAD "14 of 24000, 33-60 steps"
elif [[ $1 == quadwide ]]; then
  SHAPES="1288x1736x2664 2776x1080x5216 2160x1272x14456 5024x2296x4552 2848x1040x4432 3896x1640x2072
    8000x3632x2920 4696x760x10480 3312x760x3240 1936x1688x3040 1440x1544x2136 10184x624x9976
    1352x1752x3496 3480x568x3880 1864x11480x6624 4520x696x13808 9512x2600x8352 2656x1248x11920" \
    STUDY_TIMEOUT=240 rule_draw quadwide SWAP_ONTO_QUAD_WIDE "45 and 65 of 6000"
elif [[ $1 == boxes ]]; then
  echo "== ROW_MAJOR_BOXES: GPU tests"
  rule_tests boxes 120 "row_major_b or onto_quad or swapped_product"
  SHAPES="4376x4032x12264 384x9192x7952 608x5768x13248 1280x5568x6312 1384x5312x3304 536x5736x3352
    1992x8512x2832 288x9120x5488 984x3136x2264 1704x1984x5136 264x9680x6016 328x9352x2480 320x8520x15736
    3416x3136x3224 1536x11520x6168 1392x5376x4360 7616x2432x5704 1208x5056x2496 376x9048x2392 328x9392x5400" \
    STUDY_TIMEOUT=240 rule_draw boxes ROW_MAJOR_BOXES "50 of 6000"
elif [[ $1 == cublasmp ]]; then
  nvidia-smi topo -m | head -n 4
  timeout 120 python3 benchmarks/cublas_one_gpu.py --n 16384 32768 --dtypes float32,float16,bfloat16 \
    --repeat 5 --json "$OUT/rows.jsonl"
  timeout 300 python3 benchmarks/cublasmp_bench.py --n 16384 32768 --dtypes float32,float16,bfloat16 \
    --block 2048 8192 --repeat 5 --timeout 280 --json "$OUT/rows.jsonl" 2>&1 | tail -30
elif [[ $1 == staged ]]; then
  echo "== the staged GPU tests"
  timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_gpu.py tests/test_staged.py \
    tests/test_emulate.py -k "stage or staged or pinned or end_to_end or numpy_chunks_emulated" \
    2>&1 | tail -4
  echo "== staged_probe.py"
  timeout 90 python3 benchmarks/staged_probe.py --reps 3 --threads 8
  echo "== host_inputs.py, one GPU: float32 and float64 beside cuBLASXt and dask-cuda's way;"
  echo "   bfloat16 through the pinned buffers against CuPy's copies (mgemm-cupy)"
  timeout 300 python3 benchmarks/host_inputs.py --size 32768 --dtypes float32,float64 --runs 3 \
    --xt-block 8192 --methods mgemm,dask,xt-pinned --protocol tcp 2>&1 | grep -v "UCX  WARN"
  timeout 150 python3 benchmarks/host_inputs.py --size 32768 --dtypes bfloat16 --runs 3 \
    --methods mgemm,mgemm-cupy,dask --trace --protocol tcp 2>&1 | grep -v "UCX  WARN"
else
  echo "== SK_256_CLUSTER_PAD, a draw where it changes a caller's launch"
  SHAPES="" DTYPES="float16 bfloat16" STUDY_TIMEOUT=130 census_study pad --caller --scrub \
    --prior "SK_256_CLUSTER_PAD=None" --typed 8 --seed 2026120695 --prior-differs
  echo "== narrow N: 256-wide stream-K priced against exact widths (prior: the rule off)"
  SHAPES="10632x432x4824 9920x488x7360 13360x280x7776" STUDY_TIMEOUT=70 census_study narrow \
    --caller --scrub --prior "SK_256_OVER_STATIC=None"
  issue4_table
fi
