// Dijkstra over layouts (placement, NdSbp). Edges come from the boxing primitives' records
// (src/boxing/primitive.hpp): a mesh-axis primitive changes one mesh axis's Sbp; a layouts
// primitive (the exchange) goes from an S/B layout into the target or a layout one mesh axis
// away from it on the target placement. A conversion between memory spaces is the host plan
// with the memory-space primitive (device_copy) on each side.
#include "spsd/boxing/planner.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>

#include "../layout/cache_key.hpp"
#include "primitive.hpp"
#include "spsd/boxing/cost.hpp"
#include "spsd/comm/half_reduction.hpp"
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

// Whether mesh axis a may change from nd[a] to `to` by a 1-d step at all, whatever primitive
// makes it: the nesting rules of N-d layouts.
bool axis_may_change(const NdSbp& nd, int64_t a, const Sbp& to) {
  const Sbp& from = nd[a];
  if (from == to) return false;
  auto free = [&](const Sbp& s) { return !s.is_split() || !split_later(nd, a, s.axis()); };
  if (!free(from) || !free(to)) return false;
  return !from.is_partial() || later_partials_use(nd, a, from.reduce_op());
}

// The records of one reach, in list order (made once: the records are constants).
const std::vector<const detail::Primitive*>& records_of(detail::Primitive::Reach reach) {
  static const auto by_reach = [] {
    std::array<std::vector<const detail::Primitive*>, 3> lists;
    for (const detail::Primitive* p : detail::primitives()) lists[static_cast<size_t>(p->reach)].push_back(p);
    return lists;
  }();
  return by_reach[static_cast<size_t>(reach)];
}

// The search's nodes are numbered: which placement (bit 0: the target's), then one digit per
// mesh axis, the index of its Sbp among sbp_options. Each node's layout, boxes and shortfall are
// made once, when the search first reaches it; edges are only numbers until a step is priced.
class Search {
 public:
  Search(const Shape& shape, DType dtype, const Layout& from, const Layout& to)
      : shape_(shape), dtype_(dtype), from_(from), to_(to), options_(sbp_options(shape.ndim())),
        same_placement_(from.placement == to.placement) {
    const int64_t base = static_cast<int64_t>(options_.size());
    const size_t mesh_axes = std::max(from.nd_sbp.size(), to.nd_sbp.size());
    int64_t weight = 2;
    for (size_t a = 0; a < mesh_axes; ++a) {
      SPSD_CHECK(weight <= std::numeric_limits<int64_t>::max() / base, "boxing", "a mesh of ", mesh_axes,
                 " axes and a tensor of ", shape.ndim(), " axes have too many layouts to plan over");
      digit_weight_.push_back(weight);
      weight *= base;
    }
    // Exchange targets: the target, its S/B form, and, across placements, S/B layouts one mesh
    // axis away from that (scatter to a split, then gather among the destinations: a small
    // source placement then sends each element once instead of once per destination).
    target_ = id_of(to.nd_sbp, true);
    const int64_t sb = id_of(without_partial(to.nd_sbp), true);
    layout_targets_ = {target_};
    if (sb != target_) layout_targets_.push_back(sb);
    if (!same_placement_)
      for (size_t a = 0; a < to.nd_sbp.size(); ++a)
        for (const Sbp& s : options_)
          if (!s.is_partial() && with_digit(sb, a, s) != sb) layout_targets_.push_back(with_digit(sb, a, s));
  }

  std::vector<Step> run() {
    push(id_of(from_.nd_sbp, same_placement_), 0, std::nullopt);
    while (!queue_.empty()) {
      auto [estimate, seq, id] = queue_.top();
      queue_.pop();
      Node& node = node_at(id);
      if (node.done) continue;
      node.done = true;
      if (id == target_) return path_to(id);
      expand(id, node);
    }
    detail::throw_error("boxing", "no plan from ", from_.to_string(), " to ", to_.to_string());
  }

 private:
  // An edge: the step's primitive and mesh axis; its Step is built only if it ends up on the path.
  struct Via {
    const detail::Primitive* primitive;
    int64_t mesh_axis;
    int64_t from;  // node id
  };
  struct Node {
    Layout layout;
    std::vector<Box> boxes;               // every rank's box, placement order
    std::vector<int64_t> shortfall = {};  // see shortfall(); empty until asked
    double cost = 0;
    bool reached = false, done = false;
    std::optional<Via> via = {};  // the edge that reached it
  };

  int64_t digit_of(const Sbp& s) const { return std::find(options_.begin(), options_.end(), s) - options_.begin(); }
  bool on_target(int64_t id) const { return (id & 1) != 0; }

  int64_t id_of(const NdSbp& nd, bool on_target_placement) const {
    int64_t id = on_target_placement ? 1 : 0;
    for (size_t a = 0; a < nd.size(); ++a) id += digit_of(nd[a]) * digit_weight_[a];
    return id;
  }
  int64_t with_digit(int64_t id, size_t a, const Sbp& s) const {
    int64_t old = id / digit_weight_[a] % static_cast<int64_t>(options_.size());
    return id + (digit_of(s) - old) * digit_weight_[a];
  }

  Node& node_at(int64_t id) {
    auto it = nodes_.find(id);
    if (it != nodes_.end()) return it->second;
    const Placement& placement = on_target(id) ? to_.placement : from_.placement;
    std::vector<Sbp> axes;
    for (int64_t a = 0; a < placement.mesh().ndim(); ++a)
      axes.push_back(options_[id / digit_weight_[a] % static_cast<int64_t>(options_.size())]);
    NdSbp nd(std::move(axes));
    std::vector<Box> boxes = boxes_of(shape_, placement, nd);
    return nodes_.emplace(id, Node{{placement, std::move(nd)}, std::move(boxes)}).first->second;
  }

  void expand(int64_t id, const Node& at) {
    const NdSbp& nd = at.layout.nd_sbp;
    for (size_t a = 0; a < nd.size(); ++a)
      for (const Sbp& s : options_) {
        // Partial values only get in the way, unless the target wants exactly this one here.
        if (s.is_partial() && !(on_target(id) && to_.nd_sbp[a] == s)) continue;
        if (!axis_may_change(nd, a, s)) continue;
        for (const detail::Primitive* p : axis_records_)
          if (p->changes_axis(nd, a, s)) relax({p, static_cast<int64_t>(a), id}, with_digit(id, a, s), at.cost);
      }
    for (const detail::Primitive* p : layout_records_)
      if (p->can_start_from(nd))
        for (int64_t target : layout_targets_)
          if (target != id) relax({p, -1, id}, target, at.cost);
  }

  detail::Prediction predict(const Via& e, const Node& a, const Node& b) const {
    return detail::predict(*e.primitive, {shape_, dtype_, a.layout, b.layout, e.mesh_axis, a.boxes, b.boxes});
  }

  void relax(const Via& e, int64_t to, double cost) {
    Node& a = node_at(e.from);
    Node& b = node_at(to);  // unordered_map: references stay valid when it grows
    detail::Prediction p = predict(e, a, b);
    if (minimal_ && !keeps_lower_bound(p, a, b)) return;
    push(to, cost + p.cost_us, e);
  }

  void push(int64_t id, double cost, std::optional<Via> via) {
    Node& n = node_at(id);
    // Strictly cheaper only: on ties the first path found (fewer steps, table order) stays.
    if (n.done || (n.reached && n.cost <= cost)) return;
    n.cost = cost;
    n.reached = true;
    n.via = via;
    queue_.push({cost + remaining_at_least(id, n), seq_++, id});
  }

  // Bytes of its target box each target rank does not hold in this node (placement order).
  const std::vector<int64_t>& shortfall(Node& at) {
    if (!at.shortfall.empty()) return at.shortfall;  // a placement has at least one rank
    const std::vector<Box>& need = node_at(target_).boxes;
    at.shortfall.resize(to_.placement.size());
    for (int64_t pos = 0; pos < to_.placement.size(); ++pos) {
      int64_t held_pos = at.layout.placement.position(to_.placement.ranks()[pos]);
      int64_t held = held_pos < 0 ? 0 : overlap(need[pos], at.boxes[held_pos]);
      at.shortfall[pos] = (need[pos].numel() - held) * size_of(dtype_);
    }
    return at.shortfall;
  }

  // Between S/B layouts a plan receives exactly the lower bound iff every step lowers each
  // rank's shortfall by exactly what the rank receives (no element travels twice, none is
  // dropped and fetched again); the search then keeps only such steps. The exchange into the
  // target always qualifies, so a plan always exists.
  bool keeps_lower_bound(const detail::Prediction& p, Node& from, Node& to) {
    const std::vector<int64_t>& before = shortfall(from);
    const std::vector<int64_t>& after = shortfall(to);
    received_.assign(to_.placement.size(), 0);
    for (const RankTraffic& t : p.traffic) {
      int64_t pos = to_.placement.position(t.rank);
      if (pos < 0 && t.bytes_received > 0) return false;  // off the target: nothing to receive
      if (pos >= 0) received_[pos] = t.bytes_received;
    }
    for (size_t pos = 0; pos < received_.size(); ++pos)
      if (received_[pos] != before[pos] - after[pos]) return false;
    return true;
  }

  // A* heuristic: every rank must still receive its shortfall, and a step costs at least beta
  // times its busiest rank's bytes, so this never overestimates; it is also consistent (a step
  // lowers a rank's shortfall by at most what it receives). Partial layouts get 0: steps into
  // them move no bytes but change boxes.
  double remaining_at_least(int64_t id, Node& at) {
    if (id == target_ || at.layout.nd_sbp.has_partial() || to_.nd_sbp.has_partial()) return 0;
    const std::vector<int64_t>& missing = shortfall(at);
    int64_t worst = missing.empty() ? 0 : *std::max_element(missing.begin(), missing.end());
    const CostModel& m = cost_model(to_.placement.device_type());
    return m.step_us + m.beta_us_per_byte * static_cast<double>(worst);
  }

  std::vector<Step> path_to(int64_t id) {
    std::vector<Step> steps;
    while (const std::optional<Via>& via = node_at(id).via) {
      const Node &a = node_at(via->from), &b = node_at(id);
      detail::Prediction p = predict(*via, a, b);
      steps.push_back(Step{via->primitive->kind, a.layout, b.layout, via->mesh_axis, std::move(p.traffic), p.cost_us});
      id = via->from;
    }
    return {steps.rbegin(), steps.rend()};
  }

  using Entry = std::tuple<double, int64_t, int64_t>;  // estimate, push order, node id
  const Shape& shape_;
  DType dtype_;
  const Layout &from_, &to_;
  const std::vector<Sbp> options_;
  const bool same_placement_;
  std::vector<int64_t> digit_weight_;  // 2 * options^a: node id = placement bit + sum of digit_a * weight_a
  int64_t target_ = 0;
  std::vector<int64_t> layout_targets_;  // where the layouts primitives (the exchange) go
  const std::vector<const detail::Primitive*>& axis_records_ = records_of(detail::Primitive::Reach::kMeshAxis);
  const std::vector<const detail::Primitive*>& layout_records_ = records_of(detail::Primitive::Reach::kLayouts);
  std::unordered_map<int64_t, Node> nodes_;
  std::vector<int64_t> received_;  // keeps_lower_bound's scratch
  bool minimal_ = !from_.nd_sbp.has_partial() && !to_.nd_sbp.has_partial();
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  int64_t seq_ = 0;
};

// A layout moved to another memory space: each rank copies its own piece (device_copy.cpp).
Step memory_move(const Shape& shape, DType dtype, const Layout& from, const Layout& to) {
  const std::vector<const detail::Primitive*>& movers = records_of(detail::Primitive::Reach::kMemorySpace);
  SPSD_CHECK(movers.size() == 1, "boxing", "expected one memory-space primitive, the list has ", movers.size());
  const detail::Primitive& move = *movers.front();
  const std::vector<Box> boxes = boxes_of(shape, from);
  detail::Prediction p = detail::predict(move, {shape, dtype, from, to, -1, boxes, boxes});
  return Step{move.kind, from, to, -1, std::move(p.traffic), p.cost_us};
}

Plan compute_plan(const Shape& shape, DType dtype, const Layout& from, const Layout& to) {
  Plan plan{shape, dtype, from, to, {}, 0};
  if (from == to) return plan;
  if (from.placement.device_type() != to.placement.device_type()) {
    // The boxing among host buffers, with the moves to and from the device around it: the device
    // side never meets MPI, and the traffic is that of the host boxing.
    const Layout host_from = on_device(from, DeviceType::kCPU), host_to = on_device(to, DeviceType::kCPU);
    if (!(host_from == from)) plan.steps.push_back(memory_move(shape, dtype, from, host_from));
    for (Step& s : compute_plan(shape, dtype, host_from, host_to).steps) plan.steps.push_back(std::move(s));
    if (!(host_to == to)) plan.steps.push_back(memory_move(shape, dtype, host_to, to));
  } else {
    plan.steps = Search(shape, dtype, from, to).run();
  }
  for (const Step& s : plan.steps) plan.cost_us += s.cost_us;
  return plan;
}

// What a to_global running the plan notes for the cross-rank check (Plan::identity).
std::shared_ptr<const detail::OpIdentity> noted_identity(const Shape& shape, DType dtype, const Layout& from,
                                                         const Layout& to) {
  const bool moves_memory = from.placement.device_type() != to.placement.device_type();
  const Layout host_from = on_device(from, DeviceType::kCPU), host_to = on_device(to, DeviceType::kCPU);
  if (moves_memory && host_from == host_to) return nullptr;
  return std::make_shared<const detail::OpIdentity>("to_global(" + shape.to_string() + " " + std::string(to_string(dtype)) +
                                                    " from " + (moves_memory ? host_from : from).to_string() + " to " +
                                                    (moves_memory ? host_to : to).to_string() + ")");
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
  key.add(static_cast<int64_t>(reduction_wire_dtype(dtype)));  // a 16-bit reduction's bytes depend on the setting
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
  plan.identity = noted_identity(shape, dtype, plan.from, plan.to);
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
