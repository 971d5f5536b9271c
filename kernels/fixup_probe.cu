// Fix-up probe (benchmarks/fixup_probe.py): what a split tile pays after its mainloop, alone, for a
// 128 x 128 float32 partial per CTA (256 threads x 64 accumulators, the cooperative consumers'
// share), `ways` CTAs per tile, tile = blockIdx.x / ways.  No mainloop: each thread's accumulators
// are small values from its CTA and element, so the sum of a tile is known.  Nothing in mgemm
// launches it.
//
//   mgemm_fixup_store:  store the partial to the CTA's workspace slot, release its flag (no reduce):
//                       the cost of the stores alone.
//   mgemm_fixup_spread: the deterministic spread fix-up, simplified: store, release, wait for every
//                       contributor of the tile, add the CTA's share of the tile's chunks over all
//                       partials in contributor order, store that share as 16-bit output.
//   mgemm_fixup_l2:     reduce in the L2: red.global.add.v4.f32 of the partial into the tile's one
//                       float32 slot (zero before), fence, count the tile's arrivals; the last
//                       arriver reads the sum, stores it as 16-bit output and zeroes the slot and
//                       its counter for the next launch.  The sum's bits depend on arrival order.
//
// The output is float16 (stored as packed pairs), 16384 elements a tile, tile after tile, element j
// of float4 chunk q (q = i / 4 * 256 + thread, i the accumulator index) at 4 q + j.
#include "ptx.cuh"  // flag_release, flag_acquire: the stream-K flags of the GEMM kernels

using mgemm::flag_acquire;
using mgemm::flag_release;

constexpr int kThreads = 256, kAcc = 64, kElems = kThreads * kAcc, kChunks = kElems / 4;

// The accumulators of thread t of CTA c: element i of the partial is (c % ways + 1) * 2^-10 +
// (i & 7) * 2^-12, exact in float32 sums over up to 132 contributors.
__device__ __forceinline__ void fill(float (&acc)[kAcc], int ways) {
  const float base = (blockIdx.x % ways + 1) * (1.f / 1024.f);
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = base + (i & 7) * (1.f / 4096.f);
}

__device__ __forceinline__ void store_slot(const float (&acc)[kAcc], float4* slot) {
#pragma unroll
  for (int i = 0; i < kAcc; i += 4)
    slot[(i / 4) * kThreads + threadIdx.x] = make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
}

__device__ __forceinline__ void add_to(float4& s, const float4& x) {
  s.x += x.x;
  s.y += x.y;
  s.z += x.z;
  s.w += x.w;
}

// Four float32 values rounded to float16 (two packed pairs, low half first), as chunk `chunk`.
__device__ __forceinline__ void store_out(const float4& x, unsigned* out, int chunk) {
  unsigned lo, hi;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(x.y), "f"(x.x));
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(x.w), "f"(x.z));
  reinterpret_cast<uint2*>(out)[chunk] = make_uint2(lo, hi);
}

extern "C" __global__ void __launch_bounds__(kThreads) mgemm_fixup_store(float* ws, int* flags, int epoch, int ways) {
  float acc[kAcc];
  fill(acc, ways);
  store_slot(acc, reinterpret_cast<float4*>(ws) + (long long)blockIdx.x * kChunks);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) flag_release(flags + blockIdx.x, epoch);
}

extern "C" __global__ void __launch_bounds__(kThreads) mgemm_fixup_spread(float* ws, int* flags, int epoch, int ways,
                                                                          unsigned* out) {
  float acc[kAcc];
  fill(acc, ways);
  const float4* tile = reinterpret_cast<const float4*>(ws) + (long long)(blockIdx.x / ways) * ways * kChunks;
  store_slot(acc, reinterpret_cast<float4*>(ws) + (long long)blockIdx.x * kChunks);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) flag_release(flags + blockIdx.x, epoch);
  const int first = blockIdx.x / ways * ways, r = blockIdx.x % ways;
  for (int c = threadIdx.x; c < ways; c += kThreads)
    while (flag_acquire(flags + first + c) != epoch) {
    }
  __syncthreads();
  const int c0 = kChunks * r / ways, c1 = kChunks * (r + 1) / ways;
  unsigned* o = out + (long long)(blockIdx.x / ways) * kElems / 2;
  for (int q = c0 + threadIdx.x; q < c1; q += kThreads) {
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    int c = 0;
    for (; c + 4 <= ways; c += 4) {  // four contributors' loads in flight
      float4 x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) x[j] = __ldcg(tile + (long long)(c + j) * kChunks + q);
#pragma unroll
      for (int j = 0; j < 4; ++j) add_to(s, x[j]);
    }
    for (; c < ways; ++c) add_to(s, __ldcg(tile + (long long)c * kChunks + q));
    store_out(s, o, q);
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) mgemm_fixup_l2(float* ws, int* counters, int ways,
                                                                      unsigned* out) {
  float acc[kAcc];
  fill(acc, ways);
  const int t = blockIdx.x / ways;
  float4* sum = reinterpret_cast<float4*>(ws) + (long long)t * kChunks;
#pragma unroll
  for (int i = 0; i < kAcc; i += 4) {
    float4* p = sum + (i / 4) * kThreads + threadIdx.x;
#if __CUDA_ARCH__ >= 900
    asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(acc[i]), "f"(acc[i + 1]),
                 "f"(acc[i + 2]), "f"(acc[i + 3])
                 : "memory");
#else
    float* f = reinterpret_cast<float*>(p);
    atomicAdd(f, acc[i]);
    atomicAdd(f + 1, acc[i + 1]);
    atomicAdd(f + 2, acc[i + 2]);
    atomicAdd(f + 3, acc[i + 3]);
#endif
  }
  __threadfence();
  __syncthreads();
  __shared__ int arrived;
  if (threadIdx.x == 0) arrived = atomicAdd(counters + t, 1);
  __syncthreads();
  if (arrived != ways - 1) return;  // not the last contributor of the tile
  __threadfence();
  unsigned* o = out + (long long)t * kElems / 2;
  for (int q = threadIdx.x; q < kChunks; q += 4 * kThreads) {  // four chunks' loads in flight
    float4 x[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) x[j] = __ldcg(sum + q + j * kThreads);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      store_out(x[j], o, q + j * kThreads);
      sum[q + j * kThreads] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  if (threadIdx.x == 0) counters[t] = 0;
}
