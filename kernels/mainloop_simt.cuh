// SIMT mainloop for exact float32: each thread owns an 8x8 block of the tile (two 4x4 quadrants
// per direction, so that its float4 shared loads from adjacent threads are contiguous).  Tiles are
// staged k-major in shared memory ([k][m] and [k][n]) by 4-byte cp.async, which transposes any
// global layout on the way in and zero-fills the masked edges.
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
  static_assert(kThreads == 32 * Cfg::kWarpsM * Cfg::kWarpsN, "SIMT: threads = (BM/8)*(BN/8)");
  static_assert((BM * BK) % kThreads == 0 && (BN * BK) % kThreads == 0, "whole copies per thread");

  struct alignas(16) f4 { float x, y, z, w; };

  __device__ __forceinline__ static void coord(int idx, int& row, int& col) {
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const int i = idx / 8, j = idx % 8;
    row = ty * 4 + (i & 3) + (i >> 2) * (BM / 2);
    col = tx * 4 + (j & 3) + (j >> 2) * (BN / 2);
  }

  // Producer role: element (mn, k) of a matrix at g[mn*ld + k] (K_CONTIG) or g[k*ld + mn], stored
  // at s[k*PITCH + mn].  Consecutive threads read consecutive global addresses.
  template <int MN, int PITCH, bool K_CONTIG>
  __device__ __forceinline__ static void copy_tile(float* s, const float* g, long long ld, int mn0, int k0,
                                   int mn_lim, int k_lim) {
#pragma unroll
    for (int c = threadIdx.x; c < MN * BK; c += kThreads) {
      const int k = K_CONTIG ? c % BK : c / MN, mn = K_CONTIG ? c / BK : c % MN;
      const int gm = mn0 + mn, gk = k0 + k;
      const bool ok = gm < mn_lim && gk < k_lim;
      const float* src = ok ? g + (K_CONTIG ? gm * ld + gk : gk * ld + gm) : g;
      cp_async4(s + k * PITCH + mn, src, ok ? 4 : 0);
    }
  }

  __device__ __forceinline__ static void load_stage(float* sA, float* sB, const float* A, const float* B,
                                    long long lda, long long ldb, int M, int N, int K, int m0,
                                    int n0, int kt) {
    copy_tile<BM, PA, AK_MAJOR>(sA, A, lda, m0, kt * BK, M, K);
    copy_tile<BN, PB, BK_MAJOR>(sB, B, ldb, n0, kt * BK, N, K);
  }

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
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
    const int nk = ke - kb;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) load_stage(sA + s * A_STAGE, sB + s * B_STAGE, A, B, lda, ldb, M, N, K, m0, n0, kb + s);
      cp_async_commit();
    }
    int read = 0, write = kStages - 1;
    for (int it = 0; it < nk; ++it) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      if (it + kStages - 1 < nk)
        load_stage(sA + write * A_STAGE, sB + write * B_STAGE, A, B, lda, ldb, M, N, K, m0, n0,
                   kb + it + kStages - 1);
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
