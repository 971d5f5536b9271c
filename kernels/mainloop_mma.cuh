// Tensor-core mainloop (sm_80 and later): a multi-stage cp.async ring in shared memory feeding
// mma.sync.  float16/bfloat16 fragments come through ldmatrix (.trans for MN-major tiles), tf32 and
// float64 fragments through plain shared loads.  Shared tiles keep the global layout, each row
// padded by one 16-byte chunk (or two) so that fragment loads hit distinct banks.
#pragma once
#include "ptx.cuh"

namespace mgemm {

template <bool B, class T, class F> struct cond { using type = T; };
template <class T, class F> struct cond<false, T, F> { using type = F; };
template <class T, class U> struct same { static constexpr bool value = false; };
template <class T> struct same<T, T> { static constexpr bool value = true; };

template <class Cfg>
struct MmaMainloop {
  using In = typename Cfg::In;
  static constexpr bool kHalf = sizeof(In) == 2;
  static constexpr bool kF64 = same<In, double>::value;
  static constexpr bool kBF16 = same<In, bf16_t>::value;
  using acc_t = typename cond<kF64, double, float>::type;

  // The mma atom: m16n8k16 (f16, bf16), m16n8k8 (tf32), m8n8k4 (f64); CR accumulators per thread.
  static constexpr int AM = kF64 ? 8 : 16, AN = 8, AK = kHalf ? 16 : (kF64 ? 4 : 8);
  static constexpr int CR = kF64 ? 2 : 4;

  static constexpr int BM = Cfg::kTileM, BN = Cfg::kTileN, BK = Cfg::kTileK;
  static constexpr int WM = Cfg::kWarpsM, WN = Cfg::kWarpsN, kStages = Cfg::kStages;
  static constexpr int kThreads = 32 * WM * WN;
  static constexpr bool AK_MAJOR = Cfg::kAKMajor, BK_MAJOR = Cfg::kBKMajor;

  static constexpr int EB = sizeof(In), CH = 16 / EB;  // bytes per element, elements per chunk
  static constexpr int PAD_A = kHalf ? 8 : (kF64 ? 4 : (AK_MAJOR ? 4 : 8));
  static constexpr int PAD_B = kHalf ? 8 : (kF64 ? 4 : (BK_MAJOR ? 4 : 8));
  static constexpr int A_OUTER = AK_MAJOR ? BM : BK, A_INNER = AK_MAJOR ? BK : BM;
  static constexpr int B_OUTER = BK_MAJOR ? BN : BK, B_INNER = BK_MAJOR ? BK : BN;
  static constexpr int A_PITCH = A_INNER + PAD_A, B_PITCH = B_INNER + PAD_B;
  static constexpr int A_STAGE = A_OUTER * A_PITCH, B_STAGE = B_OUTER * B_PITCH;
  static constexpr int kSmemBytes = kStages * (A_STAGE + B_STAGE) * EB;

  static constexpr int WTM = BM / WM, WTN = BN / WN;  // warp tile
  static constexpr int MI = WTM / AM, NI = WTN / AN;  // atoms per warp tile
  static constexpr int kAcc = MI * NI * CR;

  static_assert(BM % (WM * AM) == 0 && BN % (WN * AN) == 0, "warp tile must hold whole mma atoms");
  static_assert(BK % AK == 0 && BK % CH == 0 && BM % CH == 0 && BN % CH == 0, "tile vs atom/chunk");
  static_assert(!kHalf || NI % 2 == 0, "ldmatrix.x4 loads B for two n8 atoms at a time");
  static_assert(kStages >= 2, "the ring needs two stages at least");

  // Position (row, col) inside the CTA tile of this thread's accumulator `idx`.
  __device__ __forceinline__ static void coord(int idx, int& row, int& col) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
    const int r = idx % CR, atom = idx / CR, mi = atom / NI, ni = atom % NI;
    row = wm * WTM + mi * AM + (lane >> 2) + (CR == 4 ? 8 * (r >> 1) : 0);
    col = wn * WTN + ni * AN + 2 * (lane & 3) + (r & 1);
  }

  // Producer role: one (OUTER x INNER) tile of a matrix whose element (o, i) sits at g[o*ld + i],
  // 16-byte chunks, rows and columns past (outer_lim, inner_lim) zero-filled.
  template <int OUTER, int INNER, int PITCH>
  __device__ __forceinline__ static void copy_tile(In* s, const In* g, long long ld, int outer0, int inner0,
                                   int outer_lim, int inner_lim) {
    constexpr int CPR = INNER / CH, TOTAL = OUTER * CPR;
#pragma unroll
    for (int c = threadIdx.x; c < TOTAL; c += kThreads) {
      const int o = c / CPR, i = (c % CPR) * CH;
      const int go = outer0 + o, gi = inner0 + i;
      int bytes = 0;
      const In* src = g;
      if (go < outer_lim && gi < inner_lim) {
        const int left = inner_lim - gi;
        bytes = (left < CH ? left : CH) * EB;
        src = g + go * ld + gi;
      }
      cp_async16(s + o * PITCH + i, src, bytes);
    }
  }

  __device__ __forceinline__ static void load_stage(In* sA, In* sB, const In* A, const In* B, long long lda,
                                    long long ldb, int M, int N, int K, int m0, int n0, int kt) {
    const int k0 = kt * BK;
    if (AK_MAJOR) copy_tile<BM, BK, A_PITCH>(sA, A, lda, m0, k0, M, K);
    else copy_tile<BK, BM, A_PITCH>(sA, A, lda, k0, m0, K, M);
    if (BK_MAJOR) copy_tile<BN, BK, B_PITCH>(sB, B, ldb, n0, k0, N, K);
    else copy_tile<BK, BN, B_PITCH>(sB, B, ldb, k0, n0, K, N);
  }

  // Element (m, k) of the A stage and (k, n) of the B stage, whatever their majorness.
  __device__ static const In& a_at(const In* s, int m, int k) {
    return AK_MAJOR ? s[m * A_PITCH + k] : s[k * A_PITCH + m];
  }
  __device__ static const In& b_at(const In* s, int k, int n) {
    return BK_MAJOR ? s[n * B_PITCH + k] : s[k * B_PITCH + n];
  }

  // Consumer role: all mma atoms of this warp over one shared stage.
  __device__ __forceinline__ static void compute_stage(acc_t (&acc)[kAcc], const In* sA, const In* sB) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
    const int g = lane >> 2, t = lane & 3;  // mma fragment coordinates
    const int mat = lane >> 3, r = lane & 7;  // ldmatrix: which 8x8 matrix, which row
#pragma unroll
    for (int kk = 0; kk < BK; kk += AK) {
      if constexpr (kHalf) {
        unsigned fa[MI][4], fb[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int m = wm * WTM + mi * 16;
          if (AK_MAJOR) ldmatrix_x4(fa[mi], sA + (m + r + 8 * (mat & 1)) * A_PITCH + kk + 8 * (mat >> 1));
          else ldmatrix_x4_trans(fa[mi], sA + (kk + r + 8 * (mat >> 1)) * A_PITCH + m + 8 * (mat & 1));
        }
#pragma unroll
        for (int ni = 0; ni < NI; ni += 2) {
          const int n = wn * WTN + ni * 8;
          unsigned q[4];
          if (BK_MAJOR) ldmatrix_x4(q, sB + (n + r + 8 * (mat >> 1)) * B_PITCH + kk + 8 * (mat & 1));
          else ldmatrix_x4_trans(q, sB + (kk + r + 8 * (mat & 1)) * B_PITCH + n + 8 * (mat >> 1));
          fb[ni][0] = q[0]; fb[ni][1] = q[1]; fb[ni + 1][0] = q[2]; fb[ni + 1][1] = q[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int i = (mi * NI + ni) * 4;
            if (kBF16) mma_bf16(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], fa[mi], fb[ni]);
            else mma_f16(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], fa[mi], fb[ni]);
          }
      } else if constexpr (kF64) {
        double fa[MI], fb[NI];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) fa[mi] = a_at(sA, wm * WTM + mi * 8 + g, kk + t);
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) fb[ni] = b_at(sB, kk + t, wn * WTN + ni * 8 + g);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int i = (mi * NI + ni) * 2;
            mma_f64(acc[i], acc[i + 1], fa[mi], fb[ni]);
          }
      } else {  // tf32: float storage, rounded to tf32 on the way into registers
        unsigned fa[MI][4], fb[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int m = wm * WTM + mi * 16 + g;
          fa[mi][0] = to_tf32(a_at(sA, m, kk + t));
          fa[mi][1] = to_tf32(a_at(sA, m + 8, kk + t));
          fa[mi][2] = to_tf32(a_at(sA, m, kk + t + 4));
          fa[mi][3] = to_tf32(a_at(sA, m + 8, kk + t + 4));
        }
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int n = wn * WTN + ni * 8 + g;
          fb[ni][0] = to_tf32(b_at(sB, kk + t, n));
          fb[ni][1] = to_tf32(b_at(sB, kk + t + 4, n));
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int i = (mi * NI + ni) * 4;
            mma_tf32(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], fa[mi], fb[ni]);
          }
      }
    }
  }

  // acc = A[m0:m0+BM, kb*BK:ke*BK] @ B[kb*BK:ke*BK, n0:n0+BN], through a kStages-deep ring.
  __device__ __forceinline__ static void run(acc_t (&acc)[kAcc], unsigned char* smem, const In* A, const In* B,
                             long long lda, long long ldb, int M, int N, int K, int m0, int n0,
                             int kb, int ke) {
    In* sA = reinterpret_cast<In*>(smem);
    In* sB = sA + kStages * A_STAGE;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0;
    const int nk = ke - kb;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) load_stage(sA + s * A_STAGE, sB + s * B_STAGE, A, B, lda, ldb, M, N, K, m0, n0, kb + s);
      cp_async_commit();
    }
    int read = 0, write = kStages - 1;
    for (int it = 0; it < nk; ++it) {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // stage `read` landed for everyone; stage `write` is no longer being read
      if (it + kStages - 1 < nk)
        load_stage(sA + write * A_STAGE, sB + write * B_STAGE, A, B, lda, ldb, M, N, K, m0, n0,
                   kb + it + kStages - 1);
      cp_async_commit();
      compute_stage(acc, sA + read * A_STAGE, sB + read * B_STAGE);
      read = read + 1 == kStages ? 0 : read + 1;
      write = write + 1 == kStages ? 0 : write + 1;
    }
    cp_async_wait<0>();
    __syncthreads();  // the next unit's prologue may overwrite every stage
  }
};

}  // namespace mgemm
