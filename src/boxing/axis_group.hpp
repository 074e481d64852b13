#pragma once
// The ranks a 1-d step runs over (one group per line of the mesh along the step's axis), and
// the record of a mesh-axis primitive made from what it does for one member of one group.
#include <cstdint>
#include <vector>

#include "layout_boxes.hpp"
#include "primitive.hpp"
#include "spsd/kernel/box_copy.hpp"
#include "spsd/comm/half_reduction.hpp"
#include "spsd/comm/traffic.hpp"

namespace spsd::detail {

// The ranks along the mesh axis a 1-d step changes, as seen from one of them. Boxes are
// computed from the step's layouts when asked (member_box); the counts are at hand.
struct AxisGroup {
  std::vector<int64_t> ranks;      // world ranks in coordinate order along the axis
  std::vector<int64_t> positions;  // their positions in the placement
  std::vector<int64_t> old_counts, new_counts;  // elements in each member's box before and after
  std::vector<int64_t> kept_counts;             // elements each keeps: its old box meets its new one
  int64_t old_total = 0, new_total = 0;         // their sums
  int64_t me = 0;                  // index of the member it is seen from
  DeviceType device = DeviceType::kCPU;
  const LayoutBoxes* old_all = nullptr;  // every rank's box before and after the step
  const LayoutBoxes* new_all = nullptr;
  std::vector<Box> old_boxes, new_boxes;  // filled for running a step, empty for pricing one

  int64_t size() const { return static_cast<int64_t>(ranks.size()); }
  const Box& old_box(int64_t m) const { return old_boxes[m]; }
  const Box& new_box(int64_t m) const { return new_boxes[m]; }
  // Elements member m keeps: its old box meets its new one.
  int64_t kept(int64_t m) const { return kept_counts[m]; }
};

// What one member of a 1-d step moves: elements on the wire and elements written locally.
struct AxisTraffic {
  traffic::Traffic wire;
  int64_t local_elems = 0;
  bool reduces = false;  // a reduction: its elements travel in reduction_wire_dtype
};

// Whether the members' boxes (box(m): their old or new ones) follow each other in whole's
// row-major buffer at displs, so a v-collective can read or write them there without packing.
template <class BoxOf>
bool in_member_order(const AxisGroup& g, const std::vector<int64_t>& counts, const std::vector<int64_t>& displs,
                     const Box& whole, BoxOf box) {
  for (int64_t m = 0; m < g.size(); ++m)
    if (counts[m] != 0 && kernel::contiguous_offset(box(m), whole) != displs[m]) return false;
  return true;
}

// Member traffic reads the group's counts, totals and kept(); a run reads the boxes too.
using MemberTraffic = AxisTraffic (*)(const AxisGroup& g, const StepView& step);
using MemberRun = StoragePtr (*)(const AxisGroup& g, const StepView& step, const StoragePtr& in);

// The busiest member of any group along step.mesh_axis, priced on one group: see axis_group.cpp.
StepTraffic axis_step_traffic(const StepView& step, MemberTraffic member);
// One rank's bytes in the step (zeros outside the placement).
RankTraffic axis_rank_traffic(const StepView& step, int64_t rank, MemberTraffic member);
// This rank's group along step.mesh_axis, run by member.
StoragePtr run_axis_step(const StepView& step, const StoragePtr& in, MemberRun member);

// The record of a mesh-axis primitive: changes says which transition it makes, Traffic and Run
// what it does for one member of one group.
template <MemberTraffic Traffic, MemberRun Run>
constexpr Primitive axis_primitive(StepKind kind, bool (*changes)(const NdSbp&, int64_t, const Sbp&),
                                   int64_t (*rounds)(int64_t, int64_t), bool communicates = true) {
  return {kind,
          Primitive::Reach::kMeshAxis,
          communicates,
          changes,
          nullptr,
          rounds,
          [](const StepView& step) { return axis_step_traffic(step, Traffic); },
          nullptr,
          [](const StepView& step, int64_t rank) { return axis_rank_traffic(step, rank, Traffic); },
          [](const StepView& step, const StoragePtr& in) { return run_axis_step(step, in, Run); }};
}

}  // namespace spsd::detail
