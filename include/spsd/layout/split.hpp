#pragma once
// Balanced splitting and boxes: which part of the global index space each rank holds.
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "spsd/core/shape.hpp"
#include "spsd/layout/layout.hpp"

namespace spsd {

// Half-open global index range, one [begin, end) pair per tensor axis.
struct Box {
  std::vector<int64_t> begin, end;

  // Its number of axes, extents (negative ones as 0), element count, and whether it has none.
  int64_t ndim() const { return static_cast<int64_t>(begin.size()); }
  Shape shape() const {
    std::vector<int64_t> dims(begin.size());
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = std::max<int64_t>(0, end[i] - begin[i]);
    return Shape(std::move(dims));
  }
  int64_t numel() const {
    int64_t n = 1;
    for (size_t i = 0; i < begin.size(); ++i) n *= std::max<int64_t>(0, end[i] - begin[i]);
    return n;
  }
  bool empty() const { return numel() == 0; }
  // "[0:2, 0:5]"
  std::string to_string() const {
    std::string s = "[";
    for (size_t i = 0; i < begin.size(); ++i)
      s += (i ? ", " : "") + std::to_string(begin[i]) + ":" + std::to_string(end[i]);
    return s + "]";
  }
  friend bool operator==(const Box&, const Box&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Box& b) { return os << b.to_string(); }
};

// The box of a whole tensor of this shape.
inline Box full_box(const Shape& shape) { return Box{std::vector<int64_t>(shape.ndim(), 0), shape.dims()}; }

// The common part of two boxes (empty extents are clamped to begin == end).
inline Box intersect(const Box& a, const Box& b) {
  SPSD_CHECK(a.ndim() == b.ndim(), "intersect", "boxes ", a, " and ", b, " have different numbers of axes");
  Box r{a.begin, a.end};
  for (size_t i = 0; i < r.begin.size(); ++i) {
    r.begin[i] = std::max(a.begin[i], b.begin[i]);
    r.end[i] = std::max(r.begin[i], std::min(a.end[i], b.end[i]));
  }
  return r;
}

// The number of elements two boxes have in common (intersect(a, b).numel() without a Box).
inline int64_t overlap(const Box& a, const Box& b) {
  SPSD_CHECK(a.ndim() == b.ndim(), "overlap", "boxes ", a, " and ", b, " have different numbers of axes");
  int64_t n = 1;
  for (size_t i = 0; i < a.begin.size(); ++i)
    n *= std::max<int64_t>(0, std::min(a.end[i], b.end[i]) - std::max(a.begin[i], b.begin[i]));
  return n;
}

// Part k of n elements split into `parts`: the first n % parts parts get one more element.
struct Range {
  int64_t begin, end;
  // end - begin.
  int64_t size() const { return end - begin; }
};
// Part k of the balanced split of n; balanced_split gives every part's size.
inline Range balanced_range(int64_t n, int64_t parts, int64_t k) {
  SPSD_CHECK(n >= 0 && parts >= 1 && k >= 0 && k < parts, "balanced_range", "cannot take part ", k, " of ", n,
             " elements split into ", parts, " parts");
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = k * base + std::min(k, extra);
  return {begin, begin + base + (k < extra ? 1 : 0)};
}
inline std::vector<int64_t> balanced_split(int64_t n, int64_t parts) {
  // Checked here too: parts <= 0 would otherwise return {} or throw std::length_error.
  SPSD_CHECK(n >= 0 && parts >= 1, "balanced_split", "cannot split ", n, " elements into ", parts, " parts");
  std::vector<int64_t> sizes(parts);
  for (int64_t k = 0; k < parts; ++k) sizes[k] = balanced_range(n, parts, k).size();
  return sizes;
}

// The part of r that part k of `parts` takes: the balanced split of r, nested in it. The one
// split computation: box_at applies it along every mesh axis that splits, piece_numel through
// piece_range.
inline Range nested_part(Range r, int64_t parts, int64_t k) {
  const Range part = balanced_range(r.size(), parts, k);
  return {r.begin + part.begin, r.begin + part.end};
}

// The box of the piece at mesh coordinates coords. Mesh axes apply in order: axis 0 splits the
// global box, axis 1 splits each piece, and so on, so two mesh axes splitting one tensor axis
// nest and every piece stays one box. Size compares only (box_at is on the dispatch path);
// balanced_range checks each coordinate.
inline Box box_at(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp, const std::vector<int64_t>& coords) {
  SPSD_CHECK(static_cast<int64_t>(nd_sbp.size()) == mesh.ndim() && static_cast<int64_t>(coords.size()) == mesh.ndim(),
             "box_at", "nd_sbp ", nd_sbp, " and coords ", detail::join(coords), " need one entry per axis of mesh ", mesh);
  Box box = full_box(shape);
  for (int64_t a = 0; a < mesh.ndim(); ++a) {
    const Sbp& s = nd_sbp.axes()[a];
    if (!s.is_split()) continue;
    const int64_t i = s.axis();
    SPSD_CHECK(i < shape.ndim(), "box_at", "nd_sbp ", nd_sbp, " splits axis ", i, " of shape ", shape);
    const Range r = nested_part({box.begin[i], box.end[i]}, mesh[a], coords[a]);
    box.begin[i] = r.begin;
    box.end[i] = r.end;
  }
  return box;
}

namespace detail {
// The part of tensor axis `axis` (extent elements) that the piece at coords covers: nested_part
// along each mesh axis that splits it, in order. Unchecked: nd and coords have one entry per
// mesh axis.
inline Range piece_range(int64_t extent, int64_t axis, const Shape& mesh, const std::vector<Sbp>& nd,
                         std::span<const int64_t> coords) {
  Range r{0, extent};
  for (int64_t a = 0; a < mesh.ndim(); ++a)
    if (nd[a].is_split() && nd[a].axis() == axis) r = nested_part(r, mesh[a], coords[a]);
  return r;
}
// Whether mesh axis a is the first to split its tensor axis (later ones nest inside its parts).
inline bool first_split(const std::vector<Sbp>& nd, int64_t a) {
  for (int64_t b = 0; b < a; ++b)
    if (nd[b].is_split() && nd[b].axis() == nd[a].axis()) return false;
  return true;
}
}  // namespace detail

// The number of elements of the piece at coords: box_at(...).numel() without building the box
// (dispatch checks every split input's piece with it). Checked as box_at.
inline int64_t piece_numel(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp,
                           std::span<const int64_t> coords) {
  SPSD_CHECK(static_cast<int64_t>(nd_sbp.size()) == mesh.ndim() && static_cast<int64_t>(coords.size()) == mesh.ndim(),
             "piece_numel", "nd_sbp ", nd_sbp, " and coords ", detail::join({coords.begin(), coords.end()}),
             " need one entry per axis of mesh ", mesh);
  const std::vector<Sbp>& nd = nd_sbp.axes();
  int64_t numel = shape.numel();
  for (int64_t a = 0; a < mesh.ndim() && numel > 0; ++a) {
    if (!nd[a].is_split()) continue;
    const int64_t i = nd[a].axis();
    SPSD_CHECK(i < shape.ndim(), "piece_numel", "nd_sbp ", nd_sbp, " splits axis ", i, " of shape ", shape);
    if (detail::first_split(nd, a)) numel = numel / shape[i] * detail::piece_range(shape[i], i, mesh, nd, coords).size();
  }
  return numel;
}

// A negative split axis counts from the end (normalize_axes).
inline Box box_of(const Shape& global, const Placement& placement, const NdSbp& given, int64_t rank) {
  std::optional<NdSbp> storage;
  const NdSbp& nd_sbp = normalize_axes(given, global.ndim(), storage);
  check_layout("box_of", global, placement.mesh(), nd_sbp);
  SPSD_CHECK(placement.contains(rank), "box_of", "rank ", rank, " is not in ", placement);
  return box_at(global, placement.mesh(), nd_sbp, placement.coords(rank));
}

// The box of every rank of the placement, in placement (row-major mesh) order.
inline std::vector<Box> boxes_of(const Shape& shape, const Placement& placement, const NdSbp& given) {
  std::optional<NdSbp> storage;
  const NdSbp& nd_sbp = normalize_axes(given, shape.ndim(), storage);
  check_layout("boxes_of", shape, placement.mesh(), nd_sbp);
  const Shape& mesh = placement.mesh();
  std::vector<Box> boxes;
  boxes.reserve(placement.size());
  std::vector<int64_t> coords(mesh.ndim(), 0);
  for (int64_t pos = 0; pos < placement.size(); ++pos) {
    boxes.push_back(box_at(shape, mesh, nd_sbp, coords));
    for (int64_t a = mesh.ndim() - 1; a >= 0 && ++coords[a] == mesh[a]; --a) coords[a] = 0;
  }
  return boxes;
}

// box_of and boxes_of for a Layout.
inline Box box_of(const Shape& global, const Layout& layout, int64_t rank) {
  return box_of(global, layout.placement, layout.nd_sbp, rank);
}
inline std::vector<Box> boxes_of(const Shape& shape, const Layout& layout) {
  return boxes_of(shape, layout.placement, layout.nd_sbp);
}

// The shape of rank's piece of a global tensor in this layout.
inline Shape local_shape(const Shape& global, const Placement& placement, const NdSbp& given, int64_t rank) {
  std::optional<NdSbp> storage;
  const NdSbp& nd_sbp = normalize_axes(given, global.ndim(), storage);
  check_layout("local_shape", global, placement.mesh(), nd_sbp);
  SPSD_CHECK(placement.contains(rank), "local_shape", "rank ", rank, " is not in ", placement);
  return box_of(global, placement, nd_sbp, rank).shape();
}

}  // namespace spsd
