#pragma once
// cross_entropy(logits (..., C), labels (...)) -> shape (): the mean over every row r of the
// leading axes of -log_softmax(logits, -1)[r, labels[r]], floating logits, int64 labels. A
// language model passes its (B, T, V) logits and (B, T) targets as they are: flattening them
// to (B*T, V) would cost a boxing when the sequence axis is split.
//
// A composition of global ops, so each step picks its own signature:
//     -mean(pick(log_softmax(logits, -1), labels), all axes)
//   batch or sequence parallel (logits and labels S(d), d a leading axis): log_softmax and pick
//     are local, mean over the split axis gives P(sum), and neg keeps it: the result is a
//     P(sum) scalar and nothing is communicated until someone reads it.
//   class parallel (logits S(last)): log_softmax takes the decomposition through partial max and
//     sum (two all-reduces of one element per row, see softmax.hpp), pick (S(last), B) -> P(sum) (the
//     labels are made B if they are not), mean P(sum) -> P(sum).
// A label outside [0, C) is an spsd::Error naming cross_entropy and the first bad label, raised
// as op/index_check.hpp says (the loss is NaN until then).
//
// Backward: where each rank holds whole rows of class scores (no mesh axis splits the last axis or
// holds partial logits), the composition runs on the logits detached and is recorded as one
// node, "cross_entropy", whose rule is one fused kernel, cross_entropy_grad
// (autograd/softmax_grad.hpp): dlogits = (softmax(logits) - onehot(labels)) g / N (N rows), the
// softmax recomputed from the saved logits (no log_softmax output kept for backward). Class
// parallel logits record the composed ops, whose rules reduce across ranks.
#include "spsd/core/instances.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/index.hpp"
#include "spsd/op/reduce.hpp"
#include "spsd/op/softmax.hpp"

namespace spsd {

// The mean over rows of -log_softmax(logits, -1)[r, labels[r]]: a 0-d tensor.
template <Element T>
GlobalTensor<T> cross_entropy(const GlobalTensor<T>& logits, const GlobalTensor<int64_t>& labels) {
  const Shape &l = logits.shape(), &y = labels.shape();
  SPSD_CHECK(l.ndim() >= 1, "cross_entropy", "logits must be (..., C), logits are ", l, ", labels are ", y);
  SPSD_CHECK(y.ndim() == l.ndim() - 1, "cross_entropy", "labels must be (...) for logits (..., C), logits are ", l,
             ", labels are ", y);
  for (int64_t d = 0; d < y.ndim(); ++d)
    SPSD_CHECK(l[d] == y[d], "cross_entropy", "logits and labels have different leading axes: logits are ", l,
               ", labels are ", y);
  SPSD_CHECK(is_floating(dtype_of<T>), "cross_entropy", "logits must be floating, logits are ",
             dtype_of<T>);
  SPSD_CHECK(logits.placement() == labels.placement(), "cross_entropy", "logits and labels must share one placement: ",
             "logits are on ", logits.placement(), ", labels on ", labels.placement(), " (move one with to_global first)");
  const int64_t last = l.ndim() - 1;
  std::vector<int64_t> rows(static_cast<size_t>(last));
  for (int64_t d = 0; d < last; ++d) rows[d] = d;
  const detail::IndexErrorName labels_of("cross_entropy");  // pick's check names the op the user called
  const auto composed = [&](const GlobalTensor<T>& x) {
    return spsd::neg(spsd::mean(spsd::pick(spsd::log_softmax(x, last), labels), rows));
  };
  for (const Sbp& s : logits.nd_sbp())
    if (s.is_partial() || (s.is_split() && s.axis() == last)) return composed(logits);
  const detail::InputRef refs[] = {detail::input_ref(logits), detail::input_ref(labels)};
  return detail::recorded("cross_entropy", refs, {}, {}, composed(logits.detach()));
}

// Compiled into the library (core/instances.hpp).
#define SPSD_LOSS_INSTANCES(prefix, T) \
  prefix template GlobalTensor<T> cross_entropy<T>(const GlobalTensor<T>&, const GlobalTensor<int64_t>&);
SPSD_FOR_EACH_ELEMENT(SPSD_LOSS_INSTANCES, extern)

}  // namespace spsd
