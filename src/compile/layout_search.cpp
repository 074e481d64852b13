// The joint layout search (compile/layout_search.hpp): rank 0 searches the problem
// (layout_problem.hpp), the others take its choices, and the tape is rewritten with them.
#include "spsd/compile/layout_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "layout_problem.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

using layout_search::Node;
using layout_search::Problem;

namespace {

// This thread's CPU time: the search's own, whatever else shares the core (simulated ranks).
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Whether every rank's tape can be searched (each rank decides from its own tape; all must agree).
bool agreed(bool mine) {
  int32_t v = mine ? 1 : 0;
  if (world_size() > 1) world_communicator().all_reduce(&v, &v, 1, DType::kInt32, ReduceOp::kMin);
  return v == 1;
}

// The descents stop at this many seconds from the search's start (a sweep under way finishes).
constexpr double kSearchSeconds = 30;
// While rank 0 searches, the others wait in the broadcast of its choices: for as long as the
// runtime's timeout, lengthened by what the search may take (its descents, the exact solver's
// limit, building the programme), and set back after.
class LongerTimeout {
 public:
  explicit LongerTimeout(double search_seconds) : was_(timeout()) {
    set_timeout(was_ + std::chrono::milliseconds(static_cast<int64_t>(search_seconds * 1000)));
  }
  ~LongerTimeout() { set_timeout(was_); }
  LongerTimeout(const LongerTimeout&) = delete;
  LongerTimeout& operator=(const LongerTimeout&) = delete;

 private:
  std::chrono::milliseconds was_;
};

// What rank 0's search found, sent to the others as doubles.
enum Figure : size_t {
  kEagerUs, kFoundUs, kLowerBoundUs, kRounds, kEagerBytes, kFoundBytes, kCpuSeconds, kRestarts, kRestartKept,
  kExact, kExactOptimal, kExactKept, kExactSeconds, kExactColumns, kBlocks, kTiedColumns, kTiedOptimal, kWindows,
  kWindowsSolved, kWindowWidth, kChainStages, kChainStates, kChainStagesSolved, kChainSolves, kChainExact, kFailed, kFigures
};

// Rank 0's search: the descent (pricing memory higher while the plan is over the budget), the
// restarts, and the exact solver when asked; leaves problem at the plan kept.
void search_here(Problem& problem, const SearchSettings& settings, std::chrono::steady_clock::time_point start,
                 std::vector<double>& figures) {
  const int64_t budget = settings.memory_budget_bytes;
  figures[kEagerUs] = problem.total();
  figures[kEagerBytes] = static_cast<double>(problem.result_bytes());
  double weight = 0;
  int64_t rounds = 0;
  for (int attempt = 0; attempt < 6; ++attempt) {
    rounds += problem.descend(kSearchSeconds, start);
    if (budget <= 0 || problem.result_bytes() <= budget) break;
    // Over budget: price memory higher and search again from here.
    weight = weight == 0 ? 1e-6 : weight * 10;
    problem.set_memory_weight(weight);
  }
  // Restarts, one per mesh axis, each descended at the same price of memory; the best plan on
  // the objective that meets the budget is kept.
  auto objective = [&] {
    problem.set_memory_weight(0);
    const double t = problem.total();
    problem.set_memory_weight(weight);
    return t;
  };
  auto fits = [&] { return budget <= 0 || problem.result_bytes() <= budget; };
  std::vector<size_t> best = problem.choices();
  double best_us = objective();
  for (size_t axis = 0; axis < problem.mesh_axes(); ++axis) {
    problem.set_choices(best);
    if (problem.relabel_to_batch(axis) == 0) continue;
    rounds += problem.descend(kSearchSeconds, start);
    ++figures[kRestarts];
    if (const double t = objective(); t < best_us - 1e-9 && fits()) best_us = t, best = problem.choices(), figures[kRestartKept] = 1;
  }
  problem.set_choices(best);
  problem.set_memory_weight(0);
  double lower_bound = problem.lower_bound();
  if (!settings.problem_file.empty()) {
    std::vector<std::vector<int>> x_column;
    std::ofstream file(settings.problem_file);
    if (file) problem.programme(Problem::Scope::whole(problem.nodes().size()), budget, x_column).write_lp(file);
    SPSD_CHECK(file.good(), "compile", "cannot write the search's problem to \"", settings.problem_file, "\"");
  }
  if (settings.exact_seconds > 0) {
    const layout_search::ExactOutcome exact =
        layout_search::improve_exactly(problem, settings, settings.exact_max_columns, best, best_us, fits);
    figures[kExactColumns] = static_cast<double>(exact.columns);
    figures[kExact] = exact.ran, figures[kExactSeconds] = exact.seconds;
    figures[kExactKept] = exact.kept, figures[kExactOptimal] = exact.optimal;
    figures[kBlocks] = static_cast<double>(exact.blocks), figures[kTiedColumns] = static_cast<double>(exact.tied_columns);
    figures[kTiedOptimal] = exact.tied_optimal;
    figures[kWindows] = static_cast<double>(exact.windows), figures[kWindowsSolved] = static_cast<double>(exact.windows_solved);
    figures[kWindowWidth] = static_cast<double>(exact.window_width);
    figures[kChainStages] = static_cast<double>(exact.chain_stages), figures[kChainStates] = static_cast<double>(exact.chain_states);
    figures[kChainStagesSolved] = static_cast<double>(exact.chain_stages_solved);
    figures[kChainSolves] = static_cast<double>(exact.chain_solves), figures[kChainExact] = exact.chain_exact;
    if (exact.ran) lower_bound = exact.optimal ? best_us : std::max(lower_bound, exact.lower_bound);
  }
  figures[kFoundUs] = problem.total();
  figures[kLowerBoundUs] = lower_bound;
  figures[kRounds] = static_cast<double>(rounds);
  figures[kFoundBytes] = static_cast<double>(problem.result_bytes());
}

}  // namespace

std::string SearchReport::to_string() const {
  if (!searched) return concat("  layouts: eager's choices (not searched: ", why_not, ")\n");
  const double gap = found_us > 0 ? std::max(0.0, (found_us - lower_bound_us) / found_us) : 0;
  return concat("  layouts: searched jointly over ", ops, " ops in ", rounds, " rounds and ", restarts,
                restarts == 1 ? " restart" : " restarts", restarts_kept > 0 ? " (a restart's plan kept)" : "", " (",
                cpu_seconds * 1e3,
                " ms of rank 0's CPU, ", seconds * 1e3, " ms in all), ",
                changed, " signatures changed; predicted ", found_us, " us per step against eager's ", eager_us,
                " us; lower bound ", lower_bound_us, " us (gap ", gap * 100, " %); results ", result_bytes,
                " B per rank (eager's: ", eager_result_bytes, " B)",
                memory_budget_bytes > 0 ? concat("; memory budget ", memory_budget_bytes, " B ",
                                                 result_bytes <= memory_budget_bytes ? "met" : "NOT met")
                                        : std::string(),
                priced_as.empty() ? std::string() : concat("; priced as ", priced_as),
                exact_report(), "\n");
}

std::string SearchReport::exact_report() const {
  if (!asked_exact) return {};
  if (exact_blocks == 0) {
    if (!exact) return concat("; exact solver not run: the programme's ", exact_columns, " columns are over the ",
                              exact_max_columns, " it is given whole, and the step is no chain of repeated blocks");
    return concat("; exact solver (CBC, ", exact_seconds, " s, ", exact_columns, " columns): ",
                  exact_optimal ? "optimal, proven" : "stopped at its time limit", exact_kept ? ", its plan kept" : "");
  }
  const std::string tied =
      exact_tied_columns > static_cast<int64_t>(exact_max_columns)
          ? concat("its programme's ", exact_tied_columns, " columns over the ", exact_max_columns, ", not solved")
          : concat(exact_tied_columns, " columns, ", exact_tied_optimal ? "optimal among plans repeating it" : "stopped at its time limit",
                   exact_kept ? ", its plan kept" : "");
  const std::string row =
      exact_chain_exact
          ? concat("the dynamic programme over its seams (", exact_chain_stages, " stages, at most ", exact_seam_states,
                   " states a seam; ", exact_chain_solves, " programmes solved in ", exact_chain_stages_solved, " stages",
                   exact_chain_stages_solved < exact_chain_stages ? ", the other blocks' reused" : "", ") ",
                   exact_optimal ? "proves it optimal" : "gives the optimum, the lower bound")
      : exact_chain_solves > 0 ? concat("the dynamic programme over its seams stopped at its time limit after ", exact_chain_solves, " programmes")
      : exact_chain_states == 0 ? std::string("no dynamic programme over its seams (exact_chain_states 0)")
      : exact_seam_states > static_cast<int64_t>(exact_chain_states)
          ? concat("no dynamic programme over its seams (a seam of ", exact_seam_states, " states, over the ", exact_chain_states, " it takes)")
      : exact_chain_stages > 0 ? std::string("no dynamic programme over its seams (a stage's programme over the columns given)")
                               : std::string("no dynamic programme over its seams (its parts form no row of stages)");
  const std::string whole =
      exact_columns > static_cast<int64_t>(exact_max_columns)
          ? concat("the whole programme's ", exact_columns, " columns being over the ", exact_max_columns)
          : concat("the whole programme's ", exact_columns, " columns left for the chain's programme (", kChainFirstBlocks,
                   " blocks or more, whose seams it takes)");
  if (exact_chain_exact)
    return concat("; exact solver (CBC, ", exact_seconds, " s) on a chain of ", exact_blocks, " repeated blocks, ", whole,
                  ": one block solved and reused (", tied, "); ", row);
  const std::string bound = exact_windows_solved == 0 ? std::string("no lower bound by windows (a window over the columns given)")
                            : concat(exact_optimal ? "the " : "", "lower bound by windows of ", exact_window_width, " parts (",
                                     exact_windows_solved, " distinct of ", exact_windows, ")", exact_optimal ? " proves it optimal" : "");
  return concat("; exact solver (CBC, ", exact_seconds, " s) on a chain of ", exact_blocks, " repeated blocks, ", whole,
                ": one block solved and reused (", tied, "); ", row, "; ", bound);
}

SearchReport search_layouts(Tape& tape, const SearchSettings& settings, std::span<const FreeParameter> free_parameters) {
  SearchReport report;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = thread_seconds();
  const int64_t memory_budget_bytes = settings.memory_budget_bytes;
  const std::optional<DeviceType>& price_as = settings.price_as;
  Problem problem(tape, 0, price_as, free_parameters);
  if (price_as) report.priced_as = std::string(to_string(*price_as));
  if (!agreed(problem.searchable())) {
    report.why_not = problem.searchable() ? "another rank's step has an op outside the whole world" : problem.why_not();
    return report;
  }
  std::vector<Node>& nodes = problem.nodes();
  // Rank 0 searches; the others take its choices (the same graph everywhere: the same program).
  std::vector<int64_t> choices(nodes.size());
  std::vector<double> figures(kFigures, 0);
  std::string failure;
  if (rank() == 0) {
    try {
      search_here(problem, settings, start, figures);
    } catch (const Error& e) {  // every rank throws it, after the broadcast
      failure = e.what();
      figures[kFailed] = static_cast<double>(failure.size()) + 1;
    }
    figures[kCpuSeconds] = thread_seconds() - cpu_start;
    for (size_t n = 0; n < nodes.size(); ++n) choices[n] = static_cast<int64_t>(nodes[n].choice);
  }
  if (world_size() > 1) {
    const LongerTimeout waiting(2 * kSearchSeconds + 2 * settings.exact_seconds + (settings.exact_seconds > 0 ? 120 : 0));
    world_communicator().broadcast(choices.data(), static_cast<int64_t>(choices.size()), DType::kInt64, 0);
    world_communicator().broadcast(figures.data(), static_cast<int64_t>(figures.size()), DType::kFloat64, 0);
  }
  if (figures[kFailed] != 0) {  // rank 0's error, on every rank
    std::vector<int32_t> text(static_cast<size_t>(figures[kFailed]) - 1);
    for (size_t i = 0; i < failure.size() && i < text.size(); ++i) text[i] = static_cast<unsigned char>(failure[i]);
    if (world_size() > 1) world_communicator().broadcast(text.data(), static_cast<int64_t>(text.size()), DType::kInt32, 0);
    failure.assign(text.begin(), text.end());
    throw Error(failure);
  }
  for (size_t n = 0; n < nodes.size(); ++n) nodes[n].choice = static_cast<size_t>(choices[n]);
  report.searched = true;
  report.ops = static_cast<int64_t>(nodes.size());
  report.eager_us = figures[kEagerUs], report.found_us = figures[kFoundUs], report.lower_bound_us = figures[kLowerBoundUs];
  report.rounds = static_cast<int64_t>(figures[kRounds]);
  report.restarts = static_cast<int64_t>(figures[kRestarts]), report.restarts_kept = static_cast<int64_t>(figures[kRestartKept]);
  report.eager_result_bytes = static_cast<int64_t>(figures[kEagerBytes]);
  report.result_bytes = static_cast<int64_t>(figures[kFoundBytes]);
  report.exact = figures[kExact] != 0, report.exact_optimal = figures[kExactOptimal] != 0;
  report.exact_kept = figures[kExactKept] != 0, report.exact_seconds = figures[kExactSeconds];
  report.exact_columns = static_cast<int64_t>(figures[kExactColumns]), report.asked_exact = settings.exact_seconds > 0;
  report.exact_max_columns = settings.exact_max_columns;
  report.exact_blocks = static_cast<int64_t>(figures[kBlocks]), report.exact_tied_columns = static_cast<int64_t>(figures[kTiedColumns]);
  report.exact_tied_optimal = figures[kTiedOptimal] != 0;
  report.exact_windows = static_cast<int64_t>(figures[kWindows]), report.exact_windows_solved = static_cast<int64_t>(figures[kWindowsSolved]);
  report.exact_window_width = static_cast<int64_t>(figures[kWindowWidth]);
  report.exact_chain_stages = static_cast<int64_t>(figures[kChainStages]), report.exact_seam_states = static_cast<int64_t>(figures[kChainStates]);
  report.exact_chain_states = settings.exact_chain_states;
  report.exact_chain_stages_solved = static_cast<int64_t>(figures[kChainStagesSolved]);
  report.exact_chain_solves = static_cast<int64_t>(figures[kChainSolves]), report.exact_chain_exact = figures[kChainExact] != 0;
  report.cpu_seconds = figures[kCpuSeconds];
  report.memory_budget_bytes = memory_budget_bytes;
  if (!free_parameters.empty()) {
    // A plan for parameters re-laid before another capture: the tape stays as captured.
    for (size_t i = 0; i < free_parameters.size(); ++i) {
      const int n = problem.parameter_node(i);
      report.parameter_layouts.push_back(n < 0 ? NdSbp{} : problem.layout(nodes[static_cast<size_t>(n)].out_layout[nodes[static_cast<size_t>(n)].choice]));
    }
    for (const Node& n : nodes) report.changed += n.choice != n.eager;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
  }
  report.changed = problem.apply();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace spsd::detail
