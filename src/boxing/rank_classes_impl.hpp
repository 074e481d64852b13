#pragma once
// for_each_rank_class (rank_classes.hpp).
#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "numbered.hpp"
#include "odometer.hpp"

namespace spsd::detail {

// A group's distinct values: (concatenated AxisValues, then the value-holder flag if the group
// has partial axes; ranks).
using GroupValues = std::vector<std::pair<std::vector<int64_t>, int64_t>>;

// Histograms of a value map's values over consecutive runs of coordinates (those of its last
// axes, given the first ones): per run, its histogram's number; the histograms as (value number,
// coordinates) sorted by value number, each kept once.
struct AxisRuns {
  std::vector<int32_t> at;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> histograms;
};

// One tensor axis's value at every coordinate of the group axes that split it (position order):
// the distinct values, how many coordinates have each, each coordinate's number among them, and
// histograms of runs, made when asked (runs_of).
struct AxisValueMap {
  std::vector<AxisValues> values;
  std::vector<int64_t> ranks;
  std::vector<int32_t> at;
  std::map<int64_t, AxisRuns> runs;  // by run length
};

// Remembered value maps and group values, by what they depend on (for_each_rank_class); per
// thread, since simulated ranks plan on threads of their own. Bounded: emptied when a call starts
// with them full (only there: a call holds pointers into them); a map may be as long as the
// world, so its entries are counted too (at most 4M, 16 MB).
struct RememberedClasses {
  std::map<std::vector<int64_t>, GroupValues> groups;
  std::map<std::vector<int64_t>, AxisValueMap> values;
  size_t numbers = 0;  // entries of the maps' `at` vectors and their runs'
};
inline RememberedClasses& remembered_classes() {
  thread_local RememberedClasses memo;
  if (memo.groups.size() + memo.values.size() >= 4096 || memo.numbers >= (size_t{1} << 22)) memo = {};
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

// The refinement axes whose coordinates number layout l's pieces along tensor axis e, most
// significant first (the mesh axes that split e, outermost first, each spanning its own).
inline std::vector<int64_t> refined_split_axes(const Refinement& r, const LayoutBoxes& layout, size_t l, int64_t e) {
  std::vector<int64_t> out;
  for (int64_t a : layout.splits(e))
    for (int64_t x = r.spans[l][a].first; x < r.spans[l][a].second; ++x) out.push_back(x);
  return out;
}

// Refinement axes inside a partial mesh axis of some layout: a value holder is at 0 on each.
inline std::vector<char> refined_partial_axes(const Refinement& r, std::span<const LayoutBoxes* const> layouts) {
  std::vector<char> marked(r.dims.size(), 0);
  for (size_t l = 0; l < layouts.size(); ++l)
    for (int64_t a = 0; a < layouts[l]->placement().mesh().ndim(); ++a)
      if (layouts[l]->layout().nd_sbp[a].is_partial())
        for (int64_t x = r.spans[l][a].first; x < r.spans[l][a].second; ++x) marked[x] = 1;
  return marked;
}

// An Odometer over some refinement axes (walked, in order; the others at 0) whose slots are the
// layouts' pieces: pieces(e)[l] is the number of layout l's piece along tensor axis e
// (LayoutBoxes::leaf), stale(e) whether e's pieces moved.
class PieceOdometer : public Odometer {
 public:
  PieceOdometer(const Refinement& r, std::span<const LayoutBoxes* const> layouts, const std::vector<int64_t>& walked,
                const std::vector<char>& marked)
      : Odometer(dims_of(r, walked), marked_of(marked, walked), layouts.front()->shape().ndim() * layouts.size(),
                 layouts.front()->shape().ndim()),
        count_(layouts.size()) {
    for (int64_t e = 0; e < layouts.front()->shape().ndim(); ++e)
      for (size_t l = 0; l < count_; ++l) {
        const std::vector<int64_t> digits = refined_split_axes(r, *layouts[l], l, e);
        int64_t weight = 1;
        for (size_t k = digits.size(); k-- > 0; weight *= r.dims[digits[k]]) {
          const size_t j = std::find(walked.begin(), walked.end(), digits[k]) - walked.begin();
          if (j < walked.size()) add_weight(j, e * count_ + l, static_cast<size_t>(e), weight);
        }
      }
  }
  std::span<const int64_t> pieces(int64_t e) const { return slots(e * count_, count_); }
  // Whether the rank holds the value of every layout: at 0 along each partial axis (marked).
  bool holds_values() const { return marked_at_zero(); }

 private:
  static std::vector<int64_t> dims_of(const Refinement& r, const std::vector<int64_t>& walked) {
    std::vector<int64_t> dims;
    for (int64_t x : walked) dims.push_back(r.dims[x]);
    return dims;
  }
  static std::vector<char> marked_of(const std::vector<char>& marked, const std::vector<int64_t>& walked) {
    std::vector<char> out;
    for (int64_t x : walked) out.push_back(marked[x]);
    return out;
  }
  size_t count_;
};

template <class Fn>
bool for_each_rank(std::span<const LayoutBoxes* const> layouts, Fn&& fn) {
  const std::optional<Refinement> refined = refine(layouts);
  if (!refined) return false;
  std::vector<int64_t> all(refined->dims.size());
  std::iota(all.begin(), all.end(), 0);
  PieceOdometer odometer(*refined, layouts, all, refined_partial_axes(*refined, layouts));
  do fn(std::as_const(odometer));
  while (odometer.next());
  return true;
}

// How the layouts split tensor axis e, among the refinement axes `axes`: its extent, then per
// layout the mesh axes that split it, each as (index of its first refinement axis in `axes`,
// how many it spans).
inline void describe_split(std::vector<int64_t>& key, const Refinement& r, std::span<const LayoutBoxes* const> layouts,
                           int64_t e, const std::vector<int64_t>& axes) {
  key.push_back(layouts.front()->shape()[e]);
  for (size_t l = 0; l < layouts.size(); ++l) {
    key.push_back(static_cast<int64_t>(layouts[l]->splits(e).size()));
    for (int64_t a : layouts[l]->splits(e)) {
      const auto [first, last] = r.spans[l][a];
      key.push_back(std::find(axes.begin(), axes.end(), first) - axes.begin());
      key.push_back(last - first);
    }
  }
}

// The AxisValueMap of tensor axis e over the refinement axes `axes` (those splitting e, in
// order); remembered under `key`: the formula, the axes' sizes and e's split among them, which
// is all the values depend on. The only place a formula is evaluated: once per piece change.
template <class AxisFn>
AxisValueMap& axis_value_map(RememberedClasses& remembered, const std::vector<int64_t>& key, const Refinement& r,
                                   std::span<const LayoutBoxes* const> layouts, AxisFn& axis_values, int64_t e,
                                   const std::vector<int64_t>& axes) {
  auto [found, added] = remembered.values.try_emplace(key);
  AxisValueMap& out = found->second;
  if (!added) return out;
  Numbered<AxisValues> numbers;
  PieceOdometer odometer(r, layouts, axes, std::vector<char>(r.dims.size(), 0));
  int64_t value = -1;
  do {
    if (odometer.stale(e)) {
      odometer.clear_stale(e);
      value = numbers.number(axis_values(e, odometer.pieces(e)), value);
    }
    out.at.push_back(static_cast<int32_t>(value));
  } while (odometer.next());
  for (size_t k = 0; k < numbers.size(); ++k) out.values.push_back(numbers.item(k));
  out.ranks.assign(out.values.size(), 0);
  for (int32_t v : out.at) ++out.ranks[v];
  remembered.numbers += out.at.size();
  return out;
}

// The map's AxisRuns for runs of `run` coordinates (run > 1), made once.
inline const AxisRuns& runs_of(RememberedClasses& remembered, AxisValueMap& map, int64_t run) {
  auto [found, added] = map.runs.try_emplace(run);
  AxisRuns& out = found->second;
  if (!added) return out;
  Numbered<std::vector<std::pair<int64_t, int64_t>>> kept;
  std::vector<int64_t> counts(map.values.size(), 0), seen;
  std::vector<std::pair<int64_t, int64_t>> histogram;
  int64_t last = -1;
  for (size_t begin = 0; begin < map.at.size(); begin += static_cast<size_t>(run)) {
    for (size_t k = begin; k < begin + static_cast<size_t>(run); ++k)
      if (counts[map.at[k]]++ == 0) seen.push_back(map.at[k]);
    std::sort(seen.begin(), seen.end());
    histogram.clear();
    for (int64_t value : seen) histogram.emplace_back(value, counts[value]), counts[value] = 0;
    seen.clear();
    last = kept.number(histogram, last);
    out.at.push_back(static_cast<int32_t>(last));
  }
  for (size_t k = 0; k < kept.size(); ++k) out.histograms.push_back(kept.item(k));
  remembered.numbers += out.at.size();
  return out;
}

template <class AxisFn, class Visit>
bool for_each_rank_class(std::span<const LayoutBoxes* const> layouts, int64_t formula, AxisFn&& axis_values,
                         Visit&& visit) {
  const std::optional<Refinement> refined = refine(layouts);
  if (!refined) return false;
  RememberedClasses& remembered = remembered_classes();
  const std::vector<int64_t>& mesh = refined->dims;
  const int64_t ndim = layouts.front()->shape().ndim(), axes = static_cast<int64_t>(mesh.size());
  auto split_axes = [&](size_t l, int64_t e) { return refined_split_axes(*refined, *layouts[l], l, e); };
  const std::vector<char> marked = refined_partial_axes(*refined, layouts);
  // Mesh axes joined through the tensor axes they split, in any layout (union-find).
  std::vector<int64_t> root(axes);
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](int64_t a) {
    while (root[a] != a) a = root[a] = root[root[a]];
    return a;
  };
  std::vector<int64_t> anchor(ndim, -1);  // one mesh axis splitting tensor axis e, or -1
  std::vector<std::vector<char>> splits(ndim, std::vector<char>(axes, 0));  // splits[e][a]: a splits e somewhere
  std::vector<char> splits_any(axes, 0);
  for (size_t l = 0; l < layouts.size(); ++l)
    for (int64_t e = 0; e < ndim; ++e)
      for (int64_t a : split_axes(l, e)) {
        if (anchor[e] < 0) anchor[e] = a;
        root[find(a)] = find(anchor[e]);
        splits[e][a] = splits_any[a] = 1;
      }
  // The groups: their mesh axes and tensor axes. Tensor axes that no layout splits form one
  // group without mesh axes; mesh axes that split nothing only multiply the counts.
  struct Group {
    std::vector<int64_t> mesh_axes, tensor_axes;
    bool has_marked = false;          // its values end with the value-holder flag
    GroupValues* distinct = nullptr;  // remembered_classes().groups's entry
  };
  std::vector<Group> groups(1);  // groups[0]: the unsplit tensor axes
  std::vector<int64_t> group_of_root(axes, -1);
  int64_t free_ranks = 1, free_holders = 1;
  for (int64_t a = 0; a < axes; ++a) {
    if (!splits_any[a]) {
      free_ranks *= mesh[a];
      if (!marked[a]) free_holders *= mesh[a];
      continue;
    }
    int64_t& g = group_of_root[find(a)];
    if (g < 0) {
      g = static_cast<int64_t>(groups.size());
      groups.emplace_back();
    }
    groups[g].mesh_axes.push_back(a);
    groups[g].has_marked = groups[g].has_marked || marked[a];
  }
  for (int64_t e = 0; e < ndim; ++e) groups[anchor[e] < 0 ? 0 : group_of_root[find(anchor[e])]].tensor_axes.push_back(e);
  constexpr size_t kWidth = std::tuple_size_v<AxisValues>;
  for (Group& g : groups) {
    // The group's split: its mesh axes' sizes and which hold value holders at 0, and how the
    // layouts split each of its tensor axes among them.
    std::vector<int64_t> split = {formula, static_cast<int64_t>(g.mesh_axes.size())};
    for (int64_t a : g.mesh_axes) split.push_back(mesh[a] * 2 + marked[a]);
    for (int64_t e : g.tensor_axes) describe_split(split, *refined, layouts, e, g.mesh_axes);
    auto [found, added] = remembered.groups.try_emplace(std::move(split));
    g.distinct = &found->second;
    if (!added) continue;
    // Each tensor axis's values depend on the group axes that split it alone: they come from its
    // value map, computed once per way of splitting it, whatever the group's other tensor axes
    // do. The axes that split two tensor axes (and partial ones, for the flag) are walked
    // together (the joint axes); along a tensor axis's other axes, its values come as histograms
    // of runs of its map, so the walk visits the joint coordinates only. A group of one tensor
    // axis and no partial axis is its map's histogram.
    GroupValues& distinct = *g.distinct;
    const size_t parts = g.tensor_axes.size(), axes_in = g.mesh_axes.size();
    if (parts == 0) {  // the unsplit tensor axes, when every one is split: one class of one rank
      distinct.emplace_back(std::vector<int64_t>{}, 1);
      continue;
    }
    std::vector<char> joint(axes_in, 0);
    for (size_t j = 0; j < axes_in; ++j) {
      int64_t users = 0;
      for (int64_t e : g.tensor_axes) users += splits[e][g.mesh_axes[j]];
      joint[j] = users > 1 || marked[g.mesh_axes[j]];
    }
    // A tensor axis's own axes after its first private one must all be private (its runs are
    // consecutive in its map): a private axis before a joint one of the same tensor axis is made
    // joint, until none is.
    for (bool changed = true; changed;) {
      changed = false;
      for (int64_t e : g.tensor_axes) {
        bool later_joint = false;
        for (size_t j = axes_in; j-- > 0;) {
          if (!splits[e][g.mesh_axes[j]]) continue;
          if (!joint[j] && later_joint) joint[j] = 1, changed = true;
          later_joint = later_joint || joint[j];
        }
      }
    }
    std::vector<int64_t> walked;
    std::vector<char> walked_marked;
    for (size_t j = 0; j < axes_in; ++j)
      if (joint[j]) walked.push_back(mesh[g.mesh_axes[j]]), walked_marked.push_back(marked[g.mesh_axes[j]]);
    Odometer walk(walked, walked_marked, parts, parts);
    // Per tensor axis: its units (histogram numbers, or value numbers where it has no private
    // axis) by joint coordinate, and each unit's histogram.
    struct Units {
      const std::vector<int32_t>* at;
      std::vector<std::vector<std::pair<int64_t, int64_t>>> single;  // run 1: value v's histogram
      const std::vector<std::vector<std::pair<int64_t, int64_t>>>* histograms;
      const AxisValueMap* map;
    };
    std::vector<Units> units(parts);
    for (size_t i = 0; i < parts; ++i) {
      const int64_t e = g.tensor_axes[i];
      std::vector<int64_t> own;
      int64_t run = 1;
      for (size_t j = 0; j < axes_in; ++j)
        if (splits[e][g.mesh_axes[j]]) {
          own.push_back(g.mesh_axes[j]);
          if (!joint[j]) run *= mesh[g.mesh_axes[j]];
        }
      std::vector<int64_t> map_key = {formula, static_cast<int64_t>(own.size())};
      for (int64_t x : own) map_key.push_back(mesh[x]);
      describe_split(map_key, *refined, layouts, e, own);
      AxisValueMap& map = axis_value_map(remembered, map_key, *refined, layouts, axis_values, e, own);
      Units& u = units[i];
      u.map = &map;
      if (run == 1) {
        u.at = &map.at;
        for (size_t v = 0; v < map.values.size(); ++v) u.single.push_back({{static_cast<int64_t>(v), 1}});
        u.histograms = &u.single;
      } else {
        const AxisRuns& runs = runs_of(remembered, map, run);
        u.at = &runs.at;
        u.histograms = &runs.histograms;
      }
      int64_t weight = 1;
      for (size_t j = axes_in, w = walked.size(); j-- > 0;) {
        if (!joint[j]) continue;
        --w;
        if (splits[e][g.mesh_axes[j]]) walk.add_weight(w, i, i, weight), weight *= mesh[g.mesh_axes[j]];
      }
    }
    // A joint coordinate's tuple of units (and flag). Where the tuples are few enough to count
    // in a table (the usual case), a coordinate costs a few loads and an increment; otherwise
    // tuples are numbered as they appear, pair by pair.
    const size_t width = parts + (g.has_marked ? 1 : 0);
    std::vector<int64_t> radix(width, 1), kinds(width, 2);  // the tuple's mixed radix, the last fastest
    int64_t tuples = 1;
    for (size_t i = width; i-- > 0;) {
      radix[i] = tuples;
      if (i < parts) kinds[i] = static_cast<int64_t>(units[i].histograms->size());
      tuples = tuples <= (int64_t{1} << 16) / kinds[i] ? tuples * kinds[i] : (int64_t{1} << 16) + 1;
    }
    const bool dense = tuples <= (int64_t{1} << 16);
    std::vector<int64_t> table(dense ? tuples : 0, 0);
    std::vector<Numbered<std::pair<int64_t, int64_t>>> joined(width > 1 ? width - 1 : 0);
    std::vector<int64_t> ids(width, -1), prefix(width, -1);  // prefix[i]: the number of ids[0..i]
    std::vector<std::vector<int64_t>> class_ids;             // per tuple
    std::vector<int64_t> ranks;                              // per tuple
    int64_t index = 0;                                       // of ids in the table's radix (ids start at -1)
    for (int64_t r : radix) index -= r;
    do {
      size_t first_changed = width;
      for (size_t i = 0; i < parts; ++i) {
        if (!walk.stale(i)) continue;
        walk.clear_stale(i);
        const int64_t id = (*units[i].at)[walk.slot(i)];
        if (id != ids[i]) first_changed = std::min(first_changed, i), index += (id - ids[i]) * radix[i], ids[i] = id;
      }
      if (g.has_marked && ids.back() != (walk.marked_at_zero() ? 1 : 0)) {
        const int64_t flag = walk.marked_at_zero() ? 1 : 0;
        index += flag - ids.back(), ids.back() = flag;
        first_changed = std::min(first_changed, width - 1);
      }
      if (dense) {
        ++table[index];
        continue;
      }
      if (first_changed < width) {
        if (first_changed == 0) prefix[0] = ids[0];
        for (size_t i = std::max<size_t>(first_changed, 1); i < width; ++i)
          prefix[i] = joined[i - 1].number({prefix[i - 1], ids[i]}, prefix[i]);
        if (prefix.back() == static_cast<int64_t>(ranks.size())) {
          ranks.push_back(0);
          class_ids.push_back(ids);
        }
      }
      ++ranks[prefix.back()];
    } while (walk.next());
    if (dense)
      for (int64_t t = 0; t < tuples; ++t)
        if (table[t] > 0) {
          for (size_t i = 0; i < width; ++i) ids[i] = t / radix[i] % kinds[i];
          class_ids.push_back(ids);
          ranks.push_back(table[t]);
        }
    // Each tuple's classes: one entry of each of its histograms.
    std::map<std::vector<int64_t>, size_t> index_of;  // into distinct
    std::vector<int64_t> key(parts * kWidth + (g.has_marked ? 1 : 0));
    for (size_t c = 0; c < ranks.size(); ++c) {
      if (g.has_marked) key.back() = class_ids[c].back();
      auto product = [&](auto& self, size_t i, int64_t n) -> void {
        if (i == parts) {
          auto [it, added_key] = index_of.try_emplace(key, distinct.size());
          if (added_key) distinct.emplace_back(key, 0);
          distinct[it->second].second += n;
          return;
        }
        for (const auto& [value, count] : (*units[i].histograms)[class_ids[c][i]]) {
          const AxisValues& v = units[i].map->values[value];
          std::copy(v.begin(), v.end(), key.begin() + static_cast<std::ptrdiff_t>(i * kWidth));
          self(self, i + 1, n * count);
        }
      };
      product(product, 0, ranks[c]);
    }
  }
  // The classes: one distinct entry of every group.
  std::vector<AxisValues> values(ndim);
  auto combine = [&](auto& self, size_t group, int64_t ranks, int64_t holders) -> void {
    if (group == groups.size()) {
      visit(std::span<const AxisValues>(values), ranks * free_ranks, holders * free_holders);
      return;
    }
    const Group& g = groups[group];
    for (const auto& [key, n] : *g.distinct) {
      for (size_t i = 0; i < g.tensor_axes.size(); ++i)
        std::copy_n(key.begin() + static_cast<std::ptrdiff_t>(i * kWidth), kWidth, values[g.tensor_axes[i]].begin());
      self(self, group + 1, ranks * n, g.has_marked && key.back() == 0 ? 0 : holders * n);
    }
  };
  combine(combine, 0, 1, 1);
  return true;
}

}  // namespace spsd::detail
