// A tiled transpose through shared memory: dst[c * ld_dst + r] = src[r * ld_src + c] for a
// rows x cols source whose rows are contiguous (row r starts ld_src elements after row r - 1), into
// a destination of cols rows whose row c starts ld_dst elements after row c - 1.  Only columns
// 0 .. rows - 1 of a destination row are written (its padding beyond them is left as it is).
// mgemm/hopper.py uses it for the K-major copy of an operand that is the transpose of a matrix with
// contiguous rows (tf32 with B row-major, read as B^T: wgmma has no transpose for tf32).  CuPy's
// element-wise copy reads such a view across rows and ran at a third of a contiguous copy's speed
// (8192² float32 on the H200: 0.48 ms against 0.14 ms for the same bytes).
//
// Each CTA of 32 x 8 threads moves 64 x 64 tiles, in a grid-stride loop over the tile rows (any
// number of rows fits the grid's limit of 65535 in y).  Per tile, each thread loads 16 elements
// into registers (all loads in flight before the first is used; a warp reads 2 x 32 consecutive
// elements of a source row), stores them into shared memory, and after a barrier writes 16
// elements of the transposed tile (a warp writes 2 x 32 consecutive elements of a destination row).
// Shared-memory rows are padded to 64 + kPad elements, so consecutive rows start 4 bytes apart
// modulo the 128 bytes of the 32 banks (8 bytes for 8-byte elements, whose accesses go in half-warp
// phases): a warp reading down a tile column touches 32 different banks.  Elements are copied as
// unsigned integers of their size (bit-exact, NaN payloads too); the edges are masked, so every
// shape and leading dimension works; global indices are 64-bit.
//
//   mgemm_transpose_b16, _b32, _b64: 2-, 4- and 8-byte elements (float16 / bfloat16, float32,
//   float64).  Arguments: src, dst, rows, cols, ld_src, ld_dst (elements, 64-bit); launch with
//   grid (ceil(cols / 64), min(ceil(rows / 64), 65535)) and block (32, 8).

namespace mgemm {

constexpr int kTransposeTile = 64;
constexpr int kTransposeThreadsX = 32;
constexpr int kTransposeThreadsY = 8;

template <typename T>
__device__ __forceinline__ void transpose_tiles(const T* __restrict__ src, T* __restrict__ dst,
                                                long long rows, long long cols, long long ld_src,
                                                long long ld_dst) {
  constexpr int kTile = kTransposeTile, kTx = kTransposeThreadsX, kTy = kTransposeThreadsY;
  constexpr int kPad = sizeof(T) >= 4 ? 1 : 4 / int(sizeof(T));  // rows 4 (8) bytes apart mod 128
  constexpr int kPerRow = kTile / kTx;                  // a thread's elements in one tile row: 2
  constexpr int kPerThread = kPerRow * (kTile / kTy);  // 16
  __shared__ T tile[kTile][kTile + kPad];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long c0 = (long long)blockIdx.x * kTile;  // first source column of this CTA's tiles
  const long long r_step = (long long)gridDim.y * kTile;
  for (long long r0 = (long long)blockIdx.y * kTile; r0 < rows; r0 += r_step) {
    // Load source rows r0 + r, columns c0 + c (consecutive c across a warp) into registers, then
    // into the tile: every load is in flight before the first shared-memory store waits for one.
    T v[kPerThread];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = ty + (i / kPerRow) * kTy, c = tx + (i % kPerRow) * kTx;
      v[i] = (r0 + r < rows && c0 + c < cols) ? src[(r0 + r) * ld_src + (c0 + c)] : T(0);
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = ty + (i / kPerRow) * kTy, c = tx + (i % kPerRow) * kTx;
      tile[r][c] = v[i];
    }
    __syncthreads();
    // Store destination rows c0 + c, columns r0 + r (consecutive r across a warp).
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = ty + (i / kPerRow) * kTy, r = tx + (i % kPerRow) * kTx;
      if (c0 + c < cols && r0 + r < rows) dst[(c0 + c) * ld_dst + (r0 + r)] = tile[r][c];
    }
    __syncthreads();  // the next tile row refills the tile
  }
}

}  // namespace mgemm

#define MGEMM_TRANSPOSE_KERNEL(name, T)                                                     \
  extern "C" __global__ void __launch_bounds__(mgemm::kTransposeThreadsX *                 \
                                               mgemm::kTransposeThreadsY)                  \
      name(const T* __restrict__ src, T* __restrict__ dst, long long rows, long long cols,  \
           long long ld_src, long long ld_dst) {                                            \
    mgemm::transpose_tiles<T>(src, dst, rows, cols, ld_src, ld_dst);                        \
  }

MGEMM_TRANSPOSE_KERNEL(mgemm_transpose_b16, unsigned short)
MGEMM_TRANSPOSE_KERNEL(mgemm_transpose_b32, unsigned int)
MGEMM_TRANSPOSE_KERNEL(mgemm_transpose_b64, unsigned long long)

#undef MGEMM_TRANSPOSE_KERNEL
