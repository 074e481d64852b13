// The layout search's graph built from a tape, its restarts, and the tape rewritten with its
// choices (layout_problem.hpp).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "layout_problem.hpp"

namespace spsd::detail::layout_search {

int64_t Problem::relabel_to_batch(size_t axis) {
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

int64_t Problem::apply() {
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

void Problem::build(std::span<const FreeParameter> free) {
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

void Problem::parameter_candidates(Node& n) {
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

void Problem::fill_work(Node& n) {
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

}  // namespace spsd::detail::layout_search
