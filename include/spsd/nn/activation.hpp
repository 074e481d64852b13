#pragma once
// The activations an nn::MLP (and a TransformerConfig) names: the elementwise ops there are.
#include <string_view>

#include "spsd/core/error.hpp"
#include "spsd/op/elementwise.hpp"

namespace spsd::nn {

// The activation an nn::MLP applies between its two layers.
enum class Activation {
  gelu,       // x Phi(x), exact (erf): torch's default
  gelu_tanh,  // the tanh approximation (GPT-2)
  relu,
  silu,       // x sigmoid(x)
  tanh,
  sigmoid,
};

// The enumerator's name: "gelu", "gelu_tanh", ...
inline std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::relu: return "relu";
    case Activation::silu: return "silu";
    case Activation::tanh: return "tanh";
    case Activation::sigmoid: return "sigmoid";
  }
  return "?";
}

// a applied to x elementwise (the op of that name). spsd::Error for a value that is not an
// enumerator.
template <Element C>
GlobalTensor<C> activate(const GlobalTensor<C>& x, Activation a) {
  switch (a) {
    case Activation::gelu: return gelu(x);
    case Activation::gelu_tanh: return gelu(x, GeluApproximation::kTanh);
    case Activation::relu: return relu(x);
    case Activation::silu: return silu(x);
    case Activation::tanh: return spsd::tanh(x);
    case Activation::sigmoid: return sigmoid(x);
  }
  spsd::detail::throw_error("nn::activate", "invalid activation ", static_cast<int>(a));
}

}  // namespace spsd::nn
