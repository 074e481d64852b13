#pragma once
// A text picture of a layout: which rank holds which box of the global tensor.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "spsd/layout/split.hpp"

namespace spsd {

namespace detail {

// Sorted, de-duplicated cut points of all boxes along one tensor axis.
inline std::vector<int64_t> cuts_along(const std::vector<Box>& boxes, int64_t axis, int64_t extent) {
  std::set<int64_t> cuts{0, extent};
  for (const Box& b : boxes) {
    cuts.insert(b.begin[axis]);
    cuts.insert(b.end[axis]);
  }
  return {cuts.begin(), cuts.end()};
}

inline std::string pad(std::string s, size_t width) {
  s.resize(std::max(s.size(), width), ' ');
  return s;
}

// Ranks whose box contains the cell [r0, r1) x [c0, c1); "-" when none.
inline std::string holders(const std::vector<Box>& boxes, const std::vector<int64_t>& ranks, const Box& cell) {
  std::string s;
  for (size_t k = 0; k < boxes.size(); ++k)
    if (!boxes[k].empty() && intersect(boxes[k], cell) == cell) s += (s.empty() ? "r" : " r") + std::to_string(ranks[k]);
  return s.empty() ? "-" : s;
}

inline std::string axis_label(const char* name, int64_t begin, int64_t end) {
  return std::string(name) + " " + std::to_string(begin) + ":" + std::to_string(end);
}

}  // namespace detail

// A grid for 1-d and 2-d tensors (each cell lists the ranks that hold it), a box list otherwise.
inline std::string layout_diagram(const Shape& shape, const Placement& placement, const NdSbp& given) {
  const NdSbp nd_sbp = normalize_axes(given, shape.ndim());
  check_layout("layout_diagram", shape, placement.mesh(), nd_sbp);
  std::vector<Box> boxes;
  for (int64_t r : placement.ranks()) boxes.push_back(box_of(shape, placement, nd_sbp, r));

  std::string out = "shape " + shape.to_string() + " as " + nd_sbp.to_string() + " on " + placement.to_string() + "\n";
  for (size_t a = 0; a < nd_sbp.size(); ++a)
    if (nd_sbp[a].is_partial())
      out += "  mesh axis " + std::to_string(a) + " is " + nd_sbp[a].to_string() +
             ": the ranks along it hold partial values; the tensor is their " +
             std::string(to_string(nd_sbp[a].reduce_op())) + "\n";
  int partial_axes = 0;
  for (const Sbp& s : nd_sbp) partial_axes += s.is_partial();
  if (partial_axes > 1)
    out += "  with several partial axes the tensor is the nested reduction, the last mesh axis innermost\n";

  bool grid = (shape.ndim() == 1 || shape.ndim() == 2) && shape.numel() > 0;
  if (!grid) {
    for (size_t k = 0; k < boxes.size(); ++k)
      out += "  rank " + std::to_string(placement.ranks()[k]) + ": " + boxes[k].to_string() +
             (boxes[k].empty() ? " (empty)" : "") + "\n";
    return out;
  }
  // View a 1-d tensor as a single row.
  bool one_d = shape.ndim() == 1;
  auto as_2d = [&](const Box& b) {
    return one_d ? Box{{0, b.begin[0]}, {1, b.end[0]}} : b;
  };
  std::vector<Box> boxes2;
  for (const Box& b : boxes) boxes2.push_back(as_2d(b));
  int64_t rows_extent = one_d ? 1 : shape[0], cols_extent = one_d ? shape[0] : shape[1];
  std::vector<int64_t> rows = detail::cuts_along(boxes2, 0, rows_extent), cols = detail::cuts_along(boxes2, 1, cols_extent);

  std::vector<std::vector<std::string>> cells(rows.size() - 1, std::vector<std::string>(cols.size() - 1));
  size_t width = 0;
  for (size_t i = 0; i + 1 < rows.size(); ++i)
    for (size_t j = 0; j + 1 < cols.size(); ++j) {
      Box cell{{rows[i], cols[j]}, {rows[i + 1], cols[j + 1]}};
      cells[i][j] = detail::holders(boxes2, placement.ranks(), cell);
      width = std::max(width, cells[i][j].size());
    }
  for (size_t j = 0; j + 1 < cols.size(); ++j)
    width = std::max(width, detail::axis_label(one_d ? "" : "cols", cols[j], cols[j + 1]).size());
  size_t label_width = 0;
  for (size_t i = 0; i + 1 < rows.size(); ++i)
    label_width = std::max(label_width, detail::axis_label("rows", rows[i], rows[i + 1]).size());
  if (one_d) label_width = 0;

  out += "  " + std::string(label_width, ' ');
  for (size_t j = 0; j + 1 < cols.size(); ++j)
    out += "   " + detail::pad(detail::axis_label(one_d ? "" : "cols", cols[j], cols[j + 1]).substr(one_d ? 1 : 0), width);
  out += "\n";
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    out += "  " + detail::pad(one_d ? "" : detail::axis_label("rows", rows[i], rows[i + 1]), label_width);
    for (size_t j = 0; j + 1 < cols.size(); ++j) out += " | " + detail::pad(cells[i][j], width);
    out += " |\n";
  }
  // A grid cell cannot show a rank that holds nothing, so name those ranks.
  std::string empty;
  for (size_t k = 0; k < boxes.size(); ++k)
    if (boxes[k].empty()) empty += (empty.empty() ? "r" : " r") + std::to_string(placement.ranks()[k]);
  if (!empty.empty()) out += "  empty pieces: " + empty + "\n";
  return out;
}

}  // namespace spsd
