#pragma once
// The model of examples/07_train_mlp (and of its tests and benchmarks): 784 -> hidden -> 10 with
// relu, two nn::Linear layers written as for one device. Parallelism is a plan (mlp_plan)
// applied to the built model, nn::parallelize(model, plan), and the batches given in
// input_layout(plan); every op then picks its signature and backward follows.
//   data     x S(0), weights B: gradients come out P(sum), and the optimizer's boxing to B is
//            data parallelism's all-reduce.
//   tensor   Megatron: fc1 split on its outputs, fc2 on its inputs, so the hidden units are
//            split and the P(sum) logits are reduced once.
//   2d       a (world/2, 2) mesh: data parallel on mesh axis 0, tensor on axis 1.
#include <cmath>
#include <concepts>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

#include "train/plans.hpp"

namespace examples {

// The plan of --parallel `mode`; an unknown mode is an Error naming it.
inline spsd::nn::Plan mlp_plan(const std::string& mode) {
  using namespace spsd;
  const nn::AxisPlan tensor = nn::AxisPlan{.name = "tensor"}
                                  .with_parameter("fc1.weight", sbp::split(1))
                                  .with_parameter("fc1.bias", sbp::split(0))
                                  .with_parameter("fc2.weight", sbp::split(0));
  if (mode == "data") return nn::data_parallel();
  if (mode == "tensor") return tensor;
  if (mode == "2d") return {nn::data_parallel(), tensor};
  throw Error("examples::mlp_plan: --parallel must be data, tensor or 2d, got \"" + mode + "\"");
}

// Where mlp_plan(mode) runs: the ranks as a line, or a (ranks/2, 2) mesh for 2d.
inline spsd::Placement mlp_placement(const std::string& mode, const std::vector<int64_t>& ranks,
                                     const std::string& device = "cpu") {
  return plan_placement("examples::mlp_placement", mlp_plan(mode), ranks, device);
}
inline spsd::Placement mlp_placement(const std::string& mode, int world, const std::string& device = "cpu") {
  return mlp_placement(mode, first_ranks(world), device);
}

// T: the parameters' type. The forward pass computes in the type of its input: float32
// parameters run a bfloat16 input in bfloat16 (mixed precision), each weight cast on use, so
// the gradients flow back through the casts into the float32 parameters (docs/precision.md).
template <std::floating_point T>
class Mlp : public spsd::nn::Module<T> {
 public:
  spsd::nn::Linear<T> fc1, fc2;

  // He initialization (weights normal(0, sqrt(2 / in)), biases zero) from init's placement and seeds.
  Mlp(spsd::nn::Init init, int64_t in, int64_t hidden, int64_t out)
      : fc1(init, in, hidden, true, std::sqrt(2.0 / static_cast<double>(in))),
        fc2(init, hidden, out, true, std::sqrt(2.0 / static_cast<double>(hidden))) {
    this->register_module("fc1", fc1);
    this->register_module("fc2", fc2);
  }
  template <spsd::FloatingElement C>
  spsd::GlobalTensor<C> operator()(const spsd::GlobalTensor<C>& x) const { return fc2(spsd::relu(fc1(x))); }
};

}  // namespace examples
