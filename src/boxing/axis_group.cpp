// The groups of a 1-d step: pricing it on one group, one rank's traffic, running this rank's group.
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

// The group along step.mesh_axis whose first member sits at leader_pos; in a row-major mesh the
// members are `stride` positions apart. with_boxes: also every member's boxes (for a run).
AxisGroup group_at(const StepView& step, int64_t leader_pos, bool with_boxes) {
  const Placement& p = step.from.placement;
  const int64_t stride = axis_stride(p, step.mesh_axis), n = p.mesh()[step.mesh_axis];
  AxisGroup g;
  for (auto* v : {&g.positions, &g.ranks, &g.old_counts, &g.new_counts, &g.kept_counts}) v->reserve(n);
  g.device = p.device_type();
  g.old_all = &step.from_boxes;
  g.new_all = &step.to_boxes;
  // Along the axis only the pieces of the tensor axes it splits move, by a fixed number of
  // pieces per member: each member's ranges are found without dividing its position.
  const int64_t ndim = step.shape.ndim();
  std::vector<int64_t> old_leaf(ndim), new_leaf(ndim), old_step(ndim), new_step(ndim);
  for (int64_t e = 0; e < ndim; ++e) {
    old_leaf[e] = step.from_boxes.leaf(leader_pos, e), new_leaf[e] = step.to_boxes.leaf(leader_pos, e);
    old_step[e] = step.from_boxes.leaf_step(e, step.mesh_axis), new_step[e] = step.to_boxes.leaf_step(e, step.mesh_axis);
  }
  for (int64_t k = 0; k < n; ++k) {
    const int64_t pos = leader_pos + k * stride;
    g.positions.push_back(pos);
    g.ranks.push_back(p.ranks()[pos]);
    int64_t old_count = 1, new_count = 1, kept = 1;
    for (int64_t e = 0; e < ndim; ++e) {
      const Range a = step.from_boxes.leaf_range(e, old_leaf[e] + k * old_step[e]);
      const Range b = step.to_boxes.leaf_range(e, new_leaf[e] + k * new_step[e]);
      old_count *= a.size(), new_count *= b.size();
      kept *= overlap(a, b);
    }
    g.old_counts.push_back(old_count);
    g.new_counts.push_back(new_count);
    g.kept_counts.push_back(kept);
    g.old_total += old_count;
    g.new_total += new_count;
    if (with_boxes) {
      g.old_boxes.push_back(step.from_boxes.box(pos));
      g.new_boxes.push_back(step.to_boxes.box(pos));
    }
  }
  return g;
}

// The group holding the rank at position pos, seen from it.
AxisGroup group_of(const StepView& step, int64_t pos, bool with_boxes) {
  const Placement& p = step.from.placement;
  const int64_t stride = axis_stride(p, step.mesh_axis), coord = pos / stride % p.mesh()[step.mesh_axis];
  AxisGroup g = group_at(step, pos - coord * stride, with_boxes);
  g.me = coord;
  return g;
}

RankTraffic bytes_of(const AxisGroup& g, const StepView& step, const AxisTraffic& a) {
  const int64_t elem = size_of(a.reduces ? reduction_wire_dtype(step.dtype) : step.dtype);  // as the communicator counts
  return {g.ranks[g.me], a.wire.sent * elem, a.wire.received * elem, 0};
}
}  // namespace

// Priced on the group of the rank at position 0. Every group along the axis covers one parent
// box (the layout with this axis broadcast) and splits it the same way; the parent at
// coordinates 0 is the largest along every tensor axis (the first of nested balanced parts is
// the largest at each level), and every member's bytes grow with its group's piece sizes (each
// primitive's formula is a sum of balanced parts of the parent). So its busiest member is the
// busiest rank of the step. Checked against every rank on the suites' cases
// (test/unit/test_planner_scale.cpp).
StepTraffic axis_step_traffic(const StepView& step, MemberTraffic member) {
  AxisGroup g = group_at(step, 0, false);
  StepTraffic out;
  out.members = g.size();
  for (g.me = 0; g.me < g.size(); ++g.me) {
    const AxisTraffic a = member(g, step);
    const RankTraffic t = bytes_of(g, step, a);
    out.max_bytes = std::max({out.max_bytes, t.bytes_sent, t.bytes_received});
    out.max_local = std::max(out.max_local, a.local_elems * size_of(step.dtype));
  }
  return out;
}

RankTraffic axis_rank_traffic(const StepView& step, int64_t rank, MemberTraffic member) {
  const int64_t pos = step.from.placement.position(rank);
  if (pos < 0) return {rank};
  const AxisGroup g = group_of(step, pos, false);
  return bytes_of(g, step, member(g, step));
}

StoragePtr run_axis_step(const StepView& step, const StoragePtr& in, MemberRun member) {
  return member(group_of(step, step.from.placement.position(rank()), true), step, in);
}

}  // namespace spsd::detail
