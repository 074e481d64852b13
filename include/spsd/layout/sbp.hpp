#pragma once
// Sbp: how a tensor maps onto one mesh axis: split along a tensor axis (negative: from the
// end), broadcast, or partial.
#include <cstdint>
#include <ostream>
#include <string>

#include "spsd/core/error.hpp"
#include "spsd/core/reduce_op.hpp"

namespace spsd {

// How a tensor maps onto one mesh axis: split along a tensor axis, broadcast, or partial.
class Sbp {
 public:
  // Which of the three an Sbp is.
  enum class Kind : uint8_t { kSplit, kBroadcast, kPartial };

  constexpr Sbp() = default;  // broadcast
  // A negative axis counts from the end (S(-1): the last axis), as torch's Shard(-1); it is
  // normalized against the tensor's rank where a layout meets a shape (normalize_axes in
  // layout/layout.hpp: tensors, factories, to_global, box_of), so a tensor's NdSbp never holds one.
  static constexpr Sbp make_split(int64_t axis) { return Sbp(Kind::kSplit, axis, ReduceOp::kSum); }
  static constexpr Sbp make_broadcast() { return Sbp(); }
  static constexpr Sbp make_partial(ReduceOp op) {
    if (!is_valid(op)) detail::throw_error("sbp::partial", "reduce op has the invalid value ", static_cast<int>(op));
    return Sbp(Kind::kPartial, 0, op);
  }

  // The kind; the split axis and the partial reduction, which throw for any other kind.
  constexpr Kind kind() const { return kind_; }
  constexpr bool is_split() const { return kind_ == Kind::kSplit; }
  constexpr bool is_broadcast() const { return kind_ == Kind::kBroadcast; }
  constexpr bool is_partial() const { return kind_ == Kind::kPartial; }
  int64_t axis() const {
    SPSD_CHECK(is_split(), "Sbp::axis", to_string(), " is not a split");
    return axis_;
  }
  ReduceOp reduce_op() const {
    SPSD_CHECK(is_partial(), "Sbp::reduce_op", to_string(), " is not partial");
    return op_;
  }

  // "S(0)", "B", "P(sum)"; == compares what matters for the kind (not a broadcast's axis).
  std::string to_string() const {
    switch (kind_) {
      case Kind::kSplit: return "S(" + std::to_string(axis_) + ")";
      case Kind::kBroadcast: return "B";
      case Kind::kPartial: return "P(" + std::string(spsd::to_string(op_)) + ")";
    }
    return "?";
  }
  friend constexpr bool operator==(const Sbp& a, const Sbp& b) {
    return a.kind_ == b.kind_ && (!a.is_split() || a.axis_ == b.axis_) && (!a.is_partial() || a.op_ == b.op_);
  }
  friend std::ostream& operator<<(std::ostream& os, const Sbp& s) { return os << s.to_string(); }

 private:
  constexpr Sbp(Kind kind, int64_t axis, ReduceOp op) : kind_(kind), op_(op), axis_(axis) {}
  Kind kind_ = Kind::kBroadcast;
  ReduceOp op_ = ReduceOp::kSum;
  int64_t axis_ = 0;
};

namespace sbp {
// S(axis): split along a tensor axis (negative counts from the end).
inline Sbp split(int64_t axis) { return Sbp::make_split(axis); }
inline constexpr Sbp broadcast = Sbp::make_broadcast();
inline constexpr Sbp partial_sum = Sbp::make_partial(ReduceOp::kSum);
inline constexpr Sbp partial_max = Sbp::make_partial(ReduceOp::kMax);
inline constexpr Sbp partial_min = Sbp::make_partial(ReduceOp::kMin);
// P(op): each rank holds a partial value; the tensor is their reduction by op.
inline Sbp partial(ReduceOp op) { return Sbp::make_partial(op); }
}  // namespace sbp

}  // namespace spsd
