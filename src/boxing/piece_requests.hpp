#pragma once
// The requests for one piece of a replicated source (a box that several ranks hold), in the order
// the exchange deals them (exchange.cpp, serve_piece): every rank of the target that holds its
// value and needs part of the piece, by position, less those that hold the piece themselves (its
// local copies). They come as blocks of consecutive destinations that need one size, found by
// arithmetic on the split boundaries instead of one rank at a time: positions count up like the
// mesh coordinates, so fixing the outer coordinates leaves each tensor axis a contiguous range of
// the target's pieces; where every axis needs the same part of each piece in its range, all those
// ranks are one block, and consecutive coordinates whose ranges stay in one run of equal parts
// join it. An uneven split has few distinct parts, so the blocks follow them, not the ranks; and
// pieces that meet the target's pieces in the same parts have the same blocks, made once.
#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "layout_boxes.hpp"

namespace spsd::detail {

class PieceRequests {
 public:
  PieceRequests(const LayoutBoxes& from, const LayoutBoxes& to);

  // count destinations needing size elements each, at target positions in [begin, end) (local
  // copies included: see local_copies).
  struct Block {
    int64_t size, count, begin, end;
  };
  // The blocks of the piece at offset `piece` of the source, in destination order, with a number
  // that is the same for every piece with the same blocks.
  struct Blocks {
    int64_t id;
    const std::vector<Block>& blocks;
  };
  Blocks blocks(int64_t piece);
  // Calls fn(block, isolated) for each block of the piece; target position `isolate` (a
  // destination, or -1) comes as a block of its own, with isolated true, so that a caller can tell
  // which holder is dealt its request.
  template <class Fn>
  void for_each_block(int64_t piece, int64_t isolate, Fn&& fn);
  // The target positions among the piece's holders that need part of it (they copy it locally
  // and make no request), in position order.
  const std::vector<int64_t>& local_copies(int64_t piece);

 private:
  // Along one tensor axis, for one source piece: the target's pieces [lo, hi) that meet its
  // range, the elements each takes of it (part), and where each run of equal parts ends; id
  // numbers the distinct ones.
  struct Meeting {
    int64_t lo = -1, hi = 0, id = -1;
    std::vector<int64_t> part, run_end;
    int64_t part_at(int64_t leaf) const { return part[leaf - lo]; }
    // Whether [begin, end) is in one run of equal parts.
    bool same(int64_t begin, int64_t end) const { return run_end[begin - lo] >= end; }
  };
  const Meeting& meeting(int64_t e, int64_t source_leaf);

  enum class Kind { kSplit, kBroadcast, kPartial };
  struct MeshAxis {
    Kind kind;
    int64_t e = -1, step = 0;  // a split axis: its tensor axis, and leaf growth per coordinate
    int64_t size, stride;      // coordinates, and positions between neighbours
  };
  const LayoutBoxes &from_, &to_;
  std::vector<MeshAxis> axes_;                                    // of the target's mesh
  std::vector<std::vector<int64_t>> span_;                        // [level][e]: leaves of e over mesh axes >= level
  std::vector<int64_t> positions_;                                // [level]: positions over mesh axes >= level
  std::vector<int64_t> broadcast_;                                // [level]: product of broadcast axes >= level
  std::vector<std::unordered_map<int64_t, Meeting>> meetings_;    // [e][source leaf], made when first asked
  std::vector<std::map<std::vector<int64_t>, int64_t>> numbers_;  // [e]: lo, hi, parts -> Meeting::id
  std::map<std::vector<int64_t>, std::pair<int64_t, std::vector<Block>>> blocks_;  // Meeting ids -> number, blocks
  std::vector<int64_t> local_, key_;  // what local_copies returns; blocks' lookup key
  bool same_ranks_;  // both layouts on the same ranks in the same order: positions are the same
};

template <class Fn>
void PieceRequests::for_each_block(int64_t piece, int64_t isolate, Fn&& fn) {
  const int64_t ndim = static_cast<int64_t>(meetings_.size()), levels = static_cast<int64_t>(axes_.size());
  std::vector<const Meeting*> m(ndim);
  for (int64_t e = 0; e < ndim; ++e) m[e] = &meeting(e, from_.leaf(piece, e));
  std::vector<int64_t> base(ndim, 0);  // per tensor axis, the first leaf the fixed coordinates allow
  std::vector<Range> in(ndim);         // per tensor axis, the leaves in the current block
  auto emit = [&](int64_t size, int64_t count, int64_t begin, int64_t end, bool isolated) {
    if (size > 0) fn(Block{size, count, begin, end}, isolated);  // size 0: empty target pieces
  };
  auto visit = [&](auto& self, int64_t level, int64_t pos) -> void {
    const int64_t end = pos + positions_[level];
    bool uniform = true;
    int64_t size = 1, count = broadcast_[level];
    for (int64_t e = 0; e < ndim; ++e) {
      in[e] = Range{std::max(base[e], m[e]->lo), std::min(base[e] + span_[level][e], m[e]->hi)};
      if (in[e].size() <= 0) return;  // no target piece here meets it
      uniform = uniform && m[e]->same(in[e].begin, in[e].end);
      size *= m[e]->part_at(in[e].begin);
      count *= in[e].size();
    }
    const bool isolating = isolate >= pos && isolate < end;
    if (uniform && (!isolating || level == levels)) return emit(size, count, pos, end, isolating);
    const MeshAxis& a = axes_[level];
    if (a.kind == Kind::kPartial) return self(self, level + 1, pos);  // its value holders: coordinate 0
    if (a.kind == Kind::kBroadcast) {
      for (int64_t c = 0; c < a.size; ++c) self(self, level + 1, pos + c * a.stride);
      return;
    }
    // A split axis: its coordinates take consecutive slices of e's leaves; where the other axes
    // are uniform, coordinates whose slices stay in one run of equal parts make one block.
    const int64_t e = a.e, w = a.step, lo = m[e]->lo, hi = m[e]->hi, b = base[e];
    bool others_uniform = true;
    int64_t others_size = 1, others_count = broadcast_[level + 1];
    for (int64_t f = 0; f < ndim; ++f)
      if (f != e) {
        others_uniform = others_uniform && m[f]->same(in[f].begin, in[f].end);
        others_size *= m[f]->part_at(in[f].begin);
        others_count *= in[f].size();
      }
    const int64_t c_iso = isolating ? (isolate - pos) / a.stride : -1;
    const int64_t c_first = std::max<int64_t>(0, (lo - b) / w), c_last = std::min(a.size - 1, (hi - 1 - b) / w);
    for (int64_t c = c_first; c <= c_last;) {
      const int64_t first = std::max(b + c * w, lo), slice_end = std::min(b + (c + 1) * w, hi);
      if (others_uniform && c != c_iso && m[e]->same(first, slice_end)) {
        const int64_t run_end = std::min(m[e]->run_end[first - lo], hi);
        int64_t until = run_end == hi ? c_last : std::min(c_last, (run_end - b) / w - 1);
        if (c_iso > c) until = std::min(until, c_iso - 1);
        const int64_t leaves = std::min(b + (until + 1) * w, hi) - first;
        emit(others_size * m[e]->part_at(first), others_count * leaves, pos + c * a.stride,
             pos + (until + 1) * a.stride, false);
        c = until + 1;
        continue;
      }
      base[e] = b + c * w;
      self(self, level + 1, pos + c * a.stride);
      base[e] = b;
      ++c;
    }
  };
  visit(visit, 0, 0);
}

}  // namespace spsd::detail
