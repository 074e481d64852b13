#pragma once
// Reductions over a set of axes (sum, max, min), and scale (for mean). The reduced and kept
// axes are collapsed into alternating groups first; the innermost group decides the loop:
// a reduced innermost group folds each contiguous row (row sums), a kept one combines whole
// rows into the output (column sums). Both inner loops vectorize.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

namespace detail {

// Calls body(f) with f the binary function of op. max/min are std::max/std::min, like
// combine_into: the ops a P(max)/P(min) resolution applies must agree with the local ones.
template <Element T, class Body>
void with_reduce_fn(ReduceOp op, Body&& body) {
  switch (op) {
    case ReduceOp::kSum: return body([](T x, T y) { return wrap_add(x, y); });
    case ReduceOp::kMax: return body(MaxOf{});
    case ReduceOp::kMin: return body(MinOf{});
  }
  ::spsd::detail::throw_error("reduce", "invalid op value ", static_cast<int>(op));
}

// Groups of adjacent axes of one kind (reduced or kept), size-1 axes dropped, outermost first.
struct ReduceGroups {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
};

inline ReduceGroups group_axes(const Shape& shape, std::span<const int64_t> axes) {
  ReduceGroups g;
  size_t next = 0;
  for (int64_t d = 0; d < shape.ndim(); ++d) {
    const bool red = next < axes.size() && axes[next] == d;
    if (red) ++next;
    if (shape[d] == 1) continue;
    if (!g.dims.empty() && g.reduced.back() == red) {
      g.dims.back() *= shape[d];
    } else {
      g.dims.push_back(shape[d]);
      g.reduced.push_back(red);
    }
  }
  return g;
}

// out[j] = f(...f(out[j], x[0][j])..., x[rows-1][j]) for j < len, x's rows len apart. Four
// rows per pass, so out is loaded and stored a quarter as often; each column still combines
// its rows in order.
template <class T, class F>
void combine_rows(F f, T* out, const T* x, int64_t rows, int64_t len) {
  constexpr int64_t W = kBlock<T>;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T *x0 = x + r * len, *x1 = x0 + len, *x2 = x1 + len, *x3 = x2 + len;
    int64_t i = 0;
    SPSD_IVDEP
    for (; i + W <= len; i += W) {
      SPSD_IVDEP
      for (int64_t j = 0; j < W; ++j) {
        T& o = out[i + j];
        o = f(f(f(f(o, x0[i + j]), x1[i + j]), x2[i + j]), x3[i + j]);
      }
    }
    for (; i < len; ++i) out[i] = f(f(f(f(out[i], x0[i]), x1[i]), x2[i]), x3[i]);
  }
  for (; r < rows; ++r) map2(f, out, x + r * len, out, len);
}

}  // namespace detail

// out = op-reduction of x over axes (sorted, unique, in [0, ndim)). out holds x's elements
// with the reduced axes removed (the keepdim layout is the same memory). An empty reduced
// extent gives reduce_identity<T>(op); integer sums wrap.
template <Element T>
void reduce(ReduceOp op, const T* x, const Shape& x_shape, std::span<const int64_t> axes, T* out) {
  int64_t out_n = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    SPSD_CHECK(axes[i] >= 0 && axes[i] < x_shape.ndim() && (i == 0 || axes[i] > axes[i - 1]), "reduce",
               "axes ", ::spsd::detail::join({axes.begin(), axes.end()}),
               " must be sorted, unique and in range for shape ", x_shape);
  }
  for (int64_t d = 0, next = 0; d < x_shape.ndim(); ++d) {
    if (next < static_cast<int64_t>(axes.size()) && axes[next] == d) {
      ++next;
    } else {
      out_n *= x_shape[d];
    }
  }
  if (out_n == 0) return;
  if (x_shape.numel() == 0) {  // some reduced extent is 0: the identity partial layouts pad with
    detail::fill_n(out, out_n, reduce_identity<T>(op));
    return;
  }
  if constexpr (is_half_v<T>) {  // accumulate in float, round each output once
    const std::vector<float> xf = detail::widen(x, x_shape.numel());
    std::vector<float> of(static_cast<size_t>(out_n));
    reduce<float>(op, xf.data(), x_shape, axes, of.data());
    detail::narrow(of.data(), out_n, out);
  } else {
    // Non-empty reductions start from the exact identity: -inf/+inf for floating max/min, so a
    // row of -inf has max -inf (reduce_identity's finite lowest()/max() is what partial layouts
    // pad with; see docs/operators.md).
    const T identity = std::numeric_limits<T>::has_infinity && op != ReduceOp::kSum
                           ? (op == ReduceOp::kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity())
                           : reduce_identity<T>(op);
    const detail::ReduceGroups g = detail::group_axes(x_shape, axes);
    const int64_t r = static_cast<int64_t>(g.dims.size());
    if (r == 0 || (r == 1 && !g.reduced[0])) {  // nothing (of extent > 1) is reduced: a copy
      std::copy_n(x, out_n, out);
      return;
    }
    // Each group's stride in out: dense over the kept groups, 0 over the reduced ones (x is
    // walked in order, so it needs no strides).
    std::vector<int64_t> os(r);
    for (int64_t d = r - 1, so = 1; d >= 0; --d) {
      os[d] = g.reduced[d] ? 0 : so;
      if (!g.reduced[d]) so *= g.dims[d];
    }
    const int64_t len = g.dims.back();
    const int64_t rows = x_shape.numel() / len;
    std::vector<int64_t> outer(g.dims.begin(), g.dims.end() - 1);
    detail::with_reduce_fn<T>(op, [&](auto f) {
      if (g.reduced.back()) {
        if (r == 1 || (r == 2 && !g.reduced[0])) {  // (rows, len) -> (rows): one fold per row
          for (int64_t i = 0; i < rows; ++i) out[i] = static_cast<T>(detail::fold(f, x + i * len, len, identity));
          return;
        }
        detail::fill_n(out, out_n, identity);
        detail::Odometer<1> od(outer, {std::vector<int64_t>(os.begin(), os.end() - 1)});
        for (int64_t i = 0; i < rows; ++i, od.next()) {
          T& o = out[od.offset(0)];
          o = f(o, detail::fold(f, x + i * len, len, identity));
        }
      } else {
        // The kept innermost group follows a reduced one: each (red, len) block of x combines
        // into one len-run of out ((rows, len) -> (len) is a single block).
        const int64_t red = g.dims[r - 2], block = red * len;
        detail::fill_n(out, out_n, identity);
        detail::Odometer<1> od(std::vector<int64_t>(g.dims.begin(), g.dims.end() - 2),
                               {std::vector<int64_t>(os.begin(), os.end() - 2)});
        for (int64_t b = 0, blocks = x_shape.numel() / block; b < blocks; ++b, od.next())
          detail::combine_rows(f, out + od.offset(0), x + b * block, red, len);
      }
    });
  }
}

// x[i] *= factor for i < n (mean = sum then scale by 1/count); integer products wrap. The
// factor is in compute_t<T>, so a 16-bit mean rounds once (not 1/count first).
template <Element T>
void scale(T* x, int64_t n, compute_t<T> factor) {
  detail::map1([factor](compute_t<T> v) { return detail::wrap_mul(v, factor); }, x, x, n);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_REDUCE_INSTANCES(prefix, T)                                                   \
  prefix template void reduce<T>(ReduceOp, const T*, const Shape&, std::span<const int64_t>, T*); \
  prefix template void scale<T>(T*, int64_t, compute_t<T>);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_REDUCE_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
