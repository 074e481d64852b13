#pragma once
// for_each_rank_class (rank_classes.hpp).
#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

namespace spsd::detail {

// A group's distinct values: (concatenated AxisValues, ranks).
using GroupValues = std::vector<std::pair<std::vector<int64_t>, int64_t>>;

// Remembered group values by (formula, how the layouts split the group's tensor axes); per
// thread, since simulated ranks plan on threads of their own. Bounded: emptied when a call
// starts with it full (never during one, which holds pointers into it).
inline std::map<std::vector<int64_t>, GroupValues>& remembered_groups() {
  thread_local std::map<std::vector<int64_t>, GroupValues> memo;
  return memo;
}

// The mesh that the layouts' meshes all refine to, when they are the same ranks in the same
// order shaped differently ((256, 8, 8), (2048, 8) and (16384,) refine to (256, 8, 8)): its axes
// are cut at every stride of every layout's mesh, which works when each stride divides the next.
struct Refinement {
  std::vector<int64_t> dims, strides;
  // Per layout, per mesh axis: the refinement axes it spans, [first, last).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans;
};
inline std::optional<Refinement> refine(std::span<const LayoutBoxes* const> layouts) {
  const RankList& ranks = layouts.front()->placement().rank_list();
  std::vector<int64_t> cuts = {ranks.size()};
  for (const LayoutBoxes* l : layouts) {
    if (&l->placement().rank_list() != &ranks) return std::nullopt;
    const Shape& mesh = l->placement().mesh();
    for (int64_t a = mesh.ndim() - 1, stride = 1; a >= 0; stride *= mesh[a--]) cuts.push_back(stride);
  }
  std::sort(cuts.rbegin(), cuts.rend());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  Refinement r;
  for (size_t i = 1; i < cuts.size(); ++i) {
    if (cuts[i - 1] % cuts[i] != 0) return std::nullopt;
    r.dims.push_back(cuts[i - 1] / cuts[i]);
    r.strides.push_back(cuts[i]);
  }
  // Refinement axis i lies between cuts i and i + 1, so a mesh axis of stride st and size m
  // spans the axes from the cut at st * m to the cut at st.
  auto cut_at = [&](int64_t stride) { return std::find(cuts.begin(), cuts.end(), stride) - cuts.begin(); };
  for (const LayoutBoxes* l : layouts) {
    const Shape& mesh = l->placement().mesh();
    std::vector<std::pair<int64_t, int64_t>> spans(mesh.ndim());
    for (int64_t a = mesh.ndim() - 1, stride = 1; a >= 0; stride *= mesh[a--])
      spans[a] = {cut_at(stride * mesh[a]), cut_at(stride)};
    r.spans.push_back(std::move(spans));
  }
  return r;
}

template <class AxisFn, class Visit>
bool for_each_rank_class(std::span<const LayoutBoxes* const> layouts, int64_t formula, AxisFn&& axis_values,
                         Visit&& visit) {
  const std::optional<Refinement> refined = refine(layouts);
  if (!refined) return false;
  std::map<std::vector<int64_t>, GroupValues>& remembered = remembered_groups();
  if (remembered.size() >= 4096) remembered.clear();
  const std::vector<int64_t>& mesh = refined->dims;
  const int64_t ndim = layouts.front()->shape().ndim(), axes = static_cast<int64_t>(mesh.size());
  // The refinement axes a layout's mesh axes that split tensor axis e span.
  auto split_axes = [&](size_t layout, int64_t e) {
    std::vector<int64_t> out;
    for (int64_t a : layouts[layout]->splits(e))
      for (int64_t r = refined->spans[layout][a].first; r < refined->spans[layout][a].second; ++r) out.push_back(r);
    return out;
  };
  // Mesh axes joined through the tensor axes they split, in any layout (union-find).
  std::vector<int64_t> root(axes);
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](int64_t a) {
    while (root[a] != a) a = root[a] = root[root[a]];
    return a;
  };
  std::vector<int64_t> anchor(ndim, -1);  // one mesh axis splitting tensor axis e, or -1
  for (size_t l = 0; l < layouts.size(); ++l)
    for (int64_t e = 0; e < ndim; ++e)
      for (int64_t a : split_axes(l, e)) {
        if (anchor[e] < 0) anchor[e] = a;
        root[find(a)] = find(anchor[e]);
      }
  // The groups: their mesh axes and tensor axes. Tensor axes that no layout splits form one
  // group without mesh axes; mesh axes that split nothing only multiply the counts.
  struct Group {
    std::vector<int64_t> mesh_axes, tensor_axes;
    GroupValues* distinct = nullptr;               // remembered_group's entry
    std::map<std::vector<int64_t>, size_t> index;  // into distinct, once it is long
  };
  std::vector<Group> groups(1);  // groups[0]: the unsplit tensor axes
  std::vector<int64_t> group_of_root(axes, -1);
  int64_t free_ranks = 1;
  std::vector<bool> splits_any(axes, false);
  for (int64_t e = 0; e < ndim; ++e)
    for (size_t l = 0; l < layouts.size(); ++l)
      for (int64_t a : split_axes(l, e)) splits_any[a] = true;
  for (int64_t a = 0; a < axes; ++a) {
    if (!splits_any[a]) {
      free_ranks *= mesh[a];
      continue;
    }
    int64_t& g = group_of_root[find(a)];
    if (g < 0) {
      g = static_cast<int64_t>(groups.size());
      groups.emplace_back();
    }
    groups[g].mesh_axes.push_back(a);
  }
  for (int64_t e = 0; e < ndim; ++e) groups[anchor[e] < 0 ? 0 : group_of_root[find(anchor[e])]].tensor_axes.push_back(e);
  const std::vector<int64_t>& stride = refined->strides;
  // Each group's coordinates, the others at 0, folded into distinct values. Neighbouring
  // coordinates mostly repeat the last values, and a group has few distinct ones.
  constexpr size_t kScanned = 16;  // distinct values searched in a row before a map is kept
  for (Group& g : groups) {
    // The group's split: its mesh axes' sizes, and per tensor axis its extent and, per layout,
    // the positions among the group's mesh axes of those that split it.
    std::vector<int64_t> split = {formula, static_cast<int64_t>(g.mesh_axes.size())};
    for (int64_t a : g.mesh_axes) split.push_back(mesh[a]);
    for (int64_t e : g.tensor_axes) {
      split.push_back(layouts.front()->shape()[e]);
      for (size_t l = 0; l < layouts.size(); ++l) {
        // Which of the group's axes each splitting mesh axis spans.
        split.push_back(static_cast<int64_t>(layouts[l]->splits(e).size()));
        for (int64_t a : layouts[l]->splits(e)) {
          const auto [first, last] = refined->spans[l][a];
          split.push_back(std::find(g.mesh_axes.begin(), g.mesh_axes.end(), first) - g.mesh_axes.begin());
          split.push_back(last - first);
        }
      }
    }
    auto [found, added] = remembered.try_emplace(split);
    g.distinct = &found->second;
    if (!added) continue;
    // A large group is walked with every layout's pieces numbered per rank beforehand (one
    // pass without division, layout_boxes.hpp), so each value is a few loads.
    int64_t walked = 1;
    for (int64_t a : g.mesh_axes) walked *= mesh[a];
    if (walked > 256)
      for (const LayoutBoxes* l : layouts) l->index_positions();
    GroupValues& distinct = *g.distinct;
    std::vector<int64_t> coords(g.mesh_axes.size(), 0), key(g.tensor_axes.size() * std::tuple_size_v<AxisValues>);
    size_t last = 0;
    for (int64_t pos = 0;;) {
      for (size_t i = 0; i < g.tensor_axes.size(); ++i) {
        const AxisValues v = axis_values(g.tensor_axes[i], pos);
        std::copy(v.begin(), v.end(), key.begin() + static_cast<std::ptrdiff_t>(i * v.size()));
      }
      if (!distinct.empty() && distinct[last].first == key) {
        ++distinct[last].second;
      } else {
        size_t at = distinct.size();
        if (distinct.size() <= kScanned) {
          for (size_t k = 0; k < distinct.size(); ++k)
            if (distinct[k].first == key) at = k;
        } else if (auto it = g.index.find(key); it != g.index.end()) {
          at = it->second;
        }
        if (at == distinct.size()) {
          distinct.emplace_back(key, 0);
          if (distinct.size() > kScanned) {
            if (g.index.empty())
              for (size_t k = 0; k < distinct.size(); ++k) g.index.emplace(distinct[k].first, k);
            else
              g.index.emplace(key, at);
          }
        }
        ++distinct[at].second;
        last = at;
      }
      size_t i = coords.size();
      while (i > 0 && ++coords[i - 1] == mesh[g.mesh_axes[i - 1]]) {
        pos -= (mesh[g.mesh_axes[i - 1]] - 1) * stride[g.mesh_axes[i - 1]];
        coords[--i] = 0;
      }
      if (i == 0) break;
      pos += stride[g.mesh_axes[i - 1]];
    }
  }
  // The classes: one distinct entry of every group.
  std::vector<AxisValues> values(ndim);
  auto combine = [&](auto& self, size_t group, int64_t count) -> void {
    if (group == groups.size()) {
      visit(std::span<const AxisValues>(values), count * free_ranks);
      return;
    }
    const Group& g = groups[group];
    for (const auto& [key, ranks] : *g.distinct) {
      for (size_t i = 0; i < g.tensor_axes.size(); ++i)
        std::copy_n(key.begin() + static_cast<std::ptrdiff_t>(i * values[0].size()), values[0].size(),
                    values[g.tensor_axes[i]].begin());
      self(self, group + 1, count * ranks);
    }
  };
  combine(combine, 0, 1);
  return true;
}

}  // namespace spsd::detail
