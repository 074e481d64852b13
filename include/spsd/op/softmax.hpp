#pragma once
// softmax(x, axis) and log_softmax(x, axis) along one axis (negative counts from the end),
// for floating tensors.
//
// Two paths, chosen from x's layout:
//
// 1. The axis is whole on every rank (no mesh axis holds S(axis)): one op, SoftmaxDef, whose
//    1-d table is
//        S(d) -> S(d)   for every d != axis
//        B -> B
//    (no partial rule: softmax is not linear, and not monotone per element). A P input is
//    boxed away by the resolver first (reduce-scatter to a split of another axis where that is
//    cheapest). The local kernel is kernel::cpu::softmax on the piece.
//
// 2. The axis is split (some mesh axis holds S(axis)): the decomposition through partial
//    reductions, written with global ops, so only the reduced tensors travel:
//        m = max(x, {axis}, keepdim)   S(axis) -> P(max), shape (..., 1, ...)
//        m: P(max) -> B                 all-reduce (max) of the small tensor
//        z = x - m                      (S(axis), B) -> S(axis), local
//        e = exp(z)                     local
//        s = sum(e, {axis}, keepdim)   S(axis) -> P(sum)
//        s: P(sum) -> B                 all-reduce (sum) of the small tensor
//        softmax = e / s;   log_softmax = z - log(s)     local
//    The axis is never gathered. Other mesh axes keep their layout (a split of another axis
//    stays a split through every step; only the P axes produced by the reductions become B).
//    A partial input is first reduce-scattered into S(axis) on its partial mesh axes.
//
//    Bytes per rank, for x of R rows (the product of the other axes' local extents) and C
//    elements along the axis split k ways, element size b, ring collectives:
//      decomposition: two all-reduces of R elements: 2 * 2 (k-1)/k * R * b sent (and received)
//      gathering the axis (all-gather, then the one-op path): (k-1)/k * R * C * b received
//    e.g. (4, 1000) float on 4 ranks split on axis 1: 2 * 2 * 3/4 * 4 * 4 = 48 B (measured by
//    test/sim/test_ops_reduce.cpp with comm_stats) against
//    3/4 * 16000 = 12000 B: C / 4 times fewer bytes, in 2 small collectives.
#include <string>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/reduce.hpp"

namespace spsd {

namespace detail {

template <bool Log>
struct SoftmaxDef {
  static constexpr std::string_view name = Log ? "log_softmax" : "softmax";

  // attrs = [axis], non-negative.
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(is_floating(in[0].dtype), name, "is defined for floating tensors only, x is ", in[0].dtype,
               " of shape ", in[0].shape);
    SPSD_CHECK(attrs.size() == 1 && attrs[0] >= 0 && attrs[0] < in[0].shape.ndim(), name, "axis ",
               attrs.empty() ? int64_t{-1} : attrs[0], " is out of range for a tensor of shape ", in[0].shape);
    return in[0];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d)
      if (d != attrs[0]) t.push_back(uniform_signature(1, sbp::split(d)));
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }

  static std::string attrs_text(const OpAttrs& attrs) { return "axis=" + std::to_string(attrs[0]); }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>)
      kernel::softmax<T>(k.target, k.in<T>(0), k.inputs[0].shape, k.attrs[0], k.out_as<T>(), Log);
  }
};

// The same layout with every partial mesh axis replaced by `with`.
inline NdSbp replace_partials(const NdSbp& nd, const Sbp& with) {
  std::vector<Sbp> out;
  for (const Sbp& s : nd) out.push_back(s.is_partial() ? with : s);
  return NdSbp(std::move(out));
}

template <Element T>
GlobalTensor<T> without_partials(const GlobalTensor<T>& t, const Sbp& with) {
  bool any = false;
  for (const Sbp& s : t.nd_sbp()) any = any || s.is_partial();
  return any ? t.to_global(replace_partials(t.nd_sbp(), with)) : t;
}

template <bool Log, Element T>
GlobalTensor<T> softmax_impl(const GlobalTensor<T>& x, int64_t axis) {
  constexpr std::string_view name = SoftmaxDef<Log>::name;
  const int64_t n = x.shape().ndim();
  SPSD_CHECK(is_floating(dtype_of<T>), name, "is defined for floating tensors only, x is ", dtype_of<T>,
             " of shape ", x.shape());
  SPSD_CHECK(axis >= -n && axis < n, name, "axis ", axis, " is out of range for a tensor of shape ", x.shape());
  const int64_t a = axis < 0 ? axis + n : axis;
  bool split = false;
  for (const Sbp& s : x.nd_sbp()) split = split || (s.is_split() && s.axis() == a);
  // An axis of size 0 has nothing to normalize (the output is empty): the one-op path, which
  // boxes the empty input for free, rather than a max over no elements.
  if (!split || x.shape()[a] == 0) return call_op<SoftmaxDef<Log>>({a}, {}, x);

  // The decomposition (see the header comment): only m and s, (..., 1, ...), communicate.
  // It runs on x detached and is recorded as one softmax for autograd (one backward rule for
  // both paths, and no gradient through the max, which only keeps exp in range).
  GlobalTensor<T> xs = without_partials(x.detach(), sbp::split(a));
  GlobalTensor<T> m = without_partials(spsd::max(xs, {a}, true), sbp::broadcast);
  GlobalTensor<T> z = spsd::sub(xs, m);
  GlobalTensor<T> e = spsd::exp(z);
  GlobalTensor<T> s = without_partials(spsd::sum(e, {a}, true), sbp::broadcast);
  GlobalTensor<T> y = Log ? spsd::sub(z, spsd::log(s)) : spsd::div(e, s);
  const InputRef refs[] = {input_ref(x)};
  return recorded(name, refs, {a}, {}, std::move(y));
}

}  // namespace detail

// softmax and log_softmax of x along axis.
template <Element T>
GlobalTensor<T> softmax(const GlobalTensor<T>& x, int64_t axis) {
  return detail::softmax_impl<false>(x, axis);
}
template <Element T>
GlobalTensor<T> log_softmax(const GlobalTensor<T>& x, int64_t axis) {
  return detail::softmax_impl<true>(x, axis);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_SOFTMAX_INSTANCES(prefix, T)                                      \
  prefix template GlobalTensor<T> softmax<T>(const GlobalTensor<T>&, int64_t); \
  prefix template GlobalTensor<T> log_softmax<T>(const GlobalTensor<T>&, int64_t);
SPSD_FOR_EACH_ELEMENT(SPSD_SOFTMAX_INSTANCES, extern)

}  // namespace spsd
