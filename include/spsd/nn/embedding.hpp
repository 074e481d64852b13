#pragma once
// nn::Embedding: the rows of a (vocab, dim) table picked by integer ids (docs/modules.md).
// Parameter "weight", normal(0, std) with std 1 as torch.nn.Embedding (GPT-2 uses 0.02). A table
// split on the vocabulary (S(0)) gathers on each rank the rows it holds: the output is P(sum).
#include <cstdint>

#include "spsd/nn/module.hpp"
#include "spsd/op/cast.hpp"
#include "spsd/op/index.hpp"

namespace spsd::nn {

// The rows of a (vocab, dim) weight table picked by integer ids.
template <FloatingElement T>
class Embedding : public Module<T> {
 public:
  typename Module<T>::Parameter weight;  // (vocab, dim)

  // A (vocab, dim) table drawn from normal(0, std).
  Embedding(Init& init, int64_t vocab, int64_t dim, double std = 1.0)
      : weight(init.normal<T>({checked(vocab, dim, std), dim}, std)) {
    this->register_parameter("weight", weight);
  }

  // The table's size.
  int64_t vocab() const { return weight.shape()[0]; }
  int64_t dim() const { return weight.shape()[1]; }

  // ids (any shape) -> (ids..., dim) in C: the rows gathered in T, then cast (the same values as
  // casting the table first, without casting rows no id picks).
  template <FloatingElement C = T>
  GlobalTensor<C> forward(const GlobalTensor<int64_t>& ids) const {
    return this->at_output_boundary(cast<C>(embedding(weight, this->at_input_boundary(ids))));
  }
  template <FloatingElement C = T>
  GlobalTensor<C> operator()(const GlobalTensor<int64_t>& ids) const { return forward<C>(ids); }

 private:
  static int64_t checked(int64_t vocab, int64_t dim, double std) {
    SPSD_CHECK(vocab > 0 && dim > 0 && std >= 0, "nn::Embedding", "needs vocab > 0, dim > 0 and std >= 0, got vocab ",
               vocab, ", dim ", dim, ", std ", std);
    return vocab;
  }
};

}  // namespace spsd::nn
