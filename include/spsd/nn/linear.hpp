#pragma once
// nn::Linear: y = x weight + bias over x's last axis (docs/modules.md). The weight is (in, out),
// the layout matmul takes without a transpose, so a plan splits it on axis 1 for a column-parallel
// layer and on axis 0 for a row-parallel one (torch.nn.Linear stores (out, in)).
#include <cmath>
#include <cstdint>
#include <optional>

#include "spsd/nn/module.hpp"
#include "spsd/op/cast.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/matmul.hpp"

namespace spsd::nn {

// y = x weight + bias over x's last axis, with the weight stored (in, out).
template <FloatingElement T>
class Linear : public Module<T> {
 public:
  using Parameter = typename Module<T>::Parameter;
  Parameter weight;               // (in, out)
  std::optional<Parameter> bias;  // (out), when made with one

  // std == 0: PyTorch's default, weight and bias uniform in [-1/sqrt(in), 1/sqrt(in)) (what
  // kaiming_uniform_(a = sqrt 5) amounts to). std > 0: weight normal(0, std) and bias zero, as
  // GPT-2 and Megatron initialize (TransformerBlock passes its init_std).
  Linear(Init& init, int64_t in, int64_t out, bool has_bias = true, double std = 0)
      : weight(draw(init, {checked(in, out, std), out}, in, std)),
        bias(has_bias ? std::optional(std > 0 ? init.constant<T>({out}, 0) : draw(init, {out}, in, 0)) : std::nullopt),
        in_(in),
        out_(out) {
    this->register_parameter("weight", weight);
    if (bias) this->register_parameter("bias", *bias);
  }

  // The weight's (in, out).
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  // In x's type C (the weight cast on use). The output boundary comes before the bias: a
  // row-parallel layer reduces its P(sum) matmul first and adds the bias once.
  template <FloatingElement C>
  GlobalTensor<C> forward(const GlobalTensor<C>& x) const {
    const Shape& s = x.shape();
    SPSD_CHECK(s.ndim() >= 1 && s[s.ndim() - 1] == in_, "nn::Linear", "expects input features ", in_,
               " on the last axis, got an input of shape ", s.to_string());
    GlobalTensor<C> y = this->at_output_boundary(matmul(this->at_input_boundary(x), cast<C>(weight)));
    return bias ? y + cast<C>(*bias) : y;
  }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return forward(x); }

 private:
  static int64_t checked(int64_t in, int64_t out, double std) {
    SPSD_CHECK(in > 0 && out > 0, "nn::Linear", "needs positive in and out features, got in ", in, ", out ", out);
    SPSD_CHECK(std >= 0, "nn::Linear", "std must be >= 0 (0: PyTorch's uniform init), got ", std);
    return in;
  }
  static Parameter draw(Init& init, const Shape& shape, int64_t in, double std) {
    return std > 0 ? init.normal<T>(shape, std) : init.uniform<T>(shape, 1 / std::sqrt(static_cast<double>(in)));
  }

  int64_t in_, out_;
};

}  // namespace spsd::nn
