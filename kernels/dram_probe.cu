// Read-only memory probe (benchmarks/dram_probe.py): how fast the GPU reads a row-major matrix in
// 128-byte k-slabs, the way a split-K GEMM's CTAs read A (K contiguous), with the slabs dealt to the
// CTAs in contiguous ranges or interleaved.  Nothing in mgemm launches it.
//
//   mgemm_dram_slabs_R (R = 256 or 512 rows): CTA s of `slices` reads `per` slabs of all R rows:
//   slab s * per + j (interleave == 0) or j * slices + s (interleave == 1), j = 0 .. per - 1.  A
//   slab is 128 bytes of each row, rows `pitch` uint4 apart.  256 threads, each copying one 16-byte
//   piece of every 32nd slab row into shared memory with cp.async, 192 KB in flight (dynamic shared
//   memory of that size).  `sink` gets one word a thread.
//   mgemm_dram_flat: `n` uint4 read as one contiguous range, CTA s its s-th share, the same way.
// 192 KB of copies in flight per CTA, as the Hopper GEMM's ring of six 32 KB stages
constexpr int kInFlight = 192 * 1024;
extern __shared__ uint4 buf[];

__device__ __forceinline__ void copy16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

template <int Rows>
__device__ __forceinline__ void read_slabs(const uint4* __restrict__ a, long long pitch, int slices,
                                           int per, int interleave, unsigned* sink) {
  constexpr int kLoads = Rows / 32, kDepth = kInFlight / (kLoads * 256 * 16);  // buf[kDepth][kLoads][256]
  const int s = blockIdx.x, piece = threadIdx.x & 7, row0 = threadIdx.x >> 3;
  for (int j = 0; j < per; ++j) {
    const long long slab = interleave ? (long long)j * slices + s : (long long)s * per + j;
    const uint4* p = a + row0 * pitch + slab * 8 + piece;
    uint4* d = buf + (j % kDepth) * kLoads * 256 + threadIdx.x;
#pragma unroll
    for (int r = 0; r < kLoads; ++r) copy16(d + r * 256, p + 32 * r * pitch);
    commit();
    wait_groups<kDepth - 1>();
  }
  wait_groups<0>();
  const uint4 v = buf[threadIdx.x];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = v.x ^ v.y ^ v.z ^ v.w;
}

extern "C" __global__ void __launch_bounds__(256) mgemm_dram_slabs_256(
    const uint4* __restrict__ a, long long pitch, int slices, int per, int interleave, unsigned* sink) {
  read_slabs<256>(a, pitch, slices, per, interleave, sink);
}

extern "C" __global__ void __launch_bounds__(256) mgemm_dram_slabs_512(
    const uint4* __restrict__ a, long long pitch, int slices, int per, int interleave, unsigned* sink) {
  read_slabs<512>(a, pitch, slices, per, interleave, sink);
}

extern "C" __global__ void __launch_bounds__(256) mgemm_dram_flat(const uint4* __restrict__ a,
                                                                  long long n, unsigned* sink) {
  constexpr int kLoads = 8, kDepth = kInFlight / (kLoads * 256 * 16);  // 32 KB a batch
  const long long share = (n + gridDim.x - 1) / gridDim.x, lo = share * blockIdx.x;
  const long long hi = lo + share < n ? lo + share : n;
  int j = 0;
  for (long long i = lo; i < hi; i += kLoads * 256, ++j) {
    uint4* d = buf + (j % kDepth) * kLoads * 256 + threadIdx.x;
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const long long x = i + r * 256 + threadIdx.x;
      if (x < hi) copy16(d + r * 256, a + x);
    }
    commit();
    wait_groups<kDepth - 1>();
  }
  wait_groups<0>();
  const uint4 v = buf[threadIdx.x];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = v.x ^ v.y ^ v.z ^ v.w;
}
