// GlobalTensor::to_global: runs the planned steps on this rank.
#include "primitives.hpp"
#include <algorithm>

#include "spsd/boxing/planner.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/log.hpp"
#include "spsd/tensor/global_tensor.hpp"

namespace spsd::detail {

namespace {

// This rank's piece moved to another memory space (no communication).
GlobalData moved(const GlobalData& in, DeviceType device) {
  GlobalData out{in.shape, in.dtype, on_device(in.placement, device), in.nd_sbp, nullptr};
  if (in.local) {
    const int64_t bytes = in.local->bytes();
    out.local = Storage::allocate_uninitialized(bytes, device);
    copy_bytes(out.local->data(), device, std::as_const(*in.local).data(), in.local->device_type(), bytes);
  }
  return out;
}

}  // namespace

GlobalData to_layout(const GlobalData& in, const Placement& placement, const NdSbp& nd_sbp) {
  check_global_layout("to_global", in.shape, placement, nd_sbp);
  check_piece("to_global", "the tensor", in);  // a raw GlobalTensor's own layout and piece
  // Between cpu and cuda: each rank copies its piece to the host, the boxing runs among host
  // buffers, and the target ranks copy their pieces to the device. The copies are local, so the
  // traffic is that of the host boxing; the device side never meets MPI.
  if (in.placement.device_type() != placement.device_type()) {
    const GlobalData host = in.placement.device_type() == DeviceType::kCPU ? in : moved(in, DeviceType::kCPU);
    GlobalData boxed = to_layout(host, on_device(placement, DeviceType::kCPU), nd_sbp);
    return placement.device_type() == DeviceType::kCPU ? boxed : moved(boxed, placement.device_type());
  }
  const int64_t me = rank();
  GlobalData out{in.shape, in.dtype, placement, nd_sbp, nullptr};
  bool in_from = in.placement.contains(me), in_to = placement.contains(me);
  if (!in_from && !in_to) return out;  // not involved: nothing to wait for
  if (in.placement == placement && in.nd_sbp == nd_sbp) {
    out.local = in.local;
    return out;
  }
  std::shared_ptr<const Plan> plan = plan_boxing(in.shape, in.dtype, in.placement, in.nd_sbp, placement, nd_sbp);
  // Every rank of both placements takes part, so they all compare what they are converting.
  std::vector<int64_t> ranks = in.placement.ranks();
  ranks.insert(ranks.end(), placement.ranks().begin(), placement.ranks().end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  note_op(ranks, plan->identity);
  if (plan->communicates()) check_ops(ranks);
  if ((log_enabled("dispatch") || log_enabled("boxing")) && me == ranks.front())
    log_line("boxing", "to_global: " + plan->to_string());
  StoragePtr local = run_plan(plan, in_from ? in.local : nullptr);
  if (in_to) out.local = std::move(local);
  return out;
}

namespace {
StoragePtr run_steps(const Plan& plan, StoragePtr local) {
  for (const Step& step : plan.steps) local = run_step(plan.shape, plan.dtype, step, local);
  return local;
}
}  // namespace

StoragePtr run_plan(std::shared_ptr<const Plan> plan, StoragePtr local, Urgency urgency) {
  if (!plan->communicates()) return run_steps(*plan, std::move(local));  // local copies: compute
  const int64_t me = rank();
  StoragePtr out;
  if (plan->to.placement.contains(me)) {
    const Box box = box_at(plan->shape, plan->to.placement.mesh(), plan->to.nd_sbp, plan->to.placement.coords(me));
    out = Storage::allocate_pending(box.numel() * size_of(plan->dtype), plan->to.placement.device_type());
  }
  Instruction ins{"boxing", {}, {}, nullptr, std::max(plan->bytes_sent(me), plan->bytes_received(me))};
  if (local) ins.reads.push_back(local);
  if (out) ins.writes.push_back(out);
  ins.run = [plan, local = std::move(local), out] {
    StoragePtr result = run_steps(*plan, local);
    if (out) out->adopt(std::move(result));
  };
  issue_comm(std::move(ins), urgency);
  return out;
}

}  // namespace spsd::detail
