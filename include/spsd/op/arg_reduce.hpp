#pragma once
// argmax(x, axis, keepdim = false) and argmin: the index along axis of the first maximum
// (minimum), as int64, like torch (ties give the first index; a NaN counts as the extreme, so
// the first NaN's index where the axis holds one). No gradient. An axis of size 0 is an error.
//
// Composed of global ops so that a split axis is never gathered:
//   m    = max(x, axis, keepdim)        split axis: P(max) pieces, all-reduced (kept positions only)
//   keys = extreme_keys(x, m)           per element: i for a NaN, n + i where x == m, 2n + i where
//                                       x is infinite, else INT64_MAX (i the GLOBAL index along
//                                       the axis, from the piece's box; kernel/compare_ops.hpp)
//   r    = min(keys, axis)              split axis: P(min), one small all-reduce (to B, once)
//   r - (r / n) * n                     r mod n, on the reduced tensor
// extreme_keys' 1-d table: numpy-broadcast splits of (x, m) (m is B along the axis, whose size
// it has 1);  (B, B) -> B.
#include <string_view>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/layout/layout.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/dispatch.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/reduce.hpp"

namespace spsd {

namespace detail {

// attrs: [axis] (non-negative).
struct ExtremeKeysDef {
  static constexpr std::string_view name = "extreme_keys";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(in[0].dtype == in[1].dtype && allows_partial(in[0].dtype), name, "needs x and its extreme of one numeric dtype, got ",
               in[0].to_string(), " and ", in[1].to_string());
    std::vector<int64_t> dims = in[0].shape.dims();
    dims[attrs[0]] = 1;
    SPSD_CHECK(in[1].shape == Shape(dims), name, "the extreme must have shape ", Shape(dims), ", got ", in[1].shape);
    return {in[0].shape, DType::kInt64};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    std::vector<Signature> t = broadcast_split_signatures(in, in[0].shape);
    t.push_back(uniform_signature(2, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const int64_t axis = k.attrs[0];
    const Shape& s = k.inputs[0].shape;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    for (int64_t d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
    visit_dtype(k.inputs[0].global->dtype, [&]<class In>() {
      if constexpr (!std::is_same_v<In, bool>)
        kernel::extreme_keys<In>(k.target, k.in<In>(0), k.in<In>(1), outer, s[axis], inner, k.out_box.begin[axis],
                                 k.inputs[0].global->shape[axis], k.out_as<int64_t>());
    });
  }
};

template <class Extreme, Element T>
GlobalTensor<int64_t> arg_extreme(std::string_view op, const GlobalTensor<T>& x, int64_t axis, bool keepdim,
                                  Extreme extreme) {
  const int64_t r = x.shape().ndim();
  SPSD_CHECK(axis >= -r && axis < r, op, "axis ", axis, " is out of range for a tensor of shape ", x.shape());
  const int64_t a = axis < 0 ? axis + r : axis;
  const int64_t n = x.shape()[a];
  SPSD_CHECK(n > 0, op, "axis ", axis, " of the tensor of shape ", x.shape(), " is empty (no extreme)");
  const GlobalTensor<T> m = extreme(x, std::vector<int64_t>{a}, true);
  const InputRef refs[] = {input_ref(x), input_ref(m)};
  const GlobalTensor<int64_t> keys = run_op<ExtremeKeysDef, int64_t>(refs, {a});
  GlobalTensor<int64_t> first = spsd::min(keys, {a}, keepdim);
  // A split axis leaves P(min): reduce it once here, not once per op below.
  if (first.nd_sbp().has_partial()) first = first.to_global(without_partial(first.nd_sbp()));
  return first - (first / n) * n;
}

}  // namespace detail

// The index of the first maximum along axis.
template <Element T>
GlobalTensor<int64_t> argmax(const GlobalTensor<T>& x, int64_t axis, bool keepdim = false) {
  return detail::arg_extreme("argmax", x, axis, keepdim,
                             [](const GlobalTensor<T>& t, std::vector<int64_t> axes, bool k) { return spsd::max(t, axes, k); });
}
// The index of the first minimum along axis.
template <Element T>
GlobalTensor<int64_t> argmin(const GlobalTensor<T>& x, int64_t axis, bool keepdim = false) {
  return detail::arg_extreme("argmin", x, axis, keepdim,
                             [](const GlobalTensor<T>& t, std::vector<int64_t> axes, bool k) { return spsd::min(t, axes, k); });
}

// Compiled into the library (core/instances.hpp).
#define SPSD_ARG_REDUCE_INSTANCES(prefix, T)                                         \
  prefix template GlobalTensor<int64_t> argmax<T>(const GlobalTensor<T>&, int64_t, bool); \
  prefix template GlobalTensor<int64_t> argmin<T>(const GlobalTensor<T>&, int64_t, bool);
SPSD_FOR_EACH_ELEMENT(SPSD_ARG_REDUCE_INSTANCES, extern)

}  // namespace spsd
