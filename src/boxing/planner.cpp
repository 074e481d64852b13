// Dijkstra over layouts (placement, NdSbp). Edges: one mesh axis changes its Sbp by a 1-d step
// (all_gather, reduce_scatter, all_reduce, all_to_all or a local step), or an exchange from an
// S/B layout into the target or a layout one mesh axis away from it on the target placement.
#include "spsd/boxing/planner.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>

#include "../cache_key.hpp"
#include "primitives.hpp"
#include "spsd/boxing/cost.hpp"
#include "spsd/layout/split.hpp"

namespace spsd {

namespace {

// Every Sbp a mesh axis can take for a tensor of ndim axes.
std::vector<Sbp> sbp_options(int64_t ndim) {
  std::vector<Sbp> options;
  for (int64_t i = 0; i < ndim; ++i) options.push_back(sbp::split(i));
  options.insert(options.end(), {sbp::broadcast, sbp::partial_sum, sbp::partial_max, sbp::partial_min});
  return options;
}

// A later mesh axis nested inside tensor axis i breaks the one-axis collectives on it.
bool split_later(const NdSbp& nd, int64_t mesh_axis, int64_t tensor_axis) {
  for (size_t b = mesh_axis + 1; b < nd.size(); ++b)
    if (nd[b].is_split() && nd[b].axis() == tensor_axis) return true;
  return false;
}

// With nested partial semantics (layout/partial.hpp), reducing mesh axis a before the later
// partial axes is only exact when they all use a's op.
bool later_partials_use(const NdSbp& nd, int64_t mesh_axis, ReduceOp op) {
  for (size_t b = mesh_axis + 1; b < nd.size(); ++b)
    if (nd[b].is_partial() && nd[b].reduce_op() != op) return false;
  return true;
}

// Padding with max/min's identity is wrong under a later P(sum), which would add the paddings.
bool later_sum(const NdSbp& nd, int64_t mesh_axis) {
  for (size_t b = mesh_axis + 1; b < nd.size(); ++b)
    if (nd[b] == sbp::partial_sum) return true;
  return false;
}

// The 1-d step that changes mesh axis a from nd[a] to `to`, if one exists.
std::optional<StepKind> one_axis_step(const NdSbp& nd, int64_t a, const Sbp& to) {
  const Sbp& from = nd[a];
  if (from == to) return std::nullopt;
  auto free = [&](const Sbp& s) { return !s.is_split() || !split_later(nd, a, s.axis()); };
  if (!free(from) || !free(to)) return std::nullopt;
  if (from.is_partial() && !later_partials_use(nd, a, from.reduce_op())) return std::nullopt;
  if (from.is_split() && to.is_partial() && to.reduce_op() != ReduceOp::kSum && later_sum(nd, a)) return std::nullopt;
  if (from.is_split()) return to.is_broadcast() ? StepKind::kAllGather
                              : to.is_split()   ? StepKind::kAllToAll
                                                : StepKind::kLocal;
  if (from.is_broadcast()) return StepKind::kLocal;
  if (to.is_broadcast()) return StepKind::kAllReduce;
  if (to.is_split()) return StepKind::kReduceScatter;
  return std::nullopt;  // P(op) -> P(op'): through B
}

NdSbp with_axis(const NdSbp& nd, int64_t a, const Sbp& s) {
  std::vector<Sbp> axes = nd.axes();
  axes[a] = s;
  return NdSbp(std::move(axes));
}

NdSbp without_partial(const NdSbp& nd) {
  std::vector<Sbp> axes = nd.axes();
  for (Sbp& s : axes) if (s.is_partial()) s = sbp::broadcast;
  return NdSbp(std::move(axes));
}

Step make_step(const Shape& shape, DType dtype, StepKind kind, const Layout& from, const Layout& to, int64_t axis) {
  detail::Prediction p = detail::predict(dtype, kind, from, to, axis, boxes_of(shape, from.placement, from.nd_sbp),
                                         boxes_of(shape, to.placement, to.nd_sbp));
  return Step{kind, from, to, axis, std::move(p.traffic), p.cost_us};
}

// A compact node key: which placement, then one byte per mesh axis.
std::string key_of(const Layout& l, bool on_target_placement) {
  std::string key(1, on_target_placement ? 't' : 's');
  for (const Sbp& s : l.nd_sbp)
    key += static_cast<char>(s.is_split() ? s.axis() : s.is_broadcast() ? 100 : 101 + static_cast<int>(s.reduce_op()));
  return key;
}

class Search {
 public:
  Search(const Shape& shape, DType dtype, const Layout& from, const Layout& to)
      : shape_(shape), dtype_(dtype), from_(from), to_(to) {
    // Exchange targets: the target, its S/B form, and, across placements, S/B layouts one mesh
    // axis away from that (scatter to a split, then gather among the destinations: a small
    // source placement then sends each element once instead of once per destination).
    NdSbp sb = without_partial(to.nd_sbp);
    exchange_targets_ = {to};
    if (!(sb == to.nd_sbp)) exchange_targets_.push_back({to.placement, sb});
    if (!(from.placement == to.placement))
      for (size_t a = 0; a < sb.size(); ++a)
      for (const Sbp& s : sbp_options(shape.ndim()))
        if (!s.is_partial() && !(s == sb[a])) exchange_targets_.push_back({to.placement, with_axis(sb, a, s)});
  }

  std::vector<Step> run() {
    target_key_ = key_of(to_, true);
    push(from_, 0, std::nullopt, "");
    while (!queue_.empty()) {
      auto [estimate, seq, key] = queue_.top();
      queue_.pop();
      Node& node = nodes_.at(key);
      if (node.done) continue;
      node.done = true;
      if (key == target_key_) return path_to(key);
      expand(node.layout, node.cost, key);
    }
    detail::throw_error("boxing", "no plan from ", from_.to_string(), " to ", to_.to_string());
  }

 private:
  // An edge: the step's kind and mesh axis; its Step is built only if it ends up on the path.
  struct Edge {
    StepKind kind;
    int64_t mesh_axis;
  };
  struct Via {
    Edge edge;
    Layout from;
  };
  struct Node {
    Layout layout;
    double cost;
    std::optional<Via> via;  // the edge that reached it
    std::string prev;
    bool done = false;
  };

  // Every rank's box in a layout, computed once per search.
  const std::vector<Box>& boxes(const Layout& l) {
    std::string key = key_of(l, l.placement == to_.placement);
    auto it = boxes_.find(key);
    if (it == boxes_.end()) it = boxes_.emplace(key, boxes_of(shape_, l.placement, l.nd_sbp)).first;
    return it->second;
  }

  // A layout's side of the search (see push): only the target placement's own layouts count as it.
  bool side_of(const Layout& l) const { return l.placement == to_.placement; }

  void expand(const Layout& at, double cost, const std::string& key) {
    const NdSbp& nd = at.nd_sbp;
    for (size_t a = 0; a < nd.size(); ++a)
      for (const Sbp& s : sbp_options(shape_.ndim())) {
        // Partial values only get in the way, unless the target wants exactly this one here.
        if (s.is_partial() && !(at.placement == to_.placement && to_.nd_sbp[a] == s)) continue;
        if (auto kind = one_axis_step(nd, a, s)) {
          Layout next{at.placement, with_axis(nd, a, s)};
          relax({*kind, static_cast<int64_t>(a)}, at, next, cost, key);
        }
      }
    if (nd.has_partial()) return;  // the exchange moves S/B data only
    for (const Layout& target : exchange_targets_)
      if (!(target == at)) relax({StepKind::kExchange, -1}, at, target, cost, key);
  }

  void relax(const Edge& e, const Layout& from, const Layout& to, double cost, const std::string& prev) {
    detail::Prediction p = detail::predict(dtype_, e.kind, from, to, e.mesh_axis, boxes(from), boxes(to));
    if (minimal_ && !keeps_lower_bound(p, from, to)) return;
    push(to, cost + p.cost_us, Via{e, from}, prev);
  }

  void push(const Layout& layout, double cost, std::optional<Via> via, const std::string& prev) {
    // Only an exchange, or a step on the target placement, lands on the target placement.
    bool target_side = layout.placement == to_.placement &&
                       (!via || via->edge.kind == StepKind::kExchange || via->from.placement == to_.placement);
    std::string key = key_of(layout, target_side);
    auto it = nodes_.find(key);
    // Strictly cheaper only: on ties the first path found (fewer steps, table order) stays.
    if (it != nodes_.end() && (it->second.done || it->second.cost <= cost)) return;
    nodes_.insert_or_assign(key, Node{layout, cost, std::move(via), prev});
    queue_.push({cost + remaining_at_least(layout, key), seq_++, key});
  }

  // Bytes of its target box each target rank does not hold in layout `at` (placement order).
  const std::vector<int64_t>& shortfall(const Layout& at, const std::string& key) {
    auto it = shortfall_.find(key);
    if (it != shortfall_.end()) return it->second;
    const std::vector<Box>& mine = boxes(at);
    const std::vector<Box>& need = boxes(to_);
    std::vector<int64_t> missing(to_.placement.size());
    for (int64_t pos = 0; pos < to_.placement.size(); ++pos) {
      int64_t held_pos = at.placement.position(to_.placement.ranks()[pos]);
      int64_t held = held_pos < 0 ? 0 : overlap(need[pos], mine[held_pos]);
      missing[pos] = (need[pos].numel() - held) * size_of(dtype_);
    }
    return shortfall_.emplace(key, std::move(missing)).first->second;
  }

  // Between S/B layouts a plan receives exactly the lower bound iff every step lowers each
  // rank's shortfall by exactly what the rank receives (no element travels twice, none is
  // dropped and fetched again); the search then keeps only such steps. The exchange into the
  // target always qualifies, so a plan always exists.
  bool keeps_lower_bound(const detail::Prediction& p, const Layout& from, const Layout& to) {
    const std::vector<int64_t>& before = shortfall(from, key_of(from, side_of(from)));
    const std::vector<int64_t>& after = shortfall(to, key_of(to, side_of(to)));
    std::vector<int64_t> received(to_.placement.size(), 0);
    for (const RankTraffic& t : p.traffic) {
      int64_t pos = to_.placement.position(t.rank);
      if (pos < 0 && t.bytes_received > 0) return false;  // off the target: nothing to receive
      if (pos >= 0) received[pos] = t.bytes_received;
    }
    for (size_t pos = 0; pos < received.size(); ++pos)
      if (received[pos] != before[pos] - after[pos]) return false;
    return true;
  }

  // A* heuristic: every rank must still receive its shortfall, and a step costs at least beta
  // times its busiest rank's bytes, so this never overestimates; it is also consistent (a step
  // lowers a rank's shortfall by at most what it receives). Partial layouts get 0: steps into
  // them move no bytes but change boxes.
  double remaining_at_least(const Layout& at, const std::string& key) {
    if (key == target_key_ || at.nd_sbp.has_partial() || to_.nd_sbp.has_partial()) return 0;
    const std::vector<int64_t>& missing = shortfall(at, key);
    int64_t worst = missing.empty() ? 0 : *std::max_element(missing.begin(), missing.end());
    const CostModel& m = cost_model(to_.placement.device_type());
    return m.step_us + m.beta_us_per_byte * static_cast<double>(worst);
  }

  std::vector<Step> path_to(std::string key) {
    std::vector<Step> steps;
    while (const auto& via = nodes_.at(key).via) {
      steps.push_back(make_step(shape_, dtype_, via->edge.kind, via->from, nodes_.at(key).layout, via->edge.mesh_axis));
      key = nodes_.at(key).prev;
    }
    return {steps.rbegin(), steps.rend()};
  }

  using Entry = std::tuple<double, int64_t, std::string>;
  const Shape& shape_;
  DType dtype_;
  const Layout &from_, &to_;
  std::vector<Layout> exchange_targets_;
  std::string target_key_;
  std::unordered_map<std::string, Node> nodes_;
  std::unordered_map<std::string, std::vector<Box>> boxes_;
  std::unordered_map<std::string, std::vector<int64_t>> shortfall_;
  bool minimal_ = !from_.nd_sbp.has_partial() && !to_.nd_sbp.has_partial();
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  int64_t seq_ = 0;
};

Layout on_host(const Layout& l) { return {detail::on_device(l.placement, DeviceType::kCPU), l.nd_sbp}; }

// Each rank of the layout copies its own piece between memory spaces: no bytes between ranks;
// priced as a local copy of the largest piece.
Step device_copy(const Shape& shape, DType dtype, const Layout& from, const Layout& to) {
  Step step{StepKind::kDeviceCopy, from, to, -1, {}, 0};
  std::vector<int64_t> ranks = from.placement.ranks();
  std::sort(ranks.begin(), ranks.end());
  for (int64_t r : ranks) step.traffic.push_back({r});
  int64_t largest = 0;
  for (const Box& b : boxes_of(shape, from.placement, from.nd_sbp)) largest = std::max(largest, b.numel());
  step.cost_us = step_cost_us(cost_model(DeviceType::kCUDA), StepKind::kDeviceCopy, 0, 0, 0, largest * size_of(dtype));
  return step;
}

Plan compute_plan(const Shape& shape, DType dtype, const Layout& from, const Layout& to) {
  Plan plan{shape, dtype, from, to, {}, 0};
  if (from == to) return plan;
  if (from.placement.device_type() != to.placement.device_type()) {
    // What to_layout does: the boxing among host buffers, with the copies to and from the device around it.
    const Layout host_from = on_host(from), host_to = on_host(to);
    if (!(host_from == from)) plan.steps.push_back(device_copy(shape, dtype, from, host_from));
    for (Step& s : compute_plan(shape, dtype, host_from, host_to).steps) plan.steps.push_back(std::move(s));
    if (!(host_to == to)) plan.steps.push_back(device_copy(shape, dtype, host_to, to));
  } else {
    plan.steps = Search(shape, dtype, from, to).run();
  }
  for (const Step& s : plan.steps) plan.cost_us += s.cost_us;
  return plan;
}

}  // namespace

std::shared_ptr<const Plan> plan_boxing(const Shape& shape, DType dtype, const Placement& from, const NdSbp& from_sbp,
                                        const Placement& to, const NdSbp& to_sbp) {
  check_layout("plan_boxing", shape, from.mesh(), from_sbp);
  check_layout("plan_boxing", shape, to.mesh(), to_sbp);
  SPSD_CHECK(is_valid(dtype), "plan_boxing", "dtype has the invalid value ", static_cast<int>(dtype));
  static std::mutex mutex;
  static std::unordered_map<detail::CacheKey, std::shared_ptr<const Plan>, detail::CacheKeyHash> cache;
  detail::CacheKey key;
  key.words.reserve(24 + shape.ndim() + from.size() + to.size());
  key.add(shape);
  key.add(static_cast<int64_t>(dtype));
  key.add(from);
  key.add(from_sbp);
  key.add(to);
  key.add(to_sbp);
  // Planned under the lock: the ranks of a simulated world ask for the same plan at once, and
  // one of them planning while the others wait beats all of them planning.
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // Bounded memory for programs whose shapes keep changing: when full, start over (plans are
  // deterministic, so a plan computed again is the same on every rank).
  if (cache.size() >= kMaxCachedPlans) cache.clear();
  Plan plan = compute_plan(shape, dtype, {from, from_sbp}, {to, to_sbp});
  plan.identity = std::make_shared<const detail::OpIdentity>("to_global(" + shape.to_string() + " " +
                                                             std::string(to_string(dtype)) + " from " +
                                                             plan.from.to_string() + " to " + plan.to.to_string() + ")");
  return cache.emplace(std::move(key), std::make_shared<const Plan>(std::move(plan))).first->second;
}

std::shared_ptr<const Plan> plan_boxing(const Shape& shape, DType dtype, const Layout& from, const Layout& to) {
  return plan_boxing(shape, dtype, from.placement, from.nd_sbp, to.placement, to.nd_sbp);
}

std::string explain_boxing(const Shape& shape, DType dtype, const Placement& from, const NdSbp& from_sbp,
                           const Placement& to, const NdSbp& to_sbp) {
  check_layout("explain_boxing", shape, from.mesh(), from_sbp);  // so that errors name the caller's function
  check_layout("explain_boxing", shape, to.mesh(), to_sbp);
  return plan_boxing(shape, dtype, from, from_sbp, to, to_sbp)->to_string();
}

}  // namespace spsd
