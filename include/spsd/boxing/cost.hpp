#pragma once
// The alpha-beta model that prices boxing steps: alpha per latency step of an algorithm,
// beta per byte on the busiest rank's wire, gamma per byte copied or reduced locally.
#include <cstdint>

#include "spsd/boxing/plan.hpp"

namespace spsd {

// The model's constants, in microseconds (per byte for beta and gamma).
struct CostModel {
  double alpha_us;           // one message / one algorithm round
  double beta_us_per_byte;   // inverse bandwidth between ranks
  double gamma_us_per_byte;  // inverse bandwidth of a local copy or reduction
  double step_us;            // fixed overhead of any step (planning, dispatch, allocation)
};

// Shared-memory MPI on one node (measured order of magnitude: ~2 us latency, ~5 GB/s per
// pair, ~10 GB/s memcpy); docs/boxing.md says how to recalibrate.
inline constexpr CostModel kMpiCostModel{2.0, 1.0 / 5000.0, 1.0 / 10000.0, 0.5};
// NCCL within a node (NVLink): ~10 us latency, ~100 GB/s.
inline constexpr CostModel kNcclCostModel{10.0, 1.0 / 100000.0, 1.0 / 1000000.0, 5.0};

// The model of the communicator on this device type: NCCL's for kCUDA, MPI's otherwise.
inline const CostModel& cost_model(DeviceType device) {
  return device == DeviceType::kCUDA ? kNcclCostModel : kMpiCostModel;
}

// Rounds of the algorithm of a step of this kind on n ranks (log n for trees and recursive
// doubling, n - 1 for all-to-all, the busiest rank's message count for an exchange): each
// primitive's record says (src/boxing/).
int64_t latency_rounds(StepKind kind, int64_t n, int64_t max_messages);

// A step's predicted time in microseconds: step_us + alpha * rounds + beta * the busiest rank's
// wire bytes + gamma * its locally copied or reduced bytes; the second form counts the rounds
// with latency_rounds.
inline double step_cost_us(const CostModel& m, int64_t rounds, int64_t max_wire_bytes, int64_t max_local_bytes) {
  return m.step_us + m.alpha_us * static_cast<double>(rounds) + m.beta_us_per_byte * static_cast<double>(max_wire_bytes) +
         m.gamma_us_per_byte * static_cast<double>(max_local_bytes);
}
inline double step_cost_us(const CostModel& m, StepKind kind, int64_t n, int64_t max_messages, int64_t max_wire_bytes,
                           int64_t max_local_bytes) {
  return step_cost_us(m, latency_rounds(kind, n, max_messages), max_wire_bytes, max_local_bytes);
}

}  // namespace spsd
