#pragma once
// Numpy broadcasting of shapes (right-aligned; size-1 or missing axes stretch), and the
// split signatures it allows: an output axis may be split wherever every input either has the
// axis at full size (split it too) or broadcasts it (keep it whole).
#include <span>
#include <string_view>
#include <vector>

#include "spsd/core/error.hpp"
#include "spsd/op/signature.hpp"

namespace spsd::detail {

inline Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const int64_t n = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(n);
  for (int64_t d = 0; d < n; ++d) {
    int64_t da = d - (n - a.ndim()), db = d - (n - b.ndim());
    int64_t x = da >= 0 ? a[da] : 1, y = db >= 0 ? b[db] : 1;
    SPSD_CHECK(x == y || x == 1 || y == 1, op, "shapes ", a, " and ", b, " do not broadcast (axis ", d,
               " of the result: ", x, " vs ", y, ")");
    dims[d] = x == 1 ? y : x;
  }
  return Shape(std::move(dims));
}

// The input axis that output axis d reads (inputs right-aligned), or -1 when the input
// broadcasts it (missing, or size 1 against a larger output).
inline int64_t source_axis(const Shape& in, const Shape& out, int64_t d) {
  int64_t a = d - (out.ndim() - in.ndim());
  return a >= 0 && in[a] == out[d] ? a : -1;
}

// For each output axis d: S(d) on the output, S(source axis) on inputs that have it, B on
// inputs that broadcast it.
inline std::vector<Signature> broadcast_split_signatures(std::span<const TensorMeta> inputs, const Shape& out) {
  std::vector<Signature> table;
  for (int64_t d = 0; d < out.ndim(); ++d) {
    Signature s{{}, sbp::split(d)};
    for (const TensorMeta& in : inputs) {
      int64_t a = source_axis(in.shape, out, d);
      s.inputs.push_back(a >= 0 ? sbp::split(a) : sbp::broadcast);
    }
    table.push_back(std::move(s));
  }
  return table;
}

}  // namespace spsd::detail
