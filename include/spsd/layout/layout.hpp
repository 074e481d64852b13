#pragma once
// Layout: a placement and an NdSbp, the value boxing converts between and operators ask their
// inputs in; with the free functions over it that the planner, dispatch, checkpoints and
// autograd share (validity, without_partial, on_device). Boxes of a layout: layout/split.hpp.
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/nd_sbp.hpp"
#include "spsd/layout/placement.hpp"

namespace spsd {

struct Layout {
  Placement placement;
  NdSbp nd_sbp;
  // "(S(0), B) on placement(type="cpu", ranks=[[0, 1], [2, 3]])"
  std::string to_string() const { return nd_sbp.to_string() + " on " + placement.to_string(); }
  friend bool operator==(const Layout&, const Layout&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Layout& l) { return os << l.to_string(); }
};

// Why nd_sbp cannot lay out a tensor of this shape on this mesh, or "" when it can: it needs one
// Sbp per mesh axis, and every split axis must be an axis of the tensor.
inline std::string layout_problem(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp) {
  if (static_cast<int64_t>(nd_sbp.size()) != mesh.ndim())
    return detail::concat("nd_sbp ", nd_sbp, " has ", nd_sbp.size(), " entries but the mesh ", mesh, " has ",
                          mesh.ndim(), " axes");
  for (const Sbp& s : nd_sbp)
    if (s.is_split() && (s.axis() < 0 || s.axis() >= shape.ndim()))
      return detail::concat("nd_sbp ", nd_sbp, " splits axis ", s.axis(), " but the tensor of shape ", shape, " has ",
                            shape.ndim(), " axes");
  return {};
}
inline bool fits(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp) {
  return layout_problem(shape, mesh, nd_sbp).empty();
}
// Throws spsd::Error naming op and the problem unless nd_sbp fits shape on mesh.
inline void check_layout(std::string_view op, const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp) {
  std::string problem = layout_problem(shape, mesh, nd_sbp);
  if (!problem.empty()) [[unlikely]]
    detail::throw_error(op, problem);
}

// Every P replaced by B: the same values, reduced (what a checkpoint stores, the form the
// planner's exchange reaches before a partial target, the layout a to_global gradient returns in).
inline NdSbp without_partial(const NdSbp& nd_sbp) {
  std::vector<Sbp> axes = nd_sbp.axes();
  for (Sbp& s : axes)
    if (s.is_partial()) s = sbp::broadcast;
  return NdSbp(std::move(axes));
}
inline Layout without_partial(const Layout& l) { return {l.placement, without_partial(l.nd_sbp)}; }

// The same ranks and mesh in another memory space.
inline Placement on_device(const Placement& p, DeviceType device) {
  return Placement(std::string(to_string(device)), p.ranks(), p.mesh());
}
inline Layout on_device(const Layout& l, DeviceType device) { return {on_device(l.placement, device), l.nd_sbp}; }

}  // namespace spsd
