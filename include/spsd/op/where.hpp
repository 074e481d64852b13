#pragma once
// Selection by a bool mask: where(cond, a, b) = cond ? a : b (all three numpy-broadcast), and
// masked_fill(x, mask, value) = mask ? value : x (mask broadcast to x's shape, which the result
// keeps; PyTorch's semantics). value is a compute_t<T>, rounded once to T.
//
// Backward: where gives a the gradient where cond holds and b the rest (0 elsewhere), each
// summed to its shape; masked_fill gives x the gradient with the filled positions zeroed.
//
// 1-d signature tables (cond and mask are bool, never partial):
//   where:        numpy-broadcast splits (as add, over three inputs);  (B, B, B) -> B
//                 (B, P(op), P(op)) -> P(op) for sum, max and min: selecting element by element
//                 commutes with adding pieces (linear in a and b jointly) and with max/min
//   masked_fill:  S(d) on x and the output, S(mask's axis) or B (where the mask broadcasts) on
//                 mask;  (B, B) -> B;  (P(max), B) -> P(max), (P(min), B) -> P(min) for any value
//                 (filled positions hold value on every rank);  (P(sum), B) -> P(sum) only when
//                 value == 0 (otherwise the pieces would add up to n * value)
// bool a, b or x take no partial rows.
#include <string_view>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/compare.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

inline const Sbp* const kPartialSbps[] = {&sbp::partial_sum, &sbp::partial_max, &sbp::partial_min};

struct WhereDef {
  static constexpr std::string_view name = "where";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(in[0].dtype == DType::kBool, name, "cond must be bool, cond is ", in[0].to_string());
    SPSD_CHECK(in[1].dtype == in[2].dtype, name, "a and b must have one dtype, got ", in[1].to_string(), " and ",
               in[2].to_string());
    const Shape ab = broadcast_shapes(name, in[1].shape, in[2].shape);
    return {broadcast_shapes(name, in[0].shape, ab), in[1].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t = broadcast_split_signatures(in, infer(in, attrs).shape);
    if (allows_partial(in[1].dtype))
      for (const Sbp* p : kPartialSbps) t.push_back({{sbp::broadcast, *p, *p}, *p});
    t.push_back(uniform_signature(3, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::where<T>(k.target, k.in<bool>(0), k.inputs[0].shape, k.in<T>(1), k.inputs[1].shape, k.in<T>(2),
                     k.inputs[2].shape, k.out_as<T>(), k.out_shape);
  }
};

// attrs: [value == 0] (a scalar is not part of the resolution cache key, but P(sum) depends on it).
struct MaskedFillDef {
  static constexpr std::string_view name = "masked_fill";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(in[1].dtype == DType::kBool, name, "mask must be bool, mask is ", in[1].to_string());
    const Shape &x = in[0].shape, &m = in[1].shape;
    bool fits = m.ndim() <= x.ndim();
    for (int64_t d = 0; fits && d < m.ndim(); ++d) fits = m[d] == 1 || m[d] == x[x.ndim() - m.ndim() + d];
    SPSD_CHECK(fits, name, "mask of shape ", m, " does not broadcast to x's shape ", x);
    return in[0];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t = broadcast_split_signatures(in, in[0].shape);
    if (allows_partial(in[0].dtype)) {
      if (attrs[0] != 0) t.push_back({{sbp::partial_sum, sbp::broadcast}, sbp::partial_sum});
      for (const Sbp* p : {&sbp::partial_max, &sbp::partial_min}) t.push_back({{*p, sbp::broadcast}, *p});
    }
    t.push_back(uniform_signature(2, sbp::broadcast));
    return t;
  }

  static std::string attrs_text(const OpAttrs& attrs) { return attrs[0] != 0 ? "value=0" : "value!=0"; }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::masked_fill<T>(k.target, k.in<T>(0), k.inputs[0].shape, k.in<bool>(1), k.inputs[1].shape,
                           k.scalar.as<compute_t<T>>(), k.out_as<T>());
  }
};

}  // namespace detail

// cond ? a : b element-wise, all three broadcast.
template <Element T>
GlobalTensor<T> where(const GlobalTensor<bool>& cond, const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  const detail::InputRef refs[] = {detail::input_ref(cond), detail::input_ref(a), detail::input_ref(b)};
  return detail::run_op<detail::WhereDef, T>(refs);
}

// mask ? value : x, mask broadcast to x's shape.
template <Element T>
GlobalTensor<T> masked_fill(const GlobalTensor<T>& x, const GlobalTensor<bool>& mask, compute_t<T> value) {
  const detail::InputRef refs[] = {detail::input_ref(x), detail::input_ref(mask)};
  return detail::run_op<detail::MaskedFillDef, T>(refs, {value == compute_t<T>(0) ? 1 : 0},
                                                  Scalar::of<compute_t<T>>(value));
}

// Compiled into the library (core/instances.hpp); bool too.
#define SPSD_WHERE_INSTANCES(prefix, T)                                                                       \
  prefix template GlobalTensor<T> where<T>(const GlobalTensor<bool>&, const GlobalTensor<T>&, const GlobalTensor<T>&); \
  prefix template GlobalTensor<T> masked_fill<T>(const GlobalTensor<T>&, const GlobalTensor<bool>&, compute_t<T>);
SPSD_FOR_EACH_ELEMENT(SPSD_WHERE_INSTANCES, extern)
SPSD_WHERE_INSTANCES(extern, bool)

}  // namespace spsd
