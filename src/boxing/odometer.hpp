#pragma once
// Odometer: mixed-radix coordinates counted up with slots that move along (rank_classes_impl.hpp).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spsd::detail {

// Mixed-radix coordinates counted up like an odometer (the last axis fastest, so in position
// order when the axes are refinement axes in order), carrying slots that move by fixed weights
// per coordinate step: a visit costs a few additions and no division. Slots are grouped; a
// group is stale once one of its slots moved, until cleared. Some axes may be marked, and
// marked_at_zero() says whether each of them is at coordinate 0.
class Odometer {
 public:
  Odometer(const std::vector<int64_t>& dims, const std::vector<char>& marked, size_t slots, size_t groups)
      : slots_(slots, 0), stale_(groups, 1), weights_(dims.size()) {
    for (size_t j = 0; j < dims.size(); ++j) axes_.push_back({dims[j], marked[j] != 0});
  }
  // Slot `slot` (in group `group`) moves by weight per step along axis j.
  void add_weight(size_t j, size_t slot, size_t group, int64_t weight) { weights_[j].push_back({slot, group, weight}); }
  int64_t slot(size_t k) const { return slots_[k]; }
  std::span<const int64_t> slots(size_t first, size_t n) const { return std::span<const int64_t>(slots_).subspan(first, n); }
  bool stale(size_t group) const { return stale_[group] != 0; }
  void clear_stale(size_t group) { stale_[group] = 0; }
  bool marked_at_zero() const { return off_zero_ == 0; }
  // To the next coordinates; false after the last.
  bool next() {
    for (size_t j = axes_.size(); j-- > 0;) {
      Axis& a = axes_[j];
      const bool wraps = ++a.coord == a.dim;
      const int64_t steps = wraps ? 1 - a.dim : 1;
      for (const Weight& w : weights_[j]) {
        slots_[w.slot] += steps * w.weight;
        stale_[w.group] = 1;
      }
      if (a.marked && a.dim > 1) off_zero_ += wraps ? -1 : a.coord == 1 ? 1 : 0;
      if (!wraps) return true;
      a.coord = 0;
    }
    return false;
  }

 private:
  struct Axis {
    int64_t dim;
    bool marked;
    int64_t coord = 0;
  };
  struct Weight {
    size_t slot, group;
    int64_t weight;
  };
  std::vector<int64_t> slots_;
  std::vector<char> stale_;
  std::vector<Axis> axes_;
  std::vector<std::vector<Weight>> weights_;  // per axis
  int64_t off_zero_ = 0;                      // marked axes at a coordinate other than 0
};

}  // namespace spsd::detail
