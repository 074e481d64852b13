#pragma once
// Optimizers over global parameters: SGD (momentum, Nesterov, weight decay), Adam and AdamW.
//
// step() first boxes each gradient into its parameter's layout (a P(sum) gradient of a B
// parameter becomes B: the all-reduce of data parallelism; of an S parameter: a
// reduce-scatter), then updates with element-wise global ops whose inputs all have that layout,
// so the update itself communicates nothing. By default backward has done that boxing already,
// overlapped with its compute (BackwardOptions::reduce_gradients_early), and here it is free.
// Optimizer state (momentum, Adam's moments) is created in the parameter's layout: each rank
// keeps the state of the piece it holds (a split parameter has split state, as ZeRO would
// shard it). Parameters are written in place (GlobalTensor::copy_), so every copy of a
// parameter, e.g. the one in the model, sees the step.
// step() and zero_grad() are collective like any op: every rank calls them.
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "spsd/autograd/node.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/tensor/factory.hpp"

namespace spsd {

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0;
  double weight_decay = 0;  // L2: adds weight_decay * p to the gradient
  bool nesterov = false;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 on the gradient; AdamW: decoupled, p *= 1 - lr * weight_decay
};

// Optimizer state, as state() returns it and load_state() takes it (for checkpoints,
// io/checkpoint.hpp): one entry per parameter, in the parameter's layout, empty before the
// parameter's first update. The tensors are the optimizer's own; a step replaces them.
template <std::floating_point T>
struct SgdState {
  std::vector<std::optional<GlobalTensor<T>>> momentum;
};
template <std::floating_point T>
struct AdamState {
  int64_t steps = 0;  // steps taken: the bias corrections depend on it
  std::vector<std::optional<GlobalTensor<T>>> exp_avg, exp_avg_sq;
};

template <std::floating_point T>
class Optimizer {
 public:
  const std::vector<GlobalTensor<T>>& params() const { return params_; }
  // Drops every parameter's gradient (the next backward starts from zero).
  void zero_grad() {
    for (GlobalTensor<T>& p : params_) p.zero_grad();
  }

 protected:
  Optimizer(std::string_view name, std::vector<GlobalTensor<T>> params) : name_(name), params_(std::move(params)) {
    SPSD_CHECK(!params_.empty(), name_, "needs at least one parameter");
    std::unordered_set<const void*> seen;
    for (size_t i = 0; i < params_.size(); ++i) {
      const GlobalTensor<T>& p = params_[i];
      SPSD_CHECK(p.requires_grad() && p.is_leaf(), name_, "parameter ", i, " (", p.describe(),
                 ") must be a leaf that requires grad (call requires_grad_() on it)");
      for (const Sbp& s : p.nd_sbp())
        SPSD_CHECK(!s.is_partial(), name_, "parameter ", i, " (", p.describe(),
                   ") is partial; parameters must be split or broadcast on every mesh axis");
      SPSD_CHECK(seen.insert(p.autograd_meta().get()).second, name_, "parameter ", i, " (", p.describe(),
                 ") is listed twice");
    }
  }

  // Parameter i's gradient in the parameter's layout, or nothing when backward gave it none.
  std::optional<GlobalTensor<T>> gradient(size_t i) const {
    const GlobalTensor<T>& p = params_[i];
    if (!p.has_grad()) return std::nullopt;
    return p.grad().to_global(p.placement(), p.nd_sbp());
  }
  GlobalTensor<T> zeros_like(size_t i) const {
    const GlobalTensor<T>& p = params_[i];
    return zeros<T>(p.shape(), p.placement(), p.nd_sbp());
  }
  static void check_range(std::string_view op, std::string_view what, double v, double lo, double hi) {
    SPSD_CHECK(v >= lo && v <= hi, op, what, " must be in [", lo, ", ", hi, "], got ", v);
  }
  // State tensors given to load_state: one per parameter, each of its parameter's shape, boxed
  // into its layout (a checkpoint may have been loaded in another one).
  std::vector<std::optional<GlobalTensor<T>>> adopt_state(std::string_view what,
                                                          std::vector<std::optional<GlobalTensor<T>>> given) const {
    SPSD_CHECK(given.size() == params_.size(), name_, "load_state: ", what, " has ", given.size(),
               " entries for ", params_.size(), " parameters");
    for (size_t i = 0; i < given.size(); ++i) {
      if (!given[i]) continue;
      const GlobalTensor<T>& p = params_[i];
      SPSD_CHECK(given[i]->shape() == p.shape(), name_, "load_state: ", what, " ", i, " is ", given[i]->describe(),
                 ", its parameter is ", p.describe());
      given[i] = given[i]->detach().to_global(p.placement(), p.nd_sbp());
    }
    return given;
  }

  std::string_view name_;
  std::vector<GlobalTensor<T>> params_;
};

template <std::floating_point T>
class SGD : public Optimizer<T> {
 public:
  SGD(std::vector<GlobalTensor<T>> params, SgdOptions options)
      : Optimizer<T>("SGD", std::move(params)), options_(options), momentum_(this->params_.size()) {
    this->check_range("SGD", "lr", options.lr, 0, INFINITY);
    this->check_range("SGD", "momentum", options.momentum, 0, 1);
    this->check_range("SGD", "weight_decay", options.weight_decay, 0, INFINITY);
    SPSD_CHECK(!options.nesterov || options.momentum > 0, "SGD", "nesterov needs momentum > 0");
  }

  void step() {
    NoGradGuard no_grad;
    const SgdOptions& o = options_;
    for (size_t i = 0; i < this->params_.size(); ++i) {
      std::optional<GlobalTensor<T>> g = this->gradient(i);
      if (!g) continue;
      GlobalTensor<T>& p = this->params_[i];
      if (o.weight_decay != 0) g = *g + p * static_cast<T>(o.weight_decay);
      if (o.momentum != 0) {
        std::optional<GlobalTensor<T>>& buf = momentum_[i];
        buf = buf ? *buf * static_cast<T>(o.momentum) + *g : *g;
        g = o.nesterov ? *g + *buf * static_cast<T>(o.momentum) : *buf;
      }
      p.copy_(p - *g * static_cast<T>(o.lr));
    }
  }

  SgdState<T> state() const { return {momentum_}; }
  void load_state(SgdState<T> state) { momentum_ = this->adopt_state("momentum", std::move(state.momentum)); }

 private:
  SgdOptions options_;
  std::vector<std::optional<GlobalTensor<T>>> momentum_;  // in the parameter's layout
};

template <std::floating_point T>
class Adam : public Optimizer<T> {
 public:
  Adam(std::vector<GlobalTensor<T>> params, AdamOptions options) : Adam("Adam", std::move(params), options, false) {}

  void step() {
    NoGradGuard no_grad;
    const AdamOptions& o = options_;
    ++steps_;
    // Bias corrections folded into the step size and eps (Kingma & Ba, end of section 2).
    const double c1 = 1 - std::pow(o.beta1, steps_), c2 = 1 - std::pow(o.beta2, steps_);
    const T step_size = static_cast<T>(o.lr * std::sqrt(c2) / c1), eps = static_cast<T>(o.eps * std::sqrt(c2));
    for (size_t i = 0; i < this->params_.size(); ++i) {
      std::optional<GlobalTensor<T>> g = this->gradient(i);
      if (!g) continue;
      GlobalTensor<T>& p = this->params_[i];
      if (o.weight_decay != 0 && !decoupled_) g = *g + p * static_cast<T>(o.weight_decay);
      if (!m_[i]) m_[i] = this->zeros_like(i), v_[i] = this->zeros_like(i);
      m_[i] = *m_[i] * static_cast<T>(o.beta1) + *g * static_cast<T>(1 - o.beta1);
      v_[i] = *v_[i] * static_cast<T>(o.beta2) + *g * *g * static_cast<T>(1 - o.beta2);
      GlobalTensor<T> decayed = decoupled_ && o.weight_decay != 0 ? p * static_cast<T>(1 - o.lr * o.weight_decay) : p;
      p.copy_(decayed - *m_[i] * step_size / (spsd::sqrt(*v_[i]) + eps));
    }
  }

  AdamState<T> state() const { return {steps_, m_, v_}; }
  void load_state(AdamState<T> state) {
    SPSD_CHECK(state.steps >= 0, this->name_, "load_state: steps must be non-negative, got ", state.steps);
    // Both checked before either is taken: a rejected state leaves the optimizer as it was.
    auto m = this->adopt_state("exp_avg", std::move(state.exp_avg));
    auto v = this->adopt_state("exp_avg_sq", std::move(state.exp_avg_sq));
    m_ = std::move(m), v_ = std::move(v), steps_ = state.steps;
  }

 protected:
  Adam(std::string_view name, std::vector<GlobalTensor<T>> params, AdamOptions options, bool decoupled)
      : Optimizer<T>(name, std::move(params)), options_(options), decoupled_(decoupled),
        m_(this->params_.size()), v_(this->params_.size()) {
    this->check_range(name, "lr", options.lr, 0, INFINITY);
    this->check_range(name, "beta1", options.beta1, 0, 1 - 1e-12);
    this->check_range(name, "beta2", options.beta2, 0, 1 - 1e-12);
    this->check_range(name, "eps", options.eps, 1e-300, INFINITY);
    this->check_range(name, "weight_decay", options.weight_decay, 0, INFINITY);
  }

 private:
  AdamOptions options_;
  bool decoupled_;
  int64_t steps_ = 0;
  std::vector<std::optional<GlobalTensor<T>>> m_, v_;  // first and second moments, parameter layout
};

// Adam with decoupled weight decay (Loshchilov & Hutter).
template <std::floating_point T>
class AdamW : public Adam<T> {
 public:
  AdamW(std::vector<GlobalTensor<T>> params, AdamOptions options) : Adam<T>("AdamW", std::move(params), options, true) {}
};

}  // namespace spsd
