#pragma once
// cross_entropy(logits (N, C), labels (N)) -> shape (): the mean over the N rows of
// -log_softmax(logits, 1)[i, labels[i]], floating logits, int64 labels.
//
// A composition of global ops, so each step picks its own signature:
//     -mean(pick(log_softmax(logits, 1), labels), {0})
//   batch parallel (logits S(0), labels S(0)): log_softmax S(0) -> S(0) and pick
//     (S(0), S(0)) -> S(0) are local, mean over the split axis gives P(sum), and neg keeps it:
//     the result is a P(sum) scalar and nothing is communicated until someone reads it.
//   class parallel (logits S(1)): log_softmax takes the decomposition through partial max and
//     sum (two all-reduces of N elements, see softmax.hpp), pick (S(1), B) -> P(sum) (the
//     labels are made B if they are not), mean P(sum) -> P(sum).
// An out-of-range label makes its row's pick NaN (see index.hpp), hence a NaN loss.
//
// Backward: where each rank holds whole rows of class scores (no mesh axis splits axis 1 or
// holds partial logits), the composition runs on the logits detached and is recorded as one
// node, "cross_entropy", whose rule is one fused kernel, cross_entropy_grad
// (autograd/softmax_grad.hpp): dlogits = (softmax(logits) - onehot(labels)) g / N, the softmax
// recomputed from the saved logits (no (N, C) log_softmax output kept for backward). Class
// parallel logits record the composed ops, whose rules reduce across ranks.
#include "spsd/core/instances.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/index.hpp"
#include "spsd/op/reduce.hpp"
#include "spsd/op/softmax.hpp"

namespace spsd {

template <Element T>
GlobalTensor<T> cross_entropy(const GlobalTensor<T>& logits, const GlobalTensor<int64_t>& labels) {
  const Shape &l = logits.shape(), &y = labels.shape();
  SPSD_CHECK(l.ndim() == 2, "cross_entropy", "logits must be (N, C), logits are ", l, ", labels are ", y);
  SPSD_CHECK(y.ndim() == 1, "cross_entropy", "labels must be (N), logits are ", l, ", labels are ", y);
  SPSD_CHECK(l[0] == y[0], "cross_entropy", "logits and labels have different N: logits are ", l, ", labels are ",
             y);
  SPSD_CHECK(is_floating(dtype_of<T>), "cross_entropy", "logits must be floating, logits are ",
             dtype_of<T>);
  SPSD_CHECK(logits.placement() == labels.placement(), "cross_entropy", "logits and labels must share one placement: ",
             "logits are on ", logits.placement(), ", labels on ", labels.placement(), " (move one with to_global first)");
  const auto composed = [&](const GlobalTensor<T>& x) {
    return spsd::neg(spsd::mean(spsd::pick(spsd::log_softmax(x, 1), labels), {0}));
  };
  for (const Sbp& s : logits.nd_sbp())
    if (s.is_partial() || (s.is_split() && s.axis() == 1)) return composed(logits);
  const detail::InputRef refs[] = {detail::input_ref(logits), detail::input_ref(labels)};
  return detail::recorded("cross_entropy", refs, {}, {}, composed(logits.detach()));
}

// Compiled into the library (core/instances.hpp).
#define SPSD_LOSS_INSTANCES(prefix, T) \
  prefix template GlobalTensor<T> cross_entropy<T>(const GlobalTensor<T>&, const GlobalTensor<int64_t>&);
SPSD_FOR_EACH_ELEMENT(SPSD_LOSS_INSTANCES, extern)

}  // namespace spsd
