// S(i) |-> B along one mesh axis : all_gather (v-variant for uneven pieces).
#include "axis_group.hpp"
#include "spsd/kernel/box_copy.hpp"
#include "spsd/runtime/device.hpp"

namespace spsd::detail {

namespace {

AxisTraffic member_traffic(const AxisGroup& g, const StepView&) {
  return {traffic::all_gather(g.old_total, g.old_counts[g.me], g.size()), g.new_counts[g.me]};
}

StoragePtr run(const AxisGroup& g, const StepView& step, const StoragePtr& in) {
  const DType dtype = step.dtype;
  const std::vector<int64_t>& counts = g.old_counts;
  std::vector<int64_t> displs = displacements(counts);
  const Box& whole = g.new_box(g.me);
  StoragePtr out = allocate(whole, dtype, g.device);
  Communicator& comm = communicator_for(g.ranks, g.device);
  // Pieces that follow each other in the gathered box's row-major order land in place.
  if (in_member_order(g, counts, displs, whole, [&](int64_t m) -> const Box& { return g.old_box(m); })) {
    comm.all_gather_v(std::as_const(*in).data(), out->data(), counts, dtype);
    return out;
  }
  auto gathered = staging(whole.numel(), dtype, g.device);
  comm.all_gather_v(std::as_const(*in).data(), gathered.get(), counts, dtype);
  for (int64_t m = 0; m < g.size(); ++m)
    kernel::copy_box(gathered.get() + displs[m] * size_of(dtype), g.old_box(m), out->data(), whole, g.old_box(m),
                     size_of(dtype), g.device);
  return out;
}

}  // namespace

extern constinit const Primitive all_gather_primitive = axis_primitive<member_traffic, run>(
    StepKind::kAllGather, [](const NdSbp& nd, int64_t axis, const Sbp& to) { return nd[axis].is_split() && to.is_broadcast(); }, log_rounds);

}  // namespace spsd::detail
