#pragma once
// Which rank of a partial layout holds the value and which hold the reduction's identity.
#include "spsd/layout/nd_sbp.hpp"
#include "spsd/layout/placement.hpp"

namespace spsd {

// With several partial mesh axes the logical value is the nested reduction, innermost (last)
// mesh axis first: (P(max), P(sum)) is the max over axis 0 of the sums over axis 1.
//
// When spsd creates a partial layout from whole values (factories, boxing into P), the ranks at
// coordinate 0 of every partial axis hold the value; every other rank holds the identity of the
// op of its LAST partial axis with a non-zero coordinate. Reducing the innermost axis then
// leaves the same construction on the remaining axes, so the nested reduction is the value for
// any mix of ops, and no identity is ever summed with itself (no overflow of integer lowest()).
inline bool holds_partial_value(const Placement& placement, const NdSbp& nd_sbp, int64_t rank) {
  std::vector<int64_t> coords = placement.coords(rank);
  for (size_t a = 0; a < nd_sbp.size(); ++a)
    if (nd_sbp[a].is_partial() && coords[a] != 0) return false;
  return true;
}

// The reduce op whose identity a non-holding rank is filled with (see above).
inline ReduceOp filler_op(const Placement& placement, const NdSbp& nd_sbp, int64_t rank) {
  std::vector<int64_t> coords = placement.coords(rank);
  for (size_t a = nd_sbp.size(); a-- > 0;)
    if (nd_sbp[a].is_partial() && coords[a] != 0) return nd_sbp[a].reduce_op();
  return ReduceOp::kSum;
}

}  // namespace spsd
