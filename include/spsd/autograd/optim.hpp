#pragma once
// Optimizers over global parameters: SGD (momentum, Nesterov, weight decay), Adam and AdamW.
//
// step() first boxes each gradient into its parameter's layout (a P(sum) gradient of a B
// parameter becomes B: the all-reduce of data parallelism; of an S parameter: a
// reduce-scatter). By default backward has done that boxing already, overlapped with its
// compute (BackwardOptions::reduce_gradients_early), and here it is free. Then every rank of
// the parameter's placement runs one fused kernel (kernel/cpu/optim.hpp, kernel/cuda/optim.hpp)
// on its pieces of the parameter, the gradient and the state, which all share that layout: the
// update communicates nothing, makes no temporaries and launches one kernel per parameter. Its
// formulas are those of the element-wise ops it replaced, term by term in T (kernel/cpu/optim.hpp
// states them; Adam folds the bias corrections into the step size and eps), so the values are
// theirs up to rounding (fused multiply-adds).
// Optimizer state (momentum, Adam's moments) lives in the parameter's layout: each rank keeps
// the state of the piece it holds (a split parameter has split state, as ZeRO would shard it).
// Parameters and state are updated in place, so every copy of a parameter, e.g. the one in the
// model, sees the step.
// step() and zero_grad() are collective like any op: every rank calls them (ranks outside a
// parameter's placement skip its update). Each fused update is noted for the cross-rank check
// (runtime/consistency.hpp) as one op, "sgd_step(...)" or "adam_step(...)", with the exact
// hyper-parameters and the parameter's layout, and, for Adam, the step count as its scalar
// operand: ranks whose optimizers diverged get spsd::Error at the next check.
#include <charconv>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "spsd/autograd/node.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/trace.hpp"
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
// parameter's first update. Both copy: the optimizer updates its own state in place, so a
// state() taken earlier keeps its values, and tensors given to load_state stay the caller's.
template <FloatingElement T>
struct SgdState {
  std::vector<std::optional<GlobalTensor<T>>> momentum;
};
template <FloatingElement T>
struct AdamState {
  int64_t steps = 0;  // steps taken: the bias corrections depend on it
  std::vector<std::optional<GlobalTensor<T>>> exp_avg, exp_avg_sq;
};

template <FloatingElement T>
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
      // The fused update writes the whole box: a raw tensor's piece must hold it.
      detail::check_piece(name_, "parameter", p.data());
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
  // into its layout (a checkpoint may have been loaded in another one) and copied.
  std::vector<std::optional<GlobalTensor<T>>> adopt_state(std::string_view what,
                                                          std::vector<std::optional<GlobalTensor<T>>> given) const {
    SPSD_CHECK(given.size() == params_.size(), name_, "load_state: ", what, " has ", given.size(),
               " entries for ", params_.size(), " parameters");
    for (size_t i = 0; i < given.size(); ++i) {
      if (!given[i]) continue;
      const GlobalTensor<T>& p = params_[i];
      SPSD_CHECK(given[i]->shape() == p.shape(), name_, "load_state: ", what, " ", i, " is ", given[i]->describe(),
                 ", its parameter is ", p.describe());
      given[i] = local_copy(given[i]->detach().to_global(p.placement(), p.nd_sbp()));
    }
    return given;
  }
  static std::vector<std::optional<GlobalTensor<T>>> copies(const std::vector<std::optional<GlobalTensor<T>>>& state) {
    std::vector<std::optional<GlobalTensor<T>>> out;
    out.reserve(state.size());
    for (const std::optional<GlobalTensor<T>>& t : state) out.push_back(t ? std::optional(local_copy(*t)) : std::nullopt);
    return out;
  }

  // For the cross-rank check: "op(attrs) <parameter i's shape, dtype, layout>", one per
  // parameter, built once (the options do not change).
  std::vector<std::shared_ptr<const detail::OpIdentity>> step_identities(std::string_view op,
                                                                        std::string_view attrs) const {
    std::vector<std::shared_ptr<const detail::OpIdentity>> ids;
    for (const GlobalTensor<T>& p : params_)
      ids.push_back(std::make_shared<const detail::OpIdentity>(detail::concat(op, "(", attrs, ") ", p.describe())));
    return ids;
  }
  // v as the shortest text that reads back as v: options that differ in any bit differ here.
  static std::string exact(double v) {
    char buf[32];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }

  // Runs update(target, p, g, n) on this rank's pieces of parameter i and its gradient g (n
  // elements each, the same layout) after noting the update for the cross-rank check; nothing
  // on a rank outside the parameter's placement. The pointers come through the storages'
  // accessors, so the kernel runs after the communication still reading or writing them.
  template <class Update>
  void update_locally(size_t i, const GlobalTensor<T>& g, const std::shared_ptr<const detail::OpIdentity>& identity,
                      const detail::ScalarOperand* scalar, Update&& update) {
    GlobalTensor<T>& p = params_[i];
    if (!p.placement().contains(rank())) return;
    detail::note_op(p.placement().ranks(), identity, scalar);
    Tensor<T> p_local = p.to_local();  // shares the parameter's storage
    update(kernel::Target::of(p.placement().device_type()), p_local.data(), g.to_local().data(), p_local.numel());
  }
  // This rank's piece of state tensor t, for writing.
  static T* local_data(GlobalTensor<T>& t) {
    Tensor<T> local = t.to_local();
    return local.data();
  }

  std::string_view name_;
  std::vector<GlobalTensor<T>> params_;

 private:
  // t with a storage of its own on this rank (the same values and layout; no communication).
  static GlobalTensor<T> local_copy(const GlobalTensor<T>& t) {
    const Tensor<T>& local = t.to_local();
    if (!local.defined()) return GlobalTensor<T>(t.shape(), t.placement(), t.nd_sbp(), Tensor<T>());
    const int64_t bytes = local.numel() * static_cast<int64_t>(sizeof(T));
    const DeviceType device = local.device_type();
    Tensor<T> copy(local.shape(), Storage::allocate_uninitialized(bytes, device));
    detail::copy_bytes(copy.data(), device, local.data(), device, bytes);
    return GlobalTensor<T>(t.shape(), t.placement(), t.nd_sbp(), std::move(copy));
  }
};

template <FloatingElement T>
class SGD : public Optimizer<T> {
 public:
  SGD(std::vector<GlobalTensor<T>> params, SgdOptions options)
      : Optimizer<T>("SGD", std::move(params)), options_(options), momentum_(this->params_.size()) {
    this->check_range("SGD", "lr", options.lr, 0, INFINITY);
    this->check_range("SGD", "momentum", options.momentum, 0, 1);
    this->check_range("SGD", "weight_decay", options.weight_decay, 0, INFINITY);
    SPSD_CHECK(!options.nesterov || options.momentum > 0, "SGD", "nesterov needs momentum > 0");
    identities_ = this->step_identities(
        "sgd_step", detail::concat("lr=", this->exact(options.lr), ", momentum=", this->exact(options.momentum),
                                   ", weight_decay=", this->exact(options.weight_decay),
                                   ", nesterov=", options.nesterov));
  }

  void step() {
    NoGradGuard no_grad;
    const detail::OpenSpan phase = detail::phase_span("SGD.step");
    const SgdOptions& o = options_;
    using C = compute_t<T>;  // the scalars of a 16-bit step are float
    const kernel::SgdStep<C> args{static_cast<C>(o.lr), static_cast<C>(o.momentum), static_cast<C>(o.weight_decay),
                                  o.momentum != 0, o.weight_decay != 0, o.nesterov};
    for (size_t i = 0; i < this->params_.size(); ++i) {
      std::optional<GlobalTensor<T>> g = this->gradient(i);
      if (!g) continue;
      // A fresh buffer is zero: the first step makes it the gradient, exactly.
      if (args.has_momentum && !momentum_[i]) momentum_[i] = this->zeros_like(i);
      T* buf = args.has_momentum ? this->local_data(*momentum_[i]) : nullptr;
      this->update_locally(i, *g, identities_[i], nullptr, [&](const kernel::Target& t, T* p, const T* gd, int64_t n) {
        kernel::sgd_step(t, p, gd, buf, n, args);
      });
    }
  }

  SgdState<T> state() const { return {this->copies(momentum_)}; }
  void load_state(SgdState<T> state) { momentum_ = this->adopt_state("momentum", std::move(state.momentum)); }

 private:
  SgdOptions options_;
  std::vector<std::optional<GlobalTensor<T>>> momentum_;  // in the parameter's layout
  std::vector<std::shared_ptr<const detail::OpIdentity>> identities_;
};

template <FloatingElement T>
class Adam : public Optimizer<T> {
 public:
  Adam(std::vector<GlobalTensor<T>> params, AdamOptions options) : Adam("Adam", std::move(params), options, false) {}

  void step() {
    NoGradGuard no_grad;
    const detail::OpenSpan phase = detail::phase_span(this->decoupled_ ? "AdamW.step" : "Adam.step");
    const AdamOptions& o = options_;
    ++steps_;
    // Bias corrections folded into the step size and eps (Kingma & Ba, end of section 2).
    const double c1 = 1 - std::pow(o.beta1, steps_), c2 = 1 - std::pow(o.beta2, steps_);
    const bool decays = o.weight_decay != 0;
    using C = compute_t<T>;
    const kernel::AdamStep<C> args{static_cast<C>(o.beta1),
                                   static_cast<C>(1 - o.beta1),
                                   static_cast<C>(o.beta2),
                                   static_cast<C>(1 - o.beta2),
                                   static_cast<C>(o.lr * std::sqrt(c2) / c1),
                                   static_cast<C>(o.eps * std::sqrt(c2)),
                                   static_cast<C>(o.weight_decay),
                                   static_cast<C>(1 - o.lr * o.weight_decay),
                                   decays && !decoupled_,
                                   decays && decoupled_};
    // The step count is the update's scalar operand: ranks that disagree on it (a state loaded
    // on some ranks only) would apply different bias corrections.
    const detail::ScalarOperand step_count{static_cast<double>(steps_), static_cast<uint64_t>(steps_)};
    for (size_t i = 0; i < this->params_.size(); ++i) {
      std::optional<GlobalTensor<T>> g = this->gradient(i);
      if (!g) continue;
      if (!m_[i]) m_[i] = this->zeros_like(i), v_[i] = this->zeros_like(i);
      T* m = this->local_data(*m_[i]);
      T* v = this->local_data(*v_[i]);
      this->update_locally(i, *g, identities_[i], &step_count,
                           [&](const kernel::Target& t, T* p, const T* gd, int64_t n) {
                             kernel::adam_step(t, p, gd, m, v, n, args);
                           });
    }
  }

  AdamState<T> state() const { return {steps_, this->copies(m_), this->copies(v_)}; }
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
    identities_ = this->step_identities(
        "adam_step", detail::concat("lr=", this->exact(options.lr), ", beta1=", this->exact(options.beta1),
                                    ", beta2=", this->exact(options.beta2), ", eps=", this->exact(options.eps),
                                    ", weight_decay=", this->exact(options.weight_decay),
                                    decoupled ? ", decoupled" : ""));
  }

 private:
  AdamOptions options_;
  bool decoupled_;
  int64_t steps_ = 0;
  std::vector<std::optional<GlobalTensor<T>>> m_, v_;  // first and second moments, parameter layout
  std::vector<std::shared_ptr<const detail::OpIdentity>> identities_;
};

// Adam with decoupled weight decay (Loshchilov & Hutter).
template <FloatingElement T>
class AdamW : public Adam<T> {
 public:
  AdamW(std::vector<GlobalTensor<T>> params, AdamOptions options) : Adam<T>("AdamW", std::move(params), options, true) {}
};

}  // namespace spsd
