// P(op) |-> B along one mesh axis : all_reduce.
#include "axis_group.hpp"
#include "spsd/runtime/device.hpp"

namespace spsd::detail {

namespace {

// Reduce-scatter then all-gather: twice the tree's rounds.
int64_t rounds(int64_t n, int64_t max_messages) { return 2 * log_rounds(n, max_messages); }

AxisTraffic member_traffic(const AxisGroup& g, const StepView&) {
  const int64_t count = g.old_counts[g.me];
  return {traffic::all_reduce(count, g.size(), g.me), count, true};
}

StoragePtr run(const AxisGroup& g, const StepView& step, const StoragePtr& in) {
  const Box& box = g.old_box(g.me);
  StoragePtr out = allocate(box, step.dtype, g.device);
  communicator_for(g.ranks, g.device)
      .all_reduce(std::as_const(*in).data(), out->data(), box.numel(), step.dtype,
                  step.from.nd_sbp[step.mesh_axis].reduce_op());
  return out;
}

}  // namespace

extern constinit const Primitive all_reduce_primitive = axis_primitive<member_traffic, run>(
    StepKind::kAllReduce, [](const NdSbp& nd, int64_t axis, const Sbp& to) { return nd[axis].is_partial() && to.is_broadcast(); }, rounds);

}  // namespace spsd::detail
