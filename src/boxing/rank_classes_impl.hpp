#pragma once
// for_each_rank_class (rank_classes.hpp).
#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
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

// Numbers distinct items in the order they first appear. A walk meets a few items over and over
// (alternating, typically), so a small table by hash answers most lookups with one compare; a
// map holds them all.
template <class T>
class Numbered {
 public:
  // item's number; `hint`, a number item likely has (the last one), is tried first.
  int64_t number(const T& item, int64_t hint) {
    if (hint >= 0 && same(items_[hint], item)) return hint;
    int64_t& recent = recent_[hash(item) % recent_.size()];
    if (recent >= 0 && same(items_[recent], item)) return recent;
    auto [it, added] = index_.try_emplace(item, static_cast<int64_t>(items_.size()));
    if (added) items_.push_back(item);
    return recent = it->second;
  }
  const T& item(size_t k) const { return items_[k]; }

 private:
  static size_t hash(const T& item) {
    uint64_t h = 0;
    auto mix = [&](int64_t v) { h = (h ^ static_cast<uint64_t>(v)) * 0x9E3779B97F4A7C15ull; };
    if constexpr (std::is_same_v<T, AxisValues>) {
      for (int64_t v : item) mix(v);
    } else {
      mix(item.first);
      mix(item.second);
    }
    return static_cast<size_t>(h >> 32);
  }
  // Element by element: std::array's == calls memcmp, which costs more than five compares.
  static bool same(const T& a, const T& b) {
    if constexpr (std::is_same_v<T, AxisValues>) {
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return false;
      return true;
    } else {
      return a == b;
    }
  }
  std::vector<T> items_;
  std::map<T, int64_t> index_;
  std::array<int64_t, 61> recent_ = filled(-1);
  static constexpr std::array<int64_t, 61> filled(int64_t v) {
    std::array<int64_t, 61> a{};
    for (int64_t& x : a) x = v;
    return a;
  }
};

// The layouts' pieces counted up along some refinement axes (the others at 0) like an odometer:
// piece(e, l) is the number of layout l's piece along tensor axis e (LayoutBoxes::leaf) at the
// current coordinates, and a step adds fixed weights, so a visit costs a few additions and no
// division. Visits are in position order.
class PieceOdometer {
 public:
  PieceOdometer(const Refinement& r, std::span<const LayoutBoxes* const> layouts, const std::vector<int64_t>& walked,
                const std::vector<char>& marked)
      : count_(layouts.size()), pieces_(layouts.front()->shape().ndim() * layouts.size(), 0),
        stale_(layouts.front()->shape().ndim(), 1) {
    for (int64_t x : walked) axes_.push_back({r.dims[x], marked[x] != 0});
    std::vector<std::vector<Weight>> per_axis(walked.size());
    for (int64_t e = 0; e < layouts.front()->shape().ndim(); ++e)
      for (size_t l = 0; l < count_; ++l) {
        const std::vector<int64_t> digits = refined_split_axes(r, *layouts[l], l, e);
        int64_t weight = 1;
        for (size_t k = digits.size(); k-- > 0; weight *= r.dims[digits[k]]) {
          const size_t j = std::find(walked.begin(), walked.end(), digits[k]) - walked.begin();
          if (j < walked.size()) per_axis[j].push_back({e * count_ + l, static_cast<size_t>(e), weight});
        }
      }
    for (size_t j = 0; j < walked.size(); ++j) {
      axes_[j].first = weights_.size();
      weights_.insert(weights_.end(), per_axis[j].begin(), per_axis[j].end());
      axes_[j].last = weights_.size();
    }
  }
  // The pieces of every layout along tensor axis e.
  std::span<const int64_t> pieces(int64_t e) const { return std::span<const int64_t>(pieces_).subspan(e * count_, count_); }
  // Whether e's pieces changed since the last clear_stale(e) (all are at first).
  bool stale(int64_t e) const { return stale_[e] != 0; }
  void clear_stale(int64_t e) { stale_[e] = 0; }
  // Whether the rank holds the value of every layout: at 0 along each partial axis.
  bool holds_values() const { return off_zero_ == 0; }
  // To the next coordinates; false after the last.
  bool next() {
    for (size_t j = axes_.size(); j-- > 0;) {
      Axis& a = axes_[j];
      const bool wraps = ++a.coord == a.dim;
      const int64_t steps = wraps ? 1 - a.dim : 1;
      for (size_t w = a.first; w < a.last; ++w) {
        pieces_[weights_[w].slot] += steps * weights_[w].weight;
        stale_[weights_[w].axis] = 1;
      }
      if (a.marked) off_zero_ += wraps ? -1 : a.coord == 1 ? 1 : 0;  // refined axes have 2+ coordinates
      if (!wraps) return true;
      a.coord = 0;
    }
    return false;
  }

 private:
  struct Axis {
    int64_t dim;
    bool marked;
    int64_t coord = 0;
    size_t first = 0, last = 0;  // its weights
  };
  struct Weight {
    size_t slot, axis;  // the piece it moves, and that piece's tensor axis
    int64_t weight;     // pieces per coordinate step
  };
  size_t count_;
  std::vector<int64_t> pieces_;
  std::vector<char> stale_;
  std::vector<Axis> axes_;
  std::vector<Weight> weights_;
  int64_t off_zero_ = 0;  // walked partial axes at a coordinate other than 0
};

template <class Fn>
bool for_each_rank(std::span<const LayoutBoxes* const> layouts, Fn&& fn) {
  const std::optional<Refinement> refined = refine(layouts);
  if (!refined) return false;
  std::vector<int64_t> all(refined->dims.size());
  std::iota(all.begin(), all.end(), 0);
  PieceOdometer odometer(*refined, layouts, all, refined_partial_axes(*refined, layouts));
  do fn(odometer);
  while (odometer.next());
  return true;
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
  const size_t count = layouts.size();
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
  std::vector<bool> splits_any(axes, false);
  for (size_t l = 0; l < count; ++l)
    for (int64_t e = 0; e < ndim; ++e)
      for (int64_t a : split_axes(l, e)) {
        if (anchor[e] < 0) anchor[e] = a;
        root[find(a)] = find(anchor[e]);
        splits_any[a] = true;
      }
  // The groups: their mesh axes and tensor axes. Tensor axes that no layout splits form one
  // group without mesh axes; mesh axes that split nothing only multiply the counts.
  struct Group {
    std::vector<int64_t> mesh_axes, tensor_axes;
    bool has_marked = false;                       // its values end with the value-holder flag
    GroupValues* distinct = nullptr;  // remembered_group's entry
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
  // Each group's coordinates, the others at 0, folded into distinct values.
  for (Group& g : groups) {
    const size_t width = g.mesh_axes.size();
    auto at_in_group = [&](int64_t r) { return static_cast<size_t>(std::find(g.mesh_axes.begin(), g.mesh_axes.end(), r) - g.mesh_axes.begin()); };
    // The group's split: its mesh axes' sizes and which hold value holders at 0, and per tensor
    // axis its extent and, per layout, the positions among the group's mesh axes of those that
    // split it.
    std::vector<int64_t> split = {formula, static_cast<int64_t>(width)};
    for (int64_t a : g.mesh_axes) split.push_back(mesh[a] * 2 + (marked[a] ? 1 : 0));
    for (int64_t e : g.tensor_axes) {
      split.push_back(layouts.front()->shape()[e]);
      for (size_t l = 0; l < count; ++l) {
        // Which of the group's axes each splitting mesh axis spans.
        split.push_back(static_cast<int64_t>(layouts[l]->splits(e).size()));
        for (int64_t a : layouts[l]->splits(e)) {
          const auto [first, last] = refined->spans[l][a];
          split.push_back(static_cast<int64_t>(at_in_group(first)));
          split.push_back(last - first);
        }
      }
    }
    auto [found, added] = remembered.try_emplace(split);
    g.distinct = &found->second;
    if (!added) continue;
    // Each tensor axis's distinct values are numbered as they appear, and a rank's class is
    // numbered from those numbers (and its value-holder flag) pair by pair: a rank costs a few
    // integer compares, and its axis values are computed only where its pieces changed.
    const size_t parts = g.tensor_axes.size() + (g.has_marked ? 1 : 0);
    if (parts == 0) {  // no tensor axis is unsplit: one class of the one rank the empty group spans
      g.distinct->emplace_back(std::vector<int64_t>{}, 1);
      continue;
    }
    PieceOdometer odometer(*refined, layouts, g.mesh_axes, marked);
    std::vector<Numbered<AxisValues>> axis_ids(g.tensor_axes.size());
    std::vector<Numbered<std::pair<int64_t, int64_t>>> joined(parts > 1 ? parts - 1 : 0);
    std::vector<int64_t> ids(parts, -1), prefix(parts, -1);  // prefix[i]: the number of ids[0..i]
    std::vector<std::vector<int64_t>> class_ids;  // per class
    std::vector<int64_t> ranks;                   // per class
    do {
      size_t first_changed = parts;
      for (size_t i = 0; i < g.tensor_axes.size(); ++i) {
        const int64_t e = g.tensor_axes[i];
        if (!odometer.stale(e)) continue;
        odometer.clear_stale(e);
        const int64_t id = axis_ids[i].number(axis_values(e, odometer.pieces(e)), ids[i]);
        if (id != ids[i]) first_changed = std::min(first_changed, i), ids[i] = id;
      }
      if (g.has_marked && ids.back() != (odometer.holds_values() ? 1 : 0)) {
        ids.back() = odometer.holds_values() ? 1 : 0;
        first_changed = std::min(first_changed, parts - 1);
      }
      if (first_changed < parts) {
        if (first_changed == 0) prefix[0] = ids[0];
        for (size_t i = std::max<size_t>(first_changed, 1); i < parts; ++i)
          prefix[i] = joined[i - 1].number({prefix[i - 1], ids[i]}, prefix[i]);
        if (prefix.back() == static_cast<int64_t>(ranks.size())) {
          ranks.push_back(0);
          class_ids.push_back(ids);
        }
      }
      ++ranks[prefix.back()];
    } while (odometer.next());
    GroupValues& distinct = *g.distinct;
    for (size_t c = 0; c < ranks.size(); ++c) {
      std::vector<int64_t> key;
      for (size_t i = 0; i < g.tensor_axes.size(); ++i) {
        const AxisValues& v = axis_ids[i].item(class_ids[c][i]);
        key.insert(key.end(), v.begin(), v.end());
      }
      if (g.has_marked) key.push_back(class_ids[c].back());
      distinct.emplace_back(std::move(key), ranks[c]);
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
