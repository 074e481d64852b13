#pragma once
// Broadcast index spaces shared by the kernels with numpy broadcasting (binary ops, batched
// matmul): the broadcast shape, per-operand strides, and dim collapsing.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::kernel::cpu::detail {

// numpy broadcast of two shapes (right-aligned; a dim of 1 stretches), or an error.
inline Shape broadcast_shape(std::string_view op, const Shape& a, const Shape& b) {
  const int64_t r = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(r);
  for (int64_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.ndim() ? 1 : a[i - (r - a.ndim())];
    const int64_t db = i < r - b.ndim() ? 1 : b[i - (r - b.ndim())];
    SPSD_CHECK(da == db || da == 1 || db == 1, op, "shapes ", a, " and ", b, " do not broadcast");
    dims[i] = da == 1 ? db : da;
  }
  return Shape(std::move(dims));
}

// Strides of a dense shape right-aligned into an index space of rank r; 0 where it broadcasts.
inline std::vector<int64_t> broadcast_strides(const Shape& s, int64_t r) {
  std::vector<int64_t> strides(r, 0);
  int64_t step = 1;
  for (int64_t i = s.ndim() - 1; i >= 0; --i) {
    strides[r - s.ndim() + i] = s[i] == 1 ? 0 : step;
    step *= s[i];
  }
  return strides;
}

// An index space with N operands' strides, after dropping size-1 dims and merging neighbours
// that are contiguous for every operand: (m, n) + (n) stays 2-d, (a, b, c) + (a, b, c) is 1-d.
template <int N>
struct Collapsed {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> strides;
};

template <int N>
Collapsed<N> collapse(const std::vector<int64_t>& dims, const std::array<std::vector<int64_t>, N>& strides) {
  Collapsed<N> c;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool merge = !c.dims.empty();
    for (int o = 0; o < N && merge; ++o) merge = c.strides[o].back() == strides[o][d] * dims[d];
    if (merge) {
      c.dims.back() *= dims[d];
      for (int o = 0; o < N; ++o) c.strides[o].back() = strides[o][d];
    } else {
      c.dims.push_back(dims[d]);
      for (int o = 0; o < N; ++o) c.strides[o].push_back(strides[o][d]);
    }
  }
  return c;
}

}  // namespace spsd::kernel::cpu::detail
