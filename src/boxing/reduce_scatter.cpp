// P(op) |-> S(i) along one mesh axis : reduce_scatter (v-variant for uneven pieces).
#include "box_copy.hpp"
#include "primitives.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

AxisTraffic reduce_scatter_traffic(const AxisGroup& g) {
  const std::vector<int64_t>& counts = g.new_counts;
  return {traffic::reduce_scatter(counts, g.me), g.new_box(g.me).numel()};
}

StoragePtr run_reduce_scatter(const AxisGroup& g, DType dtype, ReduceOp op, const StoragePtr& in) {
  const std::vector<int64_t>& counts = g.new_counts;
  std::vector<int64_t> displs = displacements(counts);
  const Box& whole = g.old_box(g.me);
  bool in_order = true;
  for (int64_t m = 0; m < g.size(); ++m)
    in_order = in_order && (counts[m] == 0 || contiguous_offset(g.new_box(m), whole) == displs[m]);
  // Pack the members' pieces one after the other unless they already are.
  Staging packed;
  const void* send = std::as_const(*in).data();
  if (!in_order) {
    packed = staging(whole.numel(), dtype, g.device);
    for (int64_t m = 0; m < g.size(); ++m)
      copy_region(std::as_const(*in).data(), whole, packed.get() + displs[m] * size_of(dtype), g.new_box(m), g.new_box(m),
                  size_of(dtype), g.device);
    send = packed.get();
  }
  StoragePtr out = allocate(g.new_box(g.me), dtype, g.device);
  communicator_for(g.ranks, g.device).reduce_scatter_v(send, out->data(), counts, dtype, op);
  return out;
}

}  // namespace spsd::detail
