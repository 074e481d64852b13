// The groups of a 1-d step: predicting every member's traffic, and running this rank's group.
#include "axis_group.hpp"

#include <algorithm>

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

StepTraffic axis_step_traffic(const StepView& step, MemberTraffic member) {
  const Placement& p = step.from.placement;
  const int64_t n = p.mesh()[step.mesh_axis], stride = axis_stride(p, step.mesh_axis), elem = size_of(step.dtype);
  const int64_t reduced_elem = size_of(reduction_wire_dtype(step.dtype));  // as the communicator counts it
  StepTraffic out;
  out.members = n;
  out.ranks.reserve(p.size());
  AxisGroup g;
  for (int64_t pos = 0; pos < p.size(); ++pos) {
    if (pos / stride % n != 0) continue;  // one pass per group, from its first member
    fill_group(g, p, step.mesh_axis, pos, step.from_boxes, step.to_boxes);
    for (g.me = 0; g.me < g.size(); ++g.me) {
      AxisTraffic a = member(g, step);
      const int64_t wire_elem = a.reduces ? reduced_elem : elem;
      out.ranks.push_back({g.ranks[g.me], a.wire.sent * wire_elem, a.wire.received * wire_elem, 0});
      out.max_local = std::max(out.max_local, a.local_elems * elem);
    }
  }
  std::sort(out.ranks.begin(), out.ranks.end(), [](const RankTraffic& a, const RankTraffic& b) { return a.rank < b.rank; });
  return out;
}

StoragePtr run_axis_step(const StepView& step, const StoragePtr& in, MemberRun member) {
  const Placement& p = step.from.placement;
  const int64_t pos = p.position(rank()), stride = axis_stride(p, step.mesh_axis);
  const int64_t coord = pos / stride % p.mesh()[step.mesh_axis];
  AxisGroup g;
  fill_group(g, p, step.mesh_axis, pos - coord * stride, step.from_boxes, step.to_boxes);
  g.me = coord;
  return member(g, step, in);
}

}  // namespace spsd::detail
