// The blocks of tensor/boxed_copies.hpp, the setting, and the step scope's budgets.
#include "spsd/tensor/boxed_copies.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string_view>

#include "spsd/core/error.hpp"

namespace spsd {

namespace detail {

// The step scope's budget of one rank set: the entries of the blocks that count in it. Every
// member of the set inserts, uses and drops them at the same points of the program.
struct ReuseBudget {
  int64_t limit = 0;
  int64_t bytes = 0;
  uint64_t clock = 0;                 // program order of the set's uses
  std::vector<BoxedCopies*> blocks;   // blocks holding an entry that counts here
  void forget(BoxedCopies* block) {
    for (const BoxedEntry& e : block->entries)
      if (e.budget.get() == this) return;  // it still holds one
    std::erase(blocks, block);
  }
};

namespace {

BoxingReuse reuse_from_env() {
  const char* v = std::getenv("SPSD_BOXING_REUSE");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "node") return BoxingReuse::kNode;
  if (std::string_view(v) == "step") return BoxingReuse::kStep;
  if (std::string_view(v) == "off") return BoxingReuse::kOff;
  throw_error("SPSD_BOXING_REUSE", "must be \"node\", \"step\" or \"off\", got \"", v, "\"");
}

int64_t budget_from_env() {
  const char* v = std::getenv("SPSD_BOXING_REUSE_BYTES");
  if (v == nullptr || std::string_view(v).empty()) return int64_t{1} << 30;
  char* end = nullptr;
  const long long bytes = std::strtoll(v, &end, 10);
  SPSD_CHECK(end != v && *end == '\0' && bytes >= 0, "SPSD_BOXING_REUSE_BYTES",
             "must be a number of bytes >= 0, got \"", v, "\"");
  return bytes;
}

// Per rank (simulated ranks are threads), read from the environment at the first use.
struct ReuseSettings {
  BoxingReuse reuse = reuse_from_env();
  int64_t budget = budget_from_env();
  std::map<std::vector<int64_t>, std::shared_ptr<ReuseBudget>> budgets;  // by sorted rank set
};
ReuseSettings& settings() {
  thread_local ReuseSettings s;
  return s;
}

std::shared_ptr<ReuseBudget> budget_of(std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::shared_ptr<ReuseBudget>& b = settings().budgets[std::move(ranks)];
  if (!b) b = std::make_shared<ReuseBudget>();
  b->limit = settings().budget;
  return b;
}

}  // namespace

BoxedEntry* BoxedCopies::find(const Placement& placement, const NdSbp& nd_sbp) {
  for (BoxedEntry& e : entries)
    if (e.nd_sbp == nd_sbp && e.placement == placement) {
      if (e.budget) e.last_use = ++e.budget->clock;
      return &e;
    }
  return nullptr;
}

BoxedEntry& BoxedCopies::insert(BoxedEntry entry, const std::vector<int64_t>& ranks) {
  if (boxing_reuse() == BoxingReuse::kStep) {
    std::shared_ptr<ReuseBudget> budget = budget_of(ranks);  // (an entry larger than it is never offered: reuse.cpp)
    // Least recently used first, in the set's program order: the same choice on every member.
    while (budget->bytes + entry.bytes > budget->limit) {
      BoxedEntry* oldest = nullptr;
      BoxedCopies* owner = nullptr;
      for (BoxedCopies* b : budget->blocks)
        for (BoxedEntry& e : b->entries)
          if (e.budget == budget && (!oldest || e.last_use < oldest->last_use)) oldest = &e, owner = b;
      if (!oldest) break;
      owner->erase(oldest);
    }
    entry.budget = budget;
    entry.last_use = ++budget->clock;
    budget->bytes += entry.bytes;
    if (std::find(budget->blocks.begin(), budget->blocks.end(), this) == budget->blocks.end())
      budget->blocks.push_back(this);
  }
  entries.push_back(std::move(entry));
  return entries.back();
}

void BoxedCopies::erase(BoxedEntry* entry) {
  std::shared_ptr<ReuseBudget> budget = std::move(entry->budget);
  const int64_t bytes = entry->bytes;
  entries.erase(entries.begin() + (entry - entries.data()));
  if (budget) {
    budget->bytes -= bytes;
    budget->forget(this);
  }
}

void BoxedCopies::clear() {
  while (!entries.empty()) erase(&entries.back());
}

std::shared_ptr<BoxedCopies> new_tensor_copies() {
  return boxing_reuse() == BoxingReuse::kStep ? std::make_shared<BoxedCopies>() : nullptr;
}

int64_t boxing_reuse_held_bytes() {
  int64_t sum = 0;
  for (const auto& [ranks, b] : settings().budgets) sum += b->bytes;
  return sum;
}

}  // namespace detail

void set_boxing_reuse(BoxingReuse reuse) { detail::settings().reuse = reuse; }
BoxingReuse boxing_reuse() { return detail::settings().reuse; }

void set_boxing_reuse_budget(int64_t bytes) {
  SPSD_CHECK(bytes >= 0, "set_boxing_reuse_budget", "bytes must be >= 0, got ", bytes);
  detail::settings().budget = bytes;
}
int64_t boxing_reuse_budget() { return detail::settings().budget; }

}  // namespace spsd
