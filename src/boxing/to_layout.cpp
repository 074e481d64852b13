// GlobalTensor::to_global: plans the conversion, notes it for the cross-rank check, runs the plan.
#include "spsd/boxing/to_layout.hpp"

#include "spsd/boxing/planner.hpp"
#include "spsd/boxing/reuse.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/log.hpp"

namespace spsd::detail {

GlobalData to_layout(const GlobalData& in, const Placement& placement, const NdSbp& nd_sbp) {
  check_global_layout("to_global", in.shape, placement, nd_sbp);
  check_layout_dtype("to_global", in.dtype, nd_sbp);
  check_piece("to_global", "the tensor", in);  // a raw GlobalTensor's own layout and piece
  const int64_t me = rank();
  GlobalData out{in.shape, in.dtype, placement, nd_sbp, nullptr, nullptr};
  bool in_from = in.placement.contains(me), in_to = placement.contains(me);
  if (!in_from && !in_to) return out;  // not involved: nothing to wait for
  if (in.placement == placement && in.nd_sbp == nd_sbp) {
    out.local = in.local;
    out.boxed = in.boxed;  // the same storage: a write into either makes what was boxed from it stale
    return out;
  }
  std::shared_ptr<const Plan> plan = plan_boxing(in.shape, in.dtype, in.placement, in.nd_sbp, placement, nd_sbp);
  // Every rank of both placements takes part, so they all compare what they are converting.
  const std::vector<int64_t> ranks = union_ranks(in.placement, placement);
  // A boxing of this tensor to this layout made earlier (boxing/reuse.hpp): the result is then
  // the tensor it gave, with its block.
  InputBoxings boxing;
  const bool communicates = plan->communicates();
  if (communicates && in.boxed) boxing.find("to_global", 0, *plan, in.boxed.get(), in.local.get(), &out.boxed);
  if (plan->identity) note_op(ranks, boxing.noted(plan->identity));
  if (boxing.communicates({&plan, 1}, communicates)) check_ops(ranks);
  if ((log_enabled("dispatch") || log_enabled("boxing")) && me == ranks.front())
    log_line("boxing", "to_global: " + plan->to_string());
  std::shared_ptr<Storage> local = boxing.box(0, plan, in_from ? in.local : nullptr, Urgency::kLater, ranks);
  if (in_to) out.local = local;
  if (StepRecorder* recorder = tls_step_recorder) [[unlikely]] {
    const std::shared_ptr<Storage> input = in_from ? in.local : nullptr;
    recorder->record(std::make_shared<CapturedBoxing>(plan), std::span(&input, 1), out.local);
  }
  return out;
}

std::shared_ptr<Storage> CapturedBoxing::run(std::span<const std::shared_ptr<Storage>> inputs,
                                             std::shared_ptr<Storage>) const {
  const bool in_to = plan_->to.placement.contains(rank());
  std::shared_ptr<Storage> local = run_plan(plan_, inputs[0]);
  return in_to ? local : nullptr;
}

std::string CapturedBoxing::describe() const {
  return concat("to_global ", plan_->from.nd_sbp, " -> ", plan_->to.nd_sbp);
}

}  // namespace spsd::detail
