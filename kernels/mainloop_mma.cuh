// Tensor-core mainloop (sm_80 and later): a multi-stage cp.async ring in shared memory feeding
// mma.sync.  float16/bfloat16 fragments come through ldmatrix (.trans for MN-major tiles), tf32 and
// float64 fragments through plain shared loads.  Shared tiles keep the global layout, each row
// padded by one 16-byte chunk (or two) so that fragment loads hit distinct banks.
//
// Integer work is kept out of the k-loop: each thread's copy sources, shared destinations, edge
// masks and fragment addresses are computed once per work unit (Copier, the lane offsets in run);
// a k-tile then costs one pointer add per operand, one compare per copy and constant offsets.
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

  // float64 on sm_90 multiplies with the m16n8k{4,8,16} shapes (Cfg::kDmmaK = their k; 0 keeps
  // sm_80's m8n8k4, the only float64 shape there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static constexpr bool kWideF64 = kF64 && Cfg::kDmmaK != 0;
#else
  static constexpr bool kWideF64 = false;
#endif
  static constexpr bool kNarrowF64 = kF64 && !kWideF64;

  // The mma atom: m16n8k16 (f16, bf16), m16n8k8 (tf32), m16n8k{4,8,16} (f64, sm_90) or m8n8k4 (f64);
  // CR accumulators per thread.
  static constexpr int AM = kNarrowF64 ? 8 : 16, AN = 8;
  static constexpr int AK = kHalf ? 16 : (kNarrowF64 ? 4 : (kF64 ? Cfg::kDmmaK : 8));
  static constexpr int CR = kNarrowF64 ? 2 : 4;
  static constexpr int KS = AK / 4;  // scalar-fragment atoms (tf32, wide f64): k in steps of 4

  static constexpr int BM = Cfg::kTileM, BN = Cfg::kTileN, BK = Cfg::kTileK;
  static constexpr int WM = Cfg::kWarpsM, WN = Cfg::kWarpsN, kStages = Cfg::kStages;
  static constexpr int kThreads = 32 * WM * WN;
  static constexpr bool AK_MAJOR = Cfg::kAKMajor, BK_MAJOR = Cfg::kBKMajor;
  // (not tf32: its converted fragments would need two sets of 32 registers beside 128 accumulators)
  static constexpr bool kFragDb = Cfg::kFragDb && (kHalf || kF64);

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

  static_assert(!kF64 || Cfg::kDmmaK == 0 || Cfg::kDmmaK == 4 || Cfg::kDmmaK == 8 || Cfg::kDmmaK == 16,
                "float64 mma k: 0 (m8n8k4), 4, 8 or 16");
  static_assert(BM % (WM * AM) == 0 && BN % (WN * AN) == 0, "warp tile must hold whole mma atoms");
  static_assert(BK % AK == 0 && BK % CH == 0 && BM % CH == 0 && BN % CH == 0, "tile vs atom/chunk");
  static_assert(!kHalf || NI % 2 == 0, "ldmatrix.x4 loads B for two n8 atoms at a time");
  static_assert(kStages >= 2, "the ring needs two stages at least");

  // Offsets (elements) of A(m, k) and B(k, n) inside a stage, whatever their majorness: linear in
  // their arguments, so a lane's base plus a compile-time displacement addresses every fragment.
  __device__ __forceinline__ static constexpr int a_off(int m, int k) { return AK_MAJOR ? m * A_PITCH + k : k * A_PITCH + m; }
  __device__ __forceinline__ static constexpr int b_off(int k, int n) { return BK_MAJOR ? n * B_PITCH + k : k * B_PITCH + n; }

  // Position (row, col) inside the CTA tile of this thread's accumulator `idx`.
  __device__ __forceinline__ static void coord(int idx, int& row, int& col) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
    const int r = idx % CR, atom = idx / CR, mi = atom / NI, ni = atom % NI;
    row = wm * WTM + mi * AM + (lane >> 2) + (CR == 4 ? 8 * (r >> 1) : 0);
    col = wn * WTN + ni * AN + 2 * (lane & 3) + (r & 1);
  }

  // Producer role for one operand: an (OUTER x INNER) tile of a matrix whose element (o, i) sits at
  // g[o*ld + i], in 16-byte chunks; rows and columns past the matrix are zero-filled.  A thread's
  // chunks all sit in one column of chunks, RPP rows apart, so that everything but the k-position is
  // fixed per work unit.  K_CONTIG: outer = M or N, inner = K; else outer = K, inner = M or N.
  template <int MN, int PITCH, bool K_CONTIG>
  struct Copier {
    static constexpr int OUTER = K_CONTIG ? MN : BK, INNER = K_CONTIG ? BK : MN;
    static constexpr int CPR = INNER / CH;  // chunks per row
    static_assert(kThreads % CPR == 0, "threads must be a multiple of the 16-byte chunks per tile row");
    static constexpr int RPP = kThreads / CPR;          // rows per pass of all threads
    static constexpr int P = (OUTER + RPP - 1) / RPP;   // chunks per thread
    static constexpr bool kWhole = OUTER % RPP == 0;    // every thread copies P chunks
    static_assert(P <= 32, "edge mask bits");

    const In* g;         // chunk 0's source at the next k-tile
    long long step;      // source distance between a thread's consecutive chunks
    long long advance;   // source distance between k-tiles
    unsigned soff;       // chunk 0's shared byte offset inside a stage
    int o0;              // chunk 0's row inside the tile
    int kleft;           // K minus chunk 0's k at the next k-tile
    unsigned mask;       // K_CONTIG: bit j: chunk j's row is inside M/N; else: bytes per chunk inside M/N

    __device__ __forceinline__ void init(const In* G, long long ld, int mn0, int mn_lim, int K, int kt) {
      o0 = threadIdx.x / CPR;
      const int i0 = (threadIdx.x % CPR) * CH;
      soff = (o0 * PITCH + i0) * EB;
      step = RPP * ld;
      const int k0 = kt * BK;
      if (K_CONTIG) {
        g = G + (long long)(mn0 + o0) * ld + k0 + i0;
        advance = BK;
        kleft = K - k0 - i0;
        mask = 0;
#pragma unroll
        for (int j = 0; j < P; ++j) mask |= (mn0 + o0 + j * RPP < mn_lim ? 1u : 0u) << j;
      } else {
        g = G + (long long)(k0 + o0) * ld + mn0 + i0;
        advance = BK * ld;
        kleft = K - k0 - o0;
        const int left = mn_lim - mn0 - i0;
        mask = (left >= CH ? CH : (left > 0 ? left : 0)) * EB;
      }
    }

    // Issue this thread's copies of the next k-tile into the stage at shared address `stage`.
    __device__ __forceinline__ void load(unsigned stage) {
      const In* src = g;  // walked by `step` (not g + j*step: that keeps P 64-bit offsets live)
      const int kbytes = kleft >= CH ? 16 : (kleft > 0 ? kleft * EB : 0);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int bytes = K_CONTIG ? ((mask >> j) & 1 ? kbytes : 0) : (j * RPP < kleft ? (int)mask : 0);
        if (kWhole || j < P - 1 || o0 + j * RPP < OUTER)
          cp_async16_s(stage + soff + j * RPP * PITCH * EB, src, bytes);
        src += step;
      }
      g += advance;
      kleft -= BK;
    }
  };
  using CopyA = Copier<BM, A_PITCH, AK_MAJOR>;
  using CopyB = Copier<BN, B_PITCH, BK_MAJOR>;

  // Fragments of one k-step (AK) of the warp tile.
  struct HalfFrag { unsigned a[MI][4], b[NI][2]; };
  struct NarrowF64Frag { double a[MI], b[NI]; };
  struct ScalarFrag { typename cond<kF64, double, unsigned>::type a[MI][2 * KS], b[NI][KS]; };
  using Frag = typename cond<kHalf, HalfFrag, typename cond<kNarrowF64, NarrowF64Frag, ScalarFrag>::type>::type;

  // Per-lane fragment bases (byte offsets inside a stage), fixed for the whole kernel: ldmatrix rows
  // (f16/bf16) or the elements A(wm*WTM + g, t) and B(t, wn*WTN + g) (tf32, f64).
  struct Lane { unsigned a, b; };
  __device__ __forceinline__ static Lane lane_offsets() {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
    Lane l;
    if constexpr (kHalf) {
      const int mat = lane >> 3, r = lane & 7;  // ldmatrix: which 8x8 matrix, which row
      // A: matrices (m0-7, k0-7), (m8-15, k0-7), (m0-7, k8-15), (m8-15, k8-15) = a[0..3] of m16n8k16.
      const int am = AK_MAJOR ? r + 8 * (mat & 1) : 8 * (mat & 1), ak = AK_MAJOR ? 8 * (mat >> 1) : r + 8 * (mat >> 1);
      // B: (k0-7, n0-7), (k8-15, n0-7), (k0-7, n8-15), (k8-15, n8-15) = b[0..1] of two n8 atoms.
      const int bn = BK_MAJOR ? r + 8 * (mat >> 1) : 8 * (mat >> 1), bk = BK_MAJOR ? 8 * (mat & 1) : r + 8 * (mat & 1);
      l.a = a_off(wm * WTM + am, ak) * EB;
      l.b = b_off(bk, wn * WTN + bn) * EB;
    } else {
      const int g = lane >> 2, t = lane & 3;  // mma fragment coordinates
      l.a = a_off(wm * WTM + g, t) * EB;
      l.b = b_off(t, wn * WTN + g) * EB;
    }
    return l;
  }

  __device__ __forceinline__ static In lds(unsigned addr) {
    if constexpr (kF64) return lds_f64(addr);
    else if constexpr (kHalf) return In{};  // not used: half fragments come through ldmatrix
    else return lds_f32(addr);
  }

  // Fragments of k-step kk; sa/sb: the stage's shared address plus the lane's offset.
  __device__ __forceinline__ static void load_frag(Frag& f, int kk, unsigned sa, unsigned sb) {
    if constexpr (kHalf) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const unsigned addr = sa + a_off(mi * 16, kk) * EB;
        if (AK_MAJOR) ldmatrix_x4_s(f.a[mi], addr);
        else ldmatrix_x4_trans_s(f.a[mi], addr);
      }
#pragma unroll
      for (int ni = 0; ni < NI; ni += 2) {
        const unsigned addr = sb + b_off(kk, ni * 8) * EB;
        unsigned q[4];
        if (BK_MAJOR) ldmatrix_x4_s(q, addr);
        else ldmatrix_x4_trans_s(q, addr);
        f.b[ni][0] = q[0]; f.b[ni][1] = q[1]; f.b[ni + 1][0] = q[2]; f.b[ni + 1][1] = q[3];
      }
    } else if constexpr (kNarrowF64) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) f.a[mi] = lds(sa + a_off(mi * 8, kk) * EB);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) f.b[ni] = lds(sb + b_off(kk, ni * 8) * EB);
    } else {  // tf32 (rounded on the way into registers) and the sm_90 float64 shapes
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < 2 * KS; ++i) {
          const In v = lds(sa + a_off(mi * 16 + 8 * (i & 1), kk + 4 * (i >> 1)) * EB);
          if constexpr (kF64) f.a[mi][i] = v;
          else f.a[mi][i] = to_tf32(v);
        }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int i = 0; i < KS; ++i) {
          const In v = lds(sb + b_off(kk + 4 * i, ni * 8) * EB);
          if constexpr (kF64) f.b[ni][i] = v;
          else f.b[ni][i] = to_tf32(v);
        }
    }
  }

  __device__ __forceinline__ static void mma_frag(acc_t (&acc)[kAcc], const Frag& f) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int i = (mi * NI + ni) * CR;
        if constexpr (kHalf) {
          if (kBF16) mma_bf16(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], f.a[mi], f.b[ni]);
          else mma_f16(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], f.a[mi], f.b[ni]);
        } else if constexpr (kNarrowF64) {
          mma_f64(acc[i], acc[i + 1], f.a[mi], f.b[ni]);
        } else if constexpr (kF64) {
          double d[4] = {acc[i], acc[i + 1], acc[i + 2], acc[i + 3]};
          mma_f64_16x8<KS>(d, f.a[mi], f.b[ni]);
          acc[i] = d[0]; acc[i + 1] = d[1]; acc[i + 2] = d[2]; acc[i + 3] = d[3];
        } else {
          mma_tf32(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], f.a[mi], f.b[ni]);
        }
      }
  }

  // Consumer role: all mma atoms of this warp over one shared stage.  With kFragDb the fragments of
  // k-step s+1 are loaded before the mma of step s is issued (two fragment sets in registers).
  __device__ __forceinline__ static void compute_stage(acc_t (&acc)[kAcc], unsigned sa, unsigned sb) {
    constexpr int STEPS = BK / AK;
    if constexpr (kFragDb) {
      Frag f[2];
      load_frag(f[0], 0, sa, sb);
#pragma unroll
      for (int s = 0; s < STEPS; ++s) {
        if (s + 1 < STEPS) load_frag(f[(s + 1) & 1], (s + 1) * AK, sa, sb);
        mma_frag(acc, f[s & 1]);
      }
    } else {
#pragma unroll
      for (int s = 0; s < STEPS; ++s) {
        Frag f;
        load_frag(f, s * AK, sa, sb);
        mma_frag(acc, f);
      }
    }
  }

  // acc = A[m0:m0+BM, kb*BK:ke*BK] @ B[kb*BK:ke*BK, n0:n0+BN], through a kStages-deep ring.
  __device__ __forceinline__ static void run(acc_t (&acc)[kAcc], unsigned char* smem, const In* A, const In* B,
                             long long lda, long long ldb, int M, int N, int K, int m0, int n0,
                             int kb, int ke) {
    In* sA = reinterpret_cast<In*>(smem);
    In* sB = sA + kStages * A_STAGE;
    const unsigned s_a = smem_addr(sA), s_b = smem_addr(sB);
    const Lane lane = lane_offsets();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0;
    CopyA ca;
    CopyB cb;
    ca.init(A, lda, m0, M, K, kb);
    cb.init(B, ldb, n0, N, K, kb);
    const int nk = ke - kb;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) {
        ca.load(s_a + s * A_STAGE * EB);
        cb.load(s_b + s * B_STAGE * EB);
      }
      cp_async_commit();
    }
    int read = 0, write = kStages - 1;
    for (int it = 0; it < nk; ++it) {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // stage `read` landed for everyone; stage `write` is no longer being read
      if (it + kStages - 1 < nk) {
        ca.load(s_a + write * (A_STAGE * EB));
        cb.load(s_b + write * (B_STAGE * EB));
      }
      cp_async_commit();
      compute_stage(acc, s_a + read * (A_STAGE * EB) + lane.a, s_b + read * (B_STAGE * EB) + lane.b);
      read = read + 1 == kStages ? 0 : read + 1;
      write = write + 1 == kStages ? 0 : write + 1;
    }
    cp_async_wait<0>();
    __syncthreads();  // the next unit's prologue may overwrite every stage
  }
};

}  // namespace mgemm
