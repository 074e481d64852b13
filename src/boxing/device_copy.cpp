// A layout |-> the same layout in another memory space (cpu <-> cuda) : each rank copies its own
// piece, no traffic between ranks. The planner puts one on each side of the host boxing of a
// conversion between devices, so the device side never meets MPI.
#include <algorithm>

#include "primitive.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {

// Priced as a local copy of the largest piece, the one at coordinates 0.
StepTraffic traffic(const StepView& step) {
  return {.members = 0, .max_local = step.from_boxes.numel(0) * size_of(step.dtype)};
}

RankTraffic rank_traffic(const StepView&, int64_t rank) { return {rank}; }

StoragePtr run(const StepView& step, const StoragePtr& in) {
  SPSD_CHECK(in != nullptr, "to_global", "rank ", rank(), " holds no piece to move from ", step.from);
  const int64_t bytes = step.from_boxes.numel(step.from.placement.position(rank())) * size_of(step.dtype);
  const DeviceType from = step.from.placement.device_type(), to = step.to.placement.device_type();
  StoragePtr out = Storage::allocate_uninitialized(bytes, to);
  copy_bytes(out->data(), to, std::as_const(*in).data(), from, bytes);
  return out;
}

}  // namespace

extern constinit const Primitive device_copy_primitive = whole_layout_primitive(
    StepKind::kDeviceCopy, Primitive::Reach::kMemorySpace, /*communicates=*/false, nullptr, no_rounds, traffic, rank_traffic, run);

}  // namespace spsd::detail
