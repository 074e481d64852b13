#pragma once
// backward(loss): reverse-mode differentiation over the graph the tape recorded.
//
// The nodes reachable from the loss run in decreasing program order (a valid reverse
// topological order: an op's inputs were made before it), so each node's incoming gradient is
// complete when it runs, and every rank runs the same backward ops in the same order. Gradients
// reaching one tensor twice are added (with add: the two may have different layouts, the
// resolver boxes one). Leaves accumulate into grad() across calls until zero_grad().
// Backward runs with grad mode off: gradients are not differentiable (no double backward).
// Once backward has run through a node, the node drops what it saved (unless
// BackwardOptions::retain_graph): a second backward through the same graph is an spsd::Error,
// as is a backward through a node whose saved tensor was written in place since the forward
// pass (autograd/saved_tensors.hpp).
//
// BackwardOptions::reduce_gradients_early (on by default): once no node left to run takes a
// leaf as input, the leaf's gradient of this call is final and is boxed right away into the
// leaf's own placement and nd_sbp (data parallelism: the all-reduce of a P(sum) gradient),
// so its communication is issued while the earlier layers' backward still computes, as
// PyTorch DDP's buckets do. Leaves are boxed in run order, the same on every rank. Off: leaves
// keep the layout the backward ops produced, and the optimizer's step() boxes them.
// Inside NoGradSync (autograd/grad_sync.hpp) no leaf is reduced: gradient accumulation over
// micro-batches. A leaf whose grad() is still unreduced from such calls gets this call's
// gradient added before its one reduction.
#include <algorithm>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "spsd/autograd/grad_sync.hpp"
#include "spsd/autograd/node.hpp"
#include "spsd/autograd/saved_tensors.hpp"
#include "spsd/boxing/to_layout.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/runtime/trace.hpp"
#include "spsd/tensor/capture.hpp"
#include "spsd/tensor/factory.hpp"

namespace spsd {

// The options of a backward() call (above); the defaults suit training.
struct BackwardOptions {
  // Keep what the graph saved, so that another backward can run through it (as torch's
  // retain_graph). Off: each node's saved tensors are dropped once backward has run through it,
  // and a second backward through the graph is an Error (autograd/saved_tensors.hpp) instead of
  // adding the same gradients again.
  bool retain_graph = false;
  // Box each leaf's gradient into the leaf's own layout as soon as this call has all of it, so
  // the reduction overlaps the rest of backward (see above). false: the layout backward gave.
  bool reduce_gradients_early = true;
};

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
  switch (g.dtype) {  // gradients are floating
    case DType::kFloat64: return add_as(static_cast<double*>(nullptr));
    case DType::kBFloat16: return add_as(static_cast<bfloat16*>(nullptr));
    case DType::kFloat16: return add_as(static_cast<float16*>(nullptr));
    default: return add_as(static_cast<float*>(nullptr));
  }
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

// The options of the backward call running on this thread, for the backward calls nested in
// it (checkpoint() runs one per recomputed segment).
inline thread_local const BackwardOptions* active_backward_options = nullptr;

// Whether leaf is reduced early: parameters (split or broadcast) only. A gradient boxed into a
// partial layout would only move bytes without reducing anything, so partial leaves keep theirs.
inline bool reduces_early(const BackwardOptions& options, const GlobalData& leaf) {
  return options.reduce_gradients_early && is_grad_sync_enabled() && !leaf.nd_sbp.has_partial();
}

// This call's gradient g of leaf, boxed into the leaf's layout. A gradient left in grad() in
// another layout (unreduced under NoGradSync) is added first, so both take one reduction.
inline GlobalData reduce_leaf(AutogradMeta& meta, GlobalData g, const GlobalData& leaf) {
  std::optional<GlobalData>& earlier = meta.grad;
  if (earlier && !(earlier->placement == leaf.placement && earlier->nd_sbp == leaf.nd_sbp)) {
    if (StepRecorder* recorder = active_recorder()) recorder->check_gradient_fresh(meta);
    std::optional<GlobalData> sum = std::move(earlier);
    earlier.reset();
    accumulate(sum, g);
    g = std::move(*sum);
  }
  return to_layout(g, leaf.placement, leaf.nd_sbp);
}

inline GradList run_node(GradNode& node) {
  SPSD_CHECK(node.backward != nullptr, "backward", "no gradient is defined for op ", node.op,
             " (output ", describe(node.output), "); compute it under NoGradGuard or on detach()ed inputs");
  GradList grad_in(node.inputs.size());
  GlobalData grad_out = std::move(*node.grad_out);
  node.grad_out.reset();
  // The node scope of boxing reuse (tensor/boxed_copies.hpp): the rules box the output gradient
  // to a layout once however many of their ops take it there; what they boxed goes on return.
  const bool node_scope = boxing_reuse() == BoxingReuse::kNode;
  if (node_scope) grad_out.boxed = std::make_shared<BoxedCopies>();
  node.backward(node, grad_out, grad_in);
  if (node_scope) grad_out.boxed->clear();
  return grad_in;
}

// root_data: the root tensor (its layout, for a root that is itself a leaf). Leaves in
// keep_layout are never reduced early (checkpoint()'s detached inputs: their gradients go on
// into the outer graph in the layout backward gave them).
inline void run_backward(AutogradMeta& root, const GlobalData& root_data, const GlobalData& seed,
                         const BackwardOptions& options, std::span<const AutogradMeta* const> keep_layout = {}) {
  NoGradGuard no_grad;
  const BackwardOptions* const outer_options = std::exchange(active_backward_options, &options);
  struct Restore {
    const BackwardOptions* previous;
    ~Restore() { active_backward_options = previous; }
  } restore{outer_options};
  auto kept = [&](const AutogradMeta* m) { return std::find(keep_layout.begin(), keep_layout.end(), m) != keep_layout.end(); };
  // Leaves reduced early: this call's gradient, boxed into the leaf's layout, in issue order.
  // They join grad() at the end, so no add waits on a reduction still in flight.
  std::vector<std::pair<std::shared_ptr<AutogradMeta>, GlobalData>> reduced;
  // While a compiled step captures (tensor/capture.hpp): the leaves whose grad() this call sets,
  // in order, which a replay sets again; a gradient from before the capture must not be added to.
  StepRecorder* const recorder = active_recorder();
  std::vector<std::shared_ptr<AutogradMeta>> set_leaves;
  auto setting = [&](const std::shared_ptr<AutogradMeta>& m) {
    if (!recorder || std::find(set_leaves.begin(), set_leaves.end(), m) != set_leaves.end()) return;
    if (m->grad) recorder->check_gradient_fresh(*m);
    set_leaves.push_back(m);
  };
  if (!root.grad_fn) {
    if (recorder) refuse_capture("backward", "the loss is a leaf (no op made it): compute it in the step");
    if (!reduces_early(options, root_data) || kept(&root)) accumulate(root.grad, seed);
    else reduced.emplace_back(&root, reduce_leaf(root, seed, root_data));
  } else {
    const std::vector<GradNode*> order = nodes_before(root.grad_fn.get());
    // A nested backward (checkpoint()'s recomputed segment) runs on a graph it just made.
    if (!outer_options) check_saved_tensors(order);
    auto early_leaf = [&](const GradNode& node, size_t i) {
      const auto& meta = node.input_meta[i];
      return meta && !meta->grad_fn && reduces_early(options, node.inputs[i]) && !kept(meta.get());
    };
    // A leaf's gradient is final once the last node in run order that takes it has run.
    std::unordered_map<AutogradMeta*, size_t> last_use;
    for (size_t k = 0; k < order.size(); ++k)
      for (size_t i = 0; i < order[k]->inputs.size(); ++i)
        if (early_leaf(*order[k], i)) last_use[order[k]->input_meta[i].get()] = k;
    std::unordered_map<AutogradMeta*, std::optional<GlobalData>> unfinished;  // this call's, early leaves
    root.grad_fn->grad_out = seed;
    for (size_t k = 0; k < order.size(); ++k) {
      GradNode& node = *order[k];
      // No gradient flowed here (e.g. only into integer inputs): nothing to run, but leaves may be final.
      const GradList grad_in = node.grad_out ? run_node(node) : GradList(node.inputs.size());
      for (size_t i = 0; i < grad_in.size(); ++i) {
        const auto& meta = node.input_meta[i];
        if (!meta || !grad_in[i]) continue;
        const bool into_leaf = !meta->grad_fn && !early_leaf(node, i);
        if (into_leaf) setting(meta);
        std::optional<GlobalData>& slot = meta->grad_fn     ? meta->grad_fn->grad_out
                                          : early_leaf(node, i) ? unfinished[meta.get()]
                                                                : meta->grad;
        accumulate(slot, *grad_in[i]);
      }
      // After all inputs: a leaf taken twice by this node (w * w) is reduced once, with both terms.
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (!early_leaf(node, i) || last_use.at(node.input_meta[i].get()) != k) continue;
        const GlobalData& leaf = node.inputs[i];
        auto g = unfinished.extract(node.input_meta[i].get());
        if (!g.empty() && g.mapped())
          reduced.emplace_back(node.input_meta[i], reduce_leaf(*g.key(), std::move(*g.mapped()), leaf));
      }
      if (!options.retain_graph) free_saved_tensors(node);
    }
  }
  for (auto& [leaf, g] : reduced) {
    setting(leaf);
    accumulate(leaf->grad, g);
    // Added to a gradient of an earlier call in another layout, the sum may not be in the leaf's layout.
    leaf->grad = to_layout(*leaf->grad, g.placement, g.nd_sbp);
  }
  for (const std::shared_ptr<AutogradMeta>& leaf : set_leaves) recorder->record_gradient(leaf);
}

}  // namespace detail

// d loss / d leaf for every leaf that requires grad and reaches loss, added into leaf.grad().
// loss must hold one element (shape () or (1, ..., 1)). Collective: every rank of the program
// calls it, as it ran the forward ops.
template <FloatingElement T>
void backward(const GlobalTensor<T>& loss, const BackwardOptions& options = {}) {
  SPSD_CHECK(loss.shape().numel() == 1, "backward", "the loss must be a scalar (one element); it is ",
             loss.describe(), " (pass the output gradient for a non-scalar: backward(y, dy))");
  SPSD_CHECK(loss.requires_grad(), "backward", "the loss ", loss.describe(),
             " does not require grad: no input that requires grad reaches it, or it was computed under NoGradGuard");
  const detail::OpenSpan phase = detail::phase_span("backward");
  NdSbp all_b(std::vector<Sbp>(loss.placement().mesh().ndim(), sbp::broadcast));
  const GlobalTensor<T> seed = ones<T>(loss.shape(), loss.placement(), all_b);
  detail::run_backward(*loss.autograd_meta(), loss.data(), seed.data(), options);
}

// Vector-Jacobian product: backward from y with d loss / d y = dy (same shape and placement).
template <FloatingElement T>
void backward(const GlobalTensor<T>& y, const GlobalTensor<T>& dy, const BackwardOptions& options = {}) {
  SPSD_CHECK(y.shape() == dy.shape() && y.placement() == dy.placement(), "backward",
             "the output gradient must have the output's shape and placement: output ", y.describe(), ", gradient ",
             dy.describe());
  SPSD_CHECK(y.requires_grad(), "backward", "the output ", y.describe(), " does not require grad");
  const detail::OpenSpan phase = detail::phase_span("backward");
  detail::run_backward(*y.autograd_meta(), y.data(), dy.data(), options);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_BACKWARD_INSTANCES(prefix, T)                                                       \
  prefix template void backward<T>(const GlobalTensor<T>&, const BackwardOptions&);              \
  prefix template void backward<T>(const GlobalTensor<T>&, const GlobalTensor<T>&, const BackwardOptions&);
SPSD_FOR_EACH_FLOATING(SPSD_BACKWARD_INSTANCES, extern)

}  // namespace spsd
