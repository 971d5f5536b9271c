// The issue ceiling of mma.sync on this GPU, measured rather than assumed: warps that do nothing but
// float16/bfloat16 m16n8k16 mma (float32 accumulation) on fragments held in registers, or the same
// with the fragment loads of the portable mainloop's warp tile (64x64: per k-step 4 ldmatrix.x4 of A,
// 4 of B and 32 mma, fragments of step s+1 loaded before the mma of step s) from shared memory.
// benchmarks/mma_peak.py launches it with several warps per SM and reports TFLOP/s beside cuBLAS.
//
//   MGEMM_PEAK_BF16      0: float16 operands, 1: bfloat16
//   MGEMM_PEAK_LDMATRIX  0: registers only, 1: ldmatrix from shared memory every k-step
#include "ptx.cuh"

#ifndef MGEMM_PEAK_BF16
#define MGEMM_PEAK_BF16 0
#endif
#ifndef MGEMM_PEAK_LDMATRIX
#define MGEMM_PEAK_LDMATRIX 0
#endif

namespace mgemm {
constexpr int kPeakMI = 4, kPeakNI = 8;          // a 64x64 warp tile of m16n8 atoms
constexpr int kPeakAcc = kPeakMI * kPeakNI * 4;  // 128 float32 accumulators per thread
constexpr int kPeakRing = 4;                     // k-steps of fragments kept in shared memory
constexpr int kPeakStep = (kPeakMI + kPeakNI / 2) * 512;  // bytes of one k-step's A and B fragments
constexpr int kPeakSmem = kPeakRing * kPeakStep;

struct PeakFrag { unsigned a[kPeakMI][4], b[kPeakNI][2]; };

__device__ __forceinline__ void peak_mma(float (&acc)[kPeakAcc], const PeakFrag& f) {
#pragma unroll
  for (int mi = 0; mi < kPeakMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < kPeakNI; ++ni) {
      float* d = acc + (mi * kPeakNI + ni) * 4;
      if (MGEMM_PEAK_BF16) mma_bf16(d[0], d[1], d[2], d[3], f.a[mi], f.b[ni]);
      else mma_f16(d[0], d[1], d[2], d[3], f.a[mi], f.b[ni]);
    }
}

// One k-step's fragments: each ldmatrix.x4 reads 32 consecutive 16-byte rows (conflict-free).
__device__ __forceinline__ void peak_load(PeakFrag& f, unsigned step) {
  const unsigned lane = (threadIdx.x & 31) * 16;
#pragma unroll
  for (int mi = 0; mi < kPeakMI; ++mi) ldmatrix_x4_s(f.a[mi], step + mi * 512 + lane);
#pragma unroll
  for (int ni = 0; ni < kPeakNI; ni += 2) {
    unsigned q[4];
    ldmatrix_x4_s(q, step + (kPeakMI + ni / 2) * 512 + lane);
    f.b[ni][0] = q[0]; f.b[ni][1] = q[1]; f.b[ni + 1][0] = q[2]; f.b[ni + 1][1] = q[3];
  }
}
}  // namespace mgemm

using namespace mgemm;

// Every thread runs `steps` k-steps of its warp's 64x64 tile and writes one sum (so that nothing is
// dead code); the host counts 2 * 64 * 64 * 16 flops per warp and step.
extern "C" __global__ void mgemm_mma_peak(float* out, int steps) {
  extern __shared__ __align__(128) unsigned char smem[];
  // Small values (0.5-ish halves in every lane) so the sums stay finite; speed does not depend on them.
  const unsigned seed = 0x38003800u ^ (threadIdx.x & 7);
  for (int i = threadIdx.x; i < kPeakSmem / 4; i += blockDim.x) reinterpret_cast<unsigned*>(smem)[i] = seed;
  __syncthreads();
  float acc[kPeakAcc];
#pragma unroll
  for (int i = 0; i < kPeakAcc; ++i) acc[i] = 0.f;
#if MGEMM_PEAK_LDMATRIX
  const unsigned base = smem_addr(smem);
  PeakFrag f[2];
  peak_load(f[0], base);
  for (int s = 0; s < steps; s += 2) {
    peak_load(f[1], base + ((s + 1) % kPeakRing) * kPeakStep);
    peak_mma(acc, f[0]);
    peak_load(f[0], base + ((s + 2) % kPeakRing) * kPeakStep);
    peak_mma(acc, f[1]);
  }
#else
  PeakFrag f;
#pragma unroll
  for (int mi = 0; mi < kPeakMI; ++mi)
#pragma unroll
    for (int j = 0; j < 4; ++j) f.a[mi][j] = seed + mi + j;
#pragma unroll
  for (int ni = 0; ni < kPeakNI; ++ni) f.b[ni][0] = f.b[ni][1] = seed + ni;
  for (int s = 0; s < steps; ++s) peak_mma(acc, f);
#endif
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kPeakAcc; ++i) sum += acc[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
