#pragma once
// softmax and log_softmax along any axis, numerically stable: exp(x - max) never overflows,
// and log_softmax = (x - max) - log(sum exp(x - max)) never takes log(0) of a finite row.
// Forward, per row: a max pass over x, an exp pass writing out, a sum pass and a scaling pass.
// Backward (softmax_backward), per row: one reduction over g (and y) and one write of dx.
// The loops run in the copy for the CPU's instruction set (isa.hpp), same results either way.
#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/cpu/isa.hpp"
#include "spsd/kernel/cpu/loop.hpp"
#include "spsd/kernel/cpu/vector_math.hpp"

namespace spsd::kernel::cpu {

namespace detail {

// One contiguous row of len elements (the axis is the last one, or everything after it is 1).
template <std::floating_point T>
void softmax_row(const T* x, T* out, int64_t len, bool log) {
  const T mx = fold(MaxOf{}, x, len, -std::numeric_limits<T>::infinity());
  const auto add = [](T a, T b) { return a + b; };
  if (log) {
    map1([mx](T v) { return v - mx; }, x, out, len);
    const T lse = std::log(fold_map(add, [](T v) { return vexp(v); }, out, len, T(0)));
    map1([lse](T v) { return v - lse; }, out, out, len);
  } else {
    map1([mx](T v) { return vexp(v - mx); }, x, out, len);
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
      map2([](T s, T v) { return s + vexp(v); }, sum, o, sum, inner);
    } else {
      map2([](T v, T m) { return vexp(v - m); }, x + r * inner, mx, o, inner);
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

// Backward of one contiguous row: dx = y (g - sum(g y)), or g - exp(y) sum(g) when log.
template <std::floating_point T>
void softmax_backward_row(const T* y, const T* g, T* dx, int64_t len, bool log) {
  const auto add = [](T a, T b) { return a + b; };
  if (log) {
    const T s = fold(add, g, len, T(0));
    map2([s](T yv, T gv) { return gv - vexp(yv) * s; }, y, g, dx, len);
  } else {
    const T s = fold_map2(add, [](T gv, T yv) { return gv * yv; }, g, y, len, T(0));
    map2([s](T yv, T gv) { return yv * (gv - s); }, y, g, dx, len);
  }
}

// The same for one (len, inner) block with the axis first: the sums are a vector of `inner`
// values, accumulated a whole row at a time.
template <std::floating_point T>
void softmax_backward_block(const T* y, const T* g, T* dx, int64_t len, int64_t inner, bool log, T* sum) {
  fill_n(sum, inner, T(0));
  for (int64_t r = 0; r < len; ++r) {
    const T *yr = y + r * inner, *gr = g + r * inner;
    SPSD_IVDEP
    for (int64_t j = 0; j < inner; ++j) sum[j] += log ? gr[j] : gr[j] * yr[j];
  }
  for (int64_t r = 0; r < len; ++r) {
    const T *yr = y + r * inner, *gr = g + r * inner;
    T* o = dx + r * inner;
    SPSD_IVDEP
    for (int64_t j = 0; j < inner; ++j) o[j] = log ? gr[j] - vexp(yr[j]) * sum[j] : yr[j] * (gr[j] - sum[j]);
  }
}

// outer, len, inner of the (outer, len, inner) view with the axis in the middle.
inline std::array<int64_t, 3> axis_view(const Shape& shape, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (int64_t d = axis + 1; d < shape.ndim(); ++d) inner *= shape[d];
  return {outer, shape[axis], inner};
}

}  // namespace detail

// out = softmax(x) along axis (log_softmax when log), x and out dense with this shape; out may
// be x. A row of all -inf gives NaN (as torch does). Floating T only.
template <FloatingElement T>
void softmax(const T* x, const Shape& shape, int64_t axis, T* out, bool log) {
  SPSD_CHECK(axis >= 0 && axis < shape.ndim(), log ? "log_softmax" : "softmax", "axis ", axis,
             " is out of range for shape ", shape);
  if (shape.numel() == 0) return;
  if constexpr (is_half_v<T>) {  // in float, each output rounded once
    const int64_t n = shape.numel();
    std::vector<float> buf = detail::widen(x, n);
    softmax<float>(buf.data(), shape, axis, buf.data(), log);
    detail::narrow(buf.data(), n, out);
  } else {
    const auto [outer, len, inner] = detail::axis_view(shape, axis);
    const int64_t block = len * inner;
    std::vector<T> scratch(inner == 1 ? 0 : 2 * inner);
    detail::with_isa([&] {
      for (int64_t o = 0; o < outer; ++o)
        if (inner == 1) detail::softmax_row(x + o * block, out + o * block, len, log);
        else detail::softmax_block(x + o * block, out + o * block, len, inner, log, scratch.data(), scratch.data() + inner);
    });
  }
}

// dx, the gradient of x, from y = softmax(x) along axis (log_softmax when log) and g, the
// gradient of y; y, g and dx dense with this shape, dx may be g. Per row one reduction and one
// write: softmax dx = y (g - sum(g y)), log_softmax dx = g - exp(y) sum(g). Floating T only.
template <FloatingElement T>
void softmax_backward(const T* y, const T* g, const Shape& shape, int64_t axis, T* dx, bool log) {
  SPSD_CHECK(axis >= 0 && axis < shape.ndim(), log ? "log_softmax_grad" : "softmax_grad", "axis ", axis,
             " is out of range for shape ", shape);
  if (shape.numel() == 0) return;
  if constexpr (is_half_v<T>) {
    const int64_t n = shape.numel();
    const std::vector<float> yf = detail::widen(y, n);
    std::vector<float> gf = detail::widen(g, n);
    softmax_backward<float>(yf.data(), gf.data(), shape, axis, gf.data(), log);
    detail::narrow(gf.data(), n, dx);
  } else {
    const auto [outer, len, inner] = detail::axis_view(shape, axis);
    const int64_t block = len * inner;
    std::vector<T> sum(inner == 1 ? 0 : inner);
    detail::with_isa([&] {
      for (int64_t o = 0; o < outer; ++o)
        if (inner == 1) detail::softmax_backward_row(y + o * block, g + o * block, dx + o * block, len, log);
        else detail::softmax_backward_block(y + o * block, g + o * block, dx + o * block, len, inner, log, sum.data());
    });
  }
}

// Cross-entropy backward on rows of logits (rows, classes), the class axis whole:
// dx = (softmax(logits) - onehot(labels)) * g[0] / total_rows (total_rows: N of the whole
// batch, the mean's divisor), a zero row for a label outside [0, classes). Per row a max and a
// sum-of-exp pass over the logits and one write; g is read here (on a device, by the kernel).
template <FloatingElement T>
void cross_entropy_backward(const T* logits, const int64_t* labels, const T* g, int64_t rows, int64_t classes,
                            int64_t total_rows, T* dx) {
  if (rows == 0 || classes == 0) return;
  if constexpr (is_half_v<T>) {
    const int64_t n = rows * classes;
    std::vector<float> buf = detail::widen(logits, n);
    const float gf = g[0];
    cross_entropy_backward<float>(buf.data(), labels, &gf, rows, classes, total_rows, buf.data());
    detail::narrow(buf.data(), n, dx);
  } else {
    const T scale = g[0] / static_cast<T>(total_rows);
    const auto add = [](T a, T b) { return a + b; };
    detail::with_isa([&] {
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = logits + r * classes;
        T* o = dx + r * classes;
        const int64_t label = labels[r];
        if (label < 0 || label >= classes) {
          detail::fill_n(o, classes, T(0));
          continue;
        }
        const T mx = detail::fold(detail::MaxOf{}, x, classes, -std::numeric_limits<T>::infinity());
        const T k = scale / detail::fold_map(add, [mx](T v) { return vexp(v - mx); }, x, classes, T(0));
        detail::map1([mx, k](T v) { return vexp(v - mx) * k; }, x, o, classes);
        o[label] -= scale;
      }
    });
  }
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_SOFTMAX_INSTANCES(prefix, T)                                                      \
  prefix template void softmax<T>(const T*, const Shape&, int64_t, T*, bool);                    \
  prefix template void softmax_backward<T>(const T*, const T*, const Shape&, int64_t, T*, bool); \
  prefix template void cross_entropy_backward<T>(const T*, const int64_t*, const T*, int64_t, int64_t, int64_t, T*);
SPSD_FOR_EACH_FLOATING(SPSD_CPU_SOFTMAX_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
