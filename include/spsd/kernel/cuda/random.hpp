#pragma once
// Counter-based random fills on the device: element at global row-major index g gets
// philox::uniform<T>(seed, g) / philox::normal<T>(seed, g) (tensor/random.hpp, the same code
// compiled for the device), so a rank's box matches the host factories bit for bit (uniform:
// exactly; normal: up to the device's log/cos/sqrt, see test/gpu/test_cuda_kernels.cpp).
// Defined for float, double, bfloat16 and float16 in cuda/kernel/random.cu: a 16-bit element
// is the float value of its counter rounded once, so randn<bfloat16> is cast<bfloat16> of
// randn<float> bit for bit.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::kernel::cuda {

// out (box.shape(), dense) = uniform [0, 1) values of the box of a global_shape tensor.
template <FloatingElement T>
void fill_uniform(T* out, const Box& box, const Shape& global_shape, uint64_t seed, void* stream);

// out (box.shape(), dense) = standard normal values of the box of a global_shape tensor.
template <FloatingElement T>
void fill_normal(T* out, const Box& box, const Shape& global_shape, uint64_t seed, void* stream);

}  // namespace spsd::kernel::cuda
