#pragma once
// Moving boxes between row-major buffers in one memory space, dtype-erased: the pack and unpack
// of every boxing primitive. On the host kernel::cpu::copy_dense_box (the one strided box copy,
// which copy_region shares), on a GPU kernel::cuda::copy_box on the rank's compute stream.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::kernel {

// Copies the elements of region (global coordinates, inside both boxes) from a buffer holding
// src_box to a buffer holding dst_box, elem bytes per element, both in device's memory.
void copy_box(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, int64_t elem,
              DeviceType device);

// The element offset of region inside box when region is one contiguous run of box's
// row-major buffer, else -1 (then the region must be packed).
int64_t contiguous_offset(const Box& region, const Box& box);

// n copies of the identity of op, in device's memory.
void fill_identity(void* dst, int64_t n, DType dtype, ReduceOp op, DeviceType device);

}  // namespace spsd::kernel
