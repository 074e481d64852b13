#pragma once
// Helpers of the plain-loop references the differential suites compare with (op_suite,
// compare_suite): deterministic host values and numpy broadcasting on whole host tensors.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <spsd/spsd.hpp>

namespace spsd_test {

// splitmix64's finalizer: every input bit affects every output bit (a hash for test values).
inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The broadcast shape of a and b (numpy rules; the suites only pass compatible shapes).
inline spsd::Shape ref_broadcast(const spsd::Shape& a, const spsd::Shape& b) {
  const int64_t n = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(n);
  for (int64_t d = 0; d < n; ++d) {
    const int64_t x = d - (n - a.ndim()) >= 0 ? a[d - (n - a.ndim())] : 1;
    const int64_t y = d - (n - b.ndim()) >= 0 ? b[d - (n - b.ndim())] : 1;
    dims[d] = x == 1 ? y : x;
  }
  return spsd::Shape(std::move(dims));
}

// The multi-index of row-major index g in shape.
inline std::vector<int64_t> unravel(int64_t g, const spsd::Shape& shape) {
  std::vector<int64_t> idx(shape.ndim());
  for (int64_t d = shape.ndim() - 1; d >= 0; --d) {
    idx[d] = g % shape[d];
    g /= shape[d];
  }
  return idx;
}

// Row-major index of `in` read at output index idx (in right-aligned; size-1 axes stretch).
inline int64_t broadcast_offset(const spsd::Shape& in, const std::vector<int64_t>& idx) {
  const int64_t off = static_cast<int64_t>(idx.size()) - in.ndim();
  int64_t g = 0;
  for (int64_t d = 0; d < in.ndim(); ++d) g = g * in[d] + (in[d] == 1 ? 0 : idx[off + d]);
  return g;
}

}  // namespace spsd_test
