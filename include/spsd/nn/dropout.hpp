#pragma once
// nn::Dropout: in training, zeroes each element with probability p and scales the rest by
// 1 / (1 - p); in eval() the identity (docs/modules.md). Each call draws its mask's seed from the
// rank's seed stream (next_seed(), runtime/seed_stream.hpp): the same draw on every rank, and the
// mask a function of (seed, global index), so it is the same whatever x's layout. manual_seed()
// fixes the masks of a run; checkpoint() rewinds the stream to redraw them when it recomputes.
#include "spsd/nn/module.hpp"
#include "spsd/op/dropout.hpp"
#include "spsd/runtime/seed_stream.hpp"

namespace spsd::nn {

// Zeroes elements with probability p in training and scales the rest; the identity in eval().
template <FloatingElement T>
class Dropout : public Module<T> {
 public:
  double p;

  // Drops with probability p, in [0, 1).
  explicit Dropout(double p) : p(p) {
    SPSD_CHECK(p >= 0 && p < 1, "nn::Dropout", "needs a probability p in [0, 1), got ", p);
  }

  // No draw when it is the identity (eval, p == 0): the stream only moves when masks are drawn.
  template <FloatingElement C>
  GlobalTensor<C> forward(const GlobalTensor<C>& x) const {
    if (!this->training() || p == 0) return x;
    return dropout(x, p, next_seed());
  }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return forward(x); }
};

}  // namespace spsd::nn
