#pragma once
// Reductions over axes: sum, mean, max, min (x, axes, keepdim = false).
//
// axes: empty means every axis; negative axes count from the end; a repeated or out-of-range
// axis is an spsd::Error naming the op, the axis and the shape. Reducing every axis gives a
// 0-d tensor (shape ()), or (1, ..., 1) with keepdim. mean is for floating types only.
//
// Attributes (the resolution cache key): [keepdim, axes...], axes sorted and non-negative.
//
// 1-d signature table, per tensor axis d of x (out(d): d's position in the output):
//   kept axis     S(d) -> S(out(d))
//   reduced axis  S(d) -> P(sum) for sum and mean, P(max) for max, P(min) for min
//   P(sum) -> P(sum)   for sum and mean (both linear)
//   P(max) -> P(max)   for max;   P(min) -> P(min)   for min
//   B -> B
// Every rule is exact under identity padding and for lopsided partial values: a rank whose
// piece of a reduced split axis is empty reduces to the op's identity, and a reduction of
// partial pieces commutes with the reduction across ranks for the same op. mean on a P(sum)
// or reduced split axis divides each rank's partial sum by the GLOBAL count of reduced
// elements (from the global shape, not the local piece), so the partial sums add up to the
// mean. The mean of zero elements is NaN (0 / 0), as in numpy; the sum of zero elements is 0;
// max and min over an axis of size 0 are an spsd::Error (no identity; numpy and torch raise).
#include <algorithm>
#include <string>
#include <vector>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/layout/layout.hpp"
#include "spsd/op/dispatch.hpp"
#include "spsd/op/elementwise.hpp"

namespace spsd {

namespace detail {

// The axes of an op's `axes` argument, checked, made non-negative and sorted; empty -> all.
inline std::vector<int64_t> normalize_axes(std::string_view op, const Shape& shape, const std::vector<int64_t>& axes) {
  const int64_t n = shape.ndim();
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t d = 0; d < n; ++d) out.push_back(d);
    return out;
  }
  for (int64_t a : axes) {
    SPSD_CHECK(a >= -n && a < n, op, "axis ", a, " is out of range for a tensor of shape ", shape, " (axes ",
               join(axes), ")");
    const int64_t d = a < 0 ? a + n : a;
    SPSD_CHECK(std::find(out.begin(), out.end(), d) == out.end(), op, "axis ", a, " is repeated in axes ",
               join(axes), " for a tensor of shape ", shape);
    out.push_back(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}


template <ReduceOp R, bool Mean>
struct ReduceDef {
  static_assert(!Mean || R == ReduceOp::kSum, "mean is a scaled sum");
  static constexpr std::string_view name = Mean                 ? "mean"
                                           : R == ReduceOp::kSum ? "sum"
                                           : R == ReduceOp::kMax ? "max"
                                                                 : "min";

  // attrs = [keepdim, axes...]
  static std::vector<int64_t> axes_of(const OpAttrs& attrs) { return {attrs.begin() + 1, attrs.end()}; }
  static bool keepdim_of(const OpAttrs& attrs) { return attrs.at(0) != 0; }

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const Shape& x = in[0].shape;
    SPSD_CHECK(!attrs.empty(), name, "attributes must be [keepdim, axes...]");
    if constexpr (Mean)
      SPSD_CHECK(is_floating(in[0].dtype), name, "is defined for floating tensors only, x is ", in[0].dtype,
                 " of shape ", x);
    const std::vector<int64_t> axes = axes_of(attrs);
    for (size_t i = 0; i < axes.size(); ++i)
      SPSD_CHECK(axes[i] >= 0 && axes[i] < x.ndim() && (i == 0 || axes[i - 1] < axes[i]), name,
                 "axes ", join(axes), " must be sorted, distinct and within a tensor of shape ", x);
    // max and min have no identity: over no elements they are undefined (numpy and torch raise).
    if constexpr (R != ReduceOp::kSum)
      for (int64_t a : axes)
        SPSD_CHECK(x[a] > 0, name, "cannot reduce axis ", a, " of size 0 of a tensor of shape ", x, ": the ", name,
                   " of no elements has no identity");
    return {out_shape(x, axes, keepdim_of(attrs)), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const int64_t n = in[0].shape.ndim();
    const std::vector<int64_t> axes = axes_of(attrs);
    const bool keepdim = keepdim_of(attrs);
    std::vector<Signature> t;
    int64_t pos = 0;  // output position of the next kept axis
    for (int64_t d = 0; d < n; ++d) {
      const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!reduced) t.push_back({{sbp::split(d)}, sbp::split(pos)});
      else t.push_back({{sbp::split(d)}, sbp::partial(R)});
      if (!reduced || keepdim) ++pos;
    }
    t.push_back(uniform_signature(1, sbp::partial(R)));
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }

  static std::string attrs_text(const OpAttrs& attrs) {
    return "axes=" + join(axes_of(attrs)) + ", keepdim=" + (keepdim_of(attrs) ? "true" : "false");
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const std::vector<int64_t> axes = axes_of(k.attrs);
    const T* x = k.in<T>(0);
    T* out = k.out_as<T>();
    kernel::reduce<T>(k.target, R, x, k.inputs[0].shape, std::span<const int64_t>(axes), out);
    if constexpr (Mean) {
      if constexpr (FloatingElement<T>) {
        int64_t count = 1;
        for (int64_t a : axes) count *= k.inputs[0].global->shape[a];
        // count 0: factor inf, and 0 * inf = NaN, the mean of nothing.
        using C = compute_t<T>;  // a 16-bit mean scales in float: the sum rounded, then the mean
        kernel::scale<T>(k.target, out, k.out_shape.numel(), C(1) / static_cast<C>(count));
      }
    }
  }

  static Shape out_shape(const Shape& x, const std::vector<int64_t>& axes, bool keepdim) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.ndim(); ++d) {
      const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!reduced) dims.push_back(x[d]);
      else if (keepdim) dims.push_back(1);
    }
    return Shape(std::move(dims));
  }
};

template <class Def, Element T>
GlobalTensor<T> reduce_op(const GlobalTensor<T>& x, const std::vector<int64_t>& axes, bool keepdim) {
  OpAttrs attrs{keepdim ? 1 : 0};
  for (int64_t a : normalize_axes(Def::name, x.shape(), axes)) attrs.push_back(a);
  return call_op<Def>(attrs, {}, x);
}

}  // namespace detail

// sum, mean, max and min of x over axes (every axis when empty), keepdim keeping them as 1.
template <Element T>
GlobalTensor<T> sum(const GlobalTensor<T>& x, std::vector<int64_t> axes = {}, bool keepdim = false) {
  return detail::reduce_op<detail::ReduceDef<ReduceOp::kSum, false>>(x, axes, keepdim);
}
template <Element T>
GlobalTensor<T> mean(const GlobalTensor<T>& x, std::vector<int64_t> axes = {}, bool keepdim = false) {
  return detail::reduce_op<detail::ReduceDef<ReduceOp::kSum, true>>(x, axes, keepdim);
}
template <Element T>
GlobalTensor<T> max(const GlobalTensor<T>& x, std::vector<int64_t> axes = {}, bool keepdim = false) {
  return detail::reduce_op<detail::ReduceDef<ReduceOp::kMax, false>>(x, axes, keepdim);
}
template <Element T>
GlobalTensor<T> min(const GlobalTensor<T>& x, std::vector<int64_t> axes = {}, bool keepdim = false) {
  return detail::reduce_op<detail::ReduceDef<ReduceOp::kMin, false>>(x, axes, keepdim);
}

// The variance over axes with Bessel's correction: sum((x - mean)^2) / (N - correction), N the
// count of reduced elements; correction 1 (the default, torch's) is the sample variance, 0 the
// population variance. Floating types. N - correction <= 0 divides by 0, as torch does (it
// warns): NaN where the squares sum to 0, else inf, in every layout; a negative correction is an
// spsd::Error.
// Composed of global ops (mean, sub, mul, sum, div), so its layouts and backward follow theirs:
// on a split reduced axis the mean is a P(sum) all-reduced to B (one element per kept
// position), the squared deviations stay split and their sum is a P(sum), never a gather.
template <FloatingElement T>
GlobalTensor<T> var(const GlobalTensor<T>& x, std::vector<int64_t> axes = {}, bool keepdim = false,
                    int64_t correction = 1) {
  SPSD_CHECK(correction >= 0, "var", "correction must be >= 0, got ", correction);
  const std::vector<int64_t> reduced = detail::normalize_axes("var", x.shape(), axes);
  int64_t n = 1;
  for (int64_t a : reduced) n *= x.shape()[a];
  const GlobalTensor<T> d = x - mean(x, reduced, true);
  GlobalTensor<T> squares = sum(d * d, reduced, keepdim);
  const int64_t dof = std::max<int64_t>(n - correction, 0);
  // A P(sum) divided by 0 would turn a piece's 0 into NaN (0 / 0) where one process gives inf:
  // reduce the sum first (only for this degenerate case; otherwise the division stays partial).
  if (dof == 0 && squares.nd_sbp().has_partial()) squares = squares.to_global(without_partial(squares.nd_sbp()));
  return squares / static_cast<compute_t<T>>(dof);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_VAR_INSTANCES(prefix, T) \
  prefix template GlobalTensor<T> var<T>(const GlobalTensor<T>&, std::vector<int64_t>, bool, int64_t);
SPSD_FOR_EACH_FLOATING(SPSD_VAR_INSTANCES, extern)
#define SPSD_REDUCE_INSTANCES(prefix, T)                                                  \
  prefix template GlobalTensor<T> sum<T>(const GlobalTensor<T>&, std::vector<int64_t>, bool);  \
  prefix template GlobalTensor<T> mean<T>(const GlobalTensor<T>&, std::vector<int64_t>, bool); \
  prefix template GlobalTensor<T> max<T>(const GlobalTensor<T>&, std::vector<int64_t>, bool);  \
  prefix template GlobalTensor<T> min<T>(const GlobalTensor<T>&, std::vector<int64_t>, bool);
SPSD_FOR_EACH_ELEMENT(SPSD_REDUCE_INSTANCES, extern)

}  // namespace spsd
