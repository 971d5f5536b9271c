// Tensor-core mainloop (sm_80 and later): a multi-stage cp.async ring in shared memory feeding
// mma.sync.  float16/bfloat16 fragments come through ldmatrix (.trans for MN-major tiles), tf32 and
// float64 fragments through plain shared loads.  Shared tiles keep the global layout, each row
// padded by one 16-byte chunk (or two) so that fragment loads hit distinct banks; with
// Cfg::kSwizzle (float16/bfloat16) rows are unpadded and the 16-byte chunks of a row are permuted
// by an XOR of their index with the row (see Swz), which keeps ldmatrix conflict-free.
//
// Opt-in variants (each off by default, each its own compile-time knob):
//   kSwizzle   XOR-swizzled tiles instead of padding (less shared memory per stage);
//   kFastCopy  tiles wholly inside M, N and K are copied without edge masks (no src-size operand);
//   kFragCarry the barrier of k-tile t+1 is taken before the last k-step's mma of k-tile t, and
//              k-tile t+1's first fragments are loaded across it (needs kFragDb, an even k-step count).
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
template <bool V> struct Bool { static constexpr bool value = V; };
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

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
  static constexpr bool kSwz = Cfg::kSwizzle && kHalf;
  static constexpr bool kFast = Cfg::kFastCopy;
  static constexpr bool kCarry = Cfg::kFragCarry && kFragDb;  // (mgemm/kernels.py allows it for f16/bf16)

  static constexpr int EB = sizeof(In), CH = 16 / EB;  // bytes per element, elements per chunk
  static constexpr int PAD_A = kSwz ? 0 : (kHalf ? 8 : (kF64 ? 4 : (AK_MAJOR ? 4 : 8)));
  static constexpr int PAD_B = kSwz ? 0 : (kHalf ? 8 : (kF64 ? 4 : (BK_MAJOR ? 4 : 8)));
  static constexpr int A_OUTER = AK_MAJOR ? BM : BK, A_INNER = AK_MAJOR ? BK : BM;
  static constexpr int B_OUTER = BK_MAJOR ? BN : BK, B_INNER = BK_MAJOR ? BK : BN;
  static constexpr int A_PITCH = A_INNER + PAD_A, B_PITCH = B_INNER + PAD_B;
  static constexpr int A_STAGE = A_OUTER * A_PITCH, B_STAGE = B_OUTER * B_PITCH;
  static constexpr int kSmemBytes = kStages * (A_STAGE + B_STAGE) * EB;

  static constexpr int WTM = BM / WM, WTN = BN / WN;  // warp tile
  static constexpr int MI = WTM / AM, NI = WTN / AN;  // atoms per warp tile
  static constexpr int kAcc = MI * NI * CR;
  static constexpr bool kPairStores = true;  // the epilogue may store accumulators i, i + 1 as a pair

  static_assert(!kF64 || Cfg::kDmmaK == 0 || Cfg::kDmmaK == 4 || Cfg::kDmmaK == 8 || Cfg::kDmmaK == 16,
                "float64 mma k: 0 (m8n8k4), 4, 8 or 16");
  static_assert(BM % (WM * AM) == 0 && BN % (WN * AN) == 0, "warp tile must hold whole mma atoms");
  static_assert(BK % AK == 0 && BK % CH == 0 && BM % CH == 0 && BN % CH == 0, "tile vs atom/chunk");
  static_assert(!kHalf || NI % 2 == 0, "ldmatrix.x4 loads B for two n8 atoms at a time");
  static_assert(kStages >= 2, "the ring needs two stages at least");
  static_assert(!Cfg::kFragCarry || (kFragDb && (BK / AK) % 2 == 0),
                "frag carry needs fragment double-buffering (f16, bf16, f64) and an even k-step count");

  // XOR swizzle of an unpadded tile with rows of INNER elements (CPR 16-byte chunks).  Rows are
  // taken RPL at a time as one 128-byte line of CW*RPL = 8 chunks; the chunk c of row o sits at
  // chunk c ^ f(o), f(o) = (o / RPL) mod CW, inside its own row.  The 8 row addresses of one
  // ldmatrix matrix (8 consecutive rows from a multiple of 8, one chunk column) then fall in 8
  // distinct 16-byte bank groups.  f is unchanged by any row displacement that is a multiple of 8,
  // so fragment addresses are a per-lane base per chunk column plus compile-time row offsets.
  template <int INNER>
  struct Swz {
    static constexpr int CPR = INNER / CH;
    static constexpr int CW = CPR >= 8 ? 8 : CPR, RPL = 8 / CW;
    static_assert(CPR >= 1 && (CPR & (CPR - 1)) == 0, "swizzle: chunks per row must be a power of two");
    __device__ __forceinline__ static constexpr int f(int o) { return (o / RPL) & (CW - 1); }
    // Byte offset of chunk c of row o inside a stage.
    __device__ __forceinline__ static constexpr int off(int o, int c) { return o * INNER * EB + 16 * (c ^ f(o)); }
  };

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

    using SW = Swz<INNER>;
    // Chunk j's row is o0 + j*RPP: its swizzle term equals chunk 0's when RPP is a multiple of 8.
    static constexpr bool kSwzFixed = !kSwz || RPP % 8 == 0;

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
      soff = kSwz ? SW::off(o0, threadIdx.x % CPR) : (o0 * PITCH + i0) * EB;
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

    // Shared byte offset (inside a stage) of this thread's chunk j.
    __device__ __forceinline__ unsigned dst(int j) const {
      if constexpr (kSwzFixed) return soff + j * RPP * PITCH * EB;
      else return SW::off(o0 + j * RPP, threadIdx.x % CPR);
    }

    // Issue this thread's copies of the next k-tile into the stage at shared address `stage`.
    __device__ __forceinline__ void load(unsigned stage) {
      const In* src = g;  // walked by `step` (not g + j*step: that keeps P 64-bit offsets live)
      const int kbytes = kleft >= CH ? 16 : (kleft > 0 ? kleft * EB : 0);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int bytes = K_CONTIG ? ((mask >> j) & 1 ? kbytes : 0) : (j * RPP < kleft ? (int)mask : 0);
        if (kWhole || j < P - 1 || o0 + j * RPP < OUTER) cp_async16_s(stage + dst(j), src, bytes);
        src += step;
      }
      g += advance;
      kleft -= BK;
    }

    // A k-tile wholly inside M/N and K (the caller checks): every chunk is a full 16-byte copy.
    __device__ __forceinline__ void load_full(unsigned stage) {
      const In* src = g;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        if (kWhole || j < P - 1 || o0 + j * RPP < OUTER) cp_async16_full_s(stage + dst(j), src);
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

  // Swizzled tiles: per-lane byte offsets (inside a stage) of the ldmatrix row this lane points at,
  // one per chunk column that its fragments use.  Every fragment's chunk column is the lane's plus
  // 2j (j: the k-step for a K-major tile, the m16 atom for MN-major A, the n16 pair for MN-major B);
  // its row is the lane's plus a multiple of 8 (16*mi, 8*ni or kk), which leaves the swizzle alone.
  using SwA = Swz<A_INNER>;
  using SwB = Swz<B_INNER>;
  static constexpr int NCA = kSwz ? (AK_MAJOR ? BK / AK : MI) : 1;
  static constexpr int NCB = kSwz ? (BK_MAJOR ? BK / AK : NI / 2) : 1;
  struct SwzLane { unsigned a[NCA], b[NCB]; };
  __device__ __forceinline__ static SwzLane swz_lane_offsets() {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
    const int mat = lane >> 3, r = lane & 7;
    // (row, chunk column) of the lane's ldmatrix row, as in lane_offsets
    const int ao = AK_MAJOR ? wm * WTM + r + 8 * (mat & 1) : r + 8 * (mat >> 1);
    const int ac = AK_MAJOR ? (mat >> 1) : (wm * WTM) / CH + (mat & 1);
    const int bo = BK_MAJOR ? wn * WTN + r + 8 * (mat >> 1) : r + 8 * (mat & 1);
    const int bc = BK_MAJOR ? (mat & 1) : (wn * WTN) / CH + (mat >> 1);
    SwzLane l;
#pragma unroll
    for (int j = 0; j < NCA; ++j) l.a[j] = SwA::off(ao, ac + 2 * j);
#pragma unroll
    for (int j = 0; j < NCB; ++j) l.b[j] = SwB::off(bo, bc + 2 * j);
    return l;
  }
  using LaneT = typename cond<kSwz, SwzLane, Lane>::type;
  __device__ __forceinline__ static LaneT lanes() {
    if constexpr (kSwz) return swz_lane_offsets();
    else return lane_offsets();
  }

  // Fragment addresses of one stage: padded tiles: the stage's shared address plus the lane's
  // offset (every fragment at a compile-time displacement from it); swizzled: one per chunk column.
  struct PadAddr { unsigned a, b; };
  struct SwzAddr { unsigned a[NCA], b[NCB]; };
  using StageAddr = typename cond<kSwz, SwzAddr, PadAddr>::type;
  __device__ __forceinline__ static PadAddr stage_addr(unsigned sa, unsigned sb, const Lane& l) {
    return PadAddr{sa + l.a, sb + l.b};
  }
  __device__ __forceinline__ static SwzAddr stage_addr(unsigned sa, unsigned sb, const SwzLane& l) {
    SwzAddr s;
#pragma unroll
    for (int j = 0; j < NCA; ++j) s.a[j] = sa + l.a[j];
#pragma unroll
    for (int j = 0; j < NCB; ++j) s.b[j] = sb + l.b[j];
    return s;
  }
  // ldmatrix address of A's m16 atom mi and B's n8 atoms ni, ni+1 at k-step kk.
  __device__ __forceinline__ static unsigned a_addr(const PadAddr& s, int mi, int kk) { return s.a + a_off(mi * 16, kk) * EB; }
  __device__ __forceinline__ static unsigned b_addr(const PadAddr& s, int ni, int kk) { return s.b + b_off(kk, ni * 8) * EB; }
  __device__ __forceinline__ static unsigned a_addr(const SwzAddr& s, int mi, int kk) {
    return AK_MAJOR ? s.a[kk / AK] + mi * 16 * A_INNER * EB : s.a[mi] + kk * A_INNER * EB;
  }
  __device__ __forceinline__ static unsigned b_addr(const SwzAddr& s, int ni, int kk) {
    return BK_MAJOR ? s.b[kk / AK] + ni * 8 * B_INNER * EB : s.b[ni / 2] + kk * B_INNER * EB;
  }

  __device__ __forceinline__ static In lds(unsigned addr) {
    if constexpr (kF64) return lds_f64(addr);
    else if constexpr (kHalf) return In{};  // not used: half fragments come through ldmatrix
    else return lds_f32(addr);
  }

  // Fragments of k-step kk of the stage addressed by st.
  __device__ __forceinline__ static void load_frag(Frag& f, int kk, const StageAddr& st) {
    if constexpr (kHalf) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const unsigned addr = a_addr(st, mi, kk);
        if (AK_MAJOR) ldmatrix_x4_s(f.a[mi], addr);
        else ldmatrix_x4_trans_s(f.a[mi], addr);
      }
#pragma unroll
      for (int ni = 0; ni < NI; ni += 2) {
        const unsigned addr = b_addr(st, ni, kk);
        unsigned q[4];
        if (BK_MAJOR) ldmatrix_x4_s(q, addr);
        else ldmatrix_x4_trans_s(q, addr);
        f.b[ni][0] = q[0]; f.b[ni][1] = q[1]; f.b[ni + 1][0] = q[2]; f.b[ni + 1][1] = q[3];
      }
    } else if constexpr (kNarrowF64) {
      const unsigned sa = st.a, sb = st.b;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) f.a[mi] = lds(sa + a_off(mi * 8, kk) * EB);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) f.b[ni] = lds(sb + b_off(kk, ni * 8) * EB);
    } else {  // tf32 (rounded on the way into registers) and the sm_90 float64 shapes
      const unsigned sa = st.a, sb = st.b;
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
  __device__ __forceinline__ static void compute_stage(acc_t (&acc)[kAcc], const StageAddr& st) {
    constexpr int STEPS = BK / AK;
    if constexpr (kFragDb) {
      Frag f[2];
      load_frag(f[0], 0, st);
#pragma unroll
      for (int s = 0; s < STEPS; ++s) {
        if (s + 1 < STEPS) load_frag(f[(s + 1) & 1], (s + 1) * AK, st);
        mma_frag(acc, f[s & 1]);
      }
    } else {
#pragma unroll
      for (int s = 0; s < STEPS; ++s) {
        Frag f;
        load_frag(f, s * AK, st);
        mma_frag(acc, f);
      }
    }
  }

  // Copies of one k-tile into a stage; `full`: the k-tile lies wholly inside M/N and K.
  __device__ __forceinline__ static void load_tile(CopyA& ca, CopyB& cb, unsigned a, unsigned b, bool full) {
    if (kFast && full) {
      ca.load_full(a);
      cb.load_full(b);
    } else {
      ca.load(a);
      cb.load(b);
    }
  }

  // acc = A[m0:m0+BM, kb*BK:ke*BK] @ B[kb*BK:ke*BK, n0:n0+BN], through a kStages-deep ring.
  __device__ __forceinline__ static void run(acc_t (&acc)[kAcc], unsigned char* smem, const In* A, const In* B,
                             long long lda, long long ldb, int M, int N, int K, int m0, int n0,
                             int kb, int ke) {
    In* sA = reinterpret_cast<In*>(smem);
    In* sB = sA + kStages * A_STAGE;
    const unsigned s_a = smem_addr(sA), s_b = smem_addr(sB);
    const LaneT lane = lanes();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0;
    CopyA ca;
    CopyB cb;
    ca.init(A, lda, m0, M, K, kb);
    cb.init(B, ldb, n0, N, K, kb);
    const int nk = ke - kb;
    const bool full_mn = m0 + BM <= M && n0 + BN <= N;  // kFast: k-tiles below kfull copy unmasked
    const int kfull = K / BK;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) load_tile(ca, cb, s_a + s * A_STAGE * EB, s_b + s * B_STAGE * EB, full_mn && kb + s < kfull);
      cp_async_commit();
    }
    int read = 0, write = kStages - 1;
    // kFast: iterations [0, fast_end) refill a stage with a k-tile wholly inside M/N and K; they run
    // in a loop of their own (a branch per k-tile would leave both copy paths predicated in one).
    int it = 0;
    const int fast_end = kFast && full_mn ? imin(nk, kfull - kb) - (kStages - 1) : 0;
    if constexpr (!kCarry && !kFast) {  // the plain ring (kept literally: its code is the reference)
      for (; it < nk; ++it) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // stage `read` landed for everyone; stage `write` is no longer being read
        if (it + kStages - 1 < nk) {
          ca.load(s_a + write * (A_STAGE * EB));
          cb.load(s_b + write * (B_STAGE * EB));
        }
        cp_async_commit();
        compute_stage(acc, stage_addr(s_a + read * (A_STAGE * EB), s_b + read * (B_STAGE * EB), lane));
        read = read + 1 == kStages ? 0 : read + 1;
        write = write + 1 == kStages ? 0 : write + 1;
      }
    } else if constexpr (!kCarry) {
      auto body = [&](auto full) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // stage `read` landed for everyone; stage `write` is no longer being read
        if (decltype(full)::value || it + kStages - 1 < nk)
          load_tile(ca, cb, s_a + write * (A_STAGE * EB), s_b + write * (B_STAGE * EB), decltype(full)::value);
        cp_async_commit();
        compute_stage(acc, stage_addr(s_a + read * (A_STAGE * EB), s_b + read * (B_STAGE * EB), lane));
        read = read + 1 == kStages ? 0 : read + 1;
        write = write + 1 == kStages ? 0 : write + 1;
      };
      if constexpr (kFast)
        for (; it < fast_end; ++it) body(Bool<true>{});
      for (; it < nk; ++it) body(Bool<false>{});
    } else {
      // The barrier of k-tile it+1 sits before the last k-step's mma of k-tile it (whose fragments
      // are then in registers): the mma already issued covers the wait, and k-tile it+1's first
      // fragments are loaded across it.  Stage `write` (read during k-tile it-1) is free once
      // k-tile it-1's barrier has passed, since all of its fragments were loaded before it.
      constexpr int STEPS = BK / AK;
      Frag f[2];
      cp_async_wait<kStages - 2>();
      __syncthreads();
      if (nk > 0) load_frag(f[0], 0, stage_addr(s_a, s_b, lane));
      auto body = [&](auto full) {
        if (decltype(full)::value || it + kStages - 1 < nk)
          load_tile(ca, cb, s_a + write * (A_STAGE * EB), s_b + write * (B_STAGE * EB), decltype(full)::value);
        cp_async_commit();
        const StageAddr cur = stage_addr(s_a + read * (A_STAGE * EB), s_b + read * (B_STAGE * EB), lane);
        read = read + 1 == kStages ? 0 : read + 1;
        write = write + 1 == kStages ? 0 : write + 1;
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
          if (s + 1 < STEPS) {
            load_frag(f[(s + 1) & 1], (s + 1) * AK, cur);
          } else {
            cp_async_wait<kStages - 2>();
            __syncthreads();  // k-tile it+1 landed for everyone; k-tile it's fragments are loaded
            if (it + 1 < nk)
              load_frag(f[0], 0, stage_addr(s_a + read * (A_STAGE * EB), s_b + read * (B_STAGE * EB), lane));
          }
          mma_frag(acc, f[s & 1]);
        }
      };
      if constexpr (kFast)
        for (; it < fast_end; ++it) body(Bool<true>{});
      for (; it < nk; ++it) body(Bool<false>{});
    }
    cp_async_wait<0>();
    __syncthreads();  // the next unit's prologue may overwrite every stage
  }
};

}  // namespace mgemm
