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
// hyper-parameters other than the learning rate and the parameter's layout, and the update's
// step size as its scalar operand (SGD: lr; Adam: lr * sqrt(1 - beta2^t) / (1 - beta1^t), which
// holds the step count t too): ranks whose optimizers diverged, or whose learning rates differ
// (a scheduler, set_lr), get spsd::Error at the next check.
//
// Parameters have names (given as model.named_parameters() gives them, or "0", "1", ... by
// position), under which state_dict() lists the optimizer's state for checkpoints
// (io/checkpoint.hpp), resharded on load like a model's parameters. lr() and set_lr() serve
// schedulers (autograd/lr_scheduler.hpp). An optimizer made before nn::parallelize replaced its
// parameters would step tensors the model no longer uses: step() and zero_grad() then throw.
#include <algorithm>
#include <bit>
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
#include "spsd/tensor/state_dict.hpp"

namespace spsd {

// SGD's hyper-parameters (default: plain SGD at lr 0.01). The constructor checks lr finite and
// >= 0, momentum in [0, 1], weight_decay >= 0, and nesterov only with momentum > 0.
struct SgdOptions {
  double lr = 0.01;
  double momentum = 0;
  double weight_decay = 0;  // L2: adds weight_decay * p to the gradient
  bool nesterov = false;
};

// Adam's and AdamW's hyper-parameters, torch.optim.Adam's defaults (also for AdamW: weight_decay
// 0, where torch's AdamW has 0.01). The constructor checks lr finite and >= 0, beta1 and beta2
// in [0, 1), eps > 0 and weight_decay >= 0.
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
// Adam's state (as SgdState, above): the step count and the two moments per parameter.
template <FloatingElement T>
struct AdamState {
  int64_t steps = 0;  // steps taken: the bias corrections depend on it
  std::vector<std::optional<GlobalTensor<T>>> exp_avg, exp_avg_sq;
};

// What every optimizer has whatever its parameters' type: its name and learning rate, which
// schedulers (autograd/lr_scheduler.hpp) read and set, and where its 0-d state entries live
// ("step", "lr" of state_dict(): on the first parameter's placement, replicated).
class OptimizerBase {
 public:
  virtual ~OptimizerBase() = default;
  // "SGD", "Adam" or "AdamW": how errors and traces name it.
  std::string_view name() const { return name_; }
  // "SGD.set_lr": how errors name a method of this optimizer.
  std::string method(std::string_view m) const { return detail::concat(name_, ".", m); }
  double lr() const { return lr_; }
  // Taken from the next step() on; finite and >= 0. Every rank must set the same value (the
  // consistency check compares the updates' step sizes across ranks).
  void set_lr(double lr) {
    SPSD_CHECK(lr >= 0 && std::isfinite(lr), method("set_lr"), "lr must be finite and >= 0, got ", lr);
    // A scheduler's step() inside a compiled step replays; a bare set_lr there would not.
    detail::check_not_capturing(method("set_lr"), "a learning rate set there would not be set again on a replay; "
                                "set it between calls, or with a scheduler's step() inside the step");
    lr_ = lr;
  }
  // A 0-d tensor holding v on the first parameter's placement, replicated: a number in a state dict.
  template <Element S>
  GlobalTensor<S> scalar_entry(S v) const {
    return full<S>(Shape{}, v, scalar_placement_, NdSbp(std::vector<Sbp>(scalar_placement_.mesh().ndim(), sbp::broadcast)));
  }
  // The number a 0-d entry of sd holds (collective over the world: item()); throws naming a
  // missing entry.
  template <Element S>
  S scalar_from(const StateDict& sd, const std::string& key) const {
    SPSD_CHECK(sd.contains(key), method("load_state_dict"), "the state dict has no \"", key, "\"");
    const GlobalTensor<S> t = sd.at<S>(key);
    SPSD_CHECK(t.shape().numel() == 1, method("load_state_dict"), "\"", key, "\" must hold one value, it is ", t.describe());
    return t.item();
  }

 protected:
  // Error: lr is negative or not finite.
  OptimizerBase(std::string_view name, double lr, Placement scalar_placement)
      : name_(name), lr_(lr), scalar_placement_(std::move(scalar_placement)) {
    SPSD_CHECK(lr >= 0 && std::isfinite(lr), name_, "lr must be finite and >= 0, got ", lr);
  }
  std::string_view name_;
  double lr_;
  Placement scalar_placement_;
};

// The parameters of T an optimizer updates, with their names; SGD, Adam and AdamW derive from it.
template <FloatingElement T>
class Optimizer : public OptimizerBase {
 public:
  // The parameters, in the order given (the tensors themselves: they share the model's storage).
  const std::vector<GlobalTensor<T>>& params() const { return params_; }
  // The parameters' names: what state_dict() keys their state by.
  const std::vector<std::string>& param_names() const { return names_; }
  // Drops every parameter's gradient (the next backward starts from zero).
  void zero_grad() {
    const detail::HostStep replayed("zero_grad", [this] { zero_grad(); });
    check_params_current("zero_grad");
    for (GlobalTensor<T>& p : params_) p.zero_grad();
  }

 protected:
  using Named = std::vector<std::pair<std::string, GlobalTensor<T>>>;

  // Error: no parameter, or one that is not a defined leaf requiring grad, is partial, is listed
  // twice, or whose name is empty, not printable ASCII without spaces, or taken.
  Optimizer(std::string_view name, double lr, Named named)
      : OptimizerBase(name, lr, first_placement(name, named)) {
    std::unordered_set<const void*> seen;
    std::unordered_set<std::string> names;
    for (size_t i = 0; i < named.size(); ++i) {
      const GlobalTensor<T>& p = named[i].second;
      SPSD_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), name_, "parameter ", i, " (", p.describe(),
                 ") must be a leaf that requires grad (call requires_grad_() on it)");
      for (const Sbp& s : p.nd_sbp())
        SPSD_CHECK(!s.is_partial(), name_, "parameter ", i, " (", p.describe(),
                   ") is partial; parameters must be split or broadcast on every mesh axis");
      SPSD_CHECK(seen.insert(p.autograd_meta().get()).second, name_, "parameter ", i, " (", p.describe(),
                 ") is listed twice");
      const std::string& n = named[i].first;
      SPSD_CHECK(!n.empty() && std::all_of(n.begin(), n.end(), [](char ch) { return ch > ' ' && ch < 127; }), name_,
                 "parameter ", i, " is named \"", n, "\"; names must be non-empty printable ASCII without spaces "
                 "(they name its state in checkpoints)");
      SPSD_CHECK(names.insert(n).second, name_, "parameter ", i, " is named \"", n,
                 "\" like an earlier one; parameter names must be distinct");
      // The fused update writes the whole box: a raw tensor's piece must hold it.
      detail::check_piece(name_, "parameter", p.data());
    }
    for (auto& [n, p] : named) {
      names_.push_back(std::move(n));
      params_.push_back(std::move(p));
    }
  }

  // Names "0", "1", ... by position, for parameters given without names (as torch keys them).
  static Named by_position(std::vector<GlobalTensor<T>> params) {
    Named named;
    for (size_t i = 0; i < params.size(); ++i) named.emplace_back(std::to_string(i), std::move(params[i]));
    return named;
  }

  // Throws when nn::parallelize replaced a parameter after this optimizer took it
  // (AutogradMeta::replaced_by): stepping it would train a tensor the model no longer uses.
  void check_params_current(std::string_view call) const {
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string& by = params_[i].autograd_meta()->replaced_by;
      SPSD_CHECK(by.empty(), method(call), "parameter ", i, " \"", names_[i], "\" (", params_[i].describe(),
                 ") was replaced by ", by, " after this optimizer was made, so the optimizer no longer reaches the "
                 "model; make the optimizer after nn::parallelize, from model.named_parameters()");
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
    for (size_t i = 0; i < given.size(); ++i)
      if (given[i]) given[i] = adopt_one(what, i, *given[i]);
    return given;
  }
  static std::vector<std::optional<GlobalTensor<T>>> copies(const std::vector<std::optional<GlobalTensor<T>>>& state) {
    std::vector<std::optional<GlobalTensor<T>>> out;
    out.reserve(state.size());
    for (const std::optional<GlobalTensor<T>>& t : state) out.push_back(t ? std::optional(local_copy(*t)) : std::nullopt);
    return out;
  }

  // ---- state_dict: prefix + "state." + parameter name + "." + what, one per parameter ----
  std::string state_key(const std::string& prefix, size_t i, std::string_view what) const {
    return detail::concat(prefix, "state.", names_[i], ".", what);
  }
  // Adds state to sd, made (zero: what a first step starts from) where it does not exist yet,
  // sharing storage: a load_checkpoint into sd writes the optimizer's own state in place.
  void insert_state(StateDict& sd, const std::string& prefix, std::string_view what,
                    std::vector<std::optional<GlobalTensor<T>>>& state) const {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!state[i]) state[i] = zeros_like(i);
      sd.insert(state_key(prefix, i, what), *state[i]);
    }
  }
  // The entries `what` of sd as state tensors of this optimizer: sd's own where they already are
  // (a state_dict() of this optimizer that load_checkpoint wrote into), else copies boxed into
  // the parameters' layouts (any world size and layout they were saved in). Throws naming a
  // missing entry, another dtype or another shape, before anything is taken.
  std::vector<std::optional<GlobalTensor<T>>> state_from(const StateDict& sd, const std::string& prefix,
                                                         std::string_view what,
                                                         const std::vector<std::optional<GlobalTensor<T>>>& own) const {
    std::vector<std::optional<GlobalTensor<T>>> taken(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string key = state_key(prefix, i, what);
      SPSD_CHECK(sd.contains(key), method("load_state_dict"), "the state dict has no \"", key, "\"");
      const GlobalTensor<T> t = sd.at<T>(key);
      const bool is_own = own[i] && own[i]->to_local().storage() == t.to_local().storage() &&
                          own[i]->placement() == t.placement() && own[i]->nd_sbp() == t.nd_sbp();
      taken[i] = is_own ? t : adopt_one(key, i, t);
    }
    return taken;
  }

  // For the cross-rank check: "op(attrs) <parameter i's shape, dtype, layout>", one per
  // parameter, built once (the options but lr do not change; the step size is the operand).
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
  // An update's step size as the scalar operand the cross-rank check compares.
  static detail::ScalarOperand step_size_operand(double step_size) {
    return {step_size, std::bit_cast<uint64_t>(step_size)};
  }

  // Runs update(target, p, g, n) on this rank's pieces of parameter i and its gradient g (n
  // elements each, the same layout) after noting the update for the cross-rank check; nothing
  // on a rank outside the parameter's placement. The pointers come through the storages'
  // accessors, so the kernel runs after the communication still reading or writing them.
  // `name` names the update in the trace (no op is dispatched: a span of its own).
  template <class Update>
  void update_locally(size_t i, const GlobalTensor<T>& g, const std::shared_ptr<const detail::OpIdentity>& identity,
                      const detail::ScalarOperand* scalar, std::string_view name, Update&& update) {
    GlobalTensor<T>& p = params_[i];
    // Written in place: on every rank holding p, those outside its placement too (boxing reuse).
    detail::bump_boxed_version(p.boxed_copies());
    if (!p.placement().contains(rank())) return;
    detail::note_op(p.placement().ranks(), identity, scalar);
    Tensor<T> p_local = p.to_local();  // shares the parameter's storage
    const detail::OpenSpan span =
        detail::local_op_span(name, p.placement().device_type() == DeviceType::kCUDA, p_local.numel());
    update(kernel::Target::of(p.placement().device_type()), p_local.data(), g.to_local().data(), p_local.numel());
    p_local.storage()->bump_version();  // a graph recorded before the step must not use the new values
  }
  // This rank's piece of state tensor t, for writing.
  static T* local_data(GlobalTensor<T>& t) {
    Tensor<T> local = t.to_local();
    return local.data();
  }

  std::vector<GlobalTensor<T>> params_;
  std::vector<std::string> names_;

 private:
  static Placement first_placement(std::string_view name, const Named& named) {
    SPSD_CHECK(!named.empty(), name, "needs at least one parameter");
    SPSD_CHECK(named.front().second.defined(), name, "parameter 0 is an undefined tensor");
    return named.front().second.placement();
  }
  // Parameter i's state t boxed into the parameter's layout, with a storage of its own.
  GlobalTensor<T> adopt_one(std::string_view what, size_t i, const GlobalTensor<T>& t) const {
    const GlobalTensor<T>& p = params_[i];
    SPSD_CHECK(t.shape() == p.shape(), name_, "load_state: ", what, " ", i, " is ", t.describe(),
               ", its parameter is ", p.describe());
    return local_copy(t.detach().to_global(p.placement(), p.nd_sbp()));
  }
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

// Stochastic gradient descent with momentum, Nesterov and L2 weight decay (torch.optim.SGD).
template <FloatingElement T>
class SGD : public Optimizer<T> {
 public:
  using typename Optimizer<T>::Named;
  // Parameters named "0", "1", ... by position. Error: options or parameters out of range
  // (SgdOptions; Optimizer's constructor).
  SGD(std::vector<GlobalTensor<T>> params, SgdOptions options)
      : SGD(Optimizer<T>::by_position(std::move(params)), options) {}
  // Parameters with their names (model.named_parameters()): state_dict() keys their state by them.
  SGD(Named params, SgdOptions options)
      : Optimizer<T>("SGD", options.lr, std::move(params)), options_(options), momentum_(this->params_.size()) {
    this->check_range("SGD", "momentum", options.momentum, 0, 1);
    this->check_range("SGD", "weight_decay", options.weight_decay, 0, INFINITY);
    SPSD_CHECK(!options.nesterov || options.momentum > 0, "SGD", "nesterov needs momentum > 0");
    identities_ = this->step_identities(
        "sgd_step", detail::concat("momentum=", this->exact(options.momentum), ", weight_decay=",
                                   this->exact(options.weight_decay), ", nesterov=", options.nesterov));
  }

  // One update of every parameter with a gradient (the others are skipped), in place; collective.
  // Error: nn::parallelize or pipeline::Pipeline replaced a parameter after this optimizer took it.
  void step() {
    const detail::HostStep replayed("SGD.step", [this] { step(); });  // a compiled step runs it again
    NoGradGuard no_grad;
    const detail::OpenSpan phase = detail::phase_span("SGD.step");
    this->check_params_current("step");
    const SgdOptions& o = options_;
    using C = compute_t<T>;  // the scalars of a 16-bit step are float
    const kernel::SgdStep<C> args{static_cast<C>(this->lr_), static_cast<C>(o.momentum),
                                  static_cast<C>(o.weight_decay), o.momentum != 0, o.weight_decay != 0, o.nesterov};
    const detail::ScalarOperand step_size = this->step_size_operand(this->lr_);
    for (size_t i = 0; i < this->params_.size(); ++i) {
      std::optional<GlobalTensor<T>> g = this->gradient(i);
      if (!g) continue;
      // A fresh buffer is zero: the first step makes it the gradient, exactly.
      if (args.has_momentum && !momentum_[i]) momentum_[i] = this->zeros_like(i);
      T* buf = args.has_momentum ? this->local_data(*momentum_[i]) : nullptr;
      this->update_locally(i, *g, identities_[i], &step_size, "sgd_step",
                           [&](const kernel::Target& t, T* p, const T* gd, int64_t n) {
                             kernel::sgd_step(t, p, gd, buf, n, args);
                           });
    }
  }

  // A copy of the momentum buffers; load_state takes copies of given ones, boxed into the
  // parameters' layouts. Error: not one entry per parameter, or an entry of another shape.
  SgdState<T> state() const { return {this->copies(momentum_)}; }
  void load_state(SgdState<T> state) { momentum_ = this->adopt_state("momentum", std::move(state.momentum)); }

  // prefix + "lr", and with momentum prefix + "state.<name>.momentum_buffer" per parameter (the
  // buffers themselves: a load_checkpoint into the dict writes them in place).
  StateDict state_dict(const std::string& prefix = "") {
    StateDict sd;
    sd.insert(prefix + "lr", this->scalar_entry(this->lr_));
    if (options_.momentum != 0) this->insert_state(sd, prefix, "momentum_buffer", momentum_);
    return sd;
  }
  // Takes lr and the momentum buffers from sd (a state_dict() of an SGD over parameters of the
  // same names and shapes, in any layout or world size). Collective over the world.
  void load_state_dict(const StateDict& sd, const std::string& prefix = "") {
    auto momentum = options_.momentum != 0 ? this->state_from(sd, prefix, "momentum_buffer", momentum_) : momentum_;
    const double lr = this->template scalar_from<double>(sd, prefix + "lr");
    this->set_lr(lr);
    momentum_ = std::move(momentum);
  }

 private:
  SgdOptions options_;
  std::vector<std::optional<GlobalTensor<T>>> momentum_;  // in the parameter's layout
  std::vector<std::shared_ptr<const detail::OpIdentity>> identities_;
};

// Adam (Kingma & Ba) with L2 weight decay on the gradient (torch.optim.Adam).
template <FloatingElement T>
class Adam : public Optimizer<T> {
 public:
  using typename Optimizer<T>::Named;
  // Parameters named "0", "1", ... by position. Error: options or parameters out of range
  // (AdamOptions; Optimizer's constructor).
  Adam(std::vector<GlobalTensor<T>> params, AdamOptions options)
      : Adam("Adam", Optimizer<T>::by_position(std::move(params)), options, false) {}
  // Parameters with their names (model.named_parameters()): state_dict() keys their state by them.
  Adam(Named params, AdamOptions options) : Adam("Adam", std::move(params), options, false) {}

  // One update of every parameter with a gradient (the others are skipped), in place; counts a
  // step; collective. Error: nn::parallelize or pipeline::Pipeline replaced a parameter after
  // this optimizer took it.
  void step() {
    const detail::HostStep replayed(this->name_, [this] { step(); });  // a compiled step runs it again
    NoGradGuard no_grad;
    const detail::OpenSpan phase = detail::phase_span(this->decoupled_ ? "AdamW.step" : "Adam.step");
    this->check_params_current("step");
    const AdamOptions& o = options_;
    const double lr = this->lr_;
    ++steps_;
    // Bias corrections folded into the step size and eps (Kingma & Ba, end of section 2).
    const double c1 = 1 - std::pow(o.beta1, steps_), c2 = 1 - std::pow(o.beta2, steps_);
    const double step_size = lr * std::sqrt(c2) / c1;
    const bool decays = o.weight_decay != 0;
    using C = compute_t<T>;
    const kernel::AdamStep<C> args{static_cast<C>(o.beta1),
                                   static_cast<C>(1 - o.beta1),
                                   static_cast<C>(o.beta2),
                                   static_cast<C>(1 - o.beta2),
                                   static_cast<C>(step_size),
                                   static_cast<C>(o.eps * std::sqrt(c2)),
                                   static_cast<C>(o.weight_decay),
                                   static_cast<C>(1 - lr * o.weight_decay),
                                   decays && !decoupled_,
                                   decays && decoupled_};
    // Ranks that disagree on lr or on the step count (a state loaded on some ranks only) would
    // apply different updates: the step size holds both.
    const detail::ScalarOperand operand = this->step_size_operand(step_size);
    for (size_t i = 0; i < this->params_.size(); ++i) {
      std::optional<GlobalTensor<T>> g = this->gradient(i);
      if (!g) continue;
      if (!m_[i]) m_[i] = this->zeros_like(i), v_[i] = this->zeros_like(i);
      T* m = this->local_data(*m_[i]);
      T* v = this->local_data(*v_[i]);
      this->update_locally(i, *g, identities_[i], &operand, "adam_step",
                           [&](const kernel::Target& t, T* p, const T* gd, int64_t n) {
                             kernel::adam_step(t, p, gd, m, v, n, args);
                           });
    }
  }

  // The updates taken so far (t of the bias corrections).
  int64_t steps() const { return steps_; }
  // A copy of the step count and moments; load_state takes copies of given ones, boxed into the
  // parameters' layouts. Error: steps < 0, not one entry per parameter, or an entry of another shape.
  AdamState<T> state() const { return {steps_, this->copies(m_), this->copies(v_)}; }
  void load_state(AdamState<T> state) {
    SPSD_CHECK(state.steps >= 0, this->name_, "load_state: steps must be non-negative, got ", state.steps);
    // Both checked before either is taken: a rejected state leaves the optimizer as it was.
    auto m = this->adopt_state("exp_avg", std::move(state.exp_avg));
    auto v = this->adopt_state("exp_avg_sq", std::move(state.exp_avg_sq));
    m_ = std::move(m), v_ = std::move(v), steps_ = state.steps;
  }

  // prefix + "step" (int64), prefix + "lr" (float64), and prefix + "state.<name>.exp_avg" and
  // ".exp_avg_sq" per parameter (the moments themselves, zero where no step made them yet: a
  // load_checkpoint into the dict writes them in place).
  StateDict state_dict(const std::string& prefix = "") {
    StateDict sd;
    sd.insert(prefix + "step", this->scalar_entry(steps_));
    sd.insert(prefix + "lr", this->scalar_entry(this->lr_));
    this->insert_state(sd, prefix, "exp_avg", m_);
    this->insert_state(sd, prefix, "exp_avg_sq", v_);
    return sd;
  }
  // Takes the step count, lr and the moments from sd (a state_dict() of an Adam over parameters
  // of the same names and shapes, in any layout or world size). Collective over the world.
  // Everything is checked before anything is taken.
  void load_state_dict(const StateDict& sd, const std::string& prefix = "") {
    auto m = this->state_from(sd, prefix, "exp_avg", m_);
    auto v = this->state_from(sd, prefix, "exp_avg_sq", v_);
    const int64_t steps = this->template scalar_from<int64_t>(sd, prefix + "step");
    const double lr = this->template scalar_from<double>(sd, prefix + "lr");
    SPSD_CHECK(steps >= 0, this->method("load_state_dict"), "\"", prefix, "step\" must be non-negative, got ", steps);
    this->set_lr(lr);
    m_ = std::move(m), v_ = std::move(v), steps_ = steps;
  }

 protected:
  // AdamW's too: name "Adam" or "AdamW"; decoupled: weight decay applied to the parameter
  // (p *= 1 - lr * weight_decay) instead of added to the gradient.
  Adam(std::string_view name, Named params, AdamOptions options, bool decoupled)
      : Optimizer<T>(name, options.lr, std::move(params)), options_(options), decoupled_(decoupled),
        m_(this->params_.size()), v_(this->params_.size()) {
    this->check_range(name, "beta1", options.beta1, 0, 1 - 1e-12);
    this->check_range(name, "beta2", options.beta2, 0, 1 - 1e-12);
    this->check_range(name, "eps", options.eps, 1e-300, INFINITY);
    this->check_range(name, "weight_decay", options.weight_decay, 0, INFINITY);
    identities_ = this->step_identities(
        "adam_step", detail::concat("beta1=", this->exact(options.beta1), ", beta2=", this->exact(options.beta2),
                                    ", eps=", this->exact(options.eps), ", weight_decay=",
                                    this->exact(options.weight_decay), decoupled ? ", decoupled" : ""));
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
  using typename Adam<T>::Named;
  // By position ("0", "1", ...) or with names, as Adam's constructors; the same errors.
  AdamW(std::vector<GlobalTensor<T>> params, AdamOptions options)
      : Adam<T>("AdamW", Optimizer<T>::by_position(std::move(params)), options, true) {}
  AdamW(Named params, AdamOptions options) : Adam<T>("AdamW", std::move(params), options, true) {}
};

}  // namespace spsd
