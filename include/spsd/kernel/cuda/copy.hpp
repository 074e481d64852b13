#pragma once
// Dtype-erased device copies for the boxing layer and the ops that move bytes: the device
// counterparts of kernel/box_copy.hpp (copy_box, fill_identity), the zero-divisor scan
// of integer div, and a plain byte copy (reshape). Defined in cuda/kernel/copy.cu.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::kernel::cuda {

// Copies the elements of region (global coordinates, inside both boxes) from a device buffer
// holding src_box to a device buffer holding dst_box (both dense row-major), elem_bytes per
// element: kernel::copy_box on the device. One memcpy when the region is one run of
// both buffers, else one strided-copy launch. An empty region does nothing; buffers must not overlap.
void copy_box(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region,
              int64_t elem_bytes, void* stream);

// n copies of reduce_identity<T>(op) for the T of dtype (kernel::fill_identity).
void fill_identity(void* dst, int64_t n, DType dtype, ReduceOp op, void* stream);

// The first index i < n with x[i] == 0, or -1 (the integer-division check, see
// op/elementwise.hpp's first_zero_divisor). Synchronizes the stream: it returns a host value.
int64_t first_zero(const void* x, int64_t n, DType dtype, void* stream);

// dst[0, bytes) = src[0, bytes), device to device (reshape's copy).
void copy_bytes(void* dst, const void* src, int64_t bytes, void* stream);

}  // namespace spsd::kernel::cuda
