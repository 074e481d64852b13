#pragma once
// NdSbp: one Sbp per mesh axis of a placement.
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "spsd/layout/sbp.hpp"

namespace spsd {

// One Sbp per mesh axis of a placement.
class NdSbp {
 public:
  // From one Sbp (a 1-d NdSbp, so an Sbp converts), or one Sbp per mesh axis (at least one).
  NdSbp(Sbp s) : axes_{s} {}  // NOLINT: a 1-d Sbp is a 1-d NdSbp
  NdSbp(std::initializer_list<Sbp> axes) : axes_(axes) { validate(); }
  explicit NdSbp(std::vector<Sbp> axes) : axes_(std::move(axes)) { validate(); }

  // The number of mesh axes, the Sbp of one (out of range: spsd::Error), and all of them.
  size_t size() const { return axes_.size(); }
  const Sbp& operator[](size_t mesh_axis) const {
    SPSD_CHECK(mesh_axis < axes_.size(), "NdSbp", "mesh axis ", mesh_axis, " is out of range for ", to_string());
    return axes_[mesh_axis];
  }
  auto begin() const { return axes_.begin(); }
  auto end() const { return axes_.end(); }
  const std::vector<Sbp>& axes() const { return axes_; }

  // Whether any mesh axis holds a partial value.
  bool has_partial() const {
    for (const Sbp& s : axes_) if (s.is_partial()) return true;
    return false;
  }

  // "(S(0), B)"; a 1-d NdSbp prints as "(S(0))".
  std::string to_string() const {
    std::string s = "(";
    for (size_t i = 0; i < axes_.size(); ++i) s += (i ? ", " : "") + axes_[i].to_string();
    return s + ")";
  }
  friend bool operator==(const NdSbp&, const NdSbp&) = default;
  friend std::ostream& operator<<(std::ostream& os, const NdSbp& s) { return os << s.to_string(); }

 private:
  void validate() const { SPSD_CHECK(!axes_.empty(), "NdSbp", "needs at least one Sbp (one per mesh axis)"); }
  std::vector<Sbp> axes_;
};

}  // namespace spsd
