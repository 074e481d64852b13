// P(op) |-> S(i) along one mesh axis : reduce_scatter (v-variant for uneven pieces).
#include "axis_group.hpp"
#include "spsd/kernel/box_copy.hpp"
#include "spsd/runtime/device.hpp"

namespace spsd::detail {

namespace {

AxisTraffic member_traffic(const AxisGroup& g, const StepView&) {
  return {traffic::reduce_scatter(g.new_total, g.new_counts[g.me], g.size()), g.new_counts[g.me], true};
}

StoragePtr run(const AxisGroup& g, const StepView& step, const StoragePtr& in) {
  // This rank's partial box holds every member's piece: sent as they are when they already follow
  // each other in member order, else packed so.
  const Box& whole = g.old_box(g.me);
  const std::vector<int64_t> displs = displacements(g.new_counts);
  const void* send = std::as_const(*in).data();
  Staging packed;
  if (!in_member_order(g, g.new_counts, displs, whole, [&](int64_t m) -> const Box& { return g.new_box(m); })) {
    const int64_t elem = size_of(step.dtype);
    packed = staging(whole.numel(), step.dtype, g.device);
    for (int64_t m = 0; m < g.size(); ++m)
      kernel::copy_box(send, whole, packed.get() + displs[m] * elem, g.new_box(m), g.new_box(m), elem, g.device);
    send = packed.get();
  }
  StoragePtr out = allocate(g.new_box(g.me), step.dtype, g.device);
  communicator_for(g.ranks, g.device)
      .reduce_scatter_v(send, out->data(), g.new_counts, step.dtype, step.from.nd_sbp[step.mesh_axis].reduce_op());
  return out;
}

}  // namespace

extern constinit const Primitive reduce_scatter_primitive = axis_primitive<member_traffic, run>(
    StepKind::kReduceScatter, [](const NdSbp& nd, int64_t axis, const Sbp& to) { return nd[axis].is_partial() && to.is_split(); }, log_rounds);

}  // namespace spsd::detail
