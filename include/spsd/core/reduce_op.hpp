#pragma once
// Element-wise application of a ReduceOp: the combine step of every partial reduction.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "spsd/core/dtype.hpp"

namespace spsd {

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

// dst[i] = dst[i] op src[i]; one switch outside the loop so the loops vectorize.
template <Element T>
void combine_into(T* dst, const T* src, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: for (int64_t i = 0; i < n; ++i) dst[i] += src[i]; break;
    case ReduceOp::kMax: for (int64_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]); break;
    case ReduceOp::kMin: for (int64_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]); break;
  }
}

inline void combine_into(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op) {
  visit_dtype(dtype, [&]<class T>() { combine_into(static_cast<T*>(dst), static_cast<const T*>(src), n, op); });
}

}  // namespace spsd
