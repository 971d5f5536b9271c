#!/usr/bin/env bash
# Compiles a representative set of persistent-GEMM variants (each dtype x each policy at the default
# tiles, plus every A/B layout; every tile the heuristic picks, with its knobs, output types and store
# forms) for sm_80 and sm_90a with nvcc, printing ptxas's resource report (registers, spills), and
# a few of them for sm_89, sm_100 and sm_120; the Hopper kernel for sm_90a.  Fails on any compile
# error, spill or stack frame (a register array in local memory).
set -euo pipefail
cd "$(dirname "$0")/../kernels"
NVCC=${NVCC:-nvcc}
ARCHS=(-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a)  # one cubin each
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The default tile of each input type (keep in step with mgemm/kernels.py: DEFAULT_TILES).
declare -A TILE=(
  [MGEMM_F16]="128 128 32 4 2 2"
  [MGEMM_BF16]="128 128 32 4 2 2"
  [MGEMM_TF32]="128 128 16 4 2 2"
  [MGEMM_F64]="128 64 16 3 2 2"
  [MGEMM_F32]="64 128 8 3 2 2"
)
declare -A OUTPUT=([MGEMM_F16]=MGEMM_F16 [MGEMM_BF16]=MGEMM_BF16 [MGEMM_TF32]=MGEMM_F32
                   [MGEMM_F64]=MGEMM_F64 [MGEMM_F32]=MGEMM_F32)

variants=()
for input in MGEMM_F16 MGEMM_BF16 MGEMM_TF32 MGEMM_F64 MGEMM_F32; do
  for policy in PER_TILE STATIC DYNAMIC STREAMK; do
    variants+=("$input $policy 1 0")
  done
  for layout in "0 0" "1 1" "0 1"; do
    variants+=("$input STREAMK $layout")
  done
done
# The opt-in tensor-core knobs (mgemm/kernels.py: swizzle, fast_copy, frag_carry, min_blocks; the
# GPU tests' KNOB_VARIANTS), in every operand layout.  Fields: input policy a b tile(m_n_k_s_wm_wn|-)
# then -D flags.
for layout in "1 0" "0 1" "0 0" "1 1"; do
  variants+=("MGEMM_F16 STREAMK $layout - -DMGEMM_SWIZZLE=1"
             "MGEMM_BF16 STATIC $layout 128_128_64_3_2_2 -DMGEMM_SWIZZLE=1"
             "MGEMM_F16 STREAMK $layout 64_256_32_4_1_4 -DMGEMM_SWIZZLE=1"
             "MGEMM_F16 STATIC $layout - -DMGEMM_FAST_COPY=1"
             "MGEMM_F16 STREAMK $layout - -DMGEMM_FRAG_CARRY=1"
             "MGEMM_F16 STATIC $layout - -DMGEMM_SWIZZLE=1 -DMGEMM_FAST_COPY=1 -DMGEMM_FRAG_CARRY=1"
             "MGEMM_BF16 STREAMK $layout 128_128_64_4_2_2 -DMGEMM_SWIZZLE=1 -DMGEMM_FAST_COPY=1 -DMGEMM_FRAG_CARRY=1"
             "MGEMM_F16 STATIC $layout 128_128_32_4_2_4 -DMGEMM_MIN_BLOCKS=2"
             "MGEMM_F64 STREAMK $layout - -DMGEMM_FAST_COPY=1"
             "MGEMM_TF32 STATIC $layout - -DMGEMM_FAST_COPY=1")
done

# The heuristic's float16/bfloat16 tiles with the knobs it turns on (mgemm/kernels.py: TILE_CHOICES,
# TILE_KNOBS).
KNOBS="-DMGEMM_SWIZZLE=1 -DMGEMM_FAST_COPY=1 -DMGEMM_FRAG_CARRY=1"
for tile in 256_128_32_4_4_2 128_128_32_6_2_2 64_128_32_4_2_2; do
  variants+=("MGEMM_F16 STATIC 1 0 $tile $KNOBS" "MGEMM_BF16 STREAMK 1 0 $tile $KNOBS")
done
variants+=("MGEMM_F16 DYNAMIC 0 1 256_128_32_4_4_2 $KNOBS" "MGEMM_BF16 PER_TILE 1 1 256_128_32_4_4_2 $KNOBS")
# one CTA per tile in one wave, the heuristic's policy there for 16-bit inputs (PER_TILE_IN_ONE_WAVE)
variants+=("MGEMM_F16 PER_TILE 1 0 64_128_32_4_2_2 $KNOBS" "MGEMM_BF16 PER_TILE 1 0 128_128_32_6_2_2 $KNOBS")
# the epilogue's other forms (mgemm/kernels.py STORE_FORMS; the default is paired stores, or one
# element at a time for float32 SIMT): C read, and element stores for layouts that do not pair
S=-DMGEMM_STORES=MGEMM_STORES
variants+=("MGEMM_F16 STATIC 1 0 64_128_32_4_2_2 $KNOBS ${S}_PAIRS_C" "MGEMM_BF16 STREAMK 0 1 - ${S}_ELEMENTS"
           "MGEMM_F16 PER_TILE 1 1 256_128_32_4_4_2 $KNOBS ${S}_ELEMENTS_C" "MGEMM_F64 STREAMK 1 0 - ${S}_PAIRS_C"
           "MGEMM_F64 STATIC 0 0 - ${S}_ELEMENTS_C" "MGEMM_TF32 DYNAMIC 1 0 - ${S}_ELEMENTS"
           "MGEMM_F32 STREAMK 1 0 - ${S}_ELEMENTS_C")
# The heuristic's 16-bit tiles writing float32 (split blocks' partials, out_dtype="float32") in
# every store form, the two inputs, layouts and policies in turn; its other tiles of tf32, float64
# and float32 (TILE_CHOICES), two forms each.  Fields as above, then the output (default: as
# OUTPUT below).
i=0
LAYOUTS=("1 0" "0 1" "0 0" "1 1")
POLICIES=(STATIC STREAMK PER_TILE DYNAMIC)
for tile in 256_128_32_4_4_2 128_128_32_6_2_2 64_128_32_4_2_2; do
  for form in PAIRS PAIRS_C ELEMENTS ELEMENTS_C; do
    input=$([[ $((i % 2)) == 0 ]] && echo MGEMM_F16 || echo MGEMM_BF16)
    variants+=("$input ${POLICIES[i % 4]} ${LAYOUTS[i % 4]} $tile $KNOBS ${S}_$form -DMGEMM_OUTPUT=MGEMM_F32")
    i=$((i + 1))
  done
done
variants+=("MGEMM_TF32 STREAMK 1 0 64_128_32_3_2_2 ${S}_PAIRS" "MGEMM_TF32 PER_TILE 0 1 64_128_32_3_2_2 ${S}_ELEMENTS_C"
           "MGEMM_F64 STATIC 1 1 64_64_16_3_2_2 ${S}_PAIRS_C" "MGEMM_F64 DYNAMIC 0 0 64_64_16_3_2_2 ${S}_ELEMENTS"
           "MGEMM_F32 STATIC 1 0 128_128_8_3_4_2 ${S}_ELEMENTS" "MGEMM_F32 STREAMK 0 1 128_128_8_3_4_2 ${S}_ELEMENTS_C")

compile() {  # input policy a_k_major b_k_major [tile (m_n_k_stages_wm_wn, - for the default) [-D...]]
  local input=$1 policy=$2 ak=$3 bk=$4 tile=${5:--}
  local extra=("${@:6}") output e flags=()
  output=${OUTPUT[$input]}
  for e in "${extra[@]}"; do  # -DMGEMM_OUTPUT=... in the extras replaces the input's default
    if [[ $e == -DMGEMM_OUTPUT=* ]]; then output=${e#-DMGEMM_OUTPUT=}; else flags+=("$e"); fi
  done
  if [[ $tile == - ]]; then read -r tm tn tk st wm wn <<<"${TILE[$input]}"
  else IFS=_ read -r tm tn tk st wm wn <<<"$tile"; fi
  local name="${input#MGEMM_}_${policy}_a${ak}_b${bk}"
  if [[ $tile != - || ${#extra[@]} -gt 0 ]]; then
    name+="_${tile}$(printf '%s' "${extra[@]}" | sed 's/-DMGEMM_//g; s/=1//g' | tr -c 'A-Za-z0-9_\n' _)"
  fi
  local log="$out/$name.log" arch
  : >"$log"
  for arch in "${ARCHS[@]}"; do
  if ! "$NVCC" -std=c++17 -cubin "$arch" -Xptxas -v -o "$out/$name.cubin" \
      -DMGEMM_INPUT="$input" -DMGEMM_OUTPUT="$output" \
      -DMGEMM_POLICY="MGEMM_POLICY_$policy" -DMGEMM_A_K_MAJOR="$ak" -DMGEMM_B_K_MAJOR="$bk" \
      -DMGEMM_TILE_M="$tm" -DMGEMM_TILE_N="$tn" -DMGEMM_TILE_K="$tk" -DMGEMM_STAGES="$st" \
      -DMGEMM_WARPS_M="$wm" -DMGEMM_WARPS_N="$wn" "${flags[@]}" gemm_persistent.cu >>"$log" 2>&1; then
    echo "FAILED: $name ($arch)"; cat "$log"; return 1
  fi
  done
  # One line per arch: registers, spills.
  awk -v n="$name" '/Compiling entry/ {arch=$NF} /spill/ {sp=$0} /Used/ {sub(/.*Used /,""); print n, arch, $0, "|", sp}' "$log" \
    | sed 's/ptxas info    : Function properties for mgemm_gemm//'
  if grep -E '[1-9][0-9]* bytes (spill stores|spill loads|stack frame)' "$log" >/dev/null; then
    echo "SPILLS or local-memory arrays in $name"; return 1
  fi
}

export -f compile
jobs_max=${JOBS:-$(nproc)}
run_all() {  # function ext variant...: each variant through the function, $jobs_max at a time, its
  # report in $out/<variant>.ext; the reports printed; 1 if any failed
  local fn=$1 ext=$2 v p status=0 pids=()
  shift 2
  rm -f "$out"/*."$ext"
  for v in "$@"; do
    # shellcheck disable=SC2086
    "$fn" $v >"$out/$(echo "$v" | tr -c 'A-Za-z0-9\n' _).$ext" 2>&1 &
    pids+=($!)
    if (( ${#pids[@]} >= jobs_max )); then
      wait "${pids[0]}" || status=1
      pids=("${pids[@]:1}")
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  cat "$out"/*."$ext"
  return $status
}
compile_all() { run_all compile report "$@"; }  # variant...: for ${ARCHS[@]}
compile_all "${variants[@]}" || { echo "compile-kernels: FAILED"; exit 1; }
echo "compile-kernels: ${#variants[@]} variants x 2 archs OK"

# The GPUs after these two, where mgemm runs the portable kernel (NVRTC builds it for the GPU's own
# sm_XY: mgemm/kernels.py compile_options): Ada (sm_89), Blackwell's data-centre (sm_100) and
# desktop (sm_120) parts.  Each input type at its default tile, the heuristic's 16-bit tiles with
# their knobs, a float32 output of 16-bit inputs; the same report and failures.
PORTABLE_ARCHS=("${ARCHS[@]}")
NEWER_ARCHS=(-gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_100,code=sm_100
             -gencode=arch=compute_120,code=sm_120)
ARCHS=("${NEWER_ARCHS[@]}")
newer=()
for input in MGEMM_F16 MGEMM_BF16 MGEMM_TF32 MGEMM_F64 MGEMM_F32; do newer+=("$input STREAMK 1 0"); done
for tile in 256_128_32_4_4_2 128_128_32_6_2_2 64_128_32_4_2_2; do newer+=("MGEMM_F16 STATIC 1 0 $tile $KNOBS"); done
newer+=("MGEMM_BF16 DYNAMIC 0 1 128_128_32_6_2_2 $KNOBS ${S}_PAIRS_C -DMGEMM_OUTPUT=MGEMM_F32")
compile_all "${newer[@]}" || { echo "compile-kernels: FAILED (sm_89, sm_100, sm_120)"; exit 1; }
echo "compile-kernels: ${#newer[@]} variants x 3 newer archs (sm_89, sm_100, sm_120) OK"
ARCHS=("${PORTABLE_ARCHS[@]}")

# Hopper GEMM (gemm_hopper.cu), sm_90a only: each input x policy at 128x128 s4, plus the heuristic's
# tiles (mgemm/hopper_heuristic.py: TILE_CHOICES), the narrowest, the MN-major operand layouts (16-bit:
# A column-major and/or B row-major) at each tile width, pingpong consumers, a register split,
# clusters (2 or 4 CTAs along M: B multicast; 2 along N: A multicast), the staged and TMA-store
# epilogues (cooperative and pingpong), the columns epilogue, the spread stream-K fix-up, K in parts,
# the timeline and cooperative 64-row tiles split along N.
# Same report; fails on errors, spills and any ptxas warning or performance note (C7508: setmaxnreg
# ignored; C75xx: wgmma serialized).
hopper_compile() {  # input output tile_n stages policy [a_k_major b_k_major [extra -D...]]
  local ak=${6:-1} bk=${7:-1}
  local name="hopper_${1#MGEMM_}_n$3_s$4_$5_a${ak}b${bk}${8:+_$(echo "${*:8}" | tr -c 'A-Za-z0-9\n' _)}" log
  log="$out/$name.log"
  if ! "$NVCC" -std=c++17 -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o "$out/$name.cubin" \
      -DMGEMM_INPUT="$1" -DMGEMM_OUTPUT="$2" -DMGEMM_TILE_N="$3" -DMGEMM_STAGES="$4" \
      -DMGEMM_POLICY="MGEMM_POLICY_$5" -DMGEMM_A_K_MAJOR="$ak" -DMGEMM_B_K_MAJOR="$bk" "${@:8}" \
      gemm_hopper.cu >"$log" 2>&1; then
    echo "FAILED: $name"; cat "$log"; return 1
  fi
  awk -v n="$name" '/spill/ {sp=$0} /Used/ {sub(/.*Used /,""); print n, "sm_90a", $0, "|", sp}' "$log"
  if grep -E '[1-9][0-9]* bytes (spill stores|spill loads|stack frame)|C7508|C75[0-9][0-9]|Potential Performance Loss|warning' "$log" >/dev/null; then
    echo "SPILLS, local memory, ignored setmaxnreg or serialized wgmma in $name"; cat "$log"; return 1
  fi
}
hvariants=()
for io in "MGEMM_F16 MGEMM_F16" "MGEMM_BF16 MGEMM_BF16" "MGEMM_TF32 MGEMM_F32"; do
  for policy in PER_TILE STATIC DYNAMIC STREAMK; do hvariants+=("$io 128 4 $policy"); done
done
hvariants+=("MGEMM_BF16 MGEMM_BF16 256 4 STREAMK" "MGEMM_F16 MGEMM_F16 128 6 STATIC"
            "MGEMM_BF16 MGEMM_F32 64 2 DYNAMIC" "MGEMM_TF32 MGEMM_F32 256 4 STREAMK"
            "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0" "MGEMM_F16 MGEMM_F16 128 6 STREAMK 0 0"
            "MGEMM_BF16 MGEMM_F32 64 2 DYNAMIC 0 1" "MGEMM_F16 MGEMM_F32 256 4 PER_TILE 0 0"
            "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_DIRECT"
            # pingpong consumers (one warpgroup per tile): 64 x 256 and 128 x 128 (two m64 wgmmas)
            "MGEMM_BF16 MGEMM_BF16 256 5 STATIC 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64"
            "MGEMM_F16 MGEMM_F16 128 6 STREAMK 0 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=128"
            "MGEMM_TF32 MGEMM_F32 64 4 DYNAMIC 1 1 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=128"
            "MGEMM_BF16 MGEMM_F32 128 4 PER_TILE 1 1 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64"
            # setmaxnreg 24 / 240 (static: the producer's stream-K arithmetic spills at 24)
            "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_PRODUCER_REGS=24 -DMGEMM_CONSUMER_REGS=240"
            # 2-CTA clusters with B multicast (static / per_tile; B K-major and MN-major halves)
            "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_CLUSTER_M=2"
            "MGEMM_F16 MGEMM_F16 128 6 PER_TILE 0 0 -DMGEMM_CLUSTER_M=2"
            "MGEMM_TF32 MGEMM_F32 128 4 STATIC 1 1 -DMGEMM_CLUSTER_M=2"
            "MGEMM_BF16 MGEMM_F32 256 4 PER_TILE 1 1 -DMGEMM_CLUSTER_M=2"
            # clusters of 4 (B in quarters) and along N (A multicast too), each operand layout
            "MGEMM_F16 MGEMM_F16 256 4 STATIC 1 0 -DMGEMM_CLUSTER_M=4"
            "MGEMM_BF16 MGEMM_BF16 128 6 STATIC 1 1 -DMGEMM_CLUSTER_M=4"
            "MGEMM_F16 MGEMM_F16 128 6 STATIC 1 0 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2"
            "MGEMM_F16 MGEMM_F16 256 4 PER_TILE 0 0 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2"
            "MGEMM_TF32 MGEMM_F32 128 4 STATIC 1 1 -DMGEMM_CLUSTER_N=2"
            "MGEMM_F16 MGEMM_F16 256 4 STATIC 1 0 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            # stream-K over tile blocks and clusters: the heuristic's 2 x 2 (QUAD_SK: owner, and
            # spread on one or two blocks), pairs along M and N, tf32
            "MGEMM_F16 MGEMM_F16 128 6 STREAMK 1 0 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 128 6 STREAMK 1 0 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 256 4 STREAMK 0 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD"
            "MGEMM_BF16 MGEMM_F32 128 6 STREAMK 1 1 -DMGEMM_CLUSTER_N=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_TF32 MGEMM_F32 128 4 STREAMK 1 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2"
            # the staged epilogue (16-byte stores through shared memory), at each tile width
            "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 128 6 STREAMK 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_TF32 MGEMM_F32 128 4 DYNAMIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F32 64 2 PER_TILE 0 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_CLUSTER_M=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            # ... and with pingpong consumers: the heuristic's thin tile (THIN_TILE: 64 x 64 s12)
            # and a 128-row pingpong tile (two row blocks through one warpgroup's buffer)
            "MGEMM_F16 MGEMM_F16 64 12 STATIC 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_TF32 MGEMM_F32 64 12 STREAMK 1 1 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 128 6 DYNAMIC 0 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=128 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            # the spread stream-K fix-up (every contributor adds a share of a split tile)
            "MGEMM_BF16 MGEMM_BF16 128 6 STREAMK 1 0 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_TF32 MGEMM_F32 256 4 STREAMK 1 1 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD"
            "MGEMM_F16 MGEMM_F16 128 6 STATIC 1 0 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD"
            # two accumulator sets, each tile's epilogue under the next unit's first wgmmas
            # (OVERLAP): 128 wide with TMA stores, 192 wide staged, 64-row split tiles, a cluster
            "MGEMM_F16 MGEMM_F16 128 4 STATIC 1 0 -DMGEMM_OVERLAP=1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_BF16 MGEMM_BF16 192 4 DYNAMIC 1 1 -DMGEMM_OVERLAP=1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_TF32 MGEMM_F32 256 4 PER_TILE 1 1 -DMGEMM_OVERLAP=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 128 6 STATIC 0 0 -DMGEMM_OVERLAP=1 -DMGEMM_CLUSTER_M=2"
            # K held as several parts (a block task's chunks), one descriptor pair each
            "MGEMM_F16 MGEMM_F16 256 4 STATIC 1 0 -DMGEMM_K_PARTS=4 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_F32 128 6 STREAMK 0 0 -DMGEMM_K_PARTS=8"
            "MGEMM_F16 MGEMM_F16 256 4 STATIC 1 0 -DMGEMM_K_PARTS=2 -DMGEMM_CLUSTER_M=2"
            # the TMA-store epilogue (staged boxes out through bulk tensor stores): cooperative,
            # spread fix-up, 2-CTA clusters, float32 output, pingpong thin tile; the heuristic's
            # short-K configs (TMA stores; 4 stages for K <= 256; the thin tile, static)
            "MGEMM_F16 MGEMM_F16 128 6 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_F16 MGEMM_F16 128 4 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_BF16 MGEMM_BF16 64 12 STATIC 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            # two staging buffer sets (OUT_BUFFERS 2, odd chunks through the second; opt-in):
            # 128x256 TMA tiles on 3 stages, on 2 x 2 clusters, stream-K, pingpong, float32 output
            "MGEMM_F16 MGEMM_F16 256 3 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_OUT_BUFFERS=2"
            "MGEMM_BF16 MGEMM_BF16 256 3 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_OUT_BUFFERS=2 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2"
            "MGEMM_F16 MGEMM_F16 256 3 STREAMK 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_OUT_BUFFERS=2"
            "MGEMM_BF16 MGEMM_BF16 256 4 DYNAMIC 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_OUT_BUFFERS=2"
            "MGEMM_TF32 MGEMM_F32 128 4 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_OUT_BUFFERS=2"
            # tile widths of odd multiples of 32 (B in whole 64-wide boxes, staged rows rotated):
            # the heuristic's 128x224 (CHEAPEST_WIDTHS), 160 with the spread fix-up,
            # the narrow products' static 160 (NARROW_WIDTHS), tf32 96 with TMA stores
            "MGEMM_F16 MGEMM_F16 224 4 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 160 4 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 224 4 STATIC 0 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 160 5 STREAMK 1 0 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_TF32 MGEMM_F32 96 6 STREAMK 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            # ... in clusters with a K-major B (each CTA its share of the tile's rows of B^T)
            "MGEMM_F16 MGEMM_F16 160 4 STATIC 1 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 192 4 STREAMK 0 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 224 4 PER_TILE 1 1 -DMGEMM_CLUSTER_M=4 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_TF32 MGEMM_F32 160 4 STATIC 1 1 -DMGEMM_CLUSTER_M=2"
            # the timeline (debug: ns stamps per unit, mgemm.timeline)
            "MGEMM_F16 MGEMM_F16 128 6 STREAMK 1 0 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_TIMELINE=1"
            # ... of pingpong consumers (64 and 128 rows a warpgroup; stream-K's owner fix-up)
            "MGEMM_F16 MGEMM_F16 128 6 STREAMK 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_TIMELINE=1"
            "MGEMM_BF16 MGEMM_BF16 128 6 DYNAMIC 0 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=128 -DMGEMM_TIMELINE=1"
            # stream-K with whole tiles first (sk_waves=0: the launch's split only), 256 wide, owner
            "MGEMM_BF16 MGEMM_BF16 256 4 STREAMK 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 256 4 STREAMK 1 0 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_BF16 MGEMM_BF16 256 4 STATIC 1 0 -DMGEMM_CLUSTER_M=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_TF32 MGEMM_F32 128 4 DYNAMIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_F16 MGEMM_F16 64 12 STREAMK 1 0 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            # promoted accumulation (float32 emulated with bfloat16 pieces: mgemm/emulate.py):
            # windows of 1 and 4 k-iterations, K parts, stream-K, both operand layouts
            "MGEMM_BF16 MGEMM_F32 128 6 STREAMK 1 1 -DMGEMM_PROMOTE=1 -DMGEMM_K_PARTS=8"
            "MGEMM_BF16 MGEMM_F32 128 6 STATIC 0 0 -DMGEMM_PROMOTE=4 -DMGEMM_K_PARTS=8 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_BF16 MGEMM_F32 64 8 STREAMK 1 0 -DMGEMM_PROMOTE=2 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD"
            # 192-wide tiles (cooperative): promoted with float32 output, and 16-bit without
            "MGEMM_BF16 MGEMM_F32 192 4 STREAMK 1 1 -DMGEMM_PROMOTE=8 -DMGEMM_K_PARTS=8 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_F32 192 5 STREAMK 0 0 -DMGEMM_PROMOTE=8 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD"
            "MGEMM_F16 MGEMM_F16 192 5 STATIC 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_PAIR"
            "MGEMM_F16 MGEMM_F16 192 4 STREAMK 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 192 4 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_TF32 MGEMM_F32 192 4 DYNAMIC 1 1"
            # the columns epilogue (a column-major output: the transposed product, hopper.swap_pays)
            # at the widths the heuristic takes, float32 output, pingpong's thin tile
            "MGEMM_F16 MGEMM_F16 192 4 STREAMK 0 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            "MGEMM_BF16 MGEMM_BF16 128 6 STATIC 0 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            "MGEMM_F16 MGEMM_F16 224 4 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            "MGEMM_BF16 MGEMM_F32 160 4 STREAMK 0 0 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            "MGEMM_F16 MGEMM_F16 256 4 STATIC 0 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            "MGEMM_F16 MGEMM_F16 64 12 STATIC 0 1 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            # cooperative 64-row tiles split along N (each consumer warpgroup half the columns):
            # 64 x 256 and 64 x 128, each epilogue, both fix-ups, every operand layout, tf32
            "MGEMM_F16 MGEMM_F16 256 4 STATIC 1 0 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 256 4 STREAMK 0 1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            "MGEMM_F16 MGEMM_F16 256 4 STREAMK 1 0 -DMGEMM_TILE_M=64 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA"
            "MGEMM_BF16 MGEMM_F32 128 8 PER_TILE 0 0 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_PAIR"
            "MGEMM_F16 MGEMM_F16 128 8 DYNAMIC 1 1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_DIRECT"
            "MGEMM_TF32 MGEMM_F32 256 4 STREAMK 1 1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 256 4 STATIC 1 0 -DMGEMM_TILE_M=64 -DMGEMM_CLUSTER_M=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 256 4 STREAMK 1 0 -DMGEMM_TILE_M=64 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            # exact widths over a K-major B (odd multiples of 16: mgemm/hopper_heuristic.py EXACT_WIDTHS), each
            # with the stages the rule takes, both fix-ups, A column-major, a 2-CTA cluster, tf32,
            # the columns epilogue
            "MGEMM_F16 MGEMM_F16 144 5 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 176 4 STREAMK 0 1 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 208 4 STREAMK 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 240 3 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 176 4 STATIC 1 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_TF32 MGEMM_F32 144 4 DYNAMIC 1 1"
            "MGEMM_F16 MGEMM_F16 208 4 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            # wide tiles over a K-major B (mgemm/hopper_config.py WIDE_TILE_NS: two m64 blocks per
            # warpgroup, half the columns each), each width, stream-K, A column-major, clusters of
            # 2 and 4 along M, tf32, the columns epilogue (its default chunk, and 48 columns at a
            # time on four stages: OUT_COLS)
            "MGEMM_F16 MGEMM_F16 288 4 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_PAIR"
            "MGEMM_BF16 MGEMM_BF16 320 3 STREAMK 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_F16 MGEMM_F16 384 3 STREAMK 0 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED"
            "MGEMM_BF16 MGEMM_BF16 288 4 STREAMK 1 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_PAIR"
            "MGEMM_BF16 MGEMM_BF16 320 4 STATIC 1 1 -DMGEMM_CLUSTER_M=4 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_PAIR"
            "MGEMM_TF32 MGEMM_F32 288 3 DYNAMIC 1 1"
            "MGEMM_F16 MGEMM_F16 288 3 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS"
            "MGEMM_BF16 MGEMM_BF16 288 4 STREAMK 1 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS -DMGEMM_OUT_COLS=48"
            # trimmed binaries (mgemm/hopper.py trim_config): every tile split under the spread
            # fix-up (one CTA, 2 x 2 clusters, 64-wide halves on 1 x 2), and the output through
            # the staged, TMA or columns epilogue's own path (cooperative, wide, pingpong)
            "MGEMM_F16 MGEMM_F16 128 6 STREAMK 1 1 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED -DMGEMM_SPLIT_ONLY=1"
            "MGEMM_BF16 MGEMM_BF16 128 6 STREAMK 1 1 -DMGEMM_CLUSTER_M=2 -DMGEMM_CLUSTER_N=2 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED -DMGEMM_SPLIT_ONLY=1"
            "MGEMM_F16 MGEMM_F16 64 8 STREAMK 1 1 -DMGEMM_CLUSTER_N=2 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED -DMGEMM_SPLIT_ONLY=1"
            "MGEMM_F16 MGEMM_F16 128 4 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_PLAIN_OUT=1"
            "MGEMM_BF16 MGEMM_BF16 192 4 STREAMK 1 0 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED -DMGEMM_PLAIN_OUT=1"
            "MGEMM_F16 MGEMM_F16 288 3 STATIC 1 1 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_COLUMNS -DMGEMM_PLAIN_OUT=1"
            "MGEMM_F16 MGEMM_F16 64 12 STATIC 1 1 -DMGEMM_PINGPONG=1 -DMGEMM_TILE_M=64 -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_STAGED -DMGEMM_PLAIN_OUT=1"
            "MGEMM_TF32 MGEMM_F32 128 4 STREAMK 1 1 -DMGEMM_SK_REDUCE=MGEMM_SK_REDUCE_SPREAD -DMGEMM_EPILOGUE=MGEMM_EPILOGUE_TMA -DMGEMM_PLAIN_OUT=1")
run_all hopper_compile hreport "${hvariants[@]}" || { echo "compile-kernels (hopper): FAILED"; exit 1; }
echo "compile-kernels: ${#hvariants[@]} Hopper variants (sm_90a) OK"

# Their SASS, where nvdisasm is at hand (NVDISASM, or on PATH; .ci/run fetches the
# nvidia-cuda-nvdisasm wheel): every Hopper kernel multiplies with HGMMA, and a 2-CTA cluster
# kernel has GPU-scope memory barriers (MEMBAR.ALL.GPU) at its two cluster barriers only, setup and
# exit, and L1 invalidations (CCTL.IVALL) there and at most once more (the TMA-store epilogue's
# last wait): a stage release at cluster scope put a MEMBAR.ALL.GPU in front of every arrive, and
# the producer's wait at cluster scope two more CCTL.IVALL.
NVDISASM=${NVDISASM:-$(command -v nvdisasm || true)}
# A trimmed binary (SPLIT_ONLY, PLAIN_OUT) holds a fraction of the whole one's code: 700-2200
# SASS instructions against 6000-9700 on the heuristic's configs.
TRIMMED_MAX=4000
if [[ -n $NVDISASM && -x $NVDISASM ]]; then
  sass_bad=0 sass_n=0
  for cubin in "$out"/hopper_*.cubin; do
    sass=$("$NVDISASM" -c "$cubin") || { echo "nvdisasm failed on $cubin"; sass_bad=1; continue; }
    name=$(basename "$cubin" .cubin) sass_n=$((sass_n + 1))
    grep -q HGMMA <<<"$sass" || { echo "no HGMMA in $name"; sass_bad=1; }
    if [[ $name == *SPLIT_ONLY* || $name == *PLAIN_OUT* ]]; then  # the fallbacks are out
      count=$(grep -cE '^\s+/\*[0-9a-f]{4,}\*/' <<<"$sass" || true)
      echo "$name: $count instructions"
      (( count <= TRIMMED_MAX )) || { echo "$name: more than $TRIMMED_MAX instructions: not trimmed"; sass_bad=1; }
    fi
    if [[ $name == *CLUSTER_[MN]_2* ]]; then
      membar=$(grep -c "MEMBAR.ALL.GPU" <<<"$sass" || true) ivall=$(grep -c "CCTL.IVALL" <<<"$sass" || true)
      echo "$name: MEMBAR.ALL.GPU x$membar, CCTL.IVALL x$ivall"
      # stream-K's fix-up adds its own, once per split unit: a release (one MEMBAR.ALL.GPU) and
      # the acquires of its flag polls (two CCTL.IVALL), as in the one-CTA stream-K kernels
      sk=0; [[ $name == *_STREAMK_* ]] && sk=1
      (( membar <= 2 + sk && ivall <= 3 + 2 * sk )) ||
        { echo "memory barriers beyond the cluster barriers in $name"; sass_bad=1; }
    fi
  done
  if (( sass_bad )); then echo "compile-kernels (hopper SASS): FAILED"; exit 1; fi
  echo "compile-kernels: SASS of $sass_n Hopper variants: HGMMA in each; no memory barrier per stage in the cluster ones"
else
  echo "compile-kernels: nvdisasm not found: Hopper SASS check skipped"
fi

# The mma.sync ceiling microbenchmark (kernels/mma_peak.cu, benchmarks/mma_peak.py): float16 and
# bfloat16, fragments in registers or through ldmatrix, for both archs; no spills.
for bf16 in 0 1; do
  for ldm in 0 1; do
    for arch in "${ARCHS[@]}"; do
      log="$out/peak_${bf16}_${ldm}.log"
      if ! "$NVCC" -std=c++17 -cubin "$arch" -Xptxas -v -o "$out/peak.cubin" -DMGEMM_PEAK_BF16=$bf16 \
          -DMGEMM_PEAK_LDMATRIX=$ldm mma_peak.cu >"$log" 2>&1; then
        echo "FAILED: mma_peak bf16=$bf16 ldmatrix=$ldm ($arch)"; cat "$log"; exit 1
      fi
      if grep -E '[1-9][0-9]* bytes (spill stores|spill loads|stack frame)' "$log" >/dev/null; then
        echo "SPILLS in mma_peak bf16=$bf16 ldmatrix=$ldm ($arch)"; cat "$log"; exit 1
      fi
    done
  done
done
echo "compile-kernels: mma_peak (4 variants x 2 archs) OK"

# Kernel files compiled as they are (mgemm.kernels.PlainSource), for both archs: the transpose copy
# (kernels/transpose.cu, mgemm/hopper.py: transpose_copy; 2-, 4- and 8-byte elements), the float32
# split into bfloat16 pieces (kernels/split_bf16.cu, mgemm/emulate.py) and the timing spin
# (kernels/spin.cu, mgemm/tune.py), the memory probe (kernels/dram_probe.cu, benchmarks/dram_probe.py)
# and the fix-up probe (kernels/fixup_probe.cu, benchmarks/fixup_probe.py).
# The same report; fails on errors, spills and stack frames.
plain_compile() {  # file.cu
  local name=${1%.cu} arch log
  for arch in "${ARCHS[@]}"; do
    log="$out/$name.log"
    if ! "$NVCC" -std=c++17 -cubin "$arch" -Xptxas -v -o "$out/$name.cubin" "$1" >"$log" 2>&1; then
      echo "FAILED: $name ($arch)"; cat "$log"; exit 1
    fi
    awk '/Compiling entry/ {f=$(NF-2); a=$NF} /spill/ {sp=$0} /Used/ {sub(/.*Used /,""); print f, a, $0, "|", sp}' "$log" | tr -d "'"
    if grep -E '[1-9][0-9]* bytes (spill stores|spill loads|stack frame)' "$log" >/dev/null; then
      echo "SPILLS in $name ($arch)"; cat "$log"; exit 1
    fi
  done
  echo "compile-kernels: $name (${#ARCHS[@]} archs) OK"
}
plain_compile transpose.cu
plain_compile split_bf16.cu
plain_compile spin.cu
plain_compile dram_probe.cu
plain_compile fixup_probe.cu
# the two a run of mgemm may build on any GPU (float32 emulation's split, the tuner's spin), for
# the newer archs too
ARCHS=("${NEWER_ARCHS[@]}")
plain_compile split_bf16.cu
plain_compile spin.cu
