// backward_input and WeightGradients::run (autograd/split_backward.hpp), and the explicit
// instantiations of backward_input.
#include "spsd/autograd/split_backward.hpp"

#include <algorithm>

#include "spsd/autograd/backward.hpp"
#include "spsd/autograd/saved_tensors.hpp"
#include "spsd/runtime/trace.hpp"

namespace spsd {

namespace detail {

struct SplitBackward {
  // Runs node asking only for the gradients of the inputs `asked` says yes to (the others'
  // input_meta hidden for the call), and adds them where they go: a non-leaf's incoming
  // gradient or a leaf's grad().
  template <class Asked>
  static void run_masked(GradNode& node, Asked asked) {
    std::vector<std::shared_ptr<AutogradMeta>> hidden(node.input_meta.size());
    for (size_t i = 0; i < node.input_meta.size(); ++i)
      if (node.input_meta[i] && !asked(i)) hidden[i] = std::move(node.input_meta[i]);
    GradList grad_in;
    try {
      grad_in = run_node(node);
    } catch (...) {
      restore(node, hidden);
      throw;
    }
    restore(node, hidden);
    for (size_t i = 0; i < grad_in.size(); ++i) {
      const auto& meta = node.input_meta[i];
      if (!meta || !grad_in[i] || !asked(i)) continue;
      accumulate(meta->grad_fn ? meta->grad_fn->grad_out : meta->grad, *grad_in[i]);
    }
  }

  static void restore(GradNode& node, std::vector<std::shared_ptr<AutogradMeta>>& hidden) {
    for (size_t i = 0; i < hidden.size(); ++i)
      if (hidden[i]) node.input_meta[i] = std::move(hidden[i]);
  }

  static WeightGradients input_half(const std::shared_ptr<AutogradMeta>& root, const GlobalData& seed,
                                    std::span<const AutogradMeta* const> inputs) {
    NoGradGuard no_grad;
    const OpenSpan phase = phase_span("backward");
    WeightGradients w;
    w.root_ = root;
    if (!root->grad_fn) {  // y is itself a leaf: its gradient is dy, now
      accumulate(root->grad, seed);
      return w;
    }
    const std::vector<GradNode*> order = nodes_before(root->grad_fn.get());
    check_saved_tensors(order);
    auto is_input = [&](const AutogradMeta* m) { return std::find(inputs.begin(), inputs.end(), m) != inputs.end(); };
    root->grad_fn->grad_out = seed;
    for (GradNode* node : order) {
      if (!node->grad_out) {  // no gradient reached it (only integer inputs lead here)
        free_saved_tensors(*node);
        continue;
      }
      auto weight = [&](size_t i) {
        const auto& m = node->input_meta[i];
        return m && !m->grad_fn && !is_input(m.get());
      };
      std::vector<size_t> weights;
      bool flows_on = false;
      for (size_t i = 0; i < node->input_meta.size(); ++i) {
        if (weight(i)) weights.push_back(i);
        else flows_on = flows_on || node->input_meta[i] != nullptr;
      }
      if (weights.empty()) {
        run_masked(*node, [](size_t) { return true; });
        free_saved_tensors(*node);
        continue;
      }
      w.deferred_.push_back({node, *node->grad_out, weights});
      if (flows_on) run_masked(*node, [&](size_t i) { return !weight(i); });
      node->grad_out.reset();
    }
    return w;
  }
};

WeightGradients backward_input(const std::shared_ptr<AutogradMeta>& root, const GlobalData& seed,
                               std::span<const AutogradMeta* const> inputs) {
  return SplitBackward::input_half(root, seed, inputs);
}

}  // namespace detail

void WeightGradients::run() {
  NoGradGuard no_grad;
  const detail::OpenSpan phase = detail::phase_span("backward");
  std::vector<Deferred> deferred = std::move(deferred_);
  deferred_.clear();
  for (Deferred& d : deferred) {
    d.node->grad_out = std::move(d.grad_out);
    detail::SplitBackward::run_masked(
        *d.node, [&](size_t i) { return std::find(d.inputs.begin(), d.inputs.end(), i) != d.inputs.end(); });
    detail::free_saved_tensors(*d.node);
  }
  root_.reset();
}

SPSD_FOR_EACH_FLOATING(SPSD_SPLIT_BACKWARD_INSTANCES, )

}  // namespace spsd
