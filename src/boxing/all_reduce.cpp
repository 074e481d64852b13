// P(op) |-> B along one mesh axis : all_reduce.
#include "primitives.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

AxisTraffic all_reduce_traffic(const AxisGroup& g) {
  int64_t count = g.old_box(g.me).numel();
  return {traffic::all_reduce(count, static_cast<int64_t>(g.ranks.size()), g.me), count};
}

StoragePtr run_all_reduce(const AxisGroup& g, DType dtype, ReduceOp op, const StoragePtr& in) {
  const Box& box = g.old_box(g.me);
  StoragePtr out = allocate(box, dtype, g.device);
  communicator_for(g.ranks, g.device).all_reduce(std::as_const(*in).data(), out->data(), box.numel(), dtype, op);
  return out;
}

}  // namespace spsd::detail
