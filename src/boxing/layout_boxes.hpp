#pragma once
// Every rank's box of one layout, computed when asked: a step, a plan and the planner's search
// hold no per-rank boxes, so what they cost does not grow with the number of ranks (issue 27).
// The arithmetic is split.hpp's (nested balanced parts along the mesh axes that split a tensor
// axis); this adds what the planner needs at scale: ranges by position without allocating, and
// how many pieces of a layout meet a range (the peers of a box, counted without listing them).
#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "spsd/layout/partial.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::detail {

// Elements two ranges of one tensor axis have in common.
inline int64_t overlap(Range a, Range b) { return std::max<int64_t>(0, std::min(a.end, b.end) - std::max(a.begin, b.begin)); }

class LayoutBoxes {
 public:
  LayoutBoxes(const Shape& shape, const Layout& layout) : shape_(&shape), layout_(&layout) {
    const Shape& mesh = layout.placement.mesh();
    stride_.assign(mesh.ndim(), 1);
    for (int64_t a = mesh.ndim() - 2; a >= 0; --a) stride_[a] = stride_[a + 1] * mesh[a + 1];
    splits_.resize(shape.ndim());
    parts_.resize(shape.ndim());
    for (int64_t a = 0; a < mesh.ndim(); ++a) {
      const Sbp& s = layout.nd_sbp[a];
      if (s.is_split()) {
        splits_[s.axis()].push_back(a);
        parts_[s.axis()].push_back(mesh[a]);
      } else {
        replicas_ *= s.is_broadcast() ? mesh[a] : 1;  // partial axes: one value holder each
        has_partial_ = has_partial_ || s.is_partial();
      }
    }
    // Each tensor axis's pieces, numbered by the coordinates of the axes that split it: equal
    // ones (the extent divides evenly) by arithmetic, others listed once, so that a range is one
    // lookup (the planner asks for millions at 16,384 ranks).
    leaves_.resize(shape.ndim());
    uniform_.assign(shape.ndim(), 0);
    no_empty_leaf_.assign(shape.ndim(), false);
    leaf_count_.assign(shape.ndim(), 1);
    for (int64_t e = 0; e < shape.ndim(); ++e) {
      for (int64_t parts : parts_[e]) leaf_count_[e] *= parts;
      if (shape[e] > 0 && shape[e] % leaf_count_[e] == 0) {
        uniform_[e] = shape[e] / leaf_count_[e];
        numel_ = numel_ >= 0 ? numel_ * uniform_[e] : -1;
        continue;
      }
      numel_ = -1;
      std::vector<Range>& leaves = leaves_[e];
      leaves = {Range{0, shape[e]}};
      for (int64_t parts : parts_[e]) {
        std::vector<Range> next;
        next.reserve(leaves.size() * parts);
        for (const Range& r : leaves)
          for (int64_t k = 0; k < parts; ++k) next.push_back(nested_part(r, parts, k));
        leaves.swap(next);
      }
      no_empty_leaf_[e] = std::none_of(leaves.begin(), leaves.end(), [](const Range& r) { return r.size() == 0; });
    }
  }

  const Shape& shape() const { return *shape_; }
  const Layout& layout() const { return *layout_; }
  const Placement& placement() const { return layout_->placement; }
  int64_t size() const { return layout_->placement.size(); }
  // Coordinate of the rank at position pos along mesh axis a.
  int64_t coord(int64_t pos, int64_t a) const { return pos / stride_[a] % layout_->placement.mesh()[a]; }
  // The mesh axes that split tensor axis e, outermost first.
  const std::vector<int64_t>& splits(int64_t e) const { return splits_[e]; }
  // Ranks holding the value of each distinct box: the product of the broadcast axes.
  int64_t replicas() const { return replicas_; }

  // The piece along tensor axis e of the rank at pos: its number, and its range.
  int64_t leaf(int64_t pos, int64_t e) const {
    if (!leaf_of_.empty()) return leaf_of_[e][pos];
    int64_t leaf = 0;
    for (size_t i = 0; i < splits_[e].size(); ++i) leaf = leaf * parts_[e][i] + coord(pos, splits_[e][i]);
    return leaf;
  }
  Range range(int64_t pos, int64_t e) const { return leaf_range(e, leaf(pos, e)); }
  // How much leaf(pos, e) grows per coordinate step along mesh axis a (0 if a does not split e).
  int64_t leaf_step(int64_t e, int64_t a) const {
    int64_t step = 1;
    for (size_t i = splits_[e].size(); i-- > 0; step *= parts_[e][i])
      if (splits_[e][i] == a) return step;
    return 0;
  }
  int64_t leaf_count(int64_t e) const { return leaf_count_[e]; }
  Range leaf_range(int64_t e, int64_t leaf) const {
    const int64_t u = uniform_[e];
    return u > 0 ? Range{leaf * u, leaf * u + u} : leaves_[e][leaf];
  }
  // Numbers every rank's piece along every tensor axis once (O(ranks), no division), for a
  // caller about to visit every rank: range() is then two loads.
  void index_positions() const;
  Box box(int64_t pos) const {
    Box b = full_box(*shape_);
    for (int64_t e = 0; e < shape_->ndim(); ++e) {
      const Range r = range(pos, e);
      b.begin[e] = r.begin;
      b.end[e] = r.end;
    }
    return b;
  }
  int64_t numel(int64_t pos) const {
    if (numel_ >= 0) return numel_;
    int64_t n = 1;
    for (int64_t e = 0; e < shape_->ndim() && n > 0; ++e) n *= range(pos, e).size();
    return n;
  }
  // Elements the box at pos has in common with the box at other_pos of other.
  int64_t overlap(int64_t pos, const LayoutBoxes& other, int64_t other_pos) const {
    int64_t n = 1;
    for (int64_t e = 0; e < shape_->ndim() && n > 0; ++e) {
      const Range a = range(pos, e), b = other.range(other_pos, e);
      n *= detail::overlap(a, b);
    }
    return n;
  }
  // Whether the rank at pos holds the value of a partial layout (broadcast and split layouts: all).
  bool holds_value(int64_t pos) const {
    if (!has_partial_) return true;
    for (int64_t a = 0; a < layout_->placement.mesh().ndim(); ++a)
      if (layout_->nd_sbp[a].is_partial() && coord(pos, a) != 0) return false;
    return true;
  }
  // A piece is a distinct box: the ranks that hold it differ only along the axes that do not
  // split. It is named by its offset, the position of its holder with those axes at 0; or by its
  // numbers along the tensor axes (leaf), from which piece_at finds the offset.
  int64_t piece_offset(int64_t pos) const {
    int64_t offset = pos;
    for (int64_t a = 0; a < layout_->placement.mesh().ndim(); ++a)
      if (!layout_->nd_sbp[a].is_split()) offset -= coord(pos, a) * stride_[a];
    return offset;
  }
  int64_t piece_at(std::span<const int64_t> leaves) const {
    int64_t offset = 0;
    for (int64_t e = 0; e < shape_->ndim(); ++e)
      for (size_t i = splits_[e].size(), rest = static_cast<size_t>(leaves[e]); i-- > 0; rest /= parts_[e][i])
        offset += static_cast<int64_t>(rest % parts_[e][i]) * stride_[splits_[e][i]];
    return offset;
  }
  // Adds to `offsets` the offset of every non-empty piece along tensor axis e that meets
  // [begin, end): the parts of the split boundaries that meet it, level by level, so the cost is
  // the number found, not the number of pieces.
  void pieces_meeting(int64_t e, int64_t begin, int64_t end, std::vector<int64_t>& offsets) const;
  // How many that would add, by arithmetic: meeting_leaves where no piece along e is empty, else
  // two partly covered parts per level at most, remembered per range (the ranks asking share few
  // distinct ranges).
  int64_t count_pieces_meeting(int64_t e, int64_t begin, int64_t end) const;
  // The numbers of the pieces along e whose ranges meet [begin, end), as a range (empty pieces
  // between them included): by one division where the pieces are equal, else two binary searches.
  Range meeting_leaves(int64_t e, int64_t begin, int64_t end) const;
  // The positions of the non-empty pieces meeting box, offsets of pieces (in position order);
  // then every holder of each: with value_only, the ranks of a partial layout that hold its
  // value (coordinate 0 of its partial axes), else all.
  std::vector<int64_t> pieces_meeting(const Box& box) const;
  std::vector<int64_t> holders(int64_t piece, bool value_only) const;
  // Calls fn(position) for each of them, in position order, without allocating: the positions
  // that differ from the piece's only along the axes that do not split (nor are partial, with
  // value_only).
  template <class Fn>
  void for_each_holder(int64_t piece, bool value_only, Fn&& fn) const {
    const Shape& mesh = layout_->placement.mesh();
    auto visit = [&](auto& self, int64_t a, int64_t pos) -> void {
      if (a == mesh.ndim()) return fn(pos);
      const Sbp& s = layout_->nd_sbp[a];
      if (s.is_split() || (value_only && s.is_partial())) return self(self, a + 1, pos);
      for (int64_t k = 0; k < mesh[a]; ++k) self(self, a + 1, pos + k * stride_[a]);
    };
    visit(visit, 0, piece);
  }

 private:
  const Shape* shape_;
  const Layout* layout_;
  std::vector<int64_t> stride_;                 // positions between neighbours along each mesh axis
  std::vector<std::vector<int64_t>> splits_;    // per tensor axis
  std::vector<std::vector<int64_t>> parts_;     // the sizes of those mesh axes
  std::vector<std::vector<Range>> leaves_;      // per tensor axis, its pieces in coordinate order (unless uniform)
  std::vector<int64_t> uniform_;                // per tensor axis, the pieces' size if all equal, else 0
  std::vector<int64_t> leaf_count_;             // per tensor axis, its pieces
  std::vector<bool> no_empty_leaf_;             // per tensor axis listed in leaves_: whether none is empty
  int64_t numel_ = 1;                           // every box's elements when all axes are uniform, else -1
  mutable std::vector<std::vector<int32_t>> leaf_of_;  // per tensor axis, per position; see index_positions
  // count_pieces_meeting's answers per tensor axis: begin -> (end, count).
  mutable std::vector<std::unordered_map<int64_t, std::pair<int64_t, int64_t>>> counted_;
  int64_t replicas_ = 1;
  bool has_partial_ = false;
};

}  // namespace spsd::detail
