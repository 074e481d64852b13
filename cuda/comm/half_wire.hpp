#pragma once
// The conversions of a 16-bit reduction under HalfReduction::kFloat32Wire on NCCL
// (nccl_communicator.cu): widen the input to float32, let NCCL reduce float32, round the result
// back once. Stream work like the collectives themselves, on the comm stream. Defined in
// half_wire.cu (two kernels); the fake-CUDA test links its own, host-side, instead (the
// communicator objects it takes hold no kernels: test/fake_cuda/meson.build).
#include <cuda_runtime.h>

#include <cstdint>

#include "spsd/core/dtype.hpp"

namespace spsd::detail {

// n elements of dtype t (bfloat16 or float16) at src as float32 at dst: exact.
void widen_halves(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream);
// n float32 at src rounded to t (to nearest even, core/half.hpp) at dst.
void narrow_to_halves(const float* src, DType t, void* dst, int64_t n, cudaStream_t stream);

}  // namespace spsd::detail
