#pragma once
// The fused backward ops of softmax, log_softmax and cross_entropy: one kernel each, per row
// one reduction and one write, where the composed formulas take 3 to 5 ops and as many
// temporaries. Plain ops (infer, 1-d table, local kernel on either device), used by the rules
// in src/autograd/rules.cpp while the softmax axis is whole on every rank; a split axis needs
// the row's reduction across ranks, and the rules then keep the composed formulas.
//
//   softmax_grad(y, g, axis)        dx = y (g - sum(g y, axis))
//   log_softmax_grad(y, g, axis)    dx = g - exp(y) sum(g, axis)
//       S(d), S(d) -> S(d) for d != axis;  B, P(sum) -> P(sum) (linear in g);  B, B -> B
//   cross_entropy_grad(logits (..., C), labels (...), g ())
//       dlogits = (softmax(logits, -1) - onehot(labels)) g / N (N rows: the leading axes'
//       product), a row of zeros for a label outside [0, C) (as the composed pick_grad +
//       log_softmax_grad give). softmax is recomputed from the logits in the same kernel, so
//       forward keeps no (N, C) for it.
//       S(d), S(d), B -> S(d) for every leading axis d;  B, B, P(sum) -> P(sum);  B, B, B -> B
#include <string>
#include <string_view>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd::detail {

namespace softmax_grad_ops {

template <bool Log>
struct SoftmaxGradDef {
  static constexpr std::string_view name = Log ? "log_softmax_grad" : "softmax_grad";

  // inputs (y, g); attrs = [axis], non-negative.
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(in[0].shape == in[1].shape && in[0].dtype == in[1].dtype && is_floating(in[0].dtype), name,
               "needs y and g of one floating type and shape, got ", in[0].to_string(), " and ", in[1].to_string());
    SPSD_CHECK(attrs.size() == 1 && attrs[0] >= 0 && attrs[0] < in[0].shape.ndim(), name, "axis ",
               attrs.empty() ? int64_t{-1} : attrs[0], " is out of range for a tensor of shape ", in[0].shape);
    return in[1];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d)
      if (d != attrs[0]) t.push_back(uniform_signature(2, sbp::split(d)));
    t.push_back({{sbp::broadcast, sbp::partial_sum}, sbp::partial_sum});
    t.push_back(uniform_signature(2, sbp::broadcast));
    return t;
  }

  static std::string attrs_text(const OpAttrs& attrs) { return "axis=" + std::to_string(attrs[0]); }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>)
      kernel::softmax_backward<T>(k.target, k.in<T>(0), k.in<T>(1), k.inputs[0].shape, k.attrs[0], k.out_as<T>(), Log);
  }
};

struct CrossEntropyGradDef {
  static constexpr std::string_view name = "cross_entropy_grad";

  // inputs (logits (..., C), labels (...), g ()).
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    const TensorMeta &x = in[0], &labels = in[1], &g = in[2];
    bool rows_match = x.shape.ndim() >= 1 && labels.shape.ndim() == x.shape.ndim() - 1;
    for (int64_t d = 0; rows_match && d < labels.shape.ndim(); ++d) rows_match = x.shape[d] == labels.shape[d];
    SPSD_CHECK(rows_match, name, "needs logits (..., C) and labels (...), logits are ", x.shape, ", labels are ",
               labels.shape);
    SPSD_CHECK(is_floating(x.dtype) && labels.dtype == DType::kInt64, name,
               "needs floating logits and int64 labels, got ", x.dtype, " and ", labels.dtype);
    SPSD_CHECK(g.shape.ndim() == 0 && g.dtype == x.dtype, name, "needs a scalar gradient of the logits' type, got ",
               g.to_string());
    return x;
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    std::vector<Signature> t;
    for (int64_t d = 0; d + 1 < in[0].shape.ndim(); ++d)
      t.push_back({{sbp::split(d), sbp::split(d), B}, sbp::split(d)});
    t.insert(t.end(), {{{B, B, P}, P}, {{B, B, B}, B}});
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>)
      kernel::cross_entropy_backward<T>(k.target, k.in<T>(0), k.in<int64_t>(1), k.in<T>(2),
                                        k.inputs[1].shape.numel(), k.inputs[0].shape[k.inputs[0].shape.ndim() - 1],
                                        k.inputs[1].global->shape.numel(), k.out_as<T>());
  }

  static void input_domains(std::span<ValidationInput> in, const OpAttrs&) {
    in[1].domain = InputDomain::kIndex;
    in[1].bound = in[0].meta.shape[in[0].meta.shape.ndim() - 1];
  }
};

}  // namespace softmax_grad_ops

// Whether some mesh axis splits this tensor axis (a softmax row then spans ranks).
inline bool splits_axis(const NdSbp& nd, int64_t axis) {
  for (const Sbp& s : nd)
    if (s.is_split() && s.axis() == axis) return true;
  return false;
}

template <Element T>
GlobalTensor<T> softmax_grad(const GlobalTensor<T>& y, const GlobalTensor<T>& g, int64_t axis) {
  return call_op<softmax_grad_ops::SoftmaxGradDef<false>>({axis}, {}, y, g);
}
template <Element T>
GlobalTensor<T> log_softmax_grad(const GlobalTensor<T>& y, const GlobalTensor<T>& g, int64_t axis) {
  return call_op<softmax_grad_ops::SoftmaxGradDef<true>>({axis}, {}, y, g);
}
template <Element T>
GlobalTensor<T> cross_entropy_grad(const GlobalTensor<T>& logits, const GlobalTensor<int64_t>& labels,
                                   const GlobalTensor<T>& g) {
  const InputRef refs[] = {input_ref(logits), input_ref(labels), input_ref(g)};
  return run_op<softmax_grad_ops::CrossEntropyGradDef, T>(refs);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_SOFTMAX_GRAD_INSTANCES(prefix, T)                                                                 \
  prefix template GlobalTensor<T> softmax_grad<T>(const GlobalTensor<T>&, const GlobalTensor<T>&, int64_t);     \
  prefix template GlobalTensor<T> log_softmax_grad<T>(const GlobalTensor<T>&, const GlobalTensor<T>&, int64_t); \
  prefix template GlobalTensor<T> cross_entropy_grad<T>(const GlobalTensor<T>&, const GlobalTensor<int64_t>&,   \
                                                        const GlobalTensor<T>&);
SPSD_FOR_EACH_FLOATING(SPSD_SOFTMAX_GRAD_INSTANCES, extern)

}  // namespace spsd::detail
