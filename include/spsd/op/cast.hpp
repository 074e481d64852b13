#pragma once
// cast<U>(x): x's values converted to element type U (kernel/convert.hpp), in x's layout, with
// autograd (the gradient is cast back to x's type).
//
// Layouts: every split and B map to themselves, and so do P(max) and P(min) where the conversion
// is non-decreasing, so the max of converted pieces is the converted max (the identity padding
// converts to a value no greater than any other): every pair but int64 -> int32, which wraps
// modulo 2^32 (the padding INT64_MIN becomes 0) and so reduces P(max)/P(min) first. P(sum)
// stays P(sum) between floating types only, the pieces converted one by one: exact when U holds every value of x's type (float ->
// double, 16-bit -> float), otherwise each piece rounds, so the sum of the converted pieces is
// within u * sum_i |p_i| of the exact sum (u: U's unit roundoff, 2^-8 bfloat16, 2^-11 float16,
// 2^-24 float) before the reduction that later resolves the partial rounds once more. Casts
// to or from integers reduce P(sum) first, to B or a split, whichever the dispatcher finds
// cheaper (integer sums wrap; truncation is not linear).
// docs/precision.md.
#include <string>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

struct CastDef {
  static constexpr std::string_view name = "cast";

  static DType target(const OpAttrs& attrs) { return static_cast<DType>(attrs[0]); }

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(is_valid(target(attrs)), name, "invalid target dtype value ", attrs[0]);
    return {in[0].shape, target(attrs)};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d) t.push_back(uniform_signature(1, sbp::split(d)));
    if (is_floating(in[0].dtype) && is_floating(target(attrs))) t.push_back(uniform_signature(1, sbp::partial_sum));
    const bool wraps = !is_floating(in[0].dtype) && !is_floating(target(attrs)) &&
                       size_of(target(attrs)) < size_of(in[0].dtype);  // not monotone
    // bool has no partial layouts: max(bool(a), bool(b)) is not bool(max(a, b)) for negative a.
    const bool partial = allows_partial(in[0].dtype) && allows_partial(target(attrs));
    if (!wraps && partial)
      t.insert(t.end(), {uniform_signature(1, sbp::partial_max), uniform_signature(1, sbp::partial_min)});
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }

  static std::string attrs_text(const OpAttrs& attrs) { return "to=" + std::string(to_string(target(attrs))); }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    visit_dtype(k.inputs[0].global->dtype, [&]<class From>() {
      kernel::cast<From, T>(k.target, k.in<From>(0), k.out_as<T>(), k.out_shape.numel());
    });
  }
};

// cast's body for each target type: the inputs' type is erased (InputRef), so the library
// compiles one run_op per target, not one per pair.
template <Element U>
GlobalTensor<U> cast_to(const InputRef& x) {
  return run_op<CastDef, U>({&x, 1}, {static_cast<int64_t>(dtype_of<U>)});
}

}  // namespace detail

// x converted to U, layout kept (P(sum) between floating types is cast piece by piece: see the
// header comment for the bound); cast<T>(x) of x's own type returns x.
template <Element U, Element T>
GlobalTensor<U> cast(const GlobalTensor<T>& x) {
  if constexpr (std::is_same_v<U, T>) {
    return x;
  } else {
    return detail::cast_to<U>(detail::input_ref(x));
  }
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CAST_INSTANCES(prefix, U) prefix template GlobalTensor<U> detail::cast_to<U>(const detail::InputRef&);
SPSD_FOR_EACH_ELEMENT(SPSD_CAST_INSTANCES, extern)
SPSD_CAST_INSTANCES(extern, bool)

}  // namespace spsd
