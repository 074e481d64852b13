#pragma once
// nn::MultiheadAttention: self-attention over x (batch, seq, dim) with `heads` heads of dim/heads
// (docs/modules.md). Children "q", "k", "v" (the column-parallel projections: a plan splits their
// weights on axis 1, which splits the heads) and "out" (the row-parallel one). The heads become
// an axis of their own, (batch, heads, seq, dim/heads), that scaled_dot_product_attention keeps
// whole or splits as its layouts ask (examples/train/gpt.hpp computes attention the same way).
#include <cstdint>
#include <optional>

#include "spsd/nn/linear.hpp"
#include "spsd/op/attention.hpp"
#include "spsd/op/shape_ops.hpp"

namespace spsd::nn {

// Self-attention with `heads` heads: projections "q", "k", "v" and "out".
template <FloatingElement T>
class MultiheadAttention : public Module<T> {
 public:
  Linear<T> q, k, v, out;

  // std, out_std: the init of the q, k, v and of the out projections (Linear's std; 0: PyTorch's
  // uniform); out_std defaults to std.
  MultiheadAttention(Init& init, int64_t dim, int64_t heads, bool causal = false, bool bias = true, double std = 0,
                     std::optional<double> out_std = std::nullopt)
      : q(init, checked(dim, heads), dim, bias, std),
        k(init, dim, dim, bias, std),
        v(init, dim, dim, bias, std),
        out(init, dim, dim, bias, out_std.value_or(std)),
        dim_(dim),
        heads_(heads),
        causal_(causal) {
    this->register_module("q", q);
    this->register_module("k", k);
    this->register_module("v", v);
    this->register_module("out", out);
  }

  // The model width, the head count, and whether a query sees only keys at or before its position.
  int64_t dim() const { return dim_; }
  int64_t heads() const { return heads_; }
  bool causal() const { return causal_; }

  // Self-attention of x (batch, seq, dim).
  template <FloatingElement C>
  GlobalTensor<C> forward(const GlobalTensor<C>& x) const {
    const Shape& s = x.shape();
    SPSD_CHECK(s.ndim() == 3 && s[2] == dim_, "nn::MultiheadAttention", "expects an input (batch, seq, ", dim_,
               "), got shape ", s.to_string());
    const int64_t batch = s[0], len = s[1];
    // (batch, seq, dim) <-> (batch, heads, seq, dim / heads)
    const auto split_heads = [&](const GlobalTensor<C>& t) {
      return transpose(reshape(t, {batch, len, heads_, dim_ / heads_}), 1, 2);
    };
    const GlobalTensor<C> in = this->at_input_boundary(x);
    const GlobalTensor<C> a = scaled_dot_product_attention(split_heads(q(in)), split_heads(k(in)), split_heads(v(in)),
                                                           causal_);
    return this->at_output_boundary(out(reshape(transpose(a, 1, 2), {batch, len, dim_})));
  }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return forward(x); }

 private:
  static int64_t checked(int64_t dim, int64_t heads) {
    SPSD_CHECK(dim > 0 && heads > 0 && dim % heads == 0, "nn::MultiheadAttention",
               "needs heads dividing dim, got dim ", dim, ", heads ", heads);
    return dim;
  }

  int64_t dim_, heads_;
  bool causal_;
};

}  // namespace spsd::nn
