#include "training_checks.hpp"

#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "train/mlp.hpp"

namespace spsd_test {

namespace {

using namespace spsd;

NdSbp all_b(const Placement& p) { return NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)); }

// The world as a line, and on 4 ranks also as a 2x2 mesh.
std::vector<Placement> world_placements() {
  const int64_t n = world_size();
  std::vector<int64_t> ranks(n);
  for (int64_t i = 0; i < n; ++i) ranks[i] = i;
  std::vector<Placement> out = {Placement("cpu", ranks)};
  if (n == 4) out.emplace_back("cpu", ranks, Shape{2, 2});
  return out;
}

// Layouts of a 2-d parameter on p: B and the splits of either axis, on a 2-d mesh their products.
std::vector<NdSbp> parameter_layouts(const Placement& p) {
  const Sbp B = sbp::broadcast, S0 = sbp::split(0), S1 = sbp::split(1);
  if (p.mesh().ndim() == 1) return {NdSbp(B), NdSbp(S0), NdSbp(S1)};
  return {NdSbp{B, B}, NdSbp{S0, B}, NdSbp{B, S1}, NdSbp{S0, S1}, NdSbp{S1, S0}};
}

// Split along axis 0 on the first mesh axis, B on the others: a data-parallel batch.
NdSbp batch_layout(const Placement& p) {
  std::vector<Sbp> axes(p.mesh().ndim(), sbp::broadcast);
  axes[0] = sbp::split(0);
  return NdSbp(axes);
}

template <class T>
GlobalTensor<T> host(const Shape& shape, const std::vector<T>& values, const Placement& p, const NdSbp& layout) {
  return from_host(Tensor<T>::from_vector(shape, values), p, layout);
}

// Values that are all different, of both signs, none zero.
std::vector<float> pattern(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i * 7 + seed)) * static_cast<float>(seed + 1);
  return v;
}

void expect_close(Failures& f, const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                  double rel) {
  if (got.size() != want.size()) return f.add(what + ": " + std::to_string(got.size()) + " values, expected " +
                                              std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rel * std::max(1.0f, std::fabs(want[i])))) {
      return f.add(what + ": element " + std::to_string(i) + " is " + show(got[i]) + ", expected " + show(want[i]));
    }
}

struct Counter {
  Failures& f;
  int cases = 0;
  // Runs one case; an spsd::Error it did not expect is a failure (thrown alike on every rank).
  void run(const std::string& name, const std::function<void()>& body) {
    ++cases;
    try {
      body();
    } catch (const std::exception& e) {
      f.add(name + " on rank " + std::to_string(rank()) + ": threw " + e.what());
    }
  }
};

// ---- a second backward through a graph ----
void backward_twice(Counter& c, const Placement& p) {
  const auto x = randn<float>({6, 4}, p, batch_layout(p), 1);
  for (const NdSbp& l : parameter_layouts(p)) {
    const std::string in = " (w " + l.to_string() + " on " + p.to_string() + ")";
    c.run("backward twice" + in, [&] {
      auto w = randn<float>({4, 3}, p, l, 2).requires_grad_();
      const auto y = matmul(x, w);
      const GlobalTensor<float> loss = sum(y * y);
      backward(loss);
      const std::vector<float> once = w.grad().full().to_vector();
      expect_error(c.f, "a second backward through the same graph" + in, [&] { backward(loss); },
                   {"backward", "freed by an earlier backward", "retain_graph = true"});
      expect_close(c.f, "the gradient after a refused second backward" + in, w.grad().full().to_vector(), once, 0);
      // A new graph that reaches the freed one is refused too (torch: the same).
      expect_error(c.f, "a backward through a freed part of a graph" + in, [&] { backward(sum(y * 2.0f)); },
                   {"backward", "freed by an earlier backward"});
      // retain_graph: a second backward runs and adds the same gradient again.
      w.zero_grad();
      const auto y2 = matmul(x, w);
      const GlobalTensor<float> again = sum(y2 * y2);
      backward(again, BackwardOptions{.retain_graph = true});
      backward(again);
      std::vector<float> twice = once;
      for (float& v : twice) v *= 2;
      expect_close(c.f, "two backwards with retain_graph" + in, w.grad().full().to_vector(), twice, 0);
      expect_error(c.f, "a third backward, after one without retain_graph" + in, [&] { backward(again); },
                   {"backward", "freed by an earlier backward"});
    });
  }
}

// ---- a saved tensor written in place between the forward pass and backward ----
void modified_saved_tensors(Counter& c, const Placement& p) {
  const auto x = randn<float>({6, 4}, p, batch_layout(p), 1);
  for (const NdSbp& l : parameter_layouts(p)) {
    const std::string in = " (w " + l.to_string() + " on " + p.to_string() + ")";
    c.run("an optimizer step between forward and backward" + in, [&] {
      auto w = randn<float>({4, 3}, p, l, 3).requires_grad_();
      SGD<float> sgd({w}, {.lr = 0.1});
      backward(sum(matmul(x, w)));  // a gradient to step with, from a graph of its own
      const GlobalTensor<float> loss = sum(matmul(x, w));
      sgd.step();
      expect_error(c.f, "backward after an optimizer step" + in, [&] { backward(loss); },
                   {"backward", "input 1 of matmul", "modified in place", "is at version 1, it was saved at version 0"});
      // Made again after the step, the graph is fine.
      backward(sum(matmul(x, w)));
    });
    c.run("a copy_ into a saved tensor" + in, [&] {
      auto w = randn<float>({4, 3}, p, l, 4).requires_grad_();
      const GlobalTensor<float> loss = sum(exp(w));
      w.copy_(zeros<float>({4, 3}, p, all_b(p)));
      expect_error(c.f, "backward after copy_" + in, [&] { backward(loss); },
                   {"backward", "input 0 of exp", "modified in place", "copy_"});
    });
  }
  // The tensor lives on rank 0 only, the loss on every rank: the other ranks cannot see its
  // version, and must throw too. (A graph wholly on rank 0 leaves the others uninvolved.)
  if (world_size() < 2 || p.mesh().ndim() > 1) return;
  c.run("a saved tensor written on a placement without some ranks", [&] {
    const Placement first("cpu", {0});
    auto w = randn<float>({3}, first, sbp::broadcast, 5).requires_grad_();
    const GlobalTensor<float> loss = sum(exp(w).to_global(p, sbp::broadcast));
    w.copy_(ones<float>({3}, first, sbp::broadcast));
    expect_error(c.f, "backward after copy_ into a tensor of rank 0 only", [&] { backward(loss); },
                 {"modified in place", "input 0 of exp"});
  });
}

// ---- an optimizer made before nn::parallelize replaced the parameters ----
void replaced_parameters(Counter& c, const Placement& p) {
  c.run("an optimizer made before nn::parallelize on " + p.to_string(), [&] {
    examples::Mlp<float> model({p, 7}, 8, 6, 4);
    SGD<float> early(model.named_parameters(), {.lr = 0.1});
    Adam<float> early_adam(model.parameters(), {});
    nn::parallelize(model, examples::mlp_plan(p.mesh().ndim() == 1 ? "tensor" : "2d"));
    const auto x = randn<float>({4, 8}, p, batch_layout(p), 1);
    backward(sum(model(x)));
    expect_error(c.f, "zero_grad of an optimizer made before nn::parallelize", [&] { early.zero_grad(); },
                 {"SGD.zero_grad", "parameter 0 \"fc1.weight\"", "replaced by nn::parallelize",
                  "make the optimizer after nn::parallelize"});
    expect_error(c.f, "step of an optimizer made before nn::parallelize", [&] { early_adam.step(); },
                 {"Adam.step", "parameter 0 \"0\"", "replaced by nn::parallelize"});
    SGD<float> after(model.named_parameters(), {.lr = 0.1});
    after.step();
  });
}

// ---- undefined tensors ----
void undefined_tensors(Counter& c, const Placement& p) {
  c.run("GlobalTensor(): undefined on " + p.to_string(), [&] {
    GlobalTensor<float> u;
    if (u.defined()) c.f.add("a default-constructed GlobalTensor is defined");
    if (u.requires_grad() || u.has_grad()) c.f.add("an undefined tensor requires grad or has one");
    if (u.describe() != "an undefined tensor") c.f.add("describe() of an undefined tensor: " + u.describe());
    const auto x = ones<float>({2, 3}, p, all_b(p));
    expect_error(c.f, "shape() of an undefined tensor", [&] { (void)u.shape(); },
                 {"GlobalTensor::shape", "undefined", "GlobalTensor<float32>"});
    expect_error(c.f, "relu of an undefined tensor", [&] { relu(u); }, {"relu: input 0 is undefined"});
    expect_error(c.f, "add with an undefined tensor", [&] { add(x, u); }, {"add: input 1 is undefined"});
    expect_error(c.f, "to_global of an undefined tensor", [&] { u.to_global(all_b(p)); }, {"to_global", "undefined"});
    expect_error(c.f, "copy_ from an undefined tensor", [&] { GlobalTensor<float>(x).copy_(u); }, {"copy_ (src)", "undefined"});
    expect_error(c.f, "item of an undefined tensor", [&] { (void)u.item(); }, {"GlobalTensor::item", "undefined"});
    std::vector<GlobalTensor<float>> slots(3);
    slots[1] = x;
    if (slots[0].defined() || !slots[1].defined()) c.f.add("a vector of undefined tensors, one assigned: wrong defined()");
    expect_close(c.f, "an assigned slot", slots[1].full().to_vector(), std::vector<float>(6, 1.0f), 0);
  });
}

// ---- learning rates and schedulers ----
void check_lrs(Failures& f, const std::string& what, const LRScheduler& s, const OptimizerBase& o,
               const std::function<double(int64_t)>& want) {
  const double got = o.lr(), expected = want(s.last_step());
  if (!(std::fabs(got - expected) <= 1e-12 * std::max(1.0, std::fabs(expected))))
    f.add(what + " at step " + std::to_string(s.last_step()) + ": lr " + show(got) + ", expected " + show(expected));
}

void learning_rates(Counter& c, const Placement& p) {
  c.run("lr and set_lr on " + p.to_string(), [&] {
    auto w = ones<float>({4}, p, all_b(p)).requires_grad_();
    SGD<float> sgd({w}, {.lr = 0.5});
    if (sgd.lr() != 0.5) c.f.add("SGD::lr() is not the options' lr");
    sgd.set_lr(0.25);
    backward(sum(w));
    sgd.step();
    expect_close(c.f, "a step with the learning rate set_lr gave", w.full().to_vector(), std::vector<float>(4, 0.75f), 0);
    expect_error(c.f, "set_lr(-1)", [&] { sgd.set_lr(-1); }, {"SGD.set_lr", "finite and >= 0", "-1"});
    expect_error(c.f, "set_lr(NaN)", [&] { sgd.set_lr(std::numeric_limits<double>::quiet_NaN()); },
                 {"SGD.set_lr", "nan"});
  });
  c.run("schedulers on " + p.to_string(), [&] {
    auto w = ones<float>({2}, p, all_b(p)).requires_grad_();
    Adam<float> a1({w}, {.lr = 0.1}), a2({w}, {.lr = 0.1}), a3({w}, {.lr = 0.1}), a4({w}, {.lr = 0.1});
    LinearWarmup warmup(a1, {.warmup_steps = 4});
    CosineWithWarmup cosine(a2, {.warmup_steps = 2, .total_steps = 10, .min_factor = 0.1});
    StepDecay decay(a3, {.step_size = 3, .gamma = 0.5});
    LambdaLR lambda(a4, [](int64_t s) { return 1.0 / static_cast<double>(1 + s); });
    for (int s = 0; s < 14; ++s) {
      check_lrs(c.f, "LinearWarmup", warmup, a1, [](int64_t t) { return 0.1 * std::min<double>(t, 4) / 4; });
      check_lrs(c.f, "CosineWithWarmup", cosine, a2, [](int64_t t) {
        if (t < 2) return 0.1 * t / 2;
        const double progress = std::min(1.0, (t - 2) / 8.0);
        return 0.1 * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * progress)));
      });
      check_lrs(c.f, "StepDecay", decay, a3, [](int64_t t) { return 0.1 * std::pow(0.5, static_cast<double>(t / 3)); });
      check_lrs(c.f, "LambdaLR", lambda, a4, [](int64_t t) { return 0.1 / static_cast<double>(1 + t); });
      for (LRScheduler* s : std::initializer_list<LRScheduler*>{&warmup, &cosine, &decay, &lambda}) s->step();
    }
    // The step count is state: a new scheduler continues where a saved one stood.
    const StateDict sd = cosine.state_dict("sched.");
    Adam<float> a5({w}, {.lr = 0.1});
    CosineWithWarmup resumed(a5, {.warmup_steps = 2, .total_steps = 10, .min_factor = 0.1});
    resumed.load_state_dict(sd, "sched.");
    if (resumed.last_step() != 14 || a5.lr() != a2.lr())
      c.f.add("a scheduler loaded from a state dict is at step " + std::to_string(resumed.last_step()) + " with lr " +
              show(a5.lr()) + ", expected 14 and " + show(a2.lr()));
    expect_error(c.f, "LambdaLR with a negative factor", [&] { LambdaLR bad(a5, [](int64_t) { return -1.0; }); },
                 {"LambdaLR", "the factor at step 0 is -1", "finite and >= 0"});
    expect_error(c.f, "CosineWithWarmup with total_steps <= warmup_steps",
                 [&] { CosineWithWarmup bad(a5, {.warmup_steps = 5, .total_steps = 5}); },
                 {"CosineWithWarmup", "total_steps (5) must be greater than warmup_steps (5)"});
  });
}

// ---- gradient clipping against one process's norms ----
struct ClipCase {
  std::vector<GlobalTensor<float>> params;
  std::vector<std::vector<float>> grads;  // the whole gradients, as one process computes them
  int64_t placements = 0;
};

// Parameters of several layouts (and, on 2+ ranks, on sub-placements) whose gradients are known:
// loss = sum(w * c) gives w the gradient c; a B weight under a split batch gets a P(sum) one.
ClipCase clip_case(const Placement& p) {
  ClipCase k;
  int seed = 0;
  auto add = [&](const Placement& on, const NdSbp& layout) {
    const std::vector<float> c = pattern(12, ++seed);
    auto w = zeros<float>({4, 3}, on, layout).requires_grad_();
    backward(sum(w * host<float>({4, 3}, c, on, all_b(on))));
    k.params.push_back(w);
    k.grads.push_back(c);
  };
  for (const NdSbp& l : parameter_layouts(p)) add(p, l);
  k.placements = 1;
  // A partial gradient: x^T g summed over the batch's pieces (reduced late).
  const std::vector<float> xs = pattern(24, 9);
  auto w = zeros<float>({4, 3}, p, all_b(p)).requires_grad_();
  backward(sum(matmul(host<float>({6, 4}, xs, p, batch_layout(p)), w)), BackwardOptions{.reduce_gradients_early = false});
  std::vector<float> g(12, 0.0f);
  for (int i = 0; i < 6; ++i)
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 3; ++b) g[a * 3 + b] += xs[i * 4 + a];
  k.params.push_back(w);
  k.grads.push_back(g);
  if (world_size() >= 2) {
    std::vector<int64_t> rest;
    for (int64_t r = 1; r < world_size(); ++r) rest.push_back(r);
    add(Placement("cpu", {0}), NdSbp(sbp::broadcast));
    add(Placement("cpu", rest), NdSbp(sbp::split(1)));
    k.placements = 3;
  }
  return k;
}

double reference_norm(const std::vector<std::vector<float>>& grads, double norm_type) {
  double total = 0;
  for (const auto& g : grads)
    for (float v : g)
      total = std::isinf(norm_type) ? std::max(total, std::fabs(static_cast<double>(v)))
                                    : total + std::pow(std::fabs(static_cast<double>(v)), norm_type);
  return std::isinf(norm_type) ? total : std::pow(total, 1 / norm_type);
}

void gradient_clipping(Counter& c, const Placement& p) {
  for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
    const std::string in = " (norm " + show(norm_type) + " on " + p.to_string() + ")";
    c.run("clip_grad_norm_" + in, [&] {
      ClipCase k = clip_case(p);
      const double want = reference_norm(k.grads, norm_type);
      // The partial gradient is reduced by the first call (what the optimizer's step would do):
      // an infinite max_norm clips nothing.
      clip_grad_norm_(k.params, std::numeric_limits<double>::infinity(), norm_type);
      // Above the norm: nothing changes.
      reset_comm_stats();
      const double loose = clip_grad_norm_(k.params, 2 * want, norm_type);
      const CommStats stats = comm_stats();
      if (!(std::fabs(loose - want) <= 1e-5 * want))
        c.f.add("clip_grad_norm_" + in + " returned " + show(loose) + ", one process's norm is " + show(want));
      // One small reduction per placement, never a gather: a few bytes per placement.
      if (stats.collectives > k.placements || stats.bytes_received > 16 * world_size() * k.placements)
        c.f.add("clip_grad_norm_" + in + " communicated {" + stats.to_string() + "} for " +
                std::to_string(k.placements) + " placements");
      for (size_t i = 0; i < k.params.size(); ++i)
        if (k.params[i].placement().contains(rank()))
          expect_close(c.f, "an unclipped gradient" + in, k.params[i].grad().full().to_vector(), k.grads[i], 1e-6);
      // Below: every gradient scaled by max_norm / (norm + 1e-6).
      const double max_norm = 0.25 * want;
      const double total = clip_grad_norm_(k.params, max_norm, norm_type);
      if (!(std::fabs(total - want) <= 1e-5 * want)) c.f.add("the second norm" + in + " is " + show(total));
      const double coef = max_norm / (total + 1e-6);
      for (size_t i = 0; i < k.params.size(); ++i) {
        if (!k.params[i].placement().contains(rank())) continue;  // full() is for the placement's ranks
        std::vector<float> scaled = k.grads[i];
        for (float& v : scaled) v = static_cast<float>(v * static_cast<float>(coef));
        expect_close(c.f, "a clipped gradient" + in, k.params[i].grad().full().to_vector(), scaled, 1e-5);
      }
    });
  }
  c.run("clip_grad_value_ on " + p.to_string(), [&] {
    ClipCase k = clip_case(p);
    clip_grad_value_(k.params, 0.3);
    for (size_t i = 0; i < k.params.size(); ++i) {
      if (!k.params[i].placement().contains(rank())) continue;
      std::vector<float> clamped = k.grads[i];
      for (float& v : clamped) v = std::clamp(v, -0.3f, 0.3f);
      expect_close(c.f, "a gradient after clip_grad_value_", k.params[i].grad().full().to_vector(), clamped, 0);
    }
  });
}

// ---- optimizer state dicts (the same world; across world sizes: test/sim/test_training_checks.cpp) ----
void optimizer_state_dicts(Counter& c, const Placement& p) {
  for (const NdSbp& l : parameter_layouts(p)) {
    const std::string in = " (w " + l.to_string() + " on " + p.to_string() + ")";
    c.run("Adam::state_dict and load_state_dict" + in, [&] {
      auto w = randn<float>({4, 3}, p, l, 11).requires_grad_();
      Adam<float> adam({{"w", w}}, {.lr = 0.05});
      for (int s = 0; s < 2; ++s) {
        backward(sum(w * w));
        adam.step();
        adam.zero_grad();
      }
      const StateDict sd = adam.state_dict("optim.");
      const std::vector<std::string> names = {"optim.lr", "optim.state.w.exp_avg", "optim.state.w.exp_avg_sq", "optim.step"};
      if (sd.names() != names) c.f.add("Adam::state_dict" + in + " has other names");
      if (sd.at<int64_t>("optim.step").item() != 2) c.f.add("Adam::state_dict" + in + ": step is not 2");
      const std::vector<float> m = adam.state().exp_avg[0]->full().to_vector();
      expect_close(c.f, "exp_avg in the state dict" + in, sd.at<float>("optim.state.w.exp_avg").full().to_vector(), m, 0);
      // Another optimizer over a parameter of another layout takes it.
      auto v = randn<float>({4, 3}, p, all_b(p), 11).requires_grad_();
      Adam<float> other({{"w", v}}, {.lr = 1});
      other.load_state_dict(sd, "optim.");
      if (other.lr() != 0.05 || other.steps() != 2) c.f.add("load_state_dict" + in + " did not take lr and step");
      expect_close(c.f, "exp_avg after load_state_dict" + in, other.state().exp_avg[0]->full().to_vector(), m, 0);
      if (!(other.state().exp_avg[0]->nd_sbp() == all_b(p))) c.f.add("loaded state" + in + " not in its parameter's layout");
      expect_error(c.f, "load_state_dict without the entries" + in, [&] { other.load_state_dict(StateDict{}, "x."); },
                   {"Adam.load_state_dict", "the state dict has no \"x.state.w.exp_avg\""});
    });
  }
  c.run("SGD::state_dict with momentum on " + p.to_string(), [&] {
    auto w = randn<float>({5}, p, all_b(p), 12).requires_grad_();
    SGD<float> sgd({{"weight", w}}, {.lr = 0.1, .momentum = 0.9});
    StateDict sd = sgd.state_dict();  // made before any step: zero buffers
    if (sd.names() != std::vector<std::string>{"lr", "state.weight.momentum_buffer"}) c.f.add("SGD::state_dict names");
    backward(sum(w * w));
    sgd.step();
    // The dict shares the buffer: it sees the step.
    expect_close(c.f, "the momentum buffer after a step", sd.at<float>("state.weight.momentum_buffer").full().to_vector(),
                 sgd.state().momentum[0]->full().to_vector(), 0);
  });
}

}  // namespace

std::vector<float> train_resumable(const std::string& mode, int64_t from, int64_t to, const std::string& resume,
                                   const std::string& save, bool resume_optimizer) {
  const nn::Plan plan = examples::mlp_plan(mode);
  examples::Mlp<float> model({examples::mlp_placement(mode, world_size()), 5}, 8, 6, 4);
  nn::parallelize(model, plan);
  const Placement& placement = model.fc1.weight.placement();
  const NdSbp batch = nn::input_layout(plan);
  Adam<float> adam(model.named_parameters(), {.lr = 2e-2});
  CosineWithWarmup schedule(adam, {.warmup_steps = 2, .total_steps = 8, .min_factor = 0.1});
  auto state = [&] {
    StateDict sd = model.state_dict("model.");
    sd.merge(adam.state_dict("optim."));
    sd.merge(schedule.state_dict("schedule."));
    return sd;
  };
  if (!resume.empty()) {
    StateDict sd = resume_optimizer ? state() : model.state_dict("model.");
    load_checkpoint(resume, sd);
    if (resume_optimizer) {
      adam.load_state_dict(sd, "optim.");
      schedule.load_state_dict(sd, "schedule.");
    }
  }
  std::vector<float> losses;
  for (int64_t s = from; s < to; ++s) {
    const auto x = randn<float>({8, 8}, placement, batch, 100 + static_cast<uint64_t>(s));
    std::vector<int64_t> labels(8);
    for (int64_t i = 0; i < 8; ++i) labels[i] = (i * 3 + s) % 4;
    const auto y = from_host(Tensor<int64_t>::from_vector({8}, labels), placement, batch);
    const GlobalTensor<float> loss = cross_entropy(model(x), y);
    adam.zero_grad();
    backward(loss);
    clip_grad_norm_(model.parameters(), 0.5);
    adam.step();
    schedule.step();
    losses.push_back(loss.item());
  }
  if (!save.empty()) save_checkpoint(state(), save);
  return losses;
}

int run_training_checks(Failures& failures) {
  Counter c{failures};
  for (const Placement& p : world_placements()) {
    backward_twice(c, p);
    modified_saved_tensors(c, p);
    replaced_parameters(c, p);
    undefined_tensors(c, p);
    learning_rates(c, p);
    gradient_clipping(c, p);
    optimizer_state_dicts(c, p);
  }
  synchronize();
  return c.cases;
}

}  // namespace spsd_test
