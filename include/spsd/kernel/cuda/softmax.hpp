#pragma once
// softmax and log_softmax along any axis on the device, numerically stable as
// kernel/cpu/softmax.hpp (exp(x - max), log_softmax = (x - max) - log(sum exp(x - max))).
// Defined for float and double in cuda/kernel/softmax.cu.
#include <concepts>
#include <cstdint>

#include "spsd/core/shape.hpp"

namespace spsd::kernel::cuda {

// out = softmax(x) along axis (log_softmax when log), x and out dense with this shape; out may
// be x. A row of all -inf gives NaN (as the cpu kernel and torch). A bad axis throws spsd::Error.
template <std::floating_point T>
void softmax(const T* x, const Shape& shape, int64_t axis, T* out, bool log, void* stream);

}  // namespace spsd::kernel::cuda
