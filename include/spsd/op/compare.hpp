#pragma once
// Comparisons and logical ops, giving bool tensors: lt, le, gt, ge, eq, ne (tensor-tensor with
// numpy broadcasting, tensor-scalar, and the operators <, <=, >, >=, ==, != in both orders),
// logical_and, logical_or, logical_not of bool tensors (operators &, |, !).
//
// Elements compare as compute_t<T> (a 16-bit value widens exactly to float; the scalar is a
// compute_t<T>, so x < 0.1f compares with the float 0.1), exactly, alike on cpu and cuda. NaN
// compares false, except by ne (IEEE). bool tensors take eq and ne (and the logical ops), not
// the orderings. No gradient (the output is bool).
//
// 1-d signature table (a bool output is never partial, and comparing is neither linear nor
// monotone, so partial inputs are reduced first):
//   tensor-tensor: numpy-broadcast splits (as add): S(d) on the output, S(source axis) on the
//                  inputs that have the axis, B on those that broadcast it;  (B, B) -> B
//   tensor-scalar, logical_not: S(d) -> S(d);  B -> B
#include <string_view>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

using kernel::CompareOp;

constexpr bool is_logical(CompareOp k) { return k == CompareOp::kAnd || k == CompareOp::kOr; }

// Which dtypes op k takes: logical ops bool only; orderings every type but bool.
inline void check_compare_dtype(std::string_view name, CompareOp k, DType t) {
  if (is_logical(k)) SPSD_CHECK(t == DType::kBool, name, "needs bool tensors, got ", t);
  else if (k != CompareOp::kEq && k != CompareOp::kNe)
    SPSD_CHECK(t != DType::kBool, name, "orders numbers; ", t, " tensors take eq and ne only");
}

inline std::vector<Signature> elementwise_signatures(const Shape& shape) {
  std::vector<Signature> t;
  for (int64_t d = 0; d < shape.ndim(); ++d) t.push_back(uniform_signature(1, sbp::split(d)));
  t.push_back(uniform_signature(1, sbp::broadcast));
  return t;
}

template <CompareOp K>
struct CompareDef {
  static constexpr std::string_view name = kernel::to_string(K);

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(in[0].dtype == in[1].dtype, name, "dtypes differ: ", in[0].dtype, " and ", in[1].dtype);
    check_compare_dtype(name, K, in[0].dtype);
    return {broadcast_shapes(name, in[0].shape, in[1].shape), DType::kBool};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t = broadcast_split_signatures(in, infer(in, attrs).shape);
    t.push_back(uniform_signature(2, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    visit_dtype(k.inputs[0].global->dtype, [&]<class In>() {
      kernel::compare<In>(k.target, K, k.in<In>(0), k.inputs[0].shape, k.in<In>(1), k.inputs[1].shape,
                          k.out_as<bool>(), k.out_shape);
    });
  }
};

// x op s; s op x is x mirrored(op) s. logical_not is eq(x, false) under its own name.
template <CompareOp K, bool Not = false>
struct CompareScalarDef {
  static constexpr std::string_view name = Not                    ? std::string_view("logical_not")
                                           : K == CompareOp::kLt  ? "lt_scalar"
                                           : K == CompareOp::kLe  ? "le_scalar"
                                           : K == CompareOp::kGt  ? "gt_scalar"
                                           : K == CompareOp::kGe  ? "ge_scalar"
                                           : K == CompareOp::kEq  ? "eq_scalar"
                                                                  : "ne_scalar";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    if (Not) SPSD_CHECK(in[0].dtype == DType::kBool, name, "needs a bool tensor, got ", in[0].dtype);
    else check_compare_dtype(name, K, in[0].dtype);
    return {in[0].shape, DType::kBool};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    return elementwise_signatures(in[0].shape);
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    visit_dtype(k.inputs[0].global->dtype, [&]<class In>() {
      kernel::compare_scalar<In>(k.target, K, k.in<In>(0), k.scalar.as<compute_t<In>>(), k.out_as<bool>(),
                                 k.out_shape.numel());
    });
  }
};

template <CompareOp K, Element T>
GlobalTensor<bool> compare_tensors(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  const InputRef refs[] = {input_ref(a), input_ref(b)};
  return run_op<CompareDef<K>, bool>(refs);
}

template <CompareOp K, Element T>
GlobalTensor<bool> compare_scalar(const GlobalTensor<T>& x, compute_t<T> s) {
  const InputRef refs[] = {input_ref(x)};
  return run_op<CompareScalarDef<K>, bool>(refs, {}, Scalar::of<compute_t<T>>(s));
}

}  // namespace detail

#define SPSD_COMPARISON(fn, kind, op)                                                                \
  template <Element T>                                                                               \
  GlobalTensor<bool> fn(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {                        \
    return detail::compare_tensors<kernel::CompareOp::kind>(a, b);                                   \
  }                                                                                                  \
  template <Element T>                                                                               \
  GlobalTensor<bool> fn(const GlobalTensor<T>& x, compute_t<T> s) {                                  \
    return detail::compare_scalar<kernel::CompareOp::kind, T>(x, s);                                 \
  }                                                                                                  \
  template <Element T>                                                                               \
  GlobalTensor<bool> operator op(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {               \
    return fn(a, b);                                                                                 \
  }                                                                                                  \
  template <Element T>                                                                               \
  GlobalTensor<bool> operator op(const GlobalTensor<T>& x, compute_t<T> s) {                         \
    return fn(x, s);                                                                                 \
  }                                                                                                  \
  template <Element T>                                                                               \
  GlobalTensor<bool> operator op(compute_t<T> s, const GlobalTensor<T>& x) {                         \
    return detail::compare_scalar<kernel::mirrored(kernel::CompareOp::kind), T>(x, s);               \
  }
SPSD_COMPARISON(lt, kLt, <)
SPSD_COMPARISON(le, kLe, <=)
SPSD_COMPARISON(gt, kGt, >)
SPSD_COMPARISON(ge, kGe, >=)
SPSD_COMPARISON(eq, kEq, ==)
SPSD_COMPARISON(ne, kNe, !=)
#undef SPSD_COMPARISON

// Element-wise logic of bool tensors (numpy broadcasting for and/or), defined in src/op/compare.cpp.
GlobalTensor<bool> logical_and(const GlobalTensor<bool>& a, const GlobalTensor<bool>& b);
GlobalTensor<bool> logical_or(const GlobalTensor<bool>& a, const GlobalTensor<bool>& b);
GlobalTensor<bool> logical_not(const GlobalTensor<bool>& x);
inline GlobalTensor<bool> operator&(const GlobalTensor<bool>& a, const GlobalTensor<bool>& b) { return logical_and(a, b); }
inline GlobalTensor<bool> operator|(const GlobalTensor<bool>& a, const GlobalTensor<bool>& b) { return logical_or(a, b); }
inline GlobalTensor<bool> operator!(const GlobalTensor<bool>& x) { return logical_not(x); }

// Compiled into the library (core/instances.hpp); eq and ne for bool too.
#define SPSD_COMPARE_INSTANCES_OF(prefix, T, K)                                                                   \
  prefix template GlobalTensor<bool> detail::compare_tensors<kernel::CompareOp::K, T>(const GlobalTensor<T>&,     \
                                                                                      const GlobalTensor<T>&);    \
  prefix template GlobalTensor<bool> detail::compare_scalar<kernel::CompareOp::K, T>(const GlobalTensor<T>&,      \
                                                                                     compute_t<T>);
#define SPSD_EQUALITY_INSTANCES(prefix, T) \
  SPSD_COMPARE_INSTANCES_OF(prefix, T, kEq) SPSD_COMPARE_INSTANCES_OF(prefix, T, kNe)
#define SPSD_COMPARE_INSTANCES(prefix, T)                                                                 \
  SPSD_COMPARE_INSTANCES_OF(prefix, T, kLt) SPSD_COMPARE_INSTANCES_OF(prefix, T, kLe)                     \
  SPSD_COMPARE_INSTANCES_OF(prefix, T, kGt) SPSD_COMPARE_INSTANCES_OF(prefix, T, kGe)                     \
  SPSD_EQUALITY_INSTANCES(prefix, T)
SPSD_FOR_EACH_ELEMENT(SPSD_COMPARE_INSTANCES, extern)
SPSD_EQUALITY_INSTANCES(extern, bool)

}  // namespace spsd
