#pragma once
// The global row-major index of each element of a box, for kernels whose values depend on it
// (the random fills, dropout's mask): base + idx.offsets(i) for the box's local row-major i.
#include "common.cuh"

#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::kernel::cuda::detail {

struct BoxIndex {
  int64_t base = 0;  // the global index of the box's first element
  Strided<1> idx;    // dims: the box's extents (collapsed), strides: the global strides
};

// Throws spsd::Error naming `name` for a box outside the tensor.
inline BoxIndex box_index(const char* name, const Box& box, const Shape& global_shape) {
  SPSD_CHECK(box.ndim() == global_shape.ndim(), name, "box ", box, " does not fit a tensor of shape ", global_shape);
  for (int64_t d = 0; d < box.ndim(); ++d)
    SPSD_CHECK(box.begin[d] >= 0 && box.begin[d] <= box.end[d] && box.end[d] <= global_shape[d], name, "box ", box,
               " is outside a tensor of shape ", global_shape);
  const std::vector<int64_t> gs = contiguous_strides(global_shape), extent = box.shape().dims();
  BoxIndex b;
  for (int64_t d = 0; d < box.ndim(); ++d) b.base += box.begin[d] * gs[d];
  const auto c = cpu::detail::collapse<1>(extent, {gs});  // a box spanning whole inner axes merges them
  b.idx = make_strided<1>(name, c.dims, c.strides);
  return b;
}

}  // namespace spsd::kernel::cuda::detail
