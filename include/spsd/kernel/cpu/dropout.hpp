#pragma once
// dropout's mask: element at global row-major index g of a tensor is kept when the first 32-bit
// word of Philox(seed, g) (tensor/random.hpp) is at least threshold = ceil(p 2^32), which
// happens with probability 1 - p (to 2^-32). The mask depends only on (seed, g): any rank
// computing any piece of any layout draws the same, and the cuda kernel calls the same code.
// Kept elements are scaled by 1 / (1 - p) in compute_t<T> and rounded once.
#include <cmath>
#include <cstdint>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/split.hpp"
#include "spsd/tensor/random.hpp"

namespace spsd::kernel::cpu {

// The Philox threshold of drop probability p in [0, 1).
inline uint64_t dropout_threshold(double p) { return static_cast<uint64_t>(std::ceil(p * 4294967296.0)); }

// Whether element `index` (its flat index in the global tensor) is kept under this seed: its
// Philox draw is >= threshold. The same on the host and the device.
SPSD_HOST_DEVICE inline bool dropout_keeps(uint64_t seed, uint64_t index, uint64_t threshold) {
  return philox::draw(seed, index).v[0] >= threshold;
}

// out (box.shape(), dense) = x (the same) times the mask of the box of a global_shape tensor,
// kept elements scaled by `scale`. out may be x.
template <FloatingElement T>
void dropout(const T* x, T* out, const Box& box, const Shape& global_shape, uint64_t seed, uint64_t threshold,
             double scale) {
  using C = compute_t<T>;
  const int64_t n = box.numel(), r = box.ndim();
  if (n == 0) return;
  if (r == 0) {
    out[0] = dropout_keeps(seed, 0, threshold) ? static_cast<T>(static_cast<C>(x[0]) * static_cast<C>(scale)) : T(0);
    return;
  }
  // Walk the box row by row (its last axis is contiguous in the global tensor too): idx holds
  // the box coordinates of the row's first element, base its global index.
  const int64_t len = box.end[r - 1] - box.begin[r - 1];
  std::vector<int64_t> idx(r, 0), stride(r, 1);
  for (int64_t d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * global_shape[d + 1];
  const C k = static_cast<C>(scale);
  for (int64_t row = 0; row < n / len; ++row) {
    int64_t base = 0;
    for (int64_t d = 0; d < r; ++d) base += (box.begin[d] + idx[d]) * stride[d];
    const T* xr = x + row * len;
    T* o = out + row * len;
    for (int64_t i = 0; i < len; ++i)
      o[i] = dropout_keeps(seed, static_cast<uint64_t>(base + i), threshold) ? static_cast<T>(static_cast<C>(xr[i]) * k)
                                                                             : T(0);
    for (int64_t d = r - 2; d >= 0; --d) {  // next row
      if (++idx[d] < box.end[d] - box.begin[d]) break;
      idx[d] = 0;
    }
  }
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_DROPOUT_INSTANCES(prefix, T) \
  prefix template void dropout<T>(const T*, T*, const Box&, const Shape&, uint64_t, uint64_t, double);
SPSD_FOR_EACH_FLOATING(SPSD_CPU_DROPOUT_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
