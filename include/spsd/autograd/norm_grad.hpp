#pragma once
// The fused backward ops of layer_norm and rms_norm (op/normalization.hpp), used by the rules
// in src/autograd/norm_rules.cpp while the last axis is whole on every rank. The row
// statistics are recomputed from x (forward keeps nothing but its inputs); eps is the scalar.
//
//   norm_grad_x(x, weight, g)   dx = rstd (g w - mean(g w) - xhat mean(g w xhat)) per row
//                               (rms: without mean(g w))
//       S(d), B, S(d) -> S(d) for d < last;  B, B, P(sum) -> P(sum) (linear in g);
//       B, P(sum), B -> P(sum) (linear in w);  B, B, B -> B
//   norm_grad_weight(x, g)      dweight = sum over rows of g xhat, shape (C,)
//       S(d), S(d) -> P(sum) for d < last (each rank sums its rows; backward boxes the sum into
//       the weight's layout, like a bias gradient under a batch split);  B, P(sum) -> P(sum);
//       B, B -> B
// (dbias is sum(g) over the leading axes: the plain sum op, the same layouts.)
#include <string_view>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/dispatch.hpp"
#include "spsd/op/normalization.hpp"

namespace spsd::detail {

namespace norm_grad_ops {

// x's rows: (rows, C) of the piece.
inline std::pair<int64_t, int64_t> rows_of(const Shape& s) {
  const int64_t c = s[s.ndim() - 1];
  return {c == 0 ? 0 : s.numel() / c, c};
}

template <bool Rms>
struct NormGradXDef {
  static constexpr std::string_view name = Rms ? "rms_norm_grad" : "layer_norm_grad";

  // inputs (x, weight, g).
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    check_norm_inputs(name, in.first(2), 0);
    SPSD_CHECK(in[2] == in[0], name, "needs g like x, ", in[0].to_string(), ", got ", in[2].to_string());
    return in[0];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    std::vector<Signature> t;
    for (int64_t d = 0; d + 1 < in[0].shape.ndim(); ++d) t.push_back({{sbp::split(d), B, sbp::split(d)}, sbp::split(d)});
    t.push_back({{B, B, P}, P});
    t.push_back({{B, P, B}, P});
    t.push_back(uniform_signature(3, B));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>) {
      const auto [rows, c] = rows_of(k.inputs[0].shape);
      kernel::norm_backward_x<T>(k.target, k.in<T>(0), k.in<T>(1), k.in<T>(2), rows, c, k.scalar.f, Rms, k.out_as<T>());
    }
  }
};

template <bool Rms>
struct NormGradWeightDef {
  static constexpr std::string_view name = Rms ? "rms_norm_weight_grad" : "layer_norm_weight_grad";

  // inputs (x, g); the output is (C,).
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    check_norm_inputs(name, in.first(1), 0);
    SPSD_CHECK(in[1] == in[0], name, "needs g like x, ", in[0].to_string(), ", got ", in[1].to_string());
    return {Shape{in[0].shape[in[0].shape.ndim() - 1]}, in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    std::vector<Signature> t;
    for (int64_t d = 0; d + 1 < in[0].shape.ndim(); ++d) t.push_back({{sbp::split(d), sbp::split(d)}, P});
    t.push_back({{B, P}, P});
    t.push_back(uniform_signature(2, B));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>) {
      const auto [rows, c] = rows_of(k.inputs[0].shape);
      kernel::norm_backward_w<T>(k.target, k.in<T>(0), k.in<T>(1), rows, c, k.scalar.f, Rms, k.out_as<T>());
    }
  }
};

}  // namespace norm_grad_ops

template <bool Rms, Element T>
GlobalTensor<T> norm_grad_x(const GlobalTensor<T>& x, const GlobalTensor<T>& weight, const GlobalTensor<T>& g,
                            double eps) {
  return call_op<norm_grad_ops::NormGradXDef<Rms>>({}, Scalar::of(eps), x, weight, g);
}
template <bool Rms, Element T>
GlobalTensor<T> norm_grad_weight(const GlobalTensor<T>& x, const GlobalTensor<T>& g, double eps) {
  return call_op<norm_grad_ops::NormGradWeightDef<Rms>>({}, Scalar::of(eps), x, g);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_NORM_GRAD_INSTANCES(prefix, T)                                                                     \
  prefix template GlobalTensor<T> norm_grad_x<false, T>(const GlobalTensor<T>&, const GlobalTensor<T>&,         \
                                                        const GlobalTensor<T>&, double);                        \
  prefix template GlobalTensor<T> norm_grad_x<true, T>(const GlobalTensor<T>&, const GlobalTensor<T>&,          \
                                                       const GlobalTensor<T>&, double);                         \
  prefix template GlobalTensor<T> norm_grad_weight<false, T>(const GlobalTensor<T>&, const GlobalTensor<T>&, double); \
  prefix template GlobalTensor<T> norm_grad_weight<true, T>(const GlobalTensor<T>&, const GlobalTensor<T>&, double);
SPSD_FOR_EACH_FLOATING(SPSD_NORM_GRAD_INSTANCES, extern)

}  // namespace spsd::detail
