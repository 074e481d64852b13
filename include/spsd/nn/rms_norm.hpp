#pragma once
// nn::RMSNorm: rms_norm over the last axis, x / sqrt(mean(x^2) + eps) * weight (docs/modules.md).
// Parameter "weight" (ones) of shape (dim).
#include <cstdint>

#include "spsd/nn/layer_norm.hpp"

namespace spsd::nn {

// rms_norm over the last axis, with parameter "weight".
template <FloatingElement T>
class RMSNorm : public Module<T> {
 public:
  typename Module<T>::Parameter weight;  // (dim)
  double eps;

  // eps: 1e-6 as the op's default (torch.nn.RMSNorm takes the type's epsilon, Megatron 1e-5).
  RMSNorm(Init& init, int64_t dim, double eps = 1e-6) : weight(make(init, dim, eps)), eps(eps), dim_(dim) {
    this->register_parameter("weight", weight);
  }

  // The normalized extent.
  int64_t dim() const { return dim_; }

  // The layer applied to x (the weight cast to x's type C).
  template <FloatingElement C>
  GlobalTensor<C> forward(const GlobalTensor<C>& x) const {
    spsd::detail::check_nn_norm_input("nn::RMSNorm", x.shape(), dim_);
    return this->at_output_boundary(rms_norm(this->at_input_boundary(x), cast<C>(weight), eps));
  }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return forward(x); }

 private:
  static GlobalTensor<T> make(Init& init, int64_t dim, double eps) {
    spsd::detail::check_nn_norm_args("nn::RMSNorm", dim, eps);
    return init.constant<T>({dim}, 1);
  }
  int64_t dim_;
};

}  // namespace spsd::nn
