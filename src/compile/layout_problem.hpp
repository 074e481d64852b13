#pragma once
// The joint layout search's problem (compile/layout_search.hpp): the step as a graph of nodes
// (ops, free to_globals, free parameters) with their candidates, the values between them, the
// objective (work, boxing once per value and layout, memory), the moves that lower it, the
// restarts, and the integer programme that states it. Built and searched on rank 0 by
// layout_search.cpp; layout_problem.cpp builds the graph and writes the choices back into the
// tape, layout_programme.cpp states the programme.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "spsd/boxing/cost.hpp"
#include "spsd/boxing/planner.hpp"
#include "spsd/boxing/to_layout.hpp"
#include "spsd/compile/integer_programme.hpp"
#include "spsd/compile/layout_search.hpp"
#include "spsd/op/captured_op.hpp"

namespace spsd::detail::layout_search {

inline constexpr double kForbidden = 1e30;  // boxing into a partial layout: never worth it (the resolver's rule)

struct Use {
  int node;      // the consuming op node
  size_t input;  // which of its inputs
};

// A to_global of a value (a fixed end): its cost depends on the layout the value comes in. A
// free parameter's gradient is boxed to that parameter's layout, whichever the search chooses:
// link names its node (-1: the layout is fixed).
struct Sink {
  Placement to;
  NdSbp layout;
  int link = -1;
};

struct ValueInfo {
  const TensorMeta* meta = nullptr;
  const Placement* placement = nullptr;
  int producer = -1;                 // op node, or -1: a fixed layout
  int fixed = -1;                    // the layout (id) of a value no op node makes
  std::vector<Use> uses;
  std::vector<Sink> sinks;
  std::vector<int> sink_layouts;     // the sinks' layouts (ids)
  bool keep = false;                 // an output or a gradient: its producer keeps its layout
  int kind = -1;                     // values of one shape, dtype and placement share their boxing costs
};

// An op (its candidates are its N-d signatures), a to_global whose result nothing outside the
// step sees (its candidates are layouts: which one the step boxes to is the search's to choose,
// the value being the same logical tensor in any), or a free parameter (its candidates are the
// layouts it may be given before the step; its gradient follows it).
struct Node {
  size_t entry;          // SIZE_MAX for a parameter
  const CapturedOp* op;  // null for a to_global or a parameter
  const CapturedBoxing* boxing = nullptr;  // a to_global's
  std::vector<int> inputs;
  int output;
  std::vector<size_t> candidates;  // indices into the resolution's candidates
  size_t choice = 0;               // index into candidates
  size_t eager = 0;
  std::vector<double> work;        // per candidate: local work and result memory cost
  std::vector<int64_t> result_bytes;
  std::vector<int> out_layout;                // per candidate, the output's layout (id)
  std::vector<std::vector<int>> in_layouts;   // per candidate, each input's layout (id)
  bool parameter = false;
  int captured = -1;          // a parameter's layout at capture (id)
  std::vector<int> linked;    // a parameter's: the values whose sinks follow its layout
  const NdSignature& sig(size_t c) const { return op->resolution().candidates[candidates[c]].signature; }
};

// A parameter, its gradient and its optimizer's two moments (Adam's) live as long as the model:
// what a parameter's piece costs the memory budget, per byte of the piece.
inline constexpr int64_t kParameterCopies = 4;

// The layouts a value may be boxed to on this mesh: those its producer can make and those its
// consumers can take, gathered as the nodes are built.
using LayoutSet = std::vector<int>;

inline int64_t piece_bytes(const TensorMeta& meta, const Shape& mesh, const NdSbp& layout) {
  static thread_local std::vector<int64_t> origin;
  origin.assign(static_cast<size_t>(mesh.ndim()), 0);
  return piece_numel(meta.shape, mesh, layout, origin) * size_of(meta.dtype);
}

// Local compute per flop, for the ops whose work is not their bytes (matmul): a core's 100
// GFLOP/s (OpenBLAS sgemm: 231 GFLOP/s on the 2 cores of bench/kernels' machine), a GPU's 100
// TFLOP/s. Only the ratio to the boxing costs matters.
inline double flop_us(DeviceType device) { return device == DeviceType::kCUDA ? 1e-8 : 1e-5; }

class Problem {
 public:
  Problem(Tape& tape, double memory_weight, std::optional<DeviceType> price_as, std::span<const FreeParameter> free)
      : tape_(tape), memory_weight_(memory_weight), price_as_(price_as) {
    build(free);
  }
  std::vector<size_t> choices() const {
    std::vector<size_t> c(nodes_.size());
    for (size_t n = 0; n < nodes_.size(); ++n) c[n] = nodes_[n].choice;
    return c;
  }
  void set_choices(const std::vector<size_t>& c) {
    for (size_t n = 0; n < nodes_.size(); ++n) nodes_[n].choice = c[n];
  }
  // The number of mesh axes (the longest layout's).
  size_t mesh_axes() const {
    size_t axes = 0;
    for (const NdSbp& l : layouts_) axes = std::max(axes, l.size());
    return axes;
  }

  // A restart: every op and free to_global to the candidate whose signature is its current one
  // with each split on mesh axis `axis` made a split of dimension 0 (the batch, for a step's
  // activations), where there is one; the others, and parameters, as they are (the descent that
  // follows mends the seams). Returns how many moved.
  int64_t relabel_to_batch(size_t axis);

  // Who asks for a value in which layout, per candidate: a consumer, or a gradient boxed to its
  // parameter's layout.
  struct Asker {
    int node;
    std::vector<int> needs;
  };
  // v's askers by group: the consumers first, sharing their boxings; then each gradient boxed to
  // its parameter's layout, a group of its own (value_cost counts it on its own).
  std::vector<std::vector<Asker>> askers_of(size_t v) const;
  static std::vector<int> needed_layouts(const std::vector<Asker>& group);
  // The columns programme() would make of the whole problem: its size, known before it is built.
  size_t programme_columns();

  // Which nodes a programme chooses for and which costs it counts, with what weight. The whole
  // problem: every node its own columns, every cost once. Tied: nodes at the same place of
  // repeated blocks share their columns (the plans that repeat one block; values alike share
  // their boxing columns, paid once per value). A piece of the step for a lower bound: some
  // nodes, and values whose producer is among them, weighted so that over all pieces each cost
  // counts at most once (the piece's optimum is then at most its share of any plan's cost).
  struct Scope {
    std::vector<int> tie;              // per node: the node whose columns it takes (itself when free), or -1: not in the programme
    std::vector<double> node_weight;   // per node: its work's weight (empty: 1)
    std::vector<double> value_weight;  // per value: its boxing's weight (empty: 1; 0: not counted)
    bool names = true;                 // columns and rows named (the LP file), or left unnamed (a solve)
    static Scope whole(size_t nodes) {
      Scope s;
      s.tie.resize(nodes);
      std::iota(s.tie.begin(), s.tie.end(), 0);
      return s;
    }
  };
  // The parts v's producer and askers (consumers, gradients' parameters) are in (part_of's
  // indices; a fixed value has no producer), sorted, each once.
  std::vector<int> parts_of(size_t v, const std::vector<int>& part_of) const;

  // The problem (its scope) as a 0-1 integer programme with the objective total() computes:
  // column x_n_c, node n takes candidate c (one per node); y_v_g_f_l, value v boxed from layout f
  // to l for group g of its askers (at most what v coming in f allows, and at least what each
  // asker needing l asks: a boxing is paid once for all the consumers that need it; a gradient
  // boxed to its parameter's layout is a group of its own, as value_cost counts it); fixed
  // to_globals' costs on the producer's candidates; boxing into a partial layout excluded; the
  // memory budget a constraint on the results' bytes (the whole step's only: with every weight
  // 1). x_column[n][c] is x_n_c's column (a tied node's, its tie's).
  IntegerProgramme programme(const Scope& scope, int64_t memory_budget_bytes, std::vector<std::vector<int>>& x_column);

  // A chain of repeated blocks in the step (layout_blocks.cpp): runs of nodes whose ops and
  // inputs' and output's kinds repeat with a period, the runs of one count of copies (a
  // transformer's forward blocks, then their backward in reverse), copies joined into blocks by
  // the values between them.
  struct Blocks {
    int64_t count = 0;      // blocks found (0: none)
    std::vector<int> part;  // per node: its block, or -1 (outside every block)
    std::vector<int> tie;   // per node: the node at its place in block 0, with the same candidates; or itself
  };
  Blocks repeated_blocks();

  // The node of free parameter i, or -1 (the step does not read it).
  int parameter_node(size_t i) const { return i < parameter_nodes_.size() ? parameter_nodes_[i] : -1; }
  const NdSbp& layout(int id) const { return layouts_[static_cast<size_t>(id)]; }

  size_t values() const { return values_.size(); }
  const ValueInfo& value(size_t v) const { return values_[v]; }
  // Every layout v may take.
  std::vector<int> layouts_of(int v) const {
    const ValueInfo& info = values_[static_cast<size_t>(v)];
    if (info.producer < 0) return {info.fixed};
    std::vector<int> out;
    for (int l : nodes_[static_cast<size_t>(info.producer)].out_layout)
      if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
    return out;
  }
  bool searchable() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }

  // The objective with the current choices.
  double total() {
    double t = 0;
    for (const Node& n : nodes_) t += n.work[n.choice];
    for (size_t v = 0; v < values_.size(); ++v) t += value_cost(static_cast<int>(v));
    return t;
  }
  int64_t result_bytes() const {
    int64_t b = 0;
    for (const Node& n : nodes_) b += n.result_bytes[n.choice];
    return b;
  }
  void set_memory_weight(double w) {
    memory_weight_ = w;
    for (Node& n : nodes_) fill_work(n);
  }

  // Sweeps single and pair moves until none lowers the objective (or the time is up); returns
  // the sweeps made.
  // After the first sweep, only nodes near a change are tried again (a move's gain depends on
  // its neighbours' choices only).
  int64_t descend(double deadline_s, std::chrono::steady_clock::time_point start) {
    int64_t rounds = 0;
    std::vector<char> dirty(nodes_.size(), 1), moved(nodes_.size(), 0);
    for (bool improved = true; improved;) {
      improved = false;
      ++rounds;
      std::fill(moved.begin(), moved.end(), 0);
      for (size_t n = 0; n < nodes_.size(); ++n)
        if (dirty[n] && best_single(static_cast<int>(n))) improved = true, moved[n] = 1;
      for (size_t n = 0; n < nodes_.size(); ++n) {
        const int out = nodes_[n].output;
        if (out < 0) continue;
        for (const Use& u : values_[static_cast<size_t>(out)].uses)
          if ((dirty[n] || dirty[static_cast<size_t>(u.node)]) && best_pair(static_cast<int>(n), u.node))
            improved = true, moved[n] = moved[static_cast<size_t>(u.node)] = 1;
      }
      std::fill(dirty.begin(), dirty.end(), 0);
      for (size_t n = 0; n < nodes_.size(); ++n)
        if (moved[n]) mark_neighbours(static_cast<int>(n), dirty);
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > deadline_s) break;
    }
    return rounds;
  }

  // Every node at its own cheapest work, every edge at its own cheapest pair of ends.
  double lower_bound() {
    double lb = 0;
    for (const Node& n : nodes_) lb += *std::min_element(n.work.begin(), n.work.end());
    for (size_t v = 0; v < values_.size(); ++v) {
      const ValueInfo& info = values_[v];
      const std::vector<int> from = layouts_of(static_cast<int>(v));
      // One boxing per distinct layout: the dearest use's cheapest is a bound, not their sum.
      double forced = 0;
      for (const Use& u : info.uses) {
        double best = kForbidden;
        const Node& m = nodes_[static_cast<size_t>(u.node)];
        for (int f : from)
          for (size_t c = 0; c < m.candidates.size(); ++c)
            best = std::min(best, edge(static_cast<int>(v), f, m.in_layouts[c][u.input]));
        forced = std::max(forced, best);
      }
      lb += forced;
      for (size_t s = 0; s < info.sinks.size(); ++s) {
        double best = kForbidden;
        const int link = info.sinks[s].link;
        for (int f : from) {
          if (link < 0) best = std::min(best, sink_edge(static_cast<int>(v), f, s));
          else
            for (int to : nodes_[static_cast<size_t>(link)].out_layout) best = std::min(best, edge(static_cast<int>(v), f, to));
        }
        lb += best;
      }
    }
    return lb;
  }

  // The tape rewritten with the choices: each op's resolution with its chosen signature and no
  // boxing of its own; before it, a to_global entry for each input that needs another layout,
  // made once per (value, layout) and shared by every op that needs it; to_globals re-planned
  // from their input's new layout, and removed where they now move nothing.
  int64_t apply();

 private:
  void build(std::span<const FreeParameter> free);

  // Its layout at capture first (eager's choice), then every S/B layout its consumers can take
  // or its gradient comes in.
  void parameter_candidates(Node& n);

  void fail(std::string why) { why_not_ = std::move(why); }

  // n and every node that shares a value with it.
  void mark_neighbours(int n, std::vector<char>& dirty) const {
    const Node& node = nodes_[static_cast<size_t>(n)];
    dirty[static_cast<size_t>(n)] = 1;
    auto around = [&](int v) {
      if (v < 0) return;
      const ValueInfo& info = values_[static_cast<size_t>(v)];
      if (info.producer >= 0) dirty[static_cast<size_t>(info.producer)] = 1;
      for (const Use& u : info.uses) dirty[static_cast<size_t>(u.node)] = 1;
      for (const Sink& s : info.sinks)
        if (s.link >= 0) dirty[static_cast<size_t>(s.link)] = 1;
    };
    for (int v : node.inputs) around(v);
    around(node.output);
    for (int v : node.linked) around(v);
  }

  int kind_of(int v) {
    ValueInfo& info = values_[static_cast<size_t>(v)];
    if (info.kind < 0) {
      const std::string key = concat(info.meta->shape, " ", info.meta->dtype, " ", *info.placement);
      info.kind = kinds_.try_emplace(key, static_cast<int>(kinds_.size())).first->second;
    }
    return info.kind;
  }

  int intern(const NdSbp& layout) {
    for (size_t i = 0; i < layouts_.size(); ++i)
      if (layouts_[i] == layout) return static_cast<int>(i);
    layouts_.push_back(layout);
    return static_cast<int>(layouts_.size() - 1);
  }

  int layout_id(int v) const {
    const ValueInfo& info = values_[static_cast<size_t>(v)];
    if (info.producer < 0) return info.fixed;
    const Node& n = nodes_[static_cast<size_t>(info.producer)];
    return n.out_layout[n.choice];
  }
  const NdSbp& layout_of(int v) const { return layouts_[static_cast<size_t>(layout_id(v))]; }

  void fill_work(Node& n);

  // The boxing cost of value v from layout `from` into `need`, on its own placement.
  double edge(int v, int from, int need) {
    if (from == need) return 0;
    if (layouts_[static_cast<size_t>(need)].has_partial()) return kForbidden;
    const uint64_t key = (static_cast<uint64_t>(kind_of(v)) << 32) | (static_cast<uint64_t>(from) << 16) |
                         static_cast<uint64_t>(need);
    const auto [it, inserted] = edges_.try_emplace(key, 0.0);
    if (inserted) {
      const ValueInfo& info = values_[static_cast<size_t>(v)];
      const Placement& on = priced(*info.placement);
      it->second =
          plan_boxing(info.meta->shape, info.meta->dtype, on, layouts_[static_cast<size_t>(from)], on, layouts_[static_cast<size_t>(need)])
              ->cost_us;
    }
    return it->second;
  }
  // The cost of v's s-th to_global when v comes in layout `from`.
  double sink_edge(int v, int from, size_t s) {
    const ValueInfo& info = values_[static_cast<size_t>(v)];
    const Sink& sink = info.sinks[s];
    if (sink.to == *info.placement) return edge(v, from, info.sink_layouts[s]);
    const uint64_t key =
        (uint64_t{1} << 63) | (static_cast<uint64_t>(v) << 32) | (static_cast<uint64_t>(from) << 16) | s;
    const auto [it, inserted] = edges_.try_emplace(key, 0.0);
    if (inserted)
      it->second = plan_boxing(info.meta->shape, info.meta->dtype, priced(*info.placement), layouts_[static_cast<size_t>(from)],
                               priced(sink.to), sink.layout)
                       ->cost_us;
    return it->second;
  }
  // What v's boxing costs with the current choices: one conversion per distinct layout its
  // consumers need (the compiled step boxes a value once per layout, compile/tape.hpp), plus its
  // to_globals.
  double value_cost(int v) {
    const ValueInfo& info = values_[static_cast<size_t>(v)];
    const int from = layout_id(v);
    double t = 0;
    std::vector<int>& seen = seen_;  // the layouts boxed to so far: each is paid once
    seen.clear();
    for (const Use& u : info.uses) {
      const Node& m = nodes_[static_cast<size_t>(u.node)];
      const int need = m.in_layouts[m.choice][u.input];
      if (need == from || std::find(seen.begin(), seen.end(), need) != seen.end()) continue;
      seen.push_back(need);
      t += edge(v, from, need);
    }
    for (size_t s = 0; s < info.sinks.size(); ++s) {
      const int link = info.sinks[s].link;
      if (link < 0) t += sink_edge(v, from, s);
      else t += edge(v, from, nodes_[static_cast<size_t>(link)].out_layout[nodes_[static_cast<size_t>(link)].choice]);
    }
    return t;
  }
  // The part of the objective that depends on the choices of the nodes in group: their work
  // and the cost of every value they read or make.
  double local_cost(std::initializer_list<int> group) {
    double t = 0;
    std::vector<int>& touched = touched_;  // each value's cost once
    touched.clear();
    auto touch = [&](int v) {
      if (v < 0 || std::find(touched.begin(), touched.end(), v) != touched.end()) return;
      touched.push_back(v);
      t += value_cost(v);
    };
    for (int g : group) {
      const Node& n = nodes_[static_cast<size_t>(g)];
      t += n.work[n.choice];
      for (int v : n.inputs) touch(v);
      touch(n.output);
      for (int v : n.linked) touch(v);
    }
    return t;
  }
  bool best_single(int n) {
    Node& node = nodes_[static_cast<size_t>(n)];
    const size_t was = node.choice;
    double best = local_cost({n});
    size_t pick = was;
    for (size_t c = 0; c < node.candidates.size(); ++c) {
      if (c == was) continue;
      node.choice = c;
      const double t = local_cost({n});
      if (t < best - 1e-9) best = t, pick = c;
    }
    node.choice = pick;
    return pick != was;
  }
  // The best few choices of node n alone (the others as they are), at most k.
  std::vector<size_t> shortlist(int n, size_t k) {
    Node& node = nodes_[static_cast<size_t>(n)];
    const size_t was = node.choice;
    std::vector<std::pair<double, size_t>> costs;
    for (size_t c = 0; c < node.candidates.size(); ++c) node.choice = c, costs.emplace_back(local_cost({n}), c);
    node.choice = was;
    std::sort(costs.begin(), costs.end());
    std::vector<size_t> out;
    for (size_t i = 0; i < costs.size() && i < k; ++i) out.push_back(costs[i].second);
    if (std::find(out.begin(), out.end(), was) == out.end()) out.push_back(was);
    return out;
  }
  // A producer and a consumer changed together (a signature pair that pays only as a pair, such
  // as a split matmul with its split consumer). Large tables: each node's best six alone.
  bool best_pair(int a, int b) {
    if (a == b) return false;
    Node& na = nodes_[static_cast<size_t>(a)];
    Node& nb = nodes_[static_cast<size_t>(b)];
    const size_t wa = na.choice, wb = nb.choice;
    constexpr size_t kShort = 6;
    if (na.candidates.size() < 2 || nb.candidates.size() < 2) return false;
    std::vector<size_t> ca_list, cb_list;
    if (na.candidates.size() * nb.candidates.size() > kShort * kShort) {
      ca_list = shortlist(a, kShort), cb_list = shortlist(b, kShort);
    } else {
      ca_list.resize(na.candidates.size()), cb_list.resize(nb.candidates.size());
      std::iota(ca_list.begin(), ca_list.end(), size_t{0});
      std::iota(cb_list.begin(), cb_list.end(), size_t{0});
    }
    double best = local_cost({a, b});
    size_t pa = wa, pb = wb;
    for (size_t ca : ca_list)
      for (size_t cb : cb_list) {
        if (ca == wa && cb == wb) continue;
        na.choice = ca, nb.choice = cb;
        const double t = local_cost({a, b});
        if (t < best - 1e-9) best = t, pa = ca, pb = cb;
      }
    na.choice = pa, nb.choice = pb;
    return pa != wa || pb != wb;
  }

  // p, or its ranks and mesh on the device the search prices as (the planner prices a plan by
  // its placements' device).
  const Placement& priced(const Placement& p) {
    if (!price_as_ || p.device_type() == *price_as_) return p;
    for (const auto& [real, as] : priced_)
      if (real == p) return as;
    return priced_.emplace_back(p, Placement(to_string(*price_as_), p.ranks(), p.mesh())).second;
  }

  Tape& tape_;
  double memory_weight_;
  std::optional<DeviceType> price_as_;
  std::deque<std::pair<Placement, Placement>> priced_;
  std::vector<Node> nodes_;
  std::vector<ValueInfo> values_;
  std::vector<NdSbp> layouts_;    // interned: nodes and values name layouts by index
  std::deque<TensorMeta> metas_;  // of to_global inputs no op names
  std::unordered_map<uint64_t, double> edges_;  // by (kind, from, need)
  std::unordered_map<std::string, int> kinds_;
  std::vector<int> parameter_nodes_;  // per free parameter given, its node (-1: not read)
  std::vector<int> seen_, touched_;   // value_cost's and local_cost's scratch (value_cost runs inside local_cost)
  std::string why_not_;
};

// What the exact solver did (layout_exact.cpp), for the search's report.
struct ExactOutcome {
  bool ran = false;           // CBC ran
  bool optimal = false;       // it proved the plan kept optimal on the objective
  bool kept = false;          // a plan of CBC's was cheaper than the search's, and kept
  double seconds = 0;         // CBC's wall time, every solve
  size_t columns = 0;         // the whole programme's (counted; built only when CBC takes it)
  double lower_bound = 0;     // proven by CBC (0: none)
  // Solved by block: the chain's blocks; the columns of the programme whose plans repeat one
  // block, and whether CBC proved its optimum; the windows of the bound and how many distinct
  // ones CBC solved (0: no bound by windows).
  int64_t blocks = 0;
  size_t tied_columns = 0;
  bool tied_optimal = false;
  int64_t windows = 0, windows_solved = 0, window_width = 0;  // window_width: parts in a window
  // The dynamic programme over the chain (solve_chain): its stages (0: the step is no row of
  // them), its seams' most states, the stages and programmes it solved, and whether it finished.
  int64_t chain_stages = 0, chain_states = 0, chain_stages_solved = 0, chain_solves = 0;
  bool chain_exact = false;
};

// The least objective of any plan of a step that is a row of stages (the ops before a chain of
// repeated blocks, each block, the ops after it) in which every value's producer and askers are
// in one stage or two next to each other: a dynamic programme over the states of the seams
// between stages (the layouts the values made across a seam come in), each stage's programme
// solved by CBC per state (layout_chain.cpp); alike blocks whose least costs move alike are
// solved once. Without the memory budget: the optimum is a lower bound under one. Not where a
// seam has over max_states states or a stage's programme over max_columns columns.
struct ChainOutcome {
  bool exact = false;         // done: optimum is the step's and plan costs it
  double optimum = 0;         // in us, on the objective
  std::vector<size_t> plan;   // per node, its candidate
  int64_t stages = 0;         // the row's (0: not one)
  int64_t states = 0;         // the most states of a seam (found before the row was given up, if it was)
  int64_t stages_solved = 0;  // stages whose programmes CBC solved (the others reuse an alike one's)
  int64_t solves = 0;         // programmes solved, one per stage and state
  double seconds = 0;
  std::string why_not;        // when not exact
};
ChainOutcome solve_chain(Problem& problem, const Problem::Blocks& chain, double seconds, size_t max_states, size_t max_columns);
// Whether solve_chain would run on chain: a row of stages whose seams have at most max_states states.
bool chain_programme_takes(const Problem& problem, const Problem::Blocks& chain, size_t max_states);

// CBC from the plan `best` (its objective best_us; fits() says whether the current plan meets
// the memory budget): on the whole programme when it has at most max_columns columns; else, on a
// chain of repeated blocks, on the plans that repeat one block (solve one, reuse it), then by the
// dynamic programme over the chain (solve_chain) where its seams' states are few, else on each
// distinct window of neighbouring parts (outside the blocks, each block) for a lower bound. A plan
// of CBC's that is cheaper on the objective replaces best; the problem is left at best.
ExactOutcome improve_exactly(Problem& problem, const SearchSettings& settings, size_t max_columns, std::vector<size_t>& best,
                             double& best_us, const std::function<bool()>& fits);

}  // namespace spsd::detail::layout_search
