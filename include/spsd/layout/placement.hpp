#pragma once
// Placement: a device type and an N-d mesh of ranks, kept in the order given.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/rank_list.hpp"

namespace spsd {

// The memory space of a placement's tensors: host (cpu) or a GPU of each rank (cuda).
enum class DeviceType { kCPU, kCUDA };

// "cpu" or "cuda".
constexpr std::string_view to_string(DeviceType t) { return t == DeviceType::kCPU ? "cpu" : "cuda"; }
inline std::ostream& operator<<(std::ostream& os, DeviceType t) { return os << to_string(t); }

// The device type named "cpu" or "cuda"; anything else is an spsd::Error.
inline DeviceType parse_device_type(std::string_view type) {
  if (type == "cpu") return DeviceType::kCPU;
  if (type == "cuda") return DeviceType::kCUDA;
  detail::throw_error("Placement", "device type must be \"cpu\" or \"cuda\", got \"", type, "\"");
}

// A device type and an N-d mesh of world ranks, kept in the order given.
class Placement {
 public:
  // A 1-d mesh of ranks, a 2-d mesh of rows, or ranks in row-major order on a given mesh; type is
  // "cpu" or "cuda". Ranks must be distinct and non-negative, and the mesh must hold them all.
  Placement(std::string_view type, std::initializer_list<int64_t> ranks)
      : Placement(type, std::vector<int64_t>(ranks)) {}
  Placement(std::string_view type, std::initializer_list<std::initializer_list<int64_t>> rows)
      : Placement(type, flatten(rows), Shape{static_cast<int64_t>(rows.size()), row_length(rows)}) {}
  Placement(std::string_view type, std::vector<int64_t> ranks)
      : Placement(type, ranks, Shape{static_cast<int64_t>(ranks.size())}) {}
  Placement(std::string_view type, std::vector<int64_t> ranks, Shape mesh)
      : device_type_(parse_device_type(type)), mesh_(std::move(mesh)) {
    SPSD_CHECK(mesh_.ndim() >= 1, "Placement", "mesh must have at least one axis, got ", mesh_);
    SPSD_CHECK(mesh_.numel() == static_cast<int64_t>(ranks.size()), "Placement", "mesh ", mesh_, " holds ",
               mesh_.numel(), " ranks but ", ranks.size(), " ranks were given: ", detail::join(ranks));
    list_ = detail::RankList::intern(std::move(ranks));  // checks the ranks themselves
  }

  // The memory space.
  DeviceType device_type() const { return device_type_; }
  // The same ranks and mesh in another memory space (shares the rank list: no copy).
  Placement with_device_type(DeviceType device) const {
    Placement p = *this;
    p.device_type_ = device;
    return p;
  }
  // The mesh, its number of ranks, its ranks in row-major order, and whether rank is one of them.
  const Shape& mesh() const { return mesh_; }
  int64_t size() const { return list_->size(); }
  const std::vector<int64_t>& ranks() const { return list_->ranks(); }
  bool contains(int64_t rank) const { return position(rank) >= 0; }
  // The shared list (layout/rank_list.hpp): its id names the ranks in cache keys.
  const detail::RankList& rank_list() const { return *list_; }

  // Row-major position of rank in the mesh, or -1.
  int64_t position(int64_t rank) const { return list_->position(rank); }

  // rank's coordinates on the mesh (a rank outside: spsd::Error).
  std::vector<int64_t> coords(int64_t rank) const {
    int64_t pos = position(rank);
    SPSD_CHECK(pos >= 0, "Placement::coords", "rank ", rank, " is not in ", to_string());
    std::vector<int64_t> c(mesh_.ndim());
    for (int64_t a = mesh_.ndim() - 1; a >= 0; --a) {
      c[a] = pos % mesh_[a];
      pos /= mesh_[a];
    }
    return c;
  }

  // The rank at these mesh coordinates (outside the mesh: spsd::Error).
  int64_t rank_at(const std::vector<int64_t>& coords) const {
    SPSD_CHECK(static_cast<int64_t>(coords.size()) == mesh_.ndim(), "Placement::rank_at", "coords ",
               detail::join(coords), " do not match mesh ", mesh_);
    int64_t pos = 0;
    for (int64_t a = 0; a < mesh_.ndim(); ++a) {
      SPSD_CHECK(coords[a] >= 0 && coords[a] < mesh_[a], "Placement::rank_at", "coords ", detail::join(coords),
                 " are outside mesh ", mesh_);
      pos = pos * mesh_[a] + coords[a];
    }
    return ranks()[pos];
  }

  // placement(type="cuda", ranks=[[0, 1], [2, 3]]); past 64 ranks in a contiguous range,
  // placement(type="cuda", ranks=0..16383 on mesh (2048, 8)), so that logs, errors and the
  // consistency check's op descriptions stay short on a cluster.
  std::string to_string() const {
    std::string s = "placement(type=\"" + std::string(spsd::to_string(device_type_)) + "\", ranks=";
    if (size() > 64 && list_->contiguous())
      return s + std::to_string(ranks().front()) + ".." + std::to_string(ranks().back()) + " on mesh " +
             mesh_.to_string() + ")";
    size_t next = 0;
    append_nested(s, 0, next);
    return s + ")";
  }

  // Equal rank lists are one interned object, so this compares no rank.
  friend bool operator==(const Placement& a, const Placement& b) {
    return a.device_type_ == b.device_type_ && a.list_ == b.list_ && a.mesh_ == b.mesh_;
  }
  friend std::ostream& operator<<(std::ostream& os, const Placement& p) { return os << p.to_string(); }

 private:
  static std::vector<int64_t> flatten(std::initializer_list<std::initializer_list<int64_t>> rows) {
    std::vector<int64_t> flat;
    for (const auto& row : rows) {
      SPSD_CHECK(static_cast<int64_t>(row.size()) == row_length(rows), "Placement",
                 "every row of a 2-d rank array must have the same length, got rows of ", row_length(rows),
                 " and ", row.size());
      flat.insert(flat.end(), row.begin(), row.end());
    }
    return flat;
  }
  static int64_t row_length(std::initializer_list<std::initializer_list<int64_t>> rows) {
    return rows.size() == 0 ? 0 : static_cast<int64_t>(rows.begin()->size());
  }

  void append_nested(std::string& s, int64_t axis, size_t& next) const {
    s += "[";
    for (int64_t i = 0; i < mesh_[axis]; ++i) {
      if (i) s += ", ";
      if (axis + 1 == mesh_.ndim()) s += std::to_string(ranks()[next++]);
      else append_nested(s, axis + 1, next);
    }
    s += "]";
  }

  DeviceType device_type_;
  Shape mesh_;
  std::shared_ptr<const detail::RankList> list_;
};

// World ranks of the group that contains `rank` and varies only along the given mesh axes
// (in row-major order of those axes): e.g. one row of a 2-d mesh is mesh_group(p, r, {1}).
inline std::vector<int64_t> mesh_group(const Placement& p, int64_t rank, const std::vector<int64_t>& axes) {
  std::vector<int64_t> base = p.coords(rank);
  std::vector<bool> seen(p.mesh().ndim(), false);
  for (int64_t a : axes) {
    SPSD_CHECK(a >= 0 && a < p.mesh().ndim(), "mesh_group", "mesh axis ", a, " is out of range for mesh ", p.mesh());
    SPSD_CHECK(!seen[a], "mesh_group", "mesh axis ", a, " is repeated in ", detail::join(axes));
    seen[a] = true;
  }
  int64_t count = 1;
  for (int64_t a : axes) count *= p.mesh()[a];
  std::vector<int64_t> group;
  group.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> c = base;
    int64_t rest = i;
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      c[*it] = rest % p.mesh()[*it];
      rest /= p.mesh()[*it];
    }
    group.push_back(p.rank_at(c));
  }
  return group;
}

// The ranks of a and b, sorted, each once: who takes part in a conversion between them.
inline std::vector<int64_t> union_ranks(const Placement& a, const Placement& b) {
  std::vector<int64_t> ranks = a.ranks();
  ranks.insert(ranks.end(), b.ranks().begin(), b.ranks().end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

}  // namespace spsd
