#pragma once
// nn::LayerNorm: layer_norm over the last axis, (x - mean) / sqrt(var + eps) * weight + bias
// (docs/modules.md). Parameters "weight" (ones) and "bias" (zeros), of shape (dim), when affine;
// without them the op runs with a weight of ones and a bias of zeros made on use.
#include <cstdint>
#include <optional>

#include "spsd/nn/module.hpp"
#include "spsd/op/cast.hpp"
#include "spsd/op/normalization.hpp"

namespace spsd::detail {
// What LayerNorm and RMSNorm share: the checks of their arguments and input, and the constant
// (dim) of value v on x's placement that stands for an absent affine parameter.
inline void check_nn_norm_args(std::string_view layer, int64_t dim, double eps) {
  SPSD_CHECK(dim > 0 && eps >= 0, layer, "needs dim > 0 and eps >= 0, got dim ", dim, ", eps ", eps);
}
inline void check_nn_norm_input(std::string_view layer, const Shape& s, int64_t dim) {
  SPSD_CHECK(s.ndim() >= 1 && s[s.ndim() - 1] == dim, layer, "normalizes a last axis of ", dim,
             ", got an input of shape ", s.to_string());
}
template <FloatingElement C>
GlobalTensor<C> nn_norm_constant(const GlobalTensor<C>& x, int64_t dim, double v) {
  return full<C>({dim}, static_cast<compute_t<C>>(v), x.placement(),
                 NdSbp(std::vector<Sbp>(x.placement().mesh().ndim(), sbp::broadcast)));
}
}  // namespace spsd::detail

namespace spsd::nn {

// layer_norm over the last axis, with parameters "weight" and "bias" when affine.
template <FloatingElement T>
class LayerNorm : public Module<T> {
 public:
  using Parameter = typename Module<T>::Parameter;
  std::optional<Parameter> weight, bias;  // (dim), when affine
  double eps;

  // Over a last axis of dim; weight ones and bias zeros when affine.
  LayerNorm(Init& init, int64_t dim, double eps = 1e-5, bool affine = true)
      : weight(checked(dim, eps, affine) ? std::optional(init.constant<T>({dim}, 1)) : std::nullopt),
        bias(affine ? std::optional(init.constant<T>({dim}, 0)) : std::nullopt),
        eps(eps),
        dim_(dim) {
    if (!affine) return;
    this->register_parameter("weight", *weight);
    this->register_parameter("bias", *bias);
  }

  // The normalized extent.
  int64_t dim() const { return dim_; }

  // The layer applied to x (parameters cast to x's type C).
  template <FloatingElement C>
  GlobalTensor<C> forward(const GlobalTensor<C>& x) const {
    spsd::detail::check_nn_norm_input("nn::LayerNorm", x.shape(), dim_);
    const GlobalTensor<C> in = this->at_input_boundary(x);
    const GlobalTensor<C> w = weight ? cast<C>(*weight) : spsd::detail::nn_norm_constant(in, dim_, 1),
                          b = bias ? cast<C>(*bias) : spsd::detail::nn_norm_constant(in, dim_, 0);
    return this->at_output_boundary(layer_norm(in, w, b, eps));
  }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return forward(x); }

 private:
  static bool checked(int64_t dim, double eps, bool affine) {
    spsd::detail::check_nn_norm_args("nn::LayerNorm", dim, eps);
    return affine;
  }
  int64_t dim_;
};

}  // namespace spsd::nn
