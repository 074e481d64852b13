#pragma once
// Single-process references the examples check their global results against.
#include <cstdint>
#include <vector>

namespace examples {

// (m, k) x (k, n) row-major, with plain loops accumulating in double.
inline std::vector<float> reference_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                                           int64_t k, int64_t n) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += static_cast<double>(a[i * k + l]) * b[l * n + j];
      c[i * n + j] = static_cast<float>(s);
    }
  return c;
}

}  // namespace examples
