// The backward rule of scaled_dot_product_attention: the fused gradient ops of op/attention.hpp
// on (q, k, v, out, g, lse). dk and dv come from one op (stacked, then sliced apart) and only
// when k or v wants a gradient; dq only when q does. Under the query-split layout dk and dv are
// P(sum), reduced where they are consumed (the optimizer's boxing, or the next rule).
#include "attention_rules.hpp"

#include "spsd/op/attention.hpp"

namespace spsd::detail {

template <FloatingElement T>
void attention_backward(const GradNode& node, const GlobalData& grad_out, GradList& grad_in) {
  const auto input = [&](size_t i) { return GlobalTensor<T>::from_data(node.inputs[i]); };
  const bool want_k = node.input_meta[1] != nullptr, want_v = node.input_meta[2] != nullptr;
  AttentionGrads<T> r = attention_grads<T>(input(0), input(1), input(2), GlobalTensor<T>::from_data(node.output),
                                           GlobalTensor<T>::from_data(grad_out),
                                           GlobalTensor<compute_t<T>>::from_data(node.inputs[3]), node.attrs[0] != 0,
                                           node.input_meta[0] != nullptr, want_k || want_v);
  if (r.dq) grad_in[0] = r.dq->data();
  if (want_k) grad_in[1] = r.dk->data();
  if (want_v) grad_in[2] = r.dv->data();
}

#define SPSD_ATTENTION_RULE_INSTANCES(prefix, T) \
  prefix template void attention_backward<T>(const GradNode&, const GlobalData&, GradList&);
SPSD_FOR_EACH_FLOATING(SPSD_ATTENTION_RULE_INSTANCES, )

}  // namespace spsd::detail
