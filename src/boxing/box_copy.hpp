#pragma once
// Moving boxes between row-major buffers: the pack and unpack of every boxing primitive.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/layout/split.hpp"

namespace spsd::detail {

// Copies the elements of region (global coordinates, inside both boxes) from a buffer holding
// src_box to a buffer holding dst_box, both in device's memory: on the host one memcpy per
// contiguous run, on a GPU one strided copy on the compute stream.
void copy_region(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, int64_t elem,
                 DeviceType device);

// The element offset of region inside box when region is one contiguous run of box's
// row-major buffer, else -1 (then the region must be packed).
int64_t contiguous_offset(const Box& region, const Box& box);

// n copies of the identity of op, in device's memory.
void fill_identity(void* dst, int64_t n, DType dtype, ReduceOp op, DeviceType device);

}  // namespace spsd::detail
