// The layout search's problem as a 0-1 integer programme (layout_problem.hpp).
#include <algorithm>
#include <bit>
#include <map>

#include "layout_problem.hpp"

namespace spsd::detail::layout_search {

std::vector<std::vector<Problem::Asker>> Problem::askers_of(size_t v) const {
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

std::vector<int> Problem::needed_layouts(const std::vector<Asker>& group) {
  std::vector<int> needed;
  for (const Asker& a : group)
    for (int l : a.needs)
      if (std::find(needed.begin(), needed.end(), l) == needed.end()) needed.push_back(l);
  return needed;
}

size_t Problem::programme_columns() {
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

std::vector<int> Problem::parts_of(size_t v, const std::vector<int>& part_of) const {
  const ValueInfo& info = values_[v];
  std::vector<int> parts;
  auto add = [&](int node) { parts.push_back(part_of[static_cast<size_t>(node)]); };
  if (info.producer >= 0) add(info.producer);
  for (const Use& u : info.uses) add(u.node);
  for (const Sink& sink : info.sinks)
    if (sink.link >= 0) add(sink.link);
  std::sort(parts.begin(), parts.end());
  parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  return parts;
}

IntegerProgramme Problem::programme(const Scope& scope, int64_t memory_budget_bytes, std::vector<std::vector<int>>& x_column) {
  IntegerProgramme p;
  auto named = [&](auto&&... parts) { return scope.names ? concat(parts...) : std::string(); };
  p.comment = concat("spsd layout search: ", nodes_.size(), " nodes, ", values_.size(),
                     " values; the objective is the predicted step in us (compile/layout_search.hpp)");
  using Terms = std::vector<std::pair<int, double>>;
  const int constant = p.add_column(named("constant"), 0, false, 1, 1);  // fixed to_globals of fixed values
  x_column.assign(nodes_.size(), {});
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (scope.tie[n] != static_cast<int>(n)) continue;
    Terms one;
    for (size_t c = 0; c < nodes_[n].candidates.size(); ++c) {
      x_column[n].push_back(p.add_column(named("x", n, "_", c), 0, true));
      one.emplace_back(x_column[n].back(), 1);
    }
    p.add_row(named("one_", n), std::move(one), 1, 1);
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (scope.tie[n] < 0) continue;
    x_column[n] = x_column[static_cast<size_t>(scope.tie[n])];
    const double weight = scope.node_weight.empty() ? 1 : scope.node_weight[n];
    for (size_t c = 0; c < nodes_[n].candidates.size(); ++c)
      p.columns[static_cast<size_t>(x_column[n][c])].cost += weight * nodes_[n].work[c];
  }
  auto with = [](Terms a, const Terms& b, double sign) {
    for (const auto& [column, coefficient] : b) a.emplace_back(column, sign * coefficient);
    return a;
  };
  auto in_scope = [&](int node) { return scope.tie[static_cast<size_t>(node)] >= 0; };
  // The x's under which v comes in layout f (none for a fixed layout: it always does).
  auto comes_in = [&](size_t v, int f) {
    Terms terms;
    const ValueInfo& info = values_[v];
    if (info.producer < 0) return terms;
    const Node& prod = nodes_[static_cast<size_t>(info.producer)];
    for (size_t c = 0; c < prod.candidates.size(); ++c)
      if (prod.out_layout[c] == f) terms.emplace_back(x_column[static_cast<size_t>(info.producer)][c], 1);
    return terms;
  };
  // Values alike once tied (the same producer's columns, kind and askers' columns) share their
  // boxing columns, paid once per value: (value, its groups of askers, how many it stands for,
  // by their weights).
  struct Boxed {
    size_t value;
    std::vector<std::vector<Asker>> groups;
    double times;
  };
  std::vector<Boxed> boxed;
  std::map<std::vector<int64_t>, size_t> alike;
  for (size_t v = 0; v < values_.size(); ++v) {
    const ValueInfo& info = values_[v];
    const double weight = scope.value_weight.empty() ? 1 : scope.value_weight[v];
    if (!info.meta || weight == 0) continue;
    const std::vector<std::vector<Asker>> groups_here = askers_of(v);
    SPSD_CHECK((info.producer < 0 || in_scope(info.producer)) &&
                   std::all_of(groups_here.begin(), groups_here.end(),
                               [&](const std::vector<Asker>& g) {
                                 return std::all_of(g.begin(), g.end(), [&](const Asker& a) { return in_scope(a.node); });
                               }),
               "compile", "value ", v, " is counted in a programme without its producer or an asker (an error in its scope)");
    const std::vector<int> from = layouts_of(static_cast<int>(v));
    for (size_t k = 0; k < info.sinks.size(); ++k) {
      if (info.sinks[k].link >= 0) continue;  // an asker
      for (int f : from) {
        const double cost = sink_edge(static_cast<int>(v), f, k);
        if (info.producer < 0) p.columns[static_cast<size_t>(constant)].cost += weight * cost;
        for (const auto& [column, one] : comes_in(v, f)) p.columns[static_cast<size_t>(column)].cost += weight * cost;
      }
    }
    // The askers, one per tied node and layouts asked (alike askers ask alike).
    std::vector<std::vector<Asker>> groups;
    std::vector<int64_t> key{std::bit_cast<int64_t>(weight), kind_of(static_cast<int>(v)),
                             info.producer < 0 ? -1 - info.fixed : scope.tie[static_cast<size_t>(info.producer)]};
    for (std::vector<Asker> group : groups_here) {
      std::vector<Asker> kept;
      for (Asker& a : group) {
        a.node = scope.tie[static_cast<size_t>(a.node)];
        if (std::none_of(kept.begin(), kept.end(), [&](const Asker& k) { return k.node == a.node && k.needs == a.needs; }))
          kept.push_back(std::move(a));
      }
      key.push_back(-1);
      for (const Asker& a : kept) {
        key.push_back(a.node);
        key.insert(key.end(), a.needs.begin(), a.needs.end());
      }
      groups.push_back(std::move(kept));
    }
    const auto [it, first] = alike.try_emplace(std::move(key), boxed.size());
    if (first) boxed.push_back({v, std::move(groups), weight});
    else boxed[it->second].times += weight;
  }
  for (const Boxed& b : boxed) {
    const size_t v = b.value;
    const ValueInfo& info = values_[v];
    const std::vector<int> from = layouts_of(static_cast<int>(v));
    for (size_t g = 0; g < b.groups.size(); ++g) {
      const std::vector<Asker>& group = b.groups[g];
      for (int l : needed_layouts(group)) {
        auto asks = [&](const Asker& a) {  // a's x's that need l
          Terms terms;
          for (size_t c = 0; c < a.needs.size(); ++c)
            if (a.needs[c] == l) terms.emplace_back(x_column[static_cast<size_t>(a.node)][c], 1);
          return terms;
        };
        Terms boxings;  // the y's into l
        for (int f : from) {
          if (f == l) continue;
          const Terms in_f = comes_in(v, f);
          const double cost = edge(static_cast<int>(v), f, l);
          if (cost >= kForbidden) {  // never f with an asker needing l
            for (size_t i = 0; i < group.size(); ++i)
              if (const Terms need = asks(group[i]); !need.empty())
                p.add_row(named("forbid_", v, "_", g, "_", i, "_", f, "_", l), with(in_f, need, 1),
                          -IntegerProgramme::kInfinity, in_f.empty() ? 0 : 1);
            continue;
          }
          const int y = p.add_column(named("y", v, "_", g, "_", f, "_", l), cost * b.times, false);
          boxings.emplace_back(y, 1);
          if (!in_f.empty())  // only from the layout v comes in
            p.add_row(named("from_", y), with({{y, 1}}, in_f, -1), -IntegerProgramme::kInfinity, 0);
        }
        if (info.producer < 0 && from[0] == l) continue;  // fixed in l: nothing to box
        for (size_t i = 0; i < group.size(); ++i)
          if (const Terms need = asks(group[i]); !need.empty())
            p.add_row(named("box_", v, "_", g, "_", i, "_", l), with(with(need, boxings, -1), comes_in(v, l), -1),
                      -IntegerProgramme::kInfinity, 0);
      }
    }
  }
  if (memory_budget_bytes > 0) {
    std::map<int, double> bytes;  // per column: tied nodes' results add up
    for (size_t n = 0; n < nodes_.size(); ++n)
      if (scope.tie[n] >= 0)
        for (size_t c = 0; c < nodes_[n].candidates.size(); ++c)
          if (nodes_[n].result_bytes[c] > 0) bytes[x_column[n][c]] += static_cast<double>(nodes_[n].result_bytes[c]);
    p.add_row("memory", Terms(bytes.begin(), bytes.end()), -IntegerProgramme::kInfinity, static_cast<double>(memory_budget_bytes));
  }
  return p;
}

}  // namespace spsd::detail::layout_search
