#pragma once
// nn::Module: the base of the layers in spsd/nn (docs/modules.md). A module owns parameters
// (global tensors that require grad) and child modules, both registered under a name, so that
// named_parameters() can list every parameter of a model by its path ("blocks.0.attn.q.weight"):
// the names parallelization plans (nn/parallelize.hpp) and checkpoints (state_dict()) use.
//
// A module is written as for one device. Its parameters are made on one placement (any mesh),
// replicated (B on every mesh axis) from layout-independent randn, so their values do not depend
// on the layout; parallelize() then re-lays them out, which slices (B -> S is local).
//
// Parameters are registered as pointers to the module's own members, so a module is neither
// copied nor moved: a model is built in place, and sequences of blocks live in a ModuleList.
// T is the parameters' type (the masters under mixed precision); a layer's forward computes in
// the type of its input, casting each parameter on use.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spsd/autograd/node.hpp"
#include "spsd/io/checkpoint.hpp"
#include "spsd/runtime/seed_stream.hpp"
#include "spsd/tensor/factory.hpp"

namespace spsd::nn {

// Where and from what a model's parameters are made: the placement all of them live on, and the
// seed of the first; each parameter takes the next seed, in construction order (the same on
// every rank), so a model's values depend only on (seed, its architecture).
struct Init {
  Placement placement;
  uint64_t seed = 0;

  // B on every mesh axis: the layout parameters start in.
  NdSbp replicated() const { return NdSbp(std::vector<Sbp>(placement.mesh().ndim(), sbp::broadcast)); }
  template <FloatingElement T>
  GlobalTensor<T> normal(const Shape& shape, double std) {
    return randn<T>(shape, placement, replicated(), seed++) * static_cast<T>(std);
  }
  template <FloatingElement T>
  GlobalTensor<T> uniform(const Shape& shape, double bound) {  // in [-bound, bound)
    return (rand<T>(shape, placement, replicated(), seed++) * static_cast<T>(2 * bound)) - static_cast<T>(bound);
  }
  template <FloatingElement T>
  GlobalTensor<T> constant(const Shape& shape, double value) {
    return full<T>(shape, static_cast<T>(value), placement, replicated());
  }
};

// The base of the layers: named parameters and child modules, train/eval, state dicts.
template <FloatingElement T>
class Module {
 public:
  using Parameter = GlobalTensor<T>;

  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Every parameter of this module and its children, depth first in registration order, named
  // by its path. A parameter registered twice (a tied weight) is listed once, under its first name.
  std::vector<std::pair<std::string, Parameter>> named_parameters() const {
    std::vector<std::pair<std::string, Parameter>> out;
    for (auto& [name, slot] : const_cast<Module*>(this)->parameter_slots()) out.emplace_back(name, *slot);
    return out;
  }
  std::vector<Parameter> parameters() const {
    std::vector<Parameter> out;
    for (auto& [name, p] : named_parameters()) out.push_back(p);
    return out;
  }
  // The parameters under their names, sharing storage: load_checkpoint(dir, sd) on it writes the
  // model's parameters in place; save_checkpoint(sd, dir) saves them. prefix: "model." gives
  // "model.fc1.weight", to keep a model and an optimizer's state in one StateDict.
  StateDict state_dict(const std::string& prefix = "") const {
    StateDict sd;
    for (auto& [name, p] : named_parameters()) sd.insert(prefix + name, p);
    return sd;
  }
  // The members themselves, for what replaces a parameter (parallelize): same order as
  // named_parameters().
  std::vector<std::pair<std::string, Parameter*>> parameter_slots() {
    std::vector<std::pair<std::string, Parameter*>> out;
    collect("", out);
    return out;
  }

  // This module and every module under it, depth first, with its path ("" for this one, then
  // "attn", "attn.q", ...): the names a plan's boundary rules match (nn/plan.hpp).
  std::vector<std::pair<std::string, Module*>> named_modules() {
    std::vector<std::pair<std::string, Module*>> out{{"", this}};
    for (auto& [name, child] : children_)
      for (auto& [path, m] : child->named_modules()) out.emplace_back(path.empty() ? name : name + "." + path, m);
    return out;
  }

  // Layouts a plan pins at this module's boundary, one optional Sbp per mesh axis (an axis without
  // one keeps what the tensor has; empty: nothing pinned). The layer boxes its input into `input`
  // before computing and its result into `output` after (a Linear boxes its matmul before adding
  // the bias, as Megatron's row-parallel layer reduce-scatters before its bias): what makes
  // Megatron's sequence parallelism exact whatever the resolver would pick op by op.
  struct BoundaryLayouts {
    std::vector<std::optional<Sbp>> input, output;
  };
  // Pins, or reads, the layouts above.
  void set_boundary_layouts(BoundaryLayouts b) { boundary_ = std::move(b); }
  const BoundaryLayouts& boundary_layouts() const { return boundary_; }

  // Training mode (the default) or evaluation mode (eval(): dropout off), for this module and
  // every child.
  void train(bool on = true) {
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
  }
  void eval() { train(false); }
  bool training() const { return training_; }

 protected:
  Module() = default;

  // p becomes a parameter named name (requires grad from here on).
  void register_parameter(std::string name, Parameter& p) {
    check_new_name(name);
    if (!p.requires_grad()) p.requires_grad_();
    parameters_.emplace_back(std::move(name), &p);
  }
  void register_module(std::string name, Module& child) {
    check_new_name(name);
    children_.emplace_back(std::move(name), &child);
  }

  // x boxed into the pinned input (or output) layout; x itself when nothing is pinned or it is
  // there already. Recorded for autograd like any to_global.
  template <Element C>
  GlobalTensor<C> at_input_boundary(const GlobalTensor<C>& x) const { return pinned(x, boundary_.input); }
  template <Element C>
  GlobalTensor<C> at_output_boundary(const GlobalTensor<C>& y) const { return pinned(y, boundary_.output); }

 private:
  void check_new_name(const std::string& name) const {
    SPSD_CHECK(!name.empty() && name.find('.') == std::string::npos && name.find(' ') == std::string::npos,
               "nn::Module", "a parameter or child name must be non-empty, without dots or spaces, got \"", name, "\"");
    for (auto& [n, p] : parameters_) SPSD_CHECK(n != name, "nn::Module", "the name \"", name, "\" is registered twice");
    for (auto& [n, c] : children_) SPSD_CHECK(n != name, "nn::Module", "the name \"", name, "\" is registered twice");
  }

  template <Element C>
  static GlobalTensor<C> pinned(const GlobalTensor<C>& x, const std::vector<std::optional<Sbp>>& axes) {
    if (axes.empty()) return x;
    SPSD_CHECK(axes.size() == x.nd_sbp().size(), "nn::Module", "a boundary layout names ", axes.size(),
               " mesh axes, the tensor ", x.describe(), " has ", x.nd_sbp().size());
    std::vector<Sbp> target;
    for (size_t a = 0; a < axes.size(); ++a) target.push_back(axes[a] ? *axes[a] : x.nd_sbp()[a]);
    NdSbp nd(std::move(target));
    return nd == x.nd_sbp() ? x : x.to_global(nd);
  }

  void collect(const std::string& prefix, std::vector<std::pair<std::string, Parameter*>>& out) {
    for (auto& [name, p] : parameters_) {
      bool seen = false;  // a tied parameter: one member registered by two modules
      for (auto& [n, q] : out) seen = seen || q == p;
      if (!seen) out.emplace_back(prefix + name, p);
    }
    for (auto& [name, child] : children_) child->collect(prefix + name + ".", out);
  }

  std::vector<std::pair<std::string, Parameter*>> parameters_;
  std::vector<std::pair<std::string, Module*>> children_;
  BoundaryLayouts boundary_;
  bool training_ = true;
};

// A sequence of modules of one type, named "0", "1", ...: the blocks of a transformer.
template <FloatingElement T, class M>
class ModuleList : public Module<T> {
 public:
  ModuleList() = default;
  // Appends a module made from args, registered under its index.
  template <class... Args>
  M& emplace_back(Args&&... args) {
    items_.push_back(std::make_unique<M>(std::forward<Args>(args)...));
    this->register_module(std::to_string(items_.size() - 1), *items_.back());
    return *items_.back();
  }
  // The number of modules, one by index (out of range: std::out_of_range), and iteration.
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) { return *items_.at(i); }
  const M& operator[](size_t i) const { return *items_.at(i); }
  auto begin() const { return Deref{items_.begin()}; }
  auto end() const { return Deref{items_.end()}; }

 private:
  struct Deref {
    typename std::vector<std::unique_ptr<M>>::const_iterator it;
    const M& operator*() const { return **it; }
    Deref& operator++() {
      ++it;
      return *this;
    }
    bool operator!=(const Deref& o) const { return it != o.it; }
  };
  std::vector<std::unique_ptr<M>> items_;
};

}  // namespace spsd::nn
