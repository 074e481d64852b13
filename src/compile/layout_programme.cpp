// The layout search's problem as a 0-1 integer programme (layout_problem.hpp).
#include <algorithm>

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

IntegerProgramme Problem::programme(int64_t memory_budget_bytes, std::vector<std::vector<int>>& x_column) {
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

}  // namespace spsd::detail::layout_search
