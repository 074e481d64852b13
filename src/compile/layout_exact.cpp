// The layout search's exact solver (layout_problem.hpp, improve_exactly): CBC on the whole
// integer programme when it is small enough, else on a chain of repeated blocks: one block
// solved and reused, then the dynamic programme over the chain's seams (layout_chain.cpp) where
// its seams' states are few, else a lower bound by windows.
//
// By block: a step of L alike blocks has a programme L times one block's, and CBC's root linear
// programme alone outgrows any time limit (compile.md, "The exact solver"). Tying every block's
// nodes to block 0's gives the plans that repeat one block: a programme of one block, the ops
// outside the blocks and the seams between blocks, each seam paid L - 1 times. Its optimum is
// the best such plan, priced again on the whole step (the objective check). Whether a plan that
// does not repeat would be cheaper is what the bound says: the step cut into overlapping
// windows of neighbouring parts (windows() below), each cost weighed so that it counts once
// over all windows; the sum of the windows' optima is at most any plan's cost. Alike blocks give
// alike windows: each distinct one is solved once. When the repeated plan meets the bound, it is
// proven optimal among all plans. Where the dynamic programme over the chain finishes, no bound
// is needed: it gives the optimum itself, and a plan that costs it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "layout_problem.hpp"

namespace spsd::detail::layout_search {

namespace {

bool close(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(a)); }

// The plan in a solution: per node, the candidate whose column is set.
std::vector<size_t> plan_of(const ExactSolution& s, const std::vector<std::vector<int>>& x_column, std::vector<size_t> plan) {
  for (size_t n = 0; n < x_column.size(); ++n)
    for (size_t c = 0; c < x_column[n].size(); ++c)
      if (s.values[static_cast<size_t>(x_column[n][c])] > 0.5) plan[n] = c;
  return plan;
}

// A plan as a MIP start: each node's own columns (a tied node's are its tie's: set once).
std::vector<std::pair<int, double>> start_of(const std::vector<size_t>& plan, const std::vector<std::vector<int>>& x_column,
                                             const std::vector<int>& tie) {
  std::vector<std::pair<int, double>> start;
  for (size_t n = 0; n < x_column.size(); ++n)
    if (tie[n] == static_cast<int>(n))
      for (size_t c = 0; c < x_column[n].size(); ++c) start.emplace_back(x_column[n][c], c == plan[n] ? 1.0 : 0.0);
  return start;
}

// The pieces of the lower bound: the parts (outside the blocks, then blocks 0 to L - 1) form a
// ring, each next to the one after it (the step's ends meet outside the blocks); a window is
// `width` neighbours, one starting at each part. Each node is in `width` windows, its work
// weighed 1 / width in each; a value counts in the windows holding its producer and all its
// askers, weighed 1 / their number (in none when its parts are further apart than a window).
// Every plan's cost is then at least the sum of its windows' weighed costs, so at least the sum
// of the windows' optima.
std::vector<Problem::Scope> windows(const Problem& problem, const Problem::Blocks& chain, size_t width) {
  const size_t nodes = chain.part.size(), ring = static_cast<size_t>(chain.count) + 1;
  width = std::min(width, ring);
  auto at = [&](int part) { return static_cast<size_t>(part + 1); };  // a part's place in the ring
  auto holds = [&](size_t w, size_t place) { return (place + ring - w) % ring < width; };
  std::vector<Problem::Scope> out(ring);
  for (size_t w = 0; w < ring; ++w) {
    out[w].tie.assign(nodes, -1);
    out[w].node_weight.assign(nodes, 1.0 / static_cast<double>(width));
    out[w].value_weight.assign(problem.values(), 0);
    out[w].names = false;
    for (size_t n = 0; n < nodes; ++n)
      if (holds(w, at(chain.part[n]))) out[w].tie[n] = static_cast<int>(n);
  }
  std::vector<size_t> in;
  for (size_t v = 0; v < problem.values(); ++v) {
    const std::vector<int> parts = problem.parts_of(v, chain.part);
    if (parts.empty()) {
      out[0].value_weight[v] = 1;  // a fixed value's fixed to_globals: a constant
      continue;
    }
    in.clear();
    for (size_t w = 0; w < ring; ++w)
      if (std::all_of(parts.begin(), parts.end(), [&](int p) { return holds(w, at(p)); })) in.push_back(w);
    for (size_t w : in) out[w].value_weight[v] = 1.0 / static_cast<double>(in.size());
  }
  return out;
}

}  // namespace

ExactOutcome improve_exactly(Problem& problem, const SearchSettings& settings, size_t max_columns, std::vector<size_t>& best,
                             double& best_us, const std::function<bool()>& fits) {
  ExactOutcome out;
  const size_t nodes = problem.nodes().size();
  // CBC's plan, kept when it is cheaper on the objective itself: the programme states the
  // objective, so its value of a plan is the plan's cost (a difference is an error in it).
  auto take = [&](const ExactSolution& s, const std::vector<std::vector<int>>& x_column) {
    if (!s.found) return;
    const std::vector<size_t> solved = plan_of(s, x_column, best);
    problem.set_choices(solved);
    const double t = problem.total();
    SPSD_CHECK(close(t, s.objective), "compile", "the exact solver's plan costs ", t,
               " us on the search's objective, but ", s.objective, " us in the integer programme (an error in the programme)");
    if (t < best_us - 1e-9 && fits()) best_us = t, best = solved, out.kept = true;
    problem.set_choices(best);
  };
  out.columns = problem.programme_columns();
  // A long chain whose seams the dynamic programme takes goes to it first, even where the whole
  // programme fits: its time stays that of a few blocks, CBC's on the whole grows with them.
  const Problem::Blocks chain = problem.repeated_blocks();
  const bool chain_first = chain.count >= kChainFirstBlocks && chain_programme_takes(problem, chain, settings.exact_chain_states);
  if (out.columns <= max_columns && !chain_first) {
    Problem::Scope whole = Problem::Scope::whole(nodes);
    whole.names = false;
    std::vector<std::vector<int>> x_column;
    const IntegerProgramme programme = problem.programme(whole, settings.memory_budget_bytes, x_column);
    const ExactSolution s = solve_exactly(programme, start_of(best, x_column, whole.tie), settings.exact_seconds, "compile");
    out.ran = true, out.seconds = s.seconds;
    take(s, x_column);
    // Proven optimal: CBC's optimum is the plan kept's objective (to rounding).
    out.optimal = s.optimal && best_us <= s.objective + 1e-6 * std::max(1.0, std::abs(s.objective));
    out.lower_bound = out.optimal ? best_us : std::min(s.bound, best_us);
    return out;
  }
  if (chain.count < 2) return out;
  out.blocks = chain.count;
  // At most half the time for the plans that repeat one block; of what is left, three quarters
  // at most for the dynamic programme over the chain, the rest (a quarter at least) for the
  // bound's windows where it does not finish.
  const double seconds = settings.exact_seconds / 2;
  Problem::Scope tied;
  tied.tie = chain.tie, tied.names = false;
  std::vector<std::vector<int>> x_column;
  {
    const IntegerProgramme programme = problem.programme(tied, settings.memory_budget_bytes, x_column);
    out.tied_columns = programme.columns.size();
    if (out.tied_columns <= max_columns) {
      // From the search's plan, every block as block 0 is.
      const ExactSolution s = solve_exactly(programme, start_of(best, x_column, tied.tie), seconds, "compile");
      out.ran = true, out.seconds += s.seconds;
      out.tied_optimal = s.optimal;
      take(s, x_column);
    }
  }
  // The dynamic programme over the chain's seams: the step's optimum where it finishes (a seam of
  // a 2-d mesh has thousands of states: not tried).
  const double left = settings.exact_seconds - out.seconds;
  const ChainOutcome row =
      settings.exact_chain_states > 0 ? solve_chain(problem, chain, 0.75 * left, settings.exact_chain_states, max_columns)
                                      : ChainOutcome{};
  out.chain_stages = row.stages, out.chain_states = row.states;
  out.chain_stages_solved = row.stages_solved, out.chain_solves = row.solves;
  out.seconds += row.seconds;
  out.ran = out.ran || row.solves > 0;
  if (row.exact) {
    out.chain_exact = true;
    problem.set_choices(row.plan);
    const double t = problem.total();
    SPSD_CHECK(close(t, row.optimum), "compile", "the dynamic programme's plan costs ", t, " us on the search's objective, but ",
               row.optimum, " us in its programmes (an error in them)");
    if (t < best_us - 1e-9 && fits()) best_us = t, best = row.plan, out.kept = true;
    problem.set_choices(best);
    // Without the memory budget, the optimum is a bound under one.
    out.lower_bound = std::min(row.optimum, best_us);
    out.optimal = best_us <= row.optimum + 1e-6 * std::max(1.0, std::abs(row.optimum));
    return out;
  }
  const double window_seconds = std::max(left - row.seconds, 0.25 * left);
  // The bound: each window's programme, alike ones solved once; windows of three parts where
  // they fit in the columns CBC is given (a tighter bound), else of two.
  struct Distinct {
    IntegerProgramme programme;
    double times;
  };
  std::vector<Distinct> distinct;
  for (const size_t width : {3, 2}) {
    distinct.clear();
    out.windows = 0, out.window_width = static_cast<int64_t>(width);
    for (const Problem::Scope& window : windows(problem, chain, width)) {
      IntegerProgramme programme = problem.programme(window, 0, x_column);
      if (programme.columns.size() > max_columns) {
        distinct.clear();
        break;
      }
      ++out.windows;
      const auto same = std::find_if(distinct.begin(), distinct.end(), [&](const Distinct& d) { return d.programme == programme; });
      if (same != distinct.end()) same->times += 1;
      else distinct.push_back({std::move(programme), 1});
    }
    if (!distinct.empty()) break;
  }
  if (distinct.empty()) return out;  // no bound by windows
  double bound = 0;
  for (const Distinct& d : distinct) {
    const ExactSolution s = solve_exactly(d.programme, {}, window_seconds / static_cast<double>(distinct.size()), "compile");
    out.ran = true, out.seconds += s.seconds;
    // CBC's bound (at its optimum, no more than the optimum found); every cost is at least 0, so
    // a window stopped before its root's bound counts 0.
    const double reached = s.optimal ? std::min(s.objective, s.bound) : s.bound;
    bound += d.times * (std::isfinite(reached) && reached < 1e40 ? std::max(0.0, reached) : 0.0);
  }
  // A bound above a plan's cost is an error in the windows' programmes.
  SPSD_CHECK(bound <= best_us + 1e-6 * std::max(1.0, best_us), "compile", "the lower bound by windows, ", bound,
             " us, is above the plan's ", best_us, " us (an error in the windows' programmes)");
  out.windows_solved = static_cast<int64_t>(distinct.size());
  out.lower_bound = std::min(bound, best_us);
  out.optimal = best_us <= bound + 1e-6 * std::max(1.0, std::abs(bound));
  return out;
}

}  // namespace spsd::detail::layout_search
