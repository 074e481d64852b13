// The executor: runs a plan's steps on this rank, each through its primitive's record.
#include <algorithm>

#include "primitive.hpp"
#include "spsd/boxing/planner.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {

// One step on this rank (a no-op for ranks outside both placements); returns its new piece.
StoragePtr run_step(const Shape& shape, DType dtype, const Step& step, const StoragePtr& in) {
  const int64_t me = rank();
  if (!step.from.placement.contains(me) && !step.to.placement.contains(me)) return in;
  const LayoutBoxes from_boxes(shape, step.from), to_boxes(shape, step.to);
  return primitive(step.kind).run({shape, dtype, step.from, step.to, step.mesh_axis, from_boxes, to_boxes, step.max_bytes()}, in);
}

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
    const Box box = box_of(plan->shape, plan->to, me);
    out = Storage::allocate_pending(box.numel() * size_of(plan->dtype), plan->to.placement.device_type());
  }
  const RankTraffic traffic = plan->traffic_of(me);
  Instruction ins{"boxing", {}, {}, nullptr, std::max(traffic.bytes_sent, traffic.bytes_received)};
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
