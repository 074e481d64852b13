#pragma once
// nn::parallelize(model, plan): lays a single-device model out as plan says (nn/plan.hpp). Each
// parameter moves to its layout (from B, a split is a local slice: no communication) and stays a
// leaf that requires grad; matched modules get their boundary layouts. Make the optimizer after,
// from model.named_parameters(): it then holds the laid-out tensors. A parameter moves into a
// new tensor (its layout is part of the value): an optimizer made before still holds the old
// one, and its step() and zero_grad() throw spsd::Error saying so.
#include <string>
#include <vector>

#include "spsd/nn/module.hpp"
#include "spsd/nn/plan.hpp"

namespace spsd::nn {

namespace detail {

// Up to 8 of names, for an error message that helps fix a misspelt pattern.
inline std::string some_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 8) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s.empty() ? "none" : s;
}

// The layout the last rule matching name gives, if any; marks the rules that matched.
inline const Rule* last_match(const std::vector<Rule>& rules, const std::string& name, std::vector<bool>& used) {
  const Rule* found = nullptr;
  for (size_t i = 0; i < rules.size(); ++i)
    if (name_matches(rules[i].pattern, name)) found = &rules[i], used[i] = true;
  return found;
}

inline void check_all_used(const AxisPlan& axis, const char* kind, const std::vector<Rule>& rules,
                           const std::vector<bool>& used, const std::vector<std::string>& names) {
  for (size_t i = 0; i < rules.size(); ++i)
    SPSD_CHECK(used[i] || rules[i].optional, "nn::parallelize", "the ", axis.name, " plan's ", kind, " rule \"",
               rules[i].pattern, "\" matches no ", kind, "; the model has: ", some_names(names));
}

// Which rules of a plan matched something: per mesh axis, per rule. Kept across calls when one
// plan lays out several parts of a model (the stages of a pipeline, pipeline/stages.hpp).
struct PlanUse {
  std::vector<std::vector<bool>> parameters, inputs, outputs;
  bool any_match = false;
  explicit PlanUse(const Plan& plan) {
    for (const AxisPlan& axis : plan.axes) {
      parameters.emplace_back(axis.parameters.size(), false);
      inputs.emplace_back(axis.inputs.size(), false);
      outputs.emplace_back(axis.outputs.size(), false);
    }
  }
};

// Checks the plan itself against placement: one axis plan per mesh axis, S or B layouts only.
inline void check_plan(const Plan& plan, const Placement& placement) {
  SPSD_CHECK(plan.axes.size() == static_cast<size_t>(placement.mesh().ndim()), "nn::parallelize", "the plan ",
             plan.to_string(), " has ", plan.axes.size(), " mesh axes, the model's placement ", placement, " has ",
             placement.mesh().ndim());
  for (const AxisPlan& axis : plan.axes)
    for (const auto& [rules, kind] : {std::pair{&axis.parameters, "parameter"}, std::pair{&axis.inputs, "input"},
                                      std::pair{&axis.outputs, "output"}})
      for (const Rule& r : *rules)
        SPSD_CHECK(!r.layout.is_partial(), "nn::parallelize", "the ", axis.name, " plan's ", kind, " rule \"",
                   r.pattern, "\" asks for ", r.layout, "; a plan's layouts are S or B");
}

// Lays out the parameters `slots` (all on `placement`) and sets the boundary layouts of
// `modules` (paths from the model's root) as plan says, noting in use which rules matched.
template <FloatingElement T>
void apply_plan(const std::vector<std::pair<std::string, typename Module<T>::Parameter*>>& slots,
                const std::vector<std::pair<std::string, Module<T>*>>& modules, const Placement& placement,
                const Plan& plan, PlanUse& use) {
  const size_t ndim = plan.axes.size();
  for (auto& [name, slot] : slots) {
    SPSD_CHECK(slot->placement() == placement, "nn::parallelize", "the parameter ", name, " is on ",
               slot->placement(), ", the model's first parameter on ", placement);
    std::vector<Sbp> target;
    for (size_t a = 0; a < ndim; ++a) {
      const Rule* r = last_match(plan.axes[a].parameters, name, use.parameters[a]);
      use.any_match = use.any_match || r != nullptr;
      const Sbp s = r ? r->layout : sbp::broadcast;
      if (s.is_split()) {
        const int64_t rank = slot->shape().ndim(), axis = s.axis() < 0 ? s.axis() + rank : s.axis();
        SPSD_CHECK(axis >= 0 && axis < rank, "nn::parallelize", "the ", plan.axes[a].name, " plan's rule \"",
                   r->pattern, "\" splits the parameter ", name, " of shape ", slot->shape(), " on axis ", s.axis());
      }
      target.push_back(s);
    }
    const NdSbp layout(std::move(target));
    if (layout == slot->nd_sbp()) continue;
    const std::shared_ptr<spsd::detail::AutogradMeta> old_meta = slot->autograd_meta();
    *slot = slot->detach().to_global(layout);
    slot->requires_grad_();
    // An optimizer made before holds the old tensor: it must refuse to step what the model dropped.
    if (old_meta) old_meta->replaced_by = spsd::detail::concat("nn::parallelize (the model's ", name, " is now ", slot->describe(), ")");
  }
  for (auto& [path, m] : modules) {
    typename Module<T>::BoundaryLayouts b{std::vector<std::optional<Sbp>>(ndim), std::vector<std::optional<Sbp>>(ndim)};
    bool in = false, out = false;
    for (size_t a = 0; a < ndim; ++a) {
      if (const Rule* r = last_match(plan.axes[a].inputs, path, use.inputs[a])) b.input[a] = r->layout, in = true;
      if (const Rule* r = last_match(plan.axes[a].outputs, path, use.outputs[a])) b.output[a] = r->layout, out = true;
    }
    use.any_match = use.any_match || in || out;
    if (!in) b.input.clear();
    if (!out) b.output.clear();
    m->set_boundary_layouts(std::move(b));
  }
}

// Every rule that is not optional matched something (names: what the model has, for the message).
inline void check_plan_used(const Plan& plan, const PlanUse& use, const std::vector<std::string>& parameter_names,
                            const std::vector<std::string>& module_names) {
  bool any_rule = false;  // a plan whose every rule is optional still has to fit
  for (size_t a = 0; a < plan.axes.size(); ++a) {
    const AxisPlan& axis = plan.axes[a];
    any_rule = any_rule || !axis.parameters.empty() || !axis.inputs.empty() || !axis.outputs.empty();
    check_all_used(axis, "parameter", axis.parameters, use.parameters[a], parameter_names);
    check_all_used(axis, "input", axis.inputs, use.inputs[a], module_names);
    check_all_used(axis, "output", axis.outputs, use.outputs[a], module_names);
  }
  SPSD_CHECK(!any_rule || use.any_match, "nn::parallelize", "no rule of the plan ", plan.to_string(),
             " matches a parameter or module of the model; its parameters: ", some_names(parameter_names));
}

}  // namespace detail

// Lays model's parameters out as plan says (the top of this file).
template <FloatingElement T>
void parallelize(Module<T>& model, const Plan& plan) {
  auto slots = model.parameter_slots();
  SPSD_CHECK(!slots.empty(), "nn::parallelize", "the model has no parameters");
  const Placement placement = slots.front().second->placement();
  detail::check_plan(plan, placement);
  std::vector<std::string> parameter_names, module_names;
  for (auto& [name, p] : slots) parameter_names.push_back(name);
  auto modules = model.named_modules();
  for (auto& [path, m] : modules)
    if (!path.empty()) module_names.push_back(path);
  detail::PlanUse use(plan);
  detail::apply_plan<T>(slots, modules, placement, plan, use);
  detail::check_plan_used(plan, use, parameter_names, module_names);
}

}  // namespace spsd::nn
