// The group of ranks a 1-d step runs over, and the dispatch from a step to its primitive.
#include <algorithm>

#include "primitives.hpp"
#include "spsd/boxing/cost.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {
std::vector<int64_t> numels(const std::vector<Box>& boxes) {
  std::vector<int64_t> n;
  for (const Box& b : boxes) n.push_back(b.numel());
  return n;
}
}  // namespace

std::vector<int64_t> AxisGroup::old_counts() const { return numels(old_boxes); }
std::vector<int64_t> AxisGroup::new_counts() const { return numels(new_boxes); }

AxisGroup axis_group(const Step& step, const std::vector<Box>& old_boxes, const std::vector<Box>& new_boxes,
                     int64_t rank) {
  const Placement& p = step.from.placement;
  AxisGroup g;
  g.ranks = mesh_group(p, rank, {step.mesh_axis});
  g.me = std::find(g.ranks.begin(), g.ranks.end(), rank) - g.ranks.begin();
  g.device = p.device_type();
  for (int64_t r : g.ranks) {
    g.old_boxes.push_back(old_boxes[p.position(r)]);
    g.new_boxes.push_back(new_boxes[p.position(r)]);
  }
  return g;
}

StoragePtr allocate(const Box& box, DType dtype, DeviceType device) {
  return Storage::allocate(box.numel() * size_of(dtype), device);
}

namespace {
AxisTraffic axis_traffic(const AxisGroup& g, const Step& step) {
  switch (step.kind) {
    case StepKind::kAllGather: return all_gather_traffic(g);
    case StepKind::kReduceScatter: return reduce_scatter_traffic(g);
    case StepKind::kAllReduce: return all_reduce_traffic(g);
    case StepKind::kAllToAll: return all_to_all_traffic(g);
    case StepKind::kLocal: return local_step_traffic(g, step);
    case StepKind::kExchange: break;
  }
  throw_error("boxing", "no axis traffic for ", to_string(step.kind));
}

void predict_exchange(DType dtype, Step& step, const std::vector<Box>& from_boxes, const std::vector<Box>& to_boxes,
                      int64_t& max_messages, int64_t& max_local) {
  std::vector<int64_t> ranks = exchange_ranks(step.from, step.to);
  auto index = [&](int64_t r) { return std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin(); };
  std::vector<RankTraffic> t(ranks.size());
  std::vector<int64_t> received_messages(ranks.size(), 0), local(ranks.size(), 0);
  for (size_t i = 0; i < ranks.size(); ++i) t[i].rank = ranks[i];
  for (const Transfer& x : exchange_transfers(step.from, from_boxes, step.to, to_boxes)) {
    int64_t bytes = x.region.numel() * size_of(dtype);
    if (x.src == x.dst) {
      local[index(x.dst)] += bytes;
      continue;
    }
    t[index(x.src)].bytes_sent += bytes;
    t[index(x.src)].messages += 1;
    t[index(x.dst)].bytes_received += bytes;
    received_messages[index(x.dst)] += 1;
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    max_messages = std::max({max_messages, t[i].messages, received_messages[i]});
    max_local = std::max(max_local, local[i] + t[i].bytes_received);
  }
  step.traffic = std::move(t);
}
}  // namespace

void predict(DType dtype, Step& step, const std::vector<Box>& from_boxes, const std::vector<Box>& to_boxes) {
  int64_t max_messages = 0, max_local = 0, n = 1;
  if (step.kind == StepKind::kExchange) {
    predict_exchange(dtype, step, from_boxes, to_boxes, max_messages, max_local);
    n = static_cast<int64_t>(step.traffic.size());
  } else {
    const Placement& p = step.from.placement;
    n = p.mesh()[step.mesh_axis];
    step.traffic.clear();
    for (int64_t r : p.ranks()) {
      if (p.coords(r)[step.mesh_axis] != 0) continue;  // one pass per group, from its first member
      AxisGroup g = axis_group(step, from_boxes, to_boxes, r);
      for (g.me = 0; g.me < static_cast<int64_t>(g.ranks.size()); ++g.me) {
        AxisTraffic a = axis_traffic(g, step);
        step.traffic.push_back({g.ranks[g.me], a.wire.sent * size_of(dtype), a.wire.received * size_of(dtype), 0});
        max_local = std::max(max_local, a.local_elems * size_of(dtype));
      }
    }
    std::sort(step.traffic.begin(), step.traffic.end(),
              [](const RankTraffic& a, const RankTraffic& b) { return a.rank < b.rank; });
  }
  step.cost_us = step_cost_us(cost_model(step.from.placement.device_type()), step.kind, n, max_messages,
                              step.max_bytes(), max_local);
}

StoragePtr run_step(const Shape& shape, DType dtype, const Step& step, const StoragePtr& in) {
  int64_t me = rank();
  if (step.kind == StepKind::kExchange) {
    std::vector<int64_t> ranks = exchange_ranks(step.from, step.to);
    return std::binary_search(ranks.begin(), ranks.end(), me) ? run_exchange(shape, dtype, step, in) : in;
  }
  if (!step.from.placement.contains(me)) return in;
  AxisGroup g = axis_group(step, boxes_of(shape, step.from.placement, step.from.nd_sbp),
                           boxes_of(shape, step.to.placement, step.to.nd_sbp), me);
  const Sbp& from = step.from.nd_sbp[step.mesh_axis];
  switch (step.kind) {
    case StepKind::kAllGather: return run_all_gather(g, dtype, in);
    case StepKind::kReduceScatter: return run_reduce_scatter(g, dtype, from.reduce_op(), in);
    case StepKind::kAllReduce: return run_all_reduce(g, dtype, from.reduce_op(), in);
    case StepKind::kAllToAll: return run_all_to_all(g, dtype, in);
    case StepKind::kLocal: return run_local_step(g, step, dtype, in);
    case StepKind::kExchange: break;
  }
  return in;
}

}  // namespace spsd::detail
