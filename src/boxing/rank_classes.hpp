#pragma once
// The ranks of one placement in classes: what the planner's per-rank formulas read of a rank is,
// per tensor axis, a few sizes of its pieces in a few layouts of that placement (its box, what
// two boxes share, how many pieces meet one). A mesh axis only moves a rank's pieces along the
// tensor axes it splits, so mesh axes that split a common tensor axis (in any of the layouts)
// are coupled and the others vary independently: the ranks are the product of the coupled
// groups' coordinates. Each group is walked on its own and its coordinates folded into their
// distinct values, and the classes are the products of those. With balanced splits a group has
// a handful of distinct values however many ranks it spans, so a formula's max and sum over all
// ranks cost the groups' sizes, not the ranks' number: on an n/8 x 8 mesh, n/8 + 8 visits
// instead of n (issue 27, docs/boxing.md).
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "layout_boxes.hpp"

namespace spsd::detail {

// What a formula reads of one rank along one tensor axis (its meaning is the caller's).
using AxisValues = std::array<int64_t, 5>;

// The classes of the ranks of the layouts' common placement: calls
// visit(values, count) once per class, values[e] the class's AxisValues along tensor axis e and
// count its ranks. axis_values(e, pos) computes them for the rank at position pos; it is asked
// only for positions whose coordinates off the tensor axis's group are 0, and must depend on
// the layouts only through how they split tensor axis e (which mesh axes, in which order):
// a group's distinct values are then remembered under `formula` (the caller's name for
// axis_values) and that split, and reused by any later call that splits the group's tensor
// axes the same way, whatever the layouts' other axes do.
// The layouts may be on different meshes of the same ranks in the same order, when their
// meshes refine to one (see Refinement); otherwise this returns false and visits nothing.
template <class AxisFn, class Visit>
bool for_each_rank_class(std::span<const LayoutBoxes* const> layouts, int64_t formula, AxisFn&& axis_values,
                         Visit&& visit);

}  // namespace spsd::detail

#include "rank_classes_impl.hpp"
