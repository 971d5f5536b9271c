// The named values of the compile-time knobs both GEMM kernels share (mgemm/kernels.py and
// mgemm/hopper_config.py render #defines that use these names), and the C++ type of each element code.
#pragma once
#include "ptx.cuh"

#define MGEMM_F16 0
#define MGEMM_BF16 1
#define MGEMM_F32 2
#define MGEMM_TF32 3
#define MGEMM_F64 4
#define MGEMM_POLICY_PER_TILE 0
#define MGEMM_POLICY_STATIC 1
#define MGEMM_POLICY_DYNAMIC 2
#define MGEMM_POLICY_STREAMK 3
#define MGEMM_RASTER_M 0
#define MGEMM_RASTER_N 1

namespace mgemm {

// Storage type of an element code (tf32 is stored as float).
template <int Code> struct StorageOf;
template <> struct StorageOf<MGEMM_F16> { using type = f16_t; };
template <> struct StorageOf<MGEMM_BF16> { using type = bf16_t; };
template <> struct StorageOf<MGEMM_F32> { using type = float; };
template <> struct StorageOf<MGEMM_TF32> { using type = float; };
template <> struct StorageOf<MGEMM_F64> { using type = double; };

}  // namespace mgemm
