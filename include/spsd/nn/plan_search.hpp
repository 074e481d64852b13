#pragma once
// nn::search_plan: parameters' layouts chosen by the joint layout search of spsd::compile
// (docs/compile.md, "Parameters' layouts searched"), returned as a Plan to parallelize a model
// with. The step is captured once on the model as it is (its plan's layouts are the start); the
// search then chooses every op's signature and every parameter's layout together, a parameter's
// gradient boxed to the layout chosen for it, under the memory budget (parameters count four
// times: themselves, their gradients and Adam's two moments).
//
//   auto found = nn::search_plan(model, plan, step, {.memory_budget_bytes = budget}, x, y);
//   std::cout << found.explanation;
//   nn::parallelize(fresh_model, found.plan);   // then the optimizer, then compile(step)
//
// Capturing runs the step once (its optimizer steps too): search on a model made for planning,
// such as one built inside spsd::dry_run, then build the model to train.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spsd/compile/compile.hpp"
#include "spsd/nn/module.hpp"
#include "spsd/nn/plan.hpp"

namespace spsd::nn {

// What search_plan searches under.
struct PlanSearchOptions {
  int64_t memory_budget_bytes = 0;      // per rank: parameters x 4 plus the step's results; 0: none
  std::optional<DeviceType> price_as;   // as CompileOptions::price_as
};

// What search_plan found: a plan to parallelize a model with, and what the search said.
struct SearchedPlan {
  Plan plan{std::vector<AxisPlan>{}};  // the plan given, with a rule per parameter whose layout the search changed
  std::vector<std::pair<std::string, NdSbp>> changed;  // those parameters and their layouts
  std::string explanation;  // the search's figures, then one line per parameter changed
  // The search's measures of the plan found and of the plan given, with eager's op signatures:
  // predicted step time (us) and memory per rank (parameters x 4 plus the step's results).
  double predicted_us = 0, start_predicted_us = 0;
  int64_t memory_bytes = 0, start_memory_bytes = 0;
};

// The plan search (top of this file). model: its parameters in plan's layouts; step(args...):
// the training step (forward, backward, optimizer) as spsd::compile takes it. Collective over
// the world; an Error on every rank where the step cannot be searched (an op outside the whole
// world) or plan does not have one axis per mesh axis.
template <FloatingElement T, class F, class... Args>
SearchedPlan search_plan(const Module<T>& model, const Plan& plan, F step, const PlanSearchOptions& options,
                         const Args&... args) {
  const std::vector<std::pair<std::string, GlobalTensor<T>>> named = model.named_parameters();
  SPSD_CHECK(!named.empty(), "search_plan", "the model has no parameters");
  const int64_t mesh_axes = named.front().second.placement().mesh().ndim();
  SPSD_CHECK(static_cast<int64_t>(plan.axes.size()) == mesh_axes, "search_plan", "plan ", plan.to_string(), " has ",
             plan.axes.size(), " axes, the model's mesh ", mesh_axes);
  auto compiled = spsd::compile(std::move(step), {.search_layouts = false,
                                                  .memory_budget_bytes = options.memory_budget_bytes,
                                                  .price_as = options.price_as});
  compiled(args...);
  std::vector<spsd::detail::FreeParameter> free;
  for (const auto& [name, p] : named) free.push_back({p.data().local.get(), p.autograd_meta().get()});
  const spsd::detail::SearchReport report = compiled.search_parameters(free);
  SPSD_CHECK(report.searched, "search_plan", "the step cannot be searched: ", report.why_not);
  SearchedPlan found{plan, {}, report.to_string(), report.found_us, report.eager_us, report.result_bytes,
                     report.eager_result_bytes};
  for (size_t i = 0; i < named.size(); ++i) {
    const NdSbp& chosen = report.parameter_layouts[i];
    const GlobalTensor<T>& p = named[i].second;
    if (chosen.size() == 0 || chosen == p.nd_sbp()) continue;
    for (int64_t a = 0; a < mesh_axes; ++a)
      found.plan.axes[static_cast<size_t>(a)] = found.plan.axes[static_cast<size_t>(a)].with_parameter(named[i].first, chosen[static_cast<size_t>(a)]);
    found.changed.emplace_back(named[i].first, chosen);
    found.explanation += spsd::detail::concat("  ", named[i].first, " ", p.shape(), ": ", p.nd_sbp(), " -> ", chosen, "\n");
  }
  if (found.changed.empty()) found.explanation += "  every parameter keeps its layout\n";
  return found;
}

}  // namespace spsd::nn
