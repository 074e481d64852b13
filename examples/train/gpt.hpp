#pragma once
// The model of examples/08_gpt (and its tests and benchmarks): a character-level GPT written as
// for one device. Token and position embeddings, `layers` pre-norm blocks (causal multi-head
// attention, then a gelu MLP, each added to the residual stream), a final layer norm and a
// head onto the vocabulary, tied to the token table or not.
//
// Parallelism is only the layouts the parameters and the tokens start in (GptLayouts); every
// op then picks its signature:
//   data      tokens S(0) (batch), parameters B: gradients come out P(sum), the optimizer's
//             boxing to B is the all-reduce of data parallelism.
//   sequence  tokens S(1): every activation is split along the sequence; layer norm, the
//             MLP and the head are local, attention's queries stay split while its keys and
//             values are gathered (the causal mask uses global positions); parameters B.
//   tensor    Megatron: q, k, v and the first MLP weight split on their output axis (heads and
//             hidden units), the attention output and second MLP weights on their input axis
//             (one reduction of a P(sum) each), the token table on the vocabulary (each rank
//             gathers the rows it holds: a P(sum) embedding) and the head on the vocabulary
//             (vocab-parallel logits, and cross_entropy's split-class path).
//   2d        a (world/2, 2) mesh: data parallel on mesh axis 0, tensor parallel on axis 1.
#include <cmath>
#include <concepts>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace examples {

struct GptConfig {
  int64_t vocab = 0, context = 64, dim = 128, heads = 4, layers = 2;
  double dropout = 0;  // probability of dropping, after attention and after the MLP
  bool tied = false;   // the head is the token table transposed
};

struct GptLayouts {
  spsd::Placement placement;
  spsd::NdSbp tokens;               // (B, T) inputs and targets
  spsd::NdSbp replicated;           // layer norms, the position table, biases after a reduction
  spsd::NdSbp column, column_bias;  // (in, out) weights split on out (heads, hidden units), their biases
  spsd::NdSbp row;                  // (in, out) weights split on in
  spsd::NdSbp table;                // the (V, E) token table
  spsd::NdSbp head;                 // the (E, V) head when untied
};

inline GptLayouts gpt_layouts(const std::string& mode, const std::vector<int64_t>& ranks,
                              const std::string& device = "cpu") {
  using namespace spsd;
  const int64_t world = static_cast<int64_t>(ranks.size());
  const Sbp B = sbp::broadcast, S0 = sbp::split(0), S1 = sbp::split(1);
  const Placement line(device, ranks);
  if (mode == "data") return {line, S0, B, B, B, B, B, B};
  if (mode == "sequence") return {line, S1, B, B, B, B, B, B};
  if (mode == "tensor") return {line, B, B, S1, S0, S0, S0, S1};
  if (mode == "2d") {
    SPSD_CHECK(world % 2 == 0, "gpt_layouts", "--parallel 2d needs an even number of ranks, got ", world);
    return {Placement(device, ranks, Shape{world / 2, 2}), {S0, B}, {B, B}, {B, S1}, {B, S0}, {B, S0}, {B, S0}, {B, S1}};
  }
  throw Error("gpt_layouts: --parallel must be data, sequence, tensor or 2d, got \"" + mode + "\"");
}

inline GptLayouts gpt_layouts(const std::string& mode, int world, const std::string& device = "cpu") {
  std::vector<int64_t> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  return gpt_layouts(mode, ranks, device);
}

// T: the parameters' type (masters). The forward pass computes in the type C it is asked for
// (mixed precision: each weight cast on use, gradients flow back into the T masters).
template <std::floating_point T>
struct Gpt {
  using Param = spsd::GlobalTensor<T>;
  struct Block {
    Param ln1_w, ln1_b, wq, wk, wv, wo, bo, ln2_w, ln2_b, w1, b1, w2, b2;
  };
  GptConfig config;
  Param table, positions;
  std::vector<Block> blocks;
  Param lnf_w, lnf_b;
  Param head;  // the table itself when tied (config.tied), not a parameter of its own then

  // GPT-2's initialization (normal(0, 0.02), residual projections scaled by 1/sqrt(2 layers)),
  // from layout-independent randn: the same values in any layout.
  Gpt(const GptConfig& c, const GptLayouts& l, uint64_t seed) : Gpt(c, Init{l, seed * 1000}) {}

  // Logits (B, T, V) of tokens (B, T), computed in C. dropout_seed: this step's masks (each
  // dropout site adds its own offset), unused when config.dropout is 0.
  template <spsd::FloatingElement C>
  spsd::GlobalTensor<C> operator()(const spsd::GlobalTensor<int64_t>& tokens, uint64_t dropout_seed = 0) const {
    using spsd::GlobalTensor;
    const auto w = [](const Param& p) { return spsd::cast<C>(p); };
    const int64_t batch = tokens.shape()[0], len = tokens.shape()[1], e = config.dim, h = config.heads;
    uint64_t site = dropout_seed * 1000;
    const auto drop = [&](const GlobalTensor<C>& x) {
      return config.dropout > 0 ? spsd::dropout(x, config.dropout, site++) : x;
    };
    // (B, T, E) -> (B, H, T, E/H) and back: heads become an axis attention keeps whole.
    const auto split_heads = [&](const GlobalTensor<C>& x) {
      return spsd::transpose(spsd::reshape(x, {batch, len, h, e / h}), 1, 2);
    };
    const auto merge_heads = [&](const GlobalTensor<C>& x) {
      return spsd::reshape(spsd::transpose(x, 1, 2), {batch, len, e});
    };
    const GlobalTensor<C> pos = w(positions);
    GlobalTensor<C> x = spsd::embedding(w(table), tokens) + (len == config.context ? pos : spsd::slice(pos, 0, 0, len));
    for (const Block& b : blocks) {
      GlobalTensor<C> n = spsd::layer_norm(x, w(b.ln1_w), w(b.ln1_b), 1e-5);
      const GlobalTensor<C> a = spsd::scaled_dot_product_attention(
          split_heads(spsd::matmul(n, w(b.wq))), split_heads(spsd::matmul(n, w(b.wk))),
          split_heads(spsd::matmul(n, w(b.wv))), /*causal=*/true);
      x = x + drop(spsd::matmul(merge_heads(a), w(b.wo)) + w(b.bo));
      n = spsd::layer_norm(x, w(b.ln2_w), w(b.ln2_b), 1e-5);
      x = x + drop(spsd::matmul(spsd::gelu(spsd::matmul(n, w(b.w1)) + w(b.b1)), w(b.w2)) + w(b.b2));
    }
    x = spsd::layer_norm(x, w(lnf_w), w(lnf_b), 1e-5);
    return spsd::matmul(x, config.tied ? spsd::transpose(w(table), 0, 1) : w(head));
  }

  std::vector<Param> parameters() const {
    std::vector<Param> p = {table, positions};
    for (const Block& b : blocks)
      p.insert(p.end(), {b.ln1_w, b.ln1_b, b.wq, b.wk, b.wv, b.wo, b.bo, b.ln2_w, b.ln2_b, b.w1, b.b1, b.w2, b.b2});
    p.insert(p.end(), {lnf_w, lnf_b});
    if (!config.tied) p.push_back(head);
    return p;
  }

 private:
  // Makes the parameters in one order (the seeds follow it), each requiring grad.
  struct Init {
    const GptLayouts& l;
    uint64_t next;
    Param normal(const spsd::Shape& s, const spsd::NdSbp& layout, double std) {
      return keep(spsd::randn<T>(s, l.placement, layout, next++) * static_cast<T>(std));
    }
    Param constant(int64_t n, double v, const spsd::NdSbp& layout) {
      return keep(spsd::full<T>({n}, static_cast<T>(v), l.placement, layout));
    }
    static Param keep(Param p) {
      p.requires_grad_();
      return p;
    }
    Block block(const GptConfig& c) {
      const int64_t e = c.dim;
      const double residual = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
      return {.ln1_w = constant(e, 1, l.replicated), .ln1_b = constant(e, 0, l.replicated),
              .wq = normal({e, e}, l.column, 0.02), .wk = normal({e, e}, l.column, 0.02),
              .wv = normal({e, e}, l.column, 0.02), .wo = normal({e, e}, l.row, residual),
              .bo = constant(e, 0, l.replicated), .ln2_w = constant(e, 1, l.replicated),
              .ln2_b = constant(e, 0, l.replicated), .w1 = normal({e, 4 * e}, l.column, 0.02),
              .b1 = constant(4 * e, 0, l.column_bias), .w2 = normal({4 * e, e}, l.row, residual),
              .b2 = constant(e, 0, l.replicated)};
    }
  };

  static std::vector<Block> make_blocks(const GptConfig& c, Init& init) {
    std::vector<Block> b;
    for (int64_t i = 0; i < c.layers; ++i) b.push_back(init.block(c));
    return b;
  }

  Gpt(const GptConfig& c, Init&& init)
      : config(c),
        table(init.normal({c.vocab, c.dim}, init.l.table, 0.02)),
        positions(init.normal({c.context, c.dim}, init.l.replicated, 0.01)),
        blocks(make_blocks(c, init)),
        lnf_w(init.constant(c.dim, 1, init.l.replicated)),
        lnf_b(init.constant(c.dim, 0, init.l.replicated)),
        head(c.tied ? table : init.normal({c.dim, c.vocab}, init.l.head, 0.02)) {
    SPSD_CHECK(c.vocab > 0 && c.heads > 0 && c.dim % c.heads == 0, "Gpt",
               "needs a vocabulary and dim divisible by heads, got vocab ", c.vocab, ", dim ", c.dim, ", heads ",
               c.heads);
  }
};

}  // namespace examples
