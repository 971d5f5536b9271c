// SIMT mainloop for exact float32: each thread owns an 8x8 block of the tile (two 4x4 quadrants
// per direction, so that its float4 shared loads from adjacent threads are contiguous).  Tiles are
// staged k-major in shared memory ([k][m] and [k][n]) by cp.async (16-byte for M/N-contiguous
// operands when aligned, else 4-byte, which transposes K-contiguous ones on the way in), zero-filling
// the masked edges.
#pragma once
#include "ptx.cuh"

namespace mgemm {

template <class Cfg>
struct SimtMainloop {
  using In = float;
  using acc_t = float;
  static constexpr int BM = Cfg::kTileM, BN = Cfg::kTileN, BK = Cfg::kTileK, kStages = Cfg::kStages;
  static constexpr bool AK_MAJOR = Cfg::kAKMajor, BK_MAJOR = Cfg::kBKMajor;
  static constexpr int TX = BN / 8, TY = BM / 8, kThreads = TX * TY;
  static constexpr int PA = BM + 4, PB = BN + 4;  // pitch: 16-byte rows, transposing stores spread over banks
  static constexpr int A_STAGE = BK * PA, B_STAGE = BK * PB;
  static constexpr int kSmemBytes = kStages * (A_STAGE + B_STAGE) * 4;
  static constexpr int kAcc = 64;
  // The epilogue's paired stores (gemm_persistent.cu) are not used here: with them ptxas assigned
  // the FFMA loop's registers so that 286 of its 512 FFMAs read two un-reused sources from one
  // register bank (136 without), and 8192³ ran at 0.82 of cuBLAS instead of 0.88 (RESULTS.md,
  // twenty-fifth session).
  static constexpr bool kPairStores = false;
  static_assert(kThreads == 32 * Cfg::kWarpsM * Cfg::kWarpsN, "SIMT: threads = (BM/8)*(BN/8)");
  static_assert((BM * BK) % kThreads == 0 && (BN * BK) % kThreads == 0, "whole copies per thread");

  struct alignas(16) f4 { float x, y, z, w; };

  __device__ __forceinline__ static void coord(int idx, int& row, int& col) {
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const int i = idx / 8, j = idx % 8;
    row = ty * 4 + (i & 3) + (i >> 2) * (BM / 2);
    col = tx * 4 + (j & 3) + (j >> 2) * (BN / 2);
  }

  // Producer role for one operand: element (mn, k) of a matrix at g[mn*ld + k] (K_CONTIG) or
  // g[k*ld + mn], stored at s[k*PITCH + mn].  A thread's copies share one column (fixed mn or k), so
  // sources, destinations and edge masks are set once per work unit and a k-tile costs a pointer
  // walk.  M/N-contiguous operands go in 16-byte chunks of 4 columns when the matrix allows it
  // (16-byte aligned, ld a multiple of 4), else in single elements; K-contiguous ones transpose on
  // the way in, one element per copy.  Consecutive threads read consecutive global addresses.
  template <int MN, int PITCH, bool K_CONTIG>
  struct Copier {
    static constexpr bool kVec = !K_CONTIG && Cfg::kSimtVec;
    static constexpr int CW = kVec ? 4 : 1;                 // columns per copy when vectorized
    static constexpr int PER_ROW = K_CONTIG ? BK : MN / CW;  // copies per row of the source tile
    static_assert(kThreads % (K_CONTIG ? BK : MN) == 0, "SIMT: a thread's copies must share one column");
    static constexpr int RPP = kThreads / PER_ROW;          // source rows per pass (vectorized)
    static constexpr int ROWS = K_CONTIG ? MN : BK;         // source rows of the tile
    static constexpr int P = (ROWS + RPP - 1) / RPP;        // copies per thread (vectorized)
    static constexpr bool kWhole = ROWS % RPP == 0;         // else the last pass is partial
    static constexpr int RPP1 = kThreads / (K_CONTIG ? BK : MN), P1 = ROWS / RPP1;  // element copies
    static_assert(ROWS % RPP1 == 0 && P1 <= 32, "SIMT: whole passes of element copies");
    int row0;           // first copy's source row inside the tile

    const float* g;     // first copy's source at the next k-tile
    long long step;     // source distance between a thread's copies
    long long advance;  // source distance between k-tiles
    unsigned soff;      // first copy's shared byte offset inside a stage
    int kleft;          // K minus the k of the first copy (MN-contiguous) or of the column (K-contiguous)
    unsigned mask;      // K_CONTIG: bit j: copy j's row inside M/N; else bytes of a copy inside M/N
    bool vec;           // 16-byte chunks (uniform over the CTA)

    __device__ __forceinline__ void init(const float* G, long long ld, int mn0, int mn_lim, int K, int kt) {
      const int k0 = kt * BK;
      vec = kVec && ((reinterpret_cast<unsigned long long>(G) & 15) == 0) && ((ld & 3) == 0);
      const int per_row = vec ? PER_ROW : (K_CONTIG ? BK : MN);
      const int rpp = kThreads / per_row;
      const int row = threadIdx.x / per_row, col = (threadIdx.x % per_row) * (vec ? CW : 1);
      row0 = row;
      step = rpp * ld;
      if (K_CONTIG) {  // row = mn, col = k
        g = G + (long long)(mn0 + row) * ld + k0 + col;
        soff = (col * PITCH + row) * 4;
        advance = BK;
        kleft = K - k0 - col;
        mask = 0;
#pragma unroll
        for (int j = 0; j < P1; ++j) mask |= (mn0 + row + j * RPP1 < mn_lim ? 1u : 0u) << j;
      } else {  // row = k, col = mn
        g = G + (long long)(k0 + row) * ld + mn0 + col;
        soff = (row * PITCH + col) * 4;
        advance = BK * ld;
        kleft = K - k0 - row;
        const int left = mn_lim - mn0 - col, w = vec ? CW : 1;
        mask = (left >= w ? w : (left > 0 ? left : 0)) * 4;
      }
    }

    __device__ __forceinline__ void load(unsigned stage) {
      const float* src = g;
      if (K_CONTIG) {
        const int bytes = kleft > 0 ? 4 : 0;
#pragma unroll
        for (int j = 0; j < P1; ++j) {
          cp_async4_s(stage + soff + j * RPP1 * 4, src, (mask >> j) & 1 ? bytes : 0);
          src += step;
        }
      } else if (kVec && vec) {
#pragma unroll
        for (int j = 0; j < P; ++j) {
          if (kWhole || j < P - 1 || row0 + j * RPP < ROWS)
            cp_async16_s(stage + soff + j * RPP * PITCH * 4, src, j * RPP < kleft ? (int)mask : 0);
          src += step;
        }
      } else {
#pragma unroll
        for (int j = 0; j < P1; ++j) {
          cp_async4_s(stage + soff + j * RPP1 * PITCH * 4, src, j * RPP1 < kleft ? (int)mask : 0);
          src += step;
        }
      }
      g += advance;
      kleft -= BK;
    }
  };
  using CopyA = Copier<BM, PA, AK_MAJOR>;
  using CopyB = Copier<BN, PB, BK_MAJOR>;

  // Consumer role: 64 FMAs per k per thread, fed by four float4 shared loads.
  __device__ __forceinline__ static void compute_stage(float (&acc)[kAcc], const float* sA, const float* sB) {
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const f4 a0 = *reinterpret_cast<const f4*>(sA + k * PA + ty * 4);
      const f4 a1 = *reinterpret_cast<const f4*>(sA + k * PA + ty * 4 + BM / 2);
      const f4 b0 = *reinterpret_cast<const f4*>(sB + k * PB + tx * 4);
      const f4 b1 = *reinterpret_cast<const f4*>(sB + k * PB + tx * 4 + BN / 2);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i * 8 + j] = fmaf(a[i], b[j], acc[i * 8 + j]);
    }
  }

  __device__ __forceinline__ static void run(float (&acc)[kAcc], unsigned char* smem, const float* A,
                             const float* B, long long lda, long long ldb, int M, int N, int K,
                             int m0, int n0, int kb, int ke) {
    float* sA = reinterpret_cast<float*>(smem);
    float* sB = sA + kStages * A_STAGE;
    const unsigned s_a = smem_addr(sA), s_b = smem_addr(sB);
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
    CopyA ca;
    CopyB cb;
    ca.init(A, lda, m0, M, K, kb);
    cb.init(B, ldb, n0, N, K, kb);
    const int nk = ke - kb;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) {
        ca.load(s_a + s * A_STAGE * 4);
        cb.load(s_b + s * B_STAGE * 4);
      }
      cp_async_commit();
    }
    int read = 0, write = kStages - 1;
    for (int it = 0; it < nk; ++it) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      if (it + kStages - 1 < nk) {
        ca.load(s_a + write * (A_STAGE * 4));
        cb.load(s_b + write * (B_STAGE * 4));
      }
      cp_async_commit();
      compute_stage(acc, sA + read * A_STAGE, sB + read * B_STAGE);
      read = read + 1 == kStages ? 0 : read + 1;
      write = write + 1 == kStages ? 0 : write + 1;
    }
    cp_async_wait<0>();
    __syncthreads();
  }
};

}  // namespace mgemm
