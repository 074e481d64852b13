// tape_bytes (compile/tape_bytes.hpp).
#include "spsd/compile/tape_bytes.hpp"

#include <algorithm>

#include "spsd/boxing/to_layout.hpp"
#include "spsd/op/captured_op.hpp"

namespace spsd::detail {

std::vector<std::shared_ptr<const Plan>> tape_plans(const Tape& tape) {
  std::vector<std::shared_ptr<const Plan>> plans;
  for (const Tape::Entry& e : tape.entries()) {
    if (e.kind != Tape::Entry::Kind::kStep) continue;
    if (const auto* op = dynamic_cast<const CapturedOp*>(e.step.get())) {
      for (const auto& p : op->resolution().plans)
        if (p) plans.push_back(p);
    } else if (const auto* boxing = dynamic_cast<const CapturedBoxing*>(e.step.get())) {
      plans.push_back(boxing->plan());
    }
  }
  return plans;
}

TapeBytes tape_bytes(const Tape& tape) {
  std::vector<int64_t> sent(static_cast<size_t>(world_size()), 0);
  for (const std::shared_ptr<const Plan>& plan : tape_plans(tape))
    for (const Step& step : plan->steps)
      for (const RankTraffic& t : step.traffic()) sent[static_cast<size_t>(t.rank)] += t.bytes_sent;
  TapeBytes b;
  for (int64_t s : sent) b.max_sent = std::max(b.max_sent, s), b.total_sent += s;
  return b;
}

}  // namespace spsd::detail
