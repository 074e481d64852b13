// The joint layout search (compile/layout_search.hpp).
#include "spsd/compile/layout_search.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "spsd/boxing/cost.hpp"
#include "spsd/boxing/planner.hpp"
#include "spsd/boxing/to_layout.hpp"
#include "spsd/compile/integer_programme.hpp"
#include "spsd/op/captured_op.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {

constexpr double kForbidden = 1e30;  // boxing into a partial layout: never worth it (the resolver's rule)

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
constexpr int64_t kParameterCopies = 4;

// The layouts a value may be boxed to on this mesh: those its producer can make and those its
// consumers can take, gathered as the nodes are built.
using LayoutSet = std::vector<int>;

int64_t piece_bytes(const TensorMeta& meta, const Shape& mesh, const NdSbp& layout) {
  static thread_local std::vector<int64_t> origin;
  origin.assign(static_cast<size_t>(mesh.ndim()), 0);
  return piece_numel(meta.shape, mesh, layout, origin) * size_of(meta.dtype);
}

// Local compute per flop, for the ops whose work is not their bytes (matmul): a core's 100
// GFLOP/s (OpenBLAS sgemm: 231 GFLOP/s on the 2 cores of bench/kernels' machine), a GPU's 100
// TFLOP/s. Only the ratio to the boxing costs matters.
double flop_us(DeviceType device) { return device == DeviceType::kCUDA ? 1e-8 : 1e-5; }

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
  int64_t relabel_to_batch(size_t axis) {
    auto relabel = [&](const NdSbp& l) {
      if (axis >= l.size() || !l[axis].is_split()) return l;
      std::vector<Sbp> axes = l.axes();
      axes[axis] = Sbp::make_split(0);
      return NdSbp(std::move(axes));
    };
    int64_t moved = 0;
    for (Node& n : nodes_) {
      if (n.parameter) continue;
      if (!n.op) {
        const NdSbp want = relabel(layouts_[static_cast<size_t>(n.out_layout[n.choice])]);
        for (size_t c = 0; c < n.candidates.size(); ++c)
          if (c != n.choice && layouts_[static_cast<size_t>(n.out_layout[c])] == want) {
            n.choice = c, ++moved;
            break;
          }
        continue;
      }
      NdSignature want = n.sig(n.choice);
      for (NdSbp& l : want.inputs) l = relabel(l);
      want.output = relabel(want.output);
      for (size_t c = 0; c < n.candidates.size(); ++c)
        if (c != n.choice && n.sig(c) == want) {
          n.choice = c, ++moved;
          break;
        }
    }
    return moved;
  }

  // Who asks for a value in which layout, per candidate: a consumer, or a gradient boxed to its
  // parameter's layout.
  struct Asker {
    int node;
    std::vector<int> needs;
  };
  // v's askers by group: the consumers first, sharing their boxings; then each gradient boxed to
  // its parameter's layout, a group of its own (value_cost counts it on its own).
  std::vector<std::vector<Asker>> askers_of(size_t v) const {
    const ValueInfo& info = values_[v];
    std::vector<std::vector<Asker>> groups(1);
    for (const Use& u : info.uses) {
      Asker a{u.node, {}};
      for (const std::vector<int>& ins : nodes_[static_cast<size_t>(u.node)].in_layouts) a.needs.push_back(ins[u.input]);
      groups[0].push_back(std::move(a));
    }
    for (const Sink& sink : info.sinks)
      if (sink.link >= 0) groups.push_back({Asker{sink.link, nodes_[static_cast<size_t>(sink.link)].out_layout}});
    return groups;
  }
  static std::vector<int> needed_layouts(const std::vector<Asker>& group) {
    std::vector<int> needed;
    for (const Asker& a : group)
      for (int l : a.needs)
        if (std::find(needed.begin(), needed.end(), l) == needed.end()) needed.push_back(l);
    return needed;
  }
  // The columns programme() would make: its size, known before it is built.
  size_t programme_columns() {
    size_t columns = 1;  // the constant
    for (const Node& n : nodes_) columns += n.candidates.size();
    for (size_t v = 0; v < values_.size(); ++v) {
      if (!values_[v].meta) continue;
      const std::vector<int> from = layouts_of(static_cast<int>(v));
      for (const std::vector<Asker>& group : askers_of(v))
        for (int l : needed_layouts(group))
          for (int f : from) columns += f != l && edge(static_cast<int>(v), f, l) < kForbidden;
    }
    return columns;
  }

  // The problem as a 0-1 integer programme with the objective total() computes: column x_n_c,
  // node n takes candidate c (one per node); y_v_g_f_l, value v boxed from layout f to l for
  // group g of its askers (at most what v coming in f allows, and at least what each asker needing
  // l asks: a boxing is paid once for all the consumers that need it; a gradient boxed to its
  // parameter's layout is a group of its own, as value_cost counts it); fixed to_globals' costs on
  // the producer's candidates; boxing into a partial layout excluded; the memory budget a
  // constraint on the results' bytes. x_column[n][c] is x_n_c's column.
  IntegerProgramme programme(int64_t memory_budget_bytes, std::vector<std::vector<int>>& x_column) {
    IntegerProgramme p;
    p.comment = concat("spsd layout search: ", nodes_.size(), " nodes, ", values_.size(),
                       " values; the objective is the predicted step in us (compile/layout_search.hpp)");
    using Terms = std::vector<std::pair<int, double>>;
    const int constant = p.add_column("constant", 0, false, 1, 1);  // fixed to_globals of fixed values
    x_column.assign(nodes_.size(), {});
    for (size_t n = 0; n < nodes_.size(); ++n) {
      Terms one;
      for (size_t c = 0; c < nodes_[n].candidates.size(); ++c) {
        x_column[n].push_back(p.add_column(concat("x", n, "_", c), nodes_[n].work[c], true));
        one.emplace_back(x_column[n].back(), 1);
      }
      p.add_row(concat("one_", n), std::move(one), 1, 1);
    }
    auto with = [](Terms a, const Terms& b, double sign) {
      for (const auto& [column, coefficient] : b) a.emplace_back(column, sign * coefficient);
      return a;
    };
    for (size_t v = 0; v < values_.size(); ++v) {
      const ValueInfo& info = values_[v];
      if (!info.meta) continue;
      const std::vector<int> from = layouts_of(static_cast<int>(v));
      // The x's under which v comes in layout f (none for a fixed layout: it always does).
      auto comes_in = [&](int f) {
        Terms terms;
        if (info.producer < 0) return terms;
        const Node& prod = nodes_[static_cast<size_t>(info.producer)];
        for (size_t c = 0; c < prod.candidates.size(); ++c)
          if (prod.out_layout[c] == f) terms.emplace_back(x_column[static_cast<size_t>(info.producer)][c], 1);
        return terms;
      };
      const std::vector<std::vector<Asker>> groups = askers_of(v);
      for (size_t k = 0; k < info.sinks.size(); ++k) {
        if (info.sinks[k].link >= 0) continue;  // an asker
        for (int f : from) {
          const double cost = sink_edge(static_cast<int>(v), f, k);
          if (info.producer < 0) p.columns[static_cast<size_t>(constant)].cost += cost;
          for (const auto& [column, one] : comes_in(f)) p.columns[static_cast<size_t>(column)].cost += cost;
        }
      }
      for (size_t g = 0; g < groups.size(); ++g) {
        for (int l : needed_layouts(groups[g])) {
          auto asks = [&](const Asker& a) {  // a's x's that need l
            Terms terms;
            for (size_t c = 0; c < a.needs.size(); ++c)
              if (a.needs[c] == l) terms.emplace_back(x_column[static_cast<size_t>(a.node)][c], 1);
            return terms;
          };
          Terms boxings;  // the y's into l
          for (int f : from) {
            if (f == l) continue;
            const Terms in_f = comes_in(f);
            const double cost = edge(static_cast<int>(v), f, l);
            if (cost >= kForbidden) {  // never f with an asker needing l
              for (size_t i = 0; i < groups[g].size(); ++i)
                if (const Terms need = asks(groups[g][i]); !need.empty())
                  p.add_row(concat("forbid_", v, "_", g, "_", i, "_", f, "_", l), with(in_f, need, 1),
                            -IntegerProgramme::kInfinity, in_f.empty() ? 0 : 1);
              continue;
            }
            const int y = p.add_column(concat("y", v, "_", g, "_", f, "_", l), cost, false);
            boxings.emplace_back(y, 1);
            if (!in_f.empty())  // only from the layout v comes in
              p.add_row(concat("from_", y), with({{y, 1}}, in_f, -1), -IntegerProgramme::kInfinity, 0);
          }
          if (info.producer < 0 && from[0] == l) continue;  // fixed in l: nothing to box
          for (size_t i = 0; i < groups[g].size(); ++i)
            if (const Terms need = asks(groups[g][i]); !need.empty())
              p.add_row(concat("box_", v, "_", g, "_", i, "_", l), with(with(need, boxings, -1), comes_in(l), -1),
                        -IntegerProgramme::kInfinity, 0);
        }
      }
    }
    if (memory_budget_bytes > 0) {
      Terms bytes;
      for (size_t n = 0; n < nodes_.size(); ++n)
        for (size_t c = 0; c < nodes_[n].candidates.size(); ++c)
          if (nodes_[n].result_bytes[c] > 0) bytes.emplace_back(x_column[n][c], static_cast<double>(nodes_[n].result_bytes[c]));
      p.add_row("memory", std::move(bytes), -IntegerProgramme::kInfinity, static_cast<double>(memory_budget_bytes));
    }
    return p;
  }

  // The node of free parameter i, or -1 (the step does not read it).
  int parameter_node(size_t i) const { return i < parameter_nodes_.size() ? parameter_nodes_[i] : -1; }
  const NdSbp& layout(int id) const { return layouts_[static_cast<size_t>(id)]; }

  bool searchable() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  std::vector<Node>& nodes() { return nodes_; }

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
  int64_t apply() {
    int64_t changed = 0;
    const std::vector<Tape::Entry>& old = tape_.entries();
    std::vector<Tape::Entry> entries;
    entries.reserve(old.size());
    std::unordered_map<int, int> renamed;               // a removed to_global's result: its input
    std::map<std::pair<int, int>, int> boxed;           // (value, layout): the value boxed there
    std::vector<int> node_at(old.size(), -1);
    for (size_t n = 0; n < nodes_.size(); ++n)
      if (!nodes_[n].parameter) node_at[nodes_[n].entry] = static_cast<int>(n);
    auto name = [&](int v) {
      const auto it = renamed.find(v);
      return it == renamed.end() ? v : it->second;
    };
    for (size_t k = 0; k < old.size(); ++k) {
      Tape::Entry e = old[k];
      for (int& v : e.inputs)
        if (v >= 0) v = name(v);
      if (node_at[k] >= 0 && !nodes_[static_cast<size_t>(node_at[k])].op) {
        // A free to_global: to the layout chosen, once per (value, layout), or nothing.
        const Node& n = nodes_[static_cast<size_t>(node_at[k])];
        const Plan& p = *n.boxing->plan();
        const int v = n.inputs[0], from = layout_id(v), to = n.out_layout[n.choice];
        changed += !(layouts_[static_cast<size_t>(to)] == p.to.nd_sbp);
        if (from == to) {
          renamed[e.output] = e.inputs[0];
          continue;
        }
        const auto [it, first] = boxed.try_emplace({v, to}, e.output);
        if (!first) {
          renamed[e.output] = it->second;
          continue;
        }
        e.step = std::make_shared<CapturedBoxing>(
            plan_boxing(p.shape, p.dtype, p.from.placement, layouts_[static_cast<size_t>(from)], p.to.placement,
                        layouts_[static_cast<size_t>(to)]));
        entries.push_back(std::move(e));
        continue;
      }
      if (node_at[k] >= 0) {
        const Node& n = nodes_[static_cast<size_t>(node_at[k])];
        const Resolution& was = n.op->resolution();
        changed += n.candidates[n.choice] != was.chosen;
        auto r = std::make_shared<Resolution>(was);
        r->chosen = n.candidates[n.choice];
        Candidate& chosen = r->candidates[r->chosen];
        chosen.cost_us = 0, chosen.bytes = 0;
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const int v = n.inputs[i];
          const int from = layout_id(v), need = n.in_layouts[n.choice][i];
          r->input_layouts[i] = layouts_[static_cast<size_t>(need)];
          r->plans[i] = nullptr;
          if (from == need) continue;
          const auto [it, first] = boxed.try_emplace({v, need}, -1);
          if (first) {
            auto plan = plan_boxing(r->inputs[i].shape, r->inputs[i].dtype, r->placement, layouts_[static_cast<size_t>(from)],
                                    r->placement, r->input_layouts[i]);
            it->second = tape_.add_value();
            entries.push_back({.kind = Tape::Entry::Kind::kStep, .step = std::make_shared<CapturedBoxing>(std::move(plan)),
                               .inputs = {e.inputs[i]}, .output = it->second});
          }
          e.inputs[i] = it->second;
        }
        e.step = n.op->with(std::move(r));
        entries.push_back(std::move(e));
        continue;
      }
      const auto* boxing = e.kind == Tape::Entry::Kind::kStep ? dynamic_cast<const CapturedBoxing*>(e.step.get()) : nullptr;
      if (boxing && !e.inputs.empty() && old[k].inputs[0] >= 0) {
        const Plan& p = *boxing->plan();
        const NdSbp& from = layout_of(old[k].inputs[0]);
        if (!(from == p.from.nd_sbp)) {
          if (p.from.placement == p.to.placement && from == p.to.nd_sbp) {
            renamed[e.output] = e.inputs[0];  // moves nothing now: its result is its input
            continue;
          }
          e.step = std::make_shared<CapturedBoxing>(plan_boxing(p.shape, p.dtype, p.from.placement, from, p.to.placement, p.to.nd_sbp));
        }
      }
      if (e.output >= 0 && e.kind == Tape::Entry::Kind::kGradient) e.output = name(e.output);
      entries.push_back(std::move(e));
    }
    tape_.replace_entries(std::move(entries), renamed);
    return changed;
  }

 private:
  void build(std::span<const FreeParameter> free) {
    const std::vector<Tape::Entry>& entries = tape_.entries();
    values_.resize(tape_.values().size());
    // Free parameters first: each the producer of its value (the piece bound at capture).
    std::unordered_map<const AutogradMeta*, int> parameter_of;
    for (const FreeParameter& f : free) {
      int v = -1;
      for (size_t i = 0; i < tape_.values().size() && v < 0; ++i)
        if (tape_.values()[i].origin == Tape::Value::Origin::kExternal && tape_.values()[i].storage.get() == f.piece)
          v = static_cast<int>(i);
      parameter_nodes_.push_back(v < 0 ? -1 : static_cast<int>(nodes_.size()));
      if (v < 0) continue;
      parameter_of[f.meta] = static_cast<int>(nodes_.size());
      values_[static_cast<size_t>(v)].producer = static_cast<int>(nodes_.size());
      Node n{SIZE_MAX, nullptr, nullptr, {}, v, {}, 0, 0, {}, {}, {}, {}};
      n.parameter = true;
      nodes_.push_back(std::move(n));
    }
    auto note_captured = [&](int v, const NdSbp& layout) {  // a parameter's layout, at its first use
      const int p = values_[static_cast<size_t>(v)].producer;
      if (p >= 0 && nodes_[static_cast<size_t>(p)].parameter && nodes_[static_cast<size_t>(p)].captured < 0)
        nodes_[static_cast<size_t>(p)].captured = intern(layout);
    };
    std::unordered_map<int, std::pair<int, size_t>> sink_of;  // a kept to_global's result: (input, sink)
    const int64_t world = world_size();
    auto spans_world = [&](const Placement& p) { return p.size() == world; };
    for (const Tape::Entry& e : entries)
      if (e.kind == Tape::Entry::Kind::kGradient && e.output >= 0) values_[static_cast<size_t>(e.output)].keep = true;
    for (int v : tape_.output_values())
      if (v >= 0) values_[static_cast<size_t>(v)].keep = true;
    for (size_t k = 0; k < entries.size(); ++k) {
      const Tape::Entry& e = entries[k];
      if (e.kind != Tape::Entry::Kind::kStep) continue;
      if (const auto* op = dynamic_cast<const CapturedOp*>(e.step.get())) {
        const Resolution& r = op->resolution();
        if (!spans_world(r.placement)) return fail("an op runs on a placement that is not the whole world");
        Node n{k, op, nullptr, e.inputs, e.output, {}, 0, 0, {}, {}, {}, {}};
        for (size_t c = 0; c < r.candidates.size(); ++c) {
          n.candidates.push_back(c);
          if (c == r.chosen) n.choice = n.eager = n.candidates.size() - 1;
        }
        const int id = static_cast<int>(nodes_.size());
        for (size_t i = 0; i < e.inputs.size(); ++i) {
          const int v = e.inputs[i];
          if (v < 0) return fail("an op's input has no piece on this rank");
          ValueInfo& info = values_[static_cast<size_t>(v)];
          if (info.producer < 0 && info.fixed < 0) info.fixed = intern(r.input_layouts[i]);
          note_captured(v, r.input_layouts[i]);
          if (!info.meta) info.meta = &r.inputs[i], info.placement = &r.placement;
          info.uses.push_back({id, i});
        }
        if (e.output >= 0) {
          ValueInfo& out = values_[static_cast<size_t>(e.output)];
          out.producer = id, out.meta = &r.output, out.placement = &r.placement;
        }
        nodes_.push_back(std::move(n));
      } else if (const auto* boxing = dynamic_cast<const CapturedBoxing*>(e.step.get())) {
        const Plan& p = *boxing->plan();
        if (!spans_world(p.from.placement) || !spans_world(p.to.placement))
          return fail("a to_global involves a placement that is not the whole world");
        if (e.inputs.empty() || e.inputs[0] < 0 || e.output < 0) return fail("a to_global has no piece on this rank");
        ValueInfo& in = values_[static_cast<size_t>(e.inputs[0])];
        if (in.producer < 0 && in.fixed < 0) in.fixed = intern(p.from.nd_sbp);
        note_captured(e.inputs[0], p.from.nd_sbp);
        if (!in.meta) in.meta = &metas_.emplace_back(TensorMeta{p.shape, p.dtype}), in.placement = &p.from.placement;
        ValueInfo& out = values_[static_cast<size_t>(e.output)];
        out.meta = in.meta, out.placement = &p.to.placement;
        if (p.from.placement == p.to.placement && !out.keep) {
          // A free to_global: a node choosing its layout (candidates filled in below).
          const int id = static_cast<int>(nodes_.size());
          in.uses.push_back({id, 0});
          out.producer = id;
          nodes_.push_back(Node{k, nullptr, boxing, e.inputs, e.output, {}, 0, 0, {}, {}, {}, {}});
          continue;
        }
        sink_of[e.output] = {e.inputs[0], in.sinks.size()};
        in.sinks.push_back({p.to.placement, p.to.nd_sbp});
        in.sink_layouts.push_back(intern(p.to.nd_sbp));
        out.fixed = intern(p.to.nd_sbp);
      }
    }
    // A free parameter's gradient: the to_global that makes it, or the op (then boxed as it
    // would be), goes to the parameter's layout.
    for (const Tape::Entry& e : entries) {
      if (e.kind != Tape::Entry::Kind::kGradient || e.output < 0) continue;
      const auto p = parameter_of.find(e.meta.get());
      if (p == parameter_of.end()) continue;
      Node& param = nodes_[static_cast<size_t>(p->second)];
      if (const auto s = sink_of.find(e.output); s != sink_of.end()) {
        ValueInfo& in = values_[static_cast<size_t>(s->second.first)];
        if (!(in.sinks[s->second.second].to == *in.placement)) continue;  // another placement: stays as captured
        in.sinks[s->second.second].link = p->second;
        param.linked.push_back(s->second.first);
      } else if (ValueInfo& g = values_[static_cast<size_t>(e.output)]; g.producer >= 0 && g.placement) {
        g.keep = false;
        g.sinks.push_back({*g.placement, NdSbp{}, p->second});
        g.sink_layouts.push_back(-1);
        param.linked.push_back(e.output);
      }
    }
    for (Node& n : nodes_) {
      if (!n.op) continue;
      // An op whose result must keep its layout (an output, a gradient) keeps its output layout.
      const bool keep = n.output >= 0 && values_[static_cast<size_t>(n.output)].keep;
      const NdSbp eager_out = n.sig(n.eager).output;
      std::vector<size_t> kept;
      size_t eager_index = 0;
      for (size_t c = 0; c < n.candidates.size(); ++c) {
        if (c != n.eager && keep && !(n.sig(c).output == eager_out)) continue;
        if (c == n.eager) eager_index = kept.size();
        kept.push_back(n.candidates[c]);
      }
      n.candidates = std::move(kept);
      n.choice = n.eager = eager_index;
      for (size_t c = 0; c < n.candidates.size(); ++c) {
        const NdSignature& s = n.sig(c);
        n.out_layout.push_back(intern(s.output));
        std::vector<int> ins;
        for (const NdSbp& l : s.inputs) ins.push_back(intern(l));
        n.in_layouts.push_back(std::move(ins));
      }
      fill_work(n);
    }
    // Free to_globals, in program order (one may take another's result): the layouts their input
    // can come in, their consumers can take, and the one asked for (eager's choice).
    for (Node& n : nodes_) {
      if (n.op) continue;
      if (n.parameter) {
        parameter_candidates(n);
        continue;
      }
      LayoutSet options{intern(n.boxing->plan()->to.nd_sbp)};
      auto add = [&](int l) {
        if (std::find(options.begin(), options.end(), l) == options.end()) options.push_back(l);
      };
      for (int l : layouts_of(n.inputs[0])) add(l);
      for (const Use& u : values_[static_cast<size_t>(n.output)].uses) {
        const Node& m = nodes_[static_cast<size_t>(u.node)];
        for (const std::vector<int>& ins : m.in_layouts) add(ins[u.input]);
      }
      for (int l : options) {
        // Never into a partial layout but the one asked for (eager's choice stays a candidate).
        if (layouts_[static_cast<size_t>(l)].has_partial() && l != layout_id(n.inputs[0]) && l != options[0]) continue;
        n.candidates.push_back(static_cast<size_t>(l));
        n.out_layout.push_back(l);
        n.in_layouts.push_back({l});
      }
      fill_work(n);
    }
  }

  // Its layout at capture first (eager's choice), then every S/B layout its consumers can take
  // or its gradient comes in.
  void parameter_candidates(Node& n) {
    if (n.captured < 0) {  // never read by an op or a to_global: nothing to choose
      n.captured = intern(NdSbp{});
    }
    LayoutSet options{n.captured};
    auto add = [&](int l) {
      if (!layouts_[static_cast<size_t>(l)].has_partial() && std::find(options.begin(), options.end(), l) == options.end())
        options.push_back(l);
    };
    for (const Use& u : values_[static_cast<size_t>(n.output)].uses) {
      const Node& m = nodes_[static_cast<size_t>(u.node)];
      for (const std::vector<int>& ins : m.in_layouts) add(ins[u.input]);
    }
    for (int v : n.linked)
      for (int l : layouts_of(v)) add(l);
    for (int l : options) {
      n.candidates.push_back(static_cast<size_t>(l));
      n.out_layout.push_back(l);
      n.in_layouts.push_back({});
    }
    fill_work(n);
  }

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
  // Every layout v may take.
  std::vector<int> layouts_of(int v) const {
    const ValueInfo& info = values_[static_cast<size_t>(v)];
    if (info.producer < 0) return {info.fixed};
    std::vector<int> out;
    for (int l : nodes_[static_cast<size_t>(info.producer)].out_layout)
      if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
    return out;
  }

  void fill_work(Node& n) {
    if (!n.op) {  // a to_global or a parameter: no work of its own; its boxing is its input's edge
      const ValueInfo& out = values_[static_cast<size_t>(n.output)];
      n.work.assign(n.candidates.size(), 0);
      n.result_bytes.assign(n.candidates.size(), 0);
      if (!out.meta) return;  // a parameter nothing reads
      for (size_t c = 0; c < n.candidates.size(); ++c) {
        n.result_bytes[c] = (n.parameter ? kParameterCopies : 1) *
                            piece_bytes(*out.meta, out.placement->mesh(), layouts_[static_cast<size_t>(n.out_layout[c])]);
        n.work[c] = memory_weight_ * static_cast<double>(n.result_bytes[c]);
      }
      return;
    }
    const Resolution& r = n.op->resolution();
    const Shape& mesh = r.placement.mesh();
    const DeviceType device = price_as_.value_or(r.placement.device_type());
    const double gamma = cost_model(device).gamma_us_per_byte;
    n.work.assign(n.candidates.size(), 0);
    n.result_bytes.assign(n.candidates.size(), 0);
    for (size_t c = 0; c < n.candidates.size(); ++c) {
      const NdSignature& s = n.sig(c);
      int64_t bytes = 0;
      for (size_t i = 0; i < s.inputs.size(); ++i) bytes += piece_bytes(r.inputs[i], mesh, s.inputs[i]);
      const int64_t out = piece_bytes(r.output, mesh, s.output);
      n.result_bytes[c] = out;
      double work = gamma * static_cast<double>(bytes + out);
      if (r.op == "matmul") {
        // The pieces' multiply-adds: (batch) M K, K N and (batch) M N elements hold M N K (batch)
        // as the square root of their product, whichever operand is transposed or split.
        const double a = static_cast<double>(piece_bytes(r.inputs[0], mesh, s.inputs[0]) / size_of(r.inputs[0].dtype));
        const double b = static_cast<double>(piece_bytes(r.inputs[1], mesh, s.inputs[1]) / size_of(r.inputs[1].dtype));
        const double o = static_cast<double>(out / size_of(r.output.dtype));
        work += flop_us(device) * 2.0 * std::sqrt(a * b * o);
      }
      n.work[c] = work + memory_weight_ * static_cast<double>(out);
    }
  }

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
// The largest programme the exact solver is given, in columns. CBC's time limit binds its branch
// and bound, not the linear programme at its root, which runs to its end first: 92k columns (the
// 2-block GPT of bench/train on (2, 2)) take CBC about 12 s here, 180k (4 blocks on (2, 4))
// 37 s with a limit of 5 s. Above this the search's plan stands and explain() says why.
constexpr size_t kExactMaxColumns = 120000;

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
  kExact, kExactOptimal, kExactKept, kExactSeconds, kExactColumns, kFailed, kFigures
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
  std::vector<std::vector<int>> x_column;
  const size_t columns = settings.exact_seconds > 0 ? problem.programme_columns() : 0;
  figures[kExactColumns] = static_cast<double>(columns);
  const bool solve = settings.exact_seconds > 0 && columns <= kExactMaxColumns;
  if (solve || !settings.problem_file.empty()) {
    const IntegerProgramme programme = problem.programme(budget, x_column);
    if (!settings.problem_file.empty()) {
      std::ofstream file(settings.problem_file);
      if (file) programme.write_lp(file);
      SPSD_CHECK(file.good(), "compile", "cannot write the search's problem to \"", settings.problem_file, "\"");
    }
    if (solve) {
      // From the plan found; CBC's plan is taken when it is cheaper on the objective itself.
      std::vector<std::pair<int, double>> from;
      for (size_t n = 0; n < x_column.size(); ++n)
        for (size_t c = 0; c < x_column[n].size(); ++c) from.emplace_back(x_column[n][c], c == best[n] ? 1.0 : 0.0);
      const ExactSolution exact = solve_exactly(programme, from, settings.exact_seconds, "compile");
      figures[kExact] = 1, figures[kExactSeconds] = exact.seconds;
      if (exact.found) {
        std::vector<size_t> solved = best;
        for (size_t n = 0; n < x_column.size(); ++n)
          for (size_t c = 0; c < x_column[n].size(); ++c)
            if (exact.values[static_cast<size_t>(x_column[n][c])] > 0.5) solved[n] = c;
        problem.set_choices(solved);
        const double t = problem.total();
        // The programme states the objective itself: its value of a plan is the plan's cost.
        SPSD_CHECK(std::abs(t - exact.objective) <= 1e-6 * std::max(1.0, std::abs(t)), "compile",
                   "the exact solver's plan costs ", t, " us on the search's objective, but ", exact.objective,
                   " us in the integer programme (an error in the programme)");
        if (t < best_us - 1e-9 && fits()) best_us = t, best = solved, figures[kExactKept] = 1;
        problem.set_choices(best);
      }
      // Proven optimal: CBC's optimum is the plan kept's objective (to rounding).
      figures[kExactOptimal] = exact.optimal && best_us <= exact.objective + 1e-6 * std::max(1.0, std::abs(exact.objective));
      lower_bound = figures[kExactOptimal] != 0 ? best_us : std::max(lower_bound, std::min(exact.bound, best_us));
    }
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
                exact ? concat("; exact solver (CBC, ", exact_seconds, " s, ", exact_columns, " columns): ",
                               exact_optimal ? "optimal, proven" : "stopped at its time limit",
                               exact_kept ? ", its plan kept" : "")
                : exact_columns > 0 && asked_exact
                    ? concat("; exact solver not run: the programme's ", exact_columns, " columns are over the ",
                             kExactMaxColumns, " it is given")
                    : std::string(),
                "\n");
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
