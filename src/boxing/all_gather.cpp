// S(i) |-> B along one mesh axis : all_gather (v-variant for uneven pieces).
#include "box_copy.hpp"
#include "primitives.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

AxisTraffic all_gather_traffic(const AxisGroup& g) {
  const std::vector<int64_t>& counts = g.old_counts;
  return {traffic::all_gather(counts, g.me), g.new_box(g.me).numel()};
}

StoragePtr run_all_gather(const AxisGroup& g, DType dtype, const StoragePtr& in) {
  const std::vector<int64_t>& counts = g.old_counts;
  std::vector<int64_t> displs = displacements(counts);
  const Box& whole = g.new_box(g.me);
  StoragePtr out = allocate(whole, dtype, g.device);
  // Pieces that follow each other in the gathered box's row-major order land in place.
  bool in_place = true;
  for (int64_t m = 0; m < g.size(); ++m)
    in_place = in_place && (counts[m] == 0 || contiguous_offset(g.old_box(m), whole) == displs[m]);
  Communicator& comm = communicator_for(g.ranks, g.device);
  if (in_place) {
    comm.all_gather_v(std::as_const(*in).data(), out->data(), counts, dtype);
    return out;
  }
  auto gathered = staging(whole.numel(), dtype, g.device);
  comm.all_gather_v(std::as_const(*in).data(), gathered.get(), counts, dtype);
  for (int64_t m = 0; m < g.size(); ++m)
    copy_region(gathered.get() + displs[m] * size_of(dtype), g.old_box(m), out->data(), whole, g.old_box(m),
                size_of(dtype), g.device);
  return out;
}

}  // namespace spsd::detail
