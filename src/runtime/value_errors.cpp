// The host half of the device flag for bad input values (runtime/value_errors.hpp).
#include "spsd/runtime/value_errors.hpp"

#include <algorithm>
#include <atomic>

#include "context.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/device_traffic.hpp"
#include "spsd/runtime/instruction.hpp"

namespace spsd::detail {

int64_t ValueCheckLedger::add(ValueCheck check) {
  const int64_t tag = next_tag_++;
  pending_.emplace_back(tag, std::move(check));
  return tag;
}

void ValueCheckLedger::poll(FoundValue& found, bool complete) {
  // The tag is written last, after a system fence: once it shows, position and value hold.
  const int64_t tag = std::atomic_ref<int64_t>(found.tag).load(std::memory_order_acquire);
  if (tag != 0 && tag != reported_) {
    const auto it = std::find_if(pending_.begin(), pending_.end(), [&](const auto& p) { return p.first == tag; });
    reported_ = tag;
    if (it != pending_.end()) {
      ValueCheck check = std::move(it->second);
      // Launches up to this one have finished (stream order) and found nothing before it.
      pending_.erase(pending_.begin(), it + 1);
      if (complete) {
        pending_.clear();
        found.tag = 0;
        reported_ = 0;
      }
      auto [index, message] = check.describe(found.position, found.value);
      note_data_error(check.ranks, check.op_number, index, std::move(message));
      return;
    }
  }
  if (complete) {  // every launch finished: those still listed found nothing, or only after the first
    pending_.clear();
    found.tag = 0;
    reported_ = 0;
  }
}

DeviceValueFlag device_value_flag(std::string_view op) { return device_runtime(op).value_flag(); }

int64_t register_value_check(ValueCheck check) {
  Context& ctx = context("register_value_check");
  if (ctx.value_checks.size() >= ValueCheckLedger::kMaxPending) {
    ctx.device->synchronize();
    note_device_synchronization();
    ctx.value_checks.poll(*ctx.device->value_flag().found, true);
  }
  return ctx.value_checks.add(std::move(check));
}

void poll_value_checks(bool complete) {
  Context* ctx = current_context();
  if (!ctx || !ctx->device || ctx->value_checks.empty() || on_comm_worker()) return;
  ctx->value_checks.poll(*ctx->device->value_flag().found, complete);
}

}  // namespace spsd::detail
