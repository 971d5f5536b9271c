// Thin wrappers over the PTX the GEMM mainloops use (cp.async, ldmatrix, mma.sync, conversions,
// acquire/release flags).  mma is not volatile, so the compiler may interleave it with the next
// fragment loads; the shared-memory ops stay volatile and keep their place.  No CUDA headers: the same text compiles under NVRTC and nvcc.
#pragma once

namespace mgemm {

// unrolled<N>(f): f(0), f(1), ..., f(N - 1), each call its own straight-line code, so an index into
// a register array stays a constant.  A loop the compiler unrolls only in part (its size limits
// can override #pragma unroll) indexes the array at run time, which moves it to local memory.
template <int... I> struct IndexList {};
template <int N, int... I> struct MakeIndexList : MakeIndexList<N - 1, N - 1, I...> {};
template <int... I> struct MakeIndexList<0, I...> { using type = IndexList<I...>; };
template <class F, int... I>
__device__ __forceinline__ void unrolled_list(F& f, IndexList<I...>) { (f(I), ...); }
template <int N, class F>
__device__ __forceinline__ void unrolled(F&& f) { unrolled_list(f, typename MakeIndexList<N>::type{}); }

struct f16_t { unsigned short bits; };
struct bf16_t { unsigned short bits; };

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned r;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

// Copies `src_bytes` (0..16) bytes and zero-fills the rest of the 16-byte chunk: masked edges.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
// The same on a shared-window address (smem_addr), so that a mainloop converts its base once.
__device__ __forceinline__ void cp_async16_s(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// A whole 16-byte chunk, no zero-fill operand (tiles known to lie inside the matrix).
__device__ __forceinline__ void cp_async16_full_s(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async4_s(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_s(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans_s(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// Shared loads kept in program order (volatile), like ldmatrix: the mainloop decides how far ahead
// of the mma its fragments are fetched, and so how many registers they hold.
__device__ __forceinline__ float lds_f32(unsigned addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ double lds_f64(unsigned addr) {
  double v;
  asm volatile("ld.shared.f64 %0, [%1];\n" : "=d"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ void mma_f16(float& d0, float& d1, float& d2, float& d3, const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_bf16(float& d0, float& d1, float& d2, float& d3, const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_tf32(float& d0, float& d1, float& d2, float& d3, const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_f64(double& d0, double& d1, double a, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+d"(d0), "+d"(d1)
               : "d"(a), "d"(b));
}

// sm_90 double-precision shapes m16n8k4, m16n8k8, m16n8k16 (PTX ISA 7.8; not on sm_80).  KS = K/4:
// a[i] holds A(g + 8*(i%2), t + 4*(i/2)), b[i] holds B(t + 4*i, g), d as the f16/tf32 m16n8 atoms:
// d[r] at (g + 8*(r/2), 2*t + r%2), with g = lane/4 and t = lane%4.
template <int KS>
__device__ __forceinline__ void mma_f64_16x8(double (&d)[4], const double (&a)[2 * KS], const double (&b)[KS]);
template <>
__device__ __forceinline__ void mma_f64_16x8<1>(double (&d)[4], const double (&a)[2], const double (&b)[1]) {
  asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(b[0]));
}
template <>
__device__ __forceinline__ void mma_f64_16x8<2>(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}
template <>
__device__ __forceinline__ void mma_f64_16x8<4>(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
      "{%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// Storage types <-> the accumulator type.
__device__ __forceinline__ float to_acc(f16_t x) {
  float r;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"(x.bits));
  return r;
}
__device__ __forceinline__ float to_acc(bf16_t x) { return __uint_as_float((unsigned)x.bits << 16); }
__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }

template <class T>
struct Store;
template <>
struct Store<f16_t> {
  __device__ static f16_t from(float x) {
    f16_t r;
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r.bits) : "f"(x));
    return r;
  }
};
template <>
struct Store<bf16_t> {
  __device__ static bf16_t from(float x) {
    bf16_t r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r.bits) : "f"(x));
    return r;
  }
};
template <>
struct Store<float> {
  __device__ static float from(float x) { return x; }
};
template <>
struct Store<double> {
  __device__ static double from(double x) { return x; }
};

// Two adjacent elements as one aligned access (p aligned to 2 * sizeof(T)): the epilogues' paired
// stores of accumulators that hold columns c, c + 1 (c even) of one row.  A: the accumulator type.
template <class T, class A>
__device__ __forceinline__ void load_pair(const T* p, A& x0, A& x1) {
  if constexpr (sizeof(T) == 2) {
    const unsigned w = *reinterpret_cast<const unsigned*>(p);
    T e0, e1;
    e0.bits = (unsigned short)(w & 0xFFFFu);  // little endian: the lower address is the low half
    e1.bits = (unsigned short)(w >> 16);
    x0 = to_acc(e0);
    x1 = to_acc(e1);
  } else if constexpr (sizeof(T) == 4) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    x0 = v.x;
    x1 = v.y;
  } else {
    const double2 v = *reinterpret_cast<const double2*>(p);
    x0 = v.x;
    x1 = v.y;
  }
}
// Two 16-bit elements in one word, x0 in the low half (the lower address).
template <class T>
__device__ __forceinline__ unsigned pack_pair(float x0, float x1) {
  return (unsigned)Store<T>::from(x0).bits | ((unsigned)Store<T>::from(x1).bits << 16);
}
template <class T, class A>
__device__ __forceinline__ void store_pair(T* p, A x0, A x1) {
  if constexpr (sizeof(T) == 2) {
    *reinterpret_cast<unsigned*>(p) = pack_pair<T>(x0, x1);
  } else if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float2*>(p) = make_float2((float)x0, (float)x1);
  } else {
    *reinterpret_cast<double2*>(p) = make_double2((double)x0, (double)x1);
  }
}
// The epilogues' paired stores of one accumulator pair x0, x1 (columns gc, gc + 1 of row gr, gc
// even): D = x + b * C (C read when kReadC), as one paired access where both columns lie inside N,
// one element where only gc does.  D and C as pairs_ok allows.
template <bool kReadC, class T, class A>
__device__ __forceinline__ void epilogue_pair(const T* C, T* D, long long ldc_m, long long ldd_m, int gr,
                                              int gc, int N, A x0, A x1, A b) {
  if (gc + 1 < N) {
    if (kReadC) {
      A c0, c1;
      load_pair(C + gr * ldc_m + gc, c0, c1);
      x0 += b * c0;
      x1 += b * c1;
    }
    store_pair(D + gr * ldd_m + gc, x0, x1);
  } else if (gc < N) {  // the last, odd column
    if (kReadC) x0 += b * to_acc(C[gr * ldc_m + gc]);
    D[gr * ldd_m + gc] = Store<T>::from(x0);
  }
}

// Whether a matrix at p with strides (ld_m, ld_n) takes paired accesses: row-major, even rows.
template <class T>
__device__ __forceinline__ bool pairs_ok(const T* p, long long ld_m, long long ld_n) {
  return ld_n == 1 && (ld_m & 1) == 0 && (reinterpret_cast<unsigned long long>(p) % (2 * sizeof(T))) == 0;
}

// Stream-K flags: a contributor releases its partial (the flag becomes v), the owner acquires it.
__device__ __forceinline__ void flag_release(int* p, int v = 1) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int flag_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

}  // namespace mgemm
