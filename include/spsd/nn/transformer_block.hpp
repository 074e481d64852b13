#pragma once
// nn::TransformerBlock: a pre-norm transformer block (GPT-2, Megatron; docs/modules.md),
//   x = x + drop(attn(ln1(x)));  x = x + drop(mlp(ln2(x)))
// with children "ln1", "attn" (MultiheadAttention: "attn.q.weight", ...), "ln2", "mlp" (MLP:
// "mlp.fc1.weight", ...) and "drop" (Dropout, no parameters).
#include <cmath>
#include <cstdint>
#include <optional>

#include "spsd/nn/dropout.hpp"
#include "spsd/nn/layer_norm.hpp"
#include "spsd/nn/mlp.hpp"
#include "spsd/nn/multihead_attention.hpp"
#include "spsd/nn/rms_norm.hpp"

namespace spsd::nn {

// The normalization of a TransformerBlock: LayerNorm or RMSNorm.
enum class Norm { layer_norm, rms_norm };

// The sizes and choices of a TransformerBlock.
struct TransformerConfig {
  int64_t dim = 0, heads = 0, hidden = 0;  // hidden: the MLP's width (4 dim in GPT-2)
  double dropout = 0;                      // after attention and after the MLP, in training
  bool causal = true;
  Norm norm = Norm::layer_norm;
  double norm_eps = 1e-5;
  bool bias = true;  // of every Linear
  Activation activation = Activation::gelu;
  // Linears normal(0, init_std), the residual projections (attn.out, mlp.fc2) normal(0,
  // init_std / sqrt(2 layers)) as GPT-2, biases zero; init_std 0: PyTorch's uniform init.
  double init_std = 0.02;
  int64_t layers = 1;  // of the model the block is in: only scales the residual projections' init
};

// ln1 and ln2: a LayerNorm or an RMSNorm by config.norm, the one made registered under the name.
template <FloatingElement T>
class NormSlot {
 public:
  std::optional<LayerNorm<T>> layer_norm;
  std::optional<RMSNorm<T>> rms_norm;

  // Makes the norm layer named by norm.
  NormSlot(Init& init, Norm norm, int64_t dim, double eps) {
    if (norm == Norm::layer_norm) layer_norm.emplace(init, dim, eps);
    else rms_norm.emplace(init, dim, eps);
  }
  NormSlot(const NormSlot&) = delete;
  NormSlot& operator=(const NormSlot&) = delete;

  // The layer made, as a module; applying the slot applies it.
  Module<T>& module() { return layer_norm ? static_cast<Module<T>&>(*layer_norm) : *rms_norm; }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return layer_norm ? (*layer_norm)(x) : (*rms_norm)(x); }
};

// A pre-norm transformer block: x + drop(attn(ln1(x))), then x + drop(mlp(ln2(x))).
template <FloatingElement T>
class TransformerBlock : public Module<T> {
 public:
  TransformerConfig config;
  NormSlot<T> ln1;
  MultiheadAttention<T> attn;
  NormSlot<T> ln2;
  MLP<T> mlp;
  Dropout<T> drop;

  // A block of the sizes in c, its parameters drawn from init.
  TransformerBlock(Init& init, const TransformerConfig& c)
      : config(checked(c)),
        ln1(init, c.norm, c.dim, c.norm_eps),
        attn(init, c.dim, c.heads, c.causal, c.bias, c.init_std, residual_std(c)),
        ln2(init, c.norm, c.dim, c.norm_eps),
        mlp(init, c.dim, c.hidden, c.activation, c.bias, c.init_std, residual_std(c)),
        drop(c.dropout) {
    this->register_module("ln1", ln1.module());
    this->register_module("attn", attn);
    this->register_module("ln2", ln2.module());
    this->register_module("mlp", mlp);
    this->register_module("drop", drop);
  }

  // x (batch, seq, dim) in any floating type C; the parameters cast to C on use.
  template <FloatingElement C>
  GlobalTensor<C> forward(const GlobalTensor<C>& x) const {
    const GlobalTensor<C> h = x + drop(attn(ln1(x)));
    return h + drop(mlp(ln2(h)));
  }
  template <FloatingElement C>
  GlobalTensor<C> operator()(const GlobalTensor<C>& x) const { return forward(x); }

 private:
  static const TransformerConfig& checked(const TransformerConfig& c) {
    SPSD_CHECK(c.dim > 0 && c.heads > 0 && c.hidden > 0 && c.layers > 0 && c.init_std >= 0,
               "nn::TransformerBlock", "needs dim, heads, hidden and layers > 0 and init_std >= 0, got dim ", c.dim,
               ", heads ", c.heads, ", hidden ", c.hidden, ", layers ", c.layers, ", init_std ", c.init_std);
    return c;
  }
  static double residual_std(const TransformerConfig& c) {
    return c.init_std / std::sqrt(2.0 * static_cast<double>(c.layers));
  }
};

}  // namespace spsd::nn
