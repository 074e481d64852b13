#pragma once
// The bytes a tape's boxing sends per step, as the planner predicts them (comm_stats counts the
// same bytes when the tape runs): what explain() and the layout search report.
#include <cstdint>
#include <memory>
#include <vector>

#include "spsd/boxing/plan.hpp"
#include "spsd/compile/tape.hpp"

namespace spsd::detail {

struct TapeBytes {
  int64_t max_sent = 0;    // the busiest rank's bytes sent
  int64_t total_sent = 0;  // over all ranks
};

// Every boxing plan of the tape, in order (an op's input plans, then a to_global's plan).
std::vector<std::shared_ptr<const Plan>> tape_plans(const Tape& tape);
TapeBytes tape_bytes(const Tape& tape);

}  // namespace spsd::detail
