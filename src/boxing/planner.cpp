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
#include "rank_classes.hpp"
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

// What the searches for different conversions of one tensor share: a step's price, the
// elements a move between two layouts of one placement makes its ranks receive, and a layout's
// shortfall against a target. An op's first call plans a conversion of each input into the
// layout of every candidate signature, all from the same layout on the same placement, and
// those searches meet the same steps again. Filled and read under plan_boxing's lock, cleared
// with its cache.
// Over the ranks: the most and the total of something each rank has.
struct Totals {
  int64_t max = 0, sum = 0;
};
struct SearchMemo {
  std::unordered_map<detail::CacheKey, detail::Prediction, detail::CacheKeyHash> prices;
  std::unordered_map<detail::CacheKey, Totals, detail::CacheKeyHash> missing;  // see missing_elements
  size_t size() const { return prices.size() + missing.size(); }
  void clear() {
    prices.clear();
    missing.clear();
  }
};

// The elements of its box in `wanted` that each rank lacks in `held`, two layouts of the same
// ranks in the same order: their max and sum, from the rank classes (rank_classes.hpp); nullopt
// when the layouts' meshes do not refine to one. A shortfall is this with the target wanted; what
// a step between S/B layouts makes the ranks receive, with the new layout wanted.
std::optional<Totals> missing_elements(const detail::LayoutBoxes& wanted, const detail::LayoutBoxes& held) {
  constexpr int64_t kMissingFormula = 1;  // for_each_rank_class's name for the values below
  const detail::LayoutBoxes* layouts[] = {&wanted, &held};
  Totals missing;
  const bool classes = detail::for_each_rank_class(
      std::span<const detail::LayoutBoxes* const>(layouts), kMissingFormula,
      [&](int64_t e, std::span<const int64_t> pieces) -> detail::AxisValues {
        const Range w = wanted.leaf_range(e, pieces[0]), h = held.leaf_range(e, pieces[1]);
        return {w.size(), detail::overlap(w, h), 0, 0, 0};
      },
      [&](std::span<const detail::AxisValues> v, int64_t ranks, int64_t) {
        int64_t box = 1, shared = 1;
        for (const detail::AxisValues& a : v) box *= a[0], shared *= a[1];
        missing.max = std::max(missing.max, box - shared);
        missing.sum += (box - shared) * ranks;
      });
  return classes ? std::optional<Totals>(missing) : std::nullopt;
}

// The search's nodes are numbered: which placement (bit 0: the target's), then one digit per
// mesh axis, the index of its Sbp among sbp_options. Each node's layout, boxes and shortfall are
// made once, when the search first reaches it; edges are only numbers until a step is priced.
class Search {
 public:
  Search(const Shape& shape, DType dtype, const Layout& from, const Layout& to, SearchMemo& memo)
      : shape_(shape), dtype_(dtype), from_(from), to_(to), options_(sbp_options(shape.ndim())),
        same_placement_(from.placement == to.placement), memo_(memo) {
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
    std::optional<detail::LayoutBoxes> boxes = {};  // of layout, set once the node sits in nodes_
    std::vector<int64_t> shortfall = {};            // see shortfall(); empty until asked
    std::optional<Totals> shortfall_totals = {};     // bytes; see shortfall_totals()
    std::optional<int64_t> shortfall_max = {};       // bytes; see shortfall_max()
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
    Node& node = nodes_.emplace(id, Node{{placement, NdSbp(std::move(axes))}}).first->second;
    node.boxes.emplace(shape_, node.layout);  // unordered_map: the node stays where it is
    return node;
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

  detail::StepView view(const Via& e, const Node& a, const Node& b) const {
    return {shape_, dtype_, a.layout, b.layout, e.mesh_axis, *a.boxes, *b.boxes};
  }
  // The memo's key: the tensor, then the given layouts and integers.
  detail::CacheKey key_of(std::initializer_list<const Layout*> layouts, std::initializer_list<int64_t> words) const {
    detail::CacheKey key;
    key.add(shape_);
    key.add(static_cast<int64_t>(dtype_));
    key.add(static_cast<int64_t>(reduction_wire_dtype(dtype_)));
    for (const Layout* l : layouts) {
      key.add(l->placement);
      key.add(l->nd_sbp);
    }
    for (int64_t w : words) key.add(w);
    return key;
  }
  detail::Prediction predict(const Via& e, const Node& a, const Node& b) const {
    detail::CacheKey key = key_of({&a.layout, &b.layout}, {static_cast<int64_t>(e.primitive->kind), e.mesh_axis});
    if (auto it = memo_.prices.find(key); it != memo_.prices.end()) return it->second;
    return memo_.prices.emplace(std::move(key), detail::predict(*e.primitive, view(e, a, b))).first->second;
  }

  void relax(const Via& e, int64_t to, double cost) {
    Node& a = node_at(e.from);
    Node& b = node_at(to);  // unordered_map: references stay valid when it grows
    if (b.done) return;     // push would drop it: not worth pricing
    // Each check below visits every rank, so none runs once the step cannot improve on the cost
    // b has (push would keep b): a primitive that visits every rank to price a step is checked
    // against a floor of its price first, the others are priced first.
    if (e.primitive->traffic_floor) {
      if (b.reached && cost + detail::cost_floor(*e.primitive, view(e, a, b)) >= b.cost) return;
      if (minimal_ && !keeps_lower_bound(a, b)) return;
      push(to, cost + predict(e, a, b).cost_us, e);
      return;
    }
    const double price = predict(e, a, b).cost_us;
    if (b.reached && cost + price >= b.cost) return;
    if (minimal_ && !keeps_lower_bound(a, b)) return;
    push(to, cost + price, e);
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
    const detail::LayoutBoxes& need = *node_at(target_).boxes;
    need.index_positions();
    at.boxes->index_positions();
    at.shortfall.resize(to_.placement.size());
    for (int64_t pos = 0; pos < to_.placement.size(); ++pos) {
      int64_t held_pos = at.layout.placement.position(to_.placement.ranks()[pos]);
      int64_t held = held_pos < 0 ? 0 : need.overlap(pos, *at.boxes, held_pos);
      at.shortfall[pos] = (need.numel(pos) - held) * size_of(dtype_);
    }
    return at.shortfall;
  }

  // The largest shortfall and their sum, in bytes: from the rank classes of the node's and the
  // target's layouts where both are on the same ranks in the same order (missing_elements),
  // without visiting every rank; else rank by rank.
  const Totals& shortfall_totals(Node& at) {
    if (at.shortfall_totals) return *at.shortfall_totals;
    Totals totals;
    if (std::optional<Totals> missing = missing_between(node_at(target_), at)) {
      totals = {missing->max * size_of(dtype_), missing->sum * size_of(dtype_)};
    } else {
      const std::vector<int64_t>& bytes = shortfall(at);
      totals.max = *std::max_element(bytes.begin(), bytes.end());
      for (int64_t b : bytes) totals.sum += b;
    }
    return *(at.shortfall_totals = totals);
  }

  // The largest shortfall, in bytes. No rank lacks more than the largest target box (the first:
  // nested balanced parts put the larger parts first), so a rank with that box that holds none of
  // it settles the max; a few ranks are tried for one (where the boxes of two layouts part ways:
  // the ends of each mesh axis, of either placement) before the rank classes count them all.
  int64_t shortfall_max(Node& at) {
    if (at.shortfall_totals) return at.shortfall_totals->max;
    if (at.shortfall_max) return *at.shortfall_max;
    const detail::LayoutBoxes& need = *node_at(target_).boxes;
    const int64_t largest = need.numel(0);
    const Placement& held_on = at.layout.placement;
    auto holds_none = [&](int64_t pos) {  // pos in the target's placement
      if (need.numel(pos) != largest) return false;
      const int64_t held_pos = held_on.position(to_.placement.ranks()[pos]);
      return held_pos < 0 || need.overlap(pos, *at.boxes, held_pos) == 0;
    };
    const int64_t n = to_.placement.size();
    std::vector<int64_t> tried = {0, n - 1, n / 2};
    for (const Placement* p : {&to_.placement, &held_on})
      for (int64_t a = p->mesh().ndim() - 1, stride = 1; a >= 0; stride *= p->mesh()[a--])
        for (int64_t k : {int64_t{1}, p->mesh()[a] - 1}) {
          if (k >= p->mesh()[a]) continue;
          const int64_t pos = p == &to_.placement ? k * stride : to_.placement.position(p->ranks()[k * stride]);
          if (pos >= 0) tried.push_back(pos);
        }
    for (int64_t pos : tried)
      if (largest > 0 && holds_none(pos)) return *(at.shortfall_max = largest * size_of(dtype_));
    return shortfall_totals(at).max;
  }

  // missing_elements, remembered across the searches that share the memo.
  std::optional<Totals> missing_between(const Node& wanted, const Node& held) {
    detail::CacheKey key = key_of({&wanted.layout, &held.layout}, {});
    if (auto it = memo_.missing.find(key); it != memo_.missing.end()) return it->second;
    std::optional<Totals> missing = missing_elements(*wanted.boxes, *held.boxes);
    if (missing) memo_.missing.emplace(std::move(key), *missing);
    return missing;
  }

  // Between S/B layouts a plan receives exactly the lower bound iff every step lowers each
  // rank's shortfall by exactly what the rank receives (no element travels twice, none is
  // dropped and fetched again); the search then keeps only such steps. The exchange into the
  // target always qualifies, so a plan always exists. Between S/B layouts every primitive makes
  // a rank receive exactly the part of its new box that its old box lacks, so this depends on
  // the two layouts alone, whichever primitive moves between them.
  bool keeps_lower_bound(Node& from, Node& to) {
    const detail::RankList& ranks = to_.placement.rank_list();
    if (&from.layout.placement.rank_list() == &ranks && &to.layout.placement.rank_list() == &ranks) {
      // No rank receives less than its shortfall falls (what it gains of its target box it
      // either held or received), so the ranks' equalities hold together iff their sums do.
      if (std::optional<Totals> received = missing_between(to, from))
        return received->sum * size_of(dtype_) == shortfall_totals(from).sum - shortfall_totals(to).sum;
    }
    const std::vector<int64_t>& before = shortfall(from);
    const std::vector<int64_t>& after = shortfall(to);
    const detail::LayoutBoxes &old_boxes = *from.boxes, &new_boxes = *to.boxes;
    const Placement& moved = to.layout.placement;
    for (int64_t pos = 0; pos < moved.size(); ++pos) {
      const int64_t rank = moved.ranks()[pos], old_pos = from.layout.placement.position(rank);
      const int64_t received =
          (new_boxes.numel(pos) - (old_pos < 0 ? 0 : new_boxes.overlap(pos, old_boxes, old_pos))) * size_of(dtype_);
      const int64_t target_pos = to_.placement.position(rank);
      if (received != (target_pos < 0 ? 0 : before[target_pos] - after[target_pos])) return false;
    }
    // Target ranks outside the step's placement receive nothing, so they must lose nothing.
    if (!(moved == to_.placement))
      for (int64_t pos = 0; pos < to_.placement.size(); ++pos)
        if (!moved.contains(to_.placement.ranks()[pos]) && before[pos] != after[pos]) return false;
    return true;
  }

  // A* heuristic: every rank must still receive its shortfall, and a step costs at least beta
  // times its busiest rank's bytes, so this never overestimates; it is also consistent (a step
  // lowers a rank's shortfall by at most what it receives). Partial layouts get 0: steps into
  // them move no bytes but change boxes.
  double remaining_at_least(int64_t id, Node& at) {
    if (id == target_ || at.layout.nd_sbp.has_partial() || to_.nd_sbp.has_partial()) return 0;
    const CostModel& m = cost_model(to_.placement.device_type());
    return m.step_us + m.beta_us_per_byte * static_cast<double>(shortfall_max(at));
  }

  std::vector<Step> path_to(int64_t id) {
    std::vector<Step> steps;
    while (const std::optional<Via>& via = node_at(id).via) {
      const Node &a = node_at(via->from), &b = node_at(id);
      const detail::Prediction p = predict(*via, a, b);
      steps.push_back(Step{via->primitive->kind, a.layout, b.layout, via->mesh_axis, shape_, dtype_, p.max_bytes, p.cost_us});
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
  SearchMemo& memo_;
  bool minimal_ = !from_.nd_sbp.has_partial() && !to_.nd_sbp.has_partial();
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  int64_t seq_ = 0;
};

// A layout moved to another memory space: each rank copies its own piece (device_copy.cpp).
Step memory_move(const Shape& shape, DType dtype, const Layout& from, const Layout& to) {
  const std::vector<const detail::Primitive*>& movers = records_of(detail::Primitive::Reach::kMemorySpace);
  SPSD_CHECK(movers.size() == 1, "boxing", "expected one memory-space primitive, the list has ", movers.size());
  const detail::Primitive& move = *movers.front();
  const detail::LayoutBoxes from_boxes(shape, from), to_boxes(shape, to);
  const detail::Prediction p = detail::predict(move, {shape, dtype, from, to, -1, from_boxes, to_boxes});
  return Step{move.kind, from, to, -1, shape, dtype, p.max_bytes, p.cost_us};
}

Plan compute_plan(const Shape& shape, DType dtype, const Layout& from, const Layout& to, SearchMemo& memo) {
  Plan plan{shape, dtype, from, to, {}, 0};
  if (from == to) return plan;
  if (from.placement.device_type() != to.placement.device_type()) {
    // The boxing among host buffers, with the moves to and from the device around it: the device
    // side never meets MPI, and the traffic is that of the host boxing.
    const Layout host_from = on_device(from, DeviceType::kCPU), host_to = on_device(to, DeviceType::kCPU);
    if (!(host_from == from)) plan.steps.push_back(memory_move(shape, dtype, from, host_from));
    for (Step& s : compute_plan(shape, dtype, host_from, host_to, memo).steps) plan.steps.push_back(std::move(s));
    if (!(host_to == to)) plan.steps.push_back(memory_move(shape, dtype, host_to, to));
  } else {
    plan.steps = Search(shape, dtype, from, to, memo).run();
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
  key.words.reserve(32 + shape.ndim());
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
  static SearchMemo memo;
  if (cache.size() >= kMaxCachedPlans) cache.clear();
  if (memo.size() >= 64 * kMaxCachedPlans) memo.clear();
  Plan plan = compute_plan(shape, dtype, {from, from_sbp}, {to, to_sbp}, memo);
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
