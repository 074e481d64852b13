// Interning of rank lists (layout/rank_list.hpp): one table per process, guarded by a mutex
// because the ranks of a simulated world make placements at once.
#include "spsd/layout/rank_list.hpp"

#include <mutex>
#include <unordered_map>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::detail {

RankList::RankList(std::vector<int64_t> ranks, uint64_t id) : ranks_(std::move(ranks)), id_(id) {
  SPSD_CHECK(!ranks_.empty(), "Placement", "ranks must not be empty");
  first_ = ranks_.front();
  contiguous_ = true;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    SPSD_CHECK(ranks_[i] >= 0, "Placement", "ranks must be non-negative, got ", join(ranks_));
    contiguous_ = contiguous_ && ranks_[i] == first_ + static_cast<int64_t>(i);
  }
  if (contiguous_) return;
  sorted_.reserve(ranks_.size());
  for (size_t i = 0; i < ranks_.size(); ++i) sorted_.emplace_back(ranks_[i], static_cast<int64_t>(i));
  std::sort(sorted_.begin(), sorted_.end());
  auto dup = std::adjacent_find(sorted_.begin(), sorted_.end(), [](auto& a, auto& b) { return a.first == b.first; });
  SPSD_CHECK(dup == sorted_.end(), "Placement", "rank ", dup == sorted_.end() ? 0 : dup->first,
             " appears more than once in ", join(ranks_));
}

std::shared_ptr<const RankList> RankList::intern(std::vector<int64_t> ranks) {
  static std::mutex mutex;
  static std::unordered_multimap<uint64_t, std::weak_ptr<const RankList>> table;
  static uint64_t next_id = 1;
  static size_t inserts = 0;
  uint64_t h = 14695981039346656037ull;  // FNV-1a over the ranks
  for (int64_t r : ranks) h = (h ^ static_cast<uint64_t>(r)) * 1099511628211ull;
  std::lock_guard lock(mutex);
  auto [begin, end] = table.equal_range(h);
  for (auto it = begin; it != end; ++it)
    if (auto list = it->second.lock(); list && list->ranks() == ranks) return list;
  auto list = std::make_shared<const RankList>(std::move(ranks), next_id++);
  // Lists no placement holds any more are dropped now and then, so the table stays the size of
  // the live ones.
  if (++inserts % 1024 == 0) std::erase_if(table, [](const auto& entry) { return entry.second.expired(); });
  table.emplace(h, list);
  return list;
}

}  // namespace spsd::detail
