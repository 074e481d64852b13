#pragma once
// Boxing a dtype-erased global tensor: what GlobalTensor::to_global runs (through the hooks
// table, tensor/hooks.hpp), and what backward and checkpoints call directly.
#include "spsd/tensor/global_tensor.hpp"

namespace spsd::detail {

// The same logical tensor in another layout: plans the conversion (cached), notes it for the
// cross-rank check and runs the plan. Collective over the ranks of both placements; the others
// return at once.
GlobalData to_layout(const GlobalData& in, const Placement& placement, const NdSbp& nd_sbp);

}  // namespace spsd::detail
