#pragma once
// Reference transposes for the transpose-flag GEMM tests (cpu in test/unit/test_kernels.cpp,
// cuda in test/gpu/test_cuda_kernels.cpp): the operand stored transposed, and its shape.
#include <cstdint>
#include <utility>
#include <vector>

#include "spsd/core/shape.hpp"

namespace spsd_test {

// x (..., r, c) as stored transposed: (..., c, r).
template <class T>
std::vector<T> transposed_copy(const std::vector<T>& x, const spsd::Shape& s) {
  const int64_t r = s[s.ndim() - 2], c = s[s.ndim() - 1], mats = r * c == 0 ? 0 : s.numel() / (r * c);
  std::vector<T> out(x.size());
  for (int64_t b = 0; b < mats; ++b)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) out[b * r * c + j * r + i] = x[b * r * c + i * c + j];
  return out;
}

inline spsd::Shape swap_last_two(const spsd::Shape& s) {
  std::vector<int64_t> d = s.dims();
  std::swap(d[d.size() - 1], d[d.size() - 2]);
  return spsd::Shape(d);
}

}  // namespace spsd_test
