// The persistent GEMM kernel family: D = alpha * A @ B + beta * C, one CTA per SM (times
// occupancy) walking output tiles handed out by tile_scheduler.cuh.  Every knob is a compile-time
// constant set by name (mgemm/kernels.py renders the #defines; the defaults below are for nvcc).
#include "mainloop_mma.cuh"
#include "mainloop_simt.cuh"
#include "knobs.cuh"
#include "tile_scheduler.cuh"

#ifndef MGEMM_INPUT
#define MGEMM_INPUT MGEMM_F16  // what A and B hold and which mainloop multiplies them
#endif
#ifndef MGEMM_OUTPUT
#define MGEMM_OUTPUT MGEMM_F16  // what C and D hold
#endif
#ifndef MGEMM_TILE_M
#define MGEMM_TILE_M 128
#endif
#ifndef MGEMM_TILE_N
#define MGEMM_TILE_N 128
#endif
#ifndef MGEMM_TILE_K
#define MGEMM_TILE_K 32
#endif
#ifndef MGEMM_STAGES
#define MGEMM_STAGES 4
#endif
#ifndef MGEMM_WARPS_M
#define MGEMM_WARPS_M 2
#endif
#ifndef MGEMM_WARPS_N
#define MGEMM_WARPS_N 2
#endif
#ifndef MGEMM_POLICY
#define MGEMM_POLICY MGEMM_POLICY_STATIC
#endif
#ifndef MGEMM_GROUP
#define MGEMM_GROUP 8
#endif
#ifndef MGEMM_RASTER
#define MGEMM_RASTER MGEMM_RASTER_M
#endif
#ifndef MGEMM_A_K_MAJOR
#define MGEMM_A_K_MAJOR 1  // A row-major (k contiguous); 0: column-major (m contiguous)
#endif
#ifndef MGEMM_B_K_MAJOR
#define MGEMM_B_K_MAJOR 0  // B column-major (k contiguous); 0: row-major (n contiguous)
#endif
#ifndef MGEMM_DMMA_K
#define MGEMM_DMMA_K 4  // float64 on sm_90: mma k of m16n8k{4,8,16}; 0: m8n8k4 (sm_80's shape)
#endif
#ifndef MGEMM_FRAG_DB
#define MGEMM_FRAG_DB 1  // tensor-core mainloop: load k-step s+1's fragments before step s's mma
#endif
#ifndef MGEMM_SWIZZLE
#define MGEMM_SWIZZLE 0  // float16/bfloat16: XOR-swizzled shared tiles instead of padded rows
#endif
#ifndef MGEMM_FAST_COPY
#define MGEMM_FAST_COPY 0  // tensor cores: k-tiles inside M, N and K copied without edge masks
#endif
#ifndef MGEMM_FRAG_CARRY
#define MGEMM_FRAG_CARRY 0  // tensor cores: next k-tile's barrier and first fragments before the last mma
#endif
#ifndef MGEMM_MIN_BLOCKS
#define MGEMM_MIN_BLOCKS 1  // __launch_bounds__ minimum CTAs per SM (> 1 caps registers per thread)
#endif
#ifndef MGEMM_SIMT_VEC
#define MGEMM_SIMT_VEC 1  // float32 SIMT: 16-byte copies of M/N-contiguous operands when aligned
#endif
#ifndef MGEMM_RECORD
#define MGEMM_RECORD 0  // debug: log (cta, tile, k_begin, k_end) of every work unit
#endif
// What the epilogue stores, one form per build: paired stores (row-major D with even rows, aligned:
// two accumulators of a row as one word) or one element at a time, each with or without reading C
// (beta != 0).  The launcher (mgemm/kernels.py store_form) picks the form a launch needs.  A build
// that chose among all four per launch held them all, and the one it ran could lie thousands of
// instructions past the mainloop: a first launch after another kernel then waited on fetching it
// (benchmarks/RESULTS.md, thirtieth session).
#define MGEMM_STORES_PAIRS 1
#define MGEMM_STORES_PAIRS_C 2
#define MGEMM_STORES_ELEMENTS 3
#define MGEMM_STORES_ELEMENTS_C 4
#ifndef MGEMM_STORES
#if MGEMM_INPUT == MGEMM_F32
#define MGEMM_STORES MGEMM_STORES_ELEMENTS  // the SIMT mainloop does not pair its accumulators
#else
#define MGEMM_STORES MGEMM_STORES_PAIRS
#endif
#endif

namespace mgemm {

// The configuration, by name: the single place where macros become C++.
struct Config {
  using In = StorageOf<MGEMM_INPUT>::type;
  using Out = StorageOf<MGEMM_OUTPUT>::type;
  static constexpr int kTileM = MGEMM_TILE_M, kTileN = MGEMM_TILE_N, kTileK = MGEMM_TILE_K;
  static constexpr int kStages = MGEMM_STAGES, kWarpsM = MGEMM_WARPS_M, kWarpsN = MGEMM_WARPS_N;
  static constexpr int kGroup = MGEMM_GROUP;
  static constexpr bool kRasterN = MGEMM_RASTER == MGEMM_RASTER_N;
  static constexpr bool kAKMajor = MGEMM_A_K_MAJOR, kBKMajor = MGEMM_B_K_MAJOR;
  static constexpr bool kRecord = MGEMM_RECORD;
  static constexpr int kDmmaK = MGEMM_DMMA_K;
  static constexpr bool kFragDb = MGEMM_FRAG_DB, kSimtVec = MGEMM_SIMT_VEC;
  static constexpr bool kSwizzle = MGEMM_SWIZZLE, kFastCopy = MGEMM_FAST_COPY, kFragCarry = MGEMM_FRAG_CARRY;
};

#if MGEMM_INPUT == MGEMM_F32
using Mainloop = SimtMainloop<Config>;
#else
using Mainloop = MmaMainloop<Config>;
#endif

#if MGEMM_POLICY == MGEMM_POLICY_PER_TILE
using Scheduler = PerTileScheduler<Config::kGroup, Config::kRasterN>;
#elif MGEMM_POLICY == MGEMM_POLICY_STATIC
using Scheduler = StaticScheduler<Config::kGroup, Config::kRasterN>;
#elif MGEMM_POLICY == MGEMM_POLICY_DYNAMIC
using Scheduler = DynamicScheduler<Config::kGroup, Config::kRasterN>;
#elif MGEMM_POLICY == MGEMM_POLICY_STREAMK
using Scheduler = StreamKScheduler<Config::kGroup, Config::kRasterN>;
#endif

using In = Config::In;
using Out = Config::Out;
using acc_t = Mainloop::acc_t;
constexpr int kThreads = Mainloop::kThreads;

// Epilogue: D = alpha * acc + beta * C over the in-bounds part of the tile; C is not read when
// beta == 0 (it may then be D itself, or garbage).  Unrolled whole (``unrolled``), so acc stays in
// registers.
template <bool kReadC>
__device__ __forceinline__ void epilogue_loop(const acc_t (&acc)[Mainloop::kAcc], const Out* C, Out* D,
                                              int M, int N, long long ldc_m, long long ldc_n,
                                              long long ldd_m, long long ldd_n, int m0, int n0,
                                              acc_t a, acc_t b) {
  unrolled<Mainloop::kAcc>([&](int i) {
    int r, c;
    Mainloop::coord(i, r, c);
    const int gr = m0 + r, gc = n0 + c;
    if (gr < M && gc < N) {
      acc_t v = a * acc[i];
      if (kReadC) v += b * to_acc(C[gr * ldc_m + gc * ldc_n]);
      D[gr * ldd_m + gc * ldd_n] = Store<Out>::from(v);
    }
  });
}

// Row-major D (and C) with even leading dimensions and aligned bases: accumulators i, i + 1 (i
// even) are columns gc, gc + 1 (gc even) of one row in every mainloop (Mainloop::coord), stored
// (and read) as one pair: half the store instructions, whole 4- to 16-byte words per lane.  The
// tensor-core mainloops take it (Mainloop::kPairStores); the float32 SIMT one does not.
template <bool kReadC>
__device__ __forceinline__ void epilogue_pairs(const acc_t (&acc)[Mainloop::kAcc], const Out* C, Out* D,
                                               int M, int N, long long ldc_m, long long ldd_m, int m0,
                                               int n0, acc_t a, acc_t b) {
  static_assert(Mainloop::kAcc % 2 == 0, "accumulators come in column pairs");
  unrolled<Mainloop::kAcc / 2>([&](int j) {
    int r, c;
    Mainloop::coord(2 * j, r, c);
    const int gr = m0 + r, gc = n0 + c;
    if (gr < M) epilogue_pair<kReadC>(C, D, ldc_m, ldd_m, gr, gc, N, a * acc[2 * j], a * acc[2 * j + 1], b);
  });
}

__device__ __forceinline__ void epilogue(const acc_t (&acc)[Mainloop::kAcc], const Out* C, Out* D,
                                         int M, int N, long long ldc_m, long long ldc_n,
                                         long long ldd_m, long long ldd_n, int m0, int n0,
                                         double alpha, double beta) {
  constexpr int kStores = MGEMM_STORES;
  constexpr bool kPairs = kStores == MGEMM_STORES_PAIRS || kStores == MGEMM_STORES_PAIRS_C;
  constexpr bool kReadC = kStores == MGEMM_STORES_PAIRS_C || kStores == MGEMM_STORES_ELEMENTS_C;
  static_assert(kStores >= MGEMM_STORES_PAIRS && kStores <= MGEMM_STORES_ELEMENTS_C, "STORES: one of the four forms");
  static_assert(!kPairs || Mainloop::kPairStores, "STORES PAIRS: a mainloop that pairs its accumulators");
  const acc_t b = kReadC ? (acc_t)beta : (acc_t)0;
  if constexpr (kPairs)
    epilogue_pairs<kReadC>(acc, C, D, M, N, ldc_m, ldd_m, m0, n0, (acc_t)alpha, b);
  else
    epilogue_loop<kReadC>(acc, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, m0, n0, (acc_t)alpha, b);
}

// Stream-K fix-up.  Partials live in workspace slot `cta`, laid out [acc index][thread] so that
// both the write and the read are coalesced; flags[cta] says the slot is complete.
__device__ __forceinline__ void store_partial(const acc_t (&acc)[Mainloop::kAcc], acc_t* ws, int* flags) {
  acc_t* slot = ws + (long long)blockIdx.x * Mainloop::kAcc * kThreads;
#pragma unroll
  for (int i = 0; i < Mainloop::kAcc; ++i) slot[i * kThreads + threadIdx.x] = acc[i];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) flag_release(flags + blockIdx.x);
}

__device__ __forceinline__ void add_partial(acc_t (&acc)[Mainloop::kAcc], const acc_t* ws, const int* flags, int cta) {
  if (threadIdx.x == 0)
    while (flag_acquire(flags + cta) == 0) {
    }
  __syncthreads();
  const acc_t* slot = ws + (long long)cta * Mainloop::kAcc * kThreads;
#pragma unroll
  for (int i = 0; i < Mainloop::kAcc; ++i) acc[i] += __ldcg(slot + i * kThreads + threadIdx.x);
}

// The owner adds the partials of the lower CTAs that share its tile, nearest first: a fixed
// order, so the result is bitwise the same on every run.
template <class S>
__device__ __forceinline__ void fix_up(const S& sched, const WorkUnit& w, acc_t (&acc)[Mainloop::kAcc],
                       const acc_t* ws, const int* flags) {
  const long long start = sched.tile_start(w);
  for (int c = (int)blockIdx.x - 1; c >= 0; --c) {
    const long long b = sched.sk_begin(c);
    if (b == sched.sk_begin(c + 1)) continue;  // an empty range contributes nothing
    add_partial(acc, ws, flags, c);
    if (b <= start) break;
  }
}

__device__ __forceinline__ void record_unit(int* record, const WorkUnit& w) {
  if (threadIdx.x == 0) {
    const int slot = atomicAdd(record, 1);
    int* r = record + 1 + 4 * slot;
    r[0] = blockIdx.x;
    r[1] = w.tile;
    r[2] = w.k_begin;
    r[3] = w.k_end;
  }
}

}  // namespace mgemm

using namespace mgemm;

// sync[0]: the dynamic policy's counter; sync[1 + cta]: stream-K flags.  All zero at launch.
#if MGEMM_MIN_BLOCKS > 1
#define MGEMM_LAUNCH_BOUNDS __launch_bounds__(kThreads, MGEMM_MIN_BLOCKS)
#else
#define MGEMM_LAUNCH_BOUNDS __launch_bounds__(kThreads)
#endif
extern "C" __global__ void MGEMM_LAUNCH_BOUNDS mgemm_gemm(
    const In* __restrict__ A, const In* __restrict__ B, const Out* C, Out* D, int M, int N, int K,
    long long lda, long long ldb, long long ldc_m, long long ldc_n, long long ldd_m,
    long long ldd_n, double alpha, double beta, int* sync, acc_t* workspace, int sk_tiles,
    int* record) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int BM = Config::kTileM, BN = Config::kTileN, BK = Config::kTileK;
  TileGrid grid;
  grid.rows = (M + BM - 1) / BM;
  grid.cols = (N + BN - 1) / BN;
  grid.tiles = grid.rows * grid.cols;
  grid.k_iters = (K + BK - 1) / BK;
  SchedArgs args;
  args.counter = sync;
  args.sk_tiles = sk_tiles;
  Scheduler sched(grid, args);
  WorkUnit w;
  while (sched.next(w)) {
    if (Config::kRecord) record_unit(record, w);
    acc_t acc[Mainloop::kAcc];
    const int m0 = w.row * BM, n0 = w.col * BN;
    Mainloop::run(acc, smem, A, B, lda, ldb, M, N, K, m0, n0, w.k_begin, w.k_end);
    if constexpr (Scheduler::kSplitsK) {
      if (w.k_end < grid.k_iters) {  // a contributor: hand the partial to the tile's owner
        store_partial(acc, workspace, sync + 1);
        continue;
      }
      if (w.k_begin > 0) fix_up(sched, w, acc, workspace, sync + 1);
    }
    epilogue(acc, C, D, M, N, ldc_m, ldc_n, ldd_m, ldd_n, m0, n0, alpha, beta);
  }
}
