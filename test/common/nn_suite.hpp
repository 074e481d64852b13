#pragma once
// The layers of spsd/nn (docs/modules.md) against the single-process computation, shared by
// test/sim/test_nn.cpp (meshes 1, 2, 4, 2x2) and test/mpi/test_nn.cpp (the world's mesh, 2x2).
// Collective over the world: every rank builds each layer on the placement under test and on
// rank 0 alone (the same seeds, so the same parameters), runs forward and backward of
// sum(layer(x) * r) with x in each input layout, and rank 0 compares the outputs, the input's
// gradient and every parameter's gradient (by name) with the one-rank run.
//
// Tolerances: double rel 1e-10 + abs 1e-12 (sums in another order per layout); bfloat16 compute
// on float masters rel 2^-5 + abs 2^-5 against the one-rank bfloat16 run (each rounds its
// partial sums at other places, a few bfloat16 ulps apart, through a block's dozen ops).
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>

#include "failures.hpp"
#include "norm_suite.hpp"

namespace spsd_test::nn_suite {

using namespace spsd;

constexpr uint64_t kSeed = 1234;

struct Tolerance {
  double rel, abs;
};
template <class C>
Tolerance tolerance() {
  if constexpr (std::is_same_v<C, double>) return {1e-10, 1e-12};
  else return {1.0 / 32, 1.0 / 32};
}

inline void expect_near(Failures& f, const std::string& what, const std::vector<double>& got,
                        const std::vector<double>& want, Tolerance tol) {
  if (got.size() != want.size())
    return f.add(what + ": " + std::to_string(got.size()) + " elements, expected " + std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol.abs + tol.rel * std::abs(want[i])))
      return f.add(what + ": element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
                   std::to_string(want[i]));
}

template <Element T>
std::vector<double> values(const GlobalTensor<T>& t) {
  std::vector<double> out;
  for (const T& v : t.full().to_vector()) out.push_back(static_cast<double>(v));
  return out;
}

inline NdSbp replicated(const Placement& p) { return NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)); }
inline Placement rank0() { return Placement("cpu", {0}); }

// The layouts of a 3-d input (batch, seq, dim) each case runs: batch, sequence and feature
// splits, replicated, and a partial sum; on a 2-d mesh their combinations.
inline std::vector<NdSbp> input_layouts(const Placement& p) {
  const Sbp B = sbp::broadcast, S0 = sbp::split(0), S1 = sbp::split(1), S2 = sbp::split(2), P = sbp::partial_sum;
  if (p.mesh().ndim() == 1) return {NdSbp(B), NdSbp(S0), NdSbp(S1), NdSbp(S2), NdSbp(P)};
  return {NdSbp({S0, S1}), NdSbp({S1, B}), NdSbp({B, S0}), NdSbp({S0, S2}), NdSbp({P, S1}), NdSbp({B, B})};
}

// One forward and backward: y, dx and each parameter's gradient (by name). Meaningful on the
// ranks of the placement.
struct Run {
  std::vector<double> y, dx;
  std::vector<std::pair<std::string, std::vector<double>>> grads;
};

// r: the loss's weights, fixed values of y's shape.
template <FloatingElement C>
GlobalTensor<C> loss_weights(const GlobalTensor<C>& y) {
  const Tensor<C> r = Tensor<C>::from_vector(y.shape(), uniform_values<C>(y.shape().numel(), 12, -1, 1));
  return from_host(r, y.placement(), replicated(y.placement()));
}

template <FloatingElement C, class Layer>
Run forward_backward(const Layer& layer, GlobalTensor<C> x) {
  x.requires_grad_();
  const GlobalTensor<C> y = layer(x);
  backward(sum(y * loss_weights(y)));
  Run out{values(y), values(x.grad()), {}};
  for (auto& [name, p] : layer.named_parameters()) out.grads.emplace_back(name, values(p.grad()));
  return out;
}

inline void expect_same_run(Failures& f, const std::string& what, const Run& got, const Run& want, Tolerance tol) {
  expect_near(f, what + " y", got.y, want.y, tol);
  expect_near(f, what + " dx", got.dx, want.dx, tol);
  if (got.grads.size() != want.grads.size()) return f.add(what + ": a different number of parameters");
  for (size_t i = 0; i < got.grads.size(); ++i) {
    if (got.grads[i].first != want.grads[i].first)
      f.add(what + ": parameter " + got.grads[i].first + ", expected " + want.grads[i].first);
    expect_near(f, what + " d" + got.grads[i].first, got.grads[i].second, want.grads[i].second, tol);
  }
}

// make(init) -> std::unique_ptr<a layer of T>; its forward takes (batch, seq, dim) in C.
template <FloatingElement T, FloatingElement C, class Make>
void check_layer(Failures& f, const std::string& what, const Placement& p, const Shape& x_shape, Make make,
                 uint64_t dropout_seed = 0) {
  const Tensor<C> x = Tensor<C>::from_vector(x_shape, uniform_values<C>(x_shape.numel(), 11, -2, 2));
  Run want;
  {
    nn::Init init{rank0(), kSeed};
    auto layer = make(init);
    manual_seed(dropout_seed);
    want = forward_backward(*layer, from_host(x, rank0(), NdSbp(sbp::broadcast)));
  }
  for (const NdSbp& nd : input_layouts(p)) {
    const std::string case_name = what + ", x " + nd.to_string() + " on mesh " + p.mesh().to_string();
    try {
      nn::Init init{p, kSeed};
      auto layer = make(init);
      manual_seed(dropout_seed);
      const Run got = forward_backward(*layer, from_host(x, p, nd));
      if (rank() == 0) expect_same_run(f, case_name, got, want, tolerance<C>());
    } catch (const std::exception& e) {
      f.add(case_name + ": threw: " + e.what());
    }
  }
}

// The block by hand, from the ops, with the parameters of `block` looked up by name: what
// TransformerBlock's names and composition must mean (layer norm, gelu, bias, dropout 0).
template <FloatingElement T>
GlobalTensor<T> block_by_hand(const nn::TransformerBlock<T>& block, const GlobalTensor<T>& x) {
  std::map<std::string, GlobalTensor<T>> w;
  for (auto& [name, p] : block.named_parameters()) w.emplace(name, p);
  const auto linear = [&](const std::string& name, const GlobalTensor<T>& t) {
    return matmul(t, w.at(name + ".weight")) + w.at(name + ".bias");
  };
  const nn::TransformerConfig& c = block.config;
  const int64_t b = x.shape()[0], s = x.shape()[1], d = c.dim, h = c.heads;
  const auto heads = [&](const GlobalTensor<T>& t) { return transpose(reshape(t, {b, s, h, d / h}), 1, 2); };
  GlobalTensor<T> n = layer_norm(x, w.at("ln1.weight"), w.at("ln1.bias"), c.norm_eps);
  const GlobalTensor<T> a = scaled_dot_product_attention(heads(linear("attn.q", n)), heads(linear("attn.k", n)),
                                                         heads(linear("attn.v", n)), c.causal);
  const GlobalTensor<T> x1 = x + linear("attn.out", reshape(transpose(a, 1, 2), {b, s, d}));
  n = layer_norm(x1, w.at("ln2.weight"), w.at("ln2.bias"), c.norm_eps);
  return x1 + linear("mlp.fc2", gelu(linear("mlp.fc1", n)));
}

// Every layer, forward and gradients, in every input layout of input_layouts(p).
inline void check_layers(const Placement& p, Failures& f) {
  using D = double;
  const Shape x{4, 6, 8};
  const auto make = []<class L, class... A>(std::type_identity<L>, A... args) {
    return [=](nn::Init& i) { return std::make_unique<L>(i, args...); };
  };
  check_layer<D, D>(f, "Linear(8, 5)", p, x, make(std::type_identity<nn::Linear<D>>{}, 8, 5, true, 0.0));
  check_layer<D, D>(f, "Linear(8, 5, no bias, std 0.3)", p, x,
                    make(std::type_identity<nn::Linear<D>>{}, 8, 5, false, 0.3));
  check_layer<D, D>(f, "LayerNorm(8)", p, x, make(std::type_identity<nn::LayerNorm<D>>{}, 8, 1e-5, true));
  check_layer<D, D>(f, "LayerNorm(8, not affine)", p, x, make(std::type_identity<nn::LayerNorm<D>>{}, 8, 1e-5, false));
  check_layer<D, D>(f, "RMSNorm(8)", p, x, make(std::type_identity<nn::RMSNorm<D>>{}, 8, 1e-6));
  for (bool causal : {false, true})
    check_layer<D, D>(f, std::string("MultiheadAttention(8, 2") + (causal ? ", causal)" : ")"), p, x,
                      make(std::type_identity<nn::MultiheadAttention<D>>{}, 8, 2, causal, true, 0.0,
                           std::optional<double>()));
  for (nn::Activation act : {nn::Activation::gelu, nn::Activation::relu, nn::Activation::silu})
    check_layer<D, D>(f, "MLP(8, 12, " + std::string(nn::to_string(act)) + ")", p, x,
                      make(std::type_identity<nn::MLP<D>>{}, 8, 12, act, true, 0.0, std::optional<double>()));
  const nn::TransformerConfig gpt{.dim = 8, .heads = 2, .hidden = 16, .layers = 2};
  const nn::TransformerConfig llama{.dim = 8, .heads = 4, .hidden = 12, .norm = nn::Norm::rms_norm,
                                    .bias = false, .activation = nn::Activation::silu};
  check_layer<D, D>(f, "TransformerBlock (layer norm, gelu)", p, x, make(std::type_identity<nn::TransformerBlock<D>>{}, gpt));
  check_layer<D, D>(f, "TransformerBlock (rms norm, silu, no bias)", p, x,
                    make(std::type_identity<nn::TransformerBlock<D>>{}, llama));
  // Dropout in training: the masks follow the seed stream, so every layout drops what one rank does.
  nn::TransformerConfig dropping = gpt;
  dropping.dropout = 0.25;
  check_layer<D, D>(f, "TransformerBlock (dropout 0.25)", p, x,
                    make(std::type_identity<nn::TransformerBlock<D>>{}, dropping), 99);
  check_layer<D, D>(f, "Dropout(0.3)", p, x, [](nn::Init&) { return std::make_unique<nn::Dropout<D>>(0.3); }, 17);
  // Mixed precision: float masters, bfloat16 compute; the gradients reach the float masters.
  check_layer<float, bfloat16>(f, "TransformerBlock<float> in bfloat16", p, x,
                               make(std::type_identity<nn::TransformerBlock<float>>{}, gpt));
}

// The block against block_by_hand on rank 0, forward and gradients, x in each layout of p.
inline void check_block_by_hand(const Placement& p, Failures& f) {
  const nn::TransformerConfig c{.dim = 8, .heads = 2, .hidden = 16, .causal = true};
  const Shape s{3, 5, 8};
  const Tensor<double> x = Tensor<double>::from_vector(s, uniform_values<double>(s.numel(), 21, -2, 2));
  Run want;
  {
    nn::Init init{rank0(), kSeed};
    nn::TransformerBlock<double> block(init, c);
    auto xg = from_host(x, rank0(), NdSbp(sbp::broadcast)).requires_grad_();
    const GlobalTensor<double> y = block_by_hand(block, xg);
    backward(sum(y * loss_weights(y)));
    want = {values(y), values(xg.grad()), {}};
    for (auto& [name, q] : block.named_parameters()) want.grads.emplace_back(name, values(q.grad()));
  }
  for (const NdSbp& nd : input_layouts(p)) {
    const std::string what = "TransformerBlock against the ops by hand, x " + nd.to_string();
    try {
      nn::Init init{p, kSeed};
      nn::TransformerBlock<double> block(init, c);
      const Run got = forward_backward(block, from_host(x, p, nd));
      if (rank() == 0) expect_same_run(f, what, got, want, tolerance<double>());
    } catch (const std::exception& e) {
      f.add(what + ": threw: " + e.what());
    }
  }
}

// Embedding: ids (4, 6) in each layout (B and splits), the table's gradient.
inline void check_embedding(const Placement& p, Failures& f) {
  const Shape s{4, 6};
  std::vector<int64_t> ids(s.numel());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + 3) % 11);
  const Tensor<int64_t> idt = Tensor<int64_t>::from_vector(s, ids);
  const auto run = [&](const Placement& on, const NdSbp& nd) {
    nn::Init init{on, kSeed};
    nn::Embedding<double> emb(init, 11, 8);
    const GlobalTensor<double> y = emb(from_host(idt, on, nd));
    backward(sum(y * loss_weights(y)));
    return Run{values(y), {}, {{"weight", values(emb.weight.grad())}}};
  };
  const Run want = run(rank0(), NdSbp(sbp::broadcast));
  const Sbp B = sbp::broadcast, S0 = sbp::split(0), S1 = sbp::split(1);
  const std::vector<NdSbp> layouts = p.mesh().ndim() == 1 ? std::vector<NdSbp>{NdSbp(B), NdSbp(S0), NdSbp(S1)}
                                                          : std::vector<NdSbp>{NdSbp({S0, S1}), NdSbp({B, S0})};
  for (const NdSbp& nd : layouts) {
    const std::string what = "Embedding(11, 8), ids " + nd.to_string();
    try {
      const Run got = run(p, nd);
      if (rank() == 0) expect_same_run(f, what, got, want, tolerance<double>());
    } catch (const std::exception& e) {
      f.add(what + ": threw: " + e.what());
    }
  }
}

// eval(): dropout is off (the block equals the same block made with dropout 0, and no seed is
// drawn); train() turns it back on (the output differs and the stream moves).
inline void check_train_eval(const Placement& p, Failures& f) {
  const Shape s{2, 4, 8};
  const Tensor<double> x = Tensor<double>::from_vector(s, uniform_values<double>(s.numel(), 41, -2, 2));
  nn::TransformerConfig c{.dim = 8, .heads = 2, .hidden = 16};
  nn::Init plain_init{p, kSeed};
  nn::TransformerBlock<double> plain(plain_init, c);
  c.dropout = 0.5;
  nn::Init init{p, kSeed};
  nn::TransformerBlock<double> block(init, c);
  const GlobalTensor<double> xg = from_host(x, p, replicated(p));
  const std::vector<double> want = values(plain(xg));
  block.eval();
  for (auto& [name, m] : block.named_modules())
    if (m->training()) f.add("eval(): module \"" + name + "\" is still training");
  manual_seed(5);
  const std::vector<double> evaluated = values(block(xg));
  if (!(seed_stream() == SeedStream{5, 0})) f.add("eval(): the forward drew seeds");
  expect_near(f, "eval() block against dropout 0", evaluated, want, tolerance<double>());
  block.train();
  if (!block.drop.training()) f.add("train(): the dropout is not training");
  const std::vector<double> trained = values(block(xg));
  if (seed_stream().position != 2) f.add("train(): the block drew " + std::to_string(seed_stream().position) + " seeds, expected 2");
  if (trained == want) f.add("train(): dropout 0.5 left the block's output unchanged");
  // The module's draw is next_seed()'s: the op with that seed gives the same values.
  nn::Dropout<double> drop(0.5);
  manual_seed(8);
  const uint64_t seed = next_seed();
  manual_seed(8);
  if (values(drop(xg)) != values(dropout(xg, 0.5, seed))) f.add("Dropout did not use next_seed()'s seed");
}

// The names and order of named_parameters(), state_dict() with a prefix, and parameters().
inline void check_names(const Placement& p, Failures& f) {
  nn::Init init{p, kSeed};
  const auto names = [](const auto& m) {
    std::vector<std::string> out;
    for (auto& [n, t] : m.named_parameters()) out.push_back(n);
    return out;
  };
  const auto expect = [&](const std::string& what, const std::vector<std::string>& got,
                          const std::vector<std::string>& want) {
    if (got == want) return;
    std::string g;
    for (const std::string& n : got) g += " " + n;
    f.add(what + ": named_parameters() gave" + g);
  };
  expect("Linear", names(nn::Linear<float>(init, 3, 4)), {"weight", "bias"});
  expect("Linear without bias", names(nn::Linear<float>(init, 3, 4, false)), {"weight"});
  expect("Embedding", names(nn::Embedding<float>(init, 5, 4)), {"weight"});
  expect("LayerNorm", names(nn::LayerNorm<float>(init, 4)), {"weight", "bias"});
  expect("LayerNorm not affine", names(nn::LayerNorm<float>(init, 4, 1e-5, false)), {});
  expect("RMSNorm", names(nn::RMSNorm<float>(init, 4)), {"weight"});
  expect("Dropout", names(nn::Dropout<float>(0.1)), {});
  expect("MLP", names(nn::MLP<float>(init, 4, 8)), {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  expect("MultiheadAttention without bias", names(nn::MultiheadAttention<float>(init, 4, 2, true, false)),
         {"q.weight", "k.weight", "v.weight", "out.weight"});
  nn::ModuleList<float, nn::TransformerBlock<float>> blocks;
  const nn::TransformerConfig c{.dim = 4, .heads = 2, .hidden = 8, .norm = nn::Norm::rms_norm, .bias = false};
  blocks.emplace_back(init, c);
  blocks.emplace_back(init, c);
  const std::vector<std::string> block = {"ln1.weight",      "attn.q.weight", "attn.k.weight",  "attn.v.weight",
                                          "attn.out.weight", "ln2.weight",    "mlp.fc1.weight", "mlp.fc2.weight"};
  std::vector<std::string> want;
  for (const std::string b : {"0.", "1."})
    for (const std::string& n : block) want.push_back(b + n);
  expect("ModuleList of 2 rms-norm blocks without bias", names(blocks), want);
  const StateDict sd = blocks.state_dict("model.");
  if (sd.size() != want.size() || !sd.contains("model.1.mlp.fc2.weight")) f.add("state_dict(\"model.\") lacks names");
  if (blocks.parameters().size() != want.size()) f.add("parameters() and named_parameters() differ in size");
  for (const auto& q : blocks.parameters())
    if (!q.requires_grad()) f.add("a parameter does not require grad");
}

// The initializations docs/modules.md states: PyTorch's uniform bound, GPT-2's normal with the
// residual projections scaled by 1 / sqrt(2 layers), ones and zeros for the norms.
inline void check_init(const Placement& p, Failures& f) {
  nn::Init init{p, kSeed};
  nn::Linear<double> lin(init, 64, 32);
  const double bound = 1 / std::sqrt(64.0);
  for (const auto& t : {lin.weight, *lin.bias}) {
    double most = 0;
    for (double v : values(t)) most = std::max(most, std::abs(v));
    if (!(most < bound && most > 0.9 * bound))
      f.add("Linear(64, 32): largest |parameter| " + std::to_string(most) + ", expected just under " + std::to_string(bound));
  }
  const nn::TransformerConfig c{.dim = 64, .heads = 4, .hidden = 128, .init_std = 0.05, .layers = 8};
  nn::TransformerBlock<double> block(init, c);
  const auto stddev = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  const std::vector<std::pair<std::string, double>> stds = {
      {"attn.q.weight", 0.05}, {"mlp.fc1.weight", 0.05}, {"attn.out.weight", 0.05 / 4}, {"mlp.fc2.weight", 0.05 / 4}};
  std::map<std::string, GlobalTensor<double>> w;
  for (auto& [name, q] : block.named_parameters()) w.emplace(name, q);
  for (auto& [name, want] : stds) {
    const double got = stddev(values(w.at(name)));  // >= 4096 draws: within 5% of std
    if (std::abs(got - want) > 0.05 * want)
      f.add("TransformerBlock init: " + name + " has std " + std::to_string(got) + ", expected " + std::to_string(want));
  }
  if (values(w.at("attn.q.bias")) != std::vector<double>(64, 0.0)) f.add("a normal-init Linear's bias is not zero");
  if (values(w.at("ln1.weight")) != std::vector<double>(64, 1.0)) f.add("LayerNorm's weight is not ones");
  if (values(w.at("ln1.bias")) != std::vector<double>(64, 0.0)) f.add("LayerNorm's bias is not zeros");
}

// Bad arguments and inputs throw spsd::Error naming the layer and the values.
inline void check_bad_input(const Placement& p, Failures& f) {
  nn::Init init{p, kSeed};
  const auto expect_error = [&](const std::string& what, const std::function<void()>& body,
                                const std::vector<std::string>& words) {
    try {
      body();
      f.add(what + ": no error");
    } catch (const Error& e) {
      for (const std::string& w : words)
        if (std::string(e.what()).find(w) == std::string::npos)
          f.add(what + ": the error \"" + e.what() + "\" does not say \"" + w + "\"");
    }
  };
  const GlobalTensor<double> x = zeros<double>({2, 3, 8}, p, replicated(p));
  expect_error("Linear, wrong input features", [&] { nn::Linear<double>(init, 6, 4)(x); },
               {"nn::Linear", "6", "(2, 3, 8)"});
  expect_error("Linear, zero features", [&] { nn::Linear<double>(init, 0, 4); }, {"nn::Linear", "in 0"});
  expect_error("MultiheadAttention, heads not dividing dim", [&] { nn::MultiheadAttention<double>(init, 8, 3); },
               {"nn::MultiheadAttention", "dim 8", "heads 3"});
  expect_error("MultiheadAttention, wrong dim", [&] { nn::MultiheadAttention<double>(init, 4, 2)(x); },
               {"nn::MultiheadAttention", "4", "(2, 3, 8)"});
  expect_error("MultiheadAttention, 2-d input",
               [&] { nn::MultiheadAttention<double>(init, 8, 2)(zeros<double>({3, 8}, p, replicated(p))); },
               {"nn::MultiheadAttention", "(3, 8)"});
  expect_error("LayerNorm, wrong dim", [&] { nn::LayerNorm<double>(init, 6)(x); }, {"nn::LayerNorm", "6", "(2, 3, 8)"});
  expect_error("RMSNorm, wrong dim", [&] { nn::RMSNorm<double>(init, 5)(x); }, {"nn::RMSNorm", "5", "(2, 3, 8)"});
  expect_error("LayerNorm, negative eps", [&] { nn::LayerNorm<double>(init, 8, -1.0); }, {"nn::LayerNorm", "eps -1"});
  expect_error("Dropout, p = 1", [&] { nn::Dropout<double>(1.0); }, {"nn::Dropout", "1"});
  expect_error("Embedding, zero vocabulary", [&] { nn::Embedding<double>(init, 0, 4); }, {"nn::Embedding", "vocab 0"});
  expect_error("TransformerBlock, heads not dividing dim",
               [&] { nn::TransformerBlock<double>(init, {.dim = 8, .heads = 3, .hidden = 16}); },
               {"nn::MultiheadAttention", "dim 8", "heads 3"});
  expect_error("TransformerBlock, no hidden width",
               [&] { nn::TransformerBlock<double>(init, {.dim = 8, .heads = 2, .hidden = 0}); },
               {"nn::TransformerBlock", "hidden 0"});
  expect_error("TransformerBlock, wrong input dim",
               [&] {
                 nn::TransformerBlock<double>(init, {.dim = 4, .heads = 2, .hidden = 8})(x);
               },
               {"nn::LayerNorm", "4", "(2, 3, 8)"});
}

// Collective over the world: a two-block model made on `from` (seed A, its matrices re-laid out
// split on the last mesh axis) saved to dir, then loaded into one made on `to` (seed B): its
// parameters must equal a fresh seed-A model's on `to`, name by name.
inline void check_state_dict_round_trip(const Placement& from, const Placement& to, const std::string& dir,
                                        Failures& f) {
  using Model = nn::ModuleList<double, nn::TransformerBlock<double>>;
  const nn::TransformerConfig c{.dim = 8, .heads = 2, .hidden = 16};
  const auto build = [&](Model& m, const Placement& on, uint64_t seed) {
    nn::Init init{on, seed};
    m.emplace_back(init, c);
    m.emplace_back(init, c);
  };
  {
    Model saved;
    build(saved, from, 1);
    std::vector<Sbp> split(from.mesh().ndim(), sbp::broadcast);
    split.back() = sbp::split(1);
    for (auto& [name, slot] : saved.parameter_slots())
      if (slot->shape().ndim() == 2) *slot = slot->to_global(NdSbp(split)).detach().requires_grad_();
    save_checkpoint(saved.state_dict("model."), dir);
  }
  Model loaded, want;
  build(loaded, to, 2);
  build(want, to, 1);
  const auto lp = loaded.named_parameters(), wp = want.named_parameters();
  const bool member = to.contains(rank());  // values() is the tensor on the ranks of `to` only
  if (member && values(lp[2].second) == values(wp[2].second))
    f.add("round trip: seeds 1 and 2 made the same " + lp[2].first);
  StateDict sd = loaded.state_dict("model.");
  load_checkpoint(dir, sd);
  for (size_t i = 0; i < lp.size(); ++i)
    if (values(lp[i].second) != values(wp[i].second) && member)
      f.add("round trip " + from.mesh().to_string() + " -> " + to.mesh().to_string() + ": " + lp[i].first +
            " differs after load_checkpoint");
}

// Pinned boundary layouts on a 1-d mesh, a row-parallel Linear as Megatron's sequence
// parallelism runs it: the weight split on its input axis (S(0)), x split on its features, the
// output pinned to S(1) (the sequence) and the input to S(2). The matmul's P(sum) is
// reduce-scattered into S(1) before the bias is added: the result is S(1) and equals one rank's.
inline void check_boundaries(const Placement& p, Failures& f) {
  if (p.mesh().ndim() != 1) return;
  const Shape s{2, 8, 8};
  const Tensor<double> x = Tensor<double>::from_vector(s, uniform_values<double>(s.numel(), 51, -2, 2));
  const auto run = [&](const Placement& on, bool pinned) {
    nn::Init init{on, kSeed};
    nn::Linear<double> lin(init, 8, 6);
    if (pinned) {
      lin.weight = lin.weight.to_global(NdSbp(sbp::split(0))).detach().requires_grad_();
      lin.set_boundary_layouts({{sbp::split(2)}, {sbp::split(1)}});
    }
    const GlobalTensor<double> y = lin(from_host(x, on, NdSbp(pinned ? sbp::split(0) : sbp::broadcast)));
    if (pinned && !(y.nd_sbp() == NdSbp(sbp::split(1))))
      f.add("Linear with output boundary S(1): the result is " + y.nd_sbp().to_string());
    backward(sum(y * loss_weights(y)));
    return Run{values(y), {}, {{"weight", values(lin.weight.grad())}, {"bias", values(lin.bias->grad())}}};
  };
  const Run want = run(rank0(), false), got = run(p, true);
  if (rank() == 0) expect_same_run(f, "row-parallel Linear with pinned boundaries", got, want, tolerance<double>());
}

// The whole suite on p (collective over the world; rank 0 of the world in p).
inline void run_nn_suite(const Placement& p, Failures& f) {
  check_layers(p, f);
  check_block_by_hand(p, f);
  check_embedding(p, f);
  check_train_eval(p, f);
  check_boundaries(p, f);
}

}  // namespace spsd_test::nn_suite
