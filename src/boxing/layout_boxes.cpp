// The peers of a box by arithmetic on the split boundaries (layout_boxes.hpp).
#include "layout_boxes.hpp"

#include <algorithm>
#include <span>

namespace spsd::detail {

namespace {
// The part of whole's balanced split into `parts` that holds global index x (x in whole).
int64_t part_holding(Range whole, int64_t parts, int64_t x) {
  const int64_t q = whole.size() / parts, r = whole.size() % parts, at = x - whole.begin;
  return at < r * (q + 1) ? at / (q + 1) : r + (at - r * (q + 1)) / q;
}

// Non-empty leaves when n elements are split by parts[0], each part by parts[1], and so on.
int64_t nonempty_leaves(int64_t n, std::span<const int64_t> parts) {
  if (n == 0) return 0;
  if (parts.empty()) return 1;
  const int64_t p = parts[0], q = n / p, r = n % p;
  return r * nonempty_leaves(q + 1, parts.subspan(1)) + (p - r) * nonempty_leaves(q, parts.subspan(1));
}

// Leaves of whole (split by parts, nested) that meet [begin, end): only the first and last part
// at each level are partly covered; the ones between count whole.
int64_t leaves_meeting(Range whole, std::span<const int64_t> parts, int64_t begin, int64_t end) {
  begin = std::max(begin, whole.begin);
  end = std::min(end, whole.end);
  if (begin >= end) return 0;
  if (parts.empty()) return 1;
  if (begin == whole.begin && end == whole.end) return nonempty_leaves(whole.size(), parts);
  const int64_t p = parts[0], q = whole.size() / p, r = whole.size() % p;
  const int64_t first = part_holding(whole, p, begin), last = part_holding(whole, p, end - 1);
  const std::span<const int64_t> rest = parts.subspan(1);
  int64_t count = leaves_meeting(nested_part(whole, p, first), rest, begin, end);
  if (last == first) return count;
  count += leaves_meeting(nested_part(whole, p, last), rest, begin, end);
  const int64_t inner = last - first - 1, larger = std::clamp<int64_t>(r - (first + 1), 0, inner);
  return count + larger * nonempty_leaves(q + 1, rest) + (inner - larger) * nonempty_leaves(q, rest);
}
}  // namespace

void LayoutBoxes::pieces_meeting(int64_t e, int64_t begin, int64_t end, std::vector<int64_t>& offsets) const {
  const Shape& mesh = layout_->placement.mesh();
  const std::vector<int64_t>& axes = splits_[e];
  auto visit = [&](auto& self, size_t level, Range whole, int64_t offset) -> void {
    const int64_t b = std::max(begin, whole.begin), f = std::min(end, whole.end);
    if (b >= f) return;  // also every empty part
    if (level == axes.size()) {
      offsets.push_back(offset);
      return;
    }
    const int64_t a = axes[level];
    const int64_t first = part_holding(whole, mesh[a], b), last = part_holding(whole, mesh[a], f - 1);
    for (int64_t k = first; k <= last; ++k)
      self(self, level + 1, nested_part(whole, mesh[a], k), offset + k * stride_[a]);
  };
  visit(visit, 0, Range{0, (*shape_)[e]}, 0);
}

Range LayoutBoxes::meeting_leaves(int64_t e, int64_t begin, int64_t end) const {
  begin = std::max<int64_t>(begin, 0);
  end = std::min(end, (*shape_)[e]);
  if (begin >= end) return {0, 0};
  if (const int64_t u = uniform_[e]; u > 0) return {begin / u, (end - 1) / u + 1};
  // Leaves in range order: from the first ending past begin to the first starting at or past end.
  const std::vector<Range>& leaves = leaves_[e];
  const auto first = std::upper_bound(leaves.begin(), leaves.end(), begin, [](int64_t x, const Range& r) { return x < r.end; });
  const auto last = std::lower_bound(first, leaves.end(), end, [](const Range& r, int64_t x) { return r.begin < x; });
  return {first - leaves.begin(), last - leaves.begin()};
}

int64_t LayoutBoxes::count_pieces_meeting(int64_t e, int64_t begin, int64_t end) const {
  if (uniform_[e] > 0 || no_empty_leaf_[e]) return meeting_leaves(e, begin, end).size();
  if (counted_.empty()) counted_.resize(shape_->ndim());
  auto [it, added] = counted_[e].try_emplace(begin, end, 0);
  if (added || it->second.first != end) it->second = {end, leaves_meeting(Range{0, (*shape_)[e]}, parts_[e], begin, end)};
  return it->second.second;
}

void LayoutBoxes::index_positions() const {
  if (!leaf_of_.empty()) return;
  const Shape& mesh = layout_->placement.mesh();
  // Row-major positions, the coordinates counted up like an odometer.
  std::vector<int64_t> coords(mesh.ndim(), 0);
  std::vector<std::vector<int32_t>> leaf_of(shape_->ndim(), std::vector<int32_t>(size()));
  for (int64_t pos = 0; pos < size(); ++pos) {
    for (int64_t e = 0; e < shape_->ndim(); ++e) {
      int64_t leaf = 0;
      for (size_t i = 0; i < splits_[e].size(); ++i) leaf = leaf * parts_[e][i] + coords[splits_[e][i]];
      leaf_of[e][pos] = static_cast<int32_t>(leaf);
    }
    for (int64_t a = mesh.ndim() - 1; a >= 0 && ++coords[a] == mesh[a]; --a) coords[a] = 0;
  }
  leaf_of_ = std::move(leaf_of);
}

std::vector<int64_t> LayoutBoxes::pieces_meeting(const Box& box) const {
  std::vector<int64_t> found = {0}, along, next;
  for (int64_t e = 0; e < shape_->ndim() && !found.empty(); ++e) {
    along.clear();
    pieces_meeting(e, box.begin[e], box.end[e], along);
    next.clear();
    for (int64_t f : found)
      for (int64_t a : along) next.push_back(f + a);
    found.swap(next);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<int64_t> LayoutBoxes::holders(int64_t piece, bool value_only) const {
  std::vector<int64_t> out;
  for_each_holder(piece, value_only, [&](int64_t pos) { out.push_back(pos); });
  return out;
}

}  // namespace spsd::detail
