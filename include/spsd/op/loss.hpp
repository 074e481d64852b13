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
  return spsd::neg(spsd::mean(spsd::pick(spsd::log_softmax(logits, 1), labels), {0}));
}

// Compiled into the library (core/instances.hpp).
#define SPSD_LOSS_INSTANCES(prefix, T) \
  prefix template GlobalTensor<T> cross_entropy<T>(const GlobalTensor<T>&, const GlobalTensor<int64_t>&);
SPSD_FOR_EACH_ELEMENT(SPSD_LOSS_INSTANCES, extern)

}  // namespace spsd
