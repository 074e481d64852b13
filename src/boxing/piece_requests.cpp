// The blocks of requests for a replicated piece (piece_requests.hpp): the target's mesh axes and
// each tensor axis's meeting pieces, found once per step and source piece.
#include "piece_requests.hpp"

#include <algorithm>

namespace spsd::detail {

PieceRequests::PieceRequests(const LayoutBoxes& from, const LayoutBoxes& to)
    : from_(from), to_(to), meetings_(to.shape().ndim()), numbers_(to.shape().ndim()) {
  same_ranks_ = &from.placement().rank_list() == &to.placement().rank_list();  // interned: same ranks, same list
  const Shape& mesh = to.placement().mesh();
  const NdSbp& nd = to.layout().nd_sbp;
  const int64_t levels = mesh.ndim(), ndim = to.shape().ndim();
  int64_t stride = to.size();
  for (int64_t a = 0; a < levels; ++a) {
    stride /= mesh[a];
    MeshAxis axis{nd[a].is_split() ? Kind::kSplit : nd[a].is_broadcast() ? Kind::kBroadcast : Kind::kPartial};
    axis.size = mesh[a];
    axis.stride = stride;
    if (nd[a].is_split()) axis.e = nd[a].axis(), axis.step = to.leaf_step(axis.e, a);
    axes_.push_back(axis);
  }
  span_.assign(levels + 1, std::vector<int64_t>(ndim, 1));
  positions_.assign(levels + 1, 1);
  broadcast_.assign(levels + 1, 1);
  for (int64_t level = levels - 1; level >= 0; --level) {
    const MeshAxis& a = axes_[level];
    span_[level] = span_[level + 1];
    if (a.kind == Kind::kSplit) span_[level][a.e] *= a.size;
    positions_[level] = positions_[level + 1] * a.size;
    broadcast_[level] = broadcast_[level + 1] * (a.kind == Kind::kBroadcast ? a.size : 1);
  }
}

const PieceRequests::Meeting& PieceRequests::meeting(int64_t e, int64_t source_leaf) {
  Meeting& m = meetings_[e][source_leaf];  // a map: a rank at run time asks for few of them
  if (m.lo >= 0) return m;
  const Range range = from_.leaf_range(e, source_leaf);
  const Range meeting = to_.meeting_leaves(e, range.begin, range.end);
  m.lo = meeting.begin;
  m.hi = meeting.end;
  m.part.resize(m.hi - m.lo);
  m.run_end.resize(m.hi - m.lo);
  for (int64_t t = m.lo; t < m.hi; ++t) m.part[t - m.lo] = overlap(to_.leaf_range(e, t), range);
  for (int64_t t = m.hi; t-- > m.lo;)
    m.run_end[t - m.lo] = t + 1 < m.hi && m.part[t + 1 - m.lo] == m.part[t - m.lo] ? m.run_end[t + 1 - m.lo] : t + 1;
  std::vector<int64_t> key = {m.lo, m.hi};
  key.insert(key.end(), m.part.begin(), m.part.end());
  m.id = numbers_[e].try_emplace(std::move(key), static_cast<int64_t>(numbers_[e].size())).first->second;
  return m;
}

PieceRequests::Blocks PieceRequests::blocks(int64_t piece) {
  key_.resize(meetings_.size());
  for (size_t e = 0; e < key_.size(); ++e) key_[e] = meeting(static_cast<int64_t>(e), from_.leaf(piece, e)).id;
  auto at = blocks_.find(key_);
  if (at == blocks_.end()) {
    at = blocks_.try_emplace(key_).first;
    at->second.first = static_cast<int64_t>(blocks_.size()) - 1;
    for_each_block(piece, -1, [&](const Block& b, bool) { at->second.second.push_back(b); });
  }
  return {at->second.first, at->second.second};
}

const std::vector<int64_t>& PieceRequests::local_copies(int64_t piece) {
  local_.clear();
  from_.for_each_holder(piece, false, [&](int64_t h) {
    const int64_t d = same_ranks_ ? h : to_.placement().position(from_.placement().ranks()[h]);
    if (d >= 0 && to_.holds_value(d) && to_.overlap(d, from_, piece) > 0) local_.push_back(d);
  });
  std::sort(local_.begin(), local_.end());
  return local_;
}

}  // namespace spsd::detail
