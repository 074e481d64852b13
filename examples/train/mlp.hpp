#pragma once
// The model of examples/07_train_mlp (and its tests and benchmark): Linear layers and a
// two-layer MLP written as for one device. Parallelism is only the layouts the parameters and
// the data start in (MlpLayouts); every op then picks its signature and backward follows.
//
// Written here with the global ops alone, to show that plain single-device code is enough: a
// layer is ten lines over them. The library's module system (spsd/nn, docs/modules.md) packages
// such layers with parameter names, initializers, state dicts and train/eval.
#include <cmath>
#include <spsd/spsd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples {

// Where each tensor of the MLP starts. data: x S(0), weights B. tensor (Megatron): W1 split on
// its output axis, W2 on its input axis, so h is split on its features and x W1 -> relu -> h W2
// needs one reduction of the P(sum) logits. 2d: a (world/2, 2) mesh, data parallel on mesh axis
// 0 and tensor parallel on mesh axis 1.
struct MlpLayouts {
  spsd::Placement placement;
  spsd::NdSbp x, labels, w1, b1, w2, b2;
};

// device: "cpu" or "cuda", the placement's device type.
inline MlpLayouts mlp_layouts(const std::string& mode, const std::vector<int64_t>& ranks,
                              const std::string& device = "cpu") {
  using namespace spsd;
  const int64_t world = static_cast<int64_t>(ranks.size());
  const Sbp B = sbp::broadcast, S0 = sbp::split(0), S1 = sbp::split(1);
  if (mode == "data") return {Placement(device, ranks), S0, S0, B, B, B, B};
  if (mode == "tensor") return {Placement(device, ranks), B, B, S1, S0, S0, B};
  if (mode == "2d") {
    SPSD_CHECK(world % 2 == 0, "mlp_layouts", "--parallel 2d needs an even number of ranks, got ", world);
    return {Placement(device, ranks, Shape{world / 2, 2}), {S0, B}, {S0, B}, {B, S1}, {B, S0}, {B, S0}, {B, B}};
  }
  throw Error("mlp_layouts: --parallel must be data, tensor or 2d, got \"" + mode + "\"");
}

// On ranks 0 .. world-1.
inline MlpLayouts mlp_layouts(const std::string& mode, int world, const std::string& device = "cpu") {
  std::vector<int64_t> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  return mlp_layouts(mode, ranks, device);
}

// T: the parameters' type. The forward pass computes in the type of its input: float32
// parameters run a bfloat16 input in bfloat16 (mixed precision), each weight cast on use, so
// the gradients flow back through the casts into the float32 parameters (docs/precision.md).
template <std::floating_point T>
struct Linear {
  spsd::GlobalTensor<T> weight, bias;  // (in, out), (out)

  // He initialization from layout-independent randn: the same values in any layout.
  Linear(int64_t in, int64_t out, const spsd::Placement& p, const spsd::NdSbp& w, const spsd::NdSbp& b, uint64_t seed)
      : weight(spsd::randn<T>({in, out}, p, w, seed) * static_cast<T>(std::sqrt(2.0 / static_cast<double>(in)))),
        bias(spsd::zeros<T>({out}, p, b)) {
    weight.requires_grad_();
    bias.requires_grad_();
  }
  template <spsd::FloatingElement C>
  spsd::GlobalTensor<C> operator()(const spsd::GlobalTensor<C>& x) const {
    return spsd::matmul(x, spsd::cast<C>(weight)) + spsd::cast<C>(bias);
  }
};

template <std::floating_point T>
struct Mlp {
  Linear<T> fc1, fc2;
  Mlp(int64_t in, int64_t hidden, int64_t out, const MlpLayouts& l, uint64_t seed)
      : fc1(in, hidden, l.placement, l.w1, l.b1, seed), fc2(hidden, out, l.placement, l.w2, l.b2, seed + 1) {}
  template <spsd::FloatingElement C>
  spsd::GlobalTensor<C> operator()(const spsd::GlobalTensor<C>& x) const { return fc2(spsd::relu(fc1(x))); }
  std::vector<spsd::GlobalTensor<T>> parameters() const { return {fc1.weight, fc1.bias, fc2.weight, fc2.bias}; }
};

}  // namespace examples
