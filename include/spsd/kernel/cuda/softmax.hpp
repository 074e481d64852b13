#pragma once
// softmax and log_softmax along any axis on the device, numerically stable as
// kernel/cpu/softmax.hpp (exp(x - max), log_softmax = (x - max) - log(sum exp(x - max))).
// Defined for float, double, bfloat16 and float16 in cuda/kernel/softmax.cu; the 16-bit types
// compute the max, the sums and exp in float and round each output once.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::kernel::cuda {

// out = softmax(x) along axis (log_softmax when log), x and out dense with this shape; out may
// be x. A row of all -inf gives NaN (as the cpu kernel and torch). A bad axis throws spsd::Error.
template <FloatingElement T>
void softmax(const T* x, const Shape& shape, int64_t axis, T* out, bool log, void* stream);

// dx from y = softmax(x) (log_softmax when log) and g, the gradient of y, as
// kernel::cpu::softmax_backward: per row one reduction and one write; dx may be g.
template <FloatingElement T>
void softmax_backward(const T* y, const T* g, const Shape& shape, int64_t axis, T* dx, bool log, void* stream);

// Cross-entropy backward, as kernel::cpu::cross_entropy_backward (g is a device pointer).
template <FloatingElement T>
void cross_entropy_backward(const T* logits, const int64_t* labels, const T* g, int64_t rows, int64_t classes,
                            int64_t total_rows, T* dx, void* stream);

}  // namespace spsd::kernel::cuda
