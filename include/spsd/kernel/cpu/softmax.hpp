#pragma once
// softmax and log_softmax along any axis, numerically stable: exp(x - max) never overflows,
// and log_softmax = (x - max) - log(sum exp(x - max)) never takes log(0) of a finite row.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

namespace detail {

// One contiguous row of len elements (the axis is the last one, or everything after it is 1).
template <std::floating_point T>
void softmax_row(const T* x, T* out, int64_t len, bool log) {
  const T mx = fold(MaxOf{}, x, len, -std::numeric_limits<T>::infinity());
  const auto add = [](T a, T b) { return a + b; };
  if (log) {
    map1([mx](T v) { return v - mx; }, x, out, len);
    const T lse = std::log(fold_map(add, [](T v) { return std::exp(v); }, out, len, T(0)));
    map1([lse](T v) { return v - lse; }, out, out, len);
  } else {
    map1([mx](T v) { return std::exp(v - mx); }, x, out, len);
    const T inv = T(1) / fold(add, out, len, T(0));
    map1([inv](T v) { return v * inv; }, out, out, len);
  }
}

// One (len, inner) block with the axis first: the per-column max and sum are vectors of
// `inner` values, updated a whole row at a time so every pass is a contiguous loop.
template <std::floating_point T>
void softmax_block(const T* x, T* out, int64_t len, int64_t inner, bool log, T* mx, T* sum) {
  const auto add = [](T a, T b) { return a + b; };
  std::copy_n(x, inner, mx);
  for (int64_t r = 1; r < len; ++r) map2(MaxOf{}, mx, x + r * inner, mx, inner);
  fill_n(sum, inner, T(0));
  for (int64_t r = 0; r < len; ++r) {
    T* o = out + r * inner;
    if (log) {
      map2([](T v, T m) { return v - m; }, x + r * inner, mx, o, inner);
      map2([](T s, T v) { return s + std::exp(v); }, sum, o, sum, inner);
    } else {
      map2([](T v, T m) { return std::exp(v - m); }, x + r * inner, mx, o, inner);
      map2(add, sum, o, sum, inner);
    }
  }
  if (log) {
    map1([](T s) { return std::log(s); }, sum, sum, inner);
    for (int64_t r = 0; r < len; ++r) map2([](T v, T l) { return v - l; }, out + r * inner, sum, out + r * inner, inner);
  } else {
    map1([](T s) { return T(1) / s; }, sum, sum, inner);
    for (int64_t r = 0; r < len; ++r) map2([](T v, T s) { return v * s; }, out + r * inner, sum, out + r * inner, inner);
  }
}

}  // namespace detail

// out = softmax(x) along axis (log_softmax when log), x and out dense with this shape; out may
// be x. A row of all -inf gives NaN (as torch does). Floating T only.
template <Element T>
  requires std::floating_point<T>
void softmax(const T* x, const Shape& shape, int64_t axis, T* out, bool log) {
  SPSD_CHECK(axis >= 0 && axis < shape.ndim(), log ? "log_softmax" : "softmax", "axis ", axis,
             " is out of range for shape ", shape);
  if (shape.numel() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (int64_t d = axis + 1; d < shape.ndim(); ++d) inner *= shape[d];
  const int64_t len = shape[axis], block = len * inner;
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) detail::softmax_row(x + o * block, out + o * block, len, log);
    return;
  }
  std::vector<T> scratch(2 * inner);
  for (int64_t o = 0; o < outer; ++o)
    detail::softmax_block(x + o * block, out + o * block, len, inner, log, scratch.data(), scratch.data() + inner);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_SOFTMAX_INSTANCES(prefix, T) \
  prefix template void softmax<T>(const T*, const Shape&, int64_t, T*, bool);
SPSD_FOR_EACH_FLOATING(SPSD_CPU_SOFTMAX_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
