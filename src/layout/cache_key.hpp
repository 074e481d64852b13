#pragma once
// The key of the planner's and the resolver's caches: every integer an answer depends on, in
// one vector. Building it costs one allocation and looking it up one hash over words; the
// string keys it replaced cost a dozen allocations per lookup (docs/design-notes.md).
#include <cstdint>
#include <vector>

#include "spsd/core/shape.hpp"
#include "spsd/layout/nd_sbp.hpp"
#include "spsd/layout/placement.hpp"

namespace spsd::detail {

struct CacheKey {
  std::vector<int64_t> words;

  void add(int64_t word) { words.push_back(word); }
  void add(const Shape& shape) {
    add(shape.ndim());
    words.insert(words.end(), shape.dims().begin(), shape.dims().end());
  }
  void add(const Placement& placement) {
    add(static_cast<int64_t>(placement.device_type()));
    add(placement.mesh());
    add(static_cast<int64_t>(placement.rank_list().id()));  // one word for any number of ranks
  }
  void add(const NdSbp& nd_sbp) {
    add(static_cast<int64_t>(nd_sbp.size()));
    for (const Sbp& s : nd_sbp.axes())
      add(s.is_split() ? s.axis() : s.is_broadcast() ? -1 : -2 - static_cast<int64_t>(s.reduce_op()));
  }

  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& key) const {
    uint64_t h = 14695981039346656037ull;  // FNV-1a over the words
    for (int64_t w : key.words) h = (h ^ static_cast<uint64_t>(w)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

}  // namespace spsd::detail
