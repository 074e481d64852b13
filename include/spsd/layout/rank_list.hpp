#pragma once
// The ranks of a placement as one shared, immutable list: every Placement naming the same ranks
// in the same order holds the same RankList (interned), so copying a placement copies a
// pointer, comparing two compares pointers, a cache key names the list by its id, and a rank's
// position is found by arithmetic (a contiguous range) or a binary search. At 16,384 ranks each
// of these had been a copy or a scan of the whole list (issue 27, docs/boxing.md).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace spsd::detail {

class RankList {
 public:
  // The list for these ranks (checked: non-empty, non-negative, distinct; spsd::Error names
  // "Placement" otherwise), shared with every live placement of the same list.
  static std::shared_ptr<const RankList> intern(std::vector<int64_t> ranks);

  const std::vector<int64_t>& ranks() const { return ranks_; }
  int64_t size() const { return static_cast<int64_t>(ranks_.size()); }
  // Index of rank in the list, or -1.
  int64_t position(int64_t rank) const {
    if (contiguous_) return rank >= first_ && rank - first_ < size() ? rank - first_ : -1;
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), std::pair<int64_t, int64_t>{rank, -1});
    return it != sorted_.end() && it->first == rank ? it->second : -1;
  }
  // Unique among the lists of this process for its lifetime: equal ids, equal lists.
  uint64_t id() const { return id_; }
  // Whether the list is first, first + 1, ..., first + size() - 1.
  bool contiguous() const { return contiguous_; }

  explicit RankList(std::vector<int64_t> ranks, uint64_t id);  // use intern()

 private:
  std::vector<int64_t> ranks_;
  int64_t first_ = 0;
  bool contiguous_ = false;                          // ranks_ is first_, first_ + 1, ...
  std::vector<std::pair<int64_t, int64_t>> sorted_;  // (rank, position) by rank; empty when contiguous
  uint64_t id_;
};

}  // namespace spsd::detail
