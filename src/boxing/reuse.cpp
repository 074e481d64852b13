// Boxings with reuse (boxing/reuse.hpp).
#include "spsd/boxing/reuse.hpp"

#include <string>

#include "spsd/core/error.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::detail {

namespace {
thread_local bool force_miss = false;  // per rank: simulated ranks are threads

// The entry's logical bytes: the largest piece of the target layout (at mesh coordinates 0:
// balanced splits give the first parts the extra elements), the same on every rank.
int64_t logical_bytes(const Plan& plan) {
  const std::vector<int64_t> first(static_cast<size_t>(plan.to.placement.mesh().ndim()), 0);
  return piece_numel(plan.shape, plan.to.placement.mesh(), plan.to.nd_sbp, first) * size_of(plan.dtype);
}
}  // namespace

void force_boxing_reuse_miss(bool on) { force_miss = on; }

void InputBoxings::find(std::string_view op, size_t i, const Plan& plan, BoxedCopies* block, const Storage* local,
                        std::shared_ptr<BoxedCopies>* handed_out) {
  if (boxing_reuse() == BoxingReuse::kOff) return;
  Slot s{i, block, nullptr, false, handed_out};
  BoxedEntry* e = block->find(plan.to.placement, plan.to.nd_sbp);
  std::shared_ptr<BoxedCopies> out;  // the to_global result that holds the piece, if it lives
  if (e) {
    // That result was written in place since (copy_): stale.
    out = e->handed_out.lock();
    if (out && out->version != e->handed_out_version) {
      block->erase(e);
      e = nullptr;
    }
  }
  if (e && !force_miss) {
    // The source piece written where nothing counts it (through to_local().data()): an Error
    // rather than stale values. Local, so a debug check only: it never changes the decision.
    SPSD_CHECK(check_mode() == CheckMode::kOff || !local || local->version() == e->piece_version, op,
               "a tensor boxed earlier in this step was written in place since without copy_ (its piece is at "
               "version ", local ? local->version() : 0, ", boxed at version ", e->piece_version,
               "): write tensors with copy_, or set SPSD_BOXING_REUSE=off");
    s.hit = e->piece;
    s.hit_found = true;
    if (handed_out) {  // the result is the tensor an earlier to_global gave: the same block
      std::shared_ptr<BoxedCopies> b = out;
      if (!b) {
        b = new_tensor_copies();
        e->handed_out = b;
        e->handed_out_version = b ? b->version : 0;
      }
      *handed_out = std::move(b);
    }
    ++hits_;
  } else if (e) {
    block->erase(e);  // the planted miss replaces the entry
  }
  slots_.push_back(std::move(s));
}

const InputBoxings::Slot* InputBoxings::slot(size_t i) const {
  for (const Slot& s : slots_)
    if (s.input == i) return &s;
  return nullptr;
}

std::shared_ptr<const OpIdentity> InputBoxings::noted_with_hits(const OpIdentity& op) const {
  std::string inputs;
  for (const Slot& s : slots_)
    if (s.hit_found) inputs += (inputs.empty() ? "" : ", ") + std::to_string(s.input);
  std::string description = concat(op.description, " [reusing the boxed input ", inputs, "]");
  if (op.parts.empty()) return std::make_shared<const OpIdentity>(std::move(description));
  return std::make_shared<const OpIdentity>(std::move(description), op.parts);
}

bool InputBoxings::still_communicates(std::span<const std::shared_ptr<const Plan>> plans) const {
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i] && plans[i]->communicates()) {
      const Slot* s = slot(i);
      if (!s || !s->hit_found) return true;
    }
  return false;
}

std::shared_ptr<Storage> InputBoxings::box(size_t i, const std::shared_ptr<const Plan>& plan,
                                           std::shared_ptr<Storage> local, Urgency urgency,
                                           const std::vector<int64_t>& ranks) {
  const Slot* s = slot(i);
  if (s && s->hit_found) return s->hit;
  const uint64_t piece_version = local ? local->version() : 0;
  std::shared_ptr<Storage> out = run_plan(plan, std::move(local), urgency);
  if (!s || s->block->find(plan->to.placement, plan->to.nd_sbp)) return out;  // an earlier input of the op kept it
  BoxedEntry e{plan->to.placement, plan->to.nd_sbp, out, piece_version};
  e.bytes = logical_bytes(*plan);
  // Larger than the step scope's whole budget: not kept (the same answer on every rank).
  if (boxing_reuse() == BoxingReuse::kStep && e.bytes > boxing_reuse_budget()) return out;
  if (s->handed_out) {
    *s->handed_out = new_tensor_copies();
    e.handed_out = *s->handed_out;
    e.handed_out_version = *s->handed_out ? (*s->handed_out)->version : 0;
  }
  s->block->insert(std::move(e), ranks);
  return out;
}

}  // namespace spsd::detail
