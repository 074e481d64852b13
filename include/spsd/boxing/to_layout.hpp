#pragma once
// Boxing a dtype-erased global tensor: what GlobalTensor::to_global runs (through the hooks
// table, tensor/hooks.hpp), and what backward and checkpoints call directly.
#include <memory>

#include "spsd/boxing/plan.hpp"
#include "spsd/tensor/capture.hpp"
#include "spsd/tensor/global_tensor.hpp"

namespace spsd::detail {

// A to_global as a compiled step replays it (tensor/capture.hpp): the plan, run on this rank.
class CapturedBoxing final : public ReplayStep {
 public:
  explicit CapturedBoxing(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}
  std::shared_ptr<Storage> run(std::span<const std::shared_ptr<Storage>> inputs,
                               std::shared_ptr<Storage> out) const override;
  int64_t output_bytes() const override { return -1; }  // the communication makes the result
  DeviceType output_device() const override { return plan_->to.placement.device_type(); }
  std::string describe() const override;
  const std::shared_ptr<const Plan>& plan() const { return plan_; }

 private:
  std::shared_ptr<const Plan> plan_;
};

// The same logical tensor in another layout: plans the conversion (cached), notes it for the
// cross-rank check and runs the plan. Collective over the ranks of both placements; the others
// return at once.
GlobalData to_layout(const GlobalData& in, const Placement& placement, const NdSbp& nd_sbp);

}  // namespace spsd::detail
