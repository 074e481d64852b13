#pragma once
// nn::search_plan: parameters' layouts chosen by the joint layout search of spsd::compile
// (docs/compile.md, "Parameters' layouts searched"), returned as a Plan to parallelize a model
// with. The step is captured once on the model as it is (its plan's layouts are the start); the
// search then chooses every op's signature and every parameter's layout together, a parameter's
// gradient boxed to the layout chosen for it, under the memory budget (parameters count four
// times: themselves, their gradients and Adam's two moments).
//
//   nn::parallelize(model, plan);               // search_plan starts from the model as it is
//   Adam<float> adam(model.parameters(), {});   // the optimizer `step` uses
//   auto found = nn::search_plan(model, plan, step, {.memory_budget_bytes = budget}, x, y);
//   std::cout << found.explanation;
//   nn::parallelize(fresh_model, found.plan);   // then the optimizer, then compile(step)
//
// Capturing runs the step once (its optimizer steps too): search on a model made for planning,
// such as one built inside spsd::dry_run, then build the model to train.
#include <algorithm>
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
  std::string search_problem_file;      // as CompileOptions::search_problem_file
  double exact_seconds = 0;             // as CompileOptions::exact_seconds
  size_t exact_max_columns = 120000;    // as CompileOptions::exact_max_columns
  size_t exact_chain_states = 256;      // as CompileOptions::exact_chain_states
};

// What search_plan found: a plan to parallelize a model with, and what the search said.
struct SearchedPlan {
  // The plan given, and (where the search re-laid any) a rule per parameter with its layout.
  Plan plan{std::vector<AxisPlan>{}};
  std::vector<std::pair<std::string, NdSbp>> changed;  // those parameters and their layouts
  std::string explanation;  // the search's figures, then one line per parameter changed
  // Predicted step time (us) and memory per rank (parameters x 4 plus the results of the ops),
  // of the plan found with the op signatures the search chose with it, and of the plan given
  // with eager's (start_).
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
                                                  .price_as = options.price_as,
                                                  .search_problem_file = options.search_problem_file,
                                                  .exact_seconds = options.exact_seconds,
                                                  .exact_max_columns = options.exact_max_columns,
                                                  .exact_chain_states = options.exact_chain_states});
  compiled(args...);
  std::vector<spsd::detail::FreeParameter> free;
  for (const auto& [name, p] : named) free.push_back({p.data().local.get(), p.autograd_meta().get()});
  const spsd::detail::SearchReport report = compiled.search_parameters(free);
  SPSD_CHECK(report.searched, "search_plan", "the step cannot be searched: ", report.why_not);
  SearchedPlan found{plan, {}, report.to_string(), report.found_us, report.eager_us, report.result_bytes,
                     report.eager_result_bytes};
  // A rule matches a name by its last components (name_matches), so "fc.weight" would also lay
  // out "block.fc.weight": once anything changed, every parameter gets a rule with its full name,
  // those of fewer components first, so that each parameter's own rule comes last and wins.
  std::vector<size_t> order;
  for (size_t i = 0; i < named.size(); ++i) {
    const NdSbp& chosen = report.parameter_layouts[i];
    const GlobalTensor<T>& p = named[i].second;
    order.push_back(i);
    if (chosen.size() == 0 || chosen == p.nd_sbp()) continue;
    found.changed.emplace_back(named[i].first, chosen);
    found.explanation += spsd::detail::concat("  ", named[i].first, " ", p.shape(), ": ", p.nd_sbp(), " -> ", chosen, "\n");
  }
  if (found.changed.empty()) {
    found.explanation += "  every parameter keeps its layout\n";
    return found;
  }
  const auto components = [&](size_t i) { return std::count(named[i].first.begin(), named[i].first.end(), '.'); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return components(a) < components(b); });
  for (size_t i : order) {
    const NdSbp& chosen = report.parameter_layouts[i].size() ? report.parameter_layouts[i] : named[i].second.nd_sbp();
    for (int64_t a = 0; a < mesh_axes; ++a) {
      nn::AxisPlan& axis = found.plan.axes[static_cast<size_t>(a)];
      axis = axis.with_parameter(named[i].first, chosen[static_cast<size_t>(a)]);
    }
  }
  return found;
}

}  // namespace spsd::nn
