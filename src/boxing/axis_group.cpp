// The group of ranks a 1-d step runs over, and the dispatch from a step to its primitive.
#include <algorithm>

#include "primitives.hpp"
#include "spsd/boxing/cost.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

std::vector<int64_t> AxisGroup::old_counts() const {
  std::vector<int64_t> n;
  for (int64_t m = 0; m < size(); ++m) n.push_back(old_box(m).numel());
  return n;
}
std::vector<int64_t> AxisGroup::new_counts() const {
  std::vector<int64_t> n;
  for (int64_t m = 0; m < size(); ++m) n.push_back(new_box(m).numel());
  return n;
}

namespace {
// Row-major mesh: the members of a group along `axis` sit `stride` positions apart.
AxisGroup group_from(const Placement& p, int64_t axis, int64_t leader_pos, const std::vector<Box>& old_boxes,
                     const std::vector<Box>& new_boxes) {
  int64_t stride = 1;
  for (int64_t b = axis + 1; b < p.mesh().ndim(); ++b) stride *= p.mesh()[b];
  AxisGroup g;
  for (int64_t k = 0; k < p.mesh()[axis]; ++k) {
    g.positions.push_back(leader_pos + k * stride);
    g.ranks.push_back(p.ranks()[leader_pos + k * stride]);
  }
  g.device = p.device_type();
  g.old_all = &old_boxes;
  g.new_all = &new_boxes;
  return g;
}

int64_t axis_stride(const Placement& p, int64_t axis) {
  int64_t stride = 1;
  for (int64_t b = axis + 1; b < p.mesh().ndim(); ++b) stride *= p.mesh()[b];
  return stride;
}
}  // namespace

AxisGroup axis_group(const Step& step, const std::vector<Box>& old_boxes, const std::vector<Box>& new_boxes,
                     int64_t rank) {
  const Placement& p = step.from.placement;
  int64_t pos = p.position(rank), stride = axis_stride(p, step.mesh_axis);
  int64_t coord = pos / stride % p.mesh()[step.mesh_axis];
  AxisGroup g = group_from(p, step.mesh_axis, pos - coord * stride, old_boxes, new_boxes);
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

void predict_exchange(DType dtype, const Layout& from, const Layout& to, const std::vector<Box>& from_boxes,
                      const std::vector<Box>& to_boxes, Prediction& out, int64_t& max_messages, int64_t& max_local) {
  std::vector<int64_t> ranks = exchange_ranks(from, to);
  auto index = [&](int64_t r) { return std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin(); };
  std::vector<RankTraffic> t(ranks.size());
  std::vector<int64_t> received_messages(ranks.size(), 0), local(ranks.size(), 0);
  for (size_t i = 0; i < ranks.size(); ++i) t[i].rank = ranks[i];
  for (const Transfer& x : exchange_transfers(from, from_boxes, to, to_boxes)) {
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
  out.traffic = std::move(t);
}
}  // namespace

Prediction predict(DType dtype, StepKind kind, const Layout& from, const Layout& to, int64_t mesh_axis,
                   const std::vector<Box>& from_boxes, const std::vector<Box>& to_boxes) {
  Prediction out;
  int64_t max_messages = 0, max_local = 0, n = 1, max_bytes = 0;
  if (kind == StepKind::kExchange) {
    predict_exchange(dtype, from, to, from_boxes, to_boxes, out, max_messages, max_local);
    n = static_cast<int64_t>(out.traffic.size());
  } else {
    const Placement& p = from.placement;
    n = p.mesh()[mesh_axis];
    int64_t stride = axis_stride(p, mesh_axis);
    for (int64_t pos = 0; pos < p.size(); ++pos) {
      if (pos / stride % n != 0) continue;  // one pass per group, from its first member
      AxisGroup g = group_from(p, mesh_axis, pos, from_boxes, to_boxes);
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
