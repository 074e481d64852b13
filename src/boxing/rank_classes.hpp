#pragma once
// The ranks of one placement in classes: what the planner's per-rank formulas read of a rank is,
// per tensor axis, a few sizes of its pieces in a few layouts of that placement (its box, what
// two boxes share, how many pieces meet one). A mesh axis only moves a rank's pieces along the
// tensor axes it splits, so mesh axes that split a common tensor axis (in any of the layouts)
// are coupled and the others vary independently: the ranks are the product of the coupled
// groups' coordinates. Within a group, each tensor axis's values depend only on the axes that
// split it: a value map over those, made once per way of splitting it; the group then walks only
// the axes two of its tensor axes share. The classes are the products of the groups' distinct
// values. With balanced splits a group has a handful of distinct values however many ranks it
// spans, so a formula's max and sum over all ranks cost the maps' and shared axes' sizes, not
// the ranks' number: on an n/8 x 8 mesh whose layouts split different tensor axes by its two
// axes, n/8 + 8 (issue 27, docs/boxing.md).
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "layout_boxes.hpp"

namespace spsd::detail {

// What a formula reads of one rank along one tensor axis (its meaning is the caller's).
using AxisValues = std::array<int64_t, 5>;

// The classes of the ranks of the layouts' common placement: calls visit(values, ranks,
// value_holders) once per class, values[e] the class's AxisValues along tensor axis e, ranks
// its ranks and value_holders how many of them hold the value of every layout (coordinate 0
// along each partial mesh axis; all of them without partial axes). axis_values(e, pieces)
// computes them from the numbers of the rank's pieces along e, pieces[l] in layouts[l]
// (LayoutBoxes::leaf), so the values depend on the layouts only through how they split e; a
// tensor axis's value map and a group's distinct values are remembered under `formula` (the
// caller's name for axis_values) and the split they depend on, and reused by any later call that
// splits them the same way, whatever the layouts' other axes do. A map counts the pieces up along
// the coordinates, so n coordinates cost n steps of a few additions and one axis_values where
// the pieces changed, with no division and no per-rank table.
// The layouts may be on different meshes of the same ranks in the same order, when their
// meshes refine to one (see Refinement); otherwise this returns false and visits nothing.
template <class AxisFn, class Visit>
bool for_each_rank_class(std::span<const LayoutBoxes* const> layouts, int64_t formula, AxisFn&& axis_values,
                         Visit&& visit);

// Every rank of the layouts' common placement, in position order, for a formula that needs each
// one (a sum per piece, say): calls fn(odometer) with a PieceOdometer (rank_classes_impl.hpp)
// whose pieces(e)[l] is the rank's piece along tensor axis e in layouts[l] and holds_values()
// whether it holds the value of every layout. A few additions per rank, no division. Returns
// false, calling nothing, where for_each_rank_class would.
template <class Fn>
bool for_each_rank(std::span<const LayoutBoxes* const> layouts, Fn&& fn);

}  // namespace spsd::detail

#include "rank_classes_impl.hpp"
