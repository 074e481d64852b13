#pragma once
// The model of examples/08_gpt (and of its tests and benchmarks): a character-level GPT written
// as for one device with the nn layers (docs/modules.md). A token embedding plus a position
// table, `layers` pre-norm nn::TransformerBlocks (causal attention, gelu MLP), a final layer
// norm and a head onto the vocabulary, tied to the token table or not.
//
// Parallelism is a plan (gpt_plan) applied to the built model, nn::parallelize(model, plan), and
// the tokens given in input_layout(plan); every op then picks its signature:
//   data         tokens S(0), parameters B: gradients come out P(sum), and the optimizer's
//                boxing to B is data parallelism's all-reduce.
//   sequence     Megatron-SP: tensor parallelism whose residual stream, layer norms and dropout
//                run split on the sequence (all-gather before q/k/v and fc1, reduce-scatter
//                after attn.out and fc2).
//   tensor       Megatron: heads and hidden units split; the token table and the head split on
//                the vocabulary (a P(sum) embedding; vocab-parallel logits and cross_entropy's
//                split-class path).
//   2d           a (world/2, 2) mesh: data parallel on mesh axis 0, tensor on axis 1.
//   2d-sequence  the same mesh, data parallel on axis 0, sequence on axis 1.
#include <concepts>
#include <optional>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

#include "train/plans.hpp"

namespace examples {

struct GptConfig {
  int64_t vocab = 0, context = 64, dim = 128, heads = 4, layers = 2;
  double dropout = 0;  // probability of dropping, after attention and after the MLP
  bool tied = false;   // the head is the token table transposed
};

// The plan of --parallel `mode`; an unknown mode is an Error naming it.
inline spsd::nn::Plan gpt_plan(const std::string& mode) {
  using namespace spsd;
  // Megatron's vocab-parallel embedding and head (the head is absent when tied).
  const nn::AxisPlan tensor =
      nn::tensor_parallel().with_parameter("tok.weight", sbp::split(0)).with_parameter("head.weight", sbp::split(1), true);
  if (mode == "data") return nn::data_parallel();
  if (mode == "sequence") return nn::sequence_parallel();
  if (mode == "tensor") return tensor;
  if (mode == "2d") return {nn::data_parallel(), tensor};
  if (mode == "2d-sequence") return {nn::data_parallel(), nn::sequence_parallel()};
  throw Error("examples::gpt_plan: --parallel must be data, sequence, tensor, 2d or 2d-sequence, got \"" + mode + "\"");
}

// Where gpt_plan(mode) runs: the ranks as a line, or a (ranks/2, 2) mesh for the 2-d plans.
inline spsd::Placement gpt_placement(const std::string& mode, const std::vector<int64_t>& ranks,
                                     const std::string& device = "cpu") {
  return plan_placement("examples::gpt_placement", gpt_plan(mode), ranks, device);
}
inline spsd::Placement gpt_placement(const std::string& mode, int world, const std::string& device = "cpu") {
  return gpt_placement(mode, first_ranks(world), device);
}

// T: the parameters' type (masters); forward<C> computes in C (each weight cast on use).
// GPT-2's initialization (normal(0, 0.02), residual projections / sqrt(2 layers)), from
// layout-independent randn: the same values in any layout.
template <std::floating_point T>
class Gpt : public spsd::nn::Module<T> {
 public:
  GptConfig config;
  spsd::nn::Embedding<T> tok;
  spsd::GlobalTensor<T> positions;  // (context, dim)
  spsd::nn::ModuleList<T, spsd::nn::TransformerBlock<T>> blocks;
  spsd::nn::LayerNorm<T> lnf;
  std::optional<spsd::nn::Linear<T>> head;  // (dim, vocab), none when tied

  // init: the placement (gpt_placement) and the first seed.
  Gpt(const GptConfig& c, spsd::nn::Init init)
      : config(checked(c)), tok(init, c.vocab, c.dim, 0.02), positions(init.normal<T>({c.context, c.dim}, 0.01)),
        lnf(init, c.dim) {
    const spsd::nn::TransformerConfig block{.dim = c.dim, .heads = c.heads, .hidden = 4 * c.dim,
                                            .dropout = c.dropout, .causal = true, .layers = c.layers};
    for (int64_t i = 0; i < c.layers; ++i) blocks.emplace_back(init, block);
    if (!c.tied) head.emplace(init, c.dim, c.vocab, /*bias=*/false, 0.02);
    this->register_module("tok", tok);
    this->register_parameter("positions", positions);
    this->register_module("blocks", blocks);
    this->register_module("lnf", lnf);
    if (head) this->register_module("head", *head);
  }

  // Logits (B, T, V) of tokens (B, T), T <= context. Dropout (in training) draws from the seed
  // stream (spsd::manual_seed).
  template <spsd::FloatingElement C>
  spsd::GlobalTensor<C> forward(const spsd::GlobalTensor<int64_t>& tokens) const {
    const int64_t len = tokens.shape()[1];
    spsd::GlobalTensor<C> x =
        tok.template forward<C>(tokens) + spsd::cast<C>(len == config.context ? positions : spsd::slice(positions, 0, 0, len));
    for (const auto& b : blocks) x = b(x);
    x = lnf(x);
    return head ? (*head)(x) : spsd::matmul(x, spsd::transpose(spsd::cast<C>(tok.weight), 0, 1));
  }

 private:
  static const GptConfig& checked(const GptConfig& c) {
    SPSD_CHECK(c.vocab > 0 && c.heads > 0 && c.dim % c.heads == 0, "examples::Gpt",
               "needs a vocabulary and dim divisible by heads, got vocab ", c.vocab, ", dim ", c.dim, ", heads ",
               c.heads);
    return c;
  }
};

}  // namespace examples
