#pragma once
// ReduceOp: the reduction of a partial layout (P(sum), P(max), P(min)) and of the collectives
// that resolve it, its identity for each element type, and its element-wise application (the
// combine step of every partial reduction).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "spsd/core/config.hpp"
#include "spsd/core/dtype.hpp"

namespace spsd {

// The reduction of a partial layout and of the collectives that resolve it.
enum class ReduceOp { kSum, kMax, kMin };

// False for values cast from integers that name no enumerator (checked where they enter: the
// communicator, sbp::partial).
constexpr bool is_valid(ReduceOp op) { return op == ReduceOp::kSum || op == ReduceOp::kMax || op == ReduceOp::kMin; }

// "sum", "max", "min": the names P(...) prints.
constexpr std::string_view to_string(ReduceOp op) {
  constexpr std::string_view names[] = {"sum", "max", "min"};
  return is_valid(op) ? names[static_cast<int>(op)] : "invalid reduce op";
}
inline std::ostream& operator<<(std::ostream& os, ReduceOp op) { return os << to_string(op); }

// The identity of op for T: x op identity == x.
template <Element T>
constexpr T reduce_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return T{0};
    case ReduceOp::kMax: return std::numeric_limits<T>::lowest();
    case ReduceOp::kMin: return std::numeric_limits<T>::max();
  }
  return T{0};
}

// a + b; integer sums wrap modulo 2^bits (documented behaviour of P(sum) on integers, and what
// MPI does) instead of overflowing, which C++ leaves undefined for signed types.
// A 16-bit float adds in float and rounds once.
template <Element T>
SPSD_HOST_DEVICE constexpr T wrapping_add(T a, T b) {
  if constexpr (is_half_v<T>) {
    return T(static_cast<float>(a) + static_cast<float>(b));
  } else if constexpr (std::is_same_v<T, bool>) {  // (never reached: bool has no partial layouts)
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// dst[i] = dst[i] op src[i]; one switch outside the loop so the loops vectorize. Acc is T, or
// float accumulating 16-bit pieces (widened exactly; the caller rounds once at the end, where
// a 16-bit dst would round at every step).
template <Element Acc, Element T>
  requires(std::is_same_v<Acc, T> || std::is_same_v<Acc, compute_t<T>>)
void combine_into(Acc* dst, const T* src, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: for (int64_t i = 0; i < n; ++i) dst[i] = wrapping_add(dst[i], static_cast<Acc>(src[i])); break;
    case ReduceOp::kMax: for (int64_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], static_cast<Acc>(src[i])); break;
    case ReduceOp::kMin: for (int64_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], static_cast<Acc>(src[i])); break;
  }
}

// The same on untyped buffers of n elements of dtype (no widening: Acc is the element type).
inline void combine_into(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op) {
  visit_dtype(dtype, [&]<class T>() { combine_into(static_cast<T*>(dst), static_cast<const T*>(src), n, op); });
}

}  // namespace spsd
