// The group of ranks a 1-d step runs over, and the dispatch from a step to its primitive.
#include <algorithm>

#include "primitives.hpp"
#include "spsd/boxing/cost.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {
int64_t axis_stride(const Placement& p, int64_t axis) {
  int64_t stride = 1;
  for (int64_t b = axis + 1; b < p.mesh().ndim(); ++b) stride *= p.mesh()[b];
  return stride;
}

// Refills g (keeping its vectors' memory) with the group along `axis` whose first member sits
// at leader_pos; in a row-major mesh the members are `stride` positions apart.
void fill_group(AxisGroup& g, const Placement& p, int64_t axis, int64_t leader_pos, const std::vector<Box>& old_boxes,
                const std::vector<Box>& new_boxes) {
  const int64_t stride = axis_stride(p, axis), n = p.mesh()[axis];
  for (std::vector<int64_t>* v : {&g.ranks, &g.positions, &g.old_counts, &g.new_counts}) v->reserve(n);
  g.ranks.clear();
  g.positions.clear();
  g.old_counts.clear();
  g.new_counts.clear();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t pos = leader_pos + k * stride;
    g.positions.push_back(pos);
    g.ranks.push_back(p.ranks()[pos]);
    g.old_counts.push_back(old_boxes[pos].numel());
    g.new_counts.push_back(new_boxes[pos].numel());
  }
  g.device = p.device_type();
  g.old_all = &old_boxes;
  g.new_all = &new_boxes;
}
}  // namespace

AxisGroup axis_group(const Step& step, const std::vector<Box>& old_boxes, const std::vector<Box>& new_boxes,
                     int64_t rank) {
  const Placement& p = step.from.placement;
  int64_t pos = p.position(rank), stride = axis_stride(p, step.mesh_axis);
  int64_t coord = pos / stride % p.mesh()[step.mesh_axis];
  AxisGroup g;
  fill_group(g, p, step.mesh_axis, pos - coord * stride, old_boxes, new_boxes);
  g.me = coord;
  return g;
}

StoragePtr allocate(const Box& box, DType dtype, DeviceType device) {
  return Storage::allocate_uninitialized(box.numel() * size_of(dtype), device);
}

namespace {
AxisTraffic axis_traffic(const AxisGroup& g, StepKind kind, const Sbp& from, const Sbp& to) {
  switch (kind) {
    case StepKind::kAllGather: return all_gather_traffic(g);
    case StepKind::kReduceScatter: return reduce_scatter_traffic(g);
    case StepKind::kAllReduce: return all_reduce_traffic(g);
    case StepKind::kAllToAll: return all_to_all_traffic(g);
    case StepKind::kLocal: return local_step_traffic(g, from, to);
    case StepKind::kExchange:
    case StepKind::kDeviceCopy: break;
  }
  throw_error("boxing", "no axis traffic for ", to_string(kind));
}

}  // namespace

Prediction predict(DType dtype, StepKind kind, const Layout& from, const Layout& to, int64_t mesh_axis,
                   const std::vector<Box>& from_boxes, const std::vector<Box>& to_boxes) {
  Prediction out;
  int64_t max_messages = 0, max_local = 0, n = 1, max_bytes = 0;
  if (kind == StepKind::kExchange) {
    ExchangeTraffic x = exchange_traffic(dtype, from, from_boxes, to, to_boxes);
    out.traffic = std::move(x.traffic);
    max_messages = x.max_messages;
    max_local = x.max_local;
    n = static_cast<int64_t>(out.traffic.size());
  } else {
    const Placement& p = from.placement;
    n = p.mesh()[mesh_axis];
    int64_t stride = axis_stride(p, mesh_axis);
    out.traffic.reserve(p.size());
    AxisGroup g;
    for (int64_t pos = 0; pos < p.size(); ++pos) {
      if (pos / stride % n != 0) continue;  // one pass per group, from its first member
      fill_group(g, p, mesh_axis, pos, from_boxes, to_boxes);
      for (g.me = 0; g.me < g.size(); ++g.me) {
        AxisTraffic a = axis_traffic(g, kind, from.nd_sbp[mesh_axis], to.nd_sbp[mesh_axis]);
        out.traffic.push_back({g.ranks[g.me], a.wire.sent * size_of(dtype), a.wire.received * size_of(dtype), 0});
        max_local = std::max(max_local, a.local_elems * size_of(dtype));
      }
    }
    std::sort(out.traffic.begin(), out.traffic.end(),
              [](const RankTraffic& a, const RankTraffic& b) { return a.rank < b.rank; });
  }
  for (const RankTraffic& t : out.traffic) max_bytes = std::max({max_bytes, t.bytes_sent, t.bytes_received});
  out.cost_us = step_cost_us(cost_model(from.placement.device_type()), kind, n, max_messages, max_bytes, max_local);
  return out;
}

StoragePtr run_step(const Shape& shape, DType dtype, const Step& step, const StoragePtr& in) {
  // to_layout makes the copies between memory spaces itself and plans only the host boxing.
  SPSD_CHECK(step.kind != StepKind::kDeviceCopy, "boxing", "a device_copy step reached the executor: ", step.to_string());
  int64_t me = rank();
  if (step.kind == StepKind::kExchange) {
    std::vector<int64_t> ranks = exchange_ranks(step.from, step.to);
    return std::binary_search(ranks.begin(), ranks.end(), me) ? run_exchange(shape, dtype, step, in) : in;
  }
  if (!step.from.placement.contains(me)) return in;
  std::vector<Box> old_boxes = boxes_of(shape, step.from.placement, step.from.nd_sbp),
                   new_boxes = boxes_of(shape, step.to.placement, step.to.nd_sbp);
  AxisGroup g = axis_group(step, old_boxes, new_boxes, me);
  const Sbp& from = step.from.nd_sbp[step.mesh_axis];
  switch (step.kind) {
    case StepKind::kAllGather: return run_all_gather(g, dtype, in);
    case StepKind::kReduceScatter: return run_reduce_scatter(g, dtype, from.reduce_op(), in);
    case StepKind::kAllReduce: return run_all_reduce(g, dtype, from.reduce_op(), in);
    case StepKind::kAllToAll: return run_all_to_all(g, dtype, in);
    case StepKind::kLocal: return run_local_step(g, step, dtype, in);
    case StepKind::kExchange:
    case StepKind::kDeviceCopy: break;
  }
  return in;
}

}  // namespace spsd::detail
