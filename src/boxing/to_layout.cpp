// GlobalTensor::to_global: runs the planned steps on this rank.
#include "primitives.hpp"
#include "spsd/boxing/planner.hpp"
#include "spsd/tensor/global_tensor.hpp"

namespace spsd::detail {

void check_global_layout(std::string_view op, const Shape& shape, const Placement& placement, const NdSbp& nd_sbp) {
  check_layout(op, shape, placement.mesh(), nd_sbp);
  check_placement(op, placement);
}

GlobalData to_layout(const GlobalData& in, const Placement& placement, const NdSbp& nd_sbp) {
  check_global_layout("to_global", in.shape, placement, nd_sbp);
  const int64_t me = rank();
  GlobalData out{in.shape, in.dtype, placement, nd_sbp, nullptr};
  bool in_from = in.placement.contains(me), in_to = placement.contains(me);
  if (!in_from && !in_to) return out;  // not involved: nothing to wait for
  SPSD_CHECK(!in_from || in.local, "to_global", "rank ", me, " is in ", in.placement, " but holds no local data");
  if (in.placement == placement && in.nd_sbp == nd_sbp) {
    out.local = in.local;
    return out;
  }
  std::shared_ptr<const Plan> plan = plan_boxing(in.shape, in.dtype, {in.placement, in.nd_sbp}, {placement, nd_sbp});
  StoragePtr local = in_from ? in.local : nullptr;
  for (const Step& step : plan->steps) local = run_step(in.shape, in.dtype, step, local);
  if (in_to) out.local = local;
  return out;
}

}  // namespace spsd::detail
