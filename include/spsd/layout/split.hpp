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
  int64_t size() const { return end - begin; }
};
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

// The part of tensor axis `axis` (extent elements) that the piece at mesh coordinates coords
// covers. Mesh axes apply in order: axis 0 splits the whole extent, a later mesh axis splitting
// the same tensor axis splits each part again, so two mesh axes on one tensor axis nest and
// every piece stays one box. balanced_range checks each coordinate.
inline Range piece_range(int64_t extent, int64_t axis, const Shape& mesh, const NdSbp& nd_sbp,
                         std::span<const int64_t> coords) {
  Range r{0, extent};
  for (int64_t a = 0; a < mesh.ndim(); ++a) {
    if (!nd_sbp[a].is_split() || nd_sbp[a].axis() != axis) continue;
    const Range part = balanced_range(r.size(), mesh[a], coords[a]);
    r = {r.begin + part.begin, r.begin + part.end};
  }
  return r;
}

// The box of the piece at mesh coordinates coords (piece_range along every tensor axis).
// Size compares only (box_at is on the dispatch path).
inline Box box_at(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp, const std::vector<int64_t>& coords) {
  SPSD_CHECK(static_cast<int64_t>(nd_sbp.size()) == mesh.ndim() && static_cast<int64_t>(coords.size()) == mesh.ndim(),
             "box_at", "nd_sbp ", nd_sbp, " and coords ", detail::join(coords), " need one entry per axis of mesh ", mesh);
  for (const Sbp& s : nd_sbp)
    SPSD_CHECK(!s.is_split() || s.axis() < shape.ndim(), "box_at", "nd_sbp ", nd_sbp, " splits axis ", s.axis(),
               " of shape ", shape);
  Box box = full_box(shape);
  for (int64_t i = 0; i < shape.ndim(); ++i) {
    const Range r = piece_range(shape[i], i, mesh, nd_sbp, coords);
    box.begin[i] = r.begin;
    box.end[i] = r.end;
  }
  return box;
}

// The number of elements of the piece at coords: box_at(...).numel() without building the box
// (dispatch checks every input piece's size with it). Sizes are checked as in box_at.
inline int64_t piece_numel(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp,
                           std::span<const int64_t> coords) {
  int64_t numel = 1;
  for (int64_t i = 0; i < shape.ndim(); ++i) numel *= piece_range(shape[i], i, mesh, nd_sbp, coords).size();
  return numel;
}

inline Box box_of(const Shape& global, const Placement& placement, const NdSbp& nd_sbp, int64_t rank) {
  check_layout("box_of", global, placement.mesh(), nd_sbp);
  SPSD_CHECK(placement.contains(rank), "box_of", "rank ", rank, " is not in ", placement);
  return box_at(global, placement.mesh(), nd_sbp, placement.coords(rank));
}

// The box of every rank of the placement, in placement (row-major mesh) order.
inline std::vector<Box> boxes_of(const Shape& shape, const Placement& placement, const NdSbp& nd_sbp) {
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

inline Box box_of(const Shape& global, const Layout& layout, int64_t rank) {
  return box_of(global, layout.placement, layout.nd_sbp, rank);
}
inline std::vector<Box> boxes_of(const Shape& shape, const Layout& layout) {
  return boxes_of(shape, layout.placement, layout.nd_sbp);
}

inline Shape local_shape(const Shape& global, const Placement& placement, const NdSbp& nd_sbp, int64_t rank) {
  check_layout("local_shape", global, placement.mesh(), nd_sbp);
  SPSD_CHECK(placement.contains(rank), "local_shape", "rank ", rank, " is not in ", placement);
  return box_of(global, placement, nd_sbp, rank).shape();
}

}  // namespace spsd
