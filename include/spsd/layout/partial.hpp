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
namespace detail {
// rank's mesh coordinates, once nd_sbp is known to have one entry per mesh axis (errors name op).
inline std::vector<int64_t> coords_for(std::string_view op, const Placement& placement, const NdSbp& nd_sbp,
                                       int64_t rank) {
  SPSD_CHECK(static_cast<int64_t>(nd_sbp.size()) == placement.mesh().ndim(), op, "nd_sbp ", nd_sbp, " has ",
             nd_sbp.size(), " entries but the mesh ", placement.mesh(), " has ", placement.mesh().ndim(), " axes");
  SPSD_CHECK(placement.contains(rank), op, "rank ", rank, " is not in ", placement);
  return placement.coords(rank);
}
}  // namespace detail

// Whether rank holds the value when spsd makes this partial layout from whole values (its
// coordinate is 0 on every partial axis), not an identity (above).
inline bool holds_partial_value(const Placement& placement, const NdSbp& nd_sbp, int64_t rank) {
  std::vector<int64_t> coords = detail::coords_for("holds_partial_value", placement, nd_sbp, rank);
  for (size_t a = 0; a < nd_sbp.size(); ++a)
    if (nd_sbp[a].is_partial() && coords[a] != 0) return false;
  return true;
}

// The reduce op whose identity a non-holding rank is filled with (see above).
inline ReduceOp filler_op(const Placement& placement, const NdSbp& nd_sbp, int64_t rank) {
  std::vector<int64_t> coords = detail::coords_for("filler_op", placement, nd_sbp, rank);
  for (size_t a = nd_sbp.size(); a-- > 0;)
    if (nd_sbp[a].is_partial() && coords[a] != 0) return nd_sbp[a].reduce_op();
  return ReduceOp::kSum;
}

}  // namespace spsd
