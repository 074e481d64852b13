#pragma once
// The boxing planner: Dijkstra over layouts from the source to the target, edges priced by
// the alpha-beta model on the exact bytes each rank moves. Plans are cached.
#include <memory>
#include <string>

#include "spsd/boxing/plan.hpp"

namespace spsd {

// The plan the library runs for this conversion (cached by shape, dtype and both layouts).
std::shared_ptr<const Plan> plan_boxing(const Shape& shape, DType dtype, const Layout& from, const Layout& to);

// The plan as text: steps, collectives, bytes per rank, cost.
std::string explain_boxing(const Shape& shape, DType dtype, const Placement& from, const NdSbp& from_sbp,
                           const Placement& to, const NdSbp& to_sbp);

}  // namespace spsd
