#pragma once
// Running boxings with reuse (tensor/boxed_copies.hpp): the boxings of one op's inputs, or of a
// to_global, where a tensor already boxed to the target layout gives its piece instead of
// running the plan again. Decided before the op is noted for the cross-rank check, from state
// every rank of the boxing shares, and named in the note: a rank that decides otherwise makes
// the check fail on every rank (an Error naming the op), never a hang.
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "spsd/boxing/planner.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/tensor/boxed_copies.hpp"

namespace spsd::detail {

class InputBoxings {
 public:
  // Input i (this rank's piece local) is boxed by plan, and the tensor caches in block: looks
  // it up (only plans that communicate are worth it). handed_out (to_global only): set to the
  // block the result tensor takes, so that a write into it makes the entry stale.
  void find(std::string_view op, size_t i, const Plan& plan, BoxedCopies* block, const Storage* local,
            std::shared_ptr<BoxedCopies>* handed_out = nullptr);
  // What to note: op, or on a hit a variant naming the inputs reused.
  std::shared_ptr<const OpIdentity> noted(const std::shared_ptr<const OpIdentity>& op) const {
    return hits_ == 0 ? op : noted_with_hits(*op);
  }
  // Whether a boxing that still runs communicates, given without_reuse: whether one of plans
  // communicates (the answer when nothing was found).
  bool communicates(std::span<const std::shared_ptr<const Plan>> plans, bool without_reuse) const {
    return without_reuse && (hits_ == 0 || still_communicates(plans));
  }
  // Input i in plan's target layout: the piece found, or plan run (and kept when looked up).
  // ranks: the boxing's (the step scope's budget is per rank set).
  std::shared_ptr<Storage> box(size_t i, const std::shared_ptr<const Plan>& plan, std::shared_ptr<Storage> local,
                               Urgency urgency, const std::vector<int64_t>& ranks);

 private:
  struct Slot {
    size_t input;
    BoxedCopies* block;
    std::shared_ptr<Storage> hit;  // null: a miss, run and kept
    bool hit_found = false;
    std::shared_ptr<BoxedCopies>* handed_out = nullptr;
  };
  std::shared_ptr<const OpIdentity> noted_with_hits(const OpIdentity& op) const;
  bool still_communicates(std::span<const std::shared_ptr<const Plan>> plans) const;
  const Slot* slot(size_t i) const;
  std::vector<Slot> slots_;  // the inputs looked up: few, and none in most ops
  int hits_ = 0;
};

// Tests: while on, the calling rank finds nothing (a planted divergence from the other ranks).
void force_boxing_reuse_miss(bool on);

}  // namespace spsd::detail
