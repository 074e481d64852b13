#pragma once
// Element-type kernels: cast (out[i] = convert<To>(x[i]), kernel/convert.hpp) and the
// non-finite check a GradScaler runs on gradients.
#include <cmath>
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/kernel/convert.hpp"

namespace spsd::kernel::cpu {

// out[i] = convert<To>(x[i]) for i < n.
template <Element From, Element To>
void cast(const From* x, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = convert<To>(x[i]);
}

// *flag = 1 when some x[i] is inf or NaN (x * 0 is NaN exactly then: one vectorizable fold);
// never writes 0.
template <FloatingElement T>
void note_nonfinite(const T* x, int64_t n, float* flag) {
  using C = compute_t<T>;
  C probe = 0;
  for (int64_t i = 0; i < n; ++i) probe += static_cast<C>(x[i]) * C(0);
  if (probe != probe) *flag = 1.0f;
}

}  // namespace spsd::kernel::cpu
