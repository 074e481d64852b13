// P(op) |-> S(i) along one mesh axis : reduce_scatter (v-variant for uneven pieces).
#include "axis_group.hpp"
#include "spsd/kernel/box_copy.hpp"
#include "spsd/runtime/device.hpp"

namespace spsd::detail {

namespace {

bool changes(const NdSbp& nd, int64_t axis, const Sbp& to) { return nd[axis].is_partial() && to.is_split(); }

AxisTraffic member_traffic(const AxisGroup& g, const StepView&) {
  return {traffic::reduce_scatter(g.new_counts, g.me), g.new_box(g.me).numel()};
}

StoragePtr run(const AxisGroup& g, const StepView& step, const StoragePtr& in) {
  const DType dtype = step.dtype;
  const std::vector<int64_t>& counts = g.new_counts;
  std::vector<int64_t> displs = displacements(counts);
  const Box& whole = g.old_box(g.me);
  bool in_order = true;
  for (int64_t m = 0; m < g.size(); ++m)
    in_order = in_order && (counts[m] == 0 || kernel::contiguous_offset(g.new_box(m), whole) == displs[m]);
  // Pack the members' pieces one after the other unless they already are.
  Staging packed;
  const void* send = std::as_const(*in).data();
  if (!in_order) {
    packed = staging(whole.numel(), dtype, g.device);
    for (int64_t m = 0; m < g.size(); ++m)
      kernel::copy_box(std::as_const(*in).data(), whole, packed.get() + displs[m] * size_of(dtype), g.new_box(m),
                       g.new_box(m), size_of(dtype), g.device);
    send = packed.get();
  }
  StoragePtr out = allocate(g.new_box(g.me), dtype, g.device);
  communicator_for(g.ranks, g.device)
      .reduce_scatter_v(send, out->data(), counts, dtype, step.from.nd_sbp[step.mesh_axis].reduce_op());
  return out;
}

}  // namespace

extern constinit const Primitive reduce_scatter_primitive =
    axis_primitive<member_traffic, run>(StepKind::kReduceScatter, changes, log_rounds);

}  // namespace spsd::detail
