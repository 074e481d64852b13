#pragma once
// Backward in two halves, for zero-bubble pipeline schedules (pipeline/schedule.hpp, ZB-H1):
// backward_input computes the gradients of the given input tensors now (what the previous
// pipeline stage waits for) and leaves the gradients of every other leaf (the parameters) to
// the returned WeightGradients, whose run() computes them later, in a bubble.
//
// The split is per node of the graph: a node whose inputs include a parameter runs twice, first
// asking its rule only for the gradients that flow on towards the inputs, then (in run()) only
// for the parameters' (a rule computes just the gradients it is asked for, GradArgs::wants), so
// a matmul's weight gradient, the larger half of its backward, is what moves. The node keeps
// what it saved and its incoming gradient until run(). Together the halves add exactly what one
// backward(y, dy) would add, with the same ops: the results are bitwise equal.
//
// Gradients go into grad() in the layout backward gives them: no leaf is reduced early (the
// pipeline runner reduces each parameter once per step). retain_graph does not apply: both
// halves free what they are done with.
#include <memory>
#include <span>
#include <vector>

#include "spsd/autograd/node.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/tensor/global_tensor.hpp"

namespace spsd {

namespace detail {
struct SplitBackward;  // src/autograd/split_backward.cpp
}  // namespace detail

// The parameter gradients backward_input deferred (above), computed by run(). Holds the graph
// alive until then; default-made: nothing pending.
class WeightGradients {
 public:
  WeightGradients() = default;
  // Computes the deferred gradients into the parameters' grad(). Collective like backward: every
  // rank of the graph's placements calls it, in the same order relative to other ops. Once.
  void run();
  // Whether run() has work left (false after it ran, or when nothing was deferred).
  bool pending() const { return !deferred_.empty(); }

 private:
  struct Deferred {
    detail::GradNode* node;
    detail::GlobalData grad_out;  // the node's incoming gradient, summed in backward_input
    std::vector<size_t> inputs;   // the parameter inputs whose gradients wait
  };
  friend struct detail::SplitBackward;
  std::shared_ptr<detail::AutogradMeta> root_;  // keeps the graph (and so the nodes) alive
  std::vector<Deferred> deferred_;              // in backward's run order
};

namespace detail {
// The non-template body of backward_input.
WeightGradients backward_input(const std::shared_ptr<AutogradMeta>& root, const GlobalData& seed,
                               std::span<const AutogradMeta* const> inputs);
}  // namespace detail

// Backward from y with d loss / d y = dy, computing now the gradients of `inputs` (leaves that
// require grad: a pipeline stage's received activation) into their grad(), and returning the
// rest, to run later. Collective, as backward.
template <FloatingElement T>
WeightGradients backward_input(const GlobalTensor<T>& y, const GlobalTensor<T>& dy,
                               std::span<const GlobalTensor<T>> inputs = {}) {
  SPSD_CHECK(y.shape() == dy.shape() && y.placement() == dy.placement(), "backward_input",
             "the output gradient must have the output's shape and placement: output ", y.describe(), ", gradient ",
             dy.describe());
  SPSD_CHECK(y.requires_grad(), "backward_input", "the output ", y.describe(), " does not require grad");
  std::vector<const detail::AutogradMeta*> metas;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SPSD_CHECK(inputs[i].requires_grad() && inputs[i].is_leaf(), "backward_input", "input ", i,
               " must be a leaf that requires grad (a detached activation with requires_grad_()), got ",
               inputs[i].describe());
    metas.push_back(inputs[i].autograd_meta().get());
  }
  return detail::backward_input(y.autograd_meta(), dy.data(), metas);
}

#define SPSD_SPLIT_BACKWARD_INSTANCES(prefix, T)                                                  \
  prefix template WeightGradients backward_input<T>(const GlobalTensor<T>&, const GlobalTensor<T>&, \
                                                    std::span<const GlobalTensor<T>>);
SPSD_FOR_EACH_FLOATING(SPSD_SPLIT_BACKWARD_INSTANCES, extern)

}  // namespace spsd
