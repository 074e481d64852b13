// The fused optimizer steps (autograd/optim.hpp: one kernel per parameter, kernel/cpu/optim.hpp)
// against the element-wise formulas they replaced, kept here as global ops exactly as
// optim.hpp wrote them: parameters and state equal within float rounding after several steps,
// for every SGD and Adam variant, float and double, on 1, 2 and 4 simulated ranks and on B, S
// and 2-d layouts (a parameter on a sub-placement too); state() and load_state copy; a
// hyper-parameter that differs between ranks is caught by the consistency check.
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "grad_scaler_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;

namespace {

enum class Kind { kSgd, kAdam, kAdamW };

struct Config {
  std::string name;
  Kind kind;
  SgdOptions sgd{};
  AdamOptions adam{};
};

const std::vector<Config>& configs() {
  static const std::vector<Config> all = {
      {"SGD", Kind::kSgd, {.lr = 0.1}},
      {"SGD weight decay", Kind::kSgd, {.lr = 0.1, .weight_decay = 0.05}},
      {"SGD momentum", Kind::kSgd, {.lr = 0.1, .momentum = 0.9}},
      {"SGD momentum weight decay", Kind::kSgd, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}},
      {"SGD nesterov", Kind::kSgd, {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.01, .nesterov = true}},
      {"Adam", Kind::kAdam, {}, {.lr = 0.01}},
      {"Adam weight decay", Kind::kAdam, {}, {.lr = 0.01, .beta1 = 0.8, .weight_decay = 0.01}},
      {"AdamW", Kind::kAdamW, {}, {.lr = 0.01}},
      {"AdamW weight decay", Kind::kAdamW, {}, {.lr = 0.01, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}},
  };
  return all;
}

// optim.hpp's step before the fused kernels, for parameters that are plain tensors.
template <std::floating_point T>
struct ElementwiseReference {
  Config c;
  std::vector<GlobalTensor<T>> params;
  std::vector<std::optional<GlobalTensor<T>>> momentum, m, v;
  int64_t steps = 0;

  ElementwiseReference(Config config, std::vector<GlobalTensor<T>> ps)
      : c(std::move(config)), params(std::move(ps)), momentum(params.size()), m(params.size()), v(params.size()) {}

  void step(const std::vector<std::optional<GlobalTensor<T>>>& grads) {
    if (c.kind == Kind::kSgd) return sgd(grads);
    const AdamOptions& o = c.adam;
    const bool decoupled = c.kind == Kind::kAdamW;
    ++steps;
    const double c1 = 1 - std::pow(o.beta1, steps), c2 = 1 - std::pow(o.beta2, steps);
    const T step_size = static_cast<T>(o.lr * std::sqrt(c2) / c1), eps = static_cast<T>(o.eps * std::sqrt(c2));
    for (size_t i = 0; i < params.size(); ++i) {
      if (!grads[i]) continue;
      GlobalTensor<T>& p = params[i];
      GlobalTensor<T> g = grads[i]->to_global(p.placement(), p.nd_sbp());
      if (o.weight_decay != 0 && !decoupled) g = g + p * static_cast<T>(o.weight_decay);
      if (!m[i]) m[i] = zeros<T>(p.shape(), p.placement(), p.nd_sbp()), v[i] = *m[i];
      m[i] = *m[i] * static_cast<T>(o.beta1) + g * static_cast<T>(1 - o.beta1);
      v[i] = *v[i] * static_cast<T>(o.beta2) + g * g * static_cast<T>(1 - o.beta2);
      GlobalTensor<T> decayed = decoupled && o.weight_decay != 0 ? p * static_cast<T>(1 - o.lr * o.weight_decay) : p;
      p.copy_(decayed - *m[i] * step_size / (spsd::sqrt(*v[i]) + eps));
    }
  }

  void sgd(const std::vector<std::optional<GlobalTensor<T>>>& grads) {
    const SgdOptions& o = c.sgd;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!grads[i]) continue;
      GlobalTensor<T>& p = params[i];
      GlobalTensor<T> g = grads[i]->to_global(p.placement(), p.nd_sbp());
      if (o.weight_decay != 0) g = g + p * static_cast<T>(o.weight_decay);
      if (o.momentum != 0) {
        std::optional<GlobalTensor<T>>& buf = momentum[i];
        buf = buf ? *buf * static_cast<T>(o.momentum) + g : g;
        g = o.nesterov ? g + *buf * static_cast<T>(o.momentum) : *buf;
      }
      p.copy_(p - g * static_cast<T>(o.lr));
    }
  }
};

// The fused optimizer under test, of either family.
template <std::floating_point T>
struct Fused {
  std::optional<SGD<T>> sgd;
  std::optional<Adam<T>> adam;  // Adam or AdamW (a slice of AdamW: it only adds a constructor)

  Fused(const Config& c, const std::vector<GlobalTensor<T>>& params) {
    if (c.kind == Kind::kSgd) sgd.emplace(params, c.sgd);
    else if (c.kind == Kind::kAdam) adam.emplace(params, c.adam);
    else adam.emplace(AdamW<T>(params, c.adam));
  }
  void step() { sgd ? sgd->step() : adam->step(); }
  // The state tensors in a fixed order: momentum, or exp_avg then exp_avg_sq.
  std::vector<std::optional<GlobalTensor<T>>> state() const {
    if (sgd) return sgd->state().momentum;
    AdamState<T> s = adam->state();
    s.exp_avg.insert(s.exp_avg.end(), s.exp_avg_sq.begin(), s.exp_avg_sq.end());
    return s.exp_avg;
  }
};

template <std::floating_point T>
constexpr double kRtol = std::is_same_v<T, float> ? 1e-6 : 1e-14;

template <std::floating_point T>
void expect_close(Failures& f, const std::string& what, const GlobalTensor<T>& got, const GlobalTensor<T>& want) {
  const std::vector<T> g = got.full().to_vector(), w = want.full().to_vector();
  if (!got.placement().contains(rank())) return;
  for (size_t i = 0; i < w.size(); ++i)
    if (!(std::abs(static_cast<double>(g[i]) - w[i]) <= kRtol<T> * (std::abs(static_cast<double>(w[i])) + 0.01))) {
      f.add(what + ": element " + std::to_string(i) + " is " + spsd_test::show(g[i]) + ", the element-wise formulas give " +
            spsd_test::show(w[i]));
      return;
    }
}

// A parameter's layout and the layout its gradient arrives in (boxed by step()).
struct ParamLayout {
  Placement placement;
  NdSbp param, grad;
};

std::vector<ParamLayout> layouts_for(int n) {
  using namespace sbp;
  if (n == 1) return {{mesh_placement({1}), {broadcast}, {broadcast}}};
  if (n == 2) {
    const Placement p = mesh_placement({2});
    return {{p, {broadcast}, {broadcast}}, {p, {split(0)}, {split(0)}}, {p, {split(1)}, {broadcast}}};
  }
  const Placement mesh = mesh_placement({2, 2});
  return {{mesh, {split(0), split(1)}, {split(0), split(1)}},
          {mesh, {broadcast, split(0)}, {split(1), broadcast}},
          {Placement("cpu", {0, 1}), {split(0)}, {broadcast}}};  // ranks 2 and 3 hold none of it
}

// Every config for T on n simulated ranks: 4 steps on the same gradients (one parameter gets
// none at step 3), then parameters and state compared; then state() must be a snapshot.
template <std::floating_point T>
Failures fused_matches_elementwise(int n) {
  return spsd_test::on_simulated_ranks(n, [n](Failures& f) {
    const std::vector<ParamLayout> layouts = layouts_for(n);
    const Shape shape{6, 5};
    for (const Config& c : configs()) {
      const std::string where = c.name + " " + std::string(to_string(dtype_of<T>)) + " on " + std::to_string(n) + " ranks";
      std::vector<GlobalTensor<T>> params, plain;
      for (size_t i = 0; i < layouts.size(); ++i) {
        const ParamLayout& l = layouts[i];
        params.push_back(randn<T>(shape, l.placement, l.param, 10 + i).requires_grad_());
        plain.push_back(randn<T>(shape, l.placement, l.param, 10 + i));
      }
      Fused<T> fused(c, params);
      ElementwiseReference<T> reference(c, plain);
      for (int t = 1; t <= 4; ++t) {
        std::vector<std::optional<GlobalTensor<T>>> grads(layouts.size());
        for (size_t i = 0; i < layouts.size(); ++i) {
          if (t == 3 && i == 0) {
            params[i].zero_grad();
            continue;
          }
          grads[i] = randn<T>(shape, layouts[i].placement, layouts[i].grad, 100 * t + i);
          params[i].autograd_meta()->grad = grads[i]->data();
        }
        fused.step();
        reference.step(grads);
      }
      const std::vector<std::optional<GlobalTensor<T>>> state = fused.state();
      std::vector<std::optional<GlobalTensor<T>>> want = c.kind == Kind::kSgd ? reference.momentum : reference.m;
      if (c.kind != Kind::kSgd) want.insert(want.end(), reference.v.begin(), reference.v.end());
      for (size_t i = 0; i < params.size(); ++i)
        expect_close(f, where + ": parameter " + std::to_string(i), params[i], reference.params[i]);
      for (size_t i = 0; i < want.size(); ++i) {
        if (state[i].has_value() != want[i].has_value()) {
          f.add(where + ": state " + std::to_string(i) + (want[i] ? " is missing" : " should not exist"));
          continue;
        }
        if (want[i]) expect_close(f, where + ": state " + std::to_string(i), *state[i], *want[i]);
      }
      // A snapshot keeps its values through later steps (the optimizer updates its own copy).
      if (state.empty() || !state[0]) continue;
      const std::vector<T> before = state[0]->full().to_vector();
      params[0].autograd_meta()->grad = randn<T>(shape, layouts[0].placement, layouts[0].grad, 7).data();
      fused.step();
      if (state[0]->full().to_vector() != before) f.add(where + ": a state() snapshot changed with a later step");
    }
  });
}

}  // namespace

TEST_CASE("optim: fused SGD, Adam and AdamW steps equal the element-wise formulas", "[autograd][optim]") {
  Failures failures;
  for (int n : {1, 2, 4}) {
    failures.merge(fused_matches_elementwise<float>(n));
    failures.merge(fused_matches_elementwise<double>(n));
  }
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("optim: parameters are updated in place and stay leaves; load_state copies", "[autograd][optim]") {
  Failures failures = spsd_test::on_simulated_ranks(2, [](Failures& f) {
    const Placement p = mesh_placement({2});
    auto w = randn<float>({4, 3}, p, sbp::split(0), 1).requires_grad_();
    const GlobalTensor<float> model_copy = w;  // the model's copy of the parameter
    const std::vector<float> w0 = w.full().to_vector();
    Adam<float> adam({w}, {.lr = 0.1});
    backward(sum(w * w));
    adam.step();
    const std::vector<float> after = model_copy.full().to_vector();
    if (after == w0) f.add("the model's copy did not see the step");
    if (model_copy.to_local().data() != w.to_local().data()) f.add("the step replaced the parameter's storage");
    if (!w.is_leaf() || !w.requires_grad()) f.add("the step changed the parameter's autograd state");
    // load_state copies: the caller's tensors keep their values through later steps.
    const GlobalTensor<float> momentum = ones<float>({4, 3}, p, sbp::broadcast);
    SGD<float> sgd({w}, {.lr = 0.1, .momentum = 0.9});
    sgd.load_state({{momentum}});
    backward(sum(w * w));
    sgd.step();
    if (momentum.full().to_vector() != std::vector<float>(12, 1.0f)) f.add("SGD::step wrote into the loaded tensor");
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("optim: a learning rate that differs between ranks is caught by the consistency check",
          "[autograd][optim]") {
  const std::vector<std::string> errors = spsd_test::errors_by_rank(2, [] {
    const Placement p = mesh_placement({2});
    auto w = ones<float>({4}, p, sbp::broadcast).requires_grad_();
    SGD<float> sgd({w}, {.lr = rank() == 1 ? 0.2 : 0.1});
    backward(sum(w));
    sgd.step();
    detail::check_ops(p.ranks());
  });
  for (size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r << ": " << errors[r]);
    // The learning rate is the update's scalar operand (it may change every step: set_lr, schedulers).
    CHECK(errors[r].find("sgd_step(momentum=0,") != std::string::npos);
    CHECK(errors[r].find("with scalar operand 0.1") != std::string::npos);
    CHECK(errors[r].find("with scalar operand 0.2") != std::string::npos);
  }
}

// GradScaler (autograd/grad_scaler.hpp): an overflow in one rank's piece skips the step on every
// rank and halves the scale; clean steps unscale exactly (test/common/grad_scaler_suite.cpp).
TEST_CASE("GradScaler: one rank's overflow skips the step everywhere; clean steps unscale and grow", "[optim][scaler]") {
  for (int n : {1, 2, 4}) {
    Failures failures = spsd_test::on_simulated_ranks(n, [](Failures& f) { spsd_test::check_grad_scaler(f); });
    INFO(n << " simulated ranks: " << failures.report());
    CHECK(failures.empty());
  }
}

TEST_CASE("GradScaler: options are checked", "[optim][scaler]") {
  CHECK_THROWS_WITH(GradScaler({.init_scale = 0}), Catch::Contains("init_scale") && Catch::Contains("got 0"));
  CHECK_THROWS_WITH(GradScaler({.growth_factor = 1}), Catch::Contains("growth_factor"));
  CHECK_THROWS_WITH(GradScaler({.backoff_factor = 1.5}), Catch::Contains("backoff_factor") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(GradScaler({.growth_interval = 0}), Catch::Contains("growth_interval"));
}
