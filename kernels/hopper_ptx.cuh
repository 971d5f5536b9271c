// Thin wrappers over the Hopper-only PTX of the warp-specialized GEMM (sm_90a): mbarriers, TMA
// bulk tensor loads, wgmma with shared-memory descriptors, setmaxnreg.  No CUDA headers, so the
// same text compiles under NVRTC and nvcc.  Layout facts the descriptors encode are in one place:
// `sw128_desc` below; kernels/gemm_hopper.cu states the shared-memory layout that matches them.
#pragma once
#include "ptx.cuh"

namespace mgemm {
namespace hopper {

// A TMA descriptor (CUtensorMap) as the driver encodes it: 128 opaque bytes, 64-byte aligned.
// Passed by value as a `const __grid_constant__` kernel parameter; its address is the one the
// TMA unit reads.
struct alignas(64) TmaDesc {
  unsigned long long opaque[16];
};

template <class T>
struct Tag {};

// --- mbarrier ---------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(unsigned long long* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// stmatrix: four 8 x 8 matrices of 16-bit elements to shared memory.  Register j of lane l holds
// row l / 4, columns 2 (l % 4) and + 1 of matrix j (an mma accumulator fragment's layout, two
// elements packed, the lower column in the low half); lanes 8 j .. 8 j + 7 give the shared
// addresses of matrix j's rows 0..7 (16 bytes each, 16-byte aligned).
__device__ __forceinline__ void stmatrix_x4(void* row, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(row)), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// The same, each matrix stored transposed: the 16 bytes at lane 8 j + i's address hold column i of
// matrix j (its rows 0..7).
__device__ __forceinline__ void stmatrix_x4_trans(void* col, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(col)),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy (TMA) reads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Makes the initialized barriers visible to the async proxy (the TMA unit) as well.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  fence_proxy_async_shared();
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// mbar_arrive where `p` holds, as a predicated instruction rather than a branch (no divergence
// for the compiler to reconverge around).
__device__ __forceinline__ void mbar_arrive_if(bool p, unsigned long long* bar) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n"
               ::"r"(smem_addr(bar)), "r"((int)p) : "memory");
}
// One arrival that also announces `bytes` of TMA traffic the phase must wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// Waits until the phase of parity `parity` has completed.  A fresh barrier is in phase 0, so
// waiting for parity 1 returns at once: producers start their "empty" waits at parity 1.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, int parity) {
  const unsigned addr = smem_addr(bar);
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(addr), "r"(parity) : "memory");
  } while (!done);
}

// --- thread-block clusters (MGEMM_CLUSTER_M 2) ----------------------------------------------------

// This CTA's rank in its cluster (%cluster_ctarank), its cluster's index in the grid and the number
// of clusters (%clusterid.x, %nclusterid.x: the grid is 1-D, clusters of consecutive CTAs).
__device__ __forceinline__ int cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return (int)r;
}
__device__ __forceinline__ int cluster_id_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return (int)r;
}
__device__ __forceinline__ int cluster_count_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return (int)r;
}
// One arrival on the mbarrier at the same shared-memory offset as `bar` in the CTA of rank `cta` of
// this cluster (mapa gives its shared::cluster address), with the default semantics: release at CTA
// scope.  That is all a stage's release needs: the wgmma reads it follows have completed (the
// consumer waited for them), and the peer's producer only issues copies after the phase flips.
// Release at cluster scope instead compiles to a MEMBAR.ALL.GPU before every arrival (and an
// acquire at cluster scope on the producer's wait to an L1 invalidation, CCTL.IVALL, per stage).
__device__ __forceinline__ void mbar_arrive_remote(unsigned long long* bar, int cta) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
}
// Cluster-wide barrier of every thread of every CTA of the cluster: arrive (release) then wait
// (acquire).  The .aligned form where all threads of each warp execute it together (after the
// barrier setup); the plain form at the end of the kernel, where the producer's warp arrives from
// divergent paths.
__device__ __forceinline__ void cluster_sync_aligned() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// --- TMA ----------------------------------------------------------------------------------------

__device__ __forceinline__ void tma_prefetch(const TmaDesc* desc) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(desc)) : "memory");
}
// Box (c0, c1) of a 2-D tensor (c0: the contiguous coordinate) into shared memory at `dst`;
// completion is counted in bytes on `bar`.  Out-of-bounds elements are written as zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaDesc* desc, int c0, int c1,
                                            unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(desc)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}

// tma_load_2d multicast to the CTAs of this cluster whose ranks are the set bits of `cta_mask`: the
// box lands at the same CTA-relative offset as `dst` in each of their shared memories, and each
// one's mbarrier at the offset of `bar` gets the complete-tx of the box's bytes (sm_90a).
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TmaDesc* desc, int c0, int c1,
                                                      unsigned long long* bar, unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(desc)), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}

// The box at (c0, c1) of a 2-D tensor (c0: the contiguous coordinate) from shared memory at `src`
// (laid out as the descriptor's swizzle says), as one bulk store; the elements outside the tensor
// are not written.  The store joins this thread's open bulk group (tma_store_commit).  Writes of
// `src` by the generic proxy must be fenced first (fence_proxy_async_shared) and visible to the
// issuing thread (a barrier).
__device__ __forceinline__ void tma_store_2d(const TmaDesc* desc, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(desc)),
               "r"(c0), "r"(c1), "r"(smem_addr(src))
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk stores, all but the newest `Pending` groups, have read their shared memory (it
// may be written again).
template <int Pending = 0>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}
// This thread's bulk stores are all complete (written to global memory).
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// --- registers ----------------------------------------------------------------------------------

template <int N>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

// Named barrier for the `threads` threads of the consumer warpgroups (id 0 is __syncthreads).
template <int Threads>
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(Threads) : "memory"); }

// Named barrier `id` (1-15; 0 is __syncthreads) of `Threads` threads, a multiple of 32 that every
// participating warp states alike: sync waits until that many have arrived (itself included),
// arrive counts the calling warp's threads and goes on.  A phase completes at exactly `Threads`
// arrivals, so a producer-consumer pair (one warpgroup arrives, another syncs, 256 threads) must
// alternate strictly: a second arrival before the matching sync would complete the phase alone.
template <int Threads>
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(Threads) : "memory"); }
template <int Threads>
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(Threads) : "memory"); }

// --- wgmma ----------------------------------------------------------------------------------------

// Shared-memory matrix descriptor for a K-major operand in the 128-byte swizzle layout that a TMA
// load with CU_TENSOR_MAP_SWIZZLE_128B writes: each row (one m or n) is 128 bytes of K, the 16-byte
// chunk c of row r stored at chunk c ^ (r % 8), and 8 rows form a 1024-byte atom that must start
// 1024-byte aligned (so the base-offset field stays 0).  Fields: start address >> 4 (bits 0-13),
// leading byte offset >> 4 (16-29; unused by swizzled K-major layouts, set to 1), stride byte
// offset >> 4 (32-45: 1024 bytes from one 8-row atom to the next), layout (62-63: 1 = 128B
// swizzle).  Stepping K by one instruction (32 bytes) adds 32 >> 4 = 2 to the start address: the
// hardware applies the swizzle to the full address bits, as TMA did.
__device__ __forceinline__ unsigned long long sw128_desc(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
         (1ull << 62);
}

// The same for an MN-major (transposed) 16-bit operand in the 128-byte swizzle, the layout a TMA load
// of a box {64 elements of M or N (128 bytes), BK rows of K} with CU_TENSOR_MAP_SWIZZLE_128B writes:
// each 128-byte row holds 64 consecutive m (or n) of one k, the 16-byte chunk c of row r stored at
// chunk c ^ (r % 8), and 8 rows (8 consecutive k) form a 1024-byte atom.  wgmma's canonical
// MN-major 128B layout, in elements with T = 8 per 16 bytes, is
//   ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))
// i.e. 64 contiguous MN elements per row, rows 128 bytes apart along K, then the next 64 MN
// elements `lbo` bytes further (leading byte offset, bits 16-29) and the next 8 rows of K `sbo`
// bytes further (stride byte offset, bits 32-45): the roles of the two offsets are the other way
// round from the K-major layout, where only SBO is used.  Here sbo = 1024 (the atoms of one box
// follow each other along K) and lbo = the bytes of one box (the next 64 of M or N).  A wgmma k16
// step is 16 rows = two atoms = 2048 bytes: every start address stays 1024-byte aligned, so the
// base-offset field stays 0.
__device__ __forceinline__ unsigned long long sw128_mn_desc(unsigned addr, unsigned lbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

// Keeps the compiler from moving reads or writes of the accumulators across a wgmma wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D(64xN, fp32, registers) (+)= A(64x16 or 64x8 for tf32, smem desc) * B(16xN, smem desc).  TA / TB
// are the transpose immediates (imm-trans-a, imm-trans-b): 0 = K-major (sw128_desc), 1 = MN-major
// (sw128_mn_desc); f16/bf16 only, tf32 has no transpose.  scale_d = 0 ignores D's old value.  One
// overload per (N, input), each made by a macro below from the same asm text: the R = N/2
// accumulators per thread are asm operands %0..%(R-1), then the A and B descriptors, scale_d and
// (16-bit inputs) the two transpose immediates.

// Per accumulator count R (a multiple of 16 from 32 to 128: wgmma N = 2R from 64 to 256 in steps of
// 32; and 72, 88, 104, 120: N = 144, 176, 208, 240, the exact widths over a K-major B): the register
// list, the "+f" operands, and the operand numbers of what follows them (descriptors; scale_d;
// transpose immediates).  Each list is the previous one and 16 more (an exact width's: that of
// R - 8 and 8 more).
#define MGEMM_ACC_REGS_32 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MGEMM_ACC_REGS_48 MGEMM_ACC_REGS_32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define MGEMM_ACC_REGS_64 MGEMM_ACC_REGS_48 ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define MGEMM_ACC_REGS_80 MGEMM_ACC_REGS_64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define MGEMM_ACC_REGS_96 MGEMM_ACC_REGS_80 ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define MGEMM_ACC_REGS_112 MGEMM_ACC_REGS_96 ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define MGEMM_ACC_REGS_128 MGEMM_ACC_REGS_112 ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define MGEMM_ACC_REGS_72 MGEMM_ACC_REGS_64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define MGEMM_ACC_REGS_88 MGEMM_ACC_REGS_80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define MGEMM_ACC_REGS_104 MGEMM_ACC_REGS_96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define MGEMM_ACC_REGS_120 MGEMM_ACC_REGS_112 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define MGEMM_ACC_F8(i) \
  "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), \
  "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define MGEMM_ACC_OUT_32 MGEMM_ACC_F8(0), MGEMM_ACC_F8(8), MGEMM_ACC_F8(16), MGEMM_ACC_F8(24)
#define MGEMM_ACC_OUT_48 MGEMM_ACC_OUT_32, MGEMM_ACC_F8(32), MGEMM_ACC_F8(40)
#define MGEMM_ACC_OUT_64 MGEMM_ACC_OUT_48, MGEMM_ACC_F8(48), MGEMM_ACC_F8(56)
#define MGEMM_ACC_OUT_80 MGEMM_ACC_OUT_64, MGEMM_ACC_F8(64), MGEMM_ACC_F8(72)
#define MGEMM_ACC_OUT_96 MGEMM_ACC_OUT_80, MGEMM_ACC_F8(80), MGEMM_ACC_F8(88)
#define MGEMM_ACC_OUT_112 MGEMM_ACC_OUT_96, MGEMM_ACC_F8(96), MGEMM_ACC_F8(104)
#define MGEMM_ACC_OUT_128 MGEMM_ACC_OUT_112, MGEMM_ACC_F8(112), MGEMM_ACC_F8(120)
#define MGEMM_ACC_OUT_72 MGEMM_ACC_OUT_64, MGEMM_ACC_F8(64)
#define MGEMM_ACC_OUT_88 MGEMM_ACC_OUT_80, MGEMM_ACC_F8(80)
#define MGEMM_ACC_OUT_104 MGEMM_ACC_OUT_96, MGEMM_ACC_F8(96)
#define MGEMM_ACC_OUT_120 MGEMM_ACC_OUT_112, MGEMM_ACC_F8(112)
#define MGEMM_ACC_REST_32 "%32, %33", "%34", ", %35, %36"
#define MGEMM_ACC_REST_48 "%48, %49", "%50", ", %51, %52"
#define MGEMM_ACC_REST_64 "%64, %65", "%66", ", %67, %68"
#define MGEMM_ACC_REST_80 "%80, %81", "%82", ", %83, %84"
#define MGEMM_ACC_REST_96 "%96, %97", "%98", ", %99, %100"
#define MGEMM_ACC_REST_112 "%112, %113", "%114", ", %115, %116"
#define MGEMM_ACC_REST_128 "%128, %129", "%130", ", %131, %132"

#define MGEMM_ACC_REST_72 "%72, %73", "%74", ", %75, %76"
#define MGEMM_ACC_REST_88 "%88, %89", "%90", ", %91, %92"
#define MGEMM_ACC_REST_104 "%104, %105", "%106", ", %107, %108"
#define MGEMM_ACC_REST_120 "%120, %121", "%122", ", %123, %124"
// The asm text of one wgmma.  REST is an MGEMM_ACC_REST_R (expanded before MGEMM_WGMMA_ASM_ splits
// it); WITH_TRANS is 1 for the 16-bit inputs (the transpose operands follow), 0 for tf32.
#define MGEMM_WGMMA_ASM(R, SHAPE_TYPES, REST, WITH_TRANS) MGEMM_WGMMA_ASM_(R, SHAPE_TYPES, WITH_TRANS, REST)
#define MGEMM_WGMMA_ASM_(R, SHAPE_TYPES, WITH_TRANS, DESC, SCALE, TRANS)                           \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n"                                                \
  "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" MGEMM_ACC_REGS_##R "}, " DESC ", p, 1, 1"       \
      MGEMM_TRANS_##WITH_TRANS(TRANS) ";\n}\n"
#define MGEMM_TRANS_1(TRANS) TRANS
#define MGEMM_TRANS_0(TRANS)

// The 16-bit overloads (f16, bf16): R accumulators, wgmma m64n(2R)k16 with the transpose operands.
#define MGEMM_WGMMA_SS_16(R, N, T, PTX)                                                                 \
  template <int TA = 0, int TB = 0>                                                                  \
  __device__ __forceinline__ void wgmma_ss(float (&d)[R], unsigned long long da, unsigned long long db, \
                                           int scale_d, Tag<T>) {                                    \
    asm volatile(MGEMM_WGMMA_ASM(R, "m64n" #N "k16.f32." PTX "." PTX, MGEMM_ACC_REST_##R, 1)        \
                 : MGEMM_ACC_OUT_##R                                                                 \
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));                                \
  }
// tf32: wgmma m64n(2R)k8, K-major operands only.
#define MGEMM_WGMMA_SS_TF32(R, N)                                                                       \
  template <int TA = 0, int TB = 0>                                                                  \
  __device__ __forceinline__ void wgmma_ss(float (&d)[R], unsigned long long da, unsigned long long db, \
                                           int scale_d, Tag<float>) {                                \
    static_assert(TA == 0 && TB == 0, "wgmma has no transpose for tf32: both operands K-major");     \
    asm volatile(MGEMM_WGMMA_ASM(R, "m64n" #N "k8.f32.tf32.tf32", MGEMM_ACC_REST_##R, 0)            \
                 : MGEMM_ACC_OUT_##R                                                                 \
                 : "l"(da), "l"(db), "r"(scale_d));                                                  \
  }

MGEMM_WGMMA_SS_16(32, 64, f16_t, "f16")
MGEMM_WGMMA_SS_16(32, 64, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(32, 64)
MGEMM_WGMMA_SS_16(48, 96, f16_t, "f16")
MGEMM_WGMMA_SS_16(48, 96, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(48, 96)
MGEMM_WGMMA_SS_16(64, 128, f16_t, "f16")
MGEMM_WGMMA_SS_16(64, 128, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(64, 128)
MGEMM_WGMMA_SS_16(80, 160, f16_t, "f16")
MGEMM_WGMMA_SS_16(80, 160, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(80, 160)
MGEMM_WGMMA_SS_16(96, 192, f16_t, "f16")
MGEMM_WGMMA_SS_16(96, 192, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(96, 192)
MGEMM_WGMMA_SS_16(112, 224, f16_t, "f16")
MGEMM_WGMMA_SS_16(112, 224, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(112, 224)
MGEMM_WGMMA_SS_16(128, 256, f16_t, "f16")
MGEMM_WGMMA_SS_16(128, 256, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(128, 256)
MGEMM_WGMMA_SS_16(72, 144, f16_t, "f16")
MGEMM_WGMMA_SS_16(72, 144, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(72, 144)
MGEMM_WGMMA_SS_16(88, 176, f16_t, "f16")
MGEMM_WGMMA_SS_16(88, 176, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(88, 176)
MGEMM_WGMMA_SS_16(104, 208, f16_t, "f16")
MGEMM_WGMMA_SS_16(104, 208, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(104, 208)
MGEMM_WGMMA_SS_16(120, 240, f16_t, "f16")
MGEMM_WGMMA_SS_16(120, 240, bf16_t, "bf16")
MGEMM_WGMMA_SS_TF32(120, 240)
#undef MGEMM_WGMMA_SS_TF32
#undef MGEMM_WGMMA_SS_16
#undef MGEMM_TRANS_0
#undef MGEMM_TRANS_1
#undef MGEMM_WGMMA_ASM_
#undef MGEMM_WGMMA_ASM
#undef MGEMM_ACC_REGS_32
#undef MGEMM_ACC_REGS_48
#undef MGEMM_ACC_REGS_64
#undef MGEMM_ACC_REGS_80
#undef MGEMM_ACC_REGS_96
#undef MGEMM_ACC_REGS_112
#undef MGEMM_ACC_REGS_128
#undef MGEMM_ACC_F8
#undef MGEMM_ACC_OUT_32
#undef MGEMM_ACC_OUT_48
#undef MGEMM_ACC_OUT_64
#undef MGEMM_ACC_OUT_80
#undef MGEMM_ACC_OUT_96
#undef MGEMM_ACC_OUT_112
#undef MGEMM_ACC_OUT_128
#undef MGEMM_ACC_REST_32
#undef MGEMM_ACC_REST_48
#undef MGEMM_ACC_REST_64
#undef MGEMM_ACC_REST_80
#undef MGEMM_ACC_REST_96
#undef MGEMM_ACC_REST_112
#undef MGEMM_ACC_REST_128

}  // namespace hopper
}  // namespace mgemm
