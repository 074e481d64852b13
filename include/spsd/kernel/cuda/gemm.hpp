#pragma once
// matmul on one rank's device pieces: (..., m, k) x (..., k, n) -> (..., m, n), batch dims
// broadcast, as kernel/cpu/gemm.hpp. float/double go to cuBLAS (strided-batched gemm, one
// handle per thread and device, created on first use: simulated ranks are threads); integers
// use a tiled kernel that wraps like integer add. Defined for float, double, int32_t and
// int64_t in cuda/kernel/gemm.cu.
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

// Whether float matmul may use TF32 tensor cores (10-bit mantissa inputs, ~1e-3 relative
// error, much faster). Off by default (FP32 math, like the cpu); the environment variable
// SPSD_ALLOW_TF32=1 turns it on at start-up. Process-wide; read at every matmul.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace spsd::kernel::cuda
