#pragma once
// Parallelization plans (nn/plan.hpp, nn/parallelize.hpp) on a small transformer, shared by
// test/sim/test_plans.cpp (simulated meshes 1, 2, 4, 2x2) and test/mpi/test_plans.cpp (the
// world's mesh, 2x2 with -np 4): a plan's training run (loss of each step, gradients of the
// first) against the same model unparallelized, and the bytes of sequence parallelism against
// Megatron-SP's analytic count.
//
// Double precision: the layouts sum the same terms in other orders, so the results agree to
// rounding (rel 1e-9 + abs 1e-12), and any wrong boxing or partial shows as an O(1) difference.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <spsd/nn/parallelize.hpp>
#include <spsd/nn/transformer_block.hpp>
#include <spsd/spsd.hpp>

#include "failures.hpp"

namespace spsd_test {

namespace plan_model {

// A stack of nn::TransformerBlocks (layer norms, attention, gelu MLP, dropout 0.1), the model
// code unchanged by any plan.
struct Model : spsd::nn::Module<double> {
  spsd::nn::ModuleList<double, spsd::nn::TransformerBlock<double>> blocks;
  Model(spsd::nn::Init init, int64_t layers, int64_t dim, int64_t heads) {
    const spsd::nn::TransformerConfig config{
        .dim = dim, .heads = heads, .hidden = 2 * dim, .dropout = 0.1, .init_std = 0, .layers = layers};
    for (int64_t i = 0; i < layers; ++i) blocks.emplace_back(init, config);
    register_module("blocks", blocks);
  }
  spsd::GlobalTensor<double> operator()(spsd::GlobalTensor<double> x) const {
    for (const auto& b : blocks) x = b(x);
    return x;
  }
};

}  // namespace plan_model

// The model's size: (batch, seq, dim) activations, heads of dim / heads, layers blocks. Batch
// and seq divisible by 2 and 4, heads by 4: every mesh here splits them evenly, so the measured
// bytes are the textbook ones.
struct PlanCase {
  int64_t batch = 4, seq = 8, dim = 16, heads = 4, layers = 2;
  int steps = 3;
};

// A training run's observables: the loss of each step, each parameter's gradient of step 0.
struct PlanRun {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> grads;
};

// The loss of the model's output y (batch, seq, dim) read as logits over dim classes: the
// cross-entropy against labels. Its backward gives the gradient in y's layout (one fused node),
// so a step's bytes are the model's.
inline spsd::GlobalTensor<double> plan_loss(const spsd::GlobalTensor<double>& y, const spsd::GlobalTensor<int64_t>& labels) {
  return spsd::cross_entropy(y, labels);
}

// Inputs (batch, seq, dim) and labels (batch, seq) of a step, in input_layout(plan): randn and
// the argmax of another randn, layout-independent values.
struct PlanBatch {
  spsd::GlobalTensor<double> x;
  spsd::GlobalTensor<int64_t> labels;
};
inline PlanBatch plan_batch(const spsd::Placement& placement, const spsd::nn::Plan& plan, const PlanCase& c) {
  const spsd::NdSbp data = spsd::nn::input_layout(plan);
  return {spsd::randn<double>({c.batch, c.seq, c.dim}, placement, data, 1),
          spsd::argmax(spsd::randn<double>({c.batch, c.seq, c.dim}, placement, data, 2), -1)};
}

// The model on placement, laid out by plan, trained for c.steps steps of Adam on plan_loss.
inline PlanRun run_plan(const spsd::Placement& placement, const spsd::nn::Plan& plan, const PlanCase& c) {
  using namespace spsd;
  plan_model::Model model(nn::Init{placement, 1000}, c.layers, c.dim, c.heads);
  nn::parallelize(model, plan);
  manual_seed(7);  // the dropout masks: the same draws in every run
  Adam<double> opt(model.parameters(), AdamOptions{.lr = 1e-2});
  const PlanBatch batch = plan_batch(placement, plan, c);
  PlanRun run;
  for (int step = 0; step < c.steps; ++step) {
    opt.zero_grad();
    const GlobalTensor<double> loss = plan_loss(model(batch.x), batch.labels);
    backward(loss);
    run.losses.push_back(loss.item());
    if (step == 0)
      for (auto& [name, p] : model.named_parameters()) run.grads[name] = p.grad().full().to_vector();
    opt.step();
  }
  return run;
}

// got against want: the same losses and gradients to rounding.
inline void expect_same_run(Failures& f, const std::string& what, const PlanRun& got, const PlanRun& want) {
  const auto close = [](double a, double b) { return std::abs(a - b) <= 1e-12 + 1e-9 * std::abs(b); };
  if (got.losses.size() != want.losses.size()) return f.add(what + ": step counts differ");
  for (size_t i = 0; i < got.losses.size(); ++i)
    if (!close(got.losses[i], want.losses[i]))
      f.add(what + ": loss of step " + std::to_string(i) + " " + std::to_string(got.losses[i]) + ", expected " +
            std::to_string(want.losses[i]));
  if (got.grads.size() != want.grads.size()) return f.add(what + ": parameter counts differ");
  for (auto& [name, g] : want.grads) {
    const auto it = got.grads.find(name);
    if (it == got.grads.end()) {
      f.add(what + ": no gradient of " + name);
      continue;
    }
    if (it->second.size() != g.size()) {
      f.add(what + ": gradient of " + name + " has " + std::to_string(it->second.size()) + " elements");
      continue;
    }
    for (size_t i = 0; i < g.size(); ++i)
      if (!close(it->second[i], g[i])) {
        f.add(what + ": gradient of " + name + " element " + std::to_string(i) + " " + std::to_string(it->second[i]) +
              ", expected " + std::to_string(g[i]));
        break;
      }
  }
}

// What Megatron-SP sends per rank in one forward and backward of `layers` blocks: per block, an
// all-gather before each column-parallel pair (attention's q/k/v, the MLP's fc1) and a
// reduce-scatter after each row-parallel Linear (attn.out, mlp.fc2), mirrored in backward (the
// all-gathers' backward reduce-scatters, the reduce-scatters' all-gathers): 4 all-gathers and 4
// reduce-scatters of the group's (b, s, h) activation, each sending (t - 1) / t of it:
//   bytes = layers * 8 * (t - 1) / t * b * s * h * sizeof(element)
// with b the batch of one sequence-parallel group (batch / data-parallel ranks).
inline int64_t megatron_sp_bytes(int64_t layers, int64_t t, int64_t group_batch, int64_t seq, int64_t dim,
                                 int64_t element_size) {
  return layers * 8 * (t - 1) * group_batch * seq * dim * element_size / t;
}

// One forward and backward of the model under plan, the gradients left as backward gives them
// (reduce_gradients_early off: the replicated parameters' all-reduce belongs to the optimizer,
// as Megatron's does): this rank's counters over them.
inline spsd::CommStats fwd_bwd_stats(const spsd::Placement& placement, const spsd::nn::Plan& plan, const PlanCase& c) {
  using namespace spsd;
  plan_model::Model model(nn::Init{placement, 1000}, c.layers, c.dim, c.heads);
  nn::parallelize(model, plan);
  const PlanBatch batch = plan_batch(placement, plan, c);
  reset_comm_stats();
  backward(plan_loss(model(batch.x), batch.labels), BackwardOptions{.reduce_gradients_early = false});
  return comm_stats();
}

// Sequence parallelism on mesh axis `axis` of placement moves exactly Megatron-SP's bytes, in 4
// all-gathers and 4 reduce-scatters a block and nothing else. Tensor parallelism moves at most
// as many as Megatron's (the same count, in 4 all-reduces of 2 (t - 1) / t of the activation a
// block), with the forward's 2 all-reduces a block at the pinned outputs: in backward the
// resolver splits each input gradient's all-reduce into a reduce-scatter and a later
// all-gather, and skips the all-gather where nothing needs the gradient whole.
inline void check_megatron_bytes(Failures& f, const spsd::Placement& placement, const spsd::nn::Plan& plan,
                                 size_t axis, const PlanCase& c) {
  using spsd::CollectiveKind;
  const spsd::Shape& mesh = placement.mesh();
  const int64_t t = mesh[axis], groups = placement.mesh().numel() / t;
  const bool sequence = plan.axes[axis].name == "sequence";
  const spsd::CommStats s = fwd_bwd_stats(placement, plan, c);
  const int64_t want = megatron_sp_bytes(c.layers, t, c.batch / groups, c.seq, c.dim, sizeof(double));
  const std::string where = plan.axes[axis].name + " parallel on mesh " + mesh.to_string() + " axis " +
                            std::to_string(axis) + ": " + s.to_string() + ", Megatron sends " + std::to_string(want) + " B";
  if (t == 1) {  // the collectives are called on one member, and move nothing
    if (s.bytes_sent != 0) f.add(where);
    return;
  }
  const int64_t n = 4 * c.layers;
  const int64_t ag = s.calls_of(CollectiveKind::kAllGather), rs = s.calls_of(CollectiveKind::kReduceScatter),
                ar = s.calls_of(CollectiveKind::kAllReduce);
  if (sequence && (s.bytes_sent != want || s.bytes_received != want || ag != n || rs != n || ar != 0))
    f.add(where + " in " + std::to_string(n) + " all-gathers and reduce-scatters");
  if (!sequence && (s.bytes_sent > want || s.bytes_received > want || ar != n / 2 || s.bytes_sent == 0))
    f.add(where + ", at most, with " + std::to_string(n / 2) + " all-reduces");
}

}  // namespace spsd_test
