// Splits float32 values into three bfloat16 pieces, x = p0 + p1 + p2, for float32 products
// computed on bfloat16 tensor cores (mgemm/emulate.py: the bf16x6 and bf16x9 schemes).
//
// p0 is x rounded to bfloat16 (to nearest, ties to even), p1 the remainder x - p0 rounded the same
// way, p2 the remainder x - p0 - p1.  Each rounding keeps the top 8 significant bits of what is
// left, so the three pieces hold all 24 bits of x.  For |x| >= 2^-103 every remainder and piece is
// at least x's last bit, 2^-126 or more: all arithmetic stays on normal numbers (a flush of
// subnormals to zero cannot change it) and every piece is a normal bfloat16 (a tensor core may
// flush subnormal ones).  A value outside that range sets *flag, and the caller computes the
// product in exact float32 instead: Inf, NaN, a p0 that rounds past bfloat16's largest value, or a
// nonzero |x| below 2^-103 (about 1e-31).  So does a remainder left after p2, which the argument
// above rules out.  Zero splits into three zeros.
//
// The pieces are written as raw bfloat16 bits (unsigned short); conversions are done on the bits,
// so the kernel needs no CUDA header.  Elements are processed in order of their index, as a flat
// array: the caller passes C- or Fortran-contiguous arrays and gets pieces in the same order.
//
//   mgemm_split_bf16x3(x, p0, p1, p2, n, flag): n elements (64-bit); launch any 1-D grid of
//   kSplitThreads threads per CTA (a grid-stride loop covers every n).

namespace mgemm {

constexpr int kSplitThreads = 256;

// float -> bfloat16 bits, rounded to nearest, ties to even (finite x; a NaN input is flagged by
// the caller and its piece never used).
__device__ __forceinline__ unsigned int bf16_round_bits(float x) {
  const unsigned int u = __float_as_uint(x);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

__device__ __forceinline__ float bf16_value(unsigned int bits) { return __uint_as_float(bits << 16); }

// The smallest biased float32 exponent split exactly on normal numbers: 2^-103 (127 - 103).
constexpr unsigned int kMinExponent = 24;

}  // namespace mgemm

extern "C" __global__ void __launch_bounds__(mgemm::kSplitThreads)
    mgemm_split_bf16x3(const float* __restrict__ x, unsigned short* __restrict__ p0,
                       unsigned short* __restrict__ p1, unsigned short* __restrict__ p2,
                       long long n, int* __restrict__ flag) {
  using namespace mgemm;
  bool bad = false;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    const unsigned int b0 = bf16_round_bits(v);
    const float r1 = v - bf16_value(b0);  // exact
    const unsigned int b1 = bf16_round_bits(r1);
    const float r2 = r1 - bf16_value(b1);  // exact
    const unsigned int b2 = bf16_round_bits(r2);
    const float rest = r2 - bf16_value(b2);
    const unsigned int u = __float_as_uint(v), e = (u >> 23) & 0xffu;
    // not finite, p0 rounded up to Inf, too small (nonzero), or bits left over
    bad |= e == 0xffu || (b0 & 0x7f80u) == 0x7f80u || (e < kMinExponent && (u & 0x7fffffffu) != 0) ||
           rest != 0.0f;
    p0[i] = (unsigned short)b0;
    p1[i] = (unsigned short)b1;
    p2[i] = (unsigned short)b2;
  }
  // one atomic per warp that saw a value outside the split's range
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) atomicOr(flag, 1);
}
