#pragma once
// backward(loss): reverse-mode differentiation over the graph the tape recorded.
//
// The nodes reachable from the loss run in decreasing program order (a valid reverse
// topological order: an op's inputs were made before it), so each node's incoming gradient is
// complete when it runs, and every rank runs the same backward ops in the same order. Gradients
// reaching one tensor twice are added (with add: the two may have different layouts, the
// resolver boxes one). Leaves accumulate into grad() across calls until zero_grad().
// Backward runs with grad mode off: gradients are not differentiable (no double backward).
#include <algorithm>
#include <unordered_set>

#include "spsd/autograd/node.hpp"
#include "spsd/autograd/rules.hpp"

namespace spsd {

namespace detail {

// slot += g (slot empty: slot = g), typed by g's dtype.
inline void accumulate(std::optional<GlobalData>& slot, const GlobalData& g) {
  if (!slot) {
    slot = g;
    return;
  }
  auto add_as = [&]<class T>(T*) {
    slot = spsd::add(GlobalTensor<T>::from_data(*slot), GlobalTensor<T>::from_data(g)).data();
  };
  if (g.dtype == DType::kFloat64) add_as(static_cast<double*>(nullptr));
  else add_as(static_cast<float*>(nullptr));
}

// The nodes that lead to root, latest first.
inline std::vector<GradNode*> nodes_before(GradNode* root) {
  std::vector<GradNode*> order, stack{root};
  std::unordered_set<GradNode*> seen{root};
  while (!stack.empty()) {
    GradNode* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const auto& m : n->input_meta)
      if (m && m->grad_fn && seen.insert(m->grad_fn.get()).second) stack.push_back(m->grad_fn.get());
  }
  std::sort(order.begin(), order.end(), [](GradNode* a, GradNode* b) { return a->sequence > b->sequence; });
  return order;
}

inline void run_backward(AutogradMeta& root, const GlobalData& seed) {
  NoGradGuard no_grad;
  if (!root.grad_fn) return accumulate(root.grad, seed);
  root.grad_fn->grad_out = seed;
  for (GradNode* node : nodes_before(root.grad_fn.get())) {
    if (!node->grad_out) continue;  // no gradient flowed here (e.g. only into integer inputs)
    SPSD_CHECK(node->backward != nullptr, "backward", "no gradient is defined for op ", node->op,
               " (output ", describe(node->output), "); compute it under NoGradGuard or on detach()ed inputs");
    GradList grad_in(node->inputs.size());
    const GlobalData grad_out = std::move(*node->grad_out);
    node->grad_out.reset();
    node->backward(*node, grad_out, grad_in);
    for (size_t i = 0; i < grad_in.size(); ++i) {
      const auto& meta = node->input_meta[i];
      if (!meta || !grad_in[i]) continue;
      accumulate(meta->grad_fn ? meta->grad_fn->grad_out : meta->grad, *grad_in[i]);
    }
  }
}

}  // namespace detail

// d loss / d leaf for every leaf that requires grad and reaches loss, added into leaf.grad().
// loss must hold one element (shape () or (1, ..., 1)). Collective: every rank of the program
// calls it, as it ran the forward ops.
template <std::floating_point T>
void backward(const GlobalTensor<T>& loss) {
  SPSD_CHECK(loss.shape().numel() == 1, "backward", "the loss must be a scalar (one element); it is ",
             loss.describe(), " (pass the output gradient for a non-scalar: backward(y, dy))");
  SPSD_CHECK(loss.requires_grad(), "backward", "the loss ", loss.describe(),
             " does not require grad: no input that requires grad reaches it, or it was computed under NoGradGuard");
  NdSbp all_b(std::vector<Sbp>(loss.placement().mesh().ndim(), sbp::broadcast));
  detail::run_backward(*loss.autograd_meta(), ones<T>(loss.shape(), loss.placement(), all_b).data());
}

// Vector-Jacobian product: backward from y with d loss / d y = dy (same shape and placement).
template <std::floating_point T>
void backward(const GlobalTensor<T>& y, const GlobalTensor<T>& dy) {
  SPSD_CHECK(y.shape() == dy.shape() && y.placement() == dy.placement(), "backward",
             "the output gradient must have the output's shape and placement: output ", y.describe(), ", gradient ",
             dy.describe());
  SPSD_CHECK(y.requires_grad(), "backward", "the output ", y.describe(), " does not require grad");
  detail::run_backward(*y.autograd_meta(), dy.data());
}

}  // namespace spsd
