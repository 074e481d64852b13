#pragma once
// layer_norm and rms_norm over the last axis, on rows of len elements (the piece's rows are
// contiguous: the op only runs these while no mesh axis splits the last axis).
//   layer_norm: y = (x - mean) * rstd * w + b,   rstd = 1 / sqrt(mean((x - mean)^2) + eps)
//   rms_norm:   y = x * rstd * w,                rstd = 1 / sqrt(mean(x^2) + eps)
// Statistics in two passes (the mean, then the centred squares): no cancellation for rows with
// a large mean, as E[x^2] - E[x]^2 would have. Every pass over a row is a vectorized loop
// (loop.hpp's blocks); a row of a transformer (hundreds to thousands of elements) stays in L1
// across its passes. 16-bit elements load as float, accumulate in
// float, and each output is rounded once.
// Backward, with xhat = (x - mean) * rstd (rms: mean = 0) and gw = g * w:
//   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))     (rms: without the mean(gw) term)
//   dw = sum over rows of g * xhat, the column sums (db = sum over rows of g: a plain sum)
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/kernel/cpu/isa.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

namespace detail {

// (mean, rstd) of one row in C = compute_t<T>; mean is 0 for rms. len > 0. Two vectorized
// passes (the sum, then the centred squares: no cancellation).
template <class T, class C = compute_t<T>>
std::pair<C, C> norm_row_stats(const T* x, int64_t len, C eps, bool rms) {
  const auto add = [](C a, C b) { return a + b; };
  const C mean = rms ? C(0) : fold_map(add, [](C v) { return v; }, x, len, C(0)) / static_cast<C>(len);
  const C ss = fold_map(add, [mean](C v) { return (v - mean) * (v - mean); }, x, len, C(0));
  return {mean, C(1) / std::sqrt(ss / static_cast<C>(len) + eps)};
}

}  // namespace detail

// out (rows, len) = the normalized x times w (len) plus b (len; null for none), as above: per
// row the two statistics passes and one write, each vectorized. The three kernels run the copy
// of their loops for the CPU's instruction set (isa.hpp: AVX2 where there is, the same bits).
template <FloatingElement T>
void norm_forward(const T* x, const T* w, const T* b, int64_t rows, int64_t len, double eps, bool rms, T* out) {
  using C = compute_t<T>;
  if (len == 0) return;
  detail::with_isa([&] {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * len;
      T* o = out + r * len;
      const auto [mean, rstd] = detail::norm_row_stats(xr, len, static_cast<C>(eps), rms);
      if (b)
        detail::for_each_index<T>(len, [=](int64_t i) {
          o[i] = static_cast<T>((static_cast<C>(xr[i]) - mean) * rstd * static_cast<C>(w[i]) + static_cast<C>(b[i]));
        });
      else
        detail::for_each_index<T>(len, [=](int64_t i) {
          o[i] = static_cast<T>((static_cast<C>(xr[i]) - mean) * rstd * static_cast<C>(w[i]));
        });
    }
  });
}

// dx (rows, len), the gradient of x, from x, w and g, the gradient of y; per row the statistics
// (two passes), the two row sums (one pass each) and one write, all vectorized. dx may be g.
template <FloatingElement T>
void norm_backward_x(const T* x, const T* w, const T* g, int64_t rows, int64_t len, double eps, bool rms, T* dx) {
  using C = compute_t<T>;
  if (len == 0) return;
  const C n = static_cast<C>(len);
  detail::with_isa([&] {
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * len, *gr = g + r * len;
      T* o = dx + r * len;
      const auto [mean, rstd] = detail::norm_row_stats(xr, len, static_cast<C>(eps), rms);
      const auto gw = [=](int64_t i) { return static_cast<C>(gr[i]) * static_cast<C>(w[i]); };
      const C sum_gw = rms ? C(0) : detail::sum_index<T, C>(len, gw);
      // sum(g w (x - mean)), times rstd once: sum(g w xhat).
      const C sum_gwx =
          detail::sum_index<T, C>(len, [=](int64_t i) { return gw(i) * (static_cast<C>(xr[i]) - mean); });
      const C a = sum_gw / n, c = sum_gwx * rstd / n;
      detail::for_each_index<T>(len, [=](int64_t i) {
        const C xhat = (static_cast<C>(xr[i]) - mean) * rstd;
        o[i] = static_cast<T>(rstd * (static_cast<C>(gr[i]) * static_cast<C>(w[i]) - a - xhat * c));
      });
    }
  });
}

// dw (len) = the column sums of g * xhat over the rows, accumulated in compute_t<T>: per row
// the statistics and one vectorized accumulating pass.
template <FloatingElement T>
void norm_backward_w(const T* x, const T* g, int64_t rows, int64_t len, double eps, bool rms, T* dw) {
  using C = compute_t<T>;
  std::vector<C> acc(static_cast<size_t>(len), C(0));
  C* a = acc.data();
  detail::with_isa([&] {
    for (int64_t r = 0; r < rows && len > 0; ++r) {
      const T *xr = x + r * len, *gr = g + r * len;
      const auto [mean, rstd] = detail::norm_row_stats(xr, len, static_cast<C>(eps), rms);
      detail::for_each_index<C>(len, [=](int64_t i) {
        a[i] += static_cast<C>(gr[i]) * (static_cast<C>(xr[i]) - mean) * rstd;
      });
    }
  });
  for (int64_t i = 0; i < len; ++i) dw[i] = static_cast<T>(acc[i]);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_NORM_INSTANCES(prefix, T)                                                                         \
  prefix template void norm_forward<T>(const T*, const T*, const T*, int64_t, int64_t, double, bool, T*);          \
  prefix template void norm_backward_x<T>(const T*, const T*, const T*, int64_t, int64_t, double, bool, T*);       \
  prefix template void norm_backward_w<T>(const T*, const T*, int64_t, int64_t, double, bool, T*);
SPSD_FOR_EACH_FLOATING(SPSD_CPU_NORM_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
