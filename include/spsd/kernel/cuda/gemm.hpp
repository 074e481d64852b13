#pragma once
// matmul on one rank's device pieces: (..., m, k) x (..., k, n) -> (..., m, n), batch dims
// broadcast, as kernel/cpu/gemm.hpp. Floating types go to cuBLAS (strided-batched GemmEx, one
// handle per thread and device, created on first use: simulated ranks are threads); integers
// use a tiled kernel that wraps like integer add. Defined for every element type in
// cuda/kernel/gemm.cu.
//
// Accumulation: bfloat16 and float16 products accumulate in float (CUBLAS_COMPUTE_32F on tensor
// cores, split-k partials in float too) and round once per output. float32 is exact float32 at
// MatmulPrecision::kHighest (the default) and uses TF32 tensor cores at kHigh (inputs rounded to
// 10 mantissa bits, float accumulation: about 1e-3 relative error), read at every call
// (runtime/matmul_precision.hpp). double is double.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::kernel::cuda {

// out = op(a) @ op(b), op(x) = x with its last two axes swapped when trans_x (cuBLAS's OP_T,
// nothing copied); shapes checked on the host with the cpu kernel's messages. k == 0 gives
// zeros. Sizes must fit cuBLAS's int arguments (else spsd::Error).
template <Element T>
void matmul(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape,
            bool trans_a, bool trans_b, void* stream);
template <Element T>
void matmul(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape,
            void* stream) {
  matmul<T>(a, a_shape, b, b_shape, out, out_shape, false, false, stream);
}

}  // namespace spsd::kernel::cuda
