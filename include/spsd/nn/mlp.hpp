#pragma once
// nn::MLP: fc2(act(fc1(x))), the feed-forward half of a transformer block (docs/modules.md).
// Parameters "fc1.weight" (dim, hidden), "fc1.bias", "fc2.weight" (hidden, dim), "fc2.bias": in
// Megatron's tensor parallelism fc1 is the column-parallel layer, fc2 the row-parallel one.
#include <cstdint>
#include <optional>

#include "spsd/nn/activation.hpp"
#include "spsd/nn/linear.hpp"

namespace spsd::nn {

// fc2(act(fc1(x))): a transformer block's feed-forward half.
template <FloatingElement T>
class MLP : public Module<T> {
 public:
  Linear<T> fc1, fc2;
  Activation activation;

  // std, out_std: the init of fc1 and fc2 (Linear's std; 0: PyTorch's uniform); out_std defaults
  // to std (TransformerBlock scales it down for the residual projection, as GPT-2).
  MLP(Init& init, int64_t dim, int64_t hidden, Activation act = Activation::gelu, bool bias = true, double std = 0,
      std::optional<double> out_std = std::nullopt)
      : fc1(init, dim, hidden, bias, std), fc2(init, hidden, dim, bias, out_std.value_or(std)), activation(act) {
    this->register_module("fc1", fc1);
    this->register_module("fc2", fc2);
  }

  // fc2(act(fc1(x))).
  template <FloatingElement C>
  GlobalTensor<C> forward(const GlobalTensor<C>& x) const {
    return this->at_output_boundary(fc2(activate(fc1(this->at_input_boundary(x)), activation)));
  }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return forward(x); }
};

}  // namespace spsd::nn
