#pragma once
// Layout: a placement and an NdSbp, the value boxing converts between and operators ask their
// inputs in, with the free functions over it (validity, without_partial, on_device) that every
// layer above uses instead of its own copy. Boxes of a layout: layout/split.hpp.
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/nd_sbp.hpp"
#include "spsd/layout/placement.hpp"

namespace spsd {

// Where a tensor lives and how it is laid out there: a placement and an NdSbp.
struct Layout {
  Placement placement;
  NdSbp nd_sbp;
  // "(S(0), B) on placement(type="cpu", ranks=[[0, 1], [2, 3]])"
  std::string to_string() const { return nd_sbp.to_string() + " on " + placement.to_string(); }
  friend bool operator==(const Layout&, const Layout&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Layout& l) { return os << l.to_string(); }
};

namespace detail {
// The one validity rule: nd_sbp needs one Sbp per mesh axis, and every split axis must be an axis
// of the tensor. Returns kFits, kWrongAxisCount, or the index of the first Sbp splitting an axis
// the tensor does not have (no allocation: the resolver asks it of every candidate).
inline constexpr int64_t kFits = -1, kWrongAxisCount = -2;
inline int64_t misfit(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp) {
  if (static_cast<int64_t>(nd_sbp.size()) != mesh.ndim()) return kWrongAxisCount;
  for (size_t a = 0; a < nd_sbp.size(); ++a) {
    const Sbp& s = nd_sbp.axes()[a];
    if (s.is_split() && (s.axis() < 0 || s.axis() >= shape.ndim())) return static_cast<int64_t>(a);
  }
  return kFits;
}
}  // namespace detail

// The layout helpers below (misfit, fits, check_layout) and box_at, piece_numel take normalized
// layouts: a negative axis is a misfit there. Functions that take a layout and a shape from the
// user normalize first (box_of, boxes_of, local_shape, layout_diagram, and tensor/).
inline bool has_negative_axis(const NdSbp& nd_sbp) {
  for (const Sbp& s : nd_sbp)
    if (s.is_split() && s.axis() < 0) return true;
  return false;
}
// nd_sbp with each split axis in [-ndim, 0) replaced by axis + ndim (S(-1) of a 2-d tensor is
// S(1)); other axes stay as given, so an axis out of range is still reported as the user wrote it.
// By value: a caller that moves its NdSbp in gets it back without a copy when nothing changes.
inline NdSbp normalize_axes(NdSbp nd_sbp, int64_t ndim) {
  if (!has_negative_axis(nd_sbp)) return nd_sbp;
  std::vector<Sbp> axes = nd_sbp.axes();
  for (Sbp& s : axes)
    if (s.is_split() && s.axis() < 0 && s.axis() >= -ndim) s = sbp::split(s.axis() + ndim);
  return NdSbp(std::move(axes));
}
// The same without a copy in the common case: nd_sbp itself, or its normalized copy held in
// storage (for the box functions, which op dispatch calls on every output).
inline const NdSbp& normalize_axes(const NdSbp& nd_sbp, int64_t ndim, std::optional<NdSbp>& storage) {
  return has_negative_axis(nd_sbp) ? storage.emplace(normalize_axes(nd_sbp, ndim)) : nd_sbp;
}

// Whether nd_sbp is a valid layout of a tensor of this shape on this mesh.
inline bool fits(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp) {
  return detail::misfit(shape, mesh, nd_sbp) == detail::kFits;
}
// Why nd_sbp cannot lay out a tensor of this shape on this mesh, or "" when it can.
inline std::string layout_problem(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp) {
  const int64_t bad = detail::misfit(shape, mesh, nd_sbp);
  if (bad == detail::kFits) return {};
  if (bad == detail::kWrongAxisCount)
    return detail::concat("nd_sbp ", nd_sbp, " has ", nd_sbp.size(), " entries but the mesh ", mesh, " has ",
                          mesh.ndim(), " axes");
  return detail::concat("nd_sbp ", nd_sbp, " splits axis ", nd_sbp.axes()[bad].axis(), " but the tensor of shape ",
                        shape, " has ", shape.ndim(), " axes");
}
// Throws spsd::Error naming op and the problem unless nd_sbp fits shape on mesh.
inline void check_layout(std::string_view op, const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp) {
  if (!fits(shape, mesh, nd_sbp)) [[unlikely]]
    detail::throw_error(op, layout_problem(shape, mesh, nd_sbp));
}

// Every P replaced by B: the same values, reduced.
inline NdSbp without_partial(const NdSbp& nd_sbp) {
  std::vector<Sbp> axes = nd_sbp.axes();
  for (Sbp& s : axes)
    if (s.is_partial()) s = sbp::broadcast;
  return NdSbp(std::move(axes));
}
inline Layout without_partial(const Layout& l) { return {l.placement, without_partial(l.nd_sbp)}; }

// The same ranks and mesh in another memory space.
inline Placement on_device(const Placement& p, DeviceType device) { return p.with_device_type(device); }
inline Layout on_device(const Layout& l, DeviceType device) { return {on_device(l.placement, device), l.nd_sbp}; }

}  // namespace spsd
