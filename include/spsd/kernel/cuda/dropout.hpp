#pragma once
// dropout on the device: the mask of kernel/cpu/dropout.hpp (Philox of (seed, global index),
// the same host-device code), so a cuda piece drops exactly the elements a cpu piece drops.
// Defined for float, double, bfloat16 and float16 in cuda/kernel/dropout.cu.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::kernel::cuda {

// out (box.shape(), dense) = x times the mask of the box of a global_shape tensor, kept
// elements scaled by `scale`; out may be x.
template <FloatingElement T>
void dropout(const T* x, T* out, const Box& box, const Shape& global_shape, uint64_t seed, uint64_t threshold,
             double scale, void* stream);

}  // namespace spsd::kernel::cuda
