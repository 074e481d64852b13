#pragma once
// layer_norm(x, weight, bias, eps) and rms_norm(x, weight, eps) over the last axis, for
// floating tensors; weight and bias have shape (C,), C = x's last extent:
//   layer_norm: y = (x - mean) / sqrt(var + eps) * weight + bias   (var: biased, as torch)
//   rms_norm:   y = x / sqrt(mean(x^2) + eps) * weight
//
// Two paths, chosen from x's layout (as softmax, op/softmax.hpp):
//
// 1. The last axis is whole on every rank: one op, NormDef, whose 1-d table is
//        x S(d), weight B, bias B -> S(d)   for every d < last
//        B, P(sum), P(sum) -> P(sum)          (linear in weight and bias together)
//        B, B, B -> B
//    with the fused local kernel (kernel::norm_forward: two-pass statistics per row, float
//    accumulation for 16-bit). A P input is boxed away by the resolver first. No rule splits
//    weight: each row needs all C of them.
//
// 2. The last axis is split (some mesh axis holds S(last)): partial statistics of shape
//    (..., 1) through global ops, so only they travel:
//        mean = sum(x, last, keepdim) / C    S(last) -> P(sum) -> B   all-reduce of R elements
//        xc = x - mean                        local   (rms_norm: xc = x, no mean)
//        var = sum(xc^2, last, keepdim) / C  S(last) -> P(sum) -> B   all-reduce of R elements
//        y = xc / sqrt(var + eps) * weight + bias   local, weight and bias S(0) (the same
//                                                   split of C: from B a local slice)
//    The axis is never gathered; other mesh axes keep their layout. A partial input is first
//    reduce-scattered into S(last) on its partial mesh axes.
//
//    Bytes per rank, for x of R rows (the product of the other axes' local extents) and C
//    columns split k ways, element size b, ring all-reduces:
//      decomposition: layer_norm 2 * 2 (k-1)/k * R * b, rms_norm 2 (k-1)/k * R * b sent (and
//                     received)
//      gathering the axis (all-gather, then path 1): (k-1)/k * R * C * b received
//    e.g. (4, 1000) float split on axis 1 over 4 ranks: layer_norm 48 B, rms_norm 24 B against
//    12000 B (test/sim/test_ops_norm.cpp measures them with comm_stats).
//
// Both paths record one node for autograd (src/autograd/norm_rules.cpp): fused backward ops
// (autograd/norm_grad.hpp) while the axis is whole, the composed formulas (P(sum) row sums)
// while it is split.
#include <bit>
#include <string>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/cast.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/reduce.hpp"
#include "spsd/op/softmax.hpp"

namespace spsd {

namespace detail {

// The checks both paths make, on the global metas: inputs (x, weight[, bias]).
inline void check_norm_inputs(std::string_view name, std::span<const TensorMeta> in, double eps) {
  const TensorMeta& x = in[0];
  SPSD_CHECK(is_floating(x.dtype), name, "is defined for floating tensors only, x is ", x.dtype, " of shape ",
             x.shape);
  SPSD_CHECK(x.shape.ndim() >= 1, name, "normalizes the last axis: x of shape ", x.shape, " has none");
  const int64_t c = x.shape[x.shape.ndim() - 1];
  const char* what[] = {"x", "weight", "bias"};
  for (size_t i = 1; i < in.size(); ++i)
    SPSD_CHECK(in[i].shape == Shape{c} && in[i].dtype == x.dtype, name, what[i], " must be (", c, ") ", x.dtype,
               " for x of shape ", x.shape, ", got ", in[i].to_string());
  SPSD_CHECK(eps >= 0 && std::isfinite(eps), name, "eps must be finite and non-negative, got ", eps);
}

template <bool Rms>
struct NormDef {
  static constexpr std::string_view name = Rms ? "rms_norm" : "layer_norm";

  // inputs (x, weight, bias) or (x, weight) for rms; the scalar is eps.
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    check_norm_inputs(name, in, 0);
    return in[0];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const size_t n = in.size();
    std::vector<Signature> t;
    for (int64_t d = 0; d + 1 < in[0].shape.ndim(); ++d) {
      Signature s = uniform_signature(n, sbp::broadcast);
      s.inputs[0] = s.output = sbp::split(d);
      t.push_back(std::move(s));
    }
    // y is linear in (weight, bias) together: partial parameters give a partial y.
    Signature p = uniform_signature(n, sbp::partial_sum);
    p.inputs[0] = sbp::broadcast;
    t.push_back(std::move(p));
    t.push_back(uniform_signature(n, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>) {
      const Shape& s = k.inputs[0].shape;
      const int64_t c = s[s.ndim() - 1], rows = c == 0 ? 0 : s.numel() / c;
      kernel::norm_forward<T>(k.target, k.in<T>(0), k.in<T>(1), Rms ? nullptr : k.in<T>(2), rows, c, k.scalar.f, Rms,
                              k.out_as<T>());
    }
  }
};

// (x - mean, or x for rms; 1 / sqrt(var + eps)) of x along axis a, the statistics B on the mesh
// axes that split a: the split path's partial reductions (header comment).
template <Element T>
std::pair<GlobalTensor<T>, GlobalTensor<T>> norm_statistics(const GlobalTensor<T>& x, int64_t a, double eps,
                                                            bool rms) {
  const auto inv_c = static_cast<compute_t<T>>(1.0 / static_cast<double>(x.shape()[a]));
  GlobalTensor<T> xc = x;
  if (!rms) xc = spsd::sub(x, spsd::mul(without_partials(spsd::sum(x, {a}, true), sbp::broadcast), inv_c));
  GlobalTensor<T> var = spsd::mul(without_partials(spsd::sum(spsd::mul(xc, xc), {a}, true), sbp::broadcast), inv_c);
  GlobalTensor<T> rstd = spsd::div(compute_t<T>(1), spsd::sqrt(spsd::add(var, static_cast<compute_t<T>>(eps))));
  return {std::move(xc), std::move(rstd)};
}

// The split path's result (header comment) on inputs that record nothing. The 16-bit types run
// it in float (cast of the local pieces, no communication) and round the output once: their
// own intermediates would round x - mean and overflow float16 in x^2; the statistics then
// travel as float.
template <bool Rms, Element T, class... Affine>
GlobalTensor<T> split_norm(const GlobalTensor<T>& x, double eps, const Affine&... affine) {
  if constexpr (is_half_v<T>) {
    return spsd::cast<T>(split_norm<Rms>(spsd::cast<float>(x), eps, spsd::cast<float>(affine)...));
  } else if constexpr (FloatingElement<T>) {
    const int64_t a = x.shape().ndim() - 1;
    const auto [xc, rstd] = norm_statistics(without_partials(x, sbp::split(a)), a, eps, Rms);
    const GlobalTensor<T> params[] = {affine...};
    GlobalTensor<T> y = spsd::mul(spsd::mul(xc, rstd), params[0]);
    if constexpr (sizeof...(Affine) == 2) y = spsd::add(y, params[1]);
    return y;
  } else {
    return x;  // not reached: check_norm_inputs rejects integer tensors
  }
}

template <bool Rms, Element T, class... Affine>
GlobalTensor<T> norm_impl(const GlobalTensor<T>& x, double eps, const Affine&... affine) {
  constexpr std::string_view name = NormDef<Rms>::name;
  const TensorMeta metas[] = {{x.shape(), dtype_of<T>}, {affine.shape(), dtype_of<T>}...};
  check_norm_inputs(name, metas, eps);
  const int64_t a = x.shape().ndim() - 1;
  bool split = false;
  for (const Sbp& s : x.nd_sbp()) split = split || (s.is_split() && s.axis() == a);
  if (!split || x.shape()[a] == 0) return call_op<NormDef<Rms>>({}, Scalar::of(eps), x, affine...);

  // The decomposition, on detached inputs, recorded as one node (one backward rule for both
  // paths). Its steps would name themselves (mul) on a placement mismatch: checked here.
  for (const Placement* on : {&affine.placement()...})
    SPSD_CHECK(*on == x.placement(), name, "inputs must share one placement: x is on ", x.placement(),
               ", a parameter on ", *on);
  const InputRef refs[] = {input_ref(x), input_ref(affine)...};
  return recorded(name, refs, {}, Scalar::of(eps), split_norm<Rms>(x.detach(), eps, affine.detach()...));
}

}  // namespace detail

// layer_norm and rms_norm over the last axis (the formulas at the top of this file).
template <Element T>
GlobalTensor<T> layer_norm(const GlobalTensor<T>& x, const GlobalTensor<T>& weight, const GlobalTensor<T>& bias,
                           double eps = 1e-5) {
  return detail::norm_impl<false>(x, eps, weight, bias);
}
template <Element T>
GlobalTensor<T> rms_norm(const GlobalTensor<T>& x, const GlobalTensor<T>& weight, double eps = 1e-6) {
  return detail::norm_impl<true>(x, eps, weight);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_NORM_INSTANCES(prefix, T)                                                                          \
  prefix template GlobalTensor<T> layer_norm<T>(const GlobalTensor<T>&, const GlobalTensor<T>&,                 \
                                                const GlobalTensor<T>&, double);                                \
  prefix template GlobalTensor<T> rms_norm<T>(const GlobalTensor<T>&, const GlobalTensor<T>&, double);
SPSD_FOR_EACH_ELEMENT(SPSD_NORM_INSTANCES, extern)

}  // namespace spsd
