#pragma once
// The predicates of the comparison ops, by name: CompareOp, its printed names, and the element
// function each names, shared by the cpu and CUDA kernels (both round nothing: a comparison is
// exact, so both sides agree bit for bit). NaN compares false except by ne (IEEE).
#include <cstdint>
#include <ostream>
#include <string_view>

#include "spsd/core/config.hpp"
#include "spsd/core/error.hpp"

namespace spsd::kernel {

// kAnd, kOr: logical_and/or of bool tensors (their kernel is the comparisons').
enum class CompareOp { kLt, kLe, kGt, kGe, kEq, kNe, kAnd, kOr };

// "lt", "le", ..., "logical_and", "logical_or": the op's name (<< prints the same).
constexpr std::string_view to_string(CompareOp op) {
  switch (op) {
    case CompareOp::kLt: return "lt";
    case CompareOp::kLe: return "le";
    case CompareOp::kGt: return "gt";
    case CompareOp::kGe: return "ge";
    case CompareOp::kEq: return "eq";
    case CompareOp::kNe: return "ne";
    case CompareOp::kAnd: return "logical_and";
    case CompareOp::kOr: return "logical_or";
  }
  return "invalid compare op";
}
inline std::ostream& operator<<(std::ostream& os, CompareOp op) { return os << to_string(op); }

// s op x == x mirrored(op) s: how a scalar on the left is compared.
constexpr CompareOp mirrored(CompareOp op) {
  switch (op) {
    case CompareOp::kLt: return CompareOp::kGt;
    case CompareOp::kLe: return CompareOp::kGe;
    case CompareOp::kGt: return CompareOp::kLt;
    case CompareOp::kGe: return CompareOp::kLe;
    default: return op;  // eq, ne, and, or are symmetric
  }
}

// The element predicate CompareOp K names, for the cpu and CUDA kernels alike.
template <CompareOp K>
struct Compare {
  // x op y (kAnd, kOr: of x and y as bools).
  template <class C>
  SPSD_HOST_DEVICE bool operator()(C x, C y) const {
    if constexpr (K == CompareOp::kLt) return x < y;
    else if constexpr (K == CompareOp::kLe) return x <= y;
    else if constexpr (K == CompareOp::kGt) return x > y;
    else if constexpr (K == CompareOp::kGe) return x >= y;
    else if constexpr (K == CompareOp::kEq) return x == y;
    else if constexpr (K == CompareOp::kNe) return x != y;
    else if constexpr (K == CompareOp::kAnd) return static_cast<bool>(x) && static_cast<bool>(y);
    else return static_cast<bool>(x) || static_cast<bool>(y);
  }
};

// Calls body(Compare<op>{}): one switch, then body's loop inlines the predicate.
template <class Body>
void with_compare(CompareOp op, Body&& body) {
  switch (op) {
    case CompareOp::kLt: return body(Compare<CompareOp::kLt>{});
    case CompareOp::kLe: return body(Compare<CompareOp::kLe>{});
    case CompareOp::kGt: return body(Compare<CompareOp::kGt>{});
    case CompareOp::kGe: return body(Compare<CompareOp::kGe>{});
    case CompareOp::kEq: return body(Compare<CompareOp::kEq>{});
    case CompareOp::kNe: return body(Compare<CompareOp::kNe>{});
    case CompareOp::kAnd: return body(Compare<CompareOp::kAnd>{});
    case CompareOp::kOr: return body(Compare<CompareOp::kOr>{});
  }
  ::spsd::detail::throw_error("compare", "invalid op value ", static_cast<int>(op));
}

// argmax/argmin's candidate key of an element at index i along the reduced axis (of n): a NaN
// ranks first (torch treats NaN as the extreme), then an element equal to the extreme m, then
// an infinite element, then nothing (INT64_MAX). The min over the axis of the keys is the first
// index of the extreme (key mod n). The infinite tier is for rows whose every element is -inf
// (argmax; +inf for argmin) split with an empty piece: that piece's max is the finite padding
// lowest() (operators.md, "Non-finite values"), so m is lowest() and no element equals it;
// wherever some element equals m, its key is below every infinite one.
template <class C>
SPSD_HOST_DEVICE inline int64_t extreme_key(C x, C m, int64_t i, int64_t n) {
  if (x != x) return i;
  if (x == m) return n + i;
  return x - x != x - x ? 2 * n + i : INT64_MAX;  // x - x is NaN for +-inf only
}

}  // namespace spsd::kernel
