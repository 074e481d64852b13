#pragma once
// The boxing planner: Dijkstra over layouts from the source to the target, edges priced by
// the alpha-beta model on the exact bytes each rank moves. Plans are cached.
#include <cstddef>
#include <memory>
#include <string>

#include "spsd/boxing/plan.hpp"
#include "spsd/runtime/scheduler.hpp"
#include "spsd/tensor/storage.hpp"

namespace spsd {

// Plans cached at most; when the cache is full it starts over.
inline constexpr size_t kMaxCachedPlans = 4096;

// The plan the library runs for this conversion (cached by shape, dtype and both layouts).
std::shared_ptr<const Plan> plan_boxing(const Shape& shape, DType dtype, const Layout& from, const Layout& to);
// The same, for callers holding the layouts' parts (a cache hit then copies none of them).
std::shared_ptr<const Plan> plan_boxing(const Shape& shape, DType dtype, const Placement& from, const NdSbp& from_sbp,
                                        const Placement& to, const NdSbp& to_sbp);

// The plan as text: steps, collectives, bytes per rank, cost.
std::string explain_boxing(const Shape& shape, DType dtype, const Placement& from, const NdSbp& from_sbp,
                           const Placement& to, const NdSbp& to_sbp);

namespace detail {
// Runs plan on this rank: local is its piece in plan.from (null when the rank is not in
// plan.from's placement); returns its piece in plan.to (null when not in plan.to's placement).
// A plan that communicates is one instruction on the communication stream (reads local,
// writes the result; runtime/scheduler.hpp), so the result may still be pending: reading it
// waits. urgency says whether the caller reads it at once.
std::shared_ptr<Storage> run_plan(std::shared_ptr<const Plan> plan, std::shared_ptr<Storage> local,
                                  Urgency urgency = Urgency::kLater);
}  // namespace detail

}  // namespace spsd
