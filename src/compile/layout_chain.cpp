// The layout search's exact dynamic programme over a chain of repeated blocks (layout_problem.hpp,
// solve_chain).
//
// A step of L alike blocks, cut where its parts meet, is a row of stages (the ops before the
// blocks, block 0, ..., block L - 1, the ops after them) in which every value's producer and
// askers are in one stage or in two next to each other. A value is counted by the stage of its
// askers (its home); where its producer is in the stage before or after, the layout the producer
// makes is the seam's state. Fix the states on both sides of a stage and its cost no longer
// depends on any other stage: the least cost of the step is a shortest path through the seams'
// states, f_t+1(s') = min over s of f_t(s) + C_t(s, s'), each C_t a stage's programme solved by CBC
// for a right-hand state, the left-hand states priced by f_t. Alike blocks have alike programmes:
// once f moves by the same amount for every state from one block to the next, it does so through
// every alike block after (min-plus is linear), so those blocks are not solved again but their
// solution reused. The result is the optimum of the whole step, not a bound.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "layout_problem.hpp"

namespace spsd::detail::layout_search {

namespace {

constexpr double kUnreachable = std::numeric_limits<double>::infinity();

// The step as a row of stages, or why it is not one.
struct Stages {
  std::vector<int> of;                    // per node: its stage
  int count = 0;
  std::vector<int> home;                  // per value: the stage that counts it (-1: no cost)
  std::vector<std::vector<int>> nodes;    // per stage: its nodes, in order
  std::vector<std::vector<int>> seam;     // per seam t (stages t and t + 1): values made across it from their home
  std::vector<std::vector<std::vector<int>>> states;  // per seam: each state, a layout per seam value
  int64_t most_states = 0;
  std::string why_not;
};

int find(std::vector<int>& parent, int a) {
  while (parent[static_cast<size_t>(a)] != a) a = parent[static_cast<size_t>(a)] = parent[static_cast<size_t>(parent[static_cast<size_t>(a)])];
  return a;
}

// The nodes that decide value v's cost: its producer, its consumers, and the parameters its
// gradient is boxed to.
std::vector<int> members(const Problem& problem, size_t v) {
  const ValueInfo& info = problem.value(v);
  std::vector<int> out;
  if (info.producer >= 0) out.push_back(info.producer);
  for (const Use& u : info.uses) out.push_back(u.node);
  for (const Sink& s : info.sinks)
    if (s.link >= 0) out.push_back(s.link);
  return out;
}

Stages stages_of(const Problem& problem, const Problem::Blocks& chain, size_t max_states) {
  Stages st;
  const size_t nodes = chain.part.size(), values = problem.values();
  const int blocks = static_cast<int>(chain.count);
  // Pieces: each block, and each set of the ops outside the blocks joined by values among them.
  std::vector<int> parent(nodes);
  std::iota(parent.begin(), parent.end(), 0);
  for (size_t v = 0; v < values; ++v) {
    int anchor = -1;
    for (int n : members(problem, v)) {
      if (chain.part[static_cast<size_t>(n)] >= 0) continue;
      if (anchor < 0) anchor = n;
      else parent[static_cast<size_t>(find(parent, n))] = find(parent, anchor);
    }
  }
  std::vector<int> piece(nodes), outside_piece(nodes, -1);
  int pieces = blocks;
  for (size_t n = 0; n < nodes; ++n) {
    if (chain.part[n] >= 0) {
      piece[n] = chain.part[n];
      continue;
    }
    const size_t root = static_cast<size_t>(find(parent, static_cast<int>(n)));
    if (outside_piece[root] < 0) outside_piece[root] = pieces++;
    piece[n] = outside_piece[root];
  }
  // Pieces next to each other share a value; a value across three is no chain.
  std::vector<std::vector<int>> next(static_cast<size_t>(pieces));
  for (size_t v = 0; v < values; ++v) {
    std::vector<int> p;
    for (int n : members(problem, v)) p.push_back(piece[static_cast<size_t>(n)]);
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    if (p.size() > 2) {
      st.why_not = concat("value ", v, " joins ", p.size(), " parts");
      return st;
    }
    if (p.size() == 2) {
      auto& a = next[static_cast<size_t>(p[0])];
      if (std::find(a.begin(), a.end(), p[1]) == a.end()) a.push_back(p[1]), next[static_cast<size_t>(p[1])].push_back(p[0]);
    }
  }
  // A row: from an end (one neighbour), each piece to the next; pieces with no neighbour join
  // the first stage (they share nothing with the others).
  int end = -1;
  for (int p = 0; p < pieces && end < 0; ++p)
    if (next[static_cast<size_t>(p)].size() == 1) end = p;
  std::vector<int> stage_of_piece(static_cast<size_t>(pieces), -1);
  for (int p = end, before = -1; p >= 0;) {
    stage_of_piece[static_cast<size_t>(p)] = st.count++;
    int after = -1;
    for (int q : next[static_cast<size_t>(p)])
      if (q != before) after = q;
    if (next[static_cast<size_t>(p)].size() > 2 || (after >= 0 && stage_of_piece[static_cast<size_t>(after)] >= 0)) {
      st.why_not = concat("its parts form no row (part ", p, " has ", next[static_cast<size_t>(p)].size(), " neighbours)");
      return st;
    }
    before = p, p = after;
  }
  for (int p = 0; p < pieces; ++p) {
    if (stage_of_piece[static_cast<size_t>(p)] >= 0) continue;
    if (!next[static_cast<size_t>(p)].empty()) {
      st.why_not = "its parts form no row (a ring, or two)";
      return st;
    }
    stage_of_piece[static_cast<size_t>(p)] = 0;
  }
  if (st.count < 3) {
    st.why_not = "its parts form no row";
    return st;
  }
  st.of.resize(nodes);
  st.nodes.assign(static_cast<size_t>(st.count), {});
  for (size_t n = 0; n < nodes; ++n) {
    st.of[n] = stage_of_piece[static_cast<size_t>(piece[n])];
    st.nodes[static_cast<size_t>(st.of[n])].push_back(static_cast<int>(n));
  }
  // Each value's home: its askers' stage (its producer's where none asks; the first for a fixed
  // value's fixed to_globals).
  st.home.assign(values, -1);
  st.seam.assign(static_cast<size_t>(st.count - 1), {});
  for (size_t v = 0; v < values; ++v) {
    const ValueInfo& info = problem.value(v);
    if (!info.meta) continue;
    std::vector<int> m = members(problem, v);
    if (info.producer >= 0 && m.size() > 1) m.erase(m.begin());  // the askers
    int home = m.empty() ? 0 : st.of[static_cast<size_t>(m[0])];
    for (int n : m)
      if (st.of[static_cast<size_t>(n)] != home) {
        st.why_not = concat("value ", v, " is asked for in two stages");
        return st;
      }
    st.home[v] = home;
    if (info.producer >= 0 && st.of[static_cast<size_t>(info.producer)] != home)
      st.seam[static_cast<size_t>(std::min(home, st.of[static_cast<size_t>(info.producer)]))].push_back(static_cast<int>(v));
  }
  // A seam's states: every layout of each of its values.
  st.states.resize(st.seam.size());
  for (size_t t = 0; t < st.seam.size(); ++t) {
    size_t count = 1;
    for (int v : st.seam[t]) count *= problem.layouts_of(v).size();
    st.most_states = std::max(st.most_states, static_cast<int64_t>(count));
    if (count > max_states) {
      st.why_not = concat("a seam of ", count, " states");
      return st;
    }
    std::vector<std::vector<int>>& all = st.states[t];
    all.assign(1, {});
    for (int v : st.seam[t]) {
      std::vector<std::vector<int>> longer;
      for (const std::vector<int>& s : all)
        for (int l : problem.layouts_of(v)) {
          longer.push_back(s);
          longer.back().push_back(l);
        }
      all = std::move(longer);
    }
  }
  return st;
}

// Stage t's programme: its nodes' work and the values it is home to; the producers of those
// made across a seam are in it at no work, their columns saying which layout the value comes in.
struct StageProgramme {
  IntegerProgramme programme;
  std::vector<std::vector<int>> x_column;
};

StageProgramme stage_programme(Problem& problem, const Stages& st, int t) {
  const size_t nodes = st.of.size();
  Problem::Scope scope;
  scope.tie.assign(nodes, -1);
  scope.node_weight.assign(nodes, 0);
  scope.value_weight.assign(problem.values(), 0);
  scope.names = false;
  for (int n : st.nodes[static_cast<size_t>(t)]) scope.tie[static_cast<size_t>(n)] = n, scope.node_weight[static_cast<size_t>(n)] = 1;
  for (size_t v = 0; v < problem.values(); ++v) {
    if (st.home[v] != t) continue;
    scope.value_weight[v] = 1;
    if (const int p = problem.value(v).producer; p >= 0) scope.tie[static_cast<size_t>(p)] = p;
  }
  StageProgramme s;
  s.programme = problem.programme(scope, 0, s.x_column);
  return s;
}

// Stage t's programme for right-hand state r (none for the last stage): each value made across
// seam t by a producer that makes its layout in r; the left-hand states (seam t - 1) as 0-1
// columns z priced by f, one of them taken, each linked to the layouts its values' producers make
// (z[s] = -1: a state no plan reaches).
IntegerProgramme state_programme(const Problem& problem, const Stages& st, const StageProgramme& base, size_t t, size_t r,
                                 const std::vector<double>& f, std::vector<int>& z) {
  IntegerProgramme p = base.programme;
  auto column = [&](int node, size_t c) { return base.x_column[static_cast<size_t>(node)][c]; };
  if (t + 1 < static_cast<size_t>(st.count))
    for (size_t i = 0; i < st.seam[t].size(); ++i) {
      const int producer = problem.value(static_cast<size_t>(st.seam[t][i])).producer;
      const Node& n = problem.nodes()[static_cast<size_t>(producer)];
      for (size_t c = 0; c < n.candidates.size(); ++c)
        if (n.out_layout[c] != st.states[t][r][i]) p.columns[static_cast<size_t>(column(producer, c))].upper = 0;
    }
  z.assign(t > 0 ? st.states[t - 1].size() : 0, -1);
  if (t == 0) return p;
  std::vector<std::pair<int, double>> one;
  for (size_t s = 0; s < z.size(); ++s)
    if (std::isfinite(f[s])) z[s] = p.add_column({}, f[s], true), one.emplace_back(z[s], 1);
  p.add_row({}, std::move(one), 1, 1);
  const std::vector<int>& values = st.seam[t - 1];
  for (size_t i = 0; i < values.size(); ++i) {
    const int producer = problem.value(static_cast<size_t>(values[i])).producer;
    const Node& n = problem.nodes()[static_cast<size_t>(producer)];
    for (int l : problem.layouts_of(values[i])) {
      std::vector<std::pair<int, double>> terms;  // the producer makes l exactly when a state with l is taken
      for (size_t c = 0; c < n.candidates.size(); ++c)
        if (n.out_layout[c] == l) terms.emplace_back(column(producer, c), 1);
      for (size_t s = 0; s < z.size(); ++s)
        if (z[s] >= 0 && st.states[t - 1][s][i] == l) terms.emplace_back(z[s], -1);
      p.add_row({}, std::move(terms), 0, 0);
    }
  }
  return p;
}

// One stage's solution for one right-hand state: its nodes' candidates and the left-hand state.
struct StageSolution {
  double cost = kUnreachable;
  std::vector<size_t> choices;  // per node of the stage, in order
  int left = -1;
};

}  // namespace

bool chain_programme_takes(const Problem& problem, const Problem::Blocks& chain, size_t max_states) {
  return chain.count >= 2 && max_states > 0 && stages_of(problem, chain, max_states).why_not.empty();
}

ChainOutcome solve_chain(Problem& problem, const Problem::Blocks& chain, double seconds, size_t max_states, size_t max_columns) {
  ChainOutcome out;
  const auto begin = std::chrono::steady_clock::now();
  auto left_s = [&] { return seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
  auto stop = [&](std::string why) {
    out.why_not = std::move(why);
    out.seconds = seconds - left_s();
    return out;
  };
  const Stages st = stages_of(problem, chain, max_states);
  out.states = st.most_states;
  if (!st.why_not.empty()) return stop(st.why_not);
  out.stages = st.count;
  const size_t last = static_cast<size_t>(st.count - 1);
  // solved[t][r]: stage t's solution for right-hand state r (the last stage: one, no state);
  // copy[t]: the stage whose solutions stage t reuses (itself when solved).
  std::vector<std::vector<StageSolution>> solved(static_cast<size_t>(st.count));
  std::vector<size_t> copy(static_cast<size_t>(st.count));
  std::iota(copy.begin(), copy.end(), 0);
  std::vector<double> f;  // per state of seam t - 1: the least cost of the stages before it
  IntegerProgramme previous;
  for (size_t t = 0; t <= last; ++t) {
    StageProgramme base = stage_programme(problem, st, static_cast<int>(t));
    if (base.programme.columns.size() > max_columns)
      return stop(concat("stage ", t, "'s programme has ", base.programme.columns.size(), " columns, over the ", max_columns));
    const size_t rights = t < last ? st.states[t].size() : 1;
    std::vector<double> g(rights, kUnreachable);
    solved[t].resize(rights);
    std::vector<int> z;  // the left-hand states' columns
    for (size_t r = 0; r < rights; ++r) {
      const IntegerProgramme p = state_programme(problem, st, base, t, r, f, z);
      if (left_s() <= 0) return stop(concat("stopped at its time limit after ", out.solves, " programmes"));
      const ExactSolution s = solve_exactly(p, {}, left_s(), "compile");
      ++out.solves;
      if (s.infeasible) continue;
      if (!s.optimal) return stop(concat("stopped at its time limit after ", out.solves, " programmes"));
      StageSolution& here = solved[t][r];
      here.cost = g[r] = s.objective;
      for (int n : st.nodes[t]) {
        size_t chosen = 0;
        for (size_t c = 0; c < base.x_column[static_cast<size_t>(n)].size(); ++c)
          if (s.values[static_cast<size_t>(base.x_column[static_cast<size_t>(n)][c])] > 0.5) chosen = c;
        here.choices.push_back(chosen);
      }
      for (size_t k = 0; k < z.size(); ++k)
        if (z[k] >= 0 && s.values[static_cast<size_t>(z[k])] > 0.5) here.left = static_cast<int>(k);
    }
    ++out.stages_solved;
    // Alike with the stage before, between alike seams, and f moved by the same amount for every
    // state: every alike stage after moves it by that amount again, solved as this one is.
    const bool alike = t >= 2 && t < last && base.programme == previous && st.states[t] == st.states[t - 1] &&
                       st.states[t - 1] == st.states[t - 2];
    double shift = kUnreachable;
    bool moved_alike = alike;
    for (size_t r = 0; moved_alike && r < rights; ++r) {
      if (std::isinf(g[r]) != std::isinf(f[r])) moved_alike = false;
      else if (std::isfinite(g[r])) {
        if (std::isinf(shift)) shift = g[r] - f[r];
        moved_alike = std::abs(g[r] - f[r] - shift) <= 1e-7 * std::max(1.0, std::abs(g[r]));
      }
    }
    moved_alike = moved_alike && std::isfinite(shift);
    f = std::move(g);
    previous = std::move(base.programme);
    if (!moved_alike) continue;
    size_t reach = t;
    while (reach + 1 < last && st.states[reach + 1] == st.states[t] &&
           st.nodes[reach + 1].size() == st.nodes[t].size() &&
           stage_programme(problem, st, static_cast<int>(reach + 1)).programme == previous)
      copy[++reach] = t;
    for (double& v : f) v += shift * static_cast<double>(reach - t);
    t = reach;
  }
  // The plan: back from the last stage, each stage's solution for the state the next one chose.
  out.optimum = f[0];
  out.plan = problem.choices();
  for (size_t t = last + 1, r = 0; t-- > 0;) {
    const StageSolution& s = solved[copy[t]][r];
    SPSD_CHECK(std::isfinite(s.cost), "compile", "the dynamic programme over the chain reached stage ", t,
               " in a state it found no plan for (an error in it)");
    for (size_t k = 0; k < st.nodes[t].size(); ++k) out.plan[static_cast<size_t>(st.nodes[t][k])] = s.choices[k];
    r = static_cast<size_t>(std::max(0, s.left));
  }
  out.exact = true;
  return stop({});
}

}  // namespace spsd::detail::layout_search
